//! The strict transform, case by case.

use serde_json::{Value, json};

use super::strict_parameters;

fn check(schema: Value, expected: Option<Value>) {
    assert_eq!(strict_parameters(&schema), expected, "{schema}");
}

#[test]
fn closes_objects_and_requires_everything() {
    check(
        json!({"type": "object", "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "format": "uint32", "minimum": 0},
            "units": {"type": ["string", "null"], "default": null}
        }, "required": ["city"]}),
        Some(json!({"type": "object", "additionalProperties": false,
            "properties": {
                "city": {"type": "string"},
                "days": {"type": ["integer", "null"], "minimum": 0},
                "units": {"type": ["string", "null"]}
            },
            "required": ["city", "days", "units"]})),
    );
    check(
        json!({"type": "object"}),
        Some(
            json!({"type": "object", "additionalProperties": false, "properties": {}, "required": []}),
        ),
    );
}

#[test]
fn falls_back_to_non_strict() {
    // An open map.
    check(
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
        None,
    );
    // Unsupported keywords.
    check(
        json!({"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}, "required": ["s"]}),
        None,
    );
    // An optional property without a type cannot be made nullable.
    check(
        json!({"type": "object", "properties": {"r": {"$ref": "#/definitions/X"}}, "definitions": {"X": {"type": "object"}}}),
        None,
    );
    // Not an object at the root.
    check(json!({"type": "string"}), None);
}

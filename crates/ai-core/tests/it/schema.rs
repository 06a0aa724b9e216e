//! `validate_tool_schema_p0` against what a JSON Schema validator reads: where the two read a
//! schema differently, a forbidden keyword could hide from the check.

use ai_core::validate_tool_schema_p0;
use serde_json::{Value, json};

/// The pointers of the check's violations, or none.
fn pointers(schema: &Value) -> Vec<String> {
    match validate_tool_schema_p0(schema) {
        Ok(()) => vec![],
        Err(violations) => violations.into_iter().map(|v| v.pointer).collect(),
    }
}

/// Draft-07 ignores a `$ref`'s siblings, so a root holding one is the schema it names, whatever
/// its own `type` says: a root `$ref` is refused.
#[test]
fn the_root_cannot_be_a_ref() {
    let schema = json!({"type": "object",
        "$ref": "#/definitions/S",
        "definitions": {"S": {"type": "string"}}});
    // What a validator makes of it: a string, not an object.
    let validator = jsonschema::draft7::new(&schema).unwrap();
    assert!(validator.is_valid(&json!("not an object")));
    assert_eq!(pointers(&schema), [""]);
    let errs = validate_tool_schema_p0(&json!({"type": "object", "$ref": "#"})).unwrap_err();
    assert_eq!(
        errs[0].to_string(),
        "(root): the root must be the object schema itself, not a `$ref`"
    );
}

/// Below the root, an `$id` changes what a `$ref` inside it names: its pointer is read from that
/// subschema, not from the root this check reads it from. So a pointer that leads somewhere
/// walked from the root could lead to a forbidden keyword from the subschema (here a single
/// `items` schema where the root has an array), and a validator follows it there. An `$id`
/// below the root is refused; at the root it changes nothing.
#[test]
fn an_id_below_the_root_is_refused() {
    let schema = json!({"type": "object",
    "properties": {
        "q": {"type": "array", "items": [{"type": "string"}]},
        "s": {"$id": "http://example.com/s.json",
            "type": "object",
            "properties": {
                "q": {"type": "array", "items": {"0": {"anyOf": [{"type": "integer"}]}}},
                "r": {"$ref": "#/properties/q/items/0"}
            }}}});
    // What a validator makes of it: `r` is held to the `anyOf` the walk never saw.
    let validator = jsonschema::draft7::new(&schema).unwrap();
    assert!(validator.is_valid(&json!({"s": {"r": 1}})));
    assert!(!validator.is_valid(&json!({"s": {"r": "x"}})));
    assert_eq!(pointers(&schema), ["/properties/s"]);
    let rooted = json!({"$id": "http://example.com/root.json", "type": "object",
        "properties": {"$id": {"type": "string"}}});
    assert_eq!(pointers(&rooted), Vec::<String>::new());
}

/// Draft-04 spells `$id` as `id`: a schema that declares draft-04 is read by its validators with
/// `id` as the base of the `$ref`s inside it, so the same hiding place opens there. An `id` below
/// the root is refused like an `$id` (in a later draft it means nothing, and no derived schema
/// writes one); a property named `id` is not a keyword and still loads.
#[test]
fn a_draft_04_id_below_the_root_is_refused() {
    let schema = json!({"type": "object",
    "$schema": "http://json-schema.org/draft-04/schema#",
    "properties": {
        "q": {"type": "array", "items": [{"type": "string"}]},
        "s": {"id": "http://example.com/s.json",
            "type": "object",
            "properties": {
                "q": {"type": "array", "items": {"0": {"anyOf": [{"type": "integer"}]}}},
                "r": {"$ref": "#/properties/q/items/0"}
            }}}});
    // What a validator makes of it: `r` is held to the `anyOf` the walk never saw.
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&json!({"s": {"r": 1}})));
    assert!(!validator.is_valid(&json!({"s": {"r": "x"}})));
    assert_eq!(pointers(&schema), ["/properties/s"]);
    let errs = validate_tool_schema_p0(&schema).unwrap_err();
    assert_eq!(
        errs[0].to_string(),
        "/properties/s: `id` (draft-04's `$id`) is supported only at the root"
    );
    let named_id = json!({"id": "http://example.com/root.json", "type": "object",
        "properties": {"id": {"type": "string"}},
        "required": ["id"]});
    assert_eq!(pointers(&named_id), Vec::<String>::new());
}

/// The subschema keywords of draft 2019-09 and 2020-12 are walked like draft-07's (`$defs` and
/// `dependentSchemas` already were): a schema that declares a newer draft is read with them by
/// its validators and providers, so a forbidden keyword cannot hide inside one. Their dynamic
/// references, which name an anchor rather than a place, are refused.
#[test]
fn newer_drafts_subschema_keywords_are_walked() {
    let schema = json!({"type": "object",
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "properties": {
        "a": {"type": "array", "prefixItems": [{"type": "string"}, {"anyOf": [{"type": "integer"}]}]},
        "b": {"type": "array", "unevaluatedItems": {"oneOf": [{"type": "integer"}]}},
        "c": {"type": "object", "unevaluatedProperties": {"not": {}}},
        "d": {"type": "string", "contentMediaType": "application/json",
            "contentSchema": {"anyOf": [{"type": "object"}]}},
        "e": {"$ref": "#/properties/a/prefixItems/0"},
        "f": {"$dynamicRef": "#meta"},
        "g": {"$recursiveRef": "#"}
    }});
    // What a 2020-12 validator makes of it: `prefixItems` holds the array's first items.
    let mut readable = schema.clone();
    for name in ["f", "g"] {
        readable["properties"].as_object_mut().unwrap().remove(name);
    }
    let validator = jsonschema::validator_for(&readable).unwrap();
    assert!(!validator.is_valid(&json!({"a": [1]})));
    assert_eq!(
        pointers(&schema),
        [
            "/properties/a/prefixItems/1",
            "/properties/b/unevaluatedItems",
            "/properties/c/unevaluatedProperties",
            "/properties/d/contentSchema",
            "/properties/f",
            "/properties/g",
        ]
    );
}

//! The subset check, case by case.

use serde_json::{Value, json};

use super::validate_tool_schema_p0;

/// Runs the check and returns the violation pointers, or an empty list.
fn check(schema: Value, expected: &[&str]) {
    let pointers: Vec<String> = match validate_tool_schema_p0(&schema) {
        Ok(()) => vec![],
        Err(v) => v.into_iter().map(|v| v.pointer).collect(),
    };
    assert_eq!(pointers, expected, "{schema}");
}

#[test]
fn accepts_the_subset() {
    check(
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "inner": {"$ref": "#/definitions/Inner"},
                "oneOf": {"type": "string"}
            },
            "definitions": {"Inner": {"type": "object", "additionalProperties": false}},
            "required": ["name"]
        }),
        &[],
    );
}

#[test]
fn rejects_each_forbidden_keyword_where_it_stands() {
    for keyword in ["oneOf", "anyOf", "allOf"] {
        check(
            json!({"type": "object", "properties": {"a": {keyword: [{"type": "string"}]}}}),
            &["/properties/a"],
        );
    }
    check(json!({"type": "object", "not": {}}), &[""]);
    check(
        json!({"type": "object", "if": {}, "then": {}, "else": {}}),
        &["", "", ""],
    );
    check(
        json!({"type": "object", "patternProperties": {"^x": {}}}),
        &[""],
    );
    check(
        json!({"type": "object", "properties": {"l": {"type": "array", "items": {"anyOf": []}}}}),
        &["/properties/l/items"],
    );
    check(
        json!({"type": "object", "$defs": {"a/b": {"oneOf": []}}}),
        &["/$defs/a~1b"],
    );
    // draft-07 `dependencies`: a schema entry is walked, a list of names holds none.
    check(
        json!({"type": "object", "dependencies": {"a": {"anyOf": []}, "b": ["c"]}}),
        &["/dependencies/a"],
    );
}

#[test]
fn rejects_non_local_refs() {
    check(
        json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}),
        &["/properties/a"],
    );
    check(
        json!({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}}),
        &["/properties/a"],
    );
}

/// A local `$ref` may only lead where the check looked: the root, a definition, a subschema.
#[test]
fn refs_must_point_where_the_check_looked() {
    check(
        json!({"type": "object",
            "properties": {
                "a": {"$ref": "#"},
                "b": {"$ref": "#/definitions/B"},
                "c": {"$ref": "#/properties/b"},
                "d": {"$ref": "#/properties/e/items/0"},
                "e": {"type": "array", "items": [{"type": "string"}]}
            },
            "definitions": {"B": {"type": "string"}}}),
        &[],
    );
    check(
        json!({"type": "object",
            "properties": {
                "a": {"$ref": "#/x"},
                "b": {"$ref": "#/definitions"},
                // A single `items` schema has no index: "0" is an unknown keyword inside it.
                "c": {"type": "array", "items": {"type": "string", "0": {"anyOf": []}}},
                "d": {"$ref": "#/properties/c/items/0"},
                "e": {"$ref": "#/properties/missing"}
            },
            "x": {"anyOf": [{"type": "string"}]}}),
        &[
            "/properties/a",
            "/properties/b",
            "/properties/d",
            "/properties/e",
        ],
    );
}

#[test]
fn root_must_be_an_object_schema() {
    check(json!({"type": "string"}), &[""]);
    check(json!(true), &[""]);
}

/// A violation at the root names the root, not an empty place (`: reason`).
#[test]
fn a_violation_at_the_root_says_so() {
    let errs = validate_tool_schema_p0(&json!({"type": "object", "oneOf": []})).unwrap_err();
    assert_eq!(errs[0].to_string(), "(root): `oneOf` is not supported");
    let errs = validate_tool_schema_p0(&json!({"type": "string"})).unwrap_err();
    assert_eq!(
        errs[0].to_string(),
        "(root): the root must be a schema with \"type\": \"object\""
    );
    let errs =
        validate_tool_schema_p0(&json!({"type": "object", "properties": {"a": {"not": {}}}}))
            .unwrap_err();
    assert_eq!(errs[0].to_string(), "/properties/a: `not` is not supported");
}

/// A `$ref`'s fragment is percent-decoded before it is read as a JSON pointer (RFC 6901, 6), as
/// validators read it: an escaped `/` is a step, so it cannot lead past the check.
#[test]
fn refs_are_read_percent_decoded() {
    check(
        json!({"type": "object",
            "properties": {"p": {"$ref": "#/definitions/x%2Fanyhow"}},
            "definitions": {"x%2Fanyhow": {}, "x": {"anyhow": {"anyOf": [{"type": "integer"}]}}}}),
        &["/properties/p"],
    );
    check(
        json!({"type": "object",
            "properties": {"p": {"$ref": "#/definitions/a%20b"}, "q": {"$ref": "#/%70roperties/p"}},
            "definitions": {"a b": {"type": "integer"}}}),
        &[],
    );
    // A malformed escape names nothing a validator can find.
    check(
        json!({"type": "object",
            "properties": {"p": {"$ref": "#/definitions/a%2"}, "q": {"$ref": "#/definitions/a%+f"}},
            "definitions": {"a%2": {}, "a%+f": {}, "a\u{f}": {}}}),
        &["/properties/p", "/properties/q"],
    );
}

/// A fragment that is not a JSON pointer (`#foo`, a plain name an `$id` or `$anchor` gives a
/// subschema anywhere) names no place this check looked: it is refused, not read as the root.
#[test]
fn a_ref_by_plain_name_is_refused() {
    check(
        json!({"type": "object",
            "properties": {"p": {"$ref": "#foo"}, "q": {"$ref": "#x/definitions/D"}},
            "definitions": {"D": {"type": "string"}},
            "x": {"$id": "#foo", "anyOf": [{"type": "integer"}, {"type": "boolean"}]}}),
        &["/properties/p", "/properties/q"],
    );
    // The root itself, by an empty fragment, still is.
    check(
        json!({"type": "object", "properties": {"p": {"$ref": "#"}}}),
        &[],
    );
}

/// An array index in a `$ref`'s pointer is read as RFC 6901 (section 4) writes one: `0`, or
/// digits without a leading zero. `+0`, `00`, `01`, ` 0` or `-` name no element, so such a `$ref`
/// points where the check did not look, and is refused.
#[test]
fn a_ref_array_index_is_read_as_rfc_6901_writes_it() {
    let schema = |index: &str| {
        json!({"type": "object",
        "properties": {
            "a": {"$ref": format!("#/properties/e/items/{index}")},
            "e": {"type": "array", "items": [
                {"type": "string"}, {"type": "string"}, {"type": "string"},
                {"type": "string"}, {"type": "string"}, {"type": "string"},
                {"type": "string"}, {"type": "string"}, {"type": "string"},
                {"type": "string"}, {"type": "string"}
            ]}
        }})
    };
    for index in ["0", "1", "10"] {
        check(schema(index), &[]);
    }
    for index in [
        "+0", "00", "01", "+1", "%2B0", "-", "-0", " 0", "0 ", "1e0", "",
    ] {
        check(schema(index), &["/properties/a"]);
    }
}

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

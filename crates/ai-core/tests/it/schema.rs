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

//! Redaction and schema path checks as data.

use serde_json::{Value, json};

use super::{Allowlist, output_value, schema_has_path};

fn check(allow: &[&str], input: Value, expected: Value) {
    let mut value = input;
    Allowlist::new(allow.iter().copied()).apply(&mut value);
    assert_eq!(value, expected, "{allow:?}");
}

#[test]
fn strips_what_is_not_allowlisted() {
    check(&["a"], json!({"a": 1, "b": 2}), json!({"a": 1}));
    check(
        &["a"],
        json!({"a": {"x": 1, "secret": 2}}),
        json!({"a": {"x": 1, "secret": 2}}),
    );
    check(
        &["a.x"],
        json!({"a": {"x": 1, "secret": 2}, "b": 3}),
        json!({"a": {"x": 1}}),
    );
    check(
        &["items.name"],
        json!({"items": [{"name": "n1", "token": "t"}, {"name": "n2"}], "total": 2}),
        json!({"items": [{"name": "n1"}, {"name": "n2"}]}),
    );
    check(&["a.x"], json!({"a": "scalar"}), json!({}));
    // An absent struct is told as absent, and the other elements keep their places.
    check(&["a.x"], json!({"a": null}), json!({"a": null}));
    check(
        &["items.name"],
        json!({"items": [null, {"name": "n1", "token": "t"}]}),
        json!({"items": [null, {"name": "n1"}]}),
    );
    check(&[], json!({"a": 1}), json!({}));
}

#[test]
fn schema_paths_follow_refs_and_items() {
    let schema = json!({
        "type": "object",
        "properties": {
            "entries": {"type": "array", "items": {"$ref": "#/definitions/Entry"}},
            "count": {"type": "integer"}
        },
        "definitions": {"Entry": {"type": "object", "properties": {"path": {"type": "string"}}}}
    });
    assert!(schema_has_path(&schema, "count"));
    assert!(schema_has_path(&schema, "entries"));
    assert!(schema_has_path(&schema, "entries.path"));
    assert!(!schema_has_path(&schema, "entries.size"));
    assert!(!schema_has_path(&schema, "missing"));
    assert!(!schema_has_path(&schema, "count.x"));
}

#[derive(serde::Serialize)]
struct Item {
    id: u8,
    #[serde(flatten)]
    extra: std::collections::BTreeMap<String, f64>,
}

#[test]
fn an_output_that_repeats_a_key_at_any_depth_is_refused() {
    let items = |key: &str| {
        vec![Item {
            id: 1,
            extra: [(key.to_owned(), 2.5)].into(),
        }]
    };
    assert_eq!(output_value(&items("x")), Ok(json!([{"id": 1, "x": 2.5}])));
    assert_eq!(
        output_value(&items("id")),
        Err("the tool output repeats a field name, so it cannot be redacted")
    );
    let deep = (0..200).fold(json!(1), |inner, _| json!([inner]));
    assert_eq!(
        output_value(&deep),
        Err("the tool output is nested more than 128 levels deep")
    );
}

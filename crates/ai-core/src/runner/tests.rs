//! Unit tests of the runner's private helpers; the pipeline itself is tested through the public
//! API in `tests/it/runner.rs`.

use serde_json::json;

use super::budget::json_len;

#[test]
fn json_len_counts_compact_bytes() {
    for value in [
        json!(null),
        json!({"a": [1, 2, {"b": "ü"}]}),
        json!("quote \" and \\ backslash"),
    ] {
        assert_eq!(json_len(&value), value.to_string().len());
    }
}

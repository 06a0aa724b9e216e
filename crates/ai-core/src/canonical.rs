//! Canonical JSON (sorted keys, no insignificant whitespace) and SHA-256, for hashes that must be
//! the same bytes on every run and every machine; and the compact JSON length the result budget
//! is measured in.

use std::io;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The length in bytes of `value` serialized as compact JSON, counted without building the text.
///
/// This is the size the runner holds a redacted result to against `max_result_bytes`.
///
/// ```
/// let v = serde_json::json!({"city": "Zürich", "days": [1, 2]});
/// assert_eq!(ai_core::compact_json_len(&v), v.to_string().len());
/// ```
pub fn compact_json_len(value: &Value) -> usize {
    struct Counter(usize);
    impl io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a `Value` to an infallible writer cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// The deepest a tool call's arguments or a tool's result may nest (arrays and objects): the
/// runner refuses deeper ones. Events and records hold these values a few levels further in,
/// and every JSON reader the run log is read back with (serde_json's among them) stops at 128
/// levels: a value the runner accepts can always be stored and read back.
pub const MAX_JSON_DEPTH: usize = 64;

/// Whether `value` nests arrays and objects more than `limit` levels deep (a scalar is level 0,
/// `[]` level 1). The walk goes no deeper than `limit + 1` levels, so any value can be checked.
///
/// ```
/// use serde_json::json;
/// assert!(!ai_core::nests_deeper_than(&json!({"a": [1]}), 2));
/// assert!(ai_core::nests_deeper_than(&json!({"a": [[]]}), 2));
/// assert!(!ai_core::nests_deeper_than(&json!("a scalar"), 0));
/// ```
pub fn nests_deeper_than(value: &Value, limit: usize) -> bool {
    // A scalar child (most of them) ends its branch here, without a call.
    let deeper = |child: &Value| {
        matches!(child, Value::Array(_) | Value::Object(_)) && nests_deeper_than(child, limit - 1)
    };
    match value {
        Value::Array(items) => limit == 0 || items.iter().any(deeper),
        Value::Object(map) => limit == 0 || map.values().any(deeper),
        _ => false,
    }
}

/// Whether a JSON text of `len` bytes can nest more than `limit` levels at all: every level
/// takes an opening and a closing bracket, so a text shorter than `2 * (limit + 1)` bytes
/// cannot, and parsing it needs no walk to find out.
pub(crate) fn text_may_nest_deeper_than(len: usize, limit: usize) -> bool {
    len >= 2 * (limit + 1)
}

/// Writes `value` with object keys sorted by their UTF-8 bytes and no whitespace.
///
/// The order does not depend on how the map was built or on serde_json's `preserve_order`.
/// Values that compare equal are written the same: `-0.0` is written `0.0`.
///
/// ```
/// let v = serde_json::json!({"b": 1, "a": [true, {"d": null, "c": "x"}]});
/// assert_eq!(ai_core::canonical_json(&v), r#"{"a":[true,{"c":"x","d":null}],"b":1}"#);
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, child)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                write(child, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, child) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(child, out);
            }
            out.push(']');
        }
        // `-0.0` equals `0.0`: one value, one encoding.
        Value::Number(n) if n.is_f64() && n.as_f64() == Some(0.0) => out.push_str("0.0"),
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Lower-case hex SHA-256 of `bytes`.
///
/// ```
/// assert_eq!(
///     ai_core::sha256_hex(b""),
///     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/// );
/// ```
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest.iter() {
        hex.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    hex
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{
        MAX_JSON_DEPTH, canonical_json, compact_json_len, nests_deeper_than,
        text_may_nest_deeper_than,
    };

    /// `-0.0` equals `0.0` (serde_json compares them as numbers), so both are written the same.
    #[test]
    fn equal_values_have_one_encoding() {
        let negative: serde_json::Value = serde_json::from_str(r#"{"x": -0}"#).unwrap();
        let positive = json!({"x": 0.0});
        assert_eq!(negative, positive);
        assert_eq!(canonical_json(&negative), canonical_json(&positive));
        assert_eq!(canonical_json(&positive), r#"{"x":0.0}"#);
        // The integer 0 is another value, and keeps its own form.
        assert_eq!(canonical_json(&json!([0, -0.5])), "[0,-0.5]");
    }

    #[test]
    fn nesting_depth_counts_arrays_and_objects() {
        let nested = |levels: usize| {
            let text = format!("{}{}", "[".repeat(levels), "]".repeat(levels));
            serde_json::from_str::<serde_json::Value>(&text).unwrap()
        };
        assert!(!nests_deeper_than(&serde_json::json!("x"), 0));
        assert!(!nests_deeper_than(&nested(1), 1));
        assert!(nests_deeper_than(&nested(2), 1));
        assert!(!nests_deeper_than(&nested(64), MAX_JSON_DEPTH));
        assert!(nests_deeper_than(&nested(65), MAX_JSON_DEPTH));
        assert!(nests_deeper_than(
            &serde_json::json!({"a": 1, "b": {"c": [1]}}),
            2
        ));
        assert!(!nests_deeper_than(
            &serde_json::json!({"a": 1, "b": {"c": [1]}}),
            3
        ));
    }

    /// The shortest text that nests past a limit is exactly as long as the bound says, and any
    /// text the bound lets through without a walk is within the limit.
    #[test]
    fn a_text_too_short_to_nest_past_the_limit_does_not() {
        for limit in [0, 1, 2, 5, MAX_JSON_DEPTH] {
            let levels = limit + 1;
            let shortest = format!("{}{}", "[".repeat(levels), "]".repeat(levels));
            let value: serde_json::Value = serde_json::from_str(&shortest).unwrap();
            assert!(nests_deeper_than(&value, limit));
            assert!(text_may_nest_deeper_than(shortest.len(), limit));
            assert!(!text_may_nest_deeper_than(shortest.len() - 1, limit));
            // One byte short of it, the deepest text is within the limit.
            let within = format!("{}0{}", "[".repeat(limit), "]".repeat(limit));
            assert!(within.len() < shortest.len());
            let value: serde_json::Value = serde_json::from_str(&within).unwrap();
            assert!(!nests_deeper_than(&value, limit));
        }
    }

    #[test]
    fn compact_json_len_counts_the_bytes_of_the_compact_text() {
        for value in [
            json!(null),
            json!({"a": [1, 2, {"b": "ü"}]}),
            json!("quote \" and \\ backslash"),
        ] {
            assert_eq!(compact_json_len(&value), value.to_string().len());
        }
    }
}

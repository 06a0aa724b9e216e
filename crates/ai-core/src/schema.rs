//! The JSON Schema subset tool inputs may use, checked by walking the schema as plain JSON, and
//! how descriptions join where a definition is copied in place of a `$ref`.

use serde_json::{Map, Value};

/// Keywords outside the subset: they make schemas that providers' strict modes and small models
/// handle badly.
const FORBIDDEN: &[&str] = &[
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    // References to an anchor (draft 2019-09, 2020-12), not to a place this check can follow.
    "$recursiveRef",
    "$dynamicRef",
];

/// Keywords whose value maps names to subschemas (a `dependencies` entry may also be a list of
/// property names, which holds no schema).
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "definitions",
    "$defs",
    "dependencies",
    "dependentSchemas",
];
/// Keywords whose value is one subschema (or, for `items` and `prefixItems`, possibly an array
/// of them). Draft-07's, and those of drafts 2019-09 and 2020-12, which a schema declaring one
/// is read with.
const SCHEMA_SLOTS: &[&str] = &[
    "items",
    "additionalProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "prefixItems",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];

/// One place where a schema leaves the supported subset. Displayed as `pointer: reason`, the
/// root's empty pointer as `(root)`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", if pointer.is_empty() { "(root)" } else { pointer })]
pub struct SchemaViolation {
    /// JSON pointer to the offending schema (`""` is the root).
    pub pointer: String,
    /// What is not allowed there.
    pub reason: String,
}

/// Checks that `schema` stays within the P0 subset: an object schema at the root (itself, not a
/// `$ref`, whose siblings draft-07 ignores), and nowhere `oneOf`, `anyOf`, `allOf`, `not`,
/// `if`/`then`/`else`, `patternProperties`, `$recursiveRef` or `$dynamicRef`, an `$id` (or
/// draft-04's `id`) below the root (it would change what the `$ref`s inside it name), or a
/// `$ref` that is not a local JSON pointer (`#` or `#/...`: a plain name such as `#foo` is
/// refused) or points where this check does not look (a `$ref` may name the root, a definition,
/// or any subschema reached through the subschema keywords of draft-07, 2019-09 and 2020-12, so
/// everything it can lead to has been checked). Returns every violation, not only the first.
///
/// ```
/// use serde_json::json;
/// use ai_core::validate_tool_schema_p0;
///
/// let ok = json!({"type": "object", "properties": {"not": {"type": "string"}}});
/// assert!(validate_tool_schema_p0(&ok).is_ok());
///
/// let bad = json!({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}]}}});
/// let errs = validate_tool_schema_p0(&bad).unwrap_err();
/// assert_eq!(errs[0].pointer, "/properties/x");
/// ```
pub fn validate_tool_schema_p0(schema: &Value) -> Result<(), Vec<SchemaViolation>> {
    let mut violations = Vec::new();
    match schema.as_object() {
        Some(root) if root.get("type") == Some(&Value::from("object")) => {
            // Draft-07 ignores a `$ref`'s siblings: a root holding one is what it names, whatever
            // its `type` says.
            if root.contains_key("$ref") {
                violations.push(SchemaViolation {
                    pointer: String::new(),
                    reason: "the root must be the object schema itself, not a `$ref`".into(),
                });
            }
            walk(schema, root, String::new(), &mut violations);
        }
        _ => violations.push(SchemaViolation {
            pointer: String::new(),
            reason: "the root must be a schema with \"type\": \"object\"".into(),
        }),
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

/// The one description of a schema copied in place of a chain of `$ref`s (a field's doc comment
/// beside its `$ref`, a newtype's beside the next, the definition's own), from the descriptions
/// met along it, the nearest first: each said once, in that order, one per line; `None` when
/// there is none. ai-tools joins a newtype's doc comments with its definition's so, and
/// wire-openai's strict form a described `$ref`'s with the definition it inlines, so a model
/// reads the same words wherever a definition is copied.
///
/// ```
/// use ai_core::join_descriptions;
///
/// let chain = ["Where to stop.", "A point on the map.", "Where to stop."];
/// let joined = join_descriptions(chain).unwrap();
/// assert_eq!(joined, "Where to stop.\nA point on the map.");
/// assert_eq!(join_descriptions([]), None);
/// ```
pub fn join_descriptions<'a>(descriptions: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut said: Vec<&str> = Vec::new();
    for description in descriptions {
        if !said.contains(&description) {
            said.push(description);
        }
    }
    (!said.is_empty()).then(|| said.join("\n"))
}

/// Checks `schema` (at `pointer` in `root`) and every subschema below it.
fn walk(
    root: &Value,
    schema: &Map<String, Value>,
    pointer: String,
    out: &mut Vec<SchemaViolation>,
) {
    for keyword in FORBIDDEN {
        if schema.contains_key(*keyword) {
            out.push(SchemaViolation {
                pointer: pointer.clone(),
                reason: format!("`{keyword}` is not supported"),
            });
        }
    }
    // Below the root an `$id` (draft-04's `id`, which a schema declaring that draft is read
    // with) is a new base for the `$ref`s inside it, whose pointers would be read from there,
    // not from the root [`walked`] reads them from.
    if !pointer.is_empty() {
        for (keyword, reason) in [
            ("$id", "`$id` is supported only at the root"),
            (
                "id",
                "`id` (draft-04's `$id`) is supported only at the root",
            ),
        ] {
            if schema.contains_key(keyword) {
                out.push(SchemaViolation {
                    pointer: pointer.clone(),
                    reason: reason.into(),
                });
            }
        }
    }
    if let Some(reference) = schema.get("$ref") {
        let reason = match reference.as_str().and_then(|r| r.strip_prefix('#')) {
            None => Some("only local `$ref`s (\"#/...\") are supported"),
            Some(target) if !walked(root, target) => {
                Some("a `$ref` must point at the root, a definition or a subschema")
            }
            Some(_) => None,
        };
        if let Some(reason) = reason {
            out.push(SchemaViolation {
                pointer: pointer.clone(),
                reason: reason.into(),
            });
        }
    }
    for keyword in SCHEMA_MAPS {
        if let Some(Value::Object(children)) = schema.get(*keyword) {
            for (name, child) in children {
                let at = format!("{pointer}/{keyword}/{}", escape(name));
                visit(root, child, at, out);
            }
        }
    }
    for keyword in SCHEMA_SLOTS {
        match schema.get(*keyword) {
            Some(Value::Array(items)) => {
                for (i, child) in items.iter().enumerate() {
                    visit(root, child, format!("{pointer}/{keyword}/{i}"), out);
                }
            }
            Some(child) => visit(root, child, format!("{pointer}/{keyword}"), out),
            None => {}
        }
    }
}

/// Whether `fragment` (a `$ref`'s JSON pointer into `root`, still percent-encoded) leads, only
/// through keywords [`walk`] visits, to a schema (an object or a boolean): then what it names was
/// checked. The fragment is percent-decoded first, as validators read it (RFC 6901, section 6),
/// so an escaped `/` is a step here too; a malformed escape leads nowhere, and so does an array
/// index RFC 6901 does not write (`+0`, `00`: see [`array_index`]). So does a fragment
/// that is not a pointer (a plain name such as `#foo`, which an `$id` or `$anchor` may give any
/// subschema, walked or not).
fn walked(root: &Value, fragment: &str) -> bool {
    if !(fragment.is_empty() || fragment.starts_with('/')) {
        return false;
    }
    let Some(pointer) = percent_decode(fragment) else {
        return false;
    };
    let mut at = root;
    let mut segments = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"));
    while let Some(keyword) = segments.next() {
        let Some(value) = at.get(&keyword) else {
            return false;
        };
        let next = if SCHEMA_MAPS.contains(&keyword.as_str()) {
            segments.next().and_then(|name| value.get(&name))
        } else if SCHEMA_SLOTS.contains(&keyword.as_str()) {
            match value {
                // `items` (and `additionalItems`, `prefixItems`) may hold an array of schemas.
                Value::Array(items) => segments
                    .next()
                    .and_then(|i| array_index(&i))
                    .and_then(|i| items.get(i)),
                single => Some(single),
            }
        } else {
            None
        };
        let Some(next) = next else {
            return false;
        };
        at = next;
    }
    at.is_object() || at.is_boolean()
}

/// A JSON pointer's array index as RFC 6901 (section 4) writes one: `0`, or digits with no
/// leading zero. Anything else (`+0`, `00`, `-`) names no element.
fn array_index(token: &str) -> Option<usize> {
    let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

/// `text` with its `%XX` escapes decoded; `None` when an escape is not two hex digits or the
/// bytes are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let [high, low, ..] = *tail else {
                return None;
            };
            let digit = |b: u8| char::from(b).to_digit(16);
            let value = digit(high)? * 16 + digit(low)?;
            bytes.push(u8::try_from(value).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

fn visit(root: &Value, child: &Value, pointer: String, out: &mut Vec<SchemaViolation>) {
    // `true`/`false` are valid schemas with nothing inside.
    if let Value::Object(map) = child {
        walk(root, map, pointer, out);
    }
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests;

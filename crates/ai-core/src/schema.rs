//! The JSON Schema subset tool inputs may use, checked by walking the schema as plain JSON.

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
/// Keywords whose value is one subschema (or, for `items`, possibly an array of them).
const SCHEMA_SLOTS: &[&str] = &[
    "items",
    "additionalProperties",
    "additionalItems",
    "contains",
    "propertyNames",
];

/// One place where a schema leaves the supported subset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {reason}")]
pub struct SchemaViolation {
    /// JSON pointer to the offending schema (`""` is the root).
    pub pointer: String,
    /// What is not allowed there.
    pub reason: String,
}

/// Checks that `schema` stays within the P0 subset: an object schema at the root, and nowhere
/// `oneOf`, `anyOf`, `allOf`, `not`, `if`/`then`/`else`, `patternProperties`, or a `$ref` that is
/// not local (`#/...`) or points where this check does not look (a `$ref` may name the root, a
/// definition, or any subschema reached through the keywords above, so everything it can lead
/// to has been checked). Returns every violation, not only the first.
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
            walk(root, String::new(), &mut violations);
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

fn walk(schema: &Map<String, Value>, pointer: String, out: &mut Vec<SchemaViolation>) {
    for keyword in FORBIDDEN {
        if schema.contains_key(*keyword) {
            out.push(SchemaViolation {
                pointer: pointer.clone(),
                reason: format!("`{keyword}` is not supported"),
            });
        }
    }
    if let Some(reference) = schema.get("$ref") {
        let reason = match reference.as_str().and_then(|r| r.strip_prefix('#')) {
            None => Some("only local `$ref`s (\"#/...\") are supported"),
            Some(target) if !walked(target) => {
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
                visit(child, at, out);
            }
        }
    }
    for keyword in SCHEMA_SLOTS {
        match schema.get(*keyword) {
            Some(Value::Array(items)) => {
                for (i, child) in items.iter().enumerate() {
                    visit(child, format!("{pointer}/{keyword}/{i}"), out);
                }
            }
            Some(child) => visit(child, format!("{pointer}/{keyword}"), out),
            None => {}
        }
    }
}

/// Whether `pointer` (a JSON pointer from the root) leads only through keywords [`walk`] visits,
/// so that the schema it names was checked.
fn walked(pointer: &str) -> bool {
    let mut segments = pointer.split('/').skip(1).peekable();
    while let Some(keyword) = segments.next() {
        if SCHEMA_MAPS.contains(&keyword) {
            // The name of an entry.
            if segments.next().is_none() {
                return false;
            }
        } else if SCHEMA_SLOTS.contains(&keyword) {
            // `items` (and `additionalItems`) may hold an array of schemas.
            segments.next_if(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
        } else {
            return false;
        }
    }
    true
}

fn visit(child: &Value, pointer: String, out: &mut Vec<SchemaViolation>) {
    // `true`/`false` are valid schemas with nothing inside.
    if let Value::Object(map) = child {
        walk(map, pointer, out);
    }
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests;

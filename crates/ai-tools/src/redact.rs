//! Allowlist redaction: only named output paths survive.

use std::collections::BTreeMap;

use serde_json::Value;

/// The allowlist as a tree of path segments. A node that ends an allowlisted path keeps its whole
/// subtree; other nodes keep only their allowlisted children.
#[derive(Debug, Default)]
pub(crate) struct Allowlist {
    keep_all: bool,
    children: BTreeMap<String, Allowlist>,
}

impl Allowlist {
    /// Builds the tree from dotted paths (`"entries.name"`).
    pub(crate) fn new<'a>(paths: impl IntoIterator<Item = &'a str>) -> Self {
        let mut root = Self::default();
        for path in paths {
            let mut node = &mut root;
            for segment in path.split('.') {
                node = node.children.entry(segment.to_owned()).or_default();
            }
            node.keep_all = true;
        }
        root
    }

    /// Strips everything from `value` that no allowlisted path reaches, in place. Arrays are
    /// walked element by element with the same allowlist. A `null` where the allowlist expects
    /// fields below it stays (it holds nothing, and an `Option` that is `None` says so); any
    /// other scalar there is removed.
    pub(crate) fn apply(&self, value: &mut Value) -> bool {
        if self.keep_all {
            return true;
        }
        match value {
            Value::Object(map) => {
                map.retain(|key, child| {
                    self.children
                        .get(key)
                        .is_some_and(|allow| allow.apply(child))
                });
                true
            }
            Value::Array(items) => {
                items.retain_mut(|item| self.apply(item));
                true
            }
            Value::Null => true,
            _ => false,
        }
    }
}

/// Whether the dotted `path` names a property of the output `schema` (following local `$ref`s
/// and array `items`).
pub(crate) fn schema_has_path(schema: &Value, path: &str) -> bool {
    let mut node = schema;
    for segment in path.split('.') {
        let Some(object) = resolve(schema, node) else {
            return false;
        };
        match object.get("properties").and_then(|p| p.get(segment)) {
            Some(child) => node = child,
            None => return false,
        }
    }
    true
}

/// Follows `$ref`s and array `items` down to the schema that has the properties.
fn resolve<'a>(root: &'a Value, mut node: &'a Value) -> Option<&'a Value> {
    // Bounded: a cyclic `$ref` chain cannot loop forever.
    for _ in 0..32 {
        if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            node = root.pointer(reference.strip_prefix('#')?)?;
        } else if let Some(items) = node.get("items") {
            node = items;
        } else {
            return Some(node);
        }
    }
    None
}

#[cfg(test)]
mod tests;

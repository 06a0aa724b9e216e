//! Allowlist redaction: only named output paths survive.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

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

/// `output` as a JSON value, or why it cannot be one: it does not serialize, an object in it
/// repeats a key, or it is nested deeper than serde_json reads (128 levels).
///
/// `serde_json::to_value` keeps the last of two equal keys, and serde writes two when a
/// `#[serde(flatten)]`ed map or struct holds a key its parent has: the flattened value would
/// then stand in for the parent's field, under that field's allowlisted name.
pub(crate) fn output_value<T: Serialize>(output: &T) -> Result<Value, &'static str> {
    let text =
        serde_json::to_string(output).map_err(|_| "the tool output could not be serialized")?;
    match serde_json::from_str::<UniqueKeys>(&text) {
        Ok(UniqueKeys(value)) => Ok(value),
        Err(e) if e.is_data() => {
            Err("the tool output repeats a field name, so it cannot be redacted")
        }
        Err(_) => Err("the tool output is nested more than 128 levels deep"),
    }
}

/// A JSON value whose objects were read with no key twice.
struct UniqueKeys(Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeysVisitor).map(Self)
    }
}

struct UniqueKeysVisitor;

impl<'de> Visitor<'de> for UniqueKeysVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value whose objects have no key twice")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(items.into())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some((key, UniqueKeys(value))) = map.next_entry::<String, UniqueKeys>()? {
            if object.insert(key, value).is_some() {
                return Err(de::Error::custom("an object repeats a key"));
            }
        }
        Ok(object.into())
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

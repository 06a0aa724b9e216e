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

/// Why a typed value cannot be passed on as the JSON value it serializes to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unrepresentable {
    /// Its `Serialize` failed.
    Unserializable,
    /// An object in it repeats a key.
    RepeatedKey,
    /// It is nested deeper than serde_json reads (128 levels).
    TooDeep,
    /// An integer in it, at this JSON pointer, is beyond what 64 bits hold (an `i128` or
    /// `u128`): the workspace's serde_json (without `arbitrary_precision`) would read it as a
    /// float, a different number.
    WideInteger(String),
}

/// `output` as a JSON value, or why it cannot be one exactly: it does not serialize, an object
/// in it repeats a key, it is nested deeper than serde_json reads (128 levels), or it holds an
/// integer beyond 64 bits.
///
/// `serde_json::to_value` keeps the last of two equal keys, and serde writes two when a
/// `#[serde(flatten)]`ed map or struct holds a key its parent has: the flattened value would
/// then stand in for the parent's field, under that field's allowlisted name.
///
/// serde_json's `Value` holds an `i64`, a `u64` or an `f64`: an `i128` or `u128` written past
/// 64 bits would be read back as the nearest `f64`, and shown as a number the tool never
/// returned. Such an integer is refused with its place instead.
pub(crate) fn exact_value<T: Serialize>(output: &T) -> Result<Value, Unrepresentable> {
    let text = serde_json::to_string(output).map_err(|_| Unrepresentable::Unserializable)?;
    let value = match serde_json::from_str::<UniqueKeys>(&text) {
        Ok(UniqueKeys(value)) => value,
        Err(e) if e.is_data() => return Err(Unrepresentable::RepeatedKey),
        Err(_) => return Err(Unrepresentable::TooDeep),
    };
    // A wide integer is read as a float: only text with a float in it needs looking through.
    if has_float(&value)
        && let Some(pointer) = (Scan { text, at: 0 }).wide_integer("")
    {
        return Err(Unrepresentable::WideInteger(pointer));
    }
    Ok(value)
}

/// Whether `value` holds a number that is neither an `i64` nor a `u64`.
fn has_float(value: &Value) -> bool {
    match value {
        Value::Number(number) => number.is_f64(),
        Value::Array(items) => items.iter().any(has_float),
        Value::Object(map) => map.values().any(has_float),
        _ => false,
    }
}

/// A walk through JSON text that serde_json wrote (so valid, and at most 128 levels deep once
/// serde_json has read it back), looking for integers past 64 bits.
struct Scan {
    text: String,
    at: usize,
}

impl Scan {
    /// The JSON pointer (below `pointer`) of the first integer in the value at `at` that
    /// neither an `i64` nor a `u64` holds; `at` moves past the value.
    fn wide_integer(&mut self, pointer: &str) -> Option<String> {
        self.skip_whitespace();
        match self.text.as_bytes().get(self.at)? {
            b'{' => {
                self.at += 1;
                loop {
                    self.skip_whitespace();
                    if self.eat(b'}') {
                        return None;
                    }
                    let key: String = serde_json::from_str(self.string()?).ok()?;
                    self.skip_whitespace();
                    if !self.eat(b':') {
                        return None;
                    }
                    let at = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                    if let Some(found) = self.wide_integer(&at) {
                        return Some(found);
                    }
                    self.skip_whitespace();
                    if !self.eat(b',') {
                        return None;
                    }
                }
            }
            b'[' => {
                self.at += 1;
                for index in 0.. {
                    self.skip_whitespace();
                    if self.eat(b']') {
                        return None;
                    }
                    if let Some(found) = self.wide_integer(&format!("{pointer}/{index}")) {
                        return Some(found);
                    }
                    self.skip_whitespace();
                    if !self.eat(b',') {
                        return None;
                    }
                }
                None
            }
            b'"' => {
                self.string();
                None
            }
            _ => {
                let rest = &self.text[self.at..];
                let end = rest
                    .find([',', ']', '}', ' ', '\t', '\n', '\r'])
                    .unwrap_or(rest.len());
                let token = &rest[..end];
                self.at += end;
                let digits = token.strip_prefix('-').unwrap_or(token);
                let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
                let fits = token.parse::<i64>().is_ok() || token.parse::<u64>().is_ok();
                (integer && !fits).then(|| pointer.to_owned())
            }
        }
    }

    /// The string at `at`, quotes and escapes as written; `at` moves past it.
    fn string(&mut self) -> Option<&str> {
        let start = self.at;
        let bytes = self.text.as_bytes();
        if bytes.get(start) != Some(&b'"') {
            return None;
        }
        let mut i = start + 1;
        loop {
            match bytes.get(i)? {
                b'\\' => i += 2,
                b'"' => break,
                _ => i += 1,
            }
        }
        self.at = i + 1;
        self.text.get(start..=i)
    }

    /// Moves past `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let next = self.text.as_bytes().get(self.at) == Some(&byte);
        if next {
            self.at += 1;
        }
        next
    }

    fn skip_whitespace(&mut self) {
        while self
            .text
            .as_bytes()
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
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

//! Finding a map with integer keys that serde would read from its copy of a flattened value,
//! where it refuses every key.
//!
//! A struct with a `#[serde(flatten)]` field reads each key it does not know, and its value,
//! into a copy (serde's private `Content`), then reads the flattened field from that copy. The
//! copy's keys are strings, and serde reads no integer from a string key (serde_json reads one
//! from a key's text; the copy does not): a map with integer keys anywhere below a flattened
//! field refuses every key, so no call could give it one. The schema cannot tell: a flattened
//! struct's properties are merged into its parent's. So the input type itself is asked: for each
//! place the schema has (a property, a map's value, a list's item), the type is deserialized
//! from a probe that leads to that place and notes how the value there is asked for. A value
//! read into the copy is asked for as any value (`deserialize_any`), a value read directly by
//! what its type is; below a place read into the copy, the schema is searched for a map with
//! integer keys.

use std::cell::Cell;
use std::collections::BTreeSet;

use serde::de::value::{Error, StrDeserializer};
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::Value;

use super::fit::INTEGER_KEYS;
use super::pointer_segment;

/// The place in the arguments (a JSON pointer, each item of a list and value of a map `*`) of a
/// map with integer keys that `T` reads from serde's copy of a flattened value; `schema` is
/// `T`'s fitted input schema.
pub(super) fn flattened_integer_keys<T: DeserializeOwned>(schema: &Value) -> Option<String> {
    read_directly::<T>(schema, schema, &mut Vec::new(), &mut BTreeSet::new())
}

/// One step from a value to one inside it.
#[derive(Clone, Copy)]
enum Step<'a> {
    /// The property of this name.
    Property(&'a str),
    /// Any value of a map (reached under the key [`ENTRY_KEY`]).
    Entry,
    /// Any item of a list.
    Item,
}

/// The key under which the probe reaches a map's value: one every map takes, its keys strings
/// or integers, `NonZero` ones too.
const ENTRY_KEY: &str = "1";

/// The place of the first map with integer keys that `T` reads from serde's copy, below `node`
/// (a subschema of `root`), whose value `T` reads directly at `path`. `seen` holds the `$ref`s
/// already followed: a definition is walked once, as a type reads it the same way wherever it
/// is.
fn read_directly<'a, T: DeserializeOwned>(
    root: &'a Value,
    node: &'a Value,
    path: &mut Vec<Step<'a>>,
    seen: &mut BTreeSet<&'a str>,
) -> Option<String> {
    let node = follow(root, node, seen)?;
    children(node).into_iter().find_map(|(step, child)| {
        path.push(step);
        let found = if read_as_any::<T>(path) {
            integer_keys_below(root, child, path, &mut BTreeSet::new())
        } else {
            read_directly::<T>(root, child, path, seen)
        };
        path.pop();
        found
    })
}

/// Whether `T` reads the value at `path` as any value (`deserialize_any`): into serde's copy.
fn read_as_any<T: DeserializeOwned>(path: &[Step<'_>]) -> bool {
    let as_any = Cell::new(false);
    // The probe always ends in an error: what was asked on the way is the answer.
    let _ = T::deserialize(Probe {
        path,
        as_any: &as_any,
    });
    as_any.get()
}

/// The place of the first map with integer keys at or below `node`, at `path`.
fn integer_keys_below<'a>(
    root: &'a Value,
    node: &'a Value,
    path: &mut Vec<Step<'a>>,
    seen: &mut BTreeSet<&'a str>,
) -> Option<String> {
    let node = follow(root, node, seen)?;
    if is_integer_keyed(node) {
        return Some(place(path));
    }
    children(node).into_iter().find_map(|(step, child)| {
        path.push(step);
        let found = integer_keys_below(root, child, path, seen);
        path.pop();
        found
    })
}

/// The schema in `root` that `node`'s `$ref` leads to (`node` itself without one), unless
/// `seen` holds the `$ref` already; it is added.
fn follow<'a>(root: &'a Value, node: &'a Value, seen: &mut BTreeSet<&'a str>) -> Option<&'a Value> {
    match node.get("$ref").and_then(Value::as_str) {
        Some(reference) if !seen.insert(reference) => None,
        Some(reference) => root.pointer(reference.strip_prefix('#')?),
        None => Some(node),
    }
}

/// The subschemas of the values inside one `node` takes, each with its step: its properties, its
/// map values, its list items. The subset has no `anyOf`, `oneOf` or `allOf`.
fn children(node: &Value) -> Vec<(Step<'_>, &Value)> {
    let mut children = Vec::new();
    if let Some(Value::Object(properties)) = node.get("properties") {
        children.extend(
            properties
                .iter()
                .map(|(name, schema)| (Step::Property(name), schema)),
        );
    }
    if let Some(entry @ Value::Object(_)) = node.get("additionalProperties") {
        children.push((Step::Entry, entry));
    }
    if let Some(item @ Value::Object(_)) = node.get("items") {
        children.push((Step::Item, item));
    }
    children
}

/// Whether `node` is a map with integer keys, as fitted (`propertyNames` of an integer).
fn is_integer_keyed(node: &Value) -> bool {
    node.pointer("/propertyNames/pattern")
        .and_then(Value::as_str)
        .is_some_and(|pattern| INTEGER_KEYS.iter().any(|(_, read)| *read == pattern))
}

/// `path` as a JSON pointer into the arguments, `*` for any item or map value.
fn place(path: &[Step<'_>]) -> String {
    path.iter()
        .map(|step| match step {
            Step::Property(name) => format!("/{}", pointer_segment(name)),
            Step::Entry | Step::Item => "/*".into(),
        })
        .collect()
}

/// A deserializer that leads along `path` (an object of one key for a property or a map's
/// value, a list of one item for an item) and notes in `as_any` whether the value at its end is
/// asked for as any value. It holds no value: it ends in an error wherever it is asked for
/// anything else.
#[derive(Clone, Copy)]
struct Probe<'p> {
    path: &'p [Step<'p>],
    as_any: &'p Cell<bool>,
}

impl Probe<'_> {
    /// The error that ends the probe.
    fn end<T>(&self) -> Result<T, Error> {
        Err(serde::de::Error::custom("probe ended"))
    }
}

/// Deserializer methods that end the probe.
macro_rules! end_probe {
    ($($method:ident($($arg:ty),*))*) => {$(
        fn $method<V: Visitor<'de>>(self, $(_: $arg,)* _: V) -> Result<V::Value, Error> {
            self.end()
        }
    )*};
}

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        if self.path.is_empty() {
            self.as_any.set(true);
        }
        self.end()
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.path.is_empty() {
            return self.end();
        }
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let key = match self.path.first() {
            Some(Step::Property(name)) => name,
            Some(Step::Entry) => ENTRY_KEY,
            _ => return self.end(),
        };
        visitor.visit_map(OneEntry {
            key: Some(Key(key)),
            value: Probe {
                path: &self.path[1..],
                as_any: self.as_any,
            },
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.path.split_first() {
            Some((Step::Item, rest)) => visitor.visit_seq(OneItem(Some(Probe {
                path: rest,
                as_any: self.as_any,
            }))),
            _ => self.end(),
        }
    }

    /// A fixed-size array (`[T; N]`, whose schema has one `items`) is read as a tuple.
    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    end_probe! {
        deserialize_bool() deserialize_i8() deserialize_i16() deserialize_i32()
        deserialize_i64() deserialize_i128() deserialize_u8() deserialize_u16()
        deserialize_u32() deserialize_u64() deserialize_u128() deserialize_f32()
        deserialize_f64() deserialize_char() deserialize_str() deserialize_string()
        deserialize_bytes() deserialize_byte_buf() deserialize_unit()
        deserialize_unit_struct(&'static str)
        deserialize_identifier() deserialize_ignored_any()
        deserialize_tuple_struct(&'static str, usize)
        deserialize_enum(&'static str, &'static [&'static str])
    }
}

/// An object of one entry, its value the rest of the probe.
struct OneEntry<'p> {
    key: Option<Key<'p>>,
    value: Probe<'p>,
}

impl<'de> MapAccess<'de> for OneEntry<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        self.key.take().map(|key| seed.deserialize(key)).transpose()
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        seed.deserialize(self.value)
    }
}

/// A list of one item, the rest of the probe.
struct OneItem<'p>(Option<Probe<'p>>);

impl<'de> SeqAccess<'de> for OneItem<'_> {
    type Error = Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Error> {
        self.0.take().map(|item| seed.deserialize(item)).transpose()
    }
}

/// An object key: a struct's field name, a map's string, integer (its text read as one), unit
/// enum or newtype (`struct Id(u32)`) key.
struct Key<'p>(&'p str);

/// Deserializer methods that read the key as an integer.
macro_rules! integer_key {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            match self.0.parse::<u64>() {
                Ok(integer) => visitor.visit_u64(integer),
                Err(_) => visitor.visit_str(self.0),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for Key<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str(self.0)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        StrDeserializer::<Error>::new(self.0).deserialize_enum(name, variants, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    integer_key! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
    }

    forward_to_deserialize_any! {
        bool f32 f64 char str string bytes byte_buf option unit unit_struct seq
        tuple tuple_struct map struct identifier ignored_any
    }
}

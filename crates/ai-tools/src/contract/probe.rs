//! Asking an input type how it reads one place of its arguments, without arguments: the type is
//! deserialized from a probe that leads to that place and notes what is asked for there.
//!
//! The schema says what a place holds, not how the type reads it: whether serde reads a value
//! into its copy of a flattened value (`contract/flattened.rs`; and `bind` finds which of an
//! object's properties a refused flattened part read by it), or which keys a map's key type
//! takes (a `NonZero` integer refuses `0`, which schemars' pattern takes: `contract/keys.rs`;
//! and `bind` tells a refused key from a refused value by it).

use std::cell::Cell;
use std::collections::BTreeSet;
use std::fmt;

use serde::de::value::Error;
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// One step from a value to one inside it. The probe reads a property and a map's entry alike:
/// an object of one key.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step<'a> {
    /// The property of this name.
    Property(&'a str),
    /// The value of a map under this key.
    Entry(&'a str),
    /// Any item of a list.
    Item,
}

/// A key every map takes, its keys strings or integers, `NonZero` ones too: the probe reaches a
/// map's values under it.
pub(super) const ENTRY_KEY: &str = "1";

/// How a type reads the place a probe leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reached {
    /// The probe ended before the place: the type reads something on the way otherwise than
    /// the probe leads (an enum, or a value read into serde's copy of a flattened one).
    Short,
    /// The key of the last step was refused: the type reads no value under it.
    KeyRefused,
    /// The value there is read by what its type is.
    Directly,
    /// The value there is read as any value (`deserialize_any`): into serde's copy.
    AsAny,
}

/// How `T` reads the value at `path`.
pub(crate) fn reach<T: DeserializeOwned>(path: &[Step<'_>]) -> Reached {
    let reached = Cell::new(Reached::Short);
    // The probe always ends in an error: what was asked on the way is the answer.
    let _ = T::deserialize(Probe {
        path,
        reached: &reached,
    });
    reached.get()
}

/// The subschemas of the values inside one `node` takes, each with its step (a map's value
/// under [`ENTRY_KEY`]): its properties, its map values, its list items. The subset has no
/// `anyOf`, `oneOf` or `allOf`.
pub(super) fn children(node: &Value) -> Vec<(Step<'_>, &Value)> {
    let mut children = Vec::new();
    if let Some(Value::Object(properties)) = node.get("properties") {
        children.extend(
            properties
                .iter()
                .map(|(name, schema)| (Step::Property(name), schema)),
        );
    }
    if let Some(entry @ Value::Object(_)) = node.get("additionalProperties") {
        children.push((Step::Entry(ENTRY_KEY), entry));
    }
    if let Some(item @ Value::Object(_)) = node.get("items") {
        children.push((Step::Item, item));
    }
    children
}

/// The schema in `root` that `node`'s `$ref` leads to (`node` itself without one), unless
/// `seen` holds the `$ref` already; it is added.
pub(super) fn follow<'a>(
    root: &'a Value,
    node: &'a Value,
    seen: &mut BTreeSet<&'a str>,
) -> Option<&'a Value> {
    match node.get("$ref").and_then(Value::as_str) {
        Some(reference) if !seen.insert(reference) => None,
        Some(reference) => root.pointer(reference.strip_prefix('#')?),
        None => Some(node),
    }
}

/// A deserializer that leads along `path` (an object of one key for a property or a map's
/// value, a list of one item for an item) and notes in `reached` how the value at its end is
/// asked for, or that the last key was refused. It holds no value: it ends in an error wherever
/// it is asked for anything else.
#[derive(Clone, Copy)]
struct Probe<'p> {
    path: &'p [Step<'p>],
    reached: &'p Cell<Reached>,
}

impl Probe<'_> {
    /// The error that ends the probe; at the path's end, the value was read directly.
    fn end<T>(&self) -> Result<T, Error> {
        if self.path.is_empty() && self.reached.get() == Reached::Short {
            self.reached.set(Reached::Directly);
        }
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
            self.reached.set(Reached::AsAny);
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
            Some(Step::Property(key) | Step::Entry(key)) => key,
            _ => return self.end(),
        };
        visitor.visit_map(OneEntry {
            key: Some(key),
            value: Probe {
                path: &self.path[1..],
                reached: self.reached,
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
                reached: self.reached,
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
    key: Option<&'p str>,
    value: Probe<'p>,
}

impl<'de> MapAccess<'de> for OneEntry<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let key = self.key.take().map(|key| read_key(key, seed)).transpose();
        // A key errs only as its type refuses it.
        if key.is_err() && self.value.path.is_empty() {
            self.value.reached.set(Reached::KeyRefused);
        }
        key
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

/// `seed` read from `key` as serde_json reads a key of the arguments (a struct's field name, a
/// map's string, integer, unit enum or newtype key): by serde_json's own key deserializer, so the
/// probe's key type takes and refuses exactly the keys it takes and refuses when serde reads the
/// arguments (an integer key is read from its text, a 128-bit one by `visit_i128`).
fn read_key<'de, K: DeserializeSeed<'de>>(key: &str, seed: K) -> Result<K::Value, Error> {
    let object = Value::Object(serde_json::Map::from_iter([(key.to_owned(), Value::Null)]));
    object
        .deserialize_map(FirstKey(seed))
        .map_err(serde::de::Error::custom)
}

/// Reads the first key of an object with its seed.
struct FirstKey<K>(K);

impl<'de, K: DeserializeSeed<'de>> Visitor<'de> for FirstKey<K> {
    type Value = K::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of one key")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<K::Value, A::Error> {
        map.next_key_seed(self.0)?
            .ok_or_else(|| serde::de::Error::custom("an object without a key"))
    }
}

//! Finding a number JSON cannot carry (NaN, an infinity) in a value about to be written as JSON.
//!
//! serde_json writes such an `f32` or `f64` as `null`, which reads back as a different value
//! (an `Option`'s "none"); the written text cannot tell it from a real `null`, so the value is
//! walked as it serializes instead.

use serde::Serialize;
use serde::ser::{self, Error as _};

/// The JSON pointer, in what serde_json writes for `value`, of its first `f32` or `f64` that is
/// NaN or an infinity; `None` when every number in it is finite.
pub(super) fn non_finite_place<T: Serialize + ?Sized>(value: &T) -> Option<String> {
    let mut finder = Finder::default();
    // An error is either the number found (recorded) or one serde_json would meet too.
    let _ = value.serialize(&mut finder);
    finder.found
}

/// The walk: where it is, and the place of the number found.
#[derive(Default)]
struct Finder {
    path: Vec<String>,
    found: Option<String>,
}

impl Finder {
    /// Records the place of a number that is not finite, and stops the walk there.
    fn number(&mut self, finite: bool) -> Result<(), serde_json::Error> {
        if finite {
            return Ok(());
        }
        let pointer: String = self
            .path
            .iter()
            .map(|segment| format!("/{}", segment.replace('~', "~0").replace('/', "~1")))
            .collect();
        self.found = Some(pointer);
        Err(serde_json::Error::custom("a number that is not finite"))
    }

    /// Walks `value` under the key or index `segment`.
    fn below<T: Serialize + ?Sized>(
        &mut self,
        segment: String,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        self.path.push(segment);
        let walked = value.serialize(&mut *self);
        self.path.pop();
        walked
    }
}

/// A sequence, map, struct or variant being walked.
struct Compound<'a> {
    finder: &'a mut Finder,
    /// The index of the next element.
    index: usize,
    /// The key of the map entry whose value comes next.
    key: String,
    /// Whether a variant's name was pushed onto the path (serde_json writes it as a key).
    variant: bool,
}

impl<'a> Compound<'a> {
    fn new(finder: &'a mut Finder, variant: Option<&'static str>) -> Self {
        if let Some(name) = variant {
            finder.path.push(name.to_owned());
        }
        Self {
            finder,
            index: 0,
            key: String::new(),
            variant: variant.is_some(),
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), serde_json::Error> {
        let index = self.index;
        self.index += 1;
        self.finder.below(index.to_string(), value)
    }

    fn end(self) -> Result<(), serde_json::Error> {
        if self.variant {
            self.finder.path.pop();
        }
        Ok(())
    }
}

impl<'a> ser::Serializer for &'a mut Finder {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_f32(self, v: f32) -> Result<(), Self::Error> {
        self.number(v.is_finite())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Self::Error> {
        self.number(v.is_finite())
    }
    fn serialize_bool(self, _: bool) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_u128(self, _: u128) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_char(self, _: char) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Self::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), Self::Error> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        self.below(variant.to_owned(), value)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a>, Self::Error> {
        Ok(Compound::new(self, None))
    }
    fn serialize_tuple(self, _: usize) -> Result<Compound<'a>, Self::Error> {
        Ok(Compound::new(self, None))
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Self::Error> {
        Ok(Compound::new(self, None))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Self::Error> {
        Ok(Compound::new(self, Some(variant)))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a>, Self::Error> {
        Ok(Compound::new(self, None))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound<'a>, Self::Error> {
        Ok(Compound::new(self, None))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Self::Error> {
        Ok(Compound::new(self, Some(variant)))
    }
}

/// The four sequence-like compounds: each element is walked by [`Compound::element`].
macro_rules! sequence_compound {
    ($($trait:ident :: $method:ident),* $(,)?) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = serde_json::Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Self::Error> {
                Compound::end(self)
            }
        }
    )*};
}

sequence_compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Self::Error> {
        // The key as serde_json writes it: a string as it is, a number or a bool as its text.
        // Written as text, not made a `Value`, which holds no integer past 64 bits (an error
        // would end the walk before the value) and widens an `f32` to another number.
        let text = serde_json::to_string(key)?;
        self.key = serde_json::from_str::<String>(&text).unwrap_or(text);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        let key = std::mem::take(&mut self.key);
        self.finder.below(key, value)
    }
    fn end(self) -> Result<(), Self::Error> {
        Compound::end(self)
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        self.finder.below(key.to_owned(), value)
    }
    fn end(self) -> Result<(), Self::Error> {
        Compound::end(self)
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        self.finder.below(key.to_owned(), value)
    }
    fn end(self) -> Result<(), Self::Error> {
        Compound::end(self)
    }
}

//! Reading a Responses stream's output items and event fields leniently: an item the decoder
//! does not run, and a field only some events use, never fail the stream for a value of another
//! type; a `function_call` item is held to its fields' types.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, Unexpected, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::assembly::{self, JsonText, LoneSurrogate, NotArguments};

/// A field of an event read from its raw text as a `T`, or absent whatever else it holds: a
/// value of another type, one nested past serde_json's 128 levels, a string with a lone
/// surrogate escape. For the fields that only help, so they never fail an event:
/// `sequence_number` and `content_index` as whole numbers (they only tell a replayed delta from
/// a new one, see [`DeltaLog::fresh`](super::replay::DeltaLog::fresh)), and an `error` event's
/// `code`, which only adds to its message. Read from JSON text only (the raw text is
/// serde_json's), as the events are.
pub(super) struct FromRaw<T>(pub(super) Option<T>);

impl<'de, T: DeserializeOwned> Deserialize<'de> for FromRaw<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        Ok(Self(serde_json::from_str(raw.get()).ok()))
    }
}

/// A field that is a string on the events the decoder reads, and may be anything on events it
/// skips: versions of the spec typed the `delta` of the reasoning summary and MCP call events as
/// objects. Anything but a string reads as absent, so an event the decoder does not read can never
/// fail the stream.
///
/// A string holding a lone surrogate escape is read too, never failing the event: as the
/// answer's text each lone surrogate is U+FFFD ([`Text::shown`]), and as a call's arguments
/// (`response.function_call_arguments.delta`) it is kept as its escape ([`Text::arguments`]), as
/// chat keeps it, so a pair split between two deltas joins into its character again.
#[derive(Default)]
pub(super) struct Text<'a>(Option<JsonText<'a>>);

impl Text<'_> {
    /// The text shown and kept as the answer's: each lone surrogate as U+FFFD.
    pub(super) fn shown(&self) -> Option<Cow<'_, str>> {
        self.0
            .as_ref()
            .map(|text| text.text(LoneSurrogate::Replace))
    }

    /// The text as a fragment of a call's arguments: each lone surrogate as its escape.
    pub(super) fn arguments(&self) -> Option<Cow<'_, str>> {
        self.0.as_ref().map(|text| text.text(LoneSurrogate::Escape))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = assembly::lenient_text(deserializer)?;
        Ok(Text(read.ok().flatten()))
    }
}

/// A string field of an item (`id`, `call_id`, `name`, `status`) read without refusing any value:
/// a string, `null` (absent), or [`NotAString`] naming the kind of value it was instead.
struct ItemString(Result<Option<String>, NotAString>);

impl<'de> Deserialize<'de> for ItemString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = assembly::lenient_text(deserializer)?;
        Ok(ItemString(
            read.map(|text| text.map(|text| text.into_text(LoneSurrogate::Replace).into_owned()))
                .map_err(NotAString),
        ))
    }
}

/// A string field of a `function_call` item, read strictly (any other value but `null` is
/// refused), with each lone surrogate escape as U+FFFD ([`assembly::display_string`]).
struct CallString(Option<String>);

impl<'de> Deserialize<'de> for CallString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = assembly::display_string(deserializer)?;
        Ok(CallString(read.map(Cow::into_owned)))
    }
}

/// A message item's `content`, or an event's `part`: any JSON, with each lone surrogate escape
/// read as U+FFFD ([`assembly::lenient_value`]).
pub(super) struct ShownValue(pub(super) Option<Value>);

impl<'de> Deserialize<'de> for ShownValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        assembly::lenient_value(deserializer).map(ShownValue)
    }
}

/// A value where a string was expected: the kind of value it was, as serde names it, never the
/// value.
#[derive(Clone, Copy, Debug)]
struct NotAString(&'static str);

impl NotAString {
    /// The error that refuses it, worded as serde words a string field of the wrong type.
    fn error<E: de::Error>(self) -> E {
        E::invalid_type(Unexpected::Other(self.0), &"a string")
    }
}

/// An output item.
///
/// Only a `function_call` item, the one item the decoder runs, is held to the types of its
/// fields: a string `id`, `call_id`, `name` and `status`, and `arguments` read by the one rule
/// chat reads a call's arguments by (a string as sent, an object serialized). Any other item (an
/// MCP call, an approval request, a custom tool's call, reasoning, a web search, a message) reads
/// a value of another type in any of those fields as absent, so such an item never fails the
/// stream or the response, as an event the decoder does not read never does. `type` must be a
/// string on every item: without it the decoder cannot tell whether the item is a call it must
/// run, and dropping a call would be worse than failing.
pub(super) struct Item {
    pub(super) kind: String,
    /// The item id; an empty one reads as absent, since it tells no item from another.
    pub(super) id: Option<String>,
    pub(super) call_id: Option<String>,
    pub(super) name: Option<String>,
    /// A string, or an object (serialized), as chat reads a call's arguments.
    pub(super) arguments: Option<String>,
    pub(super) status: Option<String>,
    /// A `message` item's parts (`output_text` with `text`, `refusal` with `refusal`); any
    /// JSON, since other items' `content` takes other shapes.
    pub(super) content: Option<Value>,
}

/// The fields of an [`Item`] the decoder reads.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ItemField {
    Type,
    Id,
    CallId,
    Name,
    Arguments,
    Status,
    Content,
    #[serde(other)]
    Other,
}

impl ItemField {
    /// The field's name on the wire.
    fn name(self) -> &'static str {
        match self {
            ItemField::Type => "type",
            ItemField::Id => "id",
            ItemField::CallId => "call_id",
            ItemField::Name => "name",
            ItemField::Arguments => "arguments",
            ItemField::Status => "status",
            ItemField::Content => "content",
            ItemField::Other => "other",
        }
    }
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ItemVisitor)
    }
}

/// Reads an [`Item`]. Once the item's `type` has said it is a `function_call` (servers send
/// `type` first), a later string field is read strictly, so its error is serde's own, at the
/// value; a value of the wrong type read before that is kept and refused at the item's end if
/// the item turns out a call, and ignored otherwise. A call's `arguments` of the wrong type are
/// refused at the item's end, after any string field's error.
struct ItemVisitor;

impl<'de> Visitor<'de> for ItemVisitor {
    type Value = Item;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an output item")
    }

    fn visit_map<M: de::MapAccess<'de>>(self, mut map: M) -> Result<Item, M::Error> {
        let mut kind: Option<String> = None;
        let mut item = Item {
            kind: String::new(),
            id: None,
            call_id: None,
            name: None,
            arguments: None,
            status: None,
            content: None,
        };
        let mut arguments: Result<(), NotArguments> = Ok(());
        // What a `function_call` item may not have, refused once its type says it is one.
        let mut refused: Option<M::Error> = None;
        // The fields read so far, one bit each.
        let mut seen = 0u8;
        while let Some(field) = map.next_key::<ItemField>()? {
            let call = kind.as_deref() == Some("function_call");
            let bit = 1u8 << (field as u8);
            if field != ItemField::Other && seen & bit != 0 {
                let duplicate = de::Error::duplicate_field(field.name());
                if call || field == ItemField::Type {
                    return Err(duplicate);
                }
                refused.get_or_insert(duplicate);
                map.next_value::<de::IgnoredAny>()?;
                continue;
            }
            seen |= bit;
            let slot = match field {
                ItemField::Type => {
                    kind = Some(map.next_value()?);
                    continue;
                }
                ItemField::Arguments => {
                    match map.next_value::<OwnedArguments>()?.0 {
                        Ok(read) => item.arguments = read,
                        Err(not) => arguments = Err(not),
                    }
                    continue;
                }
                ItemField::Content => {
                    item.content = map.next_value::<ShownValue>()?.0;
                    continue;
                }
                ItemField::Other => {
                    map.next_value::<de::IgnoredAny>()?;
                    continue;
                }
                ItemField::Id => &mut item.id,
                ItemField::CallId => &mut item.call_id,
                ItemField::Name => &mut item.name,
                ItemField::Status => &mut item.status,
            };
            if call {
                *slot = map.next_value::<CallString>()?.0;
                continue;
            }
            match map.next_value::<ItemString>()?.0 {
                Ok(read) => *slot = read,
                Err(not) => {
                    refused.get_or_insert(not.error());
                }
            }
        }
        item.kind = kind.ok_or_else(|| de::Error::missing_field("type"))?;
        // An empty id names no item: two items a server left blank are not one item.
        item.id = item.id.filter(|id| !id.is_empty());
        if item.kind == "function_call" {
            if let Some(refused) = refused {
                return Err(refused);
            }
            arguments.map_err(NotArguments::error)?;
        }
        Ok(item)
    }
}

/// `arguments` on an item, read by [`assembly::owned_arguments`].
struct OwnedArguments(Result<Option<String>, NotArguments>);

impl<'de> Deserialize<'de> for OwnedArguments {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        assembly::owned_arguments(deserializer).map(OwnedArguments)
    }
}

/// The text of a message item's content part: an `output_text` part's `text`, a `refusal`
/// part's `refusal`; none for any other part.
pub(super) fn part_text(part: &Value) -> Option<&str> {
    kind_and_text(part).map(|(_, text)| text)
}

/// What a message part holds: the answer's text, or the model's refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PartKind {
    /// An `output_text` part (`response.output_text.*` events).
    Text,
    /// A `refusal` part (`response.refusal.*` events).
    Refusal,
}

/// A message part's kind and text, as [`part_text`] reads the text.
pub(super) fn kind_and_text(part: &Value) -> Option<(PartKind, &str)> {
    let (kind, text) = match part.get("type").and_then(Value::as_str) {
        Some("output_text") => (PartKind::Text, part.get("text")),
        Some("refusal") => (PartKind::Refusal, part.get("refusal")),
        _ => return None,
    };
    Some((kind, text?.as_str()?))
}

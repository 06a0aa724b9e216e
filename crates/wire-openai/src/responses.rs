//! The OpenAI Responses API: the stream decoder, the whole-response decoder and the request
//! encoders.
//!
//! - Calls are keyed by their item id (or output index), never by "the current call"; the call
//!   id a result must quote is the item's `call_id`. An empty item id names no item: items a
//!   server left blank go by their output index, never read as one item.
//! - An item announced again (the same item id, or the same `call_id` and function under
//!   another item id, as gateways that replay events send them) is the call already open, never
//!   a second call with the same id. Another function under a `call_id` already taken is an
//!   error. An item under an open call's item id (or, finished, at its output index) whose
//!   `call_id` or function is another is a call of its own, as servers that reuse item ids or
//!   output indexes send them; the item id and index then name the new call. But a finished
//!   item without an item id, at the index of a call not yet finished by its item, with that
//!   call's function and arguments, is that call finishing under a call id minted anew (vLLM's
//!   gpt-oss streams), never a second call.
//! - The argument deltas such a gateway re-sends are recognized and neither appended nor shown
//!   again, so a call's display deltas spell its arguments. They are told by their
//!   `sequence_number` once the stream's numbers rise and while they stay in order (numbers
//!   that never rise, a gateway's default `0`, tell nothing), else by their text once the item,
//!   or a message's part, is announced again.
//! - A message's text and refusal deltas are told by the same rule, part by part, so the
//!   answer's text is neither doubled nor shown twice.
//! - A message part's final text (`response.output_text.done`, `response.refusal.done`,
//!   `response.content_part.done`, the finished item) completes the part: text that arrived only
//!   there is kept, once however many of them carry it (and however many deltas that arrive
//!   after it repeat it); one that does not continue what streamed adds nothing. A finished item
//!   under an item id not seen before is the message at its output index when its text continues
//!   that one's.
//! - A call's final `arguments` (on `response.function_call_arguments.done` or the finished
//!   item) replace its deltas, unless they are empty: `""` is no JSON, so it never erases the
//!   arguments a call streamed. Deltas arriving after final arguments that continue the
//!   streamed ones, and repeat what they added, are not appended again.
//! - A call announced without a name takes the one its finished item carries, or else the one
//!   its `.done` event carried; a name the call has is never replaced, and a `.done` event's
//!   name never tells calls apart (the finished item is authoritative).
//! - A call announced that then got no arguments, no `.done` event and no finished item before
//!   the response ended was never finished: it is incomplete, never run with `{}`.
//! - A call's `arguments` sent as a JSON object (on an item or on
//!   `response.function_call_arguments.done`) are serialized, as on chat, and so are those of
//!   the items the decoder does not run (an MCP call's).
//! - Only a `function_call` item is held to the types of its fields: on any other item a value
//!   of another type in any field but `type` reads as absent rather than failing the stream or
//!   the response.
//! - The `response` object an event carries is bookkeeping (the response id, usage, the reason
//!   it is incomplete, its status, its error): a value of another shape, or a field given
//!   twice, reads as absent, never failing the stream or losing the text and calls already
//!   assembled. So is the whole `response` of an event that gives it twice, and a
//!   `sequence_number` or an `error` event's `code` given twice (which one counts cannot be
//!   told); any other key the event's type reads, which the answer is made of, given twice is
//!   an error naming the key, as on chat (`type` and `error`, which every event reads, on any
//!   event). A key its type does not read (a `name` on a text delta) is never looked at: it
//!   may be given any number of times, and hold any JSON.
//! - An `error` event is the provider's error with its `message`; with none (`null` or
//!   empty) and no nested `error`, its `code` is kept: `unknown error (code: …)`. So is the
//!   `code` of an `error` object (nested in an event, or a response's) with no message. A
//!   falsy code (`""`, `null`, `0`, as Python reads it) names nothing, in either place: an
//!   error that says nothing else is `unknown error`.
//! - Text from several message items is joined with no separator, as the official SDKs'
//!   `output_text` joins it (openai-python and openai-node alike): a separator would be text
//!   the model never sent.
//! - A reasoning item finished with its `encrypted_content` is kept whole, as sent, on the call
//!   that follows it (under [`REASONING_ITEMS_KEY`] in the call's `provider_fields`), so that
//!   the next request can send it back just before that call; one finished after the items
//!   that follow it goes by output index; one still waiting for a call at the terminal event
//!   (its output index disagrees with the response's), by where the event's `response` snapshot
//!   lists it, found by item id. Reasoning followed by a message
//!   or another kind of item (a text-only answer, a hosted tool's call) is not kept: it leads to
//!   no call of the turn. It is never text, never a delta. One to keep that nests more than
//!   [`ai_core::MAX_JSON_DEPTH`] levels fails the stream (or the response), naming it and the
//!   limit: kept, it would make the thread's state too deep to store.
//! - An event of a type the decoder does not read, without an `error` (a truthy one), never
//!   fails the stream, whatever its other fields hold: one that fails to parse (nested deeper
//!   than serde_json reads, 128 levels, though it is valid JSON; a key the read events share,
//!   such as `item`, `item_id` or `output_index`, holding another type or given twice) is
//!   skipped, as it would be if it parsed: its `sequence_number` still counts, read as on any
//!   event. An event with a truthy `error`, of any type, is that error, the provider's message,
//!   whatever its other fields hold. Any other event that fails to parse fails the stream,
//!   saying why (nested too deep, a value of the wrong type, a key given twice).
//!   A call's `arguments` object nested that deep is not the event's fault, nor one holding a
//!   number out of f64's range or a lone surrogate escape: it is kept as sent (as arguments
//!   sent as text are), and only that call fails where it runs. So is a bare number out of
//!   range, and arguments text whose escapes hold a lone surrogate keeps it as the escape
//!   `\uXXXX`, in `response.function_call_arguments.delta` events too (a pair split between two
//!   deltas joins).
//! - A lone surrogate escape in text that is shown or kept (a text or refusal delta, `.done`
//!   text, a message item's content or a part, an item's `id`, `call_id`, `name` or `status`)
//!   reads as U+FFFD, never failing the event or the response, as on chat.
//! - A stream that assembled no text and no call before its terminal event (`response.completed`
//!   or `response.incomplete`) takes its answer from that event's `response` snapshot, read as
//!   [`decode_response`] reads a whole response: a server that skips the item and delta events
//!   sends it there alone. A snapshot so read whose `response` holds an `error` is that error,
//!   as for a whole response. After streamed text or calls the snapshot adds nothing.
//! - Native streams end with a terminal event (`response.completed`, `response.incomplete`,
//!   `response.failed`) and no `[DONE]`; a `[DONE]` that a gateway adds is tolerated.
//! - A terminal event ends the turn as its type says, or worse when its `response` snapshot's
//!   `status` says so, as [`decode_response`] reads a whole response's: a `response.completed`
//!   whose snapshot says `incomplete` cuts the turn (`incomplete_details.reason`: the output
//!   limit, the content filter), every call incomplete; one that says `failed` is the error
//!   `the response failed`. A terminal event whose `response` holds an `error` (a truthy one) is
//!   that error, the provider's message, after streamed text and calls too. A response's
//!   `error` that is an object of falsy fields only (`{"code": "", "message": ""}`) is no
//!   error, there and in a whole response: openai-python raises nothing for it.
//!
//! This file holds the decoder, the whole-response decoder and the encoders; the lenient
//! reading of items and event fields is in `item`, the replay rule in `replay`.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Bound;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use ai_core::{
    CompletionDelta, FinishReason, LlmCompletion, LlmRequest, Message, ToolChoice, ToolSpec, Usage,
    validate_history,
};

use crate::assembly::{self, Deltas, LenientArguments, Session, Sorted};
use crate::error::{check_request, check_tools};
use crate::history::{WireCallIds, check_names, sent_arguments, sent_text};
use crate::sse::SseEvent;
use crate::strict::strict_parameters;
use crate::{DecodeError, Delivery, EncodeError, Limits, WholeAnswer};

mod item;
mod replay;

use item::{FromRaw, Item, PartKind, Text};
use replay::{DeltaLog, MessageParts, Numbering, Sequence};

/// The key, in a call's `provider_fields`, of the reasoning items that led to it: a JSON array
/// of the `reasoning` output items that came, in order, after the turn's previous call or other
/// item and before this call (by output index, when the server finishes a reasoning item after
/// the items that follow it; by where the terminal event's snapshot lists it, by item id, when
/// its output index leaves it before no call), each whole and as sent (`id`, `summary`,
/// `encrypted_content`, and any other field). Only items with a non-empty `encrypted_content`
/// string are kept (they come only when the request asked for them with `include:
/// ["reasoning.encrypted_content"]`); the others cannot be sent back without the provider's stored
/// copy. One to keep that nests more than [`ai_core::MAX_JSON_DEPTH`] levels fails the decode
/// instead, since the thread's state would hold it too deep for a store to read back.
///
/// The Responses encoder sends them back, unchanged and in order, just before the call's
/// `function_call` item when [`RequestOptions::stateless_reasoning`] is on, and never otherwise.
/// They are the model's encrypted reasoning, never text: no delta shows them. The chat encoder
/// never sends this key.
pub const REASONING_ITEMS_KEY: &str = "openai_responses_reasoning";

/// The `item` of an event, whole and as sent: what a finished reasoning item keeps
/// ([`REASONING_ITEMS_KEY`]). Read again from the event's text only for a finished reasoning
/// item, so no other event pays for it.
#[derive(Deserialize)]
struct RawItem {
    item: Value,
}

/// The `item` of the event `data`, whole; `None` if it cannot be read (the event's own reading,
/// which passed, makes that not happen).
fn raw_item(data: &str) -> Option<Value> {
    serde_json::from_str::<RawItem>(data)
        .ok()
        .map(|raw| raw.item)
}

/// The `output` of a whole response, each item whole and as sent (see [`RawItem`]).
#[derive(Deserialize)]
struct RawOutput {
    output: Vec<Value>,
}

/// Each item of a response's `output` whole and as sent, read again from the response's JSON
/// text (`response`) only when one of `items` is a reasoning item, the one kind kept as sent;
/// else empty.
fn raw_output(items: &[Item], response: &str) -> Vec<Value> {
    if !items.iter().any(|item| item.kind == "reasoning") {
        return Vec::new();
    }
    serde_json::from_str::<RawOutput>(response)
        .map(|raw| raw.output)
        .unwrap_or_default()
}

/// A terminal event's `response`, as its JSON text ([`StreamDecoder::snapshot`]).
#[derive(Deserialize)]
struct Terminal<'a> {
    #[serde(default, borrow)]
    response: Option<&'a serde_json::value::RawValue>,
}

/// The `output` of a terminal event's `response` snapshot, read as a whole response's is.
#[derive(Deserialize)]
struct SnapshotOutput {
    #[serde(default)]
    output: Option<Vec<Item>>,
}

/// A terminal snapshot's items and, for its reasoning, each item as sent ([`raw_output`]).
type Snapshot = (Vec<Item>, Vec<Value>);

/// Whether a finished reasoning item is one to keep on the call it leads to: an object with a
/// non-empty `encrypted_content` string.
fn keeps_reasoning(item: &Value) -> bool {
    item.get("encrypted_content")
        .and_then(Value::as_str)
        .is_some_and(|content| !content.is_empty())
}

/// Refuses a finished reasoning item read whole (`raw`) that is one to keep
/// ([`keeps_reasoning`]) and nests too deep to keep ([`assembly::refuse_too_deep_to_keep`]).
fn refuse_deep_reasoning(raw: Option<&Value>) -> Result<(), String> {
    match raw.filter(|item| keeps_reasoning(item)) {
        Some(item) => assembly::refuse_too_deep_to_keep(item, "a reasoning item"),
        None => Ok(()),
    }
}

/// One stream event. Read by hand rather than derived (see [`EventVisitor`]), so that a
/// bookkeeping key given twice (`response`, `sequence_number`: which one counts cannot be told)
/// reads as absent instead of failing the event and with it the answer, as a chat chunk's
/// `usage` does; every other key its type reads ([`EventField::read_by`]), which the answer is
/// made of, given twice is still an error naming the key.
struct Event<'a> {
    /// Absent only on a gateway's bare `{"error": …}` payload.
    kind: Option<Cow<'a, str>>,
    output_index: Option<usize>,
    /// Absent when empty, as an item's empty `id` is.
    item_id: Option<Cow<'a, str>>,
    /// The event's place in the stream (every native event has one, increasing); anything but a
    /// whole number reads as absent, since compatible servers may leave it out or send it in
    /// another form.
    sequence_number: Option<u64>,
    /// The part of a message item a text delta belongs to; read as `sequence_number` is, since
    /// it only tells parts apart.
    content_index: Option<u64>,
    /// Text on the events read here; other events' `delta` may be anything (see [`Text`]).
    delta: Text<'a>,
    /// The final text on `response.output_text.done` (and `refusal` on
    /// `response.refusal.done`), read as `delta` is.
    text: Text<'a>,
    refusal: Text<'a>,
    /// A string, or an object (serialized); anything else reads as absent.
    arguments: LenientArguments<'a>,
    /// The call's name on `response.function_call_arguments.done`, read as `delta` is.
    name: Text<'a>,
    item: Option<Item>,
    /// A message part (`response.content_part.added`); any JSON, read as [`item::part_text`]
    /// reads it.
    part: Option<Value>,
    /// Read for its bookkeeping, leniently (see [`Response`]).
    response: Option<Response>,
    message: Option<String>,
    /// The `error` event's `code`, any JSON; given twice, or holding what serde_json cannot
    /// build, it reads as absent ([`FromRaw`]), since it only adds to the message.
    code: Option<Value>,
    /// Some servers nest the `error` event's fields under `error`, or send it as a string.
    error: Option<Value>,
    /// A finished reasoning item as sent, whole (not read by the visitor: see [`raw_item`]).
    reasoning: Option<Value>,
}

impl<'a> Event<'a> {
    /// An event of the kind `kind` with no other field.
    fn of(kind: Option<Cow<'a, str>>) -> Self {
        Event {
            kind,
            output_index: None,
            item_id: None,
            sequence_number: None,
            content_index: None,
            delta: Text::default(),
            text: Text::default(),
            refusal: Text::default(),
            arguments: LenientArguments(None),
            name: Text::default(),
            item: None,
            part: None,
            response: None,
            message: None,
            code: None,
            error: None,
            reasoning: None,
        }
    }

    /// Reads an event from its JSON text. With `read` given (the keys its type reads,
    /// [`EventField::read_by`]), every other key is skipped unseen, whatever it holds; without,
    /// every key is read (see [`EventVisitor`]).
    fn parse(data: &'a str, read: Option<u32>) -> serde_json::Result<Self> {
        let mut json = serde_json::Deserializer::from_str(data);
        let event = serde::Deserializer::deserialize_map(&mut json, EventVisitor { read })?;
        json.end()?;
        Ok(event)
    }
}

/// The keys of an event the decoder reads. [`EventVisitor`] keeps one bit per key in a `u32`:
/// a key past the 32nd fails the build (the assertion below), never a shift at run time.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(field_identifier, rename_all = "snake_case")]
enum EventField {
    #[serde(rename = "type")]
    Kind,
    OutputIndex,
    ItemId,
    SequenceNumber,
    ContentIndex,
    Delta,
    Text,
    Refusal,
    Arguments,
    Name,
    Item,
    Part,
    Response,
    Message,
    Code,
    Error,
    #[serde(other)]
    Other,
}

const _: () = assert!((EventField::Other as u32) < u32::BITS);

// `EventField::ALL` holds every key once, each at its own bit.
const _: () = {
    let mut at = 0;
    while at < EventField::ALL.len() {
        assert!(EventField::ALL[at] as usize == at);
        at += 1;
    }
    assert!(EventField::ALL.len() == EventField::Other as usize + 1);
};

impl EventField {
    /// Every key, in declaration order.
    const ALL: [Self; 17] = [
        Self::Kind,
        Self::OutputIndex,
        Self::ItemId,
        Self::SequenceNumber,
        Self::ContentIndex,
        Self::Delta,
        Self::Text,
        Self::Refusal,
        Self::Arguments,
        Self::Name,
        Self::Item,
        Self::Part,
        Self::Response,
        Self::Message,
        Self::Code,
        Self::Error,
        Self::Other,
    ];

    /// The key's bit in [`EventVisitor`]'s sets of keys.
    const fn bit(self) -> u32 {
        1 << (self as u32)
    }

    /// The bookkeeping keys, read leniently: no type of value they hold fails the event, and
    /// given twice they read as absent. `response` and `sequence_number` are read on every event,
    /// `code` on the `error` event alone ([`EventField::read_by`]). `sequence_number` and `code`
    /// are read from their raw text ([`FromRaw`]), so nothing they hold fails it; `response`
    /// still does where serde_json cannot build what it reads (its `error` nested past 128
    /// levels, a lone surrogate escape), since that may be the stream's error.
    const BOOKKEEPING: u32 = Self::Response.bit() | Self::SequenceNumber.bit() | Self::Code.bit();

    /// The keys an event of type `kind` reads, one bit each: `type` and `error` on every event
    /// (a truthy `error` is the stream's error whatever the type, as openai-python reads every
    /// payload, so which of two counts matters on any event), `response` and `sequence_number`
    /// on every event too, and the keys [`StreamDecoder::apply`] reads for the type. Only these
    /// given twice fail the event, but for the bookkeeping ones ([`Self::BOOKKEEPING`]), which
    /// read as absent: a key an event does not read may be anything, any number of times, as on
    /// a type the decoder does not read. An arm of `apply` that reads another key lists it here.
    fn read_by(kind: Option<&str>) -> u32 {
        let placed = Self::ItemId.bit() | Self::OutputIndex.bit() | Self::ContentIndex.bit();
        let call = Self::Item.bit() | Self::ItemId.bit() | Self::OutputIndex.bit();
        let own = match kind.unwrap_or_default() {
            "error" => Self::Message.bit() | Self::Code.bit(),
            "response.output_text.delta" | "response.refusal.delta" => Self::Delta.bit() | placed,
            "response.output_item.added" | "response.output_item.done" => {
                Self::Item.bit() | Self::OutputIndex.bit()
            }
            "response.content_part.added" | "response.content_part.done" => {
                Self::Part.bit() | placed
            }
            "response.output_text.done" => Self::Text.bit() | placed,
            "response.refusal.done" => Self::Refusal.bit() | placed,
            "response.function_call_arguments.delta" => Self::Delta.bit() | call,
            "response.function_call_arguments.done" => {
                Self::Name.bit() | Self::Arguments.bit() | call
            }
            _ => 0,
        };
        Self::Kind.bit()
            | Self::Error.bit()
            | Self::Response.bit()
            | Self::SequenceNumber.bit()
            | own
    }

    /// The key as sent, for the error that names it.
    fn name(self) -> &'static str {
        match self {
            Self::Kind => "type",
            Self::OutputIndex => "output_index",
            Self::ItemId => "item_id",
            Self::SequenceNumber => "sequence_number",
            Self::ContentIndex => "content_index",
            Self::Delta => "delta",
            Self::Text => "text",
            Self::Refusal => "refusal",
            Self::Arguments => "arguments",
            Self::Name => "name",
            Self::Item => "item",
            Self::Part => "part",
            Self::Response => "response",
            Self::Message => "message",
            Self::Code => "code",
            Self::Error => "error",
            Self::Other => "",
        }
    }
}

/// A string field that must be a string (or `null`), borrowed from the event's text when it can.
#[derive(Deserialize)]
struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);

/// `response`, read by [`lenient_response`].
struct LenientResponse(Option<Response>);

impl<'de> Deserialize<'de> for LenientResponse {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        lenient_response(deserializer).map(LenientResponse)
    }
}

/// Reads an [`Event`]: `response`, `sequence_number` and `code` given twice read as absent; any
/// other key its type reads ([`EventField::read_by`]) given twice is an error naming it. Keys
/// its type does not read are never looked at, however often they are given; once `read` says
/// which keys those are, they are skipped unseen, so no value they hold fails the event.
struct EventVisitor {
    /// The keys the event's type reads ([`EventField::read_by`]), when known before the event
    /// is read; `None` reads every key.
    read: Option<u32>,
}

impl<'de> serde::de::Visitor<'de> for EventVisitor {
    type Value = Event<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Responses stream event")
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Event<'de>, M::Error> {
        let mut event = Event::of(None);
        // Which keys were read (one bit each, by `EventField` order), and which twice.
        let (mut seen, mut twice) = (0u32, 0u32);
        let skipped = |field: EventField| self.read.is_some_and(|read| read & field.bit() == 0);
        while let Some(field) = map.next_key::<EventField>()? {
            twice |= seen & field.bit();
            seen |= field.bit();
            if skipped(field) {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            }
            match field {
                EventField::Kind => {
                    event.kind = map.next_value::<Option<Borrowed<'de>>>()?.map(|b| b.0);
                }
                EventField::OutputIndex => event.output_index = map.next_value()?,
                EventField::ItemId => {
                    event.item_id = map.next_value::<Option<Borrowed<'de>>>()?.map(|b| b.0);
                }
                EventField::SequenceNumber => {
                    event.sequence_number = map.next_value::<FromRaw<u64>>()?.0;
                }
                EventField::ContentIndex => {
                    event.content_index = map.next_value::<FromRaw<u64>>()?.0;
                }
                EventField::Delta => event.delta = map.next_value()?,
                EventField::Text => event.text = map.next_value()?,
                EventField::Refusal => event.refusal = map.next_value()?,
                EventField::Arguments => event.arguments = map.next_value()?,
                EventField::Name => event.name = map.next_value()?,
                EventField::Item => event.item = map.next_value()?,
                EventField::Part => event.part = map.next_value::<item::ShownValue>()?.0,
                EventField::Response => event.response = map.next_value::<LenientResponse>()?.0,
                EventField::Message => event.message = map.next_value()?,
                EventField::Code => event.code = map.next_value::<FromRaw<Value>>()?.0,
                EventField::Error => event.error = map.next_value()?,
                EventField::Other => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        // A key the event's type reads given twice is an error naming it; a bookkeeping one
        // reads as absent; one its type does not read is never looked at.
        let read = EventField::read_by(event.kind.as_deref()) & !EventField::BOOKKEEPING;
        if let Some(field) = EventField::ALL
            .into_iter()
            .find(|field| twice & read & field.bit() != 0)
        {
            return Err(serde::de::Error::duplicate_field(field.name()));
        }
        if twice & EventField::Response.bit() != 0 {
            event.response = None;
        }
        if twice & EventField::SequenceNumber.bit() != 0 {
            event.sequence_number = None;
        }
        if twice & EventField::Code.bit() != 0 {
            event.code = None;
        }
        // An empty `item_id` names no item (as an empty item id does): the event goes by its
        // output index.
        event.item_id = event.item_id.filter(|id| !id.is_empty());
        Ok(event)
    }
}

/// The `response` object of an event, read for its bookkeeping only: the stream's text and
/// calls come from the other events, so nothing here may fail the stream or lose what they
/// assembled. A `response` that is not an object reads as absent; in one, a field of another
/// type than it should have, or given twice (which one counts cannot be told), reads as absent,
/// and fields not read here (`output`, …) may be anything. (A terminal event's `output` is read
/// apart: for the answer only when the stream assembled nothing, see
/// [`StreamDecoder::snapshot`]; for the reasoning still waiting for a call, see
/// [`StreamDecoder::place_pending_reasoning`].)
#[derive(Default)]
struct Response {
    /// `resp_…`, the seed of synthesized call ids.
    id: Option<String>,
    /// Read as [`usage`] reads one.
    usage: Option<Box<Usage>>,
    incomplete_details: Option<IncompleteDetails>,
    /// Any JSON: [`DecodeError::from_response`] reads it on every terminal event.
    error: Option<Value>,
    /// How the response ended, when the snapshot says so: a terminal event ends the turn as
    /// the worse of its own type and this says ([`Ending::of`]).
    status: Option<String>,
}

/// `response` on an event, read leniently (see [`Response`]).
fn lenient_response<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Response>, D::Error> {
    deserializer.deserialize_any(assembly::ObjectOrAbsent(ResponseReader))
}

/// Reads a [`Response`]'s fields.
struct ResponseReader;

impl<'de> assembly::ReadObject<'de> for ResponseReader {
    type Value = Response;
    fn read<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Response, M::Error> {
        let mut fields = ResponseFields::default();
        while let Some(key) = map.next_key_seed(assembly::KeyOf(&ResponseFields::NAMES))? {
            match key {
                Some(at) => fields.read(at, &mut map)?,
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(fields.finish())
    }
}

/// A [`Response`]'s fields as they are read: a field given twice reads as absent (which one
/// counts cannot be told).
#[derive(Default)]
struct ResponseFields {
    response: Response,
    seen: [bool; 5],
    twice: [bool; 5],
}

impl ResponseFields {
    /// The fields, in the order `read` numbers them.
    const NAMES: [&str; 5] = ["id", "usage", "incomplete_details", "error", "status"];

    /// Reads the value of the field `NAMES[at]`.
    fn read<'de, M: serde::de::MapAccess<'de>>(
        &mut self,
        at: usize,
        map: &mut M,
    ) -> Result<(), M::Error> {
        self.twice[at] |= std::mem::replace(&mut self.seen[at], true);
        let response = &mut self.response;
        match at {
            0 => response.id = map.next_value::<Text<'de>>()?.shown().map(Cow::into_owned),
            1 => response.usage = map.next_value::<ResponseUsage>()?.0,
            2 => response.incomplete_details = map.next_value()?,
            3 => response.error = map.next_value()?,
            _ => response.status = map.next_value::<Text<'de>>()?.shown().map(Cow::into_owned),
        }
        Ok(())
    }

    /// The response, without the fields given twice.
    fn finish(self) -> Response {
        let (mut response, twice) = (self.response, self.twice);
        if twice[0] {
            response.id = None;
        }
        if twice[1] {
            response.usage = None;
        }
        if twice[2] {
            response.incomplete_details = None;
        }
        if twice[3] {
            response.error = None;
        }
        if twice[4] {
            response.status = None;
        }
        response
    }
}

/// A `usage` value, read by [`usage`].
struct ResponseUsage(Option<Box<Usage>>);

impl<'de> Deserialize<'de> for ResponseUsage {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        usage(deserializer).map(ResponseUsage)
    }
}

/// Responses' names for the token counts.
const USAGE_NAMES: assembly::UsageNames = assembly::UsageNames {
    input: "input_tokens",
    output: "output_tokens",
    input_details: "input_tokens_details",
    output_details: "output_tokens_details",
};

/// `usage`, read by [`assembly::read_usage`]: each count may be missing or `null` on compatible
/// servers, and a report that is not token counts is dropped rather than failing the stream.
fn usage<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Box<Usage>>, D::Error> {
    assembly::read_usage(deserializer, &USAGE_NAMES)
}

/// `incomplete_details`, read for its `reason` only: bookkeeping, so any value reads, and a
/// `reason` that is not a string (or details that are not an object) reads as no reason, which
/// `response.incomplete` takes for the output limit, as when the details are missing.
struct IncompleteDetails {
    reason: Option<String>,
}

impl<'de> Deserialize<'de> for IncompleteDetails {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let details = Value::deserialize(deserializer)?;
        let reason = details.get("reason").and_then(Value::as_str);
        Ok(IncompleteDetails {
            reason: reason.map(str::to_owned),
        })
    }
}

/// Decodes one Responses stream. Assembly state belongs to this session only.
///
/// ```
/// let mut decoder = wire_openai::responses::StreamDecoder::default();
/// decoder.feed(concat!(
///     r#"data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"#,
///     r#""delta":"hi"}"#,
///     "\n\n",
/// ).as_bytes())?;
/// decoder.feed(b"data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\"}}\n\n")?;
/// assert!(decoder.is_ended());
/// assert_eq!(decoder.finish()?.text, "hi");
/// # Ok::<(), wire_openai::DecodeError>(())
/// ```
#[derive(Debug)]
pub struct StreamDecoder {
    session: Session,
    by_item: HashMap<String, usize>,
    /// Ordered, so that the call after an output index is found without a scan
    /// ([`StreamDecoder::item_after`]).
    by_output: BTreeMap<usize, usize>,
    /// What the decoder knows of each call's item, by call position.
    call_items: Vec<CallItem>,
    /// A terminal event (`response.completed` or `response.incomplete`) arrived.
    ended: bool,
    /// Whether a text delta (or a `.done` event's text that streamed nothing before) named its
    /// item (`streamed_keyed`), or came without an item id (`streamed_unkeyed`). Which items
    /// streamed their text is in `messages`; a final text adds a part no text of its message
    /// reached only when no text streamed that it cannot be told apart from
    /// ([`StreamDecoder::final_text`]).
    streamed_keyed: bool,
    streamed_unkeyed: bool,
    /// What the decoder knows of each call's argument deltas, by call position.
    replays: Vec<DeltaLog>,
    /// The message items announced or streamed so far, with the text of each of their parts,
    /// found by item id (`message_by_id`) or, for an event that names no item, by output index
    /// (`message_by_output`: the first message an event placed there).
    messages: Vec<MessageParts>,
    message_by_id: HashMap<String, usize>,
    message_by_output: HashMap<usize, usize>,
    /// The message that the final texts naming neither an item nor an output index close.
    nameless_message: Option<usize>,
    /// The highest `sequence_number` so far.
    last_sequence: Option<u64>,
    /// What the stream's numbers tell: once they rise, as native streams' do, and until they
    /// show they are out of order, a delta's number tells a replayed delta from a new one.
    numbering: Numbering,
    /// The reasoning items kept, once the stream has one (boxed: most streams have none, and
    /// the decoder is moved whole).
    reasoning: Option<Box<KeptReasoning>>,
    /// The output indexes of the items that are neither reasoning nor a call (a message, a
    /// hosted tool's call): a reasoning item finished after the items that follow it leads to
    /// the first of them by output index, and is kept only when that is a call.
    other_outputs: BTreeSet<usize>,
    /// The completion of a whole `response` sent in place of the stream, once decoded (boxed:
    /// rare).
    whole: Option<Box<LlmCompletion>>,
}

/// What a [`StreamDecoder`] keeps of the reasoning items ([`REASONING_ITEMS_KEY`]).
#[derive(Debug, Default)]
struct KeptReasoning {
    /// The items kept since the turn's last call or other item, waiting for the call they lead
    /// to, each with its output index.
    pending: Vec<(Option<usize>, Value)>,
    /// By call position, the reasoning items the call keeps, in the order they were kept, each
    /// with its rank: put in order under [`REASONING_ITEMS_KEY`] once, at the terminal event or
    /// at the end ([`StreamDecoder::keep_placed_reasoning`]).
    placed: HashMap<usize, Vec<Placed>>,
    /// The items kept so far, by item id, or by output index for one without: a finished item a
    /// gateway sends again is kept once.
    ids: HashSet<String>,
    indexes: HashSet<usize>,
}

/// A reasoning item a call keeps and its rank: the call's [`REASONING_ITEMS_KEY`] array holds
/// its items by rank, those of one rank in the order they were kept.
///
/// The rule is that an item finished after its call, at output index `i`, goes just before the
/// first item the call keeps whose output index is above `i`, or last. An item's rank is the
/// highest output index among the items before it in the array and itself (`None` while there
/// is none): ranks never fall along the array, and the first item whose output index is above
/// `i` is the first whose rank is above `i`. So the items the call keeps when it is announced
/// (the reasoning that waited for it) are ranked in the order they waited, and an item finished
/// after it is ranked by its own index, after every item of rank `i` or below: sorting the
/// items by rank, stably, once, puts each where the rule put it when it came, in n log n time
/// however the server ordered them (inserting each where it goes, in reverse output order,
/// would move all the others each time).
#[derive(Debug)]
struct Placed {
    rank: Option<usize>,
    item: Value,
}

/// The items a call keeps ([`Placed`]), in the order of its [`REASONING_ITEMS_KEY`] array.
fn in_order(mut placed: Vec<Placed>) -> Vec<Value> {
    placed.sort_by_key(|placed| placed.rank);
    placed.into_iter().map(|placed| placed.item).collect()
}

impl Default for StreamDecoder {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl StreamDecoder {
    /// A decoder with these limits.
    pub fn new(limits: Limits) -> Self {
        Self {
            session: Session::new(limits),
            by_item: HashMap::new(),
            by_output: BTreeMap::new(),
            call_items: Vec::new(),
            ended: false,
            streamed_keyed: false,
            streamed_unkeyed: false,
            replays: Vec::new(),
            messages: Vec::new(),
            message_by_id: HashMap::new(),
            message_by_output: HashMap::new(),
            nameless_message: None,
            last_sequence: None,
            numbering: Numbering::Unproven,
            reasoning: None,
            other_outputs: BTreeSet::new(),
            whole: None,
        }
    }

    /// Feeds bytes as they arrive and returns the display deltas they complete.
    ///
    /// An event that fails (a provider error in the stream, an invalid chunk, a limit) ends the
    /// decode, and nothing after it is decoded. The deltas of the events before it in the same
    /// read are still returned, as `Ok`, so that a sink sees the same deltas however the bytes
    /// were split into reads; the error is then returned by the next `feed` and by
    /// [`StreamDecoder::finish`]. When the read completed no delta before the error, `feed`
    /// returns the error at once. Once failed, every `feed` returns the same error.
    ///
    /// Bytes after the terminal event (see [`StreamDecoder::is_ended`]) are ignored, in its read
    /// or later.
    ///
    /// A body that opens with `{` (past a BOM and whitespace) is a whole `response` sent in
    /// place of the stream: nothing is returned until its JSON closes, then its deltas at once,
    /// as [`decode_response`] gives them (or its error), and the decode ends there. One cut
    /// before its JSON closes is [`DecodeError::Truncated`].
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<CompletionDelta>, DecodeError> {
        self.session.check_failed()?;
        if self.ended {
            return Ok(Vec::new());
        }
        let bytes = match self.session.sort(bytes) {
            Ok(Sorted::Stream(bytes)) => bytes,
            Ok(Sorted::Wait) => return Ok(Vec::new()),
            Ok(Sorted::Whole(body)) => return self.whole(&body),
            Err(error) => return Err(self.session.fail(error)),
        };
        let mut sse = std::mem::take(&mut self.session.sse);
        let limits = self.session.limits;
        let fed = assembly::feed(&mut sse, &limits, &bytes, |event, deltas| {
            self.event(event, deltas)
        });
        self.session.sse = sse;
        self.session.settle(fed)
    }

    /// Decodes a whole `response` sent in place of the stream ([`decode_response`]), which then
    /// ends the decode: its deltas go out at once, and `finish` gives its completion.
    #[cold]
    fn whole(&mut self, body: &[u8]) -> Result<Vec<CompletionDelta>, DecodeError> {
        match decode_response(body, self.session.limits) {
            Ok(answer) => {
                self.whole = Some(Box::new(answer.completion));
                self.ended = true;
                Ok(answer.deltas)
            }
            Err(error) => Err(self.session.fail(error)),
        }
    }

    /// Whether the stream's terminal event, `response.completed` or `response.incomplete`, has
    /// arrived: from then on the stream is complete as far as the wire goes, and
    /// [`StreamDecoder::finish`] will not call it truncated. (`response.failed`, and a terminal
    /// event whose `response` holds an `error` or says `status: "failed"`, is an error instead,
    /// see [`StreamDecoder::is_failed`]; a gateway's `[DONE]` alone does not end a
    /// Responses stream.) Later bytes are ignored, so a caller may stop reading here: a
    /// connection that stays open or breaks after it has lost nothing.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Whether the stream has said how the turn ended (a finish reason, or a terminal event): a
    /// stream cut after that is whole as far as the wire goes, and [`StreamDecoder::finish`]
    /// answers it rather than calling it truncated (only a later usage report may be missing).
    pub fn has_finished(&self) -> bool {
        self.session.finish_reason.is_some()
    }

    /// The SSE events read so far, each a complete event with data whether or not it gave a
    /// delta (a role-only or usage chunk, an event type the decoder ignores): the server
    /// answering. Comments (`: keep-alive`), events with a blank payload (`data:` alone, which
    /// the decoder skips), blank lines and the bytes of an event not yet ended are not counted, so
    /// a caller's idle timeout can wait for this to grow rather than for any byte
    /// ([`crate::sse::SseParser::events`]). A whole answer sent in place of the stream has no
    /// events: each read that brings some of it counts as one.
    pub fn events(&self) -> u64 {
        self.session.events()
    }

    /// Whether decoding stopped at an error that `feed` returned with the deltas before it
    /// (or at once): [`StreamDecoder::finish`] returns that error, and no later bytes are
    /// decoded, so a caller need not wait for any.
    pub fn is_failed(&self) -> bool {
        self.session.failed.is_some()
    }

    /// The call an event is about: by its item id (`item.id` on the `output_item.*` events, which
    /// have no `item_id`; `item_id` on the others), then by its output index.
    fn position(&self, event: &Event<'_>) -> Option<usize> {
        let item_id = event.item.as_ref().and_then(|item| item.id.as_deref());
        [item_id, event.item_id.as_deref()]
            .into_iter()
            .flatten()
            .find_map(|id| self.by_item.get(id))
            .or_else(|| event.output_index.and_then(|i| self.by_output.get(&i)))
            .copied()
    }

    fn event(&mut self, sse: &SseEvent<'_>, deltas: &mut Deltas) -> Result<(), DecodeError> {
        if self.session.skips(sse) || self.ended || sse.data.trim_ascii() == "[DONE]" {
            return Ok(());
        }
        let invalid = |e: serde_json::Error| DecodeError::InvalidChunk {
            offset: sse.offset,
            reason: ai_core::describe_json_error(&e),
        };
        // Every key is read first; an event that fails so is read again knowing its type, so a
        // key its type does not read fails nothing, whatever it holds.
        let mut event = match Event::parse(sse.data, None) {
            Ok(event) => event,
            Err(e) => match serde_json::from_str::<Shallow<'_>>(sse.data) {
                Ok(shallow) if shallow.read_alone() => shallow.event(),
                Ok(shallow) => {
                    let read = EventField::read_by(shallow.kind.as_deref());
                    Event::parse(sse.data, Some(read)).map_err(invalid)?
                }
                Err(_) => return Err(invalid(e)),
            },
        };
        if event.kind.as_deref() == Some("response.output_item.done")
            && event
                .item
                .as_ref()
                .is_some_and(|item| item.kind == "reasoning")
        {
            event.reasoning = raw_item(sse.data);
            refuse_deep_reasoning(event.reasoning.as_ref()).map_err(|reason| {
                DecodeError::InvalidChunk {
                    offset: sse.offset,
                    reason,
                }
            })?;
        }
        if let Some((items, raw)) = self.snapshot(&event, sse.data, sse.offset)? {
            let offset = sse.offset;
            self.finished_output(items, raw, offset, deltas, |reason| {
                DecodeError::InvalidChunk { offset, reason }
            })?;
        }
        if let Some(kind) = event.kind.as_deref()
            && Ending::of(kind, event.response.as_ref()).is_some()
        {
            self.place_pending_reasoning(sse.data);
        }
        self.apply(event, sse.offset, deltas)
    }

    /// The items of a terminal event's `response` snapshot (`data` is the event's text), read
    /// only when the stream assembled no text and no call before it and the event is no error:
    /// a server that skips the item and delta events sends its answer there alone
    /// (NVIDIA-NeMo/Switchyard#777, #796). After streamed text or calls the snapshot adds
    /// nothing (OpenAI's repeats what streamed; a gateway's may list only some of it, or items
    /// under other ids, Wei-Shaw/sub2api#6118), so it is not read. `None` when there is nothing
    /// to read: no snapshot, one that is not an object, or a `response` given twice (which one
    /// counts cannot be told, as for its bookkeeping). A snapshot read is the whole response it
    /// is: one whose `response` holds an `error` is that error, as [`decode_response`] gives
    /// it, and one whose `output` cannot be read as a whole response's is an error at `offset`.
    fn snapshot(
        &self,
        event: &Event<'_>,
        data: &str,
        offset: usize,
    ) -> Result<Option<Snapshot>, DecodeError> {
        let ending = event
            .kind
            .as_deref()
            .and_then(|kind| Ending::of(kind, event.response.as_ref()));
        let terminal = matches!(ending, Some(Ending::Completed | Ending::Incomplete));
        let assembled = !self.session.calls.calls.is_empty() || !self.session.text.is_empty();
        let error = event.error.as_ref().and_then(DecodeError::from_wire);
        if !terminal || assembled || error.is_some() {
            return Ok(None);
        }
        let Some(response) = serde_json::from_str::<Terminal<'_>>(data)
            .ok()
            .and_then(|terminal| terminal.response)
            .map(|response| response.get())
            .filter(|response| response.starts_with('{'))
        else {
            return Ok(None);
        };
        let failed = event.response.as_ref().and_then(|r| r.error.as_ref());
        if let Some(error) = failed.and_then(DecodeError::from_response) {
            return Err(error);
        }
        let snapshot = serde_json::from_str::<SnapshotOutput>(response).map_err(|e| {
            DecodeError::InvalidChunk {
                offset,
                reason: format!(
                    "the `output` of its `response`: {}",
                    ai_core::describe_json_error(&e)
                ),
            }
        })?;
        let items = snapshot.output.unwrap_or_default();
        let raw = raw_output(&items, response);
        Ok(Some((items, raw)))
    }

    /// Applies a finished response's `output` (`raw`: see [`raw_output`]), each item as the
    /// `response.output_item.done` a stream carries at its output index, so a whole response
    /// and a terminal snapshot are read as the events of a stream are. Two calls under one
    /// `call_id` or item id are an error ([`distinct_calls`]); a reasoning item to keep that
    /// nests too deep is refused by `too_deep`, given what is wrong.
    fn finished_output(
        &mut self,
        items: Vec<Item>,
        raw: Vec<Value>,
        offset: usize,
        deltas: &mut Deltas,
        too_deep: impl Fn(String) -> DecodeError,
    ) -> Result<(), DecodeError> {
        distinct_calls(&items)?;
        let mut raw = raw.into_iter();
        for (output_index, item) in items.into_iter().enumerate() {
            let raw = raw.next().filter(|_| item.kind == "reasoning");
            refuse_deep_reasoning(raw.as_ref())
                .map_err(|reason| too_deep(format!("output item {output_index}: {reason}")))?;
            let done = Event {
                output_index: Some(output_index),
                reasoning: raw,
                item: Some(item),
                ..Event::of(Some(Cow::Borrowed("response.output_item.done")))
            };
            self.apply(done, offset, deltas)?;
        }
        Ok(())
    }

    /// Applies one decoded event; `offset` is where it began in the stream (0 for the events a
    /// whole response is read as).
    fn apply(
        &mut self,
        event: Event<'_>,
        offset: usize,
        deltas: &mut Deltas,
    ) -> Result<(), DecodeError> {
        let response_id = event.response.as_ref().and_then(|r| r.id.as_deref());
        self.session
            .saw_response_id(response_id.filter(|id| !id.is_empty()));
        // The `error` event, or any payload with a truthy `error` (as openai-python reads every
        // stream), including a gateway's bare `{"error": …}` with no `type`.
        // An `error` event with no message (`null`, or empty) still says what went wrong by its
        // `code`, which the error keeps.
        if event.kind.as_deref() == Some("error") {
            return Err(match event.message.filter(|m| !m.is_empty()) {
                Some(message) => DecodeError::ProviderError { message },
                None => event
                    .error
                    .as_ref()
                    .and_then(DecodeError::from_wire)
                    .unwrap_or_else(|| DecodeError::from_code(event.code.as_ref())),
            });
        }
        if let Some(error) = event.error.as_ref().and_then(DecodeError::from_wire) {
            return Err(error);
        }
        let Some(kind) = event.kind.as_deref() else {
            return Err(DecodeError::InvalidChunk {
                offset,
                reason: "missing field `type`".into(),
            });
        };
        // Whether the event's number is above every earlier one (or either is unknown); the
        // first that is shows the numbers rise.
        let in_order = self
            .numbering
            .follow(event.sequence_number, self.last_sequence);
        let sequence = event
            .sequence_number
            .map(|number| Sequence { number, in_order });
        self.last_sequence = self.last_sequence.max(event.sequence_number);
        if !EVENTS_READ.contains(&kind) {
            return Ok(());
        }
        match kind {
            // A refusal streams in place of text: shown and kept as the answer's text.
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(delta) = event.delta.shown().filter(|d| !d.is_empty()) {
                    match event.item_id {
                        Some(_) => self.streamed_keyed = true,
                        None => self.streamed_unkeyed = true,
                    }
                    let part = match kind {
                        "response.refusal.delta" => PartKind::Refusal,
                        _ => PartKind::Text,
                    };
                    self.text_delta(&event, part, &delta, sequence, deltas);
                }
            }
            "response.output_item.added" => {
                if let Some(item) = event.item.as_ref().filter(|i| i.kind == "function_call") {
                    self.open(item, event.output_index, in_order, deltas)?;
                }
                if let Some(item) = event.item.as_ref().filter(|i| i.kind == "message") {
                    self.announce_message(item, event.output_index, in_order);
                }
                if let Some(item) = &event.item {
                    self.other_item(item, event.output_index);
                }
            }
            "response.content_part.added" => self.announce_part(&event),
            // A part's final text: what the deltas did not bring (or all of it, when none came)
            // is kept.
            "response.output_text.done" => {
                if let Some(text) = event.text.shown() {
                    self.closed_part(&event, PartKind::Text, &text, deltas);
                }
            }
            "response.refusal.done" => {
                if let Some(refusal) = event.refusal.shown() {
                    self.closed_part(&event, PartKind::Refusal, &refusal, deltas);
                }
            }
            "response.content_part.done" => {
                if let Some((part, text)) = event.part.as_ref().and_then(item::kind_and_text) {
                    self.closed_part(&event, part, text, deltas);
                }
            }
            "response.function_call_arguments.delta" => {
                let position = self.position(&event).ok_or_else(|| unknown_item(offset))?;
                let fragment = event.delta.arguments().unwrap_or_default();
                self.argument_delta(position, &fragment, sequence, deltas)?;
            }
            "response.function_call_arguments.done" => {
                let position = self.position(&event).ok_or_else(|| unknown_item(offset))?;
                self.finished_call(position);
                // Kept for a call nothing else names by the end (see `CallItem::done_name`).
                if let Some(call) = self.call_items.get_mut(position)
                    && call.done_name.is_none()
                {
                    call.done_name = event
                        .name
                        .shown()
                        .filter(|n| !n.is_empty())
                        .map(Cow::into_owned);
                }
                if let Some(arguments) = event.arguments.0 {
                    self.replace_arguments(position, &arguments)?;
                }
            }
            "response.output_item.done" => {
                if let Some(item) = event.item.as_ref().filter(|i| i.kind == "reasoning") {
                    self.finished_reasoning(item, event.output_index, event.reasoning);
                }
                if let Some(item) = event.item.as_ref().filter(|i| i.kind == "message") {
                    self.finished_message(item, event.output_index, deltas);
                }
                if let Some(item) = &event.item {
                    self.other_item(item, event.output_index);
                }
                if let Some(item) = event.item.as_ref().filter(|i| i.kind == "function_call") {
                    // The final item is authoritative; a call first seen here (a gateway that
                    // sends only finished items) is opened from it.
                    let position = match self.known_call(item, event.output_index)? {
                        Some(position) => position,
                        None => self.open(item, event.output_index, in_order, deltas)?,
                    };
                    self.finished_call(position);
                    if let Some(call) = self.call_items.get_mut(position) {
                        call.item_done = true;
                    }
                    if let Some(arguments) = &item.arguments {
                        self.replace_arguments(position, arguments)?;
                    }
                    // Id and name only fill what is still unknown; no new display delta.
                    self.session.calls.apply(
                        position,
                        item.call_id.as_deref(),
                        item.name.as_deref(),
                        "",
                        &mut Deltas::default(),
                    )?;
                    if let Some(call) = self.session.calls.calls.get_mut(position) {
                        call.incomplete = item.status.as_deref() == Some("incomplete");
                    }
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                self.terminal(kind, event.response.as_ref())?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Opens the call of a `function_call` item, keyed by its item id and output index.
    ///
    /// An item that is already open ([`StreamDecoder::known_call`]) is not opened twice. The same
    /// item id again (a gateway that replays `response.output_item.added`) is that call, unless
    /// the item's `call_id` or function is another; so is another item with a `call_id`
    /// an open call already has, unless it names another function (a gateway that re-keys the
    /// items it replays: `call_id` is what links a result to its call, so two calls under one
    /// cannot both be answered, and a history may not repeat an id). The repeat is keyed under
    /// its item id and output index too, so its events reach the call; it only fills an id or a
    /// name still unknown, and its `arguments` are not appended (the call's arguments are its
    /// deltas, and the final item's text replaces them). A repeat of a call that already has
    /// arguments starts a replay of them (see [`DeltaLog::fresh`]), since a gateway
    /// that re-sends the item may re-send its deltas too. Another function under a call id
    /// already taken is [`DecodeError::InvalidToolCall`]: which of the two calls the id means
    /// cannot be told, and running either would be a guess.
    ///
    /// `in_order` says whether the event's `sequence_number` is above every earlier one: a new
    /// call announced under a number that is not shows that the stream's numbers cannot tell a
    /// replay (see [`DeltaLog::fresh`]).
    fn open(
        &mut self,
        item: &Item,
        output_index: Option<usize>,
        in_order: bool,
        deltas: &mut Deltas,
    ) -> Result<usize, DecodeError> {
        let open = self.known_call(item, None)?;
        if let Some(position) = open {
            if let Some(id) = &item.id {
                self.by_item.entry(id.clone()).or_insert(position);
                if let Some(call) = self.call_items.get_mut(position) {
                    call.keyed = true;
                }
            }
            if let Some(index) = output_index {
                self.by_output.entry(index).or_insert(position);
            }
            self.session.calls.apply(
                position,
                item.call_id.as_deref(),
                item.name.as_deref(),
                "",
                deltas,
            )?;
            let (log, arguments) = self.argument_deltas(position);
            log.start_replay(arguments, item.arguments.as_deref().unwrap_or(""));
            return Ok(position);
        }
        let position = self.session.calls.open()?;
        if let Some(kept) = self.reasoning.as_mut() {
            // The reasoning waiting for a call, but any that comes after this one by output
            // index (finished before it was announced), which leads to a later item. One at
            // the same index (a server that numbers every item alike) is taken in arrival
            // order, as before.
            let (reasoning, later): (Vec<_>, Vec<_>) = std::mem::take(&mut kept.pending)
                .into_iter()
                .partition(|(at, _)| match (at, output_index) {
                    (Some(at), Some(index)) => *at <= index,
                    _ => true,
                });
            kept.pending = later;
            if !reasoning.is_empty() {
                let mut highest = None;
                let placed = reasoning.into_iter().map(|(index, item)| {
                    highest = highest.max(index);
                    Placed {
                        rank: highest,
                        item,
                    }
                });
                kept.placed.insert(position, placed.collect());
            }
        }
        self.numbering.broken_unless(in_order);
        self.call_items.push(CallItem {
            keyed: item.id.is_some(),
            finished: false,
            item_done: false,
            done_name: None,
        });
        // An item id or output index another call had now names this one: the events after
        // an announcement are about the item it announced.
        if let Some(id) = &item.id {
            self.by_item.insert(id.clone(), position);
        }
        if let Some(index) = output_index {
            self.by_output.insert(index, position);
        }
        self.session.calls.apply(
            position,
            item.call_id.as_deref(),
            item.name.as_deref(),
            item.arguments.as_deref().unwrap_or(""),
            deltas,
        )?;
        Ok(position)
    }

    /// The open call a `function_call` item is, if any: the call its item id names, else the
    /// one with its `call_id` ([`StreamDecoder::call_with_call_id`]), else, when `output_index`
    /// is given (a finished item), the call at that index, unless the item has an item id and
    /// that call was announced under another. A call the item id or index names is skipped when
    /// the item shows it is another call: another `call_id` than the call's, or another
    /// function (servers that reuse item ids or output indexes, WIRE-FORMATS §3.3).
    fn known_call(
        &self,
        item: &Item,
        output_index: Option<usize>,
    ) -> Result<Option<usize>, DecodeError> {
        let calls = &self.session.calls.calls;
        let another_call = |position: usize| {
            let differs = |theirs: Option<&str>, ours: &str| {
                theirs
                    .is_some_and(|theirs| !theirs.is_empty() && !ours.is_empty() && theirs != ours)
            };
            calls.get(position).is_none_or(|call| {
                differs(item.call_id.as_deref(), &call.id)
                    || differs(item.name.as_deref(), &call.name)
            })
        };
        let by_id = item.id.as_deref().and_then(|id| self.by_item.get(id));
        if let Some(&position) = by_id.filter(|&&position| !another_call(position)) {
            return Ok(Some(position));
        }
        if let Some(position) = self.call_with_call_id(item)? {
            return Ok(Some(position));
        }
        let by_index = output_index.and_then(|index| self.by_output.get(&index));
        Ok(by_index.copied().filter(|&position| {
            // An item with an id of its own is not a call announced under another id.
            let keyed = self.call_items.get(position).is_some_and(|call| call.keyed);
            let other_item = item.id.is_some() && keyed;
            !other_item && (!another_call(position) || self.finishes_renamed(item, position))
        }))
    }

    /// Whether a finished item at the output index of the call at `position` is that call
    /// finishing under a call id minted anew, though its call id is another: vLLM finishes a
    /// gpt-oss call with an item that has no item id and a fresh `call_id`
    /// (`emit_function_call_done_events` in vllm `entrypoints/openai/responses/
    /// streaming_events.py`). So it is when the item has no item id, the call has not had its
    /// finished item yet, and the item names the call's function with the call's arguments, as
    /// they stand: anything else is a call of its own.
    fn finishes_renamed(&self, item: &Item, position: usize) -> bool {
        let Some(call) = self.session.calls.calls.get(position) else {
            return false;
        };
        let unfinished = self
            .call_items
            .get(position)
            .is_some_and(|call| !call.item_done);
        unfinished
            && item.id.is_none()
            && item
                .name
                .as_deref()
                .is_some_and(|name| !name.is_empty() && name == call.name)
            && item.arguments.as_deref() == Some(call.arguments.as_str())
    }

    /// The open call whose id is this item's `call_id`, if there is one; an error if the item
    /// names another function than that call.
    fn call_with_call_id(&self, item: &Item) -> Result<Option<usize>, DecodeError> {
        let Some(call_id) = item.call_id.as_deref().filter(|id| !id.is_empty()) else {
            return Ok(None);
        };
        let calls = &self.session.calls.calls;
        let Some(position) = calls.iter().position(|call| call.id == call_id) else {
            return Ok(None);
        };
        let another_function = item
            .name
            .as_deref()
            .is_some_and(|name| !name.is_empty() && !calls[position].name.is_empty())
            && item.name.as_deref() != Some(calls[position].name.as_str());
        if another_function {
            return Err(DecodeError::InvalidToolCall {
                index: position,
                reason: "another item uses its call id for another function".into(),
            });
        }
        Ok(Some(position))
    }

    /// Keeps a finished reasoning item (`raw`, as sent) for the call that follows it, unless it
    /// has no `encrypted_content` ([`keeps_reasoning`]) or was kept already (the same item id,
    /// or for an item without one the same output index, as a gateway that replays events sends
    /// it again).
    ///
    /// The call that follows it is the next call to be announced, unless an item already
    /// announced comes after it by output index (a server that finishes the reasoning after the
    /// items it leads to, as OpenRouter does: earendil-works/pi#4170): then the first of those
    /// is the item it leads to, and it goes on that call, in output order among the reasoning
    /// the call keeps, or on none when that item is not a call.
    fn finished_reasoning(&mut self, item: &Item, output_index: Option<usize>, raw: Option<Value>) {
        let Some(raw) = raw.filter(keeps_reasoning) else {
            return;
        };
        let following = output_index.map(|index| (index, self.item_after(index)));
        let kept = self.reasoning.get_or_insert_default();
        let fresh = match (&item.id, output_index) {
            (Some(id), _) => kept.ids.insert(id.clone()),
            (None, Some(index)) => kept.indexes.insert(index),
            (None, None) => true,
        };
        if !fresh {
            return;
        }
        match following {
            Some((index, Some(Following::Call(position)))) => {
                kept.placed.entry(position).or_default().push(Placed {
                    rank: Some(index),
                    item: raw,
                });
            }
            Some((_, Some(Following::Other))) => {}
            _ => kept.pending.push((output_index, raw)),
        }
    }

    /// Keeps the reasoning still waiting for a call at the terminal event (`data` is its text) on
    /// the call the event's `response` snapshot puts after it: a reasoning item streamed at an
    /// output index that disagrees with the snapshot (numbered or finished past the call it
    /// leads to) would otherwise be kept by no call. The snapshot is the response's own order,
    /// and each item is found in it by its item id: one the snapshot does not list, or follows
    /// with anything but a call of the stream ([`StreamDecoder::known_call`]), stays unkept. It
    /// goes among the reasoning the call keeps in the snapshot's order. The snapshot is
    /// bookkeeping here: one that cannot be read places nothing and fails nothing.
    fn place_pending_reasoning(&mut self, data: &str) {
        if self
            .reasoning
            .as_ref()
            .is_none_or(|kept| kept.pending.is_empty())
        {
            return;
        }
        let Some(output) = serde_json::from_str::<Terminal<'_>>(data)
            .ok()
            .and_then(|terminal| terminal.response)
            .and_then(|response| serde_json::from_str::<SnapshotOutput>(response.get()).ok())
            .and_then(|snapshot| snapshot.output)
        else {
            return;
        };
        // Each reasoning item the snapshot lists, by its item id (the first listing): where it
        // is, and the item it leads to, the first after it that is not reasoning. One pass, so
        // that placing costs the snapshot's length once, however many items wait.
        let mut leads: HashMap<&str, (usize, Option<&Item>)> = HashMap::new();
        let mut next = None;
        for (at, item) in output.iter().enumerate().rev() {
            if item.kind != "reasoning" {
                next = Some(item);
            } else if let Some(id) = item.id.as_deref() {
                leads.insert(id, (at, next));
            }
        }
        let lead = |item: &Value| {
            let id = item.get("id").and_then(Value::as_str)?;
            leads.get(id).copied()
        };
        // The waiting items each call takes, with where the snapshot lists each.
        let mut taken: HashMap<usize, Vec<(usize, Value)>> = HashMap::new();
        let pending = self
            .reasoning
            .as_mut()
            .map(|kept| std::mem::take(&mut kept.pending))
            .unwrap_or_default();
        for (_, raw) in pending {
            let call = lead(&raw).and_then(|(at, next)| {
                let call = next.filter(|item| item.kind == "function_call")?;
                let position = self.known_call(call, None).ok().flatten()?;
                Some((at, position))
            });
            if let Some((at, position)) = call {
                taken.entry(position).or_default().push((at, raw));
            }
        }
        let Some(kept) = self.reasoning.as_mut() else {
            return;
        };
        for (position, mut taken) in taken {
            let Some(call) = self.session.calls.calls.get_mut(position) else {
                continue;
            };
            // Merged in one pass: each taken item goes just before the first item the call
            // keeps that the snapshot lists after it.
            taken.sort_by_key(|&(at, _)| at);
            let mut taken = taken.into_iter().peekable();
            let placed = in_order(kept.placed.remove(&position).unwrap_or_default());
            let mut items = Vec::with_capacity(placed.len() + taken.len());
            for item in placed {
                if let Some((after, _)) = lead(&item) {
                    while let Some((_, raw)) = taken.next_if(|&(at, _)| at < after) {
                        items.push(raw);
                    }
                }
                items.push(item);
            }
            items.extend(taken.map(|(_, raw)| raw));
            call.provider_fields
                .insert(REASONING_ITEMS_KEY.into(), Value::Array(items));
        }
    }

    /// Puts the reasoning items each call keeps under [`REASONING_ITEMS_KEY`] in its
    /// `provider_fields`, in order ([`Placed`]), once the stream is decoded.
    fn keep_placed_reasoning(&mut self) {
        let Some(kept) = self.reasoning.as_mut() else {
            return;
        };
        for (position, placed) in kept.placed.drain() {
            if let Some(call) = self.session.calls.calls.get_mut(position) {
                call.provider_fields
                    .insert(REASONING_ITEMS_KEY.into(), Value::Array(in_order(placed)));
            }
        }
    }

    /// The first item announced so far whose output index is above `index`: a call (its
    /// position) or another item. A reasoning item at `index` leads to it.
    fn item_after(&self, index: usize) -> Option<Following> {
        let call = self
            .by_output
            .range((Bound::Excluded(index), Bound::Unbounded))
            .next();
        let other = self
            .other_outputs
            .range((Bound::Excluded(index), Bound::Unbounded))
            .next();
        match (call, other) {
            (Some((at, _)), Some(other)) if at > other => Some(Following::Other),
            (Some((_, &position)), _) => Some(Following::Call(position)),
            (None, Some(_)) => Some(Following::Other),
            (None, None) => None,
        }
    }

    /// An item that is neither reasoning nor a call (a message, a hosted tool's call) ends the
    /// reasoning before it: that reasoning led to this item, not to a later call, and is not
    /// kept. Its output index is recorded, for reasoning finished after it
    /// ([`StreamDecoder::finished_reasoning`]).
    fn other_item(&mut self, item: &Item, output_index: Option<usize>) {
        if item.kind == "reasoning" || item.kind == "function_call" {
            return;
        }
        if let Some(index) = output_index {
            self.other_outputs.insert(index);
        }
        if let Some(kept) = &mut self.reasoning {
            kept.pending.clear();
        }
    }

    /// Ends the turn at a terminal event of type `kind`, as [`Ending::of`] reads it with its
    /// `response`. A response that holds an `error` ([`DecodeError::from_response`]) is that
    /// error, whatever the event and whatever streamed before it: the provider said it failed. A
    /// failed one without is the error `the response failed`. An incomplete one (for any
    /// reason) marks every call incomplete: the response stopped before it was done, so no call
    /// of it is whole (a reason this crate does not know is not a cut `finish` sees).
    fn terminal(&mut self, kind: &str, response: Option<&Response>) -> Result<(), DecodeError> {
        if let Some(error) = response
            .and_then(|r| r.error.as_ref())
            .and_then(DecodeError::from_response)
        {
            return Err(error);
        }
        let finish_reason = match Ending::of(kind, response) {
            Some(Ending::Failed) => {
                return Err(DecodeError::ProviderError {
                    message: "the response failed".into(),
                });
            }
            Some(Ending::Incomplete) => {
                for call in &mut self.session.calls.calls {
                    call.incomplete = true;
                }
                let reason = response
                    .and_then(|r| r.incomplete_details.as_ref())
                    .and_then(|d| d.reason.as_deref());
                match reason {
                    Some("content_filter") => FinishReason::ContentFilter,
                    Some("max_output_tokens") | None => FinishReason::Length,
                    Some(other) => FinishReason::Other(other.to_owned()),
                }
            }
            Some(Ending::Completed) | None => FinishReason::Stop,
        };
        self.ended = true;
        self.session.finish_reason = Some(finish_reason);
        if let Some(usage) = response.and_then(|r| r.usage.as_deref()) {
            self.session.report_usage(*usage);
        }
        Ok(())
    }

    /// Records that the call at `position` was finished: a `.done` event or its finished item
    /// arrived.
    fn finished_call(&mut self, position: usize) {
        if let Some(call) = self.call_items.get_mut(position) {
            call.finished = true;
        }
    }

    /// Resolves the completion, once. A decoder that failed returns the error that stopped it
    /// (see [`StreamDecoder::feed`]). Without a terminal event the stream is
    /// [`DecodeError::Truncated`]; an incomplete response (for any reason) marks every call
    /// incomplete. So is a call that was announced and then got no arguments and no `.done`
    /// event or finished item: it was never finished, and running it with `{}` would be a
    /// guess. A call item without a `call_id` gets a deterministic id, as in
    /// [`crate::chat::StreamDecoder::finish`], seeded with the `response.id`.
    pub fn finish(mut self) -> Result<LlmCompletion, DecodeError> {
        if let Some(completion) = self.whole.take() {
            return Ok(*completion);
        }
        let calls = self.session.calls.calls.iter_mut();
        for (call, item) in calls.zip(&mut self.call_items) {
            if !item.finished && call.arguments.trim().is_empty() {
                call.incomplete = true;
            }
            if call.name.is_empty()
                && let Some(name) = item.done_name.take()
            {
                call.name = name;
            }
        }
        self.keep_placed_reasoning();
        self.session.finish(self.ended)
    }
}

/// How a response ended, from the best to the worst.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ending {
    Completed,
    Incomplete,
    Failed,
}

impl Ending {
    /// How the response of a terminal event of type `kind` ended: as the type names it, or
    /// worse when its `response`'s `status` says so. A `response.completed` whose snapshot says
    /// `incomplete` (or `failed`) is not read as a whole turn: the status is the response's own
    /// account, as [`decode_response`] reads it, and taking the better of the two could run a
    /// call cut short. `None` for any other event.
    fn of(kind: &str, response: Option<&Response>) -> Option<Self> {
        let named = match kind {
            "response.completed" => Self::Completed,
            "response.incomplete" => Self::Incomplete,
            "response.failed" => Self::Failed,
            _ => return None,
        };
        let status = match response.and_then(|r| r.status.as_deref()) {
            Some("incomplete") => Self::Incomplete,
            Some("failed") => Self::Failed,
            _ => Self::Completed,
        };
        Some(named.max(status))
    }
}

/// The item a reasoning item leads to, by output index ([`StreamDecoder::item_after`]).
enum Following {
    /// The call at this position.
    Call(usize),
    /// An item that is not a call.
    Other,
}

/// What the decoder knows of one call's item.
#[derive(Debug)]
struct CallItem {
    /// It was announced under an item id: a finished item with an id of its own is never this
    /// call by its output index alone.
    keyed: bool,
    /// A `response.function_call_arguments.done` event or the finished item arrived.
    finished: bool,
    /// Its finished item (`response.output_item.done`) arrived.
    item_done: bool,
    /// The first non-empty `name` a `response.function_call_arguments.done` event carried: the
    /// call's name only when nothing else (its announcement, its finished item) named it by the
    /// end ([`StreamDecoder::finish`]). It never tells calls apart, so a `.done` event naming
    /// another function than the finished item never splits one call into two.
    done_name: Option<String>,
}

fn unknown_item(offset: usize) -> DecodeError {
    DecodeError::InvalidChunk {
        offset,
        reason: "arguments for an item that was never added".into(),
    }
}

/// The event types [`StreamDecoder`] reads; it skips any other (`response.created`,
/// `response.in_progress`, reasoning summaries, MCP and hosted tools' progress, types added
/// later), but for the response id, the number and the `error` every event may carry.
/// `StreamDecoder::apply` skips every type not listed before it reads the type, so an arm
/// added there without its type here is never reached.
const EVENTS_READ: [&str; 14] = [
    "error",
    "response.output_text.delta",
    "response.refusal.delta",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.done",
    "response.refusal.done",
    "response.content_part.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// An event that failed to parse as an [`Event`], read for what every event may carry: its
/// `type`, its `error` and its `sequence_number`. Every other value is skipped without descending
/// into it, which serde_json does at any depth. Only read when the event's own parse failed, so
/// it costs nothing on the way of every event.
struct Shallow<'a> {
    kind: Option<Cow<'a, str>>,
    error: Option<Value>,
    /// Read as an [`Event`]'s is: anything but a whole number, or a number given twice, reads as
    /// absent.
    sequence_number: Option<u64>,
}

impl<'a> Shallow<'a> {
    /// Whether the event is read for these fields alone, as the event it is: one with an `error`
    /// (a truthy one, [`DecodeError::from_wire`], as on any event: openai-python raises on any
    /// payload with one), which is that error whatever else failed; or one of a type the
    /// decoder does not read (not in [`EVENTS_READ`]), which holds nothing the answer is made
    /// of, so it is skipped as an event of its type is when it parses, its number counted,
    /// whatever failed: it nests deeper than serde_json reads, or a key the read events share
    /// (`item`, `item_id`, `output_index`, `message`, `delta`) holds another type on it or is
    /// given twice. Any other event that failed to parse is read again knowing its type
    /// ([`Event::parse`]), skipping the keys its type does not read: it fails the stream, saying
    /// why, only where a key its type reads fails.
    fn read_alone(&self) -> bool {
        self.error
            .as_ref()
            .and_then(DecodeError::from_wire)
            .is_some()
            || self
                .kind
                .as_deref()
                .is_some_and(|kind| !EVENTS_READ.contains(&kind))
    }

    /// The event with these fields alone.
    fn event(self) -> Event<'a> {
        Event {
            sequence_number: self.sequence_number,
            error: self.error,
            ..Event::of(self.kind)
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Shallow<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ShallowVisitor)
    }
}

/// Reads a [`Shallow`] event: `type` and `error` given twice are an error, as on an [`Event`].
struct ShallowVisitor;

impl<'de> serde::de::Visitor<'de> for ShallowVisitor {
    type Value = Shallow<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Responses stream event")
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Shallow<'de>, M::Error> {
        const NAMES: [&str; 3] = ["type", "error", "sequence_number"];
        let mut shallow = Shallow {
            kind: None,
            error: None,
            sequence_number: None,
        };
        let mut seen = [0u8; 3];
        while let Some(key) = map.next_key_seed(assembly::KeyOf(&NAMES))? {
            let Some(at) = key else {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            };
            seen[at] = seen[at].saturating_add(1);
            if at < 2 && seen[at] > 1 {
                return Err(serde::de::Error::duplicate_field(NAMES[at]));
            }
            match at {
                0 => shallow.kind = map.next_value::<Option<Borrowed<'de>>>()?.map(|b| b.0),
                1 => shallow.error = map.next_value()?,
                _ => shallow.sequence_number = map.next_value::<FromRaw<u64>>()?.0,
            }
        }
        if seen[2] > 1 {
            shallow.sequence_number = None;
        }
        Ok(shallow)
    }
}

/// Decodes a whole Responses stream held in memory, under `limits` ([`Limits::default`] suits
/// most callers): what a [`StreamDecoder`] fed all of `bytes` in one read resolves.
pub fn decode_all(bytes: &[u8], limits: Limits) -> Result<LlmCompletion, DecodeError> {
    let mut decoder = StreamDecoder::new(limits);
    decoder.feed(bytes)?;
    decoder.finish()
}

/// A whole (non-streamed) Responses `response` object (openai-python
/// `types/responses/response.py`): the final items under `output`, and the fields the stream's
/// terminal event carries.
///
/// Read by hand (see [`WholeResponseVisitor`]): its bookkeeping (`id`, `usage`,
/// `incomplete_details`) as a terminal event's `response` is ([`ResponseFields`]), so that a wrong
/// shape or a field given twice reads as absent; `object`, `status`, `output` and `error`, which
/// the answer is made of, given twice are an error naming the key.
struct WholeResponse {
    object: Option<String>,
    status: Option<String>,
    /// `None` when absent or null: then the body is not a response.
    output: Option<Vec<Item>>,
    error: Option<Value>,
    /// `id`, `usage` and `incomplete_details` (its `error` is the one above).
    response: Response,
}

impl<'de> Deserialize<'de> for WholeResponse {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(WholeResponseVisitor)
    }
}

/// Reads a [`WholeResponse`] (see there for fields given twice).
struct WholeResponseVisitor;

impl<'de> serde::de::Visitor<'de> for WholeResponseVisitor {
    type Value = WholeResponse;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Responses response object")
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(
        self,
        mut map: M,
    ) -> Result<WholeResponse, M::Error> {
        // What the answer is made of, then the bookkeeping `ResponseFields` reads.
        const NAMES: [&str; 7] = [
            "object",
            "status",
            "output",
            "error",
            "id",
            "usage",
            "incomplete_details",
        ];
        let mut whole = WholeResponse {
            object: None,
            status: None,
            output: None,
            error: None,
            response: Response::default(),
        };
        let mut fields = ResponseFields::default();
        let mut read = [false; 4];
        while let Some(key) = map.next_key_seed(assembly::KeyOf(&NAMES))? {
            let Some(at) = key else {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            };
            if at < read.len() && std::mem::replace(&mut read[at], true) {
                return Err(serde::de::Error::duplicate_field(NAMES[at]));
            }
            match at {
                0 => whole.object = map.next_value()?,
                1 => whole.status = map.next_value()?,
                2 => whole.output = map.next_value()?,
                3 => whole.error = map.next_value()?,
                // `id`, `usage`, `incomplete_details`: `ResponseFields::NAMES` 0 to 2.
                _ => fields.read(at - read.len(), &mut map)?,
            }
        }
        whole.response = fields.finish();
        Ok(whole)
    }
}

/// Decodes a whole (non-streamed) Responses `response` object, the JSON body
/// (`object: "response"`) a server that ignores `stream: true` answers with.
///
/// The result is what [`StreamDecoder`] resolves for a stream of the same content: the body is read
/// as the events a stream ends with, each item of `output` as its `response.output_item.done` (a
/// `message` item's `output_text` and `refusal` parts are the text; a `function_call` item is a
/// call, its `call_id` the id a result quotes, its `arguments` kept as sent, an object serialized,
/// a missing or empty one `{}`, so invalid JSON is the one call's error where it runs; other
/// items' `arguments` are read by the same rule, and no value in their fields but `type` fails
/// the response; status `incomplete` on an item marks it incomplete), then the terminal event
/// its `status` names: `completed` (or no status) ends the turn, `incomplete` is
/// [`ai_core::FinishReason::Length`] (or `ContentFilter`, as `incomplete_details.reason` says)
/// with every call incomplete, `failed` is the response's error. A call item without a `call_id`
/// gets a deterministic id seeded with the response `id`; two call items under one `call_id` (or
/// one item id) are [`DecodeError::InvalidToolCall`], since `output` lists each call once.
/// `limits` apply as to a stream: `max_total_bytes` bounds the body (checked before it is
/// parsed), and the argument and call limits hold.
///
/// A body with a truthy `error` is [`DecodeError::ProviderError`] (but an object of falsy fields
/// only, `{"code": "", "message": ""}`, which names no failure); anything else that is not a
/// finished response (not JSON, another `object`, no `output`, a status such as `in_progress`
/// or `cancelled`) is [`DecodeError::InvalidBody`], which names what is wrong and never quotes
/// the body.
///
/// ```
/// let body = br#"{"id":"resp_1","object":"response","status":"completed","output":[
///   {"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather",
///    "arguments":"{\"city\":\"Paris\"}","status":"completed"}],
///   "usage":{"input_tokens":20,"output_tokens":9,"total_tokens":29}}"#;
/// let answer = wire_openai::responses::decode_response(body, wire_openai::Limits::default())?;
/// let call = &answer.completion.tool_calls[0];
/// assert_eq!((call.id.as_str(), call.name.as_str()), ("call_1", "get_weather"));
/// assert_eq!(answer.completion.usage.map(|u| u.total_tokens), Some(29));
/// # Ok::<(), wire_openai::DecodeError>(())
/// ```
pub fn decode_response(body: &[u8], limits: Limits) -> Result<WholeAnswer, DecodeError> {
    let text = assembly::whole_body(body, &limits)?;
    let whole: WholeResponse =
        serde_json::from_str(text).map_err(|e| assembly::invalid_body(&e))?;
    if let Some(error) = whole.error.as_ref().and_then(DecodeError::from_response) {
        return Err(error);
    }
    if whole
        .object
        .as_deref()
        .is_some_and(|object| object != "response")
    {
        return Err(DecodeError::InvalidBody {
            reason: "not a Responses response: its `object` is not `response`".into(),
        });
    }
    let Some(output) = whole.output else {
        return Err(DecodeError::InvalidBody {
            reason: "not a Responses response: it has no `output`".into(),
        });
    };
    let terminal = match whole.status.as_deref() {
        Some("completed") | None => "response.completed",
        Some("incomplete") => "response.incomplete",
        Some("failed") => "response.failed",
        Some(_) => {
            return Err(DecodeError::InvalidBody {
                reason: "the response is not finished: its `status` is not `completed`, \
                         `incomplete` or `failed`"
                    .into(),
            });
        }
    };
    let mut decoder = StreamDecoder::new(limits);
    let mut deltas = Deltas::default();
    decoder
        .session
        .saw_response_id(whole.response.id.as_deref().filter(|id| !id.is_empty()));
    let raw = raw_output(&output, text);
    decoder.finished_output(output, raw, 0, &mut deltas, |reason| {
        DecodeError::InvalidBody { reason }
    })?;
    let end = Event {
        response: Some(whole.response),
        ..Event::of(Some(Cow::Borrowed(terminal)))
    };
    decoder.apply(end, 0, &mut deltas)?;
    decoder.keep_placed_reasoning();
    let completion = decoder.session.finish(true)?;
    Ok(WholeAnswer {
        completion,
        deltas: deltas.deltas,
    })
}

/// Refuses a whole response whose `function_call` items repeat a `call_id` or an item id: each
/// item of `output` is a call of its own, and the stream's rule (an item announced again is the
/// call already open) would keep one of them and drop the other. Which call a result under that
/// id answers cannot be told, so it is an error naming the second call, never the id.
fn distinct_calls(output: &[Item]) -> Result<(), DecodeError> {
    let mut call_ids = HashSet::new();
    let mut item_ids = HashSet::new();
    let calls = output.iter().filter(|item| item.kind == "function_call");
    for (position, item) in calls.enumerate() {
        let taken = |id: &Option<String>, seen: &mut HashSet<String>| {
            id.as_deref()
                .filter(|id| !id.is_empty())
                .is_some_and(|id| !seen.insert(id.to_owned()))
        };
        let what = if taken(&item.call_id, &mut call_ids) {
            "call id"
        } else if taken(&item.id, &mut item_ids) {
            "item id"
        } else {
            continue;
        };
        return Err(DecodeError::InvalidToolCall {
            index: position,
            reason: format!("another call of the response has the same {what}"),
        });
    }
    Ok(())
}

/// How a Responses request is built beyond what the [`LlmRequest`] says
/// ([`encode_request_with`]). The default builds the request [`encode_request`] builds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestOptions {
    /// Carry a reasoning model's reasoning from one request of a thread to the next without the
    /// provider storing it (OpenAI's stateless use): the request says `"store": false` and
    /// `"include": ["reasoning.encrypted_content"]`, so each reasoning item comes with its
    /// encrypted reasoning, which the decoders keep on the call it leads to
    /// ([`REASONING_ITEMS_KEY`]); and those items go back, unchanged and in order, just before
    /// their call's `function_call` item. So the model goes on from its own reasoning after each
    /// tool result instead of reasoning again from the start.
    ///
    /// Off by default: OpenAI refuses `include: ["reasoning.encrypted_content"]` for a model that
    /// does not reason (400, "Encrypted content is not supported with this model."), and
    /// `store: false` is a choice about what the provider keeps. Reasoning that led to a text
    /// answer is not sent back (the API needs only the reasoning of the calls). Calls go back
    /// without their `fc_` item ids, as they always do, so a call is never sent "without its
    /// required reasoning item".
    pub stateless_reasoning: bool,
    /// The server takes back only call ids of nine letters and digits (`^[a-zA-Z0-9]{9}$`), as
    /// the chat templates of Mistral's open models demand whichever server runs them
    /// (mistral.rs serves the Responses API too): every `call_id` of the history that is not one
    /// is sent as nine letters and digits derived from it, on the call and on its result, as
    /// [`crate::chat::RequestOptions::mistral_call_ids`] sends them on chat (one rule for both).
    /// Off by default: the ids go as they are, but for those over 64 bytes.
    pub mistral_call_ids: bool,
}

impl RequestOptions {
    /// These options with [`RequestOptions::mistral_call_ids`] set to `on`.
    pub fn with_mistral_call_ids(mut self, on: bool) -> Self {
        self.mistral_call_ids = on;
        self
    }

    /// These options with [`RequestOptions::stateless_reasoning`] set to `on`.
    pub fn with_stateless_reasoning(mut self, on: bool) -> Self {
        self.stateless_reasoning = on;
        self
    }
}

/// `ToolSpec`s as flat Responses function tools. `strict` is always sent: `true` with the strict
/// form of the schema when it has one, else `false` with the schema as is. Two tools under one
/// id are refused by [`encode_request`] ([`EncodeError::DuplicateTool`]), not here.
pub fn encode_tools(specs: &[ToolSpec]) -> Value {
    Value::Array(
        specs
            .iter()
            .map(|spec| {
                let (parameters, strict) = match strict_parameters(&spec.input_schema) {
                    Some(strict) => (strict, true),
                    None => (spec.input_schema.clone(), false),
                };
                json!({
                    "type": "function",
                    "name": spec.id.as_str(),
                    "description": spec.description,
                    "parameters": parameters,
                    "strict": strict,
                })
            })
            .collect(),
    )
}

/// A `tool_choice` as the Responses API takes it: `"auto"`, `"none"`, `"required"`, or
/// `{"type": "function", "name": …}` for one tool. Whether the request offers that tool is
/// checked by [`encode_request`], not here.
pub fn encode_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(id) => json!({"type": "function", "name": id.as_str()}),
    }
}

/// The longest `call_id` the Responses API accepts, in bytes (it counts characters; a byte
/// count never undercounts them): "Invalid 'input[].call_id': string too long. Expected max
/// length 64" (decolua/9router#393, openai/codex#14355 on Azure).
const MAX_CALL_ID_BYTES: usize = 64;

/// The canonical messages as Responses input items, after [`validate_history`] passes. A past
/// call without a name is refused ([`EncodeError::EmptyToolName`]), never sent as `"name": ""`, and
/// so is one with a name providers refuse ([`EncodeError::InvalidToolName`]: not 1 to 64 of
/// `[a-zA-Z0-9_-]`).
///
/// A call id over 64 bytes, which the Responses API refuses (a `ToolCallId` may hold 128
/// characters: another provider's id, or an imported history's), is sent as a short id derived
/// from it, on the call and on its result alike, distinct from every other id sent, and the same
/// on every request of the thread. Every other id is sent as is.
///
/// A past call's `arguments` that are no JSON object are sent as `{}`, as on chat
/// ([`crate::chat::encode_messages`]); arguments that are an object are sent byte-exact. A turn
/// of calls whose text is only whitespace is sent as its calls alone, with no message item.
pub fn encode_input(messages: &[Message]) -> Result<Value, EncodeError> {
    encode_input_with(messages, RequestOptions::default())
}

/// The reasoning items a call keeps ([`REASONING_ITEMS_KEY`]) that can go back: reasoning items
/// with their `encrypted_content` ([`keeps_reasoning`]). Anything else under the key (a thread
/// saved by hand, a value of another shape) is not sent: without the reasoning the request is
/// what it was before reasoning was kept, which the API accepts.
fn reasoning_to_send(provider_fields: &Map<String, Value>) -> impl Iterator<Item = &Value> {
    provider_fields
        .get(REASONING_ITEMS_KEY)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|item| item.get("type").and_then(Value::as_str) == Some("reasoning"))
        .filter(|item| keeps_reasoning(item))
}

/// The canonical messages as Responses input items, as [`encode_input`] sends them, under
/// `options`: with [`RequestOptions::stateless_reasoning`], each call's reasoning items
/// ([`REASONING_ITEMS_KEY`]) go, unchanged and in order, just before its `function_call` item;
/// with [`RequestOptions::mistral_call_ids`], each `call_id` is nine letters and digits.
pub fn encode_input_with(
    messages: &[Message],
    options: RequestOptions,
) -> Result<Value, EncodeError> {
    validate_history(messages)?;
    check_names(messages)?;
    let ids = WireCallIds::for_server(messages, MAX_CALL_ID_BYTES, options.mistral_call_ids);
    let mut items = Vec::new();
    for message in messages {
        match message {
            Message::System { content } => {
                items.push(json!({"type": "message", "role": "system", "content": content}));
            }
            Message::User { content } => {
                items.push(json!({"type": "message", "role": "user", "content": content}));
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                if let Some(content) = sent_text(content) {
                    items.push(json!({"type": "message", "role": "assistant", "content": content}));
                }
                for call in tool_calls {
                    if options.stateless_reasoning {
                        items.extend(reasoning_to_send(&call.provider_fields).cloned());
                    }
                    items.push(json!({
                        "type": "function_call",
                        "call_id": ids.get(&call.id),
                        "name": call.name,
                        "arguments": sent_arguments(&call.arguments),
                    }));
                }
            }
            Message::Tool {
                tool_call_id,
                content,
            } => items.push(json!({
                "type": "function_call_output",
                "call_id": ids.get(tool_call_id),
                "output": content,
            })),
        }
    }
    Ok(Value::Array(items))
}

/// A whole Responses request body.
///
/// Refused, never patched: a request without a model name ([`EncodeError::EmptyModel`]: empty or
/// only whitespace) or without messages ([`EncodeError::NoMessages`]), a history
/// [`validate_history`] refuses ([`EncodeError::History`]) or with a past call that has no name
/// ([`EncodeError::EmptyToolName`]) or a name providers refuse ([`EncodeError::InvalidToolName`]),
/// tools offered twice under one id ([`EncodeError::DuplicateTool`]), and a `tool_choice` the
/// tools cannot satisfy, `required` without
/// tools ([`EncodeError::ToolChoiceWithoutTools`]) or a tool that is not among them
/// ([`EncodeError::ToolChoiceUnknownTool`]). Without tools, `tools`, `tool_choice` and
/// `parallel_tool_calls` are left out (the provider's default choice is then `none`).
///
/// With tools, `parallel_tool_calls` is the request's own when it sets one; when it leaves it
/// `None`, the body says `false` if any tool is sent strict, and leaves the key out otherwise,
/// as [`crate::chat::encode_request`] does.
///
/// `delivery` says how the answer comes: [`Delivery::Stream`] asks for a stream of events
/// (`"stream": true`), [`Delivery::Whole`] for one JSON `response` (`"stream": false`).
pub fn encode_request(
    request: &LlmRequest,
    model: &str,
    delivery: Delivery,
) -> Result<Value, EncodeError> {
    encode_request_with(request, model, delivery, RequestOptions::default())
}

/// A whole Responses request body, as [`encode_request`] builds it, under `options`.
///
/// With [`RequestOptions::stateless_reasoning`] the body also says `"store": false` and
/// `"include": ["reasoning.encrypted_content"]`, and each call's reasoning items go back just
/// before it ([`encode_input_with`]).
///
/// ```
/// # use wire_openai::ai_core::{LlmCaller, LlmRequest, Message, RunId, ToolChoice};
/// # let request = LlmRequest {
/// #     caller: LlmCaller { run_id: RunId::new("run_1").unwrap(), graph: None },
/// #     messages: vec![Message::User { content: "Hi".into() }],
/// #     tools: vec![],
/// #     tool_choice: ToolChoice::Auto,
/// #     parallel_tool_calls: None,
/// # };
/// use wire_openai::Delivery;
/// use wire_openai::responses::{RequestOptions, encode_request_with};
/// let options = RequestOptions::default().with_stateless_reasoning(true);
/// let body = encode_request_with(&request, "o4-mini", Delivery::Stream, options)?;
/// assert_eq!(body["store"], false);
/// assert_eq!(body["include"], serde_json::json!(["reasoning.encrypted_content"]));
/// # Ok::<(), wire_openai::EncodeError>(())
/// ```
pub fn encode_request_with(
    request: &LlmRequest,
    model: &str,
    delivery: Delivery,
    options: RequestOptions,
) -> Result<Value, EncodeError> {
    check_request(model, &request.messages)?;
    check_tools(&request.tool_choice, &request.tools)?;
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    body.insert(
        "input".into(),
        encode_input_with(&request.messages, options)?,
    );
    let stream = delivery == Delivery::Stream;
    body.insert("stream".into(), stream.into());
    if options.stateless_reasoning {
        body.insert("store".into(), false.into());
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if !request.tools.is_empty() {
        let tools = encode_tools(&request.tools);
        // "Structured Outputs is not compatible with parallel function calls": unless the
        // request asks otherwise, a turn with a strict tool makes one call at a time, so the
        // strict schema holds.
        let any_strict = tools
            .as_array()
            .is_some_and(|tools| tools.iter().any(|tool| tool["strict"] == true));
        body.insert("tools".into(), tools);
        body.insert(
            "tool_choice".into(),
            encode_tool_choice(&request.tool_choice),
        );
        let parallel = request
            .parallel_tool_calls
            .or((any_strict).then_some(false));
        if let Some(parallel) = parallel {
            body.insert("parallel_tool_calls".into(), parallel.into());
        }
    }
    Ok(Value::Object(body))
}

//! The OpenAI Responses API: the stream decoder and the request encoders.
//!
//! Calls are keyed by their item id (or output index), never by "the current call"; the call id a
//! result must quote is the item's `call_id`. An item announced again (the same item id, or the
//! same `call_id` and function under another item id, as gateways that replay events send them) is
//! the call already open, never a second call with the same id; another function under a `call_id`
//! already taken is an error. The argument deltas such a gateway re-sends are recognized (by their
//! `sequence_number` while the stream numbers its events in order, else by their text once the
//! item, or a message's part, is announced again) and neither appended nor shown again, so a
//! call's display deltas spell its arguments; a message's text and refusal deltas are told by the
//! same rule, part by part, so the answer's text is neither doubled nor shown twice. A call's `arguments` sent as a JSON object
//! (on an item or on `response.function_call_arguments.done`) are serialized, as on chat, and so
//! are those of the items the decoder does not run (an MCP call's). Only a `function_call` item is
//! held to the types of its fields: on any other item a value of another type in any field but
//! `type` reads as absent rather than failing the stream or the response. Native streams end with
//! a terminal event (`response.completed`, `response.incomplete`, `response.failed`) and no
//! `[DONE]`; a `[DONE]` that a gateway adds is tolerated.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde_json::{Map, Value, json};

use ai_core::{
    CompletionDelta, FinishReason, LlmCompletion, LlmRequest, Message, ToolChoice, ToolSpec, Usage,
    validate_history,
};

use crate::assembly::{self, Deltas, LenientArguments, NotArguments, Session};
use crate::sse::SseEvent;
use crate::strict::strict_parameters;
use crate::{DecodeError, EncodeError, Limits, WholeAnswer};

#[derive(Deserialize)]
struct Event<'a> {
    /// Absent only on a gateway's bare `{"error": …}` payload.
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    output_index: Option<usize>,
    #[serde(default, borrow)]
    item_id: Option<Cow<'a, str>>,
    /// The event's place in the stream (every native event has one, increasing); anything but a
    /// whole number reads as absent, since compatible servers may leave it out or send it in
    /// another form.
    #[serde(default, deserialize_with = "whole_number")]
    sequence_number: Option<u64>,
    /// The part of a message item a text delta belongs to; read as `sequence_number` is, since
    /// it only tells parts apart.
    #[serde(default, deserialize_with = "whole_number")]
    content_index: Option<u64>,
    /// Text on the events read here; other events' `delta` may be anything (see [`Text`]).
    #[serde(default, borrow)]
    delta: Text<'a>,
    /// A string, or an object (serialized); anything else reads as absent.
    #[serde(default, borrow)]
    arguments: LenientArguments<'a>,
    #[serde(default)]
    item: Option<Item>,
    /// A message part (`response.content_part.added`); any JSON, read as [`part_text`] reads it.
    #[serde(default)]
    part: Option<Value>,
    #[serde(default)]
    response: Option<Response>,
    #[serde(default)]
    message: Option<String>,
    /// Some servers nest the `error` event's fields under `error`, or send it as a string.
    #[serde(default)]
    error: Option<Value>,
}

/// `sequence_number` (or `content_index`) as a whole number, or absent whatever else it is: it
/// only helps tell a replayed delta from a new one (see [`DeltaLog::fresh`]), so it never fails
/// an event.
fn whole_number<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    Ok(Value::deserialize(deserializer)?.as_u64())
}

/// A field that is a string on the events the decoder reads, and may be anything on events it
/// skips: versions of the spec typed the `delta` of the reasoning summary and MCP call events as
/// objects. Anything but a string reads as absent, so an event the decoder does not read can never
/// fail the stream.
#[derive(Default)]
struct Text<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = deserializer.deserialize_any(StringVisitor)?;
        Ok(Text(read.ok().flatten()))
    }
}

/// A string field of an item (`id`, `call_id`, `name`, `status`) read without refusing any value:
/// a string, `null` (absent), or [`NotAString`] naming the kind of value it was instead.
struct ItemString(Result<Option<String>, NotAString>);

impl<'de> Deserialize<'de> for ItemString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = deserializer.deserialize_any(StringVisitor)?;
        Ok(ItemString(read.map(|text| text.map(Cow::into_owned))))
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

/// Reads any JSON value: a string as sent, `null` as absent, anything else (consumed whole) as
/// [`NotAString`], for the caller to ignore or refuse.
struct StringVisitor;

impl<'de> Visitor<'de> for StringVisitor {
    type Value = Result<Option<Cow<'de, str>>, NotAString>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Ok(Some(Cow::Borrowed(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Ok(Some(Cow::Owned(v.to_owned()))))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Ok(Some(Cow::Owned(v))))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Ok(None))
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Ok(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Err(NotAString("boolean")))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Err(NotAString("integer")))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Err(NotAString("integer")))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Err(NotAString("floating point")))
    }
    fn visit_seq<S: de::SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(Err(NotAString("sequence")))
    }
    fn visit_map<M: de::MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        while map
            .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Err(NotAString("map")))
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
struct Item {
    kind: String,
    id: Option<String>,
    call_id: Option<String>,
    name: Option<String>,
    /// A string, or an object (serialized), as chat reads a call's arguments.
    arguments: Option<String>,
    status: Option<String>,
    /// A `message` item's parts (`output_text` with `text`, `refusal` with `refusal`); any
    /// JSON, since other items' `content` takes other shapes.
    content: Option<Value>,
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
                    item.content = map.next_value()?;
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
                *slot = map.next_value()?;
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

#[derive(Deserialize)]
struct Response {
    /// `resp_…`, the seed of synthesized call ids.
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
    #[serde(default)]
    error: Option<Value>,
}

/// Token counts; each may be missing or `null` on compatible servers.
#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    #[serde(default)]
    reason: Option<String>,
}

/// Decodes one Responses stream. Assembly state belongs to this session only.
#[derive(Debug)]
pub struct StreamDecoder {
    session: Session,
    by_item: HashMap<String, usize>,
    by_output: HashMap<usize, usize>,
    /// A terminal event (`response.completed` or `response.incomplete`) arrived.
    ended: bool,
    /// Message items whose text arrived as deltas, by item id; `streamed_unkeyed` when a delta
    /// came without one. A finished message item adds its text only when none of it streamed.
    streamed: HashSet<String>,
    streamed_unkeyed: bool,
    /// What the decoder knows of each call's argument deltas, by call position.
    replays: Vec<DeltaLog>,
    /// The message items announced or streamed so far, with the text of each of their parts,
    /// found by item id (`message_by_id`) or, for an event that names no item, by output index
    /// (`message_by_output`: the first message an event placed there).
    messages: Vec<MessageParts>,
    message_by_id: HashMap<String, usize>,
    message_by_output: HashMap<usize, usize>,
    /// The highest `sequence_number` so far.
    last_sequence: Option<u64>,
    /// Whether the stream numbers its events in increasing order, as native streams do: until
    /// it shows it does not, a delta's number tells a replayed delta from a new one.
    numbered: bool,
}

/// What the decoder knows of one message item's text.
#[derive(Debug, Default)]
struct MessageParts {
    /// The item was announced (`response.output_item.added`).
    announced: bool,
    /// How many times the item was announced again after some of its text arrived. A part
    /// whose own count is below it starts its replay when it is next reached (see
    /// [`MessageParts::part`]), so an announcement costs the same however many parts it has.
    replays: u64,
    /// The text the latest of those announcements carried for each part, by `content_index`
    /// (normally none).
    replayed_text: Vec<String>,
    /// Its parts that streamed text, by `content_index`.
    parts: BTreeMap<u64, TextPart>,
}

impl MessageParts {
    /// The part at `index`, recorded if new, with the replay the item's latest announcement
    /// started for it, if it has not started yet.
    fn part(&mut self, index: u64) -> &mut TextPart {
        let replays = self.replays;
        let part = self.parts.entry(index).or_insert_with(|| TextPart {
            replays,
            ..TextPart::default()
        });
        if part.replays < replays {
            part.replays = replays;
            let announced = usize::try_from(index)
                .ok()
                .and_then(|at| self.replayed_text.get(at))
                .map_or("", String::as_str);
            part.deltas.start_replay(&part.text, announced);
        }
        part
    }
}

/// The text one message part has streamed (`output_text` or `refusal` deltas), kept apart from
/// the answer's text so that its replayed deltas can be told as a call's are.
#[derive(Debug, Default)]
struct TextPart {
    text: String,
    deltas: DeltaLog,
    /// The item's [`MessageParts::replays`] when this part last took its replay.
    replays: u64,
}

/// What the decoder knows of the deltas that spell one text (a call's arguments, or one part of
/// a message), to tell the deltas a gateway replays from new ones. Calls and message parts share
/// this one rule; see [`DeltaLog::fresh`].
#[derive(Debug, Default, Clone)]
struct DeltaLog {
    /// The deltas appended to the text that carried a `sequence_number`, in increasing order of
    /// it: the number and the byte range of the text the delta fills.
    numbered: Vec<(u64, std::ops::Range<usize>)>,
    /// While the text is replayed (its item announced again after some of it arrived): how many
    /// bytes of it the replayed deltas have repeated so far.
    replayed: Option<usize>,
}

impl DeltaLog {
    /// Starts a replay of `text`, whose item was announced again carrying `announced` as its
    /// text (normally none): the replay has repeated it when it begins `text`. A text with
    /// nothing beyond it has nothing to replay.
    fn start_replay(&mut self, text: &str, announced: &str) {
        let repeated = if text.starts_with(announced) {
            announced.len()
        } else {
            0
        };
        self.replayed = (repeated < text.len()).then_some(repeated);
    }

    /// The part of a delta for `text` that is new, or `None` when it repeats one the text has: a
    /// gateway that re-sends a stream's events (all of them again, or from some point on, as a
    /// stream resumed after a number is) re-sends deltas. `numbered` is whether the stream's
    /// numbers can still be trusted (see [`StreamDecoder`]); this clears it when they cannot.
    ///
    /// By number, while the stream numbers its events in increasing order: a delta under a
    /// `sequence_number` one of the text's deltas already had, with the same text, is that delta
    /// again. A delta above every number the text's deltas had is new. A delta under a number
    /// the text's deltas had, or passed, with other text shows that the numbers cannot tell a
    /// replay (so does a new call or message announced under a number not above every earlier
    /// one), and from then on only the text does.
    ///
    /// By text, while the text is replayed (its item announced again after some of it arrived)
    /// and its deltas cannot be told by number: a delta that repeats the text where the replay
    /// has got to adds nothing, and one that runs past its end adds only the part past it, which
    /// ends the replay. A delta that does not repeat it ends the replay and is new as a whole:
    /// the gateway re-sent the item but not its deltas.
    ///
    /// A text therefore never holds a replayed delta twice, and its display deltas always spell
    /// exactly the text: nothing shown is taken back, nothing is shown twice (until, for a call,
    /// a `.done` event replaces the arguments with the final text).
    fn fresh<'f>(
        &mut self,
        text: &str,
        fragment: &'f str,
        sequence: Option<u64>,
        numbered: &mut bool,
    ) -> Option<&'f str> {
        let last = self.numbered.last().map(|(number, _)| *number);
        if let (true, Some(number), Some(last)) = (*numbered, sequence, last) {
            if number > last {
                self.replayed = None;
                return Some(fragment);
            }
            let again = self
                .numbered
                .binary_search_by_key(&number, |(number, _)| *number)
                .ok()
                .and_then(|at| text.get(self.numbered[at].1.clone()))
                .is_some_and(|text| text == fragment);
            if again {
                return None;
            }
            *numbered = false;
        }
        let Some(replayed) = self.replayed.take() else {
            return Some(fragment);
        };
        let rest = text.get(replayed..).filter(|rest| !rest.is_empty());
        match rest {
            Some(rest) if rest.starts_with(fragment) => {
                let replayed = replayed + fragment.len();
                self.replayed = (replayed < text.len()).then_some(replayed);
                None
            }
            Some(rest) if fragment.starts_with(rest) => Some(&fragment[rest.len()..]),
            _ => Some(fragment),
        }
    }

    /// Records that a delta's new part was appended to `text`, which it now ends: under its
    /// `sequence_number`, the range of the text its whole `fragment` fills (the new part ends
    /// it, and a part the replay repeated comes just before it).
    fn appended(&mut self, text: &str, fragment: &str, sequence: Option<u64>) {
        let Some(number) = sequence else {
            return;
        };
        if !text.ends_with(fragment) {
            return;
        }
        let range = text.len() - fragment.len()..text.len();
        if self.numbered.last().is_none_or(|(last, _)| number > *last) {
            self.numbered.push((number, range));
        }
    }
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
            by_output: HashMap::new(),
            ended: false,
            streamed: HashSet::new(),
            streamed_unkeyed: false,
            replays: Vec::new(),
            messages: Vec::new(),
            message_by_id: HashMap::new(),
            message_by_output: HashMap::new(),
            last_sequence: None,
            numbered: true,
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
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<CompletionDelta>, DecodeError> {
        self.session.check_failed()?;
        if self.ended {
            return Ok(Vec::new());
        }
        let mut sse = std::mem::take(&mut self.session.sse);
        let limits = self.session.limits;
        let fed = assembly::feed(&mut sse, &limits, bytes, |event, deltas| {
            self.event(event, deltas)
        });
        self.session.sse = sse;
        self.session.settle(fed)
    }

    /// Whether the stream's terminal event, `response.completed` or `response.incomplete`, has
    /// arrived: from then on the stream is complete as far as the wire goes, and
    /// [`StreamDecoder::finish`] will not call it truncated. (`response.failed` is an error
    /// instead, see [`StreamDecoder::is_failed`]; a gateway's `[DONE]` alone does not end a
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
        if self.ended || sse.data.trim_ascii() == "[DONE]" {
            return Ok(());
        }
        let event: Event<'_> =
            serde_json::from_str(sse.data).map_err(|e| DecodeError::InvalidChunk {
                offset: sse.offset,
                reason: ai_core::describe_json_error(&e),
            })?;
        self.apply(event, sse.offset, deltas)
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
        if event.kind.as_deref() == Some("error") {
            return Err(match event.message {
                Some(message) => DecodeError::ProviderError { message },
                None => event
                    .error
                    .as_ref()
                    .and_then(DecodeError::from_wire)
                    .unwrap_or_else(|| DecodeError::ProviderError {
                        message: "unknown error".into(),
                    }),
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
        // Whether the event's number is above every earlier one (or either is unknown).
        let in_order = match (event.sequence_number, self.last_sequence) {
            (Some(number), Some(last)) => number > last,
            _ => true,
        };
        self.last_sequence = self.last_sequence.max(event.sequence_number);
        match kind {
            // A refusal streams in place of text: shown and kept as the answer's text.
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(delta) = event.delta.0.as_deref().filter(|d| !d.is_empty()) {
                    match event.item_id.as_deref() {
                        Some(id) if self.streamed.contains(id) => {}
                        Some(id) => {
                            self.streamed.insert(id.to_owned());
                        }
                        None => self.streamed_unkeyed = true,
                    }
                    self.text_delta(&event, delta, deltas);
                }
            }
            "response.output_item.added" => {
                if let Some(item) = event.item.as_ref().filter(|i| i.kind == "function_call") {
                    self.open(item, event.output_index, in_order, deltas)?;
                }
                if let Some(item) = event.item.as_ref().filter(|i| i.kind == "message") {
                    self.announce_message(item, event.output_index, in_order);
                }
            }
            "response.content_part.added" => self.announce_part(&event),
            "response.function_call_arguments.delta" => {
                let position = self.position(&event).ok_or_else(|| unknown_item(offset))?;
                let fragment = event.delta.0.as_deref().unwrap_or("");
                self.argument_delta(position, fragment, event.sequence_number, deltas)?;
            }
            "response.function_call_arguments.done" => {
                let position = self.position(&event).ok_or_else(|| unknown_item(offset))?;
                if let Some(arguments) = event.arguments.0 {
                    self.replace_arguments(position, &arguments)?;
                }
            }
            "response.output_item.done" => {
                if let Some(item) = event.item.as_ref().filter(|i| i.kind == "message") {
                    self.finished_message(item, event.output_index, deltas);
                }
                if let Some(item) = event.item.as_ref().filter(|i| i.kind == "function_call") {
                    // The final item is authoritative; a call first seen here (a gateway that
                    // sends only finished items) is opened from it.
                    let position = match self.position(&event) {
                        Some(position) => position,
                        None => self.open(item, event.output_index, in_order, deltas)?,
                    };
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
            "response.completed" => {
                self.ended = true;
                self.terminal(event.response.as_ref());
                self.session.finish_reason = Some(FinishReason::Stop);
            }
            "response.incomplete" => {
                self.ended = true;
                self.terminal(event.response.as_ref());
                let reason = event
                    .response
                    .as_ref()
                    .and_then(|r| r.incomplete_details.as_ref())
                    .and_then(|d| d.reason.as_deref());
                self.session.finish_reason = Some(match reason {
                    Some("content_filter") => FinishReason::ContentFilter,
                    Some("max_output_tokens") | None => FinishReason::Length,
                    Some(other) => FinishReason::Other(other.to_owned()),
                });
            }
            "response.failed" => {
                return Err(event
                    .response
                    .as_ref()
                    .and_then(|r| r.error.as_ref())
                    .and_then(DecodeError::from_wire)
                    .unwrap_or_else(|| DecodeError::ProviderError {
                        message: "the response failed".into(),
                    }));
            }
            _ => {}
        }
        Ok(())
    }

    /// The text of a finished `message` item none of whose text streamed as deltas (a gateway
    /// that sends only finished items, or a whole response): its `output_text` and `refusal`
    /// parts, in order, shown and kept as the answer's text. An item without an id cannot be
    /// matched to its deltas, so it counts as streamed when any text streamed, and only then.
    ///
    /// The text is kept as its parts' text too (by item id, else output index), as if it had
    /// streamed: the same item finished again (a gateway that replays events) adds nothing, and
    /// its deltas replayed after it are told as any part's are.
    fn finished_message(&mut self, item: &Item, output_index: Option<usize>, deltas: &mut Deltas) {
        let streamed = self.streamed_unkeyed
            || item.id.as_deref().map_or_else(
                || !self.streamed.is_empty(),
                |id| self.streamed.contains(id),
            );
        let Some(Value::Array(parts)) = item.content.as_ref().filter(|_| !streamed) else {
            return;
        };
        // Each text by its part's place in `content`, its `content_index`.
        let texts: Vec<(u64, &str)> = (0u64..)
            .zip(parts)
            .filter_map(|(index, part)| Some((index, part_text(part)?)))
            .filter(|(_, text)| !text.is_empty())
            .collect();
        if let Some(message) = self.message(item.id.as_deref(), output_index) {
            if !message.parts.is_empty() {
                return;
            }
            for (index, text) in &texts {
                message.part(*index).text.push_str(text);
            }
        }
        for (_, text) in texts {
            self.session.text.push_str(text);
            deltas.text(text);
        }
    }

    /// Opens the call of a `function_call` item, keyed by its item id and output index.
    ///
    /// An item that is already open is not opened twice. The same item id again (a gateway that
    /// replays `response.output_item.added`) is that call; so is another item with a `call_id`
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
        let open = match item.id.as_deref().and_then(|id| self.by_item.get(id)) {
            Some(&position) => Some(position),
            None => self.call_with_call_id(item)?,
        };
        if let Some(position) = open {
            if let Some(id) = &item.id {
                self.by_item.entry(id.clone()).or_insert(position);
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
        self.numbered &= in_order;
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

    /// The delta log of the call at `position`, and its arguments.
    fn argument_deltas(&mut self, position: usize) -> (&mut DeltaLog, &str) {
        if self.replays.len() <= position {
            self.replays.resize(position + 1, DeltaLog::default());
        }
        let arguments = self
            .session
            .calls
            .calls
            .get(position)
            .map_or("", |c| c.arguments.as_str());
        (&mut self.replays[position], arguments)
    }

    /// Applies an argument delta to the call at `position`: only its new part (see
    /// [`DeltaLog::fresh`]) is appended and shown.
    fn argument_delta(
        &mut self,
        position: usize,
        fragment: &str,
        sequence: Option<u64>,
        deltas: &mut Deltas,
    ) -> Result<(), DecodeError> {
        let mut numbered = self.numbered;
        let (log, arguments) = self.argument_deltas(position);
        let fresh = log.fresh(arguments, fragment, sequence, &mut numbered);
        self.numbered = numbered;
        if let Some(fresh) = fresh {
            self.session
                .calls
                .apply(position, None, None, fresh, deltas)?;
            let (log, arguments) = self.argument_deltas(position);
            log.appended(arguments, fragment, sequence);
        }
        Ok(())
    }

    /// The message item an event names, recorded if new; `None` when it names none. An event
    /// with an item id names that item; one without (a gateway that leaves `item_id` out of its
    /// deltas) names the message at its output index, so that the item announced there under
    /// its id and the deltas that name only its place are one message.
    fn message(
        &mut self,
        item_id: Option<&str>,
        output_index: Option<usize>,
    ) -> Option<&mut MessageParts> {
        let known = match item_id {
            Some(id) => self.message_by_id.get(id),
            None => self.message_by_output.get(&output_index?),
        };
        let at = match known {
            Some(&at) => at,
            None => {
                self.messages.push(MessageParts::default());
                let at = self.messages.len() - 1;
                if let Some(id) = item_id {
                    self.message_by_id.insert(id.to_owned(), at);
                }
                at
            }
        };
        if let Some(index) = output_index {
            self.message_by_output.entry(index).or_insert(at);
        }
        self.messages.get_mut(at)
    }

    /// Applies a text (or refusal) delta: only its new part (see [`DeltaLog::fresh`]) is kept as
    /// the answer's text and shown. A delta names its part by its item (or output index) and
    /// `content_index` (0 when absent); one that names no item cannot be told from another, so
    /// all of it is new.
    fn text_delta(&mut self, event: &Event<'_>, fragment: &str, deltas: &mut Deltas) {
        let index = event.content_index.unwrap_or(0);
        let sequence = event.sequence_number;
        let mut numbered = self.numbered;
        let fresh = match self.message(event.item_id.as_deref(), event.output_index) {
            Some(message) => {
                let part = message.part(index);
                let fresh = part
                    .deltas
                    .fresh(&part.text, fragment, sequence, &mut numbered);
                if let Some(fresh) = fresh {
                    part.text.push_str(fresh);
                    part.deltas.appended(&part.text, fragment, sequence);
                }
                fresh
            }
            None => Some(fragment),
        };
        self.numbered = numbered;
        if let Some(fresh) = fresh.filter(|fresh| !fresh.is_empty()) {
            self.session.text.push_str(fresh);
            deltas.text(fresh);
        }
    }

    /// A `message` item announced (`response.output_item.added`). A new one announced under a
    /// number not above every earlier one shows that the stream's numbers cannot tell a replay,
    /// as a new call does (see [`StreamDecoder::open`]). One announced again, or after some of
    /// its text streamed (a gateway that replays events), starts a replay of each of its parts
    /// that has text, since the gateway may re-send their deltas too; the text the item carries
    /// for a part (normally none) counts as repeated. Each part takes its replay when it is next
    /// reached ([`MessageParts::part`]), so this does not visit the parts.
    fn announce_message(&mut self, item: &Item, output_index: Option<usize>, in_order: bool) {
        let Some(message) = self.message(item.id.as_deref(), output_index) else {
            return;
        };
        let known = message.announced || !message.parts.is_empty();
        message.announced = true;
        if !known {
            self.numbered &= in_order;
            return;
        }
        message.replays += 1;
        message.replayed_text = match &item.content {
            Some(Value::Array(parts)) => parts
                .iter()
                .map(|p| part_text(p).unwrap_or("").to_owned())
                .collect(),
            _ => Vec::new(),
        };
    }

    /// A message part announced (`response.content_part.added`). A part that already has text
    /// is announced again (a gateway that replays the part's events from there): that starts a
    /// replay of its text, as its item announced again does, and the text the part carries
    /// (normally none) counts as repeated. A new part needs nothing.
    fn announce_part(&mut self, event: &Event<'_>) {
        let index = event.content_index.unwrap_or(0);
        let announced = event.part.as_ref().and_then(part_text).unwrap_or("");
        let Some(message) = self.message(event.item_id.as_deref(), event.output_index) else {
            return;
        };
        if message.parts.contains_key(&index) {
            let part = message.part(index);
            part.deltas.start_replay(&part.text, announced);
        }
    }

    /// Replaces the arguments of the call at `position` with the final text a `.done` event
    /// carries; a replay of the arguments they replace is over.
    fn replace_arguments(&mut self, position: usize, arguments: &str) -> Result<(), DecodeError> {
        self.session.calls.replace_arguments(position, arguments)?;
        if let Some(state) = self.replays.get_mut(position) {
            state.replayed = None;
        }
        Ok(())
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

    fn terminal(&mut self, response: Option<&Response>) {
        if let Some(usage) = response.and_then(|r| r.usage.as_ref())
            && (usage.input_tokens.is_some()
                || usage.output_tokens.is_some()
                || usage.total_tokens.is_some())
        {
            let input = usage.input_tokens.unwrap_or(0);
            let output = usage.output_tokens.unwrap_or(0);
            self.session.usage = Some(Usage {
                input_tokens: input,
                output_tokens: output,
                total_tokens: usage.total_tokens.unwrap_or(input.saturating_add(output)),
            });
        }
    }

    /// Resolves the completion, once. A decoder that failed returns the error that stopped it
    /// (see [`StreamDecoder::feed`]). Without a terminal event the stream is
    /// [`DecodeError::Truncated`]; an incomplete response marks every call incomplete. A call
    /// item without a `call_id` gets a deterministic id, as in
    /// [`crate::chat::StreamDecoder::finish`], seeded with the `response.id`.
    pub fn finish(self) -> Result<LlmCompletion, DecodeError> {
        self.session.finish(self.ended)
    }
}

/// The text of a message item's content part: an `output_text` part's `text`, a `refusal`
/// part's `refusal`; none for any other part.
fn part_text(part: &Value) -> Option<&str> {
    let text = match part.get("type").and_then(Value::as_str) {
        Some("output_text") => part.get("text"),
        Some("refusal") => part.get("refusal"),
        _ => None,
    };
    text.and_then(Value::as_str)
}

fn unknown_item(offset: usize) -> DecodeError {
    DecodeError::InvalidChunk {
        offset,
        reason: "arguments for an item that was never added".into(),
    }
}

/// Decodes a whole Responses stream.
pub fn decode_all(bytes: &[u8]) -> Result<LlmCompletion, DecodeError> {
    let mut decoder = StreamDecoder::default();
    decoder.feed(bytes)?;
    decoder.finish()
}

/// A whole (non-streamed) Responses `response` object (openai-python
/// `types/responses/response.py`): the final items under `output`, and the fields the stream's
/// terminal event carries.
#[derive(Deserialize)]
#[serde(expecting = "a Responses response object")]
struct WholeResponse {
    #[serde(default)]
    object: Option<String>,
    #[serde(default)]
    status: Option<String>,
    /// `None` when absent or null: then the body is not a response.
    #[serde(default)]
    output: Option<Vec<Item>>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
    #[serde(default)]
    error: Option<Value>,
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
/// A body with a truthy `error` is [`DecodeError::ProviderError`]; anything else that is not a
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
    if let Some(error) = whole.error.as_ref().and_then(DecodeError::from_wire) {
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
    let event = |kind: &'static str| Event {
        kind: Some(Cow::Borrowed(kind)),
        output_index: None,
        item_id: None,
        sequence_number: None,
        content_index: None,
        delta: Text(None),
        arguments: LenientArguments(None),
        item: None,
        part: None,
        response: None,
        message: None,
        error: None,
    };
    distinct_calls(&output)?;
    let mut decoder = StreamDecoder::new(limits);
    let mut deltas = Deltas::default();
    decoder
        .session
        .saw_response_id(whole.id.as_deref().filter(|id| !id.is_empty()));
    for (output_index, item) in output.into_iter().enumerate() {
        let done = Event {
            output_index: Some(output_index),
            item: Some(item),
            ..event("response.output_item.done")
        };
        decoder.apply(done, 0, &mut deltas)?;
    }
    let end = Event {
        response: Some(Response {
            id: whole.id,
            usage: whole.usage,
            incomplete_details: whole.incomplete_details,
            error: None,
        }),
        ..event(terminal)
    };
    decoder.apply(end, 0, &mut deltas)?;
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

/// `ToolSpec`s as flat Responses function tools. `strict` is always sent: `true` with the strict
/// form of the schema when it has one, else `false` with the schema as is.
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

/// `tool_choice`.
pub fn encode_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(id) => json!({"type": "function", "name": id.as_str()}),
    }
}

/// The canonical messages as Responses input items, after [`validate_history`] passes.
pub fn encode_input(messages: &[Message]) -> Result<Value, EncodeError> {
    validate_history(messages)?;
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
                if !content.is_empty() {
                    items.push(json!({"type": "message", "role": "assistant", "content": content}));
                }
                for call in tool_calls {
                    items.push(json!({
                        "type": "function_call",
                        "call_id": call.id.as_str(),
                        "name": call.name,
                        "arguments": call.arguments,
                    }));
                }
            }
            Message::Tool {
                tool_call_id,
                content,
            } => items.push(json!({
                "type": "function_call_output",
                "call_id": tool_call_id.as_str(),
                "output": content,
            })),
        }
    }
    Ok(Value::Array(items))
}

/// A whole Responses request body.
pub fn encode_request(
    request: &LlmRequest,
    model: &str,
    stream: bool,
) -> Result<Value, EncodeError> {
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    body.insert("input".into(), encode_input(&request.messages)?);
    body.insert("stream".into(), stream.into());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A message item announced again costs the same however many parts it has: no part is
    /// reached until its next event, which is when its replay starts. (A stream that announces
    /// an item of many parts over and over would otherwise do work quadratic in its length.)
    #[test]
    fn announcing_a_message_again_reaches_none_of_its_parts() {
        let added = r#"{"type":"response.output_item.added","item":{"type":"message","id":"m"}}"#;
        let mut stream = format!("data: {added}\n\n");
        for index in 0..4 {
            stream.push_str(&format!(
                "data: {{\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\
                 \"content_index\":{index},\"delta\":\"x\"}}\n\n"
            ));
        }
        stream.push_str(&format!("data: {added}\n\n"));
        let mut decoder = StreamDecoder::default();
        decoder.feed(stream.as_bytes()).unwrap();
        let parts = &decoder.messages[decoder.message_by_id["m"]].parts;
        assert_eq!(parts.len(), 4);
        assert!(parts.values().all(|part| part.deltas.replayed.is_none()));
        // The replay still starts when a part is reached: its delta again adds nothing.
        let again = "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\
                     \"content_index\":2,\"delta\":\"x\"}\n\n";
        assert_eq!(decoder.feed(again.as_bytes()).unwrap(), []);
        assert_eq!(decoder.session.text, "xxxx");
    }
}

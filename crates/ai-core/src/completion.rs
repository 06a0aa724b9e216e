//! What a model call asks for and what it resolves to, independent of any provider's wire format.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Message, RunId, ToolCallId, ToolId, ToolSpec, canonical_json, sha256_hex};

/// Which graph, at which version, is asking (for billing and telemetry).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphRef {
    /// The graph's name.
    pub name: String,
    /// The graph's version.
    pub version: String,
}

/// Who makes a model request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmCaller {
    /// The run the request belongs to.
    pub run_id: RunId,
    /// The graph that runs, when a graph runs.
    pub graph: Option<GraphRef>,
}

/// How the model may use tools in this request.
///
/// Exhaustive on purpose: every wire encoder must spell each choice as the provider reads it, and
/// a catch-all arm there would have to send some other choice (`auto` in place of a narrower
/// one), so the model would be offered more than the caller asked for without any error.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// Exactly this tool.
    Tool(ToolId),
}

impl ToolChoice {
    /// Whether this is [`ToolChoice::Auto`], the default.
    pub fn is_auto(&self) -> bool {
        matches!(self, Self::Auto)
    }
}

/// One model request, provider-neutral. The wire crates encode it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    /// Who asks.
    pub caller: LlmCaller,
    /// The conversation; it must pass [`crate::validate_history`].
    pub messages: Vec<Message>,
    /// The catalog's specs.
    pub tools: Vec<ToolSpec>,
    /// Tool use mode.
    pub tool_choice: ToolChoice,
    /// Whether the model may ask for several calls in one turn. `None` leaves it to the wire
    /// encoder: cogni-wire-openai sends `false` when one of the tools is in OpenAI's strict
    /// form (strict schemas do not hold with parallel calls), and otherwise leaves the key out,
    /// so the provider's default holds.
    pub parallel_tool_calls: Option<bool>,
}

impl LlmRequest {
    /// The hash of the canonical messages and tool specs; see [`prompt_hash`].
    pub fn prompt_hash(&self) -> String {
        prompt_hash(&self.messages, &self.tools)
    }
}

/// SHA-256 over the canonical JSON of `{"messages": …, "tools": …}`: the same prompt always hashes
/// the same, whatever map order produced it.
pub fn prompt_hash(messages: &[Message], tools: &[ToolSpec]) -> String {
    let value = serde_json::json!({ "messages": messages, "tools": tools });
    sha256_hex(canonical_json(&value).as_bytes())
}

/// Why the model stopped.
///
/// More reasons may be named later (taken out of [`FinishReason::Other`]), so a match needs a
/// catch-all arm, which reads the reason as `Other` would: its [`Display`](fmt::Display) name is
/// the provider's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
#[non_exhaustive]
pub enum FinishReason {
    /// A natural end.
    Stop,
    /// The model asked for tool calls.
    ToolCalls,
    /// The output limit cut the answer short.
    Length,
    /// The provider's filter stopped the answer.
    ContentFilter,
    /// Any other reason, as the provider named it.
    Other(String),
}

impl From<String> for FinishReason {
    fn from(raw: String) -> Self {
        match raw.as_str() {
            "stop" => Self::Stop,
            "tool_calls" | "function_call" => Self::ToolCalls,
            "length" => Self::Length,
            "content_filter" => Self::ContentFilter,
            _ => Self::Other(raw),
        }
    }
}

impl From<FinishReason> for String {
    fn from(reason: FinishReason) -> String {
        reason.to_string()
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Stop => "stop",
            Self::ToolCalls => "tool_calls",
            Self::Length => "length",
            Self::ContentFilter => "content_filter",
            Self::Other(raw) => raw,
        })
    }
}

/// Token counts of one model call.
///
/// `#[non_exhaustive]`, so that a count added later breaks no caller: build one with
/// [`Usage::new`] and the `with_…` methods. The counts a provider reports only sometimes
/// ([`Usage::cached_input_tokens`], [`Usage::reasoning_tokens`]) are `None` when it did not
/// report them, and are then left out of the JSON, so a usage recorded before they existed
/// reads back, and writes again, byte for byte as it was.
///
/// ```
/// use ai_core::Usage;
///
/// let usage = Usage::new(1200, 300, 1500)
///     .with_cached_input_tokens(Some(1024))
///     .with_reasoning_tokens(Some(256));
/// assert_eq!(usage.cached_input_tokens, Some(1024));
/// let old: Usage =
///     serde_json::from_str(r#"{"input_tokens":1,"output_tokens":2,"total_tokens":3}"#).unwrap();
/// assert_eq!(old, Usage::new(1, 2, 3));
/// assert_eq!(
///     serde_json::to_string(&old).unwrap(),
///     r#"{"input_tokens":1,"output_tokens":2,"total_tokens":3}"#
/// );
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Their sum, as the provider reported it.
    pub total_tokens: u64,
    /// Of the input tokens, those read from the provider's prompt cache (chat's
    /// `prompt_tokens_details.cached_tokens`, Responses' `input_tokens_details.cached_tokens`);
    /// `None` when the provider did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Of the output tokens, those a reasoning model spent reasoning (chat's
    /// `completion_tokens_details.reasoning_tokens`, Responses'
    /// `output_tokens_details.reasoning_tokens`); `None` when the provider did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// The three counts every report has; the others are `None`.
    #[must_use]
    pub fn new(input_tokens: u64, output_tokens: u64, total_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            total_tokens,
            cached_input_tokens: None,
            reasoning_tokens: None,
        }
    }

    /// This usage with [`Usage::cached_input_tokens`] set to `tokens`.
    #[must_use]
    pub fn with_cached_input_tokens(mut self, tokens: Option<u64>) -> Self {
        self.cached_input_tokens = tokens;
        self
    }

    /// This usage with [`Usage::reasoning_tokens`] set to `tokens`.
    #[must_use]
    pub fn with_reasoning_tokens(mut self, tokens: Option<u64>) -> Self {
        self.reasoning_tokens = tokens;
        self
    }
}

/// One tool call as the decoder assembled it. The arguments are the raw string, never parsed or
/// repaired here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmToolCall {
    /// The provider's call id.
    pub id: ToolCallId,
    /// The function name as sent.
    pub name: String,
    /// The assembled argument JSON, as sent.
    pub arguments: String,
    /// False when the stream was cut (a length limit, a truncated stream): such a call must never
    /// run.
    pub complete: bool,
    /// Opaque provider fields on the call (e.g. a `thought_signature`), to send back next turn.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub provider_fields: Map<String, Value>,
}

/// The resolved result of one model call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmCompletion {
    /// All text the model produced.
    pub text: String,
    /// The assembled tool calls, in the model's order.
    pub tool_calls: Vec<LlmToolCall>,
    /// Why it stopped.
    pub finish_reason: FinishReason,
    /// Token counts, when the provider sent them.
    pub usage: Option<Usage>,
}

/// A streamed fragment of a model call, for display while the call runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CompletionDelta {
    /// New text.
    Text {
        /// The fragment.
        delta: String,
    },
    /// A fragment of a tool call, keyed by its position in this completion.
    ToolCall {
        /// The call's position in the completion's `tool_calls`.
        index: usize,
        /// The call id, when this fragment first names it.
        id: Option<String>,
        /// The function name, when this fragment first names it.
        name: Option<String>,
        /// The argument fragment (may be empty).
        arguments: String,
    },
}

/// Why a model call produced no completion. Messages name the endpoint and status, never a key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompletionError {
    /// The endpoint could not be reached or answered with an HTTP error.
    #[error("transport error: {0}")]
    Transport(String),
    /// The provider reported an error (in the body or mid-stream).
    #[error("provider error: {0}")]
    Provider(String),
    /// The response could not be decoded, or the stream ended early.
    #[error("decode error: {0}")]
    Decode(String),
    /// The request could not be built in the provider's wire format (a history or a tool choice
    /// it cannot carry), so nothing was sent. The same request would be refused again: it is
    /// never retried.
    #[error("request not sent: {0}")]
    Request(String),
    /// The run was cancelled while the call ran.
    #[error("cancelled")]
    Cancelled,
    /// The call succeeded but could not be recorded (its receipt or blobs), so it is not used.
    #[error("recording error: {0}")]
    Recording(String),
}

//! Exact OpenAI wire codecs, sans-IO: chat completions ([`chat`]) and the Responses API
//! ([`responses`]), over an incremental Server-Sent Events parser ([`sse`]).
//!
//! Encoders turn the canonical ai-core types (`ToolSpec`, `Message`, `ToolChoice`,
//! `LlmRequest`) into request JSON with exact key sets, using OpenAI's strict schema form where
//! a schema allows it. Decoders take stream bytes as they arrive and resolve one
//! `LlmCompletion`, tolerating what real OpenAI-compatible servers do (missing indexes, repeated
//! ids, whole arguments in one chunk, argument objects, `stop` with tool calls, Responses events
//! a gateway replays, …) but never silently: a cut stream is [`DecodeError::Truncated`], a provider
//! error is [`DecodeError::ProviderError`], a bad chunk names its byte offset, and limits bound
//! memory. A model port over these decoders turns a [`DecodeError`] into the
//! [`ai_core::CompletionError`] it reports with `From` (the provider's error is `Provider`,
//! anything else `Decode`), the one mapping cogni-adapters' port uses too; an [`EncodeError`], a
//! request refused before it was sent, becomes `Request` the same way. A whole (non-streamed)
//! answer, which some servers send in place of a stream, decodes through the same assembly into the
//! same completion ([`chat::decode_completion`], [`responses::decode_response`], [`WholeAnswer`]);
//! the stream decoders read a body that opens with `{` so, whatever its label.
//!
//! This crate never does IO, never reads a clock, never runs an async runtime and never names a
//! schema library: bytes in, values out.
//!
//! The types it encodes and decodes are `cogni-ai-core`'s, re-exported here as [`ai_core`]: an
//! app that only speaks the wire depends on this crate alone and names them
//! `wire_openai::ai_core::…`, at the very version these codecs take.
//!
//! # Example
//!
//! Decoding a chat-completions stream whose tool call arrives in fragments, split across reads
//! wherever the transport split it. The deltas are for display only; the call to run comes from
//! the completion [`chat::StreamDecoder::finish`] resolves.
//!
//! ```
//! use wire_openai::ai_core::{CompletionDelta, FinishReason};
//! use wire_openai::chat::StreamDecoder;
//!
//! let stream = concat!(
//!     r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","#,
//!     r#""type":"function","function":{"name":"core__add","arguments":"{\"a\":"}}]}}]}"#,
//!     "\n\n",
//!     r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"#,
//!     r#""function":{"arguments":"2}"}}]},"finish_reason":"tool_calls"}]}"#,
//!     "\n\n",
//!     "data: [DONE]\n\n",
//! );
//! let mut decoder = StreamDecoder::default();
//! let mut deltas = Vec::new();
//! for read in stream.as_bytes().chunks(17) {
//!     deltas.extend(decoder.feed(read)?);
//! }
//! assert!(matches!(&deltas[0], CompletionDelta::ToolCall { index: 0, .. }));
//!
//! let completion = decoder.finish()?;
//! assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
//! let call = &completion.tool_calls[0];
//! assert_eq!((call.id.as_str(), call.name.as_str()), ("call_1", "core__add"));
//! assert_eq!(call.arguments, r#"{"a":2}"#);
//! assert!(call.complete);
//! # Ok::<(), wire_openai::DecodeError>(())
//! ```
//!
//! Encoding a streamed chat request that offers the model one tool. The tool's schema allows
//! OpenAI's strict form, so its function is sent `strict`, and a strict request that did not
//! say otherwise asks for one call at a time; the body is the JSON to POST.
//!
//! ```
//! use serde_json::json;
//! use wire_openai::Delivery;
//! use wire_openai::ai_core::{
//!     LlmCaller, LlmRequest, Message, Redaction, RunId, ToolChoice, ToolEffect, ToolId, ToolSpec,
//! };
//!
//! let weather = ToolSpec {
//!     id: ToolId::parse("core__get_weather")?,
//!     description: "Today's weather in a city.".into(),
//!     input_schema: json!({
//!         "type": "object",
//!         "properties": {"city": {"type": "string"}},
//!         "required": ["city"],
//!         "additionalProperties": false,
//!     }),
//!     effect: ToolEffect::ReadOnly,
//!     redaction: Redaction { allow: vec!["celsius".into()] },
//! };
//! let request = LlmRequest {
//!     caller: LlmCaller { run_id: RunId::new("run-1")?, graph: None },
//!     messages: vec![Message::User { content: "Weather in Oslo?".into() }],
//!     tools: vec![weather],
//!     tool_choice: ToolChoice::Auto,
//!     parallel_tool_calls: None,
//! };
//! let body = wire_openai::chat::encode_request(&request, "gpt-4o-mini", Delivery::Stream)?;
//! assert_eq!(
//!     body,
//!     json!({
//!         "model": "gpt-4o-mini",
//!         "messages": [{"role": "user", "content": "Weather in Oslo?"}],
//!         "tools": [{
//!             "type": "function",
//!             "function": {
//!                 "name": "core__get_weather",
//!                 "description": "Today's weather in a city.",
//!                 "parameters": {
//!                     "type": "object",
//!                     "properties": {"city": {"type": "string"}},
//!                     "required": ["city"],
//!                     "additionalProperties": false,
//!                 },
//!                 "strict": true,
//!             },
//!         }],
//!         "tool_choice": "auto",
//!         "parallel_tool_calls": false,
//!         "stream": true,
//!         "stream_options": {"include_usage": true},
//!     })
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod assembly;
pub mod chat;
mod error;
mod history;
pub mod responses;
pub mod sse;
mod strict;

/// The crate whose types this one encodes and decodes ([`ai_core::LlmRequest`],
/// [`ai_core::ToolSpec`], [`ai_core::Message`], [`ai_core::LlmCompletion`],
/// [`ai_core::CompletionDelta`], …), re-exported so that an app depending only on this crate
/// names them, at the very version these codecs take, as `wire_openai::ai_core::…`.
pub use ai_core;
pub use assembly::{JsonShape, WholeAnswer};
pub use error::{DecodeError, EncodeError, Limit, Limits};

/// How a request asks the server to deliver its answer: the `delivery` of
/// [`chat::encode_request`] and [`responses::encode_request`] (and their `_with` forms), so that
/// a call site says which it asks for.
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
/// let body = wire_openai::chat::encode_request(&request, "gpt-4o", Delivery::Whole)?;
/// assert_eq!(body["stream"], false);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// As a stream of Server-Sent Events (`"stream": true`), which a `StreamDecoder` reads
    /// ([`chat::StreamDecoder`], [`responses::StreamDecoder`]). A chat request also asks for
    /// the usage report at the stream's end (`"stream_options": {"include_usage": true}`).
    Stream,
    /// As one JSON body (`"stream": false`), which [`chat::decode_completion`] or
    /// [`responses::decode_response`] reads.
    Whole,
}

/// Decoders move between tasks and threads with the stream they decode.
#[allow(dead_code)]
fn _assert_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<chat::StreamDecoder>();
    assert::<responses::StreamDecoder>();
    assert::<sse::SseParser>();
    assert::<DecodeError>();
    assert::<EncodeError>();
    assert::<Limits>();
}

//! Exact OpenAI wire codecs, sans-IO: chat completions ([`chat`]) and the Responses API
//! ([`responses`]), over an incremental Server-Sent Events parser ([`sse`]).
//!
//! Encoders turn the canonical ai-core types (`ToolSpec`, `Message`, `ToolChoice`,
//! `LlmRequest`) into request JSON with exact key sets, using OpenAI's strict schema form where
//! a schema allows it. Decoders take stream bytes as they arrive and resolve one
//! `LlmCompletion`, tolerating what real OpenAI-compatible servers do (missing indexes, repeated
//! ids, whole arguments in one chunk, argument objects, `stop` with tool calls, …) but never
//! silently: a cut stream is [`DecodeError::Truncated`], a provider error is
//! [`DecodeError::ProviderError`], a bad chunk names its byte offset, and limits bound memory.
//!
//! This crate never does IO, never reads a clock, never runs an async runtime and never names a
//! schema library: bytes in, values out.

mod assembly;
pub mod chat;
mod error;
pub mod responses;
pub mod sse;
mod strict;

pub use error::{DecodeError, EncodeError, Limits};

/// Decoders move between tasks and threads with the stream they decode.
#[allow(dead_code)]
fn _assert_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<chat::StreamDecoder>();
    assert::<responses::StreamDecoder>();
    assert::<sse::SseParser>();
    assert::<DecodeError>();
    assert::<EncodeError>();
}

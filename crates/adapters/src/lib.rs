//! IO implementations of the cogni-tools ports.
//!
//! [`SystemClock`] is the wall clock behind [`ai_core::Clock`]; [`FsWorkspace`] is a folder on
//! disk behind [`ai_core::Workspace`], confined to its root: `..`, absolute paths and symlinks
//! that lead out of the root are refused; [`OpenAiCompletion`] is an OpenAI-compatible HTTP
//! endpoint (chat completions or the Responses API) behind [`ai_core::CompletionPort`], built
//! from an [`OpenAiConfig`]. Adapters say their technology in their names.
//!
//! This crate implements ports; it never decides policy, never validates or redacts tool data,
//! and never binds tools (that is the composition root's job).

mod clock;
mod openai;
mod workspace;

pub use clock::SystemClock;
pub use openai::{
    MAX_PROVIDER_MESSAGE_CHARS, OpenAiCompletion, OpenAiConfig, OpenAiConfigError, OpenAiWire,
};
pub use workspace::FsWorkspace;

//! IO implementations of the cogni-tools ports.
//!
//! [`SystemClock`] is the wall clock behind [`ai_core::Clock`]; [`FsWorkspace`] is a folder on
//! disk behind [`ai_core::Workspace`], confined to its root: `..`, absolute paths and symlinks
//! that lead out of the root are refused; [`OpenAiCompletion`] is an OpenAI-compatible HTTP
//! endpoint (chat completions or the Responses API) behind [`ai_core::CompletionPort`], built
//! from an [`OpenAiConfig`]. Adapters say their technology in their names.
//!
//! Storage: [`FsBlobStore`] (one file per blob), [`SqliteBlobStore`] (rows of `cogni.db`, made
//! durable by the run store's next commit) and [`InMemoryBlobStore`] behind
//! [`ai_core::BlobStore`];
//! [`SqliteStore`], one `cogni.db` in the data directory, behind [`ai_core::ThreadStore`] and
//! [`ai_core::RunStore`] (and [`InMemoryRunStore`], the same rules in memory); [`RecordingCompletion`], a [`ai_core::CompletionPort`] decorator that
//! writes a [`ai_core::ModelReceipt`] for every model call, and [`ReplayCompletion`], which
//! answers model calls from those receipts.
//!
//! This crate implements ports; it never decides policy, never validates or redacts tool data,
//! and never binds tools (that is the composition root's job).

mod blob;
mod blob_sqlite;
mod clock;
mod memory;
mod openai;
mod recording;
mod replay;
mod sqlite;
mod workspace;

pub use blob::{FsBlobStore, InMemoryBlobStore};
pub use blob_sqlite::{SqliteBlobStore, TieredBlobStore};
pub use clock::SystemClock;
pub use memory::InMemoryRunStore;
pub use openai::{
    MAX_PROVIDER_MESSAGE_CHARS, OpenAiCompletion, OpenAiConfig, OpenAiConfigError, OpenAiWire,
};
pub use recording::{ReceiptCollector, RecordingCompletion, RecordingConfig, ToolsEncoder};
pub use replay::ReplayCompletion;
pub use sqlite::{DB_FILE, SCHEMA_VERSION, SqliteStore};
pub use workspace::FsWorkspace;

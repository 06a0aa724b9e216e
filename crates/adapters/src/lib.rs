//! IO implementations of the cogni-tools ports.
//!
//! [`SystemClock`] is the wall clock behind [`ai_core::Clock`]; [`FsWorkspace`] is a folder on
//! disk behind [`ai_core::Workspace`], confined to its root: `..`, absolute paths and symlinks
//! that lead out of the root are refused, hidden entries (names starting with `.`, such as
//! `.env`) are not there unless [`FsWorkspace::with_hidden`] shows them, and a write whose call
//! is dropped (its run cancelled or out of time) before its commit never lands;
//! [`OpenAiCompletion`] is an OpenAI-compatible HTTP endpoint (chat completions or the Responses
//! API) behind [`ai_core::CompletionPort`], built from an [`OpenAiConfig`]; [`shown_url`] is its
//! base URL as it may be shown (no credentials or query, a path segment that may be a key as
//! `***`), and [`shown_cut`] any other value a damaged store may hold at any length (a blob
//! address, a model's name), cut short. Adapters say their technology in their names.
//!
//! Storage: [`FsBlobStore`] (one file per blob, at most [`FsBlobStore::MAX_BLOB_BYTES`]),
//! [`SqliteBlobStore`] (rows of `cogni.db`, made durable by the run store's next commit),
//! [`TieredBlobStore`] (small blobs as rows, larger ones as files) and [`InMemoryBlobStore`]
//! behind [`ai_core::BlobStore`]; [`SqliteStore`], one `cogni.db` in the data directory, behind
//! [`ai_core::ThreadStore`] and [`ai_core::RunStore`] (and [`InMemoryRunStore`], the same rules
//! in memory); a folder a store creates is its owner's alone ([`create_private_dir`]).
//! [`RecordingCompletion`], a [`ai_core::CompletionPort`] decorator, writes a
//! [`ai_core::ModelReceipt`] for every model call, and [`ReplayCompletion`] answers model calls
//! from those receipts.
//!
//! # Features
//!
//! The clock, the workspace, the file and in-memory stores and the recording decorators are
//! always built. Two default features add the heavy parts, so an app that needs only the
//! workspace builds neither an HTTP client nor SQLite (`default-features = false`):
//! - `openai`: [`OpenAiCompletion`] and its configuration (reqwest over rustls, and
//!   `cogni-wire-openai`);
//! - `sqlite`: [`SqliteStore`], [`SqliteBlobStore`] and [`TieredBlobStore`] (SQLite compiled in).
//!
//! This crate implements ports; it never decides policy, never validates or redacts tool data,
//! never binds tools (that is the composition root's job), and never reads the environment
//! (the HTTP client ignores proxy variables too): everything comes from its configuration.

mod blob;
#[cfg(feature = "sqlite")]
mod blob_sqlite;
mod clock;
mod dir;
mod memory;
#[cfg(feature = "openai")]
mod openai;
mod recording;
mod replay;
mod shown;
#[cfg(feature = "sqlite")]
mod sqlite;
mod stored;
mod temp;
mod workspace;

pub use blob::{FsBlobStore, InMemoryBlobStore};
#[cfg(feature = "sqlite")]
pub use blob_sqlite::{SqliteBlobStore, TieredBlobStore};
pub use clock::SystemClock;
pub use dir::create_private_dir;
pub use memory::InMemoryRunStore;
#[cfg(feature = "openai")]
pub use openai::{
    MAX_PROVIDER_MESSAGE_CHARS, OpenAiCompletion, OpenAiConfig, OpenAiConfigError, OpenAiWire,
};
pub use recording::{ReceiptCollector, RecordingCompletion, RecordingConfig, ToolsEncoder};
pub use replay::ReplayCompletion;
pub use shown::{shown_cut, shown_url};
#[cfg(feature = "sqlite")]
pub use sqlite::{DB_FILE, SCHEMA_VERSION, SqliteStore};
pub use workspace::{FsWorkspace, MAX_READ_BYTES_CEILING};

/// Adapters are shared (behind an `Arc`) by every run and task of a process.
#[allow(dead_code)]
fn _assert_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<SystemClock>();
    assert::<FsWorkspace>();
    assert::<FsBlobStore>();
    assert::<InMemoryBlobStore>();
    assert::<InMemoryRunStore>();
    assert::<RecordingCompletion>();
    assert::<RecordingConfig>();
    assert::<ReceiptCollector>();
    assert::<ReplayCompletion>();
    #[cfg(feature = "sqlite")]
    {
        assert::<SqliteStore>();
        assert::<SqliteBlobStore>();
        assert::<TieredBlobStore>();
    }
    #[cfg(feature = "openai")]
    {
        assert::<OpenAiCompletion>();
        assert::<OpenAiConfig>();
    }
}

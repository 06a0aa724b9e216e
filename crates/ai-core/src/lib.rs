//! The semantic core of cogni-tools: what a tool is, who may call it, and the one path that runs
//! it.
//!
//! This crate owns the canonical tool types ([`ToolId`], [`ToolSpec`], [`ToolExecResult`],
//! [`ToolInvocationRecord`]), the events a run emits ([`AiEvent`]), the ports the rest of the
//! workspace implements ([`ToolSource`], [`BoundTool`], [`Clock`], [`EventSink`],
//! [`ConnectionBroker`], [`CompletionPort`], [`BlobStore`], [`Workspace`], [`ThreadStore`],
//! [`RunStore`]), model call receipts ([`ModelReceipt`]), the deny-by-default
//! [`ToolPolicy`], the [`ToolCatalog`], the [`ToolRunner`] pipeline, and the provider-neutral
//! message model with [`validate_history`].
//!
//! It never does IO (no files, sockets, environment or wall clock: time comes through
//! [`Clock`]) and never names a JSON Schema library: schemas are plain [`serde_json::Value`]s
//! here, and validating against them is the job of each [`BoundTool`]: `cogni-ai-tools`'
//! `bind` makes one from a contract whose input and output are Rust types, its schemas derived.
//!
//! An app's first steps: bind its tools with `cogni-ai-tools` (whose crate docs show one run
//! through the [`ToolRunner`]) into a [`StaticToolSource`], read a [`ToolPolicy`], build the
//! run's [`ToolCatalog`], and hand the runner to `cogni-graph`'s agent loop; that crate's
//! `examples/own_agent.rs` composes them all. Both re-export this crate, so an app names these
//! types through either without depending on it.
//!
//! # Example
//!
//! ```
//! use ai_core::{ToolEffect, ToolId, ToolPolicy, PolicyDecision, RunContext};
//!
//! let policy = ToolPolicy::from_toml_str(r#"
//!     allowed_tools = ["core__get_current_time"]
//! "#).unwrap();
//! let ctx = RunContext::new("run-1", "user:alice", "tenant-1").unwrap();
//! let time = ToolId::parse("core__get_current_time").unwrap();
//! let other = ToolId::parse("core__workspace_write").unwrap();
//! assert_eq!(policy.decide(&ctx, &time, ToolEffect::ReadOnly), PolicyDecision::Allow);
//! assert_eq!(policy.decide(&ctx, &other, ToolEffect::StateChange), PolicyDecision::Deny);
//! ```

mod canonical;
mod catalog;
mod completion;
mod context;
mod error;
mod event;
mod id;
mod json_error;
mod message;
mod policy;
mod ports;
mod receipt;
mod result;
mod run_store;
mod runner;
mod schema;
mod secret;
mod source;
mod spec;
mod thread;
mod toml_error;
mod workspace;

/// The attribute this crate's port traits are declared with ([`BoundTool`], [`CompletionPort`],
/// [`ThreadStore`], …); an implementation needs it too (`#[ai_core::async_trait]`): a native
/// `async fn` does not match these traits.
pub use async_trait::async_trait;
pub use canonical::{
    MAX_JSON_DEPTH, canonical_json, compact_json_len, nests_deeper_than, sha256_hex,
};
pub use catalog::ToolCatalog;
pub use completion::{
    CompletionDelta, CompletionError, FinishReason, GraphRef, LlmCaller, LlmCompletion, LlmRequest,
    LlmToolCall, ToolChoice, Usage, prompt_hash,
};
pub use context::{ConnectionGrant, ConnectionId, RunContext, ToolInvocationContext};
pub use error::{Error, Result};
pub use event::{AiEvent, DoneReason};
pub use id::{RunId, ToolCallId, ToolId};
pub use json_error::describe_json_error;
pub use message::{AssistantToolCall, HistoryError, Message, validate_history};
pub use policy::{BreakerPolicy, Budgets, PolicyDecision, RetryPolicy, ToolPolicy};
pub use ports::{
    AuthCapability, AuthError, Authorizer, AuthzDecision, BlobStore, BlobStoreError, Clock,
    CompletionPort, ConnectionBroker, DeltaSink, EventSink,
};
pub use receipt::{
    ModelReceipt, OutputItem, ReceiptError, ReceiptSink, ToolCallBlob, canonical_bytes,
};
pub use result::{
    Attempt, MAX_SAFE_MESSAGE_BYTES, ToolCallStatus, ToolErrorCategory, ToolErrorCode,
    ToolExecResult, ToolFailure, ToolInvocationRecord, ToolOutcome,
};
pub use run_store::{
    DanglingToolCall, InterruptedRun, MAX_RUN_TIME_MS, RunHeader, RunLog, RunStatus, RunStep,
    RunStore, RunStoreError, RunSummary,
};
pub use runner::{
    BreakerStatus, ExecPermit, LatencyPercentiles, RunnerConfig, ToolCall, ToolRun, ToolRunner,
    ToolStats, install_tool_panic_hook, own_code, port_call, port_future,
};
pub use schema::{SchemaViolation, join_descriptions, validate_tool_schema_p0};
pub use secret::Secret;
pub use source::{BoundTool, Capabilities, StaticToolSource, ToolError, ToolSource};
pub use spec::{Redaction, ToolEffect, ToolSpec};
pub use thread::{ThreadId, ThreadStore, ThreadStoreError};
pub use toml_error::describe_toml_error;
pub use workspace::{
    FilePart, MAX_LIST_ENTRIES, Workspace, WorkspaceEntry, WorkspaceError, WorkspaceListing,
};

/// Re-exported so that callers name the same cancellation token the runner listens to.
pub use tokio_util::sync::CancellationToken;

#[allow(dead_code)]
fn _assert_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<ToolRunner>();
    assert::<ToolCatalog>();
    assert::<ToolPolicy>();
    assert::<StaticToolSource>();
    assert::<AiEvent>();
}

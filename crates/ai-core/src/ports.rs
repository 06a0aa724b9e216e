//! The ports: traits that ai-core needs from the outside world, implemented by adapter crates.
//!
//! No signature names an IO type. Each has an example implementation in its docs.

use async_trait::async_trait;

use crate::{
    AiEvent, CompletionDelta, CompletionError, ConnectionId, LlmCompletion, LlmRequest, RunContext,
    Secret, ToolId, ToolInvocationContext,
};

/// Time, as milliseconds since the Unix epoch. The only way ai-core learns the time.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// struct ManualClock(AtomicU64);
/// impl ai_core::Clock for ManualClock {
///     fn now_ms(&self) -> u64 { self.0.load(Ordering::Relaxed) }
/// }
/// assert_eq!(ai_core::Clock::now_ms(&ManualClock(AtomicU64::new(7))), 7);
/// ```
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// Where a run's events go (a channel to a UI stream, a log, a test vector).
///
/// Closures are sinks:
///
/// ```
/// use std::sync::Mutex;
/// use ai_core::{AiEvent, EventSink};
/// let seen = Mutex::new(Vec::new());
/// let sink = |e: AiEvent| seen.lock().unwrap().push(e);
/// sink.emit(AiEvent::TextDelta { delta: "hi".into() });
/// assert_eq!(seen.lock().unwrap().len(), 1);
/// ```
pub trait EventSink: Send + Sync {
    /// Delivers one event. Must not block for long.
    fn emit(&self, event: AiEvent);

    /// Receives the audit record of a finished invocation, just before its
    /// [`AiEvent::ToolCallResult`] (validated arguments, redacted result; never a secret). Sinks
    /// that do not keep records ignore it.
    fn record(&self, record: &crate::ToolInvocationRecord) {
        let _ = record;
    }
}

impl<F: Fn(AiEvent) + Send + Sync> EventSink for F {
    fn emit(&self, event: AiEvent) {
        self(event)
    }
}

/// Why credentials could not be had; the message is safe to show.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthError(pub String);

/// Credentials for the one connection an invocation was granted. Methods take no connection id:
/// the capability is bound to a single connection when the broker makes it (invariant 29a).
///
/// ```
/// use ai_core::{AuthCapability, AuthError, Secret};
/// struct Fixed(Secret);
/// #[ai_core::async_trait]
/// impl AuthCapability for Fixed {
///     async fn access_token(&self) -> Result<Secret, AuthError> { Ok(self.0.clone()) }
/// }
/// ```
#[async_trait]
pub trait AuthCapability: Send + Sync {
    /// The access token of the bound connection.
    async fn access_token(&self) -> Result<Secret, AuthError>;
}

/// Resolves a granted connection to a credential capability, once per invocation.
///
/// The runner calls it only after the connection passed `grant ∩ requested` (invariant 30).
///
/// ```
/// use ai_core::{AuthCapability, AuthError, ConnectionBroker, ConnectionId, Secret,
///     ToolInvocationContext};
/// struct Vault;
/// struct Token(Secret);
/// #[ai_core::async_trait]
/// impl AuthCapability for Token {
///     async fn access_token(&self) -> Result<Secret, AuthError> { Ok(self.0.clone()) }
/// }
/// #[ai_core::async_trait]
/// impl ConnectionBroker for Vault {
///     async fn resolve(&self, connection_id: &ConnectionId, _: &ToolInvocationContext)
///         -> Result<Box<dyn AuthCapability>, AuthError> {
///         Ok(Box::new(Token(Secret::new(format!("token-for-{}", connection_id.as_str())))))
///     }
/// }
/// ```
#[async_trait]
pub trait ConnectionBroker: Send + Sync {
    /// A capability bound to `connection_id` for this invocation only.
    async fn resolve(
        &self,
        connection_id: &ConnectionId,
        ctx: &ToolInvocationContext,
    ) -> Result<Box<dyn AuthCapability>, AuthError>;
}

/// The authorization hook's answer.
///
/// Exhaustive on purpose: a catch-all arm in code that acts on it could let an answer it does
/// not know through as an `Allow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthzDecision {
    /// The actor may execute the tool.
    Allow,
    /// The actor may not.
    Deny,
}

/// Checks that the actor (and subject, when acting on someone's behalf) may execute a tool.
///
/// ```
/// use ai_core::{Authorizer, AuthzDecision, RunContext, ToolId};
/// struct AdminsOnly;
/// #[ai_core::async_trait]
/// impl Authorizer for AdminsOnly {
///     async fn check(&self, ctx: &RunContext, _: &ToolId) -> AuthzDecision {
///         if ctx.actor_id().starts_with("user:admin") {
///             AuthzDecision::Allow
///         } else {
///             AuthzDecision::Deny
///         }
///     }
/// }
/// ```
#[async_trait]
pub trait Authorizer: Send + Sync {
    /// Decides `tool.execute` on `tool` for the context's actor.
    async fn check(&self, ctx: &RunContext, tool: &ToolId) -> AuthzDecision;
}

/// Receives streamed fragments of a model call.
pub trait DeltaSink: Send {
    /// Delivers one fragment.
    fn delta(&mut self, delta: CompletionDelta);
}

impl<F: FnMut(CompletionDelta) + Send> DeltaSink for F {
    fn delta(&mut self, delta: CompletionDelta) {
        self(delta)
    }
}

/// A model endpoint: streams fragments while it runs and resolves exactly one completion.
///
/// Deltas are for display only: the loop takes text and tool calls from the completion. A port
/// may stream nothing (a non-streaming API, a cache); the text of a completion with no text
/// delta is then shown as one. A streamed tool call should carry the id its [`LlmToolCall`] has
/// in the completion: the display pairs them by id. A port returns
/// [`CompletionError::Cancelled`] once the token fires.
///
/// [`LlmToolCall`]: crate::LlmToolCall
///
/// ```
/// use ai_core::{CancellationToken, CompletionDelta, CompletionError, CompletionPort, DeltaSink,
///     FinishReason, LlmCompletion, LlmRequest};
/// struct Canned;
/// #[ai_core::async_trait]
/// impl CompletionPort for Canned {
///     async fn complete(&self, _: &LlmRequest, deltas: &mut dyn DeltaSink,
///         _: &CancellationToken) -> Result<LlmCompletion, CompletionError> {
///         deltas.delta(CompletionDelta::Text { delta: "hi".into() });
///         Ok(LlmCompletion { text: "hi".into(), tool_calls: vec![],
///             finish_reason: FinishReason::Stop, usage: None })
///     }
/// }
/// ```
#[async_trait]
pub trait CompletionPort: Send + Sync {
    /// Runs one model call.
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<LlmCompletion, CompletionError>;
}

/// Why a blob could not be stored or read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlobStoreError {
    /// No blob has this address.
    #[error("blob {0} not found")]
    NotFound(String),
    /// The stored bytes do not hash to their address.
    #[error("blob {0} is corrupt: its bytes do not match its hash")]
    Corrupt(String),
    /// The address is not 64 lower-case hex digits (nothing was looked up).
    #[error("invalid blob address {0:?}: a blob address is 64 lower-case hex digits")]
    InvalidHash(String),
    /// The blob is larger than the store holds: a put of it is refused, and so is a get of
    /// something this large at its address (which no put wrote), before it is read.
    #[error("blob {hash} is {size} bytes, more than the {max} bytes a blob of this store may hold")]
    TooLarge {
        /// The blob's address.
        hash: String,
        /// Its size in bytes.
        size: u64,
        /// The store's limit in bytes.
        max: u64,
    },
    /// The store itself failed.
    #[error("blob store failed: {0}")]
    Backend(String),
}

/// Content-addressed storage: the address of a blob is the lower-case hex SHA-256 of its bytes.
///
/// ```
/// use std::{collections::HashMap, sync::Mutex};
/// use ai_core::{BlobStore, BlobStoreError, sha256_hex};
/// #[derive(Default)]
/// struct InMemory(Mutex<HashMap<String, Vec<u8>>>);
/// #[ai_core::async_trait]
/// impl BlobStore for InMemory {
///     async fn put(&self, bytes: &[u8]) -> Result<String, BlobStoreError> {
///         let hash = sha256_hex(bytes);
///         self.0.lock().unwrap().entry(hash.clone()).or_insert_with(|| bytes.to_vec());
///         Ok(hash)
///     }
///     async fn get(&self, hash: &str) -> Result<Vec<u8>, BlobStoreError> {
///         let bytes = self.0.lock().unwrap().get(hash).cloned()
///             .ok_or_else(|| BlobStoreError::NotFound(hash.into()))?;
///         if sha256_hex(&bytes) != hash { return Err(BlobStoreError::Corrupt(hash.into())); }
///         Ok(bytes)
///     }
/// }
/// ```
#[async_trait]
pub trait BlobStore: Send + Sync {
    /// Stores `bytes` (idempotent) and returns their address.
    async fn put(&self, bytes: &[u8]) -> Result<String, BlobStoreError>;
    /// Stores a batch and returns the addresses in the same order. Every blob is stored when it
    /// returns `Ok`; stores may share the cost of making a batch durable. By default, one
    /// [`BlobStore::put`] after another.
    async fn put_many(&self, blobs: &[&[u8]]) -> Result<Vec<String>, BlobStoreError> {
        let mut hashes = Vec::with_capacity(blobs.len());
        for bytes in blobs {
            hashes.push(self.put(bytes).await?);
        }
        Ok(hashes)
    }
    /// Reads the blob at `hash`, checking the bytes against the address.
    async fn get(&self, hash: &str) -> Result<Vec<u8>, BlobStoreError>;
}

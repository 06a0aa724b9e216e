//! Threads: a conversation's server-side state, kept under a stable id between turns.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Error;

/// The stable id of a conversation (from the client's thread or chat id).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ThreadId(String);

impl ThreadId {
    /// Builds a thread id of 1..=128 characters, none of them a control character.
    pub fn new(raw: impl Into<String>) -> Result<Self, Error> {
        let raw = raw.into();
        crate::context::check_ref("thread_id", &raw)?;
        Ok(Self(raw))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ThreadId {
    type Error = Error;
    fn try_from(raw: String) -> Result<Self, Error> {
        Self::new(raw)
    }
}

impl From<ThreadId> for String {
    fn from(id: ThreadId) -> String {
        id.0
    }
}

/// Why a thread could not be loaded or saved. More reasons may come, as for the other ports'
/// errors: a match on one has a `_` arm.
///
/// ```compile_fail,E0004
/// fn refused(error: &ai_core::ThreadStoreError) -> bool {
///     match error {
///         ai_core::ThreadStoreError::Failed(_) => false,
///         ai_core::ThreadStoreError::Changed => true,
///     }
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadStoreError {
    /// The store could not do it (its IO failed, a stored row is damaged, …). The text names
    /// what failed, never the thread's state.
    #[error("thread store failed: {0}")]
    Failed(String),
    /// A save found the thread no longer holding the state it was to replace: another turn saved
    /// it since it was read. Nothing was written.
    #[error("the thread changed since it was read: another turn saved it meanwhile")]
    Changed,
}

/// Where threads live between turns. The state is the loop's serialized state, opaque here, so
/// stores need not depend on the loop's crate.
///
/// A save is a compare-and-swap: it replaces the state it was told it replaces, as `load` gave
/// it, or nothing. So of two turns that read one thread at once, only the first to save goes on;
/// the other is refused ([`ThreadStoreError::Changed`]) rather than overwriting it, and two
/// resumes of one pause cannot both run its approved calls. States are compared as [`Value`]s,
/// and a save may name the state the caller saved last rather than one loaded since (a resume
/// saves past its pause, then over that at its end): so `load` gives back a state equal to the
/// one saved. A store that keeps text reads every number back as written (serde_json's
/// `float_roundtrip`, as adapters' stores do), or such a save is refused.
///
/// ```
/// use std::{collections::HashMap, sync::Mutex};
/// use ai_core::{ThreadId, ThreadStore, ThreadStoreError};
/// use serde_json::Value;
/// #[derive(Default)]
/// struct InMemory(Mutex<HashMap<ThreadId, Value>>);
/// #[ai_core::async_trait]
/// impl ThreadStore for InMemory {
///     async fn load(&self, id: &ThreadId) -> Result<Option<Value>, ThreadStoreError> {
///         Ok(self.0.lock().unwrap().get(id).cloned())
///     }
///     async fn save(
///         &self,
///         id: &ThreadId,
///         previous: Option<&Value>,
///         state: &Value,
///     ) -> Result<(), ThreadStoreError> {
///         let mut threads = self.0.lock().unwrap();
///         if threads.get(id) != previous {
///             return Err(ThreadStoreError::Changed);
///         }
///         threads.insert(id.clone(), state.clone());
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait ThreadStore: Send + Sync {
    /// The saved state of a thread, if it exists: equal to the state last saved.
    async fn load(&self, id: &ThreadId) -> Result<Option<Value>, ThreadStoreError>;
    /// Saves (replaces) a thread's state, only while its saved state is still `previous` (as
    /// [`ThreadStore::load`] gave it, or as it was saved; `None`: a thread the store does not
    /// hold), checked and written as one step even across processes sharing the store.
    /// Otherwise nothing is written and the save is refused with [`ThreadStoreError::Changed`];
    /// a store that forgets threads to stay within bounds (bootstrap's `MemoryThreads`) refuses
    /// a save over a thread it forgot as [`ThreadStoreError::Failed`] instead, saying so: the
    /// thread holds no other turn (whether another was saved before it was forgotten, the store
    /// cannot tell).
    async fn save(
        &self,
        id: &ThreadId,
        previous: Option<&Value>,
        state: &Value,
    ) -> Result<(), ThreadStoreError>;
}

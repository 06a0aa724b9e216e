//! An in-memory [`ThreadStore`], for tests and single-process use.

use std::collections::HashMap;
use std::sync::Mutex;

use ai_core::{ThreadId, ThreadStore, ThreadStoreError};
use async_trait::async_trait;
use serde_json::Value;

/// Threads in a map; lost when the process ends.
#[derive(Debug, Default)]
pub struct InMemoryThreadStore {
    threads: Mutex<HashMap<ThreadId, Value>>,
}

#[async_trait]
impl ThreadStore for InMemoryThreadStore {
    async fn load(&self, id: &ThreadId) -> Result<Option<Value>, ThreadStoreError> {
        let threads = self
            .threads
            .lock()
            .map_err(|_| ThreadStoreError("the thread map is poisoned".into()))?;
        Ok(threads.get(id).cloned())
    }

    async fn save(&self, id: &ThreadId, state: &Value) -> Result<(), ThreadStoreError> {
        let mut threads = self
            .threads
            .lock()
            .map_err(|_| ThreadStoreError("the thread map is poisoned".into()))?;
        threads.insert(id.clone(), state.clone());
        Ok(())
    }
}

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
        let threads = self.threads.lock().map_err(|_| poisoned())?;
        Ok(threads.get(id).cloned())
    }

    async fn save(
        &self,
        id: &ThreadId,
        previous: Option<&Value>,
        state: &Value,
    ) -> Result<(), ThreadStoreError> {
        let mut threads = self.threads.lock().map_err(|_| poisoned())?;
        if threads.get(id) != previous {
            return Err(ThreadStoreError::Changed);
        }
        threads.insert(id.clone(), state.clone());
        Ok(())
    }
}

/// What a load or save meets once a thread holding the lock panicked.
fn poisoned() -> ThreadStoreError {
    ThreadStoreError::Failed("the thread map is poisoned".into())
}

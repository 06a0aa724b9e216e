//! [`MemoryThreads`]: where a server without a data folder keeps its threads, in bounded memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use ai_core::{ThreadId, ThreadStore, ThreadStoreError};
use async_trait::async_trait;
use serde_json::Value;

use crate::lru::Lru;

/// Threads in memory, lost when the process ends, and bounded while it runs: at most
/// `max_threads` threads and `max_bytes` bytes (each thread's id and its state as JSON). Past
/// either, the thread used least recently (loaded or saved) is forgotten, unless a
/// [`ThreadHold`] holds it (the server holds each thread a run is in flight on); held threads are
/// never forgotten, and count towards the bounds, so the bounds may be passed by them until they
/// are let go. A forgotten thread loads as `None`, as one the store never had: a server then
/// goes on from the client's copy of the conversation, as after a restart. A save over a state
/// of a thread forgotten since it was read (a run on it that no hold kept: its save past a pause
/// took it past `max_bytes` alone, or other threads' saves pushed it out) is refused as
/// [`ThreadStoreError::Failed`] saying so, writing nothing: not as
/// [`ThreadStoreError::Changed`], since it holds no other turn (whether another turn saved it
/// before it was forgotten, the store cannot tell). A caller that runs a thread holds it for the
/// run, as the server does.
///
/// So any number of clients, threads and turns cannot grow it past its bounds and the threads
/// held (a server holds at most `max_concurrent_runs`). States are kept as JSON text: what is
/// counted is what is kept.
///
/// ```
/// use ai_core::{ThreadId, ThreadStore};
/// use bootstrap::MemoryThreads;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = std::sync::Arc::new(MemoryThreads::new(2, 1 << 20));
/// let [a, b, c] = ["a", "b", "c"].map(|id| ThreadId::new(id).unwrap());
/// let state = serde_json::json!({"messages": []});
/// let held = store.hold(&a);
/// for id in [&a, &b, &c] {
///     store.save(id, None, &state).await.unwrap();
/// }
/// // Past two threads: `b`, used least recently but for the held `a`, is forgotten.
/// assert!(store.load(&b).await.unwrap().is_none());
/// assert!(store.load(&a).await.unwrap().is_some());
/// drop(held);
/// # });
/// ```
#[derive(Debug)]
pub struct MemoryThreads {
    inner: Mutex<Kept>,
    /// The bounds it was made with, `max_threads` and `max_bytes`, for its errors to name.
    bounds: (usize, usize),
}

#[derive(Debug)]
struct Kept {
    /// Each thread's state as JSON, sized by its id and its text.
    threads: Lru<Box<str>>,
    /// The threads held, with how many holds each.
    held: HashMap<ThreadId, usize>,
}

impl Kept {
    /// Forgets the threads used least recently that no hold keeps, until the bounds hold or
    /// only held threads are past them.
    fn evict(&mut self) {
        let held = &self.held;
        self.threads.evict(|id| held.contains_key(id));
    }
}

impl MemoryThreads {
    /// The most threads kept by default, besides those held: 1,000.
    pub const DEFAULT_MAX_THREADS: usize = 1_000;

    /// The most bytes of threads kept by default, besides those held: 64 MiB.
    pub const DEFAULT_MAX_BYTES: usize = 64 * 1024 * 1024;

    /// A store that keeps at most `max_threads` threads and `max_bytes` bytes of them, besides
    /// those held.
    pub fn new(max_threads: usize, max_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Kept {
                threads: Lru::new(max_threads, max_bytes),
                held: HashMap::new(),
            }),
            bounds: (max_threads, max_bytes),
        }
    }

    /// Keeps thread `id` (once saved) until the hold is dropped, however many threads are used
    /// meanwhile; then it is forgotten, if the bounds are passed and it was used least recently.
    pub fn hold(self: &Arc<Self>, id: &ThreadId) -> ThreadHold {
        *self.lock().held.entry(id.clone()).or_default() += 1;
        ThreadHold {
            store: self.clone(),
            id: id.clone(),
        }
    }

    /// How many threads are kept, and their bytes.
    pub fn size(&self) -> (usize, usize) {
        self.lock().threads.size()
    }

    /// The map, even after a panic elsewhere: every change to it is whole before it can panic.
    fn lock(&self) -> MutexGuard<'_, Kept> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for MemoryThreads {
    /// [`MemoryThreads::new`] with the default bounds.
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX_THREADS, Self::DEFAULT_MAX_BYTES)
    }
}

#[async_trait]
impl ThreadStore for MemoryThreads {
    async fn load(&self, id: &ThreadId) -> Result<Option<Value>, ThreadStoreError> {
        self.lock()
            .threads
            .get(id)
            .map(|state| decode(state))
            .transpose()
    }

    async fn save(
        &self,
        id: &ThreadId,
        previous: Option<&Value>,
        state: &Value,
    ) -> Result<(), ThreadStoreError> {
        let state: Box<str> = state.to_string().into();
        let size = id.as_str().len() + state.len();
        let mut kept = self.lock();
        // Compared as values, not as text: equal values may be written apart (`-0.0`, `0.0`).
        let saved = kept
            .threads
            .get(id)
            .map(|saved| decode(saved))
            .transpose()?;
        if saved.is_none() && previous.is_some() {
            // A save always leaves a state, and nothing else takes one out: the thread was
            // forgotten (whether another turn saved it first is forgotten with it).
            let (max_threads, max_bytes) = self.bounds;
            return Err(ThreadStoreError::Failed(format!(
                "the thread was forgotten since it was read: this store keeps at most \
                 {max_threads} threads and {max_bytes} bytes of them besides those held, \
                 forgetting the least recently used (and at once one past the bytes alone), \
                 and no hold kept it (MemoryThreads::hold); nothing was written"
            )));
        }
        if saved.as_ref() != previous {
            return Err(ThreadStoreError::Changed);
        }
        kept.threads.insert(id, state, size);
        kept.evict();
        Ok(())
    }
}

/// A kept state as it was saved. Never fails: the text was encoded from a `Value`.
fn decode(state: &str) -> Result<Value, ThreadStoreError> {
    serde_json::from_str(state)
        .map_err(|e| ThreadStoreError::Failed(format!("a kept thread does not decode: {e}")))
}

/// Keeps a thread of a [`MemoryThreads`] from being forgotten while it lives
/// ([`MemoryThreads::hold`]).
#[derive(Debug)]
pub struct ThreadHold {
    store: Arc<MemoryThreads>,
    id: ThreadId,
}

impl Drop for ThreadHold {
    fn drop(&mut self) {
        let mut kept = self.store.lock();
        if let Some(holds) = kept.held.get_mut(&self.id) {
            *holds -= 1;
            if *holds == 0 {
                kept.held.remove(&self.id);
            }
        }
        kept.evict();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ai_core::{ThreadId, ThreadStore};
    use serde_json::json;

    use super::MemoryThreads;

    fn id(n: usize) -> ThreadId {
        ThreadId::new(format!("t-{n}")).unwrap()
    }

    async fn kept(store: &MemoryThreads, n: usize) -> bool {
        store.load(&id(n)).await.unwrap().is_some()
    }

    /// Past its most threads, the store forgets the one used least recently (a load counts as
    /// a use), and never one held; a thread let go is forgotten in its turn.
    #[tokio::test]
    async fn past_its_threads_the_least_recently_used_one_not_held_is_forgotten() {
        let store = Arc::new(MemoryThreads::new(3, usize::MAX));
        let state = json!({"messages": ["hi"]});
        let held = store.hold(&id(0));
        for n in 0..3 {
            store.save(&id(n), None, &state).await.unwrap();
        }
        assert!(
            kept(&store, 1).await,
            "used now: t-2 is the least recent not held"
        );
        store.save(&id(3), None, &state).await.unwrap();
        assert!(
            !kept(&store, 2).await,
            "the least recently used thread is kept"
        );
        for n in [0, 1, 3] {
            assert!(kept(&store, n).await, "t-{n} was forgotten");
        }
        for n in 4..10 {
            store.save(&id(n), None, &state).await.unwrap();
        }
        assert!(kept(&store, 0).await, "a held thread was forgotten");
        assert_eq!(store.size().0, 3);
        drop(held);
        assert!(kept(&store, 0).await, "used last, so kept");
        store.save(&id(10), None, &state).await.unwrap();
        assert!(!kept(&store, 8).await, "t-8 was used least recently");
        assert_eq!(store.size().0, 3);
    }

    /// Past its bytes, the store forgets threads as it does past its count, a thread larger than
    /// all of them included once no hold keeps it; the bytes counted are what is kept.
    #[tokio::test]
    async fn past_its_bytes_threads_are_forgotten_and_the_bytes_counted_stay_true() {
        let state = json!({"messages": ["hello"]});
        let one = "t-0".len() + state.to_string().len();
        let store = Arc::new(MemoryThreads::new(usize::MAX, 2 * one));
        store.save(&id(0), None, &state).await.unwrap();
        store.save(&id(1), None, &state).await.unwrap();
        assert_eq!(store.size(), (2, 2 * one));
        // Saved again, a thread replaces its bytes.
        store.save(&id(0), Some(&state), &state).await.unwrap();
        assert_eq!(store.size(), (2, 2 * one));
        store.save(&id(2), None, &state).await.unwrap();
        assert!(!kept(&store, 1).await);
        assert_eq!(store.size(), (2, 2 * one));

        let large = json!({"messages": ["x".repeat(3 * one)]});
        let held = store.hold(&id(9));
        store.save(&id(9), None, &large).await.unwrap();
        assert_eq!(
            store.size().0,
            1,
            "the others are forgotten for a held large thread"
        );
        assert_eq!(store.load(&id(9)).await.unwrap(), Some(large));
        drop(held);
        assert_eq!(store.size(), (0, 0), "let go, it is past the bytes alone");
    }

    /// A save over the state of a thread the store forgot since (no hold kept it: here its save
    /// past a pause took it past the bytes alone, as a library caller's `resume_thread` may
    /// without [`MemoryThreads::hold`]) is refused saying the store forgot it, and why, not as
    /// `Changed`: no other turn saved it. Nothing is written. One over the state of a thread
    /// another turn saved since is still `Changed`.
    #[tokio::test]
    async fn a_save_over_a_thread_it_forgot_says_it_was_forgotten() {
        let paused = json!({"messages": ["hello"]});
        let store = MemoryThreads::new(usize::MAX, "t-0".len() + paused.to_string().len());
        store.save(&id(0), None, &paused).await.unwrap();
        let past_the_pause = json!({"messages": ["hello", "approved"]});
        store
            .save(&id(0), Some(&paused), &past_the_pause)
            .await
            .unwrap();
        assert!(
            !kept(&store, 0).await,
            "past the bytes alone, it is forgotten"
        );
        let closing = store
            .save(&id(0), Some(&past_the_pause), &json!({"messages": []}))
            .await;
        let Err(ai_core::ThreadStoreError::Failed(message)) = closing else {
            panic!("{closing:?}");
        };
        assert!(
            message.contains("forgot") && message.contains("MemoryThreads::hold"),
            "{message}"
        );
        assert!(!message.contains("hello"), "{message}");
        assert!(!kept(&store, 0).await, "written");

        store.save(&id(1), None, &paused).await.unwrap();
        store.save(&id(1), Some(&paused), &paused).await.unwrap();
        assert_eq!(
            store.save(&id(1), Some(&json!({"a": 1})), &paused).await,
            Err(ai_core::ThreadStoreError::Changed)
        );
    }
}

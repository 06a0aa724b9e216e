//! [`Lru`]: values by thread, bounded in count and bytes, the least recently used forgotten
//! first. [`crate::MemoryThreads`] and [`crate::StoredHistories`] keep theirs in one.

use std::collections::{BTreeMap, HashMap};

use ai_core::ThreadId;

/// Values by thread with their sizes in bytes, each marked when it was last used, within at
/// most `max_len` values and `max_bytes` bytes once [`Lru::evict`] has run. Not locked: its
/// owner holds it behind its own lock.
#[derive(Debug)]
pub(crate) struct Lru<V> {
    /// Each thread's value, its size, and when it was last used (a key of `by_use`).
    values: HashMap<ThreadId, (V, usize, u64)>,
    /// The threads by when they were last used, least recently first.
    by_use: BTreeMap<u64, ThreadId>,
    /// The next use's number.
    next_use: u64,
    /// The sizes of `values`, summed.
    bytes: usize,
    max_len: usize,
    max_bytes: usize,
}

impl<V> Lru<V> {
    /// Empty, to be bounded by `max_len` values and `max_bytes` bytes.
    pub(crate) fn new(max_len: usize, max_bytes: usize) -> Self {
        Self {
            values: HashMap::new(),
            by_use: BTreeMap::new(),
            next_use: 0,
            bytes: 0,
            max_len,
            max_bytes,
        }
    }

    /// How many values are kept, and their bytes.
    pub(crate) fn size(&self) -> (usize, usize) {
        (self.values.len(), self.bytes)
    }

    /// `thread`'s value, marked used now.
    pub(crate) fn get(&mut self, thread: &ThreadId) -> Option<&V> {
        let now = self.next_use;
        let (value, _, used) = self.values.get_mut(thread)?;
        self.by_use.remove(used);
        *used = now;
        self.by_use.insert(now, thread.clone());
        self.next_use += 1;
        Some(value)
    }

    /// Takes `thread`'s value out.
    pub(crate) fn take(&mut self, thread: &ThreadId) -> Option<V> {
        let (value, size, used) = self.values.remove(thread)?;
        self.by_use.remove(&used);
        self.bytes -= size;
        Some(value)
    }

    /// Keeps `value` of `size` bytes as `thread`'s, used now, in place of any it had. Call
    /// [`Lru::evict`] after it for the bounds to hold again.
    pub(crate) fn insert(&mut self, thread: &ThreadId, value: V, size: usize) {
        self.take(thread);
        let now = self.next_use;
        self.next_use += 1;
        self.bytes += size;
        self.values.insert(thread.clone(), (value, size, now));
        self.by_use.insert(now, thread.clone());
    }

    /// Forgets the values used least recently, skipping the threads `kept` names, until the
    /// bounds hold or only such threads pass them.
    pub(crate) fn evict(&mut self, kept: impl Fn(&ThreadId) -> bool) {
        while self.values.len() > self.max_len || self.bytes > self.max_bytes {
            let Some(oldest) = self.by_use.values().find(|id| !kept(id)).cloned() else {
                return;
            };
            self.take(&oldest);
        }
    }
}

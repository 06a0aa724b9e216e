//! How a [`RunInput`] is stored: the thread's history as a chain of content-addressed message
//! blobs that the thread's runs share, and the rest of the input in the blob the run's
//! `input_ref` names.
//!
//! Stored form 2 (what [`RunInput::store`] writes) is the input's JSON with the thread state's
//! `messages` taken out, and two keys added: `stored_form` (`2`) and `history`
//! (`{"len": n, "last": <address>}`, no `last` when the history is empty). Each message is a
//! blob of its own, `{"message": …, "prev": <address>}` (no `prev` for the first), so the
//! address of the last one names the whole history. A message's blob depends only on the
//! message and the ones before it: every run of a thread names the blobs its earlier runs
//! stored for the history they share, and the blob store keeps one copy of each. So a thread of
//! N turns stores its inputs in bytes linear in N, where the whole state in each input took N².
//!
//! A run of a thread hands the blob store only the messages new since the thread's last stored
//! input in this process ([`RunInput::store_on_thread`], [`StoredHistories`]): the messages
//! before are named by the addresses stored then, without being encoded or hashed again.
//!
//! Stored form 1 (an input with no `stored_form`) holds the whole thread state inline, as every
//! input recorded before form 2 does: it is still read ([`RunInput::load`]), to the same
//! [`RunInput`].

use std::sync::{Mutex, MutexGuard};

use ai_core::{
    BlobStore, BlobStoreError, Message, ThreadId, canonical_bytes, describe_json_error, sha256_hex,
};
use anyhow::Context;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::RunInput;
use crate::lru::Lru;

/// The stored form [`RunInput::store`] writes, under the key `stored_form`; an input without
/// that key is in form 1 (its thread's whole state inline).
pub const RUN_INPUT_FORM: u64 = 2;

/// The key of an input's stored form.
const FORM: &str = "stored_form";
/// The key of a form 2 input's history: its length and the address of its last message.
const HISTORY: &str = "history";

/// Why a stored run input could not be read. Never quotes what the input holds (the user's
/// message, the thread's history): only which blob is missing, damaged or undecodable, and how.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunInputError {
    /// The input blob itself could not be read.
    Input(BlobStoreError),
    /// The input blob does not decode as a run input (what is wrong, never the content).
    Decode(String),
    /// The input was stored in a form this build does not read (a newer cogni wrote it).
    NewerForm(u64),
    /// The blob of a message of the input's history could not be read.
    Message {
        /// The message's place in the history, from 1.
        position: usize,
        /// The history's length.
        len: usize,
        /// Why.
        source: BlobStoreError,
    },
    /// The blob of a message of the input's history does not decode as one, or the chain of
    /// message blobs is not as long as the input says.
    MessageDecode {
        /// The message's place in the history, from 1.
        position: usize,
        /// The history's length.
        len: usize,
        /// The message blob's address.
        hash: String,
    },
}

impl std::fmt::Display for RunInputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Input(error) => error.fmt(f),
            Self::Decode(what) => write!(f, "does not decode as a run input: {what}"),
            Self::NewerForm(form) => write!(
                f,
                "was stored in form {form}, which this build of cogni does not read (it reads \
                 forms 1 to {RUN_INPUT_FORM}): read it with the version of cogni that recorded it"
            ),
            Self::Message {
                position,
                len,
                source,
            } => write!(f, "message {position} of {len} of its history: {source}"),
            Self::MessageDecode {
                position,
                len,
                hash,
            } => write!(
                f,
                "message {position} of {len} of its history: blob {hash} does not decode as a \
                 message of a run's history"
            ),
        }
    }
}

impl std::error::Error for RunInputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Input(source) | Self::Message { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl RunInputError {
    /// What keeps the input from being read, in words for a log line about its run (no
    /// address, no content).
    pub(crate) fn problem(&self) -> &'static str {
        match self {
            Self::Input(BlobStoreError::NotFound(_)) => "its input blob is missing",
            Self::Input(BlobStoreError::Corrupt(_)) => {
                "its input blob is damaged (its bytes do not match its hash)"
            }
            Self::Input(_) => "its input blob cannot be read",
            Self::Decode(_) => "its input blob does not decode as a run input",
            Self::NewerForm(_) => "its input was stored by a newer cogni, in a form not read here",
            Self::Message {
                source: BlobStoreError::NotFound(_),
                ..
            } => "a message blob of its input's history is missing",
            Self::Message {
                source: BlobStoreError::Corrupt(_),
                ..
            } => {
                "a message blob of its input's history is damaged (its bytes do not match its hash)"
            }
            Self::Message { .. } => "a message blob of its input's history cannot be read",
            Self::MessageDecode { .. } => "a message blob of its input's history does not decode",
        }
    }
}

/// A message blob of a form 2 history.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBlob {
    message: Value,
    #[serde(default)]
    prev: Option<String>,
}

/// A form 2 input's `history`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct History {
    len: usize,
    #[serde(default)]
    last: Option<String>,
}

impl RunInput {
    /// Stores the input in `blobs` in stored form 2 (see the module docs) and returns its
    /// address, the run's `input_ref`: the message blobs of its history and the input blob in
    /// one [`BlobStore::put_many`], the message blobs first, so they are written before the
    /// blob that names them, as that one is before the run row that names it. Messages the
    /// thread's earlier runs stored are named again, not stored again (the store keeps one copy
    /// of each); [`RunInput::store_on_thread`] does not even hand them to the store.
    pub async fn store(&self, blobs: &dyn BlobStore) -> anyhow::Result<String> {
        Ok(self.store_after(blobs, &[]).await?.0)
    }

    /// [`RunInput::store`] for a run of `thread`, putting only the messages new since the input
    /// this process last stored for the thread in `blobs` (which `histories` remembers): the
    /// messages its history still shares with that input, from the first, are named by the
    /// addresses stored then, without being encoded, hashed or handed to the store again. So a
    /// thread's runs put (and hash) their messages once each, in all linear in the thread's
    /// length, where each run putting its whole history made it grow with the square.
    ///
    /// A history that is not the last one stored followed by new messages (healed, cut short,
    /// rewritten) shares only the messages, from the first, that are still exactly the same:
    /// the others are stored as [`RunInput::store`] stores them, to the same blobs and the same
    /// address. A thread `histories` does not know (or has forgotten) is stored whole.
    pub async fn store_on_thread(
        &self,
        blobs: &dyn BlobStore,
        histories: &StoredHistories,
        thread: &ThreadId,
    ) -> anyhow::Result<String> {
        let messages = self.thread_state.messages();
        // Taken out while the input is stored: a failed put leaves the thread unknown (its
        // next run stores it whole), never known by blobs that may not be there.
        let mut known = histories.take(thread).unwrap_or_default();
        let shared = known
            .messages
            .iter()
            .zip(messages)
            // Equal messages are stored as the same bytes: `canonical_bytes` writes values that
            // compare equal alike (`-0.0` as `0.0`).
            .take_while(|(known, message)| known == message)
            .count();
        known.truncate(shared);
        let (input_ref, added) = self.store_after(blobs, &known.blobs).await?;
        known.messages.extend_from_slice(&messages[shared..]);
        known.blobs.extend(added);
        histories.keep(thread, known);
        Ok(input_ref)
    }

    /// Stores the input whose history's first messages are already stored as `known` (their
    /// blobs' addresses and sizes, first to last), putting the rest of its history and the
    /// input blob. Returns the input's address and the addresses and sizes of the messages put.
    async fn store_after(
        &self,
        blobs: &dyn BlobStore,
        known: &[(String, usize)],
    ) -> anyhow::Result<(String, Vec<(String, usize)>)> {
        let (mut batch, hashes) = self.stored_blobs(known)?;
        let input = batch.pop().context("the run input has no blob")?;
        let sizes: Vec<usize> = batch.iter().map(Vec::len).collect();
        let mut all: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        all.push(&input);
        let stored = blobs.put_many(&all).await.context("the run input")?;
        // Each message blob names the one before by the address reckoned here.
        if stored[..stored.len().saturating_sub(1)] != hashes[..] {
            anyhow::bail!(
                "the run input: the blob store gave addresses that are not the SHA-256 of the bytes"
            );
        }
        let input_ref = stored
            .last()
            .cloned()
            .context("the run input: the blob store gave no address")?;
        Ok((input_ref, hashes.into_iter().zip(sizes).collect()))
    }

    /// The blobs of the input's stored form 2 whose history's first messages are stored as
    /// `known` already: the blobs of the rest of its history, first to last, then the input
    /// blob; and the addresses of those message blobs.
    fn stored_blobs(
        &self,
        known: &[(String, usize)],
    ) -> anyhow::Result<(Vec<Vec<u8>>, Vec<String>)> {
        let encoding = "the run input cannot be encoded";
        let mut value = serde_json::to_value(self).context(encoding)?;
        let object = value.as_object_mut().context(encoding)?;
        let messages = object
            .get_mut("thread_state")
            .and_then(Value::as_object_mut)
            .and_then(|state| state.remove("messages"))
            .context(encoding)?;
        let Value::Array(messages) = messages else {
            anyhow::bail!("{encoding}: its history is not a list");
        };
        let len = messages.len();
        if known.len() > len {
            anyhow::bail!("{encoding}: it is said to share more messages than its history holds");
        }
        let mut blobs = Vec::with_capacity(len - known.len() + 1);
        let mut hashes: Vec<String> = Vec::with_capacity(len - known.len());
        let mut last = known.last().map(|(hash, _)| hash.clone());
        for message in messages.into_iter().skip(known.len()) {
            let mut blob = Map::new();
            blob.insert("message".into(), message);
            if let Some(prev) = last.take() {
                blob.insert("prev".into(), Value::String(prev));
            }
            let bytes = canonical_bytes(&blob).context(encoding)?;
            let hash = sha256_hex(&bytes);
            last = Some(hash.clone());
            hashes.push(hash);
            blobs.push(bytes);
        }
        let mut history = Map::new();
        history.insert("len".into(), len.into());
        if let Some(last) = last {
            history.insert("last".into(), Value::String(last));
        }
        object.insert(FORM.into(), RUN_INPUT_FORM.into());
        object.insert(HISTORY.into(), Value::Object(history));
        blobs.push(canonical_bytes(&value).context(encoding)?);
        Ok((blobs, hashes))
    }

    /// Reads the input stored at `input_ref`, in any stored form this build reads (1: the whole
    /// thread state inline; 2: its history as message blobs, see the module docs), to the same
    /// [`RunInput`]. A missing or damaged blob, the input's or a message's, is an error naming
    /// which.
    pub async fn load(blobs: &dyn BlobStore, input_ref: &str) -> Result<Self, RunInputError> {
        Ok(Self::load_stored(blobs, input_ref).await?.0)
    }

    /// [`RunInput::load`], with the input as stored in form 1 (its history put back in place),
    /// which a replay checks for keys this build does not read.
    pub(crate) async fn load_stored(
        blobs: &dyn BlobStore,
        input_ref: &str,
    ) -> Result<(Self, Value), RunInputError> {
        let bytes = blobs.get(input_ref).await.map_err(RunInputError::Input)?;
        let mut value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| RunInputError::Decode(describe_json_error(&e)))?;
        if let Some(object) = value.as_object_mut() {
            match object.remove(FORM) {
                // Form 1 (an empty marker says no more).
                None | Some(Value::Null) => {}
                Some(form) => read_form_2(blobs, object, &form).await?,
            }
        }
        let input = Self::deserialize(&value)
            .map_err(|e| RunInputError::Decode(describe_json_error(&e)))?;
        Ok((input, value))
    }
}

/// Puts the history a form 2 input (`object`, its `stored_form` taken out as `form`) names back
/// in its thread state, as form 1 holds it.
async fn read_form_2(
    blobs: &dyn BlobStore,
    object: &mut Map<String, Value>,
    form: &Value,
) -> Result<(), RunInputError> {
    let decode = |what: &str| RunInputError::Decode(what.to_owned());
    match form.as_u64() {
        Some(RUN_INPUT_FORM) => {}
        Some(newer) if newer > RUN_INPUT_FORM => return Err(RunInputError::NewerForm(newer)),
        _ => return Err(decode("its stored form is not one cogni writes")),
    }
    let history = object
        .remove(HISTORY)
        .ok_or_else(|| decode("it names no history"))?;
    let history = History::deserialize(&history)
        .map_err(|e| decode(&format!("its history: {}", describe_json_error(&e))))?;
    let state = object
        .get_mut("thread_state")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| decode("it holds no thread state"))?;
    if state.contains_key("messages") {
        return Err(decode(
            "its thread state holds messages and names a history too",
        ));
    }
    let len = history.len;
    // The length is the input's word: what is read is bounded by the chain, not by it.
    let mut messages = Vec::with_capacity(len.min(1024));
    if history
        .last
        .as_deref()
        .is_some_and(|last| !is_address(last))
    {
        return Err(decode(
            "its history's last message is not named by a blob address",
        ));
    }
    let mut next = history.last;
    for position in (1..=len).rev() {
        let hash = next.take().ok_or_else(|| {
            decode("its history is shorter than it says (a message blob names no earlier one)")
        })?;
        let bytes = blobs
            .get(&hash)
            .await
            .map_err(|source| RunInputError::Message {
                position,
                len,
                source,
            })?;
        let blob = match serde_json::from_slice::<MessageBlob>(&bytes) {
            // What names the message before is an address, or nothing: never quoted as one.
            Ok(blob) if blob.prev.as_deref().is_none_or(is_address) => blob,
            _ => {
                return Err(RunInputError::MessageDecode {
                    position,
                    len,
                    hash,
                });
            }
        };
        messages.push(blob.message);
        next = blob.prev;
    }
    if next.is_some() {
        return Err(decode(
            "its history is longer than it says (its first message blob names an earlier one)",
        ));
    }
    messages.reverse();
    state.insert("messages".into(), Value::Array(messages));
    Ok(())
}

/// Whether `text` is a blob address: 64 lower-case hex digits.
fn is_address(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The histories this process stored last for its threads, each in the one blob store it goes
/// with ([`crate::RunLogStores::histories`]), so a thread's next run puts only its new messages
/// ([`RunInput::store_on_thread`]).
///
/// It holds each thread's messages (to tell that a next run's history begins with exactly
/// them) and their blobs' addresses, in bounded memory: at most `max_threads` threads and
/// `max_bytes` bytes of message blobs, the measure of the messages it holds (as Rust values
/// they take somewhat more memory, up to about twice as much). Past either, the thread used least
/// recently is forgotten; a forgotten thread's next run stores its whole history, as a new process
/// does, which costs time, never correctness.
///
/// It remembers only what this process put in the blob store and saw stored. Blobs are never
/// removed by cogni, so a message blob it names is still there; one removed or damaged by hand
/// is not put back by a later run of its thread in this process (a store's put replaces a
/// damaged copy, and a run stored whole by the next process puts every message again).
#[derive(Debug)]
pub struct StoredHistories {
    inner: Mutex<Lru<Chain>>,
}

/// A history as stored: its messages, and for each its blob's address and size.
#[derive(Debug, Default)]
pub(crate) struct Chain {
    messages: Vec<Message>,
    blobs: Vec<(String, usize)>,
}

impl Chain {
    /// The bytes of its message blobs.
    fn bytes(&self) -> usize {
        self.blobs.iter().map(|(_, size)| size).sum()
    }

    /// Keeps its first `len` messages.
    fn truncate(&mut self, len: usize) {
        self.messages.truncate(len);
        self.blobs.truncate(len);
    }
}

impl StoredHistories {
    /// The most threads remembered by default: 1,000.
    pub const DEFAULT_MAX_THREADS: usize = 1_000;

    /// The most bytes of message blobs remembered by default: 32 MiB.
    pub const DEFAULT_MAX_BYTES: usize = 32 * 1024 * 1024;

    /// Remembers at most `max_threads` threads' histories and `max_bytes` bytes of their message
    /// blobs.
    pub fn new(max_threads: usize, max_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Lru::new(max_threads, max_bytes)),
        }
    }

    /// How many threads' histories are remembered, and the bytes of their message blobs.
    pub fn size(&self) -> (usize, usize) {
        self.lock().size()
    }

    /// Takes `thread`'s history out, if remembered.
    fn take(&self, thread: &ThreadId) -> Option<Chain> {
        self.lock().take(thread)
    }

    /// Remembers `chain` as `thread`'s history, used now, then forgets the threads used least
    /// recently until the bounds hold (this one too, when it alone passes them).
    fn keep(&self, thread: &ThreadId, chain: Chain) {
        let mut kept = self.lock();
        let size = chain.bytes();
        kept.insert(thread, chain, size);
        kept.evict(|_| false);
    }

    /// The map, even after a panic elsewhere: every change to it is whole before it can panic.
    fn lock(&self) -> MutexGuard<'_, Lru<Chain>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for StoredHistories {
    /// [`StoredHistories::new`] with the default bounds.
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX_THREADS, Self::DEFAULT_MAX_BYTES)
    }
}

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
//! Stored form 1 (an input with no `stored_form`) holds the whole thread state inline, as every
//! input recorded before form 2 does: it is still read ([`RunInput::load`]), to the same
//! [`RunInput`].

use ai_core::{BlobStore, BlobStoreError, canonical_bytes, describe_json_error, sha256_hex};
use anyhow::Context;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::RunInput;

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
    /// thread's earlier runs stored are named again, not stored again.
    pub async fn store(&self, blobs: &dyn BlobStore) -> anyhow::Result<String> {
        let (mut batch, hashes) = self.stored_blobs()?;
        let input = batch.pop().context("the run input has no blob")?;
        let mut all: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        all.push(&input);
        let stored = blobs.put_many(&all).await.context("the run input")?;
        // Each message blob names the one before by the address reckoned here.
        if stored[..stored.len().saturating_sub(1)] != hashes[..] {
            anyhow::bail!(
                "the run input: the blob store gave addresses that are not the SHA-256 of the bytes"
            );
        }
        stored
            .last()
            .cloned()
            .context("the run input: the blob store gave no address")
    }

    /// The blobs of the input's stored form 2: its history's message blobs, first to last, then
    /// the input blob; and the message blobs' addresses.
    fn stored_blobs(&self) -> anyhow::Result<(Vec<Vec<u8>>, Vec<String>)> {
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
        let mut blobs = Vec::with_capacity(len + 1);
        let mut hashes: Vec<String> = Vec::with_capacity(len);
        for message in messages {
            let mut blob = Map::new();
            blob.insert("message".into(), message);
            if let Some(prev) = hashes.last() {
                blob.insert("prev".into(), Value::String(prev.clone()));
            }
            let bytes = canonical_bytes(&blob).context(encoding)?;
            hashes.push(sha256_hex(&bytes));
            blobs.push(bytes);
        }
        let mut history = Map::new();
        history.insert("len".into(), len.into());
        if let Some(last) = hashes.last() {
            history.insert("last".into(), Value::String(last.clone()));
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

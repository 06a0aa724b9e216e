//! Content-addressed blob stores behind [`ai_core::BlobStore`]: [`FsBlobStore`] on disk under a
//! data directory, [`InMemoryBlobStore`] for tests.
//!
//! An address is the lower-case hex SHA-256 of the bytes. Anything else given as an address is
//! refused as [`BlobStoreError::InvalidHash`] before it comes near a path, so an address can never
//! name a file outside the store.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ai_core::{BlobStore, BlobStoreError, sha256_hex};
use async_trait::async_trait;

/// Checks that `hash` is a blob address: exactly 64 lower-case hex digits.
pub(crate) fn check_hash(hash: &str) -> Result<(), BlobStoreError> {
    let ok = hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if ok {
        Ok(())
    } else {
        Err(BlobStoreError::InvalidHash(hash.chars().take(80).collect()))
    }
}

/// Checks that `value`, the `what` of run `run_id` (e.g. "the input ref"), is a blob address,
/// for the run stores: both refuse the same values with the same
/// [`RunStoreError::Invalid`](ai_core::RunStoreError::Invalid), which says what is wrong with
/// the value without quoting it.
pub(crate) fn check_run_ref(
    run_id: &ai_core::RunId,
    what: &str,
    value: &str,
) -> Result<(), ai_core::RunStoreError> {
    if check_hash(value).is_ok() {
        return Ok(());
    }
    let problem = if value.len() != 64 {
        format!("it is {} bytes long, not 64", value.len())
    } else {
        "it holds a character that is not a lower-case hex digit".to_owned()
    };
    Err(ai_core::RunStoreError::Invalid {
        run_id: run_id.clone(),
        reason: format!(
            "{what} is not a blob address (64 lower-case hex digits, the SHA-256 of the blob): \
             {problem}"
        ),
    })
}

/// Blobs as files under `<data_dir>/blobs/`: the blob `abcd…` lives at `blobs/ab/cd…`.
///
/// A put writes a temporary file in the blob's folder, fsyncs it, renames it to its address and
/// fsyncs the folder, so a crash never leaves a half-written blob at a valid address. A put of
/// bytes already stored touches nothing. [`BlobStore::put_many`] does the same for a batch,
/// sharing the syncs. A get reads the file and checks its hash.
///
/// ```
/// use ai_core::BlobStore;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = adapters::FsBlobStore::open(dir.path()).unwrap();
/// let hash = store.put(b"hello").await.unwrap();
/// assert_eq!(store.get(&hash).await.unwrap(), b"hello");
/// assert!(dir.path().join("blobs").join(&hash[..2]).join(&hash[2..]).is_file());
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct FsBlobStore {
    inner: Arc<FsInner>,
}

#[derive(Debug)]
struct FsInner {
    root: PathBuf,
    /// Makes temporary file names unique within the process.
    counter: AtomicU64,
}

impl FsBlobStore {
    /// Opens (creating when needed) the blob folder `<data_dir>/blobs`.
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self, BlobStoreError> {
        let root = data_dir.as_ref().join("blobs");
        fs::create_dir_all(&root).map_err(|e| io_error("cannot create", &root, &e))?;
        Ok(Self {
            inner: Arc::new(FsInner {
                root,
                counter: AtomicU64::new(0),
            }),
        })
    }

    /// The folder blobs live in (`<data_dir>/blobs`).
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Where the blob `hash` lives (whether or not it exists). Refuses anything but an address.
    pub fn path_of(&self, hash: &str) -> Result<PathBuf, BlobStoreError> {
        check_hash(hash)?;
        Ok(self.inner.root.join(&hash[..2]).join(&hash[2..]))
    }
}

impl FsInner {
    fn path_of(&self, hash: &str) -> Result<PathBuf, BlobStoreError> {
        check_hash(hash)?;
        Ok(self.root.join(&hash[..2]).join(&hash[2..]))
    }

    /// Stores a batch durably: every new blob is written to a temporary file, all are fsynced,
    /// then renamed to their addresses in the given order, then their folders are fsynced. On a
    /// journaling filesystem the syncs of one batch share their journal commits, so a batch costs
    /// little more than one blob. Blobs already stored are not touched.
    fn put_many_blocking(&self, blobs: &[(String, Vec<u8>)]) -> Result<(), BlobStoreError> {
        let mut todo: Vec<(&str, &[u8], PathBuf)> = Vec::with_capacity(blobs.len());
        for (hash, bytes) in blobs {
            let path = self.path_of(hash)?;
            if !path.is_file() && !todo.iter().any(|(h, _, _)| h == hash) {
                todo.push((hash, bytes, path));
            }
        }
        if todo.is_empty() {
            return Ok(());
        }
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut new_dir = false;
        for (hash, _, _) in &todo {
            let dir = self.root.join(&hash[..2]);
            if !dirs.contains(&dir) {
                if !dir.is_dir() {
                    fs::create_dir_all(&dir).map_err(|e| io_error("cannot create", &dir, &e))?;
                    new_dir = true;
                }
                dirs.push(dir);
            }
        }
        if new_dir {
            sync_dir(&self.root)?;
        }
        let mut temps: Vec<PathBuf> = Vec::with_capacity(todo.len());
        let result = self.write_and_rename(&todo, &mut temps);
        if result.is_err() {
            for tmp in &temps {
                let _ = fs::remove_file(tmp);
            }
            return result;
        }
        in_parallel(&dirs, |dir| sync_dir(dir))?;
        Ok(())
    }

    /// Writes every blob to a temporary file, fsyncs them all, then renames them in order.
    /// `temps` keeps the temporary files not renamed yet, for the caller to remove on failure.
    fn write_and_rename(
        &self,
        todo: &[(&str, &[u8], PathBuf)],
        temps: &mut Vec<PathBuf>,
    ) -> Result<(), BlobStoreError> {
        let mut files = Vec::with_capacity(todo.len());
        for (hash, bytes, path) in todo {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let tmp =
                path.with_file_name(format!(".tmp-{}-{}-{n}", &hash[2..10], std::process::id()));
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| io_error("cannot create", &tmp, &e))?;
            temps.push(tmp.clone());
            file.write_all(bytes)
                .map_err(|e| io_error("cannot write", &tmp, &e))?;
            files.push((file, tmp));
        }
        // The syncs run at once: a journaling filesystem folds concurrent fsyncs into shared
        // journal commits, so a batch waits for about one sync instead of one per blob.
        in_parallel(&files, |(file, tmp)| {
            file.sync_all()
                .map_err(|e| io_error("cannot fsync", tmp, &e))
        })?;
        for ((_, _, path), (_, tmp)) in todo.iter().zip(&files) {
            fs::rename(tmp, path).map_err(|e| io_error("cannot rename into", path, &e))?;
            temps.retain(|t| t != tmp);
        }
        Ok(())
    }

    fn get_blocking(&self, hash: &str) -> Result<Vec<u8>, BlobStoreError> {
        let path = self.path_of(hash)?;
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(BlobStoreError::NotFound(hash.to_owned()));
            }
            Err(e) => return Err(io_error("cannot read", &path, &e)),
        };
        if sha256_hex(&bytes) != hash {
            return Err(BlobStoreError::Corrupt(hash.to_owned()));
        }
        Ok(bytes)
    }
}

/// The batch to write (each blob owned, with its address) and the addresses to return.
pub(crate) fn addressed(blobs: &[&[u8]]) -> (Vec<(String, Vec<u8>)>, Vec<String>) {
    let batch: Vec<(String, Vec<u8>)> = blobs
        .iter()
        .map(|bytes| (sha256_hex(bytes), bytes.to_vec()))
        .collect();
    let hashes = batch.iter().map(|(hash, _)| hash.clone()).collect();
    (batch, hashes)
}

/// The address of a one-blob batch.
pub(crate) fn only_address(mut hashes: Vec<String>) -> Result<String, BlobStoreError> {
    hashes
        .pop()
        .ok_or_else(|| BlobStoreError::Backend("a one-blob batch returned no address".into()))
}

/// Runs `op` on every item, each on its own scoped thread when there are several (they block in
/// the kernel, so they overlap), and returns the first error.
fn in_parallel<T: Sync>(
    items: &[T],
    op: impl Fn(&T) -> Result<(), BlobStoreError> + Sync,
) -> Result<(), BlobStoreError> {
    if let [only] = items {
        return op(only);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = items.iter().map(|item| scope.spawn(|| op(item))).collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    Err(BlobStoreError::Backend("a blob sync thread failed".into()))
                })
            })
            .collect::<Result<Vec<()>, _>>()
            .map(|_| ())
    })
}

/// Fsyncs a folder so a rename or a new entry in it survives a crash.
fn sync_dir(dir: &Path) -> Result<(), BlobStoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error("cannot fsync folder", dir, &e))
}

fn io_error(what: &str, path: &Path, e: &io::Error) -> BlobStoreError {
    BlobStoreError::Backend(format!("{what} {}: {e}", path.display()))
}

#[async_trait]
impl BlobStore for FsBlobStore {
    async fn put(&self, bytes: &[u8]) -> Result<String, BlobStoreError> {
        only_address(self.put_many(&[bytes]).await?)
    }

    async fn put_many(&self, blobs: &[&[u8]]) -> Result<Vec<String>, BlobStoreError> {
        let (batch, hashes) = addressed(blobs);
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || inner.put_many_blocking(&batch))
            .await
            .map_err(|e| BlobStoreError::Backend(format!("blob write task failed: {e}")))??;
        Ok(hashes)
    }

    async fn get(&self, hash: &str) -> Result<Vec<u8>, BlobStoreError> {
        check_hash(hash)?;
        let inner = Arc::clone(&self.inner);
        let hash = hash.to_owned();
        tokio::task::spawn_blocking(move || inner.get_blocking(&hash))
            .await
            .map_err(|e| BlobStoreError::Backend(format!("blob read task failed: {e}")))?
    }
}

/// Blobs in a map, for tests and single-process use; lost when the process ends.
///
/// ```
/// use ai_core::{BlobStore, BlobStoreError};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = adapters::InMemoryBlobStore::default();
/// let hash = store.put(b"x").await.unwrap();
/// assert_eq!(store.get(&hash).await.unwrap(), b"x");
/// assert_eq!(store.len(), 1);
/// assert!(matches!(store.get("../x").await, Err(BlobStoreError::InvalidHash(_))));
/// # });
/// ```
#[derive(Debug, Default)]
pub struct InMemoryBlobStore {
    blobs: Mutex<HashMap<String, Vec<u8>>>,
}

impl InMemoryBlobStore {
    /// How many blobs are stored.
    pub fn len(&self) -> usize {
        self.blobs.lock().map(|b| b.len()).unwrap_or(0)
    }

    /// Whether no blob is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores `bytes` under `hash` without checking that they match, so tests can build a corrupt
    /// store. Refuses an `hash` that is not an address.
    pub fn insert_unchecked(&self, hash: &str, bytes: Vec<u8>) -> Result<(), BlobStoreError> {
        check_hash(hash)?;
        self.lock()?.insert(hash.to_owned(), bytes);
        Ok(())
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, HashMap<String, Vec<u8>>>, BlobStoreError> {
        self.blobs
            .lock()
            .map_err(|_| BlobStoreError::Backend("the blob map is poisoned".into()))
    }
}

#[async_trait]
impl BlobStore for InMemoryBlobStore {
    async fn put(&self, bytes: &[u8]) -> Result<String, BlobStoreError> {
        let hash = sha256_hex(bytes);
        self.lock()?
            .entry(hash.clone())
            .or_insert_with(|| bytes.to_vec());
        Ok(hash)
    }

    async fn get(&self, hash: &str) -> Result<Vec<u8>, BlobStoreError> {
        check_hash(hash)?;
        let bytes = self
            .lock()?
            .get(hash)
            .cloned()
            .ok_or_else(|| BlobStoreError::NotFound(hash.to_owned()))?;
        if sha256_hex(&bytes) != hash {
            return Err(BlobStoreError::Corrupt(hash.to_owned()));
        }
        Ok(bytes)
    }
}

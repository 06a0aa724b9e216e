//! Content-addressed blob stores behind [`ai_core::BlobStore`]: [`FsBlobStore`] on disk under a
//! data directory, [`InMemoryBlobStore`] for tests.
//!
//! An address is the lower-case hex SHA-256 of the bytes. Anything else given as an address is
//! refused as [`BlobStoreError::InvalidHash`] before it comes near a path, so an address can never
//! name a file outside the store.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ai_core::{BlobStore, BlobStoreError, sha256_hex};
use async_trait::async_trait;

/// Whether `text` is exactly `len` lower-case hex digits: the alphabet of blob addresses, and
/// so of the blob folders (`ab`) and of the address part of a temp file's name.
fn is_lower_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Checks that `hash` is a blob address: exactly 64 lower-case hex digits.
pub(crate) fn check_hash(hash: &str) -> Result<(), BlobStoreError> {
    if is_lower_hex(hash, 64) {
        Ok(())
    } else {
        Err(BlobStoreError::InvalidHash(
            crate::shown_cut(hash).into_owned(),
        ))
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
/// A put writes a temporary file in the store's temp folder, `blobs/tmp/` (never a blob folder,
/// so no reader meets one as a blob), fsyncs it, renames it to its address (the same
/// filesystem: the rename is atomic) and fsyncs the blob's folder, so a crash never leaves a
/// half-written blob at a valid address. A file
/// already at the address counts only if its bytes match the address: a damaged one is
/// replaced. Either way the put fsyncs the file and its folders before it returns, since the
/// put that renamed the file there may not have synced the folder yet. [`BlobStore::put_many`]
/// does the same for a batch, [`FsBlobStore::PUT_CHUNK`] blobs at a time, sharing the syncs. A get
/// reads the file and checks its hash; a blob past [`FsBlobStore::MAX_BLOB_BYTES`] is refused by a
/// put, and a file past it by a get, before it is read.
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

/// A blob of a batch: its address, its bytes and its path.
type Pending<'a> = (&'a str, &'a [u8], PathBuf);

#[derive(Debug)]
struct FsInner {
    root: PathBuf,
    /// Where puts make their temp files (`<root>/tmp`).
    temp_dir: PathBuf,
    /// Makes temporary file names unique within the process.
    counter: AtomicU64,
}

impl FsBlobStore {
    /// How many blobs a put writes, syncs and renames at once, and how many blocking calls
    /// (fsyncs, reads) it runs at once: a batch of any size holds at most this many files open
    /// and starts at most this many threads. Sixteen concurrent fsyncs already share their
    /// journal commits; more would only add threads.
    pub const PUT_CHUNK: usize = 16;

    /// The largest blob the store holds (1 GiB): a put of a larger one is refused as
    /// [`BlobStoreError::TooLarge`], and a get refuses a larger file at an address (a damaged or
    /// crafted data folder, a sparse file of any length) from its length, before reading a
    /// byte, so a get never allocates more than this. No blob cogni writes comes near it (run
    /// inputs and model receipts are JSON documents of a conversation; SQLite holds at most
    /// 1,000,000,000 bytes in a row).
    pub const MAX_BLOB_BYTES: u64 = 1 << 30;

    /// Opens (creating when needed) the blob folder `<data_dir>/blobs`. A folder it creates is
    /// its owner's alone (mode `0700` on Unix, [`crate::create_private_dir`]), as the run store
    /// creates the data folder, and made durable (its parent is fsynced) before it returns.
    ///
    /// It then removes the temp files a crash left in the temp folder `blobs/tmp/` (a put that
    /// died between creating its temp file and renaming it), reading that folder only, never the
    /// blob folders: only regular files named as a put names its temp files
    /// (`.tmp-<8 hex digits>-<pid>-<n>`), and only those unchanged for an hour, so a put running
    /// in another process is never disturbed. A file it cannot remove is left for the next open;
    /// it never fails the open. A put stalled for longer than that (a stopped process, a
    /// suspended machine) may lose its temp file so: it then fails, saying so, and stores nothing.
    ///
    /// Earlier versions made their temp files in the blob folders (`blobs/ab/`): each open
    /// removes the stale ones of those too, until an open leaves none there, fresh or stale (so
    /// what an earlier version that crashed within the hour before the upgrade left is removed
    /// by a later open, not left for ever). That open leaves the marker `blobs/old-temps-swept`,
    /// and later opens do not read the blob folders.
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self, BlobStoreError> {
        let store = Self::open_without_sweep(data_dir)?;
        let now = std::time::SystemTime::now();
        let temps = &store.inner.temp_dir;
        if !temps.is_dir() {
            store.inner.create_temp_dir()?;
        }
        let mut swept = crate::temp::remove_stale(temps, is_temp_name, now);
        let marker = store.root().join(OLD_TEMPS_SWEPT);
        if !marker.exists() {
            let old = remove_stale_temps(store.root(), now);
            // Not made (or lost in a crash), it only costs the next open one more sweep.
            if old.left == 0 && File::create(&marker).is_err() {
                tracing::debug!(marker = %marker.display(), "the sweep's marker was not made");
            }
            swept += old;
        }
        let removed = swept.removed;
        if removed > 0 {
            tracing::info!(
                removed,
                folder = %store.root().display(),
                "removed temp files a crash left in the blob folder"
            );
        }
        Ok(store)
    }

    /// [`FsBlobStore::open`] without removing stale temp files: for a reader, which writes
    /// nothing.
    pub(crate) fn open_without_sweep(data_dir: impl AsRef<Path>) -> Result<Self, BlobStoreError> {
        let root = data_dir.as_ref().join("blobs");
        // The folders this call creates, innermost first: each one's parent gets an fsync.
        let mut created: Vec<&Path> = Vec::new();
        let mut dir = Some(root.as_path());
        while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            created.push(d);
            dir = d.parent();
        }
        crate::create_private_dir(&root).map_err(|e| io_error("cannot create", &root, &e))?;
        for dir in created {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
        }
        Ok(Self {
            inner: Arc::new(FsInner {
                temp_dir: root.join(TEMP_DIR),
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

/// The folder of a store's temp files, under its root: not two hex digits, so never a blob
/// folder.
const TEMP_DIR: &str = "tmp";

/// The file, under a store's root, whose presence says the blob folders hold no temp file of an
/// earlier version (which made them there): opens no longer read those folders. Not two hex
/// digits, so never a blob folder.
const OLD_TEMPS_SWEPT: &str = "old-temps-swept";

impl FsInner {
    /// Creates the temp folder (its owner's alone) and makes its entry durable.
    fn create_temp_dir(&self) -> Result<(), BlobStoreError> {
        crate::create_private_dir(&self.temp_dir)
            .map_err(|e| io_error("cannot create", &self.temp_dir, &e))?;
        sync_dir(&self.root)
    }

    fn path_of(&self, hash: &str) -> Result<PathBuf, BlobStoreError> {
        check_hash(hash)?;
        Ok(self.root.join(&hash[..2]).join(&hash[2..]))
    }

    /// Stores a batch durably, [`FsBlobStore::PUT_CHUNK`] blobs at a time: each blob not stored
    /// intact is written to a temporary file, the chunk's files are fsynced together and renamed to
    /// their addresses in the given order; then every folder the batch touched is fsynced. On a
    /// journaling filesystem the syncs of one chunk share their journal commits, so a chunk costs
    /// little more than one blob. On failure, no temporary file is left behind (blobs of earlier
    /// chunks stay: they are whole and named by their hash).
    fn put_many_blocking(&self, blobs: &[(String, Vec<u8>)]) -> Result<(), BlobStoreError> {
        let mut seen: HashSet<&str> = HashSet::with_capacity(blobs.len());
        let mut batch: Vec<Pending<'_>> = Vec::with_capacity(blobs.len());
        for (hash, bytes) in blobs {
            check_size(hash, bytes.len() as u64)?;
        }
        for (hash, bytes) in blobs {
            let path = self.path_of(hash)?;
            if seen.insert(hash) {
                batch.push((hash, bytes, path));
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        // Every folder of the batch is synced at the end, the root too: a blob or a folder
        // found in place may have been renamed or created by a put that has not synced yet.
        let mut dirs: Vec<PathBuf> = vec![self.root.clone()];
        // Made by a writer's open; again here if it was removed since (or the store was opened
        // as a reader's, which makes none).
        if !self.temp_dir.is_dir() {
            self.create_temp_dir()?;
        }
        for (hash, _, _) in &batch {
            let dir = self.root.join(&hash[..2]);
            if !dirs.contains(&dir) {
                if !dir.is_dir() {
                    fs::create_dir_all(&dir).map_err(|e| io_error("cannot create", &dir, &e))?;
                }
                dirs.push(dir);
            }
        }
        // A file at the address counts only if it holds the right bytes (it is fsynced too);
        // anything else (missing, damaged, unreadable) is written again.
        let intact: Vec<AtomicBool> = batch.iter().map(|_| AtomicBool::new(false)).collect();
        let checks: Vec<(&AtomicBool, &Pending<'_>)> = intact.iter().zip(&batch).collect();
        in_parallel(&checks, |(intact, (hash, bytes, path))| {
            intact.store(stored_intact(path, hash, bytes.len()), Ordering::Relaxed);
            Ok(())
        })?;
        let todo: Vec<&Pending<'_>> = batch
            .iter()
            .zip(&intact)
            .filter(|(_, intact)| !intact.load(Ordering::Relaxed))
            .map(|(blob, _)| blob)
            .collect();
        for chunk in todo.chunks(FsBlobStore::PUT_CHUNK) {
            let mut temps: Vec<PathBuf> = Vec::with_capacity(chunk.len());
            let result = self.write_and_rename(chunk, &mut temps);
            if result.is_err() {
                for tmp in &temps {
                    let _ = fs::remove_file(tmp);
                }
                return result;
            }
        }
        in_parallel(&dirs, |dir| sync_dir(dir))
    }

    /// Creates a new temporary file for the blob `hash` in the temp folder (`create_new`: never
    /// one that exists), skipping names that are taken ([`crate::temp::first_free`]).
    fn create_temp(&self, hash: &str) -> Result<(PathBuf, File), BlobStoreError> {
        crate::temp::first_free(|| {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let tmp =
                self.temp_dir
                    .join(format!(".tmp-{}-{}-{n}", &hash[2..10], std::process::id()));
            let opened = OpenOptions::new().write(true).create_new(true).open(&tmp);
            (tmp, opened)
        })
        .map_err(|(tmp, e)| io_error("cannot create", &tmp, &e))
    }

    /// Writes every blob of a chunk to a temporary file, fsyncs them all, then renames them in
    /// order. `temps` keeps the temporary files not renamed yet, for the caller to remove on
    /// failure.
    fn write_and_rename(
        &self,
        chunk: &[&Pending<'_>],
        temps: &mut Vec<PathBuf>,
    ) -> Result<(), BlobStoreError> {
        self.write_temps(chunk, temps)?;
        self.rename_temps(chunk, temps)
    }

    /// Writes every blob of a chunk to a temporary file (pushed on `temps`) and fsyncs them all.
    fn write_temps(
        &self,
        chunk: &[&Pending<'_>],
        temps: &mut Vec<PathBuf>,
    ) -> Result<(), BlobStoreError> {
        let mut files = Vec::with_capacity(chunk.len());
        for (hash, bytes, _) in chunk.iter().copied() {
            let (tmp, mut file) = self.create_temp(hash)?;
            temps.push(tmp.clone());
            file.write_all(bytes)
                .map_err(|e| io_error("cannot write", &tmp, &e))?;
            files.push((file, tmp));
        }
        // The syncs run at once: a journaling filesystem folds concurrent fsyncs into shared
        // journal commits, so a chunk waits for about one sync instead of one per blob.
        in_parallel(&files, |(file, tmp)| {
            file.sync_all()
                .map_err(|e| io_error("cannot fsync", tmp, &e))
        })
    }

    /// Renames the chunk's temporary files (`temps`, in the chunk's order) to their addresses,
    /// removing each from `temps` once renamed. A temp file that is no longer there (a put
    /// stalled for over an hour, whose file an open removed as a crash's leftover) fails the put
    /// saying so: the blob was not stored.
    fn rename_temps(
        &self,
        chunk: &[&Pending<'_>],
        temps: &mut Vec<PathBuf>,
    ) -> Result<(), BlobStoreError> {
        for (hash, _, path) in chunk.iter().copied() {
            let tmp = temps.remove(0);
            if let Err(e) = fs::rename(&tmp, path) {
                let gone = e.kind() == io::ErrorKind::NotFound
                    && fs::symlink_metadata(&tmp)
                        .is_err_and(|e| e.kind() == io::ErrorKind::NotFound);
                temps.insert(0, tmp);
                if gone {
                    return Err(BlobStoreError::Backend(format!(
                        "blob {hash} was not stored: its temp file in {} was removed before \
                         its rename (a put stalled for over an hour is taken for a crash's \
                         leftover); put it again",
                        self.temp_dir.display()
                    )));
                }
                return Err(io_error("cannot rename into", path, &e));
            }
        }
        Ok(())
    }

    fn get_blocking(&self, hash: &str) -> Result<Vec<u8>, BlobStoreError> {
        let path = self.path_of(hash)?;
        let bytes = match open_regular(&path) {
            Ok((file, len)) => {
                // The length of the opened handle: what is read is what was checked.
                check_size(hash, len)?;
                read_at_most(file, len).map_err(|e| io_error("cannot read", &path, &e))?
            }
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

/// Whether `name` is a temp file name of [`FsInner::create_temp`]: `.tmp-`, eight lower-case hex
/// digits (of the blob's address), `-`, a pid, `-`, a counter.
fn is_temp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(".tmp-") else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match rest.split('-').collect::<Vec<_>>().as_slice() {
        [hash, pid, n] => is_lower_hex(hash, 8) && digits(pid) && digits(n),
        _ => false,
    }
}

/// Removes the stale temp files ([`crate::temp::remove_stale`]) that earlier versions made in
/// the blob folders (`ab`: two lower-case hex digits) under `root`; returns how many it removed
/// and left. It reads every blob folder, so [`FsBlobStore::open`] runs it only until it leaves
/// none (see [`OLD_TEMPS_SWEPT`]).
fn remove_stale_temps(root: &Path, now: std::time::SystemTime) -> crate::temp::Swept {
    let mut swept = crate::temp::Swept::default();
    let Ok(entries) = fs::read_dir(root) else {
        swept.left += 1;
        return swept;
    };
    for entry in entries {
        let Ok(entry) = entry else {
            swept.left += 1;
            continue;
        };
        let name = entry.file_name();
        let is_blob_dir = name.to_str().is_some_and(|n| is_lower_hex(n, 2));
        // `file_type` does not follow a symlink: a link to a folder elsewhere is not ours.
        if is_blob_dir && entry.file_type().is_ok_and(|t| t.is_dir()) {
            swept += crate::temp::remove_stale(&entry.path(), is_temp_name, now);
        }
    }
    swept
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

/// Opens the file at `path` only if it is a regular file (not a symlink, a FIFO or a device),
/// with its length. A damaged or crafted data folder may hold anything at a blob's address: a
/// FIFO would block a read for ever, and a link to `/dev/zero` would be read until memory runs
/// out.
fn open_regular(path: &Path) -> io::Result<(File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular = || io::Error::new(io::ErrorKind::InvalidData, "not a regular file");
    // The entry first, for a clear error; then the open itself refuses what may have been put
    // there since (O_NOFOLLOW: no link; O_NONBLOCK: a FIFO does not block the open), and the
    // handle that will be read is checked, not a second lookup of the name.
    if !fs::symlink_metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)?;
    let opened = file.metadata()?;
    if !opened.is_file() {
        return Err(not_regular());
    }
    Ok((file, opened.len()))
}

/// Refuses a blob larger than [`FsBlobStore::MAX_BLOB_BYTES`], naming its address and sizes.
fn check_size(hash: &str, size: u64) -> Result<(), BlobStoreError> {
    if size > FsBlobStore::MAX_BLOB_BYTES {
        return Err(BlobStoreError::TooLarge {
            hash: hash.to_owned(),
            size,
            max: FsBlobStore::MAX_BLOB_BYTES,
        });
    }
    Ok(())
}

/// The bytes of an opened file whose length was `len`, reading at most one byte more than that
/// (a file that grew since is then refused by the hash check, without being read in full).
fn read_at_most(file: File, len: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0).min(1 << 26));
    file.take(len.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Whether the file at `path` holds the `len` bytes of `hash` (and is fsynced). Any failure to
/// read it, or a file of another length or kind, counts as not intact (and is not read): the
/// caller writes the blob again, and a failure to do that is reported.
fn stored_intact(path: &Path, hash: &str, len: usize) -> bool {
    let Ok((mut file, stored_len)) = open_regular(path) else {
        return false;
    };
    if stored_len != len as u64 {
        return false;
    }
    let mut bytes = Vec::with_capacity(len);
    file.read_to_end(&mut bytes).is_ok() && sha256_hex(&bytes) == hash && file.sync_all().is_ok()
}

/// Runs `op` on every item, up to [`FsBlobStore::PUT_CHUNK`] at once, each on its own scoped thread
/// (they block in the kernel, so they overlap), and returns the first error. An item whose thread
/// cannot be started runs on the calling thread instead.
fn in_parallel<T: Sync>(
    items: &[T],
    op: impl Fn(&T) -> Result<(), BlobStoreError> + Sync,
) -> Result<(), BlobStoreError> {
    in_parallel_on(items, &op, &|| {
        std::thread::Builder::new().name("cogni-blob-io".into())
    })
}

/// [`in_parallel`] with the threads built by `builder`.
fn in_parallel_on<T: Sync>(
    items: &[T],
    op: &(dyn Fn(&T) -> Result<(), BlobStoreError> + Sync),
    builder: &dyn Fn() -> std::thread::Builder,
) -> Result<(), BlobStoreError> {
    for chunk in items.chunks(FsBlobStore::PUT_CHUNK) {
        if let [only] = chunk {
            op(only)?;
            continue;
        }
        std::thread::scope(|scope| {
            let mut inline: Vec<Result<(), BlobStoreError>> = Vec::new();
            let mut handles = Vec::with_capacity(chunk.len());
            for item in chunk {
                match builder().spawn_scoped(scope, move || op(item)) {
                    Ok(handle) => handles.push(handle),
                    Err(_) => inline.push(op(item)),
                }
            }
            let joined = handles.into_iter().map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    Err(BlobStoreError::Backend("a blob IO thread panicked".into()))
                })
            });
            inline
                .into_iter()
                .chain(joined)
                .collect::<Result<Vec<()>, _>>()
        })?;
    }
    Ok(())
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
    /// A blob already at the address counts only if it holds these bytes: a damaged one (see
    /// [`InMemoryBlobStore::insert_unchecked`]) is replaced, as the durable stores replace it.
    async fn put(&self, bytes: &[u8]) -> Result<String, BlobStoreError> {
        let hash = sha256_hex(bytes);
        let mut blobs = self.lock()?;
        if blobs
            .get(&hash)
            .is_none_or(|stored| stored.as_slice() != bytes)
        {
            blobs.insert(hash.clone(), bytes.to_vec());
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    /// The most ops that ran at once, and how many ran, over `items` ops of 5 ms each.
    fn peak(items: usize, builder: &dyn Fn() -> std::thread::Builder) -> (usize, usize) {
        let (running, peak, ran) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        let items: Vec<usize> = (0..items).collect();
        in_parallel_on(
            &items,
            &|_| {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(5));
                running.fetch_sub(1, Ordering::SeqCst);
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
            builder,
        )
        .unwrap();
        (peak.into_inner(), ran.into_inner())
    }

    #[test]
    fn a_blob_past_the_limit_is_refused_naming_its_address_and_sizes() {
        let hash = sha256_hex(b"x");
        let max = FsBlobStore::MAX_BLOB_BYTES;
        assert_eq!(check_size(&hash, max), Ok(()));
        let err = check_size(&hash, max + 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "blob {hash} is {} bytes, more than the {max} bytes a blob of this store may hold",
                max + 1
            )
        );
    }

    /// A put of a batch holding a blob past the limit is refused before anything is written.
    #[test]
    fn a_batch_with_a_blob_past_the_limit_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        // Zeroed pages are mapped lazily: only the length is read before the refusal, so this
        // takes no memory (the address is a stand-in: hashing it would read it all).
        let len = usize::try_from(FsBlobStore::MAX_BLOB_BYTES + 1).unwrap();
        let large = ("ab".repeat(32), vec![0u8; len]);
        let small = (sha256_hex(b"small"), b"small".to_vec());
        let err = store.inner.put_many_blocking(&[small, large]).unwrap_err();
        assert!(
            matches!(&err, BlobStoreError::TooLarge { size, .. } if *size == len as u64),
            "{err}"
        );
        let mut written: Vec<_> = fs::read_dir(store.root())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        written.sort();
        assert_eq!(
            written,
            [OLD_TEMPS_SWEPT, TEMP_DIR],
            "something was written"
        );
        assert_eq!(fs::read_dir(&store.inner.temp_dir).unwrap().count(), 0);
    }

    /// A put stalled between writing its temp file and renaming it for longer than
    /// [`crate::temp::STALE_AFTER`] (a stopped process, a suspended machine) may have the file
    /// removed by another open's sweep: the put then fails saying so, and no blob is at the
    /// address, so the caller knows it was not stored.
    #[test]
    fn a_put_whose_temp_file_was_swept_fails_saying_so_and_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let bytes = b"a stalled blob".to_vec();
        let hash = sha256_hex(&bytes);
        let path = store.path_of(&hash).unwrap();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let pending: Pending<'_> = (&hash, &bytes, path.clone());
        let chunk = [&pending];
        let mut temps = Vec::new();
        store.inner.write_temps(&chunk, &mut temps).unwrap();
        assert_eq!(temps.len(), 1);
        assert_eq!(temps[0].parent(), Some(store.inner.temp_dir.as_path()));
        let later =
            std::time::SystemTime::now() + crate::temp::STALE_AFTER + Duration::from_secs(1);
        assert_eq!(
            crate::temp::remove_stale(&store.inner.temp_dir, is_temp_name, later).removed,
            1
        );
        let err = store.inner.rename_temps(&chunk, &mut temps).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(&format!("blob {hash} was not stored"))
                && message.contains("removed before its rename"),
            "{message}"
        );
        assert!(!path.exists(), "something is at the address");
    }

    #[test]
    fn in_parallel_runs_at_most_a_chunk_at_once() {
        let (peak, ran) = peak(200, &std::thread::Builder::new);
        assert_eq!(ran, 200);
        assert!(peak <= FsBlobStore::PUT_CHUNK, "{peak} ops ran at once");
        assert!(peak > 1, "the ops did not overlap");
    }

    #[test]
    fn an_op_whose_thread_cannot_start_runs_on_the_calling_thread() {
        // No machine maps a 1 PiB stack: every spawn fails.
        let (peak, ran) = peak(40, &|| std::thread::Builder::new().stack_size(1 << 50));
        assert_eq!((peak, ran), (1, 40));
    }

    #[test]
    fn in_parallel_returns_the_first_error_after_every_op_ran() {
        let ran = AtomicUsize::new(0);
        let items: Vec<usize> = (0..5).collect();
        let result = in_parallel(&items, |i| {
            ran.fetch_add(1, Ordering::SeqCst);
            if *i == 3 {
                Err(BlobStoreError::Backend("op 3 failed".into()))
            } else {
                Ok(())
            }
        });
        assert_eq!(result, Err(BlobStoreError::Backend("op 3 failed".into())));
        assert_eq!(ran.into_inner(), 5);
    }
}

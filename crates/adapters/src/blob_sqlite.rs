//! [`SqliteBlobStore`]: content-addressed blobs as rows of the run store's database (`cogni.db`),
//! so that a model step's blobs and its rows share one write-ahead log and one fsync.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ai_core::{BlobStore, BlobStoreError, sha256_hex};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::blob::{addressed, check_hash, only_address};

/// Blobs in the `blobs` table of a [`crate::SqliteStore`]'s database, one row per address;
/// made by [`crate::SqliteStore::blob_store`].
///
/// A row already at an address counts only if it holds the bytes put there (for bytes whose
/// SHA-256 is the address, the same as its hash checking): a damaged one (other bytes, or a value
/// that is not a blob) is replaced in the batch's transaction, as [`crate::FsBlobStore`] replaces
/// a damaged file, and a healthy one is left unwritten (SQLite compares the bytes in place; a put
/// of bytes already stored writes nothing). A batch is one transaction, so a crash leaves all of
/// it or none of it, and never a blob at its address with other bytes; a get checks the bytes
/// against the address. A blob longer than a row holds (SQLite's length limit, 1,000,000,000
/// bytes, less 128 for the rest of the row) is refused as [`BlobStoreError::TooLarge`], naming
/// it, and nothing of its batch is written. Calls run on tokio's blocking pool, one at a time
/// per store.
///
/// **Durability.** A batch is appended to the database's write-ahead log with
/// `synchronous = NORMAL`: it survives the process being killed at once, and survives a power
/// loss from the next fsynced commit of the same database on, which the run store's commits
/// all are. Blobs are written before the step that references them, and the log is replayed in
/// order, so a committed step never references a blob that a crash lost; a blob nothing
/// references yet may be lost with the power, which is harmless. This is what makes a recorded
/// model step cost one fsync instead of one per blob file plus one
/// ([`crate::FsBlobStore`]); `cargo bench -p cogni-adapters --bench store` measures both.
///
/// ```
/// use ai_core::{BlobStore, BlobStoreError};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = adapters::SqliteStore::open(dir.path()).unwrap().blob_store().unwrap();
/// let hashes = store.put_many(&[b"a", b"b"]).await.unwrap();
/// assert_eq!(store.get(&hashes[1]).await.unwrap(), b"b");
/// assert!(matches!(store.get(&"0".repeat(64)).await, Err(BlobStoreError::NotFound(_))));
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct SqliteBlobStore {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
    /// Whether the database has the `blobs` table (a read-only open of a schema older than
    /// version 2 has none, so it holds no blob).
    has_table: bool,
}

/// The most a `blobs` row holds besides the blob's bytes: its record's header (under 16 bytes),
/// its 64-byte address, and room to spare. SQLite refuses a row, and a value, longer than its
/// length limit (`SQLITE_LIMIT_LENGTH`: 1,000,000,000 bytes in the bundled build), so a blob
/// longer than that limit less this is refused as [`BlobStoreError::TooLarge`] before it is
/// written, rather than as SQLite's error.
const ROW_OVERHEAD: usize = 128;

fn backend(what: impl std::fmt::Display, e: impl std::fmt::Display) -> BlobStoreError {
    BlobStoreError::Backend(format!("{what}: {e}"))
}

impl SqliteBlobStore {
    /// Opens a connection to `path`, a database [`crate::SqliteStore`] has migrated.
    pub(crate) fn open_migrated(path: &Path) -> Result<Self, BlobStoreError> {
        let conn = crate::sqlite::open_connection(path, rusqlite::OpenFlags::default())
            .map_err(|e| backend(format_args!("cannot open {}", path.display()), e))?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(|e| backend("cannot set the busy timeout", e))?;
        // The run store left the file in WAL mode (a persistent setting); a batch is appended
        // to the log without an fsync of its own (see the type's docs).
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| backend("cannot set the connection's pragmas", e))?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            path: path.to_owned(),
            has_table: true,
        })
    }

    /// Opens the existing database `path` (a `cogni.db`) to read blobs only
    /// (`SQLITE_OPEN_READ_ONLY`, `query_only`): nothing is created or changed, and a put fails
    /// as [`BlobStoreError::Backend`]. A database from before blob rows (no `blobs` table)
    /// holds no blob: every get is [`BlobStoreError::NotFound`].
    pub fn open_read_only(path: &Path) -> Result<Self, BlobStoreError> {
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = crate::sqlite::open_connection(path, flags)
            .map_err(|e| backend(format_args!("cannot open {} to read", path.display()), e))?;
        conn.busy_timeout(Duration::from_secs(5))
            .and_then(|()| conn.pragma_update(None, "query_only", "ON"))
            .map_err(|e| backend("cannot set the connection's pragmas", e))?;
        let has_table = conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'blobs'",
                [],
                |_| Ok(()),
            )
            .optional()
            .map_err(|e| backend(format_args!("cannot read {}", path.display()), e))?
            .is_some();
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            path: path.to_owned(),
            has_table,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection on tokio's blocking pool.
    async fn with_conn<T, F>(&self, f: F) -> Result<T, BlobStoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, BlobStoreError> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || f(&mut crate::sqlite::lock_connection(&conn)))
            .await
            .map_err(|e| backend("the blob store task failed", e))?
    }
}

/// The largest blob a row of `conn`'s database holds: its length limit less [`ROW_OVERHEAD`].
fn max_blob_bytes(conn: &Connection) -> Result<usize, BlobStoreError> {
    let limit = conn
        .limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH)
        .map_err(|e| backend("cannot read the database's length limit", e))?;
    // A limit is never negative.
    Ok(usize::try_from(limit)
        .unwrap_or(0)
        .saturating_sub(ROW_OVERHEAD))
}

#[async_trait]
impl BlobStore for SqliteBlobStore {
    async fn put(&self, bytes: &[u8]) -> Result<String, BlobStoreError> {
        only_address(self.put_many(&[bytes]).await?)
    }

    async fn put_many(&self, blobs: &[&[u8]]) -> Result<Vec<String>, BlobStoreError> {
        let (batch, hashes) = addressed(blobs);
        if batch.is_empty() {
            return Ok(hashes);
        }
        self.with_conn(move |conn| {
            // Checked whole before the transaction: a batch with a blob no row holds writes
            // nothing, and says which blob and why.
            let max = max_blob_bytes(conn)?;
            if let Some((hash, bytes)) = batch.iter().find(|(_, bytes)| bytes.len() > max) {
                return Err(BlobStoreError::TooLarge {
                    hash: hash.clone(),
                    size: bytes.len() as u64,
                    max: max as u64,
                });
            }
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| backend("cannot begin a blob batch", e))?;
            {
                // A new address is inserted; a row at the address is rewritten only when it does
                // not hold these bytes (a damaged row), so a healthy one costs a comparison.
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO blobs (hash, bytes) VALUES (?1, ?2) \
                         ON CONFLICT (hash) DO UPDATE SET bytes = excluded.bytes \
                         WHERE blobs.bytes <> excluded.bytes",
                    )
                    .map_err(|e| backend("cannot prepare a blob insert", e))?;
                for (hash, bytes) in &batch {
                    insert
                        .execute(params![hash, bytes])
                        .map_err(|e| backend(format_args!("cannot store blob {hash}"), e))?;
                }
            }
            tx.commit()
                .map_err(|e| backend("cannot commit a blob batch", e))
        })
        .await?;
        Ok(hashes)
    }

    async fn get(&self, hash: &str) -> Result<Vec<u8>, BlobStoreError> {
        check_hash(hash)?;
        if !self.has_table {
            return Err(BlobStoreError::NotFound(hash.to_owned()));
        }
        let hash = hash.to_owned();
        self.with_conn(move |conn| {
            // Only a blob's bytes are taken (`None`: a value of another type), never converted
            // (rusqlite's conversion of text that is not UTF-8 panics).
            let value: Option<Option<Vec<u8>>> = conn
                .prepare_cached("SELECT bytes FROM blobs WHERE hash = ?1")
                .and_then(|mut select| {
                    select
                        .query_row([&hash], |row| {
                            Ok(match row.get_ref(0)? {
                                rusqlite::types::ValueRef::Blob(bytes) => Some(bytes.to_vec()),
                                _ => None,
                            })
                        })
                        .optional()
                })
                .map_err(|e| backend(format_args!("cannot read blob {hash}"), e))?;
            // A value that is not a blob (damaged by hand or by another writer) is as corrupt
            // as bytes that do not hash to the address.
            match value.ok_or_else(|| BlobStoreError::NotFound(hash.clone()))? {
                Some(bytes) if sha256_hex(&bytes) == hash => Ok(bytes),
                _ => Err(BlobStoreError::Corrupt(hash)),
            }
        })
        .await
    }
}

/// The embedded default: small blobs (receipts, tool calls, completions) as rows of the run
/// database ([`SqliteBlobStore`]), blobs over a size limit as files ([`crate::FsBlobStore`]:
/// temp file, fsync, rename, folder fsync), so a model step costs the run store's one fsync
/// while a large payload never bloats the database.
///
/// A get looks in the database, then in the files. A damaged copy never hides a healthy one: a
/// damaged row is looked for in the files too (it is reported as
/// [`BlobStoreError::Corrupt`] only when they hold no healthy copy), and a healthy row is
/// answered before the files are read. A put writes each blob to its tier, which replaces a
/// damaged copy there.
///
/// ```
/// use ai_core::BlobStore;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let runs = adapters::SqliteStore::open(dir.path()).unwrap();
/// let store = adapters::TieredBlobStore::open(&runs, dir.path(), 8).unwrap();
/// let hashes = store.put_many(&[b"tiny", b"more than eight"]).await.unwrap();
/// let (small, large) = (&hashes[0], &hashes[1]);
/// assert_eq!(store.get(small).await.unwrap(), b"tiny");
/// assert!(dir.path().join("blobs").join(&large[..2]).join(&large[2..]).is_file());
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct TieredBlobStore {
    rows: SqliteBlobStore,
    files: crate::FsBlobStore,
    max_row_bytes: usize,
    /// Opened by [`TieredBlobStore::open_read_only`]: every put is refused.
    read_only: bool,
}

impl TieredBlobStore {
    /// The size limit the composition root uses: blobs up to 64 KiB are rows.
    pub const DEFAULT_MAX_ROW_BYTES: usize = 64 * 1024;

    /// Blobs up to `max_row_bytes` in `runs`' database, larger ones under
    /// `<data_dir>/blobs/`. A `max_row_bytes` larger than a row of the database holds
    /// (SQLite's length limit, 1,000,000,000 bytes, less 128 for the rest of the row) is refused
    /// as [`BlobStoreError::Backend`], naming both, since every put of a blob between the two
    /// would fail.
    pub fn open(
        runs: &crate::SqliteStore,
        data_dir: impl AsRef<Path>,
        max_row_bytes: usize,
    ) -> Result<Self, BlobStoreError> {
        let rows = runs.blob_store()?;
        let most = max_blob_bytes(&crate::sqlite::lock_connection(&rows.conn))?;
        if max_row_bytes > most {
            return Err(BlobStoreError::Backend(format!(
                "max_row_bytes {max_row_bytes} is more than a row of {} holds: a blob row holds \
                 at most {most} bytes",
                rows.path().display()
            )));
        }
        Ok(Self {
            rows,
            files: crate::FsBlobStore::open(data_dir)?,
            max_row_bytes,
            read_only: false,
        })
    }

    /// The blobs of an existing data folder, opened to read only: the rows through
    /// [`SqliteBlobStore::open_read_only`] on `runs`' database (e.g. one opened with
    /// [`crate::SqliteStore::open_read_only`]), the files under `<data_dir>/blobs/`, which must
    /// exist (nothing is created). Every put is refused as [`BlobStoreError::Backend`].
    pub fn open_read_only(
        runs: &crate::SqliteStore,
        data_dir: impl AsRef<Path>,
        max_row_bytes: usize,
    ) -> Result<Self, BlobStoreError> {
        let files = data_dir.as_ref().join("blobs");
        if !files.is_dir() {
            return Err(BlobStoreError::Backend(format!(
                "no blob folder at {}: there is nothing to read (a reader creates none)",
                files.display()
            )));
        }
        Ok(Self {
            rows: SqliteBlobStore::open_read_only(runs.path())?,
            files: crate::FsBlobStore::open_without_sweep(data_dir)?,
            max_row_bytes,
            read_only: true,
        })
    }

    /// Where a blob too large for a row lives (see [`crate::FsBlobStore::path_of`]).
    pub fn files(&self) -> &crate::FsBlobStore {
        &self.files
    }

    /// Refuses a put through a store opened to read only.
    fn writable(&self) -> Result<(), BlobStoreError> {
        if self.read_only {
            return Err(BlobStoreError::Backend(format!(
                "the blobs of {} were opened to read only",
                self.rows.path().display()
            )));
        }
        Ok(())
    }
}

#[async_trait]
impl BlobStore for TieredBlobStore {
    async fn put(&self, bytes: &[u8]) -> Result<String, BlobStoreError> {
        self.writable()?;
        if bytes.len() <= self.max_row_bytes {
            self.rows.put(bytes).await
        } else {
            self.files.put(bytes).await
        }
    }

    async fn put_many(&self, blobs: &[&[u8]]) -> Result<Vec<String>, BlobStoreError> {
        self.writable()?;
        let (small, large): (Vec<&[u8]>, Vec<&[u8]>) = blobs
            .iter()
            .partition(|bytes| bytes.len() <= self.max_row_bytes);
        // Files first: they are durable when written, rows with the next commit. A tier with
        // nothing to store is not asked (no blocking task, no empty transaction).
        let mut large = if large.is_empty() {
            Vec::new()
        } else {
            self.files.put_many(&large).await?
        }
        .into_iter();
        let mut small = if small.is_empty() {
            Vec::new()
        } else {
            self.rows.put_many(&small).await?
        }
        .into_iter();
        blobs
            .iter()
            .map(|bytes| {
                let tier = if bytes.len() <= self.max_row_bytes {
                    &mut small
                } else {
                    &mut large
                };
                tier.next().ok_or_else(|| {
                    BlobStoreError::Backend("a blob batch returned too few addresses".into())
                })
            })
            .collect()
    }

    async fn get(&self, hash: &str) -> Result<Vec<u8>, BlobStoreError> {
        match self.rows.get(hash).await {
            Err(BlobStoreError::NotFound(_)) => self.files.get(hash).await,
            Err(corrupt @ BlobStoreError::Corrupt(_)) => match self.files.get(hash).await {
                // The files hold no healthy copy either: the row's damage is what to report.
                Err(BlobStoreError::NotFound(_) | BlobStoreError::Corrupt(_)) => Err(corrupt),
                found => found,
            },
            found => found,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call that panics while it holds the blob connection, inside a transaction it began,
    /// leaves the store working: the next put rolls that transaction back and goes on, rather
    /// than every later call failing on a poisoned lock.
    #[tokio::test]
    async fn a_call_that_panicked_holding_the_connection_leaves_the_store_working() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = crate::SqliteStore::open(dir.path())
            .unwrap()
            .blob_store()
            .unwrap();
        let panicked = blobs
            .with_conn(|conn| -> Result<(), BlobStoreError> {
                conn.execute_batch("BEGIN IMMEDIATE")
                    .map_err(|e| backend("begin", e))?;
                panic!("a call panics mid-transaction");
            })
            .await;
        assert!(panicked.is_err());
        let hash = blobs.put(b"x").await.unwrap();
        assert_eq!(blobs.get(&hash).await.unwrap(), b"x");
    }

    /// A blob too large for a row of the database (SQLite's length limit, lowered here so the
    /// test needs no gigabyte) is refused as `TooLarge`, naming its address, its size and the
    /// most a row holds, and the batch writes nothing; a blob of that most is stored.
    #[tokio::test]
    async fn a_blob_past_the_row_limit_is_too_large_and_its_batch_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = crate::SqliteStore::open(dir.path())
            .unwrap()
            .blob_store()
            .unwrap();
        const LIMIT: i32 = 10_000;
        crate::sqlite::lock_connection(&blobs.conn)
            .set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, LIMIT)
            .unwrap();
        let max = LIMIT as usize - ROW_OVERHEAD;
        for size in [LIMIT as usize + 1, max + 1] {
            let large = vec![7u8; size];
            let err = blobs.put_many(&[b"small", &large]).await.unwrap_err();
            assert_eq!(
                err,
                BlobStoreError::TooLarge {
                    hash: sha256_hex(&large),
                    size: size as u64,
                    max: max as u64,
                }
            );
            assert_eq!(
                blobs.get(&sha256_hex(b"small")).await,
                Err(BlobStoreError::NotFound(sha256_hex(b"small"))),
                "the batch was written in part"
            );
        }
        let most = vec![7u8; max];
        let hash = blobs.put(&most).await.unwrap();
        assert_eq!(blobs.get(&hash).await.unwrap(), most);
    }

    /// A tier of rows larger than a row of the database holds (SQLite's length limit less the
    /// row's overhead) is refused as the store opens, naming the setting and the most a row
    /// holds, rather than failing every put of a blob between the two; the most is accepted.
    #[test]
    fn a_row_tier_past_the_row_limit_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let runs = crate::SqliteStore::open(dir.path()).unwrap();
        let max = max_blob_bytes(&crate::sqlite::lock_connection(
            &runs.blob_store().unwrap().conn,
        ))
        .unwrap();
        for too_many in [max + 1, usize::MAX] {
            let err = TieredBlobStore::open(&runs, dir.path(), too_many).unwrap_err();
            let message = err.to_string();
            assert!(
                message.contains(&format!("max_row_bytes {too_many}"))
                    && message.contains(&format!("at most {max} bytes")),
                "{message}"
            );
        }
        TieredBlobStore::open(&runs, dir.path(), max).unwrap();
    }
}

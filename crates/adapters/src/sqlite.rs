//! [`SqliteStore`]: the embedded durable store, one SQLite file (`cogni.db`) in the data
//! directory, behind [`ai_core::ThreadStore`] and [`ai_core::RunStore`].
//!
//! The database runs in WAL mode with `synchronous = FULL` (every commit is fsynced). Its schema
//! is the numbered `.sql` files in `crates/adapters/migrations/`, compiled in and applied in
//! order, each in its own transaction that also sets `PRAGMA user_version`. A database whose
//! version is newer than this build's, or at version 0 but holding more than SQLite's own tables
//! (some other program's), is refused before anything is written to it.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ai_core::{
    AiEvent, DanglingToolCall, InterruptedRun, RunHeader, RunId, RunLog, RunStatus, RunStep,
    RunStore, RunStoreError, RunSummary, ThreadId, ThreadStore, ThreadStoreError, ToolCallId,
    ToolInvocationRecord,
};
use async_trait::async_trait;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use serde_json::Value;

use crate::SqliteBlobStore;
use crate::stored::CallEvent;

/// The database file's name inside the data directory.
pub const DB_FILE: &str = "cogni.db";

/// The migrations, in order: version `i + 1` is `MIGRATIONS[i]`.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_init.sql"),
    include_str!("../migrations/0002_blobs.sql"),
    include_str!("../migrations/0003_runs_to_close.sql"),
];

/// The schema version this build writes (the number of migrations).
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Threads, runs, run events, tool invocation records and model receipt refs in one SQLite file.
///
/// Every write is one transaction; a write that fails leaves the database as it was. Calls run
/// on tokio's blocking pool, one at a time per store (SQLite serializes writers anyway).
///
/// ```
/// use ai_core::{AiEvent, DoneReason, RunId, RunStatus, RunStep, RunStore};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = adapters::SqliteStore::open(dir.path()).unwrap();
/// let run = RunId::new("run-1").unwrap();
/// store.begin_run(&run, None, 1_000, None).await.unwrap();
/// let step = RunStep {
///     events: vec![AiEvent::Done { reason: DoneReason::Stop }],
///     ..Default::default()
/// };
/// assert_eq!(store.commit_step(&run, step).await.unwrap(), 0..1);
/// store.finish_run(&run, 2_000).await.unwrap();
/// assert_eq!(store.load_run(&run).await.unwrap().header.status, RunStatus::Finished);
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
}

/// Opens the database file `path` with `flags`, as a file name, never as a URI.
///
/// SQLite reads a name beginning with `file:` as a URI (its query may set `mode`, `vfs` or
/// `immutable`, a `?` or `#` ends the path) when the open's flags hold `SQLITE_OPEN_URI`, which
/// rusqlite's default flags do, and whatever the flags when it was built with
/// `SQLITE_USE_URI`, as rusqlite's bundled SQLite is. So a relative data folder named
/// `file:…` would open another file, or the same one in another mode. The flag is dropped, and
/// a relative path is given as `./<path>`, which SQLite takes as a file name; it names the same
/// file. (SQLite's `:memory:` is a file name here too.)
pub(crate) fn open_connection(
    path: &Path,
    flags: rusqlite::OpenFlags,
) -> rusqlite::Result<Connection> {
    Connection::open_with_flags(
        file_name(path),
        flags - rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
}

/// `path` as a name SQLite cannot read as a URI: a relative path gets a leading `./`.
fn file_name(path: &Path) -> std::borrow::Cow<'_, Path> {
    match path.components().next() {
        Some(std::path::Component::Normal(_)) => Path::new(".").join(path).into(),
        _ => path.into(),
    }
}

/// The value of `row`'s `column` as stored, of whatever type it holds: the tables are not
/// STRICT, so a damaged row can hold any. Text that is not UTF-8 (a hand edit, a damaged page),
/// on which rusqlite's own conversion to [`SqlValue`] panics, is read as its bytes, a blob,
/// which every reader refuses as a value of the wrong type.
pub(crate) fn any_value(row: &rusqlite::Row<'_>, column: usize) -> rusqlite::Result<SqlValue> {
    Ok(match row.get_ref(column)? {
        ValueRef::Text(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => SqlValue::Text(text.to_owned()),
            Err(_) => SqlValue::Blob(bytes.to_vec()),
        },
        value => value.into(),
    })
}

fn backend(what: impl std::fmt::Display, e: impl std::fmt::Display) -> RunStoreError {
    RunStoreError::Backend(format!("{what}: {e}"))
}

impl SqliteStore {
    /// Opens `<data_dir>/cogni.db`, creating the folder and the database when needed, and brings
    /// its schema up to [`SCHEMA_VERSION`].
    ///
    /// A folder it creates is its owner's alone (mode `0700` on Unix): the database and the blobs
    /// beside it hold the conversations and the tools' arguments. A folder that exists keeps the
    /// permissions it has.
    ///
    /// A database from a newer version is refused as [`RunStoreError::NewerSchema`] and left
    /// untouched, and so is one that is not a cogni store (schema version 0, holding tables or
    /// anything else but SQLite's own tables), as [`RunStoreError::Corrupt`]: cogni's tables are
    /// never added to another program's database, nor is it switched to WAL. A folder that
    /// cannot be written is a [`RunStoreError::Backend`] naming it, and so is a database SQLite
    /// can only open for reading (a write-protected `cogni.db` in a writable folder): every write
    /// would fail, so it is refused at open, not at every run.
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self, RunStoreError> {
        Self::open_with(data_dir.as_ref(), rusqlite::OpenFlags::default())
    }

    /// [`SqliteStore::open`] with the connection's flags: the tests open with
    /// `SQLITE_OPEN_READ_ONLY` what SQLite opens so when the file is write-protected, which a
    /// test run as root cannot make it.
    fn open_with(data_dir: &Path, flags: rusqlite::OpenFlags) -> Result<Self, RunStoreError> {
        crate::create_private_dir(data_dir).map_err(|e| {
            backend(
                format_args!("cannot create the data directory {}", data_dir.display()),
                e,
            )
        })?;
        let path = data_dir.join(DB_FILE);
        let mut conn =
            open_connection(&path, flags).map_err(|e| open_failed(&path, data_dir, &e))?;
        // SQLite opens a file it may not write for reading only, and says so only when a write
        // fails: refused here, before a server starts that would fail every run.
        if conn
            .is_readonly(rusqlite::MAIN_DB)
            .map_err(|e| open_failed(&path, data_dir, &e))?
        {
            return Err(RunStoreError::Backend(format!(
                "cannot open {} for writing: the file is read-only (the store writes it and its \
                 -wal and -shm files: make it writable, or choose another data_dir)",
                path.display()
            )));
        }
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(|e| backend("cannot set the busy timeout", e))?;

        // Read the version before anything writes: a newer database, or one that is not a cogni
        // store, is left exactly as it is. One statement, so one snapshot: a cogni store's first
        // migration sets its version in the transaction that creates its tables. SQLite's own
        // tables (`sqlite_stat1`, which `ANALYZE` creates in an empty database) are no program's
        // data: no other name may begin with `sqlite_`, in any case.
        let (found, holds_schema): (i64, bool) = conn
            .query_row(
                "SELECT (SELECT user_version FROM pragma_user_version), \
                 EXISTS (SELECT 1 FROM sqlite_schema \
                         WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\')",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map_err(|e| open_failed(&path, data_dir, &e))?;
        let found = u32::try_from(found).map_err(|_| bad_version(&path, found))?;
        if found > SCHEMA_VERSION {
            return Err(RunStoreError::NewerSchema {
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found == 0 && holds_schema {
            return Err(RunStoreError::Corrupt(format!(
                "{} has schema version 0 but is not empty: it is not a cogni store (it was left \
                 as it is)",
                path.display()
            )));
        }

        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(|e| open_failed(&path, data_dir, &e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(RunStoreError::Backend(format!(
                "{} refused WAL mode (journal mode is {mode})",
                path.display()
            )));
        }
        conn.pragma_update(None, "synchronous", "FULL")
            .and_then(|()| conn.pragma_update(None, "foreign_keys", "ON"))
            .map_err(|e| backend("cannot set the connection's pragmas", e))?;

        migrate(&mut conn, &path)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            path,
        })
    }

    /// Opens an existing `<data_dir>/cogni.db` for reading only (`SQLITE_OPEN_READ_ONLY`, and
    /// `query_only` on the connection): no database is created, no row written, nothing
    /// migrated or switched to WAL, so a reader from a newer build never upgrades an older
    /// server's database. Every write through it fails as [`RunStoreError::Backend`]. (Reading a
    /// database in WAL mode, SQLite itself may create its `-wal` and `-shm` companions, as for
    /// any reader; they hold no data of their own.)
    ///
    /// A missing database is a [`RunStoreError::Backend`] naming it (it is not created); a schema
    /// version this build cannot read is refused: 0 (not a cogni store) as
    /// [`RunStoreError::Corrupt`], newer than [`SCHEMA_VERSION`] as
    /// [`RunStoreError::NewerSchema`]. Every older version is readable: the columns a reader
    /// reads have not changed since version 1 (version 3 added one only recovery reads).
    ///
    /// ```
    /// use ai_core::RunStore;
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// assert!(adapters::SqliteStore::open_read_only(dir.path()).is_err());
    /// assert!(!dir.path().join("cogni.db").exists());
    /// drop(adapters::SqliteStore::open(dir.path()).unwrap());
    /// let reader = adapters::SqliteStore::open_read_only(dir.path()).unwrap();
    /// assert!(reader.list_runs().await.unwrap().is_empty());
    /// # });
    /// ```
    pub fn open_read_only(data_dir: impl AsRef<Path>) -> Result<Self, RunStoreError> {
        let data_dir = data_dir.as_ref();
        let path = data_dir.join(DB_FILE);
        if !path.is_file() {
            return Err(RunStoreError::Backend(format!(
                "no database at {}: there is nothing to read (a reader creates none)",
                path.display()
            )));
        }
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = open_connection(&path, flags).map_err(|e| open_failed(&path, data_dir, &e))?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(|e| backend("cannot set the busy timeout", e))?;
        match user_version(&conn, &path)? {
            0 => {
                return Err(RunStoreError::Corrupt(format!(
                    "{} has schema version 0: it is not a cogni store (it was left as it is)",
                    path.display()
                )));
            }
            found if found > SCHEMA_VERSION => {
                return Err(RunStoreError::NewerSchema {
                    found,
                    supported: SCHEMA_VERSION,
                });
            }
            _ => {}
        }
        conn.pragma_update(None, "query_only", "ON")
            .map_err(|e| backend("cannot set the connection's pragmas", e))?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            path,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A blob store in this database (its own connection to the same file): see
    /// [`SqliteBlobStore`] for why blobs that share the run store's write-ahead log cost no
    /// fsync of their own.
    pub fn blob_store(&self) -> Result<SqliteBlobStore, ai_core::BlobStoreError> {
        SqliteBlobStore::open_migrated(&self.path)
    }

    /// Runs `f` on the connection on tokio's blocking pool.
    async fn with_conn<T, F>(&self, f: F) -> Result<T, RunStoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, RunStoreError> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || f(&mut lock_connection(&conn)))
            .await
            .map_err(|e| backend("the store task failed", e))?
    }
}

/// Locks a store's connection, also after a call panicked holding it: the panic ended that
/// call only, and every later one would otherwise fail on the poisoned lock until the process
/// restarts. What the panicking call left unfinished is undone first, once: the cached
/// statements are ended (one a leak left mid-step would keep reading a snapshot that no longer
/// is, and block every write), a transaction it left open is rolled back (a [`Transaction`]
/// dropped while unwinding already rolled its own back), so nothing it wrote half-way is
/// committed by the next call; then the lock is no longer poisoned.
pub(crate) fn lock_connection(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|poisoned| {
        let guard = poisoned.into_inner();
        guard.flush_prepared_statement_cache();
        if !guard.is_autocommit()
            && let Err(error) = guard.execute_batch("ROLLBACK")
        {
            // SQLite ends the transaction whenever `ROLLBACK` runs, so only a failure to run it
            // at all gets here: the lock stays poisoned, and the next call tries again.
            tracing::error!(%error, "a transaction a panicking call left open cannot be rolled back");
        }
        if guard.is_autocommit() {
            conn.clear_poison();
        }
        guard
    })
}

/// An error from opening the database, with what to check.
fn open_failed(path: &Path, data_dir: &Path, e: &rusqlite::Error) -> RunStoreError {
    use rusqlite::ErrorCode;
    let hint = match e.sqlite_error_code() {
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
            format!(
                " (the store writes {} and its -wal and -shm files: is {} writable?)",
                path.display(),
                data_dir.display()
            )
        }
        Some(ErrorCode::NotADatabase) => " (the file was left as it is)".to_owned(),
        _ => String::new(),
    };
    RunStoreError::Backend(format!("cannot open {}: {e}{hint}", path.display()))
}

fn user_version(conn: &Connection, path: &Path) -> Result<u32, RunStoreError> {
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|e| backend(format_args!("cannot read {}", path.display()), e))?;
    u32::try_from(version).map_err(|_| bad_version(path, version))
}

/// The refusal of a schema version no cogni store has (a negative `user_version`), naming the
/// database file.
fn bad_version(path: &Path, version: i64) -> RunStoreError {
    RunStoreError::Corrupt(format!(
        "{} has schema version {version}, which no cogni store has: it is not one (it was left \
         as it is)",
        path.display()
    ))
}

/// Applies the migrations after the database's version, each in one transaction.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), RunStoreError> {
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as u32 + 1;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| backend(format_args!("cannot write {}", path.display()), e))?;
        // Read again inside the write lock: another process may have migrated meanwhile.
        let current = user_version(&tx, path)?;
        if current > SCHEMA_VERSION {
            return Err(RunStoreError::NewerSchema {
                found: current,
                supported: SCHEMA_VERSION,
            });
        }
        if current >= version {
            continue;
        }
        tx.execute_batch(sql)
            .and_then(|()| tx.pragma_update(None, "user_version", version))
            .and_then(|()| tx.commit())
            .map_err(|e| {
                // SQLite's reason only: an error in a statement quotes the whole migration.
                let reason = match e {
                    rusqlite::Error::SqlInputError { msg, .. } => msg,
                    other => other.to_string(),
                };
                RunStoreError::Backend(format!(
                    "migration {version} of {} failed (it stays at version {current}): {reason}",
                    path.display()
                ))
            })?;
    }
    Ok(())
}

/// A run's status, thread and whether its log holds its `done` event, or `NotFound`. A row
/// holding a value of another type there (the table is not STRICT) is
/// [`RunStoreError::Corrupt`], naming the run and the column, never what it holds.
fn run_row(
    tx: &Transaction<'_>,
    run_id: &RunId,
) -> Result<(RunStatus, Option<String>, bool), RunStoreError> {
    let row: Option<(SqlValue, SqlValue, SqlValue)> = tx
        .prepare_cached("SELECT status, thread_id, has_done FROM runs WHERE run_id = ?1")
        .and_then(|mut stmt| {
            stmt.query_row([run_id.as_str()], |r| {
                Ok((any_value(r, 0)?, any_value(r, 1)?, any_value(r, 2)?))
            })
            .optional()
        })
        .map_err(|e| backend("cannot read the run", e))?;
    let (status, thread, has_done) = row.ok_or_else(|| RunStoreError::NotFound(run_id.clone()))?;
    let corrupt = |why: &str| RunStoreError::Corrupt(format!("run {run_id}: its {why}"));
    let wrong_type = |what: &str| {
        corrupt(&format!(
            "{what} is not of its column's type, which no store writes"
        ))
    };
    let status = text(status)
        .ok()
        .flatten()
        .and_then(|status| RunStatus::parse(&status))
        .ok_or_else(|| corrupt("status is not a run status"))?;
    let thread = text(thread).map_err(|()| wrong_type("thread id"))?;
    let SqlValue::Integer(has_done) = has_done else {
        return Err(wrong_type("done mark"));
    };
    Ok((status, thread, has_done != 0))
}

/// The columns `header_from_row` reads, in its order, from a `runs` row.
const HEADER_COLUMNS: &str =
    "rowid, run_id, thread_id, status, started_at_ms, finished_at_ms, input_ref";

fn header_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawHeader> {
    // The table is not STRICT: a damaged row can hold a value of another type in any column.
    // Such a value is a problem of the row, not of the query, so the other rows still list.
    let mut wrong_type = None;
    let run_id = lenient(row.get(1), "id", &mut wrong_type)?;
    let thread_id = lenient(row.get(2), "thread id", &mut wrong_type)?;
    let status = lenient(row.get(3), "status", &mut wrong_type)?;
    let started_at_ms = lenient(row.get(4), "start time", &mut wrong_type)?;
    let finished_at_ms = lenient(row.get(5), "finish time", &mut wrong_type)?;
    let input_ref = lenient(row.get(6), "input ref", &mut wrong_type)?;
    Ok(RawHeader {
        row: row.get(0)?,
        run_id,
        thread_id,
        status,
        started_at_ms,
        finished_at_ms,
        input_ref,
        wrong_type,
    })
}

/// A column's value, or its type's default when the row holds a value of another type there,
/// with the first such column named in `wrong_type`.
fn lenient<T: Default>(
    value: rusqlite::Result<T>,
    name: &str,
    wrong_type: &mut Option<String>,
) -> rusqlite::Result<T> {
    match value {
        Err(
            rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::IntegralValueOutOfRange(..),
        ) => {
            wrong_type.get_or_insert_with(|| format!("its {name} is not of its column's type"));
            Ok(T::default())
        }
        other => other,
    }
}

/// A `runs` row as stored, before its values are checked.
struct RawHeader {
    /// The row's rowid: how a row that cannot be decoded is named.
    row: i64,
    run_id: String,
    thread_id: Option<String>,
    status: String,
    started_at_ms: i64,
    finished_at_ms: Option<i64>,
    input_ref: Option<String>,
    /// The first column that held a value of another type (its field above is a default).
    wrong_type: Option<String>,
}

/// A `runs` row that does not decode: its row, its run when its id is a valid one, and what is
/// wrong. It never holds a stored value but a valid run id.
struct BadHeader {
    row: i64,
    run_id: Option<RunId>,
    problem: String,
}

impl BadHeader {
    /// The row as an error message names it.
    fn name(&self) -> String {
        match &self.run_id {
            Some(run_id) => format!("run {run_id} (row {} of runs)", self.row),
            None => format!("the run at row {} of runs", self.row),
        }
    }

    fn into_error(self) -> RunStoreError {
        RunStoreError::Corrupt(format!("{}: {}", self.name(), self.problem))
    }
}

impl RawHeader {
    /// The header, or which of the row's values is wrong and why (never the value itself).
    fn decode(self) -> Result<RunHeader, BadHeader> {
        let row = self.row;
        if let Some(problem) = self.wrong_type {
            return Err(BadHeader {
                row,
                run_id: RunId::new(self.run_id).ok(),
                problem,
            });
        }
        let run_id = RunId::new(self.run_id).map_err(|e| BadHeader {
            row,
            run_id: None,
            problem: format!("its id is not a valid run id ({e})"),
        })?;
        let bad = |problem: String| BadHeader {
            row,
            run_id: Some(run_id.clone()),
            problem,
        };
        let thread_id = self
            .thread_id
            .map(ThreadId::new)
            .transpose()
            .map_err(|e| bad(format!("its thread id is not a valid thread id ({e})")))?;
        let status = RunStatus::parse(&self.status)
            .ok_or_else(|| bad("its status is not a run status".to_owned()))?;
        let started_at_ms = u64::try_from(self.started_at_ms)
            .map_err(|_| bad("its start time is negative".to_owned()))?;
        let finished_at_ms = self
            .finished_at_ms
            .map(u64::try_from)
            .transpose()
            .map_err(|_| bad("its finish time is negative".to_owned()))?;
        Ok(RunHeader {
            run_id,
            thread_id,
            status,
            started_at_ms,
            finished_at_ms,
            input_ref: self.input_ref,
        })
    }
}

/// A time as stored, or the refusal of one past [`ai_core::MAX_RUN_TIME_MS`] (`what` names it).
fn ms(what: &'static str, at_ms: u64) -> Result<i64, RunStoreError> {
    i64::try_from(at_ms).map_err(|_| RunStoreError::TimeOutOfRange { what, at_ms })
}

/// A step's rows, serialized and checked before the transaction starts.
struct PreparedStep {
    events: Vec<(String, Option<String>, String)>,
    records: Vec<(String, String, String)>,
    receipt_refs: Vec<String>,
    thread_state: Option<String>,
    thread_state_if_saved: Option<Value>,
    refuse_if_thread_changed: bool,
}

fn prepare_step(run_id: &RunId, step: RunStep) -> Result<PreparedStep, RunStoreError> {
    let invalid = |reason: String| RunStoreError::Invalid {
        run_id: run_id.clone(),
        reason,
    };
    crate::stored::check_step_events(run_id, &step.events)?;
    let mut events = Vec::with_capacity(step.events.len());
    for event in &step.events {
        let value = serde_json::to_value(event)
            .map_err(|e| invalid(format!("an event does not serialize: {e}")))?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned();
        let call = value
            .get("tool_call_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        events.push((kind, call, value.to_string()));
    }
    let mut records = Vec::with_capacity(step.records.len());
    for record in &step.records {
        // `ToolInvocationRecord::raw` is `#[serde(skip)]`: it never reaches the JSON.
        let json = serde_json::to_string(record)
            .map_err(|e| invalid(format!("a record does not serialize: {e}")))?;
        records.push((
            record.tool_call_id.as_str().to_owned(),
            record.tool_id.to_string(),
            json,
        ));
    }
    for (i, receipt) in step.receipt_refs.iter().enumerate() {
        crate::blob::check_run_ref(run_id, &format!("receipt ref {i} of the step"), receipt)?;
    }
    if let Some(state) = &step.thread_state {
        crate::stored::check_step_state(run_id, state)?;
    }
    Ok(PreparedStep {
        events,
        records,
        receipt_refs: step.receipt_refs,
        thread_state: step.thread_state.map(|v| v.to_string()),
        thread_state_if_saved: step.thread_state_if_saved,
        refuse_if_thread_changed: step.refuse_if_thread_changed,
    })
}

/// The number the first of `count` new rows takes (after the run's last one, `sql` reading its
/// `MAX`), refused as [`RunStoreError::Corrupt`] when the last of them would pass `i64::MAX`, or
/// when the run's last number is below -1, so the first would be negative, or is not a 64-bit
/// integer (only a hand-edited number does any of these): `what` names the numbers. So the
/// first is never negative, and the numbers a step returns are the ones it stored.
fn next_index(
    tx: &Transaction<'_>,
    sql: &str,
    run_id: &RunId,
    what: &str,
    count: usize,
) -> Result<i64, RunStoreError> {
    // Read as any type: the table is not STRICT, so a hand edit can leave text, or a float (a
    // fraction, or a whole number past `i64`'s range: an INTEGER column keeps any other as an
    // integer).
    let last: SqlValue = tx
        .prepare_cached(sql)
        .and_then(|mut stmt| stmt.query_row([run_id.as_str()], |r| any_value(r, 0)))
        .map_err(|e| backend("cannot read the run's last index", e))?;
    let corrupt = |why: &str| {
        RunStoreError::Corrupt(format!("run {run_id}: its stored {what} numbers {why}"))
    };
    let first = match last {
        SqlValue::Null => 0,
        SqlValue::Integer(last) => last
            .checked_add(1)
            .ok_or_else(|| corrupt(REACH_THE_LARGEST))?,
        _ => {
            return Err(corrupt(
                "are not all 64-bit integers, which no store writes",
            ));
        }
    };
    if first < 0 {
        return Err(corrupt("are negative, which no store writes"));
    }
    if !i64::try_from(count).is_ok_and(|count| first.checked_add(count).is_some()) {
        return Err(corrupt(REACH_THE_LARGEST));
    }
    Ok(first)
}

/// Why no more numbers can follow the last of a run's stored ones.
const REACH_THE_LARGEST: &str = "reach the largest a store keeps, so no more can follow";

fn save_thread(conn: &Connection, thread_id: &str, state: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "INSERT INTO threads (thread_id, state_json) VALUES (?1, ?2) \
         ON CONFLICT (thread_id) DO UPDATE SET state_json = excluded.state_json, \
         revision = threads.revision + 1",
    )?
    .execute(params![thread_id, state])
}

/// Saves thread `thread_id`'s state as `state` only while its saved state is still `previous`
/// (`None`: none is saved), read and written in one immediate transaction, so no other
/// connection writes between the two. Returns whether it saved. A saved state that cannot be
/// read is neither `previous` nor another: [`RunStoreError::Corrupt`], and it is kept.
fn save_thread_over(
    conn: &mut Connection,
    thread_id: &str,
    previous: Option<&Value>,
    state: &str,
) -> Result<bool, RunStoreError> {
    let failed = |e| backend(format_args!("cannot save thread {thread_id}"), e);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(failed)?;
    if saved_thread(&tx, thread_id)?.as_ref() != previous {
        return Ok(false);
    }
    save_thread(&tx, thread_id, state).map_err(failed)?;
    tx.commit().map_err(failed)?;
    Ok(true)
}

/// The saved state of thread `thread_id`, `None` when none is saved. A row that does not hold
/// JSON text is [`RunStoreError::Corrupt`], named by its thread and column, never by what it
/// holds (a conversation).
fn saved_thread(conn: &Connection, thread_id: &str) -> Result<Option<Value>, RunStoreError> {
    // Read as any type: the table is not STRICT, so a damaged row can hold a blob.
    let stored: Option<SqlValue> = conn
        .prepare_cached("SELECT state_json FROM threads WHERE thread_id = ?1")
        .and_then(|mut stmt| stmt.query_row([thread_id], |r| any_value(r, 0)).optional())
        .map_err(|e| backend(format_args!("cannot read thread {thread_id}"), e))?;
    let corrupt = |why: String| {
        RunStoreError::Corrupt(format!(
            "the saved state of thread {thread_id} (threads.state_json) {why}"
        ))
    };
    match stored {
        None => Ok(None),
        Some(SqlValue::Text(json)) => serde_json::from_str(&json).map(Some).map_err(|e| {
            corrupt(format!(
                "does not decode: {}",
                ai_core::describe_json_error(&e)
            ))
        }),
        Some(_) => Err(corrupt(NOT_UTF8_TEXT.to_owned())),
    }
}

/// What is wrong with a stored text that is not one: a blob, or bytes that are not UTF-8.
const NOT_UTF8_TEXT: &str = "is not UTF-8 text, which no store writes";

fn commit_step_tx(
    conn: &mut Connection,
    run_id: &RunId,
    step: PreparedStep,
) -> Result<Range<u64>, RunStoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| backend("cannot begin the step's transaction", e))?;
    let (status, thread, has_done) = run_row(&tx, run_id)?;
    crate::stored::check_open(run_id, status, has_done)?;
    let thread_write = match (&step.thread_state, &thread) {
        (Some(state), Some(thread)) => Some((thread.as_str(), state.as_str())),
        (Some(_), None) => {
            return Err(RunStoreError::Invalid {
                run_id: run_id.clone(),
                reason: "the step carries a thread state but the run has no thread".into(),
            });
        }
        (None, _) => None,
    };
    let write =
        |e: rusqlite::Error| backend(format_args!("cannot write a step of run {run_id}"), e);

    let first = next_index(
        &tx,
        "SELECT MAX(seq) FROM run_events WHERE run_id = ?1",
        run_id,
        "event",
        step.events.len(),
    )?;
    {
        let mut stmt = tx
            .prepare_cached(
                "INSERT INTO run_events (run_id, seq, kind, tool_call_id, event_json) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(write)?;
        for (i, (kind, call, json)) in step.events.iter().enumerate() {
            stmt.execute(params![run_id.as_str(), first + i as i64, kind, call, json])
                .map_err(write)?;
        }
    }
    if !step.records.is_empty() {
        let next = next_index(
            &tx,
            "SELECT MAX(idx) FROM tool_records WHERE run_id = ?1",
            run_id,
            "record",
            step.records.len(),
        )?;
        let mut stmt = tx
            .prepare_cached(
                "INSERT INTO tool_records (run_id, idx, tool_call_id, tool_id, record_json) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(write)?;
        for (i, (call, tool, json)) in step.records.iter().enumerate() {
            stmt.execute(params![run_id.as_str(), next + i as i64, call, tool, json])
                .map_err(write)?;
        }
    }
    if !step.receipt_refs.is_empty() {
        let next = next_index(
            &tx,
            "SELECT MAX(idx) FROM model_receipts WHERE run_id = ?1",
            run_id,
            "receipt",
            step.receipt_refs.len(),
        )?;
        let mut stmt = tx
            .prepare_cached(
                "INSERT INTO model_receipts (run_id, idx, receipt_ref) VALUES (?1, ?2, ?3)",
            )
            .map_err(write)?;
        for (i, receipt) in step.receipt_refs.iter().enumerate() {
            stmt.execute(params![run_id.as_str(), next + i as i64, receipt])
                .map_err(write)?;
        }
    }
    if let Some((thread, state)) = thread_write {
        // A saved state that cannot be read is neither the one named nor another: the step is
        // refused rather than taking it for an empty thread (and writing over it) or a moved one.
        let unchanged = match &step.thread_state_if_saved {
            None => true,
            Some(expected) => {
                let saved = saved_thread(&tx, thread).map_err(|e| match e {
                    RunStoreError::Corrupt(why) => {
                        RunStoreError::Corrupt(format!("run {run_id}: {why}"))
                    }
                    other => other,
                })?;
                saved.as_ref().unwrap_or(&Value::Null) == expected
            }
        };
        if unchanged {
            save_thread(&tx, thread, state).map_err(write)?;
        } else if step.refuse_if_thread_changed {
            // Dropping the transaction rolls the whole step back.
            return Err(thread_changed(run_id, thread));
        }
    }
    if step.events.iter().any(|(kind, _, _)| kind == "done") {
        tx.prepare_cached("UPDATE runs SET has_done = 1 WHERE run_id = ?1")
            .and_then(|mut stmt| stmt.execute([run_id.as_str()]))
            .map_err(write)?;
    }
    tx.commit().map_err(write)?;
    let first = first as u64;
    Ok(first..first + step.events.len() as u64)
}

/// The refusal of a step whose thread moved on (see [`RunStep::refuse_if_thread_changed`]).
fn thread_changed(run_id: &RunId, thread: &str) -> RunStoreError {
    match ThreadId::new(thread) {
        Ok(thread_id) => RunStoreError::ThreadChanged {
            run_id: run_id.clone(),
            thread_id,
        },
        Err(_) => RunStoreError::Corrupt(format!("run {run_id} has a bad thread id")),
    }
}

fn load_run_tx(conn: &mut Connection, run_id: &RunId) -> Result<RunLog, RunStoreError> {
    // One read transaction, so the header and the contents are one snapshot.
    let tx = conn
        .transaction()
        .map_err(|e| backend("cannot begin a read", e))?;
    let read = |e: rusqlite::Error| backend(format_args!("cannot read run {run_id}"), e);
    let header = tx
        .prepare_cached(&format!(
            "SELECT {HEADER_COLUMNS} FROM runs WHERE run_id = ?1"
        ))
        .and_then(|mut stmt| {
            stmt.query_row([run_id.as_str()], header_from_row)
                .optional()
        })
        .map_err(read)?
        .ok_or_else(|| RunStoreError::NotFound(run_id.clone()))?
        .decode()
        .map_err(BadHeader::into_error)?;
    // The number and the text are read as any type: the table is not STRICT, so a hand edit can
    // leave text or a float for a number, a blob or bytes that are not UTF-8 for the text, which
    // `numbered` and `stored_text` name as damage, not as a failed read.
    let rows = |sql: &str| -> Result<Vec<(SqlValue, SqlValue)>, RunStoreError> {
        let mut stmt = tx.prepare_cached(sql).map_err(read)?;
        let rows = stmt
            .query_map([run_id.as_str()], |r| {
                Ok((any_value(r, 0)?, any_value(r, 1)?))
            })
            .map_err(read)?;
        rows.collect::<Result<_, _>>().map_err(read)
    };
    // The message names the row and the column, never what they hold (a run's text, a tool's
    // result): see `describe_json_error`.
    let corrupt = |what: &str, n: i64, column: &str, why: &str| {
        RunStoreError::Corrupt(format!("{what} {n} of run {run_id} ({column}) {why}"))
    };
    let undecoded =
        |e: serde_json::Error| format!("does not decode: {}", ai_core::describe_json_error(&e));
    let stored_text = |what: &str, n: i64, column: &str, value: SqlValue| match text(value) {
        Ok(Some(text)) => Ok(text),
        _ => Err(corrupt(what, n, column, NOT_UTF8_TEXT)),
    };
    // The event, record or receipt at index `i` is numbered `i` ([`RunLog`]): a log with a
    // number missing (a row deleted by hand) is refused rather than loaded as if whole.
    let numbered = |what: &str, (number, index): (SqlValue, i64)| {
        let why = match number {
            SqlValue::Integer(number) if number == index => return Ok(()),
            SqlValue::Integer(number) if number > index => {
                format!("its {what} {index} is missing (the next one stored is number {number})")
            }
            SqlValue::Integer(number) => {
                format!("its {what} {index} is stored as number {number}, which no store writes")
            }
            _ => format!(
                "its {what} {index} is stored under a number that is not a 64-bit integer, which \
                 no store writes"
            ),
        };
        Err(RunStoreError::Corrupt(format!(
            "run {run_id}: the run log is damaged: {why}"
        )))
    };
    let events = rows("SELECT seq, event_json FROM run_events WHERE run_id = ?1 ORDER BY seq")?
        .into_iter()
        .zip(0_i64..)
        .map(|((seq, json), index)| {
            numbered("event", (seq, index))?;
            let column = "run_events.event_json";
            let json = stored_text("event", index, column, json)?;
            serde_json::from_str::<AiEvent>(&json)
                .map_err(|e| corrupt("event", index, column, &undecoded(e)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let records = rows("SELECT idx, record_json FROM tool_records WHERE run_id = ?1 ORDER BY idx")?
        .into_iter()
        .zip(0_i64..)
        .map(|((idx, json), index)| {
            numbered("tool record", (idx, index))?;
            let column = "tool_records.record_json";
            let json = stored_text("record", index, column, json)?;
            serde_json::from_str::<ToolInvocationRecord>(&json)
                .map_err(|e| corrupt("record", index, column, &undecoded(e)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let receipt_refs =
        rows("SELECT idx, receipt_ref FROM model_receipts WHERE run_id = ?1 ORDER BY idx")?
            .into_iter()
            .zip(0_i64..)
            .map(|((idx, receipt), index)| {
                numbered("model receipt", (idx, index))?;
                let column = "model_receipts.receipt_ref";
                stored_text("model receipt", index, column, receipt)
            })
            .collect::<Result<Vec<_>, _>>()?;
    Ok(RunLog {
        header,
        events,
        records,
        receipt_refs,
    })
}

/// The interrupted runs whose log has no `done` event yet, oldest first: read through the partial
/// index `runs_to_close`, which holds those runs only, so a recovery reads no row of a run it
/// closed before, nor any event.
///
/// So the mark is read again from the events only for the runs [`recover_tx`] is given (those
/// found dead): a run closed before stays closed though its `done` be deleted by hand since.
/// Finding such an edit would read the events of every interrupted run at every start (what
/// the mark is there to avoid), and closing the run again would only add a second error and
/// `done` to a run whose calls and thread were settled when it was first closed.
const RUNS_TO_CLOSE: &str = "SELECT rowid, run_id, thread_id FROM runs INDEXED BY runs_to_close \
     WHERE status = 'interrupted' AND has_done = 0 ORDER BY started_at_ms, run_id";

/// Marks the given runs that are `running` interrupted (the caller knows them dead) and names
/// every interrupted run not closed yet (no `done` event): the closing step is the caller's, in
/// a later transaction, so a run marked by an earlier recovery whose closing step never
/// committed is named again.
///
/// A run whose rows cannot be read (a bad id, a start event without a tool name) is left out
/// and logged, naming its row and what is wrong: it cannot be closed, and it must not keep the
/// others from being closed. It stays interrupted, and is reported again at every recovery.
fn recover_tx(
    conn: &mut Connection,
    at_ms: i64,
    runs: &[RunId],
) -> Result<Vec<InterruptedRun>, RunStoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| backend("cannot begin the recovery transaction", e))?;
    let fail = |e: rusqlite::Error| backend("cannot recover interrupted runs", e);
    // A run found dead has its `has_done` read again from its events (its own index range
    // only): the mark then follows the log even where a hand edit made them disagree.
    for run_id in runs {
        tx.prepare_cached(
            "UPDATE runs SET status = 'interrupted', finished_at_ms = ?1, has_done = EXISTS ( \
               SELECT 1 FROM run_events e WHERE e.run_id = runs.run_id AND e.kind = 'done') \
             WHERE run_id = ?2 AND status = 'running'",
        )
        .and_then(|mut stmt| stmt.execute(params![at_ms, run_id.as_str()]))
        .map_err(fail)?;
    }
    // Read as any type: the table is not STRICT, and a value of another type in one run's row
    // is that run's problem, not the recovery's.
    let open: Vec<(i64, SqlValue, SqlValue)> = {
        let mut stmt = tx.prepare_cached(RUNS_TO_CLOSE).map_err(fail)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, any_value(r, 1)?, any_value(r, 2)?)))
            .map_err(fail)?;
        rows.collect::<Result<_, _>>().map_err(fail)?
    };
    let mut out = Vec::with_capacity(open.len());
    for (rowid, run, thread) in open {
        let run = text(run).ok().flatten();
        let found = match (&run, text(thread)) {
            (None, _) => Ok(Err("its id is not of its column's type")),
            (Some(_), Err(())) => Ok(Err("its thread id is not of its column's type")),
            (Some(run), Ok(thread)) => interrupted_run(&tx, run, thread),
        };
        match found.map_err(fail)? {
            Ok(found) => out.push(found),
            Err(problem) => {
                // The id is named only when it is a valid one: a damaged id may hold anything.
                let id = run
                    .and_then(|run| RunId::new(run).ok())
                    .map_or_else(|| "?".to_owned(), String::from);
                tracing::error!(
                    row = rowid,
                    run = id,
                    problem,
                    "an interrupted run cannot be read: it stays interrupted and is not closed"
                );
            }
        }
    }
    tx.commit().map_err(fail)?;
    Ok(out)
}

/// A TEXT column's value (`None` for NULL), or `Err` for a value of another type: the tables are
/// not STRICT, so a damaged row can hold one.
fn text(value: SqlValue) -> Result<Option<String>, ()> {
    match value {
        SqlValue::Null => Ok(None),
        SqlValue::Text(text) => Ok(Some(text)),
        _ => Err(()),
    }
}

/// One interrupted run with its dangling calls, or (inner `Err`) what makes it unreadable.
fn interrupted_run(
    tx: &Transaction<'_>,
    run: &str,
    thread: Option<String>,
) -> rusqlite::Result<Result<InterruptedRun, &'static str>> {
    let Ok(run_id) = RunId::new(run.to_owned()) else {
        return Ok(Err("its id is not a valid run id"));
    };
    let Ok(thread_id) = thread.map(ThreadId::new).transpose() else {
        return Ok(Err("its thread id is not a valid thread id"));
    };
    // Every call event in log order, a start with its row: starts and results are paired by
    // order, not by id alone (`unanswered_starts`), and only the unanswered starts' JSON is read
    // then, so a long run's answered calls are never held in memory. An id that is not text (a
    // damaged row) pairs with nothing, so such a start is named, and refused below.
    let events: Vec<(bool, SqlValue, i64)> = {
        let mut stmt = tx.prepare_cached(
            "SELECT kind = 'tool_call_start', tool_call_id, rowid \
             FROM run_events WHERE run_id = ?1 \
             AND kind IN ('tool_call_start', 'tool_call_result') ORDER BY seq",
        )?;
        let rows = stmt.query_map([run], |r| Ok((r.get(0)?, any_value(r, 1)?, r.get(2)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    let starts =
        crate::stored::unanswered_starts(events.into_iter().filter_map(|(is_start, call, row)| {
            let id = text(call).ok().flatten();
            match is_start {
                true => Some(CallEvent::Start(id.clone(), (id, row))),
                false => id.map(|id| CallEvent::Result(Some(id))),
            }
        }));
    let mut read_start = tx.prepare_cached("SELECT event_json FROM run_events WHERE rowid = ?1")?;
    let mut dangling: Vec<DanglingToolCall> = Vec::with_capacity(starts.len());
    for (call, row) in starts {
        let Some(Ok(tool_call_id)) = call.map(ToolCallId::new) else {
            return Ok(Err("a tool call start event has no valid tool call id"));
        };
        let json = read_start.query_row([row], |r| any_value(r, 0))?;
        let Ok(Some(json)) = text(json) else {
            return Ok(Err("a tool call start event is not of its column's type"));
        };
        let start = serde_json::from_str::<Value>(&json).ok();
        let tool_name = start.as_ref().and_then(|v| {
            v.get("tool_name")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        let Some(tool_name) = tool_name else {
            return Ok(Err("a tool call start event has no tool name"));
        };
        // A start without arguments leaves `args` out; one with them, `null` included, has it.
        let never_ran = start.as_ref().is_some_and(|v| v.get("args").is_none());
        dangling.push(DanglingToolCall {
            tool_call_id,
            tool_name,
            never_ran,
        });
    }
    Ok(Ok(InterruptedRun {
        run_id,
        thread_id,
        dangling,
    }))
}

/// Every run whose header decodes (only the `running` ones when `running_only` is set, read
/// through the status index), oldest first, with its event count when `count` is set (0
/// otherwise); a header that does not decode is logged and left out.
fn list_tx(
    conn: &mut Connection,
    count: bool,
    running_only: bool,
) -> Result<Vec<RunSummary>, RunStoreError> {
    let fail = |e: rusqlite::Error| backend("cannot list runs", e);
    let counted = if count {
        "(SELECT COUNT(*) FROM run_events e WHERE e.run_id = runs.run_id)"
    } else {
        "0"
    };
    let only = if running_only {
        "WHERE status = 'running'"
    } else {
        ""
    };
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {HEADER_COLUMNS}, {counted} FROM runs {only} ORDER BY started_at_ms, run_id"
        ))
        .map_err(fail)?;
    let rows = stmt
        .query_map([], |row| Ok((header_from_row(row)?, row.get::<_, i64>(7)?)))
        .map_err(fail)?;
    let mut summaries = Vec::new();
    for row in rows {
        let (raw, events) = row.map_err(fail)?;
        match raw.decode() {
            // A count is never negative.
            Ok(header) => summaries.push(RunSummary {
                header,
                event_count: u64::try_from(events).unwrap_or(0),
            }),
            Err(bad) => {
                let run = bad.run_id.as_ref().map_or("?", RunId::as_str);
                tracing::error!(
                    row = bad.row,
                    run,
                    problem = %bad.problem,
                    "a run's row cannot be read: it is left out of the list of runs"
                );
            }
        }
    }
    Ok(summaries)
}

#[async_trait]
impl RunStore for SqliteStore {
    async fn begin_run(
        &self,
        run_id: &RunId,
        thread_id: Option<&ThreadId>,
        at_ms: u64,
        input_ref: Option<&str>,
    ) -> Result<(), RunStoreError> {
        if let Some(input_ref) = input_ref {
            crate::blob::check_run_ref(run_id, "the input ref", input_ref)?;
        }
        let (run_id, thread_id, at) =
            (run_id.clone(), thread_id.cloned(), ms("start time", at_ms)?);
        let input_ref = input_ref.map(str::to_owned);
        self.with_conn(move |conn| {
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO runs (run_id, thread_id, status, started_at_ms, input_ref) \
                     VALUES (?1, ?2, 'running', ?3, ?4) ON CONFLICT (run_id) DO NOTHING",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        run_id.as_str(),
                        thread_id.as_ref().map(ThreadId::as_str),
                        at,
                        input_ref.as_deref()
                    ])
                })
                .map_err(|e| backend(format_args!("cannot begin run {run_id}"), e))?;
            if inserted == 0 {
                return Err(RunStoreError::AlreadyExists(run_id));
            }
            Ok(())
        })
        .await
    }

    async fn commit_step(
        &self,
        run_id: &RunId,
        step: RunStep,
    ) -> Result<Range<u64>, RunStoreError> {
        let prepared = prepare_step(run_id, step)?;
        let run_id = run_id.clone();
        self.with_conn(move |conn| commit_step_tx(conn, &run_id, prepared))
            .await
    }

    async fn finish_run(&self, run_id: &RunId, at_ms: u64) -> Result<(), RunStoreError> {
        let (run_id, at) = (run_id.clone(), ms("finish time", at_ms)?);
        self.with_conn(move |conn| {
            let fail = |e: rusqlite::Error| backend(format_args!("cannot finish run {run_id}"), e);
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(fail)?;
            let (status, ..) = run_row(&tx, &run_id)?;
            if status != RunStatus::Running {
                return Err(RunStoreError::WrongStatus {
                    run_id: run_id.clone(),
                    status,
                    action: "finish_run",
                    expected: "running",
                });
            }
            tx.execute(
                "UPDATE runs SET status = 'finished', finished_at_ms = ?2 WHERE run_id = ?1",
                params![run_id.as_str(), at],
            )
            .map_err(fail)?;
            tx.commit().map_err(fail)
        })
        .await
    }

    /// Every run whose row decodes, oldest first. A row that does not (a bad id, thread id,
    /// status or time) is left out and logged by its row and what is wrong, never what it holds,
    /// as [`RunStore::recover_interrupted`] does with a run it cannot read: one bad row never
    /// hides the others from `cogni runs list` or from recovery, which lists runs first.
    async fn list_runs(&self) -> Result<Vec<RunHeader>, RunStoreError> {
        let listed = self.with_conn(|conn| list_tx(conn, false, false)).await?;
        Ok(listed.into_iter().map(|summary| summary.header).collect())
    }

    /// As [`RunStore::list_runs`], each run with its event count: one `COUNT(*)` per run over
    /// the event table's primary key index, in the same query, so no event row is read.
    async fn list_run_summaries(&self) -> Result<Vec<RunSummary>, RunStoreError> {
        self.with_conn(|conn| list_tx(conn, true, false)).await
    }

    /// As [`RunStore::list_runs`], the `running` runs only, found through the status index: the
    /// rows of finished and interrupted runs are not read.
    async fn list_running_runs(&self) -> Result<Vec<RunHeader>, RunStoreError> {
        let listed = self.with_conn(|conn| list_tx(conn, false, true)).await?;
        Ok(listed.into_iter().map(|summary| summary.header).collect())
    }

    async fn load_run(&self, run_id: &RunId) -> Result<RunLog, RunStoreError> {
        let run_id = run_id.clone();
        self.with_conn(move |conn| load_run_tx(conn, &run_id)).await
    }

    async fn recover_interrupted(
        &self,
        at_ms: u64,
        runs: &[RunId],
    ) -> Result<Vec<InterruptedRun>, RunStoreError> {
        let at = ms("recovery time", at_ms)?;
        let runs = runs.to_vec();
        self.with_conn(move |conn| recover_tx(conn, at, &runs))
            .await
    }
}

#[async_trait]
impl ThreadStore for SqliteStore {
    async fn load(&self, id: &ThreadId) -> Result<Option<Value>, ThreadStoreError> {
        let id = id.clone();
        let found = self
            .with_conn(move |conn| saved_thread(conn, id.as_str()))
            .await;
        found.map_err(|e| ThreadStoreError::Failed(e.to_string()))
    }

    async fn save(
        &self,
        id: &ThreadId,
        previous: Option<&Value>,
        state: &Value,
    ) -> Result<(), ThreadStoreError> {
        crate::stored::check_thread_state(id, state)?;
        let (id, previous, state) = (id.clone(), previous.cloned(), state.to_string());
        let saved = self
            .with_conn(move |conn| save_thread_over(conn, id.as_str(), previous.as_ref(), &state))
            .await
            .map_err(|e| ThreadStoreError::Failed(e.to_string()))?;
        if saved {
            Ok(())
        } else {
            Err(ThreadStoreError::Changed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What SQLite is given is never a URI: a relative path gets `./`, others are as they were.
    #[test]
    fn sqlite_is_given_file_names_only() {
        for (path, given) in [
            (
                "file:data?mode=ro#x/cogni.db",
                "./file:data?mode=ro#x/cogni.db",
            ),
            ("data/cogni.db", "./data/cogni.db"),
            (":memory:", "./:memory:"),
            ("./file:x/cogni.db", "./file:x/cogni.db"),
            ("../file:x/cogni.db", "../file:x/cogni.db"),
            ("/srv/file:x/cogni.db", "/srv/file:x/cogni.db"),
        ] {
            assert_eq!(file_name(Path::new(path)), Path::new(given), "{path}");
        }
    }

    /// The virtual machine steps SQLite takes to find the runs a recovery has to close, in a
    /// store holding `closed` interrupted runs already closed and one open one.
    fn recovery_steps(closed: usize) -> i32 {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let mut conn = store.conn.lock().unwrap();
        let done = AiEvent::Done {
            reason: ai_core::DoneReason::Error,
        };
        let mut runs = Vec::new();
        for i in 0..=closed {
            let run = RunId::new(format!("run-{i}")).unwrap();
            conn.execute(
                "INSERT INTO runs (run_id, status, started_at_ms) VALUES (?1, 'running', ?2)",
                params![run.as_str(), i as i64],
            )
            .unwrap();
            runs.push(run);
        }
        recover_tx(&mut conn, 1_000, &runs).unwrap();
        // Every run but the last is closed, as recovery closes one: a step ending with `Done`.
        for run in &runs[..closed] {
            let step = RunStep {
                events: vec![done.clone()],
                ..RunStep::default()
            };
            commit_step_tx(&mut conn, run, prepare_step(run, step).unwrap()).unwrap();
        }
        let mut stmt = conn.prepare(RUNS_TO_CLOSE).unwrap();
        let found: Vec<String> = stmt
            .query_map([], |r| r.get(1))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(found, [format!("run-{closed}")]);
        assert_eq!(
            stmt.get_status(rusqlite::StatementStatus::FullscanStep),
            0,
            "the recovery query scans a table"
        );
        stmt.get_status(rusqlite::StatementStatus::VmStep)
    }

    /// Finding the runs to close touches the open ones only: the same work with 2 or 40 runs
    /// closed before (the query once looked through the events of every interrupted run ever
    /// recorded, at every `cogni serve` start and `cogni chat` turn).
    #[test]
    fn recovery_does_not_read_the_runs_it_closed_before() {
        assert_eq!(recovery_steps(2), recovery_steps(40));
    }

    /// Recovery reads the JSON of the unanswered starts only: an answered start's arguments,
    /// longer here than the connection lets SQLite hand back, are never read (recovery once read
    /// every start of the run to pair them, holding all their arguments at once).
    #[tokio::test]
    async fn recovery_reads_only_the_starts_no_result_answers() {
        const LIMIT: i32 = 10_000;
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let run = RunId::new("r").unwrap();
        let start = |id: &str, args: Value| AiEvent::ToolCallStart {
            tool_call_id: ToolCallId::new(id).unwrap(),
            tool_name: "core__write_file".into(),
            args: Some(Arc::new(args)),
        };
        let answered = ToolCallId::new("big").unwrap();
        let events = vec![
            start(
                "big",
                serde_json::json!({ "text": "x".repeat(2 * LIMIT as usize) }),
            ),
            AiEvent::ToolCallResult {
                tool_call_id: answered,
                tool_name: "core__write_file".into(),
                outcome: ai_core::ToolOutcome::Ok {
                    value: Arc::new(Value::Null),
                },
            },
            start("open", serde_json::json!({ "text": "small" })),
        ];
        store.begin_run(&run, None, 1, None).await.unwrap();
        let step = RunStep {
            events,
            ..RunStep::default()
        };
        store.commit_step(&run, step).await.unwrap();
        lock_connection(&store.conn)
            .set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, LIMIT)
            .unwrap();
        let recovered = store
            .recover_interrupted(2, std::slice::from_ref(&run))
            .await
            .unwrap();
        assert_eq!(
            recovered,
            [InterruptedRun {
                run_id: run,
                thread_id: None,
                dangling: vec![DanglingToolCall {
                    tool_call_id: ToolCallId::new("open").unwrap(),
                    tool_name: "core__write_file".into(),
                    never_ran: false,
                }],
            }]
        );
    }

    /// A call that panics while it holds the connection, inside a transaction it began, leaves
    /// the store working: the next call rolls the transaction back and goes on, rather than
    /// every later call failing on a poisoned lock until the process restarts.
    #[tokio::test]
    async fn a_call_that_panicked_holding_the_connection_leaves_the_store_working() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let panicked = store
            .with_conn(|conn| -> Result<(), RunStoreError> {
                conn.execute_batch(
                    "BEGIN IMMEDIATE; \
                     INSERT INTO threads (thread_id, state_json) VALUES ('t-1', '1');",
                )
                .unwrap();
                panic!("a call panics mid-transaction");
            })
            .await;
        assert!(panicked.is_err());
        let thread = ThreadId::new("t-1").unwrap();
        assert_eq!(store.load(&thread).await.unwrap(), None, "the write stayed");
        store.save(&thread, None, &Value::from(2)).await.unwrap();
        assert_eq!(store.load(&thread).await.unwrap(), Some(Value::from(2)));
    }

    /// A call that panics while it holds a statement mid-step leaves no stale snapshot behind:
    /// the connection is taken back once, its statements ended with its transaction, so the
    /// next call reads what another connection committed since and can write. (A statement is
    /// reset as its rows are dropped while unwinding; one that leaked, as here, was kept in the
    /// statement cache mid-step, holding the read it began: every later write on the connection
    /// failed as "database is locked", while the lock, still poisoned, took the connection back
    /// again at every call.)
    #[tokio::test]
    async fn a_call_that_panicked_mid_step_leaves_no_stale_read_behind() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let thread = ThreadId::new("t-1").unwrap();
        store.save(&thread, None, &Value::from(1)).await.unwrap();
        let panicked = store
            .with_conn(|conn| -> Result<(), RunStoreError> {
                let mut stmt = conn
                    .prepare_cached("SELECT thread_id FROM threads")
                    .unwrap();
                let mut rows = stmt.query([]).unwrap();
                rows.next().unwrap();
                std::mem::forget(rows);
                panic!("a call panics mid-step");
            })
            .await;
        assert!(panicked.is_err());
        // Another connection to the same database commits meanwhile.
        let other = SqliteStore::open(dir.path()).unwrap();
        other
            .save(&thread, Some(&Value::from(1)), &Value::from(2))
            .await
            .unwrap();
        assert_eq!(store.load(&thread).await.unwrap(), Some(Value::from(2)));
        store
            .save(&thread, Some(&Value::from(2)), &Value::from(3))
            .await
            .unwrap();
        assert_eq!(other.load(&thread).await.unwrap(), Some(Value::from(3)));
        assert!(
            !store.conn.is_poisoned(),
            "the connection is taken back at every call"
        );
    }

    /// A `cogni.db` that SQLite can open only for reading (as it does a write-protected file in
    /// a writable folder) is refused at open, naming the file and why, rather than opened for a
    /// server whose every write would fail. (Opened with `SQLITE_OPEN_READ_ONLY` here: a file's
    /// mode does not stop a test run as root.)
    #[test]
    fn a_database_sqlite_opens_read_only_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        drop(SqliteStore::open(dir.path()).unwrap());
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let error = SqliteStore::open_with(dir.path(), flags).unwrap_err();
        assert_eq!(
            error.to_string(),
            RunStoreError::Backend(format!(
                "cannot open {} for writing: the file is read-only (the store writes it and its \
                 -wal and -shm files: make it writable, or choose another data_dir)",
                dir.path().join(DB_FILE).display()
            ))
            .to_string()
        );
    }
}

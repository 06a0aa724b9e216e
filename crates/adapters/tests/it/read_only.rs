//! `SqliteStore::open_read_only` and the blob stores' read-only opens: nothing is created,
//! migrated or written, whatever the schema version found.

use std::path::Path;

use adapters::{SCHEMA_VERSION, SqliteStore, TieredBlobStore};
use ai_core::{BlobStore, BlobStoreError, RunStore, RunStoreError, ThreadId};

use crate::support::run;

/// The database's schema version and whether it has the `blobs` table, read by SQLite itself.
fn schema(db: &Path) -> (u32, bool) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    let blobs: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'blobs'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    (version, blobs == 1)
}

#[tokio::test]
async fn a_missing_database_is_refused_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let error = SqliteStore::open_read_only(dir.path()).unwrap_err();
    let db = dir.path().join("cogni.db");
    assert!(
        matches!(&error, RunStoreError::Backend(m) if m.contains(&db.display().to_string())),
        "{error}"
    );
    assert!(!db.exists());
}

/// A database at schema version 1 (before blob rows), as an older cogni left it: read whole,
/// and left at version 1 without the `blobs` table.
#[tokio::test]
async fn an_older_schema_is_read_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cogni.db");
    let store = SqliteStore::open(dir.path()).unwrap();
    let (r, t) = (run("run-old"), ThreadId::new("t").unwrap());
    store.begin_run(&r, Some(&t), 1, None).await.unwrap();
    drop(store);
    let file = adapters::FsBlobStore::open(dir.path())
        .unwrap()
        .put(b"a file blob")
        .await
        .unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("DROP TABLE blobs; PRAGMA user_version = 1;")
        .unwrap();
    assert_eq!(schema(&db), (1, false));

    let reader = SqliteStore::open_read_only(dir.path()).unwrap();
    let headers = reader.list_runs().await.unwrap();
    assert_eq!(headers.len(), 1);
    assert_eq!(reader.load_run(&r).await.unwrap().header.run_id, r);
    let blobs = TieredBlobStore::open_read_only(
        &reader,
        dir.path(),
        TieredBlobStore::DEFAULT_MAX_ROW_BYTES,
    )
    .unwrap();
    assert_eq!(blobs.get(&file).await.unwrap(), b"a file blob");
    let absent = ai_core::sha256_hex(b"absent");
    assert!(matches!(
        blobs.get(&absent).await,
        Err(BlobStoreError::NotFound(_))
    ));
    // Writes are refused, and name why.
    let refused = reader
        .begin_run(&run("run-new"), None, 2, None)
        .await
        .unwrap_err();
    assert!(matches!(refused, RunStoreError::Backend(_)), "{refused}");
    assert!(blobs.put(b"new").await.is_err());
    drop((reader, blobs));
    assert_eq!(schema(&db), (1, false), "the reader changed the schema");
}

#[tokio::test]
async fn a_version_this_build_cannot_read_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cogni.db");
    // Not a cogni store: an empty file is a database at version 0.
    std::fs::write(&db, b"").unwrap();
    let error = SqliteStore::open_read_only(dir.path()).unwrap_err();
    assert!(
        matches!(&error, RunStoreError::Corrupt(m) if m.contains("schema version 0")),
        "{error}"
    );
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0);
    std::fs::remove_file(&db).unwrap();

    drop(SqliteStore::open(dir.path()).unwrap());
    let newer = SCHEMA_VERSION + 1;
    rusqlite::Connection::open(&db)
        .unwrap()
        .pragma_update(None, "user_version", newer)
        .unwrap();
    let error = SqliteStore::open_read_only(dir.path()).unwrap_err();
    assert_eq!(
        error,
        RunStoreError::NewerSchema {
            found: newer,
            supported: SCHEMA_VERSION
        }
    );
    assert_eq!(schema(&db).0, newer);
}

/// A database path that reads as an SQLite URI is a file name all the same: a read-only blob
/// store given `file:<an existing database>` looks for that relative file, which is not there,
/// instead of opening the database the URI names.
#[test]
fn a_path_named_like_an_sqlite_uri_is_a_file_name() {
    let dir = tempfile::tempdir().unwrap();
    drop(SqliteStore::open(dir.path()).unwrap());
    let db = dir.path().join("cogni.db");
    let uri = format!("file:{}", db.display());
    assert!(!Path::new(&uri).exists());
    let Err(error) = adapters::SqliteBlobStore::open_read_only(Path::new(&uri)) else {
        panic!("the URI was opened");
    };
    assert!(matches!(error, BlobStoreError::Backend(_)), "{error}");
}

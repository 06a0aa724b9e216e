//! Bad input: a missing blob, a corrupt blob, a database from a newer schema, a file that is not
//! a database, a read-only data directory. Each is a clear error and nothing stored changes.

use adapters::{FsBlobStore, SCHEMA_VERSION, SqliteStore};
use ai_core::{
    BlobStore, BlobStoreError, ModelReceipt, ReceiptError, RunStep, RunStore, RunStoreError,
    sha256_hex,
};

use crate::support::{done, record, run, snapshot, start};

#[tokio::test]
async fn a_missing_blob_is_not_found_by_its_address() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    store.put(b"something else").await.unwrap();
    let before = snapshot(dir.path());
    let missing = sha256_hex(b"never stored");
    let err = store.get(&missing).await.unwrap_err();
    assert_eq!(err, BlobStoreError::NotFound(missing.clone()));
    assert_eq!(err.to_string(), format!("blob {missing} not found"));
    // Through a receipt, the same error comes out.
    assert_eq!(
        ModelReceipt::load(&store, &missing).await,
        Err(ReceiptError::Blob(BlobStoreError::NotFound(missing)))
    );
    assert_eq!(snapshot(dir.path()), before);
}

#[tokio::test]
async fn a_corrupt_blob_is_reported_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    let hash = store.put(br#"{"provider":"p"}"#).await.unwrap();
    let path = store.path_of(&hash).unwrap();
    // One flipped byte.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[3] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let before = snapshot(dir.path());
    let err = store.get(&hash).await.unwrap_err();
    assert_eq!(err, BlobStoreError::Corrupt(hash.clone()));
    assert!(err.to_string().contains("do not match its hash"), "{err}");
    assert_eq!(snapshot(dir.path()), before);
    // A truncated blob too.
    std::fs::write(&path, b"").unwrap();
    assert_eq!(store.get(&hash).await, Err(BlobStoreError::Corrupt(hash)));
}

#[tokio::test]
async fn a_blob_that_is_not_a_receipt_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    let hash = store.put(b"[1,2,3]").await.unwrap();
    let err = ModelReceipt::load(&store, &hash).await.unwrap_err();
    assert!(
        matches!(
            err,
            ReceiptError::Decode {
                what: "model receipt",
                ..
            }
        ),
        "{err:?}"
    );
}

fn set_user_version(path: &std::path::Path, version: u32) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.pragma_update(None, "user_version", version).unwrap();
    // Closing the last connection checkpoints the WAL into the main file.
}

#[tokio::test]
async fn a_database_from_a_newer_schema_is_refused_and_not_modified() {
    let dir = tempfile::tempdir().unwrap();
    let db = {
        let store = SqliteStore::open(dir.path()).unwrap();
        store.begin_run(&run("kept"), None, 1, None).await.unwrap();
        store.path().to_path_buf()
    };
    let newer = SCHEMA_VERSION + 1;
    set_user_version(&db, newer);
    let before = std::fs::read(&db).unwrap();
    let err = SqliteStore::open(dir.path()).unwrap_err();
    assert_eq!(
        err,
        RunStoreError::NewerSchema {
            found: newer,
            supported: SCHEMA_VERSION
        }
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!("schema version is {newer}")),
        "{message}"
    );
    assert!(message.contains("not modified"), "{message}");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database file changed"
    );
    // Its contents are intact: after a downgrade of the marker, the run is still there.
    set_user_version(&db, SCHEMA_VERSION);
    let store = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(store.list_runs().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused_and_not_modified() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(adapters::DB_FILE);
    let garbage = b"this is not a SQLite database, but it is somebody's file\n".repeat(100);
    std::fs::write(&db, &garbage).unwrap();
    let err = SqliteStore::open(dir.path()).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("cogni.db"), "{message}");
    assert!(message.contains("not a database"), "{message}");
    assert_eq!(std::fs::read(&db).unwrap(), garbage);
}

/// A SQLite database that is not a cogni store (schema version 0, holding tables of its own) is
/// refused, naming it, and left byte for byte as it was: neither switched to WAL nor given
/// cogni's tables beside its own.
#[tokio::test]
async fn a_database_that_is_not_a_cogni_store_is_refused_and_not_modified() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(adapters::DB_FILE);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine');")
        .unwrap();
    let before = std::fs::read(&db).unwrap();
    let err = SqliteStore::open(dir.path()).unwrap_err();
    assert_eq!(
        err,
        RunStoreError::Corrupt(format!(
            "{} has schema version 0 but is not empty: it is not a cogni store (it was left as \
             it is)",
            db.display()
        ))
    );
    assert_eq!(std::fs::read(&db).unwrap(), before, "the database changed");
}

/// An empty database that holds only SQLite's own tables (another tool switched it to WAL and
/// ran `ANALYZE`, which creates `sqlite_stat1`) holds nothing of another program's: it opens as
/// a new store and takes a run.
#[tokio::test]
async fn an_empty_database_holding_only_sqlites_own_tables_opens_as_a_new_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(adapters::DB_FILE);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA journal_mode = WAL; ANALYZE;")
        .unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let r = run("first");
    store.begin_run(&r, None, 1, None).await.unwrap();
    assert!(store.load_run(&r).await.unwrap().events.is_empty());
}

/// A migration that fails (here: a store at version 1 already holding version 2's table, as a
/// hand-lowered version leaves it) is an error naming the migration, the file, the version it
/// stays at and SQLite's reason, not one quoting the whole migration's SQL.
#[tokio::test]
async fn a_failed_migration_names_itself_without_quoting_its_sql() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteStore::open(dir.path()).unwrap().path().to_path_buf();
    set_user_version(&db, 1);
    let err = SqliteStore::open(dir.path()).unwrap_err();
    assert_eq!(
        err,
        RunStoreError::Backend(format!(
            "migration 2 of {} failed (it stays at version 1): table blobs already exists",
            db.display()
        ))
    );
}

#[tokio::test]
async fn a_data_dir_that_is_a_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data");
    std::fs::write(&file, b"x").unwrap();
    let err = SqliteStore::open(&file).unwrap_err();
    assert!(
        err.to_string().ends_with(&format!(
            "cannot create the data directory {}: something that is not a folder is there",
            file.display()
        )),
        "{err}"
    );
    let err = FsBlobStore::open(&file).unwrap_err();
    assert!(err.to_string().contains("cannot create"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

#[cfg(unix)]
#[tokio::test]
async fn a_read_only_data_dir_refuses_writes_and_keeps_what_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let blobs = FsBlobStore::open(&data).unwrap();
    let kept = blobs.put(b"kept").await.unwrap();
    let db = {
        let store = SqliteStore::open(&data).unwrap();
        store.begin_run(&run("kept"), None, 1, None).await.unwrap();
        store
            .commit_step(
                &run("kept"),
                RunStep {
                    events: vec![done()],
                    ..RunStep::default()
                },
            )
            .await
            .unwrap();
        store.path().to_path_buf()
    };
    let blob_dir = blobs
        .path_of(&kept)
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let before = snapshot(&data);
    let blob_root = blobs.root().to_path_buf();
    // Every folder and file of the data directory becomes read-only.
    let read_only = [blob_dir.as_path(), blob_root.as_path()];
    if !crate::support::make_read_only(&data, &[db.as_path()]) {
        return;
    }
    for d in read_only {
        crate::support::make_read_only(d, &[]);
    }

    let blob_err = blobs.put(b"new").await.unwrap_err();
    let store_err = SqliteStore::open(&data).map(|_| ()).unwrap_err();
    // What is there can still be read.
    let read_back = blobs.get(&kept).await;

    for d in read_only {
        crate::support::restore_writable(d, &[]);
    }
    crate::support::restore_writable(&data, &[db.as_path()]);

    assert!(
        matches!(&blob_err, BlobStoreError::Backend(m) if m.contains("Permission denied")),
        "{blob_err:?}"
    );
    let message = store_err.to_string();
    println!("read-only data dir: blob put: {blob_err}\nread-only data dir: store open: {message}");
    assert!(message.contains(&data.display().to_string()), "{message}");
    assert_eq!(read_back.as_deref(), Ok(&b"kept"[..]));
    assert_eq!(snapshot(&data), before, "something stored changed");
    let store = SqliteStore::open(&data).unwrap();
    assert_eq!(
        store.load_run(&run("kept")).await.unwrap().events,
        vec![done()]
    );
}

#[tokio::test]
async fn a_receipt_of_the_wrong_shape_is_named_without_quoting_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    let hash = store
        .put(br#"{"usage": "CANARY-MODEL-OUTPUT", "provider": "p"}"#)
        .await
        .unwrap();
    let err = ModelReceipt::load(&store, &hash).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "model receipt does not decode: a value of the wrong type (a string; expected an \
         object) at line 1 column 31"
    );
}

/// A negative schema version (a hand-edited `user_version`) is refused naming the database file,
/// by the store and by a reader, and the file is left as it is.
#[tokio::test]
async fn a_negative_schema_version_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteStore::open(dir.path()).unwrap().path().to_path_buf();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", -3).unwrap();
    drop(conn);
    let before = std::fs::read(&db).unwrap();
    for err in [
        SqliteStore::open(dir.path()).unwrap_err(),
        SqliteStore::open_read_only(dir.path()).unwrap_err(),
    ] {
        assert!(matches!(err, RunStoreError::Corrupt(_)), "{err:?}");
        let message = err.to_string();
        assert!(message.contains(&db.display().to_string()), "{message}");
        assert!(message.contains("schema version -3"), "{message}");
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

/// Event, record and receipt numbers hand-edited up to `i64::MAX` make the next step a clear
/// error naming the run and which numbers ran out, not an overflow, and the store goes on
/// working for other runs.
#[tokio::test]
async fn numbers_at_their_largest_refuse_the_next_step_naming_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let step = |events| RunStep {
        events,
        records: vec![crate::support::record("c1", "raw")],
        receipt_refs: vec![sha256_hex(b"receipt")],
        ..RunStep::default()
    };
    let (table, column, what) = ("run_events", "seq", "event");
    for (n, (table, column, what)) in [
        (table, column, what),
        ("tool_records", "idx", "record"),
        ("model_receipts", "idx", "receipt"),
    ]
    .into_iter()
    .enumerate()
    {
        for (largest, events) in [(i64::MAX, 1), (i64::MAX - 1, 2)] {
            let r = run(&format!("run-{n}-{events}"));
            store.begin_run(&r, None, 1, None).await.unwrap();
            store
                .commit_step(&r, step(vec![start("c1")]))
                .await
                .unwrap();
            let conn = rusqlite::Connection::open(store.path()).unwrap();
            let edited = conn
                .execute(
                    &format!("UPDATE {table} SET {column} = ?1 WHERE run_id = ?2"),
                    rusqlite::params![largest, r.as_str()],
                )
                .unwrap();
            assert_eq!(edited, 1);
            drop(conn);
            let err = store
                .commit_step(&r, step(vec![start("c2"); events]))
                .await
                .unwrap_err();
            assert!(matches!(err, RunStoreError::Corrupt(_)), "{err:?}");
            let message = err.to_string();
            assert!(message.contains(r.as_str()), "{message}");
            assert!(message.contains(&format!("{what} numbers")), "{message}");
        }
    }
    let fine = run("fine");
    store.begin_run(&fine, None, 1, None).await.unwrap();
    assert_eq!(
        store.commit_step(&fine, step(vec![done()])).await.unwrap(),
        0..1
    );
}

/// One step of a new run `name` committed, its event numbers hand-edited to `seq`, then the next
/// step tried: the run and that step's error.
async fn next_step_after_editing_seq(
    store: &SqliteStore,
    name: &str,
    seq: rusqlite::types::Value,
) -> (ai_core::RunId, RunStoreError) {
    let step = || RunStep {
        events: vec![start("c1")],
        ..RunStep::default()
    };
    let r = run(name);
    store.begin_run(&r, None, 1, None).await.unwrap();
    store.commit_step(&r, step()).await.unwrap();
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute(
        "UPDATE run_events SET seq = ?1 WHERE run_id = ?2",
        rusqlite::params![seq, r.as_str()],
    )
    .unwrap();
    drop(conn);
    let err = store.commit_step(&r, step()).await.unwrap_err();
    assert!(matches!(err, RunStoreError::Corrupt(_)), "{err:?}");
    assert!(err.to_string().contains(r.as_str()), "{err}");
    (r, err)
}

/// A run whose stored event numbers skip one (an event row deleted by hand) is refused on load
/// as corrupt, naming the run and the missing number, rather than loaded with the event at
/// index `i` numbered otherwise than `i`: a replay would compare, and a listing show, a log
/// with a hole in it as if whole.
#[tokio::test]
async fn a_run_whose_event_numbers_skip_one_is_refused_naming_the_missing_number() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let r = run("holed");
    store.begin_run(&r, None, 1, None).await.unwrap();
    let step = RunStep {
        events: vec![start("a"), start("b"), start("c")],
        ..RunStep::default()
    };
    store.commit_step(&r, step).await.unwrap();
    rusqlite::Connection::open(store.path())
        .unwrap()
        .execute("DELETE FROM run_events WHERE seq = 1", [])
        .unwrap();
    assert_eq!(
        store.load_run(&r).await.unwrap_err(),
        RunStoreError::Corrupt(
            "run holed: the run log is damaged: its event 1 is missing (the next one stored is \
             number 2)"
                .into()
        )
    );
}

/// So is a run whose tool record or model receipt numbers skip one: its records and receipts
/// are every one it stored, in order, or a replay would answer a call from another's record, or
/// check a model call against the next call's receipt, and report a difference the run never
/// had.
#[tokio::test]
async fn a_run_whose_record_or_receipt_numbers_skip_one_is_refused_naming_the_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    for (table, what) in [
        ("tool_records", "tool record"),
        ("model_receipts", "model receipt"),
    ] {
        let r = run(table);
        store.begin_run(&r, None, 1, None).await.unwrap();
        let step = RunStep {
            events: vec![start("a"), start("b"), start("c")],
            records: ["a", "b", "c"].map(|id| record(id, "raw")).to_vec(),
            receipt_refs: [b"a", b"b", b"c"].map(|bytes| sha256_hex(bytes)).to_vec(),
            ..RunStep::default()
        };
        store.commit_step(&r, step).await.unwrap();
        rusqlite::Connection::open(store.path())
            .unwrap()
            .execute(&format!("DELETE FROM {table} WHERE idx = 1"), [])
            .unwrap();
        assert_eq!(
            store.load_run(&r).await.unwrap_err(),
            RunStoreError::Corrupt(format!(
                "run {table}: the run log is damaged: its {what} 1 is missing (the next one \
                 stored is number 2)"
            ))
        );
    }
}

/// A run whose event, tool record or model receipt number was hand-edited to something other than
/// a 64-bit integer (the table is not STRICT: text, a fraction, a whole number past `i64`'s
/// range, kept as a float) is refused on load as damaged, naming the run and the row, as the
/// next step refuses it: not as a backend failure, which it is not.
#[tokio::test]
async fn a_run_whose_numbers_are_not_integers_is_refused_on_load_as_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let tables = [
        ("run_events", "seq", "event"),
        ("tool_records", "idx", "tool record"),
        ("model_receipts", "idx", "model receipt"),
    ];
    for (table, column, what) in tables {
        for (n, number) in [
            rusqlite::types::Value::Real(1.5),
            rusqlite::types::Value::Real(1e19),
        ]
        .into_iter()
        .enumerate()
        {
            let r = run(&format!("{table}-{n}"));
            store.begin_run(&r, None, 1, None).await.unwrap();
            let step = RunStep {
                events: vec![start("a"), start("b")],
                records: ["a", "b"].map(|id| record(id, "raw")).to_vec(),
                receipt_refs: [b"a", b"b"].map(|bytes| sha256_hex(bytes)).to_vec(),
                ..RunStep::default()
            };
            store.commit_step(&r, step).await.unwrap();
            rusqlite::Connection::open(store.path())
                .unwrap()
                .execute(
                    &format!("UPDATE {table} SET {column} = ?1 WHERE run_id = ?2 AND {column} = 1"),
                    rusqlite::params![number, r.as_str()],
                )
                .unwrap();
            assert_eq!(
                store.load_run(&r).await.unwrap_err(),
                RunStoreError::Corrupt(format!(
                    "run {r}: the run log is damaged: its {what} 1 is stored under a number that \
                     is not a 64-bit integer, which no store writes"
                )),
                "{table} {number:?}"
            );
        }
    }
}

/// Event numbers hand-edited below zero make the next step a clear error naming the run, not a
/// wrapped or overflowing number range (a panic on the store's connection, in a debug build),
/// and the store goes on working for other runs.
#[tokio::test]
async fn negative_event_numbers_refuse_the_next_step_naming_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    for (n, seq) in [i64::MIN, -2].into_iter().enumerate() {
        let seq = rusqlite::types::Value::Integer(seq);
        let (r, err) = next_step_after_editing_seq(&store, &format!("run-{n}"), seq).await;
        assert!(err.to_string().contains("event numbers"), "{err}");
        let summaries = store.list_run_summaries().await.unwrap();
        let edited = summaries.iter().find(|s| s.header.run_id == r).unwrap();
        assert_eq!(edited.event_count, 1, "the refused step wrote an event");
    }
    let fine = run("fine");
    store.begin_run(&fine, None, 1, None).await.unwrap();
    let step = RunStep {
        events: vec![done()],
        ..RunStep::default()
    };
    assert_eq!(store.commit_step(&fine, step).await.unwrap(), 0..1);
}

/// Event numbers hand-edited to something other than a 64-bit integer (the table is not STRICT:
/// text, a fraction or a whole number past `i64`'s range stays as it was written, the last as a
/// float) make the next step a clear error naming the run, as numbers out of range do, not a
/// backend error about a column type that names no run; and what it says is so of each (1e19
/// is a whole number).
#[tokio::test]
async fn event_numbers_that_are_not_integers_refuse_the_next_step_naming_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    for (n, seq) in [
        rusqlite::types::Value::Text("three".into()),
        rusqlite::types::Value::Real(1.5),
        rusqlite::types::Value::Real(1e19),
        rusqlite::types::Value::Real(-1e19),
    ]
    .into_iter()
    .enumerate()
    {
        let (_, err) = next_step_after_editing_seq(&store, &format!("run-{n}"), seq).await;
        let message = err.to_string();
        assert!(
            message.contains("event numbers are not all 64-bit integers"),
            "{message}"
        );
    }
}

/// Text that is not UTF-8 (a hand edit such as `CAST(X'ff' AS TEXT)`, or a damaged page) in a
/// column the store reads whatever type it holds is damage like a value of another type, named
/// as such: never a panic on the store's connection (rusqlite's own `Value` panics on such
/// text). A thread state, an event number, the ids and events of an interrupted run and a
/// blob's bytes.
#[tokio::test]
async fn text_that_is_not_utf8_is_damage_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let not_utf8 = |sql: &str, params: &[&dyn rusqlite::ToSql]| {
        rusqlite::Connection::open(store.path())
            .unwrap()
            .execute(sql, params)
            .unwrap();
    };
    let bytes: &[u8] = b"{\xff}";

    // A thread's saved state.
    not_utf8(
        "INSERT INTO threads (thread_id, state_json) VALUES ('t-1', CAST(?1 AS TEXT))",
        &[&bytes],
    );
    let thread = ai_core::ThreadId::new("t-1").unwrap();
    let err = ai_core::ThreadStore::load(&store, &thread)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the saved state of thread t-1 (threads.state_json) is not UTF-8 text"),
        "{err}"
    );

    // An event's number: refused on load and by the next step, as damage.
    let r = run("numbered");
    store.begin_run(&r, None, 1, None).await.unwrap();
    let step = || RunStep {
        events: vec![start("a")],
        ..RunStep::default()
    };
    store.commit_step(&r, step()).await.unwrap();
    not_utf8(
        "UPDATE run_events SET seq = CAST(?1 AS TEXT) WHERE run_id = 'numbered'",
        &[&bytes],
    );
    assert_eq!(
        store.load_run(&r).await.unwrap_err(),
        RunStoreError::Corrupt(
            "run numbered: the run log is damaged: its event 0 is stored under a number that is \
             not a 64-bit integer, which no store writes"
                .into()
        )
    );
    let err = store.commit_step(&r, step()).await.unwrap_err();
    assert_eq!(
        err,
        RunStoreError::Corrupt(
            "run numbered: its stored event numbers are not all 64-bit integers, which no store \
             writes"
                .into()
        )
    );

    // Interrupted runs whose id, thread id, call id or start event is such text are left out of
    // the recovery; the others are still recovered.
    let (bad_event, bad_call, good) = (run("bad-event"), run("bad-call"), run("good"));
    for r in [&bad_event, &bad_call, &good] {
        store.begin_run(r, None, 10, None).await.unwrap();
        store.commit_step(r, step()).await.unwrap();
    }
    not_utf8(
        "UPDATE run_events SET event_json = CAST(?1 AS TEXT) WHERE run_id = 'bad-event'",
        &[&bytes],
    );
    not_utf8(
        "UPDATE run_events SET tool_call_id = CAST(?1 AS TEXT) WHERE run_id = 'bad-call'",
        &[&bytes],
    );
    not_utf8(
        "INSERT INTO runs (run_id, status, started_at_ms) \
         VALUES (CAST(?1 AS TEXT), 'interrupted', 0)",
        &[&bytes],
    );
    not_utf8(
        "INSERT INTO runs (run_id, thread_id, status, started_at_ms) \
         VALUES ('bad-thread', CAST(?1 AS TEXT), 'interrupted', 0)",
        &[&bytes],
    );
    let recovered = store
        .recover_interrupted(100, &[bad_event, bad_call, good.clone()])
        .await
        .unwrap();
    let recovered: Vec<_> = recovered.into_iter().map(|run| run.run_id).collect();
    assert_eq!(recovered, [good]);

    // A blob's bytes.
    let blobs = store.blob_store().unwrap();
    let hash = blobs.put(b"{\xff}").await.unwrap();
    not_utf8(
        "UPDATE blobs SET bytes = CAST(bytes AS TEXT) WHERE hash = ?1",
        &[&hash],
    );
    assert_eq!(
        blobs.get(&hash).await,
        Err(BlobStoreError::Corrupt(hash.clone()))
    );
}

/// A run's event, tool record or model receipt stored as something other than UTF-8 text (a
/// blob, or text that is not UTF-8: a hand edit, a damaged page; the tables are not STRICT) is
/// refused on load as damaged, naming the run, the row and its column, never what it holds, as
/// JSON that does not decode is: not as a backend failure, which it is not.
#[tokio::test]
async fn a_run_whose_event_record_or_receipt_is_not_text_is_refused_on_load_as_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let columns = [
        ("run_events", "event_json", "seq", "event"),
        ("tool_records", "record_json", "idx", "record"),
        ("model_receipts", "receipt_ref", "idx", "model receipt"),
    ];
    for (table, column, number, what) in columns {
        for damage in [
            "CAST(?1 || 'x' AS BLOB)",
            "CAST(CAST(?1 AS BLOB) || X'ff' AS TEXT)",
        ] {
            let r = run(&format!("{table}-{}", damage.len()));
            store.begin_run(&r, None, 1, None).await.unwrap();
            let step = RunStep {
                events: vec![start("a"), start("b")],
                records: ["a", "b"].map(|id| record(id, "raw")).to_vec(),
                receipt_refs: [b"a", b"b"].map(|bytes| sha256_hex(bytes)).to_vec(),
                ..RunStep::default()
            };
            store.commit_step(&r, step).await.unwrap();
            let conn = rusqlite::Connection::open(store.path()).unwrap();
            // Of the right length for a receipt's check: 63 bytes and the one each damage adds.
            let bytes = "x".repeat(63);
            conn.execute(
                &format!(
                    "UPDATE {table} SET {column} = {damage} WHERE run_id = ?2 AND {number} = 1"
                ),
                rusqlite::params![bytes, r.as_str()],
            )
            .unwrap();
            assert_eq!(
                store.load_run(&r).await.unwrap_err(),
                RunStoreError::Corrupt(format!(
                    "{what} 1 of run {r} ({table}.{column}) is not UTF-8 text, which no store \
                     writes"
                )),
                "{table} {damage}"
            );
        }
    }
}

/// A run whose own row holds a value of another type where a step or the finish reads it (its
/// thread id a blob or text that is not UTF-8, its `done` mark text: the table is not STRICT) is
/// refused as damaged, naming the run and the column, never what it holds, as a status that is
/// no run status is: not as a backend failure quoting SQLite's column types, which it is not.
#[tokio::test]
async fn a_run_whose_row_holds_another_type_is_refused_as_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let damages = [
        ("thread_id = CAST('t' AS BLOB)", "thread id"),
        ("thread_id = CAST(X'ff' AS TEXT)", "thread id"),
        ("has_done = 'no'", "done mark"),
    ];
    for (n, (damage, what)) in damages.into_iter().enumerate() {
        let r = run(&format!("damaged-{n}"));
        store.begin_run(&r, None, 1, None).await.unwrap();
        rusqlite::Connection::open(store.path())
            .unwrap()
            .execute(
                &format!("UPDATE runs SET {damage} WHERE run_id = ?1"),
                [r.as_str()],
            )
            .unwrap();
        let expected = RunStoreError::Corrupt(format!(
            "run {r}: its {what} is not of its column's type, which no store writes"
        ));
        let step = RunStep {
            events: vec![start("a")],
            ..RunStep::default()
        };
        assert_eq!(
            store.commit_step(&r, step).await,
            Err(expected.clone()),
            "{damage}"
        );
        assert_eq!(store.finish_run(&r, 2).await, Err(expected), "{damage}");
    }
}

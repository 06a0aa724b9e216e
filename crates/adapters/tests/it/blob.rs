//! FsBlobStore, SqliteBlobStore and InMemoryBlobStore: addressing, idempotence, verification,
//! refusal of anything that is not an address.

use std::sync::Arc;

use adapters::{
    DB_FILE, FsBlobStore, InMemoryBlobStore, SqliteBlobStore, SqliteStore, TieredBlobStore,
};
use ai_core::{BlobStore, BlobStoreError, sha256_hex};

const BAD_ADDRESSES: &[&str] = &[
    "",
    "../../etc/passwd",
    "..",
    "ab/../../../../etc/passwd",
    "/etc/passwd",
    // 64 characters, but upper case.
    "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
    // 63 and 65 characters.
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b8555",
    // 64 characters with a non-hex one and with path separators.
    "g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "e3/../44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
];

#[tokio::test]
async fn fs_put_then_get_round_trips_at_the_sharded_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    let hash = store.put(b"hello blobs").await.unwrap();
    assert_eq!(hash, sha256_hex(b"hello blobs"));
    let path = dir.path().join("blobs").join(&hash[..2]).join(&hash[2..]);
    assert_eq!(std::fs::read(&path).unwrap(), b"hello blobs");
    assert_eq!(store.path_of(&hash).unwrap(), path);
    assert_eq!(store.get(&hash).await.unwrap(), b"hello blobs");
    // The empty blob is a blob too.
    let empty = store.put(b"").await.unwrap();
    assert_eq!(store.get(&empty).await.unwrap(), b"");
}

#[tokio::test]
async fn fs_put_is_idempotent_and_leaves_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FsBlobStore::open(dir.path()).unwrap());
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move { store.put(b"same bytes").await }));
    }
    let mut hashes = Vec::new();
    for task in tasks {
        hashes.push(task.await.unwrap().unwrap());
    }
    hashes.dedup();
    assert_eq!(hashes.len(), 1);
    assert_eq!(store.put(b"same bytes").await.unwrap(), hashes[0]);
    let files = crate::support::blob_files(dir.path());
    assert_eq!(files.len(), 1, "one blob file and nothing else: {files:?}");
    assert_eq!(files[0].1, b"same bytes");
}

/// Something other than a file at a blob's address (a link, to `/dev/zero` say, or a FIFO, as a
/// damaged or crafted data folder may hold) is never read: a get reports it, and a put
/// replaces it.
#[cfg(unix)]
#[tokio::test]
async fn fs_never_reads_what_is_not_a_regular_file_at_an_address() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    let hash = store.put(b"original").await.unwrap();
    let path = store.path_of(&hash).unwrap();
    // A link is refused even to a file of the right bytes: what it leads to is not the store's.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::write(&elsewhere, b"original").unwrap();
    for plant in ["link", "fifo"] {
        std::fs::remove_file(&path).unwrap();
        match plant {
            "link" => std::os::unix::fs::symlink(&elsewhere, &path).unwrap(),
            _ => {
                let made = std::process::Command::new("mkfifo").arg(&path).status();
                assert!(made.unwrap().success(), "mkfifo");
            }
        }
        let got = tokio::time::timeout(std::time::Duration::from_secs(60), store.get(&hash));
        let error = got.await.expect("a get never blocks").unwrap_err();
        assert!(
            matches!(&error, BlobStoreError::Backend(m) if m.contains("not a regular file")),
            "{plant}: {error:?}"
        );
        let put = tokio::time::timeout(std::time::Duration::from_secs(60), store.put(b"original"));
        assert_eq!(put.await.expect("a put never blocks").unwrap(), hash);
        assert_eq!(store.get(&hash).await.unwrap(), b"original", "{plant}");
    }
}

#[tokio::test]
async fn fs_put_repairs_a_damaged_blob_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    let hash = store.put(b"original").await.unwrap();
    let path = store.path_of(&hash).unwrap();
    for damage in [&b"garbage"[..], b"", b"origina"] {
        std::fs::write(&path, damage).unwrap();
        assert_eq!(
            store.get(&hash).await,
            Err(BlobStoreError::Corrupt(hash.clone()))
        );
        // A put of the same content counts the damaged file as missing and writes it again.
        assert_eq!(store.put(b"original").await.unwrap(), hash);
        assert_eq!(store.get(&hash).await.unwrap(), b"original");
    }
    // In a batch too, next to new blobs and an intact one.
    std::fs::write(&path, b"garbage").unwrap();
    let intact = store.put(b"intact").await.unwrap();
    let hashes = store
        .put_many(&[b"new 1", b"original", b"intact", b"new 2"])
        .await
        .unwrap();
    assert_eq!(hashes[1], hash);
    assert_eq!(hashes[2], intact);
    for (hash, bytes) in hashes
        .iter()
        .zip([&b"new 1"[..], b"original", b"intact", b"new 2"])
    {
        assert_eq!(store.get(hash).await.unwrap(), bytes);
    }
    let files = crate::support::blob_files(dir.path());
    assert_eq!(files.len(), 4, "the blobs and nothing else: {files:?}");
}

#[tokio::test]
async fn fs_put_many_stores_hundreds_of_blobs_in_one_call() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    let blobs: Vec<Vec<u8>> = (0..400)
        .map(|i| format!("blob number {i}").into_bytes())
        .collect();
    let refs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
    let hashes = store.put_many(&refs).await.unwrap();
    assert_eq!(hashes.len(), 400);
    for (hash, bytes) in hashes.iter().zip(&blobs) {
        assert_eq!(hash, &sha256_hex(bytes));
        assert_eq!(&store.get(hash).await.unwrap(), bytes);
    }
    let files = crate::support::blob_files(dir.path());
    assert_eq!(files.len(), 400, "the blobs and nothing else");
    // Again: all are stored intact, nothing is written.
    assert_eq!(store.put_many(&refs).await.unwrap(), hashes);
    assert_eq!(crate::support::blob_files(dir.path()), files);
}

#[tokio::test]
async fn a_failed_fs_put_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    let blobs: Vec<Vec<u8>> = (0..40).map(|i| format!("blob {i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
    // The address of blob 20 (in the middle of the second chunk) is taken by a folder that is
    // not empty, so its rename fails after the chunk's other files were written.
    let blocked = store.path_of(&sha256_hex(&blobs[20])).unwrap();
    std::fs::create_dir_all(blocked.join("inside")).unwrap();
    let err = store.put_many(&refs).await.unwrap_err();
    assert!(err.to_string().contains("cannot rename into"), "{err}");
    let temps: Vec<_> = crate::support::snapshot(dir.path())
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| path.to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(temps.is_empty(), "left behind: {temps:?}");
    // Once the address is free, the same put stores everything.
    std::fs::remove_dir_all(&blocked).unwrap();
    let hashes = store.put_many(&refs).await.unwrap();
    for (hash, bytes) in hashes.iter().zip(&blobs) {
        assert_eq!(&store.get(hash).await.unwrap(), bytes);
    }
}

#[tokio::test]
async fn every_non_address_is_refused_before_any_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FsBlobStore::open(dir.path()).unwrap();
    let sqlite = sqlite_blobs(dir.path());
    let mem = InMemoryBlobStore::default();
    for bad in BAD_ADDRESSES {
        for store in [
            &fs as &dyn BlobStore,
            &sqlite as &dyn BlobStore,
            &mem as &dyn BlobStore,
        ] {
            match store.get(bad).await {
                Err(BlobStoreError::InvalidHash(shown)) => {
                    assert_eq!(&shown, bad);
                    let message = BlobStoreError::InvalidHash(shown).to_string();
                    assert!(message.contains("64 lower-case hex"), "{message}");
                }
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
        assert!(matches!(
            fs.path_of(bad),
            Err(BlobStoreError::InvalidHash(_))
        ));
        assert!(matches!(
            mem.insert_unchecked(bad, vec![]),
            Err(BlobStoreError::InvalidHash(_))
        ));
    }
}

#[tokio::test]
async fn in_memory_store_verifies_and_is_idempotent() {
    let store = InMemoryBlobStore::default();
    assert!(store.is_empty());
    let a = store.put(b"a").await.unwrap();
    assert_eq!(store.put(b"a").await.unwrap(), a);
    assert_eq!(store.len(), 1);
    assert_eq!(store.get(&a).await.unwrap(), b"a");
    let missing = sha256_hex(b"never stored");
    assert_eq!(
        store.get(&missing).await,
        Err(BlobStoreError::NotFound(missing.clone()))
    );
    let b = sha256_hex(b"b");
    store.insert_unchecked(&b, b"not b".to_vec()).unwrap();
    assert_eq!(store.get(&b).await, Err(BlobStoreError::Corrupt(b.clone())));
}

#[tokio::test]
async fn fs_put_many_stores_a_batch_in_order_with_duplicates_and_known_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    let known = store.put(b"known").await.unwrap();
    let batch: [&[u8]; 4] = [b"one", b"known", b"two", b"one"];
    let hashes = store.put_many(&batch).await.unwrap();
    let expected: Vec<String> = batch.iter().map(|b| sha256_hex(b)).collect();
    assert_eq!(hashes, expected);
    assert_eq!(hashes[1], known);
    for (hash, bytes) in hashes.iter().zip(batch) {
        assert_eq!(store.get(hash).await.unwrap(), bytes);
    }
    let files = crate::support::blob_files(dir.path());
    assert_eq!(
        files.len(),
        3,
        "three distinct blobs, no temporary files: {files:?}"
    );
    assert!(store.put_many(&[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn sqlite_put_many_is_one_idempotent_batch_and_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_blobs(dir.path());
    assert_eq!(store.path(), dir.path().join(DB_FILE));
    let known = store.put(b"known").await.unwrap();
    let batch: [&[u8]; 5] = [b"one", b"known", b"two", b"one", b""];
    let hashes = store.put_many(&batch).await.unwrap();
    let expected: Vec<String> = batch.iter().map(|b| sha256_hex(b)).collect();
    assert_eq!(hashes, expected);
    assert_eq!(hashes[1], known);
    drop(store);

    let store = sqlite_blobs(dir.path());
    for (hash, bytes) in hashes.iter().zip(batch) {
        assert_eq!(store.get(hash).await.unwrap(), bytes);
    }
    let db = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    let rows: i64 = db
        .query_row("SELECT count(*) FROM blobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 4, "one row per distinct blob");
    let missing = sha256_hex(b"never stored");
    assert_eq!(
        store.get(&missing).await,
        Err(BlobStoreError::NotFound(missing.clone()))
    );
}

/// A put counts a row at the address only if it holds the right bytes, as `FsBlobStore` counts a
/// file: a damaged row (other bytes, no bytes, a value that is not a blob) is replaced in the
/// put's transaction, alone or in a batch, and a healthy one is never written again.
#[tokio::test]
async fn sqlite_put_repairs_a_damaged_row_and_never_rewrites_a_healthy_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_blobs(dir.path());
    let hash = store.put(b"original").await.unwrap();
    let db = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    // Every row the store inserts or rewrites from here on leaves a line in `blob_writes`.
    db.execute_batch(
        "CREATE TABLE blob_writes (what TEXT NOT NULL, hash TEXT NOT NULL);
         CREATE TRIGGER blob_inserted AFTER INSERT ON blobs
           BEGIN INSERT INTO blob_writes VALUES ('insert', new.hash); END;
         CREATE TRIGGER blob_rewritten AFTER UPDATE ON blobs
           BEGIN INSERT INTO blob_writes VALUES ('update', new.hash); END;",
    )
    .unwrap();
    let writes = |db: &rusqlite::Connection| -> Vec<(String, String)> {
        let mut stmt = db
            .prepare("SELECT what, hash FROM blob_writes ORDER BY rowid")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        let rows = rows.collect::<Result<Vec<_>, _>>().unwrap();
        db.execute("DELETE FROM blob_writes", []).unwrap();
        rows
    };

    // A healthy row: the put writes nothing.
    assert_eq!(store.put(b"original").await.unwrap(), hash);
    assert_eq!(writes(&db), []);

    let damages: [rusqlite::types::Value; 4] = [
        b"damaged".to_vec().into(),
        Vec::<u8>::new().into(),
        b"origina".to_vec().into(),
        // The right bytes, but stored as text: not a blob.
        "original".to_owned().into(),
    ];
    for damage in damages {
        db.execute(
            "UPDATE blobs SET bytes = ?1 WHERE hash = ?2",
            rusqlite::params![damage, hash],
        )
        .unwrap();
        writes(&db);
        assert_eq!(
            store.get(&hash).await,
            Err(BlobStoreError::Corrupt(hash.clone()))
        );
        assert_eq!(store.put(b"original").await.unwrap(), hash);
        assert_eq!(writes(&db), [("update".to_owned(), hash.clone())]);
        assert_eq!(store.get(&hash).await.unwrap(), b"original");
        // Repaired, it is healthy: the next put writes nothing.
        assert_eq!(store.put(b"original").await.unwrap(), hash);
        assert_eq!(writes(&db), []);
    }

    // In a batch too, next to a new blob, a healthy one and the damaged one twice.
    let healthy = store.put(b"healthy").await.unwrap();
    db.execute(
        "UPDATE blobs SET bytes = ?1 WHERE hash = ?2",
        rusqlite::params![b"damaged".to_vec(), hash],
    )
    .unwrap();
    writes(&db);
    let batch: [&[u8]; 4] = [b"new", b"original", b"healthy", b"original"];
    let hashes = store.put_many(&batch).await.unwrap();
    assert_eq!(hashes[1], hash);
    assert_eq!(hashes[2], healthy);
    assert_eq!(
        writes(&db),
        [
            ("insert".to_owned(), sha256_hex(b"new")),
            ("update".to_owned(), hash.clone())
        ]
    );
    for (hash, bytes) in hashes.iter().zip(batch) {
        assert_eq!(store.get(hash).await.unwrap(), bytes);
    }
    let rows: i64 = db
        .query_row("SELECT count(*) FROM blobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 3, "one row per distinct blob");
}

/// The blob store of a fresh run store in `dir`.
fn sqlite_blobs(dir: &std::path::Path) -> SqliteBlobStore {
    SqliteStore::open(dir).unwrap().blob_store().unwrap()
}

#[tokio::test]
async fn tiered_keeps_small_blobs_as_rows_and_large_ones_as_files_in_batch_order() {
    let dir = tempfile::tempdir().unwrap();
    let runs = SqliteStore::open(dir.path()).unwrap();
    let store = TieredBlobStore::open(&runs, dir.path(), 4).unwrap();
    let batch: [&[u8]; 5] = [b"big blob", b"tiny", b"another big", b"tiny", b""];
    let hashes = store.put_many(&batch).await.unwrap();
    let expected: Vec<String> = batch.iter().map(|b| sha256_hex(b)).collect();
    assert_eq!(hashes, expected);
    for (hash, bytes) in hashes.iter().zip(batch) {
        assert_eq!(store.get(hash).await.unwrap(), bytes);
        let as_file = store.files().path_of(hash).unwrap().is_file();
        assert_eq!(
            as_file,
            bytes.len() > 4,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    assert_eq!(
        store.put(b"big again").await.unwrap(),
        sha256_hex(b"big again")
    );
    assert!(
        store
            .files()
            .path_of(&sha256_hex(b"big again"))
            .unwrap()
            .is_file()
    );
    let missing = sha256_hex(b"never stored");
    assert_eq!(
        store.get(&missing).await,
        Err(BlobStoreError::NotFound(missing.clone()))
    );
}

/// A damaged copy never hides a healthy one: a damaged row falls back to a healthy file at the
/// same address, and a healthy row is answered whatever the file holds. With no healthy copy,
/// the blob is corrupt; a put through the tiered store repairs the row.
#[tokio::test]
async fn tiered_a_damaged_row_or_file_never_hides_a_healthy_copy() {
    let dir = tempfile::tempdir().unwrap();
    let runs = SqliteStore::open(dir.path()).unwrap();
    let store = TieredBlobStore::open(&runs, dir.path(), 64).unwrap();
    let hash = store.put(b"small").await.unwrap();
    let file = store.files().path_of(&hash).unwrap();
    let db = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    let damage_row = || {
        db.execute(
            "UPDATE blobs SET bytes = ?1 WHERE hash = ?2",
            rusqlite::params![b"damaged".to_vec(), hash],
        )
        .unwrap()
    };
    let corrupt = Err(BlobStoreError::Corrupt(hash.clone()));

    // A damaged row and no file.
    damage_row();
    assert_eq!(store.get(&hash).await, corrupt);
    // A damaged row and a healthy file: the file answers.
    store.files().put(b"small").await.unwrap();
    assert_eq!(store.get(&hash).await.unwrap(), b"small");
    // A damaged row and a damaged file: corrupt.
    std::fs::write(&file, b"damaged too").unwrap();
    assert_eq!(store.get(&hash).await, corrupt);
    // A put repairs the row, which then answers whatever the file holds.
    assert_eq!(store.put(b"small").await.unwrap(), hash);
    assert_eq!(store.get(&hash).await.unwrap(), b"small");
    assert_eq!(std::fs::read(&file).unwrap(), b"damaged too");
    damage_row();
    assert_eq!(
        store.put_many(&[b"small"]).await.unwrap(),
        vec![hash.clone()]
    );
    assert_eq!(store.get(&hash).await.unwrap(), b"small");

    // The same through a read-only opening of the folder.
    damage_row();
    std::fs::write(&file, b"small").unwrap();
    let reader = TieredBlobStore::open_read_only(&runs, dir.path(), 64).unwrap();
    assert_eq!(reader.get(&hash).await.unwrap(), b"small");
}

/// The blob connection and the run store's connection write the same database at once (their
/// work runs on the blocking pool): every write waits its turn, none fails as locked.
#[tokio::test]
async fn blob_rows_and_run_steps_written_at_once_from_two_connections_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let blobs = Arc::new(runs.blob_store().unwrap());
    let mut tasks = Vec::new();
    for task in 0..4 {
        let (runs, blobs) = (Arc::clone(&runs), Arc::clone(&blobs));
        tasks.push(tokio::spawn(async move {
            use ai_core::RunStore;
            let run = ai_core::RunId::new(format!("run-{task}")).unwrap();
            runs.begin_run(&run, None, 0, None).await.unwrap();
            let mut stored = Vec::new();
            for n in 0..25 {
                let bytes = format!("task {task} blob {n}").into_bytes();
                let hash = blobs.put_many(&[&bytes]).await.unwrap().remove(0);
                let step = ai_core::RunStep {
                    receipt_refs: vec![hash.clone()],
                    ..Default::default()
                };
                runs.commit_step(&run, step).await.unwrap();
                stored.push((hash, bytes));
            }
            (run, stored)
        }));
    }
    for task in tasks {
        let (run, stored) = task.await.unwrap();
        let log = ai_core::RunStore::load_run(runs.as_ref(), &run)
            .await
            .unwrap();
        let hashes: Vec<&String> = stored.iter().map(|(hash, _)| hash).collect();
        assert_eq!(log.receipt_refs.iter().collect::<Vec<_>>(), hashes);
        for (hash, bytes) in &stored {
            assert_eq!(&blobs.get(hash).await.unwrap(), bytes);
        }
    }
}

/// Temp files a crashed process left behind are not in the way: a process that gets the same
/// pid again (as a container's main process does at every start) makes the same names, and so
/// do two stores of one process (each counts from 0); a put that meets one takes the next name
/// instead of failing.
#[tokio::test]
async fn fs_put_is_not_failed_by_a_temp_file_a_crash_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    let bytes = b"the blob a crashed run was writing";
    let hash = sha256_hex(bytes);
    let folder = store.root().join("tmp");
    for n in 0..64 {
        let name = format!(".tmp-{}-{}-{n}", &hash[2..10], std::process::id());
        std::fs::write(folder.join(name), "left over").unwrap();
    }
    assert_eq!(store.put(bytes).await.unwrap(), hash);
    assert_eq!(store.get(&hash).await.unwrap(), bytes);
}

/// A file at an address larger than any blob (a sparse file, which costs no disk, of a damaged
/// or crafted data folder) is refused from its length, naming the address and the sizes, before
/// a byte of it is read; the tiered store says the same.
#[tokio::test]
async fn fs_get_refuses_a_file_larger_than_any_blob_before_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    let hash = sha256_hex(b"a blob");
    let path = store.path_of(&hash).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let size = FsBlobStore::MAX_BLOB_BYTES + 1;
    std::fs::File::create(&path).unwrap().set_len(size).unwrap();
    let too_large = Err(BlobStoreError::TooLarge {
        hash: hash.clone(),
        size,
        max: FsBlobStore::MAX_BLOB_BYTES,
    });
    assert_eq!(store.get(&hash).await, too_large);
    let runs = SqliteStore::open(dir.path()).unwrap();
    let tiered = TieredBlobStore::open(&runs, dir.path(), 8).unwrap();
    assert_eq!(tiered.get(&hash).await, too_large);
}

/// Puts make their temp files in one folder, `blobs/tmp/`, and opening the store removes those a
/// crash left between a put's create and its rename once they are an hour old, reading that
/// folder only: only files named as a put names them. A fresh one (a put in flight in another
/// process), a file of another name, and anything a reader's open finds are left as they are.
#[tokio::test]
async fn fs_open_removes_only_stale_temp_files_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    drop(FsBlobStore::open(dir.path()).unwrap());
    let root = dir.path().join("blobs");
    let temps = root.join("tmp");
    assert!(temps.is_dir(), "the open made no temp folder");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 60 * 60);
    let plant = |path: std::path::PathBuf, stale: bool| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let file = std::fs::File::create(&path).unwrap();
        if stale {
            file.set_modified(old).unwrap();
        }
        path
    };
    let stale = plant(temps.join(".tmp-cdef0123-4242-7"), true);
    let fresh = plant(temps.join(".tmp-cdef0123-4242-8"), false);
    let foreign = [
        plant(temps.join(".tmp-notours"), true),
        plant(temps.join(".tmp-CDEF0123-4242-7"), true),
        plant(temps.join("notes.tmp"), true),
        // Temp names outside the temp folder are not looked for: no open reads the blob
        // folders (one per two hex digits, holding every blob) to find them.
        plant(root.join(".tmp-cdef0123-4242-7"), true),
        plant(root.join("ab").join(".tmp-cdef0123-4242-7"), true),
    ];

    // A reader's open writes nothing: the stale file stays.
    let runs = SqliteStore::open(dir.path()).unwrap();
    drop(TieredBlobStore::open_read_only(&runs, dir.path(), 8).unwrap());
    assert!(stale.exists());

    drop(FsBlobStore::open(dir.path()).unwrap());
    assert!(!stale.exists(), "the stale temp file was not removed");
    assert!(fresh.exists(), "a fresh temp file was removed");
    for path in &foreign {
        assert!(path.exists(), "{} was removed", path.display());
    }
}

/// A data folder of an earlier cogni, whose puts made their temp files in the blob folders
/// (`blobs/ab/`), has its stale ones removed by the first open; when that leaves none there,
/// later opens read only the temp folder.
#[tokio::test]
async fn fs_open_removes_stale_temp_files_of_the_old_layout_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("blobs");
    let folder = root.join("ab");
    std::fs::create_dir_all(&folder).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 60 * 60);
    let plant = |path: std::path::PathBuf| {
        std::fs::File::create(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        path
    };
    let stale = plant(folder.join(".tmp-cdef0123-4242-7"));
    let blob_like = plant(folder.join("cdef0123"));
    drop(FsBlobStore::open(dir.path()).unwrap());
    assert!(
        !stale.exists(),
        "the old layout's stale temp file was not removed"
    );
    assert!(blob_like.exists());
    assert!(root.join("tmp").is_dir());
    // The blob folders held no temp file after that open: they are not read again.
    let later = plant(folder.join(".tmp-cdef0123-4242-8"));
    drop(FsBlobStore::open(dir.path()).unwrap());
    assert!(later.exists(), "an open read the blob folders again");
}

/// An earlier cogni that crashed less than an hour before the upgrade left temp files too young
/// to remove in the blob folders: the opens keep reading those folders until they are gone, so
/// none is left there for ever; once they hold none, the blob folders are not read again.
#[tokio::test]
async fn fs_open_removes_old_layout_temp_files_that_were_fresh_at_the_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("blobs").join("ab");
    std::fs::create_dir_all(&folder).unwrap();
    let young = folder.join(".tmp-cdef0123-4242-7");
    std::fs::write(&young, "a crash's leftover").unwrap();
    drop(FsBlobStore::open(dir.path()).unwrap());
    assert!(young.exists(), "a fresh temp file was removed");
    // An hour later it is stale, and the next open removes it.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 60 * 60);
    let age = |path: &std::path::Path| {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(old)
            .unwrap();
    };
    age(&young);
    drop(FsBlobStore::open(dir.path()).unwrap());
    assert!(
        !young.exists(),
        "the old layout's temp file is left for ever"
    );
    // The blob folders held none then: they are not read again.
    let later = folder.join(".tmp-cdef0123-4242-8");
    std::fs::write(&later, "planted").unwrap();
    age(&later);
    drop(FsBlobStore::open(dir.path()).unwrap());
    assert!(later.exists(), "an open read the blob folders again");
}

/// A put's temp file lives in `blobs/tmp/`, never in a blob folder, so no reader of a blob
/// folder meets one; after the put the temp folder is empty.
#[tokio::test]
async fn fs_put_writes_its_temp_file_in_the_temp_folder() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap();
    // A temp name a crash left in the temp folder is skipped, so it shows where puts write.
    let hash = sha256_hex(b"a blob");
    let temps = store.root().join("tmp");
    let taken = temps.join(format!(".tmp-{}-{}-0", &hash[2..10], std::process::id()));
    std::fs::write(&taken, "left over").unwrap();
    // Without its temp folder (removed by hand), a put makes it again.
    let store2_dir = tempfile::tempdir().unwrap();
    let store2 = FsBlobStore::open(store2_dir.path()).unwrap();
    std::fs::remove_dir(store2.root().join("tmp")).unwrap();
    assert_eq!(store2.put(b"a blob").await.unwrap(), hash);
    assert!(store2.root().join("tmp").is_dir());

    assert_eq!(store.put(b"a blob").await.unwrap(), hash);
    assert_eq!(std::fs::read(&taken).unwrap(), b"left over");
    let files: Vec<_> = crate::support::blob_files(store.root())
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    assert_eq!(files, [store.path_of(&hash).unwrap(), taken]);
}

/// As the file and row stores do, the in-memory store's put replaces a damaged copy at the
/// address: once a put of the bytes returns, a get answers them.
#[tokio::test]
async fn in_memory_put_repairs_a_damaged_blob() {
    let store = InMemoryBlobStore::default();
    let hash = sha256_hex(b"b");
    store.insert_unchecked(&hash, b"not b".to_vec()).unwrap();
    assert_eq!(store.put(b"b").await.unwrap(), hash);
    assert_eq!(store.get(&hash).await.unwrap(), b"b");
}

/// The blob store used alone (without the SQLite store, or before it) creates the data folder
/// and its blob folder as their owner's alone, as the run store does: the blobs hold the
/// conversations. A folder that exists keeps the permissions it has.
#[cfg(unix)]
#[test]
fn fs_the_folders_it_creates_are_the_owners_alone_and_a_chosen_one_is_left_as_it_is() {
    use std::os::unix::fs::PermissionsExt;
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("var").join("cogni");
    FsBlobStore::open(&data).unwrap();
    assert_eq!(mode(dir.path().join("var").as_path()), 0o700);
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("blobs")), 0o700);

    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o750)).unwrap();
    FsBlobStore::open(&shared).unwrap();
    assert_eq!(mode(&shared), 0o750);
}

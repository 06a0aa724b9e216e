//! SqliteStore beyond the shared contract (`run_log.rs`): schema and WAL mode, data that
//! survives a reopen, one transaction per step, the raw field kept off disk, recovery after a
//! restart.

use adapters::{SCHEMA_VERSION, SqliteStore};
use ai_core::{
    AiEvent, DanglingToolCall, RunStatus, RunStep, RunStore, RunStoreError, ThreadId, ThreadStore,
    sha256_hex,
};
use serde_json::json;

use crate::support::{
    call, done, null_args_start, record, refused_start, result, run, running, six_events, start,
};

fn thread(id: &str) -> ThreadId {
    ThreadId::new(id).unwrap()
}

fn receipt_ref(n: u32) -> String {
    sha256_hex(format!("receipt {n}").as_bytes())
}

#[cfg(unix)]
#[test]
fn the_data_folders_it_creates_are_the_owners_alone_and_a_chosen_one_is_left_as_it_is() {
    use std::os::unix::fs::PermissionsExt;
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("var").join("cogni");
    SqliteStore::open(&data).unwrap();
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(data.parent().unwrap()), 0o700);

    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o750)).unwrap();
    SqliteStore::open(&shared).unwrap();
    assert_eq!(mode(&shared), 0o750);
}

#[tokio::test]
async fn open_creates_one_wal_database_at_the_current_schema() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("data")).unwrap();
    assert_eq!(store.path(), dir.path().join("data").join("cogni.db"));
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    drop(store);
    // Opening again migrates nothing and keeps the version.
    SqliteStore::open(dir.path().join("data")).unwrap();
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

#[tokio::test]
async fn threads_are_saved_replaced_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let t = thread("thread-1");
    assert_eq!(store.load(&t).await.unwrap(), None);
    store.save(&t, None, &json!({"turn": 1})).await.unwrap();
    store
        .save(
            &t,
            Some(&json!({"turn": 1})),
            &json!({"turn": 2, "messages": ["hi"]}),
        )
        .await
        .unwrap();
    drop(store);
    let store = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(
        store.load(&t).await.unwrap(),
        Some(json!({"turn": 2, "messages": ["hi"]}))
    );
    assert_eq!(store.load(&thread("other")).await.unwrap(), None);
}

#[tokio::test]
async fn a_run_keeps_its_steps_in_order_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let r = run("run-1");
    let t = thread("thread-1");
    store.begin_run(&r, Some(&t), 1_000, None).await.unwrap();
    let first = RunStep {
        events: six_events("s1"),
        records: vec![
            record("s1-a", "RAW-MARKER-1"),
            record("s1-b", "RAW-MARKER-2"),
        ],
        receipt_refs: vec![receipt_ref(1)],
        thread_state: Some(json!({"step": 1})),
        thread_state_if_saved: None,
        refuse_if_thread_changed: false,
    };
    assert_eq!(store.commit_step(&r, first.clone()).await.unwrap(), 0..6);
    let second = RunStep {
        events: vec![done()],
        records: vec![],
        receipt_refs: vec![receipt_ref(2)],
        thread_state: Some(json!({"step": 2})),
        thread_state_if_saved: None,
        refuse_if_thread_changed: false,
    };
    assert_eq!(store.commit_step(&r, second).await.unwrap(), 6..7);
    store.finish_run(&r, 2_000).await.unwrap();
    drop(store);

    let store = SqliteStore::open(dir.path()).unwrap();
    let log = store.load_run(&r).await.unwrap();
    assert_eq!(log.header.run_id, r);
    assert_eq!(log.header.thread_id, Some(t.clone()));
    assert_eq!(log.header.status, RunStatus::Finished);
    assert_eq!(log.header.started_at_ms, 1_000);
    assert_eq!(log.header.finished_at_ms, Some(2_000));
    let mut expected = six_events("s1");
    expected.push(done());
    assert_eq!(log.events, expected);
    assert_eq!(log.receipt_refs, vec![receipt_ref(1), receipt_ref(2)]);
    assert_eq!(log.records.len(), 2);
    assert_eq!(log.records[0].tool_call_id, call("s1-a"));
    assert_eq!(log.records[1].tool_call_id, call("s1-b"));
    // The record's raw provider payload is never stored.
    assert_eq!(log.records[0].raw, None);
    let mut without_raw = first.records[0].clone();
    without_raw.raw = None;
    assert_eq!(log.records[0], without_raw);
    assert_eq!(store.load(&t).await.unwrap(), Some(json!({"step": 2})));
}

#[tokio::test]
async fn the_raw_field_of_a_record_is_nowhere_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let r = run("run-raw");
    store.begin_run(&r, None, 1, None).await.unwrap();
    let step = RunStep {
        records: vec![record("c1", "RAW-MARKER-NEVER-STORED")],
        ..RunStep::default()
    };
    store.commit_step(&r, step).await.unwrap();
    let mut found_redacted = false;
    for (path, bytes) in crate::support::snapshot(dir.path()) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("RAW-MARKER-NEVER-STORED"),
            "{} holds the raw payload",
            path.display()
        );
        found_redacted |= text.contains("unix_ms");
    }
    assert!(found_redacted, "the redacted result itself was stored");
}

#[tokio::test]
async fn a_step_that_fails_half_way_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let r = run("run-1");
    let t = thread("t-1");
    store.begin_run(&r, Some(&t), 1, None).await.unwrap();
    store
        .save(&t, None, &json!({"before": true}))
        .await
        .unwrap();
    // Make the last insert of a step fail, after its events and records went in.
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER fail_receipts BEFORE INSERT ON model_receipts \
         BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
    )
    .unwrap();
    let step = RunStep {
        events: six_events("s"),
        records: vec![record("s-a", "raw")],
        receipt_refs: vec![receipt_ref(1)],
        thread_state: Some(json!({"after": true})),
        thread_state_if_saved: None,
        refuse_if_thread_changed: false,
    };
    let refused = store.commit_step(&r, step).await.unwrap_err();
    assert!(
        refused.to_string().contains("injected failure"),
        "{refused}"
    );
    let log = store.load_run(&r).await.unwrap();
    assert!(log.events.is_empty() && log.records.is_empty() && log.receipt_refs.is_empty());
    assert_eq!(store.load(&t).await.unwrap(), Some(json!({"before": true})));
    // Once the fault is gone the same step commits, numbered from 0.
    conn.execute_batch("DROP TRIGGER fail_receipts").unwrap();
    let step = RunStep {
        events: six_events("s"),
        ..RunStep::default()
    };
    assert_eq!(store.commit_step(&r, step).await.unwrap(), 0..6);
}

#[tokio::test]
async fn recovery_marks_cut_runs_interrupted_and_names_their_dangling_calls() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open(dir.path()).unwrap();
        let cut = run("cut");
        store
            .begin_run(&cut, Some(&thread("t")), 1, None)
            .await
            .unwrap();
        let step = RunStep {
            events: vec![
                start("c1"),
                start("c2"),
                result("c1"),
                start("c3"),
                refused_start("c4"),
                null_args_start("c5"),
            ],
            ..RunStep::default()
        };
        store.commit_step(&cut, step).await.unwrap();
        let idle = run("idle");
        store.begin_run(&idle, None, 2, None).await.unwrap();
        let fine = run("fine");
        store.begin_run(&fine, None, 3, None).await.unwrap();
        let step = RunStep {
            events: vec![start("f1"), done()],
            ..RunStep::default()
        };
        store.commit_step(&fine, step).await.unwrap();
        store.finish_run(&fine, 4).await.unwrap();
        // The process dies here: no finish for `cut` and `idle`.
    }
    let store = SqliteStore::open(dir.path()).unwrap();
    let recovered = store
        .recover_interrupted(100, &running(&store).await)
        .await
        .unwrap();
    assert_eq!(recovered.len(), 2);
    assert_eq!(recovered[0].run_id, run("cut"));
    assert_eq!(recovered[0].thread_id, Some(thread("t")));
    let dangling = |id: &str| DanglingToolCall {
        tool_call_id: call(id),
        tool_name: "core__get_current_time".into(),
        never_ran: id == "c4",
    };
    assert_eq!(
        recovered[0].dangling,
        vec![
            dangling("c2"),
            dangling("c3"),
            dangling("c4"),
            dangling("c5")
        ]
    );
    assert_eq!(recovered[1].run_id, run("idle"));
    assert!(recovered[1].dangling.is_empty());
    let header = store.load_run(&run("cut")).await.unwrap().header;
    assert_eq!(header.status, RunStatus::Interrupted);
    assert_eq!(header.finished_at_ms, Some(100));
    assert_eq!(
        store.load_run(&run("fine")).await.unwrap().header.status,
        RunStatus::Finished
    );
    // The process dies again before the closing steps: the next start names the same runs.
    drop(store);
    let store = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(
        store
            .recover_interrupted(200, &running(&store).await)
            .await
            .unwrap(),
        recovered
    );

    // The caller answers the dangling calls in a closing step ending with `Done`; the run stays
    // interrupted.
    let mut answers: Vec<AiEvent> = recovered[0]
        .dangling
        .iter()
        .map(|d| AiEvent::ToolCallResult {
            tool_call_id: d.tool_call_id.clone(),
            tool_name: d.tool_name.as_str().into(),
            outcome: ai_core::ToolOutcome::Error(ai_core::ToolFailure::new(
                ai_core::ToolErrorCode::Cancelled,
                "interrupted",
            )),
        })
        .collect();
    answers.push(done());
    let seqs = store
        .commit_step(
            &run("cut"),
            RunStep {
                events: answers,
                thread_state: Some(json!({"repaired": true})),
                ..RunStep::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(seqs, 6..11);
    assert!(matches!(
        store.finish_run(&run("cut"), 300).await,
        Err(RunStoreError::WrongStatus {
            status: RunStatus::Interrupted,
            ..
        })
    ));
    assert_eq!(
        store.load(&thread("t")).await.unwrap(),
        Some(json!({"repaired": true}))
    );
    let closing = RunStep {
        events: vec![done()],
        ..RunStep::default()
    };
    store.commit_step(&run("idle"), closing).await.unwrap();
    assert!(
        store
            .recover_interrupted(300, &running(&store).await)
            .await
            .unwrap()
            .is_empty()
    );

    // A closed run's mark stands: its `done` deleted by hand since, it is not named again (its
    // events are not read at every start to find such an edit).
    drop(store);
    let db = rusqlite::Connection::open(dir.path().join("cogni.db")).unwrap();
    let deleted = db
        .execute(
            "DELETE FROM run_events WHERE run_id = 'idle' AND kind = 'done'",
            [],
        )
        .unwrap();
    assert_eq!(deleted, 1);
    drop(db);
    let store = SqliteStore::open(dir.path()).unwrap();
    assert!(
        store
            .recover_interrupted(400, &running(&store).await)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A stored event or record that does not decode is reported by its row and column and what is
/// wrong, never by what it holds: run text and tool results stay out of errors and logs.
#[tokio::test]
async fn a_corrupt_row_is_named_without_quoting_what_it_holds() {
    const CANARY: &str = "CANARY-RUN-TEXT";
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let r = run("run-1");
    let t = thread("t-1");
    store.begin_run(&r, Some(&t), 1, None).await.unwrap();
    let step = RunStep {
        events: vec![start("c1")],
        records: vec![record("c1", "raw")],
        ..RunStep::default()
    };
    store.commit_step(&r, step).await.unwrap();
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let long_id = CANARY.repeat(20);
    let cases = [
        (
            "UPDATE run_events SET event_json = ?1 WHERE seq = 0",
            format!(r#"{{"type":"step_started","step":"{CANARY} said hello"}}"#),
            // An internally tagged enum is decoded from a buffer: serde gives no position.
            "event 0 of run run-1 (run_events.event_json) does not decode: a value of the wrong \
             type (a string; expected u32)",
        ),
        (
            "UPDATE run_events SET event_json = ?1 WHERE seq = 0",
            format!(
                r#"{{"type":"tool_call_result","tool_call_id":"{long_id}","tool_name":"t","outcome":{{"status":"ok","value":1}}}}"#
            ),
            "",
        ),
        (
            "UPDATE run_events SET event_json = ?1 WHERE seq = 0",
            format!(r#"{{"type":"{CANARY}"}}"#),
            "",
        ),
        (
            "UPDATE tool_records SET record_json = ?1 WHERE idx = 0",
            format!(
                r#"{{"tool_call_id":"c1","tool_id":"t","started_at_ms":"{CANARY}","ended_at_ms":2}}"#
            ),
            "record 0 of run run-1 (tool_records.record_json) does not decode: a value of the \
             wrong type (a string; expected u64) at line 1 column 68",
        ),
        // What was expected is said in words, never by the Rust type's name.
        (
            "UPDATE tool_records SET record_json = ?1 WHERE idx = 0",
            "5".to_owned(),
            "record 0 of run run-1 (tool_records.record_json) does not decode: a value of the \
             wrong type (an integer; expected an object) at line 1 column 1",
        ),
        (
            "UPDATE tool_records SET record_json = ?1 WHERE idx = 0",
            "[]".to_owned(),
            "record 0 of run run-1 (tool_records.record_json) does not decode: a sequence or map \
             of the wrong length (length not shown; expected an object of 8 fields) at line 1 \
             column 2",
        ),
        (
            "UPDATE run_events SET event_json = ?1 WHERE seq = 0",
            "[]".to_owned(),
            "",
        ),
    ];
    for (sql, json, expected) in cases {
        // Restore both rows, then damage one.
        conn.execute(
            "UPDATE run_events SET event_json = ?1 WHERE seq = 0",
            [serde_json::to_string(&start("c1")).unwrap()],
        )
        .unwrap();
        conn.execute(
            "UPDATE tool_records SET record_json = ?1 WHERE idx = 0",
            [serde_json::to_string(&record("c1", "raw")).unwrap()],
        )
        .unwrap();
        conn.execute(sql, [&json]).unwrap();
        let err = store.load_run(&r).await.unwrap_err();
        assert!(matches!(err, RunStoreError::Corrupt(_)), "{err:?}");
        let message = err.to_string();
        assert!(!message.contains(CANARY), "{message}");
        assert!(message.contains("of run run-1 ("), "{message}");
        for rust_name in ["struct ", "enum ", "RecordFields", "AiEvent"] {
            assert!(!message.contains(rust_name), "{message}");
        }
        if !expected.is_empty() {
            assert_eq!(message, format!("stored data is corrupt: {expected}"));
        }
    }
    // A thread state that is not JSON.
    conn.execute(
        "INSERT INTO threads (thread_id, state_json) VALUES ('t-1', ?1)",
        [format!("{{\"a\": {CANARY}}}")],
    )
    .unwrap();
    let err = store.load(&t).await.unwrap_err().to_string();
    assert!(!err.contains(CANARY), "{err}");
    assert!(
        err.contains("thread t-1 (threads.state_json) does not decode: not valid JSON at line 1"),
        "{err}"
    );
}

/// One interrupted run that cannot be read (a start event without a tool name, an id that is
/// not a run id) does not stop the recovery of the others: they are still named, and the bad
/// ones are left out (and logged), as the memory store names every run it can hold.
/// Begins `runs` on thread `t`, started in that order, each left running after a step that
/// started call `c1`.
async fn left_running(store: &SqliteStore, runs: &[&ai_core::RunId]) {
    for (at, r) in (1..).zip(runs) {
        store
            .begin_run(r, Some(&thread("t")), at, None)
            .await
            .unwrap();
        let step = RunStep {
            events: vec![start("c1")],
            ..RunStep::default()
        };
        store.commit_step(r, step).await.unwrap();
    }
}

#[tokio::test]
async fn one_corrupt_interrupted_run_does_not_stop_the_recovery_of_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let (broken, good) = (run("a-broken"), run("b-good"));
    left_running(&store, &[&broken, &good]).await;
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute(
        "UPDATE run_events SET event_json = '{\"type\":\"tool_call_start\",\"tool_call_id\":\"c1\"}' \
         WHERE run_id = 'a-broken'",
        [],
    )
    .unwrap();
    // A run left interrupted by an earlier start, whose id is not a valid run id.
    conn.execute(
        "INSERT INTO runs (run_id, status, started_at_ms) VALUES ('', 'interrupted', 0)",
        [],
    )
    .unwrap();
    let expected = vec![ai_core::InterruptedRun {
        run_id: good.clone(),
        thread_id: Some(thread("t")),
        dangling: vec![DanglingToolCall {
            tool_call_id: call("c1"),
            tool_name: "core__get_current_time".into(),
            never_ran: false,
        }],
    }];
    let found = store
        .recover_interrupted(100, &[broken.clone(), good.clone()])
        .await
        .unwrap();
    assert_eq!(found, expected);
    // Both dead runs were marked, the broken one included; it is left out again next time.
    for r in [&broken, &good] {
        let row: (String, i64) = conn
            .query_row(
                "SELECT status, finished_at_ms FROM runs WHERE run_id = ?1",
                [r.as_str()],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap();
        assert_eq!(row, ("interrupted".to_owned(), 100));
    }
    assert_eq!(store.recover_interrupted(200, &[]).await.unwrap(), expected);
}

/// A listing counts a run's events without reading them: a run whose stored event does not
/// decode (so it cannot be loaded) is still summarized, with the number of events it stored.
#[tokio::test]
async fn a_summary_counts_events_without_decoding_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let r = run("damaged");
    store.begin_run(&r, None, 1, None).await.unwrap();
    let step = RunStep {
        events: six_events("s1"),
        ..RunStep::default()
    };
    store.commit_step(&r, step).await.unwrap();
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute(
        "UPDATE run_events SET event_json = 'not json' WHERE run_id = 'damaged' AND seq = 2",
        [],
    )
    .unwrap();
    assert!(matches!(
        store.load_run(&r).await,
        Err(RunStoreError::Corrupt(_))
    ));
    let summaries = store.list_run_summaries().await.unwrap();
    assert_eq!(summaries.len(), 1);
    assert_eq!(
        (&summaries[0].header.run_id, summaries[0].event_count),
        (&r, 6)
    );
}

/// A run whose row does not decode (an id that is not a run id, a thread id that is not one, a
/// negative time) is left out of the list and logged by its row and what is wrong, never what
/// it holds; every other run is still listed, so `cogni runs list` and recovery (which lists the
/// runs first) still work. Loading such a run names it the same way.
#[tokio::test]
async fn a_run_row_that_does_not_decode_is_left_out_of_the_list_and_logged_by_its_row() {
    const CANARY: &str = "CANARY-STORED-ID";
    // The subscriber is installed before anything is logged.
    crate::support::logged();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let (first, last) = (run("a-good"), run("z-good"));
    store.begin_run(&first, None, 1, None).await.unwrap();
    store.begin_run(&last, None, 3, None).await.unwrap();
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let long = CANARY.repeat(10);
    let bad_rows: [(&str, Option<&str>, i64, &str); 4] = [
        (
            &long,
            None,
            2,
            r#"run="?" problem=its id is not a valid run id (invalid run_id: it is longer than 128 characters)"#,
        ),
        (
            "",
            None,
            2,
            r#"run="?" problem=its id is not a valid run id (invalid run_id: it is empty)"#,
        ),
        (
            "m-bad-thread",
            Some(&long),
            2,
            r#"run="m-bad-thread" problem=its thread id is not a valid thread id"#,
        ),
        (
            "n-bad-time",
            None,
            -5,
            r#"run="n-bad-time" problem=its start time is negative"#,
        ),
    ];
    let mut expected_logs = Vec::new();
    for (run_id, thread_id, started_at_ms, problem) in bad_rows {
        conn.execute(
            "INSERT INTO runs (run_id, thread_id, status, started_at_ms) \
             VALUES (?1, ?2, 'running', ?3)",
            rusqlite::params![run_id, thread_id, started_at_ms],
        )
        .unwrap();
        expected_logs.push(format!(
            "ERROR message=a run's row cannot be read: it is left out of the list of runs row={} \
             {problem}",
            conn.last_insert_rowid()
        ));
    }

    // Values of another type (the table is not STRICT): a start time that is text, an id that
    // is a blob holding the canary.
    conn.execute(
        "INSERT INTO runs (run_id, status, started_at_ms) VALUES ('o-text-time', 'running', 'soon')",
        [],
    )
    .unwrap();
    expected_logs.push(format!(
        "ERROR message=a run's row cannot be read: it is left out of the list of runs row={} \
         run=\"o-text-time\" problem=its start time is not of its column's type",
        conn.last_insert_rowid()
    ));
    conn.execute(
        "INSERT INTO runs (run_id, status, started_at_ms) VALUES (?1, 'running', 2)",
        [CANARY.as_bytes()],
    )
    .unwrap();
    expected_logs.push(format!(
        "ERROR message=a run's row cannot be read: it is left out of the list of runs row={} \
         run=\"?\" problem=its id is not of its column's type",
        conn.last_insert_rowid()
    ));

    let listed: Vec<_> = store
        .list_runs()
        .await
        .unwrap()
        .into_iter()
        .map(|header| header.run_id)
        .collect();
    assert_eq!(listed, [first.clone(), last.clone()]);
    let summarized: Vec<_> = store
        .list_run_summaries()
        .await
        .unwrap()
        .into_iter()
        .map(|summary| summary.header.run_id)
        .collect();
    assert_eq!(summarized, [first.clone(), last.clone()]);
    let logged = crate::support::logged();
    for expected in &expected_logs {
        assert!(
            logged
                .iter()
                .any(|line| line.starts_with(expected.as_str())),
            "{expected:?} not in {logged:#?}"
        );
    }
    assert!(
        !logged.iter().any(|line| line.contains(CANARY)),
        "{logged:#?}"
    );

    // Loading a bad run names its row and what is wrong, not what it holds.
    let err = store.load_run(&run("m-bad-thread")).await.unwrap_err();
    let rowid: i64 = conn
        .query_row(
            "SELECT rowid FROM runs WHERE run_id = 'm-bad-thread'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "stored data is corrupt: run m-bad-thread (row {rowid} of runs): its thread id is not \
             a valid thread id (invalid thread_id: it is longer than 128 characters)"
        )
    );

    // Recovery lists the runs first: the good ones are still closed.
    let dead = running(&store).await;
    assert_eq!(dead, [first.clone(), last.clone()]);
    let closed: Vec<_> = store
        .recover_interrupted(10, &dead)
        .await
        .unwrap()
        .into_iter()
        .map(|interrupted| interrupted.run_id)
        .collect();
    assert_eq!(closed, [first, last]);
}

/// A value of another type in an interrupted run's row or in one of its events (the tables are
/// not STRICT: a blob keeps its type in a TEXT column) is that run's problem: recovery leaves
/// it out and still closes the others, as it does for a value of the right type that does not
/// decode.
#[tokio::test]
async fn a_value_of_another_type_in_one_interrupted_run_does_not_stop_the_recovery_of_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let (bad_event, bad_call, good) = (run("a-bad-event"), run("b-bad-call"), run("c-good"));
    left_running(&store, &[&bad_event, &bad_call, &good]).await;
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute(
        "UPDATE run_events SET event_json = CAST(event_json AS BLOB) WHERE run_id = 'a-bad-event'",
        [],
    )
    .unwrap();
    conn.execute(
        "UPDATE run_events SET tool_call_id = CAST(tool_call_id AS BLOB) \
         WHERE run_id = 'b-bad-call'",
        [],
    )
    .unwrap();
    // Runs left interrupted by an earlier start, whose id or thread id is a blob.
    conn.execute(
        "INSERT INTO runs (run_id, status, started_at_ms) VALUES (X'00ff', 'interrupted', 0)",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO runs (run_id, thread_id, status, started_at_ms) \
         VALUES ('d-bad-thread', X'00ff', 'interrupted', 4)",
        [],
    )
    .unwrap();
    let expected = vec![ai_core::InterruptedRun {
        run_id: good.clone(),
        thread_id: Some(thread("t")),
        dangling: vec![DanglingToolCall {
            tool_call_id: call("c1"),
            tool_name: "core__get_current_time".into(),
            never_ran: false,
        }],
    }];
    let found = store
        .recover_interrupted(100, &[bad_event, bad_call, good])
        .await
        .unwrap();
    assert_eq!(found, expected);
    assert_eq!(store.recover_interrupted(200, &[]).await.unwrap(), expected);
}

/// A version 2 database is brought to the current schema keeping its runs, and its recovery
/// still tells the interrupted runs closed before (their log holds `done`) from those to close.
#[tokio::test]
async fn a_version_2_database_upgrades_keeping_which_interrupted_runs_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = rusqlite::Connection::open(dir.path().join("cogni.db")).unwrap();
        conn.execute_batch(include_str!("../../migrations/0001_init.sql"))
            .unwrap();
        conn.execute_batch(include_str!("../../migrations/0002_blobs.sql"))
            .unwrap();
        conn.execute_batch(
            r#"INSERT INTO runs (run_id, status, started_at_ms, finished_at_ms)
               VALUES ('closed', 'interrupted', 1, 2), ('open', 'interrupted', 3, 4);
               INSERT INTO run_events (run_id, seq, kind, event_json)
               VALUES ('closed', 0, 'done', '{"type":"done","reason":"error"}');
               PRAGMA user_version = 2;"#,
        )
        .unwrap();
    }
    let store = SqliteStore::open(dir.path()).unwrap();
    let recovered = store.recover_interrupted(10, &[]).await.unwrap();
    let names: Vec<&str> = recovered.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(names, ["open"]);
    // The run closed now leaves the runs to close too.
    let step = RunStep {
        events: vec![done()],
        ..RunStep::default()
    };
    store.commit_step(&run("open"), step).await.unwrap();
    assert!(store.recover_interrupted(20, &[]).await.unwrap().is_empty());
    assert_eq!(store.list_runs().await.unwrap().len(), 2);
}

/// A step whose thread state is conditional on the thread's saved one is refused as corrupt,
/// naming the thread and never what its row holds, when that saved state cannot be read (not
/// JSON, or not text): the store cannot tell whether it is the state the step names. Nothing of
/// the step is written, and the damaged row stays as it was for someone to look at, rather than
/// being taken for an empty thread and overwritten.
#[tokio::test]
async fn a_conditional_step_over_a_damaged_thread_state_is_refused_and_keeps_it() {
    const CANARY: &str = "CANARY-THREAD-TEXT";
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let t = thread("t-1");
    let r = run("run-1");
    store.begin_run(&r, Some(&t), 1, None).await.unwrap();
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let damaged = [
        rusqlite::types::Value::Text(format!("{{\"a\": {CANARY}")),
        rusqlite::types::Value::Blob(CANARY.as_bytes().to_vec()),
    ];
    for state in damaged {
        conn.execute(
            "INSERT INTO threads (thread_id, state_json) VALUES ('t-1', ?1) \
             ON CONFLICT (thread_id) DO UPDATE SET state_json = excluded.state_json",
            [&state],
        )
        .unwrap();
        for refuse_if_thread_changed in [true, false] {
            let step = RunStep {
                events: vec![start("c1")],
                thread_state: Some(json!({"turn": 1})),
                thread_state_if_saved: Some(serde_json::Value::Null),
                refuse_if_thread_changed,
                ..RunStep::default()
            };
            let err = store.commit_step(&r, step).await.unwrap_err();
            assert!(matches!(err, RunStoreError::Corrupt(_)), "{err:?}");
            let message = err.to_string();
            assert!(!message.contains(CANARY), "{message}");
            assert!(
                message.contains("run run-1: the saved state of thread t-1 (threads.state_json)"),
                "{message}"
            );
            let kept: rusqlite::types::Value = conn
                .query_row(
                    "SELECT state_json FROM threads WHERE thread_id = 't-1'",
                    [],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(kept, state, "the damaged state was overwritten");
            assert!(store.load_run(&r).await.unwrap().events.is_empty());
        }
        // A load names it the same way, as corrupt, whatever the row holds.
        let err = store.load(&t).await.unwrap_err().to_string();
        assert!(!err.contains(CANARY), "{err}");
        assert!(err.contains("thread t-1 (threads.state_json)"), "{err}");
    }
}

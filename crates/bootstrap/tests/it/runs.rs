//! `cogni runs list`, `cogni runs show` and `cogni replay` against a run recorded by
//! `cogni chat` from a loopback fake endpoint, then against a tampered run log.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

/// Runs `cogni` in `dir` with the data folder `data` and the fake endpoint `base_url`.
fn cogni_in(dir: &Path, base_url: &str, args: &[&str]) -> Output {
    crate::cogni_command()
        .args(args)
        .current_dir(dir)
        .env("COGNI_DATA_DIR", "data")
        .env("COGNI_LLM_BASE_URL", base_url)
        .env("COGNI_LLM_MODEL", "test-model")
        .output()
        .expect("the cogni binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The id of the first run `runs list --json` printed.
fn first_run_id(list: &Output) -> String {
    let row: Value = serde_json::from_str(text(&list.stdout).lines().next().unwrap()).unwrap();
    row["run_id"].as_str().unwrap().to_owned()
}

/// Asserts that a `cogni replay` succeeded and found every event identical.
fn assert_replayed_identically(replay: &Output) {
    assert!(
        replay.status.success(),
        "{}{}",
        text(&replay.stdout),
        text(&replay.stderr)
    );
    assert!(text(&replay.stdout).ends_with("events identical\n"));
}

/// What the data folder holds: every blob file with its bytes, and every row of the database,
/// blob rows included (read through SQLite, so a WAL checkpoint is not a change).
fn snapshot(data: &Path) -> (Vec<(std::path::PathBuf, Vec<u8>)>, Vec<String>) {
    let mut blobs = Vec::new();
    let mut stack = vec![data.join("blobs")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                blobs.push((path, bytes));
            }
        }
    }
    blobs.sort();
    let db = rusqlite::Connection::open(data.join("cogni.db")).unwrap();
    let version: i64 = db
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    let mut rows = vec![format!("user_version {version}")];
    for (table, order) in [
        ("threads", "thread_id"),
        ("runs", "run_id"),
        ("run_events", "run_id, seq"),
        ("tool_records", "run_id, idx"),
        ("model_receipts", "run_id, idx"),
        ("blobs", "id"),
    ] {
        let mut stmt = db
            .prepare(&format!("SELECT * FROM {table} ORDER BY {order}"))
            .unwrap();
        let columns = stmt.column_count();
        let mut query = stmt.query([]).unwrap();
        while let Some(row) = query.next().unwrap() {
            let values: Vec<String> = (0..columns)
                .map(|i| format!("{:?}", row.get_ref(i).unwrap()))
                .collect();
            rows.push(format!("{table}: {}", values.join(" | ")));
        }
    }
    (blobs, rows)
}

#[test]
fn a_recorded_chat_is_listed_shown_and_replayed_identically_and_tampering_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let cogni = |args: &[&str]| cogni_in(dir.path(), &url, args);

    // Record: one turn with two tool calls, then the answer.
    let chat = cogni(&["chat", "--thread", "t", "--json", "What do my notes say?"]);
    assert!(chat.status.success(), "{}", text(&chat.stderr));
    let chat_events: Vec<Value> = text(&chat.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(chat_events.iter().any(|e| e["type"] == "tool_call_result"));

    // runs list
    let list = cogni(&["runs", "list", "--json"]);
    assert!(list.status.success(), "{}", text(&list.stderr));
    let rows: Vec<Value> = text(&list.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{}", text(&list.stdout));
    let run_id = rows[0]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(rows[0]["thread_id"], "t");
    assert_eq!(rows[0]["status"], "finished");
    assert_eq!(rows[0]["events"].as_u64(), Some(chat_events.len() as u64));
    let table = cogni(&["runs", "list"]);
    let table = text(&table.stdout);
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(
        table.lines().nth(1).unwrap().starts_with(&run_id),
        "{table}"
    );

    // runs show: the redacted view, never a raw payload.
    let show = cogni(&["runs", "show", &run_id, "--json"]);
    assert!(show.status.success(), "{}", text(&show.stderr));
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert!(!text(&show.stdout).contains("\"raw\""));
    assert_eq!(shown["header"]["run_id"], run_id.as_str());
    assert_eq!(shown["events"].as_array().unwrap().len(), chat_events.len());
    assert_eq!(shown["events"][0], chat_events[0]);
    let records = shown["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{shown:#}");
    let read = records
        .iter()
        .find(|r| r["tool_id"] == "core__workspace_read")
        .unwrap();
    assert_eq!(read["args"]["path"], "notes.txt");
    assert!(read["result"].to_string().contains("hello"), "{read}");
    assert_eq!(read["error"], Value::Null);
    assert_eq!(read["attempts"], 1);
    assert!(read["duration_ms"].is_u64());
    let receipts = shown["receipts"].as_array().unwrap();
    assert_eq!(receipts.len(), 2, "{shown:#}");
    assert_eq!(receipts[0]["model"], "test-model");
    assert_eq!(receipts[0]["finish_reason"], "tool_calls");
    assert_eq!(receipts[0]["tool_calls"], 2);
    assert_eq!(receipts[1]["finish_reason"], "stop");
    assert_eq!(receipts[1]["tool_calls"], 0);
    let human = cogni(&["runs", "show", &run_id]);
    assert!(human.status.success());
    assert!(!text(&human.stdout).contains("\"raw\""));
    assert!(text(&human.stdout).contains("core__workspace_read"));

    // replay: identical, and nothing written (the notes may even change: tools are not run).
    std::fs::write(dir.path().join("notes.txt"), "changed\n").unwrap();
    let data = dir.path().join("data");
    let before = snapshot(&data);
    let replay = cogni(&["replay", &run_id]);
    assert!(
        replay.status.success(),
        "{}{}",
        text(&replay.stdout),
        text(&replay.stderr)
    );
    assert_eq!(
        text(&replay.stdout).trim_end(),
        format!("replay: {} events identical", chat_events.len())
    );
    assert!(snapshot(&data) == before, "replay wrote to the data folder");
    let list = cogni(&["runs", "list", "--json"]);
    assert_eq!(text(&list.stdout).lines().count(), 1);

    // (a) One recorded event changed: the replay names it.
    let db = rusqlite::Connection::open(data.join("cogni.db")).unwrap();
    let seq: i64 = db
        .query_row(
            "SELECT seq FROM run_events WHERE run_id = ?1 AND event_json LIKE '%\"text_delta\"%' \
             ORDER BY seq DESC LIMIT 1",
            [&run_id],
            |r| r.get(0),
        )
        .unwrap();
    let changed = db
        .execute(
            "UPDATE run_events SET event_json = ?1 WHERE run_id = ?2 AND seq = ?3",
            rusqlite::params![r#"{"type":"text_delta","delta":"tampered"}"#, &run_id, seq],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);
    let replay = cogni(&["replay", &run_id]);
    assert_eq!(replay.status.code(), Some(1), "{}", text(&replay.stderr));
    let out = text(&replay.stdout);
    assert!(
        out.starts_with(&format!("replay: event #{seq} differs: recorded ")),
        "{out}"
    );
    assert!(out.contains("tampered"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");

    // (b) A receipt blob deleted: a clear one-line error naming it, nothing modified.
    let receipt_ref = receipts[1]["receipt_ref"].as_str().unwrap();
    let db = rusqlite::Connection::open(data.join("cogni.db")).unwrap();
    let deleted = db
        .execute("DELETE FROM blobs WHERE hash = ?1", [receipt_ref])
        .unwrap();
    assert_eq!(deleted, 1, "the receipt is a row of the blob table");
    drop(db);
    let before = snapshot(&data);
    let replay = cogni(&["replay", &run_id]);
    assert!(!replay.status.success());
    let err = text(&replay.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains("model call 2") && err.contains(receipt_ref),
        "{err}"
    );
    assert!(replay.stdout.is_empty());
    assert!(
        snapshot(&data) == before,
        "a refused replay wrote to the data folder"
    );

    // (c) An unknown run.
    let replay = cogni(&["replay", "no-such-run"]);
    assert!(!replay.status.success());
    assert_eq!(
        text(&replay.stderr).trim_end(),
        "error: run no-such-run not found"
    );
    let show = cogni(&["runs", "show", "no-such-run"]);
    assert!(!show.status.success());
    assert_eq!(
        text(&show.stderr).trim_end(),
        "error: run no-such-run not found"
    );
}

#[test]
fn runs_need_a_data_folder_with_a_run_log() {
    let dir = tempfile::tempdir().unwrap();
    let output = crate::cogni_command()
        .args(["runs", "list"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let err = text(&output.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: no data folder"), "{err}");

    // An empty folder is refused, and nothing is created in it.
    let output = cogni_in(dir.path(), "http://127.0.0.1:9/v1", &["replay", "r1"]);
    assert!(!output.status.success());
    let err = text(&output.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: no run log in data"), "{err}");
    assert!(!dir.path().join("data").exists());
}

/// `runs list`, `runs show` and `replay` read only the settings they use: a model, server or
/// workspace variable `serve` would refuse (an unknown wire, a time that is no number, an empty
/// token) does not stop them, while a bad data folder or policy variable still does. Before,
/// each took every setting `serve` takes, and clap refused such a variable before it began.
#[test]
fn the_run_log_commands_are_not_stopped_by_settings_they_do_not_use() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let run_id = record_one(dir.path(), &url);
    let with = |args: &[&str], variables: &[(&str, &str)]| {
        let mut command = crate::cogni_command();
        command
            .args(args)
            .current_dir(dir.path())
            .env("COGNI_DATA_DIR", "data");
        for (name, value) in variables {
            command.env(name, value);
        }
        command.output().expect("the cogni binary runs")
    };
    let unused = [
        ("COGNI_LLM_WIRE", "grpc"),
        ("COGNI_LLM_BASE_URL", ""),
        ("COGNI_LLM_REQUEST_TIMEOUT_MS", "soon"),
        ("COGNI_LLM_STATELESS_REASONING", "maybe"),
        ("COGNI_LISTEN", ""),
        ("COGNI_SERVER_TOKEN", ""),
        ("COGNI_WORKSPACE", "no-such-folder"),
        ("COGNI_WORKSPACE_HIDDEN", "maybe"),
    ];
    // Only `replay` runs the runner, which `tools.trace_redacted_results` tells what to trace.
    let runs_unused = [&unused[..], &[("COGNI_TRACE_REDACTED_RESULTS", "maybe")]].concat();
    for (args, unused) in [
        (&["runs", "list"][..], &runs_unused[..]),
        (&["runs", "show", &run_id], &runs_unused),
        (&["replay", &run_id], &unused),
    ] {
        let output = with(args, unused);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        let output = with(args, &[("COGNI_DATA_DIR", "")]);
        assert!(!output.status.success(), "{args:?}");
        assert!(text(&output.stderr).contains("COGNI_DATA_DIR"), "{args:?}");
    }
    let output = with(
        &["replay", &run_id],
        &[("COGNI_POLICY", "no-such-policy.toml")],
    );
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("no-such-policy.toml"),
        "{}",
        text(&output.stderr)
    );
}

/// `replay` records each replayed call's redacted result on its span when
/// `tools.trace_redacted_results` asks for it, read as `tools call` reads it: the flag, else
/// `COGNI_TRACE_REDACTED_RESULTS`, else `cogni.toml`; off unless one of them turns it on. Before,
/// only the config file's setting reached it: its flag and variable were refused or ignored.
#[test]
fn replay_traces_redacted_results_as_tools_call_does() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let run_id = record_one(dir.path(), &url);
    let traced = |extra: &[&str], variables: &[(&str, &str)]| {
        let mut command = crate::cogni_command();
        command
            .args(["replay", &run_id])
            .args(extra)
            .current_dir(dir.path())
            .env("COGNI_DATA_DIR", "data")
            .env("RUST_LOG", "ai_core=debug")
            .envs(variables.iter().copied());
        let output = command.output().expect("the cogni binary runs");
        assert_replayed_identically(&output);
        let stderr = text(&output.stderr);
        assert!(stderr.contains("tool call finished"), "no span: {stderr}");
        stderr.contains("gen_ai.tool.call.result")
    };
    assert!(!traced(&[], &[]), "off by default");
    assert!(traced(&["--trace-redacted-results"], &[]));
    assert!(traced(&[], &[("COGNI_TRACE_REDACTED_RESULTS", "true")]));
    std::fs::write(
        dir.path().join("cogni.toml"),
        "[tools]\ntrace_redacted_results = true\n",
    )
    .unwrap();
    assert!(traced(&[], &[]), "the file's value");
    assert!(!traced(&["--trace-redacted-results=false"], &[]));
    assert!(!traced(&[], &[("COGNI_TRACE_REDACTED_RESULTS", "false")]));
}

/// Records one chat run in `dir` and returns its id.
fn record_one(dir: &Path, url: &str) -> String {
    std::fs::write(dir.join("notes.txt"), "hello\n").unwrap();
    let chat = cogni_in(dir, url, &["chat", "--thread", "t", "--json", "Notes?"]);
    assert!(chat.status.success(), "{}", text(&chat.stderr));
    first_run_id(&cogni_in(dir, url, &["runs", "list", "--json"]))
}

/// Asserts that `replay` of `run_id` fails with one line on stderr containing `expected`, and
/// writes nothing to the data folder.
fn replay_refused(dir: &Path, run_id: &str, expected: &str) {
    let data = dir.join("data");
    let before = snapshot(&data);
    let output = cogni_in(dir, "http://127.0.0.1:9/v1", &["replay", run_id]);
    assert!(!output.status.success());
    let err = text(&output.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: ") && err.contains(expected),
        "{expected:?} not in {err}"
    );
    assert!(output.stdout.is_empty(), "{}", text(&output.stdout));
    assert!(
        snapshot(&data) == before,
        "a refused replay wrote to the data folder"
    );
}

#[test]
fn replay_refuses_a_corrupt_input_an_unfinished_run_and_a_newer_database() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let run_id = record_one(dir.path(), &url);
    let data = dir.path().join("data");
    let show = cogni_in(dir.path(), &url, &["runs", "show", &run_id, "--json"]);
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    let input_ref = shown["header"]["input_ref"].as_str().unwrap().to_owned();

    // A blob whose bytes do not match its address.
    let set_input = |bytes: &[u8]| {
        let db = rusqlite::Connection::open(data.join("cogni.db")).unwrap();
        let updated = db
            .execute(
                "UPDATE blobs SET bytes = ?1 WHERE hash = ?2",
                rusqlite::params![bytes, &input_ref],
            )
            .unwrap();
        assert_eq!(updated, 1, "the run input is a row of the blob table");
    };
    let original: Vec<u8> = rusqlite::Connection::open(data.join("cogni.db"))
        .unwrap()
        .query_row(
            "SELECT bytes FROM blobs WHERE hash = ?1",
            [&input_ref],
            |r| r.get(0),
        )
        .unwrap();
    set_input(b"{\"not\":\"the input\"}");
    replay_refused(dir.path(), &run_id, &input_ref);
    set_input(&original);

    // A run that did not finish.
    let db = rusqlite::Connection::open(data.join("cogni.db")).unwrap();
    db.execute(
        "UPDATE runs SET status = 'interrupted' WHERE run_id = ?1",
        [&run_id],
    )
    .unwrap();
    replay_refused(
        dir.path(),
        &run_id,
        &format!("run {run_id} is interrupted: only a finished run can be replayed"),
    );
    db.execute(
        "UPDATE runs SET status = 'finished' WHERE run_id = ?1",
        [&run_id],
    )
    .unwrap();
    let replay = cogni_in(dir.path(), &url, &["replay", &run_id]);
    assert!(replay.status.success(), "{}", text(&replay.stderr));

    // A database from a newer cogni.
    db.pragma_update(None, "user_version", 99).unwrap();
    drop(db);
    replay_refused(dir.path(), &run_id, "schema version is 99");
    let list = cogni_in(dir.path(), &url, &["runs", "list"]);
    assert!(!list.status.success());
    assert!(text(&list.stderr).contains("schema version is 99"));
}

#[test]
fn a_failed_tool_call_replays_as_it_failed() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    // No notes.txt: the read fails, and the model answers anyway.
    let chat = cogni_in(dir.path(), &url, &["chat", "--json", "Notes?"]);
    assert!(chat.status.success(), "{}", text(&chat.stderr));
    let run_id = &first_run_id(&cogni_in(dir.path(), &url, &["runs", "list", "--json"]));

    let show = cogni_in(dir.path(), &url, &["runs", "show", run_id, "--json"]);
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    let read = shown["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tool_id"] == "core__workspace_read")
        .unwrap()
        .clone();
    assert_eq!(read["result"], Value::Null);
    // A missing file is the model's mistake, told without quoting its path back.
    assert_eq!(read["error"]["code"], "validation", "{read}");
    assert_eq!(
        read["error"]["message"], "invalid tool arguments: nothing exists at the path",
        "{read}"
    );

    // The file exists now: a replay that ran the tool would differ.
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    assert_replayed_identically(&cogni_in(dir.path(), &url, &["replay", run_id]));
}

/// A call refused for its size after the tool ran (`result_too_large`) replays as it was
/// recorded: the same code, category and message, not an execution error.
#[test]
fn an_oversized_result_replays_identically() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    std::fs::write(dir.path().join("notes.txt"), "a".repeat(200)).unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "allowed_tools = [\"core__get_current_time\", \"core__workspace_read\"]\n\
         [budgets]\nmax_result_bytes = 100\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        crate::cogni_command()
            .args(args)
            .current_dir(dir.path())
            .env("COGNI_DATA_DIR", "data")
            .env("COGNI_LLM_BASE_URL", &url)
            .env("COGNI_LLM_MODEL", "test-model")
            .env("COGNI_POLICY", "policy.toml")
            .output()
            .unwrap()
    };
    let chat = run(&["chat", "--json", "Notes?"]);
    assert!(chat.status.success(), "{}", text(&chat.stderr));
    assert!(text(&chat.stdout).contains("result_too_large"));
    let run_id = first_run_id(&run(&["runs", "list", "--json"]));
    assert_replayed_identically(&run(&["replay", &run_id]));
}

/// A `cogni chat` that died left its run open; the next `cogni chat` on the same data folder
/// closes it first (as `cogni serve` does at start), since a dead run's lock is free.
#[test]
fn the_next_chat_closes_a_run_a_dead_chat_left_open() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&[
        "turn-1-tool-calls.sse",
        "turn-2-answer.sse",
        "turn-2-answer.sse",
    ]);
    let run_id = record_one(dir.path(), &url);
    // The process died before its last step: the run is still `running`, with no `Done`.
    let db = rusqlite::Connection::open(dir.path().join("data/cogni.db")).unwrap();
    db.execute(
        "DELETE FROM run_events WHERE run_id = ?1 AND kind = 'done'",
        [&run_id],
    )
    .unwrap();
    db.execute(
        "UPDATE runs SET status = 'running', finished_at_ms = NULL WHERE run_id = ?1",
        [&run_id],
    )
    .unwrap();
    drop(db);

    let chat = cogni_in(dir.path(), &url, &["chat", "--json", "Again?"]);
    assert!(chat.status.success(), "{}", text(&chat.stderr));
    let show = cogni_in(dir.path(), &url, &["runs", "show", &run_id, "--json"]);
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(shown["header"]["status"], "interrupted", "{shown}");
    let events = shown["events"].as_array().unwrap();
    assert_eq!(
        events.last().unwrap(),
        &serde_json::json!({"type": "done", "reason": "error"})
    );
}

/// The schema version of `db` and whether it has the `blobs` table.
fn schema(db: &Path) -> (i64, bool) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let version: i64 = conn
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

/// `runs list`, `runs show` and `replay` only read: a database an older cogni left at schema
/// version 1 (before blob rows) is still at version 1 afterwards, so that cogni still opens it;
/// a folder without a database is named, and none is created.
#[test]
fn the_reading_commands_leave_an_older_database_at_its_version_and_create_none() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    drop(adapters::SqliteStore::open(&data).unwrap());
    std::fs::create_dir(data.join("blobs")).unwrap();
    let db = data.join("cogni.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("DROP TABLE blobs; PRAGMA user_version = 1;")
        .unwrap();
    // No model call is made: the endpoint is never reached.
    let cogni = |args: &[&str]| cogni_in(dir.path(), "http://127.0.0.1:9/v1", args);

    let list = cogni(&["runs", "list", "--json"]);
    assert!(list.status.success(), "{}", text(&list.stderr));
    assert_eq!(text(&list.stdout), "");
    let show = cogni(&["runs", "show", "nope"]);
    assert!(
        text(&show.stderr).contains("run nope not found"),
        "{}",
        text(&show.stderr)
    );
    let replay = cogni(&["replay", "nope"]);
    assert!(
        text(&replay.stderr).contains("run nope not found"),
        "{}",
        text(&replay.stderr)
    );
    assert_eq!(
        schema(&db),
        (1, false),
        "a reading command upgraded the database"
    );

    // Without a database: a one-line error naming it, and no database is created.
    std::fs::remove_dir_all(&data).unwrap();
    for args in [
        &["runs", "list"][..],
        &["runs", "show", "nope"],
        &["replay", "nope"],
    ] {
        let out = cogni(args);
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("cogni.db does not exist"),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(!db.exists(), "{args:?} created the database");
    }
}

/// An answer the output limit cut off (the recorded answer with only its finish reason changed
/// to `length`): `cogni chat` prints it, says it was cut and fails; the run log keeps the run
/// finished with that reason, and its replay ends the same way.
#[test]
fn a_cut_answer_is_said_cut_stored_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-2-answer-length.sse"]);
    let chat = cogni_in(dir.path(), &url, &["chat", "Notes?"]);
    let out = text(&chat.stdout);
    assert_eq!(chat.status.code(), Some(1), "{out}{}", text(&chat.stderr));
    assert!(
        out.starts_with("Your notes say hello.\n[answer cut: ") && out.contains("output limit"),
        "{out}"
    );
    let list = cogni_in(dir.path(), &url, &["runs", "list", "--json"]);
    let row: Value = serde_json::from_str(text(&list.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(row["status"], "finished");
    let run_id = first_run_id(&list);
    let show = cogni_in(dir.path(), &url, &["runs", "show", &run_id, "--json"]);
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    let events = shown["events"].as_array().unwrap();
    assert_eq!(
        events.last().unwrap(),
        &serde_json::json!({"type": "done", "reason": "length"})
    );
    assert_replayed_identically(&cogni_in(dir.path(), &url, &["replay", &run_id]));
}

/// Runs `update` (one row, `?1` the run id) on the run log in `dir`'s data folder.
fn damage(dir: &Path, update: &str, run_id: &str) {
    let db = rusqlite::Connection::open(dir.join("data/cogni.db")).unwrap();
    assert_eq!(db.execute(update, [run_id]).unwrap(), 1, "{update}");
}

/// `cogni runs list` counts each run's events without reading them: a run whose stored events
/// cannot be read is listed with its count like the others, without a warning, and hides none
/// of them; `cogni runs show` is where the damage is reported.
#[test]
fn runs_list_counts_events_without_reading_them() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let damaged = record_one(dir.path(), &url);
    let chat = cogni_in(dir.path(), &url, &["chat", "--thread", "u", "--json", "Hi"]);
    assert!(chat.status.success(), "{}", text(&chat.stderr));
    let before = cogni_in(dir.path(), &url, &["runs", "list", "--json"]);
    let rows = |list: &std::process::Output| -> Vec<Value> {
        text(&list.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let count = |rows: &[Value], id: &str| {
        rows.iter().find(|r| r["run_id"] == id).unwrap()["events"]
            .as_u64()
            .unwrap()
    };
    let stored = count(&rows(&before), &damaged);
    assert!(stored > 1, "{}", text(&before.stdout));
    damage(
        dir.path(),
        "UPDATE run_events SET event_json = 'not json' WHERE run_id = ?1 AND seq = 1",
        &damaged,
    );

    let list = cogni_in(dir.path(), &url, &["runs", "list", "--json"]);
    assert!(list.status.success(), "{}", text(&list.stderr));
    let after = rows(&list);
    assert_eq!(after.len(), 2, "{}", text(&list.stdout));
    assert_eq!(count(&after, &damaged), stored);
    let other = after
        .iter()
        .find(|r| r["run_id"] != damaged.as_str())
        .unwrap();
    assert!(other["events"].as_u64().unwrap() > 0, "{other}");
    assert_eq!(text(&list.stderr), "");

    let table = cogni_in(dir.path(), &url, &["runs", "list"]);
    assert!(table.status.success(), "{}", text(&table.stderr));
    let table = text(&table.stdout);
    assert_eq!(table.lines().count(), 3, "{table}");
    let line = table.lines().find(|l| l.starts_with(&damaged)).unwrap();
    assert!(line.ends_with(&format!(" {stored}")), "{line}");

    let show = cogni_in(dir.path(), &url, &["runs", "show", &damaged]);
    assert!(!show.status.success());
    assert!(
        text(&show.stderr).contains("does not decode"),
        "{}",
        text(&show.stderr)
    );
}

/// A thread whose stored state does not decode is refused by `cogni chat` naming the thread and
/// where the state is wrong, never quoting what it holds (a conversation's text).
#[test]
fn chat_on_an_unreadable_thread_does_not_quote_it() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    record_one(dir.path(), &url);
    let db = rusqlite::Connection::open(dir.path().join("data/cogni.db")).unwrap();
    let state = r#"{"messages":[{"role":"assistant","content":"","tool_calls":"PRIVATE words"}],
        "phase":"idle","steps":0,"max_steps":10}"#;
    let changed = db
        .execute(
            "UPDATE threads SET state_json = ?1 WHERE thread_id = 't'",
            [state],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);
    let chat = cogni_in(dir.path(), &url, &["chat", "--thread", "t", "Again?"]);
    assert!(!chat.status.success());
    let err = text(&chat.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: thread t holds an unreadable state: a value of the wrong type"),
        "{err}"
    );
    assert!(!err.contains("PRIVATE"), "{err}");
}

/// A run whose own row cannot be read is left out of `cogni runs list`, and the store's warning
/// says so on stderr: the CLI logs warnings on every command, not only `serve`.
#[test]
fn runs_list_says_on_stderr_when_it_leaves_a_run_out() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let damaged = record_one(dir.path(), &url);
    damage(
        dir.path(),
        "UPDATE runs SET started_at_ms = 'bogus' WHERE run_id = ?1",
        &damaged,
    );

    let list = cogni_in(dir.path(), &url, &["runs", "list", "--json"]);
    assert!(list.status.success(), "{}", text(&list.stderr));
    assert_eq!(text(&list.stdout), "", "the damaged run is left out");
    let warning = text(&list.stderr);
    assert!(
        warning.contains("left out of the list of runs") && !warning.contains("bogus"),
        "{warning}"
    );
}

/// A run input names its thread's history, one blob per message (stored form 2): a replay reads
/// those with the input, and refuses a run one of them is missing or damaged for with an error
/// naming the run, its input and the message. An input stored whole (form 1, as every input
/// recorded before form 2) replays as it did.
#[test]
fn replay_reads_the_history_an_input_names_and_inputs_stored_whole() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    record_one(dir.path(), &url);
    let chat = cogni_in(
        dir.path(),
        &url,
        &["chat", "--thread", "t", "--json", "More?"],
    );
    assert!(chat.status.success(), "{}", text(&chat.stderr));
    let data = dir.path().join("data");
    let db = rusqlite::Connection::open(data.join("cogni.db")).unwrap();
    let (run_id, input_ref): (String, String) = db
        .query_row(
            "SELECT run_id, input_ref FROM runs ORDER BY rowid DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_replayed_identically(&cogni_in(dir.path(), &url, &["replay", &run_id]));
    let blob = |hash: &str| -> Value {
        let bytes: Vec<u8> = db
            .query_row("SELECT bytes FROM blobs WHERE hash = ?1", [hash], |r| {
                r.get(0)
            })
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    };
    let input = blob(&input_ref);
    assert_eq!(input["stored_form"], 2, "{input}");
    let mut chain = Vec::new();
    let mut next = input["history"]["last"].as_str().map(str::to_owned);
    while let Some(hash) = next {
        let message = blob(&hash);
        next = message["prev"].as_str().map(str::to_owned);
        chain.push((hash, message["message"].clone()));
    }
    let len = chain.len();
    assert!(len >= 4, "the first turn's messages: {len}");
    assert_eq!(input["history"]["len"], len);

    // The same input stored whole, as earlier versions stored it.
    let mut whole = input.clone();
    let object = whole.as_object_mut().unwrap();
    object.remove("stored_form");
    object.remove("history");
    let messages: Vec<Value> = chain.iter().rev().map(|(_, m)| m.clone()).collect();
    whole["thread_state"]["messages"] = Value::Array(messages);
    let bytes = serde_json::to_vec(&whole).unwrap();
    let whole_ref = ai_core::sha256_hex(&bytes);
    db.execute(
        "INSERT INTO blobs (hash, bytes) VALUES (?1, ?2)",
        rusqlite::params![whole_ref, bytes],
    )
    .unwrap();
    db.execute(
        "UPDATE runs SET input_ref = ?1 WHERE run_id = ?2",
        [&whole_ref, &run_id],
    )
    .unwrap();
    assert_replayed_identically(&cogni_in(dir.path(), &url, &["replay", &run_id]));
    db.execute(
        "UPDATE runs SET input_ref = ?1 WHERE run_id = ?2",
        [&input_ref, &run_id],
    )
    .unwrap();

    // The last message's blob damaged, then lost.
    let (last, _) = &chain[0];
    let at = format!("run {run_id}: its input {input_ref}: message {len} of {len} of its history");
    db.execute(
        "UPDATE blobs SET bytes = ?1 WHERE hash = ?2",
        rusqlite::params![b"{}".to_vec(), last],
    )
    .unwrap();
    replay_refused(
        dir.path(),
        &run_id,
        &format!("{at}: blob {last} is corrupt"),
    );
    db.execute("DELETE FROM blobs WHERE hash = ?1", [last])
        .unwrap();
    replay_refused(dir.path(), &run_id, &format!("{at}: blob {last} not found"));
}

/// Stores a copy of the JSON blob `hash` in `data` with `key: value` added to the object at
/// `pointer`, and returns the copy's address.
fn with_key(data: &Path, hash: &str, pointer: &str, key: &str, value: Value) -> String {
    let db = rusqlite::Connection::open(data.join("cogni.db")).unwrap();
    let bytes: Vec<u8> = db
        .query_row("SELECT bytes FROM blobs WHERE hash = ?1", [hash], |r| {
            r.get(0)
        })
        .unwrap();
    let mut json: Value = serde_json::from_slice(&bytes).unwrap();
    let object = json.pointer_mut(pointer).unwrap().as_object_mut().unwrap();
    object.insert(key.to_owned(), value);
    let bytes = serde_json::to_vec(&json).unwrap();
    let copy = ai_core::sha256_hex(&bytes);
    db.execute(
        "INSERT OR IGNORE INTO blobs (hash, bytes) VALUES (?1, ?2)",
        rusqlite::params![copy, bytes],
    )
    .unwrap();
    copy
}

/// A recording that holds a key this build does not read (written by another version) is
/// refused, not silently misread: the key is named when it is a field name, never when it may be
/// a client's text, and the error says what to do. A key whose value is `null` says nothing and
/// is accepted.
#[test]
fn replay_refuses_a_recording_with_a_key_it_does_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let run_id = record_one(dir.path(), &url);
    let data = dir.path().join("data");
    let db = rusqlite::Connection::open(data.join("cogni.db")).unwrap();
    let input_ref: String = db
        .query_row("SELECT input_ref FROM runs", [], |r| r.get(0))
        .unwrap();
    let receipt_ref: String = db
        .query_row(
            "SELECT receipt_ref FROM model_receipts WHERE idx = 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let set_input = |input: &str| {
        db.execute("UPDATE runs SET input_ref = ?1", [input])
            .unwrap();
    };

    set_input(&with_key(
        &data,
        &input_ref,
        "",
        "sandbox",
        Value::from(true),
    ));
    replay_refused(dir.path(), &run_id, "its input");
    let replay = cogni_in(dir.path(), &url, &["replay", &run_id]);
    let err = text(&replay.stderr);
    assert!(
        err.contains(
            "holds the key `sandbox` (at `sandbox`), which this build of cogni does not read"
        ) && err.contains("the run was recorded by another version, and a replay that")
            && err.contains("replay it with the version of cogni that recorded it"),
        "{err}"
    );

    let secret = "Bearer sk-live-123";
    let pointer = "/thread_state/phase";
    set_input(&with_key(
        &data,
        &input_ref,
        pointer,
        secret,
        Value::from(1),
    ));
    replay_refused(
        dir.path(),
        &run_id,
        "holds a key that is not a field name (at `thread_state.phase.*`; not shown)",
    );
    let replay = cogni_in(dir.path(), &url, &["replay", &run_id]);
    assert!(!text(&replay.stderr).contains("sk-live"));

    // A key holding nothing (as fields left out when empty are read back: none, nothing, no
    // text) records nothing a replay could miss.
    for empty in [
        Value::Null,
        serde_json::json!([]),
        serde_json::json!({}),
        Value::from(""),
    ] {
        set_input(&with_key(&data, &input_ref, "", "sandbox", empty));
        assert_replayed_identically(&cogni_in(dir.path(), &url, &["replay", &run_id]));
    }

    set_input(&input_ref);
    let receipt = with_key(&data, &receipt_ref, "", "seed", Value::from(7));
    db.execute(
        "UPDATE model_receipts SET receipt_ref = ?1 WHERE idx = 0",
        [receipt],
    )
    .unwrap();
    replay_refused(dir.path(), &run_id, "model call 1's receipt");
    let replay = cogni_in(dir.path(), &url, &["replay", &run_id]);
    assert!(
        text(&replay.stderr).contains("holds the key `seed`"),
        "{}",
        text(&replay.stderr)
    );
}

/// A run is replayed under the settings it recorded, not today's, and the replay says when
/// today's differ; a run recorded before settings were kept replays under today's, saying so.
#[test]
fn replay_runs_under_the_recorded_settings_and_says_when_todays_differ() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    std::fs::write(dir.path().join("notes.txt"), "a".repeat(200)).unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "allowed_tools = [\"core__get_current_time\", \"core__workspace_read\"]\n\
         [budgets]\nmax_result_bytes = 100\n",
    )
    .unwrap();
    let run = |policy: Option<&str>, args: &[&str]| {
        let mut command = crate::cogni_command();
        command
            .args(args)
            .current_dir(dir.path())
            .env("COGNI_DATA_DIR", "data")
            .env("COGNI_LLM_BASE_URL", &url)
            .env("COGNI_LLM_MODEL", "test-model");
        if let Some(policy) = policy {
            command.env("COGNI_POLICY", policy);
        }
        command.output().unwrap()
    };
    let chat = run(Some("policy.toml"), &["chat", "--json", "Notes?"]);
    assert!(chat.status.success(), "{}", text(&chat.stderr));
    assert!(text(&chat.stdout).contains("result_too_large"));
    let run_id = first_run_id(&run(None, &["runs", "list", "--json"]));

    // Under the recorded policy: identical, and no note.
    let same = run(Some("policy.toml"), &["replay", &run_id]);
    assert_replayed_identically(&same);
    assert!(
        !text(&same.stdout).contains("note"),
        "{}",
        text(&same.stdout)
    );

    // Today's policy (the built-in one) would let the result through: the replay still runs
    // under the recorded one, and says today's differs.
    let today = run(None, &["replay", &run_id]);
    assert_replayed_identically(&today);
    let out = text(&today.stdout);
    assert!(
        out.starts_with(
            "replay: note: today's settings differ from those the run recorded in the policy: \
             it is replayed under the recorded ones"
        ),
        "{out}"
    );

    // A run recorded before settings were kept replays under today's, saying so.
    let data = dir.path().join("data");
    let db = rusqlite::Connection::open(data.join("cogni.db")).unwrap();
    let input_ref: String = db
        .query_row("SELECT input_ref FROM runs", [], |r| r.get(0))
        .unwrap();
    let bytes: Vec<u8> = db
        .query_row(
            "SELECT bytes FROM blobs WHERE hash = ?1",
            [&input_ref],
            |r| r.get(0),
        )
        .unwrap();
    let mut input: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(input["settings"]["policy"].is_object(), "{input}");
    input.as_object_mut().unwrap().remove("settings");
    let bytes = serde_json::to_vec(&input).unwrap();
    let old = ai_core::sha256_hex(&bytes);
    db.execute(
        "INSERT INTO blobs (hash, bytes) VALUES (?1, ?2)",
        rusqlite::params![old, bytes],
    )
    .unwrap();
    db.execute("UPDATE runs SET input_ref = ?1", [&old])
        .unwrap();
    let old_run = run(Some("policy.toml"), &["replay", &run_id]);
    assert_replayed_identically(&old_run);
    assert!(
        text(&old_run.stdout).starts_with(
            "replay: note: the run was recorded before runs kept their settings: it is replayed \
             under today's policy"
        ),
        "{}",
        text(&old_run.stdout)
    );
    // Under today's (other) policy it differs, as it did before settings were kept.
    let differs = run(None, &["replay", &run_id]);
    assert_eq!(differs.status.code(), Some(1), "{}", text(&differs.stdout));
}

/// A recording whose policy holds values a policy check added since refuses (a breaker
/// `window` of 0, `retry.retryable = ["validation"]`) still replays, under that policy as
/// recorded, and the replay says the policy would not load today and why: a check added later
/// must not make old recordings unreadable.
#[test]
fn a_recorded_policy_refused_since_still_replays_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let run_id = record_one(dir.path(), &url);
    let data = dir.path().join("data");
    let db = rusqlite::Connection::open(data.join("cogni.db")).unwrap();
    let input_ref: String = db
        .query_row("SELECT input_ref FROM runs", [], |r| r.get(0))
        .unwrap();
    let old = with_key(
        &data,
        &input_ref,
        "/settings/policy/breaker",
        "window",
        Value::from(0),
    );
    let old = with_key(
        &data,
        &old,
        "/settings/policy/retry",
        "retryable",
        serde_json::json!(["validation"]),
    );
    db.execute("UPDATE runs SET input_ref = ?1", [&old])
        .unwrap();

    let replay = cogni_in(dir.path(), &url, &["replay", &run_id]);
    assert_replayed_identically(&replay);
    let out = text(&replay.stdout);
    assert!(
        out.contains(
            "replay: note: the run's recorded policy would be refused today (invalid tool \
             policy: retry.retryable: \"validation\" is no failure a retry can help"
        ) && out.contains("it is replayed under it as recorded"),
        "{out}"
    );
    assert!(
        out.contains("today's settings differ from those the run recorded in the policy"),
        "{out}"
    );
}

/// A data folder whose lock files cannot be written (its `locks` is a file here; a read-only
/// folder is refused the same way) stops `cogni chat` before its turn, with an error naming
/// that folder.
#[test]
fn chat_names_the_folder_of_a_lock_it_cannot_take() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    record_one(dir.path(), &url);
    let locks = dir.path().join("data/locks");
    if locks.exists() {
        std::fs::remove_dir_all(&locks).unwrap();
    }
    std::fs::write(&locks, "").unwrap();
    let chat = cogni_in(dir.path(), &url, &["chat", "--thread", "t", "Again?"]);
    assert!(!chat.status.success());
    assert_eq!(
        text(&chat.stderr),
        "error: data_dir: cannot write run locks in data/locks: something that is not a folder \
         is there\n"
    );
}

/// A message without text (empty or whitespace only) is refused on one line, before a data
/// folder is opened or anything is sent to the model.
#[test]
fn chat_refuses_a_message_without_text() {
    for message in ["", " \n\t "] {
        let dir = tempfile::tempdir().unwrap();
        let url = crate::fake::endpoint(&["turn-2-answer.sse"]);
        let chat = cogni_in(dir.path(), &url, &["chat", message]);
        assert_eq!(chat.status.code(), Some(1), "{}", text(&chat.stdout));
        assert_eq!(
            text(&chat.stderr),
            "error: the message holds no text: there is nothing to send to the model\n"
        );
        assert!(chat.stdout.is_empty());
        assert!(!dir.path().join("data").exists());
    }
}

/// A policy naming tools no tool source has starts the turn with one warning line naming them.
#[test]
fn chat_warns_of_policy_tools_no_source_has() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "allowed_tools = [\"core__workspace_raed\", \"core__get_current_time\"]\n\
         [retry_per_tool.core__get_curent_time]\n",
    )
    .unwrap();
    let url = crate::fake::endpoint(&["turn-2-answer.sse"]);
    let chat = crate::cogni_command()
        .args(["chat", "Hi"])
        .current_dir(dir.path())
        .env("COGNI_LLM_BASE_URL", &url)
        .env("COGNI_LLM_MODEL", "test-model")
        .env("COGNI_POLICY", "policy.toml")
        .output()
        .unwrap();
    assert!(chat.status.success(), "{}", text(&chat.stderr));
    assert_eq!(
        text(&chat.stderr),
        "warning: the policy names tools no tool source has, so its rules for them apply to nothing (a \
         typo?): core__get_curent_time, core__workspace_raed\n"
    );
}

/// A run id no run can have is refused by `runs show` and `replay` saying why, in the words
/// `cogni chat --thread` uses for a thread id, not echoed in Rust's debug form.
#[test]
fn an_invalid_run_id_is_refused_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    record_one(dir.path(), &url);
    for (id, why) in [
        ("", "it is empty"),
        ("a\u{1b}[2Jb", "it contains a control character"),
    ] {
        for command in [&["runs", "show", id][..], &["replay", id]] {
            let output = cogni_in(dir.path(), &url, command);
            assert!(!output.status.success(), "{command:?}");
            assert_eq!(
                text(&output.stderr),
                format!("error: invalid run_id: {why}\n"),
                "{command:?}"
            );
        }
    }
}

/// A data folder path that is a file, or a `cogni.db` that is a folder, is refused saying so:
/// not said not to exist.
#[test]
fn runs_name_a_data_folder_that_is_a_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data"), "").unwrap();
    let url = "http://127.0.0.1:9/v1";
    for command in [&["runs", "list"][..], &["replay", "r1"]] {
        let output = cogni_in(dir.path(), url, command);
        assert!(!output.status.success(), "{command:?}");
        assert_eq!(
            text(&output.stderr),
            "error: no run log in data: it is not a folder\n"
        );
    }
    std::fs::remove_file(dir.path().join("data")).unwrap();
    std::fs::create_dir_all(dir.path().join("data/cogni.db")).unwrap();
    let output = cogni_in(dir.path(), url, &["runs", "show", "r1"]);
    assert!(!output.status.success());
    assert_eq!(
        text(&output.stderr),
        "error: no run log in data: data/cogni.db is not a file\n"
    );
}

/// `runs list`, `runs show` and `replay` call no model and run no tool: a machine without the
/// model's config or today's workspace folder inspects and replays runs all the same, while the
/// settings they do read (the data folder, and for replay the tool set and policy it compares
/// the recorded ones with) are still refused when bad.
#[test]
fn the_reading_commands_need_neither_the_model_config_nor_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let run_id = record_one(dir.path(), &url);
    let cogni = |env: &[(&str, &str)], args: &[&str]| {
        let mut command = crate::cogni_command();
        command
            .args(args)
            .current_dir(dir.path())
            .env("COGNI_DATA_DIR", "data")
            .env("COGNI_LLM_BASE_URL", "nope")
            .env("COGNI_LISTEN", "nowhere")
            .env("COGNI_WORKSPACE", "no-such-folder");
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().expect("the cogni binary runs")
    };
    for args in [
        &["runs", "list"][..],
        &["runs", "show", &run_id],
        &["replay", &run_id],
    ] {
        let output = cogni(&[], args);
        assert!(
            output.status.success(),
            "{args:?}: {}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
    }
    assert_replayed_identically(&cogni(&[], &["replay", &run_id]));
    // `runs` reads no policy; replay compares today's with the recorded one.
    let missing_policy = [("COGNI_POLICY", "no-such-policy.toml")];
    assert!(cogni(&missing_policy, &["runs", "list"]).status.success());
    let refused = |env: &[(&str, &str)], args: &[&str], expected: &str| {
        let output = cogni(env, args);
        assert!(!output.status.success(), "{args:?}");
        let err = text(&output.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: ") && err.contains(expected),
            "{expected:?} not in {err}"
        );
    };
    refused(&missing_policy, &["replay", &run_id], "tools.policy_file");
    std::fs::write(
        dir.path().join("cogni.toml"),
        "[tools]\nenabled = [\"core__nope\"]\n",
    )
    .unwrap();
    refused(&[], &["replay", &run_id], "tools.enabled: unknown tool");
    // A config file that does not parse is refused by every command that reads it.
    std::fs::write(dir.path().join("cogni.toml"), "[tools\n").unwrap();
    refused(&[], &["runs", "list"], "cogni.toml");
    std::fs::write(dir.path().join("cogni.toml"), "data_dir = \"\"\n").unwrap();
    refused(&[], &["runs", "list"], "data_dir: the path is empty");
}

/// The tool set a run was recorded with (`tools.enabled`) is recorded with its settings: a
/// replay binds it, not today's, and says when today's differs, as it does of the policy. A
/// run recorded before the tool set was kept replays with today's, saying so.
#[test]
fn a_replay_binds_the_recorded_tool_set_and_says_when_todays_differs() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let run_id = record_one(dir.path(), &url);
    let replay = || cogni_in(dir.path(), &url, &["replay", &run_id]);
    let same = replay();
    assert_replayed_identically(&same);
    assert!(
        !text(&same.stdout).contains("note"),
        "{}",
        text(&same.stdout)
    );

    // Today's tool set lacks the recorded run's `core__workspace_read`.
    std::fs::write(
        dir.path().join("cogni.toml"),
        "[tools]\nenabled = [\"core__get_current_time\"]\n",
    )
    .unwrap();
    let fewer = replay();
    assert_replayed_identically(&fewer);
    let out = text(&fewer.stdout);
    assert!(
        out.starts_with(
            "replay: note: today's settings differ from those the run recorded in \
             tools.enabled: it is replayed under the recorded ones"
        ),
        "{out}"
    );

    // Recorded before the tool set was kept: today's is bound, and the replay says so.
    let data = dir.path().join("data");
    let db = rusqlite::Connection::open(data.join("cogni.db")).unwrap();
    let input_ref: String = db
        .query_row("SELECT input_ref FROM runs", [], |r| r.get(0))
        .unwrap();
    let bytes: Vec<u8> = db
        .query_row(
            "SELECT bytes FROM blobs WHERE hash = ?1",
            [&input_ref],
            |r| r.get(0),
        )
        .unwrap();
    let mut input: Value = serde_json::from_slice(&bytes).unwrap();
    let settings = input["settings"].as_object_mut().unwrap();
    assert!(settings.remove("tools").is_some(), "{input}");
    let bytes = serde_json::to_vec(&input).unwrap();
    let old = ai_core::sha256_hex(&bytes);
    db.execute(
        "INSERT INTO blobs (hash, bytes) VALUES (?1, ?2)",
        rusqlite::params![old, bytes],
    )
    .unwrap();
    db.execute("UPDATE runs SET input_ref = ?1", [&old])
        .unwrap();
    std::fs::remove_file(dir.path().join("cogni.toml")).unwrap();
    let old_run = replay();
    assert_replayed_identically(&old_run);
    assert!(
        text(&old_run.stdout).starts_with(
            "replay: note: the run was recorded before runs kept their tool set: it is replayed \
             with today's tools.enabled"
        ),
        "{}",
        text(&old_run.stdout)
    );
}

/// A run log recording more model calls than the replay asks for (a receipt row added by hand
/// here; a loop that stops sooner than it did) fails the replay, saying so, though every event
/// comes out the same.
#[test]
fn a_replay_that_leaves_recorded_model_calls_unasked_fails_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let run_id = record_one(dir.path(), &url);
    damage(
        dir.path(),
        "INSERT INTO model_receipts (run_id, idx, receipt_ref) \
         SELECT run_id, idx + 1, receipt_ref FROM model_receipts \
         WHERE run_id = ?1 ORDER BY idx DESC LIMIT 1",
        &run_id,
    );
    let replay = cogni_in(dir.path(), &url, &["replay", &run_id]);
    let out = text(&replay.stdout);
    assert!(!replay.status.success(), "{out}{}", text(&replay.stderr));
    assert!(
        out.contains("events identical, but 1 recorded model call was never asked for"),
        "{out}"
    );
}

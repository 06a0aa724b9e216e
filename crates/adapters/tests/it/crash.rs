//! A process killed with SIGKILL in the middle of a run: every step it acknowledged is there,
//! whole; no step is there in part; every blob a stored receipt names is readable; recovery
//! names the call that was in flight; and the thread takes the next run.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use adapters::{FsBlobStore, SqliteStore};
use ai_core::{
    AiEvent, BlobStore, RunStatus, RunStep, RunStore, ThreadId, ThreadStore, ToolErrorCode,
    ToolFailure, ToolOutcome,
};
use serde_json::json;

use crate::support::{call, done, run, running};

const PROBE: &str = env!("CARGO_BIN_EXE_cogni-store-crash-probe");

fn spawn_probe(data_dir: &std::path::Path, run_id: &str, mode: &str) -> Child {
    spawn_probe_in(Command::new(PROBE), data_dir, run_id, mode)
}

/// [`spawn_probe`] with `command` (its working directory set, say).
fn spawn_probe_in(
    mut command: Command,
    data_dir: &std::path::Path,
    run_id: &str,
    mode: &str,
) -> Child {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}\t{run_id}\t{mode}", data_dir.display()).unwrap();
    child
}

/// Reads `ack`/`inflight` lines until `stop` says so; returns the last acknowledged event count.
fn read_acks(child: &mut Child, mut stop: impl FnMut(&str, usize) -> bool) -> u64 {
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut acked = 0;
    for (n, line) in stdout.lines().enumerate() {
        let line = line.unwrap();
        let mut fields = line.split(' ');
        let (_, seq) = (fields.next(), fields.next().unwrap());
        acked = seq.parse().unwrap();
        if stop(&line, n + 1) {
            break;
        }
    }
    // SIGKILL on unix.
    child.kill().unwrap();
    child.wait().unwrap();
    acked
}

/// Checks a killed run: whole steps only, every acknowledged event, readable receipts.
async fn check_integrity(dir: &std::path::Path, run_id: &str, acked: u64) -> ai_core::RunLog {
    let store = SqliteStore::open(dir).unwrap();
    let blobs = FsBlobStore::open(dir).unwrap();
    let log = store.load_run(&run(run_id)).await.unwrap();
    assert_eq!(log.header.status, RunStatus::Running);
    assert!(
        log.events.len() as u64 >= acked,
        "acknowledged {acked} events, found {}",
        log.events.len()
    );
    // Complete steps are 4 events and have one record and one receipt each; a step is all there
    // or not at all.
    let whole_steps = log.records.len();
    assert_eq!(log.receipt_refs.len(), whole_steps);
    assert!(log.events.len() == whole_steps * 4 || log.events.len() == whole_steps * 4 + 1);
    for receipt in &log.receipt_refs {
        blobs.get(receipt).await.unwrap();
    }
    let thread = ThreadId::new(format!("thread-of-{run_id}")).unwrap();
    assert_eq!(
        store.load(&thread).await.unwrap(),
        Some(json!({"step": whole_steps - 1}))
    );
    log
}

#[cfg(unix)]
#[tokio::test]
async fn a_run_killed_with_a_tool_in_flight_recovers_and_the_thread_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_probe(dir.path(), "killed", "inflight");
    let acked = read_acks(&mut child, |line, _| line.starts_with("inflight"));
    let log = check_integrity(dir.path(), "killed", acked).await;
    assert_eq!(log.events.len() as u64, acked);
    assert_eq!(log.records.len(), 20);

    let store = SqliteStore::open(dir.path()).unwrap();
    let recovered = store
        .recover_interrupted(1_000, &running(&store).await)
        .await
        .unwrap();
    assert_eq!(recovered.len(), 1);
    let interrupted = &recovered[0];
    assert_eq!(interrupted.run_id, run("killed"));
    let dangling: Vec<_> = interrupted
        .dangling
        .iter()
        .map(|d| d.tool_call_id.clone())
        .collect();
    assert_eq!(dangling, vec![call("call_inflight")]);

    // The caller answers the call in flight, ends the run and repairs the thread, in one step.
    let mut answers: Vec<AiEvent> = interrupted
        .dangling
        .iter()
        .map(|d| AiEvent::ToolCallResult {
            tool_call_id: d.tool_call_id.clone(),
            tool_name: d.tool_name.as_str().into(),
            outcome: ToolOutcome::Error(ToolFailure::new(
                ToolErrorCode::Cancelled,
                "interrupted: the process stopped while the tool ran",
            )),
        })
        .collect();
    answers.push(done());
    let thread = interrupted.thread_id.clone().unwrap();
    store
        .commit_step(
            &run("killed"),
            RunStep {
                events: answers,
                thread_state: Some(json!({"step": 19, "repaired": true})),
                ..RunStep::default()
            },
        )
        .await
        .unwrap();
    assert!(
        store
            .recover_interrupted(2_000, &running(&store).await)
            .await
            .unwrap()
            .is_empty()
    );
    let log = store.load_run(&run("killed")).await.unwrap();
    assert_eq!(log.header.status, RunStatus::Interrupted);
    assert!(matches!(
        &log.events[log.events.len() - 2..],
        [AiEvent::ToolCallResult { tool_call_id, .. }, AiEvent::Done { .. }]
            if *tool_call_id == call("call_inflight")
    ));

    // The next turn on the same thread works.
    let next = run("next-turn");
    store
        .begin_run(&next, Some(&thread), 3_000, None)
        .await
        .unwrap();
    store
        .commit_step(
            &next,
            RunStep {
                events: vec![done()],
                thread_state: Some(json!({"step": 20})),
                ..RunStep::default()
            },
        )
        .await
        .unwrap();
    store.finish_run(&next, 3_001).await.unwrap();
    assert_eq!(
        store.load(&thread).await.unwrap(),
        Some(json!({"step": 20}))
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_run_killed_while_it_writes_keeps_every_acknowledged_step_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_probe(dir.path(), "flooded", "flood");
    // Kill it while it keeps committing (no pause between steps).
    let acked = read_acks(&mut child, |_, n| n >= 15);
    let log = check_integrity(dir.path(), "flooded", acked).await;
    assert!(log.records.len() >= 15);
    let store = SqliteStore::open(dir.path()).unwrap();
    let recovered = store
        .recover_interrupted(1_000, &running(&store).await)
        .await
        .unwrap();
    assert_eq!(recovered.len(), 1);
    assert!(
        recovered[0].dangling.is_empty(),
        "{:?}",
        recovered[0].dangling
    );
}

/// A relative data folder whose name reads as an SQLite URI (`file:…`) is a folder all the
/// same: the store opens `<data_dir>/cogni.db` in it, never the file the URI would name. (Run in
/// a child process, whose working directory the test sets, so that no test thread's changes.)
#[cfg(unix)]
#[test]
fn a_data_dir_named_like_an_sqlite_uri_is_a_folder() {
    let cwd = tempfile::tempdir().unwrap();
    // As a URI, `file:elsewhere/cogni.db` is `elsewhere/cogni.db`.
    std::fs::create_dir(cwd.path().join("elsewhere")).unwrap();
    let mut command = Command::new(PROBE);
    command.current_dir(cwd.path());
    let mut child = spawn_probe_in(
        command,
        std::path::Path::new("file:elsewhere"),
        "run-uri",
        "inflight",
    );
    let mut lines = 0;
    read_acks(&mut child, |_, n| {
        lines = n;
        true
    });
    assert_eq!(lines, 1, "the probe acknowledged no step");
    assert!(cwd.path().join("file:elsewhere").join("cogni.db").is_file());
    assert!(!cwd.path().join("elsewhere").join("cogni.db").exists());
}

/// A mode the probe does not know is refused at once, naming the modes, before anything is
/// written: it is not taken for `inflight` (a typo would otherwise run 20 steps and then sleep).
#[test]
fn the_probe_refuses_a_mode_it_does_not_know() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(PROBE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}\trun-1\tinflihgt", data.display()).unwrap();
    drop(stdin);
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // Killed in case it went on (it then sleeps): the assertions below say what it did.
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    assert_eq!(first, "", "the probe ran the unknown mode");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("inflight|flood"), "{stderr}");
    assert!(!data.exists(), "the probe wrote a data folder");
}

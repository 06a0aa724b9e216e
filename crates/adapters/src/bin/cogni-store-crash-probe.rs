//! A test helper, not a tool: writes a run into a data directory step by step, printing an `ack`
//! line after each step is committed, so a test can kill it (SIGKILL) at a known point and check
//! what survived. Used by `tests/it/crash.rs`.
//!
//! It reads one line from standard input (it takes no arguments and reads no environment):
//! `<DATA_DIR>\t<RUN_ID>\t<MODE>`, where MODE is
//! - `inflight`: 20 complete steps, then one that starts a tool call and never answers it
//!   (it sleeps after printing `inflight <CALL_ID>`);
//! - `flood`: complete steps as fast as it can until it is killed.
//!
//! Each complete step is one model step (text, usage, a receipt blob) with one tool call started
//! and answered (its record and its tool call blob), and the thread's new state.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use adapters::{FsBlobStore, SqliteStore};
use ai_core::{
    AiEvent, BlobStore, RunId, RunStep, RunStore, ThreadId, ToolCallBlob, ToolCallId,
    ToolInvocationRecord, ToolOutcome, Usage, canonical_bytes,
};
use serde_json::json;

fn main() -> ExitCode {
    let mut line = String::new();
    if let Err(e) = std::io::stdin().read_line(&mut line) {
        eprintln!("cannot read standard input: {e}");
        return ExitCode::from(2);
    }
    let parts: Vec<&str> = line.trim_end_matches(['\r', '\n']).split('\t').collect();
    // A mode it does not know is refused too, not taken for `inflight`.
    let [data_dir, run_id, mode @ ("inflight" | "flood")] = parts.as_slice() else {
        eprintln!("expected one line on standard input: <DATA_DIR>\\t<RUN_ID>\\t<inflight|flood>");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(data_dir, run_id, mode)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn call_start(id: &ToolCallId) -> AiEvent {
    AiEvent::ToolCallStart {
        tool_call_id: id.clone(),
        tool_name: "core__get_current_time".into(),
        args: Some(Arc::new(json!({"tz": "UTC"}))),
    }
}

async fn run(data_dir: &str, run_id: &str, mode: &str) -> Result<(), String> {
    let blobs = FsBlobStore::open(data_dir).map_err(|e| e.to_string())?;
    let store = SqliteStore::open(data_dir).map_err(|e| e.to_string())?;
    let run = RunId::new(run_id).map_err(|e| e.to_string())?;
    let thread = ThreadId::new(format!("thread-of-{run_id}")).map_err(|e| e.to_string())?;
    store
        .begin_run(&run, Some(&thread), 1, None)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    let steps = if mode == "flood" { u64::MAX } else { 20 };
    for step in 0..steps {
        let id = ToolCallId::new(format!("call_{step}")).map_err(|e| e.to_string())?;
        let call = ToolCallBlob {
            id: id.as_str().to_owned(),
            name: "core__get_current_time".into(),
            arguments_json: format!("{{\"tz\": \"UTC\", \"step\": {step}}}"),
        };
        let receipt = json!({"step": step, "call": call.id});
        let blobs_of_step = [
            canonical_bytes(&call).map_err(|e| e.to_string())?,
            canonical_bytes(&receipt).map_err(|e| e.to_string())?,
        ];
        let slices: Vec<&[u8]> = blobs_of_step.iter().map(Vec::as_slice).collect();
        let hashes = blobs.put_many(&slices).await.map_err(|e| e.to_string())?;
        let record = ToolInvocationRecord {
            tool_call_id: id.clone(),
            tool_id: "core__get_current_time".into(),
            args: Some(Arc::new(json!({"tz": "UTC"}))),
            result: Some(Arc::new(json!({"unix_ms": step}))),
            error: None,
            started_at_ms: step,
            ended_at_ms: step,
            attempts: vec![],
            raw: None,
        };
        let events = vec![
            AiEvent::TextDelta {
                delta: format!("step {step}"),
            },
            call_start(&id),
            AiEvent::ToolCallResult {
                tool_call_id: id.clone(),
                tool_name: "core__get_current_time".into(),
                outcome: ToolOutcome::Ok {
                    value: Arc::new(json!({"unix_ms": step})),
                },
            },
            AiEvent::Usage {
                usage: Usage::new(step, 1, step + 1),
            },
        ];
        let seqs = store
            .commit_step(
                &run,
                RunStep {
                    events,
                    records: vec![record],
                    receipt_refs: vec![hashes[1].clone()],
                    thread_state: Some(json!({"step": step})),
                    ..RunStep::default()
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        writeln!(out, "ack {} {}", seqs.end, hashes[1]).map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    let id = ToolCallId::new("call_inflight").map_err(|e| e.to_string())?;
    let seqs = store
        .commit_step(
            &run,
            RunStep {
                events: vec![call_start(&id)],
                ..RunStep::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    writeln!(out, "inflight {} {}", seqs.end, id).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    // The tool runs "forever": the test kills the process here.
    std::thread::sleep(std::time::Duration::from_secs(60));
    Err("the probe was not killed".into())
}

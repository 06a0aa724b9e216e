//! Crash safety: `cogni serve` killed with SIGKILL mid-run (its tools answered, its next model
//! call in flight), then started again on the same data folder. The thread must be intact: every
//! started call has exactly one result, every event the client was shown is in the run log, the
//! run is closed as interrupted, and the next turn works and sees the repaired turn. (A call left
//! without a result by a crash is answered `interrupted`: `record::tests` and the adapters' crash
//! tests cover that part; the workspace tools cannot be held in flight from outside, since a
//! read refuses what could block it.)

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};

use ai_core::{AiEvent, RunId, RunStatus, RunStore, ToolOutcome};
use serde_json::Value;

/// A server process, killed (SIGKILL) when dropped, so a failing test leaves none behind.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cogni serve` on a free port and returns it with its address.
fn serve(dir: &Path, endpoint: &str) -> (Server, String) {
    let mut server = crate::cogni_command()
        .arg("serve")
        .current_dir(dir)
        .env("COGNI_LLM_BASE_URL", endpoint)
        .env("COGNI_LLM_MODEL", "test-model")
        .env("COGNI_LISTEN", "127.0.0.1:0")
        .env("COGNI_DATA_DIR", dir.join("data"))
        .env("COGNI_WORKSPACE", dir.join("workspace"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(server.stderr.take().unwrap());
    let mut addr = None;
    for _ in 0..20 {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(rest) = line.split("listening on http://").nth(1) {
            addr = rest.split_whitespace().next().map(str::to_owned);
            break;
        }
    }
    let addr = addr.expect("the server printed its address");
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (Server(server), addr)
}

/// Posts an AG-UI run and returns the reader of its SSE body (past the response head).
fn post_run(addr: &str, thread: &str, run: &str, text: &str) -> BufReader<TcpStream> {
    let body = serde_json::json!({
        "threadId": thread, "runId": run, "state": {}, "tools": [], "context": [],
        "forwardedProps": {}, "messages": [{"id": run, "role": "user", "content": text}]
    })
    .to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /api/v1/agui HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
    }
    reader
}

/// The next AG-UI event on the stream (chunked transfer framing lines are skipped).
fn next_event(reader: &mut BufReader<TcpStream>) -> Option<Value> {
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(json) = line.trim_end().strip_prefix("data: ") {
            return serde_json::from_str(json).ok();
        }
    }
}

#[test]
fn a_killed_server_leaves_an_intact_thread_and_the_next_turn_works() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "hello").unwrap();
    // The model call after the tools never answers: the run is in flight when it is killed.
    let (endpoint, requests) = crate::fake::recording_endpoint(&[
        "turn-1-tool-calls.sse",
        crate::fake::STALL,
        "turn-2-answer.sse",
    ]);

    let (server, addr) = serve(dir.path(), &endpoint);
    let mut stream = post_run(&addr, "t-crash", "run-1", "what do my notes say?");
    let mut shown = Vec::new();
    let seen = |shown: &[Value], kind: &str, id: &str| {
        shown
            .iter()
            .any(|e| e["type"] == kind && e["toolCallId"] == id)
    };
    // Kill once both calls have answered and the next model call is in flight.
    while !(seen(&shown, "TOOL_CALL_RESULT", "call_time")
        && seen(&shown, "TOOL_CALL_RESULT", "call_read"))
    {
        shown.push(next_event(&mut stream).expect("the stream goes on until the kill"));
    }
    while requests.lock().unwrap().len() < 2 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(server); // SIGKILL, mid-run

    // Restart: recovery closes the run before the server listens.
    let (_server, addr) = serve(dir.path(), &endpoint);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let log = runtime.block_on(async {
        let data = dir.path().join("data");
        let store = adapters::SqliteStore::open(&data).unwrap();
        let log = store.load_run(&RunId::new("run-1").unwrap()).await.unwrap();
        // Every blob a committed row names survived the kill: the run's input and each
        // receipt with the blobs it refers to.
        let limit = adapters::TieredBlobStore::DEFAULT_MAX_ROW_BYTES;
        let blobs = adapters::TieredBlobStore::open(&store, &data, limit).unwrap();
        let input_ref = log
            .header
            .input_ref
            .as_deref()
            .expect("the run input is kept");
        bootstrap::RunInput::load(&blobs, input_ref)
            .await
            .expect("the run input and its history's message blobs survived");
        assert!(
            !log.receipt_refs.is_empty(),
            "the first model call was committed"
        );
        for receipt_ref in &log.receipt_refs {
            let receipt = ai_core::ModelReceipt::load(&blobs, receipt_ref)
                .await
                .unwrap();
            receipt.load_completion(&blobs).await.unwrap();
        }
        log
    });
    assert_eq!(log.header.status, RunStatus::Interrupted);
    // Every event the client was shown is in the log: the text, every call and every result.
    let text: String = log
        .events
        .iter()
        .filter_map(|e| match e {
            AiEvent::TextDelta { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    let shown_text: String = shown
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(text.starts_with(&shown_text), "{text:?} vs {shown_text:?}");
    for event in shown.iter().filter(|e| e["type"] == "TOOL_CALL_RESULT") {
        let id = event["toolCallId"].as_str().unwrap();
        assert!(
            log.events.iter().any(|e| matches!(e,
                AiEvent::ToolCallResult { tool_call_id, .. } if tool_call_id.as_str() == id)),
            "{id} was shown but not kept"
        );
    }
    // Every started call has exactly one result.
    for id in ["call_time", "call_read"] {
        let results: Vec<&ToolOutcome> = log
            .events
            .iter()
            .filter_map(|e| match e {
                AiEvent::ToolCallResult {
                    tool_call_id,
                    outcome,
                    ..
                } if tool_call_id.as_str() == id => Some(outcome),
                _ => None,
            })
            .collect();
        assert_eq!(results.len(), 1, "{id}: {results:?}");
    }
    let read = log.events.iter().any(|e| {
        matches!(e,
        AiEvent::ToolCallResult { tool_call_id, outcome: ToolOutcome::Ok { value }, .. }
            if tool_call_id.as_str() == "call_read" && value.to_string().contains("hello"))
    });
    assert!(read, "{:?}", log.events);
    let closing = &log.events[log.events.len() - 2..];
    assert!(
        matches!(closing, [AiEvent::Error { message }, AiEvent::Done { .. }] if message.contains("interrupted")),
        "{closing:?}"
    );

    // The next turn on the same thread works, and the model sees the repaired turn.
    let mut next = post_run(&addr, "t-crash", "run-2", "and now?");
    let mut last = None;
    while let Some(event) = next_event(&mut next) {
        last = Some(event);
    }
    assert_eq!(last.unwrap()["type"], "RUN_FINISHED");
    let sent = requests.lock().unwrap().last().unwrap().clone();
    assert!(
        sent.contains("hello") && sent.contains("and now?"),
        "the repaired turn (the read's result) and the new message: {sent}"
    );
}

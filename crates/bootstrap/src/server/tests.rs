//! Unit tests of the server: approval answers, run starts and ends, request limits, and what
//! a client that leaves or stops reading sees. The HTTP round trips are in `tests/it/server.rs`.

use std::sync::{Arc, Mutex};

use ai_core::{AiEvent, RunId, RunStatus, RunStep, ThreadId, ToolCallId};
use serde_json::json;

use super::prepare;

/// A refusal of approval answers names the calls the thread waits for with their ids
/// escaped: a model's call id may hold control characters, which must not reach the client's
/// error text (or a terminal showing it) raw.
#[test]
fn approval_refusals_show_call_ids_escaped() {
    let state: graph::AgentState = serde_json::from_value(serde_json::json!({
        "messages": [],
        "phase": {"phase": "awaiting_approval", "calls": [], "answered": [], "pending": [
            {"tool_call_id": "call_a\u{1b}[2J\nforged", "args_hash": "h1"},
            {"tool_call_id": "call_b", "args_hash": "h2"}
        ]},
        "steps": 1,
        "max_steps": 5
    }))
    .unwrap();
    let answer = |id: &str| super::Answer {
        call_id: id.to_owned(),
        approved: true,
        reason: None,
    };
    let odd = "call_a\u{1b}[2J\nforged";
    for answers in [
        vec![answer("call_other")],
        vec![answer(odd), answer("call_b"), answer(odd)],
    ] {
        let Err(refusal) = super::decisions(&state, answers) else {
            panic!("answers were accepted");
        };
        let message = refusal.message;
        assert!(!message.chars().any(char::is_control), "{message}");
        assert!(message.contains(r"call_a\u{1b}[2J\nforged"), "{message}");
    }
}

/// What tracing wrote, as text.
#[derive(Clone, Default)]
pub(super) struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures what tracing writes on this thread while the returned guard lives.
    pub(super) fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// What was written so far.
    pub(super) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Ends at the first `Done`, framing each event as its variant's name.
struct Names(bool);

impl super::Translate for Names {
    fn frames(&mut self, event: &AiEvent) -> String {
        self.0 |= matches!(event, AiEvent::Done { .. });
        let name = serde_json::to_value(event).unwrap()["type"].clone();
        format!("data: {name}\n\n")
    }

    fn cut(&mut self, message: &str) -> String {
        self.0 = true;
        format!("data: {}\n\n", serde_json::json!({"cut": message}))
    }

    fn finished(&self) -> bool {
        self.0
    }
}

/// A run as `start_run` returns it, fed through the returned sender.
fn started() -> (
    tokio::sync::mpsc::UnboundedSender<AiEvent>,
    super::StartedRun,
) {
    let (sender, events) = tokio::sync::mpsc::unbounded_channel();
    let unsent = Arc::new(super::relay::Unsent::default());
    let run = super::StartedRun {
        events: super::relay::relay(events, super::relay::Bounds::default(), unsent),
        cancel: ai_core::CancellationToken::new(),
        resumed: Vec::new(),
        superseded: Vec::new(),
        copy_holds_turn: false,
    };
    (sender, run)
}

#[tokio::test(start_paused = true)]
async fn a_silent_run_keeps_its_stream_alive_with_comments_until_it_ends() {
    use futures_util::StreamExt;

    let (sender, run) = started();
    let response = super::sse_response(
        "data: \"first\"\n\n".into(),
        run,
        Names(false),
        Vec::new(),
        &[],
    );
    let mut body = response.into_body().into_data_stream();
    // Time is paused: a stream that stays silent fails here after a minute of virtual time.
    let mut next = async || {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(60), body.next());
        String::from_utf8(frame.await.expect("a frame").unwrap().unwrap().to_vec())
    };

    assert_eq!(next().await.unwrap(), "data: \"first\"\n\n");
    let silent = tokio::time::Instant::now();
    assert_eq!(next().await.unwrap(), super::KEEP_ALIVE_FRAME);
    assert_eq!(silent.elapsed(), super::KEEP_ALIVE);
    assert_eq!(next().await.unwrap(), super::KEEP_ALIVE_FRAME);
    sender
        .send(AiEvent::Done {
            reason: ai_core::DoneReason::Stop,
        })
        .unwrap();
    assert_eq!(next().await.unwrap(), "data: \"done\"\n\n");
    assert!(
        body.next().await.is_none(),
        "nothing after the terminal frame"
    );
}

/// Events a translator sends nothing for (a tool's retries here) do not keep a stream alive:
/// a comment still follows 15 s after the last frame, not after the last event, so a tool
/// retried every 10 s does not leave the connection silent past a proxy's idle timeout.
#[tokio::test(start_paused = true)]
async fn events_that_send_nothing_do_not_delay_the_keep_alive() {
    use futures_util::StreamExt;

    let (sender, run) = started();
    let mut translator = wire_ui::agui::Translator::new("t-retry", "r-retry");
    let first = translator.start().iter().map(wire_ui::sse::frame).collect();
    let response =
        super::sse_response(first, run, super::agui::Stream(translator), Vec::new(), &[]);
    let mut body = response.into_body().into_data_stream();
    let retries = tokio::spawn(async move {
        for attempt in 2..8 {
            tokio::time::sleep(std::time::Duration::from_secs(10)).await;
            let retrying = AiEvent::ToolCallRetrying {
                tool_call_id: ToolCallId::new("call_slow").unwrap(),
                attempt,
                max_attempts: 8,
                retry_in_ms: 0,
                category: ai_core::ToolErrorCategory::Transient,
            };
            if sender.send(retrying).is_err() {
                return;
            }
        }
    });
    let first = body.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("RUN_STARTED"));
    let quiet = tokio::time::Instant::now();
    let frame = body.next().await.unwrap().unwrap();
    assert_eq!(frame, super::KEEP_ALIVE_FRAME.as_bytes());
    assert_eq!(quiet.elapsed(), super::KEEP_ALIVE, "the first keep-alive");
    let quiet = tokio::time::Instant::now();
    let frame = body.next().await.unwrap().unwrap();
    assert_eq!(frame, super::KEEP_ALIVE_FRAME.as_bytes());
    assert_eq!(quiet.elapsed(), super::KEEP_ALIVE, "the next one");
    drop(body);
    retries.await.unwrap();
}

/// The body of a run whose task dies (its channel closes without `Done`) after a call
/// started to run and before its result.
async fn died_after_a_call_started(translator: impl super::Translate, first: String) -> String {
    let (sender, run) = started();
    let response = super::sse_response(first, run, translator, Vec::new(), &[]);
    for event in [
        AiEvent::StepStarted { step: 1 },
        AiEvent::ToolCallStart {
            tool_call_id: ToolCallId::new("call_time").unwrap(),
            tool_name: "core__get_current_time".into(),
            args: Some(Arc::new(serde_json::json!({}))),
        },
    ] {
        sender.send(event).unwrap();
    }
    drop(sender);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    String::from_utf8(body.to_vec()).unwrap()
}

/// Keeps a stream for the protocol validators (`tests/protocol/run.sh target/ui-streams`).
pub(super) fn record(name: &str, body: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ui-streams");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), body).unwrap();
}

/// A run whose task dies after a call started answers that call, saying the tool may have
/// run, before the protocol's error: an AG-UI client keeps no call without a result, an AI
/// SDK client no part `input-available` (which an ai 5 client takes for a call left to it).
#[tokio::test]
async fn a_run_that_dies_after_a_call_started_answers_the_call() {
    let may_have_run = "the run ended before this call's result arrived: the tool may have run";
    let mut translator = wire_ui::agui::Translator::new("t-died", "r-died");
    let first = translator.start().iter().map(wire_ui::sse::frame).collect();
    let body = died_after_a_call_started(super::agui::Stream(translator), first).await;
    record("run-died-after-call-start.agui.sse", &body);
    let result = body
        .split("\n\n")
        .position(|frame| frame.contains("TOOL_CALL_RESULT") && frame.contains(may_have_run));
    let error = body
        .split("\n\n")
        .position(|frame| frame.contains("RUN_ERROR"));
    assert!(
        matches!((result, error), (Some(r), Some(e)) if r < e),
        "{body}"
    );

    let mut translator = wire_ui::ai_sdk::Translator::new("r-died", wire_ui::ai_sdk::Client::Ai5);
    let first = translator.start().iter().map(wire_ui::sse::frame).collect();
    let body = died_after_a_call_started(super::chat::Stream(translator), first).await;
    record("run-died-after-call-start.aisdk.sse", &body);
    let output = body
        .split("\n\n")
        .position(|frame| frame.contains("\"tool-output-error\"") && frame.contains(may_have_run));
    let error = body
        .split("\n\n")
        .position(|frame| frame.contains("\"type\":\"error\""));
    assert!(
        matches!((output, error), (Some(o), Some(e)) if o < e),
        "{body}"
    );
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
}

/// The body a client reads of a run whose stream the server cuts (the client fell more than
/// 1 KiB behind) after the client took a call's start and before that call's result: the
/// run goes on.
async fn cut_after_a_call_started(translator: impl super::Translate, first: String) -> String {
    use futures_util::StreamExt;
    use std::sync::atomic::Ordering;

    let (sender, events) = tokio::sync::mpsc::unbounded_channel();
    let unsent = Arc::new(super::relay::Unsent::default());
    let bounds = super::relay::Bounds {
        max_events: usize::MAX,
        grace: std::time::Duration::MAX,
        max_bytes: 1024,
    };
    let run = super::StartedRun {
        events: super::relay::relay(events, bounds, unsent.clone()),
        cancel: ai_core::CancellationToken::new(),
        resumed: Vec::new(),
        superseded: Vec::new(),
        copy_holds_turn: false,
    };
    let response = super::sse_response(first, run, translator, Vec::new(), &[]);
    let mut body = response.into_body().into_data_stream();
    let mut shown = String::new();
    let mut next = async |shown: &mut String| match body.next().await {
        Some(frame) => shown.push_str(std::str::from_utf8(&frame.unwrap()).unwrap()),
        None => panic!("the body ended early: {shown}"),
    };
    next(&mut shown).await;
    for event in [
        AiEvent::StepStarted { step: 1 },
        AiEvent::ToolCallStart {
            tool_call_id: ToolCallId::new("call_time").unwrap(),
            tool_name: "core__get_current_time".into(),
            args: Some(Arc::new(serde_json::json!({}))),
        },
    ] {
        sender.send(event).unwrap();
    }
    // The client takes the call's start.
    while !shown.contains("call_time") {
        next(&mut shown).await;
    }
    // Then reads nothing while one event waits and one more would pass the bound.
    let waits = |count: usize| {
        let unsent = unsent.clone();
        async move {
            while unsent.events.load(Ordering::Relaxed) != count {
                tokio::task::yield_now().await;
            }
        }
    };
    let text = |size: usize| AiEvent::TextDelta {
        delta: "x".repeat(size),
    };
    sender.send(text(8)).unwrap();
    waits(1).await;
    sender.send(text(2048)).unwrap();
    waits(0).await;
    while let Some(frame) = body.next().await {
        shown.push_str(std::str::from_utf8(&frame.unwrap()).unwrap());
    }
    drop(sender);
    shown
}

/// A stream cut for a client that fell behind, while its run goes on, tells the call it left
/// without a result that the stream was cut and the run goes on, before the protocol's error
/// (which says so too), never that the run ended before the call's result.
#[tokio::test]
async fn a_cut_stream_tells_a_call_in_flight_the_run_goes_on() {
    let goes_on = "the stream was cut before this call's result arrived; the run goes on";
    let mut translator = wire_ui::agui::Translator::new("t-cut", "r-cut");
    let first = translator.start().iter().map(wire_ui::sse::frame).collect();
    let body = cut_after_a_call_started(super::agui::Stream(translator), first).await;
    record("cut-after-call-start.agui.sse", &body);
    assert!(!body.contains("the run ended"), "{body}");
    let frames: Vec<&str> = body.trim_end().split("\n\n").collect();
    let result = frames
        .iter()
        .position(|frame| frame.contains("TOOL_CALL_RESULT") && frame.contains(goes_on));
    assert!(result.is_some(), "{body}");
    let last = frames.last().unwrap();
    assert!(
        last.contains("RUN_ERROR") && last.contains("the run goes on"),
        "{body}"
    );

    let mut translator = wire_ui::ai_sdk::Translator::new("r-cut", wire_ui::ai_sdk::Client::Ai5);
    let first = translator.start().iter().map(wire_ui::sse::frame).collect();
    let body = cut_after_a_call_started(super::chat::Stream(translator), first).await;
    record("cut-after-call-start.aisdk.sse", &body);
    assert!(!body.contains("the run ended"), "{body}");
    let frames: Vec<&str> = body.trim_end().split("\n\n").collect();
    let [.., output, error, done] = frames[..] else {
        panic!("{body}");
    };
    assert!(
        output.contains("\"tool-output-error\"") && output.contains(goes_on),
        "{body}"
    );
    assert!(error.contains("\"type\":\"error\"") && error.contains("the run goes on"));
    assert_eq!(done, "data: [DONE]", "{body}");
}

/// A run store whose commit of a run's last batch (the one with `Done`) fails, as a full
/// disk fails it (when `only` is set, only that run's first such commit, as a disk that
/// had a moment's trouble fails it); every other batch is stored, and a stored request for
/// an approval is reported on `approval_stored`.
#[derive(Default)]
struct FailsAtDone {
    /// The runs, and the threads their steps save.
    inner: Arc<adapters::InMemoryRunStore>,
    approval_stored: Arc<tokio::sync::Notify>,
    only: Option<&'static str>,
    /// With `only`: fail every batch of that run after its first (which begins it), not
    /// only its last.
    every_batch: bool,
    failed_once: std::sync::atomic::AtomicBool,
    /// The first commit of run `.0` (a resume's, saving the thread past its pause) is
    /// announced on `.1`, then waits for `.2` before it is made.
    held: Mutex<Option<Held>>,
}

/// A run whose first commit [`FailsAtDone`] holds, and the notices that hold it.
type Held = (
    &'static str,
    Arc<tokio::sync::Notify>,
    Arc<tokio::sync::Notify>,
);

#[async_trait::async_trait]
impl ai_core::RunStore for FailsAtDone {
    async fn begin_run(
        &self,
        run_id: &RunId,
        thread_id: Option<&ai_core::ThreadId>,
        at_ms: u64,
        input_ref: Option<&str>,
    ) -> Result<(), ai_core::RunStoreError> {
        self.inner
            .begin_run(run_id, thread_id, at_ms, input_ref)
            .await
    }

    async fn commit_step(
        &self,
        run_id: &RunId,
        step: RunStep,
    ) -> Result<std::ops::Range<u64>, ai_core::RunStoreError> {
        let held = (self.held.lock().unwrap()).take_if(|(held, ..)| run_id.as_str() == *held);
        if let Some((_, committing, go)) = held {
            committing.notify_one();
            go.notified().await;
        }
        let has = |f: fn(&AiEvent) -> bool| step.events.iter().any(f);
        if self.every_batch
            && self.only == Some(run_id.as_str())
            && self
                .failed_once
                .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(ai_core::RunStoreError::Backend("disk I/O error".into()));
        }
        let failing = match self.only {
            None => true,
            Some(only) => {
                run_id.as_str() == only
                    && has(|e| matches!(e, AiEvent::Done { .. }))
                    && !self
                        .failed_once
                        .swap(true, std::sync::atomic::Ordering::SeqCst)
            }
        };
        if failing && has(|e| matches!(e, AiEvent::Done { .. })) {
            return Err(ai_core::RunStoreError::Backend("disk I/O error".into()));
        }
        let approval = has(|e| matches!(e, AiEvent::ApprovalRequired { .. }));
        let stored = self.inner.commit_step(run_id, step).await;
        if approval && stored.is_ok() {
            self.approval_stored.notify_one();
        }
        stored
    }

    async fn finish_run(&self, run_id: &RunId, at_ms: u64) -> Result<(), ai_core::RunStoreError> {
        self.inner.finish_run(run_id, at_ms).await
    }

    async fn list_runs(&self) -> Result<Vec<ai_core::RunHeader>, ai_core::RunStoreError> {
        self.inner.list_runs().await
    }

    async fn list_run_summaries(&self) -> Result<Vec<ai_core::RunSummary>, ai_core::RunStoreError> {
        self.inner.list_run_summaries().await
    }

    async fn load_run(&self, run_id: &RunId) -> Result<ai_core::RunLog, ai_core::RunStoreError> {
        self.inner.load_run(run_id).await
    }

    async fn recover_interrupted(
        &self,
        at_ms: u64,
        runs: &[RunId],
    ) -> Result<Vec<ai_core::InterruptedRun>, ai_core::RunStoreError> {
        self.inner.recover_interrupted(at_ms, runs).await
    }
}

/// A hand-bound tool taking no arguments: `core__send` (an external side effect, which the
/// test's policy gates) answers at once; `core__gate` (read-only) answers once `open` is
/// notified.
struct Tool {
    spec: ai_core::ToolSpec,
    open: Option<Arc<tokio::sync::Notify>>,
}

impl Tool {
    fn new(id: &str, effect: ai_core::ToolEffect, open: Option<Arc<tokio::sync::Notify>>) -> Self {
        let spec = ai_core::ToolSpec {
            id: ai_core::ToolId::parse(id).unwrap(),
            description: "A test tool.".into(),
            input_schema: serde_json::json!({"type": "object", "properties": {}}),
            effect,
            redaction: ai_core::Redaction {
                allow: vec!["ok".into()],
            },
        };
        Self { spec, open }
    }
}

#[async_trait::async_trait]
impl ai_core::BoundTool for Tool {
    fn spec(&self) -> &ai_core::ToolSpec {
        &self.spec
    }

    fn validate_input(
        &self,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, ai_core::ToolError> {
        Ok(args)
    }

    async fn exec(
        &self,
        _: ai_core::ExecPermit,
        _: Arc<serde_json::Value>,
        _: &ai_core::ToolInvocationContext,
        _: &ai_core::Capabilities,
    ) -> Result<serde_json::Value, ai_core::ToolError> {
        if let Some(open) = &self.open {
            open.notified().await;
        }
        Ok(serde_json::json!({"ok": true}))
    }

    fn validate_output(&self, _: &serde_json::Value) -> Result<(), ai_core::ToolError> {
        Ok(())
    }

    fn redact(&self, output: serde_json::Value) -> Result<serde_json::Value, ai_core::ToolError> {
        Ok(output)
    }
}

/// A model whose one turn calls `core__send` (which waits for approval) and `core__gate`.
struct SendAndGate;

#[async_trait::async_trait]
impl ai_core::CompletionPort for SendAndGate {
    async fn complete(
        &self,
        _: &ai_core::LlmRequest,
        _: &mut dyn ai_core::DeltaSink,
        _: &ai_core::CancellationToken,
    ) -> Result<ai_core::LlmCompletion, ai_core::CompletionError> {
        let call = |id: &str, name: &str| ai_core::LlmToolCall {
            id: ToolCallId::new(id).unwrap(),
            name: name.into(),
            arguments: "{}".into(),
            complete: true,
            provider_fields: serde_json::Map::new(),
        };
        Ok(ai_core::LlmCompletion {
            text: String::new(),
            tool_calls: vec![
                call("call_send", "core__send"),
                call("call_gate", "core__gate"),
            ],
            finish_reason: ai_core::FinishReason::ToolCalls,
            usage: None,
        })
    }
}

/// The ids the server picks for AI SDK runs carry a random part, so a client that names its
/// own run ids (AG-UI) cannot take the next one from the time and a count.
#[test]
fn the_server_s_own_run_ids_cannot_be_guessed() {
    let locks = tempfile::tempdir().unwrap();
    let (one, two) = (failing_at_done(5, &locks), failing_at_done(5, &locks));
    let (a, b) = (one.next_run_id(), two.next_run_id());
    let random = |id: &str| id.rsplit('-').next().unwrap().to_owned();
    for id in [&a, &b] {
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!((parts.len(), parts[0], parts[2]), (4, "run", "1"), "{id}");
        assert!(parts[3].len() == 8 && parts[3].chars().all(|c| c.is_ascii_hexdigit()));
    }
    assert_ne!(random(&a), random(&b));
}

/// A server whose run log fails to store a run's last batch, with `ai_sdk_version`. Its
/// model asks for a call that waits for approval and one that answers only once that
/// request is stored (and so sent), so the request reaches the client in a batch of its own
/// before the run's last batch fails.
fn failing_at_done(ai_sdk_version: u8, locks: &tempfile::TempDir) -> Arc<super::AppState> {
    failing_at_done_of(ai_sdk_version, locks, None)
}

/// [`failing_at_done`], failing only run `only`'s last batch when given.
fn failing_at_done_of(
    ai_sdk_version: u8,
    locks: &tempfile::TempDir,
    only: Option<&'static str>,
) -> Arc<super::AppState> {
    failing_store(
        ai_sdk_version,
        locks,
        FailsAtDone {
            only,
            ..FailsAtDone::default()
        },
    )
}

/// [`failing_at_done`] over the store `runs`.
fn failing_store(
    ai_sdk_version: u8,
    locks: &tempfile::TempDir,
    runs: FailsAtDone,
) -> Arc<super::AppState> {
    let runs = Arc::new(runs);
    let open = runs.approval_stored.clone();
    let stores = crate::Stores {
        threads: runs.inner.clone(),
        log: Some(crate::RunLogStores {
            runs,
            blobs: Arc::new(adapters::InMemoryBlobStore::default()),
            receipts: Arc::new(adapters::ReceiptCollector::default()),
            locks: crate::RunLocks::new(locks.path()),
            histories: Default::default(),
        }),
        memory_threads: None,
    };
    let runtime = send_and_gate(Some(open));
    Arc::new(super::AppState::new(runtime, stores).with_ai_sdk_version(ai_sdk_version))
}

/// A runtime over [`SendAndGate`], whose `core__gate` answers once `open` is notified (at
/// once without it), and whose `core__send` waits for approval.
fn send_and_gate(open: Option<Arc<tokio::sync::Notify>>) -> crate::Runtime {
    send_and_gate_waiting(open, "[\"external_side_effect\"]")
}

/// [`send_and_gate`], the calls of the effects `waiting` (a TOML array) waiting for approval.
fn send_and_gate_waiting(open: Option<Arc<tokio::sync::Notify>>, waiting: &str) -> crate::Runtime {
    let tools: Vec<Arc<dyn ai_core::BoundTool>> = vec![
        Arc::new(Tool::new(
            "core__send",
            ai_core::ToolEffect::ExternalSideEffect,
            None,
        )),
        Arc::new(Tool::new("core__gate", ai_core::ToolEffect::ReadOnly, open)),
    ];
    let source = Arc::new(ai_core::StaticToolSource::new(tools).unwrap());
    let policy = ai_core::ToolPolicy::from_toml_str(&format!(
        r#"
        allowed_tools = ["core__send", "core__gate"]
        require_approval_for_effects = {waiting}
        "#
    ))
    .unwrap();
    let clock: Arc<dyn ai_core::Clock> = Arc::new(adapters::SystemClock);
    crate::Runtime::with_source(
        &settings(),
        Arc::new(SendAndGate),
        source,
        Arc::new(policy),
        clock,
    )
}

/// The whole body a handler answers `body` with.
async fn post<F: Future<Output = Result<axum::response::Response, super::ApiError>>>(
    handler: impl FnOnce(
        axum::extract::State<Arc<super::AppState>>,
        axum::Extension<super::BodyLimit>,
        axum::http::HeaderMap,
        Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
    ) -> F,
    state: Arc<super::AppState>,
    body: serde_json::Value,
) -> String {
    match try_post(handler, state, body).await {
        Ok(body) => body,
        Err(error) => panic!("the run did not start: {error:?}"),
    }
}

/// The whole body a handler answers `body` with, or its refusal.
async fn try_post<F: Future<Output = Result<axum::response::Response, super::ApiError>>>(
    handler: impl FnOnce(
        axum::extract::State<Arc<super::AppState>>,
        axum::Extension<super::BodyLimit>,
        axum::http::HeaderMap,
        Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
    ) -> F,
    state: Arc<super::AppState>,
    body: serde_json::Value,
) -> Result<String, super::ApiError> {
    let mut headers = axum::http::HeaderMap::new();
    let json = axum::http::HeaderValue::from_static("application/json");
    headers.insert(axum::http::header::CONTENT_TYPE, json);
    let body = axum::body::Bytes::from(body.to_string());
    let limit = axum::Extension(super::BodyLimit(usize::MAX));
    let state = axum::extract::State(state);
    let response = handler(state, limit, headers, Ok(body)).await?;
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    Ok(String::from_utf8(body.to_vec()).unwrap())
}

/// A call whose approval request was stored and sent, in a run whose last batch cannot be
/// stored, is answered as never run before the protocol's error: the run ends `error`, not
/// paused, so nothing will ever approve it (the thread was not saved waiting for it), and
/// a client must not keep it waiting (AG-UI: a `TOOL_CALL_RESULT`; AI SDK: `output-error`,
/// not `input-available` or `approval-requested`).
#[tokio::test]
async fn a_call_waiting_for_approval_in_a_run_whose_log_fails_is_answered() {
    let never_ran = "the run ended before this call was approved, so it never ran";
    let input = serde_json::json!({
        "threadId": "t-log-fails", "runId": "r-log-fails",
        "messages": [{"id": "m1", "role": "user", "content": "send it"}],
    });
    let locks = tempfile::tempdir().unwrap();
    let body = post(super::agui::run, failing_at_done(5, &locks), input).await;
    record("log-fails-awaiting-approval.agui.sse", &body);
    let frames: Vec<&str> = body.split("\n\n").collect();
    let position = |wanted: &dyn Fn(&str) -> bool| frames.iter().position(|f| wanted(f));
    let result = position(&|f| {
        f.contains("TOOL_CALL_RESULT") && f.contains("call_send") && f.contains(never_ran)
    });
    let error = position(&|f| f.contains("RUN_ERROR") && f.contains("could not be recorded"));
    assert!(
        matches!((result, error), (Some(r), Some(e)) if r < e),
        "{body}"
    );

    for version in [5, 6] {
        let input = serde_json::json!({
            "id": format!("chat-log-fails-{version}"),
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "send it"}]}],
        });
        let body = post(super::chat::run, failing_at_done(version, &locks), input).await;
        // The validators read a `.v6` stream as one for ai 6 clients.
        let name = match version {
            6 => "log-fails-awaiting-approval.v6.aisdk.sse",
            _ => "log-fails-awaiting-approval.aisdk.sse",
        };
        record(name, &body);
        let frames: Vec<&str> = body.split("\n\n").collect();
        let position = |wanted: &dyn Fn(&str) -> bool| frames.iter().position(|f| wanted(f));
        let available =
            position(&|f| f.contains("\"tool-input-available\"") && f.contains("call_send"));
        let output = position(&|f| {
            f.contains("\"tool-output-error\"") && f.contains("call_send") && f.contains(never_ran)
        });
        let error =
            position(&|f| f.contains("\"type\":\"error\"") && f.contains("could not be recorded"));
        assert!(
            matches!((available, output, error), (Some(a), Some(o), Some(e)) if a < o && o < e),
            "ai {version}: {body}"
        );
        assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    }
}

/// A run that resumes from the user's answers and fails before it shows a result (its log
/// cannot be written after the batch that begins it) still answers each call the earlier run
/// showed waiting, before `RUN_ERROR`: an approved call may have run, a denied one never
/// ran. Without it the client's history would hold the calls without an answer.
#[tokio::test]
async fn a_resumed_run_whose_log_fails_answers_the_calls_it_resumes() {
    for (approved, status, said) in [
        (true, "resolved", "the tool may have run"),
        (false, "cancelled", "the call never ran"),
    ] {
        let locks = tempfile::tempdir().unwrap();
        let runs = FailsAtDone {
            only: Some("r-resume-fails"),
            every_batch: true,
            ..FailsAtDone::default()
        };
        let state = failing_store(5, &locks, runs);
        let input = serde_json::json!({
            "threadId": "t-resume-fails", "runId": "r-1",
            "messages": [{"id": "m1", "role": "user", "content": "send it"}],
        });
        let paused = post(super::agui::run, state.clone(), input).await;
        assert!(paused.contains("\"interrupts\""), "{paused}");
        let resume = serde_json::json!({
            "threadId": "t-resume-fails", "runId": "r-resume-fails", "messages": [],
            "resume": [{"interruptId": "call_send", "status": status,
                        "payload": {"approved": approved}}],
        });
        let body = post(super::agui::run, state, resume).await;
        record(&format!("resumed-log-fails-{status}.agui.sse"), &body);
        let frames: Vec<&str> = body.split("\n\n").collect();
        let position = |wanted: &dyn Fn(&str) -> bool| frames.iter().position(|f| wanted(f));
        let result = position(&|f| {
            f.contains("TOOL_CALL_RESULT") && f.contains("\"call_send\"") && f.contains(said)
        });
        let error = position(&|f| f.contains("RUN_ERROR") && f.contains("could not be recorded"));
        assert!(
            matches!((result, error), (Some(r), Some(e)) if r < e),
            "{status}: {body}"
        );
    }
}

/// The history `thread` holds in `state`'s thread store, and whether the thread is idle.
async fn saved_thread(
    state: &super::AppState,
    thread: &str,
) -> (Vec<ai_core::Message>, graph::Phase) {
    let thread = ai_core::ThreadId::new(thread).unwrap();
    let saved = state.stores.threads.load(&thread).await.unwrap().unwrap();
    let saved: graph::AgentState = serde_json::from_value(saved).unwrap();
    (saved.messages().to_vec(), saved.phase().clone())
}

/// What the thread holds as the answer to call `id`.
fn answer_to(messages: &[ai_core::Message], id: &str) -> Option<String> {
    messages.iter().find_map(|message| match message {
        ai_core::Message::Tool {
            tool_call_id,
            content,
        } if tool_call_id.as_str() == id => Some(content.clone()),
        _ => None,
    })
}

/// A run whose log cannot be written after some of its batches were stored (and shown) is
/// closed at once as recovery would close it: the thread takes the turn the client was shown
/// (an approved call's result that reached the client, the model's next turn, the calls
/// that started, answered), not the state the run began from, where the approved call,
/// which ran, would read as cancelled to the model at the next turn.
#[tokio::test]
async fn a_run_whose_log_fails_leaves_its_thread_as_the_client_was_shown_it() {
    let locks = tempfile::tempdir().unwrap();
    let state = failing_at_done_of(5, &locks, Some("r-fails"));
    let user = |run: &str, text: &str| {
        serde_json::json!({
            "threadId": "t-heal", "runId": run,
            "messages": [{"id": format!("m-{run}"), "role": "user", "content": text}],
        })
    };
    let paused = post(super::agui::run, state.clone(), user("r-1", "send it")).await;
    assert!(paused.contains("\"interrupts\""), "{paused}");

    // The approved call runs and its result is stored and shown; the model asks again
    // (`call_send_2` waits, `call_gate_2` runs); the run's last batch cannot be stored.
    let resume = serde_json::json!({
        "threadId": "t-heal", "runId": "r-fails", "messages": [],
        "resume": [{"interruptId": "call_send", "status": "resolved",
                    "payload": {"approved": true}}],
    });
    let failed = post(super::agui::run, state.clone(), resume).await;
    assert!(failed.contains("could not be recorded"), "{failed}");
    let shown = failed
        .split("\n\n")
        .find(|f| f.contains("TOOL_CALL_RESULT") && f.contains("\"call_send\""))
        .unwrap_or_else(|| panic!("{failed}"));
    assert!(shown.contains(r#"{\"ok\":true}"#), "{shown}");

    let (messages, phase) = saved_thread(&state, "t-heal").await;
    assert!(matches!(phase, graph::Phase::Idle), "{phase:?}");
    let sent = answer_to(&messages, "call_send").unwrap();
    assert!(sent.contains("\"ok\""), "{sent}");
    // The call that ran in the model's next turn: its result, if the client saw it, or,
    // if its result was in the batch that could not be stored, what the client was told
    // instead (that it may have run).
    let gate = answer_to(&messages, "call_gate_2").unwrap();
    let gate_shown = failed
        .split("\n\n")
        .find(|f| f.contains("TOOL_CALL_RESULT") && f.contains("\"call_gate_2\""))
        .unwrap_or_else(|| panic!("{failed}"));
    if gate_shown.contains(r#"{\"ok\":true}"#) {
        assert!(gate.contains("\"ok\""), "{gate}");
    } else {
        assert!(gate_shown.contains("may have run"), "{gate_shown}");
        assert!(gate.contains("whether it took effect is unknown"), "{gate}");
    }
    ai_core::validate_history(&messages).unwrap();

    // The thread goes on from there: the next message is run, and the model is told what
    // the client was shown.
    let next = post(super::agui::run, state.clone(), user("r-3", "and now?")).await;
    assert!(next.contains("\"interrupts\""), "{next}");
    let (messages, _) = saved_thread(&state, "t-heal").await;
    let sent = answer_to(&messages, "call_send").unwrap();
    assert!(
        sent.contains("\"ok\"") && !sent.contains("cancelled"),
        "{sent}"
    );
    let log = state.stores.log.as_ref().unwrap();
    let closed = log.runs.load_run(&RunId::new("r-fails").unwrap()).await;
    let closed = closed.unwrap();
    assert_ne!(closed.header.status, RunStatus::Running);
    assert!(matches!(closed.events.last(), Some(AiEvent::Done { .. })));
}

/// A client that leaves while its run is being begun (here, a resume whose first write,
/// saving the thread past its pause, is slow) does not leave the run half begun: the
/// handler's future is dropped there, as hyper drops it when the connection closes, yet the
/// run is begun whole, cancelled, ended and closed, and the thread saved finished with the
/// approved call answered, rather than a run left `running` and a thread past its pause
/// with nothing to run its call.
#[tokio::test]
async fn a_client_that_leaves_while_its_run_is_begun_leaves_it_closed_and_its_thread_whole() {
    let locks = tempfile::tempdir().unwrap();
    let committing = Arc::new(tokio::sync::Notify::new());
    let go = Arc::new(tokio::sync::Notify::new());
    let state = failing_store(
        5,
        &locks,
        FailsAtDone {
            // No run of this test fails.
            only: Some("r-none"),
            held: Mutex::new(Some(("r-resume", committing.clone(), go.clone()))),
            ..FailsAtDone::default()
        },
    );
    let paused = serde_json::json!({
        "threadId": "t-left", "runId": "r-paused",
        "messages": [{"id": "m1", "role": "user", "content": "send it"}],
    });
    let paused = post(super::agui::run, state.clone(), paused).await;
    assert!(paused.contains("\"interrupts\""), "{paused}");

    let resume = serde_json::json!({
        "threadId": "t-left", "runId": "r-resume", "messages": [],
        "resume": [{"interruptId": "call_send", "status": "resolved",
                    "payload": {"approved": true}}],
    });
    tokio::select! {
        _ = post(super::agui::run, state.clone(), resume) => {
            panic!("the resume did not wait for its first write")
        }
        () = committing.notified() => {}
    }
    // The client left: its handler's future is gone; the write then goes through.
    go.notify_one();

    let log = state.stores.log.as_ref().unwrap();
    let run = RunId::new("r-resume").unwrap();
    let closed = async {
        loop {
            let log = log.runs.load_run(&run).await.unwrap();
            if log.header.status != RunStatus::Running {
                return log;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    let closed = tokio::time::timeout(std::time::Duration::from_secs(10), closed)
        .await
        .expect("the run the client left while it was begun is still running");
    assert!(
        matches!(closed.events.last(), Some(AiEvent::Done { .. })),
        "{:?}",
        closed.events
    );
    let (messages, phase) = saved_thread(&state, "t-left").await;
    assert!(matches!(phase, graph::Phase::Finished { .. }), "{phase:?}");
    ai_core::validate_history(&messages).unwrap();
    assert!(answer_to(&messages, "call_send").is_some(), "{messages:?}");
}

/// Settings `prepare` accepts (a model is named; it is never called).
fn settings() -> crate::Settings {
    let mut settings = crate::Settings::default();
    settings.llm.model = "test-model".into();
    settings
}

/// Leaves run `run` open with one started call, as a killed process leaves it.
async fn leave_open(stores: &crate::Stores, run: &str) {
    let runs = &stores.log.as_ref().unwrap().runs;
    let run = RunId::new(run).unwrap();
    runs.begin_run(&run, None, 1, None).await.unwrap();
    let start = AiEvent::ToolCallStart {
        tool_call_id: ToolCallId::new("call-1").unwrap(),
        tool_name: "core__get_current_time".into(),
        args: None,
    };
    let step = RunStep {
        events: vec![start],
        ..RunStep::default()
    };
    runs.commit_step(&run, step).await.unwrap();
}

/// A run whose stored row is corrupt for good cannot be closed: the server warns in one
/// line naming it and why, without the row's contents, closes the others, and starts.
#[tokio::test]
async fn a_run_that_cannot_be_closed_is_named_in_a_warning_and_the_server_starts() {
    let dir = tempfile::tempdir().unwrap();
    let settings = crate::Settings {
        data_dir: Some(dir.path().to_path_buf()),
        ..settings()
    };
    {
        let stores = crate::create_stores(&settings).unwrap();
        leave_open(&stores, "run-corrupt").await;
        leave_open(&stores, "run-ok").await;
    }
    let corrupted = rusqlite::Connection::open(dir.path().join("cogni.db"))
        .unwrap()
        .execute(
            r#"UPDATE run_events SET event_json = '{"type":"secret-payload"}'
               WHERE run_id = 'run-corrupt'"#,
            [],
        )
        .unwrap();
    assert_eq!(corrupted, 1);

    let (logs, _logging) = Logs::capture();
    let state = prepare(&settings)
        .await
        .expect("one run that cannot be closed stopped the server from starting");

    let logs = logs.text();
    let warnings: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("run-corrupt"))
        .collect();
    assert!(
        matches!(warnings.as_slice(), [line] if line.contains("run-corrupt: stored data is corrupt")
            && line.contains("the server starts anyway")),
        "{logs}"
    );
    assert!(!logs.contains("secret-payload"), "{logs}");
    let runs = &state.stores.log.as_ref().unwrap().runs;
    let ok = runs.load_run(&RunId::new("run-ok").unwrap()).await.unwrap();
    assert!(matches!(ok.events.last(), Some(AiEvent::Done { .. })));
    let headers = runs.list_runs().await.unwrap();
    let corrupt = headers
        .iter()
        .find(|h| h.run_id.as_str() == "run-corrupt")
        .unwrap();
    assert_eq!(corrupt.status, RunStatus::Running, "left for a later start");
}

/// The warning naming a run that cannot be closed is one line a terminal shows as it is:
/// the run's id is the client's `runId`, and a bidirectional override in it (which could
/// reorder what the operator reads) is shown as `�`, as `cogni chat` shows the same warning.
/// A run id with control characters, which ids refuse now but an older cogni stored as the
/// client sent it, never reaches the log, and does not keep the other runs from closing.
#[tokio::test]
async fn the_warning_naming_a_run_shows_no_control_character_of_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let settings = crate::Settings {
        data_dir: Some(dir.path().to_path_buf()),
        ..settings()
    };
    let run = "run-\u{202e}lihw";
    let old = "old-\rforged\nWARN forged line\u{1b}[2J";
    {
        let stores = crate::create_stores(&settings).unwrap();
        leave_open(&stores, run).await;
        leave_open(&stores, "old-placeholder").await;
        leave_open(&stores, "run-ok").await;
    }
    let db = rusqlite::Connection::open(dir.path().join("cogni.db")).unwrap();
    // The old run's rows are renamed one table at a time.
    db.pragma_update(None, "foreign_keys", "OFF").unwrap();
    let corrupted = db
        .execute(
            r#"UPDATE run_events SET event_json = '{"type":"broken"}' WHERE run_id = ?1"#,
            [run],
        )
        .unwrap();
    assert_eq!(corrupted, 1);
    for table in ["runs", "run_events"] {
        let renamed = db
            .execute(
                &format!("UPDATE {table} SET run_id = ?1 WHERE run_id = 'old-placeholder'"),
                [old],
            )
            .unwrap();
        assert_eq!(renamed, 1, "{table}");
    }
    drop(db);

    let (logs, _logging) = Logs::capture();
    let state = prepare(&settings).await.unwrap();

    let logs = logs.text();
    let warnings: Vec<&str> = (logs.lines())
        .filter(|line| line.contains(" WARN bootstrap::server"))
        .collect();
    let [warning] = warnings.as_slice() else {
        panic!("not one warning line: {logs:?}");
    };
    assert!(
        warning.contains("run-\u{FFFD}lihw: ") && warning.contains("the server starts anyway"),
        "{logs:?}"
    );
    assert!(!logs.contains(['\r', '\u{202e}', '\u{1b}']), "{logs:?}");
    assert!(!logs.contains("forged"), "{logs:?}");
    let runs = &state.stores.log.as_ref().unwrap().runs;
    let ok = runs.load_run(&RunId::new("run-ok").unwrap()).await.unwrap();
    assert!(matches!(ok.events.last(), Some(AiEvent::Done { .. })));
    // The old run is left out of the list, and left as it is.
    let listed: Vec<String> = (runs.list_runs().await.unwrap().into_iter())
        .map(|h| h.run_id.into())
        .collect();
    assert_eq!(listed, ["run-ok", run]);
    let status: String = rusqlite::Connection::open(dir.path().join("cogni.db"))
        .unwrap()
        .query_row("SELECT status FROM runs WHERE run_id = ?1", [old], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(status, "running");
}

/// A second run on a busy thread is refused without naming the thread: its id is the
/// client's text.
#[tokio::test]
async fn a_busy_thread_is_refused_without_repeating_its_id() {
    let state = prepare(&settings()).await.unwrap();
    let thread = ai_core::ThreadId::new("t-ZQX-busy").unwrap();
    let _held = super::BusyGuard::acquire(state.clone(), thread.clone()).unwrap();
    let Err(refused) = super::BusyGuard::acquire(state, thread) else {
        panic!("a busy thread took a second run");
    };
    assert_eq!(refused.code, "thread_busy");
    assert!(!refused.message.contains("ZQX"), "{}", refused.message);
}

/// A run on a busy thread is refused 409 `thread_busy` while the server is at its most runs
/// too, as it is otherwise: the thread's own conflict is the precise answer, whatever the
/// load (before, 503 `too_many_runs` came first). A run on a thread that is not busy gets
/// the 503, and its thread is left free.
#[tokio::test]
async fn a_busy_thread_is_refused_409_before_the_run_limit_503() {
    let state = in_memory(8, SaysOk::default());
    let thread = ai_core::ThreadId::new("t-busy").unwrap();
    let _running = super::BusyGuard::acquire(state.clone(), thread.clone()).unwrap();
    let left = u32::try_from(state.run_slots.available_permits()).unwrap();
    let _full = state
        .run_slots
        .clone()
        .try_acquire_many_owned(left)
        .unwrap();
    let refusal = |thread: &'static str| {
        let state = state.clone();
        async move {
            let turn = super::IncomingTurn::Message("hi".into());
            let incoming = super::Incoming::without_history(turn);
            match super::start_run(&state, thread, "r-2", incoming).await {
                Ok(_) => panic!("a run started on {thread} past the limit"),
                Err(refused) => (refused.status.as_u16(), refused.code),
            }
        }
    };
    assert_eq!(refusal("t-busy").await, (409, "thread_busy"));
    assert_eq!(refusal("t-free").await, (503, "too_many_runs"));
    let free = ai_core::ThreadId::new("t-free").unwrap();
    let busy = state.busy.lock().unwrap();
    assert!(!busy.contains(&free), "a refused run left its thread busy");
}

/// A model that answers every turn `ok`, keeping the messages of each request as JSON.
#[derive(Clone, Default)]
struct SaysOk(Arc<Mutex<Vec<String>>>);

impl SaysOk {
    /// The messages of the last request, as JSON.
    fn last(&self) -> String {
        self.0.lock().unwrap().last().cloned().unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl ai_core::CompletionPort for SaysOk {
    async fn complete(
        &self,
        request: &ai_core::LlmRequest,
        _: &mut dyn ai_core::DeltaSink,
        _: &ai_core::CancellationToken,
    ) -> Result<ai_core::LlmCompletion, ai_core::CompletionError> {
        let messages = serde_json::to_string(&request.messages).unwrap();
        self.0.lock().unwrap().push(messages);
        Ok(ai_core::LlmCompletion {
            text: "ok".into(),
            tool_calls: Vec::new(),
            finish_reason: ai_core::FinishReason::Stop,
            usage: None,
        })
    }
}

/// A server without a data folder whose threads in memory are at most `threads`, over
/// `model`, with no tools.
fn in_memory(threads: usize, model: SaysOk) -> Arc<super::AppState> {
    let memory = Arc::new(crate::MemoryThreads::new(threads, usize::MAX));
    let stores = crate::Stores {
        threads: memory.clone(),
        log: None,
        memory_threads: Some(memory),
    };
    let source = Arc::new(ai_core::StaticToolSource::new(Vec::new()).unwrap());
    let policy = ai_core::ToolPolicy::from_toml_str("allowed_tools = []").unwrap();
    let clock: Arc<dyn ai_core::Clock> = Arc::new(adapters::SystemClock);
    let runtime = crate::Runtime::with_source(
        &settings(),
        Arc::new(model),
        source,
        Arc::new(policy),
        clock,
    );
    Arc::new(super::AppState::new(runtime, stores))
}

/// Without a data folder, the server keeps its most threads: past them it forgets the one
/// used least recently, never one a run is in flight on. A client that goes on with a
/// forgotten thread gets what it gets after a restart, on either route: its copy of the
/// conversation starts the thread again, and answers to approvals are refused (409
/// `nothing_to_resume`), as nothing waits for them.
#[tokio::test]
async fn without_a_data_folder_the_threads_kept_are_bounded() {
    let served = prepare(&settings()).await.unwrap();
    assert!(
        served.stores.memory_threads.is_some(),
        "not the bounded store"
    );
    let model = SaysOk::default();
    let state = in_memory(2, model.clone());
    let agui = |thread: &str, run: &str, messages: serde_json::Value| serde_json::json!({"threadId": thread, "runId": run, "messages": messages});
    let user = |text: &str| serde_json::json!({"id": text, "role": "user", "content": text});
    let kept = async |thread: &str| {
        let thread = ai_core::ThreadId::new(thread).unwrap();
        state.stores.threads.load(&thread).await.unwrap().is_some()
    };
    for thread in ["t-1", "t-2"] {
        let body = post(
            super::agui::run,
            state.clone(),
            agui(thread, thread, json!([user("hi")])),
        );
        assert!(body.await.contains("RUN_FINISHED"));
    }
    // `t-1` has a run in flight (its thread is held as busy) while two more threads start.
    let in_flight = super::BusyGuard::acquire(state.clone(), ThreadId::new("t-1").unwrap());
    for thread in ["t-3", "t-4"] {
        let body = post(
            super::agui::run,
            state.clone(),
            agui(thread, thread, json!([user("hi")])),
        );
        assert!(body.await.contains("RUN_FINISHED"));
    }
    assert!(
        kept("t-1").await,
        "a thread with a run in flight was forgotten"
    );
    assert!(!kept("t-2").await && !kept("t-3").await, "past the bound");
    assert!(kept("t-4").await);
    drop(in_flight);

    // A forgotten thread goes on from the client's copy, one kept from the server's own.
    let copy = json!({"id": "a", "role": "assistant", "content": "the client's copy"});
    let body = agui("t-2", "r-2b", json!([user("hi"), copy, user("again")]));
    assert!(
        post(super::agui::run, state.clone(), body)
            .await
            .contains("RUN_FINISHED")
    );
    assert!(
        model.last().contains("the client's copy"),
        "{}",
        model.last()
    );
    let body = agui("t-4", "r-4b", json!([user("hi"), copy, user("again")]));
    assert!(
        post(super::agui::run, state.clone(), body)
            .await
            .contains("RUN_FINISHED")
    );
    assert!(
        !model.last().contains("the client's copy"),
        "{}",
        model.last()
    );
    // So over the AI SDK route: `t-1`, once its run let it go, was forgotten meanwhile.
    assert!(!kept("t-1").await);
    let text = |id: &str, role: &str, text: &str| json!({"id": id, "role": role, "parts": [{"type": "text", "text": text}]});
    let chat = json!({"id": "t-1", "messages": [
        text("u1", "user", "hi"), text("a1", "assistant", "the chat's copy"),
        text("u2", "user", "again")]});
    assert!(
        post(super::chat::run, state.clone(), chat)
            .await
            .contains("[DONE]")
    );
    assert!(model.last().contains("the chat's copy"), "{}", model.last());

    // Answers to approvals on a forgotten thread: refused alike on both routes.
    assert!(!kept("t-3").await);
    let resume = json!({"threadId": "t-3", "runId": "r-3b", "messages": [],
        "resume": [{"interruptId": "call_x", "status": "resolved",
                    "payload": {"approved": true}}]});
    let answer = json!({"id": "t-3", "messages": [text("u1", "user", "send it"),
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "tool-core__send", "toolCallId": "call_x", "state": "approval-responded",
             "input": {}, "approval": {"id": "call_x", "approved": true}}]}]});
    for refused in [
        try_post(super::agui::run, state.clone(), resume).await,
        try_post(super::chat::run, state.clone(), answer).await,
    ] {
        let refused = refused.expect_err("an answer to a forgotten thread ran");
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (409, "nothing_to_resume")
        );
    }
}

/// AG-UI has no edit or retry. On a thread the server holds, a client's copy whose user
/// messages before the new one are not the thread's latest (its history cut before an answer
/// to have it again, an earlier message edited) is refused (409 `history_mismatch`) and runs
/// nothing, rather than running its last message after turns the client no longer shows. A
/// copy holding fewer of them (the new message alone, the latest few) goes on, and so does one
/// holding a message no run took (no answer follows it).
#[tokio::test]
async fn agui_a_copy_that_is_not_the_thread_s_latest_is_refused() {
    let model = SaysOk::default();
    let state = in_memory(8, model.clone());
    let user = |text: &str| json!({"id": text, "role": "user", "content": text});
    let answer = json!({"id": "a", "role": "assistant", "content": "ok"});
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let send = async |messages: serde_json::Value| {
        let run = runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = json!({"threadId": "t", "runId": format!("r-{run}"), "messages": messages});
        try_post(super::agui::run, state.clone(), body).await
    };
    let asked = || model.0.lock().unwrap().len();
    for copy in [json!([user("A")]), json!([user("A"), answer, user("B")])] {
        assert!(send(copy).await.unwrap().contains("RUN_FINISHED"));
    }
    for copy in [
        // The history cut before B's answer, B sent again.
        json!([user("A"), answer, user("B")]),
        // A edited.
        json!([user("A, edited"), answer, user("B"), answer, user("C")]),
        // A copy missing B.
        json!([user("A"), answer, user("C")]),
    ] {
        let refused = send(copy.clone()).await.expect_err("ran");
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (409, "history_mismatch"),
            "{copy}"
        );
    }
    assert_eq!(asked(), 2, "a refused copy ran");
    for copy in [
        json!([user("C")]),
        json!([user("B"), answer, user("C"), answer, user("D")]),
        json!([user("D"), answer, user("refused"), user("E")]),
    ] {
        let body = send(copy.clone())
            .await
            .unwrap_or_else(|e| panic!("{copy}: {e:?}"));
        assert!(body.contains("RUN_FINISHED"), "{body}");
    }
    assert_eq!(asked(), 5);
}

/// The copies real AG-UI clients send go on, on a thread the server holds: `@ag-ui/client`
/// sends its whole history every run (the server's answers, reasoning, developer
/// instructions), the user's text as a string or in parts beside an attachment (a message
/// sent one way and later the other reads the same), a message the frontend added itself
/// that no run took (no answer follows it), or the new message alone.
#[tokio::test]
async fn agui_real_clients_copies_of_a_held_thread_go_on() {
    let model = SaysOk::default();
    let state = in_memory(8, model.clone());
    let user = |id: &str, content: serde_json::Value| json!({"id": id, "role": "user", "content": content});
    let answer = |id: &str| json!({"id": id, "role": "assistant", "content": "ok"});
    let copies = [
        json!([user("u1", json!([{"type": "text", "text": "Hi"}]))]),
        json!([
            user("u1", json!("Hi")),
            answer("a1"),
            {"id": "r1", "role": "reasoning", "content": "the user greets"},
            {"id": "d1", "role": "developer", "content": "be brief"},
            user("u2", json!([
                {"type": "image", "source": {"type": "data", "value": "AA==",
                                             "mimeType": "image/png"}},
                {"type": "text", "text": "Two"}
            ]))
        ]),
        json!([
            user("u1", json!("Hi")),
            answer("a1"),
            user("u2", json!("Two")),
            answer("a2"),
            user("f1", json!("a note the frontend added")),
            user("u3", json!("Three"))
        ]),
        json!([user("u4", json!("Four"))]),
        json!([
            user("u1", json!([{"type": "text", "text": "Hi"}])),
            answer("a1"),
            user("u2", json!("Two")),
            answer("a2"),
            user("f1", json!("a note the frontend added")),
            user("u3", json!("Three")),
            answer("a3"),
            user("u4", json!("Four")),
            answer("a4"),
            user("u5", json!("Five"))
        ]),
    ];
    for (run, copy) in copies.into_iter().enumerate() {
        let body = json!({"threadId": "t", "runId": format!("r-{run}"), "messages": copy});
        let streamed = try_post(super::agui::run, state.clone(), body)
            .await
            .unwrap_or_else(|e| panic!("copy {run}: {e:?}"));
        assert!(streamed.contains("RUN_FINISHED"), "copy {run}: {streamed}");
    }
    assert_eq!(model.0.lock().unwrap().len(), 5);
    let sent = model.last();
    assert!(!sent.contains("a note the frontend added"), "{sent}");
}

/// Without a run log, a run's id is refused while its run is in flight, however many runs
/// end meanwhile, and once it ended, until `KEPT_ENDED_RUN_IDS` more runs have ended: then
/// the oldest ended id is forgotten, so the ids kept stay bounded.
#[tokio::test]
async fn without_a_run_log_the_ids_kept_are_bounded() {
    let state = prepare(&settings()).await.unwrap();
    assert!(state.stores.log.is_none());
    let id = |n: usize| RunId::new(format!("r-{n}")).unwrap();
    let claim = |n: usize| super::RunIdGuard::claim(state.clone(), id(n));
    let refused = |n: usize| matches!(claim(n), Err(e) if e.code == "run_exists");

    let in_flight = claim(0).unwrap();
    assert!(refused(0), "an id in flight ran twice");
    drop(claim(1).unwrap());
    assert!(refused(1), "an ended run's id ran again");
    for n in 2..=super::KEPT_ENDED_RUN_IDS {
        drop(claim(n).unwrap());
    }
    assert!(refused(1), "the oldest kept id was forgotten early");
    drop(claim(super::KEPT_ENDED_RUN_IDS + 1).unwrap());
    for n in 2..=super::KEPT_ENDED_RUN_IDS + 1 {
        assert!(refused(n), "r-{n} was forgotten");
    }
    assert!(refused(0), "an id in flight was forgotten");
    // Runs again, and ends: the oldest kept id (`r-2`) is forgotten in its turn.
    assert!(!refused(1), "an id past the bound is still kept");
    let ids = state.run_ids.lock().unwrap();
    assert_eq!(
        (ids.active.len(), ids.ended.len(), ids.ended_set.len()),
        (1, super::KEPT_ENDED_RUN_IDS, super::KEPT_ENDED_RUN_IDS)
    );
    drop(ids);
    drop(in_flight);
}

/// What an [`ArmedThreads`] store does at its next save, once armed.
enum NextSave {
    /// Fails it, as a store that cannot take a write does.
    Fails,
    /// Lets another writer save a turn of its own on the thread first, as another process
    /// sharing the store would between this one's load and its save.
    AnotherWriterFirst,
    /// As [`NextSave::AnotherWriterFirst`], the other writer saving this state.
    AnotherWriterSaves(serde_json::Value),
    /// Takes this save, and fails the one after it.
    FailsTheNext,
}

/// Threads in memory whose next save, once armed, does what the [`NextSave`] says.
#[derive(Default)]
struct ArmedThreads {
    inner: crate::MemoryThreads,
    armed: Mutex<Option<NextSave>>,
}

impl ArmedThreads {
    fn arm(&self, next: NextSave) {
        *self.armed.lock().unwrap() = Some(next);
    }
}

#[async_trait::async_trait]
impl ai_core::ThreadStore for ArmedThreads {
    async fn load(
        &self,
        id: &ThreadId,
    ) -> Result<Option<serde_json::Value>, ai_core::ThreadStoreError> {
        self.inner.load(id).await
    }

    async fn save(
        &self,
        id: &ThreadId,
        previous: Option<&serde_json::Value>,
        state: &serde_json::Value,
    ) -> Result<(), ai_core::ThreadStoreError> {
        let armed = self.armed.lock().unwrap().take();
        match armed {
            Some(NextSave::Fails) => {
                return Err(ai_core::ThreadStoreError::Failed("no space left".into()));
            }
            Some(NextSave::AnotherWriterFirst) => {
                let other = json!({"another": "turn"});
                self.inner.save(id, previous, &other).await?;
            }
            Some(NextSave::AnotherWriterSaves(other)) => {
                self.inner.save(id, previous, &other).await?;
            }
            Some(NextSave::FailsTheNext) => self.arm(NextSave::Fails),
            None => {}
        }
        self.inner.save(id, previous, state).await
    }
}

/// A server without a run log over `threads`, its `thread` paused for approval of
/// `core__send` (run `r-1`), and the request resuming it approved as run `r-2`.
async fn paused_without_a_run_log(
    threads: Arc<ArmedThreads>,
    thread: &str,
) -> (Arc<super::AppState>, serde_json::Value) {
    let stores = crate::Stores {
        threads,
        log: None,
        memory_threads: None,
    };
    let state = Arc::new(super::AppState::new(send_and_gate(None), stores));
    let user = json!({"threadId": thread, "runId": "r-1",
        "messages": [{"id": "m1", "role": "user", "content": "send it"}]});
    let paused = post(super::agui::run, state.clone(), user).await;
    assert!(paused.contains("\"interrupts\""), "{paused}");
    let resume = json!({"threadId": thread, "runId": "r-2", "messages": [],
        "resume": [{"interruptId": "call_send", "status": "resolved",
                    "payload": {"approved": true}}]});
    (state, resume)
}

/// Without a run log, a run that fails to start (here: its approvals cannot be saved as
/// consumed, so nothing ran) leaves its id free: the client's retry with the same runId
/// runs, where before it was refused 409 `run_exists` until 10,000 more runs had ended.
#[tokio::test]
async fn without_a_run_log_a_run_that_never_started_leaves_its_id_free() {
    use ai_core::ThreadStore as _;
    let threads = Arc::new(ArmedThreads::default());
    let (state, resume) = paused_without_a_run_log(threads.clone(), "t-retry").await;
    threads.arm(NextSave::Fails);
    let failed = try_post(super::agui::run, state.clone(), resume.clone()).await;
    let failed = failed.expect_err("the run started");
    assert_eq!((failed.status.as_u16(), failed.code), (500, "internal"));
    let retried = try_post(super::agui::run, state.clone(), resume).await;
    let retried = retried.unwrap_or_else(|e| panic!("the retry was refused: {e:?}"));
    assert!(retried.contains("TOOL_CALL_RESULT"), "{retried}");
    // Once it ran, the id is used.
    let user = json!({"threadId": "t-retry", "runId": "r-2",
        "messages": [{"id": "m2", "role": "user", "content": "and now?"}]});
    let again = try_post(super::agui::run, state.clone(), user).await;
    assert_eq!(again.expect_err("ran twice").code, "run_exists");
    assert!(
        threads
            .load(&ThreadId::new("t-retry").unwrap())
            .await
            .unwrap()
            .is_some()
    );
}

/// Without a run log, a resume whose thread another writer saved between its load and its
/// save past the pause (another process resumed the same pause) runs nothing and is refused
/// 409 `thread_changed`, as it is with a run log, rather than running the approved calls a
/// second time.
#[tokio::test]
async fn without_a_run_log_a_resume_whose_thread_changed_meanwhile_is_refused() {
    let threads = Arc::new(ArmedThreads::default());
    let (state, resume) = paused_without_a_run_log(threads.clone(), "t-twice").await;
    threads.arm(NextSave::AnotherWriterFirst);
    let refused = try_post(super::agui::run, state.clone(), resume).await;
    let refused = refused.expect_err("the resume ran");
    assert_eq!(
        (refused.status.as_u16(), refused.code),
        (409, "thread_changed")
    );
}

/// A thread left past its pause (its resume ran the approved call, then its closing save
/// failed) has the call answered by the next user message as one that may have run, and that
/// run shows the answer. The call was shown whole by the run that paused, as a call a new
/// message cancels while it waits is, and is ended as that one is: over AG-UI its result
/// alone (a second `TOOL_CALL_START` would give the client's history the call twice), to a
/// client whose messages hold no answer to it (one that does gets nothing of it: below), over
/// the AI SDK nothing (the stream is a new message, which cannot end a part of an earlier
/// one; the thread holds the answer).
#[tokio::test]
async fn the_next_message_ends_a_call_a_lost_save_left_out_as_the_earlier_run_showed_it() {
    for agui in [true, false] {
        let thread = match agui {
            true => "t-lost-agui",
            false => "t-lost-chat",
        };
        let threads = Arc::new(ArmedThreads::default());
        let (state, resume) = paused_without_a_run_log(threads.clone(), thread).await;
        threads.arm(NextSave::FailsTheNext);
        let resumed = post(super::agui::run, state.clone(), resume).await;
        assert!(resumed.contains("RUN_ERROR"), "{resumed}");
        let (_, phase) = saved_thread(&state, thread).await;
        assert!(
            matches!(phase, graph::Phase::AwaitingTools { .. }),
            "{phase:?}"
        );
        let next = match agui {
            true => {
                let user = json!({"threadId": thread, "runId": "r-3",
                    "messages": [{"id": "m3", "role": "user", "content": "and now?"}]});
                post(super::agui::run, state.clone(), user).await
            }
            false => {
                let user = json!({"id": thread, "messages": [{"id": "m3", "role": "user",
                    "parts": [{"type": "text", "text": "and now?"}]}]});
                post(super::chat::run, state.clone(), user).await
            }
        };
        let (messages, _) = saved_thread(&state, thread).await;
        let lost = answer_to(&messages, "call_send").unwrap();
        assert!(lost.contains("interrupted"), "{lost}");
        let frames: Vec<&str> = next
            .split("\n\n")
            .filter(|f| f.contains("\"call_send\""))
            .collect();
        match agui {
            true => {
                let [result] = frames.as_slice() else {
                    panic!("{next}");
                };
                assert!(
                    result.contains("TOOL_CALL_RESULT") && result.contains("interrupted"),
                    "{next}"
                );
            }
            false => assert!(frames.is_empty(), "{next}"),
        }
    }
}

/// The `TOOL_CALL_RESULT` frames of an AG-UI stream that answer call `id`.
fn agui_results_of<'a>(stream: &'a str, id: &str) -> Vec<&'a str> {
    let id = format!("\"toolCallId\":\"{id}\"");
    stream
        .split("\n\n")
        .filter(|frame| frame.contains("\"TOOL_CALL_RESULT\"") && frame.contains(&id))
        .collect()
}

/// A call the client's messages already answer gets no second answer over AG-UI. A resume
/// whose closing save failed answered its approved call on its stream before `RUN_ERROR`, and
/// `@ag-ui/client` keeps that answer as a tool message; the next user message's run answers the
/// call in the thread as one that may have run (`interrupted`), but sends nothing of it: a
/// second `TOOL_CALL_RESULT` would give the client's history two answers to one call id, which
/// a server that lost the thread then refuses to rebuild (`Duplicate`).
#[tokio::test]
async fn the_next_agui_message_does_not_answer_again_a_call_the_clients_messages_answer() {
    let thread = "t-lost-answered";
    let threads = Arc::new(ArmedThreads::default());
    let (state, resume) = paused_without_a_run_log(threads.clone(), thread).await;
    threads.arm(NextSave::FailsTheNext);
    let resumed = post(super::agui::run, state.clone(), resume).await;
    assert!(resumed.contains("RUN_ERROR"), "{resumed}");
    let [answer] = agui_results_of(&resumed, "call_send")[..] else {
        panic!("{resumed}");
    };
    let answer: serde_json::Value =
        serde_json::from_str(answer.trim_start_matches("data: ")).unwrap();
    // The client's messages, as `@ag-ui/client` holds them after both runs, and the new one.
    let user = json!({"threadId": thread, "runId": "r-3", "messages": [
        {"id": "m1", "role": "user", "content": "send it"},
        {"id": "r-1-m1", "role": "assistant", "toolCalls": [{"id": "call_send",
            "type": "function", "function": {"name": "core__send", "arguments": "{}"}}]},
        {"id": answer["messageId"], "role": "tool", "toolCallId": "call_send",
            "content": answer["content"]},
        {"id": "m3", "role": "user", "content": "and now?"}]});
    let next = post(super::agui::run, state.clone(), user).await;
    assert!(next.contains("RUN_FINISHED"), "{next}");
    assert!(!next.contains("\"call_send\""), "{next}");
    // The thread still holds the call answered as one that may have run.
    let (messages, _) = saved_thread(&state, thread).await;
    let lost = answer_to(&messages, "call_send").unwrap();
    assert!(lost.contains("interrupted"), "{lost}");
}

/// A call a new message cancels while it waits for approval gets no second answer over AG-UI
/// when the client's messages answer it already (a stream cut while it waited answered it, and
/// the run then paused): the thread holds it cancelled, the stream sends nothing of it.
#[tokio::test]
async fn a_cancelled_call_the_clients_messages_answer_is_not_answered_again() {
    let thread = "t-cancel-answered";
    let threads = Arc::new(ArmedThreads::default());
    let (state, _) = paused_without_a_run_log(threads, thread).await;
    let user = json!({"threadId": thread, "runId": "r-2", "messages": [
        {"id": "m1", "role": "user", "content": "send it"},
        {"id": "r-1-m1", "role": "assistant", "toolCalls": [{"id": "call_send",
            "type": "function", "function": {"name": "core__send", "arguments": "{}"}}]},
        {"id": "r-1-result-call_send", "role": "tool", "toolCallId": "call_send",
            "content": "{\"error\":{\"message\":\"this stream was cut\"}}"},
        {"id": "m2", "role": "user", "content": "never mind"}]});
    let next = post(super::agui::run, state.clone(), user).await;
    assert!(next.contains("RUN_FINISHED"), "{next}");
    assert!(agui_results_of(&next, "call_send").is_empty(), "{next}");
    let (messages, _) = saved_thread(&state, thread).await;
    let cancelled = answer_to(&messages, "call_send").unwrap();
    assert!(cancelled.contains("cancelled"), "{cancelled}");
}

/// The user's first message in the tests' AG-UI copies, which the paused turn began with.
fn send_it() -> serde_json::Value {
    json!({"id": "m1", "role": "user", "content": "send it"})
}

/// The assistant message of an AG-UI copy that shows the calls `ids` of `core__send`.
fn showing(ids: &[&str]) -> serde_json::Value {
    let calls: Vec<_> = ids
        .iter()
        .map(|id| {
            json!({"id": id, "type": "function",
            "function": {"name": "core__send", "arguments": "{}"}})
        })
        .collect();
    json!({"id": "r-1-m1", "role": "assistant", "toolCalls": calls})
}

/// A call a run paused on whose start never reached the client (its stream was cut before the
/// call's approval request) gets nothing over AG-UI from the next message's run, which cancels
/// it: a copy that holds the paused turn's user message and names no such call shows the
/// client never saw it, and a `TOOL_CALL_RESULT` alone would give the client a tool message
/// for a call it does not hold (a history a server that lost the thread refuses to rebuild).
/// A copy that names the call, or one of the new message alone (which says nothing of what
/// the client holds), still has it answered. The thread holds it cancelled either way.
#[tokio::test]
async fn the_next_agui_message_sends_nothing_of_a_call_the_client_never_saw() {
    for (thread, copy, shown) in [
        ("t-unseen", vec![send_it()], false),
        ("t-seen", vec![send_it(), showing(&["call_send"])], true),
        ("t-lone", vec![], true),
    ] {
        let threads = Arc::new(ArmedThreads::default());
        let (state, _) = paused_without_a_run_log(threads, thread).await;
        let mut messages = copy;
        messages.push(json!({"id": "m2", "role": "user", "content": "never mind"}));
        let user = json!({"threadId": thread, "runId": "r-2", "messages": messages});
        let next = post(super::agui::run, state.clone(), user).await;
        record(&format!("next-message-{thread}.agui.sse"), &next);
        assert!(next.contains("RUN_FINISHED"), "{next}");
        assert_eq!(next.contains("\"call_send\""), shown, "{thread}: {next}");
        assert_eq!(
            agui_results_of(&next, "call_send").len(),
            usize::from(shown)
        );
        let (messages, _) = saved_thread(&state, thread).await;
        let cancelled = answer_to(&messages, "call_send").unwrap();
        assert!(cancelled.contains("cancelled"), "{thread}: {cancelled}");
    }
}

/// A server without a run log, `ai_sdk_version` 6, whose model's two calls (`call_send`,
/// `call_gate`) both wait for approval, its `thread` paused on them by a user message sent
/// over AG-UI or, with `chat`, the AI SDK.
async fn paused_on_two(thread: &str, chat: bool) -> Arc<super::AppState> {
    let stores = crate::Stores {
        threads: Arc::new(crate::MemoryThreads::default()),
        log: None,
        memory_threads: None,
    };
    let runtime = send_and_gate_waiting(None, r#"["external_side_effect", "read_only"]"#);
    let state = Arc::new(super::AppState::new(runtime, stores).with_ai_sdk_version(6));
    let paused = match chat {
        true => {
            let user = json!({"id": thread, "messages": [{"id": "m1", "role": "user",
                "parts": [{"type": "text", "text": "send it"}]}]});
            post(super::chat::run, state.clone(), user).await
        }
        false => {
            let user = json!({"threadId": thread, "runId": "r-1", "messages": [send_it()]});
            post(super::agui::run, state.clone(), user).await
        }
    };
    for id in ["call_send", "call_gate"] {
        assert!(paused.contains(id), "{paused}");
    }
    let (_, phase) = saved_thread(&state, thread).await;
    assert!(
        matches!(phase, graph::Phase::AwaitingApproval { .. }),
        "{phase:?}"
    );
    state
}

/// A resume answers the call the client was shown and denies the one it was not (the stream
/// was cut before its approval request), and sends nothing of that one: over the AI SDK a tool
/// output for a call the client's last message does not hold is refused by the client (no part
/// holds it); over AG-UI, to a copy that holds the paused turn and names no such call, its
/// `TOOL_CALL_RESULT` would be a tool message for a call the client does not hold.
#[tokio::test]
async fn a_resume_sends_nothing_of_a_waiting_call_the_client_never_saw() {
    for chat in [false, true] {
        let thread = match chat {
            true => "t-unseen-resume-chat",
            false => "t-unseen-resume-agui",
        };
        let state = paused_on_two(thread, chat).await;
        let resumed = match chat {
            true => {
                let shown = json!({"id": "a1", "role": "assistant", "parts": [
                    {"type": "step-start"},
                    {"type": "tool-core__send", "toolCallId": "call_send",
                     "state": "approval-responded", "input": {},
                     "approval": {"id": "call_send", "approved": true}}]});
                let resume = json!({"id": thread, "messages": [{"id": "m1", "role": "user",
                    "parts": [{"type": "text", "text": "send it"}]}, shown]});
                // Not recorded: the validators check a resumed stream from the whole paused
                // stream's message, which here the client never read whole.
                post(super::chat::run, state.clone(), resume).await
            }
            false => {
                let resume = json!({"threadId": thread, "runId": "r-2",
                    "messages": [send_it(), showing(&["call_send"])],
                    "resume": [{"interruptId": "call_send", "status": "resolved",
                                "payload": {"approved": true}}]});
                let body = post(super::agui::run, state.clone(), resume).await;
                record("resume-unseen-call.agui.sse", &body);
                body
            }
        };
        assert!(resumed.contains("\"call_send\""), "{resumed}");
        assert!(!resumed.contains("\"call_gate\""), "{resumed}");
        let (messages, _) = saved_thread(&state, thread).await;
        let denied = answer_to(&messages, "call_gate").unwrap();
        assert!(denied.contains("denied"), "{denied}");
    }
}

/// A call the client answers an interrupt of reached it, whatever its copy holds: a resume
/// whose copy holds the paused turn's user message but names none of its calls (a client that
/// keeps an assistant message's text and drops its calls) still gets its approved call's
/// result, and the denied one's, rather than a run whose calls it never hears of.
#[tokio::test]
async fn an_agui_resume_gets_the_results_of_the_calls_it_answers() {
    let thread = "t-answered-unnamed";
    let state = paused_on_two(thread, false).await;
    let text = json!({"id": "r-1-m1", "role": "assistant", "content": "Sending."});
    let resume = json!({"threadId": thread, "runId": "r-2", "messages": [send_it(), text],
        "resume": [
            {"interruptId": "call_send", "status": "resolved", "payload": {"approved": true}},
            {"interruptId": "call_gate", "status": "resolved", "payload": {"approved": false}}]});
    let resumed = post(super::agui::run, state.clone(), resume).await;
    assert!(resumed.contains("RUN_FINISHED"), "{resumed}");
    for id in ["call_send", "call_gate"] {
        assert_eq!(agui_results_of(&resumed, id).len(), 1, "{id}: {resumed}");
    }
}

/// A resume refused `thread_changed` because another process ran a user message on the
/// thread meanwhile (one that ended the same pause) is not told that its next message goes on
/// from the thread: over AG-UI its client's copy lacks that message, so its next message is
/// refused `history_mismatch`, which the refusal says.
#[tokio::test]
async fn a_thread_changed_refusal_says_when_ag_ui_refuses_the_next_message() {
    use ai_core::ThreadStore as _;
    let thread = ThreadId::new("t-moved").unwrap();
    // What the other process saved: the same pause, then a user message of its own.
    let elsewhere = Arc::new(ArmedThreads::default());
    let (other, _) = paused_without_a_run_log(elsewhere.clone(), "t-moved").await;
    let never_mind = json!({"threadId": "t-moved", "runId": "r-9",
        "messages": [{"id": "m9", "role": "user", "content": "never mind"}]});
    post(super::agui::run, other, never_mind).await;
    let moved = elsewhere.load(&thread).await.unwrap().unwrap();

    let threads = Arc::new(ArmedThreads::default());
    let (state, resume) = paused_without_a_run_log(threads.clone(), "t-moved").await;
    threads.arm(NextSave::AnotherWriterSaves(moved));
    let refused = try_post(super::agui::run, state.clone(), resume).await;
    let refused = refused.expect_err("the resume ran");
    assert_eq!(
        (refused.status.as_u16(), refused.code),
        (409, "thread_changed")
    );
    let next = json!({"threadId": "t-moved", "runId": "r-3", "messages": [
        {"id": "m1", "role": "user", "content": "send it"},
        {"id": "a1", "role": "assistant", "content": "sending"},
        {"id": "m2", "role": "user", "content": "and now?"}]});
    let next = try_post(super::agui::run, state, next).await;
    assert_eq!(next.expect_err("ran").code, "history_mismatch");
    assert!(
        refused.message.contains("history_mismatch")
            && refused.message.contains("start a new thread"),
        "{}",
        refused.message
    );
}

/// The slow-client limits of `[server]` reach the state `cogni serve` serves; unset, they are
/// the state's defaults.
#[tokio::test]
async fn the_slow_client_limits_come_from_the_settings() {
    let state = prepare(&settings()).await.unwrap();
    let bounds = state.unsent_bounds;
    assert_eq!(
        (bounds.max_events, bounds.grace, bounds.max_bytes),
        (
            super::DEFAULT_MAX_UNSENT_EVENTS,
            super::DEFAULT_SLOW_CLIENT_GRACE,
            super::DEFAULT_MAX_UNSENT_BYTES
        )
    );
    let mut set = crate::Settings::from_toml_str(
        "[server]\nmax_unsent_events = 8\nslow_client_grace_ms = 250\n\
         max_unsent_bytes = 2048\n",
    )
    .unwrap();
    set.llm.model = "test-model".into();
    set.validate().unwrap();
    let bounds = prepare(&set).await.unwrap().unsent_bounds;
    assert_eq!(
        (bounds.max_events, bounds.grace, bounds.max_bytes),
        (8, std::time::Duration::from_millis(250), 2048)
    );
}

/// The server's state holds the token (its middleware asks for it) but never shows it.
#[tokio::test]
async fn the_token_is_not_in_the_debug_of_the_state() {
    let token = "tok-state-7a6b5c4d";
    let mut settings = settings();
    settings.server.token = Some(crate::ServerToken::new(token));
    let state = prepare(&settings).await.unwrap();
    assert!(state.token.as_ref().unwrap().matches(token));
    let shown = format!("{state:?} {state:#?}");
    assert!(!shown.contains(token), "{shown}");
}

/// The whole answer of `addr` to `GET /healthz` sent with `Host: host`, over HTTP/1.1.
async fn get_health(addr: std::net::SocketAddr, host: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET /healthz HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

/// A 405 names a standard method, but never quotes an extension method: that is the
/// client's text, as long as a request line may be.
#[tokio::test]
async fn a_405_does_not_quote_an_extension_method() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = super::router(prepare(&settings()).await.unwrap(), 4096);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let with_peer = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, with_peer).await });
    let method = format!("X-{}", "FORGED".repeat(1000));
    for (sent, shown) in [("DELETE", Some("DELETE")), (method.as_str(), None)] {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "{sent} /api/v1/tools HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
        assert!(answer.contains("\"method_not_allowed\""), "{answer}");
        match shown {
            Some(shown) => assert!(answer.contains(shown), "{answer}"),
            None => assert!(!answer.contains("FORGED"), "{answer}"),
        }
    }
}

/// A 405 says in `Allow` which methods its path answers (RFC 9110 §15.5.6), exactly those,
/// with or without a token (the token's middleware wraps the routes on one, the host check on
/// the other). A 401 has no `Allow`, which would tell a client without the token the routes.
#[tokio::test]
async fn a_405_names_in_allow_the_methods_its_path_answers() {
    let token = "tok-allow-3e2d1c";
    let mut with_token = settings();
    with_token.server.token = Some(crate::ServerToken::new(token));
    let bearer = format!("authorization: Bearer {token}\r\n");
    for (settings, authorization) in [(settings(), ""), (with_token, bearer.as_str())] {
        let app = super::router(prepare(&settings).await.unwrap(), 4096);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let with_peer = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
        tokio::spawn(async move { axum::serve(listener, with_peer).await });
        for (sent, path, allowed) in [
            ("DELETE", "/healthz", "GET,HEAD"),
            ("POST", "/api/v1/tools", "GET,HEAD"),
            ("PUT", "/api/v1/tools/stats", "GET,HEAD"),
            ("GET", "/api/v1/agui", "POST"),
            ("GET", "/api/v1/chat", "POST"),
        ] {
            let (status, allow) =
                status_and_allow(addr, sent, path, "localhost", authorization).await;
            assert_eq!(
                (status.as_str(), allow.as_str()),
                ("405", allowed),
                "{sent} {path}"
            );
            if !authorization.is_empty() && path != "/healthz" {
                let (status, allow) = status_and_allow(addr, sent, path, "localhost", "").await;
                assert_eq!(
                    (status.as_str(), allow.as_str()),
                    ("401", ""),
                    "{sent} {path}"
                );
            }
        }
    }
}

/// A 403 of the loopback checks has no `Allow` either, as a 401 has none: it would tell a
/// client the server refuses which paths exist and what they answer. So for the router's
/// own guard (no token) and for `serve`'s host check on a loopback listener (serving
/// unauthenticated allowed), each wrapping the whole router.
#[tokio::test]
async fn a_403_does_not_name_the_methods_of_its_path() {
    let guarded = {
        let app = super::router(prepare(&settings()).await.unwrap(), 4096);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let with_peer = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
        tokio::spawn(async move { axum::serve(listener, with_peer).await });
        addr
    };
    let served = {
        let mut open = settings();
        open.server.allow_unauthenticated = true;
        let state = prepare(&open).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let forever = std::future::pending::<()>();
        tokio::spawn(super::serve_until(listener, state, 4096, forever));
        addr
    };
    for addr in [guarded, served] {
        for (sent, path) in [
            ("DELETE", "/healthz"),
            ("POST", "/api/v1/tools"),
            ("GET", "/api/v1/agui"),
            ("GET", "/api/v1/chat"),
            ("GET", "/healthz"),
        ] {
            let answer = status_and_allow(addr, sent, path, "attacker.example", "").await;
            assert_eq!(
                (answer.0.as_str(), answer.1.as_str()),
                ("403", ""),
                "{sent} {path}"
            );
        }
    }
}

/// The status `addr` answers to `method path` addressed to `host` (sent with the header line
/// `authorization`, if not empty), and the methods its `Allow` headers name, sorted and
/// joined with commas.
async fn status_and_allow(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    authorization: &str,
) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {host}\r\n{authorization}\
         content-length: 0\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let head = answer.split("\r\n\r\n").next().unwrap();
    let status = head.split(' ').nth(1).unwrap_or_default().to_owned();
    let mut methods: Vec<_> = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .filter(|(name, _)| name.eq_ignore_ascii_case("allow"))
        .flat_map(|(_, value)| value.split(','))
        .map(str::trim)
        .collect();
    methods.sort_unstable();
    (status, methods.join(","))
}

/// `router` used as the library entry, without a token, keeps the rules `cogni serve` keeps:
/// only a loopback client addressing a loopback host is answered, and a router served
/// without the peer's address (which it cannot check) answers no one.
#[tokio::test]
async fn the_router_without_a_token_answers_only_loopback_clients_and_hosts() {
    let state = prepare(&settings()).await.unwrap();
    let app = super::router(state.clone(), 4096);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let with_peer = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, with_peer).await });
    let answer = get_health(addr, "attacker.example").await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("host_not_allowed"), "{answer}");
    let answer = get_health(addr, &format!("localhost:{}", addr.port())).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = super::router(state, 4096);
    tokio::spawn(async move { axum::serve(listener, app).await });
    let answer = get_health(addr, &format!("localhost:{}", addr.port())).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("client_not_allowed"), "{answer}");

    // Allowed to serve unauthenticated, it answers anyone: the caller said so.
    let mut open = settings();
    open.server.allow_unauthenticated = true;
    let app = super::router(prepare(&open).await.unwrap(), 4096);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let answer = get_health(addr, "cogni.example").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// `serve` used as the library entry refuses a listener that is not loopback without a
/// token, unless the state allows it, as `cogni serve` refuses it from its settings.
#[tokio::test]
async fn serve_without_a_token_refuses_a_listener_that_is_not_loopback() {
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let state = prepare(&settings()).await.unwrap();
    // Refused at its first poll, before it serves anything.
    let serving = futures_util::FutureExt::now_or_never(super::serve(listener, state, 4096));
    let Some(Err(error)) = serving else {
        panic!("a listener that is not loopback was served without a token");
    };
    assert_eq!(
        error.kind(),
        std::io::ErrorKind::PermissionDenied,
        "{error}"
    );
    assert!(error.to_string().contains("needs a token"), "{error}");
}

/// A body the protocol's types refuse is named by its fault, never by its data: serde's own
/// message quotes an unknown variant or a mistyped value, which would send a client's text
/// (a message, an id of any length, control characters) back in the error.
#[test]
fn a_refused_body_is_described_without_quoting_it() {
    let secret = "SECRET-7f3a\u{1b}[2J";
    let mut headers = axum::http::HeaderMap::new();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    let bodies = [
        serde_json::json!({"threadId": "t", "runId": "r",
                           "messages": [{"id": "m", "role": secret, "content": "hi"}]}),
        serde_json::json!({"threadId": "t", "runId": "r", "messages": secret}),
        serde_json::json!({"threadId": "t", "runId": "r", "messages": [],
                           "resume": [{"interruptId": "c", "status": secret}]}),
    ];
    for body in bodies {
        let body = axum::body::Bytes::from(body.to_string());
        let error = super::parse_body::<wire_ui::agui::RunAgentInput>(
            &headers,
            Ok(body),
            super::BodyLimit(1024),
        )
        .unwrap_err();
        assert_eq!(error.code, "invalid_body");
        assert!(!error.message.contains("SECRET"), "{}", error.message);
        assert!(error.message.contains("line 1 column"), "{}", error.message);
    }
    // Syntax errors say what serde_json says: they quote nothing.
    let body = axum::body::Bytes::from_static(b"{not json");
    let error = super::parse_body::<wire_ui::agui::RunAgentInput>(
        &headers,
        Ok(body),
        super::BodyLimit(1024),
    )
    .unwrap_err();
    assert!(
        error.message.contains("key must be a string"),
        "{}",
        error.message
    );
}

/// A user message of `text`, for the resend tests.
fn user(text: &str) -> ai_core::Message {
    ai_core::Message::User {
        content: text.into(),
    }
}

/// An answer of `text` without tool calls, for the resend tests.
fn answer(text: &str) -> ai_core::Message {
    ai_core::Message::Assistant {
        content: text.into(),
        tool_calls: Vec::new(),
    }
}

/// A message the server refused before it ran (503) that the user then typed again by hand
/// leaves the client's copy holding its text twice, first without an answer, and the thread
/// once. A later retry or edit in that chat is still placed in the thread: the copy fits it
/// when the unanswered one is the message no run took, whatever the other reading says.
#[test]
fn a_refused_message_typed_again_does_not_misplace_a_later_resend() {
    let max_steps = std::num::NonZeroU32::new(8).unwrap();
    let history = vec![user("A"), answer("a"), user("B"), answer("b")];
    let thread = graph::AgentState::from_history(history.clone(), max_steps).unwrap();
    // The client's copy: A, a, B (refused: 503), B (typed again), b, then the message resent.
    let before = vec![
        ("A".to_owned(), true),
        ("B".to_owned(), false),
        ("B".to_owned(), true),
    ];
    for kind in [super::ResendKind::Retry, super::ResendKind::Edit] {
        let resend = super::Resend {
            kind,
            before: before.clone(),
        };
        // A message the thread does not hold yet: it runs after the turns the thread holds.
        let state = resend
            .rewind(thread.clone(), "C")
            .unwrap_or_else(|e| panic!("{kind:?}: {} {}", e.code, e.message));
        assert_eq!(state.messages(), &history[..], "{kind:?}");
    }
    // An edit of the message after them rewinds the thread to before it, not further.
    let mut longer = history.clone();
    longer.extend([user("C"), answer("c")]);
    let thread = graph::AgentState::from_history(longer, max_steps).unwrap();
    let edit = super::Resend {
        kind: super::ResendKind::Edit,
        before,
    };
    let state = edit
        .rewind(thread, "C, edited")
        .unwrap_or_else(|e| panic!("{} {}", e.code, e.message));
    assert_eq!(state.messages(), &history[..]);
}

/// A retry of a message the thread answered, last or earlier, rewinds the thread to before
/// it, whatever followed it, so it runs again in its place; one whose text is not the
/// thread's at its place is another conversation: refused (409 `history_mismatch`).
#[test]
fn a_retry_of_an_answered_message_rewinds_to_before_it() {
    let max_steps = std::num::NonZeroU32::new(8).unwrap();
    let history = vec![user("A"), answer("a"), user("B"), answer("b")];
    let thread = graph::AgentState::from_history(history.clone(), max_steps).unwrap();
    let retry = |before: &[&str]| super::Resend {
        kind: super::ResendKind::Retry,
        before: before.iter().map(|t| ((*t).to_owned(), true)).collect(),
    };
    for (before, message, kept) in [(&["A"][..], "B", 2), (&[][..], "A", 0)] {
        let state = retry(before)
            .rewind(thread.clone(), message)
            .unwrap_or_else(|e| panic!("{message}: {} {}", e.code, e.message));
        assert_eq!(state.messages(), &history[..kept], "{message}");
    }
    let error = retry(&["A"]).rewind(thread, "not B").unwrap_err();
    assert_eq!(error.status, axum::http::StatusCode::CONFLICT);
    assert_eq!(error.code, "history_mismatch");
}

/// Each refusal of a run its client's copy or the thread's moves keep from starting, and the
/// end of a stream cut for its client, tells the client what it can do: send a new message
/// or start a new thread (no endpoint reads a thread back). Before, each told it to "read
/// the thread again". None repeats the client's ids.
#[test]
fn refusals_point_the_client_at_what_it_can_do() {
    let max_steps = std::num::NonZeroU32::new(8).unwrap();
    let history = vec![user("A"), answer("a"), user("B"), answer("b")];
    let thread = graph::AgentState::from_history(history, max_steps).unwrap();
    let resend = |kind, before: &str| super::Resend {
        kind,
        before: vec![(before.to_owned(), true)],
    };
    let not_the_thread_s = resend(super::ResendKind::Edit, "not A")
        .rewind(thread.clone(), "B")
        .unwrap_err();
    let not_its_text = resend(super::ResendKind::Retry, "A")
        .rewind(thread, "not B")
        .unwrap_err();
    let changed =
        super::refusal_to_begin(&anyhow::Error::new(ai_core::RunStoreError::ThreadChanged {
            run_id: RunId::new("r-ZQX").unwrap(),
            thread_id: ThreadId::new("t-ZQX").unwrap(),
        }));
    assert_eq!(
        (changed.status.as_u16(), changed.code),
        (409, "thread_changed")
    );
    for message in [
        &not_the_thread_s.message,
        &not_its_text.message,
        &changed.message,
        super::CUT_MESSAGE,
    ] {
        assert!(!message.contains("read the thread"), "{message}");
        assert!(!message.contains("ZQX"), "{message}");
    }
    for refused in [&not_the_thread_s, &not_its_text] {
        assert!(
            refused.message.contains("as a new") && refused.message.contains("start a new thread"),
            "{}",
            refused.message
        );
    }
    assert!(
        super::CUT_MESSAGE.contains("the next message goes on"),
        "{}",
        super::CUT_MESSAGE
    );
    assert!(
        changed.message.contains("a new message goes on")
            && changed.message.contains("start a new thread"),
        "{}",
        changed.message
    );
}

/// A message the server refused before it ran (503) that the user then typed again by hand,
/// answered, and then regenerated: the client's copy holds its text twice, first without an
/// answer, then last (cut before the answer asked for again). It reads two ways: the
/// unanswered one is the thread's and the last is new, or the unanswered one is the refused
/// one and the last is the thread's. A retry names its message by its text, and the thread
/// holds that text at its place in the second reading only: it is rewound to before it and
/// runs again there, not appended after the answer the user asked to replace (which the
/// model would still see, beside the message twice).
#[test]
fn a_retry_read_several_ways_is_placed_where_the_thread_holds_its_text() {
    let max_steps = std::num::NonZeroU32::new(8).unwrap();
    let history = vec![user("A"), answer("a"), user("B"), answer("b")];
    let thread = graph::AgentState::from_history(history.clone(), max_steps).unwrap();
    // The client's copy: A, a, B (refused: 503), then B (typed again), its answer cut off.
    let retry = super::Resend {
        kind: super::ResendKind::Retry,
        before: vec![("A".to_owned(), true), ("B".to_owned(), false)],
    };
    let state = retry
        .rewind(thread.clone(), "B")
        .unwrap_or_else(|e| panic!("{} {}", e.code, e.message));
    assert_eq!(state.messages(), &history[..2]);
    // A message the thread holds nowhere it could be still runs as a new one.
    let state = retry
        .rewind(thread, "C")
        .unwrap_or_else(|e| panic!("{} {}", e.code, e.message));
    assert_eq!(state.messages(), &history[..]);
}

/// Each user message of the client's copy without an answer that the thread could hold
/// doubles as one more reading to follow (held, or refused before it ran), and every reading
/// is tried against every later message: a copy of thousands of such messages on a thread of
/// thousands (both within one request body) would cost their product. The readings are
/// bounded: a copy with more of them than `MAX_READINGS` is refused (409), and up to that
/// it is placed as before.
#[test]
fn a_resend_with_more_readings_than_the_bound_is_refused() {
    use ai_core::Message;
    let max_steps = std::num::NonZeroU32::new(8).unwrap();
    let thread_of = |users: usize| {
        let history: Vec<Message> = (0..users)
            .flat_map(|_| {
                [
                    Message::User {
                        content: "x".into(),
                    },
                    Message::Assistant {
                        content: "a".into(),
                        tool_calls: Vec::new(),
                    },
                ]
            })
            .collect();
        graph::AgentState::from_history(history, max_steps).unwrap()
    };
    let unanswered = |count: usize| super::Resend {
        kind: super::ResendKind::Edit,
        before: vec![("x".to_owned(), false); count],
    };
    // Up to the bound: every reading is followed, and the furthest places the message.
    let within = super::MAX_READINGS - 1;
    let thread = thread_of(within);
    let state = unanswered(within)
        .rewind(thread.clone(), "y")
        .unwrap_or_else(|e| panic!("{} {}", e.code, e.message));
    assert_eq!(state.messages(), thread.messages());
    // One more reading than the bound: refused, and said why, rather than followed.
    let over = super::MAX_READINGS;
    let error = unanswered(over).rewind(thread_of(over), "y").unwrap_err();
    assert_eq!(error.status, axum::http::StatusCode::CONFLICT);
    assert_eq!(error.code, "history_mismatch");
    assert!(
        error.message.contains("without an answer"),
        "{}",
        error.message
    );
}

/// A store that cannot be opened is still fatal.
#[tokio::test]
async fn a_store_that_cannot_be_opened_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-folder");
    std::fs::write(&file, "").unwrap();
    let settings = crate::Settings {
        data_dir: Some(file),
        ..settings()
    };
    let error = prepare(&settings).await.unwrap_err();
    assert!(format!("{error:#}").contains("data_dir"), "{error:#}");
}

/// A thread store whose loads never answer; each load it starts is reported on `started`.
struct NeverLoads {
    started: tokio::sync::mpsc::UnboundedSender<()>,
}

#[async_trait::async_trait]
impl ai_core::ThreadStore for NeverLoads {
    async fn load(
        &self,
        _: &ThreadId,
    ) -> Result<Option<serde_json::Value>, ai_core::ThreadStoreError> {
        let _ = self.started.send(());
        std::future::pending().await
    }

    async fn save(
        &self,
        _: &ThreadId,
        _: Option<&serde_json::Value>,
        _: &serde_json::Value,
    ) -> Result<(), ai_core::ThreadStoreError> {
        Ok(())
    }
}

/// The whole answer of `addr` to a POST of `body` to `path`, over HTTP/1.1.
async fn post_over_loopback(addr: std::net::SocketAddr, path: &str, body: String) -> String {
    post_with_headers(addr, path, "", body.as_bytes()).await
}

/// The whole answer of `addr` to a POST of `body` to `path` with `headers` (each line ending
/// in CRLF) besides the usual ones, over HTTP/1.1.
async fn post_with_headers(
    addr: std::net::SocketAddr,
    path: &str,
    headers: &str,
    body: &[u8],
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: localhost:{}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n{headers}\r\n",
        addr.port(),
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

/// The whole answer of `addr` to a POST to `path` that declares a body of `declared` bytes
/// and never sends a byte of it, over HTTP/1.1; a test failure if the server waits for the
/// body.
async fn post_head_only(addr: std::net::SocketAddr, path: &str, declared: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: localhost:{}\r\ncontent-type: application/json\r\n\
         content-length: {declared}\r\nconnection: close\r\n\r\n",
        addr.port()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = String::new();
    let read = stream.read_to_string(&mut answer);
    // Bounds a failure (the server waits for the body), not the time the server takes.
    tokio::time::timeout(std::time::Duration::from_secs(5), read)
        .await
        .expect("the server waited for the body")
        .unwrap();
    answer
}

/// A body sent in a content coding is refused with 415, naming the fault without quoting
/// the coding, and nothing runs; `identity` is the body as it is, and the refusal's
/// `Accept-Encoding` says it is all the server takes. Before, the coding was ignored: gzip
/// bytes were refused as malformed JSON (400, naming a syntax error), and JSON labelled gzip
/// ran as if it were not.
#[tokio::test]
async fn a_body_in_a_content_coding_is_refused_415() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let model = SaysOk::default();
    let state = in_memory(8, model.clone());
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(super::serve_until(listener, state, 1 << 20, async {
        let _ = stopped.await;
    }));
    let chat = |thread: &str| {
        json!({"id": thread, "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
        .to_string()
    };
    // The start of a gzip stream: what a client that compresses its body sends.
    let gzip = [0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03];
    for (headers, body) in [
        ("content-encoding: gzip\r\n", chat("t-gzip").into_bytes()),
        ("content-encoding: GZIP\r\n", gzip.to_vec()),
        (
            "content-encoding: identity, ZQX-br\r\n",
            chat("t-br").into_bytes(),
        ),
        (
            "content-encoding: identity\r\ncontent-encoding: deflate\r\n",
            chat("t-deflate").into_bytes(),
        ),
    ] {
        let answer = post_with_headers(addr, "/api/v1/chat", headers, &body).await;
        assert!(answer.starts_with("HTTP/1.1 415"), "{headers}: {answer}");
        // RFC 9110 §12.5.3 (RFC 7694): what the request could have been sent in, which
        // tells a content coding refused from a media type refused.
        assert!(
            answer.contains("\r\naccept-encoding: identity\r\n"),
            "{headers}: {answer}"
        );
        assert!(
            answer.ends_with(
                r#"{"error":{"code":"unsupported_content_encoding","message":"the request body must be sent without a content coding: this server decodes none (no content-encoding, or identity)"}}"#
            ),
            "{headers}: {answer}"
        );
    }
    assert_eq!(model.last(), "", "a coded body ran");
    let headers = "content-encoding: Identity\r\n";
    let answer = post_with_headers(addr, "/api/v1/chat", headers, chat("t-id").as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(model.last().contains("hi"), "{}", model.last());
}

/// The AG-UI route reads `Accept` as RFC 9110 does: media types in any case, `text/*` takes
/// `text/event-stream`, and a range of weight 0 refuses it (the most specific one that
/// matches decides). Before, the header was searched for the text `text/event-stream` or
/// `*/*`: `Text/Event-Stream` and `text/*` were refused 406, and a range that refuses the
/// stream (`text/event-stream;q=0`) or only starts with its name was taken. And a quoted
/// parameter value is one value: it was cut at its commas and semicolons, so that a range
/// of weight 0 was taken, and a value naming the stream read as a range that takes it.
#[tokio::test]
async fn the_agui_route_reads_accept_as_media_ranges() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = in_memory(16, SaysOk::default());
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(super::serve_until(listener, state, 1 << 20, async {
        let _ = stopped.await;
    }));
    for (n, (accept, status)) in [
        ("Text/Event-Stream", 200),
        ("text/*", 200),
        ("application/json, TEXT/*; q=0.5", 200),
        ("text/event-stream;q=0, */*;q=1, text/event-stream", 200),
        ("application/json", 406),
        ("text/event-streams", 406),
        ("text/event-stream;q=0, */*", 406),
        ("text/event-stream; q=0.000", 406),
        ("application/json, text/*;q=0", 406),
        // A quoted parameter value is one value, whatever commas, semicolons or escaped
        // quotes it holds.
        (r#"application/json; x="1, text/event-stream, 2""#, 406),
        (r#"text/event-stream; x="a,b"; q=0"#, 406),
        (
            r#"text/event-stream; x="a\"; q=0; b", application/json"#,
            200,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let input = json!({"threadId": format!("t-accept-{n}"), "runId": format!("r-{n}"),
            "messages": [{"id": "m1", "role": "user", "content": "hi"}]});
        let headers = format!("accept: {accept}\r\n");
        let body = input.to_string();
        let answer = post_with_headers(addr, "/api/v1/agui", &headers, body.as_bytes()).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{accept}: {answer}"
        );
        if status == 406 {
            assert!(
                answer.contains(r#""code":"unsupported_protocol""#),
                "{answer}"
            );
        }
    }
}

/// A body in a transfer coding besides `chunked` (`gzip, chunked`, which hyper takes since
/// `chunked` is last, decoding only that) is refused with 501 (RFC 9112 §6.1), naming the
/// fault without quoting the coding, and nothing runs. Before, the coding was ignored: the
/// body ran as JSON though its label said it was gzip.
#[tokio::test]
async fn a_body_in_a_transfer_coding_but_chunked_is_refused_501() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let model = SaysOk::default();
    let state = in_memory(8, model.clone());
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(super::serve_until(listener, state, 1 << 20, async {
        let _ = stopped.await;
    }));
    let post = async |codings: &str, thread: &str| {
        let body = json!({"id": thread, "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
        .to_string();
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "POST /api/v1/chat HTTP/1.1\r\nhost: localhost:{}\r\ncontent-type: \
             application/json\r\n{codings}connection: close\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
            addr.port(),
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    };
    for (n, codings) in [
        "transfer-encoding: GZIP, chunked\r\n",
        "transfer-encoding: ZQX-br\r\ntransfer-encoding: chunked\r\n",
    ]
    .into_iter()
    .enumerate()
    {
        let answer = post(codings, &format!("t-coded-{n}")).await;
        assert!(answer.starts_with("HTTP/1.1 501"), "{codings}: {answer}");
        assert!(
            answer.ends_with(
                r#"{"error":{"code":"unsupported_transfer_coding","message":"the request body must be sent without a transfer coding but chunked: this server decodes no other"}}"#
            ),
            "{codings}: {answer}"
        );
    }
    assert_eq!(model.last(), "", "a coded body ran");
    let answer = post("transfer-encoding: Chunked\r\n", "t-chunked").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(model.last().contains("hi"), "{}", model.last());
}

/// A thread whose saved state this build cannot read is answered 500 naming the fault, and
/// the server's log says so, naming neither the thread nor anything of the state. Before,
/// only the client was told: the server's log had nothing of it.
#[tokio::test]
async fn an_unreadable_thread_state_is_logged_without_quoting_it() {
    let (logs, _logging) = Logs::capture();
    let state = in_memory(8, SaysOk::default());
    let unreadable = json!({"messages": "PRIVATE words", "phase": "idle", "steps": 0,
        "max_steps": 10});
    let thread = ThreadId::new("t-unreadable").unwrap();
    state
        .stores
        .threads
        .save(&thread, None, &unreadable)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(super::serve_until(listener, state, 1 << 20, async {
        let _ = stopped.await;
    }));
    let chat = json!({"id": "t-unreadable", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    let answer = post_over_loopback(addr, "/api/v1/chat", chat.to_string()).await;
    assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
    assert!(
        answer.contains("the thread holds an unreadable state"),
        "{answer}"
    );
    let logged = logs.text();
    let errors: Vec<&str> = logged
        .lines()
        .filter(|line| line.contains("ERROR"))
        .collect();
    assert!(
        matches!(errors.as_slice(), [line]
            if line.contains("a thread holds a state this build cannot read")),
        "{logged}"
    );
    assert!(
        !logged.contains("PRIVATE") && !logged.contains("t-unreadable"),
        "{logged}"
    );
}

/// A body whose `Content-Length` is over the limit is refused with the usual 413 at once,
/// from its header, before a byte of it arrives; before, the server waited for the limit's
/// worth of it (here none ever comes: the request waited for the body timeout).
#[tokio::test]
async fn a_body_declared_too_large_is_refused_before_it_arrives() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = in_memory(8, SaysOk::default());
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(super::serve_until(listener, state, 1024, async {
        let _ = stopped.await;
    }));
    let answer = post_head_only(addr, "/api/v1/chat", 1025).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.contains("content-type: application/json"),
        "{answer}"
    );
    assert!(
        answer.ends_with(
            r#"{"error":{"code":"body_too_large","message":"the request body is larger than the 1024 bytes this server takes (server.max_body_bytes)"}}"#
        ),
        "{answer}"
    );
}

/// Past the run limit's worth of requests for a run being read or started at once, one more
/// is refused with the run limit's JSON 503 on either route, before a byte of its body is
/// read (here none ever comes: read, the request would wait for its body); once a request
/// ends, the next is read and runs. Before, every connection could have its body (up to the
/// body limit) buffered before the run limit applied.
#[tokio::test]
async fn past_the_run_limit_a_request_s_body_is_not_read() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = in_memory(8, SaysOk::default());
    let all = u32::try_from(state.run_requests.available_permits()).unwrap();
    let reading = state
        .run_requests
        .clone()
        .try_acquire_many_owned(all)
        .unwrap();
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(super::serve_until(listener, state, 1 << 20, async {
        let _ = stopped.await;
    }));
    for path in ["/api/v1/agui", "/api/v1/chat"] {
        let answer = post_head_only(addr, path, 100).await;
        assert!(answer.starts_with("HTTP/1.1 503"), "{path}: {answer}");
        assert!(
            answer.contains("content-type: application/json")
                && answer.contains(r#""code":"too_many_runs""#)
                && answer.contains("the request body was not read"),
            "{path}: {answer}"
        );
    }
    drop(reading);
    let input = json!({"threadId": "t-read", "runId": "r-read",
        "messages": [{"id": "m1", "role": "user", "content": "hi"}]});
    let answer = post_over_loopback(addr, "/api/v1/agui", input.to_string()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// At its shutdown signal, `serve` cancels the runs in flight, a run whose thread store has
/// not answered its load included: the load is abandoned (it only reads), the request is
/// answered 503 `cancelled` on either route (nothing ran, nothing was saved: a cancel, not a
/// failure of the server), and `serve` returns. Before, such a request waited for its load
/// for ever, and the graceful shutdown with it.
#[tokio::test]
async fn at_shutdown_a_run_whose_thread_load_never_answers_is_cancelled() {
    let (started, mut loads) = tokio::sync::mpsc::unbounded_channel();
    let stores = crate::Stores {
        threads: Arc::new(NeverLoads { started }),
        log: None,
        memory_threads: None,
    };
    let state = Arc::new(super::AppState::new(send_and_gate(None), stores));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(super::serve_until(listener, state, 1 << 20, async {
        let _ = stopped.await;
    }));
    let agui = json!({"threadId": "t-agui", "runId": "r-agui",
        "messages": [{"id": "m1", "role": "user", "content": "hi"}]});
    let chat = json!({"id": "t-chat", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    let answers = [
        tokio::spawn(post_over_loopback(addr, "/api/v1/agui", agui.to_string())),
        tokio::spawn(post_over_loopback(addr, "/api/v1/chat", chat.to_string())),
    ];
    for _ in 0..answers.len() {
        loads.recv().await.expect("a load started");
    }
    stop.send(()).unwrap();
    // Bounds a failure (it hung for ever), not the time the server takes.
    let ended = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let mut shown = Vec::new();
        for answer in answers {
            shown.push(answer.await.unwrap());
        }
        serving.await.unwrap().unwrap();
        shown
    })
    .await
    .expect("the shutdown waited for a thread load that never answers");
    for answer in ended {
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains(r#""code":"cancelled""#), "{answer}");
        assert!(answer.contains("nothing ran"), "{answer}");
        assert!(
            !answer.contains("t-agui") && !answer.contains("t-chat"),
            "{answer}"
        );
    }
}

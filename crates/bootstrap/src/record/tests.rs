//! Recovery when the run store fails: one run that cannot be closed does not keep the others
//! open, and it is closed at the next start.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use adapters::{InMemoryBlobStore, InMemoryRunStore, ReceiptCollector};
use ai_core::{
    AiEvent, BlobStore, Clock, InterruptedRun, RunHeader, RunId, RunLog, RunStep, RunStore,
    RunStoreError, ThreadId, ToolCallId,
};
use async_trait::async_trait;

use super::{RunLocks, RunLogStores, Stores, recover};

/// An in-memory run store whose `commit_step` fails for one run, while `failing` names it (or
/// panics once, while `panicking_commit` does), and whose `finish_run` fails for one run, while
/// `failing_finish` names it.
#[derive(Default)]
struct FailingCommits {
    /// The runs, and (for a test whose stores are built on it) the threads their steps save.
    inner: Arc<InMemoryRunStore>,
    failing: Mutex<Option<RunId>>,
    failing_finish: Mutex<Option<RunId>>,
    /// A run whose next `commit_step` panics before writing anything (then it names none).
    panicking_commit: Mutex<Option<RunId>>,
    /// A run whose `begin_run` panics once its row is written, while it names it.
    panicking_begin: Mutex<Option<RunId>>,
    /// A run whose `recover_interrupted` panics before marking anything, while it names it.
    panicking_recovery: Mutex<Option<RunId>>,
    /// When set, the first failing commit notifies the first and waits for the second.
    gate: Mutex<Option<(Arc<tokio::sync::Notify>, Arc<tokio::sync::Notify>)>>,
    /// How many times every run's header was listed.
    full_listings: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl RunStore for FailingCommits {
    async fn begin_run(
        &self,
        run_id: &RunId,
        thread_id: Option<&ThreadId>,
        at_ms: u64,
        input_ref: Option<&str>,
    ) -> Result<(), RunStoreError> {
        self.inner
            .begin_run(run_id, thread_id, at_ms, input_ref)
            .await?;
        if self.panicking_begin.lock().unwrap().as_ref() == Some(run_id) {
            panic!("the run store panicked after writing the run's row");
        }
        Ok(())
    }

    async fn commit_step(
        &self,
        run_id: &RunId,
        step: RunStep,
    ) -> Result<Range<u64>, RunStoreError> {
        let panicking = self
            .panicking_commit
            .lock()
            .unwrap()
            .take_if(|run| *run == *run_id);
        if panicking.is_some() {
            panic!("the run store panicked writing the run's step");
        }
        if self.failing.lock().unwrap().as_ref() == Some(run_id) {
            let gate = self.gate.lock().unwrap().take();
            if let Some((entered, release)) = gate {
                entered.notify_one();
                release.notified().await;
            }
            return Err(RunStoreError::Backend("disk I/O error".into()));
        }
        self.inner.commit_step(run_id, step).await
    }

    async fn finish_run(&self, run_id: &RunId, at_ms: u64) -> Result<(), RunStoreError> {
        if self.failing_finish.lock().unwrap().as_ref() == Some(run_id) {
            return Err(RunStoreError::Backend("disk I/O error".into()));
        }
        self.inner.finish_run(run_id, at_ms).await
    }

    async fn list_runs(&self) -> Result<Vec<RunHeader>, RunStoreError> {
        (self.full_listings).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.list_runs().await
    }

    async fn list_running_runs(&self) -> Result<Vec<RunHeader>, RunStoreError> {
        self.inner.list_running_runs().await
    }

    async fn list_run_summaries(&self) -> Result<Vec<ai_core::RunSummary>, RunStoreError> {
        self.inner.list_run_summaries().await
    }

    async fn load_run(&self, run_id: &RunId) -> Result<RunLog, RunStoreError> {
        self.inner.load_run(run_id).await
    }

    async fn recover_interrupted(
        &self,
        at_ms: u64,
        runs: &[RunId],
    ) -> Result<Vec<InterruptedRun>, RunStoreError> {
        let panicking = self.panicking_recovery.lock().unwrap().clone();
        if panicking.is_some_and(|run| runs.contains(&run)) {
            panic!("the run store panicked closing the run");
        }
        self.inner.recover_interrupted(at_ms, runs).await
    }
}

struct FixedClock;

impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        5_000
    }
}

/// In-memory stores over `runs`, with the run locks in `locks`.
fn stores(runs: Arc<FailingCommits>, locks: &tempfile::TempDir) -> Stores {
    Stores {
        threads: Arc::new(graph::InMemoryThreadStore::default()),
        log: Some(RunLogStores {
            runs,
            blobs: Arc::new(InMemoryBlobStore::default()),
            receipts: Arc::new(ReceiptCollector::default()),
            locks: RunLocks::new(locks.path()),
            histories: Default::default(),
        }),
        memory_threads: None,
    }
}

/// A [`FailingCommits`] run store, and stores over it whose threads are the ones its steps save
/// (so a run's closing saves its thread there), with the run locks in `locks`.
fn logged_stores(locks: &tempfile::TempDir) -> (Arc<FailingCommits>, Stores) {
    let runs = Arc::new(FailingCommits::default());
    let stores = Stores {
        threads: runs.inner.clone(),
        ..stores(runs.clone(), locks)
    };
    (runs, stores)
}

/// Whether the run's log ends with `Done` after an `interrupted` result for its call.
async fn closed(runs: &FailingCommits, run_id: &RunId) -> bool {
    let events = runs.load_run(run_id).await.unwrap().events;
    matches!(
        events.as_slice(),
        [.., AiEvent::ToolCallResult { tool_call_id, .. }, AiEvent::Error { .. }, AiEvent::Done { .. }]
            if tool_call_id.as_str() == "call-1"
    )
}

#[tokio::test]
async fn a_run_that_cannot_be_closed_does_not_stop_the_others_and_is_closed_next_time() {
    let runs = Arc::new(FailingCommits::default());
    let (first, second) = (RunId::new("run-a").unwrap(), RunId::new("run-b").unwrap());
    for (run_id, at_ms) in [(&first, 1), (&second, 2)] {
        runs.begin_run(run_id, None, at_ms, None).await.unwrap();
        let start = AiEvent::ToolCallStart {
            tool_call_id: ToolCallId::new("call-1").unwrap(),
            tool_name: "core__get_current_time".into(),
            args: None,
        };
        let step = RunStep {
            events: vec![start],
            ..RunStep::default()
        };
        runs.commit_step(run_id, step).await.unwrap();
    }
    // The run tried first cannot be closed: the other one still is, and the error names it.
    *runs.failing.lock().unwrap() = Some(first.clone());
    let locks = tempfile::tempdir().unwrap();
    let stores = stores(runs.clone(), &locks);
    let error = recover(&stores, &FixedClock).await.unwrap_err().to_string();
    assert!(
        error.contains("1 of 2 failed")
            && error.contains("run-a: run store failed: disk I/O error"),
        "{error}"
    );
    assert!(!closed(&runs, &first).await);
    assert!(closed(&runs, &second).await);

    // At the next start the store names it again and it is closed; then nothing is left.
    *runs.failing.lock().unwrap() = None;
    assert_eq!(
        recover(&stores, &FixedClock).await.unwrap(),
        std::slice::from_ref(&first)
    );
    assert!(closed(&runs, &first).await);
    assert!(recover(&stores, &FixedClock).await.unwrap().is_empty());
}

/// A model call that streams "hi", then waits until `release` before it answers.
struct Gated {
    entered: Arc<tokio::sync::Notify>,
    release: Arc<tokio::sync::Notify>,
}

impl Gated {
    /// A gated model, with the notice it gives when a call enters it and the one that lets the
    /// call go on.
    fn new() -> (
        Arc<Self>,
        Arc<tokio::sync::Notify>,
        Arc<tokio::sync::Notify>,
    ) {
        let (entered, release) = (
            Arc::new(tokio::sync::Notify::new()),
            Arc::new(tokio::sync::Notify::new()),
        );
        let gated = Arc::new(Self {
            entered: entered.clone(),
            release: release.clone(),
        });
        (gated, entered, release)
    }
}

#[async_trait]
impl ai_core::CompletionPort for Gated {
    async fn complete(
        &self,
        _: &ai_core::LlmRequest,
        deltas: &mut dyn ai_core::DeltaSink,
        _: &ai_core::CancellationToken,
    ) -> Result<ai_core::LlmCompletion, ai_core::CompletionError> {
        deltas.delta(ai_core::CompletionDelta::Text { delta: "hi".into() });
        self.entered.notify_one();
        self.release.notified().await;
        Ok(ai_core::LlmCompletion {
            text: "hi".into(),
            tool_calls: vec![],
            finish_reason: ai_core::FinishReason::Stop,
            usage: None,
        })
    }
}

/// A model call that answers "ok" at once.
struct Answer;

#[async_trait]
impl ai_core::CompletionPort for Answer {
    async fn complete(
        &self,
        _: &ai_core::LlmRequest,
        deltas: &mut dyn ai_core::DeltaSink,
        _: &ai_core::CancellationToken,
    ) -> Result<ai_core::LlmCompletion, ai_core::CompletionError> {
        deltas.delta(ai_core::CompletionDelta::Text { delta: "ok".into() });
        Ok(ai_core::LlmCompletion {
            text: "ok".into(),
            tool_calls: vec![],
            finish_reason: ai_core::FinishReason::Stop,
            usage: None,
        })
    }
}

/// Settings whose data folder is a new temporary folder, removed when the guard drops.
fn with_data_dir() -> (tempfile::TempDir, crate::Settings) {
    let dir = tempfile::tempdir().unwrap();
    let settings = crate::Settings {
        data_dir: Some(dir.path().to_path_buf()),
        ..crate::Settings::default()
    };
    (dir, settings)
}

/// Begins run `run_id` on `thread` with `input` stored as its input blob, as `start_run` does.
async fn begin_with_input(
    log: &RunLogStores,
    run_id: &str,
    thread: &ThreadId,
    input: &super::RunInput,
) -> RunId {
    let input_ref = input.store(log.blobs.as_ref()).await.unwrap();
    let run = RunId::new(run_id).unwrap();
    log.runs
        .begin_run(&run, Some(thread), 1, Some(&input_ref))
        .await
        .unwrap();
    run
}

/// A runtime over `completion` with no tools.
fn runtime(
    settings: &crate::Settings,
    completion: Arc<dyn ai_core::CompletionPort>,
) -> crate::Runtime {
    let source: Arc<dyn ai_core::ToolSource> =
        Arc::new(ai_core::StaticToolSource::new(vec![]).unwrap());
    let policy = Arc::new(ai_core::ToolPolicy::from_toml_str(crate::DEFAULT_POLICY_TOML).unwrap());
    crate::Runtime::with_source(settings, completion, source, policy, Arc::new(FixedClock))
}

/// A request for one turn of `thread` from its saved state `saved` (a new state when `None`).
fn request(
    runtime: &crate::Runtime,
    run_id: &str,
    thread: &ThreadId,
    saved: Option<serde_json::Value>,
    message: &str,
) -> super::RunRequest {
    let ctx = ai_core::RunContext::new(run_id, "user:cli", "local").unwrap();
    let catalog =
        ai_core::ToolCatalog::build(runtime.source.as_ref(), &runtime.policy, &ctx).unwrap();
    let state = match &saved {
        Some(saved) => serde_json::from_value(saved.clone()).unwrap(),
        None => runtime.agent.new_state(),
    };
    super::RunRequest {
        thread: thread.clone(),
        state,
        saved_state: saved,
        turn: crate::Turn::UserMessage(message.into()),
        ctx,
        catalog,
        cancel: ai_core::CancellationToken::new(),
    }
}

/// A run id that is live (its lock is held) is refused at once as existing, as the store refuses
/// a run begun twice: the server answers 409, not 500 after a wait.
#[tokio::test]
async fn a_run_id_that_is_live_is_refused_at_once_as_existing() {
    let runs = Arc::new(FailingCommits::default());
    let locks = tempfile::tempdir().unwrap();
    let stores = stores(runs, &locks);
    let (completion, entered, release) = Gated::new();
    let runtime = runtime(&crate::Settings::default(), completion);
    let (t1, t2) = (ThreadId::new("t1").unwrap(), ThreadId::new("t2").unwrap());
    let first = request(&runtime, "dup", &t1, None, "one");
    let mut events = super::start_run(&runtime, &stores, first, || {})
        .await
        .unwrap();
    entered.notified().await;
    let second = request(&runtime, "dup", &t2, None, "two");
    let error = super::start_run(&runtime, &stores, second, || {})
        .await
        .unwrap_err();
    assert!(
        matches!(
            error.downcast_ref::<ai_core::RunStoreError>(),
            Some(ai_core::RunStoreError::AlreadyExists(_))
        ),
        "{error:#}"
    );
    release.notify_one();
    while events.recv().await.is_some() {}
}

#[tokio::test]
async fn recovery_does_not_close_a_run_that_is_still_running() {
    let runs = Arc::new(FailingCommits::default());
    let locks = tempfile::tempdir().unwrap();
    let stores = stores(runs.clone(), &locks);
    let (completion, entered, release) = Gated::new();
    let runtime = runtime(&crate::Settings::default(), completion);
    let thread = ThreadId::new("t").unwrap();
    let request = request(&runtime, "live-run", &thread, None, "hello");
    let events = super::start_run(&runtime, &stores, request, || {})
        .await
        .unwrap();
    entered.notified().await;
    // Another process (e.g. `cogni serve` starting on the same data folder) runs recovery now.
    let closed = recover(&stores, &FixedClock).await.unwrap();
    release.notify_one();
    let shown = drain(events).await;
    let run_id = RunId::new("live-run").unwrap();
    let log = runs.load_run(&run_id).await.unwrap();
    let dones = log
        .events
        .iter()
        .filter(|e| matches!(e, AiEvent::Done { .. }))
        .count();
    assert!(
        closed.is_empty()
            && dones == 1
            && matches!(log.events.last(), Some(AiEvent::Done { .. }))
            && log.header.status == ai_core::RunStatus::Finished,
        "recovery closed a live run: closed={closed:?}, status={}, stored events={:?}, shown={:?}",
        log.header.status,
        log.events,
        shown
    );
    // The finished run's lock file is gone.
    assert_eq!(std::fs::read_dir(locks.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn a_run_whose_log_ends_with_done_is_marked_finished_and_stale_locks_are_removed() {
    let runs = Arc::new(FailingCommits::default());
    let locks = tempfile::tempdir().unwrap();
    let stores = stores(runs.clone(), &locks);
    // The process died between storing `Done` and marking the run finished, and another one
    // left a lock file behind.
    let run_id = RunId::new("ended").unwrap();
    runs.begin_run(&run_id, None, 1, None).await.unwrap();
    let step = RunStep {
        events: vec![AiEvent::Done {
            reason: ai_core::DoneReason::Stop,
        }],
        ..RunStep::default()
    };
    runs.commit_step(&run_id, step).await.unwrap();
    std::fs::write(locks.path().join("0123.lock"), "").unwrap();

    assert!(recover(&stores, &FixedClock).await.unwrap().is_empty());
    let header = runs.load_run(&run_id).await.unwrap().header;
    assert_eq!(header.status, ai_core::RunStatus::Finished);
    assert_eq!(std::fs::read_dir(locks.path()).unwrap().count(), 0);
}

/// A real data folder holding run `run-1` on thread `t`, begun from a new thread with the user
/// message "first" and left open, as a killed `cogni chat` leaves it.
struct OpenRun {
    _dir: tempfile::TempDir,
    stores: Stores,
    log: RunLogStores,
    thread: ThreadId,
    runtime: crate::Runtime,
    open: RunId,
}

async fn open_run() -> OpenRun {
    let (dir, settings) = with_data_dir();
    let stores = crate::create_stores(&settings).unwrap();
    let log = stores.log.clone().unwrap();
    let thread = ThreadId::new("t").unwrap();
    let runtime = runtime(&settings, Arc::new(Answer));
    let input = super::RunInput {
        thread_state: runtime.agent.new_state(),
        turn: crate::Turn::UserMessage("first".into()),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    let open = begin_with_input(&log, "run-1", &thread, &input).await;
    OpenRun {
        _dir: dir,
        stores,
        log,
        thread,
        runtime,
        open,
    }
}

#[tokio::test]
async fn recovery_does_not_erase_turns_the_thread_took_after_the_open_run() {
    let OpenRun {
        stores,
        log,
        thread,
        runtime,
        open,
        ..
    } = open_run().await;
    let step = RunStep {
        events: vec![AiEvent::TextDelta {
            delta: "par".into(),
        }],
        ..RunStep::default()
    };
    log.runs.commit_step(&open, step).await.unwrap();

    // Run 2 on the same thread completes and is stored.
    let saved = stores.threads.load(&thread).await.unwrap();
    let request = request(&runtime, "run-2", &thread, saved, "second");
    let mut events = super::start_run(&runtime, &stores, request, || {})
        .await
        .unwrap();
    while events.recv().await.is_some() {}
    let saved = stores.threads.load(&thread).await.unwrap().unwrap();
    assert!(saved.to_string().contains("second"), "{saved}");

    // The next start closes run 1 ... and keeps run 2's turn.
    let closed = recover(&stores, &FixedClock).await.unwrap();
    assert_eq!(closed, std::slice::from_ref(&open));
    let after = stores.threads.load(&thread).await.unwrap().unwrap();
    assert_eq!(after, saved, "run 2's stored turn was erased");
    let closing = log.runs.load_run(&open).await.unwrap().events;
    assert!(matches!(closing.last(), Some(AiEvent::Done { .. })));
}

#[tokio::test]
async fn recovery_gives_an_unchanged_thread_the_interrupted_turn() {
    let OpenRun { stores, thread, .. } = open_run().await;
    recover(&stores, &FixedClock).await.unwrap();
    let after = stores.threads.load(&thread).await.unwrap().unwrap();
    assert!(after.to_string().contains("first"), "{after}");
}

/// A crash's closing answers a call that started with arguments as one that may have taken
/// effect, and one whose start came without them (the runner refused it: its result was to
/// follow at once) as one that never ran, as the client's stream was told.
#[tokio::test]
async fn recovery_answers_a_refused_call_as_one_that_never_ran() {
    use ai_core::{ToolCallId, ToolOutcome};
    let OpenRun {
        stores, log, open, ..
    } = open_run().await;
    let start = |id: &str, args: Option<serde_json::Value>| AiEvent::ToolCallStart {
        tool_call_id: ToolCallId::new(id).unwrap(),
        tool_name: "core__get_current_time".into(),
        args: args.map(Arc::new),
    };
    let step = RunStep {
        events: vec![
            AiEvent::StepStarted { step: 1 },
            start("call-ran", Some(serde_json::json!({}))),
            start("call-refused", None),
        ],
        ..RunStep::default()
    };
    log.runs.commit_step(&open, step).await.unwrap();
    recover(&stores, &FixedClock).await.unwrap();
    let events = log.runs.load_run(&open).await.unwrap().events;
    let answers: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|event| match event {
            AiEvent::ToolCallResult {
                tool_call_id,
                outcome: ToolOutcome::Error(failure),
                ..
            } => Some((tool_call_id.as_str(), failure.safe_message.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        answers,
        [
            (
                "call-ran",
                "the process running this call stopped; whether it took effect is unknown"
            ),
            (
                "call-refused",
                "the run ended before this call's result was stored; it was refused, so it \
                 never ran"
            ),
        ]
    );
}

/// A run that started from a thread paused for an approval (the server's only way on from a
/// pause is the next user message) and crashed: recovery must still give the thread the
/// interrupted turn, with the call that ran and its `interrupted` result.
#[test]
fn recovery_keeps_the_interrupted_turn_of_a_run_that_started_from_an_approval_pause() {
    use ai_core::{
        FinishReason, LlmCompletion, LlmToolCall, ToolErrorCode, ToolExecResult, ToolFailure,
        ToolOutcome,
    };
    use graph::{AgentEvent, AgentState, Phase, reduce};
    let id = |s: &str| ToolCallId::new(s).unwrap();
    let mut state = AgentState::new(None, std::num::NonZeroU32::new(10).unwrap());
    let gated = LlmToolCall {
        id: id("gated"),
        name: "core__write".into(),
        arguments: "{}".into(),
        complete: true,
        provider_fields: Default::default(),
    };
    for event in [
        AgentEvent::UserMessage {
            content: "first".into(),
        },
        AgentEvent::ModelCompleted {
            completion: LlmCompletion {
                text: String::new(),
                tool_calls: vec![gated],
                finish_reason: FinishReason::ToolCalls,
                usage: None,
            },
        },
        AgentEvent::ToolResults {
            results: vec![ToolExecResult {
                tool_call_id: id("gated"),
                outcome: ToolOutcome::ApprovalRequired {
                    args_hash: "h".into(),
                },
            }],
            cancelled: false,
        },
    ] {
        (state, _) = reduce(state, event);
    }
    assert!(matches!(state.phase(), Phase::AwaitingApproval { .. }));
    let input = super::RunInput {
        thread_state: state,
        turn: crate::Turn::UserMessage("second".into()),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    let recorded = vec![AiEvent::ToolCallStart {
        tool_call_id: id("call-2"),
        tool_name: "core__get_current_time".into(),
        args: None,
    }];
    let closing = vec![AiEvent::ToolCallResult {
        tool_call_id: id("call-2"),
        tool_name: "core__get_current_time".into(),
        outcome: ToolOutcome::Error(ToolFailure::new(ToolErrorCode::Interrupted, "stopped")),
    }];
    let repaired = super::repaired_state(input, &recorded, &closing)
        .expect("the interrupted turn (call-2 ran) is dropped from the thread");
    assert!(repaired.to_string().contains("call-2"), "{repaired}");
}

/// A run that began from a thread left past its pause (its resume's closing save was lost) and
/// crashed: its user message answered the approved call the lost run left out, and showed that
/// answer (a start without arguments, then the `interrupted` result) before calling the model.
/// Those events are the message's answer to the earlier turn, not a call of the run's own: the
/// thread gets the call answered once, not a second copy of it.
#[test]
fn recovery_answers_once_the_call_a_lost_save_left_out() {
    use graph::{Phase, reduce};
    let (past_pause, _) = reduce(paused_thread(), approve_gated().event());
    assert!(matches!(past_pause.phase(), Phase::AwaitingTools { .. }));
    let gated = ToolCallId::new("gated").unwrap();
    let lost = graph::lost_result(&gated);
    let recorded = vec![
        AiEvent::ToolCallStart {
            tool_call_id: gated.clone(),
            tool_name: "core__write".into(),
            args: None,
        },
        AiEvent::ToolCallResult {
            tool_call_id: gated,
            tool_name: "core__write".into(),
            outcome: lost.outcome.clone(),
        },
        AiEvent::StepStarted { step: 1 },
        AiEvent::TextDelta {
            delta: "checking".into(),
        },
    ];
    let input = super::RunInput {
        thread_state: past_pause,
        turn: crate::Turn::UserMessage("what happened?".into()),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    let repaired = super::repaired_state(input, &recorded, &[]).expect("the interrupted turn");
    let state: graph::AgentState = serde_json::from_value(repaired).unwrap();
    ai_core::validate_history(state.messages()).unwrap();
    let messages = each_answered_once(&state, &["ran", "gated", "other"]);
    let answers = state
        .messages()
        .iter()
        .filter(|message| matches!(message, ai_core::Message::Tool { .. }))
        .count();
    assert_eq!(answers, 3, "a second copy of a call: {messages}");
    assert!(messages.contains("checking"), "{messages}");
    assert!(messages.contains("may have run"), "{messages}");
}

/// The thread's saved state, which must be there.
async fn saved_state(stores: &Stores, thread: &ThreadId) -> graph::AgentState {
    let saved = stores.threads.load(thread).await.unwrap();
    serde_json::from_value(saved.expect("the thread was saved")).unwrap()
}

/// The decision approving `gated` alone, of the thread [`paused_thread`] gives.
fn approve_gated() -> crate::Turn {
    crate::Turn::ApprovalDecisions(vec![graph::ApprovalDecision {
        tool_call_id: ToolCallId::new("gated").unwrap(),
        approved: true,
        args_hash: "hash-gated".into(),
        reason: None,
    }])
}

/// A thread paused for approval of `gated` and `other` (and with `ran` answered already).
fn paused_thread() -> graph::AgentState {
    use ai_core::{FinishReason, LlmCompletion, LlmToolCall, ToolExecResult, ToolOutcome};
    use graph::{AgentEvent, AgentState, Phase, reduce};
    let call = |name: &str| LlmToolCall {
        id: ToolCallId::new(name).unwrap(),
        name: "core__write".into(),
        arguments: "{}".into(),
        complete: true,
        provider_fields: Default::default(),
    };
    let approval = |name: &str| ToolExecResult {
        tool_call_id: ToolCallId::new(name).unwrap(),
        outcome: ToolOutcome::ApprovalRequired {
            args_hash: format!("hash-{name}"),
        },
    };
    let mut state = AgentState::new(None, std::num::NonZeroU32::new(10).unwrap());
    for event in [
        AgentEvent::UserMessage {
            content: "first".into(),
        },
        AgentEvent::ModelCompleted {
            completion: LlmCompletion {
                text: String::new(),
                tool_calls: vec![call("ran"), call("gated"), call("other")],
                finish_reason: FinishReason::ToolCalls,
                usage: None,
            },
        },
        AgentEvent::ToolResults {
            results: vec![
                ToolExecResult::ok(ToolCallId::new("ran").unwrap(), serde_json::json!(1)),
                approval("gated"),
                approval("other"),
            ],
            cancelled: false,
        },
    ] {
        (state, _) = reduce(state, event);
    }
    assert!(matches!(state.phase(), Phase::AwaitingApproval { .. }));
    state
}

/// A run that resumed from approvals and crashed while the approved call ran: the thread gets
/// the paused turn answered once each (the call that ran before the pause, the approved call
/// `interrupted`, the unapproved one denied), not a second copy of the calls.
#[test]
fn recovery_answers_the_paused_calls_of_a_run_that_resumed_from_approvals() {
    use ai_core::{ToolErrorCode, ToolFailure, ToolOutcome};
    let id = |s: &str| ToolCallId::new(s).unwrap();
    let input = super::RunInput {
        thread_state: paused_thread(),
        turn: approve_gated(),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    // The run first shows the denied call's fate (a start without arguments and its answer),
    // then starts the approved one.
    let denial = ToolFailure::new(ToolErrorCode::PolicyDenied, "the user denied this call");
    let recorded = vec![
        AiEvent::ToolCallStart {
            tool_call_id: id("other"),
            tool_name: "core__write".into(),
            args: None,
        },
        AiEvent::ToolCallResult {
            tool_call_id: id("other"),
            tool_name: "core__write".into(),
            outcome: ToolOutcome::Error(denial),
        },
        AiEvent::ToolCallStart {
            tool_call_id: id("gated"),
            tool_name: "core__write".into(),
            args: Some(Arc::new(serde_json::json!({}))),
        },
    ];
    let closing = vec![AiEvent::ToolCallResult {
        tool_call_id: id("gated"),
        tool_name: "core__write".into(),
        outcome: ToolOutcome::Error(ToolFailure::new(ToolErrorCode::Interrupted, "stopped")),
    }];
    let repaired = super::repaired_state(input, &recorded, &closing)
        .expect("a valid thread with the paused turn answered");
    let state: graph::AgentState = serde_json::from_value(repaired).unwrap();
    let messages = each_answered_once(&state, &["ran", "gated", "other"]);
    assert!(messages.contains("interrupted"), "{messages}");
    assert!(
        messages.contains("the user denied this call") || messages.contains("not run"),
        "{messages}"
    );
    assert!(
        ai_core::validate_history(state.messages()).is_ok(),
        "{messages}"
    );
}

/// A thread an older build saved with a user message without text (which a saved thread still
/// loads, healing it at its next model call) resumes from approvals and crashes while the
/// approved call runs (no model call came, so nothing healed it yet): recovery still gives it
/// the interrupted turn, and the empty message heals at the thread's next model call, as it
/// would have without the crash.
#[test]
fn recovery_keeps_the_turn_of_a_thread_holding_an_empty_user_message() {
    use ai_core::{Message, ToolErrorCode, ToolFailure, ToolOutcome};
    let id = |s: &str| ToolCallId::new(s).unwrap();
    // As an older build saved it: an empty user message before the paused turn.
    let mut saved = serde_json::to_value(paused_thread()).unwrap();
    let empty = serde_json::to_value(Message::User {
        content: String::new(),
    })
    .unwrap();
    saved["messages"].as_array_mut().unwrap().insert(0, empty);
    let thread_state: graph::AgentState = serde_json::from_value(saved).unwrap();
    let input = super::RunInput {
        thread_state,
        turn: crate::Turn::ApprovalDecisions(vec![
            graph::ApprovalDecision {
                tool_call_id: id("gated"),
                approved: true,
                args_hash: "hash-gated".into(),
                reason: None,
            },
            graph::ApprovalDecision {
                tool_call_id: id("other"),
                approved: true,
                args_hash: "hash-other".into(),
                reason: None,
            },
        ]),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    let recorded = vec![AiEvent::ToolCallStart {
        tool_call_id: id("gated"),
        tool_name: "core__write".into(),
        args: Some(Arc::new(serde_json::json!({}))),
    }];
    let closing = vec![AiEvent::ToolCallResult {
        tool_call_id: id("gated"),
        tool_name: "core__write".into(),
        outcome: ToolOutcome::Error(ToolFailure::new(ToolErrorCode::Interrupted, "stopped")),
    }];
    let repaired = super::repaired_state(input, &recorded, &closing)
        .expect("the interrupted turn, as a saved thread holding the message is loaded");
    let state: graph::AgentState = serde_json::from_value(repaired).unwrap();
    let messages = serde_json::to_string(state.messages()).unwrap();
    assert!(messages.contains("interrupted"), "{messages}");
    let (state, intents) = graph::reduce(
        state,
        graph::AgentEvent::UserMessage {
            content: "go on".into(),
        },
    );
    let [graph::Intent::CallModel { messages }] = &intents[..] else {
        panic!("{intents:?}");
    };
    ai_core::validate_history(messages).unwrap();
    assert_eq!(messages, state.messages());
    assert!(
        !messages
            .iter()
            .any(|m| matches!(m, Message::User { content } if content.is_empty())),
        "{messages:?}"
    );
}

/// A user message sent instead of the approvals, then a crash: its run first showed the waiting
/// calls ended (a start without arguments and a `cancelled` result each), which the reducer
/// already answered; the thread gets the interrupted turn with each call answered once.
#[test]
fn recovery_of_a_user_message_after_a_pause_answers_the_paused_calls_once() {
    use ai_core::{ToolErrorCode, ToolFailure, ToolOutcome};
    let id = |s: &str| ToolCallId::new(s).unwrap();
    let input = super::RunInput {
        thread_state: paused_thread(),
        turn: crate::Turn::UserMessage("never mind".into()),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    let mut recorded = Vec::new();
    for call in ["gated", "other"] {
        recorded.push(AiEvent::ToolCallStart {
            tool_call_id: id(call),
            tool_name: "core__write".into(),
            args: None,
        });
        recorded.push(AiEvent::ToolCallResult {
            tool_call_id: id(call),
            tool_name: "core__write".into(),
            outcome: ToolOutcome::Error(ToolFailure::new(ToolErrorCode::Cancelled, "cancelled")),
        });
    }
    recorded.push(AiEvent::StepStarted { step: 1 });
    recorded.push(AiEvent::TextDelta {
        delta: "Fine, I".into(),
    });
    let repaired = super::repaired_state(input, &recorded, &[])
        .expect("a valid thread with the interrupted turn");
    let state: graph::AgentState = serde_json::from_value(repaired).unwrap();
    let messages = each_answered_once(&state, &["ran", "gated", "other"]);
    assert!(messages.contains("Fine, I"), "{messages}");
}

/// Run inputs stored before runs could resume from approvals still read as user messages, and
/// the two kinds are stored under their own keys.
#[test]
fn run_inputs_keep_their_stored_form() {
    let state = graph::AgentState::new(None, std::num::NonZeroU32::new(10).unwrap());
    let stored = serde_json::json!({"thread_state": state, "user_message": "hi"});
    let input: super::RunInput = serde_json::from_value(stored.clone()).unwrap();
    assert_eq!(input.turn, crate::Turn::UserMessage("hi".into()));
    assert_eq!(
        input.loop_revision, None,
        "recorded before revisions were kept"
    );
    assert_eq!(serde_json::to_value(&input).unwrap(), stored);
    let resumed = super::RunInput {
        thread_state: state,
        turn: crate::Turn::ApprovalDecisions(Vec::new()),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    let value = serde_json::to_value(&resumed).unwrap();
    assert!(value.get("approval_decisions").is_some(), "{value}");
    assert_eq!(
        serde_json::from_value::<super::RunInput>(value).unwrap(),
        resumed
    );
}

/// A run input loads to the same [`super::RunInput`] from either stored form: form 1 (the
/// thread's whole state inline, as every input recorded before form 2 is) and form 2 (its
/// history as message blobs, which later inputs of the thread share rather than store again).
#[tokio::test]
async fn a_run_input_loads_the_same_from_either_stored_form() {
    let blobs = InMemoryBlobStore::default();
    let state = paused_thread();
    let input = super::RunInput {
        thread_state: state.clone(),
        turn: crate::Turn::UserMessage("next".into()),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    let old = blobs
        .put(&ai_core::canonical_bytes(&input).unwrap())
        .await
        .unwrap();
    assert_eq!(super::RunInput::load(&blobs, &old).await.unwrap(), input);

    let new = input.store(&blobs).await.unwrap();
    let stored: serde_json::Value =
        serde_json::from_slice(&blobs.get(&new).await.unwrap()).unwrap();
    assert_eq!(stored["stored_form"], super::RUN_INPUT_FORM);
    assert!(stored["thread_state"].get("messages").is_none(), "{stored}");
    assert_eq!(stored["history"]["len"], state.messages().len());
    assert!(!stored.to_string().contains("\"first\""), "{stored}");
    assert_eq!(super::RunInput::load(&blobs, &new).await.unwrap(), input);
    let (_, as_form_1) = super::RunInput::load_stored(&blobs, &new).await.unwrap();
    assert_eq!(as_form_1, serde_json::to_value(&input).unwrap());

    // Stored again, it adds nothing; the next turn adds its new messages and its input only.
    let before = blobs.len();
    assert_eq!(input.store(&blobs).await.unwrap(), new);
    assert_eq!(blobs.len(), before);
    let (longer, _) = graph::reduce(state.clone(), input.turn.event());
    assert!(longer.messages().starts_with(state.messages()));
    let added = longer.messages().len() - state.messages().len();
    assert!(added > 0);
    let next = super::RunInput {
        thread_state: longer,
        ..input.clone()
    };
    let next_ref = next.store(&blobs).await.unwrap();
    assert_eq!(blobs.len(), before + added + 1);
    assert_eq!(
        super::RunInput::load(&blobs, &next_ref).await.unwrap(),
        next
    );

    // A thread with no history yet.
    let empty = super::RunInput {
        thread_state: graph::AgentState::new(None, std::num::NonZeroU32::new(3).unwrap()),
        ..input
    };
    let empty_ref = empty.store(&blobs).await.unwrap();
    assert_eq!(
        super::RunInput::load(&blobs, &empty_ref).await.unwrap(),
        empty
    );
}

/// A form 2 input whose history does not hold together (a message blob naming something that
/// is no address, a chain shorter or longer than the input says) is refused with an error
/// naming the message or what is wrong, never quoting what the blobs hold.
#[tokio::test]
async fn a_run_input_whose_history_does_not_hold_together_is_refused_without_quoting_it() {
    let blobs = InMemoryBlobStore::default();
    let input = super::RunInput {
        thread_state: graph::AgentState::new(
            Some("secret-prompt".into()),
            std::num::NonZeroU32::new(3).unwrap(),
        ),
        turn: crate::Turn::UserMessage("hi".into()),
        loop_revision: None,
        settings: None,
    };
    let input_ref = input.store(&blobs).await.unwrap();
    let envelope: serde_json::Value =
        serde_json::from_slice(&blobs.get(&input_ref).await.unwrap()).unwrap();
    let last = envelope["history"]["last"].as_str().unwrap().to_owned();
    let message: serde_json::Value =
        serde_json::from_slice(&blobs.get(&last).await.unwrap()).unwrap();
    let with_history = |history: serde_json::Value| {
        let mut envelope = envelope.clone();
        envelope["history"] = history;
        serde_json::to_vec(&envelope).unwrap()
    };
    let mut bad_prev = message.clone();
    bad_prev["prev"] = "secret-not-an-address".into();
    let bad_prev = blobs
        .put(&serde_json::to_vec(&bad_prev).unwrap())
        .await
        .unwrap();
    for (history, expected) in [
        (
            serde_json::json!({"len": 1, "last": bad_prev}),
            format!("message 1 of 1 of its history: blob {bad_prev} does not decode"),
        ),
        (
            serde_json::json!({"len": 1, "last": "secret-not-an-address"}),
            "its history's last message is not named by a blob address".to_owned(),
        ),
        (
            serde_json::json!({"len": 2, "last": last}),
            "its history is shorter than it says".to_owned(),
        ),
        (
            serde_json::json!({"len": 0, "last": last}),
            "its history is longer than it says".to_owned(),
        ),
    ] {
        let bad = blobs.put(&with_history(history)).await.unwrap();
        let error = super::RunInput::load(&blobs, &bad).await.unwrap_err();
        let shown = error.to_string();
        assert!(shown.contains(&expected), "{expected:?} not in {shown}");
        assert!(!shown.contains("secret"), "{shown}");
    }
}

/// Every blob `input_ref` names, directly or through the blobs it names (any string of 64
/// lower-case hex digits in a blob is taken for an address), with its size, added to `named`.
async fn named_blobs(
    blobs: &dyn ai_core::BlobStore,
    input_ref: &str,
    named: &mut HashMap<String, usize>,
) {
    fn addresses(value: &serde_json::Value, found: &mut Vec<String>) {
        match value {
            serde_json::Value::String(text)
                if text.len() == 64
                    && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
            {
                found.push(text.clone());
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| addresses(v, found)),
            serde_json::Value::Object(map) => map.values().for_each(|v| addresses(v, found)),
            _ => {}
        }
    }
    let mut todo = vec![input_ref.to_owned()];
    while let Some(hash) = todo.pop() {
        if named.contains_key(&hash) {
            continue;
        }
        let bytes = blobs.get(&hash).await.unwrap();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        addresses(&value, &mut todo);
        named.insert(hash, bytes.len());
    }
}

/// A thread of K turns stores its run inputs in bytes linear in K: each input names the
/// thread's history rather than holding it, so the messages earlier runs stored are shared, not
/// stored again by every later run (which made a long chat's inputs grow with K²).
#[tokio::test]
async fn a_threads_run_inputs_grow_linearly_with_its_turns() {
    const TURNS: usize = 24;
    let (_dir, settings) = with_data_dir();
    let stores = crate::create_stores(&settings).unwrap();
    let log = stores.log.clone().unwrap();
    let thread = ThreadId::new("t").unwrap();
    let answer = runtime(&settings, Arc::new(Answer));
    let message = "x".repeat(2_000);
    let mut named = HashMap::new();
    let mut one_turn = 0;
    for turn in 0..TURNS {
        let saved = stores.threads.load(&thread).await.unwrap();
        let run_id = format!("run-{turn}");
        let shown = run_to_end(
            &answer,
            &stores,
            request(&answer, &run_id, &thread, saved.clone(), &message),
        )
        .await;
        assert!(
            matches!(shown.last(), Some(AiEvent::Done { .. })),
            "{shown:?}"
        );
        let run = log.runs.load_run(&RunId::new(&run_id).unwrap()).await;
        let input_ref = run.unwrap().header.input_ref.unwrap();
        named_blobs(log.blobs.as_ref(), &input_ref, &mut named).await;
        if turn == 0 {
            one_turn = named.values().sum();
        }
        // The input still reads as the state the run began from.
        let input = super::RunInput::load(log.blobs.as_ref(), &input_ref)
            .await
            .unwrap();
        let began = saved.map_or_else(
            || answer.agent.new_state(),
            |s| serde_json::from_value(s).unwrap(),
        );
        assert_eq!(input.thread_state, began);
        assert_eq!(input.turn, crate::Turn::UserMessage(message.clone()));
    }
    let total: usize = named.values().sum();
    assert!(
        total <= 3 * TURNS * one_turn,
        "{TURNS} turns' inputs take {total} bytes, one turn's {one_turn}"
    );
}

/// Every event a run shows through `events`, up to its end.
async fn drain(mut events: tokio::sync::mpsc::UnboundedReceiver<AiEvent>) -> Vec<AiEvent> {
    let mut shown = Vec::new();
    while let Some(event) = events.recv().await {
        shown.push(event);
    }
    shown
}

/// Starts `request` and collects every event it shows, up to its end.
async fn run_to_end(
    runtime: &crate::Runtime,
    stores: &Stores,
    request: super::RunRequest,
) -> Vec<AiEvent> {
    run_to_end_freeing(runtime, stores, request).await.0
}

/// Starts `request` and collects every event it shows, up to its end, with whether the run had
/// freed its thread (called `on_saved`) by then.
async fn run_to_end_freeing(
    runtime: &crate::Runtime,
    stores: &Stores,
    request: super::RunRequest,
) -> (Vec<AiEvent>, bool) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let freed = Arc::new(AtomicBool::new(false));
    let on_saved = {
        let freed = freed.clone();
        move || freed.store(true, Ordering::SeqCst)
    };
    let events = super::start_run(runtime, stores, request, on_saved)
        .await
        .unwrap();
    let shown = drain(events).await;
    (shown, freed.load(Ordering::SeqCst))
}

/// Two processes on one data folder (`cogni serve` and `cogni chat`), each with its own stores,
/// run a turn on one thread from the same saved state S0: B begins and is held in its model
/// call, then A runs to its end and stores S1.
struct ChangedUnderB {
    _dir: tempfile::TempDir,
    settings: crate::Settings,
    thread: ThreadId,
    /// A's stores (which read the log B writes to, too).
    process_a: Stores,
    process_b: Stores,
    /// The thread's state as A stored it.
    s1: serde_json::Value,
    /// B's events, as its client is shown them.
    b_events: tokio::sync::mpsc::UnboundedReceiver<AiEvent>,
    /// Lets B's model call answer.
    release: Arc<tokio::sync::Notify>,
    /// Cancels B.
    cancel_b: ai_core::CancellationToken,
}

impl ChangedUnderB {
    async fn new() -> Self {
        let (dir, settings) = with_data_dir();
        let process_a = crate::create_stores(&settings).unwrap();
        let process_b = crate::create_stores(&settings).unwrap();
        let thread = ThreadId::new("t").unwrap();
        let answer = runtime(&settings, Arc::new(Answer));
        let first = request(&answer, "run-0", &thread, None, "zero");
        run_to_end(&answer, &process_a, first).await;
        let s0 = process_a.threads.load(&thread).await.unwrap();
        assert!(s0.is_some());

        // B begins from S0 and is in its model call ...
        let (gated, entered, release) = Gated::new();
        let gated = crate::record_completion(gated, &process_b, &settings.llm);
        let slow = runtime(&settings, gated);
        let b = request(&slow, "run-b", &thread, s0.clone(), "from b");
        let cancel_b = b.cancel.clone();
        let b_events = super::start_run(&slow, &process_b, b, || {}).await.unwrap();
        entered.notified().await;
        // ... when A, begun from S0 too, ends and stores S1.
        let a = request(&answer, "run-a", &thread, s0.clone(), "from a");
        let a_shown = run_to_end(&answer, &process_a, a).await;
        assert!(
            matches!(
                a_shown.last(),
                Some(AiEvent::Done {
                    reason: ai_core::DoneReason::Stop
                })
            ),
            "{a_shown:?}"
        );
        let s1 = process_a.threads.load(&thread).await.unwrap().unwrap();
        assert!(s1.to_string().contains("from a"), "{s1}");
        Self {
            _dir: dir,
            settings,
            thread,
            process_a,
            process_b,
            s1,
            b_events,
            release,
            cancel_b,
        }
    }
}

/// B's closing write is refused, the thread keeps A's turn S1, and B's run is kept in the log,
/// closed with the reason.
#[tokio::test]
async fn a_run_whose_thread_changed_since_it_began_keeps_the_other_turn_and_its_own_record() {
    let changed = ChangedUnderB::new().await;
    changed.release.notify_one();
    let b_shown = drain(changed.b_events).await;
    // B's client is told why its turn was not saved ...
    assert!(
        matches!(
            b_shown.as_slice(),
            [.., AiEvent::Error { message }, AiEvent::Done { reason: ai_core::DoneReason::Error }]
                if message.starts_with(super::THREAD_CHANGED) && message.contains("this thread")
        ),
        "{b_shown:?}"
    );
    // ... the thread keeps A's turn, whichever process reads it ...
    for stores in [&changed.process_a, &changed.process_b] {
        let now = stores.threads.load(&changed.thread).await.unwrap();
        assert_eq!(now.as_ref(), Some(&changed.s1), "A's turn was overwritten");
    }
    // ... and B's run is in the log, finished, as its client saw it, with its model receipt.
    let log = changed.process_a.log.as_ref().unwrap();
    let b_log = log.runs.load_run(&RunId::new("run-b").unwrap()).await;
    let b_log = b_log.unwrap();
    assert_eq!(b_log.header.status, ai_core::RunStatus::Finished);
    assert_eq!(b_log.events, b_shown);
    assert!(
        b_log
            .events
            .iter()
            .any(|e| matches!(e, AiEvent::TextDelta { delta } if delta == "hi"))
    );
    assert_eq!(b_log.receipt_refs.len(), 1);
    // Its replay ends as it did: the same closing, over the same own ending.
    let replayed = crate::replay::replay_run(&changed.settings, "run-b").await;
    assert_eq!(replayed.unwrap().first_difference(), None);
}

/// A run whose thread changed since it began keeps how it ended itself: its closing error says
/// so. A cancelled one is refused by replay as cancelled (when the cancel came is not recorded),
/// not taken for a run whose model call failed.
#[tokio::test]
async fn a_cancelled_run_whose_thread_changed_is_recorded_as_cancelled() {
    let changed = ChangedUnderB::new().await;
    changed.cancel_b.cancel();
    let b_shown = drain(changed.b_events).await;
    assert!(
        matches!(
            b_shown.as_slice(),
            [.., AiEvent::Error { message }, AiEvent::Done { reason: ai_core::DoneReason::Error }]
                if message.starts_with(super::THREAD_CHANGED)
                    && message.ends_with(r#"the run itself ended "cancelled""#)
        ),
        "{b_shown:?}"
    );
    let error = crate::replay::replay_run(&changed.settings, "run-b")
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("run run-b was cancelled"), "{error}");
}

/// A resume of `thread` from its saved pause `paused`, approving the paused calls, as run
/// `run_id`.
fn resume_request(
    runtime: &crate::Runtime,
    thread: &ThreadId,
    paused: &serde_json::Value,
    run_id: &str,
) -> super::RunRequest {
    super::RunRequest {
        turn: approve_gated(),
        ..request(runtime, run_id, thread, Some(paused.clone()), "")
    }
}

/// Thread `t-paused` saved paused in a run's stores, and a first resume from the pause (run
/// `first`, approving its calls) started and held in its model call, past its tools.
struct HeldResume {
    runtime: crate::Runtime,
    thread: ThreadId,
    paused: serde_json::Value,
    first: tokio::sync::mpsc::UnboundedReceiver<AiEvent>,
    release: Arc<tokio::sync::Notify>,
}

impl HeldResume {
    /// Saves the pause in `stores` and starts the first resume under `settings`, returning once
    /// it waits for its model.
    async fn start(settings: &crate::Settings, stores: &Stores) -> Self {
        let (completion, entered, release) = Gated::new();
        let thread = ThreadId::new("t-paused").unwrap();
        let paused = serde_json::to_value(paused_thread()).unwrap();
        stores.threads.save(&thread, None, &paused).await.unwrap();
        let runtime = runtime(settings, completion);
        let request = resume_request(&runtime, &thread, &paused, "first");
        let first = super::start_run(&runtime, stores, request, || {})
            .await
            .unwrap();
        entered.notified().await;
        Self {
            runtime,
            thread,
            paused,
            first,
            release,
        }
    }

    /// A resume from the same pause, approving its calls, as run `run_id`.
    fn resume(&self, run_id: &str) -> super::RunRequest {
        resume_request(&self.runtime, &self.thread, &self.paused, run_id)
    }

    /// Lets the first run's model answer, and waits for the run's end.
    async fn finish(mut self) {
        self.release.notify_one();
        while self.first.recv().await.is_some() {}
    }
}

/// A run that resumes from approvals saves its thread past the pause before anything runs:
/// a second resume from the same pause (a retry, another process) is refused and closed at
/// once, whatever becomes of the first run, so no approved call can run twice.
#[tokio::test]
async fn a_resume_consumes_its_approvals_before_anything_runs() {
    let (_dir, settings) = with_data_dir();
    let stores = crate::create_stores(&settings).unwrap();
    let runs = stores.log.as_ref().unwrap().runs.clone();
    let held = HeldResume::start(&settings, &stores).await;
    let saved = saved_state(&stores, &held.thread).await;
    assert!(
        !matches!(saved.phase(), graph::Phase::AwaitingApproval { .. }),
        "the thread still waits for the approvals the first run used: {:?}",
        saved.phase()
    );

    let error = super::start_run(&held.runtime, &stores, held.resume("second"), || {})
        .await
        .unwrap_err();
    assert!(
        matches!(
            error.downcast_ref::<RunStoreError>(),
            Some(RunStoreError::ThreadChanged { .. })
        ),
        "{error:#}"
    );
    let second = runs.load_run(&RunId::new("second").unwrap()).await.unwrap();
    assert_eq!(second.header.status, ai_core::RunStatus::Finished);
    assert!(matches!(second.events.last(), Some(AiEvent::Done { .. })));
    assert!(
        !second
            .events
            .iter()
            .any(|e| matches!(e, AiEvent::ToolCallStart { .. })),
        "nothing ran in the refused run"
    );
    let error = crate::replay::check_replayable(&second).unwrap_err();
    assert!(
        error.to_string().contains("ended before anything ran"),
        "{error}"
    );

    held.finish().await;
}

/// Without a run log the same holds, through the thread store's conditional save: a second
/// resume from the same pause (it read the pause before the first saved past it) is refused as
/// it begins, the thread having changed, and nothing of it runs. Before, it saved the pause's
/// decisions again over the first's and ran the approved calls a second time.
#[tokio::test]
async fn without_a_run_log_a_resume_consumes_its_approvals_before_anything_runs() {
    let settings = crate::Settings::default();
    let stores = crate::create_stores(&settings).unwrap();
    assert!(stores.log.is_none());
    let held = HeldResume::start(&settings, &stores).await;
    let error = super::start_run(&held.runtime, &stores, held.resume("second"), || {})
        .await
        .unwrap_err();
    assert!(
        matches!(
            error.downcast_ref::<ai_core::ThreadStoreError>(),
            Some(ai_core::ThreadStoreError::Changed)
        ),
        "{error:#}"
    );
    let saved = saved_state(&stores, &held.thread).await;
    assert!(
        !matches!(saved.phase(), graph::Phase::AwaitingApproval { .. }),
        "the refused run put the pause back: {:?}",
        saved.phase()
    );

    held.finish().await;
}

/// A resume refused as it began (another resume had consumed the same pause) and left open,
/// its closing write failed: recovery closes it without touching the thread, which holds the
/// other run's consumed state, equal to what this run would have written.
#[tokio::test]
async fn recovery_leaves_the_thread_of_a_resume_that_never_began() {
    let (_dir, settings) = with_data_dir();
    let stores = crate::create_stores(&settings).unwrap();
    let log = stores.log.clone().unwrap();
    let thread = ThreadId::new("t-paused").unwrap();
    let input = super::RunInput {
        thread_state: paused_thread(),
        turn: approve_gated(),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    let consumed = graph::reduce(input.thread_state.clone(), input.turn.event()).0;
    let consumed = serde_json::to_value(consumed).unwrap();
    stores.threads.save(&thread, None, &consumed).await.unwrap();
    let run = begin_with_input(&log, "refused", &thread, &input).await;

    let closed = recover(&stores, &FixedClock).await.unwrap();
    assert_eq!(closed, [run]);
    assert_eq!(
        stores.threads.load(&thread).await.unwrap(),
        Some(consumed),
        "the thread another run is using was written over"
    );
}

/// How [`Interrupted`]'s second model call ends.
#[derive(Clone, Copy, Debug)]
enum SecondCall {
    Fails,
    IsCancelled,
}

/// A model that first asks for a call (to a tool no catalog holds, so the runner answers it)
/// after some text, then streams part of an answer and fails, or cancels the run and waits.
struct Interrupted {
    calls: Mutex<u32>,
    second: SecondCall,
}

#[async_trait]
impl ai_core::CompletionPort for Interrupted {
    async fn complete(
        &self,
        _: &ai_core::LlmRequest,
        deltas: &mut dyn ai_core::DeltaSink,
        cancel: &ai_core::CancellationToken,
    ) -> Result<ai_core::LlmCompletion, ai_core::CompletionError> {
        let first = {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            *calls == 1
        };
        if first {
            deltas.delta(ai_core::CompletionDelta::Text {
                delta: "Let me look.".into(),
            });
            return Ok(ai_core::LlmCompletion {
                text: "Let me look.".into(),
                tool_calls: vec![ai_core::LlmToolCall {
                    id: ToolCallId::new("c1").unwrap(),
                    name: "core__absent".into(),
                    arguments: "{}".into(),
                    complete: true,
                    provider_fields: Default::default(),
                }],
                finish_reason: ai_core::FinishReason::ToolCalls,
                usage: None,
            });
        }
        for delta in ["Here is ", "how"] {
            deltas.delta(ai_core::CompletionDelta::Text {
                delta: delta.into(),
            });
        }
        match self.second {
            SecondCall::Fails => Err(ai_core::CompletionError::Provider("overloaded".into())),
            SecondCall::IsCancelled => {
                cancel.cancel();
                std::future::pending().await
            }
        }
    }
}

/// Text the model streamed before its call failed or was cancelled is in the history the run
/// saves, as crash recovery rebuilds it from the same events: both paths give one history.
#[tokio::test]
async fn a_failed_or_cancelled_model_call_keeps_the_same_history_as_recovery() {
    for second in [SecondCall::Fails, SecondCall::IsCancelled] {
        let completion = Arc::new(Interrupted {
            calls: Mutex::new(0),
            second,
        });
        let runtime = runtime(&crate::Settings::default(), completion);
        let thread = ThreadId::new("t").unwrap();
        let request = request(&runtime, "r", &thread, None, "how?");
        let started = request.state.clone();
        let events = Mutex::new(Vec::new());
        let sink = |event: AiEvent| events.lock().unwrap().push(event);
        let state = runtime
            .agent
            .run(
                started.clone(),
                "how?".into(),
                &request.ctx,
                &request.catalog,
                &sink,
                &request.cancel,
            )
            .await;
        let events = events.into_inner().unwrap();
        let input = super::RunInput {
            thread_state: started,
            turn: crate::Turn::UserMessage("how?".into()),
            loop_revision: Some(graph::LOOP_REVISION),
            settings: None,
        };
        // Recovery reads what a crash left stored: every event but the run's end.
        let recorded: Vec<AiEvent> = events
            .iter()
            .filter(|e| !matches!(e, AiEvent::Error { .. } | AiEvent::Done { .. }))
            .cloned()
            .collect();
        let repaired = super::repaired_state(input, &recorded, &[]).expect("a repaired thread");
        let repaired: graph::AgentState = serde_json::from_value(repaired).unwrap();
        assert_eq!(state.messages(), repaired.messages(), "{second:?}");
        assert!(
            matches!(
                state.messages().last(),
                Some(ai_core::Message::Assistant { content, tool_calls })
                    if content == "Here is how" && tool_calls.is_empty()
            ),
            "{second:?}: {:?}",
            state.messages()
        );
        ai_core::validate_history(state.messages()).unwrap();
    }
}

/// What happened, in order, as the parts of a run report it.
type Order = Arc<Mutex<Vec<&'static str>>>;

/// Pushes its word on `Order` when dropped.
struct OnDrop(Order, &'static str);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.lock().unwrap().push(self.1);
    }
}

/// A model call that streams "hi" and never answers; its end (the driver drops it when the run
/// is cancelled) is pushed on `order`.
struct Endless {
    order: Order,
}

#[async_trait]
impl ai_core::CompletionPort for Endless {
    async fn complete(
        &self,
        _: &ai_core::LlmRequest,
        deltas: &mut dyn ai_core::DeltaSink,
        _: &ai_core::CancellationToken,
    ) -> Result<ai_core::LlmCompletion, ai_core::CompletionError> {
        let _ended = OnDrop(self.order.clone(), "model call ended");
        deltas.delta(ai_core::CompletionDelta::Text { delta: "hi".into() });
        std::future::pending().await
    }
}

/// A run whose log cannot be written frees its thread (and the server's run slot) only once its
/// task has ended, as a run that ends any other way does: nothing of it (a model call, a tool
/// call) is still running when the next run on the thread may start.
#[tokio::test]
async fn a_run_whose_log_fails_frees_its_thread_only_once_its_task_has_ended() {
    let runs = Arc::new(FailingCommits::default());
    *runs.failing.lock().unwrap() = Some(RunId::new("fails").unwrap());
    let locks = tempfile::tempdir().unwrap();
    let stores = stores(runs, &locks);
    let order = Order::default();
    let completion = Arc::new(Endless {
        order: order.clone(),
    });
    let runtime = runtime(&crate::Settings::default(), completion);
    let thread = ThreadId::new("t").unwrap();
    let request = request(&runtime, "fails", &thread, None, "hello");
    let freed = order.clone();
    let on_saved = move || freed.lock().unwrap().push("thread freed");
    let events = super::start_run(&runtime, &stores, request, on_saved)
        .await
        .unwrap();
    let shown = drain(events).await;
    assert!(
        matches!(
            shown.as_slice(),
            [AiEvent::Error { message }, AiEvent::Done { .. }]
                if message.contains("could not be recorded") && !message.contains("disk I/O")
        ),
        "{shown:?}"
    );
    assert_eq!(
        *order.lock().unwrap(),
        ["model call ended", "thread freed"],
        "the thread was freed while its run was still running"
    );
}

/// A run whose log write panics (the run store's code, or the clock it reads) is ended as one
/// whose log write fails: its client is shown one error and one `Done`, its thread is freed, and
/// the run is closed at once rather than left `running` for the next start.
#[tokio::test]
async fn a_run_whose_log_write_panics_is_ended_as_one_whose_write_fails() {
    let locks = tempfile::tempdir().unwrap();
    let (shown, _) = closed_at_once(&locks, "write-panics", |runs| &runs.panicking_commit).await;
    assert!(
        matches!(
            shown.as_slice(),
            [AiEvent::Error { message }, _] if message.contains("could not be recorded")
        ),
        "{shown:?}"
    );
}

/// One of [`FailingCommits`]'s switches: a call of it fails or panics for the run it names.
type Switch = fn(&FailingCommits) -> &Mutex<Option<RunId>>;

/// Runs "hello" on a new thread `t` as `run_id`, the model answering through `completion`,
/// over [`logged_stores`] in `locks` with each of `failing` naming the run, and checks that its
/// client is shown one error and one `Done` and its thread is freed. Returns what the client
/// was shown, the run store and the stores.
async fn shown_its_end(
    locks: &tempfile::TempDir,
    run_id: &RunId,
    completion: Arc<dyn ai_core::CompletionPort>,
    failing: &[Switch],
) -> (Vec<AiEvent>, Arc<FailingCommits>, Stores) {
    let (runs, stores) = logged_stores(locks);
    let runtime = runtime(&crate::Settings::default(), completion);
    let thread = ThreadId::new("t").unwrap();
    for switch in failing {
        *switch(&runs).lock().unwrap() = Some(run_id.clone());
    }
    let request = request(&runtime, run_id.as_str(), &thread, None, "hello");
    let (shown, freed) = run_to_end_freeing(&runtime, &stores, request).await;
    assert_error_then_done(&shown);
    assert!(freed);
    (shown, runs, stores)
}

/// As [`shown_its_end`] with the one panic `panicking`, and checks that the run is closed at
/// once: its log ends with an error and `Done` and is not left `running`, and nothing is left
/// for the next start's recovery. Returns what the client was shown, and the stores.
async fn closed_at_once(
    locks: &tempfile::TempDir,
    run_id: &str,
    panicking: Switch,
) -> (Vec<AiEvent>, Stores) {
    let run = RunId::new(run_id).unwrap();
    let (shown, runs, stores) = shown_its_end(locks, &run, Arc::new(Answer), &[panicking]).await;
    assert_closed_with_only_its_end(&runs, &run).await;
    assert!(recover(&stores, &FixedClock).await.unwrap().is_empty());
    (shown, stores)
}

/// Checks that `events` are one error, then `Done`.
fn assert_error_then_done(events: &[AiEvent]) {
    assert!(
        matches!(events, [AiEvent::Error { .. }, AiEvent::Done { .. }]),
        "{events:?}"
    );
}

/// Checks that `run` is closed (not left `running`) and that its log holds only the error and
/// `Done` it was closed with: none of its batches was stored.
async fn assert_closed_with_only_its_end(runs: &FailingCommits, run: &RunId) {
    let log = runs.load_run(run).await.unwrap();
    assert_ne!(log.header.status, ai_core::RunStatus::Running);
    assert_error_then_done(&log.events);
}

/// A run whose last batch (with `Done` and the thread's state) is stored but whose header cannot
/// then be marked finished has ended: its client is shown the stored batch, not an error, and
/// the run is not marked interrupted; the next start's recovery marks it finished.
#[tokio::test]
async fn a_run_stored_to_its_end_whose_finish_mark_fails_is_shown_as_ended() {
    let runs = Arc::new(FailingCommits::default());
    let run_id = RunId::new("ends").unwrap();
    *runs.failing_finish.lock().unwrap() = Some(run_id.clone());
    let locks = tempfile::tempdir().unwrap();
    let stores = stores(runs.clone(), &locks);
    let runtime = runtime(&crate::Settings::default(), Arc::new(Answer));
    let thread = ThreadId::new("t").unwrap();
    let request = request(&runtime, "ends", &thread, None, "hello");
    let shown = run_to_end(&runtime, &stores, request).await;
    assert!(
        matches!(
            shown.last(),
            Some(AiEvent::Done {
                reason: ai_core::DoneReason::Stop
            })
        ),
        "{shown:?}"
    );
    let log = runs.load_run(&run_id).await.unwrap();
    assert_eq!(log.events, shown);
    assert_eq!(log.header.status, ai_core::RunStatus::Running);
    // The run store saves the thread with the run's last step.
    let saved = ai_core::ThreadStore::load(&*runs.inner, &thread).await;
    let saved = saved.unwrap().unwrap();
    assert!(saved.to_string().contains("hello"), "{saved}");

    *runs.failing_finish.lock().unwrap() = None;
    assert!(recover(&stores, &FixedClock).await.unwrap().is_empty());
    let log = runs.load_run(&run_id).await.unwrap();
    assert_eq!(log.header.status, ai_core::RunStatus::Finished);
}

/// A model call that streams "hi", waits until `go`, and answers "hi", notifying `answering`
/// as it does.
struct AnswersOnCue {
    go: Arc<tokio::sync::Notify>,
    answering: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl ai_core::CompletionPort for AnswersOnCue {
    async fn complete(
        &self,
        _: &ai_core::LlmRequest,
        deltas: &mut dyn ai_core::DeltaSink,
        _: &ai_core::CancellationToken,
    ) -> Result<ai_core::LlmCompletion, ai_core::CompletionError> {
        deltas.delta(ai_core::CompletionDelta::Text { delta: "hi".into() });
        self.go.notified().await;
        self.answering.notify_one();
        Ok(ai_core::LlmCompletion {
            text: "hi".into(),
            tool_calls: vec![],
            finish_reason: ai_core::FinishReason::Stop,
            usage: None,
        })
    }
}

/// The receipt of a model call that answered while the batch before it was failing to be
/// stored is not kept in the server's receipt collector, which outlives the run: it would never
/// be taken, and each such failure would leave one behind for as long as the server runs.
#[tokio::test]
async fn a_run_whose_log_fails_leaves_no_receipt_behind() {
    let (commit_entered, model_answering) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let runs = Arc::new(FailingCommits {
        gate: Mutex::new(Some((commit_entered.clone(), model_answering.clone()))),
        ..FailingCommits::default()
    });
    let run_id = RunId::new("fails").unwrap();
    *runs.failing.lock().unwrap() = Some(run_id.clone());
    let locks = tempfile::tempdir().unwrap();
    let stores = stores(runs, &locks);
    let settings = crate::Settings::default();
    let port = Arc::new(AnswersOnCue {
        go: commit_entered,
        answering: model_answering,
    });
    let runtime = runtime(
        &settings,
        crate::record_completion(port, &stores, &settings.llm),
    );
    let thread = ThreadId::new("t").unwrap();
    let request = request(&runtime, "fails", &thread, None, "hello");
    let shown = run_to_end(&runtime, &stores, request).await;
    assert!(
        matches!(shown.first(), Some(AiEvent::Error { message }) if message.contains("could not be recorded")),
        "{shown:?}"
    );
    let left = stores.log.as_ref().unwrap().receipts.take(&run_id);
    assert!(left.is_empty(), "receipts left behind: {left:?}");
}

/// Log lines written while it is the default subscriber.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A crashed run whose input blob is missing, or does not decode, or one of whose history's
/// message blobs is missing or damaged, cannot give its thread the interrupted turn: recovery
/// still closes it, and says so in a warning naming the run and what was wrong with its input
/// (never the blob's content), rather than dropping the turn silently.
#[tokio::test]
async fn recovery_warns_naming_the_run_whose_input_cannot_be_read() {
    let runs = Arc::new(FailingCommits::default());
    let locks = tempfile::tempdir().unwrap();
    let blobs = Arc::new(InMemoryBlobStore::default());
    let mut stores = stores(runs.clone(), &locks);
    if let Some(log) = &mut stores.log {
        log.blobs = blobs.clone();
    }
    let log = stores.log.clone().unwrap();
    let thread = ThreadId::new("t").unwrap();
    let missing = "ab".repeat(32);
    let undecodable = log.blobs.put(br#"{"secret-payload":1}"#).await.unwrap();
    // Inputs in stored form 2 whose one message blob is lost, or damaged.
    let with_system = |prompt: &str| super::RunInput {
        thread_state: graph::AgentState::new(
            Some(prompt.into()),
            std::num::NonZeroU32::new(3).unwrap(),
        ),
        turn: crate::Turn::UserMessage("secret-message".into()),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    let message_of = |stored: Vec<u8>| {
        let stored: serde_json::Value = serde_json::from_slice(&stored).unwrap();
        stored["history"]["last"].as_str().unwrap().to_owned()
    };
    let lost = with_system("secret-lost")
        .store(log.blobs.as_ref())
        .await
        .unwrap();
    let lost_message = message_of(log.blobs.get(&lost).await.unwrap());
    let mut envelope: serde_json::Value =
        serde_json::from_slice(&log.blobs.get(&lost).await.unwrap()).unwrap();
    envelope["history"]["last"] = "cd".repeat(32).into();
    assert_ne!(lost_message, "cd".repeat(32));
    let lost = log
        .blobs
        .put(&serde_json::to_vec(&envelope).unwrap())
        .await
        .unwrap();
    let damaged = with_system("secret-damaged")
        .store(log.blobs.as_ref())
        .await
        .unwrap();
    let damaged_message = message_of(log.blobs.get(&damaged).await.unwrap());
    blobs
        .insert_unchecked(&damaged_message, b"secret-garbage".to_vec())
        .unwrap();
    envelope["stored_form"] = 3.into();
    let newer = log
        .blobs
        .put(&serde_json::to_vec(&envelope).unwrap())
        .await
        .unwrap();
    for (run, input_ref) in [
        ("run-missing", &missing),
        ("run-undecodable", &undecodable),
        ("run-lost-message", &lost),
        ("run-damaged-message", &damaged),
        ("run-newer", &newer),
    ] {
        let run = RunId::new(run).unwrap();
        runs.begin_run(&run, Some(&thread), 1, Some(input_ref))
            .await
            .unwrap();
    }

    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    let closed = recover(&stores, &FixedClock).await.unwrap();
    assert_eq!(closed.len(), 5);

    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let warning = |run: &str| {
        logs.lines()
            .find(|line| line.contains("WARN") && line.contains(run))
            .unwrap_or_else(|| panic!("no warning names {run}: {logs}"))
            .to_owned()
    };
    assert!(
        warning("run-missing").contains("its input blob is missing"),
        "{logs}"
    );
    assert!(
        warning("run-undecodable").contains("its input blob does not decode"),
        "{logs}"
    );
    assert!(
        warning("run-lost-message").contains("a message blob of its input's history is missing"),
        "{logs}"
    );
    assert!(
        warning("run-damaged-message").contains("a message blob of its input's history is damaged"),
        "{logs}"
    );
    assert!(
        warning("run-newer").contains("its input was stored by a newer cogni"),
        "{logs}"
    );
    assert!(!logs.contains("secret"), "{logs}");
    assert!(stores.threads.load(&thread).await.unwrap().is_none());
}

/// Recovery asks the store for the running runs only, never for every run's header: its cost at
/// each `cogni serve` start and `cogni chat` turn does not grow with the log.
#[tokio::test]
async fn recovery_lists_only_the_running_runs() {
    let runs = Arc::new(FailingCommits::default());
    for (run, at_ms) in [("run-old", 1), ("run-cut", 2)] {
        let run = RunId::new(run).unwrap();
        runs.begin_run(&run, None, at_ms, None).await.unwrap();
    }
    let old = RunId::new("run-old").unwrap();
    let step = RunStep {
        events: vec![AiEvent::Done {
            reason: ai_core::DoneReason::Stop,
        }],
        ..RunStep::default()
    };
    runs.commit_step(&old, step).await.unwrap();
    runs.finish_run(&old, 3).await.unwrap();
    let locks = tempfile::tempdir().unwrap();
    let closed = recover(&stores(runs.clone(), &locks), &FixedClock)
        .await
        .unwrap();
    assert_eq!(closed, [RunId::new("run-cut").unwrap()]);
    assert_eq!(
        runs.full_listings
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

/// A blob store in memory that counts the blobs it is asked to put, and their bytes.
#[derive(Default)]
struct CountingBlobs {
    inner: InMemoryBlobStore,
    /// The blobs asked to be put, and their bytes.
    put: Mutex<(usize, usize)>,
}

impl CountingBlobs {
    /// The blobs asked to be put so far, and their bytes.
    fn put(&self) -> (usize, usize) {
        *self.put.lock().unwrap()
    }

    /// Counts `blobs` as asked to be put.
    fn count(&self, blobs: &[&[u8]]) {
        let mut put = self.put.lock().unwrap();
        put.0 += blobs.len();
        put.1 += blobs.iter().map(|b| b.len()).sum::<usize>();
    }
}

#[async_trait]
impl BlobStore for CountingBlobs {
    async fn put(&self, bytes: &[u8]) -> Result<String, ai_core::BlobStoreError> {
        self.count(&[bytes]);
        self.inner.put(bytes).await
    }

    async fn put_many(&self, blobs: &[&[u8]]) -> Result<Vec<String>, ai_core::BlobStoreError> {
        self.count(blobs);
        self.inner.put_many(blobs).await
    }

    async fn get(&self, hash: &str) -> Result<Vec<u8>, ai_core::BlobStoreError> {
        self.inner.get(hash).await
    }
}

/// A thread's runs hand the blob store only what is new since the thread's last stored input:
/// each turn puts its new messages and its input, so over K turns the blobs put (and hashed, and
/// looked up or re-read by the store) grow linearly in K, where every run putting its thread's
/// whole history again made them grow with K².
#[tokio::test]
async fn a_threads_runs_put_only_the_messages_new_since_its_last_input() {
    const TURNS: usize = 30;
    let blobs = Arc::new(CountingBlobs::default());
    let locks = tempfile::tempdir().unwrap();
    // The run log saves the thread in the closing step: the threads are the run store's.
    let runs = Arc::new(InMemoryRunStore::default());
    let stores = Stores {
        threads: runs.clone(),
        log: Some(RunLogStores {
            runs,
            blobs: blobs.clone(),
            receipts: Arc::new(ReceiptCollector::default()),
            locks: RunLocks::new(locks.path()),
            histories: Default::default(),
        }),
        memory_threads: None,
    };
    let log = stores.log.clone().unwrap();
    let settings = crate::Settings::default();
    let answer = runtime(&settings, Arc::new(Answer));
    let thread = ThreadId::new("t").unwrap();
    let message = "x".repeat(2_000);
    let mut per_turn = Vec::with_capacity(TURNS);
    for turn in 0..TURNS {
        let saved = stores.threads.load(&thread).await.unwrap();
        let run_id = format!("run-{turn}");
        let before = blobs.put();
        let shown = run_to_end(
            &answer,
            &stores,
            request(&answer, &run_id, &thread, saved.clone(), &message),
        )
        .await;
        assert!(
            matches!(shown.last(), Some(AiEvent::Done { .. })),
            "{shown:?}"
        );
        let after = blobs.put();
        per_turn.push((after.0 - before.0, after.1 - before.1));
        // The input reads back as the state the run began from, its whole history included.
        let run = log.runs.load_run(&RunId::new(&run_id).unwrap()).await;
        let input_ref = run.unwrap().header.input_ref.unwrap();
        let input = super::RunInput::load(log.blobs.as_ref(), &input_ref)
            .await
            .unwrap();
        let began = saved.map_or_else(
            || answer.agent.new_state(),
            |s| serde_json::from_value(s).unwrap(),
        );
        assert_eq!(input.thread_state, began);
        assert_eq!(began.messages().len(), 2 * turn);
    }
    // After the first turn, each puts the two messages the turn before added and its input.
    for (turn, &(count, _)) in per_turn.iter().enumerate().skip(1) {
        assert!(count <= 3, "turn {turn} put {count} blobs: {per_turn:?}");
    }
    let (second, last) = (per_turn[1].1, per_turn[TURNS - 1].1);
    assert!(
        last <= 2 * second,
        "the last turn put {last} bytes, the second {second}: {per_turn:?}"
    );
}

/// A thread whose history is not its last stored one followed by new messages (cut short, a
/// message changed, a tool call's provider field `-0.0` where it was `0.0`, which `==` takes
/// for the same) is stored as it now is: to the very blobs and address a whole store gives, so
/// it loads back as it is.
#[tokio::test]
async fn a_thread_whose_history_was_rewritten_is_stored_as_it_now_is() {
    use ai_core::{AssistantToolCall, Message};
    let call = |zero: serde_json::Value| AssistantToolCall {
        id: ToolCallId::new("call-1").unwrap(),
        name: "core__get_current_time".into(),
        arguments: "{}".into(),
        provider_fields: serde_json::json!({ "signature": zero })
            .as_object()
            .unwrap()
            .clone(),
    };
    let history = |first: &str, zero: serde_json::Value| {
        vec![
            Message::System {
                content: "be brief".into(),
            },
            Message::User {
                content: first.into(),
            },
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![call(zero)],
            },
            Message::Tool {
                tool_call_id: ToolCallId::new("call-1").unwrap(),
                content: "noon".into(),
            },
            Message::Assistant {
                content: "it is noon".into(),
                tool_calls: vec![],
            },
        ]
    };
    let full = history("what time is it?", serde_json::json!(0.0));
    let negative = history("what time is it?", serde_json::json!(-0.0));
    assert_eq!(full, negative, "`==` takes -0.0 for 0.0");
    let changed = history("what day is it?", serde_json::json!(0.0));
    let empty = graph::AgentState::new(None, std::num::NonZeroU32::new(3).unwrap());
    let histories = super::StoredHistories::default();
    let thread = ThreadId::new("t").unwrap();
    let blobs = InMemoryBlobStore::default();
    for messages in [
        full.clone(),
        full[..2].to_vec(),
        full.clone(),
        negative,
        changed,
        full[..1].to_vec(),
        full,
        Vec::new(),
    ] {
        let input = super::RunInput {
            thread_state: empty.with_history(messages).unwrap(),
            turn: crate::Turn::UserMessage("next".into()),
            loop_revision: None,
            settings: None,
        };
        let input_ref = input
            .store_on_thread(&blobs, &histories, &thread)
            .await
            .unwrap();
        let whole = InMemoryBlobStore::default();
        assert_eq!(input_ref, input.store(&whole).await.unwrap());
        let (loaded, _) = super::RunInput::load_stored(&blobs, &input_ref)
            .await
            .unwrap();
        assert_eq!(loaded, input);
        assert_eq!(
            ai_core::canonical_bytes(&loaded).unwrap(),
            ai_core::canonical_bytes(&input).unwrap()
        );
    }
}

/// The histories remembered stay within their bounds: past them, the thread used least
/// recently is forgotten, and a history alone past the bytes is not kept.
#[tokio::test]
async fn stored_histories_stay_within_their_bounds() {
    let histories = super::StoredHistories::new(2, 4_000);
    let blobs = InMemoryBlobStore::default();
    let empty = graph::AgentState::new(None, std::num::NonZeroU32::new(3).unwrap());
    let store = |thread: &'static str, len: usize| {
        let input = super::RunInput {
            thread_state: empty
                .with_history(vec![ai_core::Message::User {
                    content: "x".repeat(len),
                }])
                .unwrap(),
            turn: crate::Turn::UserMessage("next".into()),
            loop_revision: None,
            settings: None,
        };
        let (blobs, histories) = (&blobs, &histories);
        async move {
            let thread = ThreadId::new(thread).unwrap();
            input
                .store_on_thread(blobs, histories, &thread)
                .await
                .unwrap();
        }
    };
    store("a", 1_000).await;
    store("b", 1_000).await;
    assert_eq!(histories.size().0, 2);
    store("c", 1_000).await;
    assert_eq!(histories.size().0, 2, "`a` is forgotten");
    store("d", 3_000).await;
    let (threads, bytes) = histories.size();
    assert_eq!(threads, 1, "only `d` is kept: {bytes}");
    assert!(bytes <= 4_000, "{bytes}");
    store("e", 5_000).await;
    assert_eq!(
        histories.size(),
        (0, 0),
        "a history past the bytes alone is not kept"
    );
}

/// A run from a state the server rewound the thread to (an AI SDK edit: the history before the
/// edited message) whose log fails, or which crashes, is closed over that state: the thread
/// takes the edited message and the turn the client was shown, and never goes back to what the
/// edit rewound away (the model would be sent it again at the next message).
#[tokio::test]
async fn a_rewound_run_whose_log_fails_is_closed_over_the_rewound_thread() {
    let locks = tempfile::tempdir().unwrap();
    let (runs, stores) = logged_stores(&locks);
    let thread = ThreadId::new("t-edit").unwrap();
    let answers = runtime(&crate::Settings::default(), Arc::new(Answer));
    for (run, message) in [("run-1", "first"), ("run-2", "second")] {
        let saved = stores.threads.load(&thread).await.unwrap();
        run_to_end(
            &answers,
            &stores,
            request(&answers, run, &thread, saved, message),
        )
        .await;
    }
    let saved = stores.threads.load(&thread).await.unwrap().unwrap();
    let held: graph::AgentState = serde_json::from_value(saved.clone()).unwrap();
    let at = held
        .messages()
        .iter()
        .position(|m| matches!(m, ai_core::Message::User { content } if content == "second"))
        .unwrap();
    let rewound = held.with_history(held.messages()[..at].to_vec()).unwrap();

    let (gated, entered, release) = Gated::new();
    let runtime = runtime(&crate::Settings::default(), gated);
    let mut edit = request(&runtime, "run-3", &thread, Some(saved), "second, edited");
    edit.state = rewound;
    let mut events = super::start_run(&runtime, &stores, edit, || {})
        .await
        .unwrap();
    entered.notified().await;
    *runs.failing.lock().unwrap() = Some(RunId::new("run-3").unwrap());
    release.notify_one();
    while events.recv().await.is_some() {}
    // Closed by the run's own process, or else by the next start.
    *runs.failing.lock().unwrap() = None;
    recover(&stores, &FixedClock).await.unwrap();

    let after = stores.threads.load(&thread).await.unwrap().unwrap();
    let after: graph::AgentState = serde_json::from_value(after).unwrap();
    let users: Vec<&str> = after
        .messages()
        .iter()
        .filter_map(|m| match m {
            ai_core::Message::User { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(users, ["first", "second, edited"]);
}

/// A panic payload whose drop panics: a port that panics with it gets past the driver's guard,
/// which catches the first panic and then drops the payload, so the run's task dies.
struct DropBomb;

impl Drop for DropBomb {
    fn drop(&mut self) {
        panic!("the payload's drop panicked");
    }
}

/// A model call that streams "hi", then panics with a [`DropBomb`].
struct Dies;

#[async_trait]
impl ai_core::CompletionPort for Dies {
    async fn complete(
        &self,
        _: &ai_core::LlmRequest,
        deltas: &mut dyn ai_core::DeltaSink,
        _: &ai_core::CancellationToken,
    ) -> Result<ai_core::LlmCompletion, ai_core::CompletionError> {
        deltas.delta(ai_core::CompletionDelta::Text { delta: "hi".into() });
        tokio::task::yield_now().await;
        std::panic::panic_any(DropBomb)
    }
}

/// A run whose task dies before its `Done` (its events stop coming) is closed at once by the
/// process that runs it, as a run whose log failed is: its client is shown one `Done`, the log
/// holds one, the run is not left `running` until the next start, and the thread takes the turn
/// its stored events hold (what the client was shown), so the next turn does not lose it.
#[tokio::test]
async fn a_run_whose_task_dies_is_closed_at_once_with_the_turn_it_showed() {
    let (_dir, settings) = with_data_dir();
    let stores = crate::create_stores(&settings).unwrap();
    let log = stores.log.clone().unwrap();
    let runtime = runtime(&settings, Arc::new(Dies));
    let thread = ThreadId::new("t").unwrap();
    let shown = run_to_end(
        &runtime,
        &stores,
        request(&runtime, "dies", &thread, None, "hello"),
    )
    .await;

    let dones = |events: &[AiEvent]| {
        events
            .iter()
            .filter(|e| matches!(e, AiEvent::Done { .. }))
            .count()
    };
    assert_eq!(dones(&shown), 1, "{shown:?}");
    assert!(
        matches!(shown.last(), Some(AiEvent::Done { .. })),
        "{shown:?}"
    );
    let run = log
        .runs
        .load_run(&RunId::new("dies").unwrap())
        .await
        .unwrap();
    assert_ne!(run.header.status, ai_core::RunStatus::Running);
    assert_eq!(dones(&run.events), 1, "{:?}", run.events);
    let saved = stores
        .threads
        .load(&thread)
        .await
        .unwrap()
        .expect("the thread was saved");
    let state: graph::AgentState = serde_json::from_value(saved).unwrap();
    assert!(
        matches!(
            state.messages(),
            [ai_core::Message::User { content }, ai_core::Message::Assistant { content: text, .. }]
                if content == "hello" && text == "hi"
        ),
        "{:?}",
        state.messages()
    );
    assert!(recover(&stores, &FixedClock).await.unwrap().is_empty());
}

/// A run whose beginning panics once its row is written (the run store's code, here) is ended as
/// a run whose task dies is: closed at once, its thread saved with the turn it began, its client
/// shown one error and one `Done`, its thread freed; never left `running` for the next start.
#[tokio::test]
async fn a_run_whose_begin_panics_is_closed_at_once() {
    let locks = tempfile::tempdir().unwrap();
    let (_, stores) = closed_at_once(&locks, "begin-panics", |runs| &runs.panicking_begin).await;
    let thread = ThreadId::new("t").unwrap();
    let state = saved_state(&stores, &thread).await;
    assert!(
        matches!(
            state.messages(),
            [ai_core::Message::User { content }] if content == "hello"
        ),
        "{:?}",
        state.messages()
    );
}

/// A resume whose beginning panics (here once its row is written), on a thread another resume of
/// the same pause consumed meanwhile (it read the pause before that run saved its thread): its
/// closing leaves the thread as recovery does, not knowing whether its own begin got past that
/// save, so the other run's thread, equal to what this one would have saved, is not written
/// over.
#[tokio::test]
async fn a_resume_whose_begin_panics_leaves_a_thread_another_resume_consumed() {
    let locks = tempfile::tempdir().unwrap();
    let (runs, stores) = logged_stores(&locks);
    let runtime = runtime(&crate::Settings::default(), Arc::new(Answer));
    let thread = ThreadId::new("t-paused").unwrap();
    let run = RunId::new("resume-begin-panics").unwrap();
    let paused = serde_json::to_value(paused_thread()).unwrap();
    let mut request = request(&runtime, run.as_str(), &thread, Some(paused), "unused");
    request.turn = approve_gated();
    let consumed = graph::reduce(request.state.clone(), request.turn.event()).0;
    let consumed = serde_json::to_value(consumed).unwrap();
    stores.threads.save(&thread, None, &consumed).await.unwrap();
    *runs.panicking_begin.lock().unwrap() = Some(run.clone());

    let shown = run_to_end(&runtime, &stores, request).await;
    assert_error_then_done(&shown);
    assert_ne!(
        runs.load_run(&run).await.unwrap().header.status,
        ai_core::RunStatus::Running
    );
    assert_eq!(
        stores.threads.load(&thread).await.unwrap(),
        Some(consumed),
        "the thread another run is using was written over"
    );
}

/// A run whose beginning panics in a port that panics again as the run is closed (a store whose
/// lock stays poisoned, say) is still shown its end: one error and one `Done`, its thread freed;
/// the run is left `running`, as for a closing that fails, and the next start's recovery closes
/// it.
#[tokio::test]
async fn a_run_whose_begin_and_closing_panic_is_still_shown_its_end() {
    let locks = tempfile::tempdir().unwrap();
    let run = RunId::new("begin-and-closing-panic").unwrap();
    let panicking: [Switch; 2] = [
        |runs| &runs.panicking_begin,
        |runs| &runs.panicking_recovery,
    ];
    let (_, runs, stores) = shown_its_end(&locks, &run, Arc::new(Answer), &panicking).await;
    let log = runs.load_run(&run).await.unwrap();
    assert_eq!(log.header.status, ai_core::RunStatus::Running);

    *runs.panicking_recovery.lock().unwrap() = None;
    assert_eq!(
        recover(&stores, &FixedClock).await.unwrap(),
        vec![run.clone()]
    );
    let log = runs.load_run(&run).await.unwrap();
    assert_error_then_done(&log.events);
}

/// A resume whose process died after its run was begun and before it saved its thread past the
/// pause: nothing of it ran and nothing was shown, its decisions were never taken. Recovery
/// closes it and leaves the thread waiting, so the same answers can be sent again, rather than
/// applying them with the approved calls answered as calls that may have run, though none did
/// (`graph::lost_result`; a pause the client still shows open, its answers then refused as
/// naming calls the thread no longer waits for).
#[tokio::test]
async fn recovery_leaves_the_pause_of_a_resume_that_died_before_taking_its_decisions() {
    let (_dir, settings) = with_data_dir();
    let stores = crate::create_stores(&settings).unwrap();
    let log = stores.log.clone().unwrap();
    let thread = ThreadId::new("t-paused").unwrap();
    let paused = serde_json::to_value(paused_thread()).unwrap();
    stores.threads.save(&thread, None, &paused).await.unwrap();
    let input = super::RunInput {
        thread_state: paused_thread(),
        turn: approve_gated(),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    let run = begin_with_input(&log, "died", &thread, &input).await;

    let closed = recover(&stores, &FixedClock).await.unwrap();
    assert_eq!(closed, [run]);
    assert_eq!(
        stores.threads.load(&thread).await.unwrap(),
        Some(paused),
        "the thread no longer waits for the answers its client may send again"
    );
}

/// The history of `state` as JSON, once each of `calls` is seen there exactly twice: the call
/// and its one answer.
fn each_answered_once(state: &graph::AgentState, calls: &[&str]) -> String {
    let messages = serde_json::to_string(state.messages()).unwrap();
    for call in calls {
        assert_eq!(
            messages.matches(&format!("\"{call}\"")).count(),
            2,
            "one call, one answer: {messages}"
        );
    }
    messages
}

/// The event of a call `call` of `core__write` (writing `path`) that waits for approval.
fn waited_for_approval(call: &str, path: &str) -> AiEvent {
    AiEvent::ApprovalRequired {
        tool_call_id: ToolCallId::new(call).unwrap(),
        tool_id: ai_core::ToolId::parse("core__write").unwrap(),
        args: Arc::new(serde_json::json!({ "path": path })),
        args_hash: "hash".into(),
    }
}

/// A run that crashed as it paused for an approval (the call's request stored and shown, the
/// run's `Done` and its paused state not): the call never ran and will never be decided. The
/// closing answers it so in the log, as the client's stream answers it when such a run ends,
/// and the thread's turn holds the call the model asked for, with that answer, as the client
/// was shown it, rather than leaving it out.
#[tokio::test]
async fn recovery_keeps_a_call_that_waited_for_approval_as_one_that_never_ran() {
    use ai_core::{Message, ToolErrorCode, ToolOutcome};
    let OpenRun {
        stores,
        log,
        thread,
        open,
        ..
    } = open_run().await;
    let gated = ToolCallId::new("gated").unwrap();
    let step = RunStep {
        events: vec![
            AiEvent::StepStarted { step: 1 },
            waited_for_approval("gated", "a"),
        ],
        ..RunStep::default()
    };
    log.runs.commit_step(&open, step).await.unwrap();

    let closed = recover(&stores, &FixedClock).await.unwrap();
    assert_eq!(closed, std::slice::from_ref(&open));
    let events = log.runs.load_run(&open).await.unwrap().events;
    let answered = events.iter().find_map(|event| match event {
        AiEvent::ToolCallResult {
            tool_call_id,
            outcome: ToolOutcome::Error(failure),
            ..
        } if *tool_call_id == gated => Some(failure.clone()),
        _ => None,
    });
    let answered = answered.expect("the closing answers the call that waited");
    assert_eq!(answered.code, ToolErrorCode::Interrupted);
    assert!(
        answered.safe_message.contains("never ran"),
        "{}",
        answered.safe_message
    );

    let state = saved_state(&stores, &thread).await;
    ai_core::validate_history(state.messages()).unwrap();
    assert!(
        matches!(
            state.messages(),
            [
                Message::User { .. },
                Message::Assistant { tool_calls, .. },
                Message::Tool { tool_call_id, content },
            ] if tool_calls.len() == 1
                && tool_calls[0].id == gated
                && tool_calls[0].name == "core__write"
                && tool_calls[0].arguments == r#"{"path":"a"}"#
                && *tool_call_id == gated
                && content.contains("never ran")
        ),
        "{:?}",
        state.messages()
    );
}

/// A run cancelled as it paused answers the call that waited for approval itself: a start
/// without arguments, then its `cancelled` result. When it stopped between the two, the call
/// is answered once: as a call that started without its result (it never ran), not a second
/// time as one that still waited, which would give the log two starts and two results and the
/// thread no valid turn.
#[tokio::test]
async fn recovery_answers_once_a_waiting_call_whose_cancel_had_started_it() {
    use ai_core::ToolOutcome;
    let OpenRun {
        stores,
        log,
        thread,
        open,
        ..
    } = open_run().await;
    let gated = ToolCallId::new("gated").unwrap();
    let step = RunStep {
        events: vec![
            AiEvent::StepStarted { step: 1 },
            waited_for_approval("gated", "a"),
            AiEvent::ToolCallStart {
                tool_call_id: gated.clone(),
                tool_name: "core__write".into(),
                args: None,
            },
        ],
        ..RunStep::default()
    };
    log.runs.commit_step(&open, step).await.unwrap();

    recover(&stores, &FixedClock).await.unwrap();
    let events = log.runs.load_run(&open).await.unwrap().events;
    let starts = events
        .iter()
        .filter(
            |e| matches!(e, AiEvent::ToolCallStart { tool_call_id, .. } if *tool_call_id == gated),
        )
        .count();
    let results: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            AiEvent::ToolCallResult {
                tool_call_id,
                outcome: ToolOutcome::Error(failure),
                ..
            } if *tool_call_id == gated => Some(failure.safe_message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(starts, 1, "{events:?}");
    assert_eq!(results.len(), 1, "{events:?}");
    assert!(results[0].contains("never ran"), "{}", results[0]);

    let state = saved_state(&stores, &thread).await;
    ai_core::validate_history(state.messages()).unwrap();
    assert!(
        serde_json::to_string(state.messages())
            .unwrap()
            .contains("gated"),
        "the turn holds the call: {:?}",
        state.messages()
    );
}

/// A resume that saved its thread past the pause, then failed to store its first batch, is
/// closed by its own process, which knows it took its decisions: the thread takes the turn
/// rather than staying past the pause with the approved call unanswered and nothing to run it,
/// as a crashed resume that recorded nothing must stay (recovery cannot tell it from a resume
/// refused as it began). The approved call is answered as one that may have run, its result
/// lost (its start went with the batch that failed, and it may have run by then), never as
/// cancelled: the next user message answers a call such a run left out the same way.
#[tokio::test]
async fn a_resume_whose_first_batch_fails_is_closed_over_the_decisions_it_took() {
    let locks = tempfile::tempdir().unwrap();
    let (runs, stores) = logged_stores(&locks);
    let thread = ThreadId::new("t-paused").unwrap();
    let paused = serde_json::to_value(paused_thread()).unwrap();
    stores.threads.save(&thread, None, &paused).await.unwrap();
    let (entered, release) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    *runs.gate.lock().unwrap() = Some((entered.clone(), release.clone()));
    let runtime = runtime(&crate::Settings::default(), Arc::new(Answer));
    let resume = super::RunRequest {
        turn: approve_gated(),
        ..request(&runtime, "resume", &thread, Some(paused.clone()), "")
    };
    let run = RunId::new("resume").unwrap();

    let mut events = super::start_run(&runtime, &stores, resume, || {})
        .await
        .unwrap();
    // Past its save: its first batch fails, and then the log works again for its closing.
    *runs.failing.lock().unwrap() = Some(run.clone());
    entered.notified().await;
    *runs.failing.lock().unwrap() = None;
    release.notify_one();
    while events.recv().await.is_some() {}

    // Its first batch is not stored.
    assert_closed_with_only_its_end(&runs, &run).await;
    let state = saved_state(&stores, &thread).await;
    assert!(
        matches!(state.phase(), graph::Phase::Idle),
        "the thread is left past its pause with the approved call unanswered: {:?}",
        state.phase()
    );
    ai_core::validate_history(state.messages()).unwrap();
    each_answered_once(&state, &["ran", "gated", "other"]);
    let gated = state.messages().iter().find_map(|message| match message {
        ai_core::Message::Tool {
            tool_call_id,
            content,
        } if tool_call_id.as_str() == "gated" => Some(content.clone()),
        _ => None,
    });
    let lost = graph::lost_result(&ToolCallId::new("gated").unwrap()).model_content();
    assert_eq!(gated, Some(lost), "{:?}", state.messages());
}

/// A run that crashed as it paused on a turn of several calls (one ran between two that waited
/// for approval): the thread takes the whole turn, each call answered once, in a valid history.
#[tokio::test]
async fn recovery_keeps_a_turn_whose_calls_ran_and_waited_in_turn() {
    let OpenRun {
        stores,
        log,
        thread,
        open,
        ..
    } = open_run().await;
    let id = |s: &str| ToolCallId::new(s).unwrap();
    let approval = |call: &str| waited_for_approval(call, call);
    let step = RunStep {
        events: vec![
            AiEvent::StepStarted { step: 1 },
            approval("gated"),
            AiEvent::ToolCallStart {
                tool_call_id: id("ran"),
                tool_name: "core__get_current_time".into(),
                args: Some(Arc::new(serde_json::json!({}))),
            },
            AiEvent::ToolCallResult {
                tool_call_id: id("ran"),
                tool_name: "core__get_current_time".into(),
                outcome: ai_core::ToolOutcome::Ok {
                    value: Arc::new(serde_json::json!(1)),
                },
            },
            approval("other"),
        ],
        ..RunStep::default()
    };
    log.runs.commit_step(&open, step).await.unwrap();

    recover(&stores, &FixedClock).await.unwrap();
    let state = saved_state(&stores, &thread).await;
    ai_core::validate_history(state.messages()).unwrap();
    each_answered_once(&state, &["ran", "gated", "other"]);
}

/// A run whose task dies while its log fails (every write refused, its closing too) is shown
/// one `Done`, frees its thread, and is closed by the next start, which gives the thread the
/// turn its stored events hold (none: the thread keeps its state).
#[tokio::test]
async fn a_run_whose_task_dies_while_its_log_fails_is_shown_one_done() {
    let locks = tempfile::tempdir().unwrap();
    let run = RunId::new("dies").unwrap();
    let failing: Switch = |runs| &runs.failing;
    let (_, runs, stores) = shown_its_end(&locks, &run, Arc::new(Dies), &[failing]).await;

    *runs.failing.lock().unwrap() = None;
    assert_eq!(
        recover(&stores, &FixedClock).await.unwrap(),
        std::slice::from_ref(&run)
    );
    let closing = runs.load_run(&run).await.unwrap().events;
    assert_error_then_done(&closing);
}

/// A run whose provider reused a call id (an earlier build's loop recorded it as sent): each
/// start is a call of its own, answered by the first result of its id that follows it, as the
/// run store pairs them for recovery. So the rebuilt turn holds both calls, the second under
/// the id the loop gives a reused one today (`{id}_2`), each with its own answer, instead of
/// failing on the second result and keeping the thread from before the run.
#[test]
fn recovery_rebuilds_a_reused_call_id_as_two_calls_paired_by_order() {
    use ai_core::{Message, ToolErrorCode, ToolFailure, ToolOutcome};
    let id = |s: &str| ToolCallId::new(s).unwrap();
    let input = super::RunInput {
        thread_state: graph::AgentState::new(None, std::num::NonZeroU32::new(10).unwrap()),
        turn: crate::Turn::UserMessage("twice".into()),
        loop_revision: Some(graph::LOOP_REVISION),
        settings: None,
    };
    let start = AiEvent::ToolCallStart {
        tool_call_id: id("c1"),
        tool_name: "core__get_current_time".into(),
        args: Some(Arc::new(serde_json::json!({}))),
    };
    let recorded = vec![
        AiEvent::StepStarted { step: 1 },
        start.clone(),
        AiEvent::ToolCallResult {
            tool_call_id: id("c1"),
            tool_name: "core__get_current_time".into(),
            outcome: ToolOutcome::Ok {
                value: Arc::new(serde_json::json!("FIRST-ANSWER")),
            },
        },
        AiEvent::StepStarted { step: 2 },
        start,
    ];
    let closing = vec![AiEvent::ToolCallResult {
        tool_call_id: id("c1"),
        tool_name: "core__get_current_time".into(),
        outcome: ToolOutcome::Error(ToolFailure::new(
            ToolErrorCode::Interrupted,
            "SECOND-STOPPED",
        )),
    }];
    let repaired = super::repaired_state(input, &recorded, &closing)
        .expect("a valid thread with both calls of the interrupted turn");
    let state: graph::AgentState = serde_json::from_value(repaired).unwrap();
    let answers: Vec<(String, String)> = state
        .messages()
        .iter()
        .filter_map(|message| match message {
            Message::Tool {
                tool_call_id,
                content,
            } => Some((tool_call_id.as_str().to_owned(), content.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0].0, "c1");
    assert!(answers[0].1.contains("FIRST-ANSWER"), "{answers:?}");
    assert_eq!(answers[1].0, "c1_2");
    assert!(answers[1].1.contains("SECOND-STOPPED"), "{answers:?}");
}

/// A call waiting for approval whose id an earlier, answered call of the run used: it is still
/// waiting (the start and result before it were another call's), so the closing answers it.
/// Only a start after its request is its own.
#[test]
fn a_waiting_call_is_paired_with_a_start_after_its_request_only() {
    use ai_core::ToolOutcome;
    let id = ToolCallId::new("c1").unwrap();
    let start = AiEvent::ToolCallStart {
        tool_call_id: id.clone(),
        tool_name: "core__write".into(),
        args: None,
    };
    let result = AiEvent::ToolCallResult {
        tool_call_id: id.clone(),
        tool_name: "core__write".into(),
        outcome: ToolOutcome::Ok {
            value: Arc::new(serde_json::json!(1)),
        },
    };
    let waiting = waited_for_approval("c1", "a.txt");
    let before = [start.clone(), result.clone(), waiting.clone()];
    let names: Vec<&str> = super::waiting_for_approval(&before)
        .iter()
        .map(|(call, tool)| {
            assert_eq!(tool.as_str(), "core__write");
            call.as_str()
        })
        .collect();
    assert_eq!(names, ["c1"]);
    // Its own start (a cancel's, without arguments) takes it.
    assert!(super::waiting_for_approval(&[waiting, start, result]).is_empty());
}

//! Unit tests of replay: what a recorded run answers again (results, refusals, receipts), which
//! runs are refused, and how a replay is compared with its recording.

use std::sync::Arc;

use ai_core::{
    AiEvent, CancellationToken, CompletionError, CompletionPort, DeltaSink, DoneReason,
    LlmCompletion, LlmRequest, RunContext, ThreadId, ToolCatalog,
};
use async_trait::async_trait;
use serde_json::{Value, json};

use super::{RecordedToolSource, ReplayOutcome, close_as_recorded, replay_run};
use crate::{RunRequest, Runtime, Settings};

/// The workspace a replay binds its tools to refuses every call as a workspace failure
/// (never as the caller's mistake), touching no folder.
#[tokio::test]
async fn a_replays_workspace_refuses_every_call() {
    let workspace = crate::ToolCapabilities::without_workspace().workspace;
    let errors = [
        workspace.list(".").await.err().unwrap(),
        workspace.read("notes.txt").await.err().unwrap(),
        workspace.write("notes.txt", "x").await.err().unwrap(),
    ];
    for error in errors {
        assert!(!error.is_caller_error(), "{error:?}");
        assert!(
            error.to_string().contains("no workspace is bound"),
            "{error}"
        );
    }
}

/// A recorded `result_too_large` is made again with its recorded size, however large,
/// without building a result of that size (the size comes from the data folder).
#[tokio::test]
async fn a_recorded_oversized_result_is_refused_again_at_any_size() {
    for size in ["40000", "67108865", "18446744073709551615"] {
        let failure = ai_core::ToolFailure::new(
            ai_core::ToolErrorCode::ResultTooLarge,
            format!("the tool result is {size} bytes, over the 32768-byte limit"),
        );
        let (run, _, remaining) = replay_time_call(None, Some(failure.clone()), 32 * 1024).await;
        assert_eq!(run.result.failure(), Some(&failure), "{size}");
        assert_eq!(remaining, 0, "{size}");
    }
}

/// A recorded `result_too_large` fails again under a result budget its recorded size fits
/// (a run recorded without its policy is replayed under today's): the call fails saying
/// its result was over the budget when the run was recorded and was never stored, and the
/// stand-in for the recorded failure is shown neither as a result nor in an event.
#[tokio::test]
async fn a_recorded_oversized_result_fails_again_under_a_budget_it_fits() {
    let recorded = ai_core::ToolFailure::new(
        ai_core::ToolErrorCode::ResultTooLarge,
        "the tool result is 40000 bytes, over the 32768-byte limit",
    );
    for budget in [40_000, 1 << 20, usize::MAX] {
        let (run, shown, remaining) = replay_time_call(None, Some(recorded.clone()), budget).await;
        let expected = ai_core::ToolFailure::new(
            ai_core::ToolErrorCode::ResultTooLarge,
            "the tool result was 40000 bytes when the run was recorded, over the result \
             budget it ran under, so it was never stored and a replay cannot show it",
        );
        assert_eq!(run.result.failure(), Some(&expected), "{budget}: {shown}");
        assert!(!shown.contains("cogni_replay_failed_after"), "{shown}");
        assert_eq!(remaining, 0, "{budget}");
    }
}

/// A recorded `result_too_large` for a result that nested too deep fails again the same
/// way, in the runner's same step: same code, same message (not an `execution` failure of
/// the tool's).
#[tokio::test]
async fn a_recorded_too_deep_result_is_refused_again_as_too_deep() {
    let recorded = ai_core::ToolFailure::new(
        ai_core::ToolErrorCode::ResultTooLarge,
        format!(
            "the tool result nests more than {} levels deep",
            ai_core::MAX_JSON_DEPTH
        ),
    );
    let (run, shown, remaining) = replay_time_call(None, Some(recorded.clone()), 32 * 1024).await;
    assert_eq!(run.result.failure(), Some(&recorded), "{shown}");
    assert!(!shown.contains("cogni_replay_failed_after"), "{shown}");
    assert_eq!(remaining, 0);
}

/// A recorded result passes through today's redaction of its tool: a field the tool's
/// allowlist lets through no more (or one a damaged or hand-edited data folder put in the
/// record) is never shown by the replay, which then differs from the recorded result there.
#[tokio::test]
async fn a_recorded_result_is_shown_no_more_than_todays_allowlist_lets_through() {
    let recorded = json!({"unix_ms": 1, "iso8601": "1970-01-01T00:00:00.001Z", "token": "s3cret"});
    let (run, shown, remaining) = replay_time_call(Some(recorded), None, 32 * 1024).await;
    let expected = json!({"unix_ms": 1, "iso8601": "1970-01-01T00:00:00.001Z"});
    assert_eq!(
        run.result.outcome,
        ai_core::ToolOutcome::Ok {
            value: Arc::new(expected)
        }
    );
    assert!(!shown.contains("s3cret"), "{shown}");
    assert_eq!(remaining, 0);
}

/// A recorded result that carries the stand-in's key at its top level (a hand-edited or
/// damaged data folder, or a tool with a field of that name) is a result like any other: it
/// passes today's redaction, and is never taken for a recorded failure's stand-in, neither
/// failing again nor skipping the redaction.
#[tokio::test]
async fn a_recorded_result_carrying_the_stand_ins_key_is_redacted_as_a_result() {
    for failure in [
        ai_core::ToolFailure::new(
            ai_core::ToolErrorCode::ResultTooLarge,
            "the tool result is 1 bytes, over the 32768-byte limit",
        ),
        ai_core::ToolFailure::new(
            ai_core::ToolErrorCode::OutputValidation,
            "the tool returned invalid output: unix_ms: not an integer",
        ),
        ai_core::ToolFailure::new(
            ai_core::ToolErrorCode::RedactionFailed,
            "the tool output could not be redacted, so none of it is shown",
        ),
    ] {
        let recorded =
            json!({"$cogni_replay_failed_after": failure, "unix_ms": 1, "token": "s3cret"});
        let (run, shown, remaining) = replay_time_call(Some(recorded), None, 32 * 1024).await;
        assert_eq!(
            run.result.outcome,
            ai_core::ToolOutcome::Ok {
                value: Arc::new(json!({"unix_ms": 1}))
            },
            "{failure:?}"
        );
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(remaining, 0);
    }
}

/// The record of a call `call` of `core__get_current_time` without arguments, one attempt
/// that ended with `result` and `error`.
fn time_record(
    call: &str,
    result: Option<Value>,
    error: Option<ai_core::ToolFailure>,
) -> ai_core::ToolInvocationRecord {
    ai_core::ToolInvocationRecord {
        tool_call_id: ai_core::ToolCallId::new(call).unwrap(),
        tool_id: "core__get_current_time".into(),
        args: Some(Arc::new(json!({}))),
        result: result.map(Arc::new),
        error,
        started_at_ms: 0,
        ended_at_ms: 0,
        attempts: vec![ai_core::Attempt {
            number: 1,
            started_at_ms: 0,
            ended_at_ms: 0,
            error: None,
        }],
        raw: None,
    }
}

/// Replays one call of `core__get_current_time` (call id `c1`, no arguments) from a record
/// of one attempt holding `result` and `error`, under the default settings with a result
/// budget of `max_result_bytes`: the run, the events it emitted as JSON, and how many
/// recorded answers were left.
async fn replay_time_call(
    result: Option<Value>,
    error: Option<ai_core::ToolFailure>,
    max_result_bytes: usize,
) -> (ai_core::ToolRun, String, usize) {
    let runtime = Runtime::build(&Settings::default(), Arc::new(Failing)).unwrap();
    let mut policy = ai_core::ToolPolicy::clone(&runtime.policy);
    policy.budgets.max_result_bytes = max_result_bytes;
    let policy = Arc::new(policy);
    let record = time_record("c1", result, error);
    let source = Arc::new(RecordedToolSource::new(
        runtime.source.clone(),
        &[record],
        max_result_bytes,
    ));
    let runner = ai_core::ToolRunner::new(source.clone(), policy.clone(), runtime.clock.clone());
    let ctx = RunContext::new("run-one", "user:cli", "local").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let call = ai_core::ToolCall {
        id: ai_core::ToolCallId::new("c1").unwrap(),
        name: "core__get_current_time".into(),
        arguments: "{}".into(),
    };
    let sink = super::Collect::default();
    let run = runner
        .run_tool(&call, &ctx, &catalog, &sink, &CancellationToken::new())
        .await;
    let shown = serde_json::to_string(&sink.0.into_inner().unwrap()).unwrap();
    (run, shown, source.remaining())
}

/// Two calls of one tool with the same arguments in one turn each get their own recorded
/// answer, whichever ended first when the run was recorded (records are kept in the order
/// the calls ended).
#[tokio::test]
async fn equal_calls_of_one_turn_each_get_their_own_recorded_answer() {
    let runtime = Runtime::build(&Settings::default(), Arc::new(Failing)).unwrap();
    let record = |call: &str, value: Value| time_record(call, Some(value), None);
    // The second call ended first.
    let records = [
        record("c2", json!({"unix_ms": 2})),
        record("c1", json!({"unix_ms": 1})),
    ];
    let budget = runtime.policy.budgets.max_result_bytes;
    let source = Arc::new(RecordedToolSource::new(
        runtime.source.clone(),
        &records,
        budget,
    ));
    // A thread that panicked holding the answers' lock loses none of them: they are still
    // counted (`cogni replay` fails a replay that leaves some unasked) and handed out.
    let poisoned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _held = source.answers.lock().unwrap();
        panic!("a holder panics");
    }));
    assert!(poisoned.is_err() && source.answers.is_poisoned());
    assert_eq!(source.remaining(), 2);
    let runner = ai_core::ToolRunner::new(
        source.clone(),
        runtime.policy.clone(),
        runtime.clock.clone(),
    );
    let ctx = RunContext::new("run-equal", "user:cli", "local").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &runtime.policy, &ctx).unwrap();
    for (call, expected) in [("c1", json!({"unix_ms": 1})), ("c2", json!({"unix_ms": 2}))] {
        let call = ai_core::ToolCall {
            id: ai_core::ToolCallId::new(call).unwrap(),
            name: "core__get_current_time".into(),
            arguments: "{}".into(),
        };
        let run = runner
            .run_tool(
                &call,
                &ctx,
                &catalog,
                &super::Collect::default(),
                &CancellationToken::new(),
            )
            .await;
        assert_eq!(
            run.result.outcome,
            ai_core::ToolOutcome::Ok {
                value: Arc::new(expected)
            },
            "{}",
            call.id.as_str()
        );
    }
    assert_eq!(source.remaining(), 0);
}

/// A run whose call met an open circuit (opened by the tool's failures, as a breaker that
/// carries over between runs in `cogni serve` may be before a run begins) replays with the
/// recorded refusal, its wait in milliseconds and all, from a replay's fresh breaker.
#[tokio::test]
async fn a_call_that_met_an_open_circuit_replays_as_recorded() {
    let source: Arc<dyn ai_core::ToolSource> =
        Arc::new(ai_core::StaticToolSource::new(vec![Arc::new(Broken::new())]).unwrap());
    let policy = ai_core::ToolPolicy::from_toml_str(
        "allowed_tools = [\"core__broken\"]\n[breaker]\nfailure_threshold = 1",
    )
    .unwrap();
    let policy = Arc::new(policy);
    let clock = Runtime::build(&Settings::default(), Arc::new(Failing))
        .unwrap()
        .clock;
    let ctx = RunContext::new("run-open", "user:cli", "local").unwrap();
    let call = |id: &str| ai_core::ToolCall {
        id: ai_core::ToolCallId::new(id).unwrap(),
        name: "core__broken".into(),
        arguments: "{}".into(),
    };
    let calls = [call("c1"), call("c2")];
    // Recorded: the first call fails, which opens the circuit for the second.
    let runner = ai_core::ToolRunner::new(source.clone(), policy.clone(), clock.clone());
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let mut recorded = Vec::new();
    for call in &calls {
        let sink = super::Collect::default();
        let run = runner
            .run_tool(call, &ctx, &catalog, &sink, &CancellationToken::new())
            .await;
        recorded.push((run, sink.0.into_inner().unwrap()));
    }
    let refusal = recorded[1].0.result.failure().unwrap();
    assert_eq!(refusal.code, ai_core::ToolErrorCode::CircuitOpen);

    // Replayed after the wait has moved on, by a new runner whose breaker never saw the
    // first call's failure: the same outcomes and events, call by call.
    tokio::time::pause();
    tokio::time::advance(std::time::Duration::from_millis(1_234)).await;
    let records: Vec<_> = recorded.iter().map(|(run, _)| run.record.clone()).collect();
    let budget = policy.budgets.max_result_bytes;
    let source = Arc::new(RecordedToolSource::new(source, &records, budget));
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let replayer = ai_core::ToolRunner::new(source.clone(), policy, clock);
    for (call, (run, events)) in calls.iter().zip(&recorded) {
        let sink = super::Collect::default();
        let replayed = replayer
            .run_tool(call, &ctx, &catalog, &sink, &CancellationToken::new())
            .await;
        assert_eq!(replayed.result, run.result, "{}", call.id.as_str());
        assert_eq!(
            &sink.0.into_inner().unwrap(),
            events,
            "{}",
            call.id.as_str()
        );
    }
    assert_eq!(source.remaining(), 0);
}

/// `core__broken`: a read-only tool taking no arguments whose every call fails.
struct Broken(ai_core::ToolSpec);

impl Broken {
    fn new() -> Self {
        Self(ai_core::ToolSpec {
            id: ai_core::ToolId::parse("core__broken").unwrap(),
            description: "A tool that always fails.".into(),
            input_schema: json!({"type": "object", "properties": {}}),
            effect: ai_core::ToolEffect::ReadOnly,
            redaction: ai_core::Redaction { allow: vec![] },
        })
    }
}

#[async_trait]
impl ai_core::BoundTool for Broken {
    fn spec(&self) -> &ai_core::ToolSpec {
        &self.0
    }

    fn validate_input(&self, args: Value) -> Result<Value, ai_core::ToolError> {
        Ok(args)
    }

    async fn exec(
        &self,
        _: ai_core::ExecPermit,
        _: Arc<Value>,
        _: &ai_core::ToolInvocationContext,
        _: &ai_core::Capabilities,
    ) -> Result<Value, ai_core::ToolError> {
        Err(ai_core::ToolError::permanent("the tool is broken"))
    }

    fn validate_output(&self, _: &Value) -> Result<(), ai_core::ToolError> {
        Ok(())
    }

    fn redact(&self, output: Value) -> Result<Value, ai_core::ToolError> {
        Ok(output)
    }
}

/// A model endpoint that answers every call with a provider error.
struct Failing;

#[async_trait]
impl CompletionPort for Failing {
    async fn complete(
        &self,
        _: &LlmRequest,
        _: &mut dyn DeltaSink,
        _: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        Err(CompletionError::Provider("upstream answered 500".into()))
    }
}

/// A model that asks for two workspace listings in one turn, then answers "done".
struct TwoListings(std::sync::atomic::AtomicUsize);

#[async_trait]
impl CompletionPort for TwoListings {
    async fn complete(
        &self,
        _: &LlmRequest,
        _: &mut dyn DeltaSink,
        _: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        let call = |id: &str, arguments: &str| ai_core::LlmToolCall {
            id: ai_core::ToolCallId::new(id).unwrap(),
            name: "core__workspace_list".into(),
            arguments: arguments.into(),
            complete: true,
            provider_fields: Default::default(),
        };
        let first = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        Ok(LlmCompletion {
            text: if first { String::new() } else { "done".into() },
            tool_calls: if first {
                vec![call("c1", "{}"), call("c2", r#"{"path":"sub"}"#)]
            } else {
                Vec::new()
            },
            finish_reason: if first {
                ai_core::FinishReason::ToolCalls
            } else {
                ai_core::FinishReason::Stop
            },
            usage: None,
        })
    }
}

/// Tools that ran at once in the recorded run are replayed as they ran: their events come
/// out in the recorded order, not in the order instant recorded answers would give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_tools_ran_at_once_replays_identically() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::create_dir(workspace.path().join("sub")).unwrap();
    std::fs::write(workspace.path().join("sub/a.txt"), "a").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings {
        data_dir: Some(dir.path().to_path_buf()),
        ..Settings::default()
    };
    settings.tools.workspace = workspace.path().to_path_buf();
    let stores = crate::create_stores(&settings).unwrap();
    let model = crate::record_completion(
        Arc::new(TwoListings(Default::default())),
        &stores,
        &settings.llm,
    );
    let runtime = Runtime::build(&settings, model).unwrap();
    let ctx = RunContext::new("run-par", "user:cli", "local").unwrap();
    let catalog = ToolCatalog::build(runtime.source.as_ref(), &runtime.policy, &ctx).unwrap();
    let request = RunRequest {
        thread: ThreadId::new("t").unwrap(),
        state: runtime.agent.new_state(),
        saved_state: None,
        turn: crate::Turn::UserMessage("hello".into()),
        ctx,
        catalog,
        cancel: CancellationToken::new(),
    };
    let mut events = crate::start_run(&runtime, &stores, request, || {})
        .await
        .unwrap();
    let mut shown = Vec::new();
    while let Some(event) = events.recv().await {
        shown.push(event);
    }
    let outcome = replay_run(&settings, "run-par").await.unwrap();
    assert_eq!(outcome.recorded, shown);
    assert_eq!(outcome.first_difference(), None);
}

/// A model call that streams "hi", says it has, and never answers.
struct Hanging(Arc<tokio::sync::Notify>);

#[async_trait]
impl CompletionPort for Hanging {
    async fn complete(
        &self,
        _: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        _: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        deltas.delta(ai_core::CompletionDelta::Text { delta: "hi".into() });
        self.0.notify_one();
        std::future::pending().await
    }
}

/// Records run `run_id` in a new data folder with `model` (wrapped to write receipts), with
/// `cancel` as its token, and returns the folder, its settings and the events shown.
async fn record(
    model: Arc<dyn CompletionPort>,
    run_id: &str,
    cancel: CancellationToken,
    started: impl std::future::Future<Output = ()>,
) -> (tempfile::TempDir, Settings, Vec<AiEvent>) {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        data_dir: Some(dir.path().to_path_buf()),
        ..Settings::default()
    };
    let stores = crate::create_stores(&settings).unwrap();
    let model = crate::record_completion(model, &stores, &settings.llm);
    let runtime = Runtime::build(&settings, model).unwrap();
    let ctx = RunContext::new(run_id, "user:cli", "local").unwrap();
    let catalog = ToolCatalog::build(runtime.source.as_ref(), &runtime.policy, &ctx).unwrap();
    let request = RunRequest {
        thread: ThreadId::new("t").unwrap(),
        state: runtime.agent.new_state(),
        saved_state: None,
        turn: crate::Turn::UserMessage("hello".into()),
        ctx,
        catalog,
        cancel,
    };
    let mut events = crate::start_run(&runtime, &stores, request, || {})
        .await
        .unwrap();
    started.await;
    let mut shown = Vec::new();
    while let Some(event) = events.recv().await {
        shown.push(event);
    }
    (dir, settings, shown)
}

#[tokio::test]
async fn a_run_that_ended_with_a_model_failure_is_refused_naming_the_step() {
    let (_dir, settings, shown) = record(
        Arc::new(Failing),
        "run-fail",
        CancellationToken::new(),
        async {},
    )
    .await;
    assert!(
        matches!(
            shown.last(),
            Some(AiEvent::Done {
                reason: DoneReason::Error
            })
        ),
        "{shown:?}"
    );
    let error = replay_run(&settings, "run-fail").await.unwrap_err();
    let error = format!("{error:#}");
    assert!(
        error.contains("run run-fail ended with a model failure at step 1")
            && error.contains("replay needs every model call recorded"),
        "{error}"
    );
}

#[tokio::test]
async fn a_cancelled_run_is_refused_saying_so() {
    let entered = Arc::new(tokio::sync::Notify::new());
    let cancel = CancellationToken::new();
    let started = {
        let (entered, cancel) = (entered.clone(), cancel.clone());
        async move {
            entered.notified().await;
            cancel.cancel();
        }
    };
    let model = Arc::new(Hanging(entered));
    let (_dir, settings, shown) = record(model, "run-cancel", cancel, started).await;
    assert!(
        matches!(
            shown.last(),
            Some(AiEvent::Done {
                reason: DoneReason::Cancelled
            })
        ),
        "{shown:?}"
    );
    let error = format!(
        "{:#}",
        replay_run(&settings, "run-cancel").await.unwrap_err()
    );
    assert!(error.contains("run run-cancel was cancelled"), "{error}");
}

/// Every blob a receipt names is checked before the replay runs, not only those it answers
/// from: a missing tool set, tool call or output items blob is an error naming the call,
/// what is missing and its address, rather than a replay found identical.
#[tokio::test]
async fn a_receipts_missing_blob_is_refused_naming_it_whichever_it_is() {
    let model = Arc::new(TwoListings(Default::default()));
    let (dir, settings, _) = record(model, "run-blobs", CancellationToken::new(), async {}).await;
    replay_run(&settings, "run-blobs").await.unwrap();
    let log = super::open_run_log(dir.path()).unwrap();
    let run = super::load_run(&log, "run-blobs").await.unwrap();
    let receipt = ai_core::ModelReceipt::load(log.blobs.as_ref(), &run.receipt_refs[0])
        .await
        .unwrap();
    assert_eq!(receipt.tool_call_refs.len(), 2);
    let db = rusqlite::Connection::open(dir.path().join("cogni.db")).unwrap();
    for (blob, what) in [
        (&receipt.tools_ref, "model call 1's tool set"),
        (
            &receipt.tool_call_refs[1],
            "model call 1's tool call 2 of 2",
        ),
        (&receipt.output_items_ref, "model call 1's output items"),
    ] {
        let bytes: Vec<u8> = db
            .query_row("SELECT bytes FROM blobs WHERE hash = ?1", [blob], |r| {
                r.get(0)
            })
            .unwrap();
        db.execute("DELETE FROM blobs WHERE hash = ?1", [blob])
            .unwrap();
        let error = format!(
            "{:#}",
            replay_run(&settings, "run-blobs").await.unwrap_err()
        );
        assert!(
            error.contains(what) && error.contains(&format!("blob {blob} not found")),
            "{what}: {error}"
        );
        db.execute(
            "INSERT INTO blobs (hash, bytes) VALUES (?1, ?2)",
            rusqlite::params![blob, bytes],
        )
        .unwrap();
    }
    replay_run(&settings, "run-blobs").await.unwrap();
}

/// A run whose last receipt rows are gone (deleted by hand, or lost with a damaged log) is
/// refused as a recording that is incomplete, saying how many of its model calls have one:
/// it is not said to have ended with a model failure, which it did not. One whose receipt
/// numbers skip one is refused as it is loaded, naming the missing receipt.
#[tokio::test]
async fn a_run_whose_receipts_are_missing_is_refused_as_incomplete() {
    let model = Arc::new(TwoListings(Default::default()));
    let (dir, settings, _) = record(model, "run-gone", CancellationToken::new(), async {}).await;
    let db = rusqlite::Connection::open(dir.path().join("cogni.db")).unwrap();
    let rows: Vec<(i64, String)> = db
        .prepare("SELECT idx, receipt_ref FROM model_receipts WHERE run_id = 'run-gone'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), 2);
    let incomplete = |kept| {
        format!(
            "run run-gone's recording is incomplete: receipts are stored for {kept} of its 2 \
             model calls"
        )
    };
    let damaged = "run run-gone: the run log is damaged: its model receipt 0 is missing";
    for (gone, said) in [
        ("idx = 1", incomplete(1)),
        ("idx = 0", damaged.to_owned()),
        ("1 = 1", incomplete(0)),
    ] {
        db.execute(&format!("DELETE FROM model_receipts WHERE {gone}"), [])
            .unwrap();
        let error = format!("{:#}", replay_run(&settings, "run-gone").await.unwrap_err());
        assert!(
            error.contains(&said) && !error.contains("model failure"),
            "{gone}: {error}"
        );
        for (idx, receipt) in &rows {
            db.execute(
                "INSERT OR IGNORE INTO model_receipts (run_id, idx, receipt_ref) \
                 VALUES ('run-gone', ?1, ?2)",
                rusqlite::params![idx, receipt],
            )
            .unwrap();
        }
    }
    replay_run(&settings, "run-gone").await.unwrap();
}

/// A run that ended in error (its log failed, its thread changed) after its last model call
/// answered, which that call's usage or a tool call it asked for shows, did not end with a
/// model failure: a receipt missing for that call is an incomplete recording. One whose last
/// call shows only what it streamed before the error may have failed.
#[test]
fn a_missing_receipt_of_a_call_that_answered_is_no_model_failure() {
    let run = |answer: Option<AiEvent>| ai_core::RunLog {
        header: ai_core::RunHeader {
            run_id: ai_core::RunId::new("run-x").unwrap(),
            thread_id: None,
            status: ai_core::RunStatus::Finished,
            started_at_ms: 0,
            finished_at_ms: Some(1),
            input_ref: None,
        },
        events: [AiEvent::StepStarted { step: 1 }, text("partial")]
            .into_iter()
            .chain(answer)
            .chain([
                AiEvent::Error {
                    message: "the run log failed".into(),
                },
                AiEvent::Done {
                    reason: DoneReason::Error,
                },
            ])
            .collect(),
        records: Vec::new(),
        receipt_refs: Vec::new(),
    };
    let usage =
        serde_json::from_value(json!({"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}))
            .unwrap();
    let start = AiEvent::ToolCallStart {
        tool_call_id: ai_core::ToolCallId::new("c1").unwrap(),
        tool_name: "t".into(),
        args: Some(Arc::new(json!({}))),
    };
    for answer in [AiEvent::Usage { usage }, start] {
        let error = super::check_replayable(&run(Some(answer.clone())))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "run run-x's recording is incomplete: receipts are stored for 0 of \
                 its 1 model calls"
            ),
            "{answer:?}: {error}"
        );
    }
    let error = super::check_replayable(&run(None)).unwrap_err().to_string();
    assert!(
        error.contains("run run-x ended with a model failure at step 1"),
        "{error}"
    );
}

/// A recorded tool this build does not have is named when its id is a tool id; anything
/// else in its place (a hand-edited input's megabyte, an escape sequence) is not shown.
#[test]
fn a_recorded_tool_is_named_only_when_its_id_is_a_tool_id() {
    let refused = |id: &str| {
        super::recorded_tools("run-x", &[id.to_owned()])
            .unwrap_err()
            .to_string()
    };
    let error = refused("core__gone");
    assert!(
        error.contains("run run-x was recorded with the tool core__gone, which"),
        "{error}"
    );
    for hostile in ["x".repeat(1 << 20), "core__a\u{1b}[2J".to_owned()] {
        let error = refused(&hostile);
        assert!(
            error.len() < 400
                && !error.contains('\u{1b}')
                && error.contains("run run-x was recorded with a tool whose id is not a tool"),
            "{error:.300}"
        );
    }
}

/// A damaged or hand-edited run log may hold a megabyte where a receipt's or the run's
/// input's address should be (SQLite keeps it when its checks are off): the replay's error
/// names it shortened, never whole.
#[tokio::test]
async fn a_hostile_input_or_receipt_address_is_named_shortened() {
    let model = Arc::new(TwoListings(Default::default()));
    let (dir, settings, _) = record(model, "run-huge", CancellationToken::new(), async {}).await;
    let db = rusqlite::Connection::open(dir.path().join("cogni.db")).unwrap();
    db.execute_batch("PRAGMA ignore_check_constraints = ON")
        .unwrap();
    let huge = "f".repeat(1 << 20);
    // The input is read first: the receipt is edited first, then the input.
    for (edit, what) in [
        (
            "UPDATE model_receipts SET receipt_ref = ?1 WHERE idx = 0",
            "model call 1's receipt",
        ),
        ("UPDATE runs SET input_ref = ?1", "its input"),
    ] {
        db.execute(edit, [&huge]).unwrap();
        let error = format!("{:#}", replay_run(&settings, "run-huge").await.unwrap_err());
        assert!(
            error.contains(what) && error.len() < 1000 && error.contains('…'),
            "{error:.300}"
        );
    }
}

/// A run closed because its thread changed is compared with the replay closed by the same
/// rule: over the replay's own ending, which its error names, so a replay that ends
/// otherwise differs there.
#[test]
fn a_run_closed_because_its_thread_changed_is_compared_with_its_own_ending() {
    let ended = |reason| vec![text("a"), AiEvent::Done { reason }];
    let mut recorded = ended(DoneReason::Stop);
    crate::record::ended_as_changed(&mut recorded);
    let mut replayed = ended(DoneReason::Stop);
    close_as_recorded(&recorded, &mut replayed);
    assert_eq!(replayed, recorded);

    let mut replayed = ended(DoneReason::MaxSteps);
    close_as_recorded(&recorded, &mut replayed);
    let outcome = ReplayOutcome {
        recorded,
        replayed,
        recorded_revision: Some(graph::LOOP_REVISION),
        settings_note: None,
        unasked_calls: 0,
    };
    let difference = outcome.first_difference().unwrap();
    assert_eq!(difference.index, 1);
    assert!(
        difference.replayed["message"]
            .as_str()
            .unwrap()
            .ends_with(r#"the run itself ended "max_steps""#),
        "{difference:?}"
    );
}

/// A run closed because its thread changed, recorded before its error named how the run
/// ended, is compared up to that closing, which the replay takes as recorded.
#[test]
fn a_run_closed_because_its_thread_changed_is_compared_with_the_same_closing() {
    let closing = [
        AiEvent::Error {
            message: format!(
                "{}: another run stored a turn",
                crate::record::THREAD_CHANGED
            ),
        },
        AiEvent::Done {
            reason: DoneReason::Error,
        },
    ];
    let recorded: Vec<AiEvent> = std::iter::once(text("a")).chain(closing).collect();
    let mut replayed = vec![
        text("a"),
        AiEvent::Done {
            reason: DoneReason::Stop,
        },
    ];
    close_as_recorded(&recorded, &mut replayed);
    assert_eq!(replayed, recorded);

    // Any other run is compared as it is.
    let other = vec![
        text("a"),
        AiEvent::Error {
            message: "provider error".into(),
        },
        AiEvent::Done {
            reason: DoneReason::Error,
        },
    ];
    let mut replayed = vec![
        text("a"),
        AiEvent::Done {
            reason: DoneReason::Stop,
        },
    ];
    let before = replayed.clone();
    close_as_recorded(&other, &mut replayed);
    assert_eq!(replayed, before);
}

fn text(delta: &str) -> AiEvent {
    AiEvent::TextDelta {
        delta: delta.into(),
    }
}

#[test]
fn the_first_difference_is_named_including_a_missing_tail() {
    let done = AiEvent::Done {
        reason: DoneReason::Stop,
    };
    let same = ReplayOutcome {
        recorded: vec![text("a"), done.clone()],
        replayed: vec![text("a"), done.clone()],
        recorded_revision: Some(graph::LOOP_REVISION),
        settings_note: None,
        unasked_calls: 0,
    };
    assert_eq!(same.first_difference(), None);

    let changed = ReplayOutcome {
        recorded: vec![text("a"), text("b"), done.clone()],
        replayed: vec![text("a"), text("c"), done.clone()],
        recorded_revision: Some(graph::LOOP_REVISION),
        settings_note: None,
        unasked_calls: 0,
    };
    let difference = changed.first_difference().unwrap();
    assert_eq!(difference.index, 1);
    assert_eq!(
        difference.recorded,
        json!({"type": "text_delta", "delta": "b"})
    );
    assert_eq!(
        difference.replayed,
        json!({"type": "text_delta", "delta": "c"})
    );

    let short = ReplayOutcome {
        recorded: vec![text("a"), done],
        replayed: vec![text("a")],
        recorded_revision: Some(graph::LOOP_REVISION),
        settings_note: None,
        unasked_calls: 0,
    };
    let difference = short.first_difference().unwrap();
    assert_eq!(difference.index, 1);
    assert_eq!(difference.replayed, Value::Null);
}

/// Calls that ran at once are compared call by call: their events may interleave in another
/// order than recorded, but a call's own events, the order the calls started in and every
/// other event are compared as they are, and a difference is named by its recorded index.
#[test]
fn calls_that_ran_at_once_are_compared_call_by_call() {
    let id = |id: &str| ai_core::ToolCallId::new(id).unwrap();
    let start = |call: &str| AiEvent::ToolCallStart {
        tool_call_id: id(call),
        tool_name: "t".into(),
        args: Some(Arc::new(json!({}))),
    };
    let result = |call: &str, value: Value| AiEvent::ToolCallResult {
        tool_call_id: id(call),
        tool_name: "t".into(),
        outcome: ai_core::ToolOutcome::Ok {
            value: Arc::new(value),
        },
    };
    let done = AiEvent::Done {
        reason: DoneReason::Stop,
    };
    let outcome = |recorded: Vec<AiEvent>, replayed: Vec<AiEvent>| ReplayOutcome {
        recorded,
        replayed,
        recorded_revision: Some(graph::LOOP_REVISION),
        settings_note: None,
        unasked_calls: 0,
    };
    let recorded = vec![
        text("a"),
        start("c1"),
        start("c2"),
        result("c2", json!(2)),
        result("c1", json!(1)),
        text("b"),
        done.clone(),
    ];
    let interleaved = vec![
        text("a"),
        start("c1"),
        result("c1", json!(1)),
        start("c2"),
        result("c2", json!(2)),
        text("b"),
        done.clone(),
    ];
    assert_eq!(
        outcome(recorded.clone(), interleaved.clone()).first_difference(),
        None
    );

    // A call that waits for approval while another one's IO runs.
    let approval = AiEvent::ApprovalRequired {
        tool_call_id: id("c3"),
        tool_id: ai_core::ToolId::parse("core__t").unwrap(),
        args: Arc::new(json!({})),
        args_hash: "h".into(),
    };
    let waited = vec![
        start("c2"),
        approval.clone(),
        result("c2", json!(2)),
        done.clone(),
    ];
    let at_once = vec![start("c2"), result("c2", json!(2)), approval, done.clone()];
    assert_eq!(outcome(waited, at_once).first_difference(), None);

    // A call's result that differs is named at its recorded index.
    let mut other_result = interleaved.clone();
    other_result[2] = result("c1", json!(9));
    let difference = outcome(recorded.clone(), other_result)
        .first_difference()
        .unwrap();
    assert_eq!(difference.index, 4);
    assert_eq!(difference.replayed["outcome"]["value"], json!(9));

    // Calls started in another order differ.
    let swapped = vec![
        text("a"),
        start("c2"),
        result("c2", json!(2)),
        start("c1"),
        result("c1", json!(1)),
        text("b"),
        done.clone(),
    ];
    assert_eq!(
        outcome(recorded.clone(), swapped)
            .first_difference()
            .unwrap()
            .index,
        1
    );

    // A call's events out of their own order differ, and so does an event outside the
    // calls that moved among them.
    let result_first = vec![
        text("a"),
        result("c1", json!(1)),
        start("c1"),
        start("c2"),
        result("c2", json!(2)),
        text("b"),
        done.clone(),
    ];
    assert!(
        outcome(recorded.clone(), result_first)
            .first_difference()
            .is_some()
    );
    let text_moved = vec![
        text("a"),
        start("c1"),
        text("b"),
        start("c2"),
        result("c2", json!(2)),
        result("c1", json!(1)),
        done.clone(),
    ];
    assert!(outcome(recorded, text_moved).first_difference().is_some());

    // A retry is one of its call's events; the model's stream of its calls is compared in
    // place, in the order the model sent it.
    let retrying = |call: &str| AiEvent::ToolCallRetrying {
        tool_call_id: id(call),
        attempt: 2,
        max_attempts: 3,
        retry_in_ms: 10,
        category: ai_core::ToolErrorCategory::Transient,
    };
    let streamed = |call: &str| AiEvent::ToolCallStreamStart {
        tool_call_id: id(call),
        tool_name: "t".into(),
    };
    let recorded = vec![
        streamed("c1"),
        streamed("c2"),
        start("c1"),
        start("c2"),
        retrying("c1"),
        result("c2", json!(2)),
        result("c1", json!(1)),
        done.clone(),
    ];
    let retried_first = vec![
        streamed("c1"),
        streamed("c2"),
        start("c1"),
        retrying("c1"),
        result("c1", json!(1)),
        start("c2"),
        result("c2", json!(2)),
        done.clone(),
    ];
    assert_eq!(
        outcome(recorded.clone(), retried_first).first_difference(),
        None
    );
    let streamed_otherwise = vec![
        streamed("c1"),
        start("c1"),
        streamed("c2"),
        start("c2"),
        retrying("c1"),
        result("c2", json!(2)),
        result("c1", json!(1)),
        done,
    ];
    assert_eq!(
        outcome(recorded, streamed_otherwise)
            .first_difference()
            .unwrap()
            .index,
        1
    );
}

/// A run recorded under another loop revision, or before revisions were kept, is said to be
/// so, with this build's revision; one recorded under this build's revision is not.
#[test]
fn a_run_recorded_under_another_loop_revision_is_told() {
    let outcome = |recorded_revision| ReplayOutcome {
        recorded: Vec::new(),
        replayed: Vec::new(),
        recorded_revision,
        settings_note: None,
        unasked_calls: 0,
    };
    assert_eq!(outcome(Some(graph::LOOP_REVISION)).revision_note(), None);
    let now = graph::LOOP_REVISION;
    let older = outcome(Some(now - 1)).revision_note().unwrap();
    assert!(
        older.contains(&format!("under loop revision {}", now - 1))
            && older.contains(&format!("revision {now}:")),
        "{older}"
    );
    let unknown = outcome(None).revision_note().unwrap();
    assert!(
        unknown.contains("before loop revisions were kept"),
        "{unknown}"
    );
}

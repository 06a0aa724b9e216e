//! The secret canary: a capability holds a secret; tools that use it succeed and fail; every
//! event, record, result, error and tracing line is serialized and searched for the secret.

use std::io::Write;
use std::sync::{Arc, Mutex};

use std::time::Duration;

use ai_core::{
    AiEvent, BoundTool, CancellationToken, RetryPolicy, RunContext, RunnerConfig, ToolCall,
    ToolCallId, ToolEffect, ToolErrorCode, ToolOutcome,
};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::FmtSpan;

use crate::support::{Behaviour, CANARY, CanaryBroker, FakeTool, Harness, allow};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

fn granted_ctx() -> RunContext {
    let mut ctx = RunContext::new("run-1", "user:alice", "tenant-1").unwrap();
    let c1 = ai_core::ConnectionId::new("c1").unwrap();
    ctx.grant.allowed_connection_ids.insert(c1.clone());
    ctx.requested_connection_ids.insert(c1.clone());
    ctx.connection_id = Some(c1);
    ctx
}

#[tokio::test]
async fn the_secret_never_leaves_the_capability() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(FmtSpan::FULL)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let tools: Vec<Arc<dyn BoundTool>> = vec![
        Arc::new(
            FakeTool::new("core__use_token", ToolEffect::ReadOnly, Behaviour::UseToken)
                .needing_connection(),
        ),
        Arc::new(
            FakeTool::new("core__fail", ToolEffect::ReadOnly, Behaviour::Fail).needing_connection(),
        ),
        Arc::new(
            FakeTool::new("core__panic", ToolEffect::ReadOnly, Behaviour::Panic)
                .needing_connection(),
        ),
    ];
    let mut h = Harness::with_ctx(
        tools,
        allow(&["core__use_token", "core__fail", "core__panic"]),
        granted_ctx(),
    );
    h.runner = h
        .runner
        .clone()
        .with_broker(Arc::new(CanaryBroker::default()))
        .with_config(RunnerConfig::default().with_trace_redacted_results(true));

    let calls = [
        ("core__use_token", "{}"),
        ("core__fail", "{}"),
        ("core__panic", "{}"),
        ("core__use_token", "{not json"),
        ("core__missing", "{}"),
    ];
    let mut everything = String::new();
    for (i, (name, args)) in calls.into_iter().enumerate() {
        let call = ToolCall {
            id: ToolCallId::new(format!("call_{i}")).unwrap(),
            name: name.into(),
            arguments: args.into(),
        };
        let run = h
            .runner
            .run_tool(
                &call,
                &h.ctx,
                &h.catalog,
                &h.events,
                &CancellationToken::new(),
            )
            .await;
        everything += &serde_json::to_string(&run.result).unwrap();
        everything += &serde_json::to_string(&run.record).unwrap();
        everything += &format!("{run:?}");
        everything += &run.result.model_content();
    }
    let events: Vec<AiEvent> = h.events.events();
    assert_eq!(events.len(), 2 * calls.len());
    everything += &serde_json::to_string(&events).unwrap();
    everything += &format!("{events:?}{:?}{:?}", h.ctx, h.runner);
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();

    // The check can fail: the logs and events really were produced.
    assert!(logs.contains("gen_ai.tool.name"), "{logs}");
    assert!(logs.contains("gen_ai.tool.call.result"), "{logs}");
    assert!(everything.contains("c1"));
    assert!(
        !everything.contains(CANARY),
        "secret leaked into results or events"
    );
    assert!(!logs.contains(CANARY), "secret leaked into tracing output");
    assert!(!format!("{:?}", ai_core::Secret::new(CANARY)).contains(CANARY));
}

/// The paths added since the first canary: a retried attempt (`ToolCallRetrying`), a call that
/// waits for an approval (`ApprovalRequired`) and then runs with it, a timeout, a cancellation
/// and an open circuit, each of a tool that holds the secret when it fails or pauses. No event,
/// record, result or tracing line holds it.
#[tokio::test(start_paused = true)]
async fn the_secret_never_leaves_on_retries_approvals_timeouts_cancels_and_open_circuits() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(FmtSpan::FULL)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let holding = |id: &str, effect, behaviour| -> Arc<dyn BoundTool> {
        Arc::new(FakeTool::new(id, effect, behaviour).reading_the_token())
    };
    let tools = vec![
        holding("core__flaky", ToolEffect::ReadOnly, Behaviour::Flaky(1)),
        holding(
            "core__slow",
            ToolEffect::ReadOnly,
            Behaviour::Sleep(Duration::from_secs(5)),
        ),
        holding("core__fail", ToolEffect::ReadOnly, Behaviour::Fail),
        holding("core__approve", ToolEffect::StateChange, Behaviour::Echo),
    ];
    let mut policy = allow(&["core__flaky", "core__slow", "core__fail", "core__approve"]);
    policy.budgets.max_runtime_ms = 1_000;
    policy.retry = RetryPolicy {
        base_delay_ms: 10,
        jitter: false,
        ..RetryPolicy::default()
    };
    policy.breaker.failure_threshold = 2;
    policy
        .require_approval_for_effects
        .insert(ToolEffect::StateChange);
    let mut h = Harness::with_ctx(tools, policy, granted_ctx());
    h.runner = h
        .runner
        .clone()
        .with_broker(Arc::new(CanaryBroker::default()))
        .with_config(RunnerConfig::default().with_trace_redacted_results(true));

    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let calls = [
        ("core__flaky", false),
        ("core__slow", false),
        ("core__slow", true),
        ("core__fail", false),
        ("core__fail", false),
        ("core__fail", false),
        ("core__approve", false),
        ("core__approve", false),
    ];
    let mut everything = String::new();
    let mut outcomes = Vec::new();
    for (i, (name, cancel)) in calls.into_iter().enumerate() {
        let call = ToolCall {
            id: ToolCallId::new(format!("call_{i}")).unwrap(),
            name: name.into(),
            arguments: r#"{"text":"hi"}"#.into(),
        };
        let cancel = if cancel { &cancelled } else { &h.cancel };
        let run = h
            .runner
            .run_tool(&call, &h.ctx, &h.catalog, &h.events, cancel)
            .await;
        if let ToolOutcome::ApprovalRequired { args_hash } = &run.result.outcome {
            // The approval is for the next call of the same tool with the same arguments.
            let next = ToolCallId::new(format!("call_{}", i + 1)).unwrap();
            h.ctx.approvals.insert(next, args_hash.clone());
        }
        outcomes.push(match &run.result.outcome {
            ToolOutcome::Ok { .. } => "ok",
            ToolOutcome::Error(failure) => failure.code.as_str(),
            ToolOutcome::ApprovalRequired { .. } => "approval_required",
            other => panic!("an outcome this test does not know: {other:?}"),
        });
        everything += &serde_json::to_string(&run.result).unwrap();
        everything += &serde_json::to_string(&run.record).unwrap();
        everything += &format!("{run:?}");
        everything += &run.result.model_content();
    }
    let events: Vec<AiEvent> = h.events.events();
    everything += &serde_json::to_string(&events).unwrap();
    everything += &format!("{events:?}{:?}{:?}{:?}", h.ctx, h.runner, h.runner.stats());
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();

    // The check can fail: every path ran, and the tools held the secret on it.
    assert_eq!(
        outcomes,
        [
            "ok",
            ToolErrorCode::Timeout.as_str(),
            ToolErrorCode::Cancelled.as_str(),
            "execution",
            "execution",
            ToolErrorCode::CircuitOpen.as_str(),
            "approval_required",
            "ok",
        ]
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AiEvent::ToolCallRetrying { .. }))
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AiEvent::ApprovalRequired { .. }))
    );
    assert!(logs.contains("gen_ai.tool.call.result"), "{logs}");
    assert!(
        !everything.contains(CANARY),
        "secret leaked into results, records or events"
    );
    assert!(!logs.contains(CANARY), "secret leaked into tracing output");
}

#[tokio::test]
async fn spans_carry_genai_names_and_outcome_but_no_arguments() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(FmtSpan::CLOSE)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let echo: Arc<dyn BoundTool> = Arc::new(FakeTool::new(
        "core__echo",
        ToolEffect::ReadOnly,
        Behaviour::Echo,
    ));
    let h = Harness::new(vec![echo], allow(&["core__echo"]));
    let run = h.call("core__echo", r#"{"text":"ARGUMENT-CANARY"}"#).await;
    assert!(run.result.failure().is_none());
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    for field in [
        "gen_ai.tool.name=core__echo",
        "gen_ai.tool.call.id=call_1",
        "gen_ai.operation.name=\"execute_tool\"",
        "outcome=\"ok\"",
        "duration_ms=",
    ] {
        assert!(logs.contains(field), "{field} missing in {logs}");
    }
    // Off by default: neither arguments nor results are recorded.
    assert!(!logs.contains("ARGUMENT-CANARY"), "{logs}");
    assert!(!logs.contains("gen_ai.tool.call.result"), "{logs}");
}

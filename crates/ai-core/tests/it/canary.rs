//! The secret canary: a capability holds a secret; tools that use it succeed and fail; every
//! event, record, result, error and tracing line is serialized and searched for the secret.

use std::io::Write;
use std::sync::{Arc, Mutex};

use ai_core::{
    AiEvent, BoundTool, CancellationToken, RunContext, RunnerConfig, ToolCall, ToolCallId,
    ToolEffect,
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

//! `graph`'s thread runs over `adapters`' SQLite store: what the loop's guarantees rest on holds
//! for the durable store, not only for the loop's own in-memory one.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use ai_core::{
    AiEvent, CancellationToken, CompletionError, CompletionPort, DeltaSink, FinishReason,
    LlmCompletion, LlmRequest, LlmToolCall, RunContext, ThreadId, ThreadStore, ThreadStoreError,
    ToolCallId, ToolCatalog, ToolPolicy, ToolRunner,
};
use graph::{Agent, AgentConfig, ApprovalDecision, GraphError};
use serde_json::Value;

use crate::support::core_tools;

/// A model that gives its answers in order, then fails.
struct Scripted(Mutex<VecDeque<LlmCompletion>>);

#[async_trait::async_trait]
impl CompletionPort for Scripted {
    async fn complete(
        &self,
        _: &LlmRequest,
        _: &mut dyn DeltaSink,
        _: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        let next = self.0.lock().unwrap().pop_front();
        next.ok_or_else(|| CompletionError::Transport("no answer left".into()))
    }
}

fn answer(text: &str) -> LlmCompletion {
    LlmCompletion {
        text: text.into(),
        tool_calls: vec![],
        finish_reason: FinishReason::Stop,
        usage: None,
    }
}

/// A store whose loads each wait, once answered, until the barrier's count of them are: runs
/// started at once all read the thread before any of them saves.
struct LoadsTogether<'a> {
    inner: &'a dyn ThreadStore,
    barrier: &'a tokio::sync::Barrier,
}

#[async_trait::async_trait]
impl ThreadStore for LoadsTogether<'_> {
    async fn load(&self, id: &ThreadId) -> Result<Option<Value>, ThreadStoreError> {
        let loaded = self.inner.load(id).await;
        self.barrier.wait().await;
        loaded
    }

    async fn save(
        &self,
        id: &ThreadId,
        previous: Option<&Value>,
        state: &Value,
    ) -> Result<(), ThreadStoreError> {
        self.inner.save(id, previous, state).await
    }
}

/// Two resumes of one pause at once over a SQLite store (two requests sending the same answer),
/// each through a connection of its own as two processes would: both read the pause, but only
/// the first to save past it runs the approved call. The other's save finds the thread changed:
/// it runs nothing and says so.
#[tokio::test]
async fn two_resumes_of_one_pause_at_once_run_the_approved_call_once() {
    let (workspace, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (caps, source) = core_tools(workspace.path());
    let policy = ToolPolicy::from_toml_str(
        r#"
        allowed_tools = ["core__get_current_time"]
        require_approval_for_effects = ["read_only"]
        "#,
    )
    .unwrap();
    let ctx = RunContext::new("run-1", "user:test", "tenant").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let runner = ToolRunner::new(source, Arc::new(policy), caps.clock.clone());
    let call = LlmToolCall {
        id: ToolCallId::new("c1").unwrap(),
        name: "core__get_current_time".into(),
        arguments: "{}".into(),
        complete: true,
        provider_fields: Default::default(),
    };
    let model = Scripted(Mutex::new(VecDeque::from([
        LlmCompletion {
            text: String::new(),
            tool_calls: vec![call],
            finish_reason: FinishReason::ToolCalls,
            usage: None,
        },
        answer("done"),
        answer("done again"),
    ])));
    let agent = Agent::new(Arc::new(model), runner, AgentConfig::default());
    let events = Mutex::new(Vec::new());
    let sink = |e: AiEvent| events.lock().unwrap().push(e);
    let cancel = CancellationToken::new();
    let thread = ThreadId::new("t").unwrap();

    let first = adapters::SqliteStore::open(data.path()).unwrap();
    let go = "go".to_owned();
    (agent.run_thread(&first, &thread, go, &ctx, &catalog, &sink, &cancel))
        .await
        .unwrap();
    let decisions: Vec<ApprovalDecision> = std::mem::take(&mut *events.lock().unwrap())
        .into_iter()
        .filter_map(|e| match e {
            AiEvent::ApprovalRequired {
                tool_call_id,
                args_hash,
                ..
            } => Some(ApprovalDecision {
                tool_call_id,
                approved: true,
                args_hash,
                reason: None,
            }),
            _ => None,
        })
        .collect();
    assert_eq!(decisions.len(), 1);

    let second = adapters::SqliteStore::open(data.path()).unwrap();
    let loads = tokio::sync::Barrier::new(2);
    let resume = |inner: &'static str| {
        let inner: &dyn ThreadStore = if inner == "first" { &first } else { &second };
        let store = LoadsTogether {
            inner,
            barrier: &loads,
        };
        let (decisions, agent, thread) = (decisions.clone(), &agent, &thread);
        let (ctx, catalog, sink, cancel) = (&ctx, &catalog, &sink, &cancel);
        async move { (agent.resume_thread(&store, thread, decisions, ctx, catalog, sink, cancel)).await }
    };
    let (one, other) = tokio::join!(resume("first"), resume("second"));
    let lost = match (one, other) {
        (Ok(_), Err(lost)) | (Err(lost), Ok(_)) => lost,
        other => panic!("one resume runs, the other is refused: {other:?}"),
    };
    assert!(
        matches!(
            &lost,
            GraphError::Store {
                action: "save",
                error: ThreadStoreError::Changed,
                ..
            }
        ),
        "{lost:?}"
    );
    let events = events.into_inner().unwrap();
    let ran = events
        .iter()
        .filter(|e| matches!(e, AiEvent::ToolCallStart { args: Some(_), .. }))
        .count();
    assert_eq!(ran, 1, "the approved call ran once: {events:?}");
}

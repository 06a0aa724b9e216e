//! A scripted model, tools bound through ai-tools, and an event recorder with the run's
//! invariants.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ai_core::{
    AiEvent, CancellationToken, Capabilities, Clock, CompletionDelta, CompletionError,
    CompletionPort, DeltaSink, EventSink, ExecPermit, FinishReason, LlmCompletion, LlmRequest,
    LlmToolCall, Message, RunContext, StaticToolSource, ThreadId, ThreadStore, ToolCallId,
    ToolCatalog, ToolEffect, ToolError, ToolInvocationContext, ToolPolicy, ToolRunner,
    validate_history,
};
use ai_tools::{ToolContract, bind};
use graph::{Agent, AgentConfig, AgentState, GraphError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One scripted model reply.
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    Complete(LlmCompletion),
    /// Answers without a single delta, as a port over a non-streaming API would.
    Unstreamed(LlmCompletion),
    Fail,
    /// Never answers (until cancelled).
    Hang,
    /// Streams exactly these deltas, then answers with the completion, or fails without one.
    Raw(Vec<CompletionDelta>, Option<LlmCompletion>),
}

/// A model that plays replies in order and records every request it got.
#[derive(Default)]
pub(crate) struct ScriptedModel {
    replies: Mutex<VecDeque<Reply>>,
    pub(crate) requests: Mutex<Vec<LlmRequest>>,
}

impl ScriptedModel {
    pub(crate) fn new(replies: Vec<Reply>) -> Self {
        Self {
            replies: Mutex::new(replies.into()),
            requests: Mutex::default(),
        }
    }
}

#[async_trait::async_trait]
impl CompletionPort for ScriptedModel {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        _cancel: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        self.requests.lock().unwrap().push(request.clone());
        let reply = self.replies.lock().unwrap().pop_front();
        match reply {
            Some(Reply::Complete(completion)) => {
                if !completion.text.is_empty() {
                    deltas.delta(CompletionDelta::Text {
                        delta: completion.text.clone(),
                    });
                }
                for (index, call) in completion.tool_calls.iter().enumerate() {
                    deltas.delta(CompletionDelta::ToolCall {
                        index,
                        id: Some(call.id.as_str().into()),
                        name: Some(call.name.clone()),
                        arguments: call.arguments.clone(),
                    });
                }
                Ok(completion)
            }
            Some(Reply::Unstreamed(completion)) => Ok(completion),
            Some(Reply::Fail) | None => Err(CompletionError::Transport(
                "endpoint http://127.0.0.1:9/v1 returned 503".into(),
            )),
            Some(Reply::Hang) => std::future::pending().await,
            Some(Reply::Raw(streamed, completion)) => {
                for delta in streamed {
                    deltas.delta(delta);
                }
                completion.ok_or_else(|| CompletionError::Transport("the stream broke".into()))
            }
        }
    }
}

pub(crate) fn text(t: &str) -> Reply {
    Reply::Complete(LlmCompletion {
        text: t.into(),
        tool_calls: vec![],
        finish_reason: FinishReason::Stop,
        usage: None,
    })
}

pub(crate) fn call(id: &str, name: &str, arguments: &str) -> LlmToolCall {
    LlmToolCall {
        id: ToolCallId::new(id).unwrap(),
        name: name.into(),
        arguments: arguments.into(),
        complete: true,
        provider_fields: Default::default(),
    }
}

pub(crate) fn calls(calls: Vec<LlmToolCall>) -> Reply {
    Reply::Complete(LlmCompletion {
        text: String::new(),
        tool_calls: calls,
        finish_reason: FinishReason::ToolCalls,
        usage: None,
    })
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WaitInput {
    /// Milliseconds to wait (tokio time).
    ms: u64,
    /// Fail instead of answering.
    #[serde(default)]
    fail: bool,
}

#[derive(Serialize, JsonSchema)]
pub(crate) struct WaitOutput {
    waited_ms: u64,
}

/// `core__wait`: waits, then answers or fails.
pub(crate) struct Wait;

#[async_trait::async_trait]
impl ToolContract for Wait {
    type Input = WaitInput;
    type Output = WaitOutput;
    const ID: &'static str = "core__wait";
    const DESCRIPTION: &'static str = "Waits.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["waited_ms"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: WaitInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<WaitOutput, ToolError> {
        tokio::time::sleep(Duration::from_millis(input.ms)).await;
        if input.fail {
            return Err(ToolError::new("the wait failed"));
        }
        Ok(WaitOutput {
            waited_ms: input.ms,
        })
    }
}

/// A clock stuck at zero.
pub(crate) struct ZeroClock;
impl Clock for ZeroClock {
    fn now_ms(&self) -> u64 {
        0
    }
}

/// Everything a run needs.
pub(crate) struct Fixture {
    pub(crate) model: Arc<ScriptedModel>,
    pub(crate) agent: Agent,
    pub(crate) runner: ToolRunner,
    pub(crate) ctx: RunContext,
    pub(crate) catalog: ToolCatalog,
    pub(crate) events: Mutex<Vec<AiEvent>>,
    pub(crate) cancel: CancellationToken,
}

impl Fixture {
    /// A sink that keeps every event and panics ("the app's sink broke") once, on the first
    /// event `hits` picks, after keeping it: an app's sink that breaks. With `cancel_first` it
    /// cancels the run just before it panics. `panicked` says whether it did.
    pub(crate) fn sink_breaking_once<'a>(
        &'a self,
        hits: impl Fn(&AiEvent) -> bool + Send + Sync + 'a,
        cancel_first: bool,
        panicked: &'a std::sync::atomic::AtomicBool,
    ) -> impl Fn(AiEvent) + Send + Sync + 'a {
        move |e: AiEvent| {
            let hit = hits(&e);
            self.events.lock().unwrap().push(e);
            if hit && !panicked.swap(true, std::sync::atomic::Ordering::SeqCst) {
                if cancel_first {
                    self.cancel.cancel();
                }
                panic!("the app's sink broke");
            }
        }
    }

    pub(crate) fn new(replies: Vec<Reply>, config: AgentConfig) -> Self {
        Self::with_policy(replies, config, r#"allowed_tools = ["core__wait"]"#)
    }

    pub(crate) fn with_policy(replies: Vec<Reply>, config: AgentConfig, policy: &str) -> Self {
        let model = Arc::new(ScriptedModel::new(replies));
        let policy = ToolPolicy::from_toml_str(policy).unwrap();
        let source = Arc::new(StaticToolSource::new(vec![bind(Wait).unwrap()]).unwrap());
        let ctx = RunContext::new("run-1", "user:test", "tenant").unwrap();
        let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
        let runner = ToolRunner::new(source, Arc::new(policy), Arc::new(ZeroClock));
        let agent = Agent::new(model.clone(), runner.clone(), config);
        Self {
            model,
            agent,
            runner,
            ctx,
            catalog,
            events: Mutex::default(),
            cancel: CancellationToken::new(),
        }
    }

    pub(crate) async fn run(&self, state: AgentState, message: &str) -> AgentState {
        let sink = |e: AiEvent| self.events.lock().unwrap().push(e);
        self.agent
            .run(
                state,
                message.into(),
                &self.ctx,
                &self.catalog,
                &sink,
                &self.cancel,
            )
            .await
    }

    /// Runs the fixture's agent on thread `thread` of `store`, with `message`, under the
    /// fixture's context, catalog and token, into `sink`.
    pub(crate) async fn run_thread(
        &self,
        store: &dyn ThreadStore,
        thread: &ThreadId,
        message: &str,
        sink: &dyn EventSink,
    ) -> Result<AgentState, GraphError> {
        (self.agent.run_thread(
            store,
            thread,
            message.into(),
            &self.ctx,
            &self.catalog,
            sink,
            &self.cancel,
        ))
        .await
    }

    /// Runs `agent`, one a test built over a model or runner of its own, from a new state on
    /// "go", under the fixture's context, catalog and token, into `sink`.
    pub(crate) async fn run_agent(&self, agent: &Agent, sink: &dyn EventSink) -> AgentState {
        let (ctx, catalog) = (&self.ctx, &self.catalog);
        (agent.run(
            agent.new_state(),
            "go".into(),
            ctx,
            catalog,
            sink,
            &self.cancel,
        ))
        .await
    }

    /// [`Self::run_agent`] into the fixture's own sink, which keeps every event.
    pub(crate) async fn run_kept(&self, agent: &Agent) -> AgentState {
        let sink = |e: AiEvent| self.events.lock().unwrap().push(e);
        self.run_agent(agent, &sink).await
    }

    pub(crate) fn events(&self) -> Vec<AiEvent> {
        self.events.lock().unwrap().clone()
    }
}

/// A sink that keeps the events and, in the order they came, which call each record was for.
#[derive(Default)]
pub(crate) struct RecordingSink {
    pub(crate) events: Mutex<Vec<AiEvent>>,
    pub(crate) records: Mutex<Vec<ai_core::ToolInvocationRecord>>,
    /// Each record's call id, noted when it came, with the events seen before it.
    pub(crate) order: Mutex<Vec<(String, usize)>>,
}

impl EventSink for RecordingSink {
    fn emit(&self, event: AiEvent) {
        self.events.lock().unwrap().push(event);
    }

    fn record(&self, record: &ai_core::ToolInvocationRecord) {
        let seen = self.events.lock().unwrap().len();
        self.order
            .lock()
            .unwrap()
            .push((record.tool_call_id.as_str().to_owned(), seen));
        self.records.lock().unwrap().push(record.clone());
    }
}

/// The run invariants: one Done, last; every start has exactly one result with its id; the
/// saved history is valid.
pub(crate) fn check_invariants(events: &[AiEvent], state: &AgentState) -> Result<(), String> {
    let dones = events
        .iter()
        .filter(|e| matches!(e, AiEvent::Done { .. }))
        .count();
    if dones != 1 || !matches!(events.last(), Some(AiEvent::Done { .. })) {
        return Err(format!("expected exactly one Done, last: {events:?}"));
    }
    let steps: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            AiEvent::StepStarted { step } => Some(*step),
            _ => None,
        })
        .collect();
    if steps.iter().zip(1..).any(|(step, n)| *step != n) {
        return Err(format!("steps are not numbered 1, 2, …: {steps:?}"));
    }
    let mut announced: Vec<&ToolCallId> = Vec::new();
    for event in events {
        match event {
            AiEvent::ToolCallStreamStart { tool_call_id, .. } => {
                if announced.contains(&tool_call_id) {
                    return Err(format!("{tool_call_id} announced twice"));
                }
                announced.push(tool_call_id);
            }
            AiEvent::ToolCallArgsDelta { tool_call_id, .. }
                if !announced.contains(&tool_call_id) =>
            {
                return Err(format!(
                    "arguments of {tool_call_id} before its announcement"
                ));
            }
            _ => {}
        }
    }
    let starts: Vec<&ToolCallId> = events
        .iter()
        .filter_map(|e| match e {
            AiEvent::ToolCallStart { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        })
        .collect();
    for id in &starts {
        let results = events
            .iter()
            .filter(|e| matches!(e, AiEvent::ToolCallResult { tool_call_id, .. } if tool_call_id == *id))
            .count();
        if results != 1 {
            return Err(format!("{id} has {results} results"));
        }
    }
    // A call announced while it streamed that never started (the completion does not hold it)
    // ends with one result all the same, unless the run ended before its completion (its model
    // call failed or was cancelled), when the UI translators answer it.
    let cut = matches!(
        events.last(),
        Some(AiEvent::Done {
            reason: ai_core::DoneReason::Error | ai_core::DoneReason::Cancelled
        })
    );
    let unstarted: Vec<&ToolCallId> = announced
        .iter()
        .copied()
        .filter(|id| !starts.contains(id))
        .collect();
    for id in &unstarted {
        let results = events
            .iter()
            .filter(|e| matches!(e, AiEvent::ToolCallResult { tool_call_id, .. } if tool_call_id == *id))
            .count();
        if results > 1 || (results == 0 && !cut) {
            return Err(format!(
                "{id} was announced, never started, and has {results} results"
            ));
        }
    }
    for event in events {
        if let AiEvent::ToolCallResult { tool_call_id, .. } = event
            && !starts.contains(&tool_call_id)
            && !unstarted.contains(&tool_call_id)
        {
            return Err(format!(
                "a result of {tool_call_id}, neither started nor announced"
            ));
        }
    }
    // A call that asked for approval is ended in this run unless the run paused for it.
    let paused = matches!(
        events.last(),
        Some(AiEvent::Done {
            reason: ai_core::DoneReason::AwaitingApproval
        })
    );
    for event in events {
        if let AiEvent::ApprovalRequired { tool_call_id, .. } = event
            && !paused
            && !starts.contains(&tool_call_id)
        {
            return Err(format!(
                "{tool_call_id} asked for approval and was never ended"
            ));
        }
    }
    validate_history(state.messages()).map_err(|e| e.to_string())?;
    // What a provider refuses to read back: an assistant message without content, a tool name
    // outside `^[a-zA-Z0-9_-]{1,64}$`.
    for message in state.messages() {
        let Message::Assistant {
            content,
            tool_calls,
        } = message
        else {
            continue;
        };
        if content.trim().is_empty() && tool_calls.is_empty() {
            return Err(format!(
                "an empty assistant message: {:?}",
                state.messages()
            ));
        }
        let refused = |name: &str| {
            !(1..=64).contains(&name.len())
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        if let Some(call) = tool_calls.iter().find(|call| refused(&call.name)) {
            return Err(format!("a tool name providers refuse: {:?}", call.name));
        }
    }
    Ok(())
}

pub(crate) fn done_reason(events: &[AiEvent]) -> String {
    match events.last() {
        Some(AiEvent::Done { reason }) => serde_json::to_value(reason)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned(),
        other => format!("{other:?}"),
    }
}

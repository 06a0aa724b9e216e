//! `ai_core::install_tool_panic_hook` and the ports the driver catches panics for: a panic in
//! the model port, an authorization hook, the clock or a thread store never shows its message
//! (the driver already turns it into a failure without it), while a panic in code the driver
//! runs for itself inside a port's call (the delta callback and the events it shows) and any
//! other panic still reach the hook installed before, message and all. Its own test binary: a
//! panic hook is global to the process.

#![allow(missing_docs)]

use std::sync::{Arc, Mutex};

use ai_core::{
    AiEvent, AuthzDecision, BoundTool, CancellationToken, Capabilities, Clock, CompletionDelta,
    CompletionError, CompletionPort, DeltaSink, ExecPermit, FinishReason, LlmCompletion,
    LlmRequest, LlmToolCall, Redaction, RunContext, StaticToolSource, ThreadId, ThreadStore,
    ThreadStoreError, ToolCallId, ToolCatalog, ToolEffect, ToolError, ToolId,
    ToolInvocationContext, ToolPolicy, ToolRunner, ToolSpec,
};
use graph::{Agent, AgentConfig};
use serde_json::{Value, json};

const SECRET: &str = "sk-canary-in-a-port-9b2e";
const OWN: &str = "the driver's own callback broke";

/// A tool that answers `{}`.
struct Plain(ToolSpec);

#[ai_core::async_trait]
impl BoundTool for Plain {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn validate_input(&self, args: Value) -> Result<Value, ToolError> {
        Ok(args)
    }
    async fn exec(
        &self,
        _: ExecPermit,
        _: Arc<Value>,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<Value, ToolError> {
        Ok(json!({}))
    }
    fn validate_output(&self, _: &Value) -> Result<(), ToolError> {
        Ok(())
    }
    fn redact(&self, output: Value) -> Result<Value, ToolError> {
        Ok(output)
    }
}

/// What the model port does.
#[derive(Clone, Copy, PartialEq)]
enum Model {
    /// Asks for one call of `core__plain`, then answers.
    CallsATool,
    /// Panics with the secret.
    Panics,
    /// Streams a text delta (which the test's event sink panics on), then answers.
    Streams,
}

struct Port {
    does: Model,
    calls: Mutex<u32>,
}

#[ai_core::async_trait]
impl CompletionPort for Port {
    async fn complete(
        &self,
        _: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        _: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        let call = {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            *calls
        };
        let mut completion = LlmCompletion {
            text: String::new(),
            tool_calls: Vec::new(),
            finish_reason: FinishReason::Stop,
            usage: None,
        };
        match self.does {
            Model::Panics => panic!("the port held {SECRET}"),
            Model::Streams => {
                deltas.delta(CompletionDelta::Text { delta: "hi".into() });
                completion.text = "hi".into();
            }
            Model::CallsATool if call == 1 => {
                completion.tool_calls = vec![LlmToolCall {
                    id: ToolCallId::new("c1").unwrap(),
                    name: "core__plain".into(),
                    arguments: "{}".into(),
                    complete: true,
                    provider_fields: Default::default(),
                }];
                completion.finish_reason = FinishReason::ToolCalls;
            }
            Model::CallsATool => completion.text = "done".into(),
        }
        Ok(completion)
    }
}

struct Hook;

#[ai_core::async_trait]
impl ai_core::Authorizer for Hook {
    async fn check(&self, _: &RunContext, _: &ToolId) -> AuthzDecision {
        panic!("the hook held {SECRET}");
    }
}

struct BrokenClock;

impl Clock for BrokenClock {
    fn now_ms(&self) -> u64 {
        panic!("the clock held {SECRET}");
    }
}

struct Store;

#[ai_core::async_trait]
impl ThreadStore for Store {
    async fn load(&self, _: &ThreadId) -> Result<Option<Value>, ThreadStoreError> {
        panic!("the store held {SECRET}");
    }
    async fn save(&self, _: &ThreadId, _: &Value) -> Result<(), ThreadStoreError> {
        Ok(())
    }
}

struct FixedClock;

impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        1_700_000_000_000
    }
}

/// The message of a panic, as a hook is given it.
fn message_of(info: &std::panic::PanicHookInfo<'_>) -> String {
    info.payload()
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[tokio::test]
async fn a_ports_panic_message_is_kept_out_and_the_drivers_own_panics_pass_through() {
    // The hook before ours: records every message it is given.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorder = Arc::clone(&seen);
    std::panic::set_hook(Box::new(move |info| {
        recorder.lock().unwrap().push(message_of(info));
    }));
    ai_core::install_tool_panic_hook();

    let spec = ToolSpec {
        id: ToolId::parse("core__plain").unwrap(),
        description: "Answers {}.".into(),
        input_schema: json!({"type": "object"}),
        effect: ToolEffect::ReadOnly,
        redaction: Redaction { allow: Vec::new() },
    };
    let source = Arc::new(StaticToolSource::new(vec![Arc::new(Plain(spec)) as _]).unwrap());
    let policy = ToolPolicy::from_toml_str(r#"allowed_tools = ["core__plain"]"#).unwrap();
    let ctx = RunContext::new("run-1", "user:alice", "tenant-1").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let policy = Arc::new(policy);
    let runner = ToolRunner::new(source.clone(), policy.clone(), Arc::new(FixedClock));
    let agent = |does: Model, runner: ToolRunner| {
        let port = Port {
            does,
            calls: Mutex::new(0),
        };
        Agent::new(Arc::new(port), runner, AgentConfig::default())
    };
    let cancel = CancellationToken::new();
    let quiet = |_: AiEvent| {};
    let done = |events: &[AiEvent]| {
        events
            .iter()
            .filter(|e| matches!(e, AiEvent::Done { .. }))
            .count()
    };

    // The model port, an authorization hook and the clock the runner reads, each panicking:
    // every run still ends once.
    let runs = [
        agent(Model::Panics, runner.clone()),
        agent(
            Model::CallsATool,
            runner.clone().with_authorizer(Arc::new(Hook)),
        ),
        agent(
            Model::CallsATool,
            ToolRunner::new(source.clone(), policy.clone(), Arc::new(BrokenClock)),
        ),
    ];
    for agent in runs {
        let events = Mutex::new(Vec::new());
        let sink = |e: AiEvent| events.lock().unwrap().push(e);
        agent
            .run(
                agent.new_state(),
                "go".into(),
                &ctx,
                &catalog,
                &sink,
                &cancel,
            )
            .await;
        assert_eq!(done(&events.lock().unwrap()), 1);
    }
    // A thread store that panics.
    let plain = agent(Model::CallsATool, runner.clone());
    let thread = ThreadId::new("t").unwrap();
    let loaded = plain
        .run_thread(
            &Store,
            &thread,
            "go".into(),
            &ctx,
            &catalog,
            &quiet,
            &cancel,
        )
        .await;
    assert!(loaded.is_err());

    // The driver's own code, run inside the model port's call (its delta callback shows the
    // text through the event sink, which panics here), is not the port's.
    let streams = agent(Model::Streams, runner.clone());
    let own = |e: AiEvent| {
        if matches!(e, AiEvent::TextDelta { .. }) {
            panic!("{OWN}");
        }
    };
    streams
        .run(
            streams.new_state(),
            "go".into(),
            &ctx,
            &catalog,
            &own,
            &cancel,
        )
        .await;

    // A panic outside any port still reaches the hook before.
    let outside = std::panic::catch_unwind(|| panic!("outside any port"));
    assert!(outside.is_err());

    // The default hook again, so that a failed assertion below is shown.
    drop(std::panic::take_hook());
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|message| !message.contains(SECRET)),
        "a port's panic reached the previous hook: {seen:?}"
    );
    assert!(seen.iter().any(|m| m == OWN), "{seen:?}");
    assert!(seen.iter().any(|m| m == "outside any port"), "{seen:?}");
}

//! `ai_core::install_tool_panic_hook` and the ports the driver calls: a panic in the model port,
//! an authorization hook, a connection broker, the tool source, the clock, a tool's plain method
//! (`requires_connection`, which the runner does not catch) or a thread store never
//! shows its message, neither to the hook nor in the run's events (the driver turns it into a
//! failure without it); nor does one in the app's event sink, wherever the driver or the runner
//! calls it (inside the model port's delta callback too), while any other panic still reaches
//! the hook installed before, message and all. Its own test binary: a panic hook is global to
//! the process.

#![allow(missing_docs)]

use std::sync::{Arc, Mutex};

use ai_core::{
    AiEvent, AuthCapability, AuthError, AuthzDecision, BoundTool, CancellationToken, Capabilities,
    Clock, CompletionDelta, CompletionError, CompletionPort, ConnectionBroker, ConnectionId,
    DeltaSink, ExecPermit, FinishReason, LlmCompletion, LlmRequest, LlmToolCall, Redaction,
    RunContext, StaticToolSource, ThreadId, ThreadStore, ThreadStoreError, ToolCallId, ToolCatalog,
    ToolEffect, ToolError, ToolId, ToolInvocationContext, ToolPolicy, ToolRunner, ToolSource,
    ToolSpec,
};
use graph::{Agent, AgentConfig};
use serde_json::{Value, json};

const SECRET: &str = "sk-canary-in-a-port-9b2e";

/// How many times the test's event sinks panicked.
static SINK_PANICS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A tool that answers `{}`; with `true`, it needs a connection.
struct Plain(ToolSpec, bool);

#[ai_core::async_trait]
impl BoundTool for Plain {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn requires_connection(&self) -> bool {
        self.1
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

/// A tool that panics, with the secret, when the runner asks whether it needs a connection: one
/// of the plain methods the runner asks, whose panic unwinds to the driver as a port's does.
struct Fragile(ToolSpec);

#[ai_core::async_trait]
impl BoundTool for Fragile {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn requires_connection(&self) -> bool {
        panic!("the tool held {SECRET}");
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
    /// Asks for one call of its port's tool, then answers.
    CallsATool,
    /// Panics with the secret.
    Panics,
    /// Streams a text delta (which the test's event sink panics on), then answers.
    Streams,
}

struct Port {
    does: Model,
    /// The tool [`Model::CallsATool`] asks for.
    tool: &'static str,
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
                    name: self.tool.into(),
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

struct Broker;

#[ai_core::async_trait]
impl ConnectionBroker for Broker {
    async fn resolve(
        &self,
        _: &ConnectionId,
        _: &ToolInvocationContext,
    ) -> Result<Box<dyn AuthCapability>, AuthError> {
        panic!("the broker held {SECRET}");
    }
}

/// A tool source that lists its tools but panics when one is asked for.
struct BrokenSource(StaticToolSource);

impl ToolSource for BrokenSource {
    fn bound_tool(&self, _: &ToolId) -> Option<Arc<dyn BoundTool>> {
        panic!("the source held {SECRET}");
    }
    fn tool_specs(&self) -> Vec<ToolSpec> {
        self.0.tool_specs()
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
    async fn save(
        &self,
        _: &ThreadId,
        _: Option<&Value>,
        _: &Value,
    ) -> Result<(), ThreadStoreError> {
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
async fn a_ports_panic_message_is_kept_out_and_other_panics_pass_through() {
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
    let tools = || -> Vec<Arc<dyn BoundTool>> {
        vec![
            Arc::new(Plain(spec.clone(), false)),
            Arc::new(Plain(
                ToolSpec {
                    id: ToolId::parse("core__connected").unwrap(),
                    ..spec.clone()
                },
                true,
            )),
            Arc::new(Fragile(ToolSpec {
                id: ToolId::parse("core__fragile").unwrap(),
                ..spec.clone()
            })),
        ]
    };
    let source = Arc::new(StaticToolSource::new(tools()).unwrap());
    let policy = ToolPolicy::from_toml_str(
        r#"allowed_tools = ["core__plain", "core__connected", "core__fragile"]"#,
    )
    .unwrap();
    let mut ctx = RunContext::new("run-1", "user:alice", "tenant-1").unwrap();
    let connection = ConnectionId::new("c1").unwrap();
    ctx.grant.allowed_connection_ids.insert(connection.clone());
    ctx.requested_connection_ids.insert(connection.clone());
    ctx.connection_id = Some(connection);
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let policy = Arc::new(policy);
    let runner = ToolRunner::new(source.clone(), policy.clone(), Arc::new(FixedClock));
    let agent = |does: Model, runner: ToolRunner| {
        let port = Port {
            does,
            tool: "core__plain",
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

    // The model port, an authorization hook, a connection broker, the tool source, the clock
    // the runner reads and a tool's plain method, each panicking: every run still ends once, and
    // its events never hold the panic's message.
    let connected = Agent::new(
        Arc::new(Port {
            does: Model::CallsATool,
            tool: "core__connected",
            calls: Mutex::new(0),
        }),
        runner.clone().with_broker(Arc::new(Broker)),
        AgentConfig::default(),
    );
    let broken_source: Arc<dyn ToolSource> =
        Arc::new(BrokenSource(StaticToolSource::new(tools()).unwrap()));
    let fragile = Agent::new(
        Arc::new(Port {
            does: Model::CallsATool,
            tool: "core__fragile",
            calls: Mutex::new(0),
        }),
        runner.clone(),
        AgentConfig::default(),
    );
    let mut shown = String::new();
    let runs = [
        connected,
        fragile,
        agent(
            Model::CallsATool,
            ToolRunner::new(broken_source, policy.clone(), Arc::new(FixedClock)),
        ),
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
        let events = events.into_inner().unwrap();
        assert_eq!(done(&events), 1);
        shown += &serde_json::to_string(&events).unwrap();
        shown += &format!("{events:?}");
    }
    // The check can fail: the tool calls were answered, as failures.
    assert_eq!(shown.matches("\"tool_call_result\"").count(), 5, "{shown}");
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

    // The app's event sink is a port too, wherever it is called: inside the model port's call
    // (the delta callback shows the text through it), by the driver itself (a step's start,
    // the thread's store failing) and by the runner (a call's start, which holds its
    // arguments). A panic there unwinds to the app, or fails the model call (named as the
    // sink's) or the tool call it came from, but its message is not shown.
    let cases = [
        (Model::Streams, "text_delta"),
        (Model::CallsATool, "step_started"),
        (Model::CallsATool, "tool_call_start"),
        (Model::CallsATool, "error"),
    ];
    for (does, panics_on) in cases {
        let sink = move |e: AiEvent| {
            if serde_json::to_value(&e).unwrap()["type"] == panics_on {
                SINK_PANICS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                panic!("the sink could not show {SECRET} in {e:?}");
            }
        };
        let agent = agent(does, runner.clone());
        let (ctx, catalog, cancel) = (ctx.clone(), catalog.clone(), cancel.clone());
        // Its own task: a panic that unwinds out of the run ends the task, not the test.
        tokio::spawn(async move {
            if panics_on == "error" {
                let thread = ThreadId::new("t").unwrap();
                let run =
                    agent.run_thread(&Store, &thread, "go".into(), &ctx, &catalog, &sink, &cancel);
                let _ = run.await;
            } else {
                let run = agent.run(
                    agent.new_state(),
                    "go".into(),
                    &ctx,
                    &catalog,
                    &sink,
                    &cancel,
                );
                run.await;
            }
        })
        .await
        .ok();
    }
    // Each sink did panic.
    assert!(
        SINK_PANICS.load(std::sync::atomic::Ordering::Relaxed) >= cases.len(),
        "a sink never panicked"
    );

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
    assert!(
        !shown.contains(SECRET),
        "a port's panic reached the events: {shown}"
    );
    assert!(seen.iter().any(|m| m == "outside any port"), "{seen:?}");
}

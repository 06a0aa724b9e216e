//! `install_tool_panic_hook`: a tool's panic message, or the caller's event sink's, never
//! reaches the process's output, while every other panic still reaches the hook installed
//! before. Its own test binary: a panic hook
//! is global to the process, and the other tests' panics must not reach this one's recorder.

#![allow(missing_docs)]

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use std::future::Future;
use std::pin::Pin;

use ai_core::{
    AiEvent, AuthCapability, AuthError, Authorizer, AuthzDecision, BoundTool, CancellationToken,
    Capabilities, ConnectionBroker, ConnectionId, ExecPermit, Redaction, RunContext,
    StaticToolSource, ToolCall, ToolCallId, ToolCatalog, ToolEffect, ToolError, ToolFailure,
    ToolId, ToolInvocationContext, ToolOutcome, ToolPolicy, ToolRunner, ToolSource, ToolSpec,
};
use serde_json::{Value, json};
use tracing_subscriber::fmt::MakeWriter;

const SECRET: &str = "sk-canary-in-a-panic-4f1d";

/// Panics with the secret in its message: in `exec`, or in `redact`.
struct Leaky {
    spec: ToolSpec,
    in_redact: bool,
    needs_connection: bool,
}

#[ai_core::async_trait]
impl BoundTool for Leaky {
    fn spec(&self) -> &ToolSpec {
        &self.spec
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
        assert!(self.in_redact, "the token {SECRET} was refused");
        Ok(json!({}))
    }
    fn validate_output(&self, _: &Value) -> Result<(), ToolError> {
        Ok(())
    }
    fn redact(&self, _: Value) -> Result<Value, ToolError> {
        panic!("cannot redact the reply to {SECRET}");
    }
    fn requires_connection(&self) -> bool {
        self.needs_connection
    }
}

/// A tool that panics, with the secret in the message, before it hands back its future.
struct EagerTool(ToolSpec);

impl BoundTool for EagerTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn validate_input(&self, args: Value) -> Result<Value, ToolError> {
        Ok(args)
    }
    #[allow(clippy::type_complexity)] // The trait's signature, desugared.
    fn exec<'a, 'b, 'c, 'd>(
        &'a self,
        _: ExecPermit,
        _: Arc<Value>,
        _: &'b ToolInvocationContext,
        _: &'c Capabilities,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'd>>
    where
        'a: 'd,
        'b: 'd,
        'c: 'd,
        Self: 'd,
    {
        panic!("the tool cannot start with {SECRET}");
    }
    fn validate_output(&self, _: &Value) -> Result<(), ToolError> {
        Ok(())
    }
    fn redact(&self, value: Value) -> Result<Value, ToolError> {
        Ok(value)
    }
}

/// An authorization hook and a connection broker that panic, with the secret in the message,
/// before they hand back their future (a hand-written impl doing its work up front).
struct Eager;

impl Authorizer for Eager {
    fn check<'a, 'b, 'c, 'd>(
        &'a self,
        _: &'b RunContext,
        _: &'c ToolId,
    ) -> Pin<Box<dyn Future<Output = AuthzDecision> + Send + 'd>>
    where
        'a: 'd,
        'b: 'd,
        'c: 'd,
        Self: 'd,
    {
        panic!("the hook cannot check {SECRET}");
    }
}

impl ConnectionBroker for Eager {
    #[allow(clippy::type_complexity)] // The trait's signature, desugared.
    fn resolve<'a, 'b, 'c, 'd>(
        &'a self,
        _: &'b ConnectionId,
        _: &'c ToolInvocationContext,
    ) -> Pin<Box<dyn Future<Output = Result<Box<dyn AuthCapability>, AuthError>> + Send + 'd>>
    where
        'a: 'd,
        'b: 'd,
        'c: 'd,
        Self: 'd,
    {
        panic!("the broker cannot resolve {SECRET}");
    }
}

/// Which of its plain methods a [`Fragile`] tool panics in, with the secret in the message.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Breaks {
    Spec,
    RequiresConnection,
    Idempotent,
    RefusedBeforeAttempt,
}

/// A tool that panics in one of the plain methods the runner asks it (not `exec` or its
/// checks). Its `exec` fails, as a transient failure, so that the runner asks whether it may
/// run it again.
struct Fragile {
    spec: ToolSpec,
    breaks: Breaks,
}

impl Fragile {
    fn breaks_in(&self, method: Breaks) {
        if self.breaks == method {
            panic!("{method:?} cannot tell with {SECRET}");
        }
    }
}

#[ai_core::async_trait]
impl BoundTool for Fragile {
    fn spec(&self) -> &ToolSpec {
        self.breaks_in(Breaks::Spec);
        &self.spec
    }
    fn requires_connection(&self) -> bool {
        self.breaks_in(Breaks::RequiresConnection);
        false
    }
    fn idempotent(&self) -> bool {
        self.breaks_in(Breaks::Idempotent);
        false
    }
    fn refused_before_attempt(
        &self,
        _: &ToolInvocationContext,
        _: &Value,
        _: u32,
    ) -> Option<ToolFailure> {
        self.breaks_in(Breaks::RefusedBeforeAttempt);
        None
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
        Err(ToolError::transient("the tool failed"))
    }
    fn validate_output(&self, _: &Value) -> Result<(), ToolError> {
        Ok(())
    }
    fn redact(&self, value: Value) -> Result<Value, ToolError> {
        Ok(value)
    }
}

/// A source over [`Fragile`] tools that lists their specs without asking the tools.
struct FragileSource(Vec<Arc<Fragile>>);

impl ToolSource for FragileSource {
    fn bound_tool(&self, id: &ToolId) -> Option<Arc<dyn BoundTool>> {
        let tool = self.0.iter().find(|tool| &tool.spec.id == id)?;
        Some(Arc::clone(tool) as Arc<dyn BoundTool>)
    }
    fn tool_specs(&self) -> Vec<ToolSpec> {
        self.0.iter().map(|tool| tool.spec.clone()).collect()
    }
}

/// A tool whose spec panics, with the secret in the message, once `armed` (after a source took
/// it in): for the catalog, which lists a source's specs.
struct ArmedSpec {
    spec: ToolSpec,
    armed: std::sync::atomic::AtomicBool,
}

#[ai_core::async_trait]
impl BoundTool for ArmedSpec {
    fn spec(&self) -> &ToolSpec {
        if self.armed.load(std::sync::atomic::Ordering::SeqCst) {
            panic!("the spec cannot tell with {SECRET}");
        }
        &self.spec
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
        Ok(Value::Null)
    }
    fn validate_output(&self, _: &Value) -> Result<(), ToolError> {
        Ok(())
    }
    fn redact(&self, value: Value) -> Result<Value, ToolError> {
        Ok(value)
    }
}

fn leaky(id: &str, in_redact: bool, needs_connection: bool) -> Arc<dyn BoundTool> {
    Arc::new(Leaky {
        spec: ToolSpec {
            id: ToolId::parse(id).unwrap(),
            description: "Panics with a secret.".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
            redaction: Redaction { allow: Vec::new() },
        },
        in_redact,
        needs_connection,
    })
}

struct FixedClock;

impl ai_core::Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        1_700_000_000_000
    }
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
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

#[tokio::test]
async fn a_tools_panic_message_is_kept_out_and_other_panics_pass_through() {
    // The hook before ours: records every message it is given.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorder = Arc::clone(&seen);
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        recorder.lock().unwrap().push(message);
    }));
    ai_core::install_tool_panic_hook();

    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let source = Arc::new(
        StaticToolSource::new(vec![
            leaky("core__panic_in_exec", false, false),
            leaky("core__panic_in_redact", true, false),
            leaky("core__needs_connection", true, true),
            Arc::new(EagerTool(ToolSpec {
                id: ToolId::parse("core__panic_eagerly").unwrap(),
                description: "Panics before its future.".into(),
                input_schema: json!({"type": "object"}),
                effect: ToolEffect::ReadOnly,
                redaction: Redaction { allow: Vec::new() },
            })),
        ])
        .unwrap(),
    );
    let policy = ToolPolicy::from_toml_str(
        r#"allowed_tools = ["core__panic_in_exec", "core__panic_in_redact", "core__needs_connection", "core__panic_eagerly"]"#,
    )
    .unwrap();
    let ctx = RunContext::new("run-1", "user:alice", "tenant-1").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let runner = ToolRunner::new(source.clone(), Arc::new(policy), Arc::new(FixedClock));
    for (i, name) in [
        "core__panic_in_exec",
        "core__panic_in_redact",
        "core__panic_eagerly",
    ]
    .into_iter()
    .enumerate()
    {
        let call = ToolCall {
            id: ToolCallId::new(format!("call_{i}")).unwrap(),
            name: name.into(),
            arguments: "{}".into(),
        };
        let sink = |_: AiEvent| {};
        let run = runner
            .run_tool(&call, &ctx, &catalog, &sink, &CancellationToken::new())
            .await;
        assert!(
            matches!(run.result.outcome, ToolOutcome::Error(_)),
            "{name}: the panic ends the call"
        );
    }

    // The authorization hook and the connection broker are ports too, also when they panic
    // before they hand back their future: the panic unwinds out of `run_tool` (the `graph`
    // driver catches it), and its message is kept out.
    let with_hook = runner.clone().with_authorizer(Arc::new(Eager));
    let mut connected = ctx.clone();
    let c1 = ConnectionId::new("c1").unwrap();
    connected.grant.allowed_connection_ids = vec![c1.clone()].into_iter().collect();
    connected.requested_connection_ids = vec![c1.clone()].into_iter().collect();
    connected.connection_id = Some(c1);
    let with_broker = runner.clone().with_broker(Arc::new(Eager));
    for (runner, ctx, name) in [
        (with_hook, ctx.clone(), "core__panic_in_redact"),
        (with_broker, connected, "core__needs_connection"),
    ] {
        let call = ToolCall {
            id: ToolCallId::new("call_port").unwrap(),
            name: name.into(),
            arguments: "{}".into(),
        };
        let catalog = catalog.clone();
        let panicked = tokio::spawn(async move {
            let sink = |_: AiEvent| {};
            runner
                .run_tool(&call, &ctx, &catalog, &sink, &CancellationToken::new())
                .await;
        })
        .await;
        assert!(
            panicked.is_err_and(|e| e.is_panic()),
            "{name}: the panic unwinds"
        );
    }

    // The caller's event sink is a port too: a panic in it (here on the call's start, which
    // holds the arguments) unwinds out of `run_tool`, and its message is kept out.
    let call = ToolCall {
        id: ToolCallId::new("call_sink").unwrap(),
        name: "core__panic_in_redact".into(),
        arguments: "{}".into(),
    };
    let sink = |event: AiEvent| {
        if matches!(event, AiEvent::ToolCallStart { .. }) {
            panic!("the sink could not show {SECRET}");
        }
    };
    let (runner, ctx, catalog) = (runner.clone(), ctx.clone(), catalog.clone());
    let sank = tokio::spawn(async move {
        runner
            .run_tool(&call, &ctx, &catalog, &sink, &CancellationToken::new())
            .await;
    })
    .await;
    assert!(
        sank.is_err_and(|e| e.is_panic()),
        "the sink's panic unwinds"
    );

    // The plain methods the runner asks a tool (its spec, whether it needs a connection, may be
    // run again, or is already refused) are the tool's code too: their panic unwinds out of
    // `run_tool` (the `graph` driver catches it), and its message is kept out.
    let fragile: Vec<Arc<Fragile>> = [
        Breaks::Spec,
        Breaks::RequiresConnection,
        Breaks::Idempotent,
        Breaks::RefusedBeforeAttempt,
    ]
    .into_iter()
    .map(|breaks| {
        Arc::new(Fragile {
            spec: ToolSpec {
                id: ToolId::parse(&format!("core__breaks_{breaks:?}")).unwrap(),
                description: "Panics with a secret.".into(),
                input_schema: json!({"type": "object"}),
                effect: ToolEffect::StateChange,
                redaction: Redaction { allow: Vec::new() },
            },
            breaks,
        })
    })
    .collect();
    let ids: Vec<ToolId> = fragile.iter().map(|tool| tool.spec.id.clone()).collect();
    let source = FragileSource(fragile);
    let ctx = RunContext::new("run-1", "user:alice", "tenant-1").unwrap();
    let policy = ToolPolicy {
        allowed_tools: ids.iter().cloned().collect(),
        ..ToolPolicy::default()
    };
    let fragile_catalog = ToolCatalog::build(&source, &policy, &ctx).unwrap();
    let fragile_runner = ToolRunner::new(Arc::new(source), Arc::new(policy), Arc::new(FixedClock));
    for id in ids {
        let call = ToolCall {
            id: ToolCallId::new("call_fragile").unwrap(),
            name: id.as_str().into(),
            arguments: "{}".into(),
        };
        let (runner, ctx, catalog) = (fragile_runner.clone(), ctx.clone(), fragile_catalog.clone());
        let panicked = tokio::spawn(async move {
            let sink = |_: AiEvent| {};
            runner
                .run_tool(&call, &ctx, &catalog, &sink, &CancellationToken::new())
                .await;
        })
        .await;
        assert!(
            panicked.is_err_and(|e| e.is_panic()),
            "{id}: the panic unwinds"
        );
    }

    // The catalog lists the source's specs (a static source asks each tool): a panic there is
    // the tool source's, its message kept out; it unwinds out of `ToolCatalog::build`.
    let armed = Arc::new(ArmedSpec {
        spec: ToolSpec {
            id: ToolId::parse("core__armed").unwrap(),
            description: "Its spec panics with a secret once armed.".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
            redaction: Redaction { allow: Vec::new() },
        },
        armed: std::sync::atomic::AtomicBool::new(false),
    });
    let source = StaticToolSource::new(vec![Arc::clone(&armed) as Arc<dyn BoundTool>]).unwrap();
    armed.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let listed = std::panic::catch_unwind(AssertUnwindSafe(|| {
        ToolCatalog::build(&source, &ToolPolicy::default(), &ctx)
    }));
    assert!(listed.is_err(), "the spec's panic unwinds");

    // A panic outside any tool still reaches the hook before.
    let outside = std::panic::catch_unwind(|| panic!("outside any tool"));
    assert!(outside.is_err());

    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|message| !message.contains(SECRET)),
        "a tool's panic reached the previous hook: {seen:?}"
    );
    assert!(seen.iter().any(|m| m == "outside any tool"), "{seen:?}");
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert_eq!(logs.matches("a tool panicked").count(), 7, "{logs}");
    assert_eq!(logs.matches("the event sink panicked").count(), 1, "{logs}");
    assert_eq!(
        logs.matches("the tool source panicked").count(),
        1,
        "{logs}"
    );
    assert_eq!(
        logs.matches("the authorization hook panicked").count(),
        1,
        "{logs}"
    );
    assert_eq!(
        logs.matches("the connection broker panicked").count(),
        1,
        "{logs}"
    );
    assert!(logs.contains("panic_hook.rs"), "the place is told: {logs}");
    assert!(!logs.contains(SECRET), "{logs}");
}

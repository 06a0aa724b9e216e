//! Fakes for the runner tests: a scriptable tool, a manual clock, a recording sink, a broker.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ai_core::{
    AiEvent, AuthCapability, AuthError, BoundTool, CancellationToken, Capabilities, Clock,
    ConnectionBroker, ConnectionId, EventSink, ExecPermit, Redaction, RunContext, Secret,
    StaticToolSource, ToolCall, ToolCallId, ToolCatalog, ToolEffect, ToolError, ToolFailure,
    ToolId, ToolInvocationContext, ToolPolicy, ToolRun, ToolRunner, ToolSpec,
};
use serde_json::{Value, json};

/// The text that makes the fake tool's input check (as `text`) or output check (as the echo)
/// panic.
pub(crate) const PANIC_IN_CHECK: &str = "panic in check";

/// What the fake tool does when it runs.
#[derive(Clone, Debug)]
pub(crate) enum Behaviour {
    /// Returns `{"echo": <text>, "hidden": "internal"}`.
    Echo,
    /// Fails with a safe message.
    Fail,
    /// Fails with this safe message.
    FailWith(String),
    /// Sleeps this long (in tokio time), then echoes.
    Sleep(Duration),
    /// Blocks its thread this long (a tool that should have awaited), then echoes.
    Block(Duration),
    /// Yields once (its first poll is pending, with no timer of its own), then echoes.
    YieldOnce,
    /// Panics.
    Panic,
    /// Returns this value as is.
    Output(Value),
    /// Fails transiently on its first `n` runs, then echoes.
    Flaky(usize),
    /// Fails on its first run, then sleeps this long (in tokio time) and echoes.
    FailOnceThenSleep(Duration),
    /// Refuses its arguments as the caller's mistake ([`ToolError::invalid_input`]).
    RefuseInput,
    /// Fails with a failure that will happen again ([`ToolError::permanent`]).
    FailPermanently,
    /// Its input check fails as its own fault ([`ToolError::permanent`]), whatever the arguments.
    BrokenInputCheck,
    /// Reads the access token from the auth capability and returns it in a field that is not
    /// allowlisted, plus the connection it was bound to.
    UseToken,
}

/// A tool whose input schema is `{"text": string}` (checked by hand: ai-core names no schema
/// library) and whose allowlist is `echo` and `connection`.
pub(crate) struct FakeTool {
    spec: ToolSpec,
    behaviour: Behaviour,
    requires_connection: bool,
    idempotent: bool,
    reads_token: bool,
    /// What [`BoundTool::refused_before_attempt`] answers (a replay's recorded refusal).
    refusal: Option<ToolFailure>,
    pub(crate) runs: AtomicUsize,
}

impl FakeTool {
    pub(crate) fn new(id: &str, effect: ToolEffect, behaviour: Behaviour) -> Self {
        Self {
            spec: ToolSpec {
                id: ToolId::parse(id).unwrap(),
                description: "a fake tool".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "additionalProperties": false
                }),
                effect,
                redaction: Redaction {
                    allow: vec!["echo".into(), "connection".into()],
                },
            },
            behaviour,
            requires_connection: false,
            idempotent: false,
            reads_token: false,
            refusal: None,
            runs: AtomicUsize::new(0),
        }
    }

    pub(crate) fn needing_connection(mut self) -> Self {
        self.requires_connection = true;
        self
    }

    pub(crate) fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }

    /// Refuses every attempt before it starts with `refusal`, as a replay answers a call the
    /// record says its breaker refused.
    pub(crate) fn refusing(mut self, refusal: ToolFailure) -> Self {
        self.refusal = Some(refusal);
        self
    }

    /// Needs a connection, and reads its access token before it does anything else, holding it
    /// in its echo's `hidden` field (which is not allowlisted).
    pub(crate) fn reading_the_token(mut self) -> Self {
        self.requires_connection = true;
        self.reads_token = true;
        self
    }
}

#[async_trait::async_trait]
impl BoundTool for FakeTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn requires_connection(&self) -> bool {
        self.requires_connection
    }

    fn idempotent(&self) -> bool {
        self.idempotent
    }

    fn refused_before_attempt(
        &self,
        _ctx: &ToolInvocationContext,
        _args: &Value,
        _attempt: u32,
    ) -> Option<ToolFailure> {
        self.refusal.clone()
    }

    fn validate_input(&self, args: Value) -> Result<Value, ToolError> {
        assert_ne!(args["text"], PANIC_IN_CHECK, "a buggy input check");
        if matches!(self.behaviour, Behaviour::BrokenInputCheck) {
            return Err(ToolError::permanent("the input type is broken"));
        }
        let Some(map) = args.as_object() else {
            return Err(ToolError::new("/: expected an object"));
        };
        for (key, value) in map {
            if key != "text" {
                return Err(ToolError::new("/: additional properties are not allowed"));
            }
            if !value.is_string() {
                return Err(ToolError::new("/text: expected a string"));
            }
        }
        Ok(args)
    }

    async fn exec(
        &self,
        _permit: ExecPermit,
        args: Arc<Value>,
        ctx: &ToolInvocationContext,
        caps: &Capabilities,
    ) -> Result<Value, ToolError> {
        let run = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        let hidden = if self.reads_token {
            let auth = caps
                .auth()
                .ok_or_else(|| ToolError::new("no credentials"))?;
            let token = auth
                .access_token()
                .await
                .map_err(|_| ToolError::new("no token"))?;
            token.expose().to_owned()
        } else {
            "internal".to_owned()
        };
        let echo =
            json!({"echo": args.get("text").cloned().unwrap_or(Value::Null), "hidden": hidden});
        match &self.behaviour {
            Behaviour::Echo => Ok(echo),
            Behaviour::Fail => Err(ToolError::new("the fake tool failed")),
            Behaviour::FailWith(message) => Err(ToolError::new(message.clone())),
            Behaviour::Sleep(duration) => {
                tokio::time::sleep(*duration).await;
                Ok(echo)
            }
            Behaviour::Block(duration) => {
                std::thread::sleep(*duration);
                Ok(echo)
            }
            Behaviour::YieldOnce => {
                tokio::task::yield_now().await;
                Ok(echo)
            }
            Behaviour::Panic => panic!("fake tool panicked"),
            Behaviour::Output(value) => Ok(value.clone()),
            Behaviour::Flaky(failures) if run <= *failures => {
                Err(ToolError::transient("the service is busy"))
            }
            Behaviour::Flaky(_) => Ok(echo),
            Behaviour::FailOnceThenSleep(_) if run == 1 => {
                Err(ToolError::new("the fake tool failed"))
            }
            Behaviour::FailOnceThenSleep(duration) => {
                tokio::time::sleep(*duration).await;
                Ok(echo)
            }
            Behaviour::RefuseInput => Err(ToolError::invalid_input("no such file")),
            Behaviour::FailPermanently => Err(ToolError::permanent("no such record")),
            Behaviour::BrokenInputCheck => unreachable!("its input check never lets a call run"),
            Behaviour::UseToken => {
                let auth = caps
                    .auth()
                    .ok_or_else(|| ToolError::new("no credentials"))?;
                let token = auth
                    .access_token()
                    .await
                    .map_err(|_| ToolError::new("no token"))?;
                Ok(json!({
                    "connection": ctx.connection_id.as_ref().map(|c| c.as_str().to_owned()),
                    "token": token.expose(),
                }))
            }
        }
    }

    fn validate_output(&self, output: &Value) -> Result<(), ToolError> {
        assert_ne!(output["echo"], PANIC_IN_CHECK, "a buggy output check");
        if output.is_object() {
            Ok(())
        } else {
            Err(ToolError::new("/: expected an object"))
        }
    }

    fn redact(&self, output: Value) -> Result<Value, ToolError> {
        assert_ne!(output["echo"], "panic in redact", "a buggy redaction");
        let Value::Object(map) = output else {
            return Err(ToolError::new("output is not an object"));
        };
        Ok(Value::Object(
            map.into_iter()
                .filter(|(k, _)| self.spec.redaction.allow.iter().any(|a| a == k))
                .collect(),
        ))
    }
}

/// A clock that moves only when told.
#[derive(Default)]
pub(crate) struct ManualClock(pub(crate) AtomicU64);

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        // Each reading advances by 5 ms so start and end differ.
        self.0.fetch_add(5, Ordering::SeqCst)
    }
}

/// Collects every event.
#[derive(Default)]
pub(crate) struct Recorder(pub(crate) Mutex<Vec<AiEvent>>);

impl EventSink for Recorder {
    fn emit(&self, event: AiEvent) {
        self.0.lock().unwrap().push(event);
    }
}

impl Recorder {
    pub(crate) fn events(&self) -> Vec<AiEvent> {
        self.0.lock().unwrap().clone()
    }
}

/// The canary every secret in these tests contains.
pub(crate) const CANARY: &str = "CANARY-7f3a9c-sk-live-DO-NOT-LEAK";

/// A broker that hands out the canary as the token of whatever connection it is asked for, and
/// remembers which ones it was asked for.
#[derive(Default)]
pub(crate) struct CanaryBroker {
    pub(crate) resolved: Mutex<Vec<String>>,
}

struct CanaryToken;

#[async_trait::async_trait]
impl AuthCapability for CanaryToken {
    async fn access_token(&self) -> Result<Secret, AuthError> {
        Ok(Secret::new(CANARY))
    }
}

#[async_trait::async_trait]
impl ConnectionBroker for CanaryBroker {
    async fn resolve(
        &self,
        connection_id: &ConnectionId,
        _ctx: &ToolInvocationContext,
    ) -> Result<Box<dyn AuthCapability>, AuthError> {
        self.resolved
            .lock()
            .unwrap()
            .push(connection_id.as_str().to_owned());
        if connection_id.as_str() == "conn-broken" {
            return Err(AuthError("the connection has expired".into()));
        }
        Ok(Box::new(CanaryToken))
    }
}

/// A runner over some tools with a policy, plus what a test needs to call it.
pub(crate) struct Harness {
    pub(crate) runner: ToolRunner,
    pub(crate) ctx: RunContext,
    pub(crate) catalog: ToolCatalog,
    pub(crate) events: Recorder,
    pub(crate) cancel: CancellationToken,
}

impl Harness {
    pub(crate) fn new(tools: Vec<Arc<dyn BoundTool>>, policy: ToolPolicy) -> Self {
        let ctx = RunContext::new("run-1", "user:alice", "tenant-1").unwrap();
        Self::with_ctx(tools, policy, ctx)
    }

    pub(crate) fn with_ctx(
        tools: Vec<Arc<dyn BoundTool>>,
        policy: ToolPolicy,
        ctx: RunContext,
    ) -> Self {
        let source = Arc::new(StaticToolSource::new(tools).unwrap());
        let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
        let runner = ToolRunner::new(source, Arc::new(policy), Arc::new(ManualClock::default()));
        Self {
            runner,
            ctx,
            catalog,
            events: Recorder::default(),
            cancel: CancellationToken::new(),
        }
    }

    /// Resumes the run as after a pause: [`call`](Self::call)'s id, `call_1`, is approved for
    /// `args_hash`, and the events recorded so far are forgotten.
    pub(crate) fn resume_approving(&mut self, args_hash: String) {
        (self.ctx.approvals).insert(ToolCallId::new("call_1").unwrap(), args_hash);
        self.events = Recorder::default();
    }

    pub(crate) async fn call(&self, name: &str, arguments: &str) -> ToolRun {
        let call = ToolCall {
            id: ToolCallId::new("call_1").unwrap(),
            name: name.into(),
            arguments: arguments.into(),
        };
        self.runner
            .run_tool(&call, &self.ctx, &self.catalog, &self.events, &self.cancel)
            .await
    }
}

/// A policy that allows exactly these tools.
pub(crate) fn allow(ids: &[&str]) -> ToolPolicy {
    ToolPolicy {
        allowed_tools: ids.iter().map(|id| ToolId::parse(id).unwrap()).collect(),
        ..ToolPolicy::default()
    }
}

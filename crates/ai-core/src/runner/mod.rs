//! The tool runner: the one path by which any tool runs (ARCH_SINGLE_EXECUTION_PATH).
//!
//! # Order
//!
//! [`ToolRunner::run_tool`] runs these steps, in this order, and the order is an invariant:
//!
//! 1. find the bound tool (`validation` for a name that is no valid tool id, `unavailable` for
//!    one no bound tool has)
//! 2. policy and this run's catalog (`policy_denied`); a tool whose effect needs approval pauses
//!    once its arguments are validated (step 5) unless the run holds an approval for this call
//!    id and the hash of this tool's id with those arguments, and with the connection of step 4
//!    for a tool that needs one
//! 3. authorization hook (`authz_denied`), when the runner has one
//! 4. connection grant ∩ request (`policy_denied`)
//! 5. parse and validate the input (`invalid_json`, `validation`; at most [`MAX_JSON_DEPTH`]
//!    levels deep; valid JSON serde_json cannot read, a number out of range or a lone
//!    surrogate escape, is `validation` naming what it holds)
//! 6. bind capabilities, credentials scoped to this invocation only (`unavailable`,
//!    `authz_denied`), for a call with a connection (step 4); any other gets none
//! 7. emit [`AiEvent::ToolCallStart`]
//! 8. execute: attempts under the runtime budget and the cancellation token, retried with
//!    backoff when the tool is safe to repeat, behind the tool's circuit breaker (`execution`,
//!    `timeout`, `cancelled`, `circuit_open`)
//! 9. validate the output (`output_validation`)
//! 10. redact by allowlist and check the result budget (`redaction_failed`, `result_too_large`;
//!     at most [`MAX_JSON_DEPTH`] levels deep)
//! 11. emit [`AiEvent::ToolCallResult`]
//! 12. return the [`ToolExecResult`]
//!
//! The ports awaited in steps 3 and 6 answer under the cancellation token (`cancelled`) and
//! within the runtime budget (`timeout`), like the tool itself: no port can hold a call open. A
//! tool that blocks its thread past the budget instead of awaiting cannot be stopped, but its
//! value is not used: it ends `timeout`. A panic in the tool's own checks (steps 5, 9 and 10) is
//! caught like one in `exec` and ends the call with that step's code. The plain methods the runner
//! asks the tool (`spec`, `requires_connection`, `idempotent`, `refused_before_attempt`) answer no
//! step with a failure: a panic in one is marked as the tool's for [`install_tool_panic_hook`],
//! and unwinds like a port's.
//!
//! A failure at any step jumps (with `?`) to the single place that emits the start event if it
//! was not emitted yet and then the result event, so every call gets exactly one of each, with the
//! same `tool_call_id` and a safe message. A paused call emits only
//! [`AiEvent::ApprovalRequired`]. A panic in a port (not the tool's own code) is no step's
//! failure: it unwinds to the caller (see [`ToolRunner::run_tool`]).

mod budget;
mod manager;
mod permit;

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::canonical::text_may_nest_deeper_than;
use crate::json_error::Unreadable;
use crate::{
    AiEvent, Authorizer, AuthzDecision, BoundTool, Capabilities, Clock, ConnectionBroker,
    ConnectionId, EventSink, LlmToolCall, MAX_JSON_DEPTH, PolicyDecision, RunContext, ToolCallId,
    ToolCatalog, ToolErrorCategory, ToolErrorCode, ToolExecResult, ToolFailure, ToolId,
    ToolInvocationContext, ToolInvocationRecord, ToolOutcome, ToolPolicy, ToolSource, ToolSpec,
    nests_deeper_than,
};

pub use budget::{install_tool_panic_hook, own_code, port_call, port_future};
pub use manager::{BreakerStatus, LatencyPercentiles, ToolStats};
pub use permit::ExecPermit;

/// Runner settings that are not policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunnerConfig {
    /// Record the redacted result on the invocation's tracing span (`gen_ai.tool.call.result`).
    /// Off by default. Arguments are never recorded: they have no redaction.
    pub trace_redacted_results: bool,
}

impl RunnerConfig {
    /// Turns recording of redacted results on the span on or off.
    pub fn with_trace_redacted_results(mut self, on: bool) -> Self {
        self.trace_redacted_results = on;
        self
    }
}

/// One tool call as the model asked for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    /// The provider's call id.
    pub id: ToolCallId,
    /// The tool name as sent (it may not be a valid id); shared with the call's events.
    pub name: Arc<str>,
    /// The raw argument JSON as sent.
    pub arguments: String,
}

impl From<&LlmToolCall> for ToolCall {
    fn from(call: &LlmToolCall) -> Self {
        Self {
            id: call.id.clone(),
            name: call.name.as_str().into(),
            arguments: call.arguments.clone(),
        }
    }
}

/// What one invocation produced: the answer for the model and the audit record.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolRun {
    /// The answer, fed back to the model.
    pub result: ToolExecResult,
    /// The audit record (validated arguments, redacted result).
    pub record: ToolInvocationRecord,
}

/// Runs tool calls through the pipeline. Cheap to share: hold it in an `Arc` or clone it.
///
/// Must be driven inside a Tokio runtime with the time driver enabled (budgets use
/// `tokio::time`).
#[derive(Clone)]
pub struct ToolRunner {
    source: Arc<dyn ToolSource>,
    policy: Arc<ToolPolicy>,
    clock: Arc<dyn Clock>,
    authorizer: Option<Arc<dyn Authorizer>>,
    broker: Option<Arc<dyn ConnectionBroker>>,
    config: RunnerConfig,
    registry: Arc<manager::Registry>,
}

impl std::fmt::Debug for ToolRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRunner")
            .field("policy", &self.policy)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why the pipeline stopped before a value.
enum Stop {
    /// A coded failure, answered to the model.
    Failed(ToolFailure),
    /// The tool needs an approval this call does not have yet.
    NeedsApproval(Paused),
}

/// A call paused for approval: the tool and the validated arguments the approval must name.
struct Paused {
    tool_id: ToolId,
    args: Arc<Value>,
    args_hash: String,
}

impl From<ToolFailure> for Stop {
    fn from(failure: ToolFailure) -> Self {
        Self::Failed(failure)
    }
}

/// How far a call got, for the single emit point.
struct Progress {
    started: bool,
    args: Option<Arc<Value>>,
    attempts: Vec<crate::Attempt>,
    /// The invocation context's copy of the call id, once step 8 ended (whether or not the
    /// tool ran: a cancel or an open circuit stops it before): the record takes it over rather
    /// than clone another (one atomic increment and one decrement fewer per call, callgrind).
    call_id: Option<ToolCallId>,
}

impl ToolRunner {
    /// A runner over `source` under `policy`, reading time from `clock`.
    pub fn new(
        source: Arc<dyn ToolSource>,
        policy: Arc<ToolPolicy>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            source,
            policy,
            clock,
            authorizer: None,
            broker: None,
            config: RunnerConfig::default(),
            registry: Arc::default(),
        }
    }

    /// Adds the authorization hook of step 3 (without one, step 3 allows).
    pub fn with_authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    /// Adds the connection broker of step 6 (without one, tools that need a connection fail).
    pub fn with_broker(mut self, broker: Arc<dyn ConnectionBroker>) -> Self {
        self.broker = Some(broker);
        self
    }

    /// Replaces the runner settings.
    pub fn with_config(mut self, config: RunnerConfig) -> Self {
        self.config = config;
        self
    }

    /// The runner settings ([`ToolRunner::with_config`]), so a composition root can check what
    /// it configured.
    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    /// The policy the runner enforces.
    pub fn policy(&self) -> &ToolPolicy {
        &self.policy
    }

    /// Per-tool statistics of the calls this runner (and its clones) executed: counts,
    /// failures by category, retries, breaker state, latency percentiles.
    pub fn stats(&self) -> Vec<ToolStats> {
        self.registry.stats(tokio::time::Instant::now())
    }

    /// The catalog of one run over this runner's own source and policy
    /// ([`ToolCatalog::build`]): the tools the runner will run for `ctx`, so a catalog built from
    /// another source or policy cannot hide a tool from the model, or offer one the runner then
    /// refuses.
    pub fn catalog(&self, ctx: &RunContext) -> Result<ToolCatalog, crate::Error> {
        ToolCatalog::build(self.source.as_ref(), &self.policy, ctx)
    }

    /// The source the runner takes tools from.
    pub fn source(&self) -> &dyn ToolSource {
        self.source.as_ref()
    }

    /// The clock the runner reads its calls' times from. A caller that answers a call the
    /// runner could not (as `graph`'s driver does when one of the runner's ports panicked)
    /// dates its record by it.
    pub fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }

    /// Runs one call through the twelve steps (see the module docs) and returns its answer
    /// and audit record.
    ///
    /// A failed call is a value, never an `Err` or a panic (a panic in the tool, in `exec` or
    /// in its own checks, ends the call with that step's code): every path that does not pause
    /// emits exactly one [`AiEvent::ToolCallStart`] and one [`AiEvent::ToolCallResult`] with
    /// the call's id. A panic in a port the runner calls for the call (the tool source, the
    /// clock, the authorization hook, the connection broker) or in `events` is not the tool's:
    /// it unwinds out of this function, with no result event, and a caller that must answer
    /// every call catches it and answers the call itself, as `graph`'s driver does (see
    /// [`ToolInvocationRecord::failed`]). So does a panic in one of the tool's plain methods
    /// (`spec`, `requires_connection`, `idempotent`, `refused_before_attempt`), which answer
    /// no step with a failure. `events` is the caller's port like the others: under
    /// [`install_tool_panic_hook`] its panic, and the tool's, is reported without its message. A
    /// call whose tool needs an approval the run does not hold yet emits only
    /// [`AiEvent::ApprovalRequired`] and returns [`ToolOutcome::ApprovalRequired`], naming the
    /// hash a matching approval in [`RunContext::approvals`] must carry.
    ///
    /// Must be awaited inside a Tokio runtime with the time driver enabled: without it, a call
    /// that has to wait (a tool that does not finish on its first poll, a port of steps 3 and 6,
    /// a retry) panics with Tokio's message, which names the fix (`enable_time()`).
    pub async fn run_tool(
        &self,
        call: &ToolCall,
        ctx: &RunContext,
        catalog: &ToolCatalog,
        events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> ToolRun {
        // The caller's sink is a port: its code, as the runner calls it, is marked as the
        // sink's for the panic hook (an event holds the arguments and the result).
        let events = &SinkPort(events);
        let started_at_ms = port_call(THE_CLOCK, || self.clock.now_ms());
        // A name in the catalog is a valid id already; only other names need parsing.
        let listed = catalog.get_by_name(&call.name);
        let parsed = match listed {
            Some(_) => None,
            None => ToolId::parse(&call.name).ok(),
        };
        let tool_id = listed.map(|spec| &spec.id).or(parsed.as_ref());
        let tool_name = tool_id.map_or(INVALID_NAME, ToolId::as_str);
        let span = invocation_span(tool_name, &call.id);
        let mut progress = Progress {
            started: false,
            args: None,
            attempts: Vec::new(),
            call_id: None,
        };
        // Pinned where it is built and instrumented through a reference: the pipeline's state
        // is large, and `instrument` would otherwise move all of it once more.
        let outcome = {
            let pipeline = std::pin::pin!(self.pipeline(
                call,
                tool_id,
                listed,
                ctx,
                events,
                cancel,
                &mut progress
            ));
            pipeline.instrument(span.clone()).await
        };
        let ended_at_ms = port_call(THE_CLOCK, || self.clock.now_ms());

        let outcome = match outcome {
            Ok(value) => Ok(value),
            // Every failure is held to the message bound here, however it was built.
            Err(Stop::Failed(failure)) => Err(failure.with_bounded_message()),
            Err(Stop::NeedsApproval(paused)) => {
                let times = (started_at_ms, ended_at_ms);
                return paused_for_approval(call, paused, &span, events, times);
            }
        };

        // The single emit point (steps 7 on failure, and 11).
        if !progress.started {
            emit_start(events, call, None);
        }
        let (outcome, value, error) = match outcome {
            Ok(value) => {
                let value = Arc::new(value);
                (
                    ToolOutcome::Ok {
                        value: Arc::clone(&value),
                    },
                    Some(value),
                    None,
                )
            }
            Err(failure) => (ToolOutcome::Error(failure.clone()), None, Some(failure)),
        };
        let code = error.as_ref().map_or("ok", |f| f.code.as_str());
        let traced_result = value
            .as_deref()
            .filter(|_| self.config.trace_redacted_results);
        finish_span(
            &span,
            code,
            ended_at_ms.saturating_sub(started_at_ms),
            traced_result,
        );
        let record = ToolInvocationRecord {
            tool_call_id: progress.call_id.unwrap_or_else(|| call.id.clone()),
            tool_id: recorded_name(&call.name),
            args: progress.args,
            result: value,
            error,
            started_at_ms,
            ended_at_ms,
            attempts: progress.attempts,
            raw: None,
        };
        // The record first, so a sink that persists at the result event already holds it.
        events.record(&record);
        events.emit(AiEvent::ToolCallResult {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            outcome: outcome.clone(),
        });

        // Step 12.
        ToolRun {
            result: ToolExecResult {
                tool_call_id: call.id.clone(),
                outcome,
            },
            record,
        }
    }

    #[allow(clippy::too_many_arguments)] // The step inputs, named; a struct would only hide them.
    async fn pipeline(
        &self,
        call: &ToolCall,
        tool_id: Option<&ToolId>,
        listed: Option<&ToolSpec>,
        ctx: &RunContext,
        events: &dyn EventSink,
        cancel: &CancellationToken,
        progress: &mut Progress,
    ) -> Result<Value, Stop> {
        let tool = self.find_bound_tool(&call.name, tool_id)?; // 1
        let spec = budget::tool_code(|| tool.spec());
        let id = &spec.id;
        let needs_approval = self.check_policy(ctx, listed, spec)?; // 2
        // The runtime budget counts from here: the ports awaited in steps 3 and 6 and every
        // attempt of step 8 spend the same one.
        let started = tokio::time::Instant::now();
        // The ports' futures are built only for a runner that has the port: without one, a
        // future that only answers `Ok` would still take in, and move, all its inputs.
        if self.authorizer.is_some() {
            self.check_authz(ctx, id, cancel, started).await?; // 3
        }
        let connection_id = check_connection_grant(ctx, tool.as_ref(), id)?; // 4
        let args = self.parse_and_validate(tool.as_ref(), &call.arguments)?; // 5
        if needs_approval {
            // A cancelled run asks nobody for anything: the call ends `cancelled`.
            if cancel.is_cancelled() {
                return Err(budget::cancelled().into());
            }
            // Step 2's pause, decided once the arguments are known: an approval covers one
            // call id, the tool, the connection and the exact arguments it was shown.
            check_approval(ctx, &call.id, id, connection_id.as_ref(), &args)?;
        }
        let invocation = ToolInvocationContext::new(ctx, call.id.clone(), connection_id);
        let caps = if invocation.connection_id.is_some() {
            self.bind_capabilities(&invocation, cancel, started).await? // 6
        } else {
            Capabilities::default()
        };
        let args = Arc::new(args);
        emit_start(events, call, Some(Arc::clone(&args))); // 7
        progress.started = true;
        // The record's share of the arguments is the one every attempt clones its own from.
        let args = &*progress.args.insert(args);
        // Steps 9 and 10 run on the value of step 8's successful attempt, before the call is
        // counted in the statistics: a value they refuse ends the call failed there too.
        let answer = |output| {
            validate_output(tool.as_ref(), &output)?; // 9
            self.redact(tool.as_ref(), output) // 10
        };
        let answered = self
            .exec_under_budget(
                tool.as_ref(),
                args,
                &invocation,
                &caps,
                events,
                cancel,
                started,
                &mut progress.attempts,
                answer,
            )
            .await; // 8
        progress.call_id = Some(invocation.tool_call_id);
        Ok(answered?)
    }

    /// Step 1. `name`: the name the model sent, which `id` is parsed from when it is a valid
    /// id. A valid id no bound tool has is `unavailable` (a tool of that name may be down or
    /// gone); a name that is no valid id is the model's malformed call, `validation`, and is
    /// never quoted.
    fn find_bound_tool(
        &self,
        name: &str,
        id: Option<&ToolId>,
    ) -> Result<Arc<dyn BoundTool>, ToolFailure> {
        let Some(id) = id else {
            return Err(invalid_name(name));
        };
        port_call("the tool source", || self.source.bound_tool(id)).ok_or_else(|| {
            ToolFailure::new(
                ToolErrorCode::Unavailable,
                format!("tool {id} is not available"),
            )
        })
    }

    /// Step 2. `listed`: the run's catalog entry for the called name, looked up once by
    /// [`Self::run_tool`]; `spec`: the bound tool's.
    fn check_policy(
        &self,
        ctx: &RunContext,
        listed: Option<&ToolSpec>,
        spec: &ToolSpec,
    ) -> Result<bool, ToolFailure> {
        let denied = |why: &str| {
            ToolFailure::new(
                ToolErrorCode::PolicyDenied,
                format!("tool {} is not allowed: {why}", spec.id),
            )
        };
        if listed.is_none_or(|listed| listed.id != spec.id) {
            return Err(denied("it is not in this run's catalog"));
        }
        match self.policy.decide(ctx, &spec.id, spec.effect) {
            PolicyDecision::Allow => Ok(false),
            PolicyDecision::Deny => Err(denied("the policy does not allow it")),
            PolicyDecision::RequireApproval => Ok(true),
        }
    }

    /// Step 3.
    async fn check_authz(
        &self,
        ctx: &RunContext,
        id: &ToolId,
        cancel: &CancellationToken,
        started: tokio::time::Instant,
    ) -> Result<(), ToolFailure> {
        let Some(authorizer) = &self.authorizer else {
            return Ok(());
        };
        // Boxed: the guard's timer is only part of the calls that have a hook to wait for.
        let check = budget::guard(
            "the authorization hook",
            // Called inside the future the port's mark covers, so that a hook that panics
            // before it hands back its future is reported as the hook's too.
            port_future("the authorization hook", async {
                authorizer.check(ctx, id).await
            }),
            (started, self.runtime_budget()),
            cancel,
        );
        match Box::pin(check).await? {
            AuthzDecision::Deny => Err(ToolFailure::new(
                ToolErrorCode::AuthzDenied,
                format!("the caller may not execute {id}"),
            )),
            AuthzDecision::Allow => Ok(()),
        }
    }

    /// The runtime budget of a call: its ports and its attempts together.
    fn runtime_budget(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.policy.budgets.max_runtime_ms)
    }

    /// Step 5: size, then JSON, then the tool's own schema.
    fn parse_and_validate(&self, tool: &dyn BoundTool, raw: &str) -> Result<Value, ToolFailure> {
        let limit = self.policy.budgets.max_args_bytes;
        if raw.len() > limit {
            return Err(ToolFailure::new(
                ToolErrorCode::Validation,
                format!(
                    "tool arguments are {} bytes, over the {limit}-byte limit",
                    raw.len()
                ),
            ));
        }
        // Some models send "" (or only JSON whitespace) for a tool without parameters.
        let parsed = if raw
            .bytes()
            .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(raw).map_err(|e| unreadable_arguments(raw, &e))?
        };
        // Short arguments (most of them) cannot nest that deep: no walk.
        if text_may_nest_deeper_than(raw.len(), MAX_JSON_DEPTH)
            && nests_deeper_than(&parsed, MAX_JSON_DEPTH)
        {
            return Err(ToolFailure::new(
                ToolErrorCode::Validation,
                format!("tool arguments nest more than {MAX_JSON_DEPTH} levels deep"),
            ));
        }
        match budget::unless_panics(|| tool.validate_input(parsed)) {
            // The tool says the fault is its own: the model is not told to correct its call.
            Some(Err(e)) if e.category() == ToolErrorCategory::Permanent => Err(ToolFailure::new(
                ToolErrorCode::Execution,
                format!("the tool cannot take these arguments: {}", e.safe_message()),
            )),
            Some(checked) => checked.map_err(|e| {
                ToolFailure::new(
                    ToolErrorCode::Validation,
                    format!("invalid tool arguments: {}", e.safe_message()),
                )
            }),
            None => Err(ToolFailure::new(
                ToolErrorCode::Execution,
                "the tool failed unexpectedly while checking its arguments",
            )),
        }
    }

    /// Step 6: credentials bound to this invocation's connection, nothing cached.
    async fn bind_capabilities(
        &self,
        invocation: &ToolInvocationContext,
        cancel: &CancellationToken,
        started: tokio::time::Instant,
    ) -> Result<Capabilities, ToolFailure> {
        let Some(connection_id) = &invocation.connection_id else {
            return Ok(Capabilities::default());
        };
        let Some(broker) = &self.broker else {
            return Err(ToolFailure::new(
                ToolErrorCode::Unavailable,
                "no connection broker is configured for tools that need a connection",
            ));
        };
        let resolve = budget::guard(
            "the connection broker",
            // Called inside the marked future, as the authorization hook is.
            port_future("the connection broker", async {
                broker.resolve(connection_id, invocation).await
            }),
            (started, self.runtime_budget()),
            cancel,
        );
        Box::pin(resolve)
            .await?
            .map(Capabilities::with_auth)
            .map_err(|e| {
                ToolFailure::new(
                    ToolErrorCode::AuthzDenied,
                    format!("the connection could not be used: {}", e.0),
                )
            })
    }

    /// Step 8, handing the value of its successful attempt to `answer` (steps 9 and 10).
    #[allow(clippy::too_many_arguments)] // The step's inputs, named.
    async fn exec_under_budget(
        &self,
        tool: &dyn BoundTool,
        args: &Arc<Value>,
        invocation: &ToolInvocationContext,
        caps: &Capabilities,
        events: &dyn EventSink,
        cancel: &CancellationToken,
        call_started: tokio::time::Instant,
        attempts: &mut Vec<crate::Attempt>,
        answer: impl FnOnce(Value) -> Result<Value, ToolFailure>,
    ) -> Result<Value, ToolFailure> {
        // The first attempt starts now; the clock is read again only when a port was awaited
        // since the call started (without one, the few steps between take microseconds).
        let awaited_a_port = self.authorizer.is_some() || invocation.connection_id.is_some();
        let first_attempt_at = if awaited_a_port {
            tokio::time::Instant::now()
        } else {
            call_started
        };
        let step = manager::Step8 {
            registry: &self.registry,
            clock: self.clock.as_ref(),
            policy: &self.policy,
            events,
            cancel,
            call_started,
        };
        manager::execute(
            step,
            first_attempt_at,
            tool,
            args,
            invocation,
            caps,
            attempts,
            answer,
        )
        .await
    }

    /// Step 10: allowlist redaction, then the result budget on the redacted bytes.
    fn redact(&self, tool: &dyn BoundTool, output: Value) -> Result<Value, ToolFailure> {
        let (redacted, counted) = budget::unless_panics(|| {
            let redacted = tool.redact(output).ok()?;
            let counted = tool.counted_result_bytes(&redacted);
            Some((redacted, counted))
        })
        .flatten()
        .ok_or_else(|| {
            ToolFailure::new(
                ToolErrorCode::RedactionFailed,
                "the tool output could not be redacted, so none of it is shown",
            )
        })?;
        if nests_deeper_than(&redacted, MAX_JSON_DEPTH) {
            return Err(ToolFailure::new(
                ToolErrorCode::ResultTooLarge,
                format!("the tool result nests more than {MAX_JSON_DEPTH} levels deep"),
            ));
        }
        let limit = self.policy.budgets.max_result_bytes;
        // A tool may count its result as larger than it is (a replay does), never smaller.
        let size = crate::compact_json_len(&redacted).max(counted);
        if size > limit {
            return Err(ToolFailure::new(
                ToolErrorCode::ResultTooLarge,
                format!("the tool result is {size} bytes, over the {limit}-byte limit"),
            ));
        }
        Ok(redacted)
    }
}

/// Step 4: a tool (`id`) that needs a connection gets one only from `grant ∩ requested`.
fn check_connection_grant(
    ctx: &RunContext,
    tool: &dyn BoundTool,
    id: &ToolId,
) -> Result<Option<ConnectionId>, ToolFailure> {
    if !budget::tool_code(|| tool.requires_connection()) {
        return Ok(None);
    }
    let Some(connection_id) = &ctx.connection_id else {
        return Err(ToolFailure::new(
            ToolErrorCode::Validation,
            format!("tool {id} needs a connection and none was selected"),
        ));
    };
    if !ctx.may_use_connection(connection_id) {
        return Err(ToolFailure::new(
            ToolErrorCode::PolicyDenied,
            "the selected connection is not granted for this request",
        ));
    }
    Ok(Some(connection_id.clone()))
}

/// The hash an approval names: SHA-256 of the tool's id, a line break, for a tool that needs a
/// connection the connection's id and a line break, and the canonical JSON of the validated
/// arguments. It covers the tool as well as the arguments: call ids are the provider's, and some
/// repeat them (`call_0` on every turn), so an approval of one tool's call must not let another
/// tool's call under the same id and arguments run. It covers the connection, so a call approved
/// on one connection never runs on another the actor is also granted, which a resume may select
/// (a confused deputy through the approval); a tool without one keeps the hash of its id and
/// arguments alone. No tool id, connection id or canonical JSON holds a line break, so the text
/// says where each part ends, and no two calls give the same text.
fn approval_hash(tool_id: &ToolId, connection_id: Option<&ConnectionId>, args: &Value) -> String {
    let args = crate::canonical_json(args);
    let connection = connection_id.map_or("", ConnectionId::as_str);
    let mut text =
        String::with_capacity(tool_id.as_str().len() + connection.len() + 2 + args.len());
    text.push_str(tool_id.as_str());
    text.push('\n');
    if connection_id.is_some() {
        text.push_str(connection);
        text.push('\n');
    }
    text.push_str(&args);
    crate::sha256_hex(text.as_bytes())
}

/// Step 2's approval check: pass with a matching approval, pause without one, refuse a
/// mismatched one (fail closed). `connection_id`: step 4's, for a tool that needs one.
fn check_approval(
    ctx: &RunContext,
    call_id: &ToolCallId,
    tool_id: &ToolId,
    connection_id: Option<&ConnectionId>,
    args: &Value,
) -> Result<(), Stop> {
    let hash = approval_hash(tool_id, connection_id, args);
    match ctx.approvals.get(call_id) {
        Some(approved) if *approved == hash => Ok(()),
        Some(_) => Err(Stop::Failed(ToolFailure::new(
            ToolErrorCode::PolicyDenied,
            format!(
                "the approval for this call of {tool_id} does not match its tool{} and arguments",
                if connection_id.is_some() {
                    ", connection"
                } else {
                    ""
                },
            ),
        ))),
        None => Err(Stop::NeedsApproval(Paused {
            tool_id: tool_id.clone(),
            args: Arc::new(args.clone()),
            args_hash: hash,
        })),
    }
}

/// Step 9.
fn validate_output(tool: &dyn BoundTool, output: &Value) -> Result<(), ToolFailure> {
    let failed = |why: &str| {
        ToolFailure::new(
            ToolErrorCode::OutputValidation,
            format!("the tool returned invalid output: {why}"),
        )
    };
    match budget::unless_panics(|| tool.validate_output(output)) {
        Some(checked) => checked.map_err(|e| failed(e.safe_message())),
        None => Err(failed("its check failed unexpectedly")),
    }
}

/// The invocation's span (OpenTelemetry GenAI names). Out of line, like [`finish_span`]: the
/// macros expand to much code that would otherwise sit in the middle of every call's hot path.
#[inline(never)]
fn invocation_span(tool_name: &str, call_id: &ToolCallId) -> tracing::Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = %format_args!("execute_tool {tool_name}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %tool_name,
        gen_ai.tool.call.id = %call_id,
        outcome = tracing::field::Empty,
        duration_ms = tracing::field::Empty,
        gen_ai.tool.call.result = tracing::field::Empty,
    )
}

/// Records how the call ended on its span; `result` only when the config asks for it.
#[inline(never)]
fn finish_span(span: &tracing::Span, code: &str, duration_ms: u64, result: Option<&Value>) {
    span.record("outcome", code);
    span.record("duration_ms", duration_ms);
    if let Some(result) = result {
        span.record("gen_ai.tool.call.result", tracing::field::display(result));
    }
    span.in_scope(|| tracing::debug!(outcome = code, "tool call finished"));
}

/// A call that waits for an approval: nothing ran, so no start or result event, only the
/// request for a decision.
#[cold]
fn paused_for_approval(
    call: &ToolCall,
    Paused {
        tool_id,
        args,
        args_hash,
    }: Paused,
    span: &tracing::Span,
    events: &dyn EventSink,
    (started_at_ms, ended_at_ms): (u64, u64),
) -> ToolRun {
    span.record("outcome", "approval_required");
    events.emit(AiEvent::ApprovalRequired {
        tool_call_id: call.id.clone(),
        tool_id,
        args: Arc::clone(&args),
        args_hash: args_hash.clone(),
    });
    ToolRun {
        result: ToolExecResult {
            tool_call_id: call.id.clone(),
            outcome: ToolOutcome::ApprovalRequired { args_hash },
        },
        record: ToolInvocationRecord {
            tool_call_id: call.id.clone(),
            tool_id: call.name.clone(),
            args: Some(args),
            result: None,
            error: None,
            started_at_ms,
            ended_at_ms,
            attempts: Vec::new(),
            raw: None,
        },
    }
}

fn emit_start(events: &dyn EventSink, call: &ToolCall, args: Option<Arc<Value>>) {
    events.emit(AiEvent::ToolCallStart {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        args,
    });
}

/// How a record names the tool the model asked for: its name, cut to 128 bytes.
fn recorded_name(name: &Arc<str>) -> Arc<str> {
    if name.len() <= 128 {
        Arc::clone(name)
    } else {
        truncate(name, 128).into()
    }
}

impl ToolInvocationRecord {
    /// The record of a call answered with `failure` by someone else than the runner, before
    /// anything of it could be kept (no validated arguments, no attempt): for example by
    /// `graph`'s driver, when a port the runner awaited for the call panicked. The tool is named
    /// as the runner names it (the name the model sent, cut to 128 bytes).
    ///
    /// ```
    /// use ai_core::{ToolCall, ToolCallId, ToolErrorCode, ToolFailure, ToolInvocationRecord};
    /// let call = ToolCall {
    ///     id: ToolCallId::new("c1").unwrap(),
    ///     name: "core__wait".into(),
    ///     arguments: "{}".into(),
    /// };
    /// let failure = ToolFailure::new(ToolErrorCode::Execution, "it failed");
    /// let record = ToolInvocationRecord::failed(&call, failure, 5, 7);
    /// assert_eq!(
    ///     (&*record.tool_id, record.started_at_ms, record.ended_at_ms),
    ///     ("core__wait", 5, 7)
    /// );
    /// assert!(record.args.is_none() && record.attempts.is_empty());
    /// ```
    pub fn failed(
        call: &ToolCall,
        failure: ToolFailure,
        started_at_ms: u64,
        ended_at_ms: u64,
    ) -> Self {
        Self {
            tool_call_id: call.id.clone(),
            tool_id: recorded_name(&call.name),
            args: None,
            result: None,
            error: Some(failure),
            started_at_ms,
            ended_at_ms,
            attempts: Vec::new(),
            raw: None,
        }
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn truncate(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// How spans name a tool the model sent a malformed name for: the name itself is never echoed.
const INVALID_NAME: &str = "(invalid tool name)";

/// The failure of a call whose tool name is no valid tool id (`name`, as the model sent it, is
/// not quoted: it may hold anything). It is the model's mistake, which it can correct, not a
/// tool that is down: `validation`, saying whether the call named no tool at all (an empty or
/// whitespace-only name, as some servers send for a call they lost the name of) or a malformed
/// one (GPT-4o's `multi_tool_use.parallel`, a name without the namespace).
#[cold]
fn invalid_name(name: &str) -> ToolFailure {
    ToolFailure::new(
        ToolErrorCode::Validation,
        if name.trim().is_empty() {
            "the call names no tool: call one of your tools by its exact name"
        } else {
            "the call's tool name is not a valid tool name (core__<name> or \
             mcp__<server>__<tool>, of letters, digits, `_` and `-`, at most 64): call one of \
             your tools by its exact name"
        },
    )
}

/// What [`install_tool_panic_hook`] calls the clock port.
const THE_CLOCK: &str = "the clock";

/// The event sink a caller gives [`ToolRunner::run_tool`], called as a port ([`port_call`]): a
/// panic in it is reported by [`install_tool_panic_hook`] as the event sink's, without its
/// message. The panic still unwinds, to the caller.
struct SinkPort<'a>(&'a dyn EventSink);

/// What [`install_tool_panic_hook`] calls the caller's event sink.
const THE_EVENT_SINK: &str = "the event sink";

impl EventSink for SinkPort<'_> {
    fn emit(&self, event: AiEvent) {
        port_call(THE_EVENT_SINK, || self.0.emit(event));
    }

    fn record(&self, record: &ToolInvocationRecord) {
        port_call(THE_EVENT_SINK, || self.0.record(record));
    }
}

/// Why arguments that serde_json could not read into a value are refused, never quoting them.
///
/// Valid JSON that serde_json cannot read is not invalid, and the model is told what to change
/// (`validation`): nested past what it reads (128 levels), too deep; a number out of f64's
/// range (`1e400`); a lone surrogate escape in a string (`"\ud800"`). The decoders keep
/// arguments holding these as the model sent them, so a call can bring them. Whether the text
/// is valid JSON is asked of serde_json's skipping reader, which reads no number or escape and
/// has no depth limit; anything else is `invalid_json`.
fn unreadable_arguments(raw: &str, error: &serde_json::Error) -> ToolFailure {
    let invalid = || ToolFailure::new(ToolErrorCode::InvalidJson, "Invalid tool arguments JSON");
    if error.classify() != serde_json::error::Category::Syntax
        || serde_json::from_str::<serde::de::IgnoredAny>(raw).is_err()
    {
        return invalid();
    }
    let message = match Unreadable::of(&error.to_string()) {
        Some(Unreadable::TooDeep) => {
            format!("tool arguments nest more than {MAX_JSON_DEPTH} levels deep")
        }
        Some(Unreadable::OutOfRange) => {
            "tool arguments hold a number out of range (beyond about ±1.8e308)".to_owned()
        }
        Some(Unreadable::LoneSurrogate) => "tool arguments hold a lone surrogate escape \
                                            (\\ud800 to \\udfff without its pair) in a string"
            .to_owned(),
        None => return invalid(),
    };
    ToolFailure::new(ToolErrorCode::Validation, message)
}

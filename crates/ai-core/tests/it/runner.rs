//! The runner pipeline, one test per step and per error code.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ai_core::{
    AiEvent, AuthCapability, AuthError, Authorizer, AuthzDecision, BoundTool, ConnectionBroker,
    ConnectionId, MAX_SAFE_MESSAGE_BYTES, RunContext, ToolEffect, ToolErrorCategory, ToolErrorCode,
    ToolFailure, ToolId, ToolInvocationContext, ToolOutcome, ToolPolicy, ToolRun,
};
use serde_json::{Value, json};

use crate::support::{Behaviour, CanaryBroker, FakeTool, Harness, PANIC_IN_CHECK, allow};

const ECHO: &str = "core__echo";

fn tool(behaviour: Behaviour) -> Arc<FakeTool> {
    Arc::new(FakeTool::new(ECHO, ToolEffect::ReadOnly, behaviour))
}

fn harness(tool: Arc<FakeTool>, policy: ToolPolicy) -> Harness {
    Harness::new(vec![tool as Arc<dyn BoundTool>], policy)
}

/// Every run, whatever happened, answers the call it was given and emits exactly one start and
/// one result for it, the result last.
fn assert_answered(h: &Harness, run: &ToolRun) {
    assert_eq!(run.result.tool_call_id.as_str(), "call_1");
    assert_eq!(run.record.tool_call_id.as_str(), "call_1");
    let events = h.events.events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        matches!(&events[0], AiEvent::ToolCallStart { tool_call_id, .. } if tool_call_id.as_str() == "call_1")
    );
    match &events[1] {
        AiEvent::ToolCallResult {
            tool_call_id,
            outcome,
            ..
        } => {
            assert_eq!(tool_call_id.as_str(), "call_1");
            assert_eq!(outcome, &run.result.outcome);
        }
        other => panic!("expected a result event, got {other:?}"),
    }
    assert!(run.record.ended_at_ms > run.record.started_at_ms);
}

/// Asserts the call failed with `code` and a message containing `message`.
fn check_failure(h: &Harness, run: &ToolRun, code: ToolErrorCode, message: &str) {
    assert_answered(h, run);
    let failure = run
        .result
        .failure()
        .unwrap_or_else(|| panic!("expected {code}, got {run:?}"));
    assert_eq!(failure.code, code, "{failure:?}");
    assert!(
        failure.safe_message.contains(message),
        "{:?} does not contain {message:?}",
        failure.safe_message
    );
    assert_eq!(run.record.error.as_ref(), Some(failure));
    assert_eq!(run.record.result, None);
}

fn check_ok(h: &Harness, run: &ToolRun, expected: Value) {
    assert_answered(h, run);
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: expected.clone().into()
        }
    );
    assert_eq!(run.record.result.as_deref(), Some(&expected));
    assert_eq!(run.record.error, None);
}

/// Without Tokio's time driver (a runtime built without `enable_time()`), the runner runs a call
/// that never has to wait, and panics with Tokio's message, which names the fix, once one does
/// (its tool does not finish on its first poll), as docs/library.md says.
#[test]
fn without_the_time_driver_a_call_that_waits_panics_with_tokios_message() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let h = harness(tool(Behaviour::Echo), allow(&[ECHO]));
    let run = runtime.block_on(h.call(ECHO, r#"{"text":"hi"}"#));
    check_ok(&h, &run, json!({"echo": "hi"}));

    let h = harness(tool(Behaviour::YieldOnce), allow(&[ECHO]));
    let waits = std::panic::AssertUnwindSafe(|| runtime.block_on(h.call(ECHO, r#"{"text":"hi"}"#)));
    let panic = std::panic::catch_unwind(waits).unwrap_err();
    let message = panic
        .downcast_ref::<&str>()
        .map(|m| m.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(message.contains("enable_time"), "{message}");
}

#[tokio::test]
async fn success_runs_every_step_and_redacts() {
    let t = tool(Behaviour::Echo);
    let h = harness(t.clone(), allow(&[ECHO]));
    let run = h.call(ECHO, r#"{"text":"hi"}"#).await;
    check_ok(&h, &run, json!({"echo": "hi"}));
    assert_eq!(run.record.args.as_deref(), Some(&json!({"text": "hi"})));
    assert_eq!(t.runs.load(Ordering::SeqCst), 1);
    // The start event carries the validated arguments.
    assert!(
        matches!(&h.events.events()[0], AiEvent::ToolCallStart { args: Some(a), .. } if **a == json!({"text": "hi"}))
    );
}

#[tokio::test]
async fn step1_an_unknown_tool_is_unavailable() {
    let h = harness(tool(Behaviour::Echo), allow(&[ECHO]));
    let run = h.call("core__nope", "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::Unavailable,
        "core__nope is not available",
    );
}

/// A call that names no tool, or names one in a form no tool has, is the model's mistake, not a
/// tool that is down: it ends `validation`, saying what was wrong with the name and never
/// quoting it, and nothing runs.
#[tokio::test]
async fn step1_a_call_naming_no_tool_or_an_invalid_one_is_validation() {
    let named_no_tool = "the call names no tool: call one of your tools by its exact name";
    let invalid = "the call's tool name is not a valid tool name (core__<name> or \
                   mcp__<server>__<tool>, of letters, digits, `_` and `-`, at most 64): call one \
                   of your tools by its exact name";
    for (name, message) in [
        ("", named_no_tool),
        (" \t\n", named_no_tool),
        ("rm -rf /", invalid),
        ("multi_tool_use.parallel", invalid),
        ("get_weather", invalid),
        ("core__echo ", invalid),
    ] {
        let t = tool(Behaviour::Echo);
        let h = harness(t.clone(), allow(&[ECHO]));
        let run = h.call(name, "{}").await;
        check_failure(&h, &run, ToolErrorCode::Validation, message);
        assert_eq!(
            run.result.failure().unwrap().safe_message,
            message,
            "{name:?}"
        );
        assert_eq!(t.runs.load(Ordering::SeqCst), 0);
    }
}

#[tokio::test]
async fn step2_deny_by_default() {
    let t = tool(Behaviour::Echo);
    let h = harness(t.clone(), ToolPolicy::default());
    assert!(h.catalog.is_empty());
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::PolicyDenied, "not allowed");
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

/// A state-changing tool under a policy that allows it once a human approves.
fn approval_harness() -> (Arc<FakeTool>, Harness) {
    let t = Arc::new(FakeTool::new(
        ECHO,
        ToolEffect::StateChange,
        Behaviour::Echo,
    ));
    let mut policy = allow(&[ECHO]);
    policy
        .require_approval_for_effects
        .insert(ToolEffect::StateChange);
    (t.clone(), harness(t, policy))
}

/// A tool whose effect needs approval is shown, and a call to it pauses (no start, no result,
/// an `ApprovalRequired` with the hash of its tool's id and canonical arguments) until an
/// approval naming the call id and that hash is present; a mismatched approval fails closed.
#[tokio::test]
async fn step2_require_approval_pauses_until_an_exact_approval() {
    let (t, mut h) = approval_harness();
    assert!(h.catalog.contains(&ToolId::parse(ECHO).unwrap()));

    let run = h.call(ECHO, r#"{ "text" : "hi" }"#).await;
    let ToolOutcome::ApprovalRequired { args_hash } = &run.result.outcome else {
        panic!("expected a pause, got {run:?}")
    };
    assert_eq!(
        args_hash,
        &ai_core::sha256_hex(b"core__echo\n{\"text\":\"hi\"}")
    );
    let events = h.events.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        matches!(&events[0], AiEvent::ApprovalRequired { tool_call_id, args_hash: h, .. }
        if tool_call_id.as_str() == "call_1" && h == args_hash)
    );
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);

    // An approval for other arguments is a denial, never a run.
    h.resume_approving("0".repeat(64));
    let run = h.call(ECHO, r#"{"text":"hi"}"#).await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::PolicyDenied,
        "does not match its tool and arguments",
    );
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);

    // The exact approval runs it (whitespace and key order do not change the hash).
    h.resume_approving(args_hash.clone());
    let run = h.call(ECHO, r#"{"text":"hi"}"#).await;
    check_ok(&h, &run, json!({"echo": "hi"}));
    assert_eq!(t.runs.load(Ordering::SeqCst), 1);
}

/// An approval binds the tool as well as the call id and the arguments: call ids are the
/// provider's and some repeat them (`call_0` on every turn), so an approval of one tool's call
/// under an id never lets another tool's call under that id, with the same arguments, run.
#[tokio::test]
async fn step2_an_approval_of_one_tool_does_not_run_another_under_the_same_call_id() {
    const OTHER: &str = "core__other";
    let gated = |name| {
        Arc::new(FakeTool::new(
            name,
            ToolEffect::StateChange,
            Behaviour::Echo,
        ))
    };
    let (echo, other) = (gated(ECHO), gated(OTHER));
    let mut policy = allow(&[ECHO, OTHER]);
    policy
        .require_approval_for_effects
        .insert(ToolEffect::StateChange);
    let tools: Vec<Arc<dyn BoundTool>> = vec![echo.clone(), other.clone()];
    let mut h = Harness::new(tools, policy);

    let run = h.call(ECHO, r#"{"text":"hi"}"#).await;
    let ToolOutcome::ApprovalRequired { args_hash } = run.result.outcome else {
        panic!("expected a pause, got {run:?}")
    };
    h.resume_approving(args_hash);
    let run = h.call(OTHER, r#"{"text":"hi"}"#).await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::PolicyDenied,
        "the approval for this call of core__other does not match its tool and arguments",
    );
    assert_eq!(other.runs.load(Ordering::SeqCst), 0);

    // The approval still runs the call it was given for.
    h.events = Default::default();
    let run = h.call(ECHO, r#"{"text":"hi"}"#).await;
    check_ok(&h, &run, json!({"echo": "hi"}));
    assert_eq!(echo.runs.load(Ordering::SeqCst), 1);
}

/// A cancelled run asks for no approval: the call that would pause ends `cancelled`, answered
/// like any other, so the run can finish with every call answered.
#[tokio::test]
async fn step2_a_cancelled_run_asks_for_no_approval() {
    let (t, h) = approval_harness();
    h.cancel.cancel();
    let run = h.call(ECHO, r#"{"text":"hi"}"#).await;
    check_failure(&h, &run, ToolErrorCode::Cancelled, "cancelled");
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn step2_a_tool_outside_the_runs_catalog_is_refused_even_if_the_policy_allows_it() {
    let t = tool(Behaviour::Echo);
    let mut h = harness(t.clone(), allow(&[ECHO]));
    h.catalog = ai_core::ToolCatalog::default();
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::PolicyDenied,
        "not in this run's catalog",
    );
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

struct DenyAll;

#[async_trait::async_trait]
impl Authorizer for DenyAll {
    async fn check(&self, _: &RunContext, _: &ToolId) -> AuthzDecision {
        AuthzDecision::Deny
    }
}

#[tokio::test]
async fn step3_authz_hook_denies() {
    let t = tool(Behaviour::Echo);
    let mut h = harness(t.clone(), allow(&[ECHO]));
    h.runner = h.runner.clone().with_authorizer(Arc::new(DenyAll));
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::AuthzDenied,
        "may not execute core__echo",
    );
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

/// A hook that never answers.
struct Hanging;

#[async_trait::async_trait]
impl Authorizer for Hanging {
    async fn check(&self, _: &RunContext, _: &ToolId) -> AuthzDecision {
        std::future::pending().await
    }
}

#[async_trait::async_trait]
impl ConnectionBroker for Hanging {
    async fn resolve(
        &self,
        _: &ConnectionId,
        _: &ToolInvocationContext,
    ) -> Result<Box<dyn AuthCapability>, AuthError> {
        std::future::pending().await
    }
}

/// The ports awaited before the tool (steps 3 and 6) answer within the runtime budget and give
/// way to cancellation, like the tool itself: a hung token service cannot hold the run open.
#[tokio::test(start_paused = true)]
async fn steps3_and_6_a_hung_port_ends_as_timeout_or_cancelled() {
    let mut policy = allow(&[ECHO]);
    policy.budgets.max_runtime_ms = 100;
    let t = tool(Behaviour::Echo);
    let mut h = harness(t.clone(), policy.clone());
    h.runner = h.runner.clone().with_authorizer(Arc::new(Hanging));
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::Timeout,
        "the call ran out of its 100 ms budget waiting for the authorization hook",
    );

    let needs_connection = || {
        Arc::new(
            FakeTool::new(ECHO, ToolEffect::ReadOnly, Behaviour::UseToken).needing_connection(),
        ) as Arc<dyn BoundTool>
    };
    let ctx = connection_ctx(&["c1"], &["c1"], Some("c1"));
    let mut h = Harness::with_ctx(vec![needs_connection()], policy, ctx.clone());
    h.runner = h.runner.clone().with_broker(Arc::new(Hanging));
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::Timeout,
        "the call ran out of its 100 ms budget waiting for the connection broker",
    );

    // Cancelled while the broker hangs, well inside the budget.
    let mut h = Harness::with_ctx(vec![needs_connection()], allow(&[ECHO]), ctx);
    h.runner = h.runner.clone().with_broker(Arc::new(Hanging));
    let cancel = h.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        cancel.cancel();
    });
    let started = tokio::time::Instant::now();
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Cancelled, "cancelled");
    assert_eq!(started.elapsed(), Duration::from_millis(10));
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

fn conn(raw: &str) -> ConnectionId {
    ConnectionId::new(raw).unwrap()
}

/// A context where the actor was granted `granted`, the request asked for `requested`, and the
/// request selected `selected`.
fn connection_ctx(granted: &[&str], requested: &[&str], selected: Option<&str>) -> RunContext {
    let mut ctx = RunContext::new("run-1", "user:alice", "tenant-1").unwrap();
    ctx.grant.allowed_connection_ids = granted.iter().map(|c| conn(c)).collect();
    ctx.requested_connection_ids = requested.iter().map(|c| conn(c)).collect();
    ctx.connection_id = selected.map(conn);
    ctx
}

fn connection_harness(ctx: RunContext) -> (Harness, Arc<FakeTool>, Arc<CanaryBroker>) {
    let t = Arc::new(
        FakeTool::new(ECHO, ToolEffect::ReadOnly, Behaviour::UseToken).needing_connection(),
    );
    let broker = Arc::new(CanaryBroker::default());
    let mut h = Harness::with_ctx(vec![t.clone() as Arc<dyn BoundTool>], allow(&[ECHO]), ctx);
    h.runner = h.runner.clone().with_broker(broker.clone());
    (h, t, broker)
}

#[tokio::test]
async fn step4_connection_must_be_selected() {
    let (h, t, broker) = connection_harness(connection_ctx(&["c1"], &["c1"], None));
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Validation, "needs a connection");
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
    assert!(broker.resolved.lock().unwrap().is_empty());
}

/// The confused deputy: the request selects a connection the actor was never granted (someone
/// else's). The runner refuses before the broker is asked for anything.
#[tokio::test]
async fn step4_confused_deputy_is_refused_before_the_broker() {
    for ctx in [
        // Requested but not granted.
        connection_ctx(&["alice-gh"], &["alice-gh", "victim-gh"], Some("victim-gh")),
        // Granted but not requested by this request.
        connection_ctx(
            &["alice-gh", "alice-mail"],
            &["alice-gh"],
            Some("alice-mail"),
        ),
        // Empty intersection.
        connection_ctx(&[], &["victim-gh"], Some("victim-gh")),
    ] {
        let (h, t, broker) = connection_harness(ctx);
        let run = h.call(ECHO, "{}").await;
        check_failure(&h, &run, ToolErrorCode::PolicyDenied, "not granted");
        assert_eq!(t.runs.load(Ordering::SeqCst), 0);
        assert!(broker.resolved.lock().unwrap().is_empty());
    }
}

#[tokio::test]
async fn step6_auth_capability_is_bound_to_the_granted_connection_only() {
    let (h, t, broker) = connection_harness(connection_ctx(&["c1", "c2"], &["c1"], Some("c1")));
    let run = h.call(ECHO, "{}").await;
    // The token is in a field that is not allowlisted: it is stripped.
    check_ok(&h, &run, json!({"connection": "c1"}));
    assert_eq!(t.runs.load(Ordering::SeqCst), 1);
    assert_eq!(*broker.resolved.lock().unwrap(), vec!["c1".to_owned()]);

    // Each invocation resolves again: nothing is cached.
    let run = h.call(ECHO, "{}").await;
    assert!(run.result.failure().is_none());
    assert_eq!(broker.resolved.lock().unwrap().len(), 2);
}

/// An approval binds the connection of a tool that needs one: a resume that selects another
/// connection the actor is also granted does not run the call approved on the first one (a
/// confused deputy through the approval), and the broker is never asked. A tool without a
/// connection keeps the hash of its id and arguments alone (`step2_…_exact_approval`).
#[tokio::test]
async fn step2_an_approval_on_one_connection_does_not_run_the_call_on_another() {
    let gated = Arc::new(
        FakeTool::new(ECHO, ToolEffect::StateChange, Behaviour::UseToken).needing_connection(),
    );
    let mut policy = allow(&[ECHO]);
    policy
        .require_approval_for_effects
        .insert(ToolEffect::StateChange);
    let ctx = connection_ctx(&["c1", "c2"], &["c1", "c2"], Some("c1"));
    let broker = Arc::new(CanaryBroker::default());
    let mut h = Harness::with_ctx(vec![gated.clone() as Arc<dyn BoundTool>], policy, ctx);
    h.runner = h.runner.clone().with_broker(broker.clone());

    let run = h.call(ECHO, "{}").await;
    let ToolOutcome::ApprovalRequired { args_hash } = run.result.outcome else {
        panic!("expected a pause, got {run:?}")
    };
    assert_eq!(args_hash, ai_core::sha256_hex(b"core__echo\nc1\n{}"));

    h.resume_approving(args_hash);
    h.ctx.connection_id = Some(conn("c2"));
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::PolicyDenied,
        "the approval for this call of core__echo does not match its tool, connection and \
         arguments",
    );
    assert_eq!(gated.runs.load(Ordering::SeqCst), 0);
    assert!(broker.resolved.lock().unwrap().is_empty());

    // On the connection it was approved for, the call runs.
    h.events = Default::default();
    h.ctx.connection_id = Some(conn("c1"));
    let run = h.call(ECHO, "{}").await;
    check_ok(&h, &run, json!({"connection": "c1"}));
    assert_eq!(*broker.resolved.lock().unwrap(), vec!["c1".to_owned()]);
}

#[tokio::test]
async fn step6_broker_failure_is_authz_denied() {
    let (h, t, _) = connection_harness(connection_ctx(
        &["conn-broken"],
        &["conn-broken"],
        Some("conn-broken"),
    ));
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::AuthzDenied,
        "the connection has expired",
    );
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

/// A broker that panics.
struct PanickingBroker;

#[async_trait::async_trait]
impl ConnectionBroker for PanickingBroker {
    async fn resolve(
        &self,
        _: &ConnectionId,
        _: &ToolInvocationContext,
    ) -> Result<Box<dyn AuthCapability>, AuthError> {
        panic!("a broken broker");
    }
}

/// A panic in a port (here the broker of step 6) is not the tool's: it unwinds out of
/// `run_tool`, with no result event, for the caller to answer (as `graph`'s driver does), as
/// `run_tool`'s docs say.
#[tokio::test]
async fn step6_a_ports_panic_unwinds_to_the_caller() {
    let t = Arc::new(
        FakeTool::new(ECHO, ToolEffect::ReadOnly, Behaviour::UseToken).needing_connection(),
    );
    let mut h = Harness::with_ctx(
        vec![t.clone() as Arc<dyn BoundTool>],
        allow(&[ECHO]),
        connection_ctx(&["c1"], &["c1"], Some("c1")),
    );
    h.runner = h.runner.clone().with_broker(Arc::new(PanickingBroker));
    let h = Arc::new(h);
    let running = Arc::clone(&h);
    let joined = tokio::spawn(async move { running.call(ECHO, "{}").await }).await;
    assert!(joined.is_err_and(|e| e.is_panic()));
    assert!(
        !h.events
            .events()
            .iter()
            .any(|e| matches!(e, AiEvent::ToolCallResult { .. }))
    );
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn step6_no_broker_configured_is_unavailable() {
    let t = Arc::new(
        FakeTool::new(ECHO, ToolEffect::ReadOnly, Behaviour::UseToken).needing_connection(),
    );
    let h = Harness::with_ctx(
        vec![t.clone() as Arc<dyn BoundTool>],
        allow(&[ECHO]),
        connection_ctx(&["c1"], &["c1"], Some("c1")),
    );
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Unavailable, "no connection broker");
}

#[tokio::test]
async fn step5_invalid_json() {
    let t = tool(Behaviour::Echo);
    let h = harness(t.clone(), allow(&[ECHO]));
    let run = h.call(ECHO, r#"{"text": "sk-secret-in-args"#).await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::InvalidJson,
        "Invalid tool arguments JSON",
    );
    assert!(!run.result.model_content().contains("sk-secret-in-args"));
    assert_eq!(run.record.args, None);
    // The start event has no arguments: they never parsed.
    assert!(matches!(
        &h.events.events()[0],
        AiEvent::ToolCallStart { args: None, .. }
    ));
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn step5_schema_validation() {
    let t = tool(Behaviour::Echo);
    let h = harness(t.clone(), allow(&[ECHO]));
    let run = h.call(ECHO, r#"{"text": 42}"#).await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::Validation,
        "/text: expected a string",
    );
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

/// A `permanent` error from the input check is the tool's own fault: `execution`, so the model
/// is not told to correct a call that was right; the tool never runs.
#[tokio::test]
async fn step5_an_input_check_that_blames_itself_is_execution() {
    let t = tool(Behaviour::BrokenInputCheck);
    let h = harness(t.clone(), allow(&[ECHO]));
    let run = h.call(ECHO, r#"{"text": "fine"}"#).await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::Execution,
        "the tool cannot take these arguments: the input type is broken",
    );
    assert_eq!(t.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn step5_empty_arguments_mean_no_arguments() {
    let h = harness(tool(Behaviour::Echo), allow(&[ECHO]));
    let run = h.call(ECHO, "").await;
    check_ok(&h, &run, json!({"echo": null}));
}

#[tokio::test]
async fn step5_arguments_over_the_limit_are_refused_before_parsing() {
    let t = tool(Behaviour::Echo);
    let h = harness(t.clone(), allow(&[ECHO]));
    let args = format!(r#"{{"text":"{}"}}"#, "x".repeat(8 * 1024));
    let run = h.call(ECHO, &args).await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::Validation,
        "over the 8192-byte limit",
    );

    let mut policy = allow(&[ECHO]);
    policy.budgets.max_args_bytes = 16 * 1024;
    let h = harness(tool(Behaviour::Echo), policy);
    assert!(h.call(ECHO, &args).await.result.failure().is_none());
}

#[tokio::test]
async fn step8_tool_failure_is_execution() {
    let h = harness(tool(Behaviour::Fail), allow(&[ECHO]));
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Execution, "the fake tool failed");
}

#[tokio::test]
async fn step8_tool_panic_is_execution() {
    let h = harness(tool(Behaviour::Panic), allow(&[ECHO]));
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Execution, "failed unexpectedly");
}

/// A tool that is not read-only and panics stopped midway, with no word of what it had done:
/// like one stopped at its deadline, it may have made its change, and the model is told to
/// check before calling it again. A read-only tool's panic says only that it failed.
#[tokio::test]
async fn step8_a_tool_that_is_not_read_only_and_panics_may_have_made_its_change() {
    for effect in [
        ToolEffect::StateChange,
        ToolEffect::ExternalSideEffect,
        ToolEffect::ReadOnly,
    ] {
        let t = Arc::new(FakeTool::new(ECHO, effect, Behaviour::Panic));
        let h = harness(t, allow(&[ECHO]));
        let run = h.call(ECHO, "{}").await;
        check_failure(&h, &run, ToolErrorCode::Execution, "failed unexpectedly");
        let said = &run.result.failure().unwrap().safe_message;
        assert_eq!(
            said.contains(MAY_HAVE_CHANGED),
            effect != ToolEffect::ReadOnly,
            "{effect:?}: {said}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn step8_runtime_budget_is_timeout() {
    let mut policy = allow(&[ECHO]);
    policy.budgets.max_runtime_ms = 100;
    let h = harness(
        tool(Behaviour::Sleep(Duration::from_millis(101))),
        policy.clone(),
    );
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Timeout, "within 100 ms");

    let h = harness(tool(Behaviour::Sleep(Duration::from_millis(99))), policy);
    assert!(h.call(ECHO, "{}").await.result.failure().is_none());
}

/// A tool's own failure message (a remote error body it passes on, say) reaches the model, the
/// events and the record cut to [`MAX_SAFE_MESSAGE_BYTES`], at a character boundary: a failure
/// cannot flood the model's context where a result could not.
#[tokio::test]
async fn step8_a_tools_long_failure_message_is_cut() {
    let long = "é".repeat(50_000);
    let h = harness(tool(Behaviour::FailWith(long)), allow(&[ECHO]));
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Execution, "the tool failed: éé");
    let message = &run.result.failure().unwrap().safe_message;
    assert!(message.len() <= MAX_SAFE_MESSAGE_BYTES, "{}", message.len());
    assert!(
        message.len() > MAX_SAFE_MESSAGE_BYTES - 8,
        "{}",
        message.len()
    );
    assert!(message.ends_with("é…"), "{message}");
}

/// So is a failure the tool gives before an attempt (`BoundTool::refused_before_attempt`, as a
/// replay gives its recorded one): `ToolFailure`'s fields are public, so one built without its
/// constructors reaches the runner uncut, and is cut where the runner answers the call.
#[tokio::test]
async fn step8_a_tools_long_refusal_before_an_attempt_is_cut() {
    let refusal = ToolFailure {
        code: ToolErrorCode::CircuitOpen,
        category: ToolErrorCategory::Transient,
        retryable: true,
        retry_after_ms: Some(5),
        safe_message: "é".repeat(50_000),
    };
    let refusing = FakeTool::new(ECHO, ToolEffect::ReadOnly, Behaviour::Echo).refusing(refusal);
    let h = harness(Arc::new(refusing), allow(&[ECHO]));
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::CircuitOpen, "éé");
    let failure = run.result.failure().unwrap();
    let message = &failure.safe_message;
    assert!(message.len() <= MAX_SAFE_MESSAGE_BYTES, "{}", message.len());
    assert!(message.ends_with("é…"), "{message}");
    assert_eq!(failure.retry_after_ms, Some(5), "the rest is kept as given");
}

/// A runtime budget as long as the policy's integer holds (a program's "no limit") is a deadline
/// far away, never an overflow of the clock: the tool, its retries and the ports all run.
#[tokio::test]
async fn step8_the_longest_runtime_budget_never_overflows_the_clock() {
    let mut policy = allow(&[ECHO]);
    policy.budgets.max_runtime_ms = u64::MAX;
    let h = harness(
        tool(Behaviour::Sleep(Duration::from_millis(1))),
        policy.clone(),
    );
    assert!(h.call(ECHO, "{}").await.result.failure().is_none());

    let mut h = harness(tool(Behaviour::Sleep(Duration::from_millis(1))), policy);
    h.runner = h
        .runner
        .clone()
        .with_authorizer(Arc::new(SlowAllow(Duration::from_millis(1))));
    assert!(h.call(ECHO, "{}").await.result.failure().is_none());
}

/// A tool that blocks its thread cannot be stopped at the deadline; finished past it, it still
/// ends `timeout`: the budget holds for what the tool returns, if not for when.
#[tokio::test]
async fn step8_a_tool_that_blocks_past_its_budget_is_timeout() {
    let mut policy = allow(&[ECHO]);
    policy.budgets.max_runtime_ms = 20;
    let h = harness(tool(Behaviour::Block(Duration::from_millis(60))), policy);
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Timeout, "within 20 ms");
}

/// A panic in the tool's own checks (steps 5, 9, 10) is caught like one in `exec`: the call is
/// answered with the step's code and the run goes on.
#[tokio::test]
async fn a_panic_in_a_tools_checks_is_a_coded_failure() {
    let cases = [
        // The input check panics on the text itself.
        (
            PANIC_IN_CHECK,
            Behaviour::Echo,
            ToolErrorCode::Execution,
            "checking its arguments",
        ),
        // The output check panics on the echo the tool returns.
        (
            "hi",
            Behaviour::Output(json!({"echo": PANIC_IN_CHECK})),
            ToolErrorCode::OutputValidation,
            "its check failed unexpectedly",
        ),
        // The redaction panics on the echoed text.
        (
            "panic in redact",
            Behaviour::Echo,
            ToolErrorCode::RedactionFailed,
            "none of it is shown",
        ),
    ];
    for (text, behaviour, code, message) in cases {
        let h = harness(tool(behaviour), allow(&[ECHO]));
        let run = h.call(ECHO, &format!(r#"{{"text":"{text}"}}"#)).await;
        check_failure(&h, &run, code, message);
    }
}

#[tokio::test(start_paused = true)]
async fn step8_cancellation() {
    // Cancelled while the tool runs.
    let h = harness(
        tool(Behaviour::Sleep(Duration::from_secs(5))),
        allow(&[ECHO]),
    );
    let cancel = h.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        cancel.cancel();
    });
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Cancelled, "cancelled");

    // Cancelled before the call: the tool never runs.
    let t = tool(Behaviour::Echo);
    let h = harness(t.clone(), allow(&[ECHO]));
    h.cancel.cancel();
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Cancelled, "cancelled");
}

/// A tool written by hand that does its work as `exec` is called, before it hands back its
/// future (the kind the runner calls as the tool's code, so that its panic there is caught).
struct WorksUpFront {
    spec: ai_core::ToolSpec,
    runs: std::sync::atomic::AtomicUsize,
}

impl BoundTool for WorksUpFront {
    fn spec(&self) -> &ai_core::ToolSpec {
        &self.spec
    }
    fn validate_input(&self, args: Value) -> Result<Value, ai_core::ToolError> {
        Ok(args)
    }
    #[allow(clippy::type_complexity)] // The trait's signature, desugared.
    fn exec<'a, 'b, 'c, 'd>(
        &'a self,
        _: ai_core::ExecPermit,
        _: Arc<Value>,
        _: &'b ToolInvocationContext,
        _: &'c ai_core::Capabilities,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Value, ai_core::ToolError>> + Send + 'd>,
    >
    where
        'a: 'd,
        'b: 'd,
        'c: 'd,
        Self: 'd,
    {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(json!({})) })
    }
    fn validate_output(&self, _: &Value) -> Result<(), ai_core::ToolError> {
        Ok(())
    }
    fn redact(&self, value: Value) -> Result<Value, ai_core::ToolError> {
        Ok(value)
    }
}

/// A call cancelled before its tool starts does not call the tool's `exec` at all: a tool that
/// does its work as it is called, before it hands back its future, does none of it, and the
/// model is told only that the call was cancelled.
#[tokio::test]
async fn step8_a_cancelled_call_does_not_call_exec() {
    let t = Arc::new(WorksUpFront {
        spec: ai_core::ToolSpec {
            id: ToolId::parse(ECHO).unwrap(),
            description: "works as it is called".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::StateChange,
            redaction: ai_core::Redaction { allow: Vec::new() },
        },
        runs: Default::default(),
    });
    let h = Harness::new(vec![t.clone() as Arc<dyn BoundTool>], allow(&[ECHO]));
    h.cancel.cancel();
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Cancelled, "cancelled");
    assert_eq!(
        run.result.failure().unwrap().safe_message,
        "the tool call was cancelled"
    );
    assert_eq!(t.runs.load(Ordering::SeqCst), 0, "exec was called");
}

/// What the model is told of a tool that is not read-only and was stopped once it had started.
const MAY_HAVE_CHANGED: &str = "the tool is not read-only and had started, so it may have made its change: check before \
     calling it again";

/// A tool that is not read-only, stopped once its future had started (its budget ran out, or
/// the run was cancelled), may have made its change (a workspace write commits on a thread the
/// dropped future does not stop): the model is told to check before calling it again, under the
/// same code. A read-only tool is told nothing of the kind, nor is a call stopped before its tool
/// started.
#[tokio::test(start_paused = true)]
async fn step8_a_stopped_tool_that_is_not_read_only_may_have_made_its_change() {
    for effect in [
        ToolEffect::StateChange,
        ToolEffect::ExternalSideEffect,
        ToolEffect::ReadOnly,
    ] {
        let changes = effect != ToolEffect::ReadOnly;
        let slow = || {
            Arc::new(FakeTool::new(
                ECHO,
                effect,
                Behaviour::Sleep(Duration::from_secs(5)),
            ))
        };
        let said = |run: &ToolRun| run.result.failure().unwrap().safe_message.clone();

        let mut policy = allow(&[ECHO]);
        policy.budgets.max_runtime_ms = 100;
        let h = harness(slow(), policy);
        let run = h.call(ECHO, "{}").await;
        check_failure(
            &h,
            &run,
            ToolErrorCode::Timeout,
            "the tool did not finish within 100 ms",
        );
        assert_eq!(
            said(&run).contains(MAY_HAVE_CHANGED),
            changes,
            "{effect:?}: {}",
            said(&run)
        );

        let h = harness(slow(), allow(&[ECHO]));
        let cancel = h.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            cancel.cancel();
        });
        let run = h.call(ECHO, "{}").await;
        check_failure(
            &h,
            &run,
            ToolErrorCode::Cancelled,
            "the tool call was cancelled",
        );
        assert_eq!(
            said(&run).contains(MAY_HAVE_CHANGED),
            changes,
            "{effect:?}: {}",
            said(&run)
        );

        // Cancelled before the call: the tool never started, and the message says only that.
        let t = slow();
        let h = harness(t.clone(), allow(&[ECHO]));
        h.cancel.cancel();
        let run = h.call(ECHO, "{}").await;
        check_failure(&h, &run, ToolErrorCode::Cancelled, "cancelled");
        assert_eq!(said(&run), "the tool call was cancelled");
        assert_eq!(t.runs.load(Ordering::SeqCst), 0);
    }
}

/// A tool that is not read-only and blocks its thread past its budget did finish: what it was
/// called for may well be done, though the call ends `timeout`. The model is told so.
#[tokio::test]
async fn step8_a_tool_that_is_not_read_only_and_blocks_past_its_budget_may_have_made_its_change() {
    let mut policy = allow(&[ECHO]);
    policy.budgets.max_runtime_ms = 20;
    let t = Arc::new(FakeTool::new(
        ECHO,
        ToolEffect::StateChange,
        Behaviour::Block(Duration::from_millis(60)),
    ));
    let h = harness(t, policy);
    let run = h.call(ECHO, "{}").await;
    check_failure(&h, &run, ToolErrorCode::Timeout, "within 20 ms");
    check_failure(&h, &run, ToolErrorCode::Timeout, MAY_HAVE_CHANGED);
}

#[tokio::test]
async fn step9_output_validation() {
    let h = harness(tool(Behaviour::Output(json!([1, 2]))), allow(&[ECHO]));
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::OutputValidation,
        "/: expected an object",
    );
}

#[tokio::test]
async fn step10_redaction_strips_fields_not_allowlisted() {
    let output = json!({"echo": "shown", "hidden": "internal", "token": "x", "nested": {"a": 1}});
    let h = harness(tool(Behaviour::Output(output)), allow(&[ECHO]));
    let run = h.call(ECHO, "{}").await;
    check_ok(&h, &run, json!({"echo": "shown"}));
}

/// A tool whose redaction fails.
struct Unredactable(FakeTool);

#[async_trait::async_trait]
impl BoundTool for Unredactable {
    fn spec(&self) -> &ai_core::ToolSpec {
        self.0.spec()
    }
    fn validate_input(&self, args: Value) -> Result<Value, ai_core::ToolError> {
        self.0.validate_input(args)
    }
    async fn exec(
        &self,
        permit: ai_core::ExecPermit,
        args: Arc<Value>,
        ctx: &ai_core::ToolInvocationContext,
        caps: &ai_core::Capabilities,
    ) -> Result<Value, ai_core::ToolError> {
        self.0.exec(permit, args, ctx, caps).await
    }
    fn validate_output(&self, output: &Value) -> Result<(), ai_core::ToolError> {
        self.0.validate_output(output)
    }
    fn redact(&self, _: Value) -> Result<Value, ai_core::ToolError> {
        Err(ai_core::ToolError::new("no redaction config"))
    }
}

#[tokio::test]
async fn step10_redaction_failure_shows_nothing() {
    let t = Arc::new(Unredactable(FakeTool::new(
        ECHO,
        ToolEffect::ReadOnly,
        Behaviour::Echo,
    )));
    let h = Harness::new(vec![t as Arc<dyn BoundTool>], allow(&[ECHO]));
    let run = h.call(ECHO, r#"{"text":"hi"}"#).await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::RedactionFailed,
        "none of it is shown",
    );
}

#[tokio::test]
async fn step10_result_budget() {
    let big = json!({"echo": "y".repeat(40 * 1024)});
    let h = harness(tool(Behaviour::Output(big.clone())), allow(&[ECHO]));
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::ResultTooLarge,
        "over the 32768-byte limit",
    );

    // Only the redacted bytes count: a large field that is stripped does not.
    let stripped = json!({"echo": "small", "hidden": "z".repeat(40 * 1024)});
    let h = harness(tool(Behaviour::Output(stripped)), allow(&[ECHO]));
    assert!(h.call(ECHO, "{}").await.result.failure().is_none());

    let mut policy = allow(&[ECHO]);
    policy.budgets.max_result_bytes = 64 * 1024;
    let h = harness(tool(Behaviour::Output(big)), policy);
    assert!(h.call(ECHO, "{}").await.result.failure().is_none());
}

/// A tool that counts its redacted result as `.1` bytes.
struct Counted(FakeTool, usize);

#[async_trait::async_trait]
impl BoundTool for Counted {
    fn spec(&self) -> &ai_core::ToolSpec {
        self.0.spec()
    }
    fn validate_input(&self, args: Value) -> Result<Value, ai_core::ToolError> {
        self.0.validate_input(args)
    }
    async fn exec(
        &self,
        permit: ai_core::ExecPermit,
        args: Arc<Value>,
        ctx: &ai_core::ToolInvocationContext,
        caps: &ai_core::Capabilities,
    ) -> Result<Value, ai_core::ToolError> {
        self.0.exec(permit, args, ctx, caps).await
    }
    fn validate_output(&self, output: &Value) -> Result<(), ai_core::ToolError> {
        self.0.validate_output(output)
    }
    fn redact(&self, output: Value) -> Result<Value, ai_core::ToolError> {
        self.0.redact(output)
    }
    fn counted_result_bytes(&self, _: &Value) -> usize {
        self.1
    }
}

/// A tool may count its result as larger than it is (a replay refuses a recorded oversized
/// result again so, without building it), never as smaller.
#[tokio::test]
async fn step10_a_result_counts_as_at_least_what_its_tool_says() {
    let counted = |output: Value, bytes: usize| {
        let t = Counted(
            FakeTool::new(ECHO, ToolEffect::ReadOnly, Behaviour::Output(output)),
            bytes,
        );
        Harness::new(vec![Arc::new(t) as Arc<dyn BoundTool>], allow(&[ECHO]))
    };
    let h = counted(json!({"echo": "small"}), usize::MAX);
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::ResultTooLarge,
        &format!(
            "the tool result is {} bytes, over the 32768-byte limit",
            usize::MAX
        ),
    );
    let big = json!({"echo": "y".repeat(40 * 1024)});
    let h = counted(big, 0);
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::ResultTooLarge,
        "over the 32768-byte limit",
    );
}

/// `{"text": [[…]]}` nesting `levels` levels deep in all.
fn nested(levels: usize) -> String {
    let inner = levels - 1;
    format!(r#"{{"text":{}{}}}"#, "[".repeat(inner), "]".repeat(inner))
}

/// Arguments and results nest at most `MAX_JSON_DEPTH` levels, so that every event and record
/// holding them can be stored and read back (serde_json reads at most 128 levels).
#[tokio::test]
async fn steps5_and_10_refuse_values_nested_past_the_depth_limit() {
    assert_eq!(ai_core::MAX_JSON_DEPTH, 64);
    let h = harness(tool(Behaviour::Echo), allow(&[ECHO]));
    let run = h.call(ECHO, &nested(65)).await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::Validation,
        "tool arguments nest more than 64 levels deep",
    );
    // The shortest text that nests past the limit is refused as well.
    let shortest = format!("{}{}", "[".repeat(65), "]".repeat(65));
    let h = harness(tool(Behaviour::Echo), allow(&[ECHO]));
    let run = h.call(ECHO, &shortest).await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::Validation,
        "tool arguments nest more than 64 levels deep",
    );
    // Past what serde_json reads (128 levels) the text is still valid JSON: refused as too
    // deep, never as invalid JSON (a model is told what to change).
    let h = harness(tool(Behaviour::Echo), allow(&[ECHO]));
    let run = h.call(ECHO, &nested(200)).await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::Validation,
        "tool arguments nest more than 64 levels deep",
    );
    // At the limit the depth passes, and the tool's own check has its say.
    let h = harness(tool(Behaviour::Echo), allow(&[ECHO]));
    let run = h.call(ECHO, &nested(64)).await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::Validation,
        "/text: expected a string",
    );

    let deep: Value = serde_json::from_str(&nested(65)).unwrap();
    let deep = json!({"echo": deep["text"]});
    let h = harness(tool(Behaviour::Output(deep)), allow(&[ECHO]));
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::ResultTooLarge,
        "the tool result nests more than 64 levels deep",
    );
    let fits: Value = serde_json::from_str(&nested(64)).unwrap();
    let fits = json!({"echo": fits["text"]});
    let h = harness(tool(Behaviour::Output(fits.clone())), allow(&[ECHO]));
    let run = h.call(ECHO, "{}").await;
    check_ok(&h, &run, fits);
}

/// Arguments that are valid JSON serde_json cannot read (a number out of f64's range, a lone
/// surrogate escape), which the decoders keep as the model sent them, are refused saying what
/// they hold (`validation`: the model is told what to change), never as invalid JSON, and
/// never quoting them. Invalid JSON that also holds one is still invalid JSON.
#[tokio::test]
async fn step5_names_what_valid_json_serde_json_cannot_read_holds() {
    let number = "tool arguments hold a number out of range (beyond about ±1.8e308)";
    let surrogate = r"tool arguments hold a lone surrogate escape (\ud800 to \udfff without its pair) in a string";
    for (raw, code, message) in [
        (
            r#"{"text":1e400,"k":"sk-secret"}"#,
            ToolErrorCode::Validation,
            number,
        ),
        (
            r#"{"text":[-2.5E+999],"k":"sk-secret"}"#,
            ToolErrorCode::Validation,
            number,
        ),
        ("1e400", ToolErrorCode::Validation, number),
        (
            r#"{"text":"sk-secret\ud800"}"#,
            ToolErrorCode::Validation,
            surrogate,
        ),
        (
            r#"{"text":"sk-secret\udc00x"}"#,
            ToolErrorCode::Validation,
            surrogate,
        ),
        (
            r#"{"sk-secret\ud800\u0041":1}"#,
            ToolErrorCode::Validation,
            surrogate,
        ),
        // Not JSON after what serde_json stopped at: invalid, as before.
        (
            r#"{"text":1e400,"k":"sk-secret""#,
            ToolErrorCode::InvalidJson,
            "Invalid tool arguments JSON",
        ),
        (
            r#"{"text":"sk-secret\ud800" x}"#,
            ToolErrorCode::InvalidJson,
            "Invalid tool arguments JSON",
        ),
    ] {
        let h = harness(tool(Behaviour::Echo), allow(&[ECHO]));
        let run = h.call(ECHO, raw).await;
        check_failure(&h, &run, code, message);
        assert!(!run.result.model_content().contains("sk-secret"), "{raw}");
        assert_eq!(run.record.args, None, "{raw}");
    }
}

#[tokio::test]
async fn model_content_is_the_value_or_a_coded_error() {
    let h = harness(tool(Behaviour::Echo), allow(&[ECHO]));
    let ok = h.call(ECHO, r#"{"text":"hi"}"#).await;
    assert_eq!(ok.result.model_content(), r#"{"echo":"hi"}"#);
    let h = harness(tool(Behaviour::Echo), allow(&[ECHO]));
    let bad = h.call(ECHO, "{").await;
    assert_eq!(
        serde_json::from_str::<Value>(&bad.result.model_content()).unwrap(),
        json!({"error": {"code": "invalid_json", "message": "Invalid tool arguments JSON"}})
    );
}

/// An authorization hook that answers after a while.
struct SlowAllow(Duration);

#[async_trait::async_trait]
impl Authorizer for SlowAllow {
    async fn check(&self, _: &RunContext, _: &ToolId) -> AuthzDecision {
        tokio::time::sleep(self.0).await;
        AuthzDecision::Allow
    }
}

/// The runtime budget is the call's: time spent waiting on a port is not given back to the tool.
#[tokio::test(start_paused = true)]
async fn the_ports_and_the_tool_share_one_runtime_budget() {
    let mut policy = allow(&[ECHO]);
    policy.budgets.max_runtime_ms = 100;
    let mut h = harness(tool(Behaviour::Sleep(Duration::from_millis(60))), policy);
    h.runner = h
        .runner
        .clone()
        .with_authorizer(Arc::new(SlowAllow(Duration::from_millis(60))));
    let started = tokio::time::Instant::now();
    let run = h.call(ECHO, "{}").await;
    check_failure(
        &h,
        &run,
        ToolErrorCode::Timeout,
        "did not finish within 40 ms",
    );
    assert_eq!(started.elapsed(), Duration::from_millis(100));
}

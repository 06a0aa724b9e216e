//! Approvals: a gated call pauses the run; only an exact approval runs it; everything else is a
//! denial fed back to the model.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ai_core::{
    AiEvent, CancellationToken, Capabilities, CompletionError, CompletionPort, DeltaSink,
    ExecPermit, LlmCompletion, LlmRequest, Message, RunContext, StaticToolSource, ToolCallId,
    ToolCatalog, ToolEffect, ToolError, ToolInvocationContext, ToolPolicy, ToolRunner,
};
use ai_tools::{ToolContract, bind};
use graph::{Agent, AgentConfig, AgentState, ApprovalDecision, Phase};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::support::{
    Fixture, ScriptedModel, Wait, ZeroClock, call, calls, check_invariants, done_reason, text,
};

const GATED: &str = r#"
allowed_tools = ["core__wait"]
require_approval_for_effects = ["read_only"]
"#;

fn fixture() -> Fixture {
    Fixture::with_policy(
        vec![
            calls(vec![
                call("c1", "core__wait", r#"{"ms":1}"#),
                call("c2", "core__wait", r#"{"ms":2}"#),
            ]),
            text("done"),
        ],
        AgentConfig::default(),
        GATED,
    )
}

/// Runs the first turn and returns the state and the hashes the approvals must name.
async fn paused(f: &Fixture) -> (AgentState, Vec<(String, String)>) {
    let state = f.run(f.agent.new_state(), "go").await;
    let events = f.events();
    assert_eq!(done_reason(&events), "awaiting_approval");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AiEvent::ToolCallStart { .. }))
    );
    assert!(matches!(state.phase(), Phase::AwaitingApproval { .. }));
    let hashes = events
        .iter()
        .filter_map(|e| match e {
            AiEvent::ApprovalRequired {
                tool_call_id,
                args_hash,
                ..
            } => Some((tool_call_id.as_str().to_owned(), args_hash.clone())),
            _ => None,
        })
        .collect();
    f.events.lock().unwrap().clear();
    (state, hashes)
}

fn decision(id: &str, approved: bool, hash: &str) -> ApprovalDecision {
    ApprovalDecision {
        tool_call_id: ToolCallId::new(id).unwrap(),
        approved,
        args_hash: hash.into(),
        reason: None,
    }
}

/// A decision approving each call `events` asked approval for, in the order asked.
fn approve_all(events: &[AiEvent]) -> Vec<ApprovalDecision> {
    events
        .iter()
        .filter_map(|e| match e {
            AiEvent::ApprovalRequired {
                tool_call_id,
                args_hash,
                ..
            } => Some(decision(tool_call_id.as_str(), true, args_hash)),
            _ => None,
        })
        .collect()
}

fn answers(state: &AgentState) -> Vec<String> {
    state
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn approve_one_deny_the_other() {
    let f = fixture();
    let (state, hashes) = paused(&f).await;
    assert_eq!(hashes.len(), 2);
    let decisions = vec![
        decision("c1", true, &hashes[0].1),
        decision("c2", false, &hashes[1].1),
    ];
    let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
    let state = f
        .agent
        .resume(state, decisions, &f.ctx, &f.catalog, &sink, &f.cancel)
        .await;
    let events = f.events();
    check_invariants(&events, &state).unwrap();
    assert_eq!(done_reason(&events), "stop");
    let answers = answers(&state);
    assert_eq!(answers[0], r#"{"waited_ms":1}"#);
    assert!(
        answers[1].contains("policy_denied") && answers[1].contains("denied this call"),
        "{answers:?}"
    );
}

/// A paused run's state holds the turn's calls unanswered (its history does not pass
/// `validate_history` yet), and both ways on answer them: a resume and the next user message.
#[tokio::test(start_paused = true)]
async fn a_paused_state_is_completed_by_its_resume_or_the_next_message() {
    let f = fixture();
    let (state, hashes) = paused(&f).await;
    assert!(ai_core::validate_history(state.messages()).is_err());
    let decisions = hashes
        .iter()
        .map(|(id, hash)| decision(id, true, hash))
        .collect();
    let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
    let resumed = f
        .agent
        .resume(
            state.clone(),
            decisions,
            &f.ctx,
            &f.catalog,
            &sink,
            &f.cancel,
        )
        .await;
    ai_core::validate_history(resumed.messages()).unwrap();
    let interrupted = f.run(state, "never mind").await;
    ai_core::validate_history(interrupted.messages()).unwrap();
}

/// A denial's reason reaches the model with it, trimmed and cut to its bound; a reason on an
/// approval changes nothing.
#[tokio::test(start_paused = true)]
async fn a_denial_passes_its_reason_to_the_model() {
    let f = fixture();
    let (state, hashes) = paused(&f).await;
    let long = format!("  {}  ", "é".repeat(graph::MAX_DENIAL_REASON_CHARS + 10));
    let decisions = vec![
        ApprovalDecision {
            reason: Some("fine by me".into()),
            ..decision("c1", true, &hashes[0].1)
        },
        ApprovalDecision {
            reason: Some(long),
            ..decision("c2", false, &hashes[1].1)
        },
    ];
    let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
    let state = f
        .agent
        .resume(state, decisions, &f.ctx, &f.catalog, &sink, &f.cancel)
        .await;
    check_invariants(&f.events(), &state).unwrap();
    let answers = answers(&state);
    assert_eq!(answers[0], r#"{"waited_ms":1}"#);
    let kept = "é".repeat(graph::MAX_DENIAL_REASON_CHARS);
    assert!(
        answers[1].contains(&format!("the user denied this call: {kept}\"")),
        "{answers:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn anything_ambiguous_fails_closed() {
    let cases = [
        // An approval whose hash is not the call's: another tool's, or other arguments'.
        (
            vec![decision("c1", true, &"0".repeat(64))],
            "the approval was for another tool or other arguments",
        ),
        // No decision at all.
        (vec![], "no decision was made on this call"),
    ];
    for (decisions, why) in cases {
        let f = fixture();
        let (state, _) = paused(&f).await;
        let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
        let state = f
            .agent
            .resume(state, decisions, &f.ctx, &f.catalog, &sink, &f.cancel)
            .await;
        check_invariants(&f.events(), &state).unwrap();
        // Nothing ran: each call is shown refused, a start with no arguments and a denial.
        let events = f.events();
        let starts: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                AiEvent::ToolCallStart { args, .. } => Some(args.is_none()),
                _ => None,
            })
            .collect();
        assert_eq!(starts, [true, true], "{events:?}");
        assert!(events.iter().all(|e| match e {
            AiEvent::ToolCallResult { outcome, .. } => {
                matches!(outcome, ai_core::ToolOutcome::Error(f) if f.code == ai_core::ToolErrorCode::PolicyDenied)
            }
            _ => true,
        }));
        assert!(answers(&state).iter().all(|a| a.contains("policy_denied")));
        assert!(answers(&state)[0].contains(why), "{:?}", answers(&state));
    }
}

/// Decisions naming a call the thread does not wait for (a resume meant for an earlier pause, a
/// mistyped id) decide nothing: the run ends with an error that does not quote the id, nothing
/// runs or is denied, and the thread still waits, so the right decisions can follow.
#[tokio::test(start_paused = true)]
async fn decisions_for_a_call_not_waiting_are_refused_and_lose_nothing() {
    let f = fixture();
    let (state, hashes) = paused(&f).await;
    let decisions = vec![
        decision("c1", true, &hashes[0].1),
        decision("c9-stale", true, "whatever"),
    ];
    let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
    let kept = f
        .agent
        .resume(
            state.clone(),
            decisions,
            &f.ctx,
            &f.catalog,
            &sink,
            &f.cancel,
        )
        .await;
    let events = f.events();
    assert_eq!(done_reason(&events), "error");
    let errors: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AiEvent::Error { message } => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{events:?}");
    assert!(errors[0].contains("decisions[1]"), "{errors:?}");
    assert!(!errors[0].contains("c9-stale"), "{errors:?}");
    assert!(
        !events.iter().any(|e| matches!(
            e,
            AiEvent::ToolCallStart { .. }
                | AiEvent::ToolCallResult { .. }
                | AiEvent::StepStarted { .. }
        )),
        "{events:?}"
    );
    assert_eq!(kept, state, "the pause is kept as it was");
    // The right decisions still resume it.
    f.events.lock().unwrap().clear();
    let decisions = hashes
        .iter()
        .map(|(id, hash)| decision(id, true, hash))
        .collect();
    let resumed = f
        .agent
        .resume(kept, decisions, &f.ctx, &f.catalog, &sink, &f.cancel)
        .await;
    check_invariants(&f.events(), &resumed).unwrap();
    assert_eq!(done_reason(&f.events()), "stop");
    assert_eq!(
        answers(&resumed),
        [r#"{"waited_ms":1}"#, r#"{"waited_ms":2}"#]
    );
}

/// A resume given a thread that waits for no approval (a new one, one whose last run finished,
/// one whose pause the next user message or an earlier resume already settled) decides nothing:
/// the run ends with an error saying the thread waits for none, nothing runs and no model is
/// called, and the state is returned exactly as it was given, its last run's reason included.
#[tokio::test(start_paused = true)]
async fn a_resume_of_a_thread_that_waits_for_nothing_is_refused_and_changes_nothing() {
    let f = fixture();
    let (paused_state, hashes) = paused(&f).await;
    let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
    let approve_all = || -> Vec<ApprovalDecision> {
        hashes
            .iter()
            .map(|(id, hash)| decision(id, true, hash))
            .collect()
    };
    let settled = f
        .agent
        .resume(
            paused_state,
            approve_all(),
            &f.ctx,
            &f.catalog,
            &sink,
            &f.cancel,
        )
        .await;
    assert_eq!(done_reason(&f.events()), "stop");
    assert!(matches!(settled.phase(), Phase::Finished { .. }));
    let requests = f.model.requests.lock().unwrap().len();
    for (case, state) in [settled, f.agent.new_state()].into_iter().enumerate() {
        for decisions in [approve_all(), Vec::new()] {
            f.events.lock().unwrap().clear();
            let after = f
                .agent
                .resume(
                    state.clone(),
                    decisions,
                    &f.ctx,
                    &f.catalog,
                    &sink,
                    &f.cancel,
                )
                .await;
            let events = f.events();
            assert_eq!(after, state, "case {case}: the state is kept as it was");
            assert!(
                matches!(&events[..], [AiEvent::Error { message }, AiEvent::Done { .. }]
                    if message.contains("waits for no approval")),
                "case {case}: {events:?}"
            );
            assert_eq!(done_reason(&events), "error");
        }
    }
    assert_eq!(f.model.requests.lock().unwrap().len(), requests);
}

/// Two decisions on one call (an approval and a denial, approvals for two argument hashes, or
/// the same decision twice) are ambiguous at best, whichever comes first: they decide nothing,
/// no call runs or is denied, and the thread still waits for a resume that decides each once.
#[tokio::test(start_paused = true)]
async fn a_call_decided_twice_is_refused_and_loses_nothing() {
    let f = fixture();
    let (state, hashes) = paused(&f).await;
    let (h1, h2) = (&hashes[0].1, &hashes[1].1);
    let cases = [
        vec![decision("c1", true, h1), decision("c1", false, h1)],
        vec![
            decision("c1", true, h1),
            decision("c2", true, h2),
            decision("c2", true, &"0".repeat(64)),
        ],
        vec![decision("c2", false, h2), decision("c2", false, h2)],
    ];
    let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
    for (case, decisions) in cases.into_iter().enumerate() {
        let at = decisions.len() - 1;
        let kept = f
            .agent
            .resume(
                state.clone(),
                decisions,
                &f.ctx,
                &f.catalog,
                &sink,
                &f.cancel,
            )
            .await;
        let events = std::mem::take(&mut *f.events.lock().unwrap());
        assert_eq!(done_reason(&events), "error", "case {case}: {events:?}");
        let error = events.iter().find_map(|e| match e {
            AiEvent::Error { message } => Some(message.clone()),
            _ => None,
        });
        let error = error.unwrap_or_default();
        assert!(
            error.contains(&format!("decisions[{at}]")) && error.contains("more than once"),
            "case {case}: {error}"
        );
        assert!(
            !events.iter().any(|e| matches!(
                e,
                AiEvent::ToolCallStart { .. } | AiEvent::ToolCallResult { .. }
            )),
            "case {case}: {events:?}"
        );
        assert_eq!(kept, state, "case {case}: the pause is kept as it was");
    }
}

#[tokio::test(start_paused = true)]
async fn a_policy_change_before_resume_is_checked_again() {
    let f = fixture();
    let (state, hashes) = paused(&f).await;
    // Resume under a runner whose policy no longer allows the tool at all.
    let denying = Fixture::with_policy(
        vec![text("done")],
        AgentConfig::default(),
        r#"allowed_tools = []"#,
    );
    let decisions = vec![
        decision("c1", true, &hashes[0].1),
        decision("c2", true, &hashes[1].1),
    ];
    let sink = |e: AiEvent| denying.events.lock().unwrap().push(e);
    let state = denying
        .agent
        .resume(
            state,
            decisions,
            &denying.ctx,
            &f.catalog,
            &sink,
            &denying.cancel,
        )
        .await;
    check_invariants(&denying.events(), &state).unwrap();
    assert!(
        answers(&state).iter().all(|a| a.contains("policy_denied")),
        "{:?}",
        answers(&state)
    );
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct WriteInput {
    /// What to write.
    #[allow(dead_code)]
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct WriteOutput {
    ok: bool,
}

/// `core__write`: a state-changing tool, gated by the policy below.
struct Write;

#[async_trait::async_trait]
impl ToolContract for Write {
    type Input = WriteInput;
    type Output = WriteOutput;
    const ID: &'static str = "core__write";
    const DESCRIPTION: &'static str = "Writes.";
    const EFFECT: ToolEffect = ToolEffect::StateChange;
    const REDACTION: &'static [&'static str] = &["ok"];
    async fn execute(
        &self,
        _: &ExecPermit,
        _: WriteInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<WriteOutput, ToolError> {
        Ok(WriteOutput { ok: true })
    }
}

/// `core__wait` runs freely, `core__write` needs an approval.
const WRITES_GATED: &str = r#"
allowed_tools = ["core__wait", "core__write"]
require_approval_for_effects = ["state_change"]
"#;

/// An agent over `model` with `core__wait` and the gated `core__write`, and its context and
/// catalog.
fn gated_writes(model: Arc<dyn CompletionPort>) -> (Agent, RunContext, ToolCatalog) {
    gated_writes_under(model, |runner| runner)
}

/// [`gated_writes`], its runner as `with` makes it.
fn gated_writes_under(
    model: Arc<dyn CompletionPort>,
    with: impl FnOnce(ToolRunner) -> ToolRunner,
) -> (Agent, RunContext, ToolCatalog) {
    let policy = ToolPolicy::from_toml_str(WRITES_GATED).unwrap();
    let source =
        Arc::new(StaticToolSource::new(vec![bind(Wait).unwrap(), bind(Write).unwrap()]).unwrap());
    let ctx = RunContext::new("run-1", "user:test", "tenant").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let runner = with(ToolRunner::new(
        source,
        Arc::new(policy),
        Arc::new(ZeroClock),
    ));
    let agent = Agent::new(model, runner, AgentConfig::default());
    (agent, ctx, catalog)
}

/// Runs one turn of `agent` and returns its events and the state to save.
async fn run_turn(
    agent: &Agent,
    ctx: &RunContext,
    catalog: &ToolCatalog,
    cancel: &CancellationToken,
) -> (Vec<AiEvent>, AgentState) {
    let events = Mutex::new(Vec::new());
    let sink = |e: AiEvent| events.lock().unwrap().push(e);
    let state = agent
        .run(agent.new_state(), "go".into(), ctx, catalog, &sink, cancel)
        .await;
    (events.into_inner().unwrap(), state)
}

/// The run of a cancelled turn ends `cancelled`, not paused, with every call answered.
fn assert_cancelled(events: &[AiEvent], state: &AgentState) {
    assert_eq!(done_reason(events), "cancelled", "{events:?}");
    assert!(
        !matches!(state.phase(), Phase::AwaitingApproval { .. }),
        "{:?}",
        state.phase()
    );
    check_invariants(events, state).unwrap();
    let gated = answers(state).pop().unwrap();
    assert!(gated.contains("cancelled"), "{gated}");
}

/// A model whose answer resolves just as the client goes away: the token fires after the
/// completion and before its calls run.
struct CancelAtCompletion {
    model: ScriptedModel,
    cancel: CancellationToken,
}

#[async_trait::async_trait]
impl CompletionPort for CancelAtCompletion {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        cancel: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        let result = self.model.complete(request, deltas, cancel).await;
        self.cancel.cancel();
        result
    }
}

/// Cancelled before the gated call runs: the runner answers it `cancelled` instead of asking for
/// an approval. (A call that asked before the cancel is the driver's case: the next test.)
#[tokio::test(start_paused = true)]
async fn a_run_cancelled_before_a_gated_call_ends_cancelled_not_paused() {
    let cancel = CancellationToken::new();
    let model = Arc::new(CancelAtCompletion {
        model: ScriptedModel::new(vec![calls(vec![call(
            "gated",
            "core__write",
            r#"{"text":"x"}"#,
        )])]),
        cancel: cancel.clone(),
    });
    let (agent, ctx, catalog) = gated_writes(model);
    let (events, state) = run_turn(&agent, &ctx, &catalog, &cancel).await;
    assert_cancelled(&events, &state);
}

/// The gated call asks for its approval at once; the stop comes while the slow call runs. The
/// driver sees the token before pausing, so the run ends `cancelled` and the gated call is
/// answered `cancelled` too.
#[tokio::test(start_paused = true)]
async fn stop_during_a_slow_tool_next_to_a_gated_call_ends_cancelled_not_paused() {
    let model = Arc::new(ScriptedModel::new(vec![calls(vec![
        call("slow", "core__wait", r#"{"ms":10000}"#),
        call("gated", "core__write", r#"{"text":"x"}"#),
    ])]));
    let (agent, ctx, catalog) = gated_writes(model);
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.cancel();
    });
    let (events, state) = run_turn(&agent, &ctx, &catalog, &cancel).await;
    // The gated call asked for its approval before the stop; the stop still decides it.
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AiEvent::ApprovalRequired { tool_call_id, .. } if tool_call_id.as_str() == "gated"))
    );
    assert_cancelled(&events, &state);
    assert!(answers(&state)[0].contains("cancelled"));
}

/// The ids of the calls a run ended (a `ToolCallResult`) with a `cancelled` answer, in order.
fn ended_cancelled(events: &[AiEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            AiEvent::ToolCallResult {
                tool_call_id,
                outcome: ai_core::ToolOutcome::Error(failure),
                ..
            } if failure.code == ai_core::ToolErrorCode::Cancelled => {
                Some(tool_call_id.as_str().to_owned())
            }
            _ => None,
        })
        .collect()
}

/// A user message sent instead of answering the approvals cancels the waiting calls, and its run
/// shows them ended (a start without arguments and a `cancelled` result each) before the model
/// is called again: no call is left asked about and never ended.
#[tokio::test(start_paused = true)]
async fn the_next_user_message_shows_the_waiting_calls_cancelled() {
    let f = fixture();
    let (state, _) = paused(&f).await;
    let state = f.run(state, "never mind").await;
    let events = f.events();
    check_invariants(&events, &state).unwrap();
    assert_eq!(done_reason(&events), "stop");
    assert_eq!(ended_cancelled(&events), ["c1", "c2"], "{events:?}");
    assert!(events.iter().any(|e| matches!(
        e,
        AiEvent::ToolCallStart { tool_call_id, args: None, .. } if tool_call_id.as_str() == "c1"
    )));
    let first_step = events
        .iter()
        .position(|e| matches!(e, AiEvent::StepStarted { .. }))
        .unwrap();
    let last_result = events
        .iter()
        .rposition(|e| matches!(e, AiEvent::ToolCallResult { .. }))
        .unwrap();
    assert!(last_result < first_step, "{events:?}");
    assert!(answers(&state).iter().all(|a| a.contains("cancelled")));
}

/// A run cancelled while a call waits for approval ends that call with a `cancelled` result
/// before its `Done`, so a consumer that showed the approval request sees the call end.
#[tokio::test(start_paused = true)]
async fn a_cancel_ends_the_calls_that_asked_for_approval() {
    let model = Arc::new(ScriptedModel::new(vec![calls(vec![
        call("slow", "core__wait", r#"{"ms":10000}"#),
        call("gated", "core__write", r#"{"text":"x"}"#),
    ])]));
    let (agent, ctx, catalog) = gated_writes(model);
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.cancel();
    });
    let (events, state) = run_turn(&agent, &ctx, &catalog, &cancel).await;
    assert_cancelled(&events, &state);
    assert_eq!(ended_cancelled(&events), ["slow", "gated"], "{events:?}");
}

/// A cancel that races the pause, fired from an OS thread of its own at any point of the turn,
/// truly at once with the driver (before the model answers, while the quick call runs, as the tools'
/// results come in, after the pause): whichever wins, the run ends once and as its `Done` says.
/// Cancelled: every call shown started and answered once, the one that asked for approval
/// among them, and the history valid. Paused: the cancel came too late and changes nothing,
/// neither a late `Cancel` given to the paused state nor the fired token: the quick call
/// answered once, the gated one waiting, and a resume under a fresh token runs it.
#[tokio::test]
async fn a_cancel_racing_the_pause_ends_the_run_once_either_way() {
    let mut ends = std::collections::BTreeMap::new();
    for round in 0..100u64 {
        let model = Arc::new(ScriptedModel::new(vec![
            calls(vec![
                call("quick", "core__wait", r#"{"ms":1}"#),
                call("gated", "core__write", r#"{"text":"x"}"#),
            ]),
            text("done"),
        ]));
        let (agent, ctx, catalog) = gated_writes(model);
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let firing = std::thread::spawn(move || {
            // From at once to 48 ms, most of the rounds in the first few: the quick call waits
            // 1 ms, so the first rounds cancel it and the last pause even on a loaded machine.
            std::thread::sleep(Duration::from_micros((round % 50).pow(2) * 20));
            stop.cancel();
        });
        let (events, state) = run_turn(&agent, &ctx, &catalog, &cancel).await;
        firing.join().unwrap();
        let reason = done_reason(&events);
        *ends.entry(reason.clone()).or_insert(0) += 1;
        match reason.as_str() {
            "cancelled" => {
                check_invariants(&events, &state).unwrap_or_else(|e| panic!("{round}: {e}"));
                assert!(!matches!(state.phase(), Phase::AwaitingApproval { .. }));
            }
            "awaiting_approval" => {
                let dones = events
                    .iter()
                    .filter(|e| matches!(e, AiEvent::Done { .. }))
                    .count();
                assert_eq!(dones, 1, "{events:?}");
                let shown: Vec<String> = events
                    .iter()
                    .filter_map(|e| match e {
                        AiEvent::ToolCallStart { tool_call_id, .. } => {
                            Some(format!("start {tool_call_id}"))
                        }
                        AiEvent::ToolCallResult { tool_call_id, .. } => {
                            Some(format!("result {tool_call_id}"))
                        }
                        AiEvent::ApprovalRequired { tool_call_id, .. } => {
                            Some(format!("asked {tool_call_id}"))
                        }
                        _ => None,
                    })
                    .collect();
                let mut sorted = shown.clone();
                sorted.sort();
                assert_eq!(
                    sorted,
                    ["asked gated", "result quick", "start quick"],
                    "{round}: {shown:?}"
                );
                let late = graph::AgentEvent::Cancel {
                    partial_text: String::new(),
                };
                let (after, intents) = graph::reduce(state.clone(), late);
                assert_eq!((&after, intents.len()), (&state, 0));
                let resumed = Mutex::new(Vec::new());
                let sink = |e: AiEvent| resumed.lock().unwrap().push(e);
                let decisions = approve_all(&events);
                let fresh = CancellationToken::new();
                let state = agent
                    .resume(state, decisions, &ctx, &catalog, &sink, &fresh)
                    .await;
                let resumed = resumed.into_inner().unwrap();
                assert_eq!(done_reason(&resumed), "stop", "{resumed:?}");
                check_invariants(&resumed, &state).unwrap();
                let gated = answers(&state).pop().unwrap();
                assert!(gated.contains("\"ok\""), "{gated}");
            }
            other => panic!("{round}: ended {other}: {events:?}"),
        }
    }
    // Both ends were met, so the race was run (the timing makes each near certain).
    assert!(ends.len() == 2, "{ends:?}");
}

/// An app's event sink that panics on the first approval request it is given (after keeping
/// it): the runner had answered the call when the panic came, so the call waits for approval as
/// the request said, and is not also shown failed.
#[tokio::test(start_paused = true)]
async fn a_sink_that_panics_on_an_approval_request_leaves_the_call_waiting() {
    let f = fixture();
    let panicked = std::sync::atomic::AtomicBool::new(false);
    let sink = f.sink_breaking_once(
        |e| matches!(e, AiEvent::ApprovalRequired { .. }),
        false,
        &panicked,
    );
    let state = f.run_agent(&f.agent, &sink).await;
    assert!(panicked.load(std::sync::atomic::Ordering::SeqCst));
    let events = f.events();
    assert_eq!(done_reason(&events), "awaiting_approval");
    let shown_ended = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                AiEvent::ToolCallStart { .. } | AiEvent::ToolCallResult { .. }
            )
        })
        .count();
    assert_eq!(shown_ended, 0, "{events:?}");
    let Phase::AwaitingApproval { pending, .. } = state.phase() else {
        panic!("{:?}", state.phase());
    };
    assert_eq!(pending.len(), 2);
}

/// An authorization hook with a bug: it panics for `core__wait`, and allows every other tool.
struct PanicsForWaits;

#[async_trait::async_trait]
impl ai_core::Authorizer for PanicsForWaits {
    async fn check(&self, _: &RunContext, tool: &ai_core::ToolId) -> ai_core::AuthzDecision {
        assert_ne!(tool.as_str(), "core__wait", "the hook broke");
        ai_core::AuthzDecision::Allow
    }
}

/// An app's event sink that panics on an answer the driver shows while the turn's tools run
/// (the failure of a call whose authorization hook panicked), in a turn whose other call waits
/// for approval: the pause is the run's end, and nothing was left to stop, so the run pauses as
/// it would have (no `Error`), the gated call waiting for its decision rather than cancelled.
#[tokio::test(start_paused = true)]
async fn a_sink_that_panics_as_a_turn_pauses_leaves_its_calls_waiting() {
    let model = Arc::new(ScriptedModel::new(vec![calls(vec![
        call("broken", "core__wait", r#"{"ms":1}"#),
        call("gated", "core__write", r#"{"text":"x"}"#),
    ])]));
    let (agent, ctx, catalog) = gated_writes_under(model, |runner| {
        runner.with_authorizer(Arc::new(PanicsForWaits))
    });
    let events = Mutex::new(Vec::new());
    let panicked = std::sync::atomic::AtomicBool::new(false);
    let sink = |e: AiEvent| {
        let hit = matches!(&e, AiEvent::ToolCallResult { tool_call_id, .. }
            if tool_call_id.as_str() == "broken");
        events.lock().unwrap().push(e);
        if hit && !panicked.swap(true, std::sync::atomic::Ordering::SeqCst) {
            panic!("the app's sink broke");
        }
    };
    let cancel = CancellationToken::new();
    let state = agent
        .run(
            agent.new_state(),
            "go".into(),
            &ctx,
            &catalog,
            &sink,
            &cancel,
        )
        .await;
    assert!(panicked.load(std::sync::atomic::Ordering::SeqCst));
    let events = events.into_inner().unwrap();
    assert_eq!(done_reason(&events), "awaiting_approval", "{events:?}");
    assert!(
        !events.iter().any(|e| matches!(e, AiEvent::Error { .. })),
        "{events:?}"
    );
    let Phase::AwaitingApproval { pending, .. } = state.phase() else {
        panic!("{:?}", state.phase());
    };
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool_call_id.as_str(), "gated");
}

/// A thread that `run_thread` paused for approval is resumed through the store by
/// `resume_thread`: the approved calls run, the resumed state is saved before its `Done`, and a
/// resume of a thread that waits for nothing (this one once settled, or one the store does not
/// hold) decides nothing and leaves the store as it was.
#[tokio::test(start_paused = true)]
async fn resume_thread_resumes_a_stored_pause_and_saves_it() {
    use ai_core::ThreadStore;
    let f = fixture();
    let store = graph::InMemoryThreadStore::default();
    let thread = ai_core::ThreadId::new("t").unwrap();
    let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
    let paused = f.run_thread(&store, &thread, "go", &sink).await.unwrap();
    assert_eq!(done_reason(&f.events()), "awaiting_approval");
    let decisions = approve_all(&f.events());
    assert_eq!(decisions.len(), 2);
    assert_eq!(
        store.load(&thread).await.unwrap(),
        Some(serde_json::to_value(&paused).unwrap())
    );

    f.events.lock().unwrap().clear();
    let resumed = f
        .agent
        .resume_thread(
            &store,
            &thread,
            decisions.clone(),
            &f.ctx,
            &f.catalog,
            &sink,
            &f.cancel,
        )
        .await
        .unwrap();
    check_invariants(&f.events(), &resumed).unwrap();
    assert_eq!(done_reason(&f.events()), "stop");
    assert_eq!(
        answers(&resumed),
        [r#"{"waited_ms":1}"#, r#"{"waited_ms":2}"#]
    );
    let stored = store.load(&thread).await.unwrap();
    assert_eq!(stored, Some(serde_json::to_value(&resumed).unwrap()));

    // The same decisions again: the thread waits for nothing now.
    let requests = f.model.requests.lock().unwrap().len();
    for id in ["t", "never-stored"] {
        let thread = ai_core::ThreadId::new(id).unwrap();
        let before = store.load(&thread).await.unwrap();
        f.events.lock().unwrap().clear();
        let after = f
            .agent
            .resume_thread(
                &store,
                &thread,
                decisions.clone(),
                &f.ctx,
                &f.catalog,
                &sink,
                &f.cancel,
            )
            .await
            .unwrap();
        let events = f.events();
        assert!(
            matches!(&events[..], [AiEvent::Error { message }, AiEvent::Done { .. }]
                if message.contains("waits for no approval")),
            "{id}: {events:?}"
        );
        assert_eq!(store.load(&thread).await.unwrap(), before, "{id}");
        if id == "t" {
            assert_eq!(after, resumed);
        }
    }
    assert_eq!(f.model.requests.lock().unwrap().len(), requests);
}

/// Refused decisions keep the thread exactly as it was also when the agent's step limit is not
/// the one the thread was saved under (the operator changed it since the pause): `resume`
/// returns the state given, and `resume_thread` does not save the thread again. So does a user
/// message without text.
#[tokio::test(start_paused = true)]
async fn a_refused_run_keeps_a_thread_saved_under_another_step_limit_as_it_was() {
    use ai_core::ThreadStore;
    let f = fixture();
    let (state, _) = paused(&f).await;
    let stricter = Agent::new(
        f.model.clone(),
        f.runner.clone(),
        AgentConfig::default().with_max_steps(std::num::NonZeroU32::new(3).unwrap()),
    );
    let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
    let stale = vec![decision("c9-stale", true, "whatever")];
    let kept = stricter
        .resume(
            state.clone(),
            stale.clone(),
            &f.ctx,
            &f.catalog,
            &sink,
            &f.cancel,
        )
        .await;
    assert_eq!(done_reason(&f.events()), "error");
    assert_eq!(kept, state, "resume");

    let kept = stricter
        .run(
            state.clone(),
            " ".into(),
            &f.ctx,
            &f.catalog,
            &sink,
            &f.cancel,
        )
        .await;
    assert_eq!(kept, state, "an empty message");

    let store = graph::InMemoryThreadStore::default();
    let thread = ai_core::ThreadId::new("t").unwrap();
    let saved = serde_json::to_value(&state).unwrap();
    store.save(&thread, None, &saved).await.unwrap();
    f.events.lock().unwrap().clear();
    let kept = stricter
        .resume_thread(&store, &thread, stale, &f.ctx, &f.catalog, &sink, &f.cancel)
        .await
        .unwrap();
    assert_eq!(done_reason(&f.events()), "error");
    assert_eq!(kept, state, "resume_thread");
    assert_eq!(store.load(&thread).await.unwrap(), Some(saved));
}

/// A store that refuses every save while `failing` is set.
#[derive(Default)]
struct FlakyStore {
    inner: graph::InMemoryThreadStore,
    failing: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl ai_core::ThreadStore for FlakyStore {
    async fn load(
        &self,
        id: &ai_core::ThreadId,
    ) -> Result<Option<serde_json::Value>, ai_core::ThreadStoreError> {
        self.inner.load(id).await
    }

    async fn save(
        &self,
        id: &ai_core::ThreadId,
        previous: Option<&serde_json::Value>,
        state: &serde_json::Value,
    ) -> Result<(), ai_core::ThreadStoreError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ai_core::ThreadStoreError::Failed("the disk is full".into()));
        }
        self.inner.save(id, previous, state).await
    }
}

/// A fixture whose model asks for one gated `core__wait`, answers "done" to its result, then
/// `next`.
fn one_gated_wait(next: &str) -> Fixture {
    Fixture::with_policy(
        vec![
            calls(vec![call("c1", "core__wait", r#"{"ms":1}"#)]),
            text("done"),
            text(next),
        ],
        AgentConfig::default(),
        GATED,
    )
}

/// Runs `thread` to its pause, then resumes it with the call approved, `store` failing its
/// saves from the moment the approved call has run: the approvals and what the resume returned,
/// `store` healthy again and `f`'s events cleared.
async fn resume_losing_its_closing_save(
    f: &Fixture,
    store: &FlakyStore,
    thread: &ai_core::ThreadId,
) -> (Vec<ApprovalDecision>, Result<AgentState, graph::GraphError>) {
    use std::sync::atomic::Ordering;
    let sink = |e: AiEvent| {
        if matches!(e, AiEvent::ToolCallResult { .. }) {
            store.failing.store(true, Ordering::SeqCst);
        }
        f.events.lock().unwrap().push(e);
    };
    f.run_thread(store, thread, "go", &sink).await.unwrap();
    let decisions = approve_all(&f.events());
    let failed = f
        .agent
        .resume_thread(
            store,
            thread,
            decisions.clone(),
            &f.ctx,
            &f.catalog,
            &sink,
            &f.cancel,
        )
        .await;
    store.failing.store(false, Ordering::SeqCst);
    f.events.lock().unwrap().clear();
    (decisions, failed)
}

/// An approval is consumed once: `resume_thread` saves the thread past its pause before an
/// approved call runs, so a resume whose closing save fails (the calls ran) cannot be retried
/// into running them again. The retry is refused, the thread waiting for no approval.
#[tokio::test(start_paused = true)]
async fn an_approved_call_runs_once_though_the_save_after_it_fails() {
    let f = one_gated_wait("done again");
    let store = FlakyStore::default();
    let thread = ai_core::ThreadId::new("t").unwrap();
    let (decisions, failed) = resume_losing_its_closing_save(&f, &store, &thread).await;
    assert_eq!(decisions.len(), 1);
    assert!(
        matches!(failed, Err(graph::GraphError::Store { action: "save", .. })),
        "{failed:?}"
    );
    // The user retries, the store healthy again.
    let retried = f
        .agent
        .resume_thread(
            &store,
            &thread,
            decisions,
            &f.ctx,
            &f.catalog,
            &|e| f.events.lock().unwrap().push(e),
            &f.cancel,
        )
        .await;
    let events = f.events();
    let starts = events
        .iter()
        .filter(|e| matches!(e, AiEvent::ToolCallStart { .. }))
        .count();
    assert_eq!(starts, 0, "the approved call ran again: {events:?}");
    assert!(
        matches!(&events[..], [AiEvent::Error { message }, AiEvent::Done { .. }]
            if message.contains("waits for no approval")),
        "{events:?}"
    );
    assert!(retried.is_ok(), "{retried:?}");
}

/// A gated call approved and run by a resume whose closing save is lost, then the next user
/// message on that thread: the fixture (its events are the next message's run's) and the state
/// that run saved.
async fn next_message_after_a_lost_closing_save() -> (Fixture, AgentState) {
    let f = one_gated_wait("checked");
    let store = FlakyStore::default();
    let thread = ai_core::ThreadId::new("t").unwrap();
    let (_, failed) = resume_losing_its_closing_save(&f, &store, &thread).await;
    assert!(failed.is_err(), "{failed:?}");
    let state = f
        .run_thread(&store, &thread, "what happened?", &|e| {
            f.events.lock().unwrap().push(e)
        })
        .await
        .unwrap();
    (f, state)
}

/// A resume whose closing save fails leaves its thread past the pause, the approved call out:
/// it ran, and its result is lost. The next user message answers it so, as a call that may have
/// run (`interrupted`), never as one the run cancelled, so the model checks before calling it
/// again; the answer names no id and no argument.
#[tokio::test(start_paused = true)]
async fn the_next_message_after_a_lost_closing_save_says_the_approved_call_may_have_run() {
    let (f, state) = next_message_after_a_lost_closing_save().await;
    let answers = answers(&state);
    let [lost] = &answers[..] else {
        panic!("one answer: {answers:?}")
    };
    let lost: serde_json::Value = serde_json::from_str(lost).unwrap();
    assert_eq!(lost["error"]["code"], "interrupted", "{lost}");
    let message = lost["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("may have run") && !message.contains("cancel"),
        "{message}"
    );
    assert!(
        !message.contains("c1") && !message.contains("ms"),
        "{message}"
    );
    assert_eq!(done_reason(&f.events()), "stop");
}

/// The run of that next message shows the lost answer it records, as it shows the cancelled
/// answer of a call that waited for approval: a start without arguments, then the `interrupted`
/// result. A client following the run's events (a fresh stream, which never saw the call end)
/// then holds the call answered as the history does.
#[tokio::test(start_paused = true)]
async fn the_next_message_after_a_lost_closing_save_shows_the_answer_it_records() {
    let (f, state) = next_message_after_a_lost_closing_save().await;
    let events = f.events();
    let shown: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AiEvent::ToolCallStart {
                tool_call_id, args, ..
            } => Some(format!("start {tool_call_id} {}", args.is_some())),
            AiEvent::ToolCallResult {
                tool_call_id,
                outcome,
                ..
            } => Some(format!("result {tool_call_id} {outcome:?}")),
            _ => None,
        })
        .collect();
    assert!(
        matches!(&shown[..], [start, result]
            if start == "start c1 false" && result.starts_with("result c1") && result.contains("Interrupted")),
        "{shown:?}"
    );
    assert!(
        matches!(events.first(), Some(AiEvent::ToolCallStart { .. })),
        "shown before the model is called: {events:?}"
    );
    check_invariants(&events, &state).unwrap();
}

/// A resume whose store cannot consume its approvals (the save before the approved calls run
/// fails) runs nothing: the thread still waits, and a retry runs the calls, once.
#[tokio::test(start_paused = true)]
async fn a_resume_that_cannot_consume_its_approvals_runs_nothing() {
    use ai_core::ThreadStore;
    use std::sync::atomic::Ordering;
    let f = fixture();
    let store = FlakyStore::default();
    let thread = ai_core::ThreadId::new("t").unwrap();
    let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
    let (paused, hashes) = paused(&f).await;
    store
        .save(&thread, None, &serde_json::to_value(&paused).unwrap())
        .await
        .unwrap();
    let decisions: Vec<ApprovalDecision> = hashes
        .iter()
        .map(|(id, hash)| decision(id, true, hash))
        .collect();
    let run = || {
        f.agent.resume_thread(
            &store,
            &thread,
            decisions.clone(),
            &f.ctx,
            &f.catalog,
            &sink,
            &f.cancel,
        )
    };
    store.failing.store(true, Ordering::SeqCst);
    let failed = run().await;
    assert!(
        matches!(failed, Err(graph::GraphError::Store { action: "save", .. })),
        "{failed:?}"
    );
    let events = f.events();
    assert!(
        matches!(&events[..], [AiEvent::Error { .. }, AiEvent::Done { .. }]),
        "{events:?}"
    );
    assert_eq!(
        store.load(&thread).await.unwrap(),
        Some(serde_json::to_value(&paused).unwrap())
    );

    store.failing.store(false, Ordering::SeqCst);
    f.events.lock().unwrap().clear();
    let resumed = run().await.unwrap();
    check_invariants(&f.events(), &resumed).unwrap();
    assert_eq!(
        answers(&resumed),
        [r#"{"waited_ms":1}"#, r#"{"waited_ms":2}"#]
    );
}

/// A store whose loads each wait, once answered, until `barrier`'s count of them are: runs
/// started at once all read the thread before any of them saves.
struct LoadsTogether<'a> {
    inner: &'a dyn ai_core::ThreadStore,
    barrier: tokio::sync::Barrier,
}

#[async_trait::async_trait]
impl ai_core::ThreadStore for LoadsTogether<'_> {
    async fn load(
        &self,
        id: &ai_core::ThreadId,
    ) -> Result<Option<serde_json::Value>, ai_core::ThreadStoreError> {
        let loaded = self.inner.load(id).await;
        self.barrier.wait().await;
        loaded
    }

    async fn save(
        &self,
        id: &ai_core::ThreadId,
        previous: Option<&serde_json::Value>,
        state: &serde_json::Value,
    ) -> Result<(), ai_core::ThreadStoreError> {
        self.inner.save(id, previous, state).await
    }
}

/// Two resumes of one pause at once, both with its approval (a client that sent its answer
/// twice): both read the pause, but only the first to save past it runs the approved call. The
/// other's save finds the thread changed: it runs nothing and says so.
#[tokio::test(start_paused = true)]
async fn two_resumes_of_one_pause_at_once_run_the_approved_call_once() {
    use ai_core::ThreadStore;
    let f = Fixture::with_policy(
        vec![
            calls(vec![call("c1", "core__wait", r#"{"ms":1}"#)]),
            text("done"),
            text("done again"),
        ],
        AgentConfig::default(),
        GATED,
    );
    let store = graph::InMemoryThreadStore::default();
    let thread = ai_core::ThreadId::new("t").unwrap();
    let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
    f.run_thread(&store, &thread, "go", &sink).await.unwrap();
    let decisions = approve_all(&f.events());
    assert_eq!(decisions.len(), 1);
    f.events.lock().unwrap().clear();

    let together = LoadsTogether {
        inner: &store,
        barrier: tokio::sync::Barrier::new(2),
    };
    let resume = || {
        f.agent.resume_thread(
            &together,
            &thread,
            decisions.clone(),
            &f.ctx,
            &f.catalog,
            &sink,
            &f.cancel,
        )
    };
    let (first, second) = tokio::join!(resume(), resume());
    let (won, lost) = match (first, second) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
        other => panic!("one resume runs, the other is refused: {other:?}"),
    };
    assert!(
        matches!(
            &lost,
            graph::GraphError::Store {
                action: "save",
                error: ai_core::ThreadStoreError::Changed,
                ..
            }
        ),
        "{lost:?}"
    );
    assert_eq!(
        lost.to_string(),
        "cannot save thread t: the thread changed since it was read: another turn saved it \
         meanwhile"
    );
    let events = f.events();
    let ran = events
        .iter()
        .filter(|e| matches!(e, AiEvent::ToolCallStart { args: Some(_), .. }))
        .count();
    assert_eq!(ran, 1, "the approved call ran once: {events:?}");
    assert_eq!(answers(&won), [r#"{"waited_ms":1}"#]);
    assert_eq!(
        store.load(&thread).await.unwrap(),
        Some(serde_json::to_value(&won).unwrap())
    );
}

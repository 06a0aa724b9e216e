//! The reducer under adversarial event streams: a driver that follows every intent, fed model
//! turns with repeated ids, odd names and any finish reason, tool results that go missing,
//! repeat or answer the wrong call, approvals, denials, cancels and late events.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;

use ai_core::{
    DoneReason, FinishReason, LlmCompletion, LlmToolCall, Message, ToolCallId, ToolErrorCode,
    ToolExecResult, ToolFailure, ToolOutcome, validate_history,
};
use graph::{AgentEvent, AgentState, ApprovalDecision, Intent, Phase, reduce};
use proptest::prelude::*;
use serde_json::json;

/// Ids a model repeats (SGLang's `"0"`), a long one, and ids the loop itself derives.
const IDS: &[&str] = &["0", "1", "0_2", "call_a", "ツ"];
/// Names: valid, empty, refused by providers, non-ASCII, too long.
const NAMES: &[&str] = &[
    "core__x",
    "",
    "multi_tool_use.parallel",
    "ツール",
    "core__a_very_long_tool_name_that_is_longer_than_sixty_four_characters_x",
];

fn finish_reason() -> impl Strategy<Value = FinishReason> {
    prop_oneof![
        4 => Just(FinishReason::ToolCalls),
        1 => Just(FinishReason::Stop),
        1 => Just(FinishReason::Length),
        1 => Just(FinishReason::ContentFilter),
        1 => Just(FinishReason::Other("abort".into())),
        1 => Just(FinishReason::Other("MAX_TOKENS".into())),
    ]
}

#[derive(Clone, Debug)]
struct CallSpec {
    id: usize,
    long_id: bool,
    name: usize,
    complete: bool,
}

fn call_spec() -> impl Strategy<Value = CallSpec> {
    (
        0..IDS.len(),
        proptest::bool::weighted(0.1),
        0..NAMES.len(),
        proptest::bool::weighted(0.9),
    )
        .prop_map(|(id, long_id, name, complete)| CallSpec {
            id,
            long_id,
            name,
            complete,
        })
}

/// What the model does when called.
#[derive(Clone, Debug)]
enum ModelMove {
    Complete {
        text: &'static str,
        calls: Vec<CallSpec>,
        finish: FinishReason,
    },
    Fail {
        partial: &'static str,
    },
    Cancel {
        partial: &'static str,
    },
}

fn model_move() -> impl Strategy<Value = ModelMove> {
    let text = prop_oneof![Just(""), Just("  "), Just("hi")];
    prop_oneof![
        6 => (text.clone(), proptest::collection::vec(call_spec(), 0..5), finish_reason())
            .prop_map(|(text, calls, finish)| ModelMove::Complete { text, calls, finish }),
        1 => text.clone().prop_map(|partial| ModelMove::Fail { partial }),
        1 => text.prop_map(|partial| ModelMove::Cancel { partial }),
    ]
}

/// What one call out with the runner comes back as.
#[derive(Clone, Debug)]
enum ResultKind {
    Ok,
    Failed,
    Approval,
    Missing,
    Twice,
}

fn result_kind() -> impl Strategy<Value = ResultKind> {
    prop_oneof![
        4 => Just(ResultKind::Ok),
        1 => Just(ResultKind::Failed),
        2 => Just(ResultKind::Approval),
        1 => Just(ResultKind::Missing),
        1 => Just(ResultKind::Twice),
    ]
}

/// What the tools do.
#[derive(Clone, Debug)]
struct ToolsMove {
    kinds: Vec<ResultKind>,
    reversed: bool,
    stray: bool,
    cancelled: bool,
}

fn tools_move() -> impl Strategy<Value = ToolsMove> {
    (
        proptest::collection::vec(result_kind(), 0..6),
        any::<bool>(),
        proptest::bool::weighted(0.1),
        proptest::bool::weighted(0.15),
    )
        .prop_map(|(kinds, reversed, stray, cancelled)| ToolsMove {
            kinds,
            reversed,
            stray,
            cancelled,
        })
}

/// What happens while calls wait for approval (the run has paused).
#[derive(Clone, Debug)]
enum PausedMove {
    /// Per waiting call: approve with the right hash, deny, approve another hash, no decision.
    Decide(Vec<u8>),
    /// Decisions that also name a call the thread does not wait for (one it answered earlier,
    /// if any), or (`true`) decide a waiting call twice: refused whole, nothing changes; then
    /// the waiting calls are approved.
    Stale(bool),
    User,
    Cancel,
}

fn paused_move() -> impl Strategy<Value = PausedMove> {
    prop_oneof![
        4 => proptest::collection::vec(0u8..4, 0..6).prop_map(PausedMove::Decide),
        1 => any::<bool>().prop_map(PausedMove::Stale),
        1 => Just(PausedMove::User),
        1 => Just(PausedMove::Cancel),
    ]
}

/// An event that arrives after a run ended.
#[derive(Clone, Debug)]
enum LateMove {
    User,
    Cancel,
    Results,
    Completion,
    Failed,
    Decisions,
}

fn late_move() -> impl Strategy<Value = LateMove> {
    prop_oneof![
        6 => Just(LateMove::User),
        1 => Just(LateMove::Cancel),
        1 => Just(LateMove::Results),
        1 => Just(LateMove::Completion),
        1 => Just(LateMove::Failed),
        1 => Just(LateMove::Decisions),
    ]
}

#[derive(Clone, Debug)]
struct Script {
    max_steps: u32,
    model: Vec<ModelMove>,
    tools: Vec<ToolsMove>,
    paused: Vec<PausedMove>,
    late: Vec<LateMove>,
}

fn script() -> impl Strategy<Value = Script> {
    (
        1u32..5,
        proptest::collection::vec(model_move(), 1..12),
        proptest::collection::vec(tools_move(), 1..12),
        proptest::collection::vec(paused_move(), 1..6),
        proptest::collection::vec(late_move(), 1..6),
    )
        .prop_map(|(max_steps, model, tools, paused, late)| Script {
            max_steps,
            model,
            tools,
            paused,
            late,
        })
}

fn build_call(spec: &CallSpec) -> LlmToolCall {
    let id = if spec.long_id {
        IDS[spec.id].repeat(128 / IDS[spec.id].chars().count())
    } else {
        IDS[spec.id].to_owned()
    };
    LlmToolCall {
        id: ToolCallId::new(id).unwrap(),
        name: NAMES[spec.name].into(),
        arguments: "{}".into(),
        complete: spec.complete,
        provider_fields: Default::default(),
    }
}

fn hash_of(id: &ToolCallId) -> String {
    format!("hash-of-{id}")
}

/// Answers the model's move as the driver would feed it back.
fn model_event(step: &ModelMove) -> AgentEvent {
    match step {
        ModelMove::Complete {
            text,
            calls,
            finish,
        } => AgentEvent::ModelCompleted {
            completion: LlmCompletion {
                text: (*text).into(),
                tool_calls: calls.iter().map(build_call).collect(),
                finish_reason: finish.clone(),
                usage: None,
            },
        },
        ModelMove::Fail { partial } => AgentEvent::ModelFailed {
            message: "the model failed".into(),
            partial_text: (*partial).into(),
        },
        ModelMove::Cancel { partial } => AgentEvent::Cancel {
            partial_text: (*partial).into(),
        },
    }
}

/// The results the tools come back with, and the answer each call that got one must be
/// recorded with.
fn tools_event(
    calls: &[LlmToolCall],
    approvals: &HashSet<ToolCallId>,
    m: &ToolsMove,
    expected: &mut HashMap<ToolCallId, String>,
) -> AgentEvent {
    let mut results = Vec::new();
    for (at, call) in calls.iter().enumerate() {
        let kind = m.kinds.get(at).unwrap_or(&ResultKind::Ok);
        let ok = ToolExecResult::ok(call.id.clone(), json!({"id": call.id, "at": at}));
        match kind {
            ResultKind::Ok => results.push(ok),
            ResultKind::Failed => results.push(ToolExecResult::error(
                call.id.clone(),
                ToolFailure::new(ToolErrorCode::Execution, "it failed"),
            )),
            // A call run with its approval is not asked about again.
            ResultKind::Approval if !approvals.contains(&call.id) => {
                results.push(ToolExecResult {
                    tool_call_id: call.id.clone(),
                    outcome: ToolOutcome::ApprovalRequired {
                        args_hash: hash_of(&call.id),
                    },
                });
            }
            ResultKind::Approval => results.push(ok),
            ResultKind::Missing => {}
            ResultKind::Twice => {
                results.push(ok.clone());
                results.push(ok);
            }
        }
    }
    for result in &results {
        if !matches!(result.outcome, ToolOutcome::ApprovalRequired { .. }) {
            expected
                .entry(result.tool_call_id.clone())
                .or_insert_with(|| result.model_content());
        }
    }
    if m.stray {
        results.push(ToolExecResult::ok(
            ToolCallId::new("stray").unwrap(),
            json!(null),
        ));
    }
    if m.reversed {
        results.reverse();
    }
    AgentEvent::ToolResults {
        results,
        cancelled: m.cancelled,
    }
}

/// The ids of the calls of the history's last assistant message that have no answer yet.
fn unanswered(messages: &[Message]) -> Vec<ToolCallId> {
    let Some(at) = messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }))
    else {
        return Vec::new();
    };
    let Message::Assistant { tool_calls, .. } = &messages[at] else {
        unreachable!()
    };
    let answered: HashSet<&ToolCallId> = messages[at + 1..]
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        })
        .collect();
    tool_calls
        .iter()
        .map(|c| c.id.clone())
        .filter(|id| !answered.contains(id))
        .collect()
}

fn accepted_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks one step of the reducer, and returns the intent that decides what comes next.
fn step(
    state: AgentState,
    event: AgentEvent,
    expected: &HashMap<ToolCallId, String>,
) -> Result<(AgentState, Intent), TestCaseError> {
    // A saved state resumes the same: the same event gives the same state and intents.
    let saved = serde_json::to_string(&state).unwrap();
    let reloaded: AgentState = serde_json::from_str(&saved).unwrap();
    prop_assert_eq!(&reloaded, &state);
    let (again, again_intents) = reduce(reloaded, event.clone());
    let (state, intents) = reduce(state, event);
    prop_assert_eq!(&again, &state);
    prop_assert_eq!(&again_intents, &intents);

    // Answers shown first, then exactly one intent that says what comes next.
    let Some((last, shown)) = intents.split_last() else {
        return Err(TestCaseError::fail(format!("no intent; state {state:?}")));
    };
    for intent in shown {
        let Intent::ShowAnswers { answers } = intent else {
            return Err(TestCaseError::fail(format!("{intent:?} before {last:?}")));
        };
        prop_assert!(!answers.is_empty());
    }
    prop_assert!(!matches!(last, Intent::ShowAnswers { .. }), "{:?}", intents);

    for message in state.messages() {
        // A result is recorded as the answer of the call it came for, never another's.
        if let Message::Tool {
            tool_call_id,
            content,
        } = message
            && let Some(want) = expected.get(tool_call_id)
        {
            prop_assert_eq!(content, want, "the answer of {}", tool_call_id);
        }
        if let Message::Assistant { tool_calls, .. } = message {
            for call in tool_calls {
                prop_assert!(accepted_name(&call.name), "recorded name {:?}", call.name);
            }
        }
    }
    match last {
        Intent::CallModel { messages } => {
            prop_assert_eq!(messages.as_slice(), state.messages());
            validate_history(messages).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(state.phase(), &Phase::AwaitingModel);
        }
        Intent::RunTools { calls, approvals } => {
            let open = unanswered(state.messages());
            let ids: HashSet<&ToolCallId> = calls.iter().map(|c| &c.id).collect();
            prop_assert_eq!(ids.len(), calls.len(), "a call runs twice: {:?}", calls);
            for call in calls {
                prop_assert!(open.contains(&call.id), "{} runs but is not open", call.id);
            }
            for approval in approvals {
                prop_assert!(ids.contains(&approval.tool_call_id));
            }
            prop_assert!(calls.len() <= 128);
        }
        Intent::AwaitApproval { pending } => {
            prop_assert!(!pending.is_empty());
            let open = unanswered(state.messages());
            for waiting in pending {
                prop_assert!(open.contains(&waiting.tool_call_id));
            }
        }
        Intent::Finish { .. } => {
            validate_history(state.messages()).map_err(|e| {
                TestCaseError::fail(format!("{e} after {last:?}: {:?}", state.messages()))
            })?;
            prop_assert!(
                matches!(state.phase(), Phase::Finished { .. }),
                "{:?}",
                state.phase()
            );
        }
        Intent::ShowAnswers { .. } => unreachable!(),
    }
    Ok((state, last.clone()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_event_stream_keeps_the_history_valid_and_ends_each_run_once(script in script()) {
        let mut model = script.model.iter().cycle();
        let mut tools = script.tools.iter().cycle();
        let mut paused = script.paused.iter().cycle();
        let mut state = AgentState::new(Some("sys".into()), NonZeroU32::new(script.max_steps).unwrap());
        let mut approvals: HashSet<ToolCallId> = HashSet::new();
        let mut expected: HashMap<ToolCallId, String> = HashMap::new();
        for late in &script.late {
            let mut event = AgentEvent::UserMessage { content: "go".into() };
            // One run: at most 40 events, then it must have ended (each model turn with calls
            // counts a step, and the step limit is at most 4).
            let mut ended = false;
            let mut interrupted = false;
            for _ in 0..40 {
                let intent;
                (state, intent) = step(state, event, &expected)?;
                event = match intent {
                    Intent::CallModel { .. } => model_event(model.next().unwrap()),
                    Intent::RunTools { calls, approvals: approved } => {
                        approvals.extend(approved.into_iter().map(|a| a.tool_call_id));
                        tools_event(&calls, &approvals, tools.next().unwrap(), &mut expected)
                    }
                    Intent::AwaitApproval { pending } => match paused.next().unwrap() {
                        PausedMove::Decide(choices) => AgentEvent::ApprovalDecisions {
                            decisions: pending
                                .iter()
                                .zip(choices.iter().chain(std::iter::repeat(&0)))
                                .filter(|(_, choice)| **choice != 3)
                                .map(|(waiting, choice)| ApprovalDecision {
                                    tool_call_id: waiting.tool_call_id.clone(),
                                    approved: *choice != 1,
                                    args_hash: if *choice == 2 { "other".into() } else { waiting.args_hash.clone() },
                                    reason: None,
                                })
                                .collect(),
                        },
                        PausedMove::Stale(twice) => {
                            let approve = |waiting: &graph::PendingApproval| ApprovalDecision {
                                tool_call_id: waiting.tool_call_id.clone(),
                                approved: true,
                                args_hash: waiting.args_hash.clone(),
                                reason: None,
                            };
                            let waiting = |id: &ToolCallId| pending.iter().any(|p| &p.tool_call_id == id);
                            let stale = state
                                .messages()
                                .iter()
                                .find_map(|m| match m {
                                    Message::Tool { tool_call_id, .. } if !waiting(tool_call_id) => Some(tool_call_id.clone()),
                                    _ => None,
                                })
                                .unwrap_or_else(|| ToolCallId::new("stale").unwrap());
                            let mut decisions: Vec<ApprovalDecision> = pending.iter().map(approve).collect();
                            let extra = match pending.first() {
                                Some(first) if *twice => ApprovalDecision { approved: false, ..approve(first) },
                                _ => ApprovalDecision {
                                    tool_call_id: stale,
                                    approved: true,
                                    args_hash: "stale".into(),
                                    reason: None,
                                },
                            };
                            decisions.insert(decisions.len() / 2 + 1, extra);
                            let before = state.clone();
                            let (after, intents) = reduce(state, AgentEvent::ApprovalDecisions { decisions });
                            prop_assert_eq!(&after, &before, "refused decisions changed the thread");
                            prop_assert!(
                                matches!(&intents[..], [Intent::Finish { reason: DoneReason::Error, error: Some(_) }]),
                                "{:?}", intents
                            );
                            state = after;
                            AgentEvent::ApprovalDecisions { decisions: pending.iter().map(approve).collect() }
                        }
                        // A new message restarts the step count: once per run, so runs end.
                        PausedMove::User if !interrupted => {
                            interrupted = true;
                            AgentEvent::UserMessage { content: "instead".into() }
                        }
                        // The pause is the run's end: a cancel that comes now is too late, and
                        // leaves the calls waiting.
                        PausedMove::User | PausedMove::Cancel => {
                            let cancel = AgentEvent::Cancel { partial_text: String::new() };
                            let (after, intents) = reduce(state.clone(), cancel);
                            prop_assert_eq!(&after, &state, "a cancel settled a pause");
                            prop_assert!(intents.is_empty(), "{:?}", intents);
                            ended = true;
                            break;
                        }
                    },
                    Intent::Finish { .. } => {
                        ended = true;
                        break;
                    }
                    Intent::ShowAnswers { .. } => unreachable!(),
                };
            }
            prop_assert!(ended, "a run did not end: {:?}", state.phase());
            // Something arrives after the run ended.
            let paused_at_end = matches!(state.phase(), Phase::AwaitingApproval { .. });
            let late_event = match late {
                LateMove::User => continue,
                // Decisions for a run that paused are its resume, not late.
                LateMove::Decisions if paused_at_end => continue,
                LateMove::Cancel => AgentEvent::Cancel { partial_text: "late".into() },
                LateMove::Results => AgentEvent::ToolResults { results: vec![], cancelled: false },
                LateMove::Completion => model_event(&ModelMove::Complete { text: "late", calls: vec![], finish: FinishReason::Stop }),
                LateMove::Failed => AgentEvent::ModelFailed { message: "late".into(), partial_text: "late".into() },
                LateMove::Decisions => AgentEvent::ApprovalDecisions { decisions: vec![] },
            };
            let before = state.clone();
            let (after, intents) = reduce(state, late_event.clone());
            if !paused_at_end {
                // A pause's calls are answered by its resume or the next user message.
                validate_history(after.messages()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            if matches!(late, LateMove::Decisions) {
                // A resume of a thread that waits for no approval: a run of its own, refused.
                let errs = matches!(intents.last(), Some(Intent::Finish { reason: DoneReason::Error, .. }));
                prop_assert!(errs, "{:?}", intents);
                prop_assert_eq!(&after, &before);
            } else {
                // An event of the run that ended: too late to change anything, and the run
                // does not finish again.
                prop_assert_eq!(&after, &before);
                prop_assert!(intents.is_empty(), "{:?}", intents);
            }
            state = after;
        }
    }
}

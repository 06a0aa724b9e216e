//! The reducer against random events on random histories: whatever arrives, in whatever order,
//! every history it sends or leaves at rest passes `validate_history`, reads back from serde as
//! it was, and can start a thread again (`AgentState::with_history`).

use std::sync::Arc;

use ai_core::{
    AssistantToolCall, FinishReason, LlmCompletion, LlmToolCall, Message, ToolCallId,
    ToolErrorCode, ToolExecResult, ToolFailure, ToolOutcome, validate_history,
};
use proptest::prelude::*;
use serde_json::json;

use super::super::{
    AgentEvent, AgentState, ApprovalDecision, Intent, Phase, is_empty_message, reduce,
};

/// Texts a model, a user or a UI may send: blank by `trim` or not (Unicode whitespace, a NUL, a
/// zero-width space, an information separator), and plain.
const TEXTS: &[&str] = &[
    "",
    " \n\t",
    "\u{3000}\u{85}\u{2028}",
    "\0",
    "\u{200B}",
    "\u{1F}",
    "hi",
    "ツ\r\n",
];

/// Call ids as providers send them: repeated across turns (SGLang's `"0"`), differing only in
/// case, as long as an id may be (and one that differs only in its last character), a renamed
/// one's shape, control and non-ASCII characters.
fn id_pool() -> Vec<String> {
    vec![
        "0".into(),
        "1".into(),
        "0_2".into(),
        "call_A".into(),
        "call_a".into(),
        "x".repeat(128),
        format!("{}y", "x".repeat(127)),
        "ツ".repeat(128),
        "\0".into(),
        " ".into(),
    ]
}

const NAMES: &[&str] = &["core__x", "multi_tool_use.parallel", "", "ツ"];

fn id(raw: &str) -> ToolCallId {
    ToolCallId::new(raw).unwrap()
}

/// One message of a random starting history, before it is made valid.
#[derive(Clone, Debug)]
enum Seed {
    System(usize),
    User(usize),
    /// Text, and the pool ids of its calls (each answered at once, in order).
    Assistant(usize, Vec<usize>),
}

/// A starting history that `AgentState::from_history` takes: calls answered in order, ids
/// unique (a repeat is left out), and now and then a message without content, which the
/// thread's next model call leaves out.
fn history(seeds: &[Seed]) -> Vec<Message> {
    let pool = id_pool();
    let mut used = std::collections::HashSet::new();
    let mut out = Vec::new();
    for seed in seeds {
        match seed {
            Seed::System(text) => out.push(Message::System {
                content: TEXTS[*text].into(),
            }),
            Seed::User(text) => out.push(Message::User {
                content: TEXTS[*text].into(),
            }),
            Seed::Assistant(text, calls) => {
                let calls: Vec<AssistantToolCall> = calls
                    .iter()
                    .filter(|at| used.insert(**at))
                    .map(|at| AssistantToolCall {
                        id: id(&pool[*at]),
                        name: NAMES[*at % NAMES.len()].into(),
                        arguments: "{}".into(),
                        provider_fields: Default::default(),
                    })
                    .collect();
                let answers: Vec<Message> = calls
                    .iter()
                    .map(|call| Message::Tool {
                        tool_call_id: call.id.clone(),
                        content: "{}".into(),
                    })
                    .collect();
                out.push(Message::Assistant {
                    content: TEXTS[*text].into(),
                    tool_calls: calls,
                });
                out.extend(answers);
            }
        }
    }
    out
}

fn seed() -> impl Strategy<Value = Seed> {
    let text = 0..TEXTS.len();
    prop_oneof![
        1 => text.clone().prop_map(Seed::System),
        3 => text.clone().prop_map(Seed::User),
        3 => (text, proptest::collection::vec(0..id_pool().len(), 0..4))
            .prop_map(|(text, calls)| Seed::Assistant(text, calls)),
    ]
}

/// A call of a model turn: its pool id, whether the decoder finished it, its name.
type CallSeed = (usize, bool, usize);

/// Which call an answer or decision names: an open call of the turn (by position), or any id
/// of the pool (a stray, a repeat, one of another case).
type Target = (bool, usize);

/// One event, its calls and answers named by [`Target`]s resolved against the state it meets.
#[derive(Clone, Debug)]
enum Step {
    User(usize),
    Completed(usize, Vec<CallSeed>, usize),
    Failed(usize),
    Cancel(usize),
    /// Answers (0 ok, 1 error, 2 approval required), and whether the run was cancelled.
    Results(Vec<(Target, u8)>, bool),
    /// Decisions: approved, and whether with the call's own hash.
    Decisions(Vec<(Target, bool, bool)>),
    /// The thread starts again from its history (`with_history`), as a UI's or a repair does.
    Restart,
}

fn target() -> impl Strategy<Value = Target> {
    (proptest::bool::weighted(0.85), 0..16usize)
}

fn step() -> impl Strategy<Value = Step> {
    let text = 0..TEXTS.len();
    let call = (
        0..id_pool().len(),
        proptest::bool::weighted(0.9),
        0..NAMES.len(),
    );
    prop_oneof![
        2 => text.clone().prop_map(Step::User),
        4 => (text.clone(), proptest::collection::vec(call, 0..5), 0..FINISHES)
            .prop_map(|(text, calls, finish)| Step::Completed(text, calls, finish)),
        1 => text.clone().prop_map(Step::Failed),
        1 => text.prop_map(Step::Cancel),
        4 => (proptest::collection::vec((target(), 0..3u8), 0..5), proptest::bool::weighted(0.1))
            .prop_map(|(results, cancelled)| Step::Results(results, cancelled)),
        2 => proptest::collection::vec((target(), any::<bool>(), proptest::bool::weighted(0.8)), 0..4)
            .prop_map(Step::Decisions),
        1 => Just(Step::Restart),
    ]
}

const FINISHES: usize = 5;

fn finish(at: usize) -> FinishReason {
    match at {
        0 => FinishReason::Stop,
        1 => FinishReason::ToolCalls,
        2 => FinishReason::Length,
        3 => FinishReason::ContentFilter,
        _ => FinishReason::Other("abort".into()),
    }
}

/// The calls of the state's open turn, and the hashes its waiting calls must be approved with.
fn open_calls(state: &AgentState) -> (Vec<ToolCallId>, Vec<(ToolCallId, String)>) {
    match state.phase() {
        Phase::AwaitingTools { calls, .. } => {
            (calls.iter().map(|c| c.id.clone()).collect(), Vec::new())
        }
        Phase::AwaitingApproval { calls, pending, .. } => (
            calls.iter().map(|c| c.id.clone()).collect(),
            pending
                .iter()
                .map(|p| (p.tool_call_id.clone(), p.args_hash.clone()))
                .collect(),
        ),
        _ => (Vec::new(), Vec::new()),
    }
}

fn resolve(target: Target, open: &[ToolCallId]) -> ToolCallId {
    match target {
        (true, at) if !open.is_empty() => open[at % open.len()].clone(),
        (_, at) => id(&id_pool()[at % id_pool().len()]),
    }
}

fn event(step: &Step, state: &AgentState) -> AgentEvent {
    let (open, waiting) = open_calls(state);
    let pool = id_pool();
    match step {
        Step::User(text) => AgentEvent::UserMessage {
            content: TEXTS[*text].into(),
        },
        Step::Completed(text, calls, at) => AgentEvent::ModelCompleted {
            completion: LlmCompletion {
                text: TEXTS[*text].into(),
                tool_calls: calls
                    .iter()
                    .map(|(at, complete, name)| LlmToolCall {
                        id: id(&pool[*at]),
                        name: NAMES[*name].into(),
                        arguments: "{}".into(),
                        complete: *complete,
                        provider_fields: Default::default(),
                    })
                    .collect(),
                finish_reason: finish(*at),
                usage: None,
            },
        },
        Step::Failed(text) => AgentEvent::ModelFailed {
            message: "boom".into(),
            partial_text: TEXTS[*text].into(),
        },
        Step::Cancel(text) => AgentEvent::Cancel {
            partial_text: TEXTS[*text].into(),
        },
        Step::Results(results, cancelled) => AgentEvent::ToolResults {
            results: results
                .iter()
                .map(|(target, kind)| {
                    let id = resolve(*target, &open);
                    match kind {
                        0 => ToolExecResult::ok(id, Arc::new(json!({"ok": true}))),
                        1 => ToolExecResult::error(
                            id,
                            ToolFailure::new(ToolErrorCode::Execution, "failed"),
                        ),
                        _ => ToolExecResult {
                            tool_call_id: id,
                            outcome: ToolOutcome::ApprovalRequired {
                                args_hash: "h".into(),
                            },
                        },
                    }
                })
                .collect(),
            cancelled: *cancelled,
        },
        Step::Decisions(decisions) => {
            let waiting_ids: Vec<ToolCallId> = waiting.iter().map(|(id, _)| id.clone()).collect();
            AgentEvent::ApprovalDecisions {
                decisions: decisions
                    .iter()
                    .map(|(target, approved, own_hash)| {
                        let tool_call_id = resolve(*target, &waiting_ids);
                        let args_hash = waiting
                            .iter()
                            .find(|(id, _)| *id == tool_call_id)
                            .filter(|_| *own_hash)
                            .map_or_else(|| "other".to_owned(), |(_, hash)| hash.clone());
                        ApprovalDecision {
                            tool_call_id,
                            approved: *approved,
                            args_hash,
                            reason: None,
                        }
                    })
                    .collect(),
            }
        }
        Step::Restart => unreachable!("a restart is no event"),
    }
}

/// The history as the thread's next model call reads it: its messages without content left out.
fn healed(messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .filter(|m| !is_empty_message(m))
        .cloned()
        .collect()
}

fn empty_messages(messages: &[Message]) -> usize {
    messages.iter().filter(|m| is_empty_message(m)).count()
}

/// What must hold of a state the reducer left, and of what it asked for.
fn check(
    state: &AgentState,
    intents: &[Intent],
    empty_at_start: usize,
) -> Result<(), TestCaseError> {
    for intent in intents {
        if let Intent::CallModel { messages } = intent {
            prop_assert_eq!(validate_history(messages), Ok(()));
            prop_assert_eq!(messages.as_slice(), state.messages());
        }
    }
    // The loop records no message without content; it only heals the ones it was given.
    prop_assert!(empty_messages(state.messages()) <= empty_at_start);
    let at_rest = match state.phase() {
        Phase::AwaitingTools { .. } => {
            // Calls are out: a cancel answers them all, and leaves a valid history.
            let (closed, _) = reduce(
                state.clone(),
                AgentEvent::Cancel {
                    partial_text: String::new(),
                },
            );
            closed
        }
        Phase::AwaitingApproval { .. } => {
            // Calls wait for decisions (the run ended): the next user message answers them.
            let (closed, _) = reduce(
                state.clone(),
                AgentEvent::UserMessage {
                    content: "next".into(),
                },
            );
            closed
        }
        _ => state.clone(),
    };
    prop_assert_eq!(validate_history(&healed(at_rest.messages())), Ok(()));
    prop_assert!(at_rest.with_history(at_rest.messages().to_vec()).is_ok());
    // Saved and read back, the state is the same (and so still valid).
    let saved = serde_json::to_string(state).unwrap();
    let read: AgentState = serde_json::from_str(&saved).unwrap();
    prop_assert_eq!(&read, state);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever events arrive, in whatever order, on whatever valid history: every history sent
    /// to the model passes `validate_history`, every history at rest does too (after a cancel
    /// when calls are out), no message without content is recorded, the state reads back
    /// from serde as it was, and an event of a run that comes when none is in progress (a pause
    /// included) changes nothing and asks for nothing.
    #[test]
    fn random_events_on_random_histories_keep_the_history_valid(
        seeds in proptest::collection::vec(seed(), 0..8),
        steps in proptest::collection::vec(step(), 0..16),
    ) {
        let start = history(&seeds);
        let empty_at_start = empty_messages(&start);
        let limit = std::num::NonZeroU32::new(3).unwrap();
        let mut state = AgentState::from_history(start, limit)
            .expect("a history of answered calls with unique ids is taken");
        check(&state, &[], empty_at_start)?;
        for step in &steps {
            let intents;
            if let Step::Restart = step {
                match state.with_history(state.messages().to_vec()) {
                    Ok(restarted) => state = restarted,
                    // Calls are out: a restart from a history with unanswered calls is refused.
                    Err(_) => {
                        let calls_out = matches!(
                            state.phase(),
                            Phase::AwaitingTools { .. } | Phase::AwaitingApproval { .. }
                        );
                        prop_assert!(calls_out, "restart refused with no call out");
                    }
                }
                intents = Vec::new();
            } else {
                let event = event(step, &state);
                let before = state.clone();
                let late = !matches!(step, Step::User(_) | Step::Decisions(_))
                    && matches!(
                        before.phase(),
                        Phase::Idle | Phase::AwaitingApproval { .. } | Phase::Finished { .. }
                    );
                (state, intents) = reduce(state, event);
                if late {
                    // No run is in progress: an event of a run changes nothing and finishes
                    // nothing a second time.
                    prop_assert!(intents.is_empty(), "{:?} after the run: {:?}", step, intents);
                    prop_assert_eq!(&state, &before);
                }
            }
            check(&state, &intents, empty_at_start)?;
        }
    }
}

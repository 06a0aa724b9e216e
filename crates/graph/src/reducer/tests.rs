//! The reducer as data: events in, state and intents out.

use ai_core::{
    DoneReason, FinishReason, LlmCompletion, LlmToolCall, Message, ToolCallId, ToolExecResult,
};
use serde_json::json;

use super::{AgentEvent, AgentState, Intent, Phase, reduce};

/// A step limit (tests name only limits above 0).
fn steps(n: u32) -> std::num::NonZeroU32 {
    std::num::NonZeroU32::new(n).unwrap()
}

fn call(id: &str) -> LlmToolCall {
    LlmToolCall {
        id: ToolCallId::new(id).unwrap(),
        name: "core__x".into(),
        arguments: "{}".into(),
        complete: true,
        provider_fields: Default::default(),
    }
}

fn completion(text: &str, calls: &[&str]) -> AgentEvent {
    AgentEvent::ModelCompleted {
        completion: LlmCompletion {
            text: text.into(),
            tool_calls: calls.iter().map(|c| call(c)).collect(),
            finish_reason: if calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            },
            usage: None,
        },
    }
}

fn results(ids: &[&str]) -> AgentEvent {
    AgentEvent::ToolResults {
        results: ids
            .iter()
            .map(|id| ToolExecResult::ok(ToolCallId::new(*id).unwrap(), json!({"id": id})))
            .collect(),
        cancelled: false,
    }
}

fn user() -> AgentEvent {
    AgentEvent::UserMessage {
        content: "go".into(),
    }
}

/// Runs `events` from a fresh state and returns the last intents' kinds and the history roles.
fn check(max_steps: u32, events: Vec<AgentEvent>, last_intent: &str, roles: &str) -> AgentState {
    let mut state = AgentState::new(None, steps(max_steps));
    let mut intents = vec![];
    for event in events {
        (state, intents) = reduce(state, event);
    }
    let kind = match intents.as_slice() {
        [Intent::CallModel { .. }] => "call_model".to_owned(),
        [Intent::RunTools { calls, .. }] => format!("run_tools:{}", calls.len()),
        [Intent::Finish { reason, .. }] => format!(
            "finish:{}",
            serde_json::to_value(reason).unwrap().as_str().unwrap()
        ),
        other => format!("{other:?}"),
    };
    assert_eq!(kind, last_intent);
    let got: Vec<&str> = state
        .messages()
        .iter()
        .map(|m| match m {
            Message::System { .. } => "s",
            Message::User { .. } => "u",
            Message::Assistant { tool_calls, .. } if tool_calls.is_empty() => "a",
            Message::Assistant { .. } => "A",
            Message::Tool { .. } => "t",
        })
        .collect();
    assert_eq!(got.join(" "), roles);
    assert!(
        ai_core::validate_history(state.messages()).is_ok()
            || last_intent == "run_tools:1"
            || last_intent == "run_tools:2"
    );
    state
}

#[test]
fn runs() {
    check(10, vec![user()], "call_model", "u");
    check(
        10,
        vec![user(), completion("hi", &[])],
        "finish:stop",
        "u a",
    );
    check(
        10,
        vec![user(), completion("", &["c1", "c2"])],
        "run_tools:2",
        "u A",
    );
    check(
        10,
        vec![
            user(),
            completion("", &["c1", "c2"]),
            results(&["c2", "c1"]),
        ],
        "call_model",
        "u A t t",
    );
    check(
        1,
        vec![user(), completion("", &["c1"]), results(&["c1"])],
        "finish:max_steps",
        "u A t",
    );
    check(
        10,
        vec![
            user(),
            AgentEvent::ModelFailed {
                message: "down".into(),
                partial_text: String::new(),
            },
        ],
        "finish:error",
        "u",
    );
}

#[test]
fn results_enter_in_call_order_and_missing_ones_are_cancelled() {
    let state = check(
        10,
        vec![user(), completion("", &["c1", "c2"]), results(&["c2"])],
        "call_model",
        "u A t t",
    );
    let Message::Tool {
        tool_call_id,
        content,
    } = &state.messages()[2]
    else {
        panic!()
    };
    assert_eq!(tool_call_id.as_str(), "c1");
    assert!(content.contains("cancelled"), "{content}");
}

#[test]
fn cancel_answers_pending_calls() {
    let state = check(
        10,
        vec![
            user(),
            completion("", &["c1"]),
            AgentEvent::Cancel {
                partial_text: String::new(),
            },
        ],
        "finish:cancelled",
        "u A t",
    );
    assert_eq!(
        state.phase(),
        &Phase::Finished {
            reason: DoneReason::Cancelled
        }
    );
    // A new turn after a crash mid-tools closes the pending calls first, as calls that may
    // have run, and shows those answers: nothing else will.
    let mut state = AgentState::new(None, steps(10));
    let mut intents = vec![];
    for event in [user(), completion("", &["c1"]), user()] {
        (state, intents) = reduce(state, event);
    }
    let [
        Intent::ShowAnswers { answers },
        Intent::CallModel { messages },
    ] = intents.as_slice()
    else {
        panic!("{intents:?}")
    };
    let [(name, lost)] = answers.as_slice() else {
        panic!("{answers:?}")
    };
    assert_eq!(
        (name.as_str(), lost),
        (
            "core__x",
            &crate::lost_result(&ToolCallId::new("c1").unwrap())
        )
    );
    assert_eq!(messages.len(), 4, "{messages:?}");
    ai_core::validate_history(messages).unwrap();
}

/// An event the run in progress was not waiting for ends it with an error (one that comes when
/// no run is in progress changes nothing: see below).
#[test]
fn out_of_order_events_end_the_run_with_an_error() {
    check(10, vec![user(), results(&["x"])], "finish:error", "u");
    check(
        10,
        vec![user(), completion("", &["c1"]), completion("b", &[])],
        "finish:error",
        "u A t",
    );
}

#[test]
fn state_round_trips_through_serde_between_any_two_events() {
    let events = vec![
        user(),
        completion("", &["c1"]),
        results(&["c1"]),
        completion("done", &[]),
    ];
    let mut plain = AgentState::new(Some("sys".into()), steps(10));
    let mut resumed = plain.clone();
    for event in events {
        (plain, _) = reduce(plain, event.clone());
        let saved = serde_json::to_string(&resumed).unwrap();
        (resumed, _) = reduce(serde_json::from_str(&saved).unwrap(), event);
    }
    assert_eq!(plain, resumed);
}

/// The ids of the calls of the last assistant message.
fn last_call_ids(state: &AgentState) -> Vec<String> {
    state
        .messages()
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Assistant { tool_calls, .. } => Some(
                tool_calls
                    .iter()
                    .map(|c| c.id.as_str().to_owned())
                    .collect(),
            ),
            _ => None,
        })
        .unwrap_or_default()
}

#[test]
fn a_repeated_call_id_is_renamed_before_it_runs() {
    let long = "x".repeat(128);
    // (the ids of an earlier turn, the ids of this turn, the ids recorded and run)
    let cases: [(&[&str], &[&str], &[&str]); 5] = [
        (&[], &["0", "1"], &["0", "1"]),
        // SGLang: the same ids on every turn.
        (&["0", "1"], &["0", "1"], &["0_2", "1_2"]),
        // Repeated within the turn, and a renamed id that the model also sent.
        (&["0"], &["0", "0", "0_2"], &["0_2", "0_3", "0_2_2"]),
        (&["0", "0_2"], &["0"], &["0_3"]),
        // The fresh id keeps within the 128 characters a call id may have.
        (
            &[],
            &[&long, &long],
            &[&long, &format!("{}_2", &long[..126])],
        ),
    ];
    for (earlier, now, expected) in cases {
        let mut events = vec![user()];
        if !earlier.is_empty() {
            events.extend([
                completion("", earlier),
                results(earlier),
                completion("ok", &[]),
            ]);
            events.push(user());
        }
        events.push(completion("", now));
        let mut state = AgentState::new(None, steps(10));
        let mut intents = vec![];
        for event in events {
            (state, intents) = reduce(state, event);
        }
        let [Intent::RunTools { calls, .. }] = intents.as_slice() else {
            panic!("{intents:?}")
        };
        let run: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(run, expected, "{earlier:?} then {now:?}");
        assert_eq!(last_call_ids(&state), expected);
        // Answered under those ids, the history is valid and the thread goes on.
        let (state, intents) = reduce(state, results(expected));
        ai_core::validate_history(state.messages()).unwrap();
        assert!(matches!(intents.as_slice(), [Intent::CallModel { .. }]));
    }
}

/// The rename rule as first written: the first of `{id}_2`, `{id}_3`, … that no call holds,
/// searched from `_2` on every time.
fn first_free(id: &str, taken: &mut std::collections::HashSet<String>) -> String {
    if taken.insert(id.to_owned()) {
        return id.to_owned();
    }
    (2u64..)
        .map(|n| {
            let suffix = format!("_{n}");
            let keep = 128 - suffix.len();
            id.chars().take(keep).collect::<String>() + &suffix
        })
        .find(|fresh| taken.insert(fresh.clone()))
        .unwrap()
}

proptest::proptest! {
    /// Claims give every call the id the rule names, whatever ids the history and the turn hold.
    #[test]
    fn claimed_ids_follow_the_rename_rule(
        earlier in proptest::collection::vec(0usize..6, 0..12),
        now in proptest::collection::vec(0usize..6, 0..40),
    ) {
        let long = "ツ".repeat(128);
        let pool = ["0", "0_2", "0_3", "0_2_2", "1", long.as_str()];
        let history: Vec<Message> = earlier
            .iter()
            .enumerate()
            .map(|(at, i)| Message::Assistant {
                content: String::new(),
                tool_calls: vec![ai_core::AssistantToolCall {
                    // Some earlier calls hold a renamed id (none longer than an id may be).
                    id: ToolCallId::new(format!("{}{}", pool[*i], "_2".repeat(at % 2)))
                        .unwrap_or_else(|_| ToolCallId::new(pool[*i]).unwrap()),
                    name: "core__x".into(),
                    arguments: "{}".into(),
                    provider_fields: Default::default(),
                }],
            })
            .collect();
        let mut ids = super::CallIds::of(&history);
        let before = super::CallIds::of(&history);
        let mut taken: std::collections::HashSet<String> = before
            .taken
            .iter()
            .map(|id| id.as_str().to_owned())
            .collect();
        for i in now {
            let id = ToolCallId::new(pool[i]).unwrap();
            let claimed = ids.claim(&id);
            proptest::prop_assert_eq!(claimed.as_str(), first_free(pool[i], &mut taken));
        }
    }
}

/// A model turn that repeats one id costs work in proportion to its calls: the rename search
/// never tries a candidate twice.
#[test]
fn renaming_a_repeated_id_tries_each_candidate_once() {
    let mut ids = super::CallIds::of(&[]);
    let zero = ToolCallId::new("0").unwrap();
    let claimed: Vec<String> = (0..2000).map(|_| ids.claim(&zero).to_string()).collect();
    assert_eq!(claimed[..3], ["0", "0_2", "0_3"]);
    assert_eq!(claimed[1999], "0_2000");
    assert!(
        ids.tried < 2000,
        "{} candidates tried for 2000 calls",
        ids.tried
    );
}

/// An event the run in progress was not waiting for ends it with an error that names both the
/// event and where the loop stood, never a panic.
#[test]
fn an_out_of_phase_event_is_an_error_naming_the_event_and_the_phase() {
    let cases: Vec<(Vec<AgentEvent>, &str)> = vec![
        (
            vec![user(), results(&["c1"])],
            "unexpected tool results while a model call was out",
        ),
        (
            vec![user(), completion("", &["c1"]), completion("late", &[])],
            "unexpected model result while the turn's tool calls were out",
        ),
        (
            vec![user(), completion("", &["c1"]), results(&["c2"])],
            "unexpected tool result for call c2 while the turn's tool calls were out",
        ),
    ];
    for (events, expected) in cases {
        let mut state = AgentState::new(None, steps(10));
        let mut intents = Vec::new();
        for event in events {
            (state, intents) = reduce(state, event);
        }
        let error = intents.iter().find_map(|intent| match intent {
            Intent::Finish {
                reason: DoneReason::Error,
                error: Some(error),
            } => Some(error.as_str()),
            _ => None,
        });
        assert!(
            error.is_some_and(|error| error.starts_with(expected)),
            "{expected}: {intents:?}"
        );
    }
}

/// Once a run has ended (or before any began), an event of a run (a model's answer or failure,
/// tools' results, a cancel) comes too late to change anything: it asks for nothing, so no run
/// finishes twice, and the state stays as it was, its finish reason and history included. A run
/// that paused for approval has ended too: such an event leaves its calls waiting, for the
/// decisions or the next user message to settle.
#[test]
fn an_event_of_a_run_after_it_ended_neither_finishes_it_again_nor_changes_it() {
    let paused = AgentEvent::ToolResults {
        results: vec![ToolExecResult {
            tool_call_id: ToolCallId::new("c1").unwrap(),
            outcome: ai_core::ToolOutcome::ApprovalRequired {
                args_hash: "h".into(),
            },
        }],
        cancelled: false,
    };
    let late = || {
        vec![
            completion("late", &[]),
            completion("", &["c9"]),
            AgentEvent::ModelFailed {
                message: "late".into(),
                partial_text: "late text".into(),
            },
            results(&["c1"]),
            AgentEvent::ToolResults {
                results: vec![],
                cancelled: true,
            },
            AgentEvent::Cancel {
                partial_text: "late text".into(),
            },
        ]
    };
    let runs: Vec<(&str, Vec<AgentEvent>)> = vec![
        ("no run began", vec![]),
        ("answered", vec![user(), completion("done", &[])]),
        (
            "calls ran",
            vec![user(), completion("", &["c1"]), results(&["c1"])],
        ),
        (
            "failed",
            vec![
                user(),
                AgentEvent::ModelFailed {
                    message: "boom".into(),
                    partial_text: String::new(),
                },
            ],
        ),
        (
            "ended out of phase",
            vec![user(), completion("", &["c1"]), completion("again", &[])],
        ),
        (
            "paused for approval",
            vec![user(), completion("", &["c1"]), paused],
        ),
    ];
    let mut finished_again = Vec::new();
    for (name, events) in runs {
        let mut ended = AgentState::new(None, steps(1));
        for event in events {
            (ended, _) = reduce(ended, event);
        }
        for event in late() {
            let what = format!("{name}, then {event:?}");
            let (after, intents) = reduce(ended.clone(), event);
            if !intents.is_empty() || after != ended {
                finished_again.push(format!("{what}: {intents:?}"));
            }
        }
    }
    assert!(
        finished_again.is_empty(),
        "a late event acted: {finished_again:#?}"
    );
}

/// An event that arrives while calls are open (out of phase) ends the run, but must still
/// answer the open calls: a finished state's history always passes `validate_history`.
#[test]
fn an_out_of_phase_event_never_leaves_open_calls_unanswered() {
    let cases: Vec<(&str, Vec<AgentEvent>)> = vec![
        (
            "late completion",
            vec![completion("", &["c1"]), completion("again", &[])],
        ),
        (
            "model failure",
            vec![
                completion("", &["c1"]),
                AgentEvent::ModelFailed {
                    message: "late".into(),
                    partial_text: "late text".into(),
                },
            ],
        ),
    ];
    let mut broken = Vec::new();
    for (name, events) in cases {
        let mut state = AgentState::new(None, steps(10));
        for event in std::iter::once(user()).chain(events) {
            (state, _) = reduce(state, event);
        }
        assert!(matches!(state.phase(), Phase::Finished { .. }), "{name}");
        if let Err(e) = ai_core::validate_history(state.messages()) {
            broken.push(format!("{name}: {e}"));
        }
    }
    assert!(
        broken.is_empty(),
        "finished with an invalid history: {broken:#?}"
    );
}

/// Approval decisions for a thread that waits for none (while its model call is out, while its
/// tools run, before its first run, after its run finished) decide nothing and change nothing:
/// the run ends `error` saying so, and the state is kept as it was, phase and all, so a run that
/// is out still settles its turn with its own results.
#[test]
fn decisions_for_a_thread_that_waits_for_none_change_nothing() {
    use super::ApprovalDecision;
    let decisions = || AgentEvent::ApprovalDecisions {
        decisions: vec![ApprovalDecision {
            tool_call_id: ToolCallId::new("c1").unwrap(),
            approved: true,
            args_hash: "h".into(),
            reason: None,
        }],
    };
    let cases: Vec<(&str, Vec<AgentEvent>)> = vec![
        ("new", vec![]),
        ("model call out", vec![user()]),
        ("tools out", vec![user(), completion("", &["c1"])]),
        (
            "finished",
            vec![
                user(),
                completion("", &["c1"]),
                results(&["c1"]),
                completion("ok", &[]),
            ],
        ),
    ];
    for (name, events) in cases {
        let mut state = AgentState::new(None, steps(10));
        for event in events {
            (state, _) = reduce(state, event);
        }
        let (after, intents) = reduce(state.clone(), decisions());
        assert_eq!(after, state, "{name}");
        assert!(
            matches!(&intents[..], [Intent::Finish { reason: DoneReason::Error, error: Some(e) }]
                if e.contains("waits for no approval")),
            "{name}: {intents:?}"
        );
    }
    // The tools that were out when the decisions came still answer their calls.
    let mut state = AgentState::new(None, steps(10));
    for event in [
        user(),
        completion("", &["c1"]),
        decisions(),
        results(&["c1"]),
    ] {
        (state, _) = reduce(state, event);
    }
    assert_eq!(state.phase(), &Phase::AwaitingModel);
    ai_core::validate_history(state.messages()).unwrap();
    assert!(
        matches!(&state.messages()[2], Message::Tool { content, .. } if content.contains("c1"))
    );
}

/// Tool results must answer calls the turn left open, once each: a result for another call, a
/// second result for one call, or an approval request for a call that is not out is bad input.
/// It ends the run with an error that names the call, keeps the results that did answer open
/// calls, and leaves a valid history (never a pause on a call the turn did not make).
#[test]
fn results_for_calls_that_are_not_open_end_the_run_with_an_error() {
    use ai_core::ToolOutcome;
    let paused = |id: &str| ToolExecResult {
        tool_call_id: ToolCallId::new(id).unwrap(),
        outcome: ToolOutcome::ApprovalRequired {
            args_hash: "h".into(),
        },
    };
    let ok = |id: &str| ToolExecResult::ok(ToolCallId::new(id).unwrap(), json!({"id": id}));
    let cases: Vec<(&str, Vec<ToolExecResult>)> = vec![
        ("zz", vec![ok("c1"), paused("zz")]),
        ("zz", vec![ok("c1"), ok("zz")]),
        ("c1", vec![ok("c1"), ok("c1")]),
        ("c1", vec![ok("c1"), paused("c1")]),
    ];
    for (named, batch) in cases {
        let mut state = AgentState::new(None, steps(10));
        for event in [user(), completion("", &["c1", "c2"])] {
            (state, _) = reduce(state, event);
        }
        let event = AgentEvent::ToolResults {
            results: batch.clone(),
            cancelled: false,
        };
        let (state, intents) = reduce(state, event);
        let [
            Intent::Finish {
                reason: DoneReason::Error,
                error: Some(error),
            },
        ] = intents.as_slice()
        else {
            panic!("{batch:?}: {intents:?}")
        };
        assert!(error.contains(named), "{error}");
        ai_core::validate_history(state.messages()).unwrap();
        let Message::Tool { content, .. } = &state.messages()[2] else {
            panic!("{:?}", state.messages())
        };
        assert_eq!(content, r#"{"id":"c1"}"#, "{batch:?}");
    }
}

/// However many calls a port hands over, one turn runs at most `MAX_CALLS_PER_TURN` of them; the
/// rest are answered (and shown) without running, so the history stays valid.
#[test]
fn one_turn_runs_a_bounded_number_of_calls() {
    let limit = super::MAX_CALLS_PER_TURN;
    let ids: Vec<String> = (0..limit + 2).map(|i| format!("c{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let (state, _) = reduce(AgentState::new(None, steps(10)), user());
    let (state, intents) = reduce(state, completion("", &ids));
    let [
        Intent::ShowAnswers { answers },
        Intent::RunTools { calls, .. },
    ] = intents.as_slice()
    else {
        panic!("{intents:?}")
    };
    assert_eq!(calls.len(), limit);
    let refused: Vec<&str> = answers
        .iter()
        .map(|(_, a)| a.tool_call_id.as_str())
        .collect();
    assert_eq!(refused, ids[limit..]);
    assert!(
        answers
            .iter()
            .all(|(_, a)| a.model_content().contains("not run"))
    );
    let (state, intents) = reduce(state, results(&ids[..limit]));
    assert!(matches!(intents.as_slice(), [Intent::CallModel { .. }]));
    assert_eq!(state.messages().len(), 2 + limit + 2);
}

/// A model turn with no text and no calls (an empty answer, or `tool_calls` with no call) is
/// not recorded: an assistant message without content is one Anthropic refuses anywhere but at
/// the end, so it would fail every later turn of the thread behind an OpenAI-compatible proxy.
/// Whitespace-only text counts as none, next to calls too.
#[test]
fn an_empty_model_turn_leaves_no_empty_assistant_message() {
    let empty = |text: &str, finish_reason| AgentEvent::ModelCompleted {
        completion: LlmCompletion {
            text: text.into(),
            tool_calls: vec![],
            finish_reason,
            usage: None,
        },
    };
    check(
        10,
        vec![user(), empty("", FinishReason::ToolCalls)],
        "finish:stop",
        "u",
    );
    let state = check(
        10,
        vec![user(), empty(" \n", FinishReason::Stop), user()],
        "call_model",
        "u u",
    );
    assert_eq!(state.messages().len(), 2);
    let state = check(
        10,
        vec![user(), completion("\n\n", &["c1"])],
        "run_tools:1",
        "u A",
    );
    assert!(
        matches!(&state.messages()[1], Message::Assistant { content, .. } if content.is_empty()),
        "{:?}",
        state.messages()
    );
}

/// A completion of `text` and the calls `calls` that ended for `finish`.
fn ended(text: &str, calls: &[&str], finish: FinishReason) -> AgentEvent {
    AgentEvent::ModelCompleted {
        completion: LlmCompletion {
            text: text.into(),
            tool_calls: calls.iter().map(|c| call(c)).collect(),
            finish_reason: finish,
            usage: None,
        },
    }
}

/// A last turn the provider cut off (its output limit, or its content filter) ends the run with
/// that reason, not `stop`, whether it held text (kept in the history, as the model wrote it) or
/// nothing; the finished phase says so too. A reason the loop does not know (vLLM's `abort`, or
/// any other name) may have cut the answer as well: it ends `other`, never `stop`. A backend's
/// own name for one of these, passed through by a gateway, is read as what it means.
#[test]
fn a_last_turn_the_provider_cut_off_ends_the_run_saying_so() {
    for (finish, reason) in [
        (FinishReason::Length, DoneReason::Length),
        (FinishReason::ContentFilter, DoneReason::ContentFilter),
        (FinishReason::Stop, DoneReason::Stop),
        (FinishReason::ToolCalls, DoneReason::Stop),
        (FinishReason::Other("abort".into()), DoneReason::Other),
        (FinishReason::Other("aborted".into()), DoneReason::Other),
        // A backend's own names, passed through by a server or a gateway.
        (FinishReason::Other("eos_token".into()), DoneReason::Stop),
        (FinishReason::Other("end_turn".into()), DoneReason::Stop),
        (FinishReason::Other("MAX_TOKENS".into()), DoneReason::Length),
        (
            FinishReason::Other("SAFETY".into()),
            DoneReason::ContentFilter,
        ),
        (
            FinishReason::Other("refusal".into()),
            DoneReason::ContentFilter,
        ),
        // The names ai-core knows, in another case: Gemini's `STOP`, say, passed through.
        (FinishReason::Other("STOP".into()), DoneReason::Stop),
        (FinishReason::Other("Tool_Calls".into()), DoneReason::Stop),
        (FinishReason::Other("LENGTH".into()), DoneReason::Length),
        (
            FinishReason::Other("CONTENT_FILTER".into()),
            DoneReason::ContentFilter,
        ),
    ] {
        let named = serde_json::to_value(reason).unwrap();
        let named = format!("finish:{}", named.as_str().unwrap());
        let state = check(
            10,
            vec![user(), ended("Here is how to", &[], finish.clone())],
            &named,
            "u a",
        );
        assert!(
            matches!(&state.messages()[1], Message::Assistant { content, .. } if content == "Here is how to"),
            "{finish}: {:?}",
            state.messages()
        );
        assert_eq!(state.phase(), &Phase::Finished { reason }, "{finish}");
        // Cut before it wrote anything (a reasoning model that spent its budget thinking).
        check(10, vec![user(), ended(" ", &[], finish)], &named, "u");
    }
}

/// A turn cut off while it asked for tools keeps what it did before: its calls are answered as
/// not run and the model is asked again, so the run ends with the reason of the turn that
/// ends it (here a complete answer: `stop`; or a cut one). At the step limit the cut ends it
/// too, not the limit: none of its calls ran. A turn whose finish reason is a backend's own name
/// for a cut (passed through by a gateway) is cut too.
#[test]
fn a_cut_turn_with_calls_goes_on_and_the_last_turn_decides() {
    for (finish, cut) in [
        (FinishReason::Length, DoneReason::Length),
        (FinishReason::ContentFilter, DoneReason::ContentFilter),
        (FinishReason::Other("max_tokens".into()), DoneReason::Length),
        (FinishReason::Other("MAX_TOKENS".into()), DoneReason::Length),
        (
            FinishReason::Other("SAFETY".into()),
            DoneReason::ContentFilter,
        ),
        (
            FinishReason::Other("refusal".into()),
            DoneReason::ContentFilter,
        ),
        (
            FinishReason::Other("CONTENT_FILTER".into()),
            DoneReason::ContentFilter,
        ),
    ] {
        let (state, _) = reduce(AgentState::new(None, steps(10)), user());
        let (state, intents) = reduce(state, ended("", &["c1"], finish.clone()));
        let [Intent::ShowAnswers { answers }, Intent::CallModel { .. }] = intents.as_slice() else {
            panic!("{finish}: {intents:?}")
        };
        assert!(
            answers[0].1.model_content().contains("not run"),
            "{answers:?}"
        );
        let (_, intents) = reduce(state.clone(), completion("Sorry.", &[]));
        assert!(
            matches!(
                intents.as_slice(),
                [Intent::Finish {
                    reason: DoneReason::Stop,
                    ..
                }]
            ),
            "{intents:?}"
        );
        let (_, intents) = reduce(state, ended("Sorr", &[], FinishReason::Length));
        assert!(
            matches!(
                intents.as_slice(),
                [Intent::Finish {
                    reason: DoneReason::Length,
                    ..
                }]
            ),
            "{intents:?}"
        );
        // At the step limit the cut ends it: its calls never ran, so the limit stopped nothing.
        let (state, _) = reduce(AgentState::new(None, steps(1)), user());
        let (state, intents) = reduce(state, ended("", &["c1"], finish.clone()));
        assert!(
            matches!(
                intents.as_slice(),
                [
                    Intent::ShowAnswers { .. },
                    Intent::Finish { reason, .. }
                ] if *reason == cut
            ),
            "{finish}: {intents:?}"
        );
        assert_eq!(state.phase(), &Phase::Finished { reason: cut }, "{finish}");
        assert!(ai_core::validate_history(state.messages()).is_ok());
    }
}

/// A turn whose every call the decoder marked cut short runs none of them: at the step limit it
/// ends for what cut it, and a turn that names no cut (here `tool_calls`) ends `other` (its
/// answer ended early for a reason the loop does not know), never `length`, which would claim
/// the output limit. A turn of which one call still runs took its step: at the limit it ends
/// `max_steps`.
#[test]
fn a_turn_whose_calls_were_all_cut_short_ends_other_at_the_step_limit() {
    let cut_short = |id: &str| LlmToolCall {
        complete: false,
        ..call(id)
    };
    let turn = |calls: Vec<LlmToolCall>| AgentEvent::ModelCompleted {
        completion: LlmCompletion {
            text: String::new(),
            tool_calls: calls,
            finish_reason: FinishReason::ToolCalls,
            usage: None,
        },
    };
    let (state, _) = reduce(AgentState::new(None, steps(1)), user());
    let (_, intents) = reduce(state, turn(vec![cut_short("c1"), cut_short("c2")]));
    assert!(
        matches!(
            intents.as_slice(),
            [
                Intent::ShowAnswers { .. },
                Intent::Finish {
                    reason: DoneReason::Other,
                    ..
                }
            ]
        ),
        "{intents:?}"
    );

    let (state, _) = reduce(AgentState::new(None, steps(1)), user());
    let (state, intents) = reduce(state, turn(vec![call("c1"), cut_short("c2")]));
    assert!(
        matches!(intents.as_slice(), [Intent::ShowAnswers { .. }, Intent::RunTools { calls, .. }] if calls.len() == 1),
        "{intents:?}"
    );
    let (_, intents) = reduce(state, results(&["c1"]));
    assert!(
        matches!(
            intents.as_slice(),
            [Intent::Finish {
                reason: DoneReason::MaxSteps,
                ..
            }]
        ),
        "{intents:?}"
    );
}

/// What the model is told of a call cut short names what cut it: the output limit only when
/// the turn ended `length` (under any name for it); a turn that ended early for another reason
/// (vLLM's `abort`: the server aborted the request; a call the decoder marked cut short in a
/// turn that says it ended) is "the model's answer ended early". At the step limit such a turn
/// ends for what cut it: `length` for the output limit, `other` otherwise (an `abort` is not the
/// output limit).
#[test]
fn a_call_cut_short_is_told_what_cut_it() {
    let cut_short = |id: &str| LlmToolCall {
        complete: false,
        ..call(id)
    };
    let turn = |finish: FinishReason| AgentEvent::ModelCompleted {
        completion: LlmCompletion {
            text: String::new(),
            tool_calls: vec![cut_short("c1")],
            finish_reason: finish,
            usage: None,
        },
    };
    for (finish, limit, done) in [
        (FinishReason::Length, true, DoneReason::Length),
        (
            FinishReason::Other("max_tokens".into()),
            true,
            DoneReason::Length,
        ),
        (
            FinishReason::Other("abort".into()),
            false,
            DoneReason::Other,
        ),
        (FinishReason::ToolCalls, false, DoneReason::Other),
        (FinishReason::Stop, false, DoneReason::Other),
    ] {
        let (state, _) = reduce(AgentState::new(None, steps(1)), user());
        let (_, intents) = reduce(state, turn(finish.clone()));
        let [
            Intent::ShowAnswers { answers },
            Intent::Finish { reason, .. },
        ] = intents.as_slice()
        else {
            panic!("{finish}: {intents:?}")
        };
        let told = answers[0].1.model_content();
        assert!(
            told.contains("cut short") && told.contains("not run"),
            "{finish}: {told}"
        );
        assert_eq!(told.contains("output limit"), limit, "{finish}: {told}");
        assert_eq!(told.contains("ended early"), !limit, "{finish}: {told}");
        assert_eq!(*reason, done, "{finish}");
    }
}

/// A cancel that comes when no run is in progress (before the first, or after a run's finish)
/// is too late to stop anything: it asks for nothing (a second `Finish` would be a second
/// `Done`) and the finished run keeps its reason.
#[test]
fn a_cancel_after_the_finish_changes_nothing() {
    let cases: [Vec<AgentEvent>; 4] = [
        vec![],
        vec![user(), completion("hi", &[])],
        vec![user(), completion("", &["c1"]), results(&["c1"])],
        vec![
            user(),
            AgentEvent::ModelFailed {
                message: "down".into(),
                partial_text: String::new(),
            },
        ],
    ];
    for events in cases {
        let mut state = AgentState::new(None, steps(1));
        for event in events.clone() {
            (state, _) = reduce(state, event);
        }
        let (after, intents) = reduce(
            state.clone(),
            AgentEvent::Cancel {
                partial_text: "late".into(),
            },
        );
        assert!(intents.is_empty(), "{events:?}: {intents:?}");
        assert_eq!(after, state, "{events:?}");
    }
}

/// A saved state is data from a store: one whose step count is already at its limit when a model
/// result comes in (a state saved mid-run, or edited) must not overflow the count; the turn's
/// calls run and the run ends at the step limit.
#[test]
fn a_step_count_at_its_limit_does_not_overflow() {
    let saved = json!({
        "messages": [{"role": "user", "content": "go"}],
        "phase": {"phase": "awaiting_model"},
        "steps": u32::MAX,
        "max_steps": u32::MAX,
    });
    let state: AgentState = serde_json::from_value(saved).unwrap();
    let (state, intents) = reduce(state, completion("", &["c1"]));
    assert!(
        matches!(intents.as_slice(), [Intent::RunTools { .. }]),
        "{intents:?}"
    );
    let (_, intents) = reduce(state, results(&["c1"]));
    assert!(
        matches!(
            intents.as_slice(),
            [Intent::Finish {
                reason: DoneReason::MaxSteps,
                ..
            }]
        ),
        "{intents:?}"
    );
}

/// A thread saved before tool names were recorded in a form providers accept still holds
/// `multi_tool_use.parallel`: its next model call sends, and its state keeps, the healed name.
#[test]
fn a_saved_thread_with_a_refused_tool_name_heals_at_its_next_model_call() {
    let (state, _) = reduce(
        AgentState::new(None, steps(10)),
        AgentEvent::UserMessage {
            content: "hi".into(),
        },
    );
    let (state, _) = reduce(state, completion("", &["c1"]));
    let (state, _) = reduce(state, results(&["c1"]));
    let (state, _) = reduce(state, completion("done", &[]));
    // As an older build saved it.
    let mut saved = serde_json::to_value(&state).unwrap();
    let text = saved
        .to_string()
        .replace("core__x", "multi_tool_use.parallel");
    saved = serde_json::from_str(&text).unwrap();
    let state: AgentState = serde_json::from_value(saved).unwrap();

    let (state, intents) = reduce(
        state,
        AgentEvent::UserMessage {
            content: "again".into(),
        },
    );
    let [Intent::CallModel { messages }] = &intents[..] else {
        panic!("{intents:?}");
    };
    let names = |messages: &[Message]| -> Vec<String> {
        messages
            .iter()
            .filter_map(|m| match m {
                Message::Assistant { tool_calls, .. } => Some(tool_calls.clone()),
                _ => None,
            })
            .flatten()
            .map(|call| call.name)
            .collect()
    };
    assert_eq!(names(messages), ["multi_tool_use_parallel"]);
    assert_eq!(names(state.messages()), ["multi_tool_use_parallel"]);
}

/// A state saved when the step limit could be 0 still loads: 0 let one step's tools run, as 1
/// does, and it reads as 1. A limit of 1 is kept as it is.
#[test]
fn a_saved_step_limit_of_zero_reads_as_one() {
    let saved = json!({"messages": [], "phase": {"phase": "idle"}, "steps": 0, "max_steps": 0});
    let state: AgentState = serde_json::from_value(saved).unwrap();
    assert_eq!(serde_json::to_value(&state).unwrap()["max_steps"], 1);
    let (state, _) = reduce(state, user());
    let (state, intents) = reduce(state, completion("", &["c1"]));
    assert!(matches!(intents.as_slice(), [Intent::RunTools { .. }]));
    let (_, intents) = reduce(state, results(&["c1"]));
    assert!(
        matches!(
            intents.as_slice(),
            [Intent::Finish {
                reason: DoneReason::MaxSteps,
                ..
            }]
        ),
        "{intents:?}"
    );
    let huge = json!({"messages": [], "phase": {"phase": "idle"}, "steps": 0, "max_steps": -1});
    assert!(serde_json::from_value::<AgentState>(huge).is_err());
}

/// Text the model streamed before its call failed or was cancelled was shown to the user, and
/// crash recovery rebuilds a turn from it: the history keeps it as the assistant's answer (also
/// after a tool step), unless it is blank; a late failure or cancel, with no model call out, keeps
/// nothing.
#[test]
fn text_streamed_before_a_model_failure_or_cancel_is_kept() {
    let failed = |text: &str| AgentEvent::ModelFailed {
        message: "down".into(),
        partial_text: text.into(),
    };
    let cancelled = |text: &str| AgentEvent::Cancel {
        partial_text: text.into(),
    };
    for (end, named) in [
        (&failed as &dyn Fn(&str) -> AgentEvent, "finish:error"),
        (&cancelled, "finish:cancelled"),
    ] {
        let state = check(10, vec![user(), end("Here is how")], named, "u a");
        assert_eq!(
            state.messages()[1],
            Message::Assistant {
                content: "Here is how".into(),
                tool_calls: vec![],
            }
        );
        check(
            10,
            vec![
                user(),
                completion("", &["c1"]),
                results(&["c1"]),
                end("Here is"),
            ],
            named,
            "u A t a",
        );
        check(10, vec![user(), end(" \n")], named, "u");
        check(10, vec![user(), end("")], named, "u");
    }
    // Tools were out, not a model call: nothing the model wrote is pending.
    check(
        10,
        vec![user(), completion("", &["c1"]), cancelled("stray")],
        "finish:cancelled",
        "u A t",
    );
}

/// Events written before the partial text existed still read, as carrying none.
#[test]
fn failure_and_cancel_events_of_the_old_form_read_without_text() {
    let old: AgentEvent = serde_json::from_value(json!({"type": "cancel"})).unwrap();
    assert_eq!(
        old,
        AgentEvent::Cancel {
            partial_text: String::new()
        }
    );
    assert_eq!(
        serde_json::to_value(&old).unwrap(),
        json!({"type": "cancel"})
    );
    let old: AgentEvent =
        serde_json::from_value(json!({"type": "model_failed", "message": "down"})).unwrap();
    assert_eq!(
        old,
        AgentEvent::ModelFailed {
            message: "down".into(),
            partial_text: String::new()
        }
    );
}

/// A thread saved before an empty model turn was left out of the history may hold an assistant
/// message with neither text nor calls, which `validate_history` refuses (and Anthropic does):
/// its next model call drops it, and its state no longer keeps it.
#[test]
fn a_saved_thread_with_an_empty_assistant_message_heals_at_its_next_model_call() {
    let (state, _) = reduce(
        AgentState::new(None, steps(10)),
        AgentEvent::UserMessage {
            content: "hi".into(),
        },
    );
    let (state, _) = reduce(state, completion("", &["c1"]));
    let (state, _) = reduce(state, results(&["c1"]));
    let (state, _) = reduce(state, completion("done", &[]));
    // As an older build saved it: blank text, no calls.
    let text = serde_json::to_string(&state)
        .unwrap()
        .replace(r#""content":"done""#, r#""content":" \n""#);
    let state: AgentState = serde_json::from_str(&text).unwrap();
    assert!(ai_core::validate_history(state.messages()).is_err());

    let (state, intents) = reduce(
        state,
        AgentEvent::UserMessage {
            content: "again".into(),
        },
    );
    let [Intent::CallModel { messages }] = &intents[..] else {
        panic!("{intents:?}");
    };
    let roles = |messages: &[Message]| -> Vec<&'static str> {
        messages
            .iter()
            .map(|m| match m {
                Message::System { .. } => "system",
                Message::User { .. } => "user",
                Message::Assistant { .. } => "assistant",
                Message::Tool { .. } => "tool",
            })
            .collect()
    };
    assert_eq!(roles(messages), ["user", "assistant", "tool", "user"]);
    assert_eq!(
        roles(state.messages()),
        ["user", "assistant", "tool", "user"]
    );
}

/// A user message without text (empty or whitespace only) is refused, as providers refuse one:
/// the run ends with an error, and the state is kept as it was, calls waiting for approval
/// still waiting.
#[test]
fn a_user_message_without_text_is_refused_and_changes_nothing() {
    let (idle, _) = reduce(AgentState::new(None, steps(10)), user());
    let (idle, _) = reduce(idle, completion("hello", &[]));
    let (paused, _) = reduce(AgentState::new(None, steps(10)), user());
    let (paused, _) = reduce(paused, completion("", &["c1"]));
    let waiting = ToolExecResult {
        tool_call_id: ToolCallId::new("c1").unwrap(),
        outcome: ai_core::ToolOutcome::ApprovalRequired {
            args_hash: "h".into(),
        },
    };
    let (paused, _) = reduce(
        paused,
        AgentEvent::ToolResults {
            results: vec![waiting],
            cancelled: false,
        },
    );
    assert!(matches!(paused.phase(), Phase::AwaitingApproval { .. }));
    for state in [
        AgentState::new(Some("be brief".into()), steps(10)),
        idle,
        paused,
    ] {
        for blank in ["", " \n\t"] {
            let (after, intents) = reduce(
                state.clone(),
                AgentEvent::UserMessage {
                    content: blank.into(),
                },
            );
            assert_eq!(after, state, "{blank:?}");
            let [Intent::Finish { reason, error }] = &intents[..] else {
                panic!("{intents:?}");
            };
            assert_eq!(*reason, DoneReason::Error);
            assert!(
                error.as_deref().unwrap().contains("holds no text"),
                "{error:?}"
            );
        }
    }
}

/// A thread saved with a user message without text (a library caller's, before such a message
/// was refused) is loaded, and its next model call leaves that message out, as providers
/// refuse it; the state no longer keeps it.
#[test]
fn a_saved_thread_with_an_empty_user_message_heals_at_its_next_model_call() {
    let (state, _) = reduce(AgentState::new(None, steps(10)), user());
    let (state, _) = reduce(state, completion("hello", &[]));
    // As an older build saved it after a run with an empty message whose model call failed.
    let text = serde_json::to_string(&state)
        .unwrap()
        .replace(r#""content":"go""#, r#""content":"""#);
    let state: AgentState = serde_json::from_str(&text).unwrap();
    assert!(ai_core::validate_history(state.messages()).is_err());

    let (state, intents) = reduce(
        state,
        AgentEvent::UserMessage {
            content: "again".into(),
        },
    );
    let [Intent::CallModel { messages }] = &intents[..] else {
        panic!("{intents:?}");
    };
    ai_core::validate_history(messages).unwrap();
    assert_eq!(messages, state.messages());
    assert!(matches!(
        state.messages(),
        [Message::Assistant { content, .. }, Message::User { content: again }]
            if content == "hello" && again == "again"
    ));
}

/// A thread whose system prompt is empty (an agent configured with `Some("")`, or a thread saved
/// before such a message was refused) is taken, and its model calls leave that message out, as
/// providers refuse it.
#[test]
fn an_empty_system_prompt_is_left_out_of_the_model_call() {
    for blank in ["", "  \n"] {
        let (state, intents) = reduce(AgentState::new(Some(blank.into()), steps(10)), user());
        let [Intent::CallModel { messages }] = &intents[..] else {
            panic!("{intents:?}");
        };
        ai_core::validate_history(messages).unwrap();
        assert_eq!(messages, state.messages());
        assert!(
            matches!(messages.as_slice(), [Message::User { .. }]),
            "{messages:?}"
        );
        let history = vec![
            Message::System {
                content: blank.into(),
            },
            Message::User {
                content: "go".into(),
            },
            Message::Assistant {
                content: "hello".into(),
                tool_calls: Vec::new(),
            },
        ];
        AgentState::from_history(history, steps(10)).unwrap();
    }
}

/// A history holding messages without content (an empty user message, an assistant message
/// with neither text nor calls, as an older build's thread may hold) is taken by
/// `from_history` and `with_history` as a saved thread holding them is loaded, and heals at its
/// next model call; a history that breaks the rules once they are left out is still refused.
#[test]
fn a_history_with_messages_without_content_is_taken_and_heals_at_the_next_model_call() {
    let history = vec![
        Message::User {
            content: " ".into(),
        },
        Message::Assistant {
            content: String::new(),
            tool_calls: Vec::new(),
        },
        Message::User {
            content: "go".into(),
        },
        Message::Assistant {
            content: "hello".into(),
            tool_calls: Vec::new(),
        },
    ];
    assert!(ai_core::validate_history(&history).is_err());
    let state = AgentState::from_history(history.clone(), steps(10)).unwrap();
    assert_eq!(state.messages(), &history[..]);
    let state = AgentState::new(None, steps(3))
        .with_history(history)
        .unwrap();
    let (state, intents) = reduce(
        state,
        AgentEvent::UserMessage {
            content: "again".into(),
        },
    );
    let [Intent::CallModel { messages }] = &intents[..] else {
        panic!("{intents:?}");
    };
    ai_core::validate_history(messages).unwrap();
    assert_eq!(messages, state.messages());
    assert_eq!(messages.len(), 3, "{messages:?}");

    // Left out, they leave a call unanswered: refused as before.
    let unanswered = vec![
        Message::User {
            content: "go".into(),
        },
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![ai_core::AssistantToolCall {
                id: ToolCallId::new("c1").unwrap(),
                name: "core__x".into(),
                arguments: "{}".into(),
                provider_fields: Default::default(),
            }],
        },
        Message::User {
            content: String::new(),
        },
    ];
    assert!(matches!(
        AgentState::from_history(unanswered, steps(10)),
        Err(ai_core::HistoryError::Unanswered { .. })
    ));
}

mod properties;

/// A history `from_history` refuses names the message at fault by its place in the history it
/// was given, even when messages without content before it (which heal away) stand between.
#[test]
fn a_refused_history_names_its_message_by_its_place_in_the_history_given() {
    let orphan = ToolCallId::new("c9").unwrap();
    let history = vec![
        Message::User {
            content: " ".into(),
        },
        Message::User {
            content: "go".into(),
        },
        Message::Tool {
            tool_call_id: orphan.clone(),
            content: "{}".into(),
        },
    ];
    assert_eq!(
        AgentState::from_history(history, steps(10)),
        Err(ai_core::HistoryError::OrphanToolMessage {
            index: 2,
            tool_call_id: orphan,
        })
    );
}

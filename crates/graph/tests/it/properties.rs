//! Random scripts: whatever the model and tools do, a run ends once with a valid history.

use std::time::Duration;

use ai_core::{AiEvent, CompletionDelta, DoneReason, FinishReason, Message, ToolCallId};
use graph::{AgentConfig, ApprovalDecision};
use proptest::prelude::*;

use crate::support::{Fixture, Reply, call, calls, check_invariants, text};

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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_run_ends_once_with_a_valid_history(
        script in proptest::collection::vec(step(), 0..8),
        cancel_after_ms in proptest::option::of(0u64..120),
        max_steps in 1u32..6,
        gated in any::<bool>(),
        approvals in proptest::collection::vec((any::<bool>(), any::<bool>()), 0..6),
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
        let mut segments = Vec::new();
        runtime.block_on(async {
            if let Some(ms) = cancel_after_ms {
                let cancel = f.cancel.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    cancel.cancel();
                });
            }
            let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
            let mut state = f.run(f.agent.new_state(), "go").await;
            segments.push((f.events.lock().unwrap().drain(..).collect::<Vec<_>>(), state.clone()));
            // Answer approval pauses with random decisions (right or wrong hash, yes or no).
            for (approve, right_hash) in &approvals {
                let waiting: Vec<(ToolCallId, String)> = segments.last().unwrap().0.iter().filter_map(|e| match e {
                    AiEvent::ApprovalRequired { tool_call_id, args_hash, .. } => Some((tool_call_id.clone(), args_hash.clone())),
                    _ => None,
                }).collect();
                if waiting.is_empty() {
                    break;
                }
                let decisions = waiting.into_iter().map(|(id, hash)| ApprovalDecision {
                    tool_call_id: id,
                    approved: *approve,
                    args_hash: if *right_hash { hash } else { "0".repeat(64) },
                    reason: None,
                }).collect();
                state = f.agent.resume(state, decisions, &f.ctx, &f.catalog, &sink, &f.cancel).await;
                segments.push((f.events.lock().unwrap().drain(..).collect(), state.clone()));
            }
            // A next turn on the same state must work too.
            let state = f.run(state, "again").await;
            segments.push((f.events.lock().unwrap().drain(..).collect(), state));
        });
        // Every result shown to a client is in the history under the same id once the run (or
        // the runs it paused for) ended, and every call shown started is shown ended.
        let mut before = 0;
        let mut carried: Vec<ToolCallId> = Vec::new();
        for (events, state) in &segments {
            let shown = result_ids(events);
            carried.extend(shown.iter().map(|id| (*id).clone()));
            let paused = matches!(
                events.last(),
                Some(AiEvent::Done { reason: DoneReason::AwaitingApproval })
            );
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
            let awaiting = matches!(events.last(), Some(AiEvent::Done { reason: DoneReason::AwaitingApproval }));
            if awaiting {
                // Paused: the history is completed on resume; the other invariants hold now.
                let saved = serde_json::to_string(state).unwrap();
                prop_assert!(serde_json::from_str::<graph::AgentState>(&saved).is_ok());
                prop_assert_eq!(events.iter().filter(|e| matches!(e, AiEvent::Done { .. })).count(), 1);
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

/// A model turn as a decoder streams and assembles it, or that breaks after it streamed.
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
    )
        .prop_map(|(deltas, text, finish, answers)| {
            let completion = answers.then(|| assemble(&deltas, text, finish));
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

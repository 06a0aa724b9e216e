//! AG-UI: each scenario's events, snapshotted and checked against `verifyEvents`' rules.

use wire_ui::agui::{AguiEvent, Translator};
use wire_ui::sse;

fn translate(events: &[ai_core::AiEvent]) -> Vec<AguiEvent> {
    let mut t = Translator::new("thread-1", "run-1");
    let mut out = t.start();
    for event in events {
        out.extend(t.push(event).unwrap());
    }
    assert!(t.is_finished(), "no terminal event");
    out
}

/// The content of each `TOOL_CALL_RESULT` in `events`, in order.
fn tool_results(events: &[AguiEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            AguiEvent::ToolCallResult { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

/// The ordering rules of `@ag-ui/client`'s `verifyEvents`, as far as this server uses them.
#[allow(clippy::collapsible_match)] // One arm per rule reads better than guards.
pub(crate) fn verify(events: &[AguiEvent]) -> Result<(), String> {
    let mut open_text: Vec<&str> = Vec::new();
    let mut open_calls: Vec<&str> = Vec::new();
    let mut open_steps: Vec<&str> = Vec::new();
    let mut answered: Vec<&str> = Vec::new();
    for (i, event) in events.iter().enumerate() {
        let fail = |why: &str| Err(format!("event {i} ({event:?}): {why}"));
        if (i == 0) != matches!(event, AguiEvent::RunStarted { .. }) {
            return fail("RUN_STARTED must come first, once");
        }
        if i > 0 && i == events.len() - 1 {
            if !matches!(
                event,
                AguiEvent::RunFinished { .. } | AguiEvent::RunError { .. }
            ) {
                return fail("the last event must be RUN_FINISHED or RUN_ERROR");
            }
        } else if i > 0
            && matches!(
                event,
                AguiEvent::RunFinished { .. } | AguiEvent::RunError { .. }
            )
        {
            return fail("a terminal event before the end");
        }
        match event {
            AguiEvent::TextMessageStart { message_id, .. } => {
                if open_text.contains(&message_id.as_str()) {
                    return fail("started twice");
                }
                open_text.push(message_id);
            }
            AguiEvent::TextMessageContent { message_id, delta } => {
                if !open_text.contains(&message_id.as_str()) {
                    return fail("content for a message that is not open");
                }
                if delta.is_empty() {
                    return fail("empty delta");
                }
            }
            AguiEvent::TextMessageEnd { message_id } => {
                if !open_text.contains(&message_id.as_str()) {
                    return fail("end of a message that is not open");
                }
                open_text.retain(|m| *m != message_id);
            }
            AguiEvent::ToolCallStart { tool_call_id, .. } => {
                if open_calls.contains(&tool_call_id.as_str()) {
                    return fail("started twice");
                }
                open_calls.push(tool_call_id);
            }
            AguiEvent::ToolCallArgs {
                tool_call_id,
                delta,
            } => {
                if !open_calls.contains(&tool_call_id.as_str()) {
                    return fail("args for a call that is not open");
                }
                if delta.is_empty() {
                    return fail("empty delta");
                }
            }
            AguiEvent::ToolCallEnd { tool_call_id } => {
                if !open_calls.contains(&tool_call_id.as_str()) {
                    return fail("end of a call that is not open");
                }
                open_calls.retain(|c| *c != tool_call_id);
            }
            // `@ag-ui/client` takes each result for a tool message of its own: a second one for a
            // call gives the next run's model two answers to it.
            AguiEvent::ToolCallResult { tool_call_id, .. } => {
                if answered.contains(&tool_call_id.as_str()) {
                    return fail("a second TOOL_CALL_RESULT for one call");
                }
                answered.push(tool_call_id);
            }
            AguiEvent::StepStarted { step_name } => open_steps.push(step_name),
            AguiEvent::StepFinished { step_name } => {
                if !open_steps.contains(&step_name.as_str()) {
                    return fail("end of a step that is not open");
                }
                open_steps.retain(|s| *s != step_name);
            }
            // The protocol lets RUN_ERROR leave calls open, but nothing more comes for them:
            // the client's history would keep them unanswered.
            AguiEvent::RunError { .. } if !open_calls.is_empty() || !open_text.is_empty() => {
                return fail("RUN_ERROR with a tool call or text message open");
            }
            AguiEvent::RunFinished { .. } => {
                if !open_text.is_empty() || !open_calls.is_empty() || !open_steps.is_empty() {
                    return fail("RUN_FINISHED with messages, calls or steps open");
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[test]
fn every_scenario_follows_the_protocol() {
    for (name, events) in crate::scenarios::all() {
        let out = translate(&events);
        verify(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
        let body: String = out.iter().map(sse::frame).collect();
        insta::assert_snapshot!(format!("agui_{name}"), body);
    }
}

/// A cut answer is a finished run, not a failure: `RUN_FINISHED` (after the open message and
/// step are closed) whose `result` names why, with no `outcome` (AG-UI's only other one is an
/// interrupt).
#[test]
fn a_cut_answer_finishes_the_run_and_its_result_says_why() {
    for (name, why) in [
        ("cut_by_length", "length"),
        ("cut_by_content_filter", "content_filter"),
        ("ended_for_another_reason", "other"),
    ] {
        let (_, events) = crate::scenarios::all()
            .into_iter()
            .find(|(scenario, _)| *scenario == name)
            .unwrap();
        let out = translate(&events);
        verify(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            serde_json::to_value(out.last().unwrap()).unwrap(),
            serde_json::json!({
                "type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1",
                "result": {"reason": why}
            }),
            "{name}"
        );
        assert!(
            matches!(&out[out.len() - 3], AguiEvent::TextMessageEnd { .. }),
            "{name}: {out:?}"
        );
    }
}

#[test]
fn the_verifier_catches_what_it_should() {
    let bad = vec![
        AguiEvent::RunStarted {
            thread_id: "t".into(),
            run_id: "r".into(),
        },
        AguiEvent::ToolCallArgs {
            tool_call_id: "c".into(),
            delta: "{".into(),
        },
    ];
    assert!(verify(&bad).is_err());
}

/// `RUN_STARTED` comes once, first, however the translator is driven: a second `start` sends
/// nothing, a `push` before any `start` sends it first, and nothing follows the terminal event.
#[test]
fn run_started_is_sent_once_and_first() {
    use ai_core::{AiEvent, DoneReason};
    let started = |events: &[AguiEvent]| {
        events
            .iter()
            .filter(|e| matches!(e, AguiEvent::RunStarted { .. }))
            .count()
    };
    let stop = AiEvent::Done {
        reason: DoneReason::Stop,
    };
    // `start` twice, then once more after the end, where `translate` checks it sends nothing;
    // then a `push` before any `start`.
    for (events, starts) in [
        (vec![stop.clone()], &[0, 0, 1][..]),
        (vec![AiEvent::TextDelta { delta: "Hi".into() }, stop], &[1]),
    ] {
        let mut t = Translator::new("thread-1", "run-1");
        let out = crate::properties::translate(&mut t, &events, starts).unwrap();
        verify(&out).unwrap();
        assert_eq!(started(&out), 1, "{out:?}");
    }

    let mut t = Translator::new("thread-1", "run-1");
    let out = t.cut("the client fell behind");
    verify(&out).unwrap();
    assert!(
        matches!(out.first(), Some(AguiEvent::RunStarted { .. })),
        "{out:?}"
    );
}

/// Unknown top-level fields are ignored, as `@ag-ui/core`'s own schema accepts them (clients of
/// later protocol versions send fields this one does not know); an unknown field in an answer to
/// an interrupt, which decides whether a tool runs, is refused.
#[test]
fn run_agent_input_parses_ignores_new_fields_and_refuses_unknown_answer_fields() {
    let input: wire_ui::agui::RunAgentInput = serde_json::from_value(serde_json::json!({
        "threadId": "t1", "runId": "r1", "state": {}, "tools": [], "context": [],
        "forwardedProps": {},
        "messages": [
            {"id": "1", "role": "user", "content": "hi"},
            {"id": "2", "role": "assistant", "content": "",
             "toolCalls": [{"id": "c1", "type": "function",
                            "function": {"name": "core__get_current_time", "arguments": "{}"}}]},
            {"id": "3", "role": "tool", "toolCallId": "c1", "content": "{}"},
            {"id": "5", "role": "activity", "activityType": "progress", "content": {"pct": 50}},
            {"id": "6", "role": "reasoning", "content": "thinking", "encryptedValue": "x"},
            {"id": "4", "role": "user", "content": [{"type": "text", "text": "and now?"}]}
        ]
    }))
    .unwrap();
    assert_eq!(input.messages.len(), 6);
    assert!(matches!(
        &input.messages[3],
        wire_ui::agui::InputMessage::Activity { id } if id == "5"
    ));
    assert!(matches!(
        &input.messages[4],
        wire_ui::agui::InputMessage::Reasoning { id } if id == "6"
    ));
    let unknown = serde_json::from_value::<wire_ui::agui::InputMessage>(
        serde_json::json!({"id": "7", "role": "narrator", "content": "x"}),
    )
    .unwrap_err();
    assert!(unknown.to_string().contains("narrator"), "{unknown}");
    let later = serde_json::from_value::<wire_ui::agui::RunAgentInput>(serde_json::json!({
        "threadId": "t1", "runId": "r1", "messages": [], "surprise": true,
        "parentRunId": "r0", "protocolVersion": "1.1"
    }))
    .unwrap();
    assert_eq!(later.parent_run_id.as_deref(), Some("r0"));
    let error = serde_json::from_value::<wire_ui::agui::RunAgentInput>(serde_json::json!({
        "threadId": "t1", "runId": "r1", "messages": [],
        "resume": [{"interruptId": "c1", "status": "resolved", "payload": {"approved": true},
                    "editedArgs": {"path": "elsewhere"}}]
    }))
    .unwrap_err();
    assert!(error.to_string().contains("editedArgs"), "{error}");
}

/// `metadata` is a field of the protocol's own resume entry (`ResumeEntrySchema` in
/// `@ag-ui/core` 1.0.0, which `@ag-ui/client`'s `buildResumeArray` passes on from the app's
/// answer): an answer carrying it is read, and it changes nothing of what the answer says.
#[test]
fn a_resume_entry_with_the_protocol_s_metadata_is_read() {
    let input: wire_ui::agui::RunAgentInput = serde_json::from_value(serde_json::json!({
        "threadId": "t1", "runId": "r2", "messages": [],
        "resume": [
            {"interruptId": "c1", "status": "resolved", "payload": {"approved": true},
             "metadata": {"answeredBy": "ui", "at": 1}},
            {"interruptId": "c2", "status": "cancelled", "metadata": {}}
        ]
    }))
    .unwrap();
    assert!(input.resume[0].approves());
    assert!(!input.resume[1].approves());
}

/// An approval's payload holds what the interrupt's `responseSchema` defines and nothing else:
/// a key it does not define (edited arguments) would change what the answer means, so it is
/// refused rather than read as a plain approval; the refusal names the kind of fault, never the
/// key or value sent.
#[test]
fn an_approval_payload_holds_only_what_the_response_schema_defines() {
    use wire_ui::agui::{ApprovalPayloadError as E, ResumeEntry};
    let entry = |payload: Option<serde_json::Value>| -> ResumeEntry {
        let mut entry = serde_json::json!({"interruptId": "c1", "status": "resolved"});
        if let Some(payload) = payload {
            entry["payload"] = payload;
        }
        serde_json::from_value(entry).unwrap()
    };
    let json = |v: serde_json::Value| Some(v);
    let cases = [
        (json(serde_json::json!({"approved": true})), Ok(())),
        (
            json(serde_json::json!({"approved": false, "reason": "no"})),
            Ok(()),
        ),
        (
            json(serde_json::json!({"approved": true, "editedArgs": {"path": "/etc"}})),
            Err(E::UnknownKey),
        ),
        (json(serde_json::json!(true)), Err(E::NotAnObject)),
        (
            json(serde_json::json!({"approved": "yes"})),
            Err(E::ApprovedNotABoolean),
        ),
        (
            json(serde_json::json!({"approved": false, "reason": 7})),
            Err(E::ReasonNotAString),
        ),
    ];
    for (payload, expected) in cases {
        let shown = format!("{payload:?}");
        let entry = entry(payload);
        let checked = entry.check_approval_payload();
        assert_eq!(checked, expected, "{shown}");
        if let Err(error) = checked {
            let message = error.to_string();
            assert!(!message.contains("editedArgs"), "{message}");
            assert!(message.contains("\"approved\": boolean"), "{message}");
        }
    }
}

/// A `cancelled` entry denies its call whatever its payload holds (`@ag-ui/core` lets a payload
/// be any value), so its payload is not checked: a client that cancels with a payload of its
/// own, as it could before approvals were checked, is not refused, and nothing runs.
#[test]
fn a_cancelled_entry_denies_whatever_its_payload_holds() {
    use wire_ui::agui::ResumeEntry;
    for payload in [
        serde_json::json!({"approved": true, "editedArgs": {"path": "/etc"}}),
        serde_json::json!("dismissed"),
        serde_json::json!({"approved": "yes", "reason": 7}),
    ] {
        let entry: ResumeEntry = serde_json::from_value(serde_json::json!({
            "interruptId": "c1", "status": "cancelled", "payload": payload,
        }))
        .unwrap();
        assert_eq!(entry.check_approval_payload(), Ok(()), "{payload}");
        assert!(!entry.approves(), "{payload}");
    }
}

/// A call whose arguments were still streaming when the run ended, for any reason, never ran:
/// it is ended (`TOOL_CALL_END`) and answered (`TOOL_CALL_RESULT` saying so) before the terminal
/// event, so the client's history holds no call left open or without an answer.
#[test]
fn a_call_still_streaming_at_the_end_is_ended_and_answered() {
    use ai_core::{AiEvent, DoneReason, ToolCallId};
    let id = |raw: &str| ToolCallId::new(raw).unwrap();
    for (reason, terminal) in [
        (DoneReason::Error, "RUN_ERROR"),
        (DoneReason::Cancelled, "RUN_FINISHED"),
        (DoneReason::Stop, "RUN_FINISHED"),
    ] {
        let out = translate(&[
            AiEvent::StepStarted { step: 1 },
            AiEvent::ToolCallStreamStart {
                tool_call_id: id("call_1"),
                tool_name: "core__workspace_read".into(),
            },
            AiEvent::ToolCallArgsDelta {
                tool_call_id: id("call_1"),
                delta: r#"{"pa"#.into(),
            },
            AiEvent::ToolCallStreamStart {
                tool_call_id: id("call_2"),
                tool_name: "core__get_current_time".into(),
            },
            AiEvent::Done { reason },
        ]);
        verify(&out).unwrap_or_else(|e| panic!("{reason:?}: {e}"));
        let json: Vec<serde_json::Value> = out
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        let content = serde_json::json!({"error": {"message":
            "the run ended before this call's arguments were complete, so it never ran"}})
        .to_string();
        let at = json
            .iter()
            .position(|e| e["type"] == "TOOL_CALL_END")
            .unwrap_or_else(|| panic!("{reason:?}: {json:?}"));
        assert_eq!(
            json[at..at + 4],
            [
                serde_json::json!({"type": "TOOL_CALL_END", "toolCallId": "call_1"}),
                serde_json::json!({"type": "TOOL_CALL_RESULT", "messageId": "run-1-result-call_1",
                    "toolCallId": "call_1", "content": content, "role": "tool"}),
                serde_json::json!({"type": "TOOL_CALL_END", "toolCallId": "call_2"}),
                serde_json::json!({"type": "TOOL_CALL_RESULT", "messageId": "run-1-result-call_2",
                    "toolCallId": "call_2", "content": content, "role": "tool"}),
            ],
            "{reason:?}"
        );
        assert_eq!(json.last().unwrap()["type"], terminal, "{reason:?}");
    }
}

/// A call announced while streaming whose arguments came in no fragment (a Responses server
/// that sends them only on `.done` or the finished item) shows the arguments its start or its
/// approval request brings, before its `TOOL_CALL_END`: the client assembles a call's
/// arguments from `TOOL_CALL_ARGS` alone, and would hold the call with none. A call whose
/// arguments streamed gets no second copy (`TOOL_CALL_ARGS` appends).
#[test]
fn a_streamed_call_without_fragments_shows_the_arguments_it_ran_with() {
    use std::sync::Arc;

    use ai_core::{AiEvent, DoneReason, ToolCallId, ToolId, ToolOutcome};
    use serde_json::json;
    let id = |raw: &str| ToolCallId::new(raw).unwrap();
    let out = translate(&[
        AiEvent::StepStarted { step: 1 },
        AiEvent::ToolCallStreamStart {
            tool_call_id: id("call_1"),
            tool_name: "core__workspace_read".into(),
        },
        AiEvent::ToolCallStreamStart {
            tool_call_id: id("call_2"),
            tool_name: "core__workspace_write".into(),
        },
        AiEvent::ToolCallStreamStart {
            tool_call_id: id("call_3"),
            tool_name: "core__workspace_read".into(),
        },
        AiEvent::ToolCallArgsDelta {
            tool_call_id: id("call_3"),
            delta: r#"{"path": "b"}"#.into(),
        },
        AiEvent::ToolCallStart {
            tool_call_id: id("call_1"),
            tool_name: "core__workspace_read".into(),
            args: Some(Arc::new(json!({"path": "a"}))),
        },
        AiEvent::ApprovalRequired {
            tool_call_id: id("call_2"),
            tool_id: ToolId::parse("core__workspace_write").unwrap(),
            args: Arc::new(json!({"path": "w"})),
            args_hash: "0".repeat(64),
        },
        AiEvent::ToolCallStart {
            tool_call_id: id("call_3"),
            tool_name: "core__workspace_read".into(),
            args: Some(Arc::new(json!({"path": "b"}))),
        },
        AiEvent::ToolCallResult {
            tool_call_id: id("call_1"),
            tool_name: "core__workspace_read".into(),
            outcome: ToolOutcome::Ok {
                value: Arc::new(json!("A")),
            },
        },
        AiEvent::ToolCallResult {
            tool_call_id: id("call_3"),
            tool_name: "core__workspace_read".into(),
            outcome: ToolOutcome::Ok {
                value: Arc::new(json!("B")),
            },
        },
        AiEvent::Done {
            reason: DoneReason::AwaitingApproval,
        },
    ]);
    verify(&out).unwrap();
    let shown = |call: &str| -> Vec<&str> {
        out.iter()
            .filter_map(|e| match e {
                AguiEvent::ToolCallArgs {
                    tool_call_id,
                    delta,
                } if tool_call_id == call => Some(delta.as_str()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(shown("call_1"), [r#"{"path":"a"}"#], "{out:?}");
    assert_eq!(shown("call_2"), [r#"{"path":"w"}"#], "{out:?}");
    assert_eq!(shown("call_3"), [r#"{"path": "b"}"#], "{out:?}");
}

/// A call whose streamed fragments held only whitespace (a parameterless call a server sends
/// `" "` for, which the decoder runs with `{}`) shows the arguments it ran with after them:
/// the client would otherwise hold text that is not JSON. JSON allows the whitespace before.
#[test]
fn a_call_whose_fragments_were_only_whitespace_shows_the_arguments_it_ran_with() {
    use std::sync::Arc;

    use ai_core::{AiEvent, DoneReason, ToolCallId, ToolOutcome};
    use serde_json::json;
    let id = ToolCallId::new("call_1").unwrap();
    let name = "core__get_current_time";
    let out = translate(&[
        AiEvent::StepStarted { step: 1 },
        AiEvent::ToolCallStreamStart {
            tool_call_id: id.clone(),
            tool_name: name.into(),
        },
        AiEvent::ToolCallArgsDelta {
            tool_call_id: id.clone(),
            delta: " ".into(),
        },
        AiEvent::ToolCallArgsDelta {
            tool_call_id: id.clone(),
            delta: "\n".into(),
        },
        AiEvent::ToolCallStart {
            tool_call_id: id.clone(),
            tool_name: name.into(),
            args: Some(Arc::new(json!({}))),
        },
        AiEvent::ToolCallResult {
            tool_call_id: id,
            tool_name: name.into(),
            outcome: ToolOutcome::Ok {
                value: Arc::new(json!({"now": "noon"})),
            },
        },
        AiEvent::Done {
            reason: DoneReason::Stop,
        },
    ]);
    verify(&out).unwrap();
    let arguments: String = out
        .iter()
        .filter_map(|e| match e {
            AguiEvent::ToolCallArgs { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&arguments).ok(),
        Some(json!({})),
        "{arguments:?}"
    );
}

/// A run that fails or is cancelled while its text streams ends that message
/// (`TEXT_MESSAGE_END`) before its terminal event: nothing more will come for it, and a client
/// that shows a message as streaming until its end would do so for good. (A cancelled run
/// finishes: it closes its step too.)
#[test]
fn a_failed_or_cancelled_run_ends_its_open_text_first() {
    use ai_core::{AiEvent, DoneReason};
    for (reason, end) in [
        (DoneReason::Error, &["RUN_ERROR"][..]),
        (
            DoneReason::Cancelled,
            &["STEP_FINISHED", "RUN_FINISHED"][..],
        ),
    ] {
        let out = translate(&[
            AiEvent::StepStarted { step: 1 },
            AiEvent::TextDelta {
                delta: "partial".into(),
            },
            AiEvent::Error {
                message: "provider error: overloaded".into(),
            },
            AiEvent::Done { reason },
        ]);
        verify(&out).unwrap_or_else(|e| panic!("{reason:?}: {e}"));
        let types: Vec<String> = out
            .iter()
            .map(|e| {
                serde_json::to_value(e).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let mut want = vec![
            "RUN_STARTED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
        ];
        want.extend(end);
        assert_eq!(types, want, "{reason:?}");
    }
}

/// A call whose arguments were complete (its `ToolCallStart` came) but which had no result when
/// the run ended (the server's run task died, or its log could not be written) is answered
/// before `RUN_ERROR`, saying it may have run, so the client's history holds no call without an
/// answer. A call that waits for approval is answered too, saying it never ran: the run ends
/// without pausing, so no interrupt will ask for it.
#[test]
fn a_started_call_without_a_result_at_the_end_is_answered() {
    let out = translate(&crate::scenarios::died_with_a_call_unanswered());
    verify(&out).unwrap();
    let json: Vec<serde_json::Value> = out
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let results: Vec<&serde_json::Value> = json
        .iter()
        .filter(|e| e["type"] == "TOOL_CALL_RESULT")
        .collect();
    let content = |message: &str| serde_json::json!({"error": {"message": message}}).to_string();
    assert_eq!(
        results,
        [
            &serde_json::json!({"type": "TOOL_CALL_RESULT", "messageId": "run-1-result-call_1",
            "toolCallId": "call_1", "role": "tool", "content":
            content("the run ended before this call's result arrived: the tool may have run")}),
            &serde_json::json!({"type": "TOOL_CALL_RESULT", "messageId": "run-1-result-call_2",
            "toolCallId": "call_2", "role": "tool", "content":
            content("the run ended before this call was approved, so it never ran")}),
        ],
        "{json:?}"
    );
    assert_eq!(json.last().unwrap()["type"], "RUN_ERROR");
}

/// A call the runner refused (its start came without arguments: they were complete but
/// invalid, or the call was denied) and whose result had not come when the run ended never ran
/// because it was refused: it is told so, never that its arguments were incomplete.
#[test]
fn a_refused_call_without_a_result_at_the_end_is_told_it_was_refused() {
    let out = translate(&crate::scenarios::died_after_refusing_calls());
    verify(&out).unwrap();
    let json: Vec<serde_json::Value> = out
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let results: Vec<&serde_json::Value> = json
        .iter()
        .filter(|e| e["type"] == "TOOL_CALL_RESULT")
        .collect();
    let content = |message: &str| serde_json::json!({"error": {"message": message}}).to_string();
    let refused =
        content("the run ended before this call's result arrived; it was refused, so it never ran");
    assert_eq!(
        results,
        [
            &serde_json::json!({"type": "TOOL_CALL_RESULT", "messageId": "run-1-result-call_1",
            "toolCallId": "call_1", "role": "tool", "content": refused}),
            &serde_json::json!({"type": "TOOL_CALL_RESULT", "messageId": "run-1-result-call_2",
            "toolCallId": "call_2", "role": "tool", "content": refused}),
        ],
        "{json:?}"
    );
    assert_eq!(json.last().unwrap()["type"], "RUN_ERROR");
}

/// A stream the server cuts for a client that fell behind ends while its run goes on: the calls
/// it leaves open are told their result was not sent and the run goes on (a refused one, or a
/// denied one an earlier run showed, that it never runs), never that the run ended, and the cut's
/// message is the `RUN_ERROR`'s. Nothing follows.
#[test]
fn a_cut_stream_tells_its_open_calls_the_run_goes_on() {
    use ai_core::ToolCallId;
    let mut t = Translator::continuing(
        "thread-1",
        "run-1",
        [
            (ToolCallId::new("call_5").unwrap(), true),
            (ToolCallId::new("call_6").unwrap(), false),
        ],
    );
    let mut out = t.start();
    for event in crate::scenarios::calls_in_flight_at_a_cut() {
        out.extend(t.push(&event).unwrap());
    }
    out.extend(t.cut("this stream was cut; the run goes on"));
    assert!(t.is_finished());
    assert!(
        t.cut("again").is_empty(),
        "nothing after the terminal event"
    );
    verify(&out).unwrap();
    let json: Vec<serde_json::Value> = out
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let results: Vec<(&str, serde_json::Value)> = json
        .iter()
        .filter(|e| e["type"] == "TOOL_CALL_RESULT")
        .map(|e| {
            let content: serde_json::Value =
                serde_json::from_str(e["content"].as_str().unwrap()).unwrap();
            (
                e["toolCallId"].as_str().unwrap(),
                content["error"]["message"].clone(),
            )
        })
        .collect();
    // No endpoint reads a thread back: the next message goes on from it.
    let goes_on = "the stream was cut before this call's result arrived; the run goes on, and its \
                   thread, which the next message goes on from, holds the result once it has \
                   ended";
    let refused = "the stream was cut before this call's result arrived; it was refused, so it \
                   never ran";
    let denied = "the stream was cut before this call's denial was recorded; the call never runs";
    assert_eq!(
        results,
        [
            ("call_5", goes_on.into()),
            ("call_6", denied.into()),
            ("call_1", goes_on.into()),
            ("call_2", goes_on.into()),
            ("call_3", refused.into()),
            ("call_4", goes_on.into()),
        ],
        "{json:?}"
    );
    assert_eq!(
        json.last().unwrap(),
        &serde_json::json!({"type": "RUN_ERROR", "message": "this stream was cut; the run goes on",
        "code": "error"})
    );
}

/// Call ids reach the client byte-exact, control characters and all: the translator writes
/// them as they are, never through `ToolCallId`'s `Display`, which escapes them for messages.
#[test]
fn call_ids_reach_the_client_byte_exact() {
    use crate::scenarios::{ODD_CALL_ID_PREFIX_JSON, all, with_odd_call_ids};
    let mut with_calls = 0;
    for (name, events) in all() {
        let plain = serde_json::to_string(&translate(&events)).unwrap();
        let odd = serde_json::to_string(&translate(&with_odd_call_ids(&events))).unwrap();
        let want = plain.replace("call_", &format!("{ODD_CALL_ID_PREFIX_JSON}call_"));
        assert_eq!(odd, want, "{name}");
        with_calls += usize::from(odd != plain);
    }
    assert!(with_calls > 3, "the scenarios show calls");
}

/// `null` for `approved` or `reason` is read as the key left out, as a client whose language
/// writes an unset field as `null` (Go's `*bool`, Python's `None`) sends it: a `reason` that is
/// `null` gives no reason, and an `approved` that is `null` is no answer, refused as a missing
/// one is.
#[test]
fn a_null_in_an_approval_payload_reads_as_left_out() {
    use wire_ui::agui::{ApprovalPayloadError as E, ResumeEntry};
    let entry = |payload: serde_json::Value| -> ResumeEntry {
        serde_json::from_value(serde_json::json!({
            "interruptId": "c1", "status": "resolved", "payload": payload,
        }))
        .unwrap()
    };
    for payload in [
        serde_json::json!({"approved": null}),
        serde_json::json!({"approved": null, "reason": null}),
        serde_json::json!({"reason": null}),
    ] {
        let entry = entry(payload.clone());
        assert_eq!(
            entry.check_approval_payload(),
            Err(E::ApprovedMissing),
            "{payload}"
        );
        assert!(!entry.approves(), "{payload}");
        assert_eq!(entry.reason(), None, "{payload}");
    }
    let denied = entry(serde_json::json!({"approved": false, "reason": null}));
    assert_eq!(denied.check_approval_payload(), Ok(()));
    assert!(!denied.approves());
    assert_eq!(denied.reason(), None);
    let approved = entry(serde_json::json!({"approved": true, "reason": null}));
    assert_eq!(approved.check_approval_payload(), Ok(()));
    assert!(approved.approves());
}

/// A `resolved` entry is an answer, so it must say what the answer is: one whose payload has no
/// `approved` (no payload, `null`, `{}`, `{"reason": …}` or `"approved": null`) is refused, as
/// the AI SDK route refuses an `approval-responded` part without `approval.approved`, never read
/// as a denial without a word (a client's mistake would deny a call the user may have
/// approved). `@ag-ui/client` always sends a boolean; a `cancelled` entry still denies with or
/// without a payload.
#[test]
fn a_resolved_entry_without_approved_is_refused() {
    use wire_ui::agui::{ApprovalPayloadError as E, ResumeEntry};
    let resolved = |payload: Option<serde_json::Value>| -> ResumeEntry {
        let mut entry = serde_json::json!({"interruptId": "c1", "status": "resolved"});
        if let Some(payload) = payload {
            entry["payload"] = payload;
        }
        serde_json::from_value(entry).unwrap()
    };
    for payload in [
        None,
        Some(serde_json::Value::Null),
        Some(serde_json::json!({})),
        Some(serde_json::json!({"reason": "not now"})),
        Some(serde_json::json!({"approved": null, "reason": "not now"})),
    ] {
        let shown = format!("{payload:?}");
        let error = resolved(payload).check_approval_payload().unwrap_err();
        assert_eq!(error, E::ApprovedMissing, "{shown}");
        let message = error.to_string();
        assert!(message.contains("`approved` is missing"), "{message}");
        assert!(message.contains("\"approved\": boolean"), "{message}");
    }
    let cancelled: ResumeEntry =
        serde_json::from_value(serde_json::json!({"interruptId": "c1", "status": "cancelled"}))
            .unwrap();
    assert_eq!(cancelled.check_approval_payload(), Ok(()));
    assert!(!cancelled.approves());
}

/// A cancelled run (the server stopped it: a shutdown) did not fail: it ends as `@ag-ui/core`
/// 1.0 says such a run ends, `RUN_FINISHED` with the `cancelled` outcome, after its open text,
/// calls and step are closed, never `RUN_ERROR` (which a client shows as a failure). Its
/// `result` says why, as every `RUN_FINISHED` of this server does.
#[test]
fn a_cancelled_run_finishes_with_the_cancelled_outcome() {
    use ai_core::{AiEvent, DoneReason};
    for (name, events) in crate::scenarios::all()
        .into_iter()
        .filter(|(name, _)| name.starts_with("cancelled"))
        .chain([(
            "text",
            vec![
                AiEvent::StepStarted { step: 1 },
                AiEvent::TextDelta {
                    delta: "partial".into(),
                },
                AiEvent::Done {
                    reason: DoneReason::Cancelled,
                },
            ],
        )])
    {
        let out = translate(&events);
        verify(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            !out.iter().any(|e| matches!(e, AguiEvent::RunError { .. })),
            "{name}: {out:?}"
        );
        assert_eq!(
            serde_json::to_value(out.last().unwrap()).unwrap(),
            serde_json::json!({
                "type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1",
                "result": {"reason": "cancelled"}, "outcome": {"type": "cancelled"}
            }),
            "{name}"
        );
        assert_eq!(
            serde_json::to_value(&out[out.len() - 2]).unwrap(),
            serde_json::json!({"type": "STEP_FINISHED", "stepName": "step 1"}),
            "{name}"
        );
    }
}

/// A run that resumes from the user's answers and ends before the answered calls' results came
/// (its log could not be written, its task died, or its stream was cut) still answers each call
/// an earlier run showed before `RUN_ERROR`: without a `TOOL_CALL_RESULT`, the client's history
/// would hold a call without an answer. An approved call may have run; one not approved (denied,
/// or cancelled by a new message) never ran. A call whose result came is answered once.
#[test]
fn a_resumed_run_that_fails_before_its_results_answers_the_calls_it_continues() {
    use ai_core::{AiEvent, DoneReason, ToolCallId, ToolOutcome};
    let answers = [("call_w", true), ("call_x", false), ("call_y", true)]
        .map(|(id, approved)| (ToolCallId::new(id).unwrap(), approved));
    let mut t = Translator::continuing("thread-1", "run-2", answers);
    let mut out = t.start();
    for event in [
        AiEvent::ToolCallStart {
            tool_call_id: ToolCallId::new("call_y").unwrap(),
            tool_name: "core__get_current_time".into(),
            args: None,
        },
        AiEvent::ToolCallResult {
            tool_call_id: ToolCallId::new("call_y").unwrap(),
            tool_name: "core__get_current_time".into(),
            outcome: ToolOutcome::Ok {
                value: std::sync::Arc::new(serde_json::json!({"ok": true})),
            },
        },
        AiEvent::Error {
            message: "the run could not be recorded".into(),
        },
        AiEvent::Done {
            reason: DoneReason::Error,
        },
    ] {
        out.extend(t.push(&event).unwrap());
    }
    verify(&out).unwrap();
    let json: Vec<serde_json::Value> = out
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let content = |message: &str| serde_json::json!({"error": {"message": message}}).to_string();
    assert_eq!(
        json,
        [
            serde_json::json!({"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-2"}),
            serde_json::json!({"type": "TOOL_CALL_RESULT", "messageId": "run-2-result-call_y",
            "toolCallId": "call_y", "role": "tool", "content": r#"{"ok":true}"#}),
            serde_json::json!({"type": "TOOL_CALL_RESULT", "messageId": "run-2-result-call_w",
            "toolCallId": "call_w", "role": "tool", "content":
            content("the run ended before this call's result arrived: the tool may have run")}),
            serde_json::json!({"type": "TOOL_CALL_RESULT", "messageId": "run-2-result-call_x",
            "toolCallId": "call_x", "role": "tool", "content":
            content("the run ended before this call's denial was recorded; the call never ran")}),
            serde_json::json!({"type": "RUN_ERROR", "message": "the run could not be recorded",
            "code": "error"}),
        ],
        "{json:?}"
    );
}

/// A start without arguments is a call the runner refused before running it, or a denied call
/// an earlier run showed, answered without running (its result follows at once). A run that
/// ends between the two (its task dead, its log failed) answers it as a call that never ran,
/// as the AI SDK stream does, never as one that "may have run", nor (its arguments were
/// complete) as one whose arguments were not.
#[test]
fn a_call_started_without_arguments_that_loses_its_result_never_ran() {
    use ai_core::{AiEvent, DoneReason, ToolCallId};
    let start = |id: &str| AiEvent::ToolCallStart {
        tool_call_id: ToolCallId::new(id).unwrap(),
        tool_name: "core__workspace_write".into(),
        args: None,
    };
    let end = [
        AiEvent::Error {
            message: "the run ended unexpectedly".into(),
        },
        AiEvent::Done {
            reason: DoneReason::Error,
        },
    ];
    let content = |message: &str| serde_json::json!({"error": {"message": message}}).to_string();
    let denied = (ToolCallId::new("call_x").unwrap(), false);
    for (continuing, events, call, want) in [
        (
            vec![denied],
            vec![start("call_x")],
            "call_x",
            "the run ended before this call's denial was recorded; the call never ran",
        ),
        (
            vec![],
            vec![AiEvent::StepStarted { step: 1 }, start("call_z")],
            "call_z",
            "the run ended before this call's result arrived; it was refused, so it never ran",
        ),
    ] {
        let mut t = Translator::continuing("thread-1", "run-2", continuing);
        let mut out = t.start();
        for event in events.iter().chain(&end) {
            out.extend(t.push(event).unwrap());
        }
        verify(&out).unwrap();
        let results: Vec<serde_json::Value> = out
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .filter(|e| e["type"] == "TOOL_CALL_RESULT")
            .collect();
        assert_eq!(
            results,
            [serde_json::json!({"type": "TOOL_CALL_RESULT",
                "messageId": format!("run-2-result-{call}"), "toolCallId": call, "role": "tool",
                "content": content(want)})],
            "{call}"
        );
        // The AI SDK stream says the same of the same call.
        let mut t = match call {
            "call_x" => wire_ui::ai_sdk::Translator::continuing(
                "run-2",
                wire_ui::ai_sdk::Client::Ai5,
                [(ToolCallId::new(call).unwrap(), false)],
            ),
            _ => wire_ui::ai_sdk::Translator::new("run-2", wire_ui::ai_sdk::Client::Ai5),
        };
        let mut chunks = t.start();
        for event in events.iter().chain(&end) {
            chunks.extend(t.push(event).unwrap());
        }
        let errors: Vec<serde_json::Value> = chunks
            .iter()
            .map(|c| serde_json::to_value(c).unwrap())
            .filter(|c| c["type"] == "tool-output-error")
            .collect();
        assert_eq!(
            errors,
            [
                serde_json::json!({"type": "tool-output-error", "toolCallId": call, "errorText": want})
            ],
            "{call}"
        );
    }
}

/// A paused run's interrupts are the calls still waiting for approval when it ends, each once:
/// a call answered in the run (its `TOOL_CALL_RESULT` sent) is not asked about, and a call asked
/// about twice is one interrupt. `@ag-ui/client` starts no next run until its `resume` answers
/// every interrupt, and an answer for a call that no longer waits is not one the server takes.
#[test]
fn a_paused_run_s_interrupts_are_the_calls_still_waiting() {
    use std::sync::Arc;

    use ai_core::{AiEvent, DoneReason, ToolCallId, ToolErrorCode, ToolFailure, ToolOutcome};
    let id = |raw: &str| ToolCallId::new(raw).unwrap();
    let approval = |call: &str| AiEvent::ApprovalRequired {
        tool_call_id: id(call),
        tool_id: ai_core::ToolId::parse("core__workspace_write").unwrap(),
        args: Arc::new(serde_json::json!({})),
        args_hash: "0".repeat(64),
    };
    let out = translate(&[
        AiEvent::StepStarted { step: 1 },
        approval("call_1"),
        approval("call_2"),
        approval("call_2"),
        AiEvent::ToolCallResult {
            tool_call_id: id("call_1"),
            tool_name: "core__workspace_write".into(),
            outcome: ToolOutcome::Error(ToolFailure::new(ToolErrorCode::PolicyDenied, "denied")),
        },
        AiEvent::Done {
            reason: DoneReason::AwaitingApproval,
        },
    ]);
    verify(&out).unwrap();
    let Some(AguiEvent::RunFinished {
        outcome: Some(wire_ui::agui::RunOutcome::Interrupt { interrupts }),
        ..
    }) = out.last()
    else {
        panic!("no interrupt outcome: {out:?}");
    };
    let waiting: Vec<&str> = interrupts.iter().map(|i| i.tool_call_id.as_str()).collect();
    assert_eq!(waiting, ["call_2"], "{out:?}");
}

/// The frames `pushed` holds when the event pushed reuses no call; when it does (`reused`), none,
/// the push refused as a `ReusedCallId` naming `call_1`.
fn taken_unless_reused<T: std::fmt::Debug>(
    pushed: Result<Vec<T>, wire_ui::ReusedCallId>,
    reused: bool,
) -> Vec<T> {
    match pushed {
        Ok(frames) if !reused => frames,
        Err(e) if reused && e.tool_call_id().as_str() == "call_1" => {
            assert!(e.to_string().contains("tool call call_1"), "{e}");
            Vec::new()
        }
        other => panic!("reused: {reused}, pushed: {other:?}"),
    }
}

/// A call's result is its last word. Events that name it again once it is answered (its id
/// reused: a second start, arguments, a result, an approval request) send nothing, so no stream
/// answers one call twice, nor asks to approve a call it answered: the client would keep two
/// answers to one call (AG-UI: two tool messages; AI SDK: the part's output replaced). Each is
/// refused as a `ReusedCallId` naming the call, so the caller knows a call went unshown.
#[test]
fn a_call_answered_is_never_answered_again() {
    use std::sync::Arc;

    use ai_core::{AiEvent, DoneReason, ToolCallId, ToolOutcome};
    let call = || ToolCallId::new("call_1").unwrap();
    let start = || AiEvent::ToolCallStart {
        tool_call_id: call(),
        tool_name: "t".into(),
        args: Some(Arc::new(serde_json::json!({}))),
    };
    let result = |value: u32| AiEvent::ToolCallResult {
        tool_call_id: call(),
        tool_name: "t".into(),
        outcome: ToolOutcome::Ok {
            value: Arc::new(serde_json::json!(value)),
        },
    };
    let answered = [
        AiEvent::StepStarted { step: 1 },
        start(),
        result(1),
        AiEvent::StepStarted { step: 2 },
    ];
    let again = [
        // Started again, then the run dies: nothing is due for it.
        (
            vec![
                AiEvent::ToolCallStreamStart {
                    tool_call_id: call(),
                    tool_name: "t".into(),
                },
                AiEvent::ToolCallArgsDelta {
                    tool_call_id: call(),
                    delta: "{}".into(),
                },
                start(),
            ],
            DoneReason::Error,
        ),
        // Answered again.
        (vec![start(), result(2)], DoneReason::Stop),
        // Asked about: no interrupt, no approval request.
        (
            vec![AiEvent::ApprovalRequired {
                tool_call_id: call(),
                tool_id: ai_core::ToolId::parse("core__workspace_write").unwrap(),
                args: Arc::new(serde_json::json!({})),
                args_hash: "0".repeat(64),
            }],
            DoneReason::AwaitingApproval,
        ),
    ];
    // Each event of `again` is refused, naming the call; every other event is taken.
    for (events, reason) in again {
        let end = AiEvent::Done { reason };
        let all: Vec<(&AiEvent, bool)> = (answered.iter().map(|e| (e, false)))
            .chain(events.iter().map(|e| (e, true)))
            .chain([(&end, false)])
            .collect();
        let mut t = Translator::new("thread-1", "run-1");
        let mut out = t.start();
        for (event, reused) in &all {
            out.extend(taken_unless_reused(t.push(event), *reused));
        }
        verify(&out).unwrap();
        let results = tool_results(&out);
        assert_eq!(results, ["1"], "{out:?}");
        assert!(
            matches!(
                out.last(),
                Some(AguiEvent::RunFinished { outcome: None, .. })
                    | Some(AguiEvent::RunError { .. })
            ),
            "{out:?}"
        );

        let mut t = wire_ui::ai_sdk::Translator::new("run-1", wire_ui::ai_sdk::Client::Ai6);
        let mut chunks = t.start();
        for (event, reused) in &all {
            chunks.extend(taken_unless_reused(t.push(event), *reused));
        }
        crate::ai_sdk::verify(&chunks).unwrap();
        let chunks: Vec<serde_json::Value> = chunks
            .iter()
            .map(|c| serde_json::to_value(c).unwrap())
            .filter(|c| c["toolCallId"] == "call_1")
            .collect();
        assert_eq!(
            chunks,
            [
                serde_json::json!({"type": "tool-input-start", "toolCallId": "call_1", "toolName": "t"}),
                serde_json::json!({"type": "tool-input-available", "toolCallId": "call_1",
                    "toolName": "t", "input": {}}),
                serde_json::json!({"type": "tool-output-available", "toolCallId": "call_1", "output": 1}),
            ],
        );
    }
}

/// A call is started once. A second start of a call the stream shows and has not answered (its
/// id reused while it streams or runs: a second stream start, a second start with other
/// arguments) sends nothing and is refused as a `ReusedCallId` naming the call, as an event
/// naming an answered call is; the call stays as it was shown and takes its own result.
#[test]
fn a_call_started_again_while_open_is_refused() {
    use std::sync::Arc;

    use ai_core::{AiEvent, DoneReason, ToolCallId, ToolOutcome};
    let call = || ToolCallId::new("call_1").unwrap();
    let stream_start = |name: &str| AiEvent::ToolCallStreamStart {
        tool_call_id: call(),
        tool_name: name.into(),
    };
    let start = |args: serde_json::Value| AiEvent::ToolCallStart {
        tool_call_id: call(),
        tool_name: "t".into(),
        args: Some(Arc::new(args)),
    };
    let args = || AiEvent::ToolCallArgsDelta {
        tool_call_id: call(),
        delta: "{}".into(),
    };
    let result = AiEvent::ToolCallResult {
        tool_call_id: call(),
        tool_name: "t".into(),
        outcome: ToolOutcome::Ok {
            value: Arc::new(serde_json::json!(1)),
        },
    };
    let done = AiEvent::Done {
        reason: DoneReason::Stop,
    };
    let step = AiEvent::StepStarted { step: 1 };
    let other = serde_json::json!({"x": 2});
    // Each run's events, with whether the translator refuses each as a reused id.
    let runs = [
        // Started again while its arguments stream.
        vec![
            (step.clone(), false),
            (stream_start("t"), false),
            (stream_start("u"), true),
            (args(), false),
            (start(serde_json::json!({})), false),
            (result.clone(), false),
            (done.clone(), false),
        ],
        // Started again once it runs.
        vec![
            (step.clone(), false),
            (stream_start("t"), false),
            (args(), false),
            (start(serde_json::json!({})), false),
            (stream_start("u"), true),
            (start(other.clone()), true),
            (result.clone(), false),
            (done.clone(), false),
        ],
        // Not streamed, started twice.
        vec![
            (step, false),
            (start(serde_json::json!({})), false),
            (start(other), true),
            (result, false),
            (done, false),
        ],
    ];
    for run in runs {
        let mut t = Translator::new("thread-1", "run-1");
        let mut out = t.start();
        for (event, reused) in &run {
            out.extend(taken_unless_reused(t.push(event), *reused));
        }
        verify(&out).unwrap();
        assert_eq!(tool_results(&out), ["1"], "{out:?}");
        let starts = out
            .iter()
            .filter(|e| matches!(e, AguiEvent::ToolCallStart { .. }))
            .count();
        assert_eq!(starts, 1, "{out:?}");
        let args: Vec<&str> = out
            .iter()
            .filter_map(|e| match e {
                AguiEvent::ToolCallArgs { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(args, ["{}"], "{out:?}");

        let mut t = wire_ui::ai_sdk::Translator::new("run-1", wire_ui::ai_sdk::Client::Ai6);
        let mut chunks = t.start();
        for (event, reused) in &run {
            chunks.extend(taken_unless_reused(t.push(event), *reused));
        }
        crate::ai_sdk::verify(&chunks).unwrap();
        let chunks: Vec<serde_json::Value> = chunks
            .iter()
            .map(|c| serde_json::to_value(c).unwrap())
            .filter(|c| c["toolCallId"] == "call_1" && c["type"] != "tool-input-delta")
            .collect();
        assert_eq!(
            chunks,
            [
                serde_json::json!({"type": "tool-input-start", "toolCallId": "call_1", "toolName": "t"}),
                serde_json::json!({"type": "tool-input-available", "toolCallId": "call_1",
                    "toolName": "t", "input": {}}),
                serde_json::json!({"type": "tool-output-available", "toolCallId": "call_1", "output": 1}),
            ],
        );
    }
}

/// A call's arguments stream only until its start closes them. Arguments for a call whose
/// arguments the stream has closed (its start came, with arguments or refused without; it was
/// started whole, not streamed; it waits for approval; an earlier run showed it) send nothing
/// and are refused as a `ReusedCallId` naming the call, as a second start is: the stream never
/// shows arguments after their end, and the caller knows the fragment went unshown.
#[test]
fn arguments_for_a_call_no_longer_streaming_are_refused() {
    use std::sync::Arc;

    use ai_core::{AiEvent, DoneReason, ToolCallId, ToolErrorCode, ToolFailure, ToolOutcome};
    let call = || ToolCallId::new("call_1").unwrap();
    let stream_start = AiEvent::ToolCallStreamStart {
        tool_call_id: call(),
        tool_name: "t".into(),
    };
    let args = |delta: &str| AiEvent::ToolCallArgsDelta {
        tool_call_id: call(),
        delta: delta.into(),
    };
    let start = |args: Option<serde_json::Value>| AiEvent::ToolCallStart {
        tool_call_id: call(),
        tool_name: "t".into(),
        args: args.map(Arc::new),
    };
    let result = |outcome: ToolOutcome| AiEvent::ToolCallResult {
        tool_call_id: call(),
        tool_name: "t".into(),
        outcome,
    };
    let ok = || {
        result(ToolOutcome::Ok {
            value: Arc::new(serde_json::json!(1)),
        })
    };
    let refused = result(ToolOutcome::Error(ToolFailure::new(
        ToolErrorCode::Validation,
        "bad",
    )));
    let approval = AiEvent::ApprovalRequired {
        tool_call_id: call(),
        tool_id: ai_core::ToolId::parse("core__workspace_write").unwrap(),
        args: Arc::new(serde_json::json!({})),
        args_hash: "0".repeat(64),
    };
    let done = |reason| AiEvent::Done { reason };
    let step = AiEvent::StepStarted { step: 1 };
    // Each run's events, with whether the translator refuses each, and whether the run
    // continues `call_1` (approved) from an earlier run.
    let runs = [
        // Streamed, then started: its arguments are closed.
        (
            false,
            vec![
                (step.clone(), false),
                (stream_start.clone(), false),
                (args("{}"), false),
                (start(Some(serde_json::json!({}))), false),
                (args("LATE"), true),
                (args(""), true),
                (ok(), false),
                (done(DoneReason::Stop), false),
            ],
        ),
        // Started whole, never streamed.
        (
            false,
            vec![
                (step.clone(), false),
                (start(Some(serde_json::json!({}))), false),
                (args("LATE"), true),
                (ok(), false),
                (done(DoneReason::Stop), false),
            ],
        ),
        // Refused by the runner before it ran, its result not yet come.
        (
            false,
            vec![
                (step.clone(), false),
                (stream_start, false),
                (args("{"), false),
                (start(None), false),
                (args("LATE"), true),
                (refused, false),
                (done(DoneReason::Stop), false),
            ],
        ),
        // Waiting for approval.
        (
            false,
            vec![
                (step.clone(), false),
                (approval, false),
                (args("LATE"), true),
                (done(DoneReason::AwaitingApproval), false),
            ],
        ),
        // Shown by an earlier run, continued by this one.
        (
            true,
            vec![
                (step, false),
                (args("LATE"), true),
                (start(Some(serde_json::json!({}))), false),
                (ok(), false),
                (done(DoneReason::Stop), false),
            ],
        ),
    ];
    for (continued, run) in runs {
        let answers = continued.then(|| (call(), true));
        let mut t = Translator::continuing("thread-1", "run-1", answers.clone());
        let mut out = t.start();
        for (event, reused) in &run {
            out.extend(taken_unless_reused(t.push(event), *reused));
        }
        verify(&out).unwrap();
        assert!(
            !out.iter()
                .any(|e| matches!(e, AguiEvent::ToolCallArgs { delta, .. } if delta == "LATE")),
            "{out:?}"
        );

        let client = wire_ui::ai_sdk::Client::Ai6;
        let mut t = wire_ui::ai_sdk::Translator::continuing("run-1", client, answers);
        let mut chunks = t.start();
        for (event, reused) in &run {
            chunks.extend(taken_unless_reused(t.push(event), *reused));
        }
        let shown: &[&str] = if continued { &["call_1"] } else { &[] };
        crate::ai_sdk::verify_continuing(&chunks, shown).unwrap();
        assert!(
            !chunks.iter().any(|c| matches!(c,
                wire_ui::ai_sdk::UiChunk::ToolInputDelta { input_text_delta, .. }
                    if input_text_delta == "LATE")),
            "{chunks:?}"
        );
    }
}

/// A resumed run given one call twice answers it once, as approved when either answer approves
/// it: the tool may have run.
#[test]
fn a_call_continued_twice_is_answered_once() {
    use ai_core::{AiEvent, DoneReason, ToolCallId};
    let call = ToolCallId::new("call_1").unwrap();
    let answers = [(call.clone(), false), (call, true)];
    let end = AiEvent::Done {
        reason: DoneReason::Error,
    };
    let mut t = Translator::continuing("thread-1", "run-2", answers.clone());
    let mut out = t.start();
    out.extend(t.push(&end).unwrap());
    verify(&out).unwrap();
    let results = tool_results(&out);
    let may_have_run = "the run ended before this call's result arrived: the tool may have run";
    assert_eq!(
        results,
        [serde_json::json!({"error": {"message": may_have_run}}).to_string()],
    );

    let mut t =
        wire_ui::ai_sdk::Translator::continuing("run-2", wire_ui::ai_sdk::Client::Ai5, answers);
    let mut chunks = t.start();
    chunks.extend(t.push(&end).unwrap());
    crate::ai_sdk::verify_continuing(&chunks, &["call_1"]).unwrap();
    let errors: Vec<&str> = chunks
        .iter()
        .filter_map(|c| match c {
            wire_ui::ai_sdk::UiChunk::ToolOutputError { error_text, .. } => {
                Some(error_text.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(errors, [may_have_run]);
}

/// A `ReusedCallId` says how the stream shows the call whose id an event reused: answered,
/// started, its arguments streaming, waiting for approval in this run, or shown by an earlier
/// run and answered by this one. Both translators say the same.
#[test]
fn a_reused_call_id_says_how_the_stream_shows_the_call() {
    use std::sync::Arc;

    use ai_core::{AiEvent, ToolCallId, ToolOutcome};
    let call = || ToolCallId::new("call_1").unwrap();
    let stream_start = || AiEvent::ToolCallStreamStart {
        tool_call_id: call(),
        tool_name: "t".into(),
    };
    let start = AiEvent::ToolCallStart {
        tool_call_id: call(),
        tool_name: "t".into(),
        args: Some(Arc::new(serde_json::json!({}))),
    };
    let result = AiEvent::ToolCallResult {
        tool_call_id: call(),
        tool_name: "t".into(),
        outcome: ToolOutcome::Ok {
            value: Arc::new(serde_json::json!(1)),
        },
    };
    let approval = AiEvent::ApprovalRequired {
        tool_call_id: call(),
        tool_id: ai_core::ToolId::parse("core__workspace_write").unwrap(),
        args: Arc::new(serde_json::json!({})),
        args_hash: "0".repeat(64),
    };
    let cases = [
        (
            false,
            vec![start.clone(), result],
            "which this stream has answered",
        ),
        (false, vec![start], "which this stream has started"),
        (
            false,
            vec![stream_start()],
            "whose arguments this stream is showing",
        ),
        (
            false,
            vec![approval],
            "which this stream shows waiting for approval",
        ),
        (
            true,
            vec![],
            "which an earlier run showed and this run answers",
        ),
    ];
    for (continued, shown, what) in cases {
        let expected = format!(
            "an event reuses the id of tool call call_1, {what}: the event is dropped (a call id \
             names one call in a run)"
        );
        let answers = continued.then(|| (call(), true));
        let mut t = Translator::continuing("thread-1", "run-1", answers.clone());
        let mut s =
            wire_ui::ai_sdk::Translator::continuing("run-1", wire_ui::ai_sdk::Client::Ai6, answers);
        t.start();
        s.start();
        for event in [AiEvent::StepStarted { step: 1 }].iter().chain(&shown) {
            t.push(event).unwrap();
            s.push(event).unwrap();
        }
        let errors = [
            t.push(&stream_start()).unwrap_err(),
            s.push(&stream_start()).unwrap_err(),
        ];
        for error in errors {
            assert_eq!(error.to_string(), expected);
        }
    }
}

//! AI SDK UI message stream: each scenario's chunks, snapshotted and checked against
//! `processUIMessageStream`'s ordering rules.

use wire_ui::ai_sdk::{Client, Translator, UiChunk};
use wire_ui::sse;

fn translate(events: &[ai_core::AiEvent]) -> Vec<UiChunk> {
    let mut t = Translator::new("run-1", Client::Ai5);
    let mut out = t.start();
    for event in events {
        out.extend(t.push(event).unwrap());
    }
    assert!(t.is_finished(), "no terminal chunk");
    out
}

/// The ordering rules the AI SDK client enforces, as far as this server uses them.
pub(crate) fn verify(chunks: &[UiChunk]) -> Result<(), String> {
    verify_continuing(chunks, &[])
}

/// [`verify`] for a run that continues a message whose parts already show the calls `shown`.
#[allow(clippy::collapsible_match)] // One arm per rule reads better than guards.
pub(crate) fn verify_continuing(chunks: &[UiChunk], shown: &[&str]) -> Result<(), String> {
    let mut open_text: Option<&str> = None;
    let mut seen_calls: Vec<&str> = shown.to_vec();
    // Calls whose input was started and is neither available nor refused yet.
    let mut streaming: Vec<&str> = Vec::new();
    let mut in_step = false;
    // Calls whose output came: a second one would replace the first in the client's part.
    let mut answered: Vec<&str> = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let fail = |why: &str| Err(format!("chunk {i} ({chunk:?}): {why}"));
        let terminal = matches!(
            chunk,
            UiChunk::Finish { .. } | UiChunk::Error { .. } | UiChunk::Abort
        );
        if (i == 0) != matches!(chunk, UiChunk::Start { .. }) {
            return fail("`start` must come first, once");
        }
        if terminal != (i == chunks.len() - 1) {
            return fail("exactly one terminal chunk, last");
        }
        // Nothing comes after the terminal chunk, so a call still streaming its input would
        // stay `input-streaming` in the client for good.
        if terminal && !streaming.is_empty() {
            return fail("the run ends with a call's input still streaming");
        }
        match chunk {
            UiChunk::StartStep => {
                if in_step {
                    return fail("a step inside a step");
                }
                in_step = true;
            }
            UiChunk::FinishStep => {
                if !in_step || open_text.is_some() {
                    return fail("finish-step outside a step or with text open");
                }
                in_step = false;
            }
            UiChunk::TextStart { id } => {
                if open_text.is_some() || !in_step {
                    return fail("text-start while text is open or outside a step");
                }
                open_text = Some(id);
            }
            UiChunk::TextDelta { id, delta } => {
                if open_text != Some(id.as_str()) || delta.is_empty() {
                    return fail("text-delta for a part that is not open, or empty");
                }
            }
            UiChunk::TextEnd { id } => {
                if open_text != Some(id.as_str()) {
                    return fail("text-end for a part that is not open");
                }
                open_text = None;
            }
            UiChunk::ToolInputStart { tool_call_id, .. } => {
                if seen_calls.contains(&tool_call_id.as_str()) {
                    return fail("tool-input-start twice");
                }
                seen_calls.push(tool_call_id);
                streaming.push(tool_call_id);
            }
            UiChunk::ToolInputError { tool_call_id, .. }
            | UiChunk::ToolInputAvailable { tool_call_id, .. }
                if seen_calls.contains(&tool_call_id.as_str()) =>
            {
                streaming.retain(|c| *c != tool_call_id);
            }
            UiChunk::ToolOutputAvailable { tool_call_id, .. }
            | UiChunk::ToolOutputError { tool_call_id, .. }
            | UiChunk::ToolOutputDenied { tool_call_id }
                if answered.contains(&tool_call_id.as_str()) =>
            {
                return fail("a second output for one call");
            }
            UiChunk::ToolOutputAvailable { tool_call_id, .. }
            | UiChunk::ToolOutputError { tool_call_id, .. }
            | UiChunk::ToolOutputDenied { tool_call_id }
                if seen_calls.contains(&tool_call_id.as_str()) =>
            {
                answered.push(tool_call_id);
            }
            UiChunk::ToolInputDelta { tool_call_id, .. }
            | UiChunk::ToolInputError { tool_call_id, .. }
            | UiChunk::ToolInputAvailable { tool_call_id, .. }
            | UiChunk::ToolOutputAvailable { tool_call_id, .. }
            | UiChunk::ToolOutputError { tool_call_id, .. }
            | UiChunk::ToolOutputDenied { tool_call_id } => {
                if !seen_calls.contains(&tool_call_id.as_str()) {
                    return fail("a tool chunk for a call never started");
                }
            }
            UiChunk::Finish { .. } => {
                if in_step || open_text.is_some() {
                    return fail("finish with a step or text open");
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// What ai 5.0.0's strict chunk schemas refuse, which a stream made for ai 5 never holds: the
/// chunks added later (`tool-approval-request`, `tool-output-denied`, `tool-input-error`) and
/// `finish.finishReason`.
pub(crate) fn verify_ai_5(chunks: &[UiChunk]) -> Result<(), String> {
    match chunks.iter().enumerate().find(|(_, chunk)| {
        matches!(
            chunk,
            UiChunk::ToolApprovalRequest { .. }
                | UiChunk::ToolOutputDenied { .. }
                | UiChunk::ToolInputError { .. }
                | UiChunk::Finish {
                    finish_reason: Some(_),
                    ..
                }
        )
    }) {
        Some((i, chunk)) => Err(format!("chunk {i} ({chunk:?}): ai 5.0.0 refuses it")),
        None => Ok(()),
    }
}

#[test]
fn every_scenario_follows_the_protocol() {
    for (name, events) in crate::scenarios::all() {
        let out = translate(&events);
        verify(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut body: String = out.iter().map(sse::frame).collect();
        body.push_str(sse::DONE_FRAME);
        insta::assert_snapshot!(format!("ai_sdk_{name}"), body);
    }
}

/// A translator continuing no answers is a new one, as AG-UI's is: its stream names its own
/// message rather than continuing the client's last one, which no call of its links it to.
#[test]
fn continuing_no_answers_is_a_new_message() {
    let continuing = Translator::continuing("run-2", Client::Ai6, []).start();
    assert_eq!(continuing, Translator::new("run-2", Client::Ai6).start());
    assert_eq!(
        continuing,
        [UiChunk::Start {
            message_id: Some("run-2-msg".into())
        }]
    );
}

/// For clients from ai 6 on, a paused call asks for approval after its input, and the run that
/// resumes from the answers continues the same message: no new message id, no input again, the
/// denied call `tool-output-denied` and the approved one its output, before the next step.
#[test]
fn approvals_for_ai_6_clients() {
    let (_, paused) = crate::scenarios::all()
        .into_iter()
        .find(|(name, _)| *name == "awaiting_approval")
        .unwrap();
    let mut t = Translator::new("run-1", Client::Ai6);
    let mut out = t.start();
    for event in &paused {
        out.extend(t.push(event).unwrap());
    }
    verify(&out).unwrap();
    let asked: Vec<(usize, &str)> = out
        .iter()
        .enumerate()
        .filter_map(|(at, chunk)| match chunk {
            UiChunk::ToolApprovalRequest {
                approval_id,
                tool_call_id,
            } => {
                assert_eq!(approval_id, tool_call_id);
                Some((at, tool_call_id.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        asked.iter().map(|(_, id)| *id).collect::<Vec<_>>(),
        ["call_w", "call_x"]
    );
    for (at, id) in asked {
        assert!(
            matches!(&out[at - 1], UiChunk::ToolInputAvailable { tool_call_id, .. } if tool_call_id == id),
            "the request follows the call's input: {out:?}"
        );
    }
    let mut body: String = out.iter().map(sse::frame).collect();
    body.push_str(sse::DONE_FRAME);
    insta::assert_snapshot!("ai_sdk_awaiting_approval_v6", body);

    let answers = [("call_w", true), ("call_x", false)]
        .map(|(id, approved)| (ai_core::ToolCallId::new(id).unwrap(), approved));
    let mut t = Translator::continuing("run-2", Client::Ai6, answers);
    let mut out = t.start();
    for event in crate::scenarios::resumed_after_approval() {
        out.extend(t.push(&event).unwrap());
    }
    assert!(t.is_finished());
    assert_eq!(out[0], UiChunk::Start { message_id: None });
    assert_eq!(
        out[1..3],
        [
            UiChunk::ToolOutputDenied {
                tool_call_id: "call_x".into()
            },
            UiChunk::ToolOutputAvailable {
                tool_call_id: "call_w".into(),
                output: serde_json::json!({"path": "a.txt", "bytes": 2}),
            },
        ]
    );
    assert!(
        !out.iter().any(|c| matches!(
            c,
            UiChunk::ToolInputStart { .. } | UiChunk::ToolInputAvailable { .. }
        )),
        "the calls were shown by the paused run: {out:?}"
    );
    // What follows the results is an ordinary turn.
    let mut rest = vec![UiChunk::Start { message_id: None }];
    rest.extend_from_slice(&out[3..]);
    verify(&rest).unwrap();
    let mut body: String = out.iter().map(sse::frame).collect();
    body.push_str(sse::DONE_FRAME);
    insta::assert_snapshot!("ai_sdk_resumed_after_approval_v6", body);
}

/// A stream for ai 5 that resumes from answers (which its client cannot ask for, but a client
/// may send) holds only chunks ai 5.0.0 accepts: its denied call's part ends `output-error`,
/// saying it was denied, since ai 5.0.0 refuses `tool-output-denied`.
#[test]
fn a_denied_call_is_an_output_error_for_ai_5() {
    let answers = [("call_w", true), ("call_x", false)]
        .map(|(id, approved)| (ai_core::ToolCallId::new(id).unwrap(), approved));
    let mut t = Translator::continuing("run-2", Client::Ai5, answers);
    let mut out = t.start();
    for event in crate::scenarios::resumed_after_approval() {
        out.extend(t.push(&event).unwrap());
    }
    verify_continuing(&out, &["call_w", "call_x"]).unwrap();
    verify_ai_5(&out).unwrap();
    assert!(
        matches!(
            &out[1],
            UiChunk::ToolOutputError { tool_call_id, error_text }
                if tool_call_id == "call_x" && error_text.starts_with("policy_denied: ")
        ),
        "{out:?}"
    );
}

/// A cut answer ends with `finish`, saying why in `messageMetadata` (which ai 5.0.0's strict
/// schema accepts) and, for ai 6 clients only, in `finishReason` too (which ai 5.0.0 refuses);
/// every other end stays a bare `finish`, in either mode.
#[test]
fn a_cut_answer_says_why_in_finish() {
    let run = |name: &str, ai_6: bool| {
        let (_, events) = crate::scenarios::all()
            .into_iter()
            .find(|(scenario, _)| *scenario == name)
            .unwrap();
        let client = if ai_6 { Client::Ai6 } else { Client::Ai5 };
        let mut t = Translator::new("run-1", client);
        let mut out = t.start();
        for event in &events {
            out.extend(t.push(event).unwrap());
        }
        verify(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
        serde_json::to_value(out.last().unwrap()).unwrap()
    };
    for (name, why) in [
        ("cut_by_length", "length"),
        ("cut_by_content_filter", "content-filter"),
        ("ended_for_another_reason", "other"),
    ] {
        assert_eq!(
            run(name, false),
            serde_json::json!({"type": "finish", "messageMetadata": {"finishReason": why}})
        );
        assert_eq!(
            run(name, true),
            serde_json::json!({
                "type": "finish", "finishReason": why, "messageMetadata": {"finishReason": why}
            })
        );
    }
    for name in ["text_only", "not_streamed_call", "awaiting_approval"] {
        for ai_6 in [false, true] {
            assert_eq!(
                run(name, ai_6),
                serde_json::json!({"type": "finish"}),
                "{name}"
            );
        }
    }
    // The chunk reads back as it was sent.
    let chunk: UiChunk = serde_json::from_value(run("cut_by_length", true)).unwrap();
    assert_eq!(
        chunk,
        UiChunk::Finish {
            finish_reason: Some("length".into()),
            message_metadata: Some(serde_json::json!({"finishReason": "length"})),
        }
    );
}

#[test]
fn the_verifier_catches_what_it_should() {
    let bad = vec![
        UiChunk::Start { message_id: None },
        UiChunk::TextDelta {
            id: "x".into(),
            delta: "a".into(),
        },
        UiChunk::Finish {
            finish_reason: None,
            message_metadata: None,
        },
    ];
    assert!(verify(&bad).is_err());
}

/// `start` comes once, first, however the translator is driven: a second `start` sends
/// nothing, a `push` before any `start` sends it first, and nothing follows the terminal chunk.
#[test]
fn start_is_sent_once_and_first() {
    use ai_core::{AiEvent, DoneReason};
    let started = |chunks: &[UiChunk]| {
        chunks
            .iter()
            .filter(|c| matches!(c, UiChunk::Start { .. }))
            .count()
    };
    let stop = AiEvent::Done {
        reason: DoneReason::Stop,
    };
    // `start` twice, then once more after the end, where `translate` checks it sends nothing;
    // then a `push` before any `start`.
    for (events, starts) in [
        (vec![stop.clone()], &[0, 0, 1][..]),
        (vec![AiEvent::StepStarted { step: 1 }, stop], &[1]),
    ] {
        let mut t = Translator::new("run-1", Client::Ai5);
        let out = crate::properties::translate(&mut t, &events, starts).unwrap();
        verify(&out).unwrap();
        assert_eq!(started(&out), 1, "{out:?}");
    }

    let mut t = Translator::new("run-1", Client::Ai5);
    let out = t.cut("the client fell behind");
    verify(&out).unwrap();
    assert!(
        matches!(out.first(), Some(UiChunk::Start { .. })),
        "{out:?}"
    );
}

/// A request may bring its last message alone (`message`, as the AI SDK's docs suggest for a
/// server that keeps its threads) in place of `messages`: a conversation of one. Both, or
/// neither, is refused naming the fields, quoting nothing of the body.
#[test]
fn a_chat_request_brings_messages_or_its_last_message_alone() {
    let user = serde_json::json!({"id": "u-SECRET", "role": "user",
                                  "parts": [{"type": "text", "text": "hi"}]});
    let parse = |body: serde_json::Value| {
        serde_json::from_value::<wire_ui::ai_sdk::ChatRequest>(body).unwrap()
    };
    let lone = parse(serde_json::json!({"id": "chat-1", "message": user}));
    let conversation = lone.conversation().unwrap();
    assert_eq!(conversation.len(), 1);
    assert_eq!(conversation[0].text(), "hi");
    let whole = parse(serde_json::json!({"id": "chat-1", "messages": [user, user]}));
    assert_eq!(whole.conversation().unwrap().len(), 2);

    let both = parse(serde_json::json!({"id": "chat-1", "messages": [user], "message": user}));
    let neither = parse(serde_json::json!({"id": "chat-1"}));
    for (request, says) in [
        (both, "both `messages` and `message`"),
        (neither, "missing field `messages` (or `message`"),
    ] {
        let error = request.conversation().unwrap_err();
        assert!(error.contains(says), "{error}");
        assert!(!error.contains("SECRET"), "{error}");
    }
}

/// A lone `message` that is not one message object is refused saying what `message` holds and
/// where a conversation goes: a list of messages (the conversation sent under the wrong name), a
/// list of a message's fields in order (which serde would read as one), a string. The error
/// quotes nothing of the body. `null` is a message left out.
#[test]
fn a_lone_message_that_is_not_an_object_is_refused_naming_what_it_must_be() {
    let user = serde_json::json!({"id": "u-SECRET", "role": "user",
                                  "parts": [{"type": "text", "text": "SECRET"}]});
    for (message, kind) in [
        (serde_json::json!([user, user]), "a sequence"),
        (serde_json::json!([]), "a sequence"),
        (
            serde_json::json!(["u-SECRET", "user", [{"type": "text", "text": "SECRET"}]]),
            "a sequence",
        ),
        (serde_json::json!("SECRET"), "a string"),
    ] {
        let body = serde_json::json!({"id": "chat-1", "message": message}).to_string();
        let error = serde_json::from_str::<wire_ui::ai_sdk::ChatRequest>(&body).unwrap_err();
        let described = ai_core::describe_json_error(&error);
        assert_eq!(
            described,
            format!(
                "a value of the wrong type ({kind}; expected `message` to be one UI message, an \
                 object: a conversation goes in `messages`) at line 1 column {}",
                error.column()
            ),
            "{body}"
        );
    }
    // A fault inside the object is the message's own, as in `messages`.
    let body = r#"{"id": "chat-1", "message": {"id": "u", "role": "SECRET", "parts": []}}"#;
    let error = serde_json::from_str::<wire_ui::ai_sdk::ChatRequest>(body).unwrap_err();
    assert_eq!(
        ai_core::describe_json_error(&error),
        "an unknown variant (name not shown; expected one of `system`, `user`, `assistant`) at \
         line 1 column 56"
    );
    let left_out: wire_ui::ai_sdk::ChatRequest =
        serde_json::from_str(r#"{"id": "chat-1", "message": null, "messages": []}"#).unwrap();
    assert_eq!(left_out.message, None);
    assert_eq!(left_out.conversation().unwrap().len(), 0);
}

/// A trigger the server does not know is refused, naming the ones it knows, never the value: a
/// retry under another name (an ai 5 beta's) would otherwise run as a new message, after the
/// answer it replaces. Absent, it is a message sent for the first time.
#[test]
fn a_chat_request_s_trigger_is_one_the_server_knows() {
    use wire_ui::ai_sdk::{ChatRequest, Trigger};
    let body = |trigger: &str| format!(r#"{{"id": "c", "messages": [], "trigger": {trigger}}}"#);
    for (trigger, read) in [
        (r#""submit-message""#, Some(Trigger::SubmitMessage)),
        (r#""regenerate-message""#, Some(Trigger::RegenerateMessage)),
        ("null", None),
    ] {
        let request: ChatRequest = serde_json::from_str(&body(trigger)).unwrap();
        assert_eq!(request.trigger, read, "{trigger}");
    }
    let request: ChatRequest = serde_json::from_str(r#"{"id": "c", "messages": []}"#).unwrap();
    assert_eq!(request.trigger, None);
    for trigger in [r#""regenerate-assistant-message-SECRET""#, r#""""#] {
        let error = serde_json::from_str::<ChatRequest>(&body(trigger)).unwrap_err();
        let described = ai_core::describe_json_error(&error);
        assert!(
            described.starts_with(
                "an unknown variant (name not shown; expected `submit-message` or \
                 `regenerate-message`)"
            ),
            "{trigger}: {described}"
        );
        assert!(!described.contains("SECRET"), "{described}");
    }
}

#[test]
fn chat_requests_parse_with_tool_parts() {
    let request: wire_ui::ai_sdk::ChatRequest = serde_json::from_value(serde_json::json!({
        "id": "chat-1", "trigger": "submit-message", "extra": {"from": "body option"},
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "time?"}]},
            {"id": "a1", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-core__get_current_time", "toolCallId": "c1",
                 "state": "output-available", "input": {}, "output": {"now": "noon"}},
                {"type": "text", "text": "Noon."}
            ]},
            {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "thanks"}]}
        ]
    }))
    .unwrap();
    let messages = request.conversation().unwrap();
    let parts = messages[1].tool_parts().unwrap();
    assert_eq!(parts[0].tool_name, "core__get_current_time");
    assert_eq!(parts[0].state, "output-available");
    assert_eq!(messages[2].text(), "thanks");
    let broken = wire_ui::ai_sdk::UiMessage {
        id: "a2".into(),
        role: wire_ui::ai_sdk::UiRole::Assistant,
        parts: vec![serde_json::json!({"type": "tool-x", "state": "output-available"})],
        metadata: None,
    };
    let error = broken.tool_parts().unwrap_err();
    assert!(error.contains("toolCallId"), "{error}");

    // A `dynamic-tool` part with no tool name is refused too, not skipped: skipping it would
    // pair every later tool part with the wrong call.
    for (part, named) in [
        (
            serde_json::json!({"type": "dynamic-tool", "toolCallId": "c1", "state": "output-available", "input": {}, "output": 1}),
            "toolName",
        ),
        (
            serde_json::json!({"type": "dynamic-tool", "toolName": "", "toolCallId": "c1", "state": "output-available"}),
            "toolName",
        ),
    ] {
        let message = wire_ui::ai_sdk::UiMessage {
            parts: vec![part, serde_json::json!({"type": "text", "text": "after"})],
            ..broken.clone()
        };
        let error = message.tool_parts().unwrap_err();
        assert!(error.contains(named), "{error}");
        assert!(error.contains("part 0"), "{error}");
    }
}

/// A part of type `tool-` is a call the model made without naming a tool, as a client keeps it
/// from a stream that said `toolName: ""` (cogni's does, for such a call): it is read as a call
/// with an empty name whose answer stays with it, never refused (a client that keeps the part
/// could not go on with its chat) nor skipped (every later part would pair with the wrong call).
#[test]
fn a_nameless_tool_part_is_read_with_an_empty_name() {
    let message = wire_ui::ai_sdk::UiMessage {
        id: "a1".into(),
        role: wire_ui::ai_sdk::UiRole::Assistant,
        parts: vec![
            serde_json::json!({"type": "tool-", "toolCallId": "c1", "state": "output-error",
                "input": "", "errorText": "unavailable"}),
            serde_json::json!({"type": "tool-core__get_current_time", "toolCallId": "c2",
                "state": "output-available", "input": {}, "output": 1}),
        ],
        metadata: None,
    };
    let parts = message.tool_parts().unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].tool_name, "");
    assert_eq!(parts[0].tool_call_id, "c1");
    assert_eq!(parts[0].error_text.as_deref(), Some("unavailable"));
    assert_eq!(parts[1].tool_name, "core__get_current_time");
    assert_eq!(parts[1].tool_call_id, "c2");
}

/// An answer to an approval request (ai 6's `approval-responded` part) is read only when it is
/// one: `approval` an object whose `approved` is a boolean and whose `reason`, if any, a string.
/// A mistyped or missing answer is refused by its place and field, never read as a denial (or
/// anything else) without a word; an `approval-requested` part, whose `approval` holds only its
/// id, is fine.
#[test]
fn a_malformed_approval_answer_is_refused_by_its_place() {
    let part = |state: &str, approval: serde_json::Value| {
        serde_json::json!({"type": "tool-core__get_current_time", "toolCallId": "c1",
            "state": state, "input": {}, "approval": approval})
    };
    let message = |part: serde_json::Value| wire_ui::ai_sdk::UiMessage {
        id: "a1".into(),
        role: wire_ui::ai_sdk::UiRole::Assistant,
        parts: vec![serde_json::json!({"type": "step-start"}), part],
        metadata: None,
    };
    for (approval, fault) in [
        (
            serde_json::json!({"id": "c1", "approved": "yes"}),
            "part 1: `approval.approved` is not a boolean",
        ),
        (
            serde_json::json!({"id": "c1", "approved": 1}),
            "part 1: `approval.approved` is not a boolean",
        ),
        (
            serde_json::json!({"id": "c1"}),
            "part 1: an `approval-responded` part has no `approval.approved`",
        ),
        (
            serde_json::json!({"id": "c1", "approved": false, "reason": ["no"]}),
            "part 1: `approval.reason` is not a string",
        ),
        (
            serde_json::json!("approved"),
            "part 1: `approval` is not an object",
        ),
    ] {
        let error = message(part("approval-responded", approval))
            .tool_parts()
            .unwrap_err();
        assert_eq!(error, fault);
    }
    let mut missing = part("approval-responded", serde_json::Value::Null);
    missing.as_object_mut().unwrap().remove("approval");
    assert_eq!(
        message(missing).tool_parts().unwrap_err(),
        "part 1: an `approval-responded` part has no `approval.approved`"
    );

    let asked = message(part("approval-requested", serde_json::json!({"id": "c1"})));
    assert_eq!(asked.tool_parts().unwrap()[0].approved, None);
    let answered = message(part(
        "approval-responded",
        serde_json::json!({"id": "c1", "approved": false, "reason": "not now"}),
    ));
    let answered = &answered.tool_parts().unwrap()[0];
    assert_eq!(answered.approved, Some(false));
    assert_eq!(answered.approval_reason.as_deref(), Some("not now"));
}

/// A refused tool part is named by its place, never by the message's id: the id is the client's
/// text, of any length and with any characters, and a server sends the error back.
#[test]
fn a_refused_tool_part_does_not_quote_the_message_id() {
    let id = format!("SECRET\u{1b}[2J{}", "x".repeat(500));
    let message = wire_ui::ai_sdk::UiMessage {
        id: id.clone(),
        role: wire_ui::ai_sdk::UiRole::Assistant,
        parts: vec![
            serde_json::json!({"type": "text", "text": "before"}),
            serde_json::json!({"type": "tool-x", "state": "output-available"}),
        ],
        metadata: None,
    };
    let error = message.tool_parts().unwrap_err();
    assert!(!error.contains("SECRET"), "{error}");
    assert_eq!(error, "part 1: missing `toolCallId`");
}

/// A run that fails or is cancelled while its text streams ends that text part (`text-end`)
/// before its `error` or `abort`: otherwise the client keeps the part in state `streaming` in
/// the message it shows and sends back, though nothing more will ever come for it.
#[test]
fn a_failed_or_cancelled_run_ends_its_open_text_first() {
    use ai_core::{AiEvent, DoneReason};
    for (reason, terminal) in [
        (DoneReason::Error, "error"),
        (DoneReason::Cancelled, "abort"),
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
        let types: Vec<String> = out
            .iter()
            .map(|c| {
                serde_json::to_value(c).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            types,
            [
                "start",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                terminal
            ],
            "{reason:?}"
        );
    }
}

/// A call whose input was still streaming when the run ended, for any reason (a model failure,
/// a cancel, a stream that broke), never ran: it ends `output-error` with the input text streamed
/// so far, through the two chunks every client from ai 5.0.0 on knows, instead of staying
/// `input-streaming` in the client for good.
#[test]
fn a_call_still_streaming_at_the_end_ends_failed() {
    use ai_core::{AiEvent, DoneReason, ToolCallId};
    let id = |raw: &str| ToolCallId::new(raw).unwrap();
    for (reason, terminal) in [
        (DoneReason::Error, "error"),
        (DoneReason::Cancelled, "abort"),
        (DoneReason::Stop, "finish"),
    ] {
        let out = translate(&[
            AiEvent::StepStarted { step: 1 },
            AiEvent::TextDelta {
                delta: "Let me look.".into(),
            },
            AiEvent::ToolCallStreamStart {
                tool_call_id: id("call_1"),
                tool_name: "core__workspace_read".into(),
            },
            AiEvent::ToolCallArgsDelta {
                tool_call_id: id("call_1"),
                delta: r#"{"pa"#.into(),
            },
            AiEvent::ToolCallArgsDelta {
                tool_call_id: id("call_1"),
                delta: "th".into(),
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
            .map(|c| serde_json::to_value(c).unwrap())
            .collect();
        let never_ran = "the run ended before this call's arguments were complete, so it never ran";
        let at = json
            .iter()
            .position(|c| c["type"] == "text-end")
            .unwrap_or_else(|| panic!("{reason:?}: {json:?}"));
        assert_eq!(
            json[at + 1..at + 7],
            [
                serde_json::json!({"type": "tool-input-start", "toolCallId": "call_1", "toolName": "core__workspace_read"}),
                serde_json::json!({"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": "{\"pa"}),
                serde_json::json!({"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": "th"}),
                serde_json::json!({"type": "tool-input-start", "toolCallId": "call_2", "toolName": "core__get_current_time"}),
                serde_json::json!({"type": "tool-input-available", "toolCallId": "call_1", "toolName": "core__workspace_read", "input": "{\"path"}),
                serde_json::json!({"type": "tool-output-error", "toolCallId": "call_1", "errorText": never_ran}),
            ],
            "{reason:?}"
        );
        assert_eq!(
            json[at + 7..at + 9],
            [
                serde_json::json!({"type": "tool-input-available", "toolCallId": "call_2", "toolName": "core__get_current_time", "input": ""}),
                serde_json::json!({"type": "tool-output-error", "toolCallId": "call_2", "errorText": never_ran}),
            ],
            "{reason:?}"
        );
        assert_eq!(json.last().unwrap()["type"], terminal, "{reason:?}");
    }
}

/// A call whose input was complete (its `ToolCallStart` came) but which had no result when the
/// run ended (the server's run task died, or its log could not be written) ends `output-error`
/// saying it may have run, instead of staying `input-available`, which an ai 5 client takes
/// for a call left for it to answer. A call that waits for approval ends `output-error` too,
/// saying it never ran: the run ends without pausing, so nothing will ask for it again.
#[test]
fn a_started_call_without_a_result_at_the_end_ends_failed() {
    let out = translate(&crate::scenarios::died_with_a_call_unanswered());
    verify(&out).unwrap();
    let json: Vec<serde_json::Value> = out
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    let ended: Vec<&serde_json::Value> = json
        .iter()
        .filter(|c| c["type"] == "tool-output-error")
        .collect();
    assert_eq!(
        ended,
        [
            &serde_json::json!({"type": "tool-output-error", "toolCallId": "call_1",
            "errorText": "the run ended before this call's result arrived: the tool may have run"}),
            &serde_json::json!({"type": "tool-output-error", "toolCallId": "call_2",
            "errorText": "the run ended before this call was approved, so it never ran"}),
        ],
        "{json:?}"
    );
    assert_eq!(json.last().unwrap()["type"], "error");
}

/// A call the runner refused (its start came without arguments: they were complete but
/// invalid, or the call was denied) and whose output had not come when the run ended ends
/// `output-error` with the input text the model streamed, saying it never ran because it was
/// refused, never that its input was incomplete.
#[test]
fn a_refused_call_without_a_result_at_the_end_is_told_it_was_refused() {
    let out = translate(&crate::scenarios::died_after_refusing_calls());
    verify(&out).unwrap();
    let json: Vec<serde_json::Value> = out
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    let ended: Vec<&serde_json::Value> = json
        .iter()
        .filter(|c| c["type"] == "tool-input-available" || c["type"] == "tool-output-error")
        .collect();
    let refused =
        "the run ended before this call's result arrived; it was refused, so it never ran";
    assert_eq!(
        ended,
        [
            &serde_json::json!({"type": "tool-input-available", "toolCallId": "call_1",
            "toolName": "core__get_current_time", "input": "{\"zone\":1}"}),
            &serde_json::json!({"type": "tool-output-error", "toolCallId": "call_1",
            "errorText": refused}),
            &serde_json::json!({"type": "tool-input-available", "toolCallId": "call_2",
            "toolName": "no_such_tool", "input": ""}),
            &serde_json::json!({"type": "tool-output-error", "toolCallId": "call_2",
            "errorText": refused}),
        ],
        "{json:?}"
    );
    assert_eq!(json.last().unwrap()["type"], "error");
}

/// A stream the server cuts for a client that fell behind ends while its run goes on: the calls
/// it leaves open end `output-error`, told their output was not sent and the run goes on (a
/// refused one, or a denied one an earlier run showed, that it never runs), never that the run
/// ended, and the cut's message is the `error` chunk's. Nothing follows.
#[test]
fn a_cut_stream_tells_its_open_calls_the_run_goes_on() {
    use ai_core::ToolCallId;
    let mut t = Translator::continuing(
        "run-1",
        Client::Ai5,
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
        "nothing after the terminal chunk"
    );
    let continued = ["call_5", "call_6"];
    verify_continuing(&out, &continued).unwrap();
    let json: Vec<serde_json::Value> = out
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    let ended: Vec<(&str, &str)> = json
        .iter()
        .filter(|c| c["type"] == "tool-output-error")
        .map(|c| {
            (
                c["toolCallId"].as_str().unwrap(),
                c["errorText"].as_str().unwrap(),
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
        ended,
        [
            ("call_5", goes_on),
            ("call_6", denied),
            ("call_1", goes_on),
            ("call_2", goes_on),
            ("call_3", refused),
            ("call_4", goes_on),
        ],
        "{json:?}"
    );
    assert_eq!(
        json.last().unwrap(),
        &serde_json::json!({"type": "error", "errorText": "this stream was cut; the run goes on"})
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

/// A run that resumes from the user's answers and ends before the answered calls' results
/// came (its log could not be written, its task died, or its stream was cut) still settles
/// each call's part before its `error`: left `approval-responded`, the client would show the
/// call waiting for good. An approved call may have run; a denied one never ran.
#[test]
fn a_resumed_run_that_fails_before_its_results_settles_the_answered_calls() {
    use ai_core::{AiEvent, DoneReason, ToolCallId};
    let answers = [("call_w", true), ("call_x", false)]
        .map(|(id, approved)| (ToolCallId::new(id).unwrap(), approved));
    let mut t = Translator::continuing("run-2", Client::Ai6, answers);
    let mut out = t.start();
    out.extend(
        t.push(&AiEvent::Error {
            message: "the run could not be recorded".into(),
        })
        .unwrap(),
    );
    out.extend(
        t.push(&AiEvent::Done {
            reason: DoneReason::Error,
        })
        .unwrap(),
    );
    verify_continuing(&out, &["call_w", "call_x"]).unwrap();
    assert_eq!(
        out,
        [
            UiChunk::Start { message_id: None },
            UiChunk::ToolOutputError {
                tool_call_id: "call_w".into(),
                error_text:
                    "the run ended before this call's result arrived: the tool may have run".into(),
            },
            UiChunk::ToolOutputError {
                tool_call_id: "call_x".into(),
                error_text:
                    "the run ended before this call's denial was recorded; the call never ran"
                        .into(),
            },
            UiChunk::Error {
                error_text: "the run could not be recorded".into(),
            },
        ]
    );
}

/// Every result answers its call, whatever it holds: its output follows the call's
/// `tool-input-available` (with the input text as the model streamed it, when no start with
/// validated arguments came), and an outcome without a chunk of its own (`ApprovalRequired`,
/// which the runner never reports as a result) is shown as the model sees it, as AG-UI's
/// `TOOL_CALL_RESULT` shows it. Otherwise the part would stay `input-streaming`, or
/// `input-available`, a call an ai 5 client takes for its own to answer.
#[test]
fn every_result_answers_its_call_after_its_input() {
    use std::sync::Arc;

    use ai_core::{AiEvent, DoneReason, ToolCallId, ToolOutcome};
    let id = |raw: &str| ToolCallId::new(raw).unwrap();
    let out = translate(&[
        AiEvent::StepStarted { step: 1 },
        AiEvent::ToolCallStreamStart {
            tool_call_id: id("call_1"),
            tool_name: "t".into(),
        },
        AiEvent::ToolCallArgsDelta {
            tool_call_id: id("call_1"),
            delta: "{}".into(),
        },
        AiEvent::ToolCallResult {
            tool_call_id: id("call_1"),
            tool_name: "t".into(),
            outcome: ToolOutcome::Ok {
                value: Arc::new(serde_json::json!(1)),
            },
        },
        AiEvent::ToolCallStart {
            tool_call_id: id("call_2"),
            tool_name: "t".into(),
            args: Some(Arc::new(serde_json::json!({}))),
        },
        AiEvent::ToolCallResult {
            tool_call_id: id("call_2"),
            tool_name: "t".into(),
            outcome: ToolOutcome::ApprovalRequired {
                args_hash: "0".repeat(64),
            },
        },
        AiEvent::Done {
            reason: DoneReason::Cancelled,
        },
    ]);
    verify(&out).unwrap();
    let json: Vec<serde_json::Value> = out
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    let calls: Vec<&serde_json::Value> = json
        .iter()
        .filter(|c| c["toolCallId"].is_string() && c["type"] != "tool-input-delta")
        .collect();
    assert_eq!(
        calls,
        [
            &serde_json::json!({"type": "tool-input-start", "toolCallId": "call_1", "toolName": "t"}),
            &serde_json::json!({"type": "tool-input-available", "toolCallId": "call_1",
            "toolName": "t", "input": "{}"}),
            &serde_json::json!({"type": "tool-output-available", "toolCallId": "call_1", "output": 1}),
            &serde_json::json!({"type": "tool-input-start", "toolCallId": "call_2", "toolName": "t"}),
            &serde_json::json!({"type": "tool-input-available", "toolCallId": "call_2",
            "toolName": "t", "input": {}}),
            // A safe message, as for a failure, never the outcome's JSON.
            &serde_json::json!({"type": "tool-output-error", "toolCallId": "call_2",
            "errorText": "approval_required: the call needed a human's approval and did not run"}),
        ],
        "{json:?}"
    );
    assert_eq!(json.last().unwrap()["type"], "abort");
}

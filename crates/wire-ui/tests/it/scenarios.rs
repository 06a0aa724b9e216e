//! Event sequences the driver emits for typical runs.

use std::sync::Arc;

use ai_core::{AiEvent, DoneReason, ToolCallId, ToolErrorCode, ToolFailure, ToolOutcome, Usage};
use serde_json::json;

fn id(raw: &str) -> ToolCallId {
    ToolCallId::new(raw).unwrap()
}

fn step(step: u32) -> AiEvent {
    AiEvent::StepStarted { step }
}

fn text(delta: &str) -> AiEvent {
    AiEvent::TextDelta {
        delta: delta.into(),
    }
}

fn announce(call: &str, name: &str) -> AiEvent {
    AiEvent::ToolCallStreamStart {
        tool_call_id: id(call),
        tool_name: name.into(),
    }
}

fn args(call: &str, delta: &str) -> AiEvent {
    AiEvent::ToolCallArgsDelta {
        tool_call_id: id(call),
        delta: delta.into(),
    }
}

fn start(call: &str, name: &str, args: Option<serde_json::Value>) -> AiEvent {
    AiEvent::ToolCallStart {
        tool_call_id: id(call),
        tool_name: name.into(),
        args: args.map(Arc::new),
    }
}

fn ok(call: &str, name: &str, value: serde_json::Value) -> AiEvent {
    AiEvent::ToolCallResult {
        tool_call_id: id(call),
        tool_name: name.into(),
        outcome: ToolOutcome::Ok {
            value: Arc::new(value),
        },
    }
}

fn failed(call: &str, name: &str, code: ToolErrorCode, message: &str) -> AiEvent {
    AiEvent::ToolCallResult {
        tool_call_id: id(call),
        tool_name: name.into(),
        outcome: ToolOutcome::Error(ToolFailure::new(code, message)),
    }
}

fn approval(call: &str, tool: &str, args: serde_json::Value) -> AiEvent {
    AiEvent::ApprovalRequired {
        tool_call_id: id(call),
        tool_id: ai_core::ToolId::parse(tool).unwrap(),
        args: Arc::new(args),
        args_hash: "0".repeat(64),
    }
}

fn done(reason: DoneReason) -> AiEvent {
    AiEvent::Done { reason }
}

const TIME: &str = "core__get_current_time";
const LIST: &str = "core__workspace_list";
const WRITE: &str = "core__workspace_write";

/// Every scenario, by name.
pub(crate) fn all() -> Vec<(&'static str, Vec<AiEvent>)> {
    vec![
        (
            "text_only",
            vec![
                step(1),
                text("Hel"),
                text(""),
                text("lo"),
                AiEvent::Usage {
                    usage: Usage::new(5, 2, 7),
                },
                done(DoneReason::Stop),
            ],
        ),
        (
            "parallel_tools_then_text",
            vec![
                step(1),
                text("Let me check."),
                announce("call_1", TIME),
                args("call_1", "{"),
                args("call_1", "}"),
                announce("call_2", LIST),
                args("call_2", r#"{"path":"."}"#),
                start("call_1", TIME, Some(json!({}))),
                start("call_2", LIST, Some(json!({"path": "."}))),
                AiEvent::ToolCallRetrying {
                    tool_call_id: id("call_2"),
                    attempt: 2,
                    max_attempts: 3,
                    retry_in_ms: 100,
                    category: ai_core::ToolErrorCategory::Transient,
                },
                ok("call_1", TIME, json!({"now": "2026-11-22T12:00:00Z"})),
                failed("call_2", LIST, ToolErrorCode::Timeout, "the tool ran out of time"),
                step(2),
                text("It is noon."),
                done(DoneReason::Stop),
            ],
        ),
        (
            "invalid_arguments_fed_back",
            vec![
                step(1),
                announce("call_1", TIME),
                args("call_1", "{bad"),
                start("call_1", TIME, None),
                failed(
                    "call_1",
                    TIME,
                    ToolErrorCode::InvalidJson,
                    "the arguments are not valid JSON",
                ),
                step(2),
                text("Sorry."),
                done(DoneReason::Stop),
            ],
        ),
        (
            "not_streamed_call",
            vec![
                step(1),
                start("call_9", TIME, Some(json!({}))),
                ok("call_9", TIME, json!({"now": "noon"})),
                step(2),
                done(DoneReason::MaxSteps),
            ],
        ),
        (
            // One call ran; the other (streamed) and a third (not streamed) need a human's
            // decision: the run pauses.
            "awaiting_approval",
            vec![
                step(1),
                text("Writing it."),
                announce("call_w", WRITE),
                args("call_w", "{\"path\":\"a.txt\","),
                args("call_w", "\"content\":\"hi\"}"),
                announce("call_t", TIME),
                args("call_t", "{}"),
                start("call_t", TIME, Some(json!({}))),
                ok("call_t", TIME, json!({"now": "noon"})),
                approval("call_w", WRITE, json!({"path": "a.txt", "content": "hi"})),
                approval("call_x", WRITE, json!({"path": "b.txt", "content": ""})),
                done(DoneReason::AwaitingApproval),
            ],
        ),
        (
            // The model's completed answer named its call otherwise than it streamed it, and
            // left out a second streamed call: the loop answers both as never run, with no
            // start, and the call the answer holds runs under its own id, not streamed.
            "streamed_calls_the_completion_does_not_hold",
            vec![
                step(1),
                announce("call_a", TIME),
                args("call_a", "{}"),
                announce("call_b", LIST),
                args("call_b", r#"{"path":"."}"#),
                failed(
                    "call_a",
                    TIME,
                    ToolErrorCode::Validation,
                    "the model's completed answer does not hold this call as it streamed",
                ),
                failed(
                    "call_b",
                    LIST,
                    ToolErrorCode::Validation,
                    "the model's completed answer does not hold this call as it streamed",
                ),
                start("call_c", TIME, Some(json!({}))),
                ok("call_c", TIME, json!({"now": "noon"})),
                step(2),
                text("It is noon."),
                done(DoneReason::Stop),
            ],
        ),
        (
            "model_fails_mid_stream",
            vec![
                step(1),
                text("partial"),
                announce("call_1", TIME),
                args("call_1", "{"),
                AiEvent::Error {
                    message: "provider error: endpoint http://127.0.0.1:9/v1/chat/completions: overloaded".into(),
                },
                done(DoneReason::Error),
            ],
        ),
        (
            // The user stopped the run while the model streamed a call's arguments: the call
            // never ran, and nothing more comes for it.
            "cancelled_while_a_call_streams",
            vec![
                step(1),
                announce("call_1", LIST),
                args("call_1", r#"{"pa"#),
                announce("call_2", TIME),
                done(DoneReason::Cancelled),
            ],
        ),
        (
            "cancelled_with_a_tool_in_flight",
            vec![
                step(1),
                announce("call_1", TIME),
                start("call_1", TIME, Some(json!({}))),
                failed("call_1", TIME, ToolErrorCode::Cancelled, "the run was cancelled"),
                done(DoneReason::Cancelled),
            ],
        ),
        (
            // The provider's output limit cut the answer off: it ends as a finished run that
            // says so, not as an error.
            "cut_by_length",
            vec![step(1), text("Here is how"), done(DoneReason::Length)],
        ),
        (
            // After a tool step, the provider's content filter stopped the answer.
            "cut_by_content_filter",
            vec![
                step(1),
                announce("call_1", TIME),
                args("call_1", "{}"),
                start("call_1", TIME, Some(json!({}))),
                ok("call_1", TIME, json!({"now": "noon"})),
                step(2),
                text("Here is how to"),
                done(DoneReason::ContentFilter),
            ],
        ),
        (
            // The provider ended the answer for a reason the loop does not know (vLLM's
            // `abort`): a finished run that says the answer may be incomplete.
            "ended_for_another_reason",
            vec![step(1), text("Here is how"), done(DoneReason::Other)],
        ),
        (
            "trailing_events_after_done_are_dropped",
            vec![step(1), text("x"), done(DoneReason::Stop), text("late")],
        ),
    ]
}

/// The run that resumes `awaiting_approval` from the user's answers: `call_x` denied (shown
/// without arguments, answered `policy_denied`), `call_w` approved and run, then the model answers.
pub(crate) fn resumed_after_approval() -> Vec<AiEvent> {
    vec![
        start("call_x", WRITE, None),
        failed(
            "call_x",
            WRITE,
            ToolErrorCode::PolicyDenied,
            "tool core__workspace_write is not allowed: the user denied this call",
        ),
        start(
            "call_w",
            WRITE,
            Some(json!({"path": "a.txt", "content": "hi"})),
        ),
        ok("call_w", WRITE, json!({"path": "a.txt", "bytes": 2})),
        step(2),
        text("Wrote a.txt; b.txt was not approved."),
        done(DoneReason::Stop),
    ]
}

/// A run whose task died (or whose log could not be written) after one call started, with no
/// result, and another asked for approval: what the server closes the stream with.
pub(crate) fn died_with_a_call_unanswered() -> Vec<AiEvent> {
    vec![
        step(1),
        start(
            "call_1",
            "core__workspace_read",
            Some(json!({"path": "notes.txt"})),
        ),
        approval("call_2", "core__get_current_time", json!({})),
        AiEvent::Error {
            message: "the run ended unexpectedly".into(),
        },
        done(DoneReason::Error),
    ]
}

/// A run whose task died (or whose log could not be written) after the runner refused two
/// calls (their starts came without arguments, their results were still to follow): one whose
/// arguments streamed, and one an endpoint sent whole.
pub(crate) fn died_after_refusing_calls() -> Vec<AiEvent> {
    vec![
        step(1),
        announce("call_1", TIME),
        args("call_1", "{\"zone\":"),
        args("call_1", "1}"),
        start("call_1", TIME, None),
        start("call_2", "no_such_tool", None),
        AiEvent::Error {
            message: "the run ended unexpectedly".into(),
        },
        done(DoneReason::Error),
    ]
}

/// A run whose stream is about to be cut (its client fell behind) while it goes on, with a call
/// in each state a cut can find it in: one whose arguments still stream, one running, one the
/// runner refused (its result still to come), and one waiting for approval. No `Done`: the run
/// has not ended.
pub(crate) fn calls_in_flight_at_a_cut() -> Vec<AiEvent> {
    vec![
        step(1),
        announce("call_1", TIME),
        args("call_1", "{"),
        start("call_2", LIST, Some(json!({"path": "."}))),
        start("call_3", "no_such_tool", None),
        approval("call_4", WRITE, json!({"path": "a.txt", "content": "a"})),
    ]
}

/// What [`with_odd_call_ids`] puts before each call id's `call_`, as JSON writes it.
pub(crate) const ODD_CALL_ID_PREFIX_JSON: &str = r"\u001b[2J\n";

/// `events` with an escape sequence and a newline put before every call id: ids a provider
/// could send, which a client must get back byte-exact.
pub(crate) fn with_odd_call_ids(events: &[AiEvent]) -> Vec<AiEvent> {
    let json = serde_json::to_string(events).unwrap();
    let odd = json.replace("\"call_", &format!("\"{ODD_CALL_ID_PREFIX_JSON}call_"));
    serde_json::from_str(&odd).unwrap()
}

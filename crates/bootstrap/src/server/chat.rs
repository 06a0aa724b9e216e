//! `POST /api/v1/chat`: a Vercel AI SDK `useChat` request in, the UI message stream out.

use std::sync::Arc;

use ai_core::{AiEvent, ToolCallId};
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::Response;
use graph::HistoryItem;
use wire_ui::ai_sdk::{ChatRequest, Client, STREAM_HEADER, Translator, Trigger, UiMessage, UiRole};
use wire_ui::sse;

use super::{
    Answer, ApiError, AppState, BodyLimit, Incoming, IncomingTurn, Resend, ResendKind, Said,
    Translate, parse_body, sse_response, start_run,
};

/// The AI SDK translator, as the stream needs it.
pub(super) struct Stream(pub(super) Translator);

impl Translate for Stream {
    fn frames(&mut self, event: &AiEvent) -> String {
        super::frames_of(self.0.push(event))
    }

    fn cut(&mut self, message: &str) -> String {
        self.0.cut(message).iter().map(sse::frame).collect()
    }

    fn finished(&self) -> bool {
        self.0.is_finished()
    }

    fn trailer(&self) -> &'static str {
        sse::DONE_FRAME
    }
}

/// Runs one `useChat` turn.
pub(super) async fn run(
    State(state): State<Arc<AppState>>,
    axum::Extension(limit): axum::Extension<BodyLimit>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: ChatRequest = parse_body(&headers, body, limit)?;
    let messages = request.conversation().map_err(|fault| {
        ApiError::bad_request(
            "invalid_body",
            format!("the request body is invalid: {fault}"),
        )
    })?;
    // The last message alone (`message`), as the AI SDK's docs suggest for a server that keeps
    // its threads: all a thread the server holds reads anyway; a new thread starts from it as
    // from a one-message history. Its faults name it as the client sent it.
    let lone = request.message.is_some();
    let mut incoming = incoming(messages).map_err(|e| if lone { as_lone(e) } else { e })?;
    let retry = request.trigger == Some(Trigger::RegenerateMessage);
    let message = matches!(incoming.turn, IncomingTurn::Message(_));
    if retry && !message {
        // `regenerate()` sends the history cut before the answer it asks again for (whichever
        // message `messageId` names): the user's message it answered is last.
        return Err(ApiError::bad_request(
            "invalid_history",
            "trigger: regenerate-message: the last message must be the user's message to run \
             again",
        ));
    }
    // ai's `sendMessage({text, messageId})` edits a user message: it cuts the history there and
    // names it, last (its automatic sends name the last message too: an assistant one, answers).
    let edit = !retry
        && message
        && request.message_id.is_some()
        && request.message_id.as_deref() == messages.last().map(|m| m.id.as_str());
    if lone && (retry || edit) {
        // A message sent again is found in the thread by the user messages before it, which a
        // lone message does not bring: run as a new one, it would not do what was asked.
        return Err(ApiError::bad_request(
            "invalid_body",
            "the request body is invalid: `message` alone cannot be sent again (trigger: \
             regenerate-message) or edited (messageId naming it): the server finds such a \
             message in the thread by the messages before it; send the conversation in \
             `messages`",
        ));
    }
    if retry || edit {
        let kind = if edit {
            ResendKind::Edit
        } else {
            ResendKind::Retry
        };
        incoming.resend = Some(Resend {
            kind,
            before: user_messages_before(messages),
        });
    }
    let run_id = state.next_run_id();
    let started = start_run(&state, &request.id, &run_id, incoming).await?;
    let client = match state.ai_sdk_version {
        ..=5 => Client::Ai5,
        _ => Client::Ai6,
    };
    // The calls a resume decides (the answered ones and the unanswered, denied) that the
    // client's last message holds: the stream continues it (a run that resumes none is new).
    // One it does not hold never reached the client (its stream was cut before the call's
    // start): a tool output for it is refused (the client finds no part to put it in), and a
    // stream that continues a message cannot add a call to its step, so nothing of it is sent
    // (the thread holds its denial).
    let held: Vec<String> = messages
        .last()
        .and_then(|last| last.tool_parts().ok())
        .unwrap_or_default()
        .into_iter()
        .map(|part| part.tool_call_id)
        .collect();
    let (resumed, unseen): (Vec<_>, Vec<_>) = started
        .resumed
        .iter()
        .cloned()
        .partition(|(id, _)| held.iter().any(|held| held == id.as_str()));
    let mut translator = Translator::continuing(run_id, client, resumed);
    let first = translator.start().iter().map(sse::frame).collect();
    // The calls of the client's last message that a new user message answers (cancelled, or
    // lost: see `StartedRun::superseded`): this stream is a new message, which cannot end a part
    // of an earlier one, so nothing of them is sent (the part stays as the client shows it; the
    // thread holds the answer).
    let unshown = unseen
        .into_iter()
        .chain(started.superseded.iter().cloned())
        .map(|(id, _)| id)
        .collect();
    Ok(sse_response(
        first,
        started,
        Stream(translator),
        unshown,
        &[STREAM_HEADER],
    ))
}

/// A refusal of a lone `message` naming it as sent: `incoming` names the messages of a
/// conversation (`messages[0]`, `messages:`), which the client did not send.
fn as_lone(mut error: ApiError) -> ApiError {
    for prefix in ["messages[0]", "messages"] {
        if let Some(rest) = error.message.strip_prefix(prefix) {
            error.message = format!("message{rest}");
            break;
        }
    }
    error
}

/// The client's history as UI items, and what its last message asks: the user's new message,
/// or the answers to approval requests (ai 6's `addToolApprovalResponse` marks the calls' parts
/// in the last assistant message `approval-responded`; a part still `approval-requested` is
/// denied).
fn incoming(messages: &[UiMessage]) -> Result<Incoming, ApiError> {
    let invalid = |message: String| ApiError::bad_request("invalid_history", message);
    let Some((last, before)) = messages.split_last() else {
        return Err(invalid(
            "messages: empty; the last message must be the user's new message".into(),
        ));
    };
    if last.role == UiRole::Assistant {
        let answers = approval_answers(messages.len() - 1, last)?;
        if !answers.is_empty() {
            // The thread is the server's: the client's history is not read.
            return Ok(Incoming::without_history(IncomingTurn::Approvals(answers)));
        }
    }
    if last.role != UiRole::User {
        return Err(invalid(
            "messages: the last message must be the user's new message, or an assistant message \
             answering approval requests"
                .into(),
        ));
    }
    let mut history = Vec::with_capacity(before.len());
    let mut history_at = Vec::with_capacity(before.len());
    let mut unreadable_history = None;
    for (index, message) in before.iter().enumerate() {
        match message.role {
            UiRole::System => history.push(HistoryItem::System {
                content: message.text(),
            }),
            UiRole::User => history.push(HistoryItem::User {
                content: message.text(),
            }),
            UiRole::Assistant => {
                // Refused only if the history is needed (no thread yet): see `Incoming`.
                if let Err(fault) = assistant_items(index, message, &mut history) {
                    history.truncate(history_at.len());
                    unreadable_history = Some(fault);
                    break;
                }
            }
        }
        // The items this message added come from it.
        history_at.resize(history.len(), index);
    }
    let message = last.text();
    if message.trim().is_empty() {
        return Err(super::no_text(messages.len() - 1));
    }
    Ok(Incoming {
        history,
        history_at,
        unreadable_history,
        turn: IncomingTurn::Message(message),
        resend: None,
        follows: None,
    })
}

/// The user messages before the last of `messages`, as [`super::users_before`] reads them.
fn user_messages_before(messages: &[UiMessage]) -> Vec<(String, bool)> {
    let before = &messages[..messages.len().saturating_sub(1)];
    super::users_before(before.iter().map(|m| match m.role {
        UiRole::User => Said::User(m.text()),
        UiRole::Assistant => Said::Assistant,
        UiRole::System => Said::Other,
    }))
}

/// The answers in an assistant message, one for each tool part that asked for approval
/// (`approval-responded`, with the user's reason if any, or `approval-requested`: not answered,
/// so denied).
fn approval_answers(index: usize, message: &UiMessage) -> Result<Vec<Answer>, ApiError> {
    let tools = message
        .tool_parts()
        .map_err(|e| ApiError::bad_request("invalid_history", format!("messages[{index}]: {e}")))?;
    Ok(tools
        .into_iter()
        .filter_map(|tool| match tool.state.as_str() {
            "approval-responded" => Some(Answer {
                approved: tool.approved == Some(true),
                reason: tool.approval_reason,
                call_id: tool.tool_call_id,
            }),
            "approval-requested" => Some(Answer {
                call_id: tool.tool_call_id,
                approved: false,
                reason: None,
            }),
            _ => None,
        })
        .collect())
}

/// An assistant message's parts in order: text, then each tool call and its result.
fn assistant_items(
    index: usize,
    message: &UiMessage,
    history: &mut Vec<HistoryItem>,
) -> Result<(), ApiError> {
    let invalid = |message: String| ApiError::bad_request("invalid_history", message);
    let tools = message
        .tool_parts()
        .map_err(|e| invalid(format!("messages[{index}]: {e}")))?;
    let mut tools = tools.into_iter();
    for part in &message.parts {
        let kind = part["type"].as_str().unwrap_or_default();
        if kind == "text" {
            if let Some(text) = part["text"].as_str().filter(|t| !t.is_empty()) {
                history.push(HistoryItem::AssistantText {
                    content: text.to_owned(),
                });
            }
            continue;
        }
        if kind != "dynamic-tool" && !kind.starts_with("tool-") {
            continue;
        }
        let Some(tool) = tools.next() else { break };
        let id = ToolCallId::new(tool.tool_call_id.as_str())
            .map_err(|e| invalid(format!("messages[{index}]: toolCallId: {e}")))?;
        history.push(HistoryItem::ToolCall {
            id: id.clone(),
            // Empty for a call the model made without naming a tool (a part of type `tool-`):
            // the rebuilt history names it `_`, as the loop records such a call.
            name: tool.tool_name,
            arguments: arguments(tool.input),
        });
        let content = match tool.state.as_str() {
            "output-available" => tool.output.unwrap_or_default().to_string(),
            "output-error" => serde_json::json!({
                "error": {"message": tool.error_text.unwrap_or_default()}
            })
            .to_string(),
            // Denied through ai 6's approval exchange: it never ran.
            "output-denied" => serde_json::json!({
                "error": {"message": graph::denial_message(tool.approval_reason.as_deref())}
            })
            .to_string(),
            // Waited for approval, and the user sent a new message instead of the answers: it
            // never ran (the server answers such calls so when it holds the thread).
            "approval-requested" | "approval-responded" => {
                super::unanswered_result(super::NEVER_RAN_APPROVAL_UNSENT)
            }
            // Still waiting for its result: paused for an approval an ai 5 client cannot send,
            // or cut off before its result arrived. The server that could answer it no longer
            // holds the thread, and the client has nothing to send back: answered so, the chat
            // goes on, and the model is not told the call ran.
            "input-streaming" | "input-available" => {
                super::unanswered_result(super::NO_RESULT_REACHED)
            }
            // Any other state is not one the AI SDK gives a call: it stays unanswered, and
            // reconstruct_history refuses it.
            _ => continue,
        };
        history.push(HistoryItem::ToolResult {
            tool_call_id: id,
            content,
        });
    }
    Ok(())
}

/// A call part's `input` as the argument text the model is sent back: the JSON of a parsed
/// input; for a string, the text itself, since that is how cogni's stream shows a call refused
/// before its input was read (a nameless call, invalid JSON) — the text as the model streamed
/// it — with empty text read as `{}`, as the decoder reads a call without arguments; `{}` when
/// there is none.
fn arguments(input: Option<serde_json::Value>) -> String {
    match input {
        None => "{}".to_owned(),
        Some(serde_json::Value::String(text)) if text.trim().is_empty() => "{}".to_owned(),
        Some(serde_json::Value::String(text)) => text,
        Some(input) => input.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use wire_ui::ai_sdk::UiMessage;

    use super::super::{IncomingTurn, history_fault};
    use super::{arguments, incoming};

    /// A call part's input is sent back as the argument text: a parsed input as its JSON, a
    /// string (how cogni's stream shows a call refused before its input was read) as the text
    /// the model streamed, empty or none as `{}`.
    #[test]
    fn a_call_part_s_input_is_sent_back_as_its_argument_text() {
        for (input, want) in [
            (
                Some(json!({"path": "notes.txt"})),
                r#"{"path":"notes.txt"}"#,
            ),
            (Some(json!("{\"path\": \"no")), "{\"path\": \"no"),
            (Some(json!("")), "{}"),
            (Some(json!(" ")), "{}"),
            (None, "{}"),
        ] {
            assert_eq!(arguments(input.clone()), want, "{input:?}");
        }
    }

    fn messages(value: Value) -> Vec<UiMessage> {
        serde_json::from_value(value).unwrap()
    }

    fn user(parts: Value) -> Value {
        json!({"id": "u", "role": "user", "parts": parts})
    }

    /// A new user message with no text a model can read (no parts, only whitespace, or only
    /// parts cogni does not read) is refused naming its place, and sends nothing.
    #[test]
    fn a_new_user_message_without_text_is_refused_by_its_place() {
        let hi = user(json!([{"type": "text", "text": "hi"}]));
        let answer =
            json!({"id": "a", "role": "assistant", "parts": [{"type": "text", "text": "yes"}]});
        for parts in [
            json!([]),
            json!([{"type": "text", "text": " \n\t"}]),
            json!([{"type": "file", "mediaType": "image/png", "url": "data:secret"}]),
            json!([{"type": "data-note", "data": {"x": "secret"}}]),
        ] {
            let error = incoming(&messages(json!([hi, answer, user(parts)])))
                .err()
                .expect("refused");
            assert_eq!(error.status, 400);
            assert_eq!(error.code, "invalid_history");
            assert_eq!(
                error.message,
                "messages[2]: a user message holds no text (only its text parts are read)"
            );
        }
    }

    /// An answer to an approval request that is not one (`approved` not a boolean, say) is
    /// refused naming the message and part by their places, never read as a denial.
    #[test]
    fn a_malformed_approval_answer_is_refused_by_its_place() {
        let hi = user(json!([{"type": "text", "text": "hi"}]));
        let answer = json!({"id": "a", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-core__get_current_time", "toolCallId": "c1", "state": "approval-responded",
             "input": {}, "approval": {"id": "c1", "approved": "yes"}}
        ]});
        let error = incoming(&messages(json!([hi, answer])))
            .err()
            .expect("refused");
        assert_eq!(error.status, 400);
        assert_eq!(error.code, "invalid_history");
        assert_eq!(
            error.message,
            "messages[1]: part 1: `approval.approved` is not a boolean"
        );
    }

    /// Parts cogni does not read are skipped beside text, as a newer client may send them.
    #[test]
    fn unknown_parts_beside_text_are_skipped() {
        let parts = json!([{"type": "file", "url": "data:x"}, {"type": "text", "text": "hi"}]);
        let incoming = incoming(&messages(json!([user(parts)]))).ok().unwrap();
        assert!(matches!(incoming.turn, IncomingTurn::Message(text) if text == "hi"));
    }

    /// A user message without text earlier in a history that starts a thread is refused by its
    /// place, when the history is rebuilt; an assistant message with only tool parts is not.
    #[test]
    fn a_user_message_without_text_in_a_new_threads_history_is_refused_by_its_place() {
        let tool = json!({"id": "a", "role": "assistant", "parts": [
            {"type": "tool-core__get_current_time", "toolCallId": "c1",
             "state": "output-available", "input": {}, "output": {}}
        ]});
        let hi = user(json!([{"type": "text", "text": "hi"}]));
        let ok = incoming(&messages(json!([hi, tool, hi]))).ok().unwrap();
        assert!(graph::reconstruct_history(&ok.history).is_ok());

        let blank = user(json!([{"type": "file", "url": "data:x"}]));
        let request = incoming(&messages(json!([hi, tool, blank, hi])))
            .ok()
            .unwrap();
        let error = graph::reconstruct_history(&request.history).unwrap_err();
        assert_eq!(
            history_fault(&request, &error),
            "the message history is invalid: messages[2]: a user message holds no text (only its \
             text parts are read)"
        );
    }
}

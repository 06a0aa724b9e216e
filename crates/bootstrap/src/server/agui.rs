//! `POST /api/v1/agui`: an AG-UI `RunAgentInput` in, AG-UI events out over SSE.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ai_core::{AiEvent, ToolCallId};
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use graph::HistoryItem;
use wire_ui::agui::{InputMessage, RunAgentInput, Translator};
use wire_ui::sse;

use super::{
    Answer, ApiError, AppState, BodyLimit, Incoming, IncomingTurn, Said, Translate, parse_body,
    sse_response, start_run,
};

/// The AG-UI translator, as the stream needs it.
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
}

/// Runs one AG-UI turn.
pub(super) async fn run(
    State(state): State<Arc<AppState>>,
    axum::Extension(limit): axum::Extension<BodyLimit>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    if !accepts_event_stream(&headers) {
        // The header is the client's text: the refusal names what is offered, not what came.
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "unsupported_protocol",
            "this endpoint streams AG-UI events as text/event-stream only: accept \
             text/event-stream (or */*)",
        ));
    }
    let input: RunAgentInput = parse_body(&headers, body, limit)?;
    // A run that answers interrupts continues the thread from them: the thread is the server's,
    // so the client's messages are not read. Unless they end with a user message: a paused
    // run's messages end with its calls, so that is a message the user typed instead of
    // answering, which `@ag-ui/client` sends only with `resume` entries for every open
    // interrupt (it starts no run without). It is the run's turn, as any new message is (the
    // waiting calls end cancelled, whatever the entries say), rather than dropped unread.
    let new_message = matches!(input.messages.last(), Some(InputMessage::User { .. }));
    let incoming = if input.resume.is_empty() || new_message {
        // The entries name the calls that waited for an approval: only read, when the server
        // lost the thread, to answer those calls in the history as never run.
        let waited: Vec<&str> = input
            .resume
            .iter()
            .map(|entry| entry.interrupt_id.as_str())
            .collect();
        incoming(&input.messages, &waited)?
    } else {
        // An approval means what the user saw: a payload holding more (edited arguments, say)
        // is refused, named by its place, never by the key it holds.
        for (index, entry) in input.resume.iter().enumerate() {
            entry.check_approval_payload().map_err(|e| {
                ApiError::bad_request("invalid_resume", format!("resume[{index}].payload: {e}"))
            })?;
        }
        let answers = input
            .resume
            .iter()
            .map(|answer| Answer {
                call_id: answer.interrupt_id.clone(),
                approved: answer.approves(),
                reason: answer.reason().map(str::to_owned),
            })
            .collect();
        Incoming {
            follows: Some(users_of(&input.messages)),
            ..Incoming::without_history(IncomingTurn::Approvals(answers))
        }
    };
    let started = start_run(&state, &input.thread_id, &input.run_id, incoming).await?;
    // The calls a resume decides (the answered ones and the unanswered, denied), or a new user
    // message answers, were shown by the run that paused: only their results follow.
    // (A cancelled call is as one not approved: it never runs; one a lost save left out, as an
    // approved one: it may have run.) But nothing of a call the client's messages answer
    // already: an earlier stream sent its result (a resume whose closing save failed answered
    // its approved call before `RUN_ERROR`; a cut stream, a call waiting for approval), and a
    // second would give the client's history two answers to one call. Nor of a call a copy that
    // holds the paused turn shows no start of: the stream was cut before the call reached the
    // client, which holds nothing of it to answer. Its result alone would be a tool message for
    // a call the client does not hold (a history a server then refuses to rebuild), and its
    // start would place a call of the earlier turn after the new message; the thread holds it.
    // A call the request answers an interrupt of reached the client, whatever its copy names.
    let mut named: HashSet<&str> = input
        .resume
        .iter()
        .map(|answer| answer.interrupt_id.as_str())
        .collect();
    let mut answered = HashSet::new();
    for message in &input.messages {
        match message {
            InputMessage::Assistant { tool_calls, .. } => {
                named.extend(tool_calls.iter().map(|call| call.id.as_str()));
            }
            InputMessage::Tool { tool_call_id, .. } => {
                answered.insert(tool_call_id.as_str());
            }
            _ => {}
        }
    }
    let unseen = |id: &str| started.copy_holds_turn && !named.contains(id);
    let (unshown, shown): (Vec<_>, Vec<_>) = started
        .resumed
        .iter()
        .chain(&started.superseded)
        .cloned()
        .partition(|(id, _)| answered.contains(id.as_str()) || unseen(id.as_str()));
    let unshown = unshown.into_iter().map(|(id, _)| id).collect();
    let mut translator = Translator::continuing(input.thread_id, input.run_id, shown);
    let first = translator.start().iter().map(sse::frame).collect();
    Ok(sse_response(
        first,
        started,
        Stream(translator),
        unshown,
        &[],
    ))
}

/// Whether the request's `Accept` takes `text/event-stream` (RFC 9110 §12.5.1): the most
/// specific media range that matches it (`text/event-stream`, then `text/*`, then `*/*`; names
/// in any case) has a weight above 0. A weight that is not one (RFC 9110 §12.4.2: 0 to 1, at
/// most three decimals; `q=abc`, `q=2`, `q=-1`, `q=.5`) takes nothing for its range, as 0
/// would: what its client meant is unknown, and a range that does not take the stream is
/// answered 406, which names what is offered. A parameter's quoted value is one value,
/// whatever commas or semicolons it holds. A request without an `Accept` it can read takes
/// anything.
fn accepts_event_stream(headers: &HeaderMap) -> bool {
    let mut lines = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|line| line.to_str().ok())
        .peekable();
    if lines.peek().is_none() {
        return true;
    }
    // The most specific match so far (2 the type itself, 1 `text/*`, 0 `*/*`), and whether a
    // range of that specificity takes it.
    let mut best: Option<(u8, bool)> = None;
    for range in lines.flat_map(|line| split_unquoted(line, b',')) {
        let mut parts = split_unquoted(range, b';');
        let media = parts.next().unwrap_or_default().trim();
        let specificity = if media.eq_ignore_ascii_case("text/event-stream") {
            2
        } else if media.eq_ignore_ascii_case("text/*") {
            1
        } else if media == "*/*" {
            0
        } else {
            continue;
        };
        let refused = parts.any(|param| {
            param.split_once('=').is_some_and(|(name, weight)| {
                name.trim().eq_ignore_ascii_case("q")
                    && thousandths(weight.trim()).is_none_or(|q| q == 0)
            })
        });
        best = match best {
            Some((at, taken)) if at == specificity => Some((at, taken || !refused)),
            Some((at, _)) if at > specificity => best,
            _ => Some((specificity, !refused)),
        };
    }
    best.is_some_and(|(_, taken)| taken)
}

/// A weight (RFC 9110 §12.4.2: `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`)
/// in thousandths, 0 to 1000; `None` for anything else.
fn thousandths(qvalue: &str) -> Option<u16> {
    let (whole, decimals) = qvalue.split_once('.').unwrap_or((qvalue, ""));
    if decimals.len() > 3 || !decimals.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let fraction = decimals
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |n, digit| n * 10 + u16::from(digit - b'0'));
    match whole {
        "0" => Some(fraction),
        "1" if fraction == 0 => Some(1000),
        _ => None,
    }
}

/// `text` cut at each `separator` that is not inside a quoted string (RFC 9110 §5.6.4, where `\`
/// escapes the character after it), so that `x="a,b"` stays one parameter.
fn split_unquoted(text: &str, separator: u8) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let text = rest?;
        let (mut quoted, mut escaped) = (false, false);
        for (at, byte) in text.bytes().enumerate() {
            match byte {
                _ if escaped => escaped = false,
                b'\\' if quoted => escaped = true,
                b'"' => quoted = !quoted,
                _ if byte == separator && !quoted => {
                    rest = Some(&text[at + 1..]);
                    return Some(&text[..at]);
                }
                _ => {}
            }
        }
        rest = None;
        Some(text)
    })
}

/// The client's history as UI items, and its last message, which must be the user's. A call
/// in the history without a result (see [`answer_unanswered`]) is answered as never run when
/// `waited` names it (a `resume` entry answered its interrupt), and as having no result
/// otherwise.
fn incoming(messages: &[InputMessage], waited: &[&str]) -> Result<Incoming, ApiError> {
    let Some((InputMessage::User { content, .. }, before)) = messages.split_last() else {
        return Err(ApiError::bad_request(
            "invalid_history",
            "messages: the last message must be the user's new message",
        ));
    };
    let mut history = Vec::with_capacity(before.len());
    let mut history_at = Vec::with_capacity(before.len());
    let mut unreadable_history = None;
    for (index, message) in before.iter().enumerate() {
        // Refused only if the history is needed (no thread yet): see `Incoming`.
        if let Err(fault) = history_items(index, message, &mut history) {
            history.truncate(history_at.len());
            unreadable_history = Some(fault);
            break;
        }
        // The items this message added come from it.
        history_at.resize(history.len(), index);
    }
    answer_unanswered(&mut history, &mut history_at, waited);
    let message = content.text();
    if message.trim().is_empty() {
        return Err(super::no_text(messages.len() - 1));
    }
    Ok(Incoming {
        history,
        history_at,
        unreadable_history,
        turn: IncomingTurn::Message(message),
        resend: None,
        // On a thread the server holds, these must be its latest (`check_latest`): AG-UI has
        // no edit or retry, so a copy that differs would have its change silently lost.
        follows: Some(users_of(before)),
    })
}

/// The user messages of a client's copy (`messages` before the run's turn), as
/// [`super::users_before`] reads them.
fn users_of(messages: &[InputMessage]) -> Vec<(String, bool)> {
    super::users_before(messages.iter().map(|m| match m {
        InputMessage::User { content, .. } => Said::User(content.text()),
        InputMessage::Assistant { .. } => Said::Assistant,
        _ => Said::Other,
    }))
}

/// Answers each call of the history that has no result before the next user or system message
/// (or the end), there, as the AI SDK route answers a call part without a result. Such a call
/// waited for an approval (its run paused, and the interrupt is still open in the client) or its
/// run was cut off; the server that could answer it no longer holds the thread (restarted
/// without a data folder, say), or the history starts one. Refused, it would refuse every next
/// message of the chat, since the client keeps it. A call `waited` names is answered as never
/// run; any other as having no result, since it may have run. Only histories the rebuild would
/// refuse for such a call change: a result elsewhere in its turn still answers it.
fn answer_unanswered(history: &mut Vec<HistoryItem>, history_at: &mut Vec<usize>, waited: &[&str]) {
    let items = std::mem::take(history);
    let at = std::mem::take(history_at);
    // Sets, so a history of many calls and results (or many entries) costs one lookup each, not
    // a scan of the calls still open for every result.
    let waited: HashSet<&str> = waited.iter().copied().collect();
    let mut open = OpenCalls::default();
    let answer =
        |open: &mut OpenCalls, history: &mut Vec<HistoryItem>, history_at: &mut Vec<usize>| {
            for (id, from) in open.drain() {
                let message = if waited.contains(id.as_str()) {
                    super::NEVER_RAN_APPROVAL_UNSENT
                } else {
                    super::NO_RESULT_REACHED
                };
                history.push(HistoryItem::ToolResult {
                    tool_call_id: id,
                    content: super::unanswered_result(message),
                });
                history_at.push(from);
            }
        };
    for (item, from) in items.into_iter().zip(at) {
        match &item {
            HistoryItem::System { .. } | HistoryItem::User { .. } => {
                answer(&mut open, history, history_at);
            }
            HistoryItem::ToolCall { id, .. } => open.push(id.clone(), from),
            HistoryItem::ToolResult { tool_call_id, .. } => open.answered(tool_call_id),
            HistoryItem::AssistantText { .. } => {}
        }
        history.push(item);
        history_at.push(from);
    }
    answer(&mut open, history, history_at);
}

/// The calls of a history without a result yet, in their order, each with the position of the
/// message it came from ([`answer_unanswered`]). A result closes every open call of its id.
#[derive(Default)]
struct OpenCalls {
    /// In order; `None` once answered.
    calls: Vec<Option<(ToolCallId, usize)>>,
    /// Where in `calls` each id's open calls are.
    by_id: HashMap<ToolCallId, Vec<usize>>,
}

impl OpenCalls {
    fn push(&mut self, id: ToolCallId, from: usize) {
        self.by_id
            .entry(id.clone())
            .or_default()
            .push(self.calls.len());
        self.calls.push(Some((id, from)));
    }

    fn answered(&mut self, id: &ToolCallId) {
        for at in self.by_id.remove(id).unwrap_or_default() {
            self.calls[at] = None;
        }
    }

    /// The calls still open, in order; none is open after.
    fn drain(&mut self) -> impl Iterator<Item = (ToolCallId, usize)> + '_ {
        self.by_id.clear();
        self.calls.drain(..).flatten()
    }
}

/// The UI items of the history's message at `index`, added to `history`.
fn history_items(
    index: usize,
    message: &InputMessage,
    history: &mut Vec<HistoryItem>,
) -> Result<(), ApiError> {
    match message {
        InputMessage::Developer { content, .. } | InputMessage::System { content, .. } => {
            history.push(HistoryItem::System {
                content: content.clone(),
            });
        }
        InputMessage::User { content, .. } => history.push(HistoryItem::User {
            content: content.text(),
        }),
        InputMessage::Assistant {
            content,
            tool_calls,
            ..
        } => {
            if let Some(text) = content.as_ref().filter(|t| !t.is_empty()) {
                history.push(HistoryItem::AssistantText {
                    content: text.clone(),
                });
            }
            for call in tool_calls {
                history.push(HistoryItem::ToolCall {
                    id: call_id(index, &call.id)?,
                    name: call.function.name.clone(),
                    arguments: call.function.arguments.clone(),
                });
            }
        }
        InputMessage::Tool {
            content,
            tool_call_id,
            error,
            ..
        } => history.push(HistoryItem::ToolResult {
            tool_call_id: call_id(index, tool_call_id)?,
            content: match (error, content.text()) {
                // The content is kept beside the error, as the protocol does: a partial result
                // survives a failure.
                (Some(error), text) if !text.is_empty() => {
                    serde_json::json!({"error": {"message": error}, "content": text}).to_string()
                }
                (Some(error), _) => serde_json::json!({"error": {"message": error}}).to_string(),
                (None, text) => text,
            },
        }),
        // The frontend's own messages: nothing in them is for the model.
        InputMessage::Activity { .. } | InputMessage::Reasoning { .. } => {}
        _ => {
            return Err(ApiError::bad_request(
                "invalid_history",
                format!("messages[{index}]: this message role is not supported"),
            ));
        }
    }
    Ok(())
}

fn call_id(index: usize, raw: &str) -> Result<ToolCallId, ApiError> {
    ToolCallId::new(raw).map_err(|e| {
        ApiError::bad_request(
            "invalid_history",
            format!("messages[{index}]: tool call id: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use wire_ui::agui::InputMessage;

    use super::super::history_fault;
    use super::incoming;

    fn messages(value: Value) -> Vec<InputMessage> {
        serde_json::from_value(value).unwrap()
    }

    /// A weight RFC 9110 §12.4.2 does not allow (not 0 to 1, more than three decimals, not a
    /// number) takes nothing for its range, as `q=0` does; a valid one of any spelling is read
    /// as its value. Before, any number Rust parses was read as one (`q=2` took the stream as
    /// `q=1` does) and anything else as no weight (`q=abc` took it); only one at most 0 did not.
    #[test]
    fn a_malformed_weight_takes_nothing_for_its_range() {
        let takes = |accept: &str| {
            let mut headers = axum::http::HeaderMap::new();
            headers.insert(axum::http::header::ACCEPT, accept.parse().unwrap());
            super::accepts_event_stream(&headers)
        };
        for weight in ["1", "1.", "1.0", "1.000", "0.001", "0.5", "0.25", "Q=0.9"] {
            let accept = if weight.starts_with('Q') {
                format!("text/event-stream;{weight}")
            } else {
                format!("text/event-stream;q={weight}")
            };
            assert!(takes(&accept), "{accept}");
        }
        for weight in [
            "abc", "2", "-1", "1.001", "1.5", "0.0001", ".5", "", "NaN", "inf", "+0.5", "0,5",
            "0.5e0", "0x1",
        ] {
            let accept = format!("text/event-stream;q={weight}");
            assert!(!takes(&accept), "{accept}");
            // The range at fault refuses for its own specificity: a wider one does not stand in.
            assert!(!takes(&format!("{accept}, */*")), "{accept}, */*");
            // A range it does not touch still takes the stream.
            assert!(
                takes(&format!("*/*;q={weight}, text/*")),
                "*/*;q={weight}, text/*"
            );
        }
    }

    fn user(content: Value) -> Value {
        json!({"id": "u", "role": "user", "content": content})
    }

    /// A new user message with no text a model can read (empty, whitespace only, or only parts
    /// cogni does not read) is refused naming its place, and sends nothing.
    #[test]
    fn a_new_user_message_without_text_is_refused_by_its_place() {
        for content in [
            json!(""),
            json!(" \n"),
            json!([]),
            json!([{"type": "binary", "mimeType": "image/png", "data": "c2VjcmV0"}]),
        ] {
            let error = incoming(&messages(json!([user(json!("hi")), user(content)])), &[])
                .err()
                .expect("refused");
            assert_eq!(error.status, 400);
            assert_eq!(error.code, "invalid_history");
            assert_eq!(
                error.message,
                "messages[1]: a user message holds no text (only its text parts are read)"
            );
        }
    }

    /// A user message without text earlier in a history that starts a thread is refused by its
    /// place when the history is rebuilt.
    #[test]
    fn a_user_message_without_text_in_a_new_threads_history_is_refused_by_its_place() {
        let history = json!([
            user(json!("hi")),
            {"id": "a", "role": "assistant", "content": "yes"},
            user(json!("")),
            user(json!("again"))
        ]);
        let request = incoming(&messages(history), &[]).ok().unwrap();
        let error = graph::reconstruct_history(&request.history).unwrap_err();
        assert_eq!(
            history_fault(&request, &error),
            "the message history is invalid: messages[2]: a user message holds no text (only its \
             text parts are read)"
        );
    }

    /// A tool message's `error` comes alongside its content, which `@ag-ui/core` keeps so that a
    /// partial result survives a failure: the model is told both, not the error alone.
    #[test]
    fn a_failed_tool_message_keeps_its_partial_result() {
        let history = json!([
            user(json!("hi")),
            {"id": "a", "role": "assistant", "toolCalls": [
                {"id": "c1", "type": "function",
                    "function": {"name": "core__workspace_list", "arguments": "{}"}},
                {"id": "c2", "type": "function",
                    "function": {"name": "core__workspace_list", "arguments": "{}"}}]},
            {"id": "t", "role": "tool", "toolCallId": "c1", "content": "a.txt, b.txt",
                "error": "timed out after 2 entries"},
            {"id": "t2", "role": "tool", "toolCallId": "c2", "content": "", "error": "failed"},
            user(json!("again"))
        ]);
        let request = incoming(&messages(history), &[]).ok().unwrap();
        let results: Vec<Value> = request
            .history
            .iter()
            .filter_map(|item| match item {
                graph::HistoryItem::ToolResult { content, .. } => {
                    Some(serde_json::from_str(content).unwrap())
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            results,
            [
                json!({"error": {"message": "timed out after 2 entries"},
                    "content": "a.txt, b.txt"}),
                json!({"error": {"message": "failed"}}),
            ]
        );
    }

    /// A system message without text in a history that starts a thread is refused by its place
    /// (providers refuse one), not as a pairing fault.
    #[test]
    fn a_system_message_without_text_is_refused_by_its_place() {
        let history = json!([
            {"id": "s", "role": "system", "content": " "},
            user(json!("hi"))
        ]);
        let request = incoming(&messages(history), &[]).ok().unwrap();
        let error = graph::reconstruct_history(&request.history).unwrap_err();
        assert_eq!(
            history_fault(&request, &error),
            "the message history is invalid: messages[0]: a system message holds no text (only \
             its text parts are read)"
        );
    }
}

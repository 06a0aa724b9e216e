//! The Vercel AI SDK UI message stream (v1), as `useChat` consumes it, and the request `useChat`
//! posts.
//!
//! Chunk names and fields follow `ai` 6.0 (`ui-message-chunks.ts`), whose schemas are strict:
//! only documented fields are sent. Order follows `processUIMessageStream`: a text part or a tool
//! input is started before its deltas, every tool output names a call already seen, each model
//! call sits between `start-step` and `finish-step`, and the stream ends with `finish` (or
//! `error`/`abort`), after which the server sends [`crate::sse::DONE_FRAME`].

use ai_core::{AiEvent, DoneReason, ToolCallId, ToolErrorCode, ToolOutcome};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The response header that marks a UI message stream.
pub const STREAM_HEADER: (&str, &str) = ("x-vercel-ai-ui-message-stream", "v1");

/// The body `useChat` posts (`DefaultChatTransport`): the chat id, its UI messages and why it
/// asks. Extra fields a client adds through its `body` option are accepted and ignored.
///
/// The messages come as `messages` (the whole conversation, the default) or as `message` alone
/// (the last one, which the AI SDK's docs suggest sending to a server that keeps its threads:
/// `prepareSendMessagesRequest` returning `{ body: { message, id } }`);
/// [`ChatRequest::conversation`] reads either, and refuses a body with both or neither.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatRequest {
    /// The chat's id; the server keeps the thread under it.
    pub id: String,
    /// The conversation as the client has it; the new user message is last. Absent when the
    /// client sends [`ChatRequest::message`] instead.
    #[serde(default)]
    pub messages: Option<Vec<UiMessage>>,
    /// The last message alone, in place of `messages`. Only an object is read as one (or `null`
    /// as none): a list, which serde would read as a message's fields in order, is refused
    /// saying where a conversation goes.
    #[serde(default, deserialize_with = "lone_message")]
    pub message: Option<UiMessage>,
    /// Why the client sends the request; absent, a message sent for the first time, as with
    /// [`Trigger::SubmitMessage`]. Any other value is refused: read as a new message, a retry
    /// under another name (an ai 5 beta's `regenerate-assistant-message`) would run again after
    /// the answer it replaces.
    #[serde(default)]
    pub trigger: Option<Trigger>,
    /// With `submit-message`, the message sent: absent for a new one, the edited user message
    /// for an edit (ai's `sendMessage({text, messageId})`, which cuts `messages` there, so it is
    /// last), the last (assistant) message for a client's automatic send. With
    /// `regenerate-message`, the message `regenerate` was given, if any: the assistant message
    /// whose answer is asked for again (cut off, so absent from `messages`), or the user message
    /// it answered (last).
    #[serde(default)]
    pub message_id: Option<String>,
}

/// [`ChatRequest::trigger`]: why a `useChat` client sends a request.
///
/// Exhaustive on purpose: the server decides from it whether a message is new or sent again, and
/// a catch-all arm would read a trigger it does not know as one or the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// `submit-message`: a new message (or an edit, or an automatic send; see
    /// [`ChatRequest::message_id`]).
    SubmitMessage,
    /// `regenerate-message`: ai's `regenerate()`, the history cut before the answer it asks
    /// again for, so the user message it answered is last.
    RegenerateMessage,
}

impl ChatRequest {
    /// The messages the request brings, the new one last: `messages`, or `message` alone (a
    /// conversation of one). An error names the fields when the body holds both or neither; it
    /// quotes nothing of the body.
    pub fn conversation(&self) -> Result<&[UiMessage], String> {
        match (&self.messages, &self.message) {
            (Some(messages), None) => Ok(messages),
            (None, Some(message)) => Ok(std::slice::from_ref(message)),
            (Some(_), Some(_)) => Err("the body holds both `messages` and `message`: send the \
                                       conversation in `messages`, or its last message alone in \
                                       `message`"
                .to_owned()),
            (None, None) => {
                Err("missing field `messages` (or `message`, the last message alone)".to_owned())
            }
        }
    }
}

/// [`ChatRequest::message`]: one message, an object, or `null` for none. Anything else is refused
/// as the wrong type, saying what `message` must be: a list of messages (the conversation sent
/// under the wrong name) would otherwise be read as a message's fields in order, and refused
/// speaking of its first element as the message's id, or a list of those fields taken for a
/// message. The error names kinds only (`describe_json_error` keeps serde's "expected" text and
/// drops any value).
fn lone_message<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<UiMessage>, D::Error> {
    struct LoneMessage;
    impl<'de> serde::de::Visitor<'de> for LoneMessage {
        type Value = Option<UiMessage>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(
                "`message` to be one UI message, an object: a conversation goes in `messages`",
            )
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            UiMessage::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }
    deserializer.deserialize_any(LoneMessage)
}

/// One UI message.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct UiMessage {
    /// The message id.
    pub id: String,
    /// `system`, `user` or `assistant`.
    pub role: UiRole,
    /// The parts, in display order. Kept as JSON because tool parts are typed `tool-<name>`.
    #[serde(default)]
    pub parts: Vec<Value>,
    /// The client's metadata.
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// Who wrote a [`UiMessage`].
///
/// Exhaustive on purpose: whoever reads a client's history must place every message, and a
/// catch-all arm there would drop one without any error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UiRole {
    /// Instructions.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
}

/// A tool call as a UI message part shows it (`tool-<name>` or `dynamic-tool`).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolPart {
    /// The call id.
    pub tool_call_id: String,
    /// The tool name: empty for a part of type `tool-`, a call the model made without naming a
    /// tool (a stream said `toolName: ""`).
    pub tool_name: String,
    /// The part's state: `input-streaming`, `input-available`, `output-available`,
    /// `output-error`, ….
    pub state: String,
    /// The parsed input, if any.
    pub input: Option<Value>,
    /// The output, when `state` is `output-available`.
    pub output: Option<Value>,
    /// The error, when `state` is `output-error`.
    pub error_text: Option<String>,
    /// The user's answer, when `state` is `approval-responded` (ai 6 and later): whether the
    /// call is approved.
    pub approved: Option<bool>,
    /// The reason the user gave with the answer (`approval.reason`), if any.
    pub approval_reason: Option<String>,
}

impl UiMessage {
    /// The text of the message's text parts, joined by newlines.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The message's tool parts (`tool-<name>` and `dynamic-tool`), in order: one for each such
    /// part, or an error naming the first one that lacks a `toolCallId`, a `state` or (a
    /// `dynamic-tool`) a `toolName`, or holds a malformed `approval` (not an object, `approved` not a boolean, `reason`
    /// not a string, or an `approval-responded` part without `approved`), by its place in `parts`
    /// (never by the message's id, which is the client's text: a server sends the error back).
    pub fn tool_parts(&self) -> Result<Vec<ToolPart>, String> {
        let mut parts = Vec::new();
        for (index, part) in self.parts.iter().enumerate() {
            let kind = part["type"].as_str().unwrap_or_default();
            let field = |name: &str| {
                part[name]
                    .as_str()
                    .filter(|value| !value.is_empty())
                    .map(str::to_owned)
                    .ok_or_else(|| format!("part {index}: missing `{name}`"))
            };
            let tool_name = if kind == "dynamic-tool" {
                field("toolName")?
            } else if let Some(name) = kind.strip_prefix("tool-") {
                // `tool-` alone is a call the model made without a name, as a client keeps it
                // from a stream that said `toolName: ""` (cogni's does): read with its empty
                // name, so its answer stays paired with it.
                name.to_owned()
            } else {
                continue;
            };
            let tool_call_id = field("toolCallId")?;
            let state = field("state")?;
            let (approved, approval_reason) = approval(index, part, &state)?;
            parts.push(ToolPart {
                tool_call_id,
                state,
                tool_name,
                input: part.get("input").cloned(),
                output: part.get("output").cloned(),
                error_text: part["errorText"].as_str().map(str::to_owned),
                approved,
                approval_reason,
            });
        }
        Ok(parts)
    }
}

/// The user's answer a tool part holds (ai 6's `approval: {id, approved, reason?}`): whether the
/// call is approved, and the reason given. Refused, naming the part by its place and the field,
/// when `approval` is not an object, `approved` not a boolean or `reason` not a string, and when
/// a part in state `approval-responded` (an answer) has no `approved`: read as a denial without a
/// word, a client's mistake would deny a call the user may have approved. A `null` is absent.
fn approval(
    index: usize,
    part: &Value,
    state: &str,
) -> Result<(Option<bool>, Option<String>), String> {
    let approval = match part.get("approval") {
        None | Some(Value::Null) => None,
        Some(Value::Object(approval)) => Some(approval),
        Some(_) => return Err(format!("part {index}: `approval` is not an object")),
    };
    let field = |name: &str| approval.and_then(|a| a.get(name)).filter(|v| !v.is_null());
    let approved = match field("approved") {
        None => None,
        Some(Value::Bool(approved)) => Some(*approved),
        Some(_) => {
            return Err(format!(
                "part {index}: `approval.approved` is not a boolean"
            ));
        }
    };
    if approved.is_none() && state == "approval-responded" {
        return Err(format!(
            "part {index}: an `approval-responded` part has no `approval.approved`"
        ));
    }
    let reason = match field("reason") {
        None => None,
        Some(Value::String(reason)) => Some(reason.clone()),
        Some(_) => return Err(format!("part {index}: `approval.reason` is not a string")),
    };
    Ok((approved, reason))
}

/// One chunk of the UI message stream, serialized with the protocol's exact names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum UiChunk {
    /// The assistant message begins.
    Start {
        /// Its id.
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    /// A model call begins.
    StartStep,
    /// A model call's step ends (its tool outputs included).
    FinishStep,
    /// A text part begins.
    TextStart {
        /// The part.
        id: String,
    },
    /// Text of an open part (never empty).
    TextDelta {
        /// The part.
        id: String,
        /// The new text.
        delta: String,
    },
    /// A text part ends.
    TextEnd {
        /// The part.
        id: String,
    },
    /// A tool call's input begins streaming.
    ToolInputStart {
        /// The call.
        tool_call_id: String,
        /// The tool name.
        tool_name: String,
    },
    /// A raw fragment of the input JSON (never empty).
    ToolInputDelta {
        /// The call.
        tool_call_id: String,
        /// The fragment.
        input_text_delta: String,
    },
    /// The input is complete. [`Translator`] also sends it, with the input text as the model
    /// streamed it, for a call that never ran because that text was refused or never completed;
    /// its `tool-output-error` follows.
    ToolInputAvailable {
        /// The call.
        tool_call_id: String,
        /// The tool name.
        tool_name: String,
        /// The validated input.
        input: Value,
    },
    /// The model's input for the call was invalid (it never ran). Added after ai 5.0.0, whose
    /// strict chunk schema refuses it, so [`Translator`] never sends it: it sends
    /// `tool-input-available` with the input text, then `tool-output-error`.
    ToolInputError {
        /// The call.
        tool_call_id: String,
        /// The tool name.
        tool_name: String,
        /// The input text as the model streamed it.
        input: Value,
        /// What was wrong (a safe message).
        error_text: String,
    },
    /// The tool's redacted output.
    ToolOutputAvailable {
        /// The call.
        tool_call_id: String,
        /// The output.
        output: Value,
    },
    /// The call failed (a safe message, never the raw input).
    ToolOutputError {
        /// The call.
        tool_call_id: String,
        /// What went wrong.
        error_text: String,
    },
    /// The call waits for the user's approval (ai 6 and later; ai 5 refuses it). The client
    /// answers with the call's part in state `approval-responded`.
    ToolApprovalRequest {
        /// The approval (this server uses the call id).
        approval_id: String,
        /// The call.
        tool_call_id: String,
    },
    /// The user denied the call, so it never ran (ai 6 and later; ai 5 refuses it, so
    /// [`Translator`] sends it only to [`Client::Ai6`], and `tool-output-error` to ai 5).
    ToolOutputDenied {
        /// The call.
        tool_call_id: String,
    },
    /// The message is complete (as far as the run goes: a cut answer ends with it too).
    Finish {
        /// Why the model stopped (`stop`, `length`, `content-filter`, `tool-calls`, `error`,
        /// `other`). Added after ai 5.0.0, whose strict chunk schema refuses it, so
        /// [`Translator`] sends it only for clients from ai 6 on
        /// ([`Client::Ai6`]), and only for an answer that was, or may have
        /// been, cut (`length`, `content-filter`, `other`).
        #[serde(skip_serializing_if = "Option::is_none")]
        finish_reason: Option<String>,
        /// Metadata merged into the assistant message's `metadata` (every client from ai 5.0.0
        /// on accepts it). [`Translator`] sends `{"finishReason": …}` here for an answer that was,
        /// or may have been, cut.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_metadata: Option<Value>,
    },
    /// The run failed.
    Error {
        /// A message safe to show.
        error_text: String,
    },
    /// The run was cancelled.
    Abort,
}

/// Where a tool call stands on the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallState {
    /// `tool-input-start` sent.
    Streaming,
    /// Its output sent (`tool-output-available`, `-error` or `-denied`): the call is over.
    /// Nothing more is sent for it (an event that names it again, its id reused, is dropped, and
    /// `push` says so): a second output would replace the first in the client's part.
    Answered,
    /// `tool-input-start` sent for a call the runner refused before running it (its
    /// `ToolCallStart` came without arguments): its input is complete, and its
    /// `tool-input-available` (with the input text as the model streamed it) and
    /// `tool-output-error` are due.
    Refused,
    /// `tool-input-available` sent for a call that started to run (its `ToolCallStart` came,
    /// with arguments); its output is due.
    Running,
    /// `tool-input-available` (and, for ai 6, `tool-approval-request`) sent for a call that
    /// waits for approval: it keeps waiting if the run pauses, else its output is due.
    AwaitingApproval,
    /// A call an earlier run showed waiting for approval, which the user answered: this run
    /// resumes from the answer, so its output is due.
    Resumed,
}

impl CallState {
    /// How far the call is shown, for an event that reuses its id.
    fn shown(self) -> crate::Shown {
        match self {
            Self::Answered => crate::Shown::Answered,
            Self::Running | Self::Refused => crate::Shown::Started,
            Self::Streaming => crate::Shown::Streaming,
            Self::AwaitingApproval => crate::Shown::AwaitingApproval,
            Self::Resumed => crate::Shown::Earlier,
        }
    }
}

/// A tool call on the stream: its id, name, state and the input text streamed so far.
#[derive(Debug)]
struct Call {
    id: ToolCallId,
    /// The tool name (empty for a call an earlier run showed: it is settled already).
    name: String,
    state: CallState,
    input_text: String,
    /// The user denied it, in the answers this run resumes from.
    denied: bool,
}

/// The `ai` line of the client that reads a stream: what it accepts beyond the chunks every
/// client from ai 5.0.0 on accepts. A translator is made for one ([`Translator::new`],
/// [`Translator::continuing`]), never changed once used.
///
/// ```compile_fail,E0599
/// use wire_ui::ai_sdk::{Client, Translator};
/// let mut t = Translator::new("r1", Client::Ai5);
/// let _ = t.start();
/// // No turning a stream under way into one for ai 6: its client is fixed when it is made.
/// let t = t.with_approvals();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// ai 5 (from 5.0.0): its strict schemas refuse `tool-approval-request` and
    /// `finish.finishReason`, so a call that waits for approval is shown `input-available`, and a
    /// cut answer's reason is only in the `finish` chunk's `messageMetadata`.
    Ai5,
    /// ai 6 on: a call that waits for approval is asked about with a `tool-approval-request` (its
    /// `approvalId` is the call id), and a cut answer's reason is in the `finish` chunk's own
    /// `finishReason` too (`length`, `content-filter`, or `other` for a reason the loop does not
    /// know), which ai 6's `useChat` hands to its `onFinish`.
    Ai6,
}

/// Turns one run's [`AiEvent`]s into UI message chunks.
///
/// ```
/// use ai_core::{AiEvent, DoneReason};
/// use wire_ui::ai_sdk::{Client, Translator, UiChunk};
/// let mut t = Translator::new("r1", Client::Ai5);
/// let mut out = t.start();
/// out.extend(t.push(&AiEvent::StepStarted { step: 1 })?);
/// out.extend(t.push(&AiEvent::TextDelta { delta: "Hi".into() })?);
/// out.extend(t.push(&AiEvent::Done { reason: DoneReason::Stop })?);
/// assert!(matches!(out.last(), Some(UiChunk::Finish { .. })));
/// # Ok::<(), wire_ui::ReusedCallId>(())
/// ```
///
/// Calls that wait for approval are shown with their input and, for clients from ai 6 on
/// ([`Client::Ai6`]), a `tool-approval-request`; the run that resumes from the
/// user's answers continues the same assistant message ([`Translator::continuing`]).
///
/// A run whose last answer the provider cut off (`DoneReason::Length`,
/// `DoneReason::ContentFilter`) or ended for a reason the loop does not know (`DoneReason::Other`,
/// an answer that may be incomplete) ends with `finish` carrying
/// `messageMetadata: {"finishReason": "length" | "content-filter" | "other"}` (the protocol's
/// `finishReason` values), and for clients from ai 6 on ([`Client::Ai6`])
/// `finishReason` too; every other `finish` is bare, as ai 5.0.0 needs. An app whose `useChat`
/// checks metadata with a `messageMetadataSchema` must let it hold `finishReason`.
#[derive(Debug)]
pub struct Translator {
    run_id: String,
    client: Client,
    resumes: bool,
    in_step: bool,
    texts: u32,
    open_text: Option<String>,
    calls: Vec<Call>,
    error: Option<String>,
    /// The server cut the stream while the run goes on ([`Translator::cut`]).
    cut: bool,
    /// `start` was sent.
    started: bool,
    finished: bool,
}

impl Translator {
    /// A translator for one run (its id names the message and its parts), read by `client`.
    pub fn new(run_id: impl Into<String>, client: Client) -> Self {
        Self {
            run_id: run_id.into(),
            client,
            resumes: false,
            in_step: false,
            texts: 0,
            open_text: None,
            calls: Vec::new(),
            error: None,
            cut: false,
            started: false,
            finished: false,
        }
    }

    /// A translator for a run that resumes from the user's answers to approval requests (call id
    /// → approved): the stream continues the client's last assistant message, where those calls
    /// are shown already, so `start` names no new message, only the calls' results follow, and a
    /// denied call's is `tool-output-denied` (for ai 5, which refuses that chunk, its
    /// `tool-output-error`). With no answers, it is [`Translator::new`]: a stream that answers
    /// none of the message's calls names a message of its own.
    ///
    /// A call named twice is one call, answered once: approved if either answer approves it,
    /// so it is never said to have never run when it may have.
    ///
    /// ```
    /// use ai_core::{AiEvent, DoneReason, ToolCallId};
    /// use wire_ui::ai_sdk::{Client, Translator, UiChunk};
    /// let call = ToolCallId::new("call_1").unwrap();
    /// let mut t = Translator::continuing("r2", Client::Ai6, [(call, false)]);
    /// let mut out = t.start();
    /// out.extend(t.push(&AiEvent::Done { reason: DoneReason::Error })?);
    /// // The same message goes on; the denied call is answered though the run died first.
    /// assert_eq!(out[0], UiChunk::Start { message_id: None });
    /// assert!(matches!(out[1], UiChunk::ToolOutputError { .. }));
    /// # Ok::<(), wire_ui::ReusedCallId>(())
    /// ```
    ///
    /// A translator is made continuing, never turned into one once used: its `start` may have
    /// named a new message already, and the calls of a stream under way would be answered as an
    /// earlier run's.
    ///
    /// ```compile_fail,E0599
    /// use ai_core::ToolCallId;
    /// use wire_ui::ai_sdk::{Client, Translator};
    /// let mut t = Translator::new("r2", Client::Ai6);
    /// let _ = t.start();
    /// let t = t.continuing(Vec::<(ToolCallId, bool)>::new());
    /// ```
    pub fn continuing(
        run_id: impl Into<String>,
        client: Client,
        answers: impl IntoIterator<Item = (ToolCallId, bool)>,
    ) -> Self {
        let mut translator = Self::new(run_id, client);
        for (id, approved) in answers {
            match translator.call_mut(&id) {
                Some(call) => call.denied &= !approved,
                None => translator.calls.push(Call {
                    id,
                    name: String::new(),
                    state: CallState::Resumed,
                    input_text: String::new(),
                    denied: !approved,
                }),
            }
        }
        translator.resumes = !translator.calls.is_empty();
        translator
    }

    /// The first chunk: `start`, naming the assistant message (none when the run continues the
    /// client's last one). It is sent once: a later call returns nothing, and a [`Translator::push`]
    /// or [`Translator::cut`] made before any `start` sends it first, so the stream opens with
    /// it, once, however the translator is driven (the protocol allows one).
    pub fn start(&mut self) -> Vec<UiChunk> {
        let mut out = Vec::new();
        self.begin(&mut out);
        out
    }

    /// Sends `start` unless it was sent.
    fn begin(&mut self, out: &mut Vec<UiChunk>) {
        if !std::mem::replace(&mut self.started, true) {
            out.push(UiChunk::Start {
                message_id: (!self.resumes).then(|| format!("{}-msg", self.run_id)),
            });
        }
    }

    /// Ends the stream of a run that goes on without it: the server cut it for a client that
    /// fell too far behind. The calls the stream leaves without a result are answered with what
    /// is true of a cut stream, never that the run ended: their result was not sent and the run
    /// goes on, its thread holding the result once it ends (a call the runner refused, or one
    /// the user denied, is told it never runs). Then `error` chunk carries `message`, the
    /// cut's reason. After the terminal event, nothing more is produced.
    pub fn cut(&mut self, message: impl Into<String>) -> Vec<UiChunk> {
        let mut out = Vec::new();
        if self.finished {
            return out;
        }
        self.begin(&mut out);
        self.cut = true;
        self.error = Some(message.into());
        self.finish(DoneReason::Error, &mut out);
        out
    }

    /// Whether the terminal chunk (`finish`, `error` or `abort`) has been produced.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The chunks for one runtime event (often none or one), after `start` if it was not sent.
    /// After the terminal chunk, nothing more is produced.
    ///
    /// # Errors
    ///
    /// [`ReusedCallId`](crate::ReusedCallId) for an event that names a tool call this stream
    /// has answered (its output sent), that starts one it has started, or that brings
    /// arguments to one whose arguments it has closed (see
    /// [`ReusedCallId`](crate::ReusedCallId)): a call's output is its last word, and a call is
    /// shown once, so the event is dropped, nothing is produced, and the stream stays valid.
    pub fn push(&mut self, event: &AiEvent) -> Result<Vec<UiChunk>, crate::ReusedCallId> {
        let mut out = Vec::new();
        if self.finished {
            return Ok(out);
        }
        // No call is answered before `start`: refusing here drops nothing it would send.
        crate::reused_call_id(event, |id| self.state(id).map(CallState::shown))?;
        self.begin(&mut out);
        match event {
            AiEvent::StepStarted { .. } => {
                self.close_step(&mut out);
                self.in_step = true;
                out.push(UiChunk::StartStep);
            }
            AiEvent::TextDelta { delta } if !delta.is_empty() => {
                let id = self.open_text(&mut out);
                out.push(UiChunk::TextDelta {
                    id,
                    delta: delta.clone(),
                });
            }
            AiEvent::ToolCallStreamStart {
                tool_call_id,
                tool_name,
            } => {
                self.close_text(&mut out);
                self.ensure_call(tool_call_id, tool_name, &mut out);
            }
            AiEvent::ToolCallArgsDelta {
                tool_call_id,
                delta,
            } if !delta.is_empty() && self.state(tool_call_id) == Some(CallState::Streaming) => {
                if let Some(call) = self.call_mut(tool_call_id) {
                    call.input_text.push_str(delta);
                }
                out.push(UiChunk::ToolInputDelta {
                    tool_call_id: tool_call_id.as_str().to_owned(),
                    input_text_delta: delta.clone(),
                });
            }
            AiEvent::ToolCallStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                self.close_text(&mut out);
                self.ensure_call(tool_call_id, tool_name, &mut out);
                // Without valid arguments the call's `tool-output-error` follows instead. Its
                // input is complete all the same: a run that ends before that says it was
                // refused, not that its input was cut short. (A call shown before keeps its
                // state, which says why it never ran.)
                if let Some(args) = args {
                    let args = args.as_ref().clone();
                    self.settle(tool_call_id, tool_name, args, CallState::Running, &mut out);
                } else if let Some(call) = self.call_mut(tool_call_id)
                    && call.state == CallState::Streaming
                {
                    call.state = CallState::Refused;
                }
            }
            AiEvent::ApprovalRequired {
                tool_call_id,
                tool_id,
                args,
                ..
            } => {
                self.close_text(&mut out);
                self.ensure_call(tool_call_id, tool_id.as_str(), &mut out);
                self.settle(
                    tool_call_id,
                    tool_id.as_str(),
                    args.as_ref().clone(),
                    CallState::AwaitingApproval,
                    &mut out,
                );
                if self.client != Client::Ai5 {
                    out.push(UiChunk::ToolApprovalRequest {
                        approval_id: tool_call_id.as_str().to_owned(),
                        tool_call_id: tool_call_id.as_str().to_owned(),
                    });
                }
            }
            AiEvent::ToolCallResult {
                tool_call_id,
                tool_name,
                outcome,
            } => {
                self.close_text(&mut out);
                self.ensure_call(tool_call_id, tool_name, &mut out);
                // Every output follows its call's input. A call refused before its input was
                // accepted (invalid JSON, unknown tool, …) shows the input as the model
                // streamed it, as text: every client of the v5 line knows these chunks
                // (`tool-input-error` came later).
                let streamed = self
                    .call_mut(tool_call_id)
                    .map(|c| std::mem::take(&mut c.input_text))
                    .unwrap_or_default();
                let streamed = Value::String(streamed);
                self.settle(
                    tool_call_id,
                    tool_name,
                    streamed,
                    CallState::Answered,
                    &mut out,
                );
                let denied = self.call_mut(tool_call_id).is_some_and(|c| c.denied);
                let id = tool_call_id.as_str().to_owned();
                out.push(match outcome {
                    ToolOutcome::Ok { value } => UiChunk::ToolOutputAvailable {
                        tool_call_id: id,
                        output: value.as_ref().clone(),
                    },
                    // ai 5.0.0 refuses `tool-output-denied`: its denial is an output error.
                    ToolOutcome::Error(failure)
                        if denied
                            && failure.code == ToolErrorCode::PolicyDenied
                            && self.client != Client::Ai5 =>
                    {
                        UiChunk::ToolOutputDenied { tool_call_id: id }
                    }
                    ToolOutcome::Error(failure) => UiChunk::ToolOutputError {
                        tool_call_id: id,
                        error_text: format!("{}: {}", failure.code, failure.safe_message),
                    },
                    // An outcome without a chunk of its own (the runner reports a paused call
                    // by `ApprovalRequired`, never by a result) still answers the call, as
                    // AG-UI's `TOOL_CALL_RESULT` does, so no part stays open: with a safe
                    // message saying what it is, never its JSON as the model sees it.
                    ToolOutcome::ApprovalRequired { .. } => UiChunk::ToolOutputError {
                        tool_call_id: id,
                        error_text: "approval_required: the call needed a human's approval and \
                                     did not run"
                            .to_owned(),
                    },
                    _ => UiChunk::ToolOutputError {
                        tool_call_id: id,
                        error_text: "the call ended without a result this stream can show"
                            .to_owned(),
                    },
                });
            }
            AiEvent::Error { message } => self.error = Some(message.clone()),
            AiEvent::Done { reason } => self.finish(*reason, &mut out),
            // Retries, usage and empty fragments have no chunk of their own.
            _ => {}
        }
        Ok(out)
    }

    fn state(&self, id: &ToolCallId) -> Option<CallState> {
        self.calls.iter().find(|c| &c.id == id).map(|c| c.state)
    }

    fn call_mut(&mut self, id: &ToolCallId) -> Option<&mut Call> {
        self.calls.iter_mut().find(|c| &c.id == id)
    }

    fn ensure_call(&mut self, id: &ToolCallId, name: &str, out: &mut Vec<UiChunk>) {
        if self.state(id).is_none() {
            self.calls.push(Call {
                id: id.clone(),
                name: name.to_owned(),
                state: CallState::Streaming,
                input_text: String::new(),
                denied: false,
            });
            out.push(UiChunk::ToolInputStart {
                tool_call_id: id.as_str().to_owned(),
                tool_name: name.to_owned(),
            });
        }
    }

    /// Sends the call's `tool-input-available` with `input`, unless it was sent, and moves the
    /// call to `to`.
    fn settle(
        &mut self,
        id: &ToolCallId,
        name: &str,
        input: Value,
        to: CallState,
        out: &mut Vec<UiChunk>,
    ) {
        let Some(call) = self.call_mut(id) else {
            return;
        };
        if matches!(call.state, CallState::Streaming | CallState::Refused) {
            out.push(UiChunk::ToolInputAvailable {
                tool_call_id: id.as_str().to_owned(),
                tool_name: name.to_owned(),
                input,
            });
        }
        call.state = to;
        call.input_text = String::new();
    }

    fn open_text(&mut self, out: &mut Vec<UiChunk>) -> String {
        if let Some(id) = &self.open_text {
            return id.clone();
        }
        self.texts += 1;
        let id = format!("{}-text-{}", self.run_id, self.texts);
        out.push(UiChunk::TextStart { id: id.clone() });
        self.open_text = Some(id.clone());
        id
    }

    fn close_text(&mut self, out: &mut Vec<UiChunk>) {
        if let Some(id) = self.open_text.take() {
            out.push(UiChunk::TextEnd { id });
        }
    }

    fn close_step(&mut self, out: &mut Vec<UiChunk>) {
        self.close_text(out);
        if std::mem::take(&mut self.in_step) {
            out.push(UiChunk::FinishStep);
        }
    }

    /// Ends every call whose input is still streaming: nothing more comes for it and it never
    /// ran (the runner takes only complete calls). Without this the client would keep its part
    /// `input-streaming` for good, a state ai 5's `convertToModelMessages` refuses. It ends as
    /// a refused input does, `tool-input-available` with the text streamed so far, then
    /// `tool-output-error`: the two chunks every client from ai 5.0.0 on accepts
    /// (`tool-input-error` came later), leaving the part `output-error`. A call the runner
    /// refused whose result had not come ends so too, saying it was refused and never ran (its
    /// input was complete). A call that started to
    /// run and got no output (the run's task died) ends `output-error` too, saying the tool may
    /// have run, rather than staying `input-available`, which an ai 5 client would take for a
    /// call left for it to answer. A call waiting for approval in a run that ends without
    /// pausing (its log failed, or its task died) ends `output-error` too, saying it never ran:
    /// no run will ask for that approval again. So does a call the user answered, in a run that
    /// resumed from the answers and ended before the call's output (a denied call never ran; an
    /// approved one may have): left `approval-responded`, the client would show it waiting. A
    /// stream the server cut ([`Translator::cut`]) says instead that the run goes on.
    fn end_unfinished_calls(&mut self, reason: DoneReason, out: &mut Vec<UiChunk>) {
        let cut = self.cut;
        for call in &mut self.calls {
            let ended = match call.state {
                CallState::Streaming | CallState::Refused => {
                    out.push(UiChunk::ToolInputAvailable {
                        tool_call_id: call.id.as_str().to_owned(),
                        tool_name: call.name.clone(),
                        input: Value::String(std::mem::take(&mut call.input_text)),
                    });
                    match call.state {
                        CallState::Refused => crate::REFUSED_CALL,
                        _ => crate::UNFINISHED_CALL,
                    }
                }
                // Started, never answered: only a run that died (its task, or its log) leaves
                // one; the loop answers every call it starts.
                CallState::Running => crate::UNANSWERED_CALL,
                CallState::AwaitingApproval if reason != DoneReason::AwaitingApproval => {
                    crate::UNAPPROVED_CALL
                }
                // Answered by the user, with no output yet: the run ended before it got to the
                // call (its log failed or its task died before). A denied call never runs; an
                // approved one may have run.
                CallState::Resumed if call.denied => crate::UNRECORDED_DENIAL,
                CallState::Resumed => crate::UNANSWERED_CALL,
                CallState::AwaitingApproval | CallState::Answered => continue,
            };
            // A cut stream's run goes on: what it does with the call is not known here, unless
            // the call never runs.
            let error_text = match call.state {
                _ if !cut => ended,
                CallState::Refused => crate::CUT_REFUSED_CALL,
                CallState::Resumed if call.denied => crate::CUT_DENIAL,
                _ => crate::CUT_CALL,
            };
            call.state = CallState::Answered;
            out.push(UiChunk::ToolOutputError {
                tool_call_id: call.id.as_str().to_owned(),
                error_text: error_text.to_owned(),
            });
        }
    }

    fn finish(&mut self, reason: DoneReason, out: &mut Vec<UiChunk>) {
        self.finished = true;
        // Nothing more comes for an open text part or a call whose input still streams: they
        // end here, whatever the reason, so the client keeps neither `streaming`.
        self.close_text(out);
        self.end_unfinished_calls(reason, out);
        match reason {
            // The step stays open: the client needs no `finish-step` after `error`/`abort`.
            DoneReason::Cancelled => out.push(UiChunk::Abort),
            DoneReason::Error => {
                out.push(UiChunk::Error {
                    error_text: self.error.take().unwrap_or_else(|| "the run failed".into()),
                });
            }
            // An answer the provider cut off is still the message's end, not an error (its text
            // is what the model wrote), so it ends with `finish`, saying why in the one field
            // every client from ai 5.0.0 on accepts, `messageMetadata` (the client merges it into
            // the message's `metadata`, where a UI finds it again after a reload); for ai 6
            // clients also in `finishReason`, the protocol's own field, which ai 5.0.0 refuses.
            // A reason the loop does not know (`other`) may have cut the answer too: the protocol
            // names it so, and a UI can say the answer may be incomplete.
            DoneReason::Length | DoneReason::ContentFilter | DoneReason::Other => {
                let why = match reason {
                    DoneReason::Length => "length",
                    DoneReason::ContentFilter => "content-filter",
                    _ => "other",
                };
                self.close_step(out);
                out.push(UiChunk::Finish {
                    finish_reason: (self.client != Client::Ai5).then(|| why.to_owned()),
                    message_metadata: Some(serde_json::json!({ "finishReason": why })),
                });
            }
            // Stopped, the step limit, or calls waiting for approval (their parts
            // `approval-requested`, or `input-available` without approvals): a plain `finish`,
            // which every v5 and later client accepts. (A reason added to `DoneReason` later
            // lands here too, which keeps the stream valid.)
            _ => {
                self.close_step(out);
                out.push(UiChunk::Finish {
                    finish_reason: None,
                    message_metadata: None,
                });
            }
        }
    }
}

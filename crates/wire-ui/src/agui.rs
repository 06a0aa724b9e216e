//! The AG-UI protocol: the `RunAgentInput` a client posts and the events the server streams.
//!
//! Field names and event types follow `@ag-ui/core` 1.0 (`events.ts`, `types.ts`). Order follows
//! its `verifyEvents`: `RUN_STARTED` first; a text message or tool call is started before its
//! content and ended before `RUN_FINISHED`; nothing follows `RUN_ERROR`. Only a failed run ends
//! with `RUN_ERROR`: every other one, a cancelled run too (its `outcome` says so), with
//! `RUN_FINISHED`.

use ai_core::{AiEvent, DoneReason, ToolCallId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The body of a run request (`RunAgentInput`).
///
/// A top-level field it does not know is ignored, as `@ag-ui/core`'s own schema (a loose object)
/// accepts it: clients of later protocol versions send fields this one has not heard of, and every
/// field whose meaning a server acts on here (`threadId`, `runId`, `messages`, `resume`) is read
/// and checked. An answer to an interrupt ([`ResumeEntry`]) is stricter, since it decides whether a
/// tool runs: a field in it that is not known is refused.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The conversation's id; the server keeps the thread under it.
    pub thread_id: String,
    /// This run's id.
    pub run_id: String,
    /// The run this one continues, if any.
    #[serde(default)]
    pub parent_run_id: Option<String>,
    /// The protocol version the client speaks; `@ag-ui/client` 1.0 sends `"1.0"` on every
    /// request. Accepted and not otherwise read: the fields themselves are checked.
    #[serde(default)]
    pub protocol_version: Option<String>,
    /// Answers to the interrupts the thread's last run ended with: present, this run continues
    /// from them instead of starting from a new user message. (`@ag-ui/client` starts no run
    /// while interrupts are open unless this answers each, so a message the user typed instead
    /// of answering comes with entries that cancel them: a server may take a user message at
    /// the end of `messages` as the run's turn, as cogni's does.)
    #[serde(default)]
    pub resume: Vec<ResumeEntry>,
    /// The conversation as the client has it; the new user message is last.
    pub messages: Vec<InputMessage>,
    /// Tools the frontend offers. The server's catalog alone decides what the model sees.
    #[serde(default)]
    pub tools: Vec<Value>,
    /// Context items the frontend shares.
    #[serde(default)]
    pub context: Vec<Value>,
    /// The frontend's agent state.
    #[serde(default)]
    pub state: Value,
    /// Anything else the frontend forwards.
    #[serde(default)]
    pub forwarded_props: Value,
}

/// One message of [`RunAgentInput::messages`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
#[non_exhaustive]
pub enum InputMessage {
    /// Developer instructions.
    Developer {
        /// The message id.
        id: String,
        /// The text.
        content: String,
    },
    /// System instructions.
    System {
        /// The message id.
        id: String,
        /// The text.
        content: String,
    },
    /// A user's message.
    User {
        /// The message id.
        id: String,
        /// The text, or a list of content parts whose text parts are joined.
        content: InputContent,
    },
    /// An assistant turn: text, tool calls, or both.
    Assistant {
        /// The message id.
        id: String,
        /// The text.
        #[serde(default)]
        content: Option<String>,
        /// The calls.
        #[serde(default, rename = "toolCalls")]
        tool_calls: Vec<InputToolCall>,
    },
    /// A tool's result.
    Tool {
        /// The message id.
        id: String,
        /// The result: text, or a list of content parts whose text parts are joined (as
        /// `@ag-ui/core` 1.0 allows).
        content: InputContent,
        /// The call it answers.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        /// The error, when the call failed. It comes beside `content`, which may still hold
        /// a partial result.
        #[serde(default)]
        error: Option<String>,
    },
    /// A frontend activity (progress, a card): shown to the user, never part of the model's
    /// history. Its other fields are not read.
    Activity {
        /// The message id.
        id: String,
    },
    /// The model's reasoning as the frontend kept it: not sent back to the model, whose
    /// history has no reasoning items. Its other fields are not read.
    Reasoning {
        /// The message id.
        id: String,
    },
}

/// The answer to one interrupt ([`Interrupt`]), sent on the run that continues from it.
///
/// A field it does not know is refused: such a field (edited arguments, an "always allow")
/// could change what the answer means, and reading the answer without it could run a tool
/// the user did not approve as it would run. The protocol's own fields are all known,
/// `metadata` too.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumeEntry {
    /// The interrupt answered ([`Interrupt::id`]).
    pub interrupt_id: String,
    /// Whether it was answered or abandoned.
    pub status: ResumeStatus,
    /// The answer, shaped by the interrupt's `responseSchema`: for a tool approval,
    /// `{"approved": true|false, "reason"?: "…"}` and nothing else
    /// ([`ResumeEntry::check_approval_payload`]).
    #[serde(default)]
    pub payload: Option<Value>,
    /// The protocol's opaque annotations of the answer (`@ag-ui/client` passes on what the app
    /// gave): accepted and not read, since they never change what the answer says.
    #[serde(default)]
    pub metadata: Option<serde_json::Map<String, Value>>,
}

/// [`ResumeEntry::status`].
///
/// Exhaustive on purpose: it is part of an approval, and a catch-all arm in code that decides on
/// it could read a status it does not know as an approval. [`ResumeEntry::approves`] is the
/// reader to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResumeStatus {
    /// Answered: the payload holds the answer.
    Resolved,
    /// Abandoned: for a tool approval, a denial.
    Cancelled,
}

/// Why a [`ResumeEntry::payload`] is not an answer to a tool approval: named by its kind,
/// never by the key or value the client sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalPayloadError {
    /// The payload is not a JSON object.
    NotAnObject,
    /// The payload holds a key the approval does not define (edited arguments, say): read
    /// without it, the answer could approve something other than what the user saw.
    UnknownKey,
    /// `approved` is there but neither a boolean nor `null`.
    ApprovedNotABoolean,
    /// `reason` is there but neither a string nor `null`.
    ReasonNotAString,
    /// A `resolved` entry's payload does not say whether the call is approved (no payload, or
    /// no `approved`, or `"approved": null`): an answer that says nothing is not read as a
    /// denial, since it may be a client's mistake over a call the user approved.
    ApprovedMissing,
}

impl std::fmt::Display for ApprovalPayloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NotAnObject => "it is not an object",
            Self::UnknownKey => "it holds a key an approval does not define (name not shown)",
            Self::ApprovedNotABoolean => "`approved` is not a boolean",
            Self::ReasonNotAString => "`reason` is not a string",
            Self::ApprovedMissing => {
                "`approved` is missing (a `resolved` entry answers with it; `cancelled` denies)"
            }
        })?;
        f.write_str("; an approval's payload is `{\"approved\": boolean, \"reason\"?: string}`")
    }
}

impl std::error::Error for ApprovalPayloadError {}

impl ResumeEntry {
    /// Checks that a `resolved` entry's payload is an answer to a tool approval as the
    /// interrupt's `responseSchema` defines it: an object with `approved` (a boolean) and
    /// optionally `reason` (a string), and no other key. `@ag-ui/core` lets a payload be any JSON
    /// value, shaped by the interrupt that asked; a key this server does not define (edited
    /// arguments, an "always allow") is refused rather than dropped, since the answer read
    /// without it would not be the one the user gave. An answer without `approved` (no payload,
    /// or no such key) is refused too rather than read as a denial, as the AI SDK endpoint
    /// refuses an `approval-responded` part without `approval.approved`: `@ag-ui/client` always
    /// sends a boolean, so one left out is a client's mistake, over a call the user may have
    /// approved. A key that is `null` reads as left out: `"approved": null` is no answer, and
    /// `"reason": null` gives no reason. A `cancelled` entry denies its call whatever its
    /// payload holds, so it is not checked.
    pub fn check_approval_payload(&self) -> Result<(), ApprovalPayloadError> {
        if self.status == ResumeStatus::Cancelled {
            return Ok(());
        }
        let Some(payload) = self.payload.as_ref().filter(|p| !p.is_null()) else {
            return Err(ApprovalPayloadError::ApprovedMissing);
        };
        let Some(payload) = payload.as_object() else {
            return Err(ApprovalPayloadError::NotAnObject);
        };
        if payload
            .keys()
            .any(|key| key != "approved" && key != "reason")
        {
            return Err(ApprovalPayloadError::UnknownKey);
        }
        // `null` is a key left out (a Go `*bool` or a Python `None` written as JSON).
        let set = |key: &str| payload.get(key).filter(|value| !value.is_null());
        match set("approved") {
            None => return Err(ApprovalPayloadError::ApprovedMissing),
            Some(approved) if !approved.is_boolean() => {
                return Err(ApprovalPayloadError::ApprovedNotABoolean);
            }
            Some(_) => {}
        }
        if set("reason").is_some_and(|r| !r.is_string()) {
            return Err(ApprovalPayloadError::ReasonNotAString);
        }
        Ok(())
    }

    /// Whether this entry approves the tool call its interrupt asked about: resolved with
    /// `{"approved": true}`. Anything else (cancelled, `false`, `null`, a missing or malformed
    /// payload) is not an approval, so nothing runs by mistake. It does not look at other keys,
    /// nor tell a denial from a malformed answer: check the payload with
    /// [`ResumeEntry::check_approval_payload`] first, as the server does.
    pub fn approves(&self) -> bool {
        self.status == ResumeStatus::Resolved
            && self
                .payload
                .as_ref()
                .and_then(|p| p.get("approved"))
                .and_then(Value::as_bool)
                == Some(true)
    }

    /// The reason the answer gives (`payload.reason`), if it is a string.
    pub fn reason(&self) -> Option<&str> {
        self.payload.as_ref()?.get("reason")?.as_str()
    }
}

/// Something a run needs from outside before it can continue: here, a human's decision on a
/// tool call whose effect needs approval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    /// Identifies the interrupt; a [`ResumeEntry`] answers it by this id. For a tool approval,
    /// the call's id.
    pub id: String,
    /// Why the run stopped: `tool_approval`.
    pub reason: String,
    /// A prompt for whoever answers.
    pub message: String,
    /// The call this interrupt is about.
    pub tool_call_id: String,
    /// The answer expected: `{"approved": boolean, "reason"?: string}` and no other key (a
    /// denial's reason is passed on to the model).
    pub response_schema: Value,
}

/// How a run ended, on `RUN_FINISHED`: sent when it waits for answers or was cancelled (left
/// out, a run succeeded).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunOutcome {
    /// The run is paused; a new run whose `resume` answers these continues it.
    Interrupt {
        /// What the run waits for (at least one).
        interrupts: Vec<Interrupt>,
    },
    /// The run was stopped before it completed (the server cancelled it) and did not fail:
    /// nothing is waited for, and the next run is an ordinary new one (`@ag-ui/core` 1.0's
    /// `RunFinishedCancelledOutcome`).
    Cancelled,
}

/// The content of an [`InputMessage`] from a user or a tool: plain text or content parts.
///
/// Exhaustive on purpose: a catch-all arm would drop a message without any error.
/// [`InputContent::text`] is the reader to use.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum InputContent {
    /// Plain text.
    Text(String),
    /// Parts (`{"type":"text","text":…}` and others, e.g. binary attachments).
    Parts(Vec<Value>),
}

impl InputContent {
    /// The text: the string, or the text parts joined by newlines.
    pub fn text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Parts(parts) => parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// A tool call on an assistant message (`{id, type:"function", function:{name, arguments}}`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct InputToolCall {
    /// The call id.
    pub id: String,
    /// The function called.
    pub function: InputFunction,
}

/// The function of an [`InputToolCall`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct InputFunction {
    /// The tool name.
    pub name: String,
    /// The argument JSON text.
    pub arguments: String,
}

/// One AG-UI event, serialized with the protocol's exact type names and camelCase fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "SCREAMING_SNAKE_CASE",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum AguiEvent {
    /// The run began.
    RunStarted {
        /// The thread.
        thread_id: String,
        /// The run.
        run_id: String,
    },
    /// The run ended without failing: it completed, paused, or was cancelled.
    RunFinished {
        /// The thread.
        thread_id: String,
        /// The run.
        run_id: String,
        /// Why it ended: `{"reason": …}` with the run's `DoneReason` (`stop`, `max_steps`,
        /// `awaiting_approval`, `cancelled`, `length` or `content_filter` for an answer the
        /// provider cut off, and `other` for one it ended for a reason the loop does not know,
        /// which may be incomplete).
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// What the run waits for, when it is paused, or that it was cancelled.
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<RunOutcome>,
    },
    /// The run failed; nothing follows.
    RunError {
        /// A message safe to show.
        message: String,
        /// A machine-readable code.
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
    /// A model call began.
    StepStarted {
        /// Its name (`step 1`, `step 2`, …).
        step_name: String,
    },
    /// A model call's step ended (its text, tool calls and results are all in).
    StepFinished {
        /// Its name.
        step_name: String,
    },
    /// An assistant text message begins.
    TextMessageStart {
        /// The message.
        message_id: String,
        /// Always `assistant` here.
        role: String,
    },
    /// Text of an open message (never empty).
    TextMessageContent {
        /// The message.
        message_id: String,
        /// The new text.
        delta: String,
    },
    /// A text message ends.
    TextMessageEnd {
        /// The message.
        message_id: String,
    },
    /// A tool call begins.
    ToolCallStart {
        /// The call.
        tool_call_id: String,
        /// The tool name.
        tool_call_name: String,
        /// The assistant message the call belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
    },
    /// A raw fragment of the call's argument JSON (never empty).
    ToolCallArgs {
        /// The call.
        tool_call_id: String,
        /// The fragment.
        delta: String,
    },
    /// The call's arguments are complete.
    ToolCallEnd {
        /// The call.
        tool_call_id: String,
    },
    /// The call's result, as the model will see it.
    ToolCallResult {
        /// The tool message's id.
        message_id: String,
        /// The call.
        tool_call_id: String,
        /// The result text (JSON), redacted.
        content: String,
        /// Always `tool`.
        role: String,
    },
}

/// Where a tool call stands on the AG-UI stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallState {
    /// `TOOL_CALL_START` sent, and no `TOOL_CALL_ARGS` yet, or only whitespace: arguments may
    /// follow.
    Open,
    /// `TOOL_CALL_START` and some `TOOL_CALL_ARGS` sent, not only whitespace: more may follow.
    Streaming,
    /// `TOOL_CALL_RESULT` sent: the call is over. Nothing more is sent for it (an event that
    /// names it again, its id reused, is dropped, and `push` says so): a second result would
    /// give the client two tool messages answering one call.
    Answered,
    /// `TOOL_CALL_END` sent for a call that started to run (its `ToolCallStart` came, with
    /// arguments); its `TOOL_CALL_RESULT` is due.
    Running,
    /// `TOOL_CALL_END` sent for a call the runner refused before running it (its `ToolCallStart`
    /// came without arguments); its `TOOL_CALL_RESULT` is due.
    Refused,
    /// `TOOL_CALL_END` sent for a call that waits for approval: an interrupt if the run pauses,
    /// else its `TOOL_CALL_RESULT` is due.
    AwaitingApproval,
    /// A call an earlier run showed, which this run continues from the user's answer (approved):
    /// its `TOOL_CALL_RESULT` is due.
    Approved,
    /// A call an earlier run showed, which this run answers without running it (denied, or
    /// cancelled by a new message): its `TOOL_CALL_RESULT` is due.
    NotApproved,
}

impl CallState {
    /// Whether the call's arguments are open: `TOOL_CALL_START` sent, `TOOL_CALL_END` due.
    fn arguments_open(self) -> bool {
        matches!(self, Self::Open | Self::Streaming)
    }

    /// How far the call is shown, for an event that reuses its id.
    fn shown(self) -> crate::Shown {
        match self {
            Self::Answered => crate::Shown::Answered,
            Self::Running | Self::Refused => crate::Shown::Started,
            Self::Open | Self::Streaming => crate::Shown::Streaming,
            Self::AwaitingApproval => crate::Shown::AwaitingApproval,
            Self::Approved | Self::NotApproved => crate::Shown::Earlier,
        }
    }
}

/// Turns one run's [`AiEvent`]s into AG-UI events.
///
/// ```
/// use ai_core::{AiEvent, DoneReason};
/// use wire_ui::agui::{AguiEvent, Translator};
/// let mut t = Translator::new("t1", "r1");
/// let mut out = t.start();
/// out.extend(t.push(&AiEvent::TextDelta { delta: "Hi".into() })?);
/// out.extend(t.push(&AiEvent::Done { reason: DoneReason::Stop })?);
/// assert!(matches!(out.first(), Some(AguiEvent::RunStarted { .. })));
/// assert!(matches!(out.last(), Some(AguiEvent::RunFinished { .. })));
/// assert!(t.is_finished());
/// # Ok::<(), wire_ui::ReusedCallId>(())
/// ```
#[derive(Debug)]
pub struct Translator {
    thread_id: String,
    run_id: String,
    step: Option<String>,
    step_number: u32,
    /// The current step's assistant message id (the tool calls' parent).
    message_id: String,
    text_segments: u32,
    open_text: Option<String>,
    /// The run's tool calls in the order they appeared (a run has few).
    calls: Vec<(ToolCallId, CallState)>,
    /// The calls that wait for approval, as interrupts for `RUN_FINISHED`.
    interrupts: Vec<Interrupt>,
    error: Option<String>,
    /// The server cut the stream while the run goes on ([`Translator::cut`]).
    cut: bool,
    /// `RUN_STARTED` was sent.
    started: bool,
    finished: bool,
}

impl Translator {
    /// A translator for one run of one thread.
    pub fn new(thread_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        let run_id = run_id.into();
        Self {
            thread_id: thread_id.into(),
            message_id: format!("{run_id}-m0"),
            run_id,
            step: None,
            step_number: 0,
            text_segments: 0,
            open_text: None,
            calls: Vec::new(),
            interrupts: Vec::new(),
            error: None,
            cut: false,
            started: false,
            finished: false,
        }
    }

    /// A translator for a run of the thread that continues from interrupts: `calls` were shown,
    /// whole, by an earlier run of the thread, so their results are sent without opening them
    /// again (a second `TOOL_CALL_ARGS` would append to the arguments the client holds). Each
    /// comes with whether the user approved it (`false` for a denied call, or one a new message
    /// cancels). With no calls, it is [`Translator::new`].
    ///
    /// A run that ends before a call's result (its log could not be written, its task died)
    /// still answers it before `RUN_ERROR`, as it answers its own calls: an approved call may
    /// have run, any other never ran. A stream the server cuts ([`Translator::cut`]) answers it
    /// too, saying the run goes on (a call not approved, that it never runs). Left without a
    /// `TOOL_CALL_RESULT`, the client's history would hold a call without an answer.
    ///
    /// A call named twice is one call, answered once: approved if either answer approves it,
    /// so it is never said to have never run when it may have.
    ///
    /// ```
    /// use ai_core::{AiEvent, DoneReason, ToolCallId};
    /// use wire_ui::agui::{AguiEvent, Translator};
    /// let call = ToolCallId::new("call_1").unwrap();
    /// let mut t = Translator::continuing("t1", "r2", [(call, true)]);
    /// let mut out = t.start();
    /// out.extend(t.push(&AiEvent::Done { reason: DoneReason::Error })?);
    /// // The run died before the call's result: it is answered all the same, never started.
    /// assert!(matches!(out[1], AguiEvent::ToolCallResult { .. }));
    /// # Ok::<(), wire_ui::ReusedCallId>(())
    /// ```
    ///
    /// A translator is made continuing, never turned into one once used: the calls of a stream
    /// already under way would be answered as another run's.
    ///
    /// ```compile_fail,E0599
    /// use ai_core::ToolCallId;
    /// use wire_ui::agui::Translator;
    /// let mut t = Translator::new("t1", "r2");
    /// let _ = t.start();
    /// let t = t.continuing(Vec::<(ToolCallId, bool)>::new());
    /// ```
    pub fn continuing(
        thread_id: impl Into<String>,
        run_id: impl Into<String>,
        calls: impl IntoIterator<Item = (ToolCallId, bool)>,
    ) -> Self {
        let mut translator = Self::new(thread_id, run_id);
        for (id, approved) in calls {
            let state = match approved {
                true => CallState::Approved,
                false => CallState::NotApproved,
            };
            match translator.calls.iter_mut().find(|(known, _)| *known == id) {
                Some((_, known)) if *known == CallState::NotApproved => *known = state,
                Some(_) => {}
                None => translator.calls.push((id, state)),
            }
        }
        translator
    }

    /// The first event: `RUN_STARTED`. It is sent once: a later call returns nothing, and a
    /// [`Translator::push`] or [`Translator::cut`] made before any `start` sends it first, so the
    /// stream opens with it, once, however the translator is driven (a second one, while the
    /// run is active, is refused by `@ag-ui/client`).
    pub fn start(&mut self) -> Vec<AguiEvent> {
        let mut out = Vec::new();
        self.begin(&mut out);
        out
    }

    /// Sends `RUN_STARTED` unless it was sent.
    fn begin(&mut self, out: &mut Vec<AguiEvent>) {
        if !std::mem::replace(&mut self.started, true) {
            out.push(AguiEvent::RunStarted {
                thread_id: self.thread_id.clone(),
                run_id: self.run_id.clone(),
            });
        }
    }

    /// Ends the stream of a run that goes on without it: the server cut it for a client that
    /// fell too far behind. The calls the stream leaves without a result are answered with what
    /// is true of a cut stream, never that the run ended: their result was not sent and the run
    /// goes on, its thread holding the result once it ends (a call the runner refused, or one
    /// the user denied, is told it never runs). Then `RUN_ERROR` carries `message`, the
    /// cut's reason. After the terminal event, nothing more is produced.
    pub fn cut(&mut self, message: impl Into<String>) -> Vec<AguiEvent> {
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

    /// Whether the terminal event (`RUN_FINISHED` or `RUN_ERROR`) has been produced.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The AG-UI events for one runtime event (often none or one), after `RUN_STARTED` if it
    /// was not sent. After the terminal event, nothing more is produced.
    ///
    /// # Errors
    ///
    /// [`ReusedCallId`](crate::ReusedCallId) for an event that names a tool call this stream
    /// has answered (its `TOOL_CALL_RESULT` sent), that starts one it has started, or that brings
    /// arguments to one whose arguments it has closed (see
    /// [`ReusedCallId`](crate::ReusedCallId)): a call's result is its last word, and a call is
    /// shown once, so the event is dropped, nothing is produced, and the stream stays valid.
    pub fn push(&mut self, event: &AiEvent) -> Result<Vec<AguiEvent>, crate::ReusedCallId> {
        let mut out = Vec::new();
        if self.finished {
            return Ok(out);
        }
        // No call is answered before `RUN_STARTED`: refusing here drops nothing it would send.
        crate::reused_call_id(event, |id| self.state(id).map(CallState::shown))?;
        self.begin(&mut out);
        match event {
            AiEvent::StepStarted { step } => {
                self.close_text(&mut out);
                self.close_step(&mut out);
                let name = format!("step {step}");
                self.step_number = *step;
                self.message_id = format!("{}-m{step}", self.run_id);
                self.text_segments = 0;
                self.step = Some(name.clone());
                out.push(AguiEvent::StepStarted { step_name: name });
            }
            AiEvent::TextDelta { delta } if !delta.is_empty() => {
                let message_id = self.open_text(&mut out);
                out.push(AguiEvent::TextMessageContent {
                    message_id,
                    delta: delta.clone(),
                });
            }
            AiEvent::ToolCallStreamStart {
                tool_call_id,
                tool_name,
            } => {
                self.close_text(&mut out);
                if self.state(tool_call_id).is_none() {
                    self.open_call(tool_call_id, tool_name, &mut out);
                }
            }
            AiEvent::ToolCallArgsDelta {
                tool_call_id,
                delta,
            } if !delta.is_empty()
                && self
                    .state(tool_call_id)
                    .is_some_and(CallState::arguments_open) =>
            {
                self.send_args(tool_call_id, delta.clone(), &mut out);
            }
            AiEvent::ToolCallStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                self.close_text(&mut out);
                if self.state(tool_call_id).is_none() {
                    // Not streamed (a non-streaming endpoint): the whole call at once.
                    self.open_call(tool_call_id, tool_name, &mut out);
                }
                // Its arguments, unless a fragment of them was shown (or they were closed).
                if let Some(args) = args {
                    self.show_args_if_none(tool_call_id, args, &mut out);
                }
                // Without arguments the runner refused the call before running it (or it is a
                // call an earlier run showed, or one waiting for approval, answered without
                // running): its result follows at once. Its arguments are complete all the same,
                // so it ends here, and a run that ends first answers it as a call that was
                // refused, not as one whose arguments were cut short nor as one that may have
                // run. A call shown before keeps its state, which says why it never ran.
                if args.is_some() {
                    self.end_call(tool_call_id, CallState::Running, &mut out);
                } else if self
                    .state(tool_call_id)
                    .is_some_and(CallState::arguments_open)
                {
                    self.end_call(tool_call_id, CallState::Refused, &mut out);
                }
            }
            AiEvent::ApprovalRequired {
                tool_call_id,
                tool_id,
                args,
                ..
            } => {
                self.close_text(&mut out);
                if self.state(tool_call_id).is_none() {
                    self.open_call(tool_call_id, tool_id.as_str(), &mut out);
                }
                self.show_args_if_none(tool_call_id, args, &mut out);
                self.end_call(tool_call_id, CallState::AwaitingApproval, &mut out);
                // A call asked about again is one interrupt, the latest.
                self.interrupts
                    .retain(|i| i.tool_call_id != tool_call_id.as_str());
                self.interrupts.push(Interrupt {
                    id: tool_call_id.as_str().to_owned(),
                    reason: "tool_approval".into(),
                    message: format!("Allow this call of {tool_id}?"),
                    tool_call_id: tool_call_id.as_str().to_owned(),
                    response_schema: serde_json::json!({
                        "type": "object",
                        "properties": {
                            "approved": {"type": "boolean"},
                            "reason": {"type": "string"}
                        },
                        "required": ["approved"],
                        "additionalProperties": false
                    }),
                });
            }
            AiEvent::ToolCallResult {
                tool_call_id,
                tool_name,
                outcome,
            } => {
                self.close_text(&mut out);
                if self.state(tool_call_id).is_none() {
                    self.open_call(tool_call_id, tool_name, &mut out);
                }
                self.end_call(tool_call_id, CallState::Answered, &mut out);
                out.push(AguiEvent::ToolCallResult {
                    message_id: format!("{}-result-{}", self.run_id, tool_call_id.as_str()),
                    tool_call_id: tool_call_id.as_str().to_owned(),
                    content: outcome.model_content(),
                    role: "tool".into(),
                });
            }
            AiEvent::Error { message } => self.error = Some(message.clone()),
            AiEvent::Done { reason } => self.finish(*reason, &mut out),
            // Retries, usage and empty fragments have no AG-UI event of their own.
            _ => {}
        }
        Ok(out)
    }

    fn open_text(&mut self, out: &mut Vec<AguiEvent>) -> String {
        if let Some(id) = &self.open_text {
            return id.clone();
        }
        // The step's first text segment is the tool calls' parent message; a later segment
        // of the same step (text after calls) gets an id of its own.
        let id = match self.text_segments {
            0 => self.message_id.clone(),
            n => format!("{}-{n}", self.message_id),
        };
        self.text_segments += 1;
        out.push(AguiEvent::TextMessageStart {
            message_id: id.clone(),
            role: "assistant".into(),
        });
        self.open_text = Some(id.clone());
        id
    }

    fn close_text(&mut self, out: &mut Vec<AguiEvent>) {
        if let Some(message_id) = self.open_text.take() {
            out.push(AguiEvent::TextMessageEnd { message_id });
        }
    }

    fn close_step(&mut self, out: &mut Vec<AguiEvent>) {
        if let Some(step_name) = self.step.take() {
            out.push(AguiEvent::StepFinished { step_name });
        }
    }

    fn state(&self, id: &ToolCallId) -> Option<CallState> {
        self.calls.iter().find(|(c, _)| c == id).map(|(_, s)| *s)
    }

    fn open_call(&mut self, id: &ToolCallId, name: &str, out: &mut Vec<AguiEvent>) {
        self.calls.push((id.clone(), CallState::Open));
        out.push(AguiEvent::ToolCallStart {
            tool_call_id: id.as_str().to_owned(),
            tool_call_name: name.to_owned(),
            parent_message_id: Some(self.message_id.clone()),
        });
    }

    /// Sends a fragment of the open call's arguments (`TOOL_CALL_ARGS`). Whitespace alone
    /// leaves the call [`CallState::Open`]: the decoder runs a call whose arguments are only
    /// whitespace with `{}`, which may follow it and still read as JSON.
    fn send_args(&mut self, id: &ToolCallId, delta: String, out: &mut Vec<AguiEvent>) {
        if let Some((_, state)) = self.calls.iter_mut().find(|(c, _)| c == id)
            && !delta.trim().is_empty()
        {
            *state = CallState::Streaming;
        }
        out.push(AguiEvent::ToolCallArgs {
            tool_call_id: id.as_str().to_owned(),
            delta,
        });
    }

    /// Sends `args` as the call's arguments when its `TOOL_CALL_START` was sent and no
    /// fragment of them yet (whitespace aside): a call not streamed, or one whose arguments came
    /// in no fragment (a server that sends them only with the finished call, or only whitespace
    /// for a call without parameters). The client assembles a call's arguments from
    /// `TOOL_CALL_ARGS` alone, so it would hold the call with none. Once a fragment was sent,
    /// nothing is: `TOOL_CALL_ARGS` appends, and cannot replace what streamed.
    fn show_args_if_none(&mut self, id: &ToolCallId, args: &Value, out: &mut Vec<AguiEvent>) {
        if self.state(id) == Some(CallState::Open) {
            self.send_args(id, args.to_string(), out);
        }
    }

    /// Ends the call's arguments (`TOOL_CALL_END`, if they are still open) and moves it to `to`.
    fn end_call(&mut self, id: &ToolCallId, to: CallState, out: &mut Vec<AguiEvent>) {
        if let Some((_, state)) = self.calls.iter_mut().find(|(c, _)| c == id) {
            if state.arguments_open() {
                out.push(AguiEvent::ToolCallEnd {
                    tool_call_id: id.as_str().to_owned(),
                });
            }
            *state = to;
        }
    }

    /// Ends every call whose arguments are still streaming: nothing more comes for it and it
    /// never ran (the runner takes only complete calls). `TOOL_CALL_END` closes it, as
    /// `RUN_FINISHED` requires, and a `TOOL_CALL_RESULT` says it never ran, so the client's
    /// history holds no call without an answer (which a next run's model would refuse) and the
    /// client does not take it for one left for it to run (`@ag-ui/client` counts a call
    /// without a result as pending when the run finishes). A call that started to run (its
    /// start came with arguments) and got no result (the run's task died) is answered too,
    /// saying the tool may have run, one the runner refused whose result had not come, saying
    /// it was refused and never ran, and so is
    /// one waiting for approval in a run that ends without pausing, saying it never ran, and one
    /// an earlier run showed that this run continues (see [`Translator::continuing`]). A stream
    /// the server cut ([`Translator::cut`]) says instead that the run goes on.
    fn end_unfinished_calls(&mut self, reason: DoneReason, out: &mut Vec<AguiEvent>) {
        let cut = self.cut;
        for (id, state) in &mut self.calls {
            let ended = match *state {
                CallState::Open | CallState::Streaming => {
                    out.push(AguiEvent::ToolCallEnd {
                        tool_call_id: id.as_str().to_owned(),
                    });
                    crate::UNFINISHED_CALL
                }
                // Started, never answered: only a run that died (its task, or its log) leaves
                // one; the loop answers every call it starts.
                CallState::Running => crate::UNANSWERED_CALL,
                // Refused, its result not yet sent: it never ran, its arguments were complete.
                CallState::Refused => crate::REFUSED_CALL,
                CallState::AwaitingApproval if reason != DoneReason::AwaitingApproval => {
                    crate::UNAPPROVED_CALL
                }
                // Answered by the user in an earlier run's pause, with no result yet: the run
                // ended before it got to the call. A call not approved never runs; an approved
                // one may have run.
                CallState::Approved => crate::UNANSWERED_CALL,
                CallState::NotApproved => crate::UNRECORDED_DENIAL,
                CallState::AwaitingApproval | CallState::Answered => continue,
            };
            // A cut stream's run goes on: what it does with the call is not known here, unless
            // the call never runs.
            let message = match *state {
                _ if !cut => ended,
                CallState::Refused => crate::CUT_REFUSED_CALL,
                CallState::NotApproved => crate::CUT_DENIAL,
                _ => crate::CUT_CALL,
            };
            *state = CallState::Answered;
            out.push(AguiEvent::ToolCallResult {
                message_id: format!("{}-result-{}", self.run_id, id.as_str()),
                tool_call_id: id.as_str().to_owned(),
                content: serde_json::json!({"error": {"message": message}}).to_string(),
                role: "tool".into(),
            });
        }
    }

    fn finish(&mut self, reason: DoneReason, out: &mut Vec<AguiEvent>) {
        self.finished = true;
        // Nothing more comes for an open text message: it ends here, whatever the reason, so a
        // client does not keep showing it as streaming after `RUN_ERROR` (the step stays open
        // then: RUN_ERROR ends the run and all in it) and `RUN_FINISHED` may follow.
        self.close_text(out);
        // A call whose arguments still stream ends here, whatever the reason: `RUN_ERROR` may
        // leave it open by the protocol, but the client's history would keep it unanswered.
        self.end_unfinished_calls(reason, out);
        if reason == DoneReason::Error {
            let message = self.error.take().unwrap_or_else(|| "the run failed".into());
            out.push(AguiEvent::RunError {
                message,
                code: Some("error".into()),
            });
            return;
        }
        // Every other end is a finished run, an answer the provider cut off too (its text is
        // what the model wrote; it is no failure), and a cancelled one (stopped, not failed):
        // AG-UI has no finish reason of its own, so `result` says why (`{"reason": "length"}`,
        // `"content_filter"`, `"other"`, `"cancelled"`); `outcome` is left out (success) but for
        // a pause or a cancel.
        self.close_step(out);
        // A run paused for approval says what it waits for; a new run whose `resume` answers
        // every interrupt continues it. A call answered since it was asked about waits for
        // nothing: the client would hold an interrupt no answer can resolve.
        let mut interrupts = std::mem::take(&mut self.interrupts);
        interrupts.retain(|i| {
            self.calls.iter().any(|(id, state)| {
                id.as_str() == i.tool_call_id && *state == CallState::AwaitingApproval
            })
        });
        let outcome = match reason {
            DoneReason::AwaitingApproval if !interrupts.is_empty() => {
                Some(RunOutcome::Interrupt { interrupts })
            }
            DoneReason::Cancelled => Some(RunOutcome::Cancelled),
            _ => None,
        };
        out.push(AguiEvent::RunFinished {
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            result: Some(serde_json::json!({ "reason": reason })),
            outcome,
        });
    }
}

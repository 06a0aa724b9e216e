//! The loop as a pure reducer: `(AgentState, AgentEvent) -> (AgentState, Vec<Intent>)`.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;

use serde::{Deserialize, Deserializer, Serialize};

use ai_core::{
    AssistantToolCall, DoneReason, FinishReason, HistoryError, LlmCompletion, LlmToolCall, Message,
    ToolCallId, ToolErrorCode, ToolExecResult, ToolFailure, ToolOutcome, validate_history,
};

/// Where a thread's loop stands. Non-exhaustive: a later revision of the loop may add a phase,
/// and code outside this crate only reads phases (to show a thread's status, say).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Phase {
    /// No run in progress.
    Idle,
    /// A model call is out.
    AwaitingModel,
    /// The turn's tool calls are out (or some of them, after approvals).
    AwaitingTools {
        /// Every call of the turn, in the model's order.
        calls: Vec<LlmToolCall>,
        /// Answers already known (calls that never run, denials, results from before an
        /// approval pause).
        #[serde(default)]
        answered: Vec<ToolExecResult>,
    },
    /// Some calls of the turn wait for a human's decision; the run has ended.
    AwaitingApproval {
        /// Every call of the turn, in the model's order.
        calls: Vec<LlmToolCall>,
        /// Answers already known.
        answered: Vec<ToolExecResult>,
        /// The calls waiting, with the hash an approval must name.
        pending: Vec<PendingApproval>,
    },
    /// The last run ended.
    Finished {
        /// Why.
        reason: DoneReason,
    },
}

/// A thread's loop state: the history and where the current run stands. Serde data, so it can
/// be saved and resumed between any two events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentState {
    messages: Vec<Message>,
    phase: Phase,
    /// Model calls that asked for tools in the current run.
    steps: u32,
    #[serde(deserialize_with = "step_limit")]
    max_steps: NonZeroU32,
}

/// Reads a saved state's step limit. A state saved before the limit was a [`NonZeroU32`] may
/// hold 0, which let one step's tools run, as 1 did: it reads as 1, so such a thread still loads
/// and keeps its behaviour.
fn step_limit<'de, D: Deserializer<'de>>(deserializer: D) -> Result<NonZeroU32, D::Error> {
    let saved = u32::deserialize(deserializer)?;
    Ok(NonZeroU32::new(saved).unwrap_or(NonZeroU32::MIN))
}

impl AgentState {
    /// A new thread, optionally starting from a system prompt, allowing `max_steps` model calls
    /// with tool calls per run (at least one: the limit is checked once a step's tools ran).
    ///
    /// For [`reduce`] alone: an [`crate::Agent`] runs every state under its own
    /// [`crate::AgentConfig::max_steps`], and [`crate::Agent::new_state`] starts a thread with
    /// the agent's system prompt, which this one does not know.
    pub fn new(system: Option<String>, max_steps: NonZeroU32) -> Self {
        Self {
            messages: system
                .map(|content| vec![Message::System { content }])
                .unwrap_or_default(),
            phase: Phase::Idle,
            steps: 0,
            max_steps,
        }
    }

    /// Applies the agent's step limit (a saved thread carries the one it was saved under).
    pub(crate) fn set_max_steps(&mut self, max_steps: NonZeroU32) {
        self.max_steps = max_steps;
    }

    /// A thread that continues an existing history (one rebuilt with
    /// [`crate::reconstruct_history`], say), refused if it breaks [`validate_history`]'s rules
    /// as its next model call reads it. That call leaves out the messages without content (a
    /// user message without text, an assistant message with neither text nor calls, which an
    /// older build's thread may hold), as it does for a saved thread: such a history is taken
    /// as a saved thread is loaded, and heals at its next model call. The error names the
    /// message at fault by its place in `messages`.
    pub fn from_history(
        messages: Vec<Message>,
        max_steps: NonZeroU32,
    ) -> Result<Self, HistoryError> {
        check_as_read(&messages)?;
        Ok(Self {
            messages,
            phase: Phase::Idle,
            steps: 0,
            max_steps,
        })
    }

    /// This thread with its history replaced by `messages` (e.g. a turn repaired after a
    /// crash), idle, under the same step limit; refused if `messages` break the rules, read as
    /// [`AgentState::from_history`] reads them (a message without content heals at the next
    /// model call).
    pub fn with_history(&self, messages: Vec<Message>) -> Result<Self, HistoryError> {
        Self::from_history(messages, self.max_steps)
    }

    /// The thread's history.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Where the loop stands.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }
}

/// A call waiting for approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The call.
    pub tool_call_id: ToolCallId,
    /// SHA-256 of its tool's id, its connection (for a tool that needs one) and canonical
    /// arguments (the runner's `args_hash`); an approval must name it.
    pub args_hash: String,
}

/// A human's decision on one call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    /// The call decided on.
    pub tool_call_id: ToolCallId,
    /// Approve (true) or deny (false).
    pub approved: bool,
    /// The arguments hash the human was shown; an approval for another hash is a denial.
    pub args_hash: String,
    /// The human's words on a denial (ai 6's `addToolApprovalResponse` `reason`, AG-UI's
    /// `payload.reason`), passed on to the model with it so it need not guess why; ignored on
    /// an approval. The model sees at most [`MAX_DENIAL_REASON_CHARS`] characters of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The most characters of a denial's [`ApprovalDecision::reason`] the model is shown.
pub const MAX_DENIAL_REASON_CHARS: usize = 500;

/// What happened, fed to the reducer. Non-exhaustive: a later revision of the loop may learn
/// of more happenings; callers build events, and only this crate's reducer must read them all.
///
/// A user message and approval decisions start a run; the other events belong to the run that
/// is out. One that arrives when no run is in progress (none began, or the last one ended,
/// paused for approval included) changes nothing and asks for nothing: it came too late, a run
/// finishes once, and a pause is settled only by its decisions or the next user message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// The user's next message starts a run. A message without text (none, or whitespace
    /// only) is refused: the run ends with an error, nothing is recorded, and the state is kept
    /// as it was.
    UserMessage {
        /// The text.
        content: String,
    },
    /// The model call resolved. A call whose id an earlier call of the thread (or of the same
    /// turn) already holds, as SGLang's `"0"`/`"1"` on every turn, is given a fresh id derived
    /// from it (see [`reduce`]).
    ModelCompleted {
        /// The decoder's assembled completion.
        completion: LlmCompletion,
    },
    /// The model call failed.
    ModelFailed {
        /// A safe message.
        message: String,
        /// The text the model had streamed before it failed (shown to the user already): kept in
        /// the history as its answer unless blank, as crash recovery rebuilds a turn from the
        /// text it recorded. Absent in events from before it existed: none.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        partial_text: String,
    },
    /// The tool calls of the last turn ended.
    ToolResults {
        /// At most one result per call that is out (any order; matched by id). A result for any
        /// other call ends the run with an error; a call without one is answered cancelled.
        results: Vec<ToolExecResult>,
        /// The run was cancelled while they ran: the results are recorded, the calls without
        /// one (those waiting for approval) are answered cancelled, and the run ends
        /// `cancelled`, whatever the step limit says.
        #[serde(default)]
        cancelled: bool,
    },
    /// Decisions on calls waiting for approval; resumes the thread. Decisions that do not fit
    /// the pause (one names a call the thread does not wait for: a stale resume, a mistyped
    /// id; or two decide one call) are refused whole: the run ends with an error and decides
    /// nothing, and the state is kept as it was, its calls still waiting. So are decisions for
    /// a thread that waits for no approval (none of its runs paused, its pause was settled, or
    /// a run of it is out): the state is kept as it was, its phase included.
    ApprovalDecisions {
        /// The decisions, at most one per waiting call (a call without one is denied, and so is
        /// one approved with another hash than its own).
        decisions: Vec<ApprovalDecision>,
    },
    /// The run was cancelled. When no run is in progress (none began, or the last one finished
    /// or paused for approval) it changes nothing and asks for nothing, as any event of a run: it
    /// came too late to stop anything.
    Cancel {
        /// The text the model had streamed when a model call was cancelled (shown to the user
        /// already): kept in the history as its answer unless blank, as for
        /// [`AgentEvent::ModelFailed`]; ignored when no model call is out. Absent in events
        /// from before it existed: none.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        partial_text: String,
    },
}

/// What the driver must do next. Exhaustive on purpose: a driver that let an intent it does not
/// know fall through a catch-all arm would leave the run waiting for ever, so a new intent must
/// break every driver's build instead.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Intent {
    /// Call the model with this history (it passed `validate_history`).
    CallModel {
        /// The history to send.
        messages: Vec<Message>,
    },
    /// Run these calls (only from the assembled completion, never one cut short), in the model's
    /// order, under the ids the history holds.
    RunTools {
        /// The calls.
        calls: Vec<LlmToolCall>,
        /// Approvals to hand the runner, which checks them again (policy and hash).
        #[serde(default)]
        approvals: Vec<PendingApproval>,
    },
    /// Show how these calls were answered without a result of their own: without running (the
    /// model's turn was cut short or filtered, the decisions denied them, or they were cancelled
    /// while they waited for approval, by the run's cancel or by the next user message), or as
    /// calls that may have run, their results lost (the next user message answers so the calls
    /// a run left out when it ended before saving their results: [`lost_result`]). A
    /// `ToolCallStart` without arguments and a `ToolCallResult` each, as for any call refused
    /// before it runs, so a client that showed the calls sees their fate. The history holds the
    /// answers already.
    ShowAnswers {
        /// Each call's tool name as the model sent it, and its answer.
        answers: Vec<(String, ToolExecResult)>,
    },
    /// End the run until a human decides on these calls.
    AwaitApproval {
        /// The calls waiting.
        pending: Vec<PendingApproval>,
    },
    /// End the run. The state's phase is then [`Phase::Finished`], but after approval
    /// decisions refused for not fitting the thread (for a pause, which still waits for them, or
    /// for a thread that waits for none) and after a user message without text (the thread is
    /// kept as it was in both).
    Finish {
        /// Why.
        reason: DoneReason,
        /// A safe message when the run failed.
        error: Option<String>,
    },
}

/// The cancelled result of a call that never got one.
pub(crate) fn cancelled_result(id: &ToolCallId) -> ToolExecResult {
    ToolExecResult::error(
        id.clone(),
        ToolFailure::new(
            ToolErrorCode::Cancelled,
            "the run was cancelled before the tool call finished",
        ),
    )
}

/// The `interrupted` answer to a call that was out with the runner when its thread was last
/// saved, and that no later save answered: the run running it ended before its result was saved
/// (its closing save failed, or its task or process died), so it may have run, its result lost.
/// The next user message answers such a call so; so may a caller that rebuilds a turn whose
/// call's result it cannot find (crash recovery). The message names neither the call nor its
/// arguments.
pub fn lost_result(id: &ToolCallId) -> ToolExecResult {
    ToolExecResult::error(
        id.clone(),
        ToolFailure::new(
            ToolErrorCode::Interrupted,
            "the run running this call ended before its result was saved: it may have run and \
             its result is lost; check before calling it again",
        ),
    )
}

fn finish(
    mut state: AgentState,
    reason: DoneReason,
    error: Option<String>,
) -> (AgentState, Vec<Intent>) {
    state.phase = Phase::Finished { reason };
    (state, vec![Intent::Finish { reason, error }])
}

/// What a run whose user message holds no text ends with.
const NO_TEXT: &str = "the user message holds no text (none, or whitespace only): nothing was \
                       recorded, and the thread is as it was";

fn call_model(mut state: AgentState) -> (AgentState, Vec<Intent>) {
    drop_empty_messages(&mut state.messages);
    heal_tool_names(&mut state.messages);
    if let Err(error) = validate_history(&state.messages) {
        return finish(
            state,
            DoneReason::Error,
            Some(format!("invalid history: {error}")),
        );
    }
    state.phase = Phase::AwaitingModel;
    let messages = state.messages.clone();
    (state, vec![Intent::CallModel { messages }])
}

/// A turn's known answers by call id (the first, should a saved state hold two for one call), so
/// that recording a turn of many calls costs each call one lookup, not a scan of the answers.
fn by_call(answered: Vec<ToolExecResult>) -> HashMap<ToolCallId, ToolExecResult> {
    let mut by_call = HashMap::with_capacity(answered.len());
    for result in answered {
        by_call.entry(result.tool_call_id.clone()).or_insert(result);
    }
    by_call
}

/// The answer message for `id`: its known result, else `unknown`'s answer.
fn answer(
    id: &ToolCallId,
    answered: &mut HashMap<ToolCallId, ToolExecResult>,
    unknown: impl FnOnce(&ToolCallId) -> ToolExecResult,
) -> Message {
    let result = answered.remove(id).unwrap_or_else(|| unknown(id));
    Message::Tool {
        tool_call_id: id.clone(),
        content: result.model_content(),
    }
}

/// How [`close_pending`] answers the calls of a turn out with the runner that have no result.
#[derive(Clone, Copy)]
enum Out {
    /// Cancelled: the run running them ends now, and ends each itself (its runner shows the
    /// result, the driver the calls it stopped before running them).
    Cancelled,
    /// Lost ([`lost_result`]): the run that ran them ended before saving their results (its
    /// closing save failed, its process died). Nothing will show them ended, so they are shown.
    Lost,
}

/// Answers every call of an open turn, so the history stays valid: its known result, else
/// `out`'s answer for a call out with the runner (the turn's tools were out), else cancelled (it
/// waited for approval). Returns the intent that shows the answers no event will otherwise show,
/// if any: those of the calls that waited for approval (shown only by their approval requests)
/// and those of calls a lost run left out (see [`Out::Lost`]).
fn close_pending(state: &mut AgentState, out: Out) -> Option<Intent> {
    let (calls, answered, waiting, unknown, lost): (_, _, _, fn(&_) -> _, _) =
        match std::mem::replace(&mut state.phase, Phase::Idle) {
            Phase::AwaitingTools { calls, answered } => match out {
                Out::Cancelled => (calls, answered, Vec::new(), cancelled_result, false),
                Out::Lost => (calls, answered, Vec::new(), lost_result, true),
            },
            Phase::AwaitingApproval {
                calls,
                answered,
                pending,
            } => (calls, answered, pending, cancelled_result, false),
            other => {
                state.phase = other;
                return None;
            }
        };
    let waiting: HashSet<&ToolCallId> = waiting.iter().map(|p| &p.tool_call_id).collect();
    let mut answered = by_call(answered);
    let mut shown = Vec::new();
    for call in &calls {
        let message = answer(&call.id, &mut answered, |id| {
            let result = unknown(id);
            if lost || waiting.contains(id) {
                shown.push((call.name.clone(), result.clone()));
            }
            result
        });
        state.messages.push(message);
    }
    (!shown.is_empty()).then_some(Intent::ShowAnswers { answers: shown })
}

/// Ends the run for `reason` after closing the open turn (see [`close_pending`]: the calls out
/// with the runner that have no result are answered cancelled), showing the answers of the
/// calls that waited for approval before the finish.
fn close_and_finish(
    mut state: AgentState,
    reason: DoneReason,
    error: Option<String>,
) -> (AgentState, Vec<Intent>) {
    let shown = close_pending(&mut state, Out::Cancelled);
    let (state, intents) = finish(state, reason, error);
    (state, shown.into_iter().chain(intents).collect())
}

/// Records the text a model call that failed or was cancelled had streamed, as the assistant's
/// answer, when that call is the one out and the text is not blank (whitespace is no text, as
/// for a completed turn). The user saw it, and crash recovery rebuilds a turn from the text its
/// events hold, so both keep the same history. Calls the model had begun are not kept: none ran.
fn keep_partial_text(state: &mut AgentState, text: String) {
    if state.phase == Phase::AwaitingModel && !text.trim().is_empty() {
        state.messages.push(Message::Assistant {
            content: text,
            tool_calls: Vec::new(),
        });
    }
}

/// An event of the run in progress that its phase was not waiting for (`what`) ends the run
/// with an error naming both; the calls still open are answered first (their known results,
/// else cancelled), so the history stays valid.
fn out_of_phase(state: AgentState, what: &str) -> (AgentState, Vec<Intent>) {
    let phase = match state.phase {
        Phase::AwaitingModel => "a model call was out",
        Phase::AwaitingTools { .. } => "the turn's tool calls were out",
        // Not reached: `reduce` takes no event of a run while none is in progress.
        Phase::Idle | Phase::AwaitingApproval { .. } | Phase::Finished { .. } => {
            "no run was in progress"
        }
    };
    let error = format!("unexpected {what} while {phase}");
    close_and_finish(state, DoneReason::Error, Some(error))
}

/// What makes `decisions` not fit a pause that waits for `pending`, if anything: a decision
/// naming a call the thread does not wait for (a stale resume for an earlier pause, or a
/// mistyped id), or a call decided more than once (ambiguous at best: an approval and a denial,
/// or approvals of two argument hashes). Named by the decision's position, never its id (the
/// caller's text).
fn mismatched_decisions(
    pending: &[PendingApproval],
    decisions: &[ApprovalDecision],
) -> Option<String> {
    let mut decided: HashSet<&ToolCallId> = HashSet::new();
    decisions.iter().enumerate().find_map(|(at, d)| {
        if !pending.iter().any(|p| p.tool_call_id == d.tool_call_id) {
            Some(format!(
                "decisions[{at}] names a call this thread does not wait for"
            ))
        } else if !decided.insert(&d.tool_call_id) {
            Some(format!(
                "decisions[{at}] decides a call that an earlier decision decided: each call \
                 is decided once, not more than once"
            ))
        } else {
            None
        }
    })
}

/// Whether `event` starts a run (a user message, approval decisions) rather than belonging to
/// one that is out: the reducer takes an event of a run only while a run is in progress.
fn starts_run(event: &AgentEvent) -> bool {
    match event {
        AgentEvent::UserMessage { .. } | AgentEvent::ApprovalDecisions { .. } => true,
        AgentEvent::ModelCompleted { .. }
        | AgentEvent::ModelFailed { .. }
        | AgentEvent::ToolResults { .. }
        | AgentEvent::Cancel { .. } => false,
    }
}

/// What a run whose approval decisions came for a thread that waits for none ends with.
const NOT_PAUSED: &str = "approval decisions arrived, but this thread waits for no approval \
                          (no run of it paused for one, or its pause was settled): nothing was \
                          decided, and the thread is as it was";

/// Why [`reduce`] refuses `event` for `state` without changing anything, if it does: a user
/// message without text (nothing for a model to answer, and a message providers refuse), or
/// approval decisions for a thread that waits for none (no run of it paused, its pause is
/// settled, or a run of it is out) or that do not fit its pause. The driver asks first, so that
/// a refused run leaves the state exactly as given, its step limit included.
pub(crate) fn refusal(state: &AgentState, event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::UserMessage { content } if content.trim().is_empty() => Some(NO_TEXT.into()),
        AgentEvent::ApprovalDecisions { decisions } => match &state.phase {
            Phase::AwaitingApproval { pending, .. } => mismatched_decisions(pending, decisions)
                .map(|what| {
                    format!(
                        "the approval decisions do not fit the calls waiting: {what}; nothing \
                         was decided, and the calls still wait"
                    )
                }),
            _ => Some(NOT_PAUSED.into()),
        },
        _ => None,
    }
}

/// Ends a run whose first event is refused (see [`refusal`]), deciding nothing: the state is
/// kept as it was (calls waiting for approval still wait, so a resume with the right decisions
/// can follow).
fn refuse(state: AgentState, error: String) -> (AgentState, Vec<Intent>) {
    let intent = Intent::Finish {
        reason: DoneReason::Error,
        error: Some(error),
    };
    (state, vec![intent])
}

/// A denial fed back to the model for a call that was not approved.
fn denied(id: &ToolCallId, why: &str) -> ToolExecResult {
    ToolExecResult::error(
        id.clone(),
        ToolFailure::new(ToolErrorCode::PolicyDenied, why),
    )
}

/// What the model is told of a call the user denied, with the reason they gave (trimmed, at
/// most [`MAX_DENIAL_REASON_CHARS`] characters) if any. For a UI that rebuilds a history with
/// denied calls, so the model reads them as the loop words them.
pub fn denial_message(reason: Option<&str>) -> String {
    match reason.map(str::trim).filter(|reason| !reason.is_empty()) {
        Some(reason) => {
            let end = reason
                .char_indices()
                .nth(MAX_DENIAL_REASON_CHARS)
                .map_or(reason.len(), |(at, _)| at);
            format!("the user denied this call: {}", &reason[..end])
        }
        None => "the user denied this call".to_owned(),
    }
}

/// The most tool calls of one model turn that run; the calls after them are answered without
/// running. (The chat and Responses decoders stop at 128 calls by default; other ports may not.)
pub(crate) const MAX_CALLS_PER_TURN: usize = 128;

/// Why the call at position `at` of a completion whose finish reason [`answered`] reads as `cut`
/// must never run, if it must not: the provider stopped the turn early (its output limit or its
/// content filter, under any name that means one), or the decoder marked the call cut short (such
/// arguments may be a fragment of what the model meant), or the turn already has
/// [`MAX_CALLS_PER_TURN`] calls before it. The answer names the output limit only when the turn
/// ended for it; a call cut short otherwise (the server aborted the request, as vLLM's `abort`
/// says) is told the model's answer ended early.
fn never_runs(at: usize, call: &LlmToolCall, cut: DoneReason) -> Option<&'static str> {
    match cut {
        DoneReason::ContentFilter => Some(
            "the provider's content filter stopped the model's turn, so the tool call was not run",
        ),
        DoneReason::Length => {
            Some("the tool call was cut short (the model hit its output limit) and was not run")
        }
        // Not the output limit: the server aborted the request (vLLM's `abort`), or the decoder
        // marked the call cut short in a turn that said it ended.
        _ if !call.complete => {
            Some("the tool call was cut short (the model's answer ended early) and was not run")
        }
        _ if at >= MAX_CALLS_PER_TURN => Some(
            "the model asked for more tool calls in one turn than may run, so this one was not run",
        ),
        _ => None,
    }
}

/// Why a run ends whose last model turn, ending for `finish`, asked for no tools: the provider
/// cut it off (its output limit, or its content filter), so the answer is incomplete; it ended on
/// its own (`stop`, or `tool_calls` with no call left); or it ended for a reason the provider
/// named but this crate does not know (vLLM's `abort`, say), which may have cut the answer too,
/// so it is never reported as a complete one.
///
/// Servers and gateways that pass their backend's own names through are read as the names mean
/// (the aliases LiteLLM's `map_finish_reason` knows, in any case): TGI's `eos_token`, `eos`, and
/// Anthropic's `end_turn` and `stop_sequence` are a natural end; Anthropic's and Gemini's
/// `max_tokens` the output limit; Gemini's `safety` and `recitation` and Anthropic's `refusal`
/// the content filter. So are the names ai-core parses (`stop`, `tool_calls`, `length`,
/// `content_filter`) in another case, as Gemini's `STOP` passed through.
fn answered(finish: &FinishReason) -> DoneReason {
    match finish {
        FinishReason::Stop | FinishReason::ToolCalls => DoneReason::Stop,
        FinishReason::Length => DoneReason::Length,
        FinishReason::ContentFilter => DoneReason::ContentFilter,
        FinishReason::Other(name) => match name.to_ascii_lowercase().as_str() {
            "stop" | "tool_calls" | "function_call" | "eos_token" | "eos" | "end_turn"
            | "stop_sequence" | "tool_use" => DoneReason::Stop,
            "length" | "max_tokens" => DoneReason::Length,
            "content_filter" | "safety" | "recitation" | "refusal" => DoneReason::ContentFilter,
            _ => DoneReason::Other,
        },
        // A reason ai-core names after this was written: not known here, so never a complete
        // answer.
        _ => DoneReason::Other,
    }
}

/// Goes on with a turn: shows `shown` (answers given without running, already in `answered`),
/// then runs `to_run` under `approvals`, or settles the turn when nothing is left to run (ending
/// the run for `at_limit` if the turn took the last step: see [`settle`]).
fn run_or_settle(
    mut state: AgentState,
    calls: Vec<LlmToolCall>,
    answered: Vec<ToolExecResult>,
    shown: Vec<(String, ToolExecResult)>,
    to_run: Vec<LlmToolCall>,
    approvals: Vec<PendingApproval>,
    at_limit: DoneReason,
) -> (AgentState, Vec<Intent>) {
    let shown = (!shown.is_empty()).then_some(Intent::ShowAnswers { answers: shown });
    let (state, intents) = if to_run.is_empty() {
        settle(state, calls, answered, at_limit)
    } else {
        state.phase = Phase::AwaitingTools { calls, answered };
        let intent = Intent::RunTools {
            calls: to_run,
            approvals,
        };
        (state, vec![intent])
    };
    (state, shown.into_iter().chain(intents).collect())
}

/// All answers of the turn are known: record them in call order and go on, or end the run for
/// `at_limit` when the turn took the last step the run may take (`max_steps`, unless the turn
/// was cut off and none of its calls ran: then the cut is why the run ends).
fn settle(
    mut state: AgentState,
    calls: Vec<LlmToolCall>,
    answered: Vec<ToolExecResult>,
    at_limit: DoneReason,
) -> (AgentState, Vec<Intent>) {
    let mut answered = by_call(answered);
    for call in &calls {
        let message = answer(&call.id, &mut answered, cancelled_result);
        state.messages.push(message);
    }
    if state.steps >= state.max_steps.get() {
        finish(state, at_limit, None)
    } else {
        call_model(state)
    }
}

/// The longest id a [`ToolCallId`] holds, in characters.
const TOOL_CALL_ID_MAX_CHARS: usize = 128;

/// The ids a thread's calls hold, from which each new call claims a free one (see
/// [`CallIds::claim`]): the rule by which the reducer renames a call whose id is taken, for
/// whoever rebuilds a turn from its events (crash recovery) to record its calls as the loop
/// would.
pub struct CallIds {
    taken: HashSet<ToolCallId>,
    /// For each id renamed so far, the suffix its next rename tries first: every lower one is
    /// held, and ids are only ever added, so the search never tries a candidate twice and a
    /// turn that repeats one id costs work in proportion to its calls, not to their square.
    next: HashMap<ToolCallId, u64>,
    /// How many candidate ids claims tried, for tests that bound the work.
    #[cfg(test)]
    tried: usize,
}

impl CallIds {
    /// The ids of every tool call the assistant messages of `messages` made.
    pub fn of(messages: &[Message]) -> Self {
        let taken = messages
            .iter()
            .filter_map(|message| match message {
                Message::Assistant { tool_calls, .. } => Some(tool_calls),
                _ => None,
            })
            .flatten()
            .map(|call| call.id.clone())
            .collect();
        Self {
            taken,
            next: HashMap::new(),
            #[cfg(test)]
            tried: 0,
        }
    }

    /// These ids taken too: ids no call of the thread holds, which a new call must not take
    /// all the same (the driver's, of streamed calls a run answered without running them).
    pub(crate) fn holding<'a>(mut self, ids: impl IntoIterator<Item = &'a ToolCallId>) -> Self {
        self.taken.extend(ids.into_iter().cloned());
        self
    }

    /// The id a call the model named `id` goes by, now taken: `id` itself when no earlier call
    /// holds it, else the first of `{id}_2`, `{id}_3`, … that none holds (`id` cut short so
    /// that the result keeps within 128 characters). The same history and calls always get the
    /// same ids.
    pub fn claim(&mut self, id: &ToolCallId) -> ToolCallId {
        if self.taken.insert(id.clone()) {
            return id.clone();
        }
        let next = self.next.entry(id.clone()).or_insert(2);
        loop {
            let n = *next;
            *next += 1;
            #[cfg(test)]
            {
                self.tried += 1;
            }
            let suffix = format!("_{n}");
            let keep = TOOL_CALL_ID_MAX_CHARS - suffix.len();
            let mut fresh: String = id.as_str().chars().take(keep).collect();
            fresh.push_str(&suffix);
            if let Ok(fresh) = ToolCallId::new(fresh)
                && self.taken.insert(fresh.clone())
            {
                return fresh;
            }
        }
    }
}

/// Leaves out every assistant message with neither text (whitespace is none) nor calls, and
/// every user or system message without text, which [`validate_history`] refuses (as Anthropic
/// does). The loop records none, but a thread an older build saved may hold one (an assistant
/// turn without content, a library caller's empty user message, an empty system prompt), and
/// every later model call of it would be refused: it heals at its next model call, and is saved
/// healed. An agent whose system prompt is empty gets it left out the same way. Such a message
/// answers nothing and is answered by nothing, so leaving it out breaks no pairing.
fn drop_empty_messages(messages: &mut Vec<Message>) {
    messages.retain(|message| !is_empty_message(message));
}

/// Checks `messages` as the next model call reads them (see [`drop_empty_messages`]), naming a
/// fault by its message's place in `messages`, not in the list left once those are left out.
fn check_as_read(messages: &[Message]) -> Result<(), HistoryError> {
    if !messages.iter().any(is_empty_message) {
        return validate_history(messages);
    }
    // Where each message the model call reads stands in `messages`.
    let read: Vec<usize> = (0..messages.len())
        .filter(|&at| !is_empty_message(&messages[at]))
        .collect();
    let healed: Vec<Message> = read.iter().map(|&at| messages[at].clone()).collect();
    validate_history(&healed).map_err(|error| error.renumbered(|at| read[at]))
}

/// Whether [`drop_empty_messages`] leaves `message` out: an assistant message with neither text
/// nor calls, or a user or system message without text.
fn is_empty_message(message: &Message) -> bool {
    match message {
        Message::Assistant {
            content,
            tool_calls,
        } => tool_calls.is_empty() && content.trim().is_empty(),
        Message::User { content } | Message::System { content } => content.trim().is_empty(),
        Message::Tool { .. } => false,
    }
}

/// Records in the form providers accept every tool name of the history that they would refuse
/// (see [`recorded_name`]). The loop records names so, but a thread an older build saved may
/// hold one (GPT-4o's `multi_tool_use.parallel`), and every later model call of it
/// would be refused: it heals at its next model call, and is saved healed.
fn heal_tool_names(messages: &mut [Message]) {
    for message in messages {
        if let Message::Assistant { tool_calls, .. } = message {
            for call in tool_calls.iter_mut().filter(|c| !accepted_name(&c.name)) {
                call.name = recorded_name(&call.name);
            }
        }
    }
}

/// The longest function name providers accept.
const TOOL_NAME_MAX_CHARS: usize = 64;

/// A call's tool name as the history records it: unchanged when providers accept it back
/// (`^[a-zA-Z0-9_-]{1,64}$`), else each other character replaced by `_` and cut to 64 characters
/// (`_` when empty). A model can send a name its own provider then refuses to read (GPT-4o's
/// `multi_tool_use.parallel`), which would fail every later model call of the thread; no tool
/// has such a name, so the call is refused whatever the history says.
pub(crate) fn recorded_name(name: &str) -> String {
    if accepted_name(name) {
        return name.to_owned();
    }
    let safe: String = name
        .chars()
        .take(TOOL_NAME_MAX_CHARS)
        .map(|c| if accepted_char(c) { c } else { '_' })
        .collect();
    if safe.is_empty() { "_".into() } else { safe }
}

/// Whether providers accept `name` back as a function name: `^[a-zA-Z0-9_-]{1,64}$`.
fn accepted_name(name: &str) -> bool {
    (1..=TOOL_NAME_MAX_CHARS).contains(&name.len()) && name.chars().all(accepted_char)
}

fn accepted_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The loop's logic. Pure and deterministic: no IO, no clock, no async.
///
/// Call ids are unique across a thread's history (as [`validate_history`] requires), but some
/// endpoints repeat them: SGLang sends `"0"`/`"1"` on every turn, and a decoder's synthesized ids
/// can recur. A call whose id is already taken, by an earlier turn or an earlier call of the same
/// turn, is renamed before it is recorded or run, to the first free id of `{id}_2`, `{id}_3`, …;
/// it runs, is shown and is answered to the provider under that id. The renaming depends only on
/// the history and the completion, so a replay gets the same ids. Likewise a tool name providers
/// refuse to read back is recorded in a form they accept (see `recorded_name`); the call keeps
/// the name the model sent for the runner, which refuses it, and for the events.
///
/// ```
/// use std::num::NonZeroU32;
/// use graph::{AgentEvent, AgentState, Intent, reduce};
/// let limit = NonZeroU32::new(10).unwrap();
/// let (state, intents) = reduce(
///     AgentState::new(None, limit),
///     AgentEvent::UserMessage { content: "hi".into() },
/// );
/// assert!(matches!(&intents[..], [Intent::CallModel { messages }] if messages.len() == 1));
/// assert_eq!(state.messages().len(), 1);
/// ```
pub fn reduce(mut state: AgentState, event: AgentEvent) -> (AgentState, Vec<Intent>) {
    if let Some(error) = refusal(&state, &event) {
        return refuse(state, error);
    }
    // No run is in progress (none began, or the last one ended, paused for approval included):
    // an event of a run comes too late to change anything, and must not finish a run twice, nor
    // settle a pause that waits for decisions.
    if !starts_run(&event)
        && matches!(
            state.phase,
            Phase::Idle | Phase::AwaitingApproval { .. } | Phase::Finished { .. }
        )
    {
        return (state, Vec::new());
    }
    match event {
        AgentEvent::UserMessage { content } => {
            // Calls still waiting for approval are cancelled by the new message; this run shows
            // their answers, as the run that decides them would. Calls out with the runner are
            // in a thread saved past its pause whose run never saved its end (its closing save
            // failed, its process died): they may have run, their results lost, and this run
            // shows those answers too, since nothing else will.
            let shown = close_pending(&mut state, Out::Lost);
            state.messages.push(Message::User { content });
            state.steps = 0;
            let (state, intents) = call_model(state);
            (state, shown.into_iter().chain(intents).collect())
        }
        AgentEvent::ModelCompleted { completion } => {
            if state.phase != Phase::AwaitingModel {
                return out_of_phase(state, "model result");
            }
            let mut calls = completion.tool_calls;
            let mut ids = CallIds::of(&state.messages);
            for call in &mut calls {
                call.id = ids.claim(&call.id);
            }
            // Whitespace is no text, and a turn with neither text nor calls is not recorded: an
            // assistant message without content is one Anthropic refuses (but last), so behind a
            // proxy it would fail every later turn of the thread.
            let text = match completion.text.trim() {
                "" => String::new(),
                _ => completion.text,
            };
            if text.is_empty() && calls.is_empty() {
                return finish(state, answered(&completion.finish_reason), None);
            }
            state.messages.push(Message::Assistant {
                content: text,
                tool_calls: calls
                    .iter()
                    .map(|c| AssistantToolCall {
                        id: c.id.clone(),
                        name: recorded_name(&c.name),
                        arguments: c.arguments.clone(),
                        provider_fields: c.provider_fields.clone(),
                    })
                    .collect(),
            });
            if calls.is_empty() {
                return finish(state, answered(&completion.finish_reason), None);
            }
            // Saturating: a saved state is data, and may already stand at the limit.
            state.steps = state.steps.saturating_add(1);
            let mut shown = Vec::new();
            let mut to_run = Vec::new();
            let cut = answered(&completion.finish_reason);
            for (at, call) in calls.iter().enumerate() {
                match never_runs(at, call, cut) {
                    Some(why) => {
                        let failure = ToolFailure::new(ToolErrorCode::Validation, why);
                        let answer = ToolExecResult::error(call.id.clone(), failure);
                        shown.push((call.name.clone(), answer));
                    }
                    None => to_run.push(call.clone()),
                }
            }
            let answered = shown.iter().map(|(_, answer)| answer.clone()).collect();
            // A turn the provider cut off (or whose every call was cut short) runs none of its
            // calls: if it took the last step, the cut, not the step limit, is why the run
            // ends, as it is for a cut turn without calls. Calls cut short in a turn that names
            // no cut (vLLM's `abort`, or a turn that says it ended) ended early for a reason the
            // loop does not know: `other`, never `length`, which would claim the output limit.
            let at_limit = match cut {
                DoneReason::Length | DoneReason::ContentFilter => cut,
                _ if to_run.is_empty() && calls.iter().all(|call| !call.complete) => {
                    DoneReason::Other
                }
                _ => DoneReason::MaxSteps,
            };
            run_or_settle(state, calls, answered, shown, to_run, Vec::new(), at_limit)
        }
        AgentEvent::ToolResults { results, cancelled } => {
            let (calls, mut answered) = match std::mem::replace(&mut state.phase, Phase::Idle) {
                Phase::AwaitingTools { calls, answered } => (calls, answered),
                other => {
                    state.phase = other;
                    return out_of_phase(state, "tool results");
                }
            };
            let mut pending: Vec<PendingApproval> = Vec::new();
            let mut stray = None;
            for result in results {
                let id = &result.tool_call_id;
                let open = calls.iter().any(|call| &call.id == id)
                    && !answered.iter().any(|known| &known.tool_call_id == id)
                    && !pending.iter().any(|waiting| &waiting.tool_call_id == id);
                if !open {
                    stray.get_or_insert_with(|| id.clone());
                    continue;
                }
                match result.outcome {
                    ToolOutcome::ApprovalRequired { args_hash } => pending.push(PendingApproval {
                        tool_call_id: result.tool_call_id,
                        args_hash,
                    }),
                    _ => answered.push(result),
                }
            }
            if let Some(id) = stray {
                // The results that did answer open calls are kept; the rest are cancelled.
                state.phase = Phase::AwaitingApproval {
                    calls,
                    answered,
                    pending,
                };
                let error = format!(
                    "unexpected tool result for call {id} while the turn's tool calls were out: \
                     that call was not waiting for one"
                );
                return close_and_finish(state, DoneReason::Error, Some(error));
            }
            if cancelled {
                // The calls that asked for approval are answered cancelled, and shown so.
                state.phase = Phase::AwaitingApproval {
                    calls,
                    answered,
                    pending,
                };
                return close_and_finish(state, DoneReason::Cancelled, None);
            }
            if pending.is_empty() {
                return settle(state, calls, answered, DoneReason::MaxSteps);
            }
            state.phase = Phase::AwaitingApproval {
                calls,
                answered,
                pending: pending.clone(),
            };
            (state, vec![Intent::AwaitApproval { pending }])
        }
        AgentEvent::ApprovalDecisions { decisions } => {
            let (calls, mut answered, pending) =
                match std::mem::replace(&mut state.phase, Phase::Idle) {
                    Phase::AwaitingApproval {
                        calls,
                        answered,
                        pending,
                    } => (calls, answered, pending),
                    other => {
                        // Refused above (`refusal`); kept so that no phase can slip through.
                        state.phase = other;
                        return refuse(state, NOT_PAUSED.into());
                    }
                };
            let mut approved = Vec::new();
            let mut denials = Vec::new();
            for waiting in pending {
                let id = &waiting.tool_call_id;
                // At most one decision names the call (more were refused above); it must
                // approve the call with its hash, or the call is denied.
                let decision = decisions.iter().find(|d| &d.tool_call_id == id);
                let why = match decision {
                    None => "no decision was made on this call, so it was not run".to_owned(),
                    Some(d) if !d.approved => denial_message(d.reason.as_deref()),
                    Some(d) if d.args_hash != waiting.args_hash => {
                        "the approval was for another tool or other arguments, so the call was not run"
                            .to_owned()
                    }
                    Some(_) => {
                        approved.push(waiting);
                        continue;
                    }
                };
                let name = calls
                    .iter()
                    .find(|call| &call.id == id)
                    .map_or_else(String::new, |call| call.name.clone());
                denials.push((name, denied(id, &why)));
            }
            answered.extend(denials.iter().map(|(_, result)| result.clone()));
            let to_run = calls
                .iter()
                .filter(|c| approved.iter().any(|a| a.tool_call_id == c.id))
                .cloned()
                .collect();
            run_or_settle(
                state,
                calls,
                answered,
                denials,
                to_run,
                approved,
                DoneReason::MaxSteps,
            )
        }
        AgentEvent::ModelFailed {
            message,
            partial_text,
        } => {
            keep_partial_text(&mut state, partial_text);
            close_and_finish(state, DoneReason::Error, Some(message))
        }
        AgentEvent::Cancel { partial_text } => {
            keep_partial_text(&mut state, partial_text);
            close_and_finish(state, DoneReason::Cancelled, None)
        }
    }
}

#[cfg(test)]
mod tests;

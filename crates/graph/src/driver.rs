//! The driver: carries the reducer's intents out through the ports, one run at a time.

use std::collections::{HashSet, VecDeque};
use std::num::{NonZeroU32, NonZeroUsize};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;

use ai_core::{
    AiEvent, CancellationToken, CompletionDelta, CompletionError, CompletionPort, DoneReason,
    EventSink, GraphRef, LlmCaller, LlmRequest, LlmToolCall, RunContext, ThreadId, ThreadStore,
    ThreadStoreError, ToolCall, ToolCallId, ToolCatalog, ToolChoice, ToolErrorCode, ToolExecResult,
    ToolFailure, ToolOutcome, ToolRunner,
};
use serde::Deserialize;
use serde_json::Value;

use crate::bounded::run_bounded;
use crate::reducer::{CallIds, MAX_CALLS_PER_TURN};
use crate::{AgentEvent, AgentState, Intent, reduce};

/// Loop settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentConfig {
    /// Model calls with tool calls allowed per run before it ends as `max_steps` (default 10;
    /// a cut turn whose calls never ran ends for its cut instead).
    /// At least one: the limit is checked once a step's tools ran, so no run could keep to 0.
    pub max_steps: NonZeroU32,
    /// Tool calls of one turn run at once (default 4). At least one: no call could run under 0.
    pub max_parallel_tools: NonZeroUsize,
    /// The system prompt of new threads.
    pub system_prompt: Option<String>,
    /// The graph every model request names (`LlmCaller::graph`), for billing and telemetry
    /// (default `cogni.agent` at this crate's version).
    pub graph: GraphRef,
    /// Whether the model may ask for several tool calls in one turn, sent as
    /// [`ai_core::LlmRequest::parallel_tool_calls`]. `None` leaves it to the wire encoder
    /// (cogni-wire-openai sends `false` when a tool is in OpenAI's strict form, and otherwise
    /// the endpoint's default holds).
    pub parallel_tool_calls: Option<bool>,
}

/// [`AgentConfig::max_steps`] unless set.
const DEFAULT_MAX_STEPS: NonZeroU32 = NonZeroU32::new(10).unwrap();

/// [`AgentConfig::max_parallel_tools`] unless set.
const DEFAULT_MAX_PARALLEL_TOOLS: NonZeroUsize = NonZeroUsize::new(4).unwrap();

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_steps: DEFAULT_MAX_STEPS,
            max_parallel_tools: DEFAULT_MAX_PARALLEL_TOOLS,
            system_prompt: None,
            graph: GraphRef {
                name: "cogni.agent".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            parallel_tool_calls: None,
        }
    }
}

impl AgentConfig {
    /// Sets `max_steps`: model calls with tool calls allowed per run, at least one.
    ///
    /// ```
    /// use std::num::{NonZeroU32, NonZeroUsize};
    /// let config = graph::AgentConfig::default().with_max_steps(NonZeroU32::new(3).unwrap());
    /// assert_eq!(config.max_steps.get(), 3);
    /// ```
    ///
    /// A limit of 0 cannot be written:
    ///
    /// ```compile_fail,E0308
    /// let config = graph::AgentConfig::default().with_max_steps(0);
    /// ```
    pub fn with_max_steps(mut self, max_steps: NonZeroU32) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// Sets `max_parallel_tools`: tool calls of one turn run at once, at least one.
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// let config = graph::AgentConfig::default().with_max_parallel_tools(NonZeroUsize::MIN);
    /// assert_eq!(config.max_parallel_tools.get(), 1);
    /// ```
    ///
    /// A limit of 0, under which no call could run, cannot be written:
    ///
    /// ```compile_fail,E0308
    /// let config = graph::AgentConfig::default().with_max_parallel_tools(0);
    /// ```
    pub fn with_max_parallel_tools(mut self, n: NonZeroUsize) -> Self {
        self.max_parallel_tools = n;
        self
    }

    /// Sets the system prompt of new threads.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Names the graph model requests are made for: an app that runs its own agent with this
    /// loop bills and traces it under its own name and version.
    pub fn with_graph(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.graph = GraphRef {
            name: name.into(),
            version: version.into(),
        };
        self
    }

    /// Allows or forbids several tool calls in one turn (`parallel_tool_calls` on the wire).
    pub fn with_parallel_tool_calls(mut self, allowed: bool) -> Self {
        self.parallel_tool_calls = Some(allowed);
        self
    }
}

/// Why a thread could not be run. Each message names the thread (but for
/// [`GraphError::NoRuntime`], which concerns no thread) and what failed, and never quotes the
/// thread's state (the conversation).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The thread store failed to load or to save the thread. The store's error is part of the
    /// message (which a run's `Error` event carries), so it is not also its `source()`: a chain
    /// printed whole shows it once.
    #[error("cannot {action} thread {thread}: {error}")]
    Store {
        /// The thread.
        thread: String,
        /// What the store was asked to do: `load` or `save`.
        action: &'static str,
        /// The store's error.
        error: ThreadStoreError,
    },
    /// The stored state is not a loop state (the reason never quotes the state).
    #[error("thread {thread} holds an unreadable state: {reason}")]
    State {
        /// The thread.
        thread: String,
        /// What is wrong.
        reason: String,
    },
    /// The user message holds no text (none, or whitespace only): nothing was run, and the
    /// thread was neither loaded nor saved.
    #[error(
        "thread {thread}: the user message holds no text (none, or whitespace only), so nothing was run"
    )]
    EmptyUserMessage {
        /// The thread.
        thread: String,
    },
    /// The run is polled outside a Tokio runtime with the time driver enabled, which the tool
    /// runner needs: nothing was run, and the thread was neither loaded nor saved.
    #[error("thread {thread}: {NO_TIMERS}")]
    NoTimeDriver {
        /// The thread.
        thread: String,
    },
    /// [`Agent::spawn`] was called outside a Tokio runtime, so it had nowhere to spawn the run's
    /// task: nothing was run. It names no thread, since a spawned run has none.
    #[error(
        "Agent::spawn was called outside a Tokio runtime, so the run was not started: call it \
         from inside one (within `#[tokio::main]`, or `Runtime::enter`)"
    )]
    NoRuntime,
    /// The run was cancelled while the thread store was loading the thread, before the store
    /// answered: the load was abandoned (a load only reads), nothing was run, and the thread
    /// was not saved.
    #[error(
        "thread {thread}: the run was cancelled while the thread store was loading the thread, \
         so nothing was run and the thread is as it was"
    )]
    CancelledWhileLoading {
        /// The thread.
        thread: String,
    },
    /// A state of the thread (the one the run ended with, or a resume's past its pause, before
    /// anything ran) could not be written as JSON, so it was not saved (the reason never quotes
    /// the state).
    #[error("the state of thread {thread} cannot be written as JSON: {reason}")]
    Unsaved {
        /// The thread.
        thread: String,
        /// What is wrong.
        reason: String,
    },
}

/// The async driver of the loop.
///
/// Its runs must be driven inside a Tokio runtime with the time driver enabled, as the
/// [`ToolRunner`] it runs tools through needs (each attempt runs under `tokio::time`):
/// `#[tokio::main]` and `#[tokio::test]` enable it, a runtime built by hand needs
/// `enable_time()` (or `enable_all()`). A run polled without it (or outside Tokio) is refused
/// before the model is called: it ends with an `Error` naming what is missing and
/// `Done { reason: error }`, and returns the state it was given ([`Agent::run_thread`]:
/// [`GraphError::NoTimeDriver`]). (The check makes Tokio panic once and catches it, so the
/// process's panic hook reports Tokio's own message; a build with `panic = "abort"` skips it,
/// as it could not catch it.) [`Agent::spawn`] also needs to be called inside the runtime, to
/// spawn its task: outside one it returns [`GraphError::NoRuntime`].
#[derive(Clone)]
pub struct Agent {
    completion: Arc<dyn CompletionPort>,
    runner: ToolRunner,
    config: AgentConfig,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// One model call of a run: its step, the history it sends, and the ids of the streamed calls
/// the run ended without running them, which it adds to.
struct ModelCall<'a> {
    step: u32,
    messages: Vec<ai_core::Message>,
    ended: &'a mut HashSet<ToolCallId>,
}

/// What a call announced while it streamed is answered when the model's completed answer does
/// not hold it under the id it streamed with (see [`StreamedCalls::end_unheld`]).
const UNHELD_CALL: &str = "the model's completed answer does not hold this call as it streamed \
                           (its id changed or it was left out), so it never ran under this id";

/// The tool calls a model call streams, each announced once its id and name are known, with the
/// argument text that came before sent right after the announcement.
///
/// The id announced is the one the call will run under: ids are claimed in the completion's
/// order against those the history holds and those of the streamed calls the run ended unheld,
/// as the completion's calls claim theirs (a repeated id renamed the same way), so a call's id
/// is claimed only once every call before it has its. A
/// call whose id comes before an earlier call's waits for it; if that never comes (a server that
/// sent no id, which the decoder synthesizes only at the end), the calls after it are not streamed,
/// and are shown when they run.
struct StreamedCalls {
    calls: Vec<StreamedCall>,
    ids: CallIds,
    /// How many calls, from the first, hold the id they run under.
    claimed: usize,
}

/// One streamed call: its id (as sent, until [`StreamedCalls`] claims the one it runs under),
/// its name, and the argument text kept until it is announced.
#[derive(Default)]
struct StreamedCall {
    id: Option<ToolCallId>,
    name: Option<Arc<str>>,
    announced: bool,
    pending: String,
}

impl StreamedCalls {
    /// No call yet, the ids of the history sent (`ids`) taken.
    fn new(ids: CallIds) -> Self {
        Self {
            calls: Vec::new(),
            ids,
            claimed: 0,
        }
    }

    /// Takes the fragment of the call at `index` (its position in the completion), and
    /// announces what it lets be announced.
    fn push(
        &mut self,
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
        events: &dyn EventSink,
    ) {
        if self.calls.len() <= index {
            self.calls.resize_with(index + 1, StreamedCall::default);
        }
        let call = &mut self.calls[index];
        if call.announced {
            if let Some(id) = &call.id
                && !arguments.is_empty()
            {
                events.emit(AiEvent::ToolCallArgsDelta {
                    tool_call_id: id.clone(),
                    delta: arguments,
                });
            }
            return;
        }
        // An id the decoder could not accept is left unknown: the call still runs (or is
        // refused) from the assembled completion, which the runner reports.
        if call.id.is_none() {
            call.id = id.and_then(|id| ToolCallId::new(id).ok());
        }
        if call.name.is_none() {
            call.name = name.filter(|n| !n.is_empty()).map(Arc::from);
        }
        call.pending.push_str(&arguments);
        let before = self.claimed;
        while let Some(next) = self.calls.get_mut(self.claimed)
            && let Some(sent) = &next.id
        {
            next.id = Some(self.ids.claim(sent));
            self.claimed += 1;
        }
        let newly = before..self.claimed;
        let this = (index < before).then_some(index);
        for at in newly.chain(this) {
            self.calls[at].announce(events);
        }
    }
}

impl StreamedCalls {
    /// Ends each call announced that none of `calls` (the completion's, under the ids they run
    /// by) goes by: the server named its calls otherwise than it streamed them, or left one
    /// out. Its result says it never ran, and no start comes before it, as it is no call the
    /// model made: the history never holds it, so the model is never told of it, and recovery,
    /// which pairs a result with a start before it, takes nothing from it. Its id joins `ended`,
    /// which the run's later calls do not take, so that no later call of the run is shown under
    /// the id of one its UI shows answered.
    fn end_unheld(
        &self,
        calls: &[LlmToolCall],
        ended: &mut HashSet<ToolCallId>,
        events: &SinkPort<'_>,
    ) {
        for call in self.calls.iter().filter(|call| call.announced) {
            let (Some(id), Some(name)) = (&call.id, &call.name) else {
                continue;
            };
            if !calls.iter().any(|held| &held.id == id) {
                ended.insert(id.clone());
                events.show(AiEvent::ToolCallResult {
                    tool_call_id: id.clone(),
                    tool_name: name.clone(),
                    outcome: ToolOutcome::Error(ToolFailure::new(
                        ToolErrorCode::Validation,
                        UNHELD_CALL,
                    )),
                });
            }
        }
    }
}

impl StreamedCall {
    /// Announces the call, with the argument text that came before, once its name is known
    /// (its id is claimed).
    fn announce(&mut self, events: &dyn EventSink) {
        let (Some(id), Some(name)) = (&self.id, &self.name) else {
            return;
        };
        if self.announced {
            return;
        }
        self.announced = true;
        events.emit(AiEvent::ToolCallStreamStart {
            tool_call_id: id.clone(),
            tool_name: name.clone(),
        });
        if !self.pending.is_empty() {
            events.emit(AiEvent::ToolCallArgsDelta {
                tool_call_id: id.clone(),
                delta: std::mem::take(&mut self.pending),
            });
        }
    }
}

impl Agent {
    /// A driver over a model endpoint and a tool runner.
    pub fn new(
        completion: Arc<dyn CompletionPort>,
        runner: ToolRunner,
        config: AgentConfig,
    ) -> Self {
        Self {
            completion,
            runner,
            config,
        }
    }

    /// A new thread's state under this agent's config.
    pub fn new_state(&self) -> AgentState {
        AgentState::new(self.config.system_prompt.clone(), self.config.max_steps)
    }

    /// A thread's state continuing `history` (a client's history rebuilt with
    /// [`crate::reconstruct_history`]); a history that breaks the pairing rules is refused.
    ///
    /// This agent's system prompt goes first, and the history's own system messages (a client's
    /// instructions) follow it: a client can add to the operator's prompt, never replace it. A
    /// history that already starts with exactly this prompt does not get it twice. An error
    /// names the message at fault by its place in `history`.
    pub fn state_from_history(
        &self,
        mut history: Vec<ai_core::Message>,
    ) -> Result<AgentState, ai_core::HistoryError> {
        let prompted = match &self.config.system_prompt {
            Some(content) if !matches!(history.first(), Some(ai_core::Message::System { content: first }) if first == content) =>
            {
                history.insert(
                    0,
                    ai_core::Message::System {
                        content: content.clone(),
                    },
                );
                true
            }
            _ => false,
        };
        AgentState::from_history(history, self.config.max_steps).map_err(|error| match prompted {
            // Never the prompt put first (one with text breaks no rule, one without is left
            // out): a message of `history`, named by its place there.
            true => error.renumbered(|at| at.saturating_sub(1)),
            false => error,
        })
    }

    /// Runs one turn: the user's message, then model and tools until the model stops, the step
    /// limit is hit, the run fails, `cancel` fires or calls wait for approval. Emits exactly one
    /// `Done`, last, and returns the state to save. Its history passes `validate_history` unless
    /// the run paused for approval (`Done { reason: awaiting_approval }`): then the turn's calls
    /// are answered when [`Agent::resume`] decides them, or cancelled by the next user message.
    ///
    /// A message without text (empty, or whitespace only) is refused, as providers refuse it:
    /// the run ends with an `Error` saying so and `Done { reason: error }`, no model is called,
    /// and the state returned is the one given (nothing recorded, calls waiting for approval
    /// still waiting).
    ///
    /// `cancel` ends the run `Done { reason: cancelled }`, with the calls left answered
    /// cancelled. A model call that fails once it has fired (the port answers an error, or
    /// panics, in the very poll in which the token fires: the cancel aborted its request) is
    /// cancelled too, keeping the text streamed, with no `Error`. A port that answers
    /// `Cancelled` though `cancel` has not fired fails its model call instead (an `Error` saying
    /// so, `Done { reason: error }`): nobody asked for that cancel.
    ///
    /// A panic of `events` does not unwind out of the run. On an event the driver emits itself
    /// (a step's start, a completion's usage or added text, an answer it shows) it stops the run
    /// at its next step, as a failed model call does: an `Error` saying the sink panicked, then
    /// `Done { reason: error }` (calls it was about to run are answered cancelled, and shown
    /// ended so; answers it was about to show, of calls that never ran, are shown). A run whose
    /// `cancel` has fired by then ends as the cancel asked, `Done { reason: cancelled }` with no
    /// `Error`: the cancel stops all the sink's panic would, and a cancel comes first, as it
    /// does before a failed model call or a tool's refusal. A run whose next step is its end is
    /// not stopped, since nothing is left to stop: a sink that panics on the usage or text of
    /// the completion that ends the run, or on the answers shown just before its end for calls
    /// that never ran (a turn cut at the step limit, calls a cancel answered), leaves it ending
    /// as it would have (`stop` for an answer, with no `Error`), as one that panics on the run's
    /// `Error` or `Done` does; the run did finish, the history holds the whole answer, and the
    /// sink is the app's. So does a run whose next step is a pause for approval: it pauses, its
    /// calls waiting. On a delta the model port streams, the model call fails (or, the
    /// `cancel` fired by then, is cancelled, keeping the text streamed). On an event the runner
    /// emits for a call, the answer the runner gave stands (else the call fails `execution`),
    /// and the loop goes on.
    pub async fn run(
        &self,
        state: AgentState,
        user_message: String,
        ctx: &RunContext,
        catalog: &ToolCatalog,
        events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> AgentState {
        let event = AgentEvent::UserMessage {
            content: user_message,
        };
        self.drive(state, event, ctx, catalog, events, cancel).await
    }

    /// Runs one turn on a Tokio task and returns its events as a channel (the stream a server
    /// forwards to a client) and the task, which yields the state to save. The stream ends after
    /// the one `Done`. Dropping the receiver does not stop the run; cancel the token for that.
    ///
    /// The task is spawned on the Tokio runtime the caller is in. Called outside one, it spawns
    /// nothing and returns [`GraphError::NoRuntime`] (where `tokio::spawn` would panic): no
    /// event is sent, since there is no channel yet to send it on.
    pub fn spawn(
        &self,
        state: AgentState,
        user_message: String,
        ctx: RunContext,
        catalog: ToolCatalog,
        cancel: CancellationToken,
    ) -> Result<
        (
            tokio::task::JoinHandle<AgentState>,
            tokio::sync::mpsc::UnboundedReceiver<AiEvent>,
        ),
        GraphError,
    > {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| GraphError::NoRuntime)?;
        let (events, receiver) = tokio::sync::mpsc::unbounded_channel();
        let agent = self.clone();
        let task = runtime.spawn(async move {
            let sink = move |event: AiEvent| {
                // A closed receiver means nobody listens any more; the run still completes.
                let _ = events.send(event);
            };
            agent
                .run(state, user_message, &ctx, &catalog, &sink, &cancel)
                .await
        });
        Ok((task, receiver))
    }

    /// Resumes a run that ended awaiting approval: approved calls (with the hash they were
    /// shown) run, the runner checking policy and hash again; anything else is denied and fed
    /// back to the model. Emits exactly one `Done`, last.
    ///
    /// Decisions that do not fit the pause (one names a call the state does not wait for: a
    /// resume meant for an earlier pause, or a mistyped id; or two decide one call) decide
    /// nothing: the run ends with an
    /// `Error` and `Done { reason: error }`, and the state returned is the one given, its calls
    /// still waiting for a resume with the right decisions. So do decisions for a state that
    /// waits for no approval (a new thread, a finished run, a pause already settled by a resume
    /// or the next user message): the state returned is the one given, phase and all.
    pub async fn resume(
        &self,
        state: AgentState,
        decisions: Vec<crate::ApprovalDecision>,
        ctx: &RunContext,
        catalog: &ToolCatalog,
        events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> AgentState {
        let event = AgentEvent::ApprovalDecisions { decisions };
        self.drive(state, event, ctx, catalog, events, cancel).await
    }

    async fn drive(
        &self,
        state: AgentState,
        first: AgentEvent,
        ctx: &RunContext,
        catalog: &ToolCatalog,
        events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> AgentState {
        let events = &SinkPort::new(events);
        if timers_missing() {
            // Refused before anything runs: every tool call would fail in the runner, and the
            // model would be told its tools failed.
            events.show(AiEvent::Error {
                message: NO_TIMERS.into(),
            });
            events.show(AiEvent::Done {
                reason: DoneReason::Error,
            });
            return state;
        }
        let mut state = state;
        // The configured limit holds for every run, a thread saved under another one included;
        // a run the reducer refuses (nothing decided, nothing recorded) leaves the state exactly
        // as given, so that `drive_thread` does not save it again.
        if crate::reducer::refusal(&state, &first).is_none() {
            state.set_max_steps(self.config.max_steps);
        }
        let mut queue = VecDeque::from([first]);
        let mut done = false;
        let mut step = 0;
        // The latest time the run's invocation records hold, to date a call's record when the
        // clock cannot be read (see `run_tool`).
        let last_time = AtomicU64::new(0);
        // The ids of streamed calls the run answered without running them (see
        // `StreamedCalls::end_unheld`).
        let mut ended = HashSet::new();
        while let Some(event) = queue.pop_front() {
            let (next, intents) = reduce(state, event);
            state = next;
            let mut intents = intents.into_iter();
            while let Some(intent) = intents.next() {
                // Only work left to do is stopped (a model call, tool calls): answers to show
                // and the run's end (a pause for approval included) are shown as they would
                // have been. So a run whose next step is its end ends as it would have, `stop`
                // for an answer, also when the sink panicked on the usage or text of the
                // completion that ends it, or on the answers shown just before that end: the
                // model answered, the history holds it all, and nothing was left to stop. A
                // pause's calls wait, as in any pause, for decisions or the next user message.
                let works = matches!(intent, Intent::CallModel { .. } | Intent::RunTools { .. });
                if !done && works && events.stop_run() {
                    // The app's sink panicked on an event the driver showed: nothing more runs.
                    // The reducer ends the run as for a failed model call (or, the token fired,
                    // as for a cancel: `sink_broke`), answering the calls still open, so the
                    // state stays consistent (and is saved by `drive_thread`). Every call the
                    // intents left hold is shown ended, as any call answered without running
                    // is (a client showed it streamed, or asked for its approval): the answers
                    // they were to show, as the history holds them, and the calls they were to
                    // run, answered cancelled without running. Nothing else they meant to do is
                    // done.
                    for left in std::iter::once(intent).chain(intents.by_ref()) {
                        match left {
                            Intent::ShowAnswers { answers } => {
                                for (tool_name, result) in answers {
                                    events.show_answered(result, tool_name.into());
                                }
                            }
                            Intent::RunTools { calls, .. } => {
                                for call in calls {
                                    let result = crate::reducer::cancelled_result(&call.id);
                                    events.show_answered(result, call.name.as_str().into());
                                }
                            }
                            Intent::CallModel { .. }
                            | Intent::AwaitApproval { .. }
                            | Intent::Finish { .. } => {}
                        }
                    }
                    queue.push_back(sink_broke(cancel));
                    break;
                }
                match intent {
                    Intent::CallModel { messages } => {
                        let event = if cancel.is_cancelled() {
                            AgentEvent::Cancel {
                                partial_text: String::new(),
                            }
                        } else {
                            step += 1;
                            let call = ModelCall {
                                step,
                                messages,
                                ended: &mut ended,
                            };
                            self.call_model(call, ctx, catalog, events, cancel).await
                        };
                        queue.push_back(event);
                    }
                    Intent::RunTools { calls, approvals } => {
                        let approved_ctx;
                        let ctx = if approvals.is_empty() {
                            ctx
                        } else {
                            let mut with = ctx.clone();
                            with.approvals.extend(
                                approvals.into_iter().map(|a| (a.tool_call_id, a.args_hash)),
                            );
                            approved_ctx = with;
                            &approved_ctx
                        };
                        let last_time = &last_time;
                        let runs = calls.iter().map(|call| async move {
                            let call = ToolCall::from(call);
                            self.run_tool(call, ctx, catalog, events, cancel, last_time)
                                .await
                        });
                        let results =
                            run_bounded(runs.collect(), self.config.max_parallel_tools).await;
                        queue.push_back(AgentEvent::ToolResults {
                            results,
                            cancelled: cancel.is_cancelled(),
                        });
                    }
                    Intent::ShowAnswers { answers } => {
                        // As the runner answers a call it refuses before running it: a start
                        // without arguments, then the result.
                        for (tool_name, result) in answers {
                            events.show_answered(result, tool_name.into());
                        }
                    }
                    Intent::AwaitApproval { .. } => {
                        // The runner already emitted one `ApprovalRequired` per waiting call. A
                        // cancel that fired while the tools ran answered them cancelled instead
                        // (`ToolResults::cancelled`); one that fires now finds the run ended.
                        events.show(AiEvent::Done {
                            reason: DoneReason::AwaitingApproval,
                        });
                        done = true;
                    }
                    Intent::Finish { reason, error } => {
                        if let Some(message) = error {
                            events.show(AiEvent::Error { message });
                        }
                        events.show(AiEvent::Done { reason });
                        done = true;
                    }
                }
            }
        }
        if !done {
            // Unreachable by construction (every path of the reducer ends in Finish), kept so
            // that the one-Done promise holds even if that changes.
            events.show(AiEvent::Done {
                reason: DoneReason::Error,
            });
        }
        state
    }

    /// Runs one call through the runner. A panic on the way (in a port the runner awaits for
    /// the call, such as an authorization hook, a connection broker, a tool source or a clock,
    /// or in one of the tool's plain methods the runner asks, such as `spec` or
    /// `requires_connection`: the runner itself turns a panic in the tool's `exec` or its checks
    /// into a failure) fails that call as a tool's panic does, `execution` without the payload, so
    /// one bad port cannot take the run, and its one `Done`, down. The call is shown ended: a start
    /// without arguments unless the runner showed one, then the result. A panic that came once the
    /// runner had passed the call's answer on (its result or its approval request: the app's sink
    /// panicked on it) leaves that answer standing, shown once.
    ///
    /// Such a call is recorded too (unless the runner recorded it before the panic), before its
    /// result is shown, with no arguments and no attempt. Both its times are the time the driver
    /// answered it: the runner's clock, read under the same guard (it may be the port that
    /// panicked), or if that read panics too, the latest time the run's records hold (`0` when
    /// it holds none).
    async fn run_tool(
        &self,
        call: ToolCall,
        ctx: &RunContext,
        catalog: &ToolCatalog,
        events: &SinkPort<'_>,
        cancel: &CancellationToken,
        last_time: &AtomicU64,
    ) -> ToolExecResult {
        let watched = Watched {
            inner: events,
            started: AtomicBool::new(false),
            recorded: AtomicBool::new(false),
            answered: std::sync::Mutex::new(None),
            last_time,
        };
        let run = self.runner.run_tool(&call, ctx, catalog, &watched, cancel);
        if let Some(run) = unless_panics(run).await {
            return run.result;
        }
        let answered = watched
            .answered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(outcome) = answered {
            // The runner had answered the call and passed its answer on when the panic came
            // (the app's sink panicked on it): that answer stands, and is not shown again.
            return ToolExecResult {
                tool_call_id: call.id,
                outcome,
            };
        }
        let failure = ToolFailure::new(
            ToolErrorCode::Execution,
            "the tool call failed unexpectedly (something it needed panicked)",
        );
        if !watched.started.load(Ordering::Relaxed) {
            events.show(AiEvent::ToolCallStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: None,
            });
        }
        if !watched.recorded.load(Ordering::Relaxed) {
            let clock = self.runner.clock();
            let read = || ai_core::port_call("the clock", || clock.now_ms());
            let now = std::panic::catch_unwind(AssertUnwindSafe(read))
                .unwrap_or_else(|_payload| last_time.load(Ordering::Relaxed));
            let record = ai_core::ToolInvocationRecord::failed(&call, failure.clone(), now, now);
            events.contain(|| watched.record(&record));
        }
        let result = ToolExecResult::error(call.id, failure);
        events.show(AiEvent::ToolCallResult {
            tool_call_id: result.tool_call_id.clone(),
            tool_name: call.name,
            outcome: result.outcome.clone(),
        });
        result
    }

    async fn call_model(
        &self,
        call: ModelCall<'_>,
        ctx: &RunContext,
        catalog: &ToolCatalog,
        events: &SinkPort<'_>,
        cancel: &CancellationToken,
    ) -> AgentEvent {
        let ModelCall {
            step,
            messages,
            ended,
        } = call;
        // The ids a new call may not take: those the history holds, and those of streamed calls
        // the run ended without running them. A streamed call is announced under the id it will
        // run by, and the completion's calls claim theirs here, against the same ids, so the
        // reducer, which claims them against the history alone, keeps them as they are.
        let taken = |messages: &[ai_core::Message]| CallIds::of(messages).holding(ended.iter());
        let mut streamed = StreamedCalls::new(taken(&messages));
        let request = LlmRequest {
            caller: LlmCaller {
                run_id: ctx.run_id().clone(),
                graph: Some(self.config.graph.clone()),
            },
            messages,
            tools: catalog.specs().cloned().collect(),
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: self.config.parallel_tool_calls,
        };
        // Deltas are for display only; tool calls are taken from the completion.
        events.show(AiEvent::StepStarted { step });
        if events.stop_run() {
            // The app's sink panicked on the step's start: the model is not called.
            return sink_broke(cancel);
        }
        // The text shown so far: a call that fails or is cancelled keeps it in the history.
        let mut partial_text = String::new();
        // The app's sink as the deltas are shown through it, so that a panic of its own is not
        // taken for the model port's.
        let shown = Unwound {
            inner: events,
            panicked: AtomicBool::new(false),
        };
        let mut deltas = |delta: CompletionDelta| {
            // A port that caught the sink's panic and streams on answers for what follows.
            shown.panicked.store(false, Ordering::Relaxed);
            match delta {
                CompletionDelta::Text { delta } if !delta.is_empty() => {
                    partial_text.push_str(&delta);
                    shown.emit(AiEvent::TextDelta { delta });
                }
                // Display only: a fragment past the calls a turn may run (a port's bug) is not
                // shown, as tracking it would cost memory in proportion to its position; such a
                // call is shown when it is answered.
                CompletionDelta::ToolCall {
                    index,
                    id,
                    name,
                    arguments,
                } if index < MAX_CALLS_PER_TURN => {
                    streamed.push(index, id, name, arguments, &shown);
                }
                _ => {}
            }
        };
        // The port's code is marked as the port's for the panic hook
        // (`ai_core::install_tool_panic_hook`), which keeps its panic messages out of the
        // output; the callback it makes is the driver's own again (but for the event sink it
        // shows the deltas through, a port of its own).
        let mut own_deltas = |delta: CompletionDelta| ai_core::own_code(|| deltas(delta));
        // Called inside the future the guard polls, so that a port that panics before it hands
        // back its future is caught too.
        let call = ai_core::port_future("the model port", async {
            self.completion
                .complete(&request, &mut own_deltas, cancel)
                .await
        });
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => Some(Err(CompletionError::Cancelled)),
            result = unless_panics(call) => result,
        };
        // A call that failed (or panicked) once the run's token fired is the cancel, though the
        // port answered in the very poll in which the token fired (the cancel aborted its request,
        // and it said so as its transport's error): a fired token wins, as it does over a tool's
        // failure and over the sink's panic on an event the driver shows (`sink_broke`).
        if !matches!(result, Some(Ok(_))) && cancel.is_cancelled() {
            return AgentEvent::Cancel { partial_text };
        }
        let Some(result) = result else {
            // The panic unwound out of the app's sink as it showed a delta (the port let it
            // through), or out of the port's own code.
            let message = if shown.panicked.load(Ordering::Relaxed) {
                "the model call was stopped: the event sink panicked while showing what the \
                 model streamed"
            } else {
                "the model call failed unexpectedly (its port panicked)"
            };
            return AgentEvent::ModelFailed {
                message: message.into(),
                partial_text,
            };
        };
        match result {
            Ok(mut completion) => {
                let mut ids = taken(&request.messages);
                for call in &mut completion.tool_calls {
                    call.id = ids.claim(&call.id);
                }
                streamed.end_unheld(&completion.tool_calls, ended, events);
                // What the completion's text adds to the text streamed is shown, so the UI shows
                // what the history holds: all of it for a port that does not stream (a
                // non-streaming API, a cache), the missing end for one that streamed part of it.
                // A text that does not continue what was streamed is recorded as the completion
                // says, and nothing more is shown: no delta can take back what was shown.
                if let Some(rest) = completion.text.strip_prefix(partial_text.as_str())
                    && !rest.is_empty()
                {
                    events.show(AiEvent::TextDelta { delta: rest.into() });
                }
                if let Some(usage) = completion.usage {
                    events.show(AiEvent::Usage { usage });
                }
                // A sink that panicked on either: the completion is recorded, and the run stops
                // at its next step.
                AgentEvent::ModelCompleted { completion }
            }
            // The run's token has not fired (a fired one is taken above): the port cancelled
            // its call on its own, which is its failure, not a cancel the user asked for.
            Err(CompletionError::Cancelled) => AgentEvent::ModelFailed {
                message: CANCELLED_ON_ITS_OWN.into(),
                partial_text,
            },
            Err(error) => AgentEvent::ModelFailed {
                message: error.to_string(),
                partial_text,
            },
        }
    }

    /// Loads the thread (or starts it), runs one turn with only the new user message, and saves
    /// the state. The run's `Done` is emitted once the state is saved, so a turn shown as done is
    /// stored; a thread that cannot be loaded or saved (the store failed, or panicked) ends the
    /// run with an `Error` and `Done { reason: error }`, and the error is returned. So does a
    /// user message without text (empty, or whitespace only), before the thread is loaded:
    /// nothing is run or saved ([`GraphError::EmptyUserMessage`]); and so does a run polled
    /// without Tokio's time driver ([`GraphError::NoTimeDriver`], see [`Agent`]). A run that
    /// pauses for approval is resumed from the store by [`Agent::resume_thread`].
    ///
    /// A run that already failed (its `Error` shown) and whose state then cannot be saved shows
    /// both failures, two `Error`s, the run's then the save's, and one `Done { reason: error }`:
    /// they are two failures, and both are true. (A UI translator that keeps one message per
    /// run, as cogni-wire-ui's do, keeps the last, the save's: the turn is not stored.)
    ///
    /// `cancel` also ends a load the store has not answered yet (a load only reads): the run
    /// ends with an `Error` saying so and `Done { reason: cancelled }`, nothing is run or
    /// saved, and [`GraphError::CancelledWhileLoading`] is returned. A save is never abandoned:
    /// a cancelled run is saved too (the cancel is part of the turn it records), and a save
    /// dropped halfway could leave the thread neither as it was nor as saved, while the run
    /// reported one or the other. So a store that never answers a save holds the run until it
    /// does: bounding its writes (a timeout that fails the save) is the store's to do.
    ///
    /// The state is saved only over the one loaded ([`ThreadStore::save`] is a compare-and-swap):
    /// of two turns run at once on one thread, the one that saves second is refused, its run
    /// ending with an `Error` and `Done { reason: error }` and [`GraphError::Store`] holding
    /// [`ai_core::ThreadStoreError::Changed`]; the other's turn stays. Both still ran, so one
    /// turn per thread at a time is the caller's to ensure: `cogni serve` refuses a second run on
    /// a busy thread.
    #[allow(clippy::too_many_arguments)] // The run's inputs, named.
    pub async fn run_thread(
        &self,
        store: &dyn ThreadStore,
        thread: &ThreadId,
        user_message: String,
        ctx: &RunContext,
        catalog: &ToolCatalog,
        events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<AgentState, GraphError> {
        let events = &SinkPort::new(events);
        if user_message.trim().is_empty() {
            let error = GraphError::EmptyUserMessage {
                thread: thread.as_str().into(),
            };
            return Err(failed(events, error));
        }
        let event = AgentEvent::UserMessage {
            content: user_message,
        };
        self.drive_thread(store, thread, event, ctx, catalog, events, cancel)
            .await
    }

    /// [`Agent::resume`] over a [`ThreadStore`], as [`Agent::run_thread`] runs a turn: loads the
    /// thread a run paused for approval, decides its calls and goes on, and saves the state; the
    /// run's `Done` is emitted once the state is saved. A thread that cannot be loaded or saved,
    /// or a run polled without Tokio's time driver, ends the run with an `Error` and
    /// `Done { reason: error }`, and the error is returned; a cancel ends a load the store has not
    /// answered, and never abandons a save, as for [`Agent::run_thread`].
    ///
    /// Decisions that decide nothing (they do not fit the pause, or the thread waits for no
    /// approval: see [`Agent::resume`]) end the run with an `Error` and `Done { reason: error }`
    /// and leave the thread as stored: it is not saved again, and a thread the store does not
    /// hold is not created.
    ///
    /// Decisions it takes are consumed before any approved call runs: the thread is saved past
    /// its pause first (its calls out), as `cogni serve` does, so a run whose closing save fails,
    /// or whose process dies, cannot be resumed again into running an approved call twice (the
    /// retry finds no pause and decides nothing; the next user message answers the calls the
    /// save left out as calls that may have run, their results lost: [`crate::lost_result`]).
    /// A store that fails that first save fails the run before anything runs: the thread still
    /// waits, and the same decisions can be sent again. That save replaces only the pause it
    /// loaded, so of two resumes of one pause at once exactly one
    /// runs the approved calls: the other's save is refused ([`GraphError::Store`] holding
    /// [`ai_core::ThreadStoreError::Changed`]) and it runs nothing.
    ///
    /// ```no_run
    /// # async fn resume(
    /// #     agent: &graph::Agent,
    /// #     store: &graph::InMemoryThreadStore,
    /// #     ctx: &graph::ai_core::RunContext,
    /// #     catalog: &graph::ai_core::ToolCatalog,
    /// #     events: &dyn graph::ai_core::EventSink,
    /// # ) -> Result<(), Box<dyn std::error::Error>> {
    /// use graph::ai_core::{CancellationToken, ThreadId, ToolCallId};
    /// use graph::ApprovalDecision;
    /// // The hash is the one the run's `ApprovalRequired` event showed the user.
    /// let decisions = vec![ApprovalDecision {
    ///     tool_call_id: ToolCallId::new("call_1")?,
    ///     approved: true,
    ///     args_hash: "…".into(),
    ///     reason: None,
    /// }];
    /// let thread = ThreadId::new("thread-1")?;
    /// let cancel = CancellationToken::new();
    /// agent
    ///     .resume_thread(store, &thread, decisions, ctx, catalog, events, &cancel)
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    #[allow(clippy::too_many_arguments)] // The run's inputs, named.
    pub async fn resume_thread(
        &self,
        store: &dyn ThreadStore,
        thread: &ThreadId,
        decisions: Vec<crate::ApprovalDecision>,
        ctx: &RunContext,
        catalog: &ToolCatalog,
        events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<AgentState, GraphError> {
        let events = &SinkPort::new(events);
        let event = AgentEvent::ApprovalDecisions { decisions };
        self.drive_thread(store, thread, event, ctx, catalog, events, cancel)
            .await
    }

    /// Loads the thread (or starts it), drives one run from `first`, and saves the state unless
    /// the run left it exactly as stored; the run's `Done` is emitted once that is done. Approval
    /// decisions the reducer takes are consumed (saved) before the run (see
    /// [`Agent::resume_thread`]).
    #[allow(clippy::too_many_arguments)] // The run's inputs, named.
    async fn drive_thread(
        &self,
        store: &dyn ThreadStore,
        thread: &ThreadId,
        first: AgentEvent,
        ctx: &RunContext,
        catalog: &ToolCatalog,
        events: &SinkPort<'_>,
        cancel: &CancellationToken,
    ) -> Result<AgentState, GraphError> {
        if timers_missing() {
            let error = GraphError::NoTimeDriver {
                thread: thread.as_str().into(),
            };
            return Err(failed(events, error));
        }
        // Each port method is called inside the future the guard polls (`async { … }`), so a
        // port that panics before it hands back its future (a hand-written impl doing its work up
        // front) is caught and marked as the port's as well.
        let load = async { store.load(thread).await };
        let load = unless_panics(ai_core::port_future(THE_STORE, load));
        // A load is only read: a cancel abandons one that has not answered yet (a store that
        // never answers would hold the run for ever), and nothing changed. A load that answers at
        // once is taken, even under a token that fired already: that run records its message
        // and ends cancelled, as `run` does.
        let loaded = tokio::select! {
            biased;
            loaded = load => loaded.unwrap_or_else(panicked),
            () = cancel.cancelled() => {
                let error = GraphError::CancelledWhileLoading {
                    thread: thread.as_str().into(),
                };
                return Err(cancelled_around(events, error));
            }
        };
        // What the store holds, as it gave it: a save replaces only that (a compare-and-swap), so
        // a turn another caller saved meanwhile refuses this one's save rather than being
        // overwritten.
        let read = match loaded {
            Ok(read) => read,
            Err(error) => {
                let error = GraphError::Store {
                    thread: thread.as_str().into(),
                    action: "load",
                    error,
                };
                return Err(failed(events, error));
            }
        };
        // serde's own message would quote the state (the conversation), which reaches the
        // client and the logs: only what is wrong and where.
        let loaded = match &read {
            Some(saved) => AgentState::deserialize(saved).map_err(|e| GraphError::State {
                thread: thread.as_str().into(),
                reason: ai_core::describe_json_error(&e),
            }),
            None => Ok(self.new_state()),
        };
        let loaded = match loaded {
            Ok(state) => state,
            Err(error) => return Err(failed(events, error)),
        };
        // A resume consumes its approvals durably before any approved call runs: the thread is
        // saved past its pause first, so that a run whose closing save then fails (the calls ran)
        // cannot be retried into running them again; the retry finds no pause. That save is
        // conditional: of two resumes of one pause at once, only the first to save runs the
        // calls; the other's save finds the thread changed, and it runs nothing. Decisions the
        // reducer refuses decide nothing, and nothing is saved for them.
        // What the thread holds, as the loop's state and as saved: the closing save replaces it.
        let (mut stored, mut previous) = (loaded.clone(), read);
        if matches!(first, AgentEvent::ApprovalDecisions { .. })
            && crate::reducer::refusal(&loaded, &first).is_none()
        {
            let mut start = loaded.clone();
            start.set_max_steps(self.config.max_steps);
            let (consumed, _) = reduce(start, first.clone());
            let saved = match save_thread(store, thread, previous.as_ref(), &consumed).await {
                Ok(saved) => saved,
                Err(error) => return Err(failed(events, error)),
            };
            (stored, previous) = (consumed, Some(saved));
        }
        let held = HoldDone {
            inner: events,
            done: std::sync::Mutex::new(None),
        };
        let state = self.drive(loaded, first, ctx, catalog, &held, cancel).await;
        if state != stored {
            // Not raced against `cancel` (see `run_thread`): a cancelled run is saved too, and a
            // save abandoned halfway would leave the thread in a state nobody reported.
            if let Err(error) = save_thread(store, thread, previous.as_ref(), &state).await {
                return Err(failed(events, error));
            }
        }
        if let Some(done) = held.done.into_inner().unwrap_or_else(|e| e.into_inner()) {
            // The thread is saved: a sink that panics on this last event changes nothing.
            events.show(done);
        }
        Ok(state)
    }
}

/// Saves `state` as `thread`'s over `previous` (what the store held, as it gave it) and returns
/// what was saved, never abandoned halfway (see [`Agent::run_thread`]): a store that fails,
/// refuses (the thread changed) or panics, or a state that cannot be written as JSON, is the
/// error naming the thread, which never quotes the state.
async fn save_thread(
    store: &dyn ThreadStore,
    thread: &ThreadId,
    previous: Option<&Value>,
    state: &AgentState,
) -> Result<Value, GraphError> {
    let saved = serde_json::to_value(state).map_err(|e| GraphError::Unsaved {
        thread: thread.as_str().into(),
        reason: ai_core::describe_json_error(&e),
    })?;
    // Called inside the future the guard polls, as the load is (see `drive_thread`).
    let save = async { store.save(thread, previous, &saved).await };
    unless_panics(ai_core::port_future(THE_STORE, save))
        .await
        .unwrap_or_else(panicked)
        .map_err(|error| GraphError::Store {
            thread: thread.as_str().into(),
            action: "save",
            error,
        })?;
    Ok(saved)
}

/// What a run polled without Tokio's time driver ends with.
const NO_TIMERS: &str = "the run is not inside a Tokio runtime with the time driver enabled, \
                         which the tool runner needs: build the runtime with `enable_time()` (or \
                         `enable_all()`); nothing was run";

/// Whether the task polling this lacks what the runner needs to run a tool: a Tokio runtime with
/// its time driver. Tokio says so only by panicking where a timer is made, so one is made (it is
/// never polled, so never registered) and the panic caught; the process's panic hook still
/// reports Tokio's message, which names the fix. Under `panic = "abort"` nothing could catch it:
/// no check is made, and a tool's call panics as it did.
fn timers_missing() -> bool {
    #[cfg(panic = "unwind")]
    {
        let timer = || drop(tokio::time::sleep(std::time::Duration::ZERO));
        std::panic::catch_unwind(timer).is_err()
    }
    #[cfg(not(panic = "unwind"))]
    {
        false
    }
}

/// Awaits `future`, turning a panic while it is polled into `None`, so a port with a bug cannot
/// take the run, and its one `Done`, down. The payload is dropped unread: it may hold anything.
async fn unless_panics<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(poll) => poll.map(Some),
            Err(_payload) => Poll::Ready(None),
        }
    })
    .await
}

/// What a model call fails with whose port answered `Cancelled` though the run was not cancelled.
const CANCELLED_ON_ITS_OWN: &str = "the model call failed: its port said the call was cancelled, \
                                    though the run was not cancelled";

/// What `ai_core::install_tool_panic_hook` calls the thread store.
const THE_STORE: &str = "the thread store";

/// What `ai_core::install_tool_panic_hook` calls the app's event sink.
const THE_EVENT_SINK: &str = "the event sink";

/// The app's event sink, called as the port it is ([`ai_core::port_call`]): a panic in it (an
/// event holds the conversation, a call's arguments and result) is reported by the panic hook
/// as the event sink's, without its message.
///
/// As an [`EventSink`] (the runner's events, and the deltas the model port streams through it)
/// a panic still unwinds, to the code that called it: the runner's caller answers the call, the
/// model call fails. The events the driver emits itself go through [`SinkPort::show`], which
/// catches the panic and notes it, so that the run ends at its next step ([`SinkPort::stop_run`])
/// with an `Error` saying so (or `cancelled`, when its token has fired: [`sink_broke`]), its
/// state consistent and saved, and its one `Done`.
struct SinkPort<'a> {
    inner: &'a dyn EventSink,
    /// The sink panicked on an event the driver showed itself.
    broke: AtomicBool,
    /// The run was told to stop for it (once).
    stopped: AtomicBool,
}

impl<'a> SinkPort<'a> {
    fn new(inner: &'a dyn EventSink) -> Self {
        Self {
            inner,
            broke: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        }
    }

    /// Runs `show`, which passes something the driver produced itself to the sink, catching a
    /// panic of the sink's (the payload is dropped unread: it may hold anything) and noting it.
    fn contain(&self, show: impl FnOnce()) {
        if std::panic::catch_unwind(AssertUnwindSafe(show)).is_err() {
            self.broke.store(true, Ordering::Relaxed);
        }
    }

    /// Shows an event the driver emits itself (not the runner, nor the model port's stream).
    fn show(&self, event: AiEvent) {
        self.contain(|| self.emit(event));
    }

    /// Shows a call answered without running as the runner shows one it refuses before it
    /// runs: a start without arguments, then the result.
    fn show_answered(&self, result: ToolExecResult, tool_name: Arc<str>) {
        self.show(AiEvent::ToolCallStart {
            tool_call_id: result.tool_call_id.clone(),
            tool_name: tool_name.clone(),
            args: None,
        });
        self.show(AiEvent::ToolCallResult {
            tool_call_id: result.tool_call_id,
            tool_name,
            outcome: result.outcome,
        });
    }

    /// Whether the run must stop now because the sink panicked on an event the driver showed:
    /// `true` once, the first time it is asked after such a panic.
    fn stop_run(&self) -> bool {
        self.broke.load(Ordering::Relaxed) && !self.stopped.swap(true, Ordering::Relaxed)
    }
}

impl EventSink for SinkPort<'_> {
    fn emit(&self, event: AiEvent) {
        ai_core::port_call(THE_EVENT_SINK, || self.inner.emit(event));
    }

    fn record(&self, record: &ai_core::ToolInvocationRecord) {
        ai_core::port_call(THE_EVENT_SINK, || self.inner.record(record));
    }
}

/// What a run stopped because the app's event sink panicked on an event the driver showed
/// ends with.
const SINK_BROKE: &str = "the run was stopped: the event sink panicked while showing one of the \
                          run's events";

/// How a run its event sink's panic stops ends: `error`, saying the sink panicked; or, when the
/// run's token has fired, `cancelled`, as the cancel asked. A cancel stops every step the
/// sink's panic would, and answers the calls left alike (cancelled, without running them), so
/// the run ends as the user asked, as a cancel also comes before a model call's failure and a
/// tool's refusal; the sink's panic is the app's to see (the panic hook reports it).
fn sink_broke(cancel: &CancellationToken) -> AgentEvent {
    if cancel.is_cancelled() {
        AgentEvent::Cancel {
            partial_text: String::new(),
        }
    } else {
        AgentEvent::ModelFailed {
            message: SINK_BROKE.into(),
            partial_text: String::new(),
        }
    }
}

/// What a thread store that panicked is taken to have answered: a failure, whose message does
/// not repeat the payload (it may hold anything), so the run still ends with its one `Done`.
fn panicked<T>() -> Result<T, ThreadStoreError> {
    Err(ThreadStoreError::Failed("the thread store panicked".into()))
}

/// Ends a run that failed around the loop (its thread not loaded or not saved) with an `Error`
/// that names the thread and what failed, and `Done`, and hands the error back. A sink that
/// panics on either is still given the other.
fn failed(events: &SinkPort<'_>, error: GraphError) -> GraphError {
    ended_around(events, error, DoneReason::Error)
}

/// Ends a run cancelled before it began (its thread not loaded yet) as [`failed`] does, but
/// with `Done { reason: cancelled }`.
fn cancelled_around(events: &SinkPort<'_>, error: GraphError) -> GraphError {
    ended_around(events, error, DoneReason::Cancelled)
}

/// Ends a run around the loop: an `Error` saying why, then `Done { reason }`.
fn ended_around(events: &SinkPort<'_>, error: GraphError, reason: DoneReason) -> GraphError {
    events.show(AiEvent::Error {
        message: error.to_string(),
    });
    events.show(AiEvent::Done { reason });
    error
}

/// Passes one call's events on, noting whether its start was shown and its record written, how
/// the runner answered it (the outcome of the result or approval request passed on), and the
/// latest time the run's records hold. Each is noted before the event is passed on, so it holds
/// when the app's sink panics on that event too.
struct Watched<'a> {
    inner: &'a dyn EventSink,
    started: AtomicBool,
    recorded: AtomicBool,
    answered: std::sync::Mutex<Option<ToolOutcome>>,
    last_time: &'a AtomicU64,
}

impl EventSink for Watched<'_> {
    fn emit(&self, event: AiEvent) {
        let answer = match &event {
            AiEvent::ToolCallStart { .. } => {
                self.started.store(true, Ordering::Relaxed);
                None
            }
            AiEvent::ToolCallResult { outcome, .. } => Some(outcome.clone()),
            AiEvent::ApprovalRequired { args_hash, .. } => Some(ToolOutcome::ApprovalRequired {
                args_hash: args_hash.clone(),
            }),
            _ => None,
        };
        if let Some(answer) = answer {
            *self.answered.lock().unwrap_or_else(|e| e.into_inner()) = Some(answer);
        }
        self.inner.emit(event);
    }

    fn record(&self, record: &ai_core::ToolInvocationRecord) {
        self.recorded.store(true, Ordering::Relaxed);
        self.last_time
            .fetch_max(record.ended_at_ms, Ordering::Relaxed);
        self.inner.record(record);
    }
}

/// Passes events on to `inner`, noting whether one of them unwound out of it (a panic of the
/// app's sink, as it showed the event), so that the driver can tell the sink's panic from the
/// model port's when the port's call unwinds.
struct Unwound<'a> {
    inner: &'a dyn EventSink,
    panicked: AtomicBool,
}

impl EventSink for Unwound<'_> {
    fn emit(&self, event: AiEvent) {
        let unwinding = MarkUnwind(&self.panicked);
        self.inner.emit(event);
        std::mem::forget(unwinding);
    }

    fn record(&self, record: &ai_core::ToolInvocationRecord) {
        let unwinding = MarkUnwind(&self.panicked);
        self.inner.record(record);
        std::mem::forget(unwinding);
    }
}

/// Sets its flag when dropped, which happens only when what it guards unwinds (it is forgotten
/// otherwise).
struct MarkUnwind<'a>(&'a AtomicBool);

impl Drop for MarkUnwind<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Passes every event on but `Done`, which it keeps for after the thread is saved.
struct HoldDone<'a> {
    inner: &'a dyn EventSink,
    done: std::sync::Mutex<Option<AiEvent>>,
}

impl EventSink for HoldDone<'_> {
    fn emit(&self, event: AiEvent) {
        match event {
            AiEvent::Done { .. } => {
                *self.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(event);
            }
            other => self.inner.emit(other),
        }
    }

    fn record(&self, record: &ai_core::ToolInvocationRecord) {
        self.inner.record(record);
    }
}

//! Runs with a record: where threads and run logs live, and the one way a run is started so
//! that what a client is shown has been stored first.
//!
//! With a data folder, threads, run logs and tool invocation records go to `cogni.db`
//! (`SqliteStore`), and model receipts, tool calls and run inputs to content-addressed blobs
//! (`TieredBlobStore`: rows of `cogni.db` up to 64 KiB, files under `blobs/` beyond). A run
//! input names its thread's history, stored as one blob per message that the thread's runs
//! share ([`RunInput::store`]); each run puts only the messages new since its thread's last
//! stored input ([`RunInput::store_on_thread`]). Without one, threads live in bounded memory
//! ([`MemoryThreads`]) and nothing is logged.
//!
//! - [`start_run`] stores each batch of a run's events (with the records and receipts that came
//!   with them) in one transaction *before* handing it on, so an event a client has seen is
//!   never lost. A tool call's record and its result event are always in the same batch. (A
//!   whole step per transaction would hold a step's streamed text back from the client until
//!   the step ends.)
//! - The batch that carries `Done` also carries the thread's new state and ends the run. If
//!   only the run's finish mark then fails, the run is shown to its end and left for the next
//!   start's recovery to mark finished.
//! - The process that records a run holds the run's lock file ([`RunLocks`]) while it writes it.
//! - [`recover`] closes the runs a crash left `running` (those whose lock it can take): each
//!   started call gets an `interrupted` result, and their threads take the interrupted turn in a
//!   valid form unless they moved on. A run whose closing did not commit is closed at the next
//!   start.
//! - A run whose log write fails (or panics) is cancelled and, once its task has ended, closed
//!   the same way by the process that runs it, and so is a run whose task dies before its `Done`
//!   or whose beginning panics. So its thread holds the turn its client was shown (the stored
//!   events) before the next request reads it.

mod input;
mod lock;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use adapters::{ReceiptCollector, SqliteStore, TieredBlobStore};
use ai_core::{
    AiEvent, BlobStore, CancellationToken, Clock, DoneReason, EventSink, InterruptedRun, Message,
    RunContext, RunId, RunStatus, RunStep, RunStore, RunStoreError, ThreadId, ThreadStore,
    ToolCallId, ToolCatalog, ToolErrorCode, ToolFailure, ToolInvocationRecord, ToolOutcome,
};
use anyhow::Context;
use futures_util::FutureExt;
use graph::{AgentState, ApprovalDecision, HistoryItem, reconstruct_history};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::{MemoryThreads, Runtime, Settings};

pub use input::{RUN_INPUT_FORM, RunInputError, StoredHistories};
use lock::RunLock;
pub use lock::RunLocks;

/// The run log's stores, present when a data folder is configured.
#[derive(Clone)]
pub struct RunLogStores {
    /// Runs, their events and records.
    pub runs: Arc<dyn RunStore>,
    /// Receipts, tool calls and run inputs.
    pub blobs: Arc<dyn BlobStore>,
    /// Receipt addresses reported by the recording completion, until a step takes them.
    pub receipts: Arc<ReceiptCollector>,
    /// The lock files that tell live runs from runs a crash left open.
    pub locks: RunLocks,
    /// The history each thread's last run stored in `blobs` from this process, so its next run
    /// puts only its new messages ([`RunInput::store_on_thread`]). It goes with `blobs`: a new
    /// one (`Default`) for a new blob store.
    pub histories: Arc<StoredHistories>,
}

/// Where threads (and, with a data folder, run logs) live.
#[derive(Clone)]
pub struct Stores {
    /// Thread states.
    pub threads: Arc<dyn ThreadStore>,
    /// The run log, when kept.
    pub log: Option<RunLogStores>,
    /// When `threads` is a [`MemoryThreads`] (no data folder), the same store: the server holds
    /// each thread a run is in flight on through it ([`MemoryThreads::hold`]), so that thread
    /// is never forgotten while the run goes on.
    pub memory_threads: Option<Arc<MemoryThreads>>,
}

impl std::fmt::Debug for RunLogStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLogStores")
            .field("locks", &self.locks)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores")
            .field("log", &self.log.is_some())
            .finish_non_exhaustive()
    }
}

/// Opens the stores `settings.data_dir` names (creating the folder), or, without one, threads in
/// bounded memory ([`MemoryThreads`] with its default bounds) and no log. A database from a
/// newer cogni, or a folder that cannot be written, is refused with its path.
pub fn create_stores(settings: &Settings) -> anyhow::Result<Stores> {
    let Some(dir) = &settings.data_dir else {
        let threads = Arc::new(MemoryThreads::default());
        return Ok(Stores {
            threads: threads.clone(),
            log: None,
            memory_threads: Some(threads),
        });
    };
    // The store creates the folder, its owner's alone.
    let sqlite = Arc::new(SqliteStore::open(dir).context("data_dir")?);
    let blobs = TieredBlobStore::open(&sqlite, dir, TieredBlobStore::DEFAULT_MAX_ROW_BYTES);
    let blobs = Arc::new(blobs.context("data_dir")?);
    // Every run takes a lock file: a folder where none can be made is refused now.
    let locks = RunLocks::new(dir.join("locks"));
    locks.check_writable().context("data_dir")?;
    Ok(Stores {
        threads: sqlite.clone(),
        log: Some(RunLogStores {
            runs: sqlite,
            blobs,
            receipts: Arc::new(ReceiptCollector::default()),
            locks,
            histories: Arc::default(),
        }),
        memory_threads: None,
    })
}

/// What a run starts from, stored as a blob (its address is the run's `input_ref`) so the run
/// can be replayed. [`RunInput::store`] stores it and [`RunInput::load`] reads it: its thread's
/// history goes to message blobs of its own, which the thread's runs share (stored form
/// [`RUN_INPUT_FORM`]), so a thread's inputs grow with its length, not its square; inputs
/// stored whole by earlier versions still load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInput {
    /// The thread's state before the run.
    pub thread_state: AgentState,
    /// What begins the run (stored as `user_message` or `approval_decisions`).
    #[serde(flatten)]
    pub turn: Turn,
    /// The [`graph::LOOP_REVISION`] of the build that recorded the run; `None` for runs
    /// recorded before revisions were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_revision: Option<u32>,
    /// The settings the run ran under that shape its events; `None` for runs recorded before
    /// they were kept (a replay then runs under today's, and says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<RunSettings>,
}

/// The settings that shape a run's events, beyond its input and the model's answers: the tools
/// bound, the tool policy (which of them the model sees, approvals, budgets, retries, the
/// breaker) and the loop's limits. Recorded with each run ([`RunInput::settings`]), so a replay
/// runs under them and says when today's differ. (The system prompt is part of a new thread's
/// recorded state.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// The ids of the tools bound (`tools.enabled`), sorted; `None` for runs recorded before
    /// the tool set was kept (a replay then binds today's, and says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The tool policy.
    pub policy: ai_core::ToolPolicy,
    /// `agent.max_steps`.
    pub max_steps: std::num::NonZeroU32,
    /// `agent.max_parallel_tools`.
    pub max_parallel_tools: std::num::NonZeroUsize,
}

/// What begins a run on a thread. More kinds may come, so a match needs a catch-all arm;
/// [`Turn::event`] reads any of them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Turn {
    /// The user's next message.
    UserMessage(String),
    /// Decisions on the calls the thread's last run paused for: approved calls run (the
    /// runner checks policy and the arguments hash again), the others are denied.
    ApprovalDecisions(Vec<ApprovalDecision>),
}

impl Turn {
    /// The reducer event that begins the run.
    pub fn event(&self) -> graph::AgentEvent {
        match self {
            Self::UserMessage(content) => graph::AgentEvent::UserMessage {
                content: content.clone(),
            },
            Self::ApprovalDecisions(decisions) => graph::AgentEvent::ApprovalDecisions {
                decisions: decisions.clone(),
            },
        }
    }

    /// Runs the turn on `state` with `agent`.
    pub(crate) async fn drive(
        self,
        agent: &graph::Agent,
        state: AgentState,
        run: (&RunContext, &ToolCatalog),
        events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> AgentState {
        let (ctx, catalog) = run;
        match self {
            Self::UserMessage(message) => {
                agent
                    .run(state, message, ctx, catalog, events, cancel)
                    .await
            }
            Self::ApprovalDecisions(decisions) => {
                agent
                    .resume(state, decisions, ctx, catalog, events, cancel)
                    .await
            }
        }
    }
}

/// What the run's sink passes to the recorder.
enum Item {
    Event(AiEvent),
    Record(Box<ToolInvocationRecord>),
}

/// The run's sink: events and records, in order, to the recorder.
struct ItemSink(UnboundedSender<Item>);

impl EventSink for ItemSink {
    fn emit(&self, event: AiEvent) {
        // The recorder outlives the run; a closed channel means it failed and stopped.
        let _ = self.0.send(Item::Event(event));
    }

    fn record(&self, record: &ToolInvocationRecord) {
        let _ = self.0.send(Item::Record(Box::new(record.clone())));
    }
}

/// One run on one thread, ready to start.
pub struct RunRequest {
    /// The thread.
    pub thread: ThreadId,
    /// Its state before the run.
    pub state: AgentState,
    /// The thread's saved state that `state` was read from, as the thread store returned it
    /// (`None`: nothing was saved, e.g. `state` is new or rebuilt from a client's history). The
    /// run's closing step saves the thread only while it still holds exactly this (checked in
    /// the closing transaction, or by the thread store's conditional save without a run log), so
    /// a turn another process stored on the thread
    /// meanwhile is never overwritten: the run then ends with an error saying the thread
    /// changed since it began, and its record is kept. A `state` that is not what was saved (the
    /// server rewound the thread for an AI SDK edit or retry) is saved over it, the same way,
    /// before the run runs, so a run that then fails or crashes is closed over `state`.
    pub saved_state: Option<serde_json::Value>,
    /// What begins the run.
    pub turn: Turn,
    /// The run's context (its id names the run in the log).
    pub ctx: RunContext,
    /// The catalog the model sees.
    pub catalog: ToolCatalog,
    /// Cancels the run.
    pub cancel: CancellationToken,
}

impl std::fmt::Debug for RunRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRequest")
            .field("thread", &self.thread)
            .finish_non_exhaustive()
    }
}

/// Starts a run and returns its events, each stored before it arrives here. The thread's state
/// is saved before `Done` is handed on, and `on_saved` (e.g. freeing the thread for its next
/// run) is called then. Fails only if the run cannot be logged at all. A batch that cannot be
/// stored (its write fails or panics) ends the run with an error: once the run's task has
/// ended, the run is closed as [`recover`] closes a crashed one (its thread takes the turn its
/// stored events hold), then `on_saved` is called. So is a run whose task dies before its `Done`
/// (its events stop), or whose beginning (its row, a resume's save past its pause) panics: it is
/// never left `running` for the next start, nor shown without a `Done`.
///
/// With a run log, the new state is saved only over the state the run started from
/// ([`RunRequest::saved_state`]): when another process stored a turn on the thread meanwhile
/// (`cogni serve` and `cogni chat` on one data folder), that turn is kept, and this run is
/// closed and stored with an [`AiEvent::Error`] saying the thread changed since it began (and
/// how the run itself ended) and `Done { reason: error }` in place of its own `Done`.
pub async fn start_run(
    runtime: &Runtime,
    stores: &Stores,
    request: RunRequest,
    on_saved: impl FnOnce() + Send + 'static,
) -> anyhow::Result<UnboundedReceiver<AiEvent>> {
    let RunRequest {
        thread,
        state,
        saved_state,
        turn,
        ctx,
        catalog,
        cancel,
    } = request;
    let run_id = ctx.run_id().clone();
    let mut owner = None;
    if let Some(log) = &stores.log {
        // Held until the recorder stops writing, so no recovery closes the run while it is live.
        // Held already: this run id is live, in this process or another.
        let Some(lock) = log.locks.try_take(&run_id)? else {
            return Err(ai_core::RunStoreError::AlreadyExists(run_id).into());
        };
        owner = Some(lock);
    }
    let (items, mut incoming) = unbounded_channel();
    // A begin that panics may have written the run's row, or its thread past a pause: the run is
    // then ended as one whose task dies is (below), never left `running` with no task. Its
    // panic's message is not repeated (the panic hook reported whose code panicked and where).
    let begin = begin(
        runtime,
        stores,
        (&run_id, &thread),
        &state,
        &turn,
        saved_state,
    );
    // `unfinished`: how the run is closed if its events stop before a stored `Done`.
    let (mut run, saved_state, mut unfinished) = match AssertUnwindSafe(begin).catch_unwind().await
    {
        Ok(begun) => {
            let saved_state = begun?;
            let agent = runtime.agent.clone();
            let run_cancel = cancel.clone();
            let run = tokio::spawn(async move {
                let sink = ItemSink(items);
                turn.drive(&agent, state, (&ctx, &catalog), &sink, &run_cancel)
                    .await
            });
            (Some(run), saved_state, Closing::task_died())
        }
        Err(_panic) => {
            tracing::error!(run = run_id.as_str(), "beginning the run panicked");
            // No task: its events stop at once.
            drop(items);
            (None, None, Closing::begin_died())
        }
    };
    let (out, events) = unbounded_channel();
    let stores = stores.clone();
    let clock = runtime.clock.clone();
    tokio::spawn(async move {
        let _owner: Option<RunLock> = owner;
        let mut on_saved = Some(on_saved);
        while let Some(first) = incoming.recv().await {
            let mut batch = vec![first];
            loop {
                while let Ok(item) = incoming.try_recv() {
                    batch.push(item);
                }
                // A record is sent just before its result event: store the two together.
                if !matches!(batch.last(), Some(Item::Record(_))) {
                    break;
                }
                match incoming.recv().await {
                    Some(item) => batch.push(item),
                    None => break,
                }
            }
            let (mut step, done) = split(batch);
            if done {
                // `Done` is the run's last event: its state is final.
                if let Some(task) = run.take() {
                    match task.await {
                        Ok(final_state) => match serde_json::to_value(&final_state) {
                            Ok(value) => {
                                // Saved only over the state the run began from: a turn another
                                // process stored meanwhile is not overwritten.
                                step.thread_state = Some(value);
                                step.thread_state_if_saved =
                                    Some(saved_state.clone().unwrap_or(serde_json::Value::Null));
                                step.refuse_if_thread_changed = true;
                            }
                            Err(error) => tracing::error!(%error, "thread state not encodable"),
                        },
                        Err(error) => tracing::error!(%error, "run task failed"),
                    }
                }
            }
            // A write whose port (the run store, the clock) panics has failed as one that
            // returns an error: its panic's message is not repeated (the panic hook reported
            // whose code panicked and where).
            let stored = store_step(&stores, &thread, &run_id, step, done, &*clock);
            let stored = AssertUnwindSafe(stored)
                .catch_unwind()
                .await
                .unwrap_or_else(|_panic| Err(anyhow::anyhow!("writing it panicked")));
            let events = match stored {
                Ok(events) => events,
                Err(error) => {
                    // Nothing unstored is shown: the run stops and the client sees why.
                    tracing::error!(run = run_id.as_str(), %error, "run log write failed");
                    unfinished = Closing::log_failed();
                    break;
                }
            };
            if done && let Some(saved) = on_saved.take() {
                saved();
            }
            for event in events {
                // A closed receiver is a client that left; the run still ends and is stored.
                let _ = out.send(event);
            }
        }
        // The thread is freed once `Done` is stored: the run ended as it should.
        let Some(on_saved) = on_saved else {
            return;
        };
        // Its log failed, or its task died (its events stopped before `Done`), or its begin
        // panicked (it has no task). Its task ends
        // first (a cancelled run ends at once; what it sends now is not stored), so nothing of
        // the run is still running once its thread is closed and freed for the next run, as on
        // every other way a run ends.
        cancel.cancel();
        // Its panic's message is not repeated: it may hold what the run held (the panic hook
        // reported whose code panicked and where).
        if let Some(task) = run.take()
            && let Err(error) = task.await
        {
            let panicked = error.is_panic();
            tracing::error!(run = run_id.as_str(), panicked, "the run's task failed");
        }
        let message = unfinished.error.clone();
        // Closed now as recovery would close it (the lock is still ours), so the thread holds
        // the turn the client was shown before its next request.
        if let Some(log) = &stores.log {
            // The receipts of model calls that answered after the last batch taken go with
            // events that are not stored: dropped, not left in the collector (which outlives
            // the run) for a take that never comes.
            drop(log.receipts.take(&run_id));
            // A port that panicked as the run began (or as its log was written) may panic again
            // here: the run is then left as a closing that fails leaves it, and its client is
            // still shown its end.
            let closing = close_now(&stores, log, &run_id, &*clock, unfinished);
            let reason = match AssertUnwindSafe(closing).catch_unwind().await {
                Ok(Ok(_)) => None,
                Ok(Err(error)) => Some(safe_reason(&error)),
                Err(_panic) => Some("closing it panicked".to_owned()),
            };
            if let Some(reason) = reason {
                tracing::warn!(
                    run = run_id.as_str(),
                    %reason,
                    "the run could not be closed either: its thread keeps its state from \
                     before the run until the next start closes it"
                );
            }
        }
        on_saved();
        let _ = out.send(AiEvent::Error { message });
        let _ = out.send(AiEvent::Done {
            reason: DoneReason::Error,
        });
    });
    Ok(events)
}

/// Begins `run_id` on `thread` before anything of it runs: with a run log, stores its input
/// and writes its row; then a resume saves its thread past the pause, and a run from another
/// state than the thread's saved one saves that state. Returns the state the run's closing write
/// then expects the thread to hold.
async fn begin(
    runtime: &Runtime,
    stores: &Stores,
    (run_id, thread): (&RunId, &ThreadId),
    state: &AgentState,
    turn: &Turn,
    saved_state: Option<serde_json::Value>,
) -> anyhow::Result<Option<serde_json::Value>> {
    if let Some(log) = &stores.log {
        let input = RunInput {
            thread_state: state.clone(),
            turn: turn.clone(),
            loop_revision: Some(graph::LOOP_REVISION),
            settings: Some(runtime.run_settings.clone()),
        };
        // Its history's new message blobs first, then the input that names them, then the row.
        let histories = log.histories.as_ref();
        let input_ref = input
            .store_on_thread(log.blobs.as_ref(), histories, thread)
            .await?;
        log.runs
            .begin_run(
                run_id,
                Some(thread),
                runtime.clock.now_ms(),
                Some(&input_ref),
            )
            .await
            .context("the run log")?;
    }
    let run = (run_id, runtime.clock.as_ref());
    match turn {
        // A run that resumes from approvals consumes them first, durably: the thread is saved
        // past its pause before any approved call runs, so no later request (a retry after a
        // failure, or another process) can approve the same calls again, whatever becomes of
        // this run.
        Turn::ApprovalDecisions(_) => {
            let consumed = consume_approvals(stores, run, thread, state, turn, saved_state);
            Ok(Some(consumed.await?))
        }
        // A run from another state than the thread's (the server rewound the thread for an AI
        // SDK edit or retry) saves that state first, the same way: a run that then fails or
        // crashes is closed over it (`close` repairs only a thread that holds the state the run
        // started from), so the thread never goes back to what the client rewound away.
        Turn::UserMessage(_) => match saved_state {
            Some(saved) => {
                let start = serde_json::to_value(state).context(UNENCODABLE)?;
                if start == saved {
                    Ok(Some(saved))
                } else {
                    Ok(Some(
                        save_before_run(stores, run, thread, start, Some(saved)).await?,
                    ))
                }
            }
            None => Ok(None),
        },
    }
}

/// Saves `thread` as `state` will be once `turn` (approval decisions) is applied, over the state
/// it was read in (`saved_state`; checked in the same transaction with a run log) and returns
/// what was saved, which the run's closing write then expects. Refused when the thread changed
/// since it was read: the run is closed at once with that error, and nothing runs.
async fn consume_approvals(
    stores: &Stores,
    run: (&RunId, &dyn Clock),
    thread: &ThreadId,
    state: &AgentState,
    turn: &Turn,
    saved_state: Option<serde_json::Value>,
) -> anyhow::Result<serde_json::Value> {
    let (consumed, _) = graph::reduce(state.clone(), turn.event());
    let consumed = serde_json::to_value(&consumed).context(UNENCODABLE)?;
    save_before_run(stores, run, thread, consumed, saved_state).await
}

/// Why a run did not start whose thread state could not be written as JSON.
const UNENCODABLE: &str = "the thread state cannot be encoded";

/// Saves `thread` as `start` before anything of the run runs, over the state it was read in
/// (`saved_state`; checked in the same transaction with a run log) and returns what was saved,
/// which the run's closing write then expects. Refused when the thread changed since it was
/// read: the run is closed at once with that error, and nothing runs.
async fn save_before_run(
    stores: &Stores,
    (run_id, clock): (&RunId, &dyn Clock),
    thread: &ThreadId,
    start: serde_json::Value,
    saved_state: Option<serde_json::Value>,
) -> anyhow::Result<serde_json::Value> {
    let Some(log) = &stores.log else {
        // Over the state read, as the log's step is: a run whose thread changed meanwhile (its
        // pause consumed by another run) is refused, nothing of it run.
        stores
            .threads
            .save(thread, saved_state.as_ref(), &start)
            .await?;
        return Ok(start);
    };
    let step = RunStep {
        thread_state: Some(start.clone()),
        thread_state_if_saved: Some(saved_state.unwrap_or(serde_json::Value::Null)),
        refuse_if_thread_changed: true,
        ..RunStep::default()
    };
    if let Err(error) = log.runs.commit_step(run_id, step).await {
        let closing = RunStep {
            events: vec![
                AiEvent::Error {
                    message: format!("the run did not start: {error}"),
                },
                AiEvent::Done {
                    reason: DoneReason::Error,
                },
            ],
            ..RunStep::default()
        };
        let closed = match log.runs.commit_step(run_id, closing).await {
            Ok(_) => log.runs.finish_run(run_id, clock.now_ms()).await,
            Err(closing_error) => Err(closing_error),
        };
        if let Err(closing_error) = closed {
            tracing::warn!(run = run_id.as_str(), %closing_error, "left for recovery to close");
        }
        return Err(error.into());
    }
    Ok(start)
}

/// A batch's events and records as one step, and whether it ends the run.
fn split(batch: Vec<Item>) -> (RunStep, bool) {
    let mut step = RunStep::default();
    let mut done = false;
    for item in batch {
        match item {
            Item::Event(event) => {
                done |= matches!(event, AiEvent::Done { .. });
                step.events.push(event);
            }
            Item::Record(record) => step.records.push(*record),
        }
    }
    (step, done)
}

/// The start of the error a run ends with when its thread changed since it began.
pub const THREAD_CHANGED: &str = "the thread changed since this run began";

/// Stores one batch: in the run log (with the receipts reported since the last batch) when one
/// is kept; otherwise only the final thread state. Returns the events stored, to be shown: the
/// batch's own, or, when the closing step was refused because the thread changed since the run
/// began, the batch with an error and `Done { reason: error }` in place of its `Done`.
async fn store_step(
    stores: &Stores,
    thread: &ThreadId,
    run_id: &RunId,
    mut step: RunStep,
    done: bool,
    clock: &dyn Clock,
) -> anyhow::Result<Vec<AiEvent>> {
    let mut events = step.events.clone();
    match &stores.log {
        Some(log) => {
            step.receipt_refs = log.receipts.take(run_id);
            let refused = step.refuse_if_thread_changed.then(|| step.clone());
            match (log.runs.commit_step(run_id, step).await, refused) {
                (Ok(_), _) => {}
                (Err(RunStoreError::ThreadChanged { .. }), Some(mut step)) => {
                    // The other run's turn stays; this one is kept in the log, closed with why.
                    tracing::warn!(
                        run = run_id.as_str(),
                        thread = thread.as_str(),
                        "the thread changed since this run began: its turn is not saved"
                    );
                    ended_as_changed(&mut step.events);
                    step.thread_state = None;
                    step.thread_state_if_saved = None;
                    step.refuse_if_thread_changed = false;
                    events = step.events.clone();
                    log.runs.commit_step(run_id, step).await?;
                }
                (Err(error), _) => return Err(error.into()),
            }
            // The run's end is stored (and its thread saved): it is shown. A run left `running`
            // with its `Done` stored is marked finished by the next start's recovery; closing
            // it as failed instead would tell its client and the log it did not end.
            if done && let Err(error) = log.runs.finish_run(run_id, clock.now_ms()).await {
                tracing::warn!(
                    run = run_id.as_str(),
                    %error,
                    "the run ended but is not marked finished: the next start marks it"
                );
            }
        }
        None => {
            if let Some(state) = &step.thread_state {
                // Over the state the run began from (`Null`: none), as the log's step is.
                let began = step.thread_state_if_saved.as_ref().filter(|s| !s.is_null());
                match stores.threads.save(thread, began, state).await {
                    Ok(()) => {}
                    Err(ai_core::ThreadStoreError::Changed) => ended_as_changed(&mut events),
                    Err(error) => return Err(error.into()),
                }
            }
        }
    }
    Ok(events)
}

/// What the error of a run closed by [`ended_as_changed`] says, before the name of the reason
/// its own `Done` gave (as events name it: `"cancelled"`).
const ITS_OWN_END: &str = "; the run itself ended ";

/// Ends a run's last batch, whose turn was not saved because its thread changed since the run
/// began, with an error saying so in place of its `Done`, and `Done { reason: error }`: the turn
/// is not stored, which a client must be told. The error names the reason of the `Done` it
/// replaces, so the log keeps how the run really ended (a cancel, say), which `cogni runs show`
/// shows and `cogni replay` compares ([`thread_changed_ending`]).
pub(crate) fn ended_as_changed(events: &mut Vec<AiEvent>) {
    let own = events.iter().rev().find_map(|event| match event {
        AiEvent::Done { reason } => Some(*reason),
        _ => None,
    });
    events.retain(|e| !matches!(e, AiEvent::Done { .. }));
    let mut message = format!(
        "{THREAD_CHANGED}: another run stored a turn on this thread meanwhile, so this turn was \
         not saved (send the message again)"
    );
    // A unit variant always writes as a JSON string.
    if let Some(own) = own.and_then(|reason| serde_json::to_string(&reason).ok()) {
        message.push_str(ITS_OWN_END);
        message.push_str(&own);
    }
    events.push(AiEvent::Error { message });
    events.push(AiEvent::Done {
        reason: DoneReason::Error,
    });
}

/// How a run closed by [`ended_as_changed`] ended itself, read from its closing error's
/// `message`: `None` for any other message, and for one recorded before the error named it.
pub(crate) fn thread_changed_ending(message: &str) -> Option<DoneReason> {
    let said = message.strip_prefix(THREAD_CHANGED)?;
    let (_, own) = said.rsplit_once(ITS_OWN_END)?;
    serde_json::from_str(own).ok()
}

/// Closes the runs a crash left `running`: each started call without a result gets an
/// `interrupted` result, and so does each call still waiting for approval in a run that stopped
/// before it paused (with its start without arguments: it never ran), the run ends with an
/// error, and its thread takes the interrupted turn (the user's message, the text, the calls
/// that started or waited, their results) when that history is valid, or keeps its state from
/// before the run otherwise (and a warning names the run and why, as it does when the run's
/// input blob is missing or damaged: the turn cannot be rebuilt without it). Returns the runs
/// closed.
///
/// A run is left alone while its lock is held: it is live in some process (this one, another
/// `cogni serve`, a `cogni chat`), whenever recovery runs. A run whose log already ends with
/// `Done` (the process died before marking it finished) is only marked finished. The thread
/// takes the repaired turn only while its saved state is still the one the run started from: a
/// thread that took (and stored) turns since keeps them, and the run is closed without it. For
/// a run that resumed from approvals, that is the state it saved past the pause as it began: a
/// thread still at the pause (the run stopped before that save, so nothing of it ran) keeps
/// waiting for the same answers. A crashed resume that recorded nothing is left as it is: it may
/// be one refused as it began, whose thread another run consumed and may still be using.
///
/// Each run is closed in its own transaction, and the store names a run again at every start
/// until that transaction commits, so a crash in the middle loses nothing. A run that cannot be
/// closed does not stop the others: every run is tried, each failure is logged, and then one
/// error names them all, each with its reason. A reason never quotes stored data (a corrupt row
/// is named as corrupt, not shown), so the error can go to any log. Callers start anyway and
/// warn: a run left open is closed at a later start.
pub async fn recover(stores: &Stores, clock: &dyn Clock) -> anyhow::Result<Vec<RunId>> {
    let Some(log) = &stores.log else {
        return Ok(Vec::new());
    };
    let now = clock.now_ms();
    let mut failed = Vec::new();
    // Locks first, then the store: a run closed by another recovery meanwhile shows as closed.
    let mut held: HashMap<RunId, RunLock> = HashMap::new();
    // The running runs only: a recovery's cost does not grow with the log.
    let headers = log
        .runs
        .list_running_runs()
        .await
        .context("listing running runs")?;
    for header in headers.iter().filter(|h| h.status == RunStatus::Running) {
        let run_id = &header.run_id;
        match take_dead(log, run_id, now).await {
            Ok(Some(lock)) => {
                held.insert(run_id.clone(), lock);
            }
            Ok(None) => {}
            Err(error) => {
                let reason = safe_reason(&error);
                tracing::error!(run = run_id.as_str(), %reason, "recovering a run failed");
                failed.push(format!("{run_id}: {reason}"));
            }
        }
    }
    let dead: Vec<RunId> = held.keys().cloned().collect();
    let interrupted = log
        .runs
        .recover_interrupted(now, &dead)
        .await
        .context("recovering interrupted runs")?;
    let mut closed = Vec::with_capacity(interrupted.len());
    for run in interrupted {
        let run_id = run.run_id.clone();
        // A run marked interrupted by an earlier start and not closed yet: take its lock too,
        // so two recoveries never close it twice.
        let lock = match held.remove(&run_id) {
            Some(lock) => Some(lock),
            None => log.locks.try_take(&run_id).ok().flatten(),
        };
        let Some(_lock) = lock else {
            continue;
        };
        match close(stores, log, run, Closing::crashed()).await {
            Ok(true) => closed.push(run_id),
            Ok(false) => {}
            Err(error) => {
                let reason = safe_reason(&error);
                let id = run_id.as_str();
                tracing::error!(run = id, %reason, "closing an interrupted run failed");
                failed.push(format!("{run_id}: {reason}"));
            }
        }
    }
    drop(held);
    if let Err(error) = log.locks.sweep() {
        tracing::warn!(%error, "stale run lock files were not removed");
    }
    if !failed.is_empty() {
        anyhow::bail!(
            "closing interrupted runs: {} of {} failed and stay open until the next start \
             ({}); {} closed",
            failed.len(),
            failed.len() + closed.len(),
            failed.join("; "),
            closed.len()
        );
    }
    Ok(closed)
}

/// Why a run could not be recovered, without stored contents: a decoding error may quote the
/// row it could not read (serde names an unknown variant or an unexpected string), so a corrupt
/// row or thread is only named as such; other store failures (IO, a locked database, a lock
/// file) are given whole.
fn safe_reason(error: &anyhow::Error) -> String {
    for (depth, cause) in error.chain().enumerate() {
        if let Some(store) = cause.downcast_ref::<RunStoreError>() {
            return match store {
                RunStoreError::Corrupt(_) => {
                    "stored data is corrupt (`cogni runs show` on the run says where)".into()
                }
                other => other.to_string(),
            };
        }
        if cause.downcast_ref::<ai_core::ThreadStoreError>().is_some() {
            // The thread store's errors are flattened strings that may hold a decoding error:
            // only the context above it is given.
            return match depth {
                0 => "the thread store failed".into(),
                _ => format!("{error}: the thread store failed"),
            };
        }
    }
    format!("{error:#}")
}

/// The lock of a `running` run whose process is gone, or `None` when the run is live or was
/// dealt with since it was listed. A run whose log already ends with `Done` is marked finished
/// here (its process died between storing `Done` and finishing it) and needs no closing.
async fn take_dead(
    log: &RunLogStores,
    run_id: &RunId,
    now: u64,
) -> anyhow::Result<Option<RunLock>> {
    let Some(lock) = log.locks.try_take(run_id)? else {
        tracing::debug!(run = run_id.as_str(), "left open: live in another process");
        return Ok(None);
    };
    let run = log.runs.load_run(run_id).await?;
    if run.header.status != RunStatus::Running {
        return Ok(None);
    }
    if matches!(run.events.last(), Some(AiEvent::Done { .. })) {
        log.runs.finish_run(run_id, now).await?;
        tracing::info!(
            run = run_id.as_str(),
            "marked finished: its log ends with done"
        );
        return Ok(None);
    }
    Ok(Some(lock))
}

/// What the closing of an interrupted run says: to each call that started without a result,
/// and as the run's error.
struct Closing {
    /// The `interrupted` result's message for a call that started with its arguments and has
    /// no result: it may have run. (A call whose start came without them never ran:
    /// [`NEVER_RAN_CALL`].)
    call: &'static str,
    /// The run's error.
    error: String,
    /// Whether the run is known to have saved the state it started from (a resume, its thread
    /// past the pause): its own process closes it, and it got past that save. A crashed run that
    /// recorded nothing is not known to have: it may be a resume refused as it began.
    saved_its_start: bool,
}

impl Closing {
    /// A run a crash left open, closed by a later recovery.
    fn crashed() -> Self {
        Self {
            call: "the process running this call stopped; whether it took effect is unknown",
            error: "the run was interrupted: the process recording it stopped".into(),
            saved_its_start: false,
        }
    }

    /// A run whose log could not be written, closed by the process that runs it. The store's
    /// error may name the run, a path or a database detail: the client and the run's record
    /// get the fault, not the cause (the server's log has it).
    fn log_failed() -> Self {
        Self {
            call: "the run's log failed before this call's result was stored: whether it took \
                   effect is unknown",
            error: "the run could not be recorded (the server's log says why)".into(),
            saved_its_start: true,
        }
    }

    /// A run whose beginning panicked, closed by the process that runs it. Whether a resume's
    /// begin got past saving its thread beyond the pause is not known: as for a crashed run that
    /// recorded nothing, its thread takes the turn only if it is still the state the run began
    /// from.
    fn begin_died() -> Self {
        Self {
            saved_its_start: false,
            ..Self::task_died()
        }
    }

    /// A run whose task died before its end (its events stopped before `Done`), closed by the
    /// process that runs it.
    fn task_died() -> Self {
        Self {
            call: "the run stopped unexpectedly before this call's result was stored: whether \
                   it took effect is unknown",
            error: "the run stopped unexpectedly (the server's log says why)".into(),
            saved_its_start: true,
        }
    }
}

/// The `interrupted` result of a call whose start came without arguments (the runner refused it
/// before running it, or the loop answered it without running it, its result to follow at once)
/// in a run closed before that result was stored: it never ran, whatever closed the run, as the
/// client's stream told it.
const NEVER_RAN_CALL: &str =
    "the run ended before this call's result was stored; it was refused, so it never ran";

/// Closes `run_id`, whose log write just failed or whose task died before its `Done`, from the
/// process that runs it (its lock held), as [`recover`] closes a run a crash left open: marked
/// interrupted, its started calls without a result answered `interrupted`, ended with `why`'s
/// error, and its thread given the turn its stored events hold (those the client was shown)
/// unless the thread moved on. Returns false when there was nothing to close. Fails as any
/// write may: the run then stays for the next start's recovery.
async fn close_now(
    stores: &Stores,
    log: &RunLogStores,
    run_id: &RunId,
    clock: &dyn Clock,
    why: Closing,
) -> anyhow::Result<bool> {
    let interrupted = log
        .runs
        .recover_interrupted(clock.now_ms(), std::slice::from_ref(run_id))
        .await?;
    // Other runs an earlier recovery left unclosed are named too: they are not this one's.
    let Some(run) = interrupted.into_iter().find(|run| &run.run_id == run_id) else {
        return Ok(false);
    };
    close(stores, log, run, why).await
}

/// Closes one interrupted run (its lock held): `interrupted` results for its dangling calls
/// (saying a call whose start came without arguments never ran, any other that it may have),
/// an error, `Done` (both as `why` says), and the repaired thread state when the thread has not
/// moved on. Returns false when the run turns out to be closed already.
async fn close(
    stores: &Stores,
    log: &RunLogStores,
    run: InterruptedRun,
    why: Closing,
) -> anyhow::Result<bool> {
    let recorded = log.runs.load_run(&run.run_id).await?;
    if recorded
        .events
        .iter()
        .any(|e| matches!(e, AiEvent::Done { .. }))
    {
        return Ok(false);
    }
    let mut events: Vec<AiEvent> = run
        .dangling
        .iter()
        .map(|call| {
            let message = match call.never_ran {
                true => NEVER_RAN_CALL,
                false => why.call,
            };
            AiEvent::ToolCallResult {
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.as_str().into(),
                outcome: ToolOutcome::Error(ToolFailure::new(ToolErrorCode::Interrupted, message)),
            }
        })
        .collect();
    // A call whose approval request was shown, in a run that stopped before it paused (its
    // `Done` not stored), will never be decided: it never ran, as its client's stream says
    // when such a run ends. Its start (without arguments) and result say so in the log too.
    for (tool_call_id, tool_id) in waiting_for_approval(&recorded.events) {
        events.push(AiEvent::ToolCallStart {
            tool_call_id: tool_call_id.clone(),
            tool_name: tool_id.as_str().into(),
            args: None,
        });
        events.push(AiEvent::ToolCallResult {
            tool_call_id: tool_call_id.clone(),
            tool_name: tool_id.as_str().into(),
            outcome: ToolOutcome::Error(ToolFailure::new(
                ToolErrorCode::Interrupted,
                NEVER_DECIDED_CALL,
            )),
        });
    }
    events.push(AiEvent::Error { message: why.error });
    events.push(AiEvent::Done {
        reason: DoneReason::Error,
    });
    // The repaired turn is written only over the state the run started from (or over nothing),
    // and the store checks that again in the closing transaction: a turn another process stores
    // meanwhile is never overwritten.
    let (thread_state, thread_state_if_saved) = match (
        &run.thread_id,
        run_input(log, &recorded.header.input_ref).await,
    ) {
        (Some(thread), Ok(input)) => {
            let saved = stores
                .threads
                .load(thread)
                .await
                .with_context(|| format!("reading thread {}", thread.as_str()))?
                .unwrap_or(serde_json::Value::Null);
            let started_from = serde_json::to_value(&input.thread_state).ok();
            let holds_its_start = match &input.turn {
                // A run that resumed from approvals saved its thread past the pause as it
                // began, before anything of it ran, and its turn goes only over that. A thread
                // still at the pause never took the decisions (the run stopped first, nothing of
                // it ran): it keeps waiting for them, so the same answers can be sent again.
                // And the consumed state counts only for a run known to have saved it: one its
                // own process closes, or one that went on to record something. A resume refused
                // as it began (another resume had consumed the same pause and may still be
                // running) never wrote it, and must not write over that run's thread.
                Turn::ApprovalDecisions(_) => {
                    let consumed = graph::reduce(input.thread_state.clone(), input.turn.event()).0;
                    let consumed = serde_json::to_value(consumed).ok();
                    let saved_it = why.saved_its_start || !recorded.events.is_empty();
                    Some(&saved) == consumed.as_ref() && saved_it
                }
                Turn::UserMessage(_) => saved.is_null() || Some(&saved) == started_from.as_ref(),
            };
            if holds_its_start {
                let repaired = repaired_state(input, &recorded.events, &events);
                if repaired.is_none() {
                    tracing::warn!(
                        run = run.run_id.as_str(),
                        thread = thread.as_str(),
                        "the interrupted turn does not make a valid history: the thread keeps \
                         its state from before the run, and the turn is not added"
                    );
                }
                (repaired, Some(saved))
            } else {
                let why = if Some(&saved) == started_from.as_ref() {
                    "the run stopped before it took its approval decisions: the thread still \
                     waits for them"
                } else {
                    "the thread took turns after this run began: it keeps them, and the \
                     interrupted turn is not added"
                };
                tracing::warn!(run = run.run_id.as_str(), thread = thread.as_str(), "{why}");
                (None, None)
            }
        }
        (Some(thread), Err(problem)) => {
            // Without its input the turn cannot be rebuilt: neither the user's message nor the
            // state the run started from is known anywhere else.
            tracing::warn!(
                run = run.run_id.as_str(),
                thread = thread.as_str(),
                problem,
                "the interrupted run's input cannot be read: the thread keeps its state from \
                 before the run, and the interrupted turn is not added"
            );
            (None, None)
        }
        (None, _) => (None, None),
    };
    let step = RunStep {
        events,
        thread_state,
        thread_state_if_saved,
        ..RunStep::default()
    };
    log.runs.commit_step(&run.run_id, step).await?;
    Ok(true)
}

/// The `interrupted` result of a call whose approval was requested in a run closed before it
/// paused: it was never approved or denied, so it never ran.
const NEVER_DECIDED_CALL: &str =
    "the run ended while this call waited for approval, before it paused: it never ran";

/// The calls of `events` whose approval was requested and that were neither started nor
/// answered after it (paired by order: [`Calls`]): in a run that stopped before it paused, calls
/// no one will decide. Each with its tool's id, which is the name the model called it by
/// (`ToolCatalog::get_by_name`). A call the run had started (a cancel answers a waiting call
/// with a start without arguments, then its result) is not one: it has its result, or is
/// answered as a dangling call.
fn waiting_for_approval(events: &[AiEvent]) -> Vec<(&ToolCallId, &ai_core::ToolId)> {
    let mut calls = Calls::default();
    let mut requested = Vec::new();
    for event in events {
        match event {
            AiEvent::ApprovalRequired {
                tool_call_id,
                tool_id,
                ..
            } => requested.push((calls.requested(tool_call_id), tool_call_id, tool_id)),
            AiEvent::ToolCallStart { tool_call_id, .. } => {
                calls.started(tool_call_id);
            }
            AiEvent::ToolCallResult { tool_call_id, .. } => {
                calls.answered(tool_call_id);
            }
            _ => {}
        }
    }
    let waiting = calls.waiting();
    requested
        .into_iter()
        .filter(|(call, ..)| waiting.contains(call))
        .map(|(_, tool_call_id, tool_id)| (tool_call_id, tool_id))
        .collect()
}

/// A run's tool calls, paired with their events by order as the run store pairs them for
/// recovery (`RunStore::recover_interrupted`), so that a call id used twice in a run is two
/// calls, each with its own answer. A call begins with its start, or with its approval request;
/// a start of an id whose request is still waiting for it is that call's (a cancel shows a
/// waiting call ended with a start without arguments, then its result). A result answers the
/// earliest unanswered call of its id; one that comes before any answers none.
#[derive(Default)]
struct Calls<'a> {
    /// Each call id's unanswered calls, oldest first: the call's number, and whether it still
    /// waits for its start (its approval requested, no start since).
    open: HashMap<&'a ToolCallId, VecDeque<(usize, bool)>>,
    /// How many calls began.
    began: usize,
}

impl<'a> Calls<'a> {
    /// A call whose approval is requested: its number.
    fn requested(&mut self, id: &'a ToolCallId) -> usize {
        self.begin(id, true)
    }

    /// A start: the number of the call it begins, or `None` when it is the start of a call
    /// whose request waited for it.
    fn started(&mut self, id: &'a ToolCallId) -> Option<usize> {
        let waiting = self
            .open
            .get_mut(id)
            .and_then(|calls| calls.iter_mut().find(|(_, waits)| *waits));
        match waiting {
            Some((_, waits)) => {
                *waits = false;
                None
            }
            None => Some(self.begin(id, false)),
        }
    }

    /// A result: the number of the call it answers, if any.
    fn answered(&mut self, id: &ToolCallId) -> Option<usize> {
        self.open.get_mut(id)?.pop_front().map(|(call, _)| call)
    }

    /// The numbers of the calls whose approval was requested and that were neither started nor
    /// answered since.
    fn waiting(&self) -> HashSet<usize> {
        self.open
            .values()
            .flatten()
            .filter_map(|&(call, waits)| waits.then_some(call))
            .collect()
    }

    fn begin(&mut self, id: &'a ToolCallId, waits: bool) -> usize {
        let call = self.began;
        self.began += 1;
        self.open.entry(id).or_default().push_back((call, waits));
        call
    }
}

/// The run's input, or what keeps it from being read (never the blob's content).
async fn run_input(
    log: &RunLogStores,
    input_ref: &Option<String>,
) -> Result<RunInput, &'static str> {
    let input_ref = input_ref
        .as_deref()
        .ok_or("the run has no recorded input")?;
    RunInput::load(log.blobs.as_ref(), input_ref)
        .await
        .map_err(|error| error.problem())
}

/// The thread's state with the interrupted turn: its input's state, the user's message, then the
/// run's text and started calls with their results (recorded or `interrupted`).
fn repaired_state(
    input: RunInput,
    recorded: &[AiEvent],
    closing: &[AiEvent],
) -> Option<serde_json::Value> {
    // The run began as the reducer begins one: a user's message answers the calls a paused turn
    // left open (cancelled) before it; approval decisions answer the denied ones, and the
    // approved ones take their recorded results (`interrupted` for those that started and did
    // not finish). An approved call with no result recorded may have run all the same: its start
    // goes to the log in a batch stored after the tool began, which a run closed by a failed
    // write or a crash loses. It is answered as the next user message answers a call a lost save
    // left out (`graph::lost_result`), never as cancelled.
    // Either way the run first shows the paused calls it answers (a start and a result each),
    // and those answers are in `begun` already: the events of the paused calls are not the run's.
    // So does a user's message on a thread left past its pause (a lost save's), for the calls it
    // answers as ones that may have run.
    let (mut begun, _) = graph::reduce(input.thread_state.clone(), input.turn.event());
    let (paused, left_out): (Vec<&ToolCallId>, Vec<&ToolCallId>) = match input.thread_state.phase()
    {
        graph::Phase::AwaitingApproval { calls, .. } => {
            (calls.iter().map(|call| &call.id).collect(), Vec::new())
        }
        graph::Phase::AwaitingTools { calls, .. } => {
            (Vec::new(), calls.iter().map(|call| &call.id).collect())
        }
        _ => (Vec::new(), Vec::new()),
    };
    // Of those, the calls the decisions left to run (the denied ones are answered already).
    let approved: Vec<&ToolCallId> = match begun.phase() {
        graph::Phase::AwaitingTools { answered, .. } => paused
            .iter()
            .copied()
            .filter(|id| !answered.iter().any(|a| &a.tool_call_id == *id))
            .collect(),
        _ => Vec::new(),
    };
    if !approved.is_empty() {
        let mut results: Vec<ai_core::ToolExecResult> = recorded
            .iter()
            .chain(closing)
            .filter_map(|event| match event {
                AiEvent::ToolCallResult {
                    tool_call_id,
                    outcome,
                    ..
                } if approved.contains(&tool_call_id) => Some(ai_core::ToolExecResult {
                    tool_call_id: tool_call_id.clone(),
                    outcome: outcome.clone(),
                }),
                _ => None,
            })
            .collect();
        for id in &approved {
            if !results.iter().any(|result| &result.tool_call_id == *id) {
                results.push(graph::lost_result(id));
            }
        }
        let closed = graph::AgentEvent::ToolResults {
            results,
            cancelled: true,
        };
        (begun, _) = graph::reduce(begun, closed);
    }
    let mut messages: Vec<Message> = begun.messages().to_vec();
    let mut items = Vec::new();
    let mut text = String::new();
    let flush = |text: &mut String, items: &mut Vec<HistoryItem>| {
        if !text.is_empty() {
            items.push(HistoryItem::AssistantText {
                content: std::mem::take(text),
            });
        }
    };
    // The paused (or left out) turn's calls are answered above; what follows is the run's own.
    let later = recorded.iter().chain(closing).filter(|event| match event {
        AiEvent::ToolCallStart { tool_call_id, .. }
        | AiEvent::ToolCallResult { tool_call_id, .. } => {
            !paused.contains(&tool_call_id) && !left_out.contains(&tool_call_id)
        }
        _ => true,
    });
    // Paired by order, as recovery pairs them; a call whose id the thread holds already (a
    // provider that reuses ids, recorded by a loop that did not rename them) is recorded under
    // the id the reducer gives it, so each call keeps its own answer.
    let mut ids = graph::CallIds::of(&messages);
    let mut calls = Calls::default();
    // Each call's id in the rebuilt history, by its number.
    let mut recorded_ids: Vec<ToolCallId> = Vec::new();
    for event in later {
        match event {
            AiEvent::TextDelta { delta } => text.push_str(delta),
            // A call that waited for approval is the model's call as its request showed it;
            // the start its closing adds for it (without arguments) is not a second one.
            AiEvent::ApprovalRequired {
                tool_call_id,
                tool_id,
                args,
                ..
            } => {
                calls.requested(tool_call_id);
                let id = ids.claim(tool_call_id);
                flush(&mut text, &mut items);
                items.push(HistoryItem::ToolCall {
                    id: id.clone(),
                    name: tool_id.as_str().into(),
                    arguments: args.to_string(),
                });
                recorded_ids.push(id);
            }
            AiEvent::ToolCallStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                if calls.started(tool_call_id).is_none() {
                    continue;
                }
                let id = ids.claim(tool_call_id);
                flush(&mut text, &mut items);
                items.push(HistoryItem::ToolCall {
                    id: id.clone(),
                    name: tool_name.to_string(),
                    arguments: args.as_ref().map_or_else(|| "{}".into(), |a| a.to_string()),
                });
                recorded_ids.push(id);
            }
            AiEvent::ToolCallResult {
                tool_call_id,
                outcome,
                ..
            } => {
                if let Some(call) = calls.answered(tool_call_id) {
                    items.push(HistoryItem::ToolResult {
                        tool_call_id: recorded_ids[call].clone(),
                        content: outcome.model_content(),
                    });
                }
            }
            _ => {}
        }
    }
    flush(&mut text, &mut items);
    messages.extend(reconstruct_history(&items).ok()?);
    let state = input.thread_state.with_history(messages).ok()?;
    serde_json::to_value(state).ok()
}

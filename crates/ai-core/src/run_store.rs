//! The run log port: what a run did, step by step, kept durably so a run can be listed, shown,
//! replayed and recovered after a crash.
//!
//! A run is begun, takes one [`RunStep`] per model step (its events, the invocation records of
//! its tool calls, the receipts of its model calls and, optionally, the thread's new state: all
//! in one transaction), and is finished. A run that is still `running` when the process starts
//! again was cut by a crash: [`RunStore::recover_interrupted`] marks it `interrupted` (when the
//! caller names it as dead) and names
//! the tool calls that started and never got a result, so the caller can answer them; it names
//! the run again at every start until the caller's closing step (ending with `Done`) commits.

use std::fmt;
use std::ops::Range;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{AiEvent, RunId, ThreadId, ToolCallId, ToolInvocationRecord};

/// The latest time a run store keeps, in ms since the Unix epoch: `i64::MAX`, since SQL stores
/// times as signed 64-bit integers (some 292 million years from now). A store refuses a later
/// one as [`RunStoreError::TimeOutOfRange`] rather than keep another time than it was given;
/// only a broken clock gives one.
pub const MAX_RUN_TIME_MS: u64 = i64::MAX as u64;

/// Where a run stands. More states may come, so a match needs a catch-all arm; stores keep it
/// by [`RunStatus::as_str`] and read it back with [`RunStatus::parse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// Begun and not finished (or cut by a crash that was not recovered yet).
    Running,
    /// Finished normally (whatever its `Done` reason).
    Finished,
    /// Found `running` after a restart: the process died in the middle of it.
    Interrupted,
}

impl RunStatus {
    /// The snake_case name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Interrupted => "interrupted",
        }
    }

    /// Reads a stored name.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "running" => Some(Self::Running),
            "finished" => Some(Self::Finished),
            "interrupted" => Some(Self::Interrupted),
            _ => None,
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a store knows about a run besides its contents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunHeader {
    /// The run.
    pub run_id: RunId,
    /// The thread it belongs to, when it runs on a server-side thread.
    pub thread_id: Option<ThreadId>,
    /// Where it stands.
    pub status: RunStatus,
    /// When it began (ms since the Unix epoch, from the caller's [`crate::Clock`]).
    pub started_at_ms: u64,
    /// When it finished or was found interrupted.
    pub finished_at_ms: Option<u64>,
    /// The address (in the blob store) of what the run started from, e.g. the thread's state
    /// before the run and the user's message, so it can be replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_ref: Option<String>,
}

/// A run as a listing shows it: its header and how many events it holds, read without reading
/// the events themselves ([`RunStore::list_run_summaries`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run's header.
    pub header: RunHeader,
    /// How many events the run has stored (its next event's sequence number). The events are
    /// counted, not decoded: a damaged one counts, and [`RunStore::load_run`] reports it.
    pub event_count: u64,
}

/// Everything one model step wrote, committed together or not at all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStep {
    /// The step's events, in emission order; the store numbers them after the run's last one.
    pub events: Vec<AiEvent>,
    /// The invocation records of the tool calls that ended in this step (redacted results only:
    /// a record's `raw` field is never stored).
    pub records: Vec<ToolInvocationRecord>,
    /// Addresses of the model receipts written in this step, in call order.
    pub receipt_refs: Vec<String>,
    /// The thread's new state, saved in the same transaction (the run must have a thread).
    pub thread_state: Option<Value>,
    /// When set, `thread_state` is saved only while the thread's saved state is still this one
    /// (`Value::Null`: nothing saved yet), checked in the same transaction; otherwise the step is
    /// committed without it. Recovery uses it, so a thread that took turns since a run began
    /// keeps them whatever another process stores meanwhile. A saved state the store cannot read
    /// (a damaged row) is neither: the whole step is refused as [`RunStoreError::Corrupt`],
    /// naming the thread, and the damaged state is kept, never taken for an empty thread.
    pub thread_state_if_saved: Option<Value>,
    /// With `thread_state_if_saved`: when the thread's saved state is not that one, the whole
    /// step is refused with [`RunStoreError::ThreadChanged`] and nothing of it is written,
    /// instead of being committed without the state. A run's closing step uses it, so a run
    /// whose thread another process moved on meanwhile learns it (and can close itself with an
    /// error) rather than overwriting that turn or being shown as saved.
    pub refuse_if_thread_changed: bool,
}

/// A run as stored: its header and its contents in order.
#[derive(Clone, Debug, PartialEq)]
pub struct RunLog {
    /// The header.
    pub header: RunHeader,
    /// Every event, in order: the event at index `i` has sequence number `i`.
    pub events: Vec<AiEvent>,
    /// Every invocation record, in commit order.
    pub records: Vec<ToolInvocationRecord>,
    /// Every model receipt address, in commit order.
    pub receipt_refs: Vec<String>,
}

/// A tool call that started and never got a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DanglingToolCall {
    /// The call.
    pub tool_call_id: ToolCallId,
    /// The tool name from its start event (needed for its result event).
    pub tool_name: String,
    /// Its start event came without arguments: the runner refused the call before running it
    /// (its arguments did not validate, its tool is unknown, it was denied), or the loop
    /// answered it without running it, its result to follow at once. Such a call never ran, and
    /// a client was told so. A start with arguments (`null` included) may have run.
    pub never_ran: bool,
}

/// A run found `running` after a restart, now marked [`RunStatus::Interrupted`], and not closed
/// yet (its log has no `Done`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterruptedRun {
    /// The run.
    pub run_id: RunId,
    /// Its thread, when it has one.
    pub thread_id: Option<ThreadId>,
    /// Calls with a start event and no result event, in start order. Starts and results are
    /// paired by order: a result answers the earliest start of its call id still unanswered
    /// before it, so a call id a provider reuses within the run never hides a later start
    /// behind an earlier one's result, and each unanswered start is named, an id's twice if
    /// two of its starts are.
    pub dangling: Vec<DanglingToolCall>,
}

/// Why a run store refused or failed. Messages name the run and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunStoreError {
    /// No run has this id.
    #[error("run {0} not found")]
    NotFound(RunId),
    /// A run with this id was begun before.
    #[error("run {0} already exists")]
    AlreadyExists(RunId),
    /// The run is not in a state that takes this write.
    #[error("run {run_id} is {status}; {action} needs a run that is {expected}")]
    WrongStatus {
        /// The run.
        run_id: RunId,
        /// Its status.
        status: RunStatus,
        /// What was refused (`commit_step`, `finish_run`).
        action: &'static str,
        /// What it needs.
        expected: &'static str,
    },
    /// The write itself is inconsistent (e.g. a thread state for a run without a thread).
    #[error("invalid write to run {run_id}: {reason}")]
    Invalid {
        /// The run.
        run_id: RunId,
        /// What is wrong.
        reason: String,
    },
    /// The step's thread state was written on condition that the thread still held the state the
    /// run began from ([`RunStep::refuse_if_thread_changed`]), and it does not: another run
    /// stored a turn on it meanwhile. Nothing of the step was written.
    #[error(
        "thread {} changed since run {run_id} began: another run stored a turn on it \
         meanwhile, so this run's turn was not saved",
        thread_id.as_str()
    )]
    ThreadChanged {
        /// The run.
        run_id: RunId,
        /// Its thread.
        thread_id: ThreadId,
    },
    /// A time given to the store (`what`: a run's start time, its finish time, the recovery
    /// time) is past [`MAX_RUN_TIME_MS`]; nothing was written.
    #[error(
        "the {what} {at_ms} ms is past the latest time a run store keeps ({} ms): the clock \
         that gave it is wrong, and nothing was written",
        MAX_RUN_TIME_MS
    )]
    TimeOutOfRange {
        /// Which time it is.
        what: &'static str,
        /// The time given.
        at_ms: u64,
    },
    /// Stored data does not decode (a row written by something else, or damaged).
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The store was made by a newer version of this software; it is left untouched.
    #[error(
        "the store's schema version is {found}, newer than {supported}, the newest this build knows; \
         it was not modified (upgrade cogni to open it)"
    )]
    NewerSchema {
        /// The version found.
        found: u32,
        /// The newest version this build supports.
        supported: u32,
    },
    /// The backend failed (IO, permissions, a locked database).
    #[error("run store failed: {0}")]
    Backend(String),
}

/// Durable run logs. All methods are one transaction each; a failed call writes nothing.
///
/// Timestamps come from the caller (its [`crate::Clock`]), so stores read no clock. A store
/// keeps times up to [`MAX_RUN_TIME_MS`] and refuses a later one (in `begin_run`, `finish_run`
/// and `recover_interrupted`) as [`RunStoreError::TimeOutOfRange`] before anything is written.
///
/// The example keeps only the log, for a run with no thread. A store that serves threads must
/// also save [`RunStep::thread_state`] in the same transaction as the step, under the conditions
/// of [`RunStep::thread_state_if_saved`] and [`RunStep::refuse_if_thread_changed`] (the driver's
/// guarantee that no turn is lost or run twice rests on them), refuse steps for a finished run,
/// and check `input_ref`; `cogni-adapters`' `InMemoryRunStore` and `SqliteStore` do all of it.
///
/// ```
/// use std::{collections::BTreeMap, sync::Mutex};
/// use ai_core::{AiEvent, DoneReason, InterruptedRun, RunHeader, RunId, RunLog, RunStatus,
///     RunStep, RunStore, RunStoreError, RunSummary, ThreadId};
///
/// #[derive(Default)]
/// struct InMemory(Mutex<BTreeMap<RunId, RunLog>>);
///
/// #[ai_core::async_trait]
/// impl RunStore for InMemory {
///     async fn begin_run(&self, run_id: &RunId, thread_id: Option<&ThreadId>, at_ms: u64,
///         input_ref: Option<&str>) -> Result<(), RunStoreError> {
///         let mut runs = self.0.lock().unwrap();
///         if runs.contains_key(run_id) {
///             return Err(RunStoreError::AlreadyExists(run_id.clone()));
///         }
///         let header = RunHeader { run_id: run_id.clone(), thread_id: thread_id.cloned(),
///             status: RunStatus::Running, started_at_ms: at_ms, finished_at_ms: None,
///             input_ref: input_ref.map(str::to_owned) };
///         runs.insert(run_id.clone(), RunLog { header, events: vec![], records: vec![],
///             receipt_refs: vec![] });
///         Ok(())
///     }
///     async fn commit_step(&self, run_id: &RunId, step: RunStep)
///         -> Result<std::ops::Range<u64>, RunStoreError> {
///         let mut runs = self.0.lock().unwrap();
///         let run = runs.get_mut(run_id).ok_or_else(|| RunStoreError::NotFound(run_id.clone()))?;
///         let first = run.events.len() as u64;
///         run.events.extend(step.events);
///         run.records.extend(step.records);
///         run.receipt_refs.extend(step.receipt_refs);
///         Ok(first..run.events.len() as u64)
///     }
///     async fn finish_run(&self, run_id: &RunId, at_ms: u64) -> Result<(), RunStoreError> {
///         let mut runs = self.0.lock().unwrap();
///         let run = runs.get_mut(run_id).ok_or_else(|| RunStoreError::NotFound(run_id.clone()))?;
///         run.header.status = RunStatus::Finished;
///         run.header.finished_at_ms = Some(at_ms);
///         Ok(())
///     }
///     async fn list_runs(&self) -> Result<Vec<RunHeader>, RunStoreError> {
///         Ok(self.0.lock().unwrap().values().map(|r| r.header.clone()).collect())
///     }
///     async fn list_run_summaries(&self) -> Result<Vec<RunSummary>, RunStoreError> {
///         Ok(self.0.lock().unwrap().values().map(|r| RunSummary {
///             header: r.header.clone(), event_count: r.events.len() as u64 }).collect())
///     }
///     async fn load_run(&self, run_id: &RunId) -> Result<RunLog, RunStoreError> {
///         self.0.lock().unwrap().get(run_id).cloned()
///             .ok_or_else(|| RunStoreError::NotFound(run_id.clone()))
///     }
///     async fn recover_interrupted(&self, _at_ms: u64, _runs: &[RunId])
///         -> Result<Vec<InterruptedRun>, RunStoreError> {
///         Ok(vec![]) // nothing survives a crash in memory
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = InMemory::default();
/// let run = RunId::new("run-1").unwrap();
/// store.begin_run(&run, None, 1, None).await.unwrap();
/// let seqs = store.commit_step(&run, RunStep {
///     events: vec![AiEvent::Done { reason: DoneReason::Stop }], ..RunStep::default()
/// }).await.unwrap();
/// assert_eq!(seqs, 0..1);
/// store.finish_run(&run, 2).await.unwrap();
/// assert_eq!(store.load_run(&run).await.unwrap().header.status, RunStatus::Finished);
/// # });
/// ```
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Records a new run as `running`, with the address of its input when it has one. A run id
    /// that exists is refused, and so is an input ref that is not a blob address (64 lower-case
    /// hex digits), as [`RunStoreError::Invalid`], before anything is written.
    async fn begin_run(
        &self,
        run_id: &RunId,
        thread_id: Option<&ThreadId>,
        at_ms: u64,
        input_ref: Option<&str>,
    ) -> Result<(), RunStoreError>;

    /// Commits one step in one transaction: its events (numbered after the run's last event),
    /// records, receipt refs and the thread's state. Returns the sequence numbers the events got.
    ///
    /// A `running` run takes steps; so does an `interrupted` one (its recovery step: the
    /// `interrupted` results of its dangling calls and its repaired thread state). A finished run
    /// is refused, and so is one whose log holds its `Done`, as
    /// [`RunStoreError::WrongStatus`]: nothing follows a run's `Done`, so a run recovery closed
    /// never gets a second ending. Nor within a step: one with an event after its `Done` is
    /// refused whole as [`RunStoreError::Invalid`].
    async fn commit_step(&self, run_id: &RunId, step: RunStep)
    -> Result<Range<u64>, RunStoreError>;

    /// Marks a `running` run finished.
    async fn finish_run(&self, run_id: &RunId, at_ms: u64) -> Result<(), RunStoreError>;

    /// Every run's header, oldest first.
    ///
    /// A run whose stored header cannot be read (a damaged id, status or time) is left out and
    /// reported by the store's own means (a log line naming its row and what is wrong, never what
    /// it holds), as [`RunStore::recover_interrupted`] does: one bad row never fails the listing
    /// of the others, nor the recovery that starts from it.
    async fn list_runs(&self) -> Result<Vec<RunHeader>, RunStoreError>;

    /// Every run's header with its event count, oldest first, as [`RunStore::list_runs`] lists
    /// them (a run whose header cannot be read is left out the same way). A store counts the
    /// events without reading them (in SQL, one aggregate over the event rows), so listing a
    /// log of long runs costs no more than their headers and a count each; a listing (such as
    /// `cogni runs list`) calls this rather than [`RunStore::load_run`] per run.
    async fn list_run_summaries(&self) -> Result<Vec<RunSummary>, RunStoreError>;

    /// The headers of the `running` runs, oldest first, as [`RunStore::list_runs`] lists them:
    /// what crash recovery starts from. The default filters [`RunStore::list_runs`]; a store
    /// that can find them without reading every run's header (an index on the status) does so,
    /// so a recovery costs no more for a long log than for a short one.
    async fn list_running_runs(&self) -> Result<Vec<RunHeader>, RunStoreError> {
        let mut headers = self.list_runs().await?;
        headers.retain(|header| header.status == RunStatus::Running);
        Ok(headers)
    }

    /// A run's header, events, records and receipt refs, in order.
    async fn load_run(&self, run_id: &RunId) -> Result<RunLog, RunStoreError>;

    /// After a crash: marks the runs of `runs` that are still `running` as `interrupted`
    /// (finished at `at_ms`) and returns every `interrupted` run whose log has no `Done` event,
    /// each with the tool calls that have a start event and no result event (paired by order:
    /// [`InterruptedRun::dangling`]). Other `running` runs are left alone: the caller names only
    /// runs no live process is writing (e.g. those whose owner's lock it could take), since the
    /// store cannot tell a live run from a dead one.
    ///
    /// The caller closes a run with a [`RunStore::commit_step`] that ends with `Done`; until that
    /// commits, every recovery returns the run again (as it was, keeping its first finish time),
    /// so a crash or a failed write between recovery and the closing step loses nothing. A run
    /// whose log already has its `Done` (the process died before `finish_run`) needs no closing
    /// and is not returned.
    ///
    /// A run whose stored rows cannot be read (a damaged id or event) cannot be closed: a store
    /// leaves it out and reports it by its own means (a log line naming the row and what is
    /// wrong), and still returns every other run. One bad run never stops the recovery of the
    /// rest.
    async fn recover_interrupted(
        &self,
        at_ms: u64,
        runs: &[RunId],
    ) -> Result<Vec<InterruptedRun>, RunStoreError>;
}

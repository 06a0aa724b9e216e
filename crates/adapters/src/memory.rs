//! [`InMemoryRunStore`]: [`RunStore`] and [`ThreadStore`] in memory, with the same rules as the
//! durable store, for tests and single-process use.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use ai_core::{
    AiEvent, DanglingToolCall, InterruptedRun, RunHeader, RunId, RunLog, RunStatus, RunStep,
    RunStore, RunStoreError, RunSummary, ThreadId, ThreadStore, ThreadStoreError,
};
use async_trait::async_trait;
use serde_json::Value;

use crate::stored::CallEvent;

/// Runs and threads in maps; lost when the process ends. It follows the same rules as
/// [`crate::SqliteStore`] (numbering, status checks, whole steps or nothing), so tests written
/// against it hold for the durable store. [`RunStore::recover_interrupted`] treats the runs it is
/// given that are still `running` as cut, and names every interrupted run not yet closed.
///
/// ```
/// use ai_core::{RunId, RunStep, RunStore};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = adapters::InMemoryRunStore::default();
/// let run = RunId::new("run-1").unwrap();
/// store.begin_run(&run, None, 1, None).await.unwrap();
/// assert_eq!(store.commit_step(&run, RunStep::default()).await.unwrap(), 0..0);
/// assert_eq!(store.recover_interrupted(2, &[run]).await.unwrap().len(), 1);
/// # });
/// ```
#[derive(Debug, Default)]
pub struct InMemoryRunStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Runs with the order they were begun in (ties on `started_at_ms` break by id, as stored).
    runs: BTreeMap<RunId, StoredRun>,
    threads: HashMap<ThreadId, Value>,
}

/// A run's log, and whether it holds its `Done`: kept as each step commits, as the durable store
/// keeps its `has_done` column, so a step's check and a recovery read no event.
#[derive(Debug)]
struct StoredRun {
    log: RunLog,
    has_done: bool,
}

/// Refuses a time past [`ai_core::MAX_RUN_TIME_MS`], as the durable store must.
fn check_time(what: &'static str, at_ms: u64) -> Result<(), RunStoreError> {
    if at_ms > ai_core::MAX_RUN_TIME_MS {
        return Err(RunStoreError::TimeOutOfRange { what, at_ms });
    }
    Ok(())
}

impl InMemoryRunStore {
    fn lock(&self) -> Result<MutexGuard<'_, State>, RunStoreError> {
        self.state
            .lock()
            .map_err(|_| RunStoreError::Backend("the run map is poisoned".into()))
    }
}

#[async_trait]
impl RunStore for InMemoryRunStore {
    async fn begin_run(
        &self,
        run_id: &RunId,
        thread_id: Option<&ThreadId>,
        at_ms: u64,
        input_ref: Option<&str>,
    ) -> Result<(), RunStoreError> {
        check_time("start time", at_ms)?;
        if let Some(input_ref) = input_ref {
            crate::blob::check_run_ref(run_id, "the input ref", input_ref)?;
        }
        let mut state = self.lock()?;
        if state.runs.contains_key(run_id) {
            return Err(RunStoreError::AlreadyExists(run_id.clone()));
        }
        let header = RunHeader {
            run_id: run_id.clone(),
            thread_id: thread_id.cloned(),
            status: RunStatus::Running,
            started_at_ms: at_ms,
            finished_at_ms: None,
            input_ref: input_ref.map(str::to_owned),
        };
        state.runs.insert(
            run_id.clone(),
            StoredRun {
                log: RunLog {
                    header,
                    events: Vec::new(),
                    records: Vec::new(),
                    receipt_refs: Vec::new(),
                },
                has_done: false,
            },
        );
        Ok(())
    }

    async fn commit_step(
        &self,
        run_id: &RunId,
        step: RunStep,
    ) -> Result<Range<u64>, RunStoreError> {
        for (i, receipt) in step.receipt_refs.iter().enumerate() {
            crate::blob::check_run_ref(run_id, &format!("receipt ref {i} of the step"), receipt)?;
        }
        if let Some(state) = &step.thread_state {
            crate::stored::check_step_state(run_id, state)?;
        }
        crate::stored::check_step_events(run_id, &step.events)?;
        let mut state = self.lock()?;
        let state = &mut *state;
        let stored = state
            .runs
            .get_mut(run_id)
            .ok_or_else(|| RunStoreError::NotFound(run_id.clone()))?;
        crate::stored::check_open(run_id, stored.log.header.status, stored.has_done)?;
        let run = &mut stored.log;
        if step.thread_state.is_some() && run.header.thread_id.is_none() {
            return Err(RunStoreError::Invalid {
                run_id: run_id.clone(),
                reason: "the step carries a thread state but the run has no thread".into(),
            });
        }
        if let (true, Some(expected), Some(_), Some(thread)) = (
            step.refuse_if_thread_changed,
            &step.thread_state_if_saved,
            &step.thread_state,
            &run.header.thread_id,
        ) && state.threads.get(thread).unwrap_or(&Value::Null) != expected
        {
            return Err(RunStoreError::ThreadChanged {
                run_id: run_id.clone(),
                thread_id: thread.clone(),
            });
        }
        // Checked above: nothing below fails, so the step is applied whole. The run held no
        // `Done` (`check_open`): it holds one now if the step does.
        stored.has_done = step
            .events
            .iter()
            .any(|e| matches!(e, AiEvent::Done { .. }));
        let first = run.events.len() as u64;
        run.events.extend(step.events);
        run.records
            .extend(step.records.into_iter().map(|mut record| {
                record.raw = None;
                record
            }));
        run.receipt_refs.extend(step.receipt_refs);
        if let (Some(state_json), Some(thread)) = (step.thread_state, &run.header.thread_id) {
            let saved = state.threads.get(thread).unwrap_or(&Value::Null);
            if step
                .thread_state_if_saved
                .as_ref()
                .is_none_or(|expected| expected == saved)
            {
                state.threads.insert(thread.clone(), state_json);
            }
        }
        Ok(first..run.events.len() as u64)
    }

    async fn finish_run(&self, run_id: &RunId, at_ms: u64) -> Result<(), RunStoreError> {
        check_time("finish time", at_ms)?;
        let mut state = self.lock()?;
        let run = &mut state
            .runs
            .get_mut(run_id)
            .ok_or_else(|| RunStoreError::NotFound(run_id.clone()))?
            .log;
        if run.header.status != RunStatus::Running {
            return Err(RunStoreError::WrongStatus {
                run_id: run_id.clone(),
                status: run.header.status,
                action: "finish_run",
                expected: "running",
            });
        }
        run.header.status = RunStatus::Finished;
        run.header.finished_at_ms = Some(at_ms);
        Ok(())
    }

    async fn list_runs(&self) -> Result<Vec<RunHeader>, RunStoreError> {
        let summaries = self.list_run_summaries().await?;
        Ok(summaries
            .into_iter()
            .map(|summary| summary.header)
            .collect())
    }

    async fn list_run_summaries(&self) -> Result<Vec<RunSummary>, RunStoreError> {
        let mut summaries: Vec<RunSummary> = self
            .lock()?
            .runs
            .values()
            .map(|run| RunSummary {
                header: run.log.header.clone(),
                event_count: run.log.events.len() as u64,
            })
            .collect();
        summaries.sort_by(|a, b| {
            (a.header.started_at_ms, a.header.run_id.as_str())
                .cmp(&(b.header.started_at_ms, b.header.run_id.as_str()))
        });
        Ok(summaries)
    }

    async fn load_run(&self, run_id: &RunId) -> Result<RunLog, RunStoreError> {
        self.lock()?
            .runs
            .get(run_id)
            .map(|run| run.log.clone())
            .ok_or_else(|| RunStoreError::NotFound(run_id.clone()))
    }

    async fn recover_interrupted(
        &self,
        at_ms: u64,
        runs: &[RunId],
    ) -> Result<Vec<InterruptedRun>, RunStoreError> {
        check_time("recovery time", at_ms)?;
        let mut state = self.lock()?;
        for run_id in runs {
            if let Some(run) = state.runs.get_mut(run_id)
                && run.log.header.status == RunStatus::Running
            {
                run.log.header.status = RunStatus::Interrupted;
                run.log.header.finished_at_ms = Some(at_ms);
            }
        }
        // Named until its closing step (ending with `Done`) is committed, as in the durable store.
        let mut open: Vec<&RunLog> = state
            .runs
            .values()
            .filter(|run| run.log.header.status == RunStatus::Interrupted && !run.has_done)
            .map(|run| &run.log)
            .collect();
        open.sort_by(|a, b| {
            (a.header.started_at_ms, a.header.run_id.as_str())
                .cmp(&(b.header.started_at_ms, b.header.run_id.as_str()))
        });
        Ok(open
            .into_iter()
            .map(|run| InterruptedRun {
                run_id: run.header.run_id.clone(),
                thread_id: run.header.thread_id.clone(),
                dangling: dangling(&run.events),
            })
            .collect())
    }
}

/// The calls with a start event and no result event, in start order, paired by order
/// ([`crate::stored::unanswered_starts`]).
fn dangling(events: &[AiEvent]) -> Vec<DanglingToolCall> {
    crate::stored::unanswered_starts(events.iter().filter_map(|event| match event {
        AiEvent::ToolCallStart {
            tool_call_id,
            tool_name,
            args,
        } => Some(CallEvent::Start(
            tool_call_id,
            DanglingToolCall {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.to_string(),
                never_ran: args.is_none(),
            },
        )),
        AiEvent::ToolCallResult { tool_call_id, .. } => Some(CallEvent::Result(tool_call_id)),
        _ => None,
    }))
}

#[async_trait]
impl ThreadStore for InMemoryRunStore {
    async fn load(&self, id: &ThreadId) -> Result<Option<Value>, ThreadStoreError> {
        let state = self
            .lock()
            .map_err(|e| ThreadStoreError::Failed(e.to_string()))?;
        Ok(state.threads.get(id).cloned())
    }

    async fn save(
        &self,
        id: &ThreadId,
        previous: Option<&Value>,
        state: &Value,
    ) -> Result<(), ThreadStoreError> {
        crate::stored::check_thread_state(id, state)?;
        let mut guard = self
            .lock()
            .map_err(|e| ThreadStoreError::Failed(e.to_string()))?;
        if guard.threads.get(id) != previous {
            return Err(ThreadStoreError::Changed);
        }
        guard.threads.insert(id.clone(), state.clone());
        Ok(())
    }
}

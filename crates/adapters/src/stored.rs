//! What every store here refuses alike before it writes (a thread state it could not read back,
//! a step to a run that has ended, an event after a step's `Done`), and how each finds a run's
//! dangling calls.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use ai_core::{
    AiEvent, RunId, RunStatus, RunStoreError, ThreadId, ThreadStoreError, nests_deeper_than,
};
use serde_json::Value;

/// The deepest a stored thread state may nest arrays and objects: serde_json's reader, which
/// loads it, refuses a 128th level. The runner keeps tool arguments and results far from it
/// (`ai_core::MAX_JSON_DEPTH`), but a thread state also holds what a provider sent as it was
/// sent (a call's `provider_fields`, such as the Responses API's reasoning items), some levels
/// further in than in the provider's answer.
const READABLE_DEPTH: usize = 127;

/// Refuses, for [`ai_core::ThreadStore::save`], a state of thread `id` nested deeper than a store
/// reads back: saved, it would fail every later load of its thread, which keeps the state it
/// had instead. The error names the thread and the limit, never the state.
pub(crate) fn check_thread_state(id: &ThreadId, state: &Value) -> Result<(), ThreadStoreError> {
    if nests_deeper_than(state, READABLE_DEPTH) {
        return Err(ThreadStoreError::Failed(format!(
            "thread {}: its state was not saved: it {}",
            id.as_str(),
            too_deep()
        )));
    }
    Ok(())
}

/// Refuses, for [`ai_core::RunStore::commit_step`], a step of run `run_id` whose thread state is
/// nested deeper than a store reads back, as [`check_thread_state`] does a save: the whole step
/// is refused, as for any other inconsistent step.
pub(crate) fn check_step_state(run_id: &RunId, state: &Value) -> Result<(), RunStoreError> {
    if nests_deeper_than(state, READABLE_DEPTH) {
        return Err(RunStoreError::Invalid {
            run_id: run_id.clone(),
            reason: format!("the step's thread state {}", too_deep()),
        });
    }
    Ok(())
}

fn too_deep() -> String {
    format!("nests deeper than {READABLE_DEPTH} levels, which a store cannot read back")
}

/// Refuses, for [`ai_core::RunStore::commit_step`], a step to run `run_id` unless it is open:
/// `running` or `interrupted` (its recovery step), with no `Done` in its log (`has_done`).
/// Nothing follows a run's `Done`, so a run recovery closed, or one whose process died before
/// `finish_run`, never gets a second ending.
pub(crate) fn check_open(
    run_id: &RunId,
    status: RunStatus,
    has_done: bool,
) -> Result<(), RunStoreError> {
    if status == RunStatus::Finished || has_done {
        return Err(RunStoreError::WrongStatus {
            run_id: run_id.clone(),
            status,
            action: "commit_step",
            expected: "running or interrupted, with no done event in its log",
        });
    }
    Ok(())
}

/// Refuses, for [`ai_core::RunStore::commit_step`], a step of run `run_id` with an event after
/// its `Done` (a second `Done` included), naming the event's place in the step: nothing follows
/// a run's `Done`, within its last step as after it ([`check_open`]).
pub(crate) fn check_step_events(run_id: &RunId, events: &[AiEvent]) -> Result<(), RunStoreError> {
    match events
        .iter()
        .position(|e| matches!(e, AiEvent::Done { .. }))
    {
        Some(done) if done + 1 < events.len() => Err(RunStoreError::Invalid {
            run_id: run_id.clone(),
            reason: format!("the step's event {} follows its done event", done + 1),
        }),
        _ => Ok(()),
    }
}

/// A tool call's event in a run's log, for [`unanswered_starts`]: its call id (`K`) and, for a
/// start, what the caller keeps of it (`S`).
pub(crate) enum CallEvent<K, S> {
    /// A `tool_call_start`.
    Start(K, S),
    /// A `tool_call_result`.
    Result(K),
}

/// The starts of `events` (a run's call events, in log order) that no result answers, in start
/// order. A result answers the earliest start of its call id still unanswered before it, so a
/// provider that reuses a call id within a run (in a later step, or twice in one) never hides a
/// later start behind an earlier one's result: every start gets its own answer.
pub(crate) fn unanswered_starts<K: Eq + Hash, S>(
    events: impl IntoIterator<Item = CallEvent<K, S>>,
) -> Vec<S> {
    let mut starts: Vec<Option<S>> = Vec::new();
    let mut open: HashMap<K, VecDeque<usize>> = HashMap::new();
    for event in events {
        match event {
            CallEvent::Start(id, start) => {
                open.entry(id).or_default().push_back(starts.len());
                starts.push(Some(start));
            }
            CallEvent::Result(id) => {
                if let Some(answered) = open.get_mut(&id).and_then(VecDeque::pop_front) {
                    starts[answered] = None;
                }
            }
        }
    }
    starts.into_iter().flatten().collect()
}

//! Deterministic replay of a recorded run: the model answered from the run's receipts
//! ([`adapters::ReplayCompletion`]), the tools answered from their recorded results
//! ([`RecordedToolSource`]), the events compared with the recorded ones.
//!
//! Replay only reads: the run log is opened without creating anything ([`open_run_log`]), the
//! replayed run is not recorded (no receipt recorder, no [`crate::start_run`]) and no tool
//! runs for real.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use adapters::{ReplayCompletion, SqliteStore, TieredBlobStore, shown_cut};
use ai_core::{
    AiEvent, BlobStore, BoundTool, CancellationToken, Capabilities, CompletionDelta, DoneReason,
    EventSink, ExecPermit, LlmCompletion, ModelReceipt, OutputItem, RunContext, RunId, RunLog,
    RunStatus, RunStore, RunStoreError, ToolCallBlob, ToolError, ToolErrorCategory, ToolErrorCode,
    ToolFailure, ToolId, ToolInvocationContext, ToolInvocationRecord, ToolSource, ToolSpec,
    canonical_bytes,
};
use anyhow::{Context, anyhow, bail};
use async_trait::async_trait;
use serde_json::Value;

use crate::{
    CoreTool, RunInput, RunSettings, Runtime, Settings, ToolCapabilities, create_tool_source,
};

/// The run log of a data folder, opened for reading.
#[derive(Clone)]
pub struct RunLogReader {
    /// Runs, their events and records.
    pub runs: Arc<dyn RunStore>,
    /// Receipts, tool calls and run inputs.
    pub blobs: Arc<dyn BlobStore>,
}

impl std::fmt::Debug for RunLogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLogReader").finish_non_exhaustive()
    }
}

/// The data folder `settings` names, or a one-line error saying how to name one.
pub fn data_dir(settings: &Settings) -> anyhow::Result<PathBuf> {
    settings.data_dir.clone().ok_or_else(|| {
        anyhow!("no data folder: set --data-dir, COGNI_DATA_DIR or data_dir in cogni.toml")
    })
}

/// Opens the run log in `dir` to read only ([`SqliteStore::open_read_only`],
/// [`TieredBlobStore::open_read_only`]): nothing is created, migrated or written, so a database
/// at an older schema version keeps it. A folder without `cogni.db` or `blobs/` is refused
/// naming what is missing (or, for a path that is a file, or one the OS will not show, saying
/// that instead), and a database at a schema version this build cannot read (newer, or
/// not a cogni store) is refused by the store, untouched.
pub fn open_run_log(dir: &Path) -> anyhow::Result<RunLogReader> {
    if std::fs::metadata(dir).is_ok_and(|found| !found.is_dir()) {
        bail!("no run log in {}: it is not a folder", dir.display());
    }
    require(dir, &dir.join("cogni.db"), false)?;
    require(dir, &dir.join("blobs"), true)?;
    // Read only: no migration, no WAL switch, no table created, so reading a data folder never
    // upgrades the database of an older cogni that still serves it.
    let runs =
        SqliteStore::open_read_only(dir).with_context(|| format!("data_dir {}", dir.display()))?;
    let blobs = TieredBlobStore::open_read_only(&runs, dir, TieredBlobStore::DEFAULT_MAX_ROW_BYTES)
        .with_context(|| format!("data_dir {}", dir.display()))?;
    Ok(RunLogReader {
        runs: Arc::new(runs),
        blobs: Arc::new(blobs),
    })
}

/// Refuses a data folder `dir` whose `path` (a file, or a folder when `folder`) is missing, is
/// of the other kind or cannot be looked at (a folder the user may not enter), saying which:
/// one the OS refuses to show is not said not to exist.
fn require(dir: &Path, path: &Path, folder: bool) -> anyhow::Result<()> {
    let (dir, shown) = (dir.display(), path.display());
    match std::fs::metadata(path) {
        Ok(found) if found.is_dir() == folder => Ok(()),
        Ok(_) if folder => bail!("no run log in {dir}: {shown} is not a folder"),
        Ok(_) => bail!("no run log in {dir}: {shown} is not a file"),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            bail!("no run log in {dir}: {shown} does not exist")
        }
        Err(error) => bail!("no run log in {dir}: cannot look at {shown}: {error}"),
    }
}

/// Loads one run, naming it when it is unknown. An id no run can have is refused saying why
/// (`invalid run_id: it is empty`), as `cogni chat --thread` refuses a thread id: not echoed
/// in Rust's debug form, escapes and all.
pub async fn load_run(log: &RunLogReader, run_id: &str) -> anyhow::Result<RunLog> {
    let id = RunId::new(run_id).map_err(|e| anyhow!("{e}"))?;
    match log.runs.load_run(&id).await {
        Ok(run) => Ok(run),
        Err(RunStoreError::NotFound(_)) => bail!("run {run_id} not found"),
        Err(other) => Err(other).with_context(|| format!("run {run_id}")),
    }
}

/// One recorded answer to one execution attempt.
#[derive(Clone, Debug)]
enum Answer {
    /// The attempt's (redacted) output.
    Output(Value),
    /// The attempt failed.
    Failed(ToolFailure),
    /// The attempt succeeded and the call failed after it (output validation, redaction, the
    /// result budget): the runner's later step must fail the same way.
    FailedAfter(ToolFailure),
    /// The call was refused before this attempt reached the tool (`circuit_open`): the runner
    /// takes it from [`BoundTool::refused_before_attempt`] rather than from its own breaker.
    Refused(ToolFailure),
}

/// How the key of the stand-in output that carries an [`Answer::FailedAfter`] failure from
/// `exec` to the runner's output validation and redaction (which reproduce it) begins. Each
/// [`RecordedToolSource`] ends it with a random part of its own ([`stand_in_key`]), so a recorded
/// result, which a data folder may make hold any key, is never taken for a stand-in.
const FAILED_AFTER: &str = "$cogni_replay_failed_after";

/// A stand-in key ([`FAILED_AFTER`]) no record can hold: its end is random, made when the
/// replay starts.
fn stand_in_key() -> Arc<str> {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new().hash_one(FAILED_AFTER);
    format!("{FAILED_AFTER}_{random:016x}").into()
}

/// A recorded answer's call: its call id, tool id and canonical validated arguments.
type AnswerKey = (String, String, Vec<u8>);

/// The recorded answers, per call ([`AnswerKey`]), in recorded order.
type Answers = HashMap<AnswerKey, VecDeque<Answer>>;

/// A [`ToolSource`] with the same specs (and validation) as the configured tools, whose tools
/// answer each execution with what the recorded run got: a call is matched by its call id, tool
/// id and canonical validated arguments, and takes its recorded answers in order (one per
/// recorded attempt, so retries replay too). The call id keeps apart equal calls of one turn,
/// whose records are kept in the order the calls ended, not the order they started (the reducer
/// makes call ids unique in a thread, renaming a repeated one the same way in a replay). Its
/// outputs are the recorded redacted results: output validation passes them through, and
/// redaction applies the tool's allowlist of today again (unchanged, it changes nothing; a
/// narrowed one shows no more than it lets through); a call that failed after
/// its tool ran (invalid output, redaction, the result budget or depth) fails again in the runner's same
/// step, so its code, category and message come out as recorded. A result over the budget
/// when recorded was never stored: under a budget its recorded size fits, its call still fails
/// `result_too_large`, saying so.
#[derive(Clone)]
pub struct RecordedToolSource {
    inner: Arc<dyn ToolSource>,
    answers: Arc<Mutex<Answers>>,
    /// The key of this replay's stand-in outputs ([`stand_in_key`]).
    stand_in: Arc<str>,
    /// The result budget the replay's runner holds results to.
    max_result_bytes: usize,
}

impl std::fmt::Debug for RecordedToolSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedToolSource").finish_non_exhaustive()
    }
}

impl RecordedToolSource {
    /// Answers the tools of `inner` from `records` (a run's invocation records, in order), for
    /// a runner whose result budget is `max_result_bytes` (the policy's
    /// [`ai_core::Budgets::max_result_bytes`]): whether that budget refuses a recorded oversized
    /// result again decides how its call is made to fail.
    pub fn new(
        inner: Arc<dyn ToolSource>,
        records: &[ToolInvocationRecord],
        max_result_bytes: usize,
    ) -> Self {
        let mut answers: Answers = HashMap::new();
        for record in records {
            let call = record.tool_call_id.as_str();
            let Some(key) = (record.args.as_deref()).and_then(|a| key(call, &record.tool_id, a))
            else {
                // Refused before its arguments validated: the replay refuses it the same way.
                continue;
            };
            let queue = answers.entry(key).or_default();
            for attempt in &record.attempts {
                match &attempt.error {
                    Some(failure) => queue.push_back(Answer::Failed(failure.clone())),
                    None => match (&record.result, &record.error) {
                        (Some(result), _) => queue.push_back(Answer::Output(Value::clone(result))),
                        // The attempt ran but the call failed after it (output validation,
                        // redaction, the result budget): fail the same way.
                        (None, Some(failure)) => {
                            queue.push_back(Answer::FailedAfter(failure.clone()))
                        }
                        (None, None) => {}
                    },
                }
            }
            // The breaker refused the call before its next attempt (its first, or a retry): the
            // replay gives the recorded refusal, wait and all, whatever its own breaker holds.
            if let Some(failure) = &record.error
                && failure.code == ToolErrorCode::CircuitOpen
            {
                queue.push_back(Answer::Refused(failure.clone()));
            }
        }
        Self {
            inner,
            answers: Arc::new(Mutex::new(answers)),
            stand_in: stand_in_key(),
            max_result_bytes,
        }
    }

    /// How many recorded answers were not asked for (a faithful replay ends at 0).
    pub fn remaining(&self) -> usize {
        // The answers are never left half-changed (only `pop_front` and `len` run under the
        // lock), so a lock poisoned by a panicking holder still tells the truth.
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(VecDeque::len)
            .sum()
    }
}

fn key(call: &str, tool_id: &str, args: &Value) -> Option<AnswerKey> {
    let args = canonical_bytes(args).ok()?;
    Some((call.to_owned(), tool_id.to_owned(), args))
}

impl ToolSource for RecordedToolSource {
    fn bound_tool(&self, id: &ToolId) -> Option<Arc<dyn BoundTool>> {
        let inner = self.inner.bound_tool(id)?;
        Some(Arc::new(RecordedTool {
            inner,
            answers: self.answers.clone(),
            stand_in: self.stand_in.clone(),
            max_result_bytes: self.max_result_bytes,
        }))
    }

    fn tool_specs(&self) -> Vec<ToolSpec> {
        self.inner.tool_specs()
    }
}

/// One configured tool whose executions are answered from the record.
struct RecordedTool {
    inner: Arc<dyn BoundTool>,
    answers: Arc<Mutex<Answers>>,
    /// The key of the replay's stand-in outputs ([`stand_in_key`]).
    stand_in: Arc<str>,
    /// The result budget the replay's runner holds results to.
    max_result_bytes: usize,
}

/// The tool error that makes the runner report `failure` again.
fn tool_error(failure: &ToolFailure) -> ToolError {
    let message = failure
        .safe_message
        .strip_prefix("the tool failed: ")
        .or_else(|| {
            failure
                .safe_message
                .strip_prefix("invalid tool arguments: ")
        })
        .unwrap_or(&failure.safe_message);
    let error = match failure.category {
        ToolErrorCategory::Transient => ToolError::transient(message),
        ToolErrorCategory::Permanent => ToolError::permanent(message),
        ToolErrorCategory::Validation => ToolError::invalid_input(message),
        _ => ToolError::new(message),
    };
    match failure.retry_after_ms {
        Some(ms) => error.with_retry_after(std::time::Duration::from_millis(ms)),
        None => error,
    }
}

/// What the runner's step after `exec` needs to fail as recorded.
enum Redo {
    /// Output validation fails with the tool's message.
    Invalid(String),
    /// Redaction fails (the runner's message is fixed).
    Unredactable,
    /// The redacted result has this many bytes.
    Size(usize),
    /// The redacted result nests deeper than [`ai_core::MAX_JSON_DEPTH`].
    TooDeep,
}

/// How to make `failure` again in the runner's step after `exec`; `None` for a failure no such
/// step makes.
fn failed_after_output(failure: &ToolFailure) -> Option<Redo> {
    match failure.code {
        ToolErrorCode::OutputValidation => failure
            .safe_message
            .strip_prefix("the tool returned invalid output: ")
            .map(|message| Redo::Invalid(message.to_owned())),
        ToolErrorCode::RedactionFailed => Some(Redo::Unredactable),
        ToolErrorCode::ResultTooLarge
            if failure
                .safe_message
                .starts_with("the tool result nests more than ") =>
        {
            Some(Redo::TooDeep)
        }
        ToolErrorCode::ResultTooLarge => failure
            .safe_message
            .strip_prefix("the tool result is ")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|size| size.parse().ok())
            .map(Redo::Size),
        _ => None,
    }
}

impl RecordedTool {
    /// How the runner's step after `exec` is to fail, when `output` is this replay's stand-in
    /// for a recorded failure; `None` for a recorded result.
    fn redo(&self, output: &Value) -> Option<Redo> {
        let failure = serde_json::from_value(output.get(&*self.stand_in)?.clone()).ok()?;
        failed_after_output(&failure)
    }
}

#[async_trait]
impl BoundTool for RecordedTool {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    fn requires_connection(&self) -> bool {
        self.inner.requires_connection()
    }

    fn idempotent(&self) -> bool {
        self.inner.idempotent()
    }

    fn validate_input(&self, args: Value) -> Result<Value, ToolError> {
        self.inner.validate_input(args)
    }

    async fn exec(
        &self,
        _permit: ExecPermit,
        args: Arc<Value>,
        ctx: &ToolInvocationContext,
        _caps: &Capabilities,
    ) -> Result<Value, ToolError> {
        let id = self.inner.spec().id.as_str();
        let answer = key(ctx.tool_call_id.as_str(), id, &args).and_then(|k| {
            self.answers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_mut(&k)
                .and_then(VecDeque::pop_front)
        });
        match answer {
            Some(Answer::Output(value)) => Ok(value),
            // A recorded timeout takes the runner's time budget again.
            Some(Answer::Failed(failure) | Answer::FailedAfter(failure))
                if failure.code == ToolErrorCode::Timeout =>
            {
                std::future::pending().await
            }
            // The runner's own later step makes the same failure from this stand-in output.
            Some(Answer::FailedAfter(failure)) if failed_after_output(&failure).is_some() => {
                Ok(serde_json::json!({ &*self.stand_in: failure }))
            }
            Some(
                Answer::Failed(failure) | Answer::FailedAfter(failure) | Answer::Refused(failure),
            ) => Err(tool_error(&failure)),
            None => Err(ToolError::permanent(format!(
                "replay: no recorded result for this call of {id} with these arguments"
            ))),
        }
    }

    fn validate_output(&self, output: &Value) -> Result<(), ToolError> {
        // The recorded output was validated when it was recorded; a recorded validation
        // failure is made again.
        match self.redo(output) {
            Some(Redo::Invalid(message)) => Err(ToolError::new(message)),
            _ => Ok(()),
        }
    }

    fn redact(&self, output: Value) -> Result<Value, ToolError> {
        match self.redo(&output) {
            // A recorded redaction failure is made again.
            Some(Redo::Unredactable) => Err(ToolError::new("the recorded redaction failed")),
            // A result that nested too deep was never stored: one level deeper than the runner
            // lets through stands in for it, and the runner refuses it with its own message.
            Some(Redo::TooDeep) => Ok((0..=ai_core::MAX_JSON_DEPTH)
                .fold(Value::Null, |inner, _| Value::Array(vec![inner]))),
            // The stand-in is counted at the recorded size (`counted_result_bytes`).
            Some(_) => Ok(output),
            // The recorded output was redacted under the allowlist of its day: today's is
            // applied again (a no-op when it is unchanged), so a replay never shows more than
            // today's lets through, and a narrowed allowlist shows as a difference in the result.
            None => self.inner.redact(output),
        }
    }

    fn refused_before_attempt(
        &self,
        ctx: &ToolInvocationContext,
        args: &Value,
        _attempt: u32,
    ) -> Option<ToolFailure> {
        let key = key(
            ctx.tool_call_id.as_str(),
            self.inner.spec().id.as_str(),
            args,
        )?;
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        let queue = answers.get_mut(&key)?;
        let refusal = match queue.front()? {
            Answer::Refused(failure) => failure.clone(),
            // The budget refuses no result of the recorded size, and the result itself was
            // never stored: the call ends as over the budget, saying why (a stand-in would pass
            // the budget and be shown as the result).
            Answer::FailedAfter(failure) => match failed_after_output(failure) {
                Some(Redo::Size(size)) if size <= self.max_result_bytes => ToolFailure::new(
                    ToolErrorCode::ResultTooLarge,
                    format!(
                        "the tool result was {size} bytes when the run was recorded, over the \
                         result budget it ran under, so it was never stored and a replay cannot \
                         show it"
                    ),
                ),
                _ => return None,
            },
            _ => return None,
        };
        queue.pop_front();
        Some(refusal)
    }

    fn counted_result_bytes(&self, redacted: &Value) -> usize {
        // A recorded oversized result counts at its recorded size, so it meets the same budget
        // with the same message, and is never built: the size comes from the data folder,
        // which may name any number.
        match self.redo(redacted) {
            Some(Redo::Size(size)) => size,
            _ => 0,
        }
    }
}

/// A sink that keeps the events.
#[derive(Default)]
struct Collect(Mutex<Vec<AiEvent>>);

impl EventSink for Collect {
    fn emit(&self, event: AiEvent) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event);
    }
}

/// The recorded events of a run and those its replay emitted.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayOutcome {
    /// As recorded.
    pub recorded: Vec<AiEvent>,
    /// As replayed.
    pub replayed: Vec<AiEvent>,
    /// The [`graph::LOOP_REVISION`] the run was recorded under (`None`: recorded before
    /// revisions were kept).
    pub recorded_revision: Option<u32>,
    /// What to tell of the settings the replay ran under: that today's (the tool set, the
    /// policy, the agent's limits) differ from the ones the run recorded (which it ran under), that today's checks would refuse the recorded
    /// policy (it ran under it all the same), or that the run recorded none (so today's were
    /// used). `None` when today's are the recorded ones.
    pub settings_note: Option<String>,
    /// How many of the run's recorded model calls the replay never asked for (`0` when it asked
    /// for every one): a replay that makes fewer calls than the run is no faithful replay, even
    /// when its events come out the same.
    pub unasked_calls: usize,
}

/// Where a replay first differs from its record.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// The event's index (its sequence number in the run).
    pub index: usize,
    /// The recorded event, as JSON (`null` past the recorded end).
    pub recorded: Value,
    /// The replayed event, as JSON (`null` past the replayed end).
    pub replayed: Value,
}

impl ReplayOutcome {
    /// Why a difference may come from the loop itself rather than from the run: the run was
    /// recorded under another [`graph::LOOP_REVISION`] than this build's (or before revisions
    /// were kept). `None` when the revisions match.
    pub fn revision_note(&self) -> Option<String> {
        let now = graph::LOOP_REVISION;
        let recorded = match self.recorded_revision {
            Some(revision) if revision == now => return None,
            Some(revision) => format!("under loop revision {revision}"),
            None => "before loop revisions were kept".to_owned(),
        };
        Some(format!(
            "the run was recorded {recorded} and this build's loop is revision {now}: the \
             loop's behaviour changed since, which may explain a difference"
        ))
    }

    /// The first event that differs (by its JSON form), if any.
    ///
    /// The tool calls of one turn run at once (up to `agent.max_parallel_tools`), so how their
    /// events interleave is the tools' timing, not the run's: a recorded tool answers at once,
    /// a real one when its IO ends. Each stretch of tool call events (start, retrying, approval
    /// required, result) is compared call by call: every call's own events in their order, the
    /// calls in the order they started, every other event in its place. A difference is named
    /// by the recorded event's index in the run.
    pub fn first_difference(&self) -> Option<Difference> {
        let json = |e: Option<&AiEvent>| {
            e.map_or(Value::Null, |e| {
                serde_json::to_value(e).unwrap_or_else(|e| Value::String(e.to_string()))
            })
        };
        let (recorded, replayed) = (call_order(&self.recorded), call_order(&self.replayed));
        (0..recorded.len().max(replayed.len())).find_map(|place| {
            let recorded_index = recorded.get(place).copied();
            let replayed_index = replayed.get(place).copied();
            let recorded_event = json(recorded_index.map(|i| &self.recorded[i]));
            let replayed_event = json(replayed_index.map(|i| &self.replayed[i]));
            (recorded_event != replayed_event).then_some(Difference {
                index: recorded_index.unwrap_or(place),
                recorded: recorded_event,
                replayed: replayed_event,
            })
        })
    }
}

/// The call a tool call event belongs to: the events the runner emits for a call (start,
/// retrying, approval required, result), whose order among calls running at once is their
/// timing. The model's own events for a call (its stream's start and arguments) come in the
/// order it sent them, which a replay reproduces, so they are compared in place. Which events
/// name a call is [`AiEvent::tool_call_id`]'s one match, so one added later is grouped by call.
fn concurrent_call(event: &AiEvent) -> Option<&ai_core::ToolCallId> {
    match event {
        AiEvent::ToolCallStreamStart { .. } | AiEvent::ToolCallArgsDelta { .. } => None,
        event => event.tool_call_id(),
    }
}

/// The indices of `events` in the order a replay compares them: each maximal stretch of tool
/// call events grouped by call (stable: a call's events keep their order), the calls in the
/// order of their first event in the stretch; every other event stays where it is.
fn call_order(events: &[AiEvent]) -> Vec<usize> {
    let mut order = Vec::with_capacity(events.len());
    let mut stretch: Vec<(&ai_core::ToolCallId, Vec<usize>)> = Vec::new();
    let flush = |stretch: &mut Vec<(&ai_core::ToolCallId, Vec<usize>)>, order: &mut Vec<usize>| {
        order.extend(stretch.drain(..).flat_map(|(_, indices)| indices));
    };
    for (index, event) in events.iter().enumerate() {
        match concurrent_call(event) {
            Some(call) => match stretch.iter_mut().find(|(id, _)| *id == call) {
                Some((_, indices)) => indices.push(index),
                None => stretch.push((call, vec![index])),
            },
            None => {
                flush(&mut stretch, &mut order);
                order.push(index);
            }
        }
    }
    flush(&mut stretch, &mut order);
    order
}

/// Refuses, with an error naming why, a finished run that a replay cannot reproduce: one that
/// ended before anything ran (refused as it began), one that was cancelled (when the cancel came
/// is not recorded, and a replay is never cancelled) or one with a model call that has no
/// receipt (the replay would ask for a model answer that does not exist): said to have ended with
/// a model failure when its last call can have failed (a failed call records nothing), else to be
/// an incomplete recording (its receipts' rows lost, deleted by hand say), which no failure
/// explains.
pub fn check_replayable(run: &RunLog) -> anyhow::Result<()> {
    let run_id = run.header.run_id.as_str();
    let done = own_ending(&run.events);
    // A run refused as it began (a resume whose thread had changed) ran nothing to compare.
    if run
        .events
        .iter()
        .all(|event| matches!(event, AiEvent::Error { .. } | AiEvent::Done { .. }))
    {
        bail!("run {run_id} ended before anything ran: there is nothing to replay");
    }
    if done == Some(DoneReason::Cancelled) {
        bail!(
            "run {run_id} was cancelled: when the cancel came is not recorded, so replay cannot \
             reproduce it; only a run that ended on its own can be replayed"
        );
    }
    // Each model call opens with `StepStarted` and each successful one writes a receipt, in call
    // order.
    let calls = run
        .events
        .iter()
        .filter(|event| matches!(event, AiEvent::StepStarted { .. }))
        .count();
    let recorded = run.receipt_refs.len();
    if calls > recorded {
        // A failed call ends the run: only its last call can have failed, and only when the
        // run ended in error with nothing after that call's step showing an answer.
        if calls == recorded + 1 && done == Some(DoneReason::Error) && !answered_last(&run.events) {
            bail!(
                "run {run_id} ended with a model failure at step {calls}: a failed model call \
                 writes no receipt, and replay needs every model call recorded ({recorded} of \
                 {calls} are)"
            );
        }
        bail!(
            "run {run_id}'s recording is incomplete: receipts are stored for {recorded} of its \
             {calls} model calls, and no failed call explains the rest (the run log lost them); \
             replay needs every model call recorded"
        );
    }
    Ok(())
}

/// How a recorded run ended itself: its `Done`'s reason, or, for a run whose closing save found
/// its thread changed, the reason its recorder's error names in place of the `Done` it replaced
/// (that error's own `Done` says only that the turn was not saved).
fn own_ending(events: &[AiEvent]) -> Option<DoneReason> {
    let mut from_last = events.iter().rev();
    let done = from_last.find_map(|event| match event {
        AiEvent::Done { reason } => Some(*reason),
        _ => None,
    });
    match from_last.next() {
        Some(AiEvent::Error { message }) => crate::record::thread_changed_ending(message).or(done),
        _ => done,
    }
}

/// Whether an event after the last `StepStarted` of `events` shows that its model call
/// answered: its usage, or a tool call it asked for (started, retried, waiting for approval,
/// answered). A failed call shows at most the text and calls it streamed before it failed.
fn answered_last(events: &[AiEvent]) -> bool {
    let step = events
        .iter()
        .rposition(|event| matches!(event, AiEvent::StepStarted { .. }))
        .map_or(0, |at| at + 1);
    events[step..]
        .iter()
        .any(|event| matches!(event, AiEvent::Usage { .. }) || concurrent_call(event).is_some())
}

/// Reads the blob `blob_ref` as `T`, refusing it as [`refuse_unread_keys`] does. The decoder's
/// own message, which may quote the blob, is never shown.
async fn read_blob<T: serde::de::DeserializeOwned + serde::Serialize>(
    blobs: &dyn BlobStore,
    blob_ref: &str,
) -> anyhow::Result<T> {
    let bytes = blobs.get(blob_ref).await?;
    let value: T = serde_json::from_slice(&bytes)
        .map_err(|e| anyhow!("does not decode: {}", ai_core::describe_json_error(&e)))?;
    refuse_unread_keys(&bytes, &value)?;
    Ok(value)
}

/// Refuses a recorded blob (`stored`, read as `read`) that holds a key this build's reader does
/// not know and so dropped: an audit record must not be silently misread, and a replay that
/// ignored what such a key records (written by another version of cogni, a newer one say) could
/// call a run identical that is not. A key holding nothing (see [`holds_nothing`]) says nothing
/// and is accepted: older versions wrote every absent field as `null`, and empty fields are left
/// out. The key is named, with its place, only when it
/// reads as a field name (what cogni writes); anything else may be text a client or a damaged
/// folder put there, and is not shown.
fn refuse_unread_keys<T: serde::Serialize>(stored: &[u8], read: &T) -> anyhow::Result<()> {
    match serde_json::from_slice::<Value>(stored) {
        Ok(stored) => refuse_unread_keys_of(&stored, read),
        Err(_) => Ok(()),
    }
}

/// [`refuse_unread_keys`] over a blob already read as JSON (`stored`), such as a run input with
/// its history put back in place ([`RunInput::load_stored`]).
fn refuse_unread_keys_of<T: serde::Serialize>(stored: &Value, read: &T) -> anyhow::Result<()> {
    let Ok(read) = serde_json::to_value(read) else {
        return Ok(());
    };
    let Some(place) = unread_key(stored, &read) else {
        return Ok(());
    };
    let key = place.last().map_or("", String::as_str);
    let path = place
        .iter()
        .map(|segment| match segment.parse::<usize>() {
            Ok(index) => format!("[{index}]"),
            Err(_) if is_field_name(segment) => format!(".{segment}"),
            Err(_) => ".*".to_owned(),
        })
        .collect::<String>();
    let path = path.trim_start_matches('.');
    let what = if is_field_name(key) {
        format!("holds the key `{key}` (at `{path}`)")
    } else {
        format!("holds a key that is not a field name (at `{path}`; not shown)")
    };
    bail!(
        "{what}, which this build of cogni does not read: the run was recorded by another \
         version, and a replay that ignored what the key records could call the run identical \
         when it is not; replay it with the version of cogni that recorded it"
    )
}

/// Whether `value` is empty: `null`, `[]`, `{}` or `""`.
fn holds_nothing(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::String(text) => text.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

/// Whether `key` reads as a field name cogni writes (`snake_case`, at most 64 characters).
fn is_field_name(key: &str) -> bool {
    key.len() <= 64
        && key.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The place (object keys and array indices from the root) of the first key of `stored` that
/// `read` (what the reader made of it, written back) lacks, unless its value holds nothing
/// (`null`, `[]`, `{}` or `""`: what a reader fills in for a field left out, and what cogni
/// leaves out when it writes, so a key holding it records nothing a replay could miss).
fn unread_key(stored: &Value, read: &Value) -> Option<Vec<String>> {
    match (stored, read) {
        (Value::Object(stored), Value::Object(read)) => stored.iter().find_map(|(key, value)| {
            let mut place = match read.get(key) {
                Some(kept) => unread_key(value, kept)?,
                None if holds_nothing(value) => return None,
                None => Vec::new(),
            };
            place.insert(0, key.clone());
            Some(place)
        }),
        (Value::Array(stored), Value::Array(read)) if stored.len() == read.len() => stored
            .iter()
            .zip(read)
            .enumerate()
            .find_map(|(index, (value, kept))| {
                let mut place = unread_key(value, kept)?;
                place.insert(0, index.to_string());
                Some(place)
            }),
        _ => None,
    }
}

/// A run whose closing write was refused because its thread changed since it began ends, as
/// recorded, with the recorder's `Error` and `Done` in place of the loop's own `Done`
/// ([`crate::record`]'s `ended_as_changed`): the replay's `Done` is closed by the same rule, so
/// its error names the replay's own ending, and how the run ended is compared with the rest. A
/// recording whose error does not name the run's own ending (made before it did) gets the
/// recorded two events in place of the replay's `Done`: the rest is compared as it ran.
fn close_as_recorded(recorded: &[AiEvent], replayed: &mut Vec<AiEvent>) {
    let [
        ..,
        error @ AiEvent::Error { message },
        done @ AiEvent::Done {
            reason: DoneReason::Error,
        },
    ] = recorded
    else {
        return;
    };
    if !message.starts_with(crate::record::THREAD_CHANGED)
        || !matches!(replayed.last(), Some(AiEvent::Done { .. }))
    {
        return;
    }
    if crate::record::thread_changed_ending(message).is_some() {
        crate::record::ended_as_changed(replayed);
    } else {
        replayed.pop();
        replayed.extend([error.clone(), done.clone()]);
    }
}

/// Replays the finished run `run_id` of the run log in `settings.data_dir`: its input, its
/// receipts and every blob they name are checked first, so a missing or damaged blob is an
/// error naming it rather than a difference, and a run replay cannot reproduce (cancelled, or
/// with a failed model call: [`check_replayable`]) is refused up front, as is an input or a
/// receipt holding a key this build does not read (written by another version: it is not
/// silently ignored). Nothing is written.
///
/// Of `settings` it reads only the data folder, `tools.enabled` and the policy (bound only for
/// a run recorded without them; otherwise to say whether today's differ from the recorded
/// ones), the agent's settings and `tools.trace_redacted_results`: no model is called, and no
/// workspace folder is opened, so `settings` need not pass [`Settings::validate`] (an `[llm]`
/// or `tools.workspace` of another machine does not stop a replay).
pub async fn replay_run(settings: &Settings, run_id: &str) -> anyhow::Result<ReplayOutcome> {
    let dir = data_dir(settings)?;
    let log = open_run_log(&dir)?;
    let run = load_run(&log, run_id).await?;
    if run.header.status != RunStatus::Finished {
        bail!(
            "run {run_id} is {}: only a finished run can be replayed",
            run.header.status
        );
    }
    check_replayable(&run)?;
    let input_ref = run
        .header
        .input_ref
        .as_deref()
        .ok_or_else(|| anyhow!("run {run_id} has no recorded input: it cannot be replayed"))?;
    // The decoder's own message would quote the input (the user's message): never shown. Its
    // history's message blobs are read and checked with it, whatever form it was stored in.
    let input = RunInput::load_stored(log.blobs.as_ref(), input_ref)
        .await
        .map_err(anyhow::Error::from)
        .and_then(|(input, stored)| refuse_unread_keys_of(&stored, &input).map(|()| input))
        .with_context(|| format!("run {run_id}: its input {}", shown_cut(input_ref)))?;
    for (i, receipt_ref) in run.receipt_refs.iter().enumerate() {
        let call = i + 1;
        let receipt: ModelReceipt = read_blob(log.blobs.as_ref(), receipt_ref)
            .await
            .with_context(|| {
                let receipt_ref = shown_cut(receipt_ref);
                format!("run {run_id}: model call {call}'s receipt {receipt_ref}")
            })?;
        read_blob::<LlmCompletion>(log.blobs.as_ref(), &receipt.output_ref)
            .await
            .with_context(|| format!("run {run_id}: model call {call}'s output"))?;
        if let Some(deltas_ref) = &receipt.deltas_ref {
            read_blob::<Vec<CompletionDelta>>(log.blobs.as_ref(), deltas_ref)
                .await
                .with_context(|| format!("run {run_id}: model call {call}'s fragments"))?;
        }
        // The replay answers from the above alone, but a receipt whose other parts are gone or
        // damaged is no whole record of its call. The tool set is the encoder's (the provider's
        // wire form, say): its store checks it against its address, and nothing here reads it.
        log.blobs
            .get(&receipt.tools_ref)
            .await
            .with_context(|| format!("run {run_id}: model call {call}'s tool set"))?;
        let calls = receipt.tool_call_refs.len();
        for (i, tool_call_ref) in receipt.tool_call_refs.iter().enumerate() {
            read_blob::<ToolCallBlob>(log.blobs.as_ref(), tool_call_ref)
                .await
                .with_context(|| {
                    format!(
                        "run {run_id}: model call {call}'s tool call {} of {calls}",
                        i + 1
                    )
                })?;
        }
        read_blob::<Vec<OutputItem>>(log.blobs.as_ref(), &receipt.output_items_ref)
            .await
            .with_context(|| format!("run {run_id}: model call {call}'s output items"))?;
    }

    let completion = Arc::new(ReplayCompletion::new(
        log.blobs.clone(),
        run.receipt_refs.clone(),
    ));
    // The tools are bound for their specs and checks only: a replayed tool answers from its
    // record, so no workspace folder is opened (today's may be missing) and none is touched.
    let policy = Arc::new(settings.policy()?);
    let caps = ToolCapabilities::without_workspace();
    let tools = Arc::new(create_tool_source(&settings.core_tools()?, &caps)?);
    let configured = Runtime::with_source(
        settings,
        completion.clone(),
        tools,
        policy,
        caps.clock.clone(),
    );
    let (settings, policy, tools, settings_note) =
        replay_settings(settings, &configured.run_settings, input.settings);
    let tools = recorded_tools(run_id, &tools)?;
    let source = Arc::new(RecordedToolSource::new(
        Arc::new(create_tool_source(&tools, &caps)?),
        &run.records,
        policy.budgets.max_result_bytes,
    ));
    let runtime = Runtime::with_source(
        &settings,
        completion.clone(),
        source.clone(),
        Arc::new(policy),
        configured.clock.clone(),
    );
    let ctx = RunContext::new(run_id, "user:cli", "local")?;
    let catalog = runtime.runner.catalog(&ctx)?;
    let sink = Collect::default();
    input
        .turn
        .drive(
            &runtime.agent,
            input.thread_state,
            (&ctx, &catalog),
            &sink,
            &CancellationToken::new(),
        )
        .await;
    let mut replayed = sink.0.into_inner().unwrap_or_else(|p| p.into_inner());
    close_as_recorded(&run.events, &mut replayed);
    Ok(ReplayOutcome {
        recorded: run.events,
        replayed,
        recorded_revision: input.loop_revision,
        settings_note,
        unasked_calls: completion.remaining(),
    })
}

/// The core tools named `ids` (a run's recorded tool set): one this build does not have is
/// refused naming it, as a recorded key this build does not read is, when its id is a tool id;
/// anything else in its place (a damaged or hand-edited input may hold any text) is not shown.
fn recorded_tools(run_id: &str, ids: &[String]) -> anyhow::Result<Vec<CoreTool>> {
    ids.iter()
        .map(|id| {
            CoreTool::ALL
                .iter()
                .copied()
                .find(|tool| tool.id() == id)
                .ok_or_else(|| {
                    let tool = match ai_core::ToolId::parse(id) {
                        Ok(_) => format!("the tool {id}"),
                        Err(_) => "a tool whose id is not a tool id (not shown)".to_owned(),
                    };
                    anyhow!(
                        "run {run_id} was recorded with {tool}, which this build of cogni does \
                         not have; replay it with the version of cogni that recorded it"
                    )
                })
        })
        .collect()
}

/// The settings a replay runs under, its policy, the ids of the tools it binds, and what to
/// tell of them: the ones the run recorded (over `today` for everything else), with a note
/// naming what of `now` (today's) differs from them, and saying so when a policy check added
/// since would refuse the recorded policy (the replay still runs under it); or, for a run
/// recorded before settings (or its tool set) were kept, today's, with a note saying so.
fn replay_settings(
    today: &Settings,
    now: &RunSettings,
    recorded: Option<RunSettings>,
) -> (Settings, ai_core::ToolPolicy, Vec<String>, Option<String>) {
    let now_tools = now.tools.clone().unwrap_or_default();
    let Some(recorded) = recorded else {
        let note = "the run was recorded before runs kept their settings: it is replayed under \
                    today's policy, agent limits and tools.enabled, which may explain a \
                    difference";
        return (
            today.clone(),
            now.policy.clone(),
            now_tools,
            Some(note.to_owned()),
        );
    };
    let tools_unknown = recorded.tools.is_none().then(|| {
        "the run was recorded before runs kept their tool set: it is replayed with today's \
         tools.enabled, which may explain a difference"
            .to_owned()
    });
    let tools = recorded.tools.clone().unwrap_or_else(|| now_tools.clone());
    let mut sorted = tools.clone();
    sorted.sort();
    // A check added since the run was recorded may refuse its policy (a breaker value of 0,
    // a `retryable` category no retry helps): the runner runs any policy, and a replay asks
    // whether the run comes out as it did, so it still runs under the policy as recorded and
    // says so. (Every value the check refuses is one the runner reads safely.)
    let refused = recorded.policy.check().err().map(|e| {
        format!(
            "the run's recorded policy would be refused today ({e}): it is replayed under it as \
             recorded"
        )
    });
    let differing: Vec<&str> = [
        (recorded.policy != now.policy, "the policy"),
        (sorted != now_tools, "tools.enabled"),
        (recorded.max_steps != now.max_steps, "agent.max_steps"),
        (
            recorded.max_parallel_tools != now.max_parallel_tools,
            "agent.max_parallel_tools",
        ),
    ]
    .into_iter()
    .filter_map(|(differs, what)| differs.then_some(what))
    .collect();
    let differ = (!differing.is_empty()).then(|| {
        format!(
            "today's settings differ from those the run recorded in {}: it is replayed under the \
             recorded ones, and a run started now would not behave as it did",
            differing.join(", ")
        )
    });
    let notes: Vec<String> = (refused.into_iter())
        .chain(tools_unknown)
        .chain(differ)
        .collect();
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    let mut settings = today.clone();
    settings.agent.max_steps = recorded.max_steps;
    settings.agent.max_parallel_tools = recorded.max_parallel_tools;
    (settings, recorded.policy, tools, note)
}

#[cfg(test)]
mod tests;

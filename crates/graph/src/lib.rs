//! The agentic loop: model → tools → model, to exactly one finish.
//!
//! [`reduce`] is the loop's logic as a pure function `(AgentState, AgentEvent) -> (AgentState,
//! Vec<Intent>)`: deterministic, no IO, no clock, no async, and its state is serde data, so a
//! thread can be saved and resumed between any two events. [`Agent`] is the driver: it carries
//! intents out through an [`ai_core::CompletionPort`] and the [`ai_core::ToolRunner`], feeds
//! what happened back as events, and emits [`ai_core::AiEvent`]s, exactly one `Done` per run.
//! [`reconstruct_history`] rebuilds a provider-valid history when a caller only has UI events.
//!
//! This crate never runs a tool except through the runner, never takes tool calls from streamed
//! deltas (only from the decoder's assembled completion), never sends a history that fails
//! [`ai_core::validate_history`], and does no IO of its own: models, tools, clocks and stores
//! are ports.
//!
//! `examples/own_agent.rs` composes an app's own agent from these crates: its own tool, model
//! port and policy, the catalog, the runner and this loop.
//!
//! The ports and types the loop runs on are `cogni-ai-core`'s, re-exported as [`ai_core`]
//! (`graph::ai_core::…`), so an app names them at the version this crate takes:
//!
//! ```
//! use graph::ai_core::{RunContext, ThreadId};
//! use graph::{AgentConfig, InMemoryThreadStore};
//!
//! let ctx = RunContext::new("run-1", "user:alice", "tenant-1")?;
//! let thread = ThreadId::new("thread-1")?;
//! let config = AgentConfig::default().with_system_prompt("Be brief.");
//! let threads = InMemoryThreadStore::default();
//! # let _ = (ctx, thread, config, threads);
//! # Ok::<(), graph::ai_core::Error>(())
//! ```

mod bounded;
mod driver;
mod history;
mod reducer;
mod store;

/// The crate whose ports and types the loop runs on ([`ai_core::CompletionPort`],
/// [`ai_core::ToolRunner`], [`ai_core::ToolCatalog`], [`ai_core::RunContext`],
/// [`ai_core::AiEvent`], …), re-exported so that an app names them at the very version this
/// crate takes.
pub use ai_core;
pub use driver::{Agent, AgentConfig, GraphError};
pub use history::{HistoryItem, ReconstructError, reconstruct_history};
pub use reducer::{
    AgentEvent, AgentState, ApprovalDecision, CallIds, Intent, MAX_DENIAL_REASON_CHARS,
    PendingApproval, Phase, denial_message, lost_result, reduce,
};
pub use store::InMemoryThreadStore;

/// The revision of the loop's observable behaviour: the events and the history that one input,
/// with the same model answers and tool results, produces. Raised with every change to that
/// behaviour, so a replay of a run recorded under another revision can say why it may differ.
///
/// 1. The first recorded revision.
/// 2. A tool name providers refuse, in a saved thread, is healed before the next model call.
/// 3. A run whose last model turn the provider cut off (`length`, `content_filter`) without
///    asking for tools ends `length` or `content_filter`, no longer `stop`.
/// 4. A call that asked for approval and is cancelled instead (by the run's cancel or by the next
///    user message) is shown ended: a `ToolCallStart` without arguments and a `cancelled`
///    `ToolCallResult`.
/// 5. A run whose last model turn ended for a reason the loop does not know (vLLM's `abort`, any
///    `FinishReason::Other`) without asking for tools ends `other`, no longer `stop`.
/// 6. Text the model streamed before its call failed or was cancelled is kept in the history as
///    an assistant message (unless blank), as crash recovery already kept it.
/// 7. A last turn's finish reason named as a backend names it and a gateway passes it through is
///    read as what it means (TGI's `eos_token`, Anthropic's `end_turn` and `max_tokens`, Gemini's
///    `STOP` and `SAFETY`, in any case): `stop`, `length` or `content_filter`, no longer `other`.
/// 8. The calls of a turn whose finish reason is a backend's own name for a cut (Anthropic's
///    `max_tokens` or `refusal`, Gemini's `MAX_TOKENS` or `SAFETY`, `LENGTH`) are answered as not
///    run, as for `length` and `content_filter`, no longer run.
/// 9. A cut turn with tool calls (none of which run) that takes the last step of `max_steps`
///    ends for its cut (`length` or `content_filter`; `length` when every call was cut short,
///    until 12), no longer `max_steps`.
/// 10. A call for which a port the runner awaits panics (an authorization hook, a connection
///     broker, a tool source, a clock) is answered `execution` and shown ended, and the loop goes
///     on, where the panic took the run (and its one `Done`) down.
/// 11. A call cut short in a turn that did not end for the output limit (vLLM's `abort`: the
///     server aborted the request) is answered "the tool call was cut short (the model's answer
///     ended early) and was not run", no longer told the model hit its output limit.
/// 12. A turn whose every call was cut short, in a turn that names no cut (vLLM's `abort`, or a
///     turn that says it ended), and which takes the last step of `max_steps` ends `other`, no
///     longer `length`: nothing says the model hit its output limit.
/// 13. Text a model's completion adds to the text its port streamed is shown as one more
///     `TextDelta`, where only a port that streamed no text at all had its text shown.
/// 14. Approval decisions that name a call the thread does not wait for (a resume meant for an
///     earlier pause) decide nothing and end the run `error`, the thread still waiting, where
///     they were ignored and every waiting call they did not name was denied; so do decisions
///     that decide one call twice, where the call was denied unless all approved its hash. A
///     user message without text (empty, or whitespace only) is refused: the run ends `error`
///     with the thread as it was, where the message was recorded and sent to the model; a saved
///     thread holding one leaves it out at its next model call.
/// 15. Approval decisions for a thread that waits for none (a new thread, a finished run, a
///     pause already settled, a run still out) end the run `error` saying the thread waits for no
///     approval, and keep the state as it was, where its phase became `finished` (`error`) and
///     the open calls of a run still out were answered cancelled.
/// 16. An app's event sink that panics on an event the driver emits itself (a step's start, a
///     completion's usage or added text, the answer of a call that never ran) ends the run
///     `error` at its next step, saying the sink panicked, the calls still open answered
///     cancelled, where the panic took the run (and its one `Done`) down.
/// 17. A cancel while `run_thread` or `resume_thread` waits for the store to load the thread
///     ends the run `cancelled`, with an `Error` saying so, where it waited for the store for
///     ever; a save is still never abandoned.
/// 18. The calls a run stopped for its event sink's panic was about to run (answered cancelled
///     without running) are shown ended: a `ToolCallStart` without arguments and a `cancelled`
///     `ToolCallResult` each, where a client that had shown them (streamed, or asking for
///     approval) never saw them end.
/// 19. So are the calls whose answers such a run was about to show (answered without running,
///     as a call cut short is), and the calls behind them it was about to run, where a stop
///     that came before those answers were shown (the sink panicked on a completion's usage,
///     say) left both unshown.
/// 20. A run whose event sink panics on the usage or text of the completion that ends it, or on
///     the answers shown just before its end for calls that never ran, ends as it would have
///     (`stop` for an answer, `length` for a turn cut with its calls, …, with no `Error`), where
///     it ended `error` saying the sink's panic stopped it, though nothing was left to stop.
/// 21. A run whose event sink's panic stops it after its cancel fired (its token had fired when
///     the stop came, with calls left to run or the model left to call) ends `cancelled`, with no
///     `Error`, where it ended `error` saying the sink's panic stopped it.
/// 22. So does a run whose event sink panics on a delta the model port streams after its cancel
///     fired (the text streamed kept), where its model call failed and it ended `error` saying
///     the sink's panic stopped the model call.
/// 23. So does a run whose model call fails (the port answers an error, or panics) once its
///     cancel fired, in the very poll in which the token fired (the cancel aborted the port's
///     request), where it ended `error` with the port's error.
/// 24. The runner's breaker and retries (one input, the same tool results, other calls run or
///     refused): a failure rate opens a circuit under a `failure_threshold` of 0, where the
///     breaker was off; a successful half-open trial closes the circuit, where the failures
///     that opened it could reopen it at once; a retry whose wait's timer fires at or past the
///     call's deadline (a late timer) is not started, and the call ends with the failure it had,
///     where the tool ran again and the call ended `timeout`.
/// 25. A streamed call is announced under the id it runs under whatever order the turn's ids
///     arrive in (they are claimed in the completion's order, as the reducer claims them), where
///     a repeated id that arrived before an earlier call's was announced under the id another
///     call then ran under; a call after one whose id has not streamed yet is announced once it
///     has (never, when the decoder synthesizes that id at the end).
/// 26. The runner (one input, the same tool results, other calls run or refused): a failure no
///     retry can help (`validation`, `permanent`, `cancelled`, `policy`) is never retried, even
///     under a policy built in code or recorded before loading refused such a list, where the
///     tool ran up to `max_attempts` times; a cancel that fires as an attempt starts ends the
///     call `cancelled` before the tool runs, where a tool that finished on its first poll
///     answered.
/// 27. The runner's approval hash (`args_hash`, in `ApprovalRequired` and the paused state)
///     covers the tool's id as well as the canonical arguments, where it covered the arguments
///     alone and an approval of one tool's call let another tool's call under the same call id
///     and arguments run; a thread paused under an earlier revision holds the older hash, and
///     its approved calls are refused `policy_denied`. A decision whose hash is not the call's
///     is refused saying the approval was for another tool or other arguments, where it said
///     other arguments only.
/// 28. A model port that answers `Cancelled` though the run's token has not fired fails its
///     model call (the run ends `error`, saying the port cancelled the call on its own), where
///     the run ended `cancelled`, as if the user had stopped it.
/// 29. A user message on a thread saved past its pause whose resume never saved its end (its
///     closing save failed, its task or process died) answers the approved calls that were out
///     `interrupted`, saying they may have run and their results are lost ([`lost_result`]),
///     where it answered them `cancelled`, saying the run was cancelled before they finished.
/// 30. The runner's approval hash of a call to a tool that needs a connection covers the
///     connection's id too, where an approval of the call on one connection let a resume that
///     selected another the actor was granted run it there; a thread paused under an earlier
///     revision holds the older hash for such a call, and its approval is refused
///     `policy_denied`. A tool without a connection keeps its hash.
/// 31. The run of a user message that answers calls so (29) shows those answers (a
///     `ToolCallStart` without arguments and the `interrupted` `ToolCallResult` each) before it
///     calls the model, where they were written into the history and never shown.
/// 32. A run whose event sink panicked on an event the driver showed while the turn's tools ran
///     (the failure of a call whose port panicked), and whose turn then waits for approval,
///     pauses (`awaiting_approval`, with no `Error`), where it ended `error`, the waiting calls
///     answered cancelled: a pause is the run's end, and nothing was left to stop. An event of a
///     run that reaches the reducer while its thread is paused for approval changes nothing,
///     where it ended the pause (the waiting calls answered cancelled).
/// 33. A call announced while it streamed that the model's completed answer does not hold under
///     that id (the port named its calls otherwise than it streamed them, or left one out) is
///     answered as never run (a `validation` `ToolCallResult`, with no start), where it was
///     never answered; and a later call of the run under its id is renamed (`{id}_2`, …), as
///     one under an id the thread holds is.
pub const LOOP_REVISION: u32 = 33;

/// The agent, the thread store and the loop's state are shared by, or moved between, the tasks
/// of every run.
#[allow(dead_code)]
fn _assert_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<Agent>();
    assert::<AgentConfig>();
    assert::<AgentState>();
    assert::<AgentEvent>();
    assert::<Intent>();
    assert::<InMemoryThreadStore>();
    assert::<GraphError>();
    assert::<ReconstructError>();
}

//! Sans-IO encoders from the runtime's [`ai_core::AiEvent`]s to the UI stream protocols a
//! frontend consumes, and the request bodies those frontends send.
//!
//! - [`agui`]: the AG-UI protocol (`RUN_STARTED` … `RUN_FINISHED` / `RUN_ERROR`), with its
//!   `RunAgentInput` request.
//! - [`ai_sdk`]: the Vercel AI SDK UI message stream v1 (`start` … `finish` / `error`, then
//!   `[DONE]`), with the `useChat` request and its UI messages.
//!
//! Each protocol has one translator: a small state machine fed one event at a time that returns
//! the protocol's events in an order the protocol's own client accepts (exactly one start event,
//! first; every message and tool call opened before it is used and closed before the run ends;
//! exactly one terminal event). An event naming a call the stream has answered, starting a
//! call it has started, or bringing arguments to a call whose arguments it has closed, is
//! dropped, and said to be ([`ReusedCallId`]).
//! [`sse`] frames them.
//!
//! This crate owns only these shapes. It never does IO, never runs anything, and never decides
//! what a client may see: events arrive already redacted, and a translator only renames them.

use ai_core::{AiEvent, ToolCallId};

pub mod agui;
pub mod ai_sdk;
pub mod sse;

/// What a client is told of a tool call whose arguments were still streaming when the run
/// ended: the runner takes only complete calls, so it never ran.
pub(crate) const UNFINISHED_CALL: &str =
    "the run ended before this call's arguments were complete, so it never ran";

/// What a client is told of a tool call the runner refused before running it (its start came
/// without arguments: they were complete but invalid, the tool is unknown, or the call was
/// denied) whose result, which follows at once, had not come when the run ended (its task died,
/// or its log could not be written): it never ran, and its arguments were complete.
pub(crate) const REFUSED_CALL: &str =
    "the run ended before this call's result arrived; it was refused, so it never ran";

/// What a client is told of a tool call whose arguments were complete (its start came, with
/// them) but which had no result when the run ended: the run's task died or its log could not be written,
/// so whether the tool ran is unknown. The loop itself never ends a run with such a call.
pub(crate) const UNANSWERED_CALL: &str =
    "the run ended before this call's result arrived: the tool may have run";

/// What a client is told of a tool call shown waiting for approval when the run ended without
/// pausing (its log could not be written, or its task died): no interrupt will ask for the
/// approval and the thread does not wait for it, so it never ran. (The loop answers the waiting
/// calls of a run it cancels itself, before its end.)
pub(crate) const UNAPPROVED_CALL: &str =
    "the run ended before this call was approved, so it never ran";

/// What a client is told of a call the user denied, in a run that resumed from the user's
/// answers and ended before it said so (its log could not be written, or its task died): a
/// denied call never runs. Over AG-UI, also what a call a new message
/// cancelled is told (the user did not approve it) when the run that cancels it ends so.
pub(crate) const UNRECORDED_DENIAL: &str =
    "the run ended before this call's denial was recorded; the call never ran";

/// What a client is told of a tool call its stream left without a result when the server cut
/// the stream (the client fell behind) while the run goes on: the call's arguments may still
/// complete, it may run or wait for approval, and its result is in the thread once the run ends,
/// which the client's next message goes on from (no endpoint reads a thread back).
pub(crate) const CUT_CALL: &str = "the stream was cut before this call's result arrived; the run \
                                   goes on, and its thread, which the next message goes on from, \
                                   holds the result once it has ended";

/// What a client is told of a call the runner refused (see [`REFUSED_CALL`]) whose result its
/// stream did not carry because the server cut the stream: it never ran, whatever the run does.
pub(crate) const CUT_REFUSED_CALL: &str =
    "the stream was cut before this call's result arrived; it was refused, so it never ran";

/// What a client is told of a call the user denied (see [`UNRECORDED_DENIAL`]) whose answer its
/// stream did not carry because the server cut the stream: a denied call never runs.
pub(crate) const CUT_DENIAL: &str =
    "the stream was cut before this call's denial was recorded; the call never runs";

/// What a translator's `push` returns for an event it dropped because its tool call id was
/// reused: it names a call the stream has answered already (a start, arguments, an approval
/// request, a retry or a result of a call whose result was sent), it starts a call the stream
/// has started and not answered (a second `ToolCallStreamStart` of a call it shows, or a second
/// `ToolCallStart` of one that started to run or was refused), or it brings arguments to a call
/// whose arguments the stream has closed (a `ToolCallArgsDelta` of a call whose `ToolCallStart`
/// came, streamed or not, of one waiting for approval, or of one an earlier run showed).
///
/// A stream shows each call once and answers it once, so the event is dropped and the stream
/// stays valid (a call still open keeps waiting for its own result); the call it would have
/// shown is not shown. `graph`'s loop renames a call id an endpoint reuses
/// before any event names it, so its events never cause this; a caller driving a translator
/// from another source, against an endpoint that reuses ids (SGLang sends `"0"` on every
/// turn), must give each call an id of its own to have it shown.
///
/// Its message says how the stream shows that call: answered, started, its arguments
/// streaming, waiting for approval, or shown by an earlier run and answered by this one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReusedCallId {
    id: ToolCallId,
    shown: Shown,
}

impl ReusedCallId {
    /// The id of the call the stream shows already.
    pub fn tool_call_id(&self) -> &ToolCallId {
        &self.id
    }
}

impl std::fmt::Display for ReusedCallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = match self.shown {
            Shown::Answered => "which this stream has answered",
            Shown::Started => "which this stream has started",
            Shown::Streaming => "whose arguments this stream is showing",
            Shown::AwaitingApproval => "which this stream shows waiting for approval",
            Shown::Earlier => "which an earlier run showed and this run answers",
        };
        write!(
            f,
            "an event reuses the id of tool call {}, {shown}: the event is dropped (a call id \
             names one call in a run)",
            self.id
        )
    }
}

impl std::error::Error for ReusedCallId {}

/// How far a translator has shown a call, as far as a reused id goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shown {
    /// Its result was sent: nothing more is sent for it.
    Answered,
    /// Its start came (`ToolCallStart`, with or without arguments), and its result is due: no
    /// start and no arguments are sent for it again.
    Started,
    /// Its arguments stream: its start may still come, and arguments may still come.
    Streaming,
    /// Shown waiting for approval, its arguments closed: its start may still come (if the run
    /// does not pause), but no stream start and no arguments are sent for it again.
    AwaitingApproval,
    /// Shown by an earlier run, which this run answers (its start may still come): no stream
    /// start and no arguments are sent for it.
    Earlier,
}

/// [`ReusedCallId`] when `event` names a tool call that `shown` says the stream answered,
/// starts one it has started (a `ToolCallStreamStart` of a call it shows, a `ToolCallStart` of
/// one whose start came), or brings arguments to one whose arguments no longer stream (a
/// `ToolCallArgsDelta` of a call it shows but for one still [`Shown::Streaming`]). A translator
/// sends nothing for such an event.
pub(crate) fn reused_call_id(
    event: &AiEvent,
    shown: impl Fn(&ToolCallId) -> Option<Shown>,
) -> Result<(), ReusedCallId> {
    let Some(id) = event.tool_call_id() else {
        return Ok(());
    };
    let Some(how) = shown(id) else {
        return Ok(());
    };
    let reused = matches!(
        (how, event),
        (Shown::Answered, _)
            | (_, AiEvent::ToolCallStreamStart { .. })
            | (Shown::Started, AiEvent::ToolCallStart { .. })
            | (
                Shown::Started | Shown::AwaitingApproval | Shown::Earlier,
                AiEvent::ToolCallArgsDelta { .. }
            )
    );
    match reused {
        true => Err(ReusedCallId {
            id: id.clone(),
            shown: how,
        }),
        false => Ok(()),
    }
}

/// A translator moves between tasks with the run whose events it renames.
#[allow(dead_code)]
fn _assert_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<agui::Translator>();
    assert::<agui::AguiEvent>();
    assert::<agui::RunAgentInput>();
    assert::<ai_sdk::Translator>();
    assert::<ai_sdk::UiChunk>();
    assert::<ai_sdk::ChatRequest>();
}

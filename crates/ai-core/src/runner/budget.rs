//! Running a tool's future under the runtime budget and the run's cancellation token.

use std::any::Any;
use std::cell::Cell;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{ToolError, ToolErrorCategory, ToolErrorCode, ToolFailure};

/// Awaits `exec`, ending it as `cancelled` when the token fires, as `timeout` at the deadline
/// (`deadline()` gives it and the budget it stands for, fixed before the first poll), and as
/// `execution` when it fails or panics (`validation` when the tool refuses its arguments with
/// [`crate::ToolError::invalid_input`]). `deadline` is only called for a tool that does not
/// finish on its first poll. `stopping` says what a `timeout`, a `cancelled` or a panic tells of
/// the change the tool may have made. A token that fired before the attempt is the caller's to
/// check, before it calls the tool's `exec` (which may do its work as it is called).
pub(super) async fn run<F, D>(
    exec: F,
    deadline: D,
    cancel: &CancellationToken,
    stopping: Stopping,
) -> Result<Value, ToolFailure>
where
    F: Future<Output = Result<Value, ToolError>> + Unpin,
    D: FnOnce() -> (Instant, Duration),
{
    let mut exec = CatchUnwind(exec);
    // Most tools finish on their first poll: poll once before arming the timer and the
    // cancellation waiter, which a finished tool would only register and drop again. The
    // deadline counts from the attempt's start, taken before, so the first poll counts against
    // the budget.
    let first = std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut exec).poll(cx))).await;
    let finished = match first {
        Poll::Ready(finished) => finished,
        // Boxed so that the timer's state is not part of every call's future.
        Poll::Pending => {
            let (deadline, budget) = deadline();
            Box::pin(wait(exec, deadline, budget, cancel, stopping)).await?
        }
    };
    match finished {
        Err(_panic) => Err(stopping.panicked()),
        Ok(Err(error)) => {
            let failure = match error.category() {
                ToolErrorCategory::Validation => ToolFailure::new(
                    ToolErrorCode::Validation,
                    format!("invalid tool arguments: {}", error.safe_message()),
                ),
                category => ToolFailure::categorized(
                    ToolErrorCode::Execution,
                    category,
                    format!("the tool failed: {}", error.safe_message()),
                ),
            };
            Err(match error.retry_after() {
                Some(wait) => {
                    failure.with_retry_after_ms(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX))
                }
                None => failure,
            })
        }
        Ok(Ok(value)) => Ok(value),
    }
}

/// The slow path: the tool did not finish on its first poll.
async fn wait<F: Future + Unpin>(
    exec: CatchUnwind<F>,
    deadline: Instant,
    budget: Duration,
    cancel: &CancellationToken,
    stopping: Stopping,
) -> Result<<CatchUnwind<F> as Future>::Output, ToolFailure> {
    // The tool's future was polled: whatever stops it now, it had started.
    tokio::select! {
        biased;
        finished = tokio::time::timeout_at(deadline, exec) => {
            finished.map_err(|_elapsed| stopping.timed_out(budget))
        }
        () = cancel.cancelled() => Err(stopping.cancelled(true)),
    }
}

/// Awaits a port the runner calls before the tool (the authorization hook, the connection
/// broker) under the cancellation token and what is left of the call's runtime budget (`budget`
/// counted from `started`), so that no port can hold a call past either. `what` names the port
/// in the `timeout` message.
pub(super) async fn guard<T>(
    what: &str,
    port: impl Future<Output = T>,
    (started, budget): (Instant, Duration),
    cancel: &CancellationToken,
) -> Result<T, ToolFailure> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(cancelled()),
        answer = tokio::time::timeout_at(later(started, budget), port) => answer.map_err(|_elapsed| {
            ToolFailure::new(
                ToolErrorCode::Timeout,
                format!(
                    "the call ran out of its {} ms budget waiting for {what}",
                    budget.as_millis()
                ),
            )
        }),
    }
}

/// What a `timeout` or `cancelled` that stops an attempt, or a panic that ends it, says of the
/// change its tool may have made: a tool that is not read-only and had started (this attempt's
/// future was polled, or an earlier attempt's) may have made it, since dropping its future (or
/// unwinding it) does not undo what it did or stop work it handed to another thread (a
/// workspace write commits on a blocking thread). The
/// model is told to check before calling it again, rather than believe nothing happened. Built
/// only when a call fails: the message costs nothing on the path of a call that succeeds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Stopping {
    /// The tool is not read-only.
    pub(super) changes_state: bool,
    /// An earlier attempt of the call ran.
    pub(super) ran_before: bool,
}

/// `at + by`, or [`FAR`] after `at` when that is past the latest instant an [`Instant`] holds
/// (`+` would panic: on some platforms an `Instant` holds less than on Linux, whose range no
/// budget reaches): a deadline no run reaches is no deadline, and a circuit cooling down past
/// the end of time stays open for good. `at` itself only for an instant within [`FAR`] of the
/// end of time, which no clock reads.
pub(super) fn later(at: Instant, by: Duration) -> Instant {
    at.checked_add(by)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

/// How far off [`later`] puts a time past the end of time: 30 years, far past any run, as
/// Tokio puts a timeout too long for its clock (and a timer can still be set for it, where one
/// at the very end of time would overflow as Tokio rounds it up to its millisecond).
const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// What [`Stopping`] adds to the message of a tool that may have made its change.
const MAY_HAVE_CHANGED: &str = "the tool is not read-only and had started, so it may have made \
                                its change: check before calling it again";

impl Stopping {
    /// Whether the call's tool may have made its change, `started`: this attempt's future was
    /// polled.
    fn may_have_changed(self, started: bool) -> bool {
        self.changes_state && (started || self.ran_before)
    }

    /// The failure of a tool that did not finish within `budget`. Its future was polled: a
    /// deadline is armed only for a tool that did not finish on its first poll.
    pub(super) fn timed_out(self, budget: Duration) -> ToolFailure {
        let ms = budget.as_millis();
        ToolFailure::new(
            ToolErrorCode::Timeout,
            if self.may_have_changed(true) {
                format!("the tool did not finish within {ms} ms; {MAY_HAVE_CHANGED}")
            } else {
                format!("the tool did not finish within {ms} ms")
            },
        )
    }

    /// The failure of a tool that panicked: `execution`. Its future was polled, and it stopped
    /// midway with no word of what it had done, as a tool stopped at its deadline does.
    pub(super) fn panicked(self) -> ToolFailure {
        const FAILED: &str = "the tool failed unexpectedly";
        ToolFailure::new(
            ToolErrorCode::Execution,
            if self.may_have_changed(true) {
                format!("{FAILED}; {MAY_HAVE_CHANGED}")
            } else {
                FAILED.to_owned()
            },
        )
    }

    /// The failure of a call whose circuit breaker refused its next attempt (`refusal`, a
    /// `circuit_open`) after an earlier one ran: a tool that is not read-only may have made its
    /// change then, as when the call is cancelled while it waits to run again.
    pub(super) fn refused(self, refusal: ToolFailure) -> ToolFailure {
        if self.may_have_changed(false) {
            let said = format!("{}; {MAY_HAVE_CHANGED}", refusal.safe_message);
            let failure = ToolFailure::categorized(refusal.code, refusal.category, said);
            match refusal.retry_after_ms {
                Some(wait) => failure.with_retry_after_ms(wait),
                None => failure,
            }
        } else {
            refusal
        }
    }

    /// The failure of a call cancelled while its tool ran or waited to run again (`started`:
    /// this attempt's future was polled).
    pub(super) fn cancelled(self, started: bool) -> ToolFailure {
        if self.may_have_changed(started) {
            ToolFailure::new(
                ToolErrorCode::Cancelled,
                format!("the tool call was cancelled; {MAY_HAVE_CHANGED}"),
            )
        } else {
            cancelled()
        }
    }
}

/// Runs one of the tool's own checks (`validate_input`, `validate_output`, `redact`), turning a
/// panic into `None`, so one bad tool cannot take the loop down from outside `exec` either. The
/// payload is dropped unread, as in [`CatchUnwind`].
pub(super) fn unless_panics<T>(check: impl FnOnce() -> T) -> Option<T> {
    catch_unwind(AssertUnwindSafe(|| port_call(A_TOOL, check))).ok()
}

/// Runs `code`, a call of one of the tool's plain methods (`spec`, `requires_connection`,
/// `idempotent`, `refused_before_attempt`), as the tool's code: a panic in it is reported by
/// [`install_tool_panic_hook`] without its message, as one in `exec` is. It is not caught: such
/// a method answers no step's question with a failure, so its panic unwinds out of
/// [`crate::ToolRunner::run_tool`], as a port's does.
pub(super) fn tool_code<T>(code: impl FnOnce() -> T) -> T {
    port_call(A_TOOL, code)
}

/// What [`install_tool_panic_hook`] calls a tool's code.
const A_TOOL: &str = "a tool";

thread_local! {
    /// Whose code this thread is running when it is not cogni's own: a tool's (its `exec` being
    /// polled, or one of its checks) or a port's, by name; `None` for cogni's. For
    /// [`install_tool_panic_hook`].
    static FOREIGN: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Marks the thread as running `whose` code (`None`: cogni's own) until dropped, also when that
/// code panics; then the mark before it is back.
struct Running(Option<&'static str>);

// Both inlined: the generic `port_call` and `port_future` are instantiated in the caller's
// crate, where these would otherwise be calls into ai-core that pass the two-word mark through
// memory (written as two words, read back as one: a stalled load). A successful tool call marks
// about a dozen port and tool calls; inlined, `runner_pipeline_plain` runs ~110 instructions and
// about 3% of its time fewer (callgrind, perf cpu-clock).
impl Running {
    #[inline]
    fn enter(whose: Option<&'static str>) -> Self {
        Self(FOREIGN.replace(whose))
    }
}

impl Drop for Running {
    #[inline]
    fn drop(&mut self) {
        FOREIGN.set(self.0);
    }
}

/// Runs `call`, a synchronous method of a port (`port` names it, as "the clock"), as the
/// port's code: a panic in it is reported by [`install_tool_panic_hook`] without its message,
/// as a tool's is. The panic still unwinds: catching it is the caller's.
///
/// ```
/// let answer = ai_core::port_call("the clock", || 42);
/// assert_eq!(answer, 42);
/// ```
pub fn port_call<T>(port: &'static str, call: impl FnOnce() -> T) -> T {
    let _port = Running::enter(Some(port));
    call()
}

/// Polls `future`, a port's (`port` names it, as "the model port"), as the port's code: a panic
/// while it is polled is reported by [`install_tool_panic_hook`] without its message, as a
/// tool's is. The panic still unwinds: catching it is the caller's (the `graph` driver turns
/// it into a failure). Code of the caller's own that the port calls back (a [`crate::DeltaSink`])
/// should be run through [`own_code`], so that its panics are not taken for the port's.
pub async fn port_future<F: Future>(port: &'static str, future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| port_call(port, || future.as_mut().poll(cx))).await
}

/// Runs `code` as cogni's own, also inside a port's or a tool's call (a callback it makes): a
/// panic in it reaches the hook installed before [`install_tool_panic_hook`], message and all.
///
/// ```
/// let shown = ai_core::port_call("the model port", || ai_core::own_code(|| "a delta"));
/// assert_eq!(shown, "a delta");
/// ```
pub fn own_code<T>(code: impl FnOnce() -> T) -> T {
    let _own = Running::enter(None);
    code()
}

/// Installs a panic hook that keeps a tool's or a port's panic message out of the process's
/// output: a panic in a tool's own code (its `exec` as the runner polls it, its
/// `validate_input`, `validate_output`, `redact` and `counted_result_bytes`, and the plain
/// methods the runner asks it: `spec`, `requires_connection`, `idempotent`,
/// `refused_before_attempt`), or in a port's (the ones the runner
/// calls for a call: the tool source, the authorization hook, the connection broker, the clock,
/// the event sink it is given; the tool source as [`crate::ToolCatalog::build`] lists its tools'
/// specs; and what a caller marks with [`port_future`] or [`port_call`], as
/// the `graph` driver does for the model port, the thread store and the app's event sink) is
/// reported as an `ERROR` tracing event saying whose
/// code it was and where it happened (`panic.location`), never its message, which may hold
/// anything the tool or port held (a token, the arguments, the conversation). Every other panic
/// goes to the hook installed before, unchanged: cogni's own code, and the caller's run through
/// [`own_code`], stay as loud as without it.
///
/// The runner catches a panic in a tool's `exec` or its checks either way (the call ends
/// `execution`, or the failed check's code, with a safe message); one in a plain method unwinds
/// as a port's does, and the `graph` driver catches both; without this hook Rust's default one
/// still prints the message to stderr. Call it once, at startup, from the composition root; calling
/// it again wraps the hook again, to the same effect. A task or thread the tool or port spawns
/// itself is not its code here: its panics reach the previous hook.
pub fn install_tool_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(whose) = FOREIGN.get() {
            let location = info
                .location()
                .map(|at| format!("{}:{}:{}", at.file(), at.line(), at.column()));
            tracing::error!(
                panic.location = location.as_deref().unwrap_or("unknown"),
                "{whose} panicked; its message is not shown, since it may hold what {whose} held"
            );
        } else {
            previous(info);
        }
    }));
}

/// The failure of a call cancelled before its tool started.
pub(super) fn cancelled() -> ToolFailure {
    ToolFailure::new(ToolErrorCode::Cancelled, "the tool call was cancelled")
}

/// Turns a panic while polling the tool's future into a value, so one bad tool cannot take the
/// loop down. The payload is dropped unread: it may hold anything.
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        let polled = catch_unwind(AssertUnwindSafe(|| {
            port_call(A_TOOL, || Pin::new(inner).poll(cx))
        }));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_adds_and_never_overflows() {
        let now = Instant::now();
        let second = Duration::from_secs(1);
        assert_eq!(later(now, second), now + second);
        assert_eq!(later(now, Duration::ZERO), now);
        // Past the end of time: far off, and no panic.
        assert!(now.checked_add(Duration::MAX).is_none());
        assert_eq!(later(now, Duration::MAX), now + FAR);
    }
}

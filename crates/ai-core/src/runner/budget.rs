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
/// finish on its first poll.
pub(super) async fn run<F, D>(
    exec: F,
    deadline: D,
    cancel: &CancellationToken,
) -> Result<Value, ToolFailure>
where
    F: Future<Output = Result<Value, ToolError>> + Unpin,
    D: FnOnce() -> (Instant, Duration),
{
    if cancel.is_cancelled() {
        return Err(cancelled());
    }
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
            Box::pin(wait(exec, deadline, budget, cancel)).await?
        }
    };
    match finished {
        Err(_panic) => Err(ToolFailure::new(
            ToolErrorCode::Execution,
            "the tool failed unexpectedly",
        )),
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
) -> Result<<CatchUnwind<F> as Future>::Output, ToolFailure> {
    tokio::select! {
        biased;
        finished = tokio::time::timeout_at(deadline, exec) => {
            finished.map_err(|_elapsed| timed_out(budget))
        }
        () = cancel.cancelled() => Err(cancelled()),
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
        answer = tokio::time::timeout_at(started + budget, port) => answer.map_err(|_elapsed| {
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

/// The failure of a tool that did not finish within `budget`.
pub(super) fn timed_out(budget: Duration) -> ToolFailure {
    ToolFailure::new(
        ToolErrorCode::Timeout,
        format!("the tool did not finish within {} ms", budget.as_millis()),
    )
}

/// Runs one of the tool's own checks (`validate_input`, `validate_output`, `redact`), turning a
/// panic into `None`, so one bad tool cannot take the loop down from outside `exec` either. The
/// payload is dropped unread, as in [`CatchUnwind`].
pub(super) fn unless_panics<T>(check: impl FnOnce() -> T) -> Option<T> {
    catch_unwind(AssertUnwindSafe(|| {
        let _tool = InTool::enter();
        check()
    }))
    .ok()
}

thread_local! {
    /// Whether this thread is running a tool's own code (its `exec` being polled, or one of its
    /// checks), for [`install_tool_panic_hook`].
    static IN_TOOL: Cell<bool> = const { Cell::new(false) };
}

/// Marks the thread as running a tool's code until dropped (also when that code panics).
struct InTool(bool);

impl InTool {
    fn enter() -> Self {
        Self(IN_TOOL.replace(true))
    }
}

impl Drop for InTool {
    fn drop(&mut self) {
        IN_TOOL.set(self.0);
    }
}

/// Installs a panic hook that keeps a tool's panic message out of the process's output: a
/// panic in a tool's own code (its `exec` as the runner polls it, and its `validate_input`,
/// `validate_output` and `redact`) is reported as an `ERROR` tracing event with only where it
/// happened (`panic.location`), never its message, which may hold anything the tool held (a
/// token its capability gave it, the arguments). Every other panic goes to the hook installed
/// before, unchanged.
///
/// The runner catches a tool's panic either way (the call ends `execution` with a safe
/// message); without this hook Rust's default one still prints the message to stderr. Call it
/// once, at startup, from the composition root; calling it again wraps the hook again, to the
/// same effect. A task or thread the tool spawns itself is not the tool's code here: its panics
/// reach the previous hook.
pub fn install_tool_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if IN_TOOL.get() {
            let location = info
                .location()
                .map(|at| format!("{}:{}:{}", at.file(), at.line(), at.column()));
            tracing::error!(
                panic.location = location.as_deref().unwrap_or("unknown"),
                "a tool panicked; its message is not shown, since it may hold what the tool held"
            );
        } else {
            previous(info);
        }
    }));
}

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
            let _tool = InTool::enter();
            Pin::new(inner).poll(cx)
        }));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}

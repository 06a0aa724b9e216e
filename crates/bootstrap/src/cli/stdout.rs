//! Where the CLI's output goes: stdout, whose reader may go away before it has read everything
//! (`cogni tools list --json | head -1`).

use std::io::Write;

/// Stdout was closed by its reader (a pipe to `head` that has read what it wanted): there is no
/// one left to print to. `cogni` then ends quietly, with status 0, as ripgrep does
/// ([`is_stdout_closed`]). Only a broken pipe on stdout is this: one on the model's connection,
/// a socket or a file stays the I/O error it is, and is reported.
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout was closed by its reader")
    }
}

impl std::error::Error for StdoutClosed {}

/// Whether `error` is, or was caused by, a [`StdoutClosed`] anywhere in its chain (also as the
/// I/O error a write to the CLI's stdout returns), so `main` can end quietly on exactly that.
pub fn is_stdout_closed(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        // `io::Error::source` skips the error it wraps: look inside it.
        cause.is::<StdoutClosed>()
            || cause
                .downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
                .is_some_and(|inner| inner.is::<StdoutClosed>())
    })
}

/// The process's stdout, locked: every write of the CLI's output goes through it.
pub(crate) fn stdout() -> Stdout {
    Stdout(std::io::stdout().lock())
}

/// [`std::io::Stdout`], locked, whose broken pipe is a [`StdoutClosed`] (wrapped in an
/// `io::Error`, kind `Other`); every other error is returned as it is. Not to be held across
/// an `.await`.
pub(crate) struct Stdout(std::io::StdoutLock<'static>);

/// `error`, or a [`StdoutClosed`] in its place if it is a broken pipe.
fn on_stdout(error: std::io::Error) -> std::io::Error {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::io::Error::other(StdoutClosed)
    } else {
        error
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf).map_err(on_stdout)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0.write_all(buf).map_err(on_stdout)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(on_stdout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A broken pipe on stdout is told from one anywhere else, under any context added to it.
    #[test]
    fn only_a_broken_pipe_on_stdout_is_stdout_closed() {
        let broken = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let closed = anyhow::Error::from(on_stdout(broken())).context("cannot print the result");
        assert!(is_stdout_closed(&closed));
        assert!(is_stdout_closed(&anyhow::Error::from(StdoutClosed)));
        // The model's connection or a file: reported.
        let socket = anyhow::Error::from(broken()).context("the model's connection");
        assert!(!is_stdout_closed(&socket));
        let full = on_stdout(std::io::Error::from(std::io::ErrorKind::StorageFull));
        assert_eq!(full.kind(), std::io::ErrorKind::StorageFull);
        assert!(!is_stdout_closed(&anyhow::Error::from(full)));
    }
}

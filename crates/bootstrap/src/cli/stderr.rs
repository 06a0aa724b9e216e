//! Where the CLI's messages go: stderr, which may itself be gone (`cogni … 2>&-`, or a pipe
//! whose reader went away), where `eprintln!` would panic.

use std::io::Write;

/// Writes `line` and a line end to stderr, as `eprintln!` does, but never panics: a write that
/// fails is ignored, since there is nowhere left to report it (the exit status still says how
/// the command ended). Every message of the `cogni` binary goes through it. `line` is written
/// as given: pass it through [`terminal_safe`](super::terminal_safe) first when it may hold
/// what others wrote.
pub fn say_on_stderr(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{line}").and_then(|()| stderr.flush());
}

//! The `cogni` binary: parses the command line and hands off to `bootstrap::cli`.

use std::io::Write;
use std::process::ExitCode;

use bootstrap::cli::{say_on_stderr, terminal_safe};
use clap::Parser;

fn main() -> ExitCode {
    // A tool's panic message may hold what the tool held (a token, the arguments): keep it out
    // of stderr; the runner answers the call `execution` either way.
    ai_core::install_tool_panic_hook();
    let cli = match bootstrap::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => match bootstrap::cli::variable_error(&error) {
            Some(message) => {
                let message = format!("error: {message}");
                say_on_stderr(&terminal_safe(&message));
                return ExitCode::FAILURE;
            }
            None => return clap_answer(&error),
        },
    };
    if let Some(message) = bootstrap::cli::unknown_variable_error() {
        say_on_stderr(&terminal_safe(&format!("error: {message}")));
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            say_on_stderr(&format!("error: cannot start the async runtime: {error}"));
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bootstrap::cli::run(cli)) {
        Ok(code) => code,
        // The reader of stdout went away (`cogni … | head`): it has what it wanted. Quiet, and
        // a success, as ripgrep ends; any other error, a broken pipe elsewhere among them, is
        // said below.
        Err(error) if bootstrap::cli::is_stdout_closed(&error) => ExitCode::SUCCESS,
        Err(error) => {
            // One line: the error and its causes, which may quote what a data folder or an
            // endpoint held: no control character of it reaches the terminal.
            let message = format!("error: {error:#}");
            say_on_stderr(&terminal_safe(&message));
            ExitCode::FAILURE
        }
    }
}

/// Prints clap's own answer (help, version or a usage error) and ends with clap's status, as
/// clap's `exit` does, except that a help or version text stdout could not take is an error, said
/// on stderr, as any other output's is: `exit` ignores the failed write, so `cogni --help >
/// /dev/full` ended 0 having written nothing. A reader that went away (`cogni --help | head -1`)
/// still ends it quietly.
fn clap_answer(error: &clap::Error) -> ExitCode {
    let printed = error.print().and_then(|()| std::io::stdout().flush());
    match printed {
        Err(e) if !error.use_stderr() && e.kind() != std::io::ErrorKind::BrokenPipe => {
            let what = match error.kind() {
                clap::error::ErrorKind::DisplayVersion => "the version",
                _ => "the help",
            };
            say_on_stderr(&format!("error: cannot print {what}: {e}"));
            ExitCode::FAILURE
        }
        _ => ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(1)),
    }
}

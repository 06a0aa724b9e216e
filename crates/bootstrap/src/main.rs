//! The `cogni` binary: parses the command line and hands off to `bootstrap::cli`.

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
            None => error.exit(),
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

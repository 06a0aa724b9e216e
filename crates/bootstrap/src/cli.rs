//! The `cogni` command line: argument definitions and what each command does.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use ai_core::{
    AiEvent, CancellationToken, Clock, RunContext, ToolCall, ToolCallId, ToolCatalog, ToolOutcome,
    ToolSource, ToolSpec,
};
use anyhow::Context;
use clap::{Parser, Subcommand};
use serde_json::json;

use crate::create_tool_source;

mod chat;
mod runs;
mod serve;
mod stderr;
mod stdout;
mod terminal;

pub use stderr::say_on_stderr;
pub use stdout::{StdoutClosed, is_stdout_closed};
pub use terminal::terminal_safe;

/// cogni: a tool-use runtime for LLM agents. Serve agent runs (model, tools, model) to AG-UI
/// and AI SDK frontends, chat from the terminal, run tools, and inspect wire formats and run logs.
#[derive(Debug, Parser)]
#[command(name = "cogni", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the agent over HTTP: AG-UI and AI SDK UI streams, the catalog, health.
    Serve {
        /// Settings overrides (also from COGNI_* variables).
        #[command(flatten)]
        overrides: crate::Overrides,
    },
    /// Run one turn against the configured LLM endpoint and show it as it streams.
    // `--listen` (shared settings) means nothing here: not shown.
    #[command(mut_arg("listen", |a| a.hide(true)))]
    Chat {
        /// The user's message (one without text, or only whitespace, is refused).
        message: String,
        /// Continue this thread (kept in the data folder when one is configured).
        #[arg(long)]
        thread: Option<String>,
        /// Print the run's events as JSON lines instead.
        #[arg(long)]
        json: bool,
        /// Settings overrides (also from COGNI_* variables).
        #[command(flatten)]
        overrides: crate::Overrides,
    },
    /// Print the commented example configuration (cogni.toml).
    ConfigExample,
    /// Inspect and run tools.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Decode and encode provider wire formats (to debug a captured stream or answer).
    #[command(subcommand)]
    Wire(WireCommand),
    /// Show what the run log of the data folder holds.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Re-run a recorded, finished run from its receipts and recorded tool results, and check
    /// that its events come out identical. Nothing is written.
    ///
    /// It calls no model and runs no tool: it reads only the data folder, `tools.enabled`, the
    /// policy (`--policy`, else `COGNI_POLICY`, else the config file's, else the built-in one)
    /// and `tools.trace_redacted_results`, so no model, server or workspace setting can stop it.
    Replay {
        /// The run's id.
        run_id: String,
        /// Policy file (TOML, or JSON with a .json extension), compared with the run's recorded
        /// one [default: the config file's policy, else the built-in one].
        #[arg(long, env = "COGNI_POLICY")]
        policy: Option<PathBuf>,
        /// Record each replayed call's redacted result on its tracing span (shown with
        /// `RUST_LOG=ai_core=debug`), as `tools.trace_redacted_results` of the config file
        /// does; `--trace-redacted-results=false` turns it off again.
        #[arg(
            long,
            env = "COGNI_TRACE_REDACTED_RESULTS",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        trace_redacted_results: Option<bool>,
        /// Where the run log is.
        #[command(flatten)]
        log: RunLogArgs,
    },
}

/// `cogni runs …`: they read only the data folder, so no model, server or workspace setting
/// can stop them.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List the recorded runs, oldest first.
    List {
        /// Print one JSON object per line.
        #[arg(long)]
        json: bool,
        /// Where the run log is.
        #[command(flatten)]
        log: RunLogArgs,
    },
    /// Show one run: header, events, tool invocation records (redacted) and model receipts.
    Show {
        /// The run's id.
        run_id: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Where the run log is.
        #[command(flatten)]
        log: RunLogArgs,
    },
}

/// Where `cogni runs` and `cogni replay` find the run log: the settings they read besides
/// `replay`'s policy and `tools.trace_redacted_results`, and no others.
#[derive(Debug, clap::Args)]
pub struct RunLogArgs {
    /// The data folder holding the run log [default: `data_dir` of the config file].
    #[arg(long, env = "COGNI_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The config file, read for its `data_dir` (and, for `replay`, its `[tools]` policy and
    /// `tools.enabled`) [default: ./cogni.toml when it exists].
    #[arg(long, env = "COGNI_CONFIG")]
    pub config: Option<PathBuf>,
}

impl RunLogArgs {
    /// These as settings overrides.
    fn overrides(self) -> crate::Overrides {
        crate::Overrides {
            config: self.config,
            data_dir: self.data_dir,
            ..crate::Overrides::default()
        }
    }
}

/// A provider wire format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WireFormat {
    /// OpenAI chat completions.
    OpenaiChat,
    /// The OpenAI Responses API.
    OpenaiResponses,
}

/// `cogni wire …`.
#[derive(Debug, Subcommand)]
pub enum WireCommand {
    /// Decode a captured answer into one completion, printed as JSON.
    ///
    /// The input is a whole JSON answer when its first byte but whitespace (and a UTF-8 BOM)
    /// is `{`: a chat completion (`--format openai-chat`) or a Responses response
    /// (`--format openai-responses`), as a server that ignores `stream: true` sends it. It is
    /// an SSE stream when it starts with `data:`, `event:`, `id:`, `retry:` or `:` (a comment).
    /// Anything else is refused, saying so.
    Decode {
        /// The answer's format.
        #[arg(long)]
        format: WireFormat,
        /// The captured stream or JSON body; `-` or nothing reads stdin.
        file: Option<PathBuf>,
    },
    /// Read a JSON array of tool specs on stdin and print the provider's `tools` JSON.
    EncodeTools {
        /// The target format.
        #[arg(long)]
        format: WireFormat,
    },
}

/// `cogni tools …`.
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List the catalog a model would see under a policy.
    ///
    /// The policy is read as `serve` and `chat` read it: `--policy`, else `COGNI_POLICY`, else
    /// `tools.policy` or `tools.policy_file` of `cogni.toml`, else the built-in default. The
    /// tools are those `tools.enabled` names (all core tools unless it is set).
    List {
        /// Policy file (TOML, or JSON with a .json extension) [default: the config file's
        /// policy, else the built-in one].
        #[arg(long, env = "COGNI_POLICY")]
        policy: Option<PathBuf>,
        /// The config file, read for its policy and `tools.enabled` [default: ./cogni.toml when
        /// it exists].
        #[arg(long, env = "COGNI_CONFIG")]
        config: Option<PathBuf>,
        /// Print the tool specs as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one tool call through the runner and print its events and result as JSON lines.
    ///
    /// Its settings are read as `serve` and `chat` read them: each flag, else its `COGNI_*`
    /// variable (`COGNI_POLICY`, `COGNI_WORKSPACE`, `COGNI_WORKSPACE_HIDDEN`,
    /// `COGNI_TRACE_REDACTED_RESULTS`, `COGNI_DATA_DIR`), else `cogni.toml` (`tools.policy` or
    /// `tools.policy_file`, `tools.workspace`, `tools.workspace_hidden`,
    /// `tools.trace_redacted_results`, `data_dir`). It binds the core tools
    /// `tools.enabled` names (all of them unless it is set), as `serve` does.
    Call {
        /// The tool id, e.g. core__get_current_time.
        tool_id: String,
        /// The arguments as JSON text.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Policy file (TOML, or JSON with a .json extension) [default: the config file's
        /// policy, else the built-in one].
        #[arg(long, env = "COGNI_POLICY")]
        policy: Option<PathBuf>,
        /// The folder workspace tools are confined to [default: `tools.workspace` of the
        /// config file, else .].
        #[arg(long, env = "COGNI_WORKSPACE")]
        workspace: Option<PathBuf>,
        /// Show the workspace's hidden entries (`.env`, `.git`, …) to the tool; without it (or
        /// `tools.workspace_hidden` of the config file) they are not there for it.
        /// `--workspace-hidden=false` hides them again.
        #[arg(
            long,
            env = "COGNI_WORKSPACE_HIDDEN",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        workspace_hidden: Option<bool>,
        /// Record the call's redacted result on its tracing span (shown with
        /// `RUST_LOG=ai_core=debug`), as `tools.trace_redacted_results` of the config file
        /// does; `--trace-redacted-results=false` turns it off again.
        #[arg(
            long,
            env = "COGNI_TRACE_REDACTED_RESULTS",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        trace_redacted_results: Option<bool>,
        /// Keep tool statistics in this folder (read by `cogni tools stats`) [default:
        /// `data_dir` of the config file, if it sets one].
        #[arg(long, env = "COGNI_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// The config file, read for its `[tools]` settings and `data_dir` [default:
        /// ./cogni.toml when it exists].
        #[arg(long, env = "COGNI_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Print the tool statistics recorded by earlier `cogni tools call`s.
    ///
    /// The folder is `--data-dir`, `COGNI_DATA_DIR` or `data_dir` of `cogni.toml`, as for
    /// `cogni runs`.
    Stats {
        /// The folder the statistics are kept in [default: `data_dir` of the config file].
        #[arg(long, env = "COGNI_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// The config file, read for its `data_dir` only [default: ./cogni.toml when it
        /// exists].
        #[arg(long, env = "COGNI_CONFIG")]
        config: Option<PathBuf>,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The `COGNI_*` variables clap may refuse (empty, or a value its parser does not read): the
/// flag each one stands for, and what it should hold instead.
const CHECKED_VARIABLES: [(&str, &str, &str); 16] = [
    ("--config", "COGNI_CONFIG", "a path"),
    (
        "--llm-base-url",
        "COGNI_LLM_BASE_URL",
        "an http:// or https:// URL",
    ),
    ("--llm-model", "COGNI_LLM_MODEL", "a model name"),
    ("--listen", "COGNI_LISTEN", "an address like 127.0.0.1:8787"),
    ("--server-token", "COGNI_SERVER_TOKEN", "a token"),
    ("--policy", "COGNI_POLICY", "a path"),
    ("--workspace", "COGNI_WORKSPACE", "a path"),
    ("--data-dir", "COGNI_DATA_DIR", "a path"),
    (
        "--llm-request-timeout-ms",
        "COGNI_LLM_REQUEST_TIMEOUT_MS",
        "a number of milliseconds",
    ),
    (
        "--llm-connect-timeout-ms",
        "COGNI_LLM_CONNECT_TIMEOUT_MS",
        "a number of milliseconds",
    ),
    (
        "--llm-idle-timeout-ms",
        "COGNI_LLM_IDLE_TIMEOUT_MS",
        "a number of milliseconds",
    ),
    (
        "--llm-max-call-ms",
        "COGNI_LLM_MAX_CALL_MS",
        "a number of milliseconds",
    ),
    ("--llm-wire", "COGNI_LLM_WIRE", "`chat` or `responses`"),
    (
        "--llm-stateless-reasoning",
        "COGNI_LLM_STATELESS_REASONING",
        "`true` or `false`",
    ),
    (
        "--workspace-hidden",
        "COGNI_WORKSPACE_HIDDEN",
        "`true` or `false`",
    ),
    (
        "--trace-redacted-results",
        "COGNI_TRACE_REDACTED_RESULTS",
        "`true` or `false`",
    ),
];

/// A one-line error for a parse error caused by a variable rather than the command line, naming
/// the variable and what it should hold; clap would name the flag, which the user did not give,
/// in three lines. An empty variable (`export COGNI_DATA_DIR=`,
/// `COGNI_LLM_REQUEST_TIMEOUT_MS=`) is refused rather than read as unset, since it is more likely
/// a broken script than a wish for the default (an empty `COGNI_LLM_API_KEY` alone means "no
/// key": local servers need none). So is a blank `COGNI_SERVER_TOKEN`, the error saying to unset
/// it to serve without a token: a `"$(cat tokenfile)"` whose file is missing must not serve
/// without one. A value clap does not read (`COGNI_WORKSPACE_HIDDEN=maybe`,
/// `COGNI_LLM_WIRE=grpc`) is not quoted. `None` when the flag is on the command line before any
/// `--` (clap's own error names it then) or the error is of another kind. A variable that is
/// not UTF-8 text, which clap refuses naming nothing, is named when the command reads it and
/// every argument is text.
pub fn variable_error(error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() == ErrorKind::InvalidUtf8 {
        return not_utf8_variable();
    }
    // A path or a wire left empty is an invalid value; a number or a boolean one its parser
    // refused.
    if !matches!(
        error.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return None;
    }
    let Some(ContextValue::String(arg)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    // `--llm-wire <LLM_WIRE>`, `--workspace-hidden[=<WORKSPACE_HIDDEN>]`.
    let flag = arg.split([' ', '[']).next()?;
    let (_, variable, wanted) = CHECKED_VARIABLES.iter().find(|(f, _, _)| *f == flag)?;
    if on_the_command_line(flag) {
        return None;
    }
    // The composition root is where the environment is read.
    #[allow(clippy::disallowed_methods)]
    let value = std::env::var_os(variable)?;
    if *variable == "COGNI_SERVER_TOKEN" {
        // Its parser refuses only a blank token; unset is how to serve without one.
        let blank = if value.is_empty() { "empty" } else { "blank" };
        return Some(format!(
            "{variable} is set but {blank}: unset it to serve without a token, or give it one"
        ));
    }
    Some(if value.is_empty() {
        format!("{variable} is set but empty: unset it or give it {wanted}")
    } else {
        format!("{variable} does not hold {wanted}: unset it or give it one")
    })
}

/// A one-line error naming each `COGNI_*` variable of the environment that no command reads, as
/// [`Settings::from_toml_str`](crate::Settings::from_toml_str) refuses an unknown key: a
/// misspelled variable (`COGNI_LLM_MODLE`) would otherwise leave its setting at the default with
/// no word. Each is named with the closest variable cogni reads when it is near enough to be a
/// misspelling of it, never with its value (which may be a key). `None` when cogni reads every
/// one.
pub fn unknown_variable_error() -> Option<String> {
    // The composition root is where the environment is read; only the names are.
    #[allow(clippy::disallowed_methods)]
    let names = std::env::vars_os().map(|(name, _)| name);
    unknown_variables(names, &read_variables())
}

/// The variables some command of [`Cli`] reads (its arguments' `env`).
fn read_variables() -> Vec<String> {
    use clap::CommandFactory;
    let mut read = Vec::new();
    let mut commands = vec![Cli::command()];
    while let Some(command) = commands.pop() {
        let variables = command.get_arguments().filter_map(|arg| arg.get_env());
        read.extend(variables.filter_map(|v| v.to_str()).map(str::to_owned));
        commands.extend(command.get_subcommands().cloned());
    }
    read.sort();
    read.dedup();
    read
}

/// [`unknown_variable_error`] over the variable `names`, `read` being those cogni reads.
fn unknown_variables(
    names: impl IntoIterator<Item = std::ffi::OsString>,
    read: &[String],
) -> Option<String> {
    // Windows reads a variable's name in any case, as clap's lookup of it does.
    let same = |a: &str, b: &str| {
        if cfg!(windows) {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    };
    let mut unknown: Vec<String> = names
        .into_iter()
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| name.starts_with("COGNI_") && !read.iter().any(|r| same(r, name)))
        .collect();
    unknown.sort();
    let named: Vec<String> = unknown
        .iter()
        .map(|name| match closest(name, read) {
            Some(closest) => format!("{name} (did you mean {closest}?)"),
            None => name.clone(),
        })
        .collect();
    match named.as_slice() {
        [] => None,
        [one] => Some(format!(
            "unknown variable {one}: cogni reads no such variable; unset it or correct its name"
        )),
        many => Some(format!(
            "unknown variables {}: cogni reads no such variables; unset them or correct their \
             names",
            many.join(", ")
        )),
    }
}

/// The variable of `read` closest to the unknown `name`, when `name` reads as a misspelling of
/// it: as cargo suggests a subcommand, at most a third of the name's length apart (and at least
/// one edit), the length counted past the `COGNI_` every one shares (`COGNI_X` is not taken for
/// `COGNI_CONFIG`).
fn closest<'a>(name: &str, read: &'a [String]) -> Option<&'a String> {
    let own = name.strip_prefix("COGNI_").unwrap_or(name).chars().count();
    let most = (own / 3).max(1);
    read.iter()
        .map(|r| (edit_distance(name, r), r))
        .filter(|(distance, _)| *distance <= most)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, r)| r)
}

/// The Levenshtein distance between `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, a) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, b) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(a != *b);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// Whether `flag` (`--llm-wire`) is given on the command line, as `--flag value` or
/// `--flag=value`. Past `--` every argument is a value (`cogni chat -- --llm-wire`): the flag is
/// not there.
fn on_the_command_line(flag: &str) -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|arg| arg != "--")
        .any(|arg| {
            arg.to_str().is_some_and(|arg| {
                arg.strip_prefix(flag)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
            })
        })
}

/// For clap's `InvalidUtf8` error, which names nothing: the one line naming the variable the
/// command line's command reads (its flag not given) that is not UTF-8 text, its bytes not
/// shown. `None` when an argument is not text (the error may be its), or no such variable is
/// found. A path variable is read as it is, so it is never the one.
fn not_utf8_variable() -> Option<String> {
    use clap::CommandFactory;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let args: Vec<&str> = args.iter().map(|arg| arg.to_str()).collect::<Option<_>>()?;
    // The command the line names: `cogni tools call …` is `call`.
    let mut command = Cli::command();
    for arg in args.iter().take_while(|arg| **arg != "--") {
        if let Some(sub) = command.find_subcommand(arg) {
            command = sub.clone();
        }
    }
    command.get_arguments().find_map(|arg| {
        let variable = arg.get_env()?.to_str()?;
        let wanted = CHECKED_VARIABLES
            .iter()
            .find(|(_, v, _)| *v == variable)
            .map_or("text", |(_, _, wanted)| *wanted);
        if wanted == "a path" || on_the_command_line(&format!("--{}", arg.get_long()?)) {
            return None;
        }
        // The composition root is where the environment is read.
        #[allow(clippy::disallowed_methods)]
        let value = std::env::var_os(variable)?;
        value
            .to_str()
            .is_none()
            .then(|| format!("{variable} is not UTF-8 text: unset it or give it {wanted}"))
    })
}

/// Runs a parsed command line. Every command logs warnings to stderr (`RUST_LOG` filters them):
/// a retried request, a run recovered after a crash or a stored row left out is said, never
/// silently dropped. A command whose stdout was closed by its reader (`| head`) returns an
/// error holding [`StdoutClosed`] ([`is_stdout_closed`]); any other error writing its output is
/// returned as it is.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    init_logging();
    match cli.command {
        Command::Serve { overrides } => serve::run(overrides).await,
        Command::Chat {
            message,
            thread,
            json,
            overrides,
        } => chat::run(message, thread, json, overrides).await,
        Command::ConfigExample => {
            let mut out = stdout::stdout();
            out.write_all(crate::EXAMPLE_CONFIG.as_bytes())?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools(ToolsCommand::List {
            policy,
            config,
            json,
        }) => {
            let settings = crate::Settings::read(&crate::Overrides {
                config,
                policy,
                ..crate::Overrides::default()
            })?;
            tools_list(&settings, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools(ToolsCommand::Call {
            tool_id,
            args,
            policy,
            workspace,
            workspace_hidden,
            trace_redacted_results,
            data_dir,
            config,
        }) => {
            let settings = crate::Settings::read(&crate::Overrides {
                config,
                policy,
                workspace,
                workspace_hidden,
                trace_redacted_results,
                data_dir,
                ..crate::Overrides::default()
            })?;
            tools_call(tool_id, args, &settings).await
        }
        Command::Tools(ToolsCommand::Stats {
            data_dir,
            config,
            json,
        }) => {
            let settings = crate::Settings::read(&crate::Overrides {
                config,
                data_dir,
                ..crate::Overrides::default()
            })?;
            tools_stats(&crate::replay::data_dir(&settings)?, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Runs(RunsCommand::List { json, log }) => runs::list(log.overrides(), json).await,
        Command::Runs(RunsCommand::Show { run_id, json, log }) => {
            runs::show(log.overrides(), run_id, json).await
        }
        Command::Replay {
            run_id,
            policy,
            trace_redacted_results,
            log,
        } => {
            let overrides = crate::Overrides {
                policy,
                trace_redacted_results,
                ..log.overrides()
            };
            runs::replay(overrides, run_id).await
        }
        Command::Wire(WireCommand::Decode { format, file }) => wire_decode(format, file),
        Command::Wire(WireCommand::EncodeTools { format }) => {
            wire_encode_tools(format)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn tools_stats(data_dir: &Path, json: bool) -> anyhow::Result<()> {
    let stats = crate::stats::load(data_dir)?;
    let mut out = stdout::stdout();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&stats)?)?;
        out.flush()?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<28} {:>6} {:>6} {:>8} {:>7} {:<9} {:>9} {:>9} {:>9}",
        "tool", "calls", "ok", "failed", "retries", "breaker", "p50_us", "p95_us", "p99_us"
    )?;
    for s in stats {
        let failed = s
            .failures
            .values()
            .fold(0u64, |sum, n| sum.saturating_add(*n));
        let breaker = serde_json::to_value(s.breaker)?;
        writeln!(
            out,
            "{:<28} {:>6} {:>6} {:>8} {:>7} {:<9} {:>9} {:>9} {:>9}",
            s.tool_id.as_str(),
            s.calls,
            s.successes,
            failed,
            s.retries,
            breaker.as_str().unwrap_or("?"),
            s.latency.p50_us,
            s.latency.p95_us,
            s.latency.p99_us
        )?;
    }
    out.flush()?;
    Ok(())
}

/// The most `wire encode-tools` reads of stdin: far more than the specs of any catalog.
const MAX_TOOL_SPECS_BYTES: u64 = 4 << 20;

/// The file at `file` (stdin when it is `None` or `-`), read up to `limit` bytes: past it (a
/// device, a log named by mistake, a pipe that never ends) is refused in one line naming the
/// input, the bound and `why` it is the bound, never quoting the input.
fn read_input(file: Option<&Path>, limit: u64, why: &str) -> anyhow::Result<Vec<u8>> {
    let (read, name) = match file {
        Some(path) if path != Path::new("-") => (
            std::fs::File::open(path).and_then(|file| crate::bounded::read_at_most(file, limit)),
            path.display().to_string(),
        ),
        _ => (
            crate::bounded::read_at_most(std::io::stdin().lock(), limit),
            "stdin".to_owned(),
        ),
    };
    read.with_context(|| format!("cannot read {name}"))?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "cannot read {name}: it is over {}, {why}",
                crate::bounded::size(limit)
            )
        })
}

/// The UTF-8 byte order mark a capture may open with.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// What a captured answer is, told by its first bytes.
#[derive(Debug, PartialEq, Eq)]
enum Captured {
    /// A whole JSON answer (a chat completion or a Responses response).
    Json,
    /// An SSE stream.
    Sse,
}

/// Tells a whole JSON answer from an SSE stream: past a UTF-8 BOM and whitespace, `{` opens a
/// JSON object, and a stream's first line is a field (`data:`, `event:`, `id:`, `retry:`) or a
/// comment (`:`). The error names what was expected, never what the input holds.
fn sniff(bytes: &[u8]) -> anyhow::Result<Captured> {
    let start = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    let start = start.trim_ascii_start();
    if start.is_empty() {
        anyhow::bail!("the input is empty");
    }
    if start.starts_with(b"{") {
        return Ok(Captured::Json);
    }
    let sse = [&b"data:"[..], b"event:", b"id:", b"retry:", b":"];
    if sse.iter().any(|field| start.starts_with(field)) {
        return Ok(Captured::Sse);
    }
    anyhow::bail!(
        "the input is neither a whole JSON answer (its first non-whitespace byte would be `{{`) \
         nor an SSE stream (it would start with `data:`, `event:`, `id:`, `retry:` or `:`)"
    )
}

fn wire_decode(format: WireFormat, file: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let limits = wire_openai::Limits::default();
    // The decoder refuses a longer stream or answer: reading one whole is of no use.
    let bytes = read_input(
        file.as_deref(),
        u64::try_from(limits.max_total_bytes).unwrap_or(u64::MAX),
        "more than the decoder takes of a stream or answer",
    )?;
    let decoded = match (sniff(&bytes)?, format) {
        (Captured::Sse, WireFormat::OpenaiChat) => wire_openai::chat::decode_all(&bytes, limits),
        (Captured::Sse, WireFormat::OpenaiResponses) => {
            wire_openai::responses::decode_all(&bytes, limits)
        }
        // JSON has no BOM; one a capture tool wrote is not part of the body.
        (Captured::Json, format) => {
            let body = bytes.strip_prefix(UTF8_BOM).unwrap_or(&bytes);
            match format {
                WireFormat::OpenaiChat => wire_openai::chat::decode_completion(body, limits),
                WireFormat::OpenaiResponses => {
                    wire_openai::responses::decode_response(body, limits)
                }
            }
            .map(|answer| answer.completion)
        }
    };
    match decoded {
        Ok(completion) => {
            let calls: Vec<_> = completion
                .tool_calls
                .iter()
                .map(|c| json!({"id": c.id.as_str(), "name": c.name, "arguments": c.arguments}))
                .collect();
            let shown = json!({
                "finish_reason": completion.finish_reason,
                "text": completion.text,
                "tool_calls": calls,
                "usage": completion.usage,
            });
            let mut out = stdout::stdout();
            writeln!(out, "{shown}")?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            // It may quote the stream (a provider's error message): no control character of it
            // reaches the terminal.
            say_on_stderr(&terminal_safe(&format!("error: {error}")));
            Ok(ExitCode::FAILURE)
        }
    }
}

fn wire_encode_tools(format: WireFormat) -> anyhow::Result<()> {
    let bytes = read_input(
        None,
        MAX_TOOL_SPECS_BYTES,
        "more than any list of tool specs holds",
    )?;
    // Where and what is wrong, never a value of the input: a pasted spec may hold anything.
    let specs: Vec<ToolSpec> = serde_json::from_slice(&bytes).map_err(|e| {
        anyhow::anyhow!(
            "stdin is not a JSON array of tool specs: {}",
            ai_core::describe_json_error(&e)
        )
    })?;
    // As a request offering them is refused: a model shown two tools of one name cannot say
    // which it calls.
    let mut ids = std::collections::HashSet::new();
    if let Some(spec) = specs.iter().find(|spec| !ids.insert(&spec.id)) {
        anyhow::bail!("tool {} is offered more than once", spec.id);
    }
    let tools = match format {
        WireFormat::OpenaiChat => wire_openai::chat::encode_tools(&specs),
        WireFormat::OpenaiResponses => wire_openai::responses::encode_tools(&specs),
    };
    let mut out = stdout::stdout();
    writeln!(out, "{}", serde_json::to_string_pretty(&tools)?)?;
    out.flush()?;
    Ok(())
}

/// Prints one `warning:` line on stderr naming the tool ids the policy names that no tool source
/// has ([`crate::compose::unknown_tools_warning`]), if any.
pub(crate) fn warn_unknown_tools(policy: &ai_core::ToolPolicy, source: &dyn ToolSource) {
    if let Some(warning) = crate::compose::unknown_tools_warning(policy, source) {
        say_on_stderr(&terminal_safe(&format!("warning: {warning}")));
    }
}

/// The run context of a CLI invocation: the local user, no connections.
fn cli_context(clock: &dyn Clock) -> anyhow::Result<RunContext> {
    Ok(RunContext::new(
        format!("cli-run-{}", clock.now_ms()),
        "user:cli",
        "local",
    )?)
}

/// `cogni tools list`: the catalog of the enabled core tools (`tools.enabled`) under the policy
/// of `settings` (read, unvalidated, as `serve` reads them: [`crate::Settings::read`]). Of the
/// settings only those two are checked: the tools are bound to no workspace
/// ([`crate::ToolCapabilities::without_workspace`]), as a catalog does not depend on one, so
/// neither a `tools.workspace` of another machine nor a working folder no workspace may be
/// rooted at (`/`) stops it.
fn tools_list(settings: &crate::Settings, json: bool) -> anyhow::Result<()> {
    let policy = settings.policy()?;
    let caps = crate::ToolCapabilities::without_workspace();
    let source = create_tool_source(&settings.core_tools()?, &caps)?;
    warn_unknown_tools(&policy, &source);
    let catalog = ToolCatalog::build(&source, &policy, &cli_context(caps.clock.as_ref())?)?;
    let mut out = stdout::stdout();
    if json {
        let specs: Vec<_> = catalog.specs().collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&specs)?)?;
    } else {
        for spec in catalog.specs() {
            writeln!(
                out,
                "{:<28} {:<20} {}",
                spec.id.as_str(),
                spec.effect.as_str(),
                spec.description
            )?;
        }
    }
    out.flush()?;
    Ok(())
}

/// `cogni tools call`: one call, with the enabled core tools (`tools.enabled`) bound, under the
/// policy, in the workspace, of `settings` (read, unvalidated, as `serve` reads them:
/// [`crate::Settings::read`]); its statistics are kept in their data folder, if any. Of the
/// settings only these are checked, as `serve` checks them.
async fn tools_call(
    tool_id: String,
    args: String,
    settings: &crate::Settings,
) -> anyhow::Result<ExitCode> {
    let policy = Arc::new(settings.policy()?);
    let caps = settings.capabilities()?;
    let source = Arc::new(create_tool_source(&settings.core_tools()?, &caps)?);
    warn_unknown_tools(&policy, source.as_ref());
    let ctx = cli_context(caps.clock.as_ref())?;
    let runner = crate::compose::tool_runner(settings, source, policy, caps.clock.clone());
    let catalog = runner.catalog(&ctx)?;
    let call = ToolCall {
        id: ToolCallId::new("cli-call-1")?,
        name: tool_id.into(),
        arguments: args,
    };
    // The first error writing an event (stdout closed, a full disk) ends the output, not the
    // call: the tool runs on (its effect and statistics are not cut half-way), and the error is
    // returned once it has.
    let print_error = std::sync::Mutex::new(None::<std::io::Error>);
    let print_event = |event: AiEvent| {
        let mut error = print_error.lock().unwrap_or_else(|p| p.into_inner());
        if error.is_some() {
            return;
        }
        if let Ok(line) = serde_json::to_string(&event) {
            let mut out = stdout::stdout();
            if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
                *error = Some(e);
            }
        }
    };
    let run = runner
        .run_tool(
            &call,
            &ctx,
            &catalog,
            &print_event,
            &CancellationToken::new(),
        )
        .await;
    if let Some(dir) = &settings.data_dir {
        // The tool has run: a statistics problem is worth a warning, not a failed call. It
        // names the data folder, and a damaged file's decoding error.
        let warning = match crate::stats::record(dir, &runner.stats()) {
            Ok(None) => None,
            Ok(Some(warning)) => Some(format!("warning: {warning}")),
            Err(error) => Some(format!("warning: tool statistics not recorded: {error:#}")),
        };
        if let Some(warning) = warning {
            say_on_stderr(&terminal_safe(&warning));
        }
    }
    let printed = match print_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(error) => Err(anyhow::Error::from(error).context("cannot print the call's events")),
        None => Ok(()),
    };
    match failure_line(&run.result.outcome) {
        None => {
            printed?;
            let line = serde_json::to_string(&run.result).context("cannot print the result")?;
            let mut out = stdout::stdout();
            writeln!(out, "{line}")
                .and_then(|()| out.flush())
                .context("cannot print the result")?;
            Ok(ExitCode::SUCCESS)
        }
        // On stderr: said even when no one reads stdout any more.
        Some(line) => {
            say_on_stderr(&line);
            match printed {
                Err(error) if !is_stdout_closed(&error) => Err(error),
                _ => Ok(ExitCode::FAILURE),
            }
        }
    }
}

/// The `error:` line `cogni tools call` prints for a call that did not succeed (`None` for one
/// that did). A failure's message is the tool's own (safe to show, but a tool may put any
/// character in it): its control characters are replaced ([`terminal_safe`]).
fn failure_line(outcome: &ToolOutcome) -> Option<String> {
    let line = match outcome {
        ToolOutcome::Ok { .. } => return None,
        ToolOutcome::Error(failure) => format!("error: {}: {}", failure.code, failure.safe_message),
        // The CLI has no one to ask: the call stays unrun.
        ToolOutcome::ApprovalRequired { .. } => {
            "error: approval_required: the policy requires a human's approval for this tool".into()
        }
        other => format!("error: the call ended in an outcome this CLI does not know: {other:?}"),
    };
    Some(terminal_safe(&line).into_owned())
}

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings), so stdout keeps only a command's
/// output. Spans never carry arguments, nor results unless `tools.trace_redacted_results` asks
/// for the redacted ones.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // A second initialization (tests) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use ai_core::{ToolErrorCode, ToolFailure, ToolOutcome};
    use clap::CommandFactory;

    /// The command line is well formed (clap's own checks), and `--listen`, a shared setting
    /// only `serve` uses, is offered by `serve` alone.
    #[test]
    fn the_command_line_offers_listen_only_where_it_means_something() {
        super::Cli::command().debug_assert();
        let mut cli = super::Cli::command();
        let offers_listen = |command: &mut clap::Command| {
            command.render_long_help().to_string().contains("--listen")
        };
        let serve = cli.find_subcommand_mut("serve").unwrap();
        assert!(offers_listen(serve));
        for path in [
            &["chat"][..],
            &["replay"],
            &["runs", "list"],
            &["runs", "show"],
        ] {
            let mut command = &mut cli;
            for name in path {
                command = command.find_subcommand_mut(name).unwrap();
            }
            assert!(!offers_listen(command), "{path:?}");
        }
    }

    /// Every unknown `COGNI_*` variable is named, in order, each with the closest one read when
    /// it reads as a misspelling of it; other variables, and those read, are not.
    #[test]
    fn unknown_variables_are_named_each_with_the_closest_one_read() {
        let read = super::read_variables();
        assert!(read.iter().any(|v| v == "COGNI_SERVER_TOKEN"), "{read:?}");
        let names = |names: &[&str]| names.iter().map(Into::into).collect::<Vec<_>>();
        let known = names(&["PATH", "COGNI_LLM_MODEL", "COGNI_DATA_DIR", "cogni_x"]);
        assert_eq!(super::unknown_variables(known, &read), None);
        let unknown = names(&["COGNI_WORKSPACE_HIDEN", "PATH", "COGNI_DATADIR"]);
        assert_eq!(
            super::unknown_variables(unknown, &read).unwrap(),
            "unknown variables COGNI_DATADIR (did you mean COGNI_DATA_DIR?), \
             COGNI_WORKSPACE_HIDEN (did you mean COGNI_WORKSPACE_HIDDEN?): cogni reads no such \
             variables; unset them or correct their names"
        );
        // Nothing read is near: no variable is suggested, the unknown one is only named.
        for distant in ["COGNI_X", "COGNI_TOKEN", "COGNI_MODEL_NAME"] {
            assert_eq!(
                super::unknown_variables(names(&[distant]), &read).unwrap(),
                format!(
                    "unknown variable {distant}: cogni reads no such variable; unset it or \
                     correct its name"
                )
            );
        }
        let near = names(&["COGNI_LLM_MODLE", "COGNI_POLCY"]);
        assert_eq!(
            super::unknown_variables(near, &read).unwrap(),
            "unknown variables COGNI_LLM_MODLE (did you mean COGNI_LLM_MODEL?), COGNI_POLCY \
             (did you mean COGNI_POLICY?): cogni reads no such variables; unset them or correct \
             their names"
        );
        assert_eq!(super::edit_distance("kitten", "sitting"), 3);
        assert_eq!(super::edit_distance("", "abc"), 3);
    }

    /// A tool's own failure message reaches the terminal without its control characters (but
    /// line ends, which `terminal_safe` keeps).
    #[test]
    fn a_failed_call_prints_its_error_line_without_control_characters() {
        let failure = ToolFailure::new(
            ToolErrorCode::Execution,
            "the upstream said \u{1b}]0;owned\u{7}\u{1b}[2J\rdone\nnext",
        );
        let line = super::failure_line(&ToolOutcome::Error(failure)).unwrap();
        assert!(
            line.starts_with("error: execution: the upstream said ")
                && !line.chars().any(|c| c.is_control() && c != '\n'),
            "{line:?}"
        );
    }
}

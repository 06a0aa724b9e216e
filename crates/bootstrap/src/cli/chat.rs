//! `cogni chat`: one turn against the configured endpoint, shown as it streams.

use std::io::Write;
use std::process::ExitCode;

use ai_core::{
    AiEvent, CancellationToken, DoneReason, RunContext, ThreadId, ToolCatalog, ToolOutcome,
};

use super::terminal_safe;
use crate::{Overrides, Runtime, Settings, create_completion};

/// Runs one turn on `thread` (a new thread each time without one, or without a data folder to
/// keep it in) and prints the answer, each tool call and its result as they happen, with their
/// control characters but line breaks and tabs replaced ([`terminal_safe`]); with `json`,
/// prints the `AiEvent`s as JSON lines instead.
pub(crate) async fn run(
    message: String,
    thread: Option<String>,
    json: bool,
    overrides: Overrides,
) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(&overrides)?;
    settings.require_model()?;
    let stores = crate::create_stores(&settings)?;
    let completion =
        crate::record_completion(create_completion(&settings.llm)?, &stores, &settings.llm);
    let runtime = Runtime::build(&settings, completion)?;
    // Close what a crash left open first, as `cogni serve` does at start; runs live in another
    // process hold their locks and are left alone. A run that cannot be closed stays open for
    // the next start and does not stop this turn.
    if let Err(error) = crate::recover(&stores, runtime.clock.as_ref()).await {
        eprintln!("{}", terminal_safe(&format!("warning: {error:#}")));
    }
    let run_id = run_id(runtime.clock.now_ms(), std::process::id());
    let thread = ThreadId::new(thread.unwrap_or_else(|| run_id.clone()))?;
    let ctx = RunContext::new(run_id, "user:cli", "local")?;
    let catalog = ToolCatalog::build(runtime.source.as_ref(), &runtime.policy, &ctx)?;
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    let saved_state = stores.threads.load(&thread).await?;
    let state = match saved_state.clone() {
        // The decoder's own message would quote the state (the conversation): never shown.
        Some(saved) => serde_json::from_value(saved).map_err(|e| {
            anyhow::anyhow!(
                "thread {} holds an unreadable state: {}",
                thread.as_str(),
                ai_core::describe_json_error(&e)
            )
        })?,
        None => runtime.agent.new_state(),
    };
    let request = crate::RunRequest {
        thread,
        state,
        saved_state,
        turn: crate::Turn::UserMessage(message),
        ctx,
        catalog,
        cancel,
    };
    let mut events = crate::start_run(&runtime, &stores, request, || {}).await?;
    let printer = Printer::new(json);
    while let Some(event) = events.recv().await {
        printer.print(&event);
    }
    Ok(exit_code(printer.done()))
}

/// Success when the run ended on its own (`stop`, or at its step limit); failure otherwise: an
/// error, a cancel, calls waiting for approval, or an answer the provider cut off or ended for a
/// reason the loop does not know (a script must not take a maybe incomplete answer for the whole
/// one).
fn exit_code(done: Option<DoneReason>) -> ExitCode {
    match done {
        Some(DoneReason::Stop | DoneReason::MaxSteps) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

/// Prints events for a person (or as JSON lines), remembering how the run ended.
struct Printer {
    json: bool,
    state: std::sync::Mutex<PrintState>,
}

#[derive(Default)]
struct PrintState {
    in_text: bool,
    /// The last text delta ended with `\r`, not printed yet: a `\n` starting the next delta
    /// makes it a line end; anything else, a `\r` that is replaced ([`terminal_safe`]).
    held_cr: bool,
    done: Option<DoneReason>,
}

impl Printer {
    fn new(json: bool) -> Self {
        Self {
            json,
            state: std::sync::Mutex::default(),
        }
    }

    fn done(&self) -> Option<DoneReason> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).done
    }

    fn print(&self, event: &AiEvent) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let AiEvent::Done { reason } = event {
            state.done = Some(*reason);
        }
        let mut out = std::io::stdout().lock();
        // A closed stdout (a pipe to `head`) ends the output, not the run.
        let _ = if self.json {
            match serde_json::to_string(event) {
                Ok(line) => writeln!(out, "{line}"),
                Err(_) => Ok(()),
            }
        } else {
            Self::human(&mut state, event, &mut out)
        };
        let _ = out.flush();
    }

    /// Writes `event` for a person: what the model wrote, and what a tool or the endpoint
    /// answered, with their control characters replaced ([`terminal_safe`]), so no escape
    /// sequence in them reaches the terminal.
    /// A `\r` that ends a text delta waits for the next event, which may start with the `\n`
    /// of the same Windows line end: the stream may split the two.
    fn human(state: &mut PrintState, event: &AiEvent, out: &mut impl Write) -> std::io::Result<()> {
        let mut shown = Vec::new();
        let is_text = matches!(event, AiEvent::TextDelta { .. });
        if std::mem::take(&mut state.held_cr) {
            if is_text {
                shown.push(b'\r');
            } else {
                out.write_all(terminal_safe("\r").as_bytes())?;
            }
        }
        Self::render(state, event, &mut shown)?;
        if is_text && shown.last() == Some(&b'\r') {
            shown.pop();
            state.held_cr = true;
        }
        out.write_all(terminal_safe(&String::from_utf8_lossy(&shown)).as_bytes())
    }

    fn render(
        state: &mut PrintState,
        event: &AiEvent,
        out: &mut impl Write,
    ) -> std::io::Result<()> {
        let line_break = |state: &mut PrintState, out: &mut dyn Write| {
            if std::mem::take(&mut state.in_text) {
                writeln!(out)
            } else {
                Ok(())
            }
        };
        match event {
            AiEvent::TextDelta { delta } => {
                state.in_text = true;
                write!(out, "{delta}")
            }
            AiEvent::ToolCallStart {
                tool_name, args, ..
            } => {
                line_break(state, out)?;
                let args = args
                    .as_ref()
                    .map_or_else(|| "(invalid arguments)".to_owned(), |a| a.to_string());
                writeln!(out, "→ {tool_name} {args}")
            }
            AiEvent::ToolCallRetrying {
                attempt,
                max_attempts,
                retry_in_ms,
                ..
            } => writeln!(
                out,
                "  … retrying ({attempt}/{max_attempts}) in {retry_in_ms} ms"
            ),
            AiEvent::ToolCallResult {
                tool_name, outcome, ..
            } => match outcome {
                ToolOutcome::Ok { value } => writeln!(out, "  ✓ {tool_name}: {value}"),
                ToolOutcome::Error(failure) => writeln!(
                    out,
                    "  ✗ {tool_name}: {}: {}",
                    failure.code, failure.safe_message
                ),
                other => writeln!(out, "  ? {tool_name}: {}", other.model_content()),
            },
            AiEvent::ApprovalRequired { tool_id, args, .. } => {
                line_break(state, out)?;
                writeln!(out, "⏸ {tool_id} {args}: waits for approval (not run)")
            }
            AiEvent::Error { message } => {
                line_break(state, out)?;
                writeln!(out, "error: {message}")
            }
            AiEvent::Done { reason } => {
                line_break(state, out)?;
                match reason {
                    DoneReason::Stop => Ok(()),
                    DoneReason::Length => writeln!(
                        out,
                        "[answer cut: the model reached its output limit before it finished]"
                    ),
                    DoneReason::ContentFilter => writeln!(
                        out,
                        "[answer cut: the provider's content filter stopped the model]"
                    ),
                    DoneReason::Other => writeln!(
                        out,
                        "[answer may be incomplete: the provider ended it for a reason other than \
                         a natural end]"
                    ),
                    other => writeln!(
                        out,
                        "[run ended: {}]",
                        serde_json::to_value(other)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default()
                    ),
                }
            }
            _ => Ok(()),
        }
    }
}

/// The run id of one `cogni chat` (and the thread id of a new conversation): the time, and the
/// process, since chats started by a script in parallel may start in the same millisecond.
fn run_id(now_ms: u64, pid: u32) -> String {
    format!("chat-{now_ms}-{pid}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two chats started in the same millisecond by two processes get two runs and two threads.
    #[test]
    fn chats_started_together_get_their_own_ids() {
        let (a, b) = (run_id(1_795_681_632_509, 41), run_id(1_795_681_632_509, 42));
        assert_ne!(a, b);
        for id in [a, b] {
            RunContext::new(id.clone(), "user:cli", "local").unwrap();
            ThreadId::new(id).unwrap();
        }
    }

    fn shown(events: &[AiEvent]) -> String {
        let mut state = PrintState::default();
        let mut out = Vec::new();
        for event in events {
            Printer::human(&mut state, event, &mut out).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    /// A Windows line end the stream splits between two text deltas (`\r` ending one, `\n`
    /// starting the next) is a line end, as it is within one delta; a `\r` that no `\n`
    /// follows is still replaced, whatever follows it.
    #[test]
    fn a_windows_line_end_split_between_deltas_stays_a_line_end() {
        let text = |delta: &str| AiEvent::TextDelta {
            delta: delta.into(),
        };
        let done = AiEvent::Done {
            reason: DoneReason::Stop,
        };
        assert_eq!(
            shown(&[
                text("one\r"),
                text("\ntwo\r\n"),
                text("three"),
                done.clone()
            ]),
            "one\ntwo\nthree\n"
        );
        assert_eq!(
            shown(&[text("one\r"), text("two\r"), done.clone()]),
            "one\u{FFFD}two\u{FFFD}\n"
        );
        let call = AiEvent::ToolCallStart {
            tool_call_id: ai_core::ToolCallId::new("c1").unwrap(),
            tool_name: "core__get_current_time".into(),
            args: Some(std::sync::Arc::new(serde_json::json!({}))),
        };
        assert_eq!(
            shown(&[text("one\r"), call, done]),
            "one\u{FFFD}\n→ core__get_current_time {}\n"
        );
    }

    /// Escape sequences in what a model writes or a tool returns never reach the terminal raw:
    /// ESC, CR, BEL and backspace in the text, in a tool name the model made up, in a tool's
    /// error message and in a provider's error, and a C1 `CSI` (which JSON leaves unescaped)
    /// in arguments and results, are shown as U+FFFD; line breaks and tabs are kept.
    #[test]
    fn control_characters_from_the_model_or_a_tool_are_not_printed_raw() {
        const ESC: &str = "\u{1b}]52;c;cm0gLXJm\u{7}\u{1b}[1A\r\u{9b}2K\u{8}";
        let failure = ai_core::ToolFailure {
            code: ai_core::ToolErrorCode::Execution,
            category: ai_core::ToolErrorCategory::Permanent,
            retryable: false,
            retry_after_ms: None,
            safe_message: format!("failed{ESC}"),
        };
        let call_id = ai_core::ToolCallId::new("c1").unwrap();
        let out = shown(&[
            AiEvent::TextDelta {
                delta: format!("line one\n\tline two{ESC}"),
            },
            AiEvent::ToolCallStart {
                tool_call_id: call_id.clone(),
                tool_name: format!("tool{ESC}").into(),
                args: Some(std::sync::Arc::new(
                    serde_json::json!({ "a": format!("x{ESC}") }),
                )),
            },
            AiEvent::ToolCallResult {
                tool_call_id: call_id.clone(),
                tool_name: format!("tool{ESC}").into(),
                outcome: ToolOutcome::Ok {
                    value: std::sync::Arc::new(serde_json::json!(format!("v{ESC}"))),
                },
            },
            AiEvent::ToolCallResult {
                tool_call_id: call_id,
                tool_name: format!("tool{ESC}").into(),
                outcome: ToolOutcome::Error(failure),
            },
            AiEvent::Error {
                message: format!("provider said{ESC}"),
            },
        ]);
        assert!(
            !out.chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{out:?}"
        );
        assert!(
            out.starts_with("line one\n\tline two\u{FFFD}]52;"),
            "{out:?}"
        );
    }

    /// A cut answer is printed as the model wrote it, then said to be cut, and the command
    /// fails, as does one the provider ended for a reason the loop does not know (vLLM's
    /// `abort`); a complete one is printed alone and succeeds.
    #[test]
    fn a_cut_answer_is_said_to_be_cut() {
        let text = AiEvent::TextDelta {
            delta: "Here is how".into(),
        };
        for (reason, why) in [
            (DoneReason::Length, "output limit"),
            (DoneReason::ContentFilter, "content filter"),
        ] {
            let out = shown(&[text.clone(), AiEvent::Done { reason }]);
            assert!(
                out.starts_with("Here is how\n[answer cut: ") && out.contains(why),
                "{out}"
            );
            assert_eq!(exit_code(Some(reason)), ExitCode::FAILURE);
        }
        let out = shown(&[
            text.clone(),
            AiEvent::Done {
                reason: DoneReason::Other,
            },
        ]);
        assert!(
            out.starts_with("Here is how\n[answer may be incomplete: ") && out.ends_with("]\n"),
            "{out}"
        );
        assert_eq!(exit_code(Some(DoneReason::Other)), ExitCode::FAILURE);
        let out = shown(&[
            text,
            AiEvent::Done {
                reason: DoneReason::Stop,
            },
        ]);
        assert_eq!(out, "Here is how\n");
        assert_eq!(exit_code(Some(DoneReason::Stop)), ExitCode::SUCCESS);
    }
}

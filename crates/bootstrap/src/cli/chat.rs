//! `cogni chat`: one turn against the configured endpoint, shown as it streams.

use std::io::Write;
use std::process::ExitCode;

use ai_core::{AiEvent, CancellationToken, DoneReason, RunContext, ThreadId, ToolOutcome};

use super::terminal_safe;
use crate::{Overrides, Runtime, Settings, create_completion};

/// Runs one turn on `thread` (a new thread each time without one, or without a data folder to
/// keep it in) and prints the answer, each tool call and its result as they happen, with their
/// control characters but line breaks and tabs replaced ([`terminal_safe`]); with `json`,
/// prints the `AiEvent`s as JSON lines instead. A message without text (empty or whitespace
/// only) is refused. A stdout its reader closed (`| head`) ends the output, not the run, and the
/// exit status is the run's; any other error writing the output ends the output too, and is
/// returned once the run has ended.
pub(crate) async fn run(
    message: String,
    thread: Option<String>,
    json: bool,
    overrides: Overrides,
) -> anyhow::Result<ExitCode> {
    // Nothing in it for a model to answer: refused before anything is opened or sent.
    if message.trim().is_empty() {
        anyhow::bail!("the message holds no text: there is nothing to send to the model");
    }
    let settings = Settings::load(&overrides)?;
    settings.require_model()?;
    let stores = crate::create_stores(&settings)?;
    let completion =
        crate::record_completion(create_completion(&settings.llm)?, &stores, &settings.llm);
    let runtime = Runtime::build(&settings, completion)?;
    super::warn_unknown_tools(&runtime.policy, runtime.source.as_ref());
    // Close what a crash left open first, as `cogni serve` does at start; runs live in another
    // process hold their locks and are left alone. A run that cannot be closed stays open for
    // the next start and does not stop this turn.
    if let Err(error) = crate::recover(&stores, runtime.clock.as_ref()).await {
        super::say_on_stderr(&terminal_safe(&format!("warning: {error:#}")));
    }
    let clock = runtime.clock.clone();
    let fresh = || run_id(clock.now_ms(), std::process::id(), crate::nonce());
    let run_id = free_run_id(&stores, thread.is_none(), fresh).await?;
    let thread = ThreadId::new(thread.unwrap_or_else(|| run_id.clone()))?;
    let ctx = RunContext::new(run_id, "user:cli", "local")?;
    let catalog = runtime.runner.catalog(&ctx)?;
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
    if let Some(error) = printer.write_error() {
        let error = anyhow::Error::from(error).context("cannot print the run");
        if !super::is_stdout_closed(&error) {
            return Err(error);
        }
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
    /// Each call's arguments as the model streamed them, until its start is shown.
    sent_args: std::collections::HashMap<ai_core::ToolCallId, String>,
    /// The first error writing to stdout: nothing more is written after it.
    write_error: Option<std::io::Error>,
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

    /// The first error writing to stdout, taken.
    fn write_error(&self) -> Option<std::io::Error> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_error
            .take()
    }

    fn print(&self, event: &AiEvent) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let AiEvent::Done { reason } = event {
            state.done = Some(*reason);
        }
        // A closed stdout (a pipe to `head`), or one that cannot be written, ends the output,
        // not the run.
        if state.write_error.is_some() {
            return;
        }
        let mut out = super::stdout::stdout();
        let written = if self.json {
            match serde_json::to_string(event) {
                Ok(line) => writeln!(out, "{line}"),
                Err(_) => Ok(()),
            }
        } else {
            Self::human(&mut state, event, &mut out)
        };
        if let Err(error) = written.and_then(|()| out.flush()) {
            state.write_error = Some(error);
        }
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
            AiEvent::ToolCallStreamStart { tool_call_id, .. } => {
                state.sent_args.insert(tool_call_id.clone(), String::new());
                Ok(())
            }
            AiEvent::ToolCallArgsDelta {
                tool_call_id,
                delta,
            } => {
                state
                    .sent_args
                    .entry(tool_call_id.clone())
                    .or_default()
                    .push_str(delta);
                Ok(())
            }
            AiEvent::ToolCallStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                line_break(state, out)?;
                // What the model sent, as it sent it (compact): the validated arguments fill in
                // what it left out (`null` for an optional field) and drop what the tool
                // ignores. Without its text (not streamed, or no JSON), the validated ones.
                let sent = state
                    .sent_args
                    .remove(tool_call_id)
                    .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
                let args = match (args, sent) {
                    (None, _) => "(invalid arguments)".to_owned(),
                    (Some(_), Some(sent)) => sent.to_string(),
                    (Some(args), None) => args.to_string(),
                };
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
                tool_call_id,
                tool_name,
                outcome,
            } => {
                // A call answered without a start (the loop's answer to a streamed call the
                // model's completed answer does not hold) comes after the text, on a line of
                // its own, and its streamed text is not kept for a later call of its id.
                state.sent_args.remove(tool_call_id);
                line_break(state, out)?;
                match outcome {
                    ToolOutcome::Ok { value } => writeln!(out, "  ✓ {tool_name}: {value}"),
                    ToolOutcome::Error(failure) => writeln!(
                        out,
                        "  ✗ {tool_name}: {}: {}",
                        failure.code, failure.safe_message
                    ),
                    other => writeln!(out, "  ? {tool_name}: {}", other.model_content()),
                }
            }
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

/// The run id of one `cogni chat` (and the thread id of a new conversation):
/// `chat-<ms>-<pid>-<8 hex digits>`. The time and the process tell chats a script starts in
/// parallel apart; the random `nonce` tells apart those of containers that share one data
/// folder, where each has its own pid namespace (and so, often, the same pid).
fn run_id(now_ms: u64, pid: u32, nonce: u32) -> String {
    format!("chat-{now_ms}-{pid}-{nonce:08x}")
}

/// How many fresh ids [`free_run_id`] tries before it gives up.
const ID_ATTEMPTS: usize = 3;

/// The first id `fresh` makes that names no run in the data folder's run log (and, for a new
/// conversation, `new_thread`, no saved thread either), so a chat never continues a run or a
/// conversation another process started under the same id. After [`ID_ATTEMPTS`] taken ids it
/// is an error naming the last one; nothing was written. (The run log's `begin_run` still
/// refuses an id taken between this check and the run's start: a collision is never an
/// overwrite.)
async fn free_run_id(
    stores: &crate::Stores,
    new_thread: bool,
    mut fresh: impl FnMut() -> String,
) -> anyhow::Result<String> {
    let mut last = String::new();
    for _ in 0..ID_ATTEMPTS {
        let candidate = fresh();
        let run = ai_core::RunId::new(candidate.clone())?;
        let run_taken = match &stores.log {
            Some(log) => match log.runs.load_run(&run).await {
                Err(ai_core::RunStoreError::NotFound(_)) => false,
                // Stored, readable or not: the id is taken.
                Ok(_) | Err(ai_core::RunStoreError::Corrupt(_)) => true,
                Err(error) => return Err(error.into()),
            },
            None => false,
        };
        let thread_taken = new_thread
            && stores
                .threads
                .load(&ThreadId::new(candidate.clone())?)
                .await?
                .is_some();
        if !run_taken && !thread_taken {
            return Ok(candidate);
        }
        last = candidate;
    }
    anyhow::bail!(
        "no free run id for this chat: {ID_ATTEMPTS} fresh ids were taken in the data folder, \
         the last {last}; nothing was written"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two chats started in the same millisecond by two processes get two runs and two threads,
    /// also when the processes have the same pid (two containers sharing a data folder).
    #[test]
    fn chats_started_together_get_their_own_ids() {
        let now = 1_795_681_632_509;
        let (a, b) = (
            run_id(now, 41, crate::nonce()),
            run_id(now, 42, crate::nonce()),
        );
        let (c, d) = (
            run_id(now, 41, crate::nonce()),
            run_id(now, 41, crate::nonce()),
        );
        assert_ne!(a, b);
        assert_ne!(c, d);
        assert!(
            c.starts_with("chat-1795681632509-41-") && c.len() == 30,
            "{c}"
        );
        for id in [a, b, c, d] {
            RunContext::new(id.clone(), "user:cli", "local").unwrap();
            ThreadId::new(id).unwrap();
        }
    }

    /// Stores with a run log in memory, holding the run `chat-run` and the thread `chat-thread`.
    async fn stores_with_taken_ids(locks: &tempfile::TempDir) -> crate::Stores {
        use ai_core::{RunStore, ThreadStore};
        let runs = std::sync::Arc::new(adapters::InMemoryRunStore::default());
        let threads = std::sync::Arc::new(graph::InMemoryThreadStore::default());
        let run = ai_core::RunId::new("chat-run").unwrap();
        runs.begin_run(&run, None, 1, None).await.unwrap();
        let thread = ThreadId::new("chat-thread").unwrap();
        threads
            .save(&thread, None, &serde_json::json!({}))
            .await
            .unwrap();
        crate::Stores {
            threads,
            log: Some(crate::RunLogStores {
                runs,
                blobs: std::sync::Arc::new(adapters::InMemoryBlobStore::default()),
                receipts: std::sync::Arc::new(adapters::ReceiptCollector::default()),
                locks: crate::RunLocks::new(locks.path()),
                histories: Default::default(),
            }),
            memory_threads: None,
        }
    }

    /// An id the data folder already holds, as a run or (for a new conversation) as a thread,
    /// is passed over for the next fresh one; when every try is taken the chat is refused,
    /// naming the id, rather than continuing another process's run or conversation.
    #[tokio::test]
    async fn a_chat_never_takes_an_id_the_data_folder_holds() {
        let locks = tempfile::tempdir().unwrap();
        let stores = stores_with_taken_ids(&locks).await;
        let mut ids = ["chat-run", "chat-thread", "chat-free"].into_iter();
        let free = free_run_id(&stores, true, || ids.next().unwrap().to_owned()).await;
        assert_eq!(free.unwrap(), "chat-free");
        // With a thread given, a saved thread of that id is no collision: only runs count.
        let mut ids = ["chat-run", "chat-thread"].into_iter();
        let free = free_run_id(&stores, false, || ids.next().unwrap().to_owned()).await;
        assert_eq!(free.unwrap(), "chat-thread");

        let error = free_run_id(&stores, true, || "chat-run".to_owned())
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "no free run id for this chat: 3 fresh ids were taken in the data folder, the last \
             chat-run; nothing was written"
        );
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

    /// A call is shown with the arguments the model sent (its streamed text, compact), not the
    /// validated ones the start event holds, in which an optional field the model left out is
    /// filled in as `null`; without streamed text (or with text that is no JSON), the start
    /// event's arguments are shown.
    #[test]
    fn a_call_shows_the_arguments_the_model_sent() {
        let id = ai_core::ToolCallId::new("c1").unwrap();
        let stream_start = AiEvent::ToolCallStreamStart {
            tool_call_id: id.clone(),
            tool_name: "core__workspace_list".into(),
        };
        let delta = |text: &str| AiEvent::ToolCallArgsDelta {
            tool_call_id: id.clone(),
            delta: text.into(),
        };
        let start = AiEvent::ToolCallStart {
            tool_call_id: id.clone(),
            tool_name: "core__workspace_list".into(),
            args: Some(std::sync::Arc::new(serde_json::json!({ "path": null }))),
        };
        assert_eq!(
            shown(&[stream_start.clone(), delta("{ "), delta("}"), start.clone()]),
            "→ core__workspace_list {}\n"
        );
        assert_eq!(
            shown(&[
                stream_start.clone(),
                delta("{\"path\":\n \"a\"}"),
                start.clone()
            ]),
            "→ core__workspace_list {\"path\":\"a\"}\n"
        );
        // Nothing streamed, or text that does not parse: the event's arguments.
        assert_eq!(
            shown(std::slice::from_ref(&start)),
            "→ core__workspace_list {\"path\":null}\n"
        );
        assert_eq!(
            shown(&[stream_start, delta("{\"path\""), start.clone()]),
            "→ core__workspace_list {\"path\":null}\n"
        );
        // The text of one call is not shown for the next.
        assert_eq!(
            shown(&[delta("{\"x\":1}"), start.clone(), start]),
            "→ core__workspace_list {\"x\":1}\n→ core__workspace_list {\"path\":null}\n"
        );
    }

    /// A streamed call answered without a start (its completion did not hold it) is shown
    /// answered on a line of its own after the text, and its streamed text is not shown for a
    /// later call under its id.
    #[test]
    fn a_streamed_call_answered_without_a_start_ends_on_its_own_line() {
        let id = ai_core::ToolCallId::new("c1").unwrap();
        let failure = ai_core::ToolFailure::new(ai_core::ToolErrorCode::Validation, "never ran");
        let events = [
            AiEvent::TextDelta {
                delta: "Let me look.".into(),
            },
            AiEvent::ToolCallStreamStart {
                tool_call_id: id.clone(),
                tool_name: "core__workspace_list".into(),
            },
            AiEvent::ToolCallArgsDelta {
                tool_call_id: id.clone(),
                delta: r#"{"x":1}"#.into(),
            },
            AiEvent::ToolCallResult {
                tool_call_id: id.clone(),
                tool_name: "core__workspace_list".into(),
                outcome: ToolOutcome::Error(failure),
            },
            AiEvent::ToolCallStart {
                tool_call_id: id,
                tool_name: "core__workspace_list".into(),
                args: Some(std::sync::Arc::new(serde_json::json!({ "path": null }))),
            },
        ];
        assert_eq!(
            shown(&events),
            "Let me look.\n  ✗ core__workspace_list: validation: never ran\n\
             → core__workspace_list {\"path\":null}\n"
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

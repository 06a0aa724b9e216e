//! `cogni runs list`, `cogni runs show` and `cogni replay`: what the run log holds (the redacted
//! view: no `raw` payload is ever shown) and a deterministic re-run of a recorded run.

use std::io::Write;
use std::process::ExitCode;

use adapters::shown_cut;
use ai_core::{ModelReceipt, RunHeader, RunLog, RunSummary, ToolInvocationRecord};
use serde_json::{Value, json};

use super::terminal_safe;
use crate::replay::{ReplayOutcome, data_dir, load_run, open_run_log, replay_run};
use crate::{Overrides, Settings};

/// `cogni runs list`: one row (or, with `json`, one JSON line) per run, oldest first, each with
/// its event count, read from the store's summaries ([`ai_core::RunStore::list_run_summaries`]):
/// no run's events are loaded, so a long log lists as fast as its headers. The count is of the
/// stored events, readable or not (`cogni runs show` reports a damaged one). A row shows no
/// control character of the ids a client picked ([`terminal_safe`]).
pub(crate) async fn list(overrides: Overrides, json: bool) -> anyhow::Result<ExitCode> {
    // Only the data folder is read: the model's settings, the server's and the workspace are
    // not this command's, and cannot stop it.
    let settings = Settings::read(&overrides)?;
    let log = open_run_log(&data_dir(&settings)?)?;
    let mut summaries = log.runs.list_run_summaries().await?;
    summaries.sort_by(|a, b| {
        (a.header.started_at_ms, a.header.run_id.as_str())
            .cmp(&(b.header.started_at_ms, b.header.run_id.as_str()))
    });
    let mut out = super::stdout::stdout();
    if json {
        for summary in summaries {
            let mut row = header_json(&summary.header);
            row["events"] = json!(summary.event_count);
            writeln!(out, "{row}")?;
        }
    } else {
        list_human(&mut out, &summaries)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The table of `cogni runs list`: a header line, then one row per run, each column as wide
/// as its widest cell (a `cogni chat` id is 33 characters), so the columns line up whatever
/// ids clients picked. A cell shows no control character ([`terminal_safe`]).
fn list_human(out: &mut impl Write, summaries: &[RunSummary]) -> std::io::Result<()> {
    const HEADINGS: [&str; 6] = ["run", "thread", "status", "started", "finished", "events"];
    let rows: Vec<[String; 6]> = summaries.iter().map(list_row).collect();
    let mut widths = HEADINGS.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 6]| {
        let [run, thread, status, started, finished, events] = cells;
        let [w0, w1, w2, w3, w4, w5] = widths;
        format!(
            "{run:<w0$} {thread:<w1$} {status:<w2$} {started:<w3$} {finished:<w4$} {events:>w5$}"
        )
    };
    writeln!(out, "{}", line(HEADINGS))?;
    for row in &rows {
        writeln!(out, "{}", line(row.each_ref().map(String::as_str)))?;
    }
    Ok(())
}

/// One run's cells in `cogni runs list`, each [`terminal_safe`].
fn list_row(summary: &RunSummary) -> [String; 6] {
    let header = &summary.header;
    [
        header.run_id.as_str().to_owned(),
        header
            .thread_id
            .as_ref()
            .map_or("-", |t| t.as_str())
            .to_owned(),
        header.status.as_str().to_owned(),
        iso8601(header.started_at_ms),
        header.finished_at_ms.map_or_else(|| "-".into(), iso8601),
        summary.event_count.to_string(),
    ]
    .map(|cell| terminal_safe(&cell).into_owned())
}

/// `cogni runs show`: the header, the events, the invocation records and a summary of each
/// model call's receipt; with `json`, one JSON object with the same. The human view shows no
/// control character of what a client, a model, a tool or a damaged blob put in the run log
/// ([`terminal_safe`]).
pub(crate) async fn show(
    overrides: Overrides,
    run_id: String,
    json: bool,
) -> anyhow::Result<ExitCode> {
    // Only the data folder is read: the model's settings, the server's and the workspace are
    // not this command's, and cannot stop it.
    let settings = Settings::read(&overrides)?;
    let log = open_run_log(&data_dir(&settings)?)?;
    let run = load_run(&log, &run_id).await?;
    let mut receipts = Vec::with_capacity(run.receipt_refs.len());
    for (i, receipt_ref) in run.receipt_refs.iter().enumerate() {
        receipts.push(
            match ModelReceipt::load(log.blobs.as_ref(), receipt_ref).await {
                Ok(receipt) => json!({
                    "call": i + 1,
                    "receipt_ref": receipt_ref,
                    "provider": receipt.provider,
                    "model": receipt.model,
                    "finish_reason": receipt.finish_reason,
                    "usage": receipt.usage,
                    "tool_calls": receipt.tool_call_refs.len(),
                }),
                Err(error) => json!({
                    "call": i + 1,
                    "receipt_ref": receipt_ref,
                    "error": error.to_string(),
                }),
            },
        );
    }
    let mut out = super::stdout::stdout();
    if json {
        let shown = json!({
            "header": header_json(&run.header),
            "events": run.events,
            "records": run.records.iter().map(record_json).collect::<Vec<_>>(),
            "receipts": receipts,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    show_human(&mut out, &run, &receipts)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The human view of `cogni runs show`.
fn show_human(out: &mut impl Write, run: &RunLog, receipts: &[Value]) -> anyhow::Result<()> {
    let mut shown = Vec::new();
    render_human(&mut shown, run, receipts)?;
    // Everything shown is UTF-8 (`String`s and JSON); what a client, a model or a damaged
    // database put there may hold escape sequences.
    out.write_all(terminal_safe(&String::from_utf8_lossy(&shown)).as_bytes())?;
    Ok(())
}

fn render_human(out: &mut impl Write, run: &RunLog, receipts: &[Value]) -> anyhow::Result<()> {
    let header = &run.header;
    writeln!(out, "run       {}", header.run_id.as_str())?;
    writeln!(
        out,
        "thread    {}",
        header.thread_id.as_ref().map_or("-", |t| t.as_str())
    )?;
    writeln!(out, "status    {}", header.status)?;
    writeln!(out, "started   {}", iso8601(header.started_at_ms))?;
    writeln!(
        out,
        "finished  {}",
        header.finished_at_ms.map_or_else(|| "-".into(), iso8601)
    )?;
    // A damaged log may hold anything in place of the address: it is shown shortened.
    writeln!(
        out,
        "input     {}",
        header.input_ref.as_deref().map_or("-".into(), shown_cut)
    )?;
    writeln!(out, "\nevents ({})", run.events.len())?;
    for (i, event) in run.events.iter().enumerate() {
        writeln!(out, "  #{i:<4} {}", serde_json::to_string(event)?)?;
    }
    writeln!(out, "\ntool calls ({})", run.records.len())?;
    for record in &run.records {
        let view = record_json(record);
        let outcome = match (&view["result"], &view["error"]) {
            (Value::Null, Value::Null) => "-".to_owned(),
            (Value::Null, error) => format!(
                "error {}: {}",
                error["code"].as_str().unwrap_or("?"),
                error["message"].as_str().unwrap_or("")
            ),
            (result, _) => format!("ok {result}"),
        };
        writeln!(
            out,
            "  {} {} args={} attempts={} {}ms → {}",
            view["tool_call_id"].as_str().unwrap_or("?"),
            view["tool_id"].as_str().unwrap_or("?"),
            view["args"],
            view["attempts"],
            view["duration_ms"],
            outcome
        )?;
    }
    writeln!(out, "\nmodel calls ({})", receipts.len())?;
    for receipt in receipts {
        if let Some(error) = receipt["error"].as_str() {
            writeln!(out, "  #{} error: {error}", receipt["call"])?;
            continue;
        }
        let usage = &receipt["usage"];
        let usage = if usage.is_null() {
            "usage -".to_owned()
        } else {
            // The counts a provider reports only sometimes are shown when it did.
            let mut shown = format!(
                "tokens in={} out={} total={}",
                usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]
            );
            for (key, label) in [
                ("cached_input_tokens", "cached"),
                ("reasoning_tokens", "reasoning"),
            ] {
                if let Some(count) = usage[key].as_u64() {
                    shown.push_str(&format!(" {label}={count}"));
                }
            }
            shown
        };
        // A damaged log may hold anything in place of the names: they are shown shortened.
        let name = |key: &str| receipt[key].as_str().map_or("?".into(), shown_cut);
        writeln!(
            out,
            "  #{} {} {} finish={} {usage} tool_calls={}",
            receipt["call"],
            name("provider"),
            name("model"),
            receipt["finish_reason"].as_str().unwrap_or("?"),
            receipt["tool_calls"]
        )?;
    }
    Ok(())
}

/// `cogni replay`: replays the run and prints whether its events came out identical.
pub(crate) async fn replay(overrides: Overrides, run_id: String) -> anyhow::Result<ExitCode> {
    // `replay_run` checks what it uses (the data folder, the tool set, the policy).
    let settings = Settings::read(&overrides)?;
    let outcome = replay_run(&settings, &run_id).await?;
    let mut out = super::stdout::stdout();
    let identical = replay_report(&mut out, &outcome)?;
    out.flush()?;
    Ok(if identical {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Writes what `cogni replay` says of `outcome`; `true` when the events came out identical.
fn replay_report(out: &mut impl Write, outcome: &ReplayOutcome) -> std::io::Result<bool> {
    if let Some(note) = &outcome.settings_note {
        writeln!(out, "replay: note: {note}")?;
    }
    // Recorded model calls the replay never asked for: it stopped short of the run.
    let unasked = match outcome.unasked_calls {
        0 => None,
        1 => Some("1 recorded model call was never asked for".to_owned()),
        n => Some(format!("{n} recorded model calls were never asked for")),
    };
    match outcome.first_difference() {
        None => {
            let identical = format!("replay: {} events identical", outcome.recorded.len());
            match &unasked {
                None => writeln!(out, "{identical}")?,
                Some(unasked) => writeln!(
                    out,
                    "{identical}, but {unasked}: the replay made fewer model calls than the run"
                )?,
            }
            Ok(unasked.is_none())
        }
        Some(difference) => {
            let line = format!(
                "replay: event #{} differs: recorded {}; replayed {}",
                difference.index, difference.recorded, difference.replayed
            );
            // JSON escapes C0 control characters, not C1 ones (a one-character `CSI`).
            writeln!(out, "{}", terminal_safe(&line))?;
            if let Some(unasked) = unasked {
                writeln!(
                    out,
                    "replay: note: {unasked}: the replay made fewer model calls than the run"
                )?;
            }
            if let Some(note) = outcome.revision_note() {
                writeln!(out, "replay: note: {note}")?;
            }
            Ok(false)
        }
    }
}

fn header_json(header: &RunHeader) -> Value {
    json!({
        "run_id": header.run_id.as_str(),
        "thread_id": header.thread_id.as_ref().map(|t| t.as_str()),
        "status": header.status.as_str(),
        "started_at_ms": header.started_at_ms,
        "finished_at_ms": header.finished_at_ms,
        "input_ref": header.input_ref,
    })
}

/// The redacted view of a record: never its `raw` payload.
fn record_json(record: &ToolInvocationRecord) -> Value {
    json!({
        "tool_call_id": record.tool_call_id.as_str(),
        "tool_id": &*record.tool_id,
        "args": record.args.as_deref(),
        "result": record.result.as_deref(),
        "error": record.error.as_ref().map(|f| json!({
            "code": f.code.to_string(),
            "message": f.safe_message,
        })),
        "attempts": record.attempts.len(),
        "duration_ms": record.ended_at_ms.saturating_sub(record.started_at_ms),
    })
}

/// `ms` since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    // Civil from days (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ai_core::{
        AiEvent, RunHeader, RunId, RunLog, RunStatus, ThreadId, ToolCallId, ToolErrorCategory,
        ToolErrorCode, ToolFailure, ToolInvocationRecord,
    };
    use serde_json::{Value, json};

    use super::*;

    /// What a hostile client, model or tool can put in a run log: escape sequences in the call ids
    /// a model picks (run and thread ids refuse control characters), in model text (a C1 `CSI`,
    /// which JSON does not escape), in a tool's error message and in what a damaged receipt blob
    /// says.
    const ESC: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\r\u{9b}1A\u{8}";

    fn hostile_run() -> RunLog {
        let run_id = RunId::new("run\u{202E}").unwrap();
        RunLog {
            header: RunHeader {
                run_id,
                thread_id: Some(ThreadId::new("thread\u{2066}").unwrap()),
                status: RunStatus::Finished,
                started_at_ms: 0,
                finished_at_ms: Some(1),
                input_ref: Some(format!("ref{ESC}")),
            },
            events: vec![AiEvent::TextDelta {
                delta: format!("text{ESC}"),
            }],
            records: vec![ToolInvocationRecord {
                tool_call_id: ToolCallId::new(format!("call{ESC}")).unwrap(),
                tool_id: format!("tool{ESC}").into(),
                args: Some(Arc::new(json!({ "k": format!("arg{ESC}") }))),
                result: None,
                error: Some(ToolFailure {
                    code: ToolErrorCode::Execution,
                    category: ToolErrorCategory::Permanent,
                    retryable: false,
                    retry_after_ms: None,
                    safe_message: format!("message{ESC}"),
                }),
                started_at_ms: 0,
                ended_at_ms: 1,
                attempts: Vec::new(),
                raw: None,
            }],
            receipt_refs: Vec::new(),
        }
    }

    /// Whether `shown` holds a control character a terminal acts on.
    fn assert_terminal_safe(shown: &[u8]) {
        let shown = String::from_utf8(shown.to_vec()).unwrap();
        assert!(
            !shown
                .chars()
                .any(|c| (c.is_control() && c != '\n' && c != '\t')
                    || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')),
            "{shown:?}"
        );
        assert!(shown.contains('\u{FFFD}'), "{shown:?}");
    }

    #[test]
    fn runs_show_and_list_show_no_control_character_of_the_run() {
        let run = hostile_run();
        let receipts = vec![
            json!({"call": 1, "error": format!("blob {ESC} is damaged")}),
            json!({"call": 2, "provider": format!("p{ESC}"), "model": format!("m{ESC}"),
                   "finish_reason": format!("f{ESC}"), "usage": null, "tool_calls": 0}),
        ];
        let mut out = Vec::new();
        show_human(&mut out, &run, &receipts).unwrap();
        assert_terminal_safe(&out);

        let mut out = Vec::new();
        let summary = RunSummary {
            header: run.header.clone(),
            event_count: 1,
        };
        list_human(&mut out, &[summary]).unwrap();
        assert_terminal_safe(&out);
    }

    /// A damaged or hand-edited run log may hold a megabyte where the run's input address
    /// should be: `runs show` names it shortened, never whole.
    #[test]
    fn runs_show_shortens_a_hostile_input_address() {
        let mut run = hostile_run();
        run.header.input_ref = Some("f".repeat(1 << 20));
        let mut out = Vec::new();
        show_human(&mut out, &run, &[]).unwrap();
        let shown = String::from_utf8(out).unwrap();
        let input = shown.lines().find(|l| l.starts_with("input")).unwrap();
        assert!(input.len() < 200 && input.ends_with('…'), "{input:.300}");
    }

    /// A damaged or hand-edited run log may hold a megabyte in a receipt's provider or model
    /// name: `runs show` names them shortened, never whole.
    #[test]
    fn runs_show_shortens_a_hostile_provider_and_model_name() {
        let run = hostile_run();
        let huge = "p".repeat(1 << 20);
        let receipts = vec![json!({"call": 1, "provider": huge, "model": huge,
                                   "finish_reason": "stop", "usage": null, "tool_calls": 0})];
        let mut out = Vec::new();
        show_human(&mut out, &run, &receipts).unwrap();
        let shown = String::from_utf8(out).unwrap();
        let call = shown.lines().find(|l| l.starts_with("  #1 ")).unwrap();
        assert!(
            call.len() < 300 && call.matches('…').count() == 2,
            "{call:.400}"
        );
    }

    /// A receipt's usage shows the cached input and reasoning tokens when the provider reported
    /// them, and only then.
    #[test]
    fn runs_show_shows_cached_and_reasoning_tokens_when_reported() {
        let run = hostile_run();
        let receipt = |usage: Value| {
            json!({"call": 1, "provider": "openai", "model": "m", "finish_reason": "stop",
                   "usage": usage, "tool_calls": 0})
        };
        let receipts = vec![
            receipt(
                json!({"input_tokens": 1200, "output_tokens": 300, "total_tokens": 1500,
                           "cached_input_tokens": 1024, "reasoning_tokens": 256}),
            ),
            receipt(json!({"input_tokens": 12, "output_tokens": 7, "total_tokens": 19})),
        ];
        let mut out = Vec::new();
        show_human(&mut out, &run, &receipts).unwrap();
        let shown = String::from_utf8(out).unwrap();
        assert!(
            shown.contains("tokens in=1200 out=300 total=1500 cached=1024 reasoning=256 "),
            "{shown}"
        );
        assert!(
            shown.contains("tokens in=12 out=7 total=19 tool_calls=0"),
            "{shown}"
        );
    }

    #[test]
    fn runs_list_keeps_its_columns_under_long_ids() {
        let run = |id: &str, thread: Option<&str>, events| RunSummary {
            header: RunHeader {
                run_id: RunId::new(id).unwrap(),
                thread_id: thread.map(|t| ThreadId::new(t).unwrap()),
                status: RunStatus::Finished,
                started_at_ms: 0,
                finished_at_ms: Some(1),
                input_ref: None,
            },
            event_count: events,
        };
        let summaries = [
            run("r1", Some("t1"), 3),
            // What `cogni chat` names a run and a new conversation's thread.
            run(
                "chat-1795688008629-18395-37d91c3e",
                Some("chat-1795688008629-18395-37d91c3e"),
                13,
            ),
            run("r3", None, 1234567),
        ];
        let mut out = Vec::new();
        list_human(&mut out, &summaries).unwrap();
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{out}");
        // Every column starts where its heading does, and every row is as long as the header.
        let column = |line: &str, value: &str| line.find(value).unwrap();
        for line in &lines[1..] {
            assert_eq!(
                column(line, "finished"),
                column(lines[0], "status"),
                "{out}"
            );
            assert_eq!(column(line, "1970-"), column(lines[0], "started"), "{out}");
            assert_eq!(line.len(), lines[0].len(), "{out}");
        }
        let thread = column(lines[0], "thread");
        assert!(
            lines[2][thread..].starts_with("chat-1795688008629-18395-37d91c3e "),
            "{out}"
        );
    }

    #[test]
    fn a_replay_difference_shows_no_control_character() {
        let outcome = ReplayOutcome {
            recorded: vec![AiEvent::TextDelta {
                delta: format!("a{ESC}"),
            }],
            replayed: vec![AiEvent::TextDelta {
                delta: "b\u{9b}2J".into(),
            }],
            recorded_revision: Some(graph::LOOP_REVISION),
            settings_note: None,
            unasked_calls: 0,
        };
        let mut out = Vec::new();
        assert!(!replay_report(&mut out, &outcome).unwrap());
        assert_terminal_safe(&out);
    }

    #[test]
    fn iso8601_formats_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_709_210_096_789), "2024-02-29T12:34:56.789Z");
    }
}

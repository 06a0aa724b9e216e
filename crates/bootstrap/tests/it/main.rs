//! The `cogni` binary end to end: exit codes, stdout JSON lines, one-line errors.

mod config;
mod crash;
mod fake;
mod pipe;
mod runs;
mod serve;

use std::process::{Command, Output};

use serde_json::Value;

/// The `cogni` binary as a test starts it: without the `COGNI_*` variables the test process
/// inherited, so a developer's shell that holds one (which cogni refuses when it reads no such
/// variable, or takes as a setting) changes no test. A test sets those it means.
fn cogni_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cogni"));
    // Only the names are read, to take them out of the child's environment.
    #[allow(clippy::disallowed_methods)]
    let inherited = std::env::vars_os().map(|(name, _)| name);
    for name in inherited {
        // As cogni tells its own: by the name's bytes, UTF-8 or not.
        if name.as_encoded_bytes().starts_with(b"COGNI_") {
            command.env_remove(name);
        }
    }
    command
}

fn cogni(args: &[&str]) -> Output {
    cogni_command()
        .args(args)
        .output()
        .expect("the cogni binary runs")
}

/// `cogni` with `args`, `stdin` written to its standard input, its output captured.
fn cogni_with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cogni_command()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the cogni binary runs");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout_lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("every stdout line is JSON"))
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A `COGNI_*` variable a developer's shell holds (which the binary refuses when it reads no such
/// variable, or takes as a setting) changes no test: these tests, run again with one set, pass.
/// One test of each file that starts the binary its own way is run.
#[test]
fn a_cogni_variable_of_the_developers_shell_changes_no_test() {
    let tests = [
        "get_current_time_prints_events_then_the_result",
        "config::an_unknown_tool_lists_the_known_ones",
        "pipe::a_failed_call_is_still_reported_when_stdout_is_closed",
        "runs::a_failed_tool_call_replays_as_it_failed",
    ];
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "--test-threads=1"])
        .args(tests)
        .env("COGNI_FROM_THE_SHELL", "1")
        .env("COGNI_LLM_MODEL", "a-model-of-the-shell")
        .output()
        .expect("the tests run");
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{out}{}", stderr(&output));
    assert!(out.contains(&format!("{} passed", tests.len())), "{out}");
}

#[test]
fn get_current_time_prints_events_then_the_result() {
    let output = cogni(&["tools", "call", "core__get_current_time", "--args", "{}"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = stdout_lines(&output);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["type"], "tool_call_start");
    assert_eq!(lines[1]["type"], "tool_call_result");
    assert_eq!(lines[2]["status"], "ok");
    assert!(
        lines[2]["value"]["iso8601"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert_eq!(lines[0]["tool_call_id"], lines[2]["tool_call_id"]);
}

/// Each failure prints exactly one line on stderr and exits non-zero.
#[test]
fn failures_are_one_line_and_non_zero() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["tools", "call", "core__get_current_time", "--args", "{oops"],
            "error: invalid_json: Invalid tool arguments JSON",
        ),
        (
            &["tools", "call", "core__nope"],
            "error: unavailable: tool core__nope is not available",
        ),
        (
            &[
                "tools",
                "call",
                "core__workspace_write",
                "--args",
                r#"{"path":"x","content":"y"}"#,
            ],
            "error: policy_denied: tool core__workspace_write is not allowed",
        ),
        (
            &["tools", "list", "--policy", "/nonexistent/policy.toml"],
            "error: tools.policy_file: cannot read policy file /nonexistent/policy.toml",
        ),
    ];
    for (args, expected) in cases {
        let output = cogni(args);
        assert!(!output.status.success(), "{args:?}");
        let err = stderr(&output);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with(expected), "{args:?}: {err}");
    }
}

/// A policy naming tools no tool source has (typos, in any of its tool lists) is used, with one
/// warning line on stderr naming them: `tools list` and `tools call` still work.
#[test]
fn tools_warn_of_policy_tools_no_source_has() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "allowed_tools = [\"core__workspace_raed\", \"core__get_current_time\"]\n\
         [retry_per_tool.core__get_curent_time]\n",
    )
    .unwrap();
    let policy = policy.to_str().unwrap();
    let warning = "warning: the policy names tools no tool source has, so its rules for them apply to nothing (a \
         typo?): core__get_curent_time, core__workspace_raed\n";
    let list = cogni(&["tools", "list", "--policy", policy]);
    assert!(list.status.success(), "{}", stderr(&list));
    assert_eq!(stderr(&list), warning);
    assert!(String::from_utf8_lossy(&list.stdout).starts_with("core__get_current_time "));
    let call = cogni(&[
        "tools",
        "call",
        "core__get_current_time",
        "--policy",
        policy,
    ]);
    assert!(call.status.success(), "{}", stderr(&call));
    assert_eq!(stderr(&call), warning);
    // The default policy names no unknown tool.
    assert_eq!(stderr(&cogni(&["tools", "list"])), "");
}

#[test]
fn a_policy_file_enables_writes_inside_the_workspace_only() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        r#"allowed_tools = ["core__workspace_write", "core__workspace_read"]"#,
    )
    .unwrap();
    let (policy, workspace) = (policy.to_str().unwrap(), workspace.to_str().unwrap());

    let write = cogni(&[
        "tools",
        "call",
        "core__workspace_write",
        "--args",
        r#"{"path":"notes/a.txt","content":"hi"}"#,
        "--policy",
        policy,
        "--workspace",
        workspace,
    ]);
    assert!(write.status.success(), "{}", stderr(&write));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/notes/a.txt")).unwrap(),
        "hi"
    );

    let escape = cogni(&[
        "tools",
        "call",
        "core__workspace_write",
        "--args",
        r#"{"path":"../escaped.txt","content":"x"}"#,
        "--policy",
        policy,
        "--workspace",
        workspace,
    ]);
    assert!(!escape.status.success());
    assert!(
        stderr(&escape).contains("`..` is not allowed"),
        "{}",
        stderr(&escape)
    );
    assert!(!dir.path().join("escaped.txt").exists());
}

/// `cogni tools list` opens no workspace, so it works from any folder: from `/` too (a
/// container's working folder never set), which a workspace refuses as its root. It failed
/// there, saying the whole file system cannot be a workspace.
#[test]
fn tools_list_works_from_the_root_of_the_file_system() {
    let output = cogni_command()
        .args(["tools", "list"])
        .current_dir("/")
        .output()
        .expect("the cogni binary runs");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("core__workspace_read"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn tools_list_shows_only_the_policys_catalog() {
    let output = cogni(&["tools", "list", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let specs: Value = serde_json::from_slice(&output.stdout).unwrap();
    let ids: Vec<&str> = specs
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "core__get_current_time",
            "core__workspace_list",
            "core__workspace_read"
        ]
    );
}

fn fixture(name: &str) -> String {
    format!("{}/../../fixtures/wire/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn wire_decode_prints_one_completion_object() {
    let output = cogni(&[
        "wire",
        "decode",
        "--format",
        "openai-chat",
        &fixture("openai-chat/index-zero-distinct-ids.sse"),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = stdout_lines(&output);
    assert_eq!(lines.len(), 1);
    let keys: Vec<&String> = lines[0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["finish_reason", "text", "tool_calls", "usage"]);
    assert_eq!(lines[0]["finish_reason"], "tool_calls");
    assert_eq!(lines[0]["tool_calls"][1]["id"], "call_2");
    assert_eq!(lines[0]["tool_calls"][1]["arguments"], r#"{"q":"rust"}"#);

    let output = cogni(&[
        "wire",
        "decode",
        "--format",
        "openai-responses",
        &fixture("openai-responses/function-call.sse"),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout_lines(&output)[0]["tool_calls"][0]["id"], "call_1");
}

/// `wire decode` tells a whole JSON answer from an SSE stream by its first byte (after a BOM and
/// whitespace): a whole chat completion or Responses response prints exactly what the stream of
/// the same turn prints; a stream that opens with a BOM and a comment is still a stream.
#[test]
fn wire_decode_reads_a_whole_json_answer_like_its_stream() {
    let dir = tempfile::tempdir().unwrap();
    for (format, whole, stream) in [
        (
            "openai-chat",
            "openai-chat-whole/openai-single-call.json",
            "openai-chat/openai-single-call.sse",
        ),
        (
            "openai-responses",
            "openai-responses-whole/function-call.json",
            "openai-responses/function-call.sse",
        ),
    ] {
        let whole_fixture: Value =
            serde_json::from_slice(&std::fs::read(fixture(whole)).unwrap()).unwrap();
        let body = dir.path().join("body.json");
        // Pretty-printed, after a BOM and blank lines: the first other byte is `{`.
        let text = format!(
            "\u{FEFF}\n  {}",
            serde_json::to_string_pretty(&whole_fixture["body"]).unwrap()
        );
        std::fs::write(&body, text).unwrap();
        let decoded = cogni(&["wire", "decode", "--format", format, body.to_str().unwrap()]);
        assert!(decoded.status.success(), "{whole}: {}", stderr(&decoded));
        let streamed = cogni(&["wire", "decode", "--format", format, &fixture(stream)]);
        assert!(streamed.status.success(), "{stream}: {}", stderr(&streamed));
        assert_eq!(stdout_lines(&decoded), stdout_lines(&streamed), "{whole}");
    }
    let output = cogni(&[
        "wire",
        "decode",
        "--format",
        "openai-chat",
        &fixture("openai-chat/sse-framing-bom-cr-multiline.sse"),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// Input that is neither a JSON answer nor an SSE stream, or a whole answer of the other wire,
/// is one line that says what is wrong, never quoting the input.
#[test]
fn wire_decode_names_input_that_is_neither_json_nor_sse() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[u8], &str)] = &[
        (
            "openai-chat",
            b"HTTP/1.1 200 OK CANARY\r\n",
            "error: the input is neither a whole JSON answer (its first non-whitespace byte \
             would be `{`) nor an SSE stream (it would start with `data:`, `event:`, `id:`, \
             `retry:` or `:`)",
        ),
        (
            "openai-responses",
            b"[\"CANARY\"]",
            "error: the input is neither a whole JSON answer (its first non-whitespace byte \
             would be `{`) nor an SSE stream (it would start with `data:`, `event:`, `id:`, \
             `retry:` or `:`)",
        ),
        ("openai-chat", b" \n\t", "error: the input is empty"),
        (
            "openai-responses",
            br#"{"object":"chat.completion","choices":[],"id":"CANARY"}"#,
            "error: invalid response body: not a Responses response: its `object` is not \
             `response`",
        ),
    ];
    for (format, input, expected) in cases {
        let path = dir.path().join("input");
        std::fs::write(&path, input).unwrap();
        let output = cogni(&["wire", "decode", "--format", format, path.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(1), "{expected}");
        assert_eq!(stderr(&output).trim_end(), *expected);
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn wire_decode_errors_are_one_line() {
    let output = cogni(&[
        "wire",
        "decode",
        "--format",
        "openai-chat",
        &fixture("openai-chat/truncated-no-done.sse"),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output).trim_end(),
        "error: stream truncated after 964 bytes: no finish reason and no end marker"
    );
    assert!(output.stdout.is_empty());
}

/// A stream's own error message (a recorded provider error) is shown on the terminal without
/// its control characters: ESC, BEL and a C1 `CSI` become U+FFFD, as in every other line the
/// CLI prints for a person.
#[test]
fn wire_decode_errors_show_no_control_character_of_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let stream = dir.path().join("hostile.sse");
    std::fs::write(
        &stream,
        "data: {\"error\":{\"message\":\"down\\u001b]0;pwned\\u0007\\u009b2J\"}}\n\n",
    )
    .unwrap();
    let output = cogni(&[
        "wire",
        "decode",
        "--format",
        "openai-chat",
        stream.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output).trim_end(),
        "error: provider error: down\u{FFFD}]0;pwned\u{FFFD}\u{FFFD}2J"
    );
}

#[test]
fn wire_encode_tools_reads_specs_on_stdin() {
    let specs = cogni(&["tools", "list", "--json"]).stdout;
    let output = cogni_with_stdin(&["wire", "encode-tools", "--format", "openai-chat"], &specs);
    assert!(output.status.success());
    let tools: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(tools[0]["type"], "function");
    assert_eq!(tools[0]["function"]["name"], "core__get_current_time");
    assert_eq!(tools[0]["function"]["strict"], true);
}

/// Specs on stdin that do not decode are refused in one line naming where and what is wrong,
/// never quoting a value of them (a tool id or a variant may be anything pasted, a key among
/// them).
#[test]
fn wire_encode_tools_errors_quote_no_value_of_the_specs() {
    for specs in [
        &br#"[{"id":"sk-SECRET bad","description":"d"}]"#[..],
        br#"[{"id":"core__x","description":"d","effect":"sk-SECRET"}]"#,
        br#"[{"id":"core__x","sk-SECRET":1}]"#,
        br#"["sk-SECRET"]"#,
    ] {
        let output = cogni_with_stdin(&["wire", "encode-tools", "--format", "openai-chat"], specs);
        assert_eq!(output.status.code(), Some(1));
        let err = stderr(&output);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: stdin is not a JSON array of tool specs: ")
                && err.contains(" at line 1 column ")
                && !err.contains("SECRET"),
            "{err}"
        );
    }
}

/// Specs on stdin that offer one tool twice are refused, naming the tool, as a request offering
/// them is: a model shown two tools of one name cannot say which it calls.
#[test]
fn wire_encode_tools_refuses_a_tool_offered_twice() {
    let listed: Vec<Value> =
        serde_json::from_slice(&cogni(&["tools", "list", "--json"]).stdout).unwrap();
    let twice = serde_json::to_vec(&[&listed[0], &listed[0]]).unwrap();
    for format in ["openai-chat", "openai-responses"] {
        let output = cogni_with_stdin(&["wire", "encode-tools", "--format", format], &twice);
        assert_eq!(output.status.code(), Some(1), "{format}");
        assert!(output.stdout.is_empty(), "{format}");
        let id = listed[0]["id"].as_str().unwrap();
        assert_eq!(
            stderr(&output).trim_end(),
            format!("error: tool {id} is offered more than once"),
            "{format}"
        );
    }
}

#[test]
fn a_call_that_needs_approval_is_not_run_by_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    std::fs::write(
        &policy,
        r#"{"allowed_tools": ["core__workspace_write"], "require_approval_for_effects": ["state_change"]}"#,
    )
    .unwrap();
    let output = cogni(&[
        "tools",
        "call",
        "core__workspace_write",
        "--args",
        r#"{"path":"x.txt","content":"y"}"#,
        "--policy",
        policy.to_str().unwrap(),
        "--workspace",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stderr(&output).lines().count(), 1);
    assert!(
        stderr(&output).starts_with("error: approval_required"),
        "{}",
        stderr(&output)
    );
    assert!(!dir.path().join("x.txt").exists());
    // Only the request for a decision was printed: no start, no result.
    let lines = stdout_lines(&output);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["type"], "approval_required");
}

/// A statistics warning names the data folder: none of its control characters reaches the
/// terminal.
#[test]
fn tools_call_warnings_show_no_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-folder");
    std::fs::write(&file, "").unwrap();
    let data = file.join("\u{1b}[2J\u{9b}1m");
    let output = cogni(&[
        "tools",
        "call",
        "core__get_current_time",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.starts_with("warning: tool statistics not recorded: cannot create ")
            && err.contains("\u{FFFD}[2J\u{FFFD}1m")
            && !err.trim_end().chars().any(char::is_control),
        "{err:?}"
    );
}

#[test]
fn tools_stats_reports_what_earlier_calls_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    // A workspace of its own: one that is the data folder is refused.
    let workspace = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let ok = cogni(&[
            "tools",
            "call",
            "core__get_current_time",
            "--data-dir",
            data,
        ]);
        assert!(ok.status.success(), "{}", stderr(&ok));
    }
    let failed = cogni(&[
        "tools",
        "call",
        "core__workspace_read",
        "--args",
        r#"{"path":"missing.txt"}"#,
        "--workspace",
        workspace.path().to_str().unwrap(),
        "--data-dir",
        data,
    ]);
    assert!(!failed.status.success());
    let output = cogni(&["tools", "stats", "--json", "--data-dir", data]);
    assert!(output.status.success(), "{}", stderr(&output));
    let stats: Value = serde_json::from_slice(&output.stdout).unwrap();
    let by_id = |id: &str| {
        stats
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["tool_id"] == id)
            .unwrap()
            .clone()
    };
    let time = by_id("core__get_current_time");
    assert_eq!(
        (time["calls"].as_u64(), time["successes"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(time["breaker"], "closed");
    let read = by_id("core__workspace_read");
    assert_eq!(read["failures"]["validation"], 1);
    // The table form has a header and one row per tool.
    let table = cogni(&["tools", "stats", "--data-dir", data]);
    assert_eq!(String::from_utf8_lossy(&table.stdout).lines().count(), 3);
}

/// `cogni tools call --data-dir` from several processes at once: every call ran, so every call
/// exits 0 and is counted.
#[test]
fn concurrent_tool_calls_all_succeed_and_are_all_counted() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap().to_owned();
    let children: Vec<_> = (0..16)
        .map(|_| {
            cogni_command()
                .args([
                    "tools",
                    "call",
                    "core__get_current_time",
                    "--data-dir",
                    &data,
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let failed: Vec<String> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .filter(|o| !o.status.success() || !o.stderr.is_empty())
        .map(|o| stderr(&o))
        .collect();
    let stats = cogni(&["tools", "stats", "--data-dir", &data, "--json"]);
    let counted: Value = serde_json::from_slice(&stats.stdout).unwrap_or(Value::Null);
    assert!(
        failed.is_empty() && counted[0]["calls"] == 16,
        "{} of 16 successful calls failed or warned ({:?}); calls counted: {}; stats: {}",
        failed.len(),
        failed.first(),
        counted[0]["calls"],
        stderr(&stats)
    );
}

/// A damaged statistics file is set aside with a one-line warning; the call that ran succeeds
/// and counting starts over.
#[test]
fn a_damaged_stats_file_is_set_aside_and_the_call_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    std::fs::write(dir.path().join("tool-stats.json"), "not json").unwrap();
    let output = cogni(&[
        "tools",
        "call",
        "core__get_current_time",
        "--data-dir",
        data,
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout_lines(&output).len(), 3, "the result line is printed");
    let warning = stderr(&output);
    assert!(
        warning.lines().count() == 1 && warning.starts_with("warning: "),
        "{warning}"
    );
    let bad = std::fs::read_to_string(dir.path().join("tool-stats.json.bad")).unwrap();
    assert_eq!(bad, "not json");
    let stats = cogni(&["tools", "stats", "--data-dir", data, "--json"]);
    let counted: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(counted[0]["calls"], 1);
}

/// Statistics that cannot be written (the data folder is a file) do not fail a call that ran:
/// one warning line, the result, exit 0.
#[test]
fn a_stats_failure_does_not_fail_a_call_that_ran() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-folder");
    std::fs::write(&file, "").unwrap();
    let output = cogni(&[
        "tools",
        "call",
        "core__get_current_time",
        "--data-dir",
        file.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout_lines(&output).len(), 3, "the result line is printed");
    let warning = stderr(&output);
    assert!(
        warning.lines().count() == 1
            && warning.starts_with("warning: tool statistics not recorded: "),
        "{warning}"
    );
}

/// A data folder that does not exist (a typo) is not an empty set of statistics: one line naming
/// it, exit 1.
#[test]
fn tools_stats_of_a_missing_folder_is_an_error() {
    let output = cogni(&["tools", "stats", "--data-dir", "/nonexistent/cogni-data"]);
    assert!(
        !output.status.success(),
        "exit 0 with: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    let error = stderr(&output);
    assert_eq!(
        error.trim_end(),
        "error: no tool statistics in /nonexistent/cogni-data: the folder does not exist"
    );
}

/// Counts at their largest in the statistics file (hand-edited, or damaged) stay there: the call
/// that ran still succeeds and prints its result, the stored latency samples stay capped, and
/// `tools stats` shows the failures' total as full.
#[test]
fn full_counts_in_the_stats_file_do_not_fail_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let max = u64::MAX;
    let samples: Vec<u64> = vec![7; 600];
    let stored = serde_json::json!({"tools": {"core__get_current_time": {
        "calls": max, "successes": max, "failures": {"timeout": max, "transient": max}, "retries": max,
        "breaker": "closed", "latencies_us": samples,
    }}});
    std::fs::write(dir.path().join("tool-stats.json"), stored.to_string()).unwrap();
    let output = cogni(&[
        "tools",
        "call",
        "core__get_current_time",
        "--data-dir",
        data,
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout_lines(&output).len(), 3, "the result line is printed");
    assert!(output.stderr.is_empty(), "{}", stderr(&output));
    let file: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("tool-stats.json")).unwrap())
            .unwrap();
    let tool = &file["tools"]["core__get_current_time"];
    assert_eq!(tool["calls"].as_u64(), Some(max));
    assert_eq!(tool["successes"].as_u64(), Some(max));
    assert_eq!(tool["latencies_us"].as_array().unwrap().len(), 512);
    let table = cogni(&["tools", "stats", "--data-dir", data]);
    assert!(table.status.success(), "{}", stderr(&table));
    assert!(
        String::from_utf8_lossy(&table.stdout).contains(&max.to_string()),
        "{}",
        String::from_utf8_lossy(&table.stdout)
    );
}

/// A workspace that is a file, that does not exist, or that is the whole file system, is one
/// line saying so, naming the path once.
#[test]
fn a_workspace_that_is_not_a_folder_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "hi").unwrap();
    let missing = dir.path().join("missing");
    let slash = std::path::PathBuf::from("/");
    for (workspace, expected) in [
        (
            &slash,
            "error: tools.workspace: workspace root / cannot be used: it is the whole file \
             system: give the workspace a folder of its own"
                .to_owned(),
        ),
        (
            &file,
            format!(
                "error: tools.workspace: workspace root {} is not a folder",
                file.display()
            ),
        ),
        (
            &missing,
            format!(
                "error: tools.workspace: workspace root {} cannot be used: No such file or \
                 directory (os error 2)",
                missing.display()
            ),
        ),
    ] {
        let output = cogni(&[
            "tools",
            "call",
            "core__get_current_time",
            "--workspace",
            workspace.to_str().unwrap(),
        ]);
        assert_eq!(output.status.code(), Some(1));
        assert_eq!(stderr(&output).trim_end(), expected);
    }
}

/// A statistics folder path that is a file is said to be one, not said not to exist.
#[test]
fn tools_stats_of_a_file_says_it_is_not_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "hi").unwrap();
    let output = cogni(&["tools", "stats", "--data-dir", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output).trim_end(),
        format!(
            "error: no tool statistics in {}: it is not a folder",
            file.display()
        )
    );
}

/// A JSON policy an editor saved with a UTF-8 byte order mark is read, as a TOML one is, not
/// refused as "expected value at line 1 column 1".
#[test]
fn a_json_policy_with_a_byte_order_mark_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    std::fs::write(
        &policy,
        "\u{FEFF}{\"allowed_tools\": [\"core__get_current_time\"]}",
    )
    .unwrap();
    let output = cogni(&["tools", "list", "--policy", policy.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).starts_with("core__get_current_time "),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

/// A sparse file of `len` bytes that opens with `start` and holds zeros after it: an input past
/// a bound, with no disk spent on it.
fn sparse_file(path: &std::path::Path, start: &[u8], len: u64) {
    std::fs::write(path, start).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// `cogni` with `args`, its standard input read from the file at `stdin`.
fn cogni_with_stdin_file(args: &[&str], stdin: &std::path::Path) -> Output {
    cogni_command()
        .args(args)
        .stdin(std::fs::File::open(stdin).unwrap())
        .output()
        .expect("the cogni binary runs")
}

/// `wire decode` reads a file or stdin up to the decoder's bound on a stream or answer (64 MiB),
/// and `wire encode-tools` stdin up to 4 MiB: an input past it (`/dev/zero`, a log named by
/// mistake) is refused in one line naming the input and the bound, not read until memory runs
/// out, and never quoted.
#[test]
fn wire_inputs_past_their_bound_are_refused_naming_the_input_and_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let stream = dir.path().join("huge.sse");
    sparse_file(&stream, b"data: CANARY", (64 << 20) + 1);
    let specs = dir.path().join("huge.json");
    sparse_file(&specs, b"[\"CANARY\"", (4 << 20) + 1);
    let too_large = "it is over 64 MiB, more than the decoder takes of a stream or answer";
    let shown = stream.display();
    for (output, expected) in [
        (
            cogni(&[
                "wire",
                "decode",
                "--format",
                "openai-chat",
                stream.to_str().unwrap(),
            ]),
            format!("error: cannot read {shown}: {too_large}"),
        ),
        (
            cogni_with_stdin_file(&["wire", "decode", "--format", "openai-responses"], &stream),
            format!("error: cannot read stdin: {too_large}"),
        ),
        (
            cogni_with_stdin_file(&["wire", "decode", "--format", "openai-chat", "-"], &stream),
            format!("error: cannot read stdin: {too_large}"),
        ),
        (
            cogni_with_stdin_file(&["wire", "encode-tools", "--format", "openai-chat"], &specs),
            "error: cannot read stdin: it is over 4 MiB, more than any list of tool specs holds"
                .to_owned(),
        ),
    ] {
        assert_eq!(output.status.code(), Some(1), "{expected}");
        assert_eq!(stderr(&output).trim_end(), expected);
        assert!(output.stdout.is_empty(), "{expected}");
    }
}

/// The statistics file is read up to 4 MiB, far more than it holds (about 16 KiB a tool at
/// most): one past it is refused by `tools stats` naming the file and the bound, and a call
/// still succeeds, warning that its statistics were not recorded.
#[test]
fn a_statistics_file_past_its_bound_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let file = dir.path().join("tool-stats.json");
    sparse_file(&file, b"{\"CANARY\"", (4 << 20) + 1);
    let too_large = format!(
        "cannot read {}: it is over 4 MiB, more than any statistics file holds",
        file.display()
    );
    let stats = cogni(&["tools", "stats", "--data-dir", data]);
    assert_eq!(stats.status.code(), Some(1));
    assert_eq!(stderr(&stats).trim_end(), format!("error: {too_large}"));
    let call = cogni(&[
        "tools",
        "call",
        "core__get_current_time",
        "--data-dir",
        data,
    ]);
    assert!(call.status.success(), "{}", stderr(&call));
    assert_eq!(
        stderr(&call).trim_end(),
        format!("warning: tool statistics not recorded: {too_large}")
    );
}

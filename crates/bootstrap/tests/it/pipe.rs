//! `cogni … | head`: a command whose stdout's reader went away ends quietly, while any other
//! error writing its output is still said.

use std::process::{Output, Stdio};

/// Runs `cogni args` with `stdin` (a file, or nothing) and its stdout a pipe whose reading end
/// is closed before the process starts, so its first write to stdout fails with `EPIPE`.
fn cogni_into_closed_pipe(args: &[&str], stdin: Option<&std::path::Path>) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let stdin = match stdin {
        Some(path) => Stdio::from(std::fs::File::open(path).expect("the input file")),
        None => Stdio::null(),
    };
    crate::cogni_command()
        .args(args)
        .stdin(stdin)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("the cogni binary runs")
}

/// Every command that prints to stdout, its reader gone (`cogni tools list --json | head -0`),
/// exits with status 0 and says nothing: no `Broken pipe` error, no panic.
#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    // Statistics for `tools stats`, and tool specs for `wire encode-tools`.
    let call = super::cogni(&[
        "tools",
        "call",
        "core__get_current_time",
        "--data-dir",
        data,
    ]);
    assert!(call.status.success(), "{}", super::stderr(&call));
    let specs = dir.path().join("specs.json");
    std::fs::write(&specs, super::cogni(&["tools", "list", "--json"]).stdout).unwrap();
    let sse = super::fixture("openai-chat/index-zero-distinct-ids.sse");

    let cases: &[(&[&str], Option<&std::path::Path>)] = &[
        (&["tools", "list", "--json"], None),
        (&["tools", "list"], None),
        (&["tools", "call", "core__get_current_time"], None),
        (&["tools", "stats", "--data-dir", data], None),
        (&["tools", "stats", "--json", "--data-dir", data], None),
        (&["config-example"], None),
        (&["--help"], None),
        (&["tools", "call", "--help"], None),
        (&["--version"], None),
        (&["wire", "decode", "--format", "openai-chat", &sse], None),
        (
            &["wire", "encode-tools", "--format", "openai-responses"],
            Some(&specs),
        ),
    ];
    for (args, stdin) in cases {
        let output = cogni_into_closed_pipe(args, *stdin);
        assert_eq!(super::stderr(&output), "", "{args:?}");
        assert_eq!(output.status.code(), Some(0), "{args:?}");
    }
}

/// A tool call that fails still says so on stderr and exits 1 when nobody reads its events.
#[test]
fn a_failed_call_is_still_reported_when_stdout_is_closed() {
    let output = cogni_into_closed_pipe(&["tools", "call", "core__nope"], None);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        super::stderr(&output),
        "error: unavailable: tool core__nope is not available\n"
    );
}

/// Any other error writing the output (here a full disk) is an error, said on stderr.
#[cfg(target_os = "linux")]
#[test]
fn a_stdout_that_cannot_be_written_is_still_an_error() {
    for args in [
        &["tools", "list", "--json"][..],
        &["tools", "call", "core__get_current_time"],
        &["config-example"],
        // clap's own answers, which clap's `exit` printed ignoring the error, ending 0.
        &["--help"],
        &["tools", "call", "--help"],
        &["--version"],
    ] {
        let output = crate::cogni_command()
            .args(args)
            .stdout(std::fs::File::create("/dev/full").expect("/dev/full"))
            .stderr(Stdio::piped())
            .output()
            .expect("the cogni binary runs");
        let stderr = super::stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains("No space left on device"),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}

/// Runs `cogni args` in `dir` against the fake endpoint `url`, with the data folder `data`
/// and `stdout` as its stdout.
fn cogni_chatting(dir: &std::path::Path, url: &str, args: &[&str], stdout: Stdio) -> Output {
    crate::cogni_command()
        .args(args)
        .current_dir(dir)
        .env("COGNI_DATA_DIR", "data")
        .env("COGNI_LLM_BASE_URL", url)
        .env("COGNI_LLM_MODEL", "test-model")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .expect("the cogni binary runs")
}

/// `chat` runs its turn to the end when nobody reads it, and exits with the run's status;
/// `runs list`, `runs show` and `replay` end quietly. A chat whose output cannot be written for
/// another reason (a full disk) says so once the run has ended.
#[test]
fn chat_and_the_run_log_commands_end_quietly_on_a_closed_stdout() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let url = crate::fake::endpoint(&["turn-1-tool-calls.sse", "turn-2-answer.sse"]);
    let closed = || {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        Stdio::from(writer)
    };
    for json in [true, false] {
        let mut args = vec!["chat", "What do my notes say?"];
        if json {
            args.push("--json");
        }
        let chat = cogni_chatting(dir.path(), &url, &args, closed());
        assert_eq!(super::stderr(&chat), "", "{args:?}");
        assert_eq!(chat.status.code(), Some(0), "{args:?}");
    }
    let list = cogni_chatting(
        dir.path(),
        &url,
        &["runs", "list", "--json"],
        Stdio::piped(),
    );
    let listed = String::from_utf8_lossy(&list.stdout).into_owned();
    // Both chats ran to the end, unread.
    assert_eq!(
        listed.matches(r#""status":"finished""#).count(),
        2,
        "{listed}"
    );
    let row: serde_json::Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    let run_id = row["run_id"].as_str().unwrap();
    for args in [
        &["runs", "list"][..],
        &["runs", "list", "--json"],
        &["runs", "show", run_id],
        &["runs", "show", run_id, "--json"],
        &["replay", run_id],
    ] {
        let output = cogni_chatting(dir.path(), &url, args, closed());
        assert_eq!(super::stderr(&output), "", "{args:?}");
        assert_eq!(output.status.code(), Some(0), "{args:?}");
    }
    #[cfg(target_os = "linux")]
    {
        let full = Stdio::from(std::fs::File::create("/dev/full").expect("/dev/full"));
        let chat = cogni_chatting(dir.path(), &url, &["chat", "hi"], full);
        let stderr = super::stderr(&chat);
        assert_eq!(chat.status.code(), Some(1), "{stderr}");
        assert_eq!(
            stderr,
            "error: cannot print the run: No space left on device (os error 28)\n"
        );
    }
}

/// `cogni … 2>&1 | head -0` or a log reader that went away: stderr itself is a pipe nobody
/// reads. A command that fails says so to no one and still exits with its error status (1), not
/// with a panic's (101); one that warns still succeeds.
#[test]
fn a_closed_stderr_keeps_every_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let typo = dir.path().join("typo.toml");
    std::fs::write(&typo, "allowed_tools = [\"core__nope\"]\n").unwrap();
    // The arguments, the variables set, and the exit status.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], i32);
    let cases: &[Case] = &[
        // An error line from `tools call` (the call failed).
        (&["tools", "call", "core__nope"], &[], 1),
        // An error `main` says (the policy cannot be read).
        (
            &["tools", "list", "--policy", missing.to_str().unwrap()],
            &[],
            1,
        ),
        // An empty variable, said before anything runs.
        (&["chat", "hi"], &[("COGNI_LLM_MODEL", "")], 1),
        // A warning (a policy naming a tool no source has): still a success.
        (
            &["tools", "list", "--policy", typo.to_str().unwrap()],
            &[],
            0,
        ),
        // A bad `wire decode` input.
        (
            &[
                "wire",
                "decode",
                "--format",
                "openai-chat",
                missing.to_str().unwrap(),
            ],
            &[],
            1,
        ),
    ];
    for (args, env, status) in cases {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let mut command = crate::cogni_command();
        command
            .args(*args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(writer);
        for (name, value) in *env {
            command.env(name, value);
        }
        let output = command.output().expect("the cogni binary runs");
        assert_eq!(output.status.code(), Some(*status), "{args:?}");
    }
}

//! The `cogni serve` binary itself: started as a process against a loopback endpoint that
//! replays a recorded stream, asked over plain HTTP/1.1, and stopped with SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStderr, Command, Stdio};

#[test]
fn cogni_serve_streams_a_chat_turn_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = crate::cogni_command()
        .arg("serve")
        .current_dir(dir.path())
        .env(
            "COGNI_LLM_BASE_URL",
            crate::fake::endpoint(&["turn-2-answer.sse"]),
        )
        .env("COGNI_LLM_MODEL", "test-model")
        .env("COGNI_LISTEN", "127.0.0.1:0")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(server.stderr.take().unwrap());
    let mut banner = String::new();
    stderr.read_line(&mut banner).unwrap();
    let addr = banner
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {banner:?}"))
        .to_owned();

    let body = r#"{"id":"chat-1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}]}"#;
    let mut client = TcpStream::connect(&addr).unwrap();
    write!(
        client,
        "POST /api/v1/chat HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    client.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.contains("x-vercel-ai-ui-message-stream: v1"),
        "{response}"
    );
    assert!(
        response.contains("Your notes say") && response.contains("hello."),
        "{response}"
    );
    assert!(response.contains("data: [DONE]"), "{response}");

    // SIGTERM: a graceful stop with a zero exit.
    stop(server);
}

/// Starts `cogni serve` in `dir` with no COGNI_* variables but `env` and a fake endpoint; returns
/// the process, the address it listens on (asked over loopback) and its stderr, read up to and
/// including the banner (the lines before it in `before`).
fn serve(
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (Child, String, String, BufReader<ChildStderr>) {
    let mut command = crate::cogni_command();
    command.arg("serve").current_dir(dir);
    let mut server = command
        .env(
            "COGNI_LLM_BASE_URL",
            crate::fake::endpoint(&["turn-2-answer.sse"]),
        )
        .env("COGNI_LLM_MODEL", "test-model")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(server.stderr.take().unwrap());
    let mut before = String::new();
    let banner = loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            break None;
        }
        if line.contains("listening on") {
            break Some(line);
        }
        before.push_str(&line);
    };
    let Some(banner) = banner else {
        let _ = server.kill();
        let _ = server.wait();
        panic!("no banner: {before}");
    };
    let port = banner
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|addr| addr.rsplit(':').next())
        .unwrap_or_default()
        .to_owned();
    (
        server,
        format!("127.0.0.1:{port}"),
        before + &banner,
        stderr,
    )
}

/// One HTTP/1.1 request to `addr`; the whole response.
fn http(addr: &str, method: &str, path: &str, headers: &[&str], body: &str) -> String {
    let mut client = TcpStream::connect(addr).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for header in headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    write!(client, "{head}\r\n{body}").unwrap();
    let mut response = String::new();
    client.read_to_string(&mut response).unwrap();
    response
}

/// Stops `server` with SIGTERM and sees it exit gracefully, with status zero.
fn stop(mut server: Child) {
    let status = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(server.wait().unwrap().success());
}

/// `COGNI_SERVER_TOKEN` reaches the server: the API needs `Authorization: Bearer <token>`,
/// `/healthz` does not, and nothing the process prints shows the token.
#[test]
fn cogni_serve_requires_the_token_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let token = "tok-from-env-0a1b2c3d";
    let (server, addr, banner, mut stderr) = serve(
        dir.path(),
        &[
            ("COGNI_LISTEN", "127.0.0.1:0"),
            ("COGNI_SERVER_TOKEN", token),
            ("RUST_LOG", "bootstrap=debug"),
        ],
    );
    assert!(banner.contains("bearer token required"), "{banner}");

    let refused = http(&addr, "GET", "/api/v1/tools", &[], "");
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(
        refused.contains("www-authenticate: Bearer") && refused.contains(r#""unauthorized""#),
        "{refused}"
    );
    let wrong = http(
        &addr,
        "GET",
        "/api/v1/tools",
        &["authorization: Bearer tok-wrong"],
        "",
    );
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    let health = http(&addr, "GET", "/healthz", &[], "");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");

    let bearer = format!("authorization: Bearer {token}");
    let tools = http(&addr, "GET", "/api/v1/tools", &[&bearer], "");
    assert!(tools.starts_with("HTTP/1.1 200"), "{tools}");
    let body = r#"{"id":"chat-1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}]}"#;
    let run = http(
        &addr,
        "POST",
        "/api/v1/chat",
        &[&bearer, "content-type: application/json"],
        body,
    );
    assert!(
        run.starts_with("HTTP/1.1 200") && run.contains("data: [DONE]"),
        "{run}"
    );

    stop(server);
    let mut logs = banner;
    stderr.read_to_string(&mut logs).unwrap();
    assert!(
        logs.contains("request refused"),
        "the refusals were logged: {logs}"
    );
    assert!(!logs.contains(token), "{logs}");
    assert!(!logs.contains("tok-wrong"), "{logs}");
}

/// `server.allow_unauthenticated = true` lets `cogni serve` listen on an address that is not
/// loopback without a token, with a warning.
#[test]
fn cogni_serve_listens_everywhere_without_a_token_only_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cogni.toml"),
        "[server]\nallow_unauthenticated = true\n",
    )
    .unwrap();
    let (server, addr, banner, _stderr) = serve(dir.path(), &[("COGNI_LISTEN", "0.0.0.0:0")]);
    assert!(
        banner.contains("WARN") && banner.contains("allow_unauthenticated"),
        "{banner}"
    );
    let tools = http(&addr, "GET", "/api/v1/tools", &[], "");
    assert!(tools.starts_with("HTTP/1.1 200"), "{tools}");
    stop(server);
}

/// The banner names the endpoint without its query, which may carry a key (as the adapter
/// names it everywhere else).
#[test]
fn the_banner_does_not_show_the_base_url_s_query() {
    let dir = tempfile::tempdir().unwrap();
    let base = crate::fake::endpoint(&["turn-2-answer.sse"]);
    let with_key = format!("{base}?key=SECRET-QUERY-KEY");
    let (server, _addr, banner, _stderr) = serve(
        dir.path(),
        &[
            ("COGNI_LISTEN", "127.0.0.1:0"),
            ("COGNI_LLM_BASE_URL", &with_key),
        ],
    );
    stop(server);
    assert!(!banner.contains("SECRET"), "{banner}");
    assert!(banner.contains(&format!("at {base}, ")), "{banner}");
}

/// SIGTERM ends the runs in flight rather than waiting for them: a run whose model call hangs
/// ends `cancelled` on its stream, and the server exits gracefully. (Without the cancel, the
/// graceful shutdown waits for the open response, here for the model call's 60 s timeout.)
#[test]
fn sigterm_cancels_the_runs_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let (base, requests) = crate::fake::recording_endpoint(&[crate::fake::STALL]);
    let (mut server, addr, _banner, _stderr) = serve(
        dir.path(),
        &[
            ("COGNI_LISTEN", "127.0.0.1:0"),
            ("COGNI_LLM_BASE_URL", &base),
        ],
    );
    let client = std::thread::spawn(move || {
        let body = r#"{"id":"chat-1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}]}"#;
        http(
            &addr,
            "POST",
            "/api/v1/chat",
            &["content-type: application/json"],
            body,
        )
    });
    // The model call is in flight once the endpoint has the request.
    let asked = std::time::Instant::now();
    while requests.lock().unwrap().is_empty() {
        assert!(asked.elapsed().as_secs() < 30, "the model was never asked");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let signalled = std::time::Instant::now();
    let exit = loop {
        if let Some(exit) = server.try_wait().unwrap() {
            break exit;
        }
        if signalled.elapsed().as_secs() >= 30 {
            let _ = server.kill();
            let _ = server.wait();
            panic!("the server still waited for its run 30 s after SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit:?}");
    let response = client.join().unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(r#""type":"abort""#), "{response}");
}

/// The banner shows the settings it names (the model, the endpoint) as a terminal may show
/// them: a control character in them (an escape sequence in a variable) is shown as `�`.
#[test]
fn the_banner_shows_no_control_character_of_the_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _addr, banner, _stderr) = serve(
        dir.path(),
        &[
            ("COGNI_LISTEN", "127.0.0.1:0"),
            ("COGNI_LLM_MODEL", "test\u{1b}]0;pwned\u{7}-model"),
        ],
    );
    stop(server);
    assert!(
        !banner.contains('\u{1b}') && !banner.contains('\u{7}'),
        "{banner:?}"
    );
    assert!(
        banner.contains("model test\u{FFFD}]0;pwned\u{FFFD}-model at "),
        "{banner:?}"
    );
}

/// A key some gateways take in the base URL's path is not in the banner: that segment is shown
/// as `***`, the others as they are.
#[test]
fn the_banner_does_not_show_a_key_in_the_base_url_s_path() {
    let dir = tempfile::tempdir().unwrap();
    let base = crate::fake::endpoint(&["turn-2-answer.sse"]);
    let with_key = format!("{base}/sk-live-PATHKEY0123456789/openai");
    let (server, _addr, banner, _stderr) = serve(
        dir.path(),
        &[
            ("COGNI_LISTEN", "127.0.0.1:0"),
            ("COGNI_LLM_BASE_URL", &with_key),
        ],
    );
    stop(server);
    assert!(!banner.contains("PATHKEY"), "{banner}");
    assert!(
        banner.contains(&format!("at {base}/***/openai, ")),
        "{banner}"
    );
}

/// A body over `server.max_body_bytes` is refused with a 413 that names the limit and the
/// setting, not axum's own text.
#[test]
fn a_body_too_large_names_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cogni.toml"),
        "[server]\nmax_body_bytes = 1024\n",
    )
    .unwrap();
    let (server, addr, _, _stderr) = serve(dir.path(), &[("COGNI_LISTEN", "127.0.0.1:0")]);
    let body = format!(
        r#"{{"id":"c","messages":[],"padding":"{}"}}"#,
        "x".repeat(2000)
    );
    let response = http(
        &addr,
        "POST",
        "/api/v1/chat",
        &["content-type: application/json"],
        &body,
    );
    stop(server);
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    let error = response.split("\r\n\r\n").nth(1).unwrap_or_default();
    assert_eq!(
        error,
        r#"{"error":{"code":"body_too_large","message":"the request body is larger than the 1024 bytes this server takes (server.max_body_bytes)"}}"#
    );
}

/// A data folder where no run lock can be written (its `locks` is a file here; a read-only
/// folder is refused the same way) stops `cogni serve` at start, naming the folder, rather than
/// a server that listens and refuses every run.
#[test]
fn cogni_serve_refuses_a_data_folder_it_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/locks"), "").unwrap();
    let mut server = crate::cogni_command()
        .arg("serve")
        .current_dir(dir.path())
        .env("COGNI_LLM_MODEL", "test-model")
        .env("COGNI_LISTEN", "127.0.0.1:0")
        .env("COGNI_DATA_DIR", "data")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(server.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // A server that did not refuse to start is stopped.
    if !first.starts_with("error: ") {
        let _ = server.kill();
    }
    let status = server.wait().unwrap();
    assert_eq!(
        first,
        "error: data_dir: cannot write run locks in data/locks: something that is not a folder \
         is there\n"
    );
    assert_eq!(status.code(), Some(1));
}

/// A policy naming tools no tool source has (typos) starts the server with one warning line
/// naming them, before the banner.
#[test]
fn cogni_serve_warns_of_policy_tools_no_source_has() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "allowed_tools = [\"core__workspace_raed\", \"core__get_current_time\"]\n\
         [retry_per_tool.core__get_curent_time]\n",
    )
    .unwrap();
    let (server, _addr, banner, _stderr) = serve(
        dir.path(),
        &[
            ("COGNI_LISTEN", "127.0.0.1:0"),
            ("COGNI_POLICY", "policy.toml"),
        ],
    );
    stop(server);
    let warnings: Vec<&str> = banner.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "{banner}");
    assert!(
        warnings[0].ends_with(
            "the policy names tools no tool source has, so its rules for them apply to nothing \
             (a typo?): core__get_curent_time, core__workspace_raed"
        ),
        "{banner}"
    );
}

/// `--listen localhost:PORT` (here `COGNI_LISTEN`) serves on loopback without a token, as
/// `127.0.0.1:PORT` does.
#[test]
fn cogni_serve_listens_on_localhost() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr, banner, _stderr) = serve(dir.path(), &[("COGNI_LISTEN", "localhost:0")]);
    assert!(
        banner.contains("listening on http://127.0.0.1:"),
        "{banner}"
    );
    let health = http(&addr, "GET", "/healthz", &[], "");
    stop(server);
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
}

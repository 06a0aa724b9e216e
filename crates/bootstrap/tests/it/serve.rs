//! The `cogni serve` binary itself: started as a process against a loopback endpoint that
//! replays a recorded stream, asked over plain HTTP/1.1, and stopped with SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

#[test]
fn cogni_serve_streams_a_chat_turn_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_cogni"))
        .arg("serve")
        .current_dir(dir.path())
        .env(
            "COGNI_LLM_BASE_URL",
            crate::fake::endpoint(&["turn-2-answer.sse"]),
        )
        .env("COGNI_LLM_MODEL", "test-model")
        .env("COGNI_LISTEN", "127.0.0.1:0")
        .env_remove("COGNI_CONFIG")
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
    let status = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(server.wait().unwrap().success());
}

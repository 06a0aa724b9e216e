//! A loopback fake LLM endpoint (std::net, one thread) that answers requests with recorded SSE
//! streams from fixtures/wire/loop, shared by the binary tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// A fixture name that makes the endpoint take the request and never answer it (the model call
/// stays in flight until the client gives up or is killed).
pub(crate) const STALL: &str = "(stall)";

/// Starts an endpoint that answers the n-th request with the n-th of `fixtures` (names under
/// fixtures/wire/loop, or [`STALL`]), the last one again for every request after; returns its
/// base URL.
pub(crate) fn endpoint(fixtures: &[&str]) -> String {
    recording_endpoint(fixtures).0
}

/// [`endpoint`], also returning the request bodies it received, in order.
pub(crate) fn recording_endpoint(fixtures: &[&str]) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let bodies: Vec<Option<Vec<u8>>> = fixtures
        .iter()
        .map(|&name| {
            (name != STALL).then(|| {
                std::fs::read(format!(
                    "{}/../../fixtures/wire/loop/{name}",
                    env!("CARGO_MANIFEST_DIR")
                ))
                .unwrap()
            })
        })
        .collect();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        let mut stalled = Vec::new();
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let request = read_request(&mut stream);
            if let Ok(mut seen) = seen.lock() {
                seen.push(String::from_utf8_lossy(&request).into_owned());
            }
            let Some(body) = &bodies[n.min(bodies.len() - 1)] else {
                stalled.push(stream); // Held open, unanswered.
                continue;
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body);
        }
    });
    (format!("http://{addr}/v1"), requests)
}

/// Reads one request (head and content-length body).
fn read_request(stream: &mut TcpStream) -> Vec<u8> {
    let mut reader = BufReader::new(stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    body
}

//! Clients that read, write or send slowly, or not at all, hold neither the server's memory nor
//! its connections for good.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ai_core::ThreadId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::AppState;
use super::tests::Logs;

/// A model whose one answer streams `deltas` text deltas of `size` bytes, then ` the end`,
/// once `gate` (when given) is notified.
struct Chatty {
    deltas: usize,
    size: usize,
    gate: Option<Arc<tokio::sync::Notify>>,
}

const THE_END: &str = " the end";

#[async_trait::async_trait]
impl ai_core::CompletionPort for Chatty {
    async fn complete(
        &self,
        _: &ai_core::LlmRequest,
        sink: &mut dyn ai_core::DeltaSink,
        _: &ai_core::CancellationToken,
    ) -> Result<ai_core::LlmCompletion, ai_core::CompletionError> {
        let delta = "x".repeat(self.size);
        for _ in 0..self.deltas {
            sink.delta(ai_core::CompletionDelta::Text {
                delta: delta.clone(),
            });
        }
        if let Some(gate) = &self.gate {
            gate.notified().await;
        }
        sink.delta(ai_core::CompletionDelta::Text {
            delta: THE_END.into(),
        });
        Ok(ai_core::LlmCompletion {
            text: format!("{}{THE_END}", delta.repeat(self.deltas)),
            tool_calls: Vec::new(),
            finish_reason: ai_core::FinishReason::Stop,
            usage: None,
        })
    }
}

/// A server without a data folder or tools over `model`.
fn state_over(model: Chatty) -> AppState {
    let memory = Arc::new(crate::MemoryThreads::new(16, usize::MAX));
    let stores = crate::Stores {
        threads: memory.clone(),
        log: None,
        memory_threads: Some(memory),
    };
    let source = Arc::new(ai_core::StaticToolSource::new(Vec::new()).unwrap());
    let policy = ai_core::ToolPolicy::from_toml_str("allowed_tools = []").unwrap();
    let clock: Arc<dyn ai_core::Clock> = Arc::new(adapters::SystemClock);
    let settings = crate::Settings::default();
    let runtime =
        crate::Runtime::with_source(&settings, Arc::new(model), source, Arc::new(policy), clock);
    AppState::new(runtime, stores)
}

fn bound(max: usize) -> std::num::NonZeroUsize {
    std::num::NonZeroUsize::new(max).unwrap()
}

/// An AG-UI request body for a new thread `thread`.
fn agui_body(thread: &str) -> String {
    serde_json::json!({"threadId": thread, "runId": format!("r-{thread}"),
        "messages": [{"id": "m1", "role": "user", "content": "talk"}]})
    .to_string()
}

/// The text of the last message saved in `thread`, once its run saved it.
async fn saved_answer(state: &AppState, thread: &str) -> String {
    let thread = ThreadId::new(thread).unwrap();
    let wait = async {
        loop {
            if let Some(saved) = state.stores.threads.load(&thread).await.unwrap() {
                let messages = saved["messages"].as_array().unwrap().clone();
                let last = messages.last().unwrap().to_string();
                if last.contains("assistant") {
                    return last;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), wait)
        .await
        .expect("the run never saved its thread")
}

/// A run of 200 deltas on thread `thread` whose AG-UI client has read nothing, once the server
/// cut its stream (at most 1 KiB of unsent events, about 20 deltas): the state, the model's gate
/// (the run's end waits for it), the response not read yet, and the logs captured while the
/// guard lives.
struct CutStream {
    state: Arc<AppState>,
    gate: Arc<tokio::sync::Notify>,
    response: axum::response::Response,
    logs: Logs,
    _logging: tracing::subscriber::DefaultGuard,
}

async fn a_cut_stream(thread: &str) -> CutStream {
    a_cut_stream_on(Endpoint::Agui, thread).await
}

/// The protocol a cut stream speaks.
#[derive(Clone, Copy)]
enum Endpoint {
    Agui,
    Chat,
}

/// The response to a first message, `talk`, on a new thread `thread` over `endpoint`.
async fn post(state: &Arc<AppState>, endpoint: Endpoint, thread: &str) -> axum::response::Response {
    let mut headers = axum::http::HeaderMap::new();
    let json = axum::http::HeaderValue::from_static("application/json");
    headers.insert(axum::http::header::CONTENT_TYPE, json);
    let limit = axum::Extension(super::BodyLimit(usize::MAX));
    match endpoint {
        Endpoint::Agui => {
            let body = axum::body::Bytes::from(agui_body(thread));
            super::agui::run(
                axum::extract::State(state.clone()),
                limit,
                headers,
                Ok(body),
            )
            .await
        }
        Endpoint::Chat => {
            let body = serde_json::json!({"id": thread, "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "talk"}]}]});
            let body = axum::body::Bytes::from(body.to_string());
            super::chat::run(
                axum::extract::State(state.clone()),
                limit,
                headers,
                Ok(body),
            )
            .await
        }
    }
    .unwrap()
}

/// [`a_cut_stream`] on `endpoint`.
async fn a_cut_stream_on(endpoint: Endpoint, thread: &str) -> CutStream {
    let (logs, _logging) = Logs::capture();
    let gate = Arc::new(tokio::sync::Notify::new());
    let model = Chatty {
        deltas: 200,
        size: 16,
        gate: Some(gate.clone()),
    };
    let state = Arc::new(
        state_over(model)
            .with_max_unsent_events(bound(8))
            .with_max_unsent_bytes(bound(1024)),
    );
    let response = post(&state, endpoint, thread).await;
    // The client reads nothing while the run streams its 200 deltas.
    let cut = async {
        while !logs.text().contains("fell more than 1024 bytes behind") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), cut)
        .await
        .expect("the stream was never cut");
    CutStream {
        state,
        gate,
        response,
        logs,
        _logging,
    }
}

/// A client that does not read its stream while its run goes on holds at most
/// `max_unsent_bytes` of the run's events in the server: past them its stream is cut (what
/// waited is dropped), with a warning that names nothing of the run, and the run goes on to its
/// end and saves its thread, though the cut stream is then dropped. The client that reads later
/// finds its stream ended by the protocol's error (`RUN_ERROR`) saying the stream was cut and
/// the run goes on, never the run's end, and never a body that breaks off.
#[tokio::test]
async fn a_stream_whose_client_falls_behind_is_cut_and_its_run_goes_on() {
    let CutStream {
        state,
        gate,
        response,
        logs,
        _logging,
    } = a_cut_stream("t-slow-ZQX").await;
    assert!(!logs.text().contains("ZQX"), "{}", logs.text());
    // What waited was dropped at the cut.
    assert_eq!(state.unsent.events.load(Ordering::Relaxed), 0);
    assert_eq!(state.unsent.bytes.load(Ordering::Relaxed), 0);

    // The client now reads: the protocol's error, never the run's end.
    let shown = read_whole(response).await;
    super::tests::record("cut.agui.sse", &shown);
    assert!(shown.contains("RUN_STARTED"), "{shown}");
    assert!(!shown.contains("RUN_FINISHED"), "{shown}");
    let last = shown.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.contains("\"RUN_ERROR\""), "{shown}");
    assert!(last.contains("the run goes on"), "{last}");
    assert!(
        shown.matches("TEXT_MESSAGE_CONTENT").count() <= 20,
        "{shown}"
    );

    // Dropped, the cut stream did not cancel its run: it ends and saves its whole answer.
    gate.notify_one();
    let answer = saved_answer(&state, "t-slow-ZQX").await;
    assert!(answer.contains(THE_END), "{answer}");
    assert_eq!(answer.matches('x').count(), 200 * 16, "{answer}");
}

/// The whole body of `response`; a body that breaks off fails the test.
async fn read_whole(response: axum::response::Response) -> String {
    use futures_util::StreamExt;

    let mut body = response.into_body().into_data_stream();
    let mut shown = String::new();
    while let Some(frame) = body.next().await {
        match frame {
            Ok(frame) => shown.push_str(&String::from_utf8_lossy(&frame)),
            Err(error) => panic!("the stream broke off ({error}) after: {shown}"),
        }
    }
    shown
}

/// A run the server cancels (its shutdown, `AppState::cancel_runs`) while its client reads ends
/// that client's stream as the protocol's cancelled end, never as a failure: over AG-UI its
/// open text and step are closed, then `RUN_FINISHED` with the `cancelled` outcome; over the AI
/// SDK its text is ended, then `abort` and `[DONE]`. Both streams are kept for the protocols'
/// own validators.
#[tokio::test]
async fn a_run_the_server_cancels_ends_its_stream_as_cancelled() {
    use futures_util::StreamExt;

    for (endpoint, name, end) in [
        (
            Endpoint::Agui,
            "cancelled-at-shutdown.agui.sse",
            [
                r#"data: {"type":"TEXT_MESSAGE_END","messageId":"r-t-cancelled-m1"}"#,
                r#"data: {"type":"STEP_FINISHED","stepName":"step 1"}"#,
                r#"data: {"type":"RUN_FINISHED","threadId":"t-cancelled","runId":"r-t-cancelled","result":{"reason":"cancelled"},"outcome":{"type":"cancelled"}}"#,
            ],
        ),
        (
            Endpoint::Chat,
            "cancelled-at-shutdown.aisdk.sse",
            [
                r#"data: {"type":"text-end","id":"#,
                r#"data: {"type":"abort"}"#,
                "data: [DONE]",
            ],
        ),
    ] {
        // The model streams its text, then waits for a gate that never opens.
        let model = Chatty {
            deltas: 3,
            size: 4,
            gate: Some(Arc::new(tokio::sync::Notify::new())),
        };
        let state = Arc::new(state_over(model));
        let mut body = post(&state, endpoint, "t-cancelled")
            .await
            .into_body()
            .into_data_stream();
        let mut shown = String::new();
        // The client has read the model's text: the run is in flight.
        while shown.matches("xxxx").count() < 3 {
            let frame = body.next().await.expect("the stream ended").unwrap();
            shown.push_str(&String::from_utf8_lossy(&frame));
        }
        state.cancel_runs();
        while let Some(frame) = body.next().await {
            shown.push_str(&String::from_utf8_lossy(&frame.unwrap()));
        }
        super::tests::record(name, &shown);
        let frames: Vec<&str> = shown.trim_end().split("\n\n").collect();
        let last = &frames[frames.len() - 3..];
        assert!(last[0].starts_with(end[0]), "{shown}");
        assert_eq!(last[1..], end[1..], "{shown}");
    }
}

/// An AI SDK client whose stream was cut reads the protocol's end: an `error` chunk saying the
/// stream was cut and the run goes on, then `[DONE]`, never `finish`; the run saves its thread.
#[tokio::test]
async fn a_cut_ai_sdk_stream_ends_with_an_error_chunk_and_done() {
    let CutStream {
        state,
        gate,
        response,
        _logging,
        ..
    } = a_cut_stream_on(Endpoint::Chat, "t-cut-chat").await;
    let shown = read_whole(response).await;
    super::tests::record("cut.aisdk.sse", &shown);
    let frames: Vec<&str> = shown.trim_end().split("\n\n").collect();
    let [.., error, done] = frames[..] else {
        panic!("{shown}");
    };
    assert!(error.contains("\"type\":\"error\""), "{shown}");
    assert!(error.contains("the run goes on"), "{error}");
    assert_eq!(done, "data: [DONE]", "{shown}");
    assert!(!shown.contains("\"finish\""), "{shown}");

    gate.notify_one();
    let answer = saved_answer(&state, "t-cut-chat").await;
    assert!(answer.contains(THE_END), "{answer}");
}

/// Over a real connection whose client sends a request and does not read its stream: the
/// bytes waiting for it in the server stay within the bound while the run streams far more
/// than the sockets hold, the stream is cut, the run goes on to its end and saves its thread,
/// and the client then finds its stream ended by the protocol's error before the run's end.
#[tokio::test]
async fn a_client_that_never_reads_holds_at_most_the_bound_in_the_server() {
    // The server runs on this test's thread: its warning is caught.
    let (logs, _logging) = Logs::capture();
    // 16 MiB of text: far more than loopback sockets buffer (some 3 MiB).
    let gate = Arc::new(tokio::sync::Notify::new());
    let model = Chatty {
        deltas: 4096,
        size: 4096,
        gate: Some(gate.clone()),
    };
    let state = Arc::new(
        state_over(model)
            .with_max_unsent_events(bound(16))
            .with_max_unsent_bytes(bound(64 << 10))
            .with_allow_unauthenticated(true),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(super::serve(listener, state.clone(), 1 << 20));

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut client = socket.connect(addr).await.unwrap();
    let body = agui_body("t-never-reads");
    let request = format!(
        "POST /api/v1/agui HTTP/1.1\r\nhost: localhost:{}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        addr.port(),
        body.len()
    );
    client.write_all(request.as_bytes()).await.unwrap();

    // Watched while the run streams, until the stream is cut.
    let mut most = 0;
    let cut = async {
        while !logs.text().contains("fell more than 65536 bytes behind") {
            most = most.max(state.unsent.bytes.load(Ordering::Relaxed));
            assert!(most <= 64 << 10, "{most} bytes wait for the client");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(300), cut)
        .await
        .expect("the stream was never cut");
    assert_eq!(state.unsent.bytes.load(Ordering::Relaxed), 0);

    gate.notify_one();
    let answer = saved_answer(&state, "t-never-reads").await;
    assert!(answer.contains(THE_END));

    let mut shown = Vec::new();
    // The connection ends once the stream ends (a reset is an end too).
    let _ = client.read_to_end(&mut shown).await;
    let shown = String::from_utf8_lossy(&shown);
    let head: String = shown.chars().take(200).collect();
    assert!(shown.starts_with("HTTP/1.1 200"), "{head}");
    assert!(shown.contains("RUN_ERROR"), "the stream broke off: {head}");
    assert!(
        !shown.contains("RUN_FINISHED"),
        "the client was sent the whole run"
    );
    assert!(
        !shown.contains(THE_END),
        "the client was sent the whole run"
    );
}

/// `serve` on a loopback port within `limits`, without a token (only loopback clients and
/// hosts are answered).
async fn serving(limits: super::ConnectionLimits) -> std::net::SocketAddr {
    let model = Chatty {
        deltas: 1,
        size: 1,
        gate: None,
    };
    let state = Arc::new(state_over(model).with_connection_limits(limits));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(super::serve(listener, state, 1 << 20));
    addr
}

/// All the server sends on `client` until it closes the connection; a minute at most, far past
/// any limit a test sets.
async fn until_closed(client: &mut tokio::net::TcpStream) -> String {
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), client.read_to_end(&mut answer));
    // A reset is a close too.
    let _ = read.await.expect("the connection was left open");
    String::from_utf8_lossy(&answer).into_owned()
}

/// A client that sends half a header block and stops has its connection closed once the
/// header-read timeout passes, unanswered.
#[tokio::test]
async fn a_client_that_trickles_its_headers_is_closed_after_the_header_timeout() {
    let addr = serving(super::ConnectionLimits {
        header_read_timeout: Duration::from_millis(200),
        ..super::ConnectionLimits::default()
    })
    .await;
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let half = format!(
        "GET /healthz HTTP/1.1\r\nhost: localhost:{}\r\nx-more:",
        addr.port()
    );
    client.write_all(half.as_bytes()).await.unwrap();
    let answer = until_closed(&mut client).await;
    assert!(!answer.contains(" 200 "), "{answer}");

    // So is one that sends nothing, and one kept alive after its answer.
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    assert_eq!(until_closed(&mut silent).await, "");
    let mut kept = tokio::net::TcpStream::connect(addr).await.unwrap();
    let whole = format!(
        "GET /healthz HTTP/1.1\r\nhost: localhost:{}\r\n\r\n",
        addr.port()
    );
    kept.write_all(whole.as_bytes()).await.unwrap();
    let answer = until_closed(&mut kept).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// A client that sends its headers and part of its body, then stops, is answered 408
/// `body_timeout` once the body-read bound passes, and its connection is closed.
#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_refused_with_408() {
    let addr = serving(super::ConnectionLimits {
        body_read_timeout: Duration::from_millis(200),
        ..super::ConnectionLimits::default()
    })
    .await;
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = agui_body("t-trickle");
    let request = format!(
        "POST /api/v1/agui HTTP/1.1\r\nhost: localhost:{}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{}",
        addr.port(),
        body.len(),
        &body[..10]
    );
    client.write_all(request.as_bytes()).await.unwrap();
    let answer = until_closed(&mut client).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"body_timeout\""), "{answer}");
    assert!(
        answer.contains("did not arrive within the 0.2 s"),
        "{answer}"
    );
}

/// Past `max_connections` open at once, a client's connection waits unserved until one closes.
#[tokio::test]
async fn past_the_most_connections_a_client_waits_for_one_to_close() {
    let addr = serving(super::ConnectionLimits {
        max_connections: bound(1),
        ..super::ConnectionLimits::default()
    })
    .await;
    let health = format!(
        "GET /healthz HTTP/1.1\r\nhost: localhost:{}\r\nconnection: close\r\n\r\n",
        addr.port()
    );
    let mut first = tokio::net::TcpStream::connect(addr).await.unwrap();
    // Served: the server took the connection.
    first
        .write_all(health.replace("connection: close", "x-keep: 1").as_bytes())
        .await
        .unwrap();
    let mut answer = [0; 12];
    first.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");

    let mut second = tokio::net::TcpStream::connect(addr).await.unwrap();
    second.write_all(health.as_bytes()).await.unwrap();
    // Not served while the first stays open (a wait that can only make this pass wrongly).
    let mut byte = [0; 1];
    let early = tokio::time::timeout(Duration::from_millis(300), second.read(&mut byte)).await;
    assert!(early.is_err(), "a connection past the bound was served");
    drop(first);
    let answer = until_closed(&mut second).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// A client that stops reading holds its connection no longer than the write timeout: once the
/// socket has taken nothing for that long the connection is closed, though the client never
/// reads, and its response is dropped with the events waiting in it. The client has left, as
/// far as its run knows: the run is cancelled and saves its thread.
#[tokio::test]
async fn a_client_that_stops_reading_is_closed_after_the_write_timeout() {
    // 16 MiB of text in fewer events than the bound of events, within the bound of bytes: the
    // sockets fill (some 3 MiB), and the stream is not cut: its writes stall.
    let model = Chatty {
        deltas: 2048,
        size: 8192,
        gate: Some(Arc::new(tokio::sync::Notify::new())),
    };
    let limits = super::ConnectionLimits {
        write_timeout: Duration::from_millis(300),
        ..super::ConnectionLimits::default()
    };
    let state = Arc::new(
        state_over(model)
            .with_connection_limits(limits)
            .with_max_unsent_bytes(bound(64 << 20)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(super::serve(listener, state.clone(), 1 << 20));
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut client = socket.connect(addr).await.unwrap();
    let body = agui_body("t-stops-reading");
    let request = format!(
        "POST /api/v1/agui HTTP/1.1\r\nhost: localhost:{}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        addr.port(),
        body.len()
    );
    client.write_all(request.as_bytes()).await.unwrap();

    // The model waits for a gate never opened: only the client's leaving ends the run.
    let answer = saved_answer(&state, "t-stops-reading").await;
    let head: String = answer.chars().take(100).collect();
    assert!(!answer.contains(THE_END), "{head}");
    let dropped = async {
        while state.unsent.events.load(Ordering::Relaxed) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), dropped)
        .await
        .expect("the response of a client that reads nothing was kept");
    let mut shown = Vec::new();
    let _ = client.read_to_end(&mut shown).await;
    assert!(!String::from_utf8_lossy(&shown).contains("RUN_FINISHED"));
}

/// At its shutdown signal, `serve` returns only once every run in flight has saved its thread,
/// a run whose stream was cut included: that run holds no connection (its response is done),
/// so waiting for the connections alone let the process end before the run saved its thread.
#[tokio::test]
async fn at_shutdown_serve_waits_for_a_run_whose_stream_was_cut() {
    // The model answers once `gate` is notified, cancelled or not.
    let CutStream {
        state,
        gate,
        response,
        _logging,
        ..
    } = a_cut_stream("t-cut-at-shutdown").await;
    // The client reads its stream to the end: its response is done.
    read_whole(response).await;

    // The signal has come; the run, waiting for its model, may go on.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let serving = super::serve_until(listener, state.clone(), 1 << 20, async {});
    gate.notify_one();
    serving.await.unwrap();

    let thread = ThreadId::new("t-cut-at-shutdown").unwrap();
    let saved = state.stores.threads.load(&thread).await.unwrap();
    let saved = saved.expect("serve returned before the run saved its thread");
    let messages = saved["messages"].as_array().unwrap();
    let last = messages.last().unwrap().to_string();
    assert!(last.contains("assistant"), "{last}");
}

/// A client that reads its stream as fast as it can is not cut for a burst: a run whose 200
/// deltas are handed on at once, 25 times the bound of events, reaches it whole, to the run's
/// end.
#[tokio::test]
async fn a_burst_past_the_bound_reaches_a_client_that_reads() {
    use futures_util::StreamExt;

    let model = Chatty {
        deltas: 200,
        size: 16,
        gate: None,
    };
    let state = Arc::new(state_over(model).with_max_unsent_events(bound(8)));
    let mut headers = axum::http::HeaderMap::new();
    let json = axum::http::HeaderValue::from_static("application/json");
    headers.insert(axum::http::header::CONTENT_TYPE, json);
    let response = super::agui::run(
        axum::extract::State(state.clone()),
        axum::Extension(super::BodyLimit(usize::MAX)),
        headers,
        Ok(axum::body::Bytes::from(agui_body("t-burst"))),
    )
    .await
    .unwrap();
    let mut body = response.into_body().into_data_stream();
    let mut shown = String::new();
    while let Some(frame) = body.next().await {
        let frame = frame.expect("the stream of a client that reads was cut");
        shown.push_str(&String::from_utf8_lossy(&frame));
    }
    assert!(shown.contains("RUN_FINISHED"), "{shown}");
    assert_eq!(shown.matches(&"x".repeat(16)).count(), 200, "{shown}");
}

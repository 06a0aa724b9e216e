//! A scripted OpenAI-compatible HTTP server for tests, on `127.0.0.1:0`.
//!
//! [`FakeLlm::start`] binds a port and answers each request with the next [`Reply`] of its
//! queue, whatever the path: a status, headers and a body sent as chunks with optional delays,
//! optionally dropping the connection mid-body or hanging up without any answer (or, once the
//! queue is empty, a fallback reply served to every request). It records
//! every request ([`RecordedRequest`]: method, path, headers, body) so tests can check the
//! `Authorization` header and the JSON sent. [`Reply::fixture`] serves the recorded streams of
//! `fixtures/wire/`.
//!
//! Built on plain hyper (HTTP/1.1) rather than axum: the fake is a queue, not a router, and it
//! needs what a framework hides: closing a connection with no response, aborting a body
//! mid-stream, holding back the response head. hyper is already in the graph through reqwest.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use cogni_tests::fake_llm::{FakeLlm, Reply};
//! let fake = FakeLlm::start().await?;
//! fake.push(
//!     Reply::json(429, serde_json::json!({"error": {"message": "slow down"}}))
//!         .header("retry-after", "1"),
//! );
//! fake.push(Reply::fixture("openai-chat/openai-single-call.sse")?.split(7));
//! // … point a client at fake.base_url() (`http://127.0.0.1:PORT/v1`) …
//! assert_eq!(fake.requests().len(), 0);
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

/// The bytes of a recorded wire fixture, by its path under `fixtures/wire/`
/// (e.g. `openai-chat/parallel-interleaved.sse`).
pub fn fixture_bytes(relative: &str) -> io::Result<Vec<u8>> {
    let path = format!("{}/../fixtures/wire/{relative}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
}

/// One body chunk: sent after `delay`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The wait before this chunk is sent.
    pub delay: Duration,
    /// The bytes sent.
    pub bytes: Vec<u8>,
}

/// One scripted answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// Response headers, in order.
    pub headers: Vec<(String, String)>,
    /// The wait before the response head is sent.
    pub head_delay: Duration,
    /// The body, chunk by chunk.
    pub chunks: Vec<Chunk>,
    /// After the last chunk, break the connection instead of ending the body.
    pub drop_connection: bool,
    /// Close the connection without sending any response (after `head_delay`).
    pub hang_up: bool,
}

impl Reply {
    /// A status with no body and no headers.
    pub fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            head_delay: Duration::ZERO,
            chunks: Vec::new(),
            drop_connection: false,
            hang_up: false,
        }
    }

    /// A `200 text/event-stream` whose body is `body`, in one chunk.
    pub fn sse(body: impl Into<Vec<u8>>) -> Self {
        Self::status(200)
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .body(body)
    }

    /// [`Reply::sse`] with a recorded fixture (a path under `fixtures/wire/`).
    pub fn fixture(relative: &str) -> io::Result<Self> {
        Ok(Self::sse(fixture_bytes(relative)?))
    }

    /// A status with a JSON body, e.g. an OpenAI error object.
    pub fn json(status: u16, body: Value) -> Self {
        Self::status(status)
            .header("content-type", "application/json")
            .body(body.to_string())
    }

    /// No response at all: the connection closes as soon as the request has arrived.
    pub fn hang_up() -> Self {
        Self {
            hang_up: true,
            ..Self::status(200)
        }
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Replaces the body with these bytes, in one chunk.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.chunks = vec![Chunk {
            delay: Duration::ZERO,
            bytes: body.into(),
        }];
        self
    }

    /// Appends a chunk sent after `delay`.
    pub fn then(mut self, delay: Duration, bytes: impl Into<Vec<u8>>) -> Self {
        self.chunks.push(Chunk {
            delay,
            bytes: bytes.into(),
        });
        self
    }

    /// Holds the response head back for `delay`.
    pub fn delay_head(mut self, delay: Duration) -> Self {
        self.head_delay = delay;
        self
    }

    /// Re-cuts the body into chunks of at most `size` bytes (each keeps no delay).
    pub fn split(mut self, size: usize) -> Self {
        let bytes = self.body_bytes();
        self.chunks = bytes
            .chunks(size.max(1))
            .map(|piece| Chunk {
                delay: Duration::ZERO,
                bytes: piece.to_vec(),
            })
            .collect();
        self
    }

    /// Waits `delay` before every chunk but the first.
    pub fn chunk_delay(mut self, delay: Duration) -> Self {
        for chunk in self.chunks.iter_mut().skip(1) {
            chunk.delay = delay;
        }
        self
    }

    /// Keeps only the first `bytes` bytes of the body, then breaks the connection.
    pub fn drop_after(mut self, bytes: usize) -> Self {
        let mut body = self.body_bytes();
        body.truncate(bytes);
        self.drop_connection = true;
        self.body(body)
    }

    /// All body bytes, joined.
    pub fn body_bytes(&self) -> Vec<u8> {
        self.chunks.iter().flat_map(|c| c.bytes.clone()).collect()
    }
}

/// One request as the fake received it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// The method, e.g. `POST`.
    pub method: String,
    /// The path and query, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The headers, names in lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
    /// The body as JSON (`Value::Null` when it is not JSON).
    pub json: Value,
}

impl RecordedRequest {
    /// The first value of a header (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Computes a reply from the request it answers.
type Responder = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    responder: Option<Responder>,
    requests: Vec<RecordedRequest>,
    /// Per request (by index): from its arrival to its last body chunk handed to hyper.
    served: Vec<Option<Duration>>,
}

/// The running server; it stops when dropped.
pub struct FakeLlm {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for FakeLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeLlm").field("addr", &self.addr).finish()
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl FakeLlm {
    /// Binds `127.0.0.1:0` and serves on the current tokio runtime.
    pub async fn start() -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let accept = tokio::spawn(accept_loop(listener, state.clone()));
        Ok(Self {
            addr,
            state,
            accept,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The API root to configure a client with: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues the answer to a later request. With the queue empty, a request gets the fallback
    /// ([`FakeLlm::set_fallback`]) or else a 500 whose JSON error says so.
    pub fn push(&self, reply: Reply) -> &Self {
        lock(&self.state).replies.push_back(reply);
        self
    }

    /// The answer to every request that finds the queue empty, used again and again (e.g. for
    /// load tests); without one such a request gets a 500.
    pub fn set_fallback(&self, reply: Reply) -> &Self {
        self.respond_with(move |_| reply.clone())
    }

    /// Answers every request that finds the queue empty with `responder(request)`: a fake that
    /// answers by what it was asked (a tool call first, then text once the request carries the
    /// tool results), for load runs with many conversations at once.
    pub fn respond_with(
        &self,
        responder: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) -> &Self {
        lock(&self.state).responder = Some(Arc::new(responder));
        self
    }

    /// How long the fake took over each request so far (by index, as in [`FakeLlm::requests`]):
    /// from its arrival to its last body chunk, `None` while it is still streaming. A client's
    /// own time over the fake's is what the client adds.
    pub fn served(&self) -> Vec<Option<Duration>> {
        lock(&self.state).served.clone()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state).requests.clone()
    }

    /// How many queued replies are still unused.
    pub fn remaining(&self) -> usize {
        lock(&self.state).replies.len()
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn accept_loop(listener: TcpListener, state: Arc<Mutex<State>>) {
    // Connections live in the set, so stopping the server (aborting this task) ends them too.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                // Chunks go out when scripted, not when Nagle's algorithm lets them.
                let _ = stream.set_nodelay(true);
                let state = state.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| answer(state.clone(), request));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn answer(
    state: Arc<Mutex<State>>,
    request: Request<Incoming>,
) -> Result<Response<ScriptBody>, io::Error> {
    let arrived = std::time::Instant::now();
    let (head, mut incoming) = request.into_parts();
    let mut body = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut incoming).poll_frame(cx)).await
    {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    body.extend_from_slice(data);
                }
            }
            Err(e) => return Err(io::Error::other(e)),
        }
    }
    let recorded = RecordedRequest {
        method: head.method.to_string(),
        path: head
            .uri
            .path_and_query()
            .map_or_else(|| head.uri.path().to_owned(), |p| p.to_string()),
        headers: head
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        json: serde_json::from_slice(&body).unwrap_or(Value::Null),
        body,
    };
    let (index, reply) = {
        let mut state = lock(&state);
        let reply = state
            .replies
            .pop_front()
            .or_else(|| state.responder.as_ref().map(|respond| respond(&recorded)));
        state.requests.push(recorded);
        state.served.push(None);
        (state.requests.len() - 1, reply)
    };
    let reply = reply.unwrap_or_else(|| {
        Reply::json(
            500,
            serde_json::json!({"error": {"message": "fake LLM: no scripted reply left", "type": "server_error"}}),
        )
    });

    tokio::time::sleep(reply.head_delay).await;
    if reply.hang_up {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "scripted hang-up",
        ));
    }
    let mut response = Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        response = response.header(name.as_str(), value.as_str());
    }
    let (sender, receiver) = mpsc::channel(1);
    let chunks = reply.chunks;
    let drop_connection = reply.drop_connection;
    tokio::spawn(async move {
        for chunk in chunks {
            tokio::time::sleep(chunk.delay).await;
            if sender.send(Ok(Bytes::from(chunk.bytes))).await.is_err() {
                return;
            }
        }
        lock(&state).served[index] = Some(arrived.elapsed());
        if drop_connection {
            let _ = sender
                .send(Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    "scripted connection drop",
                )))
                .await;
        }
    });
    response
        .body(ScriptBody(receiver))
        .map_err(io::Error::other)
}

/// A response body fed chunk by chunk; an error breaks the connection.
struct ScriptBody(mpsc::Receiver<Result<Bytes, io::Error>>);

impl Body for ScriptBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|next| next.map(|chunk| chunk.map(Frame::data)))
    }
}

//! The stream's clocks under tokio's paused time, against a scripted body (no socket): what
//! resets the idle timeout, and what does not.

use std::collections::VecDeque;
use std::time::Duration;

use ai_core::{CancellationToken, CompletionDelta, CompletionError, LlmCompletion};
use reqwest::StatusCode;
use tokio::time::Instant;

use super::{ChunkSource, Failure, OpenAiCompletion, OpenAiConfig, OpenAiWire, after};

/// A body: each chunk after its delay, then its end, or a connection held open forever.
struct Script {
    chunks: VecDeque<(Duration, Vec<u8>)>,
    hold_open: bool,
}

impl Script {
    fn new() -> Self {
        Self {
            chunks: VecDeque::new(),
            hold_open: false,
        }
    }

    fn then(mut self, delay: Duration, bytes: impl Into<Vec<u8>>) -> Self {
        self.chunks.push_back((delay, bytes.into()));
        self
    }

    /// `count` times `bytes`, each `every` after the previous chunk.
    fn repeat(mut self, count: usize, every: Duration, bytes: &[u8]) -> Self {
        for _ in 0..count {
            self = self.then(every, bytes.to_vec());
        }
        self
    }

    fn held_open(mut self) -> Self {
        self.hold_open = true;
        self
    }
}

impl ChunkSource for Script {
    type Chunk = Vec<u8>;

    async fn chunk(&mut self) -> Result<Option<Vec<u8>>, String> {
        match self.chunks.pop_front() {
            Some((delay, bytes)) => {
                tokio::time::sleep(delay).await;
                Ok(Some(bytes))
            }
            None if self.hold_open => std::future::pending().await,
            None => Ok(None),
        }
    }
}

const ROLE: &[u8] =
    b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]}\n\n";
const TEXT: &[u8] =
    b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":null}]}\n\n";
const STOP: &[u8] =
    b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

const IDLE: Duration = Duration::from_secs(12);
const EVERY: Duration = Duration::from_secs(5);

fn model(wire: OpenAiWire) -> OpenAiCompletion {
    OpenAiCompletion::new(OpenAiConfig {
        wire,
        request_timeout: Duration::from_secs(60),
        idle_timeout: IDLE,
        ..OpenAiConfig::new("http://model.test/v1", "m")
    })
    .unwrap()
}

/// Streams `script` as an event stream; returns the result, the text shown and the (paused)
/// time it took.
async fn stream(
    wire: OpenAiWire,
    script: Script,
) -> (Result<LlmCompletion, CompletionError>, String, Duration) {
    let model = model(wire);
    let mut text = String::new();
    let mut sink = |delta: CompletionDelta| {
        if let CompletionDelta::Text { delta } = delta {
            text.push_str(&delta);
        }
    };
    let started = Instant::now();
    let result = model
        .stream(
            StatusCode::OK,
            script,
            &mut sink,
            after(Duration::from_secs(60)),
            &CancellationToken::new(),
            None,
        )
        .await
        .map_err(|failure| match failure {
            Failure::Final(error) | Failure::Retryable { error, .. } => error,
        });
    (result, text, started.elapsed())
}

fn stalled(result: &Result<LlmCompletion, CompletionError>) -> String {
    match result {
        Err(CompletionError::Transport(message)) => message.clone(),
        other => panic!("expected a stall, got {other:?}"),
    }
}

/// Keep-alive comments and blank lines every 5 s do not hold a stream open past its 12 s idle
/// timeout: it stalls 12 s after its last event, and says so.
#[tokio::test(start_paused = true)]
async fn keep_alive_comments_and_blank_lines_do_not_reset_the_idle_timeout() {
    let script = Script::new()
        .then(Duration::ZERO, ROLE)
        .then(Duration::ZERO, TEXT)
        .repeat(50, EVERY, b": keep-alive\n\n")
        .repeat(50, EVERY, b"\n\r\n")
        .then(EVERY, TEXT)
        .then(Duration::ZERO, STOP);
    let (result, text, took) = stream(OpenAiWire::Chat, script).await;
    let message = stalled(&result);
    assert!(
        message.contains("the stream stalled: no event for 12 s")
            && message.contains("(idle timeout; not retried)"),
        "{message}"
    );
    assert_eq!(text, "x", "the deltas before the stall were shown");
    assert!(IDLE <= took && took < IDLE + EVERY, "{took:?}");
}

/// An event trickled a byte at a time is progress only once it is complete: a server that
/// sends one byte every 5 s stalls 12 s after its last whole event.
#[tokio::test(start_paused = true)]
async fn bytes_that_never_complete_an_event_do_not_reset_the_idle_timeout() {
    let mut script = Script::new().then(Duration::ZERO, ROLE);
    for byte in TEXT {
        script = script.then(EVERY, vec![*byte]);
    }
    let script = script.then(Duration::ZERO, STOP);
    let (result, text, took) = stream(OpenAiWire::Chat, script).await;
    let message = stalled(&result);
    assert!(message.contains("no event for 12 s"), "{message}");
    assert_eq!(text, "");
    assert!(IDLE <= took && took < IDLE + EVERY, "{took:?}");
}

/// Before the first byte the request timeout applies; the first byte starts the idle clock,
/// even if it is only a comment.
#[tokio::test(start_paused = true)]
async fn the_first_byte_starts_the_idle_clock() {
    let script = Script::new()
        .then(Duration::from_secs(40), b": opening\n\n".to_vec())
        .held_open();
    let (result, _, took) = stream(OpenAiWire::Chat, script).await;
    let message = stalled(&result);
    assert!(
        message.contains("no event for 12 s after 11 bytes"),
        "{message}"
    );
    assert_eq!(took, Duration::from_secs(40) + IDLE);
}

/// Each complete event is progress, a delta or not (a role-only chunk, an event type the
/// decoder ignores): a stream whose events come every 5 s runs for minutes and answers.
#[tokio::test(start_paused = true)]
async fn every_complete_event_resets_the_idle_timeout() {
    let script = Script::new()
        .then(Duration::ZERO, ROLE)
        .repeat(30, EVERY, ROLE)
        .repeat(30, EVERY, TEXT)
        .then(EVERY, STOP);
    let (result, text, took) = stream(OpenAiWire::Chat, script).await;
    assert_eq!(result.unwrap().text, "x".repeat(30));
    assert_eq!(text, "x".repeat(30));
    assert_eq!(took, EVERY * 61);

    let unknown =
        b"event: response.heartbeat\ndata: {\"type\":\"response.heartbeat\"}\n\n".as_slice();
    let script = Script::new()
        .then(Duration::ZERO, unknown)
        .repeat(30, EVERY, unknown)
        .then(
            EVERY,
            b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":\"hi\"}\n\n\
              event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[]}}\n\n"
                .to_vec(),
        );
    let (result, text, _) = stream(OpenAiWire::Responses, script).await;
    assert_eq!(text, "hi", "{result:?}");
    assert!(result.is_ok(), "{result:?}");
}

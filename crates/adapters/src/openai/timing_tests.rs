//! The stream's clocks under tokio's paused time, against a scripted body (no socket): what
//! resets the idle timeout, and what does not; the call's time limit.

use std::collections::VecDeque;
use std::time::Duration;

use ai_core::{CancellationToken, CompletionDelta, CompletionError, LlmCompletion};
use reqwest::StatusCode;
use tokio::time::Instant;

use super::{
    ChunkSource, Failure, OpenAiCompletion, OpenAiConfig, OpenAiWire, Peeked, UTF8_BOM, after,
    error_body,
};
use wire_openai::Limits;

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
const REQUEST: Duration = Duration::from_secs(60);

fn model(wire: OpenAiWire, max_call: Duration) -> OpenAiCompletion {
    OpenAiCompletion::new(OpenAiConfig {
        wire,
        request_timeout: REQUEST,
        idle_timeout: IDLE,
        max_call,
        ..OpenAiConfig::new("http://model.test/v1", "m")
    })
    .unwrap()
}

/// Streams `script` as an event stream, as an attempt does (the first byte awaited for the
/// request timeout, never past the call's limit); returns the result, the text shown and the
/// (paused) time it took.
async fn stream(
    wire: OpenAiWire,
    script: Script,
) -> (Result<LlmCompletion, CompletionError>, String, Duration) {
    let (result, text, took) = stream_limited(wire, Duration::from_secs(3600), script).await;
    let result = result.map_err(|failure| match failure {
        Failure::Final(error) | Failure::Retryable { error, .. } => error,
    });
    (result, text, took)
}

/// [`stream`] under a call limit of `max_call`, with the failure as the attempt reports it.
async fn stream_limited(
    wire: OpenAiWire,
    max_call: Duration,
    script: Script,
) -> (Result<LlmCompletion, Failure>, String, Duration) {
    stream_as(wire, max_call, script, None).await
}

/// [`stream_limited`] for a body whose content type is not `text/event-stream`
/// (`not_a_stream`: the type, or `None` for none), as an attempt passes it.
async fn stream_as(
    wire: OpenAiWire,
    max_call: Duration,
    script: Script,
    not_a_stream: Option<Option<String>>,
) -> (Result<LlmCompletion, Failure>, String, Duration) {
    let model = model(wire, max_call);
    let limit = after(max_call);
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
            after(REQUEST).min(limit),
            limit,
            &CancellationToken::new(),
            not_a_stream,
        )
        .await;
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

/// A stream that keeps sending events, every one in time for the idle timeout, still ends at
/// the call's limit, with an error naming it and its setting, as final (never retried): its
/// deltas may have been shown.
#[tokio::test(start_paused = true)]
async fn a_stream_that_never_ends_stops_at_the_call_limit() {
    let script = Script::new()
        .then(Duration::ZERO, ROLE)
        .repeat(1000, EVERY, TEXT)
        .then(EVERY, STOP);
    let max_call = Duration::from_secs(62);
    let (result, text, took) = stream_limited(OpenAiWire::Chat, max_call, script).await;
    let Err(Failure::Final(CompletionError::Transport(message))) = result else {
        panic!(
            "expected a final transport error, got {:?}",
            result.map_err(|_| ())
        );
    };
    let bytes = ROLE.len() + 12 * TEXT.len();
    assert_eq!(
        message,
        format!(
            "POST http://model.test/v1/chat/completions: the call reached its time limit of 62 s \
             (llm.max_call_ms) after {bytes} bytes of the answer (not retried)"
        )
    );
    assert_eq!(
        text,
        "x".repeat(12),
        "the deltas before the limit were shown"
    );
    assert_eq!(took, max_call);
}

/// A call limit shorter than the request timeout ends the wait for the first byte, as final:
/// the call's time is spent, so another attempt would only run past it.
#[tokio::test(start_paused = true)]
async fn the_call_limit_before_the_first_byte_is_not_retried() {
    let script = Script::new().then(Duration::from_secs(90), ROLE.to_vec());
    let max_call = Duration::from_secs(30);
    let (result, _, took) = stream_limited(OpenAiWire::Chat, max_call, script).await;
    let Err(Failure::Final(CompletionError::Transport(message))) = result else {
        panic!(
            "expected a final transport error, got {:?}",
            result.map_err(|_| ())
        );
    };
    assert!(
        message.ends_with(
            "the call reached its time limit of 30 s (llm.max_call_ms) before the first byte of \
             the answer (not retried)"
        ),
        "{message}"
    );
    assert_eq!(took, max_call);

    // With the request timeout the shorter, its expiry is still the retryable one.
    let script = Script::new().then(Duration::from_secs(90), ROLE.to_vec());
    let (result, _, took) = stream_limited(OpenAiWire::Chat, REQUEST * 2, script).await;
    assert!(
        matches!(result, Err(Failure::Retryable { .. })),
        "{:?}",
        result.map_err(|_| ())
    );
    assert_eq!(took, REQUEST);
}

/// A body not labelled an event stream whose first bytes are not an SSE field or comment, nor
/// `{` (a proxy's HTML page or a JSON array, its connection held open) is refused as soon as those
/// bytes arrive, by its content type, as final and without its contents: it never stalls into the
/// idle timeout as "no event". A BOM, blank lines and whitespace before them are looked past, and a
/// field name split over two reads is waited for.
#[tokio::test(start_paused = true)]
async fn a_body_that_opens_as_no_event_stream_is_refused_at_once() {
    let page = "<!doctype html><html><body>Sign in</body></html>\n";
    let json = "[{\"error\":{\"message\":\"Sign in\"}}]\n";
    for (content_type, chunks) in [
        (Some("text/html"), vec![page.as_bytes().to_vec()]),
        (None, vec![json.as_bytes().to_vec()]),
        (
            Some("text/plain"),
            vec![
                b"\xEF\xBB".to_vec(),
                b"\xBF\n\r\n  ".to_vec(),
                b"da".to_vec(),
                b"ta> Sign in".to_vec(),
            ],
        ),
    ] {
        let mut script = Script::new();
        for chunk in &chunks {
            script = script.then(Duration::ZERO, chunk.clone());
        }
        let received: usize = chunks.iter().map(Vec::len).sum();
        let (result, _, took) = stream_as(
            OpenAiWire::Chat,
            Duration::from_secs(3600),
            script.held_open(),
            Some(content_type.map(str::to_owned)),
        )
        .await;
        let Err(Failure::Final(CompletionError::Decode(message))) = result else {
            panic!(
                "{content_type:?}: expected a final decode error, got {:?}",
                result.map_err(|_| ())
            );
        };
        let what = content_type.unwrap_or("no content type");
        assert_eq!(
            message,
            format!(
                "POST http://model.test/v1/chat/completions: HTTP 200 OK: the server answered \
                 with {what} (at least {received} bytes), not an event stream: it does not open \
                 with an SSE field (`data:`, `event:`, `id:`, `retry:`) or comment (`:`), nor as \
                 a whole answer (`{{`)"
            )
        );
        assert_eq!(took, Duration::ZERO, "{content_type:?}: not waited for");
    }
}

/// A stream with an odd content type (or none) whose first bytes are SSE is read as one, its
/// start split over reads, after a BOM and blank lines, or opening with a comment.
#[tokio::test(start_paused = true)]
async fn a_stream_with_an_odd_content_type_is_still_read() {
    let mut split = b"\xEF\xBB\xBF\n\r\n".to_vec();
    split.extend_from_slice(ROLE);
    for (content_type, opening) in [
        (Some("text/plain"), vec![b"da".to_vec(), ROLE[2..].to_vec()]),
        (None, vec![split[..2].to_vec(), split[2..].to_vec()]),
        (
            Some("application/octet-stream"),
            vec![b": hello\n\n".to_vec(), ROLE.to_vec()],
        ),
    ] {
        let mut script = Script::new();
        for chunk in opening {
            script = script.then(Duration::ZERO, chunk);
        }
        let script = script.then(EVERY, TEXT).then(Duration::ZERO, STOP);
        let (result, text, _) = stream_as(
            OpenAiWire::Chat,
            Duration::from_secs(3600),
            script,
            Some(content_type.map(str::to_owned)),
        )
        .await;
        assert!(
            result.is_ok(),
            "{content_type:?}: {:?}",
            result.map_err(|_| ())
        );
        assert_eq!(text, "x", "{content_type:?}");
    }
}

/// A body labelled `text/event-stream` whose content is a web page or a JSON array (a proxy's
/// error page, its connection held open) is refused as soon as its first bytes show it, as final
/// and without its contents: it never stalls into the idle timeout as "no event". Only an opening
/// no event stream nor whole answer can have is refused (`<` or `[` past a BOM and whitespace),
/// since the SSE rules let a stream open with a blank line or any field, known or not.
#[tokio::test(start_paused = true)]
async fn a_labelled_stream_that_opens_as_a_page_or_json_is_refused_at_once() {
    for chunks in [
        vec![b"<!doctype html><html><body>Sign in</body></html>\n".to_vec()],
        vec![b"\xEF\xBB\xBF\r\n  ".to_vec(), b"<p>Sign in</p>\n".to_vec()],
        vec![b"[{\"error\":\"Sign in\"}]".to_vec()],
    ] {
        let mut script = Script::new();
        for chunk in &chunks {
            script = script.then(Duration::ZERO, chunk.clone());
        }
        let received: usize = chunks.iter().map(Vec::len).sum();
        let (result, _, took) = stream_as(
            OpenAiWire::Chat,
            Duration::from_secs(3600),
            script.held_open(),
            None,
        )
        .await;
        let Err(Failure::Final(CompletionError::Decode(message))) = result else {
            panic!(
                "{chunks:?}: expected a final decode error, got {:?}",
                result.map_err(|_| ())
            );
        };
        assert_eq!(
            message,
            format!(
                "POST http://model.test/v1/chat/completions: HTTP 200 OK: the server answered \
                 with a body labelled text/event-stream (at least {received} bytes), not an \
                 event stream: it opens as a web page or a JSON array (`<` or `[`), as no SSE \
                 field or comment, nor a whole answer (`{{`), does"
            )
        );
        assert!(!message.contains("Sign in"), "{message}");
        assert_eq!(took, Duration::ZERO, "{chunks:?}: not waited for");
    }
}

/// A body labelled `text/event-stream` is read as a stream whatever field or comment it opens
/// with, known to the decoders or not, after blank lines, split over reads or not: only a page or
/// JSON is refused by its first bytes.
#[tokio::test(start_paused = true)]
async fn a_labelled_stream_opening_with_any_field_is_read() {
    for opening in [
        vec![b"\n\r\n".to_vec(), ROLE.to_vec()],
        vec![b"x-vendor: warm\n\n".to_vec(), ROLE.to_vec()],
        vec![b"dat".to_vec(), ROLE[3..].to_vec()],
        vec![b"id\nretry: 3000\n\n".to_vec(), ROLE.to_vec()],
        vec![
            b"\xEF\xBB".to_vec(),
            b"\xBF: OPENROUTER PROCESSING\n\n".to_vec(),
            ROLE.to_vec(),
        ],
    ] {
        let mut script = Script::new();
        for chunk in &opening {
            script = script.then(Duration::ZERO, chunk.clone());
        }
        let script = script.then(EVERY, TEXT).then(Duration::ZERO, STOP);
        let (result, text, _) =
            stream_as(OpenAiWire::Chat, Duration::from_secs(3600), script, None).await;
        assert!(result.is_ok(), "{opening:?}: {:?}", result.map_err(|_| ()));
        assert_eq!(text, "x", "{opening:?}");
    }
}

/// A whole chat completion sent in place of the stream, under any label but JSON (a gateway that
/// ignores `stream: true` and labels the body `text/event-stream`, decolua/9router#3492, with a
/// `data: [DONE]` glued after it; or `text/plain`, or nothing), its connection held open, is the
/// answer as soon as its JSON closes: its text shown, never refused as "not an event stream" nor
/// waited on until it stalls. Split over reads, after a BOM and blank lines, or not.
#[tokio::test(start_paused = true)]
async fn a_whole_answer_in_place_of_a_stream_is_read_at_once() {
    let body = br#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",
        "choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}]}"#;
    for content_type in [None, Some(None), Some(Some("text/plain"))] {
        for chunks in [
            vec![body.to_vec(), b"\n\ndata: [DONE]\n\n".to_vec()],
            vec![
                b"\xEF\xBB".to_vec(),
                b"\xBF\r\n ".to_vec(),
                body[..40].to_vec(),
                body[40..].to_vec(),
            ],
        ] {
            let mut script = Script::new();
            for chunk in &chunks {
                script = script.then(Duration::ZERO, chunk.clone());
            }
            let (result, text, took) = stream_as(
                OpenAiWire::Chat,
                Duration::from_secs(3600),
                script.held_open(),
                content_type.map(|t| t.map(str::to_owned)),
            )
            .await;
            let completion = result
                .map_err(|_| ())
                .unwrap_or_else(|()| panic!("{content_type:?} {chunks:?}: expected the answer"));
            assert_eq!(completion.text, "x", "{content_type:?}");
            assert_eq!(text, "x", "{content_type:?}");
            assert_eq!(took, Duration::ZERO, "{content_type:?}: not waited for");
        }
    }
}

/// A whole JSON answer (`application/json`) or a JSON error body whose connection the server
/// holds open after the value closes is read at once, up to where its JSON closes: not waited
/// on until the idle timeout (then failed as a stall) or the request deadline.
#[tokio::test(start_paused = true)]
async fn a_json_body_held_open_is_read_as_soon_as_it_closes() {
    let model = model(OpenAiWire::Chat, Duration::from_secs(3600));
    let limit = after(Duration::from_secs(3600));
    let deadline = after(REQUEST);
    let answer = br#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",
        "choices":[{"index":0,"message":{"role":"assistant","content":"x}"},"finish_reason":"stop"}]}"#;
    let script = Script::new()
        .then(Duration::ZERO, answer[..50].to_vec())
        .then(
            Duration::from_secs(1),
            [&answer[50..], b"\n".as_slice()].concat(),
        )
        .held_open();
    let started = Instant::now();
    let body = model
        .read_whole(script, deadline, limit, &CancellationToken::new())
        .await
        .map_err(|_| ())
        .expect("the answer");
    assert_eq!(body, answer.to_vec());
    assert_eq!(started.elapsed(), Duration::from_secs(1), "not waited for");

    let error = br#"{"error":{"message":"slow down","type":"rate_limit"}}"#;
    let script = Script::new()
        .then(Duration::ZERO, error[..10].to_vec())
        .then(Duration::ZERO, error[10..].to_vec())
        .held_open();
    let started = Instant::now();
    let body = model
        .read_bounded(script, false, deadline, &CancellationToken::new())
        .await
        .expect("the error body")
        .bytes;
    assert_eq!(body, error.to_vec());
    assert_eq!(started.elapsed(), Duration::ZERO, "not waited for");

    // A text body held open before its first line ends is read until its deadline, and cut.
    let script = Script::new()
        .then(Duration::ZERO, b"slow down".to_vec())
        .held_open();
    let body = model
        .read_bounded(script, true, deadline, &CancellationToken::new())
        .await
        .expect("the error body");
    assert_eq!(body.bytes, b"slow down".to_vec());
    assert_eq!(body.cut, Some(super::BodyCut::TimedOut));
    assert_eq!(Instant::now(), deadline, "read until its deadline");
}

/// An error or answer body held open is read only as far as what is shown of it: a JSON one
/// opening with a UTF-8 BOM to where its value closes (the BOM dropped, so it parses), a
/// `text/plain` one to its first line holding text, any other (a proxy's page) not past its
/// first bytes. None is waited on until the request deadline or the idle timeout.
#[tokio::test(start_paused = true)]
async fn a_body_held_open_is_read_only_as_far_as_it_is_shown() {
    let model = model(OpenAiWire::Chat, Duration::from_secs(3600));
    let limit = after(Duration::from_secs(3600));
    let deadline = after(REQUEST);
    let cancel = CancellationToken::new();
    let read = |script: Script, plain_text: bool| {
        model.read_bounded(script, plain_text, deadline, &cancel)
    };
    let error = br#"{"error":{"message":"slow down","type":"rate_limit"}}"#;
    for split in [1, 2, 3, 4] {
        let bom_first = [UTF8_BOM, error.as_slice()].concat();
        let script = Script::new()
            .then(Duration::ZERO, bom_first[..split].to_vec())
            .then(Duration::ZERO, bom_first[split..].to_vec())
            .held_open();
        let started = Instant::now();
        let body = read(script, false).await.expect("the error body").bytes;
        assert_eq!(body, error.to_vec(), "split at {split}");
        assert_eq!(started.elapsed(), Duration::ZERO, "split at {split}");
        assert_eq!(
            error_body::provider_message(&body).as_deref(),
            Some("slow down (rate_limit)")
        );
    }
    for (text, plain_text, expected) in [
        (
            &b"\n  \nslow down\nand more"[..],
            true,
            &b"\n  \nslow down\n"[..],
        ),
        (b"<html><body>busy", false, b"<html>"),
        (b"\xEF\xBBx not a BOM\n", true, b"\xEF\xBBx not a BOM\n"),
    ] {
        let script = Script::new()
            .then(Duration::ZERO, text[..6].to_vec())
            .then(Duration::ZERO, text[6..].to_vec())
            .held_open();
        let started = Instant::now();
        let body = read(script, plain_text)
            .await
            .expect("the error body")
            .bytes;
        assert!(
            body.starts_with(expected),
            "{:?}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "{:?}",
            String::from_utf8_lossy(text)
        );
    }

    // A whole answer opening with a BOM is read to where it closes, without its BOM.
    let answer = br#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",
        "choices":[{"index":0,"message":{"role":"assistant","content":"x}"},"finish_reason":"stop"}]}"#;
    let script = Script::new()
        .then(Duration::ZERO, UTF8_BOM[..2].to_vec())
        .then(Duration::ZERO, [&UTF8_BOM[2..], answer.as_slice()].concat())
        .held_open();
    let body = model
        .read_whole(script, deadline, limit, &CancellationToken::new())
        .await
        .map_err(|_| ())
        .expect("the answer");
    assert_eq!(body, answer.to_vec());
    assert!(wire_openai::chat::decode_completion(&body, Limits::default()).is_ok());
}

/// A `text/plain` error body that opens with a bracket but is no JSON error (a log line's
/// `[error] upstream timed out`) is read to the end of its first line, which is shown whole, not
/// cut where its bracket closes; one that is a JSON error is still read only to where its value
/// closes. Neither is waited on when held open.
#[tokio::test(start_paused = true)]
async fn a_text_body_opening_with_a_bracket_is_read_to_its_line_end() {
    let model = model(OpenAiWire::Chat, Duration::from_secs(3600));
    let deadline = after(REQUEST);
    for (text, shown) in [
        (
            &b"[error] upstream timed out\nnext line"[..],
            "[error] upstream timed out",
        ),
        (b"{upstream} busy, retry\n", "{upstream} busy, retry"),
        (b"[1] no healthy upstream\n", "[1] no healthy upstream"),
    ] {
        let script = Script::new()
            .then(Duration::ZERO, text[..3].to_vec())
            .then(Duration::ZERO, text[3..].to_vec())
            .held_open();
        let started = Instant::now();
        let body = model
            .read_bounded(script, true, deadline, &CancellationToken::new())
            .await
            .expect("the error body")
            .bytes;
        assert_eq!(error_body::provider_message(&body), None);
        assert_eq!(error_body::first_line(&body).as_deref(), Some(shown));
        assert_eq!(started.elapsed(), Duration::ZERO, "{shown}");
    }
    let error = br#"{"error":{"message":"slow down"}}"#;
    let script = Script::new()
        .then(Duration::ZERO, [error.as_slice(), b" trailing"].concat())
        .held_open();
    let started = Instant::now();
    let body = model
        .read_bounded(script, true, deadline, &CancellationToken::new())
        .await
        .expect("the error body")
        .bytes;
    assert_eq!(body, error.to_vec());
    assert_eq!(started.elapsed(), Duration::ZERO, "not waited for");
}

/// An error body is said cut at its read's bound only when what is shown of it does not end
/// within it: a text line, or a JSON error under `text/plain` naming no message, that ends within
/// 64 KiB is whole though the chunk it ends in goes past them; a line, or a JSON value, that does
/// not end within them is cut, however the chunks fall.
#[tokio::test(start_paused = true)]
async fn an_error_body_is_said_cut_at_its_bound_only_when_what_it_shows_goes_past_it() {
    let model = model(OpenAiWire::Chat, Duration::from_secs(3600));
    let deadline = after(REQUEST);
    let past = vec![b'x'; super::MAX_ERROR_BODY_BYTES];
    let long_line = vec![b'y'; super::MAX_ERROR_BODY_BYTES - 10];
    // Each body's parts, whether it is `text/plain`, and whether it is cut at the bound.
    let cases: [(&[&[u8]], bool, bool); 6] = [
        (&[b"upstream busy\n", &past], true, false),
        (&[br#"{"status":"busy"} retry"#, b"\n", &past], true, false),
        (&[&long_line, b"\n", &past], true, false),
        (&[&long_line, &past], true, true),
        (&[b"upstream ", &past, b"\n"], true, true),
        (
            &[
                br#"{"error":{"message":"slow down","param":""#,
                &past,
                br#""}}"#,
            ],
            false,
            true,
        ),
    ];
    for (parts, plain_text, cut) in cases {
        let body = parts.concat();
        // Sent as one chunk, and as chunks of 48 KiB.
        let at = 48 * 1024;
        let scripts = [
            Script::new().then(Duration::ZERO, body.clone()),
            Script::new()
                .then(Duration::ZERO, body[..at].to_vec())
                .then(Duration::ZERO, body[at..].to_vec()),
        ];
        for script in scripts {
            let read = model
                .read_bounded(script, plain_text, deadline, &CancellationToken::new())
                .await
                .expect("the error body");
            let what = String::from_utf8_lossy(&body[..40]);
            assert_eq!(read.cut, cut.then_some(super::BodyCut::Bound), "{what}");
            assert!(read.bytes.len() <= super::MAX_ERROR_BODY_BYTES, "{what}");
            assert!(body.starts_with(&read.bytes), "{what}");
        }
    }
}

/// A body labelled JSON is told an event stream by its first bytes past a BOM and whitespace,
/// however the reads split them, and none other is (a whole answer, an array, a body that ends
/// first); every byte read ahead is given back, in order, to the reader that follows.
#[tokio::test(start_paused = true)]
async fn a_json_labelled_body_is_told_a_stream_by_its_first_bytes_across_reads() {
    let model = model(OpenAiWire::Chat, Duration::from_secs(3600));
    let (deadline, limit) = (after(REQUEST), after(Duration::from_secs(3600)));
    let cases: [(&[&[u8]], bool); 5] = [
        (&[&UTF8_BOM[..2], b"\xBF\n d", b"ata: {}\n\n"], true),
        (&[b": keep-alive\n\n", ROLE], true),
        (&[b" \n", b"{\"id\":1}"], false),
        (&[b"[{\"error\":\"x\"}]"], false),
        (&[b"\n"], false),
    ];
    for (chunks, sse) in cases {
        let script = chunks.iter().fold(Script::new(), |script, chunk| {
            script.then(Duration::ZERO, *chunk)
        });
        let mut body = Peeked::new(script);
        let told = model
            .opens_as_sse(&mut body, deadline, limit, &CancellationToken::new())
            .await
            .map_err(|_| ());
        assert_eq!(told, Ok(sse), "{chunks:?}");
        let mut read = Vec::new();
        while let Ok(Some(chunk)) = body.chunk().await {
            read.extend_from_slice(&chunk);
        }
        assert_eq!(read, chunks.concat(), "{chunks:?}");
    }
}

/// A body labelled JSON that opens with only whitespace, past the decoder's byte limit, is
/// read ahead no further than the read that passes the limit, then refused by that limit as a
/// whole answer: the read ahead neither holds every byte the server sends until the call's
/// limit nor waits on a connection held open.
#[tokio::test(start_paused = true)]
async fn a_json_labelled_body_of_only_whitespace_is_read_ahead_no_further_than_the_limit() {
    let model = OpenAiCompletion::new(OpenAiConfig {
        limits: Limits::default().with_max_total_bytes(64),
        ..OpenAiConfig::new("http://model.test/v1", "m")
    })
    .unwrap();
    let (deadline, limit) = (after(REQUEST), after(Duration::from_secs(3600)));
    let cancel = CancellationToken::new();
    let script = Script::new()
        .repeat(100, Duration::ZERO, b"\n ")
        .held_open();
    let mut body = Peeked::new(script);
    let started = Instant::now();
    let told = model
        .opens_as_sse(&mut body, deadline, limit, &cancel)
        .await
        .map_err(|_| "failed");
    assert_eq!(told, Ok(false), "a whole answer, too large");
    assert_eq!(started.elapsed(), Duration::ZERO, "not waited for");
    assert_eq!(body.head.len(), 66, "read ahead to the read past the limit");
    assert!(!body.rest.chunks.is_empty(), "the rest is left unread");

    let mut sink = |_: CompletionDelta| {};
    let error = model
        .json_answer(body, StatusCode::OK, &mut sink, deadline, limit, &cancel)
        .await
        .map_err(|failure| match failure {
            Failure::Final(error) | Failure::Retryable { error, .. } => error.to_string(),
        })
        .expect_err("too large");
    assert!(error.contains("65 bytes"), "{error}");
    assert!(error.contains("64"), "{error}");
}

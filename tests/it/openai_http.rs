//! `adapters::OpenAiCompletion` over real HTTP against the scripted fake server
//! (`cogni_tests::fake_llm`), serving the recorded wire fixtures: streaming, retries, timeouts,
//! cancellation, both wires, the `Authorization` header, and a canary key that must never show.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use adapters::{OpenAiCompletion, OpenAiConfig, OpenAiWire};
use ai_core::{
    CancellationToken, CompletionDelta, CompletionError, CompletionPort, LlmCaller, LlmCompletion,
    LlmRequest, Message, RunId, Secret, ToolChoice,
};
use cogni_tests::fake_llm::{FakeLlm, Reply, fixture_bytes};
use serde_json::json;

const CANARY: &str = "sk-canary-5c0ffee-do-not-print";

fn request() -> LlmRequest {
    LlmRequest {
        caller: LlmCaller {
            run_id: RunId::new("run-1").unwrap(),
            graph: None,
        },
        messages: vec![Message::User {
            content: "What is the weather in Paris?".into(),
        }],
        tools: vec![],
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: None,
    }
}

/// A config for the fake: the canary key, quick backoff, short timeouts.
fn config(fake: &FakeLlm) -> OpenAiConfig {
    OpenAiConfig {
        api_key: Some(Secret::new(CANARY)),
        request_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        base_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
        ..OpenAiConfig::new(fake.base_url(), "gpt-test")
    }
}

/// Runs one call and returns the result with the deltas the sink saw.
async fn call(
    model: &OpenAiCompletion,
    cancel: &CancellationToken,
) -> (Result<LlmCompletion, CompletionError>, Vec<CompletionDelta>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let mut sink = move |delta: CompletionDelta| sink_seen.lock().unwrap().push(delta);
    let result = model.complete(&request(), &mut sink, cancel).await;
    let deltas = seen.lock().unwrap().clone();
    (result, deltas)
}

async fn call_once(model: &OpenAiCompletion) -> Result<LlmCompletion, CompletionError> {
    call(model, &CancellationToken::new()).await.0
}

/// What the sans-IO decoder makes of the whole fixture at once.
fn decoded(wire: OpenAiWire, fixture: &str) -> (LlmCompletion, Vec<CompletionDelta>) {
    let bytes = fixture_bytes(fixture).unwrap();
    match wire {
        OpenAiWire::Chat => {
            let mut decoder = wire_openai::chat::StreamDecoder::default();
            let deltas = decoder.feed(&bytes).unwrap();
            (decoder.finish().unwrap(), deltas)
        }
        OpenAiWire::Responses => {
            let mut decoder = wire_openai::responses::StreamDecoder::default();
            let deltas = decoder.feed(&bytes).unwrap();
            (decoder.finish().unwrap(), deltas)
        }
        other => panic!("no decoder here for {other:?}"),
    }
}

/// One call's fragments joined: index, id, name, arguments.
type JoinedCall = (usize, Option<String>, Option<String>, String);

/// The text and each call's fragments joined (calls in order of first appearance): how many
/// fragments a read yields depends on how the bytes were cut, what they add up to does not.
fn merged(deltas: &[CompletionDelta]) -> (String, Vec<JoinedCall>) {
    let mut text = String::new();
    let mut calls: Vec<JoinedCall> = Vec::new();
    for delta in deltas {
        match delta {
            CompletionDelta::Text { delta } => text.push_str(delta),
            CompletionDelta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => match calls.iter_mut().find(|c| c.0 == *index) {
                Some(call) => {
                    call.1 = call.1.take().or_else(|| id.clone());
                    call.2 = call.2.take().or_else(|| name.clone());
                    call.3.push_str(arguments);
                }
                None => calls.push((*index, id.clone(), name.clone(), arguments.clone())),
            },
            _ => {}
        }
    }
    (text, calls)
}

/// The bytes up to the end of the first event that holds `needle`.
fn through_event_with(bytes: &[u8], needle: &str) -> usize {
    let text = String::from_utf8_lossy(bytes);
    let start = text.find(needle).unwrap();
    start + text[start..].find("\n\n").unwrap() + 2
}

fn message(error: &CompletionError) -> String {
    match error {
        CompletionError::Transport(m)
        | CompletionError::Provider(m)
        | CompletionError::Decode(m)
        | CompletionError::Request(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Serves `fixture` in 7-byte chunks and checks the HTTP result equals the decoder's own.
async fn serves_like_the_decoder(wire: OpenAiWire, fixture: &str) -> LlmCompletion {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::fixture(fixture).unwrap().split(7));
    let model = OpenAiCompletion::new(OpenAiConfig {
        wire,
        ..config(&fake)
    })
    .unwrap();
    let (result, deltas) = call(&model, &CancellationToken::new()).await;
    let (expected, expected_deltas) = decoded(wire, fixture);
    let completion = result.unwrap();
    assert_eq!(completion, expected, "{fixture}");
    assert_eq!(
        merged(&deltas),
        merged(&expected_deltas),
        "{fixture}: the deltas reach the sink as decoded"
    );
    assert!(
        deltas.len() >= expected_deltas.len(),
        "{fixture}: 7-byte reads give at least as many fragments: {deltas:?}"
    );
    assert_eq!(fake.requests().len(), 1);
    completion
}

#[tokio::test]
async fn a_text_answer_streams_and_the_request_is_the_chat_wire() {
    let completion =
        serves_like_the_decoder(OpenAiWire::Chat, "openai-chat/text-crlf-comments-utf8.sse").await;
    assert!(completion.text.starts_with("Grüße"), "{completion:?}");
    assert!(completion.tool_calls.is_empty());

    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::fixture("loop/turn-2-answer.sse").unwrap());
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    call_once(&model).await.unwrap();
    let sent = &fake.requests()[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(sent.header("accept"), Some("text/event-stream"));
    assert_eq!(sent.json["model"], "gpt-test");
    assert_eq!(sent.json["stream"], true);
    assert_eq!(sent.json["stream_options"], json!({"include_usage": true}));
    assert_eq!(sent.json["messages"][0]["role"], "user");
}

#[tokio::test]
async fn a_tool_call_is_assembled() {
    let completion =
        serves_like_the_decoder(OpenAiWire::Chat, "openai-chat/openai-single-call.sse").await;
    assert_eq!(completion.tool_calls.len(), 1);
    assert!(completion.tool_calls[0].complete);
}

#[tokio::test]
async fn parallel_calls_are_assembled_in_order() {
    let completion =
        serves_like_the_decoder(OpenAiWire::Chat, "openai-chat/parallel-interleaved.sse").await;
    assert_eq!(completion.tool_calls.len(), 2);
    serves_like_the_decoder(OpenAiWire::Chat, "openai-chat/index-zero-distinct-ids.sse").await;
}

#[tokio::test]
async fn the_responses_wire_posts_to_responses_and_decodes_its_events() {
    let completion =
        serves_like_the_decoder(OpenAiWire::Responses, "openai-responses/function-call.sse").await;
    assert_eq!(completion.tool_calls.len(), 1);
    serves_like_the_decoder(
        OpenAiWire::Responses,
        "openai-responses/text-and-parallel-calls-with-gateway-done.sse",
    )
    .await;

    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::fixture("openai-responses/reasoning-then-text.sse").unwrap());
    let model = OpenAiCompletion::new(OpenAiConfig {
        wire: OpenAiWire::Responses,
        ..config(&fake)
    })
    .unwrap();
    call_once(&model).await.unwrap();
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/responses");
    assert_eq!(sent.json["stream"], true);
    assert_eq!(sent.json["model"], "gpt-test");
    assert!(sent.json.get("input").is_some() && sent.json.get("messages").is_none());
    assert!(sent.json.get("stream_options").is_none());

    fake.push(Reply::fixture("openai-responses/error-event.sse").unwrap());
    let error = call_once(&model).await.unwrap_err();
    assert!(
        matches!(&error, CompletionError::Provider(m) if m.contains("Rate limit reached.") && m.contains("/v1/responses")),
        "{error:?}"
    );
}

/// A request the wire encoder refuses is a request error, naming the endpoint and why, and
/// nothing is sent: not a decode error (no answer was read), and never retried (the same request
/// would be refused again), though retries are allowed.
#[tokio::test]
async fn a_request_the_encoder_refuses_is_not_sent() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::fixture("openai-chat/openai-single-call.sse").unwrap());
    let required = LlmRequest {
        tool_choice: ToolChoice::Required,
        ..request()
    };
    for (wire, path) in [
        (OpenAiWire::Chat, "chat/completions"),
        (OpenAiWire::Responses, "responses"),
    ] {
        let model = OpenAiCompletion::new(OpenAiConfig {
            wire,
            max_retries: 3,
            ..config(&fake)
        })
        .unwrap();
        let mut deltas = Vec::new();
        let error = model
            .complete(
                &required,
                &mut |delta: CompletionDelta| deltas.push(delta),
                &CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(matches!(error, CompletionError::Request(_)), "{error:?}");
        assert_eq!(
            error.to_string(),
            format!(
                "request not sent: POST {}/{path}: tool_choice `required` asks for a tool call, \
                 but the request has no tools",
                fake.base_url()
            ),
            "{wire:?}"
        );
        assert!(deltas.is_empty(), "{wire:?}: {deltas:?}");
    }
    assert_eq!(fake.requests().len(), 0, "nothing is sent, nor retried");
    assert_eq!(fake.remaining(), 1);
}

#[tokio::test]
async fn a_mid_stream_error_is_a_provider_error_after_the_deltas() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::fixture("openai-chat/mid-stream-error.sse")
            .unwrap()
            .split(16),
    );
    fake.push(Reply::fixture("openai-chat/mid-stream-error-string.sse").unwrap());
    fake.push(Reply::fixture("loop/turn-2-answer.sse").unwrap());
    let model = OpenAiCompletion::new(config(&fake)).unwrap();

    let (result, deltas) = call(&model, &CancellationToken::new()).await;
    let error = result.unwrap_err();
    let text = message(&error);
    assert!(matches!(error, CompletionError::Provider(_)), "{error:?}");
    assert!(
        text.contains("The server had an error while processing your request."),
        "{text}"
    );
    assert!(
        text.contains(&format!("POST {}/chat/completions", fake.base_url())),
        "{text}"
    );
    assert_eq!(
        deltas,
        vec![CompletionDelta::Text {
            delta: "Partial ".into()
        }]
    );

    let error = call_once(&model).await.unwrap_err();
    assert!(matches!(error, CompletionError::Provider(_)), "{error:?}");
    // Never retried: each call made one request.
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(fake.remaining(), 1);
}

#[tokio::test]
async fn a_stream_that_ends_without_a_finish_is_a_decode_error() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::fixture("openai-chat/truncated-no-done.sse").unwrap());
    fake.push(Reply::fixture("openai-responses/truncated.sse").unwrap());
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let error = call_once(&model).await.unwrap_err();
    assert!(
        matches!(&error, CompletionError::Decode(m) if m.contains("without a finish reason")),
        "{error:?}"
    );
    let responses = OpenAiCompletion::new(OpenAiConfig {
        wire: OpenAiWire::Responses,
        ..config(&fake)
    })
    .unwrap();
    let error = call_once(&responses).await.unwrap_err();
    assert!(matches!(error, CompletionError::Decode(_)), "{error:?}");
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn a_429_with_retry_after_is_waited_out_then_succeeds() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::json(
            429,
            json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
        )
        .header("retry-after", "1"),
    );
    fake.push(Reply::fixture("openai-chat/openai-single-call.sse").unwrap());
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let started = Instant::now();
    let completion = call_once(&model).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(completion.tool_calls.len(), 1);
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn a_retry_after_beyond_the_limit_is_not_waited_for() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::json(429, json!({"error": {"message": "quota"}})).header("retry-after", "3600"),
    );
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let error = call_once(&model).await.unwrap_err();
    let text = message(&error);
    assert!(text.contains("HTTP 429 Too Many Requests: quota"), "{text}");
    assert!(text.contains("3600 s"), "{text}");
    assert_eq!(fake.requests().len(), 1);
}

/// A retry whose wait would end past the call's time limit is not made: the error says so,
/// naming the limit and its setting, at once.
#[tokio::test]
async fn a_retry_that_would_end_past_the_call_limit_is_not_made() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::json(503, json!({"error": {"message": "busy"}})).header("retry-after", "40"));
    fake.push(Reply::fixture("openai-chat/openai-single-call.sse").unwrap());
    let model = OpenAiCompletion::new(OpenAiConfig {
        max_call: Duration::from_secs(30),
        ..config(&fake)
    })
    .unwrap();
    let error = call_once(&model).await.unwrap_err();
    assert_eq!(
        error,
        CompletionError::Transport(format!(
            "POST {}/chat/completions: HTTP 503 Service Unavailable: busy (not retried: the wait \
             of 40 s would end past the call's time limit of 30 s (llm.max_call_ms))",
            fake.base_url()
        ))
    );
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(fake.remaining(), 1);
}

#[tokio::test]
async fn two_500s_then_success() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::json(500, json!({"error": {"message": "boom"}})));
    fake.push(Reply::status(503));
    fake.push(Reply::fixture("openai-chat/parallel-interleaved.sse").unwrap());
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let completion = call_once(&model).await.unwrap();
    assert_eq!(completion.tool_calls.len(), 2);
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[0].body, requests[2].body,
        "every attempt sends the same request"
    );
}

/// As OpenAI's own SDKs decide: 408 (request timeout) and 409 (lock timeout) are retried like
/// 429 and 5xx, and the server's `x-should-retry` overrides the status either way.
#[tokio::test]
async fn retries_follow_the_status_and_the_servers_x_should_retry() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::json(408, json!({"error": {"message": "timed out"}})));
    fake.push(Reply::json(409, json!({"error": {"message": "locked"}})));
    fake.push(
        Reply::json(400, json!({"error": {"message": "try again"}}))
            .header("x-should-retry", "true"),
    );
    fake.push(Reply::fixture("openai-chat/openai-single-call.sse").unwrap());
    let model = OpenAiCompletion::new(OpenAiConfig {
        max_retries: 3,
        ..config(&fake)
    })
    .unwrap();
    assert_eq!(call_once(&model).await.unwrap().tool_calls.len(), 1);
    assert_eq!(fake.requests().len(), 4);

    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::json(503, json!({"error": {"message": "not this one"}}))
            .header("x-should-retry", "false"),
    );
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let text = message(&call_once(&model).await.unwrap_err());
    assert!(
        text.contains("HTTP 503 Service Unavailable: not this one"),
        "{text}"
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn retries_run_out_with_the_last_status_and_message() {
    let fake = FakeLlm::start().await.unwrap();
    for _ in 0..3 {
        fake.push(Reply::json(
            502,
            json!({"error": {"message": "upstream down"}}),
        ));
    }
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let error = call_once(&model).await.unwrap_err();
    let text = message(&error);
    assert!(matches!(error, CompletionError::Transport(_)), "{error:?}");
    assert_eq!(
        text,
        format!(
            "POST {}/chat/completions: HTTP 502 Bad Gateway: upstream down (gave up after 3 attempts)",
            fake.base_url()
        )
    );
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn a_401_is_not_retried_and_names_endpoint_status_and_message() {
    let fake = FakeLlm::start().await.unwrap();
    let long = "x".repeat(1000);
    fake.push(Reply::json(
        401,
        json!({"error": {"message": format!("Incorrect API key provided: {CANARY}. {long}"), "type": "invalid_request_error", "code": "invalid_api_key"}}),
    ));
    fake.push(Reply::fixture("openai-chat/openai-single-call.sse").unwrap());
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let error = call_once(&model).await.unwrap_err();
    let text = message(&error);
    assert!(matches!(error, CompletionError::Transport(_)), "{error:?}");
    assert!(
        text.starts_with(&format!(
            "POST {}/chat/completions: HTTP 401 Unauthorized: Incorrect API key provided: [redacted]. xxx",
            fake.base_url()
        )),
        "{text}"
    );
    assert!(
        text.ends_with('…') && text.len() < 500,
        "the message is truncated: {text}"
    );
    assert!(!text.contains(CANARY));
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(fake.remaining(), 1);

    fake.push(Reply::json(
        404,
        json!({"error": "model 'gpt-test' not found"}),
    ));
    let _ = call_once(&model).await; // uses the queued success
    let error = call_once(&model).await.unwrap_err();
    assert!(
        message(&error).contains("HTTP 404 Not Found: model 'gpt-test' not found"),
        "{error:?}"
    );
}

/// A proxy's or server's plain-text error (Envoy, Go's `404 page not found`) is the provider's
/// message: its first line, scrubbed of the key and shortened, follows the status. A web page
/// is not quoted, only its status named.
#[tokio::test]
async fn a_plain_text_error_names_its_first_line_and_a_page_only_its_status() {
    let fake = FakeLlm::start().await.unwrap();
    let model = OpenAiCompletion::new(OpenAiConfig {
        max_retries: 0,
        ..config(&fake)
    })
    .unwrap();
    fake.push(
        Reply::status(503)
            .header("content-type", "text/plain; charset=utf-8")
            .body(format!(
                "\n  upstream connect error or disconnect/reset before headers. key {CANARY}\r\nsecond line\n{}",
                "y".repeat(100_000)
            )),
    );
    let error = call_once(&model).await.unwrap_err();
    assert_eq!(
        message(&error),
        format!(
            "POST {}/chat/completions: HTTP 503 Service Unavailable: upstream connect error or \
             disconnect/reset before headers. key [redacted]",
            fake.base_url()
        )
    );
    let long = "z".repeat(1000);
    fake.push(
        Reply::status(404)
            .header("content-type", "text/plain")
            .body(long.clone()),
    );
    let text = message(&call_once(&model).await.unwrap_err());
    assert!(
        text.ends_with('…') && text.len() < 500 && text.contains("HTTP 404 Not Found: zzz"),
        "{text}"
    );
    fake.push(
        Reply::status(502)
            .header("content-type", "text/html")
            .body("<html><body><h1>502 Bad Gateway</h1></body></html>"),
    );
    assert_eq!(
        message(&call_once(&model).await.unwrap_err()),
        format!(
            "POST {}/chat/completions: HTTP 502 Bad Gateway",
            fake.base_url()
        )
    );
}

/// A provider's error message reaches the error (and so the operator's terminal and logs)
/// without its control characters: from a JSON body, an escape sequence and a bell show as
/// U+FFFD and a line break as a space, so no line of the server's own appears; from a
/// plain-text body, a carriage return cannot rewrite the line.
#[tokio::test]
async fn a_providers_error_message_carries_no_control_character() {
    let fake = FakeLlm::start().await.unwrap();
    let model = OpenAiCompletion::new(OpenAiConfig {
        max_retries: 0,
        ..config(&fake)
    })
    .unwrap();
    fake.push(Reply::json(
        400,
        json!({"error": {"message": "bad\u{1b}]0;pwned\u{7}\nINFO all good\u{9b}2J"}}),
    ));
    assert_eq!(
        message(&call_once(&model).await.unwrap_err()),
        format!(
            "POST {}/chat/completions: HTTP 400 Bad Request: bad\u{FFFD}]0;pwned\u{FFFD} INFO all \
             good\u{FFFD}2J",
            fake.base_url()
        )
    );
    fake.push(
        Reply::status(503)
            .header("content-type", "text/plain")
            .body("overloaded\rall good\u{1b}[K\nsecond line"),
    );
    assert_eq!(
        message(&call_once(&model).await.unwrap_err()),
        format!(
            "POST {}/chat/completions: HTTP 503 Service Unavailable: overloaded all \
             good\u{FFFD}[K",
            fake.base_url()
        )
    );
}

/// The request asks for no compression (it sends no `Accept-Encoding`, and the client decodes
/// none): an answer compressed all the same (a proxy set to compress event streams) is refused
/// at once by its encoding, not fed to the decoder as a stream that never completes an event.
#[tokio::test]
async fn a_compressed_answer_is_refused_by_its_encoding() {
    let fake = FakeLlm::start().await.unwrap();
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let gzip_start: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xcbH\xcd\xc9\xc9\x07\x00";
    for (content_type, encoding) in [("text/event-stream", "gzip"), ("application/json", "br")] {
        fake.push(
            Reply::status(200)
                .header("content-type", content_type)
                .header("content-encoding", encoding)
                .body(gzip_start)
                .then(Duration::from_secs(3600), gzip_start),
        );
        let error = call_once(&model).await.unwrap_err();
        assert_eq!(
            message(&error),
            format!(
                "POST {}/chat/completions: HTTP 200 OK: the server compressed its answer \
                 (content-encoding: {encoding}), though the request asked for none",
                fake.base_url()
            )
        );
        assert!(matches!(error, CompletionError::Decode(_)), "{error:?}");
    }
    assert!(fake.requests()[0].header("accept-encoding").is_none());
    // `identity` is no compression.
    fake.push(
        Reply::fixture("openai-chat/openai-single-call.sse")
            .unwrap()
            .header("content-encoding", "identity"),
    );
    call_once(&model).await.unwrap();
}

#[tokio::test]
async fn a_drop_after_the_first_byte_is_not_retried() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::fixture("openai-chat/openai-single-call.sse")
            .unwrap()
            .drop_after(400),
    );
    fake.push(Reply::fixture("openai-chat/openai-single-call.sse").unwrap());
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let error = call_once(&model).await.unwrap_err();
    let text = message(&error);
    assert!(matches!(error, CompletionError::Transport(_)), "{error:?}");
    assert!(
        text.contains("the connection broke after 400 bytes"),
        "{text}"
    );
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(fake.remaining(), 1);
}

#[tokio::test]
async fn a_hang_up_before_any_byte_is_retried() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::hang_up());
    fake.push(
        Reply::fixture("openai-chat/openai-single-call.sse")
            .unwrap()
            .drop_after(0),
    );
    fake.push(Reply::fixture("openai-chat/openai-single-call.sse").unwrap());
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let completion = call_once(&model).await.unwrap();
    assert_eq!(completion.tool_calls.len(), 1);
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn a_refused_connection_names_the_endpoint() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let model = OpenAiCompletion::new(OpenAiConfig {
        api_key: Some(Secret::new(CANARY)),
        base_backoff: Duration::from_millis(1),
        max_retries: 1,
        ..OpenAiConfig::new(format!("http://{addr}/v1?api-key={CANARY}"), "m")
    })
    .unwrap();
    let error = call_once(&model).await.unwrap_err();
    let text = message(&error);
    assert!(matches!(error, CompletionError::Transport(_)), "{error:?}");
    assert!(
        text.starts_with(&format!("POST http://{addr}/v1/chat/completions: ")),
        "{text}"
    );
    assert!(text.ends_with("(gave up after 2 attempts)"), "{text}");
    assert!(
        !text.contains(CANARY) && !text.contains("api-key"),
        "{text}"
    );
}

/// Some gateways take the key in the path: an error naming the endpoint shows that segment as
/// `***`, and the segments that are names as they are.
#[tokio::test]
async fn a_key_in_the_base_url_s_path_is_not_in_an_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let key = "sk-path-0123456789abcdef";
    let model = OpenAiCompletion::new(OpenAiConfig {
        base_backoff: Duration::from_millis(1),
        max_retries: 0,
        ..OpenAiConfig::new(format!("http://{addr}/v1/{key}/openai"), "m")
    })
    .unwrap();
    assert_eq!(
        model.endpoint(),
        format!("http://{addr}/v1/***/openai/chat/completions")
    );
    let error = call_once(&model).await.unwrap_err();
    let text = message(&error);
    assert!(
        text.starts_with(&format!(
            "POST http://{addr}/v1/***/openai/chat/completions: "
        )),
        "{text}"
    );
    assert!(!text.contains(key), "{text}");
}

#[tokio::test]
async fn an_idle_stream_times_out_and_is_not_retried() {
    let fake = FakeLlm::start().await.unwrap();
    let bytes = fixture_bytes("openai-chat/openai-single-call.sse").unwrap();
    fake.push(
        Reply::sse(bytes[..300].to_vec()).then(Duration::from_secs(5), bytes[300..].to_vec()),
    );
    fake.push(Reply::fixture("openai-chat/openai-single-call.sse").unwrap());
    let model = OpenAiCompletion::new(OpenAiConfig {
        idle_timeout: Duration::from_millis(200),
        ..config(&fake)
    })
    .unwrap();
    let started = Instant::now();
    let error = call_once(&model).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    let text = message(&error);
    assert!(
        text.contains("idle timeout") && text.contains("after 300 bytes"),
        "{text}"
    );
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(fake.remaining(), 1);
}

#[tokio::test]
async fn a_slow_first_byte_hits_the_request_timeout_and_is_retried() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::fixture("openai-chat/openai-single-call.sse")
            .unwrap()
            .delay_head(Duration::from_secs(5)),
    );
    // Head at once, first body byte late: the request timeout runs until the first byte.
    fake.push(Reply::sse(Vec::new()).then(
        Duration::from_secs(5),
        fixture_bytes("openai-chat/openai-single-call.sse").unwrap(),
    ));
    fake.push(Reply::fixture("openai-chat/openai-single-call.sse").unwrap());
    let quick = OpenAiConfig {
        request_timeout: Duration::from_millis(600),
        ..config(&fake)
    };
    let no_retry = OpenAiCompletion::new(OpenAiConfig {
        max_retries: 0,
        ..quick.clone()
    })
    .unwrap();
    let started = Instant::now();
    let error = call_once(&no_retry).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(
        error,
        CompletionError::Transport(format!(
            "POST {}/chat/completions: no response within 0.6 s (request timeout)",
            fake.base_url()
        ))
    );
    let retrying = OpenAiCompletion::new(quick).unwrap();
    let completion = call_once(&retrying).await.unwrap();
    assert_eq!(completion.tool_calls.len(), 1);
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn cancellation_stops_a_stream_at_once() {
    let fake = FakeLlm::start().await.unwrap();
    let bytes = fixture_bytes("openai-chat/text-before-tool-calls.sse").unwrap();
    let cut = through_event_with(&bytes, "Let me");
    fake.push(
        Reply::sse(bytes[..cut].to_vec()).then(Duration::from_secs(10), bytes[cut..].to_vec()),
    );
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let cancel = CancellationToken::new();
    let on_delta = cancel.clone();
    let mut sink = move |_: CompletionDelta| on_delta.cancel();
    let started = Instant::now();
    let result = model.complete(&request(), &mut sink, &cancel).await;
    assert_eq!(result, Err(CompletionError::Cancelled));
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn cancellation_stops_a_retry_wait_and_a_pending_head() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::json(429, json!({"error": {"message": "later"}})).header("retry-after", "30"));
    fake.push(Reply::status(200).delay_head(Duration::from_secs(30)));
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    for _ in 0..2 {
        let cancel = CancellationToken::new();
        let later = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            later.cancel();
        });
        let started = Instant::now();
        assert_eq!(
            call(&model, &cancel).await.0,
            Err(CompletionError::Cancelled)
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    }
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    assert_eq!(
        call(&model, &cancelled).await.0,
        Err(CompletionError::Cancelled)
    );
    assert_eq!(
        fake.requests().len(),
        2,
        "a call cancelled before it starts sends nothing"
    );
}

/// The body of a whole-answer fixture (`fixtures/wire/openai-*-whole/*.json`, `{about, stream?,
/// body}`) and the stream fixture of the same turn, if it names one.
fn whole_fixture(relative: &str) -> (serde_json::Value, Option<String>) {
    let fixture: serde_json::Value =
        serde_json::from_slice(&fixture_bytes(relative).unwrap()).unwrap();
    let stream = fixture["stream"].as_str().map(str::to_owned);
    (fixture["body"].clone(), stream)
}

/// A server that answers `stream: true` with a whole JSON completion (some proxies and local
/// servers do): on either wire, the client decodes it into the completion the stream of the same
/// turn gives, and the sink sees the same deltas, sent in 7-byte pieces or not, labelled
/// `application/json`, `text/event-stream` (with a `data: [DONE]` glued after it, as
/// decolua/9router#3492 shows a gateway sending it) or nothing.
#[tokio::test]
async fn a_whole_json_answer_to_a_stream_request_is_decoded_like_its_stream() {
    for (wire, fixture) in [
        (
            OpenAiWire::Chat,
            "openai-chat-whole/text-before-tool-calls.json",
        ),
        (
            OpenAiWire::Chat,
            "openai-chat-whole/openai-single-call.json",
        ),
        (
            OpenAiWire::Responses,
            "openai-responses-whole/text-and-parallel-calls.json",
        ),
        (
            OpenAiWire::Responses,
            "openai-responses-whole/incomplete-max-output-tokens.json",
        ),
    ] {
        let (body, stream) = whole_fixture(fixture);
        let fake = FakeLlm::start().await.unwrap();
        fake.push(Reply::json(200, body.clone()).split(7));
        fake.push(
            Reply::status(200)
                .header("content-type", "text/event-stream")
                .body(format!("{body}\n\ndata: [DONE]\n\n"))
                .split(7),
        );
        fake.push(Reply::status(200).body(body.to_string()));
        let model = OpenAiCompletion::new(OpenAiConfig {
            wire,
            ..config(&fake)
        })
        .unwrap();
        let (expected, expected_deltas) = decoded(wire, &stream.unwrap());
        for label in ["application/json", "text/event-stream", "none"] {
            let (result, deltas) = call(&model, &CancellationToken::new()).await;
            assert_eq!(result.unwrap(), expected, "{fixture} {label}");
            assert_eq!(deltas, expected_deltas, "{fixture} {label}");
        }
        assert_eq!(fake.requests().len(), 3, "{fixture}");
    }
}

/// A 200 in JSON that is not a whole answer is reported, never retried: the provider's error
/// as such, anything else as JSON that is neither an event stream nor a whole answer, saying
/// what is wrong without quoting the body; a body over the decoder's stream limit is refused by
/// that limit.
#[tokio::test]
async fn a_json_answer_that_is_not_a_completion_is_reported() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::json(
        200,
        json!({"error": {"message": "overloaded"}}),
    ));
    fake.push(Reply::json(
        200,
        json!({"object": "list", "data": [{"id": "CANARY-model"}]}),
    ));
    fake.push(Reply::json(
        200,
        json!({"object": "chat.completion.chunk", "choices": [{"delta": {"content": "CANARY"}}]}),
    ));
    fake.push(Reply::json(
        200,
        whole_fixture("openai-chat-whole/parallel-calls.json").0,
    ));
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let error = call_once(&model).await.unwrap_err();
    assert!(
        matches!(&error, CompletionError::Provider(m) if m.ends_with("HTTP 200 OK: overloaded")),
        "{error:?}"
    );
    for expected in [
        "HTTP 200 OK: the server answered with JSON (48 bytes), not an event stream nor a chat \
         completion: invalid response body: not a chat completion: its `object` is not \
         `chat.completion`",
        "HTTP 200 OK: the server answered with JSON (77 bytes), not an event stream nor a chat \
         completion: invalid response body: not a chat completion: its `object` is not \
         `chat.completion`",
    ] {
        let error = call_once(&model).await.unwrap_err();
        assert!(
            matches!(&error, CompletionError::Decode(m) if m.ends_with(expected)
                && !m.contains("CANARY")),
            "{error:?}"
        );
    }
    let limited = OpenAiCompletion::new(OpenAiConfig {
        limits: wire_openai::Limits::default().with_max_total_bytes(100),
        ..config(&fake)
    })
    .unwrap();
    let error = call_once(&limited).await.unwrap_err();
    assert!(
        matches!(&error, CompletionError::Decode(m) if m.ends_with(
            "HTTP 200 OK: the server answered with JSON (101 bytes), in place of an event stream, \
             read as a chat completion: the response body exceeds the limit of 100 bytes \
             (`Limits::max_total_bytes`)"
        )),
        "{error:?}"
    );
    // A whole completion that breaks a limit is named as one, not as something else.
    let (body, _) = whole_fixture("openai-chat-whole/parallel-calls.json");
    fake.push(Reply::json(200, body));
    let one_call = OpenAiCompletion::new(OpenAiConfig {
        limits: wire_openai::Limits::default().with_max_tool_calls(1),
        ..config(&fake)
    })
    .unwrap();
    let error = call_once(&one_call).await.unwrap_err();
    assert!(
        matches!(&error, CompletionError::Decode(m) if m.contains(
            "), in place of an event stream, read as a chat completion: the number of tool calls \
             exceeds the limit of 1 call (`Limits::max_tool_calls`)"
        ) && !m.contains("not an event stream")),
        "{error:?}"
    );
    assert_eq!(fake.requests().len(), 5, "none retried");

    // A failed Responses response is the provider's error, with its message or without one.
    let (mut failed, _) = whole_fixture("openai-responses-whole/failed.json");
    fake.push(Reply::json(200, failed.clone()));
    failed["error"] = serde_json::Value::Null;
    fake.push(Reply::json(200, failed));
    let responses = OpenAiCompletion::new(OpenAiConfig {
        wire: OpenAiWire::Responses,
        ..config(&fake)
    })
    .unwrap();
    for expected in [
        "HTTP 200 OK: The model failed to generate a response. (server_error)",
        "HTTP 200 OK: the response failed",
    ] {
        let error = call_once(&responses).await.unwrap_err();
        assert!(
            matches!(&error, CompletionError::Provider(m) if m.ends_with(expected)),
            "{error:?}"
        );
    }
}

/// A 200 that is not an event stream nor JSON (a web app's HTML page, when the base URL names
/// the app rather than its API) is reported by its content type, not as a stream cut short; a
/// stream whose content type is wrong but whose events decode is still read.
#[tokio::test]
async fn a_page_answer_to_a_stream_request_names_its_content_type() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::status(200)
            .header("content-type", "text/html; charset=utf-8")
            .body("<!doctype html><html><body>Sign in</body></html>\n"),
    );
    fake.push(
        Reply::status(200)
            .header("content-type", "text/plain")
            .body(fixture_bytes("loop/turn-2-answer.sse").unwrap()),
    );
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let error = call_once(&model).await.unwrap_err();
    assert!(
        matches!(&error, CompletionError::Decode(m) if m.ends_with(
            "HTTP 200 OK: the server answered with text/html; charset=utf-8 (at least 49 \
             bytes), not an event stream: it does not open with an SSE field (`data:`, \
             `event:`, `id:`, `retry:`) or comment (`:`), nor as a whole answer (`{`)"
        )),
        "{error:?}"
    );
    assert_eq!(fake.requests().len(), 1, "not retried");
    call_once(&model).await.unwrap();
}

/// A 200 that is not labelled an event stream says what its body was, its content type (or
/// that it had none) and its size, whatever stopped the decode: a body without a content type,
/// one over the decoder's stream limit (one long line: no line end ever came), one whose
/// events broke off. Never a byte of the body.
#[tokio::test]
async fn a_body_not_labelled_an_event_stream_is_named_when_it_fails_to_decode() {
    let fake = FakeLlm::start().await.unwrap();
    let page = "<!doctype html><html><body>Sign in</body></html>\n";
    fake.push(Reply::status(200).body(page));
    fake.push(
        Reply::status(200)
            .header("content-type", "text/html")
            .body("<p>Sign in</p>".repeat(10)),
    );
    let cut = fixture_bytes("loop/turn-2-answer.sse").unwrap();
    let cut = cut[..cut.len() / 2].to_vec();
    let cut_len = cut.len();
    fake.push(
        Reply::status(200)
            .header("content-type", "text/plain")
            .body(cut),
    );
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let limited = OpenAiCompletion::new(OpenAiConfig {
        limits: wire_openai::Limits::default().with_max_total_bytes(100),
        ..config(&fake)
    })
    .unwrap();
    let expected = [
        "HTTP 200 OK: the server answered with no content type (at least 49 bytes), not an \
         event stream: it does not open with an SSE field (`data:`, `event:`, `id:`, `retry:`) \
         or comment (`:`), nor as a whole answer (`{`)"
            .to_owned(),
        "HTTP 200 OK: the server answered with text/html (at least 140 bytes), not an event \
         stream: the stream exceeds the limit of 100 bytes (`Limits::max_total_bytes`)"
            .to_owned(),
        format!(
            "HTTP 200 OK: the server answered with text/plain ({cut_len} bytes), not an event \
             stream: the stream ended after {cut_len} bytes without a finish reason or end marker"
        ),
    ];
    for (model, expected) in [&model, &limited, &model].into_iter().zip(expected) {
        let error = call_once(model).await.unwrap_err();
        assert!(
            matches!(&error, CompletionError::Decode(m) if m.ends_with(&expected)
                && !m.contains("Sign in")),
            "{error:?}"
        );
    }
    assert_eq!(fake.requests().len(), 3, "none retried");
}

#[tokio::test]
async fn the_authorization_header_carries_the_key_and_is_absent_without_one() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::fixture("loop/turn-2-answer.sse").unwrap());
    fake.push(Reply::fixture("loop/turn-2-answer.sse").unwrap());
    let with_key = OpenAiCompletion::new(config(&fake)).unwrap();
    let without_key = OpenAiCompletion::new(OpenAiConfig {
        api_key: None,
        ..config(&fake)
    })
    .unwrap();
    call_once(&with_key).await.unwrap();
    call_once(&without_key).await.unwrap();
    let requests = fake.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {CANARY}").as_str())
    );
    assert_eq!(requests[1].header("authorization"), None);
}

#[tokio::test]
async fn the_canary_key_never_shows_in_errors_or_debug_output() {
    let logs = global_logs();
    let fake = FakeLlm::start().await.unwrap();
    let echo = format!("your key {CANARY} is wrong");
    let mid_stream = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"a\"}},\"finish_reason\":null}}]}}\n\ndata: {}\n\n",
        json!({"error": {"message": echo}})
    );
    let replies = vec![
        Reply::json(401, json!({"error": {"message": echo}})),
        Reply::json(429, json!({"error": echo})).header("retry-after", "3600"),
        Reply::json(500, json!({"detail": echo})),
        Reply::json(200, json!({"error": {"message": echo}})),
        Reply::sse(mid_stream),
        Reply::sse(format!("data: {echo}\n\n")),
        Reply::fixture("openai-chat/truncated-no-done.sse").unwrap(),
        Reply::fixture("openai-chat/openai-single-call.sse")
            .unwrap()
            .drop_after(300),
        Reply::hang_up(),
        Reply::status(200).delay_head(Duration::from_secs(5)),
    ];
    let count = replies.len();
    for reply in replies {
        fake.push(reply);
    }
    let config = OpenAiConfig {
        base_url: format!("http://user:{CANARY}@{}/v1?key={CANARY}", fake.addr()),
        max_retries: 0,
        request_timeout: Duration::from_secs(1),
        ..config(&fake)
    };
    let model = OpenAiCompletion::new(config.clone()).unwrap();
    let mut shown = vec![
        format!("{config:?}"),
        format!("{model:?}"),
        format!("{:#?}", model),
    ];
    for _ in 0..count {
        let error = call_once(&model).await.unwrap_err();
        shown.push(error.to_string());
        shown.push(format!("{error:?}"));
    }
    let cancel = CancellationToken::new();
    cancel.cancel();
    let error = call(&model, &cancel).await.0.unwrap_err();
    shown.push(format!("{error:?}"));
    for text in &shown {
        assert!(!text.contains(CANARY), "the key leaked: {text}");
        assert!(
            !text.contains("sk-canary"),
            "part of the key leaked: {text}"
        );
    }
    // The echoes were there to be scrubbed, and the requests did carry the key.
    assert!(
        shown
            .iter()
            .any(|t| t.contains("your key [redacted] is wrong")),
        "{shown:#?}"
    );
    assert!(
        !logs.text().contains(CANARY),
        "the key leaked into the logs"
    );
    assert_eq!(fake.requests().len(), count);
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.header("authorization") == Some(&format!("Bearer {CANARY}")))
    );
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_names_its_target() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::status(308).header(
        "location",
        "https://other.example/v1/chat/completions?key=q",
    ));
    fake.push(Reply::status(301).header("location", "/v2/chat/completions"));
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let error = call_once(&model).await.unwrap_err();
    assert_eq!(
        message(&error),
        format!(
            "POST {}/chat/completions: HTTP 308 Permanent Redirect (redirect to https://other.example/v1/chat/completions, not followed)",
            fake.base_url()
        )
    );
    let error = call_once(&model).await.unwrap_err();
    assert!(
        message(&error).ends_with(&format!(
            "(redirect to http://{}/v2/chat/completions, not followed)",
            fake.addr()
        )),
        "{error:?}"
    );
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn retry_logs_name_the_endpoint_but_never_the_key() {
    let logs = global_logs();
    let fake = FakeLlm::start().await.unwrap();
    // An earlier test's fake may have had this port: only what is logged from here on is ours.
    let from = logs.len();
    let echo = format!("bad key {CANARY}");
    fake.push(Reply::json(429, json!({"error": {"message": echo}})).header("retry-after-ms", "10"));
    fake.push(Reply::json(503, json!({"error": echo})));
    fake.push(Reply::fixture("loop/turn-2-answer.sse").unwrap());
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    call_once(&model).await.unwrap();

    let text = logs.text_since(from);
    let endpoint = format!("{}/chat/completions", fake.base_url());
    let ours: Vec<&str> = text.lines().filter(|l| l.contains(&endpoint)).collect();
    assert_eq!(
        ours.iter().filter(|l| l.contains("retrying")).count(),
        2,
        "{text}"
    );
    assert!(
        ours.iter().any(|l| l.contains("bad key [redacted]")),
        "{text}"
    );
    let all = logs.text();
    assert!(!all.contains(CANARY), "the key leaked into the logs: {all}");
}

/// Everything the adapter logs in this test binary: one global subscriber (a thread-local one
/// would miss callsites first hit on another test's thread).
fn global_logs() -> SharedLog {
    static LOGS: std::sync::OnceLock<SharedLog> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = SharedLog::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .finish();
        // Another global subscriber would have been set by a test of this binary; none is.
        let _ = tracing::subscriber::set_global_default(subscriber);
        logs
    })
    .clone()
}

/// A shared log buffer.
#[derive(Clone, Default)]
struct SharedLog(Arc<Mutex<Vec<u8>>>);

impl SharedLog {
    fn text(&self) -> String {
        self.text_since(0)
    }

    /// The bytes logged so far.
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// What was logged after the first `from` bytes.
    fn text_since(&self, from: usize) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()[from..]).into_owned()
    }
}

impl std::io::Write for SharedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for SharedLog {
    type Writer = SharedLog;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn one_client_serves_concurrent_calls() {
    let fake = FakeLlm::start().await.unwrap();
    fake.set_fallback(
        Reply::fixture("openai-chat/parallel-interleaved.sse")
            .unwrap()
            .split(64)
            .chunk_delay(Duration::from_millis(5)),
    );
    let model = Arc::new(OpenAiCompletion::new(config(&fake)).unwrap());
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let model = model.clone();
        calls.spawn(async move { call_once(&model).await });
    }
    let (expected, _) = decoded(OpenAiWire::Chat, "openai-chat/parallel-interleaved.sse");
    while let Some(result) = calls.join_next().await {
        assert_eq!(result.unwrap().unwrap(), expected);
    }
    assert_eq!(fake.requests().len(), 16);
    assert_eq!(fake.remaining(), 0);
}

#[tokio::test]
async fn a_key_echoed_across_the_message_cut_is_not_partly_shown() {
    let fake = FakeLlm::start().await.unwrap();
    let pad = "x".repeat(adapters::MAX_PROVIDER_MESSAGE_CHARS - 12);
    fake.push(Reply::json(
        401,
        json!({"error": {"message": format!("{pad} {CANARY} is not a valid key")}}),
    ));
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let error = call_once(&model).await.unwrap_err();
    let text = message(&error);
    assert!(
        !text.contains("sk-canary"),
        "part of the key leaked: {text}"
    );
}

#[tokio::test]
async fn a_key_echoed_across_the_message_cut_stays_out_of_the_retry_log() {
    let logs = global_logs();
    let fake = FakeLlm::start().await.unwrap();
    let pad = "x".repeat(adapters::MAX_PROVIDER_MESSAGE_CHARS - 12);
    let echo = format!("{pad} {CANARY} is rate limited");
    fake.push(Reply::json(429, json!({"error": {"message": echo}})).header("retry-after-ms", "10"));
    fake.push(Reply::fixture("loop/turn-2-answer.sse").unwrap());
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    call_once(&model).await.unwrap();
    let text = logs.text();
    let endpoint = format!("{}/chat/completions", fake.base_url());
    assert!(
        text.lines()
            .any(|l| l.contains(&endpoint) && l.contains("retrying") && l.contains(&pad)),
        "{text}"
    );
    assert!(
        !text.contains("sk-canary"),
        "part of the key was logged: {text}"
    );
}

/// A server (or proxy) that sends the whole stream, `[DONE]` included, and then keeps the body
/// open: the answer is complete at the marker, and is returned there.
#[tokio::test]
async fn a_stream_held_open_after_done_still_answers() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::fixture("openai-chat/openai-single-call.sse")
            .unwrap()
            .then(Duration::from_secs(30), b": bye\n\n".to_vec()),
    );
    // The idle timeout is far beyond the guard: the answer must not wait for it.
    let model = OpenAiCompletion::new(OpenAiConfig {
        idle_timeout: Duration::from_secs(600),
        ..config(&fake)
    })
    .unwrap();
    let completion = tokio::time::timeout(Duration::from_secs(20), call_once(&model))
        .await
        .expect("answered at the end marker, without waiting for the body to end")
        .unwrap();
    assert_eq!(completion.tool_calls.len(), 1);
    assert_eq!(fake.requests().len(), 1);
}

/// The same after Responses' terminal event (native streams send no `[DONE]`).
#[tokio::test]
async fn a_responses_stream_held_open_after_its_terminal_event_still_answers() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::fixture("openai-responses/function-call.sse")
            .unwrap()
            .then(Duration::from_secs(30), b": bye\n\n".to_vec()),
    );
    // The idle timeout is far beyond the guard: the answer must not wait for it.
    let model = OpenAiCompletion::new(OpenAiConfig {
        wire: OpenAiWire::Responses,
        idle_timeout: Duration::from_secs(600),
        ..config(&fake)
    })
    .unwrap();
    let completion = tokio::time::timeout(Duration::from_secs(20), call_once(&model))
        .await
        .expect("answered at the end marker, without waiting for the body to end")
        .unwrap();
    assert_eq!(completion.tool_calls.len(), 1);
}

/// A connection that breaks after `[DONE]` arrived loses nothing; before it, it still fails
/// (`a_drop_after_the_first_byte_is_not_retried`).
#[tokio::test]
async fn a_connection_broken_after_done_still_answers() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply {
        drop_connection: true,
        ..Reply::fixture("openai-chat/openai-single-call.sse").unwrap()
    });
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let completion = call_once(&model).await.unwrap();
    assert_eq!(completion.tool_calls.len(), 1);
    assert_eq!(fake.requests().len(), 1);
}

/// A stream held open before it said how the turn ended still stalls; one held open or cut
/// after its finish reason (the usage report and `[DONE]` missing) is answered: WIRE-FORMATS
/// §2.1 calls truncated only a stream that ends with neither.
#[tokio::test]
async fn a_stream_held_open_before_its_finish_reason_stalls_and_after_it_answers() {
    let bytes = fixture_bytes("openai-chat/openai-single-call.sse").unwrap();
    let at = |marker: &[u8]| {
        bytes
            .windows(marker.len())
            .position(|w| w == marker)
            .map(|found| bytes[..found].iter().rposition(|&b| b == b'\n').unwrap() + 1)
            .unwrap()
    };
    let finish = at(b"\"finish_reason\":\"tool_calls\"");
    let usage = at(b"\"usage\"");

    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::sse(bytes[..finish].to_vec())
            .then(Duration::from_secs(30), bytes[finish..].to_vec()),
    );
    let model = OpenAiCompletion::new(OpenAiConfig {
        idle_timeout: Duration::from_millis(300),
        ..config(&fake)
    })
    .unwrap();
    let error = call_once(&model).await.unwrap_err();
    let text = message(&error);
    assert!(matches!(error, CompletionError::Transport(_)), "{error:?}");
    assert!(text.contains("idle timeout"), "{text}");

    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::sse(bytes[..usage].to_vec()).then(Duration::from_secs(30), bytes[usage..].to_vec()),
    );
    fake.push(Reply {
        drop_connection: true,
        ..Reply::sse(bytes[..usage].to_vec())
    });
    let model = OpenAiCompletion::new(OpenAiConfig {
        idle_timeout: Duration::from_millis(300),
        ..config(&fake)
    })
    .unwrap();
    for _held_open_then_cut in 0..2 {
        let completion = call_once(&model).await.unwrap();
        assert_eq!(completion.tool_calls.len(), 1);
        assert_eq!(completion.finish_reason, ai_core::FinishReason::ToolCalls);
        assert!(completion.usage.is_none(), "the usage report never came");
    }
    assert_eq!(fake.requests().len(), 2, "neither was retried");
}

#[tokio::test]
async fn deltas_before_a_mid_stream_error_in_the_same_read_are_delivered() {
    let fake = FakeLlm::start().await.unwrap();
    // The same fixture as a_mid_stream_error_is_a_provider_error_after_the_deltas, but in one
    // read instead of 16-byte pieces.
    fake.push(Reply::fixture("openai-chat/mid-stream-error.sse").unwrap());
    let model = OpenAiCompletion::new(config(&fake)).unwrap();
    let (result, deltas) = call(&model, &CancellationToken::new()).await;
    assert!(
        matches!(result, Err(CompletionError::Provider(_))),
        "{result:?}"
    );
    assert_eq!(
        deltas,
        vec![CompletionDelta::Text {
            delta: "Partial ".into()
        }]
    );
}

/// A server that keeps the connection open after an error in the stream: the error is
/// reported at once, as the provider's, not after the idle timeout as a stall, and nothing the
/// server sends after it is decoded.
#[tokio::test]
async fn a_mid_stream_error_on_a_connection_held_open_is_reported_at_once() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::fixture("openai-chat/mid-stream-error.sse")
            .unwrap()
            .then(
                Duration::from_secs(30),
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"}}]}\n\n"
                    .to_vec(),
            ),
    );
    let model = OpenAiCompletion::new(OpenAiConfig {
        idle_timeout: Duration::from_secs(10),
        ..config(&fake)
    })
    .unwrap();
    let started = Instant::now();
    let (result, deltas) = call(&model, &CancellationToken::new()).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(result, Err(CompletionError::Provider(_))),
        "{result:?}"
    );
    assert_eq!(
        deltas,
        vec![CompletionDelta::Text {
            delta: "Partial ".into()
        }]
    );
}

/// Timeouts as long as a `Duration` holds (a caller's "no limit") wait without a limit instead
/// of overflowing the clock: the request goes out, streams, and answers, with the error body
/// read the same way.
#[tokio::test]
async fn timeouts_as_long_as_a_duration_holds_do_not_panic() {
    let fake = FakeLlm::start().await.unwrap();
    fake.push(Reply::fixture("openai-chat/openai-single-call.sse").unwrap());
    fake.push(Reply::json(401, json!({"error": {"message": "no"}})));
    let model = OpenAiCompletion::new(OpenAiConfig {
        request_timeout: Duration::MAX,
        idle_timeout: Duration::MAX,
        ..config(&fake)
    })
    .unwrap();
    let completion = call_once(&model).await.unwrap();
    assert_eq!(completion.tool_calls.len(), 1);
    let error = call_once(&model).await.unwrap_err();
    assert!(message(&error).contains("HTTP 401"), "{error}");
}

/// A server that answers with a whole JSON body (a completion to a stream request, or an error)
/// and then keeps the connection open: the read ends where the JSON closes, so neither the idle
/// timeout nor the request timeout, both far beyond the guard, is waited for.
#[tokio::test]
async fn a_json_body_held_open_is_answered_when_its_json_closes() {
    let (body, stream) = whole_fixture("openai-chat-whole/openai-single-call.json");
    let fake = FakeLlm::start().await.unwrap();
    fake.push(
        Reply::json(200, body)
            .split(7)
            .then(Duration::from_secs(30), b"\n".to_vec()),
    );
    fake.push(
        Reply::json(
            401,
            serde_json::json!({"error": {"message": "bad key", "code": "invalid_api_key"}}),
        )
        .then(Duration::from_secs(30), b"\n".to_vec()),
    );
    let model = OpenAiCompletion::new(OpenAiConfig {
        request_timeout: Duration::from_secs(600),
        idle_timeout: Duration::from_secs(600),
        ..config(&fake)
    })
    .unwrap();
    let (expected, _) = decoded(OpenAiWire::Chat, &stream.unwrap());
    let answer = tokio::time::timeout(Duration::from_secs(20), call_once(&model))
        .await
        .expect("answered when the JSON closed, without waiting for the body to end");
    assert_eq!(answer.unwrap(), expected);
    let error = tokio::time::timeout(Duration::from_secs(20), call_once(&model))
        .await
        .expect("failed when the error's JSON closed, without waiting for the body to end")
        .unwrap_err();
    assert!(
        message(&error).contains("HTTP 401 Unauthorized: bad key (invalid_api_key)"),
        "{error:?}"
    );
    assert_eq!(fake.requests().len(), 2);
}

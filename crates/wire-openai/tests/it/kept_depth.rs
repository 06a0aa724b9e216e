//! What a decoder keeps as sent beside a call (a chat call's `extra_content`, a Responses
//! reasoning item) nests at most `ai_core::MAX_JSON_DEPTH` levels: a deeper one fails the decode,
//! naming what it was and the limit, never quoting it, on both wires, streamed and whole. Kept,
//! it would sit in the thread's state some levels further in, past what a store reads back.

use ai_core::{LlmCompletion, MAX_JSON_DEPTH};
use serde_json::{Value, json};
use wire_openai::{DecodeError, Limits, chat, responses};

/// Marks the deepest level, so a test can tell the value was never quoted.
const SECRET: &str = "sk-deep-secret";

/// The fixture `fixtures/wire/<relative>`.
fn fixture(relative: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../../fixtures/wire/{relative}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// A value nesting arrays `levels` deep (`levels` ≥ 1), [`SECRET`] at the bottom.
fn nested(levels: usize) -> Value {
    (1..levels).fold(json!([SECRET]), |inner, _| json!([inner]))
}

/// The recorded stream `relative` with `edit` applied to the payload of each event it matches
/// (`select`), the rest byte-exact.
fn spliced(relative: &str, select: impl Fn(&Value) -> bool, edit: impl Fn(&mut Value)) -> Vec<u8> {
    let text = String::from_utf8(fixture(relative)).unwrap();
    let mut edited = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|line| match line.strip_prefix("data: ") {
            Some(data) if serde_json::from_str(data).is_ok_and(|event: Value| select(&event)) => {
                let mut event: Value = serde_json::from_str(data).unwrap();
                edit(&mut event);
                edited += 1;
                format!("data: {}", serde_json::to_string(&event).unwrap())
            }
            _ => line.to_owned(),
        })
        .collect();
    assert!(edited > 0, "{relative}: no event matched");
    (lines.join("\n") + "\n").into_bytes()
}

/// Decodes `stream` fed `read` bytes at a time.
fn decode_stream(stream: &[u8], read: usize) -> Result<LlmCompletion, DecodeError> {
    let mut decoder = responses::StreamDecoder::default();
    for piece in stream.chunks(read) {
        decoder.feed(piece)?;
    }
    decoder.finish()
}

/// Decodes a chat `stream` fed `read` bytes at a time.
fn decode_chat_stream(stream: &[u8], read: usize) -> Result<LlmCompletion, DecodeError> {
    let mut decoder = chat::StreamDecoder::default();
    for piece in stream.chunks(read) {
        decoder.feed(piece)?;
    }
    decoder.finish()
}

/// The recorded whole answer `relative`'s body with `edit` applied.
fn whole_body(relative: &str, edit: impl Fn(&mut Value)) -> Vec<u8> {
    let mut recorded: Value = serde_json::from_slice(&fixture(relative)).unwrap();
    edit(&mut recorded["body"]);
    serde_json::to_vec(&recorded["body"]).unwrap()
}

/// Asserts `error` says `what` nests past the limit, and quotes nothing of the value.
fn assert_too_deep(error: &DecodeError, what: &str) {
    let text = error.to_string();
    assert!(
        text.contains(what) && text.contains(&format!("more than {MAX_JSON_DEPTH} levels")),
        "{text}"
    );
    assert!(!text.contains(SECRET) && !text.contains("[["), "{text}");
}

/// The recorded reasoning stream, its reasoning item given a field nesting `levels` deep (the
/// item itself one level more).
fn reasoning_stream(levels: usize) -> Vec<u8> {
    spliced(
        "openai-responses/reasoning-then-call.sse",
        |event| {
            event["type"] == "response.output_item.done" && event["item"]["type"] == "reasoning"
        },
        |event| event["item"]["deep"] = nested(levels),
    )
}

#[test]
fn a_streamed_reasoning_item_nested_past_the_limit_fails_the_decode() {
    let at_limit = reasoning_stream(MAX_JSON_DEPTH - 1);
    let past = reasoning_stream(MAX_JSON_DEPTH);
    for read in [past.len(), 7] {
        let completion = decode_stream(&at_limit, read).unwrap();
        let kept = &completion.tool_calls[0].provider_fields[responses::REASONING_ITEMS_KEY];
        assert_eq!(kept[0]["deep"], nested(MAX_JSON_DEPTH - 1));

        let error = decode_stream(&past, read).unwrap_err();
        assert!(
            matches!(error, DecodeError::InvalidChunk { .. }),
            "{error:?}"
        );
        assert_too_deep(&error, "a reasoning item");
    }
}

#[test]
fn a_deep_reasoning_item_that_is_not_kept_fails_nothing() {
    // Without `encrypted_content` it is never kept, so its depth does not matter.
    let stream = spliced(
        "openai-responses/reasoning-then-call.sse",
        |event| {
            event["type"] == "response.output_item.done" && event["item"]["type"] == "reasoning"
        },
        |event| {
            let item = event["item"].as_object_mut().unwrap();
            item.remove("encrypted_content");
            item.insert("deep".into(), nested(MAX_JSON_DEPTH + 10));
        },
    );
    let completion = decode_stream(&stream, stream.len()).unwrap();
    assert!(completion.tool_calls[0].provider_fields.is_empty());
}

#[test]
fn a_whole_response_s_reasoning_item_nested_past_the_limit_fails_the_decode() {
    let body = |levels: usize| {
        whole_body("openai-responses-whole/reasoning-then-call.json", |body| {
            body["output"][0]["deep"] = nested(levels);
        })
    };
    let answer = responses::decode_response(&body(MAX_JSON_DEPTH - 1), Limits::default()).unwrap();
    let call = &answer.completion.tool_calls[0];
    assert_eq!(
        call.provider_fields[responses::REASONING_ITEMS_KEY][0]["deep"],
        nested(MAX_JSON_DEPTH - 1)
    );

    let error = responses::decode_response(&body(MAX_JSON_DEPTH), Limits::default()).unwrap_err();
    assert!(
        matches!(error, DecodeError::InvalidBody { .. }),
        "{error:?}"
    );
    assert_too_deep(&error, "a reasoning item");
}

/// The recorded Gemini stream, its call's `extra_content` given a field nesting `levels` deep.
fn extra_content_stream(levels: usize) -> Vec<u8> {
    spliced(
        "openai-chat/thought-signature.sse",
        |event| event["choices"][0]["delta"]["tool_calls"][0]["extra_content"].is_object(),
        |event| {
            event["choices"][0]["delta"]["tool_calls"][0]["extra_content"]["deep"] = nested(levels);
        },
    )
}

#[test]
fn a_streamed_chat_extra_content_nested_past_the_limit_fails_the_decode() {
    let at_limit = extra_content_stream(MAX_JSON_DEPTH - 1);
    let past = extra_content_stream(MAX_JSON_DEPTH);
    for read in [past.len(), 7] {
        let completion = decode_chat_stream(&at_limit, read).unwrap();
        let extra = &completion.tool_calls[0].provider_fields["extra_content"];
        assert_eq!(extra["deep"], nested(MAX_JSON_DEPTH - 1));

        let error = decode_chat_stream(&past, read).unwrap_err();
        assert!(
            matches!(error, DecodeError::InvalidToolCall { index: 0, .. }),
            "{error:?}"
        );
        assert_too_deep(&error, "`extra_content`");
    }
}

#[test]
fn a_whole_chat_answer_s_extra_content_nested_past_the_limit_fails_the_decode() {
    let body = |levels: usize| {
        whole_body(
            "openai-chat-whole/missing-ids-and-extra-content.json",
            |body| {
                body["choices"][0]["message"]["tool_calls"][0]["extra_content"]["deep"] =
                    nested(levels);
            },
        )
    };
    let answer = chat::decode_completion(&body(MAX_JSON_DEPTH - 1), Limits::default()).unwrap();
    let extra = &answer.completion.tool_calls[0].provider_fields["extra_content"];
    assert_eq!(extra["deep"], nested(MAX_JSON_DEPTH - 1));

    let error = chat::decode_completion(&body(MAX_JSON_DEPTH), Limits::default()).unwrap_err();
    assert!(
        matches!(error, DecodeError::InvalidToolCall { index: 0, .. }),
        "{error:?}"
    );
    assert_too_deep(&error, "`extra_content`");
}

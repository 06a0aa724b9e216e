//! Encoders: exact key sets (not key order), strict only where it applies, history checked.

use std::collections::BTreeSet;

use ai_core::{
    AssistantToolCall, LlmCaller, LlmRequest, Message, Redaction, RunId, ToolCallId, ToolChoice,
    ToolEffect, ToolId, ToolSpec,
};
use serde_json::{Map, Value, json};
use wire_openai::{Delivery, chat, responses};

fn keys(value: &Value) -> BTreeSet<&str> {
    value
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

fn check_keys(value: &Value, expected: &[&str]) {
    assert_eq!(keys(value), expected.iter().copied().collect(), "{value}");
}

fn spec(id: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        id: ToolId::parse(id).unwrap(),
        description: format!("{id} does things"),
        input_schema: schema,
        effect: ToolEffect::ReadOnly,
        redaction: Redaction {
            allow: vec!["x".into()],
        },
    }
}

fn specs() -> Vec<ToolSpec> {
    vec![
        spec(
            "core__get_weather",
            json!({"type": "object", "properties": {
                "city": {"type": "string"},
                "days": {"type": ["integer", "null"], "format": "uint32", "minimum": 0, "default": null}
            }, "required": ["city"], "additionalProperties": false}),
        ),
        spec(
            "core__tag",
            json!({"type": "object", "properties": {"tags": {"type": "object", "additionalProperties": {"type": "string"}}}, "required": ["tags"]}),
        ),
    ]
}

fn history() -> Vec<Message> {
    let id = ToolCallId::new("call_1").unwrap();
    let mut provider_fields = Map::new();
    provider_fields.insert(
        "extra_content".into(),
        json!({"google": {"thought_signature": "c2ln"}}),
    );
    vec![
        Message::System {
            content: "Be brief.".into(),
        },
        Message::User {
            content: "Weather in Paris?".into(),
        },
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![AssistantToolCall {
                id: id.clone(),
                name: "core__get_weather".into(),
                arguments: r#"{"city":"Paris"}"#.into(),
                provider_fields,
            }],
        },
        Message::Tool {
            tool_call_id: id,
            content: r#"{"temp":21}"#.into(),
        },
        Message::Assistant {
            content: "It is 21 °C.".into(),
            tool_calls: vec![],
        },
    ]
}

fn request(choice: ToolChoice) -> LlmRequest {
    LlmRequest {
        caller: LlmCaller {
            run_id: RunId::new("run-1").unwrap(),
            graph: None,
        },
        messages: history(),
        tools: specs(),
        tool_choice: choice,
        parallel_tool_calls: Some(false),
    }
}

#[test]
fn chat_tools_have_exact_keys_and_strict_only_where_it_applies() {
    let tools = chat::encode_tools(&specs());
    let [strict, open] = tools.as_array().unwrap().as_slice() else {
        panic!("two tools expected")
    };
    check_keys(strict, &["type", "function"]);
    check_keys(
        &strict["function"],
        &["name", "description", "parameters", "strict"],
    );
    assert_eq!(strict["function"]["strict"], true);
    assert_eq!(
        strict["function"]["parameters"]["required"],
        json!(["city", "days"])
    );
    check_keys(&open["function"], &["name", "description", "parameters"]);
    insta::assert_json_snapshot!(tools);
}

#[test]
fn chat_request_and_messages() {
    let body =
        chat::encode_request(&request(ToolChoice::Auto), "gpt-4.1", Delivery::Stream).unwrap();
    check_keys(
        &body,
        &[
            "model",
            "messages",
            "stream",
            "stream_options",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
        ],
    );
    let messages = body["messages"].as_array().unwrap();
    check_keys(&messages[2], &["role", "content", "tool_calls"]);
    assert_eq!(messages[2]["content"], Value::Null);
    check_keys(
        &messages[2]["tool_calls"][0],
        &["id", "type", "function", "extra_content"],
    );
    check_keys(&messages[3], &["role", "tool_call_id", "content"]);
    insta::assert_json_snapshot!(body);

    let no_tools = LlmRequest {
        tools: vec![],
        ..request(ToolChoice::Auto)
    };
    check_keys(
        &chat::encode_request(&no_tools, "m", Delivery::Whole).unwrap(),
        &["model", "messages", "stream"],
    );
}

/// `Delivery` is the request's `stream`: `Stream` asks for events (and, on chat, the usage
/// report at their end), `Whole` for one JSON body; nothing else in the body differs.
#[test]
fn delivery_says_how_the_answer_comes() {
    let request = request(ToolChoice::Auto);
    let chat_stream = chat::encode_request(&request, "m", Delivery::Stream).unwrap();
    let chat_whole = chat::encode_request(&request, "m", Delivery::Whole).unwrap();
    assert_eq!(chat_stream["stream"], true);
    assert_eq!(
        chat_stream["stream_options"],
        json!({"include_usage": true})
    );
    assert_eq!(chat_whole["stream"], false);
    let mut streamed = chat_stream.as_object().unwrap().clone();
    streamed.remove("stream_options");
    streamed.insert("stream".into(), false.into());
    assert_eq!(Value::Object(streamed), chat_whole);

    let responses_stream = responses::encode_request(&request, "m", Delivery::Stream).unwrap();
    let responses_whole = responses::encode_request(&request, "m", Delivery::Whole).unwrap();
    assert_eq!(responses_stream["stream"], true);
    assert_eq!(responses_whole["stream"], false);
    let mut streamed = responses_stream.as_object().unwrap().clone();
    streamed.insert("stream".into(), false.into());
    assert_eq!(Value::Object(streamed), responses_whole);
}

#[test]
fn tool_choice_forms() {
    let named = ToolChoice::Tool(ToolId::parse("core__get_weather").unwrap());
    let cases = [
        (ToolChoice::Auto, json!("auto"), json!("auto")),
        (ToolChoice::None, json!("none"), json!("none")),
        (ToolChoice::Required, json!("required"), json!("required")),
        (
            named,
            json!({"type": "function", "function": {"name": "core__get_weather"}}),
            json!({"type": "function", "name": "core__get_weather"}),
        ),
    ];
    for (choice, chat_form, responses_form) in cases {
        assert_eq!(chat::encode_tool_choice(&choice), chat_form);
        assert_eq!(responses::encode_tool_choice(&choice), responses_form);
    }
}

/// A `tool_choice` the request's tools cannot satisfy is refused on both wires, with an error
/// that names the choice (and the missing tool, the caller's own name): `required` or a named
/// tool with no tools would otherwise be dropped with the tools (the caller asked for a call that
/// cannot happen), and a named tool that is not among the tools would be sent for OpenAI to
/// refuse with a 400. Choices the tools satisfy, and `auto` or `none` without tools, encode.
#[test]
fn a_tool_choice_the_tools_cannot_satisfy_is_refused() {
    let missing = ToolId::parse("core__missing").unwrap();
    let named = ToolId::parse("core__get_weather").unwrap();
    let no_tools = |choice: ToolChoice| LlmRequest {
        tools: vec![],
        ..request(choice)
    };
    let refused = [
        (
            no_tools(ToolChoice::Required),
            wire_openai::EncodeError::ToolChoiceWithoutTools,
            "tool_choice `required` asks for a tool call, but the request has no tools",
        ),
        (
            no_tools(ToolChoice::Tool(named.clone())),
            wire_openai::EncodeError::ToolChoiceUnknownTool {
                tool: named.clone(),
            },
            "tool_choice names the tool `core__get_weather`, which is not among the request's tools",
        ),
        (
            request(ToolChoice::Tool(missing.clone())),
            wire_openai::EncodeError::ToolChoiceUnknownTool { tool: missing },
            "tool_choice names the tool `core__missing`, which is not among the request's tools",
        ),
    ];
    for (request, error, message) in refused {
        for delivery in [Delivery::Stream, Delivery::Whole] {
            let chat_error = chat::encode_request(&request, "m", delivery).unwrap_err();
            let responses_error = responses::encode_request(&request, "m", delivery).unwrap_err();
            assert_eq!(chat_error, error);
            assert_eq!(responses_error, error);
            assert_eq!(chat_error.to_string(), message);
        }
    }
    for choice in [
        ToolChoice::Auto,
        ToolChoice::None,
        ToolChoice::Required,
        ToolChoice::Tool(named),
    ] {
        assert!(chat::encode_request(&request(choice.clone()), "m", Delivery::Stream).is_ok());
        assert!(responses::encode_request(&request(choice), "m", Delivery::Stream).is_ok());
    }
    for choice in [ToolChoice::Auto, ToolChoice::None] {
        assert!(chat::encode_request(&no_tools(choice.clone()), "m", Delivery::Stream).is_ok());
        assert!(responses::encode_request(&no_tools(choice), "m", Delivery::Stream).is_ok());
    }
}

/// Two tools under one id are refused on both wires, naming the id (the caller's own), never
/// sent: a call naming it could not say which tool it means, and servers behind
/// OpenAI-compatible gateways refuse the request ("tools: Tool names must be unique",
/// tailcallhq/forgecode#892, odysseus-dev/odysseus#6010) only after a round trip.
#[test]
fn a_request_with_two_tools_under_one_id_is_refused() {
    let mut request = request(ToolChoice::Auto);
    let again = spec(
        "core__get_weather",
        json!({"type": "object", "properties": {}}),
    );
    request.tools.push(again);
    let error = wire_openai::EncodeError::DuplicateTool {
        tool: ToolId::parse("core__get_weather").unwrap(),
    };
    for delivery in [Delivery::Stream, Delivery::Whole] {
        assert_eq!(
            chat::encode_request(&request, "m", delivery).unwrap_err(),
            error
        );
        assert_eq!(
            responses::encode_request(&request, "m", delivery).unwrap_err(),
            error
        );
    }
    assert_eq!(
        error.to_string(),
        "the request offers the tool `core__get_weather` more than once"
    );
}

/// A request without messages, or naming no model, is refused on both wires with an error naming
/// what is missing, never sent for OpenAI to refuse with a 400 after a round trip.
#[test]
fn a_request_without_messages_or_a_model_is_refused() {
    use wire_openai::EncodeError;
    let no_messages = LlmRequest {
        messages: vec![],
        ..request(ToolChoice::Auto)
    };
    let cases = [
        (
            &no_messages,
            "gpt-4.1",
            EncodeError::NoMessages,
            "the request has no messages",
        ),
        (
            &request(ToolChoice::Auto),
            "",
            EncodeError::EmptyModel,
            "the request's model name is empty",
        ),
        (
            &request(ToolChoice::Auto),
            " \t\n",
            EncodeError::EmptyModel,
            "the request's model name is empty",
        ),
        // Both missing: the model is named first.
        (
            &no_messages,
            "",
            EncodeError::EmptyModel,
            "the request's model name is empty",
        ),
    ];
    for (request, model, error, message) in cases {
        for delivery in [Delivery::Stream, Delivery::Whole] {
            let chat_error = chat::encode_request(request, model, delivery).unwrap_err();
            let responses_error = responses::encode_request(request, model, delivery).unwrap_err();
            let with_options = responses::encode_request_with(
                request,
                model,
                delivery,
                responses::RequestOptions::default(),
            )
            .unwrap_err();
            assert_eq!(chat_error, error, "{model:?}");
            assert_eq!(responses_error, error, "{model:?}");
            assert_eq!(with_options, error, "{model:?}");
            assert_eq!(chat_error.to_string(), message);
        }
    }
    // One message and a model are enough.
    let one_message = LlmRequest {
        messages: vec![Message::User {
            content: "hi".into(),
        }],
        tools: vec![],
        ..request(ToolChoice::Auto)
    };
    let chat_body = chat::encode_request(&one_message, "gpt-4.1", Delivery::Stream).unwrap();
    assert_eq!(chat_body["model"], "gpt-4.1");
    let responses_body =
        responses::encode_request(&one_message, "gpt-4.1", Delivery::Stream).unwrap();
    assert_eq!(responses_body["model"], "gpt-4.1");
}

#[test]
fn responses_request() {
    let tools = responses::encode_tools(&specs());
    for tool in tools.as_array().unwrap() {
        check_keys(
            tool,
            &["type", "name", "description", "parameters", "strict"],
        );
    }
    assert_eq!(tools[0]["strict"], true);
    assert_eq!(tools[1]["strict"], false);
    let body =
        responses::encode_request(&request(ToolChoice::Required), "gpt-4.1", Delivery::Stream)
            .unwrap();
    check_keys(
        &body,
        &[
            "model",
            "input",
            "stream",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
        ],
    );
    let input = body["input"].as_array().unwrap();
    check_keys(&input[2], &["type", "call_id", "name", "arguments"]);
    check_keys(&input[3], &["type", "call_id", "output"]);
    insta::assert_json_snapshot!(body);
}

#[test]
fn an_invalid_history_is_refused_never_patched() {
    let mut messages = history();
    messages.remove(3); // The tool result.
    let cases = [
        chat::encode_messages(&messages).unwrap_err().to_string(),
        responses::encode_input(&messages).unwrap_err().to_string(),
    ];
    for err in cases {
        assert_eq!(
            err,
            "invalid history: message 2: tool call call_1 is never answered"
        );
    }
}

/// A past call without a name (a server that never sent `function.name`, in a history a caller
/// built without the loop, which records such a call under `_`) is refused by both encoders,
/// naming the message and the call, never sent as `"name": ""`, which providers refuse
/// (`^[a-zA-Z0-9_-]{1,64}$`) with the whole request.
#[test]
fn a_past_call_without_a_name_is_refused_never_sent_empty() {
    let mut messages = history();
    let Message::Assistant { tool_calls, .. } = &mut messages[2] else {
        unreachable!()
    };
    tool_calls[0].name = String::new();
    let cases = [
        chat::encode_messages(&messages).unwrap_err(),
        responses::encode_input(&messages).unwrap_err(),
    ];
    for err in cases {
        assert!(
            matches!(
                err,
                wire_openai::EncodeError::EmptyToolName { index: 2, call: 0 }
            ),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "message 2: tool call 0 has no name");
    }
    let mut request = request(ToolChoice::Auto);
    request.messages = messages;
    assert!(chat::encode_request(&request, "m", Delivery::Stream).is_err());
    assert!(responses::encode_request(&request, "m", Delivery::Stream).is_err());
}

/// A past call whose name providers refuse (outside `^[a-zA-Z0-9_-]{1,64}$`: whitespace only, a
/// dot, a space, a letter outside ASCII, over 64 characters), in a history a caller built without
/// the loop (which records such a name healed), is refused by both encoders, naming the message
/// and the call but never the name, rather than sent for the provider to refuse the whole
/// request. A name at the limits is sent.
#[test]
fn a_past_call_with_a_name_providers_refuse_is_refused_never_sent() {
    let over = "a".repeat(65);
    for name in [
        " ",
        "\t",
        "multi_tool_use.parallel",
        "core__x y",
        "core__é",
        over.as_str(),
    ] {
        let mut messages = history();
        let Message::Assistant { tool_calls, .. } = &mut messages[2] else {
            unreachable!()
        };
        tool_calls[0].name = name.to_owned();
        let cases = [
            chat::encode_messages(&messages).unwrap_err(),
            responses::encode_input(&messages).unwrap_err(),
        ];
        for err in cases {
            assert!(
                matches!(
                    err,
                    wire_openai::EncodeError::InvalidToolName { index: 2, call: 0 }
                ),
                "{name:?}: {err:?}"
            );
            assert_eq!(
                err.to_string(),
                "message 2: tool call 0 has a name providers refuse (not 1 to 64 letters, \
                 digits, `_` or `-`)"
            );
        }
        let mut request = request(ToolChoice::Auto);
        request.messages = messages;
        assert!(chat::encode_request(&request, "m", Delivery::Stream).is_err());
        assert!(responses::encode_request(&request, "m", Delivery::Stream).is_err());
    }
    for name in ["_", "a-Z_09", &"a".repeat(64)] {
        let mut messages = history();
        let Message::Assistant { tool_calls, .. } = &mut messages[2] else {
            unreachable!()
        };
        tool_calls[0].name = name.to_owned();
        assert!(chat::encode_messages(&messages).is_ok(), "{name:?}");
        assert!(responses::encode_input(&messages).is_ok(), "{name:?}");
    }
}

/// One encoder case from `fixtures/wire/encode/*.json`.
#[derive(serde::Deserialize)]
struct EncodeCase {
    /// Where the expected shape comes from; read by people, not by the test.
    #[allow(dead_code)]
    about: String,
    model: String,
    stream: bool,
    request: LlmRequest,
}

/// The exact key set every chat object must have, derived from the request (not from the
/// output), so a missing or extra key fails even before the snapshot is compared.
fn check_chat_keys(request: &LlmRequest, stream: bool, body: &Value) {
    let mut expected = vec!["model", "messages", "stream"];
    if stream {
        expected.push("stream_options");
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
    }
    if !request.tools.is_empty() {
        expected.extend(["tools", "tool_choice"]);
        let any_strict = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|tool| tool["function"]["strict"] == true);
        expect_parallel(request, any_strict, body, &mut expected);
    }
    check_keys(body, &expected);
    for tool in body["tools"].as_array().into_iter().flatten() {
        check_keys(tool, &["type", "function"]);
        assert_eq!(tool["type"], "function");
        let function = &tool["function"];
        if function.get("strict").is_some() {
            assert_eq!(function["strict"], true, "strict is sent only as true");
            check_keys(function, &["name", "description", "parameters", "strict"]);
            check_strict_schema(&function["parameters"]);
        } else {
            check_keys(function, &["name", "description", "parameters"]);
        }
    }
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), request.messages.len());
    for (wire, message) in messages.iter().zip(&request.messages) {
        match message {
            Message::System { .. } | Message::User { .. } => {
                check_keys(wire, &["role", "content"]);
            }
            Message::Assistant { tool_calls, .. } if tool_calls.is_empty() => {
                check_keys(wire, &["role", "content"]);
            }
            Message::Assistant { tool_calls, .. } => {
                check_keys(wire, &["role", "content", "tool_calls"]);
                for (wire_call, call) in wire["tool_calls"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .zip(tool_calls)
                {
                    let mut expected = vec!["id", "type", "function"];
                    expected.extend(call.provider_fields.keys().map(String::as_str));
                    check_keys(wire_call, &expected);
                    check_keys(&wire_call["function"], &["name", "arguments"]);
                    assert!(wire_call["function"]["arguments"].is_string());
                }
            }
            Message::Tool { .. } => check_keys(wire, &["role", "tool_call_id", "content"]),
        }
    }
}

/// `parallel_tool_calls` is sent when the request sets it, and as `false` when it does not and a
/// tool is strict ("Structured Outputs is not compatible with parallel function calls").
fn expect_parallel(
    request: &LlmRequest,
    any_strict: bool,
    body: &Value,
    expected: &mut Vec<&'static str>,
) {
    match request.parallel_tool_calls {
        Some(parallel) => assert_eq!(body["parallel_tool_calls"], parallel),
        None if any_strict => assert_eq!(body["parallel_tool_calls"], false),
        None => return,
    }
    expected.push("parallel_tool_calls");
}

/// The same for a Responses body.
fn check_responses_keys(request: &LlmRequest, body: &Value) {
    let mut expected = vec!["model", "input", "stream"];
    if !request.tools.is_empty() {
        expected.extend(["tools", "tool_choice"]);
        let any_strict = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|tool| tool["strict"] == true);
        expect_parallel(request, any_strict, body, &mut expected);
    }
    check_keys(body, &expected);
    for tool in body["tools"].as_array().into_iter().flatten() {
        check_keys(
            tool,
            &["type", "name", "description", "parameters", "strict"],
        );
        if tool["strict"] == true {
            check_strict_schema(&tool["parameters"]);
        } else {
            assert_eq!(tool["strict"], false, "strict is always sent explicitly");
        }
    }
    for item in body["input"].as_array().unwrap() {
        match item["type"].as_str() {
            Some("message") => check_keys(item, &["type", "role", "content"]),
            Some("function_call") => {
                check_keys(item, &["type", "call_id", "name", "arguments"]);
            }
            Some("function_call_output") => check_keys(item, &["type", "call_id", "output"]),
            other => panic!("unexpected input item type {other:?}"),
        }
    }
}

/// Strict mode's rules, checked on the output: every object closed and fully required, no
/// forbidden keyword anywhere.
fn check_strict_schema(schema: &Value) {
    match schema {
        Value::Object(map) => {
            for forbidden in ["allOf", "not", "if", "then", "else", "default", "$schema"] {
                assert!(!map.contains_key(forbidden), "{forbidden} in {schema}");
            }
            // "$ref cannot have keywords": a reference stands alone.
            if map.contains_key("$ref") {
                assert_eq!(map.len(), 1, "$ref with siblings in {schema}");
            }
            if map.get("type") == Some(&json!("object")) || map.contains_key("properties") {
                assert_eq!(
                    map.get("additionalProperties"),
                    Some(&json!(false)),
                    "{schema}"
                );
                let properties: BTreeSet<&str> = map["properties"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .map(String::as_str)
                    .collect();
                let required: BTreeSet<&str> = map["required"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                assert_eq!(properties, required, "{schema}");
            }
            map.values().for_each(check_strict_schema);
        }
        Value::Array(items) => items.iter().for_each(check_strict_schema),
        _ => {}
    }
}

/// Every encoder case: both wires' request bodies (or the refusal), key sets checked against
/// the request, then snapshotted.
#[test]
fn encode_fixtures() {
    insta::glob!("../../../../fixtures", "wire/encode/*.json", |path| {
        let case: EncodeCase = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let delivery = if case.stream {
            Delivery::Stream
        } else {
            Delivery::Whole
        };
        let chat_body = chat::encode_request(&case.request, &case.model, delivery);
        let responses_body = responses::encode_request(&case.request, &case.model, delivery);
        let outcome = match (chat_body, responses_body) {
            (Ok(chat_body), Ok(responses_body)) => {
                check_chat_keys(&case.request, case.stream, &chat_body);
                check_responses_keys(&case.request, &responses_body);
                json!({"chat": chat_body, "responses": responses_body})
            }
            (Err(chat_err), Err(responses_err)) => {
                json!({"chat_error": chat_err.to_string(), "responses_error": responses_err.to_string()})
            }
            (chat_body, responses_body) => {
                panic!("the wires disagree: {chat_body:?} / {responses_body:?}")
            }
        };
        insta::assert_json_snapshot!(outcome);
    });
}

#[test]
fn strict_inlining_stays_bounded_for_shared_described_refs() {
    // Each definition holds two described references to the next one in a nested `$defs` (a
    // non-object node, so no depth limit applies); the schema passes validate_tool_schema_p0.
    // Inlining every described `$ref` doubles the output per level: 1.6 KB in, 1.1 MB out at
    // 12 levels, 17.7 MB and ~9 s at 16.
    let levels = 12;
    let mut defs = serde_json::Map::new();
    for i in 0..levels {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(
            format!("d{i}"),
            json!({"type": "string", "$defs": {
                "a": {"$ref": next, "description": "a"},
                "b": {"$ref": next, "description": "b"}
            }}),
        );
    }
    defs.insert(format!("d{levels}"), json!({"type": "string"}));
    let schema = json!({"type": "object",
        "properties": {"p": {"$ref": "#/$defs/d0", "description": "p"}},
        "required": ["p"],
        "$defs": defs});
    assert!(ai_core::validate_tool_schema_p0(&schema).is_ok());
    let input = schema.to_string().len();
    let tools = chat::encode_tools(&[spec("core__blowup", schema)]);
    let output = tools.to_string().len();
    assert!(
        output < 20 * input,
        "a {input}-byte schema became a {output}-byte tool definition"
    );
}

/// The Responses API refuses a `call_id` over 64 characters ("Invalid 'input[].call_id': string
/// too long. Expected max length 64", decolua/9router#393, diegosouzapw/OmniRoute#4317), and a
/// `ToolCallId` may hold 128 (another provider's id, or an imported history's). Such an id is
/// sent as a short one derived from it, the same on the call and on its result, different for
/// ids that share a prefix, never one the history already uses, and the same on every request
/// (so a cached prefix stays the same). An id that fits is sent as is.
#[test]
fn responses_call_ids_over_64_characters_are_sent_short_and_paired() {
    let long = |tail: &str| ToolCallId::new(format!("{}{tail}", "x".repeat(90))).unwrap();
    let ids = [long("a"), long("b"), ToolCallId::new("call_1").unwrap()];
    let mut messages = vec![Message::User {
        content: "Go.".into(),
    }];
    messages.push(Message::Assistant {
        content: String::new(),
        tool_calls: ids
            .iter()
            .map(|id| AssistantToolCall {
                id: id.clone(),
                name: "core__tag".into(),
                arguments: "{}".into(),
                provider_fields: Map::new(),
            })
            .collect(),
    });
    for id in &ids {
        messages.push(Message::Tool {
            tool_call_id: id.clone(),
            content: "ok".into(),
        });
    }
    let input = responses::encode_input(&messages).unwrap();
    let sent = |kind: &str| -> Vec<String> {
        input
            .as_array()
            .unwrap()
            .iter()
            .filter(|item| item["type"] == kind)
            .map(|item| item["call_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (calls, results) = (sent("function_call"), sent("function_call_output"));
    assert_eq!(calls, results, "each result quotes its call's id");
    assert!(calls.iter().all(|id| id.len() <= 64), "{calls:?}");
    assert_ne!(calls[0], calls[1], "ids that share a prefix stay apart");
    assert_eq!(calls[2], "call_1", "an id that fits is sent as is");
    assert_eq!(responses::encode_input(&messages).unwrap(), input);
    // A history that already uses the short form of a long id keeps both apart.
    let mut clash = messages.clone();
    let taken = ToolCallId::new(calls[0].clone()).unwrap();
    if let Message::Assistant { tool_calls, .. } = &mut clash[1] {
        tool_calls[2].id = taken.clone();
    }
    clash[4] = Message::Tool {
        tool_call_id: taken,
        content: "ok".into(),
    };
    let input = responses::encode_input(&clash).unwrap();
    let ids: BTreeSet<&str> = input
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call")
        .map(|item| item["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.iter().all(|id| id.len() <= 64), "{ids:?}");
}

/// A history in which one assistant turn calls `core__tag` under each of `ids`, each call
/// answered by a result quoting its id.
fn history_calling(ids: &[ToolCallId]) -> Vec<Message> {
    let mut messages = vec![Message::User {
        content: "Go.".into(),
    }];
    messages.push(Message::Assistant {
        content: String::new(),
        tool_calls: ids
            .iter()
            .map(|id| AssistantToolCall {
                id: id.clone(),
                name: "core__tag".into(),
                arguments: "{}".into(),
                provider_fields: Map::new(),
            })
            .collect(),
    });
    for id in ids {
        messages.push(Message::Tool {
            tool_call_id: id.clone(),
            content: "ok".into(),
        });
    }
    messages
}

/// The ids a chat `messages` array sends its calls under, and those its results quote.
fn chat_call_ids(messages: &Value) -> (Vec<String>, Vec<String>) {
    let messages = messages.as_array().unwrap();
    let calls = messages
        .iter()
        .filter_map(|message| message["tool_calls"].as_array())
        .flatten()
        .map(|call| call["id"].as_str().unwrap().to_owned())
        .collect();
    let results = messages
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| message["tool_call_id"].as_str().unwrap().to_owned())
        .collect();
    (calls, results)
}

/// OpenAI chat (and Azure OpenAI) refuse a `tool_calls[].id` over 40 characters ("Invalid
/// 'messages[2].tool_calls[0].id': string too long. Expected a string with maximum length 40":
/// BerriAI/litellm#11392, Portkey-AI/gateway#1062, microsoft/autogen#6377; Azure still in
/// Helicone/helicone#5575), and a `ToolCallId` may hold 128 (another provider's id, an imported
/// history's). Such an id is sent as a short one derived from it, the same on the call and on
/// its result, different for ids that share a prefix, never one the history already uses, and
/// the same on every request. An id that fits, 40 characters included, is sent as is.
#[test]
fn chat_call_ids_over_40_characters_are_sent_short_and_paired() {
    let long = |tail: &str| ToolCallId::new(format!("{}{tail}", "x".repeat(40))).unwrap();
    let fits = ToolCallId::new("y".repeat(40)).unwrap();
    let ids = [
        long("a"),
        long("b"),
        ToolCallId::new("call_1").unwrap(),
        fits.clone(),
    ];
    let messages = history_calling(&ids);
    let encoded = chat::encode_messages(&messages).unwrap();
    let (calls, results) = chat_call_ids(&encoded);
    assert_eq!(calls, results, "each result quotes its call's id");
    assert!(calls.iter().all(|id| id.len() <= 40), "{calls:?}");
    assert_ne!(calls[0], calls[1], "ids that share a prefix stay apart");
    assert_eq!(calls[2], "call_1", "an id that fits is sent as is");
    assert_eq!(calls[3], fits.as_str(), "an id of 40 characters fits");
    assert_eq!(chat::encode_messages(&messages).unwrap(), encoded);
    // A history that already uses the short form of a long id keeps both apart.
    let mut clash = ids.clone();
    clash[2] = ToolCallId::new(calls[0].clone()).unwrap();
    let (calls, results) = chat_call_ids(&chat::encode_messages(&history_calling(&clash)).unwrap());
    assert_eq!(calls, results);
    assert_eq!(calls.iter().collect::<BTreeSet<_>>().len(), 4, "{calls:?}");
    assert!(calls.iter().all(|id| id.len() <= 40), "{calls:?}");
}

/// A past call whose arguments are not a JSON object (a model's truncated or malformed text, an
/// empty string, a list) is sent back with `{}`: vLLM parses every past call's arguments and
/// answers such a history with a 400 (vllm-project/vllm#43995, on chat and Responses alike), so
/// one bad call would block every later turn of the thread. Its result already told the model
/// the arguments were invalid. Arguments that are a JSON object go byte-exact, whitespace and
/// key order included.
#[test]
fn past_arguments_that_are_no_json_object_are_sent_as_an_empty_object() {
    let cases = [
        (r#"{"city": "Par"#, "{}"),
        ("", "{}"),
        ("  ", "{}"),
        ("[1, 2]", "{}"),
        (r#""Paris""#, "{}"),
        (r#"{"a":1} {"b":2}"#, "{}"),
        (
            r#" { "z" : 1, "a" : [true] } "#,
            r#" { "z" : 1, "a" : [true] } "#,
        ),
        (r#"{"city":"Paris"}"#, r#"{"city":"Paris"}"#),
    ];
    assert_past_arguments_sent_as(&cases);
}

/// A past call's arguments nested deeper than serde_json reads (128 levels) count as no JSON
/// and are sent back as `{}`, as `history::sent_arguments` says: the runner refused them (too
/// deep), and a server that parses past calls' arguments with a depth limit of its own
/// (serde_json's, in Rust servers) would refuse every later request of the thread. The decoders
/// now hand over an arguments object that deep as sent, so the history can hold one. So do
/// arguments holding a number out of f64's range or a lone surrogate escape, valid JSON that
/// serde_json cannot read either. Arguments that serde_json reads whole still go byte-exact,
/// however deep.
#[test]
fn past_arguments_nested_past_what_serde_json_reads_are_sent_as_an_empty_object() {
    let nested = |depth: usize| format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    let (shallow, deep) = (nested(100), nested(200));
    let cases = [
        (deep.as_str(), "{}"),
        (shallow.as_str(), shallow.as_str()),
        // Valid JSON serde_json cannot read, which the decoders also keep as sent.
        (r#"{"n":1e400}"#, "{}"),
        (r#"{"list":[1,{"n":-1.5E+999}]}"#, "{}"),
        (r#"{"s":"\ud800"}"#, "{}"),
        (r#"{"s":"a\udc00b"}"#, "{}"),
        (r#"{"\ud800":1}"#, "{}"),
        (
            r#"{"ok":"\ud83d\ude00","n":1e308}"#,
            r#"{"ok":"\ud83d\ude00","n":1e308}"#,
        ),
    ];
    assert_past_arguments_sent_as(&cases);
}

/// Mistral refuses a history whose call ids are not nine letters and digits
/// (`^[a-zA-Z0-9]{9}$`), and so do its open models' chat templates. With
/// `mistral_call_ids`, every other id (the graph's renamed `{id}_2`, an id over 40 bytes, any
/// other provider's) is sent as nine letters and digits derived from it: the same on the call
/// and its result, the same on every request, distinct from every other id sent. An id that
/// already fits is sent as is; without the option every id is sent as before. The Responses
/// encoder's option sends the same ids (mistral.rs serves that API too).
#[test]
fn mistral_call_ids_are_nine_letters_and_digits_on_call_and_result() {
    let long = format!("call_{}", "x".repeat(60));
    let ids = ["abcDEF123", "call_1", "call_1_2", long.as_str(), "0"];
    let ids: Vec<ToolCallId> = ids.iter().map(|id| ToolCallId::new(*id).unwrap()).collect();
    let mut messages = vec![Message::User {
        content: "Tag them.".into(),
    }];
    messages.push(Message::Assistant {
        content: String::new(),
        tool_calls: ids
            .iter()
            .map(|id| AssistantToolCall {
                id: id.clone(),
                name: "core__tag".into(),
                arguments: "{}".into(),
                provider_fields: Map::new(),
            })
            .collect(),
    });
    for id in &ids {
        messages.push(Message::Tool {
            tool_call_id: id.clone(),
            content: "ok".into(),
        });
    }
    let request = LlmRequest {
        caller: LlmCaller {
            run_id: RunId::new("run-1").unwrap(),
            graph: None,
        },
        messages,
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: None,
    };
    let options = chat::RequestOptions::default().with_mistral_call_ids(true);
    let body =
        chat::encode_request_with(&request, "mistral-large-latest", Delivery::Stream, options)
            .unwrap();
    let sent = |body: &Value| -> (Vec<String>, Vec<String>) {
        let messages = body["messages"].as_array().unwrap();
        let calls = messages[1]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|call| call["id"].as_str().unwrap().to_owned())
            .collect();
        let results = messages[2..]
            .iter()
            .map(|result| result["tool_call_id"].as_str().unwrap().to_owned())
            .collect();
        (calls, results)
    };
    let (calls, results) = sent(&body);
    assert_eq!(calls, results);
    assert_eq!(calls[0], "abcDEF123");
    for id in &calls {
        assert!(
            id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()),
            "{id}"
        );
    }
    assert_eq!(calls.iter().collect::<BTreeSet<_>>().len(), calls.len());
    // The same on every request of the thread.
    let again =
        chat::encode_request_with(&request, "mistral-large-latest", Delivery::Stream, options)
            .unwrap();
    assert_eq!(sent(&again), (calls.clone(), results));
    // Without the option, ids go as before: byte-exact, but for the one over 40 bytes.
    let plain = chat::encode_request(&request, "gpt-4o", Delivery::Stream).unwrap();
    let (calls, _) = sent(&plain);
    assert_eq!(&calls[..3], ["abcDEF123", "call_1", "call_1_2"]);
    assert!(
        calls[3].starts_with("call_") && calls[3].len() == 21,
        "{}",
        calls[3]
    );
    assert_eq!(
        chat::encode_request_with(&request, "gpt-4o", Delivery::Stream, Default::default())
            .unwrap(),
        plain
    );

    // The Responses encoder takes the same option, with the same rule: the same ids.
    let responses_sent = |body: &Value| -> (Vec<String>, Vec<String>) {
        let of = |kind: &str| -> Vec<String> {
            body["input"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|item| item["type"] == kind)
                .map(|item| item["call_id"].as_str().unwrap().to_owned())
                .collect()
        };
        (of("function_call"), of("function_call_output"))
    };
    let options = responses::RequestOptions::default().with_mistral_call_ids(true);
    let body = responses::encode_request_with(&request, "mistral-small", Delivery::Stream, options)
        .unwrap();
    let (calls, results) = sent(&again);
    assert_eq!(responses_sent(&body), (calls, results));
    let plain = responses::encode_request(&request, "gpt-4o", Delivery::Stream).unwrap();
    let (calls, _) = responses_sent(&plain);
    assert_eq!(&calls[..3], ["abcDEF123", "call_1", "call_1_2"]);
    assert!(
        calls[3].starts_with("call_") && calls[3].len() == 21,
        "{}",
        calls[3]
    );
}

/// Encodes a history whose past calls carry each case's arguments as sent (the first of each
/// pair), and checks both encoders send each back as the second of the pair.
fn assert_past_arguments_sent_as(cases: &[(&str, &str)]) {
    let ids: Vec<ToolCallId> = (0..cases.len())
        .map(|at| ToolCallId::new(format!("call_{at}")).unwrap())
        .collect();
    let mut messages = history_calling(&ids);
    if let Message::Assistant { tool_calls, .. } = &mut messages[1] {
        for (call, (sent, _)) in tool_calls.iter_mut().zip(cases) {
            call.arguments = (*sent).into();
        }
    }
    let expected: Vec<&str> = cases.iter().map(|(_, wire)| *wire).collect();
    let chat = chat::encode_messages(&messages).unwrap();
    let chat_arguments: Vec<&str> = chat[1]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| call["function"]["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(chat_arguments, expected);
    let input = responses::encode_input(&messages).unwrap();
    let responses_arguments: Vec<&str> = input
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call")
        .map(|item| item["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(responses_arguments, expected);
}

/// A turn of calls whose text is only whitespace (models often write `"\n\n"` before their
/// calls) is sent as a turn without text: `content: null` on chat, no message item on Responses.
/// `validate_history` counts whitespace as no text, and providers behind OpenAI-compatible APIs
/// refuse it as text ("text content blocks must contain non-whitespace text", Claude behind
/// GitHub Copilot's API: anomalyco/opencode#31259), which would block every later turn of the
/// thread. Text around other characters is sent as it is.
#[test]
fn a_turn_of_calls_with_only_whitespace_text_is_sent_without_text() {
    let id = ToolCallId::new("call_1").unwrap();
    for (text, sent) in [
        ("\n\n", None),
        (" \t\u{3000}", None),
        ("\n\nOn it.\n", Some("\n\nOn it.\n")),
    ] {
        let mut messages = history_calling(std::slice::from_ref(&id));
        let Message::Assistant { content, .. } = &mut messages[1] else {
            unreachable!("history_calling's second message is the turn of calls");
        };
        *content = text.into();
        let chat = chat::encode_messages(&messages).unwrap();
        assert_eq!(chat[1]["content"], sent.map_or(Value::Null, Value::from));
        let input = responses::encode_input(&messages).unwrap();
        let texts: Vec<&Value> = input
            .as_array()
            .unwrap()
            .iter()
            .filter(|item| item["role"] == "assistant")
            .map(|item| &item["content"])
            .collect();
        let expected: Vec<Value> = sent.into_iter().map(Value::from).collect();
        assert_eq!(texts, expected.iter().collect::<Vec<_>>(), "{text:?}");
    }
}

//! Encoders: exact key sets (not key order), strict only where it applies, history checked.

use std::collections::BTreeSet;

use ai_core::{
    AssistantToolCall, LlmCaller, LlmRequest, Message, Redaction, RunId, ToolCallId, ToolChoice,
    ToolEffect, ToolId, ToolSpec,
};
use serde_json::{Map, Value, json};
use wire_openai::{chat, responses};

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
    let body = chat::encode_request(&request(ToolChoice::Auto), "gpt-4.1", true).unwrap();
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
        &chat::encode_request(&no_tools, "m", false).unwrap(),
        &["model", "messages", "stream"],
    );
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
    let body = responses::encode_request(&request(ToolChoice::Required), "gpt-4.1", true).unwrap();
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

//! History rules as data: each case is a compact script and the error it must give.

use super::*;

fn id(raw: &str) -> ToolCallId {
    ToolCallId::new(raw).unwrap()
}

/// `u` user, `b` user with blank text, `a:x,y` assistant calling x and y, `a` assistant text, `e`
/// assistant with empty text and no calls, `w` the same with whitespace for text, `t:x` tool answer
/// to x.
fn history(script: &str) -> Vec<Message> {
    script
        .split_whitespace()
        .map(|step| match step.split_once(':') {
            None if step == "u" => Message::User {
                content: "hi".into(),
            },
            None if step == "b" => Message::User {
                content: " \n".into(),
            },
            None if step == "s" => Message::System {
                content: "be brief".into(),
            },
            None if step == "e" || step == "w" => Message::Assistant {
                content: if step == "w" {
                    " \n\t".into()
                } else {
                    String::new()
                },
                tool_calls: vec![],
            },
            None => Message::Assistant {
                content: "ok".into(),
                tool_calls: vec![],
            },
            Some(("a", calls)) => Message::Assistant {
                content: String::new(),
                tool_calls: calls
                    .split(',')
                    .map(|c| AssistantToolCall {
                        id: id(c),
                        name: "core__x".into(),
                        arguments: "{}".into(),
                        provider_fields: Map::new(),
                    })
                    .collect(),
            },
            Some((_, answered)) => Message::Tool {
                tool_call_id: id(answered),
                content: "{}".into(),
            },
        })
        .collect()
}

fn check(script: &str, expected: Option<&str>) {
    let got = validate_history(&history(script))
        .err()
        .map(|e| e.to_string());
    assert_eq!(got.as_deref(), expected, "{script}");
}

#[test]
fn valid_histories() {
    check("", None);
    check("s u a", None);
    check("u a:1 t:1 a", None);
    check("u a:1,2 t:1 t:2 a u a:3 t:3", None);
}

#[test]
fn invalid_histories() {
    check(
        "u t:1",
        Some("message 1: tool message for 1 answers no pending tool call"),
    );
    check(
        "u a:1 t:1 t:1",
        Some("message 3: tool message for 1 answers no pending tool call"),
    );
    check(
        "u a:1,2 t:2 t:1",
        Some("message 2: expected the result of 1, found 2"),
    );
    check(
        "u a:1,2 t:1 u",
        Some("message 1: tool call 2 is never answered"),
    );
    check("u a:1", Some("message 1: tool call 1 is never answered"));
    check(
        "u a:1 t:1 u a:1 t:1",
        Some("message 4: tool call id 1 is used twice"),
    );
    check(
        "u a:1 a t:1",
        Some("message 1: tool call 1 is never answered"),
    );
}

/// An assistant message with neither text (whitespace counts as none) nor calls is refused, as
/// Anthropic refuses one (and OpenAI one with `content: null` and no calls), wherever it stands.
#[test]
fn an_assistant_message_without_content_is_refused() {
    check(
        "u e",
        Some("message 1: assistant message has neither text nor tool calls"),
    );
    check(
        "u w u a",
        Some("message 1: assistant message has neither text nor tool calls"),
    );
    check(
        "u a:1 t:1 e",
        Some("message 3: assistant message has neither text nor tool calls"),
    );
    // Empty text is fine next to calls.
    check("u a:1 t:1 a", None);
}

/// A system message without text (whitespace counts as none) is refused as an empty user
/// message is: LM Studio refuses it (400, "content field that is not empty"), and Anthropic's
/// and Bedrock's OpenAI-compatible gateways refuse the empty system text block it becomes.
#[test]
fn a_system_message_without_text_is_refused() {
    for blank in ["", " \n\t"] {
        let history = [
            Message::System {
                content: blank.into(),
            },
            Message::User {
                content: "hi".into(),
            },
        ];
        let error = validate_history(&history).unwrap_err();
        assert_eq!(error, HistoryError::EmptySystemMessage { index: 0 });
        assert_eq!(error.to_string(), "message 0: system message has no text");
    }
}

/// A user message without text (whitespace counts as none) is refused wherever it stands: there
/// is nothing in it for a model to answer, and Anthropic refuses an empty text block.
#[test]
fn a_user_message_without_text_is_refused() {
    check("b a", Some("message 0: user message has no text"));
    check("u a b", Some("message 2: user message has no text"));
    let empty = [Message::User {
        content: String::new(),
    }];
    assert_eq!(
        validate_history(&empty),
        Err(HistoryError::EmptyUserMessage { index: 0 })
    );
}

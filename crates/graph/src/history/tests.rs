//! UI histories rebuilt, or refused with the fault named.

use ai_core::{Message, ToolCallId};

use super::{HistoryItem, ReconstructError, reconstruct_history};

fn id(raw: &str) -> ToolCallId {
    ToolCallId::new(raw).unwrap()
}

fn call(raw: &str) -> HistoryItem {
    HistoryItem::ToolCall {
        id: id(raw),
        name: "core__x".into(),
        arguments: "{}".into(),
    }
}

fn result(raw: &str) -> HistoryItem {
    HistoryItem::ToolResult {
        tool_call_id: id(raw),
        content: format!("r{raw}"),
    }
}

fn text(s: &str) -> HistoryItem {
    HistoryItem::AssistantText { content: s.into() }
}

fn user() -> HistoryItem {
    HistoryItem::User {
        content: "q".into(),
    }
}

fn roles(messages: &[Message]) -> String {
    messages
        .iter()
        .map(|m| match m {
            Message::System { .. } => "s".to_owned(),
            Message::User { .. } => "u".to_owned(),
            Message::Assistant { tool_calls, .. } if tool_calls.is_empty() => "a".to_owned(),
            Message::Assistant { tool_calls, .. } => format!("A{}", tool_calls.len()),
            Message::Tool { tool_call_id, .. } => format!("t{tool_call_id}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn rebuilds_provider_order() {
    let cases: Vec<(Vec<HistoryItem>, &str)> = vec![
        (vec![user(), text("hi")], "u a"),
        // A call shown after a result was made after the model saw that result: a new step.
        (
            vec![
                user(),
                text("let me"),
                call("1"),
                result("1"),
                call("2"),
                result("2"),
                user(),
            ],
            "u A1 t1 A1 t2 u",
        ),
        // Results in a different order than calls.
        (
            vec![user(), call("1"), call("2"), result("2"), result("1")],
            "u A2 t1 t2",
        ),
        // A second step after all results: a new assistant message.
        (
            vec![
                user(),
                call("1"),
                result("1"),
                text("so"),
                call("2"),
                result("2"),
                text("done"),
            ],
            "u A1 t1 A1 t2 a",
        ),
    ];
    for (items, expected) in cases {
        assert_eq!(roles(&reconstruct_history(&items).unwrap()), expected);
    }
}

#[test]
fn faults_are_named() {
    let cases: Vec<(Vec<HistoryItem>, ReconstructError)> = vec![
        (
            vec![user(), result("9")],
            ReconstructError::Orphan {
                index: 1,
                tool_call_id: id("9"),
            },
        ),
        (
            vec![user(), call("1"), user()],
            ReconstructError::Unanswered {
                tool_call_id: id("1"),
            },
        ),
        (
            vec![user(), call("1")],
            ReconstructError::Unanswered {
                tool_call_id: id("1"),
            },
        ),
        (
            vec![user(), call("1"), result("1"), call("1")],
            ReconstructError::Duplicate {
                index: 3,
                tool_call_id: id("1"),
            },
        ),
        (
            vec![user(), call("1"), result("1"), result("1")],
            ReconstructError::Duplicate {
                index: 3,
                tool_call_id: id("1"),
            },
        ),
    ];
    for (items, expected) in cases {
        assert_eq!(reconstruct_history(&items).unwrap_err(), expected);
    }
}

/// A system message without text (empty, or whitespace only) is refused by its item, as a user
/// message is: providers refuse it.
#[test]
fn a_system_message_without_text_is_refused_by_its_item() {
    for blank in ["", " \n\t"] {
        let items = [
            HistoryItem::System {
                content: blank.into(),
            },
            user(),
        ];
        let error = reconstruct_history(&items).unwrap_err();
        assert_eq!(error, ReconstructError::EmptySystemMessage { index: 0 });
        assert_eq!(error.to_string(), "item 0: a system message holds no text");
    }
}

/// A user message without text (empty, or whitespace only) is refused by its item, never sent
/// to a model: there is nothing in it to answer.
#[test]
fn a_user_message_without_text_is_refused_by_its_item() {
    for blank in ["", " \n\t"] {
        let items = [
            user(),
            text("a"),
            HistoryItem::User {
                content: blank.into(),
            },
        ];
        let error = reconstruct_history(&items).unwrap_err();
        assert_eq!(error, ReconstructError::EmptyUserMessage { index: 2 });
        assert_eq!(error.to_string(), "item 2: a user message holds no text");
    }
}

/// Each message says where (the item, when there is one), which call, and what is wrong.
#[test]
fn messages_name_the_item_the_call_and_the_fault() {
    let cases = [
        (
            vec![user(), result("9")],
            "item 1: result for 9 answers no tool call of its turn",
        ),
        (
            vec![user(), call("1"), user()],
            "tool call 1 has no result before the next user or system message or the end of the \
             history",
        ),
        (
            vec![user(), call("1"), result("1"), result("1")],
            "item 3: tool call id 1 is used twice (by two calls or two results)",
        ),
    ];
    for (items, expected) in cases {
        assert_eq!(
            reconstruct_history(&items).unwrap_err().to_string(),
            expected
        );
    }
    let invalid = ReconstructError::from(ai_core::HistoryError::Unanswered {
        index: 2,
        tool_call_id: id("1"),
    });
    assert_eq!(
        invalid.to_string(),
        "the rebuilt provider history is invalid: message 2: tool call 1 is never answered"
    );
    // The rule broken is in the message, so not also the source: a chain shows it once.
    assert!(std::error::Error::source(&invalid).is_none());
}

/// A tool name providers refuse to read back (as a UI showed it, or a crashed run's events hold
/// it) is rebuilt in a form they accept, as the reducer records it; valid names stay as they are.
#[test]
fn tool_names_providers_refuse_are_made_acceptable() {
    let named = |raw: &str, name: &str| HistoryItem::ToolCall {
        id: id(raw),
        name: name.into(),
        arguments: "{}".into(),
    };
    let long = "x".repeat(70);
    let items = vec![
        user(),
        named("1", "multi_tool_use.parallel"),
        named("2", ""),
        named("3", &long),
        named("4", "core__wait-2"),
        result("1"),
        result("2"),
        result("3"),
        result("4"),
    ];
    let messages = reconstruct_history(&items).unwrap();
    let Message::Assistant { tool_calls, .. } = &messages[1] else {
        panic!("{messages:?}")
    };
    let names: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["multi_tool_use_parallel", "_", &long[..64], "core__wait-2"]
    );
}

/// Whitespace is no text, as the reducer records a turn: a UI's whitespace-only assistant text
/// (a model's `"\n\n"` before its calls, say) never becomes an assistant message without content,
/// which Anthropic refuses and which would fail every later turn of the thread.
#[test]
fn whitespace_only_assistant_text_is_no_text() {
    let content = |m: &Message| match m {
        Message::Assistant { content, .. } => content.clone(),
        other => panic!("{other:?}"),
    };
    let messages = reconstruct_history(&[user(), text(" \n"), user()]).unwrap();
    assert_eq!(roles(&messages), "u u");
    let items = [
        user(),
        text("\n\n"),
        call("1"),
        result("1"),
        text("\n"),
        user(),
    ];
    let messages = reconstruct_history(&items).unwrap();
    assert_eq!(roles(&messages), "u A1 t1 u");
    assert_eq!(content(&messages[1]), "");
    let items = [user(), text(" "), text("done"), text(" ")];
    let messages = reconstruct_history(&items).unwrap();
    assert_eq!(content(&messages[1]), " done ");
}

/// A UI item of a random history: texts blank by `trim` or not, ids repeated, differing only in
/// case, or as long as an id may be, names providers refuse.
fn item() -> impl proptest::strategy::Strategy<Value = HistoryItem> {
    use proptest::prelude::*;
    let long = "x".repeat(128);
    let ids = prop_oneof![
        Just("1".to_owned()),
        Just("2".to_owned()),
        Just("call_A".to_owned()),
        Just("call_a".to_owned()),
        Just(long),
        Just("\0".to_owned()),
    ]
    .prop_map(|raw| id(&raw));
    let texts = prop_oneof![
        Just(String::new()),
        Just(" \u{3000}\u{85}".to_owned()),
        Just("\0".to_owned()),
        Just("\u{200B}".to_owned()),
        Just("hi".to_owned()),
    ];
    let names = prop_oneof![Just("core__x"), Just("multi_tool_use.parallel"), Just("")];
    prop_oneof![
        1 => texts.clone().prop_map(|content| HistoryItem::System { content }),
        2 => texts.clone().prop_map(|content| HistoryItem::User { content }),
        3 => texts.clone().prop_map(|content| HistoryItem::AssistantText { content }),
        3 => (ids.clone(), names).prop_map(|(id, name)| HistoryItem::ToolCall {
            id,
            name: name.into(),
            arguments: "{}".into(),
        }),
        3 => (ids, texts).prop_map(|(tool_call_id, content)| HistoryItem::ToolResult {
            tool_call_id,
            content,
        }),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]

    /// Whatever a UI sends, a rebuilt history passes `validate_history`, starts a thread, and
    /// reads back from serde as it was; a refusal names the item at fault, never a rebuilt
    /// history the rules refuse.
    #[test]
    fn any_ui_history_is_rebuilt_valid_or_refused_by_its_item(
        items in proptest::collection::vec(item(), 0..12),
    ) {
        match reconstruct_history(&items) {
            Ok(messages) => {
                proptest::prop_assert_eq!(ai_core::validate_history(&messages), Ok(()));
                let limit = std::num::NonZeroU32::new(1).unwrap();
                proptest::prop_assert!(
                    crate::AgentState::from_history(messages.clone(), limit).is_ok()
                );
                let saved = serde_json::to_string(&messages).unwrap();
                let read: Vec<Message> = serde_json::from_str(&saved).unwrap();
                proptest::prop_assert_eq!(read, messages);
            }
            Err(error) => proptest::prop_assert!(
                !matches!(error, ReconstructError::Invalid(_)),
                "{error}"
            ),
        }
    }
}

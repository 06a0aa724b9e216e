//! `validate_history` on random histories: it never panics, and it accepts exactly the
//! histories a plain reading of its rules accepts.

use std::collections::HashSet;

use ai_core::{AssistantToolCall, Message, ToolCallId, validate_history};
use proptest::prelude::*;

/// A few ids, so that histories repeat them: some differ only in case, one is as long as an id
/// may be (and one differs from it only in its last character), one is a NUL.
fn id() -> impl Strategy<Value = ToolCallId> {
    let long = "ツ".repeat(128);
    let near = format!("{}x", "ツ".repeat(127));
    prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("A".to_owned()),
        Just("\0".to_owned()),
        Just(long),
        Just(near),
    ]
    .prop_map(|id| ToolCallId::new(id).unwrap())
}

fn message() -> impl Strategy<Value = Message> {
    let content = prop_oneof![
        Just(String::new()),
        Just(" ".to_owned()),
        Just("\u{3000}\u{85}\u{2028}".to_owned()),
        Just("\0".to_owned()),
        Just("\u{200B}".to_owned()),
        ".{1,4}",
    ];
    let call = (id(), ".{0,4}", ".{0,4}").prop_map(|(id, name, arguments)| AssistantToolCall {
        id,
        name,
        arguments,
        provider_fields: Default::default(),
    });
    prop_oneof![
        1 => content.clone().prop_map(|content| Message::System { content }),
        1 => content.clone().prop_map(|content| Message::User { content }),
        3 => (content.clone(), proptest::collection::vec(call, 0..4)).prop_map(
            |(content, tool_calls)| Message::Assistant {
                content,
                tool_calls
            }
        ),
        3 => (id(), content).prop_map(|(tool_call_id, content)| Message::Tool {
            tool_call_id,
            content
        }),
    ]
}

/// The rules read plainly: each user and system message holds text that is not blank; each
/// assistant message holds text that is not blank or calls; its calls have ids no earlier call had,
/// and are answered by the tool messages right after it, one each, in call order; no other tool
/// message.
fn valid(messages: &[Message]) -> bool {
    let mut seen = HashSet::new();
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::Tool { .. } => return false,
            Message::User { content } | Message::System { content }
                if content.trim().is_empty() =>
            {
                return false;
            }
            Message::Assistant {
                content,
                tool_calls,
            } if tool_calls.is_empty() && content.trim().is_empty() => return false,
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    if !seen.insert(call.id.clone()) {
                        return false;
                    }
                    i += 1;
                    match messages.get(i) {
                        Some(Message::Tool { tool_call_id, .. }) if *tool_call_id == call.id => {}
                        _ => return false,
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    true
}

/// Messages, and whole turns: an assistant message with its answers in order, so that valid
/// histories with calls come up as often as invalid ones.
fn history() -> impl Strategy<Value = Vec<Message>> {
    let part = prop_oneof![
        message().prop_map(|m| vec![m]),
        message().prop_map(|m| {
            let answers: Vec<Message> = match &m {
                Message::Assistant { tool_calls, .. } => tool_calls
                    .iter()
                    .map(|c| Message::Tool {
                        tool_call_id: c.id.clone(),
                        content: "{}".into(),
                    })
                    .collect(),
                _ => Vec::new(),
            };
            std::iter::once(m).chain(answers).collect()
        }),
    ];
    proptest::collection::vec(part, 0..6).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn validate_history_reads_its_rules(messages in history()) {
        prop_assert_eq!(validate_history(&messages).is_ok(), valid(&messages), "{:?}", messages);
    }

    /// A history saved and read back is the same history, and the rules read it alike.
    #[test]
    fn a_history_reads_back_from_serde_as_it_was(messages in history()) {
        let saved = serde_json::to_string(&messages).unwrap();
        let read: Vec<Message> = serde_json::from_str(&saved).unwrap();
        prop_assert_eq!(validate_history(&read), validate_history(&messages));
        prop_assert_eq!(read, messages);
    }
}

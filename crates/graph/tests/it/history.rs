//! `reconstruct_history` on random UI items: it never panics, and what it accepts is a valid
//! provider history holding every call and result it was given, with no empty assistant or user
//! message and only tool names providers read back.

use ai_core::{Message, ToolCallId, validate_history};
use graph::{HistoryItem, reconstruct_history};
use proptest::prelude::*;

/// A few ids, so that items repeat them.
fn id() -> impl Strategy<Value = ToolCallId> {
    prop_oneof![Just("a"), Just("b"), Just("c")].prop_map(|id| ToolCallId::new(id).unwrap())
}

fn item() -> impl Strategy<Value = HistoryItem> {
    let content = prop_oneof![Just(String::new()), Just(" \n".to_owned()), ".{1,4}"];
    let name = prop_oneof![
        Just("core__get_current_time".to_owned()),
        Just(String::new()),
        ".{0,70}"
    ];
    prop_oneof![
        1 => content.clone().prop_map(|content| HistoryItem::System { content }),
        1 => content.clone().prop_map(|content| HistoryItem::User { content }),
        2 => content.clone().prop_map(|content| HistoryItem::AssistantText { content }),
        3 => (id(), name, content.clone()).prop_map(|(id, name, arguments)| HistoryItem::ToolCall {
            id,
            name,
            arguments
        }),
        3 => (id(), content).prop_map(|(tool_call_id, content)| HistoryItem::ToolResult {
            tool_call_id,
            content
        }),
    ]
}

fn accepted_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn reconstruct_history_accepts_only_valid_histories(
        items in proptest::collection::vec(item(), 0..12),
    ) {
        let Ok(messages) = reconstruct_history(&items) else {
            return Ok(());
        };
        prop_assert!(validate_history(&messages).is_ok(), "{:?}", messages);
        let calls = items.iter().filter(|i| matches!(i, HistoryItem::ToolCall { .. })).count();
        let results = items.iter().filter(|i| matches!(i, HistoryItem::ToolResult { .. })).count();
        let mut kept_calls = 0;
        let mut kept_results = 0;
        for message in &messages {
            match message {
                Message::Assistant { content, tool_calls } => {
                    prop_assert!(!content.trim().is_empty() || !tool_calls.is_empty());
                    prop_assert!(content.is_empty() || !content.trim().is_empty());
                    for call in tool_calls {
                        prop_assert!(accepted_name(&call.name), "{:?}", call.name);
                    }
                    kept_calls += tool_calls.len();
                }
                Message::Tool { .. } => kept_results += 1,
                Message::User { content } => prop_assert!(!content.trim().is_empty()),
                _ => {}
            }
        }
        prop_assert_eq!((kept_calls, kept_results), (calls, results));
    }
}

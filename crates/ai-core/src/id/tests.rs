//! Id rules as data.

use super::*;

#[test]
fn tool_id_rules() {
    let cases: &[(&str, bool)] = &[
        ("core__get_current_time", true),
        ("core__workspace-read", true),
        ("mcp__github__create_issue", true),
        ("mcp__srv__tool__with__parts", true),
        ("core__", false),
        ("core__a__b", false),
        ("mcp__github", false),
        ("mcp____tool", false),
        ("mcp__srv__", false),
        ("get_current_time", false),
        ("core__a b", false),
        ("core__é", false),
        ("", false),
    ];
    for (raw, ok) in cases {
        assert_eq!(ToolId::parse(raw).is_ok(), *ok, "{raw}");
    }
    let long = format!("core__{}", "a".repeat(59));
    assert_eq!(long.len(), 65);
    assert!(ToolId::parse(&long).is_err());
    assert!(ToolId::parse(&long[..64]).is_ok());
}

#[test]
fn tool_id_cannot_be_deserialized_around_the_rules() {
    let err = serde_json::from_str::<ToolId>("\"nope\"").unwrap_err();
    assert!(err.to_string().contains("namespace"), "{err}");
}

#[test]
fn tool_call_id_length() {
    assert!(ToolCallId::new("a".repeat(128)).is_ok());
    assert!(ToolCallId::new("a".repeat(129)).is_err());
    assert!(ToolCallId::new("").is_err());
    assert!(serde_json::from_str::<ToolCallId>(&format!("\"{}\"", "a".repeat(129))).is_err());
}

/// A call id is the provider's (or a client's) text and may hold control characters. It is kept
/// byte-exact for the wire and the stores, but every message that shows it (its `Display`, so
/// `HistoryError`'s and the reducer's) shows it escaped and bounded, never a raw control
/// character that could forge a log line or drive a terminal.
#[test]
fn a_call_id_is_shown_escaped_and_kept_exact() {
    let raw = "call\u{1b}[2J\nforged: line\u{7}\"\\";
    let id = ToolCallId::new(raw).unwrap();
    assert_eq!(id.as_str(), raw);
    assert_eq!(String::from(id.clone()), raw);
    assert_eq!(serde_json::to_value(&id).unwrap(), raw);
    assert_eq!(
        id.to_string(),
        "call\\u{1b}[2J\\nforged: line\\u{7}\\\"\\\\"
    );
    // An ordinary id shows as it is.
    let plain = ToolCallId::new("call_abc-123.x:y").unwrap();
    assert_eq!(plain.to_string(), "call_abc-123.x:y");
    // A bidirectional override is no control character, but is escaped too.
    assert_eq!(
        ToolCallId::new("a\u{202e}b").unwrap().to_string(),
        "a\\u{202e}b"
    );
    // The longest id all of control characters stays bounded.
    let noisy = ToolCallId::new("\u{7f}".repeat(128)).unwrap();
    let shown = noisy.to_string();
    assert!(shown.chars().count() <= 257, "{shown}");
    assert!(shown.ends_with('…'), "{shown}");
    assert!(!shown.chars().any(char::is_control), "{shown}");
    // A long ordinary id is never cut.
    let long = ToolCallId::new("c".repeat(128)).unwrap();
    assert_eq!(long.to_string(), "c".repeat(128));
}

/// The history checker's messages, which reach the reducer's "invalid history: …" and logs,
/// show a call id escaped.
#[test]
fn history_errors_show_call_ids_escaped() {
    let error = crate::HistoryError::OrphanToolMessage {
        index: 1,
        tool_call_id: ToolCallId::new("c\u{1b}[31m\r\n").unwrap(),
    };
    let message = error.to_string();
    assert!(!message.chars().any(char::is_control), "{message}");
    assert!(message.contains("c\\u{1b}[31m\\r\\n"), "{message}");
}

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

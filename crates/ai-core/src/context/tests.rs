//! Contexts cannot be built, or deserialized, around their checks.

use serde_json::{Value, json};

use super::{RunContext, ToolInvocationContext};
use crate::ToolCallId;

#[test]
fn a_run_context_cannot_be_deserialized_around_its_checks() {
    let valid = serde_json::to_value(RunContext::new("run-1", "user:a", "t").unwrap()).unwrap();
    assert!(serde_json::from_value::<RunContext>(valid.clone()).is_ok());
    for (field, bad) in [
        ("actor_id", json!("")),
        ("tenant_id", json!("x".repeat(129))),
        ("subject_id", json!("")),
        ("graph_id", json!("g".repeat(129))),
    ] {
        let mut value = valid.clone();
        value[field] = bad;
        let error = serde_json::from_value::<RunContext>(value).unwrap_err();
        assert!(error.to_string().contains(field), "{field}: {error}");
    }
}

#[test]
fn optional_references_may_be_absent_or_null() {
    let mut value = serde_json::to_value(RunContext::new("run-1", "user:a", "t").unwrap()).unwrap();
    value["subject_id"] = Value::Null;
    value.as_object_mut().unwrap().remove("graph_id");
    let ctx: RunContext = serde_json::from_value(value).unwrap();
    assert_eq!((ctx.subject_id(), ctx.graph_id()), (None, None));
}

#[test]
fn an_invocation_context_is_checked_the_same_way() {
    let run = RunContext::new("run-1", "user:a", "t").unwrap();
    let invocation = ToolInvocationContext::new(&run, ToolCallId::new("call_1").unwrap(), None);
    let mut value = serde_json::to_value(&invocation).unwrap();
    assert!(serde_json::from_value::<ToolInvocationContext>(value.clone()).is_ok());
    value["actor_id"] = json!("");
    assert!(serde_json::from_value::<ToolInvocationContext>(value).is_err());
}

#[test]
fn subject_and_graph_are_checked_when_set() {
    let run = RunContext::new("run-1", "user:a", "t").unwrap();
    assert!(run.clone().with_subject("").is_err());
    assert!(run.clone().with_graph("g".repeat(129)).is_err());
    let run = run.with_subject("user:b").unwrap().with_graph("g").unwrap();
    assert_eq!(
        (run.subject_id(), run.graph_id()),
        (Some("user:b"), Some("g"))
    );
}

/// A reference with a control character (a line break that would forge a log line, an escape
/// sequence that would rewrite a terminal) cannot be built or deserialized; other text can.
#[test]
fn references_refuse_control_characters() {
    use crate::{RunId, ThreadId};
    for bad in [
        "run\n2",
        "run\r",
        "\u{1b}[2J",
        "a\u{7f}",
        "a\u{9b}1m",
        "tab\there",
    ] {
        let error = RunId::new(bad).unwrap_err();
        assert!(error.to_string().contains("control character"), "{error}");
        assert!(ThreadId::new(bad).is_err(), "{bad:?}");
        assert!(RunContext::new("run-1", bad, "t").is_err(), "{bad:?}");
        assert!(
            serde_json::from_value::<RunId>(json!(bad)).is_err(),
            "{bad:?}"
        );
    }
    for good in ["chat-1795681632509-41-0a1b2c3d", "user:ünï ✓", "שלום"] {
        RunId::new(good).unwrap();
        ThreadId::new(good).unwrap();
    }
}

/// Both contexts' JSON and Debug forms are flat, in this order: runs and records store them.
#[test]
fn the_contexts_json_and_debug_forms_are_flat() {
    use crate::{ConnectionId, RunId};
    let conn = ConnectionId::new("conn-1").unwrap();
    let mut run = RunContext::new("run-1", "user:a", "t")
        .unwrap()
        .with_subject("user:b")
        .unwrap()
        .with_graph("g")
        .unwrap();
    run.connection_id = Some(conn.clone());
    run.requested_connection_ids.insert(conn.clone());
    run.grant.allowed_connection_ids.insert(conn.clone());
    run.approvals
        .insert(ToolCallId::new("call_1").unwrap(), "ab".into());
    let json = serde_json::to_string(&run).unwrap();
    assert_eq!(
        json,
        r#"{"run_id":"run-1","actor_id":"user:a","tenant_id":"t","subject_id":"user:b","graph_id":"g","connection_id":"conn-1","requested_connection_ids":["conn-1"],"grant":{"allowed_connection_ids":["conn-1"]},"approvals":{"call_1":"ab"}}"#
    );
    assert_eq!(serde_json::from_str::<RunContext>(&json).unwrap(), run);
    assert_eq!(
        format!("{run:?}"),
        r#"RunContext { run_id: "run-1", actor_id: "user:a", tenant_id: "t", subject_id: Some("user:b"), graph_id: Some("g"), connection_id: Some(ConnectionId("conn-1")), requested_connection_ids: {ConnectionId("conn-1")}, grant: ConnectionGrant { allowed_connection_ids: {ConnectionId("conn-1")} }, approvals: {"call_1": "ab"} }"#
    );

    let invocation =
        ToolInvocationContext::new(&run, ToolCallId::new("call_1").unwrap(), Some(conn));
    let json = serde_json::to_string(&invocation).unwrap();
    assert_eq!(
        json,
        r#"{"run_id":"run-1","tool_call_id":"call_1","actor_id":"user:a","tenant_id":"t","subject_id":"user:b","graph_id":"g","connection_id":"conn-1"}"#
    );
    assert_eq!(
        serde_json::from_str::<ToolInvocationContext>(&json).unwrap(),
        invocation
    );
    assert_eq!(
        format!("{invocation:?}"),
        r#"ToolInvocationContext { run_id: "run-1", tool_call_id: "call_1", actor_id: "user:a", tenant_id: "t", subject_id: Some("user:b"), graph_id: Some("g"), connection_id: Some(ConnectionId("conn-1")) }"#
    );

    let bare = RunContext::new("run-1", "user:a", "t").unwrap();
    assert_eq!(
        serde_json::to_string(&bare).unwrap(),
        r#"{"run_id":"run-1","actor_id":"user:a","tenant_id":"t","subject_id":null,"graph_id":null,"connection_id":null,"requested_connection_ids":[],"grant":{"allowed_connection_ids":[]},"approvals":{}}"#
    );
    assert_eq!(bare.run_id(), &RunId::new("run-1").unwrap());
}

/// A context read from something that is no object is refused naming the context, not a type
/// of the crate's own that only reads it.
#[test]
fn a_context_that_is_no_object_is_refused_naming_the_context() {
    for bad in [json!("run-1"), json!(7)] {
        let error = serde_json::from_value::<RunContext>(bad.clone())
            .unwrap_err()
            .to_string();
        assert!(error.ends_with("expected struct RunContext"), "{error}");
        let error = serde_json::from_value::<ToolInvocationContext>(bad)
            .unwrap_err()
            .to_string();
        assert!(
            error.ends_with("expected struct ToolInvocationContext"),
            "{error}"
        );
    }
}

/// A mistyped key (`conection_id`) is refused naming it, in either context and in the grant,
/// rather than dropped while the setting it meant falls back to its default.
#[test]
fn an_unknown_key_is_refused_naming_it() {
    let run = RunContext::new("run-1", "user:a", "t").unwrap();
    let invocation = ToolInvocationContext::new(&run, ToolCallId::new("call_1").unwrap(), None);
    let mut run = serde_json::to_value(&run).unwrap();
    let mut invocation = serde_json::to_value(&invocation).unwrap();
    run["conection_id"] = json!("conn-1");
    invocation["conection_id"] = json!("conn-1");
    let error = serde_json::from_value::<RunContext>(run.clone()).unwrap_err();
    assert!(
        error.to_string().contains("unknown field `conection_id`"),
        "{error}"
    );
    let error = serde_json::from_value::<ToolInvocationContext>(invocation).unwrap_err();
    assert!(
        error.to_string().contains("unknown field `conection_id`"),
        "{error}"
    );

    run.as_object_mut().unwrap().remove("conection_id");
    run["grant"]["allowed_conection_ids"] = json!(["conn-1"]);
    let error = serde_json::from_value::<RunContext>(run.clone()).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("unknown field `allowed_conection_ids`"),
        "{error}"
    );
    let error = serde_json::from_value::<crate::ConnectionGrant>(run["grant"].clone()).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("unknown field `allowed_conection_ids`"),
        "{error}"
    );
}

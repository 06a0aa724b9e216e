//! Approvals: a gated call pauses the run; only an exact approval runs it; everything else is a
//! denial fed back to the model.

use ai_core::{AiEvent, Message, ToolCallId};
use graph::{AgentConfig, AgentState, ApprovalDecision, Phase};

use crate::support::{Fixture, call, calls, check_invariants, done_reason, text};

const GATED: &str = r#"
allowed_tools = ["core__wait"]
require_approval_for_effects = ["read_only"]
"#;

fn fixture() -> Fixture {
    Fixture::with_policy(
        vec![
            calls(vec![
                call("c1", "core__wait", r#"{"ms":1}"#),
                call("c2", "core__wait", r#"{"ms":2}"#),
            ]),
            text("done"),
        ],
        AgentConfig::default(),
        GATED,
    )
}

/// Runs the first turn and returns the state and the hashes the approvals must name.
async fn paused(f: &Fixture) -> (AgentState, Vec<(String, String)>) {
    let state = f.run(f.agent.new_state(), "go").await;
    let events = f.events();
    assert_eq!(done_reason(&events), "awaiting_approval");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AiEvent::ToolCallStart { .. }))
    );
    assert!(matches!(state.phase(), Phase::AwaitingApproval { .. }));
    let hashes = events
        .iter()
        .filter_map(|e| match e {
            AiEvent::ApprovalRequired {
                tool_call_id,
                args_hash,
                ..
            } => Some((tool_call_id.as_str().to_owned(), args_hash.clone())),
            _ => None,
        })
        .collect();
    f.events.lock().unwrap().clear();
    (state, hashes)
}

fn decision(id: &str, approved: bool, hash: &str) -> ApprovalDecision {
    ApprovalDecision {
        tool_call_id: ToolCallId::new(id).unwrap(),
        approved,
        args_hash: hash.into(),
    }
}

fn answers(state: &AgentState) -> Vec<String> {
    state
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn approve_one_deny_the_other() {
    let f = fixture();
    let (state, hashes) = paused(&f).await;
    assert_eq!(hashes.len(), 2);
    let decisions = vec![
        decision("c1", true, &hashes[0].1),
        decision("c2", false, &hashes[1].1),
    ];
    let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
    let state = f
        .agent
        .resume(state, decisions, &f.ctx, &f.catalog, &sink, &f.cancel)
        .await;
    let events = f.events();
    check_invariants(&events, &state).unwrap();
    assert_eq!(done_reason(&events), "stop");
    let answers = answers(&state);
    assert_eq!(answers[0], r#"{"waited_ms":1}"#);
    assert!(
        answers[1].contains("policy_denied") && answers[1].contains("denied this call"),
        "{answers:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn anything_ambiguous_fails_closed() {
    let cases = [
        // An approval for other arguments.
        vec![decision("c1", true, &"0".repeat(64))],
        // An unknown id approves nothing.
        vec![decision("c9", true, "whatever")],
        // No decision at all.
        vec![],
    ];
    for decisions in cases {
        let f = fixture();
        let (state, _) = paused(&f).await;
        let sink = |e: AiEvent| f.events.lock().unwrap().push(e);
        let state = f
            .agent
            .resume(state, decisions, &f.ctx, &f.catalog, &sink, &f.cancel)
            .await;
        check_invariants(&f.events(), &state).unwrap();
        assert!(
            !f.events()
                .iter()
                .any(|e| matches!(e, AiEvent::ToolCallStart { .. }))
        );
        assert!(answers(&state).iter().all(|a| a.contains("policy_denied")));
    }
}

#[tokio::test(start_paused = true)]
async fn a_policy_change_before_resume_is_checked_again() {
    let f = fixture();
    let (state, hashes) = paused(&f).await;
    // Resume under a runner whose policy no longer allows the tool at all.
    let denying = Fixture::with_policy(
        vec![text("done")],
        AgentConfig::default(),
        r#"allowed_tools = []"#,
    );
    let decisions = vec![
        decision("c1", true, &hashes[0].1),
        decision("c2", true, &hashes[1].1),
    ];
    let sink = |e: AiEvent| denying.events.lock().unwrap().push(e);
    let state = denying
        .agent
        .resume(
            state,
            decisions,
            &denying.ctx,
            &f.catalog,
            &sink,
            &denying.cancel,
        )
        .await;
    check_invariants(&denying.events(), &state).unwrap();
    assert!(
        answers(&state).iter().all(|a| a.contains("policy_denied")),
        "{:?}",
        answers(&state)
    );
}

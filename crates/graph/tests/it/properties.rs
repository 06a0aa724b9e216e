//! Random scripts: whatever the model and tools do, a run ends once with a valid history.

use std::time::Duration;

use graph::AgentConfig;
use proptest::prelude::*;

use crate::support::{Fixture, Reply, call, calls, check_invariants, text};

/// One model turn of a random script.
#[derive(Clone, Debug)]
enum Step {
    Text,
    Fail,
    Calls(Vec<CallKind>),
}

#[derive(Clone, Debug)]
enum CallKind {
    Ok(u64),
    BadJson,
    Unknown,
    Invalid,
    Failing,
    Cut,
}

fn step() -> impl Strategy<Value = Step> {
    let kind = prop_oneof![
        (0u64..50).prop_map(CallKind::Ok),
        Just(CallKind::BadJson),
        Just(CallKind::Unknown),
        Just(CallKind::Invalid),
        Just(CallKind::Failing),
        Just(CallKind::Cut),
    ];
    prop_oneof![
        1 => Just(Step::Text),
        1 => Just(Step::Fail),
        4 => proptest::collection::vec(kind, 1..5).prop_map(Step::Calls),
    ]
}

fn reply(turn: usize, step: &Step) -> Reply {
    match step {
        Step::Text => text("done"),
        Step::Fail => Reply::Fail,
        Step::Calls(kinds) => calls(
            kinds
                .iter()
                .enumerate()
                .map(|(i, kind)| {
                    let id = format!("t{turn}c{i}");
                    let (name, args, complete) = match kind {
                        CallKind::Ok(ms) => ("core__wait", format!(r#"{{"ms":{ms}}}"#), true),
                        CallKind::BadJson => ("core__wait", "{oops".into(), true),
                        CallKind::Unknown => ("core__missing", "{}".into(), true),
                        CallKind::Invalid => ("core__wait", r#"{"ms":-1}"#.into(), true),
                        CallKind::Failing => ("core__wait", r#"{"ms":1,"fail":true}"#.into(), true),
                        CallKind::Cut => ("core__wait", r#"{"ms":"#.into(), false),
                    };
                    let mut c = call(&id, name, &args);
                    c.complete = complete;
                    c
                })
                .collect(),
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_run_ends_once_with_a_valid_history(
        script in proptest::collection::vec(step(), 0..8),
        cancel_after_ms in proptest::option::of(0u64..120),
        max_steps in 1u32..6,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let replies = script.iter().enumerate().map(|(turn, s)| reply(turn, s)).collect();
        let f = Fixture::new(replies, AgentConfig::default().with_max_steps(max_steps));
        let outcome = runtime.block_on(async {
            if let Some(ms) = cancel_after_ms {
                let cancel = f.cancel.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    cancel.cancel();
                });
            }
            let state = f.run(f.agent.new_state(), "go").await;
            // A second turn on the same state must work too.
            f.run(state, "again").await
        });
        let events = f.events();
        let split = events.iter().position(|e| matches!(e, ai_core::AiEvent::Done { .. })).unwrap() + 1;
        check_invariants(&events[..split], &outcome).map_err(TestCaseError::fail)?;
        check_invariants(&events[split..], &outcome).map_err(TestCaseError::fail)?;
    }
}

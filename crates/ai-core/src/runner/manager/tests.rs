//! The breaker registry's lock-free admission: taken while every circuit is closed, and only then.

use std::sync::mpsc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Ordering, Registry};
use crate::{BreakerPolicy, ToolErrorCategory, ToolErrorCode, ToolId};

fn id(name: &str) -> ToolId {
    ToolId::parse(name).unwrap()
}

fn opens_at_first_failure() -> BreakerPolicy {
    BreakerPolicy {
        failure_threshold: 1,
        cool_down_ms: 1_000,
        ..BreakerPolicy::default()
    }
}

#[test]
fn a_closed_circuit_admits_without_the_registry_lock() {
    let registry = Registry::default();
    let tool = id("core__forecast");
    let policy = BreakerPolicy::default();
    let (sent, admitted) = mpsc::channel();
    let held = registry.tools.lock().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let trial = registry.admit(&tool, &policy, Instant::now());
            sent.send(matches!(trial, Ok(None))).unwrap();
        });
        let answer = admitted.recv_timeout(Duration::from_secs(10));
        drop(held);
        assert_eq!(answer, Ok(true), "admission waited for the lock");
    });
}

#[test]
fn the_lock_is_taken_again_while_any_circuit_is_not_closed() {
    let registry = Registry::default();
    let (tool, other) = (id("core__forecast"), id("core__other"));
    let policy = opens_at_first_failure();
    let now = Instant::now();
    registry.record(
        &tool,
        &policy,
        now,
        Some(ToolErrorCategory::Transient),
        None,
        None,
    );
    assert_eq!(registry.not_closed.load(Ordering::Relaxed), 1);
    let refused = registry.admit(&tool, &policy, now).err().unwrap();
    assert_eq!(refused.code, ToolErrorCode::CircuitOpen);
    assert!(matches!(registry.admit(&other, &policy, now), Ok(None)));

    // Half-open, then closed again by a successful trial: the fast path is back.
    let later = now + Duration::from_millis(policy.cool_down_ms);
    let trial = registry.admit(&tool, &policy, later).unwrap();
    assert!(trial.is_some());
    assert_eq!(registry.not_closed.load(Ordering::Relaxed), 1);
    registry.record(&tool, &policy, later, None, None, trial);
    assert_eq!(registry.not_closed.load(Ordering::Relaxed), 0);
}

#[test]
fn a_trial_given_back_leaves_its_circuit_counted() {
    let registry = Registry::default();
    let tool = id("core__forecast");
    let policy = opens_at_first_failure();
    let now = Instant::now();
    let failed = Some(ToolErrorCategory::Transient);
    registry.record(&tool, &policy, now, failed, None, None);
    let later = now + Duration::from_millis(policy.cool_down_ms);
    drop(registry.admit(&tool, &policy, later).unwrap());
    assert_eq!(registry.not_closed.load(Ordering::Relaxed), 1);
    assert!(matches!(registry.admit(&tool, &policy, later), Ok(Some(_))));
}

//! The breaker registry's lock-free admission: taken while every circuit is closed, or every
//! circuit of the tool's bucket, and only then.

use std::sync::mpsc;
use std::time::Duration;

use tokio::time::Instant;

use super::{BreakerStatus, CallEnd, Ordering, Registry};
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

/// A circuit left open whose tool is never called again (its cool-down long passed) keeps the
/// lock only for the tools whose ids share its bucket: another tool is admitted without it.
#[test]
fn an_open_circuit_of_a_tool_never_called_again_keeps_the_lock_off_other_tools() {
    let registry = Registry::default();
    let (tool, other) = (id("core__forecast"), id("core__weather"));
    assert_ne!(
        super::bucket(&tool),
        super::bucket(&other),
        "pick ids of two buckets"
    );
    let policy = opens_at_first_failure();
    let now = Instant::now();
    let failed = Some(ToolErrorCategory::Transient);
    registry.record(&tool, &policy, now, failed, None, None);
    let long_after = now + Duration::from_secs(3_600);
    assert_eq!(
        registry.stats(long_after)[0].breaker,
        BreakerStatus::HalfOpen
    );
    let (sent, admitted) = mpsc::channel();
    let held = registry.tools.lock().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let trial = registry.admit(&other, &policy, long_after);
            sent.send(matches!(trial, Ok(None))).unwrap();
        });
        let answer = admitted.recv_timeout(Duration::from_secs(10));
        drop(held);
        assert_eq!(answer, Ok(true), "admission waited for the lock");
    });
    // Its own tool still takes the lock, and is let through as a half-open trial.
    assert!(matches!(
        registry.admit(&tool, &policy, long_after),
        Ok(Some(_))
    ));
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

/// The count equals the circuits that are not closed, as the statistics show them.
fn assert_counted(registry: &Registry, now: Instant) {
    let stats = registry.stats(now);
    let not_closed = stats.iter().filter(|s| s.breaker != BreakerStatus::Closed);
    let counted = registry.not_closed.load(Ordering::Relaxed);
    assert_eq!(counted, not_closed.clone().count(), "{stats:?}");
    let mut in_bucket = [0; super::BUCKETS];
    for tool in not_closed {
        in_bucket[super::bucket(&tool.tool_id)] += 1;
    }
    let counted_in = (registry.not_closed_in)
        .each_ref()
        .map(|n| n.load(Ordering::Relaxed));
    assert_eq!(counted_in, in_bucket, "{stats:?}");
}

#[test]
fn every_circuit_transition_keeps_the_count() {
    let registry = Registry::default();
    let (tool, other) = (id("core__forecast"), id("core__other"));
    let policy = BreakerPolicy {
        failure_threshold: 2,
        half_open_trials: 2,
        failure_rate: Some(0.5),
        window: 2,
        ..opens_at_first_failure()
    };
    let cool_down = Duration::from_millis(policy.cool_down_ms);
    let mut now = Instant::now();
    let (failed, cancelled) = (
        Some(ToolErrorCategory::Transient),
        Some(ToolErrorCategory::Cancelled),
    );
    let ended = |failure| CallEnd {
        latency: Some(Duration::ZERO),
        retries: 0,
        failure,
    };

    // Closed to open: by the failure rate (one failure in a full window of two), and by
    // consecutive failures under a threshold alone.
    registry.record(&tool, &policy, now, None, None, None);
    assert_counted(&registry, now);
    registry.record(&tool, &policy, now, failed, None, None);
    assert_counted(&registry, now);
    let threshold_only = BreakerPolicy {
        failure_rate: None,
        ..policy.clone()
    };
    for _ in 0..2 {
        registry.record(&other, &threshold_only, now, failed, None, None);
        assert_counted(&registry, now);
    }
    assert_eq!(registry.not_closed.load(Ordering::Relaxed), 2);

    // Open, and staying so: a failure that says nothing about the tool, a call recorded alone.
    registry.record(&tool, &policy, now, cancelled, None, None);
    registry.record_call_only(&tool, ended(failed));
    assert_counted(&registry, now);

    // Past its cool-down, still counted; half-open with two trials, one given back, one
    // failing: open again.
    now += cool_down;
    assert_counted(&registry, now);
    let first = registry.admit(&tool, &policy, now).unwrap();
    let second = registry.admit(&tool, &policy, now).unwrap();
    assert_counted(&registry, now);
    drop(first);
    assert_counted(&registry, now);
    registry.record(&tool, &policy, now, failed, None, second);
    assert_counted(&registry, now);

    // Trials that never report are replaced after a cool-down; the new round's trial closes
    // the circuit, and the lost ones end late under the closed circuit: one cancelled, one
    // dropped.
    now += cool_down;
    let lost = [(); 2].map(|()| registry.admit(&tool, &policy, now).unwrap());
    now += cool_down;
    let replacing = registry.admit(&tool, &policy, now).unwrap();
    assert_counted(&registry, now);
    registry.record(&tool, &policy, now, None, None, replacing);
    assert_counted(&registry, now);
    let [cancelled_trial, dropped_trial] = lost;
    registry.record(&tool, &policy, now, cancelled, None, cancelled_trial);
    drop(dropped_trial);
    assert_counted(&registry, now);

    // The other circuit closes through a trial too: every circuit is closed, and counted so.
    let trial = registry.admit(&other, &threshold_only, now).unwrap();
    registry.record(&other, &threshold_only, now, None, Some(ended(None)), trial);
    assert_counted(&registry, now);
    assert_eq!(registry.not_closed.load(Ordering::Relaxed), 0);
}

/// The latest instant this platform's `Instant` holds, to the nanosecond.
fn end_of_time() -> Instant {
    let (mut at, mut step) = (Instant::now(), Duration::MAX);
    while !step.is_zero() {
        match at.checked_add(step) {
            Some(later) => at = later,
            None => step /= 2,
        }
    }
    at
}

/// A cool-down past the end of time (a platform whose `Instant` holds less than Linux's does
/// not need as long) keeps the circuit open for good, rather than panic as the failure that
/// opens it is recorded.
#[test]
fn a_circuit_cooling_down_past_the_end_of_time_stays_open_for_good() {
    let registry = Registry::default();
    let tool = id("core__forecast");
    let policy = BreakerPolicy {
        cool_down_ms: u64::MAX,
        ..opens_at_first_failure()
    };
    let decades = Duration::from_secs(30 * 365 * 24 * 3600);
    // Late enough that the cool-down does not fit, early enough for decades more.
    let now = end_of_time() - decades - Duration::from_secs(1);
    assert!(now.checked_add(Duration::from_millis(u64::MAX)).is_none());
    let failed = Some(ToolErrorCategory::Transient);
    registry.record(&tool, &policy, now, failed, None, None);
    let last = now + decades - Duration::from_nanos(1);
    assert_eq!(registry.stats(last)[0].breaker, BreakerStatus::Open);
    let refused = registry.admit(&tool, &policy, last).err().unwrap();
    assert_eq!(refused.code, ToolErrorCode::CircuitOpen);
}

//! The execution manager under virtual time: backoff schedules, jitter bounds, what is never
//! retried, breaker transitions, cancellation during backoff, the total deadline, statistics.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ai_core::{
    AiEvent, BoundTool, BreakerStatus, RetryPolicy, ToolCallStatus, ToolEffect, ToolErrorCategory,
    ToolErrorCode, ToolFailure, ToolPolicy,
};

use crate::support::{Behaviour, FakeTool, Harness, allow};

const T: &str = "core__flaky";

fn policy(retry: RetryPolicy) -> ToolPolicy {
    let mut policy = allow(&[T]);
    policy.retry = retry;
    policy
}

fn no_jitter(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay_ms: 100,
        max_delay_ms: 1_000,
        multiplier: 2.0,
        jitter: false,
        ..RetryPolicy::default()
    }
}

fn retry_waits(h: &Harness) -> Vec<(u32, u64)> {
    h.events
        .events()
        .iter()
        .filter_map(|e| match e {
            AiEvent::ToolCallRetrying {
                attempt,
                retry_in_ms,
                category,
                ..
            } => {
                assert_eq!(*category, ToolErrorCategory::Transient);
                Some((*attempt, *retry_in_ms))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn exact_backoff_schedule_without_jitter() {
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(3)));
    let h = Harness::new(
        vec![tool.clone() as Arc<dyn BoundTool>],
        policy(no_jitter(5)),
    );
    let started = tokio::time::Instant::now();
    let run = h.call(T, "{}").await;
    assert!(run.result.failure().is_none(), "{run:?}");
    assert_eq!(retry_waits(&h), [(2, 100), (3, 200), (4, 400)]);
    assert_eq!(started.elapsed(), Duration::from_millis(700));
    assert_eq!(tool.runs.load(Ordering::SeqCst), 4);
    // One id across attempts, and the lifecycle in the record.
    assert_eq!(run.record.attempts.len(), 4);
    assert_eq!(
        run.record.attempts[0].error.as_ref().map(|e| e.category),
        Some(ToolErrorCategory::Transient)
    );
    use ToolCallStatus::*;
    assert_eq!(
        run.record.transitions(),
        [
            Pending, Validating, Executing, Retrying, Executing, Retrying, Executing, Retrying,
            Executing, Succeeded
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn delays_are_capped_and_jitter_stays_within_bounds() {
    let mut retry = no_jitter(6);
    retry.max_delay_ms = 300;
    assert_eq!(
        (1..=5).map(|n| retry.delay_ms(n)).collect::<Vec<_>>(),
        [100, 200, 300, 300, 300]
    );

    retry.jitter = true;
    // No breaker: five failures in a row would open the default one before the sixth attempt.
    let policy = |retry: RetryPolicy| {
        let mut p = policy(retry);
        p.breaker.failure_threshold = 0;
        p
    };
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(5)));
    let h = Harness::new(vec![tool as Arc<dyn BoundTool>], policy(retry.clone()));
    assert!(h.call(T, "{}").await.result.failure().is_none());
    let waits = retry_waits(&h);
    assert_eq!(waits.len(), 5);
    for (attempt, wait) in &waits {
        assert!(*wait <= retry.delay_ms(attempt - 1), "{waits:?}");
    }
    // Jitter is deterministic per call id: the same schedule replays.
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(5)));
    let again = Harness::new(vec![tool as Arc<dyn BoundTool>], policy(retry));
    again.call(T, "{}").await;
    assert_eq!(retry_waits(&again), waits);
}

#[tokio::test(start_paused = true)]
async fn state_changing_tools_are_retried_only_when_idempotent() {
    for (tool, attempts) in [
        (
            FakeTool::new(T, ToolEffect::StateChange, Behaviour::Flaky(1)),
            1,
        ),
        (
            FakeTool::new(T, ToolEffect::ExternalSideEffect, Behaviour::Flaky(1)),
            1,
        ),
        (
            FakeTool::new(T, ToolEffect::StateChange, Behaviour::Flaky(1)).idempotent(),
            2,
        ),
    ] {
        let tool = Arc::new(tool);
        let h = Harness::new(
            vec![tool.clone() as Arc<dyn BoundTool>],
            policy(no_jitter(5)),
        );
        let run = h.call(T, "{}").await;
        assert_eq!(tool.runs.load(Ordering::SeqCst), attempts);
        assert_eq!(run.result.failure().is_none(), attempts == 2);
    }
}

#[tokio::test(start_paused = true)]
async fn execution_failures_are_not_retried_by_default() {
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Fail));
    let h = Harness::new(
        vec![tool.clone() as Arc<dyn BoundTool>],
        policy(no_jitter(5)),
    );
    let run = h.call(T, "{}").await;
    assert_eq!(
        run.result.failure().unwrap().category,
        ToolErrorCategory::Execution
    );
    assert!(!run.result.failure().unwrap().retryable);
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn cancel_during_backoff_stops_at_once() {
    let mut retry = no_jitter(3);
    retry.base_delay_ms = 10_000;
    let mut p = policy(retry);
    p.budgets.max_runtime_ms = 60_000;
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(5)));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
    let cancel = h.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let started = tokio::time::Instant::now();
    let run = h.call(T, "{}").await;
    assert_eq!(started.elapsed(), Duration::from_millis(50));
    assert_eq!(run.result.failure().unwrap().code, ToolErrorCode::Cancelled);
    assert_eq!(
        run.record.transitions().last(),
        Some(&ToolCallStatus::Cancelled)
    );
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
}

/// A retried tool that is not read-only (it is idempotent) whose run is cancelled while it waits
/// to try again had started: what its first attempt did may stand, and the model is told to check
/// before calling it again. A read-only one is told only that the call was cancelled.
#[tokio::test(start_paused = true)]
async fn cancel_during_backoff_of_a_tool_that_is_not_read_only_says_it_may_have_made_its_change() {
    for effect in [ToolEffect::StateChange, ToolEffect::ReadOnly] {
        let mut retry = no_jitter(3);
        retry.base_delay_ms = 10_000;
        let mut p = policy(retry);
        p.budgets.max_runtime_ms = 60_000;
        let tool = Arc::new(FakeTool::new(T, effect, Behaviour::Flaky(5)).idempotent());
        let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
        let cancel = h.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            cancel.cancel();
        });
        let run = h.call(T, "{}").await;
        let failure = run.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::Cancelled);
        assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
        if effect == ToolEffect::ReadOnly {
            assert_eq!(failure.safe_message, "the tool call was cancelled");
        } else {
            assert_eq!(
                failure.safe_message,
                "the tool call was cancelled; the tool is not read-only and had started, so it \
                 may have made its change: check before calling it again"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_total_deadline_bounds_all_attempts() {
    let mut retry = no_jitter(10);
    retry.base_delay_ms = 400;
    let mut p = policy(retry);
    p.budgets.max_runtime_ms = 500;
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(10)));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
    let run = h.call(T, "{}").await;
    // t=0 fails, waits 400; t=400 fails; the next wait (800) would pass the 500 ms deadline.
    assert_eq!(tool.runs.load(Ordering::SeqCst), 2);
    assert_eq!(
        run.result.failure().unwrap().category,
        ToolErrorCategory::Transient
    );
}

/// A wait for a retry that fits in the budget can still end past it (a timer fires late on a busy
/// runtime): the retry is not started then, with no budget left to run in. The call ends with the
/// failure it had, and the tool is not called again.
#[tokio::test(start_paused = true)]
async fn a_retry_whose_wait_ends_past_the_deadline_is_not_started() {
    let mut p = policy(no_jitter(3));
    p.budgets.max_runtime_ms = 500;
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(1)));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
    // The call fails at once and waits 100 ms to retry; meanwhile time jumps past the deadline,
    // so its timer fires 500 ms late.
    let late = async {
        tokio::task::yield_now().await;
        tokio::time::advance(Duration::from_millis(600)).await;
    };
    let (run, ()) = tokio::join!(h.call(T, "{}"), late);
    assert_eq!(retry_waits(&h), [(2, 100)]);
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
    let failure = run.result.failure().unwrap();
    assert_eq!(
        failure.category,
        ToolErrorCategory::Transient,
        "{failure:?}"
    );
    assert_eq!(run.record.attempts.len(), 1);
    let stats = h.runner.stats().remove(0);
    assert_eq!((stats.calls, stats.successes, stats.retries), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_half_opens_and_closes() {
    let mut p = policy(RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    });
    p.breaker.failure_threshold = 3;
    p.breaker.cool_down_ms = 1_000;
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(4)));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
    let breaker = |h: &Harness| h.runner.stats()[0].breaker;

    for _ in 0..3 {
        assert_eq!(
            h.call(T, "{}").await.result.failure().unwrap().code,
            ToolErrorCode::Execution
        );
    }
    assert_eq!(breaker(&h), BreakerStatus::Open);
    // Open: fails fast, the tool does not run, and the model is told when to try again.
    let fast = h.call(T, "{}").await;
    let failure = fast.result.failure().unwrap();
    assert_eq!(failure.code, ToolErrorCode::CircuitOpen);
    assert_eq!(failure.retry_after_ms, Some(1_000));
    assert!(
        failure.safe_message.contains("try again in 1000 ms"),
        "{}",
        failure.safe_message
    );
    assert_eq!(tool.runs.load(Ordering::SeqCst), 3);

    // After the cool-down one trial runs; it fails (4th failure), so the circuit opens again.
    tokio::time::advance(Duration::from_millis(1_000)).await;
    assert_eq!(breaker(&h), BreakerStatus::HalfOpen);
    assert_eq!(
        h.call(T, "{}").await.result.failure().unwrap().code,
        ToolErrorCode::Execution
    );
    assert_eq!(breaker(&h), BreakerStatus::Open);

    // The next trial succeeds and closes it.
    tokio::time::advance(Duration::from_millis(1_000)).await;
    assert!(h.call(T, "{}").await.result.failure().is_none());
    assert_eq!(breaker(&h), BreakerStatus::Closed);
    assert_eq!(tool.runs.load(Ordering::SeqCst), 5);
}

#[tokio::test(start_paused = true)]
async fn statistics_count_calls_failures_retries_and_latency() {
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(1)));
    let h = Harness::new(vec![tool as Arc<dyn BoundTool>], policy(no_jitter(3)));
    h.call(T, "{}").await; // one retry, then success
    h.call(T, "{}").await; // success
    h.call(T, "{not json").await; // never reaches execution
    let stats = h.runner.stats();
    assert_eq!(stats.len(), 1);
    let s = &stats[0];
    assert_eq!((s.calls, s.successes, s.retries), (2, 2, 1));
    assert!(s.failures.is_empty());
    assert_eq!(s.breaker, BreakerStatus::Closed);
    // The retried call waited 100 ms (virtual time); the median of the two is reported.
    assert!(s.latency.p99_us >= 100_000, "{:?}", s.latency);
}

/// A call whose tool answered but whose answer was refused after (its output breaks the tool's
/// own check, or is over the result budget) ended with no value: the statistics count it as
/// failed, by its category, never as a success. A tool that never succeeds shows none.
#[tokio::test(start_paused = true)]
async fn statistics_count_a_call_whose_answer_is_refused_as_failed() {
    let refused = |behaviour: Behaviour, max_result_bytes: usize| async move {
        let tool = FakeTool::new(T, ToolEffect::ReadOnly, behaviour);
        let mut p = policy(no_jitter(1));
        p.budgets.max_result_bytes = max_result_bytes;
        let h = Harness::new(vec![Arc::new(tool) as Arc<dyn BoundTool>], p);
        let code = h.call(T, "{}").await.result.failure().map(|f| f.code);
        (code, h.runner.stats().remove(0))
    };
    let (code, stats) = refused(Behaviour::Output(serde_json::json!("no object")), 1024).await;
    assert_eq!(code, Some(ToolErrorCode::OutputValidation));
    assert_eq!((stats.calls, stats.successes), (1, 0), "{stats:?}");
    assert_eq!(stats.failures.get(&ToolErrorCategory::Validation), Some(&1));

    let (code, stats) = refused(Behaviour::Echo, 4).await;
    assert_eq!(code, Some(ToolErrorCode::ResultTooLarge));
    assert_eq!((stats.calls, stats.successes), (1, 0), "{stats:?}");
    assert_eq!(stats.failures.get(&ToolErrorCategory::Permanent), Some(&1));
}

/// A call refused before its first attempt (its circuit is open, or the tool refuses it, as a
/// replay gives a recorded `circuit_open`) ended, failed: the statistics count it as they count
/// one whose answer steps 9 and 10 refuse, by its failure's category, but take no latency from
/// it, since nothing ran.
#[tokio::test(start_paused = true)]
async fn statistics_count_a_call_refused_before_its_first_attempt() {
    let mut p = one_strike();
    p.budgets.max_runtime_ms = 100;
    let sleeping = Behaviour::Sleep(Duration::from_secs(1));
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, sleeping));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
    let code = |run: ai_core::ToolRun| run.result.failure().map(|f| f.code);
    assert_eq!(code(h.call(T, "{}").await), Some(ToolErrorCode::Timeout));
    assert_eq!(
        code(h.call(T, "{}").await),
        Some(ToolErrorCode::CircuitOpen)
    );
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
    let stats = h.runner.stats().remove(0);
    assert_eq!((stats.calls, stats.successes), (2, 0), "{stats:?}");
    assert_eq!(stats.failures.get(&ToolErrorCategory::Timeout), Some(&1));
    assert_eq!(stats.failures.get(&ToolErrorCategory::Transient), Some(&1));
    assert_eq!(stats.latency.p50_us, 100_000, "{stats:?}");

    let recorded = ToolFailure::new(ToolErrorCode::CircuitOpen, "the recorded refusal");
    let refusing = FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Echo).refusing(recorded);
    let h = Harness::new(vec![Arc::new(refusing) as Arc<dyn BoundTool>], one_strike());
    assert_eq!(
        code(h.call(T, "{}").await),
        Some(ToolErrorCode::CircuitOpen)
    );
    let stats = h.runner.stats();
    assert_eq!(stats.len(), 1, "{stats:?}");
    assert_eq!((stats[0].calls, stats[0].successes), (1, 0), "{stats:?}");
    assert_eq!(
        stats[0].failures.get(&ToolErrorCategory::Transient),
        Some(&1)
    );
    assert_eq!(stats[0].breaker, BreakerStatus::Closed);
}

/// A half-open trial whose attempt succeeds holds its slot while steps 9 and 10 run on its
/// answer: a redaction that panics there is caught, the circuit closes (the tool answered), the
/// call is counted once, as failed, and the next call is let through.
#[tokio::test(start_paused = true)]
async fn a_trial_whose_redaction_panics_closes_the_circuit_and_counts_as_failed_once() {
    let mut p = policy(no_jitter(1));
    p.breaker.failure_threshold = 1;
    p.breaker.cool_down_ms = 1_000;
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(1)));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
    h.call(T, "{}").await;
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Open);
    tokio::time::advance(Duration::from_millis(1_000)).await;
    let run = h.call(T, r#"{"text": "panic in redact"}"#).await;
    let code = run.result.failure().map(|f| f.code);
    assert_eq!(code, Some(ToolErrorCode::RedactionFailed));
    let stats = h.runner.stats().remove(0);
    assert_eq!(stats.breaker, BreakerStatus::Closed);
    assert_eq!((stats.calls, stats.successes), (2, 0), "{stats:?}");
    assert_eq!(stats.failures.get(&ToolErrorCategory::Permanent), Some(&1));
    assert!(h.call(T, "{}").await.result.failure().is_none());
    assert_eq!(tool.runs.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn the_breaker_also_opens_on_a_failure_rate_in_a_window() {
    let mut p = policy(RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    });
    p.breaker.failure_threshold = 100; // consecutive failures alone never open it here
    p.breaker.failure_rate = Some(0.5);
    p.breaker.window = 4;
    // The tool fails its first two runs, then recovers.
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(2)));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
    for _ in 0..3 {
        h.call(T, "{}").await; // fail, fail, ok: window not full yet
    }
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Closed);
    h.call(T, "{}").await; // ok: window [F, F, ok, ok] is full at a 50% failure rate
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Open);
    assert_eq!(
        h.call(T, "{}").await.result.failure().unwrap().code,
        ToolErrorCode::CircuitOpen
    );
}

/// The failure-rate window starts afresh each time the circuit opens: the failures that opened
/// it were reckoned then, so the successful trial that closes it cannot open it again at once.
#[tokio::test(start_paused = true)]
async fn a_successful_trial_closes_the_circuit_whatever_the_window_held_before_it_opened() {
    let mut p = policy(RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    });
    p.breaker.failure_threshold = 3;
    p.breaker.cool_down_ms = 1_000;
    p.breaker.failure_rate = Some(0.75);
    p.breaker.window = 4;
    // Three failures open the circuit (by the threshold: the window is not full yet).
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(3)));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
    for _ in 0..3 {
        h.call(T, "{}").await;
    }
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Open);
    tokio::time::advance(Duration::from_millis(1_000)).await;
    // The trial succeeds: the tool recovered, and the circuit closes.
    assert!(h.call(T, "{}").await.result.failure().is_none());
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Closed);
    assert!(h.call(T, "{}").await.result.failure().is_none());
    assert_eq!(tool.runs.load(Ordering::SeqCst), 5);
}

/// A `failure_threshold` of 0 turns off the consecutive-failure rule only: a failure rate the
/// policy sets still opens the circuit (it "also" opens it, beside the threshold).
#[tokio::test(start_paused = true)]
async fn a_failure_rate_opens_the_circuit_without_a_failure_threshold() {
    let mut p = policy(RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    });
    p.breaker.failure_threshold = 0;
    p.breaker.failure_rate = Some(0.5);
    p.breaker.window = 4;
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(10)));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
    for _ in 0..3 {
        h.call(T, "{}").await;
    }
    // Three consecutive failures open nothing: the window is not full yet.
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Closed);
    h.call(T, "{}").await;
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Open);
    assert_eq!(
        h.call(T, "{}").await.result.failure().unwrap().code,
        ToolErrorCode::CircuitOpen
    );
    assert_eq!(tool.runs.load(Ordering::SeqCst), 4);
}

/// A policy whose breaker opens on the first counted failure and cools down for a second.
fn one_strike() -> ToolPolicy {
    let mut p = policy(RetryPolicy {
        max_attempts: 3,
        ..RetryPolicy::default()
    });
    p.breaker.failure_threshold = 1;
    p.breaker.cool_down_ms = 1_000;
    p
}

/// A token that fired before the call is answered `cancelled` before the tool's own refusal (a
/// replay's recorded `circuit_open`) or the breaker is asked: the call never reaches the tool,
/// and a refusal would say it did not run for another reason than the one that holds.
#[tokio::test(start_paused = true)]
async fn a_cancelled_call_is_answered_cancelled_before_a_refusal_or_the_breaker() {
    let recorded = ToolFailure::new(ToolErrorCode::CircuitOpen, "the recorded refusal");
    let refusing = FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Echo).refusing(recorded);
    let h = Harness::new(vec![Arc::new(refusing) as Arc<dyn BoundTool>], one_strike());
    h.cancel.cancel();
    let run = h.call(T, "{}").await;
    assert_eq!(
        run.result.failure().map(|f| f.code),
        Some(ToolErrorCode::Cancelled),
        "{run:?}"
    );

    // So is a call whose tool's circuit is open.
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Fail));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], one_strike());
    let code = |run: ai_core::ToolRun| run.result.failure().map(|f| f.code);
    assert_eq!(code(h.call(T, "{}").await), Some(ToolErrorCode::Execution));
    assert_eq!(
        code(h.call(T, "{}").await),
        Some(ToolErrorCode::CircuitOpen)
    );
    h.cancel.cancel();
    assert_eq!(code(h.call(T, "{}").await), Some(ToolErrorCode::Cancelled));
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_half_open_trial_gives_its_slot_back() {
    let tool = Arc::new(FakeTool::new(
        T,
        ToolEffect::ReadOnly,
        Behaviour::FailOnceThenSleep(Duration::from_millis(500)),
    ));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], one_strike());
    let code = |run: ai_core::ToolRun| run.result.failure().map(|f| f.code);
    assert_eq!(code(h.call(T, "{}").await), Some(ToolErrorCode::Execution));
    tokio::time::advance(Duration::from_millis(1_000)).await;

    // The run that gets the half-open trial is cancelled while its tool runs: that says nothing
    // about the tool. (A token that fired before the call never takes the trial.)
    let cancel = h.cancel.clone();
    let (trial, ()) = tokio::join!(h.call(T, "{}"), async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    assert_eq!(code(trial), Some(ToolErrorCode::Cancelled));
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::HalfOpen);

    // The next run's call is the trial; the tool is healthy, so the circuit closes.
    let h2 = Harness {
        cancel: ai_core::CancellationToken::new(),
        ..h
    };
    assert_eq!(code(h2.call(T, "{}").await), None);
    assert_eq!(h2.runner.stats()[0].breaker, BreakerStatus::Closed);
    assert_eq!(tool.runs.load(Ordering::SeqCst), 3);
}

/// A half-open trial whose call is dropped mid-attempt (its run went away) never reports, but
/// its slot comes back as it is dropped: that says nothing about the tool, as a cancel does not.
#[tokio::test(start_paused = true)]
async fn a_trial_whose_call_was_dropped_gives_its_slot_back() {
    let tool = Arc::new(FakeTool::new(
        T,
        ToolEffect::ReadOnly,
        Behaviour::FailOnceThenSleep(Duration::from_millis(100)),
    ));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], one_strike());
    let code = |run: ai_core::ToolRun| run.result.failure().map(|f| f.code);
    assert_eq!(code(h.call(T, "{}").await), Some(ToolErrorCode::Execution));
    tokio::time::advance(Duration::from_millis(1_000)).await;

    let dropped = tokio::time::timeout(Duration::from_millis(10), h.call(T, "{}")).await;
    assert!(dropped.is_err());
    // The next call is the trial at once; the tool is healthy, so the circuit closes.
    assert_eq!(code(h.call(T, "{}").await), None);
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Closed);
    assert_eq!(tool.runs.load(Ordering::SeqCst), 3);
}

/// Under a policy that lets two trials through at once, the first trial's call is dropped
/// mid-attempt while the second (let through later) runs: the first gives its slot back too,
/// though it is not the last let through, so a third call is let through as the second trial
/// rather than failing `circuit_open` with one trial in flight of the two allowed. So does a
/// first trial that is cancelled.
#[tokio::test(start_paused = true)]
async fn an_earlier_of_two_trials_gives_its_slot_back_too() {
    for cancelled in [false, true] {
        let tool = Arc::new(FakeTool::new(
            T,
            ToolEffect::ReadOnly,
            Behaviour::FailOnceThenSleep(Duration::from_millis(100)),
        ));
        let mut two_trials = one_strike();
        two_trials.breaker.half_open_trials = 2;
        let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], two_trials);
        let code = |run: ai_core::ToolRun| run.result.failure().map(|f| f.code);
        assert_eq!(code(h.call(T, "{}").await), Some(ToolErrorCode::Execution));
        tokio::time::advance(Duration::from_millis(1_000)).await;

        // The first trial, of a run of its own, is let through and left mid-attempt.
        let first_cancel = ai_core::CancellationToken::new();
        let call = ai_core::ToolCall {
            id: ai_core::ToolCallId::new("call_1").unwrap(),
            name: T.into(),
            arguments: "{}".into(),
        };
        let mut first_call =
            Box::pin((h.runner).run_tool(&call, &h.ctx, &h.catalog, &h.events, &first_cancel));
        let pending = tokio::time::timeout(Duration::from_millis(10), &mut first_call).await;
        assert!(pending.is_err());
        // The second trial is let through later, and runs meanwhile.
        let mut second = Box::pin(h.call(T, "{}"));
        let pending = tokio::time::timeout(Duration::from_millis(10), &mut second).await;
        assert!(pending.is_err());
        if cancelled {
            first_cancel.cancel();
            assert_eq!(code(first_call.await), Some(ToolErrorCode::Cancelled));
        } else {
            drop(first_call);
        }

        // One trial is in flight of the two allowed: the next call is let through.
        let (third, second) = tokio::join!(h.call(T, "{}"), second);
        assert_eq!(code(third), None, "cancelled: {cancelled}");
        assert_eq!(code(second), None);
        assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Closed);
    }
}

/// A half-open trial that never ends (its call's future is leaked mid-attempt, neither polled
/// nor dropped again) holds its slot; the slot goes to a new trial once a cool-down has passed
/// since it was let through, so a lost trial cannot keep the circuit shut.
#[tokio::test(start_paused = true)]
async fn a_trial_that_never_ends_is_replaced_after_a_cool_down() {
    let tool = Arc::new(FakeTool::new(
        T,
        ToolEffect::ReadOnly,
        Behaviour::FailOnceThenSleep(Duration::from_millis(100)),
    ));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], one_strike());
    let code = |run: ai_core::ToolRun| run.result.failure().map(|f| f.code);
    assert_eq!(code(h.call(T, "{}").await), Some(ToolErrorCode::Execution));
    tokio::time::advance(Duration::from_millis(1_000)).await;

    let mut lost = Box::pin(h.call(T, "{}"));
    assert!(
        tokio::time::timeout(Duration::from_millis(10), &mut lost)
            .await
            .is_err()
    );
    std::mem::forget(lost);
    // Meanwhile the slot is taken: calls fail fast until a cool-down from the lost trial.
    let fast = h.call(T, "{}").await;
    let failure = fast.result.failure().unwrap();
    assert_eq!(failure.code, ToolErrorCode::CircuitOpen);
    assert_eq!(failure.retry_after_ms, Some(990));

    tokio::time::advance(Duration::from_millis(990)).await;
    assert_eq!(code(h.call(T, "{}").await), None);
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Closed);
}

/// A clock that panics on one reading (counted from 0), and otherwise moves 5 ms a reading.
#[derive(Default)]
struct PanicsOnReading {
    readings: std::sync::atomic::AtomicU64,
    /// The reading that panics; none while 0.
    panics_at: std::sync::atomic::AtomicU64,
}

impl ai_core::Clock for PanicsOnReading {
    fn now_ms(&self) -> u64 {
        let reading = self.readings.fetch_add(1, Ordering::SeqCst);
        if reading > 0 && reading == self.panics_at.load(Ordering::SeqCst) {
            panic!("the clock broke");
        }
        reading * 5
    }
}

/// The clock, a port, panics inside a half-open trial's attempt (as it starts, or as it ends):
/// the panic unwinds out of the call before the attempt reaches the breaker, and the trial's
/// slot comes back with it rather than staying held until the cool-down passes.
#[tokio::test(start_paused = true)]
async fn a_trial_whose_clock_panics_mid_attempt_gives_its_slot_back() {
    // The readings of a call: the call's start, then its attempt's start and end.
    for reading_in_call in [1, 2] {
        let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(1)));
        let clock = Arc::new(PanicsOnReading::default());
        let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], one_strike());
        let source = ai_core::StaticToolSource::new(vec![tool.clone() as Arc<dyn BoundTool>]);
        let runner = ai_core::ToolRunner::new(
            Arc::new(source.unwrap()),
            Arc::new(one_strike()),
            clock.clone(),
        );
        let h = Harness { runner, ..h };
        let code = |run: ai_core::ToolRun| run.result.failure().map(|f| f.code);
        assert_eq!(code(h.call(T, "{}").await), Some(ToolErrorCode::Execution));
        tokio::time::advance(Duration::from_millis(1_000)).await;

        let at = clock.readings.load(Ordering::SeqCst) + reading_in_call;
        clock.panics_at.store(at, Ordering::SeqCst);
        assert!(unless_panics(h.call(T, "{}")).await.is_none());
        assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::HalfOpen);

        // The next call is the trial at once; the tool is healthy, so the circuit closes.
        assert_eq!(code(h.call(T, "{}").await), None, "{reading_in_call}");
        assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Closed);
    }
}

#[tokio::test(start_paused = true)]
async fn a_refused_input_is_a_validation_failure_that_never_opens_the_circuit() {
    let tool = Arc::new(FakeTool::new(
        T,
        ToolEffect::ReadOnly,
        Behaviour::RefuseInput,
    ));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], one_strike());
    for _ in 0..3 {
        let run = h.call(T, "{}").await;
        let failure = run.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::Validation);
        assert_eq!(failure.category, ToolErrorCategory::Validation);
        assert_eq!(failure.safe_message, "invalid tool arguments: no such file");
    }
    // Not retried (a read-only tool with three attempts allowed), and the circuit stays closed.
    assert_eq!(tool.runs.load(Ordering::SeqCst), 3);
    let stats = &h.runner.stats()[0];
    assert_eq!(stats.breaker, BreakerStatus::Closed);
    assert_eq!(stats.failures[&ToolErrorCategory::Validation], 3);
}

/// A trial that was replaced (it did not report within a cool-down) and then ends for a reason
/// that says nothing about the tool does not give away the slot its replacement holds.
#[tokio::test(start_paused = true)]
async fn a_replaced_trial_does_not_free_its_replacements_slot() {
    let tool = Arc::new(FakeTool::new(
        T,
        ToolEffect::ReadOnly,
        Behaviour::FailOnceThenSleep(Duration::from_secs(5)),
    ));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], one_strike());
    assert!(h.call(T, "{}").await.result.failure().is_some());
    tokio::time::advance(Duration::from_millis(1_000)).await;

    let run = |id: &str, cancel: ai_core::CancellationToken| {
        let call = ai_core::ToolCall {
            id: ai_core::ToolCallId::new(id).unwrap(),
            name: T.into(),
            arguments: "{}".into(),
        };
        let h = &h;
        async move {
            let run = h
                .runner
                .run_tool(&call, &h.ctx, &h.catalog, &h.events, &cancel)
                .await;
            run.result.failure().map(|f| f.code)
        }
    };
    let (a_token, b_token) = (
        ai_core::CancellationToken::new(),
        ai_core::CancellationToken::new(),
    );
    let after = |ms: u64, then: ai_core::CancellationToken| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        then
    };
    let (a, b, c, ()) = tokio::join!(
        // t=0: trial A; it is still running a cool-down later.
        run("call_a", a_token.clone()),
        // t=1000: B replaces it.
        async { run("call_b", after(1_000, b_token.clone()).await).await },
        // t=1600: A was cancelled at 1500; B still holds the one slot.
        async { run("call_c", after(1_600, Default::default()).await).await },
        async {
            after(1_500, a_token.clone()).await.cancel();
            after(200, b_token.clone()).await.cancel();
        },
    );
    assert_eq!(a, Some(ToolErrorCode::Cancelled));
    assert_eq!(b, Some(ToolErrorCode::Cancelled));
    assert_eq!(c, Some(ToolErrorCode::CircuitOpen));
}

/// A call whose own failure opened the circuit is not retried into it: no retry is announced or
/// waited for, and the call ends at once with the failure it had, counted in the statistics.
#[tokio::test(start_paused = true)]
async fn a_retry_the_circuit_would_refuse_is_neither_announced_nor_waited_for() {
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(1)));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], one_strike());
    let started = tokio::time::Instant::now();
    let run = h.call(T, "{}").await;
    let failure = run.result.failure().unwrap();
    assert_eq!(failure.code, ToolErrorCode::Execution);
    assert_eq!(failure.category, ToolErrorCategory::Transient);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert!(retry_waits(&h).is_empty(), "{:?}", h.events.events());
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
    assert_eq!(run.record.attempts.len(), 1);
    let stats = &h.runner.stats()[0];
    assert_eq!((stats.calls, stats.successes), (1, 0));
    assert_eq!(stats.failures[&ToolErrorCategory::Transient], 1);
    assert_eq!(stats.breaker, BreakerStatus::Open);
}

/// A circuit that opens while a retry waits (another call's failure) refuses the retry: the
/// call, which ran once, ends `circuit_open` and is counted.
#[tokio::test(start_paused = true)]
async fn a_retry_that_meets_a_circuit_opened_meanwhile_is_counted() {
    let mut p = one_strike();
    p.retry = no_jitter(3);
    p.breaker.failure_threshold = 2;
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(2)));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
    let second = async {
        // The first call failed at t=0 and waits 100 ms; this one fails at t=50, the second
        // failure in a row, and opens the circuit.
        tokio::time::sleep(Duration::from_millis(50)).await;
        h.call(T, "{}").await
    };
    let (first, second) = tokio::join!(h.call(T, "{}"), second);
    assert_eq!(
        first.result.failure().map(|f| f.code),
        Some(ToolErrorCode::CircuitOpen)
    );
    assert_eq!(
        second.result.failure().map(|f| f.code),
        Some(ToolErrorCode::Execution)
    );
    assert_eq!(tool.runs.load(Ordering::SeqCst), 2);
    let stats = &h.runner.stats()[0];
    assert_eq!((stats.calls, stats.successes), (2, 0));
    assert_eq!(stats.failures[&ToolErrorCategory::Transient], 2);
}

/// A retry of a tool that is not read-only (it is idempotent) that meets a circuit opened
/// meanwhile ends `circuit_open`, but its first attempt ran: what that attempt did may stand,
/// so the model is told to check before calling it again, as when the call is cancelled while
/// it waits. A read-only one is told only that the tool is paused.
#[tokio::test(start_paused = true)]
async fn a_retry_of_a_tool_that_is_not_read_only_meeting_an_open_circuit_says_it_may_have_made_its_change()
 {
    for effect in [ToolEffect::StateChange, ToolEffect::ReadOnly] {
        let mut p = one_strike();
        p.retry = no_jitter(3);
        p.breaker.failure_threshold = 2;
        let tool = Arc::new(FakeTool::new(T, effect, Behaviour::Flaky(2)).idempotent());
        let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
        let second = async {
            // The first call failed at t=0 and waits 100 ms; this one fails at t=50 and opens
            // the circuit.
            tokio::time::sleep(Duration::from_millis(50)).await;
            h.call(T, "{}").await
        };
        let (first, _second) = tokio::join!(h.call(T, "{}"), second);
        let failure = first.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::CircuitOpen);
        assert_eq!(failure.retry_after_ms, Some(950));
        let paused = "tool core__flaky failed repeatedly and is paused; try again in 950 ms or use \
                      another tool";
        if effect == ToolEffect::ReadOnly {
            assert_eq!(failure.safe_message, paused);
        } else {
            assert_eq!(
                failure.safe_message,
                format!(
                    "{paused}; the tool is not read-only and had started, so it may have made \
                     its change: check before calling it again"
                )
            );
        }
    }
}

/// A policy built in code skips [`ToolPolicy::check`], which refuses `cancelled` among the
/// retryable categories; the runner never retries a cancelled call all the same. A call whose
/// token fired before its first attempt is answered `cancelled` with the plain message (its
/// tool never started), never announced as retrying; nor is one cancelled mid-attempt.
#[tokio::test(start_paused = true)]
async fn a_cancelled_call_is_never_retried_whatever_the_policy_lists() {
    let mut retry = no_jitter(3);
    retry.retryable.insert(ToolErrorCategory::Cancelled);
    assert!(policy(retry.clone()).check().is_err());

    // Cancelled before its first attempt: the tool changes state, but never started.
    let tool = FakeTool::new(T, ToolEffect::StateChange, Behaviour::Echo).idempotent();
    let tool = Arc::new(tool);
    let h = Harness::new(
        vec![tool.clone() as Arc<dyn BoundTool>],
        policy(retry.clone()),
    );
    h.cancel.cancel();
    let run = h.call(T, "{}").await;
    let failure = run.result.failure().unwrap();
    assert_eq!(failure.code, ToolErrorCode::Cancelled);
    assert_eq!(failure.safe_message, "the tool call was cancelled");
    assert_eq!(run.record.attempts.len(), 1);
    assert_eq!(tool.runs.load(Ordering::SeqCst), 0);
    let retrying = |h: &Harness| {
        h.events
            .events()
            .iter()
            .any(|e| matches!(e, AiEvent::ToolCallRetrying { .. }))
    };
    assert!(!retrying(&h), "{:?}", h.events.events());

    // Cancelled while its tool ran.
    let tool = FakeTool::new(
        T,
        ToolEffect::ReadOnly,
        Behaviour::Sleep(Duration::from_millis(500)),
    );
    let h = Harness::new(vec![Arc::new(tool) as Arc<dyn BoundTool>], policy(retry));
    let cancel = h.cancel.clone();
    let (run, ()) = tokio::join!(h.call(T, "{}"), async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    assert_eq!(
        run.result.failure().map(|f| f.code),
        Some(ToolErrorCode::Cancelled)
    );
    assert_eq!(run.record.attempts.len(), 1);
    assert!(!retrying(&h), "{:?}", h.events.events());
}

/// A policy built in code may list as retryable the categories [`ToolPolicy::check`] refuses,
/// which no retry can help; the runner never retries them all the same, as loading a policy
/// never lets it: a tool's refusal of its arguments (`validation`) or a permanent failure runs
/// once, and no retry is announced.
#[tokio::test(start_paused = true)]
async fn a_failure_no_retry_helps_is_never_retried_whatever_the_policy_lists() {
    for (behaviour, category) in [
        (Behaviour::RefuseInput, ToolErrorCategory::Validation),
        (Behaviour::FailPermanently, ToolErrorCategory::Permanent),
    ] {
        let mut retry = no_jitter(3);
        retry.retryable.insert(category);
        let p = policy(retry);
        assert!(p.check().is_err());
        let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, behaviour));
        let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p);
        let run = h.call(T, "{}").await;
        let failure = run.result.failure().unwrap();
        assert_eq!(failure.category, category, "{run:?}");
        assert_eq!(tool.runs.load(Ordering::SeqCst), 1, "{category:?}");
        assert_eq!(run.record.attempts.len(), 1);
        let retrying = h
            .events
            .events()
            .into_iter()
            .filter(|e| matches!(e, AiEvent::ToolCallRetrying { .. }));
        assert_eq!(retrying.count(), 0, "{category:?}");
    }
}

/// A [`FakeTool`] whose `idempotent` panics: the runner asks it only once an attempt failed.
struct PanicsWhenAskedToRepeat(FakeTool);

#[async_trait::async_trait]
impl BoundTool for PanicsWhenAskedToRepeat {
    fn spec(&self) -> &ai_core::ToolSpec {
        self.0.spec()
    }
    fn idempotent(&self) -> bool {
        panic!("cannot tell");
    }
    fn validate_input(
        &self,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, ai_core::ToolError> {
        self.0.validate_input(args)
    }
    async fn exec(
        &self,
        permit: ai_core::ExecPermit,
        args: Arc<serde_json::Value>,
        ctx: &ai_core::ToolInvocationContext,
        caps: &ai_core::Capabilities,
    ) -> Result<serde_json::Value, ai_core::ToolError> {
        self.0.exec(permit, args, ctx, caps).await
    }
    fn validate_output(&self, output: &serde_json::Value) -> Result<(), ai_core::ToolError> {
        self.0.validate_output(output)
    }
    fn redact(&self, output: serde_json::Value) -> Result<serde_json::Value, ai_core::ToolError> {
        self.0.redact(output)
    }
}

/// Awaits `future`, turning a panic while it is polled into `None`.
async fn unless_panics<F: std::future::Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(poll) => poll.map(Some),
            Err(_) => std::task::Poll::Ready(None),
        }
    })
    .await
}

/// An attempt that failed is fed to the breaker before the tool is asked whether it may run
/// again: a tool whose `idempotent` panics (the panic unwinds out of `run_tool`, as for every
/// plain method of a tool's) does not leave its circuit as if the attempt never ran, nor keep
/// a half-open trial's slot until the cool-down passes.
#[tokio::test(start_paused = true)]
async fn a_failed_attempt_reaches_the_breaker_before_the_tool_is_asked_to_repeat() {
    let fails = FakeTool::new(T, ToolEffect::StateChange, Behaviour::Fail);
    let tool = Arc::new(PanicsWhenAskedToRepeat(fails));
    let h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], one_strike());
    assert!(unless_panics(h.call(T, "{}")).await.is_none());
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Open);

    // The half-open trial's failure opens the circuit again, rather than holding the slot.
    tokio::time::advance(Duration::from_millis(1_000)).await;
    assert!(unless_panics(h.call(T, "{}")).await.is_none());
    assert_eq!(h.runner.stats()[0].breaker, BreakerStatus::Open);
    assert_eq!(tool.0.runs.load(Ordering::SeqCst), 2);
}

/// A clock that, once armed, fires the run's token as it is read: a port the runner calls
/// between the start of a call and its attempt.
struct CancellingClock {
    cancel: ai_core::CancellationToken,
    armed: std::sync::atomic::AtomicBool,
}

impl ai_core::Clock for CancellingClock {
    fn now_ms(&self) -> u64 {
        if self.armed.load(Ordering::SeqCst) {
            self.cancel.cancel();
        }
        0
    }
}

/// Arms the clock at the event `arms` picks: the first clock read after it is the next
/// attempt's start.
struct ArmingSink<'a> {
    clock: &'a CancellingClock,
    arms: fn(&AiEvent) -> bool,
}

impl ai_core::EventSink for ArmingSink<'_> {
    fn emit(&self, event: AiEvent) {
        if (self.arms)(&event) {
            self.clock.armed.store(true, Ordering::SeqCst);
        }
    }
}

/// Runs a call of `tool` (up to three attempts, no jitter) by a runner whose clock fires the
/// run's token at its first read after the event `arms` picks. Returns the run and the runner,
/// whose statistics count it.
async fn run_cancelled_after(
    tool: Arc<FakeTool>,
    arms: fn(&AiEvent) -> bool,
) -> (ai_core::ToolRun, ai_core::ToolRunner) {
    let p = policy(no_jitter(3));
    let mut h = Harness::new(vec![tool.clone() as Arc<dyn BoundTool>], p.clone());
    let clock = Arc::new(CancellingClock {
        cancel: h.cancel.clone(),
        armed: false.into(),
    });
    let source = ai_core::StaticToolSource::new(vec![tool as Arc<dyn BoundTool>]);
    h.runner = ai_core::ToolRunner::new(Arc::new(source.unwrap()), Arc::new(p), clock.clone());
    let call = ai_core::ToolCall {
        id: ai_core::ToolCallId::new("call_1").unwrap(),
        name: T.into(),
        arguments: "{}".into(),
    };
    let sink = ArmingSink {
        clock: &clock,
        arms,
    };
    let run = (h.runner)
        .run_tool(&call, &h.ctx, &h.catalog, &sink, &h.cancel)
        .await;
    (run, h.runner)
}

/// A token that fires as the runner reads the clock for an attempt's start (after the call
/// started, before the tool is called) ends the call `cancelled` without running the tool, as
/// one that fired before the runner's check does: the tool finishing on its first poll does
/// not answer instead, nor does one that is pending then say it may have made its change. So
/// for a retry's attempt.
#[tokio::test(start_paused = true)]
async fn a_token_fired_as_an_attempt_starts_is_answered_before_the_tool_runs() {
    let starting: fn(&AiEvent) -> bool = |e| matches!(e, AiEvent::ToolCallStart { .. });
    let retrying: fn(&AiEvent) -> bool = |e| matches!(e, AiEvent::ToolCallRetrying { .. });
    for (tool, arms, runs) in [
        (
            FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Echo),
            starting,
            0,
        ),
        (
            FakeTool::new(T, ToolEffect::StateChange, Behaviour::YieldOnce),
            starting,
            0,
        ),
        (
            FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(1)),
            retrying,
            1,
        ),
    ] {
        let tool = Arc::new(tool);
        let (run, _) = run_cancelled_after(tool.clone(), arms).await;
        let failure = run.result.failure().expect("cancelled");
        assert_eq!(failure.code, ToolErrorCode::Cancelled, "{run:?}");
        assert_eq!(failure.safe_message, "the tool call was cancelled");
        assert_eq!(tool.runs.load(Ordering::SeqCst), runs);
    }
}

/// A retry whose token fires as its attempt starts never ran: the statistics count the call
/// `cancelled` with no retry made, as for a call cancelled while it waited to retry.
#[tokio::test(start_paused = true)]
async fn a_retry_cancelled_as_it_starts_is_not_counted_as_a_retry() {
    let tool = Arc::new(FakeTool::new(T, ToolEffect::ReadOnly, Behaviour::Flaky(1)));
    let (run, runner) = run_cancelled_after(tool.clone(), |e| {
        matches!(e, AiEvent::ToolCallRetrying { .. })
    })
    .await;
    assert_eq!(
        run.result.failure().map(|f| f.code),
        Some(ToolErrorCode::Cancelled)
    );
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
    let stats = &runner.stats()[0];
    assert_eq!((stats.calls, stats.successes, stats.retries), (1, 0, 0));
    assert_eq!(
        stats.failures.get(&ToolErrorCategory::Cancelled),
        Some(&1),
        "{stats:?}"
    );
}

//! The execution manager inside step 8: attempts under one total deadline, retries with
//! exponential backoff and full jitter (only for tools that are safe to run twice), a circuit
//! breaker per tool, and per-tool statistics.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{ExecPermit, budget};
use crate::{
    AiEvent, Attempt, BoundTool, BreakerPolicy, Capabilities, Clock, EventSink, RetryPolicy,
    ToolCallId, ToolEffect, ToolErrorCategory, ToolErrorCode, ToolFailure, ToolId,
    ToolInvocationContext, ToolPolicy,
};

/// Latency samples kept per tool for the percentiles.
const LATENCY_SAMPLES: usize = 512;

/// How many buckets tool ids are spread over for [`Registry::not_closed_in`].
const BUCKETS: usize = 32;

/// The bucket of [`Registry::not_closed_in`] a tool id falls in: a fixed hash, the same for every
/// registry.
fn bucket(id: &ToolId) -> usize {
    use std::hash::BuildHasher;
    let hash = foldhash::fast::FixedState::default().hash_one(id);
    // Less than `BUCKETS`, so the cast keeps it whole.
    (hash % BUCKETS as u64) as usize
}

/// A circuit's state, as reported in statistics. More states may come, so a match needs a
/// catch-all arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BreakerStatus {
    /// Calls pass.
    Closed,
    /// Calls fail fast until the cool-down ends.
    Open,
    /// A limited number of trial calls pass.
    HalfOpen,
}

/// Latency percentiles of a tool's recent calls, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyPercentiles {
    /// Median.
    pub p50_us: u64,
    /// 95th percentile.
    pub p95_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
}

impl LatencyPercentiles {
    /// Nearest-rank percentiles of `samples` (sorted in place); zeros when there are none.
    pub fn from_samples(samples: &mut [u64]) -> Self {
        samples.sort_unstable();
        // Nearest rank: the smallest sample with at least q% of samples at or below it.
        let at = |q: usize| {
            let rank = (samples.len() * q).div_ceil(100);
            samples.get(rank.saturating_sub(1)).copied().unwrap_or(0)
        };
        Self {
            p50_us: at(50),
            p95_us: at(95),
            p99_us: at(99),
        }
    }
}

/// What the runner has seen of one tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolStats {
    /// The tool.
    pub tool_id: ToolId,
    /// Calls that reached execution, as they ended: refused before any attempt (an open
    /// circuit, or the tool's own refusal) too.
    pub calls: u64,
    /// Calls that ended with a value (that passed the tool's output check, its redaction and the
    /// result budget too).
    pub successes: u64,
    /// Calls that failed, by the category of their failure: their last attempt's, or that of
    /// the output check, the redaction or the result budget that refused the tool's answer.
    pub failures: BTreeMap<ToolErrorCategory, u64>,
    /// Retries made.
    pub retries: u64,
    /// The circuit's state.
    pub breaker: BreakerStatus,
    /// Latency of recent calls, all attempts included; a call refused before any attempt has
    /// none.
    pub latency: LatencyPercentiles,
}

#[derive(Debug)]
enum Circuit {
    Closed {
        consecutive_failures: u32,
    },
    Open {
        until: Instant,
    },
    /// Trial attempts pass; `in_flight` of them have not reported yet, the last one let through
    /// at `since`. `round` tells this half-open spell from the earlier ones (and from the one a
    /// trial that never ended was replaced in): a trial of another round has no slot in it.
    HalfOpen {
        in_flight: u32,
        since: Instant,
        round: u64,
    },
}

/// The slot of an attempt let through a half-open circuit as a trial; `None` for an attempt
/// under a closed circuit (or with no breaker), which has nothing to give back.
type Trial<'a> = Option<TrialSlot<'a>>;

/// A half-open trial's slot, held from its admission until its attempt is fed to the breaker
/// ([`Registry::record`], which settles it). Dropped unsettled (a port panicked mid-attempt, the
/// clock say, and the panic unwound out of the call; or the call's future was dropped), it gives
/// the slot back, as a cancelled trial does: an attempt that never ended says nothing about the
/// tool.
struct TrialSlot<'a> {
    registry: &'a Registry,
    id: &'a ToolId,
    /// The half-open round it was let through in.
    round: u64,
}

impl TrialSlot<'_> {
    /// Hands the trial over to the breaker's reckoning: the round it was let through in.
    fn settle(self) -> u64 {
        let round = self.round;
        // Only references and a number: nothing is leaked.
        std::mem::forget(self);
        round
    }
}

impl Drop for TrialSlot<'_> {
    fn drop(&mut self) {
        self.registry.give_back(self.id, self.round);
    }
}

#[derive(Debug)]
struct Health {
    circuit: Circuit,
    calls: u64,
    successes: u64,
    failures: BTreeMap<ToolErrorCategory, u64>,
    retries: u64,
    latencies_us: VecDeque<u64>,
    /// Outcomes of the last attempts that count for the breaker (true: failed), since the circuit
    /// last closed; kept only under a policy with a failure rate.
    recent: VecDeque<bool>,
    /// Half-open rounds begun so far: the last one's number.
    rounds: u64,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            circuit: Circuit::Closed {
                consecutive_failures: 0,
            },
            calls: 0,
            successes: 0,
            failures: BTreeMap::new(),
            retries: 0,
            latencies_us: VecDeque::new(),
            recent: VecDeque::new(),
            rounds: 0,
        }
    }
}

/// Breakers and statistics of every tool a runner has run.
///
/// Looked up on every call, so hashed with foldhash rather than SipHash: the keys are the ids
/// of bound tools, never a name the model made up, so there is no flooding to resist.
#[derive(Debug, Default)]
pub(super) struct Registry {
    tools: Mutex<HashMap<ToolId, Health, foldhash::fast::RandomState>>,
    /// How many of `tools`' circuits are not closed; changed only under `tools`' lock, as a
    /// circuit leaves or enters `Closed` ([`Self::tracked`]). While it is 0, an attempt is
    /// admitted without the lock (see [`Self::admit`]).
    not_closed: AtomicUsize,
    /// The same count for the tools whose id falls in each [`bucket`], kept with it. While
    /// some circuit is not closed, a tool whose bucket counts none is still admitted without
    /// the lock: a circuit left open for good (its tool never called again, no trial closes
    /// it) costs the lock only to the tools of its bucket, not to every tool for ever.
    not_closed_in: [AtomicUsize; BUCKETS],
}

/// How a call ended, for its statistics.
struct CallEnd {
    /// From the start of its first attempt to its end; `None` for a call refused before any.
    latency: Option<Duration>,
    /// Retries made.
    retries: u32,
    /// The category of its failure; `None`: it ended with a value.
    failure: Option<ToolErrorCategory>,
}

/// Whether a failure says something about the tool's health (and so counts for its breaker).
fn counts_against_tool(category: ToolErrorCategory) -> bool {
    !matches!(
        category,
        ToolErrorCategory::Validation | ToolErrorCategory::Policy | ToolErrorCategory::Cancelled
    )
}

impl Registry {
    fn with<R>(&self, id: &ToolId, f: impl FnOnce(&mut Health) -> R) -> R {
        let mut tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        let f = |health: &mut Health| self.tracked(id, health, f);
        match tools.get_mut(id) {
            Some(health) => f(health),
            None => f(tools.entry(id.clone()).or_default()),
        }
    }

    /// Runs `f` on `id`'s `health` (under the lock), keeping [`Self::not_closed`] and
    /// [`Self::not_closed_in`] in step with its circuit.
    fn tracked<R>(&self, id: &ToolId, health: &mut Health, f: impl FnOnce(&mut Health) -> R) -> R {
        let was_closed = matches!(health.circuit, Circuit::Closed { .. });
        let answer = f(health);
        match (was_closed, matches!(health.circuit, Circuit::Closed { .. })) {
            (true, false) => {
                self.not_closed_in[bucket(id)].fetch_add(1, Ordering::Release);
                self.not_closed.fetch_add(1, Ordering::Release);
            }
            (false, true) => {
                self.not_closed_in[bucket(id)].fetch_sub(1, Ordering::Release);
                self.not_closed.fetch_sub(1, Ordering::Release);
            }
            _ => {}
        }
        answer
    }

    /// Whether every circuit is closed, read without the lock. A circuit that opens meanwhile
    /// does so under the lock, in a step that counts it before it ends: a caller that still
    /// reads 0 acts as if it had taken the lock just before that step, as it could have.
    ///
    /// The fast path of every successful call: the breaker's admission is otherwise a lock (two
    /// atomic read-modify-writes) and a map lookup only to learn that the circuit is closed.
    /// Skipping them takes `runner_pipeline` from 38 to 36 atomic operations and 170
    /// instructions fewer per call (callgrind).
    fn all_closed(&self) -> bool {
        self.not_closed.load(Ordering::Acquire) == 0
    }

    /// Whether `id`'s circuit is closed as far as can be told without the lock: every circuit
    /// is ([`Self::all_closed`], read first: the fast path hashes nothing), or none of its
    /// bucket's is ([`Self::not_closed_in`]; read alike, by the same reasoning). `false` says
    /// only that the lock must tell.
    fn closed_without_lock(&self, id: &ToolId) -> bool {
        self.all_closed() || self.closed_in_bucket(id)
    }

    /// Whether no circuit of `id`'s bucket is counted as not closed. Out of line, so that the
    /// fast path, into which [`Self::closed_without_lock`] is inlined, holds no hashing.
    #[inline(never)]
    fn closed_in_bucket(&self, id: &ToolId) -> bool {
        self.not_closed_in[bucket(id)].load(Ordering::Acquire) == 0
    }

    /// Lets an attempt through, or fails fast while the circuit is open. A half-open trial gets
    /// its slot, to hand back to [`Self::record`]; dropped before that, the slot comes back.
    ///
    /// A half-open trial that never ends (a future leaked mid-attempt, neither polled nor
    /// dropped) never reports; its slot is given to a new trial once a cool-down has passed
    /// since the last one was let through, so a lost trial cannot keep the circuit shut.
    fn admit<'a>(
        &'a self,
        id: &'a ToolId,
        policy: &BreakerPolicy,
        now: Instant,
    ) -> Result<Trial<'a>, ToolFailure> {
        if policy.is_off() || self.closed_without_lock(id) {
            return Ok(None);
        }
        self.with(id, |health| {
            match admission(&health.circuit, policy, now, health.rounds.wrapping_add(1)) {
                Ok(None) => Ok(None),
                Ok(Some((trial, round))) => {
                    health.circuit = trial;
                    health.rounds = round;
                    Ok(Some(TrialSlot {
                        registry: self,
                        id,
                        round,
                    }))
                }
                Err(wait) => Err(circuit_open(id, wait)),
            }
        })
    }

    /// Gives back the slot of a trial let through in `round` that never reported.
    fn give_back(&self, id: &ToolId, round: u64) {
        let mut tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(health) = tools.get_mut(id) {
            self.tracked(id, health, |health| {
                health.circuit = without_trial(&health.circuit, Some(round));
            });
        }
    }

    /// Whether the circuit, as it is now, would let an attempt through at `at` (taking no slot).
    fn would_admit(&self, id: &ToolId, policy: &BreakerPolicy, at: Instant) -> bool {
        policy.is_off()
            || self.closed_without_lock(id)
            || self.with(id, |health| {
                admission(&health.circuit, policy, at, health.rounds.wrapping_add(1)).is_ok()
            })
    }

    /// Feeds an attempt's outcome (`failure`) to the breaker and, for the call's last attempt,
    /// records how the call ended: one lock per attempt.
    fn record(
        &self,
        id: &ToolId,
        policy: &BreakerPolicy,
        now: Instant,
        failure: Option<ToolErrorCategory>,
        call: Option<CallEnd>,
        trial: Trial<'_>,
    ) {
        let trial = trial.map(TrialSlot::settle);
        self.with(id, |health| {
            if !policy.is_off() {
                health.circuit = next_circuit(&health.circuit, policy, now, failure, trial);
                // The window only feeds the failure-rate rule: a policy without one keeps none.
                if let Some(rate) = policy.failure_rate {
                    failure_rate_rule(health, policy, rate, now, failure);
                }
            }
            if let Some(CallEnd {
                latency,
                retries,
                failure,
            }) = call
            {
                health.calls += 1;
                health.retries += u64::from(retries);
                match failure {
                    None => health.successes += 1,
                    Some(category) => *health.failures.entry(category).or_default() += 1,
                }
                if let Some(latency) = latency {
                    if health.latencies_us.len() == LATENCY_SAMPLES {
                        health.latencies_us.pop_front();
                    }
                    let latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
                    health.latencies_us.push_back(latency_us);
                }
            }
        });
    }

    /// Records a call that ended outside an attempt (refused before its first, cancelled while
    /// waiting to retry, or refused by a circuit that opened meanwhile).
    fn record_call_only(&self, id: &ToolId, call: CallEnd) {
        let no_breaker = BreakerPolicy {
            failure_threshold: 0,
            failure_rate: None,
            ..BreakerPolicy::default()
        };
        let failure = call.failure;
        self.record(id, &no_breaker, Instant::now(), failure, Some(call), None);
    }

    /// A snapshot of every tool's statistics, ordered by id.
    pub(super) fn stats(&self, now: Instant) -> Vec<ToolStats> {
        let tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<ToolStats> = tools
            .iter()
            .map(|(id, health)| {
                let mut samples: Vec<u64> = health.latencies_us.iter().copied().collect();
                ToolStats {
                    tool_id: id.clone(),
                    calls: health.calls,
                    successes: health.successes,
                    failures: health.failures.clone(),
                    retries: health.retries,
                    breaker: match health.circuit {
                        Circuit::Closed { .. } => BreakerStatus::Closed,
                        Circuit::Open { until } if now < until => BreakerStatus::Open,
                        Circuit::Open { .. } | Circuit::HalfOpen { .. } => BreakerStatus::HalfOpen,
                    },
                    latency: LatencyPercentiles::from_samples(&mut samples),
                }
            })
            .collect();
        out.sort_by(|a, b| a.tool_id.cmp(&b.tool_id));
        out
    }
}

/// The failure-rate rule, once an attempt that ended at `now` with `failure` moved the circuit
/// to its next state: opens a closed circuit when at least `rate` of the last `policy.window`
/// counted attempts failed. The window holds only attempts that ended with the circuit closed,
/// since it last closed: it is emptied whenever an attempt leaves the circuit open or half-open
/// (the failures that opened it were reckoned then), so the trial that closes it again starts a
/// new window rather than join them.
fn failure_rate_rule(
    health: &mut Health,
    policy: &BreakerPolicy,
    rate: f64,
    now: Instant,
    failure: Option<ToolErrorCategory>,
) {
    if !matches!(health.circuit, Circuit::Closed { .. }) {
        health.recent.clear();
        return;
    }
    if !failure.is_none_or(counts_against_tool) {
        return;
    }
    let window = policy.window.max(1) as usize;
    if health.recent.len() >= window {
        health.recent.pop_front();
    }
    health.recent.push_back(failure.is_some());
    let failed = health.recent.iter().filter(|f| **f).count();
    if health.recent.len() >= window && failed > 0 && failed as f64 >= rate * window as f64 {
        health.circuit = Circuit::Open {
            until: budget::later(now, Duration::from_millis(policy.cool_down_ms)),
        };
        health.recent.clear();
    }
}

/// What a circuit does with an attempt at `now`: lets it through under a closed circuit
/// (`Ok(None)`), lets it through as a half-open trial (`Ok(Some((state, round)))`: the state the
/// trial leaves, and the round it is let through in, `new_round` when it begins one), or refuses
/// it for the wait given.
fn admission(
    circuit: &Circuit,
    policy: &BreakerPolicy,
    now: Instant,
    new_round: u64,
) -> Result<Option<(Circuit, u64)>, Duration> {
    let cool_down = Duration::from_millis(policy.cool_down_ms);
    let trial = |in_flight, round| {
        Ok(Some((
            Circuit::HalfOpen {
                in_flight,
                since: now,
                round,
            },
            round,
        )))
    };
    match *circuit {
        Circuit::Closed { .. } => Ok(None),
        Circuit::Open { until } if now >= until => trial(1, new_round),
        Circuit::HalfOpen {
            in_flight, round, ..
        } if in_flight < policy.half_open_trials.max(1) => trial(in_flight + 1, round),
        // A trial that never ended is replaced: a new round, in which it has no slot.
        Circuit::HalfOpen { since, .. } if now >= budget::later(since, cool_down) => {
            trial(1, new_round)
        }
        Circuit::Open { until } => Err(until.saturating_duration_since(now)),
        Circuit::HalfOpen { since, .. } => {
            Err(budget::later(since, cool_down).saturating_duration_since(now))
        }
    }
}

/// A circuit once a trial let through in round `trial` ended saying nothing about the tool: a
/// half-open circuit gets its slot back if the trial is of its round (whichever of the round's
/// trials it is), not if it is of an earlier one (a trial that never ended was replaced since).
fn without_trial(circuit: &Circuit, trial: Option<u64>) -> Circuit {
    match *circuit {
        Circuit::HalfOpen {
            in_flight,
            since,
            round,
        } => Circuit::HalfOpen {
            in_flight: if trial == Some(round) {
                in_flight.saturating_sub(1)
            } else {
                in_flight
            },
            since,
            round,
        },
        Circuit::Closed {
            consecutive_failures,
        } => Circuit::Closed {
            consecutive_failures,
        },
        Circuit::Open { until } => Circuit::Open { until },
    }
}

/// The breaker's next state after an attempt (`trial`: the round it was let through in
/// half-open).
fn next_circuit(
    circuit: &Circuit,
    policy: &BreakerPolicy,
    now: Instant,
    failure: Option<ToolErrorCategory>,
    trial: Option<u64>,
) -> Circuit {
    let open = Circuit::Open {
        until: budget::later(now, Duration::from_millis(policy.cool_down_ms)),
    };
    match (failure, circuit) {
        (None, _) => Circuit::Closed {
            consecutive_failures: 0,
        },
        (
            Some(category),
            Circuit::Closed {
                consecutive_failures,
            },
        ) if !counts_against_tool(category) => Circuit::Closed {
            consecutive_failures: *consecutive_failures,
        },
        (Some(category), Circuit::Open { until }) if !counts_against_tool(category) => {
            Circuit::Open { until: *until }
        }
        // A trial that ended for a reason that says nothing about the tool (cancelled, say)
        // gives its slot back, unless a trial that replaced it has had it since.
        (Some(category), Circuit::HalfOpen { .. }) if !counts_against_tool(category) => {
            without_trial(circuit, trial)
        }
        (Some(_), Circuit::HalfOpen { .. } | Circuit::Open { .. }) => open,
        (
            Some(_),
            Circuit::Closed {
                consecutive_failures,
            },
        ) => {
            // A threshold of 0 leaves opening to the failure-rate rule alone.
            let failures = consecutive_failures.saturating_add(1);
            if policy.failure_threshold > 0 && failures >= policy.failure_threshold {
                open
            } else {
                Circuit::Closed {
                    consecutive_failures: failures,
                }
            }
        }
    }
}

fn circuit_open(id: &ToolId, wait: Duration) -> ToolFailure {
    ToolFailure::new(
        ToolErrorCode::CircuitOpen,
        format!(
            "tool {id} failed repeatedly and is paused; try again in {} ms or use another tool",
            wait.as_millis()
        ),
    )
    .with_retry_after_ms(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX))
}

/// A deterministic pseudo-random fraction in `[0, 1)` for full jitter (splitmix64 over the
/// call id and the attempt), so a retry schedule can be replayed.
fn jitter_fraction(call_id: &ToolCallId, retry: u32) -> f64 {
    let mut x = call_id
        .as_str()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
        ^ u64::from(retry);
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x >> 11) as f64 / (1_u64 << 53) as f64
}

/// The wait before retry `retry` of `call_id` under `policy`, honouring a tool's `retry_after`.
pub(super) fn backoff(
    policy: &RetryPolicy,
    call_id: &ToolCallId,
    retry: u32,
    retry_after_ms: Option<u64>,
) -> Duration {
    let delay = policy.delay_ms(retry);
    let delay = if policy.jitter {
        (delay as f64 * jitter_fraction(call_id, retry)) as u64
    } else {
        delay
    };
    Duration::from_millis(delay.max(retry_after_ms.unwrap_or(0)))
}

/// What step 8 needs from the runner.
pub(super) struct Step8<'a> {
    pub(super) registry: &'a Registry,
    pub(super) clock: &'a dyn Clock,
    pub(super) policy: &'a ToolPolicy,
    pub(super) events: &'a dyn EventSink,
    pub(super) cancel: &'a CancellationToken,
    /// When the call's runtime budget started counting (before the ports of steps 3 and 6).
    pub(super) call_started: Instant,
}

/// What an attempt reads as it starts, in this order: the clock (its start in the record) and
/// then the token. The clock is a port, and whatever fires the token in it (or in any port
/// before) is seen before the tool is asked or called: only the tool's own code
/// (`refused_before_attempt`, `exec`) and the breaker's admission run between this check and
/// the tool's first poll. The token is read once per attempt: its check takes a lock.
#[derive(Clone, Copy)]
struct AttemptStart {
    /// The clock's time (ms) as the attempt started.
    at_ms: u64,
    /// The token had fired.
    cancelled: bool,
}

impl Step8<'_> {
    /// Starts an attempt: see [`AttemptStart`].
    fn start_attempt(&self) -> AttemptStart {
        let at_ms = super::port_call(super::THE_CLOCK, || self.clock.now_ms());
        AttemptStart {
            at_ms,
            cancelled: self.cancel.is_cancelled(),
        }
    }

    /// When the call runs out of its total runtime budget.
    fn call_deadline(&self) -> Instant {
        let budget = Duration::from_millis(self.policy.budgets.max_runtime_ms);
        budget::later(self.call_started, budget)
    }

    /// The deadline and the budget of an attempt that starts at `now`: the per-attempt timeout,
    /// capped by what is left of the call's total budget.
    fn attempt_deadline(&self, id: &ToolId, now: Instant) -> (Instant, Duration) {
        let remaining = self.call_deadline().saturating_duration_since(now);
        let budget = self
            .policy
            .retry_for(id)
            .attempt_timeout_ms
            .map_or(remaining, |ms| Duration::from_millis(ms).min(remaining));
        (budget::later(now, budget), budget)
    }
}

/// Runs the tool's attempts: each under the per-attempt timeout and what is left of the total
/// budget; retried only when the tool is read-only or idempotent, the failure's category is
/// retryable and the wait fits in the budget (a wait whose timer fires past the deadline starts
/// no retry); cancellation stops an attempt or a wait at once,
/// and a token that fired before an attempt ends it `cancelled` before the tool's
/// [`BoundTool::refused_before_attempt`] or the breaker is asked.
///
/// The value of the attempt that succeeds is handed to `answer` (steps 9 and 10), whose result is
/// the call's: a value refused there ends the call failed in the statistics too, while the
/// breaker, which weighs the tool's attempts, saw the attempt succeed.
///
/// The first attempt is the whole of most calls, so it is all this future holds; the retries
/// live in their own boxed future, made only when the first attempt fails.
#[allow(clippy::too_many_arguments)] // The step's inputs, named.
pub(super) async fn execute(
    step: Step8<'_>,
    first_attempt_at: Instant,
    tool: &dyn BoundTool,
    args: &Arc<Value>,
    invocation: &ToolInvocationContext,
    caps: &Capabilities,
    attempts: &mut Vec<Attempt>,
    answer: impl FnOnce(Value) -> Result<Value, ToolFailure>,
) -> Result<Value, ToolFailure> {
    // Read once, before any slot of the breaker is taken: a panic in it (unwinding out of the
    // call) cannot leave a half-open trial's slot held.
    let spec = budget::tool_code(|| tool.spec());
    let id = &spec.id;
    // A token that fired already is answered first: the attempt ends `cancelled` without calling
    // the tool, and neither the tool's own refusal (a replay's recorded one) nor the breaker,
    // whose half-open slot it would take, is asked why else it would not run.
    let start = step.start_attempt();
    let trial = if start.cancelled {
        None
    } else {
        let admitted = match budget::tool_code(|| tool.refused_before_attempt(invocation, args, 1))
        {
            Some(refused) => Err(refused),
            None => (step.registry).admit(id, &step.policy.breaker, first_attempt_at),
        };
        admitted.map_err(|refused| refused_before_any_attempt(step.registry, id, refused))?
    };
    let attempting = Attempting {
        step: &step,
        tool,
        spec,
        args,
        invocation,
        caps,
        first_attempt_at,
    };
    let (result, now) = (attempting)
        .attempt(attempts, first_attempt_at, 1, start)
        .await;
    match result {
        Ok(value) => attempting.answered(value, answer, now, 0, trial),
        Err(failure) => Box::pin(attempting.retry(attempts, now, failure, trial, answer)).await,
    }
}

/// A call refused (`refusal`) before its first attempt, by the tool or by its open circuit:
/// it ended, failed, and is counted so, as one whose answer steps 9 and 10 refuse is, though
/// nothing ran (no latency, and nothing for the breaker).
#[cold]
fn refused_before_any_attempt(
    registry: &Registry,
    id: &ToolId,
    refusal: ToolFailure,
) -> ToolFailure {
    let call = CallEnd {
        latency: None,
        retries: 0,
        failure: Some(refusal.category),
    };
    registry.record_call_only(id, call);
    refusal
}

/// What every attempt of one call shares.
struct Attempting<'a> {
    step: &'a Step8<'a>,
    tool: &'a dyn BoundTool,
    /// The tool's spec, read once for the call.
    spec: &'a crate::ToolSpec,
    args: &'a Arc<Value>,
    invocation: &'a ToolInvocationContext,
    caps: &'a Capabilities,
    /// When attempt 1 started: the call's latency, in the statistics, counts from here.
    first_attempt_at: Instant,
}

impl Attempting<'_> {
    /// One attempt, starting at `now`: run under its budget and the cancellation token, and
    /// added to `attempts`; `start`: what [`Step8::start_attempt`] read just before (a fired
    /// token ends the attempt `cancelled` without calling the tool). Returns how it ended and
    /// when.
    async fn attempt(
        &self,
        attempts: &mut Vec<Attempt>,
        now: Instant,
        number: u32,
        start: AttemptStart,
    ) -> (Result<Value, ToolFailure>, Instant) {
        let Self {
            step,
            tool,
            spec,
            args,
            ..
        } = self;
        let deadline = || step.attempt_deadline(&spec.id, now);
        let stopping = budget::Stopping {
            changes_state: spec.effect != ToolEffect::ReadOnly,
            ran_before: number > 1,
        };
        let result = if start.cancelled {
            // Checked before `exec` is called, not only before its future is polled: a
            // hand-written impl may do its work as it is called.
            Err(stopping.cancelled(false))
        } else {
            // Called as the tool's code too: a tool that panics before it hands back its future
            // (a hand-written impl doing its work up front) fails its attempt as one that
            // panics while polled does, and its message is kept out of the output.
            let exec = budget::unless_panics(|| {
                tool.exec(
                    ExecPermit::new(),
                    Arc::clone(args),
                    self.invocation,
                    self.caps,
                )
            });
            match exec {
                Some(exec) => budget::run(exec, deadline, step.cancel, stopping).await,
                None => Err(stopping.panicked()),
            }
        };
        let ended = Instant::now();
        // A tool that blocks instead of awaiting cannot be stopped at its deadline; finished
        // past it, it still ends `timeout`, as the budget says (its change, if it makes one,
        // is made).
        let result = match result {
            Ok(_) => match deadline() {
                (deadline, budget) if ended > deadline => Err(stopping.timed_out(budget)),
                _ => result,
            },
            failed => failed,
        };
        // Most calls make one attempt: room for exactly one, not the default four (and for the
        // first, allocated as such rather than grown from nothing: ~40 instructions less).
        if attempts.capacity() == 0 {
            *attempts = Vec::with_capacity(1);
        } else {
            attempts.reserve_exact(1);
        }
        attempts.push(Attempt {
            number,
            started_at_ms: start.at_ms,
            ended_at_ms: super::port_call(super::THE_CLOCK, || step.clock.now_ms()),
            error: result.as_ref().err().cloned(),
        });
        (result, ended)
    }

    /// The call's successful attempt, ended at `now` after `retries` retries (let through as
    /// `trial`), gave `value`: the call's answer is what `answer` makes of it, and the call is
    /// recorded as that answer ends it.
    fn answered(
        &self,
        value: Value,
        answer: impl FnOnce(Value) -> Result<Value, ToolFailure>,
        now: Instant,
        retries: u32,
        trial: Trial<'_>,
    ) -> Result<Value, ToolFailure> {
        let answered = answer(value);
        let call = CallEnd {
            latency: Some(now - self.first_attempt_at),
            retries,
            failure: answered.as_ref().err().map(|failure| failure.category),
        };
        let step = self.step;
        (step.registry).record(
            &self.spec.id,
            &step.policy.breaker,
            now,
            None,
            Some(call),
            trial,
        );
        answered
    }

    /// After attempt 1 (let through as `trial`) failed with `failure` at `now`: waits and tries
    /// again while the tool is safe to repeat, the failure's category is retryable and the wait
    /// fits in the budget; the value of an attempt that succeeds goes to `answer`.
    async fn retry(
        &self,
        attempts: &mut Vec<Attempt>,
        mut now: Instant,
        mut failure: ToolFailure,
        mut trial: Trial<'_>,
        answer: impl FnOnce(Value) -> Result<Value, ToolFailure>,
    ) -> Result<Value, ToolFailure> {
        let step = self.step;
        let spec = self.spec;
        let id = &spec.id;
        let breaker = &step.policy.breaker;
        let retry = step.policy.retry_for(id);
        // Asked once the failed attempt is fed to the breaker (below): a tool whose `idempotent`
        // panics unwinds out of the call with its attempt counted and its half-open trial's
        // slot, if it had one, settled.
        let mut max_attempts = None;
        let started = self.first_attempt_at;
        let deadline = step.call_deadline();
        let mut number = 1;
        loop {
            let wait = backoff(
                retry,
                &self.invocation.tool_call_id,
                number,
                failure.retry_after_ms,
            );
            step.registry
                .record(id, breaker, now, Some(failure.category), None, trial);
            let max_attempts = *max_attempts.get_or_insert_with(|| {
                let safe_to_repeat = spec.effect == ToolEffect::ReadOnly
                    || budget::tool_code(|| self.tool.idempotent());
                if safe_to_repeat {
                    retry.max_attempts.max(1)
                } else {
                    1
                }
            });
            let allowed = number < max_attempts
                && may_retry(retry, failure.category)
                && budget::later(now, wait) < deadline;
            // A retry the circuit (opened by this failure, say) would refuse when its wait ends
            // is not announced or waited for: the call ends now, with the failure it had.
            if !(allowed && (step.registry).would_admit(id, breaker, budget::later(now, wait))) {
                let call = CallEnd {
                    latency: Some(now - started),
                    retries: number - 1,
                    failure: Some(failure.category),
                };
                step.registry.record_call_only(id, call);
                return Err(failure);
            }
            number += 1;
            step.events.emit(AiEvent::ToolCallRetrying {
                tool_call_id: self.invocation.tool_call_id.clone(),
                attempt: number,
                max_attempts,
                retry_in_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                category: failure.category,
            });
            // Attempts ran: a tool that is not read-only may have made its change.
            let stopping = budget::Stopping {
                changes_state: spec.effect != ToolEffect::ReadOnly,
                ran_before: true,
            };
            if !sleep_unless_cancelled(wait, step.cancel).await {
                let cancelled = stopping.cancelled(false);
                let call = CallEnd {
                    latency: Some(Instant::now() - started),
                    retries: number - 2,
                    failure: Some(ToolErrorCategory::Cancelled),
                };
                step.registry.record_call_only(id, call);
                return Err(cancelled);
            }
            now = Instant::now();
            // The wait fitted in the budget, but its timer may fire late (a busy runtime): a
            // retry with no budget left is not started, and the call ends with the failure it had.
            if now >= deadline {
                let call = CallEnd {
                    latency: Some(now - started),
                    retries: number - 2,
                    failure: Some(failure.category),
                };
                step.registry.record_call_only(id, call);
                return Err(failure);
            }
            // As for the first attempt, a fired token comes before any refusal.
            let start = step.start_attempt();
            // A refusal the tool gives (a replay's recorded one) is passed on as it is: it
            // already says what the recorded run said. The breaker's own says what ran.
            let refused = if start.cancelled {
                Ok(None)
            } else {
                budget::tool_code(|| {
                    (self.tool).refused_before_attempt(self.invocation, self.args, number)
                })
                .map_or_else(
                    || {
                        (step.registry.admit(id, breaker, now))
                            .map_err(|open| stopping.refused(open))
                    },
                    Err,
                )
            };
            trial = match refused {
                Ok(trial) => trial,
                // The circuit opened meanwhile: the call, which ran, ends here and is counted.
                Err(open) => {
                    let call = CallEnd {
                        latency: Some(now - started),
                        retries: number - 2,
                        failure: Some(open.category),
                    };
                    step.registry.record_call_only(id, call);
                    return Err(open);
                }
            };
            let (result, ended) = self.attempt(attempts, now, number, start).await;
            now = ended;
            match result {
                Ok(value) => return self.answered(value, answer, now, number - 1, trial),
                // Cancelled as it started, the retry never ran: the call ends as one cancelled
                // while it waited, with no retry made (the breaker has nothing to weigh).
                Err(cancelled) if start.cancelled => {
                    let call = CallEnd {
                        latency: Some(now - started),
                        retries: number - 2,
                        failure: Some(cancelled.category),
                    };
                    step.registry.record_call_only(id, call);
                    return Err(cancelled);
                }
                Err(next) => failure = next,
            }
        }
    }
}

/// Whether `retry` lets a failure of `category` be tried again: never one of the categories
/// [`ToolPolicy::check`] refuses among the retryable ones (`validation`, `permanent`,
/// `cancelled`, `policy`), whatever it lists. A policy built in code need not pass the check,
/// but what no retry can help is the same whoever built the policy: the same arguments fail
/// the same way, a permanent failure happens again, and a cancel is the caller's word to stop
/// (a retry would be announced for a call that will not run again, its failure saying the
/// tool may have made its change though it never started). Refusing such a policy when the
/// runner is built instead would make [`crate::ToolRunner::new`] fallible, and would refuse the
/// recorded policies a replay runs as they were.
fn may_retry(retry: &RetryPolicy, category: ToolErrorCategory) -> bool {
    crate::policy::no_retry_helps(category).is_none() && retry.retryable.contains(&category)
}

/// Sleeps for `wait`; `false` when the token fired first.
async fn sleep_unless_cancelled(wait: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        biased;
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(wait) => true,
    }
}

#[cfg(test)]
mod tests;

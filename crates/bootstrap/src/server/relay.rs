//! A run's events on their way to its client's stream, cut for a client that stops reading,
//! never for a burst (unless the grace is 0): held without a cut while the client keeps taking
//! them, within a hard bound of bytes.
//!
//! `record::start_run` hands each stored event on at once, through a channel without bound: the
//! run is never slowed down by its client. A stream's body is polled only as fast as its client
//! reads, so a client that reads slowly, or not at all, would leave every event of its run in
//! that channel for as long as its connection stays open. The relay takes them from there as
//! they come and queues them for the stream, and cuts the client's stream when either
//!
//! - more than `max_events` ([`AppState::with_max_unsent_events`], 4,096) wait and the client
//!   has taken none of them for `grace` ([`AppState::with_slow_client_grace`], 10 s) since they
//!   went over that number: a client that reads nothing, or far slower than its run goes. A
//!   client that reads is not cut for a burst (a very fast model while the store commits
//!   slowly hands on thousands of events at once): it takes them as fast as it can. A grace of
//!   0 (no grace) gives that up: the bound of events is then hard, for a reader too;
//! - or what waits would pass `max_bytes` ([`AppState::with_max_unsent_bytes`], 16 MiB, the
//!   events counted as JSON): the hard bound of the memory a client holds in the server,
//!   whether it reads or not. A single event larger than that is passed on when nothing else
//!   waits.
//!
//! At the cut the relay warns, drops what was waiting (the memory is free at once, though the
//! client never reads again), and drops the run's events, so the run's recorder drops the rest
//! of them (it stores them all first, and the thread is saved as always: the run goes on).
//! The stream then ends in its protocol's terminal error, made when the client reads that far
//! (`sse_response`): the cut holds no memory for it.
//!
//! [`AppState::with_max_unsent_events`]: super::AppState::with_max_unsent_events
//! [`AppState::with_slow_client_grace`]: super::AppState::with_slow_client_grace
//! [`AppState::with_max_unsent_bytes`]: super::AppState::with_max_unsent_bytes

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ai_core::AiEvent;
use tokio::sync::Notify;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

/// The default of [`AppState::with_max_unsent_events`](super::AppState::with_max_unsent_events):
/// how many of a run's events may wait for its client before a client that takes none of them
/// for [`DEFAULT_SLOW_CLIENT_GRACE`] has its stream cut.
///
/// A count of events, not of bytes: most are text deltas of a few bytes, so 4,096 is a few
/// seconds of the fastest model's output, far more than a client that reads keeps waiting.
pub const DEFAULT_MAX_UNSENT_EVENTS: usize = 4096;

/// The default of [`AppState::with_slow_client_grace`](super::AppState::with_slow_client_grace):
/// how long a client may take none of its run's events while more than the bound of them wait,
/// before its stream is cut.
pub const DEFAULT_SLOW_CLIENT_GRACE: Duration = Duration::from_secs(10);

/// The default of [`AppState::with_max_unsent_bytes`](super::AppState::with_max_unsent_bytes):
/// the most bytes (the events as JSON) of a run's events that may wait for its client, read it
/// or not, before its stream is cut: 16 MiB.
pub const DEFAULT_MAX_UNSENT_BYTES: usize = 16 << 20;

/// When a client's stream is cut.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bounds {
    /// How many events may wait before a client that takes none is cut.
    pub(super) max_events: usize,
    /// How long a client may take none of them while more than `max_events` wait: one longer
    /// than the clock counts (`Duration::MAX`) never passes.
    pub(super) grace: Duration,
    /// The most bytes that may wait, whether the client reads or not.
    pub(super) max_bytes: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            max_events: DEFAULT_MAX_UNSENT_EVENTS,
            grace: DEFAULT_SLOW_CLIENT_GRACE,
            max_bytes: DEFAULT_MAX_UNSENT_BYTES,
        }
    }
}

/// What waits for the clients of every stream of a server.
#[derive(Debug, Default)]
pub(super) struct Unsent {
    /// The events waiting.
    pub(super) events: AtomicUsize,
    /// Their bytes, as JSON.
    pub(super) bytes: AtomicUsize,
}

impl Unsent {
    fn add(&self, bytes: usize) {
        self.events.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn sub(&self, events: usize, bytes: usize) {
        self.events.fetch_sub(events, Ordering::Relaxed);
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// The events waiting for one client, shared by the relay and the stream.
struct Queue {
    /// Each event with its size in bytes.
    events: VecDeque<(AiEvent, usize)>,
    /// The sum of their sizes.
    bytes: usize,
    /// When the client last took an event (or its stream began).
    last_taken: Instant,
    /// The run's events ended: nothing more comes.
    ended: bool,
    /// The client fell too far behind: what waited was dropped and nothing more comes.
    cut: bool,
    /// The stream was dropped: the relay drops what comes.
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the stream: an event came, the run's events ended, or the client was cut.
    ready: Notify,
    /// Wakes the relay: the stream was dropped.
    gone: Notify,
    unsent: Arc<Unsent>,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics while it is held; a poisoned queue is still consistent.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the stream of a run shows its client: the events the relay passed on, and whether the
/// client fell too far behind.
pub(super) struct ClientEvents {
    shared: Arc<Shared>,
}

impl ClientEvents {
    /// The next event; `None` once the run's events ended or the client was cut.
    pub(super) async fn recv(&mut self) -> Option<AiEvent> {
        loop {
            {
                let mut queue = self.shared.queue();
                if let Some((event, bytes)) = queue.events.pop_front() {
                    queue.bytes -= bytes;
                    queue.last_taken = Instant::now();
                    self.shared.unsent.sub(1, bytes);
                    return Some(event);
                }
                if queue.ended || queue.cut {
                    return None;
                }
            }
            // One waiter: a wake-up that came meanwhile is kept as a permit.
            self.shared.ready.notified().await;
        }
    }

    /// Whether the client fell too far behind and its stream was cut.
    pub(super) fn was_cut(&self) -> bool {
        self.shared.queue().cut
    }
}

impl Drop for ClientEvents {
    fn drop(&mut self) {
        let mut queue = self.shared.queue();
        queue.closed = true;
        let events = std::mem::take(&mut queue.events);
        self.shared.unsent.sub(events.len(), queue.bytes);
        queue.bytes = 0;
        drop(queue);
        self.shared.gone.notify_one();
    }
}

/// The size of `event` as JSON, without writing it anywhere.
fn size_of(event: &AiEvent) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // An event always encodes (its maps have text keys); what was counted stands otherwise.
    let _ = serde_json::to_writer(&mut count, event);
    count.0
}

/// Why a client's stream was cut, for the server's log.
enum Cut {
    /// It took nothing for the grace while more than the bound of events waited.
    Stalled,
    /// What waited would have passed the bound of bytes.
    Bytes,
}

/// Passes `events` on as they come, cutting the client's stream within `bounds` (see the
/// module's doc); `unsent` counts what waits, with the other streams'. The relay ends with the
/// run's events once what waits is within the bound of events (or taken), when the stream is
/// dropped (its client went away), or at a cut.
pub(super) fn relay(
    mut events: UnboundedReceiver<AiEvent>,
    bounds: Bounds,
    unsent: Arc<Unsent>,
) -> ClientEvents {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue {
            events: VecDeque::new(),
            bytes: 0,
            last_taken: Instant::now(),
            ended: false,
            cut: false,
            closed: false,
        }),
        ready: Notify::new(),
        gone: Notify::new(),
        unsent,
    });
    let relay = shared.clone();
    tokio::spawn(async move {
        let shared = relay;
        // Since when more than the bound of events wait, while they do.
        let mut over_since: Option<Instant> = None;
        let mut ended = false;
        loop {
            let deadline = over_since.and_then(|since| cut_at(&shared, since, bounds.grace));
            let mut cut = None;
            tokio::select! {
                biased;
                // The client went away: the stream's end cancels the run.
                () = shared.gone.notified() => return,
                event = events.recv(), if !ended => {
                    let mut queue = shared.queue();
                    if queue.closed {
                        return;
                    }
                    match event {
                        Some(event) => {
                            let bytes = size_of(&event);
                            if !queue.events.is_empty()
                                && queue.bytes.saturating_add(bytes) > bounds.max_bytes
                            {
                                cut = Some(Cut::Bytes);
                            } else {
                                queue.bytes += bytes;
                                queue.events.push_back((event, bytes));
                                shared.unsent.add(bytes);
                            }
                        }
                        None => {
                            ended = true;
                            queue.ended = true;
                        }
                    }
                    drop(queue);
                    shared.ready.notify_one();
                }
                () = sleep_until(deadline), if deadline.is_some() => {}
            }
            let waiting = shared.queue().events.len();
            if waiting <= bounds.max_events {
                over_since = None;
            } else {
                let since = *over_since.get_or_insert_with(Instant::now);
                if cut.is_none()
                    && cut_at(&shared, since, bounds.grace).is_some_and(|at| Instant::now() >= at)
                {
                    cut = Some(Cut::Stalled);
                }
            }
            if let Some(cut) = cut {
                cut_off(&shared, bounds, &cut);
                return;
            }
            if ended && over_since.is_none() {
                return;
            }
        }
    });
    ClientEvents { shared }
}

/// When a client that takes nothing is cut, more than the bound of events waiting for it since
/// `since`: `grace` after `since` or its last take, whichever is later. `None` (never) for a
/// grace longer than the clock counts (`Duration::MAX`): adding it would overflow.
fn cut_at(shared: &Shared, since: Instant, grace: Duration) -> Option<Instant> {
    let last_taken = shared.queue().last_taken;
    since.max(last_taken).checked_add(grace)
}

/// Sleeps until `deadline`; never wakes without one (its `select!` arm is then disabled).
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Cuts the client's stream: what waits for it is dropped, and it ends.
fn cut_off(shared: &Shared, bounds: Bounds, cut: &Cut) {
    let mut queue = shared.queue();
    queue.cut = true;
    let events = std::mem::take(&mut queue.events);
    shared.unsent.sub(events.len(), queue.bytes);
    queue.bytes = 0;
    drop(queue);
    drop(events);
    shared.ready.notify_one();
    // Nothing of the run or the client: the ids are the client's text.
    let (max_events, grace, max_bytes) = (bounds.max_events, bounds.grace, bounds.max_bytes);
    match cut {
        Cut::Stalled => tracing::warn!(
            max_unsent_events = max_events,
            grace_s = grace.as_secs_f64(),
            "a client took none of its run's events for {} s while more than {max_events} \
             waited: its stream is cut; the run goes on and saves its thread",
            grace.as_secs_f64()
        ),
        Cut::Bytes => tracing::warn!(
            max_unsent_bytes = max_bytes,
            "a client fell more than {max_bytes} bytes behind its run's stream: the stream is \
             cut; the run goes on and saves its thread"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use ai_core::AiEvent;

    use super::{Bounds, Unsent, relay};

    fn delta(n: usize) -> AiEvent {
        AiEvent::TextDelta {
            delta: format!("d{n}"),
        }
    }

    /// Lets the relay take everything sent so far (time is paused: nothing else passes).
    async fn settle() {
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
    }

    const BOUNDS: Bounds = Bounds {
        max_events: 8,
        grace: Duration::from_secs(10),
        max_bytes: 1 << 20,
    };

    /// A burst of five times the bound handed on at once (a fast model while the store commits
    /// slowly) does not cut a client that reads: it gets every event, then the end.
    #[tokio::test(start_paused = true)]
    async fn a_burst_past_the_bound_does_not_cut_a_client_that_reads() {
        let (sender, events) = tokio::sync::mpsc::unbounded_channel();
        let unsent = Arc::new(Unsent::default());
        let mut client = relay(events, BOUNDS, unsent.clone());
        for n in 0..40 {
            sender.send(delta(n)).unwrap();
        }
        drop(sender);
        settle().await;
        assert_eq!(unsent.events.load(Ordering::Relaxed), 40);
        for n in 0..40 {
            assert_eq!(client.recv().await, Some(delta(n)));
        }
        assert_eq!(client.recv().await, None);
        assert!(!client.was_cut());
        assert_eq!(unsent.events.load(Ordering::Relaxed), 0);
        assert_eq!(unsent.bytes.load(Ordering::Relaxed), 0);
    }

    /// A client that takes nothing while more than the bound wait is cut once the grace has
    /// passed since they went over it, not before; what waited is dropped at once.
    #[tokio::test(start_paused = true)]
    async fn a_client_that_takes_nothing_past_the_bound_is_cut_after_the_grace() {
        let (sender, events) = tokio::sync::mpsc::unbounded_channel();
        let unsent = Arc::new(Unsent::default());
        let mut client = relay(events, BOUNDS, unsent.clone());
        for n in 0..20 {
            sender.send(delta(n)).unwrap();
        }
        settle().await;
        tokio::time::sleep(Duration::from_millis(9_900)).await;
        assert!(!client.was_cut(), "cut before the grace passed");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(client.was_cut(), "not cut once the grace passed");
        assert_eq!(unsent.events.load(Ordering::Relaxed), 0);
        assert_eq!(unsent.bytes.load(Ordering::Relaxed), 0);
        assert_eq!(client.recv().await, None);
        // The relay let go of the run's events: the recorder's sends are dropped.
        assert!(sender.is_closed());
    }

    /// A client that keeps taking events, however slowly, is not cut for the backlog while it
    /// does; once it stops, the grace counts from its last take.
    #[tokio::test(start_paused = true)]
    async fn a_client_that_keeps_taking_is_not_cut_until_it_stops() {
        let (sender, events) = tokio::sync::mpsc::unbounded_channel();
        let unsent = Arc::new(Unsent::default());
        let mut client = relay(events, BOUNDS, unsent.clone());
        for n in 0..40 {
            sender.send(delta(n)).unwrap();
        }
        settle().await;
        // One event every 5 s: 30 s in all, three times the grace.
        for n in 0..6 {
            tokio::time::sleep(Duration::from_secs(5)).await;
            assert!(!client.was_cut(), "cut though it took an event 5 s ago");
            assert_eq!(client.recv().await, Some(delta(n)));
        }
        tokio::time::sleep(Duration::from_millis(9_900)).await;
        assert!(
            !client.was_cut(),
            "cut before the grace passed since its last take"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(client.was_cut());
        assert_eq!(client.recv().await, None);
    }

    /// Below the bound of events a client that reads nothing is never cut, even once the run's
    /// events ended; it reads them all later.
    #[tokio::test(start_paused = true)]
    async fn a_client_within_the_bound_is_never_cut() {
        let (sender, events) = tokio::sync::mpsc::unbounded_channel();
        let mut client = relay(events, BOUNDS, Arc::new(Unsent::default()));
        for n in 0..8 {
            sender.send(delta(n)).unwrap();
        }
        drop(sender);
        settle().await;
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!client.was_cut());
        for n in 0..8 {
            assert_eq!(client.recv().await, Some(delta(n)));
        }
        assert_eq!(client.recv().await, None);
    }

    /// What waits never passes the bound of bytes, read or not: an event that would pass it
    /// cuts the stream at once, without waiting for the grace. A single event larger than the
    /// bound is passed on when nothing waits.
    #[tokio::test(start_paused = true)]
    async fn what_waits_never_passes_the_bound_of_bytes() {
        let bounds = Bounds {
            max_bytes: 1000,
            ..BOUNDS
        };
        let big = AiEvent::TextDelta {
            delta: "x".repeat(2000),
        };
        let (sender, events) = tokio::sync::mpsc::unbounded_channel();
        let unsent = Arc::new(Unsent::default());
        let mut client = relay(events, bounds, unsent.clone());
        sender.send(big.clone()).unwrap();
        settle().await;
        assert_eq!(client.recv().await, Some(big));
        let mut most = 0;
        for n in 0..200 {
            sender.send(delta(n)).unwrap();
            settle().await;
            most = most.max(unsent.bytes.load(Ordering::Relaxed));
            if client.was_cut() {
                break;
            }
        }
        assert!(client.was_cut(), "never cut");
        assert!(most <= 1000, "{most} bytes waited");
        assert_eq!(unsent.bytes.load(Ordering::Relaxed), 0);
        assert_eq!(client.recv().await, None);
    }

    /// A grace longer than the clock can count (`Duration::MAX`, for "never cut a client for not
    /// reading") never cuts it, and the relay goes on passing events: past the bound of events
    /// it once added the grace to the clock, which overflowed and ended the relay in a panic,
    /// leaving the stream waiting forever for events that never came.
    #[tokio::test(start_paused = true)]
    async fn a_grace_past_the_clock_never_cuts_and_keeps_the_stream_going() {
        let bounds = Bounds {
            grace: Duration::MAX,
            ..BOUNDS
        };
        let (sender, events) = tokio::sync::mpsc::unbounded_channel();
        let unsent = Arc::new(Unsent::default());
        let mut client = relay(events, bounds, unsent.clone());
        for n in 0..20 {
            sender.send(delta(n)).unwrap();
        }
        drop(sender);
        settle().await;
        assert_eq!(
            unsent.events.load(Ordering::Relaxed),
            20,
            "the relay stopped passing events on"
        );
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!client.was_cut());
        for n in 0..20 {
            assert_eq!(client.recv().await, Some(delta(n)));
        }
        assert_eq!(client.recv().await, None);
        assert!(!client.was_cut());
    }

    /// A dropped stream gives back what waited for it, and the relay lets go of the run's
    /// events.
    #[tokio::test(start_paused = true)]
    async fn a_dropped_stream_gives_back_what_waited() {
        let (sender, events) = tokio::sync::mpsc::unbounded_channel();
        let unsent = Arc::new(Unsent::default());
        let client = relay(events, BOUNDS, unsent.clone());
        for n in 0..20 {
            sender.send(delta(n)).unwrap();
        }
        settle().await;
        drop(client);
        settle().await;
        assert_eq!(unsent.events.load(Ordering::Relaxed), 0);
        assert_eq!(unsent.bytes.load(Ordering::Relaxed), 0);
        assert!(sender.is_closed());
    }
}

//! A run's events on their way to its client's stream, held at most [`AppState`]'s
//! `max_unsent_events` at a time.
//!
//! `record::start_run` hands each stored event on at once, through a channel without bound: the
//! run is never slowed down by its client. A stream's body is polled only as fast as its client
//! reads, so a client that reads slowly, or not at all, would leave every event of its run in
//! that channel for as long as its connection stays open. The relay takes them from there as
//! they come and passes them on through a channel of at most `max_unsent_events`; a client
//! that falls further behind than that has its stream cut (the run goes on, is recorded and
//! saves its thread as always), and what was waiting for it is dropped.
//!
//! [`AppState`]: super::AppState

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ai_core::AiEvent;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::{Receiver, UnboundedReceiver};

/// The default of [`AppState::with_max_unsent_events`](super::AppState::with_max_unsent_events):
/// how many of a run's events may wait for its client before the client's stream is cut.
///
/// A count of events, not of bytes: most are text deltas of a few bytes, so 4,096 is a few
/// seconds of the fastest model's output, far more than a client that reads keeps waiting.
pub const DEFAULT_MAX_UNSENT_EVENTS: usize = 4096;

/// What the stream of a run shows its client: the events the relay passed on, and whether the
/// client fell too far behind.
pub(super) struct ClientEvents {
    events: Receiver<AiEvent>,
    /// Set by the relay when the client fell more than the bound behind: the stream ends with an
    /// error once it has sent what is waiting, and its end does not cancel the run.
    cut: Arc<AtomicBool>,
    /// The events waiting for the clients of every stream of the server.
    unsent: Arc<AtomicUsize>,
}

impl ClientEvents {
    /// The next event; `None` once the run's events ended or the client was cut.
    pub(super) async fn recv(&mut self) -> Option<AiEvent> {
        let event = self.events.recv().await;
        if event.is_some() {
            self.unsent.fetch_sub(1, Ordering::Relaxed);
        }
        event
    }

    /// Whether the client fell too far behind and its stream was cut.
    pub(super) fn was_cut(&self) -> bool {
        self.cut.load(Ordering::Acquire)
    }
}

impl Drop for ClientEvents {
    fn drop(&mut self) {
        // Closed first, so that no event arrives between the count and the drop.
        self.events.close();
        self.unsent.fetch_sub(self.events.len(), Ordering::Relaxed);
    }
}

/// Passes `events` on as they come, keeping at most `max` (at least one) waiting for the
/// client; `unsent` counts those waiting, with the other streams'. The relay ends with the run's
/// events, when the stream is dropped (its client went away), or when the client falls more than
/// `max` behind: then it warns, and drops `events`, so the run's recorder drops the rest of them
/// (it stores them all first, and the thread is saved as always).
pub(super) fn relay(
    mut events: UnboundedReceiver<AiEvent>,
    max: usize,
    unsent: Arc<AtomicUsize>,
) -> ClientEvents {
    // A bounded channel holds at most as many as a semaphore has permits.
    let max = max.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
    let (to_client, client) = tokio::sync::mpsc::channel(max);
    let cut = Arc::new(AtomicBool::new(false));
    let relay_cut = cut.clone();
    let relay_unsent = unsent.clone();
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                // The client went away: the stream's end cancels the run.
                () = to_client.closed() => return,
            };
            let Some(event) = event else {
                return;
            };
            // Counted before it can be taken, so the count never goes below zero.
            relay_unsent.fetch_add(1, Ordering::Relaxed);
            match to_client.try_send(event) {
                Ok(()) => {}
                Err(TrySendError::Closed(_)) => {
                    relay_unsent.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
                Err(TrySendError::Full(_)) => {
                    relay_unsent.fetch_sub(1, Ordering::Relaxed);
                    relay_cut.store(true, Ordering::Release);
                    // Nothing of the run or the client: the ids are the client's text.
                    tracing::warn!(
                        max_unsent_events = max,
                        "a client fell more than {max} events behind its run's stream: the \
                         stream is cut; the run goes on and saves its thread"
                    );
                    return;
                }
            }
        }
    });
    ClientEvents {
        events: client,
        cut,
        unsent,
    }
}

//! Running futures with bounded concurrency, results in input order.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::task::Poll;

/// Runs `futures` with at most `limit` in flight and returns their outputs in input order,
/// whatever order they finish in.
pub(crate) async fn run_bounded<F: Future>(futures: Vec<F>, limit: NonZeroUsize) -> Vec<F::Output> {
    let total = futures.len();
    let limit = limit.get();
    let mut waiting: VecDeque<(usize, F)> = futures.into_iter().enumerate().collect();
    let mut running: Vec<(usize, Pin<Box<F>>)> = Vec::with_capacity(limit.min(total));
    let mut outputs: Vec<Option<F::Output>> = (0..total).map(|_| None).collect();
    poll_fn(|cx| {
        loop {
            while running.len() < limit {
                match waiting.pop_front() {
                    Some((index, future)) => running.push((index, Box::pin(future))),
                    None => break,
                }
            }
            let before = running.len();
            running.retain_mut(|(index, future)| match future.as_mut().poll(cx) {
                Poll::Ready(output) => {
                    outputs[*index] = Some(output);
                    false
                }
                Poll::Pending => true,
            });
            if running.is_empty() && waiting.is_empty() {
                return Poll::Ready(());
            }
            if running.len() == before {
                return Poll::Pending;
            }
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn order_is_input_order_and_concurrency_is_bounded() {
        let in_flight = std::sync::atomic::AtomicUsize::new(0);
        let peak = std::sync::atomic::AtomicUsize::new(0);
        let futures: Vec<_> = [50_u64, 10, 40, 20, 30, 5]
            .into_iter()
            .enumerate()
            .map(|(i, ms)| {
                let (in_flight, peak) = (&in_flight, &peak);
                async move {
                    let now = in_flight.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    peak.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    in_flight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    i
                }
            })
            .collect();
        let out = super::run_bounded(futures, std::num::NonZeroUsize::new(2).unwrap()).await;
        assert_eq!(out, [0, 1, 2, 3, 4, 5]);
        assert_eq!(peak.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}

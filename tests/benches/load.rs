//! Load bench for `cogni serve` (not run in CI):
//!
//! ```sh
//! cargo bench -p cogni-tests --bench load            # N = 1, 64, 512
//! cargo bench -p cogni-tests --bench load -- 1 8     # other concurrency levels
//! ```
//!
//! A fake OpenAI-compatible endpoint on loopback streams, for each run, a recorded tool-call turn
//! (two parallel calls) and then a recorded text answer, each over 8 chunks 2 ms apart. `N`
//! clients each post one AG-UI run at once and read its stream to `RUN_FINISHED`. Reported per
//! level: runs per second (N over the wall time of the level) and the p50/p99 of the time the
//! server adds per run: the client's time from request to the stream's end, minus the time the
//! fake itself spent streaming that run's two model turns. A first pass at the largest level
//! warms the connection pools, so the levels measure steady state rather than TCP setup.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bootstrap::Settings;
use cogni_tests::fake_llm::{FakeLlm, RecordedRequest, Reply, fixture_bytes};
use serde_json::json;

const CHUNKS: usize = 8;
const CHUNK_DELAY: Duration = Duration::from_millis(2);

/// The runs posted so far, for each run's own runId.
static RUNS: AtomicUsize = AtomicUsize::new(0);

/// The fake's answer: the tool-call turn until the request carries tool results, then the text.
fn respond(request: &RecordedRequest, turn1: &[u8], turn2: &[u8]) -> Reply {
    let answered = request.json["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    let body = if answered { turn2 } else { turn1 };
    Reply::sse(body.to_vec())
        .split(body.len().div_ceil(CHUNKS))
        .chunk_delay(CHUNK_DELAY)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

async fn level(n: usize, base: &str, fake: &FakeLlm, client: &reqwest::Client) {
    let first_request = fake.requests().len();
    let started = Instant::now();
    let runs = (0..n).map(|i| {
        let client = client.clone();
        let url = format!("{base}/api/v1/agui");
        let marker = format!("load-{n}-{i:06}");
        // A runId names one run (the server refuses one it has seen): the warm-up and the
        // level of the same width post the same threads, each time as new runs.
        let run_id = format!("r-{}", RUNS.fetch_add(1, Ordering::Relaxed));
        async move {
            let body = json!({
                "threadId": marker, "runId": run_id, "state": {}, "tools": [], "context": [],
                "forwardedProps": {},
                "messages": [{"id": "m", "role": "user", "content": marker}]
            });
            let t0 = Instant::now();
            let response = client
                .post(url)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .expect("the server answers");
            let text = response.text().await.expect("the stream ends");
            assert!(text.contains("RUN_FINISHED"), "{marker}: {text}");
            (marker, t0.elapsed())
        }
    });
    let results = futures_util::future::join_all(runs).await;
    let wall = started.elapsed();
    // Let the fake record the end of its last streams.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let requests = fake.requests();
    let served = fake.served();
    // Each request's body once, as text, to find the run it belongs to.
    let bodies: Vec<(String, Duration)> = requests
        .iter()
        .enumerate()
        .skip(first_request)
        .map(|(i, r)| {
            (
                String::from_utf8_lossy(&r.body).into_owned(),
                served[i].unwrap_or_default(),
            )
        })
        .collect();
    let mut added: Vec<Duration> = results
        .iter()
        .map(|(marker, total)| {
            let fake_time: Duration = bodies
                .iter()
                .filter(|(body, _)| body.contains(marker.as_str()))
                .map(|(_, time)| *time)
                .sum();
            total.saturating_sub(fake_time)
        })
        .collect();
    added.sort();
    println!(
        "N={n:<4} runs/s {:>8.1}   wall {:>7.1} ms   server-added p50 {:>7.2} ms   p99 {:>7.2} ms",
        n as f64 / wall.as_secs_f64(),
        wall.as_secs_f64() * 1e3,
        percentile(&added, 0.50).as_secs_f64() * 1e3,
        percentile(&added, 0.99).as_secs_f64() * 1e3,
    );
}

fn main() {
    let levels: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let levels = if levels.is_empty() {
        vec![1, 64, 512]
    } else {
        levels
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let turn1 = fixture_bytes("loop/turn-1-tool-calls.sse").expect("fixture");
        let turn2 = fixture_bytes("loop/turn-2-answer.sse").expect("fixture");
        let fake = FakeLlm::start().await.expect("the fake starts");
        fake.respond_with(move |request| respond(request, &turn1, &turn2));
        let workspace = tempfile::tempdir().expect("a temp dir");
        std::fs::write(workspace.path().join("notes.txt"), "hello").expect("notes");
        let mut settings = Settings::default();
        settings.llm.base_url = fake.base_url();
        settings.llm.model = "load".into();
        settings.tools.workspace = workspace.path().to_owned();
        // Every run of the widest level at once: none is refused as one too many.
        let widest = levels.iter().copied().max().unwrap_or(1);
        settings.server.max_concurrent_runs =
            NonZeroUsize::new(widest).unwrap_or(NonZeroUsize::MIN);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        tokio::spawn(async move { bootstrap::server::run(&settings, listener).await });
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1024)
            .build()
            .expect("a client");
        // Warm-up at the largest level: connection pools (client → server → fake) filled, the
        // allocator grown; the levels below then measure steady state.
        level(widest, &base, &fake, &client).await;
        println!("(warm-up above)");
        for n in levels {
            level(n, &base, &fake, &client).await;
        }
    });
}

//! The store's added cost per model step and per tool call, fsync on, on a temporary folder of
//! the machine's disk: the run store is SQLite (WAL, `synchronous = FULL`); blobs go to each
//! blob store in turn, `store_fs/*` ([`adapters::FsBlobStore`]: temp file, fsync, rename,
//! folder fsync) and `store_tiered/*` ([`adapters::TieredBlobStore`], the composition root's
//! default: these blobs are all small, so they are rows of the run store's database, appended
//! to its write-ahead log and made durable by the step's commit).
//!
//! - `model_step`: one receipt blob put + `commit_step` with 6 events and the receipt ref;
//! - `tool_call`: one tool call blob put + `commit_step` with its invocation record;
//! - `recorded_model_call`: a whole `RecordingCompletion` call around an instant model with one
//!   tool call (tool set and the empty fragment list cached; tool call, completion, output items
//!   and receipt blobs put in one batch);
//! - `full_model_step`: `recorded_model_call`, then `commit_step` with 6 events and the
//!   receipt ref: everything the store adds to one model step;
//! - `store/commit_step_only`: `commit_step` alone (SQLite's share of `model_step`).
//!
//! Every iteration writes new content, so no put is skipped as already stored.
//! Run with `cargo bench -p cogni-adapters --bench store`.

#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use adapters::{
    FsBlobStore, ReceiptCollector, RecordingCompletion, RecordingConfig, SqliteStore,
    TieredBlobStore,
};
use ai_core::{
    AiEvent, BlobStore, CancellationToken, CompletionError, CompletionPort, DeltaSink, DoneReason,
    FinishReason, LlmCaller, LlmCompletion, LlmRequest, LlmToolCall, ModelReceipt, RunId, RunStep,
    RunStore, ToolCallBlob, ToolCallId, ToolInvocationRecord, ToolOutcome, Usage, canonical_bytes,
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

fn six_events(n: u64) -> Vec<AiEvent> {
    let id = |s: &str| ToolCallId::new(format!("call_{n}_{s}")).unwrap();
    let start = |s: &str| AiEvent::ToolCallStart {
        tool_call_id: id(s),
        tool_name: "core__get_current_time".into(),
        args: Some(Arc::new(json!({"tz": "UTC"}))),
    };
    let result = |s: &str| AiEvent::ToolCallResult {
        tool_call_id: id(s),
        tool_name: "core__get_current_time".into(),
        outcome: ToolOutcome::Ok {
            value: Arc::new(json!({"iso8601": "2026-11-22T16:58:50.436Z", "unix_ms": n})),
        },
    };
    vec![
        AiEvent::TextDelta {
            delta: "Let me check the time for you.".into(),
        },
        start("a"),
        start("b"),
        result("a"),
        result("b"),
        AiEvent::Usage {
            usage: Usage::new(812, 64, 876),
        },
    ]
}

fn receipt(n: u64) -> ModelReceipt {
    let h = |s: &str| ai_core::sha256_hex(format!("{s}{n}").as_bytes());
    ModelReceipt {
        provider: "openai-chat".into(),
        model: "gpt-test".into(),
        request_hash: h("request"),
        tool_choice: ai_core::ToolChoice::Auto,
        parallel_tool_calls: None,
        tools_ref: h("tools"),
        output_ref: h("output"),
        usage: Some(Usage::new(812, 64, 876)),
        tool_call_refs: vec![h("call a"), h("call b")],
        output_items_ref: h("items"),
        finish_reason: FinishReason::ToolCalls,
        deltas_ref: None,
    }
}

fn record(n: u64) -> ToolInvocationRecord {
    ToolInvocationRecord {
        tool_call_id: ToolCallId::new(format!("call_{n}")).unwrap(),
        tool_id: "core__get_current_time".into(),
        args: Some(Arc::new(json!({"tz": "UTC"}))),
        result: Some(Arc::new(
            json!({"iso8601": "2026-11-22T16:58:50.436Z", "unix_ms": n}),
        )),
        error: None,
        started_at_ms: n,
        ended_at_ms: n + 1,
        attempts: vec![],
        raw: None,
    }
}

struct InstantModel(AtomicU64);

#[async_trait::async_trait]
impl CompletionPort for InstantModel {
    async fn complete(
        &self,
        _: &LlmRequest,
        _: &mut dyn DeltaSink,
        _: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        Ok(LlmCompletion {
            text: format!("Let me check the time ({n})."),
            tool_calls: vec![LlmToolCall {
                id: ToolCallId::new(format!("call_{n}")).unwrap(),
                name: "core__get_current_time".into(),
                arguments: r#"{"tz": "UTC"}"#.into(),
                complete: true,
                provider_fields: Default::default(),
            }],
            finish_reason: FinishReason::ToolCalls,
            usage: Some(Usage::new(812, 64, 876)),
        })
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let run = RunId::new("bench-run").unwrap();
    rt.block_on(store.begin_run(&run, None, 0, None)).unwrap();
    let counter = AtomicU64::new(0);
    let next = || counter.fetch_add(1, Ordering::Relaxed);
    let blob_stores: [(&str, Arc<dyn BlobStore>); 2] = [
        ("fs", Arc::new(FsBlobStore::open(dir.path()).unwrap())),
        (
            "tiered",
            Arc::new(
                TieredBlobStore::open(&store, dir.path(), TieredBlobStore::DEFAULT_MAX_ROW_BYTES)
                    .unwrap(),
            ),
        ),
    ];

    for (name, blobs) in blob_stores {
        let mut group = c.benchmark_group(format!("store_{name}"));
        group.sample_size(50);
        group.measurement_time(Duration::from_secs(6));

        group.bench_function("model_step", |b| {
            b.iter(|| {
                let n = next();
                rt.block_on(async {
                    let hash = blobs
                        .put(&receipt(n).to_canonical_bytes().unwrap())
                        .await
                        .unwrap();
                    let step = RunStep {
                        events: six_events(n),
                        receipt_refs: vec![hash],
                        ..RunStep::default()
                    };
                    store.commit_step(&run, step).await.unwrap()
                })
            })
        });

        group.bench_function("tool_call", |b| {
            b.iter(|| {
                let n = next();
                rt.block_on(async {
                    let call = ToolCallBlob {
                        id: format!("call_{n}"),
                        name: "core__get_current_time".into(),
                        arguments_json: format!(r#"{{"tz": "UTC", "n": {n}}}"#),
                    };
                    blobs.put(&canonical_bytes(&call).unwrap()).await.unwrap();
                    let step = RunStep {
                        records: vec![record(n)],
                        ..RunStep::default()
                    };
                    store.commit_step(&run, step).await.unwrap()
                })
            })
        });

        let receipts = Arc::new(ReceiptCollector::default());
        let recorder = RecordingCompletion::new(
            Arc::new(InstantModel(AtomicU64::new(0))),
            Arc::clone(&blobs),
            RecordingConfig {
                provider: "openai-chat".into(),
                model: "gpt-test".into(),
            },
            receipts.clone(),
        );
        let request = LlmRequest {
            caller: LlmCaller {
                run_id: run.clone(),
                graph: None,
            },
            messages: vec![ai_core::Message::User {
                content: "what time is it?".into(),
            }],
            tools: vec![],
            tool_choice: ai_core::ToolChoice::Auto,
            parallel_tool_calls: None,
        };
        group.bench_function("recorded_model_call", |b| {
            b.iter(|| {
                rt.block_on(recorder.complete(&request, &mut |_| {}, &CancellationToken::new()))
                    .unwrap()
            })
        });
        // Everything the store adds to one model step: the recorded call's blobs, then the
        // step's transaction with its events and the receipt's address.
        group.bench_function("full_model_step", |b| {
            b.iter(|| {
                let n = next();
                rt.block_on(async {
                    recorder
                        .complete(&request, &mut |_| {}, &CancellationToken::new())
                        .await
                        .unwrap();
                    let step = RunStep {
                        events: six_events(n),
                        receipt_refs: receipts.take(&run),
                        ..RunStep::default()
                    };
                    store.commit_step(&run, step).await.unwrap()
                })
            })
        });
        group.finish();
    }

    let mut group = c.benchmark_group("store");
    group.sample_size(50);
    group.measurement_time(Duration::from_secs(6));
    group.bench_function("commit_step_only", |b| {
        b.iter(|| {
            let n = next();
            rt.block_on(async {
                let step = RunStep {
                    events: six_events(n),
                    receipt_refs: vec![ai_core::sha256_hex(&n.to_le_bytes())],
                    ..RunStep::default()
                };
                store.commit_step(&run, step).await.unwrap()
            })
        })
    });
    group.finish();

    rt.block_on(store.commit_step(
        &run,
        RunStep {
            events: vec![AiEvent::Done {
                reason: DoneReason::Stop,
            }],
            ..RunStep::default()
        },
    ))
    .unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! RecordingCompletion: receipts, tool sets stored once, raw tool-call arguments kept exactly,
//! failures that write nothing.

use std::sync::{Arc, Mutex};

use adapters::{InMemoryBlobStore, ReceiptCollector, RecordingCompletion, RecordingConfig};
use ai_core::{
    BlobStore, BlobStoreError, CancellationToken, CompletionDelta, CompletionError, CompletionPort,
    DeltaSink, FinishReason, LlmCompletion, LlmRequest, LlmToolCall, ModelReceipt, OutputItem,
    ReceiptSink, RunId, ToolCallBlob, Usage, canonical_bytes, sha256_hex,
};
use serde_json::json;

use crate::support::{call, request, spec};

/// Raw argument strings as a provider might send them: odd spacing, key order, escapes.
const ARGS_A: &str = "{\"tz\" :  \"UTC\", \"a\":[ 1,2 ]}";
const ARGS_B: &str = "{\"path\":\"a\\u00e9\\n\"}";

/// A model that streams one delta and answers with `reply` (or fails).
struct Scripted {
    reply: Result<LlmCompletion, CompletionError>,
}

#[async_trait::async_trait]
impl CompletionPort for Scripted {
    async fn complete(
        &self,
        _: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        _: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        deltas.delta(CompletionDelta::Text {
            delta: "streamed".into(),
        });
        self.reply.clone()
    }
}

/// Counts puts per address and can be told to fail.
#[derive(Default)]
struct Counting {
    inner: InMemoryBlobStore,
    puts: Mutex<Vec<String>>,
    fail: bool,
}

#[async_trait::async_trait]
impl BlobStore for Counting {
    async fn put(&self, bytes: &[u8]) -> Result<String, BlobStoreError> {
        if self.fail {
            return Err(BlobStoreError::Backend("disk full".into()));
        }
        let hash = self.inner.put(bytes).await?;
        self.puts.lock().unwrap().push(hash.clone());
        Ok(hash)
    }
    async fn get(&self, hash: &str) -> Result<Vec<u8>, BlobStoreError> {
        self.inner.get(hash).await
    }
}

fn completion() -> LlmCompletion {
    let mut provider_fields = serde_json::Map::new();
    provider_fields.insert("thought_signature".into(), json!("sig"));
    LlmCompletion {
        text: "let me check".into(),
        tool_calls: vec![
            LlmToolCall {
                id: call("call_a"),
                name: "core__get_current_time".into(),
                arguments: ARGS_A.into(),
                complete: true,
                provider_fields,
            },
            LlmToolCall {
                id: call("call_b"),
                name: "core__workspace_read".into(),
                arguments: ARGS_B.into(),
                complete: false,
                provider_fields: serde_json::Map::new(),
            },
        ],
        finish_reason: FinishReason::ToolCalls,
        usage: Some(Usage::new(12, 7, 19)),
    }
}

fn config() -> RecordingConfig {
    RecordingConfig {
        provider: "openai-chat".into(),
        model: "test-model".into(),
    }
}

fn recorder(
    reply: Result<LlmCompletion, CompletionError>,
    blobs: Arc<dyn BlobStore>,
    sink: Arc<dyn ReceiptSink>,
) -> RecordingCompletion {
    RecordingCompletion::new(Arc::new(Scripted { reply }), blobs, config(), sink)
}

#[tokio::test]
async fn a_receipt_references_everything_the_call_produced() {
    let blobs = Arc::new(Counting::default());
    let collector = Arc::new(ReceiptCollector::default());
    let model = recorder(Ok(completion()), blobs.clone(), collector.clone());
    let req = request(
        "run-1",
        vec![spec("get_current_time"), spec("workspace_read")],
    );
    let mut seen = Vec::new();
    let got = model
        .complete(&req, &mut |d| seen.push(d), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(got, completion());
    assert_eq!(seen.len(), 1, "deltas pass through");

    let refs = collector.take(&RunId::new("run-1").unwrap());
    assert_eq!(refs.len(), 1);
    let receipt = ModelReceipt::load(blobs.as_ref(), &refs[0]).await.unwrap();
    assert_eq!(receipt.provider, "openai-chat");
    assert_eq!(receipt.model, "test-model");
    assert_eq!(receipt.request_hash, req.prompt_hash());
    assert_eq!(receipt.finish_reason, FinishReason::ToolCalls);
    assert_eq!(receipt.usage, completion().usage);
    // The blob's address is the hash of the receipt's canonical bytes.
    assert_eq!(refs[0], sha256_hex(&receipt.to_canonical_bytes().unwrap()));

    // Tool calls: one blob each, in order, arguments exactly as sent.
    let calls = receipt.load_tool_calls(blobs.as_ref()).await.unwrap();
    assert_eq!(
        calls,
        vec![
            ToolCallBlob {
                id: "call_a".into(),
                name: "core__get_current_time".into(),
                arguments_json: ARGS_A.into()
            },
            ToolCallBlob {
                id: "call_b".into(),
                name: "core__workspace_read".into(),
                arguments_json: ARGS_B.into()
            },
        ]
    );
    // The completion comes back whole (provider fields and the incomplete flag included).
    assert_eq!(
        receipt.load_completion(blobs.as_ref()).await.unwrap(),
        completion()
    );
    // The streamed fragments, in order.
    assert_eq!(
        receipt.load_deltas(blobs.as_ref()).await.unwrap(),
        Some(seen.clone())
    );
    // The tool set blob is the canonical specs.
    let tools = blobs.get(&receipt.tools_ref).await.unwrap();
    assert_eq!(tools, canonical_bytes(&req.tools).unwrap());
    // Output items: text first, then the calls in order.
    let items: Vec<OutputItem> =
        serde_json::from_slice(&blobs.get(&receipt.output_items_ref).await.unwrap()).unwrap();
    assert_eq!(items, OutputItem::from_completion(&completion()));
    assert!(matches!(&items[0], OutputItem::Message { content, .. } if content == "let me check"));
    assert!(
        matches!(&items[2], OutputItem::ToolCall { id, complete: false, .. } if id == "call_b")
    );
}

#[tokio::test]
async fn the_tool_set_is_stored_once() {
    let blobs = Arc::new(Counting::default());
    let collector = Arc::new(ReceiptCollector::default());
    let model = recorder(Ok(completion()), blobs.clone(), collector.clone());
    let req = request("run-1", vec![spec("get_current_time")]);
    for _ in 0..3 {
        model
            .complete(&req, &mut |_| {}, &CancellationToken::new())
            .await
            .unwrap();
    }
    let refs = collector.take(&RunId::new("run-1").unwrap());
    assert_eq!(refs.len(), 3);
    let receipt = ModelReceipt::load(blobs.as_ref(), &refs[0]).await.unwrap();
    let puts = blobs.puts.lock().unwrap().clone();
    let tool_set_puts = puts.iter().filter(|h| **h == receipt.tools_ref).count();
    assert_eq!(tool_set_puts, 1, "{puts:?}");
    // A different tool set gets its own ref.
    let other = request("run-1", vec![spec("workspace_read")]);
    model
        .complete(&other, &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap();
    let refs = collector.take(&RunId::new("run-1").unwrap());
    let second = ModelReceipt::load(blobs.as_ref(), &refs[0]).await.unwrap();
    assert_ne!(second.tools_ref, receipt.tools_ref);
}

#[tokio::test]
async fn a_tools_encoder_decides_what_the_tool_set_blob_holds() {
    let blobs = Arc::new(InMemoryBlobStore::default());
    let collector = Arc::new(ReceiptCollector::default());
    let model = recorder(Ok(completion()), blobs.clone(), collector.clone()).with_tools_encoder(
        Arc::new(|tools| json!({"provider": "wire", "tools": tools.iter().map(|t| t.id.as_str()).collect::<Vec<_>>()})),
    );
    let req = request("run-1", vec![spec("get_current_time")]);
    model
        .complete(&req, &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap();
    let refs = collector.take(&RunId::new("run-1").unwrap());
    let receipt = ModelReceipt::load(blobs.as_ref(), &refs[0]).await.unwrap();
    assert_eq!(
        blobs.get(&receipt.tools_ref).await.unwrap(),
        br#"{"provider":"wire","tools":["core__get_current_time"]}"#
    );
}

#[tokio::test]
async fn a_failed_model_call_records_nothing() {
    let blobs = Arc::new(Counting::default());
    let collector = Arc::new(ReceiptCollector::default());
    let failure = CompletionError::Transport("connection refused".into());
    let model = recorder(Err(failure.clone()), blobs.clone(), collector.clone());
    let req = request("run-1", vec![spec("get_current_time")]);
    let got = model
        .complete(&req, &mut |_| {}, &CancellationToken::new())
        .await;
    assert_eq!(got, Err(failure));
    assert!(blobs.puts.lock().unwrap().is_empty());
    assert!(collector.take(&RunId::new("run-1").unwrap()).is_empty());
}

#[tokio::test]
async fn a_call_that_cannot_be_recorded_fails_and_reports_no_receipt() {
    let blobs = Arc::new(Counting {
        fail: true,
        ..Counting::default()
    });
    let collector = Arc::new(ReceiptCollector::default());
    let model = recorder(Ok(completion()), blobs, collector.clone());
    let req = request("run-1", vec![]);
    let got = model
        .complete(&req, &mut |_| {}, &CancellationToken::new())
        .await;
    match got {
        Err(CompletionError::Recording(message)) => {
            assert!(
                message.contains("receipt") && message.contains("disk full"),
                "{message}"
            )
        }
        other => panic!("expected a recording error, got {other:?}"),
    }
    assert!(collector.take(&RunId::new("run-1").unwrap()).is_empty());
}

#[tokio::test]
async fn receipts_of_different_runs_are_kept_apart() {
    let blobs = Arc::new(InMemoryBlobStore::default());
    let collector = Arc::new(ReceiptCollector::default());
    let model = recorder(Ok(completion()), blobs, collector.clone());
    for run in ["run-a", "run-b", "run-a"] {
        model
            .complete(
                &request(run, vec![]),
                &mut |_| {},
                &CancellationToken::new(),
            )
            .await
            .unwrap();
    }
    assert_eq!(collector.take(&RunId::new("run-a").unwrap()).len(), 2);
    assert_eq!(collector.take(&RunId::new("run-b").unwrap()).len(), 1);
}

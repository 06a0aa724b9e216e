//! ReplayCompletion: a run's model calls answered from their receipts, with the same fragments
//! and completions; a differing request, one call too many or a lost blob is an error naming the
//! call.

use std::sync::Arc;

use adapters::{
    InMemoryBlobStore, ReceiptCollector, RecordingCompletion, RecordingConfig, ReplayCompletion,
};
use ai_core::{
    BlobStore, CancellationToken, CompletionDelta, CompletionError, CompletionPort, DeltaSink,
    FinishReason, LlmCompletion, LlmRequest, LlmToolCall, RunId, ToolChoice, ToolId,
};

use crate::support::{call, request, spec};

/// Streams text in pieces and a tool call in fragments, then answers; the n-th call differs.
struct Streaming;

#[async_trait::async_trait]
impl CompletionPort for Streaming {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        _: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        let n = request.messages.len();
        for piece in ["Let ", "me ", "check"] {
            deltas.delta(CompletionDelta::Text {
                delta: piece.into(),
            });
        }
        deltas.delta(CompletionDelta::ToolCall {
            index: 0,
            id: Some(format!("call_{n}")),
            name: Some("core__get_current_time".into()),
            arguments: "{\"tz\":".into(),
        });
        deltas.delta(CompletionDelta::ToolCall {
            index: 0,
            id: None,
            name: None,
            arguments: " \"UTC\"}".into(),
        });
        Ok(LlmCompletion {
            text: "Let me check".into(),
            tool_calls: vec![LlmToolCall {
                id: call(&format!("call_{n}")),
                name: "core__get_current_time".into(),
                arguments: "{\"tz\": \"UTC\"}".into(),
                complete: true,
                provider_fields: Default::default(),
            }],
            finish_reason: FinishReason::ToolCalls,
            usage: None,
        })
    }
}

async fn record_two_calls(
    blobs: Arc<InMemoryBlobStore>,
) -> (
    Vec<String>,
    Vec<(Vec<CompletionDelta>, LlmCompletion)>,
    Vec<LlmRequest>,
) {
    let collector = Arc::new(ReceiptCollector::default());
    let model = RecordingCompletion::new(
        Arc::new(Streaming),
        blobs,
        RecordingConfig {
            provider: "test".into(),
            model: "streaming".into(),
        },
        collector.clone(),
    );
    let first = request("run-1", vec![spec("get_current_time")]);
    let mut second = first.clone();
    second.messages.push(ai_core::Message::User {
        content: "and now?".into(),
    });
    let mut outputs = Vec::new();
    for req in [&first, &second] {
        let mut seen = Vec::new();
        let completion = model
            .complete(req, &mut |d| seen.push(d), &CancellationToken::new())
            .await
            .unwrap();
        outputs.push((seen, completion));
    }
    let refs = collector.take(&RunId::new("run-1").unwrap());
    (refs, outputs, vec![first, second])
}

#[tokio::test]
async fn a_replay_streams_and_answers_exactly_what_was_recorded() {
    let blobs = Arc::new(InMemoryBlobStore::default());
    let (refs, recorded, requests) = record_two_calls(blobs.clone()).await;
    assert_eq!(refs.len(), 2);
    let replay = ReplayCompletion::new(blobs, refs);
    assert_eq!(replay.remaining(), 2);
    for (req, (deltas, completion)) in requests.iter().zip(&recorded) {
        let mut seen = Vec::new();
        let got = replay
            .complete(req, &mut |d| seen.push(d), &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(&got, completion);
        assert_eq!(&seen, deltas);
        assert_eq!(seen.len(), 5);
    }
    assert_eq!(replay.remaining(), 0);
    let extra = replay
        .complete(&requests[0], &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        extra.to_string(),
        "provider error: replay: the run asks for model call 3, but only 2 were recorded"
    );
}

#[tokio::test]
async fn a_differing_request_is_named_by_its_call() {
    let blobs = Arc::new(InMemoryBlobStore::default());
    let (refs, _, requests) = record_two_calls(blobs.clone()).await;
    let replay = ReplayCompletion::new(blobs, refs);
    replay
        .complete(&requests[0], &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap();
    // The second call sends the first request again: not what was recorded.
    let err = replay
        .complete(&requests[0], &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("model call 2"), "{message}");
    assert!(
        message.contains("differs from the recorded one"),
        "{message}"
    );
    assert!(message.contains(&requests[0].prompt_hash()), "{message}");
}

#[tokio::test]
async fn a_lost_blob_is_named() {
    let blobs = Arc::new(InMemoryBlobStore::default());
    let (refs, _, requests) = record_two_calls(blobs.clone()).await;
    let receipt = ai_core::ModelReceipt::load(blobs.as_ref(), &refs[0])
        .await
        .unwrap();
    // A fresh store holding only the receipt: the completion it names is missing.
    let partial = Arc::new(InMemoryBlobStore::default());
    partial
        .put(&receipt.to_canonical_bytes().unwrap())
        .await
        .unwrap();
    let replay = ReplayCompletion::new(partial, refs.clone());
    let message = replay
        .complete(&requests[0], &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(message.contains("model call 1"), "{message}");
    assert!(
        message.contains(&format!("blob {} not found", receipt.output_ref)),
        "{message}"
    );
    // A receipt that is itself missing is named too.
    let replay = ReplayCompletion::new(Arc::new(InMemoryBlobStore::default()), refs.clone());
    let message = replay
        .complete(&requests[0], &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(&format!("receipt {}", refs[0])),
        "{message}"
    );
}

#[tokio::test]
async fn a_cancelled_replay_answers_cancelled_and_keeps_its_place() {
    let blobs = Arc::new(InMemoryBlobStore::default());
    let (refs, _, requests) = record_two_calls(blobs.clone()).await;
    let replay = ReplayCompletion::new(blobs, refs);
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert_eq!(
        replay.complete(&requests[0], &mut |_| {}, &cancel).await,
        Err(CompletionError::Cancelled)
    );
    assert_eq!(replay.remaining(), 2);
}

/// Records one call of `request` through a [`RecordingCompletion`]; returns the receipt's
/// address.
async fn record_one(blobs: Arc<InMemoryBlobStore>, request: &LlmRequest) -> String {
    let collector = Arc::new(ReceiptCollector::default());
    let model = RecordingCompletion::new(
        Arc::new(Streaming),
        blobs,
        RecordingConfig {
            provider: "test".into(),
            model: "streaming".into(),
        },
        collector.clone(),
    );
    model
        .complete(request, &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap();
    collector.take(&request.caller.run_id).remove(0)
}

/// Replays `receipt_ref` for `request`: the error's message, or `None` when it replayed.
async fn replay_one(
    blobs: Arc<InMemoryBlobStore>,
    receipt_ref: &str,
    request: &LlmRequest,
) -> Option<String> {
    ReplayCompletion::new(blobs, vec![receipt_ref.to_owned()])
        .complete(request, &mut |_| {}, &CancellationToken::new())
        .await
        .err()
        .map(|e| e.to_string())
}

/// The prompt hash covers messages and tools only: a replay under another `tool_choice` or
/// `parallel_tool_calls` is a mismatch naming the field, both values and nothing else.
#[tokio::test]
async fn a_replay_under_another_tool_choice_or_parallel_setting_is_a_mismatch_naming_it() {
    let blobs = Arc::new(InMemoryBlobStore::default());
    let recorded = request("run-1", vec![spec("get_current_time")]);
    let receipt_ref = record_one(blobs.clone(), &recorded).await;
    assert_eq!(
        replay_one(blobs.clone(), &receipt_ref, &recorded).await,
        None
    );

    let mut required = recorded.clone();
    required.tool_choice = ToolChoice::Required;
    assert_eq!(
        replay_one(blobs.clone(), &receipt_ref, &required).await,
        Some(
            "provider error: replay of model call 1: the request differs from the recorded one: \
             its tool_choice (required, recorded auto)"
                .to_owned()
        )
    );

    // Recorded with a named tool and parallel calls off; replayed with the defaults.
    let mut pinned = recorded.clone();
    pinned.tool_choice = ToolChoice::Tool(ToolId::parse("core__get_current_time").unwrap());
    pinned.parallel_tool_calls = Some(false);
    let pinned_ref = record_one(blobs.clone(), &pinned).await;
    assert_eq!(replay_one(blobs.clone(), &pinned_ref, &pinned).await, None);
    assert_eq!(
        replay_one(blobs.clone(), &pinned_ref, &recorded).await,
        Some(
            "provider error: replay of model call 1: the request differs from the recorded one: \
             its tool_choice (auto, recorded tool core__get_current_time); its \
             parallel_tool_calls (unset, recorded false)"
                .to_owned()
        )
    );
    let mut parallel = pinned.clone();
    parallel.parallel_tool_calls = Some(true);
    let message = replay_one(blobs, &pinned_ref, &parallel).await.unwrap();
    assert!(
        message.ends_with(
            "differs from the recorded one: its parallel_tool_calls (true, recorded false)"
        ),
        "{message}"
    );
}

/// A receipt written before `tool_choice` and `parallel_tool_calls` were recorded has neither
/// key; the driver's defaults (`auto`, unset) write none either, so such a receipt replays under
/// them, and only under them.
#[tokio::test]
async fn a_receipt_without_the_request_options_replays_under_the_driver_defaults() {
    let blobs = Arc::new(InMemoryBlobStore::default());
    let defaults = request("run-1", vec![spec("get_current_time")]);
    let completion = LlmCompletion {
        text: "hi".into(),
        tool_calls: vec![],
        finish_reason: FinishReason::Stop,
        usage: None,
    };
    let output_ref = blobs
        .put(&ai_core::canonical_bytes(&completion).unwrap())
        .await
        .unwrap();
    // The receipt as an older build wrote it.
    let old_form = serde_json::json!({
        "provider": "test",
        "model": "old",
        "request_hash": defaults.prompt_hash(),
        "tools_ref": "t",
        "output_ref": output_ref,
        "usage": null,
        "tool_call_refs": [],
        "output_items_ref": "i",
        "finish_reason": "stop",
    });
    let old_ref = blobs
        .put(&ai_core::canonical_bytes(&old_form).unwrap())
        .await
        .unwrap();
    assert_eq!(replay_one(blobs.clone(), &old_ref, &defaults).await, None);
    let mut none = defaults.clone();
    none.tool_choice = ToolChoice::None;
    let message = replay_one(blobs.clone(), &old_ref, &none).await.unwrap();
    assert!(
        message.ends_with("its tool_choice (none, recorded auto)"),
        "{message}"
    );

    // A receipt recorded under the defaults today has the same form: no new key.
    let receipt_ref = record_one(blobs.clone(), &defaults).await;
    let stored: serde_json::Value =
        serde_json::from_slice(&blobs.get(&receipt_ref).await.unwrap()).unwrap();
    assert!(stored.get("tool_choice").is_none(), "{stored}");
    assert!(stored.get("parallel_tool_calls").is_none(), "{stored}");
}

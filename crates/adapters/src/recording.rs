//! [`RecordingCompletion`]: a [`CompletionPort`] decorator that writes a receipt for every model
//! call into a [`BlobStore`], so a run can be replayed with the model answered from its receipts.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use ai_core::{
    BlobStore, CancellationToken, CompletionDelta, CompletionError, CompletionPort, DeltaSink,
    LlmCompletion, LlmRequest, ModelReceipt, OutputItem, ReceiptSink, ToolCallBlob, ToolSpec,
    canonical_bytes, sha256_hex,
};
use async_trait::async_trait;
use serde_json::Value;

/// Turns the request's tool specs into the tool set that is stored as `tools_ref` (e.g. the
/// provider's wire `tools` array). Without one, the provider-neutral specs are stored.
pub type ToolsEncoder = Arc<dyn Fn(&[ToolSpec]) -> Value + Send + Sync>;

/// What a [`RecordingCompletion`] writes into each receipt about the endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordingConfig {
    /// The provider's name as configured (e.g. `openai-chat`).
    pub provider: String,
    /// The model as configured.
    pub model: String,
}

/// Decorates any [`CompletionPort`]: after each successful call it stores, as canonical JSON
/// blobs, the tool set (once per distinct set: `tools_ref`), every tool call exactly as the
/// provider sent it ([`ToolCallBlob`]), the completion (`output_ref`), the output items, the
/// streamed fragments (`deltas_ref`) and the [`ModelReceipt`] itself (with the request's prompt
/// hash, `tool_choice` and `parallel_tool_calls`, what [`crate::ReplayCompletion`] checks), in
/// one batch with the receipt last, then reports the receipt's address to its [`ReceiptSink`].
///
/// It knows nothing of providers: names come from [`RecordingConfig`], and the wire form of the
/// tool set, when wanted, from a [`ToolsEncoder`]. A call that succeeds but cannot be recorded
/// fails as [`CompletionError::Recording`], so no run goes on with a model answer it cannot
/// replay. Failed calls write nothing.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use ai_core::{BlobStore, CancellationToken, CompletionDelta, CompletionError, CompletionPort,
///     DeltaSink, FinishReason, LlmCaller, LlmCompletion, LlmRequest, ModelReceipt, RunId,
///     ToolChoice};
/// use adapters::{InMemoryBlobStore, RecordingCompletion, RecordingConfig};
/// struct Canned;
/// #[ai_core::async_trait]
/// impl CompletionPort for Canned {
///     async fn complete(&self, _: &LlmRequest, _: &mut dyn DeltaSink, _: &CancellationToken)
///         -> Result<LlmCompletion, CompletionError> {
///         Ok(LlmCompletion { text: "hi".into(), tool_calls: vec![],
///             finish_reason: FinishReason::Stop, usage: None })
///     }
/// }
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let blobs = Arc::new(InMemoryBlobStore::default());
/// let refs = Arc::new(Mutex::new(Vec::new()));
/// let sink_refs = Arc::clone(&refs);
/// let model = RecordingCompletion::new(
///     Arc::new(Canned),
///     blobs.clone(),
///     RecordingConfig { provider: "test".into(), model: "canned".into() },
///     Arc::new(move |_: &RunId, hash: &str, _: &ModelReceipt| {
///         sink_refs.lock().unwrap().push(hash.to_owned())
///     }),
/// );
/// let request = LlmRequest {
///     caller: LlmCaller { run_id: RunId::new("run-1").unwrap(), graph: None },
///     messages: vec![], tools: vec![], tool_choice: ToolChoice::Auto, parallel_tool_calls: None,
/// };
/// model.complete(&request, &mut |_| {}, &CancellationToken::new()).await.unwrap();
/// let hash = refs.lock().unwrap()[0].clone();
/// let receipt = ModelReceipt::load(blobs.as_ref(), &hash).await.unwrap();
/// assert_eq!(receipt.load_completion(blobs.as_ref()).await.unwrap().text, "hi");
/// # });
/// ```
pub struct RecordingCompletion {
    inner: Arc<dyn CompletionPort>,
    blobs: Arc<dyn BlobStore>,
    config: RecordingConfig,
    sink: Arc<dyn ReceiptSink>,
    tools_encoder: Option<ToolsEncoder>,
    /// Tool sets already stored by this decorator, so each is written once.
    stored_tool_sets: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for RecordingCompletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingCompletion")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RecordingCompletion {
    /// Wraps `inner`, storing into `blobs` and reporting receipts to `sink`.
    pub fn new(
        inner: Arc<dyn CompletionPort>,
        blobs: Arc<dyn BlobStore>,
        config: RecordingConfig,
        sink: Arc<dyn ReceiptSink>,
    ) -> Self {
        Self {
            inner,
            blobs,
            config,
            sink,
            tools_encoder: None,
            stored_tool_sets: Mutex::new(HashSet::new()),
        }
    }

    /// Stores the tool set as `encoder` renders it (e.g. the provider's wire `tools`) instead of
    /// the provider-neutral specs.
    pub fn with_tools_encoder(mut self, encoder: ToolsEncoder) -> Self {
        self.tools_encoder = Some(encoder);
        self
    }

    /// The tool set's canonical bytes and address.
    fn tool_set(&self, tools: &[ToolSpec]) -> Result<(Vec<u8>, String), CompletionError> {
        let bytes = match &self.tools_encoder {
            Some(encode) => canonical_bytes(&encode(tools)),
            None => canonical_bytes(tools),
        }
        .map_err(|e| unserializable("tool set", &e))?;
        let hash = sha256_hex(&bytes);
        Ok((bytes, hash))
    }

    /// Writes the blobs and the receipt of one completed call in one batch (the receipt last);
    /// returns the receipt's address. Addresses are hashes, so the receipt is built before
    /// anything is written.
    async fn record(
        &self,
        request: &LlmRequest,
        completion: &LlmCompletion,
        deltas: &[CompletionDelta],
    ) -> Result<(String, ModelReceipt), CompletionError> {
        let mut batch: Vec<Vec<u8>> = Vec::with_capacity(completion.tool_calls.len() + 4);
        let (tools_bytes, tools_ref) = self.tool_set(&request.tools)?;
        let tools_known = self
            .stored_tool_sets
            .lock()
            .map(|set| set.contains(&tools_ref))
            .unwrap_or(false);
        if !tools_known {
            batch.push(tools_bytes);
        }
        let mut tool_call_refs = Vec::with_capacity(completion.tool_calls.len());
        for call in &completion.tool_calls {
            let blob = canonical_bytes(&ToolCallBlob::from(call))
                .map_err(|e| unserializable("tool call", &e))?;
            tool_call_refs.push(sha256_hex(&blob));
            batch.push(blob);
        }
        let output = canonical_bytes(completion).map_err(|e| unserializable("completion", &e))?;
        let output_ref = sha256_hex(&output);
        batch.push(output);
        let items = canonical_bytes(&OutputItem::from_completion(completion))
            .map_err(|e| unserializable("output items", &e))?;
        let output_items_ref = sha256_hex(&items);
        batch.push(items);
        let deltas = canonical_bytes(deltas).map_err(|e| unserializable("deltas", &e))?;
        let deltas_ref = sha256_hex(&deltas);
        batch.push(deltas);
        let receipt = ModelReceipt {
            provider: self.config.provider.clone(),
            model: self.config.model.clone(),
            request_hash: request.prompt_hash(),
            tool_choice: request.tool_choice.clone(),
            parallel_tool_calls: request.parallel_tool_calls,
            tools_ref,
            output_ref,
            usage: completion.usage,
            tool_call_refs,
            output_items_ref,
            finish_reason: completion.finish_reason.clone(),
            deltas_ref: Some(deltas_ref),
        };
        let receipt_bytes = receipt
            .to_canonical_bytes()
            .map_err(|e| unserializable("receipt", &e))?;
        let receipt_ref = sha256_hex(&receipt_bytes);
        batch.push(receipt_bytes);

        let slices: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        let stored = self.blobs.put_many(&slices).await.map_err(|e| {
            CompletionError::Recording(format!("cannot store the model call's receipt: {e}"))
        })?;
        if stored.last() != Some(&receipt_ref) {
            return Err(CompletionError::Recording(
                "the blob store returned other addresses than the receipt's content hashes".into(),
            ));
        }
        if !tools_known && let Ok(mut set) = self.stored_tool_sets.lock() {
            set.insert(receipt.tools_ref.clone());
        }
        Ok((receipt_ref, receipt))
    }
}

/// Passes fragments on and keeps a copy, for the receipt's `deltas_ref`.
struct Tee<'a> {
    inner: &'a mut dyn DeltaSink,
    seen: Vec<CompletionDelta>,
}

impl DeltaSink for Tee<'_> {
    fn delta(&mut self, delta: CompletionDelta) {
        self.seen.push(delta.clone());
        self.inner.delta(delta);
    }
}

fn unserializable(what: &str, e: &serde_json::Error) -> CompletionError {
    CompletionError::Recording(format!("the {what} does not serialize: {e}"))
}

#[async_trait]
impl CompletionPort for RecordingCompletion {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        cancel: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        let mut tee = Tee {
            inner: deltas,
            seen: Vec::new(),
        };
        let completion = self.inner.complete(request, &mut tee, cancel).await?;
        let (hash, receipt) = self.record(request, &completion, &tee.seen).await?;
        self.sink.receipt(&request.caller.run_id, &hash, &receipt);
        Ok(completion)
    }
}

/// A [`ReceiptSink`] that keeps receipt addresses per run until the run log takes them for the
/// step it commits.
///
/// ```
/// use ai_core::{ReceiptSink, RunId};
/// # let receipt = ai_core::ModelReceipt { provider: "p".into(), model: "m".into(),
/// #     request_hash: "r".into(), tool_choice: ai_core::ToolChoice::Auto,
/// #     parallel_tool_calls: None, tools_ref: "t".into(), output_ref: "o".into(), usage: None,
/// #     tool_call_refs: vec![], output_items_ref: "i".into(),
/// #     finish_reason: ai_core::FinishReason::Stop, deltas_ref: None };
/// let collector = adapters::ReceiptCollector::default();
/// let run = RunId::new("run-1").unwrap();
/// collector.receipt(&run, "abc", &receipt);
/// assert_eq!(collector.take(&run), vec!["abc".to_owned()]);
/// assert!(collector.take(&run).is_empty());
/// ```
#[derive(Debug, Default)]
pub struct ReceiptCollector {
    pending: Mutex<Vec<(ai_core::RunId, String)>>,
}

impl ReceiptCollector {
    /// Takes (removes and returns) the receipt addresses reported for `run_id`, in call order.
    pub fn take(&self, run_id: &ai_core::RunId) -> Vec<String> {
        let mut pending = self.pending();
        let (mine, rest): (Vec<_>, Vec<_>) = pending.drain(..).partition(|(r, _)| r == run_id);
        *pending = rest;
        mine.into_iter().map(|(_, hash)| hash).collect()
    }

    /// The pending receipts, also after a thread panicked holding them: the list is whole
    /// between any two of its operations (a push, a partition), so a panic elsewhere leaves it
    /// sound, and dropping a receipt would silently leave a run without its record.
    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<(ai_core::RunId, String)>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ReceiptSink for ReceiptCollector {
    fn receipt(&self, run_id: &ai_core::RunId, receipt_ref: &str, _: &ModelReceipt) {
        self.pending()
            .push((run_id.clone(), receipt_ref.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread that panicked while holding the collector's lock does not make it drop the
    /// receipts reported afterwards, nor those it held.
    #[test]
    fn a_poisoned_collector_keeps_its_receipts() {
        let collector = std::sync::Arc::new(ReceiptCollector::default());
        let run = ai_core::RunId::new("run-1").unwrap();
        let receipt = ModelReceipt {
            provider: "p".into(),
            model: "m".into(),
            request_hash: "r".into(),
            tool_choice: ai_core::ToolChoice::Auto,
            parallel_tool_calls: None,
            tools_ref: "t".into(),
            output_ref: "o".into(),
            usage: None,
            tool_call_refs: vec![],
            output_items_ref: "i".into(),
            finish_reason: ai_core::FinishReason::Stop,
            deltas_ref: None,
        };
        collector.receipt(&run, "first", &receipt);
        let held = collector.clone();
        let panicked = std::thread::spawn(move || {
            let _guard = held.pending.lock();
            panic!("a panic while the lock is held");
        })
        .join();
        assert!(panicked.is_err());
        assert!(collector.pending.is_poisoned());
        collector.receipt(&run, "second", &receipt);
        assert_eq!(
            collector.take(&run),
            vec!["first".to_owned(), "second".to_owned()]
        );
    }
}

//! [`ReplayCompletion`]: a [`CompletionPort`] that answers from recorded receipts instead of a
//! model, for replaying a run deterministically.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use ai_core::{
    BlobStore, CancellationToken, CompletionDelta, CompletionError, CompletionPort, DeltaSink,
    LlmCompletion, LlmRequest, ModelReceipt, ToolChoice,
};
use async_trait::async_trait;

use crate::shown_cut;

/// Answers the n-th model call of a run with the n-th recorded receipt: it checks that the
/// request hashes as the recorded one did (its messages and tools) and asks for the same
/// `tool_choice` and `parallel_tool_calls` (a receipt written before these were recorded stands
/// for the graph driver's defaults, `Auto` and `None`), streams the recorded fragments (or, for a
/// receipt without them, the text and each tool call as one fragment), and returns the recorded
/// completion. A request that differs, a call past the last receipt, or a missing or corrupt blob
/// is an error naming the call.
///
/// ```
/// use std::sync::Arc;
/// use ai_core::{BlobStore, CancellationToken, CompletionPort, FinishReason, LlmCaller,
///     LlmCompletion, LlmRequest, ModelReceipt, RunId, ToolChoice, canonical_bytes};
/// use adapters::{InMemoryBlobStore, ReplayCompletion};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let blobs = Arc::new(InMemoryBlobStore::default());
/// let request = LlmRequest {
///     caller: LlmCaller { run_id: RunId::new("run-1").unwrap(), graph: None },
///     messages: vec![], tools: vec![], tool_choice: ToolChoice::Auto, parallel_tool_calls: None,
/// };
/// let completion = LlmCompletion { text: "hi".into(), tool_calls: vec![],
///     finish_reason: FinishReason::Stop, usage: None };
/// let output_ref = blobs.put(&canonical_bytes(&completion).unwrap()).await.unwrap();
/// let receipt = ModelReceipt { provider: "p".into(), model: "m".into(),
///     request_hash: request.prompt_hash(), tool_choice: request.tool_choice.clone(),
///     parallel_tool_calls: request.parallel_tool_calls, tools_ref: "t".into(), output_ref,
///     usage: None,
///     tool_call_refs: vec![], output_items_ref: "i".into(), finish_reason: FinishReason::Stop,
///     deltas_ref: None };
/// let receipt_ref = blobs.put(&receipt.to_canonical_bytes().unwrap()).await.unwrap();
///
/// let replay = ReplayCompletion::new(blobs, vec![receipt_ref]);
/// let got = replay.complete(&request, &mut |_| {}, &CancellationToken::new()).await.unwrap();
/// assert_eq!(got, completion);
/// assert!(replay.complete(&request, &mut |_| {}, &CancellationToken::new()).await.is_err());
/// # });
/// ```
pub struct ReplayCompletion {
    blobs: Arc<dyn BlobStore>,
    /// The receipts not answered yet, with their position in the run (1-based).
    pending: Mutex<VecDeque<(usize, String)>>,
    recorded: usize,
}

impl std::fmt::Debug for ReplayCompletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayCompletion")
            .field("recorded", &self.recorded)
            .field("remaining", &self.remaining())
            .finish_non_exhaustive()
    }
}

impl ReplayCompletion {
    /// Replays `receipt_refs` (a run's receipts, in call order) from `blobs`.
    pub fn new(blobs: Arc<dyn BlobStore>, receipt_refs: Vec<String>) -> Self {
        let recorded = receipt_refs.len();
        Self {
            blobs,
            pending: Mutex::new(
                receipt_refs
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| (i + 1, r))
                    .collect(),
            ),
            recorded,
        }
    }

    /// How many recorded calls have not been asked for yet (a faithful replay ends at 0).
    pub fn remaining(&self) -> usize {
        // The queue is never left half-changed (only `pop_front` and `len` run under the lock),
        // so a lock poisoned by a panicking holder still tells the truth.
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// What in `request` differs from what `receipt` recorded, one phrase per part, naming the
/// part: the prompt (its hash), the tool choice, the parallel-calls setting.
fn differences(request: &LlmRequest, receipt: &ModelReceipt) -> Vec<String> {
    let mut differences = Vec::new();
    let hash = request.prompt_hash();
    if hash != receipt.request_hash {
        differences.push(format!(
            "its messages or tools (prompt hash {hash}, recorded {})",
            shown_cut(&receipt.request_hash)
        ));
    }
    if request.tool_choice != receipt.tool_choice {
        differences.push(format!(
            "its tool_choice ({}, recorded {})",
            tool_choice(&request.tool_choice),
            tool_choice(&receipt.tool_choice)
        ));
    }
    if request.parallel_tool_calls != receipt.parallel_tool_calls {
        differences.push(format!(
            "its parallel_tool_calls ({}, recorded {})",
            parallel(request.parallel_tool_calls),
            parallel(receipt.parallel_tool_calls)
        ));
    }
    differences
}

/// A tool choice as the wire names it (`auto`, `none`, `required`, `tool <id>`).
fn tool_choice(choice: &ToolChoice) -> String {
    match choice {
        ToolChoice::Auto => "auto".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::Tool(id) => format!("tool {id}"),
    }
}

/// A `parallel_tool_calls` setting.
fn parallel(setting: Option<bool>) -> &'static str {
    match setting {
        None => "unset",
        Some(true) => "true",
        Some(false) => "false",
    }
}

fn replay_error(call: usize, what: impl std::fmt::Display) -> CompletionError {
    CompletionError::Provider(format!("replay of model call {call}: {what}"))
}

#[async_trait]
impl CompletionPort for ReplayCompletion {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        cancel: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        if cancel.is_cancelled() {
            return Err(CompletionError::Cancelled);
        }
        let next = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let Some((call, receipt_ref)) = next else {
            return Err(CompletionError::Provider(format!(
                "replay: the run asks for model call {}, but only {} were recorded",
                self.recorded + 1,
                self.recorded
            )));
        };
        let blobs = self.blobs.as_ref();
        let receipt = ModelReceipt::load(blobs, &receipt_ref).await.map_err(|e| {
            let receipt_ref = shown_cut(&receipt_ref);
            replay_error(call, format_args!("receipt {receipt_ref}: {e}"))
        })?;
        let differences = differences(request, &receipt);
        if !differences.is_empty() {
            return Err(replay_error(
                call,
                format_args!(
                    "the request differs from the recorded one: {}",
                    differences.join("; ")
                ),
            ));
        }
        let completion = receipt
            .load_completion(blobs)
            .await
            .map_err(|e| replay_error(call, e))?;
        let recorded = receipt
            .load_deltas(blobs)
            .await
            .map_err(|e| replay_error(call, e))?;
        match recorded {
            Some(recorded) => recorded.into_iter().for_each(|d| deltas.delta(d)),
            None => {
                if !completion.text.is_empty() {
                    deltas.delta(CompletionDelta::Text {
                        delta: completion.text.clone(),
                    });
                }
                for (index, tool_call) in completion.tool_calls.iter().enumerate() {
                    deltas.delta(CompletionDelta::ToolCall {
                        index,
                        id: Some(tool_call.id.as_str().to_owned()),
                        name: Some(tool_call.name.clone()),
                        arguments: tool_call.arguments.clone(),
                    });
                }
            }
        }
        Ok(completion)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InMemoryBlobStore;

    /// A thread that panicked holding the receipt queue's lock does not make the replay lose
    /// count of the calls left: `remaining` (which `cogni replay` checks to fail a replay that
    /// leaves recorded calls unasked) still counts them, and a call still takes the next one.
    #[tokio::test]
    async fn a_poisoned_queue_still_counts_and_hands_out_its_receipts() {
        let replay = ReplayCompletion::new(
            Arc::new(InMemoryBlobStore::default()),
            vec!["r1".into(), "r2".into()],
        );
        let poisoned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = replay.pending.lock().unwrap();
            panic!("a holder panics");
        }));
        assert!(poisoned.is_err() && replay.pending.is_poisoned());
        assert_eq!(replay.remaining(), 2);
        // The receipt is not in the store: the call fails naming it, having taken it.
        let failed = replay
            .complete(&request(), &mut |_| {}, &CancellationToken::new())
            .await
            .unwrap_err();
        assert!(!failed.to_string().contains("poisoned"), "{failed}");
        assert_eq!(replay.remaining(), 1);
    }

    fn request() -> LlmRequest {
        LlmRequest {
            caller: ai_core::LlmCaller {
                run_id: ai_core::RunId::new("run-1").unwrap(),
                graph: None,
            },
            messages: vec![],
            tools: vec![],
            tool_choice: ai_core::ToolChoice::Auto,
            parallel_tool_calls: None,
        }
    }

    /// A damaged or hand-edited run log may hold a megabyte where a receipt's address or its
    /// recorded prompt hash should be: the replay's error names each shortened, never whole.
    #[tokio::test]
    async fn a_hostile_receipt_address_or_prompt_hash_is_named_shortened() {
        let blobs = Arc::new(InMemoryBlobStore::default());
        let huge = "f".repeat(1 << 20);
        let receipt = ModelReceipt {
            provider: "p".into(),
            model: "m".into(),
            request_hash: huge.clone(),
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
        let receipt_ref = blobs
            .put(&receipt.to_canonical_bytes().unwrap())
            .await
            .unwrap();
        let replay = ReplayCompletion::new(blobs, vec![huge.clone(), receipt_ref]);
        for _ in 0..2 {
            let failed = replay
                .complete(&request(), &mut |_| {}, &CancellationToken::new())
                .await
                .unwrap_err()
                .to_string();
            assert!(failed.len() < 1000 && failed.contains('…'), "{failed:.300}");
        }
    }
}

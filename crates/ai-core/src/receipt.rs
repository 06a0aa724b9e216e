//! Receipts of model calls: what was asked and what came back, as content-addressed blobs, so a
//! run can be replayed with the model answered from its receipts.
//!
//! A receipt names its parts by hash (see [`BlobStore`]): the tool set sent (`tools_ref`), the
//! resolved completion (`output_ref`), each tool call exactly as the provider sent it
//! (`tool_call_refs`, one [`ToolCallBlob`] each) and the ordered output items
//! (`output_items_ref`, a list of [`OutputItem`]). Every blob is canonical JSON
//! ([`canonical_json`]), so the same content always has the same address.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    BlobStore, BlobStoreError, CompletionDelta, FinishReason, LlmCompletion, LlmToolCall, RunId,
    ToolChoice, Usage, canonical_json,
};

/// One tool call exactly as the provider sent it: stored once as a blob, referenced by receipts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallBlob {
    /// The provider's call id (a Responses `call_id` where there is one).
    pub id: String,
    /// The function name as sent.
    pub name: String,
    /// The raw argument JSON string as sent: never parsed, re-serialized or repaired.
    pub arguments_json: String,
}

impl From<&LlmToolCall> for ToolCallBlob {
    fn from(call: &LlmToolCall) -> Self {
        Self {
            id: call.id.as_str().to_owned(),
            name: call.name.clone(),
            arguments_json: call.arguments.clone(),
        }
    }
}

/// One item of a model's output, in the order the model produced it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum OutputItem {
    /// Text from the model.
    Message {
        /// Who spoke (`assistant`).
        role: String,
        /// The text.
        content: String,
    },
    /// A tool call, as in its [`ToolCallBlob`], with what replay needs besides.
    ToolCall {
        /// The provider's call id.
        id: String,
        /// The function name as sent.
        name: String,
        /// The raw argument JSON string as sent.
        arguments_json: String,
        /// False when the stream was cut inside this call.
        complete: bool,
        /// Opaque provider fields on the call.
        #[serde(default, skip_serializing_if = "Map::is_empty")]
        provider_fields: Map<String, Value>,
    },
}

impl OutputItem {
    /// The items of a completion: its text (when there is any), then its tool calls in order.
    pub fn from_completion(completion: &LlmCompletion) -> Vec<OutputItem> {
        let mut items = Vec::with_capacity(completion.tool_calls.len() + 1);
        if !completion.text.is_empty() {
            items.push(OutputItem::Message {
                role: "assistant".into(),
                content: completion.text.clone(),
            });
        }
        items.extend(
            completion
                .tool_calls
                .iter()
                .map(|call| OutputItem::ToolCall {
                    id: call.id.as_str().to_owned(),
                    name: call.name.clone(),
                    arguments_json: call.arguments.clone(),
                    complete: call.complete,
                    provider_fields: call.provider_fields.clone(),
                }),
        );
        items
    }
}

/// The receipt of one model call. Every `*_ref` is the address of a blob in a [`BlobStore`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelReceipt {
    /// The provider as configured (e.g. `openai-chat`).
    pub provider: String,
    /// The model as configured.
    pub model: String,
    /// The request's [`crate::prompt_hash`] (canonical messages and tool specs).
    pub request_hash: String,
    /// The request's [`LlmRequest::tool_choice`](crate::LlmRequest::tool_choice), which the
    /// prompt hash does not cover. Left out of the blob when it is [`ToolChoice::Auto`], the
    /// graph driver's default, so a receipt written before it was recorded reads as `Auto`.
    #[serde(default, skip_serializing_if = "ToolChoice::is_auto")]
    pub tool_choice: ToolChoice,
    /// The request's
    /// [`LlmRequest::parallel_tool_calls`](crate::LlmRequest::parallel_tool_calls), which the
    /// prompt hash does not cover. Left out of the blob when it is `None` (the provider's
    /// default, which the graph driver sends), so a receipt written before it was recorded reads
    /// as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// The tool set sent with the request (canonical JSON, stored once per distinct set).
    pub tools_ref: String,
    /// The resolved [`LlmCompletion`] as canonical JSON: what replay answers with.
    pub output_ref: String,
    /// Token counts, when the provider sent them.
    pub usage: Option<Usage>,
    /// One [`ToolCallBlob`] per tool call, in the model's order.
    pub tool_call_refs: Vec<String>,
    /// The ordered [`OutputItem`] list.
    pub output_items_ref: String,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// The streamed fragments in order (a list of [`CompletionDelta`]), so a replay streams what
    /// the model streamed; absent in receipts written without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deltas_ref: Option<String>,
}

impl ModelReceipt {
    /// The receipt as canonical JSON bytes: what its blob holds, so its address is stable.
    pub fn to_canonical_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        canonical_bytes(self)
    }

    /// Reads a receipt from a blob's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ReceiptError> {
        serde_json::from_slice(bytes).map_err(|e| ReceiptError::Decode {
            what: "model receipt",
            reason: crate::describe_json_error(&e),
        })
    }

    /// Loads the receipt at `receipt_ref` from `blobs`.
    pub async fn load(blobs: &dyn BlobStore, receipt_ref: &str) -> Result<Self, ReceiptError> {
        Self::from_bytes(&blobs.get(receipt_ref).await?)
    }

    /// Loads the completion this receipt recorded (its `output_ref`), for replay.
    pub async fn load_completion(
        &self,
        blobs: &dyn BlobStore,
    ) -> Result<LlmCompletion, ReceiptError> {
        let bytes = blobs.get(&self.output_ref).await?;
        serde_json::from_slice(&bytes).map_err(|e| ReceiptError::Decode {
            what: "recorded completion",
            reason: crate::describe_json_error(&e),
        })
    }

    /// Loads the streamed fragments this receipt recorded, if it recorded them.
    pub async fn load_deltas(
        &self,
        blobs: &dyn BlobStore,
    ) -> Result<Option<Vec<CompletionDelta>>, ReceiptError> {
        let Some(hash) = &self.deltas_ref else {
            return Ok(None);
        };
        let bytes = blobs.get(hash).await?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ReceiptError::Decode {
                what: "recorded deltas",
                reason: crate::describe_json_error(&e),
            })
    }

    /// Loads the tool call blobs this receipt references, in order.
    pub async fn load_tool_calls(
        &self,
        blobs: &dyn BlobStore,
    ) -> Result<Vec<ToolCallBlob>, ReceiptError> {
        let mut calls = Vec::with_capacity(self.tool_call_refs.len());
        for hash in &self.tool_call_refs {
            let bytes = blobs.get(hash).await?;
            calls.push(
                serde_json::from_slice(&bytes).map_err(|e| ReceiptError::Decode {
                    what: "tool call blob",
                    reason: crate::describe_json_error(&e),
                })?,
            );
        }
        Ok(calls)
    }
}

/// Serializes `value` as canonical JSON bytes (sorted keys, no whitespace): the bytes a blob of
/// it holds, so equal content always has the same address.
///
/// ```
/// let call = ai_core::ToolCallBlob {
///     id: "c1".into(),
///     name: "f".into(),
///     arguments_json: "{ }".into(),
/// };
/// assert_eq!(
///     ai_core::canonical_bytes(&call).unwrap(),
///     br#"{"arguments_json":"{ }","id":"c1","name":"f"}"#
/// );
/// ```
pub fn canonical_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let value = serde_json::to_value(value)?;
    Ok(canonical_json(&value).into_bytes())
}

/// Why a receipt or one of its blobs could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiptError {
    /// The blob store refused (missing, corrupt, failing).
    #[error(transparent)]
    Blob(#[from] BlobStoreError),
    /// A blob held bytes that are not the expected JSON.
    #[error("{what} does not decode: {reason}")]
    Decode {
        /// What was being read.
        what: &'static str,
        /// What is wrong and where ([`crate::describe_json_error`]): never the blob's contents.
        reason: String,
    },
}

/// Where a recording completion reports each receipt it wrote, so a run log can reference it.
///
/// Closures are sinks:
///
/// ```
/// use std::sync::Mutex;
/// use ai_core::{ModelReceipt, ReceiptSink, RunId};
/// let seen = Mutex::new(Vec::new());
/// let sink = |run: &RunId, hash: &str, _: &ModelReceipt| {
///     seen.lock().unwrap().push((run.to_string(), hash.to_owned()))
/// };
/// # let receipt = ModelReceipt { provider: "p".into(), model: "m".into(),
/// #     request_hash: "r".into(), tool_choice: ai_core::ToolChoice::Auto,
/// #     parallel_tool_calls: None,
/// #     tools_ref: "t".into(), output_ref: "o".into(), usage: None,
/// #     tool_call_refs: vec![], output_items_ref: "i".into(),
/// #     finish_reason: ai_core::FinishReason::Stop, deltas_ref: None };
/// sink.receipt(&RunId::new("run-1").unwrap(), "abc", &receipt);
/// assert_eq!(seen.lock().unwrap()[0].1, "abc");
/// ```
pub trait ReceiptSink: Send + Sync {
    /// A receipt for a model call of `run_id` was stored at `receipt_ref`.
    fn receipt(&self, run_id: &RunId, receipt_ref: &str, receipt: &ModelReceipt);
}

impl<F: Fn(&RunId, &str, &ModelReceipt) + Send + Sync> ReceiptSink for F {
    fn receipt(&self, run_id: &RunId, receipt_ref: &str, receipt: &ModelReceipt) {
        self(run_id, receipt_ref, receipt)
    }
}

//! The events a run emits, in one provider- and UI-neutral vocabulary.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ToolCallId, ToolOutcome, Usage};

/// Why a run ended; carried by the one [`AiEvent::Done`] of each run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DoneReason {
    /// The model finished without asking for more tools.
    Stop,
    /// The model's last turn was cut off by its output limit (the provider's `length`, or the
    /// Responses API's `max_output_tokens`) before it asked for tools: its answer, if any, is
    /// incomplete. (A cut turn that asked for tools does not end the run: its calls are answered
    /// as not run and the model is asked again.)
    Length,
    /// The provider's content filter stopped the model's last turn before it asked for tools:
    /// its answer, if any, is incomplete. (A filtered turn that asked for tools does not end the
    /// run: its calls are answered as not run and the model is asked again.)
    ContentFilter,
    /// The provider ended the model's last turn, before it asked for tools, for a reason that is
    /// neither a natural end nor one of the cuts above (vLLM's `abort`, or any other
    /// [`crate::FinishReason::Other`] that is not a backend's own name for one of them, such as
    /// TGI's `eos_token` or Anthropic's `max_tokens`, which the loop reads as what it means):
    /// its answer, if any, may be incomplete. (Such a turn that asked for tools does not end the
    /// run: its calls run as any others, unless every one of them was cut short, as vLLM's
    /// `abort` marks them; then none runs, and if the turn took the run's last step, the run
    /// ends `other`.)
    Other,
    /// The loop reached its step limit.
    MaxSteps,
    /// A tool call waits for a human decision.
    AwaitingApproval,
    /// The run was cancelled.
    Cancelled,
    /// The run failed; an [`AiEvent::Error`] came before.
    Error,
}

/// One thing that happened in a run. A run emits exactly one [`AiEvent::Done`], last.
///
/// Events carry validated arguments and redacted results only, never secrets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AiEvent {
    /// A model call begins (step 1 is the run's first model call). Everything up to the next
    /// `StepStarted` or `Done` belongs to this step: its text, its tool calls and their results.
    StepStarted {
        /// The model call's number in this run, from 1.
        step: u32,
    },
    /// Model text, as it streams.
    TextDelta {
        /// The new text.
        delta: String,
    },
    /// A tool call begins (the runner took it; `args` are the validated arguments, absent when they
    /// did not parse or the call was refused before validation).
    ToolCallStart {
        /// The call.
        tool_call_id: ToolCallId,
        /// The tool name as the model sent it.
        tool_name: Arc<str>,
        /// The validated arguments. Left out when `None`; present, `null` included, it reads
        /// back as `Some`.
        #[serde(
            skip_serializing_if = "Option::is_none",
            default,
            deserialize_with = "crate::result::some_if_present"
        )]
        args: Option<Arc<Value>>,
    },
    /// The model began streaming a tool call (its id and name are known); argument fragments
    /// follow as [`AiEvent::ToolCallArgsDelta`]. For display only: the call runs, if at all, when
    /// the runner emits [`AiEvent::ToolCallStart`]. One that the model's completed answer does
    /// not hold under this id (the server named it otherwise, or left it out) never runs, and
    /// gets its [`AiEvent::ToolCallResult`] without a start.
    ToolCallStreamStart {
        /// The call.
        tool_call_id: ToolCallId,
        /// The tool name as the model sent it.
        tool_name: Arc<str>,
    },
    /// A fragment of a tool call's arguments as the model streams them, for display only.
    ToolCallArgsDelta {
        /// The call.
        tool_call_id: ToolCallId,
        /// The raw fragment.
        delta: String,
    },
    /// A tool call ended; every started call gets exactly one, and so does a streamed call
    /// ([`AiEvent::ToolCallStreamStart`]) that never starts because the model's completed answer
    /// does not hold it (unless the run ends before that answer comes).
    ToolCallResult {
        /// The call.
        tool_call_id: ToolCallId,
        /// The tool name as the model sent it.
        tool_name: Arc<str>,
        /// The redacted value or the coded failure.
        outcome: ToolOutcome,
    },
    /// An attempt failed and the call will be tried again (for a UI: "retrying 2/3 in 400 ms").
    /// Not sent for a retry the tool's circuit would refuse when the wait ends; the call ends at
    /// once instead. A circuit that opens during the wait still ends the call `circuit_open`.
    ToolCallRetrying {
        /// The call (the same id across attempts).
        tool_call_id: ToolCallId,
        /// The attempt about to start (2 for the first retry).
        attempt: u32,
        /// Attempts allowed in all.
        max_attempts: u32,
        /// The wait before it starts.
        retry_in_ms: u64,
        /// What kind of failure the last attempt had.
        category: crate::ToolErrorCategory,
    },
    /// A call waits for a human to approve or deny it.
    ApprovalRequired {
        /// The call.
        tool_call_id: ToolCallId,
        /// The tool.
        tool_id: crate::ToolId,
        /// The validated arguments the approval is for.
        args: Arc<Value>,
        /// The hash an approval must name (SHA-256 of the tool's id, the connection of a tool
        /// that needs one, and the canonical arguments).
        args_hash: String,
    },
    /// Token usage of one model call.
    Usage {
        /// The counts.
        usage: Usage,
    },
    /// A run-level failure, with a message safe to show.
    Error {
        /// What went wrong.
        message: String,
    },
    /// The run is over.
    Done {
        /// Why.
        reason: DoneReason,
    },
}

impl AiEvent {
    /// The tool call the event is about, if it is about one.
    ///
    /// The match lists every variant (the enum is `#[non_exhaustive]` only outside this
    /// crate), so a variant added later has to say here whether it names a call.
    ///
    /// ```
    /// use ai_core::{AiEvent, DoneReason, ToolCallId};
    /// let id = ToolCallId::new("call_1").unwrap();
    /// let event = AiEvent::ToolCallStart { tool_call_id: id.clone(), tool_name: "core__x".into(), args: None };
    /// assert_eq!(event.tool_call_id(), Some(&id));
    /// assert_eq!(AiEvent::Done { reason: DoneReason::Stop }.tool_call_id(), None);
    /// ```
    pub fn tool_call_id(&self) -> Option<&ToolCallId> {
        match self {
            Self::ToolCallStreamStart { tool_call_id, .. }
            | Self::ToolCallArgsDelta { tool_call_id, .. }
            | Self::ToolCallStart { tool_call_id, .. }
            | Self::ToolCallResult { tool_call_id, .. }
            | Self::ToolCallRetrying { tool_call_id, .. }
            | Self::ApprovalRequired { tool_call_id, .. } => Some(tool_call_id),
            Self::StepStarted { .. }
            | Self::TextDelta { .. }
            | Self::Usage { .. }
            | Self::Error { .. }
            | Self::Done { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events stored before the cut reasons existed still read, and the new reasons are stored
    /// under the names the UIs and the run log see.
    #[test]
    fn done_reasons_read_old_data_and_name_the_cut_ones() {
        for (json, reason) in [
            ("stop", DoneReason::Stop),
            ("max_steps", DoneReason::MaxSteps),
            ("awaiting_approval", DoneReason::AwaitingApproval),
            ("cancelled", DoneReason::Cancelled),
            ("error", DoneReason::Error),
            ("length", DoneReason::Length),
            ("content_filter", DoneReason::ContentFilter),
            ("other", DoneReason::Other),
        ] {
            let stored = format!(r#"{{"type":"done","reason":"{json}"}}"#);
            let event: AiEvent = serde_json::from_str(&stored).unwrap();
            assert_eq!(event, AiEvent::Done { reason });
            assert_eq!(serde_json::to_string(&event).unwrap(), stored);
        }
        // An unknown reason is refused as data, never a panic.
        assert!(serde_json::from_str::<DoneReason>(r#""truncated""#).is_err());
    }
}

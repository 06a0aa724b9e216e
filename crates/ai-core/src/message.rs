//! The provider-neutral conversation and the rules a history must keep before it goes out.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ToolCallId;

/// A tool call as recorded on an assistant message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssistantToolCall {
    /// The provider's call id.
    pub id: ToolCallId,
    /// The tool name as the model sent it.
    pub name: String,
    /// The raw argument JSON exactly as the model sent it.
    pub arguments: String,
    /// Opaque provider fields on the call (e.g. a `thought_signature`), sent back unchanged.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub provider_fields: Map<String, Value>,
}

/// One message of a conversation.
///
/// Exhaustive on purpose: the wire encoders and the history readers must place every message,
/// and a catch-all arm there would drop one from what the model is sent without any error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions.
    System {
        /// The text.
        content: String,
    },
    /// The user's turn.
    User {
        /// The text (not blank: [`validate_history`] refuses a user message without text).
        content: String,
    },
    /// The model's turn: text, tool calls, or both.
    Assistant {
        /// The text (may be empty when the turn is only tool calls).
        content: String,
        /// The calls, in the model's order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<AssistantToolCall>,
    },
    /// The answer to one tool call.
    Tool {
        /// The call it answers.
        tool_call_id: ToolCallId,
        /// The result as sent to the model.
        content: String,
    },
}

/// Where and how a history breaks the tool-call pairing rules.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// A tool message answers no pending call of the assistant message before it.
    #[error("message {index}: tool message for {tool_call_id} answers no pending tool call")]
    OrphanToolMessage {
        /// Position in the history.
        index: usize,
        /// The id it claims to answer.
        tool_call_id: ToolCallId,
    },
    /// Tool messages answer their calls in a different order than the calls were made.
    #[error("message {index}: expected the result of {expected}, found {found}")]
    OutOfOrder {
        /// Position in the history.
        index: usize,
        /// The call that should be answered next.
        expected: ToolCallId,
        /// The call that was answered.
        found: ToolCallId,
    },
    /// A tool call has no answer before the next non-tool message or the end.
    #[error("message {index}: tool call {tool_call_id} is never answered")]
    Unanswered {
        /// Position of the assistant message that made the call.
        index: usize,
        /// The call.
        tool_call_id: ToolCallId,
    },
    /// An assistant message has neither text (whitespace counts as none) nor tool calls: a
    /// message without content, which Anthropic refuses (and OpenAI as `content: null`).
    #[error("message {index}: assistant message has neither text nor tool calls")]
    EmptyAssistantMessage {
        /// Position in the history.
        index: usize,
    },
    /// A user message has no text (whitespace counts as none): nothing for a model to answer,
    /// and a message Anthropic refuses (an empty text block).
    #[error("message {index}: user message has no text")]
    EmptyUserMessage {
        /// Position in the history.
        index: usize,
    },
    /// A system message has no text (whitespace counts as none): no instructions, and a message
    /// real endpoints refuse (LM Studio answers 400; Anthropic's and Bedrock's gateways refuse
    /// the empty system text block it becomes), though OpenAI takes it.
    #[error("message {index}: system message has no text")]
    EmptySystemMessage {
        /// Position in the history.
        index: usize,
    },
    /// Two tool calls in the history share an id.
    #[error("message {index}: tool call id {tool_call_id} is used twice")]
    DuplicateToolCallId {
        /// Position of the second use.
        index: usize,
        /// The id.
        tool_call_id: ToolCallId,
    },
}

impl HistoryError {
    /// This error naming its message by `place(index)` instead of `index`: for a caller that
    /// checked another list than its own (its history with messages left out, or added), so
    /// that the error names the message by its place in the history the caller was given.
    pub fn renumbered(self, place: impl FnOnce(usize) -> usize) -> Self {
        match self {
            Self::OrphanToolMessage {
                index,
                tool_call_id,
            } => Self::OrphanToolMessage {
                index: place(index),
                tool_call_id,
            },
            Self::OutOfOrder {
                index,
                expected,
                found,
            } => Self::OutOfOrder {
                index: place(index),
                expected,
                found,
            },
            Self::Unanswered {
                index,
                tool_call_id,
            } => Self::Unanswered {
                index: place(index),
                tool_call_id,
            },
            Self::EmptyAssistantMessage { index } => Self::EmptyAssistantMessage {
                index: place(index),
            },
            Self::EmptyUserMessage { index } => Self::EmptyUserMessage {
                index: place(index),
            },
            Self::EmptySystemMessage { index } => Self::EmptySystemMessage {
                index: place(index),
            },
            Self::DuplicateToolCallId {
                index,
                tool_call_id,
            } => Self::DuplicateToolCallId {
                index: place(index),
                tool_call_id,
            },
        }
    }
}

/// Checks that every tool message answers a call of the assistant message just before its run of
/// tool messages, in call order, that no call is left unanswered before the next message of
/// another role or the end, that call ids are unique, that every user and system message holds
/// text, and that every assistant message holds text or calls (whitespace is no text). An
/// invalid history is an error, never patched.
///
/// An empty system message is refused though OpenAI takes one: other OpenAI-compatible
/// endpoints do not (LM Studio, and gateways to Anthropic and Bedrock, which refuse an empty
/// system text block), and it holds no instructions.
///
/// ```
/// use ai_core::{AssistantToolCall, Message, ToolCallId, validate_history};
/// let id = ToolCallId::new("call_1").unwrap();
/// let mut history = vec![
///     Message::User { content: "time?".into() },
///     Message::Assistant { content: String::new(), tool_calls: vec![AssistantToolCall {
///         id: id.clone(), name: "core__get_current_time".into(), arguments: "{}".into(),
///         provider_fields: Default::default() }] },
/// ];
/// assert!(validate_history(&history).is_err()); // unanswered
/// history.push(Message::Tool { tool_call_id: id, content: "{}".into() });
/// assert!(validate_history(&history).is_ok());
/// ```
pub fn validate_history(messages: &[Message]) -> Result<(), HistoryError> {
    let mut seen_ids: HashSet<&ToolCallId> = HashSet::new();
    // The calls of the last assistant message still waiting for answers, and where it stood.
    let mut pending: std::slice::Iter<'_, AssistantToolCall> = [].iter();
    let mut pending_at = 0;
    for (index, message) in messages.iter().enumerate() {
        if let Message::Tool { tool_call_id, .. } = message {
            match pending.next() {
                Some(call) if &call.id == tool_call_id => continue,
                Some(call) if pending.clone().any(|c| &c.id == tool_call_id) => {
                    return Err(HistoryError::OutOfOrder {
                        index,
                        expected: call.id.clone(),
                        found: tool_call_id.clone(),
                    });
                }
                _ => {
                    return Err(HistoryError::OrphanToolMessage {
                        index,
                        tool_call_id: tool_call_id.clone(),
                    });
                }
            }
        }
        if let Some(call) = pending.next() {
            return Err(HistoryError::Unanswered {
                index: pending_at,
                tool_call_id: call.id.clone(),
            });
        }
        if let Message::User { content } = message
            && content.trim().is_empty()
        {
            return Err(HistoryError::EmptyUserMessage { index });
        }
        if let Message::System { content } = message
            && content.trim().is_empty()
        {
            return Err(HistoryError::EmptySystemMessage { index });
        }
        if let Message::Assistant {
            content,
            tool_calls,
        } = message
        {
            if tool_calls.is_empty() && content.trim().is_empty() {
                return Err(HistoryError::EmptyAssistantMessage { index });
            }
            for call in tool_calls {
                if !seen_ids.insert(&call.id) {
                    return Err(HistoryError::DuplicateToolCallId {
                        index,
                        tool_call_id: call.id.clone(),
                    });
                }
            }
            pending = tool_calls.iter();
            pending_at = index;
        }
    }
    match pending.next() {
        Some(call) => Err(HistoryError::Unanswered {
            index: pending_at,
            tool_call_id: call.id.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;

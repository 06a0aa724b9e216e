//! Rebuilding a provider-valid history from UI events (when a caller has nothing else).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use ai_core::{AssistantToolCall, HistoryError, Message, ToolCallId, validate_history};

use crate::reducer::recorded_name;

/// One item of a UI's history, in the order the UI shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HistoryItem {
    /// Instructions.
    System {
        /// The text.
        content: String,
    },
    /// A user message.
    User {
        /// The text.
        content: String,
    },
    /// Assistant text.
    AssistantText {
        /// The text.
        content: String,
    },
    /// An assistant tool call.
    ToolCall {
        /// The call id.
        id: ToolCallId,
        /// The tool name.
        name: String,
        /// The raw argument JSON.
        arguments: String,
    },
    /// A tool call's result.
    ToolResult {
        /// The call it answers.
        tool_call_id: ToolCallId,
        /// The result as sent to the model.
        content: String,
    },
}

/// Why a UI history cannot become a provider history.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReconstructError {
    /// A result answers no call of the assistant turn it stands in.
    #[error("item {index}: result for {tool_call_id} answers no tool call of its turn")]
    Orphan {
        /// Position in the UI history.
        index: usize,
        /// The id.
        tool_call_id: ToolCallId,
    },
    /// A call has no result before the next user or system message (or the end).
    #[error(
        "tool call {tool_call_id} has no result before the next user or system message or the \
         end of the history"
    )]
    Unanswered {
        /// The call.
        tool_call_id: ToolCallId,
    },
    /// A call id or a result appears twice.
    #[error(
        "item {index}: tool call id {tool_call_id} is used twice (by two calls or two results)"
    )]
    Duplicate {
        /// Position in the UI history.
        index: usize,
        /// The id.
        tool_call_id: ToolCallId,
    },
    /// A user message holds no text (none, or whitespace only): there is nothing in it for a
    /// model to answer.
    #[error("item {index}: a user message holds no text")]
    EmptyUserMessage {
        /// Position in the UI history.
        index: usize,
    },
    /// A system message holds no text (none, or whitespace only): no instructions, and a
    /// message providers refuse.
    #[error("item {index}: a system message holds no text")]
    EmptySystemMessage {
        /// Position in the UI history.
        index: usize,
    },
    /// The rebuilt history still breaks the rules. Its message's positions are those of the
    /// rebuilt messages, not of the UI history's items. The rule broken is part of the message
    /// (which a 400 answer carries), so it is not also the `source()`.
    #[error("the rebuilt provider history is invalid: {0}")]
    Invalid(HistoryError),
}

impl From<HistoryError> for ReconstructError {
    fn from(error: HistoryError) -> Self {
        Self::Invalid(error)
    }
}

/// An assistant turn being gathered: its text, its calls, their results. The results are kept
/// by call id, and the calls' ids in a set, so pairing a turn of many calls costs each item one
/// lookup rather than a scan of the turn.
#[derive(Default)]
struct Turn {
    text: String,
    calls: Vec<AssistantToolCall>,
    call_ids: HashSet<ToolCallId>,
    results: HashMap<ToolCallId, String>,
}

impl Turn {
    /// Whitespace is no text, as the reducer records a model turn.
    fn is_empty(&self) -> bool {
        self.text.trim().is_empty() && self.calls.is_empty()
    }

    fn all_answered(&self) -> bool {
        !self.calls.is_empty() && self.results.len() == self.calls.len()
    }

    /// The assistant message, then its results in call order.
    fn flush(&mut self, out: &mut Vec<Message>) -> Result<(), ReconstructError> {
        let mut turn = std::mem::take(self);
        if turn.is_empty() {
            return Ok(());
        }
        if turn.text.trim().is_empty() {
            turn.text.clear();
        }
        let mut results = turn.results;
        let mut answers = Vec::with_capacity(turn.calls.len());
        for call in &turn.calls {
            let (tool_call_id, content) =
                results
                    .remove_entry(&call.id)
                    .ok_or_else(|| ReconstructError::Unanswered {
                        tool_call_id: call.id.clone(),
                    })?;
            answers.push(Message::Tool {
                tool_call_id,
                content,
            });
        }
        out.push(Message::Assistant {
            content: turn.text,
            tool_calls: turn.calls,
        });
        out.extend(answers);
        Ok(())
    }
}

/// Rebuilds provider messages from UI items: assistant text and calls of one turn become one
/// assistant message followed by the results in call order (however the UI interleaved them);
/// results are paired by id; orphans, duplicates, unanswered calls and user or system messages
/// without text are errors, never patched; the result passes [`validate_history`]. As
/// [`crate::reduce`] records a model turn, whitespace-only text counts as none (a turn with
/// neither text nor calls is left out) and a tool name providers refuse to read back is
/// recorded in a form they accept.
pub fn reconstruct_history(items: &[HistoryItem]) -> Result<Vec<Message>, ReconstructError> {
    let mut out = Vec::new();
    let mut turn = Turn::default();
    let mut seen_calls: HashSet<&ToolCallId> = HashSet::new();
    let mut seen_results: HashSet<&ToolCallId> = HashSet::new();
    for (index, item) in items.iter().enumerate() {
        match item {
            HistoryItem::System { content } => {
                if content.trim().is_empty() {
                    return Err(ReconstructError::EmptySystemMessage { index });
                }
                turn.flush(&mut out)?;
                out.push(Message::System {
                    content: content.clone(),
                });
            }
            HistoryItem::User { content } => {
                if content.trim().is_empty() {
                    return Err(ReconstructError::EmptyUserMessage { index });
                }
                turn.flush(&mut out)?;
                out.push(Message::User {
                    content: content.clone(),
                });
            }
            HistoryItem::AssistantText { content } => {
                if turn.all_answered() {
                    turn.flush(&mut out)?;
                }
                turn.text.push_str(content);
            }
            HistoryItem::ToolCall {
                id,
                name,
                arguments,
            } => {
                if !seen_calls.insert(id) {
                    return Err(ReconstructError::Duplicate {
                        index,
                        tool_call_id: id.clone(),
                    });
                }
                if turn.all_answered() {
                    turn.flush(&mut out)?;
                }
                turn.call_ids.insert(id.clone());
                turn.calls.push(AssistantToolCall {
                    id: id.clone(),
                    name: recorded_name(name),
                    arguments: arguments.clone(),
                    provider_fields: Default::default(),
                });
            }
            HistoryItem::ToolResult {
                tool_call_id,
                content,
            } => {
                if !seen_results.insert(tool_call_id) {
                    return Err(ReconstructError::Duplicate {
                        index,
                        tool_call_id: tool_call_id.clone(),
                    });
                }
                if !turn.call_ids.contains(tool_call_id) {
                    return Err(ReconstructError::Orphan {
                        index,
                        tool_call_id: tool_call_id.clone(),
                    });
                }
                turn.results.insert(tool_call_id.clone(), content.clone());
            }
        }
    }
    turn.flush(&mut out)?;
    validate_history(&out)?;
    Ok(out)
}

#[cfg(test)]
mod tests;

//! The loop as a pure reducer: `(AgentState, AgentEvent) -> (AgentState, Vec<Intent>)`.

use serde::{Deserialize, Serialize};

use ai_core::{
    AssistantToolCall, DoneReason, LlmCompletion, LlmToolCall, Message, ToolCallId, ToolErrorCode,
    ToolExecResult, ToolFailure, validate_history,
};

/// Where a thread's loop stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// No run in progress.
    Idle,
    /// A model call is out.
    AwaitingModel,
    /// These tool calls are out, in the model's order.
    AwaitingTools {
        /// The pending calls.
        calls: Vec<ToolCallId>,
    },
    /// The last run ended.
    Finished {
        /// Why.
        reason: DoneReason,
    },
}

/// A thread's loop state: the history and where the current run stands. Serde data, so it can
/// be saved and resumed between any two events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentState {
    messages: Vec<Message>,
    phase: Phase,
    /// Model calls that asked for tools in the current run.
    steps: u32,
    max_steps: u32,
}

impl AgentState {
    /// A new thread, optionally starting from a system prompt, allowing `max_steps` model calls
    /// with tool calls per run.
    pub fn new(system: Option<String>, max_steps: u32) -> Self {
        Self {
            messages: system
                .map(|content| vec![Message::System { content }])
                .unwrap_or_default(),
            phase: Phase::Idle,
            steps: 0,
            max_steps,
        }
    }

    /// The thread's history.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Where the loop stands.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }
}

/// What happened, fed to the reducer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The user's next message starts a run.
    UserMessage {
        /// The text.
        content: String,
    },
    /// The model call resolved.
    ModelCompleted {
        /// The decoder's assembled completion.
        completion: LlmCompletion,
    },
    /// The model call failed.
    ModelFailed {
        /// A safe message.
        message: String,
    },
    /// The tool calls of the last turn ended.
    ToolResults {
        /// One result per call (any order; matched by id).
        results: Vec<ToolExecResult>,
    },
    /// The run was cancelled.
    Cancel,
}

/// What the driver must do next.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Intent {
    /// Call the model with this history (it passed `validate_history`).
    CallModel {
        /// The history to send.
        messages: Vec<Message>,
    },
    /// Run these calls (only from the assembled completion), in the model's order.
    RunTools {
        /// The calls.
        calls: Vec<LlmToolCall>,
    },
    /// End the run.
    Finish {
        /// Why.
        reason: DoneReason,
        /// A safe message when the run failed.
        error: Option<String>,
    },
}

/// The cancelled answer to a call that never got one.
fn cancelled(id: &ToolCallId) -> Message {
    let result = ToolExecResult::error(
        id.clone(),
        ToolFailure::new(
            ToolErrorCode::Cancelled,
            "the run was cancelled before the tool call finished",
        ),
    );
    Message::Tool {
        tool_call_id: id.clone(),
        content: result.model_content(),
    }
}

fn finish(
    mut state: AgentState,
    reason: DoneReason,
    error: Option<String>,
) -> (AgentState, Vec<Intent>) {
    state.phase = Phase::Finished { reason };
    (state, vec![Intent::Finish { reason, error }])
}

fn call_model(mut state: AgentState) -> (AgentState, Vec<Intent>) {
    if let Err(error) = validate_history(&state.messages) {
        return finish(
            state,
            DoneReason::Error,
            Some(format!("invalid history: {error}")),
        );
    }
    state.phase = Phase::AwaitingModel;
    let messages = state.messages.clone();
    (state, vec![Intent::CallModel { messages }])
}

/// Answers every pending call that has no answer yet, so the history stays valid.
fn close_pending(state: &mut AgentState) {
    if let Phase::AwaitingTools { calls } = std::mem::replace(&mut state.phase, Phase::Idle) {
        state.messages.extend(calls.iter().map(cancelled));
    }
}

/// The loop's logic. Pure and deterministic: no IO, no clock, no async.
///
/// ```
/// use graph::{AgentEvent, AgentState, Intent, reduce};
/// let (state, intents) = reduce(AgentState::new(None, 10), AgentEvent::UserMessage { content: "hi".into() });
/// assert!(matches!(&intents[..], [Intent::CallModel { messages }] if messages.len() == 1));
/// assert_eq!(state.messages().len(), 1);
/// ```
pub fn reduce(mut state: AgentState, event: AgentEvent) -> (AgentState, Vec<Intent>) {
    match event {
        AgentEvent::UserMessage { content } => {
            close_pending(&mut state);
            state.messages.push(Message::User { content });
            state.steps = 0;
            call_model(state)
        }
        AgentEvent::ModelCompleted { completion } => {
            if state.phase != Phase::AwaitingModel {
                return finish(
                    state,
                    DoneReason::Error,
                    Some("a model result arrived that no call was waiting for".into()),
                );
            }
            let calls = completion.tool_calls;
            state.messages.push(Message::Assistant {
                content: completion.text,
                tool_calls: calls
                    .iter()
                    .map(|c| AssistantToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                        provider_fields: c.provider_fields.clone(),
                    })
                    .collect(),
            });
            if calls.is_empty() {
                return finish(state, DoneReason::Stop, None);
            }
            state.steps += 1;
            state.phase = Phase::AwaitingTools {
                calls: calls.iter().map(|c| c.id.clone()).collect(),
            };
            (state, vec![Intent::RunTools { calls }])
        }
        AgentEvent::ToolResults { mut results } => {
            let Phase::AwaitingTools { calls } = std::mem::replace(&mut state.phase, Phase::Idle)
            else {
                return finish(
                    state,
                    DoneReason::Error,
                    Some("tool results arrived that no call was waiting for".into()),
                );
            };
            for id in &calls {
                let answer = match results.iter().position(|r| &r.tool_call_id == id) {
                    Some(at) => {
                        let result = results.swap_remove(at);
                        Message::Tool {
                            tool_call_id: id.clone(),
                            content: result.model_content(),
                        }
                    }
                    None => cancelled(id),
                };
                state.messages.push(answer);
            }
            if state.steps >= state.max_steps {
                finish(state, DoneReason::MaxSteps, None)
            } else {
                call_model(state)
            }
        }
        AgentEvent::ModelFailed { message } => finish(state, DoneReason::Error, Some(message)),
        AgentEvent::Cancel => {
            close_pending(&mut state);
            finish(state, DoneReason::Cancelled, None)
        }
    }
}

#[cfg(test)]
mod tests;

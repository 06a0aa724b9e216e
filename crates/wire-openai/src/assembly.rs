//! Tool-call assembly shared by both wires: calls in model order, arguments appended in place.

use ai_core::{CompletionDelta, FinishReason, LlmCompletion, LlmToolCall, ToolCallId, Usage};

use crate::sse::{SseEvent, SseParser};
use serde_json::{Map, Value};

use crate::{DecodeError, Limits};

/// The display deltas of one `feed`, coalesced: all fragments of one call in one read become
/// one delta (the first, which names the call when it is new), and consecutive text joins.
/// Fewer, larger deltas cost one allocation per call per read instead of one per fragment.
#[derive(Debug, Default)]
pub(crate) struct Deltas {
    pub(crate) deltas: Vec<CompletionDelta>,
    /// For each call position, its delta in `deltas` during this read.
    by_call: Vec<Option<usize>>,
}

impl Deltas {
    pub(crate) fn text(&mut self, text: &str) {
        if let Some(CompletionDelta::Text { delta }) = self.deltas.last_mut() {
            delta.push_str(text);
        } else {
            self.deltas.push(CompletionDelta::Text {
                delta: text.to_owned(),
            });
        }
    }

    fn tool_call(
        &mut self,
        position: usize,
        id: Option<String>,
        name: Option<String>,
        fragment: &str,
    ) {
        if let Some(Some(at)) = self.by_call.get(position)
            && let Some(CompletionDelta::ToolCall { arguments, .. }) = self.deltas.get_mut(*at)
            && id.is_none()
            && name.is_none()
        {
            arguments.push_str(fragment);
            return;
        }
        if self.by_call.len() <= position {
            self.by_call.resize(position + 1, None);
        }
        self.by_call[position] = Some(self.deltas.len());
        self.deltas.push(CompletionDelta::ToolCall {
            index: position,
            id,
            name,
            arguments: fragment.to_owned(),
        });
    }
}

/// One call being assembled.
#[derive(Debug, Default)]
pub(crate) struct PartialCall {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: String,
    pub(crate) provider_fields: Map<String, Value>,
    /// The provider said the call itself is incomplete.
    pub(crate) incomplete: bool,
}

/// The calls of one completion.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    pub(crate) calls: Vec<PartialCall>,
    limits: Limits,
}

impl Calls {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            calls: Vec::new(),
            limits,
        }
    }

    /// Opens a new call and returns its position.
    pub(crate) fn open(&mut self) -> Result<usize, DecodeError> {
        if self.calls.len() >= self.limits.max_tool_calls {
            return Err(DecodeError::LimitExceeded {
                what: "the number of tool calls",
                limit: self.limits.max_tool_calls,
            });
        }
        self.calls.push(PartialCall::default());
        Ok(self.calls.len() - 1)
    }

    /// Sets id and name where they are still unknown (never overwriting with empty), appends
    /// an argument fragment, and records the display delta in `out`.
    pub(crate) fn apply(
        &mut self,
        position: usize,
        id: Option<&str>,
        name: Option<&str>,
        fragment: &str,
        out: &mut Deltas,
    ) -> Result<(), DecodeError> {
        let max = self.limits.max_argument_bytes;
        let call = &mut self.calls[position];
        let new_id = match id {
            Some(id) if !id.is_empty() && call.id.is_empty() => {
                call.id.push_str(id);
                Some(id.to_owned())
            }
            _ => None,
        };
        let new_name = match name {
            Some(name) if !name.is_empty() && call.name.is_empty() => {
                call.name.push_str(name);
                Some(name.to_owned())
            }
            _ => None,
        };
        if call.arguments.len() + fragment.len() > max {
            return Err(DecodeError::LimitExceeded {
                what: "a tool call's arguments",
                limit: max,
            });
        }
        call.arguments.push_str(fragment);
        out.tool_call(position, new_id, new_name, fragment);
        Ok(())
    }

    /// The finished calls; `complete` is false for all of them when the turn was cut.
    pub(crate) fn finish(self, cut: bool) -> Result<Vec<LlmToolCall>, DecodeError> {
        self.calls
            .into_iter()
            .enumerate()
            .map(|(index, call)| {
                let id = if call.id.is_empty() {
                    // The server sent no id: a deterministic one, unique within the completion.
                    format!("call_{index}")
                } else {
                    call.id
                };
                let id = ToolCallId::new(id).map_err(|e| DecodeError::InvalidToolCall {
                    index,
                    reason: e.to_string(),
                })?;
                let arguments = if call.arguments.trim().is_empty() {
                    "{}".to_owned()
                } else {
                    call.arguments
                };
                Ok(LlmToolCall {
                    id,
                    name: call.name,
                    arguments,
                    complete: !cut && !call.incomplete,
                    provider_fields: call.provider_fields,
                })
            })
            .collect()
    }
}

/// Feeds `bytes` through the parser under the stream limit, handing each event to `on_event`
/// and collecting the display deltas of this read. Shared by both wires' decoders.
pub(crate) fn feed(
    sse: &mut SseParser,
    limits: &Limits,
    bytes: &[u8],
    mut on_event: impl FnMut(&SseEvent<'_>, &mut Deltas) -> Result<(), DecodeError>,
) -> Result<Vec<CompletionDelta>, DecodeError> {
    if sse.offset() + bytes.len() > limits.max_total_bytes {
        return Err(DecodeError::LimitExceeded {
            what: "the stream",
            limit: limits.max_total_bytes,
        });
    }
    let mut deltas = Deltas::default();
    sse.feed(bytes, &mut |event| on_event(&event, &mut deltas))?;
    Ok(deltas.deltas)
}

/// The state every decode session has, whatever the wire: the SSE parser, the limits, the
/// text and calls so far, and what the stream said about its end.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) sse: SseParser,
    pub(crate) limits: Limits,
    pub(crate) text: String,
    pub(crate) calls: Calls,
    pub(crate) finish_reason: Option<FinishReason>,
    pub(crate) usage: Option<Usage>,
}

impl Session {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            sse: SseParser::new(),
            limits,
            text: String::new(),
            calls: Calls::new(limits),
            finish_reason: None,
            usage: None,
        }
    }

    /// Resolves the completion; `ended` says whether the wire's own end marker arrived.
    pub(crate) fn finish(self, ended: bool) -> Result<LlmCompletion, DecodeError> {
        finish(Ending {
            bytes: self.sse.offset(),
            text: self.text,
            calls: self.calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
            ended,
        })
    }
}

/// What a decoder has when the stream ends.
struct Ending {
    bytes: usize,
    text: String,
    calls: Calls,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    /// The stream's own end marker arrived (`[DONE]` for chat).
    ended: bool,
}

/// Resolves the completion: a stream with neither an end marker nor a finish reason is
/// truncated; a cut or length-limited turn marks every call incomplete; a turn that assembled
/// calls is a tool turn whatever the finish reason said.
fn finish(ending: Ending) -> Result<LlmCompletion, DecodeError> {
    let truncated = !ending.ended && ending.finish_reason.is_none();
    let cut = truncated || ending.finish_reason == Some(FinishReason::Length);
    let tool_calls = ending.calls.finish(cut)?;
    let finish_reason = match ending.finish_reason {
        Some(FinishReason::Stop) | None if !tool_calls.is_empty() => FinishReason::ToolCalls,
        Some(reason) => reason,
        None => FinishReason::Stop,
    };
    let completion = LlmCompletion {
        text: ending.text,
        tool_calls,
        finish_reason,
        usage: ending.usage,
    };
    if truncated {
        return Err(DecodeError::Truncated {
            bytes: ending.bytes,
            partial: Box::new(completion),
        });
    }
    Ok(completion)
}

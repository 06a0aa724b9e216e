//! What can go wrong decoding or encoding.

use std::collections::HashSet;

use ai_core::{CompletionError, LlmCompletion, ToolChoice, ToolId, ToolSpec};
use serde_json::Value;

/// Everything that can go wrong while decoding a provider's stream or whole answer.
///
/// `Clone` because a decoder keeps the error that stopped it and returns it again from every
/// later `feed` and from `finish`.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The stream ended before `[DONE]` (or a terminal event) and without a finish reason.
    /// What was assembled is kept for display; every call in it is marked incomplete.
    #[error("stream truncated after {bytes} bytes: no finish reason and no end marker")]
    Truncated {
        /// Bytes received.
        bytes: usize,
        /// What was assembled before the cut.
        partial: Box<LlmCompletion>,
    },
    /// The provider reported an error in the stream.
    #[error("provider error: {message}")]
    ProviderError {
        /// The provider's message.
        message: String,
    },
    /// An event's data is not the JSON the format expects.
    #[error("invalid chunk at byte {offset}: {reason}")]
    InvalidChunk {
        /// Byte offset of the event in the stream.
        offset: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A whole (non-streamed) answer's body is not the JSON object the format expects: not
    /// JSON, or JSON of another shape (named, never quoted).
    #[error("invalid response body: {reason}")]
    InvalidBody {
        /// What is wrong with it.
        reason: String,
    },
    /// A configured limit was exceeded. The message names the limit with its unit and the
    /// [`Limits`] field that sets it, so the one to raise is plain.
    #[error(
        "{what} exceeds the limit of {limit}{} ({})",
        .setting.unit(*.limit),
        .setting.setting()
    )]
    LimitExceeded {
        /// What went past the limit (`a tool call's arguments`, `the stream`, …).
        what: &'static str,
        /// The limit's value.
        limit: usize,
        /// The setting that sets it.
        setting: Limit,
    },
    /// An assembled call cannot be represented (an id over 128 characters, an `extra_content`
    /// nested too deep to keep), cannot be told from another (two calls under one id), or came
    /// in a form that is not read (chat's legacy `function_call`).
    #[error("tool call {index}: {reason}")]
    InvalidToolCall {
        /// The call's position.
        index: usize,
        /// What is wrong.
        reason: String,
    },
}

impl DecodeError {
    /// The error a payload's `error` value reports, as openai-python reads it: any truthy value
    /// (`{"message": …}` or a bare string, as some servers send) is the provider's error. An
    /// object without a message (none, `null` or empty) is named by its `code`
    /// ([`Self::from_code`]), as the `error` event with its fields at the top is: but one whose
    /// code names nothing and that says something else is shown as its JSON, never as an empty
    /// message.
    pub(crate) fn from_wire(error: &Value) -> Option<Self> {
        if !truthy(error) {
            return None;
        }
        let message = match error {
            Value::String(message) => message.clone(),
            Value::Object(map) => {
                let code = map.get("code").filter(|code| truthy(code));
                match map.get("message").and_then(Value::as_str) {
                    Some(message) if !message.is_empty() => message.to_owned(),
                    _ if code.is_none() && map.values().any(truthy) => error.to_string(),
                    _ => return Some(Self::from_code(code)),
                }
            }
            other => other.to_string(),
        };
        Some(Self::ProviderError { message })
    }

    /// The provider's error that says nothing but its `code` (any JSON, or none), wherever the
    /// code stands (at the top of an `error` event, or in an `error` object): `unknown error
    /// (code: …)`, a string code as its text, any other as its JSON; `unknown error` alone when
    /// the code is falsy as Python reads it (absent, `null`, `""`, `0`, `false`, `[]`, `{}`),
    /// which names nothing.
    pub(crate) fn from_code(code: Option<&Value>) -> Self {
        let message = match code.filter(|code| truthy(code)) {
            Some(Value::String(code)) => format!("unknown error (code: {code})"),
            Some(code) => format!("unknown error (code: {code})"),
            None => "unknown error".into(),
        };
        Self::ProviderError { message }
    }

    /// The error a Responses response object's own `error` reports (a whole response's, or a
    /// terminal event's snapshot's): as [`Self::from_wire`] reads it, but an object whose every
    /// field is falsy (`{"code": "", "message": ""}`, `{"code": null, "message": null}`) is no
    /// error. openai-python raises nothing for the `error` of a finished response, and such an
    /// object names no failure; a truthy `message` or `code` (or any other field) still does.
    pub(crate) fn from_response(error: &Value) -> Option<Self> {
        match error {
            Value::Object(fields) if !fields.values().any(truthy) => None,
            other => Self::from_wire(other),
        }
    }
}

/// Whether `value` is true as Python reads it (openai-python's `if data.get("error")`): not
/// `null`, `false`, zero, or an empty string, array or object.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

/// The one mapping from a decode failure to what a model port reports ([`CompletionError`]), so
/// that every port over these decoders, cogni-adapters' and an app's own alike, reports the same
/// failure as the same kind:
///
/// - [`DecodeError::ProviderError`] is [`CompletionError::Provider`], with the provider's
///   message as it sent it: the provider answered, and said what went wrong.
/// - Every other error is [`CompletionError::Decode`]: the answer could not be read, or it broke
///   a limit or a call rule. Its text is the error's own, but for [`DecodeError::Truncated`],
///   whose partial completion is dropped: `the stream ended after N bytes without a finish
///   reason or end marker`.
///
/// The text names no endpoint, which only the port knows: a port that wants it there adds it,
/// as cogni-adapters' `OpenAiCompletion` puts `POST <endpoint>:` before it. A provider's message
/// is its own text, which may quote part of the key it was sent or hold control characters; a
/// port that holds a key scrubs the message before showing it (cogni-adapters does).
///
/// ```
/// use wire_openai::ai_core::CompletionError;
/// use wire_openai::chat::StreamDecoder;
///
/// // A port decoding a stream that broke off after its first chunk.
/// let mut decoder = StreamDecoder::default();
/// decoder.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n")?;
/// let error: CompletionError = decoder.finish().unwrap_err().into();
/// assert!(matches!(error, CompletionError::Decode(_)));
///
/// // A provider that reports an error in the stream.
/// let mut decoder = StreamDecoder::default();
/// let failed = decoder.feed(b"data: {\"error\":{\"message\":\"overloaded\"}}\n\n");
/// let error = CompletionError::from(failed.unwrap_err());
/// assert_eq!(error, CompletionError::Provider("overloaded".into()));
/// # Ok::<(), wire_openai::DecodeError>(())
/// ```
impl From<DecodeError> for CompletionError {
    fn from(error: DecodeError) -> Self {
        match error {
            DecodeError::ProviderError { message } => Self::Provider(message),
            DecodeError::Truncated { bytes, .. } => Self::Decode(format!(
                "the stream ended after {bytes} bytes without a finish reason or end marker"
            )),
            error @ (DecodeError::InvalidChunk { .. }
            | DecodeError::InvalidBody { .. }
            | DecodeError::LimitExceeded { .. }
            | DecodeError::InvalidToolCall { .. }) => Self::Decode(error.to_string()),
        }
    }
}

/// Why a request could not be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The history breaks the tool-call pairing rules; it is never patched.
    #[error("invalid history: {0}")]
    History(#[from] ai_core::HistoryError),
    /// `tool_choice` is `required`, but the request offers no tools: with the tools left out,
    /// the choice would be dropped too, and the turn could not make the call the caller asked
    /// for.
    #[error("tool_choice `required` asks for a tool call, but the request has no tools")]
    ToolChoiceWithoutTools,
    /// `tool_choice` names a tool that is not among the request's tools (or the request has
    /// none): OpenAI refuses such a request, and without tools the choice would be dropped.
    #[error("tool_choice names the tool `{tool}`, which is not among the request's tools")]
    ToolChoiceUnknownTool {
        /// The tool the choice names (the caller's own id, never model text).
        tool: ToolId,
    },
    /// The request offers two tools under one id: a call naming it could not say which tool it
    /// means, and servers behind OpenAI-compatible gateways refuse such a request ("tools: Tool
    /// names must be unique") only after a round trip.
    #[error("the request offers the tool `{tool}` more than once")]
    DuplicateTool {
        /// The id offered twice (the caller's own, never model text).
        tool: ToolId,
    },
    /// A past call of the history has no name (a server that never sent `function.name`):
    /// providers refuse a request that sends one back as `"name": ""`, so it is refused here,
    /// never patched. The loop never records such a call so (graph records it under `_`).
    #[error("message {index}: tool call {call} has no name")]
    EmptyToolName {
        /// Position of the assistant message in the history.
        index: usize,
        /// Position of the call in that message.
        call: usize,
    },
    /// A past call of the history has a name providers refuse to read back: not 1 to 64 of
    /// `[a-zA-Z0-9_-]` (whitespace, a dot as in GPT-4o's `multi_tool_use.parallel`, a letter
    /// outside ASCII, more than 64 characters). OpenAI refuses the whole request for it, so it is
    /// refused here, never patched, naming the message and the call but not the name, which is
    /// model text. The loop never sends such a name: graph records each call under a name
    /// providers accept.
    #[error(
        "message {index}: tool call {call} has a name providers refuse (not 1 to 64 letters, \
         digits, `_` or `-`)"
    )]
    InvalidToolName {
        /// Position of the assistant message in the history.
        index: usize,
        /// Position of the call in that message.
        call: usize,
    },
    /// The request has no messages: the model would have nothing to answer, and OpenAI refuses
    /// such a request (chat's empty `messages`, Responses' empty `input`) only after a round
    /// trip.
    #[error("the request has no messages")]
    NoMessages,
    /// The model name is empty (or only whitespace): OpenAI refuses a request that names no
    /// model only after a round trip.
    #[error("the request's model name is empty")]
    EmptyModel,
}

/// The one mapping from an encode failure to what a model port reports: every
/// [`EncodeError`] is [`CompletionError::Request`], with the error's own text. The request was
/// never sent, so no answer is blamed ([`CompletionError::Decode`]) and no retry can help. As
/// for a [`DecodeError`], the text names no endpoint: cogni-adapters' `OpenAiCompletion` puts
/// `POST <endpoint>:` before it.
///
/// ```
/// use wire_openai::Delivery;
/// use wire_openai::ai_core::{CompletionError, LlmCaller, LlmRequest, Message, RunId, ToolChoice};
///
/// let request = LlmRequest {
///     caller: LlmCaller { run_id: RunId::new("run_1").unwrap(), graph: None },
///     messages: vec![Message::User { content: "Hi".into() }],
///     tools: vec![],
///     tool_choice: ToolChoice::Required,
///     parallel_tool_calls: None,
/// };
/// let refused =
///     wire_openai::chat::encode_request(&request, "gpt-4o", Delivery::Stream).unwrap_err();
/// assert_eq!(
///     CompletionError::from(refused),
///     CompletionError::Request(
///         "tool_choice `required` asks for a tool call, but the request has no tools".into()
///     )
/// );
/// ```
impl From<EncodeError> for CompletionError {
    fn from(error: EncodeError) -> Self {
        Self::Request(error.to_string())
    }
}

/// Refuses a request that is missing what every request needs: a model name
/// ([`EncodeError::EmptyModel`]) and at least one message ([`EncodeError::NoMessages`]).
pub(crate) fn check_request(model: &str, messages: &[ai_core::Message]) -> Result<(), EncodeError> {
    if model.trim().is_empty() {
        return Err(EncodeError::EmptyModel);
    }
    if messages.is_empty() {
        return Err(EncodeError::NoMessages);
    }
    Ok(())
}

/// Refuses tools offered twice under one id ([`EncodeError::DuplicateTool`]), and a
/// `tool_choice` that `tools` cannot satisfy (see [`EncodeError`]): `required` with no tools, or
/// a named tool that is not among them. `auto` and `none` always encode; without tools they are
/// left out of the request, as the provider's default is then `none`.
pub(crate) fn check_tools(choice: &ToolChoice, tools: &[ToolSpec]) -> Result<(), EncodeError> {
    let mut ids = HashSet::new();
    if let Some(spec) = tools.iter().find(|spec| !ids.insert(&spec.id)) {
        return Err(EncodeError::DuplicateTool {
            tool: spec.id.clone(),
        });
    }
    match choice {
        ToolChoice::Auto | ToolChoice::None => Ok(()),
        ToolChoice::Required if tools.is_empty() => Err(EncodeError::ToolChoiceWithoutTools),
        ToolChoice::Required => Ok(()),
        ToolChoice::Tool(tool) if tools.iter().any(|spec| spec.id == *tool) => Ok(()),
        ToolChoice::Tool(tool) => Err(EncodeError::ToolChoiceUnknownTool { tool: tool.clone() }),
    }
}

/// Which of the [`Limits`] a [`DecodeError::LimitExceeded`] broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// [`Limits::max_argument_bytes`]: bytes of one call's arguments.
    ArgumentBytes,
    /// [`Limits::max_tool_calls`]: tool calls in one completion.
    ToolCalls,
    /// 8 times [`Limits::max_tool_calls`]: a chat call's `index` (no server numbers its calls
    /// that far past the call limit).
    ToolCallIndex,
    /// [`Limits::max_total_bytes`]: bytes of the whole stream, or of a whole answer's body.
    TotalBytes,
    /// [`Limits::max_event_bytes`]: bytes of one event of a stream.
    EventBytes,
}

impl Limit {
    /// The unit of a limit of `limit`, as the error's message puts it after the number: none for
    /// an index.
    fn unit(self, limit: usize) -> &'static str {
        match (self, limit) {
            (Self::ArgumentBytes | Self::TotalBytes | Self::EventBytes, 1) => " byte",
            (Self::ArgumentBytes | Self::TotalBytes | Self::EventBytes, _) => " bytes",
            (Self::ToolCalls, 1) => " call",
            (Self::ToolCalls, _) => " calls",
            (Self::ToolCallIndex, _) => "",
        }
    }

    /// The [`Limits`] field that sets it, as the error's message names it.
    fn setting(self) -> &'static str {
        match self {
            Self::ArgumentBytes => "`Limits::max_argument_bytes`",
            Self::ToolCalls => "`Limits::max_tool_calls`",
            Self::ToolCallIndex => "8 times `Limits::max_tool_calls`",
            Self::TotalBytes => "`Limits::max_total_bytes`",
            Self::EventBytes => "`Limits::max_event_bytes`",
        }
    }
}

/// Limits on what one decode session accepts.
///
/// Every decoder takes them: a stream decoder ([`crate::chat::StreamDecoder::new`],
/// [`crate::responses::StreamDecoder::new`]; its `Default` takes the defaults), a whole stream
/// held in memory ([`crate::chat::decode_all`], [`crate::responses::decode_all`]) and a whole
/// answer ([`crate::chat::decode_completion`], [`crate::responses::decode_response`]).
/// [`Limits::default`] suits most callers.
///
/// More limits may come, so outside this crate a value starts from [`Limits::default`] and
/// changes what it needs with the `with_*` methods:
///
/// ```
/// let limits = wire_openai::Limits::default().with_max_total_bytes(256 * 1024 * 1024);
/// assert_eq!(limits.max_total_bytes, 256 * 1024 * 1024);
/// assert_eq!(limits.max_tool_calls, 128);
/// let decoder = wire_openai::chat::StreamDecoder::new(limits);
/// # drop(decoder);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Bytes of one call's arguments (default 1 MiB).
    pub max_argument_bytes: usize,
    /// Tool calls in one completion (default 128).
    pub max_tool_calls: usize,
    /// Bytes of the whole stream, or of a whole (non-streamed) answer's body (default 64 MiB).
    pub max_total_bytes: usize,
    /// Bytes of one event of a stream, its lines as sent (default 8 MiB;
    /// [`crate::sse::SseParser::with_max_event_bytes`] says what counts): a line or an event
    /// that never ends is refused once it passes this, not buffered up to `max_total_bytes`.
    /// 8 MiB holds several calls' arguments at their default limit (1 MiB each), as a Responses
    /// terminal event's snapshot repeats a turn's whole output; raise it when raising
    /// `max_argument_bytes`. A whole answer sent in place of a stream is held to
    /// `max_total_bytes` only.
    pub max_event_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_argument_bytes: 1024 * 1024,
            max_tool_calls: 128,
            max_total_bytes: 64 * 1024 * 1024,
            max_event_bytes: 8 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// Sets `max_argument_bytes`: bytes of one call's arguments.
    pub fn with_max_argument_bytes(mut self, bytes: usize) -> Self {
        self.max_argument_bytes = bytes;
        self
    }

    /// Sets `max_tool_calls`: tool calls in one completion.
    pub fn with_max_tool_calls(mut self, calls: usize) -> Self {
        self.max_tool_calls = calls;
        self
    }

    /// Sets `max_total_bytes`: bytes of the whole stream, or of a whole answer's body.
    pub fn with_max_total_bytes(mut self, bytes: usize) -> Self {
        self.max_total_bytes = bytes;
        self
    }

    /// Sets `max_event_bytes`: bytes of one event of a stream.
    pub fn with_max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = bytes;
        self
    }
}

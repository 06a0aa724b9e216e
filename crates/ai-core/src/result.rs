//! What a tool call ends as: a value or a coded, model-safe failure. Never a panic, never an `Err`.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ToolCallId;

/// Why a tool call failed. Each code has a fixed meaning the model and the UI can act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolErrorCode {
    /// No tool with that id exists in the source (a name that is no valid id is `Validation`).
    Unavailable,
    /// The policy or this run's catalog does not allow the tool, or a connection is outside the
    /// grant.
    PolicyDenied,
    /// The authorization hook refused the actor.
    AuthzDenied,
    /// The arguments do not satisfy the tool's input schema, or exceed the size limit; or the
    /// call names no tool, or a tool name that is no valid tool id.
    Validation,
    /// The arguments are not valid JSON.
    InvalidJson,
    /// The tool ran and failed. A tool that is not read-only and panicked may have made its
    /// change all the same, and its message says so.
    Execution,
    /// The tool ran past its runtime budget. A tool that is not read-only may have made its
    /// change all the same, and its message says so.
    Timeout,
    /// The run was cancelled while the tool ran (or before it could). A tool that is not
    /// read-only and had started may have made its change, and its message says so.
    Cancelled,
    /// The tool returned output that breaks its own output schema.
    OutputValidation,
    /// The output could not be redacted; nothing is shown.
    RedactionFailed,
    /// The redacted output is larger than the result budget.
    ResultTooLarge,
    /// The tool failed repeatedly and its circuit is open: calls fail fast for a while.
    CircuitOpen,
    /// The run ended before the call's result was stored (its process stopped, found after a
    /// restart; its log or its closing save failed; its task died). The message says whether
    /// the call may have run (its effect unknown) or never ran (the runner refused it, or it
    /// waited for an approval that will never come).
    Interrupted,
}

impl ToolErrorCode {
    /// The snake_case wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unavailable => "unavailable",
            Self::PolicyDenied => "policy_denied",
            Self::AuthzDenied => "authz_denied",
            Self::Validation => "validation",
            Self::InvalidJson => "invalid_json",
            Self::Execution => "execution",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::OutputValidation => "output_validation",
            Self::RedactionFailed => "redaction_failed",
            Self::ResultTooLarge => "result_too_large",
            Self::CircuitOpen => "circuit_open",
            Self::Interrupted => "interrupted",
        }
    }

    /// The category a failure with this code falls in, unless the tool said otherwise.
    pub fn category(self) -> ToolErrorCategory {
        match self {
            Self::Validation | Self::InvalidJson | Self::OutputValidation => {
                ToolErrorCategory::Validation
            }
            Self::Execution => ToolErrorCategory::Execution,
            Self::Timeout => ToolErrorCategory::Timeout,
            Self::Cancelled | Self::Interrupted => ToolErrorCategory::Cancelled,
            Self::PolicyDenied | Self::AuthzDenied => ToolErrorCategory::Policy,
            Self::Unavailable | Self::RedactionFailed | Self::ResultTooLarge => {
                ToolErrorCategory::Permanent
            }
            Self::CircuitOpen => ToolErrorCategory::Transient,
        }
    }
}

/// What kind of failure, for retry decisions and for the model: every failure has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolErrorCategory {
    /// The input (or output) broke a schema or a limit.
    Validation,
    /// The tool ran and failed, with no hint that trying again would help.
    Execution,
    /// An attempt ran past its time.
    Timeout,
    /// The run was cancelled.
    Cancelled,
    /// A passing failure (a rate limit, a dropped connection): trying again may work.
    Transient,
    /// A failure that will happen again (a missing resource, a refused request).
    Permanent,
    /// Policy or authorization refused the call.
    Policy,
    /// Anything else.
    Unknown,
}

impl ToolErrorCategory {
    /// Whether trying again can help: transient failures and timeouts.
    pub fn retryable(self) -> bool {
        matches!(self, Self::Transient | Self::Timeout)
    }
}

impl fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed call: a code, a category and a message that is safe to show the model (no raw
/// arguments, no secrets).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    /// What failed.
    pub code: ToolErrorCode,
    /// What kind of failure (the code's category unless the tool said otherwise).
    pub category: ToolErrorCategory,
    /// Whether trying again may help.
    pub retryable: bool,
    /// How long to wait before trying again, when the tool said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// A short sentence for the model and the UI.
    pub safe_message: String,
}

/// The longest [`ToolFailure::safe_message`] the constructors keep, in bytes. A tool's own
/// message (a remote error body it passes on, say) reaches the model, the events and the record;
/// past this it is cut at a character boundary and ends with `…`, so a failure cannot flood the
/// model's context where a result is held to [`crate::Budgets::max_result_bytes`].
pub const MAX_SAFE_MESSAGE_BYTES: usize = 2048;

/// `message` cut to [`MAX_SAFE_MESSAGE_BYTES`], `…` included, at a character boundary.
fn bounded(mut message: String) -> String {
    if message.len() > MAX_SAFE_MESSAGE_BYTES {
        let mut end = MAX_SAFE_MESSAGE_BYTES - '…'.len_utf8();
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

impl ToolFailure {
    /// A failure with `code`, its category, and `safe_message` (cut to
    /// [`MAX_SAFE_MESSAGE_BYTES`]).
    pub fn new(code: ToolErrorCode, safe_message: impl Into<String>) -> Self {
        Self::categorized(code, code.category(), safe_message)
    }

    /// A failure with an explicit category.
    pub fn categorized(
        code: ToolErrorCode,
        category: ToolErrorCategory,
        safe_message: impl Into<String>,
    ) -> Self {
        Self {
            code,
            category,
            retryable: category.retryable(),
            retry_after_ms: None,
            safe_message: bounded(safe_message.into()),
        }
    }

    /// Sets the wait before a retry.
    pub fn with_retry_after_ms(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }

    /// This failure with its message cut as the constructors cut it: one built without them
    /// (its fields are public; a tool's `refused_before_attempt` may give one) is held to
    /// [`MAX_SAFE_MESSAGE_BYTES`] too where the runner answers the call.
    pub(crate) fn with_bounded_message(mut self) -> Self {
        self.safe_message = bounded(self.safe_message);
        self
    }
}

/// How a call ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolOutcome {
    /// The redacted output.
    Ok {
        /// The output after validation and redaction, shared (not copied) between the result,
        /// its event and its record.
        value: Arc<Value>,
    },
    /// A coded failure.
    Error(ToolFailure),
    /// The call needs a human's approval first; it did not run. An approval must name the
    /// call's id and this hash of its tool (and connection) and canonical arguments.
    ApprovalRequired {
        /// Lower-case hex SHA-256 of the tool's id, a line break, for a tool that needs a
        /// connection the connection's id and a line break, and the canonical JSON of the
        /// validated arguments.
        args_hash: String,
    },
}

/// The answer to one tool call, fed back to the model as its tool message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolExecResult {
    /// The call this answers; always the id the call came with.
    pub tool_call_id: ToolCallId,
    /// Value or failure.
    #[serde(flatten)]
    pub outcome: ToolOutcome,
}

impl ToolExecResult {
    /// A successful result.
    pub fn ok(tool_call_id: ToolCallId, value: impl Into<Arc<Value>>) -> Self {
        Self {
            tool_call_id,
            outcome: ToolOutcome::Ok {
                value: value.into(),
            },
        }
    }

    /// A failed result.
    pub fn error(tool_call_id: ToolCallId, failure: ToolFailure) -> Self {
        Self {
            tool_call_id,
            outcome: ToolOutcome::Error(failure),
        }
    }

    /// The failure, if the call failed.
    pub fn failure(&self) -> Option<&ToolFailure> {
        match &self.outcome {
            ToolOutcome::Ok { .. } | ToolOutcome::ApprovalRequired { .. } => None,
            ToolOutcome::Error(failure) => Some(failure),
        }
    }

    /// The tool message content sent back to the model; see [`ToolOutcome::model_content`].
    pub fn model_content(&self) -> String {
        self.outcome.model_content()
    }
}

impl ToolOutcome {
    /// The tool message content sent back to the model (and shown to UIs): the value as JSON,
    /// or `{"error":{"code":…,"message":…}}` with the safe message only.
    pub fn model_content(&self) -> String {
        match self {
            Self::Ok { value } => value.to_string(),
            Self::Error(failure) => serde_json::json!({
                "error": {"code": failure.code, "message": failure.safe_message}
            })
            .to_string(),
            Self::ApprovalRequired { .. } => serde_json::json!({
                "error": {"code": "approval_required", "message": "the call waits for a human's approval"}
            })
            .to_string(),
        }
    }
}

/// One attempt at running a tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1 for the first attempt.
    pub number: u32,
    /// When it started, from the [`crate::Clock`].
    pub started_at_ms: u64,
    /// When it ended.
    pub ended_at_ms: u64,
    /// How it failed, if it did.
    pub error: Option<ToolFailure>,
}

/// Where a call stands in its lifecycle:
/// `pending → validating → executing → (retrying → executing)* → succeeded | failed | cancelled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolCallStatus {
    /// Taken by the runner.
    Pending,
    /// Checked against policy, authorization and its schema.
    Validating,
    /// An attempt runs.
    Executing,
    /// Waiting before the next attempt.
    Retrying,
    /// Ended with a value.
    Succeeded,
    /// Ended with a failure.
    Failed,
    /// Ended by cancellation.
    Cancelled,
}

/// The audit record of one invocation. It holds validated arguments and the redacted result only.
///
/// Serialized, a field that is `None` is left out and a field that is present is `Some`, `null`
/// included, so a call that succeeded with a `null` value reads back as it was written:
///
/// ```
/// use std::sync::Arc;
/// use ai_core::{ToolCallId, ToolInvocationRecord};
/// let record = ToolInvocationRecord {
///     tool_call_id: ToolCallId::new("c1").unwrap(), tool_id: "core__noop".into(),
///     args: Some(Arc::new(serde_json::json!({}))),
///     result: Some(Arc::new(serde_json::Value::Null)),
///     error: None, started_at_ms: 1, ended_at_ms: 2, attempts: vec![], raw: None,
/// };
/// let json = serde_json::to_string(&record).unwrap();
/// assert!(json.contains(r#""result":null"#) && !json.contains("error"));
/// assert_eq!(serde_json::from_str::<ToolInvocationRecord>(&json).unwrap(), record);
/// ```
///
/// Records written before this rule wrote every field, `None` as `null`; they read as they were
/// meant. Such a record is recognized by holding both `result` and `error` with one of them
/// `null` (a record in the current form holds `error` only for a failure, and `result` and
/// `error` together only when both are set). In it a `null` `args` is `None` (a runner's
/// validated arguments are always an object), a `null` `result` next to a failure is `None`, so is
/// one of a call with no attempt (a call paused for approval never ran), and a `null` `result` of
/// a call that ran without a failure is `Some(null)`: that call succeeded with the value `null`.
/// The one record of the current form that reads differently is one with both a failure and a
/// `null` result, which the runner never writes: it reads with no result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "RecordFields")]
pub struct ToolInvocationRecord {
    /// The call.
    pub tool_call_id: ToolCallId,
    /// The tool name the model asked for (cut to 128 bytes; it may not be a valid id).
    pub tool_id: Arc<str>,
    /// The validated arguments, when they parsed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Arc<Value>>,
    /// The redacted result, when the call succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Arc<Value>>,
    /// The failure, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolFailure>,
    /// When the runner took the call, from the [`crate::Clock`].
    pub started_at_ms: u64,
    /// When the runner answered it.
    pub ended_at_ms: u64,
    /// Every attempt at running the tool, in order (none when the call was refused before).
    #[serde(default)]
    pub attempts: Vec<Attempt>,
    /// Provider-native payload for observability only. Never serialized, never shown, never used
    /// to decide anything.
    #[serde(skip)]
    pub raw: Option<Value>,
}

/// A stored record's fields as found: for `args`, `result` and `error`, whether the field was
/// there at all (outer `Option`) and whether it was `null` (inner `None`).
#[derive(Deserialize)]
struct RecordFields {
    tool_call_id: ToolCallId,
    tool_id: Arc<str>,
    #[serde(default, deserialize_with = "present")]
    args: Option<Option<Arc<Value>>>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Option<Arc<Value>>>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Option<ToolFailure>>,
    started_at_ms: u64,
    ended_at_ms: u64,
    #[serde(default)]
    attempts: Vec<Attempt>,
}

/// A field that is present (`Some`), `null` (`Some(None)`) or not; with `#[serde(default)]`, a
/// missing field is `None`.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// A JSON value field that is present, `null` included, as `Some`; with `#[serde(default)]`, a
/// missing field is `None`. The counterpart of `skip_serializing_if = "Option::is_none"`.
pub(crate) fn some_if_present<'de, D>(deserializer: D) -> Result<Option<Arc<Value>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Arc::<Value>::deserialize(deserializer).map(Some)
}

impl From<RecordFields> for ToolInvocationRecord {
    fn from(fields: RecordFields) -> Self {
        // The old form wrote every field, `None` as `null`: see the type's docs.
        let old_form = matches!(
            (&fields.result, &fields.error),
            (Some(None), Some(_)) | (Some(_), Some(None))
        );
        let error = fields.error.flatten();
        let null = || Some(Arc::new(Value::Null));
        let args = match fields.args {
            Some(None) if old_form => None,
            Some(None) => null(),
            other => other.flatten(),
        };
        let result = match fields.result {
            // No value next to a failure, or for a call that never ran (paused for approval).
            Some(None) if old_form && (error.is_some() || fields.attempts.is_empty()) => None,
            Some(None) => null(),
            other => other.flatten(),
        };
        Self {
            tool_call_id: fields.tool_call_id,
            tool_id: fields.tool_id,
            args,
            result,
            error,
            started_at_ms: fields.started_at_ms,
            ended_at_ms: fields.ended_at_ms,
            attempts: fields.attempts,
            raw: None,
        }
    }
}

impl ToolInvocationRecord {
    /// The call's status transitions, derived from its attempts and outcome.
    pub fn transitions(&self) -> Vec<ToolCallStatus> {
        let mut out = vec![ToolCallStatus::Pending, ToolCallStatus::Validating];
        for (i, _) in self.attempts.iter().enumerate() {
            if i > 0 {
                out.push(ToolCallStatus::Retrying);
            }
            out.push(ToolCallStatus::Executing);
        }
        out.push(match &self.error {
            None if self.result.is_some() => ToolCallStatus::Succeeded,
            Some(failure) if failure.code == ToolErrorCode::Cancelled => ToolCallStatus::Cancelled,
            _ => ToolCallStatus::Failed,
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(args: Option<Value>, result: Option<Value>, failed: bool) -> ToolInvocationRecord {
        ToolInvocationRecord {
            tool_call_id: ToolCallId::new("c1").unwrap(),
            tool_id: "core__noop".into(),
            args: args.map(Arc::new),
            result: result.map(Arc::new),
            error: failed.then(|| ToolFailure::new(ToolErrorCode::Execution, "it failed")),
            started_at_ms: 1,
            ended_at_ms: 2,
            attempts: vec![],
            raw: None,
        }
    }

    fn round_trip(record: &ToolInvocationRecord) -> ToolInvocationRecord {
        serde_json::from_str(&serde_json::to_string(record).unwrap()).unwrap()
    }

    #[test]
    fn a_null_result_or_args_round_trips_and_an_absent_one_stays_absent() {
        let ok_null = record(Some(Value::Null), Some(Value::Null), false);
        assert_eq!(round_trip(&ok_null), ok_null);
        assert_eq!(
            round_trip(&ok_null).transitions().last(),
            Some(&ToolCallStatus::Succeeded)
        );
        let refused = record(None, None, true);
        assert_eq!(round_trip(&refused), refused);
        let neither = record(None, None, false);
        assert_eq!(round_trip(&neither), neither);
        let failed_after_validation = record(Some(Value::Null), None, true);
        assert_eq!(
            round_trip(&failed_after_validation),
            failed_after_validation
        );
        let plain = record(Some(json!({"a": 1})), Some(json!([1])), false);
        assert_eq!(round_trip(&plain), plain);
    }

    #[test]
    fn records_in_the_old_form_read_as_they_were_meant() {
        let base = r#""tool_call_id":"c1","tool_id":"core__noop","started_at_ms":1,"ended_at_ms":2,"attempts":[]"#;
        let failure = r#"{"code":"execution","category":"execution","retryable":false,"safe_message":"it failed"}"#;
        let read = |fields: &str| -> ToolInvocationRecord {
            serde_json::from_str(&format!("{{{base},{fields}}}")).unwrap()
        };
        // A failure, with `null` args and result: neither was there.
        assert_eq!(
            read(&format!(r#""args":null,"result":null,"error":{failure}"#)),
            record(None, None, true)
        );
        // Validated args and a failure.
        assert_eq!(
            read(&format!(
                r#""args":{{"a":1}},"result":null,"error":{failure}"#
            )),
            record(Some(json!({"a": 1})), None, true)
        );
        // A success whose value was `null` (it made an attempt): the old form could not tell it
        // from no result.
        let attempt = Attempt {
            number: 1,
            started_at_ms: 1,
            ended_at_ms: 2,
            error: None,
        };
        let ran = serde_json::to_string(&attempt).unwrap();
        let read_ran = |fields: &str| -> ToolInvocationRecord {
            let base = base.replace(r#""attempts":[]"#, &format!(r#""attempts":[{ran}]"#));
            serde_json::from_str(&format!("{{{base},{fields}}}")).unwrap()
        };
        assert_eq!(
            read_ran(r#""args":{"a":1},"result":null,"error":null"#),
            ToolInvocationRecord {
                attempts: vec![attempt],
                ..record(Some(json!({"a": 1})), Some(Value::Null), false)
            }
        );
        // A call paused for approval: it never ran, so it has no result.
        assert_eq!(
            read(r#""args":{"a":1},"result":null,"error":null"#),
            record(Some(json!({"a": 1})), None, false)
        );
        assert_eq!(
            read(r#""args":null,"result":{"v":1},"error":null"#),
            record(None, Some(json!({"v": 1})), false)
        );
    }
}

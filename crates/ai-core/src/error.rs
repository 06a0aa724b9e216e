//! The crate's one error type for things that are refused at construction or load time.

/// Everything that ai-core refuses to build or load.
///
/// Failed tool calls are not errors: they are [`crate::ToolExecResult`] values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tool id breaks `^[a-zA-Z0-9_-]{1,64}$` or the `core__`/`mcp__<server>__` namespacing.
    #[error("invalid tool id {id:?}: {reason}")]
    InvalidToolId {
        /// The rejected id, cut to 80 characters.
        id: String,
        /// Which rule it broke.
        reason: &'static str,
    },
    /// A tool call id is empty or longer than 128 characters.
    #[error("invalid tool call id: {reason}")]
    InvalidToolCallId {
        /// Which rule it broke.
        reason: &'static str,
    },
    /// An identifier in a run context (run, actor, tenant, connection) is empty or too long.
    #[error("invalid {field}: {reason}")]
    InvalidContext {
        /// The field that was rejected.
        field: &'static str,
        /// Which rule it broke.
        reason: &'static str,
    },
    /// Two tools in one source or catalog share an id; nothing is overwritten.
    #[error("tool id collision: {0} is defined twice")]
    ToolIdCollision(crate::ToolId),
    /// A visible tool's input schema leaves the subset [`crate::validate_tool_schema_p0`]
    /// accepts (a hand-built [`crate::ToolSpec`], say, that no derivation checked).
    #[error(
        "tool {id}: the input schema leaves the supported subset{}",
        describe(violations)
    )]
    InvalidToolSchema {
        /// The tool whose schema was refused.
        id: crate::ToolId,
        /// Every place the schema leaves the subset (the catalog never builds this empty).
        violations: Vec<crate::SchemaViolation>,
    },
    /// A tool policy could not be parsed.
    #[error("invalid tool policy: {0}")]
    Policy(String),
}

/// The first of `violations` and how many more, for [`Error::InvalidToolSchema`]'s message.
fn describe(violations: &[crate::SchemaViolation]) -> String {
    match violations {
        [] => String::new(),
        [only] => format!(": {only}"),
        [first, rest @ ..] => format!(": {first} (and {} more)", rest.len()),
    }
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

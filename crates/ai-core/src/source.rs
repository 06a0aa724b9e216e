//! The tool-source port and the executable tool it hands out.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::{
    AuthCapability, Error, ExecPermit, ToolErrorCategory, ToolId, ToolInvocationContext, ToolSpec,
};

/// A failure a tool reports; its message must be safe to show the model (no secrets, no raw input).
///
/// It says what kind of failure it is, so the runner knows whether trying again may help and
/// whether the failure says anything about the tool's health (its circuit breaker):
/// [`ToolError::new`] is a plain execution failure (retried only under a policy that lists
/// `execution` in [`crate::RetryPolicy::retryable`], which the default does not),
/// [`ToolError::transient`] may be retried (by tools that are safe to retry),
/// [`ToolError::permanent`] never is; all three count against the tool. [`ToolError::invalid_input`] is the caller's mistake: it is answered as
/// `validation`, never retried, and does not count against the tool.
#[derive(Clone, PartialEq, Eq)]
pub struct ToolError {
    safe_message: String,
    category: ToolErrorCategory,
    retry_after: Option<Duration>,
}

impl ToolError {
    /// A failure with a message the tool author vouches is safe to show.
    pub fn new(safe_message: impl Into<String>) -> Self {
        Self {
            safe_message: safe_message.into(),
            category: ToolErrorCategory::Execution,
            retry_after: None,
        }
    }

    /// A passing failure (rate limit, dropped connection): a retry may work.
    pub fn transient(safe_message: impl Into<String>) -> Self {
        Self {
            category: ToolErrorCategory::Transient,
            ..Self::new(safe_message)
        }
    }

    /// A failure that will happen again: never retried.
    pub fn permanent(safe_message: impl Into<String>) -> Self {
        Self {
            category: ToolErrorCategory::Permanent,
            ..Self::new(safe_message)
        }
    }

    /// The arguments name something the tool cannot act on (a missing file, a refused path, a
    /// value serde rejects): the model's mistake, not the tool's. Answered with code
    /// `validation`; not retried, and not counted by the tool's circuit breaker.
    pub fn invalid_input(safe_message: impl Into<String>) -> Self {
        Self {
            category: ToolErrorCategory::Validation,
            ..Self::new(safe_message)
        }
    }

    /// How long to wait before a retry (e.g. from a `Retry-After` header).
    pub fn with_retry_after(mut self, wait: Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }

    /// The message for the model.
    pub fn safe_message(&self) -> &str {
        &self.safe_message
    }

    /// What kind of failure.
    pub fn category(&self) -> ToolErrorCategory {
        self.category
    }

    /// The wait the tool asked for before a retry.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ToolError")
            .field(&self.safe_message)
            .finish()
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.safe_message)
    }
}

impl std::error::Error for ToolError {}

/// Capabilities bound to one invocation by the runner (step 6).
///
/// Long-lived capabilities (a clock, a workspace) are bound into the tool when it is built in the
/// composition root; only what must be scoped to one call, like credentials for the one
/// connection this call may use, arrives here. The tool gets a borrow, so it cannot keep it past
/// the call (invariant AUTH_CAPABILITY_INVOCATION_SCOPED).
#[derive(Default)]
pub struct Capabilities {
    auth: Option<Box<dyn AuthCapability>>,
}

impl Capabilities {
    pub(crate) fn with_auth(auth: Box<dyn AuthCapability>) -> Self {
        Self { auth: Some(auth) }
    }

    /// Credentials for the connection this invocation was granted, if the tool requires one.
    pub fn auth(&self) -> Option<&dyn AuthCapability> {
        self.auth.as_deref()
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capabilities")
            .field("auth", &self.auth.as_ref().map(|_| "[bound]"))
            .finish()
    }
}

/// A tool bound to its capabilities: it owns validation, execution and redaction, and the runner
/// orchestrates them. Contract crates implement it; only [`crate::ToolRunner`] can call
/// [`BoundTool::exec`], because only the runner can make an [`ExecPermit`].
///
/// The trait is `#[async_trait]` (the `async-trait` crate): an implementation needs the same
/// attribute. Most tools should not implement it by hand: `ai_tools::bind` derives validation from
/// Rust types and applies the spec's allowlist. A hand-written one must honour
/// [`ToolSpec::redaction`] in [`BoundTool::redact`] itself, as below: nothing else strips what
/// the allowlist leaves out.
///
/// ```
/// use ai_core::{BoundTool, Capabilities, ExecPermit, Redaction, ToolEffect, ToolError, ToolId,
///     ToolInvocationContext, ToolSpec};
/// use serde_json::{Value, json};
/// use std::sync::Arc;
///
/// struct Echo(ToolSpec);
///
/// #[ai_core::async_trait]
/// impl BoundTool for Echo {
///     fn spec(&self) -> &ToolSpec { &self.0 }
///     fn validate_input(&self, args: Value) -> Result<Value, ToolError> {
///         if args.get("text").is_some_and(Value::is_string) { Ok(args) }
///         else { Err(ToolError::new("/text: a string is required")) }
///     }
///     async fn exec(&self, _: ExecPermit, args: Arc<Value>, _: &ToolInvocationContext,
///         _: &Capabilities) -> Result<Value, ToolError> {
///         Ok(json!({"text": args["text"]}))
///     }
///     fn validate_output(&self, _: &Value) -> Result<(), ToolError> { Ok(()) }
///     fn redact(&self, output: Value) -> Result<Value, ToolError> {
///         let Value::Object(mut fields) = output else {
///             return Err(ToolError::new("the output is not an object"));
///         };
///         fields.retain(|name, _| self.0.redaction.allow.iter().any(|allowed| allowed == name));
///         Ok(Value::Object(fields))
///     }
/// }
/// let echo = Echo(ToolSpec {
///     id: ToolId::parse("core__echo").unwrap(),
///     description: "Echo text".into(),
///     input_schema: json!({"type": "object"}),
///     effect: ToolEffect::ReadOnly,
///     redaction: Redaction { allow: vec!["text".into()] },
/// });
/// assert_eq!(echo.spec().id.as_str(), "core__echo");
/// let out = echo.redact(json!({"text": "hi", "secret": "s3cr3t"})).unwrap();
/// assert_eq!(out, json!({"text": "hi"}));
/// ```
#[async_trait]
pub trait BoundTool: Send + Sync {
    /// What the model is told.
    fn spec(&self) -> &ToolSpec;

    /// Whether the tool needs an external connection (and so a connection id in the context).
    fn requires_connection(&self) -> bool {
        false
    }

    /// Whether running the tool twice with the same arguments has the effect of running it once.
    /// Only read-only or idempotent tools are ever retried.
    fn idempotent(&self) -> bool {
        false
    }

    /// Checks parsed arguments against the input schema and returns them. The error message names
    /// the failing location and rule, never the offending value.
    ///
    /// An error is answered as `validation`, the model's mistake, except a
    /// [`ToolError::permanent`] one: that says the tool itself cannot take arguments its schema
    /// accepts (a fault of the tool, not of the call), and is answered as `execution`.
    fn validate_input(&self, args: Value) -> Result<Value, ToolError>;

    /// Runs the tool on the validated arguments (shared with the start event and the record, so
    /// they are never copied). Callable only through the runner, which holds the [`ExecPermit`].
    async fn exec(
        &self,
        permit: ExecPermit,
        args: Arc<Value>,
        ctx: &ToolInvocationContext,
        caps: &Capabilities,
    ) -> Result<Value, ToolError>;

    /// Checks the output against the output schema.
    fn validate_output(&self, output: &Value) -> Result<(), ToolError>;

    /// Keeps only allowlisted output fields.
    fn redact(&self, output: Value) -> Result<Value, ToolError>;

    /// The least size, in bytes, the runner counts `redacted` (this tool's redacted result) as
    /// against [`crate::Budgets::max_result_bytes`]: it holds the result to the larger of this
    /// and the result's compact JSON length, so a tool can make its result count as larger
    /// than it is, never as smaller. Tools leave the default, 0; a replay of a recorded run uses
    /// it to refuse a recorded oversized result again (`result_too_large`, with the recorded
    /// size) without building a result that large.
    fn counted_result_bytes(&self, _redacted: &Value) -> usize {
        0
    }

    /// A failure this call is already known to meet before attempt `attempt` (from 1) reaches
    /// the tool, which the runner then ends the call with instead of asking the tool's circuit
    /// breaker. Tools leave the default, `None`. A replay of a recorded run uses it to answer a
    /// call the record says the breaker refused (`circuit_open`) with the recorded failure: the
    /// breaker's state is not in the record (it carries over between runs, and its wait is real
    /// time), so a replay's own breaker would decide, and word, otherwise. It is not asked for
    /// an attempt whose run was cancelled before it: that attempt ends `cancelled`.
    fn refused_before_attempt(
        &self,
        _ctx: &ToolInvocationContext,
        _args: &Value,
        _attempt: u32,
    ) -> Option<crate::ToolFailure> {
        None
    }
}

/// Where the runner finds tools; the catalog lists what a source offers.
///
/// ```
/// use ai_core::{StaticToolSource, ToolSource, ToolId};
/// let source = StaticToolSource::new(vec![]).unwrap();
/// assert!(source.tool_specs().is_empty());
/// assert!(source.bound_tool(&ToolId::parse("core__x").unwrap()).is_none());
/// ```
pub trait ToolSource: Send + Sync {
    /// The executable tool with this id, if the source has it.
    fn bound_tool(&self, id: &ToolId) -> Option<Arc<dyn BoundTool>>;
    /// Every tool's spec, in a stable order.
    fn tool_specs(&self) -> Vec<ToolSpec>;
}

/// A source over a fixed set of bound tools, built in a composition root.
#[derive(Clone)]
pub struct StaticToolSource {
    tools: BTreeMap<ToolId, Arc<dyn BoundTool>>,
}

impl StaticToolSource {
    /// Builds the source; two tools with one id are an error, never an overwrite.
    pub fn new(tools: Vec<Arc<dyn BoundTool>>) -> Result<Self, Error> {
        let mut by_id = BTreeMap::new();
        for tool in tools {
            let id = tool.spec().id.clone();
            if by_id.contains_key(&id) {
                return Err(Error::ToolIdCollision(id));
            }
            by_id.insert(id, tool);
        }
        Ok(Self { tools: by_id })
    }
}

impl fmt::Debug for StaticToolSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolSource for StaticToolSource {
    fn bound_tool(&self, id: &ToolId) -> Option<Arc<dyn BoundTool>> {
        self.tools.get(id).cloned()
    }

    fn tool_specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec().clone()).collect()
    }
}

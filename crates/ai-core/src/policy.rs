//! The deny-by-default tool policy: plain data loaded from TOML or JSON (POLICY_IS_DATA).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::{Error, RunContext, ToolEffect, ToolId};

/// What the policy says about one tool for one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyDecision {
    /// The tool may be shown and run.
    Allow,
    /// The tool is neither shown nor run.
    Deny,
    /// The tool needs a human's approval first; until the loop supports approvals it is neither
    /// shown nor run.
    RequireApproval,
}

/// Per-invocation limits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budgets {
    /// Wall time a tool may run before it ends as `timeout` (default 30 000).
    pub max_runtime_ms: u64,
    /// Size of the serialized, redacted result before it ends as `result_too_large` (default 32 KiB).
    pub max_result_bytes: usize,
    /// Size of the raw argument JSON before it is refused as `validation` (default 8 KiB).
    pub max_args_bytes: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            max_runtime_ms: 30_000,
            max_result_bytes: 32 * 1024,
            max_args_bytes: 8 * 1024,
        }
    }
}

/// Which tools may run, which need approval, and the budgets. The default denies everything.
///
/// ```
/// use ai_core::ToolPolicy;
/// let policy = ToolPolicy::from_json_str(r#"{
///     "allowed_tools": ["core__workspace_read", "core__workspace_write"],
///     "require_approval_for_effects": ["state_change"],
///     "budgets": {"max_runtime_ms": 2000}
/// }"#).unwrap();
/// assert_eq!(policy.budgets.max_runtime_ms, 2000);
/// assert_eq!(policy.budgets.max_result_bytes, 32 * 1024);
/// assert!(ToolPolicy::from_json_str(r#"{"allowed_tool": []}"#).is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolPolicy {
    /// The explicit allowlist; a tool not named here is denied.
    pub allowed_tools: BTreeSet<ToolId>,
    /// Effects that need approval before a call runs.
    pub require_approval_for_effects: BTreeSet<ToolEffect>,
    /// Per-invocation limits.
    pub budgets: Budgets,
}

impl ToolPolicy {
    /// Parses a policy from TOML; unknown keys and malformed tool ids are refused.
    pub fn from_toml_str(text: &str) -> Result<Self, Error> {
        toml::from_str(text).map_err(|e| Error::Policy(e.message().to_owned()))
    }

    /// Parses a policy from JSON; unknown keys and malformed tool ids are refused.
    pub fn from_json_str(text: &str) -> Result<Self, Error> {
        serde_json::from_str(text).map_err(|e| Error::Policy(e.to_string()))
    }

    /// Decides on one tool: deny unless allowlisted, then approval by effect, else allow.
    ///
    /// The context is part of the signature so that per-actor or per-tenant rules can be added
    /// without touching callers; the allowlist does not read it today.
    pub fn decide(&self, _ctx: &RunContext, id: &ToolId, effect: ToolEffect) -> PolicyDecision {
        if !self.allowed_tools.contains(id) {
            PolicyDecision::Deny
        } else if self.require_approval_for_effects.contains(&effect) {
            PolicyDecision::RequireApproval
        } else {
            PolicyDecision::Allow
        }
    }
}

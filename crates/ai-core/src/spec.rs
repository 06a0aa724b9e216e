//! What a model is told about a tool.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ToolId;

/// How far a tool reaches beyond computing a value; policy decides on it.
///
/// Exhaustive on purpose: policies, retries and approvals decide on it, and a catch-all arm in
/// such a decision could treat an effect it does not know as a harmless one; a new one must make
/// every such match fail to compile until it is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolEffect {
    /// Pure computation or read-only data access.
    ReadOnly,
    /// Changes application state (database or file writes).
    StateChange,
    /// Calls out: sends mail, triggers webhooks, talks to external services.
    ExternalSideEffect,
}

impl ToolEffect {
    /// The snake_case name used in policy files and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::StateChange => "state_change",
            Self::ExternalSideEffect => "external_side_effect",
        }
    }
}

/// The output allowlist: only these fields leave the runner (invariant REDACTION_REQUIRED).
///
/// Each entry is a dotted path from the output's root (`"time"`, `"entries.name"`); arrays are
/// walked element by element. A field not named by any path, or by a prefix of one, is stripped.
/// In `ai-tools`, a segment `field*` follows a field that holds its own type any number of
/// times, none included (`"children*.name"` keeps every node's name in a tree).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Redaction {
    /// Output paths that may be shown to the model, the UI and telemetry.
    pub allow: Vec<String>,
}

/// A tool as a model sees it. Built by a contract crate (ai-tools) from Rust types; never by hand.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// The namespaced id, sent to providers as the function name.
    pub id: ToolId,
    /// What the tool does, for the model.
    pub description: String,
    /// Draft-07 JSON Schema of the input, within the subset [`crate::validate_tool_schema_p0`]
    /// accepts.
    pub input_schema: Value,
    /// Side-effect level.
    pub effect: ToolEffect,
    /// The output allowlist.
    pub redaction: Redaction,
}

//! What the composition root is configured with, and where the policy comes from.

use std::path::{Path, PathBuf};

use ai_core::ToolPolicy;
use anyhow::Context;

/// The policy used when none is given: read-only core tools allowed, everything else denied.
pub const DEFAULT_POLICY_TOML: &str = include_str!("../policy.default.toml");

/// The settings `create_capabilities` needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The folder the workspace tools are confined to.
    pub workspace_root: PathBuf,
}

/// Loads a policy file (`.json` as JSON, anything else as TOML), or the built-in default when
/// `path` is `None`. Errors name the file and the reason, never a value of the wrong type or
/// variant (as `cogni.toml`'s do): a TOML file's also name the line and its key, a JSON file's
/// the line and column.
pub fn load_policy(path: Option<&Path>) -> anyhow::Result<ToolPolicy> {
    let Some(path) = path else {
        return Ok(ToolPolicy::from_toml_str(DEFAULT_POLICY_TOML)?);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read policy file {}", path.display()))?;
    let policy = if path.extension().is_some_and(|e| e == "json") {
        // JSON has no byte order mark, but editors write one (as toml reads past it); it is no
        // part of the policy.
        let json = text.strip_prefix('\u{FEFF}').unwrap_or(&text);
        // What `ToolPolicy::from_json_str` does, with the error told as a TOML file's is.
        serde_json::from_str::<ToolPolicy>(json)
            .map_err(|e| crate::settings::json_error(&e))
            .and_then(|policy| Ok(policy.check().map(|()| policy)?))
    } else {
        // What `ToolPolicy::from_toml_str` does, with the error's line and key kept.
        toml::from_str::<ToolPolicy>(&text)
            .map_err(|e| crate::settings::toml_error(&text, &e))
            .and_then(|policy| Ok(policy.check().map(|()| policy)?))
    };
    policy.with_context(|| format!("policy file {}", path.display()))
}

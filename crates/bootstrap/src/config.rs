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
    /// Whether the workspace shows hidden entries (names starting with `.`: `.env`,
    /// `.git/config`, which hold keys and tokens); off, they are not there for the tools
    /// ([`adapters::FsWorkspace::with_hidden`]).
    pub workspace_hidden: bool,
}

/// Loads a policy file (one whose extension is `json`, in any ASCII case, as JSON; anything
/// else as TOML), or the built-in default when `path` is `None`. Errors name the file and the
/// reason, never a value of the wrong type or variant (as `cogni.toml`'s do): a TOML file's also
/// name the line and its key, a JSON file's the line and column ([`ToolPolicy::from_toml_str`], [`ToolPolicy::from_json_str`]).
pub fn load_policy(path: Option<&Path>) -> anyhow::Result<ToolPolicy> {
    let Some(path) = path else {
        return Ok(ToolPolicy::from_toml_str(DEFAULT_POLICY_TOML)?);
    };
    let text = read_settings_file(path, "policy file")?;
    let policy = if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        ToolPolicy::from_json_str(&text)
    } else {
        ToolPolicy::from_toml_str(&text)
    };
    policy.with_context(|| format!("policy file {}", path.display()))
}

/// The most a config or policy file may hold: far more than any holds, and little enough to read
/// whole.
const MAX_SETTINGS_FILE_BYTES: u64 = 1 << 20;

/// The text of a config or policy file (`what`: `"config file"`), read up to
/// [`MAX_SETTINGS_FILE_BYTES`]: a path that names a device or a huge file by mistake
/// (`--config /dev/zero`, a log) is refused, not read until memory runs out. The error names
/// the file and what is wrong with it (too large, not UTF-8 text, the OS error), never its text.
pub(crate) fn read_settings_file(path: &Path, what: &str) -> anyhow::Result<String> {
    let cannot_read = || format!("cannot read {what} {}", path.display());
    let bytes = std::fs::File::open(path)
        .and_then(|file| crate::bounded::read_at_most(file, MAX_SETTINGS_FILE_BYTES))
        .with_context(cannot_read)?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{}: it is over {}, more than any {what} holds",
                cannot_read(),
                crate::bounded::size(MAX_SETTINGS_FILE_BYTES)
            )
        })?;
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{}: it is not UTF-8 text", cannot_read()))
}

#[cfg(test)]
mod tests {
    /// A policy file is read as JSON by its extension in any ASCII case (`policy.JSON`, as a
    /// Windows tool or a camera names files); before, only `.json` was, and `policy.JSON` was
    /// refused as malformed TOML.
    #[test]
    fn a_json_extension_in_any_case_is_read_as_json() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"{"allowed_tools": ["core__get_current_time"]}"#;
        let expected = ai_core::ToolPolicy::from_json_str(text).unwrap();
        for name in ["policy.json", "policy.JSON", "policy.Json"] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let policy = super::load_policy(Some(&path)).unwrap_or_else(|e| panic!("{e:#}"));
            assert_eq!(policy, expected, "{name}");
        }
        // Any other extension is TOML, which this text is not.
        let path = dir.path().join("policy.jsonc");
        std::fs::write(&path, text).unwrap();
        assert!(super::load_policy(Some(&path)).is_err());
    }
}

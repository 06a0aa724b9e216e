//! Repository chores: `cargo xtask check-architecture` enforces the layering and the source
//! rules of DESIGN.md; `cargo xtask check-links` that the Markdown's relative links and anchors
//! lead somewhere ([`links`]); `cargo xtask ci` runs everything CI runs.
//!
//! check-architecture is written like rust-analyzer's `xtask/src/tidy.rs`: plain functions
//! that return violations as `path:line: RULE_ID: message` (graph violations name the edge,
//! `from -> to: RULE_ID: message`), and a `#[test]` that runs them on this repository, so
//! `cargo test` enforces the architecture too. The rules:
//!
//! - graph ([`graph`]): `ARCH_LAYERING`, `ARCH_SOURCE_PLACE`, `ARCH_LINTS`, `ARCH_PATCHED_DEP`,
//!   `ARCH_BANNED_DEP`, `ARCH_EXTERNAL_DEP` (the allowlists of external crates and features of
//!   the crates that do no IO of their own, and of adapters), `NO_ENV` (a build script outside
//!   bootstrap);
//! - sources ([`sources`]): `ARCH_SINGLE_EXECUTION_PATH`, `ARCH_FOREIGN_SOURCE`, `NO_ENV`,
//!   `TOOL_FILE_PURITY`, `IO_FREE`, `NO_SCHEMA_LIB`, `NO_SECRET_IN_CONTEXT`,
//!   `NO_DEFAULT_EXECUTABLE_CATALOG`, `FILE_DOCS`;
//! - the checker's own health: `SCANNER_SAW_NOTHING` (a pattern or allow-list matched nothing),
//!   `SCANNER_LOST` (a file the lexer could not follow), `STALE_EXCEPTION` ([`exceptions`]).

mod ci;
mod exceptions;
mod graph;
mod lex;
mod links;
mod sources;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("check-architecture") => check_architecture(&repo_root()),
        Some("check-links") => links::check_links(&repo_root()),
        Some("ci") => ci::run(&repo_root()),
        _ => {
            eprintln!("usage: cargo xtask <check-architecture|check-links|ci>");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: the parent of this package's folder.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The cargo that runs us (so `cargo +toolchain xtask` stays on that toolchain).
#[allow(clippy::disallowed_methods)] // xtask, like bootstrap, may read the environment.
pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Every violation of the architecture rules in the repository at `root`, exceptions applied,
/// and what the source scan saw.
pub(crate) fn violations(root: &Path) -> anyhow::Result<(Vec<String>, sources::Seen)> {
    let metadata = graph::cargo_metadata(root)?;
    let mut violations = graph::check_repo(&metadata)?;
    violations.extend(graph::lints_inherited(&metadata));
    violations.extend(graph::swapped_dependencies(&metadata));
    let renamed = graph::renamed_deps(&metadata);
    let libraries = graph::libraries(&metadata);
    let (source_violations, seen) = sources::check_repo(root, &renamed, &libraries)?;
    violations.extend(source_violations);
    Ok((exceptions::apply(violations, exceptions::EXCEPTIONS), seen))
}

/// Runs every architecture rule on the repository and fails listing each violation.
pub(crate) fn check_architecture(root: &Path) -> anyhow::Result<()> {
    let (violations, seen) = violations(root)?;
    if violations.is_empty() {
        println!(
            "check-architecture: ok ({} files, {} of them sources; {} ai-tools files; {} sans-IO files; {} `…Context` types with {} fields; {} exec calls in the runner; {} public functions bind tools they are handed, {} of them returning `Self`)",
            seen.files,
            seen.source_files,
            seen.tool_files,
            seen.sans_io_files,
            seen.context_structs,
            seen.context_fields,
            seen.exec_calls_in_runner,
            seen.tool_builders,
            seen.self_tool_builders
        );
        Ok(())
    } else {
        for violation in &violations {
            eprintln!("{violation}");
        }
        anyhow::bail!("check-architecture: {} violation(s)", violations.len())
    }
}

#[cfg(test)]
mod tests {
    /// A fresh folder holding only `files` (each a path under it and its text), for the checks'
    /// tests to run on.
    pub(crate) fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let full = root.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        root
    }

    /// `cargo test` enforces the architecture too.
    #[test]
    fn the_repository_keeps_its_architecture() {
        let (violations, _) = super::violations(&super::repo_root()).unwrap();
        assert!(
            violations.is_empty(),
            "check-architecture found {} violation(s):\n{}",
            violations.len(),
            violations.join("\n")
        );
    }
}

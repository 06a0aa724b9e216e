//! Repository chores: `cargo xtask check-architecture` enforces the layering and the source
//! rules of DESIGN.md; `cargo xtask ci` runs everything CI runs.

mod ci;
mod graph;
mod sources;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("check-architecture") => check_architecture(&repo_root()),
        Some("ci") => ci::run(&repo_root()),
        _ => {
            eprintln!("usage: cargo xtask <check-architecture|ci>");
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

/// Runs every architecture rule on the repository and fails listing each violation.
pub(crate) fn check_architecture(root: &Path) -> anyhow::Result<()> {
    let metadata = graph::cargo_metadata(root)?;
    let mut violations = graph::check(&metadata)?;
    violations.extend(sources::check_repo(root)?);
    if violations.is_empty() {
        println!("check-architecture: ok");
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
    /// `cargo test` enforces the architecture too.
    #[test]
    fn the_repository_keeps_its_architecture() {
        super::check_architecture(&super::repo_root()).unwrap();
    }
}

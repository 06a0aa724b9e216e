//! The source rules of DESIGN.md, checked line by line over `crates/*/src/**/*.rs`.
//!
//! Each violation reads `path:line: RULE_ID: message`. Comment and doc lines are skipped, except
//! by FILE_DOCS, which looks only at them.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Where `ExecPermit::new` and `.exec(` calls may appear: the runner only.
const RUNNER: &str = "crates/ai-core/src/runner/";
/// Tool files: no IO of their own.
const TOOLS: &str = "crates/ai-tools/src/tools/";
/// Where the environment may be read.
const ENV_ALLOWED: &[&str] = &["crates/bootstrap/"];
/// Crates that never name a schema library.
const SCHEMA_FREE: &[&str] = &["crates/ai-core/src/", "crates/wire-openai/src/"];
/// IO a tool file must not do.
const TOOL_IO: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "env::var",
    "tokio::fs",
    "tokio::net",
    "reqwest",
];
/// Field names a context struct must not have.
const SECRET_WORDS: &[&str] = &[
    "token",
    "api_key",
    "apikey",
    "secret",
    "password",
    "authorization",
];

/// What the scan saw, so that a broken pattern or an empty walk cannot pass silently.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    files: usize,
    tool_files: usize,
    permit_constructions_in_runner: usize,
    context_structs: usize,
}

/// Runs the rules on a tree and returns the violations and what was seen.
pub(crate) fn check_tree(root: &Path) -> anyhow::Result<(Vec<String>, Seen)> {
    let mut files = Vec::new();
    let crates = root.join("crates");
    for entry in
        fs::read_dir(&crates).with_context(|| format!("cannot read {}", crates.display()))?
    {
        let src = entry?.path().join("src");
        if src.is_dir() {
            walk(&src, &mut files)?;
        }
    }
    files.sort();
    let mut violations = Vec::new();
    let mut seen = Seen::default();
    for file in files {
        let text =
            fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
        let relative = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        check_file(&relative, &text, &mut violations, &mut seen);
    }
    Ok((violations, seen))
}

/// Runs the rules on the repository and also fails when a scanner saw nothing.
pub(crate) fn check_repo(root: &Path) -> anyhow::Result<Vec<String>> {
    let (mut violations, seen) = check_tree(root)?;
    let sanity = [
        (seen.files > 0, "no source file was scanned"),
        (
            seen.tool_files > 0,
            "no tool file was scanned under crates/ai-tools/src/tools/",
        ),
        (
            seen.permit_constructions_in_runner > 0,
            "the runner's `ExecPermit::new` was not found: the ARCH_SINGLE_EXECUTION_PATH pattern is broken",
        ),
        (
            seen.context_structs > 0,
            "no `…Context` struct was found: the NO_SECRET_IN_CONTEXT pattern is broken",
        ),
    ];
    for (ok, message) in sanity {
        if !ok {
            violations.push(format!("xtask: SCANNER_SAW_NOTHING: {message}"));
        }
    }
    Ok(violations)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

fn check_file(path: &str, text: &str, violations: &mut Vec<String>, seen: &mut Seen) {
    seen.files += 1;
    let mut report = |line: usize, rule: &str, message: String| {
        violations.push(format!("{path}:{line}: {rule}: {message}"));
    };
    if !text.starts_with("//!") {
        report(
            1,
            "FILE_DOCS",
            "the file must start with a `//!` doc comment".into(),
        );
    }
    let in_runner = path.starts_with(RUNNER);
    let is_tool = path.starts_with(TOOLS);
    if is_tool {
        seen.tool_files += 1;
    }
    let env_allowed = ENV_ALLOWED.iter().any(|p| path.starts_with(p));
    let schema_free = SCHEMA_FREE.iter().any(|p| path.starts_with(p));
    let lines: Vec<&str> = text.lines().collect();
    for (index, raw) in lines.iter().enumerate() {
        let line_no = index + 1;
        let line = raw.trim_start();
        if line.starts_with("//") {
            continue;
        }
        if line.contains("ExecPermit::new") {
            if in_runner {
                seen.permit_constructions_in_runner += 1;
            } else {
                report(
                    line_no,
                    "ARCH_SINGLE_EXECUTION_PATH",
                    "`ExecPermit::new` outside the runner".into(),
                );
            }
        }
        if line.contains(".exec(") && !in_runner {
            report(
                line_no,
                "ARCH_SINGLE_EXECUTION_PATH",
                "a tool's `exec` is called outside the runner; go through `ToolRunner::run_tool`"
                    .into(),
            );
        }
        if !env_allowed && (line.contains("std::env") || line.contains("env::var")) {
            report(
                line_no,
                "NO_ENV",
                "the environment is read only in cogni-bootstrap".into(),
            );
        }
        if is_tool {
            for pattern in TOOL_IO.iter().filter(|p| line.contains(**p)) {
                report(
                    line_no,
                    "TOOL_FILE_PURITY",
                    format!("tool files do no IO of their own (`{pattern}`); use a capability"),
                );
            }
        }
        if schema_free {
            for name in ["schemars", "jsonschema"]
                .iter()
                .filter(|n| line.contains(**n))
            {
                report(
                    line_no,
                    "NO_SCHEMA_LIB",
                    format!("this crate never names `{name}`"),
                );
            }
        }
        if let Some(name) = context_struct_name(line) {
            seen.context_structs += 1;
            for (offset, field_line) in lines[index + 1..].iter().enumerate() {
                let field_line = field_line.trim();
                if field_line.starts_with('}') {
                    break;
                }
                let Some(field) = field_name(field_line) else {
                    continue;
                };
                let lower = field.to_ascii_lowercase();
                if let Some(word) = SECRET_WORDS.iter().find(|w| lower.contains(**w)) {
                    report(
                        line_no + offset + 1,
                        "NO_SECRET_IN_CONTEXT",
                        format!(
                            "`{name}.{field}` looks like a secret ({word}); pass a reference and resolve it through a capability"
                        ),
                    );
                }
            }
        }
    }
}

/// `Foo` for a line declaring `struct FooContext {` (any visibility).
fn context_struct_name(line: &str) -> Option<&str> {
    let rest = line.split_once("struct ")?.1;
    let name = rest
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()?;
    (name.ends_with("Context") && rest.contains('{')).then_some(name)
}

/// The field name of a line like `pub(crate) api_key: String,`.
fn field_name(line: &str) -> Option<&str> {
    if line.starts_with('#') || line.starts_with("//") {
        return None;
    }
    let (head, _) = line.split_once(':')?;
    let name = head.rsplit(' ').next()?.trim();
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')).then_some(name)
}

#[cfg(test)]
mod tests;

//! The source rules of DESIGN.md, checked over `crates/*/src/**/*.rs`.
//!
//! Each violation reads `path:line: RULE_ID: message`. The rules look at tokens of code only:
//! comments, doc comments and the contents of string and char literals are blanked first
//! ([`crate::lex`]), so prose that mentions `std::env` or `.exec(` never fires. Grouped imports
//! are expanded (`use std::{env, fs}` names `std::env` and `std::fs`).
//!
//! | rule | fires on | where |
//! |---|---|---|
//! | `ARCH_SINGLE_EXECUTION_PATH` | `ExecPermit::new`; a call `x.exec(…)` or `T::exec(…)` (a `fn exec(` definition is fine) | outside `crates/ai-core/src/runner/` |
//! | `NO_ENV` | `std::env…`, `env::var*` (`var`, `var_os`, `vars`…) | outside `crates/bootstrap/` (xtask is not scanned) |
//! | `TOOL_FILE_PURITY` | `std::fs`, `std::net`, `std::process`, `std::env`, `env::var*`, `tokio::fs`, `tokio::net`, `reqwest` | in `crates/ai-tools/src/tools/` |
//! | `NO_SCHEMA_LIB` | `schemars`, `jsonschema` | in `crates/ai-core/src/` and `crates/wire-openai/src/` |
//! | `NO_SECRET_IN_CONTEXT` | a field of a `struct …Context` whose name contains token, api_key, apikey, secret, password or authorization (any case) | everywhere |
//! | `FILE_DOCS` | a file that does not start with `//!` | everywhere |
//!
//! The compile-time macros `env!` and `option_env!` are not `std::env`: they read the build's
//! environment (`env!("CARGO_PKG_VERSION")`), not the running process's, and are allowed.
//!
//! A scan also reports what it saw ([`Seen`]); on the real repository, [`check_repo`] fails
//! when a rule's allow-listed place is empty or a pattern the rule depends on never matched
//! (like rust tidy's `saw_target_arch`), so a broken pattern or a moved folder cannot pass.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::lex::{self, Token};

/// Where `ExecPermit::new` and `exec` calls may appear: the runner only.
const RUNNER: &str = "crates/ai-core/src/runner/";
/// Tool files: no IO of their own.
const TOOLS: &str = "crates/ai-tools/src/tools/";
/// Where the environment may be read (xtask may too, but it is not under `crates/`).
const ENV_ALLOWED: &[&str] = &["crates/bootstrap/"];
/// Code that never names a schema library.
const SCHEMA_FREE: &[&str] = &["crates/ai-core/src/", "crates/wire-openai/src/"];
/// The schema libraries.
const SCHEMA_LIBS: &[&str] = &["schemars", "jsonschema"];
/// Paths that read the environment (a trailing `*` matches any segment it starts: `env::var*`
/// covers `env::var`, `env::var_os`, `env::vars`).
const ENV_PATHS: &[&str] = &["std::env", "env::var*"];
/// IO a tool file must not do.
const TOOL_IO: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "env::var*",
    "tokio::fs",
    "tokio::net",
    "reqwest",
];
/// Words a context struct's field name must not contain (compared in lowercase).
const SECRET_WORDS: &[&str] = &[
    "token",
    "api_key",
    "apikey",
    "secret",
    "password",
    "authorization",
];

/// What a scan saw, so that an empty walk or a broken pattern cannot pass silently.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    /// `.rs` files scanned.
    pub(crate) files: usize,
    /// Files under [`TOOLS`].
    pub(crate) tool_files: usize,
    /// Files under [`ENV_ALLOWED`].
    pub(crate) env_allowed_files: usize,
    /// Files under [`SCHEMA_FREE`].
    pub(crate) schema_free_files: usize,
    /// `ExecPermit::new` in the runner.
    pub(crate) permits_in_runner: usize,
    /// `exec` calls in the runner.
    pub(crate) exec_calls_in_runner: usize,
    /// Schema library names outside [`SCHEMA_FREE`] (ai-tools names them).
    pub(crate) schema_libs_elsewhere: usize,
    /// `struct …Context` declarations.
    pub(crate) context_structs: usize,
    /// Named fields of those structs.
    pub(crate) context_fields: usize,
}

/// Runs the rules on every `crates/*/src/**/*.rs` under `root`; returns the violations, in
/// path order, and what was seen.
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
        violations.extend(check_file(&relative, &text, &mut seen));
    }
    Ok((violations, seen))
}

/// Runs the rules on the repository at `root` and also fails when a scanner saw nothing.
pub(crate) fn check_repo(root: &Path) -> anyhow::Result<(Vec<String>, Seen)> {
    let (mut violations, seen) = check_tree(root)?;
    violations.extend(sanity(&seen));
    Ok((violations, seen))
}

/// One `SCANNER_SAW_NOTHING` violation per rule whose scan matched nothing it must match on
/// the real repository.
fn sanity(seen: &Seen) -> Vec<String> {
    let checks = [
        (seen.files, "FILE_DOCS: no source file was scanned"),
        (
            seen.permits_in_runner,
            "ARCH_SINGLE_EXECUTION_PATH: no `ExecPermit::new` in crates/ai-core/src/runner/; the pattern or the allow-list is stale",
        ),
        (
            seen.exec_calls_in_runner,
            "ARCH_SINGLE_EXECUTION_PATH: no `exec` call in crates/ai-core/src/runner/; the pattern or the allow-list is stale",
        ),
        (
            seen.env_allowed_files,
            "NO_ENV: no file under crates/bootstrap/; the allow-list is stale",
        ),
        (
            seen.tool_files,
            "TOOL_FILE_PURITY: no file under crates/ai-tools/src/tools/; the rule checks nothing",
        ),
        (
            seen.schema_free_files,
            "NO_SCHEMA_LIB: no file under crates/ai-core/src/ or crates/wire-openai/src/; the rule checks nothing",
        ),
        (
            seen.schema_libs_elsewhere,
            "NO_SCHEMA_LIB: `schemars`/`jsonschema` named nowhere (not even in ai-tools); the pattern is broken",
        ),
        (
            seen.context_structs,
            "NO_SECRET_IN_CONTEXT: no `struct …Context` found; the pattern is broken",
        ),
        (
            seen.context_fields,
            "NO_SECRET_IN_CONTEXT: no field of a `…Context` struct found; the field pattern is broken",
        ),
    ];
    checks
        .into_iter()
        .filter(|(count, _)| *count == 0)
        .map(|(_, message)| format!("xtask/src/sources.rs: SCANNER_SAW_NOTHING: {message}"))
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Runs every rule on one file (`path` is relative to the repository, with `/`).
pub(crate) fn check_file(path: &str, text: &str, seen: &mut Seen) -> Vec<String> {
    let mut violations = Vec::new();
    seen.files += 1;
    if !text.starts_with("//!") {
        violations.push(format!(
            "{path}:1: FILE_DOCS: the file must start with a `//!` doc comment"
        ));
    }
    let code = match lex::blank(text) {
        Ok(code) => code,
        Err(line) => {
            violations.push(format!(
                "{path}:{line}: SCANNER_LOST: unterminated literal or comment; the file was not checked"
            ));
            return violations;
        }
    };
    let tokens = lex::tokens(&code);
    let place = Place {
        in_runner: path.starts_with(RUNNER),
        is_tool: path.starts_with(TOOLS),
        env_allowed: ENV_ALLOWED.iter().any(|p| path.starts_with(p)),
        schema_free: SCHEMA_FREE.iter().any(|p| path.starts_with(p)),
    };
    seen.tool_files += usize::from(place.is_tool);
    seen.env_allowed_files += usize::from(place.env_allowed);
    seen.schema_free_files += usize::from(place.schema_free);

    let mut found: Vec<(usize, &str, String)> = Vec::new();
    single_execution_path(&tokens, &place, seen, &mut found);
    for (segments, line) in named_paths(&tokens) {
        paths_rules(&segments, line, &place, seen, &mut found);
    }
    no_secret_in_context(&tokens, seen, &mut found);
    found.sort_by_key(|(line, _, _)| *line);
    for (line, rule, message) in found {
        let violation = format!("{path}:{line}: {rule}: {message}");
        if !violations.contains(&violation) {
            violations.push(violation);
        }
    }
    violations
}

/// Which allow-lists a file is on.
struct Place {
    in_runner: bool,
    is_tool: bool,
    env_allowed: bool,
    schema_free: bool,
}

/// `(line, rule, message)` findings of one file.
type Found<'a> = Vec<(usize, &'a str, String)>;

/// ARCH_SINGLE_EXECUTION_PATH: `ExecPermit::new` and calls of `exec` only in the runner.
fn single_execution_path(tokens: &[Token], place: &Place, seen: &mut Seen, found: &mut Found<'_>) {
    for (i, token) in tokens.iter().enumerate() {
        let text_at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
        if token.text == "ExecPermit" && text_at(i + 1) == "::" && text_at(i + 2) == "new" {
            if place.in_runner {
                seen.permits_in_runner += 1;
            } else {
                found.push((
                    token.line,
                    "ARCH_SINGLE_EXECUTION_PATH",
                    "`ExecPermit::new` outside the runner (crates/ai-core/src/runner/)".into(),
                ));
            }
        }
        let is_call = token.text == "exec"
            && i > 0
            && matches!(text_at(i - 1), "." | "::")
            && (text_at(i + 1) == "(" || (text_at(i + 1) == "::" && text_at(i + 2) == "<"));
        if is_call {
            if place.in_runner {
                seen.exec_calls_in_runner += 1;
            } else {
                found.push((
                    token.line,
                    "ARCH_SINGLE_EXECUTION_PATH",
                    "a tool's `exec` is called outside the runner; go through the runner (`run_tool`)"
                        .into(),
                ));
            }
        }
    }
}

/// NO_ENV, TOOL_FILE_PURITY and NO_SCHEMA_LIB on one named path (`std::env::var`, `reqwest`).
fn paths_rules(
    segments: &[&str],
    line: usize,
    place: &Place,
    seen: &mut Seen,
    found: &mut Found<'_>,
) {
    if !place.env_allowed && ENV_PATHS.iter().any(|p| contains_path(segments, p)) {
        found.push((
            line,
            "NO_ENV",
            "the environment is read only in cogni-bootstrap (and xtask); take configuration as a parameter"
                .into(),
        ));
    }
    if place.is_tool {
        for pattern in TOOL_IO.iter().filter(|p| contains_path(segments, p)) {
            found.push((
                line,
                "TOOL_FILE_PURITY",
                format!("tool files do no IO of their own (`{pattern}`); use a capability"),
            ));
        }
    }
    for name in SCHEMA_LIBS.iter().filter(|n| segments.contains(*n)) {
        if place.schema_free {
            found.push((
                line,
                "NO_SCHEMA_LIB",
                format!("ai-core and wire-openai never name `{name}`; schemas live in ai-tools"),
            ));
        } else {
            seen.schema_libs_elsewhere += 1;
        }
    }
}

/// Whether `pattern` (`std::env`, `env::var*`) occurs as consecutive segments of `segments`;
/// a segment ending in `*` matches every segment it starts.
fn contains_path(segments: &[&str], pattern: &str) -> bool {
    let pattern: Vec<&str> = pattern.split("::").collect();
    segments.windows(pattern.len()).any(|window| {
        window
            .iter()
            .zip(&pattern)
            .all(|(segment, wanted)| match wanted.strip_suffix('*') {
                Some(start) => segment.starts_with(start),
                None => segment == wanted,
            })
    })
}

/// Every path the code names, as segments with the line of its last segment: each maximal run
/// `a::b::c` outside `use`, and each leaf of a `use` tree expanded (`use std::{env, fs::File}`
/// names `std::env` and `std::fs::File`).
fn named_paths(tokens: &[Token]) -> Vec<(Vec<&str>, usize)> {
    let mut paths = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i].text == "use" {
            let end = tokens[i..]
                .iter()
                .position(|t| t.text == ";")
                .map_or(tokens.len(), |p| i + p);
            use_tree(&tokens[i + 1..end], &[], &mut paths);
            i = end;
        } else if is_ident(&tokens[i].text) {
            let mut segments = vec![tokens[i].text.as_str()];
            let mut j = i + 1;
            while j + 1 < tokens.len() && tokens[j].text == "::" && is_ident(&tokens[j + 1].text) {
                segments.push(tokens[j + 1].text.as_str());
                j += 2;
            }
            paths.push((segments, tokens[j - 1].line));
            i = j;
        } else {
            i += 1;
        }
    }
    paths
}

/// Expands one `use` tree (the tokens between `use` and `;`) into its leaf paths.
fn use_tree<'t>(tokens: &'t [Token], prefix: &[&'t str], out: &mut Vec<(Vec<&'t str>, usize)>) {
    let mut segments = prefix.to_vec();
    let mut line = tokens.first().map_or(0, |t| t.line);
    let mut i = 0;
    while i < tokens.len() {
        let text = tokens[i].text.as_str();
        if text == "{" {
            // Split the group at its top-level commas; each part is a tree under `segments`.
            let mut depth = 0;
            let mut start = i + 1;
            for j in i + 1..tokens.len() {
                match tokens[j].text.as_str() {
                    "{" => depth += 1,
                    "}" if depth == 0 => {
                        use_tree(&tokens[start..j], &segments, out);
                        return;
                    }
                    "}" => depth -= 1,
                    "," if depth == 0 => {
                        use_tree(&tokens[start..j], &segments, out);
                        start = j + 1;
                    }
                    _ => {}
                }
            }
            use_tree(&tokens[start..], &segments, out);
            return;
        }
        if text == "as" {
            break;
        }
        if is_ident(text) && text != "self" {
            segments.push(text);
            line = tokens[i].line;
        }
        i += 1;
    }
    if !tokens.is_empty() && !segments.is_empty() {
        out.push((segments, line));
    }
}

fn is_ident(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// NO_SECRET_IN_CONTEXT: the named fields of every `struct …Context`.
fn no_secret_in_context(tokens: &[Token], seen: &mut Seen, found: &mut Found<'_>) {
    for (i, token) in tokens.iter().enumerate() {
        if token.text != "struct" {
            continue;
        }
        let Some(name) = tokens.get(i + 1).map(|t| t.text.as_str()) else {
            continue;
        };
        if !name.ends_with("Context") {
            continue;
        }
        seen.context_structs += 1;
        // The body starts at the first `{` before any `(` (tuple struct) or `;` (unit struct).
        let Some(open) = tokens[i + 2..]
            .iter()
            .position(|t| matches!(t.text.as_str(), "{" | "(" | ";"))
            .map(|p| i + 2 + p)
            .filter(|&p| tokens[p].text == "{")
        else {
            continue;
        };
        // A field is `name :` at the body's top level, outside attributes and `pub(…)`.
        let (mut braces, mut groups) = (0_usize, 0_usize);
        for k in open + 1..tokens.len() {
            match tokens[k].text.as_str() {
                "{" => braces += 1,
                "}" if braces == 0 => break,
                "}" => braces -= 1,
                "(" | "[" => groups += 1,
                ")" | "]" => groups = groups.saturating_sub(1),
                ":" if braces == 0 && groups == 0 && k > open + 1 => {
                    let field = &tokens[k - 1];
                    if !is_ident(&field.text) {
                        continue;
                    }
                    seen.context_fields += 1;
                    let lower = field.text.to_ascii_lowercase();
                    if let Some(word) = SECRET_WORDS.iter().find(|w| lower.contains(**w)) {
                        found.push((
                            field.line,
                            "NO_SECRET_IN_CONTEXT",
                            format!(
                                "`{name}.{}` is named like a secret ({word}); keep a reference and resolve it through a capability",
                                field.text
                            ),
                        ));
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;

//! The source rules of DESIGN.md, checked over `crates/*/src/**/*.rs`; `FILE_DOCS` also over
//! every other `.rs` file of the repository (`crates/*/tests`, `crates/*/benches`, `tests/`,
//! `xtask/`, fuzz targets), skipping `target/`, `node_modules/`, hidden folders and a fuzz
//! folder's `corpus/` and `artifacts/` (but nothing inside `crates/*/src/`).
//!
//! Each violation reads `path:line: RULE_ID: message`. The rules look at tokens of code only:
//! comments, doc comments and the contents of string and char literals are blanked first
//! ([`crate::lex`]), so prose that mentions `std::env` or `.exec(` never fires. Names are read
//! the way the compiler would:
//!
//! - grouped imports are expanded: `use std::{env, fs}` names `std::env` and `std::fs`;
//! - imports are followed: after `use std as s;` or `extern crate std as s;`, `s::fs::read`
//!   names `std::fs`; after `use std::os::unix;`, `unix::fs` names `std::os::unix::fs`; after
//!   `use std::*;`, `fs::read` names `std::fs`; after `use std::include_str as text;`, `text!`
//!   is `include_str!`;
//! - so are other modules' imports, in any file of the crate: with `pub use std as s;` in
//!   `src/a.rs`, `crate::a::s::fs` (or `a::s::fs`, `super::s::fs`) names `std::fs`. Such a
//!   path is read through the named module's own imports (and its glob imports': a test
//!   module's `use super::*`), so `use std::time;` in one file leaves another's `super::time`
//!   alone; where the module cannot be told (a `#[path]` or `include!`, under any name, in the
//!   crate, a file of `src/bin/`, a module name no file or `mod` gives), through every import
//!   of the name in the crate, and an import in a `macro_rules!` body counts in every module
//!   ([`CrateScope`]);
//! - an `extern crate std as s;` (in any file, `extern crate self as me;` too, which names the
//!   crate's root) puts `s` in the crate's extern prelude, so a bare `s::fs::read` names
//!   `std::fs` in every module of the crate, and `me::a::s::fs` is `crate::a::s::fs`;
//! - a dependency that the crate's manifest renames (`rt = { package = "tokio" }`, read from
//!   cargo metadata) is its crate: `rt::fs` names `tokio::fs`;
//! - a path through a workspace crate's library (`ai_core::s::fs`, read from cargo metadata
//!   too) is read through that crate's imports from its root, as a path through the crate's
//!   own modules is: after `pub use std as s;` in ai-core, `ai_core::s::fs` names `std::fs`
//!   (see [`through_libraries`]);
//! - a path that a macro variable completes (`std::$m::read`) or starts (`$k::fs::read`), or
//!   whose modules macro variables alone make up (`$k::$m::read`), counts as every path it
//!   could be; one that ends in variables alone (`$e::$v`, an enum's variant) names an item of
//!   what the macro is handed (see [`contains_path`]), so the names an invocation hands a macro
//!   that joins them into a path (`$k::$m`, `$($p)::*`) count as every path they could make
//!   (`call!(io, stdout)` is `io::stdout`; see [`joined_paths`]), whichever crate defines it,
//!   and so do those handed to a macro that hands them on to such a macro;
//! - likewise, the names an invocation hands a macro that invokes a macro by a name it is
//!   handed (`$n!(…)`) are each that macro invoked, and those it hands one that calls a method
//!   by such a name (`$t.$m(…)`, not a field `$t.$f`) each that method called, with arguments
//!   the scan cannot read (`call!(include)` is `include!` of a computed path, `on!(tool, exec)`
//!   is `tool.exec(…)`; see [`spliced_calls`]);
//! - a type a macro makes of what it is handed (`struct $n { pub $f: String }`) is each type
//!   the names an invocation hands it could make, at the invocation, for NO_SECRET_IN_CONTEXT
//!   (`ctx!(RunContext, api_key)`; see [`made_types`]), and so is a public item for
//!   NO_DEFAULT_EXECUTABLE_CATALOG (`pub fn $n() -> $t`; see [`catalog`]);
//! - a raw identifier is the name it spells (`r#exec` is `exec`; `r#use` is a name, not the
//!   keyword);
//! - a string literal that names a file or a variable (`#[path]`, `include!`, `env!`) is read
//!   with its escapes, as rustc reads it (`".\x2e/"` is `"../"`), whatever delimiter invokes
//!   the macro (`include!["…"]`).
//!
//! | rule | fires on | where |
//! |---|---|---|
//! | `ARCH_SINGLE_EXECUTION_PATH` | `ExecPermit::new`; a call `x.exec(…)` or `T::exec(…)`, or `T::exec` taken as a function value (a `fn exec(` definition is fine) | outside `crates/ai-core/src/runner/` |
//! | `ARCH_FOREIGN_SOURCE` | `#[path = "…"]` (also in `cfg_attr`) or `include!("…")` whose file is not a `.rs` file in the file's own `crates/<name>/src/`; `#[path]` inside an inline module; `include_str!`/`include_bytes!` of a file in another package's folder (`crates/<other>/`, `tests/`, `xtask/`) or of a hidden file (`.env`); any of them whose path is not a plain (or raw) string literal, or passes through a symlink anywhere in the repository; a symlink at `crates/`, `crates/<name>` or in `crates/<name>/src/` (the scan does not follow it) | everywhere |
//! | `NO_ENV` | `std::env…`, `env::var*`; `from_default_env`, `from_env` and their `try_` forms (`EnvFilter`, `envy`); the crates `dotenv`, `dotenvy`, `envy`; `env!`/`option_env!` of a variable that is not one of the [`CARGO_VARIABLES`] Cargo sets for a crate | outside `crates/bootstrap/` (xtask is not scanned) |
//! | `TOOL_FILE_PURITY` | [`IO`] and [`CLOCK`] names, [`STDIO_MACROS`] (`println!`), calls of [`FS_METHODS`] (`path.exists()`; not `self.exists()` in an inherent `impl` that defines `fn exists`) | in all of `crates/ai-tools/src/` |
//! | `IO_FREE` | [`IO`] and [`CLOCK`] names, [`STDIO_MACROS`], calls of [`FS_METHODS`] (`tokio::time` stays allowed: the runner's budgets use it) | in `crates/ai-core/src/`, `crates/graph/src/`, `crates/wire-openai/src/`, `crates/wire-ui/src/` |
//! | `NO_SCHEMA_LIB` | [`SCHEMA_LIBS`] | in `crates/ai-core/src/`, `crates/graph/src/`, `crates/wire-openai/src/`, `crates/wire-ui/src/` |
//! | `NO_SECRET_IN_CONTEXT` | a field or variant of a `struct`/`enum`/`union` named `…Context` or `…Ctx` (or of the crate's type that an alias `type …Context = …;` names) named like a secret ([`secret_word`]: token, api key, secret, password, authorization, credential, creds, bearer, cookie, header, private key, passphrase, jwt, or a last word `key` in any case other than [`NOT_SECRET_KEYS`] such as `idempotency_key`; [`TOKEN_COUNTS`] such as `max_tokens` are not secrets), a tuple field or tuple variant whose type is so named (`AuthContext(SecretString)`), and a member so named of a type of the same crate that such a member holds, at any depth (`connection: ConnectionAuth`) | everywhere |
//! | `NO_DEFAULT_EXECUTABLE_CATALOG` | a `pub fn` that takes no parameter and returns bound tools (its return type names `BoundTool`, `ToolSource`, `StaticToolSource`, or the crate's alias, import or implementor of one), a `pub static`/`pub const` of such a type, `Default` for such a type, an `impl Default` whose body names one (see [`catalog`]) | in every `crates/*/src/` but `crates/bootstrap/`, the composition root |
//! | `FILE_DOCS` | a file that does not start with a `//!` doc comment, or whose leading `//!` lines hold no text | every `.rs` file |
//!
//! The compile-time macros `env!` and `option_env!` read the build's environment, not the
//! running process's. The variables Cargo sets for a crate ([`CARGO_VARIABLES`]: `OUT_DIR`,
//! `CARGO_PKG_VERSION`, …) describe the package and are allowed everywhere; any other name (a
//! `CARGO_…` one too: `CARGO_REGISTRY_TOKEN` is a secret of the caller's), or a computed one, is
//! configuration (or a secret: `option_env!("OPENAI_API_KEY")`) baked in from the environment,
//! which NO_ENV keeps to bootstrap like `std::env`. `include_str!` and `include_bytes!` are not
//! IO either: they embed a file of the source tree when the crate is built, and nothing is read
//! when it runs; ARCH_FOREIGN_SOURCE keeps them to the package's own files and the
//! repository root's, never a hidden file (`.env`).
//!
//! A scan also reports what it saw ([`Seen`]); on the real repository, [`check_repo`] fails
//! when a rule's allow-listed place is empty or a pattern the rule depends on never matched
//! (like rust tidy's `saw_target_arch`), so a broken pattern or a moved folder cannot pass.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::lex::{self, Token};

mod catalog;

/// Where `ExecPermit::new` and `exec` calls may appear: the runner only.
const RUNNER: &str = "crates/ai-core/src/runner/";
/// ai-tools: no IO of its own, in tool files or beside them.
const AI_TOOLS: &str = "crates/ai-tools/src/";
/// The crates that do no IO of their own: no IO, no clock, no schema library. The wire crates
/// are sans-IO outright; ai-core and graph are async, and reach the world only through ports.
const SANS_IO: &[&str] = &[
    "crates/ai-core/src/",
    "crates/graph/src/",
    "crates/wire-openai/src/",
    "crates/wire-ui/src/",
];
/// Where the environment may be read (xtask may too, but it is not under `crates/`).
const ENV_ALLOWED: &[&str] = &["crates/bootstrap/"];
/// The JSON Schema libraries, as paths name them.
const SCHEMA_LIBS: &[&str] = &[
    "schemars",
    "jsonschema",
    "jsonschema_valid",
    "boon",
    "valico",
];
/// Paths that read the environment (a trailing `*` matches any segment it starts: `env::var*`
/// covers `env::var`, `env::var_os`, `env::vars`; a lone `*` matches any segment).
const ENV_PATHS: &[&str] = &[
    "std::env",
    "env::var*",
    "from_default_env",
    "try_from_default_env",
    "from_env",
    "try_from_env",
    "dotenv",
    "dotenvy",
    "envy",
];
/// IO that ai-tools and the sans-IO crates never do: files, sockets, processes (a platform's
/// too: `std::os::unix::process::parent_id`), signals, stdio, the environment (the current
/// folder too, which `std::path::absolute` reads), HTTP.
const IO: &[&str] = &[
    "std::fs",
    "std::path::absolute",
    "std::net",
    "std::process",
    "std::os::*::fs",
    "std::os::*::net",
    "std::os::*::process",
    "io::stdin",
    "io::stdout",
    "io::stderr",
    "std::env",
    "env::var*",
    "tokio::fs",
    "tokio::net",
    "tokio::process",
    "tokio::signal",
    "reqwest",
    "hyper",
];
/// Macros that write to the process's stdout or stderr: IO like [`IO`]'s `io::stdout`.
const STDIO_MACROS: &[&str] = &["print", "println", "eprint", "eprintln", "dbg"];
/// Methods of std's `Path` (and `PathBuf`) that read the filesystem; a path reaches them
/// without naming `std::fs`.
const FS_METHODS: &[&str] = &[
    "exists",
    "try_exists",
    "is_file",
    "is_dir",
    "is_symlink",
    "metadata",
    "symlink_metadata",
    "read_dir",
    "read_link",
    "canonicalize",
];
/// Clock reads that bypass the `Clock` port: the wall clock (std, chrono, time) and std's
/// `Instant` (the runner's budgets use `tokio::time::Instant`, which tests can pause). Any std
/// `SystemTime`, `UNIX_EPOCH` included, reads the wall clock through `.elapsed()`, so the type
/// itself counts (`SystemTime::now` also catches other crates' `SystemTime`, like web-time's).
const CLOCK: &[&str] = &[
    "SystemTime::now",
    "std::time::SystemTime",
    "std::time::UNIX_EPOCH",
    "Utc::now",
    "Local::now",
    "OffsetDateTime::now*",
    "std::time::Instant",
];
/// Words a context's field or variant name must not contain, compared in lowercase with `_`
/// removed (`auth_header` and `authHeader` both contain `header`).
const SECRET_WORDS: &[&str] = &[
    "token",
    "apikey",
    "secret",
    "password",
    "passwd",
    "authorization",
    "credential",
    "bearer",
    "cookie",
    "header",
    "privatekey",
    "passphrase",
    "creds",
    "jwt",
];
/// Names ending in `key` that are not secrets (compared like [`SECRET_WORDS`]); any other
/// `key`, `*_key` or `*Key` is taken for one (`openai_key`, `signing_key`).
const NOT_SECRET_KEYS: &[&str] = &[
    "idempotencykey",
    "cachekey",
    "publickey",
    "partitionkey",
    "sortkey",
];

/// Counts of model tokens, not credentials (compared like [`SECRET_WORDS`]): removed from a name
/// before it is searched for them, so `max_tokens` and `Usage.input_tokens` pass while
/// `access_token`, and `max_tokens_secret`'s `secret`, are still found.
const TOKEN_COUNTS: &[&str] = &[
    "maxtokens",
    "inputtokens",
    "outputtokens",
    "prompttokens",
    "completiontokens",
    "totaltokens",
    "reasoningtokens",
    "cachedtokens",
    "tokenbudget",
    "tokencount",
    "tokenlimit",
    "tokensused",
];

/// What a scan saw, so that an empty walk or a broken pattern cannot pass silently.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    /// `.rs` files checked for `FILE_DOCS`.
    pub(crate) files: usize,
    /// Of those, the `crates/*/src/**/*.rs` files every rule checks.
    pub(crate) source_files: usize,
    /// Files under [`AI_TOOLS`].
    pub(crate) tool_files: usize,
    /// Files under [`SANS_IO`].
    pub(crate) sans_io_files: usize,
    /// Files under [`ENV_ALLOWED`].
    pub(crate) env_allowed_files: usize,
    /// `ExecPermit::new` in the runner.
    pub(crate) permits_in_runner: usize,
    /// `exec` calls in the runner.
    pub(crate) exec_calls_in_runner: usize,
    /// Schema library names outside [`SANS_IO`] (ai-tools names them).
    pub(crate) schema_libs_elsewhere: usize,
    /// [`IO`] names outside ai-tools and [`SANS_IO`] (adapters names them).
    pub(crate) io_elsewhere: usize,
    /// `struct …Context` and `enum …Context` declarations.
    pub(crate) context_structs: usize,
    /// Named fields and variants of those.
    pub(crate) context_fields: usize,
    /// Public functions outside bootstrap that are handed what they bind (a parameter but
    /// their receiver) and return bound tools (`ai_tools::bind`, `StaticToolSource::new`), for
    /// NO_DEFAULT_EXECUTABLE_CATALOG.
    pub(crate) tool_builders: usize,
    /// Those of them whose return type names their tool source as `Self`
    /// (`StaticToolSource::new`).
    pub(crate) self_tool_builders: usize,
}

/// A dependency that a crate's manifest renames (`rt = { package = "tokio" }`): in that
/// crate's sources `rt::fs` is `tokio::fs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RenamedDep {
    /// The package folder, `crates/ai-core/`.
    pub(crate) folder: String,
    /// The name the sources use, `rt`.
    pub(crate) name: String,
    /// The crate it stands for, `tokio`.
    pub(crate) krate: String,
}

/// A workspace package's library, which the sources of the crates that depend on it name
/// (`ai_core`): there `ai_core::s::fs` is `crate::s::fs` read in that package's crate, through
/// its imports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Library {
    /// The name sources call it by, `ai_core`.
    pub(crate) name: String,
    /// The package folder, `crates/ai-core/`.
    pub(crate) folder: String,
}

/// One finding: `(path, line, rule, message)`.
type Finding = (String, usize, &'static str, String);

/// Runs the rules on every `.rs` file under `root` ([`FILE_DOCS`](file_docs) only outside
/// `crates/*/src/`), each crate's sources reading its `renamed` dependencies under their real
/// names and a path through one of the workspace's `libraries` through that crate's imports;
/// returns the violations, in path and line order, and what was seen.
pub(crate) fn check_tree(
    root: &Path,
    renamed: &[RenamedDep],
    libraries: &[Library],
) -> anyhow::Result<(Vec<String>, Seen)> {
    let mut files = Vec::new();
    let mut links = Vec::new();
    walk(root, root, "rs", &mut files, &mut links)?;
    files.sort();
    let mut found = Vec::new();
    let links: Vec<String> = links.iter().map(|l| relative(root, l)).collect();
    for link in links.iter().cloned() {
        if hides_sources(&link) {
            found.push((
                link,
                1,
                "ARCH_FOREIGN_SOURCE",
                "a symlink where crate sources live; rustc compiles what it points to, which the scan does not follow; keep the files here (or depend on their crate)".into(),
            ));
        }
    }
    let mut texts = Vec::new();
    for file in files {
        let text =
            fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
        texts.push((relative(root, &file), text));
    }
    let mut scopes: Vec<(&str, CrateScope)> = Vec::new();
    for (relative, text) in texts.iter().filter(|(path, _)| is_source(path)) {
        let folder = crate_dir(relative);
        if !scopes.iter().any(|(f, _)| *f == folder) {
            scopes.push((folder, CrateScope::default()));
        }
        if let Some((_, scope)) = scopes.iter_mut().find(|(f, _)| *f == folder) {
            scope.add(relative, text);
        }
    }
    let no_scope = CrateScope::default();
    let macros: Vec<&MacroJoins> = (scopes.iter())
        .flat_map(|(_, scope)| &scope.macros)
        .collect();
    let libraries: Vec<(&str, &CrateScope)> = (libraries.iter())
        .filter_map(|library| {
            let (_, scope) = scopes.iter().find(|(f, _)| *f == library.folder)?;
            Some((library.name.as_str(), scope))
        })
        .collect();
    let joiners = relayed(&macros, |m| m.joins);
    let invokers = relayed(&macros, |m| m.invokes);
    let callers = relayed(&macros, |m| m.calls);
    let mut types = Vec::new();
    let mut invocations = Vec::new();
    let mut catalogs = Vec::new();
    let mut seen = Seen::default();
    for (relative, text) in &texts {
        let (relative, text) = (relative.as_str(), text.as_str());
        seen.files += 1;
        file_docs(relative, text, &mut found);
        if is_source(relative) {
            let renamed: Vec<(&str, &str)> = renamed
                .iter()
                .filter(|r| r.folder == crate_dir(relative))
                .map(|r| (r.name.as_str(), r.krate.as_str()))
                .collect();
            let scope = scopes
                .iter()
                .find(|(f, _)| *f == crate_dir(relative))
                .map_or(&no_scope, |(_, scope)| scope);
            let names = Names {
                renamed: &renamed,
                scope,
                libraries: &libraries,
                links: &links,
                joiners: &joiners,
                invokers: &invokers,
                callers: &callers,
            };
            let collected = Collected {
                types: &mut types,
                invocations: &mut invocations,
                catalogs: &mut catalogs,
            };
            check_source(relative, text, &names, &mut seen, &mut found, collected);
        }
    }
    let made = made_types(&types, &invocations, &macros);
    types.retain(|t| t.made_by.is_none());
    types.extend(made);
    no_secret_in_context(&types, &mut seen, &mut found);
    catalog::no_default_executable_catalog(&catalogs, &invocations, &macros, &mut seen, &mut found);
    found.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let mut violations = Vec::new();
    for (path, line, rule, message) in found {
        let violation = format!("{path}:{line}: {rule}: {message}");
        if !violations.contains(&violation) {
            violations.push(violation);
        }
    }
    Ok((violations, seen))
}

/// Runs the rules on the repository at `root` (see [`check_tree`]) and also fails when a
/// scanner saw nothing.
pub(crate) fn check_repo(
    root: &Path,
    renamed: &[RenamedDep],
    libraries: &[Library],
) -> anyhow::Result<(Vec<String>, Seen)> {
    let (mut violations, seen) = check_tree(root, renamed, libraries)?;
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
            "TOOL_FILE_PURITY: no file under crates/ai-tools/src/; the rule checks nothing",
        ),
        (
            seen.sans_io_files,
            "IO_FREE: no file under crates/ai-core/src/, crates/graph/src/, crates/wire-openai/src/ or crates/wire-ui/src/; the rule checks nothing",
        ),
        (
            seen.io_elsewhere,
            "IO_FREE: no IO name (`std::fs`, `tokio::net`, …) anywhere (not even in adapters); the pattern is broken",
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
        (
            seen.tool_builders,
            "NO_DEFAULT_EXECUTABLE_CATALOG: no public function handed what it binds returns bound tools (not even `ai_tools::bind`); the pattern is broken",
        ),
        (
            seen.self_tool_builders,
            "NO_DEFAULT_EXECUTABLE_CATALOG: no public function handed what it binds returns a tool source as `Self` (not even `StaticToolSource::new`); the `Self` reading is broken",
        ),
    ];
    checks
        .into_iter()
        .filter(|(count, _)| *count == 0)
        .map(|(_, message)| format!("xtask/src/sources.rs: SCANNER_SAW_NOTHING: {message}"))
        .collect()
}

/// Every file named `*.{extension}` under `dir` (in the repository at `root`), skipping build
/// output, vendored packages, hidden folders and fuzzing data, but never in crate sources, where
/// `mod target;` compiles `src/target/`; every symlink met on the way goes to `links` too, one by
/// a skipped name as well (a link to a folder is not entered).
pub(crate) fn walk(
    root: &Path,
    dir: &Path,
    extension: &str,
    out: &mut Vec<PathBuf>,
    links: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let in_fuzz = dir.file_name().is_some_and(|name| name == "fuzz");
    for entry in fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let skipped = !is_source(&relative(root, &path))
            && (name.starts_with('.')
                || matches!(name.as_str(), "target" | "node_modules")
                || (in_fuzz && matches!(name.as_str(), "corpus" | "artifacts")));
        // `file_type` does not follow symlinks, so a link to a parent cannot loop. A link is
        // recorded even where its name is skipped (`target`): a path macro may read through it.
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            links.push(path.clone());
        }
        if kind.is_dir() {
            if !skipped {
                walk(root, &path, extension, out, links)?;
            }
        } else if path.extension().is_some_and(|e| e == extension) {
            out.push(path);
        }
    }
    Ok(())
}

/// `path` relative to `root`, with `/`.
pub(crate) fn relative(root: &Path, path: &Path) -> String {
    let path = path.strip_prefix(root).unwrap_or(path);
    path.to_string_lossy().replace('\\', "/")
}

/// Whether a symlink at `path` could bring crate sources the scan does not read: `crates`, a
/// package folder `crates/<name>`, or anything in `crates/<name>/src/`.
fn hides_sources(path: &str) -> bool {
    path == "crates"
        || (path.starts_with("crates/") && path.matches('/').count() == 1)
        || is_source(path)
}

/// Whether `path` is under `crates/<name>/src/`, where every rule applies.
fn is_source(path: &str) -> bool {
    let mut parts = path.split('/');
    parts.next() == Some("crates") && parts.nth(1) == Some("src")
}

/// The package folder of `path` (`crates/graph/`), or `""` outside `crates/`.
fn crate_dir(path: &str) -> &str {
    match path.strip_prefix("crates/").and_then(|rest| rest.find('/')) {
        Some(end) => &path[.."crates/".len() + end + 1],
        None => "",
    }
}

/// FILE_DOCS: the file starts with `//!` lines, and they say something (after a byte order
/// mark, which rustc skips).
fn file_docs(path: &str, text: &str, found: &mut Vec<Finding>) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let docs: Vec<&str> = text.lines().take_while(|l| l.starts_with("//!")).collect();
    let message = if docs.is_empty() {
        "the file must start with a `//!` doc comment"
    } else if docs.iter().all(|l| l["//!".len()..].trim().is_empty()) {
        "the file's `//!` doc comment is empty; say what the file is for"
    } else {
        return;
    };
    found.push((path.to_owned(), 1, "FILE_DOCS", message.into()));
}

/// What the names of one crate's sources stand for beyond a file's own imports.
struct Names<'n> {
    /// The crate's renamed dependencies, `(rt, tokio)`.
    renamed: &'n [(&'n str, &'n str)],
    /// What the crate's modules import and declare.
    scope: &'n CrateScope,
    /// What each workspace library's modules import and declare, by the name sources call it
    /// ([`through_libraries`]).
    libraries: &'n [(&'n str, &'n CrateScope)],
    /// The repository's symlinks (relative paths, `crates/bootstrap/data/env`), through which
    /// no file a path macro names may be read ([`foreign_source`]).
    links: &'n [String],
    /// The macros of every crate that join what they are handed into a path ([`relayed`]),
    /// which a crate may invoke from another (`#[macro_export]`).
    joiners: &'n [String],
    /// The macros of every crate that invoke a macro by a name they are handed
    /// ([`spliced_calls`]).
    invokers: &'n [String],
    /// The macros of every crate that call a method by a name they are handed
    /// ([`spliced_calls`]).
    callers: &'n [String],
}

/// What the files of one crate bind where another module can name it: every import
/// (`pub use std as s;` in `src/s.rs`, or a parent's `use std as s3;` that a child reaches as
/// `super::s3`) and every module the crate declares (`mod s;`, `mod a { … }`). A path through
/// the crate's modules (`crate::s::s4::fs`, `a::s2::fs`, `super::s3::fs`) is read through those
/// imports (`std::fs`), and a macro they rename is that macro wherever it is invoked
/// ([`unalias_macros`]). Like a file's imports, they are taken whatever their visibility: that
/// can only add findings.
///
/// A path whose module can be told (its file's path and the inline modules around it give
/// where `self` and `super` are; `crate`, `super`, `self` and the names of known modules lead
/// from there) is read through that module's own imports, and through its glob imports'
/// (`use super::*`), so `use std::time;` in one module does not make `super::time` of another
/// std's. Where the module cannot be told, the path is read through every import of the name
/// in the crate: a module name that is no known module's, a `super` past the root, a file of
/// `src/bin/`, and every path of a crate with a `#[path]` or an `include!`, under any name
/// (which put a file's items in a module its path does not tell). An import in a
/// `macro_rules!` body, whose items land where the macro is invoked, counts in every module.
#[derive(Debug, Default)]
struct CrateScope {
    /// `(name, path)` of each import that binds a name.
    imports: Vec<(String, Vec<String>)>,
    /// The names of the crate's modules.
    modules: Vec<String>,
    /// Whether a file's module cannot be told from its path (a `#[path]`, or `include!` under
    /// its name or imported under another).
    uncertain: bool,
    /// Each known module (its path from the crate root) with its imports: `(name, path)`, the
    /// name `None` for a glob (`use super::*`, its path the glob's parent).
    tree: Vec<(Vec<String>, Vec<ModuleImport>)>,
    /// `(name, path)` of each import whose module cannot be told: every module has it.
    anywhere: Vec<(String, Vec<String>)>,
    /// The `macro_rules!` the crate defines, as far as what they make of the names they are
    /// handed goes ([`MacroJoins`]).
    macros: Vec<MacroJoins>,
    /// `(alias, crate)` of each `extern crate X as Y;` (the crate `["crate"]` for `self`):
    /// the crate's extern prelude, which every module of the crate sees (an extern crate
    /// outside the root only binds a name in its module, but counting it everywhere can only
    /// add findings).
    extern_prelude: Vec<(String, Vec<String>)>,
}

/// An import of a module: the name it binds (`None` for a glob) and the path it imports (the
/// glob's parent).
type ModuleImport = (Option<String>, Vec<String>);

/// The module a path is read from (where its `self` and `super` are); `None` when it cannot be
/// told.
type ModuleOf = Option<Vec<String>>;

/// How many glob imports a lookup follows, one within another ([`CrateScope::lookup`]).
const MAX_GLOB_DEPTH: usize = 8;

impl CrateScope {
    /// Adds what the source `text` of the file at `path` imports and declares (nothing if the
    /// lexer cannot follow it: the file is reported as SCANNER_LOST).
    fn add(&mut self, path: &str, text: &str) {
        let Ok(code) = lex::blank(text) else {
            return;
        };
        let tokens = lex::tokens(&code);
        let at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
        self.uncertain |= tokens.iter().enumerate().any(|(i, token)| {
            (token.text == "include" && at(i + 1) == "!" && opens(at(i + 2)))
                || (token.text == "path" && at(i + 1) == "=" && in_path_attribute(&tokens, i))
        });
        let file = file_module(path);
        let inline = inline_modules(&tokens);
        let module_at = |k: usize| -> ModuleOf {
            let inline = inline.get(k)?.as_ref()?;
            Some([file.as_ref()?.as_slice(), inline].concat())
        };
        if let Some(file) = &file {
            self.known(file.clone());
        }
        self.macros.extend(macro_joins(&tokens));
        let written = written(&tokens);
        // `include!` invoked under another name (`use std::include as inc;`, or another
        // module's such import) is still `include!`.
        self.uncertain |= (written.imports.iter()).any(|i| i.path.last() == Some(&"include"));
        for &k in &written.extern_crates {
            let import = &written.imports[k];
            if let Some(name) = import.name {
                let path = import.path.iter().map(|s| (*s).to_owned()).collect();
                self.extern_prelude.push((name.to_owned(), path));
            }
        }
        for (import, &start) in written.imports.iter().zip(&written.import_starts) {
            let path: Vec<String> = import.path.iter().map(|s| (*s).to_owned()).collect();
            let name = import.name.map(str::to_owned);
            if let Some(name) = &name {
                self.imports.push((name.clone(), path.clone()));
            }
            match (module_at(start), name) {
                (Some(module), name) => self.known(module).push((name, path)),
                (None, Some(name)) => self.anywhere.push((name, path)),
                (None, None) => {}
            }
        }
        for (k, pair) in tokens.windows(2).enumerate() {
            if is_keyword(&pair[0], "mod") && is_ident(&pair[1].text) {
                self.modules.push(pair[1].text.clone());
                if let Some(mut module) = module_at(k) {
                    module.push(pair[1].text.clone());
                    self.known(module);
                }
            }
        }
    }

    /// The imports of `module`, which is known from now on.
    fn known(&mut self, module: Vec<String>) -> &mut Vec<ModuleImport> {
        let at = match self.tree.iter().position(|(m, _)| *m == module) {
            Some(at) => at,
            None => {
                self.tree.push((module, Vec::new()));
                self.tree.len() - 1
            }
        };
        &mut self.tree[at].1
    }

    /// The module that `prefix` (segments that are `crate`, `self`, `super` or module names)
    /// names when read from `from`; `None` when it cannot be told.
    fn target(&self, from: &ModuleOf, prefix: &[&str]) -> ModuleOf {
        if self.uncertain {
            return None;
        }
        let mut module = from.clone()?;
        for (k, segment) in prefix.iter().enumerate() {
            match *segment {
                "crate" if k == 0 => module.clear(),
                "self" if k == 0 => {}
                "super" => {
                    module.pop()?;
                }
                "crate" | "self" => return None,
                name => module.push(name.to_owned()),
            }
        }
        self.tree
            .iter()
            .any(|(m, _)| *m == module)
            .then_some(module)
    }

    /// What `name` stands for in `module`: `(path, module the path is read from)` of each of
    /// its imports of that name, each import of that name whose module cannot be told, and
    /// what its glob imports' modules make of the name (every import of the name in the crate
    /// when a glob's module cannot be told; the glob's parent and the name for a glob of
    /// another crate: `use std::*` makes `fs` `std::fs`).
    fn lookup(&self, module: &[String], name: &str, depth: usize) -> Vec<(Vec<String>, ModuleOf)> {
        let mut out: Vec<(Vec<String>, ModuleOf)> = (self.anywhere.iter())
            .filter(|(n, _)| n == name)
            .map(|(_, path)| (path.clone(), None))
            .collect();
        let Some((_, imports)) = self.tree.iter().find(|(m, _)| m == module) else {
            return self.everywhere(name);
        };
        let context: ModuleOf = Some(module.to_vec());
        for (import, path) in imports {
            match import {
                Some(n) if n == name => out.push((path.clone(), context.clone())),
                Some(_) => {}
                None if depth >= MAX_GLOB_DEPTH => out.extend(self.everywhere(name)),
                None => {
                    let segments: Vec<&str> = path.iter().map(String::as_str).collect();
                    let local = |s: &&str| {
                        matches!(*s, "crate" | "self" | "super")
                            || self.modules.iter().any(|m| m == s)
                    };
                    if !segments.iter().all(local) {
                        let mut spelled = path.clone();
                        spelled.push(name.to_owned());
                        out.push((spelled, context.clone()));
                    } else if let Some(glob) = self.target(&context, &segments) {
                        out.extend(self.lookup(&glob, name, depth + 1));
                    } else {
                        out.extend(self.everywhere(name));
                    }
                }
            }
        }
        out
    }

    /// Every import of `name` in the crate, read from no known module.
    fn everywhere(&self, name: &str) -> Vec<(Vec<String>, ModuleOf)> {
        (self.imports.iter())
            .filter(|(n, _)| n == name)
            .map(|(_, path)| (path.clone(), None))
            .collect()
    }
}

/// What [`check_source`] collects for the rules that look at a whole crate.
struct Collected<'c> {
    /// The types, for NO_SECRET_IN_CONTEXT.
    types: &'c mut Vec<TypeDef>,
    /// The macro invocations that hand names in, for the types a macro makes of them.
    invocations: &'c mut Vec<Invocation>,
    /// What each file outside the composition root says, for NO_DEFAULT_EXECUTABLE_CATALOG.
    catalogs: &'c mut Vec<catalog::FileFacts>,
}

/// Runs every rule but FILE_DOCS on one `crates/*/src` file (`path` is relative to the
/// repository, with `/`; `names` holds the crate's renamed dependencies and what its other
/// modules import), and collects what the crate-wide rules need.
fn check_source(
    path: &str,
    text: &str,
    names: &Names<'_>,
    seen: &mut Seen,
    found: &mut Vec<Finding>,
    collected: Collected<'_>,
) {
    let mut push = |line: usize, rule: &'static str, message: String| {
        found.push((path.to_owned(), line, rule, message));
    };
    seen.source_files += 1;
    let code = match lex::blank(text) {
        Ok(code) => code,
        Err(line) => {
            push(
                line,
                "SCANNER_LOST",
                "unterminated literal or comment; the file was not checked".into(),
            );
            return;
        }
    };
    let mut tokens = lex::tokens(&code);
    unalias_macros(&mut tokens, names);
    let mut spliced = spliced_calls(&tokens, names);
    unalias_macros(&mut spliced, names);
    let place = Place {
        in_runner: path.starts_with(RUNNER),
        in_ai_tools: path.starts_with(AI_TOOLS),
        env_allowed: ENV_ALLOWED.iter().any(|p| path.starts_with(p)),
        sans_io: SANS_IO.iter().any(|p| path.starts_with(p)),
    };
    seen.tool_files += usize::from(place.in_ai_tools);
    seen.env_allowed_files += usize::from(place.env_allowed);
    seen.sans_io_files += usize::from(place.sans_io);

    let chars: Vec<char> = text.chars().collect();
    for tokens in [&tokens, &spliced] {
        single_execution_path(tokens, &place, seen, &mut push);
        io_calls(tokens, &place, seen, &mut push);
        foreign_source(path, &chars, tokens, names.links, &mut push);
        if !place.env_allowed {
            build_env(&chars, tokens, &mut push);
        }
    }
    for (segments, line) in named_paths(path, &tokens, names) {
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        paths_rules(&segments, line, &place, seen, &mut push);
    }
    collected.types.extend(type_defs(path, &tokens));
    for (k, token) in tokens.iter().enumerate() {
        if let Some(names) = handed_names(&tokens, k).filter(|names| !names.is_empty()) {
            collected.invocations.push(Invocation {
                path: path.to_owned(),
                line: token.line,
                macro_name: token.text.clone(),
                names: names.into_iter().map(str::to_owned).collect(),
            });
        }
    }
    if catalog::applies(path) {
        collected.catalogs.push(catalog::facts(path, &tokens));
    }
}

/// Which allow-lists a file is on.
struct Place {
    in_runner: bool,
    in_ai_tools: bool,
    env_allowed: bool,
    sans_io: bool,
}

/// ARCH_SINGLE_EXECUTION_PATH: calls of `exec` only in the runner (`ExecPermit::new` is a path,
/// checked with the others by [`paths_rules`]).
fn single_execution_path(
    tokens: &[Token],
    place: &Place,
    seen: &mut Seen,
    push: &mut impl FnMut(usize, &'static str, String),
) {
    for (i, token) in tokens.iter().enumerate() {
        let text_at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
        // `x.exec(…)`, `x.exec::<T>(…)`, and `T::exec` in any position: called, or taken as
        // a function value (`let f = BoundTool::exec;`, `.map(<dyn BoundTool>::exec)`).
        // `exec::…` without a turbofish is a module (`crate::exec::Plan`).
        let turbofish = text_at(i + 1) == "::" && text_at(i + 2) == "<";
        let is_call = token.text == "exec"
            && match i.checked_sub(1).map_or("", text_at) {
                "." => text_at(i + 1) == "(" || turbofish,
                "::" => (text_at(i + 1) != "::" && !in_use_tree(tokens, i)) || turbofish,
                _ => false,
            };
        if is_call {
            if place.in_runner {
                seen.exec_calls_in_runner += 1;
            } else {
                push(
                    token.line,
                    "ARCH_SINGLE_EXECUTION_PATH",
                    "a tool's `exec` is called outside the runner; go through the runner (`run_tool`)"
                        .into(),
                );
            }
        }
    }
}

/// Whether token `i` is in a `use` declaration's tree (`use crate::exec;`,
/// `use a::{b, exec};`): everything between it and the `use` is path segments, `::`, braces,
/// commas and `*`.
fn in_use_tree(tokens: &[Token], i: usize) -> bool {
    let tree = tokens[..i].iter().rev().take_while(|t| {
        (is_ident(&t.text) && !is_keyword(t, "use"))
            || matches!(t.text.as_str(), "::" | "{" | "}" | "," | "*")
    });
    let start = i - tree.count();
    start > 0 && is_keyword(&tokens[start - 1], "use")
}

/// ARCH_FOREIGN_SOURCE: `#[path]` and `include!` compile only `.rs` files of the file's own
/// crate's `src/` (else a module of another crate gets in without a dependency edge, or code
/// that no rule reads); `include_str!` and `include_bytes!` never read another package's files
/// (data at the repository root, like `cogni.example.toml`, belongs to no package and may be
/// embedded) nor a hidden file (`.env`, `.git/config`: local configuration or a secret, baked
/// in like `env!`'s). A path that is not a string literal (`concat!(env!("CARGO_MANIFEST_DIR"),
/// …)`) cannot be checked and is refused, and so is one through any of the repository's
/// symlinks (`links`), whose target rustc reads and the check does not follow.
fn foreign_source(
    path: &str,
    text: &[char],
    tokens: &[Token],
    links: &[String],
    push: &mut impl FnMut(usize, &'static str, String),
) {
    let own = crate_dir(path);
    let at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
    for (i, token) in tokens.iter().enumerate() {
        let (what, literal) = match token.text.as_str() {
            "include" | "include_str" | "include_bytes" if at(i + 1) == "!" && opens(at(i + 2)) => {
                (format!("{}!", token.text), i + 3)
            }
            "path" if at(i + 1) == "=" && in_path_attribute(tokens, i) => ("#[path]".into(), i + 2),
            _ => continue,
        };
        if what == "#[path]" && in_inline_module(tokens, i) {
            push(
                token.line,
                "ARCH_FOREIGN_SOURCE",
                "`#[path]` inside an inline module resolves from a folder the check does not compute; declare the module at the top of a file".into(),
            );
            continue;
        }
        let compiles = !matches!(what.as_str(), "include_str!" | "include_bytes!");
        let Some(target) = string_literal(text, tokens, literal) else {
            push(
                token.line,
                "ARCH_FOREIGN_SOURCE",
                format!(
                    "`{what}` with a computed path cannot be checked; use a plain string literal"
                ),
            );
            continue;
        };
        let resolved = resolve(path, &target).unwrap_or_default();
        // Each folder or file the path passes through, as written (`up` in `up/../x`, whose
        // `..` is the parent of the link's target, not `.`): the file's own folder is real.
        let parts: Vec<&str> = target.split(['/', '\\']).collect();
        let mut passed = (1..=parts.len()).filter_map(|n| resolve(path, &parts[..n].join("/")));
        if let Some(link) = passed.find_map(|passed| links.iter().find(|link| **link == passed)) {
            let verb = if compiles { "compiles" } else { "reads" };
            push(
                token.line,
                "ARCH_FOREIGN_SOURCE",
                format!(
                    "`{what}` {verb} `{target}` through a symlink (`{link}`), which the check does not follow; keep the file itself there"
                ),
            );
            continue;
        }
        let in_package = ["crates/", "tests/", "xtask/"]
            .iter()
            .any(|p| resolved.starts_with(p));
        let sources = format!("{own}src/");
        let message = if compiles && !resolved.starts_with(&sources) {
            format!(
                "`{what}` compiles `{target}`, which is outside {sources}; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            )
        } else if compiles && !target.ends_with(".rs") {
            format!(
                "`{what}` compiles `{target}`, which is not a `.rs` file, so no rule reads it; give it the `.rs` extension"
            )
        } else if !compiles && resolved.split('/').any(|part| part.starts_with('.')) {
            format!(
                "`{what}` reads `{target}`, a hidden file: local configuration or a secret, which no build embeds"
            )
        } else if compiles || resolved.starts_with(own) {
            continue;
        } else if in_package || resolved.is_empty() {
            format!(
                "`{what}` reads `{target}`, which belongs to another package or lies outside the repository; keep the file in {own} or at the repository root"
            )
        } else {
            continue;
        };
        push(token.line, "ARCH_FOREIGN_SOURCE", message);
    }
}

/// Whether `token` opens a macro's arguments: a macro is invoked with any of `(…)`, `[…]` and
/// `{…}` (`include!["x.rs"]` is `include!("x.rs")`).
fn opens(token: &str) -> bool {
    matches!(token, "(" | "[" | "{")
}

/// The value of the string literal whose first token is `tokens[k]`: `"…"` with its escapes
/// read as the compiler reads them (`".\x2e/"` is `"../"`), `r"…"` or `r#"…"#` as written
/// (read from the original `text`, since the tokens come from blanked code).
fn string_literal(text: &[char], tokens: &[Token], k: usize) -> Option<String> {
    let at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
    let mut open = k;
    let raw = at(k) == "r" && !tokens[k].raw;
    if raw {
        open += 1;
        while at(open) == "#" {
            open += 1;
        }
    }
    (at(open) == "\"" && at(open + 1) == "\"").then(|| {
        let body = &text[tokens[open].offset + 1..tokens[open + 1].offset];
        if raw {
            body.iter().collect()
        } else {
            unescape(body)
        }
    })
}

/// The value of a (non-raw) string literal's `body`: `\n`, `\t`, `\r`, `\0`, `\\`, `\'`,
/// `\"`, `\xHH` and `\u{…}` are the chars they stand for, and a `\` at the end of a line
/// skips the line break and the whitespace after it. An escape rustc would refuse is kept as
/// written (the crate does not build anyway).
fn unescape(body: &[char]) -> String {
    let mut out = String::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        if body[i] != '\\' {
            out.push(body[i]);
            i += 1;
            continue;
        }
        let escaped = body.get(i + 1).copied();
        let (value, len) = match escaped {
            Some('n') => (Some('\n'), 2),
            Some('t') => (Some('\t'), 2),
            Some('r') => (Some('\r'), 2),
            Some('0') => (Some('\0'), 2),
            Some(c @ ('\\' | '\'' | '"')) => (Some(c), 2),
            Some('x') => {
                let hex: String = body.iter().skip(i + 2).take(2).collect();
                let value = u8::from_str_radix(&hex, 16).ok().filter(u8::is_ascii);
                (value.map(char::from), 4)
            }
            Some('u') if body.get(i + 2) == Some(&'{') => {
                let close = body[i..].iter().position(|&c| c == '}').map(|p| i + p);
                let value = close.and_then(|close| {
                    let hex: String = body[i + 3..close].iter().filter(|&&c| c != '_').collect();
                    u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32)
                });
                (value, close.map_or(2, |close| close + 1 - i))
            }
            Some('\n' | '\r') => {
                let skipped = body[i + 1..]
                    .iter()
                    .take_while(|c| c.is_whitespace())
                    .count();
                i += 1 + skipped;
                continue;
            }
            _ => (None, 2),
        };
        match value {
            Some(c) => out.push(c),
            None => out.extend(&body[i..(i + len).min(body.len())]),
        }
        i += len;
    }
    out
}

/// The variables Cargo sets when it compiles a crate (and `CARGO_BIN_EXE_<name>` for tests):
/// what `env!` may read outside bootstrap. Not every `CARGO_…`: the prefix is also that of
/// Cargo's own settings in the caller's environment (`CARGO_REGISTRY_TOKEN`, `CARGO_HOME`), and
/// a build script's `cargo:rustc-env` or a `[env]` table may set any other name.
const CARGO_VARIABLES: &[&str] = &[
    "CARGO",
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_PKG_VERSION",
    "CARGO_PKG_VERSION_MAJOR",
    "CARGO_PKG_VERSION_MINOR",
    "CARGO_PKG_VERSION_PATCH",
    "CARGO_PKG_VERSION_PRE",
    "CARGO_PKG_AUTHORS",
    "CARGO_PKG_NAME",
    "CARGO_PKG_DESCRIPTION",
    "CARGO_PKG_HOMEPAGE",
    "CARGO_PKG_REPOSITORY",
    "CARGO_PKG_LICENSE",
    "CARGO_PKG_LICENSE_FILE",
    "CARGO_PKG_RUST_VERSION",
    "CARGO_PKG_README",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
    "OUT_DIR",
];

/// NO_ENV for `env!` and `option_env!`: only the [`CARGO_VARIABLES`], named by a string
/// literal.
fn build_env(text: &[char], tokens: &[Token], push: &mut impl FnMut(usize, &'static str, String)) {
    let at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
    for (i, token) in tokens.iter().enumerate() {
        let is_macro = matches!(token.text.as_str(), "env" | "option_env")
            && at(i + 1) == "!"
            && opens(at(i + 2));
        let cargos = |name: String| {
            CARGO_VARIABLES.contains(&name.as_str())
                || name
                    .strip_prefix("CARGO_BIN_EXE_")
                    .is_some_and(|bin| !bin.is_empty())
        };
        if is_macro && !string_literal(text, tokens, i + 3).is_some_and(cargos) {
            push(
                token.line,
                "NO_ENV",
                "the build's environment is read only in cogni-bootstrap (and xtask); outside it, `env!` and `option_env!` name only the variables Cargo sets for the crate (`CARGO_PKG_VERSION`, `CARGO_MANIFEST_DIR`, `OUT_DIR`, …); take configuration as a parameter".into(),
            );
        }
    }
}

/// Whether token `i` is inside an inline module's body (`mod a { … }`), where a `#[path]`
/// resolves from `src/a/` (or deeper), not from the file's folder.
fn in_inline_module(tokens: &[Token], i: usize) -> bool {
    let mut open_modules = Vec::new();
    for (k, token) in tokens[..i].iter().enumerate() {
        match token.text.as_str() {
            "{" => open_modules
                .push(k >= 2 && is_keyword(&tokens[k - 2], "mod") && is_ident(&tokens[k - 1].text)),
            "}" => {
                open_modules.pop();
            }
            _ => {}
        }
    }
    open_modules.contains(&true)
}

/// Whether token `i` is inside a `#[path …]` or `#[cfg_attr(…)]` attribute.
fn in_path_attribute(tokens: &[Token], i: usize) -> bool {
    let open = tokens[..i]
        .iter()
        .rposition(|t| matches!(t.text.as_str(), "[" | "]"));
    open.is_some_and(|k| {
        tokens[k].text == "["
            && k > 0
            && tokens[k - 1].text == "#"
            && tokens
                .get(k + 1)
                .is_some_and(|t| matches!(t.text.as_str(), "path" | "cfg_attr"))
    })
}

/// `target`, relative to the folder of `file`, as a path relative to the repository; `None`
/// when it is absolute or climbs out of the repository.
fn resolve(file: &str, target: &str) -> Option<String> {
    if target.starts_with(['/', '\\']) || target.contains(':') {
        return None;
    }
    let mut parts: Vec<&str> = file.split('/').collect();
    parts.pop();
    for part in target.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// ARCH_SINGLE_EXECUTION_PATH (`ExecPermit::new`), NO_ENV, TOOL_FILE_PURITY, IO_FREE and
/// NO_SCHEMA_LIB on one named path (`std::env::var`, `reqwest`).
fn paths_rules(
    segments: &[&str],
    line: usize,
    place: &Place,
    seen: &mut Seen,
    push: &mut impl FnMut(usize, &'static str, String),
) {
    if contains_path(segments, "ExecPermit::new") {
        if place.in_runner {
            seen.permits_in_runner += 1;
        } else {
            push(
                line,
                "ARCH_SINGLE_EXECUTION_PATH",
                "`ExecPermit::new` outside the runner (crates/ai-core/src/runner/)".into(),
            );
        }
    }
    if !place.env_allowed && ENV_PATHS.iter().any(|p| contains_path(segments, p)) {
        push(
            line,
            "NO_ENV",
            "the environment is read only in cogni-bootstrap (and xtask); take configuration as a parameter"
                .into(),
        );
    }
    for pattern in IO
        .iter()
        .chain(CLOCK)
        .filter(|p| contains_path(segments, p))
    {
        io_rules(pattern, line, place, seen, push);
    }
    for name in SCHEMA_LIBS.iter().filter(|n| segments.contains(*n)) {
        if place.sans_io {
            push(
                line,
                "NO_SCHEMA_LIB",
                format!(
                    "ai-core and the wire codecs never name `{name}`; schemas live in ai-tools"
                ),
            );
        } else {
            seen.schema_libs_elsewhere += 1;
        }
    }
}

/// TOOL_FILE_PURITY or IO_FREE, by place, for one IO `what` (a pattern of [`IO`] or [`CLOCK`],
/// or a [`STDIO_MACROS`] call) at `line`.
fn io_rules(
    what: &str,
    line: usize,
    place: &Place,
    seen: &mut Seen,
    push: &mut impl FnMut(usize, &'static str, String),
) {
    if place.in_ai_tools {
        push(
            line,
            "TOOL_FILE_PURITY",
            format!(
                "ai-tools does no IO of its own (`{what}`); use a capability, or `Clock` for time"
            ),
        );
    } else if place.sans_io {
        push(
            line,
            "IO_FREE",
            format!(
                "ai-core, graph and the wire codecs do no IO and read no clock (`{what}`); IO lives in adapters, time comes through `Clock`"
            ),
        );
    } else {
        seen.io_elsewhere += 1;
    }
}

/// TOOL_FILE_PURITY and IO_FREE for IO that names no IO path: the macros that write to stdout
/// or stderr (`println!`), and the [`FS_METHODS`] a `Path` reaches the filesystem with, called
/// as methods (`p.exists()`) or through their type (`Path::canonicalize(&p)`). A call on `self`
/// inside an inherent `impl` that defines a method of its name (`fn is_dir(&self)` of a
/// workspace entry) is taken for that method, not `Path`'s: the type's own method comes before
/// any it reaches through `Deref`, and an inherent `impl` is never `Path`'s. On any other
/// receiver, or in a trait's `impl` (`impl Size for Path`, where `Path`'s own `self.metadata()`
/// comes first), it may be `Path`'s, which the scan cannot tell, so it counts.
fn io_calls(
    tokens: &[Token],
    place: &Place,
    seen: &mut Seen,
    push: &mut impl FnMut(usize, &'static str, String),
) {
    // Each inherent `impl`'s body, with the methods it defines.
    let inherent: Vec<(std::ops::Range<usize>, Vec<&str>)> = catalog::impl_blocks(tokens)
        .into_iter()
        .filter(|block| block.trait_name.is_none())
        .map(|block| {
            let body = block.open..block.close;
            let body_tokens = tokens.get(body.clone()).unwrap_or_default();
            let methods = body_tokens
                .windows(2)
                .filter(|pair| is_keyword(&pair[0], "fn"))
                .map(|pair| pair[1].text.as_str())
                .collect();
            (body, methods)
        })
        .collect();
    for (i, token) in tokens.iter().enumerate() {
        let text_at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
        let name = token.text.as_str();
        if text_at(i + 1) == "!" && STDIO_MACROS.contains(&name) {
            io_rules(&format!("{name}!"), token.line, place, seen, push);
        }
        // Only on `self`, in an inherent `impl` that defines it, can a call be told to be of
        // the type's own method.
        let own = i.checked_sub(2).map_or("", text_at) == "self"
            && !matches!(i.checked_sub(3).map_or("", text_at), "." | "::")
            && (inherent.iter())
                .any(|(body, methods)| body.contains(&i) && methods.contains(&name));
        let method = match i.checked_sub(1).map_or("", text_at) {
            "." => text_at(i + 1) == "(" && !own,
            "::" => text_at(i + 1) != "::",
            _ => false,
        };
        if method && FS_METHODS.contains(&name) {
            io_rules(&format!("{name}()"), token.line, place, seen, push);
        }
    }
}

/// A path segment that a macro variable fills in (`std::$m`).
const MACRO_SEGMENT: &str = "$";

/// The path segment that the identifier `tokens[i]` is: a macro variable (`$k`, not `$crate`)
/// is [`MACRO_SEGMENT`].
fn segment_at(tokens: &[Token], i: usize) -> &str {
    let variable = i > 0 && tokens[i - 1].text == "$" && !is_keyword(&tokens[i], "crate");
    if variable {
        MACRO_SEGMENT
    } else {
        tokens[i].text.as_str()
    }
}

/// Whether `pattern` (`std::env`, `env::var*`) occurs as consecutive segments of `segments`;
/// a segment ending in `*` matches every segment it starts. A [`MACRO_SEGMENT`] matches any
/// segment but a pattern's first, and a pattern's first when that names a crate or a module
/// (lower case: `std`, `tokio`, `io`), as long as a segment of the match is written out, or
/// the pattern has more than one and the path goes on past the match: so `std::$m` counts as
/// every `std::…` it could name, `$k::fs` as `std::fs` and `tokio::fs`, and `$k::$m::read`
/// (`read!(std, fs)`) as every module path it goes through, while `$t::new()` is not taken for
/// `ExecPermit::new`, `$e::$v` (an enum's variant) for `env::var` nor `$t` for `reqwest`: the
/// item that ends a path is one of what the macro is handed, named and checked where it is
/// invoked.
fn contains_path(segments: &[&str], pattern: &str) -> bool {
    let pattern: Vec<&str> = pattern.split("::").collect();
    // Where the match that ends the path starts.
    let last = segments.len().saturating_sub(pattern.len());
    segments
        .windows(pattern.len())
        .enumerate()
        .any(|(at, window)| {
            let module = |wanted: &str| wanted.starts_with(|c: char| c.is_ascii_lowercase());
            let goes_on = pattern.len() > 1 && at < last;
            (goes_on || window.iter().any(|segment| *segment != MACRO_SEGMENT))
                && window.iter().zip(&pattern).enumerate().all(
                    |(k, (segment, wanted))| match wanted.strip_suffix('*') {
                        _ if *segment == MACRO_SEGMENT && (k > 0 || module(wanted)) => true,
                        Some(start) => segment.starts_with(start),
                        None => segment == wanted,
                    },
                )
        })
}

/// Every path the code names, as segments with the line of its last segment: each maximal run
/// `a::b::c` outside `use`, and each leaf of a `use` tree expanded (`use std::{env, fs::File}`
/// names `std::env` and `std::fs::File`). A path is also given in each spelling the file's
/// imports make of it ([`spellings`]), so `use std as s;` then `s::fs::read` names `std::fs`;
/// the crate's renamed dependencies (`(rt, tokio)`) count as imports too, and a path through
/// the crate's modules is read through what they import ([`CrateScope`]).
fn named_paths<'t>(
    path: &str,
    tokens: &'t [Token],
    names: &Names<'t>,
) -> Vec<(Vec<String>, usize)> {
    let written = written(tokens);
    let mut imports = written.imports;
    imports.extend(names.renamed.iter().map(|&(name, krate)| Import {
        name: Some(name),
        path: vec![krate],
    }));
    imports.extend(
        names
            .scope
            .extern_prelude
            .iter()
            .map(|(name, krate)| Import {
                name: Some(name.as_str()),
                path: krate.iter().map(String::as_str).collect(),
            }),
    );
    let file = file_module(path);
    let inline = inline_modules(tokens);
    (written.paths.into_iter().zip(written.path_starts))
        .chain(joined_paths(tokens, names.joiners))
        .flat_map(|((path, line), start)| {
            let context: ModuleOf = inline
                .get(start)
                .cloned()
                .flatten()
                .and_then(|inline| Some([file.as_ref()?.as_slice(), &inline].concat()));
            let spelled = spellings(&path, &imports)
                .into_iter()
                .map(|p| p.into_iter().map(str::to_owned).collect())
                .collect();
            let spelled = through_modules(spelled, context, names.scope);
            through_libraries(spelled, names.libraries)
                .into_iter()
                .map(move |spelled| (spelled, line))
        })
        .collect()
}

/// `spellings` (read from the module `context`) and each path read through the crate's
/// modules: a segment after a run of `crate`, `self`, `super` and the crate's module names
/// that an import binds is the path it imports (`a::s2::fs` with `mod a { pub use std as s2; }`
/// is `std::fs`), repeatedly, read from the module the import is in ([`CrateScope`] says which
/// imports count). A path an import made is read from the import's module from its first
/// segment on (`pub use aa::*;` after `use crate::a as aa;` makes `aa::t` `crate::a::t`). A
/// path that an import leaves starting with a name of the crate's extern prelude (`s::fs`
/// after `pub use s::fs;` with `extern crate std as s;`) is read as that crate's too. Any
/// other path that starts elsewhere (`tokio::time`) is an external crate's, and left alone.
fn through_modules(
    spellings: Vec<Vec<String>>,
    context: ModuleOf,
    scope: &CrateScope,
) -> Vec<Vec<String>> {
    // Past the spellings the file's own imports made (glob imports multiply those), as many
    // as a chain through every import of the crate.
    let most = spellings.len()
        + MAX_SPELLINGS
        + scope.imports.len()
        + scope.anywhere.len()
        + scope.extern_prelude.len();
    let written = spellings.len();
    let mut spelled: Vec<(Vec<String>, ModuleOf)> = spellings
        .into_iter()
        .map(|p| (p, context.clone()))
        .collect();
    let local = |segment: &str| {
        matches!(segment, "crate" | "self" | "super") || scope.modules.iter().any(|m| m == segment)
    };
    let mut k = 0;
    while k < spelled.len() && spelled.len() < most {
        let (path, from) = spelled[k].clone();
        // A path an import made (`aa::t` of `pub use aa::*;`) starts with a name of the
        // module the import is in, bound by that module's imports (`use crate::a as aa;`).
        if k >= written && path.len() > 1 && !local(&path[0]) {
            let found = match &from {
                Some(module) => scope.lookup(module, &path[0], 0),
                None => scope.everywhere(&path[0]),
            };
            for (import, context) in found {
                let next = [&import[..], &path[1..]].concat();
                if !spelled.iter().any(|(p, c)| *p == next && *c == context) {
                    spelled.push((next, context));
                }
            }
        }
        for (_, krate) in scope
            .extern_prelude
            .iter()
            .filter(|(n, _)| path.first() == Some(n))
        {
            let next = [&krate[..], &path[1..]].concat();
            if path.len() > 1 && !spelled.iter().any(|(p, c)| *p == next && *c == from) {
                spelled.push((next, from.clone()));
            }
        }
        for j in 1..path.len() {
            // `crate` and `self` past a path's start do not compile: such a path is only one
            // of the spellings a glob import made (`super::*` before `self::super::time`).
            if !path[..j].iter().all(|s| local(s))
                || path[1..j]
                    .iter()
                    .any(|s| matches!(s.as_str(), "crate" | "self"))
            {
                break;
            }
            let prefix: Vec<&str> = path[..j].iter().map(String::as_str).collect();
            let found = match scope.target(&from, &prefix) {
                Some(module) => scope.lookup(&module, &path[j], 0),
                None => scope.everywhere(&path[j]),
            };
            // A path is followed once from each module it is read from: the file's own
            // imports spell it from the path's module, but its import may be another's
            // (`use self::k::t as w;` in the parent is `k::t` there).
            for (import, context) in found {
                let next = [&import[..], &path[j + 1..]].concat();
                if !spelled.iter().any(|(p, c)| *p == next && *c == context) {
                    spelled.push((next, context));
                }
            }
        }
        k += 1;
    }
    // Each path found once (a path read from two modules is one path).
    let mut out: Vec<Vec<String>> = Vec::with_capacity(spelled.len());
    for (k, (path, _)) in spelled.into_iter().enumerate() {
        if k < written || !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// `paths`, and each of them that starts with a workspace library's name read through that
/// library's imports, from its root (`ai_core::s::fs` is `crate::s::fs` in ai-core: `std::fs`
/// after `pub use std as s;` there), through any number of libraries (ai-tools re-exporting
/// ai-core's).
fn through_libraries(
    mut paths: Vec<Vec<String>>,
    libraries: &[(&str, &CrateScope)],
) -> Vec<Vec<String>> {
    let most = paths.len() + MAX_SPELLINGS * (libraries.len() + 1);
    let mut k = 0;
    while k < paths.len() && paths.len() < most {
        let library =
            (libraries.iter()).find(|(name, _)| paths[k].first().is_some_and(|f| f == name));
        if let Some((_, scope)) = library
            && paths[k].len() > 1
        {
            let local = [&["crate".to_owned()], &paths[k][1..]].concat();
            for path in through_modules(vec![local], Some(Vec::new()), scope) {
                if !paths.contains(&path) {
                    paths.push(path);
                }
            }
        }
        k += 1;
    }
    paths
}

/// A `macro_rules!`, as far as what it makes of the names it is handed goes ([`relayed`]).
#[derive(Debug, Default)]
struct MacroJoins {
    /// Its name.
    name: String,
    /// Whether its rules put `::` between two things an invocation hands in (`$k::$m`, a
    /// repetition `$($p)::*`).
    joins: bool,
    /// Whether its rules invoke a macro by a name an invocation hands in (`$n!(…)`; not a
    /// comparison `$a != $b`).
    invokes: bool,
    /// Whether its rules call a method by a name an invocation hands in (`$t.$m(…)`,
    /// `$t.$m::<T>(…)`; not a field `$t.$f` nor a range `$a..$b`).
    calls: bool,
    /// The macros its rules invoke with something an invocation hands in (`call!($a, $b)`).
    hands_on: Vec<String>,
}

/// The `macro_rules!` that `tokens` define, each with whether it joins what it is handed into
/// a path or splices it in as a macro's or a method's name, and the macros it hands that on to.
fn macro_joins(tokens: &[Token]) -> Vec<MacroJoins> {
    let at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
    let mut macros = Vec::new();
    for (k, token) in tokens.iter().enumerate() {
        if !(is_keyword(token, "macro_rules") && at(k + 1) == "!" && is_ident(at(k + 2))) {
            continue;
        }
        let body = k + 4..closing(tokens, k + 3);
        let joins = body.clone().any(|j| {
            let handed_before = at(j - 1) == ")" || (at(j - 2) == "$" && at(j - 1) != "crate");
            let handed_after = matches!(at(j + 1), "$" | "*" | "+");
            at(j) == "::" && handed_before && handed_after
        });
        let variable = |j: usize| at(j) == "$" && is_ident(at(j + 1)) && at(j + 1) != "crate";
        let invokes = (body.clone()).any(|j| variable(j) && at(j + 2) == "!" && opens(at(j + 3)));
        let calls = body.clone().any(|j| {
            let after_dot = at(j - 1) == "." && at(j - 2) != ".";
            variable(j) && after_dot && matches!(at(j + 2), "(" | "::")
        });
        let hands_on = body
            .filter(|&j| is_ident(at(j)) && at(j + 1) == "!" && opens(at(j + 2)))
            .filter(|&j| (j + 3..closing(tokens, j + 2)).any(|a| at(a) == "$"))
            .map(|j| at(j).to_owned())
            .collect();
        macros.push(MacroJoins {
            name: at(k + 2).to_owned(),
            joins,
            invokes,
            calls,
            hands_on,
        });
    }
    macros
}

/// The macros that do what `does` says with the names they are handed, so that an invocation
/// makes of them what no code spells where it is invoked: one that does it itself (joins them
/// into a path, [`MacroJoins::joins`]: `call!(io, stdout)` is `io::stdout()`; or splices them
/// in as a macro's or a method's name, [`MacroJoins::invokes`], [`MacroJoins::calls`]), and one that hands what it is
/// handed on to such a macro (`relay!(io, stdout)` is `call!(io, stdout)`), through any
/// number of them.
fn relayed(macros: &[&MacroJoins], does: impl Fn(&MacroJoins) -> bool) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    loop {
        let more: Vec<String> = (macros.iter())
            .filter(|m| !found.contains(&m.name))
            .filter(|m| does(m) || m.hands_on.iter().any(|h| found.contains(h)))
            .map(|m| m.name.clone())
            .collect();
        if more.is_empty() {
            return found;
        }
        found.extend(more);
    }
}

/// The paths each invocation of one of the `joiners` macros could build of the names it is
/// handed (`call!(io, stdout)`): each two of them, either way round, and all of them in order;
/// each with its line and the index of the token its invocation starts at (the scan does not
/// expand the macro, so it takes every path it could make).
fn joined_paths<'t>(
    tokens: &'t [Token],
    joiners: &[String],
) -> Vec<((Vec<&'t str>, usize), usize)> {
    let mut paths = Vec::new();
    for (k, token) in tokens.iter().enumerate() {
        let Some(names) = handed_names(tokens, k).filter(|_| joiners.contains(&token.text)) else {
            continue;
        };
        if names.len() < 2 {
            continue;
        }
        let line = token.line;
        paths.push(((names.clone(), line), k));
        for (a, first) in names.iter().enumerate() {
            for (b, second) in names.iter().enumerate() {
                if a != b {
                    paths.push(((vec![*first, *second], line), k));
                }
            }
        }
    }
    paths
}

/// The tokens of what each invocation of a macro that splices in the names it is handed
/// could make of them (`on!(tool, exec)`): each name invoked as a macro (by one of
/// `names.invokers`) or called as a method (by one of `names.callers`), with no argument the
/// scan can read (`exec ! ( )`, `. exec ( )`), at the invocation's line, for the rules that
/// look for a macro or a method ([`check_source`]).
fn spliced_calls(tokens: &[Token], names: &Names<'_>) -> Vec<Token> {
    let mut calls = Vec::new();
    for (k, token) in tokens.iter().enumerate() {
        let invoked = names.invokers.contains(&token.text);
        let called = names.callers.contains(&token.text);
        let handed = handed_names(tokens, k).filter(|_| invoked || called);
        for name in handed.into_iter().flatten() {
            let invocation = [name, "!", "(", ")"].into_iter().filter(|_| invoked);
            let call = [".", name, "(", ")"].into_iter().filter(|_| called);
            for text in invocation.chain(call) {
                calls.push(Token {
                    text: text.to_owned(),
                    raw: false,
                    line: token.line,
                    offset: token.offset,
                });
            }
        }
    }
    calls
}

/// When `tokens[k]` invokes a macro, the names its invocation hands in, each once (not the
/// macro variables of a macro that hands its own on).
fn handed_names(tokens: &[Token], k: usize) -> Option<Vec<&str>> {
    let at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
    if !(at(k + 1) == "!" && opens(at(k + 2))) {
        return None;
    }
    let mut names: Vec<&str> = Vec::new();
    let arguments = tokens
        .get(k + 3..closing(tokens, k + 2))
        .unwrap_or_default();
    for (previous, argument) in tokens[k + 2..].iter().zip(arguments) {
        let name = argument.text.as_str();
        if is_ident(name) && previous.text != "$" && !names.contains(&name) {
            names.push(name);
        }
    }
    Some(names)
}

/// Renames each macro invoked under an imported name (`use std::include_str as text;` then
/// `text!(…)`, or `crate::m::text!(…)` with that import in `src/m.rs`: the crate's imports in
/// `names.scope` count too, and so do those of the workspace's libraries, `ai_core::say!(…)`
/// after `pub use std::println as say;` in ai-core) to the macro it stands for, through any
/// number of renames, so the rules that look for `include_str!`, `env!` or `println!` see it.
fn unalias_macros(tokens: &mut [Token], names: &Names<'_>) {
    let (_, imports) = paths_as_written(tokens);
    let file = imports
        .iter()
        .filter_map(|i| Some((i.name?.to_owned(), (*i.path.last()?).to_owned())));
    let scopes = std::iter::once(names.scope).chain(names.libraries.iter().map(|(_, s)| *s));
    let crate_wide = scopes
        .flat_map(|scope| &scope.imports)
        .filter_map(|(name, path)| Some((name.clone(), path.last()?.clone())));
    let renames: Vec<(String, String)> = file
        .chain(crate_wide)
        .filter(|(name, real)| name != real)
        .collect();
    for k in 0..tokens.len() {
        let at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
        if !(at(k + 1) == "!" && opens(at(k + 2))) {
            continue;
        }
        for _ in 0..renames.len() {
            match renames.iter().find(|(name, _)| *name == tokens[k].text) {
                Some((_, real)) => tokens[k].text.clone_from(real),
                None => break,
            }
        }
    }
}

/// The paths of [`named_paths`] as written, and what the file's imports bind.
fn paths_as_written(tokens: &[Token]) -> (Vec<(Vec<&str>, usize)>, Vec<Import<'_>>) {
    let written = written(tokens);
    (written.paths, written.imports)
}

/// What [`paths_as_written`] finds, with where each path and import starts.
struct Written<'t> {
    /// Each path, with the line of its last segment.
    paths: Vec<(Vec<&'t str>, usize)>,
    /// The index of the token each path's item starts at (its `use`, for an import's path).
    path_starts: Vec<usize>,
    /// What the file's imports bind.
    imports: Vec<Import<'t>>,
    /// The index of the token each import's item starts at.
    import_starts: Vec<usize>,
    /// Which of `imports` are `extern crate` items (indices into `imports`).
    extern_crates: Vec<usize>,
}

/// [`paths_as_written`], with where each path and import starts, for the module it is in.
fn written(tokens: &[Token]) -> Written<'_> {
    let mut paths = Vec::new();
    let mut imports = Vec::new();
    let (mut path_starts, mut import_starts) = (Vec::new(), Vec::new());
    let mut extern_crates = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let item = i;
        path_starts.resize(paths.len(), item);
        import_starts.resize(imports.len(), item);
        let at = |k: usize| tokens.get(k);
        if is_keyword(&tokens[i], "use") {
            let end = tokens[i..]
                .iter()
                .position(|t| t.text == ";")
                .map_or(tokens.len(), |p| i + p);
            use_tree(&tokens[i + 1..end], &[], &mut paths, &mut imports);
            i = end;
        } else if is_keyword(&tokens[i], "extern")
            && at(i + 1).is_some_and(|t| is_keyword(t, "crate"))
            && let Some(krate) = at(i + 2).filter(|t| is_ident(&t.text))
        {
            // `extern crate std as s;` binds `s` to `std`; `extern crate self as me;` binds
            // `me` to the crate's root, wherever it is read from.
            let alias = at(i + 3)
                .filter(|t| is_keyword(t, "as"))
                .and(at(i + 4))
                .map_or(krate.text.as_str(), |t| t.text.as_str());
            let named = if is_keyword(krate, "self") {
                "crate"
            } else {
                krate.text.as_str()
            };
            paths.push((vec![named], krate.line));
            extern_crates.push(imports.len());
            imports.push(Import {
                name: Some(alias),
                path: vec![named],
            });
            i += 3;
        } else if is_ident(&tokens[i].text) {
            let mut segments = vec![segment_at(tokens, i)];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|t| t.text == "::") {
                // A macro variable (`std::$m`) is a segment the scan cannot know:
                // [`MACRO_SEGMENT`].
                let variable = at(j + 1).is_some_and(|t| t.text == "$")
                    && at(j + 2).is_some_and(|t| is_ident(&t.text));
                if variable {
                    segments.push(MACRO_SEGMENT);
                    j += 3;
                } else if at(j + 1).is_some_and(|t| is_ident(&t.text)) {
                    segments.push(tokens[j + 1].text.as_str());
                    j += 2;
                } else {
                    break;
                }
            }
            paths.push((segments, tokens[j - 1].line));
            i = j;
        } else {
            i += 1;
        }
        path_starts.resize(paths.len(), item);
        import_starts.resize(imports.len(), item);
    }
    Written {
        paths,
        path_starts,
        imports,
        import_starts,
        extern_crates,
    }
}

/// The inline modules (`mod a { … }`) each token is in, outermost first; `None` for a token
/// in a `macro_rules!` body, whose items land wherever the macro is invoked.
fn inline_modules(tokens: &[Token]) -> Vec<Option<Vec<String>>> {
    // What each open bracket opened: a module's body (its name), a macro's (`None`), or
    // neither.
    let mut open: Vec<Option<Option<&str>>> = Vec::new();
    let mut out = Vec::with_capacity(tokens.len());
    let at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
    for (k, token) in tokens.iter().enumerate() {
        match token.text.as_str() {
            "{" | "(" | "[" => {
                let module = k >= 2
                    && token.text == "{"
                    && is_keyword(&tokens[k - 2], "mod")
                    && is_ident(&tokens[k - 1].text);
                let macro_body = k >= 3 && at(k - 2) == "!" && at(k - 3) == "macro_rules";
                open.push(if module {
                    Some(Some(tokens[k - 1].text.as_str()))
                } else if macro_body {
                    Some(None)
                } else {
                    None
                });
            }
            "}" | ")" | "]" => {
                open.pop();
            }
            _ => {}
        }
        let mut modules = Vec::new();
        let mut in_macro = false;
        for opened in open.iter().flatten() {
            match opened {
                Some(name) => modules.push((*name).to_owned()),
                None => in_macro = true,
            }
        }
        out.push((!in_macro).then_some(modules));
    }
    out
}

/// The module a file of a crate's `src/` is, as its path tells it (`src/a/b.rs` and
/// `src/a/b/mod.rs` are `a::b`; `src/lib.rs` and `src/main.rs` the root); `None` for a file
/// of `src/bin/`, the root of a crate of its own.
fn file_module(path: &str) -> Option<Vec<String>> {
    let within = path.split_once("/src/")?.1.strip_suffix(".rs")?;
    if within.starts_with("bin/") {
        return None;
    }
    let mut module: Vec<String> = within.split('/').map(str::to_owned).collect();
    if module.last().is_some_and(|last| last == "mod") || matches!(within, "lib" | "main") {
        module.pop();
    }
    Some(module)
}

/// What a `use` or `extern crate` item brings into scope, file-wide (a scan does not know
/// scopes, so an import inside a function counts everywhere, which can only add findings).
struct Import<'t> {
    /// The name it binds (`fs` for `use std::fs`, `s` for `use std as s`), or `None` for a
    /// glob (`use std::*`).
    name: Option<&'t str>,
    /// The path that name stands for, or the glob's parent.
    path: Vec<&'t str>,
}

/// Expands one `use` tree (the tokens between `use` and `;`) into its leaf paths and the
/// imports they bind.
fn use_tree<'t>(
    tokens: &'t [Token],
    prefix: &[&'t str],
    out: &mut Vec<(Vec<&'t str>, usize)>,
    imports: &mut Vec<Import<'t>>,
) {
    let mut segments = prefix.to_vec();
    let mut line = tokens.first().map_or(0, |t| t.line);
    let mut name = None;
    let mut glob = false;
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
                        use_tree(&tokens[start..j], &segments, out, imports);
                        return;
                    }
                    "}" => depth -= 1,
                    "," if depth == 0 => {
                        use_tree(&tokens[start..j], &segments, out, imports);
                        start = j + 1;
                    }
                    _ => {}
                }
            }
            use_tree(&tokens[start..], &segments, out, imports);
            return;
        }
        if is_keyword(&tokens[i], "as") {
            // `as _` binds nothing.
            name = tokens
                .get(i + 1)
                .map(|t| t.text.as_str())
                .filter(|n| *n != "_");
            break;
        }
        glob |= text == "*";
        if is_ident(text) && !is_keyword(&tokens[i], "self") {
            segments.push(segment_at(tokens, i));
            line = tokens[i].line;
            name = Some(text);
        }
        i += 1;
    }
    if tokens.is_empty() || segments.is_empty() {
        return;
    }
    if glob {
        imports.push(Import {
            name: None,
            path: segments.clone(),
        });
    } else if name.is_some() {
        imports.push(Import {
            name,
            path: segments.clone(),
        });
    }
    // The name a `use` brings is used past it, so a path ending in a macro variable goes on
    // (`use $k::$m;`, then `fs::read` where `imp!(std, fs)` is invoked): see [`contains_path`].
    if segments.last() == Some(&MACRO_SEGMENT) {
        segments.push(MACRO_SEGMENT);
    }
    out.push((segments, line));
}

/// Most spellings followed for one path beyond the file's number of imports (`use a::a;`
/// would expand forever, while a chain of aliases, `use std as a0; use a0 as a1;` …, uses each
/// import once at most).
const MAX_SPELLINGS: usize = 16;

/// `path` as written and as the file's imports spell it: its first segment replaced by the
/// path an import of that name stands for, repeatedly (`use std as s; use s::os as o;` then
/// `o::unix::fs`), and each of those under each glob import's parent (`use std::*;` then
/// `fs::read`). A lone name is read under the glob imports' parents only (`use std::io::*;`
/// then `stdin()`): an import of that name already names its path in full.
fn spellings<'t>(path: &[&'t str], imports: &[Import<'t>]) -> Vec<Vec<&'t str>> {
    let by_name = |path: &[&'t str]| {
        let mut out = vec![path.to_vec()];
        let mut k = 0;
        while k < out.len() && out.len() < MAX_SPELLINGS + imports.len() {
            let first = out[k][0];
            for import in imports.iter().filter(|i| i.name == Some(first)) {
                let spelled = [&import.path[..], &out[k][1..]].concat();
                if !out.contains(&spelled) {
                    out.push(spelled);
                }
            }
            k += 1;
        }
        out
    };
    let own = if path.len() < 2 {
        vec![path.to_vec()]
    } else {
        by_name(path)
    };
    let mut out = own.clone();
    for glob in imports.iter().filter(|i| i.name.is_none()) {
        for parent in by_name(&glob.path) {
            out.extend(own.iter().map(|p| [&parent[..], &p[..]].concat()));
        }
    }
    out
}

/// Whether `token` is the keyword `word` (not a raw identifier spelling it, like `r#use`).
fn is_keyword(token: &Token, word: &str) -> bool {
    !token.raw && token.text == word
}

fn is_ident(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// A `struct`, `enum` or `union` with a body, or a type alias, for NO_SECRET_IN_CONTEXT.
#[derive(Debug, Clone)]
struct TypeDef {
    path: String,
    name: String,
    members: Vec<Member>,
    /// For `type X = Arc<Y>;`, the identifiers on the right (`Arc`, `Y`); empty otherwise.
    alias_of: Vec<String>,
    /// The `macro_rules!` whose rules make it of what an invocation hands in (a macro variable,
    /// [`MACRO_SEGMENT`], in its name, a member's name or a type it names: `struct $n`), so
    /// that it is a type only where the macro is invoked ([`made_types`]).
    made_by: Option<String>,
}

/// An invocation of a macro, with the names it hands in.
struct Invocation {
    /// The file it is in.
    path: String,
    /// Its line.
    line: usize,
    /// The macro invoked.
    macro_name: String,
    /// The names it hands in, each once.
    names: Vec<String>,
}

impl Invocation {
    /// What `name`, written in what the macro makes, is at this invocation: each name it hands
    /// in for a macro variable ([`MACRO_SEGMENT`]), else `name` itself.
    fn each(&self, name: &String) -> Vec<String> {
        if name == MACRO_SEGMENT {
            self.names.clone()
        } else {
            vec![name.clone()]
        }
    }
}

/// A named field, an enum variant, or a tuple struct's fields (named `0`).
#[derive(Debug, Clone)]
struct Member {
    name: String,
    line: usize,
    /// The identifiers of its type or payload, to follow into the crate's own types.
    type_names: Vec<String>,
    /// Whether its values have no names of their own (a tuple struct's fields, a variant's
    /// tuple payload), so their types are what names them.
    positional: bool,
}

/// Every `struct`, `enum` and `union` of a file that has a `{…}` or `(…)` body, with its
/// members, and every type alias `type X = …;`; a macro variable in one (`struct $n`) is
/// [`MACRO_SEGMENT`], and the type is the macro's to make ([`TypeDef::made_by`]).
fn type_defs(path: &str, tokens: &[Token]) -> Vec<TypeDef> {
    let at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
    // The names of a span of tokens, a macro variable as `$`.
    let names = |span: std::ops::Range<usize>| -> Vec<String> {
        span.filter(|&k| is_ident(at(k)))
            .map(|k| segment_at(tokens, k).to_owned())
            .collect()
    };
    let mut defs = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let is_enum = is_keyword(token, "enum");
        let is_alias = is_keyword(token, "type");
        if !is_enum && !is_alias && !["struct", "union"].iter().any(|k| is_keyword(token, k)) {
            continue;
        }
        let name_at = i + 1 + usize::from(at(i + 1) == "$");
        if !is_ident(at(name_at)) {
            continue;
        }
        let mut def = TypeDef {
            path: path.to_owned(),
            name: segment_at(tokens, name_at).to_owned(),
            members: Vec::new(),
            alias_of: Vec::new(),
            made_by: None,
        };
        if is_alias {
            // `type X<T> = Y<T>;`, not an associated type's declaration (`type Item;`).
            let end = tokens[i..]
                .iter()
                .position(|t| t.text == ";")
                .map_or(tokens.len(), |p| i + p);
            let Some(eq) = tokens[i..end].iter().position(|t| t.text == "=") else {
                continue;
            };
            def.alias_of = names(i + eq + 1..end);
        } else {
            let Some(members) = body_members(tokens, name_at + 1, is_enum) else {
                continue;
            };
            def.members = members;
        }
        let made = def.name == MACRO_SEGMENT
            || def.alias_of.iter().any(|n| n == MACRO_SEGMENT)
            || (def.members.iter()).any(|m| {
                m.name == MACRO_SEGMENT || m.type_names.iter().any(|n| n == MACRO_SEGMENT)
            });
        if made {
            def.made_by = macro_around(tokens, i);
        }
        defs.push(def);
    }
    defs
}

/// The innermost `macro_rules!` whose rules hold `tokens[i]`.
fn macro_around(tokens: &[Token], i: usize) -> Option<String> {
    let at = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
    let holds = |k: usize| {
        is_keyword(&tokens[k], "macro_rules")
            && at(k + 1) == "!"
            && is_ident(at(k + 2))
            && i < closing(tokens, k + 3)
    };
    (0..i).rfind(|&k| holds(k)).map(|k| at(k + 2).to_owned())
}

/// The members of the type whose name ends before `tokens[after]`: `None` for one without a
/// body (a unit struct).
fn body_members(tokens: &[Token], after: usize, is_enum: bool) -> Option<Vec<Member>> {
    // The body: past the generics (whose bounds may hold `Fn(u8) -> u8`), a `(` (tuple
    // struct), or else the first `{` (past any `where` clause) before a `;` (unit struct).
    let after = match tokens.get(after) {
        Some(t) if t.text == "<" => closing_angle(tokens, after) + 1,
        _ => after,
    };
    let open = if tokens.get(after).is_some_and(|t| t.text == "(") {
        after
    } else {
        let rest = tokens.get(after..)?;
        let end = after + (rest.iter()).position(|t| matches!(t.text.as_str(), "{" | ";"))?;
        (tokens[end].text == "{").then_some(end)?
    };
    let body = &tokens[open + 1..closing(tokens, open)];
    if tokens[open].text == "(" {
        let type_names = (0..body.len()).filter(|&k| is_ident(&body[k].text));
        return Some(vec![Member {
            name: "0".into(),
            line: tokens[open].line,
            type_names: type_names.map(|k| segment_at(body, k).to_owned()).collect(),
            positional: true,
        }]);
    }
    Some(members(body, is_enum))
}

/// The index of the `>` that closes the `<` at `open` (or the end); the `>` of `->` closes
/// nothing.
fn closing_angle(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0_usize;
    for (k, token) in tokens.iter().enumerate().skip(open) {
        match token.text.as_str() {
            "<" => depth += 1,
            ">" if tokens[k - 1].text != "-" => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The index of the bracket that closes the one at `open` (or the end); when `open` is no
/// opener, the first closer with nothing open after it (`open` itself if it is a closer).
fn closing(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0_usize;
    for (k, token) in tokens.iter().enumerate().skip(open) {
        match token.text.as_str() {
            "{" | "(" | "[" => depth += 1,
            "}" | ")" | "]" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The members of a `{…}` body: each `name :` outside `(…)` and `[…]` (attributes, `pub(…)`),
/// which covers the fields of structs and of enum variants, and for an enum each top-level
/// variant. A member's type names are the identifiers that follow it, up to the next member.
fn members(body: &[Token], is_enum: bool) -> Vec<Member> {
    let mut members: Vec<Member> = Vec::new();
    let (mut braces, mut groups) = (0_usize, 0_usize);
    for (k, token) in body.iter().enumerate() {
        let text = token.text.as_str();
        // A macro variable (`$f`) is the name `$`, and what comes before it comes before `$`.
        let name = if is_ident(text) {
            segment_at(body, k)
        } else {
            ""
        };
        let first = k - usize::from(name == MACRO_SEGMENT);
        let next = body.get(k + 1).map_or("", |t| t.text.as_str());
        let previous = first.checked_sub(1).map_or("{", |p| body[p].text.as_str());
        let is_field = next == ":" && groups == 0;
        let is_variant =
            is_enum && braces == 0 && groups == 0 && matches!(previous, "{" | "," | "]");
        if is_ident(text) && (is_field || is_variant) {
            members.push(Member {
                name: name.to_owned(),
                line: token.line,
                type_names: Vec::new(),
                positional: !is_field,
            });
        } else if is_ident(text)
            && let Some(member) = members.last_mut()
        {
            member.type_names.push(name.to_owned());
        }
        match text {
            "{" => braces += 1,
            "}" => braces = braces.saturating_sub(1),
            "(" | "[" => groups += 1,
            ")" | "]" => groups = groups.saturating_sub(1),
            _ => {}
        }
    }
    members
}

/// Why `name` looks like a secret: one of [`SECRET_WORDS`] in it, or `key` as its last word in
/// any case (`key`, `openai_key`, `OPENAI_KEY`, `signingKey`, `HMACKey`) unless it is one of
/// [`NOT_SECRET_KEYS`]. [`TOKEN_COUNTS`] are not secrets.
fn secret_word(name: &str) -> Option<&'static str> {
    let flat = name.replace('_', "").to_ascii_lowercase();
    let words = TOKEN_COUNTS
        .iter()
        .fold(flat.clone(), |rest, count| rest.replace(count, " "));
    if let Some(word) = SECRET_WORDS.iter().find(|w| words.contains(**w)) {
        return Some(word);
    }
    let ends_in_key = last_word(name).eq_ignore_ascii_case("key");
    (ends_in_key && !NOT_SECRET_KEYS.contains(&flat.as_str())).then_some("key")
}

/// The last word of a snake, camel or shouty name: `KEY` of `OPENAI_KEY` and of `hmacKEY`,
/// `Key` of `HMACKey`, all of `monkey`.
fn last_word(name: &str) -> &str {
    let word = name.rsplit('_').next().unwrap_or(name);
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    // A word starts at an upper-case letter after a lower-case one (`hmac|KEY`), or before
    // one (`HMAC|Key`).
    let start = (1..chars.len())
        .rev()
        .find(|&k| {
            let (before, here) = (chars[k - 1].1, chars[k].1);
            let after = chars.get(k + 1).map(|&(_, c)| c);
            here.is_uppercase() && (before.is_lowercase() || after.is_some_and(char::is_lowercase))
        })
        .map_or(0, |k| chars[k].0);
    &word[start..]
}

/// Why `member` looks like a secret: its name ([`secret_word`]), or, for a positional member,
/// the name of a type it holds (`AuthContext(SecretString)`).
fn secret_member(member: &Member) -> Option<String> {
    if let Some(word) = secret_word(&member.name) {
        return Some(format!("is named like a secret ({word})"));
    }
    let mut types = member.type_names.iter().filter(|_| member.positional);
    types.find_map(|name| {
        secret_word(name).map(|word| format!("holds a type named like a secret (`{name}`: {word})"))
    })
}

/// The types of `context`'s crate that `member` holds, at any depth (`auth: Auth` with
/// `Auth { inner: Creds }` holds `Auth` and `Creds`), each once; other contexts are checked on
/// their own.
fn held_types<'t>(types: &'t [TypeDef], context: &TypeDef, member: &'t Member) -> Vec<&'t TypeDef> {
    let mut held: Vec<&TypeDef> = Vec::new();
    let mut names: Vec<&String> = member.type_names.iter().collect();
    while let Some(name) = names.pop() {
        for t in types {
            let holds = &t.name == name
                && !is_context(&t.name)
                && crate_dir(&t.path) == crate_dir(&context.path)
                && !held.iter().any(|h| std::ptr::eq(*h, t));
            if holds {
                held.push(t);
                names.extend(t.members.iter().flat_map(|m| &m.type_names));
            }
        }
    }
    held
}

/// The types macros make where they are invoked: each type of `types` that a macro makes
/// ([`TypeDef::made_by`]), for each invocation of that macro or of one that hands what it is
/// handed on to it ([`MacroJoins::hands_on`]), with each macro variable in its name, a member's
/// name or a type it names taken for each name the invocation hands in. A made type is the
/// invocation's, its members at the invocation's line.
fn made_types(
    types: &[TypeDef],
    invocations: &[Invocation],
    macros: &[&MacroJoins],
) -> Vec<TypeDef> {
    let templates: Vec<(&str, &TypeDef)> = (types.iter())
        .filter_map(|t| Some((t.made_by.as_deref()?, t)))
        .collect();
    let mut made = Vec::new();
    for (invocation, template) in expansions(&templates, invocations, macros) {
        let each = |name: &String| invocation.each(name);
        let members: Vec<Member> = (template.members.iter())
            .flat_map(|member| {
                each(&member.name).into_iter().map(|name| Member {
                    name,
                    line: invocation.line,
                    type_names: member.type_names.iter().flat_map(each).collect(),
                    positional: member.positional,
                })
            })
            .collect();
        for name in each(&template.name) {
            made.push(TypeDef {
                path: invocation.path.clone(),
                name,
                members: members.clone(),
                alias_of: template.alias_of.iter().flat_map(each).collect(),
                made_by: None,
            });
        }
    }
    made
}

/// Each invocation, with each of `templates` (a type or an item a macro makes of what it is
/// handed, after that macro's name) it makes: those of the macro it invokes and of the macros
/// that one hands what it is handed on to ([`reached`]). The templates are few; the
/// invocations are every macro call of the repository.
fn expansions<'a, T>(
    templates: &[(&str, &'a T)],
    invocations: &'a [Invocation],
    macros: &[&MacroJoins],
) -> Vec<(&'a Invocation, &'a T)> {
    let mut expansions = Vec::new();
    if templates.is_empty() {
        return expansions;
    }
    for invocation in invocations {
        let reached = reached(macros, &invocation.macro_name);
        for (_, template) in templates.iter().filter(|(m, _)| reached.contains(m)) {
            expansions.push((invocation, *template));
        }
    }
    expansions
}

/// The macros whose rules an invocation of `name` runs: it, and those it hands what it is
/// handed on to ([`MacroJoins::hands_on`]), through any number of them.
fn reached<'m>(macros: &[&'m MacroJoins], name: &'m str) -> Vec<&'m str> {
    let mut reached = vec![name];
    let mut k = 0;
    while let Some(&next) = reached.get(k) {
        for on in (macros.iter().filter(|m| m.name == next)).flat_map(|m| &m.hands_on) {
            if !reached.contains(&on.as_str()) {
                reached.push(on);
            }
        }
        k += 1;
    }
    reached
}

/// Whether a type named `name` is a context type (`ToolInvocationContext`, `RunCtx`).
fn is_context(name: &str) -> bool {
    name.ends_with("Context") || name.ends_with("Ctx")
}

/// NO_SECRET_IN_CONTEXT: the members of every context type ([`is_context`], or an alias of one)
/// and those of each type of the same crate that a member holds ([`held_types`]:
/// `connection: ConnectionAuth`, and what `ConnectionAuth` holds in turn).
fn no_secret_in_context(types: &[TypeDef], seen: &mut Seen, found: &mut Vec<Finding>) {
    const ADVICE: &str = "keep a reference and resolve it through a capability";
    // A context alias (`type AgentContext = Arc<Session>;`) is checked as the types it names
    // in its crate, under its own name.
    let aliased: Vec<TypeDef> = types
        .iter()
        .filter(|alias| is_context(&alias.name) && !alias.alias_of.is_empty())
        .flat_map(|alias| {
            types
                .iter()
                .filter(|t| {
                    t.alias_of.is_empty()
                        && crate_dir(&t.path) == crate_dir(&alias.path)
                        && alias.alias_of.contains(&t.name)
                })
                .map(|t| TypeDef {
                    name: alias.name.clone(),
                    ..t.clone()
                })
        })
        .collect();
    let contexts = types
        .iter()
        .filter(|t| is_context(&t.name) && t.alias_of.is_empty())
        .chain(&aliased);
    for context in contexts {
        seen.context_structs += 1;
        for member in &context.members {
            seen.context_fields += usize::from(is_ident(&member.name));
            if let Some(why) = secret_member(member) {
                found.push((
                    context.path.clone(),
                    member.line,
                    "NO_SECRET_IN_CONTEXT",
                    format!("`{}.{}` {why}; {ADVICE}", context.name, member.name),
                ));
            }
            for held in held_types(types, context, member) {
                for inner in &held.members {
                    if let Some(why) = secret_member(inner) {
                        found.push((
                            held.path.clone(),
                            inner.line,
                            "NO_SECRET_IN_CONTEXT",
                            format!(
                                "`{}.{}` {why} and `{}.{}` holds it; {ADVICE}",
                                held.name, inner.name, context.name, member.name
                            ),
                        ));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

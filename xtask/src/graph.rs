//! The dependency graph rules, read from `cargo metadata --format-version 1 --no-deps`.
//!
//! - `ARCH_LAYERING`: every internal edge (a dependency with a `path`, or on a workspace crate
//!   however it is reached: `git`, a registry; normal, dev and build edges alike) must be in
//!   the `ALLOWED` table, copied from DESIGN.md and ARCHITECTURE.md.
//!   A workspace package without a row is itself a violation: new crates get a row here and in
//!   the design. Violations name the edge: `cogni-ai-core -> cogni-ai-tools: ARCH_LAYERING: …`.
//! - `ARCH_SOURCE_PLACE`: each package's manifest is in its folder of the `ALLOWED` table, and
//!   a package under `crates/` compiles its lib and bins from its `src/`, where the source
//!   rules look (tests, benches, examples and build scripts may live elsewhere).
//! - `ARCH_LINTS`: every package's manifest inherits the workspace lints (`[lints]` with
//!   `workspace = true`), and the root manifest's forbid unsafe code (`unsafe_code =
//!   "forbid"`), which no `--cap-lints`, `--force-warn` or `@file` in `.cargo/config.toml` (or
//!   a profile's `rustflags`) lowers: a crate that dropped them could reach the OS through
//!   `unsafe` calls no source rule reads.
//!   Nor does an alias there stand in for a subcommand `cargo xtask ci` runs (`clippy`, also
//!   through `[env]`'s `CARGO_ALIAS_CLIPPY`), nor a setting run a program in the compiler's
//!   place (`build.rustc-wrapper`, or an `[env]` `PATH` finding `rustc` where it chose), nor
//!   `[env]` swap a step's tool (`RUSTFMT`, `CLIPPY_CONF_DIR`), nor an `include` load a file
//!   these checks do not read, nor a runner run the test binaries
//!   (`target.<triple>.runner`, or `CARGO_TARGET_<TRIPLE>_RUNNER` in `[env]`). Nor does a
//!   toolchain file (`rust-toolchain.toml`, `rust-toolchain`) point rustup at a toolchain
//!   folder (`[toolchain] path = …`).
//! - `ARCH_PATCHED_DEP`: the root manifest has no `[patch]` or `[replace]`, and the
//!   repository's Cargo configuration no `[patch]`, `paths` or `directory` source, and no
//!   dependency comes from a git repository or another registry than crates.io: each compiles
//!   other code under a dependency's name, which the allowlists vet by name only and no source
//!   rule reads.
//!
//!   `ARCH_LINTS` and `ARCH_PATCHED_DEP` read Cargo's files as TOML (the `toml` crate), so a
//!   value over several lines, an inline table in another or text in a string neither hides
//!   nor fakes a setting, and a file that is not TOML is a finding of its own, naming its line.
//! - `ARCH_BANNED_DEP`: some external crates are banned per package as normal dependencies
//!   (a JSON Schema library in ai-core and the wire codecs, an HTTP stack in the sans-IO
//!   codecs), and the crates that read the environment (`dotenv`, `dotenvy`, `envy`) in every
//!   package but bootstrap and xtask.
//! - `ARCH_EXTERNAL_DEP`: the packages that do no IO of their own (ai-core, ai-tools,
//!   wire-openai, wire-ui, graph), and adapters, use as normal dependencies only the external
//!   crates of their `EXTERNAL` allowlist, and of tokio (and tokio-util, whose features turn on
//!   tokio's) and jsonschema only the features listed there, whether a dependency entry (its
//!   default features too, unless it sets `default-features = false`) or the package's own
//!   `[features]` table (`io = ["tokio/fs"]`) turns them on; a new crate or feature is a
//!   design decision recorded in that table with its reason. On the real tree an entry no
//!   longer used is a finding too, so the lists stay exactly what the packages use.
//! - `NO_ENV`: no package under `crates/` but bootstrap has a build script, which reads the
//!   build's environment and can hand it to the crate as a variable `env!` may read
//!   (`cargo:rustc-env=CARGO_PKG_DESCRIPTION=…` overrides Cargo's).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::sources::{Library, RenamedDep};

/// Each workspace package: its folder (where the source rules of `sources.rs` look for it),
/// and which internal packages it may depend on (`*`: all), as DESIGN.md lists them. Dev and
/// build edges count. A package missing here is itself a violation.
const ALLOWED: &[(&str, &str, &[&str])] = &[
    ("cogni-ai-core", "crates/ai-core", &[]),
    ("cogni-ai-tools", "crates/ai-tools", &["cogni-ai-core"]),
    (
        "cogni-wire-openai",
        "crates/wire-openai",
        &["cogni-ai-core"],
    ),
    ("cogni-wire-ui", "crates/wire-ui", &["cogni-ai-core"]),
    (
        "cogni-graph",
        "crates/graph",
        &["cogni-ai-core", "cogni-ai-tools"],
    ),
    (
        "cogni-adapters",
        "crates/adapters",
        &["cogni-ai-core", "cogni-wire-openai"],
    ),
    ("cogni-bootstrap", "crates/bootstrap", &["*"]),
    ("cogni-tests", "tests", &["*"]),
    ("xtask", "xtask", &[]),
];

/// Target kinds that are not part of what a package ships (the source rules skip them).
const NOT_SHIPPED: &[&str] = &["test", "bench", "example", "custom-build"];

/// The JSON Schema libraries (package names).
const SCHEMA_CRATES: &[&str] = &[
    "schemars",
    "jsonschema",
    "jsonschema-valid",
    "boon",
    "valico",
];

/// External crates a package must not use as normal dependencies, and why.
const BANNED: &[(&str, &[&[&str]], &str)] = &[
    (
        "cogni-ai-core",
        &[SCHEMA_CRATES, &["reqwest", "axum"]],
        "ai-core names no schema library and does no IO",
    ),
    (
        "cogni-wire-openai",
        &[SCHEMA_CRATES, &["tokio", "reqwest", "hyper"]],
        "wire codecs are sans-IO and schema-free",
    ),
    (
        "cogni-wire-ui",
        &[SCHEMA_CRATES, &["tokio", "reqwest", "hyper", "axum"]],
        "UI stream encoders are sans-IO and schema-free",
    ),
    (
        "cogni-ai-tools",
        &[&["reqwest", "axum"]],
        "tools do IO only through capabilities",
    ),
    (
        "cogni-graph",
        &[&["reqwest", "axum"]],
        "the loop does IO only through ports",
    ),
];

/// One external crate a package that does no IO of its own may use as a normal dependency.
struct External {
    /// The crate's package name (`tokio`, not a `rename`).
    krate: &'static str,
    /// The features the package may turn on (`None`: any, for a crate whose features do no
    /// IO); a crate whose features reach the OS (tokio's `fs`, `net`, `process`, …) lists them.
    features: Option<&'static [&'static str]>,
    /// Why the package needs it: adding a row is a design decision, recorded here.
    why: &'static str,
}

/// Shorthand for an [`External`] row.
const fn ext(
    krate: &'static str,
    features: Option<&'static [&'static str]>,
    why: &'static str,
) -> External {
    External {
        krate,
        features,
        why,
    }
}

/// The packages that do no IO of their own, and adapters, which does the ports' IO, each with
/// the only external crates it may use as normal dependencies (dev and build dependencies are
/// not checked here), and the rule they keep.
/// Anything else is `ARCH_EXTERNAL_DEP`, so an IO crate no list bans (`ureq`, `tempfile`,
/// `rusqlite`, tokio's `fs`) cannot slip into the first, nor a crate that reads the
/// environment (`config`) into adapters: adding one is a decision recorded in this table.
const EXTERNAL: &[(&str, &[External], &str)] = &[
    (
        "cogni-ai-core",
        &[
            ext("async-trait", None, "the async port traits"),
            ext("foldhash", None, "the runner's tool map, breaker buckets"),
            ext("serde", None, "(de)serializes its types"),
            ext("serde_json", None, "JSON arguments, results and events"),
            ext("sha2", None, "content digests"),
            ext("thiserror", None, "its error types"),
            ext(
                "tokio",
                Some(&["time", "macros"]),
                "timeouts and `select!`; no fs, net, process, io or signal",
            ),
            ext(
                "tokio-util",
                Some(&[]),
                "`CancellationToken`; its features turn on tokio's (`net`, `io-util`, `rt`)",
            ),
            ext("toml", None, "reads its settings from text it is given"),
            ext(
                "tracing",
                None,
                "spans and events; the subscriber is bootstrap's",
            ),
        ],
        "ai-core does no IO",
    ),
    (
        "cogni-ai-tools",
        &[
            ext("async-trait", None, "the async tool traits"),
            ext(
                "jsonschema",
                Some(&[]),
                "validates arguments and results; its features `resolve-http` and `resolve-file`, on by default, fetch a schema's `$ref`s",
            ),
            ext("schemars", None, "derives a contract's JSON Schema"),
            ext(
                "serde",
                None,
                "(de)serializes a contract's input and output",
            ),
            ext("serde_json", None, "JSON arguments and results"),
            ext(
                "serde_path_to_error",
                None,
                "names where serde stopped reading a call's arguments; it does no IO",
            ),
            ext("thiserror", None, "its error types"),
        ],
        "tools do IO only through capabilities",
    ),
    (
        "cogni-wire-openai",
        &[
            ext("memchr", None, "line splitting in the SSE parser"),
            ext("serde", None, "(de)serializes the wire types"),
            ext("serde_json", None, "the wire format"),
            ext("thiserror", None, "its error types"),
        ],
        "wire codecs are sans-IO",
    ),
    (
        "cogni-wire-ui",
        &[
            ext("serde", None, "serializes the UI events"),
            ext("serde_json", None, "the stream format"),
        ],
        "UI stream encoders are sans-IO",
    ),
    (
        "cogni-graph",
        &[
            ext("async-trait", None, "the async port traits"),
            ext("serde", None, "(de)serializes the loop's state"),
            ext("serde_json", None, "JSON arguments and results"),
            ext("thiserror", None, "its error types"),
            ext(
                "tokio",
                Some(&["sync", "time", "macros", "rt"]),
                "the driver's tasks, channels, timeouts and `select!`; no fs, net, process, io or signal",
            ),
            ext(
                "tracing",
                None,
                "spans and events; the subscriber is bootstrap's",
            ),
        ],
        "the loop does IO only through ports",
    ),
    (
        "cogni-adapters",
        &[
            ext("async-trait", None, "the async port traits it implements"),
            ext(
                "base64",
                None,
                "scrubs a base URL's `Basic` credentials from errors",
            ),
            ext(
                "cap-std",
                None,
                "the workspace's sandbox: every file operation beneath one directory handle",
            ),
            ext("httpdate", None, "`Retry-After` as an HTTP-date"),
            ext(
                "memchr",
                None,
                "finds secrets in an error message in linear time",
            ),
            ext("reqwest", None, "the OpenAI-compatible HTTP client"),
            ext("rusqlite", None, "the SQLite thread, run and blob stores"),
            ext(
                "rustix",
                None,
                "the workspace's open flags, folder fsync and error numbers",
            ),
            ext("rustls", None, "TLS over ring, which reqwest is handed"),
            ext(
                "rustls-platform-verifier",
                None,
                "the platform's certificate roots",
            ),
            ext("serde", None, "(de)serializes what the stores keep"),
            ext("serde_json", None, "the stored JSON and the HTTP bodies"),
            ext("thiserror", None, "its error types"),
            ext(
                "tokio",
                None,
                "files, blocking tasks, timeouts and `select!`",
            ),
            ext(
                "tracing",
                None,
                "spans and events; the subscriber is bootstrap's",
            ),
        ],
        "adapters does the ports' IO with the crates recorded here and reads no environment",
    ),
];

/// Crates that read the environment (`.env` files, variables into structs): normal
/// dependencies of [`ENV_READERS`] only.
const ENV_CRATES: &[&str] = &["dotenv", "dotenvy", "envy"];
/// The packages that may read the environment.
const ENV_READERS: &[&str] = &["cogni-bootstrap", "xtask"];

/// `cargo metadata --format-version 1 --no-deps` of the repository.
pub(crate) fn cargo_metadata(root: &Path) -> anyhow::Result<Value> {
    let cargo = crate::cargo();
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()
        .context("cannot run cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).context("cargo metadata printed invalid JSON")
}

/// Checks every package of `metadata`; returns one line per violation.
pub(crate) fn check(metadata: &Value) -> anyhow::Result<Vec<String>> {
    let packages = metadata["packages"]
        .as_array()
        .context("cargo metadata has no packages")?;
    // The workspace's crates, however a manifest reaches them (`path`, `git` or a registry).
    let internal: Vec<&str> = packages
        .iter()
        .filter_map(|p| p["name"].as_str())
        .chain(ALLOWED.iter().map(|(name, _, _)| *name))
        .collect();
    let mut violations = Vec::new();
    for package in packages {
        let name = package["name"].as_str().unwrap_or_default();
        let Some((_, folder, allowed)) = ALLOWED.iter().find(|(n, _, _)| *n == name) else {
            violations.push(format!(
                "{name}: ARCH_LAYERING: unknown workspace package; add its row to the ALLOWED table and ARCHITECTURE.md"
            ));
            continue;
        };
        source_place(metadata, package, folder, &mut violations);
        build_script(metadata, package, folder, &mut violations);
        let banned = BANNED.iter().find(|(n, _, _)| *n == name);
        let external = EXTERNAL.iter().find(|(n, _, _)| *n == name);
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            let kind = dep["kind"].as_str().unwrap_or("normal");
            if dep.get("path").is_some_and(|p| !p.is_null()) || internal.contains(&dep_name) {
                if !(allowed.contains(&"*") || allowed.contains(&dep_name)) {
                    violations.push(format!(
                        "{name} -> {dep_name}: ARCH_LAYERING: {kind} dependency not allowed (allowed: {})",
                        if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") }
                    ));
                }
            } else if kind == "normal"
                && let Some((_, lists, why)) = banned
                && lists.iter().any(|crates| crates.contains(&dep_name))
            {
                violations.push(format!("{name} -> {dep_name}: ARCH_BANNED_DEP: {why}"));
            } else if kind == "normal"
                && ENV_CRATES.contains(&dep_name)
                && !ENV_READERS.contains(&name)
            {
                violations.push(format!(
                    "{name} -> {dep_name}: ARCH_BANNED_DEP: the environment is read only in cogni-bootstrap (and xtask)"
                ));
            } else if kind == "normal"
                && let Some((_, allowed, rule)) = external
            {
                external_dep(name, dep, allowed, rule, &mut violations);
            }
        }
        if let Some((_, allowed, _)) = external {
            forwarded_features(package, allowed, &mut violations);
        }
    }
    Ok(violations)
}

/// What an `ARCH_EXTERNAL_DEP` finding asks of whoever adds a crate or a feature.
const RECORD: &str = "adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs";

/// ARCH_EXTERNAL_DEP: the normal dependency `dep` of the package `name` is on its `allowed`
/// list, and turns on only the features listed there, its default ones included (`default`).
fn external_dep(
    name: &str,
    dep: &Value,
    allowed: &[External],
    rule: &str,
    violations: &mut Vec<String>,
) {
    let dep_name = dep["name"].as_str().unwrap_or_default();
    let Some(entry) = allowed.iter().find(|e| e.krate == dep_name) else {
        violations.push(format!(
            "{name} -> {dep_name}: ARCH_EXTERNAL_DEP: not on {name}'s allowlist of external crates ({rule}); {RECORD}"
        ));
        return;
    };
    for feature in dep["features"].as_array().into_iter().flatten() {
        let feature = feature.as_str().unwrap_or_default();
        if let Some(finding) =
            feature_finding(name, entry, feature, &format!("feature `{feature}` is"))
        {
            violations.push(finding);
        }
    }
    // Default features are turned on unless the entry says otherwise, and the check cannot
    // see what they are (jsonschema's fetch a schema's `$ref`s).
    let what = "its default features (no `default-features = false`) are";
    if dep["uses_default_features"].as_bool() != Some(false)
        && let Some(finding) = feature_finding(name, entry, "default", what)
    {
        violations.push(finding);
    }
}

/// ARCH_EXTERNAL_DEP through the package's own `[features]` table: `io = ["tokio/fs"]` (or
/// `"rt?/fs"` for a renamed, optional tokio) turns on a feature no dependency entry lists.
fn forwarded_features(package: &Value, allowed: &[External], violations: &mut Vec<String>) {
    let name = package["name"].as_str().unwrap_or_default();
    for (own, krate, feature) in forwarded(package) {
        let entry = allowed.iter().find(|e| e.krate == krate);
        if let Some(entry) = entry
            && let Some(finding) = feature_finding(
                name,
                entry,
                feature,
                &format!("its feature `{own}` turns on `{feature}`, which is"),
            )
        {
            violations.push(finding);
        }
    }
}

/// The features of normal dependencies that `package`'s own `[features]` table turns on:
/// `(its feature, the dependency's package name, the dependency's feature)`.
fn forwarded(package: &Value) -> Vec<(&str, &str, &str)> {
    let normal: Vec<&Value> = package["dependencies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|dep| dep["kind"].as_str().unwrap_or("normal") == "normal")
        .collect();
    let mut found = Vec::new();
    for (own, enables) in package["features"].as_object().into_iter().flatten() {
        for enabled in enables.as_array().into_iter().flatten() {
            let Some((key, feature)) = enabled.as_str().and_then(|e| e.split_once('/')) else {
                continue;
            };
            let key = key.trim_end_matches('?');
            // The key is the dependency's name in the manifest: its `rename`, else its name.
            let krate = normal
                .iter()
                .find(|dep| dep["rename"].as_str().or(dep["name"].as_str()) == Some(key))
                .and_then(|dep| dep["name"].as_str());
            if let Some(krate) = krate {
                found.push((own.as_str(), krate, feature));
            }
        }
    }
    found
}

/// ARCH_EXTERNAL_DEP in reverse, on the real workspace: each crate and feature of an
/// `EXTERNAL` allowlist is still in use (a normal dependency of the package; a feature a
/// dependency entry or the package's `[features]` turns on), so the lists stay exactly what
/// the packages use and a dropped crate cannot come back unrecorded.
fn stale_allowlist(packages: &[Value], violations: &mut Vec<String>) {
    for (name, allowed, _) in EXTERNAL {
        let Some(package) = packages.iter().find(|p| p["name"] == *name) else {
            continue;
        };
        let normal: Vec<&Value> = package["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|dep| dep["kind"].as_str().unwrap_or("normal") == "normal")
            .collect();
        let forwarded = forwarded(package);
        for entry in *allowed {
            let krate = entry.krate;
            let entries: Vec<&&Value> = normal.iter().filter(|dep| dep["name"] == krate).collect();
            if entries.is_empty() {
                violations.push(format!(
                    "{name} -> {krate}: ARCH_EXTERNAL_DEP: on {name}'s allowlist of external crates but no longer a normal dependency; delete it from the EXTERNAL table of xtask/src/graph.rs"
                ));
                continue;
            }
            for feature in entry.features.into_iter().flatten() {
                let in_entry = entries.iter().any(|dep| {
                    dep["features"]
                        .as_array()
                        .is_some_and(|list| list.iter().any(|f| f == feature))
                });
                let in_table = forwarded
                    .iter()
                    .any(|(_, k, f)| *k == krate && f == feature);
                if !in_entry && !in_table {
                    violations.push(format!(
                        "{name} -> {krate}: ARCH_EXTERNAL_DEP: feature `{feature}` is on {name}'s allowlist for {krate} but no longer turned on; delete it from the EXTERNAL table of xtask/src/graph.rs"
                    ));
                }
            }
        }
    }
}

/// The finding for `feature` of `entry`'s crate, turned on by `name` (`what`: "feature `fs`
/// is", or how a feature of `name`'s own reaches it), if `entry` does not allow it.
fn feature_finding(name: &str, entry: &External, feature: &str, what: &str) -> Option<String> {
    let features = entry.features?;
    if features.contains(&feature) {
        return None;
    }
    let krate = entry.krate;
    let allowed = if features.is_empty() {
        "none".to_owned()
    } else {
        features.join(", ")
    };
    Some(format!(
        "{name} -> {krate}: ARCH_EXTERNAL_DEP: {what} not on {name}'s allowlist for {krate} (allowed: {allowed}; {}); {RECORD}",
        entry.why
    ))
}

/// ARCH_SOURCE_PLACE: `package` has its manifest in `folder`, and, under `crates/`, compiles
/// its lib and bins from `folder/src/`: the places the source rules look (a package moved to
/// another folder, or a `[lib] path` elsewhere, would compile code no rule reads).
fn source_place(metadata: &Value, package: &Value, folder: &str, violations: &mut Vec<String>) {
    let name = package["name"].as_str().unwrap_or_default();
    let root = metadata["workspace_root"].as_str().unwrap_or_default();
    let relative = |path: &Value| {
        let path = path.as_str().unwrap_or_default();
        let path = path.strip_prefix(root).unwrap_or(path);
        path.trim_start_matches('/').to_owned()
    };
    let manifest = relative(&package["manifest_path"]);
    if manifest != format!("{folder}/Cargo.toml") {
        violations.push(format!(
            "{name}: ARCH_SOURCE_PLACE: its manifest is {manifest}, not {folder}/Cargo.toml, where the source rules look; move it back or move the rules (the ALLOWED table, the places in xtask/src/sources.rs)"
        ));
    }
    if !folder.starts_with("crates/") {
        return;
    }
    for target in package["targets"].as_array().into_iter().flatten() {
        let kinds: Vec<&str> = target["kind"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let src = relative(&target["src_path"]);
        if !kinds.iter().all(|k| NOT_SHIPPED.contains(k))
            && !src.starts_with(&format!("{folder}/src/"))
        {
            violations.push(format!(
                "{name}: ARCH_SOURCE_PLACE: its {} target compiles {src}, outside {folder}/src/, where the source rules look",
                kinds.join("/")
            ));
        }
    }
}

/// NO_ENV for build scripts: a package under `crates/` other than bootstrap has none. A build
/// script runs with the build's environment and hands what it reads to the crate as variables
/// that `env!` reads (`cargo:rustc-env` may set any name, and overrides Cargo's own
/// `CARGO_PKG_*`), so the source rule on `env!` would pass a secret baked in that way.
fn build_script(metadata: &Value, package: &Value, folder: &str, violations: &mut Vec<String>) {
    let name = package["name"].as_str().unwrap_or_default();
    if !folder.starts_with("crates/") || ENV_READERS.contains(&name) {
        return;
    }
    let root = metadata["workspace_root"].as_str().unwrap_or_default();
    for target in package["targets"].as_array().into_iter().flatten() {
        let is_build_script = target["kind"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|kind| kind == "custom-build");
        if is_build_script {
            let src = target["src_path"].as_str().unwrap_or_default();
            let src = src
                .strip_prefix(root)
                .unwrap_or(src)
                .trim_start_matches('/');
            violations.push(format!(
                "{name}: NO_ENV: its build script ({src}) reads the build's environment and can hand it to the crate (`cargo:rustc-env` sets even `CARGO_PKG_*`); no package under crates/ but cogni-bootstrap has one"
            ));
        }
    }
}

/// The dependencies each package's manifest renames (`rt = { package = "tokio" }`), for the
/// source rules, which must read `rt::fs` as `tokio::fs` (and `core2::s` as `ai_core::s` for a
/// workspace package, by its library's name).
pub(crate) fn renamed_deps(metadata: &Value) -> Vec<RenamedDep> {
    let packages = metadata["packages"].as_array().into_iter().flatten();
    let libraries = libraries(metadata);
    let mut renamed = Vec::new();
    for package in packages {
        let folder = package_folder(metadata, package);
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            if let (Some(name), Some(krate)) = (dep["rename"].as_str(), dep["name"].as_str()) {
                // A workspace package is its library, whose name may differ from the package's.
                let library = (packages_named(metadata, krate)).find_map(|p| {
                    libraries
                        .iter()
                        .find(|l| l.folder == package_folder(metadata, p))
                });
                renamed.push(RenamedDep {
                    folder: folder.clone(),
                    name: name.replace('-', "_"),
                    krate: library.map_or_else(|| krate.replace('-', "_"), |l| l.name.clone()),
                });
            }
        }
    }
    renamed
}

/// The library of each workspace package that has one, as the sources of its dependents name
/// it (its lib target's name, `ai_core` for `cogni-ai-core`), for the source rules.
pub(crate) fn libraries(metadata: &Value) -> Vec<Library> {
    let packages = metadata["packages"].as_array().into_iter().flatten();
    let mut libraries = Vec::new();
    for package in packages {
        let targets = package["targets"].as_array().into_iter().flatten();
        for target in targets.filter(|t| is_library(t)) {
            libraries.push(Library {
                name: target["name"]
                    .as_str()
                    .unwrap_or_default()
                    .replace('-', "_"),
                folder: package_folder(metadata, package),
            });
        }
    }
    libraries
}

/// Whether `target` is a library other crates can name (`lib`, `rlib`, `proc-macro`, …).
fn is_library(target: &Value) -> bool {
    let kinds = target["kind"].as_array().into_iter().flatten();
    kinds
        .filter_map(Value::as_str)
        .any(|kind| kind.ends_with("lib") || kind == "proc-macro")
}

/// The workspace packages named `name`.
fn packages_named<'m>(metadata: &'m Value, name: &'m str) -> impl Iterator<Item = &'m Value> {
    let packages = metadata["packages"].as_array().into_iter().flatten();
    packages.filter(move |p| p["name"] == name)
}

/// The folder of `package`'s manifest, relative to the workspace root, with a trailing `/`
/// (`crates/ai-core/`).
fn package_folder(metadata: &Value, package: &Value) -> String {
    let root = metadata["workspace_root"].as_str().unwrap_or_default();
    let manifest = package["manifest_path"].as_str().unwrap_or_default();
    (manifest.strip_prefix(root).unwrap_or(manifest))
        .trim_start_matches('/')
        .trim_end_matches("Cargo.toml")
        .to_owned()
}

/// ARCH_LINTS: the workspace's root manifest (read from disk) forbids unsafe code and its
/// profiles lower no lint ([`root_manifest_lints`]), the repository's Cargo configuration
/// weakens no check ([`configuration_lints`]), no toolchain file of its root names a toolchain
/// folder ([`toolchain_lints`]), and each package's manifest has a `[lints]` table with
/// `workspace = true`.
pub(crate) fn lints_inherited(metadata: &Value) -> Vec<String> {
    let root = Path::new(metadata["workspace_root"].as_str().unwrap_or_default());
    let mut violations = root_manifest_lints(root);
    violations.extend(configuration_lints(root));
    violations.extend(toolchain_lints(root));
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        let manifest = Path::new(package["manifest_path"].as_str().unwrap_or_default());
        let inherits = match read_toml(manifest) {
            Ok(entries) => entries.iter().any(|entry| {
                entry.is("lints.workspace") && matches!(entry.value, Leaf::Bool(true))
            }),
            Err(unreadable) => {
                let shown = manifest.strip_prefix(root).unwrap_or(manifest);
                violations.push(unreadable.finding(&shown.display().to_string(), "ARCH_LINTS"));
                continue;
            }
        };
        if !inherits {
            violations.push(format!(
                "{name}: ARCH_LINTS: its manifest does not inherit the workspace lints (`[lints]` with `workspace = true`), where `unsafe_code = \"forbid\"` comes from"
            ));
        }
    }
    violations
}

/// ARCH_LINTS of the root manifest: its workspace lints forbid unsafe code (`unsafe_code =
/// "forbid"`, or `{ level = "forbid", … }`), and no profile's `rustflags` (`cargo-features =
/// ["profile-rustflags"]`, on nightly) lowers the lints ([`config_lowers_lints`]).
fn root_manifest_lints(root: &Path) -> Vec<String> {
    let entries = match read_toml(&root.join("Cargo.toml")) {
        Ok(entries) => entries,
        Err(unreadable) => return vec![unreadable.finding("Cargo.toml", "ARCH_LINTS")],
    };
    let mut violations = Vec::new();
    let forbids = entries.iter().any(|entry| {
        (entry.is("workspace.lints.rust.unsafe_code")
            || entry.is("workspace.lints.rust.unsafe_code.level"))
            && matches!(&entry.value, Leaf::Text(level) if level == "forbid")
    });
    if !forbids {
        violations.push(
            "Cargo.toml: ARCH_LINTS: the workspace lints do not forbid unsafe code (`unsafe_code = \"forbid\"` under `[workspace.lints.rust]`); `unsafe` reaches the OS through no name a source rule reads".into(),
        );
    }
    let profiles = entries
        .iter()
        .filter(|entry| in_table("profile", &entry.key));
    if let Some((line, lowered)) = config_lowers_lints(profiles) {
        violations.push(format!(
            "Cargo.toml:{line}: ARCH_LINTS: {lowered}; take it out"
        ));
    }
    violations
}

/// ARCH_LINTS of the repository's Cargo configuration: it weakens no check of ci
/// ([`config_weakens`]), and names no compiler ([`COMPILERS`]), tool of a step
/// ([`STEP_TOOLS`]) nor test runner ([`RUNNERS`]).
fn configuration_lints(root: &Path) -> Vec<String> {
    let mut violations = Vec::new();
    for config in CARGO_CONFIGS {
        let entries = match read_toml(&root.join(config)) {
            Ok(entries) => entries,
            Err(unreadable) => {
                violations.push(unreadable.finding(config, "ARCH_LINTS"));
                continue;
            }
        };
        let first = |pattern: &str| entries.iter().find(|entry| in_table(pattern, &entry.key));
        for (line, weakens) in config_weakens(&entries) {
            violations.push(format!(
                "{config}:{line}: ARCH_LINTS: {weakens}; take it out"
            ));
        }
        for (setting, entry) in COMPILERS.iter().filter_map(|s| Some((s, first(s)?))) {
            violations.push(format!(
                "{config}:{}: ARCH_LINTS: `{setting}` runs a program of the configuration's choosing in the compiler's place, which can lower every lint (`--cap-lints`) unseen; take it out",
                entry.line
            ));
        }
        for (setting, effect) in STEP_TOOLS {
            if let Some(entry) = first(setting) {
                let line = entry.line;
                violations.push(format!(
                    "{config}:{line}: ARCH_LINTS: `{setting}` {effect}; take it out"
                ));
            }
        }
        for entry in RUNNERS.iter().filter_map(|runner| first(runner)) {
            violations.push(format!(
                "{config}:{}: ARCH_LINTS: `{}` runs the test binaries through a program of the configuration's choosing, which could report failed tests as passed; take it out",
                entry.line,
                entry.shown_key()
            ));
        }
    }
    violations
}

/// ARCH_LINTS of the toolchain files of the repository's root ([`TOOLCHAIN_FILES`]): none has a
/// `toolchain.path`.
fn toolchain_lints(root: &Path) -> Vec<String> {
    let mut violations = Vec::new();
    for file in TOOLCHAIN_FILES {
        let path = root.join(file);
        let entries = match read_toml(&path) {
            Ok(entries) => entries,
            // rustup reads a `rust-toolchain` of one line as a channel's name (`1.95.0`).
            Err(_) if *file == "rust-toolchain" && one_line(&path) => continue,
            Err(unreadable) => {
                violations.push(unreadable.finding(file, "ARCH_LINTS"));
                continue;
            }
        };
        let folder = entries
            .iter()
            .find(|entry| in_table("toolchain.path", &entry.key));
        if let Some(entry) = folder {
            violations.push(format!(
                "{file}:{}: ARCH_LINTS: `toolchain.path` points rustup at a toolchain folder of the repository's choosing, whose cargo, rustc and clippy could pass anything; name a channel instead",
                entry.line
            ));
        }
    }
    violations
}

/// The settings of a Cargo configuration that run a program in rustc's or rustdoc's place (or
/// around it), which sees every flag and can add `--cap-lints`: the repository's own names
/// none (a machine's `RUSTC_WRAPPER`, sccache say, is the machine's). Its `[env]` counts too:
/// Cargo hands it to what `cargo run` runs, `cargo xtask ci` and so the cargo that runs its
/// steps, and to rustc: a `PATH` there (with `force = true`) finds `rustc`, `cargo-clippy` and
/// `rustfmt` where the repository chose. (`[env]` cannot set `CARGO_HOME`, `RUSTUP_HOME` or
/// `RUSTUP_TOOLCHAIN`, which would choose a Cargo home or a toolchain: Cargo refuses each.)
const COMPILERS: &[&str] = &[
    "env.PATH",
    "build.rustc",
    "build.rustc-wrapper",
    "build.rustc-workspace-wrapper",
    "build.rustdoc",
    "env.RUSTC",
    "env.RUSTC_WRAPPER",
    "env.RUSTC_WORKSPACE_WRAPPER",
    "env.RUSTDOC",
    "env.CARGO_BUILD_RUSTC",
    "env.CARGO_BUILD_RUSTC_WRAPPER",
    "env.CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
    "env.CARGO_BUILD_RUSTDOC",
];

/// The `[env]` variables of a Cargo configuration that change what a step of `cargo xtask ci`
/// checks with (`[env]` reaches its cargo and the tools its steps run), each with what it does
/// as a finding says it: `cargo fmt` runs `$RUSTFMT` in rustfmt's place, and clippy reads its
/// `clippy.toml` from `$CLIPPY_CONF_DIR`.
const STEP_TOOLS: &[(&str, &str)] = &[
    (
        "env.RUSTFMT",
        "runs a program of the configuration's choosing in rustfmt's place, which could pass the fmt step unchecked",
    ),
    (
        "env.CLIPPY_CONF_DIR",
        "makes clippy read a `clippy.toml` of the configuration's choosing in place of the repository's, whose `disallowed-methods` the clippy step enforces",
    ),
];

/// The settings of a Cargo configuration that run each test binary (and `cargo run`'s) through
/// a program of its choosing (`target.<triple>.runner`, `target.'cfg(…)'.runner`), which sees
/// its output and could print passing counts for failed tests; `[env]` counts too, as for
/// [`COMPILERS`] (a machine's runner, an emulator say, is the machine's).
const RUNNERS: &[&str] = &["target.*.runner", "env.CARGO_TARGET_*_RUNNER"];

/// The toolchain files rustup reads in the repository's root, where `cargo xtask ci` runs its
/// steps: one whose `[toolchain]` has a `path` (in place of a `channel`, which names a release)
/// runs the cargo, rustc and clippy of a folder of the repository's choosing.
const TOOLCHAIN_FILES: &[&str] = &["rust-toolchain", "rust-toolchain.toml"];

/// Whether the file at `path` holds one line, as rustup counts them.
fn one_line(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| text.lines().count() == 1)
}

/// The Cargo configuration files of the repository itself (`.cargo/`), either spelling.
const CARGO_CONFIGS: &[&str] = &[".cargo/config.toml", ".cargo/config"];

/// ARCH_PATCHED_DEP: the root manifest has no `[patch]` or `[replace]`, and the repository's
/// Cargo configuration no `[patch]`, `paths` or `directory` source (`[source.<name>]` with
/// `directory`, which compiles the files in it, checked only against the checksums its own
/// `.cargo-checksum.json` lists; a registry mirror serves what Cargo.lock's checksums name).
/// Nor does any package depend on a crate from a git repository or another registry than
/// crates.io (named, never by its address, which may hold a credential). Each compiles other
/// code under a dependency's name (a `serde` or `tokio` of anyone's), which the allowlists vet
/// by name only and no source rule reads. One finding per file and table, naming its first
/// entry, and per dependency.
pub(crate) fn swapped_dependencies(metadata: &Value) -> Vec<String> {
    let root = Path::new(metadata["workspace_root"].as_str().unwrap_or_default());
    // Each table as a finding shows it, and its keys' pattern ([`in_table`]).
    let manifest = &[("[patch]", "patch"), ("[replace]", "replace")][..];
    let config = &[
        ("paths", "paths"),
        ("[patch]", "patch"),
        ("[source]", "source.*.directory"),
    ][..];
    let files = [("Cargo.toml", manifest)]
        .into_iter()
        .chain(CARGO_CONFIGS.iter().map(|file| (*file, config)));
    let mut violations = Vec::new();
    for (file, tables) in files {
        let entries = match read_toml(&root.join(file)) {
            Ok(entries) => entries,
            Err(unreadable) => {
                violations.push(unreadable.finding(file, "ARCH_PATCHED_DEP"));
                continue;
            }
        };
        for (shown, pattern) in tables {
            if let Some(entry) = entries.iter().find(|entry| in_table(pattern, &entry.key)) {
                let (line, key) = (entry.line, entry.shown_key());
                violations.push(format!(
                    "{file}:{line}: ARCH_PATCHED_DEP: `{shown}` (`{key}`) compiles other code under a dependency's name, which no allowlist vets and no source rule reads; take it out"
                ));
            }
        }
    }
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            // A path dependency (no source) is ARCH_LAYERING's.
            let source = dep["source"].as_str().unwrap_or(CRATES_IO);
            if source == CRATES_IO {
                continue;
            }
            let from = if source.starts_with("git+") {
                "a git repository"
            } else {
                "another registry"
            };
            let dep_name = dep["name"].as_str().unwrap_or_default();
            violations.push(format!(
                "{name} -> {dep_name}: ARCH_PATCHED_DEP: comes from {from}, not crates.io: other code under the crate's name, which no allowlist vets and no source rule reads; depend on crates.io's"
            ));
        }
    }
    violations
}

/// The source cargo metadata gives a crates.io dependency (through a mirror or the sparse
/// index too).
const CRATES_IO: &str = "registry+https://github.com/rust-lang/crates.io-index";

/// What a Cargo configuration (its [`Entry`]s) does to the checks of `cargo xtask ci`, wherever
/// Cargo reads it from, each as a finding says it, with its line: a flag that lowers the
/// lints ([`config_lowers_lints`]), an alias standing in for a step ([`shadowed_step`]), or an
/// `include` (Cargo 1.95 loads the files it names, which these checks do not read).
pub(crate) fn config_weakens(entries: &[Entry]) -> Vec<(usize, String)> {
    let included = entries.iter().find(|entry| in_table("include", &entry.key));
    let included = included.map(|entry| {
        (entry.line, "`include` loads settings from files these checks do not read, which could cap the lints, stand in for a step or run a program in the compiler's place".to_owned())
    });
    [
        config_lowers_lints(entries),
        shadowed_step(entries),
        included,
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// What an `[alias]` of a Cargo configuration (its [`Entry`]s; `[env]`'s
/// `CARGO_ALIAS_<COMMAND>` too) does to `cargo xtask ci`, as a finding says it, with the line,
/// if one is named as a subcommand one of its steps runs: Cargo runs an alias in place of an
/// external subcommand (`cargo clippy`, `cargo fmt`, with a warning only), so `clippy =
/// ["run", "--"]` would pass the step having checked nothing.
fn shadowed_step(entries: &[Entry]) -> Option<(usize, String)> {
    crate::ci::commands().find_map(|command| {
        // The alias, or the variable setting it in `[env]`, which `cargo xtask ci` (a `cargo
        // run`) hands to the cargo running its steps.
        let aliases = [
            format!("alias.{command}"),
            format!("env.CARGO_ALIAS_{}", command.to_uppercase()),
        ];
        let entry = entries
            .iter()
            .find(|entry| aliases.iter().any(|alias| in_table(alias, &entry.key)))?;
        Some((entry.line, alias_stands_in(command)))
    })
}

/// What an alias named `command` does when `command` is the subcommand of a step of `cargo
/// xtask ci`, as a finding says it.
pub(crate) fn alias_stands_in(command: &str) -> String {
    format!(
        "the alias `{command}` stands in for `cargo {command}`, a step of `cargo xtask ci`, which would check nothing"
    )
}

/// Whether `key` (an [`Entry`]'s segments) is in what the dotted `pattern` names: that table
/// or value and what it holds (`patch`: `patch` or `patch.…`). A `*` in a segment of the
/// pattern stands for any text (`source.*.directory`: a field of any of a table's tables).
/// Segments are compared ignoring ASCII case: `[env]`'s keys are variables' names, which
/// Windows reads in any case (`Path` is `PATH`), and any other key Cargo reads in one case
/// only, so another case costs no more than a finding.
fn in_table(pattern: &str, key: &[String]) -> bool {
    let segments = pattern.split('.');
    segments.clone().count() <= key.len()
        && segments
            .zip(key)
            .all(|(wanted, segment)| match wanted.split_once('*') {
                Some((start, end)) => {
                    let bytes = segment.as_bytes();
                    bytes.len() >= start.len() + end.len()
                        && bytes[..start.len()].eq_ignore_ascii_case(start.as_bytes())
                        && bytes[bytes.len() - end.len()..].eq_ignore_ascii_case(end.as_bytes())
                }
                None => segment.eq_ignore_ascii_case(wanted),
            })
}

/// The rustc flags that weaken `forbid`, each with what it does: `--cap-lints` lowers every
/// lint, and `--force-warn` makes the lints it names warnings, which neither `forbid` nor
/// `-D warnings` turns back into errors.
const LINT_LOWERING: &[(&str, &str)] = &[
    (
        "cap-lints",
        "lowers `unsafe_code = \"forbid\"` with every lint",
    ),
    (
        "force-warn",
        "makes the lints it names (`unsafe_code`, `warnings`) warnings whatever forbids or denies them",
    ),
];

/// What the first flag of `flags` (a flags variable's value) that weakens `forbid` does, as a
/// finding says it (`` `--cap-lints` in the build's flags lowers … ``), if one is there. An
/// argument opening with `@` (`@flags.txt`) counts too: rustc and rustdoc read more flags from
/// the file it names, which no check reads.
pub(crate) fn lowered_lints(flags: &str) -> Option<String> {
    if let Some((flag, effect)) = LINT_LOWERING.iter().find(|(flag, _)| flags.contains(flag)) {
        return Some(format!("`--{flag}` in the build's flags {effect}"));
    }
    // Whitespace separates `RUSTFLAGS`, the unit separator `CARGO_ENCODED_RUSTFLAGS`.
    let mut arguments = flags.split(|c: char| c.is_whitespace() || c == '\u{1f}');
    arguments.any(|argument| argument.starts_with('@')).then(|| {
        "`@file` in the build's flags reads more flags from that file, which could hold `--cap-lints`".to_owned()
    })
}

/// [`lowered_lints`] of a Cargo configuration's [`Entry`]s (or a manifest's profiles), in any
/// text they hold (a `rustflags` or `rustdocflags`, an `[env]` variable), with the line.
fn config_lowers_lints<'a>(
    entries: impl IntoIterator<Item = &'a Entry>,
) -> Option<(usize, String)> {
    entries.into_iter().find_map(|entry| match &entry.value {
        Leaf::Text(text) => Some((entry.line, lowered_lints(text)?)),
        _ => None,
    })
}

/// One value of a Cargo file, as the checks read it: its full key (`[workspace.lints]` then
/// `rust.unsafe_code = …` is `workspace.lints.rust.unsafe_code`), the line it starts on, and
/// what it holds. Each value of a table, inline or not and however deep, is an entry under
/// the table's key (`unsafe_code = { level = "forbid" }` gives `….unsafe_code.level`), and
/// each element of an array one under the array's.
pub(crate) struct Entry {
    /// The full key's segments, each as Cargo reads it (quotes and escapes read): a quoted
    /// key holding a dot (`"build.rustc"`) is one segment, as it is one key to Cargo.
    key: Vec<String>,
    /// The line (from 1) the value starts on.
    line: usize,
    /// What the value holds, where a check reads it.
    value: Leaf,
}

impl Entry {
    /// Whether the key is exactly the dotted `key` (of plain segments).
    fn is(&self, key: &str) -> bool {
        key.split('.').eq(self.key.iter().map(String::as_str))
    }

    /// The key as a finding shows it: its plain segments (letters, digits, `-`, `_`) as they
    /// are, any other as `"…"`, since a quoted one may be an address holding a credential
    /// (`[patch."https://user:token@host/repo"]`) or text that garbles a terminal.
    fn shown_key(&self) -> String {
        let plain = |segment: &str| {
            !segment.is_empty()
                && (segment.bytes()).all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        let shown: Vec<&str> = (self.key.iter())
            .map(|segment| if plain(segment) { segment } else { "\"…\"" })
            .collect();
        shown.join(".")
    }
}

/// What an [`Entry`] holds: text (a string's, escapes read), a boolean, or anything else.
enum Leaf {
    /// A string's text.
    Text(String),
    /// A boolean.
    Bool(bool),
    /// A number or a date, which no check reads.
    Other,
}

/// Why a Cargo file could not be read as TOML: the line where toml gives one, and what.
pub(crate) struct Unreadable {
    line: Option<usize>,
    why: String,
}

impl Unreadable {
    /// The finding for the file shown as `place`, under `rule`: the checks could not read it,
    /// so it could hide what they refuse. Its text is never quoted (a value may be a secret).
    pub(crate) fn finding(&self, place: &str, rule: &str) -> String {
        let line = self.line.map(|line| format!(":{line}")).unwrap_or_default();
        format!(
            "{place}{line}: {rule}: {}, so its settings went unchecked; make it valid TOML",
            self.why
        )
    }
}

/// The values of the Cargo file at `path` ([`Entry`]), in the document's order; none if there
/// is no such file (or none Cargo can find: it skips a file behind a folder it may not search,
/// and fails on one it finds but cannot read).
pub(crate) fn read_toml(path: &Path) -> Result<Vec<Entry>, Unreadable> {
    if std::fs::metadata(path).is_err() {
        return Ok(Vec::new());
    }
    match std::fs::read_to_string(path) {
        Ok(text) => toml_entries(&text),
        Err(error) => Err(Unreadable {
            line: None,
            why: format!("cannot be read ({error})"),
        }),
    }
}

/// The values of the TOML document `text` ([`Entry`]), in the document's order, read by the
/// `toml` crate as Cargo reads them (a byte order mark opening it skipped).
fn toml_entries(text: &str) -> Result<Vec<Entry>, Unreadable> {
    let document = toml::de::DeTable::parse(text).map_err(|error| Unreadable {
        line: error.span().map(|span| line_of(text, span.start)),
        why: format!(
            "is not TOML ({})",
            error.message().trim().replace('\n', "; ")
        ),
    })?;
    let mut entries = Vec::new();
    table_entries(text, &[], document.get_ref(), &mut entries);
    entries.sort_by_key(|(offset, _)| *offset);
    Ok(entries.into_iter().map(|(_, entry)| entry).collect())
}

/// The entries of `table`, whose key is `prefix` (empty at the root), each with its offset.
fn table_entries(
    text: &str,
    prefix: &[String],
    table: &toml::de::DeTable<'_>,
    entries: &mut Vec<(usize, Entry)>,
) {
    for (name, value) in table {
        let key = [prefix, &[name.get_ref().to_string()]].concat();
        value_entries(text, key, value, entries);
    }
}

/// The entries of `value`, whose key is `key`, each with its offset.
fn value_entries(
    text: &str,
    key: Vec<String>,
    value: &toml::Spanned<toml::de::DeValue<'_>>,
    entries: &mut Vec<(usize, Entry)>,
) {
    use toml::de::DeValue;
    let leaf = match value.get_ref() {
        DeValue::Table(table) => return table_entries(text, &key, table, entries),
        DeValue::Array(array) => {
            for element in array {
                value_entries(text, key.clone(), element, entries);
            }
            return;
        }
        DeValue::String(text) => Leaf::Text(text.to_string()),
        DeValue::Boolean(value) => Leaf::Bool(*value),
        _ => Leaf::Other,
    };
    let offset = value.span().start;
    let line = line_of(text, offset);
    entries.push((
        offset,
        Entry {
            key,
            line,
            value: leaf,
        },
    ));
}

/// The line (from 1) of the byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let before = text.get(..offset).unwrap_or(text);
    before.matches('\n').count() + 1
}

/// [`check`] on the real workspace, which must also match the table: every `ALLOWED` row names
/// an existing package, and at least one internal edge was read (else the `path` pattern broke).
pub(crate) fn check_repo(metadata: &Value) -> anyhow::Result<Vec<String>> {
    let mut violations = check(metadata)?;
    let packages = metadata["packages"].as_array().into_iter().flatten();
    let names: Vec<&str> = packages
        .clone()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for (name, _, _) in ALLOWED {
        if !names.contains(name) {
            violations.push(format!(
                "{name}: ARCH_LAYERING: the ALLOWED table has a row for a package the workspace lacks; delete the row or restore the package"
            ));
        }
    }
    let all = metadata["packages"].as_array().map(Vec::as_slice);
    stale_allowlist(all.unwrap_or_default(), &mut violations);
    let internal_edges = packages
        .flat_map(|p| p["dependencies"].as_array().into_iter().flatten())
        .filter(|d| d.get("path").is_some_and(|p| !p.is_null()))
        .count();
    if internal_edges == 0 {
        violations.push(
            "xtask/src/graph.rs: SCANNER_SAW_NOTHING: ARCH_LAYERING: no dependency with a `path` in cargo metadata; the edge pattern is broken".into(),
        );
    }
    Ok(violations)
}

#[cfg(test)]
mod tests;

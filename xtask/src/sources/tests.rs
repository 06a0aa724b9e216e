//! Each source rule fed a small violating tree.

use std::fs;

/// Writes `files` (path, text) under a fresh root and returns the violations.
fn check(files: &[(&str, &str)], expected: &[&str]) {
    let root = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let full = root.path().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, text).unwrap();
    }
    let (violations, _) = super::check_tree(root.path()).unwrap();
    assert_eq!(violations, expected);
}

#[test]
fn a_clean_tree_passes() {
    check(
        &[
            (
                "crates/ai-core/src/runner/mod.rs",
                "//! Runner.\nlet p = ExecPermit::new();\ntool.exec(p);\n",
            ),
            (
                "crates/bootstrap/src/main.rs",
                "//! Main.\nlet v = std::env::var(\"X\");\n",
            ),
            (
                "crates/ai-tools/src/tools/time.rs",
                "//! Time.\n// std::fs is named in a comment only\nfn exec() {}\n",
            ),
            (
                "crates/ai-core/src/context.rs",
                "//! Ctx.\npub struct RunContext {\n    pub run_id: String,\n    pub connection_id: String,\n}\n",
            ),
        ],
        &[],
    );
}

#[test]
fn file_docs() {
    check(
        &[("crates/graph/src/lib.rs", "fn main() {}\n")],
        &["crates/graph/src/lib.rs:1: FILE_DOCS: the file must start with a `//!` doc comment"],
    );
}

#[test]
fn single_execution_path() {
    check(
        &[(
            "crates/graph/src/driver.rs",
            "//! Driver.\nlet permit = ExecPermit::new();\nlet out = tool.exec(permit, args).await;\n",
        )],
        &[
            "crates/graph/src/driver.rs:2: ARCH_SINGLE_EXECUTION_PATH: `ExecPermit::new` outside the runner",
            "crates/graph/src/driver.rs:3: ARCH_SINGLE_EXECUTION_PATH: a tool's `exec` is called outside the runner; go through `ToolRunner::run_tool`",
        ],
    );
}

#[test]
fn no_env_outside_bootstrap() {
    check(
        &[(
            "crates/adapters/src/http.rs",
            "//! Http.\n\nlet key = std::env::var(\"KEY\");\n",
        )],
        &["crates/adapters/src/http.rs:3: NO_ENV: the environment is read only in cogni-bootstrap"],
    );
}

#[test]
fn tool_file_purity() {
    check(
        &[(
            "crates/ai-tools/src/tools/read.rs",
            "//! Read.\nuse tokio::fs;\nlet c = reqwest::get(u);\n",
        )],
        &[
            "crates/ai-tools/src/tools/read.rs:2: TOOL_FILE_PURITY: tool files do no IO of their own (`tokio::fs`); use a capability",
            "crates/ai-tools/src/tools/read.rs:3: TOOL_FILE_PURITY: tool files do no IO of their own (`reqwest`); use a capability",
        ],
    );
}

#[test]
fn no_schema_lib_in_core_and_wire() {
    check(
        &[
            (
                "crates/ai-core/src/schema.rs",
                "//! Schema.\nuse jsonschema::Validator;\n",
            ),
            (
                "crates/wire-openai/src/lib.rs",
                "//! Wire.\nuse schemars::JsonSchema;\n",
            ),
            (
                "crates/ai-tools/src/bind.rs",
                "//! Bind.\nuse jsonschema::Validator;\n",
            ),
        ],
        &[
            "crates/ai-core/src/schema.rs:2: NO_SCHEMA_LIB: this crate never names `jsonschema`",
            "crates/wire-openai/src/lib.rs:2: NO_SCHEMA_LIB: this crate never names `schemars`",
        ],
    );
}

#[test]
fn no_secret_in_context() {
    check(
        &[(
            "crates/graph/src/ctx.rs",
            "//! Ctx.\npub(crate) struct CallContext {\n    pub run_id: String,\n    #[serde(skip)]\n    pub(crate) apiKey: String,\n    access_token: Option<String>,\n}\nstruct Other { password: String }\n",
        )],
        &[
            "crates/graph/src/ctx.rs:5: NO_SECRET_IN_CONTEXT: `CallContext.apiKey` looks like a secret (apikey); pass a reference and resolve it through a capability",
            "crates/graph/src/ctx.rs:6: NO_SECRET_IN_CONTEXT: `CallContext.access_token` looks like a secret (token); pass a reference and resolve it through a capability",
        ],
    );
}

#[test]
fn the_repository_scan_fails_when_it_sees_nothing() {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir_all(root.path().join("crates")).unwrap();
    let violations = super::check_repo(root.path()).unwrap();
    assert_eq!(violations.len(), 4, "{violations:?}");
    assert!(violations.iter().all(|v| v.contains("SCANNER_SAW_NOTHING")));
}

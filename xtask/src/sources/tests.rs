//! Each source rule fed a small tree: violating trees fire with the rule and the line, clean
//! ones pass.

use std::fs;

/// Writes `files` (path, text) under a fresh root, scans it, and compares the violations.
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

/// A tree where every rule has something to look at and nothing to report.
const CLEAN: &[(&str, &str)] = &[
    (
        "crates/ai-core/src/runner/mod.rs",
        "//! Runner.\nfn run() {\n    let out = tool.exec(ExecPermit::new(), args);\n}\n",
    ),
    (
        "crates/ai-core/src/ports.rs",
        "//! Ports; unlike ai-tools, no `jsonschema` here (a doc line).\npub trait BoundTool {\n    fn exec(&self, permit: ExecPermit);\n}\n/* tool.exec(x) in a block comment */\n",
    ),
    (
        "crates/ai-core/src/context.rs",
        "//! Contexts.\npub struct ToolInvocationContext<'a> {\n    /// The run's token budget is elsewhere.\n    pub run_id: &'a str,\n    #[serde(rename = \"connectionId\")]\n    pub(crate) connection_id: Option<String>,\n}\n",
    ),
    (
        "crates/ai-tools/src/tools/time.rs",
        "//! Time.\nuse crate::Clock; // not std::fs\nfn exec(clock: &dyn Clock) -> String {\n    let s = \"std::env::var and .exec(\";\n    env!(\"CARGO_PKG_VERSION\").into()\n}\n",
    ),
    (
        "crates/ai-tools/src/contract.rs",
        "//! Contracts.\nuse schemars::JsonSchema;\nlet v = jsonschema::validator_for(&schema);\n",
    ),
    (
        "crates/bootstrap/src/config.rs",
        "//! Config.\nuse std::env;\nlet v = std::env::var(\"COGNI_HOME\");\n",
    ),
    (
        "crates/graph/src/driver.rs",
        "//! Driver.\nlet out = runner.run_tool(call).await;\nlet mode = self.execute(x);\nuse crate::exec::Plan;\n",
    ),
];

#[test]
fn a_clean_tree_passes() {
    check(CLEAN, &[]);
}

#[test]
fn a_clean_tree_satisfies_the_sanity_checks() {
    let root = tempfile::tempdir().unwrap();
    for (path, text) in CLEAN {
        let full = root.path().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, text).unwrap();
    }
    assert_eq!(
        super::check_repo(root.path()).unwrap().0,
        Vec::<String>::new()
    );
}

#[test]
fn file_docs() {
    check(
        &[
            ("crates/graph/src/lib.rs", "fn main() {}\n"),
            ("crates/graph/src/ok.rs", "//! Fine.\n"),
            (
                "crates/graph/src/outer.rs",
                "/// Outer doc, not a file doc.\nfn f() {}\n",
            ),
        ],
        &[
            "crates/graph/src/lib.rs:1: FILE_DOCS: the file must start with a `//!` doc comment",
            "crates/graph/src/outer.rs:1: FILE_DOCS: the file must start with a `//!` doc comment",
        ],
    );
}

#[test]
fn single_execution_path() {
    check(
        &[
            (
                "crates/graph/src/driver.rs",
                "//! Driver.\nlet permit = ExecPermit::new();\nlet out = tool\n    .exec(permit, args)\n    .await;\nBoundTool::exec(&*tool, p, a);\ntool.exec::<Value>(p);\n",
            ),
            (
                "crates/ai-core/src/catalog.rs",
                "//! Not the runner.\nlet p = crate::runner::ExecPermit::new(); // sneaky\n",
            ),
        ],
        &[
            "crates/ai-core/src/catalog.rs:2: ARCH_SINGLE_EXECUTION_PATH: `ExecPermit::new` outside the runner (crates/ai-core/src/runner/)",
            "crates/graph/src/driver.rs:2: ARCH_SINGLE_EXECUTION_PATH: `ExecPermit::new` outside the runner (crates/ai-core/src/runner/)",
            "crates/graph/src/driver.rs:4: ARCH_SINGLE_EXECUTION_PATH: a tool's `exec` is called outside the runner; go through the runner (`run_tool`)",
            "crates/graph/src/driver.rs:6: ARCH_SINGLE_EXECUTION_PATH: a tool's `exec` is called outside the runner; go through the runner (`run_tool`)",
            "crates/graph/src/driver.rs:7: ARCH_SINGLE_EXECUTION_PATH: a tool's `exec` is called outside the runner; go through the runner (`run_tool`)",
        ],
    );
}

#[test]
fn no_env_outside_bootstrap() {
    const MESSAGE: &str = "NO_ENV: the environment is read only in cogni-bootstrap (and xtask); take configuration as a parameter";
    check(
        &[(
            "crates/adapters/src/http.rs",
            "//! Http.\n\nlet key = std::env::var(\"KEY\");\nuse std::{\n    collections::HashMap,\n    env,\n};\nlet home = env::var_os(\"HOME\"); let v = env!(\"CARGO_PKG_VERSION\");\nlet a = ::std::env::args();\n",
        )],
        &[
            &format!("crates/adapters/src/http.rs:3: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:6: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:8: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:9: {MESSAGE}"),
        ],
    );
}

#[test]
fn tool_file_purity() {
    check(
        &[
            (
                "crates/ai-tools/src/tools/read.rs",
                "//! Read.\nuse tokio::fs;\nlet c = reqwest::get(u);\nuse std::{io, net::TcpStream};\nlet out = std::process::Command::new(\"ls\");\n",
            ),
            (
                "crates/ai-tools/src/bind.rs",
                "//! Not a tool file: ai-tools itself may name them (NO_ENV still applies).\nuse std::fs;\n",
            ),
        ],
        &[
            "crates/ai-tools/src/tools/read.rs:2: TOOL_FILE_PURITY: tool files do no IO of their own (`tokio::fs`); use a capability",
            "crates/ai-tools/src/tools/read.rs:3: TOOL_FILE_PURITY: tool files do no IO of their own (`reqwest`); use a capability",
            "crates/ai-tools/src/tools/read.rs:4: TOOL_FILE_PURITY: tool files do no IO of their own (`std::net`); use a capability",
            "crates/ai-tools/src/tools/read.rs:5: TOOL_FILE_PURITY: tool files do no IO of their own (`std::process`); use a capability",
        ],
    );
}

#[test]
fn tool_files_do_not_read_the_environment_either() {
    check(
        &[(
            "crates/ai-tools/src/tools/env.rs",
            "//! Env.\nlet v = std::env::var(\"X\");\n",
        )],
        &[
            "crates/ai-tools/src/tools/env.rs:2: NO_ENV: the environment is read only in cogni-bootstrap (and xtask); take configuration as a parameter",
            "crates/ai-tools/src/tools/env.rs:2: TOOL_FILE_PURITY: tool files do no IO of their own (`std::env`); use a capability",
            "crates/ai-tools/src/tools/env.rs:2: TOOL_FILE_PURITY: tool files do no IO of their own (`env::var*`); use a capability",
        ],
    );
}

#[test]
fn no_schema_lib_in_core_and_wire() {
    check(
        &[
            (
                "crates/ai-core/src/schema.rs",
                "//! Schema.\nuse jsonschema::Validator;\n#[derive(::schemars::JsonSchema)]\n",
            ),
            (
                "crates/wire-openai/src/lib.rs",
                "//! Wire.\nuse {serde::Serialize, schemars::JsonSchema};\n",
            ),
            (
                "crates/ai-tools/src/bind.rs",
                "//! Bind.\nuse jsonschema::Validator;\n",
            ),
        ],
        &[
            "crates/ai-core/src/schema.rs:2: NO_SCHEMA_LIB: ai-core and wire-openai never name `jsonschema`; schemas live in ai-tools",
            "crates/ai-core/src/schema.rs:3: NO_SCHEMA_LIB: ai-core and wire-openai never name `schemars`; schemas live in ai-tools",
            "crates/wire-openai/src/lib.rs:2: NO_SCHEMA_LIB: ai-core and wire-openai never name `schemars`; schemas live in ai-tools",
        ],
    );
}

#[test]
fn no_secret_in_context() {
    check(
        &[(
            "crates/graph/src/ctx.rs",
            "//! Ctx.\npub(crate) struct CallContext<T>\nwhere\n    T: Clone,\n{\n    pub run_id: String,\n    #[serde(skip)]\n    pub(crate) apiKey: String,\n    access_token: Option<HashMap<String, T>>,\n    pub(in crate::x) Authorization: fn(a: u8) -> u8,\n}\nstruct Other { password: String }\nstruct SessionContext { id: u8, db_password: String }\nstruct TupleContext(String);\n",
        )],
        &[
            "crates/graph/src/ctx.rs:8: NO_SECRET_IN_CONTEXT: `CallContext.apiKey` is named like a secret (apikey); keep a reference and resolve it through a capability",
            "crates/graph/src/ctx.rs:9: NO_SECRET_IN_CONTEXT: `CallContext.access_token` is named like a secret (token); keep a reference and resolve it through a capability",
            "crates/graph/src/ctx.rs:10: NO_SECRET_IN_CONTEXT: `CallContext.Authorization` is named like a secret (authorization); keep a reference and resolve it through a capability",
            "crates/graph/src/ctx.rs:13: NO_SECRET_IN_CONTEXT: `SessionContext.db_password` is named like a secret (password); keep a reference and resolve it through a capability",
        ],
    );
}

#[test]
fn a_file_the_lexer_cannot_follow_is_reported() {
    check(
        &[(
            "crates/graph/src/bad.rs",
            "//! Bad.\nlet a = 1;\nlet s = \"never closed;\n",
        )],
        &[
            "crates/graph/src/bad.rs:3: SCANNER_LOST: unterminated literal or comment; the file was not checked",
        ],
    );
}

#[test]
fn the_repository_scan_fails_when_it_sees_nothing() {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir_all(root.path().join("crates/graph/src")).unwrap();
    fs::write(root.path().join("crates/graph/src/lib.rs"), "//! Lib.\n").unwrap();
    let (violations, _) = super::check_repo(root.path()).unwrap();
    let rules: Vec<&str> = violations
        .iter()
        .map(|v| v.split(": ").nth(2).unwrap())
        .collect();
    assert_eq!(
        rules,
        [
            "ARCH_SINGLE_EXECUTION_PATH",
            "ARCH_SINGLE_EXECUTION_PATH",
            "NO_ENV",
            "TOOL_FILE_PURITY",
            "NO_SCHEMA_LIB",
            "NO_SCHEMA_LIB",
            "NO_SECRET_IN_CONTEXT",
            "NO_SECRET_IN_CONTEXT",
        ],
        "{violations:#?}"
    );
    assert!(
        violations
            .iter()
            .all(|v| v.starts_with("xtask/src/sources.rs: SCANNER_SAW_NOTHING: "))
    );
}

//! Each source rule fed a small tree: violating trees fire with the rule and the line, clean
//! ones pass.

use std::fs;

/// Writes `files` (path, text) under a fresh root, scans it, and compares the violations.
fn check(files: &[(&str, &str)], expected: &[&str]) {
    assert_eq!(violations(files), expected);
}

/// What the scan reports of a tree holding only `files` (each a path and its text).
fn violations(files: &[(&str, &str)]) -> Vec<String> {
    let root = crate::tests::tree(files);
    super::check_tree(root.path(), &[], &[]).unwrap().0
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
        "crates/ai-tools/src/bind.rs",
        "//! Binds a contract it is handed.\npub fn bind<C: ToolContract>(contract: C) -> Result<Arc<dyn BoundTool>, Error> {\n    todo()\n}\n",
    ),
    (
        "crates/ai-core/src/source.rs",
        "//! Handed the tools it holds.\nimpl StaticToolSource {\n    pub fn new(tools: Vec<Arc<dyn BoundTool>>) -> Result<Self, Error> {\n        todo()\n    }\n}\n",
    ),
    (
        "crates/bootstrap/src/config.rs",
        "//! Config.\nuse std::env;\nlet v = std::env::var(\"COGNI_HOME\");\n",
    ),
    (
        "crates/graph/src/driver.rs",
        "//! Driver.\nlet out = runner.run_tool(call).await;\nlet mode = self.execute(x);\nuse crate::exec::Plan;\n",
    ),
    (
        "crates/ai-core/src/runner/budget.rs",
        "//! Budgets run on tokio's pausable clock.\nuse tokio::time::Instant;\nlet started = Instant::now();\nlet hash = canonical::write(&mut std::io::sink());\n",
    ),
    (
        "crates/ai-core/src/run.rs",
        "//! A context that holds references, and a held type without secrets.\npub struct RunContext {\n    pub run_id: RunId,\n    pub idempotency_key: String,\n    pub approvals: Vec<Approval>,\n}\npub enum ApprovalContext {\n    Granted { tool_call_id: String, args_sha256: String },\n    Denied,\n}\npub struct Approval { pub tool_call_id: String, pub args_sha256: String }\n",
    ),
    (
        "crates/adapters/src/store.rs",
        "//! Adapters do the IO.\nuse std::fs;\nlet now = std::time::SystemTime::now();\nconst INIT: &str = include_str!(\"../migrations/0001_init.sql\");\n#[cfg_attr(unix, path = \"unix/mod.rs\")]\nmod platform;\n",
    ),
    (
        "crates/bootstrap/src/settings.rs",
        "//! Embeds the root's example, which belongs to no package.\nconst EXAMPLE: &str = include_str!(\"../../../cogni.example.toml\");\nlet path = \"../../adapters/x.rs\";\n#[utoipa::path(get, path = \"/../../x\")]\nfn route() {}\n",
    ),
    (
        "crates/graph/tests/it/main.rs",
        "//! Tests are checked for docs only.\nuse std::fs;\nlet k = std::env::var(\"K\");\n",
    ),
    (
        "xtask/src/main.rs",
        "//! Xtask.\nlet a = std::env::args();\n",
    ),
];

#[test]
fn a_clean_tree_passes() {
    check(CLEAN, &[]);
}

#[test]
fn a_clean_tree_satisfies_the_sanity_checks() {
    let root = crate::tests::tree(CLEAN);
    assert_eq!(
        super::check_repo(root.path(), &[], &[]).unwrap().0,
        Vec::<String>::new()
    );
}

#[test]
fn file_docs() {
    const MISSING: &str = "FILE_DOCS: the file must start with a `//!` doc comment";
    const EMPTY: &str =
        "FILE_DOCS: the file's `//!` doc comment is empty; say what the file is for";
    check(
        &[
            ("crates/graph/src/lib.rs", "fn main() {}\n"),
            ("crates/graph/src/ok.rs", "//! Fine.\n"),
            (
                "crates/graph/src/bom.rs",
                "\u{feff}//! Saved with a byte order mark, which rustc skips.\n",
            ),
            (
                "crates/graph/src/late.rs",
                "//!\n//! Text on the second line.\n",
            ),
            (
                "crates/graph/src/outer.rs",
                "/// Outer doc, not a file doc.\nfn f() {}\n",
            ),
            (
                "crates/graph/src/bare.rs",
                "//!\npub fn undocumented() {}\n",
            ),
            (
                "crates/graph/src/blank.rs",
                "//!   \n//!\n\n//! Too late.\n",
            ),
            ("crates/graph/tests/it/x.rs", "fn t() {}\n"),
            ("crates/graph/benches/loop.rs", "//!\n"),
            (
                "crates/wire-openai/fuzz/fuzz_targets/decode.rs",
                "fn f() {}\n",
            ),
            ("tests/it/server.rs", "use x;\n"),
            ("xtask/src/ci.rs", "//!\n"),
            // Build output, vendored packages, hidden folders and fuzz data are not ours.
            ("target/debug/build/out.rs", "fn f() {}\n"),
            ("tests/protocol/node_modules/x/y.rs", "fn f() {}\n"),
            (".cargo/x.rs", "fn f() {}\n"),
            ("crates/wire-openai/fuzz/artifacts/decode/crash.rs", "x"),
            ("crates/wire-openai/fuzz/corpus/decode/seed.rs", "x"),
        ],
        &[
            &format!("crates/graph/benches/loop.rs:1: {EMPTY}"),
            &format!("crates/graph/src/bare.rs:1: {EMPTY}"),
            &format!("crates/graph/src/blank.rs:1: {EMPTY}"),
            &format!("crates/graph/src/lib.rs:1: {MISSING}"),
            &format!("crates/graph/src/outer.rs:1: {MISSING}"),
            &format!("crates/graph/tests/it/x.rs:1: {MISSING}"),
            &format!("crates/wire-openai/fuzz/fuzz_targets/decode.rs:1: {MISSING}"),
            &format!("tests/it/server.rs:1: {MISSING}"),
            &format!("xtask/src/ci.rs:1: {EMPTY}"),
        ],
    );
}

/// A hidden file (`.env`, `.git/…`), at the repository root or in the crate's own folder, is
/// local configuration or a secret: embedding it bakes it into the build, as `env!` would.
#[test]
fn embedding_a_hidden_file_is_refused() {
    let hidden = |line: usize, what: &str, target: &str| {
        format!(
            "crates/adapters/src/keys.rs:{line}: ARCH_FOREIGN_SOURCE: `{what}` reads `{target}`, a hidden file: local configuration or a secret, which no build embeds"
        )
    };
    check(
        &[(
            "crates/adapters/src/keys.rs",
            "//! Keys.\nconst A: &str = include_str!(\"../../../.env\");\nconst B: &[u8] = include_bytes!(\"../.secrets/key.pem\");\nconst C: &str = include_str!(\"../../../.git/config\");\nconst D: &str = include_str!(\"../migrations/0001_init.sql\");\nconst E: &str = include_str!(\"../../../cogni.example.toml\");\n",
        )],
        &[
            &hidden(2, "include_str!", "../../../.env"),
            &hidden(3, "include_bytes!", "../.secrets/key.pem"),
            &hidden(4, "include_str!", "../../../.git/config"),
        ],
    );
}

#[test]
fn foreign_source() {
    const RULE: &str = "ARCH_FOREIGN_SOURCE";
    check(
        &[
            (
                "crates/wire-openai/src/lib.rs",
                "//! Wire.\n#[path = \"../../adapters/src/clock.rs\"]\npub mod system_clock;\n#[cfg_attr(unix, path = \"../../graph/src/x.rs\")]\nmod x;\ninclude!(\"../../../tests/fake_llm.rs\");\ninclude!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../adapters/src/a.rs\"));\n#[path = \"/abs/clock.rs\"]\nmod abs;\n",
            ),
            (
                "crates/wire-ui/src/data.rs",
                "//! Data.\nconst A: &str = include_str!(\"../../adapters/migrations/0001_init.sql\");\nconst B: &[u8] = include_bytes!(\"../../../xtask/Cargo.toml\");\nconst C: &str = include_str!(\"../../../../outside.txt\");\nconst D: &str = include_str!(\"../../../fixtures/wire/a.sse\");\n#[path = \"own/sub.rs\"]\nmod sub;\ninclude!(\"../gen/table.rs\");\n",
            ),
        ],
        &[
            &format!(
                "crates/wire-openai/src/lib.rs:2: {RULE}: `#[path]` compiles `../../adapters/src/clock.rs`, which is outside crates/wire-openai/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            ),
            &format!(
                "crates/wire-openai/src/lib.rs:4: {RULE}: `#[path]` compiles `../../graph/src/x.rs`, which is outside crates/wire-openai/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            ),
            &format!(
                "crates/wire-openai/src/lib.rs:6: {RULE}: `include!` compiles `../../../tests/fake_llm.rs`, which is outside crates/wire-openai/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            ),
            &format!(
                "crates/wire-openai/src/lib.rs:7: {RULE}: `include!` with a computed path cannot be checked; use a plain string literal"
            ),
            &format!(
                "crates/wire-openai/src/lib.rs:8: {RULE}: `#[path]` compiles `/abs/clock.rs`, which is outside crates/wire-openai/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            ),
            &format!(
                "crates/wire-ui/src/data.rs:2: {RULE}: `include_str!` reads `../../adapters/migrations/0001_init.sql`, which belongs to another package or lies outside the repository; keep the file in crates/wire-ui/ or at the repository root"
            ),
            &format!(
                "crates/wire-ui/src/data.rs:3: {RULE}: `include_bytes!` reads `../../../xtask/Cargo.toml`, which belongs to another package or lies outside the repository; keep the file in crates/wire-ui/ or at the repository root"
            ),
            &format!(
                "crates/wire-ui/src/data.rs:4: {RULE}: `include_str!` reads `../../../../outside.txt`, which belongs to another package or lies outside the repository; keep the file in crates/wire-ui/ or at the repository root"
            ),
            &format!(
                "crates/wire-ui/src/data.rs:8: {RULE}: `include!` compiles `../gen/table.rs`, which is outside crates/wire-ui/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            ),
        ],
    );
}

#[test]
fn single_execution_path() {
    check(
        &[
            (
                "crates/graph/src/driver.rs",
                "//! Driver.\nlet permit = ExecPermit::new();\nlet out = tool\n    .exec(permit, args)\n    .await;\nBoundTool::exec(&*tool, p, a);\ntool.exec::<Value>(p);\n// A module (or function) named `exec`, imported, is not a tool's `exec`.\nuse crate::exec;\npub use crate::{plan, exec as run_plan};\n",
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
            "//! Http.\n\nlet key = std::env::var(\"KEY\");\nuse std::{\n    collections::HashMap,\n    env,\n};\nlet home = env::var_os(\"HOME\"); let v = env!(\"CARGO_PKG_VERSION\");\nlet a = ::std::env::args();\nlet f = tracing_subscriber::EnvFilter::from_default_env();\nlet g = EnvFilter::try_from_env(\"LOG\");\nlet k = dotenvy::var(\"OPENAI_API_KEY\");\nuse dotenv::dotenv;\nlet s: Settings = envy::prefixed(\"APP_\").from_env()?;\n",
        )],
        &[
            &format!("crates/adapters/src/http.rs:3: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:6: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:8: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:9: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:10: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:11: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:12: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:13: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:14: {MESSAGE}"),
        ],
    );
}

#[test]
fn tool_file_purity() {
    let violation = |line: usize, pattern: &str| {
        format!(
            "crates/ai-tools/src/{}: TOOL_FILE_PURITY: ai-tools does no IO of its own (`{pattern}`); use a capability, or `Clock` for time",
            if line > 100 {
                format!("fsutil.rs:{}", line - 100)
            } else {
                format!("tools/read.rs:{line}")
            }
        )
    };
    check(
        &[
            (
                "crates/ai-tools/src/tools/read.rs",
                "//! Read.\nuse tokio::fs;\nlet c = reqwest::get(u);\nuse std::{io, net::TcpStream};\nlet out = std::process::Command::new(\"ls\");\nlet out = tokio::process::Command::new(\"date\").output().await?;\nlet ms = std::time::SystemTime::now();\nio::stdin().lock().read_line(&mut s)?;\nuse std::os::unix::{fs::symlink, net::UnixStream};\nlet t = chrono::Utc::now();\nlet started = std::time::Instant::now();\nlet out = crate::fsutil::read(p);\nlet d = std::time::Duration::from_secs(1);\nlet l = tokio::net::TcpListener::bind(addr).await?;\nlet (s, c) = hyper::client::conn::http1::handshake(io).await?;\nwriteln!(std::io::stderr(), \"{e}\")?;\n",
            ),
            (
                "crates/ai-tools/src/fsutil.rs",
                "//! Beside the tools: ai-tools does no IO anywhere.\npub(crate) fn read(p: &str) -> String { std::fs::read_to_string(p).unwrap() }\n",
            ),
        ],
        &[
            &violation(102, "std::fs"),
            &violation(2, "tokio::fs"),
            &violation(3, "reqwest"),
            &violation(4, "std::net"),
            &violation(5, "std::process"),
            &violation(6, "tokio::process"),
            &violation(7, "SystemTime::now"),
            &violation(7, "std::time::SystemTime"),
            &violation(8, "io::stdin"),
            &violation(9, "std::os::*::fs"),
            &violation(9, "std::os::*::net"),
            &violation(10, "Utc::now"),
            &violation(11, "std::time::Instant"),
            &violation(14, "tokio::net"),
            &violation(15, "hyper"),
            &violation(16, "io::stderr"),
        ],
    );
}

#[test]
fn io_free_in_core_and_wire() {
    let violation = |path: &str, line: usize, pattern: &str| {
        format!(
            "crates/{path}:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{pattern}`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[
            (
                "crates/ai-core/src/probe.rs",
                "//! IO in ai-core.\npub fn read(p: &str) -> String { std::fs::read_to_string(p).unwrap() }\npub fn now() -> SystemTime { std::time::SystemTime::now() }\npub fn dial() { let _ = std::net::TcpStream::connect(\"127.0.0.1:1\"); }\nlet t = tokio::time::Instant::now(); tokio::time::sleep(d).await;\nuse std::time::{Duration, Instant};\n",
            ),
            (
                "crates/wire-openai/src/sse.rs",
                "//! Wire.\nuse std::io::{self, stdout, Write};\nlet c = reqwest::Client::new();\n",
            ),
            (
                "crates/wire-ui/src/agui.rs",
                "//! Ui.\nlet f = tokio::fs::read(p);\nlet t = time::OffsetDateTime::now_utc();\nlet here = std::path::absolute(p);\nlet parent = std::os::unix::process::parent_id();\n",
            ),
            (
                "crates/graph/src/driver.rs",
                "//! Loop.\nlet saved = std::fs::write(p, state);\nlet stop = tokio::signal::ctrl_c().await;\n",
            ),
        ],
        &[
            &violation("ai-core/src/probe.rs", 2, "std::fs"),
            &violation("ai-core/src/probe.rs", 3, "SystemTime::now"),
            &violation("ai-core/src/probe.rs", 3, "std::time::SystemTime"),
            &violation("ai-core/src/probe.rs", 4, "std::net"),
            &violation("ai-core/src/probe.rs", 6, "std::time::Instant"),
            &violation("graph/src/driver.rs", 2, "std::fs"),
            &violation("graph/src/driver.rs", 3, "tokio::signal"),
            &violation("wire-openai/src/sse.rs", 2, "io::stdout"),
            &violation("wire-openai/src/sse.rs", 3, "reqwest"),
            &violation("wire-ui/src/agui.rs", 2, "tokio::fs"),
            &violation("wire-ui/src/agui.rs", 3, "OffsetDateTime::now*"),
            &violation("wire-ui/src/agui.rs", 4, "std::path::absolute"),
            &violation("wire-ui/src/agui.rs", 5, "std::os::*::process"),
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
            "crates/ai-tools/src/tools/env.rs:2: TOOL_FILE_PURITY: ai-tools does no IO of its own (`std::env`); use a capability, or `Clock` for time",
            "crates/ai-tools/src/tools/env.rs:2: TOOL_FILE_PURITY: ai-tools does no IO of its own (`env::var*`); use a capability, or `Clock` for time",
        ],
    );
}

#[test]
fn no_schema_lib_in_core_and_wire() {
    let violation = |path: &str, line: usize, name: &str| {
        format!(
            "crates/{path}:{line}: NO_SCHEMA_LIB: ai-core and the wire codecs never name `{name}`; schemas live in ai-tools"
        )
    };
    check(
        &[
            (
                "crates/ai-core/src/schema.rs",
                "//! Schema.\nuse jsonschema::Validator;\n#[derive(::schemars::JsonSchema)]\nlet c = boon::Compiler::new();\nlet v = jsonschema_valid::Config::from_schema(s, None);\nuse valico as v;\n",
            ),
            (
                "crates/wire-openai/src/lib.rs",
                "//! Wire.\nuse {serde::Serialize, schemars::JsonSchema};\n",
            ),
            (
                "crates/wire-ui/src/ai_sdk.rs",
                "//! Ui.\n#[derive(schemars::JsonSchema)]\npub struct UiMessage {}\n",
            ),
            (
                "crates/ai-tools/src/bind.rs",
                "//! Bind.\nuse jsonschema::Validator;\n",
            ),
        ],
        &[
            &violation("ai-core/src/schema.rs", 2, "jsonschema"),
            &violation("ai-core/src/schema.rs", 3, "schemars"),
            &violation("ai-core/src/schema.rs", 4, "boon"),
            &violation("ai-core/src/schema.rs", 5, "jsonschema_valid"),
            &violation("ai-core/src/schema.rs", 6, "valico"),
            &violation("wire-openai/src/lib.rs", 2, "schemars"),
            &violation("wire-ui/src/ai_sdk.rs", 2, "schemars"),
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

/// An LLM runtime counts tokens: a context's token budget, or the `Usage` it holds, is a count,
/// not a secret; a token that is a credential is still one.
/// A type a macro makes of what it is handed (`struct $n { pub $f: String }`) is each type the
/// names an invocation hands it could make, at the invocation: a context named, or a member
/// named or typed, by one of them is checked as if written there, whichever file or crate
/// defines the macro and through a macro that hands the names on; a macro variable's own name
/// (`$token`) names no member.
#[test]
fn a_type_a_macro_makes_of_what_it_is_handed_is_checked() {
    let m = "crates/ai-core/src/m.rs";
    let u = "crates/ai-core/src/u.rs";
    check(
        &[
            (
                m,
                "//! Makes types of the names it is handed.\nmacro_rules! named {\n    ($n:ident) => { pub struct $n { pub api_key: String } };\n}\nmacro_rules! field {\n    ($token:ident) => { pub struct RunContext { pub run_id: String, pub $token: String } };\n}\nmacro_rules! typed {\n    ($t:ty) => { pub struct ToolContext(pub $t); };\n}\nmacro_rules! variant {\n    ($v:ident) => { pub enum AuthCtx { None, $v(String) } };\n}\n#[macro_export]\nmacro_rules! both {\n    ($n:ident, $f:ident) => { pub struct $n { pub $f: String } };\n}\nmacro_rules! relay {\n    ($a:ident, $b:ident) => { both!($a, $b); };\n}\nnamed!(AgentContext);\nfield!(bearer);\ntyped!(Auth);\nvariant!(Cookie);\nrelay!(ApprovalContext, password);\nnamed!(Usage);\nfield!(tenant_id);\n",
            ),
            (
                u,
                "//! Uses the exported one, and holds a secret a macro makes.\ncrate::both!(SessionCtx, secret);\ncrate::both!(Budget, max_tokens);\npub struct Auth { pub header: String }\n",
            ),
        ],
        &[
            &format!(
                "{m}:21: NO_SECRET_IN_CONTEXT: `AgentContext.api_key` is named like a secret (apikey); keep a reference and resolve it through a capability"
            ),
            &format!(
                "{m}:22: NO_SECRET_IN_CONTEXT: `RunContext.bearer` is named like a secret (bearer); keep a reference and resolve it through a capability"
            ),
            &format!(
                "{m}:24: NO_SECRET_IN_CONTEXT: `AuthCtx.Cookie` is named like a secret (cookie); keep a reference and resolve it through a capability"
            ),
            &format!(
                "{m}:25: NO_SECRET_IN_CONTEXT: `ApprovalContext.password` is named like a secret (password); keep a reference and resolve it through a capability"
            ),
            &format!(
                "{u}:2: NO_SECRET_IN_CONTEXT: `SessionCtx.secret` is named like a secret (secret); keep a reference and resolve it through a capability"
            ),
            &format!(
                "{u}:4: NO_SECRET_IN_CONTEXT: `Auth.header` is named like a secret (header) and `ToolContext.0` holds it; keep a reference and resolve it through a capability"
            ),
        ],
    );
}

#[test]
fn token_counts_in_a_context_are_not_secrets() {
    check(
        &[
            (
                "crates/ai-core/src/ctx.rs",
                "//! Ctx.\npub struct RunContext {\n    pub max_tokens: Option<u32>,\n    pub token_budget: u64,\n    pub usage: Usage,\n    pub api_token_count: u32,\n    pub max_tokens_secret: String,\n}\n",
            ),
            (
                "crates/ai-core/src/usage.rs",
                "//! Usage.\npub struct Usage { pub input_tokens: u64, pub prompt_tokens: u64, pub total_tokens: u64 }\n",
            ),
        ],
        &[
            "crates/ai-core/src/ctx.rs:7: NO_SECRET_IN_CONTEXT: `RunContext.max_tokens_secret` is named like a secret (secret); keep a reference and resolve it through a capability",
        ],
    );
}

#[test]
fn no_secret_in_context_widened() {
    let violation = |line: usize, member: &str, word: &str| {
        format!(
            "crates/graph/src/ctx.rs:{line}: NO_SECRET_IN_CONTEXT: `{member}` is named like a secret ({word}); keep a reference and resolve it through a capability"
        )
    };
    let held = |line: usize, member: &str, word: &str, holder: &str| {
        format!(
            "crates/graph/src/auth.rs:{line}: NO_SECRET_IN_CONTEXT: `{member}` is named like a secret ({word}) and `{holder}` holds it; keep a reference and resolve it through a capability"
        )
    };
    check(
        &[
            (
                "crates/graph/src/ctx.rs",
                "//! Ctx.\npub struct RequestContext {\n    pub credentials: Option<String>,\n    pub auth_header: Option<String>,\n    pub openai_key: String,\n    pub bearer: String,\n    pub headers: BTreeMap<String, String>,\n    pub private_key: String,\n    pub cookie: String,\n    pub signingKey: Vec<u8>,\n    pub idempotency_key: String,\n    pub cache_key: String,\n    pub key_id: String,\n    pub connection: Option<Arc<ConnectionAuth>>,\n    pub scope: crate::auth::Scope,\n    pub tenant: Tenant,\n    pub peer: PeerContext,\n}\npub enum CallContext {\n    #[serde(rename = \"bearer\")]\n    Bearer { token: String },\n    Anonymous,\n    Signed(SigningKeys),\n}\nstruct Wrapped;\npub struct TupleContext(pub Session);\npub struct PeerContext { pub peer_id: String }\n",
            ),
            (
                "crates/graph/src/auth.rs",
                "//! Types a context holds: checked at any depth.\npub struct ConnectionAuth { pub access_token: String, pub connection_id: String }\npub struct Scope { pub password: String }\npub enum SigningKeys { Hmac { secret: Vec<u8> }, ApiKey(String) }\npub struct Session(String, Nested);\npub struct Tenant { pub tenant_id: String, pub deeper: Nested }\npub struct Nested { pub token: String }\n",
            ),
            (
                "crates/adapters/src/auth.rs",
                "//! Another crate's `ConnectionAuth` is not followed.\npub struct ConnectionAuth { pub access_token: String }\n",
            ),
        ],
        &[
            &held(
                2,
                "ConnectionAuth.access_token",
                "token",
                "RequestContext.connection",
            ),
            &held(3, "Scope.password", "password", "RequestContext.scope"),
            &held(4, "SigningKeys.secret", "secret", "CallContext.Signed"),
            &held(4, "SigningKeys.ApiKey", "apikey", "CallContext.Signed"),
            // Two levels down: `tenant: Tenant { deeper: Nested }`, `TupleContext(Session(..,
            // Nested))`.
            &held(7, "Nested.token", "token", "RequestContext.tenant"),
            &held(7, "Nested.token", "token", "TupleContext.0"),
            &violation(3, "RequestContext.credentials", "credential"),
            &violation(4, "RequestContext.auth_header", "header"),
            &violation(5, "RequestContext.openai_key", "key"),
            &violation(6, "RequestContext.bearer", "bearer"),
            &violation(7, "RequestContext.headers", "header"),
            &violation(8, "RequestContext.private_key", "privatekey"),
            &violation(9, "RequestContext.cookie", "cookie"),
            &violation(10, "RequestContext.signingKey", "key"),
            &violation(21, "CallContext.Bearer", "bearer"),
            &violation(21, "CallContext.token", "token"),
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

/// A file whose brackets do not balance (no Rust, but any `.rs` file is read) is scanned
/// without a panic: a closer with nothing open ends a group the scan looks for.
#[test]
fn a_closer_with_nothing_open_is_no_panic() {
    check(
        &[
            (
                "crates/graph/src/a.rs",
                "//! Unbalanced.\nmacro_rules! m )\nstruct $n { a: u8 }\n",
            ),
            (
                "crates/graph/src/b.rs",
                "//! Unbalanced.\nmacro_rules! m } struct $n { $ }\n",
            ),
        ],
        &[],
    );
}

#[test]
fn the_repository_scan_fails_when_it_sees_nothing() {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir_all(root.path().join("crates/adapters/src")).unwrap();
    fs::write(root.path().join("crates/adapters/src/lib.rs"), "//! Lib.\n").unwrap();
    let (violations, _) = super::check_repo(root.path(), &[], &[]).unwrap();
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
            "IO_FREE",
            "IO_FREE",
            "NO_SCHEMA_LIB",
            "NO_SECRET_IN_CONTEXT",
            "NO_SECRET_IN_CONTEXT",
            "NO_DEFAULT_EXECUTABLE_CATALOG",
            "NO_DEFAULT_EXECUTABLE_CATALOG",
        ],
        "{violations:#?}"
    );
    assert!(
        violations
            .iter()
            .all(|v| v.starts_with("xtask/src/sources.rs: SCANNER_SAW_NOTHING: "))
    );
}

#[test]
fn raw_identifiers_are_the_identifiers_they_spell() {
    check(
        &[
            (
                "crates/graph/src/driver.rs",
                "//! Driver.\nlet out = tool.r#exec(permit, args);\n",
            ),
            (
                "crates/ai-core/src/probe.rs",
                "//! A raw `use` is a variable, not an import.\nlet r#use = 1 as u8 + r#std::r#fs::read(p).len() as u8;\n",
            ),
            (
                "crates/adapters/src/http.rs",
                "//! Http.\nuse r#std::r#env;\n",
            ),
            (
                "crates/graph/src/ctx.rs",
                "//! Ctx.\npub struct RunContext { pub r#api_key: String }\n",
            ),
        ],
        &[
            "crates/adapters/src/http.rs:2: NO_ENV: the environment is read only in cogni-bootstrap (and xtask); take configuration as a parameter",
            "crates/ai-core/src/probe.rs:2: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::fs`); IO lives in adapters, time comes through `Clock`",
            "crates/graph/src/ctx.rs:2: NO_SECRET_IN_CONTEXT: `RunContext.api_key` is named like a secret (apikey); keep a reference and resolve it through a capability",
            "crates/graph/src/driver.rs:2: ARCH_SINGLE_EXECUTION_PATH: a tool's `exec` is called outside the runner; go through the runner (`run_tool`)",
        ],
    );
}

#[test]
fn imports_and_aliases_are_followed() {
    let io_free = |path: &str, line: usize, pattern: &str| {
        format!(
            "crates/{path}:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{pattern}`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[
            (
                "crates/ai-core/src/probe.rs",
                "//! IO under other names.\nuse std as s;\nextern crate std as stdlib;\nuse std::os::unix;\nuse std::time;\nuse tokio::{self as t};\nlet a = s::fs::read(p);\nlet b = stdlib::net::TcpStream::connect(x);\nlet c = unix::fs::symlink(a, b);\nlet d = time::Instant::now();\nlet e = t::fs::read(p).await;\nuse s::process as run;\nlet f = run::Command::new(\"ls\");\nuse std::io::Write as _;\nlet g = time::Duration::from_secs(1);\n",
            ),
            (
                "crates/wire-ui/src/glob.rs",
                "//! A glob import of std.\nuse std::*;\nlet f = fs::read(p);\n",
            ),
            (
                "crates/adapters/src/http.rs",
                "//! Http.\nuse ::std as base;\nlet a = base::env::args();\n",
            ),
            (
                "crates/graph/src/driver.rs",
                "//! Driver.\nuse ai_core::runner::ExecPermit as Permit;\nlet p = Permit::new();\n",
            ),
        ],
        &[
            "crates/adapters/src/http.rs:3: NO_ENV: the environment is read only in cogni-bootstrap (and xtask); take configuration as a parameter",
            &io_free("ai-core/src/probe.rs", 7, "std::fs"),
            &io_free("ai-core/src/probe.rs", 8, "std::net"),
            &io_free("ai-core/src/probe.rs", 9, "std::os::*::fs"),
            &io_free("ai-core/src/probe.rs", 10, "std::time::Instant"),
            &io_free("ai-core/src/probe.rs", 11, "tokio::fs"),
            &io_free("ai-core/src/probe.rs", 12, "std::process"),
            &io_free("ai-core/src/probe.rs", 13, "std::process"),
            "crates/graph/src/driver.rs:3: ARCH_SINGLE_EXECUTION_PATH: `ExecPermit::new` outside the runner (crates/ai-core/src/runner/)",
            &io_free("wire-ui/src/glob.rs", 3, "std::fs"),
        ],
    );
}

#[test]
fn exec_taken_as_a_function_value_counts_as_a_call() {
    check(
        &[(
            "crates/graph/src/driver.rs",
            "//! Driver.\nlet f = BoundTool::exec;\nlet outs = tools.iter().map(<dyn BoundTool>::exec);\nuse crate::exec::Plan;\nfn exec(&self) {}\nlet g = T::exec::<Value>;\n",
        )],
        &[
            "crates/graph/src/driver.rs:2: ARCH_SINGLE_EXECUTION_PATH: a tool's `exec` is called outside the runner; go through the runner (`run_tool`)",
            "crates/graph/src/driver.rs:3: ARCH_SINGLE_EXECUTION_PATH: a tool's `exec` is called outside the runner; go through the runner (`run_tool`)",
            "crates/graph/src/driver.rs:6: ARCH_SINGLE_EXECUTION_PATH: a tool's `exec` is called outside the runner; go through the runner (`run_tool`)",
        ],
    );
}

#[test]
fn secret_names_in_any_case_and_secret_types_in_positional_members() {
    let violation = |line: usize, member: &str, why: &str| {
        format!(
            "crates/graph/src/ctx.rs:{line}: NO_SECRET_IN_CONTEXT: `{member}` {why}; keep a reference and resolve it through a capability"
        )
    };
    check(
        &[(
            "crates/graph/src/ctx.rs",
            "//! Ctx.\npub struct RequestContext {\n    pub OPENAI_KEY: String,\n    pub hmacKEY: Vec<u8>,\n    pub HMACKey: Vec<u8>,\n    pub monkey: u8,\n    pub IDEMPOTENCY_KEY: String,\n}\npub struct AuthContext(pub Option<SecretString>);\npub enum CallContext { Anonymous, Keyed(ApiKey) }\npub struct HeldContext { pub auth: Auth, pub run: RunId }\npub struct Auth(BearerToken);\npub struct RunId(Arc<str>);\npub struct PassContext { pub passphrase: String, pub jwt: String, pub creds: Creds }\n",
        )],
        &[
            &violation(
                3,
                "RequestContext.OPENAI_KEY",
                "is named like a secret (key)",
            ),
            &violation(4, "RequestContext.hmacKEY", "is named like a secret (key)"),
            &violation(5, "RequestContext.HMACKey", "is named like a secret (key)"),
            &violation(
                9,
                "AuthContext.0",
                "holds a type named like a secret (`SecretString`: secret)",
            ),
            &violation(
                10,
                "CallContext.Keyed",
                "holds a type named like a secret (`ApiKey`: apikey)",
            ),
            &violation(
                12,
                "Auth.0",
                "holds a type named like a secret (`BearerToken`: token) and `HeldContext.auth` holds it",
            ),
            &violation(
                14,
                "PassContext.passphrase",
                "is named like a secret (passphrase)",
            ),
            &violation(14, "PassContext.jwt", "is named like a secret (jwt)"),
            &violation(14, "PassContext.creds", "is named like a secret (creds)"),
        ],
    );
}

#[test]
fn foreign_source_reads_raw_strings_and_refuses_computed_reads() {
    const RULE: &str = "ARCH_FOREIGN_SOURCE";
    check(
        &[(
            "crates/wire-ui/src/data.rs",
            "//! Data.\nconst A: &str = include_str!(r\"../../adapters/migrations/0001_init.sql\");\nconst B: &[u8] = include_bytes!(r#\"../../../xtask/Cargo.toml\"#);\nconst C: &str = include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../adapters/x.sql\"));\n#[path = r\"../../graph/src/x.rs\"]\nmod x;\nconst D: &str = include_str!(r\"own.txt\");\n",
        )],
        &[
            &format!(
                "crates/wire-ui/src/data.rs:2: {RULE}: `include_str!` reads `../../adapters/migrations/0001_init.sql`, which belongs to another package or lies outside the repository; keep the file in crates/wire-ui/ or at the repository root"
            ),
            &format!(
                "crates/wire-ui/src/data.rs:3: {RULE}: `include_bytes!` reads `../../../xtask/Cargo.toml`, which belongs to another package or lies outside the repository; keep the file in crates/wire-ui/ or at the repository root"
            ),
            &format!(
                "crates/wire-ui/src/data.rs:4: {RULE}: `include_str!` with a computed path cannot be checked; use a plain string literal"
            ),
            &format!(
                "crates/wire-ui/src/data.rs:5: {RULE}: `#[path]` compiles `../../graph/src/x.rs`, which is outside crates/wire-ui/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            ),
        ],
    );
}

#[test]
fn build_environment_reads_other_than_cargos_are_env_reads() {
    const MESSAGE: &str = "the build's environment is read only in cogni-bootstrap (and xtask); outside it, `env!` and `option_env!` name only the variables Cargo sets for the crate (`CARGO_PKG_VERSION`, `CARGO_MANIFEST_DIR`, `OUT_DIR`, …); take configuration as a parameter";
    check(
        &[
            (
                "crates/adapters/src/http.rs",
                "//! Http.\nlet v = env!(\"CARGO_PKG_VERSION\");\nlet d = env!(\"OUT_DIR\");\nlet k = option_env!(\"OPENAI_API_KEY\");\nlet u = env!(\"COGNI_BASE_URL\");\nlet c = option_env!(concat!(\"OPENAI_\", \"API_KEY\"));\n",
            ),
            (
                "crates/bootstrap/src/build.rs",
                "//! The composition root may.\nlet k = option_env!(\"COGNI_DEFAULT_MODEL\");\n",
            ),
        ],
        &[
            &format!("crates/adapters/src/http.rs:4: NO_ENV: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:5: NO_ENV: {MESSAGE}"),
            &format!("crates/adapters/src/http.rs:6: NO_ENV: {MESSAGE}"),
        ],
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_among_crate_sources_is_reported() {
    let root = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let full = root.path().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, text).unwrap();
    };
    write(
        "elsewhere/mod.rs",
        "//! Unscanned.\npub fn f() { std::fs::read(\"/etc/passwd\"); }\n",
    );
    write("elsewhere/clock.rs", "//! Another crate's file.\n");
    write(
        "crates/ai-tools/src/lib.rs",
        "//! Tools.\nmod io;\nmod clock;\n",
    );
    let link = |target: &str, path: &str| {
        std::os::unix::fs::symlink(root.path().join(target), root.path().join(path)).unwrap();
    };
    link("elsewhere", "crates/ai-tools/src/io");
    link("elsewhere/clock.rs", "crates/ai-tools/src/clock.rs");
    link("elsewhere", "crates/wire-ui");
    link("elsewhere", "docs");
    const MESSAGE: &str = "ARCH_FOREIGN_SOURCE: a symlink where crate sources live; rustc compiles what it points to, which the scan does not follow; keep the files here (or depend on their crate)";
    let (violations, _) = super::check_tree(root.path(), &[], &[]).unwrap();
    assert_eq!(
        violations,
        [
            format!("crates/ai-tools/src/clock.rs:1: {MESSAGE}"),
            format!("crates/ai-tools/src/io:1: {MESSAGE}"),
            format!("crates/wire-ui:1: {MESSAGE}"),
        ]
    );
}

#[test]
fn a_path_a_macro_completes_counts_for_everything_it_could_name() {
    let io_free = |line: usize, pattern: &str| {
        format!(
            "crates/ai-core/src/m.rs:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{pattern}`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[(
            "crates/ai-core/src/m.rs",
            "//! Macros.\nmacro_rules! read { ($m:ident) => { std::$m::read_to_string(\"p\") } }\nread!(fs);\nmacro_rules! make { ($t:ty) => { <$t>::new() } }\nmacro_rules! id { ($x:ident) => { $crate::id::$x::new(\"x\") } }\nmacro_rules! now { ($c:ident) => { $c::now() } }\n",
        )],
        &[
            "crates/ai-core/src/m.rs:2: NO_ENV: the environment is read only in cogni-bootstrap (and xtask); take configuration as a parameter",
            &io_free(2, "std::fs"),
            &io_free(2, "std::net"),
            &io_free(2, "std::process"),
            &io_free(2, "std::env"),
        ],
    );
}

#[test]
fn print_macros_write_to_stdio() {
    let io_free = |line: usize, pattern: &str| {
        format!(
            "crates/ai-core/src/p.rs:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{pattern}`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[
            (
                "crates/ai-core/src/p.rs",
                "//! Prints.\nprintln!(\"x\");\neprint!(\"x\");\nlet v = dbg!(v);\nstd::print! [\"y\"];\nfn print(&self) {}\nself.print();\nmacro_rules! println { () => {} }\nlet s = format!(\"{v}\");\n",
            ),
            (
                "crates/ai-tools/src/tools/echo.rs",
                "//! Echo.\neprintln!(\"x\");\n",
            ),
            (
                "crates/adapters/src/log.rs",
                "//! Adapters may.\nprintln!(\"x\");\n",
            ),
        ],
        &[
            &io_free(2, "println!"),
            &io_free(3, "eprint!"),
            &io_free(4, "dbg!"),
            &io_free(5, "print!"),
            "crates/ai-tools/src/tools/echo.rs:2: TOOL_FILE_PURITY: ai-tools does no IO of its own (`eprintln!`); use a capability, or `Clock` for time",
        ],
    );
}

#[test]
fn context_types_by_other_spellings() {
    let violation = |line: usize, member: &str, word: &str| {
        format!(
            "crates/graph/src/{}:{line}: NO_SECRET_IN_CONTEXT: `{member}` is named like a secret ({word}); keep a reference and resolve it through a capability",
            if member.starts_with("Agent") {
                "session.rs"
            } else {
                "ctx.rs"
            }
        )
    };
    check(
        &[
            (
                "crates/graph/src/ctx.rs",
                "//! Ctx.\npub struct ToolCtx { pub api_key: String }\npub type AgentContext = std::sync::Arc<Session>;\nunion RawContext { token: [u8; 32] }\ntype Output = String;\nfn union(a: u8) {}\n",
            ),
            (
                "crates/graph/src/session.rs",
                "//! The type behind an alias.\npub struct Session { pub run_id: String, pub password: String }\n",
            ),
        ],
        &[
            &violation(2, "ToolCtx.api_key", "apikey"),
            &violation(4, "RawContext.token", "token"),
            &violation(2, "AgentContext.password", "password"),
        ],
    );
}

#[test]
fn folders_skipped_elsewhere_are_scanned_among_crate_sources() {
    let io = |path: &str| {
        format!(
            "crates/{path}:2: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::fs`); IO lives in adapters, time comes through `Clock`"
        )
    };
    const FS: &str = "//! Compiled by `mod`.\nlet a = std::fs::read(p);\n";
    check(
        &[
            ("crates/ai-core/src/target/mod.rs", FS),
            ("crates/ai-core/src/.hidden/x.rs", FS),
            ("crates/wire-ui/src/node_modules/y.rs", FS),
            ("crates/wire-ui/src/fuzz/corpus/z.rs", FS),
            ("target/debug/build/out.rs", "fn f() {}\n"),
            ("crates/ai-core/.cargo/x.rs", "fn f() {}\n"),
        ],
        &[
            &io("ai-core/src/.hidden/x.rs"),
            &io("ai-core/src/target/mod.rs"),
            &io("wire-ui/src/fuzz/corpus/z.rs"),
            &io("wire-ui/src/node_modules/y.rs"),
        ],
    );
}

#[test]
fn compiled_files_are_rust_files_the_rules_read() {
    const RULE: &str = "ARCH_FOREIGN_SOURCE";
    check(
        &[
            (
                "crates/ai-tools/src/lib.rs",
                "//! Tools.\n#[path = \"imp.inc\"]\nmod imp;\n#[path = \"../gen/io.rs\"]\nmod io;\ninclude!(\"../build/table.rs\");\ninclude!(\"own.rs\");\n#[path = \"tools/sub.rs\"]\nmod sub;\n",
            ),
            (
                "crates/ai-tools/gen/io.rs",
                "//! Unchecked.\nlet a = std::fs::read(p);\n",
            ),
        ],
        &[
            &format!(
                "crates/ai-tools/src/lib.rs:2: {RULE}: `#[path]` compiles `imp.inc`, which is not a `.rs` file, so no rule reads it; give it the `.rs` extension"
            ),
            &format!(
                "crates/ai-tools/src/lib.rs:4: {RULE}: `#[path]` compiles `../gen/io.rs`, which is outside crates/ai-tools/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            ),
            &format!(
                "crates/ai-tools/src/lib.rs:6: {RULE}: `include!` compiles `../build/table.rs`, which is outside crates/ai-tools/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            ),
        ],
    );
}

#[test]
fn renamed_macros_are_still_watched() {
    check(
        &[(
            "crates/wire-ui/src/m.rs",
            "//! Renamed macros.\nuse std::include_str as text;\nuse std::option_env as build_var;\nuse std::println as say;\nconst A: &str = text!(\"../../adapters/migrations/0001_init.sql\");\nconst K: Option<&str> = build_var!(\"OPENAI_API_KEY\");\nfn f() { say!(\"x\"); }\n",
        )],
        &[
            "crates/wire-ui/src/m.rs:5: ARCH_FOREIGN_SOURCE: `include_str!` reads `../../adapters/migrations/0001_init.sql`, which belongs to another package or lies outside the repository; keep the file in crates/wire-ui/ or at the repository root",
            "crates/wire-ui/src/m.rs:6: NO_ENV: the build's environment is read only in cogni-bootstrap (and xtask); outside it, `env!` and `option_env!` name only the variables Cargo sets for the crate (`CARGO_PKG_VERSION`, `CARGO_MANIFEST_DIR`, `OUT_DIR`, …); take configuration as a parameter",
            "crates/wire-ui/src/m.rs:7: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`println!`); IO lives in adapters, time comes through `Clock`",
        ],
    );
}

#[test]
fn every_system_time_can_read_the_wall_clock() {
    let io_free = |line: usize, pattern: &str| {
        format!(
            "crates/ai-core/src/t.rs:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{pattern}`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[(
            "crates/ai-core/src/t.rs",
            "//! Time.\nlet a = std::time::UNIX_EPOCH.elapsed();\nuse std::time::{Duration, SystemTime};\nlet b = SystemTime::UNIX_EPOCH.elapsed();\nlet d = Duration::from_secs(1);\n",
        )],
        &[
            &io_free(2, "std::time::UNIX_EPOCH"),
            &io_free(3, "std::time::SystemTime"),
            &io_free(4, "std::time::SystemTime"),
        ],
    );
}

/// The finding for IO (`what`) at `line` of `crates/ai-tools/src/tools/probe.rs`.
fn probe_violation(line: usize, what: &str) -> String {
    format!(
        "crates/ai-tools/src/tools/probe.rs:{line}: TOOL_FILE_PURITY: ai-tools does no IO of its own (`{what}`); use a capability, or `Clock` for time"
    )
}

/// A method a type of the file defines itself (`fn is_dir` of a workspace entry), called on
/// `self` in that `impl`, is that type's, not `Path`'s: calling it is not IO. Called on anything
/// else it may be `Path`'s (the scan cannot tell a receiver's type), so a method of that name
/// defined anywhere in the file does not hide `Path::new(p).is_dir()`; `Path::is_dir(&p)` is IO
/// too.
#[test]
fn path_methods_that_touch_the_filesystem_are_io() {
    check(
        &[(
            "crates/ai-tools/src/tools/probe.rs",
            "//! Probe.\nlet a = std::path::Path::new(p).exists();\nlet b = PathBuf::from(p).read_dir()?;\nlet c = Path::canonicalize(&p);\nlet d = spec.metadata;\nuse crate::metadata::Meta;\nimpl Entry { fn is_dir(&self) -> bool { self.kind == Kind::Dir }\nfn is_folder(&self) -> bool { self.is_dir() } }\nlet real = Path::new(p).is_dir();\nfn metadata(&self) -> Meta { todo() }\nlet m = std::path::PathBuf::from(p).metadata()?;\nlet dirs = entries.iter().filter(|e| e.is_dir());\n",
        )],
        &[
            &probe_violation(2, "exists()"),
            &probe_violation(3, "read_dir()"),
            &probe_violation(4, "canonicalize()"),
            &probe_violation(9, "is_dir()"),
            &probe_violation(11, "metadata()"),
            &probe_violation(12, "is_dir()"),
        ],
    );
}

/// Only a call on `self` inside an inherent `impl` that defines the method is told to be of
/// that method: in a trait's `impl` for `Path` (or another file's, or a type that derefs to
/// `Path`), `self.metadata()` is `Path`'s, whatever the file defines.
#[test]
fn a_method_on_self_is_the_files_own_only_in_the_impl_that_defines_it() {
    check(
        &[(
            "crates/ai-tools/src/tools/probe.rs",
            "//! Probe.\nstruct Entry { kind: Kind }\nimpl Entry {\n    fn is_dir(&self) -> bool { self.kind == Kind::Dir }\n    fn is_folder(&self) -> bool { self.is_dir() }\n}\ntrait Size { fn size(&self) -> u64; fn metadata(&self) -> u64; }\nimpl Size for std::path::Path {\n    fn size(&self) -> u64 { self.metadata().map_or(0, |m| m.len()) }\n    fn metadata(&self) -> u64 { 0 }\n}\nstruct Under(PathBuf);\nimpl Under {\n    fn here(&self) -> bool { self.is_dir() }\n}\n",
        )],
        &[
            &probe_violation(9, "metadata()"),
            &probe_violation(14, "is_dir()"),
        ],
    );
}

#[test]
fn a_dependency_renamed_in_the_manifest_is_read_as_its_crate() {
    let root = tempfile::tempdir().unwrap();
    for (path, text) in [
        (
            "crates/ai-core/src/a.rs",
            "//! Core.\nlet f = rt::fs::read(p).await;\n",
        ),
        (
            "crates/ai-tools/src/t.rs",
            "//! Tool.\nlet r = http::get(u);\n",
        ),
        (
            "crates/graph/src/g.rs",
            "//! Not renamed here.\nlet h = http::get(u);\n",
        ),
    ] {
        let full = root.path().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, text).unwrap();
    }
    let renamed = |folder: &str, name: &str, krate: &str| super::RenamedDep {
        folder: folder.into(),
        name: name.into(),
        krate: krate.into(),
    };
    let renamed = [
        renamed("crates/ai-core/", "rt", "tokio"),
        renamed("crates/ai-tools/", "http", "reqwest"),
    ];
    let (violations, _) = super::check_tree(root.path(), &renamed, &[]).unwrap();
    assert_eq!(
        violations,
        [
            "crates/ai-core/src/a.rs:2: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`tokio::fs`); IO lives in adapters, time comes through `Clock`",
            "crates/ai-tools/src/t.rs:2: TOOL_FILE_PURITY: ai-tools does no IO of its own (`reqwest`); use a capability, or `Clock` for time",
        ]
    );
}

/// A path through another workspace crate (`ai_core::s::fs`, or under the name the manifest
/// renames it to) is read through that crate's imports, as a path through one of the crate's
/// own modules is: `pub use std as s;` names no IO in ai-core, but `ai_core::s::fs` is
/// `std::fs` wherever it is written, also through a crate that re-exports another's.
#[test]
fn a_path_through_another_workspace_crate_is_read_through_its_imports() {
    let root = tempfile::tempdir().unwrap();
    let g = "crates/graph/src/g.rs";
    for (path, text) in [
        (
            "crates/ai-core/src/lib.rs",
            "//! Re-exports std's modules, which name no IO here.\npub use std as s;\npub use std::time as t;\npub use std::io as sio;\npub mod inner {\n    pub use std as st;\n}\n",
        ),
        (
            "crates/ai-tools/src/lib.rs",
            "//! Re-exports ai-core's.\npub use ai_core::t as time;\n",
        ),
        (
            g,
            "//! Reaches IO through the libraries' re-exports.\nuse ai_core::t::Instant;\nfn f() {\n    ai_core::s::fs::read(\"x\");\n    Instant::now();\n    ai_core::sio::stdout();\n    ai_tools::time::UNIX_EPOCH;\n    core2::inner::st::process::exit(1);\n    let d = ai_core::t::Duration::ZERO;\n}\n",
        ),
    ] {
        let full = root.path().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, text).unwrap();
    }
    let renamed = [super::RenamedDep {
        folder: "crates/graph/".into(),
        name: "core2".into(),
        krate: "ai_core".into(),
    }];
    let library = |name: &str, folder: &str| super::Library {
        name: name.into(),
        folder: folder.into(),
    };
    let libraries = [
        library("ai_core", "crates/ai-core/"),
        library("ai_tools", "crates/ai-tools/"),
    ];
    let (violations, _) = super::check_tree(root.path(), &renamed, &libraries).unwrap();
    let io_free = |line: usize, what: &str| {
        format!(
            "{g}:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{what}`); IO lives in adapters, time comes through `Clock`"
        )
    };
    assert_eq!(
        violations,
        [
            io_free(2, "std::time::Instant"),
            io_free(4, "std::fs"),
            io_free(5, "std::time::Instant"),
            io_free(6, "io::stdout"),
            io_free(7, "std::time::UNIX_EPOCH"),
            io_free(8, "std::process"),
        ]
    );
}

#[test]
fn context_bodies_are_found_after_generics_and_where_clauses() {
    let violation = |line: usize, member: &str, why: &str| {
        format!(
            "crates/graph/src/ctx.rs:{line}: NO_SECRET_IN_CONTEXT: `{member}` {why}; keep a reference and resolve it through a capability"
        )
    };
    check(
        &[(
            "crates/graph/src/ctx.rs",
            "//! Ctx.\npub struct RunContext<F: Fn() -> u8> { pub api_key: String, f: F }\npub struct ToolContext<T> where T: Fn(u8) -> u8 { pub secret: T }\npub struct PairContext<T: Into<String>>(T, ApiKey) where T: Clone;\npub enum CallContext<F: FnOnce(u8)> { Bearer(F) }\n",
        )],
        &[
            &violation(2, "RunContext.api_key", "is named like a secret (apikey)"),
            &violation(3, "ToolContext.secret", "is named like a secret (secret)"),
            &violation(
                4,
                "PairContext.0",
                "holds a type named like a secret (`ApiKey`: apikey)",
            ),
            &violation(5, "CallContext.Bearer", "is named like a secret (bearer)"),
        ],
    );
}

/// A file that `include_str!`, `include_bytes!`, `include!` or `#[path]` names through a
/// symlink anywhere in the repository (`crates/bootstrap/data/env` or `cogni.example.toml`
/// pointing at `.env`) is refused: rustc reads what the link points to, which the check does
/// not follow; so is one whose path climbs back out of a link (`../up/../src/x.rs`: `..` is
/// the parent of the link's target), and one through a link that bears the name of a folder
/// the scan skips (`target`); a file beside one is read as usual.
#[test]
fn a_file_named_through_a_symlink_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let full = root.path().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, text).unwrap();
    };
    let s = "crates/bootstrap/src/embed.rs";
    write(".env", "OPENAI_API_KEY=sk-secret\n");
    write("crates/bootstrap/data/plain.txt", "data\n");
    write(
        s,
        "//! Embeds files.\nconst A: &str = include_str!(\"../data/env\");\nconst B: &str = include_str!(\"../../../cogni.example.toml\");\nconst C: &[u8] = include_bytes!(\"../linked/inner.txt\");\nconst D: &str = include_str!(\"../data/plain.txt\");\ninclude!(\"../up/../src/x.rs\");\nconst F: &str = include_str!(\"../target/plain.txt\");\n",
    );
    let link = |target: &str, path: &str| {
        std::os::unix::fs::symlink(root.path().join(target), root.path().join(path)).unwrap();
    };
    link(".env", "crates/bootstrap/data/env");
    link(".env", "cogni.example.toml");
    link("crates/bootstrap/data", "crates/bootstrap/linked");
    write("crates/adapters/src/x.rs", "//! Another crate's.\n");
    link("crates/adapters/src", "crates/bootstrap/up");
    link("crates/bootstrap/data", "crates/bootstrap/target");
    let (violations, _) = super::check_tree(root.path(), &[], &[]).unwrap();
    let through = |line: usize, what: &str, target: &str, link: &str| {
        let verb = if what == "include!" {
            "compiles"
        } else {
            "reads"
        };
        format!(
            "{s}:{line}: ARCH_FOREIGN_SOURCE: `{what}` {verb} `{target}` through a symlink (`{link}`), which the check does not follow; keep the file itself there"
        )
    };
    assert_eq!(
        violations,
        [
            through(
                2,
                "include_str!",
                "../data/env",
                "crates/bootstrap/data/env"
            ),
            through(
                3,
                "include_str!",
                "../../../cogni.example.toml",
                "cogni.example.toml"
            ),
            through(
                4,
                "include_bytes!",
                "../linked/inner.txt",
                "crates/bootstrap/linked"
            ),
            through(6, "include!", "../up/../src/x.rs", "crates/bootstrap/up"),
            through(
                7,
                "include_str!",
                "../target/plain.txt",
                "crates/bootstrap/target"
            ),
        ]
    );
}

#[test]
fn a_path_attribute_inside_an_inline_module_is_refused() {
    // Inside `mod a { … }` a `#[path]` resolves from `src/a/`, not from the file's folder:
    // `../../x/src/evil.rs` is `crates/x/x/src/evil.rs`, where no rule looks.
    check(
        &[(
            "crates/x/src/lib.rs",
            "//! Lib.\nmod a {\n    #[path = \"../../x/src/evil.rs\"]\n    mod e;\n}\n#[path = \"own.rs\"]\nmod own;\nfn f() { let m = { 1 }; }\n",
        )],
        &[
            "crates/x/src/lib.rs:3: ARCH_FOREIGN_SOURCE: `#[path]` inside an inline module resolves from a folder the check does not compute; declare the module at the top of a file",
        ],
    );
}

/// A path that `pattern` matches: a lone `*` segment as `unix`, a trailing `*` completed.
fn path_matching(pattern: &str) -> String {
    pattern
        .split("::")
        .map(|segment| match segment {
            "*" => "unix".to_owned(),
            s => s
                .strip_suffix('*')
                .map_or(s.to_owned(), |s| format!("{s}_x")),
        })
        .collect::<Vec<_>>()
        .join("::")
}

/// Scans one file at `path` holding `lines` (after a doc line) and asserts that each line `k`
/// fires `rule` with `names[k]` in its message.
fn each_line_fires(path: &str, lines: &[String], rule: &str, names: &[String]) {
    let violations = violations(&[(path, &format!("//! Probe.\n{}\n", lines.join("\n")))]);
    for (k, name) in names.iter().enumerate() {
        let at = format!("{path}:{}: {rule}: ", k + 2);
        assert!(
            violations
                .iter()
                .any(|v| v.starts_with(&at) && v.contains(name.as_str())),
            "`{}` did not fire {rule} naming `{name}`: {violations:#?}",
            lines[k]
        );
    }
}

/// Every entry of every pattern list is seen to fire its rules, so none can be dropped or
/// misspelled unnoticed: the IO and clock names (TOOL_FILE_PURITY in ai-tools, IO_FREE in the
/// sans-IO crates), the filesystem methods and the stdio macros, the environment readers
/// (NO_ENV) and the schema libraries (NO_SCHEMA_LIB).
#[test]
fn every_pattern_of_every_list_fires() {
    let io: Vec<&str> = super::IO.iter().chain(super::CLOCK).copied().collect();
    let lines: Vec<String> = io
        .iter()
        .map(|p| format!("let _x = {}::probe();", path_matching(p)))
        .chain(
            super::FS_METHODS
                .iter()
                .map(|m| format!("let _x = p.{m}();")),
        )
        .chain(super::STDIO_MACROS.iter().map(|m| format!("{m}!(\"x\");")))
        .collect();
    let names: Vec<String> = io
        .iter()
        .map(|p| format!("(`{p}`)"))
        .chain(super::FS_METHODS.iter().map(|m| format!("(`{m}()`)")))
        .chain(super::STDIO_MACROS.iter().map(|m| format!("(`{m}!`)")))
        .collect();
    each_line_fires(
        "crates/ai-tools/src/tools/probe.rs",
        &lines,
        "TOOL_FILE_PURITY",
        &names,
    );
    for place in super::SANS_IO {
        each_line_fires(&format!("{place}probe.rs"), &lines, "IO_FREE", &names);
    }

    let env: Vec<String> = super::ENV_PATHS
        .iter()
        .map(|p| format!("let _x = {}::probe();", path_matching(p)))
        .collect();
    let anything = vec![String::new(); env.len()];
    each_line_fires("crates/adapters/src/probe.rs", &env, "NO_ENV", &anything);

    let schema: Vec<String> = super::SCHEMA_LIBS
        .iter()
        .map(|lib| format!("let _x = {lib}::probe();"))
        .collect();
    let named: Vec<String> = super::SCHEMA_LIBS
        .iter()
        .map(|lib| format!("`{lib}`"))
        .collect();
    for place in super::SANS_IO {
        each_line_fires(
            &format!("{place}probe.rs"),
            &schema,
            "NO_SCHEMA_LIB",
            &named,
        );
    }
}

#[test]
fn macros_invoked_with_brackets_or_braces_are_still_read() {
    const ENV: &str = "the build's environment is read only in cogni-bootstrap (and xtask); outside it, `env!` and `option_env!` name only the variables Cargo sets for the crate (`CARGO_PKG_VERSION`, `CARGO_MANIFEST_DIR`, `OUT_DIR`, …); take configuration as a parameter";
    check(
        &[(
            "crates/ai-core/src/brackets.rs",
            "//! Any delimiter invokes a macro.\ninclude![\"../../adapters/src/lib.rs\"];\ninclude! {\"../../adapters/src/lib.rs\"}\nconst S: &str = include_str![\"../../adapters/Cargo.toml\"];\nconst K: &str = env![\"OPENAI_API_KEY\"];\nconst O: Option<&str> = option_env! {\"OPENAI_API_KEY\"};\nconst V: &str = env![\"CARGO_PKG_VERSION\"];\n",
        )],
        &[
            "crates/ai-core/src/brackets.rs:2: ARCH_FOREIGN_SOURCE: `include!` compiles `../../adapters/src/lib.rs`, which is outside crates/ai-core/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)",
            "crates/ai-core/src/brackets.rs:3: ARCH_FOREIGN_SOURCE: `include!` compiles `../../adapters/src/lib.rs`, which is outside crates/ai-core/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)",
            "crates/ai-core/src/brackets.rs:4: ARCH_FOREIGN_SOURCE: `include_str!` reads `../../adapters/Cargo.toml`, which belongs to another package or lies outside the repository; keep the file in crates/ai-core/ or at the repository root",
            &format!("crates/ai-core/src/brackets.rs:5: NO_ENV: {ENV}"),
            &format!("crates/ai-core/src/brackets.rs:6: NO_ENV: {ENV}"),
        ],
    );
}

#[test]
fn escapes_in_a_path_literal_are_read_as_the_compiler_reads_them() {
    const RULE: &str = "ARCH_FOREIGN_SOURCE";
    check(
        &[
            (
                "crates/ai-core/src/escaped.rs",
                "//! `.\\x2e` is `..` to rustc.\ninclude!(\".\\x2e/.\\u{2e}/adapters/src/lib.rs\");\n#[path = \"sub/\\\n    .\\x2e/.\\x2e/.\\x2e/graph/src/x.rs\"]\nmod x;\nconst S: &str = include_str!(\".\\x2e/.\\x2e/adapters/Cargo.toml\");\ninclude!(\"own\\x2ers\");\n",
            ),
            ("crates/ai-core/src/own.rs", "//! Own.\n"),
        ],
        &[
            &format!(
                "crates/ai-core/src/escaped.rs:2: {RULE}: `include!` compiles `../../adapters/src/lib.rs`, which is outside crates/ai-core/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            ),
            &format!(
                "crates/ai-core/src/escaped.rs:3: {RULE}: `#[path]` compiles `sub/../../../graph/src/x.rs`, which is outside crates/ai-core/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            ),
            &format!(
                "crates/ai-core/src/escaped.rs:6: {RULE}: `include_str!` reads `../../adapters/Cargo.toml`, which belongs to another package or lies outside the repository; keep the file in crates/ai-core/ or at the repository root"
            ),
        ],
    );
}

#[test]
fn a_name_another_module_imports_is_read_as_its_import() {
    const IO: &str = "IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::fs`); IO lives in adapters, time comes through `Clock`";
    check(
        &[
            (
                "crates/ai-core/src/inline.rs",
                "//! A re-export in an inline module, and a parent's import.\nmod a {\n    pub use std as s2;\n}\nuse std as s3;\nfn f() {\n    a::s2::fs::read(\"x\");\n}\nmod b {\n    fn g() {\n        super::s3::fs::read(\"x\");\n    }\n}\n",
            ),
            (
                "crates/ai-core/src/lib.rs",
                "//! Root.\nmod inline;\nmod s;\nmod t;\n",
            ),
            (
                "crates/ai-core/src/s.rs",
                "//! Re-exports.\npub use std as s4;\npub use std::os as o;\n",
            ),
            (
                "crates/ai-core/src/t.rs",
                "//! Uses another file's re-exports.\nuse crate::s::*;\nfn f() {\n    crate::s::s4::fs::read(\"x\");\n    s4::fs::read(\"x\");\n    super::s::o::unix::fs::symlink(\"a\", \"b\");\n}\n",
            ),
            (
                "crates/ai-core/src/globs.rs",
                "//! Glob imports, which multiply a path's spellings.\nuse m0::*;\nuse m1::*;\nuse m2::*;\nuse m3::*;\nuse m4::*;\nuse m5::*;\nuse m6::*;\nuse m7::*;\nuse m8::*;\nuse m9::*;\nuse m10::*;\nuse m11::*;\nuse m12::*;\nuse m13::*;\nuse m14::*;\nuse m15::*;\nuse m16::*;\nfn f() {\n    crate::s::s4::fs::read(\"x\");\n}\n",
            ),
            (
                "crates/graph/src/clean.rs",
                "//! Another crate's re-export names nothing here, nor does an external crate's path.\nfn f() {\n    crate::s::s4::fs::read(\"x\");\n    tokio::s4::fs::read(\"x\");\n}\n",
            ),
        ],
        &[
            &format!("crates/ai-core/src/globs.rs:20: {IO}"),
            &format!("crates/ai-core/src/inline.rs:7: {IO}"),
            &format!("crates/ai-core/src/inline.rs:11: {IO}"),
            &format!("crates/ai-core/src/t.rs:4: {IO}"),
            &format!("crates/ai-core/src/t.rs:5: {IO}"),
            "crates/ai-core/src/t.rs:6: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::os::*::fs`); IO lives in adapters, time comes through `Clock`",
        ],
    );
}

/// A glob import brings lone names too: after `use std::io::*;`, `stdin()` is std's; after
/// `use tokio::io::*;`, `stdout()` is tokio's.
#[test]
fn a_lone_name_a_glob_import_brings_is_read_as_its_path() {
    let io_free = |path: &str, pattern: &str| {
        format!(
            "crates/graph/src/{path}:3: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{pattern}`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[
            (
                "crates/graph/src/a.rs",
                "//! Reads stdin.\nuse std::io::*;\nfn f() { let _ = stdin().read_line(&mut line); }\n",
            ),
            (
                "crates/graph/src/b.rs",
                "//! Writes to stdout.\nuse tokio::io::*;\nfn f() { let _ = stdout(); }\n",
            ),
            (
                "crates/graph/src/c.rs",
                "//! Names its own module's items.\nuse crate::m::*;\nfn f() { let _ = stdin(); }\n",
            ),
            ("crates/graph/src/m.rs", "//! No IO.\npub fn stdin() {}\n"),
        ],
        &[
            &io_free("a.rs", "io::stdin"),
            &io_free("b.rs", "io::stdout"),
        ],
    );
}

#[test]
fn a_long_chain_of_aliases_is_followed_to_its_end() {
    check(
        &[
            (
                "crates/ai-core/src/modules.rs",
                "//! Each module re-exports the one before.\nmod m0 {\n    pub use std as s0;\n}\nmod m1 {\n    pub use crate::m0::s0 as s1;\n}\nmod m2 {\n    pub use crate::m1::s1 as s2;\n}\nmod m3 {\n    pub use crate::m2::s2 as s3;\n}\nmod m4 {\n    pub use crate::m3::s3 as s4;\n}\nmod m5 {\n    pub use crate::m4::s4 as s5;\n}\nmod m6 {\n    pub use crate::m5::s5 as s6;\n}\nmod m7 {\n    pub use crate::m6::s6 as s7;\n}\nmod m8 {\n    pub use crate::m7::s7 as s8;\n}\nmod m9 {\n    pub use crate::m8::s8 as s9;\n}\nmod m10 {\n    pub use crate::m9::s9 as s10;\n}\nmod m11 {\n    pub use crate::m10::s10 as s11;\n}\nmod m12 {\n    pub use crate::m11::s11 as s12;\n}\nmod m13 {\n    pub use crate::m12::s12 as s13;\n}\nmod m14 {\n    pub use crate::m13::s13 as s14;\n}\nmod m15 {\n    pub use crate::m14::s14 as s15;\n}\nmod m16 {\n    pub use crate::m15::s15 as s16;\n}\nmod m17 {\n    pub use crate::m16::s16 as s17;\n}\nmod m18 {\n    pub use crate::m17::s17 as s18;\n}\nmod m19 {\n    pub use crate::m18::s18 as s19;\n}\nmod m20 {\n    pub use crate::m19::s19 as s20;\n}\nfn f() {\n    crate::m20::s20::fs::read(\"x\");\n}\n",
            ),
            (
                "crates/ai-core/src/chain.rs",
                "//! Each alias renames the one before.\nuse std as a0;\nuse a0 as a1;\nuse a1 as a2;\nuse a2 as a3;\nuse a3 as a4;\nuse a4 as a5;\nuse a5 as a6;\nuse a6 as a7;\nuse a7 as a8;\nuse a8 as a9;\nuse a9 as a10;\nuse a10 as a11;\nuse a11 as a12;\nuse a12 as a13;\nuse a13 as a14;\nuse a14 as a15;\nuse a15 as a16;\nuse a16 as a17;\nuse a17 as a18;\nuse a18 as a19;\nuse a19 as a20;\nfn f() {\n    a20::fs::read(\"x\");\n}\n",
            ),
        ],
        &[
            "crates/ai-core/src/chain.rs:24: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::fs`); IO lives in adapters, time comes through `Clock`",
            "crates/ai-core/src/modules.rs:66: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::fs`); IO lives in adapters, time comes through `Clock`",
        ],
    );
}

#[test]
fn only_the_variables_cargo_sets_for_a_crate_are_cargos() {
    const MESSAGE: &str = "the build's environment is read only in cogni-bootstrap (and xtask); outside it, `env!` and `option_env!` name only the variables Cargo sets for the crate (`CARGO_PKG_VERSION`, `CARGO_MANIFEST_DIR`, `OUT_DIR`, …); take configuration as a parameter";
    check(
        &[(
            "crates/wire-ui/src/build_info.rs",
            "//! `CARGO_` is also the prefix of Cargo's own settings, and of whatever a build script or the caller sets.\nconst T: Option<&str> = option_env!(\"CARGO_REGISTRY_TOKEN\");\nconst S: &str = env!(\"CARGO_SECRET\");\nconst H: &str = env!(\"CARGO_HOME\");\nconst V: &str = env!(\"CARGO_PKG_VERSION_MAJOR\");\nconst M: &str = env!(\"CARGO_MANIFEST_DIR\");\nconst B: &str = env!(\"CARGO_BIN_EXE_cogni\");\nconst C: &str = env!(\"CARGO_CRATE_NAME\");\nconst O: &str = env!(\"OUT_DIR\");\n",
        )],
        &[
            &format!("crates/wire-ui/src/build_info.rs:2: NO_ENV: {MESSAGE}"),
            &format!("crates/wire-ui/src/build_info.rs:3: NO_ENV: {MESSAGE}"),
            &format!("crates/wire-ui/src/build_info.rs:4: NO_ENV: {MESSAGE}"),
        ],
    );
}

#[test]
fn a_crate_a_macro_variable_starts_a_path_with_counts_for_every_crate() {
    let io_free = |pattern: &str| {
        format!(
            "crates/wire-openai/src/m.rs:3: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{pattern}`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[(
            "crates/wire-openai/src/m.rs",
            "//! `read!(std)` reads a file without naming `std::fs`.\nmacro_rules! read {\n    ($k:ident) => { $k::fs::read(\"p\") };\n}\nfn f() {\n    read!(std);\n}\nmacro_rules! make { ($t:ident) => { $t::new() } }\nmacro_rules! at { ($x:expr) => { $x } }\nmacro_rules! inner { () => { $crate::fs::Plan::new() } }\n",
        )],
        &[&io_free("std::fs"), &io_free("tokio::fs")],
    );
}

/// A path made of macro variables only (`$k::$m::read`, `m!(std, fs)`) is no safer than one a
/// variable starts: it counts as every module path it could be; a lone `$x` names nothing. The
/// invocations count too, as the paths the names they hand could make.
#[test]
fn a_path_of_macro_variables_only_counts_for_everything_it_could_name() {
    let violations = violations(&[(
        "crates/graph/src/m.rs",
        "//! `read!(std, fs)` reads a file without naming `std::fs`.\nmacro_rules! read {\n    ($k:ident, $m:ident) => { $k::$m::read(\"p\") };\n}\nmacro_rules! call {\n    ($k:ident, $m:ident, $f:ident) => { $k::$m::$f(\"p\") };\n}\nmacro_rules! at { ($x:expr) => { $x } }\nfn f() {\n    read!(std, fs);\n    call!(std, env, var);\n}\n",
    )]);
    for line in [3, 6] {
        for pattern in ["std::fs", "std::env", "tokio::net", "env::var*"] {
            let io_free = format!(
                "crates/graph/src/m.rs:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{pattern}`); IO lives in adapters, time comes through `Clock`"
            );
            assert!(violations.contains(&io_free), "{io_free}: {violations:#?}");
        }
    }
    let io_free = "crates/graph/src/m.rs:10: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::fs`); IO lives in adapters, time comes through `Clock`";
    assert!(violations.contains(&io_free.to_owned()), "{violations:#?}");
    assert!(
        violations.iter().all(|v| [3, 6, 10, 11]
            .iter()
            .any(|line| v.starts_with(&format!("crates/graph/src/m.rs:{line}:")))),
        "{violations:#?}"
    );
}

/// A path that ends in macro variables alone names an item of what the macro is handed (an
/// enum's variant, `$e::$v`; an associated function, `$t::$f(x)`), not a module of std: it is
/// checked where the macro is invoked, so it is no finding. A `use` of one is, since the name
/// it brings is used past it (`imp!(std, fs);` then `fs::read`).
#[test]
fn a_path_ending_in_macro_variables_alone_is_not_a_module_path() {
    let violations = violations(&[(
        "crates/graph/src/m.rs",
        "//! Names each variant.\nmacro_rules! names {\n    ($e:ident { $($v:ident),* }) => {\n        fn name(x: $e) -> &'static str { match x { $($e::$v => stringify!($v)),* } }\n    };\n}\nmacro_rules! from {\n    ($t:ty, $f:ident) => { $t::$f(1) };\n}\nmacro_rules! imp {\n    ($k:ident, $m:ident) => { use $k::$m; };\n}\n",
    )]);
    let io_free = "crates/graph/src/m.rs:11: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::fs`); IO lives in adapters, time comes through `Clock`";
    assert!(violations.contains(&io_free.to_owned()), "{violations:#?}");
    assert!(
        violations
            .iter()
            .all(|v| v.starts_with("crates/graph/src/m.rs:11:")),
        "{violations:#?}"
    );
}

/// A macro that joins what it is handed into a path (`$k::$m`, `$($p)::*`) builds the path
/// where it is invoked, of lone names no path spells there: `m!(io, stdout)` after an allowed
/// `use std::io;` is `io::stdout()`. The names of such an invocation count as the paths they
/// could make (each two, either way round, and all of them in order), read through the file's
/// imports like any path; another crate's such macro counts too, and so does any other order
/// of the names. Other macros' lone names (`assert_eq!(env, var)`) are no path.
#[test]
fn names_handed_to_a_macro_that_joins_them_into_a_path_count_as_that_path() {
    let io_free = |path: &str, line: usize, pattern: &str| {
        format!(
            "{path}:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{pattern}`); IO lives in adapters, time comes through `Clock`"
        )
    };
    let m = "crates/graph/src/m.rs";
    let u = "crates/wire-ui/src/u.rs";
    check(
        &[
            (
                m,
                "//! Writes to stdout without naming `io::stdout`.\nuse std::io;\nmacro_rules! call {\n    ($k:ident, $m:ident) => { $k::$m() };\n}\nmacro_rules! join {\n    ($($p:ident),*) => { $($p)::*() };\n}\nmacro_rules! swap {\n    ($m:ident, $k:ident) => { $k::$m() };\n}\nfn f() {\n    let _ = call!(io, stdout);\n    let _ = join!(std, time, Instant, now);\n    let _ = swap!(var, env);\n    assert_eq!(env, var);\n    let _ = call!(fmt, Write);\n}\n",
            ),
            (
                "crates/ai-core/src/lib.rs",
                "//! Exports a joining macro.\n#[macro_export]\nmacro_rules! get {\n    ($k:ident, $m:ident) => { $k::$m() };\n}\n",
            ),
            (
                u,
                "//! Uses another crate's.\nuse std::time::SystemTime;\nfn f() {\n    let _ = ai_core::get!(SystemTime, now);\n}\n",
            ),
        ],
        &[
            &io_free(m, 13, "io::stdout"),
            &io_free(m, 14, "std::time::Instant"),
            &format!(
                "{m}:15: NO_ENV: the environment is read only in cogni-bootstrap (and xtask); take configuration as a parameter"
            ),
            &io_free(m, 15, "env::var*"),
            &io_free(u, 2, "std::time::SystemTime"),
            &io_free(u, 4, "SystemTime::now"),
            &io_free(u, 4, "std::time::SystemTime"),
        ],
    );
}

/// A macro that hands what it is handed on to a joining macro (`relay!(io, stdout)` is
/// `call!(io, stdout)`) joins it too, and a joining macro invoked under another name
/// (`pub(crate) use call as run;`) is still one.
#[test]
fn names_handed_on_to_a_joining_macro_count_as_that_path() {
    let m = "crates/graph/src/m.rs";
    let io_free = |line: usize| {
        format!(
            "{m}:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`io::stdout`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[(
            m,
            "//! Writes to stdout through another macro.\nuse std::io;\nmacro_rules! call {\n    ($k:ident, $m:ident) => { $k::$m() };\n}\nmacro_rules! relay {\n    ($a:ident, $b:ident) => { call!($a, $b) };\n}\nmacro_rules! again {\n    ($($t:tt)*) => { relay!($($t)*) };\n}\npub(crate) use call as run;\nfn f() {\n    let _ = relay!(io, stdout);\n    let _ = again!(io, stdout);\n    let _ = run!(io, stdout);\n}\n",
        )],
        &[&io_free(14), &io_free(15), &io_free(16)],
    );
}

/// A macro that invokes a macro or calls a method by a name it is handed (`$n!(…)`,
/// `$t.$m(…)`) makes each name it is handed that macro invoked and that method called, its
/// arguments unread (`call!(include)` is `include!` of a path the scan cannot read), whichever
/// crate defines it, through any macro that hands the names on to it and under any name they
/// are imported as (`say` for `println`); one that only uses them as values (`$a + $b`,
/// `$a..$b`, `$a != $b`) or fields (`$s.$f`) does not, and a name handed to a macro that only
/// calls methods by them (`env`) is no macro invoked.
#[test]
fn names_a_macro_invokes_or_calls_by_are_that_macro_or_method() {
    let m = "crates/graph/src/m.rs";
    let io_free = |line: usize, what: &str| {
        format!(
            "{m}:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{what}`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[
            (
                m,
                "//! Reaches what the rules watch by names it hands macros.\nmacro_rules! call {\n    ($n:ident) => { $n!(\"../../adapters/src/lib.rs\") };\n}\nmacro_rules! on {\n    ($t:expr, $m:ident) => { $t.$m(permit) };\n}\nmacro_rules! relay {\n    ($n:ident) => { call!($n) };\n}\nmacro_rules! sum {\n    ($a:expr, $b:expr) => { ($a + $b, $a..$b) };\n}\ncall!(include);\nconst K: &str = call!(env);\nfn f() {\n    relay!(println);\n    on!(tool, exec);\n    on!(path, exists);\n    crate::ai_core_each!(tool, exec);\n    sum!(exec, exists);\n    use std::println as say;\n    relay!(say);\n}\nmacro_rules! field {\n    ($s:ident, $f:ident) => { ($s.$f, $s != $f) };\n}\nfn g(cfg: Cfg, env: Vec<u8>) {\n    field!(cfg, env);\n    ai_core_each!(env, len);\n}\n",
            ),
            (
                "crates/ai-core/src/lib.rs",
                "//! Exports a macro that calls what it is handed.\n#[macro_export]\nmacro_rules! ai_core_each {\n    ($t:ident, $m:ident) => { $t.$m() };\n}\n",
            ),
        ],
        &[
            &format!(
                "{m}:14: ARCH_FOREIGN_SOURCE: `include!` with a computed path cannot be checked; use a plain string literal"
            ),
            &format!(
                "{m}:15: NO_ENV: the build's environment is read only in cogni-bootstrap (and xtask); outside it, `env!` and `option_env!` name only the variables Cargo sets for the crate (`CARGO_PKG_VERSION`, `CARGO_MANIFEST_DIR`, `OUT_DIR`, …); take configuration as a parameter"
            ),
            &io_free(17, "println!"),
            &format!(
                "{m}:18: ARCH_SINGLE_EXECUTION_PATH: a tool's `exec` is called outside the runner; go through the runner (`run_tool`)"
            ),
            &io_free(19, "exists()"),
            &format!(
                "{m}:20: ARCH_SINGLE_EXECUTION_PATH: a tool's `exec` is called outside the runner; go through the runner (`run_tool`)"
            ),
            &io_free(23, "println!"),
        ],
    );
}

#[test]
fn a_macro_another_file_renames_is_still_watched() {
    check(
        &[
            (
                "crates/graph/src/m.rs",
                "//! Renames macros for the crate.\npub use core::env as build_var;\npub use core::include as compile;\npub use std::println as say;\n",
            ),
            (
                "crates/graph/src/u.rs",
                "//! Invokes them by their new names.\nconst K: &str = crate::m::build_var!(\"OPENAI_API_KEY\");\ncrate::m::compile!(\"../../adapters/src/lib.rs\");\nfn f() {\n    super::m::say!(\"hi\");\n}\n",
            ),
        ],
        &[
            "crates/graph/src/u.rs:2: NO_ENV: the build's environment is read only in cogni-bootstrap (and xtask); outside it, `env!` and `option_env!` name only the variables Cargo sets for the crate (`CARGO_PKG_VERSION`, `CARGO_MANIFEST_DIR`, `OUT_DIR`, …); take configuration as a parameter",
            "crates/graph/src/u.rs:3: ARCH_FOREIGN_SOURCE: `include!` compiles `../../adapters/src/lib.rs`, which is outside crates/graph/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)",
            "crates/graph/src/u.rs:5: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`println!`); IO lives in adapters, time comes through `Clock`",
        ],
    );
}

/// A macro another workspace crate renames (`pub use std::println as say;` in ai-core) is still
/// watched where another crate invokes it, by its path or under a name of its own.
#[test]
fn a_macro_another_workspace_crate_renames_is_still_watched() {
    let root = tempfile::tempdir().unwrap();
    let g = "crates/graph/src/g.rs";
    for (path, text) in [
        (
            "crates/ai-core/src/lib.rs",
            "//! Renames macros for its dependents.\npub use std::println as say;\npub use core::include as inc;\npub use core::env as var;\n",
        ),
        (
            g,
            "//! Invokes ai-core's renamed macros, and renames one again.\nai_core::inc!(\"../../adapters/src/lib.rs\");\nuse ai_core::say as talk;\nfn f() {\n    ai_core::say!(\"x\");\n    let k = ai_core::var!(\"KEY\");\n    talk!(\"y\");\n}\n",
        ),
    ] {
        let full = root.path().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, text).unwrap();
    }
    let libraries = [super::Library {
        name: "ai_core".into(),
        folder: "crates/ai-core/".into(),
    }];
    let (violations, _) = super::check_tree(root.path(), &[], &libraries).unwrap();
    let println = |line: usize| {
        format!(
            "{g}:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`println!`); IO lives in adapters, time comes through `Clock`"
        )
    };
    assert_eq!(
        violations,
        [
            format!(
                "{g}:2: ARCH_FOREIGN_SOURCE: `include!` compiles `../../adapters/src/lib.rs`, which is outside crates/graph/src/; a crate compiles only its own sources, where the rules look (depend on the other crate, where the layering allows it)"
            ),
            println(5),
            format!(
                "{g}:6: NO_ENV: the build's environment is read only in cogni-bootstrap (and xtask); outside it, `env!` and `option_env!` name only the variables Cargo sets for the crate (`CARGO_PKG_VERSION`, `CARGO_MANIFEST_DIR`, `OUT_DIR`, …); take configuration as a parameter"
            ),
            println(7),
        ]
    );
}

/// A path through a module (`super::time`, which a `use super::*` test module makes of
/// `time::Instant`) is read through that module's own imports, not through every import of the
/// name in the crate: `use std::time;` in one file does not make another file's `tokio::time`
/// std's.
#[test]
fn a_module_path_is_read_through_the_named_modules_imports() {
    check(
        &[
            (
                "crates/ai-core/src/lib.rs",
                "//! Root.\nmod a;\nmod b;\nmod c;\n",
            ),
            (
                "crates/ai-core/src/a.rs",
                "//! Std's time, for durations.\nuse std::time;\npub fn d() -> time::Duration {\n    time::Duration::ZERO\n}\n",
            ),
            (
                "crates/ai-core/src/b.rs",
                "//! Tokio's time, and a test module that takes it.\nuse tokio::time;\nfn f() {\n    let t = time::Instant::now();\n}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    fn g() {\n        let t = time::Instant::now();\n        let u = self::super::time::Instant::now();\n    }\n}\n",
            ),
            (
                "crates/ai-core/src/c.rs",
                "//! Its own module's name for tokio's time, read from elsewhere.\npub use tokio::time;\nmod inner {\n    fn h() {\n        let t = crate::c::time::Instant::now();\n        let u = super::time::Instant::now();\n    }\n}\n",
            ),
        ],
        &[],
    );
}

/// A path through a module still finds what that module's imports name, also through its
/// glob imports (`use super::*`) and in another file: `time::Instant` in a test module of a
/// file whose parent imports std's `time` is std's `Instant`.
#[test]
fn a_module_path_through_a_glob_of_the_parent_still_fires() {
    let io_free = |path: &str, line: usize| {
        format!(
            "crates/ai-core/src/{path}:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::time::Instant`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[
            (
                "crates/ai-core/src/lib.rs",
                "//! Root.\nmod b;\nmod c;\nmod e;\nmod f;\n",
            ),
            (
                "crates/ai-core/src/b.rs",
                "//! Tokio's time here.\nuse tokio::time;\n",
            ),
            (
                "crates/ai-core/src/c/mod.rs",
                "//! Std's time, and a test file that takes it.\nuse std::time;\n#[cfg(test)]\nmod tests;\n",
            ),
            (
                "crates/ai-core/src/c/tests.rs",
                "//! Takes its parent's names.\nuse super::*;\nfn g() {\n    let t = time::Instant::now();\n}\n",
            ),
            (
                "crates/ai-core/src/e/mod.rs",
                "//! Std's time, re-exported by a child's glob.\npub use std::time;\npub mod x;\n",
            ),
            (
                "crates/ai-core/src/e/x.rs",
                "//! Its parent's names.\npub use super::*;\n",
            ),
            (
                "crates/ai-core/src/f.rs",
                "//! Names std's time through e::x.\nfn h() {\n    let t = crate::e::x::time::Instant::now();\n    let u = super::e::x::time::Instant::now();\n}\n",
            ),
        ],
        &[
            &io_free("c/tests.rs", 4),
            &io_free("f.rs", 3),
            &io_free("f.rs", 4),
        ],
    );
}

/// Where a path's module cannot be told from the files, a path through modules is still read
/// through every import of its name: an import a `macro_rules!` body makes lands where the macro
/// is invoked, and a `#[path]` puts a file's items in a module its path does not tell.
#[test]
fn a_module_path_whose_module_cannot_be_told_is_read_through_every_import() {
    let io_free = |path: &str, line: usize| {
        format!(
            "crates/{path}:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::fs`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[
            (
                "crates/ai-core/src/lib.rs",
                "//! Root.\nmod a;\nmod b;\nmod c;\n",
            ),
            (
                "crates/ai-core/src/a.rs",
                "//! A macro that imports std where it is invoked.\nmacro_rules! bring {\n    () => {\n        pub use std as s;\n    };\n}\n",
            ),
            ("crates/ai-core/src/b.rs", "//! Invokes it.\nbring!();\n"),
            (
                "crates/ai-core/src/c.rs",
                "//! Names what it brought.\nfn f() {\n    crate::b::s::fs::read(\"x\");\n}\n",
            ),
            (
                "crates/graph/src/lib.rs",
                "//! Root.\n#[path = \"other.rs\"]\nmod x;\nmod y;\n",
            ),
            (
                "crates/graph/src/other.rs",
                "//! Module `x`, by its `#[path]`.\npub use std as s;\n",
            ),
            (
                "crates/graph/src/y.rs",
                "//! Names it.\nfn f() {\n    crate::x::s::fs::read(\"x\");\n}\n",
            ),
        ],
        &[
            &io_free("ai-core/src/c.rs", 3),
            &io_free("graph/src/y.rs", 3),
        ],
    );
}

/// An `include!` invoked under another name (`use std::include as inc;`) puts a file's items
/// in a module its path does not tell, like `include!` itself: a path through the modules of
/// such a crate is read through every import of its name.
#[test]
fn a_renamed_include_makes_the_modules_unknown() {
    check(
        &[
            ("crates/ai-core/src/lib.rs", "//! Root.\nmod b;\nmod c;\n"),
            (
                "crates/ai-core/src/b.rs",
                "//! Takes another file's items.\nuse std::include as inc;\ninc!(\"b_items.rs\");\n",
            ),
            (
                "crates/ai-core/src/b_items.rs",
                "//! Module `b`, by its includer.\npub use std::time as t;\n",
            ),
            (
                "crates/ai-core/src/c.rs",
                "//! Names it.\nfn f() {\n    let n = crate::b::t::Instant::now();\n}\n",
            ),
        ],
        &[
            "crates/ai-core/src/c.rs:3: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::time::Instant`); IO lives in adapters, time comes through `Clock`",
        ],
    );
}

/// One spelling of a path, read from two modules, is read from both: `use self::k::t as w;`
/// in `b` makes `w` of a child that takes it by `use super::w;` `b::k::t`, even where the
/// child has a `k` of its own (which the file-wide spelling `k::t` is read through).
#[test]
fn a_spelling_reached_from_two_modules_is_read_from_each() {
    check(
        &[
            ("crates/ai-core/src/lib.rs", "//! Root.\nmod b;\n"),
            (
                "crates/ai-core/src/b.rs",
                "//! Std's time, under another name.\nmod k {\n    pub use std::time as t;\n}\nuse self::k::t as w;\nmod other {\n    use super::w;\n    mod k {}\n    fn f() {\n        let n = w::Instant::now();\n    }\n}\n",
            ),
        ],
        &[
            "crates/ai-core/src/b.rs:10: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::time::Instant`); IO lives in adapters, time comes through `Clock`",
        ],
    );
}

/// A path an import of another module makes is read through that module's imports from its
/// first segment too: with `use crate::a as aa;` in `c`, its `pub use aa::*;` and
/// `pub use aa::t as tt;` make `crate::c::t` and `crate::c::tt` what `a` imports as `t`.
#[test]
fn an_import_through_another_imports_name_is_read_in_its_module() {
    let io_free = |line: usize| {
        format!(
            "crates/ai-core/src/d.rs:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`std::time::Instant`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[
            (
                "crates/ai-core/src/lib.rs",
                "//! Root.\nmod a;\nmod c;\nmod d;\n",
            ),
            (
                "crates/ai-core/src/a.rs",
                "//! Std's time.\npub use std::time as t;\n",
            ),
            (
                "crates/ai-core/src/c.rs",
                "//! A's names, through a name of its own for `a`.\nuse crate::a as aa;\npub use aa::*;\npub use aa::t as tt;\n",
            ),
            (
                "crates/ai-core/src/d.rs",
                "//! Names them.\nfn f() {\n    let n = crate::c::t::Instant::now();\n    let m = crate::c::tt::Instant::now();\n}\n",
            ),
        ],
        &[&io_free(3), &io_free(4)],
    );
}

/// `extern crate X as Y;` puts `Y` in the crate's extern prelude, which every module sees: a
/// bare `Y::fs` names `X::fs` in any file of the crate, not only in the file that declares it,
/// and `extern crate self as Y;` makes `Y::a::s` the crate's own `crate::a::s`.
#[test]
fn an_extern_crate_alias_is_seen_by_every_module() {
    let io_free = |path: &str, line: usize, pattern: &str| {
        format!(
            "crates/{path}:{line}: IO_FREE: ai-core, graph and the wire codecs do no IO and read no clock (`{pattern}`); IO lives in adapters, time comes through `Clock`"
        )
    };
    check(
        &[
            (
                "crates/ai-core/src/lib.rs",
                "//! Root.\nextern crate std as s;\nextern crate self as me;\nmod a;\nmod b;\n",
            ),
            (
                "crates/ai-core/src/a.rs",
                "//! Names the root's aliases without importing them.\npub use s::net as n;\npub use std as t;\nfn f() {\n    s::fs::read(\"x\");\n    me::a::t::process::Command::new(\"ls\");\n}\nmod inner {\n    fn g() {\n        s::time::Instant::now();\n    }\n}\n",
            ),
            (
                "crates/ai-core/src/b.rs",
                "//! Reaches another module's import of an alias.\nfn f() {\n    crate::a::n::TcpStream::connect(\"x\");\n}\n",
            ),
            (
                "crates/graph/src/lib.rs",
                "//! Another crate's extern prelude names nothing here.\nmod c;\n",
            ),
            (
                "crates/graph/src/c.rs",
                "//! `s` is no alias in this crate.\nfn f() {\n    s::fs::read(\"x\");\n}\n",
            ),
            (
                "crates/wire-ui/src/m.rs",
                "//! An extern crate outside the root counts in every module too.\nextern crate tokio as rt;\n",
            ),
            (
                "crates/wire-ui/src/n.rs",
                "//! Uses it.\nfn f() {\n    rt::fs::read(\"x\");\n}\n",
            ),
        ],
        &[
            &io_free("ai-core/src/a.rs", 2, "std::net"),
            &io_free("ai-core/src/a.rs", 5, "std::fs"),
            &io_free("ai-core/src/a.rs", 6, "std::process"),
            &io_free("ai-core/src/a.rs", 10, "std::time::Instant"),
            &io_free("ai-core/src/b.rs", 3, "std::net"),
            &io_free("wire-ui/src/n.rs", 3, "tokio::fs"),
        ],
    );
}

/// NO_DEFAULT_EXECUTABLE_CATALOG: what hands out bound tools from nothing fires outside the
/// composition root; what is handed what it binds, what is not exported, contracts and the
/// composition root pass.
#[test]
fn no_default_executable_catalog() {
    let fires = |path: &str, line: usize, what: &str, name: &str| {
        format!(
            "{path}:{line}: NO_DEFAULT_EXECUTABLE_CATALOG: {what} gives bound tools (`{name}`) without being handed capabilities: a default executable catalog; export contracts and bind them to capabilities in the composition root (cogni-bootstrap)"
        )
    };
    let catalog = "crates/ai-tools/src/tools/catalog.rs";
    let source = "crates/ai-tools/src/source.rs";
    let alias = "crates/adapters/src/alias.rs";
    let expected = [
        fires(alias, 4, "`pub fn tools`", "Tools"),
        fires(alias, 5, "`pub static ONE`", "Tool"),
        fires(source, 7, "`pub fn standard`", "Builtins"),
        fires(source, 10, "`impl Default for Builtins`", "Builtins"),
        fires(source, 13, "`#[derive(Default)]` of `Stub`", "Stub"),
        fires(catalog, 3, "`pub fn default_tools`", "BoundTool"),
        fires(catalog, 6, "`pub static TOOL_CATALOG`", "StaticToolSource"),
        fires(catalog, 7, "`pub fn catalog`", "StaticToolSource"),
        fires(catalog, 10, "`pub const EMPTY`", "BoundTool"),
        fires(
            catalog,
            11,
            "`impl Default for Registry`",
            "StaticToolSource",
        ),
        fires(catalog, 16, "`pub fn tool`", "BoundTool"),
    ];
    check(
        &[
            (
                catalog,
                "//! A default catalog, every way.\nuse ai_core::{BoundTool, StaticToolSource};\npub fn default_tools() -> Vec<Arc<dyn BoundTool>> {\n    vec![bind(GetCurrentTime::new(Arc::new(Fixed))).unwrap()]\n}\npub static TOOL_CATALOG: LazyLock<StaticToolSource> = LazyLock::new(catalog);\npub const async fn catalog() -> ai_core::StaticToolSource {\n    todo()\n}\npub const EMPTY: &[&dyn BoundTool] = &[];\nimpl Default for Registry {\n    fn default() -> Self {\n        Self { source: StaticToolSource::new(default_tools()).unwrap() }\n    }\n}\npub fn tool() -> impl ai_core::BoundTool {\n    Echo\n}\n",
            ),
            (
                source,
                "//! A source of the crate's own, its constructor and `Default`.\npub struct Builtins;\nimpl ToolSource for Builtins {\n    fn tool_specs(&self) -> Vec<ToolSpec> { Vec::new() }\n}\nimpl Builtins {\n    pub fn standard() -> Self { Builtins }\n    pub fn with(clock: Arc<dyn Clock>) -> Self { Builtins }\n}\nimpl Default for Builtins {\n    fn default() -> Self { Builtins }\n}\n#[derive(Clone, Default)]\npub struct Stub;\nimpl<T: Send> ai_core::BoundTool for Arc<Stub> {}\n",
            ),
            (
                alias,
                "//! Renamed, aliased, and behind a wrapper.\nuse ai_core::BoundTool as Tool;\ntype Tools = Vec<Arc<dyn Tool>>;\npub fn tools() -> Tools { Vec::new() }\npub static mut ONE: Option<Box<dyn Tool>> = None;\n",
            ),
            (
                "crates/ai-core/src/source.rs",
                "//! The port: constructors handed what they hold, and unexported helpers.\npub trait ToolSource { fn bound_tool(&self) -> Option<Arc<dyn BoundTool>>; }\npub struct StaticToolSource { tools: Vec<Arc<dyn BoundTool>> }\nimpl StaticToolSource {\n    pub fn new(tools: Vec<Arc<dyn BoundTool>>) -> Result<Self, Error> { todo() }\n    pub(crate) fn empty() -> Self { todo() }\n    pub fn tools(&self) -> Vec<Arc<dyn BoundTool>> { todo() }\n}\nfn private() -> StaticToolSource { todo() }\npub(crate) static EMPTY: Vec<Arc<dyn BoundTool>> = Vec::new();\n#[derive(Default)]\npub struct Capabilities { auth: Option<Box<dyn AuthCapability>> }\nimpl Default for Budgets { fn default() -> Self { Budgets } }\npub fn time() -> GetCurrentTime { todo() }\n",
            ),
            (
                "crates/bootstrap/src/compose.rs",
                "//! The composition root binds.\npub fn default_tools() -> StaticToolSource {\n    StaticToolSource::new(vec![bind(GetCurrentTime::new(Arc::new(SystemClock))).unwrap()]).unwrap()\n}\n",
            ),
        ],
        &expected.iter().map(String::as_str).collect::<Vec<_>>(),
    );
}

/// NO_DEFAULT_EXECUTABLE_CATALOG's sanity check counts only functions handed what they bind:
/// an accessor handed nothing but its receiver (`Runner::source(&self) -> &dyn ToolSource`)
/// binds nothing, and a tree whose only builder returns `Self` of a tool source is not taken
/// for one that reads `-> Result<Arc<dyn BoundTool>, _>`, nor the other way round: a broken
/// return-type or `Self` reading fails the scan rather than passing on what is left.
/// A public item a macro makes of what it is handed (`pub fn $n() -> …`, `-> $t`) is each item
/// the names an invocation hands it could make, at the invocation, whichever file defines the
/// macro and through a macro that hands the names on: a default catalog there fires, one handed
/// what it binds or giving no tools does not, and a macro never invoked makes nothing.
#[test]
fn a_catalog_a_macro_makes_of_what_it_is_handed_is_checked() {
    let fires = |path: &str, line: usize, what: &str, name: &str| {
        format!(
            "{path}:{line}: NO_DEFAULT_EXECUTABLE_CATALOG: {what} gives bound tools (`{name}`) without being handed capabilities: a default executable catalog; export contracts and bind them to capabilities in the composition root (cogni-bootstrap)"
        )
    };
    let m = "crates/ai-tools/src/m.rs";
    let u = "crates/ai-tools/src/u.rs";
    check(
        &[
            (
                m,
                "//! Makes public items of what it is handed.\nmacro_rules! named {\n    ($n:ident) => { pub fn $n() -> Vec<Arc<dyn BoundTool>> { vec![] } };\n}\nmacro_rules! typed {\n    ($t:ty) => { pub fn tools() -> $t { todo!() } };\n}\nmacro_rules! stat {\n    ($n:ident, $t:ty) => { pub static $n: $t = None; };\n}\nmacro_rules! relay {\n    ($a:ident) => { named!($a); };\n}\nmacro_rules! handed {\n    ($n:ident, $t:ty) => { pub fn $n(clock: Clock) -> $t { todo!() } };\n}\nmacro_rules! unused {\n    ($n:ident) => { pub fn $n() -> Vec<Arc<dyn BoundTool>> { vec![] } };\n}\nnamed!(tools);\ntyped!(Vec<Arc<dyn BoundTool>>);\nstat!(TOOLS, Option<Arc<dyn ToolSource>>);\nrelay!(more);\nhanded!(with_clock, Arc<dyn BoundTool>);\ntyped!(Vec<u8>);\n",
            ),
            (
                u,
                "//! Invokes one another file defines.\ntyped!(StaticToolSource);\n",
            ),
        ],
        &[
            &fires(m, 20, "`pub fn $n`", "BoundTool"),
            &fires(m, 21, "`pub fn tools`", "BoundTool"),
            &fires(m, 22, "`pub static $n`", "ToolSource"),
            &fires(m, 23, "`pub fn $n`", "BoundTool"),
            &fires(u, 2, "`pub fn tools`", "StaticToolSource"),
        ],
    );
}

/// A type another crate makes executable (its alias of one, or a type of its that implements
/// one) is executable where it is named too: `pub fn tools() -> ai_core::Tools` is a default
/// catalog; another crate's import under a name of its own stays its own, and so does a type
/// a crate defines under the name another crate's executable type has (the wire's `Tools`).
#[test]
fn a_type_another_crate_makes_executable_is_executable_everywhere() {
    let fires = |path: &str, line: usize, what: &str, name: &str| {
        format!(
            "{path}:{line}: NO_DEFAULT_EXECUTABLE_CATALOG: {what} gives bound tools (`{name}`) without being handed capabilities: a default executable catalog; export contracts and bind them to capabilities in the composition root (cogni-bootstrap)"
        )
    };
    let t = "crates/ai-tools/src/t.rs";
    check(
        &[
            (
                "crates/ai-core/src/lib.rs",
                "//! Names tool types for its dependents.\npub type Tools = Vec<Arc<dyn BoundTool>>;\npub struct Fixed;\nimpl ToolSource for Fixed {}\nuse crate::BoundTool as Tool;\n",
            ),
            (
                t,
                "//! Returns them, and a wire type of its own.\npub fn tools() -> ai_core::Tools { vec![] }\npub fn fixed() -> ai_core::Fixed { todo!() }\npub fn wire() -> Tool { todo!() }\n",
            ),
            (
                "crates/wire-openai/src/w.rs",
                "//! Its own types, named like ai-core's.\npub struct Tools(Vec<String>);\npub fn tools() -> Tools { todo!() }\npub enum Fixed { A }\npub const FIXED: Fixed = Fixed::A;\n",
            ),
        ],
        &[
            &fires(t, 2, "`pub fn tools`", "Tools"),
            &fires(t, 3, "`pub fn fixed`", "Fixed"),
        ],
    );
}

#[test]
fn the_catalog_scan_needs_a_builder_of_each_kind() {
    let saw_nothing = |files: &[(&str, &str)]| {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in CLEAN.iter().chain(files) {
            let full = root.path().join(path);
            fs::create_dir_all(full.parent().unwrap()).unwrap();
            fs::write(full, text).unwrap();
        }
        let (violations, _) = super::check_repo(root.path(), &[], &[]).unwrap();
        (violations.iter())
            .filter(|v| v.contains("SCANNER_SAW_NOTHING: NO_DEFAULT_EXECUTABLE_CATALOG"))
            .count()
    };
    let bind = "//! Binds a contract it is handed.\npub fn bind<C: ToolContract>(contract: C) -> Result<Arc<dyn BoundTool>, Error> {\n    todo()\n}\n";
    let accessor = "//! Only an accessor.\nimpl Runner {\n    pub fn source(&self) -> &dyn ToolSource {\n        todo()\n    }\n}\n";
    let accessor_only = [
        ("crates/ai-tools/src/bind.rs", accessor),
        ("crates/ai-core/src/source.rs", accessor),
    ];
    assert_eq!(saw_nothing(&accessor_only), 2, "an accessor is no builder");
    let no_self = [
        ("crates/ai-tools/src/bind.rs", bind),
        ("crates/ai-core/src/source.rs", accessor),
    ];
    assert_eq!(saw_nothing(&no_self), 1, "no `-> Self` builder was seen");
    assert_eq!(saw_nothing(&[]), 0, "CLEAN has both");
}

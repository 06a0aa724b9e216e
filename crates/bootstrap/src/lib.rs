//! The cogni-tools composition root: settings, the `cogni` command line and the HTTP server.
//!
//! This crate binds ports to adapters and capabilities to tools: [`Settings`] is `cogni.toml`
//! with its `COGNI_*` overrides, validated at start; [`create_capabilities`] builds the
//! long-lived capabilities (clock, confined workspace); [`create_tool_source`] binds the enabled
//! core tool contracts to them; [`create_completion`] and [`record_completion`] build the LLM
//! adapter; [`create_stores`] opens where threads and run logs live (without a data folder,
//! threads in bounded memory: [`MemoryThreads`]); [`Runtime`] is the agent over all of it;
//! [`start_run`] is the one way a run starts (stored before shown), and
//! [`recover`] closes the runs a crash left open; [`server`] serves runs as AG-UI and AI SDK
//! streams; [`replay`] re-runs a recorded run; [`cli`] is the `cogni` command line.
//!
//! It is the only library crate that reads the environment or the command line (through clap).
//! It owns no tool logic, no policy decisions, no wire format and no loop logic: those live in
//! ai-tools, ai-core, wire-openai, wire-ui and graph, which it only composes. Downstream apps do
//! the same in their own composition roots with the same public API.

mod bounded;
pub mod cli;
mod compose;
mod config;
mod lru;
mod record;
pub mod replay;
pub mod server;
mod settings;
mod stats;
mod threads;

pub use compose::{
    CoreTool, Runtime, ToolCapabilities, create_capabilities, create_completion,
    create_tool_source, record_completion,
};
pub use config::{Config, DEFAULT_POLICY_TOML, load_policy};
pub use record::{
    RUN_INPUT_FORM, RunInput, RunInputError, RunLocks, RunLogStores, RunRequest, RunSettings,
    StoredHistories, Stores, THREAD_CHANGED, Turn, create_stores, recover, start_run,
};
pub use server::ServerToken;
pub use settings::{
    AgentSettings, EXAMPLE_CONFIG, LlmSettings, LlmWire, MAX_LLM_RETRIES, Overrides,
    ServerSettings, Settings, ToolsSettings,
};
pub use threads::{MemoryThreads, ThreadHold};

/// The runtime and the stores are shared by every request the server handles.
#[allow(dead_code)]
fn _assert_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<Runtime>();
    assert::<Stores>();
    assert::<MemoryThreads>();
    assert::<RunLogStores>();
    assert::<RunLocks>();
    assert::<Settings>();
}

/// A random number, new at every call, for ids an outsider must not guess (`cogni chat`'s and
/// the server's own run ids): a hash of nothing under a new [`RandomState`], whose
/// keys std draws from the OS's randomness once per thread and steps at every new one.
///
/// [`RandomState`]: std::collections::hash_map::RandomState
pub(crate) fn nonce() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let hash = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    // Both halves: the keys' low bits step from one state to the next.
    (hash ^ (hash >> 32)) as u32
}

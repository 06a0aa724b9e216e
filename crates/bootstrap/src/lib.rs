//! The cogni-tools composition root and the `cogni` command line.
//!
//! This crate binds ports to adapters and capabilities to tools: [`create_capabilities`] builds
//! the long-lived capabilities (clock, confined workspace) from a [`Config`], and
//! [`create_tool_source`] binds the enabled core tool contracts to them. It is the only library
//! crate that reads the environment or the command line. It owns no tool logic, no policy
//! decisions and no wire format: those live in ai-tools, ai-core and wire-openai, which it only
//! composes. Downstream apps do the same in their own composition roots with the same public API.

pub mod cli;
mod compose;
mod config;
pub mod record;
pub mod replay;
pub mod server;
mod settings;
mod stats;

pub use compose::{
    CoreTool, Runtime, ToolCapabilities, create_capabilities, create_completion,
    create_tool_source, record_completion,
};
pub use config::{Config, DEFAULT_POLICY_TOML, load_policy};
pub use record::{RunInput, RunLogStores, RunRequest, Stores, create_stores, recover, start_run};
pub use settings::{
    AgentSettings, EXAMPLE_CONFIG, LlmSettings, LlmWire, Overrides, ServerSettings, Settings,
    ToolsSettings,
};

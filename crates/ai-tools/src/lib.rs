//! Tool contracts: tools written as Rust types, with their JSON Schema derived, checked and
//! enforced.
//!
//! A [`ToolContract`] names a tool, its effect, its output allowlist and its typed input and
//! output. [`tool_spec`] derives the model-facing [`ai_core::ToolSpec`] (draft-07 JSON Schema via
//! schemars, deterministic, hashed by [`schema_hash`], refused if it leaves the supported subset
//! or asks for a connection id). [`bind`] turns a contract holding its capabilities into an
//! [`ai_core::BoundTool`] whose validators (jsonschema, then serde for the input) are compiled
//! once and whose output is redacted by allowlist. Its validated arguments (what the start
//! event, the audit record and an approval show, and what the tool reads) are the input as serde
//! read it, written back: keys the type ignores are dropped, defaults it fills in are shown (see
//! [`ToolContract::Input`]). The core tools live in [`tools`].
//!
//! A contract's input and output types derive `schemars::JsonSchema` from schemars 1.x (types
//! deriving 0.8's trait do not fit) and serde's traits (the input both `Deserialize` and
//! `Serialize`). Inputs stay within the subset
//! `ai_core::validate_tool_schema_p0` accepts: structs of plain fields, `Option`s (of structs and
//! enums too), `Vec`s, maps with string keys, unit enums, and types that contain themselves
//! (`Option<Box<Self>>`, `Vec<Self>`, the root type included); enums with data derive `oneOf` or
//! `anyOf`, which the subset refuses, and binding says where. The output is an object whose
//! fields the allowlist names by dotted path (`"days.summary"` reaches into arrays and optional
//! structs; a recursive field is named once per depth shown, `"next.name"`, `"next.next.name"`);
//! see `examples/own_agent.rs` in cogni-graph for a whole contract in use. Output integers
//! must fit 64 bits (an `i64` or a `u64`): the workspace's serde_json holds no wider number
//! exactly, so an `i128` or `u128` past that range fails the call, naming the field's place,
//! rather than reaching the model as a rounded float.
//!
//! This crate never does IO of its own (tools reach the world only through capability ports
//! such as [`ai_core::Clock`] and [`ai_core::Workspace`]), never reads the environment, and
//! exports no default executable catalog: every runtime binds its own tools in its composition
//! root.

mod bind;
mod contract;
mod error;
mod redact;
pub mod tools;

pub use bind::bind;
pub use contract::{ToolContract, schema_hash, tool_spec};
pub use error::{Error, Result};

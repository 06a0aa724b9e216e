//! Tool contracts: tools written as Rust types, with their JSON Schema derived, checked and
//! enforced.
//!
//! A [`ToolContract`] names a tool, its effect, its output allowlist and its typed input and
//! output.
//!
//! - [`tool_spec`] derives the model-facing [`ai_core::ToolSpec`]: draft-07 JSON Schema via
//!   schemars, deterministic, hashed by [`schema_hash`]. It is refused if it leaves the
//!   supported subset or asks for a connection id.
//! - [`bind`] turns a contract holding its capabilities into an [`ai_core::BoundTool`]. Its
//!   validators (jsonschema, then serde for the input) are compiled once, and its output is
//!   redacted by allowlist.
//! - The validated arguments are the input as serde read it, written back. The start event,
//!   the audit record and an approval show them, and the tool reads them. Keys the type ignores
//!   are dropped and defaults it fills in are shown. An array of `uniqueItems` (a set, or a
//!   `Vec` given the keyword) keeps the model's order, so the same arguments always give the
//!   same bytes (see [`ToolContract::Input`]).
//! - An argument integer its field's type cannot hold is refused at validation, naming its
//!   place and the range, never the number: past 64 bits (which the arguments' JSON numbers
//!   cannot carry exactly), or past its type's range (a `u32`'s for a `u32`, an `i8`'s for an
//!   `i8`). So is a number past an `f32`'s range for an `f32` (serde would read it as
//!   infinity).
//! - The core tools live in [`tools`].
//!
//! This crate never does IO of its own (tools reach the world only through capability ports
//! such as [`ai_core::Clock`] and [`ai_core::Workspace`]), never reads the environment, and
//! exports no default executable catalog: every runtime binds its own tools in its composition
//! root.
//!
//! The ai-core types a contract names are re-exported as [`ai_core`] (`ai_tools::ai_core::…`),
//! so an app needs no version of `cogni-ai-core` of its own; it does need `schemars` 1.x and
//! `serde` (with `derive`) for its input and output types, and the port attribute is
//! `#[ai_tools::ai_core::async_trait]` (the `async-trait` crate need not be named).
//!
//! # Input and output types
//!
//! A contract's input and output types derive `schemars::JsonSchema` from schemars 1.x (types
//! deriving 0.8's trait do not fit) and serde's traits (the input both `Deserialize` and
//! `Serialize`).
//!
//! - Inputs stay within the subset `ai_core::validate_tool_schema_p0` accepts: structs of plain
//!   fields, `Option`s (of structs and enums too, and of newtypes of them), `Vec`s, maps with
//!   string keys (or integer keys, but never below a `#[serde(flatten)]`ed field: serde reads a
//!   flattened value from a copy whose keys are strings, and would refuse every key; binding
//!   names the map's place), unit enums, and types that contain themselves (`Option<Box<Self>>`,
//!   `Vec<Self>`, the root type included). Enums with data derive `oneOf` or `anyOf`, which the
//!   subset refuses, and binding says where.
//! - Types of two modules may share a name (schemars defines `Filter` and `Filter2`). Two that
//!   schemars takes for one (types of one module that serde names alike, hand-written impls
//!   with one `schema_id`) are refused, naming the name and the fix,
//!   `#[schemars(rename = "…")]`. The exception is when one contains the other, which schemars
//!   cannot tell from a type containing itself: name such types apart. So are two fields of
//!   one type that serde names alike (a `rename` giving one the other's name), when neither
//!   may be left out: serde would read only one of them and write both.
//! - The output is an object whose fields the allowlist names by dotted path, as its
//!   `Serialize` writes them: its schema, which checks it, describes serde's serialize side (a
//!   field `skip_serializing_if` leaves out need not be there; a `rename(serialize = "…")` is
//!   the name to allowlist). `"days.summary"`
//!   reaches into arrays (a tuple's places too) and optional structs, and a field of an
//!   enum's variant (the enum flattened into the output or in a field of its own) is named as
//!   any field: `"size"`, `"entry.size"`. A `field*` segment follows a field that holds
//!   its own type any number of times, none included: `"next*.name"` is `name`, `next.name`,
//!   `next.next.name`, … of a linked list, and `"children*.name"` every name of a tree,
//!   whatever else they hold hidden at every depth. A path cannot end in one. See
//!   `examples/own_agent.rs` in cogni-graph for a whole contract in use.
//! - A `#[serde(flatten)]`ed map's key spelled like a field would be shown under that field's
//!   allowlisted name: an output that repeats a key fails the call, and a field the output may
//!   leave out (`skip_serializing_if`) beside such a map (flattened directly, or through an
//!   enum, a variant holding any `serde_json::Value`, or a list or tuple of maps, included)
//!   cannot be allowlisted, nor can a path through one. A map whose keys cannot be spelled like
//!   the field (integer keys) does not count. Not caught: a map keyed by a unit enum, which
//!   schemars writes as one property per variant (with no `additionalProperties` once
//!   flattened), as it writes a struct of optional fields. Its entry whose key is spelled like
//!   the field (flattened beside a field the output may leave out, or in an enum's other
//!   variant) is shown under the allowlisted name: keep such a map in a field of its own that
//!   no path goes through.
//! - Output integers must fit 64 bits (an `i64` or a `u64`): the workspace's serde_json holds
//!   no wider number exactly, so an `i128` or `u128` past that range fails the call, naming the
//!   field's place, rather than reaching the model as a rounded float. So does an output
//!   number that is NaN or an infinity, which JSON cannot write (serde_json writes `null`, an
//!   `Option`'s "none").
//!
//! # Example
//!
//! A contract bound and run through the [`ai_core::ToolRunner`], the only path by which it
//! runs: the policy lets the model see it, the catalog lists it, and the runner validates the
//! model's arguments, executes the tool and returns only the allowlisted output.
//!
//! ```
//! use std::sync::Arc;
//! use ai_tools::ai_core::{
//!     AiEvent, Capabilities, CancellationToken, Clock, ExecPermit, RunContext,
//!     StaticToolSource, ToolCall, ToolCallId, ToolCatalog, ToolEffect, ToolError,
//!     ToolInvocationContext, ToolOutcome, ToolPolicy, ToolRunner,
//! };
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize, Serialize, JsonSchema)]
//! struct AddInput { a: i64, b: i64 }
//! #[derive(Serialize, JsonSchema)]
//! struct AddOutput { sum: i64, debug_note: String }
//!
//! struct Add;
//! #[ai_tools::ai_core::async_trait]
//! impl ai_tools::ToolContract for Add {
//!     type Input = AddInput;
//!     type Output = AddOutput;
//!     const ID: &'static str = "core__add";
//!     const DESCRIPTION: &'static str = "Adds two integers.";
//!     const EFFECT: ToolEffect = ToolEffect::ReadOnly;
//!     // Only `sum` leaves the runner; `debug_note` is redacted.
//!     const REDACTION: &'static [&'static str] = &["sum"];
//!     async fn execute(&self, _: &ExecPermit, input: AddInput, _: &ToolInvocationContext,
//!         _: &Capabilities) -> Result<AddOutput, ToolError> {
//!         let sum = input.a.checked_add(input.b)
//!             .ok_or_else(|| ToolError::new("the sum overflows"))?;
//!         Ok(AddOutput { sum, debug_note: "internal".into() })
//!     }
//! }
//!
//! struct FixedClock;
//! impl Clock for FixedClock {
//!     fn now_ms(&self) -> u64 { 1_700_000_000_000 }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let source = Arc::new(StaticToolSource::new(vec![ai_tools::bind(Add).unwrap()]).unwrap());
//! let policy = Arc::new(ToolPolicy::from_toml_str(r#"allowed_tools = ["core__add"]"#).unwrap());
//! let ctx = RunContext::new("run-1", "user:alice", "tenant-1").unwrap();
//! let runner = ToolRunner::new(source, policy, Arc::new(FixedClock));
//! // The run's catalog, from the runner's own source and policy.
//! let catalog = runner.catalog(&ctx).unwrap();
//!
//! let call = ToolCall {
//!     id: ToolCallId::new("call_1").unwrap(),
//!     name: "core__add".into(),
//!     arguments: r#"{"a": 2, "b": 3}"#.into(),
//! };
//! let events = |_: AiEvent| {}; // a UI stream or a log in a real runtime
//! let run = runner.run_tool(&call, &ctx, &catalog, &events, &CancellationToken::new()).await;
//! let ToolOutcome::Ok { value } = &run.result.outcome else { panic!("{:?}", run.result) };
//! assert_eq!(**value, serde_json::json!({"sum": 5}));
//! # }
//! ```

mod bind;
mod contract;
mod error;
mod redact;
pub mod tools;

/// The crate whose types a contract's signature names ([`ai_core::ExecPermit`],
/// [`ai_core::ToolInvocationContext`], [`ai_core::Capabilities`], [`ai_core::ToolError`],
/// [`ai_core::ToolEffect`], the [`ai_core::async_trait`] attribute, …), re-exported so that an
/// app names them at the very version this crate takes.
pub use ai_core;
pub use bind::bind;
pub use contract::{ToolContract, schema_hash, tool_spec};
pub use error::{Error, Result};

/// The core tools are shared by the tasks of every run that binds them.
#[allow(dead_code)]
fn _assert_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<Error>();
    assert::<tools::GetCurrentTime>();
    assert::<tools::WorkspaceList>();
    assert::<tools::WorkspaceRead>();
    assert::<tools::WorkspaceWrite>();
}

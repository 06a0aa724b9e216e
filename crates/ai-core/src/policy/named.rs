//! How a policy's tables are read: from their named keys only.
//!
//! serde's derive also reads a struct from a list of its values, in the order its fields are
//! declared: such a list names no key, so `budgets = [5]` would set a budget no line names, past
//! `deny_unknown_fields`, and mean something else whenever a field is added or moved. So each
//! table's own `Deserialize` asks the format for named keys (a TOML table, a JSON object), which
//! a list is not, and reads them with the reader serde derives for its twin here
//! (`#[serde(remote)]`: the compiler checks that the twin's fields are the table's, name and
//! type). A list is refused whatever reads the policy: its loaders, a caller's own document
//! holding it, or serde directly.

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{BreakerPolicy, Budgets, RetryPolicy, ToolPolicy};
use crate::{ToolEffect, ToolErrorCategory, ToolId};

#[derive(Deserialize)]
#[serde(
    remote = "ToolPolicy",
    default = "ToolPolicy::default",
    deny_unknown_fields
)]
struct ToolPolicyKeys {
    #[serde(deserialize_with = "super::tool_id_list")]
    allowed_tools: BTreeSet<ToolId>,
    require_approval_for_effects: BTreeSet<ToolEffect>,
    budgets: Budgets,
    retry: RetryPolicy,
    #[serde(deserialize_with = "super::tool_id_keys")]
    retry_per_tool: BTreeMap<ToolId, RetryPolicy>,
    breaker: BreakerPolicy,
}

#[derive(Deserialize)]
#[serde(remote = "Budgets", default = "Budgets::default", deny_unknown_fields)]
struct BudgetsKeys {
    max_runtime_ms: u64,
    max_result_bytes: usize,
    max_args_bytes: usize,
}

#[derive(Deserialize)]
#[serde(
    remote = "RetryPolicy",
    default = "RetryPolicy::default",
    deny_unknown_fields
)]
struct RetryPolicyKeys {
    max_attempts: u32,
    base_delay_ms: u64,
    max_delay_ms: u64,
    multiplier: f64,
    jitter: bool,
    attempt_timeout_ms: Option<u64>,
    retryable: BTreeSet<ToolErrorCategory>,
}

#[derive(Deserialize)]
#[serde(
    remote = "BreakerPolicy",
    default = "BreakerPolicy::default",
    deny_unknown_fields
)]
struct BreakerPolicyKeys {
    failure_threshold: u32,
    cool_down_ms: u64,
    half_open_trials: u32,
    failure_rate: Option<f64>,
    window: u32,
}

/// A table read from its named keys by its twin's reader.
trait FromKeys<'de>: Sized {
    /// Reads the table from `keys`, as its derived reader does.
    fn from_keys<A: MapAccess<'de>>(keys: A) -> Result<Self, A::Error>;
}

/// The visitor of a table's `Deserialize`: named keys, nothing else.
struct NamedKeys<T>(PhantomData<T>);

impl<'de, T: FromKeys<'de>> Visitor<'de> for NamedKeys<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a table of named keys (an object in JSON)")
    }
    fn visit_map<A: MapAccess<'de>>(self, keys: A) -> Result<T, A::Error> {
        T::from_keys(keys)
    }
}

/// Gives each table its `Deserialize`, through its twin's reader.
macro_rules! named_keys_only {
    ($($table:ident by $twin:ident),* $(,)?) => {$(
        impl<'de> FromKeys<'de> for $table {
            fn from_keys<A: MapAccess<'de>>(keys: A) -> Result<Self, A::Error> {
                $twin::deserialize(MapAccessDeserializer::new(keys))
            }
        }

        impl<'de> Deserialize<'de> for $table {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_map(NamedKeys(PhantomData))
            }
        }
    )*};
}

named_keys_only!(
    ToolPolicy by ToolPolicyKeys,
    Budgets by BudgetsKeys,
    RetryPolicy by RetryPolicyKeys,
    BreakerPolicy by BreakerPolicyKeys,
);

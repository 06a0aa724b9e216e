//! The tools a model may see in one run: derived only from a source and a policy.

use std::collections::{BTreeMap, BTreeSet};

use crate::{
    Error, PolicyDecision, RunContext, ToolId, ToolPolicy, ToolSource, ToolSpec,
    validate_tool_schema_p0,
};

/// The explicit set of tools a model sees for one run (invariant CATALOG_IS_EXPLICIT).
///
/// Only tools the policy allows are in it. The runner refuses any call outside it even where
/// the policy would allow the tool (defence in depth).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolCatalog {
    specs: BTreeMap<ToolId, ToolSpec>,
}

impl ToolCatalog {
    /// Keeps the tools of `source` for which `policy` decides [`PolicyDecision::Allow`] or
    /// [`PolicyDecision::RequireApproval`] (the model may ask for those; the runner pauses each
    /// call for a human's approval).
    ///
    /// A tool the policy allows that `source` does not have is simply not in the catalog, so a
    /// misspelt id hides a tool without a word: [`ToolPolicy::unknown_tools`] lists such ids.
    ///
    /// Two specs with one id are an error, never an overwrite. So is a visible tool whose input
    /// schema leaves the subset [`validate_tool_schema_p0`] accepts: ai-tools derives only
    /// schemas within it, but a hand-built spec (a tool from another runtime, say) is checked
    /// here, before any model sees it.
    ///
    /// The source's specs are listed as the tool source's code ([`crate::port_call`]): a panic
    /// there (in the source, or in a tool's `spec` it asks) still unwinds, and
    /// [`crate::install_tool_panic_hook`] reports it without its message, as it does when the
    /// runner asks the source for a call's tool.
    pub fn build(
        source: &dyn ToolSource,
        policy: &ToolPolicy,
        ctx: &RunContext,
    ) -> Result<Self, Error> {
        let mut seen = BTreeSet::new();
        let mut specs = BTreeMap::new();
        for spec in crate::port_call("the tool source", || source.tool_specs()) {
            if !seen.insert(spec.id.clone()) {
                return Err(Error::ToolIdCollision(spec.id));
            }
            if policy.decide(ctx, &spec.id, spec.effect) != PolicyDecision::Deny {
                if let Err(violations) = validate_tool_schema_p0(&spec.input_schema) {
                    return Err(Error::InvalidToolSchema {
                        id: spec.id,
                        violations,
                    });
                }
                specs.insert(spec.id.clone(), spec);
            }
        }
        Ok(Self { specs })
    }

    /// The spec of a visible tool.
    pub fn get(&self, id: &ToolId) -> Option<&ToolSpec> {
        self.specs.get(id)
    }

    /// The spec of a visible tool, looked up by the name a model sent (no parsing needed).
    pub fn get_by_name(&self, name: &str) -> Option<&ToolSpec> {
        self.specs.get(name)
    }

    /// Whether the tool is visible in this run.
    pub fn contains(&self, id: &ToolId) -> bool {
        self.specs.contains_key(id)
    }

    /// The visible specs, ordered by id (stable, so the wire tool set hashes the same each run).
    pub fn specs(&self) -> impl ExactSizeIterator<Item = &ToolSpec> {
        self.specs.values()
    }

    /// How many tools are visible.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether no tool is visible.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }
}

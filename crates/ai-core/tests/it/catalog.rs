//! Catalog derivation: only allowed tools, and collisions are errors.

use std::sync::Arc;

use ai_core::{
    BoundTool, Error, RunContext, StaticToolSource, ToolCatalog, ToolEffect, ToolId, ToolSource,
    ToolSpec,
};

use crate::support::{Behaviour, FakeTool, allow};

fn ctx() -> RunContext {
    RunContext::new("run-1", "user:alice", "tenant-1").unwrap()
}

fn fake(id: &str, effect: ToolEffect) -> Arc<dyn BoundTool> {
    Arc::new(FakeTool::new(id, effect, Behaviour::Echo))
}

#[test]
fn only_allowed_tools_are_visible_including_those_needing_approval() {
    let source = StaticToolSource::new(vec![
        fake("core__a", ToolEffect::ReadOnly),
        fake("core__b", ToolEffect::StateChange),
        fake("mcp__srv__c", ToolEffect::ExternalSideEffect),
    ])
    .unwrap();
    let mut policy = allow(&["core__a", "core__b", "mcp__srv__c"]);
    policy
        .require_approval_for_effects
        .insert(ToolEffect::ExternalSideEffect);
    let catalog = ToolCatalog::build(&source, &policy, &ctx()).unwrap();
    let ids: Vec<_> = catalog.specs().map(|s| s.id.as_str()).collect();
    // Approval-gated tools are shown: the runner pauses their calls for a decision.
    assert_eq!(ids, ["core__a", "core__b", "mcp__srv__c"]);
    let mut strict = allow(&["core__a"]);
    strict
        .require_approval_for_effects
        .insert(ToolEffect::ReadOnly);
    let catalog = ToolCatalog::build(&source, &strict, &ctx()).unwrap();
    assert_eq!(catalog.len(), 1);

    let empty = ToolCatalog::build(&source, &Default::default(), &ctx()).unwrap();
    assert!(empty.is_empty());
}

#[test]
fn static_source_refuses_collisions() {
    let err = StaticToolSource::new(vec![
        fake("core__a", ToolEffect::ReadOnly),
        fake("core__a", ToolEffect::StateChange),
    ])
    .unwrap_err();
    assert!(matches!(err, Error::ToolIdCollision(id) if id.as_str() == "core__a"));
}

/// A source that (wrongly) lists one id twice.
struct Duplicating(Vec<ToolSpec>);

impl ToolSource for Duplicating {
    fn bound_tool(&self, _: &ToolId) -> Option<Arc<dyn BoundTool>> {
        None
    }
    fn tool_specs(&self) -> Vec<ToolSpec> {
        self.0.clone()
    }
}

#[test]
fn catalog_refuses_collisions_even_for_denied_tools() {
    let spec = fake("core__a", ToolEffect::ReadOnly).spec().clone();
    let source = Duplicating(vec![spec.clone(), spec]);
    for policy in [allow(&["core__a"]), allow(&[])] {
        let err = ToolCatalog::build(&source, &policy, &ctx()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tool id collision: core__a is defined twice"
        );
    }
}

/// A hand-built spec that leaves the schema subset is refused when it would be visible, naming
/// the tool and the place; a denied one is never shown, so it is not checked.
#[test]
fn catalog_refuses_a_visible_tool_whose_schema_leaves_the_subset() {
    let mut spec = fake("mcp__srv__search", ToolEffect::ReadOnly)
        .spec()
        .clone();
    spec.input_schema = serde_json::json!({
        "type": "object",
        "properties": {
            "q": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "n": {"oneOf": [{"type": "integer"}]},
        },
    });
    let source = Duplicating(vec![spec]);
    let err = ToolCatalog::build(&source, &allow(&["mcp__srv__search"]), &ctx()).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidToolSchema { id, violations }
            if id.as_str() == "mcp__srv__search" && violations.len() == 2),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "tool mcp__srv__search: the input schema leaves the supported subset: \
         /properties/n: `oneOf` is not supported (and 1 more)"
    );
    let denied = ToolCatalog::build(&source, &allow(&[]), &ctx()).unwrap();
    assert!(denied.is_empty());
}

/// The error's message reads whatever list it holds; one built by hand with none never panics.
#[test]
fn an_invalid_schema_error_describes_any_list_of_violations() {
    let error = |violations| Error::InvalidToolSchema {
        id: ToolId::parse("mcp__srv__search").unwrap(),
        violations,
    };
    assert_eq!(
        error(vec![]).to_string(),
        "tool mcp__srv__search: the input schema leaves the supported subset"
    );
    let one = ai_core::SchemaViolation {
        pointer: String::new(),
        reason: "the root must be an object".into(),
    };
    assert_eq!(
        error(vec![one]).to_string(),
        "tool mcp__srv__search: the input schema leaves the supported subset: \
         (root): the root must be an object"
    );
}

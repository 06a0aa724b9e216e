//! The core tools' specs: snapshotted, deterministic, inside the subset.

use std::sync::Arc;

use ai_core::{ToolSpec, validate_tool_schema_p0};
use ai_tools::tools::{GetCurrentTime, WorkspaceList, WorkspaceRead, WorkspaceWrite};
use ai_tools::{schema_hash, tool_spec};

fn core_specs() -> Vec<ToolSpec> {
    vec![
        tool_spec::<GetCurrentTime>().unwrap(),
        tool_spec::<WorkspaceList>().unwrap(),
        tool_spec::<WorkspaceRead>().unwrap(),
        tool_spec::<WorkspaceWrite>().unwrap(),
    ]
}

#[test]
fn core_tool_specs() {
    let specs = core_specs();
    for spec in &specs {
        assert!(
            validate_tool_schema_p0(&spec.input_schema).is_ok(),
            "{}",
            spec.id
        );
    }
    insta::assert_json_snapshot!(specs);
}

#[test]
fn specs_are_the_same_bytes_every_time() {
    let first = serde_json::to_string(&core_specs()).unwrap();
    for _ in 0..3 {
        assert_eq!(serde_json::to_string(&core_specs()).unwrap(), first);
    }
    let hashes: Vec<String> = core_specs().iter().map(schema_hash).collect();
    insta::assert_json_snapshot!(hashes);
}

#[test]
fn binding_compiles_every_core_tool() {
    let clock = Arc::new(crate::support::FixedClock(0));
    let workspace = Arc::new(crate::support::MemoryWorkspace::default());
    assert!(ai_tools::bind(GetCurrentTime::new(clock)).is_ok());
    assert!(ai_tools::bind(WorkspaceList::new(workspace.clone())).is_ok());
    assert!(ai_tools::bind(WorkspaceRead::new(workspace.clone())).is_ok());
    assert!(ai_tools::bind(WorkspaceWrite::new(workspace)).is_ok());
}

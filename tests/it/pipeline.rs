//! The composition root's tools through the runner, across ai-core, ai-tools, adapters and
//! bootstrap: what the model sees and what the disk sees agree with the policy.

use std::sync::{Arc, Mutex};

use ai_core::{
    AiEvent, CancellationToken, RunContext, ToolCall, ToolCallId, ToolCatalog, ToolErrorCode,
    ToolPolicy, ToolRunner,
};
use bootstrap::{Config, CoreTool, create_capabilities, create_tool_source};

#[tokio::test]
async fn write_then_read_through_the_whole_stack() {
    let dir = tempfile::tempdir().unwrap();
    let caps = create_capabilities(&Config {
        workspace_root: dir.path().to_path_buf(),
    })
    .unwrap();
    let source = Arc::new(create_tool_source(CoreTool::ALL, &caps).unwrap());
    let policy = ToolPolicy::from_toml_str(
        r#"allowed_tools = ["core__workspace_write", "core__workspace_read"]"#,
    )
    .unwrap();
    let ctx = RunContext::new("run-x", "user:test", "tenant").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    assert_eq!(catalog.len(), 2);
    let runner = ToolRunner::new(source, Arc::new(policy), caps.clock.clone());
    let events = Mutex::new(Vec::new());
    let sink = |e: AiEvent| events.lock().unwrap().push(e);
    let call = |id: &str, name: &str, args: &str| ToolCall {
        id: ToolCallId::new(id).unwrap(),
        name: name.into(),
        arguments: args.into(),
    };
    let cancel = CancellationToken::new();

    let write = runner
        .run_tool(
            &call(
                "c1",
                "core__workspace_write",
                r#"{"path":"a.txt","content":"abc"}"#,
            ),
            &ctx,
            &catalog,
            &sink,
            &cancel,
        )
        .await;
    assert!(write.result.failure().is_none(), "{write:?}");
    let read = runner
        .run_tool(
            &call("c2", "core__workspace_read", r#"{"path":"a.txt"}"#),
            &ctx,
            &catalog,
            &sink,
            &cancel,
        )
        .await;
    assert_eq!(
        read.result.model_content(),
        r#"{"content":"abc","path":"a.txt"}"#
    );
    // Bound by the source but outside the policy: refused.
    let time = runner
        .run_tool(
            &call("c3", "core__get_current_time", "{}"),
            &ctx,
            &catalog,
            &sink,
            &cancel,
        )
        .await;
    assert_eq!(
        time.result.failure().unwrap().code,
        ToolErrorCode::PolicyDenied
    );
    assert_eq!(events.lock().unwrap().len(), 6);
}

//! The composition root's tools through the runner, across ai-core, ai-tools, adapters and
//! bootstrap: what the model sees and what the disk sees agree with the policy.

use std::sync::{Arc, Mutex};

use ai_core::{
    AiEvent, CancellationToken, RunContext, ToolCall, ToolCallId, ToolCatalog, ToolErrorCode,
    ToolPolicy, ToolRunner,
};

use crate::support::core_tools;

#[tokio::test]
async fn write_then_read_through_the_whole_stack() {
    let dir = tempfile::tempdir().unwrap();
    let (caps, source) = core_tools(dir.path());
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

/// A `core__workspace_write` whose run is cancelled, or whose time is up, while its file work
/// waits for a blocking thread never lands, though that work gets its thread afterwards: the
/// model is told `cancelled` or `timeout`, and the disk agrees. The runtime's one blocking
/// thread is held until the runner has answered; a job queued after the write's runs after it.
#[test]
fn a_cancelled_or_timed_out_write_never_lands() {
    let dir = tempfile::tempdir().unwrap();
    let (caps, source) = core_tools(dir.path());
    // One runner whose time is up at once, and one whose time cannot run out within the test
    // however loaded the machine is, so the cancelled call can only end `cancelled`.
    let runner_with_budget = |max_runtime_ms: u64| {
        let policy = ToolPolicy::from_toml_str(&format!(
            "allowed_tools = [\"core__workspace_write\"]\n[budgets]\nmax_runtime_ms = {max_runtime_ms}"
        ))
        .unwrap();
        ToolRunner::new(source.clone(), Arc::new(policy), caps.clock.clone())
    };
    let runner = runner_with_budget(1);
    let patient = runner_with_budget(3_600_000);
    let ctx = RunContext::new("run-x", "user:test", "tenant").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), runner.policy(), &ctx).unwrap();
    let sink = |_: AiEvent| {};
    let call = |id: &str, path: &str| ToolCall {
        id: ToolCallId::new(id).unwrap(),
        name: "core__workspace_write".into(),
        arguments: format!(r#"{{"path":"{path}","content":"abc"}}"#),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .max_blocking_threads(1)
        .build()
        .unwrap();
    runtime.block_on(async {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let busy = tokio::task::spawn_blocking(move || {
            let _ = held.recv();
        });

        // Its time is up while its job waits.
        let never = CancellationToken::new();
        let timed_out = runner
            .run_tool(&call("c1", "late.txt"), &ctx, &catalog, &sink, &never)
            .await;
        assert_eq!(
            timed_out.result.failure().unwrap().code,
            ToolErrorCode::Timeout
        );

        // Cancelled once the runner awaits the write: `join!` polls the call first, which runs
        // through to the tool's pending write before the token fires.
        let cancel = CancellationToken::new();
        let second = call("c2", "cancelled.txt");
        let (cancelled, ()) = tokio::join!(
            patient.run_tool(&second, &ctx, &catalog, &sink, &cancel),
            async { cancel.cancel() },
        );
        assert_eq!(
            cancelled.result.failure().unwrap().code,
            ToolErrorCode::Cancelled
        );

        release.send(()).unwrap();
        busy.await.unwrap();
        tokio::task::spawn_blocking(|| ()).await.unwrap();
    });
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A folder of more entries, with longer names, than fit the runner's default 32 KiB result
/// budget is still listed: the first entries by name, as many as fit, with `truncated` set, so
/// the model learns there is more instead of being told `result_too_large` and seeing nothing.
#[tokio::test]
async fn a_big_folder_with_long_names_is_listed_in_part_within_the_default_budget() {
    let dir = tempfile::tempdir().unwrap();
    // 250-byte names (the file system's limit is 255): 600 of them are ~160 KB of listing.
    let names: Vec<String> = (0..600)
        .map(|i| format!("{i:04}-{}.txt", "n".repeat(241)))
        .collect();
    for name in &names {
        std::fs::write(dir.path().join(name), "abc").unwrap();
    }
    let (caps, source) = core_tools(dir.path());
    // The default budgets: only the tool is allowed.
    let policy = ToolPolicy::from_toml_str(r#"allowed_tools = ["core__workspace_list"]"#).unwrap();
    assert_eq!(policy.budgets.max_result_bytes, 32 * 1024);
    let ctx = RunContext::new("run-x", "user:test", "tenant").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let runner = ToolRunner::new(source, Arc::new(policy), caps.clock.clone());
    let call = ToolCall {
        id: ToolCallId::new("c1").unwrap(),
        name: "core__workspace_list".into(),
        arguments: "{}".into(),
    };
    let list = runner
        .run_tool(&call, &ctx, &catalog, &|_| {}, &CancellationToken::new())
        .await;

    assert!(
        list.result.failure().is_none(),
        "{:?}",
        list.result.failure()
    );
    let content = list.result.model_content();
    assert!(content.len() < 32 * 1024, "{} bytes", content.len());
    let value: serde_json::Value = serde_json::from_str(&content).unwrap();
    assert_eq!(value["truncated"], true);
    let listed: Vec<&str> = value["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["path"].as_str().unwrap())
        .collect();
    // The first ones by name, and a useful share of them (each entry is ~290 bytes of JSON).
    assert!(listed.len() >= 50, "{} entries", listed.len());
    assert!(listed.len() < names.len());
    assert_eq!(listed, names[..listed.len()]);
}

/// A file over the workspace's 1 MiB read cap, which a whole read refuses, is read through the
/// whole stack in parts, each within the default result budget, and the parts make up the file.
#[tokio::test]
async fn a_file_over_the_read_cap_is_read_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..1_200_000)
        .map(|i| if i % 3 == 0 { 'é' } else { 'x' })
        .collect();
    std::fs::write(dir.path().join("big.txt"), &text).unwrap();
    let (caps, source) = core_tools(dir.path());
    assert!(matches!(
        ai_core::Workspace::read(caps.workspace.as_ref(), "big.txt").await,
        Err(ai_core::WorkspaceError::TooLarge { .. })
    ));
    let policy = ToolPolicy::from_toml_str(r#"allowed_tools = ["core__workspace_read"]"#).unwrap();
    let ctx = RunContext::new("run-x", "user:test", "tenant").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let runner = ToolRunner::new(source, Arc::new(policy), caps.clock.clone());
    let cancel = CancellationToken::new();
    let mut read = String::new();
    let mut args = serde_json::json!({"path": "big.txt"});
    for n in 0.. {
        let call = ToolCall {
            id: ToolCallId::new(format!("c{n}")).unwrap(),
            name: "core__workspace_read".into(),
            arguments: args.to_string(),
        };
        let run = runner
            .run_tool(&call, &ctx, &catalog, &|_: AiEvent| {}, &cancel)
            .await;
        let answer: serde_json::Value = serde_json::from_str(&run.result.model_content()).unwrap();
        read.push_str(
            answer["content"]
                .as_str()
                .unwrap_or_else(|| panic!("{answer}")),
        );
        match answer.get("next_offset") {
            Some(next) => args = serde_json::json!({"path": "big.txt", "offset": next}),
            None => break,
        }
    }
    assert!(read == text, "{} of {} bytes", read.len(), text.len());
}

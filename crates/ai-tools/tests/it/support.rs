//! A manual clock, an in-memory workspace and a runner harness.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ai_core::{
    AiEvent, BoundTool, CancellationToken, Clock, RunContext, StaticToolSource, ToolCall,
    ToolCallId, ToolCatalog, ToolPolicy, ToolRun, ToolRunner, Workspace, WorkspaceEntry,
    WorkspaceError, WorkspaceListing,
};

pub(crate) struct FixedClock(pub(crate) u64);

impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        self.0
    }
}

/// Files in a map; refuses nothing itself, so the tools' own path checks are what is tested.
#[derive(Default)]
pub(crate) struct MemoryWorkspace(pub(crate) Mutex<BTreeMap<String, String>>);

#[async_trait::async_trait]
impl Workspace for MemoryWorkspace {
    async fn list(&self, _dir: &str) -> Result<WorkspaceListing, WorkspaceError> {
        let entries = self
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(path, content)| WorkspaceEntry {
                path: path.clone(),
                is_dir: false,
                size: content.len() as u64,
            })
            .collect();
        Ok(WorkspaceListing {
            entries,
            truncated: false,
        })
    }
    async fn read(&self, path: &str) -> Result<String, WorkspaceError> {
        self.0
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .ok_or_else(|| WorkspaceError::NotFound { path: path.into() })
    }
    async fn write(&self, path: &str, content: &str) -> Result<(), WorkspaceError> {
        self.0.lock().unwrap().insert(path.into(), content.into());
        Ok(())
    }
}

/// Runs one call of `tool` through the runner, under a policy allowing exactly that tool.
pub(crate) async fn run(tool: Arc<dyn BoundTool>, args: &str) -> (ToolRun, Vec<AiEvent>) {
    runner(tool).call(args).await
}

/// One runner over one tool, under the default policy (breaker and retries included) allowing
/// exactly that tool, kept across calls as a server keeps it across runs.
pub(crate) struct OneToolRunner {
    runner: ToolRunner,
    catalog: ToolCatalog,
    ctx: RunContext,
}

/// A [`OneToolRunner`] over `tool`.
pub(crate) fn runner(tool: Arc<dyn BoundTool>) -> OneToolRunner {
    let policy = ToolPolicy {
        allowed_tools: [tool.spec().id.clone()].into(),
        ..ToolPolicy::default()
    };
    let ctx = RunContext::new("run-1", "user:test", "tenant-1").unwrap();
    let source = Arc::new(StaticToolSource::new(vec![tool]).unwrap());
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let runner = ToolRunner::new(source, Arc::new(policy), Arc::new(FixedClock(1)));
    OneToolRunner {
        runner,
        catalog,
        ctx,
    }
}

impl OneToolRunner {
    /// The state of the tool's circuit.
    pub(crate) fn breaker(&self) -> ai_core::BreakerStatus {
        self.runner.stats()[0].breaker
    }

    /// Calls the tool with `args`; returns the run and the events it emitted.
    pub(crate) async fn call(&self, args: &str) -> (ToolRun, Vec<AiEvent>) {
        let events = Mutex::new(Vec::new());
        let sink = |e: AiEvent| events.lock().unwrap().push(e);
        let call = ToolCall {
            id: ToolCallId::new("call_1").unwrap(),
            name: self.catalog.specs().next().unwrap().id.as_str().into(),
            arguments: args.into(),
        };
        let run = self
            .runner
            .run_tool(
                &call,
                &self.ctx,
                &self.catalog,
                &sink,
                &CancellationToken::new(),
            )
            .await;
        (run, events.into_inner().unwrap())
    }
}

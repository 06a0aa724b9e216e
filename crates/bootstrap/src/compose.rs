//! Binding capabilities to adapters and contracts to capabilities (`createCapabilities(env)` and
//! `createToolSource(contracts, caps)` of the seeds).

use std::sync::Arc;

use adapters::{FsWorkspace, SystemClock};
use ai_core::{BoundTool, Clock, StaticToolSource, Workspace};
use ai_tools::bind;
use ai_tools::tools::{GetCurrentTime, WorkspaceList, WorkspaceRead, WorkspaceWrite};
use anyhow::Context;

use crate::Config;

/// The long-lived capabilities core tools are built with.
#[derive(Clone)]
pub struct ToolCapabilities {
    /// The wall clock.
    pub clock: Arc<dyn Clock>,
    /// The workspace folder, confined to its root.
    pub workspace: Arc<dyn Workspace>,
}

impl std::fmt::Debug for ToolCapabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCapabilities").finish_non_exhaustive()
    }
}

/// The core tools a runtime can enable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreTool {
    /// `core__get_current_time`.
    GetCurrentTime,
    /// `core__workspace_list`.
    WorkspaceList,
    /// `core__workspace_read`.
    WorkspaceRead,
    /// `core__workspace_write`.
    WorkspaceWrite,
}

impl CoreTool {
    /// Every core tool.
    pub const ALL: &'static [CoreTool] = &[
        Self::GetCurrentTime,
        Self::WorkspaceList,
        Self::WorkspaceRead,
        Self::WorkspaceWrite,
    ];
}

/// Builds the capabilities from configuration: the system clock and a workspace confined to
/// `config.workspace_root`.
pub fn create_capabilities(config: &Config) -> anyhow::Result<ToolCapabilities> {
    let workspace = FsWorkspace::new(&config.workspace_root).with_context(|| {
        format!(
            "workspace root {} cannot be used",
            config.workspace_root.display()
        )
    })?;
    Ok(ToolCapabilities {
        clock: Arc::new(SystemClock),
        workspace: Arc::new(workspace),
    })
}

/// Binds the enabled core tools to `caps` into one source; an id collision is an error.
pub fn create_tool_source(
    tools: &[CoreTool],
    caps: &ToolCapabilities,
) -> anyhow::Result<StaticToolSource> {
    let bound = tools
        .iter()
        .map(|tool| -> anyhow::Result<Arc<dyn BoundTool>> {
            Ok(match tool {
                CoreTool::GetCurrentTime => bind(GetCurrentTime::new(caps.clock.clone()))?,
                CoreTool::WorkspaceList => bind(WorkspaceList::new(caps.workspace.clone()))?,
                CoreTool::WorkspaceRead => bind(WorkspaceRead::new(caps.workspace.clone()))?,
                CoreTool::WorkspaceWrite => bind(WorkspaceWrite::new(caps.workspace.clone()))?,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(StaticToolSource::new(bound)?)
}

//! Binding capabilities to adapters and contracts to capabilities (`createCapabilities(env)` and
//! `createToolSource(contracts, caps)` of the seeds).

use std::path::Path;
use std::sync::Arc;

use adapters::{FsWorkspace, SystemClock};
use ai_core::{BoundTool, Clock, StaticToolSource, Workspace, WorkspaceError, WorkspaceListing};
use ai_tools::bind;
use ai_tools::tools::{GetCurrentTime, WorkspaceList, WorkspaceRead, WorkspaceWrite};

use crate::Config;

/// The long-lived capabilities core tools are built with.
#[derive(Clone)]
pub struct ToolCapabilities {
    /// The wall clock.
    pub clock: Arc<dyn Clock>,
    /// The workspace folder, confined to its root.
    pub workspace: Arc<dyn Workspace>,
}

impl ToolCapabilities {
    /// The system clock and no workspace folder at all ([`NoWorkspace`]): for tools bound only
    /// for their specs and checks (`cogni tools list`, a replay, whose tools answer from their
    /// record), so no folder is opened (the working folder may be `/`, which a workspace
    /// refuses, or today's workspace missing) and none is touched.
    pub(crate) fn without_workspace() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            workspace: Arc::new(NoWorkspace),
        }
    }
}

/// A workspace with no folder: every call is refused as a workspace failure, never as the
/// caller's mistake, rather than touch a folder ([`ToolCapabilities::without_workspace`]).
struct NoWorkspace;

impl NoWorkspace {
    fn refuse(path: &str) -> WorkspaceError {
        WorkspaceError::Io {
            path: path.to_owned(),
            reason: "no workspace is bound: these tools are only listed or replayed".to_owned(),
        }
    }
}

#[async_trait::async_trait]
impl Workspace for NoWorkspace {
    async fn list(&self, dir: &str) -> Result<WorkspaceListing, WorkspaceError> {
        Err(Self::refuse(dir))
    }

    async fn read(&self, path: &str) -> Result<String, WorkspaceError> {
        Err(Self::refuse(path))
    }

    async fn write(&self, path: &str, _content: &str) -> Result<(), WorkspaceError> {
        Err(Self::refuse(path))
    }
}

impl std::fmt::Debug for ToolCapabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCapabilities").finish_non_exhaustive()
    }
}

/// The core tools a runtime can enable. More may come, so a match needs a catch-all arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

    /// The tool's id, e.g. `core__get_current_time`.
    pub fn id(self) -> &'static str {
        match self {
            Self::GetCurrentTime => "core__get_current_time",
            Self::WorkspaceList => "core__workspace_list",
            Self::WorkspaceRead => "core__workspace_read",
            Self::WorkspaceWrite => "core__workspace_write",
        }
    }
}

/// Builds the capabilities from configuration: the system clock and a workspace confined to
/// `config.workspace_root`, showing hidden entries only when `config.workspace_hidden` says so.
/// [`crate::Settings::capabilities`] also keeps the app's own files out of its reach.
pub fn create_capabilities(config: &Config) -> anyhow::Result<ToolCapabilities> {
    capabilities_reserving(config, &[], None)
}

/// [`create_capabilities`], with the workspace keeping `reserved` out of reach
/// ([`FsWorkspace::with_reserved`]), and refused when it is `data_dir` or lies inside it
/// ([`FsWorkspace::lies_in`]: `data_dir` placed as the store's open will make it). The data
/// folder holds other conversations' threads and runs, and is kept out of the tools' reach only
/// where it lies inside the workspace: a workspace inside it would show the tools its blobs, and
/// one that is it would refuse every call.
pub(crate) fn capabilities_reserving(
    config: &Config,
    reserved: &[&Path],
    data_dir: Option<&Path>,
) -> anyhow::Result<ToolCapabilities> {
    let root = config.workspace_root.display();
    let workspace = FsWorkspace::new(&config.workspace_root).map_err(|error| {
        // The adapter's own message names the root again: said once.
        if error.kind() == std::io::ErrorKind::NotADirectory {
            anyhow::anyhow!("workspace root {root} is not a folder")
        } else {
            anyhow::Error::new(error).context(format!("workspace root {root} cannot be used"))
        }
    })?;
    let workspace = workspace
        .with_hidden(config.workspace_hidden)
        .with_reserved(reserved);
    if let Some(data_dir) = data_dir
        && workspace.lies_in(data_dir)
    {
        anyhow::bail!(
            "{root} is the data folder (data_dir {}) or inside it, which holds other \
             conversations' threads and runs: give the tools a folder outside it",
            data_dir.display()
        );
    }
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

/// Everything a run needs, composed from [`crate::Settings`]: the agent and the tools it may
/// use. `cogni serve` and `cogni chat` both start here.
#[derive(Clone)]
pub struct Runtime {
    /// The loop.
    pub agent: graph::Agent,
    /// The runner the agent runs tools with (shared statistics).
    pub runner: ai_core::ToolRunner,
    /// The bound tools.
    pub source: Arc<dyn ai_core::ToolSource>,
    /// The policy catalogs are built under.
    pub policy: Arc<ai_core::ToolPolicy>,
    /// The wall clock.
    pub clock: Arc<dyn Clock>,
    /// What of the settings shapes a run's events (recorded with each run, for replay).
    pub run_settings: crate::RunSettings,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Binds the enabled tools, loads the policy and builds the agent over `completion`.
    pub fn build(
        settings: &crate::Settings,
        completion: Arc<dyn ai_core::CompletionPort>,
    ) -> anyhow::Result<Self> {
        let caps = settings.capabilities()?;
        let source: Arc<dyn ai_core::ToolSource> =
            Arc::new(create_tool_source(&settings.core_tools()?, &caps)?);
        let policy = Arc::new(settings.policy()?);
        Ok(Self::with_source(
            settings, completion, source, policy, caps.clock,
        ))
    }

    /// The runtime over an already built tool source and policy (e.g. one that answers from a
    /// recorded run), with the agent configured by `settings` exactly as [`Runtime::build`] does.
    pub fn with_source(
        settings: &crate::Settings,
        completion: Arc<dyn ai_core::CompletionPort>,
        source: Arc<dyn ai_core::ToolSource>,
        policy: Arc<ai_core::ToolPolicy>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let runner = tool_runner(settings, source.clone(), policy.clone(), clock.clone());
        let mut config = graph::AgentConfig::default()
            .with_max_steps(settings.agent.max_steps)
            .with_max_parallel_tools(settings.agent.max_parallel_tools);
        if let Some(prompt) = &settings.agent.system_prompt {
            config = config.with_system_prompt(prompt.clone());
        }
        let mut tools: Vec<String> = (source.tool_specs().into_iter())
            .map(|spec| spec.id.as_str().to_owned())
            .collect();
        tools.sort();
        let run_settings = crate::RunSettings {
            tools: Some(tools),
            policy: ai_core::ToolPolicy::clone(&policy),
            max_steps: settings.agent.max_steps,
            max_parallel_tools: settings.agent.max_parallel_tools,
        };
        Self {
            agent: graph::Agent::new(completion, runner.clone(), config),
            runner,
            source,
            policy,
            clock,
            run_settings,
        }
    }
}

/// The runner over `source` and `policy`, configured by `settings`
/// (`tools.trace_redacted_results`): the one a [`Runtime`]'s agent runs tools with, and `cogni
/// tools call` its call.
pub(crate) fn tool_runner(
    settings: &crate::Settings,
    source: Arc<dyn ai_core::ToolSource>,
    policy: Arc<ai_core::ToolPolicy>,
    clock: Arc<dyn Clock>,
) -> ai_core::ToolRunner {
    ai_core::ToolRunner::new(source, policy, clock).with_config(
        ai_core::RunnerConfig::default()
            .with_trace_redacted_results(settings.tools.trace_redacted_results),
    )
}

/// A one-line warning naming the tool ids `policy` names that neither cogni's core tools (enabled
/// or not) nor `source` has, or `None` when it names none. A rule for such an id applies to
/// nothing: it is most likely a typo (`core__workspace_raed`). It is a warning, not an error: a
/// tool source added later (an MCP server's) may have the tool. The ids are the operator's own
/// text, and a [`ai_core::ToolId`] holds no character a terminal reads as a control.
pub(crate) fn unknown_tools_warning(
    policy: &ai_core::ToolPolicy,
    source: &dyn ai_core::ToolSource,
) -> Option<String> {
    let specs = source.tool_specs();
    let unknown = policy.unknown_tools(|id| {
        CoreTool::ALL.iter().any(|tool| tool.id() == id.as_str())
            || specs.iter().any(|spec| &spec.id == id)
    });
    if unknown.is_empty() {
        return None;
    }
    let ids: Vec<&str> = unknown.iter().map(|id| id.as_str()).collect();
    Some(format!(
        "the policy names tools no tool source has, so its rules for them apply to nothing (a \
         typo?): {}",
        ids.join(", ")
    ))
}

/// The OpenAI-compatible completion adapter configured by `[llm]` (and `COGNI_LLM_*`). The API
/// key moves into the adapter and stays there.
pub fn create_completion(
    llm: &crate::LlmSettings,
) -> anyhow::Result<Arc<dyn ai_core::CompletionPort>> {
    let config = openai_config(llm);
    let completion = adapters::OpenAiCompletion::new(config).map_err(|error| {
        // Named by the setting at fault: a key no header can carry is not a base URL's fault.
        let setting = match &error {
            adapters::OpenAiConfigError::BaseUrl(_) | adapters::OpenAiConfigError::KeyOverHttp => {
                "llm.base_url"
            }
            adapters::OpenAiConfigError::EmptyModel => "llm.model",
            adapters::OpenAiConfigError::ApiKey => "COGNI_LLM_API_KEY",
            _ => "llm",
        };
        anyhow::Error::new(error).context(setting)
    })?;
    Ok(Arc::new(completion))
}

/// The adapter's config for `[llm]`: its endpoint, wire (and stateless reasoning), key (and
/// whether it may go over plain http to another host),
/// timeouts, call limit and retries; the rest are the adapter's defaults.
pub(crate) fn openai_config(llm: &crate::LlmSettings) -> adapters::OpenAiConfig {
    adapters::OpenAiConfig {
        api_key: llm.api_key.clone(),
        allow_key_over_http: llm.allow_key_over_http,
        wire: match llm.wire {
            crate::LlmWire::Chat => adapters::OpenAiWire::Chat,
            crate::LlmWire::Responses => adapters::OpenAiWire::Responses,
        },
        stateless_reasoning: llm.stateless_reasoning,
        request_timeout: std::time::Duration::from_millis(llm.request_timeout_ms),
        connect_timeout: std::time::Duration::from_millis(llm.connect_timeout_ms),
        idle_timeout: std::time::Duration::from_millis(llm.idle_timeout_ms),
        max_call: std::time::Duration::from_millis(llm.max_call_ms),
        max_retries: llm.max_retries,
        ..adapters::OpenAiConfig::new(llm.base_url.clone(), llm.model.clone())
    }
}

/// `completion`, recording a receipt of every model call into the run log when one is kept.
pub fn record_completion(
    completion: Arc<dyn ai_core::CompletionPort>,
    stores: &crate::Stores,
    llm: &crate::LlmSettings,
) -> Arc<dyn ai_core::CompletionPort> {
    let Some(log) = &stores.log else {
        return completion;
    };
    let (provider, encoder): (&str, adapters::ToolsEncoder) = match llm.wire {
        crate::LlmWire::Chat => ("openai-chat", Arc::new(wire_openai::chat::encode_tools)),
        crate::LlmWire::Responses => (
            "openai-responses",
            Arc::new(wire_openai::responses::encode_tools),
        ),
    };
    let config = adapters::RecordingConfig {
        provider: provider.into(),
        model: llm.model.clone(),
    };
    Arc::new(
        adapters::RecordingCompletion::new(
            completion,
            log.blobs.clone(),
            config,
            log.receipts.clone(),
        )
        .with_tools_encoder(encoder),
    )
}

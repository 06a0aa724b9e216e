//! `cogni.toml` and its `COGNI_*` overrides: everything `cogni serve` and `cogni chat` are
//! configured with, validated once at start so a bad setting is refused with its key and reason.
//! The other commands (`cogni tools …`, `cogni runs …`, `cogni replay`) read the settings they
//! use from the same sources in the same order ([`Settings::read`]) and check only those.
//!
//! Precedence, highest first: a command-line flag, its `COGNI_*` environment variable (clap reads
//! both, here in the composition root only), the config file, the defaults below. The API key is
//! read only from `COGNI_LLM_API_KEY` (or the hidden `--llm-api-key`), and the server's bearer
//! token only from `COGNI_SERVER_TOKEN` (or the hidden `--server-token`): never from the file, so
//! a committed config cannot leak either.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ai_core::{Secret, ToolPolicy};
use anyhow::{Context, bail};
use serde::Deserialize;

use crate::server::ServerToken;
use crate::{CoreTool, DEFAULT_POLICY_TOML};

/// The commented example config shipped in the repository (`cogni.example.toml`).
pub const EXAMPLE_CONFIG: &str = include_str!("../../../cogni.example.toml");

/// Which wire format the LLM endpoint speaks. More may come, so a match needs a catch-all arm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LlmWire {
    /// `POST {base_url}/chat/completions`.
    #[default]
    Chat,
    /// `POST {base_url}/responses`.
    Responses,
}

/// The most retries `llm.max_retries` may ask for. Each retry may wait up to the adapter's
/// largest backoff (8 s) or a server's `Retry-After` (up to 60 s), then up to
/// `llm.request_timeout_ms` again: with the default timeouts ten retries already let one model
/// call hold its client's stream for some twenty minutes, and an outage longer than that is
/// better reported than waited out.
pub const MAX_LLM_RETRIES: u32 = 10;

/// `[llm]`: the OpenAI-compatible endpoint. Its `Debug` shows the base URL as
/// [`LlmSettings::shown_base_url`] does, and never the key.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmSettings {
    /// Base URL up to and including the API version, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The model name the endpoint expects.
    pub model: String,
    /// The wire format.
    pub wire: LlmWire,
    /// With the Responses wire and a reasoning model: carry the model's reasoning from one
    /// request of a thread to the next without the provider storing it (`store: false`,
    /// `include: ["reasoning.encrypted_content"]`, each call's reasoning items sent back before
    /// it; [`adapters::OpenAiConfig::stateless_reasoning`]). Off by default, since a model that
    /// does not reason refuses such a request; refused with the chat wire, which has no
    /// reasoning items.
    pub stateless_reasoning: bool,
    /// Time allowed until the response's first byte, in ms.
    pub request_timeout_ms: u64,
    /// Time allowed to connect (TCP, then TLS), in ms, within `request_timeout_ms` (default
    /// 10 000): a host's addresses of one family share it, so one that never answers gives way
    /// to the next ([`adapters::OpenAiConfig::connect_timeout`]).
    pub connect_timeout_ms: u64,
    /// Time allowed without progress once the response has begun, in ms: from its first byte,
    /// then from each complete SSE event (keep-alive comments and the bytes of an unfinished
    /// event do not count).
    pub idle_timeout_ms: u64,
    /// Time allowed for a whole model call, in ms (default 600 000, 10 minutes): every attempt,
    /// the waits between them and the whole stream, however steadily the server sends events.
    /// Past it the call ends with an error naming this setting, and the run ends as on any
    /// failed model call; it is never retried, and a retry whose wait would end past it is not
    /// made.
    pub max_call_ms: u64,
    /// Retries of a failed request before its first byte (connection errors, timeouts, 408,
    /// 409, 429, 5xx, or as the server's `x-should-retry` says); at most [`MAX_LLM_RETRIES`].
    pub max_retries: u32,
    /// The API key (only from `COGNI_LLM_API_KEY` or `--llm-api-key`, never from the file;
    /// local servers need none).
    #[serde(skip)]
    pub api_key: Option<Secret>,
    /// Send the API key over a plain `http://` base URL to a host that is not loopback, where
    /// anyone on the path can read it ([`adapters::OpenAiConfig::allow_key_over_http`]). Off by
    /// default: such a start is refused naming this key. Loopback hosts (`localhost`,
    /// `127.0.0.1`, `::1`) and endpoints without a key never need it.
    pub allow_key_over_http: bool,
}

impl std::fmt::Debug for LlmSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            base_url: _,
            model,
            wire,
            stateless_reasoning,
            request_timeout_ms,
            connect_timeout_ms,
            idle_timeout_ms,
            max_call_ms,
            max_retries,
            api_key,
            allow_key_over_http,
        } = self;
        f.debug_struct("LlmSettings")
            .field("base_url", &self.shown_base_url())
            .field("model", model)
            .field("wire", wire)
            .field("stateless_reasoning", stateless_reasoning)
            .field("request_timeout_ms", request_timeout_ms)
            .field("connect_timeout_ms", connect_timeout_ms)
            .field("idle_timeout_ms", idle_timeout_ms)
            .field("max_call_ms", max_call_ms)
            .field("max_retries", max_retries)
            .field("api_key", api_key)
            .field("allow_key_over_http", allow_key_over_http)
            .finish()
    }
}

impl LlmSettings {
    /// The base URL as it may be shown (the start banner, errors), as the adapter names its
    /// endpoint: without credentials, query or fragment, and with the path segments that may be
    /// a key (some gateways take one in the path) shown as `***` ([`adapters::shown_url`]).
    pub fn shown_base_url(&self) -> String {
        adapters::shown_url(&self.base_url)
    }
}

impl Default for LlmSettings {
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".into(),
            model: String::new(),
            wire: LlmWire::Chat,
            stateless_reasoning: false,
            request_timeout_ms: 60_000,
            connect_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            max_call_ms: 600_000,
            max_retries: 2,
            api_key: None,
            allow_key_over_http: false,
        }
    }
}

/// `[server]`: the HTTP server.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    /// The address to listen on: an IP address and port, or `localhost:PORT` (127.0.0.1).
    pub listen: String,
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// The major version of the `ai` package the AI SDK clients run: 5 (the default) or later.
    /// From 6 on, calls that wait for approval are sent to them as `tool-approval-request`, and
    /// an answer the provider cut off ends with `finish.finishReason` (`length`,
    /// `content-filter`) besides its `messageMetadata`; ai 5.0.0 refuses both.
    ///
    /// The key `ai_sdk_approvals` (a bool, before this setting) is still read: `true` is 6,
    /// `false` is 5.
    #[serde(alias = "ai_sdk_approvals", deserialize_with = "ai_sdk_version")]
    pub ai_sdk_version: u8,
    /// Serve without a token on an address that is not loopback. Off by default: without
    /// `COGNI_SERVER_TOKEN`, `cogni serve` then refuses to start on such an address (anyone who
    /// can reach it could run the model and its tools); turn it on only behind something that
    /// authenticates for it.
    pub allow_unauthenticated: bool,
    /// The most runs (AG-UI and AI SDK together) the server runs at once; a run asked for
    /// beyond it is refused with 503 `too_many_runs` before it starts (at least one; 0 does
    /// not parse). It bounds the requests for a run being read or started at once too: one more
    /// gets the same 503 before a byte of its body is read, so the bodies the server holds at
    /// once are at most this many, each within `max_body_bytes`.
    #[serde(deserialize_with = "at_least_one")]
    pub max_concurrent_runs: std::num::NonZeroUsize,
    /// How many of a run's events may wait for its client before a client that takes none of
    /// them for `slow_client_grace_ms` has its stream cut (the run goes on and saves its
    /// thread; [`crate::server::AppState::with_max_unsent_events`], 4,096 by default; at least
    /// one; 0 does not parse).
    #[serde(deserialize_with = "at_least_one")]
    pub max_unsent_events: std::num::NonZeroUsize,
    /// How long, in ms, a client may take none of its run's events while more than
    /// `max_unsent_events` wait, before its stream is cut
    /// ([`crate::server::AppState::with_slow_client_grace`], 10 000 by default). 0 is no grace:
    /// a client is cut as soon as more wait, one that reads included (a burst past the bound
    /// cuts it), so the bound of events is as hard as `max_unsent_bytes`.
    #[serde(deserialize_with = "milliseconds")]
    pub slow_client_grace_ms: u64,
    /// The most bytes of a run's events (as JSON) that may wait for its client, reading or not,
    /// before its stream is cut at once: the hard bound of the memory a client holds in the
    /// server ([`crate::server::AppState::with_max_unsent_bytes`], 16 MiB by default; at least
    /// one; 0 does not parse).
    #[serde(deserialize_with = "at_least_one")]
    pub max_unsent_bytes: std::num::NonZeroUsize,
    /// The bearer token every request but `GET /healthz` must send (only from
    /// `COGNI_SERVER_TOKEN` or `--server-token`, never from the file; none: no authentication).
    #[serde(skip)]
    pub token: Option<ServerToken>,
}

/// The default of `server.max_concurrent_runs`.
pub(crate) const DEFAULT_MAX_CONCURRENT_RUNS: std::num::NonZeroUsize =
    std::num::NonZeroUsize::new(32).expect("32 is not zero");

/// The default of `server.max_unsent_events`: the server's own.
const DEFAULT_MAX_UNSENT_EVENTS: std::num::NonZeroUsize =
    std::num::NonZeroUsize::new(crate::server::DEFAULT_MAX_UNSENT_EVENTS).expect("not zero");

/// The default of `server.slow_client_grace_ms`: the server's own (10 s, which fits in a u64).
const DEFAULT_SLOW_CLIENT_GRACE_MS: u64 = crate::server::DEFAULT_SLOW_CLIENT_GRACE.as_secs() * 1000;

/// The default of `server.max_unsent_bytes`: the server's own.
const DEFAULT_MAX_UNSENT_BYTES: std::num::NonZeroUsize =
    std::num::NonZeroUsize::new(crate::server::DEFAULT_MAX_UNSENT_BYTES).expect("not zero");

/// The oldest `ai` major version whose UI message stream the server speaks.
pub(crate) const OLDEST_AI_SDK: u8 = 5;

/// Reads a count or size that 0 cannot be (`server.max_unsent_events`, `agent.max_steps`, …),
/// refusing anything else in plain words, not the Rust type's (`a nonzero usize`): a whole
/// number past what `T` holds is called too large, not one that is not at least 1.
fn at_least_one<'de, D, T>(de: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<std::num::NonZeroU64>,
{
    use serde::de::Error;
    let count = u64::deserialize(de)
        .ok()
        .and_then(std::num::NonZeroU64::new)
        .ok_or_else(|| D::Error::custom("expected a whole number, at least 1"))?;
    T::try_from(count).map_err(|_| D::Error::custom(format!("{count} is too large")))
}

/// Reads a time in milliseconds that may be 0 (`server.slow_client_grace_ms`), refusing
/// anything else in plain words, not the Rust type's (`u64`).
fn milliseconds<'de, D: serde::Deserializer<'de>>(de: D) -> Result<u64, D::Error> {
    u64::deserialize(de)
        .map_err(|_| serde::de::Error::custom("expected a whole number of milliseconds, 0 or more"))
}

/// Reads `server.ai_sdk_version`: a major version, or the bool `ai_sdk_approvals` was.
fn ai_sdk_version<'de, D: serde::Deserializer<'de>>(de: D) -> Result<u8, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Version(u8),
        Approvals(bool),
    }
    match Written::deserialize(de) {
        Ok(Written::Version(v)) => Ok(v),
        Ok(Written::Approvals(on)) => Ok(if on { 6 } else { OLDEST_AI_SDK }),
        Err(_) => Err(serde::de::Error::custom(
            "expected the major version of the `ai` package, like 6",
        )),
    }
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8787".into(),
            max_body_bytes: 1024 * 1024,
            ai_sdk_version: OLDEST_AI_SDK,
            allow_unauthenticated: false,
            max_concurrent_runs: DEFAULT_MAX_CONCURRENT_RUNS,
            max_unsent_events: DEFAULT_MAX_UNSENT_EVENTS,
            slow_client_grace_ms: DEFAULT_SLOW_CLIENT_GRACE_MS,
            max_unsent_bytes: DEFAULT_MAX_UNSENT_BYTES,
            token: None,
        }
    }
}

/// `[tools]`: which tools exist and which policy governs them.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsSettings {
    /// The core tools bound at start (the policy still decides which a model sees).
    pub enabled: Vec<String>,
    /// The folder workspace tools are confined to.
    pub workspace: PathBuf,
    /// Whether the workspace tools see hidden entries (names starting with `.`: `.env`,
    /// `.git/config`, `.npmrc`, which hold keys and tokens). Off by default: they are left out
    /// of listings and refused to reads and writes.
    pub workspace_hidden: bool,
    /// Record each tool call's redacted result (what the model is sent) on its tracing span
    /// (`gen_ai.tool.call.result`, [`ai_core::RunnerConfig::trace_redacted_results`]), for a
    /// subscriber that exports spans. Off by default: spans then hold no result. Arguments are
    /// never recorded (they have no redaction).
    pub trace_redacted_results: bool,
    /// A policy file (TOML, or JSON with a `.json` extension).
    pub policy_file: Option<PathBuf>,
    /// An inline policy, instead of a file.
    pub policy: Option<toml::Table>,
}

impl Default for ToolsSettings {
    fn default() -> Self {
        Self {
            enabled: CoreTool::ALL.iter().map(|t| t.id().to_owned()).collect(),
            workspace: PathBuf::from("."),
            workspace_hidden: false,
            trace_redacted_results: false,
            policy_file: None,
            policy: None,
        }
    }
}

/// `[agent]`: the loop.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentSettings {
    /// Model calls with tool calls per run (at least one; 0 does not parse).
    #[serde(deserialize_with = "at_least_one")]
    pub max_steps: std::num::NonZeroU32,
    /// Tool calls of one turn run at once (at least one; 0 does not parse).
    #[serde(deserialize_with = "at_least_one")]
    pub max_parallel_tools: std::num::NonZeroUsize,
    /// The system prompt of new threads.
    pub system_prompt: Option<String>,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            max_steps: graph::AgentConfig::default().max_steps,
            max_parallel_tools: graph::AgentConfig::default().max_parallel_tools,
            system_prompt: None,
        }
    }
}

/// The whole of `cogni.toml`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// The LLM endpoint.
    pub llm: LlmSettings,
    /// The HTTP server.
    pub server: ServerSettings,
    /// Tools and policy.
    pub tools: ToolsSettings,
    /// The loop.
    pub agent: AgentSettings,
    /// The data folder: threads and the run log (`cogni.db`, `blobs/`); without one, threads
    /// live in bounded memory ([`crate::MemoryThreads`]) and nothing is logged. Tool
    /// statistics (`cogni tools call`, `cogni tools stats`) are kept there too.
    pub data_dir: Option<PathBuf>,
    /// The config file these settings were read from ([`Settings::read`]), if any: not a key of
    /// the file.
    #[serde(skip)]
    pub config_file: Option<PathBuf>,
}

/// The overrides from flags and `COGNI_*` variables: all of them flattened into `serve` and
/// `chat`; the `tools`, `runs` and `replay` commands fill in only those they offer as flags, so
/// a setting they do not use cannot stop them. Its `Debug`
/// shows the base URL as [`LlmSettings::shown_base_url`] does, and never a key or token.
#[derive(Clone, Default, clap::Args)]
pub struct Overrides {
    /// The config file [default: ./cogni.toml when it exists].
    #[arg(long, env = "COGNI_CONFIG")]
    pub config: Option<PathBuf>,
    /// The LLM endpoint's base URL, e.g. http://localhost:11434/v1. Its variable's value is not
    /// shown in `--help`: some gateways take a key in the URL.
    #[arg(
        long,
        env = "COGNI_LLM_BASE_URL",
        hide_env_values = true,
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    pub llm_base_url: Option<String>,
    /// The model name.
    #[arg(
        long,
        env = "COGNI_LLM_MODEL",
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    pub llm_model: Option<String>,
    /// The endpoint's wire format.
    #[arg(long, env = "COGNI_LLM_WIRE")]
    pub llm_wire: Option<LlmWire>,
    /// With the Responses wire and a reasoning model, send each call's reasoning back with it
    /// (`llm.stateless_reasoning`); `--llm-stateless-reasoning=false` turns it off again.
    #[arg(
        long,
        env = "COGNI_LLM_STATELESS_REASONING",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub llm_stateless_reasoning: Option<bool>,
    /// Time allowed until the response's first byte, in ms (`llm.request_timeout_ms`).
    #[arg(long, env = "COGNI_LLM_REQUEST_TIMEOUT_MS")]
    pub llm_request_timeout_ms: Option<u64>,
    /// Time allowed to connect, within the time to the first byte, in ms
    /// (`llm.connect_timeout_ms`).
    #[arg(long, env = "COGNI_LLM_CONNECT_TIMEOUT_MS")]
    pub llm_connect_timeout_ms: Option<u64>,
    /// Time allowed without progress once the response has begun, in ms
    /// (`llm.idle_timeout_ms`).
    #[arg(long, env = "COGNI_LLM_IDLE_TIMEOUT_MS")]
    pub llm_idle_timeout_ms: Option<u64>,
    /// Time allowed for a whole model call, retries and waits included, in ms
    /// (`llm.max_call_ms`).
    #[arg(long, env = "COGNI_LLM_MAX_CALL_MS")]
    pub llm_max_call_ms: Option<u64>,
    /// The API key. Set it in the environment; a flag would show in the process list.
    /// A `Secret` from the start, so no `Debug` of the command line prints it.
    #[arg(
        long,
        env = "COGNI_LLM_API_KEY",
        hide = true,
        hide_env_values = true,
        value_parser = parse_secret
    )]
    pub llm_api_key: Option<Secret>,
    /// The address `cogni serve` listens on: an IP address and port, or `localhost:PORT`.
    #[arg(
        long,
        env = "COGNI_LISTEN",
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    pub listen: Option<String>,
    /// The bearer token `cogni serve` requires (`Authorization: Bearer <token>`). Set it in the
    /// environment; a flag would show in the process list. A `ServerToken` from the start, so no
    /// `Debug` of the command line prints it.
    #[arg(
        long,
        env = "COGNI_SERVER_TOKEN",
        hide = true,
        hide_env_values = true,
        value_parser = parse_server_token
    )]
    pub server_token: Option<ServerToken>,
    /// A policy file, replacing the config's policy.
    #[arg(long, env = "COGNI_POLICY")]
    pub policy: Option<PathBuf>,
    /// The workspace folder.
    #[arg(long, env = "COGNI_WORKSPACE")]
    pub workspace: Option<PathBuf>,
    /// Show the workspace's hidden entries (`.env`, `.git`, …) to the tools
    /// (`tools.workspace_hidden`); `--workspace-hidden=false` hides them again.
    #[arg(
        long,
        env = "COGNI_WORKSPACE_HIDDEN",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub workspace_hidden: Option<bool>,
    /// Record each tool call's redacted result on its tracing span
    /// (`tools.trace_redacted_results`); `--trace-redacted-results=false` turns it off again.
    #[arg(
        long,
        env = "COGNI_TRACE_REDACTED_RESULTS",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub trace_redacted_results: Option<bool>,
    /// The data folder.
    #[arg(long, env = "COGNI_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

impl std::fmt::Debug for Overrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured, so a new field must be placed here too.
        let Self {
            config,
            llm_base_url,
            llm_model,
            llm_wire,
            llm_stateless_reasoning,
            llm_request_timeout_ms,
            llm_connect_timeout_ms,
            llm_idle_timeout_ms,
            llm_max_call_ms,
            llm_api_key,
            listen,
            server_token,
            policy,
            workspace,
            workspace_hidden,
            trace_redacted_results,
            data_dir,
        } = self;
        // A gateway may take its key in the URL's path, query or userinfo.
        let shown_base_url = llm_base_url.as_deref().map(adapters::shown_url);
        f.debug_struct("Overrides")
            .field("config", config)
            .field("llm_base_url", &shown_base_url)
            .field("llm_model", llm_model)
            .field("llm_wire", llm_wire)
            .field("llm_stateless_reasoning", llm_stateless_reasoning)
            .field("llm_request_timeout_ms", llm_request_timeout_ms)
            .field("llm_connect_timeout_ms", llm_connect_timeout_ms)
            .field("llm_idle_timeout_ms", llm_idle_timeout_ms)
            .field("llm_max_call_ms", llm_max_call_ms)
            .field("llm_api_key", llm_api_key)
            .field("listen", listen)
            .field("server_token", server_token)
            .field("policy", policy)
            .field("workspace", workspace)
            .field("workspace_hidden", workspace_hidden)
            .field("trace_redacted_results", trace_redacted_results)
            .field("data_dir", data_dir)
            .finish()
    }
}

/// Reads the API key straight into a [`Secret`].
fn parse_secret(raw: &str) -> Result<Secret, std::convert::Infallible> {
    Ok(Secret::new(raw))
}

/// Reads the server's token straight into a [`ServerToken`]. An empty or blank one is refused
/// (a `"$(cat tokenfile)"` whose file is missing must not serve without a token), so clap's
/// error quotes nothing but blanks; any other is checked by [`Settings::require_server_auth`],
/// whose error never quotes it.
fn parse_server_token(raw: &str) -> Result<ServerToken, &'static str> {
    if raw.trim().is_empty() {
        return Err("the token is empty or blank: leave it unset to serve without a token");
    }
    Ok(ServerToken::new(raw))
}

/// A TOML file's error in one line naming the line, its key and what is wrong with it (an
/// unknown key, a value of the wrong type, …), as [`Settings::from_toml_str`] refuses: the line's
/// value is never echoed (it may be a secret written where it does not belong), nor is a line
/// that does not parse ([`ai_core::describe_toml_error`], which policies are read with too). A
/// malformed tool id in the inline `[tools.policy]` is named by its place, as the policy loaders
/// name it, never quoted, also where it opens a table (`[tools.policy.retry_per_tool."<id>"]`,
/// the header the TOML error points at: [`ToolPolicy::describe_toml_error`]). A key that is
/// never read from a config file (`llm.api_key`, `server.token`; quoted, dotted or in an inline
/// table) is told where it belongs; a key of that name in another table is not.
pub(crate) fn toml_error(text: &str, e: &toml::de::Error) -> anyhow::Error {
    describe_toml_error(text, e.message(), e.span())
}

/// [`toml_error`] from the error's message and span as plain values. The span is the parser's
/// byte offset into `text`: one past the text, or inside a character, names the place it
/// falls in (as [`ai_core::describe_toml_error`] does) rather than panicking.
fn describe_toml_error(
    text: &str,
    message: &str,
    span: Option<std::ops::Range<usize>>,
) -> anyhow::Error {
    if let Some(span) = &span {
        let start = text.floor_char_boundary(span.start);
        let line = text[..start].matches('\n').count() + 1;
        // The line's key by its whole path (`[llm]` then `api_key`, or `llm.api_key`): what a
        // value that does not parse (`api_key = sk-…`) is known by. A value that parses is
        // refused as an unknown field of the table the line sets, whatever form the key has
        // (an inline table's, on a line the key does not open).
        let path = key_path(text, line);
        let belongs = [
            ("llm", "api_key", "the API key", "COGNI_LLM_API_KEY"),
            ("server", "token", "the server token", "COGNI_SERVER_TOKEN"),
        ]
        .into_iter()
        .find(|(table, field, _, _)| {
            path == [*table, *field]
                || (path.first() == Some(table)
                    && message.starts_with(&format!("unknown field `{field}`")))
        })
        .map(|(_, _, what, variable)| (what, variable));
        if let Some((what, variable)) = belongs {
            return anyhow::anyhow!(
                "line {line}: {what} is never read from a config file; set {variable} instead"
            );
        }
    }
    anyhow::anyhow!(ToolPolicy::describe_toml_error(
        text,
        &["tools", "policy"],
        message,
        span
    ))
}

/// The whole path of the key line `line` (from 1) of `text` sets: its table's header (the last
/// `[…]` line above it), then the key's own dotted parts, each unquoted. Empty for a line that
/// sets no key.
fn key_path(text: &str, line: usize) -> Vec<&str> {
    fn parts(key: &str) -> impl Iterator<Item = &str> {
        key.split('.')
            .map(|part| part.trim().trim_matches(['"', '\'']))
    }
    let mut lines = text.lines().take(line).collect::<Vec<_>>();
    let Some((key, _)) = lines.pop().and_then(|source| source.split_once('=')) else {
        return Vec::new();
    };
    let header = lines
        .iter()
        .rev()
        .find_map(|source| source.trim().strip_prefix('['))
        .and_then(|header| header.trim_start_matches('[').split(']').next());
    header
        .into_iter()
        .flat_map(parts)
        .chain(parts(key))
        .collect()
}

impl Settings {
    /// Parses a config file's text. An error is one line naming the line and its key, never the
    /// line's value (it may be a secret written where it does not belong). An inline
    /// `[tools.policy]` is refused the same way, and an empty path (`data_dir = ""`) is refused
    /// naming its key.
    pub fn from_toml_str(text: &str) -> anyhow::Result<Self> {
        let settings: Self = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        // An empty path would be the working directory (or the file's folder): a data folder
        // strewn over it, say. Refused, as the flags and `COGNI_*` variables refuse one.
        for (key, path) in [
            ("data_dir", settings.data_dir.as_deref()),
            ("tools.workspace", Some(settings.tools.workspace.as_path())),
            ("tools.policy_file", settings.tools.policy_file.as_deref()),
        ] {
            if path.is_some_and(|path| path.as_os_str().is_empty()) {
                bail!("{key}: the path is empty: remove the key or give it a path");
            }
        }
        if settings.tools.policy.is_some() {
            // `[tools.policy]` is kept as a table and read as a policy later, when its lines are
            // gone: read it here too, so a bad value in it is refused like any other line of
            // the file (its line and key, never its value).
            // Read only for the error a bad value gives.
            #[allow(dead_code)]
            #[derive(Deserialize)]
            struct File {
                #[serde(default)]
                tools: Tools,
            }
            #[allow(dead_code)]
            #[derive(Default, Deserialize)]
            struct Tools {
                #[serde(default)]
                policy: Option<ToolPolicy>,
            }
            toml::from_str::<File>(text).map_err(|e| toml_error(text, &e))?;
        }
        Ok(settings)
    }

    /// The settings for a command: the config file (if any), then the overrides, validated
    /// ([`Settings::validate`]): what `cogni serve` and `cogni chat` start from.
    ///
    /// A relative path written in the config file (`data_dir`, `tools.workspace`,
    /// `tools.policy_file`) is relative to the file's folder, so a config reads the same from
    /// any working directory; defaults, flags and `COGNI_*` variables are relative to the working
    /// directory.
    pub fn load(overrides: &Overrides) -> anyhow::Result<Self> {
        let settings = Self::read(overrides)?;
        settings.validate()?;
        Ok(settings)
    }

    /// The config file (if any), then the overrides, as [`Settings::load`] reads them, but not
    /// validated: for a command that uses only some settings (`cogni runs`, `cogni replay`,
    /// `cogni tools …`) and
    /// checks those itself, so a setting it never uses (the model's, the server's, the
    /// workspace) cannot stop it. A config file that does not parse, or names an empty path, is
    /// still refused.
    pub fn read(overrides: &Overrides) -> anyhow::Result<Self> {
        let default_file = Path::new("cogni.toml");
        let file = match &overrides.config {
            Some(path) => Some(path.as_path()),
            // There unless nothing is at the name: one that cannot be read (a link to a file
            // that is gone, a folder) is refused naming it, not taken for no config file.
            None => match default_file.symlink_metadata() {
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                _ => Some(default_file),
            },
        };
        let mut settings = match file {
            Some(path) => {
                let text = crate::config::read_settings_file(path, "config file")?;
                let mut settings = Self::from_toml_str(&text)
                    .with_context(|| format!("config file {}", path.display()))?;
                settings.anchor_paths(&text, path);
                settings.config_file = Some(path.to_path_buf());
                settings
            }
            None => Self::default(),
        };
        settings.apply(overrides.clone());
        Ok(settings)
    }

    /// Joins the relative paths written in `text`, the config file at `file`, to the file's
    /// folder. Only paths the file names: a default is not the file's to place.
    fn anchor_paths(&mut self, text: &str, file: &Path) {
        let Some(dir) = file.parent().filter(|dir| !dir.as_os_str().is_empty()) else {
            return; // The file is in the working directory: nothing moves.
        };
        let Ok(table) = text.parse::<toml::Table>() else {
            return; // Unreachable: `from_toml_str` parsed the same text.
        };
        let tools = table.get("tools").and_then(toml::Value::as_table);
        let written = |key: &str| tools.is_some_and(|tools| tools.contains_key(key));
        if table.contains_key("data_dir")
            && let Some(data_dir) = &mut self.data_dir
        {
            *data_dir = dir.join(&*data_dir);
        }
        if written("workspace") {
            self.tools.workspace = dir.join(&self.tools.workspace);
        }
        if written("policy_file")
            && let Some(policy_file) = &mut self.tools.policy_file
        {
            *policy_file = dir.join(&*policy_file);
        }
    }

    fn apply(&mut self, o: Overrides) {
        if let Some(v) = o.llm_base_url {
            self.llm.base_url = v;
        }
        if let Some(v) = o.llm_model {
            self.llm.model = v;
        }
        if let Some(v) = o.llm_wire {
            self.llm.wire = v;
        }
        if let Some(v) = o.llm_stateless_reasoning {
            self.llm.stateless_reasoning = v;
        }
        if let Some(v) = o.llm_request_timeout_ms {
            self.llm.request_timeout_ms = v;
        }
        if let Some(v) = o.llm_connect_timeout_ms {
            self.llm.connect_timeout_ms = v;
        }
        if let Some(v) = o.llm_idle_timeout_ms {
            self.llm.idle_timeout_ms = v;
        }
        if let Some(v) = o.llm_max_call_ms {
            self.llm.max_call_ms = v;
        }
        self.llm.api_key = o.llm_api_key.filter(|k| !k.expose().is_empty());
        if let Some(v) = o.listen {
            self.server.listen = v;
        }
        self.server.token = o.server_token;
        if let Some(v) = o.policy {
            self.tools.policy_file = Some(v);
            self.tools.policy = None;
        }
        if let Some(v) = o.workspace {
            self.tools.workspace = v;
        }
        if let Some(v) = o.workspace_hidden {
            self.tools.workspace_hidden = v;
        }
        if let Some(v) = o.trace_redacted_results {
            self.tools.trace_redacted_results = v;
        }
        if let Some(v) = o.data_dir {
            self.data_dir = Some(v);
        }
    }

    /// Checks every setting; the error names the key and why.
    pub fn validate(&self) -> anyhow::Result<()> {
        // Read as the adapter reads it: around whitespace ignored, the scheme in any case.
        let url = self.llm.base_url.trim().trim_end_matches('/');
        let rest = ["https://", "http://"].into_iter().find_map(|scheme| {
            let start = url.get(..scheme.len())?;
            start
                .eq_ignore_ascii_case(scheme)
                .then(|| &url[scheme.len()..])
        });
        match rest {
            Some(rest) if carries_credentials(rest) => bail!(
                "llm.base_url: must not carry credentials (the key goes in COGNI_LLM_API_KEY; \
                 an `@` after a host and port is read as a password's end: write it as %40)"
            ),
            // The host is what comes before the path: `http:///v1` has none.
            Some(rest) if !authority(rest).is_empty() => {}
            Some(_) => bail!("llm.base_url: `{}` names no host", adapters::shown_url(url)),
            None => bail!(
                "llm.base_url: `{}` is not an http:// or https:// URL",
                adapters::shown_url(url)
            ),
        }
        if self.llm.request_timeout_ms == 0 || self.llm.idle_timeout_ms == 0 {
            bail!("llm.request_timeout_ms and llm.idle_timeout_ms must be above 0");
        }
        if self.llm.connect_timeout_ms == 0 {
            bail!("llm.connect_timeout_ms: must be above 0 (the longest a connection may take)");
        }
        if self.llm.max_call_ms == 0 {
            bail!("llm.max_call_ms: must be above 0 (the longest a model call may take)");
        }
        if self.llm.stateless_reasoning && !matches!(self.llm.wire, LlmWire::Responses) {
            bail!(
                "llm.stateless_reasoning: needs wire = \"responses\" (chat completions carry no \
                 reasoning items)"
            );
        }
        if self.llm.max_retries > MAX_LLM_RETRIES {
            bail!(
                "llm.max_retries: {} is more than {MAX_LLM_RETRIES}, the most a model call may retry",
                self.llm.max_retries
            );
        }
        self.listen_addr()?;
        if self.server.max_body_bytes < 1024 {
            bail!("server.max_body_bytes: must be at least 1024");
        }
        if self.server.ai_sdk_version < OLDEST_AI_SDK {
            bail!(
                "server.ai_sdk_version: {} is older than ai {OLDEST_AI_SDK}, the oldest AI SDK \
                 this server speaks",
                self.server.ai_sdk_version
            );
        }
        self.core_tools()?;
        self.policy()?;
        Ok(())
    }

    /// Checks what a model call needs: a model name.
    pub fn require_model(&self) -> anyhow::Result<()> {
        if self.llm.model.trim().is_empty() {
            bail!(
                "llm.model: no model is configured (set it in cogni.toml, --llm-model or COGNI_LLM_MODEL)"
            );
        }
        Ok(())
    }

    /// Checks what serving on `addr` needs: a token a client can send, if one is set, and a
    /// token at all unless `addr` is loopback (or `server.allow_unauthenticated` is on). The
    /// error is one line naming `COGNI_SERVER_TOKEN` and the override; it never quotes the token.
    pub fn require_server_auth(&self, addr: SocketAddr) -> anyhow::Result<()> {
        match &self.server.token {
            Some(token) if !token.is_sendable() => bail!(
                "COGNI_SERVER_TOKEN: the token must be one or more visible ASCII characters \
                 without spaces (a client sends it in `Authorization: Bearer <token>`)"
            ),
            Some(_) => Ok(()),
            None if addr.ip().to_canonical().is_loopback() => Ok(()),
            None if self.server.allow_unauthenticated => {
                tracing::warn!(
                    %addr,
                    "serving without a token on an address that is not loopback \
                     (server.allow_unauthenticated)"
                );
                Ok(())
            }
            None => bail!(
                "server.listen: {addr} is not a loopback address and no token is set: set \
                 COGNI_SERVER_TOKEN (clients then send `Authorization: Bearer <token>`), or set \
                 server.allow_unauthenticated = true to serve without one"
            ),
        }
    }

    /// `server.listen` as an address: an IP address and port, or `localhost:PORT` (in any case),
    /// which is `127.0.0.1:PORT`. `localhost` is read without asking a resolver, so it means
    /// loopback whatever `/etc/hosts` says; any other host name is refused, as a name may
    /// resolve to an exposed address.
    pub fn listen_addr(&self) -> anyhow::Result<SocketAddr> {
        let listen = &self.server.listen;
        if let Some((host, port)) = listen.rsplit_once(':')
            && host.eq_ignore_ascii_case("localhost")
        {
            return port
                .parse::<u16>()
                .map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
                .map_err(|e| {
                    anyhow::anyhow!(
                        "server.listen: `{listen}` does not end in a port from 0 to 65535 ({e})"
                    )
                });
        }
        listen.parse().map_err(|e| {
            anyhow::anyhow!(
                "server.listen: `{listen}` is not an address like 127.0.0.1:8787 or \
                 localhost:8787 (an IP address, or localhost, and a port; other host names are \
                 not resolved) ({e})"
            )
        })
    }

    /// `tools.enabled` as core tools. An entry that is no core tool is an error listing the
    /// known ones: a well-formed tool id is named (a typo to fix), anything else by its
    /// position and the rule it breaks, never quoted, as a policy's `allowed_tools` entry is
    /// (a list written by hand may hold anything pasted there). A tool listed twice is an error
    /// naming it.
    pub fn core_tools(&self) -> anyhow::Result<Vec<CoreTool>> {
        let mut tools = Vec::with_capacity(self.tools.enabled.len());
        for (entry, name) in (1..).zip(&self.tools.enabled) {
            let Some(tool) = CoreTool::ALL.iter().copied().find(|t| t.id() == name) else {
                let known: Vec<_> = CoreTool::ALL.iter().map(|t| t.id()).collect();
                let known = known.join(", ");
                match ai_core::ToolId::parse(name) {
                    Ok(_) => bail!("tools.enabled: unknown tool `{name}` (known: {known})"),
                    Err(ai_core::Error::InvalidToolId { reason, .. }) => bail!(
                        "tools.enabled: entry {entry} is not a valid tool id: {reason} (known: \
                         {known})"
                    ),
                    Err(_) => bail!(
                        "tools.enabled: entry {entry} is not a valid tool id (known: {known})"
                    ),
                }
            };
            if tools.contains(&tool) {
                bail!("tools.enabled: `{name}` is listed twice");
            }
            tools.push(tool);
        }
        Ok(tools)
    }

    /// What the workspace capability is built from: `tools.workspace` and
    /// `tools.workspace_hidden`.
    pub fn workspace_config(&self) -> crate::Config {
        crate::Config {
            workspace_root: self.tools.workspace.clone(),
            workspace_hidden: self.tools.workspace_hidden,
        }
    }

    /// The app's own files, which the workspace keeps out of reach when they lie inside it: the
    /// config file read, `cogni.toml` of the working folder (the one the next start reads,
    /// written or not), `tools.policy_file` and `data_dir`. A tool that could write them could
    /// change what the app trusts at its next start (`llm.base_url`, which the key is sent to;
    /// the policy), and the data folder holds other conversations' threads and runs.
    fn reserved_paths(&self) -> Vec<&Path> {
        [
            Some(Path::new("cogni.toml")),
            self.config_file.as_deref(),
            self.tools.policy_file.as_deref(),
            self.data_dir.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// The capabilities core tools are bound to: the system clock and the workspace of
    /// [`Settings::workspace_config`]. A workspace that cannot be used is an error naming
    /// `tools.workspace`. What `cogni serve`, `cogni chat` and `cogni tools call` bind their
    /// tools to.
    ///
    /// A workspace that is `data_dir` or lies inside it is refused naming both, `data_dir`
    /// placed where the store's open will make it (its missing names made as folders, a `..`
    /// after one climbing back from it): the data folder is kept out of the tools' reach only
    /// where it lies inside the workspace, so the tools would see its blobs (other
    /// conversations' threads and runs), or, were it the workspace itself, every call would be
    /// refused.
    pub fn capabilities(&self) -> anyhow::Result<crate::ToolCapabilities> {
        crate::compose::capabilities_reserving(
            &self.workspace_config(),
            &self.reserved_paths(),
            self.data_dir.as_deref(),
        )
        .context("tools.workspace")
    }

    /// The policy: inline, from its file, or the built-in default. Both an inline policy and a
    /// file are refused, naming the two keys.
    pub fn policy(&self) -> anyhow::Result<ToolPolicy> {
        if self.tools.policy.is_some() && self.tools.policy_file.is_some() {
            bail!("tools.policy and tools.policy_file: give one, not both");
        }
        if let Some(table) = &self.tools.policy {
            let text = toml::to_string(table).context("tools.policy")?;
            return ToolPolicy::from_toml_str(&text).context("tools.policy");
        }
        if self.tools.policy_file.is_some() {
            return crate::load_policy(self.tools.policy_file.as_deref())
                .context("tools.policy_file");
        }
        Ok(ToolPolicy::from_toml_str(DEFAULT_POLICY_TOML)?)
    }
}

/// The authority of an `http(s)` URL given without its `scheme://`: what comes before the path,
/// query or fragment, as a URL parser reads it (a `\` starts the path as a `/` does).
fn authority(rest: &str) -> &str {
    rest.split(['/', '\\', '?', '#']).next().unwrap_or_default()
}

/// Whether an `http(s)` URL given without its `scheme://` carries a user name or password: an
/// `@` in its authority, where a URL parser reads credentials, not one in the path or query
/// (`https://gw.example/v1/@org`). A password holding an unencoded `/`, `\`, `?` or `#`
/// (`https://user:pa/ss@host`) ends the authority before its `@`, leaving `user:pa`: an
/// authority with a `:` (past the IPv6 address it opens with, if any; a `]` elsewhere, or
/// after a `[` that holds no IPv6 address, ends nothing), followed by an `@` anywhere, counts
/// as credentials too, even when what follows the `:` could be a port (`user:123/ss@host` is a
/// password `123/ss` to the one who wrote it), as `adapters::shown_url` hides it. A host and port
/// with an `@` later (`http://host:8000/v1?x=a@b`) is refused with them: an `@` there is written
/// `%40`.
fn carries_credentials(rest: &str) -> bool {
    let authority = authority(rest);
    if authority.contains('@') {
        return true;
    }
    // Only an authority that opens with `[` and an IPv6 address holds one, whose `:`s are no
    // port's: a `]` elsewhere (in a password, `user:pa]ss/x@host`) ends nothing, nor does one
    // after a `[` that opens a user name (`[user:pa]ss/x@host`).
    let past_address = authority
        .strip_prefix('[')
        .and_then(|address| address.split_once(']'))
        .filter(|(address, _)| address.parse::<std::net::Ipv6Addr>().is_ok())
        .map_or(authority, |(_, after)| after);
    let has_colon = past_address.contains(':');
    has_colon && rest[authority.len()..].contains('@')
}

#[cfg(test)]
mod tests;

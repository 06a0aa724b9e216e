//! An app's own agent on cogni-tools, composed without `cogni-bootstrap`: its own tool (a
//! contract over its own capability), its own model port, the deny-by-default policy, the
//! catalog, the runner and the loop, as a composition root outside this workspace would write it.
//!
//! Run with `cargo run -p cogni-graph --example own_agent`. The model here is scripted; an app
//! plugs in `adapters::OpenAiCompletion` (or its own client) behind the same [`CompletionPort`].
//!
//! It names the core types as `graph::ai_core::…`, so it builds as it is in an app that depends
//! on `cogni-graph` and `cogni-ai-tools` (with `schemars`, `serde`, `serde_json` and `tokio`),
//! without a `cogni-ai-core` of its own.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use ai_tools::ToolContract;
use graph::ai_core::{
    self, AiEvent, CancellationToken, Capabilities, Clock, CompletionDelta, CompletionError,
    CompletionPort, DeltaSink, ExecPermit, FinishReason, LlmCompletion, LlmRequest, LlmToolCall,
    RunContext, StaticToolSource, ThreadId, ToolCallId, ToolEffect, ToolError,
    ToolInvocationContext, ToolPolicy, ToolRunner, ToolSource,
};
use graph::{Agent, AgentConfig, InMemoryThreadStore};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The app's capability: where forecasts come from (in a real app, an HTTP client in its own
/// adapter crate). Tools never do IO themselves.
#[ai_core::async_trait]
trait Forecasts: Send + Sync {
    async fn high_c(&self, city: &str, days: u8) -> Result<Vec<i32>, String>;
}

struct CannedForecasts;

#[ai_core::async_trait]
impl Forecasts for CannedForecasts {
    async fn high_c(&self, city: &str, days: u8) -> Result<Vec<i32>, String> {
        match city {
            "Atlantis" => Err("no such city".into()),
            _ => Ok((0..days).map(|day| 18 + i32::from(day)).collect()),
        }
    }
}

/// What the model may send: validated against the schema derived from this type.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ForecastInput {
    /// The city.
    city: String,
    /// Days ahead, 1 to 5.
    #[schemars(range(min = 1, max = 5))]
    days: u8,
}

#[derive(Serialize, JsonSchema)]
struct ForecastOutput {
    city: String,
    high_c: Vec<i32>,
    /// Not in the allowlist: it never reaches the model, the events or the record.
    station_key: String,
}

/// The contract, holding its capability.
struct GetForecast(Arc<dyn Forecasts>);

#[ai_core::async_trait]
impl ToolContract for GetForecast {
    type Input = ForecastInput;
    type Output = ForecastOutput;
    // Tool ids are `core__<name>` or `mcp__<server>__<tool>`.
    const ID: &'static str = "core__get_forecast";
    const DESCRIPTION: &'static str = "Daily highs for a city, 1 to 5 days ahead.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["city", "high_c"];

    async fn execute(
        &self,
        _: &ExecPermit,
        input: ForecastInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<ForecastOutput, ToolError> {
        let high_c = self
            .0
            .high_c(&input.city, input.days)
            .await
            .map_err(ToolError::invalid_input)?;
        Ok(ForecastOutput {
            city: input.city,
            high_c,
            station_key: "st-8f2a".into(),
        })
    }
}

/// The app's model port: plays completions in order, streaming them as deltas as a real client
/// would (the loop takes tool calls from the completion, the deltas are for display).
struct Scripted(Mutex<VecDeque<LlmCompletion>>);

#[ai_core::async_trait]
impl CompletionPort for Scripted {
    async fn complete(
        &self,
        _request: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        _cancel: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        let completion = self.0.lock().unwrap().pop_front().ok_or_else(|| {
            CompletionError::Transport("the script has no more completions".into())
        })?;
        deltas.delta(CompletionDelta::Text {
            delta: completion.text.clone(),
        });
        for (index, call) in completion.tool_calls.iter().enumerate() {
            deltas.delta(CompletionDelta::ToolCall {
                index,
                id: Some(call.id.as_str().into()),
                name: Some(call.name.clone()),
                arguments: call.arguments.clone(),
            });
        }
        Ok(completion)
    }
}

struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

fn completion(text: &str, calls: Vec<LlmToolCall>) -> LlmCompletion {
    LlmCompletion {
        text: text.into(),
        finish_reason: if calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        },
        tool_calls: calls,
        usage: None,
    }
}

fn call(id: &str, arguments: &str) -> LlmToolCall {
    LlmToolCall {
        id: ToolCallId::new(id).expect("a short id"),
        name: "core__get_forecast".into(),
        arguments: arguments.into(),
        complete: true,
        provider_fields: Default::default(),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A tool's panic message may hold what the tool held: keep it out of stderr.
    ai_core::install_tool_panic_hook();
    // The composition root: tools bound to their capabilities, a policy, a runner.
    let tool = ai_tools::bind(GetForecast(Arc::new(CannedForecasts)))?;
    let source = Arc::new(StaticToolSource::new(vec![tool])?);
    let policy = Arc::new(ToolPolicy::from_toml_str(
        r#"allowed_tools = ["core__get_forecast"]"#,
    )?);
    // A policy naming a tool the source does not have (a misspelt id) would hide it from the
    // catalog without a word: refuse it here, where the fix is.
    let unknown = policy.unknown_tools(|id| source.bound_tool(id).is_some());
    if !unknown.is_empty() {
        return Err(format!("the policy names tools this app does not have: {unknown:?}").into());
    }
    let runner = ToolRunner::new(source.clone(), policy.clone(), Arc::new(SystemClock));

    // The model asks for two forecasts (one for a city that does not exist), then answers.
    let model = Scripted(Mutex::new(VecDeque::from([
        completion(
            "Let me check.",
            vec![
                call("call_1", r#"{"city":"Oslo","days":2}"#),
                call("call_2", r#"{"city":"Atlantis","days":1}"#),
            ],
        ),
        completion("Oslo: 18 °C, then 19 °C. I found no Atlantis.", vec![]),
    ])));
    let agent = Agent::new(
        Arc::new(model),
        runner.clone(), // a clone shares the runner's statistics
        AgentConfig::default().with_graph("acme.weather", "1.0.0"),
    );

    // One run: who asks, what the model may see, and one turn on a thread.
    let ctx = RunContext::new("run-1", "user:alice", "tenant-1")?;
    // The tools the model may see in this run: the runner's own, under its own policy.
    let catalog = runner.catalog(&ctx)?;
    let threads = InMemoryThreadStore::default();
    let thread = ThreadId::new("thread-1")?;
    let events = |event: AiEvent| println!("{}", serde_json::to_string(&event).unwrap());
    let state = agent
        .run_thread(
            &threads,
            &thread,
            "Weather in Oslo and Atlantis?".into(),
            &ctx,
            &catalog,
            &events,
            &CancellationToken::new(),
        )
        .await?;
    println!("the thread holds {} messages", state.messages().len());
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The example runs to its end, its two calls answered and its turn finished: what it shows
    /// an adopter works, not only compiles.
    #[test]
    fn runs_to_its_end() {
        super::main().unwrap();
    }
}

//! Loop overhead per step: a run of 10 model turns, each asking for one instant tool call, with
//! a model that answers at once. Model and tool time are (nearly) zero, so what is measured is
//! the reducer, the driver, the runner and the history bookkeeping.
//!
//! And the reducer alone recording one turn of many calls (`turn_of_many_calls/N`: the model's
//! turn, then the answers to the 128 calls that run, the rest answered as never run), at two
//! sizes: each call's answer is looked up, not scanned for, so eight times the calls cost about
//! eight times as much, never sixty-four.
//!
//! Run with `cargo bench -p cogni-graph`.

#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ai_core::{
    AiEvent, CancellationToken, Capabilities, Clock, CompletionError, CompletionPort, DeltaSink,
    ExecPermit, FinishReason, LlmCompletion, LlmRequest, LlmToolCall, RunContext, StaticToolSource,
    ToolCallId, ToolCatalog, ToolEffect, ToolError, ToolExecResult, ToolInvocationContext,
    ToolPolicy, ToolRunner,
};
use ai_tools::{ToolContract, bind};
use criterion::{Criterion, criterion_group, criterion_main};
use graph::{Agent, AgentConfig, AgentEvent, AgentState, reduce};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const STEPS: usize = 10;

/// Asks for one tool call per turn until the run has `STEPS` turns.
struct InstantModel(AtomicUsize);

#[async_trait::async_trait]
impl CompletionPort for InstantModel {
    async fn complete(
        &self,
        request: &LlmRequest,
        _: &mut dyn DeltaSink,
        _: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        let turn = self.0.fetch_add(1, Ordering::Relaxed);
        let _ = request.messages.len();
        Ok(LlmCompletion {
            text: String::new(),
            tool_calls: vec![LlmToolCall {
                id: ToolCallId::new(format!("call_{turn}"))
                    .map_err(|e| CompletionError::Decode(e.to_string()))?,
                name: "core__echo".into(),
                arguments: r#"{"text":"hi"}"#.into(),
                complete: true,
                provider_fields: Default::default(),
            }],
            finish_reason: FinishReason::ToolCalls,
            usage: None,
        })
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct EchoInput {
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct EchoOutput {
    text: String,
}

struct Echo;

#[async_trait::async_trait]
impl ToolContract for Echo {
    type Input = EchoInput;
    type Output = EchoOutput;
    const ID: &'static str = "core__echo";
    const DESCRIPTION: &'static str = "Echo.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["text"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: EchoInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<EchoOutput, ToolError> {
        Ok(EchoOutput { text: input.text })
    }
}

struct ZeroClock;
impl Clock for ZeroClock {
    fn now_ms(&self) -> u64 {
        0
    }
}

fn bench_loop(c: &mut Criterion) {
    let policy = ToolPolicy::from_toml_str(r#"allowed_tools = ["core__echo"]"#).unwrap();
    let source = Arc::new(StaticToolSource::new(vec![bind(Echo).unwrap()]).unwrap());
    let ctx = RunContext::new("run-1", "user:bench", "tenant").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let runner = ToolRunner::new(source, Arc::new(policy), Arc::new(ZeroClock));
    let agent = Agent::new(
        Arc::new(InstantModel(AtomicUsize::new(0))),
        runner,
        AgentConfig::default().with_max_steps(std::num::NonZeroU32::new(STEPS as u32).unwrap()),
    );
    let cancel = CancellationToken::new();
    let sink = |_: AiEvent| {};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    c.bench_function("loop_run_of_10_steps", |b| {
        b.iter(|| {
            rt.block_on(agent.run(
                agent.new_state(),
                "go".into(),
                &ctx,
                &catalog,
                &sink,
                &cancel,
            ))
        })
    });
}

/// One turn of `n` calls recorded by the reducer: the completion that asks for them, then their
/// answers, from a state that has the user's message.
fn bench_turn_of_many_calls(c: &mut Criterion) {
    let mut group = c.benchmark_group("turn_of_many_calls");
    for n in [1_000, 8_000] {
        let ids: Vec<ToolCallId> = (0..n)
            .map(|i| ToolCallId::new(format!("call_{i}")).unwrap())
            .collect();
        let completion = LlmCompletion {
            text: String::new(),
            tool_calls: ids
                .iter()
                .map(|id| LlmToolCall {
                    id: id.clone(),
                    name: "core__echo".into(),
                    arguments: "{}".into(),
                    complete: true,
                    provider_fields: Default::default(),
                })
                .collect(),
            finish_reason: FinishReason::ToolCalls,
            usage: None,
        };
        // The calls that run (the first 128; the rest are answered at once as never run) get
        // their answers.
        let results: Vec<ToolExecResult> = ids
            .iter()
            .take(128)
            .map(|id| ToolExecResult::ok(id.clone(), serde_json::json!({})))
            .collect();
        let max_steps = std::num::NonZeroU32::new(STEPS as u32).unwrap();
        let user = AgentEvent::UserMessage {
            content: "go".into(),
        };
        let (asked, _) = reduce(AgentState::new(None, max_steps), user);
        group.bench_function(n.to_string(), |b| {
            b.iter_batched(
                || (asked.clone(), completion.clone(), results.clone()),
                |(state, completion, results)| {
                    let (state, _) = reduce(state, AgentEvent::ModelCompleted { completion });
                    let done = AgentEvent::ToolResults {
                        results,
                        cancelled: false,
                    };
                    reduce(state, done)
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench_loop, bench_turn_of_many_calls);
criterion_main!(benches);

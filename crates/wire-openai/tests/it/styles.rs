//! Well-formed chat streams, generated in each tool-call shape WIRE-FORMATS 2 lists (OpenAI's,
//! ids on every chunk, no `index`, parallel calls all at index 0, Gemini's whole calls without
//! index or id, vLLM's restart at index 0, argument objects), with any number of calls, any
//! arguments and any fragmenting: the decoder assembles exactly the calls the stream carries,
//! in order, however the bytes are split. The golden fixtures pin one stream per shape; this
//! checks the shapes' rules on streams nobody recorded.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use wire_openai::chat;

use crate::chunking::split;

/// How a server sends its tool calls (WIRE-FORMATS 1.4 and 2).
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// OpenAI: id, type and name on a call's first entry only, then `index` and a fragment.
    OpenAi,
    /// LiteLLM's proxy, DeepSeek, Qwen, llama.cpp before #13800: id, type and name repeated on
    /// every entry of a call.
    IdOnEveryChunk,
    /// Ollama before v0.4.7, SambaNova, mistral.rs: no `index`; the id on the first entry only.
    NoIndex,
    /// Ollama, LiteLLM's Anthropic bridge: every call whole in one entry, all at index 0.
    IndexZeroDistinctIds,
    /// Gemini's compatible endpoint: every call whole in one entry, `index` null, `id` "".
    GeminiWhole,
    /// vLLM: every call at index 0, its continuations with id "", type and name null.
    VllmRestart,
    /// llama.cpp, TGI, MiniMax: `arguments` an object, each call whole in one entry.
    ArgumentsObject,
}

impl Shape {
    /// Whether the shape tells calls apart on every entry (by index or id), so that a server may
    /// interleave their fragments.
    fn interleaves(self) -> bool {
        matches!(self, Self::OpenAi | Self::IdOnEveryChunk)
    }
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::OpenAi),
        Just(Shape::IdOnEveryChunk),
        Just(Shape::NoIndex),
        Just(Shape::IndexZeroDistinctIds),
        Just(Shape::GeminiWhole),
        Just(Shape::VllmRestart),
        Just(Shape::ArgumentsObject),
    ]
}

/// An argument value: strings with quotes, escapes and multi-byte characters, numbers,
/// booleans, null, and small nested lists and objects.
fn argument_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        "[a-z \"\\\\/\n\té€😀]{0,10}".prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..3)
                .prop_map(|map| Value::Object(map.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// One call: its name, its arguments (a JSON object), and where its text is cut into fragments.
fn call() -> impl Strategy<Value = (String, Value, Vec<usize>)> {
    (
        "[a-z_]{1,12}",
        proptest::collection::btree_map("[a-z]{1,6}", argument_value(), 0..4),
        proptest::collection::vec(0usize..1_000, 0..6),
    )
        .prop_map(|(name, arguments, cuts)| {
            let arguments = Value::Object(arguments.into_iter().collect());
            (name, arguments, cuts)
        })
}

/// `text` cut at `cuts` (moved back to character boundaries), in order, none empty.
fn fragments(text: &str, cuts: &[usize]) -> Vec<String> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|cut| {
            let mut at = cut % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            at
        })
        .collect();
    points.push(text.len());
    points.sort_unstable();
    points.dedup();
    let mut start = 0;
    let mut out = Vec::new();
    for point in points {
        if point > start {
            out.push(text[start..point].to_owned());
            start = point;
        }
    }
    out
}

/// The entries that carry call `n` in `shape`, in order.
fn entries(shape: Shape, n: usize, name: &str, arguments: &Value, cuts: &[usize]) -> Vec<Value> {
    let id = format!("call_{n}_x");
    let text = arguments.to_string();
    match shape {
        Shape::IndexZeroDistinctIds => vec![json!({"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": text}})],
        Shape::GeminiWhole => vec![json!({"index": null, "id": "", "type": "function",
            "function": {"name": name, "arguments": text}})],
        Shape::ArgumentsObject => vec![json!({"index": n, "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments}})],
        Shape::OpenAi | Shape::IdOnEveryChunk | Shape::NoIndex | Shape::VllmRestart => {
            let mut out = vec![match shape {
                Shape::NoIndex => json!({"id": id, "function": {"name": name, "arguments": ""}}),
                Shape::VllmRestart => json!({"index": 0, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}),
                _ => json!({"index": n, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}),
            }];
            for fragment in fragments(&text, cuts) {
                out.push(match shape {
                    Shape::OpenAi => json!({"index": n, "function": {"arguments": fragment}}),
                    Shape::IdOnEveryChunk => json!({"index": n, "id": id, "type": "function",
                        "function": {"name": name, "arguments": fragment}}),
                    Shape::NoIndex => json!({"function": {"arguments": fragment}}),
                    _ => json!({"index": 0, "id": "", "type": "function",
                        "function": {"name": null, "arguments": fragment}}),
                });
            }
            out
        }
    }
}

/// The stream: an optional text, the calls' entries (interleaved by `order` where the shape
/// allows it), the finish reason, an optional usage chunk, and `[DONE]`.
fn stream(
    shape: Shape,
    text: &str,
    calls: &[(String, Value, Vec<usize>)],
    order: &[usize],
    finish: &str,
) -> (Vec<u8>, Vec<usize>) {
    let mut queues: Vec<std::collections::VecDeque<Value>> = calls
        .iter()
        .enumerate()
        .map(|(n, (name, arguments, cuts))| entries(shape, n, name, arguments, cuts).into())
        .collect();
    let mut sent: Vec<Value> = Vec::new();
    // The calls in the order their first entry is sent: the order they are assembled in.
    let mut opened = Vec::new();
    let mut picks = order.iter().copied().cycle();
    let mut current = 0;
    while queues.iter().any(|queue| !queue.is_empty()) {
        let pick = if shape.interleaves() {
            let live: Vec<usize> = (0..queues.len())
                .filter(|&n| !queues[n].is_empty())
                .collect();
            live[picks.next().unwrap_or(0) % live.len()]
        } else {
            while queues[current].is_empty() {
                current += 1;
            }
            current
        };
        if !opened.contains(&pick) {
            opened.push(pick);
        }
        sent.push(queues[pick].pop_front().unwrap());
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = Vec::new();
    if !text.is_empty() {
        chunks.push(chunk(
            json!({"role": "assistant", "content": text}),
            Value::Null,
        ));
    }
    for entry in sent {
        chunks.push(chunk(json!({"tool_calls": [entry]}), Value::Null));
    }
    chunks.push(chunk(json!({}), json!(finish)));
    chunks.push(json!({"id": "chatcmpl-1", "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}));
    let mut bytes = Vec::new();
    for chunk in chunks {
        bytes.extend_from_slice(format!("data: {chunk}\n\n").as_bytes());
    }
    bytes.extend_from_slice(b"data: [DONE]\n\n");
    (bytes, opened)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_shape_assembles_exactly_the_calls_it_carries(
        shape in shape(),
        text in "[a-zé ]{0,8}",
        calls in proptest::collection::vec(call(), 1..5),
        order in proptest::collection::vec(any::<usize>(), 1..16),
        finish in prop_oneof![Just("tool_calls"), Just("stop")],
        cuts in proptest::collection::vec(0usize..100_000, 0..12),
    ) {
        let (bytes, opened) = stream(shape, &text, &calls, &order, finish);
        let mut decoder = chat::StreamDecoder::default();
        for piece in split(&bytes, &cuts) {
            decoder.feed(&piece).unwrap();
        }
        let completion = decoder.finish().unwrap();
        prop_assert_eq!(&completion.text, &text);
        prop_assert_eq!(completion.finish_reason, ai_core::FinishReason::ToolCalls);
        prop_assert_eq!(completion.usage.map(|u| u.total_tokens), Some(7));
        prop_assert_eq!(completion.tool_calls.len(), calls.len(), "{:?}", completion.tool_calls);
        for (call, &n) in completion.tool_calls.iter().zip(&opened) {
            let (name, arguments, _) = &calls[n];
            prop_assert_eq!(&call.name, name);
            prop_assert_eq!(&call.arguments, &arguments.to_string());
            prop_assert!(call.complete);
            if matches!(shape, Shape::GeminiWhole) {
                // Synthesized: nine letters and digits, as Mistral takes ids back.
                let id = call.id.as_str();
                prop_assert!(id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()), "{}", id);
            } else {
                prop_assert_eq!(call.id.as_str(), format!("call_{n}_x"));
            }
        }
    }
}

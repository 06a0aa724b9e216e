//! The golden streams mangled (bytes flipped, the stream cut, lines repeated, dropped, swapped or
//! taken from another stream, JSON values replaced by values of other types) and fed in any
//! chunking: neither decoder panics, a decoder that failed stays failed with the same error
//! (which never quotes the stream, unless it is the provider's own message), the text it shows
//! is the text it resolves, and neither the outcome nor the text shown depends on how the bytes
//! were split. Whole (non-streamed) answers mangled the same way (values replaced,
//! bytes flipped or cut) never panic either, and either keep the decoders' rules or fail with an
//! error that says what is wrong without quoting them. Any value in an item the Responses decoder
//! does not run, of any type, changes neither whether a decode succeeds nor its calls.

use ai_core::{CompletionDelta, FinishReason, LlmCompletion};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use wire_openai::{DecodeError, Limits, WholeAnswer, chat, responses};

use crate::chunking::{fixtures, split};
use crate::decode::outcome;

/// The decoder interface both wires share.
trait Decoder: Sized {
    fn create() -> Self;
    fn with_limits(limits: Limits) -> Self;
    fn push(&mut self, bytes: &[u8]) -> Result<Vec<CompletionDelta>, DecodeError>;
    fn failed(&self) -> bool;
    fn ended(&self) -> bool;
    fn said_how_it_ended(&self) -> bool;
    fn resolve(self) -> Result<LlmCompletion, DecodeError>;
}

/// Both decoders have the same inherent methods; the trait only names them.
macro_rules! decoder {
    ($decoder:ty) => {
        impl Decoder for $decoder {
            fn create() -> Self {
                Self::default()
            }
            fn with_limits(limits: Limits) -> Self {
                Self::new(limits)
            }
            fn push(&mut self, bytes: &[u8]) -> Result<Vec<CompletionDelta>, DecodeError> {
                self.feed(bytes)
            }
            fn failed(&self) -> bool {
                self.is_failed()
            }
            fn ended(&self) -> bool {
                self.is_ended()
            }
            fn said_how_it_ended(&self) -> bool {
                self.has_finished()
            }
            fn resolve(self) -> Result<LlmCompletion, DecodeError> {
                self.finish()
            }
        }
    };
}

decoder!(chat::StreamDecoder);
decoder!(responses::StreamDecoder);

/// A decoder under limits set as high as they go (a caller that wants none): then only the
/// decoder's own bounds keep a number the stream chose (an index) from sizing memory.
struct Unlimited<D>(D);

impl<D: Decoder> Decoder for Unlimited<D> {
    fn create() -> Self {
        Self(D::with_limits(
            Limits::default()
                .with_max_argument_bytes(usize::MAX)
                .with_max_tool_calls(usize::MAX)
                .with_max_total_bytes(usize::MAX)
                .with_max_event_bytes(usize::MAX),
        ))
    }
    fn with_limits(limits: Limits) -> Self {
        Self(D::with_limits(limits))
    }
    fn push(&mut self, bytes: &[u8]) -> Result<Vec<CompletionDelta>, DecodeError> {
        self.0.push(bytes)
    }
    fn failed(&self) -> bool {
        self.0.failed()
    }
    fn ended(&self) -> bool {
        self.0.ended()
    }
    fn said_how_it_ended(&self) -> bool {
        self.0.said_how_it_ended()
    }
    fn resolve(self) -> Result<LlmCompletion, DecodeError> {
        self.0.resolve()
    }
}

/// What one decode gave: the outcome (see [`outcome`]) and the text its deltas showed.
#[derive(Debug, PartialEq)]
struct Run {
    outcome: Value,
    shown: String,
}

/// Feeds `pieces` in order, then `after` (bytes that arrive once the stream has ended, if it
/// has), and resolves, checking on the way that a failed decoder keeps returning its error, that
/// an ended one ignores what follows, and that what it resolves keeps the decoders' rules.
fn drive<D: Decoder>(pieces: &[Vec<u8>], after: &[u8]) -> Result<Run, TestCaseError> {
    let mut decoder = D::create();
    let mut shown = String::new();
    let mut error: Option<String> = None;
    for piece in pieces {
        match decoder.push(piece) {
            Ok(deltas) => {
                prop_assert!(error.is_none(), "a failed decoder decoded again");
                for delta in deltas {
                    if let CompletionDelta::Text { delta } = delta {
                        prop_assert!(!delta.is_empty(), "an empty text delta");
                        shown.push_str(&delta);
                    }
                }
            }
            Err(e) => {
                prop_assert!(decoder.failed(), "feed failed, but is_failed says no");
                quotes_nothing(&e)?;
                let e = e.to_string();
                if let Some(first) = &error {
                    prop_assert_eq!(first, &e, "a failed decoder changed its error");
                }
                error = Some(e);
            }
        }
    }
    if decoder.ended() && !decoder.failed() {
        let later = decoder.push(after);
        prop_assert!(
            matches!(&later, Ok(deltas) if deltas.is_empty()),
            "bytes after the end were decoded: {:?}",
            later
        );
    }
    let failed = decoder.failed();
    let whole = decoder.ended() || decoder.said_how_it_ended();
    let resolved = decoder.resolve();
    match &resolved {
        Ok(completion) => {
            prop_assert!(!failed, "a failed decoder resolved");
            prop_assert_eq!(&shown, &completion.text, "shown text differs from resolved");
            if !completion.tool_calls.is_empty() {
                prop_assert_ne!(&completion.finish_reason, &FinishReason::Stop);
            }
            if [FinishReason::Length, FinishReason::Other("abort".into())]
                .contains(&completion.finish_reason)
            {
                prop_assert!(completion.tool_calls.iter().all(|c| !c.complete));
            }
        }
        Err(DecodeError::Truncated { partial, .. }) => {
            prop_assert!(
                !whole,
                "a stream that said how it ended is called truncated"
            );
            prop_assert_eq!(&shown, &partial.text, "shown text differs from partial");
            prop_assert!(partial.tool_calls.iter().all(|c| !c.complete));
        }
        Err(e) => {
            quotes_nothing(e)?;
            if let Some(first) = &error {
                prop_assert_eq!(first, &e.to_string(), "finish changed the error");
            }
        }
    }
    Ok(Run {
        outcome: outcome(resolved),
        shown,
    })
}

/// A stream's error never quotes it (the mutations put a canary in), unless it is the provider's
/// own message.
fn quotes_nothing(error: &DecodeError) -> Result<(), TestCaseError> {
    if !matches!(error, DecodeError::ProviderError { .. }) {
        let message = error.to_string();
        prop_assert!(
            !message.contains("CANARY"),
            "the error quotes the stream: {}",
            message
        );
    }
    Ok(())
}

/// The bytes fed whole and fed in the pieces `cuts` gives: the same run either way.
/// The same goes for bytes after the stream's end (`garbage`).
fn check<D: Decoder>(bytes: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
    let garbage = b"data: {\"error\":\"late\"}\n\ndata: {\n\n";
    let whole = drive::<D>(&[bytes.to_vec()], garbage)?;
    let pieces = drive::<D>(&split(bytes, cuts), garbage)?;
    prop_assert_eq!(pieces, whole);
    let bytewise: Vec<Vec<u8>> = bytes.iter().map(|b| vec![*b]).collect();
    let _ = drive::<D>(&bytewise, garbage)?;
    Ok(())
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip {
        at: usize,
        byte: u8,
    },
    Truncate {
        at: usize,
    },
    Duplicate {
        line: usize,
    },
    Drop {
        line: usize,
    },
    Swap {
        a: usize,
        b: usize,
    },
    /// A line of another stream (any fixture, either wire) put in.
    Insert {
        at: usize,
        from: usize,
        line: usize,
    },
    /// A JSON value in a `data:` line (by its pre-order position) replaced.
    Replace {
        line: usize,
        node: usize,
        with: Value,
    },
}

/// Arrays nested `depth` deep: past serde_json's recursion limit when deep enough.
fn nested(depth: usize) -> Value {
    (0..depth).fold(json!(1), |inner, _| json!([inner]))
}

fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // The edges a number the stream chose (an index, a count) can take.
        prop_oneof![Just(u64::MAX), Just(1u64 << 40), Just(u64::from(u32::MAX))]
            .prop_map(Value::from),
        (-1e300f64..1e300).prop_map(Value::from),
        Just(json!("")),
        ".{0,12}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
        Just(json!({"message": "m"})),
        Just(json!([{"type": "text", "text": "t"}, {"type": "thinking"}])),
        Just(json!({"type": "function_call", "id": "fc_x", "call_id": "c", "name": "n"})),
        (1usize..200).prop_map(nested),
    ]
}

/// Values that no error but the provider's own message may quote: a string, a key, a call's id
/// too long to keep, arguments of the wrong type.
fn canary() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("CANARY")),
        Just(json!({"CANARY": "CANARY"})),
        Just(json!(format!("CANARY{}", "x".repeat(130)))),
        Just(json!(["CANARY"])),
        Just(
            json!({"type": "function_call", "id": "CANARY", "call_id": "CANARY",
            "name": "CANARY", "arguments": ["CANARY"]})
        ),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0usize..100_000;
    let line = 0usize..1_000;
    prop_oneof![
        1 => (at.clone(), any::<u8>()).prop_map(|(at, byte)| Mutation::Flip { at, byte }),
        1 => at.clone().prop_map(|at| Mutation::Truncate { at }),
        1 => line.clone().prop_map(|line| Mutation::Duplicate { line }),
        1 => line.clone().prop_map(|line| Mutation::Drop { line }),
        1 => (line.clone(), line.clone()).prop_map(|(a, b)| Mutation::Swap { a, b }),
        1 => (line.clone(), 0usize..1_000, line.clone())
            .prop_map(|(at, from, line)| Mutation::Insert { at, from, line }),
        3 => (line, 0usize..1_000, prop_oneof![
            6 => json_value(),
            1 => canary(),
        ])
            .prop_map(|(line, node, with)| Mutation::Replace { line, node, with }),
    ]
}

/// Every golden stream of both wires.
fn all_fixtures() -> Vec<Vec<u8>> {
    let mut all = fixtures("openai-chat");
    all.extend(fixtures("openai-responses"));
    all.extend(fixtures("loop"));
    all
}

fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// The `n`th value of `value` in pre-order (counting `value` itself as 0), if there is one.
fn node_mut<'a>(value: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
    if *n == 0 {
        return Some(value);
    }
    *n -= 1;
    match value {
        Value::Array(items) => items.iter_mut().find_map(|item| node_mut(item, n)),
        Value::Object(map) => map.values_mut().find_map(|item| node_mut(item, n)),
        _ => None,
    }
}

fn count(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(map) => map.values().map(count).sum(),
        _ => 0,
    }
}

fn mutate(bytes: Vec<u8>, mutation: &Mutation, all: &[Vec<u8>]) -> Vec<u8> {
    let mut lines = lines(&bytes);
    match mutation {
        Mutation::Flip { at, byte } => {
            let mut bytes = bytes;
            if !bytes.is_empty() {
                let at = at % bytes.len();
                bytes[at] = *byte;
            }
            return bytes;
        }
        Mutation::Truncate { at } => {
            let mut bytes = bytes;
            bytes.truncate(at % (bytes.len() + 1));
            return bytes;
        }
        _ if lines.is_empty() => return bytes,
        Mutation::Duplicate { line } => {
            let line = line % lines.len();
            lines.insert(line, lines[line].clone());
        }
        Mutation::Drop { line } => {
            lines.remove(line % lines.len());
        }
        Mutation::Swap { a, b } => {
            let len = lines.len();
            lines.swap(a % len, b % len);
        }
        Mutation::Insert { at, from, line } => {
            let other = self::lines(&all[from % all.len()]);
            if !other.is_empty() {
                let at = at % (lines.len() + 1);
                lines.insert(at, other[line % other.len()].clone());
            }
        }
        Mutation::Replace { line, node, with } => {
            let at = line % lines.len();
            let text = String::from_utf8_lossy(&lines[at]).into_owned();
            let Some(data) = text.strip_prefix("data:") else {
                return bytes;
            };
            let Ok(mut value) = serde_json::from_str::<Value>(data.trim()) else {
                return bytes;
            };
            let mut n = node % count(&value);
            if let Some(target) = node_mut(&mut value, &mut n) {
                *target = with.clone();
            }
            let end = if text.ends_with("\r\n") { "\r\n" } else { "\n" };
            lines[at] = format!("data: {value}{end}").into_bytes();
        }
    }
    lines.concat()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A golden stream with a few mutations, fed to both decoders whole, in random pieces and
    /// byte by byte, under the default limits and under none.
    #[test]
    fn mangled_streams_decode_the_same_in_any_chunking(
        index in 0usize..1_000,
        mutations in proptest::collection::vec(mutation(), 1..5),
        cuts in proptest::collection::vec(0usize..100_000, 0..12),
    ) {
        let all = all_fixtures();
        let mut bytes = all[index % all.len()].clone();
        for mutation in &mutations {
            bytes = mutate(bytes, mutation, &all);
        }
        check::<chat::StreamDecoder>(&bytes, &cuts)?;
        check::<responses::StreamDecoder>(&bytes, &cuts)?;
        check::<Unlimited<chat::StreamDecoder>>(&bytes, &cuts)?;
        check::<Unlimited<responses::StreamDecoder>>(&bytes, &cuts)?;
    }

    /// Arbitrary bytes, and arbitrary `data:` lines, in any chunking.
    #[test]
    fn arbitrary_bytes_decode_the_same_in_any_chunking(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
        values in proptest::collection::vec(json_value(), 0..6),
        cuts in proptest::collection::vec(0usize..1_000, 0..8),
    ) {
        let mut stream = bytes;
        for value in values {
            stream.extend_from_slice(format!("\ndata: {value}\n\n").as_bytes());
        }
        check::<chat::StreamDecoder>(&stream, &cuts)?;
        check::<responses::StreamDecoder>(&stream, &cuts)?;
    }
}

/// The mutations do what they say (a property over mutations that did nothing would pass
/// vacuously).
#[test]
fn the_mutations_change_the_stream() {
    let all = all_fixtures();
    let original = all[0].clone();
    for mutation in [
        Mutation::Flip { at: 3, byte: 0xff },
        Mutation::Truncate { at: 10 },
        Mutation::Duplicate { line: 1 },
        Mutation::Drop { line: 1 },
        Mutation::Swap { a: 0, b: 1 },
        Mutation::Insert {
            at: 1,
            from: all.len() - 1,
            line: 1,
        },
        Mutation::Replace {
            line: 1,
            node: 1,
            with: json!(null),
        },
    ] {
        let mutated = mutate(original.clone(), &mutation, &all);
        assert_ne!(mutated, original, "{mutation:?}");
    }
}

/// The body of every whole-answer fixture (`fixtures/wire/openai-*-whole/*.json`), both wires.
fn whole_bodies() -> Vec<Vec<u8>> {
    let mut all = fixtures("openai-chat-whole");
    all.extend(fixtures("openai-responses-whole"));
    all.into_iter()
        .map(|fixture| {
            let fixture: Value = serde_json::from_slice(&fixture).unwrap();
            serde_json::to_vec(&fixture["body"]).unwrap()
        })
        .collect()
}

/// A whole body mangled: a JSON value replaced (by one of any type, or a canary string that no
/// error but the provider's own message may quote), or the bytes flipped or cut.
#[derive(Clone, Debug)]
enum BodyMutation {
    Replace { node: usize, with: Value },
    Flip { at: usize, byte: u8 },
    Truncate { at: usize },
}

fn body_mutation() -> impl Strategy<Value = BodyMutation> {
    let with = prop_oneof![
        3 => json_value(),
        1 => Just(json!("CANARY")),
        1 => Just(json!({"CANARY": "CANARY"})),
        1 => Just(json!([{"id": "CANARY", "type": "function_call", "call_id": "CANARY"}])),
    ];
    prop_oneof![
        4 => (0usize..1_000, with).prop_map(|(node, with)| BodyMutation::Replace { node, with }),
        1 => (0usize..100_000, any::<u8>()).prop_map(|(at, byte)| BodyMutation::Flip { at, byte }),
        1 => (0usize..100_000).prop_map(|at| BodyMutation::Truncate { at }),
    ]
}

fn mutate_body(mut body: Vec<u8>, mutation: &BodyMutation) -> Vec<u8> {
    match mutation {
        BodyMutation::Replace { node, with } => {
            let Ok(mut value) = serde_json::from_slice::<Value>(&body) else {
                return body;
            };
            let mut n = node % count(&value);
            if let Some(target) = node_mut(&mut value, &mut n) {
                *target = with.clone();
            }
            serde_json::to_vec(&value).unwrap()
        }
        BodyMutation::Flip { at, byte } => {
            if !body.is_empty() {
                let at = at % body.len();
                body[at] = *byte;
            }
            body
        }
        BodyMutation::Truncate { at } => {
            body.truncate(at % (body.len() + 1));
            body
        }
    }
}

/// What a whole decoder gives for any body: never a panic, and either an answer that keeps the
/// decoders' rules and the limits (the text its deltas show is its text, a turn with calls is a
/// tool turn, a cut turn's calls are incomplete, every delta names a call it has), the same
/// however often it is decoded, or an error that says what is wrong: never "truncated" (the body
/// is whole), never empty, and never quoting the body unless it is the provider's own message.
fn check_whole(
    decode: fn(&[u8], Limits) -> Result<WholeAnswer, DecodeError>,
    body: &[u8],
    limits: Limits,
) -> Result<(), TestCaseError> {
    let result = decode(body, limits);
    prop_assert_eq!(
        format!("{result:?}"),
        format!("{:?}", decode(body, limits)),
        "not deterministic"
    );
    match result {
        Ok(answer) => {
            let completion = &answer.completion;
            prop_assert!(body.len() <= limits.max_total_bytes);
            prop_assert!(completion.tool_calls.len() <= limits.max_tool_calls);
            let mut shown = String::new();
            for delta in &answer.deltas {
                match delta {
                    CompletionDelta::Text { delta } => {
                        prop_assert!(!delta.is_empty(), "an empty text delta");
                        shown.push_str(delta);
                    }
                    CompletionDelta::ToolCall { index, .. } => {
                        prop_assert!(*index < completion.tool_calls.len(), "{:?}", delta);
                    }
                    _ => {}
                }
            }
            prop_assert_eq!(&shown, &completion.text, "shown text differs from resolved");
            for call in &completion.tool_calls {
                prop_assert!(
                    call.arguments.len() <= limits.max_argument_bytes || call.arguments == "{}",
                    "arguments over the limit"
                );
            }
            if !completion.tool_calls.is_empty() {
                prop_assert_ne!(&completion.finish_reason, &FinishReason::Stop);
            }
            if [FinishReason::Length, FinishReason::Other("abort".into())]
                .contains(&completion.finish_reason)
            {
                prop_assert!(completion.tool_calls.iter().all(|c| !c.complete));
            }
        }
        Err(error) => {
            let message = error.to_string();
            prop_assert!(
                !matches!(error, DecodeError::Truncated { .. }),
                "a whole body is truncated: {}",
                message
            );
            prop_assert!(!message.trim().is_empty());
            if !matches!(error, DecodeError::ProviderError { .. }) {
                prop_assert!(
                    !message.contains("CANARY"),
                    "the error quotes the body: {}",
                    message
                );
            }
        }
    }
    Ok(())
}

fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        3 => Just(Limits::default()),
        1 => (1usize..64, 0usize..4, 0usize..4_096).prop_map(|(arguments, calls, total)| {
            Limits::default()
                .with_max_argument_bytes(arguments)
                .with_max_tool_calls(calls)
                .with_max_total_bytes(total)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A whole-answer body with a few mutations, given to both wires' whole decoders (a body of
    /// the other wire included) under default or tight limits.
    #[test]
    fn mangled_whole_answers_decode_or_say_what_is_wrong(
        index in 0usize..1_000,
        mutations in proptest::collection::vec(body_mutation(), 0..4),
        limits in limits(),
    ) {
        let all = whole_bodies();
        let mut body = all[index % all.len()].clone();
        for mutation in &mutations {
            body = mutate_body(body, mutation);
        }
        check_whole(chat::decode_completion, &body, limits)?;
        check_whole(responses::decode_response, &body, limits)?;
    }

    /// Arbitrary bytes, and arbitrary JSON values, as a whole body.
    #[test]
    fn arbitrary_whole_bodies_decode_or_say_what_is_wrong(
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
        value in json_value(),
    ) {
        let limits = Limits::default();
        for body in [bytes, serde_json::to_vec(&value).unwrap()] {
            check_whole(chat::decode_completion, &body, limits)?;
            check_whole(responses::decode_response, &body, limits)?;
        }
    }
}

/// The body mutations do what they say, and the whole bodies are there to mutate.
#[test]
fn the_body_mutations_change_the_body() {
    let all = whole_bodies();
    assert!(all.len() >= 2, "whole-answer fixtures found");
    let original = all[0].clone();
    for mutation in [
        BodyMutation::Replace {
            node: 1,
            with: json!("CANARY"),
        },
        BodyMutation::Flip { at: 3, byte: 0xff },
        BodyMutation::Truncate { at: 10 },
    ] {
        let mutated = mutate_body(original.clone(), &mutation);
        assert_ne!(mutated, original, "{mutation:?}");
    }
}

/// Values of every JSON type (none nested past serde_json's depth limit), to put in an item.
fn values_of_every_type() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(-7),
        json!(u64::MAX),
        json!(1.5),
        json!(""),
        json!("CANARY"),
        json!([]),
        json!(["CANARY"]),
        json!({}),
        json!({"CANARY": "CANARY"}),
        nested(3),
    ]
}

/// Every way to replace one value inside the items of `value` that the decoder does not run
/// (every output item but a `function_call`, under `item` or `output`), in any field but
/// `type` and at any depth, by each of [`values_of_every_type`].
fn unrun_item_variants(value: &Value) -> Vec<Value> {
    let items: Vec<Value> = match (value.get("item"), value.get("output")) {
        (Some(item), _) => vec![json!(["item"]), item.clone()],
        (None, Some(Value::Array(output))) => output
            .iter()
            .enumerate()
            .flat_map(|(i, item)| [json!(["output", i]), item.clone()])
            .collect(),
        _ => Vec::new(),
    };
    let mut variants = Vec::new();
    for pair in items.chunks(2) {
        let (path, item) = (&pair[0], &pair[1]);
        let Some(fields) = item.as_object() else {
            continue;
        };
        if item["type"] == "function_call" {
            continue;
        }
        for (field, inner) in fields.iter().filter(|(field, _)| *field != "type") {
            for node in 0..count(inner) {
                for with in values_of_every_type() {
                    let mut variant = value.clone();
                    let mut item = &mut variant[path[0].as_str().unwrap()];
                    if let Some(i) = path.get(1).and_then(Value::as_u64) {
                        item = &mut item[usize::try_from(i).unwrap()];
                    }
                    let mut n = node;
                    if let Some(target) = node_mut(&mut item[field.as_str()], &mut n) {
                        *target = with;
                    }
                    variants.push(variant);
                }
            }
        }
    }
    variants
}

/// What the decoder runs and how the turn ended: the calls and the finish reason. The reasoning
/// items a call keeps (`responses::REASONING_ITEMS_KEY`) are copies of the reasoning items as
/// sent, so they change with them by design: they are left out, once checked to be reasoning
/// items.
fn calls_and_ending(completion: &LlmCompletion) -> Value {
    let mut calls = completion.tool_calls.clone();
    for call in &mut calls {
        if let Some(kept) = call
            .provider_fields
            .remove(wire_openai::responses::REASONING_ITEMS_KEY)
        {
            let items = kept.as_array().expect("a list of items");
            assert!(
                items.iter().all(|item| item["type"] == "reasoning"),
                "{kept}"
            );
        }
    }
    json!({"calls": calls, "finish_reason": completion.finish_reason})
}

/// Every Responses stream and whole response, with any value of any field but `type` in an item
/// the decoder does not run (an MCP call, reasoning, a message, …) replaced by a value of any
/// type, at any depth: what decoded still does, with the same calls and the same ending, and what
/// failed still fails. Exhaustive over the fixtures' items.
#[test]
fn no_value_in_an_item_it_does_not_run_fails_the_decode() {
    let mut checked = 0;
    for bytes in fixtures("openai-responses") {
        let original = responses::decode_all(&bytes, Limits::default());
        let lines = lines(&bytes);
        for (at, line) in lines.iter().enumerate() {
            let text = String::from_utf8_lossy(line);
            let Some(Ok(event)) = text
                .strip_prefix("data:")
                .map(|data| serde_json::from_str::<Value>(data.trim()))
            else {
                continue;
            };
            for variant in unrun_item_variants(&event) {
                let mut mutated = lines.clone();
                mutated[at] = format!("data: {variant}\n").into_bytes();
                let decoded = responses::decode_all(&mutated.concat(), Limits::default());
                match (&original, &decoded) {
                    (Ok(original), Ok(decoded)) => assert_eq!(
                        calls_and_ending(original),
                        calls_and_ending(decoded),
                        "{variant}"
                    ),
                    (Err(original), Err(decoded)) => assert_eq!(
                        std::mem::discriminant(original),
                        std::mem::discriminant(decoded),
                        "{variant}"
                    ),
                    _ => panic!("{variant}: {decoded:?}, was {original:?}"),
                }
                checked += 1;
            }
        }
    }
    for bytes in fixtures("openai-responses-whole") {
        let fixture: Value = serde_json::from_slice(&bytes).unwrap();
        let body = &fixture["body"];
        let original =
            responses::decode_response(&serde_json::to_vec(body).unwrap(), Limits::default());
        for variant in unrun_item_variants(body) {
            let decoded = responses::decode_response(
                &serde_json::to_vec(&variant).unwrap(),
                Limits::default(),
            );
            match (&original, &decoded) {
                (Ok(original), Ok(decoded)) => assert_eq!(
                    calls_and_ending(&original.completion),
                    calls_and_ending(&decoded.completion),
                    "{variant}"
                ),
                (Err(original), Err(decoded)) => assert_eq!(
                    std::mem::discriminant(original),
                    std::mem::discriminant(decoded),
                    "{variant}"
                ),
                _ => panic!("{variant}: {decoded:?}, was {original:?}"),
            }
            checked += 1;
        }
    }
    assert!(checked > 1_000, "only {checked} variants");
}

/// What a decode assembled, apart from its bookkeeping: the text, and each call's name,
/// arguments and completeness (not its id, which a synthesized id seeds with the response id).
fn assembled(completion: &LlmCompletion) -> Value {
    let calls: Vec<Value> = completion
        .tool_calls
        .iter()
        .map(|call| json!([call.name, call.arguments, call.complete]))
        .collect();
    json!({"text": completion.text, "calls": calls})
}

/// Every way to replace one value of `object[key]`, at any depth (the whole value included), by
/// each of [`values_of_every_type`], for each of `keys` it has.
fn variants_under(object: &Value, keys: &[&str]) -> Vec<Value> {
    let mut variants = Vec::new();
    for key in keys {
        let Some(inner) = object.get(key) else {
            continue;
        };
        for node in 0..count(inner) {
            for with in values_of_every_type() {
                let mut variant = object.clone();
                let mut n = node;
                if let Some(target) = node_mut(&mut variant[key], &mut n) {
                    *target = with;
                }
                variants.push(variant);
            }
        }
    }
    variants
}

/// Every Responses stream with any value in the `response` object an event carries (its id,
/// usage, incomplete details, output, status, the whole object) replaced by a value of any type,
/// at any depth; and every whole response with its `id`, `usage` or `incomplete_details` so
/// replaced: that object is bookkeeping, so what decoded still does, with the same text and
/// calls, and what failed still fails the same way. The exception is a terminal event's snapshot
/// that carries the answer (nothing streamed before it): it is read as a whole response, so only
/// its `id`, `usage` and `incomplete_details` are replaced. Exhaustive over the fixtures.
#[test]
fn no_value_in_a_response_s_bookkeeping_fails_the_decode() {
    let same = |original: &Result<LlmCompletion, DecodeError>,
                decoded: &Result<LlmCompletion, DecodeError>,
                variant: &Value| match (original, decoded) {
        (Ok(original), Ok(decoded)) => {
            assert_eq!(assembled(original), assembled(decoded), "{variant}");
        }
        (Err(original), Err(decoded)) => assert_eq!(
            std::mem::discriminant(original),
            std::mem::discriminant(decoded),
            "{variant}"
        ),
        _ => panic!("{variant}: {decoded:?}, was {original:?}"),
    };
    let mut checked = 0;
    for bytes in fixtures("openai-responses") {
        let original = responses::decode_all(&bytes, Limits::default());
        let lines = lines(&bytes);
        for (at, line) in lines.iter().enumerate() {
            let text = String::from_utf8_lossy(line);
            let Some(Ok(event)) = text
                .strip_prefix("data:")
                .map(|data| serde_json::from_str::<Value>(data.trim()))
            else {
                continue;
            };
            // A terminal event whose snapshot carries the answer (nothing streamed before it)
            // is read for its `output` as a whole response is: only its bookkeeping is mutated,
            // as a whole response's is below.
            let decode_with = |event: &Value| {
                let mut mutated = lines.clone();
                mutated[at] = format!("data: {event}\n").into_bytes();
                responses::decode_all(&mutated.concat(), Limits::default())
            };
            let carries_answer = event["response"].is_object() && {
                let mut emptied = event.clone();
                emptied["response"]["output"] = json!([]);
                let emptied = decode_with(&emptied);
                match (&original, &emptied) {
                    (Ok(original), Ok(emptied)) => assembled(original) != assembled(emptied),
                    _ => false,
                }
            };
            let variants = if carries_answer {
                let bookkeeping = ["id", "usage", "incomplete_details"];
                variants_under(&event["response"], &bookkeeping)
                    .into_iter()
                    .map(|response| {
                        let mut variant = event.clone();
                        variant["response"] = response;
                        variant
                    })
                    .collect()
            } else {
                variants_under(&event, &["response"])
            };
            for variant in variants {
                let mut mutated = lines.clone();
                mutated[at] = format!("data: {variant}\n").into_bytes();
                same(
                    &original,
                    &responses::decode_all(&mutated.concat(), Limits::default()),
                    &variant,
                );
                checked += 1;
            }
        }
    }
    for bytes in fixtures("openai-responses-whole") {
        let fixture: Value = serde_json::from_slice(&bytes).unwrap();
        let body = &fixture["body"];
        let decode = |body: &Value| {
            responses::decode_response(&serde_json::to_vec(body).unwrap(), Limits::default())
                .map(|answer| answer.completion)
        };
        let original = decode(body);
        for variant in variants_under(body, &["id", "usage", "incomplete_details"]) {
            same(&original, &decode(&variant), &variant);
            checked += 1;
        }
    }
    assert!(checked > 1_000, "only {checked} variants");
}

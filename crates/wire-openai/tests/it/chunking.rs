//! The decoders give the same result however the bytes are split, and never panic on garbage.

use ai_core::CompletionDelta;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use wire_openai::{Limits, chat, responses};

use crate::decode::outcome;

pub(crate) fn fixtures(dir: &str) -> Vec<Vec<u8>> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/wire/");
    let mut out: Vec<_> = std::fs::read_dir(format!("{root}{dir}"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    out.sort();
    out.into_iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Splits `bytes` at the given cut points (taken modulo the length, so they may fall inside a
/// multi-byte UTF-8 character or a CRLF).
pub(crate) fn split(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut pieces = Vec::new();
    let mut start = 0;
    for point in points {
        pieces.push(bytes[start..point].to_vec());
        start = point;
    }
    pieces.push(bytes[start..].to_vec());
    pieces
}

fn chat_in_pieces(pieces: &[Vec<u8>]) -> serde_json::Value {
    let mut decoder = chat::StreamDecoder::default();
    for piece in pieces {
        if let Err(e) = decoder.feed(piece) {
            return outcome(Err(e));
        }
    }
    outcome(decoder.finish())
}

fn responses_in_pieces(pieces: &[Vec<u8>]) -> serde_json::Value {
    let mut decoder = responses::StreamDecoder::default();
    for piece in pieces {
        if let Err(e) = decoder.feed(piece) {
            return outcome(Err(e));
        }
    }
    outcome(decoder.finish())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_chunking_gives_the_same_completion(cuts in proptest::collection::vec(0usize..100_000, 0..40)) {
        for bytes in fixtures("openai-chat") {
            let whole = outcome(chat::decode_all(&bytes, Limits::default()));
            prop_assert_eq!(chat_in_pieces(&split(&bytes, &cuts)), whole);
        }
        for bytes in fixtures("openai-responses") {
            let whole = outcome(responses::decode_all(&bytes, Limits::default()));
            prop_assert_eq!(responses_in_pieces(&split(&bytes, &cuts)), whole);
        }
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048), cuts in proptest::collection::vec(0usize..4096, 0..8)) {
        let pieces = split(&bytes, &cuts);
        let _ = chat_in_pieces(&pieces);
        let _ = responses_in_pieces(&pieces);
    }

    #[test]
    fn mangled_fixtures_never_panic(index in 0usize..64, flips in proptest::collection::vec((0usize..100_000, any::<u8>()), 1..8)) {
        let all = fixtures("openai-chat");
        let mut bytes = all[index % all.len()].clone();
        for (at, byte) in flips {
            let at = at % bytes.len();
            bytes[at] = byte;
        }
        let _ = chat::decode_all(&bytes, Limits::default());
        let _ = responses::decode_all(&bytes, Limits::default());
    }
}

/// Every fixture fed one byte at a time, and split once at every position: the same outcome as
/// fed whole. Exhaustive, so every split inside a multi-byte character or a CRLF pair is tried.
#[test]
fn every_single_split_and_byte_by_byte() {
    for bytes in fixtures("openai-chat") {
        let whole = outcome(chat::decode_all(&bytes, Limits::default()));
        let bytewise: Vec<Vec<u8>> = bytes.iter().map(|b| vec![*b]).collect();
        assert_eq!(chat_in_pieces(&bytewise), whole);
        for at in 0..=bytes.len() {
            assert_eq!(
                chat_in_pieces(&split(&bytes, &[at])),
                whole,
                "split at {at}"
            );
        }
    }
    for bytes in fixtures("openai-responses") {
        let whole = outcome(responses::decode_all(&bytes, Limits::default()));
        let bytewise: Vec<Vec<u8>> = bytes.iter().map(|b| vec![*b]).collect();
        assert_eq!(responses_in_pieces(&bytewise), whole);
        for at in 0..=bytes.len() {
            assert_eq!(
                responses_in_pieces(&split(&bytes, &[at])),
                whole,
                "split at {at}"
            );
        }
    }
}

/// What the display deltas of a whole feed add up to: the text, and each call's id, name and
/// argument text by position.
fn replay(deltas: &[CompletionDelta]) -> (String, Vec<(String, String, String)>) {
    let mut text = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for delta in deltas {
        match delta {
            CompletionDelta::Text { delta } => text.push_str(delta),
            CompletionDelta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                if calls.len() <= *index {
                    calls.resize(*index + 1, Default::default());
                }
                let call = &mut calls[*index];
                if let Some(id) = id {
                    assert!(call.0.is_empty(), "a call's id is announced once");
                    call.0.clone_from(id);
                }
                if let Some(name) = name {
                    assert!(call.1.is_empty(), "a call's name is announced once");
                    call.1.clone_from(name);
                }
                call.2.push_str(arguments);
            }
            other => panic!("unexpected delta {other:?}"),
        }
    }
    (text, calls)
}

/// However `bytes` are split, the deltas `feed` gives replay to what `decode_all` resolves: the
/// same text, and for each call the same id (when the server sent one), name and arguments (when
/// fragments were sent).
fn deltas_replay_to_the_completion<D>(
    bytes: &[u8],
    cuts: &[usize],
    decode_all: fn(&[u8], Limits) -> Result<ai_core::LlmCompletion, wire_openai::DecodeError>,
    mut decoder: D,
    feed: fn(&mut D, &[u8]) -> Result<Vec<CompletionDelta>, wire_openai::DecodeError>,
) -> Result<(), TestCaseError> {
    let Ok(completion) = decode_all(bytes, Limits::default()) else {
        return Ok(());
    };
    let mut deltas = Vec::new();
    for piece in split(bytes, cuts) {
        deltas.extend(feed(&mut decoder, &piece).unwrap());
    }
    let (text, calls) = replay(&deltas);
    prop_assert_eq!(&text, &completion.text);
    prop_assert_eq!(calls.len(), completion.tool_calls.len());
    for ((id, name, arguments), call) in calls.iter().zip(&completion.tool_calls) {
        if !id.is_empty() {
            prop_assert_eq!(id.as_str(), call.id.as_str());
        }
        prop_assert_eq!(name, &call.name);
        if !arguments.is_empty() {
            prop_assert_eq!(arguments, &call.arguments);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// However the bytes are split, the chat deltas replay to the completion.
    #[test]
    fn chat_deltas_replay_to_the_completion(cuts in proptest::collection::vec(0usize..100_000, 0..40)) {
        for bytes in fixtures("openai-chat") {
            let decoder = chat::StreamDecoder::default();
            deltas_replay_to_the_completion(&bytes, &cuts, chat::decode_all, decoder, chat::StreamDecoder::feed)?;
        }
    }

    /// However the bytes are split, the Responses deltas replay to the completion: a gateway's
    /// replayed deltas are shown once, and the `.done` events' final text is the text shown.
    #[test]
    fn responses_deltas_replay_to_the_completion(cuts in proptest::collection::vec(0usize..100_000, 0..40)) {
        for bytes in fixtures("openai-responses") {
            let decoder = responses::StreamDecoder::default();
            deltas_replay_to_the_completion(&bytes, &cuts, responses::decode_all, decoder, responses::StreamDecoder::feed)?;
        }
    }
}

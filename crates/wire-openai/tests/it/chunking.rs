//! The decoders give the same result however the bytes are split, and never panic on garbage.

use proptest::prelude::*;
use wire_openai::{chat, responses};

use crate::decode::outcome;

fn fixtures(dir: &str) -> Vec<Vec<u8>> {
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
fn split(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
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
            let whole = outcome(chat::decode_all(&bytes));
            prop_assert_eq!(chat_in_pieces(&split(&bytes, &cuts)), whole);
        }
        for bytes in fixtures("openai-responses") {
            let whole = outcome(responses::decode_all(&bytes));
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
    fn mangled_fixtures_never_panic(index in 0usize..19, flips in proptest::collection::vec((0usize..100_000, any::<u8>()), 1..8)) {
        let all = fixtures("openai-chat");
        let mut bytes = all[index % all.len()].clone();
        for (at, byte) in flips {
            let at = at % bytes.len();
            bytes[at] = byte;
        }
        let _ = chat::decode_all(&bytes);
        let _ = responses::decode_all(&bytes);
    }
}

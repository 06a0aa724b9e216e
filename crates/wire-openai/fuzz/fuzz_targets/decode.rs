//! Fuzzes both stream decoders with arbitrary bytes, fed in two pieces split at the first byte's
//! value, so that splits land anywhere, and both whole-answer decoders with the same bytes as a
//! body. Any panic is a bug; errors are fine.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let (head, tail) = data.split_at(split);

    let mut chat = wire_openai::chat::StreamDecoder::default();
    if chat.feed(head).is_ok() && chat.feed(tail).is_ok() {
        let _ = chat.finish();
    }
    let mut responses = wire_openai::responses::StreamDecoder::default();
    if responses.feed(head).is_ok() && responses.feed(tail).is_ok() {
        let _ = responses.finish();
    }

    let limits = wire_openai::Limits::default();
    let _ = wire_openai::chat::decode_completion(data, limits);
    let _ = wire_openai::responses::decode_response(data, limits);
});

//! Decoding generated chat-completions streams end to end from bytes, against a baseline that
//! only splits lines, parses each chunk with serde_json into a minimal borrowed struct and
//! appends the fragments.
//!
//! Corpora: S = 1 call with 2 KB of arguments; M = 8 parallel calls of 16 KB; L = 64 calls of
//! 64 KB; 8-byte argument fragments, one `data:` line per chunk, as OpenAI sends them.
//! Run with `cargo bench -p cogni-wire-openai`.

#![allow(missing_docs)]

use std::borrow::Cow;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde::Deserialize;

/// A stream of `calls` parallel calls of `size` bytes of arguments each, fragments interleaved.
fn corpus(calls: usize, size: usize) -> Vec<u8> {
    let mut out = String::new();
    for i in 0..calls {
        out += &format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{i},\"id\":\"call_{i}\",\"type\":\"function\",\"function\":{{\"name\":\"tool_{i}\",\"arguments\":\"\"}}}}]}},\"finish_reason\":null}}]}}\n\n"
        );
    }
    // Arguments: a JSON object with one long string value, escaped inside the JSON string.
    let body: String = "{\"text\":\"".to_owned()
        + &"lorem ipsum dolor sit amet ".repeat(size / 27 + 1)[..size - 12]
        + "\"}";
    let fragments: Vec<String> = body
        .as_bytes()
        .chunks(8)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    for fragment in &fragments {
        for i in 0..calls {
            let escaped = serde_json::to_string(fragment).unwrap();
            out += &format!(
                "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{i},\"function\":{{\"arguments\":{escaped}}}}}]}},\"finish_reason\":null}}]}}\n\n"
            );
        }
    }
    out += "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    out.into_bytes()
}

#[derive(Deserialize)]
struct MinChunk<'a> {
    #[serde(borrow)]
    choices: Vec<MinChoice<'a>>,
}
#[derive(Deserialize)]
struct MinChoice<'a> {
    #[serde(borrow)]
    delta: MinDelta<'a>,
}
#[derive(Deserialize)]
struct MinDelta<'a> {
    #[serde(default, borrow)]
    tool_calls: Vec<MinCall<'a>>,
}
#[derive(Deserialize)]
struct MinCall<'a> {
    index: usize,
    #[serde(borrow)]
    function: MinFunction<'a>,
}
#[derive(Deserialize)]
struct MinFunction<'a> {
    #[serde(default, borrow)]
    arguments: Cow<'a, str>,
}

/// The baseline: lines, one borrowed struct per chunk, fragments appended by index.
fn baseline(bytes: &[u8]) -> Vec<String> {
    let mut calls: Vec<String> = Vec::new();
    let text = std::str::from_utf8(bytes).unwrap();
    for line in text.split('\n') {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            break;
        }
        let chunk: MinChunk<'_> = serde_json::from_str(data).unwrap();
        for choice in chunk.choices {
            for call in choice.delta.tool_calls {
                if calls.len() <= call.index {
                    calls.resize(call.index + 1, String::new());
                }
                calls[call.index].push_str(&call.function.arguments);
            }
        }
    }
    calls
}

fn bench_decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("chat_decode");
    for (name, calls, size) in [
        ("S", 1, 2 * 1024),
        ("M", 8, 16 * 1024),
        ("L", 64, 64 * 1024),
    ] {
        let bytes = corpus(calls, size);
        // Both paths agree on what they assemble.
        // L is ~90 MB of SSE, over the default 64 MiB stream limit: raise it, as a caller would.
        let limits = wire_openai::Limits::default().with_max_total_bytes(256 * 1024 * 1024);
        let mut decoder = wire_openai::chat::StreamDecoder::new(limits);
        decoder.feed(&bytes).unwrap();
        let decoded = decoder.finish().unwrap();
        let base = baseline(&bytes);
        assert_eq!(decoded.tool_calls.len(), calls);
        assert!(
            decoded
                .tool_calls
                .iter()
                .zip(&base)
                .all(|(d, b)| &d.arguments == b)
        );
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        if name == "L" {
            group.sample_size(10);
        }
        group.bench_with_input(BenchmarkId::new("baseline", name), &bytes, |b, bytes| {
            b.iter(|| baseline(std::hint::black_box(bytes)))
        });
        group.bench_with_input(BenchmarkId::new("decoder", name), &bytes, |b, bytes| {
            b.iter(|| {
                let mut decoder = wire_openai::chat::StreamDecoder::new(limits);
                let deltas = decoder.feed(std::hint::black_box(bytes)).unwrap();
                std::hint::black_box(deltas);
                decoder.finish().unwrap()
            })
        });
        // The same bytes as a network delivers them: 16 KiB reads, deltas taken per read.
        group.bench_with_input(
            BenchmarkId::new("decoder_16k_reads", name),
            &bytes,
            |b, bytes| {
                b.iter(|| {
                    let mut decoder = wire_openai::chat::StreamDecoder::new(limits);
                    for read in std::hint::black_box(bytes).chunks(16 * 1024) {
                        std::hint::black_box(decoder.feed(read).unwrap());
                    }
                    decoder.finish().unwrap()
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench_decode);
criterion_main!(benches);

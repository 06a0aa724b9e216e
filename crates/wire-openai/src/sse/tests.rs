//! The WHATWG framing rules, case by case.

use super::{SseEvent, SseParser};

/// Parses `input` fed in one piece and returns `(event, data)` pairs.
fn events(input: &[u8]) -> Vec<(String, String)> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    parser
        .feed::<()>(input, |e| {
            out.push((e.event.to_owned(), e.data.to_owned()));
            Ok(())
        })
        .unwrap();
    out
}

fn check(input: &str, expected: &[(&str, &str)]) {
    let got = events(input.as_bytes());
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(e, d)| ((*e).to_owned(), (*d).to_owned()))
        .collect();
    assert_eq!(got, expected, "{input:?}");
}

#[test]
fn framing_rules() {
    check("data: a\n\n", &[("", "a")]);
    check("data:a\r\n\r\n", &[("", "a")]);
    check("data: a\r\rdata: b\r\r", &[("", "a"), ("", "b")]);
    check("data: a\ndata: b\n\n", &[("", "a\nb")]);
    check("data:  two spaces\n\n", &[("", " two spaces")]);
    check(": comment\ndata: x\n\n", &[("", "x")]);
    check(
        "event: ping\ndata: {}\nid: 7\nretry: 100\n\n",
        &[("ping", "{}")],
    );
    check("\u{feff}data: bom\n\n", &[("", "bom")]);
    check("data\n\n", &[("", "")]);
    check("event: lonely\n\n", &[]);
    check("data: cut at eof", &[]);
    check("data: unterminated\n", &[]);
}

#[test]
fn id_retry_and_offsets() {
    let mut parser = SseParser::new();
    let mut seen = Vec::new();
    parser
        .feed::<()>(b"id: 1\nretry: 250\ndata: a\n\n: c\ndata: b\n\n", |e| {
            seen.push((e.id.to_owned(), e.retry, e.offset));
            Ok(())
        })
        .unwrap();
    assert_eq!(
        seen,
        [
            ("1".to_owned(), Some(250), 0),
            ("1".to_owned(), Some(250), 30)
        ]
    );
}

#[test]
fn crlf_split_across_reads_is_one_line_end() {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    for piece in [&b"data: a\r"[..], b"\n\r", b"\ndata: b\r\n\r\n"] {
        parser
            .feed::<()>(piece, |e| {
                out.push(e.data.to_owned());
                Ok(())
            })
            .unwrap();
    }
    assert_eq!(out, ["a", "b"]);
}

/// Every event of `pieces` fed in order, with all its fields.
fn all_fields(pieces: &[&[u8]]) -> Vec<(String, String, String, Option<u64>, usize)> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    for piece in pieces {
        parser
            .feed::<()>(piece, |e| {
                out.push((
                    e.event.to_owned(),
                    e.data.to_owned(),
                    e.id.to_owned(),
                    e.retry,
                    e.offset,
                ));
                Ok(())
            })
            .unwrap();
    }
    out
}

/// Every framing rule at once: BOM, LF, CRLF and lone CR, fields with and without the space,
/// comments, multi-line data, event/id/retry, multi-byte characters, an unterminated tail.
const MIXED: &[u8] = "\u{feff}: hello\r\nevent: a\rdata:Grüße\r\ndata: 世界 🌍\n\nid: 7\nretry: 30\ndata: x\r\rdata: [DONE]\n\ndata: cut".as_bytes();

#[test]
fn mixed_stream_events() {
    let events = all_fields(&[MIXED]);
    assert_eq!(
        events,
        [
            (
                "a".to_owned(),
                "Grüße\n世界 🌍".to_owned(),
                String::new(),
                None,
                12 // After the BOM (3 bytes) and the comment line (9).
            ),
            // An event starts at its first field line (`id:`), not at its `data:`.
            ("".to_owned(), "x".to_owned(), "7".to_owned(), Some(30), 54),
            (
                "".to_owned(),
                "[DONE]".to_owned(),
                "7".to_owned(),
                Some(30),
                79
            ),
        ]
    );
}

#[test]
fn byte_by_byte_equals_whole() {
    let pieces: Vec<&[u8]> = MIXED.chunks(1).collect();
    assert_eq!(all_fields(&pieces), all_fields(&[MIXED]));
}

proptest::proptest! {
    #[test]
    fn any_split_gives_the_same_events(cuts in proptest::collection::vec(0..=MIXED.len(), 0..12)) {
        let mut cuts = cuts;
        cuts.sort_unstable();
        let mut pieces = Vec::new();
        let mut start = 0;
        for cut in cuts {
            pieces.push(&MIXED[start..cut]);
            start = cut;
        }
        pieces.push(&MIXED[start..]);
        proptest::prop_assert_eq!(all_fields(&pieces), all_fields(&[MIXED]));
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
        let _ = all_fields(&[&bytes]);
    }
}

/// Only dispatched events count: comments, blank lines, an event without data and an event not
/// yet ended do not, however the bytes are split; both dispatch paths (one `data:` line with its
/// blank line in the read, and the general one) do.
#[test]
fn events_counts_dispatched_events_only() {
    let mut parser = SseParser::new();
    let mut feed = |bytes: &[u8]| {
        parser.feed::<()>(bytes, |_| Ok(())).unwrap();
        parser.events()
    };
    assert_eq!(feed(b": keep-alive\n\n"), 0);
    assert_eq!(feed(b"\n\n\r\n"), 0);
    assert_eq!(feed(b"event: ping\nid: 3\nretry: 10\n\n"), 0);
    assert_eq!(feed(b"data: {\"cut\":"), 0);
    assert_eq!(feed(b" true}\n"), 0);
    assert_eq!(feed(b"\n"), 1);
    assert_eq!(feed(b"data: fast\n\n"), 2);
    assert_eq!(feed(b"event: x\ndata: a\ndata: b\n\n: c\n\n"), 3);
    assert_eq!(feed(b"data\n\n"), 4);
}

/// An event is held to the parser's limit by its lines as sent, from the end of the event
/// before (comments included) to its blank line, line ends not counted: one that passes it
/// stops the parser before anything of it is dispatched, however the bytes are split (a line
/// that never ends is not buffered past the limit), while the events before it are dispatched
/// and a blank line starts the count again.
#[test]
fn an_event_past_the_limit_stops_the_parser_in_any_split() {
    // Ten bytes a line: `data: 1234`, `: comment!`.
    let fits = b": comment!\ndata: 1234\n\n: comment!\n\ndata: 1234\ndata: 1234\n\n";
    let over = b"data: 1234\n\ndata: 1234\ndata: 1234\ndata: 12345\n\ndata: 5678\n\n";
    let never_ends = [&b"data: 1234\n\n"[..], &[b'x'; 100]].concat();
    for (input, dispatched, oversized) in [
        (&fits[..], 2, false),
        (&over[..], 1, true),
        (&never_ends[..], 1, true),
    ] {
        for size in 1..=input.len() {
            let mut parser = SseParser::with_max_event_bytes(30);
            let mut data = Vec::new();
            for read in input.chunks(size) {
                parser
                    .feed::<()>(read, |e| {
                        data.push(e.data.to_owned());
                        Ok(())
                    })
                    .unwrap();
                assert!(parser.partial.len() <= 30, "{input:?} in reads of {size}");
            }
            assert_eq!(data.len(), dispatched, "{input:?} in reads of {size}");
            assert_eq!(
                parser.is_oversized(),
                oversized,
                "{input:?} in reads of {size}"
            );
        }
    }
}

/// `feed` takes its callback by value, as a Rust user expects of a closure argument; one kept
/// across feeds (its state going on from read to read) is passed as `&mut`, which is a callback
/// too.
#[test]
fn a_callback_is_taken_by_value_or_kept_across_feeds_by_mut_reference() {
    let mut parser = SseParser::new();
    let mut data = Vec::new();
    let mut keep = |event: SseEvent<'_>| {
        data.push(event.data.to_owned());
        Ok::<(), ()>(())
    };
    parser.feed(b"data: 1\n\nda", &mut keep).unwrap();
    parser.feed(b"ta: 2\n\n", &mut keep).unwrap();
    let mut count = 0;
    parser
        .feed(b"data: 3\n\n", |_| {
            count += 1;
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!((data, count), (vec!["1".to_owned(), "2".to_owned()], 1));
}

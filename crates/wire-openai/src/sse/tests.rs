//! The WHATWG framing rules, case by case.

use super::SseParser;

/// Parses `input` fed in one piece and returns `(event, data)` pairs.
fn events(input: &[u8]) -> Vec<(String, String)> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    parser
        .feed::<()>(input, &mut |e| {
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
        .feed::<()>(
            b"id: 1\nretry: 250\ndata: a\n\n: c\ndata: b\n\n",
            &mut |e| {
                seen.push((e.id.to_owned(), e.retry, e.offset));
                Ok(())
            },
        )
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
            .feed::<()>(piece, &mut |e| {
                out.push(e.data.to_owned());
                Ok(())
            })
            .unwrap();
    }
    assert_eq!(out, ["a", "b"]);
}

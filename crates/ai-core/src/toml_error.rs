//! [`describe_toml_error`]: where a TOML document went wrong and why, without its values; and
//! the same for a JSON policy ([`json_place_error`]).

use std::ops::Range;

/// Describes why a TOML document (`text`) did not load into a type, in one line naming the line
/// and its key and what is wrong (an unknown key, a value of the wrong type, …), without ever
/// echoing a value: a line's value may be a secret written where it does not belong, so serde's
/// own message, which quotes the value it refused (`invalid type: string "…", expected u64`), is
/// kept without it. A line that does not parse is not known to be `key = value` (what looks like
/// its key may be a pasted token), nor is one inside a value written over several lines (an
/// array's element), so only its number is given; a table header is shown.
///
/// The error is given as plain values, its `message` (without the place:
/// `toml::de::Error::message`) and its byte `span` in `text` if it has one
/// (`toml::de::Error::span`; a span that starts inside a character, or past the text, names the
/// line that character, or the text's end, is on), so ai-core's API names no type of a TOML library
/// and an application may read its TOML with any version of one.
///
/// [`crate::ToolPolicy::from_toml_str`] reports its errors so; an application that reads its own
/// TOML may too.
///
/// ```
/// #[derive(Debug, serde::Deserialize)]
/// struct Limits { #[allow(dead_code)] count: u64 }
/// let text = "# limits\ncount = \"SECRET TEXT\"\n";
/// let e = toml::from_str::<Limits>(text).unwrap_err();
/// assert!(e.to_string().contains("SECRET TEXT"));
/// let described = ai_core::describe_toml_error(text, e.message(), e.span());
/// assert_eq!(described, "line 2 (`count = …`): invalid type: string, expected u64");
/// ```
pub fn describe_toml_error(text: &str, message: &str, span: Option<Range<usize>>) -> String {
    describe(text, message, span, |_| true)
}

/// [`describe_toml_error`], showing the table header the error points at only when
/// `show_header` says so of its text (a policy's reader hides one that holds a malformed tool
/// id); a header not shown is named by its line alone.
pub(crate) fn describe(
    text: &str,
    message: &str,
    span: Option<Range<usize>>,
    show_header: impl Fn(&str) -> bool,
) -> String {
    let message = without_value(message.trim());
    let Some(span) = span else {
        return message;
    };
    // The span is the caller's: one past the text, or inside a character (a span from another
    // text, or counted otherwise), names the place it falls in rather than panicking.
    let mut start = span.start.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let source = text.lines().nth(line - 1).unwrap_or_default().trim();
    // A line inside a value (an array or a string written over several lines) is the value's
    // text, whatever it looks like: an element `"c2VjcmV0=",` is no `key = value`, `["…"],` no
    // header. The line is a statement of its own when the document up to it is whole TOML.
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let statement = is_toml(&text[..line_start]);
    // A line that is not TOML is not known to be `key = value`: what looks like its key may be
    // a pasted token (`c2VjcmV0==`).
    let parses = statement && is_toml(text);
    match source.split_once('=') {
        Some((key, _)) if parses => format!("line {line} (`{} = …`): {message}", key.trim()),
        None if statement && source.starts_with('[') && show_header(source) => {
            format!("line {line} (`{source}`): {message}")
        }
        _ => format!("line {line}: {message}"),
    }
}

/// Whether `text` is TOML as written: its syntax, not its values' range. An integer past 64 bits
/// (`count = 99999999999999999999`, which a `toml::Table` refuses but a field of a type may read
/// as far as its own range) is still a `key = value` line, so its key can be named.
fn is_toml(text: &str) -> bool {
    toml::de::DeTable::parse(text).is_ok()
}

/// A JSON document's error in one line, as [`describe_toml_error`] says a TOML one's: where (the
/// line and column) and what is wrong, never the value, which serde_json's message quotes.
pub(crate) fn json_place_error(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let place = format!("line {} column {}", e.line(), e.column());
    let message = full.strip_suffix(&format!(" at {place}")).unwrap_or(&full);
    format!("{place}: {}", without_value(message.trim()))
}

/// serde's message about a value the type does not take, without the value, which serde quotes
/// (`invalid type: string "…", expected u64`, ``unknown variant `…` ``): the kind of value and
/// what was expected are kept.
fn without_value(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            // What follows the last ", expected " is the type's own words; the value, which
            // comes first, may hold that text too, but never after it.
            let at = rest.rfind(", expected ").unwrap_or(rest.len());
            // The kind comes before the quoted value: `string "…"`, ``integer `5` ``.
            let kind = rest[..at].split(['"', '`']).next().unwrap_or_default();
            return format!("{prefix}{}{}", kind.trim_end(), &rest[at..]);
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        let expected = rest.rfind("`, expected ").map_or("", |at| &rest[at + 1..]);
        return format!("unknown variant{expected}");
    }
    message.to_owned()
}

#[cfg(test)]
mod tests {
    use super::describe_toml_error;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        #[allow(dead_code)]
        names: Option<Vec<String>>,
        #[allow(dead_code)]
        count: Option<u64>,
        #[allow(dead_code)]
        table: Option<Table>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Table {
        #[allow(dead_code)]
        count: Option<u64>,
    }

    fn described(text: &str) -> String {
        let e = toml::from_str::<Doc>(text).unwrap_err();
        describe_toml_error(text, e.message(), e.span())
    }

    /// A line that lies inside a value (an array written over several lines) is never read as
    /// `key = value` or as a table header: what comes before an `=` in it, or the whole of it
    /// when it opens with `[`, is the value, and may be a token (base64 ends in `=`).
    #[test]
    fn a_line_inside_a_value_is_named_by_its_number_only() {
        for text in [
            "names = [\n  \"c2VjcmV0IHRva2Vu=\", 1,\n]\n",
            "names = [\n  [\"c2VjcmV0IHRva2Vu\"],\n]\n",
            "count = 1\nnames = [\"a\",\n  \"c2VjcmV0IHRva2Vu==\", { a = 1 },\n]\n",
        ] {
            let message = described(text);
            assert!(!message.contains("c2VjcmV0"), "{text:?}: {message}");
            assert!(message.starts_with("line "), "{message}");
            assert!(!message.contains('`'), "{text:?}: {message}");
        }
    }

    /// A key's line and a table header are still named, as before.
    #[test]
    fn a_key_and_a_header_are_named() {
        assert_eq!(
            described("names = []\ncount = \"SECRET\"\n"),
            "line 2 (`count = …`): invalid type: string, expected u64"
        );
        assert_eq!(
            described("count = 1\n[table]\ncount = \"SECRET\"\n"),
            "line 3 (`count = …`): invalid type: string, expected u64"
        );
        let header = described("[table]\nother = 1\n");
        assert!(header.starts_with("line 2 (`other = …`)"), "{header}");
        let unknown = described("[tables]\n");
        assert!(unknown.starts_with("line 1 (`[tables]`)"), "{unknown}");
    }

    /// A number too large for the type (and for TOML's 64 bits, so a `toml::Table` refuses the
    /// document) is still on a `key = value` line: its key is named, never the number.
    #[test]
    fn a_number_too_large_names_its_key() {
        for text in [
            "count = 99999999999999999999\n",
            "[table]\ncount = 99999999999999999999\n",
            "names = []\ncount = -99999999999999999999\n",
        ] {
            let message = described(text);
            assert!(message.contains("(`count = …`)"), "{text:?}: {message}");
            assert!(!message.contains("9999"), "{text:?}: {message}");
        }
    }

    /// A span that does not fit the text (inside a character, or past the end: the caller's
    /// values, as from another TOML library) names the line it falls on, never panics.
    #[test]
    fn a_span_inside_a_character_or_past_the_text_names_its_line() {
        let text = "a = 1\nb = \"é\"\n";
        let inside = text.find('é').unwrap() + 1;
        assert_eq!(
            describe_toml_error(text, "bad", Some(inside..inside + 1)),
            "line 2 (`b = …`): bad"
        );
        assert_eq!(
            describe_toml_error(text, "bad", Some(99..100)),
            "line 3: bad"
        );
    }
}

//! [`describe_toml_error`]: where a TOML document went wrong and why, without its values; and
//! the same for a JSON policy ([`json_place_error`]).

/// Describes why a TOML document (`text`) did not load into a type, in one line naming the line
/// and its key and what is wrong (an unknown key, a value of the wrong type, …), without ever
/// echoing a value: a line's value may be a secret written where it does not belong, so serde's
/// own message, which quotes the value it refused (`invalid type: string "…", expected u64`), is
/// kept without it. A line that does not parse is not known to be `key = value` (what looks like
/// its key may be a pasted token), so only its number is given; a table header is shown.
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
/// let described = ai_core::describe_toml_error(text, &e);
/// assert_eq!(described, "line 2 (`count = …`): invalid type: string, expected u64");
/// ```
pub fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = without_value(e.message().trim());
    let Some(span) = e.span() else {
        return message;
    };
    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
    let source = text.lines().nth(line - 1).unwrap_or_default().trim();
    // A line that is not TOML is not known to be `key = value`: what looks like its key may be
    // a pasted token (`c2VjcmV0==`).
    let parses = text.parse::<toml::Table>().is_ok();
    match source.split_once('=') {
        Some((key, _)) if parses => format!("line {line} (`{} = …`): {message}", key.trim()),
        None if source.starts_with('[') => format!("line {line} (`{source}`): {message}"),
        _ => format!("line {line}: {message}"),
    }
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

//! What an error answer says: the provider's message in a JSON body and how long to wait.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use serde_json::Value;

/// `retry-after-ms` (OpenAI's, milliseconds), else `Retry-After` in seconds (integer or decimal)
/// or as an HTTP-date, read as a wait from `now`. A wait too long for a [`Duration`] saturates,
/// so it is over any limit rather than taken for absent; a negative or unreadable value, or a
/// date already past, is ignored (the backoff applies).
pub(super) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| Some(headers.get(name)?.to_str().ok()?.trim());
    let seconds = |text: &str| -> Option<Duration> {
        let value = text.parse::<f64>().ok()?;
        (value >= 0.0).then(|| Duration::try_from_secs_f64(value).unwrap_or(Duration::MAX))
    };
    if let Some(wait) = text("retry-after-ms")
        .and_then(&seconds)
        .map(|ms| ms / 1000)
    {
        return Some(wait);
    }
    let text = text("retry-after")?;
    seconds(text).or_else(|| {
        let date = httpdate::parse_http_date(text).ok()?;
        date.duration_since(now).ok()
    })
}

/// The provider's message in a JSON error body: `{"error": {"message": …}}` (OpenAI),
/// `{"error": "…"}` (Ollama and others), `{"message": …}` or `{"detail": …}` (FastAPI servers
/// such as vLLM), and the first element of an array of these (Google's front ends). A body cut
/// before its value closes (held open past the read's bound, its connection closed early) is
/// read as far as its last whole member ([`cut_value`]): a message string that arrived whole
/// is kept, one cut short is not, nor a message that is no string (it may be cut too). `None`
/// for a body that is not JSON or names no message.
pub(super) fn provider_message(body: &[u8]) -> Option<String> {
    match serde_json::from_slice(body) {
        Ok(value) => message_of(value, true),
        Err(error) if error.is_eof() => message_of(cut_value(body)?, false),
        Err(_) => None,
    }
}

/// The message [`provider_message`] reads in `value`; one that is no string only when the body
/// was `whole`.
fn message_of(value: Value, whole: bool) -> Option<String> {
    // Google's front ends wrap the error in a one-element array.
    let value = match value {
        Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
        other => other,
    };
    let text = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
            Value::Null | Value::String(_) => None,
            _ if !whole => None,
            other => Some(other.to_string()),
        }
    };
    match value.get("error") {
        Some(Value::Object(error)) => {
            let message = error.get("message").and_then(text);
            let named = |key: &str| error.get(key)?.as_str().filter(|c| !c.is_empty());
            let code = named("code")
                .or_else(|| named("type"))
                .or_else(|| named("status"));
            match (message, code) {
                (Some(message), Some(code)) => Some(format!("{message} ({code})")),
                (Some(message), None) => Some(message),
                (None, Some(code)) => Some(code.to_owned()),
                (None, None) => None,
            }
        }
        Some(other) => text(other),
        None => value
            .get("message")
            .and_then(text)
            .or_else(|| value.get("detail").and_then(text)),
    }
}

/// A JSON object or array cut short, read without its cut end: as it stands when it ends after
/// a whole member (`…"slow down"`), else up to its last whole member (before the last `,`
/// outside a string, or after the last nested value that closed), with the brackets still open
/// closed. No string is ever closed, so no text cut short is taken for whole. `None` when
/// neither reads as JSON (a key cut from its value, brackets that do not match).
fn cut_value(body: &[u8]) -> Option<Value> {
    // The closers of the values open, innermost last.
    let mut open = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    // The last cut: where the text is cut, and how many values are open there. No value open
    // there closes after it, since each close is a cut of its own.
    let mut cut = None;
    for (at, &byte) in body.iter().enumerate() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' => open.push(b'}'),
            b'[' => open.push(b']'),
            b'}' | b']' => {
                if open.pop() != Some(byte) {
                    return None;
                }
                cut = Some((at + 1, open.len()));
            }
            b',' => cut = Some((at, open.len())),
            _ => {}
        }
    }
    let closed = |end: usize, depth: usize| -> Option<Value> {
        let mut text = body[..end].to_vec();
        text.extend(open[..depth].iter().rev());
        serde_json::from_slice(&text).ok()
    };
    let as_it_stands = || {
        if in_string {
            None
        } else {
            closed(body.len(), open.len())
        }
    };
    as_it_stands().or_else(|| {
        let (end, depth) = cut?;
        closed(end, depth)
    })
}

/// Whether `body` opens a JSON object or array (past whitespace) that does not close: a body
/// that ended inside its value, whatever a reader may still make of it ([`provider_message`]).
pub(super) fn unclosed_json(body: &[u8]) -> bool {
    let mut shape = wire_openai::JsonShape::default();
    let closed = shape.push(body).is_some();
    !closed && shape.is_open() && !body.trim_ascii().is_empty()
}

/// The first line of a plain-text error body that holds any text (a proxy's `upstream connect
/// error …`, Go's `404 page not found`), trimmed; `None` for a body with none. Only the bytes
/// read are looked at, and invalid UTF-8 is replaced, so a cut through a character is harmless.
pub(super) fn first_line(body: &[u8]) -> Option<String> {
    String::from_utf8_lossy(body)
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(str::to_owned)
}

/// A provider's text as one line that is safe to show on a terminal or in a log: a line break
/// or tab (`\n`, `\r`, `\t`; a `\r\n` counts as one) becomes a space, and every other C0 control
/// character, `DEL`, every C1 control character (U+0080–U+009F: `CSI`, `OSC`, …) and the
/// bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) become
/// U+FFFD, as the `cogni` CLI shows text from outside (bootstrap's `cli::terminal_safe`, which
/// this crate may not name). So a server cannot move the cursor, rewrite or reorder what the
/// operator sees, set the window title, or forge a line of its own in an error or a log line.
/// Plain spaces and every other character are kept.
pub(super) fn one_safe_line(text: &str) -> Cow<'_, str> {
    let bidi = |c: char| matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    if !text.chars().any(|c| c.is_control() || bidi(c)) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' | '\t' => shown.push(' '),
            c if c.is_control() || bidi(c) => shown.push('\u{FFFD}'),
            c => shown.push(c),
        }
    }
    Cow::Owned(shown)
}

//! What an error answer says: the provider's message in a JSON body and how long to wait.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

/// `retry-after-ms` (OpenAI's, milliseconds) or `Retry-After` in seconds (integer or decimal).
/// An HTTP-date, a negative or an unreadable value is ignored (the backoff applies).
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &str| -> Option<f64> {
        let value = headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    if let Some(ms) = read("retry-after-ms") {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    Duration::try_from_secs_f64(read("retry-after")?).ok()
}

/// The provider's message in a JSON error body: `{"error": {"message": …}}` (OpenAI),
/// `{"error": "…"}` (Ollama and others), `{"message": …}` or `{"detail": …}` (FastAPI servers
/// such as vLLM). `None` for a body that is not JSON or names no message.
pub(super) fn provider_message(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let text = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
            Value::Null | Value::String(_) => None,
            other => Some(other.to_string()),
        }
    };
    match value.get("error") {
        Some(Value::Object(error)) => {
            let message = error.get("message").and_then(text);
            let named = |key: &str| error.get(key)?.as_str().filter(|c| !c.is_empty());
            let code = named("code").or_else(|| named("type"));
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

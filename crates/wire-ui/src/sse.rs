//! Server-sent events framing shared by both protocols: `data: <json>\n\n`, no `event:` line.

use serde::Serialize;

/// The AI SDK stream's last frame.
pub const DONE_FRAME: &str = "data: [DONE]\n\n";

/// One SSE frame carrying `event` as JSON on a single `data:` line. JSON text never contains a
/// raw newline, so one line is always enough.
pub fn frame<T: Serialize>(event: &T) -> String {
    // Serializing these plain data types cannot fail (string keys, no non-finite floats from
    // serde_json::Value); an error would still produce a valid frame rather than a panic.
    let json = serde_json::to_string(event).unwrap_or_else(|_| {
        r#"{"type":"RUN_ERROR","message":"an event could not be encoded"}"#.to_owned()
    });
    format!("data: {json}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_one_data_line_and_a_blank_line() {
        let text = frame(&serde_json::json!({"delta": "a\nb"}));
        assert_eq!(text, "data: {\"delta\":\"a\\nb\"}\n\n");
    }
}

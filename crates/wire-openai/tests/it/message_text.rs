//! A Responses message's text, wherever the server puts it: in deltas, only in the `.done`
//! events that close a part (`response.output_text.done`, `response.refusal.done`,
//! `response.content_part.done`), in the finished item, or in several of them, is kept and
//! shown once.

use ai_core::CompletionDelta;
use serde_json::{Value, json};
use wire_openai::responses;

/// The answer's text and the text its display deltas show, for a stream of these events.
fn text_of(events: &[Value]) -> (String, String) {
    let stream: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    let mut decoder = responses::StreamDecoder::default();
    let deltas = decoder.feed(stream.as_bytes()).unwrap();
    let completion = decoder.finish().unwrap();
    let shown = deltas
        .iter()
        .filter_map(|delta| match delta {
            CompletionDelta::Text { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    (completion.text, shown)
}

fn added(id: &str, output_index: u64) -> Value {
    json!({"type": "response.output_item.added", "output_index": output_index,
        "item": {"type": "message", "id": id, "role": "assistant", "content": []}})
}

fn delta(id: &str, output_index: u64, content_index: u64, text: &str) -> Value {
    json!({"type": "response.output_text.delta", "item_id": id, "output_index": output_index,
        "content_index": content_index, "delta": text})
}

fn text_done(id: &str, output_index: u64, content_index: u64, text: &str) -> Value {
    json!({"type": "response.output_text.done", "item_id": id, "output_index": output_index,
        "content_index": content_index, "text": text})
}

fn part_done(id: &str, output_index: u64, content_index: u64, part: Value) -> Value {
    json!({"type": "response.content_part.done", "item_id": id, "output_index": output_index,
        "content_index": content_index, "part": part})
}

fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": []})
}

fn item_done(id: &str, output_index: u64, parts: &[Value]) -> Value {
    json!({"type": "response.output_item.done", "output_index": output_index,
        "item": {"type": "message", "id": id, "role": "assistant", "status": "completed",
            "content": parts}})
}

fn completed() -> Value {
    json!({"type": "response.completed", "response": {"id": "resp_1"}})
}

/// Text that arrives only in a `.done` event is kept: OpenAI's Responses API may send a short
/// message whole in `response.output_text.done` with no delta and no finished item before
/// `response.completed` (pipecat-ai/pipecat#5309), and servers sent only
/// `response.output_text.done` (Sophomoresty/gemini-web2api#57). Each `.done` event, and the
/// finished item, that repeats it adds nothing.
#[test]
fn text_only_in_done_events_is_kept_once() {
    let part_added = json!({"type": "response.content_part.added", "item_id": "msg_1",
        "output_index": 0, "content_index": 0, "part": output_text("")});
    let nameless = json!({"type": "response.output_text.done", "text": "Hi there."});
    let refusal = json!({"type": "response.refusal.done", "item_id": "msg_1", "output_index": 0,
        "content_index": 0, "refusal": "I can't help with that."});
    for (case, events, expected) in [
        (
            "output_text.done alone (pipecat's trace)",
            vec![
                part_added.clone(),
                text_done("msg_1", 0, 0, "Hi there."),
                completed(),
            ],
            "Hi there.",
        ),
        (
            "every closing event",
            vec![
                added("msg_1", 0),
                part_added,
                text_done("msg_1", 0, 0, "Hi there."),
                part_done("msg_1", 0, 0, output_text("Hi there.")),
                item_done("msg_1", 0, &[output_text("Hi there.")]),
                completed(),
            ],
            "Hi there.",
        ),
        (
            "content_part.done alone",
            vec![
                part_done("msg_1", 0, 0, output_text("Hi there.")),
                completed(),
            ],
            "Hi there.",
        ),
        (
            "refusal.done alone",
            vec![refusal, completed()],
            "I can't help with that.",
        ),
        (
            "naming no item (gemini-web2api's three events)",
            vec![nameless.clone(), nameless, completed()],
            "Hi there.",
        ),
        (
            "the end of the text only in output_text.done (vercel/ai#13836)",
            vec![
                added("msg_1", 0),
                delta("msg_1", 0, 0, "It is "),
                text_done("msg_1", 0, 0, "It is 21 °C."),
                item_done("msg_1", 0, &[output_text("It is 21 °C.")]),
                completed(),
            ],
            "It is 21 °C.",
        ),
        (
            "a final text that does not continue the deltas",
            vec![
                delta("msg_1", 0, 0, "It is 21 °C."),
                text_done("msg_1", 0, 0, "Something else."),
                completed(),
            ],
            "It is 21 °C.",
        ),
        (
            "every part's deltas under content_index 0, finished in two parts",
            vec![
                delta("msg_1", 0, 0, "One. "),
                delta("msg_1", 0, 0, "Two."),
                part_done("msg_1", 0, 1, output_text("Two.")),
                item_done("msg_1", 0, &[output_text("One. "), output_text("Two.")]),
                completed(),
            ],
            "One. Two.",
        ),
    ] {
        let (text, shown) = text_of(&events);
        assert_eq!(text, expected, "{case}");
        assert_eq!(shown, expected, "{case}");
    }
}

/// A finished message item under another item id than the one its deltas used, at the same
/// output index (mistral.rs minted a new `msg_` id for `response.output_item.done`,
/// EricLBuehler/mistral.rs#1944), is the message that streamed: its text is not added again.
/// Another message at that index, whose text does not continue what streamed there (a server
/// that reuses output indexes), is still a message of its own.
#[test]
fn a_finished_message_under_another_item_id_is_the_one_that_streamed() {
    for (case, events, expected) in [
        (
            "re-keyed finished item",
            vec![
                added("msg_a", 0),
                delta("msg_a", 0, 0, "Sunny."),
                text_done("msg_b", 0, 0, "Sunny."),
                item_done("msg_c", 0, &[output_text("Sunny.")]),
                completed(),
            ],
            "Sunny.",
        ),
        (
            "re-keyed finished item with the end of the text",
            vec![
                added("msg_a", 0),
                delta("msg_a", 0, 0, "Sunny"),
                item_done("msg_b", 0, &[output_text("Sunny.")]),
                completed(),
            ],
            "Sunny.",
        ),
        (
            "another message at a reused output index",
            vec![
                delta("msg_a", 0, 0, "Sunny. "),
                item_done("msg_a", 0, &[output_text("Sunny. ")]),
                item_done("msg_b", 0, &[output_text("Warm.")]),
                completed(),
            ],
            "Sunny. Warm.",
        ),
    ] {
        let (text, shown) = text_of(&events);
        assert_eq!(text, expected, "{case}");
        assert_eq!(shown, expected, "{case}");
    }
}

/// Servers that give every text delta a `content_index` of its own (vLLM's Responses
/// streaming counted one per delta, vllm-project/vllm#29947, #23382; tiles' MLX backend,
/// tilesprivacy/tiles `server/backend/mlx.py`, from 0) then close the message with its whole
/// text in part 0: that text is what the parts streamed, one after another, so it adds only what
/// comes after them, never the text of parts 1 and on again.
#[test]
fn a_final_text_over_parts_numbered_per_delta_is_not_added_again() {
    for (case, events, expected) in [
        (
            "finished item whole in part 0 (tiles)",
            vec![
                added("msg_1", 0),
                delta("msg_1", 0, 0, "Sun"),
                delta("msg_1", 0, 1, "ny"),
                delta("msg_1", 0, 2, " and warm."),
                item_done("msg_1", 0, &[output_text("Sunny and warm.")]),
                completed(),
            ],
            "Sunny and warm.",
        ),
        (
            "output_text.done whole in part 0, with text the deltas lacked",
            vec![
                added("msg_1", 0),
                delta("msg_1", 0, 0, "Sun"),
                delta("msg_1", 0, 1, "ny"),
                text_done("msg_1", 0, 0, "Sunny!"),
                item_done("msg_1", 0, &[output_text("Sunny!")]),
                completed(),
            ],
            "Sunny!",
        ),
        (
            "vLLM: parts from 1, final texts past them",
            vec![
                added("msg_1", 0),
                delta("msg_1", 0, 1, "Sun"),
                delta("msg_1", 0, 2, "ny."),
                text_done("msg_1", 0, 3, "Sunny."),
                part_done("msg_1", 0, 4, output_text("Sunny.")),
                item_done("msg_1", 0, &[output_text("Sunny.")]),
                completed(),
            ],
            "Sunny.",
        ),
        (
            "two parts of their own, each closed",
            vec![
                added("msg_1", 0),
                delta("msg_1", 0, 0, "Sunny. "),
                delta("msg_1", 0, 1, "Warm."),
                text_done("msg_1", 0, 0, "Sunny. "),
                text_done("msg_1", 0, 1, "Warm."),
                item_done("msg_1", 0, &[output_text("Sunny. "), output_text("Warm.")]),
                completed(),
            ],
            "Sunny. Warm.",
        ),
    ] {
        let (text, shown) = text_of(&events);
        assert_eq!(text, expected, "{case}");
        assert_eq!(shown, expected, "{case}");
    }
}

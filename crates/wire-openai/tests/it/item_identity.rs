//! Which call a Responses event is about, when a server leaves item ids blank or lets item ids
//! or output indexes collide.

use serde_json::{Value, json};
use wire_openai::{Limits, responses};

/// An SSE stream of these events, each as `event:` plus `data:`.
fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

fn call(id: &str, call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
           "arguments": arguments, "status": "completed"})
}

fn calls(stream: &str) -> Vec<(String, String, String)> {
    let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    completion
        .tool_calls
        .iter()
        .map(|c| {
            (
                c.id.as_str().to_owned(),
                c.name.clone(),
                c.arguments.clone(),
            )
        })
        .collect()
}

fn owned(calls: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    calls
        .iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect()
}

/// An empty item id is no id (a server that leaves it blank): two calls with `"id": ""` are two
/// calls, each with its own arguments, in a stream and in a whole response. Before, the second
/// was read as the first announced again: one call, run with the second's arguments.
#[test]
fn an_empty_item_id_names_no_item() {
    let first = call("", "call_1", "a", "{\"x\":1}");
    let second = call("", "call_2", "b", "{\"y\":2}");
    let expected = owned(&[("call_1", "a", "{\"x\":1}"), ("call_2", "b", "{\"y\":2}")]);
    let stream = sse(&[
        json!({"type":"response.output_item.done","output_index":0,"item":first}),
        json!({"type":"response.output_item.done","output_index":1,"item":second}),
        json!({"type":"response.completed","response":{"id":"r"}}),
    ]);
    assert_eq!(calls(&stream), expected);
    // Announced, then streamed under `item_id: ""`: each delta goes by its output index.
    let (mut added_1, mut added_2) = (first.clone(), second.clone());
    added_1["arguments"] = json!("");
    added_2["arguments"] = json!("");
    let delta = |index: usize, delta: &str| {
        json!({"type":"response.function_call_arguments.delta","item_id":"",
               "output_index":index,"delta":delta})
    };
    let stream = sse(&[
        json!({"type":"response.output_item.added","output_index":0,"item":added_1}),
        json!({"type":"response.output_item.added","output_index":1,"item":added_2}),
        delta(0, "{\"x\":1}"),
        delta(1, "{\"y\":2}"),
        json!({"type":"response.completed","response":{"id":"r"}}),
    ]);
    assert_eq!(calls(&stream), expected);
    let whole = json!({"object":"response","status":"completed","output":[first, second]});
    let answer = responses::decode_response(whole.to_string().as_bytes(), Default::default());
    let got: Vec<_> = answer
        .unwrap()
        .completion
        .tool_calls
        .iter()
        .map(|c| {
            (
                c.id.as_str().to_owned(),
                c.name.clone(),
                c.arguments.clone(),
            )
        })
        .collect();
    assert_eq!(got, expected);
}

/// The same call, announced, streamed and finished.
fn streamed_call(output_index: usize, item: &Value, deltas: &[&str]) -> Vec<Value> {
    let mut added = item.clone();
    added["arguments"] = json!("");
    added["status"] = json!("in_progress");
    let mut events = vec![json!({"type":"response.output_item.added",
                                 "output_index":output_index,"item":added})];
    for delta in deltas {
        events.push(json!({"type":"response.function_call_arguments.delta",
                           "item_id":item["id"],"output_index":output_index,"delta":delta}));
    }
    events.push(json!({"type":"response.output_item.done",
                       "output_index":output_index,"item":item}));
    events
}

/// A finished item first seen at an output index another call took (shims that number items
/// from 0 per kind, or hard-code 0, WIRE-FORMATS §3.3: key by item id) is a call of its own when
/// its item id and call id are not that call's. Before, it was read as that call finishing:
/// one call, run with the second's arguments.
#[test]
fn a_finished_item_at_a_taken_output_index_is_its_own_call() {
    let expected = owned(&[("call_1", "a", "{\"x\":1}"), ("call_2", "b", "{\"y\":2}")]);
    let first = call("fc_1", "call_1", "a", "{\"x\":1}");
    let second = call("fc_2", "call_2", "b", "{\"y\":2}");
    let completed = json!({"type":"response.completed","response":{"id":"r"}});
    // A gateway that sends only finished items, every one at output index 0.
    let stream = sse(&[
        json!({"type":"response.output_item.done","output_index":0,"item":first}),
        json!({"type":"response.output_item.done","output_index":0,"item":second}),
        completed.clone(),
    ]);
    assert_eq!(calls(&stream), expected);
    // The first streamed, the second only finished, at the same index.
    let mut events = streamed_call(0, &first, &["{\"x\":", "1}"]);
    events.push(json!({"type":"response.output_item.done","output_index":0,"item":second}));
    events.push(completed.clone());
    assert_eq!(calls(&sse(&events)), expected);
    // Items without ids at one index are still told apart by their call ids.
    let mut bare = [first.clone(), second.clone()];
    for item in &mut bare {
        item.as_object_mut().unwrap().remove("id");
    }
    let stream = sse(&[
        json!({"type":"response.output_item.done","output_index":0,"item":bare[0]}),
        json!({"type":"response.output_item.done","output_index":0,"item":bare[1]}),
        completed.clone(),
    ]);
    assert_eq!(calls(&stream), expected);
    // The same call finished again at its index, even without its item id, is still one call.
    let stream = sse(&[
        json!({"type":"response.output_item.done","output_index":0,"item":first}),
        json!({"type":"response.output_item.done","output_index":0,"item":bare[0]}),
        completed,
    ]);
    assert_eq!(calls(&stream), owned(&[("call_1", "a", "{\"x\":1}")]));
}

/// A server that gives two calls one item id (ids numbered per turn, say) makes two calls,
/// each with its own arguments: an item under an open call's item id but another call id (or
/// another function) is a new call, and the events that name the item id from then on are
/// about it. Before, the second was read as the first announced again: one call, with the
/// first's id and name and the second's arguments.
#[test]
fn two_calls_under_one_item_id_are_two_calls() {
    let first = call("fc", "call_1", "a", "{\"x\":1}");
    let second = call("fc", "call_2", "b", "{\"y\":2}");
    let mut events = streamed_call(0, &first, &["{\"x\":", "1}"]);
    events.extend(streamed_call(1, &second, &["{\"y\":", "2}"]));
    events.push(json!({"type":"response.completed","response":{"id":"r"}}));
    let expected = owned(&[("call_1", "a", "{\"x\":1}"), ("call_2", "b", "{\"y\":2}")]);
    assert_eq!(calls(&sse(&events)), expected);
    // Without `.done` items, the deltas alone still spell each call's arguments.
    let events: Vec<Value> = events
        .into_iter()
        .filter(|e| e["type"] != "response.output_item.done")
        .collect();
    assert_eq!(calls(&sse(&events)), expected);
}

/// An empty final text (`arguments: ""` on `response.function_call_arguments.done` or on the
/// finished item, as bridges that build the final item from the announced one send it, see
/// Wei-Shaw/sub2api#6629) never replaces the arguments the call streamed: it is no JSON, so it
/// cannot be the call's arguments. Before, the call ran with `{}`.
#[test]
fn empty_final_arguments_keep_the_streamed_ones() {
    let item = call("fc_1", "call_1", "a", "");
    let done_event = |arguments: &str| {
        json!({"type":"response.function_call_arguments.done","item_id":"fc_1",
               "output_index":0,"arguments":arguments})
    };
    let completed = json!({"type":"response.completed","response":{"id":"r"}});
    for done in [done_event(""), done_event(" "), done_event("{\"x\":1}")] {
        let mut events = streamed_call(0, &item, &["{\"x\":", "1}"]);
        // Before the finished item (which says `arguments: ""` too).
        events.insert(events.len() - 1, done);
        events.push(completed.clone());
        assert_eq!(calls(&sse(&events)), owned(&[("call_1", "a", "{\"x\":1}")]));
    }
    // A final text that is not empty still replaces the deltas (it is authoritative).
    let mut events = streamed_call(0, &item, &["{\"x\":", "1}"]);
    events.insert(events.len() - 1, done_event("{\"x\":2}"));
    events.push(completed);
    assert_eq!(calls(&sse(&events)), owned(&[("call_1", "a", "{\"x\":2}")]));
}

/// A call announced with no arguments that then got none (no delta, no
/// `response.function_call_arguments.done`, no finished item) before the response completed
/// was never finished: it is incomplete, never run with `{}` (NousResearch/hermes-agent#110975
/// saw backends end so). A call that streamed arguments, or that a `.done` event finished,
/// even with none, is whole.
#[test]
fn a_call_announced_and_never_given_arguments_is_incomplete() {
    let item = call("fc_1", "call_1", "a", "");
    let mut added = item.clone();
    added["status"] = json!("in_progress");
    let added = json!({"type":"response.output_item.added","output_index":0,"item":added});
    let completed = json!({"type":"response.completed","response":{"id":"r"}});
    let complete = |events: &[Value]| -> (String, bool) {
        let completion = responses::decode_all(sse(events).as_bytes(), Limits::default()).unwrap();
        let call = &completion.tool_calls[0];
        (call.arguments.clone(), call.complete)
    };
    assert_eq!(
        complete(&[added.clone(), completed.clone()]),
        ("{}".into(), false)
    );
    let delta = json!({"type":"response.function_call_arguments.delta","item_id":"fc_1",
                       "output_index":0,"delta":"{}"});
    assert_eq!(
        complete(&[added.clone(), delta, completed.clone()]),
        ("{}".into(), true)
    );
    let done = json!({"type":"response.function_call_arguments.done","item_id":"fc_1",
                      "output_index":0,"arguments":""});
    assert_eq!(
        complete(&[added.clone(), done, completed.clone()]),
        ("{}".into(), true)
    );
    let finished = json!({"type":"response.output_item.done","output_index":0,"item":item});
    assert_eq!(complete(&[added, finished, completed]), ("{}".into(), true));
}

/// vLLM's Responses streaming for gpt-oss announces a call (`fc_…` item id, `call_…` call id),
/// streams and closes its arguments, then finishes it with an item that has no item id and a
/// call id minted anew (`call_id=f"fc_{random_uuid()}"` in vllm
/// `entrypoints/openai/responses/streaming_events.py`, `emit_function_call_done_events`), at the
/// call's output index. That item is the call finishing, not a second call: one call, under the
/// call id its deltas were shown with. Before, the turn had two calls and the tool ran twice.
#[test]
fn a_finished_item_that_renames_the_open_call_at_its_index_is_that_call() {
    let arguments = "{\"city\":\"Paris\"}";
    let added = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "get_weather", "arguments": "", "status": "in_progress"});
    let finished = |arguments: &str| {
        json!({"type": "function_call", "call_id": "fc_minted", "name": "get_weather",
            "arguments": arguments, "status": "completed", "item_id": "fc_1",
            "output_index": 1, "sequence_number": -1})
    };
    let events = |finished: Value| {
        sse(&[
            json!({"type":"response.output_item.added","output_index":1,"item":added}),
            json!({"type":"response.function_call_arguments.delta","item_id":"fc_1",
                   "output_index":1,"delta":"{\"city\":"}),
            json!({"type":"response.function_call_arguments.delta","item_id":"fc_1",
                   "output_index":1,"delta":"\"Paris\"}"}),
            json!({"type":"response.function_call_arguments.done","item_id":"fc_1",
                   "output_index":1,"arguments":arguments,"name":"get_weather"}),
            json!({"type":"response.output_item.done","output_index":1,"item":finished}),
            json!({"type":"response.completed","response":{"id":"r"}}),
        ])
    };
    assert_eq!(
        calls(&events(finished(arguments))),
        owned(&[("call_1", "get_weather", arguments)])
    );
    // Other arguments under another call id are another call, as before.
    assert_eq!(
        calls(&events(finished("{\"city\":\"Rome\"}"))),
        owned(&[
            ("call_1", "get_weather", arguments),
            ("fc_minted", "get_weather", "{\"city\":\"Rome\"}")
        ])
    );
}

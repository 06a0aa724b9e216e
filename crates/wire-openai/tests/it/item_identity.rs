//! Which call a Responses event is about, when a server leaves item ids blank or lets item ids
//! or output indexes collide.

use serde_json::{Value, json};
use wire_openai::responses;

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
    let completion = responses::decode_all(stream.as_bytes()).unwrap();
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

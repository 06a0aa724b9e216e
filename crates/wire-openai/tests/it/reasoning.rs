//! A reasoning model's reasoning items: kept, whole and as sent, on the call they lead to
//! (`responses::REASONING_ITEMS_KEY`), never text, never sent on the chat wire.

use ai_core::{
    AssistantToolCall, CompletionDelta, LlmCaller, LlmCompletion, LlmRequest, Message, RunId,
    ToolCallId, ToolChoice,
};
use serde_json::{Map, Value, json};
use wire_openai::{Delivery, Limits, chat, responses};

/// The fixture `fixtures/wire/<relative>`.
fn fixture(relative: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../../fixtures/wire/{relative}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// The `item` of each `response.output_item.done` event of a stream whose item has type `kind`.
fn finished_items(stream: &[u8], kind: &str) -> Vec<Value> {
    String::from_utf8_lossy(stream)
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter(|event| {
            event["type"] == "response.output_item.done" && event["item"]["type"] == kind
        })
        .map(|event| event["item"].clone())
        .collect()
}

/// The reasoning items each call keeps (`null` for a call that keeps none).
fn kept(completion: &LlmCompletion) -> Vec<Value> {
    completion
        .tool_calls
        .iter()
        .map(|call| {
            call.provider_fields
                .get(responses::REASONING_ITEMS_KEY)
                .cloned()
                .unwrap_or(Value::Null)
        })
        .collect()
}

/// A whole response whose `output` is `output`, decoded.
fn whole(output: Value) -> LlmCompletion {
    let body =
        json!({"id": "resp_9", "object": "response", "status": "completed", "output": output});
    responses::decode_response(&serde_json::to_vec(&body).unwrap(), Limits::default())
        .unwrap()
        .completion
}

fn reasoning(id: &str, encrypted: Option<&str>) -> Value {
    let mut item = json!({"type": "reasoning", "id": id, "summary": [{"type": "summary_text", "text": format!("thinking {id}")}]});
    if let Some(encrypted) = encrypted {
        item["encrypted_content"] = json!(encrypted);
    }
    item
}

fn call(id: &str) -> Value {
    json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": "get_weather", "arguments": "{}", "status": "completed"})
}

/// The recorded-shape stream: the reasoning item, exactly as its `output_item.done` sent it, is
/// kept on the call that follows it; none of it is text or a delta.
#[test]
fn a_reasoning_item_is_kept_whole_on_the_call_it_leads_to() {
    let stream = fixture("openai-responses/reasoning-then-call.sse");
    let items = finished_items(&stream, "reasoning");
    assert_eq!(items.len(), 1);
    for read in [stream.len(), 7, 1] {
        let mut decoder = responses::StreamDecoder::default();
        let mut deltas = Vec::new();
        for piece in stream.chunks(read) {
            deltas.extend(decoder.feed(piece).unwrap());
        }
        let completion = decoder.finish().unwrap();
        assert_eq!(kept(&completion), vec![Value::Array(items.clone())]);
        assert_eq!(
            serde_json::to_string(&kept(&completion)[0][0]).unwrap(),
            serde_json::to_string(&items[0]).unwrap()
        );
        assert_eq!(completion.text, "");
        assert!(
            !deltas
                .iter()
                .any(|delta| matches!(delta, CompletionDelta::Text { .. })),
            "{deltas:?}"
        );
        let shown = serde_json::to_string(&deltas).unwrap();
        assert!(
            !shown.contains("gAAAA") && !shown.contains("Checking"),
            "{shown}"
        );
    }
}

/// Each call keeps the reasoning items between it and the turn's previous item, in order;
/// reasoning that leads to a message (a text answer) or to nothing is kept by no call.
#[test]
fn each_call_keeps_only_the_reasoning_that_led_to_it() {
    let completion = whole(json!([
        reasoning("rs_1", Some("e1")),
        call("call_1"),
        reasoning("rs_2", Some("e2")),
        reasoning("rs_3", Some("e3")),
        call("call_2"),
        call("call_3"),
        reasoning("rs_4", Some("e4")),
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking."}]},
        call("call_4"),
        reasoning("rs_5", Some("e5")),
    ]));
    assert_eq!(
        kept(&completion),
        vec![
            json!([reasoning("rs_1", Some("e1"))]),
            json!([reasoning("rs_2", Some("e2")), reasoning("rs_3", Some("e3"))]),
            Value::Null,
            Value::Null,
        ]
    );
    assert_eq!(completion.text, "Checking.");
}

/// A reasoning item without its `encrypted_content` (the request did not ask for it) cannot be
/// sent back on its own, so it is not kept.
#[test]
fn reasoning_without_encrypted_content_is_not_kept() {
    let completion = whole(json!([
        reasoning("rs_1", None),
        reasoning("rs_2", Some("")),
        call("call_1"),
    ]));
    assert_eq!(kept(&completion), vec![Value::Null]);
}

/// A finished reasoning item a gateway sends again is kept once.
#[test]
fn a_replayed_reasoning_item_is_kept_once() {
    let stream = String::from_utf8(fixture("openai-responses/reasoning-then-call.sse")).unwrap();
    let done = stream
        .split("\n\n")
        .find(|event| event.contains("response.output_item.done") && event.contains("rs_1"))
        .unwrap();
    let replayed = stream.replacen(done, &format!("{done}\n\n{done}"), 1);
    let completion = responses::decode_all(replayed.as_bytes(), Limits::default()).unwrap();
    assert_eq!(
        kept(&completion),
        vec![Value::Array(finished_items(stream.as_bytes(), "reasoning"))]
    );
}

/// A stream whose items finish in another order than their output indexes (OpenRouter finishes
/// a reasoning item, with its `encrypted_content`, after the call that follows it:
/// earendil-works/pi#4170): each reasoning item is kept on the call after it by output index,
/// in output order, and one followed by a message is kept by no call.
#[test]
fn reasoning_finished_after_its_call_is_kept_on_that_call() {
    let event = |kind: &str, index: usize, item: Value| json!({"type": kind, "output_index": index, "item": item});
    let added = |index: usize, item: Value| event("response.output_item.added", index, item);
    let done = |index: usize, item: Value| event("response.output_item.done", index, item);
    let announced = |item: Value| {
        let mut item = item;
        item.as_object_mut().unwrap().remove("encrypted_content");
        item
    };
    let message = json!({"type": "message", "id": "msg_1", "role": "assistant",
        "content": [{"type": "output_text", "text": "Checking."}]});
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_1"}}),
        added(0, announced(reasoning("rs_1", Some("e1")))),
        added(1, announced(reasoning("rs_2", Some("e2")))),
        added(2, call("call_1")),
        done(2, call("call_1")),
        added(3, announced(reasoning("rs_3", Some("e3")))),
        added(4, message.clone()),
        done(4, message),
        added(5, call("call_2")),
        done(5, call("call_2")),
        done(1, reasoning("rs_2", Some("e2"))),
        done(3, reasoning("rs_3", Some("e3"))),
        done(0, reasoning("rs_1", Some("e1"))),
        json!({"type": "response.completed", "response": {"id": "resp_1"}}),
    ];
    let stream: String = events
        .iter()
        .map(|event| format!("data: {event}\n\n"))
        .collect();
    let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    assert_eq!(
        kept(&completion),
        vec![
            json!([reasoning("rs_1", Some("e1")), reasoning("rs_2", Some("e2"))]),
            Value::Null,
        ]
    );

    // A server that numbers every item 0 still has its reasoning go, in arrival order, on the
    // call after it.
    let events = [
        done(0, reasoning("rs_1", Some("e1"))),
        added(0, call("call_1")),
        done(0, call("call_1")),
        json!({"type": "response.completed", "response": {"id": "resp_1"}}),
    ];
    let stream: String = events
        .iter()
        .map(|event| format!("data: {event}\n\n"))
        .collect();
    let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    assert_eq!(
        kept(&completion),
        vec![json!([reasoning("rs_1", Some("e1"))])]
    );
}

/// Reasoning streamed at an output index that disagrees with the terminal snapshot (a server
/// that numbers its reasoning after the call it leads to, or finishes it there) is kept on the
/// call the snapshot's `output` puts after it, found by item id: the snapshot is the response's
/// own order. Without a snapshot that places it, or when the snapshot puts a message after it,
/// it is kept by no call, as before.
#[test]
fn reasoning_at_an_output_index_the_snapshot_disagrees_with_is_kept_by_item_id() {
    let event = |kind: &str, index: usize, item: Value| json!({"type": kind, "output_index": index, "item": item});
    let message = json!({"type": "message", "id": "msg_1", "role": "assistant",
        "content": [{"type": "output_text", "text": "Checking."}]});
    let stream = |events: &[Value]| -> String {
        events
            .iter()
            .map(|event| format!("data: {event}\n\n"))
            .collect()
    };
    let completed = |output: Value| json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": output}});
    let rs_1 = reasoning("rs_1", Some("e1"));
    let rs_2 = reasoning("rs_2", Some("e2"));
    let orders = [
        // Finished first, at an index past the call's.
        vec![
            event("response.output_item.done", 1, rs_1.clone()),
            event("response.output_item.added", 0, call("call_1")),
            event("response.output_item.done", 0, call("call_1")),
        ],
        // Finished after the call, at an index past it.
        vec![
            event("response.output_item.added", 0, call("call_1")),
            event("response.output_item.done", 0, call("call_1")),
            event("response.output_item.done", 1, rs_1.clone()),
        ],
    ];
    for events in &orders {
        let placed = [
            events.clone(),
            vec![completed(json!([rs_1, call("call_1")]))],
        ]
        .concat();
        let completion =
            responses::decode_all(stream(&placed).as_bytes(), Limits::default()).unwrap();
        assert_eq!(kept(&completion), vec![json!([rs_1])], "{placed:?}");

        for output in [
            json!([call("call_1"), rs_1]),
            json!([rs_1, message, call("call_1")]),
        ] {
            let unplaced = [events.clone(), vec![completed(output)]].concat();
            let completion =
                responses::decode_all(stream(&unplaced).as_bytes(), Limits::default()).unwrap();
            assert_eq!(kept(&completion), vec![Value::Null], "{unplaced:?}");
        }
    }

    // Kept among the reasoning the call already keeps, in the snapshot's order.
    let events = [
        event("response.output_item.done", 0, rs_1.clone()),
        event("response.output_item.done", 5, rs_2.clone()),
        event("response.output_item.added", 1, call("call_1")),
        event("response.output_item.done", 1, call("call_1")),
        completed(json!([rs_1, rs_2, call("call_1")])),
    ];
    let completion = responses::decode_all(stream(&events).as_bytes(), Limits::default()).unwrap();
    assert_eq!(kept(&completion), vec![json!([rs_1, rs_2])]);
}

/// Placing reasoning by the terminal snapshot reads the snapshot once: each waiting item is
/// found by its id, not by a search of the snapshot per item (and per item the call already
/// keeps), so a stream of many waiting items and a snapshot listing them all decodes at the
/// pace of its bytes. Here 4,000 items, 600 KB, are all kept on the one call, in order.
#[test]
fn placing_many_waiting_reasoning_items_reads_the_snapshot_once() {
    const ITEMS: usize = 4_000;
    let items: Vec<Value> = (0..ITEMS)
        .map(|i| reasoning(&format!("rs_{i}"), Some("e")))
        .collect();
    let mut stream = String::new();
    for kind in ["response.output_item.added", "response.output_item.done"] {
        let event = json!({"type": kind, "output_index": 0, "item": call("call_1")});
        stream.push_str(&format!("data: {event}\n\n"));
    }
    // Numbered past the call, so each waits for a call that never comes.
    for (i, item) in items.iter().enumerate() {
        let event =
            json!({"type": "response.output_item.done", "output_index": i + 1, "item": item});
        stream.push_str(&format!("data: {event}\n\n"));
    }
    let mut output = items.clone();
    output.push(call("call_1"));
    let end = json!({"type": "response.completed", "response": {"id": "resp_1", "output": output}});
    stream.push_str(&format!("data: {end}\n\n"));

    let started = std::time::Instant::now();
    let completion = responses::decode_all(stream.as_bytes(), Limits::default()).unwrap();
    let took = started.elapsed();
    assert_eq!(kept(&completion), vec![Value::Array(items)]);
    // A bound against a hang only, never a speed: reading it takes about a second in a debug
    // build, and searching the snapshot per item (before 70a2313) took 714 s.
    assert!(took < std::time::Duration::from_secs(120), "took {took:?}");
}

/// The chat wire has no reasoning items: a call decoded from a Responses stream sends its
/// other provider fields on chat, never the reasoning.
#[test]
fn the_chat_encoder_never_sends_the_reasoning() {
    let mut provider_fields = Map::new();
    provider_fields.insert(
        responses::REASONING_ITEMS_KEY.into(),
        json!([reasoning("rs_1", Some("e1"))]),
    );
    provider_fields.insert(
        "extra_content".into(),
        json!({"google": {"thought_signature": "c2ln"}}),
    );
    let id = ToolCallId::new("call_1").unwrap();
    let messages = vec![
        Message::User {
            content: "Weather?".into(),
        },
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![AssistantToolCall {
                id: id.clone(),
                name: "get_weather".into(),
                arguments: "{}".into(),
                provider_fields,
            }],
        },
        Message::Tool {
            tool_call_id: id,
            content: "21".into(),
        },
    ];
    let encoded = chat::encode_messages(&messages).unwrap();
    let call = &encoded[1]["tool_calls"][0];
    assert_eq!(call["extra_content"]["google"]["thought_signature"], "c2ln");
    assert!(call.get(responses::REASONING_ITEMS_KEY).is_none(), "{call}");
    assert!(!encoded.to_string().contains("rs_1"), "{encoded}");
}

/// The next request of a thread whose last turn was `completion`: the user's message, the
/// assistant's calls as the loop records them, and a result for each.
fn next_request(completion: &LlmCompletion) -> LlmRequest {
    let mut messages = vec![Message::User {
        content: "Weather in Paris?".into(),
    }];
    messages.push(Message::Assistant {
        content: completion.text.clone(),
        tool_calls: completion
            .tool_calls
            .iter()
            .map(|call| AssistantToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                provider_fields: call.provider_fields.clone(),
            })
            .collect(),
    });
    for call in &completion.tool_calls {
        messages.push(Message::Tool {
            tool_call_id: call.id.clone(),
            content: "{\"celsius\":21}".into(),
        });
    }
    LlmRequest {
        caller: LlmCaller {
            run_id: RunId::new("run_1").unwrap(),
            graph: None,
        },
        messages,
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: None,
    }
}

/// Decode the recorded-shape stream, then encode the next request statelessly: the reasoning
/// item is in `input` just before its call, byte for byte as the stream sent it, and the request
/// asks for the encrypted reasoning without storing anything.
#[test]
fn the_reasoning_goes_back_just_before_its_call() {
    let stream = fixture("openai-responses/reasoning-then-call.sse");
    let item = finished_items(&stream, "reasoning").remove(0);
    let completion = responses::decode_all(&stream, Limits::default()).unwrap();
    let request = next_request(&completion);
    let options = responses::RequestOptions::default().with_stateless_reasoning(true);
    let body =
        responses::encode_request_with(&request, "o4-mini", Delivery::Stream, options).unwrap();
    let input = body["input"].as_array().unwrap();
    let types: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(
        serde_json::to_string(&input[1]).unwrap(),
        serde_json::to_string(&item).unwrap()
    );
    assert_eq!(input[1]["encrypted_content"], "gAAAAABpRs1_q8v-Xk2mZ3+Yw==");
    assert_eq!(
        input[2],
        json!({"type": "function_call", "call_id": "call_1", "name": "get_weather",
               "arguments": "{\"city\":\"Paris\"}"})
    );
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
}

/// Without the option the request is what it always was: no reasoning item, no `store` or
/// `include` (a model that does not reason refuses `include`).
#[test]
fn by_default_no_reasoning_goes_back() {
    let stream = fixture("openai-responses/reasoning-then-call.sse");
    let completion = responses::decode_all(&stream, Limits::default()).unwrap();
    let request = next_request(&completion);
    let body = responses::encode_request(&request, "o4-mini", Delivery::Stream).unwrap();
    let types: Vec<&str> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["message", "function_call", "function_call_output"]);
    assert!(
        body.get("store").is_none() && body.get("include").is_none(),
        "{body}"
    );
    assert_eq!(
        body,
        responses::encode_request_with(
            &request,
            "o4-mini",
            Delivery::Stream,
            responses::RequestOptions::default()
        )
        .unwrap()
    );
}

/// Each call's reasoning goes back before that call, in order, after the turn's text; what
/// under the key is not a reasoning item with its encrypted content is not sent.
#[test]
fn each_call_s_reasoning_goes_back_before_it_and_nothing_else_does() {
    let mut completion = whole(json!([
        reasoning("rs_1", Some("e1")),
        call("call_1"),
        reasoning("rs_2", Some("e2")),
        reasoning("rs_3", Some("e3")),
        call("call_2"),
        call("call_3"),
    ]));
    completion.text = "Checking.".into();
    completion.tool_calls[2].provider_fields.insert(
        responses::REASONING_ITEMS_KEY.into(),
        json!([{"type": "message", "encrypted_content": "x"}, reasoning("rs_9", None), "rs_9", 7]),
    );
    let options = responses::RequestOptions::default().with_stateless_reasoning(true);
    let body = responses::encode_request_with(
        &next_request(&completion),
        "o4-mini",
        Delivery::Whole,
        options,
    )
    .unwrap();
    let order: Vec<String> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| match i["type"].as_str().unwrap() {
            "reasoning" => i["id"].as_str().unwrap().to_owned(),
            "function_call" => i["call_id"].as_str().unwrap().to_owned(),
            other => other.to_owned(),
        })
        .collect();
    assert_eq!(
        order,
        [
            "message",
            "message",
            "rs_1",
            "call_1",
            "rs_2",
            "rs_3",
            "call_2",
            "call_3",
            "function_call_output",
            "function_call_output",
            "function_call_output"
        ]
    );
}

/// Decodes one call at output index `items` and before it, finished after it, `items` reasoning
/// items finished in the order of their output indexes `order` gives, on a thread: the
/// completion, or a panic once it takes over 120 s (a hang guard, not a timing). Each item is
/// kept, and in output order.
fn keep_reasoning_finished_after_its_call(items: usize, order: impl Iterator<Item = usize>) {
    let event = |kind: &str, index: usize, item: Value| {
        format!(
            "data: {}\n\n",
            json!({"type": kind, "output_index": index, "item": item})
        )
    };
    let mut stream = event("response.output_item.added", items, call("call_1"));
    for index in order {
        let item = reasoning(&format!("rs_{index}"), Some("e"));
        stream.push_str(&event("response.output_item.done", index, item));
    }
    stream.push_str(&event("response.output_item.done", items, call("call_1")));
    stream.push_str("data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\"}}\n\n");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // A receiver that gave up has failed the test already.
        let _ = sender.send(responses::decode_all(stream.as_bytes(), Limits::default()));
    });
    let completion = receiver
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("keeping the reasoning items took over 120 s")
        .unwrap();
    let kept = kept(&completion);
    let [Value::Array(kept)] = kept.as_slice() else {
        panic!("one call keeping its reasoning, not {} calls", kept.len());
    };
    assert_eq!(kept.len(), items);
    for (index, item) in kept.iter().enumerate() {
        assert_eq!(item["id"], format!("rs_{index}"));
    }
}

/// Reasoning items finished after the call they lead to, in output order, are kept in time
/// linear in their number: each goes in after the ones before it without a scan of the items
/// its call already keeps. 200,000 of them took minutes when each one scanned the others (over
/// three in a debug build), and take seconds once none does.
#[test]
fn many_reasoning_items_finished_after_their_call_are_kept_in_linear_time() {
    const ITEMS: usize = 200_000;
    keep_reasoning_finished_after_its_call(ITEMS, 0..ITEMS);
}

/// So are items finished in reverse output order, or alternating between the lowest and the
/// highest still to come (a server reordering its own output): none goes in at the front of
/// what its call keeps, moving the others. 200,000 in reverse took over two minutes in a debug
/// build when each one did (fewer alternating, which only check the order they are kept in).
#[test]
fn many_reasoning_items_finished_after_their_call_out_of_order_are_kept_in_n_log_n_time() {
    const ITEMS: usize = 200_000;
    keep_reasoning_finished_after_its_call(ITEMS, (0..ITEMS).rev());
    const ALTERNATING: usize = 20_000;
    let alternating = (0..ALTERNATING / 2).flat_map(|low| [low, ALTERNATING - 1 - low]);
    keep_reasoning_finished_after_its_call(ALTERNATING, alternating);
}

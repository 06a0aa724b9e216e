//! Property tests of the server's request handling: random request bodies, from near-valid AG-UI
//! `RunAgentInput`s and AI SDK chat requests (random roles, parts, states, missing, extra, null
//! and mistyped fields, long, unicode and control-character strings, huge numbers, deep nesting,
//! duplicate ids, results for unknown calls, answers to a paused run's approvals, known or not)
//! to raw bytes, posted through the real router in process (`oneshot`, from a loopback peer),
//! with a loopback fake model serving recorded answers.
//!
//! Whatever the body, the server answers: never a 5xx but the documented 503 `too_many_runs`;
//! a refusal is `{"error":{"code","message"}}` as `application/json`, its message quotes no
//! free text of the body and no id the client chose, valid or not (only field names, positions
//! and the calls a paused thread waits for: every free-text string the generators make, every
//! id too long to be valid and some valid ones carry a marker the message must not hold), and
//! the fake model is not called for it; an accepted request is an SSE stream that
//! starts its protocol and has exactly one terminal frame, with nothing after it (but the AI
//! SDK's `[DONE]`), and no run whose task died. A request whose `Content-Type` and `Accept`
//! headers carry markers gets an answer (a 415, a 406 or a stream) that holds none of them.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode, header};
use cogni_tests::fake_llm::{FakeLlm, Reply};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};
use tempfile::TempDir;
use tower::ServiceExt;

/// What every marker starts with; 20 lowercase letters and digits follow.
const MARKER: &str = "ZQX";
const MARKER_TAIL: usize = 20;

/// The router over a fake model, on a runtime of its own.
struct Harness {
    runtime: tokio::runtime::Runtime,
    app: axum::Router,
    fake: FakeLlm,
    _workspace: TempDir,
}

impl Harness {
    fn start() -> Self {
        Self::with_policy(None)
    }

    /// A server that asks for approval of the tools the recorded tool loop calls, over a model
    /// that asks for them (`call_time`, `call_read`) when the last message is the user's and
    /// answers in text once it has their results: every run from a user message pauses.
    fn approving() -> Self {
        let policy = r#"
            allowed_tools = ["core__get_current_time", "core__workspace_read"]
            require_approval_for_effects = ["read_only"]
        "#;
        let harness = Self::with_policy(Some(policy));
        let calls = Reply::fixture("loop/turn-1-tool-calls.sse").unwrap();
        let answer = Reply::fixture("loop/turn-2-answer.sse").unwrap();
        harness.fake.respond_with(move |request| {
            let messages = request.json["messages"].as_array();
            match messages.and_then(|m| m.last()) {
                Some(last) if last["role"] == "user" => calls.clone(),
                _ => answer.clone(),
            }
        });
        harness
    }

    /// Runs a user message on a new thread `thread`, which pauses for the approval of two calls.
    fn pause(&self, thread: &str) {
        let body = json!({"threadId": thread, "runId": format!("{thread}-pause"),
                          "messages": [{"id": "m1", "role": "user", "content": "notes?"}]});
        let request = Request::post("/api/v1/agui")
            .header(header::HOST, "localhost")
            .header(header::CONTENT_TYPE, "application/json")
            .extension(ConnectInfo(
                "127.0.0.1:50000".parse::<SocketAddr>().unwrap(),
            ))
            .body(Body::from(body.to_string()))
            .unwrap();
        let app = self.app.clone();
        let answer = self.runtime.block_on(async move {
            let response = app.oneshot(request).await.unwrap();
            axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap()
        });
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.contains("\"interrupts\""), "{answer}");
    }

    /// The router over a fake model answering every request with text, under `policy` (TOML) or
    /// the default one.
    fn with_policy(policy: Option<&str>) -> Self {
        // Requests are served on the runtime's workers, whose stacks are the size a server's are.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let (app, fake) = runtime.block_on(async {
            let fake = FakeLlm::start().await.unwrap();
            fake.set_fallback(Reply::fixture("loop/turn-2-answer.sse").unwrap());
            let mut settings = bootstrap::Settings::default();
            settings.llm.base_url = fake.base_url();
            settings.llm.model = "test-model".into();
            settings.llm.request_timeout_ms = 5_000;
            settings.llm.idle_timeout_ms = 5_000;
            settings.tools.workspace = workspace.path().to_owned();
            settings.server.max_body_bytes = 64 * 1024;
            if let Some(policy) = policy {
                settings.tools.policy = Some(policy.parse().unwrap());
            }
            settings.validate().unwrap();
            let state = bootstrap::server::prepare(&settings).await.unwrap();
            let app = bootstrap::server::router(state, settings.server.max_body_bytes);
            (app, fake)
        });
        Self {
            runtime,
            app,
            fake,
            _workspace: workspace,
        }
    }

    /// Posts `body` to `path` from a loopback peer and checks the answer.
    fn check(&self, path: &str, body: Vec<u8>) -> Result<(), TestCaseError> {
        let headers = (
            "application/json".to_owned(),
            "text/event-stream".to_owned(),
        );
        self.check_with(path, headers, body)
    }

    /// Posts `body` to `path` with `Content-Type` and `Accept` as given, from a loopback peer,
    /// and checks the answer: as [`Self::check`] does, and no marker of those headers anywhere
    /// in it, a refusal or a stream.
    fn check_with(
        &self,
        path: &str,
        (content_type, accept): (String, String),
        body: Vec<u8>,
    ) -> Result<(), TestCaseError> {
        let header_markers = markers(format!("{content_type}\n{accept}").as_bytes());
        let markers = markers(&body);
        let before = self.fake.requests().len();
        let mut request = Request::post(path)
            .header(header::HOST, "localhost")
            .header(header::CONTENT_TYPE, content_type)
            .header(header::ACCEPT, accept)
            .body(Body::from(body))
            .unwrap();
        let peer: SocketAddr = "127.0.0.1:50000".parse().unwrap();
        request.extensions_mut().insert(ConnectInfo(peer));
        let app = self.app.clone();
        let served = self.runtime.block_on(self.runtime.spawn(async move {
            let response = app.oneshot(request).await.unwrap();
            let status = response.status();
            let content_type = response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            (status, content_type, body)
        }));
        let (status, content_type, answer) =
            served.map_err(|e| TestCaseError::fail(format!("the server panicked: {e}")))?;
        let answer = String::from_utf8(answer.to_vec())
            .map_err(|_| TestCaseError::fail(format!("{status}: the answer is not UTF-8")))?;
        for marker in &header_markers {
            prop_assert!(
                !answer.contains(marker.as_str()),
                "{status}: the answer quotes a header's `{marker}`: {answer}"
            );
        }
        if status.is_success() {
            prop_assert_eq!(content_type.as_str(), "text/event-stream", "{}", answer);
            check_stream(path, &answer)
        } else {
            prop_assert!(
                !status.is_server_error() || status == StatusCode::SERVICE_UNAVAILABLE,
                "{status}: {answer}"
            );
            prop_assert_eq!(content_type.as_str(), "application/json", "{}", answer);
            let error: Value = serde_json::from_str(&answer)
                .map_err(|_| TestCaseError::fail(format!("{status}: not JSON: {answer}")))?;
            let Some(object) = error.as_object() else {
                return Err(TestCaseError::fail(format!("not an object: {answer}")));
            };
            prop_assert_eq!(object.len(), 1, "{}", answer);
            let inner = error["error"].as_object();
            prop_assert!(
                inner.is_some_and(|e| e.len() == 2
                    && e["code"].as_str().is_some_and(|c| !c.is_empty())
                    && e["message"].as_str().is_some_and(|m| !m.is_empty())),
                "{answer}"
            );
            if status == StatusCode::SERVICE_UNAVAILABLE {
                prop_assert_eq!(&error["error"]["code"], "too_many_runs", "{}", answer);
            }
            let message = error["error"]["message"].as_str().unwrap_or_default();
            for marker in &markers {
                prop_assert!(
                    !message.contains(marker.as_str()),
                    "{status}: the message quotes the body's `{marker}`: {message}"
                );
            }
            prop_assert_eq!(
                self.fake.requests().len(),
                before,
                "the model was called for a refused request: {}",
                answer
            );
            Ok(())
        }
    }
}

/// Every marker in `body`.
fn markers(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    text.match_indices(MARKER)
        .filter_map(|(at, _)| text.get(at..at + MARKER.len() + MARKER_TAIL))
        .map(str::to_owned)
        .collect()
}

/// The frames of a run's stream: its protocol's first frame, exactly one terminal frame and
/// nothing after it but the AI SDK's `[DONE]`; every frame one `data:` line of JSON.
fn check_stream(path: &str, body: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        !body.contains("the run ended unexpectedly"),
        "the run's task died: {body}"
    );
    let mut frames = Vec::new();
    for frame in body.split("\n\n").filter(|f| !f.is_empty()) {
        let data = frame.strip_prefix("data: ");
        prop_assert!(
            data.is_some_and(|d| !d.contains('\n')),
            "a frame is not one data line: {frame:?}"
        );
        frames.push(data.unwrap_or_default());
    }
    prop_assert!(body.ends_with("\n\n"), "{body}");
    let (first, terminals, done): (&str, &[&str], bool) = if path.ends_with("agui") {
        ("RUN_STARTED", &["RUN_FINISHED", "RUN_ERROR"], false)
    } else {
        ("start", &["finish", "error", "abort"], true)
    };
    if done {
        prop_assert_eq!(frames.pop(), Some("[DONE]"), "{}", body);
    }
    let mut kinds = Vec::new();
    for data in &frames {
        let event: Value = serde_json::from_str(data)
            .map_err(|_| TestCaseError::fail(format!("a frame is not JSON: {data}")))?;
        kinds.push(event["type"].as_str().unwrap_or_default().to_owned());
    }
    prop_assert_eq!(kinds.first().map(String::as_str), Some(first), "{}", body);
    let ends: Vec<usize> = (0..kinds.len())
        .filter(|&i| terminals.contains(&kinds[i].as_str()))
        .collect();
    prop_assert_eq!(ends, vec![kinds.len() - 1], "{}", body);
    Ok(())
}

/// A marker: `ZQX` and 20 letters and digits, unlikely to appear by chance.
fn marker() -> impl Strategy<Value = String> {
    "[a-z0-9]{20}".prop_map(|tail| format!("{MARKER}{tail}"))
}

/// Free text: a marker inside unicode, control characters, or a long run.
fn text() -> impl Strategy<Value = String> {
    let around = prop_oneof![
        Just(String::new()),
        "\\PC{0,12}",
        "[\\x00-\\x1f\\x7f\u{202e}\u{2066}]{1,4}",
        "[ -~]{0,40}",
        (1usize..3000).prop_map(|n| "x".repeat(n)),
    ];
    (around.clone(), marker(), around).prop_map(|(a, m, b)| format!("{a}{m}{b}"))
}

/// An id: valid ones (short, from a few, so they repeat; the calls a paused thread waits for,
/// which the server names back as its own), valid ones carrying a marker (the client's text,
/// which a refusal names by position, never quotes), and invalid ones (empty, control
/// characters, too long: those carry a marker too).
fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop_oneof![Just("a"), Just("b"), Just("call_1"), Just("call_time"), Just("call_read"), Just("c\u{e9}")]
            .prop_map(str::to_owned),
        2 => "[a-zA-Z0-9_-]{1,24}",
        2 => marker(),
        1 => Just(String::new()),
        1 => "[a-z]{0,4}[\\x00-\\x1f]".prop_map(|s| s),
        1 => (marker(), 130usize..400).prop_map(|(m, n)| format!("{m}{}", "y".repeat(n))),
    ]
}

/// A thread or run id made unique by `n` (sometimes carrying a marker, as the client's text a
/// refusal must not quote), or sometimes one that is not valid.
fn fresh_id(prefix: &'static str) -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => any::<u64>().prop_map(move |n| json!(format!("{prefix}-{n}"))),
        1 => marker().prop_map(move |m| json!(format!("{prefix}-{m}"))),
        1 => id().prop_map(Value::String),
        1 => wrong(),
    ]
}

/// Any JSON, a few levels deep, with huge numbers and marked strings.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(json!(u64::MAX)),
        Just(json!(1.7976931348623157e308)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec(("[a-zA-Z]{1,8}", inner), 0..4)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// A value of a type no field of the protocols takes where it is put (or null), some deeply
/// nested; never a string, which an id takes (and the server may name back).
fn wrong() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        Just(json!(-1e300)),
        Just(json!(u64::MAX)),
        text().prop_map(|t| json!({ "x": t })),
        (1usize..200, text()).prop_map(|(depth, t)| {
            (0..depth).fold(Value::String(t), |inner, _| json!([inner]))
        }),
    ]
}

/// A field's value: mostly the one given, else missing (`None`), null or a wrong type.
fn field(good: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        80 => good.prop_map(Some),
        1 => Just(None),
        1 => wrong().prop_map(Some),
    ]
}

/// A list field's value: as [`field`], or a string (a marked one).
fn list(good: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        80 => field(good),
        1 => text().prop_map(|t| Some(Value::String(t))),
    ]
}

/// `base` with each field set as given (a `None` left out) and maybe an extra field.
fn object(fields: Vec<(&'static str, Option<Value>)>, extra: Option<(String, Value)>) -> Value {
    let mut map = Map::new();
    for (name, value) in fields {
        if let Some(value) = value {
            map.insert(name.to_owned(), value);
        }
    }
    if let Some((name, value)) = extra {
        map.insert(name, value);
    }
    Value::Object(map)
}

/// Sometimes a field no protocol names, with any value.
fn extra() -> impl Strategy<Value = Option<(String, Value)>> {
    proptest::option::weighted(0.05, ("[a-z]{1,10}", any_json()))
}

fn role(known: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop_oneof![
        30 => proptest::sample::select(known).prop_map(|r| json!(r)),
        1 => marker().prop_map(Value::String),
    ]
}

/// One AG-UI message.
fn agui_message() -> impl Strategy<Value = Value> {
    let call = (
        field(id().prop_map(Value::String)),
        field(text().prop_map(Value::String)),
        field(text().prop_map(Value::String)),
    )
        .prop_map(|(id, name, arguments)| {
            let function = object(vec![("name", name), ("arguments", arguments)], None);
            object(
                vec![
                    ("id", id),
                    ("type", Some(json!("function"))),
                    ("function", Some(function)),
                ],
                None,
            )
        });
    // A user's content may be parts instead of text.
    let parts = proptest::collection::vec(
        prop_oneof![
            text().prop_map(|t| json!({"type": "text", "text": t})),
            any_json(),
        ],
        0..3,
    )
    .prop_map(Value::Array);
    (
        role(&[
            "user",
            "user",
            "assistant",
            "tool",
            "system",
            "developer",
            "activity",
            "reasoning",
        ]),
        field(text().prop_map(Value::String)),
        (
            field(text().prop_map(Value::String)),
            proptest::option::weighted(0.25, parts),
        ),
        list(proptest::collection::vec(call, 0..3).prop_map(Value::Array)),
        field(id().prop_map(Value::String)),
        proptest::option::weighted(0.2, text().prop_map(Value::String)),
        extra(),
    )
        .prop_map(
            |(role, id, (content, parts), calls, call_id, error, extra)| {
                let is = |r: &str| role == r;
                let content = if is("user") {
                    parts.or(content)
                } else {
                    content
                };
                let calls = if is("assistant") { calls } else { None };
                let call_id = if is("tool") { call_id } else { None };
                object(
                    vec![
                        ("role", Some(role.clone())),
                        ("id", id),
                        ("content", content),
                        ("toolCalls", calls),
                        ("toolCallId", call_id),
                        ("error", error),
                    ],
                    extra,
                )
            },
        )
}

/// One resume answer.
fn resume_entry() -> impl Strategy<Value = Value> {
    (
        field(id().prop_map(Value::String)),
        field(role(&["resolved", "cancelled"])),
        field(prop_oneof![
            any::<bool>().prop_map(|approved| json!({ "approved": approved })),
            (any::<bool>(), text()).prop_map(|(a, r)| json!({ "approved": a, "reason": r })),
            // A key an approval does not define (edited arguments, say), named by a marker.
            (any::<bool>(), marker(), any_json()).prop_map(|(a, key, value)| {
                let mut payload = Map::new();
                payload.insert("approved".to_owned(), json!(a));
                payload.insert(key, value);
                Value::Object(payload)
            }),
            any_json(),
        ]),
        proptest::option::weighted(0.1, Just(("edited".to_owned(), json!({"path": "/"})))),
    )
        .prop_map(|(id, status, payload, extra)| {
            object(
                vec![
                    ("interruptId", id),
                    ("status", status),
                    ("payload", payload),
                ],
                extra,
            )
        })
}

/// A `RunAgentInput`, mostly one the server can run.
fn agui_body() -> impl Strategy<Value = Value> {
    let messages = (
        proptest::collection::vec(agui_message(), 0..5),
        text().prop_map(|t| json!({"id": "m-last", "role": "user", "content": t})),
        any::<bool>(),
    )
        .prop_map(|(mut messages, last, append)| {
            if append {
                messages.push(last);
            }
            Value::Array(messages)
        });
    (
        field(fresh_id("t")),
        field(fresh_id("r")),
        list(messages),
        proptest::option::weighted(
            0.2,
            proptest::collection::vec(resume_entry(), 0..4).prop_map(Value::Array),
        ),
        proptest::option::weighted(0.2, any_json()),
        extra(),
    )
        .prop_map(|(thread, run, messages, resume, state, extra)| {
            object(
                vec![
                    ("threadId", thread),
                    ("runId", run),
                    ("messages", messages),
                    ("resume", resume),
                    ("state", state),
                    ("tools", Some(json!([]))),
                ],
                extra,
            )
        })
}

/// One part of a UI message.
fn ui_part() -> impl Strategy<Value = Value> {
    let state = role(&[
        "input-streaming",
        "input-available",
        "output-available",
        "output-error",
        "output-denied",
        "approval-requested",
        "approval-responded",
    ]);
    let tool = (
        prop_oneof![
            Just("tool-core__get_current_time".to_owned()),
            Just("tool-".to_owned()),
            Just("dynamic-tool".to_owned()),
            text().prop_map(|t| format!("tool-{t}")),
        ],
        field(text().prop_map(Value::String)),
        field(id().prop_map(Value::String)),
        field(state),
        proptest::option::weighted(0.5, any_json()),
        proptest::option::weighted(0.5, any_json()),
        proptest::option::weighted(0.3, text().prop_map(Value::String)),
        proptest::option::weighted(
            0.3,
            (any::<bool>(), text()).prop_map(|(a, r)| json!({ "approved": a, "reason": r })),
        ),
    )
        .prop_map(
            |(kind, name, call, state, input, output, error, approval)| {
                let name = if kind == "dynamic-tool" { name } else { None };
                object(
                    vec![
                        ("type", Some(json!(kind))),
                        ("toolName", name),
                        ("toolCallId", call),
                        ("state", state),
                        ("input", input),
                        ("output", output),
                        ("errorText", error),
                        ("approval", approval),
                    ],
                    None,
                )
            },
        );
    prop_oneof![
        3 => text().prop_map(|t| json!({"type": "text", "text": t})),
        3 => tool,
        1 => (role(&["reasoning", "file", "step-start", "source-url"]), any_json())
            .prop_map(|(kind, other)| json!({"type": kind, "data": other})),
        1 => any_json(),
    ]
}

/// One UI message.
fn ui_message() -> impl Strategy<Value = Value> {
    (
        role(&["user", "assistant", "assistant", "system"]),
        field(text().prop_map(Value::String)),
        list(proptest::collection::vec(ui_part(), 0..4).prop_map(Value::Array)),
        proptest::option::weighted(0.2, any_json()),
        extra(),
    )
        .prop_map(|(role, id, parts, metadata, extra)| {
            object(
                vec![
                    ("role", Some(role)),
                    ("id", id),
                    ("parts", parts),
                    ("metadata", metadata),
                ],
                extra,
            )
        })
}

/// A `useChat` request, mostly one the server can run.
fn chat_body() -> impl Strategy<Value = Value> {
    let messages = (
        proptest::collection::vec(ui_message(), 0..4),
        text().prop_map(
            |t| json!({"id": "u-last", "role": "user", "parts": [{"type": "text", "text": t}]}),
        ),
        any::<bool>(),
    )
        .prop_map(|(mut messages, last, append)| {
            if append {
                messages.push(last);
            }
            Value::Array(messages)
        });
    (
        field(fresh_id("chat")),
        list(messages),
        proptest::option::weighted(
            0.3,
            role(&["submit-message", "submit-message", "regenerate-message"]),
        ),
        extra(),
        // The conversation in `messages` (0), its last message alone in `message` (1), or both
        // (2, refused).
        proptest::sample::select(&[0u8, 0, 0, 0, 0, 0, 1, 1, 2][..]),
    )
        .prop_map(|(id, messages, trigger, extra, shape)| {
            let mut body = object(
                vec![("id", id), ("messages", messages), ("trigger", trigger)],
                extra,
            );
            let last = body["messages"].as_array().and_then(|m| m.last()).cloned();
            if let (1 | 2, Some(last)) = (shape, last) {
                body["message"] = last;
                if shape == 1 {
                    body.as_object_mut().unwrap().remove("messages");
                }
            }
            body
        })
}

/// Raw bytes: random ones, and JSON cut short or with a marked stray token.
fn raw_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        (agui_body(), any::<prop::sample::Index>()).prop_map(|(body, at)| {
            let bytes = body.to_string().into_bytes();
            bytes[..at.index(bytes.len() + 1)].to_vec()
        }),
        (chat_body(), marker()).prop_map(|(body, m)| {
            let text = body.to_string();
            format!("{}{m}", &text[..text.len() - 1]).into_bytes()
        }),
        (1usize..300)
            .prop_map(|depth| format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes()),
    ]
}

/// Checks `cases` bodies from the strategy `bodies` makes, each posted to its path, on a thread
/// whose stack holds proptest's generators (deep in a debug build; the server's own stack is a
/// worker's).
fn property<S>(cases: u32, bodies: fn() -> S)
where
    S: Strategy<Value = (&'static str, Vec<u8>)> + 'static,
{
    let checking = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let harness = Harness::start();
            let mut runner = TestRunner::new(Config {
                cases,
                failure_persistence: None,
                ..Config::default()
            });
            let result = runner.run(&bodies(), |(path, body)| harness.check(path, body));
            if let Err(failure) = result {
                panic!("{failure}");
            }
        })
        .unwrap();
    if let Err(panic) = checking.join() {
        std::panic::resume_unwind(panic);
    }
}

/// A call a paused thread waits for, mostly, or any id.
fn paused_call() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => proptest::sample::select(&["call_time", "call_read"][..]).prop_map(str::to_owned),
        1 => id(),
    ]
}

/// An answer to one of a paused thread's interrupts (mostly).
fn paused_entry() -> impl Strategy<Value = Value> {
    (paused_call(), resume_entry()).prop_map(|(call, mut entry)| {
        if entry.get("interruptId").is_some_and(Value::is_string) {
            entry["interruptId"] = json!(call);
        }
        entry
    })
}

/// A tool part answering (or not) an approval request, for one of the calls a paused thread
/// waits for or another.
fn approval_part() -> impl Strategy<Value = Value> {
    (
        paused_call(),
        role(&[
            "approval-responded",
            "approval-responded",
            "approval-requested",
            "output-available",
        ]),
        proptest::option::weighted(0.8, (any::<bool>(), proptest::option::of(text()))),
    )
        .prop_map(|(call, state, approval)| {
            let approval = approval.map(|(approved, reason)| match reason {
                Some(reason) => json!({"id": "ap", "approved": approved, "reason": reason}),
                None => json!({"id": "ap", "approved": approved}),
            });
            object(
                vec![
                    ("type", Some(json!("tool-core__get_current_time"))),
                    ("toolCallId", Some(json!(call))),
                    ("state", Some(state)),
                    ("input", Some(json!({}))),
                    ("approval", approval),
                ],
                None,
            )
        })
}

/// Answers to a paused thread's approvals, over AG-UI (`resume`) or the AI SDK (the last
/// assistant message's tool parts), `THREAD` standing for the thread.
fn resume_body() -> impl Strategy<Value = (&'static str, Value)> {
    let agui = (
        proptest::collection::vec(paused_entry(), 0..4),
        proptest::collection::vec(agui_message(), 0..2),
        any::<u64>(),
    )
        .prop_map(|(resume, messages, run)| {
            let body = json!({"threadId": "THREAD", "runId": format!("r-{run}"),
                              "messages": messages, "resume": resume});
            ("/api/v1/agui", body)
        });
    let chat = (
        proptest::collection::vec(ui_message(), 0..2),
        proptest::collection::vec(approval_part(), 1..4),
        proptest::option::weighted(0.3, text()),
    )
        .prop_map(|(mut messages, parts, text)| {
            let mut parts = parts;
            if let Some(text) = text {
                parts.insert(0, json!({"type": "text", "text": text}));
            }
            messages.push(json!({"id": "a1", "role": "assistant", "parts": parts}));
            (
                "/api/v1/chat",
                json!({"id": "THREAD", "messages": messages}),
            )
        });
    prop_oneof![agui, chat]
}

/// Answers to a thread paused for two approvals, each on a freshly paused thread: valid ones
/// resume it, the rest (unknown or repeated calls, malformed entries) are refused without
/// running anything.
#[test]
fn any_answer_to_a_paused_run_is_run_or_refused_cleanly() {
    let checking = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| {
            let harness = Harness::approving();
            let mut runner = TestRunner::new(Config {
                cases: 256,
                failure_persistence: None,
                ..Config::default()
            });
            let threads = std::sync::atomic::AtomicU64::new(0);
            let result = runner.run(&resume_body(), |(path, body)| {
                let n = threads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let thread = format!("t-paused-{n}");
                harness.pause(&thread);
                let body = body.to_string().replace("THREAD", &thread);
                harness.check(path, body.into_bytes())
            });
            if let Err(failure) = result {
                panic!("{failure}");
            }
        })
        .unwrap();
    if let Err(panic) = checking.join() {
        std::panic::resume_unwind(panic);
    }
}

/// Near-valid `RunAgentInput`s on new threads.
#[test]
fn any_agui_request_is_run_or_refused_cleanly() {
    property(512, || {
        agui_body().prop_map(|body| ("/api/v1/agui", body.to_string().into_bytes()))
    });
}

/// Near-valid `useChat` requests on new chats.
#[test]
fn any_chat_request_is_run_or_refused_cleanly() {
    property(512, || {
        chat_body().prop_map(|body| ("/api/v1/chat", body.to_string().into_bytes()))
    });
}

/// A `Content-Type` and an `Accept` header, each holding a marker: mostly ones the server
/// refuses (415, 406; a marker as a weight is no weight, and takes nothing), some it accepts
/// (a marked parameter).
fn marked_headers() -> impl Strategy<Value = (String, String)> {
    let printable = || "[ -~]{0,16}";
    let content_type = prop_oneof![
        marker().prop_map(|m| format!("application/json; v={m}")),
        marker().prop_map(|m| format!("{m}/json")),
        marker().prop_map(|m| format!("application/{m}")),
        (printable(), marker(), printable()).prop_map(|(a, m, b)| format!("{a}{m}{b}")),
    ];
    let accept = prop_oneof![
        marker().prop_map(|m| format!("text/event-stream; v={m}")),
        marker().prop_map(|m| format!("text/event-stream; q={m}")),
        marker().prop_map(|m| format!("application/vnd.ag-ui.event+proto; v={m}")),
        marker(),
        (printable(), marker(), printable()).prop_map(|(a, m, b)| format!("{a}{m}{b}")),
    ];
    (content_type, accept)
}

/// Requests whose `Content-Type` and `Accept` carry markers: no answer quotes them.
#[test]
fn a_refusal_never_quotes_the_request_s_headers() {
    let checking = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| {
            let harness = Harness::start();
            let mut runner = TestRunner::new(Config {
                cases: 128,
                failure_persistence: None,
                ..Config::default()
            });
            let bodies = prop_oneof![
                agui_body().prop_map(|body| ("/api/v1/agui", body)),
                chat_body().prop_map(|body| ("/api/v1/chat", body)),
            ];
            let result = runner.run(&(bodies, marked_headers()), |((path, body), headers)| {
                harness.check_with(path, headers, body.to_string().into_bytes())
            });
            if let Err(failure) = result {
                panic!("{failure}");
            }
        })
        .unwrap();
    if let Err(panic) = checking.join() {
        std::panic::resume_unwind(panic);
    }
}

/// Random bytes, truncated JSON, JSON with a stray token, deep nesting.
#[test]
fn raw_bytes_are_refused_cleanly() {
    property(256, || {
        let path = prop_oneof![Just("/api/v1/agui"), Just("/api/v1/chat")];
        (path, raw_body())
    });
}

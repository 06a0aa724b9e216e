//! Unit tests of the pure parts: URLs, backoff, `Retry-After`, error bodies, the key's absence.
//! The HTTP behaviour is tested against a fake server in the workspace's `tests` package.

use std::time::Duration;

use ai_core::Secret;
use reqwest::header::{HeaderMap, HeaderValue};

use super::error_body::{provider_message, retry_after};
use super::*;

const CANARY: &str = "sk-canary-7f3a9c1e";

fn config(base: &str) -> OpenAiConfig {
    OpenAiConfig {
        api_key: Some(Secret::new(CANARY)),
        ..OpenAiConfig::new(base, "m")
    }
}

#[test]
fn the_wire_path_is_joined_and_the_endpoint_drops_credentials_and_query() {
    let chat =
        OpenAiCompletion::new(config("https://user:pw@api.example.com/v1/?api-version=1")).unwrap();
    assert_eq!(
        chat.url.as_str(),
        "https://user:pw@api.example.com/v1/chat/completions?api-version=1"
    );
    assert_eq!(
        chat.endpoint(),
        "https://api.example.com/v1/chat/completions"
    );
    let responses = OpenAiCompletion::new(OpenAiConfig {
        wire: OpenAiWire::Responses,
        ..config("http://localhost:11434/v1")
    })
    .unwrap();
    assert_eq!(responses.endpoint(), "http://localhost:11434/v1/responses");
    // However many slashes end the base URL, or none, the wire's path follows one.
    for (base, wire, url) in [
        (
            "https://h/v1//",
            OpenAiWire::Chat,
            "https://h/v1/chat/completions",
        ),
        (
            "https://h/v1///",
            OpenAiWire::Responses,
            "https://h/v1/responses",
        ),
        ("https://h", OpenAiWire::Chat, "https://h/chat/completions"),
        ("https://h//", OpenAiWire::Responses, "https://h/responses"),
        (
            "https://h/a//b/",
            OpenAiWire::Responses,
            "https://h/a//b/responses",
        ),
    ] {
        let model = OpenAiCompletion::new(OpenAiConfig {
            wire,
            ..config(base)
        })
        .unwrap();
        assert_eq!(model.url.as_str(), url, "{base}");
    }
}

#[test]
fn bad_configs_are_refused_without_the_key_or_the_url_secrets() {
    let cases = [
        OpenAiConfig::new("not a url", "m"),
        OpenAiConfig::new("ftp://host/v1", "m"),
        OpenAiConfig::new("http://host/v1", " "),
        OpenAiConfig {
            api_key: Some(Secret::new("")),
            ..OpenAiConfig::new("http://h/v1", "m")
        },
        OpenAiConfig {
            api_key: Some(Secret::new(format!("{CANARY}\n"))),
            ..OpenAiConfig::new("http://h/v1", "m")
        },
    ];
    for case in cases {
        let error = OpenAiCompletion::new(case.clone()).unwrap_err();
        let shown = format!("{error} {error:?} {case:?}");
        assert!(!shown.contains(CANARY), "{shown}");
    }
    let debug = format!("{:?}", config("https://user:pw@h/v1?key=q"));
    assert!(
        !debug.contains(CANARY) && !debug.contains("pw") && !debug.contains("key=q"),
        "{debug}"
    );
    let adapter = OpenAiCompletion::new(config("https://user:pw@h/v1?key=q")).unwrap();
    let debug = format!("{adapter:?}");
    assert!(
        !debug.contains(CANARY) && !debug.contains("pw") && !debug.contains("key=q"),
        "{debug}"
    );
}

/// A key with whitespace in or around it (a `.env` line's trailing space, a pasted line break)
/// is refused at once, by a message that does not show it, rather than sent as a bearer token
/// no server accepts.
#[test]
fn a_key_with_whitespace_is_refused() {
    for key in [
        format!("{CANARY} "),
        format!(" {CANARY}"),
        format!("{CANARY}\t"),
        format!("sk-a {CANARY}"),
        format!("{CANARY}\r"),
    ] {
        let error = OpenAiCompletion::new(OpenAiConfig {
            api_key: Some(Secret::new(key.clone())),
            ..config("https://h/v1")
        })
        .unwrap_err();
        assert_eq!(error, OpenAiConfigError::ApiKey, "{key:?}");
        assert!(error.to_string().contains("whitespace"), "{error}");
        assert!(!error.to_string().contains(CANARY));
    }
}

#[test]
fn the_key_is_scrubbed_from_messages() {
    let adapter = OpenAiCompletion::new(config("https://h/v1")).unwrap();
    let error = adapter.scrubbed(CompletionError::Provider(format!("bad key {CANARY}!")));
    assert_eq!(
        error,
        CompletionError::Provider("bad key [redacted]!".into())
    );
}

#[test]
fn backoff_doubles_under_the_cap_with_full_jitter() {
    let adapter = OpenAiCompletion::new(OpenAiConfig {
        base_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(350),
        ..config("https://h/v1")
    })
    .unwrap();
    for _ in 0..200 {
        assert!(adapter.backoff(0) < Duration::from_millis(100));
        assert!(adapter.backoff(1) < Duration::from_millis(200));
        assert!(adapter.backoff(2) < Duration::from_millis(350));
        assert!(adapter.backoff(40) < Duration::from_millis(350));
    }
    let spread: std::collections::HashSet<_> = (0..50).map(|_| adapter.backoff(3)).collect();
    assert!(spread.len() > 10, "the jitter is not random: {spread:?}");
}

#[test]
fn retry_after_reads_ms_then_seconds_then_a_date() {
    let now = std::time::UNIX_EPOCH + Duration::from_secs(1_445_412_400); // 2015-10-21 07:26:40 GMT
    let read = |pairs: &[(&'static str, &'static str)]| {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        retry_after(&headers, now)
    };
    assert_eq!(read(&[]), None);
    assert_eq!(read(&[("retry-after", "2")]), Some(Duration::from_secs(2)));
    assert_eq!(
        read(&[("retry-after", "0.5")]),
        Some(Duration::from_millis(500))
    );
    assert_eq!(
        read(&[("retry-after", "0.5"), ("retry-after-ms", "150")]),
        Some(Duration::from_millis(150))
    );
    // An unreadable `retry-after-ms` falls back to `Retry-After`.
    assert_eq!(
        read(&[("retry-after", "2"), ("retry-after-ms", "soon")]),
        Some(Duration::from_secs(2))
    );
    // An HTTP-date is a wait from now; a date already past, or a negative value, is none.
    assert_eq!(
        read(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]),
        Some(Duration::from_secs(80))
    );
    assert_eq!(
        read(&[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")]),
        None
    );
    assert_eq!(read(&[("retry-after", "-3")]), None);
    // Too long for a Duration: saturated, so it is over any limit instead of absent.
    assert_eq!(
        read(&[("retry-after", "99999999999999999999")]),
        Some(Duration::MAX)
    );
    assert_eq!(
        read(&[("retry-after-ms", "1e30")]),
        Some(Duration::MAX / 1000)
    );
}

#[test]
fn provider_messages_are_found_in_the_usual_shapes() {
    let cases: [(&[u8], Option<&str>); 8] = [
        (br#"[{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}]"#, Some("Request contains an invalid argument. (INVALID_ARGUMENT)")),
        (br#"{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}"#, Some("Incorrect API key (invalid_api_key)")),
        (br#"{"error":{"message":"slow down","type":"requests","code":null}}"#, Some("slow down (requests)")),
        (br#"{"error":"model 'x' not found"}"#, Some("model 'x' not found")),
        (br#"{"detail":"Not Found"}"#, Some("Not Found")),
        (br#"{"message":"overloaded"}"#, Some("overloaded")),
        (b"<html>502 Bad Gateway</html>", None),
        (b"", None),
    ];
    for (body, expected) in cases {
        assert_eq!(provider_message(body).as_deref(), expected);
    }
}

/// A JSON error body cut before its value closes (a server that held it open, a connection
/// that closed early, the read's bound) is read as far as its last whole member: a message that
/// arrived whole is kept, with the code when that arrived whole too; a message cut short, or one
/// that is no string (which may itself be cut), is not shown.
#[test]
fn a_cut_json_error_body_is_read_to_its_last_whole_member() {
    let cases: [(&[u8], Option<&str>); 11] = [
        (
            br#"{"error":{"message":"slow down","type":"rate_li"#,
            Some("slow down"),
        ),
        (
            br#"{"error":{"message":"slow down","type":"rate_limit""#,
            Some("slow down (rate_limit)"),
        ),
        (
            br#"{"error":{"message":"slow down", "type":"#,
            Some("slow down"),
        ),
        (br#"{"error":{"message":"slow down""#, Some("slow down")),
        (
            br#"{"error":{"message":"a \"}\", b","code":12"#,
            Some(r#"a "}", b"#),
        ),
        (
            br#"[{"error":{"code":400,"message":"bad argument","status":"INVALID"#,
            Some("bad argument"),
        ),
        (
            br#"{"error":"model 'x' not found","param":"#,
            Some("model 'x' not found"),
        ),
        (br#"{"error":{"message":"slow do"#, None),
        (br#"{"detail":[{"loc":["body"],"msg":"bad"#, None),
        (br#"{"error":{"message":"slow down"}"#, Some("slow down")),
        (br#"{"error":{"message":"x"}}]"#, None),
    ];
    for (body, expected) in cases {
        assert_eq!(
            provider_message(body).as_deref(),
            expected,
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn truncation_counts_characters_and_marks_the_cut() {
    let adapter = OpenAiCompletion::new(config("https://h/v1")).unwrap();
    let max = MAX_PROVIDER_MESSAGE_CHARS;
    assert_eq!(adapter.shown(" héllo\n"), "héllo");
    assert_eq!(adapter.shown(&"é".repeat(max)), "é".repeat(max));
    assert_eq!(
        adapter.shown(&"é".repeat(max + 100)),
        format!("{}…", "é".repeat(max))
    );
    // The key is replaced before the cut is measured.
    let before_cut = format!("{CANARY} {}", "x".repeat(max));
    assert!(adapter.shown(&before_cut).starts_with("[redacted] xxx"));
}

/// A provider's text reaches an error (and so the operator's terminal and the logs) without a
/// control character: an escape sequence, a bell or a C1 `CSI` shows as U+FFFD, a line break or
/// tab as a space, so a server can neither drive the terminal nor forge a line of its own. The
/// bidirectional overrides that reorder what a terminal shows are replaced too; plain spaces,
/// accents and right-to-left text are kept.
#[test]
fn a_providers_text_is_shown_without_control_characters() {
    let adapter = OpenAiCompletion::new(config("https://h/v1")).unwrap();
    assert_eq!(
        adapter.shown("down\u{1b}]0;pwned\u{7} now\u{9b}2J\r\nERROR fake line\tend\u{7f}"),
        "down\u{FFFD}]0;pwned\u{FFFD} now\u{FFFD}2J ERROR fake line end\u{FFFD}"
    );
    assert_eq!(
        adapter.shown("a\u{202E}b\u{2066}c \u{5e9}\u{5dc}\u{5d5}\u{5dd} é"),
        "a\u{FFFD}b\u{FFFD}c \u{5e9}\u{5dc}\u{5d5}\u{5dd} é"
    );
    for c in ('\u{0}'..='\u{1f}')
        .chain(['\u{7f}'])
        .chain('\u{80}'..='\u{9f}')
    {
        let shown = adapter.shown(&format!("a{c}b"));
        assert!(!shown.chars().any(char::is_control), "U+{:04X}", c as u32);
    }
    // Every way a provider's text enters an error: a JSON error body, a plain-text body's first
    // line, and an error event in the stream.
    let body = br#"{"error":{"message":"bad\u001b[2J\nINFO all good","code":"x\u0007"}}"#;
    let from_json = adapter.shown(&provider_message(body).unwrap());
    assert_eq!(from_json, "bad\u{FFFD}[2J INFO all good (x\u{FFFD})");
    let line = super::error_body::first_line(b"\x1b]8;;http://evil\x1b\\click\rover").unwrap();
    assert_eq!(
        adapter.shown(&line),
        "\u{FFFD}]8;;http://evil\u{FFFD}\\click over"
    );
    let error = adapter.decode_error(DecodeError::ProviderError {
        message: "x\u{1b}[31mred\u{9d}0;t\u{7}".into(),
    });
    let shown = error.to_string();
    assert!(
        shown.ends_with("x\u{FFFD}[31mred\u{FFFD}0;t\u{FFFD}")
            && !shown.chars().any(char::is_control),
        "{shown:?}"
    );
}

#[test]
fn a_key_cut_by_the_message_limit_is_not_partly_shown() {
    let adapter = OpenAiCompletion::new(config("https://h/v1")).unwrap();
    // The key straddles the 300-character cut: the message is truncated first, then scrubbed,
    // so the whole key never matches and its first characters are shown.
    let message = format!(
        "{} {CANARY} is not a valid key",
        "x".repeat(MAX_PROVIDER_MESSAGE_CHARS - 10)
    );
    let error = adapter.scrubbed(adapter.decode_error(DecodeError::ProviderError { message }));
    let shown = error.to_string();
    assert!(
        !shown.contains("sk-canary"),
        "part of the key leaked: {shown}"
    );
}

/// A request whose assistant turn made one call that kept a reasoning item.
fn request_with_kept_reasoning() -> LlmRequest {
    let id = ai_core::ToolCallId::new("call_1").unwrap();
    let mut provider_fields = serde_json::Map::new();
    provider_fields.insert(
        wire_openai::responses::REASONING_ITEMS_KEY.into(),
        serde_json::json!([{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"}]),
    );
    LlmRequest {
        caller: ai_core::LlmCaller {
            run_id: ai_core::RunId::new("run_1").unwrap(),
            graph: None,
        },
        messages: vec![
            ai_core::Message::User {
                content: "Weather?".into(),
            },
            ai_core::Message::Assistant {
                content: String::new(),
                tool_calls: vec![ai_core::AssistantToolCall {
                    id: id.clone(),
                    name: "get_weather".into(),
                    arguments: "{}".into(),
                    provider_fields,
                }],
            },
            ai_core::Message::Tool {
                tool_call_id: id,
                content: "21".into(),
            },
        ],
        tools: Vec::new(),
        tool_choice: ai_core::ToolChoice::Auto,
        parallel_tool_calls: None,
    }
}

/// `stateless_reasoning` on the Responses wire makes the request stateless and sends the
/// reasoning a call kept just before it; off (the default), or on chat, the request has none.
#[test]
fn stateless_reasoning_sends_the_kept_reasoning_back_on_the_responses_wire() {
    let request = request_with_kept_reasoning();
    let body = |wire: OpenAiWire, stateless_reasoning: bool| -> serde_json::Value {
        let model = OpenAiCompletion::new(OpenAiConfig {
            wire,
            stateless_reasoning,
            ..config("http://localhost:11434/v1")
        })
        .unwrap();
        serde_json::from_slice(&model.encode(&request).unwrap()).unwrap()
    };
    let types = |body: &serde_json::Value| -> Vec<String> {
        body["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["type"].as_str().unwrap().to_owned())
            .collect()
    };

    let stateless = body(OpenAiWire::Responses, true);
    assert_eq!(
        types(&stateless),
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(stateless["input"][1]["encrypted_content"], "gAAAA");
    assert_eq!(stateless["store"], false);
    assert_eq!(
        stateless["include"],
        serde_json::json!(["reasoning.encrypted_content"])
    );

    let default = body(OpenAiWire::Responses, false);
    assert_eq!(
        types(&default),
        ["message", "function_call", "function_call_output"]
    );
    assert!(default.get("store").is_none() && default.get("include").is_none());

    let chat = body(OpenAiWire::Chat, true);
    assert!(!chat.to_string().contains("rs_1"), "{chat}");
    assert!(chat.get("store").is_none() && chat.get("include").is_none());
}

/// A key is never sent in clear to another machine: with an `http://` base URL it is refused
/// unless the host is loopback (by name or address, never resolved) or the config allows it;
/// a config without a key, or over https, needs nothing. The refusal names neither the key nor
/// the URL.
#[test]
fn a_key_over_plain_http_goes_only_to_a_loopback_host_unless_allowed() {
    for remote in [
        "http://h/v1",
        "http://api.example.com/v1",
        "http://10.0.0.7:4000/v1",
        "http://[2001:db8::1]/v1",
        "http://localhost.example.com/v1",
        "http://user:pw@h/v1?key=q",
    ] {
        let error = OpenAiCompletion::new(config(remote)).unwrap_err();
        assert_eq!(error, OpenAiConfigError::KeyOverHttp, "{remote}");
        let shown = format!("{error} {error:?}");
        assert!(
            shown.contains("llm.allow_key_over_http")
                && !shown.contains(CANARY)
                && !shown.contains("pw"),
            "{shown}"
        );
        OpenAiCompletion::new(OpenAiConfig {
            allow_key_over_http: true,
            ..config(remote)
        })
        .unwrap_or_else(|e| panic!("{remote}: {e}"));
        let keyless = OpenAiCompletion::new(OpenAiConfig::new(remote, "m"));
        // The URL's own credentials would go in clear as a `Basic` header: the same rule.
        match remote.contains('@') {
            true => assert_eq!(keyless.unwrap_err(), OpenAiConfigError::KeyOverHttp),
            false => drop(keyless.unwrap_or_else(|e| panic!("{remote}: {e}"))),
        }
        let https = remote.replacen("http://", "https://", 1);
        OpenAiCompletion::new(config(&https)).unwrap_or_else(|e| panic!("{https}: {e}"));
    }
    for local in [
        "http://localhost:11434/v1",
        "http://LOCALHOST./v1",
        "http://ollama.localhost/v1",
        "http://127.0.0.1:8000/v1",
        "http://127.1.2.3/v1",
        "http://[::1]:4000/v1",
        "http://[::ffff:127.0.0.1]/v1",
    ] {
        OpenAiCompletion::new(config(local)).unwrap_or_else(|e| panic!("{local}: {e}"));
    }
}

/// A key in the base URL's query (`?api-key=…`, as Azure-style gateways take it) is a key sent
/// in clear as much as one in a header: with no configured key, a non-loopback `http://` base
/// URL whose query has a parameter named like a key is refused as `KeyOverHttp` unless allowed;
/// another parameter, a loopback host or https needs nothing.
#[test]
fn a_key_in_the_base_urls_query_is_held_to_the_http_rule() {
    for name in [
        "key",
        "api-key",
        "api_key",
        "apikey",
        "token",
        "access_token",
        "code",
        "sig",
        "API-Key",
        "subscription-key",
        "api%2Dkey",
    ] {
        let remote = format!("http://gw.example:8000/v1?team=a&{name}={CANARY}");
        let error = OpenAiCompletion::new(OpenAiConfig::new(&remote, "m")).unwrap_err();
        assert_eq!(error, OpenAiConfigError::KeyOverHttp, "{remote}");
        assert!(!format!("{error} {error:?}").contains(CANARY));
        OpenAiCompletion::new(OpenAiConfig {
            allow_key_over_http: true,
            ..OpenAiConfig::new(&remote, "m")
        })
        .unwrap_or_else(|e| panic!("{remote}: {e}"));
        for fine in [
            remote.replacen("http://", "https://", 1),
            remote.replacen("gw.example", "localhost", 1),
        ] {
            OpenAiCompletion::new(OpenAiConfig::new(&fine, "m"))
                .unwrap_or_else(|e| panic!("{fine}: {e}"));
        }
    }
    for keyless in [
        "http://gw.example/v1?team=a",
        "http://gw.example/v1?monkey=1&keys=2",
        "http://gw.example/v1?",
    ] {
        OpenAiCompletion::new(OpenAiConfig::new(keyless, "m"))
            .unwrap_or_else(|e| panic!("{keyless}: {e}"));
    }
}

/// A TLS refusal that another attempt would meet again (the server's certificate, no version
/// or cipher suite in common) is not retried; any other connection failure (refused, reset, a
/// TLS alert the server sent, a record that did not decrypt) still is. The chain is the one
/// reqwest gives over rustls: its error, hyper's `Connect`, then an `io::Error` of kind `Other`
/// around tokio-rustls' `InvalidData` one around the `rustls::Error`, which `io::Error::source`
/// skips. Before, every such failure was retried.
#[test]
fn a_tls_refusal_of_the_server_is_not_retried() {
    #[derive(Debug)]
    struct Connect(std::io::Error);
    impl std::fmt::Display for Connect {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("client error (Connect)")
        }
    }
    impl std::error::Error for Connect {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let over_rustls = |tls: rustls::Error| {
        let tls = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        Connect(std::io::Error::other(tls))
    };
    use rustls::{CertificateError, PeerIncompatible};
    for refusal in [
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        rustls::Error::InvalidCertificate(CertificateError::Expired),
        rustls::Error::InvalidCertificate(CertificateError::NotValidForName),
        rustls::Error::NoCertificatesPresented,
        rustls::Error::PeerIncompatible(PeerIncompatible::NoCipherSuitesInCommon),
    ] {
        let shown = refusal.to_string();
        assert!(fails_again(&over_rustls(refusal)), "{shown}");
    }
    let alert = rustls::AlertDescription::InternalError;
    for passing in [
        rustls::Error::AlertReceived(alert),
        rustls::Error::DecryptError,
    ] {
        let shown = passing.to_string();
        assert!(!fails_again(&over_rustls(passing)), "{shown}");
    }
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    assert!(!fails_again(&Connect(refused)));
}

/// The HTTP client's own error text (and its causes', which may hold what a server or a
/// certificate said) is one line without control characters, as a provider's text is: a line
/// break becomes a space, an escape sequence's ESC and a C1 `CSI` become U+FFFD.
#[test]
fn the_http_clients_error_text_is_one_safe_line() {
    #[derive(Debug)]
    struct Failure(&'static str, Option<Box<Failure>>);
    impl std::fmt::Display for Failure {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Failure {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }
    let error = Failure(
        "error sending request",
        Some(Box::new(Failure(
            "invalid peer certificate for gw\u{1b}]0;owned\u{7}\r\nPOST forged\u{9b}2K",
            None,
        ))),
    );
    assert_eq!(
        describe_chain(&error),
        "error sending request: invalid peer certificate for gw\u{FFFD}]0;owned\u{FFFD} POST \
         forged\u{FFFD}2K"
    );
}

/// The id `config`'s request sends `request`'s one call under, the same on its result.
fn one_sent_id(request: &LlmRequest, config: OpenAiConfig) -> String {
    let wire = config.wire;
    let model = OpenAiCompletion::new(config).unwrap();
    let body: serde_json::Value = serde_json::from_slice(&model.encode(request).unwrap()).unwrap();
    let (call, result) = match wire {
        OpenAiWire::Chat => (
            &body["messages"][1]["tool_calls"][0]["id"],
            &body["messages"][2]["tool_call_id"],
        ),
        OpenAiWire::Responses => (&body["input"][1]["call_id"], &body["input"][2]["call_id"]),
    };
    assert_eq!(call, result, "{wire:?}");
    call.as_str().unwrap().to_owned()
}

/// A request to Mistral's API, or for a Mistral model whatever server runs it (its chat
/// template refuses other ids too), sends its call ids as nine letters and digits, on the chat
/// wire and on the Responses wire (mistral.rs serves both) alike; any other server gets them as
/// they are. The config says so from its base URL and model, and a composition root may set it
/// either way.
#[test]
fn a_request_for_mistral_sends_call_ids_of_nine_letters_and_digits() {
    let request = request_with_kept_reasoning();
    let sent_id = |config: OpenAiConfig| -> String {
        let on_chat = one_sent_id(&request, config.clone());
        let responses = OpenAiConfig {
            wire: OpenAiWire::Responses,
            ..config
        };
        assert_eq!(one_sent_id(&request, responses), on_chat);
        on_chat
    };
    let mistral = |id: &str| id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric());
    for (base, model) in [
        ("https://api.mistral.ai/v1", "m"),
        (
            "http://localhost:8000/v1",
            "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
        ),
        ("http://localhost:11434/v1", "devstral:24b"),
        ("http://localhost:11434/v1", "magistral"),
        // Mixtral 8x22B's template is the family's, and its name holds no "mistral"
        // (ml-explore/mlx-lm#1375).
        (
            "http://localhost:8080/v1",
            "mlx-community/Mixtral-8x22B-Instruct-v0.1-4bit",
        ),
    ] {
        let config = OpenAiConfig::new(base, model);
        assert!(config.mistral_call_ids, "{base} {model}");
        let id = sent_id(config);
        assert!(mistral(&id), "{base} {model}: {id}");
    }
    let config = OpenAiConfig::new("https://api.openai.com/v1", "gpt-4o");
    assert!(!config.mistral_call_ids);
    assert_eq!(sent_id(config.clone()), "call_1");
    let id = sent_id(OpenAiConfig {
        mistral_call_ids: true,
        ..config
    });
    assert!(mistral(&id), "{id}");
}

/// A server may echo the request's URL in its error (`invalid URL /v1/…?api-key=…`): the base
/// URL's password (or a lone user name, a token) and its key-named query values are scrubbed from
/// every message, as written and percent-decoded, as the key is; its other parameters are not,
/// nor are values too short to be secrets.
#[test]
fn the_base_urls_secrets_are_scrubbed_from_messages() {
    let adapter = OpenAiCompletion::new(config(
        "https://user:pa%2Fss-9x8y7z@h/v1?api-key=qk%2B7f3a9c1e&api-version=2024-10-01&code=ab",
    ))
    .unwrap();
    let echoed = "no route for https://user:pa%2Fss-9x8y7z@h/v1/chat/completions?\
                  api-key=qk%2B7f3a9c1e&api-version=2024-10-01&code=ab (pass pa/ss-9x8y7z, key qk+7f3a9c1e)";
    for error in [
        adapter.scrubbed(CompletionError::Transport(echoed.into())),
        CompletionError::Provider(adapter.shown(echoed)),
    ] {
        let text = error.to_string();
        for secret in [
            "pa%2Fss-9x8y7z",
            "pa/ss-9x8y7z",
            "qk%2B7f3a9c1e",
            "qk+7f3a9c1e",
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(text.contains("api-version=2024-10-01&code=ab"), "{text}");
    }
    let token_only = OpenAiCompletion::new(config("https://tok-5e6f7a8b@h/v1")).unwrap();
    assert_eq!(
        token_only.shown("unknown user tok-5e6f7a8b"),
        "unknown user [redacted]"
    );
}

/// A server may echo a base URL's secret escaped otherwise than the URL writes it: its escapes
/// in the other case, a character the URL writes plainly escaped, a space as `+`, or quoted
/// inside JSON (`\"`, as a FastAPI `detail` list is shown). Each is scrubbed; ordinary text with
/// escapes of its own is kept as it is.
#[test]
fn a_base_url_secret_echoed_in_another_encoding_is_scrubbed() {
    let adapter = OpenAiCompletion::new(config(
        "https://user:pa%2fss%22-9x8y7z@h/v1?api-key=qk+7f!4b8d2f&sig=s%20ig-5e6f",
    ))
    .unwrap();
    let detail = provider_message(br#"{"detail":[{"msg":"bad","input":"pa/ss\"-9x8y7z"}]}"#)
        .expect("a message");
    for echoed in [
        "no route for https://user:pa%2Fss%22-9x8y7z@h (100%25 sure, %41)",
        "no route for /v1?api-key=qk%2B7f%214b8d2f (100%25 sure, %41)",
        "no route for /v1?api-key=qk%2b7f!4b8d2f&sig=s+ig-5e6f (100%25 sure, %41)",
        "no route for /v1?sig=s%20ig-5e6f (100%25 sure, %41)",
        &detail,
    ] {
        let text = adapter.shown(echoed);
        for tail in ["9x8y7z", "4b8d2f", "ig-5e6f"] {
            assert!(!text.contains(tail), "{tail} in {text}");
        }
        assert!(text.contains("[redacted]"), "{text}");
        if echoed != detail {
            assert!(text.ends_with("(100%25 sure, %41)"), "{text}");
        }
    }
}

/// reqwest sends a base URL's `user:password@` as a `Basic` header: a server that echoes its
/// request's headers shows them base64-encoded, which is scrubbed as the password is (and, for
/// a lone user name, as that token is).
#[test]
fn the_basic_credentials_of_the_base_url_are_scrubbed() {
    let adapter = OpenAiCompletion::new(config("https://user:pa%2Fss-9x8y7z@h/v1")).unwrap();
    assert_eq!(
        adapter.shown("bad header Authorization: Basic dXNlcjpwYS9zcy05eDh5N3o="),
        "bad header Authorization: Basic [redacted]"
    );
    let token_only = OpenAiCompletion::new(config("https://tok-5e6f7a8b@h/v1")).unwrap();
    assert_eq!(
        token_only.shown("unknown Basic dG9rLTVlNmY3YThiOg=="),
        "unknown Basic [redacted]"
    );
}

/// A base URL's secret that holds a line break (`%0A`), echoed as it decodes by a `text/plain`
/// error whose first line alone is shown, is cut at that break: the part of it on the shown
/// line is scrubbed too, not left showing half the secret.
#[test]
fn a_base_url_secret_cut_at_the_shown_line_is_scrubbed() {
    let adapter = OpenAiCompletion::new(config(
        "https://user:pw-4d5e6f7a%0D%0A%20ok@h/v1?api-key=line-1a2b3c%0Aline-4d5e6f",
    ))
    .unwrap();
    for body in [
        &b"bad password pw-4d5e6f7a\r\n ok\n"[..],
        b"bad key line-1a2b3c\nline-4d5e6f\n",
    ] {
        let line = error_body::first_line(body).expect("a line");
        let text = adapter.shown(&line);
        for part in ["4d5e6f7a", "1a2b3c"] {
            assert!(!text.contains(part), "{part} in {text}");
        }
        assert!(text.ends_with(" [redacted]"), "{text}");
    }
}

/// A 1 MiB message of escapes that repeats most of several long secrets (each near match as
/// long as the secret) is scrubbed, and the search finds leftmost matches, none overlapping,
/// where a secret repeats itself. The search is `memchr::memmem`, linear in the worst case; the
/// search it replaced compared each position against each secret (about 1.8e9 byte
/// comparisons for this message, some 97 s in a debug build).
#[test]
fn scrubbing_escapes_finds_secrets_in_a_big_message_of_near_matches() {
    let secrets: Vec<Vec<u8>> = [200, 500, 1000]
        .into_iter()
        .map(|len| {
            let mut secret = vec![b'a'; len - 1];
            secret.push(b'!');
            secret
        })
        .collect();
    let mut message = "%61".repeat(1000);
    message.push_str(&"a".repeat((1 << 20) - message.len()));
    message.push('!');
    let redact_escaped = |message: &str, secrets: &[Vec<u8>]| {
        let mut cuts = Vec::new();
        escaped_cuts(message, secrets, &mut cuts);
        redacted(message, cuts, message.len())
    };
    let shown = redact_escaped(&message, &secrets);
    assert!(shown.ends_with("[redacted]"), "the secret is still found");
    assert!(!shown.ends_with("a!"));

    let scrubbed = |text: &str, secret: &str| redact_escaped(text, &[secret.as_bytes().to_vec()]);
    assert_eq!(scrubbed("aaab", "aab"), "a[redacted]");
    assert_eq!(scrubbed("abababab", "abab"), "[redacted][redacted]");
    assert_eq!(scrubbed("aabaabaaab", "aabaaab"), "aab[redacted]");
    assert_eq!(scrubbed("xyz", "xyzw"), "xyz");
}

/// Another JSON writer than serde_json may escape more of a secret it quotes: `/` as `\/` (PHP,
/// some Java and Go writers), or any character as a `\u` escape in either case (`\u002b` for
/// `+`, Go's `\u0026` and `\u003c` for `&` and `<`, `\u00e9` for a non-ASCII character, a
/// surrogate pair past U+FFFF). Such an echo of a base URL's secret, of the key or of the
/// `Basic` credentials is scrubbed; ordinary text with escapes of its own is kept as it is.
#[test]
fn a_secret_quoted_by_another_json_writer_is_scrubbed() {
    let adapter = OpenAiCompletion::new(OpenAiConfig {
        api_key: Some(Secret::new("sk-ab/cd+ef-7f3a9c1e")),
        ..OpenAiConfig::new(
            "https://user:pa%2Fss%26%3C-9x8y7z@h/v1?api-key=qk%2B7f%C3%A9%F0%9F%94%914b8d2f",
            "m",
        )
    })
    .unwrap();
    let kept = r"(100%25 sure, \u0041, C:\new)";
    for echoed in [
        r#"{"pass":"pa\/ss\u0026\u003c-9x8y7z"}"#,
        r#"{"pass":"pa\/ss&\u003C-9x8y7z"}"#,
        r#"{"key":"qk\u002b7f\u00e9\ud83d\udd114b8d2f"}"#,
        r#"{"key":"qk+7f\u00E9\uD83D\uDD114b8d2f"}"#,
        r#"{"auth":"Bearer sk-ab\/cd\u002Bef-7f3a9c1e"}"#,
    ] {
        let text = adapter.shown(&format!("{echoed} {kept}"));
        for tail in ["9x8y7z", "4b8d2f", "7f3a9c1e"] {
            assert!(!text.contains(tail), "{tail} in {text}");
        }
        assert!(text.contains("[redacted]"), "{text}");
        assert!(text.ends_with(kept), "{text}");
    }
    // `user:pw??-9x8y7z` is `dXNlcjpwdz8/LTl4OHk3eg==`, which holds a `/`.
    let basic = OpenAiCompletion::new(config("https://user:pw%3F%3F-9x8y7z@h/v1")).unwrap();
    assert_eq!(
        basic.shown(r#"{"authorization":"Basic dXNlcjpwdz8\/LTl4OHk3eg=="}"#),
        r#"{"authorization":"Basic [redacted]"}"#
    );
}

/// A server that echoes the request's URL inside a JSON error quotes the percent-escaped
/// secret: a JSON writer's escapes (`\/`, even `\u0025` for `%`) mix with the URL's. The
/// secret is scrubbed however the two are mixed, and only the stretch it spans.
#[test]
fn a_percent_escaped_secret_quoted_in_json_is_scrubbed() {
    let adapter = OpenAiCompletion::new(config(
        "https://user:pa%2Fss%20-9x8y7z@h/v1?sig=ab/cd%2Bef-5e6f",
    ))
    .unwrap();
    for (echoed, shown) in [
        (
            r#"{"url":"https:\/\/h\/v1\/chat\/completions?sig=ab\/cd%2Bef-5e6f","x":"%41"}"#,
            r#"{"url":"https:\/\/h\/v1\/chat\/completions?sig=[redacted]","x":"%41"}"#,
        ),
        (
            r#"{"url":"\/v1?sig=ab\/cd\u00252bef-5e6f"}"#,
            r#"{"url":"\/v1?sig=[redacted]"}"#,
        ),
        (
            r#"{"url":"https:\/\/user:pa%2Fss\u002520-9x8y7z@h"}"#,
            r#"{"url":"https:\/\/user:[redacted]@h"}"#,
        ),
    ] {
        assert_eq!(adapter.shown(echoed), shown);
    }
}

/// A server may echo the `Basic` credentials without their `=` padding, or in base64url (`-` and
/// `_` for `+` and `/`), padded or not: each form is scrubbed, quoted in JSON too.
#[test]
fn the_basic_credentials_in_another_base64_form_are_scrubbed() {
    // `user:pw??-9x8y7z` is `dXNlcjpwdz8/LTl4OHk3eg==`.
    let adapter = OpenAiCompletion::new(config("https://user:pw%3F%3F-9x8y7z@h/v1")).unwrap();
    for echoed in [
        "dXNlcjpwdz8/LTl4OHk3eg",
        "dXNlcjpwdz8_LTl4OHk3eg==",
        "dXNlcjpwdz8_LTl4OHk3eg",
        r"dXNlcjpwdz8\/LTl4OHk3eg",
    ] {
        assert_eq!(
            adapter.shown(&format!("bad header Authorization: Basic {echoed} (x)")),
            "bad header Authorization: Basic [redacted] (x)"
        );
    }
}

/// A key shorter than a real secret (a local server's placeholder, `x1`) is scrubbed only where
/// it stands alone, not bounded by a letter, digit or `_`: replaced everywhere it would garble
/// the error (`HTTP 401` read `HTTP 40[redacted]` for a key `1`). A base URL's value that
/// short (`?code=1`) is not a secret the scrub looks for at all.
#[test]
fn a_short_key_is_scrubbed_only_where_it_stands_alone() {
    let short = |key: &str| {
        OpenAiCompletion::new(OpenAiConfig {
            api_key: Some(Secret::new(key)),
            ..OpenAiConfig::new("http://localhost:8080/v1?code=1", "m")
        })
        .unwrap()
    };
    let scrubbed = |adapter: &OpenAiCompletion, message: &str| {
        adapter
            .scrubbed(CompletionError::Provider(message.into()))
            .to_string()
    };
    let message = "POST http://localhost:8080/v1/chat/completions: HTTP 401 Unauthorized: \
                   bad key x1 (max_x1 is not x1y, x1)";
    let shown = scrubbed(&short("x1"), message);
    assert!(
        shown
            .ends_with("HTTP 401 Unauthorized: bad key [redacted] (max_x1 is not x1y, [redacted])"),
        "{shown}"
    );
    let shown = scrubbed(&short("1"), message);
    assert!(
        shown.contains("localhost:8080/v1/chat/completions: HTTP 401 Unauthorized"),
        "{shown}"
    );
    // A short key repeating itself is found where it stands alone after a part that does not.
    assert!(
        scrubbed(&short("a-a"), "xa-a-a").ends_with("xa-[redacted]"),
        "{}",
        scrubbed(&short("a-a"), "xa-a-a")
    );
}

#[test]
fn the_url_secrets_debug_form_shows_none_of_them() {
    let url = Url::parse("https://user:pa55word-canary@example.com/v1?api-key=key-canary").unwrap();
    let secrets = url_secrets(&url, Some(&Secret::new("sk-canary-key")));
    assert!(!secrets.literal.is_empty() && !secrets.decoded.is_empty());
    let shown = format!("{secrets:?}");
    for canary in ["pa55word", "key-canary", "sk-canary", "dXNlcjpwYTU1"] {
        assert!(!shown.contains(canary), "{shown}");
    }
}

/// A small deterministic generator for the scrub's randomized tests (the crate has no proptest).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// `secret` as a message may show it: as it is, percent-escaped (each byte, either case, some
/// bytes only), JSON-quoted by some writer (`\/`, `\"`, any character as a `\u` escape in either
/// case, a surrogate pair past U+FFFF), or percent-escaped and then JSON-quoted.
fn an_echo_of(secret: &str, random: &mut Lcg) -> String {
    let percent = |random: &mut Lcg| {
        let mut text = String::new();
        for &byte in secret.as_bytes() {
            if byte.is_ascii_alphanumeric() && random.below(3) > 0 {
                text.push(byte as char);
            } else if random.below(2) == 0 {
                text.push_str(&format!("%{byte:02X}"));
            } else {
                text.push_str(&format!("%{byte:02x}"));
            }
        }
        text
    };
    let json = |text: &str, random: &mut Lcg| {
        let mut quoted = String::new();
        for c in text.chars() {
            match (c, random.below(4)) {
                ('"', _) => quoted.push_str(r#"\""#),
                ('\\', _) => quoted.push_str(r"\\"),
                ('/', 0 | 1) => quoted.push_str(r"\/"),
                (_, 0) => {
                    let mut units = [0; 2];
                    for unit in c.encode_utf16(&mut units) {
                        if random.below(2) == 0 {
                            quoted.push_str(&format!("\\u{unit:04x}"));
                        } else {
                            quoted.push_str(&format!("\\u{unit:04X}"));
                        }
                    }
                }
                _ => quoted.push(c),
            }
        }
        quoted
    };
    match random.below(4) {
        0 => secret.to_owned(),
        1 => percent(random),
        2 => json(secret, random),
        _ => {
            let escaped = percent(random);
            json(&escaped, random)
        }
    }
}

/// Random secrets (the key, a base URL's password and a query value, some holding one another),
/// put into a random message (one, or two side by side) in random escaped forms, never survive
/// the scrub, and the message around them is kept as it is. The key was replaced first, so a
/// query value or password holding it showed the rest of itself.
#[test]
fn a_random_secret_in_a_random_escaped_form_never_survives() {
    let mut random = Lcg(0x5eed_cafe);
    let mut adapter = OpenAiCompletion::new(config("https://h/v1")).unwrap();
    let parts = [
        "sk", "-", "_", "/", "+", "%", "&", "<", "\"", "é", "🔑", "a", "Z", "9", "=", " ", "\\",
        "~", "x7", "q",
    ];
    let noise = [
        "a", "b", " ", "%", "%4", "%zz", "\\", "\\u", "\\u00", "\\ud800", "\\u0000", "\\\\", "/",
        "é", "🔑", "HTTP 401", "x", "0", "\"", ":", "{", "}",
    ];
    for _ in 0..5000 {
        // A key is sent as a header: visible ASCII only.
        let ascii: Vec<&str> = parts
            .iter()
            .copied()
            .filter(|part| part.bytes().all(|b| b.is_ascii_graphic()))
            .collect();
        let secret = |random: &mut Lcg, min: usize, parts: &[&str]| {
            let mut text = String::from("k");
            while text.chars().count() < min || random.below(4) > 0 {
                text.push_str(random.pick(parts));
            }
            text.push('z');
            text
        };
        let key = secret(&mut random, 4, &ascii);
        let password = match random.below(3) {
            0 => format!("{key}{}", secret(&mut random, 1, &parts)),
            _ => secret(&mut random, 4, &parts),
        };
        let token = match random.below(3) {
            0 => format!("{}{key}", secret(&mut random, 1, &parts)),
            1 => password[..password.len() - 1].to_owned() + "y",
            _ => secret(&mut random, 4, &parts),
        };
        let url = Url::parse(&format!(
            "https://user:{}@h/v1?api-key={}",
            percent_escaped(&password),
            percent_escaped(&token)
        ))
        .unwrap();
        // As `OpenAiCompletion::new` would set them, without a new HTTP client each time.
        adapter.api_key = Some(Secret::new(key.clone()));
        adapter.url_secrets = url_secrets(&url, adapter.api_key.as_ref());
        let secrets = [key.as_str(), &password, &token];
        let shown = secrets[random.below(3)].to_owned();
        let mut echo = an_echo_of(&shown, &mut random);
        let mut expected = String::from("[redacted]");
        if random.below(2) == 0 {
            // Another secret, or the same one in another form, after it.
            let other = secrets[random.below(3)];
            echo = format!("{echo} {}", an_echo_of(other, &mut random));
            expected.push_str(" [redacted]");
        }
        let around = |random: &mut Lcg| {
            let mut text = String::new();
            for _ in 0..random.below(6) {
                text.push_str(random.pick(&noise));
            }
            text
        };
        let (before, after) = (around(&mut random), around(&mut random));
        let message = format!("{before} {echo} {after}");
        let scrubbed = adapter.scrub(message.clone());
        assert_eq!(
            scrubbed,
            format!("{before} {expected} {after}"),
            "{shown:?} as {echo:?} (key {key:?}, password {password:?}, token {token:?})"
        );
    }
}

/// Every byte of `text` but a letter or digit as a `%XX` escape.
fn percent_escaped(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (byte as char).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// A secret that holds another (a query value made of the key and more) is cut whole, whichever
/// is looked for first: the key was replaced before the base URL's secrets, which left the rest
/// of the query value showing (`[redacted]5678`).
#[test]
fn a_secret_holding_another_is_scrubbed_whole() {
    let adapter = OpenAiCompletion::new(OpenAiConfig {
        api_key: Some(Secret::new("sk-live-1234")),
        ..OpenAiConfig::new("https://h/v1?token=sk-live-1234%2F5678", "m")
    })
    .unwrap();
    for echoed in [
        "bad token sk-live-1234/5678 (x)",
        "bad token sk-live-1234%2F5678 (x)",
        r#"bad token sk-live-1234\/5678 (x)"#,
    ] {
        assert_eq!(adapter.shown(echoed), "bad token [redacted] (x)");
    }
    // Two secrets that overlap are cut as one stretch.
    assert_eq!(
        adapter.shown("sk-live-1234sk-live-1234/5678 sk-live-1234"),
        "[redacted][redacted] [redacted]"
    );
}

/// A provider's message may be as long as a whole answer (megabytes, in a 2xx JSON error or a
/// stream's error event), and the scrub keeps a 16-byte record per byte for each view of it:
/// only its first `MAX_SCRUBBED_BYTES` are kept, and a secret that starts before that cut is
/// still cut whole, however it is escaped, not left showing its first part.
#[test]
fn a_long_message_is_scrubbed_only_up_to_a_bound() {
    let adapter = OpenAiCompletion::new(config("https://h/v1?sig=ab%2Fcd-5e6f7a8b")).unwrap();
    let long = format!("{} tail", r"\%".repeat(1 << 20));
    let shown = adapter.scrub(long);
    assert_eq!(shown.len(), MAX_SCRUBBED_BYTES + '…'.len_utf8());
    assert!(shown.ends_with('…'), "{}", &shown[shown.len() - 20..]);
    // Each secret byte percent-escaped, then each character of the escapes JSON-quoted.
    let escaped: String = "ab/cd-5e6f7a8b"
        .bytes()
        .flat_map(|byte| format!("%{byte:02X}").into_bytes())
        .map(|byte| format!("\\u{byte:04x}"))
        .collect();
    for before in [1, 7, 100, escaped.len() - 1] {
        let message = format!(
            "{}{escaped} tail",
            "é".repeat((MAX_SCRUBBED_BYTES - before) / 2) + &"x".repeat(before % 2)
        );
        let shown = adapter.scrub(message);
        assert!(shown.ends_with("[redacted]…"), "{before}: {shown:?}");
        assert!(!shown.contains(r"\u00"), "{before}");
    }
}

/// A request of one user message.
fn hello() -> LlmRequest {
    LlmRequest {
        caller: ai_core::LlmCaller {
            run_id: ai_core::RunId::new("run_1").unwrap(),
            graph: None,
        },
        messages: vec![ai_core::Message::User {
            content: "Hello".into(),
        }],
        tools: Vec::new(),
        tool_choice: ai_core::ToolChoice::Auto,
        parallel_tool_calls: None,
    }
}

/// Serves one connection on a loopback port: reads the request's head and body (by its
/// `content-length`), then writes `answer` and holds the connection open. Returns the base URL.
async fn serve_once(answer: Vec<u8>) -> String {
    serve(answer, true).await
}

/// [`serve_once`], but the connection is closed once `answer` is written.
async fn serve_once_then_close(answer: Vec<u8>) -> String {
    serve(answer, false).await
}

/// [`serve_once`], the connection held open after `answer` when `hold_open`, else closed.
async fn serve(answer: Vec<u8>, hold_open: bool) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let read = socket.read(&mut buffer).await.unwrap();
            request.extend_from_slice(&buffer[..read]);
            let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
            if let Some(head_end) = text.find("\r\n\r\n") {
                let length = text
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|n| n.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if request.len() >= head_end + 4 + length {
                    break;
                }
            }
            assert!(read > 0, "the request ended early");
        }
        socket.write_all(&answer).await.unwrap();
        if hold_open {
            std::future::pending::<()>().await;
        }
    });
    base
}

/// An event stream whose one event says `hi` and stops, then its end marker.
const HI_STREAM: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

/// An answer of `status` labelled `content_type`, with the field lines `extra` (each ending
/// `\r\n`), whose `body` is sized by its `content-length`.
fn sized_answer(status: &str, content_type: &str, extra: &str, body: &[u8]) -> Vec<u8> {
    let mut answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n{extra}content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(body);
    answer
}

/// An answer of `status` labelled `content_type` whose `body` is sent as one chunk with no last
/// chunk after it: only what the body says can end its read.
fn one_chunk_answer(status: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n\r\n\
         {:x}\r\n{body}\r\n",
        body.len()
    )
    .into_bytes()
}

/// `model`'s answer to [`hello`], its deltas dropped, under a token that never fires.
async fn complete_hello(model: &OpenAiCompletion) -> Result<LlmCompletion, CompletionError> {
    model
        .complete(
            &hello(),
            &mut |_: CompletionDelta| {},
            &CancellationToken::new(),
        )
        .await
}

/// A server that streams as asked but labels its event stream `application/json` (Microsoft's
/// Foundry Local does: microsoft/foundry-dev-tools#195) is read as the stream it is, its text
/// shown as it arrives, and answered at its end marker: not buffered whole and then refused as
/// JSON that is no completion. A JSON body under that label is still a whole answer.
#[tokio::test]
async fn an_event_stream_labelled_json_is_read_as_a_stream() {
    let events = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let whole = r#"{"id":"c","object":"chat.completion","created":1,"model":"m",
        "choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
    for (body, content_type) in [
        (format!("\u{FEFF}\n{events}"), "application/json"),
        (events.to_owned(), "application/json; charset=utf-8"),
        (whole.to_owned(), "application/json"),
    ] {
        // Chunked, and held open after the body: only the end marker (or the JSON's close)
        // ends the read.
        let base = serve_once(one_chunk_answer("200 OK", content_type, &body)).await;
        let model = OpenAiCompletion::new(OpenAiConfig {
            max_retries: 0,
            idle_timeout: Duration::from_secs(5),
            ..OpenAiConfig::new(base, "m")
        })
        .unwrap();
        let mut text = String::new();
        let mut sink = |delta: CompletionDelta| {
            if let CompletionDelta::Text { delta } = delta {
                text.push_str(&delta);
            }
        };
        let completion = tokio::time::timeout(
            Duration::from_secs(3),
            model.complete(&hello(), &mut sink, &CancellationToken::new()),
        )
        .await
        .unwrap_or_else(|_| panic!("{content_type} {body:?}: answered at once"))
        .unwrap_or_else(|e| panic!("{content_type} {body:?}: {e}"));
        assert_eq!(completion.text, "hi", "{content_type} {body:?}");
        assert_eq!(text, "hi", "{content_type} {body:?}");
    }
}

/// An error answer compressed though the request asked for none (a proxy set to compress
/// everything) is named by its status and its encoding: its bytes, which are no text, are not
/// shown as the provider's message, as a `text/plain` body's first line otherwise is.
#[tokio::test]
async fn a_compressed_error_body_is_not_quoted() {
    let gzip: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xcbH\xcd\xc9\xc9\x07\x00\n";
    for content_type in ["text/plain", "application/json"] {
        let answer = sized_answer(
            "503 Service Unavailable",
            content_type,
            "content-encoding: gzip\r\n",
            gzip,
        );
        let base = serve_once(answer).await;
        let model = OpenAiCompletion::new(OpenAiConfig {
            max_retries: 0,
            ..OpenAiConfig::new(&base, "m")
        })
        .unwrap();
        let error = complete_hello(&model).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "transport error: POST {base}/chat/completions: HTTP 503 Service Unavailable \
                 (its body compressed: gzip, not read)"
            ),
            "{content_type}"
        );
    }
}

/// The server's address and the error of a call it gives `answer` (one try): the error must
/// come before the idle timeout (10 s), so the wait for it is bounded at 3 s, a hang guard only;
/// `what` names the case in that guard's panic.
async fn error_of(answer: Vec<u8>, what: &str) -> (String, CompletionError) {
    let base = serve_once(answer).await;
    let error = error_from(&base, what).await;
    (base, error)
}

/// The error of a call (one try) to the server at `base`, bounded as in [`error_of`].
async fn error_from(base: &str, what: &str) -> CompletionError {
    let model = OpenAiCompletion::new(OpenAiConfig {
        max_retries: 0,
        idle_timeout: Duration::from_secs(10),
        ..OpenAiConfig::new(base, "m")
    })
    .unwrap();
    tokio::time::timeout(Duration::from_secs(3), complete_hello(&model))
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer before the idle timeout"))
        .unwrap_err()
}

/// The error of a call answered 200, labelled JSON, with `opening` as its first chunk and the
/// connection then held open: it must come at once, not at the idle timeout.
async fn json_labelled_and_held_open(opening: &str) -> CompletionError {
    let answer = one_chunk_answer("200 OK", "application/json", opening);
    error_of(answer, opening).await.1
}

/// A 200 labelled JSON whose body opens as no JSON value (a gateway's sign-in page, its
/// connection held open) is refused as soon as its first bytes show it, as a body of another
/// type that opens as no stream is: not read on until the idle timeout, then reported as a
/// stall.
#[tokio::test]
async fn a_json_labelled_page_held_open_is_refused_at_once() {
    let page = "<!doctype html><html><body>Sign in</body></html>\n";
    let error = json_labelled_and_held_open(page).await;
    let message = error.to_string();
    assert!(
        matches!(error, CompletionError::Decode(_))
            && message.contains(&format!(
                "HTTP 200 OK: the server answered with JSON (at least {} bytes), not an event \
                 stream nor a chat completion",
                page.len()
            ))
            && !message.contains("Sign in"),
        "{message}"
    );
}

/// A host under `localhost` (RFC 6761) is this machine to the key's rule, so a key may go to
/// it over plain HTTP; the connection goes there too, to a loopback address, never to where a
/// resolver that asks DNS for the name (glibc without `nss-myhostname`) would send it.
#[tokio::test]
async fn a_localhost_name_is_reached_on_loopback_without_a_resolver() {
    let answer = sized_answer("200 OK", "text/event-stream", "", HI_STREAM.as_bytes());
    let base = serve_once(answer).await;
    let base = base.replace("127.0.0.1", "model.localhost");
    let model = OpenAiCompletion::new(OpenAiConfig {
        max_retries: 0,
        ..config(&base)
    })
    .unwrap();
    let completion = complete_hello(&model)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(completion.text, "hi");
}

/// A host whose first address never answers (a blackholed route: here a listener whose accept
/// queue is full, which drops every SYN) is connected to on its next one once the connect timeout
/// is spent, not after the whole request timeout: the connect timeout is the client's own
/// bound, shared among the addresses. The wait is bounded at 20 s, a hang guard only: the
/// request timeout is two minutes.
#[tokio::test]
async fn a_blackholed_address_gives_way_to_the_next_within_the_connect_timeout() {
    let answer = sized_answer("200 OK", "text/event-stream", "", HI_STREAM.as_bytes());
    let serving: std::net::SocketAddr = serve_once(answer)
        .await
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .parse()
        .unwrap();
    // Another loopback address on the same port, which accepts nothing: its queue of one is
    // full, so the kernel drops the SYNs that follow.
    let blackhole = std::net::SocketAddr::from(([127, 0, 0, 2], serving.port()));
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(blackhole).unwrap();
    let _listener = socket.listen(0).unwrap();
    let _queued = tokio::net::TcpStream::connect(blackhole).await.unwrap();

    let config = OpenAiConfig {
        max_retries: 0,
        request_timeout: Duration::from_secs(120),
        connect_timeout: Duration::from_millis(400),
        ..OpenAiConfig::new(format!("http://llm.test:{}/v1", serving.port()), "m")
    };
    let mut model = OpenAiCompletion::new(config.clone()).unwrap();
    // Both addresses of one family, the blackholed one first, as a resolver may list them.
    model.client = client_builder(config.connect_timeout)
        .unwrap()
        .resolve_to_addrs("llm.test", &[blackhole, serving])
        .build()
        .unwrap();
    let completion = tokio::time::timeout(Duration::from_secs(20), complete_hello(&model))
        .await
        .expect("connected to the next address once the connect timeout was spent")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(completion.text, "hi");
}

/// A connection that times out names the connect timeout and its length, as a request
/// timeout names its own, rather than passing on the HTTP client's wording. The address
/// accepts nothing (a listener whose accept queue is full drops every SYN); the wait is bounded
/// at 20 s, a hang guard only.
#[tokio::test]
async fn a_connect_timeout_names_its_limit() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(([127, 0, 0, 1], 0).into()).unwrap();
    let blackhole = socket.local_addr().unwrap();
    let _listener = socket.listen(0).unwrap();
    let _queued = tokio::net::TcpStream::connect(blackhole).await.unwrap();
    let model = OpenAiCompletion::new(OpenAiConfig {
        max_retries: 0,
        request_timeout: Duration::from_secs(120),
        connect_timeout: Duration::from_millis(300),
        ..config(&format!("http://{blackhole}/v1"))
    })
    .unwrap();
    let error = tokio::time::timeout(
        Duration::from_secs(20),
        model.complete(
            &hello(),
            &mut |_: CompletionDelta| {},
            &CancellationToken::new(),
        ),
    )
    .await
    .expect("the connect timeout ended the call")
    .unwrap_err();
    assert_eq!(
        error,
        CompletionError::Transport(format!(
            "POST http://{blackhole}/v1/chat/completions: no connection within 0.3 s \
             (connect timeout)"
        ))
    );
}

/// An error answer labelled `text/event-stream` (a server that reports its refusal as a
/// stream's error event) is named by the provider's message in its first event's JSON, read as
/// a JSON error body's is, and only to that event's end (a JSON error body under that label, to
/// where its value closes): the connection held open after it is
/// not waited on (the wait is bounded at 3 s, a hang guard only; the error body's read would
/// take 5 s).
#[tokio::test]
async fn an_event_stream_error_body_is_named_by_its_first_events_message() {
    for (body, shown) in [
        (
            ": ping\n\nevent: error\ndata: {\"error\":{\"message\":\"slow down\",\"type\":\"rate_limit\"}}\n\n",
            ": slow down (rate_limit)",
        ),
        (
            "data: {\"type\":\"error\",\"code\":\"busy\",\"message\":\"try later\"}\r\n\r\n",
            ": try later",
        ),
        // No JSON error in it: only the status is named, and the data is not quoted.
        ("data: upstream says no\n\n", ""),
        // A JSON error under the stream's label (a server that labels every answer to a
        // streamed request so) is read as a JSON body is, to where its value closes: no SSE
        // field opens with `{`.
        (
            "\u{feff} {\"error\":{\"message\":\"no such model\"}}\n",
            ": no such model",
        ),
    ] {
        let answer = one_chunk_answer("429 Too Many Requests", "text/event-stream", body);
        let (base, error) = error_of(answer, &format!("{body:?}")).await;
        assert_eq!(
            error.to_string(),
            format!(
                "transport error: POST {base}/chat/completions: HTTP 429 Too Many Requests{shown}"
            ),
            "{body:?}"
        );
    }
}

/// An error answer labelled `text/event-stream` whose body ends before the blank line that
/// would end its first event with data (a server that closes the connection after its error
/// event's last line, or mid-line) is named by that event's message all the same: a stream's
/// reader drops such an event, but it is what the server said.
#[tokio::test]
async fn an_event_stream_error_body_cut_before_its_blank_line_is_named_by_its_message() {
    for body in [
        "data: {\"error\":{\"message\":\"slow down\"}}",
        "data: {\"error\":{\"message\":\"slow down\"}}\n",
        ": ping\n\nevent: error\ndata: {\"error\":\r\ndata: {\"message\":\"slow down\"}}\r",
    ] {
        let answer = sized_answer(
            "429 Too Many Requests",
            "text/event-stream",
            "",
            body.as_bytes(),
        );
        let (base, error) = error_of(answer, &format!("{body:?}")).await;
        assert_eq!(
            error.to_string(),
            format!(
                "transport error: POST {base}/chat/completions: HTTP 429 Too Many Requests: slow down"
            ),
            "{body:?}"
        );
    }
}

/// A `Content-Encoding` is read as the list it is, over every field line it is sent on (a
/// proxy adds its own line after the server's): a body compressed on any of them is refused
/// (a 2xx) or not quoted (an error) and named by its codings, `identity` left out; one whose
/// codings are all `identity` (or empty) is read as sent.
#[tokio::test]
async fn every_content_encoding_line_is_read() {
    let error = r#"{"error":{"message":"slow down"}}"#;
    for (lines, shown) in [
        (
            "content-encoding: identity\r\ncontent-encoding: gzip\r\n",
            Some("gzip"),
        ),
        ("content-encoding: Identity, br\r\n", Some("br")),
        ("content-encoding: identity, identity\r\n", None),
        (
            "content-encoding: IDENTITY\r\ncontent-encoding: ,\r\n",
            None,
        ),
    ] {
        for (status, content_type, body) in [
            ("503 Service Unavailable", "application/json", error),
            ("200 OK", "text/event-stream", HI_STREAM),
        ] {
            let base = serve_once(sized_answer(status, content_type, lines, body.as_bytes())).await;
            let model = OpenAiCompletion::new(OpenAiConfig {
                max_retries: 0,
                ..OpenAiConfig::new(&base, "m")
            })
            .unwrap();
            let result = complete_hello(&model)
                .await
                .map(|completion| completion.text);
            let endpoint = format!("POST {base}/chat/completions");
            let expected = match (shown, status) {
                (Some(coding), "200 OK") => Err(format!(
                    "decode error: {endpoint}: HTTP 200 OK: the server compressed its answer \
                     (content-encoding: {coding}), though the request asked for none"
                )),
                (Some(coding), _) => Err(format!(
                    "transport error: {endpoint}: HTTP 503 Service Unavailable (its body \
                     compressed: {coding}, not read)"
                )),
                (None, "200 OK") => Ok("hi".to_owned()),
                (None, _) => Err(format!(
                    "transport error: {endpoint}: HTTP 503 Service Unavailable: slow down"
                )),
            };
            assert_eq!(
                result.map_err(|e| e.to_string()),
                expected,
                "{lines:?} {status}"
            );
        }
    }
}

/// A JSON-labelled body that opens with a byte JSON does not take as whitespace (a form feed,
/// which ASCII does) is read only as far as its first bytes, and its size is given as such:
/// not as the size of a body read whole.
#[tokio::test]
async fn a_json_labelled_body_cut_at_its_first_bytes_is_sized_so() {
    let opening = "\x0c{\"id\":";
    let error = json_labelled_and_held_open(opening).await;
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "the server answered with JSON (at least {} bytes)",
            opening.len()
        )),
        "{message}"
    );
}

/// An error answer whose body the server holds open, cut short (a JSON error before its value
/// closes, a text line before it ends; also under `text/event-stream`, as some gateways label
/// their errors), is read only for the error body's own short bound (the idle timeout, here
/// 0.3 s, at most 5 s) from its status, not until the request timeout (here 60 s): the status is
/// reported with what was read, the provider's message when it arrived whole, and the body said
/// to be cut. The wait is bounded at 20 s, a hang guard only.
#[tokio::test]
async fn an_error_body_held_open_is_read_only_briefly_and_said_cut() {
    let cut_json = r#"{"error":{"message":"model overloaded","type":"server_er"#;
    for (content_type, body, shown) in [
        ("application/json", cut_json, ": model overloaded"),
        ("text/event-stream", cut_json, ": model overloaded"),
        ("text/plain", "upstream busy", ": upstream busy"),
        // The message itself cut: not shown.
        ("application/json", r#"{"error":{"message":"model over"#, ""),
    ] {
        let answer = one_chunk_answer("500 Internal Server Error", content_type, body);
        let base = serve_once(answer).await;
        let model = OpenAiCompletion::new(OpenAiConfig {
            max_retries: 0,
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_millis(300),
            ..OpenAiConfig::new(&base, "m")
        })
        .unwrap();
        let error = tokio::time::timeout(Duration::from_secs(20), complete_hello(&model))
            .await
            .unwrap_or_else(|_| panic!("{content_type} {body:?}: read past the error body's bound"))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "transport error: POST {base}/chat/completions: HTTP 500 Internal Server Error \
                 (its body cut: not ended within 0.3 s){shown}"
            ),
            "{content_type} {body:?}"
        );
    }
}

/// An error body held open past the call's time limit, nearer than the error body's own bound,
/// is cut at that limit, and said so: not said to have had the error body's whole wait.
#[tokio::test]
async fn an_error_body_held_open_past_the_calls_limit_is_said_cut_there() {
    let body = r#"{"error":{"message":"model overloaded","type":"server_er"#;
    let answer = one_chunk_answer("500 Internal Server Error", "application/json", body);
    let base = serve_once(answer).await;
    let model = OpenAiCompletion::new(OpenAiConfig {
        max_retries: 0,
        request_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(60),
        max_call: Duration::from_millis(500),
        ..OpenAiConfig::new(&base, "m")
    })
    .unwrap();
    let error = tokio::time::timeout(Duration::from_secs(20), complete_hello(&model))
        .await
        .expect("read past the call's limit")
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "transport error: POST {base}/chat/completions: HTTP 500 Internal Server Error \
             (its body cut at the call's time limit of 0.5 s (llm.max_call_ms)): model overloaded"
        )
    );
}

/// A JSON error body cut before its value closes (the body ended early), sent under
/// `text/event-stream`, holds no SSE event: it is read as a JSON error body is, so its message,
/// which arrived whole, names the error, as it does under `application/json`; the body is said
/// to be cut.
#[tokio::test]
async fn a_cut_json_error_body_keeps_its_whole_message() {
    for content_type in ["text/event-stream", "application/json"] {
        let body = r#"{"error":{"message":"no such model","type":"invalid_request_err"#;
        let answer = sized_answer("404 Not Found", content_type, "", body.as_bytes());
        let (base, error) = error_of(answer, content_type).await;
        assert_eq!(
            error.to_string(),
            format!(
                "transport error: POST {base}/chat/completions: HTTP 404 Not Found \
                 (its body cut: it ended before its JSON value closed): no such model"
            ),
            "{content_type}"
        );
    }
}

/// An error body whose read stops before what is shown of it ends, other than by a server
/// holding it open, is said to be cut too, and why: its connection broke (a text line before it
/// ended, a JSON value before it closed, an event before its blank line), the body ended inside
/// its JSON value, or the read reached its bound. So a message cut away, leaving only the code,
/// or a line that may go on, is never shown as if it were all the server said. A body that ends
/// whole (a text line without a line break) is not cut.
#[tokio::test]
async fn an_error_body_cut_short_is_said_cut_and_why() {
    const BROKE: &str = " (its body cut: the connection broke)";
    const ENDED: &str = " (its body cut: it ended before its JSON value closed)";
    let code_only = r#"{"error":{"code":"rate_limit_exceeded","message":"slow d"#;
    let padded = format!(
        r#"{{"error":{{"message":"slow down","param":"{}"#,
        "x".repeat(MAX_ERROR_BODY_BYTES)
    );
    let cases: [(&str, &str, bool, &str); 10] = [
        (
            "text/plain",
            "upstream busy",
            true,
            &format!("{BROKE}: upstream busy"),
        ),
        ("text/plain", "upstream busy", false, ": upstream busy"),
        (
            "application/json",
            code_only,
            true,
            &format!("{BROKE}: rate_limit_exceeded"),
        ),
        (
            "application/json",
            code_only,
            false,
            &format!("{ENDED}: rate_limit_exceeded"),
        ),
        (
            "text/event-stream",
            code_only,
            false,
            &format!("{ENDED}: rate_limit_exceeded"),
        ),
        (
            "text/event-stream",
            "data: {\"error\":{\"message\":\"slow down\"}}",
            true,
            &format!("{BROKE}: slow down"),
        ),
        (
            "text/event-stream",
            &format!("data: {code_only}"),
            false,
            &format!("{ENDED}: rate_limit_exceeded"),
        ),
        ("application/json", "", true, BROKE),
        (
            "application/json",
            &padded,
            false,
            " (its body cut: not ended within 64 KiB): slow down",
        ),
        (
            "text/event-stream",
            &format!("data: {padded}"),
            false,
            " (its body cut: not ended within 64 KiB): slow down",
        ),
    ];
    for (content_type, body, broken, shown) in cases {
        let what = format!(
            "{content_type} {:?} broken: {broken}",
            &body[..body.len().min(60)]
        );
        let mut answer = sized_answer("429 Too Many Requests", content_type, "", body.as_bytes());
        if broken {
            // Sized past what is sent, then closed: the connection breaks mid-body.
            answer = sized_answer(
                "429 Too Many Requests",
                content_type,
                "",
                format!("{body}{}", " ".repeat(100)).as_bytes(),
            );
            answer.truncate(answer.len() - 100);
        }
        let base = serve_once_then_close(answer).await;
        let error = error_from(&base, &what).await;
        assert_eq!(
            error.to_string(),
            format!(
                "transport error: POST {base}/chat/completions: HTTP 429 Too Many Requests{shown}"
            ),
            "{what}"
        );
    }
}

/// A `text/plain` error body is shown by its first line unless it is a JSON error: one whose
/// line opens a bracket it never closes (`[error upstream timed out`) and then ends is whole,
/// all the server said, and not said to be cut, with or without a line break; one that is a JSON
/// error cut before its value closed, its message cut away and only its code shown, is.
#[tokio::test]
async fn a_text_body_opening_a_bracket_it_never_closes_is_not_said_cut() {
    let cases = [
        (
            "[error upstream timed out",
            ": [error upstream timed out".to_owned(),
        ),
        (
            "{upstream \"busy}\nretry later\n",
            ": {upstream \"busy}".to_owned(),
        ),
        (
            r#"{"error":{"code":"rate_limit_exceeded","message":"slow d"#,
            " (its body cut: it ended before its JSON value closed): rate_limit_exceeded"
                .to_owned(),
        ),
    ];
    for (body, shown) in cases {
        let answer = sized_answer("429 Too Many Requests", "text/plain", "", body.as_bytes());
        let base = serve_once_then_close(answer).await;
        let error = error_from(&base, &format!("{body:?}")).await;
        assert_eq!(
            error.to_string(),
            format!(
                "transport error: POST {base}/chat/completions: HTTP 429 Too Many Requests{shown}"
            ),
            "{body:?}"
        );
    }
}

/// An error body labelled `text/event-stream` whose first event with data ends (its blank line
/// came) is not said cut for what that data holds: a server's JSON that never closes in a whole
/// event is its own, not a body that ended early, and the body may go on (here it is held open).
/// Its message is still read as far as it is whole.
#[tokio::test]
async fn a_whole_event_holding_unclosed_json_is_not_said_cut() {
    let body = "data: {\"error\":{\"message\":\"slow down\"}\n\n";
    let answer = sized_answer(
        "429 Too Many Requests",
        "text/event-stream",
        "",
        format!("{body}: more to come").as_bytes(),
    );
    let base = serve_once(answer).await;
    let model = OpenAiCompletion::new(OpenAiConfig {
        max_retries: 0,
        ..OpenAiConfig::new(&base, "m")
    })
    .unwrap();
    let error = tokio::time::timeout(Duration::from_secs(3), complete_hello(&model))
        .await
        .expect("read to the event's end only")
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "transport error: POST {base}/chat/completions: HTTP 429 Too Many Requests: slow down"
        )
    );
}

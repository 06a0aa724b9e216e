//! Unit tests of the settings: reading `cogni.toml`, the environment and the flags, and the
//! checks made before a store or a workspace is opened.

use std::net::SocketAddr;
use std::path::Path;

use clap::Parser;

use super::{Overrides, Settings};
use crate::ServerToken;

const TOKEN: &str = "tok-9f8e7d6c5b4a";

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

fn with_token(token: &str) -> Settings {
    let mut settings = Settings::default();
    settings.server.token = Some(ServerToken::new(token));
    settings
}

/// Without a token, a loopback address serves and any other is refused in one line naming
/// the variable and the override.
#[test]
fn without_a_token_only_loopback_serves() {
    let settings = Settings::default();
    for loopback in [
        "127.0.0.1:8787",
        "127.1.2.3:0",
        "[::1]:8787",
        "[::ffff:127.0.0.1]:80",
    ] {
        settings
            .require_server_auth(addr(loopback))
            .unwrap_or_else(|e| panic!("{loopback}: {e}"));
    }
    for exposed in [
        "0.0.0.0:8787",
        "[::]:8787",
        "192.168.1.10:80",
        "[::ffff:10.0.0.1]:80",
    ] {
        let error = settings
            .require_server_auth(addr(exposed))
            .unwrap_err()
            .to_string();
        assert_eq!(error.lines().count(), 1, "{error}");
        assert!(
            error.starts_with("server.listen: ")
                && error.contains("COGNI_SERVER_TOKEN")
                && error.contains("server.allow_unauthenticated = true"),
            "{exposed}: {error}"
        );
    }
}

/// `localhost:PORT` is loopback (IPv4), in any case, without a resolver; another host name
/// is refused, saying what is taken.
#[test]
fn listen_takes_localhost_as_loopback_and_refuses_other_host_names() {
    let mut settings = Settings::default();
    for (listen, expected) in [
        ("localhost:8787", "127.0.0.1:8787"),
        ("LocalHost:0", "127.0.0.1:0"),
        ("127.0.0.1:9000", "127.0.0.1:9000"),
        ("[::1]:9000", "[::1]:9000"),
    ] {
        settings.server.listen = listen.into();
        assert_eq!(settings.listen_addr().unwrap(), addr(expected), "{listen}");
    }
    settings.server.listen = "localhost:http".into();
    assert_eq!(
        settings.listen_addr().unwrap_err().to_string(),
        "server.listen: `localhost:http` does not end in a port from 0 to 65535 (invalid \
         digit found in string)"
    );
    settings.server.listen = "example.com:8787".into();
    assert_eq!(
        settings.listen_addr().unwrap_err().to_string(),
        "server.listen: `example.com:8787` is not an address like 127.0.0.1:8787 or \
         localhost:8787 (an IP address, or localhost, and a port; other host names are not \
         resolved) (invalid socket address syntax)"
    );
}

#[test]
fn the_override_or_a_token_serves_on_any_address() {
    let mut settings = Settings::default();
    settings.server.allow_unauthenticated = true;
    settings.require_server_auth(addr("0.0.0.0:8787")).unwrap();
    let settings = with_token(TOKEN);
    settings.require_server_auth(addr("0.0.0.0:8787")).unwrap();
    settings
        .require_server_auth(addr("127.0.0.1:8787"))
        .unwrap();
}

/// A token no client could send is refused, without quoting it.
#[test]
fn a_token_that_cannot_be_sent_is_refused_without_being_shown() {
    let token = "tok with spaces";
    let error = with_token(token)
        .require_server_auth(addr("127.0.0.1:8787"))
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("COGNI_SERVER_TOKEN: "), "{error}");
    assert!(!error.contains(token), "{error}");
}

/// The token comes only from its override (clap's `COGNI_SERVER_TOKEN`, which refuses an
/// empty one: `config.rs`'s `an_empty_server_token_is_refused_rather_than_read_as_none`).
#[test]
fn the_token_comes_from_the_override() {
    let mut settings = Settings::default();
    settings.apply(Overrides {
        server_token: Some(ServerToken::new(TOKEN)),
        ..Overrides::default()
    });
    assert!(settings.server.token.as_ref().unwrap().matches(TOKEN));
    settings.apply(Overrides::default());
    assert!(settings.server.token.is_none());
}

/// Written into the config file, the token is refused without being shown; the override
/// is a setting of `[server]`, off by default.
#[test]
fn the_config_file_holds_the_override_never_the_token() {
    let error = Settings::from_toml_str(&format!("[server]\ntoken = \"{TOKEN}\"\n"))
        .unwrap_err()
        .to_string();
    assert!(!error.contains(TOKEN), "{error}");
    assert!(
        error.contains("line 2") && error.contains("COGNI_SERVER_TOKEN"),
        "{error}"
    );
    assert!(!Settings::default().server.allow_unauthenticated);
    let settings = Settings::from_toml_str("[server]\nallow_unauthenticated = true\n").unwrap();
    assert!(settings.server.allow_unauthenticated);
    assert!(settings.server.token.is_none());
}

/// A malformed tool id in an inline `[tools.policy]`, written as a table header, a key of
/// `retry_per_tool`'s table or a dotted key, is named by its place (its line, and its
/// position among `retry_per_tool`'s keys), as the policy loaders name it, never quoted.
#[test]
fn a_bad_tool_id_in_the_inline_policy_is_named_by_its_place() {
    for (text, line) in [
        (
            "[tools.policy.retry_per_tool.\"sk-SECRET id\"]\nmax_attempts = 2\n",
            1,
        ),
        (
            "[tools]\nenabled = []\n\n[tools.policy.retry_per_tool.core__ok]\n\
             max_attempts = 2\n[tools.policy.retry_per_tool.\"sk-SECRET\"]\nmax_attempts = 2\n",
            6,
        ),
        (
            "[tools.policy.retry_per_tool]\n\"sk-SECRET\" = { max_attempts = 2 }\n",
            2,
        ),
        (
            "[tools.policy]\nretry_per_tool.\"sk-SECRET\".max_attempts = 2\n",
            2,
        ),
        (
            "[tools]\npolicy.retry_per_tool.\"sk-SECRET\" = { max_attempts = 2 }\n",
            2,
        ),
        (
            "tools.policy.retry_per_tool = { \"sk-SECRET\" = { max_attempts = 2 } }\n",
            1,
        ),
    ] {
        let error = Settings::from_toml_str(text).unwrap_err().to_string();
        assert!(!error.contains("SECRET"), "{text:?}: {error}");
        let key = if line == 6 { 2 } else { 1 };
        assert!(
            error.starts_with(&format!(
                "line {line}: `retry_per_tool` key {key} is not a valid tool id: "
            )),
            "{text:?}: {error}"
        );
    }
}

/// The slow-client limits are `[server]` settings whose defaults are the server's and the
/// example's; a count or size of 0, or a value of the wrong type, is refused in one line
/// naming its key and what it takes, in plain words (it said `a nonzero usize`, `u64`); a
/// whole number past what the count holds is called too large (not "expected a whole number,
/// at least 1"); a grace of 0 (no grace: cut at once) is taken.
#[test]
fn the_slow_client_limits_are_server_settings() {
    use crate::server::{
        DEFAULT_MAX_UNSENT_BYTES, DEFAULT_MAX_UNSENT_EVENTS, DEFAULT_SLOW_CLIENT_GRACE,
    };
    let defaults = |server: &super::ServerSettings| {
        assert_eq!(server.max_unsent_events.get(), DEFAULT_MAX_UNSENT_EVENTS);
        assert_eq!(
            u128::from(server.slow_client_grace_ms),
            DEFAULT_SLOW_CLIENT_GRACE.as_millis()
        );
        assert_eq!(server.max_unsent_bytes.get(), DEFAULT_MAX_UNSENT_BYTES);
    };
    defaults(&Settings::default().server);
    defaults(
        &Settings::from_toml_str(super::EXAMPLE_CONFIG)
            .unwrap()
            .server,
    );
    let set = Settings::from_toml_str(
        "[server]\nmax_unsent_events = 1\nslow_client_grace_ms = 0\nmax_unsent_bytes = 1\n",
    )
    .unwrap();
    assert_eq!(
        (
            set.server.max_unsent_events.get(),
            set.server.slow_client_grace_ms,
            set.server.max_unsent_bytes.get()
        ),
        (1, 0, 1)
    );
    let count = "expected a whole number, at least 1";
    let grace = "expected a whole number of milliseconds, 0 or more";
    for (table, key, value, expected) in [
        ("server", "max_unsent_events", "0", count),
        ("server", "max_unsent_bytes", "0", count),
        ("server", "max_concurrent_runs", "0", count),
        ("agent", "max_steps", "0", count),
        ("agent", "max_parallel_tools", "0", count),
        ("server", "max_unsent_events", "-1", count),
        ("server", "slow_client_grace_ms", "-1", grace),
        ("server", "slow_client_grace_ms", "\"10s\"", grace),
        ("server", "max_unsent_bytes", "99999999999999999999", ""),
        // A whole number past what the count holds is not called anything else.
        (
            "agent",
            "max_steps",
            "4294967296",
            "4294967296 is too large",
        ),
    ] {
        let error = Settings::from_toml_str(&format!("[{table}]\n{key} = {value}\n"))
            .unwrap_err()
            .to_string();
        assert_eq!(error.lines().count(), 1, "{error}");
        assert!(
            error.starts_with(&format!("line 2 (`{key} = …`): ")) && error.ends_with(expected),
            "{key} = {value}: {error}"
        );
    }
}

/// A span inside a multi-byte character (or past the text) names the line it falls in
/// instead of panicking. The TOML parser gives spans on character boundaries, so the test
/// hands the span in directly.
#[test]
fn an_error_span_inside_a_character_names_its_line() {
    let text = "[llm]\napi_key = \"é\"\n";
    let inside = text.find('é').unwrap() + 1;
    assert!(!text.is_char_boundary(inside));
    let error = super::describe_toml_error(text, "invalid", Some(inside..inside + 1));
    assert_eq!(
        error.to_string(),
        "line 2: the API key is never read from a config file; set COGNI_LLM_API_KEY instead"
    );
    let text = "model = \"ü\"\n";
    let inside = text.find('ü').unwrap() + 1;
    let error = super::describe_toml_error(text, "bad model", Some(inside..inside));
    assert_eq!(error.to_string(), "line 1 (`model = …`): bad model");
    let past = super::describe_toml_error(text, "bad", Some(100..101));
    assert!(past.to_string().starts_with("line 2"), "{past}");
}

/// A number too large for its key's type is refused naming the line and the key, never the
/// number.
#[test]
fn a_number_too_large_is_refused_naming_its_key() {
    let error = Settings::from_toml_str("[llm]\nidle_timeout_ms = 99999999999999999999\n")
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("line 2 (`idle_timeout_ms = …`): "),
        "{error}"
    );
    assert!(!error.contains("9999"), "{error}");
}

/// `llm.max_call_ms` bounds a whole model call: 10 minutes unless set, as the example
/// shows; 0 is refused naming the key; a value set reaches the adapter's config.
#[test]
fn the_model_call_limit_is_a_setting_of_the_adapter() {
    assert_eq!(Settings::default().llm.max_call_ms, 600_000);
    let example = Settings::from_toml_str(super::EXAMPLE_CONFIG).unwrap();
    assert_eq!(
        example.llm.max_call_ms, 600_000,
        "the example shows the default"
    );
    let zero = Settings::from_toml_str("[llm]\nmax_call_ms = 0\n").unwrap();
    let error = zero.validate().unwrap_err().to_string();
    assert!(
        error.starts_with("llm.max_call_ms: must be above 0"),
        "{error}"
    );
    let set = Settings::from_toml_str("[llm]\nmax_call_ms = 90000\n").unwrap();
    set.validate().unwrap();
    let config = crate::compose::openai_config(&set.llm);
    assert_eq!(config.max_call, std::time::Duration::from_secs(90));
    assert!(format!("{:?}", set.llm).contains("max_call_ms: 90000"));
}

/// A base URL the adapter takes (whitespace around it, a scheme in capitals) passes the
/// check; one with credentials is refused whatever the scheme's case, never shown.
#[test]
fn the_base_url_is_checked_as_the_adapter_reads_it() {
    for url in [
        " https://api.openai.com/v1",
        "https://api.openai.com/v1\n",
        "HTTPS://api.openai.com/v1",
        "Http://localhost:11434/v1/",
    ] {
        let mut settings = Settings::default();
        settings.llm.base_url = url.into();
        settings.llm.model = "m".into();
        settings
            .validate()
            .unwrap_or_else(|e| panic!("{url:?}: {e}"));
        crate::create_completion(&settings.llm).unwrap_or_else(|e| panic!("{url:?}: {e}"));
    }
    for url in [
        "HTTPS://user:pw-canary@h/v1",
        "https://pw-canary@h",
        "https://user:pw-canary@h?q=1",
        // A password with an unencoded `/` ends the authority before its `@`.
        "https://user:pw/canary@h/v1",
    ] {
        let mut settings = Settings::default();
        settings.llm.base_url = url.into();
        let error = settings.validate().unwrap_err().to_string();
        assert!(
            error.contains("must not carry credentials") && !error.contains("canary"),
            "{url}: {error}"
        );
    }
}

/// An `@` past the URL's authority (in its path or query, as a gateway may name an
/// organisation) is no credential: the URL is taken, as the adapter takes it, and shown
/// without the segment that is no plain name. (After a host and port it may end a password,
/// and is refused: see the next test.)
#[test]
fn an_at_sign_in_the_base_urls_path_or_query_is_not_a_credential() {
    for url in [
        "https://gw.example/v1/@org",
        "https://gw.example:8443/v1/%40org",
        "https://[::1]/v1/@org",
        "https://gw.example/v1?team=@org",
        "https://gw.example\\v1/@org",
    ] {
        let mut settings = Settings::default();
        settings.llm.base_url = url.into();
        settings.llm.model = "m".into();
        settings
            .validate()
            .unwrap_or_else(|e| panic!("{url:?}: {e}"));
        crate::create_completion(&settings.llm).unwrap_or_else(|e| panic!("{url:?}: {e}"));
    }
    assert_eq!(
        adapters::shown_url("https://gw.example/v1/@org"),
        "https://gw.example/v1/***"
    );
}

/// The base-URL check and `adapters::shown_url` read the authority alike: a URL the check
/// refuses as carrying credentials has its host hidden, and one it takes has its host and
/// port shown. A host and port followed by an `@` may be a user name and the start of a
/// password (`user:123/ss@host`), so it is refused and hidden, even in the query.
#[test]
fn the_base_url_check_and_the_shown_url_agree_on_the_authority() {
    for (url, credentials) in [
        ("http://host:8000/v1?x=a@b", true),
        ("https://gw.example:8443/v1/@org", true),
        ("https://[::1]:8443/v1?to=a@b", true),
        ("https://user:123/ss@gw.example/v1", true),
        ("https://gw.example/v1/@org", false),
        ("https://[::1]/v1?to=a@b", false),
        ("http://host:8000/v1?x=a%40b", false),
        ("https://user:pa/ss@gw.example/v1", true),
        ("https://user:65536/ss@gw.example/v1", true),
        ("https://user:pa?ss@gw.example/v1", true),
        ("https://user:pw@gw.example/v1", true),
        ("https://user:pa]ss/x@gw.example/v1", true),
        ("https://[user:pa]ss/x@gw.example/v1", true),
        ("https://[user:pa]/x@gw.example/v1", true),
    ] {
        let mut settings = Settings::default();
        settings.llm.base_url = url.into();
        settings.llm.model = "m".into();
        let refused = settings
            .validate()
            .is_err_and(|e| e.to_string().contains("must not carry credentials"));
        assert_eq!(refused, credentials, "{url}");
        let shown = adapters::shown_url(url);
        let host = url
            .split("://")
            .nth(1)
            .unwrap()
            .split(['/', '?'])
            .next()
            .unwrap();
        if credentials {
            assert!(!shown.contains("user"), "{url}: {shown}");
        } else {
            assert!(
                shown.starts_with(&format!("{}://{host}", &url[..url.find(':').unwrap()])),
                "{url}: {shown}"
            );
        }
    }
}

/// A key over plain http to a host that is not loopback is refused at the adapter's
/// construction, the error naming the setting to fix and the opt-in; `llm.allow_key_over_http`
/// (off in the example) lets it start; a loopback host never needs it.
#[test]
fn a_key_over_plain_http_to_another_host_needs_the_opt_in() {
    let example = Settings::from_toml_str(super::EXAMPLE_CONFIG).unwrap();
    assert!(
        !example.llm.allow_key_over_http,
        "the example shows the default"
    );
    let with_key = |text: &str| {
        let mut settings = Settings::from_toml_str(text).unwrap();
        settings.validate().unwrap();
        settings.llm.api_key = Some(ai_core::Secret::new("sk-canary-0123"));
        settings
    };
    let remote = with_key("[llm]\nmodel = \"m\"\nbase_url = \"http://gpu-box:4000/v1\"\n");
    let error = format!("{:#}", crate::create_completion(&remote.llm).err().unwrap());
    assert!(
        error.starts_with("llm.base_url: ")
            && error.contains("llm.allow_key_over_http")
            && !error.contains("sk-canary"),
        "{error}"
    );
    let allowed = with_key(
        "[llm]\nmodel = \"m\"\nbase_url = \"http://gpu-box:4000/v1\"\nallow_key_over_http = true\n",
    );
    assert!(crate::compose::openai_config(&allowed.llm).allow_key_over_http);
    assert!(format!("{:?}", allowed.llm).contains("allow_key_over_http: true"));
    crate::create_completion(&allowed.llm).unwrap();
    let local = with_key("[llm]\nmodel = \"m\"\nbase_url = \"http://localhost:4000/v1\"\n");
    crate::create_completion(&local.llm).unwrap();
}

/// `llm.stateless_reasoning` is off unless set, as the example shows; set, it reaches the
/// adapter's config with the Responses wire, and is refused naming the key with chat.
#[test]
fn stateless_reasoning_is_a_responses_setting_of_the_adapter() {
    assert!(!Settings::default().llm.stateless_reasoning);
    let example = Settings::from_toml_str(super::EXAMPLE_CONFIG).unwrap();
    assert!(
        !example.llm.stateless_reasoning,
        "the example shows the default"
    );
    assert!(!crate::compose::openai_config(&example.llm).stateless_reasoning);
    let set = Settings::from_toml_str("[llm]\nwire = \"responses\"\nstateless_reasoning = true\n")
        .unwrap();
    set.validate().unwrap();
    assert!(crate::compose::openai_config(&set.llm).stateless_reasoning);
    assert!(format!("{:?}", set.llm).contains("stateless_reasoning: true"));
    let chat = Settings::from_toml_str("[llm]\nstateless_reasoning = true\n").unwrap();
    let error = chat.validate().unwrap_err().to_string();
    assert!(
        error.starts_with("llm.stateless_reasoning: needs wire = \"responses\""),
        "{error}"
    );
}

/// The four model-call clocks have overrides (`--llm-*-ms`, `COGNI_LLM_*_MS`) that replace
/// the config file's values, and an unset one keeps them; the adapter is given each.
#[test]
fn the_llm_timeouts_have_overrides() {
    use std::time::Duration;
    let clocks = |llm: &super::LlmSettings| {
        (
            llm.request_timeout_ms,
            llm.connect_timeout_ms,
            llm.idle_timeout_ms,
            llm.max_call_ms,
        )
    };
    let mut settings = Settings::from_toml_str(
        "[llm]\nrequest_timeout_ms = 1\nconnect_timeout_ms = 4\nidle_timeout_ms = 2\n\
         max_call_ms = 3\n",
    )
    .unwrap();
    settings.apply(Overrides::default());
    assert_eq!(clocks(&settings.llm), (1, 4, 2, 3));
    settings.apply(Overrides {
        llm_request_timeout_ms: Some(10),
        llm_connect_timeout_ms: Some(40),
        llm_idle_timeout_ms: Some(20),
        llm_max_call_ms: Some(30),
        ..Overrides::default()
    });
    assert_eq!(clocks(&settings.llm), (10, 40, 20, 30));
    let config = crate::compose::openai_config(&settings.llm);
    assert_eq!(
        (
            config.request_timeout,
            config.connect_timeout,
            config.idle_timeout,
            config.max_call
        ),
        (
            Duration::from_millis(10),
            Duration::from_millis(40),
            Duration::from_millis(20),
            Duration::from_millis(30)
        )
    );
    let cli = crate::cli::Cli::try_parse_from([
        "cogni",
        "serve",
        "--llm-request-timeout-ms",
        "100",
        "--llm-connect-timeout-ms",
        "400",
        "--llm-idle-timeout-ms",
        "200",
        "--llm-max-call-ms",
        "300",
    ])
    .unwrap();
    let crate::cli::Command::Serve { overrides } = cli.command else {
        panic!("not serve: {cli:?}");
    };
    assert_eq!(
        (
            overrides.llm_request_timeout_ms,
            overrides.llm_connect_timeout_ms,
            overrides.llm_idle_timeout_ms,
            overrides.llm_max_call_ms
        ),
        (Some(100), Some(400), Some(200), Some(300))
    );
}

/// `llm.connect_timeout_ms` defaults to the adapter's own bound, and zero is refused naming
/// the key.
#[test]
fn the_connect_timeout_defaults_to_the_adapters_and_is_above_zero() {
    let settings = Settings::default();
    assert_eq!(
        crate::compose::openai_config(&settings.llm).connect_timeout,
        adapters::OpenAiConfig::new("http://localhost", "m").connect_timeout
    );
    let zero = Settings::from_toml_str("[llm]\nmodel = \"m\"\nconnect_timeout_ms = 0\n").unwrap();
    let error = zero.validate().unwrap_err().to_string();
    assert!(
        error.starts_with("llm.connect_timeout_ms: must be above 0"),
        "{error}"
    );
}

/// `tools.workspace_hidden` is off unless the config file, `COGNI_WORKSPACE_HIDDEN` or
/// `--workspace-hidden` turns it on (an override may turn it off again), and the workspace
/// the settings build shows hidden entries only then.
#[tokio::test]
async fn hidden_workspace_entries_are_shown_only_when_set() {
    assert!(!Settings::default().tools.workspace_hidden);
    let example = Settings::from_toml_str(super::EXAMPLE_CONFIG).unwrap();
    assert!(
        !example.tools.workspace_hidden,
        "the example shows the default"
    );
    let mut settings = Settings::from_toml_str("[tools]\nworkspace_hidden = true\n").unwrap();
    assert!(settings.tools.workspace_hidden);
    settings.apply(Overrides::default());
    assert!(
        settings.tools.workspace_hidden,
        "unset keeps the file's value"
    );
    settings.apply(Overrides {
        workspace_hidden: Some(false),
        ..Overrides::default()
    });
    assert!(!settings.tools.workspace_hidden);
    for (args, expected) in [
        (&["cogni", "serve"][..], None),
        (&["cogni", "serve", "--workspace-hidden"][..], Some(true)),
        (
            &["cogni", "serve", "--workspace-hidden=false"][..],
            Some(false),
        ),
        (
            &["cogni", "chat", "--workspace-hidden", "hi"][..],
            Some(true),
        ),
    ] {
        let overrides = overrides_of(args);
        assert_eq!(overrides.workspace_hidden, expected, "{args:?}");
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join(".env"), "KEY=x").unwrap();
    for shown in [false, true] {
        let mut settings = Settings::default();
        settings.tools.workspace = root.path().to_path_buf();
        settings.tools.workspace_hidden = shown;
        let caps = crate::create_capabilities(&settings.workspace_config()).unwrap();
        let read = caps.workspace.read(".env").await;
        match shown {
            true => assert_eq!(read.unwrap(), "KEY=x"),
            false => assert!(
                matches!(read, Err(ai_core::WorkspaceError::Hidden { .. })),
                "{read:?}"
            ),
        }
    }
}

/// With the workspace the config file's folder, the tools cannot reach the app's own files:
/// the config file, the policy file and the data folder are refused as `Reserved` and left
/// out of listings; the rest of the folder is there.
#[tokio::test]
async fn the_apps_own_files_are_out_of_the_workspaces_reach() {
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("app.toml");
    std::fs::write(
        &config,
        "data_dir = \"data\"\n[tools]\nworkspace = \".\"\npolicy_file = \"policy.toml\"\n",
    )
    .unwrap();
    std::fs::write(root.path().join("policy.toml"), "").unwrap();
    std::fs::create_dir(root.path().join("data")).unwrap();
    std::fs::write(root.path().join("data/cogni.db"), "runs").unwrap();
    std::fs::write(root.path().join("notes.txt"), "hi").unwrap();
    let settings = Settings::read(&Overrides {
        config: Some(config),
        ..Overrides::default()
    })
    .unwrap();
    let caps = settings.capabilities().unwrap();
    for path in ["app.toml", "policy.toml", "data/cogni.db"] {
        let read = caps.workspace.read(path).await;
        assert!(
            matches!(read, Err(ai_core::WorkspaceError::Reserved { .. })),
            "{path}: {read:?}"
        );
        let write = caps.workspace.write(path, "x").await;
        assert!(
            matches!(write, Err(ai_core::WorkspaceError::Reserved { .. })),
            "{path}: {write:?}"
        );
    }
    let listed = caps.workspace.list(".").await.unwrap().entries;
    let names: Vec<_> = listed.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(names, ["notes.txt"]);
    assert_eq!(caps.workspace.read("notes.txt").await.unwrap(), "hi");
}

/// A workspace that is the data folder, or a folder inside it, is refused naming both keys:
/// the data folder is kept out of the tools' reach only where it lies inside the
/// workspace, so a workspace inside it would show the tools its blobs (other
/// conversations), and one that is it would refuse every call. A workspace beside it, or
/// holding it, is bound.
#[test]
fn a_workspace_in_the_data_folder_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    std::fs::create_dir_all(data.join("blobs/ab")).unwrap();
    std::fs::write(data.join("blobs/ab/cd"), "another conversation").unwrap();
    std::fs::create_dir(root.path().join("notes")).unwrap();
    let settings = |workspace: &Path, data_dir: &Path| {
        let mut settings = Settings::default();
        settings.tools.workspace = workspace.to_path_buf();
        settings.data_dir = Some(data_dir.to_path_buf());
        settings
    };
    for workspace in [
        data.clone(),
        data.join("blobs"),
        data.join("blobs/../blobs/ab"),
    ] {
        let error = format!(
            "{:#}",
            settings(&workspace, &data).capabilities().unwrap_err()
        );
        assert!(
            error.starts_with("tools.workspace: ")
                && error.contains("data_dir")
                && error.contains("outside it"),
            "{}: {error}",
            workspace.display()
        );
    }
    // Named in another ASCII case, as a file system that ignores case would open it.
    let upper = root.path().join("DATA");
    if std::fs::metadata(&upper).is_ok() {
        assert!(
            settings(&data.join("blobs"), &upper)
                .capabilities()
                .is_err()
        );
    }
    for workspace in [root.path().to_path_buf(), root.path().join("notes")] {
        settings(&workspace, &data).capabilities().unwrap();
    }
    // A data folder not made yet holds no folder: nothing to refuse.
    settings(
        &root.path().join("notes"),
        &root.path().join("notes/new-data"),
    )
    .capabilities()
    .unwrap();
}

/// A data folder whose names are not all made yet is placed where the store's open makes it:
/// a `..` after a missing folder climbs back from the folder made for it, so `notes/new/..` is
/// `notes` itself and `notes/new/../..` holds it. Both were let through, since the kernel
/// cannot resolve them before `new` exists, and `cogni tools call` (which makes the data folder
/// only to keep its statistics, after the call) ran the tools in the data folder.
#[test]
fn a_data_folder_not_made_yet_is_placed_as_it_will_be_made() {
    let root = tempfile::tempdir().unwrap();
    let notes = root.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    let settings = |data_dir: &str| {
        let mut settings = Settings::default();
        settings.tools.workspace = notes.clone();
        settings.data_dir = Some(notes.join(data_dir));
        settings
    };
    for data_dir in ["new/..", "new/deeper/../../..", "new/../../NOTES"] {
        let error = format!("{:#}", settings(data_dir).capabilities().unwrap_err());
        assert!(
            error.starts_with("tools.workspace: ") && error.contains("data_dir"),
            "{data_dir}: {error}"
        );
    }
    for data_dir in ["new/../data", "new/deeper/.."] {
        settings(data_dir).capabilities().unwrap();
    }
    assert!(!notes.join("new").exists(), "the check made a folder");
    // Where the store's open makes it: `new` is made, and `new/..` is `notes`.
    let made = notes.join("new/..");
    adapters::create_private_dir(&made).unwrap();
    assert_eq!(
        std::fs::canonicalize(made).unwrap(),
        std::fs::canonicalize(&notes).unwrap()
    );
}

/// `tools.trace_redacted_results` is off unless the config file, `COGNI_TRACE_REDACTED_RESULTS`
/// or `--trace-redacted-results` turns it on (an override may turn it off again), and the
/// runtime's runner, the one its agent runs tools with, is configured by it.
#[test]
fn tracing_redacted_results_is_off_unless_set_and_reaches_the_runner() {
    let runner_traces = |settings: &Settings| {
        let completion = crate::create_completion(&settings.llm).unwrap();
        let runtime = crate::Runtime::build(settings, completion).unwrap();
        runtime.runner.config().trace_redacted_results
    };
    let mut settings = Settings::default();
    settings.llm.model = "m".into();
    assert!(!settings.tools.trace_redacted_results);
    assert!(!runner_traces(&settings));
    let example = Settings::from_toml_str(super::EXAMPLE_CONFIG).unwrap();
    assert!(
        !example.tools.trace_redacted_results,
        "the example shows the default"
    );
    let mut settings =
        Settings::from_toml_str("[llm]\nmodel = \"m\"\n[tools]\ntrace_redacted_results = true\n")
            .unwrap();
    settings.apply(Overrides::default());
    assert!(
        settings.tools.trace_redacted_results,
        "unset keeps the file's value"
    );
    assert!(runner_traces(&settings));
    settings.apply(Overrides {
        trace_redacted_results: Some(false),
        ..Overrides::default()
    });
    assert!(!runner_traces(&settings));
    for (args, expected) in [
        (&["cogni", "serve"][..], None),
        (
            &["cogni", "serve", "--trace-redacted-results"][..],
            Some(true),
        ),
        (
            &["cogni", "serve", "--trace-redacted-results=false"][..],
            Some(false),
        ),
        (
            &["cogni", "chat", "--trace-redacted-results", "hi"][..],
            Some(true),
        ),
    ] {
        let overrides = overrides_of(args);
        assert_eq!(overrides.trace_redacted_results, expected, "{args:?}");
    }
}

/// A `tools.enabled` entry that is no tool id (a secret pasted in the list, say) is named
/// by its position and the rule it breaks, never quoted, as a policy's `allowed_tools`
/// entry is; a well-formed id that is no core tool is named (the operator's own text, a
/// typo to fix), and so is a core tool listed twice.
#[test]
fn a_tools_enabled_entry_that_is_no_tool_id_is_named_by_its_place() {
    let error = |text: &str| {
        let settings = Settings::from_toml_str(text).unwrap();
        settings.core_tools().unwrap_err().to_string()
    };
    for (text, expected) in [
        (
            "[tools]\nenabled = [\"core__get_current_time\", \"sk-live SECRET\"]\n",
            "tools.enabled: entry 2 is not a valid tool id: only [a-zA-Z0-9_-] are allowed",
        ),
        (
            "[tools]\nenabled = [\"sk-live SECRET\", \"sk-live SECRET\"]\n",
            "tools.enabled: entry 1 is not a valid tool id: only [a-zA-Z0-9_-] are allowed",
        ),
        (
            "[tools]\nenabled = [\"SECRETabc123\"]\n",
            "tools.enabled: entry 1 is not a valid tool id: the namespace must be core__ or \
             mcp__<server>__",
        ),
    ] {
        let error = error(text);
        assert!(!error.contains("SECRET"), "{text:?}: {error}");
        assert!(error.starts_with(expected), "{text:?}: {error}");
        assert!(
            error.contains("(known: core__get_current_time, "),
            "{error}"
        );
    }
    assert!(
        error("[tools]\nenabled = [\"core__teleport\"]\n")
            .starts_with("tools.enabled: unknown tool `core__teleport` (known: ")
    );
    assert_eq!(
        error("[tools]\nenabled = [\"core__workspace_read\", \"core__workspace_read\"]\n"),
        "tools.enabled: `core__workspace_read` is listed twice"
    );
}

/// No `Debug` of the settings or the overrides shows the token.
#[test]
fn the_token_is_not_in_the_debug_of_the_settings() {
    let settings = with_token(TOKEN);
    let overrides = Overrides {
        server_token: Some(ServerToken::new(TOKEN)),
        ..Overrides::default()
    };
    for shown in [
        format!("{settings:?}"),
        format!("{settings:#?}"),
        format!("{:?}", settings.server),
        format!("{overrides:?}"),
    ] {
        assert!(!shown.contains(TOKEN), "{shown}");
        assert!(shown.contains("ServerToken([redacted])"), "{shown}");
    }
}

/// The overrides `cogni serve` or `cogni chat` reads from the command line `args`.
fn overrides_of(args: &[&str]) -> Overrides {
    match crate::cli::Cli::try_parse_from(args).unwrap().command {
        crate::cli::Command::Serve { overrides } => overrides,
        crate::cli::Command::Chat { overrides, .. } => overrides,
        other => panic!("{other:?}"),
    }
}

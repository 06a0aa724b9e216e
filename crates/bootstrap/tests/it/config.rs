//! Settings: a bad config is refused at start, naming the key and the reason.

use std::path::Path;
use std::process::Output;

const VARS: &[&str] = &[
    "COGNI_CONFIG",
    "COGNI_LLM_BASE_URL",
    "COGNI_LLM_MODEL",
    "COGNI_LLM_WIRE",
    "COGNI_LLM_STATELESS_REASONING",
    "COGNI_LLM_REQUEST_TIMEOUT_MS",
    "COGNI_LLM_CONNECT_TIMEOUT_MS",
    "COGNI_LLM_IDLE_TIMEOUT_MS",
    "COGNI_LLM_MAX_CALL_MS",
    "COGNI_LLM_API_KEY",
    "COGNI_LISTEN",
    "COGNI_POLICY",
    "COGNI_WORKSPACE",
    "COGNI_WORKSPACE_HIDDEN",
    "COGNI_TRACE_REDACTED_RESULTS",
    "COGNI_DATA_DIR",
    "COGNI_SERVER_TOKEN",
];

/// Runs `cogni` in `dir` with no COGNI_* variables but `env`.
fn cogni_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = crate::cogni_command();
    command.current_dir(dir).args(args);
    command.envs(env.iter().copied());
    command.output().expect("the cogni binary runs")
}

fn refused(output: &Output) -> String {
    assert!(!output.status.success(), "expected a refusal");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    stderr
}

#[test]
fn the_example_config_is_valid_and_documents_every_variable() {
    let dir = tempfile::tempdir().unwrap();
    let output = cogni_in(dir.path(), &["config-example"], &[]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let settings = bootstrap::Settings::from_toml_str(&text).unwrap();
    settings.validate().unwrap();
    settings.require_model().unwrap();
    for var in VARS {
        assert!(text.contains(var), "{var} is not documented");
    }
}

/// A misspelled `COGNI_*` variable is refused, as an unknown key of `cogni.toml` is, naming it
/// and the closest variable cogni reads, never its value; before, it was ignored and its setting
/// left at the default. Every variable cogni reads is taken (`VARS`, set to values that parse).
#[test]
fn an_unknown_variable_is_named_with_the_closest_one() {
    let dir = tempfile::tempdir().unwrap();
    let output = cogni_in(
        dir.path(),
        &["tools", "list"],
        &[("COGNI_LLM_MODLE", "secret-ZQX")],
    );
    let stderr = refused(&output);
    assert_eq!(
        stderr.trim_end(),
        "error: unknown variable COGNI_LLM_MODLE (did you mean COGNI_LLM_MODEL?): cogni reads \
         no such variable; unset it or correct its name"
    );

    let known: Vec<(&str, &str)> = VARS
        .iter()
        .map(|var| match *var {
            "COGNI_CONFIG" | "COGNI_POLICY" => (*var, ""),
            "COGNI_LLM_BASE_URL" => (*var, "http://127.0.0.1:9/v1"),
            "COGNI_LLM_WIRE" => (*var, "chat"),
            "COGNI_LISTEN" => (*var, "127.0.0.1:0"),
            "COGNI_WORKSPACE" | "COGNI_DATA_DIR" => (*var, "."),
            v if v.ends_with("_MS") => (*var, "1000"),
            v if v.ends_with("_HIDDEN") || v.ends_with("_RESULTS") || v.ends_with("_REASONING") => {
                (*var, "false")
            }
            _ => (*var, "x"),
        })
        .filter(|(_, value)| !value.is_empty())
        .collect();
    let output = cogni_in(dir.path(), &["tools", "list"], &known);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
}

#[test]
fn an_unknown_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cogni.toml"), "[llm]\nmodle = \"x\"\n").unwrap();
    let stderr = refused(&cogni_in(dir.path(), &["serve"], &[]));
    assert!(
        stderr.contains("cogni.toml") && stderr.contains("modle"),
        "{stderr}"
    );
}

/// The key belongs in `COGNI_LLM_API_KEY`; written into the config file by mistake, it is
/// refused without being shown, and no other line's value is echoed either.
#[test]
fn a_config_line_is_named_by_its_key_never_its_value() {
    let refusal = |text: &str| {
        bootstrap::Settings::from_toml_str(text)
            .unwrap_err()
            .to_string()
    };
    let secret = "sk-live-SECRET123";
    let error = refusal(&format!("[llm]\napi_key = \"{secret}\"\n"));
    assert!(!error.contains(secret), "{error}");
    assert!(
        error.contains("line 2") && error.contains("COGNI_LLM_API_KEY"),
        "{error}"
    );
    let error = refusal(&format!("[llm]\nmodle = \"{secret}\"\n"));
    assert!(!error.contains(secret), "{error}");
    assert!(
        error.starts_with("line 2 (`modle = …`): unknown field `modle`"),
        "{error}"
    );
}

/// However the key or the token is spelled into the file (a quoted or dotted key, an inline
/// table), the error says where it belongs, as for a plain `api_key = …` line.
#[test]
fn a_secret_written_in_any_toml_form_is_told_where_it_belongs() {
    let secret = "sk-live-SECRET123";
    for (text, variable) in [
        (
            format!("[llm]\n\"api_key\" = \"{secret}\"\n"),
            "COGNI_LLM_API_KEY",
        ),
        (format!("llm.api_key = \"{secret}\"\n"), "COGNI_LLM_API_KEY"),
        (
            format!("llm = {{ api_key = \"{secret}\" }}\n"),
            "COGNI_LLM_API_KEY",
        ),
        (
            format!("[server]\n'token' = \"{secret}\"\n"),
            "COGNI_SERVER_TOKEN",
        ),
        (
            format!("server = {{ token = \"{secret}\" }}\n"),
            "COGNI_SERVER_TOKEN",
        ),
    ] {
        let error = bootstrap::Settings::from_toml_str(&text)
            .unwrap_err()
            .to_string();
        assert!(
            !error.contains(secret)
                && error.contains(&format!("is never read from a config file; set {variable}")),
            "{text}: {error}"
        );
    }
}

/// Only `llm.api_key` and `server.token` are told to move to a variable: a key of that name in
/// another table is a mistake of its own, not the secret misplaced. An LLM key written as
/// `[llm] token` is not sent to `COGNI_SERVER_TOKEN`, nor a tool id `api_key` in the policy (its
/// value parsing or not) reported as the API key, hiding what is wrong with it.
#[test]
fn a_key_named_like_a_secret_elsewhere_is_not_told_to_move() {
    let secret = "sk-live-SECRET123";
    for (text, wanted) in [
        (
            format!("[llm]\nmodel = \"m\"\ntoken = \"{secret}\"\n"),
            "line 3 (`token = …`): unknown field `token`",
        ),
        (
            "[tools.policy]\nretry_per_tool.api_key = 3\n".to_owned(),
            "not a valid tool id",
        ),
        (
            "[tools.policy]\nretry_per_tool.api_key = three\n".to_owned(),
            "line 2",
        ),
    ] {
        let error = bootstrap::Settings::from_toml_str(&text)
            .unwrap_err()
            .to_string();
        assert!(
            !error.contains(secret)
                && !error.contains("never read from a config file")
                && error.contains(wanted),
            "{text}: {error}"
        );
    }
}

#[test]
fn bad_values_name_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let model = ("COGNI_LLM_MODEL", "m");
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[model, ("COGNI_LISTEN", "everywhere")], "server.listen"),
        (&[model, ("COGNI_LLM_BASE_URL", "ftp://x")], "llm.base_url"),
        // The query is not shown: it may carry a key.
        (
            &[model, ("COGNI_LLM_BASE_URL", "ftp://x/v1?key=pw@")],
            "llm.base_url: `ftp://x/v1` is not",
        ),
        (
            &[
                model,
                ("COGNI_LLM_BASE_URL", "https://user:pw@example.com/v1"),
            ],
            "llm.base_url",
        ),
        (
            &[model, ("COGNI_POLICY", "missing.toml")],
            "tools.policy_file",
        ),
        (&[], "llm.model"),
    ];
    for (env, key) in cases {
        let stderr = refused(&cogni_in(dir.path(), &["serve"], env));
        assert!(stderr.contains(key), "{key}: {stderr}");
        assert!(!stderr.contains("pw@"), "a credential leaked: {stderr}");
    }
    // An unknown wire on the command line: clap's usual usage message, naming the flag.
    let wire = cogni_in(dir.path(), &["serve", "--llm-wire", "grpc"], &[model]);
    assert!(!wire.status.success());
    let wire = String::from_utf8_lossy(&wire.stderr);
    assert!(
        wire.contains("--llm-wire") && wire.contains("grpc"),
        "{wire}"
    );
}

/// A variable clap cannot read (`COGNI_WORKSPACE_HIDDEN=maybe`, `COGNI_LLM_WIRE=grpc`) is
/// refused in one line naming the variable, which the user set, rather than the flag, which
/// they did not give; a bad value on the command line is still named by its flag.
#[test]
fn a_bad_variable_is_named_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let model = ("COGNI_LLM_MODEL", "m");
    let cases: &[(&[&str], &str, &str)] = &[
        (&["serve"], "COGNI_LLM_WIRE", "grpc"),
        (&["serve"], "COGNI_LLM_STATELESS_REASONING", "perhaps"),
        (&["chat", "hi"], "COGNI_LLM_REQUEST_TIMEOUT_MS", "soon"),
        (&["serve"], "COGNI_LLM_IDLE_TIMEOUT_MS", "-1"),
        (&["chat", "hi"], "COGNI_LLM_CONNECT_TIMEOUT_MS", "10s"),
        (
            &["serve"],
            "COGNI_LLM_MAX_CALL_MS",
            "99999999999999999999999",
        ),
        (&["chat", "hi"], "COGNI_WORKSPACE_HIDDEN", "maybe"),
        (&["serve"], "COGNI_TRACE_REDACTED_RESULTS", "2"),
    ];
    for (args, variable, value) in cases {
        let output = cogni_in(dir.path(), args, &[model, (variable, value)]);
        let stderr = refused(&output);
        assert_eq!(output.status.code(), Some(1), "{variable}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: {variable} does not hold ")),
            "{variable}: {stderr}"
        );
        assert!(
            !stderr.contains(value),
            "{variable}: the value is quoted: {stderr}"
        );
    }
    // Given on the command line as well, the value clap refused is the flag's.
    let output = cogni_in(
        dir.path(),
        &["serve", "--workspace-hidden=maybe"],
        &[model, ("COGNI_WORKSPACE_HIDDEN", "true")],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("--workspace-hidden"),
        "{stderr}"
    );
}

/// A flag's name after `--` is a value (here the message), not the flag: a variable clap
/// refused is still named in one line, and its value is not quoted.
#[test]
fn a_flag_after_the_double_dash_does_not_hide_a_bad_variable() {
    let dir = tempfile::tempdir().unwrap();
    let model = ("COGNI_LLM_MODEL", "m");
    let cases: &[(&[&str], &str, &str)] = &[
        (&["chat", "--", "--llm-wire"], "COGNI_LLM_WIRE", "grpc"),
        (
            &["chat", "--", "--workspace-hidden=true"],
            "COGNI_WORKSPACE_HIDDEN",
            "maybe",
        ),
        (&["replay", "--", "--data-dir"], "COGNI_DATA_DIR", ""),
    ];
    for (args, variable, value) in cases {
        let output = cogni_in(dir.path(), args, &[model, (variable, value)]);
        let stderr = refused(&output);
        assert_eq!(output.status.code(), Some(1), "{variable}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: {variable} ")),
            "{variable}: {stderr}"
        );
        assert!(
            value.is_empty() || !stderr.contains(value),
            "{variable}: the value is quoted: {stderr}"
        );
    }
}

/// A variable that is not UTF-8 text, which clap refuses without naming anything ("invalid
/// UTF-8 was detected in one or more arguments", though every argument was text), is named in
/// one line, and a key's bytes are not shown.
#[cfg(unix)]
#[test]
fn a_variable_that_is_not_utf8_is_named_in_one_line() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str, &[u8])] = &[
        (&["chat", "hi"], "COGNI_LLM_WIRE", b"chat\xff"),
        (&["serve"], "COGNI_WORKSPACE_HIDDEN", b"\xfe"),
        (&["chat", "hi"], "COGNI_LLM_API_KEY", b"sk-verysecret\xff"),
        (&["tools", "call", "x"], "COGNI_WORKSPACE_HIDDEN", b"\xff"),
    ];
    for (args, variable, value) in cases {
        let mut command = crate::cogni_command();
        command.current_dir(dir.path()).args(*args);
        let output = command
            .env("COGNI_LLM_MODEL", "m")
            .env(variable, OsStr::from_bytes(value))
            .output()
            .expect("the cogni binary runs");
        let stderr = refused(&output);
        assert_eq!(output.status.code(), Some(1), "{variable}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: {variable} ")),
            "{variable}: {stderr}"
        );
        assert!(!stderr.contains("verysecret"), "{variable}: {stderr}");
    }
}

/// The four model-call clocks can be set from the environment like the other `[llm]`
/// settings: a zero in each variable reaches the settings and is refused naming its key (no
/// model is set, so a variable that went unread would be refused for the model instead).
#[test]
fn the_llm_timeouts_are_read_from_their_variables() {
    let dir = tempfile::tempdir().unwrap();
    for (var, key) in [
        ("COGNI_LLM_REQUEST_TIMEOUT_MS", "llm.request_timeout_ms"),
        ("COGNI_LLM_CONNECT_TIMEOUT_MS", "llm.connect_timeout_ms"),
        ("COGNI_LLM_IDLE_TIMEOUT_MS", "llm.idle_timeout_ms"),
        ("COGNI_LLM_MAX_CALL_MS", "llm.max_call_ms"),
    ] {
        let stderr = refused(&cogni_in(dir.path(), &["serve"], &[(var, "0")]));
        assert!(
            stderr.contains(key) && stderr.contains("must be above 0"),
            "{var}: {stderr}"
        );
    }
}

/// `llm.stateless_reasoning` is set from its variable and its flag like the other settings, so a
/// config that turns it on can be run over the chat wire without editing the file: turned on
/// with the chat wire it is refused naming its key, and turned off it lets the start go on (to
/// the refusal of an exposed address, which comes after the settings are read, so no case
/// ever serves).
#[test]
fn stateless_reasoning_is_read_from_its_variable_and_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let model = ("COGNI_LLM_MODEL", "m");
    let exposed = ("COGNI_LISTEN", "0.0.0.0:0");
    let on = [
        cogni_in(
            dir.path(),
            &["serve"],
            &[model, exposed, ("COGNI_LLM_STATELESS_REASONING", "true")],
        ),
        cogni_in(
            dir.path(),
            &["serve", "--llm-stateless-reasoning"],
            &[model, exposed],
        ),
    ];
    for output in &on {
        let stderr = refused(output);
        assert!(
            stderr.starts_with("error: llm.stateless_reasoning: needs wire"),
            "{stderr}"
        );
    }
    std::fs::write(
        dir.path().join("cogni.toml"),
        "[llm]\nwire = \"responses\"\nstateless_reasoning = true\n",
    )
    .unwrap();
    let chat = ("COGNI_LLM_WIRE", "chat");
    let off = [
        cogni_in(
            dir.path(),
            &["serve"],
            &[
                model,
                exposed,
                chat,
                ("COGNI_LLM_STATELESS_REASONING", "false"),
            ],
        ),
        cogni_in(
            dir.path(),
            &["serve", "--llm-stateless-reasoning=false"],
            &[model, exposed, chat],
        ),
    ];
    for output in &off {
        let stderr = refused(output);
        assert!(stderr.starts_with("error: server.listen: "), "{stderr}");
    }
}

#[test]
fn an_unknown_tool_lists_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cogni.toml"),
        "[llm]\nmodel = \"m\"\n[tools]\nenabled = [\"core__teleport\"]\n",
    )
    .unwrap();
    let stderr = refused(&cogni_in(dir.path(), &["chat", "hi"], &[]));
    assert!(
        stderr.contains("tools.enabled") && stderr.contains("core__get_current_time"),
        "{stderr}"
    );
}

/// The example's `data_dir` line, uncommented as its comment invites, is a valid config.
#[test]
fn the_example_data_dir_works_when_uncommented() {
    let text =
        bootstrap::EXAMPLE_CONFIG.replace("# data_dir = \".cogni\"", "data_dir = \".cogni\"");
    assert_ne!(text, bootstrap::EXAMPLE_CONFIG, "the example has the line");
    let settings = bootstrap::Settings::from_toml_str(&text).unwrap();
    assert_eq!(settings.data_dir.as_deref(), Some(Path::new(".cogni")));
}

/// The API key never shows in the `Debug` of the parsed command line.
#[test]
fn the_api_key_is_not_in_the_debug_of_the_command_line() {
    use clap::Parser;
    let cli = bootstrap::cli::Cli::try_parse_from([
        "cogni",
        "chat",
        "hi",
        "--llm-api-key",
        "sk-very-secret-123",
    ])
    .unwrap();
    let shown = format!("{cli:?}");
    assert!(!shown.contains("sk-very-secret-123"), "{shown}");
}

/// `--help` shows which variables are set, never what a secret one holds: not the API key, the
/// token, nor the base URL (some gateways take a key in its path, query or userinfo).
#[test]
fn help_shows_no_secret_a_variable_holds() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        (
            "COGNI_LLM_BASE_URL",
            "https://user:pw-SECRET@gw.example/key-SECRET/v1",
        ),
        ("COGNI_LLM_API_KEY", "sk-SECRET"),
        ("COGNI_SERVER_TOKEN", "tok-SECRET"),
    ];
    // `runs` and `replay` take no model setting: their help names none.
    for (args, takes_the_model) in [
        (&["serve", "--help"][..], true),
        (&["chat", "--help"], true),
        (&["runs", "list", "--help"], false),
        (&["runs", "show", "--help"], false),
        (&["replay", "--help"], false),
    ] {
        let output = cogni_in(dir.path(), args, &env);
        assert!(output.status.success(), "{args:?}");
        let help = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            help.contains("COGNI_LLM_BASE_URL"),
            takes_the_model,
            "{args:?}: {help}"
        );
        assert!(!help.contains("SECRET"), "{args:?}: {help}");
    }
}

/// A key some gateways take in the base URL (its path, its query or its userinfo), given as
/// `--llm-base-url` or `COGNI_LLM_BASE_URL`, never shows in the `Debug` of the parsed command
/// line, as it does not in that of the settings.
#[test]
fn a_key_in_the_base_url_is_not_in_the_debug_of_the_command_line() {
    use clap::Parser;
    let secret = "sk-live-0123456789abcdef";
    for url in [
        format!("https://gw.example/v1/{secret}"),
        format!("https://gw.example/v1?key={secret}"),
        format!("https://user:{secret}@gw.example/v1"),
    ] {
        let cli =
            bootstrap::cli::Cli::try_parse_from(["cogni", "chat", "hi", "--llm-base-url", &url])
                .unwrap();
        let shown = format!("{cli:?}");
        assert!(!shown.contains(secret), "{shown}");
        assert!(shown.contains("gw.example"), "{shown}");
    }
}

/// A key some gateways take in the base URL's path (or its query, or userinfo) never shows in
/// the `Debug` of the settings, which a library user may log.
#[test]
fn a_key_in_the_base_url_is_not_in_the_debug_of_the_settings() {
    let secret = "sk-live-0123456789abcdef";
    for url in [
        format!("https://gw.example/v1/{secret}"),
        format!("https://gw.example/v1?key={secret}"),
        format!("https://user:{secret}@gw.example/v1"),
    ] {
        let settings =
            bootstrap::Settings::from_toml_str(&format!("[llm]\nbase_url = \"{url}\"\n")).unwrap();
        let shown = format!("{settings:?}");
        assert!(!shown.contains(secret), "{shown}");
        assert!(shown.contains("gw.example"), "{shown}");
    }
}

/// The server's token never shows in the `Debug` of the parsed command line.
#[test]
fn the_server_token_is_not_in_the_debug_of_the_command_line() {
    use clap::Parser;
    let cli = bootstrap::cli::Cli::try_parse_from([
        "cogni",
        "serve",
        "--server-token",
        "tok-very-secret-456",
    ])
    .unwrap();
    let shown = format!("{cli:?}");
    assert!(!shown.contains("tok-very-secret-456"), "{shown}");
}

/// `cogni serve` on an address that is not loopback, without `COGNI_SERVER_TOKEN` or the
/// override, is refused in one line naming both; a token no client could send is refused
/// without being shown.
#[test]
fn serve_refuses_an_exposed_address_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let model = ("COGNI_LLM_MODEL", "m");
    let exposed = ("COGNI_LISTEN", "0.0.0.0:0");
    let stderr = refused(&cogni_in(dir.path(), &["serve"], &[model, exposed]));
    assert!(
        stderr.starts_with("error: server.listen: 0.0.0.0:0 is not a loopback address")
            && stderr.contains("COGNI_SERVER_TOKEN")
            && stderr.contains("server.allow_unauthenticated = true"),
        "{stderr}"
    );
    let token = "tok with a space";
    let stderr = refused(&cogni_in(
        dir.path(),
        &["serve"],
        &[
            model,
            ("COGNI_LISTEN", "127.0.0.1:0"),
            ("COGNI_SERVER_TOKEN", token),
        ],
    ));
    assert!(
        stderr.starts_with("error: COGNI_SERVER_TOKEN: ") && !stderr.contains(token),
        "{stderr}"
    );
}

/// An empty or blank `COGNI_SERVER_TOKEN` (a `"$(cat tokenfile)"` whose file is missing) is
/// refused naming the variable, in one line saying to unset it to serve without a token; it was
/// read as no token, and the server served without one.
#[test]
fn an_empty_server_token_is_refused_rather_than_read_as_none() {
    let dir = tempfile::tempdir().unwrap();
    let model = ("COGNI_LLM_MODEL", "m");
    // On an exposed address, so the server, were the variable read as no token, is refused
    // for that rather than started.
    let exposed = ("COGNI_LISTEN", "0.0.0.0:0");
    for blank in ["", " ", "\t \n"] {
        let output = cogni_in(
            dir.path(),
            &["serve"],
            &[model, exposed, ("COGNI_SERVER_TOKEN", blank)],
        );
        let stderr = refused(&output);
        assert_eq!(output.status.code(), Some(1), "{blank:?}: {stderr}");
        assert!(
            stderr.starts_with("error: COGNI_SERVER_TOKEN is set but ")
                && stderr.contains("unset it to serve without a token"),
            "{blank:?}: {stderr}"
        );
    }
    // On the command line, clap names the flag.
    let output = cogni_in(
        dir.path(),
        &["serve", "--server-token", ""],
        &[model, exposed],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("--server-token") && stderr.contains("unset to serve without a token"),
        "{stderr}"
    );
}

/// An empty variable clap refuses (`export COGNI_DATA_DIR=`, `COGNI_LLM_REQUEST_TIMEOUT_MS=`) is
/// refused naming the variable, in one line.
#[test]
fn an_empty_variable_is_named_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let model = ("COGNI_LLM_MODEL", "m");
    let cases: &[(&[&str], &str)] = &[
        (&["runs", "list"], "COGNI_DATA_DIR"),
        (&["tools", "stats"], "COGNI_DATA_DIR"),
        (&["serve"], "COGNI_POLICY"),
        (&["serve"], "COGNI_WORKSPACE"),
        (&["serve"], "COGNI_CONFIG"),
        (&["chat", "hi"], "COGNI_LLM_REQUEST_TIMEOUT_MS"),
        (&["chat", "hi"], "COGNI_LLM_IDLE_TIMEOUT_MS"),
        (&["serve"], "COGNI_LLM_CONNECT_TIMEOUT_MS"),
        (&["serve"], "COGNI_LLM_MAX_CALL_MS"),
        (&["serve"], "COGNI_LLM_WIRE"),
        (&["serve"], "COGNI_LLM_STATELESS_REASONING"),
        (&["chat", "hi"], "COGNI_WORKSPACE_HIDDEN"),
        (&["serve"], "COGNI_TRACE_REDACTED_RESULTS"),
    ];
    for (args, variable) in cases {
        let output = cogni_in(dir.path(), args, &[model, (variable, "")]);
        let stderr = refused(&output);
        assert_eq!(output.status.code(), Some(1), "{variable}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "error: {variable} is set but empty: unset it or give it "
            )),
            "{variable}: {stderr}"
        );
    }
}

/// An empty `COGNI_LLM_BASE_URL`, `COGNI_LLM_MODEL` or `COGNI_LISTEN` is refused naming the
/// variable, as the other empty variables are: read as a value, it would replace what the config
/// file sets and be refused as the file's key (`llm.model: no model is configured (set it in
/// cogni.toml …)` under a file that sets one).
#[test]
fn an_empty_text_variable_is_named_rather_than_replacing_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cogni.toml"),
        "[llm]\nmodel = \"m\"\nbase_url = \"http://localhost:4000/v1\"\n\
         [server]\nlisten = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    for (args, variable) in [
        (&["serve"][..], "COGNI_LLM_MODEL"),
        (&["chat", "hi"], "COGNI_LLM_MODEL"),
        (&["serve"], "COGNI_LLM_BASE_URL"),
        (&["serve"], "COGNI_LISTEN"),
    ] {
        let output = cogni_in(dir.path(), args, &[(variable, "")]);
        let stderr = refused(&output);
        assert!(
            stderr.starts_with(&format!(
                "error: {variable} is set but empty: unset it or give it "
            )),
            "{variable}: {stderr}"
        );
    }
    // On the command line, clap names the flag.
    let output = cogni_in(dir.path(), &["serve", "--llm-model", ""], &[]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--llm-model"),
        "{output:?}"
    );
}

/// A base URL whose host is empty is refused at start, naming the key; a tool enabled twice
/// is refused naming the key.
#[test]
fn a_base_url_without_a_host_and_a_tool_enabled_twice_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = ("COGNI_LLM_MODEL", "m");
    let stderr = refused(&cogni_in(
        dir.path(),
        &["chat", "hi"],
        &[model, ("COGNI_LLM_BASE_URL", "http:///v1")],
    ));
    assert!(
        stderr.contains("llm.base_url") && stderr.contains("names no host"),
        "{stderr}"
    );
    std::fs::write(
        dir.path().join("cogni.toml"),
        "[tools]\nenabled = [\"core__get_current_time\", \"core__get_current_time\"]\n",
    )
    .unwrap();
    let stderr = refused(&cogni_in(dir.path(), &["chat", "hi"], &[model]));
    assert!(
        stderr.contains("tools.enabled") && stderr.contains("listed twice"),
        "{stderr}"
    );
}

/// An API key no header can carry (a key file with CRLF line ends, read by `$(cat key)`, leaves
/// a carriage return) is refused naming `COGNI_LLM_API_KEY`, the setting at fault, not
/// `llm.base_url`, and without showing the key.
#[test]
fn a_key_that_cannot_be_sent_is_named_as_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = "sk-crlf-7e1d\r";
    let env = [("COGNI_LLM_MODEL", "m"), ("COGNI_LLM_API_KEY", key)];
    for args in [&["chat", "hi"][..], &["serve"][..]] {
        let stderr = refused(&cogni_in(dir.path(), args, &env));
        assert!(
            stderr.starts_with("error: COGNI_LLM_API_KEY: ") && !stderr.contains("llm.base_url"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("sk-crlf"), "{args:?}: {stderr}");
    }
}

/// `llm.max_retries` is bounded: past [`bootstrap::MAX_LLM_RETRIES`] one model call could wait
/// out hours of backoff and `Retry-After` (before the bound, `u32::MAX` retried a refused
/// connection for ever), so settings with more are refused naming the key, its value and the
/// limit; the limit itself is accepted. Checked on the settings, not the binary: a refusal that
/// went missing would have the binary retry for ever.
#[test]
fn too_many_llm_retries_are_refused_naming_the_limit() {
    let settings = |retries: u64| {
        bootstrap::Settings::from_toml_str(&format!("[llm]\nmax_retries = {retries}\n")).unwrap()
    };
    let limit = bootstrap::MAX_LLM_RETRIES;
    settings(u64::from(limit)).validate().unwrap();
    for retries in [u64::from(limit) + 1, u64::from(u32::MAX)] {
        let error = settings(retries).validate().unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "llm.max_retries: {retries} is more than {limit}, the most a model call may retry"
            ),
        );
    }
}

#[test]
fn relative_paths_in_a_config_file_are_relative_to_its_folder() {
    use bootstrap::{Overrides, Settings};
    let root = tempfile::tempdir().unwrap();
    let conf = root.path().join("conf");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("policy.toml"),
        "allowed_tools = [\"core__get_current_time\"]\n",
    )
    .unwrap();
    let file = conf.join("cogni.toml");
    let load = |text: &str, overrides: Overrides| {
        std::fs::write(&file, text).unwrap();
        Settings::load(&Overrides {
            config: Some(file.clone()),
            ..overrides
        })
        .unwrap()
    };

    let written =
        "data_dir = \"data\"\n[tools]\nworkspace = \"ws\"\npolicy_file = \"policy.toml\"\n";
    let settings = load(written, Overrides::default());
    assert_eq!(settings.data_dir, Some(conf.join("data")));
    assert_eq!(settings.tools.workspace, conf.join("ws"));
    assert_eq!(settings.tools.policy_file, Some(conf.join("policy.toml")));
    assert_eq!(
        settings.policy().unwrap().allowed_tools.len(),
        1,
        "the policy file was read from the config's folder"
    );

    // Flags (and COGNI_* variables) are the caller's: relative to the working directory.
    let settings = load(
        written,
        Overrides {
            workspace: Some("flag-ws".into()),
            data_dir: Some("flag-data".into()),
            ..Overrides::default()
        },
    );
    assert_eq!(settings.tools.workspace, Path::new("flag-ws"));
    assert_eq!(settings.data_dir, Some("flag-data".into()));

    // An absolute path stays as written; a default the file does not name does not move.
    let absolute = root.path().join("elsewhere");
    let settings = load(
        &format!("[tools]\nworkspace = {:?}\n", absolute.to_str().unwrap()),
        Overrides::default(),
    );
    assert_eq!(settings.tools.workspace, absolute);
    let settings = load("[agent]\n", Overrides::default());
    assert_eq!(settings.tools.workspace, Path::new("."));
    assert_eq!(settings.data_dir, None);
}

#[test]
fn the_ai_sdk_version_is_read_under_its_old_name_too() {
    let version =
        |text: &str| bootstrap::Settings::from_toml_str(text).map(|s| s.server.ai_sdk_version);
    assert_eq!(version("").unwrap(), 5);
    assert_eq!(version("[server]\nai_sdk_version = 6").unwrap(), 6);
    // The bool this setting replaced: on meant an ai 6 client.
    assert_eq!(version("[server]\nai_sdk_approvals = true").unwrap(), 6);
    assert_eq!(version("[server]\nai_sdk_approvals = false").unwrap(), 5);

    let wrong = version("[server]\nai_sdk_version = \"six\"")
        .unwrap_err()
        .to_string();
    assert!(
        wrong.starts_with("line 2 (`ai_sdk_version = …`): expected the major version"),
        "{wrong}"
    );
    let both = version("[server]\nai_sdk_version = 6\nai_sdk_approvals = true").unwrap_err();
    assert!(both.to_string().contains("duplicate field"), "{both}");

    let old = bootstrap::Settings::from_toml_str("[server]\nai_sdk_version = 4").unwrap();
    let refused = old.validate().unwrap_err().to_string();
    assert!(
        refused.starts_with("server.ai_sdk_version: 4 is older than ai 5"),
        "{refused}"
    );
}

/// A value the type does not take, a secret pasted alone on a line (a key, a base64 token) or
/// any other line that does not parse is refused naming the line (and its key, when it has
/// one), never quoting what the line holds.
#[test]
fn no_config_error_quotes_what_a_line_holds() {
    let secret = "sk-live-SECRET123";
    let cases = [
        (
            format!("[llm]\nrequest_timeout_ms = \"{secret}\"\n"),
            "line 2 (`request_timeout_ms = …`): invalid type: string, expected u64",
        ),
        (
            format!("[llm]\nwire = \"{secret}\"\n"),
            "line 2 (`wire = …`): unknown variant, expected `chat` or `responses`",
        ),
        (
            format!("[llm]\nmodel = \"m\"\n{secret}\n"),
            "line 3: key with no value",
        ),
        (format!("[llm]\nmodel = \"m\"\n{secret}==\n"), "line 3: "),
        (format!("[llm]\nmodel = \"m\" {secret}\n"), "line 2: "),
    ];
    for (text, expected) in cases {
        let error = bootstrap::Settings::from_toml_str(&text)
            .unwrap_err()
            .to_string();
        assert!(!error.contains("SECRET"), "{text:?}: {error}");
        assert!(error.starts_with(expected), "{text:?}: {error}");
        assert_eq!(error.lines().count(), 1, "{error}");
    }
}

#[test]
fn a_step_limit_of_zero_does_not_parse() {
    // The loop cannot keep to 0 steps (the limit is checked once a step's tools ran), so the
    // setting cannot hold it: the file is refused at the key, not run as 1.
    let refused = bootstrap::Settings::from_toml_str("[agent]\nmax_steps = 0\n")
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("line 2 (`max_steps = …`)") && refused.ends_with("at least 1"),
        "{refused}"
    );
    let settings = bootstrap::Settings::from_toml_str("[agent]\nmax_steps = 1\n").unwrap();
    assert_eq!(settings.agent.max_steps.get(), 1);
}

#[test]
fn a_parallel_tool_limit_of_zero_does_not_parse() {
    // No call could run with 0 at once (the loop ran it as 1), so the setting cannot hold it:
    // the file is refused at the key, as for `max_steps`.
    let refused = bootstrap::Settings::from_toml_str("[agent]\nmax_parallel_tools = 0\n")
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("line 2 (`max_parallel_tools = …`)") && refused.ends_with("at least 1"),
        "{refused}"
    );
    let settings = bootstrap::Settings::from_toml_str("[agent]\nmax_parallel_tools = 1\n").unwrap();
    assert_eq!(settings.agent.max_parallel_tools.get(), 1);
}

#[test]
fn a_concurrent_run_limit_of_zero_does_not_parse() {
    // A server that may run no run at once would refuse every request: the file is refused at
    // the key instead.
    let refused = bootstrap::Settings::from_toml_str("[server]\nmax_concurrent_runs = 0\n")
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("line 2 (`max_concurrent_runs = …`)") && refused.ends_with("at least 1"),
        "{refused}"
    );
    let settings =
        bootstrap::Settings::from_toml_str("[server]\nmax_concurrent_runs = 3\n").unwrap();
    assert_eq!(settings.server.max_concurrent_runs.get(), 3);
    let example = bootstrap::Settings::from_toml_str(bootstrap::EXAMPLE_CONFIG).unwrap();
    assert_eq!(
        example.server.max_concurrent_runs,
        bootstrap::Settings::default().server.max_concurrent_runs,
        "the example shows the default"
    );
    assert_eq!(example.server.max_concurrent_runs.get(), 32);
}

/// A policy's bad value, inline in `cogni.toml` or in a TOML policy file, is refused like any
/// other line of a config file: one line naming the file, the line and the key, never the value.
#[test]
fn a_bad_policy_value_is_named_by_its_line_and_key_never_its_value() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "sk-live-SECRET123";
    let policy = format!("allowed_tools = []\n[budgets]\nmax_runtime_ms = \"{secret}\"\n");
    std::fs::write(dir.path().join("policy.toml"), &policy).unwrap();
    std::fs::write(
        dir.path().join("cogni.toml"),
        format!(
            "[llm]\nmodel = \"m\"\n[tools.policy]\nallowed_tools = []\n\
             [tools.policy.budgets]\nmax_runtime_ms = \"{secret}\"\n"
        ),
    )
    .unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["serve"],
            "error: config file cogni.toml: line 6 (`max_runtime_ms = …`): invalid type: \
             string, expected u64",
        ),
        (
            &["tools", "list"],
            "error: config file cogni.toml: line 6 (`max_runtime_ms = …`): invalid type: \
             string, expected u64",
        ),
        (
            &[
                "tools",
                "list",
                "--config",
                "none.toml",
                "--policy",
                "policy.toml",
            ],
            "error: tools.policy_file: policy file policy.toml: invalid tool policy: line 3 \
             (`max_runtime_ms = …`): invalid type: string, expected u64",
        ),
        (
            &["serve", "--config", "none.toml", "--policy", "policy.toml"],
            "error: tools.policy_file: policy file policy.toml: invalid tool policy: line 3 \
             (`max_runtime_ms = …`): invalid type: string, expected u64",
        ),
    ];
    std::fs::write(dir.path().join("none.toml"), "[llm]\nmodel = \"m\"\n").unwrap();
    for (args, expected) in cases {
        let stderr = refused(&cogni_in(dir.path(), args, &[]));
        assert_eq!(stderr.trim_end(), expected, "{args:?}");
        assert!(!stderr.contains(secret), "{args:?}: {stderr}");
    }
}

/// A JSON policy file's bad value is refused as a TOML one's is: one line naming the file and
/// where in it (line and column), and what is wrong, never the value, whose type or variant
/// serde_json's own message would quote.
#[test]
fn a_bad_json_policy_value_is_named_by_its_place_never_its_value() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "sk-live-SECRET123";
    for (policy, expected) in [
        (
            format!(
                "{{\"allowed_tools\": [],\n \"budgets\": {{\"max_runtime_ms\": \"{secret}\"}}}}"
            ),
            "line 2 column 50: invalid type: string, expected u64",
        ),
        (
            format!("{{\"require_approval_for_effects\": [\"{secret}\"]}}"),
            "line 1 column 53: unknown variant, expected one of `read_only`, `state_change`, \
             `external_side_effect`",
        ),
    ] {
        std::fs::write(dir.path().join("policy.json"), &policy).unwrap();
        let stderr = refused(&cogni_in(
            dir.path(),
            &["tools", "list", "--policy", "policy.json"],
            &[],
        ));
        assert_eq!(
            stderr.trim_end(),
            format!(
                "error: tools.policy_file: policy file policy.json: invalid tool policy: \
                 {expected}"
            ),
            "{policy}"
        );
        assert!(!stderr.contains(secret), "{policy}: {stderr}");
    }
}

/// An empty path in the config file is refused naming its key, as an empty `COGNI_*` path
/// variable or flag is: `data_dir = ""` made the working directory the data folder, strewing
/// `cogni.db`, `blobs/` and `locks/` over it.
#[test]
fn an_empty_path_in_the_config_file_is_refused() {
    for (text, key) in [
        ("data_dir = \"\"\n", "data_dir"),
        ("[tools]\nworkspace = \"\"\n", "tools.workspace"),
        ("[tools]\npolicy_file = \"\"\n", "tools.policy_file"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cogni.toml"),
            format!("{text}[llm]\nmodel = \"m\"\n"),
        )
        .unwrap();
        let url = crate::fake::endpoint(&["turn-2-answer.sse"]);
        let stderr = refused(&cogni_in(
            dir.path(),
            &["chat", "hi"],
            &[("COGNI_LLM_BASE_URL", &url)],
        ));
        assert_eq!(
            stderr.trim_end(),
            format!(
                "error: config file cogni.toml: {key}: the path is empty: remove the key or \
                 give it a path"
            )
        );
        assert!(!dir.path().join("cogni.db").exists(), "{key}");
    }
}

/// `cogni tools call` keeps hidden entries of its workspace out of reach (`.env` holds keys),
/// unless `--workspace-hidden` shows them; the refusal names the rule, never the file's text.
#[test]
fn tools_call_hides_hidden_entries_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "KEY=sk-CANARY-41").unwrap();
    let root = dir.path().to_str().unwrap();
    let read = [
        "tools",
        "call",
        "core__workspace_read",
        "--args",
        r#"{"path":".env"}"#,
    ];
    let hidden = cogni_in(
        dir.path(),
        &[&read[..], &["--workspace", root]].concat(),
        &[],
    );
    assert!(!hidden.status.success());
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&hidden.stdout),
        String::from_utf8_lossy(&hidden.stderr)
    );
    assert!(
        shown.contains("hidden entry (a name starting with `.`)"),
        "{shown}"
    );
    assert!(!shown.contains("CANARY"), "{shown}");
    let output = cogni_in(
        dir.path(),
        &[&read[..], &["--workspace", root, "--workspace-hidden"]].concat(),
        &[],
    );
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("KEY=sk-CANARY-41"));
}

/// `cogni tools call` reads the workspace, its hidden entries and the policy from the same
/// `COGNI_*` variables as `serve` and `chat` (a flag wins over its variable), and its
/// `--workspace-hidden` takes `=BOOL` as theirs does; an empty one is named in one line.
#[test]
fn tools_call_reads_the_workspace_and_policy_variables() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    std::fs::write(dir.path().join("ws/notes.txt"), "hello\n").unwrap();
    std::fs::write(dir.path().join("ws/.env"), "KEY=x\n").unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "allowed_tools = [\"core__workspace_read\"]\n",
    )
    .unwrap();
    let call = |tool: &str, path: &str, flags: &[&str], env: &[(&str, &str)]| {
        let args = match path {
            "" => "{}".to_owned(),
            path => format!("{{\"path\":\"{path}\"}}"),
        };
        let mut argv = vec!["tools", "call", tool, "--args", &args];
        argv.extend_from_slice(flags);
        cogni_in(dir.path(), &argv, env)
    };
    let read = "core__workspace_read";
    let ws = ("COGNI_WORKSPACE", "ws");
    let shown = ("COGNI_WORKSPACE_HIDDEN", "true");
    let ok = |output: Output| {
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{stderr}");
        assert!(String::from_utf8_lossy(&output.stdout).contains("\"status\":\"ok\""));
    };
    ok(call(read, "notes.txt", &[], &[ws]));
    // The flag wins over the variable.
    refused(&call(read, "notes.txt", &["--workspace", "."], &[ws]));
    ok(call(read, ".env", &[], &[ws, shown]));
    refused(&call(read, ".env", &[], &[ws]));
    ok(call(read, ".env", &["--workspace-hidden=true"], &[ws]));
    refused(&call(
        read,
        ".env",
        &["--workspace-hidden=false"],
        &[ws, shown],
    ));
    // The policy allows only the read: the clock is refused under it.
    let time = "core__get_current_time";
    ok(call(time, "", &[], &[]));
    refused(&call(time, "", &[], &[("COGNI_POLICY", "policy.toml")]));
    ok(call(
        read,
        "notes.txt",
        &[],
        &[ws, ("COGNI_POLICY", "policy.toml")],
    ));
    for variable in ["COGNI_WORKSPACE", "COGNI_POLICY", "COGNI_WORKSPACE_HIDDEN"] {
        let stderr = refused(&call(time, "", &[], &[(variable, "")]));
        assert!(
            stderr.starts_with(&format!("error: {variable} is set but empty")),
            "{stderr}"
        );
    }
    // `tools list` lists under the same policy variable: only the read.
    let list = cogni_in(
        dir.path(),
        &["tools", "list"],
        &[("COGNI_POLICY", "policy.toml")],
    );
    let listed = String::from_utf8_lossy(&list.stdout).into_owned();
    assert!(
        list.status.success(),
        "{}",
        String::from_utf8_lossy(&list.stderr)
    );
    assert!(listed.contains(read) && !listed.contains(time), "{listed}");
}

/// `cogni tools call` and `cogni tools stats` read `data_dir` from `cogni.toml` (in the working
/// folder, or named by `--config` or `COGNI_CONFIG`, a relative path then being the file's
/// folder's), as `chat`, `serve` and `runs` do; `--data-dir` and `COGNI_DATA_DIR` come first.
/// Only the data folder is read: a setting they do not use that `serve` would refuse (too many
/// model retries) does not stop them.
#[test]
fn tools_call_and_stats_read_the_data_dir_of_cogni_toml() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cogni.toml");
    std::fs::write(
        &config,
        "data_dir = \"data\"\n[llm]\nmax_retries = 1000000\n",
    )
    .unwrap();
    let call = cogni_in(
        dir.path(),
        &["tools", "call", "core__get_current_time"],
        &[],
    );
    assert!(
        call.status.success(),
        "{}",
        String::from_utf8_lossy(&call.stderr)
    );
    assert!(
        dir.path().join("data").is_dir(),
        "no statistics in data_dir"
    );
    let calls = |output: &Output| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        stats[0]["calls"].as_u64()
    };
    let stats = cogni_in(dir.path(), &["tools", "stats", "--json"], &[]);
    assert_eq!(calls(&stats), Some(1));

    // Named from another folder, by the flag or the variable: its data folder is its folder's.
    let elsewhere = tempfile::tempdir().unwrap();
    let path = config.to_str().unwrap();
    let call = cogni_in(
        elsewhere.path(),
        &["tools", "call", "core__get_current_time", "--config", path],
        &[],
    );
    assert!(
        call.status.success(),
        "{}",
        String::from_utf8_lossy(&call.stderr)
    );
    let stats = cogni_in(
        elsewhere.path(),
        &["tools", "stats", "--json"],
        &[("COGNI_CONFIG", path)],
    );
    assert_eq!(calls(&stats), Some(2));

    // The flag and the variable come before the file.
    let missing = elsewhere.path().join("missing");
    let missing = missing.to_str().unwrap();
    for (args, env) in [
        (&["tools", "stats", "--data-dir", missing][..], &[][..]),
        (&["tools", "stats"][..], &[("COGNI_DATA_DIR", missing)][..]),
    ] {
        let stderr = refused(&cogni_in(dir.path(), args, env));
        assert!(
            stderr.contains(&format!("no tool statistics in {missing}")),
            "{stderr}"
        );
    }
    // Nowhere: the error says where a data folder is set.
    let stderr = refused(&cogni_in(elsewhere.path(), &["tools", "stats"], &[]));
    assert_eq!(
        stderr.trim_end(),
        "error: no data folder: set --data-dir, COGNI_DATA_DIR or data_dir in cogni.toml"
    );
    // A config file that does not parse is refused, naming it.
    std::fs::write(&config, "data_dir = \n").unwrap();
    let stderr = refused(&cogni_in(dir.path(), &["tools", "stats"], &[]));
    assert!(stderr.contains("cogni.toml"), "{stderr}");
}

/// `cogni tools list` and `cogni tools call` read the tools' settings as `serve` and `chat` do:
/// the policy (`tools.policy`, `tools.policy_file`), `tools.workspace` and
/// `tools.workspace_hidden` of `cogni.toml` (or the file `--config` / `COGNI_CONFIG` names; a
/// relative path in it is its folder's), after the flag and its `COGNI_*` variable. A setting
/// they do not use (a bad `llm.max_retries`) does not stop them.
#[test]
fn tools_list_and_call_read_the_tools_settings_of_cogni_toml() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    std::fs::write(dir.path().join("ws/.env"), "KEY=x").unwrap();
    let config = dir.path().join("cogni.toml");
    std::fs::write(
        &config,
        "[llm]\nmax_retries = 1000000\n[tools]\nworkspace = \"ws\"\nworkspace_hidden = true\n\
         [tools.policy]\nallowed_tools = [\"core__workspace_write\", \"core__workspace_read\"]\n",
    )
    .unwrap();
    let read_only = dir.path().join("read-only.toml");
    std::fs::write(&read_only, "allowed_tools = [\"core__workspace_read\"]\n").unwrap();
    let read_only = read_only.to_str().unwrap();
    let stderr_of = |output: &Output| String::from_utf8_lossy(&output.stderr).into_owned();
    let write = |folder: &Path, extra: &[&str], env: &[(&str, &str)], name: &str| {
        let args = format!(r#"{{"path":"{name}","content":"hi"}}"#);
        let mut all = vec!["tools", "call", "core__workspace_write", "--args", &args];
        all.extend_from_slice(extra);
        cogni_in(folder, &all, env)
    };

    // The file's policy allows the write, and the file's workspace (its folder's `ws`) takes it.
    let output = write(dir.path(), &[], &[], "a.txt");
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/a.txt")).unwrap(),
        "hi"
    );
    let list = cogni_in(dir.path(), &["tools", "list"], &[]);
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(list.status.success(), "{}", stderr_of(&list));
    assert!(
        listed.contains("core__workspace_write") && !listed.contains("core__get_current_time"),
        "{listed}"
    );

    // Named from another folder, by the flag or the variable: the same settings.
    let elsewhere = tempfile::tempdir().unwrap();
    let path = config.to_str().unwrap();
    for (extra, env, name) in [
        (&["--config", path][..], &[][..], "b.txt"),
        (&[][..], &[("COGNI_CONFIG", path)][..], "c.txt"),
    ] {
        let output = write(elsewhere.path(), extra, env, name);
        assert!(output.status.success(), "{}", stderr_of(&output));
        assert!(dir.path().join("ws").join(name).is_file(), "{name}");
    }
    let list = cogni_in(elsewhere.path(), &["tools", "list", "--config", path], &[]);
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("core__workspace_write"),
        "{}",
        stderr_of(&list)
    );

    // The flag and the variable come before the file.
    for (extra, env) in [
        (&["--policy", read_only][..], &[][..]),
        (&[][..], &[("COGNI_POLICY", read_only)][..]),
    ] {
        let output = write(dir.path(), extra, env, "denied.txt");
        assert!(
            stderr_of(&output).starts_with("error: policy_denied: "),
            "{}",
            stderr_of(&output)
        );
        let list = cogni_in(dir.path(), &[&["tools", "list"][..], extra].concat(), env);
        assert!(
            !String::from_utf8_lossy(&list.stdout).contains("core__workspace_write"),
            "{extra:?} {env:?}"
        );
    }
    assert!(!dir.path().join("ws/denied.txt").exists());
    let other = elsewhere.path().to_str().unwrap();
    for (extra, env, name) in [
        (&["--workspace", other][..], &[][..], "d.txt"),
        (&[][..], &[("COGNI_WORKSPACE", other)][..], "e.txt"),
    ] {
        let output = write(dir.path(), extra, env, name);
        assert!(output.status.success(), "{}", stderr_of(&output));
        assert!(elsewhere.path().join(name).is_file(), "{name}");
    }

    // `workspace_hidden = true` of the file shows `.env`; the flag or the variable hides it.
    let read = |extra: &[&str], env: &[(&str, &str)]| {
        let mut all = vec![
            "tools",
            "call",
            "core__workspace_read",
            "--args",
            r#"{"path":".env"}"#,
        ];
        all.extend_from_slice(extra);
        cogni_in(dir.path(), &all, env)
    };
    let shown = read(&[], &[]);
    assert!(shown.status.success(), "{}", stderr_of(&shown));
    for (extra, env) in [
        (&["--workspace-hidden=false"][..], &[][..]),
        (&[][..], &[("COGNI_WORKSPACE_HIDDEN", "false")][..]),
    ] {
        let hidden = read(extra, env);
        assert!(!hidden.status.success(), "{extra:?} {env:?}: read .env");
    }

    // A policy setting the file gets wrong is refused as `serve` refuses it, naming the keys.
    std::fs::write(
        &config,
        "[tools]\npolicy_file = \"read-only.toml\"\n[tools.policy]\nallowed_tools = []\n",
    )
    .unwrap();
    for args in [
        &["tools", "list"][..],
        &["tools", "call", "core__get_current_time"],
    ] {
        let stderr = refused(&cogni_in(dir.path(), args, &[]));
        assert_eq!(
            stderr.trim_end(),
            "error: tools.policy and tools.policy_file: give one, not both",
            "{args:?}"
        );
    }
}

/// `cogni tools list` and `cogni tools call` bind the core tools `tools.enabled` names, as
/// `serve`, `chat` and `replay` do: one left out is not in the catalog and not run, whatever the
/// policy allows, and an unknown name is refused naming the key.
#[test]
fn tools_list_and_call_bind_only_the_enabled_tools() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cogni.toml");
    std::fs::write(
        &config,
        "[tools]\nenabled = [\"core__get_current_time\", \"core__workspace_read\"]\n\
         [tools.policy]\nallowed_tools = [\"core__get_current_time\", \"core__workspace_list\", \
         \"core__workspace_read\"]\n",
    )
    .unwrap();
    let list = cogni_in(dir.path(), &["tools", "list"], &[]);
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.status.success(),
        "{}",
        String::from_utf8_lossy(&list.stderr)
    );
    let ids: Vec<&str> = listed
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(ids, ["core__get_current_time", "core__workspace_read"]);
    let call = cogni_in(dir.path(), &["tools", "call", "core__workspace_list"], &[]);
    let stderr = refused(&call);
    assert!(
        stderr.starts_with("error: unavailable: tool core__workspace_list is not available"),
        "{stderr}"
    );
    let call = cogni_in(
        dir.path(),
        &["tools", "call", "core__get_current_time"],
        &[],
    );
    assert!(
        call.status.success(),
        "{}",
        String::from_utf8_lossy(&call.stderr)
    );

    std::fs::write(&config, "[tools]\nenabled = [\"core__nope\"]\n").unwrap();
    for args in [
        &["tools", "list"][..],
        &["tools", "call", "core__get_current_time"],
    ] {
        let stderr = refused(&cogni_in(dir.path(), args, &[]));
        assert!(
            stderr.starts_with("error: tools.enabled: unknown tool `core__nope`"),
            "{args:?}: {stderr}"
        );
    }
}

/// `cogni tools call` records the redacted result on the call's span when
/// `tools.trace_redacted_results` asks for it, read as `serve` and `chat` read it: the flag,
/// else `COGNI_TRACE_REDACTED_RESULTS`, else `cogni.toml`; off unless one of them turns it on.
#[test]
fn tools_call_traces_redacted_results_as_serve_does() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cogni.toml");
    let traced = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["tools", "call", "core__get_current_time"];
        args.extend_from_slice(extra);
        let env = [&[("RUST_LOG", "ai_core=debug")][..], env].concat();
        let output = cogni_in(dir.path(), &args, &env);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{stderr}");
        assert!(stderr.contains("tool call finished"), "no span: {stderr}");
        stderr.contains("gen_ai.tool.call.result")
    };
    assert!(!traced(&[], &[]), "off by default");
    assert!(traced(&["--trace-redacted-results"], &[]));
    assert!(traced(&[], &[("COGNI_TRACE_REDACTED_RESULTS", "true")]));
    std::fs::write(&config, "[tools]\ntrace_redacted_results = true\n").unwrap();
    assert!(traced(&[], &[]), "the file's value");
    assert!(!traced(&["--trace-redacted-results=false"], &[]));
    assert!(!traced(&[], &[("COGNI_TRACE_REDACTED_RESULTS", "false")]));
}

/// A config or policy file is read up to 1 MiB: a path naming a device or a huge file by mistake
/// (`--config /dev/zero`, a log) is refused naming the file, where it was read until memory ran
/// out; one that is not UTF-8 text is said to be so.
#[test]
fn a_config_or_policy_file_too_large_or_not_text_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    // Valid TOML past the bound: only its size is wrong.
    let large = format!("data_dir = \"data\"\n{}", "\n".repeat(1 << 20));
    std::fs::write(dir.path().join("large.toml"), &large).unwrap();
    std::fs::write(dir.path().join("binary.toml"), b"data_dir = \"\xff\"\n").unwrap();
    for (args, expected) in [
        (
            &["tools", "list", "--config", "large.toml"][..],
            "error: cannot read config file large.toml: it is over 1 MiB, more than any config \
             file holds",
        ),
        (
            &["tools", "list", "--policy", "large.toml"],
            "error: tools.policy_file: cannot read policy file large.toml: it is over 1 MiB, \
             more than any policy file holds",
        ),
        (
            &["tools", "list", "--config", "binary.toml"],
            "error: cannot read config file binary.toml: it is not UTF-8 text",
        ),
        (
            &["tools", "list", "--policy", "binary.toml"],
            "error: tools.policy_file: cannot read policy file binary.toml: it is not UTF-8 text",
        ),
    ] {
        let stderr = refused(&cogni_in(dir.path(), args, &[]));
        assert_eq!(stderr.trim_end(), expected, "{args:?}");
    }
}

/// A `cogni.toml` of the working folder that cannot be read (a symbolic link to a file that is
/// gone, as a dotfile manager leaves one) is refused naming it, not taken for no config file,
/// which ran every command on the defaults without a word.
#[cfg(unix)]
#[test]
fn a_cogni_toml_that_is_a_dangling_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(dir.path().join("gone.toml"), dir.path().join("cogni.toml"))
        .unwrap();
    let stderr = refused(&cogni_in(dir.path(), &["tools", "list"], &[]));
    assert!(
        stderr.starts_with("error: cannot read config file cogni.toml: "),
        "{stderr}"
    );
}

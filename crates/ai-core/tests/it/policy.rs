//! The policy is data: TOML and JSON, deny by default, unknown keys refused.

use ai_core::{PolicyDecision, RunContext, ToolEffect, ToolId, ToolPolicy};

fn decide(policy: &ToolPolicy, id: &str, effect: ToolEffect) -> PolicyDecision {
    let ctx = RunContext::new("run-1", "user:alice", "tenant-1").unwrap();
    policy.decide(&ctx, &ToolId::parse(id).unwrap(), effect)
}

#[test]
fn default_denies_everything() {
    let policy = ToolPolicy::default();
    assert_eq!(
        decide(&policy, "core__a", ToolEffect::ReadOnly),
        PolicyDecision::Deny
    );
    assert_eq!(ToolPolicy::from_toml_str("").unwrap(), policy);
    assert_eq!(ToolPolicy::from_json_str("{}").unwrap(), policy);
}

#[test]
fn toml_and_json_load_the_same_policy() {
    let toml = ToolPolicy::from_toml_str(
        r#"
        allowed_tools = ["core__read", "core__write"]
        require_approval_for_effects = ["state_change"]
        [budgets]
        max_runtime_ms = 1500
        max_result_bytes = 1024
        "#,
    )
    .unwrap();
    let json = ToolPolicy::from_json_str(
        r#"{"allowed_tools": ["core__write", "core__read"],
            "require_approval_for_effects": ["state_change"],
            "budgets": {"max_runtime_ms": 1500, "max_result_bytes": 1024}}"#,
    )
    .unwrap();
    assert_eq!(toml, json);
    assert_eq!(toml.budgets.max_args_bytes, 8 * 1024);
    assert_eq!(
        decide(&toml, "core__read", ToolEffect::ReadOnly),
        PolicyDecision::Allow
    );
    assert_eq!(
        decide(&toml, "core__write", ToolEffect::StateChange),
        PolicyDecision::RequireApproval
    );
    assert_eq!(
        decide(&toml, "core__other", ToolEffect::ReadOnly),
        PolicyDecision::Deny
    );
}

#[test]
fn bad_policies_are_refused_with_the_reason() {
    let cases = [
        (r#"allowed_tool = []"#, "unknown field `allowed_tool`"),
        (
            r#"allowed_tools = ["nope"]"#,
            "`allowed_tools` entry 1 is not a valid tool id: the namespace must be",
        ),
        (
            r#"require_approval_for_effects = ["sometimes"]"#,
            "unknown variant, expected one of `read_only`",
        ),
        ("[budgets]\nmax_runtime = 1", "unknown field `max_runtime`"),
    ];
    for (text, reason) in cases {
        let err = ToolPolicy::from_toml_str(text).unwrap_err().to_string();
        assert!(err.contains(reason), "{text}: {err}");
    }
}

/// A policy that does not parse is refused saying where (a TOML file's line and key, a JSON
/// file's line and column) and what is wrong, never quoting the value it refused (a secret
/// pasted where it does not belong, say): every caller of the library gets that, not only the
/// CLI.
#[test]
fn a_bad_value_is_named_by_its_place_never_quoted() {
    let secret = "sk-live-SECRET123";
    let toml = [
        (
            format!("allowed_tools = []\n[budgets]\nmax_runtime_ms = \"{secret}\"\n"),
            "invalid tool policy: line 3 (`max_runtime_ms = …`): invalid type: string, \
             expected u64",
        ),
        (
            format!("require_approval_for_effects = [\"{secret}\"]\n"),
            "invalid tool policy: line 1 (`require_approval_for_effects = …`): unknown variant, \
             expected one of `read_only`, `state_change`, `external_side_effect`",
        ),
        (
            format!("[retry]\nmax_attempts = 2\nretryable = [\"transient\", \"{secret}\"]\n"),
            "invalid tool policy: line 3 (`retryable = …`): unknown variant, expected one of",
        ),
        (
            format!("[budgets]\n{secret}\n"),
            "invalid tool policy: line 2: ",
        ),
        (
            "[budgets]\nmax_runtim = 1\n".to_owned(),
            "invalid tool policy: line 2 (`max_runtim = …`): unknown field `max_runtim`, \
             expected one of",
        ),
    ];
    for (text, expected) in toml {
        let error = ToolPolicy::from_toml_str(&text).unwrap_err().to_string();
        assert!(error.starts_with(expected), "{text:?}: {error}");
        assert!(!error.contains("SECRET"), "{text:?}: {error}");
        assert_eq!(error.lines().count(), 1, "{error}");
    }
    let json = [
        (
            format!(
                "{{\"allowed_tools\": [],\n \"budgets\": {{\"max_runtime_ms\": \"{secret}\"}}}}"
            ),
            "invalid tool policy: line 2 column 50: invalid type: string, expected u64",
        ),
        (
            format!("{{\"require_approval_for_effects\": [\"{secret}\"]}}"),
            "invalid tool policy: line 1 column 53: unknown variant, expected one of \
             `read_only`, `state_change`, `external_side_effect`",
        ),
        (
            format!("{{\"budgets\": {secret}}}"),
            "invalid tool policy: line 1 column 13: expected value",
        ),
    ];
    for (text, expected) in json {
        let error = ToolPolicy::from_json_str(&text).unwrap_err().to_string();
        assert_eq!(error, expected, "{text:?}");
    }
}

/// Values no policy can mean are refused at load, naming the key, instead of being read as
/// something else.
#[test]
fn nonsense_values_are_refused_naming_the_key() {
    for (toml, key) in [
        ("[budgets]\nmax_runtime_ms = 0", "budgets.max_runtime_ms"),
        (
            "[budgets]\nmax_result_bytes = 0",
            "budgets.max_result_bytes",
        ),
        ("[budgets]\nmax_args_bytes = 0", "budgets.max_args_bytes"),
        ("[retry]\nmax_attempts = 0", "retry.max_attempts"),
        (
            "[retry]\nattempt_timeout_ms = 0",
            "retry.attempt_timeout_ms",
        ),
        (
            "[retry_per_tool.core__a]\nattempt_timeout_ms = 0",
            "retry_per_tool.core__a.attempt_timeout_ms",
        ),
        ("[retry]\nmultiplier = 0.5", "retry.multiplier"),
        ("[retry]\nmultiplier = nan", "retry.multiplier"),
        ("[retry]\nmultiplier = inf", "retry.multiplier"),
        (
            "[retry_per_tool.core__a]\nmultiplier = -1.0",
            "retry_per_tool.core__a.multiplier",
        ),
        ("[breaker]\nfailure_rate = 1.5", "breaker.failure_rate"),
        ("[breaker]\nfailure_rate = nan", "breaker.failure_rate"),
        (
            "[breaker]\nhalf_open_trials = 0",
            "breaker.half_open_trials",
        ),
        ("[breaker]\nwindow = 0", "breaker.window"),
        ("[breaker]\ncool_down_ms = 0", "breaker.cool_down_ms"),
    ] {
        let error = ToolPolicy::from_toml_str(toml).unwrap_err().to_string();
        assert!(error.contains(key), "{toml}: {error}");
    }
    let error = ToolPolicy::from_json_str(r#"{"breaker": {"failure_rate": -0.1}}"#)
        .unwrap_err()
        .to_string();
    assert!(error.contains("breaker.failure_rate"), "{error}");
    // The edges that mean something still load.
    let edges = "[retry]\nmax_attempts = 1\nmultiplier = 1.0\nattempt_timeout_ms = 1\n\
                 [breaker]\nfailure_rate = 1.0\nhalf_open_trials = 1\nwindow = 1";
    ToolPolicy::from_toml_str(edges).unwrap();
    // A breaker that is off has no cool-down to speak of.
    ToolPolicy::from_toml_str("[breaker]\nfailure_threshold = 0\ncool_down_ms = 0").unwrap();
}

/// A breaker that only a failure rate turns on (`failure_threshold = 0`) is on: a 0 cool-down is
/// refused, and the advice names everything that turns it off, not the threshold it already has.
#[test]
fn a_zero_cool_down_under_a_failure_rate_alone_is_refused_with_advice_that_works() {
    let toml = "[breaker]\nfailure_threshold = 0\nfailure_rate = 0.5\ncool_down_ms = 0";
    let error = ToolPolicy::from_toml_str(toml).unwrap_err().to_string();
    assert!(error.contains("breaker.cool_down_ms"), "{error}");
    assert!(
        error.contains("failure_threshold = 0 and no failure_rate"),
        "{error}"
    );
}

/// A retryable category no retry can help is refused at load, naming the key and the category as
/// the operator wrote it: the same bad arguments or a permanent failure fail again, and a
/// cancelled or refused call is never tried again, so listing them means nothing (or, for
/// `validation` and `permanent`, breaks `ToolError`'s promise that such a failure is not retried).
#[test]
fn retryable_categories_no_retry_can_help_are_refused() {
    for (toml, key, category) in [
        (
            "[retry]\nretryable = [\"transient\", \"validation\"]",
            "retry.retryable",
            "\"validation\"",
        ),
        (
            "[retry]\nretryable = [\"permanent\"]",
            "retry.retryable",
            "\"permanent\"",
        ),
        (
            "[retry]\nretryable = [\"cancelled\"]",
            "retry.retryable",
            "\"cancelled\"",
        ),
        (
            "[retry_per_tool.core__a]\nretryable = [\"timeout\", \"policy\"]",
            "retry_per_tool.core__a.retryable",
            "\"policy\"",
        ),
    ] {
        let error = ToolPolicy::from_toml_str(toml).unwrap_err().to_string();
        assert!(
            error.contains(key) && error.contains(category),
            "{toml}: {error}"
        );
    }
    let error = ToolPolicy::from_json_str(r#"{"retry": {"retryable": ["validation"]}}"#)
        .unwrap_err()
        .to_string();
    assert!(error.contains("retry.retryable"), "{error}");
    // What a retry can help still loads, and so does an empty list (never retry).
    ToolPolicy::from_toml_str(
        "[retry]\nretryable = [\"transient\", \"timeout\", \"execution\", \"unknown\"]",
    )
    .unwrap();
    ToolPolicy::from_toml_str("[retry]\nretryable = []").unwrap();
}

/// The ids a policy names that no source has are found in every tool list of the policy, each
/// once and sorted; known ones are not.
#[test]
fn unknown_tools_are_the_named_ids_no_source_has() {
    let policy = ToolPolicy::from_toml_str(
        r#"
        allowed_tools = ["core__workspace_read", "core__workspace_raed", "mcp__s__t"]
        [retry_per_tool.core__workspace_raed]
        max_attempts = 2
        [retry_per_tool.core__get_curent_time]
        max_attempts = 2
        [retry_per_tool.core__workspace_read]
        max_attempts = 2
        "#,
    )
    .unwrap();
    let known = ["core__workspace_read", "mcp__s__t"];
    let unknown: Vec<&str> = policy
        .unknown_tools(|id| known.contains(&id.as_str()))
        .into_iter()
        .map(ToolId::as_str)
        .collect();
    assert_eq!(unknown, ["core__get_curent_time", "core__workspace_raed"]);
    assert!(policy.unknown_tools(|_| true).is_empty());
    assert!(ToolPolicy::default().unknown_tools(|_| false).is_empty());
}

/// A tool given two `retry_per_tool` rules (JSON lets an object repeat a key; TOML refuses it as
/// it parses) is refused naming the second key by its position, never by its text, rather than
/// one rule silently winning.
#[test]
fn a_tool_with_two_retry_rules_is_refused() {
    let text = "{\"retry_per_tool\": {\"core__a\": {\"max_attempts\": 2},\n \"core__a\": {}}}";
    let error = ToolPolicy::from_json_str(text).unwrap_err().to_string();
    assert!(
        error.contains("`retry_per_tool` key 2 names the tool an earlier key names"),
        "{error}"
    );
    assert!(!error.contains("core__a"), "{error}");
    let toml = "[retry_per_tool.core__a]\nmax_attempts = 2\n[retry_per_tool.core__a]\n";
    assert!(ToolPolicy::from_toml_str(toml).is_err());
}

/// A malformed tool id (in `allowed_tools`, or a `retry_per_tool` key) is named by its place
/// (the line, the key and the entry's position in its list or table), never by its text: what
/// stands where an id should may be anything pasted there. The rule it breaks is given.
#[test]
fn a_bad_tool_id_is_named_by_its_place_never_quoted() {
    let secret = "sk-live-SECRET123";
    let rule = "is not a valid tool id: the namespace must be core__ or mcp__<server>__";
    let toml = [
        (
            format!("allowed_tools = [\"core__read\", \"{secret}\"]\n"),
            format!("line 1 (`allowed_tools = …`): `allowed_tools` entry 2 {rule}"),
        ),
        (
            format!(
                "require_approval_for_effects = []\nallowed_tools = [\n  \"core__read\",\n  \"core__b\",\n  \"{secret}\",\n]\n"
            ),
            format!("line 2 (`allowed_tools = …`): `allowed_tools` entry 3 {rule}"),
        ),
        // The table's first header holds the id: the key's own line is named, not the header.
        (
            format!("[retry_per_tool.{secret}]\nmax_attempts = 2\n"),
            format!("line 1: `retry_per_tool` key 1 {rule}"),
        ),
        (
            format!(
                "[retry_per_tool.core__a]\nmax_attempts = 2\n\n[retry_per_tool.\"{secret}\"]\nmax_attempts = 2\n"
            ),
            format!("line 4: `retry_per_tool` key 2 {rule}"),
        ),
        (
            format!("[retry_per_tool]\ncore__a = {{}}\n{secret} = {{ max_attempts = 2 }}\n"),
            format!("line 3: `retry_per_tool` key 2 {rule}"),
        ),
        (
            format!("retry_per_tool = {{ core__a = {{}}, {secret} = {{ max_attempts = 2 }} }}\n"),
            format!("line 1: `retry_per_tool` key 2 {rule}"),
        ),
    ];
    for (text, expected) in toml {
        let error = ToolPolicy::from_toml_str(&text).unwrap_err().to_string();
        assert_eq!(
            error,
            format!("invalid tool policy: {expected}"),
            "{text:?}"
        );
    }
    let json = [
        (
            format!("{{\"allowed_tools\": [\"core__read\", \"{secret}\"]}}"),
            format!("line 1 column 53: `allowed_tools` entry 2 {rule}"),
        ),
        (
            format!("{{\"retry_per_tool\": {{\"core__a\": {{}},\n \"{secret}\": {{}}}}}}"),
            format!("line 2 column 20: `retry_per_tool` key 2 {rule}"),
        ),
    ];
    for (text, expected) in json {
        let error = ToolPolicy::from_json_str(&text).unwrap_err().to_string();
        assert_eq!(
            error,
            format!("invalid tool policy: {expected}"),
            "{text:?}"
        );
    }
    // An id that breaks another rule is named the same way, with that rule.
    let error = ToolPolicy::from_toml_str("allowed_tools = [\"core__a.b\"]")
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "invalid tool policy: line 1 (`allowed_tools = …`): `allowed_tools` entry 1 is not a \
         valid tool id: only [a-zA-Z0-9_-] are allowed"
    );
}

/// A table written as a list of its values (which serde's derive would read in the order the
/// fields are declared) is refused, in TOML and JSON alike, also at a JSON document's root: such
/// a list names no key, so `budgets = [5]` would set a budget no line names, past the check for
/// unknown keys, and mean something else whenever a field is added or moved.
#[test]
fn a_table_written_as_a_list_of_values_is_refused() {
    for text in [
        "budgets = [5]",
        "retry = [2]",
        "breaker = [3]",
        "retry_per_tool = { core__a = [2] }",
        "[retry_per_tool]\ncore__a = []",
    ] {
        let error = ToolPolicy::from_toml_str(text).unwrap_err().to_string();
        assert!(
            error.contains("invalid type: sequence, expected a table of named keys"),
            "{text:?}: {error}"
        );
    }
    for text in [
        "[]",
        r#"[["core__a"], ["state_change"]]"#,
        r#"{"budgets": [5]}"#,
        r#"{"retry": []}"#,
        r#"{"breaker": [3]}"#,
        r#"{"retry_per_tool": {"core__a": [2]}}"#,
    ] {
        let error = ToolPolicy::from_json_str(text).unwrap_err().to_string();
        assert!(
            error.contains("invalid type: sequence, expected a table of named keys"),
            "{text:?}: {error}"
        );
    }
    // So is `retry_per_tool` itself, a table of tables, its message saying what JSON calls it.
    for error in [
        ToolPolicy::from_toml_str("retry_per_tool = [{}]").unwrap_err(),
        ToolPolicy::from_json_str(r#"{"retry_per_tool": [{}]}"#).unwrap_err(),
    ] {
        let error = error.to_string();
        assert!(
            error.contains(
                "invalid type: sequence, expected a table of retry policies keyed by tool id (an \
                 object in JSON)"
            ),
            "{error}"
        );
    }
    // The tables themselves still load, empty or not.
    let policy = ToolPolicy::from_json_str(
        r#"{"budgets": {"max_runtime_ms": 5}, "retry": {}, "retry_per_tool": {"core__a": {}}}"#,
    )
    .unwrap();
    assert_eq!(policy.budgets.max_runtime_ms, 5);
    ToolPolicy::from_toml_str("budgets = { max_runtime_ms = 5 }\n[retry_per_tool.core__a]")
        .unwrap();
}

/// So is one read by serde directly, not through the policy's loaders: a policy or one of its
/// tables in a caller's own document (a TOML table, a JSON field), or read alone. Each table
/// reads named keys only, whatever reads it; the message says what JSON calls a table too.
#[test]
fn a_table_read_by_serde_directly_is_refused_as_a_list_of_values() {
    use ai_core::{BreakerPolicy, Budgets, RetryPolicy};
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Config {
        policy: ToolPolicy,
    }
    const EXPECTED: &str =
        "invalid type: sequence, expected a table of named keys (an object in JSON)";
    let refused = |error: String, what: &str| {
        assert!(error.contains(EXPECTED), "{what}: {error}");
    };
    for text in [
        r#"{"policy": []}"#,
        r#"{"policy": [["core__a"], ["state_change"], [5, 10]]}"#,
        r#"{"policy": {"budgets": [5, 10]}}"#,
        r#"{"policy": {"retry_per_tool": {"core__a": [2]}}}"#,
    ] {
        let error = serde_json::from_str::<Config>(text).unwrap_err();
        refused(error.to_string(), text);
    }
    for text in ["policy = []", "policy = { budgets = [5, 10] }"] {
        let error = toml::from_str::<Config>(text).unwrap_err();
        refused(error.to_string(), text);
    }
    refused(
        serde_json::from_str::<ToolPolicy>("[]")
            .unwrap_err()
            .to_string(),
        "policy",
    );
    refused(
        serde_json::from_str::<Budgets>("[5, 10]")
            .unwrap_err()
            .to_string(),
        "budgets",
    );
    refused(
        serde_json::from_str::<RetryPolicy>("[2]")
            .unwrap_err()
            .to_string(),
        "retry",
    );
    refused(
        serde_json::from_str::<BreakerPolicy>("[3]")
            .unwrap_err()
            .to_string(),
        "breaker",
    );
    // Named keys still load, in either format and alone.
    let config: Config =
        serde_json::from_str(r#"{"policy": {"budgets": {"max_runtime_ms": 5}}}"#).unwrap();
    assert_eq!(config.policy.budgets.max_runtime_ms, 5);
    let config: Config =
        toml::from_str("[policy.retry_per_tool.core__a]\nmax_attempts = 2").unwrap();
    let id = ToolId::parse("core__a").unwrap();
    assert_eq!(config.policy.retry_for(&id).max_attempts, 2);
    let budgets: Budgets = serde_json::from_str(r#"{"max_args_bytes": 7}"#).unwrap();
    assert_eq!(budgets.max_args_bytes, 7);
    // Unknown keys are still refused, naming the key.
    let error = serde_json::from_str::<Budgets>(r#"{"max_runtime": 5}"#).unwrap_err();
    assert!(
        error.to_string().contains("unknown field `max_runtime`"),
        "{error}"
    );
}

/// A policy reads back, in JSON and TOML alike, exactly what it writes, every field set away
/// from its default: the compiler holds each table's reader (the `#[serde(remote)]` twins) to
/// the table's fields and their types, this to the names they are written under.
#[test]
fn a_policy_reads_back_what_it_writes() {
    use ai_core::{BreakerPolicy, Budgets, RetryPolicy, ToolErrorCategory};
    let id = |raw: &str| ToolId::parse(raw).unwrap();
    let retry = RetryPolicy {
        max_attempts: 4,
        base_delay_ms: 5,
        max_delay_ms: 6,
        multiplier: 1.5,
        jitter: false,
        attempt_timeout_ms: Some(7),
        retryable: [ToolErrorCategory::Execution].into(),
    };
    let policy = ToolPolicy {
        allowed_tools: [id("core__a"), id("mcp__s__b")].into(),
        require_approval_for_effects: [ToolEffect::StateChange].into(),
        budgets: Budgets {
            max_runtime_ms: 1,
            max_result_bytes: 2,
            max_args_bytes: 3,
        },
        retry: retry.clone(),
        retry_per_tool: [(
            id("core__a"),
            RetryPolicy {
                max_attempts: 8,
                ..retry
            },
        )]
        .into(),
        breaker: BreakerPolicy {
            failure_threshold: 9,
            cool_down_ms: 10,
            half_open_trials: 11,
            failure_rate: Some(0.25),
            window: 12,
        },
    };
    let json = serde_json::to_string(&policy).unwrap();
    assert_eq!(ToolPolicy::from_json_str(&json).unwrap(), policy, "{json}");
    let toml = toml::to_string(&policy).unwrap();
    assert_eq!(ToolPolicy::from_toml_str(&toml).unwrap(), policy, "{toml}");
}

/// A table header the TOML parser refuses before any id is read (one given twice, one left
/// unclosed, one with more on its line) is not quoted when it holds a `retry_per_tool` key that
/// is no valid tool id, however `retry_per_tool` is spelled: its line is named, as for the key's
/// other errors. A header whose ids are valid is shown, as any other header is.
#[test]
fn a_refused_header_never_quotes_a_bad_retry_key() {
    let secret = "sk-live-SECRET123";
    for (text, expected) in [
        (
            format!(
                "[retry_per_tool.\"{secret}\"]\nmax_attempts = 2\n[retry_per_tool.\"{secret}\"]\n"
            ),
            "invalid tool policy: line 3: duplicate key",
        ),
        (
            format!("[retry_per_tool.{secret}]\n[budgets]\n[retry_per_tool . {secret}]\n"),
            "invalid tool policy: line 3: duplicate key",
        ),
        (
            format!("[retry_per_tool.\"{secret}\"\nmax_attempts = 2\n"),
            "invalid tool policy: line 1: unclosed table, expected `]`",
        ),
        // `retry_per_tool` spelled through an escape, in a header that does not parse alone.
        (
            format!("[\"retry\\u005Fper_tool\".\"{secret}\"\nmax_attempts = 2\n"),
            "invalid tool policy: line 1: unclosed table, expected `]`",
        ),
        (
            format!("[\"retry\\u005Fper_tool\".\"{secret}\"] x\n"),
            "invalid tool policy: line 1: unexpected key or value, expected newline, `#`",
        ),
    ] {
        let error = ToolPolicy::from_toml_str(&text).unwrap_err().to_string();
        assert_eq!(error, expected, "{text:?}");
    }
    // A policy inside a larger document, read at its place.
    let text = format!(
        "[tools.policy.retry_per_tool.\"{secret}\"]\n[tools.policy.retry_per_tool.\"{secret}\"]\n"
    );
    let e = toml::from_str::<toml::Table>(&text).unwrap_err();
    let described =
        ToolPolicy::describe_toml_error(&text, &["tools", "policy"], e.message(), e.span());
    assert_eq!(described, "line 2: duplicate key");
    // Valid ids, and other headers, are still shown.
    let text = "[retry_per_tool.core__a]\n[retry_per_tool.core__a]\n";
    let error = ToolPolicy::from_toml_str(text).unwrap_err().to_string();
    assert_eq!(
        error,
        "invalid tool policy: line 2 (`[retry_per_tool.core__a]`): duplicate key"
    );
    let error = ToolPolicy::from_toml_str("[budgets]\n[budgets]\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "invalid tool policy: line 2 (`[budgets]`): duplicate key"
    );
}

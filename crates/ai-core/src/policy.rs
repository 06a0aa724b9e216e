//! The deny-by-default tool policy: plain data loaded from TOML or JSON (POLICY_IS_DATA).

mod named;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::{Error, RunContext, ToolEffect, ToolErrorCategory, ToolId};

/// What the policy says about one tool for one run.
///
/// Exhaustive on purpose: it is a security decision, and a catch-all arm in code that acts on it
/// could let a decision it does not know through; a new one must make every such match fail to
/// compile until it is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyDecision {
    /// The tool may be shown and run.
    Allow,
    /// The tool is neither shown nor run.
    Deny,
    /// The tool is shown, and a call to it pauses for a human's approval of its exact arguments;
    /// it runs once the run holds a matching approval.
    RequireApproval,
}

/// Per-invocation limits. Besides these, arguments and results nest at most
/// [`crate::MAX_JSON_DEPTH`] levels, a limit no policy lifts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Budgets {
    /// Wall time a tool may run before it ends as `timeout` (default 30 000).
    pub max_runtime_ms: u64,
    /// Size of the serialized, redacted result before it ends as `result_too_large` (default 32
    /// KiB).
    pub max_result_bytes: usize,
    /// Size of the raw argument JSON before it is refused as `validation` (default 8 KiB).
    pub max_args_bytes: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            max_runtime_ms: 30_000,
            max_result_bytes: 32 * 1024,
            max_args_bytes: 8 * 1024,
        }
    }
}

/// When and how a failed attempt is tried again.
///
/// Only tools that are read-only or declare themselves idempotent are ever retried; the policy
/// cannot override that. The total time across attempts is [`Budgets::max_runtime_ms`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = no retry; default 3).
    pub max_attempts: u32,
    /// Delay before the first retry (default 200).
    pub base_delay_ms: u64,
    /// Longest delay between attempts (default 5000).
    pub max_delay_ms: u64,
    /// Growth of the delay per retry (default 2.0).
    pub multiplier: f64,
    /// Full jitter: wait a uniformly random time up to the computed delay (default true).
    pub jitter: bool,
    /// Time of one attempt, at least 1; the total budget when absent.
    pub attempt_timeout_ms: Option<u64>,
    /// Failure categories worth retrying (default transient and timeout). Only `transient`,
    /// `timeout`, `execution` and `unknown` may be listed: [`ToolPolicy::check`] refuses the
    /// others, which no retry can help. The runner never retries those, also under a policy
    /// built in code that lists them without passing the check.
    pub retryable: BTreeSet<ToolErrorCategory>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            base_delay_ms: 200,
            max_delay_ms: 5_000,
            multiplier: 2.0,
            jitter: true,
            attempt_timeout_ms: None,
            retryable: [ToolErrorCategory::Transient, ToolErrorCategory::Timeout].into(),
        }
    }
}

impl RetryPolicy {
    /// The delay before retry `retry` (1 for the first retry), before jitter.
    pub fn delay_ms(&self, retry: u32) -> u64 {
        let exponent = i32::try_from(retry.saturating_sub(1)).unwrap_or(i32::MAX);
        let delay = self.base_delay_ms as f64 * self.multiplier.max(1.0).powi(exponent);
        if delay.is_finite() {
            (delay as u64).min(self.max_delay_ms)
        } else {
            self.max_delay_ms
        }
    }
}

/// When a tool's circuit opens, and how it recovers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BreakerPolicy {
    /// Consecutive failed attempts that open the circuit (0 = never: only a `failure_rate`, if
    /// set, opens it, and with neither the breaker is off; default 5).
    pub failure_threshold: u32,
    /// How long an open circuit fails fast before letting trial calls through (default 30 000).
    pub cool_down_ms: u64,
    /// Trial calls let through at once while half-open, at least 1 (default 1).
    pub half_open_trials: u32,
    /// Also open when at least this share (0.0–1.0) of the last `window` attempts failed
    /// (default: off).
    pub failure_rate: Option<f64>,
    /// The attempts the failure rate is taken over, at least 1; it applies once the window is
    /// full, and starts empty again each time the circuit opens (default 20).
    pub window: u32,
}

impl BreakerPolicy {
    /// Whether the breaker is off: neither consecutive failures (`failure_threshold = 0`) nor a
    /// `failure_rate` open the circuit, so no attempt is ever refused.
    pub(crate) fn is_off(&self) -> bool {
        self.failure_threshold == 0 && self.failure_rate.is_none()
    }
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        Self {
            failure_threshold: 5,
            cool_down_ms: 30_000,
            half_open_trials: 1,
            failure_rate: None,
            window: 20,
        }
    }
}

/// Which tools may run, which need approval, and the budgets. The default denies everything.
///
/// However it is read (its loaders, a document of the caller's holding it, serde directly), the
/// policy and each of its tables are read from named keys only: a table written as a list of
/// its values names no key, and is refused.
///
/// ```
/// use ai_core::ToolPolicy;
/// let policy = ToolPolicy::from_json_str(r#"{
///     "allowed_tools": ["core__workspace_read", "core__workspace_write"],
///     "require_approval_for_effects": ["state_change"],
///     "budgets": {"max_runtime_ms": 2000}
/// }"#).unwrap();
/// assert_eq!(policy.budgets.max_runtime_ms, 2000);
/// assert_eq!(policy.budgets.max_result_bytes, 32 * 1024);
/// assert!(ToolPolicy::from_json_str(r#"{"allowed_tool": []}"#).is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ToolPolicy {
    /// The explicit allowlist; a tool not named here is denied.
    pub allowed_tools: BTreeSet<ToolId>,
    /// Effects that need approval before a call runs.
    pub require_approval_for_effects: BTreeSet<ToolEffect>,
    /// Per-invocation limits.
    pub budgets: Budgets,
    /// The default retry policy.
    pub retry: RetryPolicy,
    /// Retry policies for single tools, replacing the default.
    pub retry_per_tool: BTreeMap<ToolId, RetryPolicy>,
    /// Circuit-breaker thresholds, per tool.
    pub breaker: BreakerPolicy,
}

/// How the error for a malformed `retry_per_tool` key begins.
const RETRY_KEY_ERROR: &str = "`retry_per_tool` key ";

/// A tool id read from a policy; a malformed one is named by where it stands (`what`: its key
/// and position, 1-based) and the rule it breaks, never by its text: a policy file is written by
/// hand, and what stands where an id should may be anything pasted there.
fn policy_tool_id<E: serde::de::Error>(
    raw: &str,
    what: std::fmt::Arguments<'_>,
) -> Result<ToolId, E> {
    ToolId::parse(raw).map_err(|error| E::custom(bad_tool_id(what, &error)))
}

/// The message for a malformed tool id at `what`, with the rule it breaks.
fn bad_tool_id(what: std::fmt::Arguments<'_>, error: &Error) -> String {
    match error {
        Error::InvalidToolId { reason, .. } => format!("{what} is not a valid tool id: {reason}"),
        _ => format!("{what} is not a valid tool id"),
    }
}

/// The first malformed `retry_per_tool` key of a TOML policy in document order, named by its
/// line and its position among the table's keys, never by its text; `None` when there is none.
/// The policy is the table at `at` in `text` (its keys from the root; none: the whole document).
fn bad_retry_key_in_toml(text: &str, at: &[&str]) -> Option<String> {
    let document = toml::de::DeTable::parse(text).ok()?;
    let mut table = document.get_ref();
    for name in at.iter().copied().chain(["retry_per_tool"]) {
        let value = table
            .iter()
            .find_map(|(key, value)| (key.get_ref() == name).then_some(value))?;
        let toml::de::DeValue::Table(inner) = value.get_ref() else {
            return None;
        };
        table = inner;
    }
    let rules = table;
    let mut keys: Vec<_> = rules.keys().collect();
    keys.sort_by_key(|key| key.span().start);
    keys.into_iter().enumerate().find_map(|(at, key)| {
        let error = ToolId::parse(key.get_ref()).err()?;
        let line = text.get(..key.span().start)?.matches('\n').count() + 1;
        let what = bad_tool_id(format_args!("{RETRY_KEY_ERROR}{}", at + 1), &error);
        Some(format!("line {line}: {what}"))
    })
}

/// Whether a table header (its line's text) names a `retry_per_tool` key of the policy at `at`
/// (as [`bad_retry_key_in_toml`] takes it) that is no valid tool id, or may: a header that does
/// not parse alone (an unclosed one) cannot be told apart when it may spell `retry_per_tool`,
/// written out or through an escape in a quoted key (`"retry\u005Fper_tool"`).
fn holds_bad_retry_key(header: &str, at: &[&str]) -> bool {
    match toml::de::DeTable::parse(header) {
        Ok(_) => bad_retry_key_in_toml(header, at).is_some(),
        Err(_) => header.contains("retry_per_tool") || header.contains('\\'),
    }
}

/// Reads `allowed_tools`, naming a malformed id by its entry's position in the list
/// ([`policy_tool_id`]).
fn tool_id_list<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeSet<ToolId>, D::Error> {
    struct Ids;
    impl<'de> serde::de::Visitor<'de> for Ids {
        type Value = BTreeSet<ToolId>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of tool ids")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut ids = BTreeSet::new();
            let mut entry = 0usize;
            while let Some(raw) = seq.next_element::<String>()? {
                entry += 1;
                ids.insert(policy_tool_id(
                    &raw,
                    format_args!("`allowed_tools` entry {entry}"),
                )?);
            }
            Ok(ids)
        }
    }
    deserializer.deserialize_seq(Ids)
}

/// Reads `retry_per_tool`, naming a malformed id, or one an earlier key names, by its key's
/// position in the table ([`policy_tool_id`]).
fn tool_id_keys<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<ToolId, RetryPolicy>, D::Error> {
    struct Rules;
    impl<'de> serde::de::Visitor<'de> for Rules {
        type Value = BTreeMap<ToolId, RetryPolicy>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a table of retry policies keyed by tool id (an object in JSON)")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut rules = BTreeMap::new();
            let mut key = 0usize;
            while let Some(raw) = map.next_key::<String>()? {
                key += 1;
                let id = policy_tool_id(&raw, format_args!("{RETRY_KEY_ERROR}{key}"))?;
                // JSON lets an object repeat a key: one rule would silently replace the other.
                if rules.contains_key(&id) {
                    return Err(serde::de::Error::custom(format_args!(
                        "{RETRY_KEY_ERROR}{key} names the tool an earlier key names"
                    )));
                }
                rules.insert(id, map.next_value()?);
            }
            Ok(rules)
        }
    }
    deserializer.deserialize_map(Rules)
}

/// Why retrying a failure of `category` cannot help, for the categories a policy may not list
/// as retryable; `None` for the ones it may. No catch-all arm: a new category must be placed.
pub(crate) fn no_retry_helps(category: ToolErrorCategory) -> Option<&'static str> {
    match category {
        ToolErrorCategory::Validation => Some("the same arguments fail the same way"),
        ToolErrorCategory::Permanent => Some("a permanent failure happens again"),
        ToolErrorCategory::Cancelled => Some("a cancelled call is never tried again"),
        ToolErrorCategory::Policy => Some("a refused call never runs"),
        ToolErrorCategory::Transient
        | ToolErrorCategory::Timeout
        | ToolErrorCategory::Execution
        | ToolErrorCategory::Unknown => None,
    }
}

impl ToolPolicy {
    /// Parses a policy from TOML; unknown keys, malformed tool ids, a table written as a list of
    /// its values, and values no policy can mean (see [`Self::check`]) are refused. A document
    /// that does not parse is refused naming the line and its key, never the value
    /// ([`crate::describe_toml_error`]). A malformed tool id is named by its key and its
    /// position, 1-based, in its list or table (`` `allowed_tools` entry 2``, `` `retry_per_tool`
    /// key 1``, on the key's own line), with the rule it breaks, never by its text.
    ///
    /// ```
    /// use ai_core::ToolPolicy;
    /// let error = ToolPolicy::from_toml_str(r#"allowed_tools = ["core__read", "sk-pasted"]"#)
    ///     .unwrap_err()
    ///     .to_string();
    /// assert_eq!(
    ///     error,
    ///     "invalid tool policy: line 1 (`allowed_tools = …`): `allowed_tools` entry 2 is not a \
    ///      valid tool id: the namespace must be core__ or mcp__<server>__",
    /// );
    /// ```
    pub fn from_toml_str(text: &str) -> Result<Self, Error> {
        let policy: Self = toml::from_str(text).map_err(|e| {
            Error::Policy(Self::describe_toml_error(text, &[], e.message(), e.span()))
        })?;
        policy.check().map(|()| policy)
    }

    /// Describes why a TOML document (`text`) holding a policy as its table at `at` (its keys
    /// from the root, as `["tools", "policy"]` for `[tools.policy]`; none: the document is the
    /// policy) did not load, as [`crate::describe_toml_error`] does, and names a malformed tool
    /// id as [`Self::from_toml_str`] does: by its line and its position, never by its text,
    /// also when it opens a table (`[tools.policy.retry_per_tool."<id>"]`), whose header the
    /// TOML error points at; a header holding one that the parser refuses (given twice, left
    /// unclosed) is named by its line alone. For an application that reads a policy inside its
    /// own TOML file; `message` and `span` are the TOML error's, as
    /// [`crate::describe_toml_error`] takes them.
    ///
    /// ```
    /// #[derive(Debug, serde::Deserialize)]
    /// struct Config { #[allow(dead_code)] policy: ai_core::ToolPolicy }
    /// let text = "[policy.retry_per_tool.\"sk-pasted\"]\nmax_attempts = 2\n";
    /// let e = toml::from_str::<Config>(text).unwrap_err();
    /// let described =
    ///     ai_core::ToolPolicy::describe_toml_error(text, &["policy"], e.message(), e.span());
    /// assert_eq!(
    ///     described,
    ///     "line 1: `retry_per_tool` key 1 is not a valid tool id: the namespace must be \
    ///      core__ or mcp__<server>__",
    /// );
    /// ```
    pub fn describe_toml_error(
        text: &str,
        at: &[&str],
        message: &str,
        span: Option<std::ops::Range<usize>>,
    ) -> String {
        // A `retry_per_tool` key is refused with the span of the whole table, which starts at
        // its first header (`[retry_per_tool.<id>]`, the id and all): the key is found again to
        // name its own line, without the header's text.
        if message.starts_with(RETRY_KEY_ERROR) {
            bad_retry_key_in_toml(text, at)
                .unwrap_or_else(|| crate::describe_toml_error(text, message, None))
        } else {
            // A header the parser refused before any id was read (given twice, left unclosed)
            // would show a malformed id it holds: such a header is named by its line alone.
            crate::toml_error::describe(text, message, span, |header| {
                !holds_bad_retry_key(header, at)
            })
        }
    }

    /// Parses a policy from JSON; unknown keys, malformed tool ids, a table (the policy itself
    /// included) written as a list of its values, and values no policy can mean (see
    /// [`Self::check`]) are refused. A document that does not parse is refused naming the
    /// line and column, never the value; a malformed tool id is named by its key and position
    /// as [`Self::from_toml_str`] names it, never by its text, and so is a `retry_per_tool` key
    /// that repeats an earlier one (TOML refuses a repeated key as it parses). A leading byte
    /// order mark (which editors write) is read past.
    pub fn from_json_str(text: &str) -> Result<Self, Error> {
        let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
        let mut document = serde_json::Deserializer::from_str(text);
        let policy = Self::deserialize(&mut document)
            .and_then(|policy| document.end().map(|()| policy))
            .map_err(|e| Error::Policy(crate::toml_error::json_place_error(&e)))?;
        policy.check().map(|()| policy)
    }

    /// Refuses, naming the key, the values no policy can mean: a zero budget, total or per
    /// attempt (every call would fail), zero attempts, a retry `multiplier` below 1 or not a
    /// finite number, a breaker `half_open_trials` or `window` of 0 (the breaker would read it
    /// as 1), a `cool_down_ms` of 0 for a breaker that is on (an open circuit would refuse
    /// nothing), a breaker `failure_rate` outside `0.0..=1.0`, and a `retryable` category no retry
    /// can help (`validation`, `permanent`, `cancelled`, `policy`), named as written. The
    /// loaders call it; a policy built in code may too.
    pub fn check(&self) -> Result<(), Error> {
        let refuse = |key: &str, why: &str| Err(Error::Policy(format!("{key}: {why}")));
        let budgets = &self.budgets;
        if budgets.max_runtime_ms == 0 {
            return refuse(
                "budgets.max_runtime_ms",
                "0 would end every call as timeout; give at least 1",
            );
        }
        for (key, bytes) in [
            ("budgets.max_result_bytes", budgets.max_result_bytes),
            ("budgets.max_args_bytes", budgets.max_args_bytes),
        ] {
            if bytes == 0 {
                return refuse(key, "0 would refuse every call; give at least 1");
            }
        }
        let retries = std::iter::once(("retry".to_owned(), &self.retry)).chain(
            self.retry_per_tool
                .iter()
                .map(|(id, retry)| (format!("retry_per_tool.{id}"), retry)),
        );
        for (table, retry) in retries {
            if retry.max_attempts == 0 {
                return refuse(
                    &format!("{table}.max_attempts"),
                    "0 attempts cannot run a tool; give at least 1 (1 = no retry)",
                );
            }
            if retry.attempt_timeout_ms == Some(0) {
                return refuse(
                    &format!("{table}.attempt_timeout_ms"),
                    "0 would end every attempt as timeout; give at least 1, or leave it out \
                     for the whole runtime budget",
                );
            }
            if let Some((category, why)) = retry
                .retryable
                .iter()
                .find_map(|&c| no_retry_helps(c).map(|why| (c, why)))
            {
                // The category as the operator wrote it: its serde name, quoted.
                let name =
                    serde_json::to_string(&category).unwrap_or_else(|_| format!("{category:?}"));
                return refuse(
                    &format!("{table}.retryable"),
                    &format!(
                        "{name} is no failure a retry can help ({why}); list only transient, \
                         timeout, execution or unknown"
                    ),
                );
            }
            // Also refuses NaN, which compares false with everything.
            if !(retry.multiplier.is_finite() && retry.multiplier >= 1.0) {
                return refuse(
                    &format!("{table}.multiplier"),
                    "the delay's growth per retry must be a finite number of at least 1.0",
                );
            }
        }
        // The breaker would read either 0 as 1.
        for (key, count) in [
            ("breaker.half_open_trials", self.breaker.half_open_trials),
            ("breaker.window", self.breaker.window),
        ] {
            if count == 0 {
                return refuse(key, "0 would be read as 1; give at least 1");
            }
        }
        if !self.breaker.is_off() && self.breaker.cool_down_ms == 0 {
            return refuse(
                "breaker.cool_down_ms",
                "0 would let every call through an open circuit at once, as if there were no \
                 breaker; give at least 1, or turn the breaker off with failure_threshold = 0 \
                 and no failure_rate",
            );
        }
        if let Some(rate) = self.breaker.failure_rate
            && !(0.0..=1.0).contains(&rate)
        {
            return refuse(
                "breaker.failure_rate",
                "a share of failed attempts, from 0.0 to 1.0",
            );
        }
        Ok(())
    }

    /// The tool ids the policy names (in `allowed_tools` and as `retry_per_tool` keys) for which
    /// `is_known` is false, sorted, each once. A rule for a tool no source has applies to
    /// nothing, so such an id is most likely a typo; whether that is an error is the caller's to
    /// decide (a tool source added later, an MCP server's, may have it).
    ///
    /// ```
    /// use ai_core::ToolPolicy;
    /// let policy = ToolPolicy::from_toml_str(
    ///     r#"allowed_tools = ["core__read", "core__raed"]
    ///        [retry_per_tool.core__wirte]"#,
    /// ).unwrap();
    /// let unknown = policy.unknown_tools(|id| ["core__read"].contains(&id.as_str()));
    /// let unknown: Vec<_> = unknown.iter().map(|id| id.as_str()).collect();
    /// assert_eq!(unknown, ["core__raed", "core__wirte"]);
    /// ```
    pub fn unknown_tools(&self, is_known: impl Fn(&ToolId) -> bool) -> Vec<&ToolId> {
        let named: BTreeSet<&ToolId> = self
            .allowed_tools
            .iter()
            .chain(self.retry_per_tool.keys())
            .collect();
        named.into_iter().filter(|id| !is_known(id)).collect()
    }

    /// The retry policy of one tool.
    pub fn retry_for(&self, id: &ToolId) -> &RetryPolicy {
        self.retry_per_tool.get(id).unwrap_or(&self.retry)
    }

    /// Decides on one tool: deny unless allowlisted, then approval by effect, else allow.
    ///
    /// The context is part of the signature so that per-actor or per-tenant rules can be added
    /// without touching callers; the allowlist does not read it today.
    pub fn decide(&self, _ctx: &RunContext, id: &ToolId, effect: ToolEffect) -> PolicyDecision {
        if !self.allowed_tools.contains(id) {
            PolicyDecision::Deny
        } else if self.require_approval_for_effects.contains(&effect) {
            PolicyDecision::RequireApproval
        } else {
            PolicyDecision::Allow
        }
    }
}

//! Binding: unusable allowlists are refused; validation never echoes values; redaction strips.

use ai_core::{
    AiEvent, Capabilities, ExecPermit, ToolEffect, ToolError, ToolErrorCode, ToolInvocationContext,
    ToolOutcome,
};
use ai_tools::{Error, ToolContract, bind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Input {
    name: String,
    #[schemars(range(min = 1, max = 10))]
    count: u32,
}

#[derive(Serialize, JsonSchema)]
struct Inner {
    shown: String,
    hidden: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    greeting: String,
    internal_token: String,
    items: Vec<Inner>,
}

/// A contract whose allowlist is given per test.
macro_rules! contract {
    ($name:ident, $allow:expr) => {
        struct $name;
        #[async_trait::async_trait]
        impl ToolContract for $name {
            type Input = Input;
            type Output = Output;
            const ID: &'static str = "core__greet";
            const DESCRIPTION: &'static str = "Greets.";
            const EFFECT: ToolEffect = ToolEffect::ReadOnly;
            const REDACTION: &'static [&'static str] = $allow;
            async fn execute(
                &self,
                _: &ExecPermit,
                input: Input,
                _: &ToolInvocationContext,
                _: &Capabilities,
            ) -> Result<Output, ToolError> {
                Ok(Output {
                    greeting: format!("hello {}", input.name),
                    internal_token: "tok-internal".into(),
                    items: (0..input.count)
                        .map(|i| Inner {
                            shown: format!("s{i}"),
                            hidden: format!("h{i}"),
                        })
                        .collect(),
                })
            }
        }
    };
}

contract!(Greet, &["greeting", "items.shown"]);
contract!(NoRedaction, &[]);
contract!(WrongPath, &["greeting", "items.missing"]);
contract!(Misspelt, &["greting"]);
contract!(PastAString, &["greeting.text"]);

#[test]
fn a_tool_without_a_usable_allowlist_cannot_be_bound() {
    let err = bind(NoRedaction).err().unwrap();
    assert!(matches!(err, Error::Redaction { .. }), "{err}");
    assert!(err.to_string().contains("it is empty"), "{err}");
    let err = bind(WrongPath).err().unwrap();
    assert!(
        err.to_string()
            .contains("\"items.missing\" is not a field of the output"),
        "{err}"
    );
}

#[test]
fn a_path_the_output_lacks_is_refused_naming_where_it_leaves_it_and_what_is_there() {
    let err = bind(Misspelt).err().unwrap().to_string();
    assert!(
        err.ends_with(
            "\"greting\" is not a field of the output; its fields are \"greeting\", \
             \"internal_token\", \"items\""
        ),
        "{err}"
    );
    let err = bind(WrongPath).err().unwrap().to_string();
    assert!(
        err.ends_with(
            "\"items.missing\" is not a field of the output: \"items\" has no field \
             \"missing\"; its fields are \"hidden\", \"shown\""
        ),
        "{err}"
    );
    let err = bind(PastAString).err().unwrap().to_string();
    assert!(
        err.ends_with(
            "\"greeting.text\" is not a field of the output: \"greeting\" holds no fields"
        ),
        "{err}"
    );
}

/// An output struct with one `u8` field per name.
macro_rules! wide {
    ($name:ident: $($field:ident)*) => {
        #[derive(Serialize, JsonSchema)]
        struct $name {
            $($field: u8,)*
        }
    };
}

wide!(Wide: f00 f01 f02 f03 f04 f05 f06 f07 f08 f09 f10 f11 f12 f13 f14 f15 f16 f17 f18 f19 f20 f21 f22 f23 f24 f25 f26 f27 f28 f29);

/// A contract whose output has more fields than a message lists.
struct WideOutput;
#[async_trait::async_trait]
impl ToolContract for WideOutput {
    type Input = Input;
    type Output = Wide;
    const ID: &'static str = "core__wide";
    const DESCRIPTION: &'static str = "Has many fields.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["f00", "f3"];
    async fn execute(
        &self,
        _: &ExecPermit,
        _: Input,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<Wide, ToolError> {
        Err(ToolError::new("never runs"))
    }
}

/// A path an output with many fields lacks is refused naming only the first of them: an output
/// type may have thousands, and the message stays one a person reads.
#[test]
fn a_path_an_output_with_many_fields_lacks_names_only_the_first_of_them() {
    let err = bind(WideOutput).err().unwrap().to_string();
    let first: Vec<String> = (0..20).map(|i| format!("\"f{i:02}\"")).collect();
    assert!(
        err.ends_with(&format!(
            "\"f3\" is not a field of the output; its fields are {}, …",
            first.join(", ")
        )),
        "{err}"
    );
    assert!(!err.contains("f20"), "{err}");
}

/// A contract whose output is a plain value: no field for an allowlist to name.
struct PlainOutput;
#[async_trait::async_trait]
impl ToolContract for PlainOutput {
    type Input = Input;
    type Output = Vec<String>;
    const ID: &'static str = "core__names";
    const DESCRIPTION: &'static str = "Names.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["name"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: Input,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<Vec<String>, ToolError> {
        Ok(vec![input.name])
    }
}

#[test]
fn an_output_without_fields_is_refused_saying_it_must_be_a_struct() {
    let err = bind(PlainOutput).err().unwrap().to_string();
    assert!(
        err.contains("\"name\" is not a field of the output, which declares none"),
        "{err}"
    );
    assert!(err.contains("struct Answer { value: String }"), "{err}");
    // An output with fields is told only that the path is not one of them.
    let err = bind(WrongPath).err().unwrap().to_string();
    assert!(!err.contains("declares none"), "{err}");
}

#[tokio::test]
async fn redaction_strips_fields_not_allowlisted() {
    let (run, _) = crate::support::run(bind(Greet).unwrap(), r#"{"name":"ada","count":2}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"greeting": "hello ada", "items": [{"shown": "s0"}, {"shown": "s1"}]})
                .into()
        }
    );
}

#[tokio::test]
async fn validation_names_the_place_and_rule_never_the_value() {
    let canary = "VALUE-CANARY-91f2";
    let cases = [
        (
            format!(r#"{{"name":"{canary}","count":99}}"#),
            "/count is too large: it must be at most 10",
        ),
        (
            format!(r#"{{"name":7,"count":1,"{canary}":1}}"#),
            "/name has the wrong type: it must be string",
        ),
        (
            format!(r#"{{"count":"{canary}"}}"#),
            "/ lacks the required property `name`",
        ),
    ];
    for (args, expected) in cases {
        let (run, events) = crate::support::run(bind(Greet).unwrap(), &args).await;
        let failure = run.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::Validation);
        assert!(
            failure.safe_message.contains(expected),
            "{}",
            failure.safe_message
        );
        let everything = format!(
            "{run:?}{events:?}{}",
            serde_json::to_string(&events).unwrap()
        );
        assert!(!everything.contains(canary), "{everything}");
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LabelsInput {
    labels: std::collections::BTreeMap<String, u32>,
    counts: Vec<i64>,
}

#[derive(Serialize, JsonSchema)]
struct LabelsOutput {
    n: usize,
}

struct Labels;

#[async_trait::async_trait]
impl ToolContract for Labels {
    type Input = LabelsInput;
    type Output = LabelsOutput;
    const ID: &'static str = "core__labels";
    const DESCRIPTION: &'static str = "Counts labels.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["n"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: LabelsInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<LabelsOutput, ToolError> {
        Ok(LabelsOutput {
            n: input.labels.len() + input.counts.len(),
        })
    }
}

/// A map key is the model's text, like a value: the place of an error names it `*`. Property
/// names and array indices come from the schema's shape and stay.
#[tokio::test]
async fn validation_never_names_a_map_key_the_model_chose() {
    let canary = "sk-live-CANARY-5b1e";
    let (run, events) = crate::support::run(
        bind(Labels).unwrap(),
        &format!(r#"{{"labels":{{"{canary}":"x"}},"counts":[1,"two"]}}"#),
    )
    .await;
    let failure = run.result.failure().unwrap();
    assert_eq!(failure.code, ToolErrorCode::Validation);
    assert_eq!(
        failure.safe_message,
        "invalid tool arguments: /counts/1 has the wrong type: it must be integer; /labels/* has \
         the wrong type: it must be integer"
    );
    let everything = format!("{run:?}{events:?}");
    assert!(!everything.contains(canary), "{everything}");
}

/// Draft-07 calls `1.0` an integer; serde's `i64` does not take it. Arguments the schema
/// accepts and the input type refuses are the model's mistake, found at validation (step 5):
/// nothing starts, nothing runs, and the message says where and what serde refused without the
/// value.
#[tokio::test]
async fn arguments_serde_refuses_after_the_schema_accepted_them_are_a_validation_failure() {
    for (counts, expected) in [
        ("1.0", "a floating point; expected i64"),
        ("1234567890e0", "a floating point; expected i64"),
    ] {
        let args = format!(r#"{{"labels":{{}},"counts":[{counts}]}}"#);
        let (run, events) = crate::support::run(bind(Labels).unwrap(), &args).await;
        let failure = run.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::Validation, "{failure:?}");
        assert_eq!(
            failure.safe_message,
            format!(
                "invalid tool arguments: /counts/0 does not fit the tool's input type: a \
                 value of the wrong type ({expected})"
            )
        );
        assert!(run.record.args.is_none() && run.record.attempts.is_empty());
        assert!(
            matches!(&events[0], AiEvent::ToolCallStart { args: None, .. }),
            "{events:?}"
        );
        let everything = format!("{run:?}{events:?}");
        assert!(!everything.contains("123456789"), "{everything}");
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DaysInput {
    days: u64,
    #[serde(default)]
    window: Option<u32>,
    #[serde(default)]
    total: Option<u128>,
}

struct Days;

#[async_trait::async_trait]
impl ToolContract for Days {
    type Input = DaysInput;
    type Output = LabelsOutput;
    const ID: &'static str = "core__days";
    const DESCRIPTION: &'static str = "Counts days.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["n"];
    async fn execute(
        &self,
        _: &ExecPermit,
        _: DaysInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<LabelsOutput, ToolError> {
        Ok(LabelsOutput { n: 1 })
    }
}

/// An integer past 64 bits (read as the nearest float, a different number) or past what the
/// field's type holds passed the schema, which says only `integer`, and failed in serde with a
/// message naming no place. It is now a validation failure naming each such place in the
/// schema's words and the range the type holds, never the number.
#[tokio::test]
async fn an_integer_out_of_its_types_range_is_refused_with_its_place() {
    let cases = [
        (
            bind(Days).unwrap(),
            r#"{"days": 184467440737095516160}"#,
            "/days is out of range: it must be an integer from 0 to 18446744073709551615",
        ),
        (
            bind(Days).unwrap(),
            r#"{"days": 1, "window": 4294967296}"#,
            "/window is out of range: it must be an integer from 0 to 4294967295",
        ),
        (
            bind(Days).unwrap(),
            r#"{"days": 1, "total": 18446744073709551616}"#,
            "/total is out of range: it must be an integer from 0 to 18446744073709551615",
        ),
        (
            bind(Labels).unwrap(),
            r#"{"labels": {"sk-CANARY": 5000000000}, "counts": [1, -99999999999999999999999]}"#,
            "/counts/1 is out of range: it must be an integer from -9223372036854775808 to \
             9223372036854775807; /labels/* is out of range: it must be an integer from 0 to \
             4294967295",
        ),
    ];
    for (tool, args, expected) in cases {
        let (run, events) = crate::support::run(tool, args).await;
        let failure = run.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::Validation, "{failure:?}");
        assert_eq!(
            failure.safe_message,
            format!("invalid tool arguments: {expected}")
        );
        assert!(run.record.args.is_none() && run.record.attempts.is_empty());
        let everything = format!("{run:?}{events:?}");
        let sent = [
            "184467440737095516160",
            "1.8446744073709552e20",
            "4294967296",
        ];
        for value in sent.into_iter().chain(["CANARY", "5000000000", "9999999"]) {
            assert!(!everything.contains(value), "{everything}");
        }
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScaleInput {
    factor: f32,
    #[serde(default)]
    weights: Vec<f32>,
}

struct Scale;

#[async_trait::async_trait]
impl ToolContract for Scale {
    type Input = ScaleInput;
    type Output = LabelsOutput;
    const ID: &'static str = "core__scale";
    const DESCRIPTION: &'static str = "Scales.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["n"];
    async fn execute(
        &self,
        _: &ExecPermit,
        _: ScaleInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<LabelsOutput, ToolError> {
        Ok(LabelsOutput { n: 1 })
    }
}

/// A number past an `f32`'s range (`1e39`, a fine JSON number) for an `f32` field passed the
/// schema, which says only `number`; serde read it as infinity, wrote it back as `null`, and
/// could not read that back: the call failed `execution`, blaming the tool's input type for the
/// model's number. It is now a validation failure naming the place and the range, never the
/// number. A number within the range is taken.
#[tokio::test]
async fn a_number_out_of_an_f32s_range_is_refused_with_its_place() {
    let (run, events) = crate::support::run(
        bind(Scale).unwrap(),
        r#"{"factor": 1e39, "weights": [0.5, -7e38]}"#,
    )
    .await;
    let failure = run.result.failure().unwrap();
    assert_eq!(failure.code, ToolErrorCode::Validation, "{failure:?}");
    assert_eq!(
        failure.safe_message,
        "invalid tool arguments: /factor is out of range: it must be a number from \
         -3.4028235e38 to 3.4028235e38; /weights/1 is out of range: it must be a number from \
         -3.4028235e38 to 3.4028235e38"
    );
    let everything = format!("{run:?}{events:?}");
    for value in ["1e39", "7e38", "e+38", "e+39", "inf"] {
        assert!(!everything.contains(value), "{everything}");
    }
    let (run, _) = crate::support::run(
        bind(Scale).unwrap(),
        r#"{"factor": 3.4e38, "weights": [0.5]}"#,
    )
    .await;
    assert!(run.result.failure().is_none(), "{:?}", run.result);
}

#[derive(Serialize, JsonSchema)]
struct MaybeOutput {
    first: Option<Inner>,
    rest: Vec<Option<Inner>>,
}

struct Maybe;

#[async_trait::async_trait]
impl ToolContract for Maybe {
    type Input = Input;
    type Output = MaybeOutput;
    const ID: &'static str = "core__maybe";
    const DESCRIPTION: &'static str = "Maybe greets.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["first.shown", "rest.shown"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: Input,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<MaybeOutput, ToolError> {
        let inner = |i: u32| Inner {
            shown: format!("s{i}"),
            hidden: format!("h{i}"),
        };
        Ok(MaybeOutput {
            first: Some(inner(0)),
            rest: (1..input.count).map(|i| Some(inner(i))).collect(),
        })
    }
}

/// An optional struct in the output can have its fields allowlisted one by one, like any
/// other struct: allowing the whole of it would show what it hides.
#[tokio::test]
async fn fields_of_optional_output_structs_can_be_allowlisted() {
    let (run, _) = crate::support::run(bind(Maybe).unwrap(), r#"{"name":"ada","count":2}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"first": {"shown": "s0"}, "rest": [{"shown": "s1"}]}).into()
        }
    );
}

#[derive(Serialize, JsonSchema)]
struct HeadersOutput {
    status: String,
    #[serde(flatten)]
    headers: std::collections::BTreeMap<String, String>,
}

struct Fetch;

#[async_trait::async_trait]
impl ToolContract for Fetch {
    type Input = Input;
    type Output = HeadersOutput;
    const ID: &'static str = "core__fetch";
    const DESCRIPTION: &'static str = "Fetches.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["status"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: Input,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<HeadersOutput, ToolError> {
        // The map's keys come from outside (a server's headers, say).
        let mut headers = std::collections::BTreeMap::new();
        headers.insert(input.name, "sk-live-CANARY-77aa".to_owned());
        Ok(HeadersOutput {
            status: "ok".into(),
            headers,
        })
    }
}

/// A flattened map whose key repeats an allowlisted field's name would, serialized, replace that
/// field's value with its own (the last key wins), and redaction would then show it under the
/// allowlisted name.
#[tokio::test]
async fn a_flattened_key_cannot_stand_in_for_an_allowlisted_field() {
    let (run, events) =
        crate::support::run(bind(Fetch).unwrap(), r#"{"name":"status","count":1}"#).await;
    let everything = format!("{run:?}{events:?}");
    assert!(!everything.contains("CANARY"), "{everything}");
    let failure = run.result.failure().unwrap();
    assert_eq!(failure.code, ToolErrorCode::Execution, "{failure:?}");
    assert_eq!(
        failure.safe_message,
        "the tool failed: the tool output repeats a field name, so it cannot be redacted"
    );
    let (run, _) = crate::support::run(bind(Fetch).unwrap(), r#"{"name":"etag","count":1}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"status": "ok"}).into()
        }
    );
}

#[derive(Serialize, JsonSchema)]
struct SkippedStatusOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(flatten)]
    headers: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize, JsonSchema)]
struct NestedSkippedStatusOutput {
    inner: SkippedStatusOutput,
}

/// A contract of `Input` whose output and allowlist are given, answering with `$value`.
macro_rules! output_contract {
    ($name:ident, $output:ty, $allow:expr, $value:expr) => {
        struct $name;
        #[async_trait::async_trait]
        impl ToolContract for $name {
            type Input = Input;
            type Output = $output;
            const ID: &'static str = "core__fetch";
            const DESCRIPTION: &'static str = "Fetches.";
            const EFFECT: ToolEffect = ToolEffect::ReadOnly;
            const REDACTION: &'static [&'static str] = $allow;
            async fn execute(
                &self,
                _: &ExecPermit,
                _: Input,
                _: &ToolInvocationContext,
                _: &Capabilities,
            ) -> Result<$output, ToolError> {
                Ok($value)
            }
        }
    };
}

fn skipped_status() -> SkippedStatusOutput {
    // No status: the map's `status` key is the only one, so nothing repeats.
    SkippedStatusOutput {
        status: None,
        headers: [("status".to_owned(), "sk-live-CANARY-77aa".to_owned())].into(),
    }
}

output_contract!(
    SkippedStatus,
    SkippedStatusOutput,
    &["status"],
    skipped_status()
);
output_contract!(
    NestedSkippedStatus,
    NestedSkippedStatusOutput,
    &["inner.status"],
    NestedSkippedStatusOutput {
        inner: skipped_status()
    }
);

/// A field the output may leave out (`skip_serializing_if`) beside a flattened map: with the
/// field left out, a key of the map spelled like it repeats nothing, and would be shown under
/// the allowlisted name. Such an allowlist is refused at binding, at any depth.
#[test]
fn a_field_a_flattened_map_could_stand_in_for_cannot_be_allowlisted() {
    for (err, path) in [
        (bind(SkippedStatus).err().unwrap(), "\"status\""),
        (bind(NestedSkippedStatus).err().unwrap(), "\"inner.status\""),
    ] {
        assert!(matches!(err, Error::Redaction { .. }), "{err}");
        let message = err.to_string();
        assert!(
            message.contains(&format!(
                "{path} names `status`, which the output may leave out while a map flattened \
                 beside it takes any key"
            )),
            "{message}"
        );
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct AliasInput {
    /// A connection under another name: the schema shows `conn` only.
    #[serde(alias = "connectionId")]
    conn: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct AliasOutput {
    got: bool,
}

struct Aliased;

#[async_trait::async_trait]
impl ToolContract for Aliased {
    type Input = AliasInput;
    type Output = AliasOutput;
    const ID: &'static str = "core__aliased";
    const DESCRIPTION: &'static str = "Takes a connection it should not.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["got"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: AliasInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<AliasOutput, ToolError> {
        Ok(AliasOutput {
            got: input.conn.is_some(),
        })
    }
}

/// A connection id never arrives as an argument (invariant CONNECTION_ID_VIA_CONTEXT), also
/// where the schema cannot see it: a serde alias, an unknown field a type ignores, a map key.
#[tokio::test]
async fn a_connection_id_in_the_arguments_is_refused() {
    let cases = [
        (
            bind(Aliased).unwrap(),
            r#"{"connectionId":"conn-CANARY"}"#,
            "/",
        ),
        (
            bind(Aliased).unwrap(),
            r#"{"conn":null,"connection_id":"conn-CANARY"}"#,
            "/",
        ),
        (
            bind(Labels).unwrap(),
            r#"{"labels":{"CONNECTION-ID":1},"counts":[]}"#,
            "/labels",
        ),
    ];
    for (tool, args, at) in cases {
        let (run, events) = crate::support::run(tool, args).await;
        let failure = run.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::Validation, "{args}");
        assert_eq!(
            failure.safe_message,
            format!(
                "invalid tool arguments: {at} holds a connection id; connections come from the \
                 invocation context, never from arguments"
            )
        );
        let everything = format!("{run:?}{events:?}");
        assert!(!everything.contains("CANARY"), "{everything}");
    }
    let (run, _) = crate::support::run(bind(Aliased).unwrap(), r#"{"conn":"x"}"#).await;
    assert!(run.result.failure().is_none(), "{:?}", run.result);
}

/// A linked list as input: the root type refers to itself.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Chain {
    name: String,
    next: Option<Box<Chain>>,
}

/// A linked list as output, with a field that must not be shown.
#[derive(Serialize, JsonSchema)]
struct ChainOut {
    name: String,
    secret: String,
    next: Option<Box<ChainOut>>,
}

struct Relink;

#[async_trait::async_trait]
impl ToolContract for Relink {
    type Input = Chain;
    type Output = ChainOut;
    const ID: &'static str = "core__relink";
    const DESCRIPTION: &'static str = "Copies a chain.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["name", "next.name", "next.next.name"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: Chain,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<ChainOut, ToolError> {
        fn copy(chain: Chain) -> ChainOut {
            ChainOut {
                secret: format!("sk-CANARY-{}", chain.name),
                name: chain.name,
                next: chain.next.map(|next| Box::new(copy(*next))),
            }
        }
        Ok(copy(input))
    }
}

/// `Option<Box<Self>>` in a root type was refused at binding (`anyOf` of `"$ref": "#"` and
/// `null`, for the input and the output alike). Now such a tool binds, its input is checked at
/// every depth with the place named, and its allowlist reaches into the nested structs.
#[tokio::test]
async fn a_recursive_root_type_is_bound_checked_and_redacted() {
    let tool = bind(Relink).unwrap();
    let (run, events) = crate::support::run(
        tool.clone(),
        r#"{"name":"a","next":{"name":"b","next":{"name":"c","next":{"name":"d","next":null}}}}"#,
    )
    .await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"name": "a", "next": {"name": "b", "next": {"name": "c"}}}).into()
        }
    );
    let everything = format!("{run:?}{events:?}");
    assert!(!everything.contains("CANARY"), "{everything}");
    let (run, _) = crate::support::run(
        tool,
        r#"{"name":"a","next":{"name":"b","next":{"name":7,"VALUE-CANARY":1}}}"#,
    )
    .await;
    let failure = run.result.failure().unwrap();
    assert_eq!(failure.code, ToolErrorCode::Validation);
    assert_eq!(
        failure.safe_message,
        "invalid tool arguments: /next/next/name has the wrong type: it must be string; \
         /next/next holds a property it does not take; it takes `name`, `next`"
    );
}

/// [`Relink`] with its allowlist given per test.
macro_rules! relink {
    ($name:ident, $allow:expr) => {
        struct $name;

        #[async_trait::async_trait]
        impl ToolContract for $name {
            type Input = Chain;
            type Output = ChainOut;
            const ID: &'static str = "core__relink";
            const DESCRIPTION: &'static str = "Copies a chain.";
            const EFFECT: ToolEffect = ToolEffect::ReadOnly;
            const REDACTION: &'static [&'static str] = $allow;
            async fn execute(
                &self,
                permit: &ExecPermit,
                input: Chain,
                ctx: &ToolInvocationContext,
                caps: &Capabilities,
            ) -> Result<ChainOut, ToolError> {
                Relink.execute(permit, input, ctx, caps).await
            }
        }
    };
}

relink!(RelinkAll, &["next*.name"]);
relink!(RelinkName, &["name*.name"]);
relink!(RelinkChain, &["next*"]);
relink!(RelinkInner, &["next.next*"]);
relink!(RelinkWildcard, &["*"]);
relink!(RelinkInnerWildcard, &["next.*.name"]);

/// A recursive field was allowlisted once per depth shown (`next.name`, `next.next.name`, …),
/// so a deeper value lost its names. `next*.name` names them at every depth, and nothing else:
/// the secret stays hidden throughout. A `field*` must name a field holding its own type.
#[tokio::test]
async fn a_repeated_allowlist_field_reaches_every_depth() {
    let (run, events) = crate::support::run(
        bind(RelinkAll).unwrap(),
        r#"{"name":"a","next":{"name":"b","next":{"name":"c","next":{"name":"d","next":null}}}}"#,
    )
    .await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"name": "a", "next": {"name": "b", "next": {"name": "c",
                "next": {"name": "d", "next": null}}}})
            .into()
        }
    );
    let everything = format!("{run:?}{events:?}");
    assert!(!everything.contains("CANARY"), "{everything}");
    let Err(refused) = bind(RelinkName) else {
        panic!("`name*.name` was bound");
    };
    assert_eq!(
        refused.to_string(),
        "tool core__relink: invalid redaction allowlist: \"name*.name\" is not a field of the \
         output (a `field*` names a field that holds the type it is in)"
    );
}

/// A path that ends in `field*` reaches, among others, the value the path before it names (the
/// field followed no times), so it kept that value whole: `next*` kept the whole output, the
/// secret included, although it reads as "every `next`". Such a path names nothing more than
/// the path before it, so it is refused, saying what to write instead.
#[test]
fn an_allowlist_path_ending_in_a_repeated_field_is_refused() {
    for (refused, path) in [
        (bind(RelinkChain), "next*"),
        (bind(RelinkInner), "next.next*"),
    ] {
        let Err(refused) = refused else {
            panic!("`{path}` was bound");
        };
        assert_eq!(
            refused.to_string(),
            format!(
                "tool core__relink: invalid redaction allowlist: \"{path}\" ends in a \
                 `field*`, which keeps whole what the path before it reaches (the whole output \
                 at the root): name what to keep after it, as in \"next*.name\""
            )
        );
    }
}

/// A lone `*` reads as a wildcard ("everything", "any field"), which the allowlist does not
/// have: it was refused as a `field*` ending the path, or as a field the output does not have
/// "that holds the type it is in", neither of which the path says. It is refused saying that
/// an allowlist has no wildcard.
#[test]
fn an_allowlist_path_with_a_lone_star_is_refused_as_no_wildcard() {
    for (refused, path) in [
        (bind(RelinkWildcard), "*"),
        (bind(RelinkInnerWildcard), "next.*.name"),
    ] {
        let Err(refused) = refused else {
            panic!("`{path}` was bound");
        };
        assert_eq!(
            refused.to_string(),
            format!(
                "tool core__relink: invalid redaction allowlist: \"{path}\" holds a lone `*`, \
                 but an allowlist has no wildcard: name each field that may be shown (a `*` \
                 right after a field's name, as in \"next*.name\", follows a field that holds \
                 its own type)"
            )
        );
    }
}

#[derive(Serialize, JsonSchema)]
struct TotalsOutput {
    /// Per account.
    totals: std::collections::BTreeMap<String, Vec<u128>>,
    count: u64,
}

struct Totals;

#[async_trait::async_trait]
impl ToolContract for Totals {
    type Input = Input;
    type Output = TotalsOutput;
    const ID: &'static str = "core__totals";
    const DESCRIPTION: &'static str = "Totals.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["totals", "count"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: Input,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<TotalsOutput, ToolError> {
        // `u64::MAX`, or past it when asked for more than one.
        let total = u128::from(u64::MAX) + u128::from(input.count) - 1;
        Ok(TotalsOutput {
            totals: [(input.name, vec![7, total])].into(),
            count: u64::MAX,
        })
    }
}

/// A `u128` past 64 bits was read back from the serialized output as the nearest `f64` and
/// shown to the model as a different number. It is now refused, the place named in the
/// schema's words (the map key the tool chose as `*`), never the number; `u64::MAX` passes
/// exactly.
#[tokio::test]
async fn an_output_integer_beyond_64_bits_is_refused_never_rounded() {
    let (run, _) = crate::support::run(bind(Totals).unwrap(), r#"{"name":"acct","count":1}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"totals": {"acct": [7, u64::MAX]}, "count": u64::MAX}).into()
        }
    );
    let (run, events) =
        crate::support::run(bind(Totals).unwrap(), r#"{"name":"acct-CANARY","count":3}"#).await;
    let failure = run.result.failure().unwrap();
    assert_eq!(failure.code, ToolErrorCode::Execution, "{failure:?}");
    assert_eq!(
        failure.safe_message,
        "the tool failed: the tool output does not fit: /totals/*/1 is an integer beyond 64 \
         bits, which cannot be passed on exactly"
    );
    let everything = format!("{:?}{:?}", run.result, run.record.result);
    assert!(!everything.contains("CANARY"), "{everything}");
    assert!(!everything.contains("18446744073709551617"), "{everything}");
    assert!(!everything.contains("18446744073709551616"), "{everything}");
    assert!(
        !everything.contains("1.8446744073709552e19"),
        "{everything}"
    );
    assert!(
        !format!("{events:?}").contains("1.8446744073709552e19"),
        "{events:?}"
    );
}

fn ten() -> u32 {
    10
}

/// An input type that ignores keys it does not know, with a default and a flattened map.
#[derive(Deserialize, Serialize, JsonSchema)]
struct LooseInput {
    name: String,
    #[serde(default = "ten")]
    limit: u32,
    tags: std::collections::HashSet<String>,
    #[serde(default)]
    inner: Option<LooseInner>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct LooseInner {
    #[serde(flatten)]
    labels: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize, JsonSchema)]
struct LooseOutput {
    seen: String,
}

struct Loose;

#[async_trait::async_trait]
impl ToolContract for Loose {
    type Input = LooseInput;
    type Output = LooseOutput;
    const ID: &'static str = "core__loose";
    const DESCRIPTION: &'static str = "Takes what it knows.";
    const EFFECT: ToolEffect = ToolEffect::StateChange;
    const REDACTION: &'static [&'static str] = &["seen"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: LooseInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<LooseOutput, ToolError> {
        Ok(LooseOutput {
            seen: format!("{} {}", input.name, input.limit),
        })
    }
}

const LOOSE_ARGS: &str = r#"{"name":"a","extra":"sk-live-CANARY","tags":["q","w","e","r","t","y","u","i"],"inner":{"k":"v"}}"#;

/// The validated arguments are what the type reads, written back: a key it ignores (which may
/// hold anything) never reaches the start event, the record or the approval; the default serde
/// fills in is shown, as the approval must show what runs; a flattened map keeps its keys.
#[tokio::test]
async fn validated_arguments_are_what_the_input_type_reads() {
    let tool = bind(Loose).unwrap();
    let validated = tool
        .validate_input(serde_json::from_str(LOOSE_ARGS).unwrap())
        .unwrap();
    assert_eq!(
        validated,
        json!({"name": "a", "limit": 10, "tags": ["q", "w", "e", "r", "t", "y", "u", "i"],
            "inner": {"k": "v"}})
    );
    // Re-validating the same arguments (as a resumed call does) gives the same bytes, the
    // elements of a `HashSet` included.
    for _ in 0..20 {
        let again = tool
            .validate_input(serde_json::from_str(LOOSE_ARGS).unwrap())
            .unwrap();
        assert_eq!(
            ai_core::canonical_json(&again),
            ai_core::canonical_json(&validated)
        );
    }
    let (run, events) = crate::support::run(tool, LOOSE_ARGS).await;
    assert_eq!(run.record.args.as_deref(), Some(&validated));
    let AiEvent::ToolCallStart {
        args: Some(shown), ..
    } = &events[0]
    else {
        panic!("{events:?}");
    };
    assert_eq!(**shown, validated);
    let everything = format!("{run:?}{events:?}");
    assert!(!everything.contains("CANARY"), "{everything}");
}

/// Steps to take in order, none twice: a `Vec` whose schema says `uniqueItems`, as a set's does.
#[derive(Deserialize, Serialize, JsonSchema)]
struct PlanInput {
    #[schemars(extend("uniqueItems" = true))]
    steps: Vec<String>,
    done: std::collections::BTreeSet<u32>,
    owners: Vec<std::collections::HashSet<String>>,
    #[serde(default)]
    labels: std::collections::HashSet<PlanLabel>,
}

/// A set element that serde fills in, so the model's elements are not the ones written back.
#[derive(Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
struct PlanLabel {
    name: String,
    #[serde(default)]
    weight: u32,
}

struct Plan;

#[async_trait::async_trait]
impl ToolContract for Plan {
    type Input = PlanInput;
    type Output = LooseOutput;
    const ID: &'static str = "core__plan";
    const DESCRIPTION: &'static str = "Plans.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["seen"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: PlanInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<LooseOutput, ToolError> {
        Ok(LooseOutput {
            seen: input.steps.join(" "),
        })
    }
}

/// Every array whose schema says `uniqueItems` was sorted, meant for sets (whose `HashSet`
/// writes a new order each time) but a `Vec` given the keyword too: the tool got the model's
/// steps in another order than the model asked. Such an array now keeps the order the model
/// wrote: a `Vec`'s order is what the tool runs, and a set's is fixed by the arguments alone.
#[tokio::test]
async fn arrays_of_unique_items_keep_the_order_the_model_wrote() {
    let tool = bind(Plan).unwrap();
    let args = json!({"steps": ["c", "a", "b"], "done": [3, 1, 2],
        "owners": [["z", "y", "x", "w", "v", "u"], ["b", "a"]]});
    let with_labels = |labels| {
        let mut args = args.clone();
        args["labels"] = labels;
        args
    };
    for _ in 0..20 {
        assert_eq!(
            tool.validate_input(args.clone()).unwrap(),
            with_labels(json!([]))
        );
        // Elements serde changed keep the place of the model's that alone shares their
        // required fields, whatever order the set wrote.
        let labels = json!([{"name": "d"}, {"name": "b"}, {"name": "c"}, {"name": "a"}]);
        assert_eq!(
            tool.validate_input(with_labels(labels)).unwrap(),
            with_labels(
                json!([{"name": "d", "weight": 0}, {"name": "b", "weight": 0},
                {"name": "c", "weight": 0}, {"name": "a", "weight": 0}])
            )
        );
        // One that two of the model's share them with follows in canonical JSON order.
        let labels = json!([{"name": "d"}, {"name": "b", "x": 1}, {"name": "b", "x": 2},
            {"name": "c", "weight": 0}, {"name": "a"}]);
        assert_eq!(
            tool.validate_input(with_labels(labels)).unwrap(),
            with_labels(
                json!([{"name": "d", "weight": 0}, {"name": "c", "weight": 0},
                {"name": "a", "weight": 0}, {"name": "b", "weight": 0}])
            )
        );
    }
    let (run, _) = crate::support::run(tool, &args.to_string()).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"seen": "c a b"}).into()
        }
    );
}

/// Teams to call in order, none twice, each a set of people: sets inside an array of unique
/// items.
#[derive(Deserialize, Serialize, JsonSchema)]
struct RotaInput {
    #[schemars(extend("uniqueItems" = true))]
    teams: Vec<RotaTeam>,
}

/// A team: a `HashSet`, which writes its elements in a new order on each deserialization.
#[derive(Deserialize, Serialize, JsonSchema)]
struct RotaTeam {
    people: std::collections::HashSet<String>,
}

struct Rota;

#[async_trait::async_trait]
impl ToolContract for Rota {
    type Input = RotaInput;
    type Output = LooseOutput;
    const ID: &'static str = "core__rota";
    const DESCRIPTION: &'static str = "Calls teams in turn.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["seen"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: RotaInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<LooseOutput, ToolError> {
        Ok(LooseOutput {
            seen: input.teams.len().to_string(),
        })
    }
}

/// The elements of an array of unique items were paired with the model's by their JSON as serde
/// wrote them, so an element holding a set matched the model's only when the set happened to
/// write the model's order: otherwise it lost its place (moved to the end) and its set took
/// another order, and the same arguments gave other bytes from one validation to the next. The
/// pairing no longer depends on the order a set inside an element writes.
#[test]
fn elements_holding_sets_keep_the_models_order_on_every_validation() {
    let tool = bind(Rota).unwrap();
    let args = json!({"teams": [
        {"people": ["zoe", "yan", "xia", "wil", "val", "uma", "tom", "sam"]},
        {"people": ["bob", "ann"]},
        {"people": ["kim", "joe", "ida", "hal", "gus", "fay", "eve", "dan"]}
    ]});
    for _ in 0..20 {
        assert_eq!(tool.validate_input(args.clone()).unwrap(), args);
    }
}

/// Batches to run in order, none twice, each its steps in order, none twice: arrays of unique
/// items inside one, whose order the tool runs.
#[derive(Deserialize, Serialize, JsonSchema)]
struct QueueInput {
    #[schemars(extend("uniqueItems" = true))]
    batches: Vec<QueueBatch>,
}

/// One batch: a `Vec` of unique steps, whose order is what runs.
#[derive(Deserialize, Serialize, JsonSchema)]
struct QueueBatch {
    #[schemars(extend("uniqueItems" = true))]
    steps: Vec<String>,
}

struct Queue;

#[async_trait::async_trait]
impl ToolContract for Queue {
    type Input = QueueInput;
    type Output = LooseOutput;
    const ID: &'static str = "core__queue";
    const DESCRIPTION: &'static str = "Runs batches in turn.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["seen"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: QueueInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<LooseOutput, ToolError> {
        let batches: Vec<String> = input.batches.iter().map(|b| b.steps.join("")).collect();
        Ok(LooseOutput {
            seen: batches.join(" "),
        })
    }
}

/// Two elements of an array of unique items that differ only in the order of an array of unique
/// items inside them were paired with one element of the model's, the last: both took its
/// inner order, so the tool got `["b", "a"]` twice where the model sent `["a", "b"]` then
/// `["b", "a"]` (and a set of them would have read back as one element). Elements alike but for
/// such an order are now paired with the model's one each, in order.
#[tokio::test]
async fn elements_alike_but_for_an_inner_order_keep_their_own() {
    let tool = bind(Queue).unwrap();
    let args = json!({"batches": [{"steps": ["a", "b"]}, {"steps": ["b", "a"]}]});
    assert_eq!(tool.validate_input(args.clone()).unwrap(), args);
    let (run, _) = crate::support::run(tool, &args.to_string()).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"seen": "ab ba"}).into()
        }
    );
}

/// OpenAI's strict form makes every property required and an optional one nullable, so a model
/// held to it sends `null` for what it leaves out: such a `null` reads as left out (the default
/// is filled in), while a `null` for a required property is still refused.
#[tokio::test]
async fn a_null_for_an_optional_property_reads_as_left_out() {
    let tool = bind(Loose).unwrap();
    let validated = tool
        .validate_input(json!({"name": "a", "limit": null, "tags": ["x"], "inner": null}))
        .unwrap();
    assert_eq!(
        validated,
        json!({"name": "a", "limit": 10, "tags": ["x"], "inner": null})
    );
    let (run, _) = crate::support::run(tool, r#"{"name":null,"tags":[]}"#).await;
    assert_eq!(
        run.result.failure().map(|f| f.code),
        Some(ToolErrorCode::Validation),
        "{run:?}"
    );
}

/// Optional fields whose schema takes `null` by its type but refuses it by a `const` or an
/// `enum` (an `Option` given one by `extend`): the strict form adds `null` to both, so a strict
/// model sends it for a field it leaves out.
#[derive(Deserialize, Serialize, JsonSchema)]
struct PinnedInput {
    #[schemars(extend("const" = "fast"))]
    mode: Option<String>,
    #[schemars(extend("enum" = ["a", "b"]))]
    level: Option<String>,
}

struct Pinned;

#[async_trait::async_trait]
impl ToolContract for Pinned {
    type Input = PinnedInput;
    type Output = LooseOutput;
    const ID: &'static str = "core__pinned";
    const DESCRIPTION: &'static str = "Runs in its one mode.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["seen"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: PinnedInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<LooseOutput, ToolError> {
        Ok(LooseOutput {
            seen: format!("{:?} {:?}", input.mode, input.level),
        })
    }
}

/// A `null` for an optional property whose type takes `null` but whose `const` or `enum` does
/// not reads as left out, as for one whose type refuses it: the strict form (wire-openai) adds
/// `null` to the `const`'s enum and to the `enum`, and a strict model sends it for the property
/// left out. The schema's own values are still held to it.
#[test]
fn a_null_refused_by_a_const_or_enum_reads_as_left_out() {
    let tool = bind(Pinned).unwrap();
    let spec = &tool.spec().input_schema;
    assert_eq!(
        spec["properties"]["mode"],
        json!({"type": ["string", "null"], "const": "fast"})
    );
    assert_eq!(
        tool.validate_input(json!({"mode": null, "level": null}))
            .unwrap(),
        json!({"mode": null, "level": null})
    );
    assert_eq!(
        tool.validate_input(json!({"mode": "fast", "level": "b"}))
            .unwrap(),
        json!({"mode": "fast", "level": "b"})
    );
    for (refused, field) in [
        (json!({"mode": "slow"}), "/mode"),
        (json!({"level": "c"}), "/level"),
    ] {
        let error = tool.validate_input(refused).unwrap_err();
        assert!(error.safe_message().starts_with(field), "{error:?}");
    }
}

/// An approval is asked for, and later checked, over the validated arguments: the hash the
/// user approved is the one the resumed call computes from the same raw arguments.
#[tokio::test]
async fn an_approval_names_the_validated_arguments_and_matches_on_resume() {
    use ai_core::{
        CancellationToken, RunContext, StaticToolSource, ToolCall, ToolCallId, ToolCatalog,
        ToolPolicy, ToolRunner, canonical_json, sha256_hex,
    };
    use std::sync::{Arc, Mutex};
    let tool = bind(Loose).unwrap();
    let validated = tool
        .validate_input(serde_json::from_str(LOOSE_ARGS).unwrap())
        .unwrap();
    let policy = ToolPolicy {
        allowed_tools: [tool.spec().id.clone()].into(),
        require_approval_for_effects: [ToolEffect::StateChange].into(),
        ..ToolPolicy::default()
    };
    let mut ctx = RunContext::new("run-1", "user:test", "tenant-1").unwrap();
    let source = Arc::new(StaticToolSource::new(vec![tool]).unwrap());
    let catalog = ToolCatalog::build(source.as_ref(), &policy, &ctx).unwrap();
    let runner = ToolRunner::new(
        source,
        Arc::new(policy),
        Arc::new(crate::support::FixedClock(1)),
    );
    let call = ToolCall {
        id: ToolCallId::new("call_1").unwrap(),
        name: "core__loose".into(),
        arguments: LOOSE_ARGS.into(),
    };
    let events = Mutex::new(Vec::new());
    let sink = |e: AiEvent| events.lock().unwrap().push(e);
    let paused = runner
        .run_tool(&call, &ctx, &catalog, &sink, &CancellationToken::new())
        .await;
    let ToolOutcome::ApprovalRequired { args_hash } = paused.result.outcome else {
        panic!("{:?}", paused.result);
    };
    // The documented hash: the tool's id, a line break, the canonical validated arguments.
    let named = format!("core__loose\n{}", canonical_json(&validated));
    assert_eq!(args_hash, sha256_hex(named.as_bytes()));
    assert!(
        matches!(&events.lock().unwrap()[0],
            AiEvent::ApprovalRequired { args, .. } if **args == validated),
        "{events:?}"
    );
    let asked = format!("{:?}{events:?}", paused.record);
    assert!(!asked.contains("CANARY"), "{asked}");
    ctx.approvals.insert(call.id.clone(), args_hash);
    let resumed = runner
        .run_tool(&call, &ctx, &catalog, &sink, &CancellationToken::new())
        .await;
    assert_eq!(
        resumed.result.outcome,
        ToolOutcome::Ok {
            value: json!({"seen": "a 10"}).into()
        }
    );
}

/// An input type whose `Serialize` does not mirror its `Deserialize`: an empty note is left
/// out when written, but reading it back requires it.
#[derive(Deserialize, Serialize, JsonSchema)]
struct LopsidedInput {
    #[serde(skip_serializing_if = "String::is_empty")]
    note: String,
}

struct Lopsided;

#[async_trait::async_trait]
impl ToolContract for Lopsided {
    type Input = LopsidedInput;
    type Output = LooseOutput;
    const ID: &'static str = "core__lopsided";
    const DESCRIPTION: &'static str = "Writes what it cannot read.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["seen"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: LopsidedInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<LooseOutput, ToolError> {
        Ok(LooseOutput { seen: input.note })
    }
}

/// Arguments the input type cannot read back once written are the tool's fault, not the
/// model's: the call fails as `execution` (which the model is not asked to correct), never as
/// `validation`; arguments that do round-trip run.
#[tokio::test]
async fn an_input_type_that_cannot_read_back_what_it_writes_is_the_tools_fault() {
    let (run, _) = crate::support::run(bind(Lopsided).unwrap(), r#"{"note":"hi"}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"seen": "hi"}).into()
        }
    );
    let (run, _) = crate::support::run(bind(Lopsided).unwrap(), r#"{"note":""}"#).await;
    let failure = run.result.failure().unwrap();
    assert_eq!(failure.code, ToolErrorCode::Execution, "{failure:?}");
    assert_eq!(
        failure.safe_message,
        "the tool cannot take these arguments: the tool's input type does not read back the \
         arguments it writes"
    );
}

#[derive(Serialize, JsonSchema)]
struct SparseOutput {
    /// Left out when empty, as outputs often are.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    names: Vec<String>,
    /// Named for the reader, not for a parser.
    #[serde(rename(serialize = "total", deserialize = "count"))]
    count: u32,
    /// Written, never read back.
    #[serde(skip_deserializing)]
    note: String,
}

struct Sparse;

#[async_trait::async_trait]
impl ToolContract for Sparse {
    type Input = Input;
    type Output = SparseOutput;
    const ID: &'static str = "core__sparse";
    const DESCRIPTION: &'static str = "Lists names, maybe none.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["names", "total", "note"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: Input,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<SparseOutput, ToolError> {
        let names = (1..input.count).map(|i| format!("n{i}")).collect();
        Ok(SparseOutput {
            names,
            count: input.count - 1,
            note: "shown".into(),
        })
    }
}

/// The output schema describes what the output serializes to (serde's serialize side): a field
/// left out by `skip_serializing_if`, renamed for serializing, or never deserialized is checked
/// and allowlisted as it is written.
#[tokio::test]
async fn the_output_is_checked_and_allowlisted_as_it_serializes() {
    let tool = bind(Sparse).unwrap();
    let (run, _) = crate::support::run(tool.clone(), r#"{"name":"ada","count":1}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"total": 0, "note": "shown"}).into()
        }
    );
    let (run, _) = crate::support::run(tool, r#"{"name":"ada","count":2}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"names": ["n1"], "total": 1, "note": "shown"}).into()
        }
    );
}

#[derive(Serialize, JsonSchema)]
struct Documented {
    /// The first item, its `shown` allowlisted.
    first: Inner,
}

struct DocumentedOut;

#[async_trait::async_trait]
impl ToolContract for DocumentedOut {
    type Input = Input;
    type Output = Documented;
    const ID: &'static str = "core__documented";
    const DESCRIPTION: &'static str = "Returns a documented struct field.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["first.shown"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: Input,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<Documented, ToolError> {
        Ok(Documented {
            first: Inner {
                shown: input.name,
                hidden: "h-CANARY".into(),
            },
        })
    }
}

/// A documented output field of a struct type (schemars puts its `$ref` in an `allOf`) can have
/// its own fields allowlisted.
#[tokio::test]
async fn fields_of_a_documented_output_struct_can_be_allowlisted() {
    let (run, _) =
        crate::support::run(bind(DocumentedOut).unwrap(), r#"{"name":"ada","count":1}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"first": {"shown": "ada"}}).into()
        }
    );
}

#[derive(Serialize, JsonSchema)]
struct Stats {
    /// The mean, when there is anything to average.
    mean: Option<f64>,
    /// Per series.
    spread: std::collections::BTreeMap<String, Vec<f32>>,
}

struct Average;

#[async_trait::async_trait]
impl ToolContract for Average {
    type Input = Input;
    type Output = Stats;
    const ID: &'static str = "core__average";
    const DESCRIPTION: &'static str = "Averages.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["mean", "spread"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: Input,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<Stats, ToolError> {
        // 0 / 0 for a count of 1, and an infinite spread past 2.
        let sum = f64::from(input.count) - 1.0;
        let n = f64::from(input.count.min(2)) - 1.0;
        let spread = if input.count > 2 { f32::INFINITY } else { 0.5 };
        Ok(Stats {
            mean: Some(sum / n),
            spread: [(input.name, vec![1.0, spread])].into(),
        })
    }
}

/// JSON has no NaN or infinity: serde_json writes either as `null`, which an `Option` field
/// passed on as "none" and the model read as no value at all. Such a number fails the call,
/// naming its place (a map key the tool chose as `*`), as an integer past 64 bits does.
#[tokio::test]
async fn an_output_number_that_is_not_finite_is_refused_never_shown_as_null() {
    let tool = bind(Average).unwrap();
    for (count, place) in [(1, "/mean"), (3, "/spread/*/1")] {
        let args = format!(r#"{{"name":"s-CANARY","count":{count}}}"#);
        let (run, _) = crate::support::run(tool.clone(), &args).await;
        let failure = run.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::Execution, "{failure:?}");
        assert_eq!(
            failure.safe_message,
            format!(
                "the tool failed: the tool output does not fit: {place} is not a finite number \
                 (NaN or an infinity), which JSON cannot carry"
            )
        );
    }
    let (run, _) = crate::support::run(tool, r#"{"name":"s","count":2}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"mean": 1.0, "spread": {"s": [1.0, 0.5]}}).into()
        }
    );
}

/// Headers as one of a flattened enum's shapes: a map of any keys.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum AnyHeaders {
    Map(std::collections::BTreeMap<String, String>),
}

/// Anything as one of a flattened enum's shapes: a JSON value, which may be an object of any
/// keys (its schema is `true`).
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum AnyValue {
    Value(serde_json::Value),
}

/// Headers as an internally tagged enum whose variant flattens a map.
#[derive(Serialize, JsonSchema)]
#[serde(tag = "kind")]
enum TaggedHeaders {
    Map {
        #[serde(flatten)]
        map: std::collections::BTreeMap<String, String>,
    },
}

/// A flattened enum whose variants are plain: it writes only the keys its variants name.
#[derive(Serialize, JsonSchema)]
#[serde(tag = "kind")]
enum PlainKind {
    Ok { code: u16 },
}

#[derive(Serialize, JsonSchema)]
struct UntaggedHeadersOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(flatten)]
    headers: AnyHeaders,
}

#[derive(Serialize, JsonSchema)]
struct AnyValueOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(flatten)]
    extra: AnyValue,
}

#[derive(Serialize, JsonSchema)]
struct TaggedHeadersOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(flatten)]
    headers: TaggedHeaders,
}

#[derive(Serialize, JsonSchema)]
struct PlainKindOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(flatten)]
    kind: PlainKind,
}

#[derive(Serialize, JsonSchema)]
struct WrittenStatusOutput {
    status: Option<String>,
    #[serde(flatten)]
    headers: AnyHeaders,
}

fn canary_headers() -> std::collections::BTreeMap<String, String> {
    [("status".to_owned(), "sk-live-CANARY-77aa".to_owned())].into()
}

output_contract!(
    UntaggedHeaders,
    UntaggedHeadersOutput,
    &["status"],
    UntaggedHeadersOutput {
        status: None,
        headers: AnyHeaders::Map(canary_headers())
    }
);
output_contract!(
    AnyValueTool,
    AnyValueOutput,
    &["status"],
    AnyValueOutput {
        status: None,
        extra: AnyValue::Value(json!({"status": "sk-live-CANARY-77aa"}))
    }
);
output_contract!(
    TaggedHeadersTool,
    TaggedHeadersOutput,
    &["status"],
    TaggedHeadersOutput {
        status: None,
        headers: TaggedHeaders::Map {
            map: canary_headers()
        }
    }
);
output_contract!(
    PlainKindTool,
    PlainKindOutput,
    &["status"],
    PlainKindOutput {
        status: Some("ok".into()),
        kind: PlainKind::Ok { code: 200 }
    }
);
output_contract!(
    WrittenStatus,
    WrittenStatusOutput,
    &["status"],
    WrittenStatusOutput {
        status: None,
        headers: AnyHeaders::Map(canary_headers())
    }
);

/// A map flattened through an enum (untagged, or a variant of a tagged one) takes any key as a
/// plain flattened map does, though its schema says so in one of the enum's shapes (`anyOf`,
/// `oneOf`) rather than beside the field: the field the output may leave out cannot be
/// allowlisted either. A flattened enum that takes no other key, or a field always written,
/// binds.
#[tokio::test]
async fn a_map_flattened_through_an_enum_cannot_stand_in_for_an_allowlisted_field() {
    for err in [
        bind(UntaggedHeaders).err().unwrap(),
        bind(TaggedHeadersTool).err().unwrap(),
        bind(AnyValueTool).err().unwrap(),
    ] {
        assert!(matches!(err, Error::Redaction { .. }), "{err}");
        let message = err.to_string();
        assert!(
            message.contains(
                "\"status\" names `status`, which the output may leave out while a map \
                 flattened beside it takes any key"
            ),
            "{message}"
        );
    }
    let (run, _) =
        crate::support::run(bind(PlainKindTool).unwrap(), r#"{"name":"a","count":1}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"status": "ok"}).into()
        }
    );
    // Written (as `null`), the field is repeated by the map's key, and the output refused.
    let (run, events) =
        crate::support::run(bind(WrittenStatus).unwrap(), r#"{"name":"a","count":1}"#).await;
    let everything = format!("{run:?}{events:?}");
    assert!(!everything.contains("CANARY"), "{everything}");
    assert_eq!(run.result.failure().unwrap().code, ToolErrorCode::Execution);
}

#[derive(Serialize, JsonSchema)]
struct CountsByCodeOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    /// Keyed by integers: serde writes each key as digits, which no field name is.
    #[serde(flatten)]
    counts: std::collections::BTreeMap<u16, u32>,
}

output_contract!(
    CountsByCode,
    CountsByCodeOutput,
    &["status"],
    CountsByCodeOutput {
        status: Some("ok".into()),
        counts: [(200, 7), (404, 1)].into()
    }
);

/// A flattened map whose keys cannot be spelled like the field (integer keys, which the schema
/// says with `patternProperties` of digits) cannot stand in for it: the field binds.
#[tokio::test]
async fn a_map_whose_keys_cannot_spell_the_field_does_not_stop_its_allowlisting() {
    let (run, _) =
        crate::support::run(bind(CountsByCode).unwrap(), r#"{"name":"a","count":1}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"status": "ok"}).into()
        }
    );
}

/// What an entry is: an internally tagged enum, its fields written beside its tag.
#[derive(Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum EntryKind {
    File { size: u64, owner_token: String },
    Dir { children: u32 },
}

#[derive(Serialize, JsonSchema)]
struct EntryOutput {
    name: String,
    /// Flattened: its tag and fields are the entry's own.
    #[serde(flatten)]
    kind: EntryKind,
    /// The same enum in a field of its own.
    detail: EntryKind,
    secret: String,
}

fn entry() -> EntryOutput {
    EntryOutput {
        name: "a.txt".into(),
        kind: EntryKind::File {
            size: 7,
            owner_token: "sk-live-CANARY-1".into(),
        },
        detail: EntryKind::Dir { children: 2 },
        secret: "sk-live-CANARY-2".into(),
    }
}

output_contract!(
    Entry,
    EntryOutput,
    &[
        "name",
        "kind",
        "size",
        "children",
        "detail.kind",
        "detail.children"
    ],
    entry()
);

/// The fields of an enum's variants (flattened into the output, or in a field of their own)
/// are fields of the output: schemars puts them in the enum's `oneOf` shapes, where the
/// allowlist check did not look, so no such field could be allowlisted. Redaction keeps them by
/// name, as any field, and nothing else.
#[tokio::test]
async fn fields_of_an_enums_variants_can_be_allowlisted() {
    let (run, events) =
        crate::support::run(bind(Entry).unwrap(), r#"{"name":"a","count":1}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"name": "a.txt", "kind": "file", "size": 7,
                "detail": {"kind": "dir", "children": 2}})
            .into()
        }
    );
    let everything = format!("{run:?}{events:?}");
    assert!(!everything.contains("CANARY"), "{everything}");
}

/// A variant holding a map beside one whose field is allowlisted: the map's key of that name
/// would be shown under it when the other variant is written.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum SizedOrLoose {
    Sized { size: u64 },
    Loose(std::collections::BTreeMap<String, String>),
}

#[derive(Serialize, JsonSchema)]
struct SizedOrLooseOutput {
    name: String,
    #[serde(flatten)]
    shape: SizedOrLoose,
}

output_contract!(
    SizedOrLooseTool,
    SizedOrLooseOutput,
    &["name", "size"],
    SizedOrLooseOutput {
        name: "a".into(),
        shape: SizedOrLoose::Loose([("size".to_owned(), "sk-live-CANARY".to_owned())].into()),
    }
);

#[test]
fn a_variants_field_a_sibling_variants_map_could_stand_in_for_cannot_be_allowlisted() {
    let err = bind(SizedOrLooseTool).err().unwrap();
    assert!(
        err.to_string().contains(
            "\"size\" names `size`, but where the path reaches it the output may write, \
             instead of an object with that field, one that takes any key"
        ),
        "{err}"
    );
    // The field is always written in its variant: `skip_serializing_if` is not the cause.
    assert!(!err.to_string().contains("skip_serializing_if"), "{err}");
}

/// A variant holding any JSON value, marked `#[deprecated]`: schemars writes `deprecated:
/// true` beside it, which does not limit what it holds.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum DeprecatedAnyValue {
    Known {
        code: u16,
    },
    #[deprecated = "send `Known`"]
    Legacy(serde_json::Value),
}

/// A variant holding any JSON value with an extension keyword beside it (`x-note`), which does
/// not limit what it holds either.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum ExtendedAnyValue {
    Known {
        code: u16,
    },
    #[schemars(extend("x-note" = "free-form"))]
    Free(serde_json::Value),
}

#[derive(Serialize, JsonSchema)]
struct DeprecatedAnyValueOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(flatten)]
    extra: DeprecatedAnyValue,
}

#[derive(Serialize, JsonSchema)]
struct ExtendedAnyValueOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(flatten)]
    extra: ExtendedAnyValue,
}

#[allow(deprecated)]
fn deprecated_any_value() -> DeprecatedAnyValueOutput {
    DeprecatedAnyValueOutput {
        status: None,
        extra: DeprecatedAnyValue::Legacy(json!({"status": "sk-live-CANARY-77aa"})),
    }
}

output_contract!(
    DeprecatedAnyValueTool,
    DeprecatedAnyValueOutput,
    &["status"],
    deprecated_any_value()
);
output_contract!(
    ExtendedAnyValueTool,
    ExtendedAnyValueOutput,
    &["status"],
    ExtendedAnyValueOutput {
        status: None,
        extra: ExtendedAnyValue::Free(json!({"status": "sk-live-CANARY-77aa"}))
    }
);

/// A variant holding any value was known by a schema of annotations only, and `deprecated` and
/// extension keywords were not among them: such a variant's key was shown under the allowlisted
/// `status`, a secret under its name. A schema that says nothing of what the value is now holds
/// any value, whatever it carries beside.
#[tokio::test]
async fn a_marked_any_value_variant_cannot_stand_in_for_an_allowlisted_field() {
    for (tool, refused) in [
        ("deprecated", bind(DeprecatedAnyValueTool).err()),
        ("extended", bind(ExtendedAnyValueTool).err()),
    ] {
        let Some(err) = refused else {
            panic!("the {tool} variant's output was bound");
        };
        assert!(
            err.to_string().contains(
                "\"status\" names `status`, which the output may leave out while a map \
                 flattened beside it takes any key"
            ),
            "{err}"
        );
    }
}

/// An enum whose variants hold it again, twice: its schema is an `anyOf` leading back to itself
/// through two `$ref`s.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum Nest {
    Leaf { code: u16 },
    Left(Box<Nest>),
    Right(Box<Nest>),
}

#[derive(Serialize, JsonSchema)]
struct NestOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(flatten)]
    nest: Nest,
}

output_contract!(
    NestTool,
    NestOutput,
    &["status", "code"],
    NestOutput {
        status: Some("ok".into()),
        nest: Nest::Left(Box::new(Nest::Right(Box::new(Nest::Leaf { code: 7 })))),
    }
);

/// The check for a map that could stand in for `status` followed an enum's shapes to a depth of
/// 32, and took a chain that long to hold anything: an enum holding itself refused the
/// allowlist, saying a map was flattened beside `status` where none is. Each shape is now
/// looked at once.
#[tokio::test]
async fn an_enum_holding_itself_does_not_stop_an_allowlist_when_no_map_is_flattened() {
    let (run, _) = crate::support::run(bind(NestTool).unwrap(), r#"{"name":"a","count":1}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"status": "ok", "code": 7}).into()
        }
    );
}

/// An entry that is one named item or a list of loose maps: serde writes the list as an array,
/// and redaction keeps each element's keys as the entry's own.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum OneOrLooseList {
    One { name: String },
    Many(Vec<std::collections::BTreeMap<String, String>>),
}

#[derive(Serialize, JsonSchema)]
struct OneOrLooseListOutput {
    entry: OneOrLooseList,
}

output_contract!(
    OneOrLooseListTool,
    OneOrLooseListOutput,
    &["entry.name"],
    OneOrLooseListOutput {
        entry: OneOrLooseList::Many(vec![
            [("name".to_owned(), "sk-live-CANARY-list".to_owned())].into(),
        ]),
    }
);

/// A variant holding a list of maps beside one whose field is allowlisted: redaction walks the
/// list element by element, so each map's key of that name would be shown under it. The
/// stand-in check followed a variant's `$ref` but not its array's `items`, where the path check
/// follows both: the allowlist bound, and the map's value was shown as `entry.name`.
#[tokio::test]
async fn a_variants_list_of_maps_cannot_stand_in_for_an_allowlisted_field() {
    let err = match bind(OneOrLooseListTool) {
        Ok(tool) => {
            let (run, _) = crate::support::run(tool, r#"{"name":"a","count":1}"#).await;
            panic!("bound, and the run gave {:?}", run.result.outcome);
        }
        Err(err) => err,
    };
    assert!(
        err.to_string().contains(
            "\"entry.name\" names `name`, but where the path reaches it the output may \
             write, instead of an object with that field, one that takes any key"
        ),
        "{err}"
    );
}

/// A tree whose variants' `children` lead to different types: nodes, or bundles whose own
/// `children` are loose maps.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum Tree {
    Node { name: String, children: Vec<Tree> },
    Bundle { children: Vec<Bundled> },
}

#[derive(Serialize, JsonSchema)]
struct Bundled {
    name: String,
    children: Vec<std::collections::BTreeMap<String, String>>,
}

#[derive(Serialize, JsonSchema)]
struct TreeOutput {
    tree: Tree,
}

output_contract!(
    TreeTool,
    TreeOutput,
    &["tree.children*.name"],
    TreeOutput {
        tree: Tree::Bundle {
            children: vec![Bundled {
                name: "b".into(),
                children: vec![[("name".to_owned(), "sk-live-CANARY-tree".to_owned())].into()],
            }],
        },
    }
);

/// Redaction follows a `field*` by name to every depth, into whatever each variant's field of
/// that name holds. The stand-in check looked one step below the field: a map two steps down
/// (a bundle's `children`) was not seen, the allowlist bound, and the map's `name` was shown.
#[tokio::test]
async fn a_map_a_repeated_field_reaches_through_a_variant_cannot_stand_in() {
    let err = match bind(TreeTool) {
        Ok(tool) => {
            let (run, _) = crate::support::run(tool, r#"{"name":"a","count":1}"#).await;
            panic!("bound, and the run gave {:?}", run.result.outcome);
        }
        Err(err) => err,
    };
    assert!(
        err.to_string().contains(
            "\"tree.children*.name\" names `children`, but where the path reaches it the \
             output may write, instead of an object with that field, one that takes any key"
        ),
        "{err}"
    );
}

/// A named item, held in a tuple's place or on its own.
#[derive(Serialize, JsonSchema)]
struct NamedItem {
    name: String,
}

/// An entry whose variants' `item` is a tuple holding a map, one that may be `null`, or a named
/// item: serde writes a tuple as an array, and redaction walks each of its elements as the
/// value it is in.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum TupleOrNamed {
    Pair {
        item: (std::collections::BTreeMap<String, String>, u8),
    },
    MaybeLoose {
        item: Option<(std::collections::BTreeMap<String, String>,)>,
    },
    One {
        item: NamedItem,
    },
}

#[derive(Serialize, JsonSchema)]
struct TupleOrNamedOutput {
    entry: TupleOrNamed,
}

fn loose_name() -> std::collections::BTreeMap<String, String> {
    [("name".to_owned(), "sk-live-CANARY-tuple".to_owned())].into()
}

output_contract!(
    TupleOrNamedTool,
    TupleOrNamedOutput,
    &["entry.item.name"],
    TupleOrNamedOutput {
        entry: TupleOrNamed::Pair {
            item: (loose_name(), 1),
        },
    }
);
output_contract!(
    MaybeLooseTool,
    TupleOrNamedOutput,
    &["entry.item.name"],
    TupleOrNamedOutput {
        entry: TupleOrNamed::MaybeLoose {
            item: Some((loose_name(),)),
        },
    }
);

/// A tuple's schema is an array with one schema for each place (`items: [..]`), which the
/// stand-in check took for the object a path goes through, one with no map in it: a variant's
/// tuple holding a map bound `"entry.item.name"`, and the map's `name` was shown under it.
#[tokio::test]
async fn a_map_in_a_variants_tuple_cannot_stand_in_for_an_allowlisted_field() {
    for (tool, bound) in [
        ("pair", bind(TupleOrNamedTool)),
        ("optional pair", bind(MaybeLooseTool)),
    ] {
        let err = match bound {
            Ok(tool) => {
                let (run, _) = crate::support::run(tool, r#"{"name":"a","count":1}"#).await;
                panic!("bound, and the run gave {:?}", run.result.outcome);
            }
            Err(err) => err,
        };
        assert!(
            err.to_string()
                .contains("\"entry.item.name\" names `name`, but where the path reaches it"),
            "{tool}: {err}"
        );
    }
}

#[derive(Serialize, JsonSchema)]
struct NamedPairOutput {
    pair: (NamedItem, Inner),
}

output_contract!(
    NamedPair,
    NamedPairOutput,
    &["pair.name", "pair.shown"],
    NamedPairOutput {
        pair: (
            NamedItem { name: "a".into() },
            Inner {
                shown: "s".into(),
                hidden: "h-CANARY".into(),
            },
        ),
    }
);

/// A field in a tuple's place is named as a list element's is (`"pair.name"`): redaction walks
/// each element of the array serde writes with the same paths.
#[tokio::test]
async fn fields_in_a_tuples_places_can_be_allowlisted() {
    let (run, events) =
        crate::support::run(bind(NamedPair).unwrap(), r#"{"name":"a","count":1}"#).await;
    assert_eq!(
        run.result.outcome,
        ToolOutcome::Ok {
            value: json!({"pair": [{"name": "a"}, {"shown": "s"}]}).into()
        }
    );
    let everything = format!("{run:?}{events:?}");
    assert!(!everything.contains("CANARY"), "{everything}");
}

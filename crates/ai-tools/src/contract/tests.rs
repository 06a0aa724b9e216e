//! Spec derivation: determinism, the subset, connection ids.

use std::collections::BTreeMap;

use ai_core::{Capabilities, ExecPermit, ToolEffect, ToolError, ToolInvocationContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Error, ToolContract, schema_hash, tool_spec};

#[derive(Serialize, JsonSchema)]
struct Out {
    ok: bool,
}

/// A contract over input type `I`, for derivation tests.
struct Probe<I>(std::marker::PhantomData<I>);

#[async_trait::async_trait]
impl<I: serde::de::DeserializeOwned + Serialize + JsonSchema + Send + Sync + 'static> ToolContract
    for Probe<I>
{
    type Input = I;
    type Output = Out;
    const ID: &'static str = "core__probe";
    const DESCRIPTION: &'static str = "probe";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["ok"];
    async fn execute(
        &self,
        _: &ExecPermit,
        _: I,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<Out, ToolError> {
        Ok(Out { ok: true })
    }
}

/// Asserts that `schema` accepts each of `cases` exactly when serde reads it as a `T`.
fn assert_accepts_what_serde_accepts<T: serde::de::DeserializeOwned>(
    schema: &serde_json::Value,
    cases: impl IntoIterator<Item = serde_json::Value>,
) {
    let validator = jsonschema::draft7::new(schema).unwrap();
    for args in cases {
        assert_eq!(
            validator.is_valid(&args),
            serde_json::from_value::<T>(args.clone()).is_ok(),
            "{args}"
        );
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Plain {
    /// The name.
    name: String,
    count: Option<u32>,
    tags: Vec<String>,
    extra: BTreeMap<String, String>,
}

#[test]
fn derivation_is_deterministic_and_hashed() {
    let a = tool_spec::<Probe<Plain>>().unwrap();
    let b = tool_spec::<Probe<Plain>>().unwrap();
    assert_eq!(
        serde_json::to_vec(&a.input_schema).unwrap(),
        serde_json::to_vec(&b.input_schema).unwrap()
    );
    assert_eq!(schema_hash(&a), schema_hash(&b));
    assert_eq!(schema_hash(&a).len(), 64);
    assert!(a.input_schema.get("$schema").is_none());
    assert_eq!(
        a.input_schema["properties"]["count"]["type"],
        serde_json::json!(["integer", "null"])
    );
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Camel {
    #[serde(rename = "connectionId")]
    connection: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Inner {
    connection_id: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Nested {
    inner: Inner,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)]
struct Kebab {
    connection_id: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
#[allow(dead_code)]
struct Pascal {
    connection_id: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(dead_code)]
struct Screaming {
    connection_id: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Spaced {
    #[serde(rename = "connection id")]
    connection: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Slashed {
    #[serde(rename = "connection/id")]
    connection: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Tilde {
    #[serde(rename = "connection~id")]
    connection: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct NotAConnection {
    connection: String,
    connection_ids_seen: u32,
    id: String,
}

#[test]
fn connection_ids_are_refused_at_derivation() {
    for (err, pointer) in [
        (
            tool_spec::<Probe<Camel>>().unwrap_err(),
            "/properties/connectionId",
        ),
        (
            tool_spec::<Probe<Inner>>().unwrap_err(),
            "/properties/connection_id",
        ),
        (
            tool_spec::<Probe<Nested>>().unwrap_err(),
            "/definitions/Inner/properties/connection_id",
        ),
        // `rename_all` spells it other ways; each is still a connection id.
        (
            tool_spec::<Probe<Kebab>>().unwrap_err(),
            "/properties/connection-id",
        ),
        (
            tool_spec::<Probe<Pascal>>().unwrap_err(),
            "/properties/ConnectionId",
        ),
        (
            tool_spec::<Probe<Screaming>>().unwrap_err(),
            "/properties/CONNECTION_ID",
        ),
        (
            tool_spec::<Probe<Spaced>>().unwrap_err(),
            "/properties/connection id",
        ),
        // The name is escaped as a JSON pointer segment, as the keywords before it are.
        (
            tool_spec::<Probe<Slashed>>().unwrap_err(),
            "/properties/connection~1id",
        ),
        (
            tool_spec::<Probe<Tilde>>().unwrap_err(),
            "/properties/connection~0id",
        ),
    ] {
        match err {
            Error::ConnectionIdInInput { pointer: at, .. } => assert_eq!(at, pointer),
            other => panic!("expected a connection id error, got {other}"),
        }
    }
    assert!(tool_spec::<Probe<NotAConnection>>().is_ok());
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
enum Shape {
    Circle { r: f64 },
    Square { side: f64 },
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct WithEnum {
    shape: Shape,
}

#[test]
fn schemas_outside_the_subset_are_refused() {
    let err = tool_spec::<Probe<WithEnum>>().unwrap_err().to_string();
    assert!(err.contains("outside the supported subset"), "{err}");
    assert!(err.contains("oneOf"), "{err}");
    assert!(err.contains("/definitions/Shape"), "{err}");
}

/// A newcomer's enum with data is refused with what to write instead, not only where.
#[test]
fn a_refused_input_schema_says_what_an_input_may_be_built_of() {
    let err = tool_spec::<Probe<WithEnum>>().unwrap_err().to_string();
    assert!(
        err.ends_with(
            "/definitions/Shape: `oneOf` is not supported; an input is a struct with named \
             fields (`struct NoArgs {}` for a tool without any), built of structs, `Option`s, \
             `Vec`s, maps with string or integer keys and unit enums (an enum with data derives `oneOf` or \
             `anyOf`: write it as a unit enum beside optional fields)"
        ),
        "{err}"
    );
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct IntegerKeys {
    names: std::collections::HashMap<u32, String>,
    offsets: BTreeMap<i64, u8>,
    stops: Option<BTreeMap<u16, Option<Point>>>,
}

/// A map with integer keys (`HashMap<u32, _>`) is what schemars spells `patternProperties` of
/// digits beside `additionalProperties: false`, which the subset refuses. It says the same with
/// `propertyNames` and `additionalProperties`, which it takes: every key matches the pattern,
/// every value the map's value schema. A key past the integer type's range is refused by serde,
/// as the arguments are checked, without quoting it.
#[test]
fn a_map_with_integer_keys_fits_the_subset() {
    let spec = tool_spec::<Probe<IntegerKeys>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(
        schema["properties"]["names"],
        serde_json::json!({"type": "object", "propertyNames": {"pattern": "^(0|[1-9][0-9]*)$"},
            "additionalProperties": {"type": "string"}})
    );
    assert_eq!(
        schema["properties"]["stops"],
        serde_json::json!({"type": ["object", "null"], "propertyNames": {"pattern": "^(0|[1-9][0-9]*)$"},
            "additionalProperties": {"$ref": "#/definitions/PointOrNull"}})
    );
    let cases = [
        serde_json::json!({"names": {}, "offsets": {}}),
        serde_json::json!({"names": {"1": "a", "20": "b"}, "offsets": {"-3": 0, "4": 255},
            "stops": {"7": {"x": 1}, "8": null}}),
        serde_json::json!({"names": {"a": "x"}, "offsets": {}}),
        serde_json::json!({"names": {"-1": "x"}, "offsets": {}}),
        serde_json::json!({"names": {"1": 2}, "offsets": {}}),
        serde_json::json!({"names": {}, "offsets": {"x": 1}}),
        serde_json::json!({"names": {}, "offsets": {"1": 256}}),
        serde_json::json!({"names": {}, "offsets": {}, "stops": {"1": {}}}),
        serde_json::json!({"names": {}, "offsets": {}, "stops": {"a": null}}),
    ];
    assert_accepts_what_serde_accepts::<IntegerKeys>(schema, cases);
    let tool = crate::bind(Probe::<IntegerKeys>(std::marker::PhantomData)).unwrap();
    let err = tool
        .validate_input(serde_json::json!({"names": {"4294967296": "x"}, "offsets": {}}))
        .unwrap_err();
    let message = err.safe_message();
    assert!(
        message.starts_with("/names has a key the tool's input type cannot read"),
        "{message}"
    );
    assert!(!message.contains("4294967296"), "{message}");
}

/// The keys of an integer-keyed map are read by serde_json as JSON integers: no sign but a
/// `-`, no leading zero, no `-0`, no space. The fitted schema's `propertyNames` takes those
/// alone, so a key serde cannot read is refused by the schema check, naming the map, rather than
/// by serde with a place inside the key ("not valid JSON at line 1 column 2" for `01`). Only a
/// key past the integer type's range is left to serde, as an integer value past its type's is
/// to the range check.
#[test]
fn integer_keys_are_taken_as_serde_reads_them() {
    let spec = tool_spec::<Probe<IntegerKeys>>().unwrap();
    let schema = &spec.input_schema;
    let mut cases = Vec::new();
    for key in [
        "0", "7", "10", "01", "00", "-0", "-1", "-10", "-01", "+1", " 1", "1 ", "1.0",
    ] {
        cases.push(serde_json::json!({"names": {key: "a"}, "offsets": {}}));
        cases.push(serde_json::json!({"names": {}, "offsets": {key: 1}}));
    }
    assert_accepts_what_serde_accepts::<IntegerKeys>(schema, cases);
    let tool = crate::bind(Probe::<IntegerKeys>(std::marker::PhantomData)).unwrap();
    let err = tool
        .validate_input(serde_json::json!({"names": {}, "offsets": {"007": 1}}))
        .unwrap_err();
    assert_eq!(
        err.safe_message(),
        "/offsets has a key that does not match the pattern `^(0|-?[1-9][0-9]*)$`"
    );
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct NonZeroKeys {
    by_id: BTreeMap<std::num::NonZeroU32, String>,
    by_step: std::collections::HashMap<std::num::NonZeroI64, String>,
    nested: Vec<Option<BTreeMap<std::num::NonZeroU8, BTreeMap<SlotId, u8>>>>,
}

/// A map keyed by a `NonZero` integer, which schemars derives with a signed integer's digits
/// (`minimum: 1` is no `minimum: 0`, and the signed one says `not: {"const": 0}`), takes the keys
/// serde reads as such an integer: no `0`, and no `-` for an unsigned one, wherever the map is
/// (in a list, an `Option`, a map's values). The key type is asked, as it reads a key, so a
/// newtype of an integer keeps its own keys.
#[test]
fn a_map_with_nonzero_keys_takes_no_zero() {
    let spec = tool_spec::<Probe<NonZeroKeys>>().unwrap();
    let schema = &spec.input_schema;
    let keys = |pointer: &str| {
        schema
            .pointer(&format!("{pointer}/propertyNames/pattern"))
            .cloned()
    };
    assert_eq!(keys("/properties/by_id"), Some("^[1-9][0-9]*$".into()));
    assert_eq!(keys("/properties/by_step"), Some("^-?[1-9][0-9]*$".into()));
    assert_eq!(
        keys("/properties/nested/items"),
        Some("^[1-9][0-9]*$".into())
    );
    assert_eq!(
        keys("/properties/nested/items/additionalProperties"),
        Some("^(0|[1-9][0-9]*)$".into())
    );
    let mut cases = Vec::new();
    for key in ["0", "-0", "1", "-1", "7", "-10", "01", "255"] {
        cases.push(serde_json::json!({"by_id": {key: "a"}, "by_step": {}, "nested": []}));
        cases.push(serde_json::json!({"by_id": {}, "by_step": {key: "a"}, "nested": []}));
        cases.push(serde_json::json!({"by_id": {}, "by_step": {}, "nested": [{key: {}}]}));
        cases.push(serde_json::json!({"by_id": {}, "by_step": {}, "nested": [{"1": {key: 1}}]}));
    }
    assert_accepts_what_serde_accepts::<NonZeroKeys>(schema, cases);
    let tool = crate::bind(Probe::<NonZeroKeys>(std::marker::PhantomData)).unwrap();
    let err = tool
        .validate_input(serde_json::json!({"by_id": {"0": "a"}, "by_step": {}, "nested": []}))
        .unwrap_err();
    assert_eq!(
        err.safe_message(),
        "/by_id has a key that does not match the pattern `^[1-9][0-9]*$`"
    );
}

/// A key of 128 bits whose `Deserialize` takes only what serde_json gives a 128-bit key
/// (`visit_i128`), as a hand-written one may.
#[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
struct Wide(i128);

impl JsonSchema for Wide {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Wide".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        i128::json_schema(generator)
    }
}

impl<'de> Deserialize<'de> for Wide {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct WideVisitor;
        impl serde::de::Visitor<'_> for WideVisitor {
            type Value = Wide;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a 128-bit integer")
            }
            fn visit_i128<E>(self, v: i128) -> Result<Wide, E> {
                Ok(Wide(v))
            }
        }
        d.deserialize_i128(WideVisitor)
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct WideKeys {
    by_wide: BTreeMap<Wide, i64>,
}

/// The probe reads a key as serde_json itself reads the arguments' keys, so a key type is asked
/// what serde asks it: a key type serde_json reads `0` and `-1` into keeps them in its map's
/// pattern, and a refused value under a key it takes is the value's refusal, not the key's.
#[test]
fn a_key_is_probed_as_serde_json_reads_it() {
    let spec = tool_spec::<Probe<WideKeys>>().unwrap();
    assert_eq!(
        spec.input_schema
            .pointer("/properties/by_wide/propertyNames/pattern"),
        Some(&serde_json::json!("^(0|-?[1-9][0-9]*)$"))
    );
    let cases = ["0", "-1", "7"].map(|key| serde_json::json!({"by_wide": {key: 1}}));
    assert_accepts_what_serde_accepts::<WideKeys>(&spec.input_schema, cases);
    let tool = crate::bind(Probe::<WideKeys>(std::marker::PhantomData)).unwrap();
    assert_eq!(
        tool.validate_input(serde_json::json!({"by_wide": {"7": 2.0}}))
            .unwrap_err()
            .safe_message(),
        "/by_wide/* does not fit the tool's input type: a value of the wrong type (a floating \
         point; expected i64)"
    );
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Legs {
    legs: Vec<Leg>,
    slots: std::collections::HashMap<u8, String>,
    notes: BTreeMap<String, i64>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Leg {
    name: String,
    minutes: i64,
}

/// The message for arguments `Legs`'s schema takes and serde refuses.
fn refusal_of_legs(args: serde_json::Value) -> String {
    let tool = crate::bind(Probe::<Legs>(std::marker::PhantomData)).unwrap();
    let schema = &tool.spec().input_schema;
    assert!(jsonschema::draft7::new(schema).unwrap().is_valid(&args));
    tool.validate_input(args)
        .unwrap_err()
        .safe_message()
        .to_owned()
}

/// Arguments the schema takes and serde refuses are refused naming where serde stopped, in the
/// schema's words as a schema refusal names its place: a float for an integer field of a struct
/// in a list (draft-07 calls `2.0` an integer, an `i64` does not take it) names that field.
#[test]
fn a_refusal_of_serde_names_the_field() {
    let message = refusal_of_legs(serde_json::json!({
        "legs": [{"name": "a", "minutes": 5}, {"name": "b", "minutes": 2.0}],
        "slots": {}, "notes": {}
    }));
    assert_eq!(
        message,
        "/legs/1/minutes does not fit the tool's input type: a value of the wrong type (a \
         floating point; expected i64)"
    );
}

/// A key of an integer-keyed map past its type's range (the schema's `propertyNames` takes its
/// digits) is refused naming the map and the key type, never the key, nor a line and column
/// within it. So is one past 64 bits, which serde cannot name as a step (`?`).
#[test]
fn a_map_key_past_its_integer_type_names_the_map() {
    for key in ["300", "99999999999999999999"] {
        let message = refusal_of_legs(serde_json::json!({
            "legs": [], "slots": {"1": "a", key: "b"}, "notes": {}
        }));
        assert!(
            message.starts_with("/slots has a key the tool's input type cannot read: "),
            "{message}"
        );
        assert!(
            !message.contains(key) && !message.contains("line"),
            "{message}"
        );
    }
    assert_eq!(
        refusal_of_legs(serde_json::json!({"legs": [], "slots": {"300": "b"}, "notes": {}})),
        "/slots has a key the tool's input type cannot read: a value that is not allowed (an \
         integer; expected u8)"
    );
}

/// A map key the model chose is never shown where serde stopped below it: control characters
/// and a long key alike are `*`.
#[test]
fn a_refusal_of_serde_never_shows_a_map_key() {
    for key in [
        "\u{1b}[2J\nsk-CANARY\u{7}".to_owned(),
        "CANARY".repeat(2000),
    ] {
        let message = refusal_of_legs(serde_json::json!({
            "legs": [], "slots": {}, "notes": {key.clone(): 1.0}
        }));
        assert_eq!(
            message,
            "/notes/* does not fit the tool's input type: a value of the wrong type (a floating \
             point; expected i64)"
        );
    }
}

/// A value read from JSON text (`config` below, whose own `Deserialize` parses its string), whose
/// refusal carries serde_json's line as a key's does.
fn from_json_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Leg, D::Error> {
    let text = String::deserialize(d)?;
    serde_json::from_str(&text).map_err(serde::de::Error::custom)
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Configured {
    #[serde(deserialize_with = "from_json_text")]
    #[schemars(with = "String")]
    config: Leg,
    by_name: BTreeMap<String, i64>,
    by_slot: std::collections::HashMap<u8, String>,
}

/// A value's refusal that carries a line (one its own `Deserialize` read from JSON text) names
/// the value, not a key of the map above it, and not the line, which counts in that text: only
/// the last step of an integer-keyed map can be a key serde_json failed to read.
#[test]
fn a_refusal_of_serde_with_a_line_names_the_value() {
    let tool = crate::bind(Probe::<Configured>(std::marker::PhantomData)).unwrap();
    let refusal = |args: serde_json::Value| {
        assert!(
            jsonschema::draft7::new(&tool.spec().input_schema)
                .unwrap()
                .is_valid(&args)
        );
        tool.validate_input(args)
            .unwrap_err()
            .safe_message()
            .to_owned()
    };
    for config in ["{not json", r#"{"name": "a", "minutes": 2.0}"#] {
        let message = refusal(serde_json::json!({
            "config": config, "by_name": {}, "by_slot": {}
        }));
        assert!(
            message.starts_with("/config does not fit the tool's input type: ")
                && !message.contains("line"),
            "{message}"
        );
    }
    assert_eq!(
        refusal(serde_json::json!({
            "config": r#"{"name": "a", "minutes": 2}"#, "by_name": {"k": 1}, "by_slot": {"300": "b"}
        })),
        "/by_slot has a key the tool's input type cannot read: a value that is not allowed (an \
         integer; expected u8)"
    );
}

/// A value read from JSON text, as [`from_json_text`] reads one.
#[derive(Serialize, JsonSchema)]
#[allow(dead_code)]
struct LegText(#[schemars(with = "String")] Leg);

impl<'de> Deserialize<'de> for LegText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_json_text(d).map(LegText)
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct LegsBySlot {
    by_slot: BTreeMap<u8, LegText>,
}

/// A value of an integer-keyed map whose own refusal carries a line (read from JSON text) is the
/// value's refusal, named at the value (`*`), not the map's key's: whether the key was refused
/// is asked of the input type, not guessed from the line. A key past the key type's range is
/// still the map's.
#[test]
fn a_refusal_of_an_integer_keyed_maps_value_with_a_line_names_the_value() {
    let tool = crate::bind(Probe::<LegsBySlot>(std::marker::PhantomData)).unwrap();
    let refusal = |args: serde_json::Value| {
        tool.validate_input(args)
            .unwrap_err()
            .safe_message()
            .to_owned()
    };
    let message = refusal(serde_json::json!({"by_slot": {"3": "{not json"}}));
    assert!(
        message.starts_with("/by_slot/* does not fit the tool's input type: ")
            && !message.contains("line"),
        "{message}"
    );
    assert_eq!(
        refusal(serde_json::json!({"by_slot": {"300": r#"{"name": "a", "minutes": 2}"#}})),
        "/by_slot has a key the tool's input type cannot read: a value that is not allowed (an \
         integer; expected u8)"
    );
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Trip {
    name: String,
    #[serde(flatten)]
    timing: Timing,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Timing {
    minutes: i64,
    hours: Option<i64>,
    legs: Vec<Leg>,
    #[serde(flatten)]
    extra: BTreeMap<String, i64>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Trips {
    trips: Vec<Trip>,
}

/// serde reads a `#[serde(flatten)]`ed part from its own copy of the object, so where it
/// stopped inside it is lost (serde_path_to_error names the object). The property it stopped at
/// is found again by reading the arguments without each property the flattened part reads: the
/// one whose absence changes the refusal. A map's key is `*` there too, never quoted.
#[test]
fn a_refusal_inside_a_flattened_part_names_its_property() {
    let tool = crate::bind(Probe::<Trips>(std::marker::PhantomData)).unwrap();
    let refusal = |trip: serde_json::Value| {
        let args = serde_json::json!({"trips": [{"name": "a", "minutes": 1, "legs": []}, trip]});
        assert!(
            jsonschema::draft7::new(&tool.spec().input_schema)
                .unwrap()
                .is_valid(&args)
        );
        tool.validate_input(args)
            .unwrap_err()
            .safe_message()
            .to_owned()
    };
    let wrong_type = "a value of the wrong type (a floating point; expected i64)";
    for (trip, place) in [
        (
            serde_json::json!({"name": "b", "minutes": 2.0, "legs": []}),
            "/trips/1/minutes",
        ),
        (
            serde_json::json!({"name": "b", "minutes": 2, "hours": 1.0, "legs": []}),
            "/trips/1/hours",
        ),
        (
            serde_json::json!({"name": "b", "minutes": 2, "legs": [{"name": "c", "minutes": 1.0}]}),
            "/trips/1/legs",
        ),
        (
            serde_json::json!({"name": "b", "minutes": 2, "legs": [], "CANARY": 2.0}),
            "/trips/1/*",
        ),
    ] {
        assert_eq!(
            refusal(trip),
            format!("{place} does not fit the tool's input type: {wrong_type}")
        );
    }
}

/// Where the property cannot be told (two properties refused alike: without either, the other
/// is refused the same way; or a check of the object as a whole, its `try_from`), the message
/// names the object and says honestly that what inside it was refused, if anything, is not
/// known.
#[test]
fn a_refusal_inside_a_flattened_part_that_cannot_be_placed_says_so() {
    let untold = |place: &str, what: &str| {
        format!(
            "{place} does not fit the tool's input type: {what}; the input type reads part of \
             this object from a copy (a `#[serde(flatten)]`ed field), so which of its \
             properties, if any, was refused cannot be told"
        )
    };
    let tool = crate::bind(Probe::<Trip>(std::marker::PhantomData)).unwrap();
    let message = tool
        .validate_input(serde_json::json!({
            "name": "b", "minutes": 2.0, "hours": 2.0, "legs": []
        }))
        .unwrap_err()
        .safe_message()
        .to_owned();
    assert_eq!(
        message,
        untold(
            "/",
            "a value of the wrong type (a floating point; expected i64)"
        )
    );
    let tool = crate::bind(Probe::<Summed>(std::marker::PhantomData)).unwrap();
    let message = tool
        .validate_input(serde_json::json!({"total": 5, "a": 1, "b": 1}))
        .unwrap_err()
        .safe_message()
        .to_owned();
    assert_eq!(message, untold("/", "a value the type does not take"));
}

/// A check of the whole object that one property read into the copy settles (without it the
/// object is taken) cannot be told from that property's own refusal: it is named at it, as
/// ARCHITECTURE.md says, not said to be untold.
#[test]
fn a_whole_object_check_one_property_settles_is_named_at_it() {
    let tool = crate::bind(Probe::<Summed>(std::marker::PhantomData)).unwrap();
    let message = tool
        .validate_input(serde_json::json!({"total": 0, "a": 1}))
        .unwrap_err()
        .safe_message()
        .to_owned();
    assert_eq!(
        message,
        "/* does not fit the tool's input type: a value the type does not take"
    );
}

/// A tally of counts, refused whole by its `try_from` past eight of them.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(try_from = "BTreeMap<String, u32>")]
struct Tally(BTreeMap<String, u32>);

impl TryFrom<BTreeMap<String, u32>> for Tally {
    type Error = &'static str;

    fn try_from(counts: BTreeMap<String, u32>) -> Result<Self, Self::Error> {
        if counts.len() > 8 {
            return Err("a tally holds at most 8 counts");
        }
        Ok(Tally(counts))
    }
}

/// Counts, beside their total, read through a flattened map; refused whole by its `try_from`
/// when the total is not their sum.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(try_from = "SummedFields")]
struct Summed {
    total: u32,
    counts: BTreeMap<String, u32>,
}

/// [`Summed`] as serde reads it.
#[derive(Deserialize, JsonSchema)]
struct SummedFields {
    total: u32,
    #[serde(flatten)]
    counts: BTreeMap<String, u32>,
}

impl TryFrom<SummedFields> for Summed {
    type Error = &'static str;

    fn try_from(SummedFields { total, counts }: SummedFields) -> Result<Self, Self::Error> {
        if counts.values().sum::<u32>() != total {
            return Err("the total is not the sum of the counts");
        }
        Ok(Summed { total, counts })
    }
}

thread_local! {
    /// How many times [`Level`] was read on this thread.
    static LEVELS_READ: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One level of an object nested as deep as the arguments go, with a tally and a sum at the
/// bottom, counting its reads: a read of the arguments reads it once per level.
#[derive(Serialize, JsonSchema)]
struct Level {
    next: Option<Box<Level>>,
    tally: Option<Tally>,
    summed: Option<Summed>,
}

impl<'de> Deserialize<'de> for Level {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Fields {
            next: Option<Box<Level>>,
            tally: Option<Tally>,
            summed: Option<Summed>,
        }
        LEVELS_READ.with(|read| read.set(read.get() + 1));
        let Fields {
            next,
            tally,
            summed,
        } = Fields::deserialize(d)?;
        Ok(Level {
            next,
            tally,
            summed,
        })
    }
}

/// How many times validating `args` reads a [`Level`], and what it says.
fn levels_read(tool: &dyn ai_core::BoundTool, args: serde_json::Value) -> (usize, String) {
    let before = LEVELS_READ.with(std::cell::Cell::get);
    let message = match tool.validate_input(args) {
        Ok(_) => String::new(),
        Err(e) => e.safe_message().to_owned(),
    };
    (LEVELS_READ.with(std::cell::Cell::get) - before, message)
}

/// `bottom` under `depth` levels of `next`.
fn nested(depth: usize, bottom: serde_json::Value) -> serde_json::Value {
    (0..depth).fold(bottom, |inner, _| serde_json::json!({ "next": inner }))
}

/// Finding where serde stopped costs a bounded number of reads of the arguments, whatever their
/// shape: an object refused whole (a `try_from`) deep in them, holding many keys, is not asked
/// about key by key from the root (which cost keys × depth reads of a level: here 200 keys at 60
/// levels read a `Level` about 12,000 times, 200 reads of the arguments), with or without a
/// flattened part.
#[test]
fn a_refusal_costs_a_bounded_number_of_reads_whatever_the_arguments_shape() {
    const DEPTH: usize = 60;
    let tool = crate::bind(Probe::<Level>(std::marker::PhantomData)).unwrap();
    let counts =
        |n: usize| serde_json::Value::Object((0..n).map(|i| (format!("k{i}"), 1.into())).collect());
    // A call taken reads the arguments twice: once, then back as written.
    let one_read = DEPTH + 1;
    let (read, message) = levels_read(&*tool, nested(DEPTH, serde_json::json!({})));
    assert_eq!((read, message.as_str()), (2 * one_read, ""));

    let (read, message) = levels_read(
        &*tool,
        nested(DEPTH, serde_json::json!({"tally": counts(200)})),
    );
    assert!(read <= 4 * one_read, "{read} reads of a level");
    let place = "/next".repeat(DEPTH);
    assert_eq!(
        message,
        format!("{place}/tally does not fit the tool's input type: a value the type does not take")
    );

    let mut summed = counts(200);
    summed["total"] = 7.into();
    let (read, message) = levels_read(&*tool, nested(DEPTH, serde_json::json!({"summed": summed})));
    assert!(read <= 4 * one_read, "{read} reads of a level");
    assert_eq!(
        message,
        format!(
            "{place}/summed does not fit the tool's input type: a value the type does not take; \
             the input type reads part of this object from a copy (a `#[serde(flatten)]`ed \
             field), so which of its properties, if any, was refused cannot be told"
        )
    );
}

thread_local! {
    /// The deserializers [`Watched`] was read from, by type name.
    static READ_BY: std::cell::RefCell<Vec<&'static str>> = const {
        std::cell::RefCell::new(Vec::new())
    };
}

/// An input that notes which deserializer reads it.
#[derive(Serialize, JsonSchema)]
struct Watched {
    minutes: i64,
}

impl<'de> Deserialize<'de> for Watched {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Fields {
            minutes: i64,
        }
        READ_BY.with(|read_by| read_by.borrow_mut().push(std::any::type_name::<D>()));
        let Fields { minutes } = Fields::deserialize(d)?;
        Ok(Watched { minutes })
    }
}

/// Arguments serde takes are read by serde_json alone: tracking where serde is (which copies
/// every key it passes) is paid only by a refusal, which still names its place.
#[test]
fn only_a_refusal_of_serde_tracks_where_it_stopped() {
    let tool = crate::bind(Probe::<Watched>(std::marker::PhantomData)).unwrap();
    tool.validate_input(serde_json::json!({"minutes": 2}))
        .unwrap();
    let read_by = READ_BY.with(|read_by| read_by.take());
    assert!(
        !read_by.is_empty() && read_by.iter().all(|by| !by.contains("serde_path_to_error")),
        "{read_by:?}"
    );
    let err = tool
        .validate_input(serde_json::json!({"minutes": 2.0}))
        .unwrap_err();
    assert_eq!(
        err.safe_message(),
        "/minutes does not fit the tool's input type: a value of the wrong type (a floating \
         point; expected i64)"
    );
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct SignedNonZero {
    count: std::num::NonZeroU32,
    step: Option<std::num::NonZeroI64>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct FlattenedIntegerKeys {
    name: String,
    #[serde(flatten)]
    counts: BTreeMap<u16, u32>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct OnlyFlattenedIntegerKeys {
    #[serde(flatten)]
    counts: BTreeMap<u16, u32>,
}

/// What the subset cannot say is refused, naming the field and the Rust type that derives it
/// and what to take instead: a signed `NonZero` integer (schemars' `not: {"const": 0}`: the
/// subset has no "any integer but 0"; an unsigned one is `minimum: 1`, which it takes) and a
/// map with integer keys flattened into a struct, beside fields (whose keys are the fields'
/// names or digits) or alone (serde reads the flattened map's keys as strings and refuses each).
#[test]
fn a_signed_nonzero_or_a_flattened_integer_keyed_map_is_refused_naming_the_type() {
    let err = tool_spec::<Probe<SignedNonZero>>().unwrap_err().to_string();
    assert!(
        err.contains(
            "/properties/step: `not` is not supported (a signed `NonZero` integer, \
             `NonZeroI64`, derives \"any integer but 0\", which the subset cannot say: take an \
             `i64` and refuse 0 in the tool, or an unsigned `NonZero` integer);"
        ),
        "{err}"
    );
    assert!(!err.contains("/properties/count"), "{err}");
    assert!(
        serde_json::from_value::<OnlyFlattenedIntegerKeys>(serde_json::json!({"1": 2})).is_err()
    );
    for err in [
        tool_spec::<Probe<FlattenedIntegerKeys>>(),
        tool_spec::<Probe<OnlyFlattenedIntegerKeys>>(),
    ] {
        let err = err.unwrap_err().to_string();
        assert!(
            err.contains(
                "(root): `patternProperties` is not supported (a map with integer keys flattened \
                 into a struct (whose every key serde would refuse: it reads a flattened value \
                 from a copy whose keys are strings), or keyed by names and integers alike: keep \
                 it in a field of its own, keyed by integers alone);"
            ),
            "{err}"
        );
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct FlattenedSlots {
    name: String,
    #[serde(flatten)]
    inner: Slots,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Slots {
    slots: std::collections::HashMap<u32, String>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct FlattenedLegs {
    /// Slots of its own, not flattened: read as any integer-keyed map.
    own: Slots,
    #[serde(flatten)]
    extra: Option<Extra>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Extra {
    note: Option<String>,
    by_name: BTreeMap<String, Slotted>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Slotted {
    legs: Vec<BTreeMap<u8, String>>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct ListOfFlattened {
    items: Vec<FlattenedSlots>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct ArrayOfFlattened {
    pair: [FlattenedSlots; 2],
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct NonZeroKeyedFlattened {
    by_id: BTreeMap<std::num::NonZeroU32, FlattenedSlots>,
}

#[derive(Deserialize, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
struct SlotId(u32);

#[derive(Deserialize, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
struct SlotName(String);

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct IdKeyedFlattened {
    by_id: BTreeMap<SlotId, FlattenedSlots>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct NameKeyedFlattened {
    by_name: BTreeMap<SlotName, FlattenedSlots>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct FlattenedNames {
    own: Slots,
    #[serde(flatten)]
    inner: Names,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Names {
    names: BTreeMap<String, Vec<String>>,
}

/// serde reads a `#[serde(flatten)]`ed value from a copy of the arguments in which every key is
/// a string, and reads no integer from a string key: a map with integer keys anywhere below a
/// flattened field (in the flattened struct, an `Option` of one, a map's values, a
/// `NonZero`- or newtype-keyed map's too, a list's or an array's items) refuses every key of
/// every call. It is refused at binding, naming its place in the arguments and what to do. A
/// flattened map with string keys binds, and so does an integer-keyed map in a field of its own
/// beside a flattened one.
#[test]
fn an_integer_keyed_map_below_a_flattened_field_is_refused() {
    let premise = serde_json::from_value::<FlattenedSlots>(
        serde_json::json!({"name": "n", "slots": {"1": "a"}}),
    );
    assert!(
        premise.is_err(),
        "serde now reads such keys: the check can go"
    );
    for (err, place) in [
        (tool_spec::<Probe<FlattenedSlots>>(), "/slots"),
        (tool_spec::<Probe<FlattenedLegs>>(), "/by_name/*/legs/*"),
        (tool_spec::<Probe<ListOfFlattened>>(), "/items/*/slots"),
        (tool_spec::<Probe<ArrayOfFlattened>>(), "/pair/*/slots"),
        (
            tool_spec::<Probe<NonZeroKeyedFlattened>>(),
            "/by_id/*/slots",
        ),
        (tool_spec::<Probe<IdKeyedFlattened>>(), "/by_id/*/slots"),
        (tool_spec::<Probe<NameKeyedFlattened>>(), "/by_name/*/slots"),
    ] {
        let err = err.unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "{place} in the arguments: a map with integer keys below a \
                 `#[serde(flatten)]`ed field, whose every key serde would refuse (it reads a \
                 flattened value from a copy whose keys are strings, and reads no integer from a \
                 string key): key it by `String`, or do not flatten the field that holds it"
            )),
            "{err}"
        );
    }
    let tool = crate::bind(Probe::<FlattenedNames>(std::marker::PhantomData)).unwrap();
    let args = serde_json::json!({"own": {"slots": {"1": "a"}}, "names": {"b": ["c"]}});
    assert_eq!(tool.validate_input(args.clone()).unwrap(), args);
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct UnitStruct;

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct NoArgs {}

/// A tool without parameters written with `()` or a unit struct, whose schema is `null`, is
/// told to take a struct with no fields, which binds.
#[test]
fn a_parameterless_input_written_as_unit_is_told_to_be_a_struct_without_fields() {
    for err in [
        tool_spec::<Probe<()>>().unwrap_err().to_string(),
        tool_spec::<Probe<UnitStruct>>().unwrap_err().to_string(),
    ] {
        assert!(
            err.contains("(root): the root must be a schema with \"type\": \"object\"; "),
            "{err}"
        );
        assert!(
            err.contains("(`struct NoArgs {}` for a tool without any)"),
            "{err}"
        );
    }
    let spec = tool_spec::<Probe<NoArgs>>().unwrap();
    assert_eq!(spec.input_schema["type"], "object");
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct HoldsEmpty {
    empty: NoArgs,
    maybe: Option<NoArgs>,
    many: Vec<NoArgs>,
}

/// A struct without fields declares that it has none, wherever it is: schemars derives it as
/// `{"type": "object"}`, which a provider's strict form reads as a free-form map, sending the
/// whole tool non-strict. The schema accepts what it accepted before, and what serde accepts.
#[test]
fn a_struct_without_fields_declares_no_properties() {
    let root = tool_spec::<Probe<NoArgs>>().unwrap().input_schema;
    assert_eq!(
        root,
        serde_json::json!({"type": "object", "properties": {}})
    );
    let schema = tool_spec::<Probe<HoldsEmpty>>().unwrap().input_schema;
    assert_eq!(
        schema["definitions"],
        serde_json::json!({
            "NoArgs": {"type": "object", "properties": {}},
            "NoArgsOrNull": {"type": ["object", "null"], "properties": {}},
        })
    );
    let cases = [
        serde_json::json!({"empty": {}, "many": [{}]}),
        serde_json::json!({"empty": {"extra": 1}, "maybe": {"extra": 2}, "many": []}),
        serde_json::json!({"empty": {}, "maybe": null, "many": [{}, {"x": 1}]}),
        serde_json::json!({"empty": "", "many": []}),
        serde_json::json!({"empty": {}, "maybe": 1, "many": []}),
    ];
    assert_accepts_what_serde_accepts::<HoldsEmpty>(&schema, cases);
}

/// A struct field of an input type.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Point {
    x: u8,
}

/// A unit enum without docs on its variants.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Color {
    Red,
    Blue,
}

/// A unit enum with docs on its variants.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Unit {
    /// Metres.
    Metre,
    /// Feet.
    Foot,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Optionals {
    at: Option<Point>,
    color: Option<Color>,
    unit: Unit,
    /// Length unit, if not metres.
    other_unit: Option<Unit>,
    points: Vec<Option<Point>>,
}

/// `Option` of a struct or an enum, and a unit enum with documented variants, are what tools
/// take all the time; schemars spells them with `anyOf`/`oneOf`, which the subset refuses. The
/// derived schema says the same within the subset, and accepts exactly what serde accepts.
#[test]
fn optional_structs_and_enums_and_documented_enums_fit_the_subset() {
    let spec = tool_spec::<Probe<Optionals>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(
        schema["definitions"],
        serde_json::json!({
            // `Color` and `Point` are used only as `Option`s: their definitions are gone.
            "ColorOrNull": {"description": "A unit enum without docs on its variants.",
                "enum": ["red", "blue", null], "type": ["string", "null"]},
            "PointOrNull": {"description": "A struct field of an input type.",
                "properties": {"x": {"format": "uint8", "maximum": 255, "minimum": 0,
                    "type": "integer"}},
                "required": ["x"], "type": ["object", "null"]},
            "Unit": {"description": "A unit enum with docs on its variants.\n- `metre`: Metres.\n- `foot`: Feet.",
                "enum": ["metre", "foot"], "type": "string"},
            "UnitOrNull": {"description": "A unit enum with docs on its variants.\n- `metre`: Metres.\n- `foot`: Feet.",
                "enum": ["metre", "foot", null], "type": ["string", "null"]},
        })
    );
    assert_eq!(
        schema["properties"]["other_unit"],
        serde_json::json!({"$ref": "#/definitions/UnitOrNull",
            "description": "Length unit, if not metres."})
    );
    let cases = [
        serde_json::json!({"unit": "metre", "points": []}),
        serde_json::json!({"unit": "foot", "points": [null, {"x": 1}], "at": null,
            "color": null, "other_unit": null}),
        serde_json::json!({"unit": "metre", "points": [], "at": {"x": 2}, "color": "red",
            "other_unit": "foot"}),
        serde_json::json!({"unit": "inch", "points": []}),
        serde_json::json!({"unit": null, "points": []}),
        serde_json::json!({"unit": "metre", "points": [], "at": {}}),
        serde_json::json!({"unit": "metre", "points": [], "color": "green"}),
        serde_json::json!({"unit": "metre", "points": [], "other_unit": "inch"}),
        serde_json::json!({"unit": "metre", "points": [{"x": 256}]}),
    ];
    assert_accepts_what_serde_accepts::<Optionals>(schema, cases);
}

/// A unit enum with docs on some of its variants.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Speed {
    Slow,
    /// Twice as fast, twice the cost.
    Fast,
    Normal,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct WithSpeed {
    speed: Speed,
    fallback: Option<Speed>,
}

/// schemars spells a unit enum with some variants documented and others not as a `oneOf` of one
/// `enum` of the undocumented variants and a `const` per documented one: the subset says it as
/// one `enum`, which accepts exactly what serde accepts.
#[test]
fn a_unit_enum_with_some_variants_documented_fits_the_subset() {
    let spec = tool_spec::<Probe<WithSpeed>>().unwrap();
    let schema = &spec.input_schema;
    let description =
        "A unit enum with docs on some of its variants.\n- `fast`: Twice as fast, twice the cost.";
    assert_eq!(
        schema["definitions"],
        serde_json::json!({
            "Speed": {"description": description, "enum": ["slow", "normal", "fast"],
                "type": "string"},
            "SpeedOrNull": {"description": description, "enum": ["slow", "normal", "fast", null],
                "type": ["string", "null"]},
        })
    );
    let cases = [
        serde_json::json!({"speed": "slow"}),
        serde_json::json!({"speed": "fast", "fallback": "normal"}),
        serde_json::json!({"speed": "normal", "fallback": null}),
        serde_json::json!({"speed": "faster"}),
        serde_json::json!({"speed": null}),
        serde_json::json!({"speed": "slow", "fallback": "Slow"}),
    ];
    assert_accepts_what_serde_accepts::<WithSpeed>(schema, cases);
}

/// A unit enum whose variants carry what else a variant's attributes give its schema: a
/// heading in its doc comment (schemars' `title`), `#[deprecated]`, `#[schemars(title)]`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code, deprecated)]
enum Mode {
    /// # Quick
    ///
    /// Skips the checks.
    Quick,
    /// Checks everything.
    #[deprecated = "use `quick`"]
    Thorough,
    #[deprecated]
    Legacy,
    #[schemars(title = "Dry run")]
    DryRun,
    Normal,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct WithMode {
    mode: Mode,
}

/// A variant's heading and `#[deprecated]` are annotations too: schemars writes them beside the
/// variant's `const` (`title`, `deprecated: true`), and the enum is still one `enum` the subset
/// takes, the model told of each in the enum's description.
#[test]
fn a_unit_enum_with_titled_or_deprecated_variants_fits_the_subset() {
    let spec = tool_spec::<Probe<WithMode>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(
        schema["definitions"]["Mode"],
        serde_json::json!({
            "description": "A unit enum whose variants carry what else a variant's attributes \
                give its schema: a\nheading in its doc comment (schemars' `title`), \
                `#[deprecated]`, `#[schemars(title)]`.\n\
                - `quick`: Quick. Skips the checks.\n\
                - `thorough` (deprecated): Checks everything.\n\
                - `legacy` (deprecated)\n\
                - `dry_run`: Dry run.",
            "enum": ["normal", "quick", "thorough", "legacy", "dry_run"],
            "type": "string",
        })
    );
    let cases = [
        serde_json::json!({"mode": "quick"}),
        serde_json::json!({"mode": "legacy"}),
        serde_json::json!({"mode": "dry_run"}),
        serde_json::json!({"mode": "normal"}),
        serde_json::json!({"mode": "Quick"}),
    ];
    assert_accepts_what_serde_accepts::<WithMode>(schema, cases);
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Documented {
    /// Where to start.
    at: Point,
    /// How to measure.
    unit: Unit,
    /// Where to go back to, if anywhere.
    back: Option<Point>,
}

/// A doc comment on a field whose type is kept in the definitions (a struct, an enum) is what
/// tools write all the time; schemars puts the `$ref` in an `allOf` of one, beside the
/// description (draft-07 ignores a `$ref`'s siblings), which the subset refuses. The derived
/// schema says it with the `$ref` beside the description, accepting what serde accepts.
#[test]
fn a_documented_field_of_a_defined_type_fits_the_subset() {
    let spec = tool_spec::<Probe<Documented>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(
        schema["properties"]["at"],
        serde_json::json!({"$ref": "#/definitions/Point", "description": "Where to start."})
    );
    assert_eq!(
        schema["properties"]["unit"],
        serde_json::json!({"$ref": "#/definitions/Unit", "description": "How to measure."})
    );
    let cases = [
        serde_json::json!({"at": {"x": 1}, "unit": "metre"}),
        serde_json::json!({"at": {"x": 1}, "unit": "foot", "back": {"x": 2}}),
        serde_json::json!({"at": {"x": 256}, "unit": "metre"}),
        serde_json::json!({"at": {}, "unit": "metre"}),
        serde_json::json!({"at": null, "unit": "metre"}),
        serde_json::json!({"at": {"x": 1}, "unit": "inch"}),
    ];
    assert_accepts_what_serde_accepts::<Documented>(schema, cases);
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code, deprecated)]
struct Deprecated {
    #[deprecated]
    at: Point,
    /// How to measure.
    #[deprecated]
    unit: Unit,
    #[deprecated]
    back: Option<Point>,
    #[deprecated]
    count: u8,
}

/// A `#[deprecated]` field is annotated `deprecated: true` (schemars puts a `$ref` in an
/// `allOf` of one beside it), which the schema says beside the `$ref` as for a doc comment.
/// wire-openai's strict form takes this very schema
/// (`strict::tests::deprecated_fields_as_ai_tools_derives_them_are_strict`).
#[test]
fn a_deprecated_field_of_a_defined_type_fits_the_subset() {
    let spec = tool_spec::<Probe<Deprecated>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(
        schema["properties"],
        serde_json::json!({
            "at": {"$ref": "#/definitions/Point", "deprecated": true},
            "unit": {"$ref": "#/definitions/Unit", "deprecated": true,
                "description": "How to measure."},
            "back": {"$ref": "#/definitions/PointOrNull", "deprecated": true},
            "count": {"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255,
                "deprecated": true},
        })
    );
    let cases = [
        serde_json::json!({"at": {"x": 1}, "unit": "metre", "count": 1}),
        serde_json::json!({"at": {"x": 1}, "unit": "foot", "count": 1, "back": null}),
        serde_json::json!({"at": {"x": 1}, "unit": "inch", "count": 1}),
        serde_json::json!({"at": null, "unit": "metre", "count": 1}),
    ];
    assert_accepts_what_serde_accepts::<Deprecated>(schema, cases);
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Annotated {
    /// Where to look.
    #[schemars(example = &"src/lib.rs", example = &"README.md")]
    path: String,
    #[schemars(example = Point { x: 1 })]
    at: Point,
    #[schemars(example = Unit::Foot)]
    unit: Option<Unit>,
    #[serde(skip_serializing)]
    token: String,
}

/// `#[schemars(example = …)]` annotates a field `examples` (beside the `$ref` of a defined type,
/// schemars' `allOf` of one unwrapped), and `#[serde(skip_serializing)]` `writeOnly: true`.
/// wire-openai's strict form takes this very schema
/// (`strict::tests::annotated_fields_as_ai_tools_derives_them_are_strict`).
#[test]
fn an_annotated_field_fits_the_subset() {
    let spec = tool_spec::<Probe<Annotated>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(
        schema["properties"],
        serde_json::json!({
            "path": {"type": "string", "description": "Where to look.",
                "examples": ["src/lib.rs", "README.md"]},
            "at": {"$ref": "#/definitions/Point", "examples": [{"x": 1}]},
            "unit": {"$ref": "#/definitions/UnitOrNull", "examples": ["foot"]},
            "token": {"type": "string", "writeOnly": true},
        })
    );
    let cases = [
        serde_json::json!({"path": "a", "at": {"x": 1}, "token": "t"}),
        serde_json::json!({"path": "a", "at": {"x": 1}, "unit": "foot", "token": "t"}),
        serde_json::json!({"path": "a", "at": {"x": 1}, "unit": "inch", "token": "t"}),
        serde_json::json!({"path": "a", "at": {"x": 1}}),
    ];
    assert_accepts_what_serde_accepts::<Annotated>(schema, cases);
}

/// A newtype of a struct: schemars defines it as a `$ref` to the struct's definition.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Start(Point);

/// A newtype of a unit enum with a doc comment, which schemars writes beside its `$ref`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Measure(Unit);

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Bare {
    z: u8,
}

/// A bare point, wrapped.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Wrapped(Bare);

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct OptionalNewtypes {
    start: Option<Start>,
    wrapped: Option<Wrapped>,
    /// How to measure, if not in metres.
    measure: Option<Measure>,
    points: Vec<Option<Start>>,
}

/// `Option` of a newtype of a struct or an enum (`struct Start(Point)`) is what an `Option` of
/// the struct is: schemars defines the newtype as a `$ref` to the struct, which the `Option`
/// rewrite did not follow, so the `anyOf` stayed and the subset refused the input.
#[test]
fn an_optional_newtype_of_a_struct_or_enum_fits_the_subset() {
    let spec = tool_spec::<Probe<OptionalNewtypes>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(
        schema["properties"]["start"],
        serde_json::json!({"$ref": "#/definitions/StartOrNull"})
    );
    assert_eq!(
        schema["definitions"]["StartOrNull"]["type"],
        serde_json::json!(["object", "null"])
    );
    assert_eq!(
        schema["definitions"]["MeasureOrNull"]["enum"],
        serde_json::json!(["metre", "foot", null])
    );
    // The newtype's doc comment comes first, then the enum's own description with its notes on
    // the variants; the newtype's alone when the definition it refers to has none.
    assert_eq!(
        schema["definitions"]["MeasureOrNull"]["description"],
        "A newtype of a unit enum with a doc comment, which schemars writes beside its `$ref`.\n\
         A unit enum with docs on its variants.\n- `metre`: Metres.\n- `foot`: Feet."
    );
    assert_eq!(
        schema["definitions"]["StartOrNull"]["description"],
        "A newtype of a struct: schemars defines it as a `$ref` to the struct's definition.\n\
         A struct field of an input type."
    );
    assert_eq!(
        schema["definitions"]["WrappedOrNull"]["description"],
        "A bare point, wrapped."
    );
    let cases = [
        serde_json::json!({"points": []}),
        serde_json::json!({"start": null, "measure": null, "points": [null]}),
        serde_json::json!({"start": {"x": 1}, "measure": "foot", "points": [{"x": 2}, null]}),
        serde_json::json!({"start": {"x": 256}, "points": []}),
        serde_json::json!({"start": {}, "points": []}),
        serde_json::json!({"measure": "inch", "points": []}),
        serde_json::json!({"points": [{"x": -1}]}),
        serde_json::json!({"wrapped": {"z": 1}, "points": []}),
        serde_json::json!({"wrapped": {"x": 1}, "points": []}),
        serde_json::json!({"wrapped": null, "points": []}),
    ];
    assert_accepts_what_serde_accepts::<OptionalNewtypes>(schema, cases);
}

/// A newtype of a newtype, each with a doc comment.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Begin(Start);

/// A newtype whose doc comment is the one of the struct it wraps.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Echo(Point);

/// A struct field of an input type.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Same(Echo);

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct DocumentedNewtypes {
    begin: Option<Begin>,
    same: Option<Same>,
}

/// What the model reads of an `Option` of a newtype is what it reads of the newtype: every doc
/// comment on the way to the struct, the nearest first, each said once. The nullable copy of the
/// struct's definition kept only the struct's own, and the newtypes' were lost with their
/// definitions, which nothing referred to any more.
#[test]
fn an_optional_newtype_keeps_the_doc_comments_of_the_newtypes() {
    let spec = tool_spec::<Probe<DocumentedNewtypes>>().unwrap();
    let definitions = &spec.input_schema["definitions"];
    assert_eq!(
        definitions["BeginOrNull"]["description"],
        "A newtype of a newtype, each with a doc comment.\n\
         A newtype of a struct: schemars defines it as a `$ref` to the struct's definition.\n\
         A struct field of an input type."
    );
    assert_eq!(
        definitions["SameOrNull"]["description"],
        "A struct field of an input type.\n\
         A newtype whose doc comment is the one of the struct it wraps."
    );
}

/// A newtype of an `Option` of a struct: schemars defines it as the `Option`'s `anyOf`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct MaybeAt(Option<Point>);

/// Perhaps a unit.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct MaybeUnit(Option<Unit>);

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct MaybeCount(Option<u32>);

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct OptionalMaybes {
    at: Option<MaybeAt>,
    unit: Option<MaybeUnit>,
    count: Option<MaybeCount>,
    here: MaybeAt,
}

/// `Option` of a newtype of an `Option` (`struct MaybeAt(Option<Point>)`) takes what the
/// newtype takes, `null` included. The newtype's own `anyOf` becomes a `$ref` to the nullable
/// copy in the same pass that should follow it, so the field's `anyOf` was left and the subset
/// refused the input; it is now rewritten once the newtype's is.
#[test]
fn an_optional_newtype_of_an_option_fits_the_subset() {
    let spec = tool_spec::<Probe<OptionalMaybes>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(
        schema["properties"],
        serde_json::json!({
            "at": {"$ref": "#/definitions/MaybeAtOrNull"},
            "unit": {"$ref": "#/definitions/MaybeUnitOrNull"},
            "count": {"$ref": "#/definitions/MaybeCountOrNull"},
            "here": {"$ref": "#/definitions/MaybeAt"},
        })
    );
    let definitions = &schema["definitions"];
    assert_eq!(
        definitions["MaybeAtOrNull"]["type"],
        serde_json::json!(["object", "null"])
    );
    assert_eq!(
        definitions["MaybeAtOrNull"]["description"],
        "A newtype of an `Option` of a struct: schemars defines it as the `Option`'s `anyOf`.\n\
         A struct field of an input type."
    );
    assert_eq!(
        definitions["MaybeUnitOrNull"]["description"],
        "Perhaps a unit.\nA unit enum with docs on its variants.\n- `metre`: Metres.\n- `foot`: Feet."
    );
    assert_eq!(
        definitions["MaybeUnitOrNull"]["enum"],
        serde_json::json!(["metre", "foot", null])
    );
    let cases = [
        serde_json::json!({"here": null}),
        serde_json::json!({"here": {"x": 1}, "at": null, "unit": null, "count": null}),
        serde_json::json!({"here": null, "at": {"x": 2}, "unit": "foot", "count": 3}),
        serde_json::json!({"at": null}),
        serde_json::json!({"here": null, "at": {}}),
        serde_json::json!({"here": null, "at": {"x": 256}}),
        serde_json::json!({"here": null, "unit": "inch"}),
        serde_json::json!({"here": null, "count": -1}),
        serde_json::json!({"here": null, "count": "3"}),
    ];
    assert_accepts_what_serde_accepts::<OptionalMaybes>(schema, cases);
    assert!(crate::bind(Probe::<OptionalMaybes>(std::marker::PhantomData)).is_ok());
}

/// # A place
///
/// Somewhere on the map.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Place {
    x: u8,
}

/// # A stop
///
/// Where the trip pauses.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Stop(Place);

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Titles {
    stop: Option<Stop>,
    /// # The last stop
    last: Option<Stop>,
    place: Place,
}

/// The nullable copy made for an `Option` of a newtype stands for the newtype: its own
/// annotations win over those of the type it wraps (its heading is the copy's `title`), as the
/// strict form (wire-openai) gives a definition's own over the one its `$ref` leads to. A field's
/// heading stays beside its `$ref`, for that field alone; the wrapped type's definition keeps its
/// own for its other users.
#[test]
fn an_optional_newtype_is_titled_by_the_newtype() {
    let spec = tool_spec::<Probe<Titles>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(
        schema["properties"]["last"],
        serde_json::json!({"$ref": "#/definitions/StopOrNull", "title": "The last stop"})
    );
    let definitions = &schema["definitions"];
    assert_eq!(definitions["StopOrNull"]["title"], "A stop");
    assert_eq!(
        definitions["StopOrNull"]["description"],
        "Where the trip pauses.\nSomewhere on the map."
    );
    assert_eq!(definitions["Place"]["title"], "A place");
}

/// A field whose schemars attributes add a rule beside its `$ref` keeps the `allOf`: draft-07
/// would ignore the rule beside a `$ref`, so the model would be told a rule nobody checks.
#[test]
fn an_all_of_with_a_rule_beside_its_ref_is_left_for_the_subset_check() {
    let mut schema = serde_json::json!({
        "type": "object",
        "properties": {"at": {"allOf": [{"$ref": "#/definitions/Point"}], "minProperties": 1}},
        "definitions": {"Point": {"type": "object"}},
    });
    super::fit::fit_subset(&mut schema, None);
    assert_eq!(
        schema["properties"]["at"],
        serde_json::json!({"allOf": [{"$ref": "#/definitions/Point"}], "minProperties": 1})
    );
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum Either {
    Point(Point),
    Color(Color),
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct WithEither {
    either: Either,
}

/// An `anyOf` of two references is not an `Option`: it is left for the subset check to refuse.
#[test]
fn an_untagged_enum_of_two_structs_is_refused_not_rewritten() {
    let err = tool_spec::<Probe<WithEither>>().unwrap_err().to_string();
    assert!(
        err.contains("/definitions/Either: `anyOf` is not supported;"),
        "{err}"
    );
}

/// A generic struct whose schemars name holds characters a `$ref` must escape.
#[derive(Deserialize, Serialize, JsonSchema)]
#[schemars(rename = "Boxed<{T}>")]
#[allow(dead_code)]
struct Boxed<T> {
    value: T,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct WithBoxed {
    required: Boxed<Point>,
    optional: Option<Boxed<Point>>,
}

/// schemars percent-encodes a definition named `Boxed<Point>` in its `$ref`s; read as a plain
/// pointer that names no definition, so the definition was dropped as unreferenced and the
/// schema refused. Such definitions are renamed to names a `$ref` spells as they are.
#[test]
fn definitions_named_with_escaped_characters_are_renamed_and_kept() {
    let spec = tool_spec::<Probe<WithBoxed>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(
        schema["properties"]["required"]["$ref"],
        "#/definitions/Boxed_Point_"
    );
    assert_eq!(
        schema["properties"]["optional"]["$ref"],
        "#/definitions/Boxed_Point_OrNull"
    );
    let cases = [
        serde_json::json!({"required": {"value": {"x": 1}}}),
        serde_json::json!({"required": {"value": {"x": 1}}, "optional": null}),
        serde_json::json!({"required": {"value": {"x": 1}}, "optional": {"value": {"x": 2}}}),
        serde_json::json!({"required": {"value": {}}}),
        serde_json::json!({"required": {"value": {"x": 1}}, "optional": {"value": null}}),
    ];
    assert_accepts_what_serde_accepts::<WithBoxed>(schema, cases);
}

/// A type of the input whose name is the one the `Option` rewrite would give `Point`'s copy.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct PointOrNull {
    y: u8,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct NameClash {
    clash: PointOrNull,
    at: Option<Point>,
}

/// A type already named `PointOrNull` left `Option<Point>` as `anyOf` (refused, and the message
/// named `anyOf`, not the clash); the copy now takes the next free name.
#[test]
fn an_option_is_rewritten_even_when_its_ornull_name_is_taken() {
    let spec = tool_spec::<Probe<NameClash>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(
        schema["properties"]["at"]["$ref"],
        "#/definitions/PointOrNull2"
    );
    let cases = [
        serde_json::json!({"clash": {"y": 1}}),
        serde_json::json!({"clash": {"y": 1}, "at": null}),
        serde_json::json!({"clash": {"y": 1}, "at": {"x": 2}}),
        serde_json::json!({"clash": {"y": 1}, "at": {"y": 2}}),
        serde_json::json!({"clash": null, "at": {"x": 2}}),
    ];
    assert_accepts_what_serde_accepts::<NameClash>(schema, cases);
}

/// A linked list: the root type refers to itself through an `Option`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Node {
    name: String,
    /// The next node, if any.
    next: Option<Box<Node>>,
    children: Vec<Node>,
    at: Option<Point>,
}

/// schemars spells `Option<Box<Self>>` of the root `anyOf: [{"$ref": "#"}, {"type": "null"}]`,
/// which the subset refuses and the `Option` rewrite could not reach (the root is no
/// definition). A copy of the root is now a definition, and the schema accepts exactly what
/// serde accepts.
#[test]
fn a_root_type_that_refers_to_itself_fits_the_subset() {
    let spec = tool_spec::<Probe<Node>>().unwrap();
    let schema = &spec.input_schema;
    assert_eq!(schema["type"], "object");
    assert_eq!(
        schema["properties"]["next"],
        serde_json::json!({"$ref": "#/definitions/NodeOrNull",
            "description": "The next node, if any."})
    );
    assert_eq!(
        schema["properties"]["children"]["items"],
        serde_json::json!({"$ref": "#/definitions/Node"})
    );
    assert_eq!(
        schema["definitions"]["NodeOrNull"]["type"],
        serde_json::json!(["object", "null"])
    );
    assert_eq!(
        schema["definitions"]["NodeOrNull"]["properties"],
        schema["properties"]
    );
    assert!(!serde_json::to_string(schema).unwrap().contains(r##""#""##));
    let cases = [
        serde_json::json!({"name": "a", "children": []}),
        serde_json::json!({"name": "a", "children": [], "next": null}),
        serde_json::json!({"name": "a", "children": [], "next": {"name": "b", "children": []}}),
        serde_json::json!({"name": "a", "children": [], "next": {"name": "b", "children": [],
            "next": {"name": "c", "children": [{"name": "d", "children": []}]}}}),
        serde_json::json!({"name": "a", "children": [], "next": {"name": "b"}}),
        serde_json::json!({"name": "a", "children": [], "next": {"name": "b", "children": [],
            "next": {"name": 3, "children": []}}}),
        serde_json::json!({"name": "a", "children": [null]}),
        serde_json::json!({"name": "a", "children": [], "next": {"name": "b", "children": [],
            "at": {"x": 300}}}),
        serde_json::json!(null),
        serde_json::json!({"name": "a", "children": [], "next": "b"}),
    ];
    assert_accepts_what_serde_accepts::<Node>(schema, cases);
}

/// Types named `Filter` in two modules, and in one of them a third that serde names `Filter`
/// too.
mod filters {
    pub(super) mod by_name {
        use schemars::JsonSchema;
        use serde::{Deserialize, Serialize};

        #[derive(Deserialize, Serialize, JsonSchema)]
        pub(crate) struct Filter {
            pub(crate) field: String,
        }

        /// Named like [`Filter`] to serde, and so to schemars: one schema id for both.
        #[derive(Deserialize, Serialize, JsonSchema)]
        #[serde(rename = "Filter")]
        pub(crate) struct Range {
            pub(crate) from: u32,
        }

        /// Named like [`Filter`] to serde, told apart for schemars.
        #[derive(Deserialize, Serialize, JsonSchema)]
        #[serde(rename = "Filter")]
        #[schemars(rename = "RangeFilter")]
        pub(crate) struct Renamed {
            pub(crate) from: u32,
        }
    }
    pub(super) mod by_value {
        use schemars::JsonSchema;
        use serde::{Deserialize, Serialize};

        #[derive(Deserialize, Serialize, JsonSchema)]
        pub(crate) struct Filter {
            pub(crate) value: u32,
        }
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct TwoModules {
    a: filters::by_name::Filter,
    b: Option<filters::by_value::Filter>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct OneModule {
    a: filters::by_name::Filter,
    /// The range.
    b: Vec<filters::by_name::Range>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct OneModuleRenamed {
    a: filters::by_name::Filter,
    b: Vec<filters::by_name::Renamed>,
}

/// A contract whose output is `O`.
struct OutputProbe<O>(std::marker::PhantomData<O>);

#[async_trait::async_trait]
impl<O: Serialize + JsonSchema + Send + Sync + 'static> ToolContract for OutputProbe<O> {
    type Input = Plain;
    type Output = O;
    const ID: &'static str = "core__probe";
    const DESCRIPTION: &'static str = "probe";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["a"];
    async fn execute(
        &self,
        _: &ExecPermit,
        _: Plain,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<O, ToolError> {
        Err(ToolError::new("never run"))
    }
}

/// Two types of one module that serde names alike share a schemars schema id, so one's schema
/// stood in for the other's: `b` was described as a `Filter` with a `field`, no call could fit
/// both the schema and the type, and nothing said why. The clash is now refused at derivation
/// (input) and binding (output), naming the type and the fix; types of two modules sharing a
/// name get a definition each, and `#[schemars(rename)]` tells the clashing ones apart.
#[test]
fn two_types_schemars_names_alike_are_refused_with_the_fix() {
    let expected = Error::NameClash {
        tool: "core__probe".into(),
        which: "input",
        name: "Filter".into(),
    };
    assert_eq!(
        tool_spec::<Probe<OneModule>>().map(|_| ()),
        Err(expected.clone())
    );
    assert!(
        expected.to_string().contains("#[schemars(rename = \"…\")]"),
        "{expected}"
    );
    assert!(matches!(
        crate::bind(OutputProbe::<OneModule>(std::marker::PhantomData)).map(|_| ()),
        Err(Error::NameClash { which: "output", ref name, .. }) if name == "Filter"
    ));

    let renamed = tool_spec::<Probe<OneModuleRenamed>>().unwrap().input_schema;
    assert_eq!(
        renamed["definitions"]["RangeFilter"]["required"],
        serde_json::json!(["from"])
    );
    let two = tool_spec::<Probe<TwoModules>>().unwrap().input_schema;
    assert_eq!(
        two["definitions"]["Filter"]["required"],
        serde_json::json!(["field"])
    );
    assert_eq!(
        two["properties"]["b"]["$ref"],
        serde_json::json!("#/definitions/Filter2OrNull")
    );
    assert!(crate::bind(OutputProbe::<TwoModules>(std::marker::PhantomData)).is_ok());
}

/// Types with two fields that serde names alike, in a module of their own: rustc warns of the
/// pattern the `Deserialize` impl can never reach (not of the key the `Serialize` one repeats).
#[allow(unreachable_patterns)]
mod renamed_onto {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// `#[serde(rename = "path")]` gives `file` the name of the other field.
    #[derive(Deserialize, Serialize, JsonSchema)]
    #[allow(dead_code)]
    pub(super) struct RenamedOnto {
        #[serde(rename = "path")]
        file: String,
        path: u32,
    }

    #[derive(Serialize, JsonSchema)]
    #[allow(dead_code)]
    pub(super) struct HoldsRenamedOnto {
        a: u32,
        entries: Vec<RenamedOnto>,
    }
}

/// serde reads only one of two fields of one name (the other is never filled: every call
/// fails) and writes both (every output repeats a key and fails); schemars keeps one property of
/// that name and requires it twice. The spec came out with a `required` draft-07 does not
/// allow, and binding said only that jsonschema could not compile `["path","path"]`. Both now
/// refuse the type, naming it, the field and the fix.
#[test]
fn two_fields_serde_names_alike_are_refused_naming_the_type_and_the_field() {
    assert_eq!(
        tool_spec::<Probe<renamed_onto::RenamedOnto>>().map(|_| ()),
        Err(Error::FieldNameClash {
            tool: "core__probe".into(),
            which: "input",
            ty: "RenamedOnto".into(),
            name: "path".into(),
        })
    );
    let nested = Error::FieldNameClash {
        tool: "core__probe".into(),
        which: "output",
        ty: "RenamedOnto".into(),
        name: "path".into(),
    };
    assert_eq!(
        crate::bind(OutputProbe::<renamed_onto::HoldsRenamedOnto>(
            std::marker::PhantomData
        ))
        .map(|_| ()),
        Err(nested.clone())
    );
    assert_eq!(
        nested.to_string(),
        "tool core__probe: two fields of the output type `RenamedOnto` are both named `path` \
         for serde (a `rename` or `rename_all` gives one the other's name), so serde reads or \
         writes them as one; give each a name of its own"
    );
}

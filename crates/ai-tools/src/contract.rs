//! The contract trait and the derivation of a tool's spec from its Rust types.

use async_trait::async_trait;
use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaSettings};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use ai_core::{
    Capabilities, ExecPermit, Redaction, ToolEffect, ToolError, ToolId, ToolInvocationContext,
    ToolSpec, canonical_json, sha256_hex, validate_tool_schema_p0,
};

use crate::Error;

/// A tool written as Rust types. The input and output schemas are derived from the types, never
/// written by hand (invariant NO_MANUAL_SCHEMA_DUPLICATION).
///
/// Capabilities the tool needs for its whole life (a clock, a workspace) are fields of the
/// implementing value, given when the composition root builds it; per-invocation credentials
/// come from [`Capabilities::auth`].
///
/// ```
/// use ai_tools::ToolContract;
/// use ai_tools::ai_core::{Capabilities, ExecPermit, ToolEffect, ToolError, ToolInvocationContext};
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, Serialize, JsonSchema)]
/// struct AddInput { a: i64, b: i64 }
/// #[derive(Serialize, JsonSchema)]
/// struct AddOutput { sum: i64 }
///
/// struct Add;
/// #[ai_tools::ai_core::async_trait]
/// impl ToolContract for Add {
///     type Input = AddInput;
///     type Output = AddOutput;
///     const ID: &'static str = "core__add";
///     const DESCRIPTION: &'static str = "Adds two integers.";
///     const EFFECT: ToolEffect = ToolEffect::ReadOnly;
///     const REDACTION: &'static [&'static str] = &["sum"];
///     async fn execute(&self, _: &ExecPermit, input: AddInput, _: &ToolInvocationContext,
///         _: &Capabilities) -> Result<AddOutput, ToolError> {
///         input.a.checked_add(input.b).map(|sum| AddOutput { sum })
///             .ok_or_else(|| ToolError::new("the sum overflows"))
///     }
/// }
/// let spec = ai_tools::tool_spec::<Add>().unwrap();
/// assert_eq!(spec.input_schema["required"], serde_json::json!(["a", "b"]));
/// ```
#[async_trait]
pub trait ToolContract: Send + Sync + 'static {
    /// The arguments the model sends.
    ///
    /// Its `Serialize` writes back what its `Deserialize` read: the bound tool's validated
    /// arguments (shown in the start event and the record, hashed for an approval, and what
    /// [`ToolContract::execute`] gets, read again) are the arguments deserialized and written
    /// back, so keys the type ignores are dropped, and what serde filled in (a `default`, a
    /// `None`, written `null` unless `skip_serializing_if` leaves it out) is shown. An array
    /// whose schema says `uniqueItems` (a `HashSet`, a `BTreeSet`, a `Vec` given the keyword)
    /// keeps the order the model wrote its elements in, so the same arguments always give the
    /// same bytes and a `Vec` keeps its order. An element serde changed (a default filled in)
    /// keeps its place when its required fields tell it from the model's other elements, and
    /// otherwise comes after, in canonical JSON order. Other types must serialize
    /// deterministically too (a `HashMap` does: it becomes a JSON object).
    type Input: DeserializeOwned + Serialize + JsonSchema + Send;
    /// What the tool returns, before redaction.
    type Output: Serialize + JsonSchema + Send;

    /// The namespaced id, a valid [`ai_core::ToolId`]: `core__<name>` or
    /// `mcp__<server>__<tool>`; [`crate::bind`] refuses any other, naming the rule it breaks.
    const ID: &'static str;
    /// What the tool does, for the model.
    const DESCRIPTION: &'static str;
    /// Its side-effect level.
    const EFFECT: ToolEffect;
    /// Output paths that may leave the runner (dotted, arrays walked element-wise; a segment
    /// `field*` follows a field holding its own type any number of times, none included, as in
    /// `"children*.name"`).
    const REDACTION: &'static [&'static str];

    /// Whether running the tool twice with the same input has the effect of running it once.
    /// Tools that change state are retried only when this is true.
    const IDEMPOTENT: bool = false;

    /// Whether the tool needs an external connection. A call of such a tool runs only with the
    /// run's selected connection ([`ai_core::RunContext::connection_id`], which must be in
    /// `grant ∩ requested`), resolved by the broker given to
    /// [`ai_core::ToolRunner::with_broker`] into the credentials [`Capabilities::auth`] hands
    /// [`ToolContract::execute`]; without a selected connection, or without a broker, every call
    /// fails before it runs.
    fn requires_connection(&self) -> bool {
        false
    }

    /// Runs the tool on validated, typed input.
    ///
    /// The [`ExecPermit`] is proof that the call comes from the runner (through the
    /// [`ai_core::BoundTool`] that [`crate::bind`] makes); no other code can produce one, so a
    /// contract cannot be run around the runner's policy, validation, budgets and redaction
    /// (invariant ARCH_SINGLE_EXECUTION_PATH). Implementations ignore it.
    ///
    /// ```compile_fail,E0624
    /// # use ai_core::{Capabilities, ToolInvocationContext};
    /// # use ai_tools::ToolContract;
    /// // Calling a contract directly needs a permit, and only the runner can make one.
    /// async fn around_the_runner<C: ToolContract>(
    ///     tool: &C,
    ///     input: C::Input,
    ///     ctx: &ToolInvocationContext,
    /// ) {
    ///     let _ = tool
    ///         .execute(&ai_core::ExecPermit::new(), input, ctx, &Capabilities::default())
    ///         .await;
    /// }
    /// ```
    async fn execute(
        &self,
        _: &ExecPermit,
        input: Self::Input,
        ctx: &ToolInvocationContext,
        caps: &Capabilities,
    ) -> Result<Self::Output, ToolError>;
}

/// The draft-07 schema of `T` as plain JSON, without the `$schema` and `title` annotations
/// (providers ignore them, and the title is the Rust type's name), with `Option`s of structs and
/// enums (the root type's own too), and documented unit enums spelled within the subset (see
/// [`fit::fit_subset`]).
///
/// `contract` is the side of serde it describes: [`Contract::Deserialize`] for an input (what
/// its `Deserialize` takes), [`Contract::Serialize`] for an output (what its `Serialize` writes:
/// a field `skip_serializing_if` may leave out is not required, a field is named as it is
/// written, one serde never writes is not there).
pub(crate) fn derive_schema<T: JsonSchema>(contract: Contract) -> Value {
    let mut settings = SchemaSettings::draft07();
    settings.contract = contract;
    let generator = settings.into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    let mut title = None;
    if let Value::Object(map) = &mut schema {
        map.remove("$schema");
        title = map.remove("title");
    }
    fit::fit_subset(&mut schema, title.as_ref().and_then(Value::as_str));
    schema
}

/// Derives the model-facing spec of a contract.
///
/// The input schema is draft-07, derived deterministically from `C::Input` (same bytes every
/// run), and refused when two different types in it take one schemars name (see
/// [`Error::NameClash`]), when two fields of one type take one serde name (see
/// [`Error::FieldNameClash`]), when it leaves the subset of [`ai_core::validate_tool_schema_p0`],
/// when a map with integer keys lies below a `#[serde(flatten)]`ed field (serde reads the
/// flattened value from a copy whose keys are strings, and would refuse every key of such a
/// map), or when it declares a property named like a connection id (`connectionId`,
/// `connection_id`, or any other case convention of it) anywhere.
pub fn tool_spec<C: ToolContract>() -> Result<ToolSpec, Error> {
    let id = ToolId::parse(C::ID)?;
    if let Some(name) = clash::clashing_name::<C::Input>(Contract::Deserialize) {
        return Err(Error::NameClash {
            tool: C::ID.into(),
            which: "input",
            name,
        });
    }
    let mut input_schema = derive_schema::<C::Input>(Contract::Deserialize);
    if let Some((ty, name)) = clash::repeated_field(&input_schema) {
        return Err(Error::FieldNameClash {
            tool: C::ID.into(),
            which: "input",
            ty: ty.unwrap_or_else(|| C::Input::schema_name().into_owned()),
            name,
        });
    }
    if let Err(violations) = validate_tool_schema_p0(&input_schema) {
        return Err(Error::UnsupportedSchema {
            tool: C::ID.into(),
            violations: violations
                .iter()
                .map(|violation| {
                    let at = input_schema.pointer(&violation.pointer);
                    match at.and_then(unsayable_type) {
                        Some(what) => format!("{violation} ({what})"),
                        None => violation.to_string(),
                    }
                })
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    if let Some(place) = flattened::flattened_integer_keys::<C::Input>(&input_schema) {
        return Err(Error::UnsupportedSchema {
            tool: C::ID.into(),
            violations: format!(
                "{place} in the arguments: a map with integer keys below a `#[serde(flatten)]`ed \
                 field, whose every key serde would refuse (it reads a flattened value from a \
                 copy whose keys are strings, and reads no integer from a string key): key it by \
                 `String`, or do not flatten the field that holds it"
            ),
        });
    }
    keys::narrow_integer_keys::<C::Input>(&mut input_schema);
    if let Some(pointer) = find_connection_id(&input_schema, String::new()) {
        return Err(Error::ConnectionIdInInput {
            tool: C::ID.into(),
            pointer,
        });
    }
    Ok(ToolSpec {
        id,
        description: C::DESCRIPTION.into(),
        input_schema,
        effect: C::EFFECT,
        redaction: Redaction {
            allow: C::REDACTION.iter().map(|p| (*p).to_owned()).collect(),
        },
    })
}

/// The Rust type schemars derives `schema` from and what to take instead, when it is one the
/// subset cannot say by its nature: a signed `NonZero` integer (`not: {"const": 0}`, "any
/// integer but 0", which no keyword of the subset says; an unsigned one is `minimum: 1`), or a
/// map with integer keys that fitting left as schemars wrote it (`patternProperties` of digits):
/// one flattened into a struct, beside its fields (whose keys are the fields' or the map's) or
/// alone (without the `additionalProperties: false` of a map in a field of its own, which is
/// rewritten), or keyed by an untagged enum of names and integers.
fn unsayable_type(schema: &Value) -> Option<String> {
    if schema.get("not") == Some(&serde_json::json!({"const": 0})) {
        let (nonzero, plain) = match schema.get("format").and_then(Value::as_str)? {
            "int8" => ("NonZeroI8", "i8"),
            "int16" => ("NonZeroI16", "i16"),
            "int32" => ("NonZeroI32", "i32"),
            "int64" => ("NonZeroI64", "i64"),
            "int128" => ("NonZeroI128", "i128"),
            "int" => ("NonZeroIsize", "isize"),
            _ => return None,
        };
        return Some(format!(
            "a signed `NonZero` integer, `{nonzero}`, derives \"any integer but 0\", which the \
             subset cannot say: take an `{plain}` and refuse 0 in the tool, or an unsigned \
             `NonZero` integer"
        ));
    }
    let integer_keys = schema
        .get("patternProperties")?
        .as_object()?
        .keys()
        .all(|pattern| matches!(pattern.as_str(), r"^\d+$" | r"^-?\d+$"));
    integer_keys.then(|| {
        "a map with integer keys flattened into a struct (whose every key serde would refuse: \
         it reads a flattened value from a copy whose keys are strings), or keyed by names and \
         integers alike: keep it in a field of its own, keyed by integers alone"
            .into()
    })
}

/// The lower-case hex SHA-256 of the canonical input schema: equal schemas hash equal,
/// whatever their key order.
pub fn schema_hash(spec: &ToolSpec) -> String {
    sha256_hex(canonical_json(&spec.input_schema).as_bytes())
}

/// Whether a property name spells "connection id" in any case convention serde's `rename_all`
/// produces (`connectionId`, `connection_id`, `ConnectionId`, `CONNECTION_ID`, `connection-id`,
/// …) or with any other separator: letters compared without case, anything else ignored.
pub(crate) fn is_connection_id(name: &str) -> bool {
    let mut letters = name.chars().filter(char::is_ascii_alphanumeric);
    "connectionid".chars().all(|expected| {
        letters
            .next()
            .is_some_and(|c| c.eq_ignore_ascii_case(&expected))
    }) && letters.next().is_none()
}

/// The pointer of the first property named like a connection id, at any depth.
fn find_connection_id(node: &Value, pointer: String) -> Option<String> {
    match node {
        Value::Object(map) => map.iter().find_map(|(key, child)| {
            let at = format!("{pointer}/{}", pointer_segment(key));
            if key == "properties"
                && let Value::Object(properties) = child
                && let Some(name) = properties.keys().find(|k| is_connection_id(k))
            {
                return Some(format!("{at}/{}", pointer_segment(name)));
            }
            find_connection_id(child, at)
        }),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, child)| find_connection_id(child, format!("{pointer}/{i}"))),
        _ => None,
    }
}

/// `name` as one segment of a JSON pointer: `~` written `~0` and `/` written `~1`.
fn pointer_segment(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

pub(crate) mod clash;
mod fit;
mod flattened;
mod keys;
pub(crate) mod probe;
#[cfg(test)]
mod tests;

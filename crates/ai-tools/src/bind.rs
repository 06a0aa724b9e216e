//! Binding a contract (holding its capabilities) into an executable [`BoundTool`].

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use async_trait::async_trait;
use jsonschema::Validator;
use jsonschema::error::ValidationErrorKind;
use schemars::JsonSchema;
use schemars::generate::Contract;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use ai_core::{
    BoundTool, Capabilities, ExecPermit, ToolError, ToolInvocationContext, ToolSpec,
    canonical_json, describe_json_error,
};

use crate::contract::clash::{clashing_name, repeated_field};
use crate::contract::probe::{self, Reached};
use crate::contract::{derive_schema, is_connection_id};
use crate::redact::{
    Allowlist, MissingField, StandIn, Unrepresentable, exact_value, field_a_map_may_stand_in_for,
    missing_field, schema_has_path,
};
use crate::{Error, ToolContract, tool_spec};

/// Whether `schema` declares a field anywhere (a `properties` that is not empty). An output
/// that declares none (a plain value, a list of them, a map) has nothing an allowlist path can
/// name.
fn declares_a_field(schema: &Value) -> bool {
    match schema {
        Value::Object(object) => object.iter().any(|(key, value)| {
            (key == "properties" && value.as_object().is_some_and(|fields| !fields.is_empty()))
                || declares_a_field(value)
        }),
        Value::Array(items) => items.iter().any(declares_a_field),
        _ => false,
    }
}

/// A contract with its spec, its compiled validators and its allowlist.
struct BoundContract<C> {
    contract: C,
    spec: ToolSpec,
    input: Validator,
    output: Validator,
    /// The output schema, kept to name the place of an output error.
    output_schema: Value,
    allowlist: Allowlist,
}

/// Binds `contract` into a [`BoundTool`] for a tool source.
///
/// The spec is derived (see [`tool_spec`]; the output is refused for what the input is, two of
/// its types schemars names alike or two fields serde names alike), both validators are
/// compiled here, once, and the
/// redaction allowlist is checked: an empty allowlist, one naming a path the output schema
/// does not have, or one naming a field whose place a map's key could take (a field the output
/// may leave out, `skip_serializing_if`, beside a flattened map; a variant's field where
/// another variant holds a map), whose key of that name would be shown in its place, cannot be
/// bound (invariant REDACTION_REQUIRED).
pub fn bind<C: ToolContract>(contract: C) -> Result<Arc<dyn BoundTool>, Error> {
    let spec = tool_spec::<C>()?;
    if let Some(name) = clashing_name::<C::Output>(Contract::Serialize) {
        return Err(Error::NameClash {
            tool: C::ID.into(),
            which: "output",
            name,
        });
    }
    // What the output's `Serialize` writes, which is what is checked and redacted.
    let output_schema = derive_schema::<C::Output>(Contract::Serialize);
    if let Some((ty, name)) = repeated_field(&output_schema) {
        return Err(Error::FieldNameClash {
            tool: C::ID.into(),
            which: "output",
            ty: ty.unwrap_or_else(|| C::Output::schema_name().into_owned()),
            name,
        });
    }
    let redaction_error = |reason: String| Error::Redaction {
        tool: C::ID.into(),
        reason,
    };
    if C::REDACTION.is_empty() {
        return Err(redaction_error(
            "it is empty; list the output fields that may be shown".into(),
        ));
    }
    if let Some(path) = C::REDACTION
        .iter()
        .find(|path| path.split('.').any(|segment| segment == "*"))
    {
        return Err(redaction_error(format!(
            "{path:?} holds a lone `*`, but an allowlist has no wildcard: name each field that \
             may be shown (a `*` right after a field's name, as in \"next*.name\", follows a \
             field that holds its own type)"
        )));
    }
    // `field*` last reaches the value before it (the field followed no times), kept whole: at
    // the root, the whole output. It names nothing more than the path without it.
    if let Some(path) = C::REDACTION.iter().find(|path| path.ends_with('*')) {
        return Err(redaction_error(format!(
            "{path:?} ends in a `field*`, which keeps whole what the path before it reaches (the \
             whole output at the root): name what to keep after it, as in \"next*.name\""
        )));
    }
    if let Some(path) = C::REDACTION
        .iter()
        .find(|path| !schema_has_path(&output_schema, path))
    {
        let detail = if !declares_a_field(&output_schema) {
            ", which declares none: an allowlist names fields of a struct, so make the output \
             one, as `struct Answer { value: String }` with the allowlist [\"value\"]"
                .into()
        } else if let Some(MissingField {
            reached,
            missing,
            fields,
        }) = missing_field(&output_schema, path)
        {
            // Where the path leaves the output, and what is there: a misspelt field is seen at
            // once.
            let place = match reached {
                "" if missing == *path => String::new(),
                "" => format!(": it has no field {missing:?}"),
                _ if fields.is_empty() => format!(": {reached:?} holds no fields"),
                _ => format!(": {reached:?} has no field {missing:?}"),
            };
            if fields.is_empty() {
                place
            } else {
                let fields = listed(fields.iter().map(|field| format!("{field:?}")));
                format!("{place}; its fields are {fields}")
            }
        } else if path.contains('*') {
            " (a `field*` names a field that holds the type it is in)".into()
        } else {
            String::new()
        };
        return Err(redaction_error(format!(
            "{path:?} is not a field of the output{detail}"
        )));
    }
    if let Some((path, StandIn { field, declared })) = C::REDACTION.iter().find_map(|path| {
        field_a_map_may_stand_in_for(&output_schema, path).map(|found| (path, found))
    }) {
        return Err(redaction_error(if declared {
            format!(
                "{path:?} names `{field}`, which the output may leave out while a map flattened \
                 beside it takes any key: the map's key `{field}` would then be shown in its \
                 place; write the field always (no `skip_serializing_if`), or keep the map in a \
                 field of its own"
            )
        } else {
            format!(
                "{path:?} names `{field}`, but where the path reaches it the output may write, \
                 instead of an object with that field, one that takes any key (a map, a list or \
                 tuple holding one, or any JSON value, as an enum's other variant or as what a \
                 field on the path holds): the map's key `{field}` would then be shown in its \
                 place; keep the map in a field of its own that the path does not go through"
            )
        }));
    }
    let compile = |schema: &Value, which| {
        jsonschema::draft7::new(schema).map_err(|e| Error::SchemaCompile {
            tool: C::ID.into(),
            which,
            reason: e.to_string(),
        })
    };
    Ok(Arc::new(BoundContract {
        input: compile(&spec.input_schema, "input")?,
        output: compile(&output_schema, "output")?,
        output_schema,
        allowlist: Allowlist::new(C::REDACTION.iter().copied()),
        spec,
        contract,
    }))
}

/// A message a model can correct its call from: for each of the first five errors, the place
/// (in the schema's own words, see [`schema_named_path`]) and what is wrong there in plain words,
/// with what the schema allows when the schema says it (a missing property's name, the
/// properties an object takes, the types, a bound, the allowed values). Never the offending
/// value, nor the name of a property the schema does not have: both are the model's text, which
/// may hold anything. `arguments`: `value` is a call's arguments (so the root is "the tool's
/// arguments"), not a tool's output.
fn safe_errors(validator: &Validator, schema: &Value, value: &Value, arguments: bool) -> ToolError {
    let mut parts: Vec<String> = validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let pointer = e.instance_path().as_str();
            let (path, here) = schema_walk(schema, pointer);
            let root_arguments = arguments && pointer.is_empty();
            let what = plain_error(e.kind(), here, root_arguments);
            format!("{path} {what}")
        })
        .collect();
    parts.dedup();
    ToolError::new(parts.join("; "))
}

/// What a schema error says is wrong, in plain words, from the schema only: `here` is the schema
/// of the failing place, when known, and `root_arguments` says the place is a call's whole
/// arguments.
fn plain_error(kind: &ValidationErrorKind, here: Option<&Value>, root_arguments: bool) -> String {
    use ValidationErrorKind as K;
    // The schema's own text (allowed values, a pattern), shown when it is short.
    let short = |text: String| (text.len() <= 200).then_some(text);
    match kind {
        K::Required {
            property: Value::String(name),
        } => format!("lacks the required property `{name}`"),
        K::AdditionalProperties { unexpected } => {
            unexpected_properties(unexpected.len(), here, root_arguments)
        }
        // An object schema that takes no property at all (`additionalProperties: false`
        // without `properties`) refuses any as the `false` schema, at the object's place.
        K::FalseSchema
            if here.and_then(|s| s.get("additionalProperties")) == Some(&Value::Bool(false)) =>
        {
            unexpected_properties(0, here, root_arguments)
        }
        K::FalseSchema => "is not allowed here".into(),
        K::Type { .. } => match here.and_then(|s| s.get("type")).map(type_names) {
            Some(Some(types)) => format!("has the wrong type: it must be {types}"),
            _ => "has the wrong type".into(),
        },
        K::Enum { options } => match short(options.to_string()) {
            Some(options) => format!("is not one of the allowed values: {options}"),
            None => "is not one of the allowed values".into(),
        },
        K::Constant { .. } => "is not the one value the schema allows".into(),
        K::Maximum { limit } => format!("is too large: it must be at most {limit}"),
        K::ExclusiveMaximum { limit } => format!("is too large: it must be less than {limit}"),
        K::Minimum { limit } => format!("is too small: it must be at least {limit}"),
        K::ExclusiveMinimum { limit } => format!("is too small: it must be more than {limit}"),
        K::MultipleOf { multiple_of } => format!("must be a multiple of {multiple_of}"),
        K::MaxLength { limit } => format!("is too long: at most {limit} characters"),
        K::MinLength { limit } => format!("is too short: at least {limit} characters"),
        K::MaxItems { limit } => format!("has too many items: at most {limit}"),
        K::MinItems { limit } => format!("has too few items: at least {limit}"),
        K::MaxProperties { limit } => format!("has too many properties: at most {limit}"),
        K::MinProperties { limit } => format!("has too few properties: at least {limit}"),
        K::UniqueItems => "repeats an item: its items must be unique".into(),
        K::Pattern { pattern } => match short(pattern.clone()) {
            Some(pattern) => format!("does not match the pattern `{pattern}`"),
            None => "does not match the schema's pattern".into(),
        },
        K::Format { format } => format!("is not a valid `{format}`"),
        // A map's key, which is the model's text, is not named: only what keys must be.
        K::PropertyNames { error } => {
            let keys = here.and_then(|s| s.get("propertyNames"));
            format!("has a key that {}", plain_error(error.kind(), keys, false))
        }
        kind => format!("breaks the schema's `{}` rule", kind.keyword()),
    }
}

/// What is wrong with an object holding `count` properties its schema (`here`) does not take
/// (0: an unknown number), naming the ones it takes, from the schema. The unexpected names are
/// the model's text and are not repeated. `root_arguments`: the object is a call's arguments.
fn unexpected_properties(count: usize, here: Option<&Value>, root_arguments: bool) -> String {
    let taken: Vec<&str> = here
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .map(|properties| properties.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let what = match count {
        0 | 1 => "a property".to_owned(),
        n => format!("{n} properties"),
    };
    if taken.is_empty() {
        return if root_arguments {
            format!("holds {what}, but the tool takes no arguments: send `{{}}`")
        } else {
            format!("holds {what}, but takes none")
        };
    }
    let who = if root_arguments { "the tool" } else { "it" };
    format!(
        "holds {what} {who} does not take; {who} takes {}",
        listed(taken.iter().map(|name| format!("`{name}`")))
    )
}

/// How many names a message lists at most: an output or an object schema may have thousands.
const LISTED_NAMES: usize = 20;

/// `names` joined by commas: the first [`LISTED_NAMES`], then `…` when there are more.
fn listed(names: impl IntoIterator<Item = String>) -> String {
    let mut names = names.into_iter();
    let mut shown: Vec<String> = names.by_ref().take(LISTED_NAMES).collect();
    if names.next().is_some() {
        shown.push("…".into());
    }
    shown.join(", ")
}

/// A schema's `type` (one name or a list) as `string or null`.
fn type_names(types: &Value) -> Option<String> {
    match types {
        Value::String(name) => Some(name.clone()),
        Value::Array(names) => {
            let names: Option<Vec<&str>> = names.iter().map(Value::as_str).collect();
            Some(names?.join(" or "))
        }
        _ => None,
    }
}

/// `pointer`, a JSON pointer into an instance of `root`, with every segment the schema does not
/// name shown as `*`: property names and array indices stay, a map key the model made up (which
/// may hold anything, a secret included) does not.
fn schema_named_path(root: &Value, pointer: &str) -> String {
    schema_walk(root, pointer).0
}

/// [`schema_named_path`], and the schema of the place it names (its local references resolved)
/// when the schema describes that place.
fn schema_walk<'a>(root: &'a Value, pointer: &str) -> (String, Option<&'a Value>) {
    let mut shown = String::new();
    let mut schema = Some(root);
    for segment in pointer.split('/').skip(1) {
        let here = schema.map(|s| resolve_local_ref(root, s));
        let key = segment.replace("~1", "/").replace("~0", "~");
        let property = here.and_then(|s| s.get("properties")?.get(&key));
        let index = segment.parse::<usize>().ok();
        let item = match (index, here.and_then(|s| s.get("items"))) {
            (Some(i), Some(Value::Array(tuple))) => tuple.get(i),
            (Some(_), Some(items)) => Some(items),
            _ => None,
        };
        let (text, next) = match (property, item) {
            (Some(property), _) => (segment, Some(property)),
            (None, Some(item)) => (segment, Some(item)),
            (None, None) => ("*", here.and_then(|s| s.get("additionalProperties"))),
        };
        shown.push('/');
        shown.push_str(text);
        schema = next;
    }
    let here = schema.map(|s| resolve_local_ref(root, s));
    (if shown.is_empty() { "/".into() } else { shown }, here)
}

/// One step from a value to a value inside it: an object's key or an array's index.
#[derive(Clone, Copy)]
enum Step<'v> {
    Key(&'v str),
    Index(usize),
}

/// The JSON pointer of the place `steps` lead to from the root (`""` for the root itself).
///
/// The checks walk the arguments with the steps on a stack and write a place out only when they
/// report it: writing each child's place as they go would cost the depth at every value, which
/// grows with the square of the arguments' size.
fn pointer(steps: &[Step<'_>]) -> String {
    #[cfg(test)]
    tests::POINTERS_BUILT.with(|built| built.set(built.get() + 1));
    let mut out = String::new();
    for step in steps {
        out.push('/');
        match step {
            Step::Key(key) => out.push_str(&key.replace('~', "~0").replace('/', "~1")),
            Step::Index(i) => out.push_str(&i.to_string()),
        }
    }
    out
}

/// What a model is told of arguments the schema took and serde refused (`e`, with where serde
/// stopped) as it read a `T`, in the style of [`safe_errors`]: the place in the schema's words
/// (see [`schema_named_path`]), then serde's description without the value
/// ([`describe_json_error`]).
///
/// serde_path_to_error names each step with the input's own text, a map's key included: the
/// place is written as a JSON pointer and shown through the schema, so a key the schema does not
/// name shows as `*`. A step it cannot name (a key that is no string) ends the place at its
/// parent. It names a map's key and its value alike, so when the last step is a key of an
/// integer-keyed map (whose key serde_json reads from its text: one past its type's range, the
/// schema's `propertyNames` took its digits), whether the key or the value was refused is
/// [`key_refused`]; a refused key names the map. A line never counts in the arguments (a key's
/// is within the key, a value's within text of its own that its `Deserialize` read), so it goes
/// unsaid. serde cannot name where it stopped inside a `#[serde(flatten)]`ed part: the property
/// is found again by [`flattened_property`], or the message says that which one, if any, was
/// refused cannot be told.
fn serde_refusal<T: DeserializeOwned>(
    schema: &Value,
    args: &Value,
    e: &serde_path_to_error::Error<serde_json::Error>,
) -> ToolError {
    use serde_path_to_error::Segment;
    let path = e.path();
    let steps: Vec<Step<'_>> = path
        .iter()
        .map_while(|segment| match segment {
            Segment::Seq { index } => Some(Step::Index(*index)),
            Segment::Map { key } | Segment::Enum { variant: key } => Some(Step::Key(key)),
            Segment::Unknown => None,
        })
        .collect();
    let inner = e.inner();
    // A line counts in text the arguments are not: a key's, or a value's own.
    let what = describe_json_error(inner);
    let position = format!(" at line {} column {}", inner.line(), inner.column());
    let what = what.strip_suffix(&position).unwrap_or(&what);
    // The steps to the map, when the last step is a key and every step before it is named.
    let map = path.iter().len().checked_sub(1).filter(|&parent| {
        steps.len() >= parent
            && matches!(
                path.iter().next_back(),
                Some(Segment::Map { .. } | Segment::Unknown)
            )
    });
    if let Some(parent) = map {
        let (place, here) = schema_walk(schema, &pointer(&steps[..parent]));
        if here.is_some_and(|map| map.get("propertyNames").is_some())
            && key_refused::<T>(path, inner.line())
        {
            return ToolError::invalid_input(format!(
                "{place} has a key the tool's input type cannot read: {what}"
            ));
        }
    }
    let place = schema_named_path(schema, &pointer(&steps));
    let every_step_named = steps.len() == path.iter().len();
    let inside = if every_step_named {
        flattened_property::<T>(schema, args, &steps, inner)
    } else {
        Flattened::NotThere
    };
    ToolError::invalid_input(match inside {
        Flattened::NotThere => format!("{place} does not fit the tool's input type: {what}"),
        Flattened::Found(inside) => format!(
            "{} does not fit the tool's input type: {what}",
            schema_named_path(schema, &inside)
        ),
        // A check of the object as a whole is refused there too: which property, if any.
        Flattened::Untold => format!(
            "{place} does not fit the tool's input type: {what}; the input type reads part of \
             this object from a copy (a `#[serde(flatten)]`ed field), so which of its \
             properties, if any, was refused cannot be told"
        ),
    })
}

/// Whether serde, stopped at `path` (whose last step is a key of a map), refused that key
/// rather than its value, its error at `line`. `T` is asked whether it takes that key there
/// ([`probe::reach`]: it reads no value under a key it refuses). Where the probe cannot lead (a
/// step serde could not name: a key read as no integer, past 64 bits; or an enum's variant), a
/// line says a key: serde_json reads a map's integer key from its text, so its refusal has one,
/// where a value's has one only when its `Deserialize` read text of its own.
fn key_refused<T: DeserializeOwned>(path: &serde_path_to_error::Path, line: usize) -> bool {
    use serde_path_to_error::Segment;
    let steps: Option<Vec<probe::Step<'_>>> = path
        .iter()
        .map(|segment| match segment {
            Segment::Seq { .. } => Some(probe::Step::Item),
            Segment::Map { key } => Some(probe::Step::Entry(key)),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
        .collect();
    match steps.map(|steps| probe::reach::<T>(&steps)) {
        Some(Reached::KeyRefused) => true,
        Some(Reached::Directly | Reached::AsAny) => false,
        Some(Reached::Short) | None => line != 0,
    }
}

/// The reads of the input type one refusal's [`flattened_property`] makes at most: probes
/// ([`probe::reach`], which leads from the root to one place, so costs no more than a read of the
/// arguments) and reads of the arguments again alike. A refusal is paid for in a bounded number
/// of reads whatever the arguments' shape, which the model chooses (and whose size,
/// `max_args_bytes`, is a setting).
const MAX_DIAGNOSIS_READS: usize = 16;

/// Where inside an object serde refused it, as far as [`flattened_property`] can tell.
enum Flattened {
    /// The type reads none of the object's properties through a flattened part (or the place
    /// is no object).
    NotThere,
    /// The JSON pointer of the property serde refused.
    Found(String),
    /// Some are, and which one was refused, if any, cannot be told.
    Untold,
}

/// The property of the object at `steps` in `args` where serde stopped, refusing `refusal` as
/// it read a `T`, when `T` reads some of them through a `#[serde(flatten)]`ed part; `schema` is
/// `T`'s input schema.
///
/// serde reads a flattened part from its own copy of the object, where serde_path_to_error
/// cannot follow: the refusal names the object. Which properties are read into the copy is
/// asked of `T` ([`probe::reach`]): first of a key the object's schema does not declare, which
/// stands for every such key (a struct reads them all alike: into the copy when it flattens a
/// part, else not at all; a map reads all its entries alike), so an object without a flattened
/// part costs one probe; then of each property the schema declares that the object holds. Each
/// property read into the copy is taken out in turn and the arguments read again:
///
/// - a property without which serde refuses them the same way is not the one refused;
/// - one without which it takes them, or refuses them otherwise, is, but when it is missed
///   (`missing field` of its name): that says only that the type requires it, as it may check
///   its required fields before it reads the part refused (a flattened map in it).
///
/// The one refused is the one property said to be, or, when none is, the one property left that
/// could be. Otherwise (two refused alike, or a check of the part as a whole) or past
/// [`MAX_DIAGNOSIS_READS`], it cannot be told. A check of the whole object that one property
/// settles (without it the object is taken) reads as that property's refusal: it is named. Only
/// a refusal pays for this.
fn flattened_property<T: DeserializeOwned>(
    schema: &Value,
    args: &Value,
    steps: &[Step<'_>],
    refusal: &serde_json::Error,
) -> Flattened {
    let at = pointer(steps);
    let Some(Value::Object(object)) = args.pointer(&at) else {
        return Flattened::NotThere;
    };
    let declared = schema_walk(schema, &at)
        .1
        .and_then(|here| here.get("properties"))
        .and_then(Value::as_object);
    let is_declared = |key: &str| declared.is_some_and(|declared| declared.contains_key(key));
    // Digits, which every map's key type takes (but a `NonZero`'s `0`); one of the first
    // `declared.len() + 1` is free.
    let Some(stand_in) = (1..)
        .map(|n: u32| n.to_string())
        .find(|key| !is_declared(key))
    else {
        return Flattened::NotThere;
    };
    let mut path: Vec<probe::Step<'_>> = steps
        .iter()
        .map(|step| match step {
            Step::Key(key) => probe::Step::Entry(key),
            Step::Index(_) => probe::Step::Item,
        })
        .collect();
    let mut reads_left = MAX_DIAGNOSIS_READS;
    // Whether `T` reads the value under `key` into the copy; `None` once the reads are spent.
    let mut into_copy = |key| {
        reads_left = reads_left.checked_sub(1)?;
        path.push(probe::Step::Entry(key));
        let read = probe::reach::<T>(&path);
        path.pop();
        Some(read == Reached::AsAny)
    };
    if into_copy(&stand_in) != Some(true) {
        return Flattened::NotThere;
    }
    let mut flattened = Vec::new();
    for key in object.keys() {
        if !is_declared(key) {
            flattened.push(key);
            continue;
        }
        match into_copy(key) {
            Some(true) => flattened.push(key),
            Some(false) => {}
            None => return Flattened::Untold,
        }
    }
    if flattened.len() > reads_left {
        return Flattened::Untold;
    }
    let refused = refusal.to_string();
    let mut trial = args.clone();
    let (mut refused_here, mut maybe) = (Vec::new(), Vec::new());
    for key in flattened {
        // Taken out and put back: the object's keys keep their order (serde_json's map is
        // sorted), so the others are read in the same order.
        let Some(Value::Object(object)) = trial.pointer_mut(&at) else {
            return Flattened::Untold;
        };
        let Some(value) = object.remove(key) else {
            return Flattened::Untold;
        };
        let without = T::deserialize(&trial).err().map(|e| e.to_string());
        if let Some(Value::Object(object)) = trial.pointer_mut(&at) {
            object.insert(key.clone(), value);
        }
        match without {
            Some(same) if same == refused => {}
            Some(missed) if missed.starts_with(&format!("missing field `{key}`")) => {
                maybe.push(key);
            }
            _ => refused_here.push(key),
        }
    }
    let found = match (&refused_here[..], &maybe[..]) {
        ([key], _) | ([], [key]) => key,
        _ => return Flattened::Untold,
    };
    let mut steps = steps.to_vec();
    steps.push(Step::Key(found));
    Flattened::Found(pointer(&steps))
}

/// The JSON pointer of the first object in `value` (reached by `steps`) with a key spelled
/// like a connection id.
fn connection_id_in<'v>(value: &'v Value, steps: &mut Vec<Step<'v>>) -> Option<String> {
    let mut inside = |step: Step<'v>, child: &'v Value| {
        steps.push(step);
        let found = connection_id_in(child, steps);
        steps.pop();
        found
    };
    match value {
        Value::Object(map) if map.keys().any(|key| is_connection_id(key)) => Some(pointer(steps)),
        Value::Object(map) => map
            .iter()
            .find_map(|(key, child)| inside(Step::Key(key), child)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, child)| inside(Step::Index(i), child)),
        _ => None,
    }
}

/// Calls `visit` on every value inside `value` (`value` itself last) with the schema that
/// describes it (`schema`, in `root`, local references resolved), children before their parent.
/// A value the schema says nothing about is not visited, nor is anything inside it.
fn each_described(
    root: &Value,
    schema: &Value,
    value: &mut Value,
    visit: &mut impl FnMut(&Value, &mut Value),
) {
    let schema = resolve_local_ref(root, schema);
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let below = property_schema(schema, key);
                if let Some(below) = below {
                    each_described(root, below, child, visit);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let below = item_schema(schema, i);
                if let Some(below) = below {
                    each_described(root, below, item, visit);
                }
            }
        }
        _ => {}
    }
    visit(schema, value);
}

/// Puts the elements of every array of `value` whose schema (`schema`, in `root`) declares
/// `uniqueItems` in the order the model wrote them in `given` (the arguments as sent, at the
/// same place), at any depth. An element serde changed on the way (a default filled in inside
/// one), which `given` does not hold as it is, takes the place of the model's element that alone
/// shares its required fields (see [`pair_changed`]); one that cannot be told apart so comes
/// after, in the order of its canonical JSON.
///
/// schemars says `uniqueItems` of a `HashSet`, which writes its elements in an order that
/// changes from one deserialization to the next (the approval hash of a call re-validated on
/// resume must come out the same), and of a `BTreeSet`; a `Vec` may say it too, and its order
/// is what the tool runs. The model's order serves both: fixed by the arguments alone, and the
/// `Vec`'s own. Other arrays are left as serde wrote them, their elements paired with the
/// model's by place.
fn order_unique_items(root: &Value, schema: &Value, value: &mut Value, given: Option<&Value>) {
    let schema = resolve_local_ref(root, schema);
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let below = property_schema(schema, key);
                if let Some(below) = below {
                    order_unique_items(root, below, child, given.and_then(|g| g.get(key)));
                }
            }
        }
        Value::Array(items) => {
            let unique = schema.get("uniqueItems") == Some(&Value::Bool(true));
            let given = given.and_then(Value::as_array);
            // Where the model put each element of a set: its equal among the model's, found by
            // a key blind to the order of the sets inside it (which a `HashSet` writes anew on
            // each deserialization), so the pairing never depends on that order. Elements alike
            // but for such an order (two whose inner `Vec` of unique items differs in order
            // only) take the model's that share their key one each, in order, so none takes
            // another's inner order. The model's elements are keyed once: pairing a long set
            // costs its length, not its square (the argument budget is a setting).
            let places: Vec<Option<usize>> = match given {
                Some(given) if unique => {
                    let element = schema.get("items").filter(|items| items.is_object());
                    let mut at: HashMap<String, VecDeque<usize>> = HashMap::new();
                    for (place, item) in given.iter().enumerate() {
                        let key = set_key(root, element, item, Fields::All);
                        at.entry(key).or_default().push_back(place);
                    }
                    let mut places: Vec<Option<usize>> = items
                        .iter()
                        .map(|item| {
                            let key = set_key(root, element, item, Fields::All);
                            at.get_mut(&key).and_then(VecDeque::pop_front)
                        })
                        .collect();
                    pair_changed(root, element, items, given, at, &mut places);
                    places
                }
                _ => vec![None; items.len()],
            };
            for (i, item) in items.iter_mut().enumerate() {
                let below = item_schema(schema, i);
                // A set's element takes the order of the sets inside it from its model's equal.
                let given_item = if unique {
                    places[i].and_then(|at| given?.get(at))
                } else {
                    given.and_then(|g| g.get(i))
                };
                if let Some(below) = below {
                    order_unique_items(root, below, item, given_item);
                }
            }
            if unique {
                let mut keyed: Vec<_> = std::mem::take(items)
                    .into_iter()
                    .zip(places)
                    .map(|(item, place)| match place {
                        Some(at) => ((at, String::new()), item),
                        None => ((usize::MAX, canonical_json(&item)), item),
                    })
                    .collect();
                keyed.sort_by(|a, b| a.0.cmp(&b.0));
                items.extend(keyed.into_iter().map(|(_, item)| item));
            }
        }
        _ => {}
    }
}

/// Pairs each element of `items` (a unique-items array as serde wrote it, `element` the schema
/// of its elements) that `places` pairs with none of the model's (serde changed it: a default
/// filled in, a key it ignores dropped) with the model's element in `given` that no element
/// took (`spare`: the places left in it, by key) and that alone shares its required fields, when
/// it alone does too.
///
/// Such an element then keeps its place, and the order of the arrays inside it, as the model
/// wrote them, as an element serde left alone does. Elements alike in their required fields are
/// not paired: which of the model's each came from cannot be told from a set, whose order
/// changes from one deserialization to the next, so they follow in canonical JSON order. The
/// pairing depends on the elements alone, never on that order. One pass over each array.
fn pair_changed(
    root: &Value,
    element: Option<&Value>,
    items: &[Value],
    given: &[Value],
    spare: HashMap<String, VecDeque<usize>>,
    places: &mut [Option<usize>],
) {
    if places.iter().all(Option::is_some) {
        return;
    }
    // By key of their required fields: the model's elements no element took, and the elements
    // that took none; a key two hold on either side pairs nothing.
    let mut theirs: HashMap<String, Option<usize>> = HashMap::new();
    for place in spare.into_values().flatten() {
        let key = set_key(root, element, &given[place], Fields::Required);
        theirs
            .entry(key)
            .and_modify(|one| *one = None)
            .or_insert(Some(place));
    }
    let mut ours: HashMap<String, Option<usize>> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        if places[i].is_none() {
            let key = set_key(root, element, item, Fields::Required);
            ours.entry(key)
                .and_modify(|one| *one = None)
                .or_insert(Some(i));
        }
    }
    for (key, i) in ours {
        if let (Some(i), Some(Some(place))) = (i, theirs.get(&key)) {
            places[i] = Some(*place);
        }
    }
}

/// Which fields of an object [`set_key`] reads.
#[derive(Clone, Copy)]
enum Fields {
    /// All of them.
    All,
    /// Those its schema requires (all of them when it names no properties, as a map's does): the
    /// model wrote them and serde filled in none of them, so they hold what the model wrote.
    Required,
}

/// `value`'s canonical JSON (as `schema`, in `root`, describes it) with the elements of every
/// array of `uniqueItems` in sorted order: the same for two values that differ only in the order
/// of their sets. With [`Fields::Required`], an object (at any depth) shows only the fields its
/// schema requires. One pass over `value`.
fn set_key(root: &Value, schema: Option<&Value>, value: &Value, fields: Fields) -> String {
    let Some(schema) = schema.map(|schema| resolve_local_ref(root, schema)) else {
        return canonical_json(value);
    };
    match value {
        Value::Object(map) => {
            let required = schema.get("required").and_then(Value::as_array);
            let shown = |key: &str| match fields {
                Fields::All => true,
                Fields::Required => {
                    schema.get("properties").is_none()
                        || required.is_some_and(|r| r.iter().any(|k| k == key))
                }
            };
            let mut shown_fields: Vec<_> = map.iter().filter(|(key, _)| shown(key)).collect();
            shown_fields.sort_unstable_by_key(|(key, _)| *key);
            let parts: Vec<String> = shown_fields
                .into_iter()
                .map(|(key, child)| {
                    let below = property_schema(schema, key);
                    format!(
                        "{}:{}",
                        Value::from(key.as_str()),
                        set_key(root, below, child, fields)
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => {
            let mut elements: Vec<String> = items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let below = item_schema(schema, i);
                    set_key(root, below, item, fields)
                })
                .collect();
            if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
                elements.sort_unstable();
            }
            format!("[{}]", elements.join(","))
        }
        other => canonical_json(other),
    }
}

/// The integers a 64-bit JSON number can be read as exactly: an `i64` or a `u64`. serde_json
/// (without `arbitrary_precision`) reads an integer past them as the nearest float, a different
/// number.
const SIXTY_FOUR_BITS: (i128, i128) = (i64::MIN as i128, u64::MAX as i128);

/// The integers a schema's `type: integer` holds: those of the Rust type its `format` names
/// (as schemars writes it: `int32`, `uint8`, `uint` for a `usize`, …), within
/// [`SIXTY_FOUR_BITS`] (an `i128`'s `int128` included, a `u128`'s `uint128` from 0, and any
/// other format).
fn integer_range(schema: &Value) -> (i128, i128) {
    let bounds = |min: i128, max: i128| (min.max(SIXTY_FOUR_BITS.0), max.min(SIXTY_FOUR_BITS.1));
    match schema.get("format").and_then(Value::as_str) {
        Some("int8") => bounds(i8::MIN.into(), i8::MAX.into()),
        Some("int16") => bounds(i16::MIN.into(), i16::MAX.into()),
        Some("int32") => bounds(i32::MIN.into(), i32::MAX.into()),
        Some("int64") => bounds(i64::MIN.into(), i64::MAX.into()),
        Some("int") => bounds(isize::MIN as i128, isize::MAX as i128),
        Some("uint8") => bounds(0, u8::MAX.into()),
        Some("uint16") => bounds(0, u16::MAX.into()),
        Some("uint32") => bounds(0, u32::MAX.into()),
        Some("uint64") => bounds(0, u64::MAX.into()),
        Some("uint") => bounds(0, usize::MAX as i128),
        // A `u128`'s `uint128`: no negative number either.
        Some(format) if format.starts_with("uint") => bounds(0, SIXTY_FOUR_BITS.1),
        _ => SIXTY_FOUR_BITS,
    }
}

/// The numbers a field's type holds, where its schema's `type` alone does not bound them.
#[derive(Clone, Copy, Debug, PartialEq)]
enum NumberRange {
    /// An integer type's, from [`integer_range`].
    Integer(i128, i128),
    /// An `f32`'s (schemars' `format: float`): a JSON number past it would be read as infinity,
    /// which serde_json writes back as `null`.
    Float32,
}

impl std::fmt::Display for NumberRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Integer(min, max) => write!(f, "an integer from {min} to {max}"),
            Self::Float32 => write!(f, "a number from {:e} to {:e}", f32::MIN, f32::MAX),
        }
    }
}

/// How many numbers out of range an error names ([`numbers_out_of_range`] stops there).
const OUT_OF_RANGE_NAMED: usize = 5;

/// Pushes onto `out` the JSON pointer (`steps` lead to `value`) of each number in `value` that
/// its schema (`schema`, in `root`) bounds by its type, and that lies outside that range, with
/// the range, until `out` holds [`OUT_OF_RANGE_NAMED`]: an integer (`type: integer`) outside
/// [`integer_range`], and a number of an `f32` (`format: float`) that an `f32` cannot hold. A
/// float past 64 bits with no fraction is such an integer, as the model wrote it; a value the
/// schema says nothing about is not looked at.
fn numbers_out_of_range<'v>(
    root: &Value,
    schema: &Value,
    value: &'v Value,
    steps: &mut Vec<Step<'v>>,
    out: &mut Vec<(String, NumberRange)>,
) {
    let schema = resolve_local_ref(root, schema);
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let below = property_schema(schema, key);
                if let Some(below) = below
                    && out.len() < OUT_OF_RANGE_NAMED
                {
                    steps.push(Step::Key(key));
                    numbers_out_of_range(root, below, child, steps, out);
                    steps.pop();
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let below = item_schema(schema, i);
                if let Some(below) = below
                    && out.len() < OUT_OF_RANGE_NAMED
                {
                    steps.push(Step::Index(i));
                    numbers_out_of_range(root, below, item, steps, out);
                    steps.pop();
                }
            }
        }
        Value::Number(number) => {
            let typed = |name: &str| match schema.get("type") {
                Some(Value::String(t)) => t == name,
                Some(Value::Array(types)) => types.iter().any(|t| t == name),
                _ => false,
            };
            // `as` saturates: a float far past 64 bits stays past them.
            #[allow(clippy::cast_possible_truncation)]
            let exact = number
                .as_i64()
                .map(i128::from)
                .or_else(|| number.as_u64().map(i128::from))
                .or_else(|| {
                    number
                        .as_f64()
                        .filter(|f| f.fract() == 0.0)
                        .map(|f| f as i128)
                });
            let (min, max) = integer_range(schema);
            let float32 = schema.get("format").and_then(Value::as_str) == Some("float");
            if typed("integer")
                && let Some(exact) = exact
                && !(min..=max).contains(&exact)
            {
                out.push((pointer(steps), NumberRange::Integer(min, max)));
            } else if float32
                && typed("number")
                // As serde reads an `f32`: the nearest one, infinity past the largest.
                && let Some(float) = number.as_f64()
                && !(float as f32).is_finite()
            {
                out.push((pointer(steps), NumberRange::Float32));
            }
        }
        _ => {}
    }
}

/// Removes, at any depth, each `null` given for a property the schema neither requires nor
/// lets be `null`, so that it reads as left out (and gets the type's default).
///
/// OpenAI's strict form of a schema makes every property required and each optional one
/// nullable, so a model held to it sends `null` for a property it means to leave out (the
/// Structured Outputs guide's way to "emulate optional parameters"). Refusing that `null` would
/// refuse a call made exactly as the tool's advertised schema asked.
fn drop_nulls_left_out(root: &Value, value: &mut Value) {
    each_described(root, root, value, &mut |schema, value| {
        let (Value::Object(map), Some(Value::Object(properties))) =
            (value, schema.get("properties"))
        else {
            return;
        };
        let required = schema.get("required").and_then(Value::as_array);
        map.retain(|key, child| {
            !child.is_null()
                || required.is_some_and(|r| r.iter().any(|k| k == key.as_str()))
                || properties
                    .get(key)
                    .is_none_or(|property| accepts_null(resolve_local_ref(root, property)))
        });
    });
}

/// Whether a schema of the supported subset may let `null` through: each of its `type`, `enum`
/// and `const` that it has must take it (one it lacks says nothing against it). An `Option`
/// given a `const` or an `enum` (by `extend`) takes `null` by its type only: the strict form
/// adds `null` to those too, and a strict model sends it for the property left out.
fn accepts_null(schema: &Value) -> bool {
    let by_type = match schema.get("type") {
        None => true,
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        Some(_) => false,
    };
    let by_enum = match schema.get("enum") {
        Some(Value::Array(values)) => values.contains(&Value::Null),
        _ => true,
    };
    by_type && by_enum && schema.get("const").is_none_or(Value::is_null)
}

/// The schema of the value under `key` in an object `schema` (its own `$ref` resolved already)
/// describes: its property's, else its `additionalProperties`; `None` when it says nothing.
fn property_schema<'a>(schema: &'a Value, key: &str) -> Option<&'a Value> {
    schema
        .get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| schema.get("additionalProperties"))
}

/// The schema of the element at `index` of an array `schema` (its own `$ref` resolved already)
/// describes: its `items`, or the `index`th of a tuple's; `None` when it says nothing.
fn item_schema(schema: &Value, index: usize) -> Option<&Value> {
    match schema.get("items") {
        Some(Value::Array(tuple)) => tuple.get(index),
        other => other,
    }
}

/// `schema`, or what its local `$ref` (`#/definitions/…`) points to.
fn resolve_local_ref<'a>(root: &'a Value, mut schema: &'a Value) -> &'a Value {
    // Derived schemas reference a definition at most a few times in a row; the bound only
    // guards against a cycle of references.
    for _ in 0..16 {
        let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|pointer| root.pointer(pointer))
        else {
            break;
        };
        schema = target;
    }
    schema
}

#[async_trait]
impl<C: ToolContract> BoundTool for BoundContract<C> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn requires_connection(&self) -> bool {
        self.contract.requires_connection()
    }

    fn idempotent(&self) -> bool {
        C::IDEMPOTENT
    }

    fn validate_input(&self, mut args: Value) -> Result<Value, ToolError> {
        drop_nulls_left_out(&self.spec.input_schema, &mut args);
        // Invariant CONNECTION_ID_VIA_CONTEXT: the schema declares none (see `tool_spec`), but
        // a type that ignores unknown fields would take one silently into the record, and a
        // serde `alias` the schema cannot show would take it into the tool.
        if let Some(at) = connection_id_in(&args, &mut Vec::new()) {
            return Err(ToolError::invalid_input(format!(
                "{} holds a connection id; connections come from the invocation context, \
                 never from arguments",
                schema_named_path(&self.spec.input_schema, &at)
            )));
        }
        if !self.input.is_valid(&args) {
            return Err(safe_errors(
                &self.input,
                &self.spec.input_schema,
                &args,
                true,
            ));
        }
        // Draft-07's `integer` and `number` have no bounds, so the schema takes any integer and
        // any number; the place of one the field's type cannot hold is named here, with the
        // range, never the number.
        let root = &self.spec.input_schema;
        let mut out_of_range = Vec::new();
        numbers_out_of_range(root, root, &args, &mut Vec::new(), &mut out_of_range);
        if !out_of_range.is_empty() {
            let parts: Vec<String> = out_of_range
                .iter()
                .map(|(at, range)| {
                    format!(
                        "{} is out of range: it must be {range}",
                        schema_named_path(root, at)
                    )
                })
                .collect();
            return Err(ToolError::invalid_input(parts.join("; ")));
        }
        // serde is stricter than the schema in places (`1.0` for an `i64`, a map key past its
        // integer type's range, a value a type's own `Deserialize` refuses): arguments the tool
        // cannot take are refused here, before an approval is asked for or the call starts,
        // naming where serde stopped. Tracking where serde is copies every key it passes (a
        // fifth of this function's allocations), so only a refusal reads again to learn it
        // (the same value, read the same way; should the type take it this time, that is kept).
        let input = C::Input::deserialize(&args)
            .or_else(|_| serde_path_to_error::deserialize::<_, C::Input>(&args))
            .map_err(|e| serde_refusal::<C::Input>(&self.spec.input_schema, &args, &e))?;
        // What the tool reads, written back: keys the type ignores are gone, what serde filled
        // in (defaults, `None`s) is there. This is what the start event, the record and the
        // approval hash show, and what `exec` reads.
        // An integer past 64 bits is the arguments' (the record could not hold it); any other
        // failure to write back, or to read back what was written, is the input type's own
        // fault (a `Serialize` that does not mirror its `Deserialize`): `permanent`, so the
        // runner answers `execution` and the model is not told to correct its call.
        let mut validated = exact_value(&input).map_err(|why| match why {
            Unrepresentable::WideInteger(at) => ToolError::invalid_input(format!(
                "the tool's input type cannot write back the arguments it read: {} is an \
                 integer beyond 64 bits",
                schema_named_path(&self.spec.input_schema, &at)
            )),
            _ => ToolError::permanent(
                "the tool's input type does not serialize the arguments it read to one JSON \
                 object",
            ),
        })?;
        let schema = &self.spec.input_schema;
        order_unique_items(schema, schema, &mut validated, Some(&args));
        if C::Input::deserialize(&validated).is_err() {
            return Err(ToolError::permanent(
                "the tool's input type does not read back the arguments it writes",
            ));
        }
        Ok(validated)
    }

    async fn exec(
        &self,
        permit: ExecPermit,
        args: Arc<Value>,
        ctx: &ToolInvocationContext,
        caps: &Capabilities,
    ) -> Result<Value, ToolError> {
        // These are the validated arguments, which `validate_input` deserialized already; should
        // a type's `Deserialize` refuse the same value on a second try, it is still the model's
        // arguments at fault.
        // The message serde gives (which may quote the input) is not passed on.
        let input = C::Input::deserialize(&*args).map_err(|_| {
            ToolError::invalid_input("the arguments do not fit the tool's input type")
        })?;
        let output = self.contract.execute(&permit, input, ctx, caps).await?;
        exact_value(&output).map_err(|why| {
            ToolError::new(match why {
                Unrepresentable::Unserializable => "the tool output could not be serialized".into(),
                Unrepresentable::RepeatedKey => {
                    "the tool output repeats a field name, so it cannot be redacted".into()
                }
                Unrepresentable::TooDeep => {
                    "the tool output is nested more than 128 levels deep".into()
                }
                Unrepresentable::WideInteger(at) => format!(
                    "the tool output does not fit: {} is an integer beyond 64 bits, which \
                     cannot be passed on exactly",
                    schema_named_path(&self.output_schema, &at)
                ),
                Unrepresentable::NonFinite(at) => format!(
                    "the tool output does not fit: {} is not a finite number (NaN or an \
                     infinity), which JSON cannot carry",
                    schema_named_path(&self.output_schema, &at)
                ),
            })
        })
    }

    fn validate_output(&self, output: &Value) -> Result<(), ToolError> {
        if self.output.is_valid(output) {
            Ok(())
        } else {
            Err(safe_errors(
                &self.output,
                &self.output_schema,
                output,
                false,
            ))
        }
    }

    fn redact(&self, mut output: Value) -> Result<Value, ToolError> {
        if self.allowlist.apply(&mut output) {
            Ok(output)
        } else {
            Err(ToolError::new("the output has no allowlisted fields"))
        }
    }
}

#[cfg(test)]
mod tests;

//! OpenAI's strict schema form: `additionalProperties: false` and every property required on
//! every object, optional properties made nullable, only supported keywords, within the size
//! limits of the Structured Outputs guide. A schema that cannot be put in that form is sent as
//! is, non-strict: a strict schema the provider refuses is a 400 for the whole request.
//!
//! A model held to the strict form sends `null` for an optional property it leaves out. A tool
//! bound by ai-tools reads such a `null` as left out; a hand-written `BoundTool` whose schema has
//! optional properties that refuse `null` should do the same.

use serde_json::{Map, Value};

/// Keywords strict mode accepts (Structured Outputs, "Supported schemas").
const SUPPORTED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "description",
    "title",
    "$ref",
    "$defs",
    "definitions",
    "anyOf",
    "pattern",
    "format",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "minItems",
    "maxItems",
];

/// String formats strict mode accepts; other `format`s are annotations and are dropped.
const FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Object properties across the whole schema.
const MAX_PROPERTIES: usize = 5000;
/// Levels of nested object schemas (the guide says 5 in some copies and 10 in others: the
/// stricter figure is used, since exceeding it fails the request).
const MAX_OBJECT_DEPTH: usize = 5;
/// Levels of nested schemas of any kind (the guide's limit counts only objects). Only inlining
/// makes a schema deeper than its input; capped, the recursion stays shallow and the JSON sent
/// stays well within what parsers accept (serde_json stops at 128 levels, and a schema level
/// under `properties`, `anyOf` or `$defs` takes two).
const MAX_SCHEMA_DEPTH: usize = 32;
/// Values of one `enum`.
const MAX_ENUM_VALUES: usize = 1000;
/// An `enum` with more values than this is held to [`MAX_LARGE_ENUM_CHARS`].
const LARGE_ENUM_VALUES: usize = 250;
/// Characters across the string values of one `enum` of more than [`LARGE_ENUM_VALUES`].
const MAX_LARGE_ENUM_CHARS: usize = 15_000;
/// Characters across all property names and enum/const values.
const MAX_NAME_CHARS: usize = 120_000;
/// Bytes (compact JSON) that inlining described `$ref`s may copy into the schema. A definition
/// reached along n paths is copied n times, and n grows exponentially through nested `$defs` or
/// `anyOf`, while the guide's limits count neither bytes nor non-object nodes. The guide's budget
/// for names and values is far above what real described references cost (a few KB a copy).
const MAX_INLINED_BYTES: usize = MAX_NAME_CHARS;

/// The strict form of `schema`, or `None` when it cannot be made strict (it is then sent as is,
/// non-strict).
pub(crate) fn strict_parameters(schema: &Value) -> Option<Value> {
    let root = schema.as_object()?;
    if root.get("type") != Some(&Value::from("object")) || root.contains_key("anyOf") {
        return None;
    }
    let mut strict = schema.clone();
    let mut budget = Budget {
        root: Some(schema),
        ..Budget::default()
    };
    (make_strict(&mut strict, 0, &mut budget) && budget.within_limits()).then_some(strict)
}

/// What the schema spends of the guide's size limits, and what resolving `$ref`s needs.
#[derive(Default)]
struct Budget<'a> {
    properties: usize,
    name_chars: usize,
    too_deep_or_wide: bool,
    /// Schemas around the current node, of any kind (see [`MAX_SCHEMA_DEPTH`]).
    nesting: usize,
    /// Bytes copied by inlining so far (see [`MAX_INLINED_BYTES`]).
    inlined_bytes: usize,
    /// The schema as given, where local `$ref`s are resolved.
    root: Option<&'a Value>,
    /// The references being inlined around the current node (a recursive one is not inlined
    /// again).
    inlining: Vec<String>,
}

impl Budget<'_> {
    fn within_limits(&self) -> bool {
        !self.too_deep_or_wide
            && self.properties <= MAX_PROPERTIES
            && self.name_chars <= MAX_NAME_CHARS
    }
}

/// Makes `node` strict in place; `depth` is the number of object schemas around it.
fn make_strict(node: &mut Value, depth: usize, budget: &mut Budget<'_>) -> bool {
    // A boolean schema (`true`: anything) has no type, which strict mode requires.
    let Value::Object(map) = node else {
        return false;
    };
    if budget.nesting == MAX_SCHEMA_DEPTH {
        return false;
    }
    budget.nesting += 1;
    let mut notes = drop_annotations(map);
    // An inlined definition may itself be a `$ref` with siblings (a described alias): it is
    // resolved in turn, so no `$ref` keeps a sibling. The descriptions met on the way are all
    // kept, the field's first, and the notes of any link are said once, around them.
    let mut descriptions: Vec<String> = Vec::new();
    if map.contains_key("$ref") {
        descriptions.extend(description_text(map));
    }
    let mut inlined = 0;
    while map.contains_key("$ref") && (map.len() > 1 || !notes.is_empty()) {
        match inline_ref(map, &mut descriptions, &mut notes, budget) {
            Some(true) => inlined += 1,
            Some(false) => break,
            None => return false,
        }
    }
    // A `$ref` left so has no sibling (a recursive one is wrapped in an `anyOf` to keep them).
    if !notes.is_empty() && !map.contains_key("$ref") {
        notes.say(map);
    }
    let ok = make_strict_map(map, depth, budget);
    budget.inlining.truncate(budget.inlining.len() - inlined);
    budget.nesting -= 1;
    ok
}

/// OpenAI's strict mode refuses a `$ref` with sibling keywords ("$ref cannot have keywords
/// {'description'}"). Annotation siblings (`description`, `title`) are kept by inlining the
/// local definition the `$ref` points to, as the official SDK does for Pydantic schemas.
/// Constraining siblings would intersect with the definition, which inlining cannot express:
/// `None`, non-strict. So is a copy past [`MAX_INLINED_BYTES`], refused before it is made.
///
/// The sibling `title` replaces the definition's. The definition's description joins
/// `descriptions`, those met so far along the chain of references (the field's first), and the
/// copy says them all (`ai_core::join_descriptions`, the rule by which ai-tools joins a newtype's
/// doc comments with its definition's), so strict mode keeps what the model reads of a
/// documented field whose type is documented too (an enum's notes on its variants). The
/// definition's dropped annotations join `notes`, for [`make_strict`] to say once the chain is
/// resolved. Returns whether a definition was inlined (and pushed on `budget.inlining`).
///
/// A reference already being inlined (recursion) cannot be inlined again. It becomes an `anyOf`
/// of the plain `$ref` alone, the same values, and its annotations sit beside the `anyOf`, which
/// strict mode takes (an optional one then gains its `null` branch there: Pydantic's spelling of
/// a described `Optional[Node]`). Its title and the descriptions met along the chain are said
/// there, and [`make_strict`] adds the notes; the definition's own description is not, since
/// the `$ref` still leads to it. One with nothing to say stays a plain `$ref`.
fn inline_ref(
    map: &mut Map<String, Value>,
    descriptions: &mut Vec<String>,
    notes: &mut Notes,
    budget: &mut Budget<'_>,
) -> Option<bool> {
    if map
        .keys()
        .any(|k| !matches!(k.as_str(), "$ref" | "description" | "title"))
    {
        return None;
    }
    let reference = map.get("$ref")?.as_str()?.to_owned();
    if budget.inlining.contains(&reference) {
        let title = map.remove("title");
        map.clear();
        let description = ai_core::join_descriptions(descriptions.iter().map(String::as_str));
        if title.is_none() && description.is_none() && notes.is_empty() {
            map.insert("$ref".into(), reference.into());
            return Some(false);
        }
        let only = serde_json::json!({ "$ref": reference });
        map.insert("anyOf".into(), Value::Array(vec![only]));
        map.extend(title.map(|title| ("title".to_owned(), title)));
        map.extend(description.map(|text| ("description".to_owned(), text.into())));
        return Some(false);
    }
    let pointer = reference.strip_prefix('#')?;
    let found = budget.root?.pointer(pointer)?;
    let Value::Object(definition) = found else {
        return None;
    };
    budget.inlined_bytes += ai_core::compact_json_len(found);
    if budget.inlined_bytes > MAX_INLINED_BYTES || !budget.within_limits() {
        return None;
    }
    let mut inlined = definition.clone();
    for key in ["description", "title"] {
        if let Some(value) = map.remove(key) {
            inlined.insert(key.into(), value);
        }
    }
    descriptions.extend(description_text(definition));
    if let Some(joined) = ai_core::join_descriptions(descriptions.iter().map(String::as_str)) {
        inlined.insert("description".into(), joined.into());
    }
    notes.join(drop_annotations(&mut inlined));
    *map = inlined;
    budget.inlining.push(reference);
    Some(true)
}

/// The schema's `description`, when it is text.
fn description_text(map: &Map<String, Value>) -> Option<String> {
    map.get("description")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The line a `deprecated: true` schema's description opens with in the strict form.
const DEPRECATED: &str = "Deprecated.";

/// Characters of the line that says a schema's `examples` (`Examples: ` and their JSON): past
/// it, they are dropped unsaid. A few short values (a path, a date, a small object) show the
/// model what to send; a longer line would cost every request's context more than it shows.
const MAX_EXAMPLES_CHARS: usize = 200;

/// What the description says in place of the annotations [`drop_annotations`] took, gathered
/// along a chain of inlined references.
struct Notes {
    /// A `deprecated: true` was met: said by a first line [`DEPRECATED`].
    deprecated: bool,
    /// The nearest `examples`, as their line (see [`examples_line`]): said last.
    examples: Option<String>,
}

impl Notes {
    fn is_empty(&self) -> bool {
        !self.deprecated && self.examples.is_none()
    }

    /// Adds the notes of a link further along the chain: the nearest examples are said.
    fn join(&mut self, further: Notes) {
        self.deprecated |= further.deprecated;
        if self.examples.is_none() {
            self.examples = further.examples;
        }
    }

    /// Says the notes in the description: a first line [`DEPRECATED`] unless a line of it says
    /// so already, the examples' line last.
    fn say(self, map: &mut Map<String, Value>) {
        let own = description_text(map);
        let deprecated = self.deprecated
            && !own
                .as_deref()
                .is_some_and(|text| text.lines().any(|line| line == DEPRECATED));
        let lines = deprecated
            .then_some(DEPRECATED)
            .into_iter()
            .chain(own.as_deref())
            .chain(self.examples.as_deref());
        if let Some(said) = ai_core::join_descriptions(lines) {
            map.insert("description".into(), said.into());
        }
    }
}

/// `Examples: ` and each example's compact JSON, `, ` between them (a string quoted, so one
/// holding a comma or a line break still reads as one value on one line). `None` for no examples,
/// or for a line past [`MAX_EXAMPLES_CHARS`].
fn examples_line(examples: Option<Value>) -> Option<String> {
    let Some(Value::Array(examples)) = examples else {
        return None;
    };
    if examples.is_empty() {
        return None;
    }
    let shown: Vec<String> = examples.iter().map(Value::to_string).collect();
    let line = format!("Examples: {}", shown.join(", "));
    (line.chars().count() <= MAX_EXAMPLES_CHARS).then_some(line)
}

/// Removes annotations strict mode rejects or ignores: `$schema` and `$comment`, `default`
/// (nullability says "optional"), unsupported formats, and what schemars writes from Rust
/// attributes. Those that tell the model something are returned, for the description to say
/// them instead ([`Notes::say`]): `deprecated: true` (a `#[deprecated]` field or type) and
/// `examples` (`#[schemars(example = …)]`). `readOnly` and `writeOnly` (a
/// `#[serde(skip_deserializing)]` or `skip_serializing` field) go unsaid: they tell whether a
/// stored value is sent back or may be changed, which says nothing to a model writing a call's
/// arguments.
fn drop_annotations(map: &mut Map<String, Value>) -> Notes {
    for keyword in ["$schema", "$comment", "default", "readOnly", "writeOnly"] {
        map.remove(keyword);
    }
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !FORMATS.contains(&f))
    {
        map.remove("format");
    }
    Notes {
        deprecated: map.remove("deprecated") == Some(Value::Bool(true)),
        examples: examples_line(map.remove("examples")),
    }
}

/// The rest of [`make_strict`], once `$ref` siblings are resolved.
fn make_strict_map(map: &mut Map<String, Value>, depth: usize, budget: &mut Budget<'_>) -> bool {
    if map.keys().any(|k| !SUPPORTED.contains(&k.as_str())) {
        return false;
    }
    // Strict mode wants a `type` on every schema but a reference or a union ("schema must have
    // a 'type' key"), and `items` on every array ("array schema missing items").
    let typed = match map.get("type") {
        Some(Value::String(_)) => true,
        Some(Value::Array(types)) => !types.is_empty() && types.iter().all(Value::is_string),
        _ => false,
    };
    if !typed && !map.contains_key("$ref") && !map.contains_key("anyOf") {
        return false;
    }
    let array = match map.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(types)) => types.iter().any(|t| t == "array"),
        _ => false,
    };
    if array && !map.contains_key("items") {
        return false;
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        if !enum_within_limits(values) {
            return false;
        }
        budget.name_chars += values.iter().map(value_chars).sum::<usize>();
    }
    if let Some(value) = map.get("const") {
        budget.name_chars += value_chars(value);
    }
    let depth = if is_object_schema(map) {
        if depth + 1 > MAX_OBJECT_DEPTH {
            budget.too_deep_or_wide = true;
            return false;
        }
        if !strict_object(map, depth + 1, budget) {
            return false;
        }
        depth + 1
    } else {
        depth
    };
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = map.get_mut(key)
            && !defs.values_mut().all(|d| make_strict(d, depth, budget))
        {
            return false;
        }
    }
    if let Some(items) = map.get_mut("items")
        && !make_strict(items, depth, budget)
    {
        return false;
    }
    if let Some(Value::Array(options)) = map.get_mut("anyOf")
        && !options.iter_mut().all(|o| make_strict(o, depth, budget))
    {
        return false;
    }
    true
}

/// Whether one `enum` is within the guide's limits for a single enum: at most
/// [`MAX_ENUM_VALUES`] values, and at most [`MAX_LARGE_ENUM_CHARS`] characters of strings once it
/// has more than [`LARGE_ENUM_VALUES`].
fn enum_within_limits(values: &[Value]) -> bool {
    values.len() <= MAX_ENUM_VALUES
        && (values.len() <= LARGE_ENUM_VALUES
            || values
                .iter()
                .filter_map(Value::as_str)
                .map(|s| s.chars().count())
                .sum::<usize>()
                <= MAX_LARGE_ENUM_CHARS)
}

/// The characters an enum or const value counts for (strings by length, others as written).
fn value_chars(value: &Value) -> usize {
    match value {
        Value::String(s) => s.chars().count(),
        other => other.to_string().len(),
    }
}

fn is_object_schema(map: &Map<String, Value>) -> bool {
    match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => map.contains_key("properties"),
    }
}

/// Closes an object and makes its optional properties nullable; `depth` counts this object (1
/// is the root).
///
/// Closing keeps what the object declares: an object below the root that declares no
/// `properties` and is not closed takes any object (a free-form map; the root is the tool's
/// argument list, which then takes none), and one that requires a property it does not declare
/// takes that key with any value. Closed, the first would take only `{}` and the second never
/// the key it requires, so neither can be strict. An object that declares `properties`, even
/// none, is closed: its keys are those it names, the strict form's usual trade. (ai-tools
/// derives a struct without fields so, `"properties": {}`, and its tool stays strict.)
fn strict_object(map: &mut Map<String, Value>, depth: usize, budget: &mut Budget<'_>) -> bool {
    match map.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        None if depth == 1 || map.contains_key("properties") => {}
        _ => return false, // An open map cannot be strict.
    }
    map.insert("additionalProperties".into(), Value::Bool(false));
    let required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut properties = match map.remove("properties") {
        Some(Value::Object(properties)) => properties,
        None => Map::new(),
        Some(_) => return false,
    };
    if required.iter().any(|name| !properties.contains_key(name)) {
        return false;
    }
    budget.properties += properties.len();
    for (name, property) in properties.iter_mut() {
        budget.name_chars += name.chars().count();
        if !make_strict(property, depth, budget) {
            return false;
        }
        if !required.contains(name) && !make_nullable(property) {
            return false;
        }
    }
    let all: Vec<Value> = properties.keys().map(|k| Value::from(k.as_str())).collect();
    map.insert("properties".into(), Value::Object(properties));
    map.insert("required".into(), Value::Array(all));
    true
}

/// Lets an optional property be `null`: `null` joins its `type` (and its `enum`, which would
/// otherwise still refuse it); a `$ref` or `anyOf` gains a `{"type": "null"}` branch. A `const`,
/// which cannot take `null`, becomes an `enum` of its value, which accepts the same values, and
/// `null` joins that. False when there is nothing to extend (no type), when a `const` narrows an
/// `enum` beside it, or when the added `null` takes the enum past its limits (the provider
/// checks the enum as sent).
fn make_nullable(property: &mut Value) -> bool {
    let Some(map) = property.as_object_mut() else {
        return false;
    };
    if let Some(value) = map.remove("const") {
        if map.contains_key("enum") {
            return false;
        }
        map.insert("enum".into(), Value::Array(vec![value]));
    }
    let null_branch = || serde_json::json!({"type": "null"});
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
        if !enum_within_limits(values) {
            return false;
        }
    }
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            if t == "null" {
                map.insert("type".into(), t.into());
            } else {
                map.insert("type".into(), Value::Array(vec![t.into(), "null".into()]));
            }
            true
        }
        Some(Value::Array(types)) => {
            if !types.iter().any(|t| t == "null") {
                types.push("null".into());
            }
            true
        }
        Some(_) => false,
        None => {
            if let Some(Value::Array(options)) = map.get_mut("anyOf") {
                if !options.contains(&null_branch()) {
                    options.push(null_branch());
                }
                true
            } else if let Some(reference) = map.remove("$ref") {
                let branches = vec![serde_json::json!({ "$ref": reference }), null_branch()];
                map.insert("anyOf".into(), Value::Array(branches));
                true
            } else {
                // An untyped enum already accepts null now.
                map.contains_key("enum")
            }
        }
    }
}

#[cfg(test)]
mod tests;

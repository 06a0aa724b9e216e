//! Fitting a derived schema into the supported subset: schemars spells two common Rust shapes
//! with keywords the subset refuses, although the subset can say the same thing.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// Keywords whose value maps names to subschemas.
const SCHEMA_MAPS: &[&str] = &["properties", "definitions", "$defs"];
/// Keywords whose value is a subschema or an array of them.
const SCHEMA_SLOTS: &[&str] = &[
    "items",
    "additionalProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "anyOf",
    "oneOf",
    "allOf",
];
/// Where schemars puts the definitions of a draft-07 schema.
const DEFINITIONS: &str = "#/definitions/";

/// Rewrites `schema` in place, accepting exactly the values it accepted before:
///
/// - a root that refers to itself (`"$ref": "#"`, as schemars writes a field of type
///   `Option<Box<Self>>` or `Vec<Self>`) is copied into the definitions under its type's name
///   `title` (see [`define_recursive_root`]), so that its `Option`s can be rewritten as below;
/// - a `$ref` that schemars put in an `allOf` of one so that annotations (a field's doc
///   comment, its `default`) can sit beside it becomes a plain `$ref` beside them (see
///   [`unwrap_annotated_reference`]);
/// - a unit-only enum whose variants have doc comments, headings or `#[deprecated]`, all or
///   some (a `oneOf` of `const`s, and one `enum` of the others), becomes one `enum`, what the
///   variants' annotations say added to the enum's description (see
///   [`collapse_documented_enum`]);
/// - `Option<T>` of a `T` kept in the definitions (a struct, an enum, a newtype of one:
///   `anyOf: [{"$ref": …}, {"type": "null"}]`) becomes a `$ref` to a copy of `T`'s definition
///   (a newtype's, the one it refers to: see [`typed_definition`]), `<T>OrNull` (a number added
///   if the input has a type of that name), with `null` added to its `type` (and `enum`); a
///   newtype of an `Option` (`struct Maybe(Option<Point>)`), once its own `anyOf` is rewritten
///   so, is such a newtype too, its copy already taking `null`.
///
/// - a map with integer keys (`HashMap<u32, V>`: `patternProperties` of one pattern beside
///   `additionalProperties: false`) says the pattern with `propertyNames`, an integer one as the
///   JSON integer serde_json reads a key as (see [`integer_keyed_map`]; a key type that takes
///   no `0`, or no negative key, is told by the type alone, after fitting: `contract/keys.rs`);
///
/// - an object schema that names no property in any way (no `properties`,
///   `additionalProperties` or `patternProperties`: what schemars derives for a struct without
///   fields) declares `"properties": {}` (see [`declare_no_properties`]).
///
/// Definitions no longer referenced are removed, and those whose names a `$ref` must escape are
/// renamed (see [`plain_definition_names`]). Anything else outside the subset is left as is, for
/// the subset check to refuse with its place.
pub(super) fn fit_subset(schema: &mut Value, title: Option<&str>) {
    plain_definition_names(schema);
    define_recursive_root(schema, title);
    // First: the value schema of a map it rewrites is then where the other rewrites look.
    each_schema(schema, &mut integer_keyed_map);
    each_schema(schema, &mut unwrap_annotated_reference);
    each_schema(schema, &mut collapse_documented_enum);
    each_schema(schema, &mut declare_no_properties);
    // A newtype of an `Option` (`struct Maybe(Option<Point>)`) is an `anyOf` that a round
    // rewrites into a `$ref`; an `Option` of it can be rewritten only in the next round, once
    // that `$ref` leads to a typed definition. Each round removes an `anyOf` or ends the loop.
    while nullable_references(schema) {}
    drop_unreferenced_definitions(schema);
}

/// Rewrites each `Option` of a definition that [`typed_definition`] can make nullable into a
/// `$ref` to the nullable copy, and adds the copies; whether it rewrote any.
fn nullable_references(schema: &mut Value) -> bool {
    let Some(Value::Object(definitions)) = schema.get("definitions") else {
        return false;
    };
    let definitions = definitions.clone();
    // Each nullable definition's name: `<T>OrNull`, or with a number added when the input
    // already has a type of that name.
    let mut nullable: BTreeMap<String, String> = BTreeMap::new();
    each_schema(schema, &mut |node| {
        if let Some(name) = nullable_reference(node, &definitions) {
            if !nullable.contains_key(&name) {
                let base = format!("{name}OrNull");
                let mut or_null = base.clone();
                for n in 2.. {
                    let taken = definitions.contains_key(&or_null)
                        || nullable.values().any(|v| *v == or_null);
                    if !taken {
                        break;
                    }
                    or_null = format!("{base}{n}");
                }
                nullable.insert(name.clone(), or_null);
            }
            node.remove("anyOf");
            node.insert(
                "$ref".into(),
                format!("{DEFINITIONS}{}", nullable[&name]).into(),
            );
        }
    });
    let rewrote = !nullable.is_empty();
    if let Some(Value::Object(definitions)) = schema.get_mut("definitions") {
        // Copied as rewritten, so the copies hold no `anyOf` either.
        let copies: Vec<(String, Value)> = nullable
            .into_iter()
            .filter_map(|(name, or_null)| Some((or_null, typed_definition(&name, definitions)?)))
            .collect();
        for (or_null, mut copy) in copies {
            add_null(&mut copy);
            definitions.insert(or_null, copy);
        }
    }
    rewrote
}

/// Renames every definition whose name has a character other than an ASCII letter, a digit,
/// `_`, `-` or `.` (`Gen<Point>` from `#[schemars(rename = "Gen<{T}>")]`, a space, a `/`), each
/// such character becoming `_` (and a number added if that name is taken), and points its
/// `$ref`s at the new name. schemars percent-encodes such names in a `$ref`, which the subset
/// check, the redaction's path check and the error paths read as plain JSON pointers: they
/// would not find the definition.
fn plain_definition_names(schema: &mut Value) {
    let Some(Value::Object(definitions)) = schema.get_mut("definitions") else {
        return;
    };
    let escaped: Vec<String> = definitions
        .keys()
        .filter(|name| !name.chars().all(is_plain))
        .cloned()
        .collect();
    let mut renamed = BTreeMap::new();
    for name in escaped {
        let plain = free_name(&plain_name(&name), definitions);
        if let Some(definition) = definitions.remove(&name) {
            definitions.insert(plain.clone(), definition);
        }
        renamed.insert(name, plain);
    }
    if renamed.is_empty() {
        return;
    }
    each_schema(schema, &mut |node| {
        let target = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(DEFINITIONS))
            .and_then(decode_pointer_segment)
            .and_then(|name| renamed.get(&name));
        if let Some(plain) = target {
            node.insert("$ref".into(), format!("{DEFINITIONS}{plain}").into());
        }
    });
}

/// Whether a `$ref` spells `c` in a definition's name as it is.
fn is_plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// `name` with each character a `$ref` would escape replaced by `_`.
fn plain_name(name: &str) -> String {
    name.chars()
        .map(|c| if is_plain(c) { c } else { '_' })
        .collect()
}

/// `base`, or `base` with the first number from 2 on added that makes it a name no definition
/// has.
fn free_name(base: &str, definitions: &Map<String, Value>) -> String {
    let mut name = base.to_owned();
    for n in 2.. {
        if !definitions.contains_key(&name) {
            break;
        }
        name = format!("{base}{n}");
    }
    name
}

/// When the root refers to itself (`"$ref": "#"` anywhere, in the definitions too), adds a copy
/// of the root (without its definitions) to the definitions, named `title` made plain (`Root`
/// without one; a number added if the name is taken), and points every such `$ref` at the copy.
///
/// schemars spells `Option<Box<Self>>` of the root type `anyOf: [{"$ref": "#"}, {"type":
/// "null"}]`, which the `Option` rewrite can only turn into a nullable copy of a definition. The
/// root itself stays as it was (the subset wants an object schema there, which providers read
/// without following a `$ref`), so the schema accepts what it accepted before.
fn define_recursive_root(schema: &mut Value, title: Option<&str>) {
    let mut self_referenced = false;
    each_schema(schema, &mut |node| {
        self_referenced |= is_root_reference(node);
    });
    if !self_referenced {
        return;
    }
    let Value::Object(root) = schema else {
        return;
    };
    let mut copy = root.clone();
    copy.remove("definitions");
    let definitions = root
        .entry("definitions")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(definitions) = definitions else {
        return;
    };
    let name = free_name(&plain_name(title.unwrap_or("Root")), definitions);
    let target = Value::from(format!("{DEFINITIONS}{name}"));
    definitions.insert(name, Value::Object(copy));
    each_schema(schema, &mut |node| {
        if is_root_reference(node) {
            node.insert("$ref".into(), target.clone());
        }
    });
}

/// Whether `node` is a `$ref` to the whole schema.
fn is_root_reference(node: &Map<String, Value>) -> bool {
    node.get("$ref").and_then(Value::as_str) == Some("#")
}

/// A JSON pointer segment as written in a URI fragment (percent-encoded, `~1` for `/`, `~0`
/// for `~`), decoded; `None` when it is not valid percent-encoded UTF-8.
fn decode_pointer_segment(segment: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(segment.len());
    let mut rest = segment.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    let text = String::from_utf8(bytes).ok()?;
    Some(text.replace("~1", "/").replace("~0", "~"))
}

/// Calls `f` on `node` and on every subschema below it (before their own subschemas).
fn each_schema(node: &mut Value, f: &mut impl FnMut(&mut Map<String, Value>)) {
    let Value::Object(map) = node else {
        return;
    };
    f(map);
    for (keyword, child) in map.iter_mut() {
        match child {
            Value::Object(children) if SCHEMA_MAPS.contains(&keyword.as_str()) => {
                for child in children.values_mut() {
                    each_schema(child, f);
                }
            }
            Value::Array(children) if SCHEMA_SLOTS.contains(&keyword.as_str()) => {
                for child in children {
                    each_schema(child, f);
                }
            }
            _ if SCHEMA_SLOTS.contains(&keyword.as_str()) => each_schema(child, f),
            _ => {}
        }
    }
}

/// Keywords that only annotate a schema: no validator reads them, so draft-07 ignoring them
/// beside a `$ref` changes nothing that is accepted.
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
];

/// `{"allOf": [{"$ref": …}], "description": …}` as `{"$ref": …, "description": …}`, when every
/// keyword beside the `allOf` is an annotation.
///
/// schemars writes a field whose type it keeps in the definitions (a struct, an enum, a newtype)
/// that way when the field has a doc comment or a default, since draft-07 ignores a `$ref`'s
/// siblings; the subset refuses `allOf`. The annotations stay for the model, the `$ref` says
/// what is accepted, as before. A rule beside the `allOf` (a `minimum`, say) keeps it: moved
/// beside the `$ref` it would be shown and never checked.
fn unwrap_annotated_reference(node: &mut Map<String, Value>) {
    let Some(Value::Array(parts)) = node.get("allOf") else {
        return;
    };
    let [Value::Object(only)] = parts.as_slice() else {
        return;
    };
    let Some(reference) = only.get("$ref").filter(|_| only.len() == 1).cloned() else {
        return;
    };
    if node
        .keys()
        .any(|k| k != "allOf" && !ANNOTATIONS.contains(&k.as_str()))
    {
        return;
    }
    node.remove("allOf");
    node.insert("$ref".into(), reference);
}

/// `{"patternProperties": {"^\\d+$": V}, "additionalProperties": false}` as
/// `{"propertyNames": {"pattern": "^(0|[1-9][0-9]*)$"}, "additionalProperties": V}`, when the
/// object declares no property (`properties` empty or absent, no `propertyNames`) and has that
/// one pattern.
///
/// schemars derives a map with integer keys so (`HashMap<u32, V>`; `^-?\d+$` for signed keys);
/// the subset refuses `patternProperties`. Both accept the objects whose every key matches the
/// pattern and every value is a `V`. schemars' two integer patterns also take keys serde_json
/// reads as no integer (`01`, `-0`): each becomes the JSON integers its keys are read as (see
/// [`IntegerKeys`]); any other pattern is kept. A key past the integer type's range matches;
/// serde refuses it, as an integer value past its type's. Beside declared properties (a map
/// flattened into a struct) the keys the properties take would have to join the pattern: left as
/// it is, for the subset check to refuse.
fn integer_keyed_map(node: &mut Map<String, Value>) {
    let Some(Value::Object(patterns)) = node.get("patternProperties") else {
        return;
    };
    let [(pattern, value)] = patterns.iter().collect::<Vec<_>>()[..] else {
        return;
    };
    let no_properties = node
        .get("properties")
        .is_none_or(|properties| properties.as_object().is_some_and(Map::is_empty));
    if !no_properties
        || node.contains_key("propertyNames")
        || node.get("additionalProperties") != Some(&Value::Bool(false))
    {
        return;
    }
    let pattern = IntegerKeys::derived(pattern).map_or(pattern.as_str(), |keys| keys.pattern());
    let names = serde_json::json!({ "pattern": pattern });
    let value = value.clone();
    node.remove("patternProperties");
    node.insert("propertyNames".into(), names);
    node.insert("additionalProperties".into(), value);
}

/// The integers a map's keys may be, as its fitted `propertyNames` pattern says them: the keys
/// serde_json reads as such an integer, JSON integers (no `+`, no leading zero, no `-0`, no
/// space).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct IntegerKeys {
    /// Whether `0` is one.
    pub(super) zero: bool,
    /// Whether negative integers are.
    pub(super) negative: bool,
}

impl IntegerKeys {
    const fn new(zero: bool, negative: bool) -> Self {
        Self { zero, negative }
    }

    /// The keys schemars derives `pattern` for: `^\d+$` for a key of an integer type whose
    /// schema says `minimum: 0`, `^-?\d+$` for any other integer type (a signed one, and a
    /// `NonZero` one, which takes no `0`: see `contract/keys.rs`).
    fn derived(pattern: &str) -> Option<Self> {
        match pattern {
            r"^\d+$" => Some(Self::new(true, false)),
            r"^-?\d+$" => Some(Self::new(true, true)),
            _ => None,
        }
    }

    /// The keys of `node`, when it is a map with integer keys as fitted (`propertyNames` of
    /// one of their patterns).
    pub(super) fn of(node: &Value) -> Option<Self> {
        let pattern = node.pointer("/propertyNames/pattern")?.as_str()?;
        [true, false]
            .into_iter()
            .flat_map(|zero| [true, false].map(|negative| Self::new(zero, negative)))
            .find(|keys| keys.pattern() == pattern)
    }

    /// The pattern of these keys.
    pub(super) fn pattern(self) -> &'static str {
        match (self.zero, self.negative) {
            (true, true) => "^(0|-?[1-9][0-9]*)$",
            (true, false) => "^(0|[1-9][0-9]*)$",
            (false, true) => "^-?[1-9][0-9]*$",
            (false, false) => "^[1-9][0-9]*$",
        }
    }
}

/// `{"type": "object"}` as `{"type": "object", "properties": {}}`, when the object names no
/// property in any way: no `properties`, `additionalProperties` or `patternProperties`.
///
/// schemars derives a struct without fields so (`struct Empty {}`, or one whose every field
/// serde skips), while every map it derives says what its keys hold. Both spellings accept any
/// object, but a schema that declares no properties reads as a free-form map to a provider's
/// strict form (wire-openai's), which sends the whole tool non-strict rather than take only
/// `{}` there; one that declares them, even none, is closed to the keys it names, which is all
/// serde reads of such a struct. A hand-written `JsonSchema` meaning any object says
/// `additionalProperties: true`, as schemars' own `serde_json::Map` does.
fn declare_no_properties(node: &mut Map<String, Value>) {
    let object = match node.get("type") {
        Some(Value::String(kind)) => kind == "object",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "object"),
        _ => false,
    };
    let names_properties = ["properties", "additionalProperties", "patternProperties"]
        .iter()
        .any(|keyword| node.contains_key(*keyword));
    if object && !names_properties {
        node.insert("properties".into(), Value::Object(Map::new()));
    }
}

/// `oneOf: [{"const": "a", "type": "string", "description": "…"}, …]` (what schemars derives
/// for a unit-only enum with documented variants, or variants with a heading, `title`, or
/// `#[deprecated]`) as `{"type": "string", "enum": ["a", …]}`, each variant's annotations noted
/// in the enum's description (see [`variant_note`]). When only some variants are annotated,
/// schemars puts the others together in one branch, `{"type": "string", "enum": ["b", …]}`
/// (first, so they come first in the `enum`), whose values join the enum's too.
fn collapse_documented_enum(node: &mut Map<String, Value>) {
    let Some((kind, values, notes)) = documented_enum(node) else {
        return;
    };
    node.remove("oneOf");
    node.insert("type".into(), kind);
    node.insert("enum".into(), values.into());
    if !notes.is_empty() {
        let notes = notes.join("\n");
        let description = match node.get("description").and_then(Value::as_str) {
            Some(own) => format!("{own}\n{notes}"),
            None => notes,
        };
        node.insert("description".into(), description.into());
    }
}

/// The `type`, the values and the notes on the documented variants (see [`variant_note`]) of
/// `node` when it is a `oneOf` that [`collapse_documented_enum`] rewrites.
fn documented_enum(node: &Map<String, Value>) -> Option<(Value, Vec<Value>, Vec<String>)> {
    let Some(Value::Array(branches)) = node.get("oneOf") else {
        return None;
    };
    // Without a documented variant it is no enum schemars spells this way: left as it is.
    if !branches.iter().any(|b| b.get("const").is_some()) {
        return None;
    }
    let kind = branches.first()?.get("type")?;
    let mut values = Vec::new();
    let mut notes = Vec::new();
    for branch in branches {
        let branch = branch.as_object()?;
        if branch.get("type") != Some(kind) {
            return None;
        }
        match (branch.get("const"), branch.get("enum")) {
            (Some(value), None) => {
                notes.extend(variant_note(value, branch)?);
                values.push(value.clone());
            }
            // The undocumented variants: no description, which could not be told apart by value.
            (None, Some(Value::Array(undocumented)))
                if branch.keys().all(|k| matches!(k.as_str(), "enum" | "type")) =>
            {
                values.extend(undocumented.iter().cloned());
            }
            _ => return None,
        }
    }
    Some((kind.clone(), values, notes))
}

/// What the enum's description says of the variant whose branch is `branch`, a `const` (its
/// `value`) with annotations a variant's attributes give it: its doc comment (`description`,
/// and `title` for a heading), `#[deprecated]` (`deprecated: true`): `` - `value`: Title.
/// Description.``, with `(deprecated)` after the value; `Some(None)` for a variant without any.
/// `None` when the branch holds any other keyword, which the rewrite would lose.
fn variant_note(value: &Value, branch: &Map<String, Value>) -> Option<Option<String>> {
    let mut deprecated = false;
    let mut title = None;
    let mut description = None;
    for (keyword, annotation) in branch {
        match (keyword.as_str(), annotation) {
            ("const" | "type", _) => {}
            ("deprecated", Value::Bool(flag)) => deprecated = *flag,
            ("title", Value::String(text)) => title = Some(text.as_str()),
            ("description", Value::String(text)) => description = Some(text.as_str()),
            _ => return None,
        }
    }
    if !deprecated && title.is_none() && description.is_none() {
        return Some(None);
    }
    let shown = value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned);
    let mut note = format!("- `{shown}`");
    if deprecated {
        note.push_str(" (deprecated)");
    }
    let text = match (title, description) {
        (Some(title), Some(description)) => Some(format!("{} {description}", sentence(title))),
        (Some(title), None) => Some(sentence(title)),
        (None, description) => description.map(str::to_owned),
    };
    if let Some(text) = text {
        note.push_str(": ");
        note.push_str(&text);
    }
    Some(Some(note))
}

/// `text` ending as a sentence does: a full stop added unless it ends in one, `!`, `?` or `:`.
fn sentence(text: &str) -> String {
    if text.ends_with(['.', '!', '?', ':']) {
        text.to_owned()
    } else {
        format!("{text}.")
    }
}

/// The definition's name when `node` is `anyOf: [{"$ref": "#/definitions/<name>"}, {"type":
/// "null"}]` (in either order) and that definition stands for one with a `type` that `null` can
/// be added to ([`typed_definition`]).
fn nullable_reference(
    node: &Map<String, Value>,
    definitions: &Map<String, Value>,
) -> Option<String> {
    let Some(Value::Array(branches)) = node.get("anyOf") else {
        return None;
    };
    let is_null = |b: &Value| {
        b.as_object()
            .is_some_and(|b| b.len() == 1 && b.get("type") == Some(&Value::from("null")))
    };
    let reference = match branches.as_slice() {
        [a, b] if is_null(b) => a,
        [a, b] if is_null(a) => b,
        _ => return None,
    };
    let reference = reference.as_object().filter(|r| r.len() == 1)?;
    let name = reference.get("$ref")?.as_str()?.strip_prefix(DEFINITIONS)?;
    typed_definition(name, definitions).map(|_| name.to_owned())
}

/// The definition `name`, when it has a `type`; or, when it is a `$ref` to another definition
/// beside annotations only (a newtype of a struct or enum, `struct Start(Point)`, which schemars
/// defines so), the typed definition the chain of `$ref`s leads to, with their annotations:
/// their descriptions (a newtype's doc comment) come before its own, the nearest first, each
/// said once (`ai_core::join_descriptions`, by which wire-openai's strict form also joins a
/// described `$ref`'s with the definition it inlines), so neither a newtype's words nor an
/// enum's notes on its variants are lost. Of any other annotation (a `title`, `deprecated`) the
/// nearest wins: the copy stands for `name`, so its own heading is the copy's, as the strict form
/// gives a `$ref`'s siblings precedence over the definition it inlines; the typed definition's
/// own count only where no `$ref` on the way has one. A `$ref`'s other siblings, which draft-07
/// ignores, would become rules in the copy: such a definition is left as it is, as is a chain of
/// `$ref`s that goes round.
fn typed_definition(name: &str, definitions: &Map<String, Value>) -> Option<Value> {
    let mut annotations = Map::new();
    let mut descriptions: Vec<&str> = Vec::new();
    let mut name = name;
    // Bounded: a chain of `$ref`s that goes round ends.
    for _ in 0..definitions.len() {
        let definition = definitions.get(name)?.as_object()?;
        descriptions.extend(definition.get("description").and_then(Value::as_str));
        if matches!(
            definition.get("type"),
            Some(Value::String(_) | Value::Array(_))
        ) {
            let mut typed = definition.clone();
            typed.extend(annotations);
            if let Some(description) = ai_core::join_descriptions(descriptions) {
                typed.insert("description".into(), description.into());
            }
            return Some(typed.into());
        }
        name = definition
            .get("$ref")?
            .as_str()?
            .strip_prefix(DEFINITIONS)?;
        for (keyword, value) in definition {
            if keyword == "$ref" {
                continue;
            }
            if !ANNOTATIONS.contains(&keyword.as_str()) {
                return None;
            }
            annotations
                .entry(keyword.clone())
                .or_insert_with(|| value.clone());
        }
    }
    None
}

/// Adds `null` to a definition's `type`, and to its `enum` or `const` when it has one.
fn add_null(definition: &mut Value) {
    let Value::Object(map) = definition else {
        return;
    };
    match map.get_mut("type") {
        Some(Value::Array(kinds)) if !kinds.contains(&Value::from("null")) => {
            kinds.push("null".into());
        }
        Some(kind @ Value::String(_)) if *kind != "null" => {
            *kind = Value::Array(vec![kind.take(), "null".into()]);
        }
        _ => {}
    }
    if let Some(value) = map.remove("const") {
        map.insert("enum".into(), vec![value, Value::Null].into());
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
}

/// Removes the definitions that nothing outside them, nor any definition that is referenced,
/// refers to.
fn drop_unreferenced_definitions(schema: &mut Value) {
    let Some(Value::Object(definitions)) = schema.get("definitions") else {
        return;
    };
    let mut outside = schema.clone();
    if let Value::Object(map) = &mut outside {
        map.remove("definitions");
    }
    let mut pending = Vec::new();
    collect_definition_refs(&outside, &mut pending);
    let mut used = BTreeSet::new();
    while let Some(name) = pending.pop() {
        if let Some(definition) = definitions.get(&name)
            && used.insert(name)
        {
            collect_definition_refs(definition, &mut pending);
        }
    }
    if let Some(Value::Object(definitions)) = schema.get_mut("definitions") {
        definitions.retain(|name, _| used.contains(name));
        if definitions.is_empty() {
            schema.as_object_mut().map(|map| map.remove("definitions"));
        }
    }
}

/// Pushes the definition name of every `$ref` below `node` onto `out`.
fn collect_definition_refs(node: &Value, out: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(DEFINITIONS))
            {
                out.push(name.replace("~1", "/").replace("~0", "~"));
            }
            map.values()
                .for_each(|child| collect_definition_refs(child, out));
        }
        Value::Array(items) => items
            .iter()
            .for_each(|child| collect_definition_refs(child, out)),
        _ => {}
    }
}

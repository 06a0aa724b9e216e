//! Allowlist redaction: only named output paths survive.

use std::collections::BTreeSet;

use serde::Serialize;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// One segment of an allowlisted path.
#[derive(Debug, PartialEq, Eq)]
enum Segment {
    /// A field, once.
    Field(String),
    /// `field*`: a field that holds the type it is in, followed any number of times, none
    /// included (`"next*.name"` is `name`, `next.name`, `next.next.name`, …).
    Repeat(String),
}

impl Segment {
    /// A segment as written between the dots of a path.
    fn parse(segment: &str) -> Self {
        match segment.strip_suffix('*').filter(|field| !field.is_empty()) {
            Some(field) => Self::Repeat(field.to_owned()),
            None => Self::Field(segment.to_owned()),
        }
    }
}

/// The allowlisted paths. A value that an allowlisted path ends at keeps its whole subtree; a
/// value that paths go through keeps only the children they go on to.
#[derive(Debug, Default)]
pub(crate) struct Allowlist {
    paths: Vec<Vec<Segment>>,
}

/// Where a path has got to: the path's index and how many of its segments are behind.
type Place = (usize, usize);

impl Allowlist {
    /// Reads dotted paths (`"entries.name"`, `"children*.name"`).
    pub(crate) fn new<'a>(paths: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            paths: paths
                .into_iter()
                .map(|path| path.split('.').map(Segment::parse).collect())
                .collect(),
        }
    }

    /// Strips everything from `value` that no allowlisted path reaches, in place. Arrays are
    /// walked element by element with the same allowlist. A `null` where the allowlist expects
    /// fields below it stays (it holds nothing, and an `Option` that is `None` says so); any
    /// other scalar there is removed.
    pub(crate) fn apply(&self, value: &mut Value) -> bool {
        let start = self.closure((0..self.paths.len()).map(|path| (path, 0)).collect());
        self.apply_at(&start, value)
    }

    /// [`Allowlist::apply`] to a value the paths have got to at `places`.
    fn apply_at(&self, places: &[Place], value: &mut Value) -> bool {
        if places
            .iter()
            .any(|&(path, done)| done == self.paths[path].len())
        {
            return true;
        }
        match value {
            Value::Object(map) => {
                map.retain(|key, child| {
                    let next = self.step(places, key);
                    !next.is_empty() && self.apply_at(&next, child)
                });
                true
            }
            Value::Array(items) => {
                items.retain_mut(|item| self.apply_at(places, item));
                true
            }
            Value::Null => true,
            _ => false,
        }
    }

    /// Where the paths at `places` get to through the field `key`.
    fn step(&self, places: &[Place], key: &str) -> Vec<Place> {
        let next = places
            .iter()
            .filter_map(|&(path, done)| match self.paths[path].get(done) {
                Some(Segment::Field(field)) if field == key => Some((path, done + 1)),
                Some(Segment::Repeat(field)) if field == key => Some((path, done)),
                _ => None,
            })
            .collect();
        self.closure(next)
    }

    /// `places`, with each `field*` segment also passed over (followed no more times).
    fn closure(&self, mut places: Vec<Place>) -> Vec<Place> {
        let mut i = 0;
        while let Some(&(path, done)) = places.get(i) {
            if let Some(Segment::Repeat(_)) = self.paths[path].get(done)
                && !places.contains(&(path, done + 1))
            {
                places.push((path, done + 1));
            }
            i += 1;
        }
        places.sort_unstable();
        places.dedup();
        places
    }
}

/// Why a typed value cannot be passed on as the JSON value it serializes to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unrepresentable {
    /// Its `Serialize` failed.
    Unserializable,
    /// An object in it repeats a key.
    RepeatedKey,
    /// It is nested deeper than serde_json reads (128 levels).
    TooDeep,
    /// An integer in it, at this JSON pointer, is beyond what 64 bits hold (an `i128` or
    /// `u128`): the workspace's serde_json (without `arbitrary_precision`) would read it as a
    /// float, a different number.
    WideInteger(String),
    /// A number in it, at this JSON pointer, is NaN or an infinity, which JSON has no way to
    /// write: serde_json writes `null`, which reads as no value (an `Option`'s `None`).
    NonFinite(String),
}

/// `output` as a JSON value, or why it cannot be one exactly: it does not serialize, an object
/// in it repeats a key, it is nested deeper than serde_json reads (128 levels), or it holds an
/// integer beyond 64 bits or a number that is not finite.
///
/// `serde_json::to_value` keeps the last of two equal keys, and serde writes two when a
/// `#[serde(flatten)]`ed map or struct holds a key its parent has: the flattened value would
/// then stand in for the parent's field, under that field's allowlisted name.
///
/// serde_json's `Value` holds an `i64`, a `u64` or an `f64`: an `i128` or `u128` written past
/// 64 bits would be read back as the nearest `f64`, and shown as a number the tool never
/// returned. Such an integer is refused with its place instead.
pub(crate) fn exact_value<T: Serialize>(output: &T) -> Result<Value, Unrepresentable> {
    let text = serde_json::to_string(output).map_err(|_| Unrepresentable::Unserializable)?;
    let value = match serde_json::from_str::<UniqueKeys>(&text) {
        Ok(UniqueKeys(value)) => value,
        Err(e) if e.is_data() => return Err(Unrepresentable::RepeatedKey),
        Err(_) => return Err(Unrepresentable::TooDeep),
    };
    // A NaN or an infinity is written `null`: only text with one in it needs looking through.
    // Walked once read back, so at most 128 levels deep: the walk's frames are deeper than
    // serde_json's, and an output it could write could otherwise overflow the stack here.
    if text.contains("null")
        && let Some(pointer) = finite::non_finite_place(output)
    {
        return Err(Unrepresentable::NonFinite(pointer));
    }
    // A wide integer is read as a float: only text with a float in it needs looking through.
    if has_float(&value)
        && let Some(pointer) = (Scan { text, at: 0 }).wide_integer("")
    {
        return Err(Unrepresentable::WideInteger(pointer));
    }
    Ok(value)
}

/// Whether `value` holds a number that is neither an `i64` nor a `u64`.
fn has_float(value: &Value) -> bool {
    match value {
        Value::Number(number) => number.is_f64(),
        Value::Array(items) => items.iter().any(has_float),
        Value::Object(map) => map.values().any(has_float),
        _ => false,
    }
}

/// A walk through JSON text that serde_json wrote (so valid, and at most 128 levels deep once
/// serde_json has read it back), looking for integers past 64 bits.
struct Scan {
    text: String,
    at: usize,
}

impl Scan {
    /// The JSON pointer (below `pointer`) of the first integer in the value at `at` that
    /// neither an `i64` nor a `u64` holds; `at` moves past the value.
    fn wide_integer(&mut self, pointer: &str) -> Option<String> {
        self.skip_whitespace();
        match self.text.as_bytes().get(self.at)? {
            b'{' => {
                self.at += 1;
                loop {
                    self.skip_whitespace();
                    if self.eat(b'}') {
                        return None;
                    }
                    let key: String = serde_json::from_str(self.string()?).ok()?;
                    self.skip_whitespace();
                    if !self.eat(b':') {
                        return None;
                    }
                    let at = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                    if let Some(found) = self.wide_integer(&at) {
                        return Some(found);
                    }
                    self.skip_whitespace();
                    if !self.eat(b',') {
                        return None;
                    }
                }
            }
            b'[' => {
                self.at += 1;
                for index in 0.. {
                    self.skip_whitespace();
                    if self.eat(b']') {
                        return None;
                    }
                    if let Some(found) = self.wide_integer(&format!("{pointer}/{index}")) {
                        return Some(found);
                    }
                    self.skip_whitespace();
                    if !self.eat(b',') {
                        return None;
                    }
                }
                None
            }
            b'"' => {
                self.string();
                None
            }
            _ => {
                let rest = &self.text[self.at..];
                let end = rest
                    .find([',', ']', '}', ' ', '\t', '\n', '\r'])
                    .unwrap_or(rest.len());
                let token = &rest[..end];
                self.at += end;
                let digits = token.strip_prefix('-').unwrap_or(token);
                let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
                let fits = token.parse::<i64>().is_ok() || token.parse::<u64>().is_ok();
                (integer && !fits).then(|| pointer.to_owned())
            }
        }
    }

    /// The string at `at`, quotes and escapes as written; `at` moves past it.
    fn string(&mut self) -> Option<&str> {
        let start = self.at;
        let bytes = self.text.as_bytes();
        if bytes.get(start) != Some(&b'"') {
            return None;
        }
        let mut i = start + 1;
        loop {
            match bytes.get(i)? {
                b'\\' => i += 2,
                b'"' => break,
                _ => i += 1,
            }
        }
        self.at = i + 1;
        self.text.get(start..=i)
    }

    /// Moves past `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let next = self.text.as_bytes().get(self.at) == Some(&byte);
        if next {
            self.at += 1;
        }
        next
    }

    fn skip_whitespace(&mut self) {
        while self
            .text
            .as_bytes()
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }
}

/// A JSON value whose objects were read with no key twice.
struct UniqueKeys(Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeysVisitor).map(Self)
    }
}

struct UniqueKeysVisitor;

impl<'de> Visitor<'de> for UniqueKeysVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value whose objects have no key twice")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(items.into())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some((key, UniqueKeys(value))) = map.next_entry::<String, UniqueKeys>()? {
            if object.insert(key, value).is_some() {
                return Err(de::Error::custom("an object repeats a key"));
            }
        }
        Ok(object.into())
    }
}

/// Whether the dotted `path` names a property of the output `schema` (following local `$ref`s,
/// a list's `items`, a tuple's places and the variants of enums, flattened or not: see
/// [`properties`]); a `field*` segment must name a field that holds its own type (`next` of a
/// linked list, `children` of a tree), and what follows it (something must) must be there at
/// every depth.
pub(crate) fn schema_has_path(schema: &Value, path: &str) -> bool {
    let segments: Vec<Segment> = path.split('.').map(Segment::parse).collect();
    has_path(schema, schema, &segments)
}

/// Where a dotted path of plain fields leaves an output schema (see [`missing_field`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MissingField<'a> {
    /// The longest beginning of the path the schema has (empty: none, the path leaves it at
    /// the root).
    pub(crate) reached: &'a str,
    /// The segment after it, which no value it reaches has.
    pub(crate) missing: &'a str,
    /// The fields the values it reaches have, sorted.
    pub(crate) fields: BTreeSet<&'a str>,
}

/// Where the dotted `path` leaves the output `schema`, as [`schema_has_path`] follows it; `None`
/// when the schema has it, or when it holds a `field*` segment (whose every depth must hold
/// what follows, so that it leaves the schema at no one place).
pub(crate) fn missing_field<'a>(schema: &'a Value, path: &'a str) -> Option<MissingField<'a>> {
    let mut reached: Vec<&Value> = vec![schema];
    let mut offset = 0;
    for segment in path.split('.') {
        if segment.ends_with('*') {
            return None;
        }
        let objects = reached.iter().filter_map(|node| resolve(schema, node));
        let next: Vec<&Value> = objects
            .clone()
            .flat_map(|object| properties(schema, object, segment))
            .collect();
        if next.is_empty() {
            let fields = objects
                .flat_map(|object| shapes(schema, object))
                .filter_map(|shape| shape.get("properties").and_then(Value::as_object))
                .flat_map(|properties| properties.keys().map(String::as_str))
                .collect();
            return Some(MissingField {
                reached: path[..offset].strip_suffix('.').unwrap_or_default(),
                missing: segment,
                fields,
            });
        }
        reached = next;
        offset += segment.len() + 1;
    }
    None
}

/// A field on an allowlist path whose place a map's key could take.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct StandIn {
    /// The field's name.
    pub(crate) field: String,
    /// Whether the object declares the field beside the map (one the output may leave out), so
    /// writing it always would have the map's key repeat it (an output refused, see
    /// [`exact_value`]). Otherwise the value the path reaches may be, instead of an object
    /// with the field, one that takes any key (an enum's other variant, or what a field on the
    /// path holds, being a map, a list or tuple holding one, or any JSON value): only moving
    /// the map off the path helps.
    pub(crate) declared: bool,
}

/// The field on the dotted `path` (a path [`schema_has_path`] accepts, in the output `schema`)
/// that the output may leave out (a `skip_serializing_if` field, or a variant's field: not
/// `required`) of an object that takes any other key too (a map flattened into it, directly or
/// through an enum: see [`takes_key`]).
///
/// When the field is there, a key of the map spelled like it repeats it, and the output is
/// refused (see [`exact_value`]); when it is left out, the map's key repeats nothing and would be
/// shown under the allowlisted name.
pub(crate) fn field_a_map_may_stand_in_for(schema: &Value, path: &str) -> Option<StandIn> {
    let segments: Vec<Segment> = path.split('.').map(Segment::parse).collect();
    stand_in(schema, schema, &segments)
}

/// [`field_a_map_may_stand_in_for`] of `segments` from `node` (in `root`).
fn stand_in(root: &Value, node: &Value, segments: &[Segment]) -> Option<StandIn> {
    let (segment, rest) = segments.split_first()?;
    let object = resolve(root, node)?;
    let (Segment::Field(name) | Segment::Repeat(name)) = segment;
    let exposed = |object: &Value| {
        let required = object
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|required| required.iter().any(|r| r == name.as_str()));
        (!required && takes_key(root, object, name, &mut BTreeSet::new())).then(|| StandIn {
            field: name.clone(),
            declared: object.get("properties").and_then(|p| p.get(name)).is_some(),
        })
    };
    if let Some(found) = exposed(object) {
        return Some(found);
    }
    match segment {
        // Each variant that has the field may lead on to its own stand-in.
        Segment::Field(_) => properties(root, object, name)
            .into_iter()
            .find_map(|child| stand_in(root, child, rest)),
        // The field followed any number of times, none included: redaction follows it by name
        // into whatever each variant's field of that name holds, to every depth, and `rest` from
        // each type it reaches. Each type once (by address, in `root`), so a type holding itself
        // ends.
        Segment::Repeat(_) => {
            let mut seen = BTreeSet::new();
            let mut pending = vec![object];
            while let Some(at) = pending.pop() {
                if !seen.insert(std::ptr::from_ref(at) as usize) {
                    continue;
                }
                if let Some(found) = exposed(at) {
                    return Some(found);
                }
                if let Some(found) = stand_in(root, at, rest) {
                    return Some(found);
                }
                let inner = properties(root, at, name).into_iter();
                pending.extend(inner.filter_map(|child| resolve(root, child)));
            }
            None
        }
    }
}

/// Whether the object schema `object` (in `root`) takes a key `name` besides its
/// `properties`: a map flattened into it says so with `additionalProperties` (anything but
/// `false`, unless a `propertyNames` pattern keeps `name` out: an integer-keyed map's digits,
/// as the schema is fitted to the subset) or `patternProperties` (those of a pattern that
/// matches `name`: an integer-keyed map's digits never do), beside the properties or,
/// flattened through an enum (untagged, or a variant of a tagged one), in one of the enum's
/// shapes (`anyOf`, `oneOf`, `allOf`, through `$ref`s, and the `items` of a list, whose
/// elements redaction walks as the value they are in: an untagged `Many(Vec<Map>)`), or with a
/// shape that holds any value (`true`, or a schema without any of the [`SHAPE_KEYWORDS`], as an
/// untagged variant of a `serde_json::Value` is, whatever its attributes add). `seen` holds the shapes already looked at (by address, in
/// `root`): each is looked at once, so shapes that lead back round (an enum holding itself) end.
fn takes_key(root: &Value, object: &Value, name: &str, seen: &mut BTreeSet<usize>) -> bool {
    if !seen.insert(std::ptr::from_ref(object) as usize) {
        // Looked at already, or being looked at: its answer comes from there.
        return false;
    }
    let any_value = match object {
        Value::Bool(any) => *any,
        Value::Object(keywords) => !keywords
            .keys()
            .any(|keyword| SHAPE_KEYWORDS.contains(&keyword.as_str())),
        _ => false,
    };
    if any_value {
        return true;
    }
    // A `propertyNames` pattern the name does not match (an integer-keyed map's, as fitted to
    // the subset) keeps the key out whatever `additionalProperties` says.
    let named = object
        .get("propertyNames")
        .and_then(|names| names.get("pattern"))
        .and_then(Value::as_str)
        .is_none_or(|pattern| matches_pattern(pattern, name));
    let additional = named
        && object
            .get("additionalProperties")
            .is_some_and(|other| *other != Value::Bool(false));
    let patterned =
        object
            .get("patternProperties")
            .is_some_and(|patterns| match patterns.as_object() {
                Some(patterns) => patterns
                    .keys()
                    .any(|pattern| matches_pattern(pattern, name)),
                None => true,
            });
    additional
        || patterned
        || ["anyOf", "oneOf", "allOf", "items"]
            .iter()
            .filter_map(|keyword| object.get(*keyword))
            // `items` is one schema, or one for each place of a tuple.
            .flat_map(|shapes| {
                shapes
                    .as_array()
                    .map_or(std::slice::from_ref(shapes), Vec::as_slice)
            })
            .any(|shape| {
                let shape = match shape.get("$ref").and_then(Value::as_str) {
                    Some(reference) => match reference
                        .strip_prefix('#')
                        .and_then(|pointer| root.pointer(pointer))
                    {
                        Some(target) => target,
                        // A reference that leads nowhere: taken as able to hold anything.
                        None => return true,
                    },
                    None => shape,
                };
                takes_key(root, shape, name, seen)
            })
}

/// Keywords that say what a value is. A schema with none of them holds any value, whatever else
/// it carries: annotations (`description`, `deprecated`, …) or extension keywords (`x-…`),
/// which schemars writes beside a variant's `true` for its attributes (`#[deprecated]`,
/// `#[schemars(extend(…))]`), or a keyword that bounds some other kind of value.
const SHAPE_KEYWORDS: &[&str] = &["type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf"];

/// Whether the JSON Schema `pattern` (an ECMA 262 regular expression, as the validator reads
/// it) matches `name`; one the validator cannot read is taken to match.
fn matches_pattern(pattern: &str, name: &str) -> bool {
    jsonschema::draft7::new(&serde_json::json!({ "pattern": pattern }))
        .map_or(true, |validator| validator.is_valid(&Value::from(name)))
}

/// Whether `segments` lead from `node` (in `root`) to a property.
fn has_path(root: &Value, node: &Value, segments: &[Segment]) -> bool {
    let Some((segment, rest)) = segments.split_first() else {
        return true;
    };
    let Some(object) = resolve(root, node) else {
        return false;
    };
    match segment {
        Segment::Field(name) => properties(root, object, name)
            .into_iter()
            .any(|child| has_path(root, child, rest)),
        // A path never ends in one: it would keep whole the value it is in.
        Segment::Repeat(_) if rest.is_empty() => false,
        Segment::Repeat(name) => {
            // Below the field is a type whose same field leads back to it (the root's own
            // recursion leads first to its copy in the definitions, then round that).
            let holds_itself = |inner: &Value| {
                properties(root, inner, name)
                    .into_iter()
                    .any(|again| resolve(root, again) == Some(inner))
            };
            properties(root, object, name)
                .into_iter()
                .filter_map(|child| resolve(root, child))
                .filter(|inner| holds_itself(inner))
                .any(|inner| has_path(root, object, rest) && has_path(root, inner, rest))
        }
    }
}

/// The schemas of the property `name` of an object schema (in `root`): the one in its
/// `properties`, and those in the shapes an enum gives it (`anyOf`, `oneOf`, `allOf`, through
/// `$ref`s): an enum's variants, whose fields serde writes in the object the enum is, or
/// beside the object's own fields when it is flattened into it. Redaction keeps a field by its
/// name whichever variant wrote it. A tuple's places (`items` of one schema each) are shapes
/// too: redaction walks each element as the value it is in.
fn properties<'a>(root: &'a Value, object: &'a Value, name: &str) -> Vec<&'a Value> {
    shapes(root, object)
        .into_iter()
        .filter_map(|shape| shape.get("properties").and_then(|p| p.get(name)))
        .collect()
}

/// An object schema (in `root`) and the shapes an enum or a tuple gives it (see
/// [`properties`]), each once.
fn shapes<'a>(root: &'a Value, object: &'a Value) -> Vec<&'a Value> {
    let mut found = Vec::new();
    // Each schema once (by address, in `root`): shapes that lead back round (an enum inside
    // itself) end.
    let mut seen = BTreeSet::new();
    let mut pending = vec![object];
    while let Some(object) = pending.pop() {
        if !seen.insert(std::ptr::from_ref(object) as usize) {
            continue;
        }
        found.push(object);
        let shapes = ["anyOf", "oneOf", "allOf", "items"]
            .iter()
            .filter_map(|keyword| object.get(*keyword).and_then(Value::as_array))
            .flatten();
        pending.extend(shapes.filter_map(|shape| resolve(root, shape)));
    }
    found
}

/// Follows `$ref`s and a list's `items` down to the schema that has the properties: the
/// list's element, or a tuple (whose `items` are a schema for each place: see [`properties`]).
fn resolve<'a>(root: &'a Value, mut node: &'a Value) -> Option<&'a Value> {
    // Bounded: a cyclic `$ref` chain cannot loop forever.
    for _ in 0..32 {
        if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            node = root.pointer(reference.strip_prefix('#')?)?;
        } else if let Some(items) = node.get("items").filter(|items| !items.is_array()) {
            node = items;
        } else {
            return Some(node);
        }
    }
    None
}

mod finite;
#[cfg(test)]
mod tests;

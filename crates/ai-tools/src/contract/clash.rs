//! Finding two types that schemars takes for one: the schema of one would stand in for the
//! other's.
//!
//! schemars keeps one definition per schema id, and a derived type's id is its module path and
//! its name as serde spells it. Two types of different modules that share a name get two
//! definitions (`Filter`, `Filter2`); two of one module that serde names alike (one of them
//! `#[serde(rename = "Filter")]`), or two hand-written `JsonSchema` impls whose `schema_id`
//! falls back to the same `schema_name`, share one, and the type derived second is described by
//! the first one's schema: a contract whose arguments no call could get right, or whose output
//! check refuses every answer.
//!
//! Derived with `inline_subschemas`, each place gets the schema of its own type (only a type
//! inside itself is a `$ref`), so the clash shows as a place where the two derivations disagree.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaSettings};
use serde_json::Value;

/// The name schemars gave two different types of `T`'s schema (derived for `contract`, the side
/// of serde it describes), when it gave one to two.
///
/// A clash between a type and one that contains it (the root type included) cannot be seen:
/// schemars reads the inner one as the outer one in both derivations, as if the type contained
/// itself.
pub(crate) fn clashing_name<T: JsonSchema>(contract: Contract) -> Option<String> {
    let mut settings = SchemaSettings::draft07();
    settings.contract = contract;
    let by_ref = settings
        .clone()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    settings.inline_subschemas = true;
    let inline = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    Walk {
        by_ref: &by_ref,
        inline: &inline,
        seen: BTreeSet::new(),
    }
    .disagreement(&by_ref, &inline, None, 0)
}

/// The two derivations, walked in step.
struct Walk<'a> {
    by_ref: &'a Value,
    inline: &'a Value,
    /// The pairs of schemas already compared (by address: both trees live as long as the walk),
    /// so that a type inside itself is compared once.
    seen: BTreeSet<(usize, usize)>,
}

/// How deep the walk goes: derived inputs are far shallower, and the pairs already seen end any
/// cycle before it.
const MAX_DEPTH: usize = 64;

impl<'a> Walk<'a> {
    /// The definition name, in the by-reference derivation, of the first place (below `r` and `i`,
    /// the same place in each) whose schemas disagree; `name` is the definition `r` lies in.
    fn disagreement(
        &mut self,
        r: &'a Value,
        i: &'a Value,
        name: Option<String>,
        depth: usize,
    ) -> Option<String> {
        if depth > MAX_DEPTH {
            return None;
        }
        let (r, r_name) = settle(self.by_ref, r);
        let (i, _) = settle(self.inline, i);
        let name = r_name.or(name);
        if !self.seen.insert((
            std::ptr::from_ref(r) as usize,
            std::ptr::from_ref(i) as usize,
        )) {
            return None;
        }
        let differ = |keyword: &str| match (r.get(keyword), i.get(keyword)) {
            (Some(a), Some(b)) => without_null(a) != without_null(b),
            _ => false,
        };
        let keys = |schema: &Value| {
            schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect::<BTreeSet<_>>())
        };
        let properties_differ = matches!((keys(r), keys(i)), (Some(a), Some(b)) if a != b);
        if differ("type") || differ("enum") || properties_differ {
            // At the root (no definition entered) both derivations come from `T` itself.
            return name;
        }
        if let (Some(Value::Object(rp)), Some(Value::Object(ip))) =
            (r.get("properties"), i.get("properties"))
        {
            for (key, below) in rp {
                if let Some(other) = ip.get(key)
                    && let Some(found) = self.disagreement(below, other, name.clone(), depth + 1)
                {
                    return Some(found);
                }
            }
        }
        for keyword in ["items", "additionalProperties"] {
            if let (Some(a @ Value::Object(_)), Some(b @ Value::Object(_))) =
                (r.get(keyword), i.get(keyword))
                && let Some(found) = self.disagreement(a, b, name.clone(), depth + 1)
            {
                return Some(found);
            }
        }
        None
    }
}

/// `node` with its local `$ref`s followed, an `Option`'s `anyOf` of a schema and `null` read as
/// that schema, and an `allOf` of one schema (a `$ref` with a description beside it) read as
/// that schema; with the name of the last definition entered (the root's `title` for `#`).
fn settle<'a>(root: &'a Value, mut node: &'a Value) -> (&'a Value, Option<String>) {
    let mut name = None;
    for _ in 0..16 {
        if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            let Some(target) = reference.strip_prefix('#').and_then(|p| root.pointer(p)) else {
                break;
            };
            name = match reference.strip_prefix("#/definitions/") {
                Some(defined) => Some(defined.replace("~1", "/").replace("~0", "~")),
                None => root.get("title").and_then(Value::as_str).map(str::to_owned),
            };
            node = target;
        } else if let Some(Value::Array(branches)) = node.get("anyOf")
            && let [a, b] = branches.as_slice()
            && (is_null(a) || is_null(b))
        {
            node = if is_null(a) { b } else { a };
        } else if let Some(Value::Array(parts)) = node.get("allOf")
            && let [only] = parts.as_slice()
            && node.get("type").is_none()
            && node.get("properties").is_none()
        {
            node = only;
        } else {
            break;
        }
    }
    (node, name)
}

/// Whether `schema` is `{"type": "null"}`.
fn is_null(schema: &Value) -> bool {
    schema.get("type") == Some(&Value::from("null"))
}

/// A `type` or `enum` value as a set, `null` left out (an `Option` adds it in one derivation and
/// wraps the schema in the other).
fn without_null(value: &Value) -> BTreeSet<String> {
    match value {
        Value::Array(items) => items
            .iter()
            .filter(|v| !v.is_null() && **v != "null")
            .map(Value::to_string)
            .collect(),
        Value::Null => BTreeSet::new(),
        other if *other == "null" => BTreeSet::new(),
        other => BTreeSet::from([other.to_string()]),
    }
}

/// Keywords whose value is a subschema or an array of them, where an object schema may sit.
const SUBSCHEMAS: &[&str] = &["items", "additionalProperties", "anyOf", "oneOf", "allOf"];

/// The type (its definition's name, `None` for the root) and the name of two of its fields
/// that serde names alike, when a derived `schema` has such a type.
///
/// schemars writes one property for both (the second's schema) and requires its name once per
/// field that cannot be left out: a name required twice is the only trace the schema keeps.
/// Two such fields of which one may be left out are not seen.
pub(crate) fn repeated_field(schema: &Value) -> Option<(Option<String>, String)> {
    repeated_required(schema, None)
}

/// [`repeated_field`] of `node`, which lies in the definition `ty` (`None`: the root).
fn repeated_required(node: &Value, ty: Option<&str>) -> Option<(Option<String>, String)> {
    let Value::Object(map) = node else {
        return None;
    };
    if let Some(Value::Array(required)) = map.get("required") {
        let mut seen = BTreeSet::new();
        if let Some(name) = required
            .iter()
            .filter_map(Value::as_str)
            .find(|name| !seen.insert(*name))
        {
            return Some((ty.map(str::to_owned), name.to_owned()));
        }
    }
    map.iter()
        .find_map(|(keyword, child)| match (keyword.as_str(), child) {
            ("definitions", Value::Object(definitions)) => definitions
                .iter()
                .find_map(|(name, definition)| repeated_required(definition, Some(name))),
            ("properties", Value::Object(properties)) => properties
                .values()
                .find_map(|property| repeated_required(property, ty)),
            (keyword, Value::Array(items)) if SUBSCHEMAS.contains(&keyword) => {
                items.iter().find_map(|item| repeated_required(item, ty))
            }
            (keyword, child) if SUBSCHEMAS.contains(&keyword) => repeated_required(child, ty),
            _ => None,
        })
}

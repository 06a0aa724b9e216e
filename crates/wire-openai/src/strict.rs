//! OpenAI's strict schema form: `additionalProperties: false` and every property required on
//! every object, optional properties made nullable, only supported keywords.

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

/// The strict form of `schema`, or `None` when it cannot be made strict (it is then sent as is,
/// non-strict).
pub(crate) fn strict_parameters(schema: &Value) -> Option<Value> {
    let root = schema.as_object()?;
    if root.get("type") != Some(&Value::from("object")) || root.contains_key("anyOf") {
        return None;
    }
    let mut strict = schema.clone();
    make_strict(&mut strict).then_some(strict)
}

fn make_strict(node: &mut Value) -> bool {
    let Value::Object(map) = node else {
        return node.is_boolean();
    };
    // Annotations strict mode rejects or ignores: `default` (nullability says "optional") and
    // unsupported formats.
    map.remove("default");
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !FORMATS.contains(&f))
    {
        map.remove("format");
    }
    if map.keys().any(|k| !SUPPORTED.contains(&k.as_str())) {
        return false;
    }
    if is_object_schema(map) && !strict_object(map) {
        return false;
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = map.get_mut(key)
            && !defs.values_mut().all(make_strict)
        {
            return false;
        }
    }
    if let Some(items) = map.get_mut("items")
        && !make_strict(items)
    {
        return false;
    }
    if let Some(Value::Array(options)) = map.get_mut("anyOf")
        && !options.iter_mut().all(make_strict)
    {
        return false;
    }
    true
}

fn is_object_schema(map: &Map<String, Value>) -> bool {
    match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => map.contains_key("properties"),
    }
}

/// Closes an object and makes its optional properties nullable.
fn strict_object(map: &mut Map<String, Value>) -> bool {
    match map.get("additionalProperties") {
        None | Some(Value::Bool(false)) => {}
        Some(_) => return false, // An open map cannot be strict.
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
    for (name, property) in properties.iter_mut() {
        if !make_strict(property) {
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

/// Adds `null` to a property's type; false when it has no `type` to extend.
fn make_nullable(property: &mut Value) -> bool {
    let Some(map) = property.as_object_mut() else {
        return false;
    };
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            if t != "null" {
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
        _ => false,
    }
}

#[cfg(test)]
mod tests;

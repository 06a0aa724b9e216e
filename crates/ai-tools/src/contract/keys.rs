//! Saying which integers the keys of a map with integer keys may be, as its key type reads them.
//!
//! schemars derives a map's keys from its key type's schema, and keeps only whether that says
//! `minimum: 0`: a map keyed by a `NonZero` integer (`minimum: 1`, or a signed one's
//! `not: {"const": 0}`) gets a signed integer's pattern, which takes `0` and `-1` where serde
//! refuses them. The schema no longer holds the key type, so the input type is asked: for each
//! map with integer keys that it reads directly, it is deserialized from a probe that leads to a
//! value of the map under the key `0`, and one under `-1`, and notes whether the key was
//! refused. The map's pattern then takes no key the type refuses so, and never more than it
//! took.

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::fit::IntegerKeys;
use super::pointer_segment;
use super::probe::{Reached, Step, children, follow, reach};

/// Narrows the `propertyNames` pattern of each map with integer keys in `schema` (`T`'s fitted
/// input schema) to the keys `T` reads: no `0`, or no negative key, when its key type refuses
/// them.
pub(super) fn narrow_integer_keys<T: DeserializeOwned>(schema: &mut Value) {
    let mut narrowed = Vec::new();
    integer_keyed_maps::<T>(
        schema,
        schema,
        String::new(),
        &mut Vec::new(),
        &mut BTreeSet::new(),
        &mut narrowed,
    );
    for (pointer, keys) in narrowed {
        if let Some(names) = schema.pointer_mut(&format!("{pointer}/propertyNames")) {
            *names = serde_json::json!({ "pattern": keys.pattern() });
        }
    }
}

/// Adds to `narrowed` the pointer in `root` of each map with integer keys at or below `node`
/// (at `pointer`, reached by `path` in the arguments) whose key type refuses keys its pattern
/// takes, with the keys it takes. `seen` holds the `$ref`s already followed: a definition is
/// walked once, as a type reads it the same way wherever it is.
fn integer_keyed_maps<'a, T: DeserializeOwned>(
    root: &'a Value,
    node: &'a Value,
    pointer: String,
    path: &mut Vec<Step<'a>>,
    seen: &mut BTreeSet<&'a str>,
    narrowed: &mut Vec<(String, IntegerKeys)>,
) {
    let pointer = match node.get("$ref").and_then(Value::as_str) {
        Some(reference) => match reference.strip_prefix('#') {
            Some(defined) => defined.to_owned(),
            None => return,
        },
        None => pointer,
    };
    let Some(node) = follow(root, node, seen) else {
        return;
    };
    if let Some(keys) = IntegerKeys::of(node) {
        let mut takes = |key| {
            path.push(Step::Entry(key));
            let reached = reach::<T>(path);
            path.pop();
            reached != Reached::KeyRefused
        };
        let read = IntegerKeys {
            zero: keys.zero && takes("0"),
            negative: keys.negative && takes("-1"),
        };
        if read != keys {
            narrowed.push((pointer.clone(), read));
        }
    }
    for (step, child) in children(node) {
        let at = match step {
            Step::Property(name) => format!("{pointer}/properties/{}", pointer_segment(name)),
            Step::Entry(_) => format!("{pointer}/additionalProperties"),
            Step::Item => format!("{pointer}/items"),
        };
        path.push(step);
        integer_keyed_maps::<T>(root, child, at, path, seen, narrowed);
        path.pop();
    }
}

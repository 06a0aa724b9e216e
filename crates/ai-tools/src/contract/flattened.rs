//! Finding a map with integer keys that serde would read from its copy of a flattened value,
//! where it refuses every key.
//!
//! A struct with a `#[serde(flatten)]` field reads each key it does not know, and its value,
//! into a copy (serde's private `Content`), then reads the flattened field from that copy. The
//! copy's keys are strings, and serde reads no integer from a string key (serde_json reads one
//! from a key's text; the copy does not): a map with integer keys anywhere below a flattened
//! field refuses every key, so no call could give it one. The schema cannot tell: a flattened
//! struct's properties are merged into its parent's. So the input type itself is asked: for each
//! place the schema has (a property, a map's value, a list's item), the type is deserialized
//! from a probe that leads to that place and notes how the value there is asked for
//! (`contract/probe.rs`). A value
//! read into the copy is asked for as any value (`deserialize_any`), a value read directly by
//! what its type is; below a place read into the copy, the schema is searched for a map with
//! integer keys.

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::fit::IntegerKeys;
use super::pointer_segment;
use super::probe::{Reached, Step, children, follow, reach};

/// The place in the arguments (a JSON pointer, each item of a list and value of a map `*`) of a
/// map with integer keys that `T` reads from serde's copy of a flattened value; `schema` is
/// `T`'s fitted input schema.
pub(super) fn flattened_integer_keys<T: DeserializeOwned>(schema: &Value) -> Option<String> {
    read_directly::<T>(schema, schema, &mut Vec::new(), &mut BTreeSet::new())
}

/// The place of the first map with integer keys that `T` reads from serde's copy, below `node`
/// (a subschema of `root`), whose value `T` reads directly at `path`. `seen` holds the `$ref`s
/// already followed: a definition is walked once, as a type reads it the same way wherever it
/// is.
fn read_directly<'a, T: DeserializeOwned>(
    root: &'a Value,
    node: &'a Value,
    path: &mut Vec<Step<'a>>,
    seen: &mut BTreeSet<&'a str>,
) -> Option<String> {
    let node = follow(root, node, seen)?;
    children(node).into_iter().find_map(|(step, child)| {
        path.push(step);
        let found = if reach::<T>(path) == Reached::AsAny {
            integer_keys_below(root, child, path, &mut BTreeSet::new())
        } else {
            read_directly::<T>(root, child, path, seen)
        };
        path.pop();
        found
    })
}

/// The place of the first map with integer keys at or below `node`, at `path`.
fn integer_keys_below<'a>(
    root: &'a Value,
    node: &'a Value,
    path: &mut Vec<Step<'a>>,
    seen: &mut BTreeSet<&'a str>,
) -> Option<String> {
    let node = follow(root, node, seen)?;
    if is_integer_keyed(node) {
        return Some(place(path));
    }
    children(node).into_iter().find_map(|(step, child)| {
        path.push(step);
        let found = integer_keys_below(root, child, path, seen);
        path.pop();
        found
    })
}

/// Whether `node` is a map with integer keys, as fitted (`propertyNames` of an integer).
fn is_integer_keyed(node: &Value) -> bool {
    IntegerKeys::of(node).is_some()
}

/// `path` as a JSON pointer into the arguments, `*` for any item or map value.
fn place(path: &[Step<'_>]) -> String {
    path.iter()
        .map(|step| match step {
            Step::Property(name) => format!("/{}", pointer_segment(name)),
            Step::Entry(_) | Step::Item => "/*".into(),
        })
        .collect()
}

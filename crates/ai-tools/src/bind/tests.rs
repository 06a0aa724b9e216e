//! The argument checks write a place out only when they report it.

use std::cell::Cell;

use serde_json::{Value, json};

use super::{NumberRange, OUT_OF_RANGE_NAMED, connection_id_in, numbers_out_of_range};

thread_local! {
    /// How many JSON pointers [`super::pointer`] has written on this thread.
    pub(super) static POINTERS_BUILT: Cell<usize> = const { Cell::new(0) };
}

/// How many pointers `f` writes.
fn pointers_built<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = POINTERS_BUILT.with(Cell::get);
    let out = f();
    (out, POINTERS_BUILT.with(Cell::get) - before)
}

/// `leaf` under `depth` objects, each with one long key and, beside it, a wide array of
/// `leaf`s' siblings (numbers), so that every level holds many children.
fn deep(depth: usize, leaf: Value, siblings: Value) -> Value {
    let key = "k".repeat(1000);
    (0..depth).fold(
        leaf,
        |inner, level| json!({ key.clone(): inner, format!("n{level}"): siblings.clone() }),
    )
}

/// A schema that describes every value of [`deep`]'s: objects of anything, arrays of it, and
/// `u8`s.
fn schema() -> Value {
    json!({
        "type": ["object", "array", "integer"],
        "format": "uint8",
        "additionalProperties": { "$ref": "#" },
        "items": { "$ref": "#" },
    })
}

#[test]
fn the_connection_id_check_writes_only_the_place_it_reports() {
    let siblings = json!((0..100).collect::<Vec<u8>>());
    let clean = deep(60, json!({ "x": 1 }), siblings.clone());
    let (found, built) = pointers_built(|| connection_id_in(&clean, &mut Vec::new()));
    assert_eq!((found, built), (None, 0));

    let holding = deep(60, json!({ "connectionId": "c" }), siblings);
    let (found, built) = pointers_built(|| connection_id_in(&holding, &mut Vec::new()));
    let found = found.expect("the connection id is found");
    assert_eq!(built, 1);
    assert_eq!(found.matches('/').count(), 60);
    assert!(found.starts_with(&format!("/{}", "k".repeat(1000))));
}

#[test]
fn the_range_check_writes_only_the_places_it_names() {
    let root = schema();
    let in_range = json!((0..100).collect::<Vec<u8>>());
    let clean = deep(60, json!(7), in_range);
    let mut out = Vec::new();
    let ((), built) =
        pointers_built(|| numbers_out_of_range(&root, &root, &clean, &mut Vec::new(), &mut out));
    assert_eq!((out.len(), built), (0, 0));

    let past = json!(vec![300; 100]);
    let many = deep(60, json!(1000), past);
    let mut out = Vec::new();
    let ((), built) =
        pointers_built(|| numbers_out_of_range(&root, &root, &many, &mut Vec::new(), &mut out));
    assert_eq!(out.len(), OUT_OF_RANGE_NAMED);
    assert_eq!(built, OUT_OF_RANGE_NAMED);
    assert!(
        out.iter()
            .all(|(_, range)| *range == NumberRange::Integer(0, 255))
    );
}

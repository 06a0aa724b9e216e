//! Redaction and schema path checks as data.

use serde_json::{Value, json};

use super::{
    Allowlist, Unrepresentable, exact_value, field_a_map_may_stand_in_for, schema_has_path,
};

fn check(allow: &[&str], input: Value, expected: Value) {
    let mut value = input;
    Allowlist::new(allow.iter().copied()).apply(&mut value);
    assert_eq!(value, expected, "{allow:?}");
}

#[test]
fn strips_what_is_not_allowlisted() {
    check(&["a"], json!({"a": 1, "b": 2}), json!({"a": 1}));
    check(
        &["a"],
        json!({"a": {"x": 1, "secret": 2}}),
        json!({"a": {"x": 1, "secret": 2}}),
    );
    check(
        &["a.x"],
        json!({"a": {"x": 1, "secret": 2}, "b": 3}),
        json!({"a": {"x": 1}}),
    );
    check(
        &["items.name"],
        json!({"items": [{"name": "n1", "token": "t"}, {"name": "n2"}], "total": 2}),
        json!({"items": [{"name": "n1"}, {"name": "n2"}]}),
    );
    check(&["a.x"], json!({"a": "scalar"}), json!({}));
    // An absent struct is told as absent, and the other elements keep their places.
    check(&["a.x"], json!({"a": null}), json!({"a": null}));
    check(
        &["items.name"],
        json!({"items": [null, {"name": "n1", "token": "t"}]}),
        json!({"items": [null, {"name": "n1"}]}),
    );
    check(&[], json!({"a": 1}), json!({}));
}

#[test]
fn schema_paths_follow_refs_and_items() {
    let schema = json!({
        "type": "object",
        "properties": {
            "entries": {"type": "array", "items": {"$ref": "#/definitions/Entry"}},
            "count": {"type": "integer"}
        },
        "definitions": {"Entry": {"type": "object", "properties": {"path": {"type": "string"}}}}
    });
    assert!(schema_has_path(&schema, "count"));
    assert!(schema_has_path(&schema, "entries"));
    assert!(schema_has_path(&schema, "entries.path"));
    assert!(!schema_has_path(&schema, "entries.size"));
    assert!(!schema_has_path(&schema, "missing"));
    assert!(!schema_has_path(&schema, "count.x"));
}

#[derive(serde::Serialize)]
struct Item {
    id: u8,
    #[serde(flatten)]
    extra: std::collections::BTreeMap<String, f64>,
}

#[test]
fn an_output_that_repeats_a_key_at_any_depth_is_refused() {
    let items = |key: &str| {
        vec![Item {
            id: 1,
            extra: [(key.to_owned(), 2.5)].into(),
        }]
    };
    assert_eq!(exact_value(&items("x")), Ok(json!([{"id": 1, "x": 2.5}])));
    assert_eq!(exact_value(&items("id")), Err(Unrepresentable::RepeatedKey));
    let deep = (0..200).fold(json!(1), |inner, _| json!([inner]));
    assert_eq!(exact_value(&deep), Err(Unrepresentable::TooDeep));
}

#[derive(serde::Serialize)]
struct Wide {
    small: u64,
    ratio: f64,
    text: String,
    list: Vec<i128>,
    map: std::collections::BTreeMap<String, u128>,
}

/// serde_json reads an integer past 64 bits back as the nearest float (the workspace builds it
/// without `arbitrary_precision`): such an integer is refused with its place, while the widest
/// 64-bit integers and large floats pass as they are.
#[test]
fn an_integer_beyond_64_bits_is_refused_with_its_place() {
    let wide = |list: Vec<i128>, big: u128| Wide {
        small: u64::MAX,
        ratio: 1e30,
        text: r#"1e99 "quoted\" ] } 340282366920938463463374607431768211455"#.into(),
        list,
        map: [("a/b~c".to_owned(), big)].into(),
    };
    assert_eq!(
        exact_value(&wide(vec![i128::from(i64::MIN)], u128::from(u64::MAX))),
        Ok(json!({"small": u64::MAX, "ratio": 1e30,
            "text": r#"1e99 "quoted\" ] } 340282366920938463463374607431768211455"#,
            "list": [i64::MIN], "map": {"a/b~c": u64::MAX}}))
    );
    assert_eq!(
        exact_value(&wide(vec![0, i128::from(i64::MIN) - 1], 0)),
        Err(Unrepresentable::WideInteger("/list/1".into()))
    );
    assert_eq!(
        exact_value(&wide(vec![], u128::from(u64::MAX) + 1)),
        Err(Unrepresentable::WideInteger("/map/a~1b~0c".into()))
    );
    assert_eq!(
        exact_value(&u128::MAX),
        Err(Unrepresentable::WideInteger(String::new()))
    );
}

/// A field that holds its own type was allowlisted once per depth shown. `field*` follows it any
/// number of times, none included, and nothing else: what is not named stays hidden at every
/// depth.
#[test]
fn a_number_that_is_not_finite_is_refused_with_its_place() {
    #[derive(serde::Serialize)]
    enum Shape {
        Pair(f64, f64),
        Round { radius: f32 },
        One(f64),
    }
    #[derive(serde::Serialize)]
    struct Out {
        shapes: Vec<Shape>,
        #[serde(flatten)]
        extra: std::collections::BTreeMap<String, f64>,
        last: Option<f64>,
    }
    let out = |one: f64, radius: f32, extra: f64, last: f64| Out {
        shapes: vec![
            Shape::Pair(1.0, 2.0),
            Shape::Round { radius },
            Shape::One(one),
        ],
        extra: [("a/b".to_owned(), extra)].into(),
        last: Some(last),
    };
    let place = |out: Out| match exact_value(&out) {
        Err(Unrepresentable::NonFinite(at)) => Some(at),
        Ok(_) => None,
        Err(other) => panic!("{other:?}"),
    };
    assert_eq!(place(out(1.0, 1.0, 1.0, 1.0)), None);
    assert_eq!(
        place(out(f64::NAN, 1.0, 1.0, 1.0)),
        Some("/shapes/2/One".into())
    );
    assert_eq!(
        place(out(1.0, f32::NEG_INFINITY, 1.0, 1.0)),
        Some("/shapes/1/Round/radius".into())
    );
    assert_eq!(
        place(out(1.0, 1.0, f64::INFINITY, 1.0)),
        Some("/a~1b".into())
    );
    assert_eq!(place(out(1.0, 1.0, 1.0, f64::NAN)), Some("/last".into()));
}

/// The walk looking for such a number recurses once per level, deeper frames than serde_json's
/// own writing: an output too deep to read back is refused as that before it is walked, so an
/// output serde_json could write (a long linked list ending in `None`, whose `null` starts the
/// walk) cannot overflow the stack and abort the process where `TooDeep` answered before.
#[test]
fn an_output_too_deep_to_read_back_is_refused_before_it_is_walked() {
    #[derive(serde::Serialize)]
    struct Link {
        value: f64,
        next: Option<Box<Link>>,
    }
    let list = |last: f64| {
        (0..200).fold(
            Link {
                value: last,
                next: None,
            },
            |next, _| Link {
                value: 1.0,
                next: Some(Box::new(next)),
            },
        )
    };
    assert_eq!(exact_value(&list(1.0)), Err(Unrepresentable::TooDeep));
    assert_eq!(exact_value(&list(f64::NAN)), Err(Unrepresentable::TooDeep));
}

/// A map key is found as serde_json writes it, whatever its type: one that `serde_json::Value`
/// cannot hold (a `u128` past 64 bits) stopped the walk there, and the NaN below it reached the
/// model as `null`.
#[test]
fn a_number_that_is_not_finite_is_found_under_any_map_key() {
    let wide: std::collections::BTreeMap<u128, f64> = [(u128::MAX, f64::NAN)].into();
    assert_eq!(
        exact_value(&wide),
        Err(Unrepresentable::NonFinite(format!("/{}", u128::MAX)))
    );
    // A map keyed by an `f32`, which serde_json writes as the `f32` it is (not widened).
    struct ByFloat(f32, f32);
    impl serde::Serialize for ByFloat {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map([(self.0, self.1)])
        }
    }
    assert_eq!(
        serde_json::to_string(&ByFloat(1.1, 1.0)).unwrap(),
        r#"{"1.1":1.0}"#
    );
    assert_eq!(
        exact_value(&ByFloat(1.1, f32::INFINITY)),
        Err(Unrepresentable::NonFinite("/1.1".into()))
    );
    assert_eq!(
        exact_value(&std::collections::BTreeMap::from([(true, f64::NAN)])),
        Err(Unrepresentable::NonFinite("/true".into()))
    );
}

#[test]
fn a_repeated_field_reaches_every_depth() {
    let tree = json!({"name": "a", "secret": 1, "children": [
        {"name": "b", "secret": 2, "children": []},
        {"name": "c", "secret": 3, "children": [{"name": "d", "secret": 4, "children": null}]}
    ]});
    check(
        &["children*.name"],
        tree.clone(),
        json!({"name": "a", "children": [
            {"name": "b", "children": []},
            {"name": "c", "children": [{"name": "d", "children": null}]}
        ]}),
    );
    check(
        &["children.children*.name"],
        tree.clone(),
        json!({"children": [
            {"name": "b", "children": []},
            {"name": "c", "children": [{"name": "d", "children": null}]}
        ]}),
    );
    check(
        &["name", "children*.secret", "children.name"],
        tree,
        json!({"name": "a", "secret": 1, "children": [
            {"name": "b", "secret": 2, "children": []},
            {"name": "c", "secret": 3, "children": [{"secret": 4, "children": null}]}
        ]}),
    );
}

#[test]
fn a_repeated_field_must_hold_its_own_type() {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "next": {"$ref": "#/definitions/NodeOrNull"},
            "entries": {"type": "array", "items": {"$ref": "#/definitions/Entry"}}
        },
        "definitions": {
            "NodeOrNull": {"type": ["object", "null"], "properties": {
                "name": {"type": "string"},
                "next": {"$ref": "#/definitions/NodeOrNull"}
            }},
            "Entry": {"type": "object", "properties": {"entries": {"type": "array",
                "items": {"$ref": "#/definitions/Leaf"}}}},
            "Leaf": {"type": "object", "properties": {"entries": {"type": "string"}}}
        }
    });
    assert!(schema_has_path(&schema, "next*.name"));
    assert!(!schema_has_path(&schema, "next*"));
    assert!(!schema_has_path(&schema, "name*"));
    assert!(!schema_has_path(&schema, "next*.missing"));
    assert!(!schema_has_path(&schema, "entries*"));
    assert!(!schema_has_path(&schema, "missing*"));
}

/// A field a flattened map could stand in for: one the output may leave out, of an object that
/// takes any other key, wherever the path reaches it (through `$ref`s, array items, a repeated
/// field at every depth). A field always written, or an object that takes no other key, is safe.
#[test]
fn a_field_a_flattened_map_could_stand_in_for_is_found_on_the_path() {
    let schema = json!({
        "type": "object",
        "required": ["kept", "rows", "plain"],
        "additionalProperties": true,
        "properties": {
            "kept": {"type": "string"},
            "maybe": {"type": "string"},
            "rows": {"type": "array", "items": {"$ref": "#/definitions/Row"}},
            "plain": {"$ref": "#/definitions/Plain"},
            "next": {"$ref": "#/definitions/Node"}
        },
        "definitions": {
            "Row": {"type": "object", "required": ["a"], "properties": {
                "a": {"type": "string"}, "b": {"type": "string"}
            }, "additionalProperties": {"type": "string"}},
            "Plain": {"type": "object", "properties": {"c": {"type": "string"}},
                "additionalProperties": false},
            "Node": {"type": ["object", "null"], "required": ["next"],
                "properties": {"name": {"type": "string"}, "next": {"$ref": "#/definitions/Node"}},
                "patternProperties": {"^na": {"type": "string"}}}
        }
    });
    let found = |path: &str| field_a_map_may_stand_in_for(&schema, path).map(|found| found.field);
    assert_eq!(found("kept"), None);
    assert_eq!(found("maybe").as_deref(), Some("maybe"));
    assert_eq!(found("rows.a"), None);
    assert_eq!(found("rows.b").as_deref(), Some("b"));
    assert_eq!(found("plain.c"), None);
    // The root's `next` may be left out; the nodes' own `name` may too.
    assert_eq!(found("next*.name").as_deref(), Some("next"));
    let nodes = json!({"type": "object", "required": ["next"], "properties": {
        "next": {"$ref": "#/definitions/Node"}
    }, "definitions": schema["definitions"]});
    assert_eq!(
        field_a_map_may_stand_in_for(&nodes, "next*.name").map(|found| found.field),
        Some("name".to_owned())
    );
}

/// A map flattened through an enum says it takes other keys in one of the enum's shapes
/// (`anyOf`, `oneOf`, `allOf`, directly or through a `$ref`), not beside the field: a field the
/// output may leave out there is found as well. Shapes that take no other key (a tag and plain
/// fields, `additionalProperties: false`) leave it safe.
#[test]
fn a_map_flattened_through_an_enum_is_found_in_its_shapes() {
    let with = |keyword: &str, shape: Value| {
        json!({
            "type": "object",
            "properties": {"status": {"type": ["string", "null"]}},
            keyword: [{"type": "object", "properties": {"t": {"const": "Y"}}}, shape],
            "definitions": {
                "Headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "Plain": {"type": "object", "properties": {"code": {"type": "integer"}}},
                "Closed": {"type": "object", "additionalProperties": false}
            }
        })
    };
    for keyword in ["anyOf", "oneOf", "allOf"] {
        for (shape, found) in [
            (json!({"additionalProperties": {"type": "string"}}), true),
            (
                json!({"patternProperties": {"^st": {"type": "string"}}}),
                true,
            ),
            (json!({"$ref": "#/definitions/Headers"}), true),
            (json!({"anyOf": [{"$ref": "#/definitions/Headers"}]}), true),
            // Any value at all (an untagged variant of `serde_json::Value`), objects included.
            (json!(true), true),
            (json!({}), true),
            (json!({"description": "Anything."}), true),
            (json!({"$ref": "#/definitions/Plain"}), false),
            (json!({"$ref": "#/definitions/Closed"}), false),
            (json!({"type": "null"}), false),
        ] {
            let schema = with(keyword, shape.clone());
            assert_eq!(
                field_a_map_may_stand_in_for(&schema, "status").is_some(),
                found,
                "{keyword}: {shape}"
            );
        }
    }
}

/// Only a `patternProperties` pattern that matches the field's name could give a key spelled
/// like it (an integer-keyed map's `^\\d+$` never does); a pattern that does not compile is
/// taken to match.
#[test]
fn only_a_pattern_matching_the_name_could_stand_in_for_it() {
    for (pattern, found) in [
        (r"^\d+$", false),
        (r"^-?\d+$", false),
        ("^x", false),
        ("^st", true),
        ("tus$", true),
        ("", true),
        ("(", true),
    ] {
        let schema = json!({
            "type": "object",
            "properties": {"status": {"type": ["string", "null"]}},
            "patternProperties": {pattern: {"type": "string"}}
        });
        assert_eq!(
            field_a_map_may_stand_in_for(&schema, "status").is_some(),
            found,
            "{pattern}"
        );
    }
}

/// A map with integer keys as ai-tools derives it (`propertyNames` of digits, its values under
/// `additionalProperties`), in an enum's shape beside a field the output may leave out, cannot
/// give a key spelled like the field either: only a `propertyNames` pattern that matches the
/// name lets `additionalProperties` take it.
#[test]
fn a_map_whose_property_names_cannot_spell_the_name_does_not_stand_in_for_it() {
    for (pattern, found) in [
        ("^(0|[1-9][0-9]*)$", false),
        ("^(0|-?[1-9][0-9]*)$", false),
        ("^st", true),
    ] {
        let schema = json!({
            "type": "object",
            "properties": {"status": {"type": ["string", "null"]}},
            "anyOf": [{"type": "object", "propertyNames": {"pattern": pattern},
                "additionalProperties": {"type": "integer"}}]
        });
        assert_eq!(
            field_a_map_may_stand_in_for(&schema, "status").is_some(),
            found,
            "{pattern}"
        );
    }
}

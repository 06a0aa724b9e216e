//! The strict transform, case by case.

use serde_json::{Value, json};

use super::strict_parameters;

fn check(schema: Value, expected: Option<Value>) {
    assert_eq!(strict_parameters(&schema), expected, "{schema}");
}

#[test]
fn closes_objects_and_requires_everything() {
    check(
        json!({"type": "object", "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "format": "uint32", "minimum": 0},
            "units": {"type": ["string", "null"], "default": null}
        }, "required": ["city"]}),
        Some(json!({"type": "object", "additionalProperties": false,
            "properties": {
                "city": {"type": "string"},
                "days": {"type": ["integer", "null"], "minimum": 0},
                "units": {"type": ["string", "null"]}
            },
            "required": ["city", "days", "units"]})),
    );
    // A tool without arguments (`struct NoArgs {}`, with or without `deny_unknown_fields`, or
    // written by hand) stays strict: at the root, declaring no properties means taking none.
    for no_arguments in [
        json!({"type": "object"}),
        json!({"type": "object", "additionalProperties": false}),
        json!({"type": "object", "properties": {}}),
    ] {
        check(
            no_arguments,
            Some(
                json!({"type": "object", "additionalProperties": false, "properties": {}, "required": []}),
            ),
        );
    }
}

#[test]
fn falls_back_to_non_strict() {
    // An open map.
    check(
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
        None,
    );
    // Unsupported keywords.
    check(
        json!({"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}, "required": ["s"]}),
        None,
    );
    // An optional property that nothing can make nullable: no type at all (a const's too).
    check(
        json!({"type": "object", "properties": {"k": {"const": "fixed"}}}),
        None,
    );
    check(
        json!({"type": "object", "properties": {"d": {"description": "anything"}}}),
        None,
    );
    // Required properties strict mode still refuses (the provider answers 400 for the whole
    // request): no type, a boolean schema, an array without items, at any depth.
    for property in [
        json!({"description": "anything"}),
        json!({}),
        json!(true),
        json!({"type": "array"}),
        json!({"type": ["array", "null"]}),
        json!({"type": "array", "items": {}}),
        json!({"type": "array", "items": {"type": "object", "properties": {"x": {}}, "required": ["x"]}}),
    ] {
        check(
            json!({"type": "object", "properties": {"v": property}, "required": ["v"]}),
            None,
        );
    }
    // Not an object at the root, or an anyOf there.
    check(json!({"type": "string"}), None);
    check(
        json!({"type": "object", "anyOf": [{"type": "object"}]}),
        None,
    );
    // Keywords strict mode forbids.
    for keyword in [
        "allOf",
        "not",
        "if",
        "dependentRequired",
        "patternProperties",
    ] {
        let mut schema =
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
        schema[keyword] = json!([]);
        check(schema, None);
    }
}

#[test]
fn optional_refs_enums_and_unions_become_nullable() {
    check(
        json!({"type": "object",
            "properties": {
                "r": {"$ref": "#/definitions/X", "description": "an x"},
                "u": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "e": {"type": "string", "enum": ["a", "b"]},
                "n": {"type": "null"}
            },
            "definitions": {"X": {"type": "object", "properties": {"v": {"type": "number"}}, "required": ["v"]}}}),
        Some(json!({"type": "object", "additionalProperties": false,
            "properties": {
                "r": {"type": ["object", "null"], "additionalProperties": false,
                    "properties": {"v": {"type": "number"}}, "required": ["v"], "description": "an x"},
                "u": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
                "e": {"type": ["string", "null"], "enum": ["a", "b", null]},
                "n": {"type": "null"}
            },
            "required": ["e", "n", "r", "u"],
            "definitions": {"X": {"type": "object", "additionalProperties": false,
                "properties": {"v": {"type": "number"}}, "required": ["v"]}}})),
    );
}

/// An optional `const` cannot take `null`: it becomes an `enum` of its value and `null`, which
/// accepts what the const did and the `null` a strict model sends for it left out, so the tool
/// stays strict. A `const` beside an `enum` (which it narrows) is left non-strict.
#[test]
fn optional_consts_become_an_enum_with_null() {
    check(
        json!({"type": "object",
            "properties": {
                "s": {"type": "string", "const": "fixed", "description": "always fixed"},
                "i": {"type": "integer", "const": 3},
                "n": {"type": "null", "const": null},
                "r": {"type": "string", "const": "kept"}
            },
            "required": ["r"]}),
        Some(json!({"type": "object", "additionalProperties": false,
            "properties": {
                "s": {"type": ["string", "null"], "enum": ["fixed", null], "description": "always fixed"},
                "i": {"type": ["integer", "null"], "enum": [3, null]},
                "n": {"type": "null", "enum": [null]},
                "r": {"type": "string", "const": "kept"}
            },
            "required": ["i", "n", "r", "s"]})),
    );
    check(
        json!({"type": "object", "properties": {
            "k": {"type": "string", "const": "a", "enum": ["a", "b"]}}}),
        None,
    );
}

#[test]
fn refs_with_annotations_are_inlined_and_plain_refs_kept() {
    // "$ref cannot have keywords {'description'}": the definition is inlined under the
    // description; a plain optional `$ref` becomes a null union; a described reference to a
    // definition already being inlined (recursion) keeps its `$ref` in an `anyOf` of one, its
    // annotations beside it.
    check(
        json!({"type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/Node", "description": "the tree"},
            "b": {"$ref": "#/$defs/Leaf"}
        },
        "required": ["a"],
        "$defs": {
            "Node": {"type": "object", "properties": {
                "child": {"$ref": "#/$defs/Node", "title": "child"}
            }, "required": ["child"]},
            "Leaf": {"type": "string", "format": "email"}
        }}),
        Some(json!({"type": "object", "additionalProperties": false,
        "properties": {
            "a": {"type": "object", "additionalProperties": false, "description": "the tree",
                "properties": {"child": {"title": "child", "anyOf": [{"$ref": "#/$defs/Node"}]}},
                "required": ["child"]},
            "b": {"anyOf": [{"$ref": "#/$defs/Leaf"}, {"type": "null"}]}
        },
        "required": ["a", "b"],
        "$defs": {
            // The definition itself unrolls its described self-reference once.
            "Node": {"type": "object", "additionalProperties": false, "properties": {
                "child": {"type": "object", "additionalProperties": false, "title": "child",
                    "properties": {"child": {"title": "child", "anyOf": [{"$ref": "#/$defs/Node"}]}},
                    "required": ["child"]}
            }, "required": ["child"]},
            "Leaf": {"type": "string", "format": "email"}
        }})),
    );
    // A constraining sibling intersects with the definition: not expressible, non-strict.
    check(
        json!({"type": "object", "properties": {
            "a": {"$ref": "#/$defs/X", "enum": ["x"]}
        }, "required": ["a"], "$defs": {"X": {"type": "string"}}}),
        None,
    );
    // A reference that does not resolve locally: non-strict.
    check(
        json!({"type": "object", "properties": {
            "a": {"$ref": "https://example.invalid/x.json", "description": "remote"}
        }, "required": ["a"]}),
        None,
    );
}

/// A described field whose type is recursive stays a `$ref` where the definition is already
/// being inlined, and strict mode refuses a `$ref` with siblings: its description and title (and
/// the notes of its dropped annotations) sit beside an `anyOf` holding the `$ref` instead, which
/// the subset takes. An optional one gains its `null` branch there, as Pydantic's
/// `Optional[Node]` with a description is spelled (what ai-tools derives for a documented
/// `Option<Box<Node>>` field, a `$ref` to a nullable copy of `Node`).
#[test]
fn a_described_recursive_reference_keeps_its_description() {
    check(
        json!({"type": "object",
        "properties": {"root": {"$ref": "#/definitions/Node", "description": "the tree"}},
        "required": ["root"],
        "definitions": {
            "Node": {"type": ["object", "null"], "description": "A node.", "properties": {
                "next": {"$ref": "#/definitions/Node", "description": "The node after this one.",
                    "deprecated": true},
                "first": {"$ref": "#/definitions/Node", "title": "First"}
            }, "required": ["first"]}
        }}),
        Some(json!({"type": "object", "additionalProperties": false,
        "properties": {
            "root": {"type": ["object", "null"], "additionalProperties": false,
                "description": "the tree\nA node.",
                "properties": {
                    "next": {"description": "Deprecated.\nThe node after this one.",
                        "anyOf": [{"$ref": "#/definitions/Node"}, {"type": "null"}]},
                    "first": {"title": "First", "anyOf": [{"$ref": "#/definitions/Node"}]}
                },
                "required": ["first", "next"]}
        },
        "required": ["root"],
        "definitions": {
            "Node": {"type": ["object", "null"], "additionalProperties": false,
                "description": "A node.", "properties": {
                "next": {"type": ["object", "null"], "additionalProperties": false,
                    "description": "Deprecated.\nThe node after this one.\nA node.",
                    "properties": {
                        "next": {"description": "Deprecated.\nThe node after this one.",
                            "anyOf": [{"$ref": "#/definitions/Node"}, {"type": "null"}]},
                        "first": {"title": "First", "anyOf": [{"$ref": "#/definitions/Node"}]}
                    },
                    "required": ["first", "next"]},
                "first": {"type": ["object", "null"], "additionalProperties": false,
                    "title": "First", "description": "A node.",
                    "properties": {
                        "next": {"description": "Deprecated.\nThe node after this one.",
                            "anyOf": [{"$ref": "#/definitions/Node"}, {"type": "null"}]},
                        "first": {"title": "First", "anyOf": [{"$ref": "#/definitions/Node"}]}
                    },
                    "required": ["first", "next"]}
            }, "required": ["first", "next"]}
        }})),
    );
}

#[test]
fn annotations_are_dropped_and_arrays_of_objects_closed() {
    check(
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {"rows": {"type": "array", "minItems": 1,
                "items": {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}, "required": ["id"]}}},
            "required": ["rows"]}),
        Some(json!({"type": "object", "additionalProperties": false,
            "properties": {"rows": {"type": "array", "minItems": 1,
                "items": {"type": "object", "additionalProperties": false,
                    "properties": {"id": {"type": "string", "format": "uuid"}}, "required": ["id"]}}},
            "required": ["rows"]})),
    );
}

#[test]
fn size_limits_fall_back_to_non_strict() {
    fn nested(levels: usize) -> Value {
        let mut schema = json!({"type": "object", "properties": {}});
        for _ in 1..levels {
            schema =
                json!({"type": "object", "properties": {"inner": schema}, "required": ["inner"]});
        }
        schema
    }
    assert!(strict_parameters(&nested(5)).is_some());
    check(nested(6), None);

    let values: Vec<Value> = (0..1001).map(|i| Value::from(format!("v{i}"))).collect();
    check(
        json!({"type": "object", "properties": {"e": {"type": "string", "enum": values}}, "required": ["e"]}),
        None,
    );

    let many: serde_json::Map<String, Value> = (0..5001)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .collect();
    let names: Vec<&String> = many.keys().collect();
    check(
        json!({"type": "object", "properties": many, "required": names}),
        None,
    );
}

#[test]
fn a_large_enum_over_15000_characters_is_not_strict() {
    // Structured Outputs: "15,000 characters of enum strings when a single enum has more than
    // 250 values" (WIRE-FORMATS §1.2), counted on the enum as sent, `null` included.
    fn enum_of(n: usize, chars: usize, required: bool) -> Value {
        let values: Vec<Value> = (0..n)
            .map(|i| Value::from(format!("{i:0chars$}")))
            .collect();
        let required: &[&str] = if required { &["e"] } else { &[] };
        json!({"type": "object", "properties": {"e": {"type": "string", "enum": values}},
            "required": required})
    }
    // 300 values of 60 characters: 18,000 characters.
    check(enum_of(300, 60, true), None);
    // 250 values of 61 characters (15,250) are allowed, but not with a 251st value, `null`.
    assert!(strict_parameters(&enum_of(250, 61, true)).is_some());
    check(enum_of(250, 61, false), None);
    // 251 values of 59 characters: 14,809.
    assert!(strict_parameters(&enum_of(251, 59, false)).is_some());
}

#[test]
fn an_inlined_definition_that_is_itself_a_described_ref_is_resolved_too() {
    // `A` is an alias of `B` with its own description (a documented newtype). Inlining `A`
    // under the property's description must not leave `$ref` + `description` behind: OpenAI
    // refuses that in strict mode ("$ref cannot have keywords {'description'}"). Every
    // description on the way is kept, the nearest first, each once (as ai-tools joins them).
    check(
        json!({"type": "object",
        "properties": {"p": {"$ref": "#/$defs/A", "description": "outer"}},
        "required": ["p"],
        "$defs": {
            "A": {"$ref": "#/$defs/B", "description": "inner"},
            "B": {"type": "string", "description": "outer"}
        }}),
        Some(json!({"type": "object", "additionalProperties": false,
        "properties": {"p": {"type": "string", "description": "outer\ninner"}},
        "required": ["p"],
        "$defs": {
            "A": {"type": "string", "description": "inner\nouter"},
            "B": {"type": "string", "description": "outer"}
        }})),
    );
}

/// A documented field whose type is documented too, as ai-tools derives it: the field's doc
/// comment beside the `$ref`, the type's in its definition (an enum's with its notes on the
/// variants). Inlined, the field says both, the field's first, as ai-tools joins a newtype's doc
/// comment with its definition's: strict mode shows the model what non-strict mode does.
#[test]
fn an_inlined_definition_keeps_its_description_after_the_fields() {
    let mode = json!({"type": "string", "enum": ["fast", "slow"],
        "description": "How to go.\n- `fast`: Quickly, skipping checks.\n- `slow`: Carefully."});
    let spot = |description: &str| {
        json!({"type": "object", "properties": {"x": {"type": "integer", "format": "int32"}},
            "required": ["x"], "description": description})
    };
    let derived = json!({
        "type": "object",
        "properties": {
            "mode": {"$ref": "#/definitions/Mode", "description": "The mode for this trip."},
            "stop": {"$ref": "#/definitions/Spot", "description": "Where to stop."},
            "again": {"$ref": "#/definitions/Spot", "description": "A point on the map."}
        },
        "required": ["again", "mode", "stop"],
        "definitions": {"Mode": mode.clone(), "Spot": spot("A point on the map.")}
    });
    let strict_spot = |description: &str| {
        json!({"type": "object", "additionalProperties": false,
            "properties": {"x": {"type": "integer"}}, "required": ["x"],
            "description": description})
    };
    check(
        derived,
        Some(json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "mode": {"type": "string", "enum": ["fast", "slow"],
                    "description": "The mode for this trip.\nHow to go.\n\
                        - `fast`: Quickly, skipping checks.\n- `slow`: Carefully."},
                "stop": strict_spot("Where to stop.\nA point on the map."),
                // Said once when the field's words are the type's.
                "again": strict_spot("A point on the map.")
            },
            "required": ["again", "mode", "stop"],
            "definitions": {"Mode": mode, "Spot": strict_spot("A point on the map.")}
        })),
    );
}

/// A schema whose property `p` is a described reference to `d0`, where each `d{i}` is
/// `link("#/$defs/d{i+1}")` and the last one a string.
fn chain(levels: usize, link: impl Fn(String) -> Value) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..levels {
        defs.insert(format!("d{i}"), link(format!("#/$defs/d{}", i + 1)));
    }
    defs.insert(format!("d{levels}"), json!({"type": "string"}));
    json!({"type": "object",
        "properties": {"p": {"$ref": "#/$defs/d0", "description": "p"}},
        "required": ["p"],
        "$defs": defs})
}

#[test]
fn inlining_past_its_byte_budget_is_not_strict() {
    // Each definition is a union of two described references to the next: inlining copies the
    // last one 2^levels times (about 5 MB here), while no property, name or object level is
    // added, so only the inlining budget sees it; past it, the tool is sent non-strict.
    let schema = chain(
        15,
        |next| json!({"anyOf": [{"$ref": next, "description": "a"}, {"$ref": next, "description": "b"}]}),
    );
    check(schema, None);
}

#[test]
fn a_schema_nested_past_its_depth_cap_is_not_strict() {
    // A chain of described references: each one inlined nests the next a level deeper, past
    // what the input held. Unbounded, 3,000 links overflow the stack (the process aborts).
    let schema = chain(
        40,
        |next| json!({"type": "array", "items": {"$ref": next, "description": "x"}}),
    );
    check(schema, None);
}

#[test]
fn a_nested_object_that_declares_no_properties_is_an_open_map_and_not_strict() {
    // `{"type": "object"}` takes any object (JSON Schema's `additionalProperties` defaults to
    // `true`). Closed with no properties, strict mode would let the model send only `{}` there:
    // the tool could never receive what the field is for.
    for free_form in [
        json!({"type": "object", "description": "any options"}),
        json!({"type": ["object", "null"]}),
    ] {
        check(
            json!({"type": "object", "properties": {"options": free_form}, "required": ["options"]}),
            None,
        );
        check(
            json!({"type": "object", "properties": {"rows": {"type": "array", "items": free_form}},
                "required": ["rows"]}),
            None,
        );
        check(
            json!({"type": "object", "properties": {"m": {"$ref": "#/$defs/M"}}, "required": ["m"],
                "$defs": {"M": free_form}}),
            None,
        );
    }
    // One that is closed takes only `{}` already; one that declares `properties`, even none, is
    // closed to the keys it names, as every object that declares its properties is.
    for empty in [
        json!({"type": "object", "properties": {}}),
        json!({"type": "object", "additionalProperties": false}),
    ] {
        check(
            json!({"type": "object", "properties": {"e": empty}, "required": ["e"]}),
            Some(json!({"type": "object", "additionalProperties": false,
                "properties": {"e": {"type": "object", "additionalProperties": false,
                    "properties": {}, "required": []}},
                "required": ["e"]})),
        );
    }
}

#[test]
fn a_struct_without_fields_as_ai_tools_derives_it_is_strict() {
    // ai-tools' schema of `struct Holds { empty: Empty, maybe: Option<Empty>, many: Vec<Empty> }`
    // for `struct Empty {}`: each declares `"properties": {}`, so none reads as a free-form map.
    let derived = json!({
        "type": "object",
        "properties": {
            "empty": {"$ref": "#/definitions/Empty"},
            "maybe": {"$ref": "#/definitions/EmptyOrNull"},
            "many": {"type": "array", "items": {"$ref": "#/definitions/Empty"}}
        },
        "required": ["empty", "many"],
        "definitions": {
            "Empty": {"type": "object", "properties": {}},
            "EmptyOrNull": {"type": ["object", "null"], "properties": {}}
        }
    });
    let closed = json!({"type": "object", "additionalProperties": false, "properties": {},
        "required": []});
    let closed_or_null = json!({"type": ["object", "null"], "additionalProperties": false,
        "properties": {}, "required": []});
    check(
        derived,
        Some(json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "empty": {"$ref": "#/definitions/Empty"},
                "maybe": {"anyOf": [{"$ref": "#/definitions/EmptyOrNull"}, {"type": "null"}]},
                "many": {"type": "array", "items": {"$ref": "#/definitions/Empty"}}
            },
            "required": ["empty", "many", "maybe"],
            "definitions": {"Empty": closed, "EmptyOrNull": closed_or_null}
        })),
    );
}

/// `#[deprecated]` fields as ai-tools derives them (`contract::tests::
/// a_deprecated_field_of_a_defined_type_fits_the_subset`): `deprecated: true` beside a `$ref`
/// (to a struct, a documented enum, an `Option`'s nullable copy) or a type. Strict mode takes no
/// `deprecated` keyword, and no `$ref` beside any keyword: the whole tool was sent non-strict for
/// one deprecated field. The flag is an annotation; the strict form says it in the description,
/// first, and inlines the definition as for a described `$ref`.
#[test]
fn deprecated_fields_as_ai_tools_derives_them_are_strict() {
    let point = |types: Value| {
        json!({"description": "A struct field of an input type.",
            "properties": {"x": {"format": "uint8", "maximum": 255, "minimum": 0,
                "type": "integer"}},
            "required": ["x"], "type": types})
    };
    let unit = "A unit enum with docs on its variants.\n- `metre`: Metres.\n- `foot`: Feet.";
    let derived = json!({
        "type": "object",
        "properties": {
            "at": {"$ref": "#/definitions/Point", "deprecated": true},
            "unit": {"$ref": "#/definitions/Unit", "deprecated": true,
                "description": "How to measure."},
            "back": {"$ref": "#/definitions/PointOrNull", "deprecated": true},
            "count": {"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255,
                "deprecated": true},
        },
        "required": ["at", "count", "unit"],
        "definitions": {
            "Point": point(json!("object")),
            "PointOrNull": point(json!(["object", "null"])),
            "Unit": {"description": unit, "enum": ["metre", "foot"], "type": "string"},
        }
    });
    let strict_point = |types: Value, description: &str| {
        json!({"description": description, "additionalProperties": false,
            "properties": {"x": {"maximum": 255, "minimum": 0, "type": "integer"}},
            "required": ["x"], "type": types})
    };
    let point_text = "A struct field of an input type.";
    check(
        derived,
        Some(json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "at": strict_point(json!("object"), &format!("Deprecated.\n{point_text}")),
                "unit": {"type": "string", "enum": ["metre", "foot"],
                    "description": format!("Deprecated.\nHow to measure.\n{unit}")},
                "back": strict_point(json!(["object", "null"]),
                    &format!("Deprecated.\n{point_text}")),
                "count": {"type": "integer", "minimum": 0, "maximum": 255,
                    "description": "Deprecated."},
            },
            "required": ["at", "back", "count", "unit"],
            "definitions": {
                "Point": strict_point(json!("object"), point_text),
                "PointOrNull": strict_point(json!(["object", "null"]), point_text),
                "Unit": {"description": unit, "enum": ["metre", "foot"], "type": "string"},
            }
        })),
    );
    // A definition that is deprecated itself (a `#[deprecated]` type) says so once, however
    // many deprecated references lead to it; `deprecated: false` says nothing.
    check(
        json!({"type": "object",
            "properties": {"old": {"$ref": "#/definitions/Old", "deprecated": true},
                "kept": {"type": "string", "deprecated": false}},
            "required": ["old", "kept"],
            "definitions": {"Old": {"type": "string", "deprecated": true}}}),
        Some(json!({"type": "object", "additionalProperties": false,
            "properties": {"old": {"type": "string", "description": "Deprecated."},
                "kept": {"type": "string"}},
            "required": ["kept", "old"],
            "definitions": {"Old": {"type": "string", "description": "Deprecated."}}})),
    );
}

/// A `#[deprecated]` newtype (`struct Old(Point)`) is defined as a `$ref` beside `deprecated:
/// true`; a field of it with its own doc comment is inlined through it to `Point`. The copy
/// says `Deprecated.` once, first, though the flag sits on a link of the chain and not on the
/// field or the typed definition (ai-tools derives this very schema for such a field).
#[test]
fn a_deprecated_newtype_inlined_through_says_so_once() {
    let point = "A struct field of an input type.";
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"$ref": "#/definitions/Old", "description": "Field words."},
            "b": {"$ref": "#/definitions/Old", "deprecated": true},
        },
        "required": ["a", "b"],
        "definitions": {
            "Old": {"$ref": "#/definitions/Point", "deprecated": true,
                "description": "Old words."},
            "Point": {"description": point, "type": "object",
                "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        }
    });
    let strict_point = |description: &str| {
        json!({"description": description, "additionalProperties": false,
            "properties": {"x": {"type": "integer"}}, "required": ["x"], "type": "object"})
    };
    let old = format!("Deprecated.\nOld words.\n{point}");
    check(
        schema,
        Some(json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "a": strict_point(&format!("Deprecated.\nField words.\nOld words.\n{point}")),
                "b": strict_point(&old),
            },
            "required": ["a", "b"],
            "definitions": {"Old": strict_point(&old), "Point": strict_point(point)},
        })),
    );
}

/// Fields annotated as ai-tools derives them (`contract::tests::an_annotated_field_fits_the_subset`):
/// `#[schemars(example = …)]` gives `examples` (beside a type, or a `$ref`), and
/// `#[serde(skip_serializing)]` `writeOnly: true`. Strict mode takes neither keyword (OpenAI's
/// supported subset lists no annotation but `description` and `title`), and no `$ref` beside
/// any: the whole tool was sent non-strict for one example. Both only annotate: the examples are
/// said in a last line of the description, `writeOnly` is dropped.
#[test]
fn annotated_fields_as_ai_tools_derives_them_are_strict() {
    let point = "A struct field of an input type.";
    let unit = "A unit enum with docs on its variants.\n- `metre`: Metres.\n- `foot`: Feet.";
    let derived = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Where to look.",
                "examples": ["src/lib.rs", "README.md"]},
            "at": {"$ref": "#/definitions/Point", "examples": [{"x": 1}]},
            "unit": {"$ref": "#/definitions/UnitOrNull", "examples": ["foot"]},
            "token": {"type": "string", "writeOnly": true},
        },
        "required": ["path", "at", "token"],
        "definitions": {
            "Point": {"description": point, "type": "object",
                "properties": {"x": {"format": "uint8", "maximum": 255, "minimum": 0,
                    "type": "integer"}},
                "required": ["x"]},
            "UnitOrNull": {"description": unit, "enum": ["metre", "foot", null],
                "type": ["string", "null"]},
        }
    });
    let strict_point = |description: &str| {
        json!({"description": description, "additionalProperties": false,
            "properties": {"x": {"maximum": 255, "minimum": 0, "type": "integer"}},
            "required": ["x"], "type": "object"})
    };
    let unit_or_null = |description: &str| {
        json!({"description": description, "enum": ["metre", "foot", null],
            "type": ["string", "null"]})
    };
    check(
        derived,
        Some(json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string",
                    "description": "Where to look.\nExamples: \"src/lib.rs\", \"README.md\""},
                "at": strict_point(&format!("{point}\nExamples: {{\"x\":1}}")),
                "unit": unit_or_null(&format!("{unit}\nExamples: \"foot\"")),
                "token": {"type": "string"},
            },
            "required": ["at", "path", "token", "unit"],
            "definitions": {"Point": strict_point(point), "UnitOrNull": unit_or_null(unit)},
        })),
    );
}

/// Along an inlined chain the nearest `examples` are said, after every description and below a
/// `Deprecated.` line; examples too long to be worth a line, or none, are dropped unsaid, and so
/// are `readOnly` and `$comment`.
#[test]
fn examples_are_said_once_and_short_other_annotations_dropped() {
    let long = "x".repeat(200);
    let schema = json!({
        "type": "object",
        "properties": {
            "near": {"$ref": "#/$defs/D", "description": "Field.", "deprecated": true,
                "examples": [{"n": "near"}]},
            "far": {"$ref": "#/$defs/D", "description": "Field."},
            "plain": {"$ref": "#/$defs/D"},
            "long": {"type": "string", "examples": [long]},
            "none": {"type": "integer", "examples": []},
            "other": {"type": "string", "readOnly": true, "$comment": "internal"},
        },
        "required": ["near", "far", "plain", "long", "none", "other"],
        "$defs": {"D": {"type": "object", "description": "A D.",
            "properties": {"n": {"type": "string"}}, "required": ["n"],
            "examples": [{"n": "far"}]}},
    });
    let d = |description: &str| {
        json!({"type": "object", "additionalProperties": false, "description": description,
            "properties": {"n": {"type": "string"}}, "required": ["n"]})
    };
    check(
        schema,
        Some(json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "near": d("Deprecated.\nField.\nA D.\nExamples: {\"n\":\"near\"}"),
                "far": d("Field.\nA D.\nExamples: {\"n\":\"far\"}"),
                "plain": {"$ref": "#/$defs/D"},
                "long": {"type": "string"},
                "none": {"type": "integer"},
                "other": {"type": "string"},
            },
            "required": ["far", "long", "near", "none", "other", "plain"],
            "$defs": {"D": d("A D.\nExamples: {\"n\":\"far\"}")},
        })),
    );
}

/// The examples' line is held to 200 characters, not bytes, and is said whole or not at all:
/// `Examples: "` and `"` are 12 characters, so 188 two-byte `é` (376 bytes) make a line of 200,
/// said, and 189 one past it, dropped rather than cut.
#[test]
fn the_examples_line_is_measured_in_characters() {
    let field = |n: usize| json!({"type": "string", "examples": ["é".repeat(n)]});
    let strict = |description: Option<String>| {
        let mut at = json!({"type": "string"});
        if let Some(description) = description {
            at["description"] = description.into();
        }
        Some(json!({"type": "object", "additionalProperties": false,
            "properties": {"at": at}, "required": ["at"]}))
    };
    let line = format!("Examples: \"{}\"", "é".repeat(188));
    assert_eq!(line.chars().count(), 200);
    for (n, said) in [(188, Some(line)), (189, None)] {
        check(
            json!({"type": "object", "properties": {"at": field(n)}, "required": ["at"]}),
            strict(said),
        );
    }
}

#[test]
fn a_required_property_the_schema_does_not_describe_is_not_strict() {
    // The schema requires `token` and lets it be anything (the object is open). Closed and with
    // `required` rebuilt from `properties`, the strict form would forbid the one key every call
    // needs, and each call would fail the tool's own check.
    check(
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q", "token"]}),
        None,
    );
}

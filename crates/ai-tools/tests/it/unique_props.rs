//! Properties of the order validation gives arrays of unique items: arguments holding sets and
//! `Vec`s, nested, written in any order a model may write them, validate to the same bytes every
//! time, keep every `Vec`'s order, and lose or add nothing.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use ai_core::{
    BoundTool, Capabilities, ExecPermit, ToolEffect, ToolError, ToolInvocationContext,
    canonical_json,
};
use ai_tools::{ToolContract, bind};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Teams to call in order, none twice; badges as sets of either kind; groups of people.
#[derive(Deserialize, Serialize, JsonSchema, Debug, PartialEq)]
struct RosterInput {
    #[schemars(extend("uniqueItems" = true))]
    teams: Vec<Team>,
    /// A `Vec` without the keyword: its elements are paired with the model's by place.
    backups: Vec<Team>,
    badges: BTreeSet<Badge>,
    marks: HashSet<Badge>,
    #[serde(default)]
    groups: Vec<HashSet<String>>,
}

/// A team: a set of people, steps in order (twice allowed) and an order of calls (none twice).
#[derive(Deserialize, Serialize, JsonSchema, Debug, PartialEq)]
struct Team {
    name: String,
    people: HashSet<String>,
    steps: Vec<String>,
    #[schemars(extend("uniqueItems" = true))]
    calls: Vec<String>,
    #[serde(default)]
    badges: HashSet<Badge>,
}

/// A set element with a set inside and a field serde fills in when the model leaves it out.
#[derive(
    Deserialize, Serialize, JsonSchema, Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
struct Badge {
    name: String,
    #[serde(default)]
    level: u8,
    tags: BTreeSet<String>,
}

#[derive(Serialize, JsonSchema)]
struct RosterOutput {
    seen: String,
}

struct Roster;

#[async_trait::async_trait]
impl ToolContract for Roster {
    type Input = RosterInput;
    type Output = RosterOutput;
    const ID: &'static str = "core__roster";
    const DESCRIPTION: &'static str = "Calls teams in turn.";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["seen"];
    async fn execute(
        &self,
        _: &ExecPermit,
        input: RosterInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<RosterOutput, ToolError> {
        Ok(RosterOutput {
            seen: input.teams.len().to_string(),
        })
    }
}

/// A short word from a small alphabet, so that elements often collide.
fn word() -> impl Strategy<Value = String> {
    "[a-e]{1,2}"
}

/// `items` without a repeat (as JSON), in the order first written: a model's array of unique
/// items, in whatever order it chose.
fn unique(items: Vec<Value>) -> Value {
    let mut kept: Vec<Value> = Vec::new();
    for item in items {
        if !kept.contains(&item) {
            kept.push(item);
        }
    }
    Value::Array(kept)
}

/// Fewer than `max` words, repeats allowed.
fn words(max: usize) -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec(word().prop_map(Value::from), 0..max)
}

/// A badge as a model writes it: its level sometimes left out.
fn badge() -> impl Strategy<Value = Value> {
    (word(), prop::option::weighted(0.8, 0u8..3), words(4)).prop_map(|(name, level, tags)| {
        let mut badge = json!({"name": name, "tags": unique(tags)});
        if let Some(level) = level {
            badge["level"] = level.into();
        }
        badge
    })
}

/// A team as a model writes it: its badges sometimes left out.
fn team() -> impl Strategy<Value = Value> {
    (
        word(),
        words(5),
        words(4),
        words(5),
        prop::option::weighted(0.8, prop::collection::vec(badge(), 0..3)),
    )
        .prop_map(|(name, people, steps, calls, badges)| {
            let mut team = json!({"name": name, "people": unique(people), "steps": steps,
                "calls": unique(calls)});
            if let Some(badges) = badges {
                team["badges"] = unique(badges);
            }
            team
        })
}

/// `team` with its people and calls in the other order: a team alike but for the order of a set
/// and a `Vec` of unique items inside it.
fn reversed_sets(team: &Value) -> Value {
    let mut twin = team.clone();
    for key in ["people", "calls"] {
        if let Some(items) = twin[key].as_array_mut() {
            items.reverse();
        }
    }
    twin
}

/// A roster's arguments as a model writes them: every set in an order of its choosing.
fn roster() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec((team(), any::<bool>()), 0..5),
        prop::collection::vec(team(), 0..3),
        prop::collection::vec(badge(), 0..6),
        prop::collection::vec(badge(), 0..6),
        prop::option::of(prop::collection::vec(words(5), 0..4)),
    )
        .prop_map(|(teams, backups, badges, marks, groups)| {
            let teams = teams.into_iter().flat_map(|(team, twin)| {
                let copy = twin.then(|| reversed_sets(&team));
                std::iter::once(team).chain(copy)
            });
            let mut args = json!({"teams": told_apart(teams.collect()), "backups": backups,
                "badges": unique(badges), "marks": unique(marks)});
            if let Some(groups) = groups {
                args["groups"] = groups.into_iter().map(unique).collect();
            }
            args
        })
}

/// Whether serde changes `team` (fills in its badges, or a badge's level).
fn changed(team: &Value) -> bool {
    team.get("badges")
        .and_then(Value::as_array)
        .is_none_or(|badges| badges.iter().any(|badge| badge.get("level").is_none()))
}

/// `teams` without two of one name where serde changes either: which of the model's teams a
/// changed team came from is told by its required fields, so teams alike in all of them are
/// not generated changed (see `an_element_serde_changed_keeps_its_place`). Teams alike but for
/// the order of a set or a `Vec` of unique items inside them are, when unchanged.
fn told_apart(teams: Vec<Value>) -> Value {
    let mut kept: Vec<Value> = Vec::new();
    for team in teams {
        let alike =
            |kept: &Value| kept["name"] == team["name"] && (changed(kept) || changed(&team));
        if !kept.iter().any(|other| other == &team || alike(other)) {
            kept.push(team);
        }
    }
    Value::Array(kept)
}

/// Validates `args`, which the generators make valid.
fn validate(tool: &Arc<dyn BoundTool>, args: &Value) -> Result<Value, TestCaseError> {
    tool.validate_input(args.clone())
        .map_err(|e| TestCaseError::fail(format!("{args} refused: {e:?}")))
}

/// What the tool reads from `args`.
fn read(args: &Value) -> RosterInput {
    RosterInput::deserialize(args).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The same arguments validate to the same bytes every time (a resumed call's approval hash
    /// is the first's), validated arguments validate to themselves, and the tool reads from them
    /// what it reads from the model's: every `Vec` in the model's order, every set whole.
    #[test]
    fn unique_items_keep_the_models_order_and_every_element(args in roster()) {
        let tool = bind(Roster).unwrap();
        let validated = validate(&tool, &args)?;
        for _ in 0..3 {
            prop_assert_eq!(canonical_json(&validate(&tool, &args)?), canonical_json(&validated));
        }
        prop_assert_eq!(&validate(&tool, &validated)?, &validated);
        prop_assert_eq!(read(&validated), read(&args));
        // The `Vec`s as the model wrote them, at every depth: what the tool runs.
        for field in ["teams", "backups"] {
            let (ours, theirs) = (&validated[field], &args[field]);
            prop_assert_eq!(ours.as_array().map(Vec::len), theirs.as_array().map(Vec::len));
            for (ours, theirs) in ours.as_array().unwrap().iter().zip(theirs.as_array().unwrap()) {
                for key in ["name", "steps", "calls"] {
                    prop_assert_eq!(&ours[key], &theirs[key]);
                }
            }
        }
    }

    /// Arguments with one field replaced by any small JSON value are taken or refused, never a
    /// panic, and when taken validate to the same bytes every time.
    #[test]
    fn any_arguments_are_taken_or_refused_alike(
        args in roster(),
        field in prop::sample::select(vec!["teams", "backups", "badges", "marks", "groups"]),
        value in any_json(),
    ) {
        let tool = bind(Roster).unwrap();
        let mut args = args;
        args[field] = value;
        let first = tool.validate_input(args.clone()).map(|v| canonical_json(&v));
        for _ in 0..2 {
            let again = tool.validate_input(args.clone()).map(|v| canonical_json(&v));
            prop_assert_eq!(again.is_ok(), first.is_ok());
            if let (Ok(again), Ok(first)) = (again, &first) {
                prop_assert_eq!(&again, first);
            }
        }
    }
}

/// A small JSON value of any shape, teams and badges among them.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..300).prop_map(Value::from),
        word().prop_map(Value::from),
        team(),
        badge(),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(word(), inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// The arguments `teams` validate to.
fn validated_teams(teams: Value) -> Value {
    let tool = bind(Roster).unwrap();
    let args = json!({"teams": teams, "backups": [], "badges": [], "marks": []});
    tool.validate_input(args).unwrap()["teams"].take()
}

/// An element of an array of unique items that serde changed (a default filled in) was paired
/// with none of the model's, so the arrays of unique items inside it were sorted: the tool got
/// a team's calls in another order than the model's. It is now paired with the model's element
/// that alone shares its required fields, and keeps their order.
#[test]
fn an_element_serde_changed_keeps_its_inner_order() {
    let teams =
        validated_teams(json!([{"name": "a", "people": [], "steps": [], "calls": ["ba", "a"]}]));
    assert_eq!(teams[0]["calls"], json!(["ba", "a"]));
    assert_eq!(teams[0]["badges"], json!([]));
}

/// Such an element also went after the elements serde left alone: the tool got the teams in
/// another order than the model's. It now keeps its place; elements alike in all their required
/// fields still follow in canonical JSON order, as a set gives no way to tell which is which.
#[test]
fn an_element_serde_changed_keeps_its_place() {
    let team = |name: &str| json!({"name": name, "people": [], "steps": [], "calls": []});
    let mut given = team("a");
    given["badges"] = json!([]);
    let teams = validated_teams(json!([team("b"), given, team("c")]));
    let names: Vec<&Value> = teams
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert_eq!(names, [&json!("b"), &json!("a"), &json!("c")]);
}

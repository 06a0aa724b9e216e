//! Exceptions excuse exactly their rule at their place, and go stale when unused.

use super::Exception;

fn check(violations: &[&str], exceptions: &[Exception], expected: &[&str]) {
    let violations = violations.iter().map(|v| (*v).to_owned()).collect();
    assert_eq!(super::apply(violations, exceptions), expected);
}

const fn exception(place: &'static str, rule: &'static str) -> Exception {
    Exception {
        place,
        rule,
        reason: "test",
    }
}

#[test]
fn the_real_list_has_a_reason_per_entry() {
    for e in super::EXCEPTIONS {
        assert!(!e.reason.trim().is_empty(), "{e:?}");
    }
}

#[test]
fn excuses_its_rule_at_its_place_only() {
    check(
        &[
            "crates/graph/src/a.rs:3: NO_ENV: m",
            "crates/graph/src/a.rs:4: FILE_DOCS: m",
            "crates/graph/src/ab.rs:1: NO_ENV: m",
            "crates/adapters/src/old/x.rs:9: NO_ENV: m",
            "cogni-graph -> cogni-adapters: ARCH_LAYERING: m",
            "cogni-graph -> cogni-wire-openai: ARCH_LAYERING: m",
        ],
        &[
            exception("crates/graph/src/a.rs", "NO_ENV"),
            exception("crates/adapters/src/old/", "NO_ENV"),
            exception("cogni-graph -> cogni-adapters", "ARCH_LAYERING"),
        ],
        &[
            "crates/graph/src/a.rs:4: FILE_DOCS: m",
            "crates/graph/src/ab.rs:1: NO_ENV: m",
            "cogni-graph -> cogni-wire-openai: ARCH_LAYERING: m",
        ],
    );
}

#[test]
fn an_unused_exception_is_a_violation() {
    check(
        &["cogni-graph -> cogni-adapters: ARCH_LAYERING: m"],
        &[exception("cogni-graph", "ARCH_LAYERING")],
        &[
            "cogni-graph -> cogni-adapters: ARCH_LAYERING: m",
            "xtask/src/exceptions.rs: STALE_EXCEPTION: `cogni-graph` `ARCH_LAYERING` (\"test\") excuses nothing any more; delete it",
        ],
    );
}

//! The graph rule on hand-written metadata.

use serde_json::{Value, json};

/// `(dependency, is_path, kind)`.
type Dep<'a> = (&'a str, bool, Option<&'a str>);
/// `(package, dependencies)`.
type Package<'a> = (&'a str, &'a [Dep<'a>]);

/// A metadata document with `packages` given as `(name, [(dep, is_path, kind)])`.
fn metadata(packages: &[Package<'_>]) -> Value {
    json!({"packages": packages.iter().map(|(name, deps)| json!({
        "name": name,
        "dependencies": deps.iter().map(|(dep, path, kind)| {
            let mut d = json!({"name": dep, "kind": kind});
            if *path { d["path"] = json!(format!("/repo/crates/{dep}")); }
            d
        }).collect::<Vec<_>>(),
    })).collect::<Vec<_>>()})
}

fn check(packages: &[Package<'_>], expected: &[&str]) {
    assert_eq!(super::check(&metadata(packages)).unwrap(), expected);
}

#[test]
fn allowed_edges_pass() {
    check(
        &[
            ("cogni-ai-core", &[("serde", false, None)]),
            (
                "cogni-graph",
                &[
                    ("cogni-ai-core", true, None),
                    ("cogni-ai-tools", true, Some("dev")),
                ],
            ),
            (
                "cogni-bootstrap",
                &[("cogni-graph", true, None), ("cogni-adapters", true, None)],
            ),
        ],
        &[],
    );
}

#[test]
fn forbidden_edges_are_named() {
    check(
        &[
            ("cogni-ai-core", &[("cogni-ai-tools", true, Some("dev"))]),
            ("cogni-wire-openai", &[("cogni-graph", true, None)]),
        ],
        &[
            "cogni-ai-core -> cogni-ai-tools: ARCH_LAYERING: dev dependency not allowed (allowed: none)",
            "cogni-wire-openai -> cogni-graph: ARCH_LAYERING: normal dependency not allowed (allowed: cogni-ai-core)",
        ],
    );
}

#[test]
fn unknown_packages_and_banned_crates() {
    check(
        &[
            ("cogni-mystery", &[]),
            (
                "cogni-ai-core",
                &[
                    ("jsonschema", false, None),
                    ("jsonschema", false, Some("dev")),
                ],
            ),
            ("cogni-wire-openai", &[("tokio", false, None)]),
        ],
        &[
            "cogni-mystery: ARCH_LAYERING: unknown workspace package; add its row to the ALLOWED table and ARCHITECTURE.md",
            "cogni-ai-core -> jsonschema: ARCH_BANNED_DEP: ai-core names no schema library and does no IO",
            "cogni-wire-openai -> tokio: ARCH_BANNED_DEP: wire codecs are sans-IO and schema-free",
        ],
    );
}

//! The graph rule on hand-written metadata.

use serde_json::{Value, json};

/// `(dependency, is_path, kind)`.
type Dep<'a> = (&'a str, bool, Option<&'a str>);
/// `(package, dependencies)`.
type Package<'a> = (&'a str, &'a [Dep<'a>]);

/// A metadata document with `packages` given as `(name, [(dep, is_path, kind)])`, each in its
/// folder of the `ALLOWED` table (`crates/<name>` for others) with a lib target in `src/`.
fn metadata(packages: &[Package<'_>]) -> Value {
    json!({"workspace_root": "/repo", "packages": packages.iter().map(|(name, deps)| {
        let folder = super::ALLOWED
            .iter()
            .find(|(n, _, _)| n == name)
            .map_or(format!("crates/{name}"), |(_, folder, _)| (*folder).to_owned());
        json!({
            "name": name,
            "manifest_path": format!("/repo/{folder}/Cargo.toml"),
            "targets": [{"kind": ["lib"], "src_path": format!("/repo/{folder}/src/lib.rs")}],
            "dependencies": deps.iter().map(|(dep, path, kind)| {
                let mut d = json!({"name": dep, "kind": kind, "uses_default_features": false});
                if *path { d["path"] = json!(format!("/repo/crates/{dep}")); }
                d
            }).collect::<Vec<_>>(),
        })
    }).collect::<Vec<_>>()})
}

/// `tree` with each package of an `EXTERNAL` row given every crate of its allowlist as a normal
/// dependency, with every feature it allows: what the real tree holds.
fn with_allowlisted_crates(mut tree: Value) -> Value {
    for package in tree["packages"].as_array_mut().unwrap() {
        let row = super::EXTERNAL
            .iter()
            .find(|(n, _, _)| package["name"] == *n);
        for entry in row.into_iter().flat_map(|(_, allowed, _)| *allowed) {
            let features = entry.features.unwrap_or_default();
            package["dependencies"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": entry.krate, "kind": null, "features": features, "uses_default_features": false}));
        }
    }
    tree
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

/// Each row of the table (DESIGN.md's rules, one per package) refuses, by name, an edge to
/// every workspace package it does not list; only the `*` rows (bootstrap, tests) take any.
#[test]
fn every_row_refuses_each_edge_it_does_not_list() {
    let names: Vec<&str> = super::ALLOWED.iter().map(|(name, _, _)| *name).collect();
    let forbidden: Vec<(&str, Vec<Dep<'_>>)> = super::ALLOWED
        .iter()
        .map(|(name, _, allowed)| {
            let deps = names
                .iter()
                .filter(|dep| *dep != name && !allowed.contains(dep))
                .map(|dep| (*dep, true, None))
                .collect();
            (*name, deps)
        })
        .collect();
    let packages: Vec<Package<'_>> = forbidden
        .iter()
        .map(|(name, deps)| (*name, deps.as_slice()))
        .collect();
    let mut expected = Vec::new();
    for (name, _, allowed) in super::ALLOWED {
        if allowed.contains(&"*") {
            continue;
        }
        let listed = if allowed.is_empty() {
            "none".to_owned()
        } else {
            allowed.join(", ")
        };
        for dep in names
            .iter()
            .filter(|dep| *dep != name && !allowed.contains(dep))
        {
            expected.push(format!(
                "{name} -> {dep}: ARCH_LAYERING: normal dependency not allowed (allowed: {listed})"
            ));
        }
    }
    // Every row but the two `*` rows has something to refuse.
    let rows_refusing = super::ALLOWED
        .iter()
        .filter(|(name, _, _)| {
            expected
                .iter()
                .any(|v| v.starts_with(&format!("{name} -> ")))
        })
        .count();
    assert_eq!(rows_refusing, super::ALLOWED.len() - 2);
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    check(&packages, &expected);
}

/// The table the check enforces is the one ARCHITECTURE.md shows (DESIGN.md's rules, with a
/// row for each crate added since): a row changed on one side only fails here.
#[test]
fn the_table_is_the_one_architecture_md_shows() {
    let doc = std::fs::read_to_string(crate::repo_root().join("ARCHITECTURE.md")).unwrap();
    let table = doc
        .split_once("Allowed internal dependencies")
        .expect("ARCHITECTURE.md has its dependency table")
        .1
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2);
    let documented: Vec<(String, Vec<String>)> = table
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells[1].split_whitespace().next().unwrap().to_owned();
            let deps = match cells[2] {
                "nothing internal" | "none" => Vec::new(),
                "all" => vec!["*".to_owned()],
                list => list.split(", ").map(|dep| format!("cogni-{dep}")).collect(),
            };
            (name, deps)
        })
        .collect();
    let enforced: Vec<(String, Vec<String>)> = super::ALLOWED
        .iter()
        .map(|(name, _, deps)| {
            (
                (*name).to_owned(),
                deps.iter().map(|d| (*d).to_owned()).collect(),
            )
        })
        .collect();
    assert_eq!(documented, enforced);
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

#[test]
fn every_edge_kind_counts() {
    check(
        &[
            ("xtask", &[("cogni-ai-core", true, Some("build"))]),
            ("cogni-adapters", &[("cogni-graph", true, Some("dev"))]),
            (
                "cogni-tests",
                &[
                    ("cogni-bootstrap", true, Some("dev")),
                    ("cogni-graph", true, None),
                ],
            ),
            (
                "cogni-ai-tools",
                &[("cogni-wire-openai", true, Some("build"))],
            ),
        ],
        &[
            "xtask -> cogni-ai-core: ARCH_LAYERING: build dependency not allowed (allowed: none)",
            "cogni-adapters -> cogni-graph: ARCH_LAYERING: dev dependency not allowed (allowed: cogni-ai-core, cogni-wire-openai)",
            "cogni-ai-tools -> cogni-wire-openai: ARCH_LAYERING: build dependency not allowed (allowed: cogni-ai-core)",
        ],
    );
}

#[test]
fn banned_crates_per_package() {
    check(
        &[
            (
                "cogni-wire-openai",
                &[
                    ("hyper", false, None),
                    ("reqwest", false, None),
                    ("schemars", false, None),
                    ("serde_json", false, None),
                ],
            ),
            (
                "cogni-graph",
                &[("axum", false, None), ("tokio", false, None)],
            ),
            (
                "cogni-ai-tools",
                &[("reqwest", false, None), ("schemars", false, None)],
            ),
            ("cogni-adapters", &[("reqwest", false, None)]),
        ],
        &[
            "cogni-wire-openai -> hyper: ARCH_BANNED_DEP: wire codecs are sans-IO and schema-free",
            "cogni-wire-openai -> reqwest: ARCH_BANNED_DEP: wire codecs are sans-IO and schema-free",
            "cogni-wire-openai -> schemars: ARCH_BANNED_DEP: wire codecs are sans-IO and schema-free",
            "cogni-graph -> axum: ARCH_BANNED_DEP: the loop does IO only through ports",
            "cogni-ai-tools -> reqwest: ARCH_BANNED_DEP: tools do IO only through capabilities",
        ],
    );
}

#[test]
fn the_repository_check_wants_every_row_and_some_edge() {
    let all: Vec<Package<'_>> = super::ALLOWED
        .iter()
        .map(|(name, _, _)| (*name, &[][..]))
        .collect();
    let violations = super::check_repo(&with_allowlisted_crates(metadata(&all))).unwrap();
    assert_eq!(
        violations,
        [
            "xtask/src/graph.rs: SCANNER_SAW_NOTHING: ARCH_LAYERING: no dependency with a `path` in cargo metadata; the edge pattern is broken"
        ]
    );
    let violations = super::check_repo(&with_allowlisted_crates(metadata(&[(
        "cogni-ai-tools",
        &[("cogni-ai-core", true, None)],
    )])))
    .unwrap();
    assert_eq!(
        violations.len(),
        super::ALLOWED.len() - 1,
        "{violations:#?}"
    );
    assert!(
        violations[0].starts_with(
            "cogni-ai-core: ARCH_LAYERING: the ALLOWED table has a row for a package the workspace lacks"
        ),
        "{violations:#?}"
    );
}

#[test]
fn every_schema_library_and_env_reader_is_banned() {
    check(
        &[
            (
                "cogni-ai-core",
                &[("boon", false, None), ("jsonschema-valid", false, None)],
            ),
            ("cogni-wire-ui", &[("valico", false, None)]),
            (
                "cogni-adapters",
                &[("dotenvy", false, None), ("envy", false, Some("dev"))],
            ),
            ("cogni-tests", &[("dotenv", false, None)]),
            ("cogni-bootstrap", &[("dotenvy", false, None)]),
            ("xtask", &[("envy", false, None)]),
        ],
        &[
            "cogni-ai-core -> boon: ARCH_BANNED_DEP: ai-core names no schema library and does no IO",
            "cogni-ai-core -> jsonschema-valid: ARCH_BANNED_DEP: ai-core names no schema library and does no IO",
            "cogni-wire-ui -> valico: ARCH_BANNED_DEP: UI stream encoders are sans-IO and schema-free",
            "cogni-adapters -> dotenvy: ARCH_BANNED_DEP: the environment is read only in cogni-bootstrap (and xtask)",
            "cogni-tests -> dotenv: ARCH_BANNED_DEP: the environment is read only in cogni-bootstrap (and xtask)",
        ],
    );
}

#[test]
fn an_internal_crate_counts_without_a_path_too() {
    // `cogni-graph = { git = "…" }` (or a registry version): the same crate, no `path`.
    check(
        &[
            ("cogni-ai-core", &[("cogni-graph", false, None)]),
            ("cogni-wire-ui", &[("cogni-adapters", false, Some("dev"))]),
            ("cogni-graph", &[("cogni-ai-tools", false, None)]),
        ],
        &[
            "cogni-ai-core -> cogni-graph: ARCH_LAYERING: normal dependency not allowed (allowed: none)",
            "cogni-wire-ui -> cogni-adapters: ARCH_LAYERING: dev dependency not allowed (allowed: cogni-ai-core)",
        ],
    );
}

#[test]
fn packages_and_their_targets_stay_where_the_source_rules_look() {
    let mut moved = metadata(&[
        ("cogni-wire-ui", &[]),
        ("cogni-ai-tools", &[]),
        ("cogni-adapters", &[]),
        ("cogni-tests", &[]),
    ]);
    moved["packages"][0]["manifest_path"] = json!("/repo/crates/ui/Cargo.toml");
    moved["packages"][1]["targets"] = json!([
        {"kind": ["lib"], "src_path": "/repo/crates/ai-tools/code/lib.rs"},
        {"kind": ["custom-build"], "src_path": "/repo/crates/ai-tools/build.rs"},
        {"kind": ["test"], "src_path": "/repo/crates/ai-tools/tests/it/main.rs"},
    ]);
    moved["packages"][2]["targets"] = json!([
        {"kind": ["bin"], "src_path": "/repo/crates/adapters/src/bin/probe.rs"},
        {"kind": ["bin"], "src_path": "/repo/crates/adapters/probe.rs"},
    ]);
    moved["packages"][3]["targets"] = json!([{"kind": ["lib"], "src_path": "/repo/tests/lib.rs"}]);
    assert_eq!(
        super::check(&moved).unwrap(),
        [
            "cogni-wire-ui: ARCH_SOURCE_PLACE: its manifest is crates/ui/Cargo.toml, not crates/wire-ui/Cargo.toml, where the source rules look; move it back or move the rules (the ALLOWED table, the places in xtask/src/sources.rs)",
            "cogni-ai-tools: ARCH_SOURCE_PLACE: its lib target compiles crates/ai-tools/code/lib.rs, outside crates/ai-tools/src/, where the source rules look",
            "cogni-ai-tools: NO_ENV: its build script (crates/ai-tools/build.rs) reads the build's environment and can hand it to the crate (`cargo:rustc-env` sets even `CARGO_PKG_*`); no package under crates/ but cogni-bootstrap has one",
            "cogni-adapters: ARCH_SOURCE_PLACE: its bin target compiles crates/adapters/probe.rs, outside crates/adapters/src/, where the source rules look",
        ]
    );
}

#[test]
fn renamed_dependencies_are_handed_to_the_source_rules() {
    let mut renamed = metadata(&[
        ("cogni-ai-core", &[("tokio", false, None)]),
        ("cogni-graph", &[]),
    ]);
    renamed["packages"][0]["dependencies"][0]["rename"] = json!("rt");
    renamed["packages"][1]["dependencies"] = json!([{"name": "tokio-util", "rename": "tu-x", "kind": "dev"}, {"name": "serde", "rename": null}, {"name": "cogni-ai-core", "rename": "core2"}]);
    // A workspace package is named by its library, whose name is not the package's.
    renamed["packages"][0]["targets"][0]["name"] = json!("ai_core");
    renamed["packages"][1]["targets"][0]["name"] = json!("graph");
    (renamed["packages"][1]["targets"].as_array_mut().unwrap())
        .push(json!({"kind": ["bin"], "name": "loop"}));
    let dep = |folder: &str, name: &str, krate: &str| crate::sources::RenamedDep {
        folder: folder.into(),
        name: name.into(),
        krate: krate.into(),
    };
    assert_eq!(
        super::renamed_deps(&renamed),
        [
            dep("crates/ai-core/", "rt", "tokio"),
            dep("crates/graph/", "tu_x", "tokio_util"),
            dep("crates/graph/", "core2", "ai_core"),
        ]
    );
    let library = |name: &str, folder: &str| crate::sources::Library {
        name: name.into(),
        folder: folder.into(),
    };
    assert_eq!(
        super::libraries(&renamed),
        [
            library("ai_core", "crates/ai-core/"),
            library("graph", "crates/graph/"),
        ]
    );
}

#[test]
fn every_manifest_inherits_the_workspace_lints() {
    let root = tempfile::tempdir().unwrap();
    let manifests = [
        (
            "inherits",
            "[package]\nname = \"a\"\n\n[lints]\nworkspace = true\n",
        ),
        ("no-table", "[package]\nname = \"b\"\n"),
        (
            "other-table",
            "[package]\nname = \"c\"\n[lints]\n[lints.rust]\nunsafe_code = \"allow\"\n[x]\nworkspace = true\n",
        ),
        (
            "dotted",
            "lints.workspace = true\n[package]\nname = \"d\"\n",
        ),
        (
            "commented",
            "[package]\nname = \"e\"\n[lints] # the workspace's\nworkspace = true # all of them\n",
        ),
    ];
    let packages: Vec<Value> = manifests
        .iter()
        .map(|(name, text)| {
            let path = root.path().join(format!("{name}.toml"));
            std::fs::write(&path, text).unwrap();
            json!({"name": name, "manifest_path": path})
        })
        .collect();
    let root_manifest = "[workspace]\n\n[workspace.lints.rust]\nmissing_docs = \"warn\"\nunsafe_code = \"forbid\"\n";
    std::fs::write(root.path().join("Cargo.toml"), root_manifest).unwrap();
    let metadata = json!({ "workspace_root": root.path(), "packages": packages });
    let violations = super::lints_inherited(&metadata);
    let named: Vec<&str> = violations
        .iter()
        .map(|v| v.split(':').next().unwrap())
        .collect();
    assert_eq!(named, ["no-table", "other-table"], "{violations:?}");
    assert!(violations[0].contains("ARCH_LINTS"));
}

/// The lints every manifest inherits forbid unsafe code, in either spelling; a root manifest
/// that lets it in (or drops the table) is named, since `unsafe` reaches the OS (`asm!`, a raw
/// file descriptor) through no name a source rule reads.
#[test]
fn the_workspace_lints_forbid_unsafe_code() {
    let root = tempfile::tempdir().unwrap();
    let metadata = json!({ "workspace_root": root.path(), "packages": [] });
    let lints = |text: &str| {
        std::fs::write(root.path().join("Cargo.toml"), text).unwrap();
        super::lints_inherited(&metadata)
    };
    for forbids in [
        "[workspace]\n[workspace.lints.rust]\nunsafe_code = \"forbid\"\n",
        "[workspace.lints.rust]\nunsafe_code = { level = \"forbid\", priority = -1 }\n[x]\n",
        "[workspace.lints.rust] # every crate inherits these\nunsafe_code = 'forbid' # no unsafe\n",
        "[workspace.lints]\nrust.unsafe_code = \"forbid\"\n",
        "[workspace]\nlints.rust.\"unsafe_code\" = \"forbid\"\n",
        "[workspace.lints.rust.unsafe_code]\nlevel = \"forbid\"\npriority = -1\n",
    ] {
        assert_eq!(lints(forbids), Vec::<String>::new(), "{forbids}");
    }
    for lets_in in [
        "[workspace]\n[workspace.lints.rust]\nunsafe_code = \"allow\"\n",
        "[workspace.lints.rust]\nunsafe_code = { level = \"allow\" } # until \"forbid\" builds\n",
        "[workspace.lints.rust]\nunsafe_code_x = \"forbid\"\n",
        "[workspace]\n[workspace.lints.rust]\nmissing_docs = \"warn\"\n[workspace.lints.clippy]\nunsafe_code = \"forbid\"\n",
        "[workspace]\n",
    ] {
        assert_eq!(
            lints(lets_in),
            [
                "Cargo.toml: ARCH_LINTS: the workspace lints do not forbid unsafe code (`unsafe_code = \"forbid\"` under `[workspace.lints.rust]`); `unsafe` reaches the OS through no name a source rule reads"
            ],
            "{lets_in}"
        );
    }
}

/// A build script reads the build's environment and hands any of it to the crate as a
/// variable `env!` may read (`cargo:rustc-env=CARGO_PKG_DESCRIPTION=…` overrides Cargo's).
#[test]
fn a_build_script_is_an_env_reader() {
    let mut scripted = metadata(&[
        ("cogni-ai-core", &[]),
        ("cogni-wire-ui", &[]),
        ("cogni-bootstrap", &[]),
        ("cogni-tests", &[]),
        ("xtask", &[]),
    ]);
    for (k, folder) in [
        "crates/ai-core",
        "crates/wire-ui",
        "crates/bootstrap",
        "tests",
        "xtask",
    ]
    .iter()
    .enumerate()
    {
        scripted["packages"][k]["targets"] = json!([
            {"kind": ["lib"], "src_path": format!("/repo/{folder}/src/lib.rs")},
            {"kind": ["custom-build"], "src_path": format!("/repo/{folder}/build.rs")},
        ]);
    }
    scripted["packages"][1]["targets"][1]["src_path"] = json!("/repo/crates/wire-ui/gen/main.rs");
    assert_eq!(
        super::check(&scripted).unwrap(),
        [
            "cogni-ai-core: NO_ENV: its build script (crates/ai-core/build.rs) reads the build's environment and can hand it to the crate (`cargo:rustc-env` sets even `CARGO_PKG_*`); no package under crates/ but cogni-bootstrap has one",
            "cogni-wire-ui: NO_ENV: its build script (crates/wire-ui/gen/main.rs) reads the build's environment and can hand it to the crate (`cargo:rustc-env` sets even `CARGO_PKG_*`); no package under crates/ but cogni-bootstrap has one",
        ]
    );
}

/// An IO crate no deny-list names (`ureq`, `tempfile`, `rusqlite`) is refused in a package
/// that does no IO of its own (ai-tools too) because it is not on that package's allowlist;
/// adapters, the IO crate, has an allowlist too: `rusqlite` is on it, a crate that reads the
/// environment no deny-list names (`config`) is not.
#[test]
fn an_io_free_package_uses_only_its_allowlisted_crates() {
    check(
        &[
            (
                "cogni-ai-core",
                &[
                    ("serde", false, None),
                    ("ureq", false, None),
                    ("tempfile", false, None),
                ],
            ),
            ("cogni-wire-ui", &[("rusqlite", false, None)]),
            ("cogni-wire-openai", &[("memchr", false, None)]),
            ("cogni-graph", &[("tokio-util", false, None)]),
            ("cogni-ai-tools", &[("ureq", false, None)]),
            (
                "cogni-adapters",
                &[("rusqlite", false, None), ("config", false, None)],
            ),
        ],
        &[
            "cogni-ai-core -> ureq: ARCH_EXTERNAL_DEP: not on cogni-ai-core's allowlist of external crates (ai-core does no IO); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-ai-core -> tempfile: ARCH_EXTERNAL_DEP: not on cogni-ai-core's allowlist of external crates (ai-core does no IO); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-wire-ui -> rusqlite: ARCH_EXTERNAL_DEP: not on cogni-wire-ui's allowlist of external crates (UI stream encoders are sans-IO); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-graph -> tokio-util: ARCH_EXTERNAL_DEP: not on cogni-graph's allowlist of external crates (the loop does IO only through ports); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-ai-tools -> ureq: ARCH_EXTERNAL_DEP: not on cogni-ai-tools's allowlist of external crates (tools do IO only through capabilities); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-adapters -> config: ARCH_EXTERNAL_DEP: not on cogni-adapters's allowlist of external crates (adapters does the ports' IO with the crates recorded here and reads no environment); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
        ],
    );
}

/// tokio is allowed in ai-core and graph with the features they use today: `fs` (or `full`,
/// which has it) is refused by name, renamed or not; tokio-util's `net` turns on tokio's.
#[test]
fn tokio_features_outside_the_allowlist_are_named() {
    let mut tree = metadata(&[
        (
            "cogni-graph",
            &[("tokio", false, None), ("tokio", false, None)],
        ),
        (
            "cogni-ai-core",
            &[("tokio", false, None), ("tokio-util", false, None)],
        ),
    ]);
    tree["packages"][0]["dependencies"][0]["features"] = json!(["sync", "fs", "rt"]);
    tree["packages"][0]["dependencies"][1]["features"] = json!(["full"]);
    tree["packages"][0]["dependencies"][1]["rename"] = json!("rt");
    tree["packages"][1]["dependencies"][0]["features"] = json!(["time", "macros", "net"]);
    tree["packages"][1]["dependencies"][1]["features"] = json!(["net"]);
    assert_eq!(
        super::check(&tree).unwrap(),
        [
            "cogni-graph -> tokio: ARCH_EXTERNAL_DEP: feature `fs` is not on cogni-graph's allowlist for tokio (allowed: sync, time, macros, rt; the driver's tasks, channels, timeouts and `select!`; no fs, net, process, io or signal); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-graph -> tokio: ARCH_EXTERNAL_DEP: feature `full` is not on cogni-graph's allowlist for tokio (allowed: sync, time, macros, rt; the driver's tasks, channels, timeouts and `select!`; no fs, net, process, io or signal); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-ai-core -> tokio: ARCH_EXTERNAL_DEP: feature `net` is not on cogni-ai-core's allowlist for tokio (allowed: time, macros; timeouts and `select!`; no fs, net, process, io or signal); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-ai-core -> tokio-util: ARCH_EXTERNAL_DEP: feature `net` is not on cogni-ai-core's allowlist for tokio-util (allowed: none; `CancellationToken`; its features turn on tokio's (`net`, `io-util`, `rt`)); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
        ]
    );
}

/// The allowlists bind normal dependencies only: dev and build dependencies (tokio with `fs`
/// for a test, `tempfile`) are fine, the same crate as a normal one is not.
#[test]
fn the_allowlists_skip_dev_and_build_dependencies() {
    let mut tree = metadata(&[
        (
            "cogni-graph",
            &[
                ("tokio", false, Some("dev")),
                ("tempfile", false, Some("dev")),
                ("tokio", false, None),
            ],
        ),
        (
            "cogni-wire-openai",
            &[
                ("insta", false, Some("dev")),
                ("cc", false, Some("build")),
                ("tempfile", false, None),
            ],
        ),
    ]);
    tree["packages"][0]["dependencies"][0]["features"] = json!(["fs", "test-util"]);
    tree["packages"][0]["dependencies"][2]["features"] = json!(["process"]);
    assert_eq!(
        super::check(&tree).unwrap(),
        [
            "cogni-graph -> tokio: ARCH_EXTERNAL_DEP: feature `process` is not on cogni-graph's allowlist for tokio (allowed: sync, time, macros, rt; the driver's tasks, channels, timeouts and `select!`; no fs, net, process, io or signal); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-wire-openai -> tempfile: ARCH_EXTERNAL_DEP: not on cogni-wire-openai's allowlist of external crates (wire codecs are sans-IO); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
        ]
    );
}

/// A crate both allowed and banned for one package would make the tables say two things.
#[test]
fn no_allowlisted_crate_is_banned() {
    for (package, allowed, _) in super::EXTERNAL {
        assert!(
            super::ALLOWED.iter().any(|(name, _, _)| name == package),
            "{package}"
        );
        let banned = super::BANNED.iter().find(|(name, _, _)| name == package);
        for entry in *allowed {
            let listed = banned.is_some_and(|(_, lists, _)| {
                lists.iter().any(|crates| crates.contains(&entry.krate))
            }) || super::ENV_CRATES.contains(&entry.krate);
            assert!(!listed, "{package} -> {}", entry.krate);
        }
    }
}

/// A feature of the package's own `[features]` table can turn on a dependency's feature that
/// no dependency entry lists (`io = ["tokio/fs"]`, `"rt?/net"` for a renamed tokio): it is
/// checked against the same allowlist; a dev dependency's key or an allowed feature is fine.
#[test]
fn a_feature_of_the_package_turning_on_a_tokio_feature_is_named() {
    let mut tree = metadata(&[
        (
            "cogni-graph",
            &[("tokio", false, None), ("tempfile", false, Some("dev"))],
        ),
        (
            "cogni-ai-core",
            &[("tokio", false, None), ("serde", false, None)],
        ),
        ("cogni-adapters", &[("tokio", false, None)]),
    ]);
    tree["packages"][0]["features"] = json!({
        "io": ["tokio/fs", "tokio/sync", "tempfile/x"],
        "plain": ["dep:tokio"],
    });
    tree["packages"][1]["dependencies"][0]["rename"] = json!("rt");
    tree["packages"][1]["features"] = json!({"net": ["rt?/net", "serde/std"], "time": ["rt/time"]});
    tree["packages"][2]["features"] = json!({"fs": ["tokio/fs"]});
    assert_eq!(
        super::check(&tree).unwrap(),
        [
            "cogni-graph -> tokio: ARCH_EXTERNAL_DEP: its feature `io` turns on `fs`, which is not on cogni-graph's allowlist for tokio (allowed: sync, time, macros, rt; the driver's tasks, channels, timeouts and `select!`; no fs, net, process, io or signal); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-ai-core -> tokio: ARCH_EXTERNAL_DEP: its feature `net` turns on `net`, which is not on cogni-ai-core's allowlist for tokio (allowed: time, macros; timeouts and `select!`; no fs, net, process, io or signal); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
        ]
    );
}

/// On the real tree, an allowlisted crate no longer used (or a feature no longer turned on)
/// is named, so the lists stay what the packages use and a dropped crate cannot come back
/// unrecorded; a dev dependency does not keep a crate in use, a `[features]` entry keeps a
/// feature in use.
#[test]
fn an_allowlist_entry_no_longer_used_is_named() {
    let all: Vec<Package<'_>> = super::ALLOWED
        .iter()
        .map(|(name, _, _)| match *name {
            "cogni-ai-tools" => (*name, &[("cogni-ai-core", true, None)][..]),
            _ => (*name, &[][..]),
        })
        .collect();
    let mut tree = with_allowlisted_crates(metadata(&all));
    let core = tree["packages"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["name"] == "cogni-ai-core")
        .unwrap();
    for dep in core["dependencies"].as_array_mut().unwrap() {
        if dep["name"] == "sha2" {
            dep["kind"] = json!("dev");
        }
        if dep["name"] == "tokio" {
            dep["features"] = json!(["time"]);
        }
    }
    let graph = tree["packages"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["name"] == "cogni-graph")
        .unwrap();
    for dep in graph["dependencies"].as_array_mut().unwrap() {
        if dep["name"] == "tokio" {
            dep["features"] = json!(["sync", "time", "macros"]);
        }
    }
    graph["features"] = json!({"spawn": ["tokio/rt"]});
    let violations = super::check_repo(&tree).unwrap();
    assert_eq!(
        violations,
        [
            "cogni-ai-core -> sha2: ARCH_EXTERNAL_DEP: on cogni-ai-core's allowlist of external crates but no longer a normal dependency; delete it from the EXTERNAL table of xtask/src/graph.rs",
            "cogni-ai-core -> tokio: ARCH_EXTERNAL_DEP: feature `macros` is on cogni-ai-core's allowlist for tokio but no longer turned on; delete it from the EXTERNAL table of xtask/src/graph.rs",
        ]
    );
}

/// jsonschema's default features fetch a schema's `$ref`s over HTTP and from files: ai-tools
/// takes none of its features, whether named (`resolve-http`) or left on by default (no
/// `default-features = false`), which counts for every crate whose features are listed.
#[test]
fn default_features_count_as_features_turned_on() {
    let mut tree = metadata(&[
        (
            "cogni-ai-tools",
            &[
                ("jsonschema", false, None),
                ("jsonschema", false, None),
                ("schemars", false, None),
            ],
        ),
        ("cogni-graph", &[("tokio", false, None)]),
    ]);
    tree["packages"][0]["dependencies"][0]["features"] = json!(["resolve-http"]);
    tree["packages"][0]["dependencies"][1]["uses_default_features"] = json!(true);
    tree["packages"][0]["dependencies"][2]["uses_default_features"] = json!(true);
    tree["packages"][1]["dependencies"][0]["uses_default_features"] = json!(true);
    tree["packages"][1]["dependencies"][0]["features"] = json!(["sync"]);
    assert_eq!(
        super::check(&tree).unwrap(),
        [
            "cogni-ai-tools -> jsonschema: ARCH_EXTERNAL_DEP: feature `resolve-http` is not on cogni-ai-tools's allowlist for jsonschema (allowed: none; validates arguments and results; its features `resolve-http` and `resolve-file`, on by default, fetch a schema's `$ref`s); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-ai-tools -> jsonschema: ARCH_EXTERNAL_DEP: its default features (no `default-features = false`) are not on cogni-ai-tools's allowlist for jsonschema (allowed: none; validates arguments and results; its features `resolve-http` and `resolve-file`, on by default, fetch a schema's `$ref`s); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
            "cogni-graph -> tokio: ARCH_EXTERNAL_DEP: its default features (no `default-features = false`) are not on cogni-graph's allowlist for tokio (allowed: sync, time, macros, rt; the driver's tasks, channels, timeouts and `select!`; no fs, net, process, io or signal); adding one is a design decision: record it with its reason in the EXTERNAL table of xtask/src/graph.rs",
        ]
    );
}

/// A repository in a temporary folder whose root manifest forbids unsafe code, with a
/// `.cargo` folder for its configuration, and its metadata (no packages).
struct ForbiddingRepo {
    root: tempfile::TempDir,
    metadata: Value,
}

impl ForbiddingRepo {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let forbids = "[workspace.lints.rust]\nunsafe_code = \"forbid\"\n";
        std::fs::write(root.path().join("Cargo.toml"), forbids).unwrap();
        std::fs::create_dir(root.path().join(".cargo")).unwrap();
        let metadata = json!({ "workspace_root": root.path(), "packages": [] });
        Self { root, metadata }
    }

    /// What `lints_inherited` names once `.cargo/<file>` holds `text`.
    fn lints_with(&self, file: &str, text: &str) -> Vec<String> {
        std::fs::write(self.root.path().join(".cargo").join(file), text).unwrap();
        super::lints_inherited(&self.metadata)
    }
}

/// `--cap-lints` in the repository's Cargo configuration caps `forbid` too, so unsafe code
/// builds though the lints forbid it: it is named, in either file Cargo reads.
#[test]
fn the_build_flags_do_not_cap_the_lints() {
    let repo = ForbiddingRepo::new();
    let config = |file: &str, text: &str| repo.lints_with(file, text);
    for unrelated in [
        "[alias]\nxtask = \"run --package xtask --\"\n",
        "[build]\n# no --cap-lints here: it would lower `forbid`\nrustflags = [\"-C\", \"target-cpu=native\"]\n",
    ] {
        assert_eq!(config("config.toml", unrelated), Vec::<String>::new());
    }
    assert_eq!(
        config(
            "config.toml",
            "[build]\nrustflags = [\n  \"-C\", \"debuginfo=1\", # smaller\n  \"--cap-lints\", \"warn\",\n]\n"
        ),
        [
            ".cargo/config.toml:4: ARCH_LINTS: `--cap-lints` in the build's flags lowers `unsafe_code = \"forbid\"` with every lint; take it out"
        ]
    );
    assert_eq!(
        config(
            "config.toml",
            "[build]\nrustflags = [\"--cap-lints\", \"allow\"]\n"
        ),
        [
            ".cargo/config.toml:2: ARCH_LINTS: `--cap-lints` in the build's flags lowers `unsafe_code = \"forbid\"` with every lint; take it out"
        ]
    );
    std::fs::remove_file(repo.root.path().join(".cargo/config.toml")).unwrap();
    assert_eq!(
        config(
            "config",
            "[target.x86_64-unknown-linux-gnu]\nrustflags = [\"--cap-lints=warn\"]\n"
        ),
        [
            ".cargo/config:2: ARCH_LINTS: `--cap-lints` in the build's flags lowers `unsafe_code = \"forbid\"` with every lint; take it out"
        ]
    );
    // rustc and rustdoc read the flags of an `@file` argument from that file, which could
    // hold `--cap-lints`.
    assert_eq!(
        config(
            "config",
            "[build]\nrustflags = [\"-C\", \"debuginfo=1\", \"@.cargo/flags\"]\n"
        ),
        [
            ".cargo/config:2: ARCH_LINTS: `@file` in the build's flags reads more flags from that file, which could hold `--cap-lints`; take it out"
        ]
    );
    // `--force-warn` beats `forbid` and `-D warnings` for the lints it names.
    assert_eq!(
        config(
            "config",
            "[build]\nrustflags = [\"--force-warn\", \"unsafe_code\"]\n"
        ),
        [
            ".cargo/config:2: ARCH_LINTS: `--force-warn` in the build's flags makes the lints it names (`unsafe_code`, `warnings`) warnings whatever forbids or denies them; take it out"
        ]
    );
}

/// A compiler or wrapper the repository's configuration names (also through `[env]`, which
/// `cargo xtask ci` and so its cargo inherit) runs in rustc's (or rustdoc's) place and can hand
/// it `--cap-lints` no flag shows: each is named.
#[test]
fn a_compiler_the_configuration_chooses_is_named() {
    let repo = ForbiddingRepo::new();
    let config = |text: &str| repo.lints_with("config.toml", text);
    assert_eq!(
        config(
            "[build]\njobs = 2\nrustflags = [\"-C\", \"target-cpu=native\"]\n[target.x86_64-unknown-linux-gnu]\nlinker = \"clang\"\n[env]\nRUST_LOG = \"debug\"\nCARGO_WORKSPACE_DIR = { value = \"\", relative = true }\n"
        ),
        Vec::<String>::new()
    );
    for (text, line, key) in [
        (
            "[build]\nrustc-wrapper = \"tools/wrap.sh\"\n",
            2,
            "build.rustc-wrapper",
        ),
        ("build.rustc = \"tools/rustc\"\n", 1, "build.rustc"),
        (
            "build = { rustc-workspace-wrapper = \"w\" }\n",
            1,
            "build.rustc-workspace-wrapper",
        ),
        ("[build]\nrustdoc = \"tools/rustdoc\"\n", 2, "build.rustdoc"),
        // `[env]` reaches `cargo xtask ci` (a `cargo run`), and so the cargo it runs.
        (
            "[env]\nRUSTC_WRAPPER = { value = \"w.sh\", relative = true }\n",
            2,
            "env.RUSTC_WRAPPER",
        ),
        (
            "env.CARGO_BUILD_RUSTC = \"tools/rustc\"\n",
            1,
            "env.CARGO_BUILD_RUSTC",
        ),
    ] {
        assert_eq!(
            config(text),
            [format!(
                ".cargo/config.toml:{line}: ARCH_LINTS: `{key}` runs a program of the configuration's choosing in the compiler's place, which can lower every lint (`--cap-lints`) unseen; take it out"
            )],
            "{text}"
        );
    }
}

/// Cargo runs an alias of the repository's configuration in place of an external subcommand
/// (`cargo clippy`, `cargo fmt`), so `clippy = ["run", "--"]` would pass ci's clippy step
/// unchecked: an alias of a step's subcommand is named.
#[test]
fn an_alias_standing_in_for_a_ci_step_is_named() {
    let repo = ForbiddingRepo::new();
    let config = |text: &str| repo.lints_with("config.toml", text);
    assert_eq!(
        config("[alias]\nxtask = \"run --package xtask --\"\nlint = \"clippy --all-targets\"\n"),
        Vec::<String>::new()
    );
    for (shadows, line) in [
        ("[alias]\nclippy = [\"run\", \"--quiet\", \"--\"]\n", 2),
        ("alias.clippy = \"run --quiet --\"\n", 1),
    ] {
        assert_eq!(
            config(shadows),
            [format!(
                ".cargo/config.toml:{line}: ARCH_LINTS: the alias `clippy` stands in for `cargo clippy`, a step of `cargo xtask ci`, which would check nothing; take it out"
            )],
            "{shadows}"
        );
    }
}

/// The repository's `[env]` reaches `cargo xtask ci` (a `cargo run`) and every cargo and rustc
/// it runs: a forced `PATH` finds `rustc`, `cargo-clippy` or `rustfmt` where the repository
/// chose, and `CARGO_ALIAS_<COMMAND>` sets an alias as `[alias]` does. Each is named.
#[test]
fn the_environment_the_configuration_hands_on_is_checked() {
    let repo = ForbiddingRepo::new();
    let config = |text: &str| repo.lints_with("config.toml", text);
    assert_eq!(
        config("[env]\nCARGO_ALIAS_B = \"build\"\nRUST_BACKTRACE = \"1\"\n"),
        Vec::<String>::new()
    );
    assert_eq!(
        config("[env]\nPATH = { value = \"tools/bin\", force = true, relative = true }\n"),
        [
            ".cargo/config.toml:2: ARCH_LINTS: `env.PATH` runs a program of the configuration's choosing in the compiler's place, which can lower every lint (`--cap-lints`) unseen; take it out"
        ]
    );
    // Windows reads a variable's name in any case: `Path` is `PATH` there.
    assert_eq!(
        config("[env]\nPath = { value = \"tools\", force = true, relative = true }\n"),
        [
            ".cargo/config.toml:2: ARCH_LINTS: `env.PATH` runs a program of the configuration's choosing in the compiler's place, which can lower every lint (`--cap-lints`) unseen; take it out"
        ]
    );
    assert_eq!(
        config("[env]\nCARGO_ALIAS_CLIPPY = \"run --quiet --\"\n"),
        [
            ".cargo/config.toml:2: ARCH_LINTS: the alias `clippy` stands in for `cargo clippy`, a step of `cargo xtask ci`, which would check nothing; take it out"
        ]
    );
}

/// A dependency from a git repository or another registry is other code under a crate's name
/// (`tokio = { git = "…" }` passes every allowlist that names tokio): each is named, never its
/// address, which may hold a credential.
#[test]
fn a_dependency_from_elsewhere_than_crates_io_is_named() {
    let root = tempfile::tempdir().unwrap();
    let crates_io = "registry+https://github.com/rust-lang/crates.io-index";
    let metadata = json!({
        "workspace_root": root.path(),
        "packages": [{
            "name": "cogni-ai-core",
            "dependencies": [
                { "name": "serde", "source": crates_io, "kind": null },
                { "name": "cogni-wire-ui", "source": null, "path": "/w/crates/wire-ui", "kind": null },
                { "name": "tokio", "source": "git+https://user:secret@example.com/tokio?branch=x", "kind": null },
                { "name": "thiserror", "source": "sparse+https://registry.example/index/", "kind": "dev" },
            ],
        }],
    });
    assert_eq!(
        super::swapped_dependencies(&metadata),
        [
            "cogni-ai-core -> tokio: ARCH_PATCHED_DEP: comes from a git repository, not crates.io: other code under the crate's name, which no allowlist vets and no source rule reads; depend on crates.io's",
            "cogni-ai-core -> thiserror: ARCH_PATCHED_DEP: comes from another registry, not crates.io: other code under the crate's name, which no allowlist vets and no source rule reads; depend on crates.io's",
        ]
    );
}

/// `[patch]` and `[replace]` in the root manifest, and `[patch]` or `paths` in the repository's
/// Cargo configuration, compile other code under a dependency's name (any crate of any
/// allowlist, tokio or serde), which no allowlist vets and no source rule reads: each is named,
/// in whatever TOML form it is written.
#[test]
fn a_dependency_swapped_for_other_code_is_named() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join(".cargo")).unwrap();
    let metadata = json!({ "workspace_root": root.path(), "packages": [] });
    let swapped = |manifest: &str, config: &str| {
        std::fs::write(root.path().join("Cargo.toml"), manifest).unwrap();
        std::fs::write(root.path().join(".cargo/config.toml"), config).unwrap();
        super::swapped_dependencies(&metadata)
    };
    let clean = "[workspace]\nmembers = [\"crates/*\"]\n# no [patch] here\n[workspace.dependencies]\npatch = \"1\"\nreplace = { version = \"1\" }\n";
    // A registry mirror serves the crates Cargo.lock's checksums name: no other code.
    let config = "[alias]\nxtask = \"run --package xtask --\"\n[build]\nrustflags = [\"-C\", \"target-cpu=native\"]\n[source.crates-io]\nreplace-with = \"mirror\"\n[source.mirror]\nregistry = \"sparse+https://mirror.example/index/\"\n";
    assert_eq!(swapped(clean, config), Vec::<String>::new());
    let named = |file: &str, line: usize, table: &str, key: &str| {
        format!(
            "{file}:{line}: ARCH_PATCHED_DEP: `{table}` (`{key}`) compiles other code under a dependency's name, which no allowlist vets and no source rule reads; take it out"
        )
    };
    for (manifest, line, table, key) in [
        (
            "[workspace]\n[patch.crates-io]\nserde = { path = \"../serde\" }\n",
            3,
            "[patch]",
            "patch.crates-io.serde.path",
        ),
        (
            "[patch.\"https://github.com/tokio-rs/tokio\"]\ntokio = { git = \"https://example.com/tokio\" }\n",
            2,
            "[patch]",
            "patch.\"…\".tokio.git",
        ),
        (
            "[patch.crates-io.tokio]\npath = \"vendor/tokio\"\n",
            2,
            "[patch]",
            "patch.crates-io.tokio.path",
        ),
        (
            "patch.crates-io.serde.path = \"../serde\"\n[workspace]\n",
            1,
            "[patch]",
            "patch.crates-io.serde.path",
        ),
        (
            "[replace]\n\"serde:1.0.0\" = { path = \"../serde\" }\n",
            2,
            "[replace]",
            "replace.\"…\".path",
        ),
        // A byte order mark before the first header, and escapes in a quoted key, are read
        // as Cargo reads them.
        (
            "\u{feff}[patch.crates-io]\nserde = { path = \"../serde\" }\n",
            2,
            "[patch]",
            "patch.crates-io.serde.path",
        ),
        (
            "[\"p\\u0061tch\".crates-io]\nserde = { path = \"../serde\" }\n",
            2,
            "[patch]",
            "patch.crates-io.serde.path",
        ),
        (
            "[ 'patch' . \"crates-io\" ]\n\"\\U00000073erde\".path = \"../serde\"\n",
            2,
            "[patch]",
            "patch.crates-io.serde.path",
        ),
    ] {
        assert_eq!(
            swapped(manifest, config),
            [named("Cargo.toml", line, table, key)],
            "{manifest}"
        );
    }
    assert_eq!(
        swapped(
            clean,
            "paths = [\"../tokio\"]\n[patch.crates-io]\nserde = { path = \"../serde\" }\n"
        ),
        [
            named(".cargo/config.toml", 1, "paths", "paths"),
            named(
                ".cargo/config.toml",
                3,
                "[patch]",
                "patch.crates-io.serde.path"
            ),
        ]
    );
    // A directory source compiles the files in it, checked only against the checksums its own
    // `.cargo-checksum.json` lists.
    for (vendored, line) in [
        (
            "[source.crates-io]\nreplace-with = \"vendored\"\n[source.vendored]\ndirectory = \"vendor\"\n",
            4,
        ),
        (
            "source.crates-io.replace-with = \"vendored\"\nsource.vendored = { directory = \"vendor\" }\n",
            2,
        ),
    ] {
        assert_eq!(
            swapped(clean, vendored),
            [named(
                ".cargo/config.toml",
                line,
                "[source]",
                "source.vendored.directory"
            )],
            "{vendored}"
        );
    }
}

/// Cargo reads its files as TOML, and so do the checks: a value spanning lines (an array, a
/// `"""` string, an inline table), or an inline table in another, hides no setting, and text
/// in a string (a `[header]`, a `key = value`) is no setting. Each finding names its line.
#[test]
fn the_cargo_files_are_read_as_toml() {
    let repo = ForbiddingRepo::new();
    let config = |text: &str| repo.lints_with("config.toml", text);
    let note = "[alias]\nnote = \"\"\"\n[build]\nrustc-wrapper = 'w'\n\"\"\"\n";
    assert_eq!(config(note), Vec::<String>::new());
    let compiler = |line: usize, key: &str| {
        format!(
            ".cargo/config.toml:{line}: ARCH_LINTS: `{key}` runs a program of the configuration's choosing in the compiler's place, which can lower every lint (`--cap-lints`) unseen; take it out"
        )
    };
    for (text, line, key) in [
        (
            "[build]\njobs = 2\nnote = \"\"\"\n[x]\n\"\"\"\nrustc-wrapper = \"w\"\n",
            6,
            "build.rustc-wrapper",
        ),
        (
            "build = {\n  jobs = 2,\n  rustc-wrapper = \"w\",\n}\n",
            3,
            "build.rustc-wrapper",
        ),
        (
            "env = { RUSTC_WRAPPER = { value = \"w\", force = true } }\n",
            1,
            "env.RUSTC_WRAPPER",
        ),
    ] {
        assert_eq!(config(text), [compiler(line, key)], "{text}");
    }
    let capped = |line: usize| {
        format!(
            ".cargo/config.toml:{line}: ARCH_LINTS: `--cap-lints` in the build's flags lowers `unsafe_code = \"forbid\"` with every lint; take it out"
        )
    };
    for text in [
        "[build]\nrustflags = [\"\"\"--cap-\\\n    lints\"\"\", \"warn\"]\n",
        "[build]\nrustflags = [\"--cap\\u002dlints=warn\"]\n",
    ] {
        assert_eq!(config(text), [capped(2)], "{text}");
    }
    assert_eq!(
        config("[alias]\nlint = \"\"\"\n[x]\n\"\"\"\nclippy = \"run --\"\n"),
        [
            ".cargo/config.toml:5: ARCH_LINTS: the alias `clippy` stands in for `cargo clippy`, a step of `cargo xtask ci`, which would check nothing; take it out"
        ]
    );
    // What Cargo would refuse is named, not passed unread.
    assert_eq!(
        config("[build]\nrustflags = [\n"),
        [
            ".cargo/config.toml:2: ARCH_LINTS: is not TOML (unclosed array, expected `]`), so its settings went unchecked; make it valid TOML"
        ]
    );
}

/// The root manifest's lints, each manifest's `[lints]` and the tables that swap a dependency
/// are read as TOML too: a `"""` string holding them is text, and an inline table in another
/// is read however deep.
#[test]
fn the_manifests_are_read_as_toml() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join(".cargo")).unwrap();
    let manifest = root.path().join("a.toml");
    let metadata = json!({
        "workspace_root": root.path(),
        "packages": [{"name": "a", "manifest_path": manifest}],
    });
    let lints = |workspace: &str, package: &str| {
        std::fs::write(root.path().join("Cargo.toml"), workspace).unwrap();
        std::fs::write(&manifest, package).unwrap();
        super::lints_inherited(&metadata)
    };
    let inherits = "lints = { workspace = true }\n";
    let nested = "workspace = { lints = { rust = { unsafe_code = { level = \"forbid\" } } } }\n";
    assert_eq!(lints(nested, inherits), Vec::<String>::new());
    let in_text = "[workspace.metadata]\nx = \"\"\"\n[workspace.lints.rust]\nunsafe_code = \"forbid\"\n\"\"\"\n[workspace.lints.rust]\nunsafe_code = \"allow\"\n";
    let package_in_text =
        "[package]\nname = \"a\"\ndescription = \"\"\"\n[lints]\nworkspace = true\n\"\"\"\n";
    assert_eq!(
        lints(in_text, package_in_text),
        [
            "Cargo.toml: ARCH_LINTS: the workspace lints do not forbid unsafe code (`unsafe_code = \"forbid\"` under `[workspace.lints.rust]`); `unsafe` reaches the OS through no name a source rule reads",
            "a: ARCH_LINTS: its manifest does not inherit the workspace lints (`[lints]` with `workspace = true`), where `unsafe_code = \"forbid\"` comes from",
        ]
    );
    let swapped = |manifest: &str, config: &str| {
        std::fs::write(root.path().join("Cargo.toml"), manifest).unwrap();
        std::fs::write(root.path().join(".cargo/config.toml"), config).unwrap();
        super::swapped_dependencies(&json!({ "workspace_root": root.path(), "packages": [] }))
    };
    let named = |file: &str, line: usize, table: &str, key: &str| {
        format!(
            "{file}:{line}: ARCH_PATCHED_DEP: `{table}` (`{key}`) compiles other code under a dependency's name, which no allowlist vets and no source rule reads; take it out"
        )
    };
    assert_eq!(
        swapped(
            "x = \"\"\"\n[workspace]\n\"\"\"\npatch.crates-io.serde.path = \"../serde\"\n",
            "source = { vendored = { directory = \"vendor\" } }\npaths = [\n  \"../tokio\",\n]\n"
        ),
        [
            named("Cargo.toml", 4, "[patch]", "patch.crates-io.serde.path"),
            named(".cargo/config.toml", 3, "paths", "paths"),
            named(
                ".cargo/config.toml",
                1,
                "[source]",
                "source.vendored.directory"
            ),
        ]
    );
}

/// A finding names the key it found by its plain segments only: a quoted one (a `[patch]`
/// source's address, which may hold a credential, or text with control characters) shows as
/// `"…"`. A quoted key holding a dot is one key, as Cargo reads it, not a dotted path.
#[test]
fn a_finding_quotes_no_key_that_may_hold_a_secret() {
    let root = tempfile::tempdir().unwrap();
    let metadata = json!({ "workspace_root": root.path(), "packages": [] });
    let manifest = "[patch.\"https://user:s3cret@example.com/tokio\"]\ntokio = { path = \"vendor/tokio\" }\n[replace]\n\"serde:1.0.0\".path = \"\\u001b[2J\"\n";
    std::fs::write(root.path().join("Cargo.toml"), manifest).unwrap();
    assert_eq!(
        super::swapped_dependencies(&metadata),
        [
            "Cargo.toml:2: ARCH_PATCHED_DEP: `[patch]` (`patch.\"…\".tokio.path`) compiles other code under a dependency's name, which no allowlist vets and no source rule reads; take it out",
            "Cargo.toml:4: ARCH_PATCHED_DEP: `[replace]` (`replace.\"…\".path`) compiles other code under a dependency's name, which no allowlist vets and no source rule reads; take it out",
        ]
    );
    let repo = ForbiddingRepo::new();
    assert_eq!(
        repo.lints_with(
            "config.toml",
            "\"build.rustc-wrapper\" = \"w\"\n\"alias.clippy\" = \"run\"\n"
        ),
        Vec::<String>::new()
    );
}

/// Cargo (1.95) loads the files a configuration's `include` names, which these checks do not
/// read: an alias or a compiler there would go unseen. Each form of it is named.
#[test]
fn a_configuration_including_another_file_is_named() {
    let repo = ForbiddingRepo::new();
    std::fs::write(
        repo.root.path().join(".cargo/more.toml"),
        "[alias]\nclippy = \"run --quiet --\"\n",
    )
    .unwrap();
    for (text, line) in [
        ("include = \"more.toml\"\n", 1),
        ("[build]\njobs = 2\n[[include]]\npath = \"more.toml\"\n", 4),
        ("include = [{ path = \"more.toml\", optional = true }]\n", 1),
    ] {
        assert_eq!(
            repo.lints_with("config.toml", text),
            [format!(
                ".cargo/config.toml:{line}: ARCH_LINTS: `include` loads settings from files these checks do not read, which could cap the lints, stand in for a step or run a program in the compiler's place; take it out"
            )],
            "{text}"
        );
    }
}

/// A runner of the repository's configuration (`target.<triple>.runner`, `target.'cfg(…)'
/// .runner`, or `CARGO_TARGET_<TRIPLE>_RUNNER` in `[env]`, which the cargo of `cargo xtask
/// ci` inherits) runs each test binary through a program of its choosing, which could report
/// failed tests as passed: each is named, in its own words.
#[test]
fn a_test_runner_the_configuration_chooses_is_named() {
    let repo = ForbiddingRepo::new();
    let config = |text: &str| repo.lints_with("config.toml", text);
    assert_eq!(
        config("[target.x86_64-unknown-linux-gnu]\nlinker = \"clang\"\n[env]\nRUNNER = \"x\"\n"),
        Vec::<String>::new()
    );
    let named = |line: usize, key: &str| {
        format!(
            ".cargo/config.toml:{line}: ARCH_LINTS: `{key}` runs the test binaries through a program of the configuration's choosing, which could report failed tests as passed; take it out"
        )
    };
    for (text, line, key) in [
        (
            "[target.x86_64-unknown-linux-gnu]\nrunner = \"tools/run.sh\"\n",
            2,
            "target.x86_64-unknown-linux-gnu.runner",
        ),
        (
            "[target.'cfg(target_os = \"linux\")']\nrunner = [\"tools/run.sh\", \"--quiet\"]\n",
            2,
            "target.\"…\".runner",
        ),
        (
            "target.'cfg(unix)'.runner = \"run.sh\"\n",
            1,
            "target.\"…\".runner",
        ),
        (
            "[env]\nCARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER = \"tools/run.sh\"\n",
            2,
            "env.CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER",
        ),
    ] {
        assert_eq!(config(text), [named(line, key)], "{text}");
    }
}

/// A toolchain file's `path` (`[toolchain] path = …`, in `rust-toolchain.toml` or in the
/// `rust-toolchain` rustup prefers) points rustup at a toolchain folder of the repository's
/// choosing, whose cargo, rustc and clippy could pass anything: it is named. A channel, or a
/// legacy `rust-toolchain` of one line (a channel's name), is not.
#[test]
fn a_toolchain_folder_the_repository_chooses_is_named() {
    let repo = ForbiddingRepo::new();
    let lints = |file: &str, text: &str| {
        std::fs::write(repo.root.path().join(file), text).unwrap();
        let found = super::lints_inherited(&repo.metadata);
        std::fs::remove_file(repo.root.path().join(file)).unwrap();
        found
    };
    for (file, text) in [
        ("rust-toolchain", "1.95.0\n"),
        (
            "rust-toolchain.toml",
            "[toolchain]\nchannel = \"1.95.0\"\ncomponents = [\"clippy\"]\n",
        ),
        ("rust-toolchain", "[toolchain]\nchannel = \"stable\"\n"),
    ] {
        assert_eq!(lints(file, text), Vec::<String>::new(), "{file}: {text}");
    }
    let named = |file: &str, line: usize| {
        format!(
            "{file}:{line}: ARCH_LINTS: `toolchain.path` points rustup at a toolchain folder of the repository's choosing, whose cargo, rustc and clippy could pass anything; name a channel instead"
        )
    };
    for (file, text, line) in [
        (
            "rust-toolchain.toml",
            "[toolchain]\npath = \"tools/toolchain\"\n",
            2,
        ),
        (
            "rust-toolchain",
            "# pinned\ntoolchain = { path = \"/opt/t\" }\n",
            2,
        ),
        (
            "rust-toolchain.toml",
            "toolchain.channel = \"1.95.0\"\ntoolchain.path = \"t\"\n",
            2,
        ),
    ] {
        assert_eq!(lints(file, text), [named(file, line)], "{file}: {text}");
    }
    assert_eq!(
        lints("rust-toolchain.toml", "1.95.0\n"),
        [
            "rust-toolchain.toml:1: ARCH_LINTS: is not TOML (key with no value, expected `=`), so its settings went unchecked; make it valid TOML"
        ]
    );
}

/// A profile's `rustflags` in the root manifest (`cargo-features = ["profile-rustflags"]`,
/// which a nightly toolchain, one a toolchain file's `channel` may choose, honours) reach rustc
/// as the configuration's do: `--cap-lints` there is named.
#[test]
fn a_profile_of_the_root_manifest_does_not_cap_the_lints() {
    let repo = ForbiddingRepo::new();
    let lints = |manifest: &str| {
        let forbids = "[workspace.lints.rust]\nunsafe_code = \"forbid\"\n";
        std::fs::write(
            repo.root.path().join("Cargo.toml"),
            [manifest, forbids].concat(),
        )
        .unwrap();
        super::lints_inherited(&repo.metadata)
    };
    let description = "[workspace.package]\ndescription = \"never @home, nor --cap-lints\"\n[profile.release]\nlto = \"thin\"\n";
    assert_eq!(lints(description), Vec::<String>::new());
    assert_eq!(
        lints(
            "cargo-features = [\"profile-rustflags\"]\n[profile.dev.package.\"*\"]\nrustflags = [\"--cap-lints\", \"allow\"]\n"
        ),
        [
            "Cargo.toml:3: ARCH_LINTS: `--cap-lints` in the build's flags lowers `unsafe_code = \"forbid\"` with every lint; take it out"
        ]
    );
}

/// `[env]` reaches the cargo of `cargo xtask ci` and the tools its steps run: `RUSTFMT` runs a
/// program in rustfmt's place (`cargo fmt --check` then passes unformatted code), and
/// `CLIPPY_CONF_DIR` has clippy read another `clippy.toml` (no `disallowed-methods`). Each is
/// named, in its own words.
#[test]
fn a_tool_of_a_ci_step_the_configuration_swaps_is_named() {
    let repo = ForbiddingRepo::new();
    let config = |text: &str| repo.lints_with("config.toml", text);
    assert_eq!(
        config("[env]\nRUSTFMT_LOG = \"info\"\nCLIPPY_ARGS = \"\"\n"),
        Vec::<String>::new()
    );
    assert_eq!(
        config(
            "[env]\nRUSTFMT = { value = \"tools/true\", relative = true }\nCLIPPY_CONF_DIR = \"/tmp\"\n"
        ),
        [
            ".cargo/config.toml:2: ARCH_LINTS: `env.RUSTFMT` runs a program of the configuration's choosing in rustfmt's place, which could pass the fmt step unchecked; take it out",
            ".cargo/config.toml:3: ARCH_LINTS: `env.CLIPPY_CONF_DIR` makes clippy read a `clippy.toml` of the configuration's choosing in place of the repository's, whose `disallowed-methods` the clippy step enforces; take it out",
        ]
    );
}

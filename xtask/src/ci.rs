//! `cargo xtask ci`: the checks CI runs, in order, stopping at the first failure.
//!
//! After the tests, the UI streams they recorded (`target/ui-streams/`, written by the server's
//! end-to-end tests) are checked by the protocols' own published schemas and client state
//! machines (`tests/protocol/run.sh`: `@ag-ui/core` + `@ag-ui/client`, `ai`), which needs
//! Node.js and npm.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::graph::{alias_stands_in, config_weakens, lowered_lints, read_toml};

/// How a step runs.
enum Step {
    /// `cargo` with these arguments.
    Cargo(&'static [&'static str]),
    /// An xtask check (`cargo xtask <the step's name>`), run in this process.
    Xtask(fn(&Path) -> anyhow::Result<()>),
}

/// The steps, in order, by name. The first failure stops the run and is named.
const STEPS: &[(&str, Step)] = &[
    ("fmt", Step::Cargo(&["fmt", "--all", "--", "--check"])),
    (
        "clippy",
        Step::Cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    ),
    // The workspace build turns every feature on; this keeps cogni-adapters building, warning
    // free, without its default features (no HTTP client, no SQLite), as an app that needs
    // only the workspace depends on it.
    (
        "clippy-minimal",
        Step::Cargo(&[
            "clippy",
            "-p",
            "cogni-adapters",
            "--no-default-features",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    ),
    ("check-architecture", Step::Xtask(crate::check_architecture)),
    ("check-links", Step::Xtask(crate::links::check_links)),
    // The workspace's rustdoc lints (Cargo.toml) deny broken links and unreadable examples.
    ("doc", Step::Cargo(&["doc", "--workspace", "--no-deps"])),
    ("test", Step::Cargo(&["test", "--workspace"])),
];

/// The cargo subcommands ci's steps run (`fmt`, `clippy`, `doc`, `test`), which no alias may
/// stand in for (`graph::shadowed_step`, run by [`crate::graph::config_weakens`]).
pub(crate) fn commands() -> impl Iterator<Item = &'static str> {
    STEPS.iter().filter_map(|(_, step)| match step {
        Step::Cargo(args) => args.first().copied(),
        Step::Xtask(_) => None,
    })
}

/// Runs fmt, clippy (also of cogni-adapters without its default features),
/// check-architecture, check-links, the docs and the tests, stopping at the first failure;
/// refuses first to run where the build's environment weakens them ([`weakened_checks`]).
pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    let cargo = crate::cargo();
    let variables = environment();
    let cargo_home = cargo_home(&variables, root);
    let weakened = weakened_checks(root, &variables, cargo_home.as_deref());
    if !weakened.is_empty() {
        for finding in &weakened {
            eprintln!("{finding}");
        }
        bail!(
            "ci refused: the build's environment caps the lints or stands in for a step, so its checks would not hold"
        );
    }
    for (name, how) in STEPS {
        match how {
            Step::Xtask(check) => {
                eprintln!("==> {name}");
                check(root).with_context(|| format!("ci failed at step {name}"))?;
            }
            Step::Cargo(args) if *name == "test" => {
                // Streams left by an earlier run must not pass for this run's.
                let streams = root.join(UI_STREAMS);
                if streams.exists() {
                    std::fs::remove_dir_all(&streams)
                        .with_context(|| format!("cannot clear {}", streams.display()))?;
                }
                let (passed, failed) = test(root, &cargo, args)?;
                let (files_ok, files_failed) = protocols(root)?;
                println!(
                    "{} passed, {} failed",
                    passed + files_ok,
                    failed + files_failed
                );
            }
            Step::Cargo(args) => step(root, &cargo, name, args)?,
        }
    }
    eprintln!(
        "ci: ok ({}, protocols)",
        STEPS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    );
    Ok(())
}

/// The process's environment variables (as lossy text).
#[allow(clippy::disallowed_methods)] // xtask, like bootstrap, may read the environment.
fn environment() -> Vec<(String, String)> {
    let text = |s: std::ffi::OsString| s.to_string_lossy().into_owned();
    std::env::vars_os()
        .map(|(name, value)| (text(name), text(value)))
        .collect()
}

/// The Cargo home whose configuration the cargo running ci's steps (in `root`) reads, found as
/// Cargo finds it in `variables`: a non-empty `CARGO_HOME`, else `$HOME/.cargo`, either under
/// `root` when relative. `None` where neither is set (or `HOME` is empty): Cargo then takes the
/// home the password database gives the user, which ci cannot read.
fn cargo_home(variables: &[(String, String)], root: &Path) -> Option<PathBuf> {
    let value = |wanted: &str| {
        let mut found = variables.iter().filter(|(name, _)| name == wanted);
        found
            .next()
            .filter(|(_, value)| !value.is_empty())
            .map(|(_, value)| PathBuf::from(value))
    };
    let home = value("CARGO_HOME").or_else(|| value("HOME").map(|home| home.join(".cargo")))?;
    Some(root.join(home))
}

/// Where the environment `cargo xtask ci` runs in would have the run pass code its checks
/// refuse: it hands rustc or rustdoc `--cap-lints`, which lowers `unsafe_code = "forbid"`,
/// `-D warnings` and the doc lints with every lint, or `--force-warn`, which makes the lints it
/// names warnings whatever forbids or denies them ([`lowered_lints`]), or it has an alias stand
/// in for a step's subcommand (`cargo clippy`). Each place is named: a variable (`RUSTFLAGS`,
/// `CARGO_ENCODED_RUSTFLAGS`, `CARGO_BUILD_RUSTFLAGS`, `CARGO_TARGET_<triple>_RUSTFLAGS`, their
/// `RUSTDOCFLAGS` forms, `CARGO_ALIAS_<COMMAND>`; never quoted), or a Cargo configuration
/// Cargo reads besides the repository's own (ARCH_LINTS reads that one; an `include` there is
/// named too, [`config_weakens`]): in a folder above `root`, or in `cargo_home` ([`cargo_home`];
/// `None`, a Cargo home ci cannot find, is refused too, as its configuration goes unread).
fn weakened_checks(
    root: &Path,
    variables: &[(String, String)],
    cargo_home: Option<&Path>,
) -> Vec<String> {
    let mut found = Vec::new();
    for (name, value) in variables {
        let flags = name.ends_with("RUSTFLAGS") || name.ends_with("RUSTDOCFLAGS");
        if let Some(lowered) = lowered_lints(value).filter(|_| flags) {
            found.push(format!("${name}: ARCH_LINTS: {lowered}; unset it"));
        }
        let alias = name.strip_prefix("CARGO_ALIAS_");
        if let Some(command) = commands().find(|c| alias == Some(&c.to_uppercase())) {
            let stands_in = alias_stands_in(command);
            found.push(format!("${name}: ARCH_LINTS: {stands_in}; unset it"));
        }
    }
    if cargo_home.is_none() {
        found.push(
            "$CARGO_HOME: ARCH_LINTS: neither `CARGO_HOME` nor `HOME` is set, so Cargo reads the configuration of a Cargo home ci cannot find (the user's in the password database), which could cap the lints or stand in for a step unseen; set `CARGO_HOME`".into(),
        );
    }
    let mut folders: Vec<PathBuf> = root.ancestors().skip(1).map(|d| d.join(".cargo")).collect();
    // Cargo reads `$CARGO_HOME` once, also when it is a folder above the repository's.
    folders.extend(
        cargo_home
            .filter(|home| !folders.iter().any(|f| f == home))
            .map(Path::to_path_buf),
    );
    for folder in folders {
        for file in ["config.toml", "config"] {
            let path = folder.join(file);
            let place = path.display().to_string();
            let entries = match read_toml(&path) {
                Ok(entries) => entries,
                Err(unreadable) => {
                    found.push(unreadable.finding(&place, "ARCH_LINTS"));
                    continue;
                }
            };
            for (line, weakens) in config_weakens(&entries) {
                found.push(format!(
                    "{place}:{line}: ARCH_LINTS: {weakens}; take it out"
                ));
            }
        }
    }
    found
}

/// Where the server's end-to-end tests leave the streams they received.
const UI_STREAMS: &str = "target/ui-streams";

/// Validates the recorded UI streams with the protocols' own libraries; returns the files that
/// passed and failed (the validator's last line, `N passed, M failed`).
fn protocols(root: &Path) -> anyhow::Result<(u64, u64)> {
    eprintln!("==> protocols: tests/protocol/run.sh {UI_STREAMS}");
    let output = Command::new("bash")
        .arg("tests/protocol/run.sh")
        .arg(UI_STREAMS)
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .context("ci failed at step protocols: cannot run bash (Node.js and npm are needed)")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!("{stdout}");
    let counts = stdout.lines().last().and_then(|line| {
        let (passed, failed) = line.split_once(" passed, ")?;
        Some((
            passed.parse().ok()?,
            failed.strip_suffix(" failed")?.parse().ok()?,
        ))
    });
    match counts {
        Some((passed, 0)) if output.status.success() && passed > 0 => Ok((passed, 0)),
        _ => bail!("ci failed at step protocols: the recorded UI streams did not all validate"),
    }
}

/// Runs the tests, echoing their output, and closes with one summary line over every test
/// binary (`N passed, N failed`), so a run that executed no test cannot pass unnoticed.
fn test(root: &Path, cargo: &str, args: &[&str]) -> anyhow::Result<(u64, u64)> {
    eprintln!("==> test: cargo {}", args.join(" "));
    let mut child = Command::new(cargo)
        .args(args)
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .context("ci failed at step test: cannot run cargo")?;
    let (mut passed, mut failed) = (0_u64, 0_u64);
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line.context("cannot read the test output")?;
            println!("{line}");
            if let Some((p, f)) = result_counts(&line) {
                passed += p;
                failed += f;
            }
        }
    }
    let status = child.wait().context("cargo test did not finish")?;
    println!("{passed} passed, {failed} failed");
    if !status.success() || failed > 0 {
        bail!(
            "ci failed at step test: cargo {} ({status})",
            args.join(" ")
        );
    }
    if passed == 0 {
        bail!("ci failed at step test: no test ran");
    }
    Ok((passed, failed))
}

/// `(passed, failed)` from a line like `test result: ok. 33 passed; 0 failed; …`.
fn result_counts(line: &str) -> Option<(u64, u64)> {
    let rest = line.strip_prefix("test result: ")?;
    let count = |word: &str| {
        rest.split(';').find_map(|part| {
            part.trim()
                .strip_suffix(word)?
                .trim()
                .rsplit(' ')
                .next()?
                .parse()
                .ok()
        })
    };
    Some((count(" passed")?, count(" failed")?))
}

/// Runs `cargo <args>` in `root` as the step `name`.
fn step(root: &Path, cargo: &str, name: &str, args: &[&str]) -> anyhow::Result<()> {
    eprintln!("==> {name}: cargo {}", args.join(" "));
    let status = Command::new(cargo)
        .args(args)
        .current_dir(root)
        .status()
        .with_context(|| format!("ci failed at step {name}: cannot run cargo"))?;
    if !status.success() {
        bail!(
            "ci failed at step {name}: cargo {} ({status})",
            args.join(" ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The README's promise: fmt, clippy, check-architecture, check-links, doc, test, in that
    /// order.
    #[test]
    fn the_steps_are_the_readmes() {
        let commands: Vec<String> = super::STEPS
            .iter()
            .map(|(name, step)| match step {
                super::Step::Cargo(args) => format!("cargo {}", args.join(" ")),
                super::Step::Xtask(_) => format!("cargo xtask {name}"),
            })
            .collect();
        assert_eq!(
            commands,
            [
                "cargo fmt --all -- --check",
                "cargo clippy --workspace --all-targets -- -D warnings",
                "cargo clippy -p cogni-adapters --no-default-features --all-targets -- -D warnings",
                "cargo xtask check-architecture",
                "cargo xtask check-links",
                "cargo doc --workspace --no-deps",
                "cargo test --workspace",
            ]
        );
    }

    /// What issue #2 asks of the README and `.ci/run`: the newcomer's command, the one test
    /// command and what it runs, how to run cargo-deny; and `.ci/run` runs exactly that command.
    #[test]
    fn the_readme_and_ci_run_name_the_one_test_command() {
        let root = crate::repo_root();
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        for promised in [
            "cargo run -q -p cogni-bootstrap -- tools call core__get_current_time --args '{}'",
            "```sh\ncargo xtask ci\n```",
            "`cargo fmt --check`",
            "-D warnings",
            "`cargo xtask check-architecture`",
            "`cargo xtask check-links`",
            "`cargo doc --workspace --no-deps`",
            "`cargo test --workspace`",
            "`.ci/run`",
            "`cargo deny check`",
        ] {
            assert!(
                readme.contains(promised),
                "README.md does not say {promised}"
            );
        }
        let run = std::fs::read_to_string(root.join(".ci/run")).unwrap();
        let last = run
            .lines()
            .map(str::trim)
            .rfind(|line| !line.is_empty() && !line.starts_with('#'));
        assert_eq!(last, Some("cargo xtask ci"));
    }

    /// `--cap-lints` (or `--force-warn`) where Cargo reads it besides the repository's
    /// configuration (a flags variable, a configuration above the repository or in
    /// `$CARGO_HOME`) lowers `forbid` and `-D warnings` for the whole run: ci names each place,
    /// never a variable's value.
    #[test]
    fn an_environment_that_caps_the_lints_is_named() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("work").join("repo");
        let home = outer.path().join("home");
        for folder in [
            root.join(".cargo"),
            outer.path().join(".cargo"),
            home.clone(),
        ] {
            std::fs::create_dir_all(folder).unwrap();
        }
        let variables = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            let pairs = pairs.iter();
            pairs
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect()
        };
        let clean = variables(&[
            ("RUSTFLAGS", "-C target-cpu=native"),
            ("PATH", "/bin --cap-lints"),
            ("CARGO_TARGET_DIR", "/tmp/cap-lints"),
        ]);
        let flags = "[build]\nrustflags = [\"-C\", \"debuginfo=1\"]\n";
        std::fs::write(outer.path().join(".cargo/config.toml"), flags).unwrap();
        std::fs::write(home.join("config.toml"), flags).unwrap();
        // The repository's own is ARCH_LINTS's, not named twice.
        let capped = "[build]\nrustflags = [\"--cap-lints\", \"warn\"]\n";
        std::fs::write(root.join(".cargo/config.toml"), capped).unwrap();
        assert_eq!(
            super::weakened_checks(&root, &clean, Some(&home)),
            Vec::<String>::new()
        );
        std::fs::write(outer.path().join(".cargo/config"), capped).unwrap();
        std::fs::write(home.join("config.toml"), capped).unwrap();
        let dirty = variables(&[
            ("RUSTFLAGS", "-C debuginfo=1 --cap-lints=warn"),
            ("CARGO_ENCODED_RUSTFLAGS", "--cap-lints\u{1f}allow"),
            (
                "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
                "--cap-lints warn",
            ),
            ("RUSTDOCFLAGS", "--cap-lints=allow"),
            ("CARGO_BUILD_RUSTFLAGS", "--force-warn=unsafe_code"),
            (
                "CARGO_ENCODED_RUSTDOCFLAGS",
                "-Cdebuginfo=1\u{1f}@/tmp/flags",
            ),
        ]);
        let named = |place: String, fix: &str| {
            format!(
                "{place}: ARCH_LINTS: `--cap-lints` in the build's flags lowers `unsafe_code = \"forbid\"` with every lint; {fix}"
            )
        };
        assert_eq!(
            super::weakened_checks(&root, &dirty, Some(&home)),
            [
                named("$RUSTFLAGS".into(), "unset it"),
                named("$CARGO_ENCODED_RUSTFLAGS".into(), "unset it"),
                named(
                    "$CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS".into(),
                    "unset it"
                ),
                named("$RUSTDOCFLAGS".into(), "unset it"),
                "$CARGO_BUILD_RUSTFLAGS: ARCH_LINTS: `--force-warn` in the build's flags makes the lints it names (`unsafe_code`, `warnings`) warnings whatever forbids or denies them; unset it".into(),
                "$CARGO_ENCODED_RUSTDOCFLAGS: ARCH_LINTS: `@file` in the build's flags reads more flags from that file, which could hold `--cap-lints`; unset it".into(),
                named(
                    format!("{}:2", outer.path().join(".cargo/config").display()),
                    "take it out"
                ),
                named(
                    format!("{}:2", home.join("config.toml").display()),
                    "take it out"
                ),
            ]
        );
        // A `$CARGO_HOME` above the repository is read once.
        let home_above = outer.path().join(".cargo");
        assert_eq!(
            super::weakened_checks(&root, &[], Some(&home_above)),
            [named(
                format!("{}:2", home_above.join("config").display()),
                "take it out"
            )]
        );
    }

    /// Cargo runs an alias in place of an external subcommand (`clippy`, `fmt`), so an alias
    /// of a step's subcommand, in a variable or a configuration above the repository or in
    /// `$CARGO_HOME`, would pass the step unchecked: ci names each place.
    #[test]
    fn an_alias_standing_in_for_a_step_is_named() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("repo");
        let home = outer.path().join("home");
        for folder in [root.join(".cargo"), home.clone()] {
            std::fs::create_dir_all(folder).unwrap();
        }
        let aliases = "[alias]\nxtask = \"run --package xtask --\"\nc = \"check\"\n";
        std::fs::write(home.join("config.toml"), aliases).unwrap();
        let variables = [("CARGO_ALIAS_B".to_owned(), "build".to_owned())];
        assert_eq!(
            super::weakened_checks(&root, &variables, Some(&home)),
            Vec::<String>::new()
        );
        let shadows = "[alias]\nclippy = [\"run\", \"--quiet\", \"--\"]\n";
        std::fs::write(home.join("config"), shadows).unwrap();
        let variables = [("CARGO_ALIAS_FMT".to_owned(), "version".to_owned())];
        let named = |place: String, command: &str, fix: &str| {
            format!(
                "{place}: ARCH_LINTS: the alias `{command}` stands in for `cargo {command}`, a step of `cargo xtask ci`, which would check nothing; {fix}"
            )
        };
        assert_eq!(
            super::weakened_checks(&root, &variables, Some(&home)),
            [
                named("$CARGO_ALIAS_FMT".into(), "fmt", "unset it"),
                named(
                    format!("{}:2", home.join("config").display()),
                    "clippy",
                    "take it out"
                ),
            ]
        );
    }

    /// A configuration above the repository or in `$CARGO_HOME` that includes another file
    /// (`include`, which Cargo 1.95 reads) could cap the lints there unseen: ci names it.
    #[test]
    fn a_configuration_including_another_file_is_named() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("repo");
        let home = outer.path().join("home");
        for folder in [root.join(".cargo"), home.clone()] {
            std::fs::create_dir_all(folder).unwrap();
        }
        std::fs::write(
            home.join("config.toml"),
            "include = [\"more.toml\"]\n[alias]\nc = \"check\"\n",
        )
        .unwrap();
        assert_eq!(
            super::weakened_checks(&root, &[], Some(&home)),
            [format!(
                "{}:1: ARCH_LINTS: `include` loads settings from files these checks do not read, which could cap the lints, stand in for a step or run a program in the compiler's place; take it out",
                home.join("config.toml").display()
            )]
        );
    }

    /// Cargo finds its home as `$CARGO_HOME` (not empty), else `$HOME/.cargo`, a relative one
    /// under the folder it runs in; with neither it asks the password database, which ci cannot
    /// read, so a configuration there would go unchecked: ci refuses to run.
    #[test]
    fn a_cargo_home_ci_cannot_find_is_refused() {
        let root = std::path::Path::new("/work/repo");
        let home = |pairs: &[(&str, &str)]| {
            let variables: Vec<(String, String)> = pairs
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect();
            super::cargo_home(&variables, root)
        };
        let cases = [
            (
                &[("CARGO_HOME", "/opt/cargo"), ("HOME", "/home/u")][..],
                Some("/opt/cargo"),
            ),
            (
                &[("CARGO_HOME", ""), ("HOME", "/home/u")],
                Some("/home/u/.cargo"),
            ),
            (
                &[("CARGO_HOME", "tools/cargo")],
                Some("/work/repo/tools/cargo"),
            ),
            (&[("HOME", "/home/u")], Some("/home/u/.cargo")),
            (&[], None),
            (&[("CARGO_HOME", ""), ("HOME", "")], None),
        ];
        for (variables, expected) in cases {
            assert_eq!(
                home(variables),
                expected.map(std::path::PathBuf::from),
                "{variables:?}"
            );
        }
        let outer = tempfile::tempdir().unwrap();
        assert_eq!(
            super::weakened_checks(&outer.path().join("repo"), &[], None),
            [
                "$CARGO_HOME: ARCH_LINTS: neither `CARGO_HOME` nor `HOME` is set, so Cargo reads the configuration of a Cargo home ci cannot find (the user's in the password database), which could cap the lints or stand in for a step unseen; set `CARGO_HOME`"
            ]
        );
    }

    #[test]
    fn reads_cargo_test_summaries() {
        let cases = [
            (
                "test result: ok. 33 passed; 0 failed; 0 ignored; 0 measured",
                Some((33, 0)),
            ),
            (
                "test result: FAILED. 8 passed; 1 failed; 0 ignored",
                Some((8, 1)),
            ),
            ("running 3 tests", None),
        ];
        for (line, expected) in cases {
            assert_eq!(super::result_counts(line), expected, "{line}");
        }
    }
}

//! `cargo xtask ci`: the checks CI runs, in order, stopping at the first failure.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// Runs fmt, clippy, check-architecture and the tests.
pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    let cargo = crate::cargo();
    let steps: [(&str, &[&str]); 2] = [
        ("fmt", &["fmt", "--all", "--", "--check"]),
        (
            "clippy",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        ),
    ];
    for (name, args) in steps {
        step(root, &cargo, name, args)?;
    }
    eprintln!("==> check-architecture");
    crate::check_architecture(root).context("step check-architecture failed")?;
    test(root, &cargo)
}

/// Runs the tests, echoing their output, and closes with one summary line over every test
/// binary (`N passed, N failed`), so a run that executed no test cannot pass unnoticed.
fn test(root: &Path, cargo: &str) -> anyhow::Result<()> {
    eprintln!("==> test: cargo test --workspace");
    let mut child = Command::new(cargo)
        .args(["test", "--workspace"])
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run cargo for step test")?;
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
        bail!("step test failed ({status})");
    }
    if passed == 0 {
        bail!("step test ran no test");
    }
    Ok(())
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

fn step(root: &Path, cargo: &str, name: &str, args: &[&str]) -> anyhow::Result<()> {
    eprintln!("==> {name}: cargo {}", args.join(" "));
    let status = Command::new(cargo)
        .args(args)
        .current_dir(root)
        .status()
        .with_context(|| format!("cannot run cargo for step {name}"))?;
    if !status.success() {
        bail!("step {name} failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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

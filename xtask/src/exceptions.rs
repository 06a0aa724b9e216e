//! Grandfathered violations of check-architecture: a shrinking list, a reason each (like
//! Diem's `x.toml` `existing_deps`).
//!
//! An entry excuses the violations of one rule at one place: a file (`crates/x/src/a.rs`, any
//! line), a folder (`crates/x/src/old/`), an edge (`cogni-graph -> cogni-adapters`) or a
//! package (`cogni-graph`). An entry that excuses nothing is itself a violation, so the list
//! can only shrink as code is fixed.

/// One grandfathered case.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Exception {
    /// A file, a folder ending in `/`, an edge `from -> to`, or a package.
    pub(crate) place: &'static str,
    /// The rule it excuses (`ARCH_LAYERING`, `NO_ENV`, …).
    pub(crate) rule: &'static str,
    /// Why it is tolerated and what removes it.
    pub(crate) reason: &'static str,
}

/// Today's exceptions: none. Add one only with a reason and a plan to remove it.
pub(crate) const EXCEPTIONS: &[Exception] = &[];

/// `violations` without the excused ones, plus one `STALE_EXCEPTION` per entry that excused
/// nothing.
pub(crate) fn apply(violations: Vec<String>, exceptions: &[Exception]) -> Vec<String> {
    let mut used = vec![false; exceptions.len()];
    let mut kept: Vec<String> = violations
        .into_iter()
        .filter(|violation| {
            let excused_by = exceptions.iter().position(|e| excuses(e, violation));
            if let Some(index) = excused_by {
                used[index] = true;
            }
            excused_by.is_none()
        })
        .collect();
    for (exception, used) in exceptions.iter().zip(used) {
        if !used {
            kept.push(format!(
                "xtask/src/exceptions.rs: STALE_EXCEPTION: `{}` `{}` (\"{}\") excuses nothing any more; delete it",
                exception.place, exception.rule, exception.reason
            ));
        }
    }
    kept
}

/// Whether `exception` covers `violation` (`place: RULE: message` or `path:line: RULE: message`).
fn excuses(exception: &Exception, violation: &str) -> bool {
    let Some(rest) = violation.strip_prefix(exception.place) else {
        return false;
    };
    let at_place = exception.place.ends_with('/') || rest.starts_with(':');
    let rule = rest
        .split(": ")
        .find(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_uppercase() || c == '_'));
    at_place && rule == Some(exception.rule)
}

#[cfg(test)]
mod tests;

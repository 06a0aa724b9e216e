//! Creating a temp file under a name nobody holds.

use std::io;

/// How many taken names a creation skips before it gives up.
const ATTEMPTS: usize = 1_000;

/// Calls `try_name` (a fresh name, opened with `create_new`) until a name is free, skipping up
/// to [`ATTEMPTS`] taken ones: a crashed process that had the same pid (as a container's main
/// process has at every start), another store of this process counting from 0 too, or another
/// process sharing the folder may hold one. A live writer's file is never touched. Returns the
/// name and what it opened, or the name and the error that stopped it.
pub(crate) fn first_free<P, T>(
    mut try_name: impl FnMut() -> (P, io::Result<T>),
) -> Result<(P, T), (P, io::Error)> {
    let mut skipped = 0;
    loop {
        match try_name() {
            (name, Ok(opened)) => return Ok((name, opened)),
            (_, Err(e)) if e.kind() == io::ErrorKind::AlreadyExists && skipped < ATTEMPTS => {
                skipped += 1;
            }
            (name, Err(e)) => return Err((name, e)),
        }
    }
}

/// How old a temp file of cogni's own must be before a store's open removes it as left by a
/// crash. A live writer's temp file lives for one write, fsync and rename (seconds, even for
/// the largest blob on a slow disk); an hour is far past that, so a file this old is no live
/// writer's, whichever process (or container sharing the folder) made it.
pub(crate) const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// What [`remove_stale`] did in a folder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Swept {
    /// The temp files it removed.
    pub(crate) removed: usize,
    /// The temp files of ours it left there: fresh ones, ones dated after `now`, and ones it
    /// could not remove (a folder it could not list counts as one).
    pub(crate) left: usize,
}

impl std::ops::AddAssign for Swept {
    fn add_assign(&mut self, other: Self) {
        self.removed += other.removed;
        self.left += other.left;
    }
}

/// Removes from `dir` the regular files whose name `is_temp` recognizes as a temp file of ours
/// and whose last change is at least [`STALE_AFTER`] before `now`: the temp files a crash left
/// between their creation and their rename. Any other entry (another name, a folder, a symlink,
/// a fresh temp file, one dated after `now`) is left as it is. Returns how many were removed and
/// how many temp files of ours were left; a failure to list the folder, or to read or remove
/// one entry, is skipped (it is tried again at the next open), never an error: a store opens
/// whatever its leftovers. A folder that does not exist holds none.
pub(crate) fn remove_stale(
    dir: &std::path::Path,
    is_temp: impl Fn(&str) -> bool,
    now: std::time::SystemTime,
) -> Swept {
    let mut swept = Swept::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return swept,
        Err(_) => {
            swept.left += 1;
            return swept;
        }
    };
    for entry in entries {
        let Ok(entry) = entry else {
            swept.left += 1;
            continue;
        };
        // The name first: nothing but our own temp names is even looked at.
        let name = entry.file_name();
        if !name.to_str().is_some_and(&is_temp) {
            continue;
        }
        // `DirEntry::metadata` does not follow a symlink.
        let Ok(meta) = entry.metadata() else {
            swept.left += 1;
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let stale = meta
            .modified()
            .ok()
            .and_then(|at| now.duration_since(at).ok())
            .is_some_and(|age| age >= STALE_AFTER);
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            swept.removed += 1;
        } else {
            swept.left += 1;
        }
    }
    swept
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::time::SystemTime;

    use super::*;

    #[test]
    fn only_stale_regular_files_with_a_temp_name_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let old = now - STALE_AFTER - std::time::Duration::from_secs(1);
        let plant = |name: &str, at: SystemTime| {
            let file = File::create(dir.path().join(name)).unwrap();
            file.set_modified(at).unwrap();
        };
        plant("tmp-stale", old);
        plant("tmp-fresh", now);
        plant("tmp-future", now + STALE_AFTER);
        plant("other-stale", old);
        std::fs::create_dir(dir.path().join("tmp-folder")).unwrap();
        let is_temp = |name: &str| name.starts_with("tmp-");
        assert_eq!(
            remove_stale(dir.path(), is_temp, now),
            Swept {
                removed: 1,
                left: 2
            }
        );
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["other-stale", "tmp-folder", "tmp-fresh", "tmp-future"]
        );
        assert_eq!(
            remove_stale(&dir.path().join("missing"), is_temp, now),
            Swept::default()
        );
    }
}

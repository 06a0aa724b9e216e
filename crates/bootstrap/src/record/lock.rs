//! Which runs are live: the process that records a run holds an OS advisory lock on the run's
//! lock file (`<data>/locks/<sha256 of the run id>.lock`) for as long as it writes the run.
//!
//! The OS drops the lock when that process dies, however it dies, so recovery closes exactly
//! the runs whose lock it can take and leaves runs that are live in any process alone. On Unix
//! a lock file is removed by whoever holds its lock, when done; one left behind by a crash is
//! harmless (its lock is free) and is removed by the next recovery. Elsewhere the files stay:
//! removing one there could let two processes hold "the same" lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

use ai_core::{RunId, sha256_hex};
use anyhow::Context;

/// The lock files of a data folder's runs (under `<data>/locks/`).
#[derive(Clone, Debug)]
pub struct RunLocks {
    dir: PathBuf,
}

/// A held run lock: the run is written by this process until it is dropped, which removes the
/// lock file and then releases the lock.
#[derive(Debug)]
pub(crate) struct RunLock {
    path: PathBuf,
    _file: File,
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Removed while still locked, so no one can take a lock on a file that is about to go.
        // Only where a taker can tell the file it locked from one made at the same path since
        // (see `same_file`); elsewhere lock files stay, one small file per run.
        if cfg!(unix) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl RunLocks {
    /// The lock files kept in `dir` (created when first needed).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, run_id: &RunId) -> PathBuf {
        // Hashed: a run id may hold any character and be longer than a file name may be.
        self.dir
            .join(format!("{}.lock", sha256_hex(run_id.as_str().as_bytes())))
    }

    /// Takes the lock of a run if no process holds it; `None` when one does (the run is live).
    /// The error names the folder the lock files are kept in (one that cannot be written, say).
    pub(crate) fn try_take(&self, run_id: &RunId) -> anyhow::Result<Option<RunLock>> {
        adapters::create_private_dir(&self.dir)
            .and_then(|()| try_lock(self.path(run_id)))
            .with_context(|| format!("cannot take the run's lock in {}", self.dir.display()))
    }

    /// Checks that lock files can be made in the folder (creating it), by making and removing
    /// one: a data folder that cannot be written is refused when the stores open, not at every
    /// run after a start that looked fine. (A probe a crash leaves behind is a free lock file,
    /// which [`RunLocks::sweep`] removes.)
    pub(crate) fn check_writable(&self) -> anyhow::Result<()> {
        let probe = self.dir.join(format!(
            "probe-{}-{:08x}.lock",
            std::process::id(),
            crate::nonce()
        ));
        adapters::create_private_dir(&self.dir)
            .and_then(|()| OpenOptions::new().write(true).create_new(true).open(&probe))
            .and_then(|file| {
                drop(file);
                std::fs::remove_file(&probe)
            })
            .with_context(|| format!("cannot write run locks in {}", self.dir.display()))
    }

    /// Removes the lock files whose lock is free: left by runs that crashed before they were
    /// begun or before their recovery removed them.
    pub(crate) fn sweep(&self) -> io::Result<usize> {
        if !cfg!(unix) {
            return Ok(0);
        }
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let mut removed = 0;
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_some_and(|ext| ext == "lock") && try_lock(path)?.is_some() {
                // Dropping the lock removes the file.
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// Locks the file at `path` (creating it), or `None` when another holder has it.
fn try_lock(path: PathBuf) -> io::Result<Option<RunLock>> {
    // A holder removes its file before it unlocks: a lock taken on a file that was removed in
    // between guards nothing, so check that the path still names the locked file, and retry.
    for _ in 0..3 {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(e),
        }
        if same_file(&file, &path)? {
            return Ok(Some(RunLock { path, _file: file }));
        }
    }
    Ok(None)
}

#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let held = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(named) => Ok(held.dev() == named.dev() && held.ino() == named.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn same_file(_file: &File, _path: &Path) -> io::Result<bool> {
    // Elsewhere lock files are never removed (see `RunLock`'s drop), so the path always names
    // the file that was locked.
    Ok(true)
}

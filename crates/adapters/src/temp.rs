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

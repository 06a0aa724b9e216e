//! The workspace's hidden-entry walk fails closed when the process runs out of file
//! descriptors. A binary of its own (not part of `it`): it lowers the process's descriptor limit
//! and fills every descriptor but a few, which would fail any test running beside it.
//!
//! The walk opens the folders on a path's way, one more at a time than the operation that
//! follows it needs, so with the right number of descriptors free the walk fails (`EMFILE`)
//! where the operation would not. The walk then judged the rest of the path as written: a link
//! `a/b/c` to `.env` passed as the visible name `c`, and the read gave the file. How many
//! descriptors each side takes is cap-std's affair (and the kernel's), so every count from
//! none to a few is tried, and none may reach a hidden entry.
#![cfg(target_os = "linux")]

use std::fs::File;
use std::os::unix::fs::symlink;

use adapters::FsWorkspace;
use ai_core::{Workspace, WorkspaceError};
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// The descriptor limit the test runs under: low, so filling it is quick.
const NOFILE: u64 = 128;

/// Opens descriptors until the process may open no more, then closes `free` of them: they stay
/// open while the returned files live.
fn fill_all_but(free: usize) -> Vec<File> {
    let mut held = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(file) => held.push(file),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::MFILE.raw_os_error()) => break,
            Err(e) => panic!("filling the descriptor table: {e}"),
        }
    }
    assert!(
        held.len() > free,
        "only {} descriptors were free",
        held.len()
    );
    held.truncate(held.len() - free);
    held
}

/// However few descriptors are free, a read, a listing or a write never reaches a hidden entry
/// through a symlink: each is refused as hidden, fails, or (the listing) shows the link as
/// itself. Before, a walk that failed to open a folder for want of a descriptor let the call
/// through: with one descriptor free the read gave `.env`. (The listing and the write need as
/// many descriptors of their own as the walk here, so they failed with it; they are checked
/// all the same, should that change.)
#[tokio::test]
async fn a_walk_out_of_descriptors_never_lets_a_hidden_entry_through() {
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current.map_or(NOFILE, |current| current.min(NOFILE));
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(current),
            maximum: limit.maximum,
        },
    )
    .unwrap();

    let root = tempfile::tempdir().unwrap();
    let path = root.path();
    std::fs::write(path.join(".env"), "OPENAI_API_KEY=sk-CANARY-env").unwrap();
    std::fs::create_dir_all(path.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(path.join("a/b")).unwrap();
    std::fs::write(path.join("top.txt"), "top").unwrap();
    symlink("../../.env", path.join("a/b/c")).unwrap();
    symlink("../../.git", path.join("a/b/g")).unwrap();
    let ws = FsWorkspace::new(path).unwrap();
    let hook = path.join(".git/hooks/pre-commit");

    // Whether some count of free descriptors let a read of `top.txt` through (the operation
    // had what it needs) while the walk of `a/b/c` was refused for want of one.
    let mut refused_by_the_walk = false;
    for free in 0..=12 {
        let held = fill_all_but(free);
        let read = ws.read("a/b/c").await;
        let top = ws.read("top.txt").await;
        let listing = ws.list("a/b").await;
        let write = ws.write("a/b/g/hooks/pre-commit", "x").await;
        drop(held);

        match read {
            Ok(text) => panic!("{free} descriptors free: the hidden file was read: {text}"),
            Err(WorkspaceError::Hidden { .. }) => {}
            Err(error) => {
                let message = error.to_string();
                assert!(
                    !message.contains("CANARY") && !message.contains("a/b/c"),
                    "{free} descriptors free: {message}"
                );
                assert!(
                    !message.contains(&*path.to_string_lossy()),
                    "{free} descriptors free: {message}"
                );
                if matches!(error, WorkspaceError::Io { .. }) && top.is_ok() {
                    refused_by_the_walk = true;
                }
            }
        }
        if let Ok(listing) = listing {
            let link = listing.entries.iter().find(|e| e.path == "a/b/c");
            if let Some(link) = link {
                // As itself: `../../.env` is 10 bytes.
                assert_eq!(
                    (link.is_dir, link.size),
                    (false, 10),
                    "{free} descriptors free"
                );
            }
        }
        assert!(
            !hook.exists(),
            "{free} descriptors free: the write went into `.git/hooks` ({write:?})"
        );
        assert!(write.is_err(), "{free} descriptors free");
    }
    assert!(
        refused_by_the_walk,
        "no count of free descriptors failed the walk alone: the test tests nothing"
    );
    // With descriptors to spare, the walk refuses the link as what it is.
    assert_eq!(
        ws.read("a/b/c").await,
        Err(WorkspaceError::Hidden {
            path: "a/b/c".into()
        })
    );
}

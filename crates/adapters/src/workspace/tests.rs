//! Confinement: escapes by `..`, absolute paths and symlinks are refused; normal use works.

use std::os::unix::fs::symlink;

use ai_core::{Workspace, WorkspaceError};

use super::FsWorkspace;

fn setup() -> (tempfile::TempDir, tempfile::TempDir, FsWorkspace) {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside").unwrap();
    symlink(
        outside.path().join("secret.txt"),
        root.path().join("link.txt"),
    )
    .unwrap();
    symlink(outside.path(), root.path().join("linkdir")).unwrap();
    let workspace = FsWorkspace::new(root.path()).unwrap();
    (root, outside, workspace)
}

#[tokio::test]
async fn normal_use() {
    let (_root, _outside, ws) = setup();
    ws.write("a/b.txt", "hello").await.unwrap();
    assert_eq!(ws.read("a/b.txt").await.unwrap(), "hello");
    assert_eq!(ws.read("./a/b.txt").await.unwrap(), "hello");
    let listing = ws.list("a").await.unwrap();
    assert_eq!(listing.len(), 1);
    assert_eq!(listing[0].path, "a/b.txt");
    assert_eq!(listing[0].size, 5);
    let root_listing: Vec<_> = ws
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(root_listing, ["a", "link.txt", "linkdir"]);
    assert!(matches!(
        ws.read("missing.txt").await,
        Err(WorkspaceError::NotFound { .. })
    ));
}

#[tokio::test]
async fn escapes_are_refused() {
    let (_root, outside, ws) = setup();
    let outside_file = outside.path().join("secret.txt");
    let outside_abs = outside_file.to_str().unwrap();
    for path in [
        "../x.txt",
        "a/../../x.txt",
        outside_abs,
        "link.txt",
        "linkdir/secret.txt",
    ] {
        assert!(
            matches!(ws.read(path).await, Err(WorkspaceError::OutsideRoot { .. })),
            "read {path}"
        );
    }
    for path in [
        "../x.txt",
        "linkdir/new.txt",
        "linkdir/sub/new.txt",
        "link.txt",
    ] {
        assert!(
            matches!(
                ws.write(path, "x").await,
                Err(WorkspaceError::OutsideRoot { .. })
            ),
            "write {path}"
        );
    }
    assert!(matches!(
        ws.list("linkdir").await,
        Err(WorkspaceError::OutsideRoot { .. })
    ));
    // Nothing was written outside.
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    assert_eq!(std::fs::read_to_string(outside_file).unwrap(), "outside");
}

#[tokio::test]
async fn malformed_and_oversized_paths() {
    let (root, _outside, ws) = setup();
    for path in ["a\\b", "a\0b"] {
        assert!(
            matches!(ws.read(path).await, Err(WorkspaceError::InvalidPath { .. })),
            "{path}"
        );
    }
    std::fs::write(root.path().join("big.txt"), "x".repeat(100)).unwrap();
    let small = ws.clone().with_max_read_bytes(10);
    assert!(matches!(
        small.read("big.txt").await,
        Err(WorkspaceError::TooLarge { size: 100, .. })
    ));
    std::fs::write(root.path().join("bin.dat"), [0xff, 0xfe]).unwrap();
    assert!(matches!(
        ws.read("bin.dat").await,
        Err(WorkspaceError::NotText { .. })
    ));
}

#[test]
fn system_clock_is_after_2020() {
    use ai_core::Clock;
    assert!(crate::SystemClock.now_ms() > 1_577_836_800_000);
}

//! Confinement: escapes by `..`, absolute paths and symlinks are refused; normal use works.

use std::os::unix::fs::symlink;

use ai_core::{Workspace, WorkspaceError};

use super::FsWorkspace;

/// A test's hook into a write's blocking job ([`FsWorkspace::before_commit`]).
#[derive(Clone)]
pub(super) struct Hook(std::sync::Arc<dyn Fn() + Send + Sync>);

impl Hook {
    pub(super) fn call(&self) {
        (self.0)();
    }
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

/// A workspace over `root` whose writes stop before their commit: each tells `reached`, then
/// waits for a word on `go` (or for its sender to be dropped).
fn held_before_commit(
    root: &std::path::Path,
) -> (
    FsWorkspace,
    std::sync::mpsc::Receiver<()>,
    std::sync::mpsc::Sender<()>,
) {
    let (reached_tx, reached) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel::<()>();
    let reached_tx = std::sync::Mutex::new(reached_tx);
    let go_rx = std::sync::Mutex::new(go_rx);
    let mut ws = FsWorkspace::new(root).unwrap();
    ws.before_commit = Some(Hook(std::sync::Arc::new(move || {
        let _ = reached_tx.lock().unwrap().send(());
        let _ = go_rx.lock().unwrap().recv();
    })));
    (ws, reached, go)
}

/// The entries of `dir` on disk, temp files included, sorted.
fn names_on_disk(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A write whose call is dropped (as the runner drops a tool's future when its run is cancelled
/// or its time is up) never lands, even when its blocking job has already written the temp
/// file: the job gives up at its commit and removes the temp file. Waiting for the job is
/// dropping the runtime, which joins its blocking threads: no sleep.
#[test]
fn a_write_dropped_before_its_commit_never_lands() {
    use std::future::Future;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "old").unwrap();
    let (ws, reached, go) = held_before_commit(root.path());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut write = Box::pin(ws.write("a.txt", "new"));
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(write.as_mut().poll(cx)));
        assert!(first.await.is_pending());
        // The job has written and synced its temp file and waits before the rename.
        reached.recv().unwrap();
        drop(write);
        go.send(()).unwrap();
    });
    drop(runtime);
    assert_eq!(
        std::fs::read_to_string(root.path().join("a.txt")).unwrap(),
        "old"
    );
    assert_eq!(names_on_disk(root.path()), ["a.txt"]);
}

/// A write dropped while its job still waits for a blocking thread does nothing when the job
/// gets one: no file, no parent folder. The runtime's one blocking thread is held until the
/// write is dropped; a job queued after the write's runs after it.
#[test]
fn a_write_dropped_before_its_job_starts_does_nothing() {
    use std::future::Future;
    let root = tempfile::tempdir().unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .build()
        .unwrap();
    runtime.block_on(async {
        let (busy, release) = std::sync::mpsc::channel::<()>();
        let held = tokio::task::spawn_blocking(move || {
            let _ = release.recv();
        });
        let mut write = Box::pin(ws.write("sub/a.txt", "new"));
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(write.as_mut().poll(cx)));
        assert!(first.await.is_pending());
        drop(write);
        busy.send(()).unwrap();
        held.await.unwrap();
        tokio::task::spawn_blocking(|| ()).await.unwrap();
    });
    assert!(names_on_disk(root.path()).is_empty());
}

/// A write that is not dropped still lands once its job is let through.
#[tokio::test]
async fn a_held_write_that_is_awaited_lands() {
    let root = tempfile::tempdir().unwrap();
    let (ws, reached, go) = held_before_commit(root.path());
    go.send(()).unwrap();
    ws.write("a/b.txt", "new").await.unwrap();
    reached.recv().unwrap();
    assert_eq!(ws.read("a/b.txt").await.unwrap(), "new");
    assert_eq!(names_on_disk(&root.path().join("a")), ["b.txt"]);
}

/// Reads `path` whole and in a part from its start, and checks that the two agree: the part is
/// refused exactly as the whole read is (the same error: they open the file through the same
/// code), and otherwise holds the file's first bytes. Returns the whole read's result.
async fn read_both(ws: &FsWorkspace, path: &str) -> Result<String, WorkspaceError> {
    let whole = ws.read(path).await;
    let part = ws.read_part(path, 0, 4).await;
    match &whole {
        Ok(text) => {
            let part = part.unwrap();
            assert_eq!(part.bytes, &text.as_bytes()[..text.len().min(4)], "{path}");
            assert_eq!(part.more, text.len() > 4, "{path}");
            assert_eq!(part.size, text.len() as u64, "{path}");
        }
        // A part is neither held to the cap of a whole read nor checked to be text.
        Err(WorkspaceError::TooLarge { .. } | WorkspaceError::NotText { .. }) => {}
        Err(error) => assert_eq!(part.as_ref().err(), Some(error), "{path}: {part:?}"),
    }
    whole
}

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
    assert_eq!(read_both(&ws, "a/b.txt").await.unwrap(), "hello");
    assert_eq!(read_both(&ws, "./a/b.txt").await.unwrap(), "hello");
    let listing = ws.list("a").await.unwrap();
    assert!(!listing.truncated);
    let listing = listing.entries;
    assert_eq!(listing.len(), 1);
    assert_eq!(listing[0].path, "a/b.txt");
    assert_eq!(listing[0].size, 5);
    let root_listing: Vec<_> = ws
        .list("")
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(root_listing, ["a", "link.txt", "linkdir"]);
    assert!(matches!(
        read_both(&ws, "missing.txt").await,
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
            matches!(
                read_both(&ws, path).await,
                Err(WorkspaceError::OutsideRoot { .. })
            ),
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

/// Flips `root/d` between a symlink into the root and one out of it (each flip an atomic rename),
/// until `stop` is set.
fn flip_symlink(
    root: &std::path::Path,
    inside: std::path::PathBuf,
    outside: std::path::PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let link = root.join("d");
    let tmp = root.join("d.tmp");
    symlink(&inside, &link).unwrap();
    std::thread::spawn(move || {
        let mut flips = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let target = if flips.is_multiple_of(2) {
                &outside
            } else {
                &inside
            };
            let _ = std::fs::remove_file(&tmp);
            // The folders are gone once the test has failed and dropped them.
            if symlink(target, &tmp).is_err() || std::fs::rename(&tmp, &link).is_err() {
                break;
            }
            flips += 1;
        }
    })
}

/// A folder swapped for an outside symlink between the check and the open must not lead out:
/// the operations resolve beneath the root handle, in the kernel. Before the fix the check and the
/// open were two lookups and this escaped within a few tries; now no number of tries escapes.
#[tokio::test]
async fn swapped_folder_never_leads_out_of_the_root() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOP SECRET").unwrap();
    let real = root.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::write(real.join("secret.txt"), "inside").unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = flip_symlink(root.path(), real, outside.path().into(), stop.clone());
    for _ in 0..2000 {
        match ws.read("d/secret.txt").await {
            Ok(text) => assert_eq!(text, "inside", "a read escaped the root"),
            Err(e) => assert!(matches!(e, WorkspaceError::OutsideRoot { .. }), "{e:?}"),
        }
        match ws.write("d/pwned.txt", "pwned").await {
            Ok(()) | Err(WorkspaceError::OutsideRoot { .. }) => {}
            Err(e) => panic!("{e:?}"),
        }
        assert!(
            !outside.path().join("pwned.txt").exists(),
            "a write escaped the root"
        );
        match ws.list("d").await {
            Ok(listing) => assert!(
                listing
                    .entries
                    .iter()
                    .all(|e| e.path != "d/secret.txt" || e.size == 6)
            ),
            Err(e) => assert!(matches!(e, WorkspaceError::OutsideRoot { .. }), "{e:?}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flipper.join().unwrap();
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
}

/// The same swap, sequenced: a folder that was used is replaced by an outside symlink between
/// two calls, and the next calls are refused without touching the outside.
#[tokio::test]
async fn folder_replaced_by_outside_symlink_between_calls_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("b.txt"), "TOP SECRET").unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    ws.write("a/b.txt", "inside").await.unwrap();
    assert_eq!(read_both(&ws, "a/b.txt").await.unwrap(), "inside");
    std::fs::rename(root.path().join("a"), root.path().join("moved")).unwrap();
    symlink(outside.path(), root.path().join("a")).unwrap();
    assert!(matches!(
        read_both(&ws, "a/b.txt").await,
        Err(WorkspaceError::OutsideRoot { .. })
    ));
    assert!(matches!(
        ws.write("a/b.txt", "x").await,
        Err(WorkspaceError::OutsideRoot { .. })
    ));
    assert!(matches!(
        ws.write("a/new/c.txt", "x").await,
        Err(WorkspaceError::OutsideRoot { .. })
    ));
    assert!(matches!(
        ws.list("a").await,
        Err(WorkspaceError::OutsideRoot { .. })
    ));
    assert_eq!(
        std::fs::read_to_string(outside.path().join("b.txt")).unwrap(),
        "TOP SECRET"
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    // A symlink that stays inside the root keeps working.
    std::fs::remove_file(root.path().join("a")).unwrap();
    symlink("moved", root.path().join("a")).unwrap();
    assert_eq!(read_both(&ws, "a/b.txt").await.unwrap(), "inside");
}

/// Makes a named pipe at `path`.
fn mkfifo(path: &std::path::Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

/// A pipe with no writer used to block a thread forever in `open`; a socket failed as the
/// workspace's error. Both are the caller's mistake now, answered at once.
#[tokio::test]
async fn pipes_and_sockets_are_refused_without_hanging() {
    let root = tempfile::tempdir().unwrap();
    mkfifo(&root.path().join("pipe"));
    let _socket = std::os::unix::net::UnixListener::bind(root.path().join("sock")).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    for path in ["pipe", "sock"] {
        let result = tokio::time::timeout(std::time::Duration::from_secs(10), read_both(&ws, path))
            .await
            .unwrap_or_else(|_| panic!("reading {path} hung"));
        let error = result.unwrap_err();
        assert!(
            matches!(error, WorkspaceError::NotAFile { .. }),
            "{path}: {error:?}"
        );
        assert!(error.is_caller_error());
        assert_eq!(
            error.to_string(),
            "the path names something that is not a regular file"
        );
    }
}

/// A pipe with a writer reports 0 bytes and used to be read to its end, past the cap.
#[tokio::test]
async fn a_pipe_with_a_writer_is_not_read() {
    let root = tempfile::tempdir().unwrap();
    let pipe = root.path().join("pipe");
    mkfifo(&pipe);
    // Blocks in `open` until the workspace opens the pipe for reading, then streams 10 MiB
    // (until the read end is closed).
    std::thread::spawn(move || {
        use std::io::Write;
        if let Ok(mut writer) = std::fs::OpenOptions::new().write(true).open(pipe) {
            let _ = writer.write_all(&vec![b'a'; 10 * 1024 * 1024]);
        }
    });
    let ws = FsWorkspace::new(root.path())
        .unwrap()
        .with_max_read_bytes(1024);
    let result = tokio::time::timeout(std::time::Duration::from_secs(10), read_both(&ws, "pipe"))
        .await
        .expect("reading the pipe hung");
    assert!(
        matches!(result, Err(WorkspaceError::NotAFile { .. })),
        "{:?}",
        result.map(|text| text.len())
    );
}

/// The cap holds on the bytes read, not on the size the file reported.
#[test]
fn the_read_cap_holds_on_the_bytes_read() {
    let long = [b'a'; 100];
    let error = super::read_capped(&long[..], 0, 10, "p").unwrap_err();
    assert!(
        matches!(
            error,
            WorkspaceError::TooLarge {
                size: 11,
                limit: 10,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        super::read_capped(&long[..10], 0, 10, "p").unwrap().len(),
        10
    );
    assert!(matches!(
        super::read_capped(&long[..], 100, 10, "p"),
        Err(WorkspaceError::TooLarge { size: 100, .. })
    ));
}

/// What a file says its size is reserves no more than a bounded buffer: a reader that claims a
/// terabyte but holds five bytes, under no limit, is read (it used to reserve the terabyte up
/// front, which aborts the process).
#[test]
fn a_stated_size_reserves_a_bounded_buffer() {
    let bytes = super::read_capped(&b"hello"[..], 1 << 40, u64::MAX, "p").unwrap();
    assert_eq!(bytes, b"hello");
    assert!(
        bytes.capacity() <= super::MAX_READ_RESERVE,
        "{}",
        bytes.capacity()
    );
}

/// A sparse file of a terabyte read with no limit of its own is refused as too large, at once:
/// no read holds more than [`super::MAX_READ_BYTES_CEILING`], whatever the workspace was given.
#[tokio::test]
async fn a_huge_sparse_file_under_no_limit_is_too_large() {
    let root = tempfile::tempdir().unwrap();
    let file = std::fs::File::create(root.path().join("huge.txt")).unwrap();
    file.set_len(1 << 40).unwrap();
    let ws = FsWorkspace::new(root.path())
        .unwrap()
        .with_max_read_bytes(u64::MAX);
    let error = ws.read("huge.txt").await.unwrap_err();
    assert_eq!(
        error,
        WorkspaceError::TooLarge {
            path: "huge.txt".into(),
            size: 1 << 40,
            limit: super::MAX_READ_BYTES_CEILING,
        }
    );
}

/// Reading a folder, listing a file, a name too long and a loop of symlinks are the caller's
/// mistakes (they used to be the workspace's `Io` failures, counted against the tool's health),
/// and their messages never name the path.
#[tokio::test]
async fn wrong_kinds_of_path_are_caller_errors() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("dir")).unwrap();
    std::fs::write(root.path().join("f.txt"), "x").unwrap();
    symlink("loop2", root.path().join("loop1")).unwrap();
    symlink("loop1", root.path().join("loop2")).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let long = "CANARY".repeat(50);
    let cases: Vec<(&str, Result<(), WorkspaceError>)> = vec![
        ("read dir", read_both(&ws, "dir").await.map(drop)),
        ("read .", read_both(&ws, ".").await.map(drop)),
        ("write dir", ws.write("dir", "x").await),
        ("list f.txt", ws.list("f.txt").await.map(drop)),
        ("read f.txt/x", read_both(&ws, "f.txt/x").await.map(drop)),
        ("write f.txt/x", ws.write("f.txt/x", "x").await),
        ("write f.txt/x/y", ws.write("f.txt/x/y", "x").await),
        ("read long", read_both(&ws, &long).await.map(drop)),
        ("write long", ws.write(&long, "x").await),
        ("list long", ws.list(&long).await.map(drop)),
        ("read loop", read_both(&ws, "loop1").await.map(drop)),
        ("write loop", ws.write("loop1/x", "x").await),
        ("list loop", ws.list("loop1").await.map(drop)),
    ];
    for (case, result) in cases {
        let error = result.unwrap_err();
        assert!(error.is_caller_error(), "{case}: {error:?}");
        let message = error.to_string();
        for path in ["dir", "f.txt", "CANARY", "loop"] {
            assert!(!message.contains(path), "{case}: {message}");
        }
        let expected = match case {
            "read dir" | "read ." | "write dir" => "the path names a folder, not a file",
            "list f.txt" | "read f.txt/x" | "write f.txt/x" | "write f.txt/x/y" => {
                "a part of the path is not a folder"
            }
            "read long" | "write long" | "list long" => {
                "the path is not a valid workspace path: it or a name in it is too long"
            }
            _ => "the path is not a valid workspace path: it leads through too many symlinks",
        };
        assert_eq!(message, expected, "{case}");
    }
    assert_eq!(
        std::fs::read_to_string(root.path().join("f.txt")).unwrap(),
        "x"
    );
}

/// A write replaces the name, it does not write through it: a hard link to a file outside the
/// root (which the old truncate-and-write changed) and a symlink inside the root are replaced by
/// the new file, their targets untouched; an existing file keeps its permissions; no temp file
/// is left behind.
#[tokio::test]
async fn writes_replace_the_entry_and_never_write_through_it() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "TOP SECRET").unwrap();
    std::fs::hard_link(&secret, root.path().join("h.txt")).unwrap();
    std::fs::write(root.path().join("real.txt"), "real").unwrap();
    symlink("real.txt", root.path().join("in.txt")).unwrap();
    std::fs::write(root.path().join("private.txt"), "old").unwrap();
    std::fs::set_permissions(
        root.path().join("private.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();

    ws.write("h.txt", "new").await.unwrap();
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOP SECRET");
    assert_eq!(ws.read("h.txt").await.unwrap(), "new");

    ws.write("in.txt", "new").await.unwrap();
    assert_eq!(ws.read("real.txt").await.unwrap(), "real");
    assert!(
        std::fs::symlink_metadata(root.path().join("in.txt"))
            .unwrap()
            .is_file()
    );

    ws.write("private.txt", "new").await.unwrap();
    let mode = std::fs::metadata(root.path().join("private.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let names: Vec<_> = ws
        .list("")
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(names, ["h.txt", "in.txt", "private.txt", "real.txt"]);
}

/// A symlink in a subfolder that leads elsewhere inside the root (`sub/link -> ../a.txt`) is
/// judged from the root, as a read resolves it: a write replaces it rather than calling it an
/// escape.
#[tokio::test]
async fn a_link_in_a_subfolder_to_elsewhere_inside_is_inside() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "a").unwrap();
    std::fs::create_dir(root.path().join("sub")).unwrap();
    symlink("../a.txt", root.path().join("sub/link")).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    assert_eq!(ws.read("sub/link").await.unwrap(), "a");
    ws.write("sub/link", "x").await.unwrap();
    assert_eq!(ws.read("sub/link").await.unwrap(), "x");
    assert_eq!(
        ws.read("a.txt").await.unwrap(),
        "a",
        "replaced, not written through"
    );
}

/// Listing a folder while files are written into it never fails (an entry that vanishes
/// between the read of the folder and its stat is left out) and never shows a write's temp
/// file.
#[tokio::test]
async fn a_folder_written_to_while_listed_lists_cleanly() {
    let root = tempfile::tempdir().unwrap();
    let ws = std::sync::Arc::new(FsWorkspace::new(root.path()).unwrap());
    let writer = {
        let ws = ws.clone();
        tokio::spawn(async move {
            for n in 0..300 {
                ws.write(&format!("f{}.txt", n % 3), "x").await.unwrap();
            }
        })
    };
    while !writer.is_finished() {
        let listing = ws.list("").await.unwrap();
        assert!(
            listing
                .entries
                .iter()
                .all(|e| !e.path.starts_with(".cogni-write-")),
            "{:?}",
            listing.entries
        );
    }
    writer.await.unwrap();
}

/// A reader never sees an empty or partial file while it is rewritten: the new content is
/// renamed over the old one, which the old truncate-and-write did not do.
#[tokio::test]
async fn readers_never_see_a_partial_write() {
    const SIZE: usize = 1024 * 1024;
    let root = tempfile::tempdir().unwrap();
    let ws = FsWorkspace::new(root.path())
        .unwrap()
        .with_max_read_bytes(u64::MAX);
    ws.write("f.txt", &"b".repeat(SIZE)).await.unwrap();
    let writer = {
        let ws = ws.clone();
        tokio::spawn(async move {
            for round in 0..30 {
                let fill = if round % 2 == 0 { "c" } else { "b" };
                ws.write("f.txt", &fill.repeat(SIZE)).await.unwrap();
            }
        })
    };
    let mut reads = 0;
    while !writer.is_finished() || reads == 0 {
        let text = ws.read("f.txt").await.unwrap();
        assert_eq!(text.len(), SIZE, "a reader saw a partial file");
        assert!(text == "b".repeat(SIZE) || text == "c".repeat(SIZE));
        reads += 1;
    }
    writer.await.unwrap();
}

/// A write onto a pipe, or onto a symlink to a folder, is refused, and leaves nothing behind.
#[tokio::test]
async fn writes_onto_pipes_and_folder_links_are_refused() {
    let root = tempfile::tempdir().unwrap();
    mkfifo(&root.path().join("pipe"));
    std::fs::create_dir(root.path().join("dir")).unwrap();
    symlink("dir", root.path().join("dirlink")).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let pipe = tokio::time::timeout(std::time::Duration::from_secs(10), ws.write("pipe", "x"))
        .await
        .expect("writing the pipe hung");
    assert!(
        matches!(pipe, Err(WorkspaceError::NotAFile { .. })),
        "{pipe:?}"
    );
    assert!(matches!(
        ws.write("dirlink", "x").await,
        Err(WorkspaceError::IsAFolder { .. })
    ));
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 3);
}

/// A folder with more than `MAX_LIST_ENTRIES` entries is listed in part, and says so; it used
/// to be listed (and every entry stat'ed) whole.
#[tokio::test]
async fn a_huge_folder_is_listed_in_part_and_says_so() {
    let root = tempfile::tempdir().unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    std::fs::create_dir(root.path().join("big")).unwrap();
    for i in 0..ai_core::MAX_LIST_ENTRIES + 5 {
        std::fs::write(root.path().join(format!("big/{i}.txt")), "").unwrap();
    }
    let listing = ws.list("big").await.unwrap();
    assert!(listing.truncated);
    assert_eq!(listing.entries.len(), ai_core::MAX_LIST_ENTRIES);
    assert!(listing.entries.windows(2).all(|w| w[0].path < w[1].path));
    // The part shown is the first entries by name, whatever order the folder gives them in:
    // the same folder always shows the same part.
    let mut names: Vec<String> = (0..ai_core::MAX_LIST_ENTRIES + 5)
        .map(|i| format!("big/{i}.txt"))
        .collect();
    names.sort();
    let shown: Vec<&str> = listing.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(shown, names[..ai_core::MAX_LIST_ENTRIES]);
    std::fs::remove_file(root.path().join("big/0.txt")).unwrap();
    for i in 1..6 {
        std::fs::remove_file(root.path().join(format!("big/{i}.txt"))).unwrap();
    }
    let listing = ws.list("big").await.unwrap();
    assert!(!listing.truncated);
    assert_eq!(listing.entries.len(), ai_core::MAX_LIST_ENTRIES - 1);
}

#[test]
fn system_clock_is_after_2020() {
    use ai_core::Clock;
    assert!(crate::SystemClock.now_ms() > 1_577_836_800_000);
}

/// Temp files a crashed process left behind are not in the way: a process that gets the same
/// pid again (as a container's main process does at every start) makes the same names, and a
/// write that meets one takes the next name instead of failing.
#[tokio::test]
async fn a_temp_file_left_by_a_crash_does_not_fail_a_write() {
    let root = tempfile::tempdir().unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    // The names the next writes of this process will try (other tests may take a few).
    let next = super::temp_name().to_string_lossy().into_owned();
    let (stem, n) = next
        .strip_suffix(".tmp")
        .and_then(|s| s.rsplit_once('-'))
        .unwrap();
    let n: u64 = n.parse().unwrap();
    for m in n + 1..n + 65 {
        std::fs::write(root.path().join(format!("{stem}-{m}.tmp")), "left over").unwrap();
    }
    ws.write("a.txt", "new").await.unwrap();
    assert_eq!(ws.read("a.txt").await.unwrap(), "new");
}

/// A write keeps an existing file's permissions but not its set-user-ID, set-group-ID or sticky
/// bits: new content (the model's) never runs with the file owner's rights, as the kernel also
/// drops them when an unprivileged writer changes a file.
#[tokio::test]
async fn a_write_drops_the_set_id_bits() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let tool = root.path().join("tool.sh");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o6755)).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    ws.write("tool.sh", "#!/bin/sh\nid\n").await.unwrap();
    let mode = std::fs::metadata(&tool).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o755, "{mode:o}");
}

/// A write that creates folders syncs each folder that gained one (the root included) before
/// the file goes in, so a crash cannot lose the folders, and the file, after the write
/// returned; the folders above the deepest one that existed gained nothing and are left alone. A
/// folder that exists is opened as it is, syncing nothing.
#[test]
fn folders_a_write_creates_are_synced_into_their_parents() {
    let root = tempfile::tempdir().unwrap();
    let dir =
        cap_std::fs::Dir::open_ambient_dir(root.path(), cap_std::ambient_authority()).unwrap();
    let mut synced = Vec::new();
    let mut record = |dir: &cap_std::fs::Dir, folder: &std::path::Path| {
        synced.push(folder.to_string_lossy().into_owned());
        super::sync_folder(dir, folder)
    };
    super::open_or_create_folder(&dir, std::path::Path::new("a/b/c"), "a/b/c/x", &mut record)
        .unwrap();
    assert_eq!(synced, ["a/b", "a", "."]);
    assert!(root.path().join("a/b/c").is_dir());
    synced.clear();
    let mut record = |_: &cap_std::fs::Dir, folder: &std::path::Path| {
        synced.push(folder.to_string_lossy().into_owned());
        Ok(())
    };
    super::open_or_create_folder(&dir, std::path::Path::new("a/b"), "a/b/x", &mut record).unwrap();
    assert!(synced.is_empty());
}

/// A file nobody may write (`chmod a-w`) is how its owner keeps it as it is: a write refuses it,
/// as a caller error, whoever runs the workspace (root too, who could rename over it), and the
/// file keeps its content and mode; no temp file is left.
#[tokio::test]
async fn a_read_only_file_is_not_replaced() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("keep.txt");
    std::fs::write(&file, "kept").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let error = ws.write("keep.txt", "changed").await.unwrap_err();
    assert!(
        matches!(&error, WorkspaceError::ReadOnly { path } if path == "keep.txt"),
        "{error:?}"
    );
    assert!(error.is_caller_error());
    assert_eq!(error.to_string(), "the file is read-only");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o444, "{mode:o}");
    assert_eq!(names_on_disk(root.path()), ["keep.txt"]);
    // One writable by anybody is replaced, as before.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    ws.write("keep.txt", "changed").await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "changed");
}

/// A workspace whose root is or holds a procfs (`/proc`, or a folder a procfs is mounted in)
/// does not read its files: `<pid>/environ` holds this process's environment, API keys
/// included. They are refused as not regular files, though the kernel calls them regular, and
/// nothing of them is read.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn files_of_a_procfs_inside_the_root_are_not_read() {
    let ws = FsWorkspace::new("/proc").unwrap();
    let pid = std::process::id();
    for path in [format!("{pid}/environ"), format!("{pid}/status")] {
        // What was read is not shown: it is the environment.
        let result = read_both(&ws, &path).await;
        assert!(
            matches!(result, Err(WorkspaceError::NotAFile { .. })),
            "{path}: {:?}",
            result.as_ref().err()
        );
    }
}

/// A write whose folder is reached through a symlink that leads nowhere inside the root cannot
/// create that folder: the path is the caller's mistake, said as such (it was the workspace's
/// `Io` failure, "entity already exists", counted against the tool's health), and nothing is
/// created where the link points.
#[tokio::test]
async fn a_write_through_a_broken_link_is_a_caller_error() {
    let root = tempfile::tempdir().unwrap();
    symlink("nowhere", root.path().join("broken")).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    for path in ["broken/x.txt", "broken/sub/x.txt"] {
        let error = ws.write(path, "x").await.unwrap_err();
        assert!(error.is_caller_error(), "{path}: {error:?}");
        assert_eq!(
            error.to_string(),
            "a part of the path is not a folder",
            "{path}"
        );
    }
    assert_eq!(names_on_disk(root.path()), ["broken"]);
}

/// A path that ends in `/` (or `/.`) names a folder: reading or writing it as a file is refused
/// saying so. It used to lose its last `/`: `notes/` was written as a file `notes`, and `a.txt/`
/// read `a.txt`.
#[tokio::test]
async fn a_file_path_ending_in_a_slash_is_refused() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "a").unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let cases: Vec<(&str, Result<(), WorkspaceError>)> = vec![
        ("write notes/", ws.write("notes/", "x").await),
        ("write notes/.", ws.write("notes/.", "x").await),
        ("write sub/notes//", ws.write("sub/notes//", "x").await),
        ("write a.txt/", ws.write("a.txt/", "x").await),
        ("read a.txt/", read_both(&ws, "a.txt/").await.map(drop)),
        ("read a.txt/.", read_both(&ws, "a.txt/.").await.map(drop)),
    ];
    for (case, result) in cases {
        let error = result.unwrap_err();
        assert!(error.is_caller_error(), "{case}: {error:?}");
        assert_eq!(
            error.to_string(),
            "the path is not a valid workspace path: a file's path cannot end in `/`",
            "{case}"
        );
    }
    assert_eq!(names_on_disk(root.path()), ["a.txt"]);
    assert_eq!(
        std::fs::read_to_string(root.path().join("a.txt")).unwrap(),
        "a"
    );
    // A path that leaves the root is refused for that first.
    for path in ["../x/", "/etc/"] {
        let result = ws.write(path, "x").await;
        assert!(
            matches!(result, Err(WorkspaceError::OutsideRoot { .. })),
            "{path}: {result:?}"
        );
    }
}

/// A read looks at what a path leads to before it opens anything, and opens only a regular
/// file: opening a device can act (a serial line's DTR drops, resetting what hangs on it; a
/// watchdog starts; a tape rewinds), and opening a pipe lets a writer waiting for a reader go
/// on. The kernel's inotify reports every open of the pipe, through a link to it too.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_read_never_opens_a_pipe() {
    use rustix::fs::inotify;
    let root = tempfile::tempdir().unwrap();
    mkfifo(&root.path().join("pipe"));
    symlink("pipe", root.path().join("link")).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let watcher =
        inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(
        &watcher,
        root.path().join("pipe"),
        inotify::WatchFlags::OPEN,
    )
    .unwrap();
    for path in ["pipe", "link"] {
        let result = read_both(&ws, path).await;
        assert!(
            matches!(result, Err(WorkspaceError::NotAFile { .. })),
            "{path}: {result:?}"
        );
    }
    let mut buffer = [std::mem::MaybeUninit::uninit(); 1024];
    let mut events = inotify::Reader::new(&watcher, &mut buffer);
    let opened = events.next().map(|event| event.events());
    assert_eq!(opened, Err(rustix::io::Errno::AGAIN), "the pipe was opened");
}

/// A listing describes a symlink that stays inside the root by what it leads to, as a read or a
/// listing of it resolves it: a link to a folder is a folder (it was a file whose size was the
/// length of the link's text, which a read then called a folder), a link to a file has that
/// file's size. A link that leads out of the root, or nowhere, is shown as itself, and nothing
/// outside is looked at.
#[tokio::test]
async fn a_listing_shows_links_inside_the_root_as_what_they_lead_to() {
    let (root, _outside, ws) = setup();
    std::fs::create_dir(root.path().join("docs")).unwrap();
    std::fs::write(root.path().join("docs/a.txt"), "0123456789ab").unwrap();
    symlink("docs", root.path().join("docs-link")).unwrap();
    symlink("docs/a.txt", root.path().join("a-link")).unwrap();
    symlink("nowhere", root.path().join("broken")).unwrap();
    let entries = ws.list("").await.unwrap().entries;
    let shown: Vec<(&str, bool, u64)> = entries
        .iter()
        .map(|e| (e.path.as_str(), e.is_dir, e.size))
        .collect();
    let outside_len = std::fs::read_link(root.path().join("link.txt"))
        .unwrap()
        .as_os_str()
        .len() as u64;
    let outside_dir_len = std::fs::read_link(root.path().join("linkdir"))
        .unwrap()
        .as_os_str()
        .len() as u64;
    assert_eq!(
        shown,
        [
            ("a-link", false, 12),
            ("broken", false, 7),
            ("docs", true, 0),
            ("docs-link", true, 0),
            ("link.txt", false, outside_len),
            ("linkdir", false, outside_dir_len),
        ]
    );
    assert!(ws.list("docs-link").await.is_ok());
}

/// A root holding what hides keys: `.env`, `.git/config`, `sub/.npmrc`, and symlinks that lead
/// to them from visible names.
fn with_hidden_entries() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let path = root.path();
    std::fs::write(path.join(".env"), "OPENAI_API_KEY=sk-CANARY-env").unwrap();
    std::fs::create_dir_all(path.join(".git/hooks")).unwrap();
    std::fs::write(
        path.join(".git/config"),
        "url = https://x:ghp_CANARY@github.com/o/r",
    )
    .unwrap();
    std::fs::create_dir(path.join("sub")).unwrap();
    std::fs::write(path.join("sub/.npmrc"), "//registry/:_authToken=CANARY").unwrap();
    std::fs::write(path.join("notes.txt"), "notes").unwrap();
    symlink(".env", path.join("env-link")).unwrap();
    symlink(".git", path.join("gitdir")).unwrap();
    symlink("../.git/config", path.join("sub/up")).unwrap();
    symlink("gitdir", path.join("twice")).unwrap();
    root
}

/// By default a hidden entry is not there for the model: listings leave it out (a symlink to
/// one is shown as itself, not as what it leads to), and a read, a write or a listing of it,
/// by its name or through a symlink inside the root, is refused as `Hidden`, a caller error whose
/// message names the rule and neither the path nor the file.
#[tokio::test]
async fn hidden_entries_are_not_there_by_default() {
    let root = with_hidden_entries();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let listing = ws.list("").await.unwrap();
    let paths: Vec<_> = listing.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["env-link", "gitdir", "notes.txt", "sub", "twice"]);
    let gitdir = &listing.entries[1];
    assert!(
        !gitdir.is_dir,
        "a link to a hidden folder is shown as itself"
    );
    let sub: Vec<_> = ws.list("sub").await.unwrap().entries;
    assert_eq!(
        sub.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(),
        ["sub/up"]
    );
    for path in [
        ".env",
        "./.env",
        ".git/config",
        "sub/.npmrc",
        "env-link",
        "gitdir/config",
        "twice/config",
        "sub/up",
    ] {
        let error = read_both(&ws, path).await.unwrap_err();
        assert_eq!(
            error,
            WorkspaceError::Hidden { path: path.into() },
            "read {path}"
        );
        assert!(error.is_caller_error());
        let message = error.to_string();
        assert!(message.contains("hidden entry (a name starting with `.`)"));
        assert!(
            !message.contains("CANARY") && !message.contains(path),
            "{message}"
        );
    }
    for path in [".git", "gitdir", "twice", ".git/hooks", "sub/.npmrc"] {
        assert_eq!(
            ws.list(path).await.unwrap_err(),
            WorkspaceError::Hidden { path: path.into() },
            "list {path}"
        );
    }
    for path in [
        ".env",
        ".git/hooks/pre-commit",
        "gitdir/hooks/pre-commit",
        "twice/new",
        "new/.hidden",
        "env-link",
    ] {
        assert_eq!(
            ws.write(path, "x").await.unwrap_err(),
            WorkspaceError::Hidden { path: path.into() },
            "write {path}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(root.path().join(".env")).unwrap(),
        "OPENAI_API_KEY=sk-CANARY-env"
    );
    assert_eq!(
        names_on_disk(&root.path().join(".git/hooks")),
        [] as [&str; 0]
    );
    assert!(!root.path().join("new").exists());
    assert!(root.path().join("env-link").is_symlink());
    // What is not hidden still works.
    assert_eq!(read_both(&ws, "notes.txt").await.unwrap(), "notes");
    ws.write("sub/new.txt", "new").await.unwrap();
}

/// Shown on purpose (`with_hidden(true)`), hidden entries are listed, read and written like any
/// other; the workspace's own temp names (`.cogni-write-…`) stay refused to reads and writes,
/// and out of listings.
#[tokio::test]
async fn hidden_entries_can_be_shown_but_temp_names_stay_refused() {
    let root = with_hidden_entries();
    std::fs::write(root.path().join(".cogni-write-1-0.tmp"), "in flight").unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap().with_hidden(true);
    let listing = ws.list("").await.unwrap();
    let paths: Vec<_> = listing.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            ".env",
            ".git",
            "env-link",
            "gitdir",
            "notes.txt",
            "sub",
            "twice"
        ]
    );
    assert!(
        listing.entries[3].is_dir,
        "a link to a folder is shown as one"
    );
    assert_eq!(
        read_both(&ws, "env-link").await.unwrap(),
        "OPENAI_API_KEY=sk-CANARY-env"
    );
    assert!(
        read_both(&ws, "twice/config")
            .await
            .unwrap()
            .contains("CANARY")
    );
    ws.write(".config/app.toml", "x").await.unwrap();
    assert_eq!(read_both(&ws, ".config/app.toml").await.unwrap(), "x");
    let hidden_off = FsWorkspace::new(root.path()).unwrap();
    for ws in [&ws, &hidden_off] {
        for path in [".cogni-write-1-0.tmp", "sub/.cogni-write-9-9.tmp"] {
            for error in [
                read_both(ws, path).await.unwrap_err(),
                ws.write(path, "x").await.unwrap_err(),
            ] {
                assert!(
                    matches!(
                        &error,
                        WorkspaceError::InvalidPath { path: p, .. } if p == path
                    ),
                    "{path}: {error:?}"
                );
                assert!(error.to_string().contains("the workspace's own temp files"));
            }
        }
    }
    assert_eq!(
        std::fs::read_to_string(root.path().join(".cogni-write-1-0.tmp")).unwrap(),
        "in flight"
    );
    assert!(!root.path().join("sub/.cogni-write-9-9.tmp").exists());
}

/// The may-write check of a replacement does not open the old file for writing: a file watcher
/// on it sees no write (no `IN_CLOSE_WRITE`, which tools take as "the file was saved"); the
/// rename alone replaces it. The check asks the kernel's access check instead.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_write_never_opens_the_old_file_for_writing() {
    use rustix::fs::inotify;
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("watched.txt");
    std::fs::write(&file, "old").unwrap();
    let watcher = inotify::init(inotify::CreateFlags::NONBLOCK).unwrap();
    inotify::add_watch(
        &watcher,
        &file,
        inotify::WatchFlags::CLOSE_WRITE | inotify::WatchFlags::MODIFY,
    )
    .unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    ws.write("watched.txt", "new").await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
    let mut buffer = [std::mem::MaybeUninit::uninit(); 1024];
    let mut events = inotify::Reader::new(&watcher, &mut buffer);
    loop {
        match events.next() {
            Ok(event) => assert!(
                !event
                    .events()
                    .intersects(inotify::ReadFlags::CLOSE_WRITE | inotify::ReadFlags::MODIFY),
                "{:?}",
                event.events()
            ),
            Err(rustix::io::Errno::WOULDBLOCK) => break,
            Err(e) => panic!("{e}"),
        }
    }
}

/// Whether the tests run as root: a new file is owned by the effective user.
fn running_as_root(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let probe = dir.join("probe-owner");
    std::fs::write(&probe, "").unwrap();
    let root = std::fs::metadata(&probe).unwrap().uid() == 0;
    std::fs::remove_file(&probe).unwrap();
    root
}

/// Sets the extended attribute `name` of `file` to `value`; `false` (after printing why) when
/// the file system of the temp folder does not take it.
#[cfg(target_os = "linux")]
fn set_xattr(file: &std::path::Path, name: &str, value: &[u8]) -> bool {
    match rustix::fs::setxattr(file, name, value, rustix::fs::XattrFlags::empty()) {
        Ok(()) => true,
        Err(rustix::io::Errno::NOTSUP) => {
            println!("skipped: the temp folder's file system does not take {name} attributes");
            false
        }
        Err(e) => panic!("setxattr {name}: {e}"),
    }
}

/// The value of the extended attribute `name` of `file`, if it has one.
#[cfg(target_os = "linux")]
fn xattr(file: &std::path::Path, name: &str) -> Option<Vec<u8>> {
    let mut value = vec![0; 64 * 1024];
    match rustix::fs::getxattr(file, name, &mut value[..]) {
        Ok(len) => Some(value[..len].to_vec()),
        Err(rustix::io::Errno::NODATA) => None,
        Err(e) => panic!("getxattr {name}: {e}"),
    }
}

/// A write keeps the extended attributes of the file it replaces (a `user.` one here; a
/// tagging tool's, a backup tool's, a desktop's), as an edit in place would: the rename put a
/// new file without them in its place.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_write_keeps_the_extended_attributes() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("tagged.txt");
    std::fs::write(&file, "old").unwrap();
    if !set_xattr(&file, "user.cogni.tag", b"kept") {
        return;
    }
    let ws = FsWorkspace::new(root.path()).unwrap();
    ws.write("tagged.txt", "new").await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
    assert_eq!(
        xattr(&file, "user.cogni.tag").as_deref(),
        Some(&b"kept"[..])
    );
}

/// A POSIX ACL in its extended attribute's form (version 2): `(tag, permissions, id)` entries,
/// in the kernel's order.
#[cfg(target_os = "linux")]
fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut bytes = 2u32.to_le_bytes().to_vec();
    for (tag, permissions, id) in entries {
        bytes.extend(tag.to_le_bytes());
        bytes.extend(permissions.to_le_bytes());
        bytes.extend(id.to_le_bytes());
    }
    bytes
}

/// A write keeps the POSIX ACL of the file it replaces (here one that grants another user
/// read access and its group less than its mask), and a new file does not keep an ACL it
/// inherited from its folder's default when the old file had none: that ACL would grant a
/// user the old file did not.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_write_keeps_the_acl_and_takes_none_the_old_file_lacked() {
    use std::os::unix::fs::PermissionsExt;
    const UNDEFINED: u32 = u32::MAX;
    let (user_obj, user, group_obj, mask, other) = (0x01, 0x02, 0x04, 0x10, 0x20);
    let root = tempfile::tempdir().unwrap();
    let shared = root.path().join("shared.txt");
    std::fs::write(&shared, "old").unwrap();
    let access = acl(&[
        (user_obj, 6, UNDEFINED),
        (user, 4, 4242),
        (group_obj, 0, UNDEFINED),
        (mask, 4, UNDEFINED),
        (other, 0, UNDEFINED),
    ]);
    if !set_xattr(&shared, "system.posix_acl_access", &access) {
        return;
    }
    let ws = FsWorkspace::new(root.path()).unwrap();
    ws.write("shared.txt", "new").await.unwrap();
    assert_eq!(std::fs::read_to_string(&shared).unwrap(), "new");
    assert_eq!(
        xattr(&shared, "system.posix_acl_access").as_deref(),
        Some(&access[..])
    );
    let mode = std::fs::metadata(&shared).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640, "{mode:o}");

    // A file without an ACL in a folder whose default ACL grants user 4242 everything.
    let private = root.path().join("private.txt");
    std::fs::write(&private, "old").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o640)).unwrap();
    let default = acl(&[
        (user_obj, 7, UNDEFINED),
        (user, 7, 4242),
        (group_obj, 7, UNDEFINED),
        (mask, 7, UNDEFINED),
        (other, 0, UNDEFINED),
    ]);
    assert!(set_xattr(root.path(), "system.posix_acl_default", &default));
    ws.write("private.txt", "new").await.unwrap();
    assert_eq!(std::fs::read_to_string(&private).unwrap(), "new");
    assert_eq!(xattr(&private, "system.posix_acl_access"), None);
    let mode = std::fs::metadata(&private).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640, "{mode:o}");
}

/// A group other than the one a new file of this process gets, that this process may give a
/// file: any as root, else one of its supplementary groups (from `/proc/self/status`).
fn another_group(dir: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let probe = dir.join("probe-group");
    std::fs::write(&probe, "").unwrap();
    let own = std::fs::metadata(&probe).unwrap().gid();
    std::fs::remove_file(&probe).unwrap();
    if running_as_root(dir) {
        return Some(if own == 4343 { 4344 } else { 4343 });
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let groups = status
        .lines()
        .find_map(|line| line.strip_prefix("Groups:"))?;
    groups
        .split_whitespace()
        .filter_map(|group| group.parse().ok())
        .find(|&group| group != own)
}

/// A write keeps the group of the file it replaces when this process may give it (one of its
/// groups, or any as root): the new file was the writer's group's, so the file's group bits
/// went to other people.
#[tokio::test]
async fn a_write_keeps_the_group() {
    use std::os::unix::fs::MetadataExt;
    let root = tempfile::tempdir().unwrap();
    let Some(group) = another_group(root.path()) else {
        println!("skipped: this process has no second group to give a file");
        return;
    };
    let file = root.path().join("team.txt");
    std::fs::write(&file, "old").unwrap();
    std::os::unix::fs::chown(&file, None, Some(group)).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    ws.write("team.txt", "new").await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
    assert_eq!(std::fs::metadata(&file).unwrap().gid(), group);
}

/// Run as root (as in many containers), a write keeps another user's file theirs, owner and
/// group: the new file was root's, out of its owner's hands. File capabilities are not kept:
/// new content never runs with them, as it never keeps set-ID bits (the workspace leaves them
/// out, and the kernel drops them when the content is written).
#[tokio::test]
async fn as_root_a_write_keeps_another_users_file_theirs() {
    use std::os::unix::fs::MetadataExt;
    let root = tempfile::tempdir().unwrap();
    if !running_as_root(root.path()) {
        println!("skipped: only root may give a file to another user");
        return;
    }
    let file = root.path().join("theirs.sh");
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    std::os::unix::fs::chown(&file, Some(4242), Some(4343)).unwrap();
    // `cap_net_raw` permitted and effective (revision 2, 20 bytes), as `setcap` writes it.
    #[cfg(target_os = "linux")]
    let capability = {
        let mut value = (0x0200_0000u32 | 1).to_le_bytes().to_vec();
        for word in [1u32 << 13, 0, 0, 0] {
            value.extend(word.to_le_bytes());
        }
        set_xattr(&file, "security.capability", &value)
    };
    let ws = FsWorkspace::new(root.path()).unwrap();
    ws.write("theirs.sh", "#!/bin/sh\nid\n").await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "#!/bin/sh\nid\n");
    let metadata = std::fs::metadata(&file).unwrap();
    assert_eq!((metadata.uid(), metadata.gid()), (4242, 4343));
    #[cfg(target_os = "linux")]
    if capability {
        assert_eq!(xattr(&file, "security.capability"), None);
    }
}

/// A file this process may write but not read is not replaced: what its replacement must keep
/// (its ACL, its attributes) cannot be read, so the write is refused as read-only and the file
/// stays as it is.
#[tokio::test]
async fn a_file_that_may_be_written_but_not_read_is_not_replaced() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    if running_as_root(root.path()) {
        println!("skipped: root reads any file");
        return;
    }
    let file = root.path().join("drop-box.txt");
    std::fs::write(&file, "old").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o200)).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let error = ws.write("drop-box.txt", "new").await.unwrap_err();
    assert!(
        matches!(error, WorkspaceError::ReadOnly { .. }),
        "{error:?}"
    );
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "old");
    assert_eq!(names_on_disk(root.path()), ["drop-box.txt"]);
}

/// An append-only file (`chattr +a`) passes the access check (it may be written, by
/// appending) but the kernel refuses to replace it at the rename: the write is refused as
/// read-only, not an IO failure, and the file stays as it is with no temp file left. Another
/// user's file in a sticky folder fails the same way (`EPERM` at the rename), but only for a
/// process that is not root, so that case is not run here.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn an_append_only_file_is_refused_as_read_only() {
    use rustix::fs::IFlags;
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("log.txt");
    std::fs::write(&file, "old").unwrap();
    let set = |flags: IFlags| {
        let handle = std::fs::File::open(&file).unwrap();
        rustix::fs::ioctl_setflags(&handle, flags)
    };
    let flags = rustix::fs::ioctl_getflags(std::fs::File::open(&file).unwrap());
    let Ok(flags) = flags else {
        println!("skipped: the temp folder's file system has no inode flags");
        return;
    };
    if let Err(error) = set(flags | IFlags::APPEND) {
        println!("skipped: cannot make a file append-only here ({error})");
        return;
    }
    let ws = FsWorkspace::new(root.path()).unwrap();
    let result = ws.write("log.txt", "new").await;
    set(flags).unwrap();
    let error = result.unwrap_err();
    assert!(
        matches!(error, WorkspaceError::ReadOnly { .. }),
        "{error:?}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "old");
    assert_eq!(names_on_disk(root.path()), ["log.txt"]);
}

/// `EPERM` from the kernel's access check is not read as a refusal but told by an open: a
/// seccomp profile that predates `faccessat2` (Docker's before 20.10) answers every call of it
/// `EPERM`, and every existing file of the workspace was refused as read-only there. A refusal
/// of the check itself still says no, and a kernel without the check is asked by an open.
#[test]
fn an_eperm_from_the_access_check_is_told_by_an_open() {
    use rustix::io::Errno;
    assert_eq!(super::access_answer(Err(Errno::PERM)), None);
    assert_eq!(super::access_answer(Err(Errno::NOSYS)), None);
    assert_eq!(super::access_answer(Err(Errno::ACCESS)), Some(false));
    assert_eq!(super::access_answer(Err(Errno::ROFS)), Some(false));
    assert_eq!(super::access_answer(Err(Errno::NOENT)), Some(true));
    assert_eq!(super::access_answer(Ok(())), Some(true));
}

/// The sync of a folder a write created opens that folder by its name again, where a process
/// racing in the workspace may have put a pipe or a device meanwhile: it is opened only as a
/// folder, so a pipe is never opened (with no writer the open blocked the write's thread
/// forever; a device's open can act). The kernel's inotify reports every open of the pipe; a
/// writer is held on it so that an open, before the fix, returned rather than hung.
#[cfg(target_os = "linux")]
#[test]
fn a_folder_sync_never_opens_a_pipe_swapped_in() {
    use rustix::fs::inotify;
    let root = tempfile::tempdir().unwrap();
    mkfifo(&root.path().join("pipe"));
    let _writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(root.path().join("pipe"))
        .unwrap();
    let dir =
        cap_std::fs::Dir::open_ambient_dir(root.path(), cap_std::ambient_authority()).unwrap();
    let watcher =
        inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(
        &watcher,
        root.path().join("pipe"),
        inotify::WatchFlags::OPEN,
    )
    .unwrap();
    assert!(super::sync_folder(&dir, std::path::Path::new("pipe")).is_err());
    let mut buffer = [std::mem::MaybeUninit::uninit(); 1024];
    let mut events = inotify::Reader::new(&watcher, &mut buffer);
    let opened = events.next().map(|event| event.events());
    assert_eq!(opened, Err(rustix::io::Errno::AGAIN), "the pipe was opened");
}

/// A write that fails after it made the folders its path needs leaves none of them behind:
/// a name too long for the file system (found only once the folders exist, or by their
/// creation on the way), and a write dropped at its commit. The folders that were there before
/// stay, and so does a made one that holds something else by then.
#[test]
fn a_failed_write_removes_the_folders_it_made() {
    use std::future::Future;
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("old")).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let long = format!("old/new/deeper/{}", "a".repeat(300));
    let result = runtime.block_on(ws.write(&long, "x"));
    assert!(
        matches!(result, Err(WorkspaceError::InvalidPath { .. })),
        "{result:?}"
    );
    assert!(names_on_disk(&root.path().join("old")).is_empty());
    // The creation of the folders fails on the way, at the long name.
    let long = format!("old/new/{}/a.txt", "a".repeat(300));
    let result = runtime.block_on(ws.write(&long, "x"));
    assert!(
        matches!(result, Err(WorkspaceError::InvalidPath { .. })),
        "{result:?}"
    );
    assert!(names_on_disk(&root.path().join("old")).is_empty());
    let (ws, reached, go) = held_before_commit(root.path());
    runtime.block_on(async {
        let mut write = Box::pin(ws.write("new/sub/a.txt", "new"));
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(write.as_mut().poll(cx)));
        assert!(first.await.is_pending());
        reached.recv().unwrap();
        // Something else lands in `new` meanwhile: that folder stays.
        std::fs::write(root.path().join("new/b.txt"), "b").unwrap();
        drop(write);
        go.send(()).unwrap();
    });
    drop(runtime);
    assert_eq!(names_on_disk(root.path()), ["new", "old"]);
    assert_eq!(names_on_disk(&root.path().join("new")), ["b.txt"]);
}

/// One write makes at most `MAX_NEW_FOLDERS` folders: a path needing more is refused before
/// any is made, as the caller's mistake naming the limit, never the path. Each folder made is
/// synced into its parent, so a path of 2,000 new folders (4 KiB, well within the arguments'
/// bound) held a blocking thread for seconds, past the call's timeout. Folders that exist do not
/// count, so a deeper file is written in steps.
#[tokio::test]
async fn a_write_makes_at_most_so_many_folders() {
    let root = tempfile::tempdir().unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let deep = |folders: usize| format!("{}a.txt", "d/".repeat(folders));
    let path = deep(super::MAX_NEW_FOLDERS + 1);
    let error = ws.write(&path, "x").await.unwrap_err();
    assert!(
        matches!(&error, WorkspaceError::InvalidPath { path: p, .. } if *p == path),
        "{error:?}"
    );
    assert!(error.is_caller_error());
    let message = error.to_string();
    assert!(
        message.contains(&format!("more than {} new folders", super::MAX_NEW_FOLDERS)),
        "{message}"
    );
    assert!(!message.contains("d/d"), "{message}");
    assert!(names_on_disk(root.path()).is_empty());
    ws.write(&deep(super::MAX_NEW_FOLDERS), "x").await.unwrap();
    ws.write(&path, "x").await.unwrap();
}

/// The temp names are refused in any case (`.COGNI-WRITE-…`): on a file system that ignores
/// case (macOS by default, an ext4 or tmpfs folder with casefolding on) that name opens a
/// write's temp file, whose content is a write in flight. They were refused only as written.
#[test]
fn temp_names_are_refused_in_any_case() {
    use super::{Refused, refused_name};
    for name in [
        ".cogni-write-1-0.tmp",
        ".COGNI-WRITE-1-0.tmp",
        ".Cogni-Write-1-0.tmp",
    ] {
        assert!(
            matches!(
                refused_name(std::ffi::OsStr::new(name), true),
                Some(Refused::TempName)
            ),
            "{name}"
        );
    }
    assert!(refused_name(std::ffi::OsStr::new(".cogni-writer"), true).is_none());
}

/// Only a walk's lookup that says the path cannot be reached (a name missing, a file where a
/// folder should be) leaves the names left to be judged as written; any other refuses the path,
/// in the words the call's own failure would have, never quoting it.
#[test]
fn only_a_path_that_cannot_be_reached_ends_a_walk() {
    use rustix::io::Errno;
    use std::io::{Error, ErrorKind};
    for errno in [Errno::NOENT, Errno::NOTDIR] {
        assert!(super::ends_the_walk(&errno.into()), "{errno:?}");
    }
    let escape = Error::new(ErrorKind::PermissionDenied, "a path led outside");
    assert!(!super::ends_the_walk(&escape));
    for errno in [
        Errno::MFILE,
        Errno::NFILE,
        Errno::NOMEM,
        Errno::INTR,
        Errno::IO,
        Errno::AGAIN,
        Errno::ACCESS,
        Errno::LOOP,
        Errno::NAMETOOLONG,
    ] {
        assert!(!super::ends_the_walk(&errno.into()), "{errno:?}");
    }
    let error = super::Refused::Unwalked(Errno::MFILE.into()).error("sub/link");
    assert!(
        matches!(&error, WorkspaceError::Io { path, .. } if path == "sub/link"),
        "{error:?}"
    );
    assert!(!error.to_string().contains("sub/link"), "{error}");
    assert_eq!(
        super::Refused::Unwalked(Errno::LOOP.into()).error("l"),
        WorkspaceError::InvalidPath {
            path: "l".into(),
            reason: "it leads through too many symlinks",
        }
    );
}

/// The app's own files inside the root (its config file, written or not yet, its policy file,
/// its data folder) are out of reach: reads, writes and listings of them, through symlinks
/// inside the root, or by a name in another case, are refused as `Reserved` without naming the
/// path, listings leave them out, and nothing is written; the rest of the root works as before.
#[tokio::test]
async fn the_apps_own_files_are_out_of_reach() {
    let root = tempfile::tempdir().unwrap();
    let at = |name: &str| root.path().join(name);
    std::fs::write(at("cogni.toml"), "[llm]").unwrap();
    std::fs::create_dir_all(at("conf")).unwrap();
    std::fs::write(at("conf/policy.toml"), "allowed_tools = []").unwrap();
    std::fs::create_dir_all(at("data/blobs")).unwrap();
    std::fs::write(at("data/cogni.db"), "runs").unwrap();
    std::fs::write(at("notes.txt"), "hi").unwrap();
    symlink("cogni.toml", at("link.toml")).unwrap();
    symlink("data", at("store")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap().with_reserved([
        at("cogni.toml"),
        at("conf/../conf/policy.toml"),
        at("data"),
        at("next/cogni.toml"),
        outside.path().join("cogni.toml"),
    ]);
    let reserved = |path: &str| WorkspaceError::Reserved { path: path.into() };
    for path in [
        "cogni.toml",
        "COGNI.TOML",
        "./cogni.toml",
        "link.toml",
        "conf/policy.toml",
        "data/cogni.db",
        "store/cogni.db",
        "next/cogni.toml",
    ] {
        assert_eq!(ws.read(path).await, Err(reserved(path)), "{path}");
        assert_eq!(
            ws.read_part(path, 0, 4).await,
            Err(reserved(path)),
            "{path}"
        );
        assert_eq!(ws.write(path, "x").await, Err(reserved(path)), "{path}");
    }
    for path in ["data", "store", "data/blobs", "DATA"] {
        assert_eq!(ws.list(path).await, Err(reserved(path)), "{path}");
    }
    let error = ws.read("cogni.toml").await.unwrap_err();
    assert!(error.is_caller_error());
    assert!(!error.to_string().contains("cogni.toml"), "{error}");
    assert_eq!(std::fs::read_to_string(at("cogni.toml")).unwrap(), "[llm]");
    assert!(!at("next").exists());
    let listed: Vec<_> = ws.list(".").await.unwrap().entries;
    let names: Vec<_> = listed.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(names, ["conf", "link.toml", "notes.txt", "store"]);
    assert!(ws.list("conf").await.unwrap().entries.is_empty());
    assert_eq!(ws.read("notes.txt").await.unwrap(), "hi");
    ws.write("conf/other.toml", "x").await.unwrap();
}

/// A reserved path whose names do not all exist yet is placed where the next start's open
/// finds it once they are made: a `..` after a missing folder climbs back from it
/// (`missing/../cogni.toml` is `cogni.toml`, and the rest is resolved again from there, its
/// symlinks followed), and a symlink that leads nowhere yet leads where its target will be.
/// Such paths were left unreserved: a write could make `missing/` and then the file.
#[tokio::test]
async fn a_reserved_path_through_names_not_made_yet_is_placed_as_it_will_resolve() {
    let root = tempfile::tempdir().unwrap();
    let at = |name: &str| root.path().join(name);
    std::fs::create_dir(at("data")).unwrap();
    symlink("data", at("store")).unwrap();
    symlink("later", at("pending")).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap().with_reserved([
        at("missing/../cogni.toml"),
        at("gone/deeper/../../store"),
        at("pending/policy.toml"),
    ]);
    let reserved = |path: &str| WorkspaceError::Reserved { path: path.into() };
    ws.write("missing/notes.txt", "x").await.unwrap();
    for path in ["cogni.toml", "data/cogni.db", "later/policy.toml"] {
        assert_eq!(ws.write(path, "x").await, Err(reserved(path)), "{path}");
    }
    assert!(!at("cogni.toml").exists() && !at("later").exists());
    assert!(names_on_disk(&at("data")).is_empty());
}

/// A folder the root lies in is found where it will be made: `missing/..` is the folder
/// `missing` is made in, and names are compared ignoring ASCII case; a folder beside the root,
/// or inside it, holds no root.
#[test]
fn the_root_lies_in_a_folder_placed_as_it_will_be_made() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("app");
    std::fs::create_dir(&root).unwrap();
    let ws = FsWorkspace::new(&root).unwrap();
    for folder in [
        "app",
        "APP",
        "app/missing/..",
        "app/missing/deeper/../../..",
        ".",
    ] {
        assert!(ws.lies_in(parent.path().join(folder)), "{folder}");
    }
    for folder in [
        "app/missing",
        "app/missing/../data",
        "other",
        "missing/../app2",
    ] {
        assert!(!ws.lies_in(parent.path().join(folder)), "{folder}");
    }
    assert!(!root.join("missing").exists());
}

/// A reserved path is placed in the root with its names compared ignoring ASCII case, as it is
/// then matched: on a file system that ignores case, `/srv/APP/cogni.toml` is the root
/// `/srv/app`'s `cogni.toml`, though resolving it keeps the case it was given. It was dropped as
/// outside the root, and the file read.
#[tokio::test]
async fn a_reserved_path_given_in_another_case_is_inside_the_root() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("app");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("cogni.toml"), "[llm]").unwrap();
    let ws = FsWorkspace::new(&root)
        .unwrap()
        .with_reserved([parent.path().join("APP/cogni.toml")]);
    assert_eq!(
        ws.read("cogni.toml").await,
        Err(WorkspaceError::Reserved {
            path: "cogni.toml".into()
        })
    );
}

/// A path the process may not use (`EACCES`, `EPERM`: root cannot meet them by `chmod`, so the
/// kernel's answers are given directly) is the caller's `PermissionDenied`, not the workspace
/// failing, whether the call or the walk before it meets the refusal; never naming the path.
#[test]
fn a_path_the_process_may_not_use_is_the_callers_error() {
    use rustix::io::Errno;
    for errno in [Errno::ACCESS, Errno::PERM] {
        for error in [
            super::io_error("secret-CANARY", &errno.into()),
            super::Refused::Unwalked(errno.into()).error("secret-CANARY"),
        ] {
            assert_eq!(
                error,
                WorkspaceError::PermissionDenied {
                    path: "secret-CANARY".into()
                },
                "{errno:?}"
            );
            assert!(error.is_caller_error(), "{errno:?}");
            assert_eq!(
                error.to_string(),
                "permission denied: this process may not use the path"
            );
        }
    }
}

/// A file over the read cap, which a whole read refuses, is read in parts: each part holds at
/// most what was asked for and at most the cap, says whether more follow, and gives the file's
/// size; from the end, or past it however far, a part is empty.
#[tokio::test]
async fn a_file_over_the_read_cap_is_read_in_parts() {
    let root = tempfile::tempdir().unwrap();
    let text = "0123456789".repeat(10);
    std::fs::write(root.path().join("big.txt"), &text).unwrap();
    let ws = FsWorkspace::new(root.path())
        .unwrap()
        .with_max_read_bytes(10);
    assert!(matches!(
        ws.read("big.txt").await,
        Err(WorkspaceError::TooLarge { size: 100, .. })
    ));
    for (offset, max_bytes, bytes, more) in [
        (0, 4, "0123", true),
        (0, 100, "0123456789", true),
        (95, 4, "5678", true),
        (95, 10, "56789", false),
        (90, usize::MAX, "0123456789", false),
        (100, 4, "", false),
        (101, 4, "", false),
        (1 << 50, 4, "", false),
        (i64::MAX as u64, 4, "", false),
        (u64::MAX, 4, "", false),
        (3, 0, "", true),
    ] {
        let part = ws.read_part("big.txt", offset, max_bytes).await.unwrap();
        let case = format!("{offset} {max_bytes}");
        assert_eq!(String::from_utf8(part.bytes).unwrap(), bytes, "{case}");
        assert_eq!(part.more, more, "{case}");
        assert_eq!(part.size, 100, "{case}");
    }
}

/// A part costs what it holds, not the file: the last bytes of a sparse file of a terabyte,
/// which no whole read may hold, are read at once.
#[tokio::test]
async fn a_part_of_a_huge_sparse_file_reads_only_the_part() {
    let root = tempfile::tempdir().unwrap();
    let file = std::fs::File::create(root.path().join("huge.txt")).unwrap();
    file.set_len(1 << 40).unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let part = ws.read_part("huge.txt", (1 << 40) - 3, 10).await.unwrap();
    assert_eq!(
        part,
        ai_core::FilePart {
            bytes: vec![0; 3],
            more: false,
            size: 1 << 40,
        }
    );
    let part = ws.read_part("huge.txt", 0, 8).await.unwrap();
    assert_eq!((part.bytes, part.more), (vec![0; 8], true));
}

/// Whether more follow is found by reading on, not from the size the file stated: a file that
/// grew since says more, one that shrank says none; the stated size reserves a bounded buffer.
#[test]
fn whether_more_follow_is_read_not_stated() {
    let grown = std::io::Cursor::new(b"hello world".to_vec());
    assert_eq!(
        super::read_part(grown, 5, 0, 5, "p").unwrap(),
        (b"hello".to_vec(), true)
    );
    let shrunk = std::io::Cursor::new(b"hi".to_vec());
    let (bytes, more) = super::read_part(shrunk, 1 << 40, 0, u64::MAX, "p").unwrap();
    assert_eq!((&bytes[..], more), (&b"hi"[..], false));
    assert!(bytes.capacity() <= super::MAX_READ_RESERVE);
    let shrunk = std::io::Cursor::new(b"hi".to_vec());
    assert_eq!(
        super::read_part(shrunk, 100, 50, 5, "p").unwrap(),
        (Vec::new(), false)
    );
}

/// A file as a file system holds it: its bytes, and a seek past `max` (the most the file system
/// lets a file hold, 16 TiB on ext4) refused with `EINVAL`, as `lseek` refuses it.
struct LimitedSeek {
    file: std::io::Cursor<Vec<u8>>,
    max: u64,
}

impl std::io::Read for LimitedSeek {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.file.read(buf)
    }
}

impl std::io::Seek for LimitedSeek {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        match to {
            std::io::SeekFrom::Start(at) if at > self.max => Err(
                std::io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()),
            ),
            to => self.file.seek(to),
        }
    }
}

/// An offset past the end that the file system refuses to seek to (beyond the most a file
/// there can hold) is past the end like any other: no bytes, none after, not an IO failure
/// (which the tool would report as its own failure for the model's offset). A seek refused
/// inside the file stays a failure.
#[test]
fn an_offset_past_what_the_file_system_can_hold_gives_nothing() {
    let file = || LimitedSeek {
        file: std::io::Cursor::new(b"hello".to_vec()),
        max: 1 << 44,
    };
    for offset in [(1 << 44) + 1, 1 << 50, i64::MAX as u64] {
        assert_eq!(
            super::read_part(file(), 5, offset, 4, "p").unwrap(),
            (Vec::new(), false),
            "{offset}"
        );
    }
    let tiny = LimitedSeek {
        file: std::io::Cursor::new(b"hello".to_vec()),
        max: 1,
    };
    assert!(matches!(
        super::read_part(tiny, 5, 3, 4, "p"),
        Err(WorkspaceError::Io { .. })
    ));
}

/// Links planted in the workspace (a cloned repository's) cannot make a call walk for long. A
/// path through 40 links, each climbing out of a tree 600 folders deep and down it again, is
/// one the kernel follows in a few milliseconds; the walk that looks for hidden names walked
/// the path to each name again from the root, millions of names for this one path (a second
/// or so), and a listing of 20 such links took 20 seconds, holding its blocking thread all the
/// while. It now looks each name up in its folder, and refuses a path whose walk would
/// look up more than `MAX_WALK_LOOKUPS` names as leading through too many symlinks; a listing
/// shows such a link as itself. A path 2,000 folders deep, without links, still works.
#[tokio::test]
async fn planted_links_cannot_make_a_walk_long() {
    const DEPTH: usize = 600;
    // `entry` and 39 more: as many as the kernel follows.
    const HOPS: usize = 40;
    let root = tempfile::tempdir().unwrap();
    let down = vec!["d"; DEPTH].join("/");
    let up = vec![".."; DEPTH].join("/");
    let deepest = root.path().join(&down);
    std::fs::create_dir_all(&deepest).unwrap();
    std::fs::write(deepest.join("f.txt"), "reached").unwrap();
    for hop in 1..HOPS {
        let next = match hop + 1 {
            HOPS => "f.txt".to_string(),
            next => format!("l{next}"),
        };
        symlink(
            format!("{up}/{down}/{next}"),
            deepest.join(format!("l{hop}")),
        )
        .unwrap();
    }
    symlink(format!("{down}/l1"), root.path().join("entry")).unwrap();
    assert_eq!(
        std::fs::read_to_string(root.path().join("entry")).unwrap(),
        "reached",
        "the kernel follows the links"
    );
    std::fs::create_dir(root.path().join("many")).unwrap();
    for i in 0..20 {
        symlink("../entry", root.path().join(format!("many/{i:02}"))).unwrap();
    }
    let ws = FsWorkspace::new(root.path()).unwrap();

    let refused = WorkspaceError::InvalidPath {
        path: "entry".into(),
        reason: "it leads through too many symlinks",
    };
    assert_eq!(read_both(&ws, "entry").await, Err(refused));
    let listing = ws.list("many").await.unwrap();
    assert_eq!(listing.entries.len(), 20);
    for entry in &listing.entries {
        // As itself: `../entry` is 8 bytes.
        assert_eq!((entry.is_dir, entry.size), (false, 8), "{entry:?}");
    }

    let deep = format!("{}/x.txt", vec!["b"; 2000].join("/"));
    std::fs::create_dir_all(root.path().join(&deep).parent().unwrap()).unwrap();
    std::fs::write(root.path().join(&deep), "deep").unwrap();
    assert_eq!(read_both(&ws, &deep).await.unwrap(), "deep");
}

/// A listing shows only entries a workspace path names. A name that is not UTF-8 was shown with
/// `\u{FFFD}` in place of its bytes: the same path as a file really named so (listed twice,
/// both reading as that one), or a path naming nothing. A name holding a backslash, which paths
/// refuse, was listed too. Both are left out now, and every path listed reads as its entry.
#[tokio::test]
async fn a_listing_shows_only_names_a_path_can_give() {
    use std::os::unix::ffi::OsStrExt;
    let root = tempfile::tempdir().unwrap();
    let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(root.path().join(latin1), "latin-1 name").unwrap();
    std::fs::write(root.path().join("caf\u{FFFD}.txt"), "replacement").unwrap();
    std::fs::write(root.path().join("back\\slash.txt"), "backslash").unwrap();
    std::fs::write(root.path().join("plain.txt"), "plain").unwrap();
    let ws = FsWorkspace::new(root.path()).unwrap();
    let listing = ws.list("").await.unwrap();
    let shown: Vec<(&str, u64)> = listing
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.size))
        .collect();
    assert_eq!(shown, [("caf\u{FFFD}.txt", 11), ("plain.txt", 5)]);
    assert!(!listing.truncated);
    for entry in &listing.entries {
        let text = read_both(&ws, &entry.path).await.unwrap();
        assert_eq!(text.len() as u64, entry.size, "{}", entry.path);
    }
}

/// Where the kernel's access check cannot answer (no `faccessat2`, or a seccomp profile's
/// `EPERM`), a write asks by opening the old file for writing. An entry swapped for a symlink
/// since it was looked at is judged as itself there, as the access check judges it (and the
/// rename replaces it): the open followed it, opening what it led to for writing (a pipe's
/// waiting reader went on; a device's open can act). The kernel's inotify reports every open.
#[cfg(target_os = "linux")]
#[test]
fn the_open_asking_whether_a_file_may_be_written_never_follows_a_link() {
    use rustix::fs::inotify;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("target.txt"), "old").unwrap();
    symlink("target.txt", root.path().join("link")).unwrap();
    let watcher = inotify::init(inotify::CreateFlags::NONBLOCK).unwrap();
    inotify::add_watch(
        &watcher,
        root.path().join("target.txt"),
        inotify::WatchFlags::OPEN,
    )
    .unwrap();
    let dir =
        cap_std::fs::Dir::open_ambient_dir(root.path(), cap_std::ambient_authority()).unwrap();
    let may = super::may_open_for_writing(&dir, std::path::Path::new("link"), "link");
    assert_eq!(may, Ok(true));
    let mut buffer = [std::mem::MaybeUninit::uninit(); 1024];
    let mut events = inotify::Reader::new(&watcher, &mut buffer);
    let opened = events.next().map(|event| event.events());
    assert_eq!(
        opened,
        Err(rustix::io::Errno::AGAIN),
        "the link was followed"
    );
}

/// A listing of many planted links cannot walk for long either: each link's walk stopped at the
/// cap of one path, but a listing walks each of its up to 1,000 symlinks, 1,000 times the cap
/// (a minute here for links that each cost the whole cap). The walks of one listing now share
/// a budget of a few paths' walks, past which a link is shown as itself: here 1,000 links that
/// each cost about 80 lookups (a file 40 folders down) use it up before the last of them, so the
/// first are shown as the file they lead to and the rest as themselves, where every link's walk
/// was made.
#[tokio::test]
async fn a_listing_of_many_planted_links_cannot_walk_long() {
    let root = tempfile::tempdir().unwrap();
    let down = vec!["d"; 40].join("/");
    std::fs::create_dir_all(root.path().join(&down)).unwrap();
    std::fs::write(root.path().join(&down).join("f.txt"), "reached").unwrap();
    std::fs::create_dir(root.path().join("many")).unwrap();
    let target = format!("../{down}/f.txt");
    for i in 0..ai_core::MAX_LIST_ENTRIES {
        symlink(&target, root.path().join(format!("many/{i:04}"))).unwrap();
    }
    let ws = FsWorkspace::new(root.path()).unwrap();

    let listing = ws.list("many").await.unwrap();
    assert_eq!(listing.entries.len(), ai_core::MAX_LIST_ENTRIES);
    // As the file: "reached" is 7 bytes; as itself: the link's target is longer.
    let sizes: Vec<u64> = listing.entries.iter().map(|entry| entry.size).collect();
    let walked = sizes.iter().take_while(|&&size| size == 7).count();
    assert!(walked > 0, "no link was walked");
    assert!(walked < sizes.len(), "every link was walked");
    assert!(
        sizes[walked..]
            .iter()
            .all(|&size| size == target.len() as u64),
        "{sizes:?}"
    );
}

/// The root of the file system is refused as a workspace root, named so, also through a symlink
/// to it: it confines nothing. It is what the default workspace, the working folder, is in a
/// container whose working folder was never set, and it holds `etc/shadow` for a server run as
/// root, `run/secrets/`, every user's home. It was taken, and `etc/passwd` read.
#[tokio::test]
async fn the_root_of_the_file_system_is_no_workspace() {
    let links = tempfile::tempdir().unwrap();
    symlink("/", links.path().join("slash")).unwrap();
    for root in [std::path::PathBuf::from("/"), links.path().join("slash")] {
        let error = FsWorkspace::new(&root).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{root:?}");
        assert_eq!(
            error.to_string(),
            "it is the whole file system: give the workspace a folder of its own",
            "{root:?}"
        );
    }
}

/// A reserved path is placed with one lookup a name: links planted in the workspace (a cloned
/// repository's `cogni.toml`, which is always reserved) that lead nowhere yet, each through a
/// long climb of missing folders (`m/../m/../…`, as the kernel will follow it once `m/` is
/// made), are followed to where they will lead at the cost of their names. Each `..` back to
/// where names exist resolved the whole path again, every name of it looked up anew: eight such
/// links held the start for about forty seconds.
#[tokio::test]
async fn a_reserved_path_through_planted_links_is_placed_in_one_walk() {
    let root = tempfile::tempdir().unwrap();
    let at = |name: &str| root.path().join(name);
    let climb = "m/../".repeat(800);
    for link in 0..8 {
        let next = if link == 7 {
            "later".to_owned()
        } else {
            format!("l{}", link + 1)
        };
        symlink(format!("{climb}{next}"), at(&format!("l{link}"))).unwrap();
    }
    let start = std::time::Instant::now();
    let ws = FsWorkspace::new(root.path())
        .unwrap()
        .with_reserved([at("l0/cogni.toml")]);
    let took = start.elapsed();
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    let path = "later/cogni.toml";
    let reserved = WorkspaceError::Reserved { path: path.into() };
    assert_eq!(ws.write(path, "x").await, Err(reserved));
}

/// A reserved path is placed looking each name up in its folder, held open: links planted in
/// the workspace deep in its folders (a cloned repository's), each leading to the next through
/// every folder again, are followed to the end. Looked up by its whole path, each name cost the
/// names before it again: these forty links held the start 4.4 s, now about 0.3 s (a debug
/// build). The time is not asserted: the margin is too thin for a loaded machine, and speed is
/// the benches' to measure; the test pins where the path is placed.
#[tokio::test]
async fn a_reserved_path_through_links_deep_in_folders_is_placed_at_a_lookup_a_name() {
    let root = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(root.path()).unwrap();
    // As deep as a path the kernel takes goes (4,095 bytes), each folder named `a`.
    let deep = "a/".repeat((4000 - real.as_os_str().len()) / 2 - 5);
    std::fs::create_dir_all(real.join(&deep)).unwrap();
    for link in 0..40 {
        let next = real.join(format!("{deep}l{}", link + 1));
        symlink(next, real.join(format!("{deep}l{link}"))).unwrap();
    }
    let ws = FsWorkspace::new(root.path())
        .unwrap()
        .with_reserved([real.join(format!("{deep}l0/cogni.toml"))]);
    let path = format!("{deep}l40/cogni.toml");
    let reserved = WorkspaceError::Reserved {
        path: path.as_str().into(),
    };
    assert_eq!(ws.write(&path, "x").await, Err(reserved));
}

/// Sets the last change (and access) of `path` itself, a symlink's own too, `ago` back.
fn dated_back(path: &std::path::Path, ago: std::time::Duration) {
    use rustix::fs::{AtFlags, Timespec, Timestamps};
    let at = std::time::SystemTime::now() - ago;
    let secs = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let time = Timespec {
        tv_sec: i64::try_from(secs).unwrap(),
        tv_nsec: 0,
    };
    let times = Timestamps {
        last_access: time,
        last_modification: time,
    };
    rustix::fs::utimensat(rustix::fs::CWD, path, &times, AtFlags::SYMLINK_NOFOLLOW).unwrap();
}

/// Older than a sweep lets a temp file be ([`crate::temp::STALE_AFTER`]).
const STALE: std::time::Duration = std::time::Duration::from_secs(2 * 60 * 60);

/// The temp files a crashed write left are removed when the workspace opens (in its root) and
/// when a folder is listed: only regular files named exactly as a write names them, an hour
/// old, and locked by no write. A fresh one, a locked one (a live write), a name merely like
/// one, a folder, and a symlink (never followed: its old target, named like a temp file too,
/// stays) are left. They were never removed, and piled up unseen.
#[tokio::test]
async fn the_temp_files_a_crash_left_are_swept_and_no_other() {
    let root = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let at = |name: &str| root.path().join(name);
    let plant = |path: std::path::PathBuf| {
        std::fs::write(&path, "half a write").unwrap();
        dated_back(&path, STALE);
    };
    plant(at(".cogni-write-7-0.tmp"));
    std::fs::write(at(".cogni-write-7-1.tmp"), "fresh").unwrap();
    plant(at(".cogni-write-7-2.tmp"));
    let live = std::fs::File::open(at(".cogni-write-7-2.tmp")).unwrap();
    rustix::fs::flock(&live, rustix::fs::FlockOperation::LockExclusive).unwrap();
    plant(at(".cogni-write-x-3.tmp"));
    plant(at(".cogni-write-7-3.tmp.bak"));
    let target = elsewhere.path().join(".cogni-write-9-9.tmp");
    plant(target.clone());
    symlink(&target, at(".cogni-write-7-4.tmp")).unwrap();
    dated_back(&at(".cogni-write-7-4.tmp"), STALE);
    std::fs::create_dir(at(".cogni-write-7-5.tmp")).unwrap();
    std::fs::create_dir(at("sub")).unwrap();
    plant(at("sub/.cogni-write-7-6.tmp"));

    let ws = FsWorkspace::new(root.path()).unwrap();
    assert_eq!(
        names_on_disk(root.path()),
        [
            ".cogni-write-7-1.tmp",
            ".cogni-write-7-2.tmp",
            ".cogni-write-7-3.tmp.bak",
            ".cogni-write-7-4.tmp",
            ".cogni-write-7-5.tmp",
            ".cogni-write-x-3.tmp",
            "sub",
        ]
    );
    assert!(target.exists(), "the symlink was followed");
    assert_eq!(names_on_disk(&at("sub")), [".cogni-write-7-6.tmp"]);
    assert!(ws.list("sub").await.unwrap().entries.is_empty());
    assert!(names_on_disk(&at("sub")).is_empty());
    drop(live);
}

/// A live write's temp file is never swept, however old it looks (a clock set back, a write
/// held for hours): the write holds its lock until the rename, and the sweep needs it. The
/// write then lands. Before the lock, a sweep removed it and the write failed at its rename.
#[test]
fn a_live_writes_temp_file_is_never_swept() {
    let root = tempfile::tempdir().unwrap();
    let (ws, reached, go) = held_before_commit(root.path());
    let writing = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(ws.write("a.txt", "new"))
    });
    reached.recv().unwrap();
    let names = names_on_disk(root.path());
    let [temp] = names.as_slice() else {
        panic!("{names:?}")
    };
    dated_back(&root.path().join(temp), STALE);
    let dir =
        cap_std::fs::Dir::open_ambient_dir(root.path(), cap_std::ambient_authority()).unwrap();
    let later = std::time::SystemTime::now() + STALE;
    assert!(!super::remove_if_stale(&dir, temp, later));
    drop(FsWorkspace::new(root.path()).unwrap());
    assert_eq!(&names_on_disk(root.path()), &names);
    go.send(()).unwrap();
    writing.join().unwrap().unwrap();
    assert_eq!(
        std::fs::read_to_string(root.path().join("a.txt")).unwrap(),
        "new"
    );
}

/// Only the names a write makes are a sweep's.
#[test]
fn a_temp_name_is_exactly_what_a_write_makes() {
    assert!(super::is_temp_name(&super::temp_name().to_string_lossy()));
    for name in [
        ".cogni-write-1-2.tmp.x",
        ".cogni-write--2.tmp",
        ".cogni-write-1-.tmp",
        ".cogni-write-1-2-3.tmp",
        ".COGNI-WRITE-1-2.tmp",
        ".cogni-write-a-2.tmp",
        "x.cogni-write-1-2.tmp",
    ] {
        assert!(!super::is_temp_name(name), "{name}");
    }
}

//! The workspace port: files under one root folder, addressed by relative paths.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// One entry of a workspace folder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceEntry {
    /// The entry's path relative to the workspace root, with `/` separators.
    pub path: String,
    /// Whether it is a folder.
    pub is_dir: bool,
    /// Size in bytes (0 for folders).
    pub size: u64,
}

/// The entries of a folder, at most [`MAX_LIST_ENTRIES`] of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceListing {
    /// The entries, sorted by path.
    pub entries: Vec<WorkspaceEntry>,
    /// Whether the folder has more entries than were listed (the listing stopped at
    /// [`MAX_LIST_ENTRIES`]; which ones were kept is the implementation's to say: the
    /// filesystem workspace keeps the first ones by name).
    pub truncated: bool,
}

/// The most entries one [`Workspace::list`] returns; a folder with more is listed in part, with
/// [`WorkspaceListing::truncated`] set.
pub const MAX_LIST_ENTRIES: usize = 1_000;

/// A part of a file's bytes, as [`Workspace::read_part`] returns it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilePart {
    /// The file's bytes from the offset asked for: at most as many as asked for, fewer at the
    /// end of the file, none when the offset is at or past its end. Bytes, not text: a part may
    /// begin or end inside a character.
    pub bytes: Vec<u8>,
    /// Whether the file holds bytes after these, as found by reading on (not taken from
    /// `size`, which a file that grows or shrinks while it is read no longer matches).
    pub more: bool,
    /// The file's size in bytes as it stated it when opened: an offset past it and no bytes
    /// means the offset is past the end of the file.
    pub size: u64,
}

/// Why a workspace operation failed.
///
/// The message is safe to show the model: it says what is wrong with the path, never the path
/// itself (the model's raw argument). The path stays in the variant for the caller.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// The path is absolute, climbs out with `..`, or resolves (through a symlink) outside the
    /// root.
    #[error("the path is outside the workspace")]
    OutsideRoot {
        /// The path as given.
        path: String,
    },
    /// The path is malformed (empty, NUL, backslash, a name too long for the file system, a loop
    /// of symlinks, a file's path ending in `/`), or a write's path needs more new folders than
    /// the workspace makes in one write.
    #[error("the path is not a valid workspace path: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Nothing exists at the path.
    #[error("nothing exists at the path")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// The path names a folder where a file is needed (reading or writing a folder).
    #[error("the path names a folder, not a file")]
    IsAFolder {
        /// The path as given.
        path: String,
    },
    /// A part of the path that must be a folder is not one (listing a file, or a path through a
    /// file).
    #[error("a part of the path is not a folder")]
    NotAFolder {
        /// The path as given.
        path: String,
    },
    /// The path names something other than a regular file or folder (a pipe, socket or device),
    /// which the workspace does not read.
    #[error("the path names something that is not a regular file")]
    NotAFile {
        /// The path as given.
        path: String,
    },
    /// The file is larger than the read limit.
    #[error("the file is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The file is not UTF-8 text.
    #[error("the file is not UTF-8 text")]
    NotText {
        /// The path as given.
        path: String,
    },
    /// The file may not be replaced: nobody has write permission on it (its owner made it
    /// read-only), or this process may not write it.
    #[error("the file is read-only")]
    ReadOnly {
        /// The path as given.
        path: String,
    },
    /// The path leads to a hidden entry (a name starting with `.`, such as `.env` or
    /// `.git/config`, where keys and tokens are kept), or through a symlink to one, which the
    /// workspace keeps out of reach unless it was set up to show them.
    #[error(
        "the path leads to a hidden entry (a name starting with `.`), which this workspace does \
         not show"
    )]
    Hidden {
        /// The path as given.
        path: String,
    },
    /// The path leads to one of the app's own files (its configuration, its policy, its data
    /// folder), or through a symlink to one, which the workspace keeps out of reach: a tool that
    /// could write them could change what the app trusts, and reading them would show other
    /// conversations' data.
    #[error(
        "the path leads to the app's own configuration or data, which this workspace does not \
         show"
    )]
    Reserved {
        /// The path as given.
        path: String,
    },
    /// The file system does not let this process use the path (`EACCES`, `EPERM`: a file or
    /// folder it may not read, search or write). A property of that path, like
    /// [`WorkspaceError::ReadOnly`], not of the workspace's health: other paths still work.
    #[error("permission denied: this process may not use the path")]
    PermissionDenied {
        /// The path as given.
        path: String,
    },
    /// The operation failed for another reason (the disk, the system).
    #[error("the workspace operation failed: {reason}")]
    Io {
        /// The path as given.
        path: String,
        /// The kind of failure.
        reason: String,
    },
}

impl WorkspaceError {
    /// Whether the path the caller gave is at fault (refused, missing, the wrong kind of entry,
    /// too large, not text, read-only, hidden, reserved, not permitted to this process), as opposed
    /// to the workspace failing (the disk, the system).
    pub fn is_caller_error(&self) -> bool {
        // Listed, not `!Io`: a variant added later is the workspace's failure until it is
        // placed here on purpose.
        matches!(
            self,
            Self::OutsideRoot { .. }
                | Self::InvalidPath { .. }
                | Self::NotFound { .. }
                | Self::IsAFolder { .. }
                | Self::NotAFolder { .. }
                | Self::NotAFile { .. }
                | Self::TooLarge { .. }
                | Self::NotText { .. }
                | Self::ReadOnly { .. }
                | Self::Hidden { .. }
                | Self::PermissionDenied { .. }
                | Self::Reserved { .. }
        )
    }
}

/// Files confined to one root folder. Paths are relative, `/`-separated; implementations must
/// refuse anything that leaves the root, including through symlinks.
///
/// A call's future may be dropped before it ends: the runner drops a tool's future when its run
/// is cancelled or its time is up, and tells the model `cancelled` or `timeout`. So a write
/// whose future is dropped should not land afterwards; an implementation that hands the work to
/// another thread has that thread check, before it commits, that the call is still awaited (as
/// `adapters::FsWorkspace` does).
///
/// ```
/// use std::{collections::BTreeMap, sync::Mutex};
/// use ai_core::{Workspace, WorkspaceEntry, WorkspaceError, WorkspaceListing};
/// #[derive(Default)]
/// struct InMemory(Mutex<BTreeMap<String, String>>);
/// #[ai_core::async_trait]
/// impl Workspace for InMemory {
///     async fn list(&self, dir: &str) -> Result<WorkspaceListing, WorkspaceError> {
///         let entries = self.0.lock().unwrap().iter()
///             .filter(|(p, _)| dir.is_empty() || dir == "." || p.starts_with(dir))
///             .map(|(p, c)| WorkspaceEntry {
///                 path: p.clone(),
///                 is_dir: false,
///                 size: c.len() as u64,
///             })
///             .collect();
///         Ok(WorkspaceListing { entries, truncated: false })
///     }
///     async fn read(&self, path: &str) -> Result<String, WorkspaceError> {
///         self.0.lock().unwrap().get(path).cloned()
///             .ok_or_else(|| WorkspaceError::NotFound { path: path.into() })
///     }
///     async fn write(&self, path: &str, content: &str) -> Result<(), WorkspaceError> {
///         self.0.lock().unwrap().insert(path.into(), content.into());
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait Workspace: Send + Sync {
    /// The entries of a folder (`""` or `"."` is the root), sorted by path: at most
    /// [`MAX_LIST_ENTRIES`], with [`WorkspaceListing::truncated`] telling whether there were more.
    /// Each entry's path names that entry to the other calls: one no path can name (a file
    /// name that is not UTF-8) is left out, never shown by a path that names another.
    async fn list(&self, dir: &str) -> Result<WorkspaceListing, WorkspaceError>;
    /// The text of a file.
    async fn read(&self, path: &str) -> Result<String, WorkspaceError>;
    /// At most `max_bytes` bytes of a file from byte `offset` on, whether more follow, and the
    /// file's size ([`FilePart`]): a long file is read in parts, each costing what it holds,
    /// not the whole file. An offset at or past the end gives no bytes (not an error: the
    /// caller tells the two apart with [`FilePart::size`]). A path is refused exactly as
    /// [`Workspace::read`] refuses it, but a part is neither checked to be text nor held to a
    /// cap meant for whole files.
    ///
    /// The default reads the whole file with [`Workspace::read`] and cuts the part out of it, so
    /// it costs the whole file and is refused wherever a whole read is (a file over a read cap,
    /// or not text). An implementation that can read a part alone should override it, as
    /// `adapters::FsWorkspace` does.
    async fn read_part(
        &self,
        path: &str,
        offset: u64,
        max_bytes: usize,
    ) -> Result<FilePart, WorkspaceError> {
        let whole = self.read(path).await?.into_bytes();
        let start = usize::try_from(offset).map_or(whole.len(), |at| at.min(whole.len()));
        let end = start.saturating_add(max_bytes).min(whole.len());
        Ok(FilePart {
            bytes: whole[start..end].to_vec(),
            more: end < whole.len(),
            size: whole.len() as u64,
        })
    }
    /// Creates or replaces a file (and its parent folders, inside the root). A file that is
    /// read-only should be refused as [`WorkspaceError::ReadOnly`], not replaced.
    async fn write(&self, path: &str, content: &str) -> Result<(), WorkspaceError>;
}

#[cfg(test)]
mod tests {
    use super::{FilePart, Workspace, WorkspaceError, WorkspaceListing};

    /// One file, `f`, holding its text; nothing else.
    struct OneFile(&'static str);

    #[async_trait::async_trait]
    impl Workspace for OneFile {
        async fn list(&self, _: &str) -> Result<WorkspaceListing, WorkspaceError> {
            Ok(WorkspaceListing::default())
        }
        async fn read(&self, path: &str) -> Result<String, WorkspaceError> {
            match path {
                "f" => Ok(self.0.into()),
                _ => Err(WorkspaceError::NotFound { path: path.into() }),
            }
        }
        async fn write(&self, path: &str, _: &str) -> Result<(), WorkspaceError> {
            Err(WorkspaceError::ReadOnly { path: path.into() })
        }
    }

    /// A workspace that only reads whole files still reads parts: the default cuts them out of
    /// the whole, says whether more follow, and gives no bytes from an offset at or past the end
    /// (however far), with the size to tell them apart; a whole read's refusal is the part's.
    #[tokio::test]
    async fn the_default_part_is_cut_out_of_the_whole_file() {
        let ws = OneFile("héllo");
        let part = |offset, max| ws.read_part("f", offset, max);
        let expect = |bytes: &[u8], more| FilePart {
            bytes: bytes.to_vec(),
            more,
            size: 6,
        };
        assert_eq!(part(0, 2).await.unwrap(), expect(b"h\xc3", true));
        assert_eq!(part(2, 3).await.unwrap(), expect(b"\xa9ll", true));
        assert_eq!(part(3, 100).await.unwrap(), expect(b"llo", false));
        assert_eq!(
            part(0, usize::MAX).await.unwrap(),
            expect("héllo".as_bytes(), false)
        );
        for offset in [6, 7, u64::MAX] {
            assert_eq!(
                part(offset, 4).await.unwrap(),
                expect(b"", false),
                "{offset}"
            );
        }
        assert_eq!(part(0, 0).await.unwrap(), expect(b"", true));
        assert_eq!(
            ws.read_part("g", 0, 4).await,
            Err(WorkspaceError::NotFound { path: "g".into() })
        );
    }

    /// A path of the wrong kind is the caller's mistake, told without the path. So is one the
    /// process may not use: a refusal on one path says nothing of the workspace's health, and
    /// counted against it, a model reading such a file a few times would switch the tool off
    /// for every conversation. The disk or the system failing (`Io`) stays the workspace's.
    #[test]
    fn wrong_kinds_of_entry_are_caller_errors_and_never_name_the_path() {
        let path = || "secret-CANARY/x".to_string();
        for error in [
            WorkspaceError::IsAFolder { path: path() },
            WorkspaceError::NotAFolder { path: path() },
            WorkspaceError::NotAFile { path: path() },
            WorkspaceError::ReadOnly { path: path() },
            WorkspaceError::Hidden { path: path() },
            WorkspaceError::PermissionDenied { path: path() },
            WorkspaceError::Reserved { path: path() },
        ] {
            assert!(error.is_caller_error(), "{error:?}");
            assert!(!error.to_string().contains("CANARY"), "{error}");
        }
        let io = WorkspaceError::Io {
            path: path(),
            reason: "input/output error".into(),
        };
        assert!(!io.is_caller_error());
    }
}

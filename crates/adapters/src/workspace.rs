//! A workspace folder on disk, confined to its root.

use std::io;
use std::path::{Component, Path, PathBuf};

use ai_core::{Workspace, WorkspaceEntry, WorkspaceError};
use async_trait::async_trait;

/// Default cap on a file read: 1 MiB.
const DEFAULT_MAX_READ_BYTES: u64 = 1024 * 1024;

/// [`ai_core::Workspace`] over a folder on disk.
///
/// Every path is checked twice: lexically (relative, no `..`, no NUL or backslash) and then
/// against the real file system (the canonical path of the target, or for a file that does not
/// exist yet of its nearest existing ancestor, must lie under the canonical root), so a symlink
/// cannot lead out of the root.
#[derive(Clone, Debug)]
pub struct FsWorkspace {
    root: PathBuf,
    max_read_bytes: u64,
}

impl FsWorkspace {
    /// A workspace rooted at `root`, which must be an existing folder.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = std::fs::canonicalize(root.as_ref())?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("workspace root {} is not a folder", root.display()),
            ));
        }
        Ok(Self {
            root,
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
        })
    }

    /// Changes the read cap.
    pub fn with_max_read_bytes(mut self, max: u64) -> Self {
        self.max_read_bytes = max;
        self
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The lexical check: a relative path of normal segments.
    fn join(&self, path: &str) -> Result<PathBuf, WorkspaceError> {
        let invalid = |reason| WorkspaceError::InvalidPath {
            path: path.into(),
            reason,
        };
        if path.contains('\0') {
            return Err(invalid("it contains NUL"));
        }
        if path.contains('\\') {
            return Err(invalid("use `/` as the separator"));
        }
        let mut joined = self.root.clone();
        for component in Path::new(path).components() {
            match component {
                Component::Normal(segment) => joined.push(segment),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(WorkspaceError::OutsideRoot { path: path.into() });
                }
            }
        }
        Ok(joined)
    }

    /// The file-system check: the real location of `full` (or of its nearest existing
    /// ancestor) is under the root.
    async fn confine(&self, path: &str, full: &Path) -> Result<(), WorkspaceError> {
        let mut probe = full.to_path_buf();
        loop {
            match tokio::fs::canonicalize(&probe).await {
                Ok(real) if real.starts_with(&self.root) => return Ok(()),
                Ok(_) => return Err(WorkspaceError::OutsideRoot { path: path.into() }),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // A dangling symlink must not be followed later either.
                    if tokio::fs::symlink_metadata(&probe).await.is_ok() {
                        return Err(WorkspaceError::OutsideRoot { path: path.into() });
                    }
                    if !probe.pop() {
                        return Err(WorkspaceError::OutsideRoot { path: path.into() });
                    }
                }
                Err(e) => return Err(io_error(path, &e)),
            }
        }
    }

    async fn resolve(&self, path: &str) -> Result<PathBuf, WorkspaceError> {
        let full = self.join(path)?;
        self.confine(path, &full).await?;
        Ok(full)
    }
}

fn io_error(path: &str, error: &io::Error) -> WorkspaceError {
    match error.kind() {
        io::ErrorKind::NotFound => WorkspaceError::NotFound { path: path.into() },
        kind => WorkspaceError::Io {
            path: path.into(),
            reason: kind.to_string(),
        },
    }
}

#[async_trait]
impl Workspace for FsWorkspace {
    async fn list(&self, dir: &str) -> Result<Vec<WorkspaceEntry>, WorkspaceError> {
        let full = self.resolve(dir).await?;
        let mut reader = tokio::fs::read_dir(&full)
            .await
            .map_err(|e| io_error(dir, &e))?;
        let mut entries = Vec::new();
        while let Some(entry) = reader.next_entry().await.map_err(|e| io_error(dir, &e))? {
            let metadata = entry.metadata().await.map_err(|e| io_error(dir, &e))?;
            let relative = entry
                .path()
                .strip_prefix(&self.root)
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            entries.push(WorkspaceEntry {
                path: relative,
                is_dir: metadata.is_dir(),
                size: if metadata.is_dir() { 0 } else { metadata.len() },
            });
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }

    async fn read(&self, path: &str) -> Result<String, WorkspaceError> {
        let full = self.resolve(path).await?;
        let size = tokio::fs::metadata(&full)
            .await
            .map_err(|e| io_error(path, &e))?
            .len();
        if size > self.max_read_bytes {
            return Err(WorkspaceError::TooLarge {
                path: path.into(),
                size,
                limit: self.max_read_bytes,
            });
        }
        let bytes = tokio::fs::read(&full)
            .await
            .map_err(|e| io_error(path, &e))?;
        String::from_utf8(bytes).map_err(|_| WorkspaceError::NotText { path: path.into() })
    }

    async fn write(&self, path: &str, content: &str) -> Result<(), WorkspaceError> {
        let full = self.resolve(path).await?;
        if full == self.root {
            return Err(WorkspaceError::InvalidPath {
                path: path.into(),
                reason: "it names no file",
            });
        }
        if let Some(parent) = full.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| io_error(path, &e))?;
            // Created folders are plain folders under the root; check again in case a parent
            // was swapped for a symlink meanwhile.
            self.confine(path, parent).await?;
        }
        tokio::fs::write(&full, content)
            .await
            .map_err(|e| io_error(path, &e))
    }
}

#[cfg(test)]
mod tests;

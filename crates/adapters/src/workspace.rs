//! A workspace folder on disk, confined to its root.

use std::collections::BinaryHeap;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use ai_core::{
    FilePart, MAX_LIST_ENTRIES, Workspace, WorkspaceEntry, WorkspaceError, WorkspaceListing,
};
use async_trait::async_trait;
use cap_std::ambient_authority;
use cap_std::fs::Dir;

/// Default cap on a file read: 1 MiB.
const DEFAULT_MAX_READ_BYTES: u64 = 1024 * 1024;

/// The most bytes any read holds, whatever cap the workspace was given
/// ([`FsWorkspace::with_max_read_bytes`]): 1 GiB. A read's text is held whole, by the tool and
/// then the runner, so a cap above it would only let a huge (or sparse) file exhaust memory.
pub const MAX_READ_BYTES_CEILING: u64 = 1024 * 1024 * 1024;

/// The most a read reserves up front for the size a file states (1 MiB); a bigger file's buffer
/// grows as its bytes arrive. A stated size is only a claim (a sparse file states a terabyte
/// and holds nothing), and reserving it whole can abort the process.
const MAX_READ_RESERVE: usize = 1024 * 1024;

/// The most names one listing reads from a folder before it stops, so a folder of millions of
/// entries cannot hold a call (and its blocking thread) for long.
const MAX_LIST_SCAN: usize = 100_000;

/// [`ai_core::Workspace`] over a folder on disk.
///
/// The root folder is opened once, in [`FsWorkspace::new`], and every operation is done relative
/// to that directory handle with [`cap_std`], which resolves the path beneath it in the kernel
/// (`openat2` with `RESOLVE_BENEATH` on Linux, a checked component-by-component walk elsewhere).
/// There is no check-then-open: a folder swapped for a symlink while a call runs cannot lead out
/// of the root. Before that, every path is checked lexically (relative, no `..`, no NUL or
/// backslash). Symlinks that stay inside the root are followed; those that lead out (absolute
/// targets included) are refused as [`WorkspaceError::OutsideRoot`].
///
/// A read takes only regular files: not a pipe, socket or device, nor a file of the kernel's
/// pseudo file systems (procfs, sysfs, …), which a root holding their mounts would otherwise
/// show (a root of `/` is refused outright, [`FsWorkspace::new`]). A read of a part
/// ([`Workspace::read_part`]) opens the file through the same code as a whole read, so it is
/// refused wherever a whole read is, and reads only the part (and one byte more).
///
/// A hard link is read as any file, wherever its other names are. Refusing a file with more
/// than one link would refuse much a workspace holds (the packages of a conda or uv
/// environment, linked from their cache; a copy made with `cp -al` or `rsync --link-dest`),
/// and would guard only where the kernel does not: with `fs.protected_hardlinks` on (systemd's
/// default) only someone who owns a file, or may read and write it, can link it, and so could
/// read it anyway. A write never goes through a link.
///
/// A write makes the folders its path needs, at most 64 of them (a path needing more is
/// refused as [`WorkspaceError::InvalidPath`] before any is made; folders that exist do not
/// count), and removes those it made when it fails.
///
/// A write replaces a file whole (a temp file renamed over it), but never a file that is
/// read-only: one with no write permission bit at all (even when the process runs as root), or
/// one the kernel's access check says this process may not write (asked without opening it
/// where the kernel can answer so, and never through a symlink), is refused as
/// [`WorkspaceError::ReadOnly`]; so is one the kernel then refuses to replace at the
/// rename (`EPERM`: an append-only or immutable file, another user's file in a sticky folder).
///
/// Hidden entries (any name in the path starting with `.`: `.env`, `.git/config`, `.npmrc`,
/// `.aws/credentials`, where keys and tokens are kept) are not there by default: listings leave
/// them out, and a read, write or listing of one is refused as [`WorkspaceError::Hidden`], as is
/// one whose path leads to one through symlinks inside the root (a symlink to a hidden entry is
/// listed as itself). That check follows the symlinks beneath the root just before the call's
/// own resolution; it guards against what the caller asks for, not against links swapped in
/// meanwhile, and a path whose check would look up too many names (links planted to make it
/// long) is refused as leading through too many symlinks ([`WorkspaceError::InvalidPath`]).
/// A listing's checks of the symlinks it shows share a bound of a few paths' checks; a link
/// past it is listed as itself. A check that fails for another reason than the path not
/// reaching that far (out of descriptors or memory, say) refuses the call with an IO error, and
/// a listing shows the link as itself.
/// [`FsWorkspace::with_hidden`] shows hidden entries. Either way the names of the workspace's
/// own temp files (`.cogni-write-…`) are refused to reads and writes
/// ([`WorkspaceError::InvalidPath`]) and left out of listings. Those a crashed write left are
/// removed when the workspace opens (in the root folder) and when a folder is listed: only
/// regular files named exactly as a write names them, an hour old and locked by no live write
/// (a write holds a lock on its temp file until its rename), never through a symlink.
///
/// The paths given to [`FsWorkspace::with_reserved`] (the app's own files) are out of reach the
/// same way, found by the same walk: refused as [`WorkspaceError::Reserved`] and left out of
/// listings.
///
/// The handle pins the folder, not its name: renaming the root folder away after `new` leaves the
/// workspace on the folder it opened.
#[derive(Clone, Debug)]
pub struct FsWorkspace {
    root: PathBuf,
    dir: Arc<Dir>,
    max_read_bytes: u64,
    /// What is kept out of reach besides what leads out of the root.
    guard: Guard,
    /// Called by a write's blocking job once its temp file is written, just before the write
    /// decides to commit: the tests hold a write there.
    #[cfg(test)]
    before_commit: Option<tests::Hook>,
}

impl FsWorkspace {
    /// A workspace rooted at `root`, which must be an existing folder, and not the root of the
    /// file system (`/`, or a symlink to it), which would confine nothing: it is the working
    /// folder of a container that never set one, and holds every user's files, `run/secrets/`,
    /// and `etc/shadow` for a server run as root. That root is refused as
    /// [`io::ErrorKind::InvalidInput`]. The temp files a crashed write left in the root are
    /// removed ([`FsWorkspace`]'s doc says which).
    pub fn new(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = std::fs::canonicalize(root.as_ref())?;
        if root.parent().is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "it is the whole file system: give the workspace a folder of its own",
            ));
        }
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("workspace root {} is not a folder", root.display()),
            ));
        }
        let dir = Dir::open_ambient_dir(&root, ambient_authority())?;
        sweep_stale_temps(&dir, std::time::SystemTime::now());
        Ok(Self {
            root,
            dir: Arc::new(dir),
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
            guard: Guard::default(),
            #[cfg(test)]
            before_commit: None,
        })
    }

    /// Changes the read cap (1 MiB by default): a larger file is refused as
    /// [`WorkspaceError::TooLarge`] by [`Workspace::read`], and [`Workspace::read_part`] reads
    /// at most this many bytes a part (of a file of any size). A cap above
    /// [`MAX_READ_BYTES_CEILING`] (1 GiB) is taken as that ceiling, so even `u64::MAX` never lets
    /// a read hold a huge or sparse file whole.
    pub fn with_max_read_bytes(mut self, max: u64) -> Self {
        self.max_read_bytes = max.min(MAX_READ_BYTES_CEILING);
        self
    }

    /// Shows hidden entries (names starting with `.`) when `show` is true: they are listed, read
    /// and written like any other. Off by default, since they hold keys and tokens (`.env`,
    /// `.git/config`) that a model could otherwise read and send on. The workspace's own temp
    /// names (`.cogni-write-…`) stay refused either way.
    pub fn with_hidden(mut self, show: bool) -> Self {
        self.guard.show_hidden = show;
        self
    }

    /// Keeps `paths` out of reach (bootstrap passes cogni's own config file, policy file and
    /// data folder): a read, write or listing of a path that resolves to one, or into one,
    /// through symlinks inside the root too, is refused as [`WorkspaceError::Reserved`], and
    /// listings leave them out. Each is resolved as the root is (its symlinks followed), but for
    /// names that do not exist yet (a config file not written yet, the folders it would be in),
    /// which are placed as the folders a write makes of them, a `..` after one climbing back to
    /// its parent (`missing/../cogni.toml` is `cogni.toml`). Only those inside the root are
    /// kept; names are compared ignoring ASCII case, there and in every check, since a file
    /// system that ignores case opens `COGNI.TOML` as `cogni.toml`.
    pub fn with_reserved<P: AsRef<Path>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        let inside = paths
            .into_iter()
            .filter_map(|path| resolve_like_root(path.as_ref()))
            .filter_map(|path| beneath(&path, &self.root).map(Path::to_path_buf));
        self.guard.reserved = self.guard.reserved.iter().cloned().chain(inside).collect();
        self
    }

    /// The canonical root, as it was when the workspace was created.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the root is `folder` or lies inside it, `folder` placed as
    /// [`FsWorkspace::with_reserved`] places a path: its names that do not exist yet as the
    /// folders [`std::fs::create_dir_all`] makes of them (`missing/..` is the folder `missing`
    /// is made in), names compared ignoring ASCII case. So a folder the app will make (its data
    /// folder) is matched where it will be, not only once it exists. A path that cannot be
    /// placed (made absolute, or through more symlinks than the kernel follows) holds nothing.
    pub fn lies_in(&self, folder: impl AsRef<Path>) -> bool {
        resolve_like_root(folder.as_ref())
            .is_some_and(|folder| beneath(&self.root, &folder).is_some())
    }

    /// Runs a blocking file operation on the root handle off the async runtime, with the path
    /// checked lexically and made relative (`.` for the root), and refused when it leads to a
    /// hidden entry, a temp file's name or a reserved path ([`resolve_refused`]). The operation
    /// is given the guard and where the path leads beneath the root, its symlinks replaced
    /// (`None` when it leads out, which the operation refuses).
    ///
    /// The job is given the call's [`Gate`]: dropping the call (as the runner drops a tool's
    /// future when its run is cancelled or its time is up) abandons the gate, and a job that
    /// finds it abandoned when it starts does nothing. A job that is already running keeps
    /// going (a blocking thread cannot be stopped) but its result goes nowhere; a write checks
    /// the gate once more at its commit ([`write_atomically`]), so an abandoned write never
    /// lands.
    async fn run<T: Send + 'static>(
        &self,
        path: &str,
        operation: impl FnOnce(
            &Dir,
            &Path,
            &str,
            &Gate,
            &Guard,
            Option<PathBuf>,
        ) -> Result<T, WorkspaceError>
        + Send
        + 'static,
    ) -> Result<T, WorkspaceError> {
        let relative = relative(path)?;
        let guard = self.guard.clone();
        let dir = Arc::clone(&self.dir);
        let path = path.to_owned();
        let failed = path.clone();
        let gate = Arc::new(Gate::default());
        // Held across the await, so dropped with the call's future.
        let _abandon_on_drop = AbandonOnDrop(Arc::clone(&gate));
        tokio::task::spawn_blocking(move || {
            if gate.is_abandoned() {
                return Err(abandoned(&path));
            }
            let mut lookups = MAX_WALK_LOOKUPS;
            let resolved = resolve_refused(&dir, &relative, &guard, &mut lookups)
                .map_err(|refused| refused.error(&path))?;
            operation(&dir, &relative, &path, &gate, &guard, resolved)
        })
        .await
        .unwrap_or_else(|_| {
            Err(WorkspaceError::Io {
                path: failed,
                reason: "the file operation was interrupted".into(),
            })
        })
    }
}

impl FsWorkspace {
    /// Opens the file at `path` for reading ([`names_a_file`], then [`FsWorkspace::run`]'s
    /// confinement and [`open_regular_file`]) and hands it and the size it states to `read`,
    /// on the blocking thread: every read of a file, whole or in part, opens it here.
    async fn open_and_read<T: Send + 'static>(
        &self,
        path: &str,
        read: impl FnOnce(std::fs::File, u64, &str) -> Result<T, WorkspaceError> + Send + 'static,
    ) -> Result<T, WorkspaceError> {
        names_a_file(path)?;
        self.run(path, move |root, relative, path, _, _, _| {
            let (file, size) = open_regular_file(root, relative, path)?;
            read(file, size, path)
        })
        .await
    }
}

/// Where a workspace call stands between its async side and its blocking job: still open, its
/// write committed (the rename is on its way), or abandoned (its caller dropped the call first).
/// Whichever of the last two comes first holds: the job commits only an open gate, the call
/// abandons only an open one.
#[derive(Debug, Default)]
struct Gate(AtomicU8);

impl Gate {
    const OPEN: u8 = 0;
    const COMMITTED: u8 = 1;
    const ABANDONED: u8 = 2;

    /// Claims the commit for the job; `false` when the call was abandoned first.
    fn commit(&self) -> bool {
        self.0
            .compare_exchange(
                Self::OPEN,
                Self::COMMITTED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Abandons the call, unless its job has committed.
    fn abandon(&self) {
        let _ = self.0.compare_exchange(
            Self::OPEN,
            Self::ABANDONED,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    fn is_abandoned(&self) -> bool {
        self.0.load(Ordering::Acquire) == Self::ABANDONED
    }
}

/// Abandons its gate when dropped: with the call's future, or at its end (when the job is over
/// and nothing reads the gate again).
struct AbandonOnDrop(Arc<Gate>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

/// What a job whose call was abandoned returns; nobody receives it.
fn abandoned(path: &str) -> WorkspaceError {
    WorkspaceError::Io {
        path: path.into(),
        reason: "the call was abandoned".into(),
    }
}

/// The lexical check: a relative path of normal segments, returned without `.` segments (`.`
/// alone for the root).
fn relative(path: &str) -> Result<PathBuf, WorkspaceError> {
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
    let mut relative = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(segment) => relative.push(segment),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(WorkspaceError::OutsideRoot { path: path.into() });
            }
        }
    }
    if relative.as_os_str().is_empty() {
        relative.push(".");
    }
    Ok(relative)
}

/// Refuses a file's path that ends in `/` (or `/.`): it names a folder, and the lexical check
/// ([`relative`]) drops a last `/`, so `notes/` would be read or written as the file `notes`.
/// A path the lexical check refuses (`../x/`) is refused for that first.
fn names_a_file(path: &str) -> Result<(), WorkspaceError> {
    relative(path)?;
    if path.ends_with('/') || path.ends_with("/.") {
        return Err(WorkspaceError::InvalidPath {
            path: path.into(),
            reason: "a file's path cannot end in `/`",
        });
    }
    Ok(())
}

/// Whether `error` is cap-std's refusal of a path that resolves outside its directory. cap-std
/// reports it as `PermissionDenied` with a message of its own, not an OS error number, which
/// tells it apart from a real permission failure.
fn is_escape(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::PermissionDenied && error.raw_os_error().is_none()
}

/// The workspace error for an IO failure on `path`; the message never names the path.
///
/// A path of the wrong kind (a folder where a file is needed, a file where a folder is, a name
/// too long, a loop of symlinks) is the caller's mistake, not the workspace failing; so is one
/// the process may not use (`EACCES`, `EPERM`): a refusal on that path, not the workspace's
/// health.
fn io_error(path: &str, error: &io::Error) -> WorkspaceError {
    use rustix::io::Errno;
    if is_escape(error) {
        return WorkspaceError::OutsideRoot { path: path.into() };
    }
    let path = path.to_owned();
    match Errno::from_io_error(error) {
        Some(Errno::NOENT) => WorkspaceError::NotFound { path },
        Some(Errno::ISDIR) => WorkspaceError::IsAFolder { path },
        Some(Errno::NOTDIR) => WorkspaceError::NotAFolder { path },
        // `open` of a socket, or of a pipe for writing with no reader.
        Some(Errno::NXIO) => WorkspaceError::NotAFile { path },
        Some(Errno::NAMETOOLONG) => WorkspaceError::InvalidPath {
            path,
            reason: "it or a name in it is too long",
        },
        Some(Errno::LOOP) => WorkspaceError::InvalidPath {
            path,
            reason: "it leads through too many symlinks",
        },
        Some(Errno::ACCESS | Errno::PERM) => WorkspaceError::PermissionDenied { path },
        _ if error.kind() == io::ErrorKind::NotFound => WorkspaceError::NotFound { path },
        _ => WorkspaceError::Io {
            path,
            reason: error.kind().to_string(),
        },
    }
}

/// Reads at most `limit` bytes of `reader`, which claims `stated` bytes: the cap holds on the
/// bytes actually read (a file that grows, or reports a wrong size, cannot make it read more),
/// and the claim reserves at most [`MAX_READ_RESERVE`] up front.
fn read_capped(
    reader: impl io::Read,
    stated: u64,
    limit: u64,
    path: &str,
) -> Result<Vec<u8>, WorkspaceError> {
    let too_large = |size| WorkspaceError::TooLarge {
        path: path.into(),
        size,
        limit,
    };
    if stated > limit {
        return Err(too_large(stated));
    }
    // The stated size is a claim: at most a bounded buffer is reserved for it.
    let reserve = usize::try_from(stated.min(limit))
        .unwrap_or(MAX_READ_RESERVE)
        .min(MAX_READ_RESERVE);
    let mut bytes = Vec::with_capacity(reserve);
    io::Read::read_to_end(&mut reader.take(limit.saturating_add(1)), &mut bytes)
        .map_err(|e| io_error(path, &e))?;
    let read = bytes.len() as u64;
    if read > limit {
        return Err(too_large(read.max(stated)));
    }
    Ok(bytes)
}

/// Reads at most `max_bytes` bytes of `file` (which states `size` bytes) from byte `offset` on,
/// and whether more follow: one byte more is read to tell, so a file that grew or shrank since
/// it stated its size is answered as it is. An offset no file can reach gives nothing: one past
/// `i64::MAX`, and one past the stated size that the file system refuses to seek to (ext4
/// refuses an offset past the most a file there can hold, 16 TiB, with `EINVAL`), which is
/// past the end, not the file failing. The buffer reserved is bounded as in [`read_capped`].
fn read_part(
    mut file: impl io::Read + io::Seek,
    size: u64,
    offset: u64,
    max_bytes: u64,
    path: &str,
) -> Result<(Vec<u8>, bool), WorkspaceError> {
    if i64::try_from(offset).is_err() {
        return Ok((Vec::new(), false));
    }
    match io::Seek::seek(&mut file, io::SeekFrom::Start(offset)) {
        Ok(_) => {}
        Err(e) if offset > size && e.kind() == io::ErrorKind::InvalidInput => {
            return Ok((Vec::new(), false));
        }
        Err(e) => return Err(io_error(path, &e)),
    }
    let reserve = usize::try_from(size.saturating_sub(offset).min(max_bytes))
        .unwrap_or(MAX_READ_RESERVE)
        .min(MAX_READ_RESERVE);
    let mut bytes = Vec::with_capacity(reserve);
    io::Read::read_to_end(&mut file.take(max_bytes.saturating_add(1)), &mut bytes)
        .map_err(|e| io_error(path, &e))?;
    let more = bytes.len() as u64 > max_bytes;
    if more {
        bytes.pop();
    }
    Ok((bytes, more))
}

/// Opens `relative` beneath `root` for reading, without blocking (a pipe with no writer would
/// block `open` forever) and checks on the opened handle that it is a regular file.
///
/// What the path leads to is looked at first (`stat`, beneath the root), and anything but a
/// regular file is refused without being opened: opening a device can act (a serial line's DTR
/// drops, resetting what hangs on it; a watchdog starts; a tape rewinds), and opening a pipe
/// lets a writer waiting for a reader go on. The check on the handle stays, for an entry
/// swapped in between.
fn open_regular_file(
    root: &Dir,
    relative: &Path,
    path: &str,
) -> Result<(std::fs::File, u64), WorkspaceError> {
    use cap_std::fs::OpenOptionsExt;
    let target = root.metadata(relative).map_err(|e| io_error(path, &e))?;
    if target.is_dir() {
        return Err(WorkspaceError::IsAFolder { path: path.into() });
    }
    if !target.is_file() {
        return Err(WorkspaceError::NotAFile { path: path.into() });
    }
    let mut options = cap_std::fs::OpenOptions::new();
    options.read(true);
    // Also O_NOCTTY: opening a terminal must not make it the process's controlling one.
    options.custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32);
    let file = root
        .open_with(relative, &options)
        .map_err(|e| io_error(path, &e))?;
    // fstat of the handle that will be read, not a second lookup of the name.
    let metadata = file.metadata().map_err(|e| io_error(path, &e))?;
    if metadata.is_dir() {
        return Err(WorkspaceError::IsAFolder { path: path.into() });
    }
    if !metadata.is_file() {
        return Err(WorkspaceError::NotAFile { path: path.into() });
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if on_kernel_pseudo_fs(&file).map_err(|e| io_error(path, &e))? {
        return Err(WorkspaceError::NotAFile { path: path.into() });
    }
    Ok((file.into_std(), metadata.len()))
}

/// Whether `file` lies on one of the kernel's pseudo file systems (procfs, sysfs, debugfs,
/// tracefs, securityfs). Their "regular files" are views of the running system, not files a
/// workspace holds: a root that contains one (a folder a procfs is mounted in, or `/proc`
/// itself) would otherwise let a read show `proc/<pid>/environ`, this process's environment
/// and so its API keys.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn on_kernel_pseudo_fs(file: &cap_std::fs::File) -> io::Result<bool> {
    use rustix::fs::FsWord;
    /// The `statfs` magic numbers of procfs, sysfs, debugfs, tracefs and securityfs.
    const PSEUDO: [FsWord; 5] = [
        rustix::fs::PROC_SUPER_MAGIC,
        0x6265_6572,
        0x6462_6720,
        0x7472_6163,
        0x7363_6673,
    ];
    Ok(PSEUDO.contains(&rustix::fs::fstatfs(file)?.f_type))
}

/// The folder part and the file name of a relative file path (not the root).
fn split_file(relative: &Path, path: &str) -> Result<(PathBuf, PathBuf), WorkspaceError> {
    match (relative.parent(), relative.file_name()) {
        (Some(parent), Some(name)) if relative != Path::new(".") => {
            let parent = if parent.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                parent.to_path_buf()
            };
            Ok((parent, PathBuf::from(name)))
        }
        _ => Err(WorkspaceError::InvalidPath {
            path: path.into(),
            reason: "it names no file",
        }),
    }
}

/// The most folders one write makes for its path ([`open_or_create_folder`]). Each is synced
/// into its parent, a few milliseconds each on a disk, on a blocking thread that goes on after
/// its call is dropped; no sane tool use makes more at once, and a deeper file is written in
/// steps, since folders that exist do not count.
const MAX_NEW_FOLDERS: usize = 64;

/// Why a write whose path needs more than [`MAX_NEW_FOLDERS`] new folders is refused.
const TOO_MANY_NEW_FOLDERS: &str =
    "it needs more than 64 new folders, the most one write makes: write a file higher up first";

/// Opens the folder `parent` beneath `dir`, creating it and its missing ancestors (beneath
/// `dir` too) first, and returns it with the folders it made, the deepest first (none when it
/// existed), for [`remove_made_folders`] to take away if the write fails. Folders it creates
/// are made durable before the write goes on: each ancestor of `parent` that gained one (the
/// deepest that existed, and the new ones below it) is passed to `sync` (the write's own folder
/// is synced after its rename). A `parent` that needs more than [`MAX_NEW_FOLDERS`] new folders
/// is refused as [`WorkspaceError::InvalidPath`] before any is made.
fn open_or_create_folder(
    dir: &Dir,
    parent: &Path,
    path: &str,
    mut sync: impl FnMut(&Dir, &Path) -> io::Result<()>,
) -> Result<(Dir, Vec<PathBuf>), WorkspaceError> {
    match dir.open_dir(parent) {
        Ok(folder) => Ok((folder, Vec::new())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let ancestors = || {
                parent
                    .ancestors()
                    .skip(1)
                    .map(|ancestor| match ancestor.as_os_str().is_empty() {
                        true => Path::new("."),
                        false => ancestor,
                    })
            };
            // The deepest ancestor that exists: the creation adds entries to it and to the new
            // folders below it, nothing above. Looked for only as far up as a write may make
            // folders.
            let existing = ancestors()
                .take(MAX_NEW_FOLDERS)
                .find(|ancestor| dir.metadata(ancestor).is_ok());
            // The folders the creation makes: `parent` and its ancestors below `existing`.
            let made: Vec<PathBuf> = parent
                .ancestors()
                .take_while(|ancestor| {
                    !ancestor.as_os_str().is_empty() && Some(*ancestor) != existing
                })
                .map(Path::to_path_buf)
                .collect();
            if made.len() > MAX_NEW_FOLDERS {
                return Err(WorkspaceError::InvalidPath {
                    path: path.into(),
                    reason: TOO_MANY_NEW_FOLDERS,
                });
            }
            let created = dir.create_dir_all(parent).map_err(|e| match e.kind() {
                // A name on the way exists but is no folder, nor leads to one: a symlink that
                // leads nowhere (or a file put there meanwhile).
                io::ErrorKind::AlreadyExists => WorkspaceError::NotAFolder { path: path.into() },
                _ => io_error(path, &e),
            });
            let opened = created.and_then(|()| {
                // A new folder's name is in its parent's entries: without a sync of that
                // parent a crash may lose the folder, and the file written in it, after the
                // write returned.
                for ancestor in ancestors() {
                    sync(dir, ancestor).map_err(|e| io_error(path, &e))?;
                    if Some(ancestor) == existing {
                        break;
                    }
                }
                dir.open_dir(parent).map_err(|e| io_error(path, &e))
            });
            match opened {
                Ok(folder) => Ok((folder, made)),
                Err(error) => {
                    // Part of the path may have been made before the creation failed.
                    remove_made_folders(dir, &made);
                    Err(error)
                }
            }
        }
        Err(e) => Err(io_error(path, &e)),
    }
}

/// Removes, beneath `dir`, the folders a failed write made for its path (`made`, the deepest
/// first), so that a refused or abandoned write leaves no empty folders behind (nor those a
/// creation that failed on the way made). Only empty folders are removed (`rmdir`): one that
/// holds something by then (another write's file) stays, and so do the folders above it, which
/// then hold it. A folder another write is about to fill may be removed under it, which fails
/// that write rather than losing anything.
fn remove_made_folders(dir: &Dir, made: &[PathBuf]) {
    for folder in made {
        // One that fails (not empty; or never made, the creation having failed on the way)
        // stays as it is; its ancestors are tried all the same, and only empty ones go.
        let _ = dir.remove_dir(folder);
    }
}

/// Fsyncs the folder `folder` beneath `dir`. A folder handle may be an `O_PATH` one, which
/// cannot be fsynced: it is opened for reading, and only as a folder (`O_DIRECTORY`). The name
/// is looked up again, and a process racing in the workspace may have put a pipe or a device
/// there since the folder was made: the kernel refuses it (`ENOTDIR`) without opening it, where
/// a plain open would block on a pipe with no writer, holding the write's thread forever, or
/// act on a device.
fn sync_folder(dir: &Dir, folder: &Path) -> io::Result<()> {
    use cap_std::fs::OpenOptionsExt;
    use rustix::fs::OFlags;
    let mut options = cap_std::fs::OpenOptions::new();
    options.read(true);
    options.custom_flags((OFlags::DIRECTORY | OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32);
    dir.open_with(folder, &options)
        .and_then(|handle| handle.sync_all())
}

/// The `/`-separated workspace path of `name` in the folder `relative`.
fn entry_path(relative: &Path, name: &str) -> String {
    if relative == Path::new(".") {
        name.to_owned()
    } else {
        format!("{}/{name}", relative.to_string_lossy())
    }
}

#[async_trait]
impl Workspace for FsWorkspace {
    /// A folder with more than [`MAX_LIST_ENTRIES`] entries is listed in part: the first ones by
    /// name, so the same folder always shows the same part. Only their names are kept while the
    /// folder is read (at most [`MAX_LIST_ENTRIES`] + 1 at a time) and only those returned are
    /// stat'ed; past 100,000 names the read stops, and the part is the first ones of those
    /// read. A name no workspace path can give is left out, as the temp files are: one that is
    /// not UTF-8 (shown with `\u{FFFD}` in place of its bytes it would be another entry's
    /// path, or none) and one holding a backslash, which paths refuse.
    async fn list(&self, dir: &str) -> Result<WorkspaceListing, WorkspaceError> {
        self.run(dir, |root, relative, path, _, guard, resolved| {
            let folder = root.open_dir(relative).map_err(|e| io_error(path, &e))?;
            // The first names so far, the greatest on top, to drop when a smaller one comes.
            let mut first: BinaryHeap<String> = BinaryHeap::new();
            let mut truncated = false;
            for (read, entry) in folder
                .entries()
                .map_err(|e| io_error(path, &e))?
                .enumerate()
            {
                if read == MAX_LIST_SCAN {
                    truncated = true;
                    break;
                }
                let name = entry.map_err(|e| io_error(path, &e))?.file_name();
                // A write in flight in this folder: not an entry of the workspace; nor is a
                // hidden one unless they are shown, nor one no path can name.
                let Some(name) = name.to_str().filter(|name| !name.contains('\\')) else {
                    continue;
                };
                // One a crash left is removed on the way ([`remove_if_stale`]).
                if is_temp_name(name) {
                    remove_if_stale(&folder, name, std::time::SystemTime::now());
                    continue;
                }
                if refused_name(name.as_ref(), guard.show_hidden).is_some()
                    || resolved
                        .as_ref()
                        .is_some_and(|folder| guard.is_reserved(&folder.join(name)))
                {
                    continue;
                }
                first.push(name.to_owned());
                if first.len() > MAX_LIST_ENTRIES {
                    first.pop();
                    truncated = true;
                }
            }
            let mut entries = Vec::with_capacity(first.len());
            // What the walks of the symlinks listed may still look up, together.
            let mut lookups = MAX_LIST_WALK_LOOKUPS;
            for name in first.into_sorted_vec() {
                // The entry itself; one removed since the folder was read is left out.
                let mut metadata = match folder.symlink_metadata(&name) {
                    Ok(metadata) => metadata,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_error(path, &e)),
                };
                // A symlink is shown as what it leads to when that is inside the root, resolved
                // from the root as a read or a listing of it would be (never looked at outside);
                // one that leads out or nowhere, or to a hidden entry not shown, or whose walk
                // would look up more than the listing has left or failed, as itself.
                if metadata.is_symlink() {
                    let mut walk = lookups.min(MAX_WALK_LOOKUPS);
                    let allowed = walk;
                    let refused = resolve_refused(root, &relative.join(&name), guard, &mut walk);
                    lookups -= allowed - walk;
                    if refused.is_ok()
                        && let Ok(target) = root.metadata(relative.join(&name))
                    {
                        metadata = target;
                    }
                }
                entries.push(WorkspaceEntry {
                    path: entry_path(relative, &name),
                    is_dir: metadata.is_dir(),
                    size: if metadata.is_dir() { 0 } else { metadata.len() },
                });
            }
            Ok(WorkspaceListing { entries, truncated })
        })
        .await
    }

    async fn read(&self, path: &str) -> Result<String, WorkspaceError> {
        let limit = self.max_read_bytes;
        self.open_and_read(path, move |file, size, path| {
            let bytes = read_capped(file, size, limit, path)?;
            String::from_utf8(bytes).map_err(|_| WorkspaceError::NotText { path: path.into() })
        })
        .await
    }

    /// Opened and refused exactly as [`Workspace::read`] opens and refuses a file (the same
    /// code), then only the part is read: a part of a file of any size can be read, the read cap
    /// bounding what one part holds (`max_bytes` above it reads as much as the cap). One byte
    /// past the part is read to tell whether more follow.
    async fn read_part(
        &self,
        path: &str,
        offset: u64,
        max_bytes: usize,
    ) -> Result<FilePart, WorkspaceError> {
        let max_bytes = u64::try_from(max_bytes)
            .unwrap_or(u64::MAX)
            .min(self.max_read_bytes);
        self.open_and_read(path, move |file, size, path| {
            let (bytes, more) = read_part(file, size, offset, max_bytes, path)?;
            Ok(FilePart { bytes, more, size })
        })
        .await
    }

    async fn write(&self, path: &str, content: &str) -> Result<(), WorkspaceError> {
        names_a_file(path)?;
        let content = content.to_owned();
        #[cfg(test)]
        let before_commit = self.before_commit.clone();
        self.run(path, move |root, relative, path, gate, _, _| {
            let (parent, name) = split_file(relative, path)?;
            let (folder, made) = open_or_create_folder(root, &parent, path, sync_folder)?;
            let target = (root, relative);
            let commit = || {
                #[cfg(test)]
                if let Some(hook) = &before_commit {
                    hook.call();
                }
                gate.commit()
            };
            let written =
                write_atomically(&folder, &name, target, content.as_bytes(), path, commit);
            if written.is_err() {
                remove_made_folders(root, &made);
            }
            written
        })
        .await
    }
}

/// Replaces the entry `name` of `folder` with a file holding `content`: a temp file in the same
/// folder, fsynced, renamed over the name, then the folder fsynced. A reader sees the old file
/// or the new one, never a part; a crash leaves the old one. The rename replaces the entry
/// itself, so a hard link (to a file outside the root, say) or a symlink at the name is
/// replaced, never written through. The new file takes the old one's permission bits (`0o777`),
/// never its set-ID or sticky bits, and keeps its owner, group and extended attributes (POSIX
/// ACLs and SELinux labels among them; [`keep_owner_and_attributes`]), or the write is refused
/// as [`WorkspaceError::ReadOnly`] and the old file left as it is. An existing file that nobody
/// may write (no write bit at all) or that this process may not write ([`may_write`]) is left
/// as it is too ([`WorkspaceError::ReadOnly`]), though the rename alone would replace it.
/// `target` is the root and the path beneath it that `name` in `folder` stands for: where a
/// symlink at the name leads is judged from the root, as a read would resolve it.
/// `commit` is asked, once the temp file is synced and just before the rename, whether the
/// write may still land: when it says no (its call was abandoned), the temp file is removed and
/// nothing changes.
fn write_atomically(
    folder: &Dir,
    name: &Path,
    (root, relative): (&Dir, &Path),
    content: &[u8],
    path: &str,
    commit: impl FnOnce() -> bool,
) -> Result<(), WorkspaceError> {
    // What the new file keeps of an old one: its permission bits, and the old file itself,
    // opened for reading, for its owner, group and extended attributes.
    let kept = match folder.symlink_metadata(name) {
        Ok(entry) if entry.is_dir() => {
            return Err(WorkspaceError::IsAFolder { path: path.into() });
        }
        Ok(entry) if entry.is_symlink() => match root.metadata(relative) {
            // The link is replaced, not followed; but one leading out, or to a folder, says the
            // caller meant something else.
            Err(e) if is_escape(&e) => {
                return Err(WorkspaceError::OutsideRoot { path: path.into() });
            }
            Ok(target) if target.is_dir() => {
                return Err(WorkspaceError::IsAFolder { path: path.into() });
            }
            _ => None,
        },
        // An existing file's permissions carry over to its new content, but not its
        // set-user-ID, set-group-ID or sticky bits: new content never runs with the owner's
        // rights (the kernel, too, drops them when an unprivileged writer changes a file).
        Ok(entry) if entry.is_file() => {
            use cap_std::fs::PermissionsExt;
            let mode = entry.permissions().mode();
            // The rename needs only the folder's write permission: without these checks a
            // file made read-only, or another user's, would be replaced all the same.
            if mode & 0o222 == 0 || !may_write(folder, name, path)? {
                return Err(WorkspaceError::ReadOnly { path: path.into() });
            }
            let old = open_to_keep(folder, name, path)?;
            Some((old, cap_std::fs::Permissions::from_mode(mode & 0o777)))
        }
        Ok(_) => return Err(WorkspaceError::NotAFile { path: path.into() }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error(path, &e)),
    };
    let (temp, file) = create_temp(folder, kept.is_some()).map_err(|e| io_error(path, &e))?;
    let written = (|| {
        // Who may open the temp file is settled before it holds anything (a handle opened
        // early would read what comes later), and never exceeds who may open the old file: it
        // is created for its writer alone (`0o600`), then given the old owner and group (so
        // that an ACL's entries for them apply to them, not to the writer's group), then the
        // old ACL and other attributes (which set the permission bits the ACL implies in the
        // same step: an ACL granting a user less than the bits would otherwise is never
        // missing while the bits already grant), then the old permission bits (which the ACL
        // already implies).
        if let Some((old, permissions)) = &kept {
            keep_owner_and_attributes(old, &file, path)?;
            file.set_permissions(permissions.clone())
                .map_err(|e| io_error(path, &e))?;
        }
        io::Write::write_all(&mut &file, content).map_err(|e| io_error(path, &e))?;
        file.sync_all().map_err(|e| io_error(path, &e))?;
        // The file stays open, and so locked ([`lock_temp`]), until it is renamed or removed.
        Ok(commit())
    })()
    .and_then(|committed| {
        if committed {
            folder
                .rename(&temp, folder, name)
                .map_err(|e| rename_error(path, &e))?;
        }
        Ok(committed)
    });
    match written {
        Ok(true) => {}
        Ok(false) => {
            let _ = folder.remove_file(&temp);
            return Err(abandoned(path));
        }
        Err(e) => {
            let _ = folder.remove_file(&temp);
            return Err(e);
        }
    }
    sync_folder(folder, Path::new(".")).map_err(|e| io_error(path, &e))
}

/// The workspace error for a failed rename of a write's temp file over `path`. `EPERM` there
/// is the kernel refusing to replace that entry, though the access check let the write begin:
/// the file is append-only or immutable (`chattr +a`, `+i`), or it is another user's in a sticky
/// folder (`/tmp`). That is [`WorkspaceError::ReadOnly`], not the workspace failing.
fn rename_error(path: &str, error: &io::Error) -> WorkspaceError {
    match rustix::io::Errno::from_io_error(error) {
        Some(rustix::io::Errno::PERM) => WorkspaceError::ReadOnly { path: path.into() },
        _ => io_error(path, error),
    }
}

/// Opens the old file `name` of `folder` for reading, for what its replacement keeps of it
/// ([`keep_owner_and_attributes`]): not following a symlink swapped in meanwhile, not blocking,
/// never becoming the controlling terminal. A file this process may write but not read is
/// refused as [`WorkspaceError::ReadOnly`]: what its replacement must keep cannot be read, and a
/// replacement without its ACL could grant more than it did.
fn open_to_keep(
    folder: &Dir,
    name: &Path,
    path: &str,
) -> Result<cap_std::fs::File, WorkspaceError> {
    use cap_std::fs::OpenOptionsExt;
    use rustix::fs::OFlags;
    use rustix::io::Errno;
    let mut options = cap_std::fs::OpenOptions::new();
    options.read(true);
    options.custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW).bits() as i32);
    match folder.open_with(name, &options) {
        Ok(old) => Ok(old),
        Err(e) if is_escape(&e) => Err(WorkspaceError::OutsideRoot { path: path.into() }),
        Err(e) if matches!(Errno::from_io_error(&e), Some(Errno::ACCESS | Errno::PERM)) => {
            Err(WorkspaceError::ReadOnly { path: path.into() })
        }
        Err(e) => Err(io_error(path, &e)),
    }
}

/// Gives the temp file `new` what it keeps of the file `old` it replaces: the owner and group,
/// then (on Linux) the extended attributes, among them the POSIX ACL
/// (`system.posix_acl_access`) and the SELinux label (`security.selinux`). Only what differs is
/// changed, so a file whose owner, group and label a new file gets anyway (the common case:
/// the writer's own file) needs no privilege. Attributes that speak for the old content are
/// not kept: file capabilities (`security.capability`, which would let new content run with
/// them, as set-ID bits would) and the integrity hashes `security.ima` and `security.evm`.
/// An ACL the new file inherited from its folder's default, which the old one did not have, is
/// removed: it could grant more than the old file did.
///
/// Keeping them is not best effort: when the kernel refuses one (`EPERM` to give the file
/// another user as non-root, or a group this process is not in; `EACCES` or `ENOTSUP` for an
/// attribute), the write is refused as [`WorkspaceError::ReadOnly`] and the old file stays as it
/// is. A replacement owned by the writer, or by the writer's group, would hand the file's
/// owner or group rights to someone else, and one without its ACL could grant more than the old
/// file did; the caller is told this file cannot be written rather than having it silently
/// changed. A file system without extended attributes at all (`ENOTSUP` when listing them) has
/// none to keep.
fn keep_owner_and_attributes(
    old: &cap_std::fs::File,
    new: &cap_std::fs::File,
    path: &str,
) -> Result<(), WorkspaceError> {
    use rustix::fs::{Gid, Uid};
    use rustix::io::Errno;
    let failed = |errno: Errno| match errno {
        Errno::PERM | Errno::ACCESS | Errno::NOTSUP | Errno::ROFS => {
            WorkspaceError::ReadOnly { path: path.into() }
        }
        errno => io_error(path, &errno.into()),
    };
    let was = rustix::fs::fstat(old).map_err(|e| io_error(path, &e.into()))?;
    let is = rustix::fs::fstat(new).map_err(|e| io_error(path, &e.into()))?;
    let owner = (was.st_uid != is.st_uid).then(|| Uid::from_raw(was.st_uid));
    let group = (was.st_gid != is.st_gid).then(|| Gid::from_raw(was.st_gid));
    if owner.is_some() || group.is_some() {
        rustix::fs::fchown(new, owner, group).map_err(failed)?;
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    keep_attributes(old, new).map_err(failed)?;
    Ok(())
}

/// The most bytes of one extended attribute's value, or of a file's list of their names, on
/// Linux (`XATTR_SIZE_MAX`, `XATTR_LIST_MAX`).
#[cfg(any(target_os = "linux", target_os = "android"))]
const XATTR_MAX: usize = 64 * 1024;

/// Extended attributes a replacement does not keep ([`keep_owner_and_attributes`]).
#[cfg(any(target_os = "linux", target_os = "android"))]
const XATTRS_NOT_KEPT: [&[u8]; 3] = [b"security.capability", b"security.ima", b"security.evm"];

/// The extended attributes of [`keep_owner_and_attributes`]: those of `old` that `new` lacks
/// or holds otherwise are set on `new`; the `system.` ones (ACLs) `new` has and `old` has not
/// are removed.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn keep_attributes(
    old: &cap_std::fs::File,
    new: &cap_std::fs::File,
) -> Result<(), rustix::io::Errno> {
    use rustix::fs::{XattrFlags, fgetxattr, flistxattr, fremovexattr, fsetxattr};
    use rustix::io::Errno;
    /// The names of `file`'s extended attributes; none where the file system has none.
    fn names(file: &cap_std::fs::File) -> Result<Vec<Vec<u8>>, Errno> {
        let mut list = vec![0; XATTR_MAX];
        let len = match flistxattr(file, &mut list[..]) {
            Ok(len) => len,
            Err(Errno::NOTSUP) => 0,
            Err(errno) => return Err(errno),
        };
        Ok(list[..len]
            .split(|&byte| byte == 0)
            .filter(|name| !name.is_empty())
            .map(<[u8]>::to_vec)
            .collect())
    }
    let kept = names(old)?;
    let mut was = vec![0; XATTR_MAX];
    let mut is = vec![0; XATTR_MAX];
    for name in &kept {
        if XATTRS_NOT_KEPT.contains(&name.as_slice()) {
            continue;
        }
        let value = match fgetxattr(old, name, &mut was[..]) {
            Ok(len) => &was[..len],
            // Removed meanwhile.
            Err(Errno::NODATA) => continue,
            Err(errno) => return Err(errno),
        };
        if !matches!(fgetxattr(new, name, &mut is[..]), Ok(len) if is[..len] == *value) {
            fsetxattr(new, name, value, XattrFlags::empty())?;
        }
    }
    for name in names(new)? {
        if name.starts_with(b"system.") && !kept.contains(&name) {
            match fremovexattr(new, &name) {
                Ok(()) | Err(Errno::NODATA) => {}
                Err(errno) => return Err(errno),
            }
        }
    }
    Ok(())
}

/// Whether this process may write the existing file `name` of `folder` (a single name), as the
/// kernel judges it: `faccessat` with `AT_EACCESS` (the effective user and groups, as an open
/// would use) and `AT_SYMLINK_NOFOLLOW` (an entry swapped for a symlink meanwhile is judged as
/// itself, never followed out of the root; the rename replaces it, not what it leads to). The
/// file is not opened, so a watcher on it sees no open for writing. The kernel's check honours
/// the permission bits, POSIX ACLs, a read-only file system and an immutable file; as root it
/// says yes to whatever has a write bit (which the caller has already required). Only a refusal
/// of permission (or a read-only file system) says no; another failure (an entry removed
/// meanwhile) is left to the write itself, which replaces the entry rather than writing through
/// it. On a kernel without `faccessat2` (Linux before 5.8), or off Linux, the old way is used:
/// the file is opened for writing, which writes nothing, does not block or truncate, and does
/// not follow a symlink. So is it when the check says `EPERM` ([`access_answer`]).
fn may_write(folder: &Dir, name: &Path, path: &str) -> Result<bool, WorkspaceError> {
    use rustix::fs::{Access, AtFlags};
    let flags = AtFlags::EACCESS | AtFlags::SYMLINK_NOFOLLOW;
    match access_answer(rustix::fs::accessat(folder, name, Access::WRITE_OK, flags)) {
        Some(may) => Ok(may),
        None => may_open_for_writing(folder, name, path),
    }
}

/// What [`may_write`] takes from the kernel's access check: `Some` when the check decides,
/// `None` when only an open for writing can tell. A refusal (`EACCES`, or `EROFS`: a read-only
/// file system) says no, and any other failure but those below says yes (the write itself
/// meets it). A kernel or system without the check (`ENOSYS`, `EINVAL`, `ENOTSUP`) cannot tell,
/// and neither can `EPERM`: the kernel says it for an immutable file, but a seccomp filter
/// that predates `faccessat2` (Docker's before 20.10, and the many profiles copied from it)
/// says it for the syscall itself, whatever the file; read as a refusal, it would make every
/// existing file of the workspace read-only in such a container. The open tells the two apart
/// (an immutable file refuses it with `EPERM` too).
fn access_answer(answer: Result<(), rustix::io::Errno>) -> Option<bool> {
    use rustix::io::Errno;
    match answer {
        Ok(()) => Some(true),
        Err(Errno::NOSYS | Errno::INVAL | Errno::NOTSUP | Errno::PERM) => None,
        Err(Errno::ACCESS | Errno::ROFS) => Some(false),
        Err(_) => Some(true),
    }
}

/// [`may_write`] where the kernel cannot answer without an open: whether the file opens for
/// writing (which writes nothing, and does not block or truncate). An entry swapped for a
/// symlink since it was looked at is judged as itself, as the access check judges it: the open
/// does not follow it (`ELOOP`, which says yes: the rename replaces the link).
fn may_open_for_writing(folder: &Dir, name: &Path, path: &str) -> Result<bool, WorkspaceError> {
    use cap_std::fs::OpenOptionsExt;
    use rustix::fs::OFlags;
    use rustix::io::Errno;
    let mut options = cap_std::fs::OpenOptions::new();
    options.write(true);
    options.custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW).bits() as i32);
    match folder.open_with(name, &options) {
        Ok(_) => Ok(true),
        Err(e) if is_escape(&e) => Err(WorkspaceError::OutsideRoot { path: path.into() }),
        Err(e) => Ok(!matches!(
            Errno::from_io_error(&e),
            Some(Errno::ACCESS | Errno::PERM | Errno::ROFS)
        )),
    }
}

/// How the temp files of writes in flight begin (listings leave them out, reads and writes
/// refuse them).
const TEMP_PREFIX: &str = ".cogni-write-";

/// Why a path is refused before it is used.
#[derive(Debug)]
enum Refused {
    /// A hidden name, while hidden entries are not shown.
    Hidden,
    /// A reserved path, or one inside it ([`FsWorkspace::with_reserved`]).
    Reserved,
    /// The name of one of the workspace's own temp files.
    TempName,
    /// Its walk ([`resolve_refused`]) would look up more names than it may: the path is too
    /// long, or leads through too many symlinks.
    TooLong {
        /// Whether the walk met a symlink (else the path alone is that long).
        through_links: bool,
    },
    /// A lookup of its walk failed for another reason than the path not reaching that far
    /// ([`ends_the_walk`]): where it leads is not known, so it is not let through.
    Unwalked(io::Error),
}

impl Refused {
    /// The error for `path`, which leads to the refused name.
    fn error(self, path: &str) -> WorkspaceError {
        let invalid = |reason| WorkspaceError::InvalidPath {
            path: path.into(),
            reason,
        };
        match self {
            Self::Hidden => WorkspaceError::Hidden { path: path.into() },
            Self::Reserved => WorkspaceError::Reserved { path: path.into() },
            Self::TempName => {
                invalid("names starting with `.cogni-write-` are the workspace's own temp files")
            }
            // The words of the kernel's own refusals ([`io_error`]).
            Self::TooLong {
                through_links: true,
            } => invalid("it leads through too many symlinks"),
            Self::TooLong {
                through_links: false,
            } => invalid("it or a name in it is too long"),
            Self::Unwalked(error) => io_error(path, &error),
        }
    }
}

/// What a workspace keeps out of reach besides what leads out of its root: hidden entries,
/// unless they are shown, and the reserved paths ([`FsWorkspace::with_reserved`]).
#[derive(Clone, Debug, Default)]
struct Guard {
    /// Whether hidden entries are shown ([`FsWorkspace::with_hidden`]).
    show_hidden: bool,
    /// The reserved paths, relative to the root, resolved as it is.
    reserved: Arc<[PathBuf]>,
}

impl Guard {
    /// Whether `resolved` (a path beneath the root, its symlinks replaced) is a reserved path
    /// or inside one, its names compared ignoring ASCII case.
    fn is_reserved(&self, resolved: &Path) -> bool {
        self.reserved
            .iter()
            .any(|reserved| beneath(resolved, reserved).is_some())
    }
}

/// What is left of `path` past `folder` when `path` is `folder` or inside it, their names
/// compared ignoring ASCII case, as a file system that ignores case opens them.
fn beneath<'a>(path: &'a Path, folder: &Path) -> Option<&'a Path> {
    let mut names = path.components();
    for name in folder.components() {
        let at = names.next()?;
        let same = at
            .as_os_str()
            .as_encoded_bytes()
            .eq_ignore_ascii_case(name.as_os_str().as_encoded_bytes());
        if !same {
            return None;
        }
    }
    Some(names.as_path())
}

/// `path` resolved as [`FsWorkspace::new`] resolves the root (made absolute, its symlinks
/// followed), but for the names that do not exist yet, placed as the folders a write makes of
/// them: a config file not written yet is still the one the next start reads. A name that does
/// not exist is no symlink (the workspace makes only folders and files), so a `..` after it
/// climbs back to its parent, from where the rest is resolved again (`missing/../cogni.toml` is
/// `cogni.toml`); a symlink that leads nowhere yet is followed to where its target will be.
/// `None` when the path cannot be made absolute, or leads through more than [`MAX_SYMLINKS`]
/// symlinks, which no start could open.
///
/// It walks the path as the kernel does, looking each name up in its folder, held open, so
/// links planted in the workspace (each a long climb through missing folders, or a descent
/// through deep ones) cost their names once, not the whole path again at each name or `..`.
fn resolve_like_root(path: &Path) -> Option<PathBuf> {
    use std::ffi::OsStr;
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    use rustix::fs::{Mode, OFlags};

    /// A step of the walk.
    enum Step {
        /// Back to the file system's root (an absolute path or symlink target).
        Root,
        /// Into a name.
        Name(OsString),
        /// Up (`..`).
        Up,
    }
    // A path's steps, the next one last.
    let steps = |path: &Path| -> Vec<Step> {
        let steps = path.components().filter_map(|component| match component {
            Component::RootDir | Component::Prefix(_) => Some(Step::Root),
            Component::CurDir => None,
            Component::ParentDir => Some(Step::Up),
            Component::Normal(name) => Some(Step::Name(name.to_owned())),
        });
        steps.rev().collect()
    };
    let mut pending = steps(&std::path::absolute(path).ok()?);
    // A folder, opened only to look names up in (`name` a name in `at`, `..`, or `/`): with
    // `O_PATH` where there is one, which needs no right to read it.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    const LOOK: OFlags = OFlags::PATH;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    const LOOK: OFlags = OFlags::RDONLY;
    let open = |at: BorrowedFd<'_>, name: &OsStr| {
        let flags = LOOK | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::openat(at, name, flags, Mode::empty()).ok()
    };
    // Where the walk stands: existing names, none a symlink, then `made` names that do not
    // exist, which no symlink is; and the folder the existing names lead to, held open, in
    // which the next name is looked up (`None`: it could not be opened, so nothing past it
    // can be looked up either).
    let mut placed = PathBuf::new();
    let mut made = 0_usize;
    let mut folder: Option<OwnedFd> = None;
    let mut links = 0;
    while let Some(step) = pending.pop() {
        match step {
            Step::Root => {
                placed = PathBuf::from(Component::RootDir.as_os_str());
                made = 0;
                folder = open(rustix::fs::CWD, Component::RootDir.as_os_str());
            }
            // Past a name that exists and is no symlink, or one placed, `..` is its parent.
            Step::Up => {
                placed.pop();
                match made {
                    0 => folder = folder.and_then(|at| open(at.as_fd(), OsStr::new(".."))),
                    _ => made -= 1,
                }
            }
            Step::Name(name) => {
                placed.push(&name);
                let Some(at) = folder.as_ref().filter(|_| made == 0) else {
                    made += 1;
                    continue;
                };
                match rustix::fs::readlinkat(at, name.as_os_str(), Vec::new()) {
                    Ok(target) => {
                        links += 1;
                        if links > MAX_SYMLINKS {
                            return None;
                        }
                        placed.pop();
                        pending.extend(steps(Path::new(OsStr::from_bytes(target.as_bytes()))));
                    }
                    // A name that exists and is no symlink: a folder, looked in next, or a
                    // file (or a folder that cannot be opened), past which nothing exists.
                    Err(rustix::io::Errno::INVAL) => match open(at.as_fd(), &name) {
                        Some(inner) => folder = Some(inner),
                        None => made = 1,
                    },
                    // One that does not exist (or cannot be looked at), placed as written.
                    Err(_) => made = 1,
                }
            }
        }
    }
    Some(placed)
}

/// Whether the name `name` is refused: a temp file's always, a hidden one (starting with `.`)
/// unless hidden entries are shown. A temp file's name is known in any case (`.COGNI-WRITE-…`):
/// on a file system that ignores case (macOS by default, an ext4 or tmpfs folder with
/// casefolding on) that name opens the temp file all the same.
fn refused_name(name: &std::ffi::OsStr, show_hidden: bool) -> Option<Refused> {
    let name = name.as_encoded_bytes();
    let prefix = TEMP_PREFIX.as_bytes();
    if name
        .get(..prefix.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(prefix))
    {
        Some(Refused::TempName)
    } else if !show_hidden && name.starts_with(b".") {
        Some(Refused::Hidden)
    } else {
        None
    }
}

/// The most symlinks [`resolve_refused`] follows in one path, as Linux's own limit.
const MAX_SYMLINKS: usize = 40;

/// The most names [`resolve_refused`] looks up for one path, a folder opened again from the
/// root counting one for each of its names. The longest path the kernel takes (4,095 bytes:
/// at most 2,048 names) costs at most twice its names with no symlink, so this leaves as much
/// again for links. Linux follows 40 links of up to 4,095 bytes each, and links planted in the
/// workspace (a cloned repository's) could make a walk look up over 80,000 names; past this
/// cap the path is refused instead ([`Refused::TooLong`]), so no path holds a call for long.
const MAX_WALK_LOOKUPS: usize = 8 * 1024;

/// The most names the walks of one listing's symlinks look up together, as many as 8 paths'
/// walks at most: a listing walks each symlink it shows (up to [`MAX_LIST_ENTRIES`]), and planted
/// links each costing a whole [`MAX_WALK_LOOKUPS`] would hold it a thousand times as long as a
/// path. A link whose walk would go past what is left is shown as itself.
const MAX_LIST_WALK_LOOKUPS: usize = 8 * MAX_WALK_LOOKUPS;

/// Whether `relative` (lexically checked) leads to a refused name ([`refused_name`]) or into a
/// reserved path ([`Guard::is_reserved`]): one of its own names, or one of those the symlinks it
/// meets inside the root lead through. If not, where it leads beneath the root, its symlinks
/// replaced (`None` for a path that leads out, which the operation refuses). The path is
/// walked beneath `root` name by name, each symlink replaced by its target (a relative one:
/// an absolute target, or one that climbs out of the root, is left to the operation, which
/// refuses it as outside the root). Where the path cannot be reached (a name missing or a file
/// where a folder should be, [`ends_the_walk`]; more links than the kernel follows), the names
/// left are judged as written. A lookup that fails otherwise (out of descriptors or memory,
/// say) refuses the path ([`Refused::Unwalked`]): the call, which runs once the walk's folders
/// are closed, might get past it.
///
/// Each name is looked up in its folder, held open while the walk goes down, so a walk costs
/// each name once, not the whole path to it again; a folder is opened again from the root only
/// after a link's `..` climbed out of the one held. `lookups` is how many names the walk may
/// look up (at most [`MAX_WALK_LOOKUPS`]), less those it looked up once it is done; a walk that
/// would need more is refused ([`Refused::TooLong`]) and leaves none.
fn resolve_refused(
    root: &Dir,
    relative: &Path,
    guard: &Guard,
    lookups: &mut usize,
) -> Result<Option<PathBuf>, Refused> {
    /// A step of the walk: into a name, or up (`..` in a symlink's target).
    enum Step {
        Name(OsString),
        Up,
    }
    // A path's steps; none for an absolute one.
    let steps = |path: &Path| -> Option<Vec<Step>> {
        let mut steps = Vec::new();
        for component in path.components() {
            match component {
                Component::Normal(name) => steps.push(Step::Name(name.to_owned())),
                Component::CurDir => {}
                Component::ParentDir => steps.push(Step::Up),
                Component::RootDir | Component::Prefix(_) => return None,
            }
        }
        Some(steps)
    };
    // The steps still to take, the next one last.
    let Some(mut pending) = steps(relative) else {
        return Ok(None);
    };
    pending.reverse();
    // Where the walk stands, `depth` names beneath the root (no symlink among them), and the
    // folder it last opened on the way.
    let mut resolved = PathBuf::new();
    let mut depth = 0;
    let mut held: Option<(usize, Dir)> = None;
    let mut links = 0;
    let mut walking = true;
    if guard.is_reserved(&resolved) {
        return Err(Refused::Reserved);
    }
    while let Some(step) = pending.pop() {
        let name = match step {
            Step::Up if resolved.pop() => {
                depth -= 1;
                if held.as_ref().is_some_and(|(at, _)| *at > depth) {
                    held = None;
                }
                continue;
            }
            // Out of the root: the operation refuses it as such.
            Step::Up => return Ok(None),
            Step::Name(name) => name,
        };
        if let Some(refused) = refused_name(&name, guard.show_hidden) {
            return Err(refused);
        }
        if !walking {
            resolved.push(&name);
            depth += 1;
            if guard.is_reserved(&resolved) {
                return Err(Refused::Reserved);
            }
            continue;
        }
        // The name's symlink target, if it is one, and the names looked up to tell.
        let mut looked_up = 0;
        let target = open_walked(root, &resolved, depth, &mut held).and_then(|(folder, cost)| {
            looked_up = cost + 1;
            match folder.symlink_metadata(&name)?.is_symlink() {
                true => folder.read_link_contents(&name).map(Some),
                false => Ok(None),
            }
        });
        match lookups.checked_sub(looked_up) {
            Some(left) => *lookups = left,
            None => {
                *lookups = 0;
                return Err(Refused::TooLong {
                    through_links: links > 0,
                });
            }
        }
        resolved.push(&name);
        depth += 1;
        if guard.is_reserved(&resolved) {
            return Err(Refused::Reserved);
        }
        match target {
            Ok(Some(target)) if links < MAX_SYMLINKS => {
                links += 1;
                match steps(&target) {
                    Some(target) => {
                        resolved.pop();
                        depth -= 1;
                        pending.extend(target.into_iter().rev());
                    }
                    // Absolute: the operation refuses it as leading out.
                    None => return Ok(None),
                }
            }
            // Past the kernel's own count: the call is refused as leading through too many.
            Ok(Some(_)) => walking = false,
            Ok(None) => {}
            Err(error) if ends_the_walk(&error) => walking = false,
            Err(error) => return Err(Refused::Unwalked(error)),
        }
    }
    Ok(Some(resolved))
}

/// Whether a lookup of [`resolve_refused`]'s walk that failed with `error` says only that the
/// path cannot be reached that way, so the names left may be judged as written: a name missing
/// (`ENOENT`: the call fails the same way, or a write makes the missing folders as written) or
/// a file where a folder should be (`ENOTDIR`: the call fails the same way).
///
/// Any other failure refuses the path, in the words [`io_error`] gives the call's own:
/// - the state of the process or the system (`EMFILE`, `ENFILE`, `ENOMEM`, `EINTR`, `EIO`, …)
///   may be gone by the time the call runs, once the walk's folders are closed;
/// - `EACCES` the call mostly meets too (a folder it must search), and then gets the same
///   answer; but where cap-std opens a folder without `O_PATH` (off Linux) the walk needs to
///   read a folder the call only searches;
/// - `ENAMETOOLONG`: the walk opens a folder again from the root by its path with the links
///   replaced, which links can make longer than any path the call resolves (a name too long
///   gets the same answer as the call's);
/// - `ELOOP`, or cap-std's refusal of a path leading out: the walk follows the links itself and
///   opens only folders it found not to be links, so these say a name was swapped meanwhile.
fn ends_the_walk(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// The folder a walk stands in ([`resolve_refused`]): `resolved`, `depth` names beneath `root`,
/// none of them a symlink. It is `root` itself, the folder `held` when that is the one, or one
/// opened from `held` when that is its parent (one name looked up), or else from the root (one
/// for each of its names); `held` then holds it. Returns it and how many names opening it
/// looked up.
fn open_walked<'a>(
    root: &'a Dir,
    resolved: &Path,
    depth: usize,
    held: &'a mut Option<(usize, Dir)>,
) -> io::Result<(&'a Dir, usize)> {
    if depth == 0 {
        return Ok((root, 0));
    }
    let (folder, cost) = match held.take() {
        Some((at, folder)) if at == depth => (folder, 0),
        Some((at, parent)) if at + 1 == depth => match resolved.file_name() {
            Some(name) => (parent.open_dir(name)?, 1),
            None => (root.open_dir(resolved)?, depth),
        },
        _ => (root.open_dir(resolved)?, depth),
    };
    let (_, folder) = held.insert((depth, folder));
    Ok((folder, cost))
}

/// Creates a new temp file in `folder` (`create_new`: never one that exists), skipping names
/// that are taken ([`crate::temp::first_free`]). One that will replace a file is created for
/// its writer alone (`0o600`), to be given the old file's owner, attributes and permissions
/// before it holds anything; a new file gets the usual `0o666` less the umask (or the folder's
/// default ACL).
fn create_temp(folder: &Dir, replacing: bool) -> io::Result<(PathBuf, cap_std::fs::File)> {
    use cap_std::fs::OpenOptionsExt;
    let mut options = cap_std::fs::OpenOptions::new();
    options
        .write(true)
        .create_new(true)
        .mode(if replacing { 0o600 } else { 0o666 });
    crate::temp::first_free(|| {
        let temp = temp_name();
        let opened = folder.open_with(&temp, &options).and_then(lock_temp);
        (temp, opened)
    })
    .map_err(|(_, e)| e)
}

/// Takes the lock (`flock`, exclusive) that keeps a sweep ([`remove_if_stale`]) off a live
/// write's temp file: the write holds it, its file open, until the file is renamed or removed.
/// A name a sweep holds, or one a sweep removed between its creation and the lock (its link
/// count is 0), counts as taken ([`io::ErrorKind::AlreadyExists`]): another name is made. Where
/// the lock cannot be taken otherwise (a file system without locks), the file goes unlocked; a
/// sweep cannot lock it either, or, should it (locks that failed for the moment), finds it too
/// fresh to remove.
fn lock_temp(file: cap_std::fs::File) -> io::Result<cap_std::fs::File> {
    use rustix::fs::FlockOperation;
    match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) if rustix::fs::fstat(&file).is_ok_and(|held| held.st_nlink == 0) => {
            Err(io::ErrorKind::AlreadyExists.into())
        }
        Err(rustix::io::Errno::WOULDBLOCK) => Err(io::ErrorKind::AlreadyExists.into()),
        Ok(()) | Err(_) => Ok(file),
    }
}

/// Whether `name` is exactly the name [`temp_name`] makes (`.cogni-write-<pid>-<n>.tmp`, both
/// decimal): the only names a sweep ([`remove_if_stale`]) looks at.
fn is_temp_name(name: &str) -> bool {
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix(TEMP_PREFIX)
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(pid, n)| digits(pid) && digits(n))
}

/// Removes from `folder` the temp files a crashed write left there ([`remove_if_stale`]),
/// reading at most [`MAX_LIST_SCAN`] names. What cannot be read or removed is left, never an
/// error: it is tried again at the next open or listing.
fn sweep_stale_temps(folder: &Dir, now: std::time::SystemTime) {
    let Ok(entries) = folder.entries() else {
        return;
    };
    for entry in entries.take(MAX_LIST_SCAN).flatten() {
        if let Some(name) = entry.file_name().to_str().filter(|name| is_temp_name(name)) {
            remove_if_stale(folder, name, now);
        }
    }
}

/// Removes the temp file `name` ([`is_temp_name`]) of `folder` when a crash left it there, and
/// says whether it did. It must be a regular file (never a symlink followed, nor a device or
/// pipe opened: it is looked at first, then opened without following a link or blocking, and
/// must be the file looked at), last changed at least [`crate::temp::STALE_AFTER`] (an hour)
/// before `now`, and not locked: a sweep takes the lock a live write holds on its temp file
/// ([`lock_temp`]) and removes the file only while it holds it, and only if `name` still names
/// that file. So a live write of this version is never touched, whatever its age; the age
/// keeps a sweep off the temp files of a write that holds no lock (an older cogni's, or one on
/// a file system without locks), which live for one write, sync and rename, far less than an
/// hour. A write's temp file leaves its name only by its own rename or removal, under its lock,
/// so the name cannot pass to another file while the sweep holds the lock.
fn remove_if_stale(folder: &Dir, name: &str, now: std::time::SystemTime) -> bool {
    use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, Stat};
    let same = |a: &Stat, b: &Stat| (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino);
    let look = || rustix::fs::statat(folder, name, AtFlags::SYMLINK_NOFOLLOW).ok();
    let Some(seen) = look() else {
        return false;
    };
    let changed = u64::try_from(seen.st_mtime)
        .ok()
        .zip(u32::try_from(seen.st_mtime_nsec).ok())
        .map(|(secs, nanos)| std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos));
    let stale = changed
        .and_then(|at| now.duration_since(at).ok())
        .is_some_and(|age| age >= crate::temp::STALE_AFTER);
    if !stale || FileType::from_raw_mode(seen.st_mode) != FileType::RegularFile {
        return false;
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
    let Ok(file) = rustix::fs::openat(folder, name, flags | OFlags::CLOEXEC, Mode::empty()) else {
        return false;
    };
    let Ok(held) = rustix::fs::fstat(&file) else {
        return false;
    };
    same(&seen, &held)
        && rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok()
        && look().is_some_and(|named| same(&named, &held))
        && rustix::fs::unlinkat(folder, name, AtFlags::empty()).is_ok()
}

/// A fresh name for a temp file: hidden, short (whatever the target's length) and unique within
/// the process; `create_new` refuses one that exists anyway.
fn temp_name() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    PathBuf::from(format!("{TEMP_PREFIX}{}-{n}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests;

//! Creating a data folder as its owner's alone.

use std::path::Path;

/// Creates `dir` and its missing parents as its owner's alone (mode `0700` on Unix), as a data
/// folder should be: the stores under it hold the conversations and the tools' arguments. A
/// folder that exists keeps its permissions, since whoever made it chose them. Where a file (or
/// anything but a folder) is in the way, the error says so rather than the OS's "File exists".
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(dir) {
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && !dir.is_dir() => {
            Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "something that is not a folder is there",
            ))
        }
        other => other,
    }
}

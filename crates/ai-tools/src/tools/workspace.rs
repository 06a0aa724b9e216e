//! `core__workspace_list`, `core__workspace_read` and `core__workspace_write`: files under the
//! workspace capability's root.

use std::sync::Arc;

use ai_core::{Capabilities, ExecPermit, ToolEffect, ToolError, ToolInvocationContext, Workspace};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ToolContract;

/// Refuses paths that could leave the root before the capability sees them (the capability
/// checks again, against the real file system). The message says why, never the path: it is the
/// model's raw argument.
fn check_path(path: &str, allow_root: bool) -> Result<(), ToolError> {
    let refuse = |why: &str| {
        Err(ToolError::invalid_input(format!(
            "the path is refused: {why}"
        )))
    };
    if path.is_empty() || path == "." {
        return if allow_root {
            Ok(())
        } else {
            refuse("it names no file")
        };
    }
    if path.contains('\0') {
        return refuse("it contains NUL");
    }
    if path.contains('\\') {
        return refuse("use `/` as the separator");
    }
    if path.starts_with('/') {
        return refuse("it must be relative to the workspace");
    }
    // A drive letter (`C:`) is only an ASCII letter and `:`: `C:x` leaves the root of a
    // workspace on Windows, which a `Workspace` of another app may be. On the Unix workspace it
    // is a plain name, as is any other with a `:` (`1:x.txt`), so the message says what it is.
    if let [letter, b':', ..] = path.as_bytes()
        && letter.is_ascii_alphabetic()
    {
        return refuse("it begins with a drive letter (like `C:`)");
    }
    if path.split('/').any(|segment| segment == "..") {
        return refuse("`..` is not allowed");
    }
    Ok(())
}

/// A path the model got wrong is its mistake (`validation`, not counted against the tool's
/// health); a workspace that fails is the tool's.
fn workspace_error(error: ai_core::WorkspaceError) -> ToolError {
    if error.is_caller_error() {
        ToolError::invalid_input(error.to_string())
    } else {
        ToolError::new(error.to_string())
    }
}

/// The most bytes of compact JSON a listing takes: well under the runner's default 32 KiB result
/// budget (`budgets.max_result_bytes`), which the tool cannot see, so a big folder is listed in
/// part, with `truncated` set, rather than refused as `result_too_large`.
pub(super) const MAX_LIST_BYTES: usize = 24 * 1024;

/// The most bytes of compact JSON a read answers with, for the same reason as
/// [`MAX_LIST_BYTES`]: a longer file is answered in parts, each with the `next_offset` to read on
/// from, rather than refused as `result_too_large` (which no call could get past).
pub(super) const MAX_READ_BYTES: usize = 24 * 1024;

/// The compact JSON length of a listing with no entries, the larger `truncated` value counted.
const EMPTY_LIST_BYTES: usize = r#"{"entries":[],"truncated":false}"#.len();

/// Lists a folder of the workspace.
pub struct WorkspaceList {
    workspace: Arc<dyn Workspace>,
}

impl WorkspaceList {
    /// The tool over `workspace`.
    pub fn new(workspace: Arc<dyn Workspace>) -> Self {
        Self { workspace }
    }
}

impl std::fmt::Debug for WorkspaceList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceList").finish_non_exhaustive()
    }
}

/// Arguments of `core__workspace_list`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// The folder, relative to the workspace root; the root when absent.
    #[serde(default)]
    pub path: Option<String>,
}

/// One entry of a listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ListEntry {
    /// Path relative to the workspace root.
    pub path: String,
    /// Whether it is a folder.
    pub is_dir: bool,
    /// Size in bytes.
    pub size: u64,
}

/// The listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ListOutput {
    /// The entries, sorted by path.
    pub entries: Vec<ListEntry>,
    /// Whether the folder has more entries than listed: at most 1,000 are listed, and only as
    /// many as fit in 24 KiB of JSON.
    pub truncated: bool,
}

#[async_trait::async_trait]
impl ToolContract for WorkspaceList {
    type Input = ListInput;
    type Output = ListOutput;
    const ID: &'static str = "core__workspace_list";
    const DESCRIPTION: &'static str = concat!(
        "List the files and folders of a workspace folder (the root when no path is given), ",
        "sorted by path. A big folder is listed only in part, its first entries, with ",
        "`truncated: true`: list a subfolder, or read a file by its path, to go further."
    );
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &[
        "entries.path",
        "entries.is_dir",
        "entries.size",
        "truncated",
    ];

    async fn execute(
        &self,
        _: &ExecPermit,
        input: ListInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<ListOutput, ToolError> {
        let path = input.path.unwrap_or_default();
        check_path(&path, true)?;
        let listing = self.workspace.list(&path).await.map_err(workspace_error)?;
        Ok(fit_listing(listing))
    }
}

/// The listing's first entries (in the workspace's order, sorted by path) whose JSON fits
/// [`MAX_LIST_BYTES`], with `truncated` set when any were left out.
pub(super) fn fit_listing(listing: ai_core::WorkspaceListing) -> ListOutput {
    let mut truncated = listing.truncated;
    let mut entries = Vec::new();
    let mut used = EMPTY_LIST_BYTES;
    for entry in listing.entries {
        let entry = ListEntry {
            path: entry.path,
            is_dir: entry.is_dir,
            size: entry.size,
        };
        // Serializing strings, a bool and a number cannot fail; were it to, the entry is left
        // out as one too large.
        let len = serde_json::to_vec(&entry).map_or(usize::MAX, |json| json.len());
        let separator = usize::from(!entries.is_empty());
        used = used.saturating_add(len).saturating_add(separator);
        if used > MAX_LIST_BYTES {
            truncated = true;
            break;
        }
        entries.push(entry);
    }
    ListOutput { entries, truncated }
}

/// Reads a text file of the workspace.
pub struct WorkspaceRead {
    workspace: Arc<dyn Workspace>,
}

impl WorkspaceRead {
    /// The tool over `workspace`.
    pub fn new(workspace: Arc<dyn Workspace>) -> Self {
        Self { workspace }
    }
}

impl std::fmt::Debug for WorkspaceRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceRead").finish_non_exhaustive()
    }
}

/// Arguments of `core__workspace_read`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadInput {
    /// The file, relative to the workspace root.
    pub path: String,
    /// Where to read from, in bytes: a previous answer's `next_offset`; the start when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

/// A file's text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ReadOutput {
    /// The file, relative to the workspace root.
    pub path: String,
    /// Its text from `offset` on: all of it, or as much as fits in one answer (24 KiB of
    /// JSON).
    pub content: String,
    /// Where the text `content` leaves out begins, when it leaves some out: pass it as `offset`
    /// to read on. Absent when `content` reaches the end of the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
}

#[async_trait::async_trait]
impl ToolContract for WorkspaceRead {
    type Input = ReadInput;
    type Output = ReadOutput;
    const ID: &'static str = "core__workspace_read";
    const DESCRIPTION: &'static str = concat!(
        "Read a UTF-8 text file from the workspace. A long file is answered in parts: when the ",
        "answer has a `next_offset`, read again with it as `offset` for the rest."
    );
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["path", "content", "next_offset"];

    async fn execute(
        &self,
        _: &ExecPermit,
        input: ReadInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<ReadOutput, ToolError> {
        check_path(&input.path, false)?;
        let text = self
            .workspace
            .read(&input.path)
            .await
            .map_err(workspace_error)?;
        let start = match input.offset {
            Some(offset) => start_at(&text, offset)?,
            None => 0,
        };
        Ok(fit_text(input.path, &text, start))
    }
}

/// The byte index in `text` that `offset` names, or why it names none: it is past the end, or
/// inside a character. The message never quotes the offset, the model's argument.
fn start_at(text: &str, offset: u64) -> Result<usize, ToolError> {
    match usize::try_from(offset) {
        Ok(at) if text.is_char_boundary(at) => Ok(at),
        Ok(at) if at < text.len() => Err(ToolError::invalid_input(
            "the offset is inside a character: read on from a `next_offset`",
        )),
        _ => Err(ToolError::invalid_input(format!(
            "the offset is past the end of the file, which is {} bytes long",
            text.len()
        ))),
    }
}

/// The answer to a read of `text` from byte `start` (a character's start): as much of the text
/// as keeps the answer's compact JSON within [`MAX_READ_BYTES`] (at least one character, so that
/// reading on always gets further), and where the rest begins when some is left.
pub(super) fn fit_text(path: String, text: &str, start: usize) -> ReadOutput {
    let rest = &text[start..];
    // The answer without its text, `next_offset` at its longest.
    let mut answer = ReadOutput {
        path,
        content: String::new(),
        next_offset: Some(u64::MAX),
    };
    let overhead = serde_json::to_vec(&answer).map_or(usize::MAX, |json| json.len());
    let room = MAX_READ_BYTES.saturating_sub(overhead);
    let mut used = 0;
    let mut end = rest.len();
    for (at, c) in rest.char_indices() {
        used += json_len(c);
        if used > room && at > 0 {
            end = at;
            break;
        }
    }
    answer.content = rest[..end].to_owned();
    answer.next_offset = (end < rest.len()).then(|| (start + end) as u64);
    answer
}

/// The bytes `c` takes inside a JSON string as serde_json writes it: `"` and `\` and the
/// control characters with a short escape take 2, the other control characters 6 (`\u00XX`),
/// any other character its UTF-8 length.
pub(super) fn json_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
        c if u32::from(c) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// Writes a text file of the workspace.
pub struct WorkspaceWrite {
    workspace: Arc<dyn Workspace>,
}

impl WorkspaceWrite {
    /// The tool over `workspace`.
    pub fn new(workspace: Arc<dyn Workspace>) -> Self {
        Self { workspace }
    }
}

impl std::fmt::Debug for WorkspaceWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceWrite").finish_non_exhaustive()
    }
}

/// Arguments of `core__workspace_write`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteInput {
    /// The file, relative to the workspace root; parent folders are created.
    pub path: String,
    /// The text to write; the file is replaced.
    pub content: String,
}

/// What was written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct WriteOutput {
    /// The file, relative to the workspace root.
    pub path: String,
    /// Bytes written.
    pub bytes_written: u64,
}

#[async_trait::async_trait]
impl ToolContract for WorkspaceWrite {
    type Input = WriteInput;
    type Output = WriteOutput;
    const ID: &'static str = "core__workspace_write";
    const DESCRIPTION: &'static str = "Create or replace a UTF-8 text file in the workspace.";
    const EFFECT: ToolEffect = ToolEffect::StateChange;
    const REDACTION: &'static [&'static str] = &["path", "bytes_written"];

    async fn execute(
        &self,
        _: &ExecPermit,
        input: WriteInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<WriteOutput, ToolError> {
        check_path(&input.path, false)?;
        self.workspace
            .write(&input.path, &input.content)
            .await
            .map_err(workspace_error)?;
        Ok(WriteOutput {
            path: input.path,
            bytes_written: input.content.len() as u64,
        })
    }
}

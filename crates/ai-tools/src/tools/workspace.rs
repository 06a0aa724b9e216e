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
        let offset = input.offset.unwrap_or(0);
        // What fits is at most `text_room` bytes of text (a character takes at least its UTF-8
        // length in JSON), and at least one character, which takes at most 4.
        let want = text_room(&input.path).max(4);
        let part = self
            .workspace
            .read_part(&input.path, offset, want)
            .await
            .map_err(workspace_error)?;
        // A part that begins with a byte that continues a character: the offset is inside one
        // only if a character begins in the (at most 3) bytes before it and runs past it;
        // otherwise the byte is a stray one, and the file is not text.
        if offset > 0 && part.bytes.first().is_some_and(|&b| is_continuation(b)) {
            let back = offset.min(3);
            let around = self
                .workspace
                .read_part(&input.path, offset - back, 7)
                .await
                .map_err(workspace_error)?;
            // `back` is at most 3.
            if !a_character_spans(&around.bytes, back as usize) {
                return Err(workspace_error(ai_core::WorkspaceError::NotText {
                    path: input.path,
                }));
            }
        }
        let (text, more) = part_text(&input.path, offset, &part)?;
        // Text that ends past the largest offset there is: no `next_offset` could count to it
        // (one would stand still at that largest offset, and reading on from it would give the
        // same answer for ever). No file is that long; a workspace that answers so is failing.
        if offset.checked_add(text.len() as u64).is_none() {
            return Err(ToolError::new(
                "the workspace gave text past the largest offset a file can have",
            ));
        }
        Ok(fit_text(input.path, text, offset, more))
    }
}

/// The text of `part`, read from `offset`, and whether the file has more after it; or why it
/// holds none: the offset is past the end or inside a character (said without quoting it, the
/// model's argument; a file that changed since the answer that gave it is the likely cause),
/// the part is not UTF-8 text, or the workspace gave too little to hold a character. A
/// character cut at the part's end is left for the next part.
fn part_text<'a>(
    path: &str,
    offset: u64,
    part: &'a ai_core::FilePart,
) -> Result<(&'a str, bool), ToolError> {
    let bytes = &part.bytes[..];
    if bytes.is_empty() && !part.more && offset > part.size {
        return Err(ToolError::invalid_input(format!(
            "the offset is past the end of the file, which is {} bytes long; if a `next_offset` \
             gave it, the file has changed since: read it again from the start",
            part.size
        )));
    }
    // A byte that continues a character: no character starts at the offset.
    if offset > 0 && bytes.first().is_some_and(|&b| is_continuation(b)) {
        return Err(ToolError::invalid_input(
            "the offset is inside a character: read on from a `next_offset`; if one gave it, \
             the file has changed since: read it again from the start",
        ));
    }
    let not_text = || workspace_error(ai_core::WorkspaceError::NotText { path: path.into() });
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        // The part ends inside a character whose rest the file holds.
        Err(error) if error.error_len().is_none() && part.more => {
            std::str::from_utf8(&bytes[..error.valid_up_to()]).map_err(|_| not_text())?
        }
        Err(_) => return Err(not_text()),
    };
    if text.is_empty() && part.more {
        return Err(ToolError::new(
            "the workspace gave too little of the file to hold one character",
        ));
    }
    Ok((text, part.more))
}

/// Whether `byte` continues a UTF-8 character (`10xxxxxx`): no character begins with it.
fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// Whether a whole UTF-8 character of `bytes` begins before byte `at` and ends after it: the
/// bytes from `at` on continue a character, rather than stand where no character is.
fn a_character_spans(bytes: &[u8], at: usize) -> bool {
    (0..at.min(bytes.len())).any(|start| {
        let width = match bytes[start] {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return false,
        };
        start + width > at
            && bytes
                .get(start..start + width)
                .is_some_and(|c| std::str::from_utf8(c).is_ok())
    })
}

/// The most bytes of JSON the text of an answer about `path` may take: [`MAX_READ_BYTES`] less
/// the answer without its text, `next_offset` at its longest.
fn text_room(path: &str) -> usize {
    let answer = ReadOutput {
        path: path.to_owned(),
        content: String::new(),
        next_offset: Some(u64::MAX),
    };
    let overhead = serde_json::to_vec(&answer).map_or(usize::MAX, |json| json.len());
    MAX_READ_BYTES.saturating_sub(overhead)
}

/// The answer to a read of `text`, the file's text from byte `offset` (a character's start),
/// which `more` says the file goes on after: as much of the text as keeps the answer's compact
/// JSON within [`MAX_READ_BYTES`] (at least one character, so that reading on always gets
/// further), and where the rest begins when some is left.
pub(super) fn fit_text(path: String, text: &str, offset: u64, more: bool) -> ReadOutput {
    let room = text_room(&path);
    let mut used = 0;
    let mut end = text.len();
    for (at, c) in text.char_indices() {
        used += json_len(c);
        if used > room && at > 0 {
            end = at;
            break;
        }
    }
    // The caller checked that `offset` plus the text's length does not overflow.
    let next_offset = (end < text.len() || more).then(|| offset.saturating_add(end as u64));
    ReadOutput {
        path,
        content: text[..end].to_owned(),
        next_offset,
    }
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

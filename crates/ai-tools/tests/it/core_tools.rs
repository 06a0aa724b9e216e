//! The core tools through the runner, over fake capabilities.

use std::sync::Arc;

use ai_core::{ToolErrorCode, ToolOutcome};
use ai_tools::bind;
use ai_tools::tools::{GetCurrentTime, WorkspaceList, WorkspaceRead, WorkspaceWrite};
use serde_json::{Value, json};

use crate::support::{FixedClock, MemoryWorkspace, run};

fn value(outcome: &ToolOutcome) -> &Value {
    match outcome {
        ToolOutcome::Ok { value } => value,
        other => panic!("expected a value, got {other:?}"),
    }
}

#[tokio::test]
async fn get_current_time_reads_the_clock() {
    let tool = bind(GetCurrentTime::new(Arc::new(FixedClock(1_795_360_872_123)))).unwrap();
    let (ok, _) = run(tool.clone(), "{}").await;
    assert_eq!(
        value(&ok.result.outcome),
        &json!({"unix_ms": 1_795_360_872_123_u64, "iso8601": "2026-11-22T15:21:12.123Z"})
    );
    let (bad, _) = run(tool, r#"{"tz":"UTC"}"#).await;
    assert_eq!(
        bad.result.failure().unwrap().code,
        ToolErrorCode::Validation
    );
}

/// Arguments a tool does not take are refused in words a model can correct its call from, the
/// same for a tool without parameters as for one with: what the tool takes, from its schema,
/// never the name the model sent, which is its own text.
#[tokio::test]
async fn an_argument_the_tool_does_not_take_is_refused_saying_what_it_takes() {
    let canary = "sk-CANARY-7c1d";
    let time = bind(GetCurrentTime::new(Arc::new(FixedClock(0)))).unwrap();
    let read = bind(WorkspaceRead::new(Arc::new(MemoryWorkspace::default()))).unwrap();
    let cases = [
        (
            time,
            format!(r#"{{"{canary}":1}}"#),
            "/ holds a property, but the tool takes no arguments: send `{}`",
        ),
        (
            read.clone(),
            format!(r#"{{"path":"a","{canary}":1}}"#),
            "/ holds a property the tool does not take; the tool takes `offset`, `path`",
        ),
        (
            read,
            format!(r#"{{"path":"a","{canary}":1,"x{canary}":2}}"#),
            "/ holds 2 properties the tool does not take; the tool takes `offset`, `path`",
        ),
    ];
    for (tool, args, expected) in cases {
        let (bad, events) = run(tool, &args).await;
        let failure = bad.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::Validation);
        assert_eq!(
            failure.safe_message,
            format!("invalid tool arguments: {expected}")
        );
        assert!(!format!("{bad:?}{events:?}").contains(canary));
    }
}

#[tokio::test]
async fn workspace_tools_write_read_and_list() {
    let workspace = Arc::new(MemoryWorkspace::default());
    let write = bind(WorkspaceWrite::new(workspace.clone())).unwrap();
    let read = bind(WorkspaceRead::new(workspace.clone())).unwrap();
    let list = bind(WorkspaceList::new(workspace.clone())).unwrap();

    let (w, _) = run(write, r#"{"path":"notes/a.txt","content":"héllo"}"#).await;
    assert_eq!(
        value(&w.result.outcome),
        &json!({"path": "notes/a.txt", "bytes_written": 6})
    );
    let (r, _) = run(read, r#"{"path":"notes/a.txt"}"#).await;
    assert_eq!(
        value(&r.result.outcome),
        &json!({"path": "notes/a.txt", "content": "héllo"})
    );
    let (l, _) = run(list, "{}").await;
    assert_eq!(
        value(&l.result.outcome),
        &json!({"entries": [{"path": "notes/a.txt", "is_dir": false, "size": 6}], "truncated": false})
    );
}

#[tokio::test]
async fn workspace_paths_that_could_escape_are_refused_before_the_capability() {
    let workspace = Arc::new(MemoryWorkspace::default());
    let cases = [
        ("../etc/passwd", "`..` is not allowed"),
        ("a/../../b", "`..` is not allowed"),
        ("/etc/passwd", "must be relative"),
        ("C:/x", "it begins with a drive letter"),
        ("z:x.txt", "it begins with a drive letter"),
        ("a\\\\b", "use `/` as the separator"),
        ("a\\u0000b", "contains NUL"),
        ("", "names no file"),
    ];
    for (path, reason) in cases {
        let write = bind(WorkspaceWrite::new(workspace.clone())).unwrap();
        let args = format!(r#"{{"path":"{path}","content":"x"}}"#);
        let (run, _) = run(write, &args).await;
        let failure = run.result.failure().unwrap();
        // The model's mistake, told without quoting its argument back.
        assert_eq!(failure.code, ToolErrorCode::Validation, "{path}");
        assert!(
            failure.safe_message.contains(reason),
            "{path}: {}",
            failure.safe_message
        );
        assert!(
            failure
                .safe_message
                .starts_with("invalid tool arguments: the path is refused"),
            "{}",
            failure.safe_message
        );
    }
    assert!(workspace.0.lock().unwrap().is_empty());
}

/// Only an ASCII letter and `:` at the start is a drive letter (refused, saying so): `1:x.txt`,
/// `ab:c` and `a/C:x` are plain relative names on the Unix workspace and reach it.
#[tokio::test]
async fn a_colon_that_is_no_drive_letter_is_a_plain_name() {
    let workspace = Arc::new(MemoryWorkspace::default());
    for path in ["1:x.txt", "ab:c", "a/C:x", "_:x", "é:x"] {
        let write = bind(WorkspaceWrite::new(workspace.clone())).unwrap();
        let args = json!({"path": path, "content": "x"}).to_string();
        let (run, _) = run(write, &args).await;
        assert_eq!(
            value(&run.result.outcome),
            &json!({"path": path, "bytes_written": 1}),
            "{path}"
        );
    }
    assert_eq!(workspace.0.lock().unwrap().len(), 5);
}

/// A model that guesses file names fails each call as `validation`: its mistakes neither quote
/// the path back nor count against the tool, so they cannot open the circuit that the runner
/// (shared by every run and tenant) keeps for `core__workspace_read`.
#[tokio::test]
async fn missing_files_are_the_models_mistake_not_the_tools() {
    let canary = "sk-live-CANARY-5b1e";
    let workspace = Arc::new(MemoryWorkspace::default());
    workspace
        .0
        .lock()
        .unwrap()
        .insert("notes.txt".into(), "hello".into());
    let read = bind(WorkspaceRead::new(workspace)).unwrap();
    let runner = crate::support::runner(read);
    for i in 0..6 {
        let (run, events) = runner
            .call(&format!(r#"{{"path":"{canary}-{i}.txt"}}"#))
            .await;
        let failure = run.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::Validation);
        assert_eq!(
            failure.safe_message,
            "invalid tool arguments: nothing exists at the path"
        );
        assert!(!format!("{:?}", events[1]).contains(canary));
    }
    let (run, _) = runner.call(r#"{"path":"notes.txt"}"#).await;
    assert!(run.result.failure().is_none(), "{:?}", run.result);
}

/// Answers `read` with a wrong-kind error chosen by the path, and a text for `notes.txt`.
struct WrongKindWorkspace;

#[async_trait::async_trait]
impl ai_core::Workspace for WrongKindWorkspace {
    async fn list(&self, dir: &str) -> Result<ai_core::WorkspaceListing, ai_core::WorkspaceError> {
        Err(ai_core::WorkspaceError::NotAFolder { path: dir.into() })
    }
    async fn read(&self, path: &str) -> Result<String, ai_core::WorkspaceError> {
        let path = path.to_owned();
        match path.as_str() {
            "notes.txt" => Ok("hello".into()),
            p if p.starts_with("dir") => Err(ai_core::WorkspaceError::IsAFolder { path }),
            p if p.starts_with("pipe") => Err(ai_core::WorkspaceError::NotAFile { path }),
            _ => Err(ai_core::WorkspaceError::NotAFolder { path }),
        }
    }
    async fn write(&self, path: &str, _: &str) -> Result<(), ai_core::WorkspaceError> {
        Err(ai_core::WorkspaceError::IsAFolder { path: path.into() })
    }
}

/// Reading a folder, a pipe or a path through a file is the model's mistake: told as
/// `validation` without the path, and not counted against the tool, so repeating it cannot open
/// the shared circuit for `core__workspace_read`.
#[tokio::test]
async fn wrong_kinds_of_path_are_the_models_mistake_not_the_tools() {
    let read = bind(WorkspaceRead::new(Arc::new(WrongKindWorkspace))).unwrap();
    let runner = crate::support::runner(read);
    for (path, message) in [
        ("dir-CANARY", "the path names a folder, not a file"),
        (
            "pipe-CANARY",
            "the path names something that is not a regular file",
        ),
        ("file-CANARY/x", "a part of the path is not a folder"),
    ] {
        for _ in 0..6 {
            let (run, events) = runner.call(&format!(r#"{{"path":"{path}"}}"#)).await;
            let failure = run.result.failure().unwrap();
            assert_eq!(failure.code, ToolErrorCode::Validation, "{path}");
            assert_eq!(
                failure.safe_message,
                format!("invalid tool arguments: {message}")
            );
            assert!(!format!("{:?}", events[1]).contains("CANARY"));
        }
    }
    let (run, _) = runner.call(r#"{"path":"notes.txt"}"#).await;
    assert!(run.result.failure().is_none(), "{:?}", run.result);
}

/// Answers `read` as a file system answers a file this process may not read (`EACCES`), and a
/// text for `notes.txt`: the double stands in for a refusal root cannot meet by `chmod`.
struct DeniedWorkspace;

#[async_trait::async_trait]
impl ai_core::Workspace for DeniedWorkspace {
    async fn list(&self, dir: &str) -> Result<ai_core::WorkspaceListing, ai_core::WorkspaceError> {
        Err(ai_core::WorkspaceError::PermissionDenied { path: dir.into() })
    }
    async fn read(&self, path: &str) -> Result<String, ai_core::WorkspaceError> {
        match path {
            "notes.txt" => Ok("hello".into()),
            _ => Err(ai_core::WorkspaceError::PermissionDenied { path: path.into() }),
        }
    }
    async fn write(&self, path: &str, _: &str) -> Result<(), ai_core::WorkspaceError> {
        Err(ai_core::WorkspaceError::PermissionDenied { path: path.into() })
    }
}

/// A file the process may not read says nothing of the tool's health: reads of one, past the
/// breaker's window, are the model's `validation` failures (told "permission denied", without
/// the path), the circuit of `core__workspace_read` (shared by every run) stays closed, and a
/// readable file is read next.
#[tokio::test]
async fn a_file_the_process_may_not_read_does_not_open_the_circuit() {
    let read = bind(WorkspaceRead::new(Arc::new(DeniedWorkspace))).unwrap();
    let runner = crate::support::runner(read);
    for _ in 0..6 {
        let (run, events) = runner.call(r#"{"path":"secret-CANARY.txt"}"#).await;
        let failure = run.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::Validation);
        assert_eq!(
            failure.safe_message,
            "invalid tool arguments: permission denied: this process may not use the path"
        );
        assert!(!format!("{:?}", events[1]).contains("CANARY"));
    }
    assert_eq!(runner.breaker(), ai_core::BreakerStatus::Closed);
    let (run, _) = runner.call(r#"{"path":"notes.txt"}"#).await;
    assert!(run.result.failure().is_none(), "{:?}", run.result);
}

/// A file too long for one answer within the runner's default 32 KiB result budget is read in
/// parts: each answer holds as much text as fits in 24 KiB of JSON (escapes counted), cut
/// between characters, and a `next_offset` to read on from; the parts put together are the file.
#[tokio::test]
async fn a_long_file_is_read_in_parts_each_within_the_default_result_budget() {
    // Multi-byte characters, and characters JSON escapes, so no cut falls inside one.
    let text: String = (0..40_000)
        .map(|i| match i % 7 {
            0 => 'é',
            1 => '"',
            2 => '\u{1}',
            3 => '\u{1F426}',
            _ => 'x',
        })
        .collect();
    let workspace = Arc::new(MemoryWorkspace::default());
    workspace
        .0
        .lock()
        .unwrap()
        .insert("big.txt".into(), text.clone());
    let runner = crate::support::runner(bind(WorkspaceRead::new(workspace)).unwrap());
    let mut read = String::new();
    let mut args = json!({"path": "big.txt"});
    let mut parts = 0;
    loop {
        let (run, _) = runner.call(&args.to_string()).await;
        let answer = value(&run.result.outcome).clone();
        assert!(
            answer.to_string().len() <= 24 * 1024,
            "{}",
            answer.to_string().len()
        );
        assert_eq!(answer["path"], "big.txt");
        read.push_str(answer["content"].as_str().unwrap());
        parts += 1;
        match answer.get("next_offset") {
            Some(next) => {
                assert_eq!(next.as_u64().unwrap(), read.len() as u64);
                args = json!({"path": "big.txt", "offset": next});
            }
            None => break,
        }
    }
    assert!(parts > 1, "{parts}");
    assert_eq!(read, text);
}

/// An offset the text has no character at is the model's mistake, told without the number.
#[tokio::test]
async fn an_offset_inside_a_character_or_past_the_end_is_refused() {
    let workspace = Arc::new(MemoryWorkspace::default());
    workspace
        .0
        .lock()
        .unwrap()
        .insert("a.txt".into(), "héllo".into());
    let runner = crate::support::runner(bind(WorkspaceRead::new(workspace)).unwrap());
    for (offset, message) in [
        (
            "2",
            "the offset is inside a character: read on from a `next_offset`; if one gave it, \
             the file has changed since: read it again from the start",
        ),
        (
            "7",
            "the offset is past the end of the file, which is 6 bytes long; if a `next_offset` \
             gave it, the file has changed since: read it again from the start",
        ),
        (
            "18446744073709551615",
            "the offset is past the end of the file, which is 6 bytes long; if a `next_offset` \
             gave it, the file has changed since: read it again from the start",
        ),
    ] {
        let (run, _) = runner
            .call(&format!(r#"{{"path":"a.txt","offset":{offset}}}"#))
            .await;
        let failure = run.result.failure().unwrap();
        assert_eq!(failure.code, ToolErrorCode::Validation, "{offset}");
        assert_eq!(
            failure.safe_message,
            format!("invalid tool arguments: {message}")
        );
    }
    // The end itself is a place to read from: nothing is left.
    let (run, _) = runner.call(r#"{"path":"a.txt","offset":6}"#).await;
    assert_eq!(
        value(&run.result.outcome),
        &json!({"path": "a.txt", "content": ""})
    );
    let (run, _) = runner.call(r#"{"path":"a.txt","offset":3}"#).await;
    assert_eq!(
        value(&run.result.outcome),
        &json!({"path": "a.txt", "content": "llo"})
    );
}

/// One file, `f.txt`, as bytes, read only in parts: a whole read is an error, so a tool that
/// reads the whole file fails. Each part holds at most `cap` bytes, and its length is logged.
struct PartsWorkspace {
    file: std::sync::Mutex<Vec<u8>>,
    cap: usize,
    parts: std::sync::Mutex<Vec<usize>>,
}

impl PartsWorkspace {
    fn new(file: impl Into<Vec<u8>>) -> Arc<Self> {
        Arc::new(Self {
            file: std::sync::Mutex::new(file.into()),
            cap: usize::MAX,
            parts: std::sync::Mutex::default(),
        })
    }
}

#[async_trait::async_trait]
impl ai_core::Workspace for PartsWorkspace {
    async fn list(&self, _: &str) -> Result<ai_core::WorkspaceListing, ai_core::WorkspaceError> {
        Ok(ai_core::WorkspaceListing::default())
    }
    async fn read(&self, path: &str) -> Result<String, ai_core::WorkspaceError> {
        Err(ai_core::WorkspaceError::Io {
            path: path.into(),
            reason: "a whole read".into(),
        })
    }
    async fn write(&self, path: &str, _: &str) -> Result<(), ai_core::WorkspaceError> {
        Err(ai_core::WorkspaceError::ReadOnly { path: path.into() })
    }
    async fn read_part(
        &self,
        path: &str,
        offset: u64,
        max_bytes: usize,
    ) -> Result<ai_core::FilePart, ai_core::WorkspaceError> {
        if path != "f.txt" {
            return Err(ai_core::WorkspaceError::NotFound { path: path.into() });
        }
        let file = self.file.lock().unwrap();
        let start = usize::try_from(offset).map_or(file.len(), |at| at.min(file.len()));
        let end = start
            .saturating_add(max_bytes.min(self.cap))
            .min(file.len());
        self.parts.lock().unwrap().push(end - start);
        Ok(ai_core::FilePart {
            bytes: file[start..end].to_vec(),
            more: end < file.len(),
            size: file.len() as u64,
        })
    }
}

/// Reads `f.txt` through `runner` from `offset`: the answer, or the failure's code and message.
async fn read_from(
    runner: &crate::support::OneToolRunner,
    offset: Option<u64>,
) -> Result<Value, (ToolErrorCode, String)> {
    let args = match offset {
        Some(offset) => json!({"path": "f.txt", "offset": offset}),
        None => json!({"path": "f.txt"}),
    };
    let (run, _) = runner.call(&args.to_string()).await;
    match run.result.failure() {
        Some(failure) => Err((failure.code, failure.safe_message.clone())),
        None => Ok(value(&run.result.outcome).clone()),
    }
}

/// Each part of a long file costs what it answers with, not the file: the workspace is asked
/// for a part, never the whole, and each part it gives holds at most 3 bytes more than the
/// answer's text (the rest of a character cut at the part's end). The parts make up the file.
#[tokio::test]
async fn each_part_reads_only_what_it_answers_with() {
    let text: String = (0..300_000)
        .map(|i| match i % 5 {
            0 => 'é',
            1 => '\u{1F426}',
            2 => '€',
            _ => 'x',
        })
        .collect();
    let workspace = PartsWorkspace::new(text.clone());
    let runner = crate::support::runner(bind(WorkspaceRead::new(workspace.clone())).unwrap());
    let mut read = String::new();
    let mut offset = None;
    loop {
        let answer = read_from(&runner, offset).await.unwrap();
        let content = answer["content"].as_str().unwrap();
        let part = *workspace.parts.lock().unwrap().last().unwrap();
        assert!(part <= content.len() + 3, "{part} {}", content.len());
        read.push_str(content);
        match answer.get("next_offset") {
            Some(next) => offset = next.as_u64(),
            None => break,
        }
    }
    assert_eq!(read, text);
    let parts = workspace.parts.lock().unwrap();
    assert!(parts.len() > 20, "{}", parts.len());
    assert!(parts.iter().sum::<usize>() <= text.len() + 3 * parts.len());
}

/// A file that changed between two parts: the offset the first answer gave is now past the end
/// (the file is shorter) or inside a character, and the answer says so, and to read the file
/// again from the start, without quoting the offset.
#[tokio::test]
async fn a_file_that_changed_between_parts_is_told_so() {
    let workspace = PartsWorkspace::new("x".repeat(30_000));
    let runner = crate::support::runner(bind(WorkspaceRead::new(workspace.clone())).unwrap());
    let first = read_from(&runner, None).await.unwrap();
    let next = first["next_offset"].as_u64().unwrap();
    *workspace.file.lock().unwrap() = b"short now".to_vec();
    assert_eq!(
        read_from(&runner, Some(next)).await.unwrap_err(),
        (
            ToolErrorCode::Validation,
            "invalid tool arguments: the offset is past the end of the file, which is 9 bytes \
             long; if a `next_offset` gave it, the file has changed since: read it again from \
             the start"
                .into()
        )
    );
    let mut changed = "é".repeat(20_000).into_bytes();
    if next % 2 == 0 {
        changed.insert(0, b'x');
    }
    *workspace.file.lock().unwrap() = changed;
    let (code, message) = read_from(&runner, Some(next)).await.unwrap_err();
    assert_eq!(code, ToolErrorCode::Validation);
    assert_eq!(
        message,
        "invalid tool arguments: the offset is inside a character: read on from a \
         `next_offset`; if one gave it, the file has changed since: read it again from the start"
    );
    assert!(!message.contains(&next.to_string()), "{message}");
}

/// Text is checked part by part: a part that is not UTF-8 (a byte no character begins with, or a
/// file that ends inside a character) is refused as not text, while the parts before it were
/// answered; an offset at a byte inside a character is refused as such.
#[tokio::test]
async fn a_part_that_is_not_text_is_refused() {
    let not_text = |runner_result: Result<Value, (ToolErrorCode, String)>| {
        assert_eq!(
            runner_result.unwrap_err(),
            (
                ToolErrorCode::Validation,
                "invalid tool arguments: the file is not UTF-8 text".into()
            )
        );
    };
    for file in [&b"\xffabc"[..], b"abc\xc3", b"ab\xc3(c"] {
        let runner = crate::support::runner(
            bind(WorkspaceRead::new(PartsWorkspace::new(file.to_vec()))).unwrap(),
        );
        not_text(read_from(&runner, None).await);
    }
    let mut file = "x".repeat(30_000).into_bytes();
    file.extend_from_slice(b"\xff");
    let runner =
        crate::support::runner(bind(WorkspaceRead::new(PartsWorkspace::new(file))).unwrap());
    let first = read_from(&runner, None).await.unwrap();
    let next = first["next_offset"].as_u64().unwrap();
    not_text(read_from(&runner, Some(next)).await);
    let runner =
        crate::support::runner(bind(WorkspaceRead::new(PartsWorkspace::new("aé"))).unwrap());
    assert_eq!(
        read_from(&runner, Some(2)).await.unwrap_err().1,
        "invalid tool arguments: the offset is inside a character: read on from a \
         `next_offset`; if one gave it, the file has changed since: read it again from the start"
    );
    assert_eq!(
        read_from(&runner, Some(1)).await.unwrap(),
        json!({"path": "f.txt", "content": "é"})
    );
}

/// A workspace that gives less than one whole character while more follows (its own cap on a
/// part is under 4 bytes) is the tool failing, said so, not an answer whose `next_offset` goes
/// nowhere.
#[tokio::test]
async fn a_part_too_small_for_a_character_is_the_workspaces_failure() {
    let workspace = Arc::new(PartsWorkspace {
        file: std::sync::Mutex::new("€uro".into()),
        cap: 2,
        parts: std::sync::Mutex::default(),
    });
    let runner = crate::support::runner(bind(WorkspaceRead::new(workspace)).unwrap());
    let (code, message) = read_from(&runner, None).await.unwrap_err();
    assert_eq!(code, ToolErrorCode::Execution);
    assert_eq!(
        message,
        "the tool failed: the workspace gave too little of the file to hold one character"
    );
}

/// A file that is not UTF-8 because a byte no character begins with stands exactly where a part
/// ended is refused as not text, not as an offset inside a character: that answer tells the
/// model to read the file again from the start, which would give it the same `next_offset` and
/// the same answer for ever. An offset that is inside a character stays told so.
#[tokio::test]
async fn a_stray_byte_where_a_part_ends_is_not_text_not_an_offset_inside_a_character() {
    let mut file = "x".repeat(30_000).into_bytes();
    let runner = crate::support::runner(
        bind(WorkspaceRead::new(PartsWorkspace::new(file.clone()))).unwrap(),
    );
    let next = read_from(&runner, None).await.unwrap()["next_offset"]
        .as_u64()
        .unwrap();
    file.insert(usize::try_from(next).unwrap(), 0x80);
    let runner =
        crate::support::runner(bind(WorkspaceRead::new(PartsWorkspace::new(file))).unwrap());
    assert_eq!(
        read_from(&runner, None).await.unwrap()["next_offset"],
        json!(next)
    );
    assert_eq!(
        read_from(&runner, Some(next)).await.unwrap_err(),
        (
            ToolErrorCode::Validation,
            "invalid tool arguments: the file is not UTF-8 text".into()
        )
    );
    // A character's bytes before a stray one do not make it part of the character.
    for (file, offset) in [(&b"a\xc3\xa9\x80"[..], 3), (b"\xe2\x82\x80\x80", 3)] {
        let runner = crate::support::runner(
            bind(WorkspaceRead::new(PartsWorkspace::new(file.to_vec()))).unwrap(),
        );
        assert_eq!(
            read_from(&runner, Some(offset)).await.unwrap_err().1,
            "invalid tool arguments: the file is not UTF-8 text",
            "{file:?}"
        );
    }
    // Inside a character of two, three and four bytes, at each byte after the first.
    for (file, offsets) in [
        ("aé", &[2][..]),
        ("a€", &[2, 3]),
        ("a\u{1F426}", &[2, 3, 4]),
    ] {
        let runner =
            crate::support::runner(bind(WorkspaceRead::new(PartsWorkspace::new(file))).unwrap());
        for &offset in offsets {
            assert_eq!(
                read_from(&runner, Some(offset)).await.unwrap_err().1,
                "invalid tool arguments: the offset is inside a character: read on from a \
                 `next_offset`; if one gave it, the file has changed since: read it again from \
                 the start",
                "{file} {offset}"
            );
        }
    }
}

/// A file of `x` at every offset, however far, with more always after: a workspace that
/// answers offsets no file reaches.
struct EndlessWorkspace;

#[async_trait::async_trait]
impl ai_core::Workspace for EndlessWorkspace {
    async fn list(&self, _: &str) -> Result<ai_core::WorkspaceListing, ai_core::WorkspaceError> {
        Ok(ai_core::WorkspaceListing::default())
    }
    async fn read(&self, path: &str) -> Result<String, ai_core::WorkspaceError> {
        Err(ai_core::WorkspaceError::TooLarge {
            path: path.into(),
            size: u64::MAX,
            limit: 0,
        })
    }
    async fn write(&self, path: &str, _: &str) -> Result<(), ai_core::WorkspaceError> {
        Err(ai_core::WorkspaceError::ReadOnly { path: path.into() })
    }
    async fn read_part(
        &self,
        _: &str,
        _: u64,
        max_bytes: usize,
    ) -> Result<ai_core::FilePart, ai_core::WorkspaceError> {
        Ok(ai_core::FilePart {
            bytes: vec![b'x'; max_bytes.min(64)],
            more: true,
            size: u64::MAX,
        })
    }
}

/// A `next_offset` always lies past the offset read from: text a workspace gives past the
/// largest offset there is (which no `next_offset` could count to) is the tool failing, said
/// so, not an answer whose `next_offset` stands still (reading on from it would give the same
/// answer for ever).
#[tokio::test]
async fn a_next_offset_never_stands_still() {
    let runner =
        crate::support::runner(bind(WorkspaceRead::new(Arc::new(EndlessWorkspace))).unwrap());
    assert_eq!(
        read_from(&runner, Some(u64::MAX - 64)).await.unwrap()["next_offset"],
        json!(u64::MAX)
    );
    for offset in [u64::MAX - 63, u64::MAX - 1, u64::MAX] {
        assert_eq!(
            read_from(&runner, Some(offset)).await.unwrap_err(),
            (
                ToolErrorCode::Execution,
                "the tool failed: the workspace gave text past the largest offset a file can have"
                    .into()
            ),
            "{offset}"
        );
    }
}

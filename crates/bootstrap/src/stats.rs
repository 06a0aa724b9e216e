//! Tool statistics kept across `cogni tools call` processes, in a JSON file of the data folder.
//!
//! Each CLI process runs one call, so its runner's statistics hold one latency sample per tool
//! called; they are merged into `tool-stats.json` under an exclusive lock on
//! `tool-stats.json.lock` (so calls that overlap are all counted), written to a temporary file
//! named for the process, synced and renamed, then the folder synced (so neither a crash nor a
//! power loss leaves half a file). A damaged file is set aside as `tool-stats.json.bad` and
//! counting starts over. A temp file a process left when it died before its rename is removed
//! by the next process that takes the lock.

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use ai_core::{BreakerStatus, LatencyPercentiles, ToolErrorCategory, ToolId, ToolStats};
use anyhow::Context;
use serde::{Deserialize, Serialize};

const FILE: &str = "tool-stats.json";
const SAMPLES: usize = 512;
/// The most the file is read of: a tool's entry at its largest (every count and sample at
/// `u64::MAX`, pretty-printed) is about 16 KiB, so this holds some 250 tools, far more than any
/// build has, and a file past it is not one this module wrote.
const MAX_FILE_BYTES: u64 = 4 << 20;

#[derive(Default, Serialize, Deserialize)]
struct Stored {
    tools: BTreeMap<ToolId, StoredTool>,
}

#[derive(Serialize, Deserialize)]
struct StoredTool {
    calls: u64,
    successes: u64,
    failures: BTreeMap<ToolErrorCategory, u64>,
    retries: u64,
    breaker: BreakerStatus,
    latencies_us: VecDeque<u64>,
}

/// The stored statistics: `Ok(None)` when there is no file yet, `Err` when it cannot be read
/// (or is over [`MAX_FILE_BYTES`]), and `Ok(Some(Err(_)))` when it is not a statistics file.
fn read_stored(path: &Path) -> anyhow::Result<Option<Result<Stored, serde_json::Error>>> {
    let cannot_read = || format!("cannot read {}", path.display());
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(cannot_read),
    };
    let bytes = crate::bounded::read_at_most(file, MAX_FILE_BYTES)
        .with_context(cannot_read)?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{}: it is over {}, more than any statistics file holds",
                cannot_read(),
                crate::bounded::size(MAX_FILE_BYTES)
            )
        })?;
    Ok(Some(serde_json::from_slice(&bytes)))
}

/// Merges one process's statistics into the data folder's file. Returns a warning to show when
/// the file was damaged and counting started over (the damaged file is kept aside).
pub(crate) fn record(dir: &Path, stats: &[ToolStats]) -> anyhow::Result<Option<String>> {
    adapters::create_private_dir(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(FILE);
    let lock_path = dir.join(format!("{FILE}.lock"));
    // Held until the new file is in place: another process's read-merge-write waits for it.
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    remove_left_temps(dir);
    let mut warning = None;
    let mut stored = match read_stored(&path)? {
        Some(Ok(stored)) => stored,
        None => Stored::default(),
        Some(Err(error)) => {
            let bad = dir.join(format!("{FILE}.bad"));
            std::fs::rename(&path, &bad)
                .with_context(|| format!("cannot move {} aside", path.display()))?;
            warning = Some(format!(
                "{} was not a statistics file ({error}); it was moved to {} and counting starts over",
                path.display(),
                bad.display()
            ));
            Stored::default()
        }
    };
    for s in stats {
        let tool = stored
            .tools
            .entry(s.tool_id.clone())
            .or_insert_with(|| StoredTool {
                calls: 0,
                successes: 0,
                failures: BTreeMap::new(),
                retries: 0,
                breaker: BreakerStatus::Closed,
                latencies_us: VecDeque::new(),
            });
        // A count that is full (a file edited by hand, say) stays full rather than wrapping.
        tool.calls = tool.calls.saturating_add(s.calls);
        tool.successes = tool.successes.saturating_add(s.successes);
        for (category, n) in &s.failures {
            let count = tool.failures.entry(*category).or_default();
            *count = count.saturating_add(*n);
        }
        tool.retries = tool.retries.saturating_add(s.retries);
        tool.breaker = s.breaker;
        if s.calls > 0 {
            // The newest samples: a file holding more than `SAMPLES` keeps its last ones.
            while tool.latencies_us.len() >= SAMPLES {
                tool.latencies_us.pop_front();
            }
            tool.latencies_us.push_back(s.latency.p50_us);
        }
    }
    let tmp = dir.join(format!("{FILE}.{}.tmp", std::process::id()));
    write_synced(&tmp, &serde_json::to_vec_pretty(&stored)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot replace {}", path.display()))?;
    // The rename is durable once the folder is: after a power loss the file is the old one or
    // the new one, never an empty one taken for damage.
    File::open(dir)
        .and_then(|folder| folder.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))?;
    drop(lock);
    Ok(warning)
}

/// The statistics recorded in the data folder, ordered by tool id. A folder that does not
/// exist is an error (a mistyped path is not "no calls"), and so is a path that is a file or
/// one the OS will not show, each said as it is; a folder without the file has none.
pub(crate) fn load(dir: &Path) -> anyhow::Result<Vec<ToolStats>> {
    let shown = dir.display();
    match std::fs::metadata(dir) {
        Ok(found) if found.is_dir() => {}
        Ok(_) => anyhow::bail!("no tool statistics in {shown}: it is not a folder"),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("no tool statistics in {shown}: the folder does not exist")
        }
        Err(error) => anyhow::bail!("no tool statistics in {shown}: cannot look at it: {error}"),
    }
    let path = dir.join(FILE);
    let stored = match read_stored(&path)? {
        Some(stored) => {
            stored.with_context(|| format!("{} is not a statistics file", path.display()))?
        }
        None => Stored::default(),
    };
    Ok(stored
        .tools
        .into_iter()
        .map(|(tool_id, t)| {
            let mut samples: Vec<u64> = t.latencies_us.into_iter().collect();
            ToolStats {
                tool_id,
                calls: t.calls,
                successes: t.successes,
                failures: t.failures,
                retries: t.retries,
                breaker: t.breaker,
                latency: LatencyPercentiles::from_samples(&mut samples),
            }
        })
        .collect())
}

/// Removes the temp files (`tool-stats.json.<pid>.tmp`) a process that died before its rename
/// left in `dir`. Called under the lock: no writer is running, so every such file is a leftover,
/// whatever its age. Only regular files of exactly that name are touched; a failure leaves the
/// file for the next call.
fn remove_left_temps(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let ours = name.to_str().is_some_and(|name| {
            name.strip_prefix(FILE)
                .and_then(|rest| rest.strip_prefix('.'))
                .and_then(|rest| rest.strip_suffix(".tmp"))
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        });
        // `file_type` does not follow a symlink.
        if ours && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Writes `bytes` to a new file at `path` and syncs it to disk.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound holds 250 tools at their largest: the longest id, every count and sample at
    /// `u64::MAX`, a failure count in every category.
    #[test]
    fn the_file_bound_holds_250_tools_at_their_largest() {
        use ToolErrorCategory::*;
        let categories = [
            Validation, Execution, Timeout, Cancelled, Transient, Permanent, Policy, Unknown,
        ];
        let tool = StoredTool {
            calls: u64::MAX,
            successes: u64::MAX,
            failures: categories.into_iter().map(|c| (c, u64::MAX)).collect(),
            retries: u64::MAX,
            breaker: BreakerStatus::HalfOpen,
            latencies_us: VecDeque::from(vec![u64::MAX; SAMPLES]),
        };
        let id = ToolId::parse(&format!("core__{}", "x".repeat(58))).unwrap();
        let one = Stored {
            tools: BTreeMap::from([(id, tool)]),
        };
        let bytes = serde_json::to_vec_pretty(&one).unwrap().len() as u64;
        assert!(250 * bytes <= MAX_FILE_BYTES, "{bytes} bytes a tool");
    }

    /// A temp file a process left when it died before its rename is removed by the next record
    /// (which holds the lock, so no writer is running); other names are left as they are.
    #[test]
    fn a_record_removes_the_temp_files_a_dead_process_left() {
        let dir = tempfile::tempdir().unwrap();
        let left = dir.path().join(format!("{FILE}.4242.tmp"));
        std::fs::write(&left, "{").unwrap();
        let kept = [
            format!("{FILE}.x.tmp"),
            format!("{FILE}..tmp"),
            format!("{FILE}.bad"),
            "notes.4242.tmp".to_owned(),
        ];
        for name in &kept {
            std::fs::write(dir.path().join(name), "keep").unwrap();
        }
        assert_eq!(record(dir.path(), &[]).unwrap(), None);
        assert!(!left.exists(), "the left temp file is still there");
        for name in &kept {
            assert!(dir.path().join(name).exists(), "{name} was removed");
        }
        assert!(dir.path().join(FILE).is_file());
    }
}

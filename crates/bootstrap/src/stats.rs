//! Tool statistics kept across `cogni tools call` processes, in a JSON file of the data folder.
//!
//! Each CLI process runs one call, so its runner's statistics hold one latency sample per tool
//! called; they are merged into `tool-stats.json` (written to a temporary file and renamed, so
//! a crash never leaves half a file).

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use ai_core::{BreakerStatus, LatencyPercentiles, ToolErrorCategory, ToolId, ToolStats};
use anyhow::Context;
use serde::{Deserialize, Serialize};

const FILE: &str = "tool-stats.json";
const SAMPLES: usize = 512;

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

fn load_stored(dir: &Path) -> anyhow::Result<Stored> {
    let path = dir.join(FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a statistics file", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Stored::default()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Merges one process's statistics into the data folder's file.
pub(crate) fn record(dir: &Path, stats: &[ToolStats]) -> anyhow::Result<()> {
    let mut stored = load_stored(dir)?;
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
        tool.calls += s.calls;
        tool.successes += s.successes;
        for (category, n) in &s.failures {
            *tool.failures.entry(*category).or_default() += n;
        }
        tool.retries += s.retries;
        tool.breaker = s.breaker;
        if s.calls > 0 {
            if tool.latencies_us.len() == SAMPLES {
                tool.latencies_us.pop_front();
            }
            tool.latencies_us.push_back(s.latency.p50_us);
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = dir.join(format!("{FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(&stored)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, dir.join(FILE))
        .with_context(|| format!("cannot replace {}", dir.join(FILE).display()))
}

/// The statistics recorded in the data folder, ordered by tool id.
pub(crate) fn load(dir: &Path) -> anyhow::Result<Vec<ToolStats>> {
    Ok(load_stored(dir)?
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

//! Recovery when the run store fails: one run that cannot be closed does not keep the others
//! open, and it is closed at the next start.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use adapters::{InMemoryBlobStore, InMemoryRunStore, ReceiptCollector};
use ai_core::{
    AiEvent, Clock, InterruptedRun, RunHeader, RunId, RunLog, RunStep, RunStore, RunStoreError,
    ThreadId, ToolCallId,
};
use async_trait::async_trait;

use super::{RunLogStores, Stores, recover};

/// An in-memory run store whose `commit_step` fails for one run, while `failing` names it.
#[derive(Default)]
struct FailingCommits {
    inner: InMemoryRunStore,
    failing: Mutex<Option<RunId>>,
}

#[async_trait]
impl RunStore for FailingCommits {
    async fn begin_run(
        &self,
        run_id: &RunId,
        thread_id: Option<&ThreadId>,
        at_ms: u64,
        input_ref: Option<&str>,
    ) -> Result<(), RunStoreError> {
        self.inner
            .begin_run(run_id, thread_id, at_ms, input_ref)
            .await
    }

    async fn commit_step(
        &self,
        run_id: &RunId,
        step: RunStep,
    ) -> Result<Range<u64>, RunStoreError> {
        if self.failing.lock().unwrap().as_ref() == Some(run_id) {
            return Err(RunStoreError::Backend("disk I/O error".into()));
        }
        self.inner.commit_step(run_id, step).await
    }

    async fn finish_run(&self, run_id: &RunId, at_ms: u64) -> Result<(), RunStoreError> {
        self.inner.finish_run(run_id, at_ms).await
    }

    async fn list_runs(&self) -> Result<Vec<RunHeader>, RunStoreError> {
        self.inner.list_runs().await
    }

    async fn load_run(&self, run_id: &RunId) -> Result<RunLog, RunStoreError> {
        self.inner.load_run(run_id).await
    }

    async fn recover_interrupted(&self, at_ms: u64) -> Result<Vec<InterruptedRun>, RunStoreError> {
        self.inner.recover_interrupted(at_ms).await
    }
}

struct FixedClock;

impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        5_000
    }
}

fn stores(runs: Arc<FailingCommits>) -> Stores {
    Stores {
        threads: Arc::new(graph::InMemoryThreadStore::default()),
        log: Some(RunLogStores {
            runs,
            blobs: Arc::new(InMemoryBlobStore::default()),
            receipts: Arc::new(ReceiptCollector::default()),
        }),
    }
}

/// Whether the run's log ends with `Done` after an `interrupted` result for its call.
async fn closed(runs: &FailingCommits, run_id: &RunId) -> bool {
    let events = runs.load_run(run_id).await.unwrap().events;
    matches!(
        events.as_slice(),
        [.., AiEvent::ToolCallResult { tool_call_id, .. }, AiEvent::Error { .. }, AiEvent::Done { .. }]
            if tool_call_id.as_str() == "call-1"
    )
}

#[tokio::test]
async fn a_run_that_cannot_be_closed_does_not_stop_the_others_and_is_closed_next_time() {
    let runs = Arc::new(FailingCommits::default());
    let (first, second) = (RunId::new("run-a").unwrap(), RunId::new("run-b").unwrap());
    for (run_id, at_ms) in [(&first, 1), (&second, 2)] {
        runs.begin_run(run_id, None, at_ms, None).await.unwrap();
        let start = AiEvent::ToolCallStart {
            tool_call_id: ToolCallId::new("call-1").unwrap(),
            tool_name: "core__get_current_time".into(),
            args: None,
        };
        let step = RunStep {
            events: vec![start],
            ..RunStep::default()
        };
        runs.commit_step(run_id, step).await.unwrap();
    }
    // The run tried first cannot be closed: the other one still is, and the error names it.
    *runs.failing.lock().unwrap() = Some(first.clone());
    let stores = stores(runs.clone());
    let error = recover(&stores, &FixedClock).await.unwrap_err().to_string();
    assert!(
        error.contains("1 of 2 failed")
            && error.contains("run-a: run store failed: disk I/O error"),
        "{error}"
    );
    assert!(!closed(&runs, &first).await);
    assert!(closed(&runs, &second).await);

    // At the next start the store names it again and it is closed; then nothing is left.
    *runs.failing.lock().unwrap() = None;
    assert_eq!(
        recover(&stores, &FixedClock).await.unwrap(),
        std::slice::from_ref(&first)
    );
    assert!(closed(&runs, &first).await);
    assert!(recover(&stores, &FixedClock).await.unwrap().is_empty());
}

//! The RunStore and ThreadStore contract, run against every implementation in this crate
//! (SqliteStore and InMemoryRunStore): a new implementation (Postgres, …) adds one line to
//! `contract!` below and must pass the same tests.

use std::sync::Arc;

use ai_core::{
    AiEvent, DanglingToolCall, RunStatus, RunStep, RunStore, RunStoreError, ThreadId, ThreadStore,
    ThreadStoreError, ToolCallStatus, ToolErrorCode, ToolFailure, ToolInvocationRecord,
    ToolOutcome, sha256_hex,
};
use serde_json::{Value, json};

use crate::support::{
    call, done, null_args_start, record, refused_start, result, run, running, six_events, start,
};

/// Both ports, as one object.
pub(crate) trait Stores: RunStore + ThreadStore {}
impl<T: RunStore + ThreadStore> Stores for T {}

fn thread(id: &str) -> ThreadId {
    ThreadId::new(id).unwrap()
}

/// The events of a finished run with one call, `id`, whose arguments and result are both
/// `value`, and the call's record holding it likewise (no raw receipt).
fn call_carrying(id: &str, value: &Value) -> (Vec<AiEvent>, ToolInvocationRecord) {
    let AiEvent::ToolCallStart {
        tool_call_id,
        tool_name,
        ..
    } = start(id)
    else {
        unreachable!()
    };
    let value = Arc::new(value.clone());
    let events = vec![
        AiEvent::ToolCallStart {
            tool_call_id: tool_call_id.clone(),
            tool_name: tool_name.clone(),
            args: Some(Arc::clone(&value)),
        },
        AiEvent::ToolCallResult {
            tool_call_id,
            tool_name,
            outcome: ToolOutcome::Ok {
                value: Arc::clone(&value),
            },
        },
        done(),
    ];
    let mut record = record(id, "RAW");
    record.args = Some(Arc::clone(&value));
    record.result = Some(value);
    record.raw = None;
    (events, record)
}

fn receipt_ref(n: u32) -> String {
    sha256_hex(format!("receipt {n}").as_bytes())
}

async fn steps_are_numbered_in_order_and_loaded_whole(store: &dyn Stores) {
    let r = run("run-1");
    let t = thread("thread-1");
    let input = receipt_ref(0);
    store
        .begin_run(&r, Some(&t), 1_000, Some(&input))
        .await
        .unwrap();
    let first = RunStep {
        events: six_events("s1"),
        records: vec![record("s1-a", "RAW"), record("s1-b", "RAW")],
        receipt_refs: vec![receipt_ref(1)],
        thread_state: Some(json!({"step": 1})),
        thread_state_if_saved: None,
        refuse_if_thread_changed: false,
    };
    assert_eq!(store.commit_step(&r, first.clone()).await.unwrap(), 0..6);
    assert_eq!(
        store.commit_step(&r, RunStep::default()).await.unwrap(),
        6..6
    );
    let second = RunStep {
        events: vec![done()],
        receipt_refs: vec![receipt_ref(2)],
        ..RunStep::default()
    };
    assert_eq!(store.commit_step(&r, second).await.unwrap(), 6..7);
    store.finish_run(&r, 2_000).await.unwrap();

    let log = store.load_run(&r).await.unwrap();
    assert_eq!(log.header.thread_id, Some(t.clone()));
    assert_eq!(log.header.input_ref, Some(input));
    assert_eq!(log.header.status, RunStatus::Finished);
    assert_eq!(
        (log.header.started_at_ms, log.header.finished_at_ms),
        (1_000, Some(2_000))
    );
    let mut expected = six_events("s1");
    expected.push(done());
    assert_eq!(log.events, expected);
    assert_eq!(log.receipt_refs, vec![receipt_ref(1), receipt_ref(2)]);
    let expected_records: Vec<_> = first
        .records
        .iter()
        .cloned()
        .map(|mut r| {
            r.raw = None;
            r
        })
        .collect();
    assert_eq!(log.records, expected_records);
    // A step without a thread state leaves the thread as the last one saved it.
    assert_eq!(store.load(&t).await.unwrap(), Some(json!({"step": 1})));
}

async fn threads_are_saved_and_replaced(store: &dyn Stores) {
    let t = thread("thread-1");
    assert_eq!(store.load(&t).await.unwrap(), None);
    store.save(&t, None, &json!({"turn": 1})).await.unwrap();
    let first = store.load(&t).await.unwrap();
    store
        .save(&t, first.as_ref(), &json!({"turn": 2}))
        .await
        .unwrap();
    assert_eq!(store.load(&t).await.unwrap(), Some(json!({"turn": 2})));
    assert_eq!(store.load(&thread("other")).await.unwrap(), None);
}

/// A save is a compare-and-swap: one over a state the thread no longer holds (another save came
/// between its load and it), or over none when the thread has one, or over one when it has
/// none, is refused as `Changed` and writes nothing.
async fn a_save_over_a_stale_state_is_refused_and_changes_nothing(store: &dyn Stores) {
    let t = thread("thread-stale");
    store.save(&t, None, &json!({"turn": 1})).await.unwrap();
    let read = store.load(&t).await.unwrap();
    store
        .save(&t, read.as_ref(), &json!({"turn": "winner"}))
        .await
        .unwrap();
    for stale in [read.as_ref(), None] {
        assert_eq!(
            store.save(&t, stale, &json!({"turn": "loser"})).await,
            Err(ThreadStoreError::Changed)
        );
        assert_eq!(
            store.load(&t).await.unwrap(),
            Some(json!({"turn": "winner"}))
        );
    }
    let absent = thread("thread-absent");
    assert_eq!(
        store
            .save(&absent, read.as_ref(), &json!({"turn": 1}))
            .await,
        Err(ThreadStoreError::Changed)
    );
    assert_eq!(store.load(&absent).await.unwrap(), None);
}

async fn runs_are_listed_oldest_first(store: &dyn Stores) {
    store.begin_run(&run("b"), None, 20, None).await.unwrap();
    store.begin_run(&run("a"), None, 30, None).await.unwrap();
    store.begin_run(&run("a2"), None, 30, None).await.unwrap();
    store
        .begin_run(&run("c"), Some(&thread("t")), 10, None)
        .await
        .unwrap();
    store.finish_run(&run("c"), 40).await.unwrap();
    let runs = store.list_runs().await.unwrap();
    let ids: Vec<_> = runs.iter().map(|h| h.run_id.to_string()).collect();
    assert_eq!(ids, ["c", "b", "a", "a2"]);
    assert_eq!(runs[0].status, RunStatus::Finished);
    assert_eq!(runs[0].thread_id, Some(thread("t")));
    assert_eq!(runs[1].status, RunStatus::Running);
    assert_eq!(runs[1].finished_at_ms, None);
}

async fn runs_are_summarized_with_their_event_counts(store: &dyn Stores) {
    store.begin_run(&run("b"), None, 20, None).await.unwrap();
    store.begin_run(&run("a"), None, 30, None).await.unwrap();
    let t = thread("t");
    store
        .begin_run(&run("c"), Some(&t), 10, None)
        .await
        .unwrap();
    store
        .commit_step(
            &run("b"),
            RunStep {
                events: six_events("s1"),
                ..RunStep::default()
            },
        )
        .await
        .unwrap();
    store
        .commit_step(
            &run("c"),
            RunStep {
                events: vec![done()],
                ..RunStep::default()
            },
        )
        .await
        .unwrap();
    store.finish_run(&run("c"), 40).await.unwrap();
    let summaries = store.list_run_summaries().await.unwrap();
    let headers = store.list_runs().await.unwrap();
    let listed: Vec<_> = summaries.iter().map(|s| s.header.clone()).collect();
    assert_eq!(listed, headers);
    let counts: Vec<_> = summaries
        .iter()
        .map(|s| (s.header.run_id.to_string(), s.event_count))
        .collect();
    assert_eq!(
        counts,
        [
            ("c".to_owned(), 1),
            ("b".to_owned(), 6),
            ("a".to_owned(), 0)
        ]
    );
}

async fn a_time_past_the_stores_range_is_refused_and_writes_nothing(store: &dyn Stores) {
    let late = ai_core::MAX_RUN_TIME_MS + 1;
    let refused = |what| RunStoreError::TimeOutOfRange { what, at_ms: late };
    let r = run("run-1");
    assert_eq!(
        store.begin_run(&r, None, u64::MAX, None).await,
        Err(RunStoreError::TimeOutOfRange {
            what: "start time",
            at_ms: u64::MAX
        })
    );
    assert_eq!(
        store.begin_run(&r, None, late, None).await,
        Err(refused("start time"))
    );
    assert!(store.list_runs().await.unwrap().is_empty());
    let err = store.begin_run(&r, None, late, None).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the start time {late} ms is past the latest time a run store keeps ({} ms): the \
             clock that gave it is wrong, and nothing was written",
            ai_core::MAX_RUN_TIME_MS
        )
    );

    // The latest time kept is read back as it was given.
    let max = ai_core::MAX_RUN_TIME_MS;
    store.begin_run(&r, None, max, None).await.unwrap();
    assert_eq!(
        store.finish_run(&r, late).await,
        Err(refused("finish time"))
    );
    assert_eq!(
        store
            .recover_interrupted(late, std::slice::from_ref(&r))
            .await,
        Err(refused("recovery time"))
    );
    let header = store.load_run(&r).await.unwrap().header;
    assert_eq!(
        (header.status, header.started_at_ms, header.finished_at_ms),
        (RunStatus::Running, max, None)
    );
    store.finish_run(&r, max).await.unwrap();
    let header = store.load_run(&r).await.unwrap().header;
    assert_eq!(header.finished_at_ms, Some(max));
}

async fn status_rules_refuse_and_write_nothing(store: &dyn Stores) {
    let r = run("run-1");
    let unknown = run("nope");
    assert_eq!(
        store.load_run(&unknown).await,
        Err(RunStoreError::NotFound(unknown.clone()))
    );
    assert_eq!(
        store.commit_step(&unknown, RunStep::default()).await,
        Err(RunStoreError::NotFound(unknown.clone()))
    );
    assert_eq!(
        store.finish_run(&unknown, 1).await,
        Err(RunStoreError::NotFound(unknown.clone()))
    );
    store.begin_run(&r, None, 1, None).await.unwrap();
    assert_eq!(
        store.begin_run(&r, None, 2, None).await,
        Err(RunStoreError::AlreadyExists(r.clone()))
    );
    let one = || RunStep {
        events: vec![done()],
        ..RunStep::default()
    };
    store.commit_step(&r, one()).await.unwrap();
    store.finish_run(&r, 3).await.unwrap();
    let refused = store.finish_run(&r, 4).await.unwrap_err();
    assert!(
        matches!(
            refused,
            RunStoreError::WrongStatus {
                status: RunStatus::Finished,
                ..
            }
        ),
        "{refused:?}"
    );
    let refused = store.commit_step(&r, one()).await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "run run-1 is finished; commit_step needs a run that is running or interrupted, with \
         no done event in its log"
    );
    let log = store.load_run(&r).await.unwrap();
    assert_eq!(log.events.len(), 1);
    assert_eq!(log.header.finished_at_ms, Some(3));
}

/// Nothing follows a run's `Done`: a step to a run whose log holds it is refused and writes
/// nothing, whatever the run's status. So a run closed by recovery (`interrupted`, its `Done`
/// stored), or one whose process died before `finish_run`, never gets a second ending.
async fn no_step_follows_a_runs_done(store: &dyn Stores) {
    let t = thread("thread-d");
    let (closed, ended) = (run("closed"), run("ended"));
    for r in [&closed, &ended] {
        store.begin_run(r, Some(&t), 1, None).await.unwrap();
        let step = RunStep {
            events: vec![start("c1")],
            ..RunStep::default()
        };
        store.commit_step(r, step).await.unwrap();
    }
    store
        .recover_interrupted(2, std::slice::from_ref(&closed))
        .await
        .unwrap();
    let ending = |state: i64| RunStep {
        events: vec![result("c1"), done()],
        thread_state: Some(json!(state)),
        ..RunStep::default()
    };
    store.commit_step(&closed, ending(1)).await.unwrap();
    store.commit_step(&ended, ending(1)).await.unwrap();
    for (r, status) in [
        (&closed, RunStatus::Interrupted),
        (&ended, RunStatus::Running),
    ] {
        let refused = store.commit_step(r, ending(2)).await.unwrap_err();
        assert_eq!(
            refused,
            RunStoreError::WrongStatus {
                run_id: r.clone(),
                status,
                action: "commit_step",
                expected: "running or interrupted, with no done event in its log",
            }
        );
        assert_eq!(store.load_run(r).await.unwrap().events.len(), 3);
    }
    assert_eq!(store.load(&t).await.unwrap(), Some(json!(1)));
}

/// Nothing follows a run's `Done` within a step either: a step with an event after its `Done`
/// (a second `Done` too) is refused whole, naming the event's place, and writes nothing, so the
/// run is still open for its real ending.
async fn no_event_follows_done_in_a_step(store: &dyn Stores) {
    let r = run("after-done");
    store.begin_run(&r, None, 1, None).await.unwrap();
    for (events, place) in [
        (vec![start("c1"), done(), result("c1")], 2),
        (vec![done(), done()], 1),
    ] {
        let step = RunStep {
            events,
            ..RunStep::default()
        };
        let refused = store.commit_step(&r, step).await.unwrap_err();
        assert_eq!(
            refused,
            RunStoreError::Invalid {
                run_id: r.clone(),
                reason: format!("the step's event {place} follows its done event"),
            }
        );
        assert!(store.load_run(&r).await.unwrap().events.is_empty());
    }
    let ending = RunStep {
        events: vec![done()],
        ..RunStep::default()
    };
    assert_eq!(store.commit_step(&r, ending).await.unwrap(), 0..1);
}

async fn an_inconsistent_step_is_refused_whole(store: &dyn Stores) {
    let r = run("no-thread");
    store.begin_run(&r, None, 1, None).await.unwrap();
    let with_state = RunStep {
        events: six_events("x"),
        thread_state: Some(json!({"s": 1})),
        ..RunStep::default()
    };
    let refused = store.commit_step(&r, with_state).await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "invalid write to run no-thread: the step carries a thread state but the run has no thread"
    );
    let bad_ref = RunStep {
        events: six_events("x"),
        receipt_refs: vec![receipt_ref(1), "../not-a-hash".into()],
        ..RunStep::default()
    };
    let refused = store.commit_step(&r, bad_ref).await.unwrap_err();
    assert!(
        refused.to_string().contains("not a blob address"),
        "{refused}"
    );
    let log = store.load_run(&r).await.unwrap();
    assert!(log.events.is_empty() && log.receipt_refs.is_empty());
}

async fn recovery_names_dangling_calls_once(store: &dyn Stores) {
    let cut = run("cut");
    store
        .begin_run(&cut, Some(&thread("t")), 1, None)
        .await
        .unwrap();
    let step = RunStep {
        events: vec![
            start("c1"),
            start("c2"),
            result("c1"),
            start("c3"),
            refused_start("c4"),
            null_args_start("c5"),
        ],
        ..RunStep::default()
    };
    store.commit_step(&cut, step).await.unwrap();
    store.begin_run(&run("idle"), None, 2, None).await.unwrap();
    let fine = run("fine");
    store.begin_run(&fine, None, 3, None).await.unwrap();
    let step = RunStep {
        events: vec![start("f1"), done()],
        ..RunStep::default()
    };
    store.commit_step(&fine, step).await.unwrap();
    store.finish_run(&fine, 4).await.unwrap();

    let recovered = store
        .recover_interrupted(100, &running(store).await)
        .await
        .unwrap();
    let dangling = |id: &str| DanglingToolCall {
        tool_call_id: call(id),
        tool_name: "core__get_current_time".into(),
        never_ran: id == "c4",
    };
    assert_eq!(recovered.len(), 2);
    assert_eq!(recovered[0].run_id, cut);
    assert_eq!(recovered[0].thread_id, Some(thread("t")));
    assert_eq!(
        recovered[0].dangling,
        vec![
            dangling("c2"),
            dangling("c3"),
            dangling("c4"),
            dangling("c5")
        ]
    );
    assert_eq!(recovered[1].run_id, run("idle"));
    assert!(recovered[1].dangling.is_empty());
    let header = store.load_run(&cut).await.unwrap().header;
    assert_eq!(
        (header.status, header.finished_at_ms),
        (RunStatus::Interrupted, Some(100))
    );
    assert_eq!(
        store.load_run(&fine).await.unwrap().header.status,
        RunStatus::Finished
    );
    // Until a run's closing step (ending with `Done`) is committed, recovery names it again, as
    // it was, and keeps the time it was first found interrupted.
    assert_eq!(
        store
            .recover_interrupted(200, &running(store).await)
            .await
            .unwrap(),
        recovered
    );
    assert_eq!(
        store.load_run(&cut).await.unwrap().header.finished_at_ms,
        Some(100)
    );

    let mut answers: Vec<AiEvent> = recovered[0]
        .dangling
        .iter()
        .map(|d| AiEvent::ToolCallResult {
            tool_call_id: d.tool_call_id.clone(),
            tool_name: d.tool_name.as_str().into(),
            outcome: ToolOutcome::Error(ToolFailure::new(ToolErrorCode::Cancelled, "interrupted")),
        })
        .collect();
    answers.push(done());
    let recovery = RunStep {
        events: answers,
        thread_state: Some(json!({"repaired": true})),
        ..RunStep::default()
    };
    assert_eq!(store.commit_step(&cut, recovery).await.unwrap(), 6..11);
    let closing = RunStep {
        events: vec![done()],
        ..RunStep::default()
    };
    store.commit_step(&run("idle"), closing).await.unwrap();
    assert!(
        store
            .recover_interrupted(300, &running(store).await)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store.finish_run(&cut, 300).await,
        Err(RunStoreError::WrongStatus {
            status: RunStatus::Interrupted,
            ..
        })
    ));
    assert_eq!(
        store.load(&thread("t")).await.unwrap(),
        Some(json!({"repaired": true}))
    );
}

/// A provider that reuses a call id within a run: each result answers the earliest start of
/// its id still unanswered before it, so a later start of an id answered earlier is named as
/// dangling (recovery answers it), and each of two unanswered starts of one id is named.
async fn recovery_pairs_a_reused_call_id_by_order(store: &dyn Stores) {
    let cut = run("cut");
    store.begin_run(&cut, None, 1, None).await.unwrap();
    let steps = [
        vec![start("c1"), result("c1")],
        vec![start("c1"), start("c2"), start("c2"), result("c2")],
        vec![start("c3"), result("c3"), refused_start("c3")],
        vec![start("c4"), start("c4")],
    ];
    for events in steps {
        let step = RunStep {
            events,
            ..RunStep::default()
        };
        store.commit_step(&cut, step).await.unwrap();
    }
    let recovered = store
        .recover_interrupted(100, &running(store).await)
        .await
        .unwrap();
    let dangling = |id: &str, never_ran| DanglingToolCall {
        tool_call_id: call(id),
        tool_name: "core__get_current_time".into(),
        never_ran,
    };
    assert_eq!(recovered.len(), 1);
    assert_eq!(
        recovered[0].dangling,
        vec![
            dangling("c1", false),
            dangling("c2", false),
            dangling("c3", true),
            dangling("c4", false),
            dangling("c4", false)
        ]
    );
}

/// The server dies (again) after `recover_interrupted` marked a run interrupted and before the
/// step that answers its dangling calls was committed (or that commit failed). At the next
/// start, recovery must still find the run and its unanswered call; otherwise the call stays
/// unanswered and the thread never takes the interrupted turn, for ever. (The stores keep no
/// state outside what they persist, so a second call stands for the next start.)
async fn recovery_survives_a_crash_before_the_closing_step(store: &dyn Stores) {
    let r = run("run-1");
    let t = thread("thread-1");
    store.begin_run(&r, Some(&t), 1_000, None).await.unwrap();
    let step = RunStep {
        events: vec![start("c1")],
        ..RunStep::default()
    };
    store.commit_step(&r, step).await.unwrap();
    // Crash 1: the call was in flight.
    let found = store
        .recover_interrupted(2_000, &running(store).await)
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].dangling[0].tool_call_id, call("c1"));
    // Crash 2: before the closing step (interrupted results, Done, thread state) was committed.
    let found_again = store
        .recover_interrupted(3_000, &running(store).await)
        .await
        .unwrap();
    let log = store.load_run(&r).await.unwrap();
    assert_eq!(
        found_again,
        found,
        "the run is lost to recovery: status {:?}, {} events, last {:?}, thread {:?}",
        log.header.status,
        log.events.len(),
        log.events.last(),
        store.load(&t).await.unwrap(),
    );
    // A run whose log has its `Done` (the process died between its last step and `finish_run`)
    // needs no closing step: it is marked interrupted and not named.
    let ended = run("ended");
    store.begin_run(&ended, None, 4_000, None).await.unwrap();
    let step = RunStep {
        events: vec![start("e1"), result("e1"), done()],
        ..RunStep::default()
    };
    store.commit_step(&ended, step).await.unwrap();
    assert_eq!(
        store
            .recover_interrupted(5_000, &running(store).await)
            .await
            .unwrap(),
        found
    );
    assert_eq!(
        store.load_run(&ended).await.unwrap().header.status,
        RunStatus::Interrupted
    );
}

/// A run that is still live in another process is not the caller's to recover: the store marks
/// only the runs it is given, and names only interrupted ones, so the live run keeps running.
async fn recovery_leaves_a_run_it_is_not_given_running(store: &dyn Stores) {
    let (dead, live) = (run("dead"), run("live"));
    for (r, at) in [(&dead, 1), (&live, 2)] {
        store.begin_run(r, None, at, None).await.unwrap();
        let step = RunStep {
            events: vec![start("c1")],
            ..RunStep::default()
        };
        store.commit_step(r, step).await.unwrap();
    }
    let found = store
        .recover_interrupted(100, std::slice::from_ref(&dead))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].run_id, dead);
    let header = store.load_run(&live).await.unwrap().header;
    assert_eq!(
        (header.status, header.finished_at_ms),
        (RunStatus::Running, None)
    );
    store.finish_run(&live, 200).await.unwrap();
}

/// A step's thread state with a condition is saved only over the state it names, checked in
/// the step's own transaction; the rest of the step is committed either way.
async fn a_conditional_thread_state_is_saved_only_over_the_state_it_names(store: &dyn Stores) {
    let t = thread("thread-c");
    let step = |state, if_saved| RunStep {
        events: vec![start("c")],
        thread_state: Some(state),
        thread_state_if_saved: Some(if_saved),
        ..RunStep::default()
    };
    let r = run("run-c");
    store.begin_run(&r, Some(&t), 1, None).await.unwrap();
    // Nothing saved yet: `null` names that.
    store
        .commit_step(&r, step(json!({"turn": 1}), json!(null)))
        .await
        .unwrap();
    assert_eq!(store.load(&t).await.unwrap(), Some(json!({"turn": 1})));
    // Over the state it names.
    store
        .commit_step(&r, step(json!({"turn": 2}), json!({"turn": 1})))
        .await
        .unwrap();
    assert_eq!(store.load(&t).await.unwrap(), Some(json!({"turn": 2})));
    // Another state was saved since: the thread keeps it, the events are still committed.
    store
        .commit_step(&r, step(json!({"repaired": true}), json!({"turn": 1})))
        .await
        .unwrap();
    assert_eq!(store.load(&t).await.unwrap(), Some(json!({"turn": 2})));
    assert_eq!(store.load_run(&r).await.unwrap().events.len(), 3);
}

/// A call that succeeded with the value `null`, and a start whose arguments are `null`, read
/// back exactly as committed: a present `null` is not an absent value.
async fn a_null_result_and_null_args_are_kept(store: &dyn Stores) {
    let r = run("run-null");
    store.begin_run(&r, None, 1, None).await.unwrap();
    let null = || Some(Arc::new(Value::Null));
    let ok_null = ToolInvocationRecord {
        args: null(),
        result: null(),
        ..record("c1", "raw")
    };
    let refused = ToolInvocationRecord {
        args: None,
        result: None,
        error: Some(ToolFailure::new(ToolErrorCode::InvalidJson, "not JSON")),
        ..record("c2", "raw")
    };
    let events = vec![
        AiEvent::ToolCallStart {
            tool_call_id: call("c1"),
            tool_name: "core__get_current_time".into(),
            args: null(),
        },
        AiEvent::ToolCallStart {
            tool_call_id: call("c2"),
            tool_name: "core__get_current_time".into(),
            args: None,
        },
    ];
    let step = RunStep {
        events: events.clone(),
        records: vec![ok_null.clone(), refused.clone()],
        ..RunStep::default()
    };
    store.commit_step(&r, step).await.unwrap();
    let log = store.load_run(&r).await.unwrap();
    assert_eq!(log.events, events);
    let without_raw = |mut record: ToolInvocationRecord| {
        record.raw = None;
        record
    };
    assert_eq!(
        log.records,
        vec![without_raw(ok_null), without_raw(refused)]
    );
    assert_eq!(
        log.records[0].transitions().last(),
        Some(&ToolCallStatus::Succeeded)
    );
    assert_eq!(
        log.records[1].transitions().last(),
        Some(&ToolCallStatus::Failed)
    );
}

/// An input ref that is not a blob address is refused up front by every store, with the same
/// error naming what is wrong, and no run is begun.
async fn an_input_ref_that_is_not_a_blob_address_is_refused(store: &dyn Stores) {
    let r = run("run-ref");
    for (bad, problem) in [
        ("", "it is 0 bytes long, not 64"),
        ("../not-a-hash", "it is 13 bytes long, not 64"),
        (
            &"E".repeat(64),
            "it holds a character that is not a lower-case hex digit",
        ),
    ] {
        let refused = store.begin_run(&r, None, 1, Some(bad)).await.unwrap_err();
        assert_eq!(
            refused,
            RunStoreError::Invalid {
                run_id: r.clone(),
                reason: format!(
                    "the input ref is not a blob address (64 lower-case hex digits, the SHA-256 \
                     of the blob): {problem}"
                ),
            }
        );
        assert_eq!(
            store.load_run(&r).await,
            Err(RunStoreError::NotFound(r.clone()))
        );
    }
    store
        .begin_run(&r, None, 1, Some(&receipt_ref(0)))
        .await
        .unwrap();
}

/// A step that refuses to commit when its thread moved on is refused whole, naming the run and
/// the thread: no event, record or state of it is written, and the thread keeps its state.
async fn a_step_that_refuses_a_changed_thread_writes_nothing(store: &dyn Stores) {
    let t = thread("thread-r");
    let r = run("run-r");
    store.begin_run(&r, Some(&t), 1, None).await.unwrap();
    store
        .save(&t, None, &json!({"turn": "other"}))
        .await
        .unwrap();
    let closing = |if_saved| RunStep {
        events: vec![done()],
        receipt_refs: vec![receipt_ref(1)],
        thread_state: Some(json!({"turn": "mine"})),
        thread_state_if_saved: Some(if_saved),
        refuse_if_thread_changed: true,
        ..RunStep::default()
    };
    let error = store
        .commit_step(&r, closing(json!({"turn": "start"})))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        RunStoreError::ThreadChanged {
            run_id: r.clone(),
            thread_id: t.clone()
        }
    );
    assert!(
        error
            .to_string()
            .contains("thread-r changed since run run-r began")
    );
    assert_eq!(
        store.load(&t).await.unwrap(),
        Some(json!({"turn": "other"}))
    );
    let log = store.load_run(&r).await.unwrap();
    assert!(log.events.is_empty() && log.receipt_refs.is_empty());
    assert_eq!(log.header.status, RunStatus::Running);
    // Over the state it names, the same step commits whole.
    store
        .commit_step(&r, closing(json!({"turn": "other"})))
        .await
        .unwrap();
    assert_eq!(store.load(&t).await.unwrap(), Some(json!({"turn": "mine"})));
    assert_eq!(store.load_run(&r).await.unwrap().events, vec![done()]);
}

/// Arguments and results as deep as the runner accepts (`MAX_JSON_DEPTH`) are stored in every
/// event and record that holds them, and read back: a run the runner let through can always be
/// shown and replayed.
async fn values_at_the_runners_depth_limit_are_read_back(store: &dyn Stores) {
    let levels = ai_core::MAX_JSON_DEPTH;
    let deep: Value = serde_json::from_str(&format!(
        "{{\"a\":{}{}}}",
        "[".repeat(levels - 1),
        "]".repeat(levels - 1)
    ))
    .unwrap();
    let r = run("run-deep");
    store.begin_run(&r, None, 1, None).await.unwrap();
    let (events, deep_record) = call_carrying("deep", &deep);
    let step = RunStep {
        events: events.clone(),
        records: vec![deep_record.clone()],
        ..RunStep::default()
    };
    store.commit_step(&r, step).await.unwrap();
    store.finish_run(&r, 2).await.unwrap();
    let log = store.load_run(&r).await.unwrap();
    assert_eq!(log.events, events);
    assert_eq!(log.records, vec![deep_record]);
}

/// `levels` arrays, each inside the next: `[[…]]`.
fn nested(levels: usize) -> Value {
    (1..levels).fold(json!([]), |inner, _| Value::Array(vec![inner]))
}

/// A thread state nested deeper than a store reads back (serde_json's reader stops at 128
/// levels) is refused as it is saved, alone or with a step, rather than stored and then failing
/// every load of its thread: the thread keeps the state it had. One as deep as a store reads is
/// saved and read back.
async fn a_thread_state_too_deep_to_read_back_is_refused_as_it_is_saved(store: &dyn Stores) {
    let t = thread("thread-deep");
    let readable = nested(127);
    store.save(&t, None, &readable).await.unwrap();
    assert_eq!(store.load(&t).await.unwrap(), Some(readable.clone()));
    let too_deep = nested(128);
    let message = store
        .save(&t, Some(&readable), &too_deep)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("thread thread-deep") && message.contains("deeper than 127 levels"),
        "{message}"
    );
    assert_eq!(store.load(&t).await.unwrap(), Some(readable.clone()));

    let r = run("run-deep-state");
    store.begin_run(&r, Some(&t), 1, None).await.unwrap();
    let step = RunStep {
        events: vec![done()],
        thread_state: Some(too_deep),
        ..RunStep::default()
    };
    let error = store.commit_step(&r, step).await.unwrap_err();
    assert!(
        matches!(&error, RunStoreError::Invalid { reason, .. } if reason.contains("deeper than 127 levels")),
        "{error:?}"
    );
    assert!(store.load_run(&r).await.unwrap().events.is_empty());
    assert_eq!(store.load(&t).await.unwrap(), Some(readable));
}

/// A number is read back as the very float that was stored (serde_json's default reader gets
/// about one float in ten a tool computes, such as ln 5 = 1.6094379124341003, wrong in its last
/// digit): so a thread loads as it was saved, a run's events and records are the ones committed,
/// and a step saved only over a state the caller holds (as a run saves the state it starts from,
/// then closes over it) finds that state unchanged.
async fn a_float_is_read_back_as_it_was_stored(store: &dyn Stores) {
    let float = json!({"ln_5": 1.6094379124341003, "third": 1.0 / 3.0});
    let t = thread("thread-float");
    store.save(&t, None, &float).await.unwrap();
    assert_eq!(store.load(&t).await.unwrap(), Some(float.clone()));

    let r = run("run-float");
    store.begin_run(&r, Some(&t), 1, None).await.unwrap();
    let (events, float_record) = call_carrying("float", &float);
    let step = RunStep {
        events: events.clone(),
        records: vec![float_record.clone()],
        thread_state: Some(json!({"turn": 2})),
        thread_state_if_saved: Some(float),
        refuse_if_thread_changed: true,
        ..RunStep::default()
    };
    store.commit_step(&r, step).await.unwrap();
    let log = store.load_run(&r).await.unwrap();
    assert_eq!(log.events, events);
    assert_eq!(log.records, vec![float_record]);
    assert_eq!(store.load(&t).await.unwrap(), Some(json!({"turn": 2})));
}

macro_rules! contract {
    ($($test:ident),* $(,)?) => {
        mod sqlite_store {
            $(
                #[tokio::test]
                async fn $test() {
                    let dir = tempfile::tempdir().unwrap();
                    let store = adapters::SqliteStore::open(dir.path()).unwrap();
                    super::$test(&store).await;
                }
            )*
        }
        mod in_memory_store {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(&adapters::InMemoryRunStore::default()).await;
                }
            )*
        }
    };
}

contract!(
    steps_are_numbered_in_order_and_loaded_whole,
    threads_are_saved_and_replaced,
    a_save_over_a_stale_state_is_refused_and_changes_nothing,
    runs_are_listed_oldest_first,
    runs_are_summarized_with_their_event_counts,
    a_time_past_the_stores_range_is_refused_and_writes_nothing,
    status_rules_refuse_and_write_nothing,
    no_step_follows_a_runs_done,
    no_event_follows_done_in_a_step,
    an_inconsistent_step_is_refused_whole,
    recovery_names_dangling_calls_once,
    recovery_pairs_a_reused_call_id_by_order,
    recovery_survives_a_crash_before_the_closing_step,
    recovery_leaves_a_run_it_is_not_given_running,
    a_conditional_thread_state_is_saved_only_over_the_state_it_names,
    a_step_that_refuses_a_changed_thread_writes_nothing,
    a_null_result_and_null_args_are_kept,
    an_input_ref_that_is_not_a_blob_address_is_refused,
    values_at_the_runners_depth_limit_are_read_back,
    a_thread_state_too_deep_to_read_back_is_refused_as_it_is_saved,
    a_float_is_read_back_as_it_was_stored,
);

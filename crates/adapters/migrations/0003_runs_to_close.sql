-- cogni store, schema version 3: a run's row says whether its log holds its `done` event, so
-- crash recovery finds the interrupted runs still to close through one small index instead of
-- looking through the events of every interrupted run ever recorded.

-- 1 once a step with the run's `done` event has committed (set in that step's transaction).
ALTER TABLE runs ADD COLUMN has_done INTEGER NOT NULL DEFAULT 0;

UPDATE runs SET has_done = 1
WHERE EXISTS (SELECT 1 FROM run_events e WHERE e.run_id = runs.run_id AND e.kind = 'done');

-- The interrupted runs recovery has still to close: closed ones leave the index.
CREATE INDEX runs_to_close ON runs (started_at_ms, run_id)
WHERE status = 'interrupted' AND has_done = 0;

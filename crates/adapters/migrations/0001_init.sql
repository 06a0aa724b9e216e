-- cogni store, schema version 1: threads, runs, run events, tool invocation records and model
-- receipt refs. Plain SQL (TEXT JSON, INTEGER ms timestamps) so the same tables map one to one
-- onto Postgres (TEXT -> JSONB for the JSON columns, INTEGER -> BIGINT).

-- A conversation's loop state (the reducer's serialized state), replaced on every save.
CREATE TABLE threads (
    thread_id   TEXT PRIMARY KEY NOT NULL,
    state_json  TEXT NOT NULL,
    revision    INTEGER NOT NULL DEFAULT 1
);

-- One user turn driven to its finish.
CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY NOT NULL,
    thread_id       TEXT,
    status          TEXT NOT NULL CHECK (status IN ('running', 'finished', 'interrupted')),
    started_at_ms   INTEGER NOT NULL,
    finished_at_ms  INTEGER,
    -- The blob address of what the run started from (thread state and user message), for replay.
    input_ref       TEXT CHECK (input_ref IS NULL OR length(input_ref) = 64)
);
CREATE INDEX runs_by_status ON runs (status);
CREATE INDEX runs_by_start ON runs (started_at_ms, run_id);

-- Every event of a run, numbered from 0 without gaps. `kind` and `tool_call_id` are copied out
-- of the event so crash recovery finds started-but-unanswered calls with one query.
CREATE TABLE run_events (
    run_id        TEXT NOT NULL REFERENCES runs (run_id),
    seq           INTEGER NOT NULL,
    kind          TEXT NOT NULL,
    tool_call_id  TEXT,
    event_json    TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX run_events_by_call ON run_events (run_id, tool_call_id, kind);

-- The audit record of each tool invocation: validated arguments and the redacted result only
-- (the record's provider-native `raw` field is never serialized).
CREATE TABLE tool_records (
    run_id        TEXT NOT NULL REFERENCES runs (run_id),
    idx           INTEGER NOT NULL,
    tool_call_id  TEXT NOT NULL,
    tool_id       TEXT NOT NULL,
    record_json   TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);

-- The address (SHA-256 hex, in the blob store) of each model call's receipt.
CREATE TABLE model_receipts (
    run_id       TEXT NOT NULL REFERENCES runs (run_id),
    idx          INTEGER NOT NULL,
    receipt_ref  TEXT NOT NULL CHECK (length(receipt_ref) = 64),
    PRIMARY KEY (run_id, idx)
);

-- Recurring schedules. A schedule's definition (spec, time zone, job template, misfire and
-- overlap policies) is one JSON document the engine writes and reads; the columns beside it
-- are what the store itself decides on. `last_job_id` is the last job enqueued (the
-- overlap policy looks at it); `last_skipped` says the last run was skipped instead.
-- `handled_through` is the scheduler's cursor: every
-- occurrence up to it was run or skipped (microseconds, like every time in this file).
CREATE TABLE schedules (
    name              TEXT    NOT NULL PRIMARY KEY,
    definition        TEXT    NOT NULL,
    enabled           INTEGER NOT NULL,
    origin            TEXT    NOT NULL,
    handled_through   INTEGER NOT NULL,
    last_scheduled_at INTEGER,
    last_job_id       TEXT,
    last_skipped      INTEGER,
    last_manual       INTEGER,
    last_recorded_at  INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) WITHOUT ROWID;

-- One row per handled occurrence: the key that makes it one job across every process on the
-- file. It is written in the transaction that writes the job; `job_id` is NULL when the
-- overlap policy skipped the occurrence. A manual run ("run now") has a key of its own.
CREATE TABLE schedule_runs (
    schedule     TEXT    NOT NULL,
    scheduled_at INTEGER NOT NULL,
    manual       INTEGER NOT NULL,
    job_id       TEXT,
    recorded_at  INTEGER NOT NULL,
    PRIMARY KEY (schedule, scheduled_at, manual)
) WITHOUT ROWID;
CREATE INDEX schedule_runs_recorded_at ON schedule_runs (recorded_at);

-- Batches with callbacks, and the trace context a job carries from the span that enqueued it.
--
-- A batch row keeps its members' counts, moved in the transaction of each member's final
-- move: `total` members (a purged pending member leaves the batch), `succeeded` and `dead`
-- of them finished. The callbacks (one JSON document, what the engine wrote) are enqueued
-- at most once each; the `*_job_id` columns say which job each one became, and a NULL
-- means it has not fired. `finished_at` is set while every member is final and cleared when
-- an operator resurrects a dead member (the batch reopens).
CREATE TABLE batches (
    id              TEXT    NOT NULL PRIMARY KEY,
    description     TEXT,
    created_by      TEXT,
    created_at      INTEGER NOT NULL,
    total           INTEGER NOT NULL,
    succeeded       INTEGER NOT NULL DEFAULT 0,
    dead            INTEGER NOT NULL DEFAULT 0,
    finished_at     INTEGER,
    callbacks       TEXT    NOT NULL,
    success_job_id  TEXT,
    complete_job_id TEXT,
    death_job_id    TEXT
) WITHOUT ROWID;
CREATE INDEX batches_finished ON batches (finished_at) WHERE finished_at IS NOT NULL;

-- Members carry their batch in every pillar (a batch page lists them wherever they are).
ALTER TABLE jobs ADD COLUMN batch_id TEXT;
ALTER TABLE archive ADD COLUMN batch_id TEXT;
ALTER TABLE dlq ADD COLUMN batch_id TEXT;
CREATE INDEX jobs_batch ON jobs (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX archive_batch ON archive (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX dlq_batch ON dlq (batch_id) WHERE batch_id IS NOT NULL;

-- W3C trace context (traceparent[;tracestate]) of the enqueuing span.
ALTER TABLE jobs ADD COLUMN trace_context TEXT;
ALTER TABLE archive ADD COLUMN trace_context TEXT;
ALTER TABLE dlq ADD COLUMN trace_context TEXT;

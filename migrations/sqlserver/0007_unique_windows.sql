-- The Deck schema, version 7: uniqueness over a time window. An enqueue with
-- `unique_for_ms` takes its idempotency key in [unique_keys] for that long, so a producer
-- that retries after the first job finished (or died) gets that job's id back instead of a
-- second job. The hot table's filtered unique index still makes one active job per key; this
-- table answers for the finished pillars. The conventions of 0001 and 0002 hold: one batch,
-- one transaction.
--
-- A key names the job that took it and which finished states keep it taken. Rows leave the
-- archive and the DLQ by retention and by an operator's purge; those statements copy the
-- state the row was in into [left_state] first, so a key answers for its whole window after
-- the job is gone. Lapsed keys are deleted by the retention sweep.
--
-- Upgrading: older processes neither read nor write the table; jobs they enqueue have no
-- window, as before. [enqueue_batch] and [enqueue] (routines/) take the new fields (both
-- accept every request they accepted before).
CREATE TABLE [{schema}].[unique_keys] (
    [key]             NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [job_id]          BINARY(16)    NOT NULL,
    [held_until]      DATETIME2(6)  NOT NULL,
    [holds_succeeded] BIT           NOT NULL,
    [holds_dead]      BIT           NOT NULL,
    [left_state]      TINYINT       NULL,
    CONSTRAINT [PK_unique_keys] PRIMARY KEY CLUSTERED ([key])
);
CREATE NONCLUSTERED INDEX [IX_unique_keys_held_until] ON [{schema}].[unique_keys] ([held_until]);

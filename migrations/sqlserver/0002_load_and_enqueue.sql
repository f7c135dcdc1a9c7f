-- The Deck schema, version 2: T-SQL that holds under real load, and enqueue inside the
-- application's own transaction. The conventions of 0001 hold here too; in particular this
-- file runs inside one transaction and an IF block, so no GO, and every statement that needs
-- a batch of its own (CREATE PROCEDURE, CREATE FUNCTION) runs through EXEC(N'…').
--
-- Upgrading from version 1: stop every deck process of the older version first. This
-- migration replaces the counter tables (an older process would keep writing to the dropped
-- ones and fail), and it counts the hot rows once, under a table lock, to seed the new
-- per-state counters exactly.
--
-- It only adds tables and indexes, drops and redefines indexes, and copies rows; it never
-- adds a column to an existing table (a statement naming a column added earlier in the same
-- batch does not compile, and this script is one batch).

-- 1. Striped counters. Every transition used to update the queue's one counter row and the
-- current minute's one metric row under UPDLOCK, HOLDLOCK, so every completer of a queue,
-- in every instance, queued behind one row lock until commit. Each row is now split in slots
-- (slot = the session's @@SPID % 16, so two sessions collide only when their ids are equal
-- modulo 16; enqueues inside an application's own transaction use slots 16-31, so what such a
-- transaction holds until its commit never blocks deck's own sessions), written by
-- update-then-insert as before, and summed on read. A decrement may
-- land on another slot than its increment, so a slot may go negative; the sums are exact.
-- The hot table's counts per state live here too, so dashboards never count jobs_hot.
CREATE TABLE [{schema}].[queue_counter_slots] (
    [queue]           NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [slot]            TINYINT       NOT NULL,
    [pending_rows]    BIGINT        NOT NULL,
    [fetched_rows]    BIGINT        NOT NULL,
    [processing_rows] BIGINT        NOT NULL,
    [archive_rows]    BIGINT        NOT NULL,
    [dlq_rows]        BIGINT        NOT NULL,
    CONSTRAINT [PK_queue_counter_slots] PRIMARY KEY CLUSTERED ([queue], [slot])
);

CREATE TABLE [{schema}].[metric_slots] (
    [bucket_start]    DATETIME2(0)  NOT NULL,
    [queue]           NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [slot]            TINYINT       NOT NULL,
    [succeeded]       BIGINT        NOT NULL,
    [failed]          BIGINT        NOT NULL,
    [retried]         BIGINT        NOT NULL,
    [duration_sum_ms] BIGINT        NOT NULL,
    [duration_max_ms] BIGINT        NOT NULL,
    CONSTRAINT [PK_metric_slots] PRIMARY KEY CLUSTERED ([bucket_start], [queue], [slot])
);

CREATE TABLE [{schema}].[error_group_slots] (
    [reason]         TINYINT      NOT NULL,
    [message_prefix] NVARCHAR(80) NOT NULL,
    [slot]           TINYINT      NOT NULL,
    [dlq_rows]       BIGINT       NOT NULL,
    [last_seen]      DATETIME2(6) NOT NULL,
    CONSTRAINT [PK_error_group_slots] PRIMARY KEY CLUSTERED ([reason], [message_prefix], [slot])
);

-- Seed them from what version 1 kept, and count the hot rows per state; TABLOCK, HOLDLOCK
-- shuts out any writer until this transaction commits, so the counts are exact.
INSERT INTO [{schema}].[queue_counter_slots]
    (queue, slot, pending_rows, fetched_rows, processing_rows, archive_rows, dlq_rows)
SELECT x.queue, 0, SUM(x.pending_rows), SUM(x.fetched_rows), SUM(x.processing_rows),
       SUM(x.archive_rows), SUM(x.dlq_rows)
FROM (
    SELECT h.queue,
           CASE WHEN h.status = 0 THEN 1 ELSE 0 END AS pending_rows,
           CASE WHEN h.status = 1 THEN 1 ELSE 0 END AS fetched_rows,
           CASE WHEN h.status = 2 THEN 1 ELSE 0 END AS processing_rows,
           CAST(0 AS BIGINT) AS archive_rows, CAST(0 AS BIGINT) AS dlq_rows
    FROM [{schema}].[jobs_hot] AS h WITH (TABLOCK, HOLDLOCK)
    UNION ALL
    SELECT c.queue, 0, 0, 0, c.archive_rows, c.dlq_rows
    FROM [{schema}].[queue_counters] AS c WITH (TABLOCK, HOLDLOCK)
) AS x
GROUP BY x.queue;

INSERT INTO [{schema}].[metric_slots]
    (bucket_start, queue, slot, succeeded, failed, retried, duration_sum_ms, duration_max_ms)
SELECT b.bucket_start, b.queue, 0, b.succeeded, b.failed, b.retried, b.duration_sum_ms,
       b.duration_max_ms
FROM [{schema}].[metric_buckets] AS b WITH (TABLOCK, HOLDLOCK);

INSERT INTO [{schema}].[error_group_slots] (reason, message_prefix, slot, dlq_rows, last_seen)
SELECT g.reason, g.message_prefix, 0, g.dlq_rows, g.last_seen
FROM [{schema}].[error_groups] AS g WITH (TABLOCK, HOLDLOCK)
WHERE g.dlq_rows <> 0;

DROP TABLE [{schema}].[queue_counters];
DROP TABLE [{schema}].[metric_buckets];
DROP TABLE [{schema}].[error_groups];

-- 2. The hot table keeps only what the hot paths and the committed lists need. Every index
-- here is written by every enqueue and every completion; an index keyed on a column that
-- changes is written again by every change of it.
--
-- Console-only sorts on columns that change with each transition go: (status, created_at)
-- moved on every claim, start, retry and release; (scheduled_at) on every retry and
-- deferral. A list of active jobs sorted by due time or filtered by state sorts the matching
-- rows instead (the fetched and processing states are small filtered indexes), which costs
-- the console a sort, not every transition a write.
DROP INDEX [IX_jobs_hot_status_created] ON [{schema}].[jobs_hot];
DROP INDEX [IX_jobs_hot_scheduled] ON [{schema}].[jobs_hot];

-- The per-queue list loses its INCLUDE (status), which every transition rewrote in place.
-- Indexes that change are dropped and created again rather than rebuilt in place: the same
-- result inside this transaction, in a form Babelfish accepts as well as SQL Server.
DROP INDEX [IX_jobs_hot_queue_created] ON [{schema}].[jobs_hot];
CREATE NONCLUSTERED INDEX [IX_jobs_hot_queue_created] ON [{schema}].[jobs_hot]
    ([queue], [created_at], [id]);

-- Processing rows per queue and worker: the bulkhead count (status = 2 for a queue), the
-- zombie sweep per queue, and the dead-instance sweep as a seek on the worker id.
-- heartbeat_at is no longer in it: a heartbeat now writes the clustered row and nothing else.
DROP INDEX [IX_jobs_hot_processing] ON [{schema}].[jobs_hot];
CREATE NONCLUSTERED INDEX [IX_jobs_hot_processing] ON [{schema}].[jobs_hot]
    ([queue], [worker_id])
    WHERE [status] = 2;

-- Pending rows per queue in due order: the dashboards' lag and their due / scheduled split,
-- read as two bounded range seeks per queue (never the backlog, never the future rows).
CREATE NONCLUSTERED INDEX [IX_jobs_hot_due] ON [{schema}].[jobs_hot]
    ([queue], [scheduled_at])
    WHERE [status] = 0;

-- A table lock on the hot table stalls every worker of every instance. Every statement that
-- writes it touches at most 1,000 rows (claims, id lists and sweeps are cut into slices of
-- 1,000), which stays below the 5,000 locks per statement and index at which SQL Server
-- escalates; DISABLE makes that a guarantee for this one table, at the cost of lock memory
-- (about 100 bytes a lock) should a statement ever hold more. The other tables keep the
-- default: their statements are bounded the same way, and nothing else blocks on them.
ALTER TABLE [{schema}].[jobs_hot] SET (LOCK_ESCALATION = DISABLE);

-- 3. Every queue a job or a continuation names has a settings row before its jobs exist:
-- enqueue creates the rows for the job's queue and its continuation's, so a completion
-- never has to create one (that would lock queues after jobs, against the lock order).
INSERT INTO [{schema}].[queues] (name, paused, hidden, created_at)
SELECT n.name, 0, 0, SYSUTCDATETIME()
FROM (
    SELECT h.queue AS name FROM [{schema}].[jobs_hot] AS h
    UNION
    SELECT d.queue FROM [{schema}].[jobs_dlq] AS d
    UNION
    SELECT CAST(JSON_VALUE(h.continuation, '$.queue') AS NVARCHAR(255)) COLLATE Latin1_General_100_BIN2
    FROM [{schema}].[jobs_hot] AS h WHERE h.continuation IS NOT NULL
    UNION
    SELECT CAST(JSON_VALUE(d.continuation, '$.queue') AS NVARCHAR(255)) COLLATE Latin1_General_100_BIN2
    FROM [{schema}].[jobs_dlq] AS d WHERE d.continuation IS NOT NULL
) AS n
WHERE n.name IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM [{schema}].[queues] AS q WHERE q.name = n.name);

-- 4. Enqueue from T-SQL, inside the caller's transaction (README, "Enqueue inside your own
-- transaction"): the procedures [enqueue_batch] and [enqueue] and the function [name_problem]
-- they use are routines, defined once each in migrations/sqlserver/routines/ and applied after
-- the versioned migrations whenever their text changed (see routines.rs). deck itself
-- enqueues through [enqueue_batch], so there is one enqueue.

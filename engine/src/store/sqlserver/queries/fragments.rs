//! The T-SQL fragments many statements share, as macros that expand to string literals (so
//! a statement stays one `concat!`-built `&'static str`, and the rules read its full text):
//! the transaction frame, column lists, the move's `@moved` rows, the `@ledger` and what
//! applies it (counters, metric rows, run times, error groups), batches, continuations, id
//! slices. Declared before the statement modules (`#[macro_use]` in `queries`): a
//! `macro_rules!` macro is visible only to the code that follows its definition.

/// Transaction frame for a transition batch.
macro_rules! tx {
    ($($body:expr),+ $(,)?) => {
        concat!(
            "SET NOCOUNT ON;\nSET XACT_ABORT ON;\nBEGIN TRY\nBEGIN TRANSACTION;\n",
            $($body,)+
            "\nCOMMIT TRANSACTION;\nEND TRY\nBEGIN CATCH\n",
            "    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;\n",
            "    THROW;\nEND CATCH;\n"
        )
    };
}

/// Columns every pillar shares, in one order.
macro_rules! common_columns {
    () => {
        "id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id, \
         created_by, created_at, scheduled_at, started_at, heartbeat_at, expires_at, attempt, \
         max_attempts, worker_id, errors, last_error, continuation, original_payload, batch_id, \
         trace_context"
    };
}

/// The same columns of a table alias (`job_columns!("h.")`).
macro_rules! job_columns {
    ($p:literal) => {
        concat!(
            $p,
            "id, ",
            $p,
            "queue, ",
            $p,
            "job_type, ",
            $p,
            "payload, ",
            $p,
            "tags, ",
            $p,
            "priority, ",
            $p,
            "idempotency_key, ",
            $p,
            "correlation_id, ",
            $p,
            "created_by, ",
            $p,
            "created_at, ",
            $p,
            "scheduled_at, ",
            $p,
            "started_at, ",
            $p,
            "heartbeat_at, ",
            $p,
            "expires_at, ",
            $p,
            "attempt, ",
            $p,
            "max_attempts, ",
            $p,
            "worker_id, ",
            $p,
            "errors, ",
            $p,
            "last_error, ",
            $p,
            "continuation, ",
            $p,
            "original_payload, ",
            $p,
            "batch_id, ",
            $p,
            "trace_context"
        )
    };
}

macro_rules! deleted_common_columns {
    () => {
        job_columns!("deleted.")
    };
}

/// What a move's `DELETE` sends into `@moved` (`moved_decl!`): the common columns and the
/// hot row's status.
macro_rules! output_into_moved {
    () => {
        concat!(
            "OUTPUT ",
            deleted_common_columns!(),
            ", deleted.status INTO @moved (",
            common_columns!(),
            ", status)"
        )
    };
}

/// Rows taken out of a pillar, before they are written to the next one.
macro_rules! moved_decl {
    () => {
        "DECLARE @moved TABLE (
    id               BINARY(16)     NOT NULL PRIMARY KEY,
    queue            NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    job_type         NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    payload          NVARCHAR(MAX)  COLLATE DATABASE_DEFAULT NOT NULL,
    tags             NVARCHAR(1002) COLLATE DATABASE_DEFAULT NOT NULL,
    priority         INT            NOT NULL,
    idempotency_key  NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NULL,
    correlation_id   NVARCHAR(255)  COLLATE DATABASE_DEFAULT NULL,
    created_by       NVARCHAR(255)  COLLATE DATABASE_DEFAULT NULL,
    created_at       DATETIME2(6)   NOT NULL,
    scheduled_at     DATETIME2(6)   NOT NULL,
    started_at       DATETIME2(6)   NULL,
    heartbeat_at     DATETIME2(6)   NULL,
    expires_at       DATETIME2(6)   NULL,
    attempt          INT            NOT NULL,
    max_attempts     INT            NULL,
    worker_id        NVARCHAR(255)  COLLATE DATABASE_DEFAULT NULL,
    errors           NVARCHAR(MAX)  COLLATE DATABASE_DEFAULT NULL,
    last_error       NVARCHAR(400)  COLLATE DATABASE_DEFAULT NULL,
    continuation     NVARCHAR(MAX)  COLLATE DATABASE_DEFAULT NULL,
    original_payload NVARCHAR(MAX)  COLLATE DATABASE_DEFAULT NULL,
    batch_id         BINARY(16)     NULL,
    trace_context    NVARCHAR(1024) COLLATE DATABASE_DEFAULT NULL,
    status           TINYINT        NULL,
    reason           TINYINT        NULL,
    fingerprint      CHAR(16)       COLLATE Latin1_General_100_BIN2 NULL,
    seq              BIGINT         NULL
);
"
    };
}

/// The database clock, this session's counter slot, and the ledger of what a transition
/// changed per queue, for the counters, the metric rows and the error groups.
macro_rules! ledger_decl {
    () => {
        "DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @slot TINYINT = @@SPID % 16;
DECLARE @ledger TABLE (
    queue            NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    pending_delta    INT           NOT NULL DEFAULT 0,
    fetched_delta    INT           NOT NULL DEFAULT 0,
    processing_delta INT           NOT NULL DEFAULT 0,
    archive_delta    INT           NOT NULL DEFAULT 0,
    dlq_delta        INT           NOT NULL DEFAULT 0,
    succeeded        INT           NOT NULL DEFAULT 0,
    failed           INT           NOT NULL DEFAULT 0,
    retried          INT           NOT NULL DEFAULT 0,
    duration_ms      BIGINT        NULL,
    reason           TINYINT       NULL,
    fingerprint      CHAR(16)      COLLATE Latin1_General_100_BIN2 NULL,
    error_kind       NVARCHAR(64)  COLLATE DATABASE_DEFAULT NULL,
    job_type         NVARCHAR(255) COLLATE DATABASE_DEFAULT NULL,
    sample           NVARCHAR(400) COLLATE DATABASE_DEFAULT NULL
);
"
    };
}

/// Finished jobs whose continuation may fire.
macro_rules! finished_decl {
    () => {
        "DECLARE @finished TABLE (
    id             BINARY(16)    NOT NULL PRIMARY KEY,
    succeeded      BIT           NOT NULL,
    reason         TINYINT       NULL,
    error          NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
    result         NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
    correlation_id NVARCHAR(255) COLLATE DATABASE_DEFAULT NULL,
    continuation   NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NOT NULL
);
"
    };
}

/// An id list (JSON array of hex ids in `$param`) cut into slices of 1,000 (`@ids`,
/// `@slice`, `@slices`), each slice one statement's worth of rows.
macro_rules! id_slices {
    ($param:literal) => {
        concat!(
            "DECLARE @ids TABLE (slice INT NOT NULL, id BINARY(16) NOT NULL, PRIMARY KEY (slice, id));
INSERT INTO @ids (slice, id)
SELECT (ROW_NUMBER() OVER (ORDER BY i.id) - 1) / 1000, i.id
FROM (SELECT DISTINCT u.id FROM OPENJSON(",
            $param,
            ") AS v CROSS APPLY [{schema}].[uuid_bytes](v.[value]) AS u) AS i;
DECLARE @slice INT = 0;
DECLARE @slices INT = (SELECT MAX(slice) FROM @ids);
"
        )
    };
}

/// Append the JSON object `$item` (text) to the JSON array `$array` (text, NULL for none).
/// Written as text rather than `JSON_MODIFY($array, 'append $', JSON_QUERY($item))`, which
/// Babelfish refuses; the arrays are deck's own, with no space after the last element. The
/// style-126 time in an item is read with `REPLACE(…, N' ', N'T')`: Babelfish ignores the
/// style and puts a space there.
macro_rules! json_append {
    ($array:literal, $item:literal) => {
        concat!(
            "CASE WHEN ",
            $array,
            " IS NULL OR ",
            $array,
            " = N'[]' THEN N'[' + ",
            $item,
            " + N']' ELSE LEFT(",
            $array,
            ", LEN(",
            $array,
            ") - 1) + N',' + ",
            $item,
            " + N']' END"
        )
    };
}

/// Enqueue the continuations of finished jobs (`@finished`), in the same transaction, and
/// clear `@finished` for the next slice. Their ids are UUID v7 (`[uuid_v7]`, one NEWID() per
/// finished job, drawn in the derived table). Their queues
/// have settings rows already: enqueue creates the row for a job's continuation queue (a
/// completion creating one would lock queues after jobs).
macro_rules! continuations_apply {
    () => {
        concat!(
            "
INSERT INTO [{schema}].[jobs_hot]
    (id, queue, job_type, payload, tags, priority, correlation_id, created_at, scheduled_at,
     attempt, status, cancel_requested)
OUTPUT inserted.queue, 1 INTO @ledger (queue, pending_delta)
SELECT
    n.id,
    JSON_VALUE(f.continuation, '$.queue'),
    JSON_VALUE(f.continuation, '$.job_type'),
    N'{\"parent_id\":\"' + parent.[text]
        + N'\",\"outcome\":\"' + CASE WHEN f.succeeded = 1 THEN N'succeeded' ELSE N'dead' END
        + N'\",\"reason\":' + ISNULL(N'\"' + CASE f.reason
            WHEN 1 THEN N'Failed' WHEN 2 THEN N'Fatal' WHEN 3 THEN N'Timeout'
            WHEN 4 THEN N'Cancelled' WHEN 5 THEN N'Zombie' WHEN 6 THEN N'HeartbeatFailure'
            WHEN 7 THEN N'RetryLifetimeExpired' WHEN 8 THEN N'Expired' WHEN 9 THEN N'Throttled'
          END + N'\"', N'null')
        + N',\"error\":' + ISNULL(N'\"' + STRING_ESCAPE(f.error, 'json') + N'\"', N'null')
        + N',\"result\":' + ISNULL(f.result, N'null') + N'}',
    N'', 0, f.correlation_id, @now, @now, 0, 0, 0
FROM (SELECT d.*, NEWID() AS random FROM @finished AS d) AS f
CROSS APPLY [{schema}].[uuid_v7](@now, f.random) AS n
CROSS APPLY [{schema}].[uuid_text](f.id) AS parent
WHERE JSON_VALUE(f.continuation, '$.trigger') = N'always'
   OR (JSON_VALUE(f.continuation, '$.trigger') = N'on_success' AND f.succeeded = 1)
   OR (JSON_VALUE(f.continuation, '$.trigger') = N'on_failure' AND f.succeeded = 0);
DELETE FROM @finished;
"
        )
    };
}

/// What one transition changes in each batch its moved rows are members of: members leaving
/// the batch (a purge: `total` < 0), finishing (`succeeded`, `dead` > 0) or coming back (a
/// resurrect: `dead` < 0). Filled from the move's own OUTPUT rows, so a move of jobs that are
/// no batch's members finds it empty and never reads the batch table.
macro_rules! batch_delta_decl {
    () => {
        "DECLARE @batch_delta TABLE (batch_id  BINARY(16) NOT NULL PRIMARY KEY,
                             total     INT        NOT NULL,
                             succeeded INT        NOT NULL,
                             dead      INT        NOT NULL);
"
    };
}

/// Apply `@batch_delta` to the batch rows, in the move's transaction, and enqueue the
/// callbacks the new counts make due, each at most once (`crate::batch`: `Batch::due_callbacks`
/// decides the same way; `Batch::callback_job` built each callback's job when the batch was
/// created, into `[*_request]`, whose payload counts are filled in here).
///
/// The counting UPDATE comes first: its exclusive row lock, held to commit, makes two
/// transactions finishing members of one batch take turns, and the second reads the counts
/// and the `[*_job_id]` the first committed (an UPDATE reads the row it changes under its
/// lock, also with READ_COMMITTED_SNAPSHOT). A callback fires when its job id is still NULL
/// and the counts make it due, and that id is set by an UPDATE guarded by `IS NULL`, so it
/// fires once. Event codes: 1 on_death, 2 on_success, 3 on_complete (`BatchEvent::ALL`'s
/// order). Needs `@now` and `@ledger` (the callback jobs are pending rows of their queues,
/// whose settings rows the batch's creation made).
macro_rules! batches_apply {
    () => {
        concat!(
            "
DECLARE @batch_after TABLE (id         BINARY(16) NOT NULL PRIMARY KEY,
                            total      INT        NOT NULL,
                            succeeded  INT        NOT NULL,
                            dead       INT        NOT NULL,
                            newly_dead BIT        NOT NULL);
DECLARE @due TABLE (batch_id BINARY(16) NOT NULL,
                    event    TINYINT    NOT NULL,
                    job_id   BINARY(16) NOT NULL,
                    PRIMARY KEY (batch_id, event));
DECLARE @fired TABLE (batch_id BINARY(16) NOT NULL,
                      event    TINYINT    NOT NULL,
                      job_id   BINARY(16) NOT NULL,
                      PRIMARY KEY (batch_id, event));
IF EXISTS (SELECT 1 FROM @batch_delta)
BEGIN
    -- Every SET reads the row as it was, so the new figures are spelled out where used.
    UPDATE b
    SET b.total = b.total + d.total,
        b.succeeded = b.succeeded + d.succeeded,
        b.dead = CASE WHEN b.dead + d.dead < 0 THEN 0 ELSE b.dead + d.dead END,
        b.finished_at = CASE WHEN b.succeeded + d.succeeded
                                  + CASE WHEN b.dead + d.dead < 0 THEN 0 ELSE b.dead + d.dead END
                                  >= b.total + d.total
                             THEN ISNULL(b.finished_at, @now) END
    FROM [{schema}].[batches] AS b WITH (ROWLOCK, FORCESEEK), @batch_delta AS d
    WHERE d.batch_id = b.id;

    -- Read back rather than OUTPUT: Babelfish has no deleted.* in an UPDATE's OUTPUT, and
    -- loses a joined table there (README, SQL Server). The rows are this transaction's.
    INSERT INTO @batch_after (id, total, succeeded, dead, newly_dead)
    SELECT b.id, b.total, b.succeeded, b.dead, CASE WHEN d.dead > 0 THEN 1 ELSE 0 END
    FROM [{schema}].[batches] AS b WITH (ROWLOCK, FORCESEEK)
    JOIN @batch_delta AS d ON d.batch_id = b.id;

    INSERT INTO @due (batch_id, event, job_id)
    SELECT a.id, a.event, n.id
    FROM (SELECT x.*, e.event, NEWID() AS random
          FROM @batch_after AS x
          CROSS APPLY (VALUES (CAST(1 AS TINYINT)), (CAST(2 AS TINYINT)), (CAST(3 AS TINYINT))) AS e (event)) AS a
    JOIN [{schema}].[batches] AS b ON b.id = a.id
    CROSS APPLY [{schema}].[uuid_v7](@now, a.random) AS n
    WHERE (a.event = 1 AND a.newly_dead = 1 AND a.dead > 0
           AND b.death_request IS NOT NULL AND b.death_job_id IS NULL)
       OR (a.event = 2 AND a.succeeded = a.total
           AND b.success_request IS NOT NULL AND b.success_job_id IS NULL)
       OR (a.event = 3 AND a.succeeded + a.dead = a.total
           AND b.complete_request IS NOT NULL AND b.complete_job_id IS NULL);

    UPDATE [{schema}].[batches] WITH (ROWLOCK) SET death_job_id = u.job_id
    OUTPUT inserted.id, CAST(1 AS TINYINT), inserted.death_job_id INTO @fired (batch_id, event, job_id)
    FROM @due AS u
    WHERE u.batch_id = [{schema}].[batches].id AND u.event = 1
      AND [{schema}].[batches].death_job_id IS NULL;
    UPDATE [{schema}].[batches] WITH (ROWLOCK) SET success_job_id = u.job_id
    OUTPUT inserted.id, CAST(2 AS TINYINT), inserted.success_job_id INTO @fired (batch_id, event, job_id)
    FROM @due AS u
    WHERE u.batch_id = [{schema}].[batches].id AND u.event = 2
      AND [{schema}].[batches].success_job_id IS NULL;
    UPDATE [{schema}].[batches] WITH (ROWLOCK) SET complete_job_id = u.job_id
    OUTPUT inserted.id, CAST(3 AS TINYINT), inserted.complete_job_id INTO @fired (batch_id, event, job_id)
    FROM @due AS u
    WHERE u.batch_id = [{schema}].[batches].id AND u.event = 3
      AND [{schema}].[batches].complete_job_id IS NULL;

    -- The job as the engine built it, with the counts as of this move.
    INSERT INTO [{schema}].[jobs_hot]
        (id, queue, job_type, payload, tags, priority, created_by, created_at, scheduled_at,
         attempt, max_attempts, status, cancel_requested)
    OUTPUT inserted.queue, 1 INTO @ledger (queue, pending_delta)
    SELECT f.job_id, t.queue, t.job_type,
           N'{\"total\":' + CAST(a.total AS NVARCHAR(11))
               + N',\"succeeded\":' + CAST(a.succeeded AS NVARCHAR(11))
               + N',\"dead\":' + CAST(a.dead AS NVARCHAR(11)) + N','
               + STUFF(p.payload, 1, 1, N''),
           ISNULL(t.tags, N''), ISNULL(t.priority, 0), t.created_by, @now, @now, 0,
           t.max_attempts, 0, 0
    FROM @fired AS f
    JOIN @batch_after AS a ON a.id = f.batch_id
    JOIN [{schema}].[batches] AS b ON b.id = f.batch_id
    CROSS APPLY (SELECT CASE f.event WHEN 1 THEN b.death_request
                                     WHEN 2 THEN b.success_request
                                     ELSE b.complete_request END AS request) AS r
    -- The payload through JSON_QUERY: Babelfish cuts an NVARCHAR(MAX) column of OPENJSON
    -- WITH at 4,000 characters.
    CROSS APPLY (SELECT JSON_QUERY(r.request, '$.payload') AS payload) AS p
    CROSS APPLY OPENJSON(r.request) WITH (
        queue        NVARCHAR(255)  '$.queue',
        job_type     NVARCHAR(255)  '$.job_type',
        tags         NVARCHAR(1002) '$.tags',
        priority     INT            '$.priority',
        max_attempts INT            '$.max_attempts',
        created_by   NVARCHAR(255)  '$.created_by'
    ) AS t;
END
"
        )
    };
}

/// Create settings rows for queues seen for the first time (`@need_queues`), before any job
/// row is touched (lock order). The unlocked probe keeps the common case (queue exists) free
/// of range locks; the locked re-check makes the insert race free when two transactions meet
/// a new queue at once.
macro_rules! ensure_queues {
    () => {
        "
DECLARE @missing_queues TABLE (name NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY);
INSERT INTO @missing_queues (name)
SELECT DISTINCT n.name FROM @need_queues AS n
WHERE n.name IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM [{schema}].[queues] AS q WHERE q.name = n.name);
INSERT INTO [{schema}].[queues] (name, paused, hidden, created_at)
SELECT m.name, 0, 0, @now FROM @missing_queues AS m
WHERE NOT EXISTS (
    SELECT 1 FROM [{schema}].[queues] AS q WITH (UPDLOCK, HOLDLOCK) WHERE q.name = m.name);
"
    };
}

/// Apply `@ledger` to this session's slot of the queue counters. Update-then-insert under
/// UPDLOCK, HOLDLOCK: the key stays locked between the two statements, so two sessions on
/// one slot (equal `@@SPID % 16`) cannot both insert it. A slot may go negative (a job
/// counted in on one slot and out on another); only the sum means anything, and it is exact.
macro_rules! counters_apply {
    () => {
        "
DECLARE @counts TABLE (queue NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY,
                       pending BIGINT NOT NULL, fetched BIGINT NOT NULL, processing BIGINT NOT NULL,
                       archive BIGINT NOT NULL, dlq BIGINT NOT NULL);
INSERT INTO @counts (queue, pending, fetched, processing, archive, dlq)
SELECT queue, SUM(pending_delta), SUM(fetched_delta), SUM(processing_delta), SUM(archive_delta),
       SUM(dlq_delta)
FROM @ledger GROUP BY queue
HAVING SUM(pending_delta) <> 0 OR SUM(fetched_delta) <> 0 OR SUM(processing_delta) <> 0
    OR SUM(archive_delta) <> 0 OR SUM(dlq_delta) <> 0;

UPDATE c
SET c.pending_rows = c.pending_rows + d.pending,
    c.fetched_rows = c.fetched_rows + d.fetched,
    c.processing_rows = c.processing_rows + d.processing,
    c.archive_rows = c.archive_rows + d.archive,
    c.dlq_rows = c.dlq_rows + d.dlq
FROM [{schema}].[queue_counter_slots] AS c WITH (UPDLOCK, HOLDLOCK), @counts AS d
WHERE d.queue = c.queue AND c.slot = @slot;

INSERT INTO [{schema}].[queue_counter_slots]
    (queue, slot, pending_rows, fetched_rows, processing_rows, archive_rows, dlq_rows)
SELECT d.queue, @slot, d.pending, d.fetched, d.processing, d.archive, d.dlq
FROM @counts AS d
WHERE NOT EXISTS (
    SELECT 1 FROM [{schema}].[queue_counter_slots] AS c WITH (UPDLOCK, HOLDLOCK)
    WHERE c.queue = d.queue AND c.slot = @slot);
"
    };
}

/// Apply `@ledger` to this session's slot of the current minute's metric row per queue.
macro_rules! metrics_apply {
    () => {
        "
DECLARE @minute DATETIME2(0) =
    DATEADD(MINUTE, DATEDIFF(MINUTE, CAST('2000-01-01' AS DATETIME2(0)), @now),
            CAST('2000-01-01' AS DATETIME2(0)));
DECLARE @work TABLE (queue NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY,
                     succeeded BIGINT NOT NULL, failed BIGINT NOT NULL, retried BIGINT NOT NULL,
                     duration_sum_ms BIGINT NOT NULL, duration_max_ms BIGINT NOT NULL);
INSERT INTO @work (queue, succeeded, failed, retried, duration_sum_ms, duration_max_ms)
SELECT queue, SUM(succeeded), SUM(failed), SUM(retried),
       ISNULL(SUM(duration_ms), 0), ISNULL(MAX(duration_ms), 0)
FROM @ledger GROUP BY queue
HAVING SUM(succeeded) + SUM(failed) + SUM(retried) > 0;

UPDATE b
SET b.succeeded = b.succeeded + w.succeeded,
    b.failed = b.failed + w.failed,
    b.retried = b.retried + w.retried,
    b.duration_sum_ms = b.duration_sum_ms + w.duration_sum_ms,
    b.duration_max_ms = CASE WHEN w.duration_max_ms > b.duration_max_ms
                             THEN w.duration_max_ms ELSE b.duration_max_ms END
FROM [{schema}].[metric_slots] AS b WITH (UPDLOCK, HOLDLOCK), @work AS w
WHERE b.bucket_start = @minute AND b.queue = w.queue AND b.slot = @slot;

INSERT INTO [{schema}].[metric_slots]
    (bucket_start, queue, slot, succeeded, failed, retried, duration_sum_ms, duration_max_ms)
SELECT @minute, w.queue, @slot, w.succeeded, w.failed, w.retried, w.duration_sum_ms,
       w.duration_max_ms
FROM @work AS w
WHERE NOT EXISTS (
    SELECT 1 FROM [{schema}].[metric_slots] AS b WITH (UPDLOCK, HOLDLOCK)
    WHERE b.bucket_start = @minute AND b.queue = w.queue AND b.slot = @slot);
"
    };
}

/// Count the runs that ended in this statement (`@moved` joined with the completions `@c`,
/// each carrying the engine's run-time bin) into this session's slot of the current minute's
/// run-time rows per (job type, bin). Follows `metrics_apply!` (its `@minute`); these are
/// metric rows in the lock order, taken before the error groups.
macro_rules! run_times_apply {
    () => {
        "
DECLARE @runs TABLE (job_type NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
                     bin SMALLINT NOT NULL, runs BIGINT NOT NULL,
                     PRIMARY KEY (job_type, bin));
INSERT INTO @runs (job_type, bin, runs)
SELECT m.job_type, c.bin, COUNT_BIG(*)
FROM @moved AS m JOIN @c AS c ON c.id = m.id
WHERE c.kind IN ('s', 'd') AND c.bin IS NOT NULL
GROUP BY m.job_type, c.bin;

UPDATE r
SET r.runs = r.runs + w.runs
FROM [{schema}].[run_time_slots] AS r WITH (UPDLOCK, HOLDLOCK), @runs AS w
WHERE r.bucket_start = @minute AND r.job_type = w.job_type AND r.bin = w.bin
  AND r.slot = @slot;

INSERT INTO [{schema}].[run_time_slots] (bucket_start, job_type, bin, slot, runs)
SELECT @minute, w.job_type, w.bin, @slot, w.runs
FROM @runs AS w
WHERE NOT EXISTS (
    SELECT 1 FROM [{schema}].[run_time_slots] AS r WITH (UPDLOCK, HOLDLOCK)
    WHERE r.bucket_start = @minute AND r.job_type = w.job_type AND r.bin = w.bin
      AND r.slot = @slot);
"
    };
}

/// The fingerprint of a dead letter from the engine's head (`FingerprintHead`, computed in
/// Rust from reason, kind and the normalised message) and the row's job type: the first 8
/// bytes of SHA-256 over the text, as 16 lowercase hex digits (the schema's `[fingerprint]`):
/// on SQL Server the same value `FingerprintHead::for_job_type` computes.
macro_rules! fingerprint_of {
    ($head:literal, $job_type:literal) => {
        concat!(
            "(SELECT f.fingerprint FROM [{schema}].[fingerprint](",
            $head,
            ", ",
            $job_type,
            ") AS f)"
        )
    };
}

/// Apply `@ledger` to this session's slot of the DLQ error groups (by fingerprint). Groups
/// whose slots sum to zero are left for the pruner to delete (`PRUNE_ERROR_GROUPS`): one slot
/// alone cannot tell. Rows counted out carry no kind or sample; a slot they create gets empty
/// text, which the read skips (MAX over the slots).
macro_rules! error_groups_apply {
    () => {
        "
DECLARE @groups TABLE (fingerprint CHAR(16) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY,
                       reason TINYINT NOT NULL,
                       error_kind NVARCHAR(64) COLLATE DATABASE_DEFAULT NULL,
                       job_type NVARCHAR(255) COLLATE DATABASE_DEFAULT NULL,
                       sample NVARCHAR(400) COLLATE DATABASE_DEFAULT NULL,
                       delta BIGINT NOT NULL);
INSERT INTO @groups (fingerprint, reason, error_kind, job_type, sample, delta)
SELECT fingerprint, MAX(reason), MAX(error_kind), MAX(job_type), MAX(sample), SUM(dlq_delta)
FROM @ledger WHERE reason IS NOT NULL AND fingerprint IS NOT NULL
GROUP BY fingerprint
HAVING SUM(dlq_delta) <> 0;

UPDATE g
SET g.dlq_rows = g.dlq_rows + x.delta,
    g.last_seen = CASE WHEN x.delta > 0 THEN @now ELSE g.last_seen END,
    g.sample = CASE WHEN x.delta > 0 AND x.sample IS NOT NULL THEN x.sample ELSE g.sample END
FROM [{schema}].[error_fingerprint_slots] AS g WITH (UPDLOCK, HOLDLOCK), @groups AS x
WHERE x.fingerprint = g.fingerprint AND g.slot = @slot;

INSERT INTO [{schema}].[error_fingerprint_slots]
    (fingerprint, slot, reason, error_kind, job_type, sample, dlq_rows, last_seen)
SELECT x.fingerprint, @slot, x.reason, ISNULL(x.error_kind, N''), ISNULL(x.job_type, N''),
       ISNULL(x.sample, N''), x.delta,
       CASE WHEN x.delta > 0 THEN @now ELSE CAST('2000-01-01' AS DATETIME2(6)) END
FROM @groups AS x
WHERE NOT EXISTS (
    SELECT 1 FROM [{schema}].[error_fingerprint_slots] AS g WITH (UPDLOCK, HOLDLOCK)
    WHERE g.fingerprint = x.fingerprint AND g.slot = @slot);
"
    };
}

/// Counters, then metric rows, then error groups: the tail of the lock order.
macro_rules! ledger_apply {
    () => {
        concat!(counters_apply!(), metrics_apply!(), error_groups_apply!())
    };
}

/// Insert `@moved` into the DLQ with reason `@dead_reason` and an appended attempt error
/// (`@dead_kind`, `@dead_message`; `@dead_head` is their fingerprint head), plus the ledger
/// (each row leaves its hot state), the continuation rows for them and their batches' deaths
/// (`@batch_delta`, for `batches_apply!`).
macro_rules! moved_to_dlq_with_generated_error {
    () => {
        concat!(
            "
INSERT INTO [{schema}].[jobs_dlq]
    (id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id, created_by,
     created_at, scheduled_at, started_at, heartbeat_at, finished_at, expires_at, attempt,
     max_attempts, worker_id, errors, last_error, continuation, original_payload, batch_id,
     trace_context, reason, duration_ms, fingerprint)
SELECT m.id, m.queue, m.job_type, m.payload, m.tags, m.priority, m.idempotency_key,
       m.correlation_id, m.created_by, m.created_at, m.scheduled_at, m.started_at,
       m.heartbeat_at, @now, m.expires_at, m.attempt, m.max_attempts, m.worker_id,
       ",
            json_append!(
                "m.errors",
                "(N'{\"attempt\":' + CAST(m.attempt AS NVARCHAR(11))
           + N',\"at\":\"' + REPLACE(CONVERT(NVARCHAR(30), @now, 126), N' ', N'T') + N'Z\"'
           + N',\"kind\":\"' + @dead_kind + N'\"'
           + N',\"message\":\"' + STRING_ESCAPE(@dead_message, 'json') + N'\"}')"
            ),
            ",
       LEFT(@dead_message, 400), m.continuation, m.original_payload, m.batch_id,
       m.trace_context, @dead_reason,
       CASE WHEN m.started_at IS NULL THEN NULL
            ELSE DATEDIFF_BIG(MILLISECOND, m.started_at, @now) END,
       ",
            fingerprint_of!("@dead_head", "m.job_type"),
            "
FROM @moved AS m;

INSERT INTO @ledger (queue, pending_delta, fetched_delta, processing_delta, dlq_delta, failed,
                     reason, fingerprint, error_kind, job_type, sample)
SELECT m.queue,
       CASE WHEN m.status = 0 THEN -1 ELSE 0 END,
       CASE WHEN m.status = 1 THEN -1 ELSE 0 END,
       CASE WHEN m.status = 2 THEN -1 ELSE 0 END,
       1, 1, @dead_reason, ",
            fingerprint_of!("@dead_head", "m.job_type"),
            ",
       @dead_kind, m.job_type, LEFT(@dead_message, 400)
FROM @moved AS m;

INSERT INTO @finished (id, succeeded, reason, error, result, correlation_id, continuation)
SELECT m.id, 0, @dead_reason, @dead_message, NULL, m.correlation_id, m.continuation
FROM @moved AS m WHERE m.continuation IS NOT NULL;

INSERT INTO @batch_delta (batch_id, total, succeeded, dead)
SELECT m.batch_id, 0, 0, COUNT(*) FROM @moved AS m WHERE m.batch_id IS NOT NULL
GROUP BY m.batch_id;
"
        )
    };
}

/// What a move into the DLQ with an error the store writes declares: the reason's code, the
/// parameters that carry the error's kind, message and fingerprint head (for
/// `moved_to_dlq_with_generated_error!`), and the tables the move fills.
macro_rules! generated_error_decl {
    ($reason:literal, $kind:literal, $message:literal, $head:literal) => {
        concat!(
            "DECLARE @dead_reason TINYINT = ",
            $reason,
            ";
DECLARE @dead_kind NVARCHAR(20) = ",
            $kind,
            ";
DECLARE @dead_message NVARCHAR(400) = ",
            $message,
            ";
DECLARE @dead_head NVARCHAR(MAX) = ",
            $head,
            ";
",
            ledger_decl!(),
            finished_decl!(),
            moved_decl!(),
            batch_delta_decl!()
        )
    };
}

/// What follows the jobs a move wrote, in the lock order: their continuations, their
/// batches, then the books.
macro_rules! after_moved_jobs {
    () => {
        concat!(continuations_apply!(), batches_apply!(), ledger_apply!())
    };
}

/// Retention of a table without books to keep: at most @P2 rows whose `$older` column holds
/// a time before @P1 seconds ago, answered as `deleted`.
macro_rules! prune_older_rows {
    ($table:literal, $older:literal) => {
        tx!(
            "DELETE TOP (@P2) FROM [{schema}].[",
            $table,
            "]
WHERE ",
            $older,
            " DATEADD(SECOND, -@P1, SYSUTCDATETIME());
SELECT CAST(@@ROWCOUNT AS BIGINT) AS deleted;"
        )
    };
}

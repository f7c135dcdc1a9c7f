//! The worker paths: claim, start, heartbeat, release, complete.

use super::{Class, HOT_JOB_COLUMNS, Reads, Statement};

/// @P1 limit (at most `MAX_ROWS_PER_STATEMENT`: the store cuts larger claims), @P2 worker id,
/// @P3 JSON array of queue names or NULL for all, @P4 JSON array of job types or NULL for all
/// (external workers that run some types: a residual predicate on the same seeks, so a band
/// of other types is read past, not claimed).
///
/// Lock order: queues first. The settings rows of unpaused queues with a `max_workers` limit
/// are U-locked to the end of the transaction (no HOLDLOCK, which would range-lock every
/// queue scanned), so claimers of one limited queue take turns and each sees the fetched +
/// processing count the previous one committed: that makes the limit hold cluster-wide. The
/// count is two seeks, one per filtered index (`status = 1`, `status = 2`): an `IN (1, 2)`
/// matches neither and would read the queue's whole backlog under that lock.
///
/// The claim is a walk down the priority bands of the pending-only claim index
/// (queue, priority DESC, scheduled_at, id): for the highest band any lane still has, one
/// seek per lane on (queue, priority = band, scheduled_at <= now), which reads due rows only
/// and stops at the first future one; then the next band below (a one-row seek). So a
/// million future jobs cost a claim as much as none: one boundary row per band, never the
/// rows behind it. Bands stop once the batch is full, so the rows U-locked and left unclaimed
/// are at most those of the last band. UPDLOCK, READPAST, ROWLOCK: concurrent claimers skip
/// each other's rows instead of waiting. The best `@limit` candidates are then claimed by one
/// UPDATE, and OUTPUT captures exactly the rows it claimed (into a table variable, read back
/// below: a bare OUTPUT to the client fails with error 334 as soon as a table has a trigger).
pub const CLAIM: Statement = Statement {
    name: "claim",
    class: Class::Transition,
    reads: Reads::Rows(HOT_JOB_COLUMNS),
    sql: tx!(
        "DECLARE @limit INT = @P1;
DECLARE @worker NVARCHAR(255) = @P2;
DECLARE @queues NVARCHAR(MAX) = @P3;
DECLARE @types NVARCHAR(MAX) = @P4;
",
        ledger_decl!(),
        "DECLARE @wanted TABLE (name NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY);
DECLARE @lanes TABLE (queue       NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY,
                      max_workers INT    NULL,
                      slots       BIGINT NOT NULL,
                      band        INT    NULL);
DECLARE @candidates TABLE (seq          BIGINT        NOT NULL PRIMARY KEY,
                           queue        NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
                           priority     INT           NOT NULL,
                           scheduled_at DATETIME2(6)  NOT NULL,
                           id           BINARY(16)    NOT NULL);
DECLARE @claimed TABLE (seq BIGINT NOT NULL PRIMARY KEY,
                        queue NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL);
DECLARE @limits TABLE (queue        NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY,
                       period_start BIGINT NOT NULL,
                       left_starts  BIGINT NOT NULL);
DECLARE @remaining BIGINT = @limit;
DECLARE @band INT;
DECLARE @got BIGINT;

DECLARE @wanted_types TABLE (name NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY);
INSERT INTO @wanted (name) SELECT DISTINCT [value] FROM OPENJSON(ISNULL(@queues, N'[]'));
INSERT INTO @wanted_types (name) SELECT DISTINCT [value] FROM OPENJSON(ISNULL(@types, N'[]'));

-- Babelfish accepts UPDLOCK and ignores it (PostgreSQL locks a row only when it writes it), so
-- there claimers of limited queues take turns on one application lock, held until commit,
-- instead of on the queue and rate-limit rows below. SQL Server never enters this branch.
IF SERVERPROPERTY('BabelfishVersion') IS NOT NULL
BEGIN
    IF EXISTS (SELECT 1 FROM [{schema}].[queues] AS q
               WHERE q.paused = 0
                 AND (q.max_workers IS NOT NULL
                      OR EXISTS (SELECT 1 FROM [{schema}].[rate_limits] AS r WHERE r.queue = q.name))
                 AND (@queues IS NULL OR q.name IN (SELECT w.name FROM @wanted AS w)))
        EXEC sys.sp_getapplock @Resource = N'deck:claim:{schema}', @LockMode = N'Exclusive',
            @LockOwner = N'Transaction';
END

INSERT INTO @lanes (queue, max_workers, slots)
SELECT q.name, q.max_workers, q.max_workers
FROM [{schema}].[queues] AS q WITH (UPDLOCK, ROWLOCK)
WHERE q.paused = 0 AND q.max_workers IS NOT NULL
  AND (@queues IS NULL OR q.name IN (SELECT w.name FROM @wanted AS w));

UPDATE l
SET l.slots = l.max_workers
    - (SELECT COUNT_BIG(*) FROM [{schema}].[jobs_hot] AS h WITH (FORCESEEK)
       WHERE h.status = 1 AND h.queue = l.queue)
    - (SELECT COUNT_BIG(*) FROM [{schema}].[jobs_hot] AS h WITH (FORCESEEK)
       WHERE h.status = 2 AND h.queue = l.queue)
FROM @lanes AS l;

-- READPAST: a queue row not yet committed (an application's transaction enqueuing into a new
-- queue) has no committed jobs either, and is no reason to wait.
INSERT INTO @lanes (queue, max_workers, slots)
SELECT q.name, NULL, @limit
FROM [{schema}].[queues] AS q WITH (READPAST)
WHERE q.paused = 0 AND q.max_workers IS NULL
  AND (@queues IS NULL OR q.name IN (SELECT w.name FROM @wanted AS w));

-- Rate-limited lanes: the starts left in the current period (Unix seconds, aligned to the
-- epoch). UPDLOCK: claimers of one limited queue take turns on its row until commit, so the
-- last start is spent once.
INSERT INTO @limits (queue, period_start, left_starts)
SELECT r.queue, p.period_start,
       r.max_starts - CASE WHEN r.window_start = p.period_start THEN r.window_starts ELSE 0 END
FROM [{schema}].[rate_limits] AS r WITH (UPDLOCK, ROWLOCK)
JOIN @lanes AS l ON l.queue = r.queue
CROSS APPLY (SELECT DATEDIFF_BIG(SECOND, CAST('1970-01-01' AS DATETIME2(6)), @now)
                    - DATEDIFF_BIG(SECOND, CAST('1970-01-01' AS DATETIME2(6)), @now) % r.period_secs
                    AS period_start) AS p;
UPDATE l
SET l.slots = CASE WHEN m.left_starts < l.slots THEN m.left_starts ELSE l.slots END
FROM @lanes AS l
JOIN @limits AS m ON m.queue = l.queue;

-- Each lane's highest band. READPAST: a row another claimer is taking is no reason to wait.
UPDATE l
SET l.band = (SELECT TOP (1) h.priority
              FROM [{schema}].[jobs_hot] AS h WITH (READPAST, FORCESEEK)
              WHERE h.status = 0 AND h.queue = l.queue
                AND (@types IS NULL OR h.job_type IN (SELECT t.name FROM @wanted_types AS t))
              ORDER BY h.priority DESC)
FROM @lanes AS l
WHERE l.slots > 0;

SET @band = (SELECT MAX(l.band) FROM @lanes AS l WHERE l.slots > 0);
WHILE @band IS NOT NULL AND @remaining > 0
BEGIN
    INSERT INTO @candidates (seq, queue, priority, scheduled_at, id)
    SELECT c.seq, l.queue, c.priority, c.scheduled_at, c.id
    FROM @lanes AS l
    CROSS APPLY (
        SELECT TOP (CASE WHEN l.slots < @remaining THEN l.slots ELSE @remaining END)
               h.seq, h.priority, h.scheduled_at, h.id
        FROM [{schema}].[jobs_hot] AS h WITH (UPDLOCK, READPAST, ROWLOCK, FORCESEEK)
        WHERE h.status = 0 AND h.queue = l.queue AND h.priority = @band
          AND h.scheduled_at <= @now
          AND (h.expires_at IS NULL OR h.expires_at > @now)
          AND (@types IS NULL OR h.job_type IN (SELECT t.name FROM @wanted_types AS t))
        ORDER BY h.scheduled_at, h.id
    ) AS c
    WHERE l.band = @band AND l.slots > 0;
    SET @got = @@ROWCOUNT;
    -- Everything from the bands above was taken whole; this band fills the batch or is
    -- taken whole too, and then the lanes that had it move one band down.
    IF @got >= @remaining
        BREAK;
    SET @remaining -= @got;
    UPDATE l
    SET l.slots = l.slots - (SELECT COUNT_BIG(*) FROM @candidates AS c
                             WHERE c.queue = l.queue AND c.priority = @band),
        l.band = (SELECT TOP (1) h.priority
                  FROM [{schema}].[jobs_hot] AS h WITH (READPAST, FORCESEEK)
                  WHERE h.status = 0 AND h.queue = l.queue AND h.priority < @band
                    AND (@types IS NULL OR h.job_type IN (SELECT t.name FROM @wanted_types AS t))
                  ORDER BY h.priority DESC)
    FROM @lanes AS l
    WHERE l.band = @band;
    SET @band = (SELECT MAX(l.band) FROM @lanes AS l WHERE l.slots > 0);
END

UPDATE [{schema}].[jobs_hot] WITH (ROWLOCK)
SET status = 1, worker_id = @worker, fetched_at = @now
OUTPUT inserted.seq, inserted.queue INTO @claimed (seq, queue)
FROM (SELECT TOP (@limit) c.seq FROM @candidates AS c
      ORDER BY c.priority DESC, c.scheduled_at, c.id) AS pick
WHERE pick.seq = [{schema}].[jobs_hot].seq AND [{schema}].[jobs_hot].status = 0;

INSERT INTO @ledger (queue, pending_delta, fetched_delta)
SELECT c.queue, -COUNT(*), COUNT(*) FROM @claimed AS c GROUP BY c.queue;

-- What this claim took counts against each limited queue's current period.
UPDATE r
SET r.window_starts = CASE WHEN r.window_start = t.period_start THEN r.window_starts ELSE 0 END
                      + t.taken,
    r.window_start = t.period_start
FROM [{schema}].[rate_limits] AS r WITH (ROWLOCK),
     (SELECT m.queue, m.period_start, COUNT_BIG(*) AS taken
      FROM @limits AS m JOIN @claimed AS c ON c.queue = m.queue
      GROUP BY m.queue, m.period_start) AS t
WHERE t.queue = r.queue;
",
        counters_apply!(),
        "
SELECT ",
        job_columns!("h."),
        ", h.status, h.cancel_requested
FROM [{schema}].[jobs_hot] AS h WITH (FORCESEEK)
JOIN @claimed AS c ON c.seq = h.seq;"
    ),
};

/// For each slice of `@ids` (`id_slices!`): the hot rows this worker (`@worker`) holds in
/// status `$status` (and `$also`, more conditions), updated by `$set`, sent by `$output`.
macro_rules! update_owned_slices {
    ($status:literal, $set:literal, $output:literal, $also:literal) => {
        concat!(
            "WHILE @slice <= @slices
BEGIN
    UPDATE [{schema}].[jobs_hot] WITH (ROWLOCK)
    SET ",
            $set,
            "
    OUTPUT ",
            $output,
            "
    FROM @ids AS i
    WHERE i.id = [{schema}].[jobs_hot].id AND i.slice = @slice
      AND [{schema}].[jobs_hot].status = ",
            $status,
            " AND [{schema}].[jobs_hot].worker_id = @worker",
            $also,
            ";
    SET @slice += 1;
END
"
        )
    };
}

/// @P1 worker id, @P2 JSON array of ids (hex). The ownership check before user code runs:
/// fetched by this worker → processing, attempt + 1. Answers the ids it started; an id
/// missing from the answer must not run. Slices of 1,000 ids per statement.
pub const MARK_PROCESSING: Statement = Statement {
    name: "mark_processing",
    class: Class::Transition,
    reads: Reads::Rows(&["id"]),
    sql: tx!(
        "DECLARE @worker NVARCHAR(255) = @P1;
",
        ledger_decl!(),
        id_slices!("@P2"),
        "DECLARE @started TABLE (id BINARY(16) NOT NULL PRIMARY KEY,
                        queue NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL);
",
        update_owned_slices!(
            "1",
            "status = 2, attempt = attempt + 1, started_at = @now, heartbeat_at = @now",
            "inserted.id, inserted.queue INTO @started (id, queue)",
            "
      AND ([{schema}].[jobs_hot].expires_at IS NULL OR [{schema}].[jobs_hot].expires_at > @now)"
        ),
        "
INSERT INTO @ledger (queue, fetched_delta, processing_delta)
SELECT s.queue, -COUNT(*), COUNT(*) FROM @started AS s GROUP BY s.queue;
",
        counters_apply!(),
        "
SELECT s.id AS id FROM @started AS s;"
    ),
};

/// @P1 worker id, @P2 JSON ids. Answers the still-owned ids and their cancel flag. A
/// heartbeat writes the clustered row only: heartbeat_at is in no index.
pub const HEARTBEAT: Statement = Statement {
    name: "heartbeat",
    class: Class::Transition,
    reads: Reads::Rows(&["id", "cancel_requested"]),
    sql: tx!(
        "DECLARE @worker NVARCHAR(255) = @P1;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
",
        id_slices!("@P2"),
        "DECLARE @alive TABLE (id BINARY(16) NOT NULL PRIMARY KEY, cancel_requested BIT NOT NULL);
",
        update_owned_slices!(
            "2",
            "heartbeat_at = @now",
            "inserted.id, inserted.cancel_requested INTO @alive (id, cancel_requested)",
            ""
        ),
        "
SELECT a.id AS id, a.cancel_requested FROM @alive AS a;"
    ),
};

/// @P1 worker id, @P2 JSON ids, @P3 run_at or NULL (keep the due time). Fetched by this
/// worker → pending; no attempt spent. Answers how many.
pub const RELEASE: Statement = Statement {
    name: "release",
    class: Class::Transition,
    reads: Reads::Rows(&["released"]),
    sql: tx!(
        "DECLARE @worker NVARCHAR(255) = @P1;
DECLARE @run_at DATETIME2(6) = @P3;
",
        ledger_decl!(),
        id_slices!("@P2"),
        "DECLARE @released TABLE (id BINARY(16) NOT NULL PRIMARY KEY,
                         queue NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL);
",
        update_owned_slices!(
            "1",
            "status = 0, worker_id = NULL, fetched_at = NULL,
        scheduled_at = ISNULL(@run_at, scheduled_at)",
            "inserted.id, inserted.queue INTO @released (id, queue)",
            ""
        ),
        "
INSERT INTO @ledger (queue, pending_delta, fetched_delta)
SELECT r.queue, COUNT(*), -COUNT(*) FROM @released AS r GROUP BY r.queue;
",
        counters_apply!(),
        "
SELECT COUNT_BIG(*) AS released FROM @released AS r;"
    ),
};

/// @P1 worker id, @P2 JSON array of completions (see `store::CompletionRow`).
/// Answers the ids that were applied. Every move checks `status = 2 AND worker_id = @worker`:
/// a job rescued, cancelled or completed by someone else meanwhile is left alone. One
/// transaction for the whole group, in slices of 1,000 jobs per statement; the batches of
/// members that finished (`batches_apply!`, nothing when none did) and the books (counters,
/// metric rows, error groups) once at the end.
pub const COMPLETE: Statement = Statement {
    name: "complete",
    class: Class::Transition,
    reads: Reads::Rows(&["id"]),
    sql: tx!(
        "DECLARE @worker NVARCHAR(255) = @P1;
DECLARE @completions NVARCHAR(MAX) = @P2;
",
        ledger_decl!(),
        finished_decl!(),
        moved_decl!(),
        batch_delta_decl!(),
        "DECLARE @c TABLE (
    slice       INT           NOT NULL,
    id          BINARY(16)    NOT NULL,
    kind        CHAR(1)       COLLATE DATABASE_DEFAULT NOT NULL,
    result      NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
    duration_ms BIGINT        NULL,
    reason      TINYINT       NULL,
    error       NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
    message     NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
    fp_head     NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
    retry_at    DATETIME2(6)  NULL,
    bin         SMALLINT      NULL,
    PRIMARY KEY (slice, id),
    UNIQUE (id)
);
DECLARE @retried TABLE (id BINARY(16) NOT NULL PRIMARY KEY,
                        queue NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL);
DECLARE @unrun TABLE (id BINARY(16) NOT NULL PRIMARY KEY,
                      queue NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL);

INSERT INTO @c (slice, id, kind, result, duration_ms, reason, error, message, fp_head, retry_at,
                bin)
SELECT (ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) - 1) / 1000, u.id,
       j.kind,
       CASE WHEN LEFT(x.result_json, 1) = N'[' THEN SUBSTRING(x.result_json, 2, LEN(x.result_json) - 2)
            ELSE j.result_text END,
       j.duration_ms, j.reason, x.error,
       j.message, j.fp_head, j.retry_at, j.bin
FROM OPENJSON(@completions) AS e
-- JSON values through JSON_QUERY, not OPENJSON WITH: Babelfish cuts an NVARCHAR(MAX) column
-- of OPENJSON WITH at 4,000 characters.
CROSS APPLY (SELECT JSON_QUERY(e.[value], '$.result') AS result_json,
                    JSON_QUERY(e.[value], '$.error') AS error) AS x
CROSS APPLY OPENJSON(e.[value]) WITH (
    id          NVARCHAR(36)  '$.id',
    kind        CHAR(1)       '$.kind',
    result_text NVARCHAR(MAX) '$.result',
    duration_ms BIGINT        '$.duration_ms',
    reason      TINYINT       '$.reason',
    message     NVARCHAR(MAX) '$.message',
    fp_head     NVARCHAR(MAX) '$.fp_head',
    retry_at    DATETIME2(6)  '$.retry_at',
    bin         SMALLINT      '$.bin'
) AS j
CROSS APPLY [{schema}].[uuid_bytes](j.id) AS u;
DECLARE @slice INT = 0;
DECLARE @slices INT = (SELECT MAX(slice) FROM @c);

WHILE @slice <= @slices
BEGIN
    -- Retries stay in the hot table: back to pending, due at retry_at, the error kept.
    UPDATE [{schema}].[jobs_hot] WITH (ROWLOCK)
    SET status = 0, worker_id = NULL, fetched_at = NULL, heartbeat_at = NULL,
        scheduled_at = c.retry_at,
        errors = ",
        json_append!("[{schema}].[jobs_hot].errors", "c.error"),
        ",
        last_error = LEFT(c.message, 400)
    OUTPUT inserted.id, inserted.queue INTO @retried (id, queue)
    FROM @c AS c
    WHERE c.slice = @slice AND c.id = [{schema}].[jobs_hot].id AND c.kind = 'r'
      AND [{schema}].[jobs_hot].status = 2 AND [{schema}].[jobs_hot].worker_id = @worker;

    -- Given back unrun: pending where it stood in the claim order, the attempt uncounted.
    UPDATE [{schema}].[jobs_hot] WITH (ROWLOCK)
    SET status = 0, worker_id = NULL, fetched_at = NULL, heartbeat_at = NULL,
        attempt = CASE WHEN attempt > 0 THEN attempt - 1 ELSE 0 END
    OUTPUT inserted.id, inserted.queue INTO @unrun (id, queue)
    FROM @c AS c
    WHERE c.slice = @slice AND c.id = [{schema}].[jobs_hot].id AND c.kind = 'u'
      AND [{schema}].[jobs_hot].status = 2 AND [{schema}].[jobs_hot].worker_id = @worker;

    -- Successes and dead letters leave the hot table: delete first, then write the target.
    DELETE FROM [{schema}].[jobs_hot] WITH (ROWLOCK)
    ",
        output_into_moved!(),
        "
    FROM @c AS c
    WHERE c.slice = @slice AND c.id = [{schema}].[jobs_hot].id AND c.kind IN ('s', 'd')
      AND [{schema}].[jobs_hot].status = 2 AND [{schema}].[jobs_hot].worker_id = @worker;

    INSERT INTO [{schema}].[jobs_archive]
        (id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id,
         created_by, created_at, scheduled_at, started_at, heartbeat_at, finished_at,
         expires_at, attempt, max_attempts, worker_id, errors, last_error, continuation,
         original_payload, batch_id, trace_context, result, duration_ms)
    SELECT m.id, m.queue, m.job_type, m.payload, m.tags, m.priority, m.idempotency_key,
           m.correlation_id, m.created_by, m.created_at, m.scheduled_at, m.started_at,
           m.heartbeat_at, @now, m.expires_at, m.attempt, m.max_attempts, m.worker_id,
           m.errors, m.last_error, m.continuation, m.original_payload, m.batch_id,
           m.trace_context, c.result, c.duration_ms
    FROM @moved AS m JOIN @c AS c ON c.slice = @slice AND c.id = m.id AND c.kind = 's';

    INSERT INTO [{schema}].[jobs_dlq]
        (id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id,
         created_by, created_at, scheduled_at, started_at, heartbeat_at, finished_at,
         expires_at, attempt, max_attempts, worker_id, errors, last_error, continuation,
         original_payload, batch_id, trace_context, reason, duration_ms, fingerprint)
    SELECT m.id, m.queue, m.job_type, m.payload, m.tags, m.priority, m.idempotency_key,
           m.correlation_id, m.created_by, m.created_at, m.scheduled_at, m.started_at,
           m.heartbeat_at, @now, m.expires_at, m.attempt, m.max_attempts, m.worker_id,
           ",
        json_append!("m.errors", "c.error"),
        ",
           LEFT(c.message, 400), m.continuation, m.original_payload, m.batch_id,
           m.trace_context, c.reason, c.duration_ms,
           ",
        fingerprint_of!("c.fp_head", "m.job_type"),
        "
    FROM @moved AS m JOIN @c AS c ON c.slice = @slice AND c.id = m.id AND c.kind = 'd';

    INSERT INTO @finished (id, succeeded, reason, error, result, correlation_id, continuation)
    SELECT m.id, CASE WHEN c.kind = 's' THEN 1 ELSE 0 END,
           CASE WHEN c.kind = 'd' THEN c.reason END,
           CASE WHEN c.kind = 'd' THEN c.message END,
           CASE WHEN c.kind = 's' THEN c.result END,
           m.correlation_id, m.continuation
    FROM @moved AS m JOIN @c AS c ON c.slice = @slice AND c.id = m.id
    WHERE m.continuation IS NOT NULL;
",
        continuations_apply!(),
        "
    SET @slice += 1;
END

INSERT INTO @ledger (queue, pending_delta, processing_delta, retried)
SELECT r.queue, 1, -1, 1 FROM @retried AS r;
INSERT INTO @ledger (queue, pending_delta, processing_delta)
SELECT u.queue, 1, -1 FROM @unrun AS u;

INSERT INTO @ledger (queue, processing_delta, archive_delta, dlq_delta, succeeded, failed,
                     duration_ms, reason, fingerprint, error_kind, job_type, sample)
SELECT m.queue, -1,
       CASE WHEN c.kind = 's' THEN 1 ELSE 0 END,
       CASE WHEN c.kind = 'd' THEN 1 ELSE 0 END,
       CASE WHEN c.kind = 's' THEN 1 ELSE 0 END,
       CASE WHEN c.kind = 'd' THEN 1 ELSE 0 END,
       c.duration_ms,
       CASE WHEN c.kind = 'd' THEN c.reason END,
       CASE WHEN c.kind = 'd' THEN ",
        fingerprint_of!("c.fp_head", "m.job_type"),
        " END,
       CASE WHEN c.kind = 'd' THEN LEFT(JSON_VALUE(c.error, '$.kind'), 64) END,
       CASE WHEN c.kind = 'd' THEN m.job_type END,
       CASE WHEN c.kind = 'd' THEN ISNULL(LEFT(c.message, 400), N'') END
FROM @moved AS m JOIN @c AS c ON c.id = m.id;

-- Batch members among the moved rows count into their batches (after the jobs: lock order).
INSERT INTO @batch_delta (batch_id, total, succeeded, dead)
SELECT m.batch_id, 0, SUM(CASE WHEN c.kind = 's' THEN 1 ELSE 0 END),
       SUM(CASE WHEN c.kind = 'd' THEN 1 ELSE 0 END)
FROM @moved AS m JOIN @c AS c ON c.id = m.id
WHERE m.batch_id IS NOT NULL
GROUP BY m.batch_id;
",
        batches_apply!(),
        counters_apply!(),
        metrics_apply!(),
        run_times_apply!(),
        error_groups_apply!(),
        "
SELECT a.id AS id
FROM (SELECT r.id FROM @retried AS r UNION ALL SELECT u.id FROM @unrun AS u
      UNION ALL SELECT m.id FROM @moved AS m) AS a;"
    ),
};

//! Every SQL statement of the SQL Server store, in one place, with its consistency class
//! (DESIGN §4). `[{schema}]` is replaced with the validated schema name; every value is a
//! bound parameter (`@P1`, `@P2`, … aliased to named variables at the top of each batch).
//!
//! Shapes used throughout:
//! - Transitions run as one batch: `SET XACT_ABORT ON`, `BEGIN TRY … BEGIN TRANSACTION …
//!   COMMIT`, `CATCH` rolls back and re-throws the original error (so 1205 stays 1205 for the
//!   retry policy). One round trip, so no lock is held while the client thinks.
//! - Moves between pillars delete first with `OUTPUT deleted.… INTO @moved` and insert from
//!   `@moved`; counters, metric buckets and error groups follow from a `@ledger` of what moved,
//!   in the same transaction (`ledger_apply!`).
//! - Upserts are update-then-insert under `UPDLOCK, HOLDLOCK` — never `MERGE`.
//! - Id lists travel as one JSON parameter read with `OPENJSON` (SQL Server 2016+,
//!   compatibility level 130+), so a batch is one statement, not one per job.
//! - Table variables declare text columns `COLLATE DATABASE_DEFAULT`: they live in tempdb,
//!   whose collation may differ from the database's.
//! - Only the telemetry class reads with `NOLOCK`; a unit test enforces it.

/// How an operation may read (DESIGN §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Approximate dashboard numbers: dirty reads allowed.
    Telemetry,
    /// Anything an operator or the engine decides on: READ COMMITTED.
    Committed,
    /// Locked, transactional state changes.
    Transition,
    /// Schema bootstrap and verification.
    Schema,
}

/// One named statement, for the policy tests and for tracing.
#[derive(Debug, Clone, Copy)]
pub struct Statement {
    pub name: &'static str,
    pub class: Class,
    pub sql: &'static str,
}

// ---------------------------------------------------------------------------------- fragments

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
         max_attempts, worker_id, errors, last_error, continuation, original_payload"
    };
}

macro_rules! deleted_common_columns {
    () => {
        "deleted.id, deleted.queue, deleted.job_type, deleted.payload, deleted.tags, \
         deleted.priority, deleted.idempotency_key, deleted.correlation_id, deleted.created_by, \
         deleted.created_at, deleted.scheduled_at, deleted.started_at, deleted.heartbeat_at, \
         deleted.expires_at, deleted.attempt, deleted.max_attempts, deleted.worker_id, \
         deleted.errors, deleted.last_error, deleted.continuation, deleted.original_payload"
    };
}

macro_rules! hot_read_columns {
    () => {
        concat!(common_columns!(), ", status, cancel_requested")
    };
}

macro_rules! archive_read_columns {
    () => {
        concat!(common_columns!(), ", finished_at, result")
    };
}

macro_rules! dlq_read_columns {
    () => {
        concat!(common_columns!(), ", finished_at, reason")
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
    reason           TINYINT        NULL,
    seq              BIGINT         NULL
);
"
    };
}

/// What a transition changed, per queue, for counters, metric buckets and error groups.
macro_rules! ledger_decl {
    () => {
        "DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @ledger TABLE (
    queue          NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    archive_delta  INT           NOT NULL DEFAULT 0,
    dlq_delta      INT           NOT NULL DEFAULT 0,
    succeeded      INT           NOT NULL DEFAULT 0,
    failed         INT           NOT NULL DEFAULT 0,
    retried        INT           NOT NULL DEFAULT 0,
    duration_ms    BIGINT        NULL,
    reason         TINYINT       NULL,
    message_prefix NVARCHAR(80)  COLLATE DATABASE_DEFAULT NULL
);
DECLARE @need_queues TABLE (name NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL);
DECLARE @finished TABLE (
    id             BINARY(16)    NOT NULL,
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

/// Enqueue the continuations of finished jobs (`@finished`), in the same transaction.
/// Their ids are UUID v7 built here: 48-bit Unix milliseconds from the database clock, the
/// version and variant bits, and random bits from NEWID().
macro_rules! continuations_apply {
    () => {
        "
INSERT INTO [{schema}].[jobs_hot]
    (id, queue, job_type, payload, tags, priority, correlation_id, created_at, scheduled_at,
     attempt, status, cancel_requested)
SELECT
    CAST(CAST(DATEDIFF_BIG(MILLISECOND, CAST('1970-01-01' AS DATETIME2(6)), @now) AS BINARY(6))
        + CAST(28672 | (CAST(SUBSTRING(CAST(NEWID() AS BINARY(16)), 1, 2) AS INT) & 4095) AS BINARY(2))
        + CAST(32768 | (CAST(SUBSTRING(CAST(NEWID() AS BINARY(16)), 3, 2) AS INT) & 16383) AS BINARY(2))
        + SUBSTRING(CAST(NEWID() AS BINARY(16)), 5, 6) AS BINARY(16)),
    JSON_VALUE(f.continuation, '$.queue'),
    JSON_VALUE(f.continuation, '$.job_type'),
    N'{\"parent_id\":\"'
        + LOWER(STUFF(STUFF(STUFF(STUFF(CONVERT(CHAR(32), f.id, 2), 21, 0, '-'), 17, 0, '-'), 13, 0, '-'), 9, 0, '-'))
        + N'\",\"outcome\":\"' + CASE WHEN f.succeeded = 1 THEN N'succeeded' ELSE N'dead' END
        + N'\",\"reason\":' + ISNULL(N'\"' + CASE f.reason
            WHEN 1 THEN N'Failed' WHEN 2 THEN N'Fatal' WHEN 3 THEN N'Timeout'
            WHEN 4 THEN N'Cancelled' WHEN 5 THEN N'Zombie' WHEN 6 THEN N'HeartbeatFailure'
            WHEN 7 THEN N'RetryLifetimeExpired' WHEN 8 THEN N'Expired' WHEN 9 THEN N'Throttled'
          END + N'\"', N'null')
        + N',\"error\":' + ISNULL(N'\"' + STRING_ESCAPE(f.error, 'json') + N'\"', N'null')
        + N',\"result\":' + ISNULL(f.result, N'null') + N'}',
    N'', 0, f.correlation_id, @now, @now, 0, 0, 0
FROM @finished AS f
WHERE JSON_VALUE(f.continuation, '$.trigger') = N'always'
   OR (JSON_VALUE(f.continuation, '$.trigger') = N'on_success' AND f.succeeded = 1)
   OR (JSON_VALUE(f.continuation, '$.trigger') = N'on_failure' AND f.succeeded = 0);

INSERT INTO @need_queues (name)
SELECT JSON_VALUE(f.continuation, '$.queue') FROM @finished AS f;
"
    };
}

/// Create settings rows for queues seen for the first time. The unlocked probe keeps the
/// common case (queue exists) free of range locks; the locked re-check makes the insert
/// race free when two transactions meet a new queue at once.
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

/// Apply `@ledger` to the counters, the current minute's metric bucket and the DLQ error
/// groups. Update-then-insert under UPDLOCK, HOLDLOCK: the key range stays locked between the
/// two statements, so concurrent transitions cannot both insert the same row.
macro_rules! ledger_apply {
    () => {
        "
DECLARE @counts TABLE (queue NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY,
                       archive_delta BIGINT NOT NULL, dlq_delta BIGINT NOT NULL);
INSERT INTO @counts (queue, archive_delta, dlq_delta)
SELECT queue, SUM(archive_delta), SUM(dlq_delta) FROM @ledger GROUP BY queue
HAVING SUM(archive_delta) <> 0 OR SUM(dlq_delta) <> 0;

UPDATE c
SET c.archive_rows = c.archive_rows + d.archive_delta,
    c.dlq_rows = c.dlq_rows + d.dlq_delta
FROM [{schema}].[queue_counters] AS c WITH (UPDLOCK, HOLDLOCK)
JOIN @counts AS d ON d.queue = c.queue;

INSERT INTO [{schema}].[queue_counters] (queue, archive_rows, dlq_rows)
SELECT d.queue,
       CASE WHEN d.archive_delta > 0 THEN d.archive_delta ELSE 0 END,
       CASE WHEN d.dlq_delta > 0 THEN d.dlq_delta ELSE 0 END
FROM @counts AS d
WHERE NOT EXISTS (
    SELECT 1 FROM [{schema}].[queue_counters] AS c WITH (UPDLOCK, HOLDLOCK) WHERE c.queue = d.queue);

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
FROM [{schema}].[metric_buckets] AS b WITH (UPDLOCK, HOLDLOCK)
JOIN @work AS w ON b.bucket_start = @minute AND b.queue = w.queue;

INSERT INTO [{schema}].[metric_buckets]
    (bucket_start, queue, succeeded, failed, retried, duration_sum_ms, duration_max_ms)
SELECT @minute, w.queue, w.succeeded, w.failed, w.retried, w.duration_sum_ms, w.duration_max_ms
FROM @work AS w
WHERE NOT EXISTS (
    SELECT 1 FROM [{schema}].[metric_buckets] AS b WITH (UPDLOCK, HOLDLOCK)
    WHERE b.bucket_start = @minute AND b.queue = w.queue);

DECLARE @groups TABLE (reason TINYINT NOT NULL,
                       message_prefix NVARCHAR(80) COLLATE DATABASE_DEFAULT NOT NULL,
                       delta BIGINT NOT NULL, PRIMARY KEY (reason, message_prefix));
INSERT INTO @groups (reason, message_prefix, delta)
SELECT reason, ISNULL(message_prefix, N''), SUM(dlq_delta)
FROM @ledger WHERE reason IS NOT NULL
GROUP BY reason, ISNULL(message_prefix, N'')
HAVING SUM(dlq_delta) <> 0;

UPDATE g
SET g.dlq_rows = g.dlq_rows + x.delta,
    g.last_seen = CASE WHEN x.delta > 0 THEN @now ELSE g.last_seen END
FROM [{schema}].[error_groups] AS g WITH (UPDLOCK, HOLDLOCK)
JOIN @groups AS x ON x.reason = g.reason AND x.message_prefix = g.message_prefix;

INSERT INTO [{schema}].[error_groups] (reason, message_prefix, dlq_rows, last_seen)
SELECT x.reason, x.message_prefix, x.delta, @now
FROM @groups AS x
WHERE x.delta > 0
  AND NOT EXISTS (
    SELECT 1 FROM [{schema}].[error_groups] AS g WITH (UPDLOCK, HOLDLOCK)
    WHERE g.reason = x.reason AND g.message_prefix = x.message_prefix);

DELETE g
FROM [{schema}].[error_groups] AS g
JOIN @groups AS x ON x.reason = g.reason AND x.message_prefix = g.message_prefix
WHERE g.dlq_rows <= 0;
"
    };
}

/// Insert `@moved` into the DLQ with reason `@dead_reason`, an appended attempt error
/// (`@dead_kind`, `@dead_message`, or the per-row error already in `last_error`), plus the
/// ledger and continuation rows for them.
macro_rules! moved_to_dlq_with_generated_error {
    () => {
        "
INSERT INTO [{schema}].[jobs_dlq]
    (id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id, created_by,
     created_at, scheduled_at, started_at, heartbeat_at, finished_at, expires_at, attempt,
     max_attempts, worker_id, errors, last_error, continuation, original_payload, reason,
     duration_ms)
SELECT m.id, m.queue, m.job_type, m.payload, m.tags, m.priority, m.idempotency_key,
       m.correlation_id, m.created_by, m.created_at, m.scheduled_at, m.started_at,
       m.heartbeat_at, @now, m.expires_at, m.attempt, m.max_attempts, m.worker_id,
       JSON_MODIFY(ISNULL(m.errors, N'[]'), 'append $', JSON_QUERY(
           N'{\"attempt\":' + CAST(m.attempt AS NVARCHAR(11))
           + N',\"at\":\"' + CONVERT(NVARCHAR(30), @now, 126) + N'Z\"'
           + N',\"kind\":\"' + @dead_kind + N'\"'
           + N',\"message\":\"' + STRING_ESCAPE(@dead_message, 'json') + N'\"}')),
       LEFT(@dead_message, 400), m.continuation, m.original_payload, @dead_reason,
       CASE WHEN m.started_at IS NULL THEN NULL
            ELSE DATEDIFF_BIG(MILLISECOND, m.started_at, @now) END
FROM @moved AS m;

INSERT INTO @ledger (queue, dlq_delta, failed, reason, message_prefix)
SELECT m.queue, 1, 1, @dead_reason, LEFT(@dead_message, 80) FROM @moved AS m;

INSERT INTO @finished (id, succeeded, reason, error, result, correlation_id, continuation)
SELECT m.id, 0, @dead_reason, @dead_message, NULL, m.correlation_id, m.continuation
FROM @moved AS m WHERE m.continuation IS NOT NULL;
"
    };
}

// ---------------------------------------------------------------------------------- session

/// Run once per pooled connection. The SET options are the ones filtered indexes require
/// for DML (most drivers set them; being explicit costs nothing). LOCK_TIMEOUT turns an
/// unexpected block into error 1222 (retried) instead of a hang.
pub const SESSION_SETUP: &str = "SET ANSI_NULLS ON;
SET ANSI_PADDING ON;
SET ANSI_WARNINGS ON;
SET ARITHABORT ON;
SET CONCAT_NULL_YIELDS_NULL ON;
SET QUOTED_IDENTIFIER ON;
SET NUMERIC_ROUNDABORT OFF;
SET LOCK_TIMEOUT 10000;
SET DEADLOCK_PRIORITY NORMAL;";

pub const PING: &str =
    "SELECT TOP (1) version FROM [{schema}].[schema_version] ORDER BY version DESC;";

// ---------------------------------------------------------------------------------- producers

/// @P1: JSON array of requests (see `store::EnqueueRow`). Returns (ord, id, created) per request.
/// The id is generated by the client before the first attempt, so a retry after an
/// ambiguous failure (connection lost after commit) finds its own row instead of inserting
/// twice; idempotency keys are checked under UPDLOCK, HOLDLOCK so two producers with the same
/// key serialise on the key's range of the filtered unique index.
pub const ENQUEUE: &str = tx!(
    "DECLARE @jobs_json NVARCHAR(MAX) = @P1;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @need_queues TABLE (name NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL);
DECLARE @jobs TABLE (
    ord             INT            NOT NULL PRIMARY KEY,
    id              BINARY(16)     NOT NULL,
    queue           NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    job_type        NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    payload         NVARCHAR(MAX)  COLLATE DATABASE_DEFAULT NOT NULL,
    tags            NVARCHAR(1002) COLLATE DATABASE_DEFAULT NOT NULL,
    priority        INT            NOT NULL,
    idempotency_key NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NULL,
    correlation_id  NVARCHAR(255)  COLLATE DATABASE_DEFAULT NULL,
    created_by      NVARCHAR(255)  COLLATE DATABASE_DEFAULT NULL,
    scheduled_at    DATETIME2(6)   NOT NULL,
    expires_at      DATETIME2(6)   NULL,
    max_attempts    INT            NULL,
    continuation    NVARCHAR(MAX)  COLLATE DATABASE_DEFAULT NULL,
    outcome_id      BINARY(16)     NULL,
    created         BIT            NULL
);

INSERT INTO @jobs (ord, id, queue, job_type, payload, tags, priority, idempotency_key,
                   correlation_id, created_by, scheduled_at, expires_at, max_attempts,
                   continuation)
SELECT j.ord, CONVERT(BINARY(16), j.id, 2), j.queue, j.job_type, j.payload, j.tags, j.priority,
       j.idempotency_key, j.correlation_id, j.created_by,
       CASE WHEN j.scheduled_at IS NOT NULL THEN j.scheduled_at
            WHEN j.delay_ms IS NOT NULL
                THEN DATEADD(MILLISECOND, j.delay_ms % 1000, DATEADD(SECOND, j.delay_ms / 1000, @now))
            ELSE @now END,
       j.expires_at, j.max_attempts, j.continuation
FROM OPENJSON(@jobs_json) WITH (
    ord             INT            '$.ord',
    id              CHAR(32)       '$.id',
    queue           NVARCHAR(255)  '$.queue',
    job_type        NVARCHAR(255)  '$.job_type',
    payload         NVARCHAR(MAX)  '$.payload',
    tags            NVARCHAR(1002) '$.tags',
    priority        INT            '$.priority',
    idempotency_key NVARCHAR(255)  '$.idempotency_key',
    correlation_id  NVARCHAR(255)  '$.correlation_id',
    created_by      NVARCHAR(255)  '$.created_by',
    scheduled_at    DATETIME2(6)   '$.scheduled_at',
    delay_ms        BIGINT         '$.delay_ms',
    expires_at      DATETIME2(6)   '$.expires_at',
    max_attempts    INT            '$.max_attempts',
    continuation    NVARCHAR(MAX)  '$.continuation'
) AS j;

-- A retry of a batch that did commit: its rows are already here, under its own ids.
UPDATE j SET j.outcome_id = j.id, j.created = 1
FROM @jobs AS j
WHERE EXISTS (SELECT 1 FROM [{schema}].[jobs_hot] AS h WHERE h.id = j.id);

-- An active job already holds the key.
UPDATE j SET j.outcome_id = h.id, j.created = 0
FROM @jobs AS j
JOIN [{schema}].[jobs_hot] AS h WITH (UPDLOCK, HOLDLOCK)
  ON h.idempotency_key = j.idempotency_key AND h.idempotency_key IS NOT NULL
WHERE j.outcome_id IS NULL AND j.idempotency_key IS NOT NULL;

-- Duplicates inside the batch: the first request with a key wins.
UPDATE j SET j.outcome_id = w.id, j.created = 0
FROM @jobs AS j
JOIN (SELECT idempotency_key, MIN(ord) AS first_ord FROM @jobs
      WHERE outcome_id IS NULL AND idempotency_key IS NOT NULL
      GROUP BY idempotency_key) AS f ON f.idempotency_key = j.idempotency_key
JOIN @jobs AS w ON w.ord = f.first_ord
WHERE j.outcome_id IS NULL AND j.ord > f.first_ord;

INSERT INTO [{schema}].[jobs_hot]
    (id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id, created_by,
     created_at, scheduled_at, expires_at, attempt, max_attempts, status, cancel_requested,
     continuation)
SELECT id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id, created_by,
       @now, scheduled_at, expires_at, 0, max_attempts, 0, 0, continuation
FROM @jobs WHERE outcome_id IS NULL
ORDER BY ord;

UPDATE @jobs SET outcome_id = id, created = 1 WHERE outcome_id IS NULL;

INSERT INTO @need_queues (name) SELECT DISTINCT queue FROM @jobs;
",
    ensure_queues!(),
    "
SELECT ord, CONVERT(CHAR(32), outcome_id, 2) AS id, created FROM @jobs ORDER BY ord;"
);

// ---------------------------------------------------------------------------------- workers

/// @P1 limit, @P2 worker id, @P3 JSON array of queue names or NULL for all.
///
/// Queues with a `max_workers` limit are locked first (UPDLOCK on their settings row, held
/// to the end of the transaction; no HOLDLOCK, which would range-lock every queue scanned), so claimers of one limited queue take turns and each sees the fetched + processing
/// count the previous one committed — that is what makes the limit hold cluster-wide.
/// Unlimited queues are never locked. The claim itself is one statement: per queue, the
/// first `slots` due pending rows in claim order (a TOP per queue is the ROW_NUMBER() ≤ slots
/// rank, but answered by a seek on the filtered claim index), then the best `@limit` of those;
/// UPDLOCK, READPAST, ROWLOCK so concurrent claimers skip each other's rows instead of
/// waiting, and OUTPUT captures exactly the rows this statement claimed. (OUTPUT goes INTO a
/// table variable and is read back inside the transaction: a bare OUTPUT to the client fails
/// with error 334 as soon as anyone adds a trigger to the table.)
pub const CLAIM: &str = tx!(
    "DECLARE @limit INT = @P1;
DECLARE @worker NVARCHAR(255) = @P2;
DECLARE @queues NVARCHAR(MAX) = @P3;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @lanes TABLE (queue NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY,
                      max_workers INT NULL, slots BIGINT NOT NULL);
DECLARE @claimed TABLE (seq BIGINT NOT NULL PRIMARY KEY);

INSERT INTO @lanes (queue, max_workers, slots)
SELECT q.name, q.max_workers, q.max_workers
FROM [{schema}].[queues] AS q WITH (UPDLOCK, ROWLOCK)
WHERE q.paused = 0 AND q.max_workers IS NOT NULL
  AND (@queues IS NULL OR q.name IN (SELECT [value] COLLATE Latin1_General_100_BIN2 FROM OPENJSON(@queues)));

UPDATE l
SET l.slots = l.max_workers - (
    SELECT COUNT_BIG(*) FROM [{schema}].[jobs_hot] AS h
    WHERE h.queue = l.queue AND h.status IN (1, 2))
FROM @lanes AS l;

INSERT INTO @lanes (queue, max_workers, slots)
SELECT q.name, NULL, @limit
FROM [{schema}].[queues] AS q
WHERE q.paused = 0 AND q.max_workers IS NULL
  AND (@queues IS NULL OR q.name IN (SELECT [value] COLLATE Latin1_General_100_BIN2 FROM OPENJSON(@queues)));

WITH candidates AS (
    SELECT TOP (@limit) c.seq
    FROM @lanes AS l
    CROSS APPLY (
        SELECT TOP (CASE WHEN l.slots <= 0 THEN 0 WHEN l.slots < @limit THEN l.slots ELSE @limit END)
               h.seq, h.priority, h.scheduled_at, h.id
        FROM [{schema}].[jobs_hot] AS h WITH (UPDLOCK, READPAST, ROWLOCK)
        WHERE h.status = 0
          AND h.queue = l.queue
          AND h.scheduled_at <= @now
          AND (h.expires_at IS NULL OR h.expires_at > @now)
        ORDER BY h.priority DESC, h.scheduled_at, h.id
    ) AS c
    WHERE l.slots > 0
    ORDER BY c.priority DESC, c.scheduled_at, c.id
)
UPDATE h
SET h.status = 1, h.worker_id = @worker, h.fetched_at = @now
OUTPUT inserted.seq INTO @claimed (seq)
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK)
JOIN candidates AS c ON c.seq = h.seq
WHERE h.status = 0;

SELECT ",
    hot_read_columns!(),
    "
FROM [{schema}].[jobs_hot] AS h
JOIN @claimed AS c ON c.seq = h.seq;"
);

/// @P1 worker id, @P2 JSON array of ids (hex). The ownership check before user code runs.
pub const MARK_PROCESSING: &str = tx!("DECLARE @worker NVARCHAR(255) = @P1;
DECLARE @ids NVARCHAR(MAX) = @P2;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @started TABLE (id BINARY(16) NOT NULL PRIMARY KEY);
UPDATE h
SET h.status = 2, h.attempt = h.attempt + 1, h.started_at = @now, h.heartbeat_at = @now
OUTPUT inserted.id INTO @started (id)
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK)
JOIN (SELECT DISTINCT CONVERT(BINARY(16), [value], 2) AS id FROM OPENJSON(@ids)) AS i
  ON i.id = h.id
WHERE h.status = 1 AND h.worker_id = @worker
  AND (h.expires_at IS NULL OR h.expires_at > @now);");

/// @P1 worker id, @P2 JSON ids. Returns the still-owned ids and their cancel flag.
pub const HEARTBEAT: &str = tx!("DECLARE @worker NVARCHAR(255) = @P1;
DECLARE @ids NVARCHAR(MAX) = @P2;
DECLARE @alive TABLE (id BINARY(16) NOT NULL PRIMARY KEY, cancel_requested BIT NOT NULL);
UPDATE h
SET h.heartbeat_at = SYSUTCDATETIME()
OUTPUT inserted.id, inserted.cancel_requested INTO @alive (id, cancel_requested)
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK)
JOIN (SELECT DISTINCT CONVERT(BINARY(16), [value], 2) AS id FROM OPENJSON(@ids)) AS i
  ON i.id = h.id
WHERE h.status = 2 AND h.worker_id = @worker;");

/// @P1 worker id, @P2 JSON ids, @P3 run_at or NULL (keep the due time). No attempt spent.
pub const RELEASE: &str = tx!("DECLARE @worker NVARCHAR(255) = @P1;
DECLARE @ids NVARCHAR(MAX) = @P2;
DECLARE @run_at DATETIME2(6) = @P3;
UPDATE h
SET h.status = 0, h.worker_id = NULL, h.fetched_at = NULL,
    h.scheduled_at = ISNULL(@run_at, h.scheduled_at)
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK)
JOIN (SELECT DISTINCT CONVERT(BINARY(16), [value], 2) AS id FROM OPENJSON(@ids)) AS i
  ON i.id = h.id
WHERE h.status = 1 AND h.worker_id = @worker;
SELECT CAST(@@ROWCOUNT AS BIGINT) AS released;");

/// @P1 worker id, @P2 JSON array of completions (see `store::CompletionRow`).
/// Returns the ids that were applied. Every move checks `status = 2 AND worker_id = @worker`:
/// a job rescued, cancelled or completed by someone else meanwhile is left alone.
pub const COMPLETE: &str = tx!(
    "DECLARE @worker NVARCHAR(255) = @P1;
DECLARE @completions NVARCHAR(MAX) = @P2;
",
    ledger_decl!(),
    moved_decl!(),
    "DECLARE @c TABLE (
    id          BINARY(16)    NOT NULL PRIMARY KEY,
    kind        CHAR(1)       COLLATE DATABASE_DEFAULT NOT NULL,
    result      NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
    duration_ms BIGINT        NULL,
    reason      TINYINT       NULL,
    error       NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
    message     NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
    retry_at    DATETIME2(6)  NULL
);
DECLARE @applied TABLE (id BINARY(16) NOT NULL PRIMARY KEY);

INSERT INTO @c (id, kind, result, duration_ms, reason, error, message, retry_at)
SELECT CONVERT(BINARY(16), j.id, 2), j.kind, j.result, j.duration_ms, j.reason, j.error,
       j.message, j.retry_at
FROM OPENJSON(@completions) WITH (
    id          CHAR(32)      '$.id',
    kind        CHAR(1)       '$.kind',
    result      NVARCHAR(MAX) '$.result',
    duration_ms BIGINT        '$.duration_ms',
    reason      TINYINT       '$.reason',
    error       NVARCHAR(MAX) '$.error',
    message     NVARCHAR(MAX) '$.message',
    retry_at    DATETIME2(6)  '$.retry_at'
) AS j;

-- Retries stay in the hot table: back to pending, due at retry_at, the error kept.
UPDATE h
SET h.status = 0, h.worker_id = NULL, h.fetched_at = NULL, h.heartbeat_at = NULL,
    h.scheduled_at = c.retry_at,
    h.errors = JSON_MODIFY(ISNULL(h.errors, N'[]'), 'append $', JSON_QUERY(c.error)),
    h.last_error = LEFT(c.message, 400)
OUTPUT inserted.id INTO @applied (id)
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK)
JOIN @c AS c ON c.id = h.id AND c.kind = 'r'
WHERE h.status = 2 AND h.worker_id = @worker;

INSERT INTO @ledger (queue, retried)
SELECT h.queue, 1 FROM [{schema}].[jobs_hot] AS h JOIN @applied AS a ON a.id = h.id;

-- Successes and dead letters leave the hot table: delete first, then write the target.
DELETE h
OUTPUT ",
    deleted_common_columns!(),
    " INTO @moved (",
    common_columns!(),
    ")
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK)
JOIN @c AS c ON c.id = h.id AND c.kind IN ('s', 'd')
WHERE h.status = 2 AND h.worker_id = @worker;

INSERT INTO [{schema}].[jobs_archive]
    (id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id, created_by,
     created_at, scheduled_at, started_at, heartbeat_at, finished_at, expires_at, attempt,
     max_attempts, worker_id, errors, last_error, continuation, original_payload, result,
     duration_ms)
SELECT m.id, m.queue, m.job_type, m.payload, m.tags, m.priority, m.idempotency_key,
       m.correlation_id, m.created_by, m.created_at, m.scheduled_at, m.started_at,
       m.heartbeat_at, @now, m.expires_at, m.attempt, m.max_attempts, m.worker_id, m.errors,
       m.last_error, m.continuation, m.original_payload, c.result, c.duration_ms
FROM @moved AS m JOIN @c AS c ON c.id = m.id AND c.kind = 's';

INSERT INTO [{schema}].[jobs_dlq]
    (id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id, created_by,
     created_at, scheduled_at, started_at, heartbeat_at, finished_at, expires_at, attempt,
     max_attempts, worker_id, errors, last_error, continuation, original_payload, reason,
     duration_ms)
SELECT m.id, m.queue, m.job_type, m.payload, m.tags, m.priority, m.idempotency_key,
       m.correlation_id, m.created_by, m.created_at, m.scheduled_at, m.started_at,
       m.heartbeat_at, @now, m.expires_at, m.attempt, m.max_attempts, m.worker_id,
       JSON_MODIFY(ISNULL(m.errors, N'[]'), 'append $', JSON_QUERY(c.error)),
       LEFT(c.message, 400), m.continuation, m.original_payload, c.reason, c.duration_ms
FROM @moved AS m JOIN @c AS c ON c.id = m.id AND c.kind = 'd';

INSERT INTO @applied (id) SELECT id FROM @moved;

INSERT INTO @ledger (queue, archive_delta, dlq_delta, succeeded, failed, duration_ms, reason,
                     message_prefix)
SELECT m.queue,
       CASE WHEN c.kind = 's' THEN 1 ELSE 0 END,
       CASE WHEN c.kind = 'd' THEN 1 ELSE 0 END,
       CASE WHEN c.kind = 's' THEN 1 ELSE 0 END,
       CASE WHEN c.kind = 'd' THEN 1 ELSE 0 END,
       c.duration_ms,
       CASE WHEN c.kind = 'd' THEN c.reason END,
       CASE WHEN c.kind = 'd' THEN ISNULL(LEFT(c.message, 80), N'') END
FROM @moved AS m JOIN @c AS c ON c.id = m.id;

INSERT INTO @finished (id, succeeded, reason, error, result, correlation_id, continuation)
SELECT m.id, CASE WHEN c.kind = 's' THEN 1 ELSE 0 END, CASE WHEN c.kind = 'd' THEN c.reason END,
       CASE WHEN c.kind = 'd' THEN c.message END, CASE WHEN c.kind = 's' THEN c.result END,
       m.correlation_id, m.continuation
FROM @moved AS m JOIN @c AS c ON c.id = m.id
WHERE m.continuation IS NOT NULL;
",
    continuations_apply!(),
    ensure_queues!(),
    ledger_apply!(),
    "
SELECT CONVERT(CHAR(32), id, 2) AS id FROM @applied;"
);

// ---------------------------------------------------------------------------------- operators

/// @P1 JSON ids. Pending or fetched → DLQ `Cancelled` now; processing → `cancel_requested`.
/// Returns (cancelled, requested).
pub const CANCEL: &str = tx!(
    "DECLARE @ids NVARCHAR(MAX) = @P1;
DECLARE @dead_reason TINYINT = 4;
DECLARE @dead_kind NVARCHAR(20) = N'cancelled';
DECLARE @dead_message NVARCHAR(400) = N'cancelled by an operator';
",
    ledger_decl!(),
    moved_decl!(),
    "
DELETE h
OUTPUT ",
    deleted_common_columns!(),
    " INTO @moved (",
    common_columns!(),
    ")
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK)
JOIN (SELECT DISTINCT CONVERT(BINARY(16), [value], 2) AS id FROM OPENJSON(@ids)) AS i
  ON i.id = h.id
WHERE h.status IN (0, 1);
",
    moved_to_dlq_with_generated_error!(),
    "
UPDATE h SET h.cancel_requested = 1
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK)
JOIN (SELECT DISTINCT CONVERT(BINARY(16), [value], 2) AS id FROM OPENJSON(@ids)) AS i
  ON i.id = h.id
WHERE h.status = 2;
DECLARE @requested BIGINT = @@ROWCOUNT;
",
    continuations_apply!(),
    ensure_queues!(),
    ledger_apply!(),
    "
SELECT CAST((SELECT COUNT_BIG(*) FROM @moved) AS BIGINT) AS cancelled, @requested AS requested;"
);

/// @P1 JSON ids, @P2 new payload or NULL, @P3 new tags (stored form) or NULL, @P4 new
/// priority or NULL, @P5 new queue or NULL. DLQ → pending, due now, attempts and worker
/// cleared, error history kept. A key an active job holds now is dropped from the
/// resurrected job (and only the oldest of several resurrected jobs sharing a key keeps it).
/// Returns how many moved.
pub const RESURRECT: &str = tx!(
    "DECLARE @ids NVARCHAR(MAX) = @P1;
DECLARE @payload NVARCHAR(MAX) = @P2;
DECLARE @tags NVARCHAR(1002) = @P3;
DECLARE @priority INT = @P4;
DECLARE @queue NVARCHAR(255) = @P5;
",
    ledger_decl!(),
    moved_decl!(),
    "
DELETE d
OUTPUT ",
    deleted_common_columns!(),
    ", deleted.reason, deleted.seq INTO @moved (",
    common_columns!(),
    ", reason, seq)
FROM [{schema}].[jobs_dlq] AS d WITH (ROWLOCK)
JOIN (SELECT DISTINCT CONVERT(BINARY(16), [value], 2) AS id FROM OPENJSON(@ids)) AS i
  ON i.id = d.id;

INSERT INTO [{schema}].[jobs_hot]
    (id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id, created_by,
     created_at, scheduled_at, expires_at, attempt, max_attempts, status, cancel_requested,
     errors, last_error, continuation, original_payload)
SELECT m.id, ISNULL(@queue, m.queue), m.job_type, ISNULL(@payload, m.payload),
       ISNULL(@tags, m.tags), ISNULL(@priority, m.priority),
       CASE WHEN m.idempotency_key IS NULL THEN NULL
            WHEN k.key_rank > 1 THEN NULL
            WHEN EXISTS (SELECT 1 FROM [{schema}].[jobs_hot] AS h WITH (UPDLOCK, HOLDLOCK)
                         WHERE h.idempotency_key = m.idempotency_key
                           AND h.idempotency_key IS NOT NULL) THEN NULL
            ELSE m.idempotency_key END,
       m.correlation_id, m.created_by, m.created_at, @now, m.expires_at, 0, m.max_attempts, 0, 0,
       m.errors, m.last_error, m.continuation,
       CASE WHEN @payload IS NOT NULL THEN ISNULL(m.original_payload, m.payload)
            ELSE m.original_payload END
FROM @moved AS m
JOIN (SELECT id, ROW_NUMBER() OVER (PARTITION BY idempotency_key ORDER BY seq) AS key_rank
      FROM @moved) AS k ON k.id = m.id;

INSERT INTO @ledger (queue, dlq_delta, reason, message_prefix)
SELECT m.queue, -1, m.reason, ISNULL(LEFT(m.last_error, 80), N'') FROM @moved AS m;

INSERT INTO @need_queues (name) SELECT DISTINCT ISNULL(@queue, m.queue) FROM @moved AS m;
",
    ensure_queues!(),
    ledger_apply!(),
    "
SELECT CAST((SELECT COUNT_BIG(*) FROM @moved) AS BIGINT) AS resurrected;"
);

/// @P1 id, @P2 payload or NULL, @P3 tags (stored form) or NULL, @P4 priority or NULL,
/// @P5 queue or NULL. Edits a pending hot job or a DLQ job in place, keeping the first
/// payload. Returns which pillar changed ('hot', 'dlq') or, when none did, where the job is
/// and its status so the caller can say why.
pub const EDIT_JOB: &str = tx!(
    "DECLARE @id BINARY(16) = CONVERT(BINARY(16), @P1, 2);
DECLARE @payload NVARCHAR(MAX) = @P2;
DECLARE @tags NVARCHAR(1002) = @P3;
DECLARE @priority INT = @P4;
DECLARE @queue NVARCHAR(255) = @P5;
",
    ledger_decl!(),
    "DECLARE @old_queue NVARCHAR(255), @reason TINYINT, @prefix NVARCHAR(80);
DECLARE @where NVARCHAR(10) = NULL;

UPDATE h
SET h.payload = ISNULL(@payload, h.payload),
    h.original_payload = CASE WHEN @payload IS NOT NULL THEN ISNULL(h.original_payload, h.payload)
                              ELSE h.original_payload END,
    h.tags = ISNULL(@tags, h.tags),
    h.priority = ISNULL(@priority, h.priority),
    h.queue = ISNULL(@queue, h.queue)
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK)
WHERE h.id = @id AND h.status = 0;
IF @@ROWCOUNT > 0
BEGIN
    SET @where = N'hot';
    INSERT INTO @need_queues (name) SELECT @queue WHERE @queue IS NOT NULL;
END
ELSE
BEGIN
    SELECT @old_queue = d.queue, @reason = d.reason, @prefix = ISNULL(LEFT(d.last_error, 80), N'')
    FROM [{schema}].[jobs_dlq] AS d WITH (UPDLOCK, ROWLOCK)
    WHERE d.id = @id;

    UPDATE d
    SET d.payload = ISNULL(@payload, d.payload),
        d.original_payload = CASE WHEN @payload IS NOT NULL THEN ISNULL(d.original_payload, d.payload)
                                  ELSE d.original_payload END,
        d.tags = ISNULL(@tags, d.tags),
        d.priority = ISNULL(@priority, d.priority),
        d.queue = ISNULL(@queue, d.queue)
    FROM [{schema}].[jobs_dlq] AS d WITH (ROWLOCK)
    WHERE d.id = @id;
    IF @@ROWCOUNT > 0
    BEGIN
        SET @where = N'dlq';
        -- Moving a dead job to another queue moves it between that queue's counters.
        IF @queue IS NOT NULL AND @queue <> @old_queue
        BEGIN
            INSERT INTO @ledger (queue, dlq_delta, reason, message_prefix)
            VALUES (@old_queue, -1, @reason, @prefix), (@queue, 1, @reason, @prefix);
            INSERT INTO @need_queues (name) VALUES (@queue);
        END
    END
END
",
    ensure_queues!(),
    ledger_apply!(),
    "
SELECT @where AS changed,
       (SELECT h.status FROM [{schema}].[jobs_hot] AS h WHERE h.id = @id) AS hot_status,
       CAST(CASE WHEN EXISTS (SELECT 1 FROM [{schema}].[jobs_archive] AS a WHERE a.id = @id)
                 THEN 1 ELSE 0 END AS BIT) AS archived;"
);

/// @P1 JSON ids. Pending hot jobs only. Returns how many went.
pub const PURGE_HOT: &str = tx!("DECLARE @ids NVARCHAR(MAX) = @P1;
DELETE h
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK)
JOIN (SELECT DISTINCT CONVERT(BINARY(16), [value], 2) AS id FROM OPENJSON(@ids)) AS i
  ON i.id = h.id
WHERE h.status = 0;
SELECT CAST(@@ROWCOUNT AS BIGINT) AS purged;");

/// @P1 JSON ids.
pub const PURGE_ARCHIVE: &str = tx!(
    "DECLARE @ids NVARCHAR(MAX) = @P1;
",
    ledger_decl!(),
    "
DELETE a
OUTPUT deleted.queue, -1 INTO @ledger (queue, archive_delta)
FROM [{schema}].[jobs_archive] AS a WITH (ROWLOCK)
JOIN (SELECT DISTINCT CONVERT(BINARY(16), [value], 2) AS id FROM OPENJSON(@ids)) AS i
  ON i.id = a.id;
",
    ledger_apply!(),
    "
SELECT CAST((SELECT COUNT_BIG(*) FROM @ledger) AS BIGINT) AS purged;"
);

/// @P1 JSON ids.
pub const PURGE_DLQ: &str = tx!(
    "DECLARE @ids NVARCHAR(MAX) = @P1;
",
    ledger_decl!(),
    "
DELETE d
OUTPUT deleted.queue, -1, deleted.reason, ISNULL(LEFT(deleted.last_error, 80), N'')
  INTO @ledger (queue, dlq_delta, reason, message_prefix)
FROM [{schema}].[jobs_dlq] AS d WITH (ROWLOCK)
JOIN (SELECT DISTINCT CONVERT(BINARY(16), [value], 2) AS id FROM OPENJSON(@ids)) AS i
  ON i.id = d.id;
",
    ledger_apply!(),
    "
SELECT CAST((SELECT COUNT_BIG(*) FROM @ledger) AS BIGINT) AS purged;"
);

// ---------------------------------------------------------------------------------- queues

pub const LIST_QUEUES: &str = "SELECT name, paused, hidden, max_workers, zombie_timeout_secs,
       execution_timeout_secs, lag_warn_secs, lag_crit_secs, updated_at
FROM [{schema}].[queues]
ORDER BY name;";

/// @P1 name; then for each field a "set" flag and a value: @P2/@P3 paused, @P4/@P5 hidden,
/// @P6/@P7 max_workers, @P8/@P9 zombie timeout, @P10/@P11 execution timeout,
/// @P12/@P13 lag warn, @P14/@P15 lag crit. Update-then-insert; returns the row.
pub const UPDATE_QUEUE: &str = tx!("DECLARE @name NVARCHAR(255) = @P1;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
UPDATE q
SET q.paused = CASE WHEN @P2 = 1 THEN @P3 ELSE q.paused END,
    q.hidden = CASE WHEN @P4 = 1 THEN @P5 ELSE q.hidden END,
    q.max_workers = CASE WHEN @P6 = 1 THEN @P7 ELSE q.max_workers END,
    q.zombie_timeout_secs = CASE WHEN @P8 = 1 THEN @P9 ELSE q.zombie_timeout_secs END,
    q.execution_timeout_secs = CASE WHEN @P10 = 1 THEN @P11 ELSE q.execution_timeout_secs END,
    q.lag_warn_secs = CASE WHEN @P12 = 1 THEN @P13 ELSE q.lag_warn_secs END,
    q.lag_crit_secs = CASE WHEN @P14 = 1 THEN @P15 ELSE q.lag_crit_secs END,
    q.updated_at = @now
FROM [{schema}].[queues] AS q WITH (UPDLOCK, HOLDLOCK)
WHERE q.name = @name;
IF @@ROWCOUNT = 0
    INSERT INTO [{schema}].[queues]
        (name, paused, hidden, max_workers, zombie_timeout_secs, execution_timeout_secs,
         lag_warn_secs, lag_crit_secs, created_at, updated_at)
    SELECT @name,
           CASE WHEN @P2 = 1 THEN @P3 ELSE 0 END,
           CASE WHEN @P4 = 1 THEN @P5 ELSE 0 END,
           CASE WHEN @P6 = 1 THEN @P7 END,
           CASE WHEN @P8 = 1 THEN @P9 END,
           CASE WHEN @P10 = 1 THEN @P11 END,
           CASE WHEN @P12 = 1 THEN @P13 END,
           CASE WHEN @P14 = 1 THEN @P15 END,
           @now, @now
    WHERE NOT EXISTS (SELECT 1 FROM [{schema}].[queues] AS q WITH (UPDLOCK, HOLDLOCK)
                      WHERE q.name = @name);
SELECT name, paused, hidden, max_workers, zombie_timeout_secs, execution_timeout_secs,
       lag_warn_secs, lag_crit_secs, updated_at
FROM [{schema}].[queues] WHERE name = @name;");

pub const LOAD_SETTINGS: &str = "SELECT value FROM [{schema}].[settings] WHERE name = N'engine';";

/// @P1 JSON document.
pub const SAVE_SETTINGS: &str = tx!("DECLARE @value NVARCHAR(MAX) = @P1;
UPDATE s SET s.value = @value, s.updated_at = SYSUTCDATETIME()
FROM [{schema}].[settings] AS s WITH (UPDLOCK, HOLDLOCK)
WHERE s.name = N'engine';
IF @@ROWCOUNT = 0
    INSERT INTO [{schema}].[settings] (name, value, updated_at)
    SELECT N'engine', @value, SYSUTCDATETIME()
    WHERE NOT EXISTS (SELECT 1 FROM [{schema}].[settings] AS s WITH (UPDLOCK, HOLDLOCK)
                      WHERE s.name = N'engine');");

// ---------------------------------------------------------------------------------- maintenance

/// Jobs held by a worker of an instance that stopped or stopped heartbeating. Workers are
/// named after their instance: the instance id itself, or `<instance id>:<anything>`.
macro_rules! held_by_dead_instance {
    ($alias:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM [{schema}].[instances] AS i
         WHERE (i.stopped_at IS NOT NULL OR i.heartbeat_at < @dead_cutoff)
           AND (",
            $alias,
            ".worker_id = i.id
                OR LEFT(",
            $alias,
            ".worker_id, LEN(i.id) + 1) = i.id + N':'))"
        )
    };
}

/// @P1 fetched timeout (s), @P2 dead-instance timeout (s), @P3 batch size. Stale fetched
/// rows, and fetched rows of dead instances, back to pending (no user code ran).
pub const RESCUE_FETCHED: &str = tx!(
    "DECLARE @fetched_cutoff DATETIME2(6) = DATEADD(SECOND, -@P1, SYSUTCDATETIME());
DECLARE @dead_cutoff DATETIME2(6) = DATEADD(SECOND, -@P2, SYSUTCDATETIME());
DECLARE @batch INT = @P3;
UPDATE TOP (@batch) h
SET h.status = 0, h.worker_id = NULL, h.fetched_at = NULL
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK, READPAST)
WHERE h.status = 1
  AND (h.fetched_at < @fetched_cutoff OR ",
    held_by_dead_instance!("h"),
    ");
SELECT CAST(@@ROWCOUNT AS BIGINT) AS released;"
);

/// @P1 default zombie timeout (s), @P2 dead-instance timeout (s), @P3 batch size.
/// Processing rows whose heartbeat expired (per-queue zombie timeout, else the default) or
/// whose instance is gone → DLQ `Zombie`; never retried automatically, because their side
/// effects may have happened. READPAST: a row a worker is finishing right now is skipped,
/// not waited for.
pub const RESCUE_ZOMBIES: &str = tx!(
    "DECLARE @default_zombie INT = @P1;
DECLARE @dead_cutoff DATETIME2(6) = DATEADD(SECOND, -@P2, SYSUTCDATETIME());
DECLARE @batch INT = @P3;
DECLARE @dead_reason TINYINT = 5;
DECLARE @dead_kind NVARCHAR(20) = N'zombie';
DECLARE @dead_message NVARCHAR(400) = N'heartbeat stopped while processing (worker presumed dead)';
",
    ledger_decl!(),
    moved_decl!(),
    "
DELETE TOP (@batch) h
OUTPUT ",
    deleted_common_columns!(),
    " INTO @moved (",
    common_columns!(),
    ")
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK, READPAST)
LEFT JOIN [{schema}].[queues] AS q ON q.name = h.queue
WHERE h.status = 2
  AND (h.heartbeat_at < DATEADD(SECOND, -ISNULL(q.zombie_timeout_secs, @default_zombie), @now)
       OR ",
    held_by_dead_instance!("h"),
    ");
",
    moved_to_dlq_with_generated_error!(),
    continuations_apply!(),
    ensure_queues!(),
    ledger_apply!(),
    "
SELECT CAST((SELECT COUNT_BIG(*) FROM @moved) AS BIGINT) AS zombies;"
);

/// @P1 batch size. Pending jobs whose `expires_at` passed before they started → DLQ `Expired`.
pub const RESCUE_EXPIRED: &str = tx!(
    "DECLARE @batch INT = @P1;
DECLARE @dead_reason TINYINT = 8;
DECLARE @dead_kind NVARCHAR(20) = N'expired';
DECLARE @dead_message NVARCHAR(400) = N'expired before it started';
",
    ledger_decl!(),
    moved_decl!(),
    "
DELETE TOP (@batch) h
OUTPUT ",
    deleted_common_columns!(),
    " INTO @moved (",
    common_columns!(),
    ")
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK, READPAST)
WHERE h.status = 0 AND h.expires_at IS NOT NULL AND h.expires_at <= @now;
",
    moved_to_dlq_with_generated_error!(),
    continuations_apply!(),
    ensure_queues!(),
    ledger_apply!(),
    "
SELECT CAST((SELECT COUNT_BIG(*) FROM @moved) AS BIGINT) AS expired;"
);

/// Instance rows whose process is gone for over an hour.
pub const RESCUE_INSTANCES: &str = tx!("DELETE FROM [{schema}].[instances]
WHERE heartbeat_at < DATEADD(HOUR, -1, SYSUTCDATETIME())
   OR stopped_at < DATEADD(HOUR, -1, SYSUTCDATETIME());
SELECT CAST(@@ROWCOUNT AS BIGINT) AS deleted;");

/// @P1 age (s), @P2 batch size. Oldest first, counters following.
pub const PRUNE_ARCHIVE: &str = tx!(
    "DECLARE @cutoff DATETIME2(6) = DATEADD(SECOND, -@P1, SYSUTCDATETIME());
DECLARE @batch INT = @P2;
",
    ledger_decl!(),
    "
DELETE TOP (@batch) a
OUTPUT deleted.queue, -1 INTO @ledger (queue, archive_delta)
FROM [{schema}].[jobs_archive] AS a
WHERE a.finished_at < @cutoff;
",
    ledger_apply!(),
    "
SELECT CAST((SELECT COUNT_BIG(*) FROM @ledger) AS BIGINT) AS deleted;"
);

pub const PRUNE_DLQ: &str = tx!(
    "DECLARE @cutoff DATETIME2(6) = DATEADD(SECOND, -@P1, SYSUTCDATETIME());
DECLARE @batch INT = @P2;
",
    ledger_decl!(),
    "
DELETE TOP (@batch) d
OUTPUT deleted.queue, -1, deleted.reason, ISNULL(LEFT(deleted.last_error, 80), N'')
  INTO @ledger (queue, dlq_delta, reason, message_prefix)
FROM [{schema}].[jobs_dlq] AS d
WHERE d.finished_at < @cutoff;
",
    ledger_apply!(),
    "
SELECT CAST((SELECT COUNT_BIG(*) FROM @ledger) AS BIGINT) AS deleted;"
);

pub const PRUNE_METRICS: &str = tx!("DELETE TOP (@P2) FROM [{schema}].[metric_buckets]
WHERE bucket_start < DATEADD(SECOND, -@P1, SYSUTCDATETIME());
SELECT CAST(@@ROWCOUNT AS BIGINT) AS deleted;");

pub const PRUNE_AUDIT: &str = tx!("DELETE TOP (@P2) FROM [{schema}].[audit_log]
WHERE [at] < DATEADD(SECOND, -@P1, SYSUTCDATETIME());
SELECT CAST(@@ROWCOUNT AS BIGINT) AS deleted;");

// ---------------------------------------------------------------------------------- instances

/// @P1 id, @P2 host, @P3 pid, @P4 version, @P5 started_at, @P6 workers total, @P7 busy.
pub const HEARTBEAT_INSTANCE: &str = tx!("DECLARE @id NVARCHAR(255) = @P1;
UPDATE i
SET i.host = @P2, i.pid = @P3, i.version = @P4, i.heartbeat_at = SYSUTCDATETIME(),
    i.workers_total = @P6, i.workers_busy = @P7, i.stopped_at = NULL
FROM [{schema}].[instances] AS i WITH (UPDLOCK, HOLDLOCK)
WHERE i.id = @id;
IF @@ROWCOUNT = 0
    INSERT INTO [{schema}].[instances]
        (id, host, pid, version, started_at, heartbeat_at, workers_total, workers_busy)
    SELECT @id, @P2, @P3, @P4, @P5, SYSUTCDATETIME(), @P6, @P7
    WHERE NOT EXISTS (SELECT 1 FROM [{schema}].[instances] AS i WITH (UPDLOCK, HOLDLOCK)
                      WHERE i.id = @id);");

pub const DEREGISTER_INSTANCE: &str =
    tx!("UPDATE [{schema}].[instances] SET stopped_at = SYSUTCDATETIME() WHERE id = @P1;");

/// @P1 max age in milliseconds.
pub const LIST_INSTANCES: &str = "SELECT id, host, pid, version, started_at, heartbeat_at,
       workers_total, workers_busy
FROM [{schema}].[instances]
WHERE stopped_at IS NULL
  AND heartbeat_at >= DATEADD(MILLISECOND, -(@P1 % 1000),
                              DATEADD(SECOND, -(@P1 / 1000), SYSUTCDATETIME()))
ORDER BY heartbeat_at DESC;";

// ---------------------------------------------------------------------------------- audit

pub const APPEND_AUDIT: &str = tx!("DECLARE @new TABLE (id BIGINT NOT NULL PRIMARY KEY);
INSERT INTO [{schema}].[audit_log] ([at], actor, [action], target, [count], detail)
OUTPUT inserted.id INTO @new (id)
VALUES (SYSUTCDATETIME(), @P1, @P2, @P3, @P4, @P5);
SELECT a.id, a.[at], a.actor, a.[action], a.target, a.[count], a.detail
FROM [{schema}].[audit_log] AS a JOIN @new AS n ON n.id = a.id;");

/// @P1 limit, @P2 before id or NULL.
pub const LIST_AUDIT: &str = "SELECT TOP (@P1) id, [at], actor, [action], target, [count], detail
FROM [{schema}].[audit_log]
WHERE @P2 IS NULL OR id < @P2
ORDER BY id DESC;";

// ---------------------------------------------------------------------------------- committed reads

/// @P1 id (hex). Three result sets: hot, archive, DLQ.
pub const GET_JOB: &str = concat!(
    "DECLARE @id BINARY(16) = CONVERT(BINARY(16), @P1, 2);\nSELECT ",
    hot_read_columns!(),
    " FROM [{schema}].[jobs_hot] WHERE id = @id;\nSELECT ",
    archive_read_columns!(),
    " FROM [{schema}].[jobs_archive] WHERE id = @id;\nSELECT ",
    dlq_read_columns!(),
    " FROM [{schema}].[jobs_dlq] WHERE id = @id;"
);

/// @P1 JSON ids. Two result sets: archive, DLQ.
pub const FINISHED_JOBS: &str = concat!(
    "DECLARE @ids TABLE (id BINARY(16) NOT NULL PRIMARY KEY);
INSERT INTO @ids (id) SELECT DISTINCT CONVERT(BINARY(16), [value], 2) FROM OPENJSON(@P1);
SELECT ",
    archive_read_columns!(),
    " FROM [{schema}].[jobs_archive] WHERE id IN (SELECT id FROM @ids);\nSELECT ",
    dlq_read_columns!(),
    " FROM [{schema}].[jobs_dlq] WHERE id IN (SELECT id FROM @ids);"
);

/// Columns of a job list row (no payload, no error history: a page stays small).
/// `job_lists` assembles list, preview and bulk-selection statements around them.
pub const LIST_HOT_COLUMNS: &str = "id, queue, job_type, status, priority, tags, attempt, \
    created_at, scheduled_at, started_at, worker_id, last_error";
pub const LIST_ARCHIVE_COLUMNS: &str = "id, queue, job_type, priority, tags, attempt, \
    created_at, scheduled_at, started_at, finished_at, worker_id, last_error";
pub const LIST_DLQ_COLUMNS: &str = "id, queue, job_type, reason, priority, tags, attempt, \
    created_at, scheduled_at, started_at, finished_at, worker_id, last_error";

// ---------------------------------------------------------------------------------- telemetry

/// Overview cards. Dirty reads on purpose: approximate numbers that never block workers.
pub const SUMMARY: &str = "SET NOCOUNT ON;
SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @minute DATETIME2(0) =
    DATEADD(MINUTE, DATEDIFF(MINUTE, CAST('2000-01-01' AS DATETIME2(0)), @now),
            CAST('2000-01-01' AS DATETIME2(0)));
SELECT
    (SELECT COUNT_BIG(*) FROM [{schema}].[jobs_hot] WITH (NOLOCK)
     WHERE status = 0 AND scheduled_at <= @now) AS pending,
    (SELECT COUNT_BIG(*) FROM [{schema}].[jobs_hot] WITH (NOLOCK)
     WHERE status = 0 AND scheduled_at > @now) AS scheduled,
    (SELECT COUNT_BIG(*) FROM [{schema}].[jobs_hot] WITH (NOLOCK) WHERE status = 1) AS fetched,
    (SELECT COUNT_BIG(*) FROM [{schema}].[jobs_hot] WITH (NOLOCK) WHERE status = 2) AS processing,
    (SELECT ISNULL(SUM(archive_rows), 0) FROM [{schema}].[queue_counters] WITH (NOLOCK)) AS succeeded,
    (SELECT ISNULL(SUM(dlq_rows), 0) FROM [{schema}].[queue_counters] WITH (NOLOCK)) AS dlq,
    (SELECT ISNULL(SUM(succeeded), 0) FROM [{schema}].[metric_buckets] WITH (NOLOCK)
     WHERE bucket_start >= @minute) AS succeeded_1m,
    (SELECT ISNULL(SUM(succeeded), 0) FROM [{schema}].[metric_buckets] WITH (NOLOCK)
     WHERE bucket_start >= DATEADD(MINUTE, -4, @minute)) AS succeeded_5m,
    (SELECT ISNULL(SUM(failed), 0) FROM [{schema}].[metric_buckets] WITH (NOLOCK)
     WHERE bucket_start >= @minute) AS failed_1m,
    (SELECT ISNULL(SUM(failed), 0) FROM [{schema}].[metric_buckets] WITH (NOLOCK)
     WHERE bucket_start >= DATEADD(MINUTE, -4, @minute)) AS failed_5m,
    (SELECT ISNULL(SUM(retried), 0) FROM [{schema}].[metric_buckets] WITH (NOLOCK)
     WHERE bucket_start >= DATEADD(MINUTE, -4, @minute)) AS retried_5m;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;";

/// Every queue with a settings row, jobs or counters, with live counts and lag (dirty reads).
pub const QUEUE_STATS: &str = "SET NOCOUNT ON;
SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
WITH names AS (
    SELECT name AS queue FROM [{schema}].[queues] WITH (NOLOCK)
    UNION SELECT DISTINCT queue FROM [{schema}].[jobs_hot] WITH (NOLOCK)
    UNION SELECT queue FROM [{schema}].[queue_counters] WITH (NOLOCK)
),
hot AS (
    SELECT queue,
           SUM(CASE WHEN status = 0 AND scheduled_at <= @now THEN 1 ELSE 0 END) AS pending,
           SUM(CASE WHEN status = 0 AND scheduled_at > @now THEN 1 ELSE 0 END) AS scheduled,
           SUM(CASE WHEN status = 1 THEN 1 ELSE 0 END) AS fetched,
           SUM(CASE WHEN status = 2 THEN 1 ELSE 0 END) AS processing,
           AVG(CASE WHEN status = 0 AND scheduled_at <= @now
                    THEN CAST(DATEDIFF_BIG(MILLISECOND, scheduled_at, @now) AS FLOAT) END) AS lag_avg_ms,
           MAX(CASE WHEN status = 0 AND scheduled_at <= @now
                    THEN DATEDIFF_BIG(MILLISECOND, scheduled_at, @now) END) AS lag_max_ms
    FROM [{schema}].[jobs_hot] WITH (NOLOCK)
    GROUP BY queue
)
SELECT n.queue,
       ISNULL(q.paused, 0) AS paused, ISNULL(q.hidden, 0) AS hidden, q.max_workers,
       CAST(ISNULL(h.pending, 0) AS BIGINT) AS pending,
       CAST(ISNULL(h.scheduled, 0) AS BIGINT) AS scheduled,
       CAST(ISNULL(h.fetched, 0) AS BIGINT) AS fetched,
       CAST(ISNULL(h.processing, 0) AS BIGINT) AS processing,
       ISNULL(c.archive_rows, 0) AS succeeded, ISNULL(c.dlq_rows, 0) AS failed,
       CAST(ISNULL(h.lag_avg_ms, 0) AS BIGINT) AS lag_avg_ms,
       ISNULL(h.lag_max_ms, 0) AS lag_max_ms,
       q.lag_warn_secs, q.lag_crit_secs, q.zombie_timeout_secs, q.execution_timeout_secs
FROM names AS n
LEFT JOIN [{schema}].[queues] AS q WITH (NOLOCK) ON q.name = n.queue
LEFT JOIN hot AS h ON h.queue = n.queue
LEFT JOIN [{schema}].[queue_counters] AS c WITH (NOLOCK) ON c.queue = n.queue
ORDER BY n.queue;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;";

/// @P1 minutes, @P2 queue or NULL. Buckets that exist; the store fills the gaps.
pub const THROUGHPUT: &str = "SET NOCOUNT ON;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @minute DATETIME2(0) =
    DATEADD(MINUTE, DATEDIFF(MINUTE, CAST('2000-01-01' AS DATETIME2(0)), @now),
            CAST('2000-01-01' AS DATETIME2(0)));
SELECT @minute AS current_minute;
SELECT bucket_start, SUM(succeeded) AS succeeded, SUM(failed) AS failed,
       SUM(retried) AS retried, SUM(duration_sum_ms) AS duration_sum_ms,
       MAX(duration_max_ms) AS duration_max_ms
FROM [{schema}].[metric_buckets] WITH (NOLOCK)
WHERE bucket_start > DATEADD(MINUTE, -@P1, @minute)
  AND (@P2 IS NULL OR queue = @P2)
GROUP BY bucket_start
ORDER BY bucket_start;";

/// @P1 limit. The largest DLQ error groups (dirty read of the maintained groups).
pub const TOP_ERRORS: &str = "SELECT TOP (@P1) reason, message_prefix, dlq_rows, last_seen
FROM [{schema}].[error_groups] WITH (NOLOCK)
WHERE dlq_rows > 0
ORDER BY dlq_rows DESC, last_seen DESC;";

// ---------------------------------------------------------------------------------- schema

/// Applied migration versions (missing table = nothing applied yet).
pub const SCHEMA_VERSIONS: &str = "IF OBJECT_ID(N'[{schema}].[schema_version]', N'U') IS NULL
BEGIN
    SELECT CAST(NULL AS INT) AS version WHERE 1 = 0;
END
ELSE
BEGIN
    SELECT version FROM [{schema}].[schema_version] ORDER BY version;
END";

/// @P1 schema name. Columns with type, length (characters for text, -1 for MAX), scale and
/// nullability; indexes; the archive/DLQ compression; the database compatibility level.
pub const CATALOG: &str =
    "SELECT t.name AS table_name, c.name AS column_name, ty.name AS type_name,
       CAST(CASE WHEN ty.name IN (N'nvarchar', N'nchar') AND c.max_length > 0
                 THEN c.max_length / 2 ELSE c.max_length END AS INT) AS max_length,
       CAST(c.scale AS INT) AS scale, c.is_nullable
FROM sys.tables AS t
JOIN sys.columns AS c ON c.object_id = t.object_id
JOIN sys.types AS ty ON ty.user_type_id = c.user_type_id
WHERE t.schema_id = SCHEMA_ID(@P1);
SELECT t.name AS table_name, i.name AS index_name
FROM sys.indexes AS i
JOIN sys.tables AS t ON t.object_id = i.object_id
WHERE t.schema_id = SCHEMA_ID(@P1) AND i.name IS NOT NULL;
SELECT t.name AS table_name, p.data_compression_desc AS compression
FROM sys.partitions AS p
JOIN sys.tables AS t ON t.object_id = p.object_id
WHERE t.schema_id = SCHEMA_ID(@P1) AND p.index_id = 1;
SELECT CAST(compatibility_level AS INT) AS compatibility_level
FROM sys.databases WHERE database_id = DB_ID();";

/// Every fixed statement, for the policy tests.
pub const ALL: &[Statement] = &[
    Statement {
        name: "session_setup",
        class: Class::Committed,
        sql: SESSION_SETUP,
    },
    Statement {
        name: "ping",
        class: Class::Committed,
        sql: PING,
    },
    Statement {
        name: "enqueue",
        class: Class::Transition,
        sql: ENQUEUE,
    },
    Statement {
        name: "claim",
        class: Class::Transition,
        sql: CLAIM,
    },
    Statement {
        name: "mark_processing",
        class: Class::Transition,
        sql: MARK_PROCESSING,
    },
    Statement {
        name: "heartbeat",
        class: Class::Transition,
        sql: HEARTBEAT,
    },
    Statement {
        name: "release",
        class: Class::Transition,
        sql: RELEASE,
    },
    Statement {
        name: "complete",
        class: Class::Transition,
        sql: COMPLETE,
    },
    Statement {
        name: "cancel",
        class: Class::Transition,
        sql: CANCEL,
    },
    Statement {
        name: "resurrect",
        class: Class::Transition,
        sql: RESURRECT,
    },
    Statement {
        name: "edit_job",
        class: Class::Transition,
        sql: EDIT_JOB,
    },
    Statement {
        name: "purge_hot",
        class: Class::Transition,
        sql: PURGE_HOT,
    },
    Statement {
        name: "purge_archive",
        class: Class::Transition,
        sql: PURGE_ARCHIVE,
    },
    Statement {
        name: "purge_dlq",
        class: Class::Transition,
        sql: PURGE_DLQ,
    },
    Statement {
        name: "list_queues",
        class: Class::Committed,
        sql: LIST_QUEUES,
    },
    Statement {
        name: "update_queue",
        class: Class::Transition,
        sql: UPDATE_QUEUE,
    },
    Statement {
        name: "load_settings",
        class: Class::Committed,
        sql: LOAD_SETTINGS,
    },
    Statement {
        name: "save_settings",
        class: Class::Transition,
        sql: SAVE_SETTINGS,
    },
    Statement {
        name: "rescue_fetched",
        class: Class::Transition,
        sql: RESCUE_FETCHED,
    },
    Statement {
        name: "rescue_zombies",
        class: Class::Transition,
        sql: RESCUE_ZOMBIES,
    },
    Statement {
        name: "rescue_expired",
        class: Class::Transition,
        sql: RESCUE_EXPIRED,
    },
    Statement {
        name: "rescue_instances",
        class: Class::Transition,
        sql: RESCUE_INSTANCES,
    },
    Statement {
        name: "prune_archive",
        class: Class::Transition,
        sql: PRUNE_ARCHIVE,
    },
    Statement {
        name: "prune_dlq",
        class: Class::Transition,
        sql: PRUNE_DLQ,
    },
    Statement {
        name: "prune_metrics",
        class: Class::Transition,
        sql: PRUNE_METRICS,
    },
    Statement {
        name: "prune_audit",
        class: Class::Transition,
        sql: PRUNE_AUDIT,
    },
    Statement {
        name: "heartbeat_instance",
        class: Class::Transition,
        sql: HEARTBEAT_INSTANCE,
    },
    Statement {
        name: "deregister_instance",
        class: Class::Transition,
        sql: DEREGISTER_INSTANCE,
    },
    Statement {
        name: "list_instances",
        class: Class::Committed,
        sql: LIST_INSTANCES,
    },
    Statement {
        name: "append_audit",
        class: Class::Transition,
        sql: APPEND_AUDIT,
    },
    Statement {
        name: "list_audit",
        class: Class::Committed,
        sql: LIST_AUDIT,
    },
    Statement {
        name: "get_job",
        class: Class::Committed,
        sql: GET_JOB,
    },
    Statement {
        name: "finished_jobs",
        class: Class::Committed,
        sql: FINISHED_JOBS,
    },
    Statement {
        name: "summary",
        class: Class::Telemetry,
        sql: SUMMARY,
    },
    Statement {
        name: "queue_stats",
        class: Class::Telemetry,
        sql: QUEUE_STATS,
    },
    Statement {
        name: "throughput",
        class: Class::Telemetry,
        sql: THROUGHPUT,
    },
    Statement {
        name: "top_errors",
        class: Class::Telemetry,
        sql: TOP_ERRORS,
    },
    Statement {
        name: "schema_versions",
        class: Class::Schema,
        sql: SCHEMA_VERSIONS,
    },
    Statement {
        name: "catalog",
        class: Class::Schema,
        sql: CATALOG,
    },
];

//! Reads: the session setup, committed reads (job details, settings, instances, the audit
//! log), telemetry (dirty reads of maintained counters; never a scan of the hot table) and
//! the schema catalog.

use super::{
    ANY_JOB_COLUMNS, AUDIT_COLUMNS, Class, INSTANCE_COLUMNS, QUEUE_COLUMNS, QUEUE_STATS_COLUMNS,
    Reads, SUMMARY_COLUMNS, Statement, THROUGHPUT_COLUMNS, TOP_ERRORS_COLUMNS,
};

/// Run once per pooled connection. The SET options are the ones filtered indexes require
/// for DML (most drivers set them; being explicit costs nothing). LOCK_TIMEOUT turns an
/// unexpected block into error 1222 (retried) instead of a hang.
pub const SESSION_SETUP: Statement = Statement {
    name: "session_setup",
    class: Class::Committed,
    reads: Reads::Nothing,
    sql: "SET NOCOUNT ON;
SET ANSI_NULLS ON;
SET ANSI_PADDING ON;
SET ANSI_WARNINGS ON;
SET ARITHABORT ON;
SET CONCAT_NULL_YIELDS_NULL ON;
SET QUOTED_IDENTIFIER ON;
SET NUMERIC_ROUNDABORT OFF;
SET LOCK_TIMEOUT 10000;
SET DEADLOCK_PRIORITY NORMAL;",
};

pub const PING: Statement = Statement {
    name: "ping",
    class: Class::Committed,
    reads: Reads::Rows(&["version"]),
    sql: "SET NOCOUNT ON;
SELECT TOP (1) v.version FROM [{schema}].[schema_version] AS v ORDER BY v.version DESC;",
};

pub const LIST_QUEUES: Statement = Statement {
    name: "list_queues",
    class: Class::Committed,
    reads: Reads::Rows(QUEUE_COLUMNS),
    sql: "SET NOCOUNT ON;
SELECT q.name, q.paused, q.hidden, q.max_workers, q.zombie_timeout_secs,
       q.execution_timeout_secs, q.lag_warn_secs, q.lag_crit_secs, q.updated_at,
       r.max_starts AS rate_max_starts, r.period_secs AS rate_period_secs,
       r.window_start AS rate_window_start, r.window_starts AS rate_window_starts
FROM [{schema}].[queues] AS q
LEFT JOIN [{schema}].[rate_limits] AS r ON r.queue = q.name
ORDER BY q.name;",
};

pub const LOAD_SETTINGS: Statement = Statement {
    name: "load_settings",
    class: Class::Committed,
    reads: Reads::Rows(&["value"]),
    sql: "SET NOCOUNT ON;
SELECT s.value FROM [{schema}].[settings] AS s WHERE s.name = N'engine';",
};

/// @P1 max age in milliseconds.
pub const LIST_INSTANCES: Statement = Statement {
    name: "list_instances",
    class: Class::Committed,
    reads: Reads::Rows(INSTANCE_COLUMNS),
    sql: "SET NOCOUNT ON;
SELECT i.id, i.host, i.pid, i.version, i.started_at, i.heartbeat_at, i.workers_total,
       i.workers_busy, i.kind, i.queues, i.job_types, i.quiet
FROM [{schema}].[instances] AS i
WHERE i.stopped_at IS NULL
  AND i.heartbeat_at >= DATEADD(MILLISECOND, -(@P1 % 1000),
                                DATEADD(SECOND, -(@P1 / 1000), SYSUTCDATETIME()))
ORDER BY i.heartbeat_at DESC;",
};

/// @P1 limit, @P2 before id, @P3 actor, @P4 action or action family, @P5 from, @P6 to
/// (each NULL for no limit).
pub const LIST_AUDIT: Statement = Statement {
    name: "list_audit",
    class: Class::Committed,
    reads: Reads::Rows(AUDIT_COLUMNS),
    sql: "SET NOCOUNT ON;
SELECT TOP (@P1) a.id, a.[at], a.actor, a.[action], a.target, a.[count], a.detail
FROM [{schema}].[audit_log] AS a
WHERE (@P2 IS NULL OR a.id < @P2)
  AND (@P3 IS NULL OR a.actor = @P3)
  AND (@P4 IS NULL OR a.[action] = @P4 OR LEFT(a.[action], LEN(@P4) + 1) = @P4 + N'.')
  AND (@P5 IS NULL OR a.[at] >= @P5)
  AND (@P6 IS NULL OR a.[at] < @P6)
ORDER BY a.id DESC
OPTION (RECOMPILE);",
};

/// The three pillars as one row shape, `pillar` telling them apart (0 hot, 1 archive, 2
/// DLQ), NULL where a pillar has no such column. `$filter` is each branch's WHERE.
macro_rules! any_pillar {
    ($filter:literal) => {
        concat!(
            "SELECT CAST(0 AS TINYINT) AS pillar, ",
            common_columns!(),
            ", status, cancel_requested, CAST(NULL AS DATETIME2(6)) AS finished_at,
           CAST(NULL AS NVARCHAR(MAX)) AS result, CAST(NULL AS TINYINT) AS reason
    FROM [{schema}].[jobs_hot] WHERE ",
            $filter,
            "
    UNION ALL
    SELECT CAST(1 AS TINYINT), ",
            common_columns!(),
            ", CAST(NULL AS TINYINT), CAST(NULL AS BIT), finished_at, result, CAST(NULL AS TINYINT)
    FROM [{schema}].[jobs_archive] WHERE ",
            $filter,
            "
    UNION ALL
    SELECT CAST(2 AS TINYINT), ",
            common_columns!(),
            ", CAST(NULL AS TINYINT), CAST(NULL AS BIT), finished_at, CAST(NULL AS NVARCHAR(MAX)), reason
    FROM [{schema}].[jobs_dlq] WHERE ",
            $filter
        )
    };
}

/// @P1 id (hex). One result set: the job in whichever pillar it is (a move commits in one
/// transaction, so it is in one; should a read catch two, the hot copy comes first).
pub const GET_JOB: Statement = Statement {
    name: "get_job",
    class: Class::Committed,
    reads: Reads::Rows(ANY_JOB_COLUMNS),
    sql: concat!(
        "SET NOCOUNT ON;
DECLARE @id BINARY(16) = @P1;
SELECT TOP (1) j.pillar, ",
        job_columns!("j."),
        ", j.status, j.cancel_requested, j.finished_at, j.result, j.reason
FROM (
    ",
        any_pillar!("id = @id"),
        "
) AS j
ORDER BY j.pillar;"
    ),
};

/// @P1 JSON ids (UUID text). One result set: those of the jobs that are finished (archive, DLQ).
pub const FINISHED_JOBS: Statement = Statement {
    name: "finished_jobs",
    class: Class::Committed,
    reads: Reads::Rows(ANY_JOB_COLUMNS),
    sql: concat!(
        "SET NOCOUNT ON;
DECLARE @ids TABLE (id BINARY(16) NOT NULL PRIMARY KEY);
INSERT INTO @ids (id)
SELECT DISTINCT u.id FROM OPENJSON(@P1) AS v CROSS APPLY [{schema}].[uuid_bytes](v.[value]) AS u;
SELECT j.pillar, ",
        job_columns!("j."),
        ", j.status, j.cancel_requested, j.finished_at, j.result, j.reason
FROM (
    ",
        any_pillar!("id IN (SELECT id FROM @ids)"),
        "
) AS j
WHERE j.pillar > 0;"
    ),
};

/// Per queue: the maintained counts (summed over their slots), then the part that depends on
/// the clock — how many pending jobs are due now, how long the oldest has waited, their
/// average wait — from two bounded range seeks on the due index (queue, scheduled_at): at most
/// 100,000 rows on each side of now. A backlog or a schedule of a million jobs costs what
/// 100,000 do; past that the due / scheduled split is the counter minus the side that fit,
/// and the average wait is that of the oldest 100,000 (dashboards are approximate by design).
macro_rules! queue_figures {
    () => {
        "DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @figures TABLE (
    queue           NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY,
    pending_rows    BIGINT       NOT NULL,
    fetched_rows    BIGINT       NOT NULL,
    processing_rows BIGINT       NOT NULL,
    archive_rows    BIGINT       NOT NULL,
    dlq_rows        BIGINT       NOT NULL,
    due_seen        BIGINT       NULL,
    future_seen     BIGINT       NULL,
    oldest_due      DATETIME2(6) NULL,
    lag_sum_ms      FLOAT        NULL,
    due             BIGINT       NULL
);
INSERT INTO @figures (queue, pending_rows, fetched_rows, processing_rows, archive_rows, dlq_rows)
SELECT c.queue, SUM(c.pending_rows), SUM(c.fetched_rows), SUM(c.processing_rows),
       SUM(c.archive_rows), SUM(c.dlq_rows)
FROM [{schema}].[queue_counter_slots] AS c WITH (NOLOCK)
GROUP BY c.queue;

UPDATE f
SET f.due_seen = d.seen, f.oldest_due = d.oldest, f.lag_sum_ms = d.lag_sum,
    f.future_seen = x.seen
FROM @figures AS f
OUTER APPLY (
    SELECT COUNT_BIG(*) AS seen, MIN(s.scheduled_at) AS oldest,
           SUM(CAST(DATEDIFF_BIG(MILLISECOND, s.scheduled_at, @now) AS FLOAT)) AS lag_sum
    FROM (SELECT TOP (100000) h.scheduled_at
          FROM [{schema}].[jobs_hot] AS h WITH (NOLOCK, FORCESEEK)
          WHERE h.status = 0 AND h.queue = f.queue AND h.scheduled_at <= @now
          ORDER BY h.scheduled_at) AS s
) AS d
OUTER APPLY (
    SELECT COUNT_BIG(*) AS seen
    FROM (SELECT TOP (100000) h.seq
          FROM [{schema}].[jobs_hot] AS h WITH (NOLOCK, FORCESEEK)
          WHERE h.status = 0 AND h.queue = f.queue AND h.scheduled_at > @now) AS s
) AS x
WHERE f.pending_rows > 0;

-- Counters and rows are read at slightly different moments: keep due within [0, pending].
UPDATE @figures
SET due = CASE WHEN pending_rows <= 0 OR due_seen IS NULL THEN 0
               WHEN due_seen < 100000 THEN due_seen
               ELSE pending_rows - future_seen END;
UPDATE @figures
SET due = CASE WHEN due < 0 THEN 0 WHEN due > pending_rows THEN pending_rows ELSE due END;
"
    };
}

/// The current minute of the database clock, for the metric rows.
macro_rules! current_minute {
    () => {
        "DECLARE @minute DATETIME2(0) =
    DATEADD(MINUTE, DATEDIFF(MINUTE, CAST('2000-01-01' AS DATETIME2(0)), SYSUTCDATETIME()),
            CAST('2000-01-01' AS DATETIME2(0)));
"
    };
}

/// A count over the last 1 or 5 minutes of metric slots, as a rolling window: the oldest
/// minute the window reaches into counts only for the share of it still inside (its events
/// taken as spread evenly), so the figure does not fall to nothing when the minute turns.
/// Needs `@minute` and `@rest_of_oldest`.
macro_rules! rolling_count {
    ($column:literal, $minutes:literal) => {
        concat!(
            "CAST(ROUND((SELECT ISNULL(SUM(b.",
            $column,
            " * CASE WHEN b.bucket_start = DATEADD(MINUTE, -",
            $minutes,
            ", @minute) THEN @rest_of_oldest ELSE 1.0 END), 0)
     FROM [{schema}].[metric_slots] AS b WITH (NOLOCK)
     WHERE b.bucket_start >= DATEADD(MINUTE, -",
            $minutes,
            ", @minute)), 0) AS BIGINT)"
        )
    };
}

/// Overview cards, from the maintained counters. Dirty reads on purpose: approximate numbers
/// that never block workers.
pub const SUMMARY: Statement = Statement {
    name: "summary",
    class: Class::Telemetry,
    reads: Reads::Rows(SUMMARY_COLUMNS),
    sql: concat!(
        "SET NOCOUNT ON;
SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED;
",
        queue_figures!(),
        current_minute!(),
        "DECLARE @rest_of_oldest FLOAT =
    1.0 - DATEDIFF(MILLISECOND, @minute, SYSUTCDATETIME()) / 60000.0;
IF @rest_of_oldest < 0 SET @rest_of_oldest = 0;
IF @rest_of_oldest > 1 SET @rest_of_oldest = 1;
SELECT t.pending, t.scheduled, t.fetched, t.processing, t.succeeded, t.dlq,
    ",
        rolling_count!("succeeded", "1"),
        " AS succeeded_1m,
    ",
        rolling_count!("succeeded", "5"),
        " AS succeeded_5m,
    ",
        rolling_count!("failed", "1"),
        " AS failed_1m,
    ",
        rolling_count!("failed", "5"),
        " AS failed_5m,
    ",
        rolling_count!("retried", "5"),
        " AS retried_5m
FROM (
    SELECT ISNULL(SUM(f.due), 0) AS pending,
           ISNULL(SUM(f.pending_rows - f.due), 0) AS scheduled,
           ISNULL(SUM(f.fetched_rows), 0) AS fetched,
           ISNULL(SUM(f.processing_rows), 0) AS processing,
           ISNULL(SUM(f.archive_rows), 0) AS succeeded,
           ISNULL(SUM(f.dlq_rows), 0) AS dlq
    FROM @figures AS f
) AS t;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;"
    ),
};

/// Every queue with a settings row or counters, with its counts and lag (dirty reads of the
/// counters, bounded seeks of the due index).
pub const QUEUE_STATS: Statement = Statement {
    name: "queue_stats",
    class: Class::Telemetry,
    reads: Reads::Rows(QUEUE_STATS_COLUMNS),
    sql: concat!(
        "SET NOCOUNT ON;
SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED;
",
        queue_figures!(),
        "SELECT n.queue,
       ISNULL(q.paused, 0) AS paused, ISNULL(q.hidden, 0) AS hidden, q.max_workers,
       ISNULL(f.due, 0) AS pending,
       ISNULL(f.pending_rows - f.due, 0) AS scheduled,
       ISNULL(f.fetched_rows, 0) AS fetched,
       ISNULL(f.processing_rows, 0) AS processing,
       ISNULL(f.archive_rows, 0) AS succeeded,
       ISNULL(f.dlq_rows, 0) AS failed,
       CAST(CASE WHEN f.due > 0 AND f.due_seen > 0 THEN f.lag_sum_ms / f.due_seen ELSE 0 END
            AS BIGINT) AS lag_avg_ms,
       CASE WHEN f.due > 0 AND f.oldest_due IS NOT NULL
            THEN DATEDIFF_BIG(MILLISECOND, f.oldest_due, @now) ELSE CAST(0 AS BIGINT) END AS lag_max_ms,
       q.lag_warn_secs, q.lag_crit_secs, q.zombie_timeout_secs, q.execution_timeout_secs
FROM (SELECT qn.name AS queue FROM [{schema}].[queues] AS qn WITH (NOLOCK)
      UNION SELECT fq.queue FROM @figures AS fq) AS n
LEFT JOIN [{schema}].[queues] AS q WITH (NOLOCK) ON q.name = n.queue
LEFT JOIN @figures AS f ON f.queue = n.queue
ORDER BY n.queue;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;"
    ),
};

/// @P1 minutes, @P2 queue or NULL. One row per minute that has a metric row, each carrying
/// the database clock's current minute (and one row of NULLs when no minute has one, so the
/// clock always comes back); the store fills the gaps.
pub const THROUGHPUT: Statement = Statement {
    name: "throughput",
    class: Class::Telemetry,
    reads: Reads::Rows(THROUGHPUT_COLUMNS),
    sql: concat!(
        "SET NOCOUNT ON;
",
        current_minute!(),
        "SELECT c.current_minute, b.bucket_start, b.succeeded, b.failed, b.retried,
       b.duration_sum_ms, b.duration_max_ms
FROM (SELECT @minute AS current_minute) AS c
LEFT JOIN (
    SELECT m.bucket_start, SUM(m.succeeded) AS succeeded, SUM(m.failed) AS failed,
           SUM(m.retried) AS retried, SUM(m.duration_sum_ms) AS duration_sum_ms,
           MAX(m.duration_max_ms) AS duration_max_ms
    FROM [{schema}].[metric_slots] AS m WITH (NOLOCK)
    WHERE m.bucket_start > DATEADD(MINUTE, -@P1, @minute)
      AND (@P2 IS NULL OR m.queue = @P2)
    GROUP BY m.bucket_start
) AS b ON 1 = 1
ORDER BY b.bucket_start;"
    ),
};

/// @P1 limit. The largest DLQ error groups (dirty read of the maintained groups, summed over
/// their slots; kind, job type and sample are the same text in every slot but the empty one
/// a count-out may create, which MAX skips).
pub const TOP_ERRORS: Statement = Statement {
    name: "top_errors",
    class: Class::Telemetry,
    reads: Reads::Rows(TOP_ERRORS_COLUMNS),
    sql: "SET NOCOUNT ON;
SELECT TOP (@P1) g.fingerprint, MAX(g.reason) AS reason, MAX(g.error_kind) AS error_kind,
       MAX(g.job_type) AS job_type, MAX(g.sample) AS sample, SUM(g.dlq_rows) AS dlq_rows,
       MAX(g.last_seen) AS last_seen
FROM [{schema}].[error_fingerprint_slots] AS g WITH (NOLOCK)
GROUP BY g.fingerprint
HAVING SUM(g.dlq_rows) > 0
ORDER BY SUM(g.dlq_rows) DESC, MAX(g.last_seen) DESC;",
};

/// @P1 minutes. Runs per (job type, run-time bin) that ended in the last @P1 minutes of the
/// database clock, the current one included (dirty read of the maintained rows, summed over
/// their slots).
pub const RUN_TIMES: Statement = Statement {
    name: "run_times",
    class: Class::Telemetry,
    reads: Reads::Rows(&["job_type", "bin", "runs"]),
    sql: "SET NOCOUNT ON;
DECLARE @from DATETIME2(0) = DATEADD(MINUTE, 1 - @P1,
    DATEADD(MINUTE, DATEDIFF(MINUTE, CAST('2000-01-01' AS DATETIME2(0)), SYSUTCDATETIME()),
            CAST('2000-01-01' AS DATETIME2(0))));
SELECT r.job_type, r.bin, SUM(r.runs) AS runs
FROM [{schema}].[run_time_slots] AS r WITH (NOLOCK)
WHERE r.bucket_start >= @from
GROUP BY r.job_type, r.bin
ORDER BY r.job_type, r.bin;",
};

/// Applied migration versions (none while the version table is missing). One SELECT either
/// way: the table is read into a variable only when it exists.
pub const SCHEMA_VERSIONS: Statement = Statement {
    name: "schema_versions",
    class: Class::Schema,
    reads: Reads::Rows(&["version"]),
    sql: "SET NOCOUNT ON;
DECLARE @versions TABLE (version INT NOT NULL PRIMARY KEY);
IF OBJECT_ID(N'[{schema}].[schema_version]', N'U') IS NOT NULL
    INSERT INTO @versions (version) SELECT v.version FROM [{schema}].[schema_version] AS v;
SELECT x.version FROM @versions AS x ORDER BY x.version;",
};

/// The text each routine was last applied from (its SHA-256), once migration 0011 made the
/// table; none before.
pub const ROUTINE_VERSIONS: Statement = Statement {
    name: "routine_versions",
    class: Class::Schema,
    reads: Reads::Rows(&["name", "checksum"]),
    sql: "SET NOCOUNT ON;
DECLARE @routines TABLE (name NVARCHAR(128) NOT NULL PRIMARY KEY, checksum CHAR(64) NOT NULL);
IF OBJECT_ID(N'[{schema}].[routine_versions]', N'U') IS NOT NULL
    INSERT INTO @routines (name, checksum)
    SELECT r.name, r.checksum FROM [{schema}].[routine_versions] AS r;
SELECT x.name, x.checksum FROM @routines AS x ORDER BY x.name;",
};

/// @P1 schema name. Columns with type, length (characters for text, -1 for MAX), scale and
/// nullability. The catalog is read one statement per kind of fact, so an empty answer (a
/// schema that does not exist yet) is just an empty answer.
pub const CATALOG_COLUMNS: Statement = Statement {
    name: "catalog_columns",
    class: Class::Schema,
    reads: Reads::Rows(&[
        "table_name",
        "column_name",
        "type_name",
        "max_length",
        "scale",
        "is_nullable",
    ]),
    sql: "SET NOCOUNT ON;
SELECT t.name AS table_name, c.name AS column_name, ty.name AS type_name,
       CAST(CASE WHEN ty.name IN (N'nvarchar', N'nchar') AND c.max_length > 0
                 THEN c.max_length / 2 ELSE c.max_length END AS INT) AS max_length,
       CAST(c.scale AS INT) AS scale, c.is_nullable
FROM sys.tables AS t
JOIN sys.columns AS c ON c.object_id = t.object_id
JOIN sys.types AS ty ON ty.user_type_id = c.user_type_id
WHERE t.schema_id = SCHEMA_ID(@P1);",
};

pub const CATALOG_INDEXES: Statement = Statement {
    name: "catalog_indexes",
    class: Class::Schema,
    reads: Reads::Rows(&["table_name", "index_name"]),
    sql: "SET NOCOUNT ON;
SELECT t.name AS table_name, i.name AS index_name
FROM sys.indexes AS i
JOIN sys.tables AS t ON t.object_id = i.object_id
WHERE t.schema_id = SCHEMA_ID(@P1) AND i.name IS NOT NULL;",
};

/// Each table's clustered-index compression and its LOCK_ESCALATION setting.
pub const CATALOG_TABLES: Statement = Statement {
    name: "catalog_tables",
    class: Class::Schema,
    reads: Reads::Rows(&["table_name", "compression", "lock_escalation"]),
    sql: "SET NOCOUNT ON;
SELECT t.name AS table_name, p.data_compression_desc AS compression,
       t.lock_escalation_desc AS lock_escalation
FROM sys.tables AS t
JOIN sys.partitions AS p ON p.object_id = t.object_id AND p.index_id IN (0, 1)
WHERE t.schema_id = SCHEMA_ID(@P1);",
};

/// Procedures and functions of the schema.
pub const CATALOG_ROUTINES: Statement = Statement {
    name: "catalog_routines",
    class: Class::Schema,
    reads: Reads::Rows(&["routine_name"]),
    sql: "SET NOCOUNT ON;
SELECT o.name AS routine_name
FROM sys.objects AS o
WHERE o.schema_id = SCHEMA_ID(@P1) AND o.type IN ('P', 'IF', 'FN', 'TF');",
};

/// The compatibility level, and Babelfish's version (NULL on SQL Server and Azure SQL, where the
/// property does not exist): its catalog differs in ways the check tolerates.
pub const CATALOG_DATABASE: Statement = Statement {
    name: "catalog_database",
    class: Class::Schema,
    reads: Reads::Rows(&["compatibility_level", "babelfish_version"]),
    sql: "SET NOCOUNT ON;
SELECT CAST(d.compatibility_level AS INT) AS compatibility_level,
       CAST(SERVERPROPERTY('BabelfishVersion') AS NVARCHAR(128)) AS babelfish_version
FROM sys.databases AS d WHERE d.database_id = DB_ID();",
};

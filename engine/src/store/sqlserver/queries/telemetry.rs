//! Telemetry: dirty reads (`NOLOCK`, the only class that may) of the maintained counters,
//! metric rows and error groups, summed over their striped slots; never a scan of the hot
//! table.

use super::{Class, Reads, Statement};

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

/// The frame of a read of the maintained counters: dirty reads (`READ UNCOMMITTED`, this
/// class alone) for the batch, and the session's level set back after it (the pooled session
/// outlives the batch).
macro_rules! dirty_read {
    ($($body:expr),+ $(,)?) => {
        concat!(
            "SET NOCOUNT ON;\nSET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED;\n",
            $($body,)+
            "\nSET TRANSACTION ISOLATION LEVEL READ COMMITTED;"
        )
    };
}

/// Overview cards, from the maintained counters. Dirty reads on purpose: approximate numbers
/// that never block workers.
pub const SUMMARY: Statement = Statement {
    name: "summary",
    class: Class::Telemetry,
    reads: Reads::Rows(SUMMARY_COLUMNS),
    sql: dirty_read!(
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
) AS t;"
    ),
};

/// Every queue with a settings row or counters, with its counts and lag (dirty reads of the
/// counters, bounded seeks of the due index).
pub const QUEUE_STATS: Statement = Statement {
    name: "queue_stats",
    class: Class::Telemetry,
    reads: Reads::Rows(QUEUE_STATS_COLUMNS),
    sql: dirty_read!(
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
ORDER BY n.queue;"
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

/// @P1 limit. Pending rows (due or scheduled) per (queue, job type), the largest groups
/// first. A dirty read, as the other telemetry: a count shown beside the instances, not a
/// decision.
pub const PENDING_GROUPS: Statement = Statement {
    name: "pending_groups",
    class: Class::Telemetry,
    reads: Reads::Rows(&["queue", "job_type", "pending"]),
    sql: "SET NOCOUNT ON;
SELECT TOP (@P1) j.queue, j.job_type, COUNT_BIG(*) AS pending
FROM [{schema}].[jobs_hot] AS j WITH (NOLOCK)
WHERE j.status = 0
GROUP BY j.queue, j.job_type
ORDER BY COUNT_BIG(*) DESC, j.queue, j.job_type;",
};

pub const SUMMARY_COLUMNS: &[&str] = &[
    "pending",
    "scheduled",
    "fetched",
    "processing",
    "succeeded",
    "dlq",
    "succeeded_1m",
    "succeeded_5m",
    "failed_1m",
    "failed_5m",
    "retried_5m",
];

pub const QUEUE_STATS_COLUMNS: &[&str] = &[
    "queue",
    "paused",
    "hidden",
    "max_workers",
    "pending",
    "scheduled",
    "fetched",
    "processing",
    "succeeded",
    "failed",
    "lag_avg_ms",
    "lag_max_ms",
    "lag_warn_secs",
    "lag_crit_secs",
    "zombie_timeout_secs",
    "execution_timeout_secs",
];

/// The database clock's current minute on every row, then one bucket per row (NULL when
/// there is none, so the clock always comes back).
pub const THROUGHPUT_COLUMNS: &[&str] = &[
    "current_minute",
    "bucket_start",
    "succeeded",
    "failed",
    "retried",
    "duration_sum_ms",
    "duration_max_ms",
];

pub const TOP_ERRORS_COLUMNS: &[&str] = &[
    "fingerprint",
    "reason",
    "error_kind",
    "job_type",
    "sample",
    "dlq_rows",
    "last_seen",
];

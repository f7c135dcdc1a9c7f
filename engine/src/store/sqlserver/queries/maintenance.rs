//! Rescue sweeps, retention, queue settings, engine settings, the instance registry and the
//! audit log. Sweeps move at most `@batch` rows (at most 1,000) per transaction;
//! `crate::maintenance` repeats them until a round comes back short.

use super::{Class, Reads, Statement};

/// Instances that stopped, or stopped heartbeating before @P2 seconds ago, with the LIKE
/// pattern of their workers' ids: workers are named after their instance, the instance id
/// itself or `<instance id>:<anything>` (the id's own wildcards escaped).
macro_rules! dead_instances {
    () => {
        "DECLARE @dead_cutoff DATETIME2(6) = DATEADD(SECOND, -@P2, SYSUTCDATETIME());
DECLARE @dead TABLE (id      NVARCHAR(255)  COLLATE DATABASE_DEFAULT NOT NULL PRIMARY KEY,
                     pattern NVARCHAR(1100) COLLATE DATABASE_DEFAULT NOT NULL);
INSERT INTO @dead (id, pattern)
SELECT i.id,
       REPLACE(REPLACE(REPLACE(REPLACE(i.id, N'\\', N'\\\\'), N'%', N'\\%'), N'_', N'\\_'), N'[', N'\\[')
       + N':%'
FROM [{schema}].[instances] AS i
WHERE i.stopped_at IS NOT NULL OR i.heartbeat_at < @dead_cutoff;
DECLARE @left INT;
"
    };
}

/// A hot row held by a worker of a dead instance (`dead_instances!`).
macro_rules! held_by_dead_instance {
    () => {
        "EXISTS (SELECT 1 FROM @dead AS d
                  WHERE [{schema}].[jobs_hot].worker_id = d.id
                     OR [{schema}].[jobs_hot].worker_id LIKE d.pattern ESCAPE N'\\')"
    };
}

/// @P1 fetched timeout (s), @P2 dead-instance timeout (s), @P3 batch size. Stale fetched
/// rows, and fetched rows of dead instances, back to pending (no user code ran).
///
/// Two statements, each a seek, instead of one `age OR EXISTS (dead instance)` predicate that
/// no index can serve: by age, a range seek per queue on the fetched-only index
/// (queue, fetched_at); by instance, only when an instance is dead, each queue's fetched rows
/// (a handful: prefetch buffers) against the few dead ids. READPAST: a row its worker is
/// starting right now is skipped, not waited for.
pub const RESCUE_FETCHED: Statement = Statement {
    name: "rescue_fetched",
    class: Class::Transition,
    reads: Reads::Rows(&["released"]),
    sql: tx!(
        "DECLARE @fetched_cutoff DATETIME2(6) = DATEADD(SECOND, -@P1, SYSUTCDATETIME());
DECLARE @batch INT = @P3;
",
        ledger_decl!(),
        dead_instances!(),
        "DECLARE @released TABLE (id BINARY(16) NOT NULL PRIMARY KEY,
                         queue NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL);

UPDATE TOP (@batch) [{schema}].[jobs_hot] WITH (ROWLOCK, READPAST)
SET status = 0, worker_id = NULL, fetched_at = NULL
OUTPUT inserted.id, inserted.queue INTO @released (id, queue)
FROM [{schema}].[queues] AS q WITH (READPAST)
WHERE [{schema}].[jobs_hot].queue = q.name AND [{schema}].[jobs_hot].status = 1
  AND [{schema}].[jobs_hot].fetched_at < @fetched_cutoff;

SET @left = @batch - (SELECT COUNT(*) FROM @released);
IF @left > 0 AND EXISTS (SELECT 1 FROM @dead)
    UPDATE TOP (@left) [{schema}].[jobs_hot] WITH (ROWLOCK, READPAST)
    SET status = 0, worker_id = NULL, fetched_at = NULL
    OUTPUT inserted.id, inserted.queue INTO @released (id, queue)
    FROM [{schema}].[queues] AS q WITH (READPAST)
    WHERE [{schema}].[jobs_hot].queue = q.name AND [{schema}].[jobs_hot].status = 1
      AND ",
        held_by_dead_instance!(),
        ";

INSERT INTO @ledger (queue, pending_delta, fetched_delta)
SELECT r.queue, COUNT(*), -COUNT(*) FROM @released AS r GROUP BY r.queue;
",
        counters_apply!(),
        "
SELECT COUNT_BIG(*) AS released FROM @released;"
    ),
};

/// @P1 default zombie timeout (s), @P2 dead-instance timeout (s), @P3 batch size, @P4 and
/// @P5 the error kind and message (`FailureReason::Zombie.store_written()`), @P6 their
/// fingerprint head.
/// Processing rows whose heartbeat expired (per-queue zombie timeout, else the default) or
/// whose instance is gone → DLQ `Zombie`; never retried automatically, because their side
/// effects may have happened. Per queue a seek on the processing-only index
/// (queue, worker_id), the heartbeat read from the row; dead instances' workers are a seek on
/// the worker id. READPAST: a row a worker is finishing right now is skipped, not waited for.
pub const RESCUE_ZOMBIES: Statement = Statement {
    name: "rescue_zombies",
    class: Class::Transition,
    reads: Reads::Rows(&["zombies"]),
    sql: tx!(
        "DECLARE @default_zombie INT = @P1;
DECLARE @batch INT = @P3;
",
        generated_error_decl!("5", "@P4", "@P5", "@P6"),
        dead_instances!(),
        "
DELETE TOP (@batch) FROM [{schema}].[jobs_hot] WITH (ROWLOCK, READPAST)
",
        output_into_moved!(),
        "
FROM [{schema}].[queues] AS q WITH (READPAST)
WHERE [{schema}].[jobs_hot].queue = q.name AND [{schema}].[jobs_hot].status = 2
  AND [{schema}].[jobs_hot].heartbeat_at
      < DATEADD(SECOND, -ISNULL(q.zombie_timeout_secs, @default_zombie), @now);

SET @left = @batch - (SELECT COUNT(*) FROM @moved);
IF @left > 0 AND EXISTS (SELECT 1 FROM @dead)
    DELETE TOP (@left) FROM [{schema}].[jobs_hot] WITH (ROWLOCK, READPAST)
    ",
        output_into_moved!(),
        "
    FROM [{schema}].[queues] AS q WITH (READPAST)
    WHERE [{schema}].[jobs_hot].queue = q.name AND [{schema}].[jobs_hot].status = 2
      AND ",
        held_by_dead_instance!(),
        ";
",
        moved_to_dlq_with_generated_error!(),
        after_moved_jobs!(),
        "
SELECT COUNT_BIG(*) AS zombies FROM @moved;"
    ),
};

/// @P1 batch size, @P2 and @P3 the error kind and message
/// (`FailureReason::Expired.store_written()`), @P4 their fingerprint head. Pending jobs whose `expires_at` passed before they started → DLQ
/// `Expired`: a seek on the expiry index (pending rows that carry an expiry).
pub const RESCUE_EXPIRED: Statement = Statement {
    name: "rescue_expired",
    class: Class::Transition,
    reads: Reads::Rows(&["expired"]),
    sql: tx!(
        "DECLARE @batch INT = @P1;
",
        generated_error_decl!("8", "@P2", "@P3", "@P4"),
        "
DELETE TOP (@batch) FROM [{schema}].[jobs_hot] WITH (ROWLOCK, READPAST)
",
        output_into_moved!(),
        "
WHERE status = 0 AND expires_at IS NOT NULL AND expires_at <= @now;
",
        moved_to_dlq_with_generated_error!(),
        after_moved_jobs!(),
        "
SELECT COUNT_BIG(*) AS expired FROM @moved;"
    ),
};

/// Instance rows whose process is gone for over an hour; @P1 batch size.
pub const RESCUE_INSTANCES: Statement = Statement {
    name: "rescue_instances",
    class: Class::Transition,
    reads: Reads::Rows(&["deleted"]),
    sql: tx!("DELETE TOP (@P1) FROM [{schema}].[instances]
WHERE heartbeat_at < DATEADD(HOUR, -1, SYSUTCDATETIME())
   OR stopped_at < DATEADD(HOUR, -1, SYSUTCDATETIME());
SELECT CAST(@@ROWCOUNT AS BIGINT) AS deleted;"),
};

/// @P1 age (s), @P2 batch size. Oldest first (a seek on the finish-time index), counters
/// following.
pub const PRUNE_ARCHIVE: Statement = Statement {
    name: "prune_archive",
    class: Class::Transition,
    reads: Reads::Rows(&["deleted"]),
    sql: tx!(
        "DECLARE @cutoff DATETIME2(6) = DATEADD(SECOND, -@P1, SYSUTCDATETIME());
DECLARE @batch INT = @P2;
",
        ledger_decl!(),
        "
-- Keys of rows about to go remember their state (rows past the cutoff that this batch does
-- not reach yet are marked early, which changes nothing: the enqueue reads the pillar first).
UPDATE u SET u.left_state = 1
FROM [{schema}].[unique_keys] AS u
WHERE u.left_state IS NULL
  AND EXISTS (SELECT 1 FROM [{schema}].[jobs_archive] AS a
              WHERE a.id = u.job_id AND a.finished_at < @cutoff);
DELETE TOP (@batch) FROM [{schema}].[jobs_archive]
OUTPUT deleted.queue, -1 INTO @ledger (queue, archive_delta)
WHERE finished_at < @cutoff;
",
        counters_apply!(),
        "
SELECT COUNT_BIG(*) AS deleted FROM @ledger;"
    ),
};

pub const PRUNE_DLQ: Statement = Statement {
    name: "prune_dlq",
    class: Class::Transition,
    reads: Reads::Rows(&["deleted"]),
    sql: tx!(
        "DECLARE @cutoff DATETIME2(6) = DATEADD(SECOND, -@P1, SYSUTCDATETIME());
DECLARE @batch INT = @P2;
",
        ledger_decl!(),
        "
UPDATE u SET u.left_state = 2
FROM [{schema}].[unique_keys] AS u
WHERE u.left_state IS NULL
  AND EXISTS (SELECT 1 FROM [{schema}].[jobs_dlq] AS d
              WHERE d.id = u.job_id AND d.finished_at < @cutoff);
DELETE TOP (@batch) FROM [{schema}].[jobs_dlq]
OUTPUT deleted.queue, -1, deleted.reason, deleted.fingerprint, deleted.job_type
  INTO @ledger (queue, dlq_delta, reason, fingerprint, job_type)
WHERE finished_at < @cutoff;
",
        counters_apply!(),
        error_groups_apply!(),
        "
SELECT COUNT_BIG(*) AS deleted FROM @ledger;"
    ),
};

pub const PRUNE_METRICS: Statement = Statement {
    name: "prune_metrics",
    class: Class::Transition,
    reads: Reads::Rows(&["deleted"]),
    // Run-time rows are metric rows too and share their retention: up to a batch of each,
    // answering the larger count so the pruner steps on while either had a full batch.
    sql: tx!(
        "DECLARE @cutoff DATETIME2(6) = DATEADD(SECOND, -@P1, SYSUTCDATETIME());
DELETE TOP (@P2) FROM [{schema}].[metric_slots] WHERE bucket_start < @cutoff;
DECLARE @buckets BIGINT = @@ROWCOUNT;
DELETE TOP (@P2) FROM [{schema}].[run_time_slots] WHERE bucket_start < @cutoff;
DECLARE @bins BIGINT = @@ROWCOUNT;
SELECT CASE WHEN @buckets > @bins THEN @buckets ELSE @bins END AS deleted;"
    ),
};

/// Error groups whose slots sum to zero: every row of them left the DLQ. The read holds
/// UPDLOCK, HOLDLOCK on the groups, so no slot of one can change between the sum and the
/// delete; it touches only this small table, once per prune.
pub const PRUNE_ERROR_GROUPS: Statement = Statement {
    name: "prune_error_groups",
    class: Class::Transition,
    reads: Reads::Rows(&["deleted"]),
    sql: tx!(
        "DECLARE @gone TABLE (fingerprint CHAR(16) COLLATE Latin1_General_100_BIN2 NOT NULL
                          PRIMARY KEY);
INSERT INTO @gone (fingerprint)
SELECT g.fingerprint
FROM [{schema}].[error_fingerprint_slots] AS g WITH (UPDLOCK, HOLDLOCK)
GROUP BY g.fingerprint
HAVING SUM(g.dlq_rows) = 0;
DELETE g
FROM [{schema}].[error_fingerprint_slots] AS g, @gone AS x
WHERE x.fingerprint = g.fingerprint;
SELECT CAST(@@ROWCOUNT AS BIGINT) AS deleted;"
    ),
};

/// @P1 seconds past a key's end (0), @P2 batch.
pub const PRUNE_UNIQUE_KEYS: Statement = Statement {
    name: "prune_unique_keys",
    class: Class::Transition,
    reads: Reads::Rows(&["deleted"]),
    sql: prune_older_rows!("unique_keys", "held_until <="),
};

pub const PRUNE_AUDIT: Statement = Statement {
    name: "prune_audit",
    class: Class::Transition,
    reads: Reads::Rows(&["deleted"]),
    sql: prune_older_rows!("audit_log", "[at] <"),
};

/// @P1 id, @P2 host, @P3 pid, @P4 version, @P5 started_at, @P6 workers total, @P7 busy,
/// @P8 kind, @P9 queues (JSON array or NULL), @P10 job types (JSON array or NULL).
/// Answers the row's quiet flag, which only `set_instance_quiet` writes: the beat is how the
/// instance learns an operator quieted or resumed it.
pub const HEARTBEAT_INSTANCE: Statement = Statement {
    name: "heartbeat_instance",
    class: Class::Transition,
    reads: Reads::Rows(&["quiet"]),
    sql: tx!("DECLARE @id NVARCHAR(255) = @P1;
UPDATE i
SET i.host = @P2, i.pid = @P3, i.version = @P4, i.heartbeat_at = SYSUTCDATETIME(),
    i.workers_total = @P6, i.workers_busy = @P7, i.stopped_at = NULL,
    i.kind = @P8, i.queues = @P9, i.job_types = @P10
FROM [{schema}].[instances] AS i WITH (UPDLOCK, HOLDLOCK)
WHERE i.id = @id;
IF @@ROWCOUNT = 0
    INSERT INTO [{schema}].[instances]
        (id, host, pid, version, started_at, heartbeat_at, workers_total, workers_busy, kind,
         queues, job_types)
    SELECT @id, @P2, @P3, @P4, @P5, SYSUTCDATETIME(), @P6, @P7, @P8, @P9, @P10
    WHERE NOT EXISTS (SELECT 1 FROM [{schema}].[instances] AS i WITH (UPDLOCK, HOLDLOCK)
                      WHERE i.id = @id);
SELECT i.quiet FROM [{schema}].[instances] AS i WHERE i.id = @id;"),
};

/// @P1 id, @P2 quiet (bit). Answers how many rows changed (0: no such instance).
pub const SET_INSTANCE_QUIET: Statement = Statement {
    name: "set_instance_quiet",
    class: Class::Transition,
    reads: Reads::Rows(&["changed"]),
    sql: tx!(
        "UPDATE [{schema}].[instances] SET quiet = @P2 WHERE id = @P1;
SELECT CAST(@@ROWCOUNT AS BIGINT) AS changed;"
    ),
};

pub const DEREGISTER_INSTANCE: Statement = Statement {
    name: "deregister_instance",
    class: Class::Transition,
    reads: Reads::Nothing,
    sql: tx!("UPDATE [{schema}].[instances] SET stopped_at = SYSUTCDATETIME() WHERE id = @P1;"),
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

/// @P1 max age in milliseconds. Instances that beat within it, and any older or stopped one
/// that still holds jobs (fetched or processing by it or `<id>:<worker>`), with how many:
/// each count a seek per queue on a filtered index (fetched-only, processing-only), whose
/// rows are few (prefetch buffers, running jobs).
pub const LIST_INSTANCES: Statement = Statement {
    name: "list_instances",
    class: Class::Committed,
    reads: Reads::Rows(INSTANCE_COLUMNS),
    sql: "SET NOCOUNT ON;
DECLARE @cutoff DATETIME2(6) = DATEADD(MILLISECOND, -(@P1 % 1000),
                                       DATEADD(SECOND, -(@P1 / 1000), SYSUTCDATETIME()));
SELECT l.id, l.host, l.pid, l.version, l.started_at, l.heartbeat_at, l.workers_total,
       l.workers_busy, l.kind, l.queues, l.job_types, l.quiet, l.held_jobs, l.stopped
FROM (SELECT i.id, i.host, i.pid, i.version, i.started_at, i.heartbeat_at, i.workers_total,
             i.workers_busy, i.kind, i.queues, i.job_types, i.quiet,
             CAST(CASE WHEN i.stopped_at IS NULL THEN 0 ELSE 1 END AS BIT) AS stopped,
             (SELECT COUNT_BIG(*) FROM [{schema}].[jobs_hot] AS j
               WHERE j.status = 1
                 AND (j.worker_id = i.id OR j.worker_id LIKE REPLACE(REPLACE(REPLACE(REPLACE(
                      i.id, N'\\', N'\\\\'), N'%', N'\\%'), N'_', N'\\_'), N'[', N'\\[')
                      + N':%' ESCAPE N'\\'))
           + (SELECT COUNT_BIG(*) FROM [{schema}].[jobs_hot] AS j
               WHERE j.status = 2
                 AND (j.worker_id = i.id OR j.worker_id LIKE REPLACE(REPLACE(REPLACE(REPLACE(
                      i.id, N'\\', N'\\\\'), N'%', N'\\%'), N'_', N'\\_'), N'[', N'\\[')
                      + N':%' ESCAPE N'\\')) AS held_jobs
      FROM [{schema}].[instances] AS i) AS l
WHERE (l.stopped = 0 AND l.heartbeat_at >= @cutoff) OR l.held_jobs > 0
ORDER BY l.heartbeat_at DESC;",
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

/// @P1 name; then for each field a "set" flag and a value: @P2/@P3 paused, @P4/@P5 hidden,
/// @P6/@P7 max_workers, @P8/@P9 zombie timeout, @P10/@P11 execution timeout,
/// @P12/@P13 lag warn, @P14/@P15 lag crit, @P16 rate limit set flag with @P17 starts and
/// @P18 period (NULL starts: no limit). Update-then-insert; answers the row.
pub const UPDATE_QUEUE: Statement = Statement {
    name: "update_queue",
    class: Class::Transition,
    reads: Reads::Rows(QUEUE_COLUMNS),
    sql: tx!("DECLARE @name NVARCHAR(255) = @P1;
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
-- A changed limit keeps the current period's count: lowering it below what already started
-- holds the rest of the period back.
IF @P16 = 1 AND @P17 IS NULL
    DELETE FROM [{schema}].[rate_limits] WHERE queue = @name;
IF @P16 = 1 AND @P17 IS NOT NULL
BEGIN
    UPDATE r SET r.max_starts = @P17, r.period_secs = @P18
    FROM [{schema}].[rate_limits] AS r WITH (UPDLOCK, HOLDLOCK)
    WHERE r.queue = @name;
    IF @@ROWCOUNT = 0
        INSERT INTO [{schema}].[rate_limits] (queue, max_starts, period_secs, window_start, window_starts)
        SELECT @name, @P17, @P18, 0, 0
        WHERE NOT EXISTS (SELECT 1 FROM [{schema}].[rate_limits] AS r WITH (UPDLOCK, HOLDLOCK)
                          WHERE r.queue = @name);
END
SELECT q.name, q.paused, q.hidden, q.max_workers, q.zombie_timeout_secs,
       q.execution_timeout_secs, q.lag_warn_secs, q.lag_crit_secs, q.updated_at,
       r.max_starts AS rate_max_starts, r.period_secs AS rate_period_secs,
       r.window_start AS rate_window_start, r.window_starts AS rate_window_starts
FROM [{schema}].[queues] AS q
LEFT JOIN [{schema}].[rate_limits] AS r ON r.queue = q.name
WHERE q.name = @name;"),
};

/// @P1 JSON document.
pub const SAVE_SETTINGS: Statement = Statement {
    name: "save_settings",
    class: Class::Transition,
    reads: Reads::Nothing,
    sql: tx!("DECLARE @value NVARCHAR(MAX) = @P1;
UPDATE s SET s.value = @value, s.updated_at = SYSUTCDATETIME()
FROM [{schema}].[settings] AS s WITH (UPDLOCK, HOLDLOCK)
WHERE s.name = N'engine';
IF @@ROWCOUNT = 0
    INSERT INTO [{schema}].[settings] (name, value, updated_at)
    SELECT N'engine', @value, SYSUTCDATETIME()
    WHERE NOT EXISTS (SELECT 1 FROM [{schema}].[settings] AS s WITH (UPDLOCK, HOLDLOCK)
                      WHERE s.name = N'engine');"),
};

/// @P1 actor, @P2 action, @P3 target, @P4 count, @P5 detail. Answers the stored entry.
pub const APPEND_AUDIT: Statement = Statement {
    name: "append_audit",
    class: Class::Transition,
    reads: Reads::Rows(AUDIT_COLUMNS),
    sql: tx!("DECLARE @new TABLE (id BIGINT NOT NULL PRIMARY KEY);
INSERT INTO [{schema}].[audit_log] ([at], actor, [action], target, [count], detail)
OUTPUT inserted.id INTO @new (id)
VALUES (SYSUTCDATETIME(), @P1, @P2, @P3, @P4, @P5);
SELECT a.id, a.[at], a.actor, a.[action], a.target, a.[count], a.detail
FROM [{schema}].[audit_log] AS a JOIN @new AS n ON n.id = a.id;"),
};

pub const QUEUE_COLUMNS: &[&str] = &[
    "name",
    "paused",
    "hidden",
    "max_workers",
    "zombie_timeout_secs",
    "execution_timeout_secs",
    "lag_warn_secs",
    "lag_crit_secs",
    "updated_at",
    "rate_max_starts",
    "rate_period_secs",
    "rate_window_start",
    "rate_window_starts",
];

pub const INSTANCE_COLUMNS: &[&str] = &[
    "id",
    "host",
    "pid",
    "version",
    "started_at",
    "heartbeat_at",
    "workers_total",
    "workers_busy",
    "kind",
    "queues",
    "job_types",
    "quiet",
    "held_jobs",
    "stopped",
];

pub const AUDIT_COLUMNS: &[&str] = &["id", "at", "actor", "action", "target", "count", "detail"];

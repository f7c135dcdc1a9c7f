//! Batches: a batch row written with its members in one transaction, and the committed reads
//! of batches and their members. The members' final moves count them into their batch
//! (`batches_apply!`, in the statements of those moves).

use super::{Class, Reads, Statement};

/// Columns of a batch row (`SqlServerStore::batch`), in the order statements send them.
pub const BATCH_COLUMNS: &[&str] = &[
    "id",
    "description",
    "created_by",
    "created_at",
    "total",
    "succeeded",
    "dead",
    "finished_at",
    "callbacks",
    "success_job_id",
    "complete_job_id",
    "death_job_id",
];

/// The columns of a batch row (`BATCH_COLUMNS`) and the table they come from as `b`: what
/// follows a `SELECT` (or `SELECT TOP (…)`), before its `WHERE`.
macro_rules! batch_row_columns {
    () => {
        "b.id, b.description, b.created_by, b.created_at, b.total, b.succeeded, b.dead,
       b.finished_at, b.callbacks, b.success_job_id, b.complete_job_id, b.death_job_id
FROM [{schema}].[batches] AS b
"
    };
}

/// A member in any pillar: `pillar` as in `ANY_JOB_COLUMNS` (0 hot, 1 archive, 2 DLQ), then a
/// job list row's columns (`rows::summary` reads `status` for the hot pillar, `reason` for
/// the DLQ, `finished_at` for both finished ones; NULL where a pillar has no such column).
pub const BATCH_MEMBER_COLUMNS: &[&str] =
    list_column_names!(["pillar"], ["status", "reason"], ["finished_at"]);

/// @P1 batch id (BINARY(16)), @P2 description, @P3 created_by, @P4 callbacks (the engine's JSON),
/// @P5 / @P6 / @P7 the jobs on_success / on_complete / on_death enqueue (JSON, NULL when not
/// configured; see `store::batches::CallbackJob`), @P8 the members as `[enqueue_batch]` reads
/// them, with their ids. Answers the batch row.
///
/// Lock order: the callbacks' queues get their settings rows first (a member's final move
/// enqueues a callback after locking jobs, so it must find the row there); then the members
/// through `[enqueue_batch]` (their queues, the jobs, their counters), their `batch_id`, and
/// the batch row last. The ids are fixed by the caller, so a retry after an ambiguous failure
/// finds the members `[enqueue_batch]` wrote and the batch row, and writes neither again.
pub const CREATE_BATCH: Statement = Statement {
    name: "create_batch",
    class: Class::Transition,
    reads: Reads::Rows(BATCH_COLUMNS),
    sql: tx!(
        "DECLARE @batch BINARY(16) = @P1;
DECLARE @description NVARCHAR(2000) = @P2;
DECLARE @created_by NVARCHAR(255) = @P3;
DECLARE @callbacks NVARCHAR(MAX) = @P4;
DECLARE @success_request NVARCHAR(MAX) = @P5;
DECLARE @complete_request NVARCHAR(MAX) = @P6;
DECLARE @death_request NVARCHAR(MAX) = @P7;
DECLARE @members NVARCHAR(MAX) = @P8;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @answer TABLE (id NVARCHAR(36) COLLATE DATABASE_DEFAULT NOT NULL, created BIT NOT NULL,
                       ord INT NOT NULL PRIMARY KEY);
DECLARE @stamp TABLE (slice INT NOT NULL, id BINARY(16) NOT NULL, PRIMARY KEY (slice, id));
DECLARE @slice INT = 0;
DECLARE @slices INT;
DECLARE @need_queues TABLE (name NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL);
INSERT INTO @need_queues (name)
SELECT JSON_VALUE(r.doc, '$.queue')
FROM (VALUES (@success_request), (@complete_request), (@death_request)) AS r (doc)
WHERE r.doc IS NOT NULL;
",
        ensure_queues!(),
        "
INSERT INTO @answer (id, created, ord) EXEC [{schema}].[enqueue_batch] @jobs = @members;

-- Members carry their batch in every pillar. At most 1,000 rows per statement.
INSERT INTO @stamp (slice, id)
SELECT a.ord / 1000, u.id
FROM @answer AS a CROSS APPLY [{schema}].[uuid_bytes](a.id) AS u
WHERE a.created = 1;
SET @slices = (SELECT MAX(s.slice) FROM @stamp AS s);
WHILE @slice <= @slices
BEGIN
    UPDATE h SET h.batch_id = @batch
    FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK, FORCESEEK), @stamp AS s
    WHERE s.id = h.id AND s.slice = @slice;
    SET @slice += 1;
END

INSERT INTO [{schema}].[batches]
    (id, description, created_by, created_at, total, succeeded, dead, finished_at, callbacks,
     success_request, complete_request, death_request)
SELECT @batch, @description, @created_by, @now, (SELECT COUNT(*) FROM @answer AS a), 0, 0,
       NULL, @callbacks, @success_request, @complete_request, @death_request
WHERE NOT EXISTS (SELECT 1 FROM [{schema}].[batches] AS b WITH (UPDLOCK, HOLDLOCK)
                  WHERE b.id = @batch);

SELECT ",
        batch_row_columns!(),
        "WHERE b.id = @batch;"
    ),
};

/// @P1 batch id (BINARY(16)).
pub const GET_BATCH: Statement = Statement {
    name: "get_batch",
    class: Class::Committed,
    reads: Reads::Rows(BATCH_COLUMNS),
    sql: concat!(
        "SET NOCOUNT ON;
SELECT ",
        batch_row_columns!(),
        "WHERE b.id = @P1;"
    ),
};

/// @P1 the id to page back from (BINARY(16)) or NULL for the newest, @P2 limit. Newest first: ids
/// are UUID v7, so a backward range seek of the key. RECOMPILE: with the actual @P1 the
/// optimizer sees a seek rather than a plan for either case.
pub const LIST_BATCHES: Statement = Statement {
    name: "list_batches",
    class: Class::Committed,
    reads: Reads::Rows(BATCH_COLUMNS),
    sql: concat!(
        "SET NOCOUNT ON;
DECLARE @before BINARY(16) = @P1;
SELECT TOP (@P2) ",
        batch_row_columns!(),
        "WHERE @before IS NULL OR b.id < @before
ORDER BY b.id DESC
OPTION (RECOMPILE);"
    ),
};

/// Up to `@left` more members (`BATCH_MEMBERS`) from the finished pillar `$table` (as
/// `$a`), order `$seq` among the pillars, `pillar` `$pillar`, `reason` `$reason`; a member
/// an earlier pillar gave already is not repeated.
macro_rules! finished_members {
    ($seq:literal, $pillar:literal, $table:literal, $a:literal, $reason:literal) => {
        concat!(
            "INSERT INTO @members (seq, pillar, id, queue, job_type, status, reason, priority, tags, attempt,
                      created_at, scheduled_at, started_at, finished_at, worker_id, last_error)
SELECT TOP (@left) ", $seq, ", ", $pillar, ", ", $a, ".id, ", $a, ".queue, ", $a, ".job_type, NULL, ",
            $reason, ", ", $a, ".priority, ", $a, ".tags,
       ", $a, ".attempt, ", $a, ".created_at, ", $a, ".scheduled_at, ", $a, ".started_at, ",
            $a, ".finished_at, ", $a, ".worker_id,
       ", $a, ".last_error
FROM [{schema}].[", $table, "] AS ", $a, "
WHERE ", $a, ".batch_id = @batch AND ", $a, ".batch_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM @members AS m WHERE m.id = ", $a, ".id)
ORDER BY ", $a, ".id;
"
        )
    };
}

/// @P1 batch id (BINARY(16)), @P2 limit. Active members first, then dead, then succeeded, each in id
/// order (a seek of the pillar's batch index), at most @P2 in all. The pillars are read one
/// after the other; a member seen in an earlier one is not repeated should it move meanwhile.
/// The explicit `batch_id IS NOT NULL` lets the optimizer match the filtered indexes.
pub const BATCH_MEMBERS: Statement = Statement {
    name: "batch_members",
    class: Class::Committed,
    reads: Reads::Rows(BATCH_MEMBER_COLUMNS),
    sql: concat!(
        "SET NOCOUNT ON;
DECLARE @batch BINARY(16) = @P1;
DECLARE @left INT = @P2;
DECLARE @members TABLE (
    seq          INT            NOT NULL,
    pillar       TINYINT        NOT NULL,
    id           BINARY(16)     NOT NULL PRIMARY KEY,
    queue        NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    job_type     NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    status       TINYINT        NULL,
    reason       TINYINT        NULL,
    priority     INT            NOT NULL,
    tags         NVARCHAR(1002) COLLATE DATABASE_DEFAULT NOT NULL,
    attempt      INT            NOT NULL,
    created_at   DATETIME2(6)   NOT NULL,
    scheduled_at DATETIME2(6)   NOT NULL,
    started_at   DATETIME2(6)   NULL,
    finished_at  DATETIME2(6)   NULL,
    worker_id    NVARCHAR(255)  COLLATE DATABASE_DEFAULT NULL,
    last_error   NVARCHAR(400)  COLLATE DATABASE_DEFAULT NULL
);

INSERT INTO @members (seq, pillar, id, queue, job_type, status, reason, priority, tags, attempt,
                      created_at, scheduled_at, started_at, finished_at, worker_id, last_error)
SELECT TOP (@left) 0, 0, h.id, h.queue, h.job_type, h.status, NULL, h.priority, h.tags,
       h.attempt, h.created_at, h.scheduled_at, h.started_at, NULL, h.worker_id, h.last_error
FROM [{schema}].[jobs_hot] AS h
WHERE h.batch_id = @batch AND h.batch_id IS NOT NULL
ORDER BY h.id;
SET @left = @left - @@ROWCOUNT;

",
        finished_members!("1", "2", "jobs_dlq", "d", "d.reason"),
        "SET @left = @left - @@ROWCOUNT;

",
        finished_members!("2", "1", "jobs_archive", "a", "NULL"),
        "
SELECT m.pillar, m.id, m.queue, m.job_type, m.status, m.reason, m.priority, m.tags, m.attempt,
       m.created_at, m.scheduled_at, m.started_at, m.finished_at, m.worker_id, m.last_error
FROM @members AS m
ORDER BY m.seq, m.id;"
    ),
};

/// Retention: finished batches older than @P1 seconds, at most @P2 of them. A reopened batch
/// has no `finished_at` and stays.
pub const PRUNE_BATCHES: Statement = Statement {
    name: "prune_batches",
    class: Class::Transition,
    reads: Reads::Rows(&["deleted"]),
    sql: prune_older_rows!("batches", "finished_at <"),
};

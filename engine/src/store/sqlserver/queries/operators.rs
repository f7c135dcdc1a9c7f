//! What operators do to jobs: cancel, resurrect, edit, purge. Id lists come in chunks of at most 500 (the store's
//! `OPERATOR_CHUNK`), so each statement stays below the 1,000-row cap without slicing.

use super::{Class, Reads, Statement};

/// `@id_list`: the distinct ids of the JSON array @P1 (UUID text), as `BINARY(16)`.
macro_rules! id_list {
    () => {
        "DECLARE @ids NVARCHAR(MAX) = @P1;
DECLARE @id_list TABLE (id BINARY(16) NOT NULL PRIMARY KEY);
INSERT INTO @id_list (id)
SELECT DISTINCT u.id FROM OPENJSON(@ids) AS v CROSS APPLY [{schema}].[uuid_bytes](v.[value]) AS u;
"
    };
}

/// @P1 JSON ids, @P2 and @P3 the error kind and message
/// (`FailureReason::Cancelled.store_written()`), @P4 their fingerprint head. Pending or fetched → DLQ `Cancelled` now; processing → `cancel_requested`.
/// A cancelled batch member is a death of its batch. Answers (cancelled, requested).
pub const CANCEL: Statement = Statement {
    name: "cancel",
    class: Class::Transition,
    reads: Reads::Rows(&["cancelled", "requested"]),
    sql: tx!(
        id_list!(),
        generated_error_decl!("4", "@P2", "@P3", "@P4"),
        "
-- Two literal states, each matching a filtered index, not an IN list.
DELETE FROM [{schema}].[jobs_hot] WITH (ROWLOCK)
",
        output_into_moved!(),
        "
FROM @id_list AS i
WHERE i.id = [{schema}].[jobs_hot].id
  AND ([{schema}].[jobs_hot].status = 0 OR [{schema}].[jobs_hot].status = 1);
",
        moved_to_dlq_with_generated_error!(),
        "
UPDATE h SET h.cancel_requested = 1
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK, FORCESEEK), @id_list AS i
WHERE i.id = h.id AND h.status = 2;
DECLARE @requested BIGINT = @@ROWCOUNT;
",
        after_moved_jobs!(),
        "
SELECT (SELECT COUNT_BIG(*) FROM @moved) AS cancelled, @requested AS requested;"
    ),
};

/// @P1 JSON ids, @P2 new payload or NULL, @P3 new tags (stored form) or NULL, @P4 new
/// priority or NULL, @P5 new queue or NULL. DLQ → pending, due now, attempts and worker
/// cleared, error history kept. A key an active job holds now is dropped from the
/// resurrected job (and only the oldest of several resurrected jobs sharing a key keeps it).
/// A resurrected batch member stays a member and reopens its batch. Answers how many moved.
pub const RESURRECT: Statement = Statement {
    name: "resurrect",
    class: Class::Transition,
    reads: Reads::Rows(&["resurrected"]),
    sql: tx!(
        id_list!(),
        "DECLARE @payload NVARCHAR(MAX) = @P2;
DECLARE @tags NVARCHAR(1002) = @P3;
DECLARE @priority INT = @P4;
DECLARE @queue NVARCHAR(255) = @P5;
",
        ledger_decl!(),
        moved_decl!(),
        batch_delta_decl!(),
        "DECLARE @need_queues TABLE (name NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL);
-- A new queue gets its settings row first (lock order); the jobs' own queues have theirs.
INSERT INTO @need_queues (name) SELECT @queue WHERE @queue IS NOT NULL;
",
        ensure_queues!(),
        "
DELETE FROM [{schema}].[jobs_dlq] WITH (ROWLOCK)
OUTPUT ",
        deleted_common_columns!(),
        ", deleted.reason, deleted.fingerprint, deleted.seq INTO @moved (",
        common_columns!(),
        ", reason, fingerprint, seq)
FROM @id_list AS i
WHERE i.id = [{schema}].[jobs_dlq].id;

INSERT INTO [{schema}].[jobs_hot]
    (id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id, created_by,
     created_at, scheduled_at, expires_at, attempt, max_attempts, status, cancel_requested,
     errors, last_error, continuation, original_payload, batch_id, trace_context)
SELECT m.id, ISNULL(@queue, m.queue), m.job_type, ISNULL(@payload, m.payload),
       ISNULL(@tags, m.tags), ISNULL(@priority, m.priority),
       CASE WHEN m.idempotency_key IS NULL THEN NULL
            WHEN k.key_rank > 1 THEN NULL
            WHEN EXISTS (SELECT 1 FROM [{schema}].[jobs_hot] AS h WITH (UPDLOCK, HOLDLOCK, FORCESEEK)
                         WHERE h.idempotency_key = m.idempotency_key
                           AND h.idempotency_key IS NOT NULL) THEN NULL
            ELSE m.idempotency_key END,
       m.correlation_id, m.created_by, m.created_at, @now, m.expires_at, 0, m.max_attempts, 0, 0,
       m.errors, m.last_error, m.continuation,
       CASE WHEN @payload IS NOT NULL THEN ISNULL(m.original_payload, m.payload)
            ELSE m.original_payload END,
       m.batch_id, m.trace_context
FROM @moved AS m
JOIN (SELECT id, ROW_NUMBER() OVER (PARTITION BY idempotency_key ORDER BY seq) AS key_rank
      FROM @moved) AS k ON k.id = m.id;

INSERT INTO @ledger (queue, dlq_delta, reason, fingerprint, job_type)
SELECT m.queue, -1, m.reason, m.fingerprint, m.job_type FROM @moved AS m;
INSERT INTO @ledger (queue, pending_delta)
SELECT ISNULL(@queue, m.queue), 1 FROM @moved AS m;

-- A dead member back in the hot pillar reopens its batch.
INSERT INTO @batch_delta (batch_id, total, succeeded, dead)
SELECT m.batch_id, 0, 0, -COUNT(*) FROM @moved AS m WHERE m.batch_id IS NOT NULL
GROUP BY m.batch_id;
",
        batches_apply!(),
        counters_apply!(),
        error_groups_apply!(),
        "
SELECT COUNT_BIG(*) AS resurrected FROM @moved;"
    ),
};

/// @P1 id, @P2 payload or NULL, @P3 tags (stored form) or NULL, @P4 priority or NULL,
/// @P5 queue or NULL. Edits a pending hot job or a DLQ job in place, keeping the first
/// payload. Answers which pillar changed ('hot', 'dlq') or, when none did, where the job is
/// and its status so the caller can say why.
pub const EDIT_JOB: Statement = Statement {
    name: "edit_job",
    class: Class::Transition,
    reads: Reads::Rows(&["changed", "hot_status", "archived"]),
    sql: tx!(
        "DECLARE @id BINARY(16) = @P1;
DECLARE @payload NVARCHAR(MAX) = @P2;
DECLARE @tags NVARCHAR(1002) = @P3;
DECLARE @priority INT = @P4;
DECLARE @queue NVARCHAR(255) = @P5;
",
        ledger_decl!(),
        "DECLARE @old_queue NVARCHAR(255), @reason TINYINT, @fingerprint CHAR(16);
DECLARE @where NVARCHAR(10) = NULL;
DECLARE @need_queues TABLE (name NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL);
-- A new queue gets its settings row before any job row is touched (lock order), even if the
-- edit then turns out not to apply: an empty settings row is harmless.
INSERT INTO @need_queues (name) SELECT @queue WHERE @queue IS NOT NULL;
",
        ensure_queues!(),
        "
-- The old queue read under the update lock first: Babelfish has no deleted.* in an
-- UPDATE's OUTPUT.
SELECT @old_queue = h.queue
FROM [{schema}].[jobs_hot] AS h WITH (UPDLOCK, ROWLOCK, FORCESEEK)
WHERE h.id = @id AND h.status = 0;
IF @old_queue IS NOT NULL
BEGIN
    UPDATE h
    SET h.payload = ISNULL(@payload, h.payload),
        h.original_payload = CASE WHEN @payload IS NOT NULL THEN ISNULL(h.original_payload, h.payload)
                                  ELSE h.original_payload END,
        h.tags = ISNULL(@tags, h.tags),
        h.priority = ISNULL(@priority, h.priority),
        h.queue = ISNULL(@queue, h.queue)
    FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK, FORCESEEK)
    WHERE h.id = @id;
    SET @where = N'hot';
    -- A pending job moved to another queue moves between those queues' pending counts.
    IF @queue IS NOT NULL AND @queue COLLATE Latin1_General_100_BIN2 <> @old_queue
        INSERT INTO @ledger (queue, pending_delta) VALUES (@old_queue, -1), (@queue, 1);
END
ELSE
BEGIN
    SELECT @old_queue = d.queue, @reason = d.reason, @fingerprint = d.fingerprint
    FROM [{schema}].[jobs_dlq] AS d WITH (UPDLOCK, ROWLOCK, FORCESEEK)
    WHERE d.id = @id;

    UPDATE d
    SET d.payload = ISNULL(@payload, d.payload),
        d.original_payload = CASE WHEN @payload IS NOT NULL THEN ISNULL(d.original_payload, d.payload)
                                  ELSE d.original_payload END,
        d.tags = ISNULL(@tags, d.tags),
        d.priority = ISNULL(@priority, d.priority),
        d.queue = ISNULL(@queue, d.queue)
    FROM [{schema}].[jobs_dlq] AS d WITH (ROWLOCK, FORCESEEK)
    WHERE d.id = @id;
    IF @@ROWCOUNT > 0
    BEGIN
        SET @where = N'dlq';
        -- Moving a dead job to another queue moves it between that queue's counters.
        IF @queue IS NOT NULL AND @queue COLLATE Latin1_General_100_BIN2 <> @old_queue
            INSERT INTO @ledger (queue, dlq_delta, reason, fingerprint)
            VALUES (@old_queue, -1, @reason, @fingerprint), (@queue, 1, @reason, @fingerprint);
    END
END
",
        counters_apply!(),
        error_groups_apply!(),
        "
SELECT @where AS changed,
       (SELECT h.status FROM [{schema}].[jobs_hot] AS h WHERE h.id = @id) AS hot_status,
       CAST(CASE WHEN EXISTS (SELECT 1 FROM [{schema}].[jobs_archive] AS a WHERE a.id = @id)
                 THEN 1 ELSE 0 END AS BIT) AS archived;"
    ),
};

/// @P1 JSON ids. Pending hot jobs only; a purged batch member leaves its batch (which may
/// finish without it). Answers how many went.
pub const PURGE_HOT: Statement = Statement {
    name: "purge_hot",
    class: Class::Transition,
    reads: Reads::Rows(&["purged"]),
    sql: tx!(
        id_list!(),
        ledger_decl!(),
        batch_delta_decl!(),
        "DECLARE @gone TABLE (id       BINARY(16)    NOT NULL PRIMARY KEY,
                     queue    NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
                     batch_id BINARY(16)    NULL);
DELETE FROM [{schema}].[jobs_hot] WITH (ROWLOCK)
OUTPUT deleted.id, deleted.queue, deleted.batch_id INTO @gone (id, queue, batch_id)
FROM @id_list AS i
WHERE i.id = [{schema}].[jobs_hot].id AND [{schema}].[jobs_hot].status = 0;

INSERT INTO @ledger (queue, pending_delta) SELECT g.queue, -1 FROM @gone AS g;
INSERT INTO @batch_delta (batch_id, total, succeeded, dead)
SELECT g.batch_id, -COUNT(*), 0, 0 FROM @gone AS g WHERE g.batch_id IS NOT NULL
GROUP BY g.batch_id;
",
        batches_apply!(),
        counters_apply!(),
        "
SELECT COUNT_BIG(*) AS purged FROM @gone;"
    ),
};

/// @P1 JSON ids. Pending jobs waiting for a later time (delayed or retrying) become due
/// now; the attempt count stays, so no attempt is spent. Answers how many changed.
pub const RUN_NOW: Statement = Statement {
    name: "run_now",
    class: Class::Transition,
    reads: Reads::Rows(&["changed"]),
    sql: tx!(
        id_list!(),
        "DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
UPDATE h SET h.scheduled_at = @now
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK, FORCESEEK), @id_list AS i
WHERE i.id = h.id AND h.status = 0 AND h.scheduled_at > @now;
SELECT CAST(@@ROWCOUNT AS BIGINT) AS changed;"
    ),
};

/// @P1 JSON ids, @P2 the new priority. Pending jobs take it; claimed ones keep theirs.
/// Answers how many changed.
pub const SET_PRIORITY: Statement = Statement {
    name: "set_priority",
    class: Class::Transition,
    reads: Reads::Rows(&["changed"]),
    sql: tx!(
        id_list!(),
        "UPDATE h SET h.priority = @P2
FROM [{schema}].[jobs_hot] AS h WITH (ROWLOCK, FORCESEEK), @id_list AS i
WHERE i.id = h.id AND h.status = 0 AND h.priority <> @P2;
SELECT CAST(@@ROWCOUNT AS BIGINT) AS changed;"
    ),
};

/// @P1 JSON ids.
pub const PURGE_ARCHIVE: Statement = Statement {
    name: "purge_archive",
    class: Class::Transition,
    reads: Reads::Rows(&["purged"]),
    sql: tx!(
        id_list!(),
        ledger_decl!(),
        "
-- Their keys remember the state, so a uniqueness window outlives the purge.
UPDATE u SET u.left_state = 1
FROM [{schema}].[unique_keys] AS u, [{schema}].[jobs_archive] AS a, @id_list AS i
WHERE a.id = u.job_id AND i.id = a.id;
DELETE FROM [{schema}].[jobs_archive] WITH (ROWLOCK)
OUTPUT deleted.queue, -1 INTO @ledger (queue, archive_delta)
FROM @id_list AS i
WHERE i.id = [{schema}].[jobs_archive].id;
",
        counters_apply!(),
        "
SELECT COUNT_BIG(*) AS purged FROM @ledger;"
    ),
};

/// @P1 JSON ids.
pub const PURGE_DLQ: Statement = Statement {
    name: "purge_dlq",
    class: Class::Transition,
    reads: Reads::Rows(&["purged"]),
    sql: tx!(
        id_list!(),
        ledger_decl!(),
        "
UPDATE u SET u.left_state = 2
FROM [{schema}].[unique_keys] AS u, [{schema}].[jobs_dlq] AS d, @id_list AS i
WHERE d.id = u.job_id AND i.id = d.id;
DELETE FROM [{schema}].[jobs_dlq] WITH (ROWLOCK)
OUTPUT deleted.queue, -1, deleted.reason, deleted.fingerprint, deleted.job_type
  INTO @ledger (queue, dlq_delta, reason, fingerprint, job_type)
FROM @id_list AS i
WHERE i.id = [{schema}].[jobs_dlq].id;
",
        counters_apply!(),
        error_groups_apply!(),
        "
SELECT COUNT_BIG(*) AS purged FROM @ledger;"
    ),
};

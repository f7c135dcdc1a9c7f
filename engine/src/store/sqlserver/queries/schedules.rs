//! Recurring schedules: their rows, and the fire that writes one occurrence's key and its job
//! in one transaction (the key's primary key makes it one job across every instance).

use super::{Class, Reads, Statement};

/// Columns of a schedule row (`SqlServerStore::schedule`), in the order statements send them.
pub const SCHEDULE_COLUMNS: &[&str] = &[
    "name",
    "definition",
    "enabled",
    "origin",
    "handled_through",
    "last_scheduled_at",
    "last_job_id",
    "last_skipped",
    "last_manual",
    "last_recorded_at",
    "created_at",
    "updated_at",
];

/// The select of schedule rows (`SCHEDULE_COLUMNS`) from the table as `s`, before its
/// `WHERE` or `ORDER BY`.
macro_rules! schedule_rows {
    () => {
        "SELECT s.name, s.definition, s.enabled, s.origin, s.handled_through, s.last_scheduled_at,
       s.last_job_id, s.last_skipped, s.last_manual, s.last_recorded_at, s.created_at, s.updated_at
FROM [{schema}].[schedules] AS s
"
    };
}

/// `$update` (an `UPDATE s SET …`) of the schedule `@name`, then its row as it is now (no
/// row when there is no such schedule).
macro_rules! update_schedule_named {
    ($update:literal) => {
        concat!(
            $update,
            "
FROM [{schema}].[schedules] AS s
WHERE s.name = @name;
",
            schedule_rows!(),
            "WHERE s.name = @name;"
        )
    };
}

pub const SCHEDULE_RUN_COLUMNS: &[&str] = &["scheduled_at", "manual", "job_id", "recorded_at"];

pub const LIST_SCHEDULES: Statement = Statement {
    name: "list_schedules",
    class: Class::Committed,
    reads: Reads::Rows(SCHEDULE_COLUMNS),
    sql: concat!(
        "SET NOCOUNT ON;
",
        schedule_rows!(),
        "ORDER BY s.name;"
    ),
};

/// @P1 name, @P2 definition (JSON), @P3 enabled, @P4 origin. Answers the row, or no row when
/// the name is taken (nothing written).
pub const CREATE_SCHEDULE: Statement = Statement {
    name: "create_schedule",
    class: Class::Transition,
    reads: Reads::Rows(SCHEDULE_COLUMNS),
    sql: tx!(
        "DECLARE @name NVARCHAR(255) = @P1;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @created INT = 0;
INSERT INTO [{schema}].[schedules]
    (name, definition, enabled, origin, handled_through, created_at, updated_at)
SELECT @name, @P2, @P3, @P4, @now, @now, @now
WHERE NOT EXISTS (SELECT 1 FROM [{schema}].[schedules] AS s WITH (UPDLOCK, HOLDLOCK)
                  WHERE s.name = @name);
SET @created = @@ROWCOUNT;
",
        schedule_rows!(),
        "WHERE s.name = @name AND @created = 1;"
    ),
};

/// @P1 name, @P2 definition (JSON), @P3 origin. The new definition starts from now: the
/// cursor moves up to now, so no occurrence from before the edit is caught up on. No row when
/// there is no such schedule.
pub const REPLACE_SCHEDULE: Statement = Statement {
    name: "replace_schedule",
    class: Class::Transition,
    reads: Reads::Rows(SCHEDULE_COLUMNS),
    sql: tx!(
        "DECLARE @name NVARCHAR(255) = @P1;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
",
        update_schedule_named!(
            "UPDATE s
SET s.definition = @P2,
    s.origin = @P3,
    s.handled_through = CASE WHEN s.handled_through < @now THEN @now ELSE s.handled_through END,
    s.updated_at = @now"
        )
    ),
};

/// @P1 name, @P2 enabled. Resuming moves the cursor up to now: what passed while paused is
/// not caught up on. No row when there is no such schedule.
pub const SET_SCHEDULE_ENABLED: Statement = Statement {
    name: "set_schedule_enabled",
    class: Class::Transition,
    reads: Reads::Rows(SCHEDULE_COLUMNS),
    sql: tx!(
        "DECLARE @name NVARCHAR(255) = @P1;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
",
        update_schedule_named!(
            "UPDATE s
SET s.handled_through = CASE WHEN @P2 = 1 AND s.enabled = 0 AND s.handled_through < @now
                             THEN @now ELSE s.handled_through END,
    s.enabled = @P2,
    s.updated_at = @now"
        )
    ),
};

/// @P1 name. The schedule and its history; its jobs stay.
pub const DELETE_SCHEDULE: Statement = Statement {
    name: "delete_schedule",
    class: Class::Transition,
    reads: Reads::Rows(&["deleted"]),
    sql: tx!("DECLARE @name NVARCHAR(255) = @P1;
DECLARE @deleted BIGINT = 0;
DELETE FROM [{schema}].[schedules] WHERE name = @name;
SET @deleted = @@ROWCOUNT;
DELETE FROM [{schema}].[schedule_runs] WHERE schedule = @name;
SELECT @deleted AS deleted;"),
};

/// One occurrence of a schedule: @P1 name, @P2 scheduled time (NULL: only move the cursor),
/// @P3 manual, @P4 the job's id (BINARY(16)), @P5 the job as `[enqueue_batch]` reads it (a JSON
/// array of one, with that id), @P6 skip while the last job is active, @P7 the cursor's new
/// value (NULL: leave it). The schedule row is locked first, so two instances firing one
/// schedule queue up behind each other; the occurrence's key is looked for under a range
/// lock before it is written. Answers `outcome`: 0 no such schedule, 1 enqueued, 2 handled
/// already, 3 skipped by the overlap policy, 4 the schedule is paused, 5 cursor only.
pub const FIRE_SCHEDULE: Statement = Statement {
    name: "fire_schedule",
    class: Class::Transition,
    reads: Reads::Rows(&["outcome"]),
    sql: tx!(
        "DECLARE @name NVARCHAR(255) = @P1;
DECLARE @at DATETIME2(6) = @P2;
DECLARE @manual BIT = @P3;
DECLARE @job BINARY(16) = @P4;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @outcome TINYINT = 0;
DECLARE @enabled BIT = NULL;
DECLARE @last_job BINARY(16) = NULL;
DECLARE @answer TABLE (id NVARCHAR(36) NOT NULL, created BIT NOT NULL, ord INT NOT NULL PRIMARY KEY);
SELECT @enabled = s.enabled, @last_job = s.last_job_id
FROM [{schema}].[schedules] AS s WITH (UPDLOCK, HOLDLOCK)
WHERE s.name = @name;
IF @enabled IS NOT NULL
    SET @outcome = CASE WHEN @enabled = 0 AND @manual = 0 THEN 4 ELSE 5 END;
IF @outcome = 5 AND @at IS NOT NULL
BEGIN
    IF EXISTS (SELECT 1 FROM [{schema}].[schedule_runs] AS r WITH (UPDLOCK, HOLDLOCK)
               WHERE r.schedule = @name AND r.scheduled_at = @at AND r.manual = @manual)
        SET @outcome = 2;
    ELSE IF @P6 = 1 AND @last_job IS NOT NULL
            AND EXISTS (SELECT 1 FROM [{schema}].[jobs_hot] AS h WHERE h.id = @last_job)
        SET @outcome = 3;
    ELSE
        SET @outcome = 1;
    IF @outcome IN (1, 3)
        INSERT INTO [{schema}].[schedule_runs] (schedule, scheduled_at, manual, job_id, recorded_at)
        VALUES (@name, @at, @manual, CASE WHEN @outcome = 1 THEN @job END, @now);
    IF @outcome = 1
        INSERT INTO @answer (id, created, ord) EXEC [{schema}].[enqueue_batch] @jobs = @P5;
    IF @outcome IN (1, 3)
        UPDATE s
        SET s.last_scheduled_at = @at,
            s.last_job_id = CASE WHEN @outcome = 1 THEN @job ELSE s.last_job_id END,
            s.last_skipped = CASE WHEN @outcome = 3 THEN 1 ELSE 0 END,
            s.last_manual = @manual,
            s.last_recorded_at = @now
        FROM [{schema}].[schedules] AS s
        WHERE s.name = @name;
END
IF @outcome IN (1, 2, 3, 5) AND @P7 IS NOT NULL
    UPDATE s SET s.handled_through = @P7
    FROM [{schema}].[schedules] AS s
    WHERE s.name = @name AND s.handled_through < @P7;
SELECT @outcome AS outcome;"),
};

/// @P1 name, @P2 limit. Newest first.
pub const SCHEDULE_RUNS: Statement = Statement {
    name: "schedule_runs",
    class: Class::Committed,
    reads: Reads::Rows(SCHEDULE_RUN_COLUMNS),
    sql: "SET NOCOUNT ON;
SELECT TOP (@P2) r.scheduled_at, r.manual, r.job_id, r.recorded_at
FROM [{schema}].[schedule_runs] AS r
WHERE r.schedule = @P1
ORDER BY r.recorded_at DESC, r.scheduled_at DESC;",
};

/// @P1 age in seconds, @P2 batch.
pub const PRUNE_SCHEDULE_RUNS: Statement = Statement {
    name: "prune_schedule_runs",
    class: Class::Transition,
    reads: Reads::Rows(&["deleted"]),
    sql: prune_older_rows!("schedule_runs", "recorded_at <"),
};

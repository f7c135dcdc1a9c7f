//! Committed reads of jobs: one job, finished jobs, and the columns of the console's list and
//! preview statements (`job_lists` builds those at run time).

use super::{ANY_JOB_COLUMNS, Class, Reads, Statement};

/// The three pillars as one row shape, `pillar` telling them apart (0 hot, 1 archive, 2
/// DLQ), NULL where a pillar has no such column. `$filter` is each branch's WHERE.
macro_rules! any_pillar {
    ($filter:literal) => {
        concat!(
            "SELECT CAST(0 AS TINYINT) AS pillar, ",
            common_columns!(),
            ", status, cancel_requested, CAST(NULL AS DATETIME2(6)) AS finished_at,
           CAST(NULL AS NVARCHAR(MAX)) AS result, CAST(NULL AS TINYINT) AS reason,
           CAST(NULL AS CHAR(16)) AS fingerprint
    FROM [{schema}].[jobs_hot] WHERE ",
            $filter,
            "
    UNION ALL
    SELECT CAST(1 AS TINYINT), ",
            common_columns!(),
            ", CAST(NULL AS TINYINT), CAST(NULL AS BIT), finished_at, result, CAST(NULL AS TINYINT),
           CAST(NULL AS CHAR(16))
    FROM [{schema}].[jobs_archive] WHERE ",
            $filter,
            "
    UNION ALL
    SELECT CAST(2 AS TINYINT), ",
            common_columns!(),
            ", CAST(NULL AS TINYINT), CAST(NULL AS BIT), finished_at, CAST(NULL AS NVARCHAR(MAX)), reason,
           fingerprint
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
        ", j.status, j.cancel_requested, j.finished_at, j.result, j.reason, j.fingerprint
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
        ", j.status, j.cancel_requested, j.finished_at, j.result, j.reason, j.fingerprint
FROM (
    ",
        any_pillar!("id IN (SELECT id FROM @ids)"),
        "
) AS j
WHERE j.pillar > 0;"
    ),
};

/// Columns of a job list row in each pillar. `job_lists` assembles list, preview and
/// bulk-selection statements around them.
pub const LIST_HOT_COLUMNS: &[&str] = list_column_names!([], ["status"], []);
pub const LIST_ARCHIVE_COLUMNS: &[&str] = list_column_names!([], [], ["finished_at"]);
pub const LIST_DLQ_COLUMNS: &[&str] = list_column_names!([], ["reason"], ["finished_at"]);

/// A bulk preview: the filter's match count on every row, then a sample row (NULLs when the
/// sample is empty, so the count always comes back).
pub const PREVIEW_HOT_COLUMNS: &[&str] = list_column_names!(["matching"], ["status"], []);
pub const PREVIEW_ARCHIVE_COLUMNS: &[&str] = list_column_names!(["matching"], [], ["finished_at"]);
pub const PREVIEW_DLQ_COLUMNS: &[&str] =
    list_column_names!(["matching"], ["reason"], ["finished_at"]);

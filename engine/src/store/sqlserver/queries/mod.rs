//! Every fixed SQL statement of the SQL Server store, with its consistency class (DESIGN §4)
//! and what its caller reads. `[{schema}]` is replaced with the validated schema name; every
//! value is a bound parameter (`@P1`, `@P2`, … aliased to named variables at the top of each
//! batch). Each statement lives in the module named like the store module that sends it
//! (`queries::workers` for `sqlserver::workers`, …); the fragments they share are the macros
//! of `fragments`, and [`ALL`] lists every statement for the server-free rules
//! (`statement_rules`).
//!
//! Shapes used throughout:
//! - Every batch starts with `SET NOCOUNT ON`, and the statement whose rows the caller reads
//!   is the last one (after it only the transaction frame). Rows collected with `OUTPUT … INTO`
//!   a table variable are sent by a `SELECT` from it: `OUTPUT … INTO` sends nothing to the
//!   client. A caller reads one result set; where it needs rows of several kinds they come as
//!   one set with a discriminator column.
//! - Transitions run as one batch: `SET XACT_ABORT ON`, `BEGIN TRY … BEGIN TRANSACTION …
//!   COMMIT`, `CATCH` rolls back and re-throws the original error (so 1205 stays 1205 for the
//!   retry policy). One round trip, so no lock is held while the client thinks.
//! - Locks are taken in one order (README, "Deadlocks"): queues, then jobs (hot, archive,
//!   DLQ) and the batch rows of the members that moved (after the members: a batch row is
//!   locked only by the moves of its members, and the callback jobs it fires are new rows),
//!   then queue counters, then metric rows, then error groups.
//! - No statement writes more than 1,000 rows of a table (id lists are cut into slices of
//!   1,000 with a `WHILE`), below the 5,000 locks per statement at which SQL Server escalates
//!   to a table lock.
//! - Moves between pillars delete first with `OUTPUT deleted.… INTO @moved` and insert from
//!   `@moved`; counters, metric rows and error groups follow from a `@ledger` of what changed,
//!   in the same transaction (`ledger_apply!`). Counter, metric and error-group rows are
//!   striped: each session writes its own slot (`@@SPID % 16`) and readers sum the slots.
//! - A move of batch members also counts them into their batches and fires the callbacks the
//!   new counts make due, in the same transaction (`batches_apply!`), after the jobs and
//!   before the books; moves of other jobs find nothing to count and skip it.
//! - Upserts are update-then-insert under `UPDLOCK, HOLDLOCK` — never `MERGE`.
//! - Id lists travel as one JSON parameter read with `OPENJSON` (SQL Server 2016+,
//!   compatibility level 130+).
//! - Table variables hold at most 1,000 rows per slice and are keyed, so the one-row estimate
//!   SQL Server 2017 gives them yields the plan these batches want anyway (nested loops into
//!   unique seeks); the one large batch, a 10,000-job enqueue, runs in a procedure with temp
//!   tables (statistics, cached across calls). Text columns declare `COLLATE DATABASE_DEFAULT`
//!   (tempdb's collation may differ from the database's) or the binary collation where they
//!   meet queue names, type keys and idempotency keys.
//! - Filtered indexes are matched only by literal predicates (`status = 0`), never by a
//!   parameter or an `IN` list; hot-table reads that must be seeks say `FORCESEEK`.
//! - Only the telemetry class reads with `NOLOCK`.
//! - Written to run on Babelfish for PostgreSQL too (README, "SQL Server", its gap table),
//!   in forms SQL Server plans the same way: an `UPDATE` or `DELETE` of a schema table that
//!   reads another table names it in a comma-separated `FROM` with the join condition in
//!   `WHERE`, never with `JOIN` (Babelfish loses a `JOIN`ed table from an `OUTPUT`, and skips
//!   a target row another session changed while this one waited for its lock; the lint
//!   `writes_join_with_commas` holds it); one with an `OUTPUT` names its table as the target
//!   (`UPDATE [s].[t] WITH (ROWLOCK) … FROM @ids AS i WHERE i.id = [s].[t].id`), never an alias,
//!   which Babelfish runs as the table joined with itself (lint
//!   `writes_with_output_name_their_table`); no write reads a `deleted.` column (Babelfish has
//!   none in an `UPDATE`); ids are `BINARY(16)` parameters, or UUID text inside JSON read with the
//!   schema's `[uuid_bytes]` and written with `[uuid_text]` (no `CONVERT` binary styles);
//!   JSON values are read `AS JSON` where they are JSON, and arrays grow by text
//!   (`json_append!`), not `JSON_MODIFY(…, 'append $', …)`.

/// A job's columns as statements send them (`rows::job`): `$before`, the columns every
/// pillar's row has, then `$after`.
macro_rules! job_column_names {
    ([$($before:literal),*], [$($after:literal),*]) => {
        &[
            $($before,)*
            "id",
            "queue",
            "job_type",
            "payload",
            "tags",
            "priority",
            "idempotency_key",
            "correlation_id",
            "created_by",
            "created_at",
            "scheduled_at",
            "started_at",
            "heartbeat_at",
            "expires_at",
            "attempt",
            "max_attempts",
            "worker_id",
            "errors",
            "last_error",
            "continuation",
            "original_payload",
            "batch_id",
            "trace_context",
            "status",
            "cancel_requested"
            $(, $after)*
        ]
    };
}

/// A job list row's columns (no payload, no error history: a page stays small; read by
/// `rows::summary`): `$before`, then the columns every pillar's list has with the pillar's
/// own ones (`$state`: `status`, `reason`; `$finished`: `finished_at`) in their places.
macro_rules! list_column_names {
    ([$($before:literal),*], [$($state:literal),*], [$($finished:literal),*]) => {
        &[
            $($before,)*
            "id",
            "queue",
            "job_type",
            $($state,)*
            "priority",
            "tags",
            "attempt",
            "created_at",
            "scheduled_at",
            "started_at",
            $($finished,)*
            "worker_id",
            "last_error",
        ]
    };
}

#[macro_use]
mod fragments;

mod batches;
mod bootstrap;
mod maintenance;
mod operators;
mod pool;
mod producers;
mod reads;
mod schedules;
mod telemetry;
mod workers;

pub use batches::*;
pub use bootstrap::*;
pub use maintenance::*;
pub use operators::*;
pub use pool::*;
pub use producers::*;
pub use reads::*;
pub use schedules::*;
pub use telemetry::*;
pub use workers::*;

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

/// What the Rust caller reads from a statement's answer. The server-free rules
/// (`statement_rules`) hold the T-SQL text to it, and the reader (`reader`) checks the
/// answer's metadata against it at run time, so a statement can never be read by position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// No result set at all.
    Nothing,
    /// Exactly one result set, sent by the batch's last statement, with exactly these
    /// columns in this order.
    Rows(&'static [&'static str]),
}

/// One named statement: its text, its consistency class and what its caller reads.
#[derive(Debug, Clone, Copy)]
pub struct Statement {
    pub name: &'static str,
    /// Held to the text by the server-free rules (`statement_rules`) alone: a statement's
    /// class decides its hints and its frame, not how it is sent.
    #[cfg_attr(not(test), allow(dead_code))]
    pub class: Class,
    pub reads: Reads,
    pub sql: &'static str,
}

/// A procedure the migrations create, with what its callers read from it.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub struct ProcedureDecl {
    pub name: &'static str,
    pub reads: Reads,
    /// Whether it runs its own transaction frame (else it hands its work to another
    /// procedure, which does).
    pub frame: bool,
}

/// Every procedure a statement calls, for the server-free rules.
#[cfg(test)]
pub const PROCEDURES: &[ProcedureDecl] = &[
    ProcedureDecl {
        name: "enqueue_batch",
        reads: Reads::Rows(ENQUEUE_COLUMNS),
        frame: true,
    },
    ProcedureDecl {
        name: "enqueue",
        reads: Reads::Rows(ENQUEUE_COLUMNS),
        frame: false,
    },
];

/// Columns of a job read from the hot table (`rows::job`), in the order statements send them.
pub const HOT_JOB_COLUMNS: &[&str] = job_column_names!([], []);
/// A job from any pillar, with the pillar (0 hot, 1 archive, 2 DLQ) as a discriminator and
/// NULL in the columns other pillars do not have (`fingerprint`: a dead letter's error group).
pub const ANY_JOB_COLUMNS: &[&str] = job_column_names!(
    ["pillar"],
    ["finished_at", "result", "reason", "fingerprint"]
);

/// Rows per statement on the job tables: below SQL Server's lock-escalation threshold of
/// 5,000 locks per statement and index, with room to spare. The id-list slices in the T-SQL
/// (`/ 1000`) and the store's claim cap use this number.
pub const MAX_ROWS_PER_STATEMENT: usize = 1_000;

/// Every fixed statement, for the server-free rules.
#[cfg(test)]
pub const ALL: &[Statement] = &[
    SESSION_SETUP,
    PING,
    ENQUEUE,
    CLAIM,
    MARK_PROCESSING,
    HEARTBEAT,
    RELEASE,
    COMPLETE,
    CANCEL,
    RESURRECT,
    EDIT_JOB,
    PURGE_HOT,
    PURGE_ARCHIVE,
    PURGE_DLQ,
    RUN_NOW,
    SET_PRIORITY,
    LIST_QUEUES,
    UPDATE_QUEUE,
    LOAD_SETTINGS,
    SAVE_SETTINGS,
    RESCUE_FETCHED,
    RESCUE_ZOMBIES,
    RESCUE_EXPIRED,
    RESCUE_INSTANCES,
    PRUNE_ARCHIVE,
    PRUNE_DLQ,
    PRUNE_METRICS,
    PRUNE_ERROR_GROUPS,
    PRUNE_AUDIT,
    PRUNE_UNIQUE_KEYS,
    PRUNE_SCHEDULE_RUNS,
    LIST_SCHEDULES,
    CREATE_SCHEDULE,
    REPLACE_SCHEDULE,
    SET_SCHEDULE_ENABLED,
    DELETE_SCHEDULE,
    FIRE_SCHEDULE,
    SCHEDULE_RUNS,
    CREATE_BATCH,
    GET_BATCH,
    LIST_BATCHES,
    BATCH_MEMBERS,
    PRUNE_BATCHES,
    HEARTBEAT_INSTANCE,
    SET_INSTANCE_QUIET,
    DEREGISTER_INSTANCE,
    LIST_INSTANCES,
    APPEND_AUDIT,
    LIST_AUDIT,
    GET_JOB,
    FINISHED_JOBS,
    SUMMARY,
    QUEUE_STATS,
    THROUGHPUT,
    TOP_ERRORS,
    RUN_TIMES,
    PENDING_GROUPS,
    SCHEMA_VERSIONS,
    ROUTINE_VERSIONS,
    CATALOG_COLUMNS,
    CATALOG_INDEXES,
    CATALOG_TABLES,
    CATALOG_ROUTINES,
    CATALOG_DATABASE,
];

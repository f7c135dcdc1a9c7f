//! Enqueue. There is one enqueue in T-SQL: the `[enqueue_batch]` procedure of migration 0002,
//! which the store, `sqlserver::enqueue_in` (a caller's own transaction) and applications in
//! any language call alike.

use super::{Class, Reads, Statement};

/// @P1: JSON array of requests (README, "Enqueue inside your own transaction"). Answers
/// (id, created, ord) per request. The store fixes each job's id before the first attempt,
/// so a retry after an ambiguous failure (connection lost after commit) finds its own rows
/// instead of inserting them twice; the procedure checks idempotency keys with a seek under
/// UPDLOCK, HOLDLOCK.
///
/// The SET options are the ones DML on tables with filtered indexes requires. The store's
/// pooled sessions have them already; a caller's own connection (`enqueue_in`) may not, and
/// inside this batch (sp_executesql) they last only until it ends.
pub const ENQUEUE: Statement = Statement {
    name: "enqueue",
    class: Class::Transition,
    reads: Reads::Rows(ENQUEUE_COLUMNS),
    sql: "SET NOCOUNT ON;
SET ANSI_PADDING ON;
SET ANSI_WARNINGS ON;
SET ARITHABORT ON;
SET CONCAT_NULL_YIELDS_NULL ON;
SET NUMERIC_ROUNDABORT OFF;
EXEC [{schema}].[enqueue_batch] @jobs = @P1;",
};

/// The answer of `[enqueue_batch]` and `[enqueue]`: the job's id as UUID text, whether it was
/// written (0: an active job already held the idempotency key), the request's 0-based index.
pub const ENQUEUE_COLUMNS: &[&str] = &["id", "created", "ord"];

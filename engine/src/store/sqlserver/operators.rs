//! Operator transitions on jobs: cancel, resurrect, edit, purge and the bulk forms of them.
//! Id lists run in transactions of `OPERATOR_CHUNK` ids.

use super::SqlServerStore;
use super::job_lists;
use super::pool::Repeat;
use super::queries::{self, Statement};
use super::reads;
use super::rows::{self, count, ids_json, opt_str, written, written_head};
use crate::error::{StoreError, StoreResult};
use crate::model::{
    Applied, CancelOutcome, FailureReason, HotStatus, Job, JobEdit, JobId, JobState, Pillar,
    StoreWrittenError,
};
use crate::query::{BulkAction, BulkFilterStep, BulkStep, MAX_PAGE_SIZE};
use crate::validation;

/// Ids per transaction for operator actions on id lists (their statements do not slice:
/// a chunk is already below `MAX_ROWS_PER_STATEMENT`).
const OPERATOR_CHUNK: usize = 500;
/// The error a cancel writes, the same text as every backend writes.
const CANCELLED: StoreWrittenError = written(FailureReason::Cancelled);

pub(super) async fn cancel(store: &SqlServerStore, id: JobId) -> StoreResult<CancelOutcome> {
    let (cancelled, requested) = cancel_ids(store, &[id]).await?;
    Ok(if cancelled > 0 {
        CancelOutcome::Cancelled
    } else if requested > 0 {
        CancelOutcome::Requested
    } else {
        CancelOutcome::NotFound
    })
}

pub(super) async fn resurrect(
    store: &SqlServerStore,
    id: JobId,
    edit: Option<JobEdit>,
) -> StoreResult<Applied> {
    match resurrect_ids(store, &[id], edit.as_ref()).await? {
        0 => Err(StoreError::JobNotFound(id)),
        _ => Ok(Applied::Applied),
    }
}

pub(super) async fn edit_job(store: &SqlServerStore, id: JobId, edit: JobEdit) -> StoreResult<Job> {
    let id_bytes = rows::id_param(&id);
    let payload: Option<String> = edit
        .payload
        .as_deref()
        .map(|p| validation::normalize_payload(p).to_string());
    let tags: Option<String> = edit.tags.as_deref().map(rows::tags_to_stored);
    let rows = store
        .rows_of(
            "edit_job",
            Repeat::IfNotApplied,
            &queries::EDIT_JOB,
            &[&id_bytes, &payload, &tags, &edit.priority, &edit.queue],
        )
        .await?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::database("edit_job", "no answer", false))?;
    let changed = opt_str(row, "changed").map_err(|f| store.fault("edit_job", f))?;
    if changed.is_none() {
        let hot = rows::opt_int(row, "hot_status").map_err(|f| store.fault("edit_job", f))?;
        let archived = rows::req_bool(row, "archived").map_err(|f| store.fault("edit_job", f))?;
        let state = match hot.and_then(HotStatus::from_code) {
            Some(status) => JobState::from(status),
            None if archived => JobState::Succeeded,
            None => return Err(StoreError::JobNotFound(id)),
        };
        return Err(StoreError::InvalidState {
            id,
            state,
            action: "edit",
        });
    }
    reads::get_job(store, id)
        .await?
        .ok_or(StoreError::JobNotFound(id))
}

pub(super) async fn purge(
    store: &SqlServerStore,
    source: Pillar,
    ids: &[JobId],
) -> StoreResult<u64> {
    purge_ids(store, source, ids).await
}

pub(super) async fn bulk_by_ids(
    store: &SqlServerStore,
    action: BulkAction,
    source: Pillar,
    ids: &[JobId],
) -> StoreResult<u64> {
    action.check_source(source)?;
    match action {
        BulkAction::Resurrect => resurrect_ids(store, ids, None).await,
        BulkAction::Cancel => {
            let (cancelled, requested) = cancel_ids(store, ids).await?;
            Ok(cancelled + requested)
        }
        BulkAction::Purge => purge_ids(store, source, ids).await,
        BulkAction::RunNow => by_ids(store, "run_now", &queries::RUN_NOW, "changed", ids).await,
        BulkAction::SetPriority(priority) => {
            let mut total = 0;
            for chunk in ids.chunks(OPERATOR_CHUNK) {
                let json = ids_json(chunk);
                total += store
                    .count_of(
                        "set_priority",
                        Repeat::IfNotApplied,
                        &queries::SET_PRIORITY,
                        &[&json, &priority],
                        "changed",
                    )
                    .await?;
            }
            Ok(total)
        }
    }
}

pub(super) async fn bulk_filter_step(
    store: &SqlServerStore,
    step: BulkFilterStep<'_>,
) -> StoreResult<BulkStep> {
    let BulkFilterStep {
        action,
        source,
        filter,
        after,
        limit,
    } = step;
    action.check_source(source)?;
    let built = job_lists::bulk_ids_statement(
        &store.schema,
        source,
        filter,
        action,
        after,
        limit.min(MAX_PAGE_SIZE),
    );
    let rows = store.rows_of_built("bulk_by_filter", &built).await?;
    let ids = store.map_rows("bulk_by_filter", &rows, |r| rows::row_id(r, "id"))?;
    let affected = if ids.is_empty() {
        0
    } else {
        bulk_by_ids(store, action, source, &ids).await?
    };
    Ok(BulkStep {
        selected: u32::try_from(ids.len()).unwrap_or(u32::MAX),
        affected,
        last: ids.last().copied(),
    })
}

/// Operator actions on id lists run in transactions of `OPERATOR_CHUNK` ids: short
/// transactions, well below the 5,000 locks at which SQL Server escalates to a table lock
/// that would stall every worker.
async fn by_ids(
    store: &SqlServerStore,
    operation: &'static str,
    statement: &Statement,
    column: &'static str,
    ids: &[JobId],
) -> StoreResult<u64> {
    let mut total = 0;
    for chunk in ids.chunks(OPERATOR_CHUNK) {
        let json = ids_json(chunk);
        total += store
            .count_of(operation, Repeat::IfNotApplied, statement, &[&json], column)
            .await?;
    }
    Ok(total)
}

async fn cancel_ids(store: &SqlServerStore, ids: &[JobId]) -> StoreResult<(u64, u64)> {
    let (mut cancelled, mut requested) = (0, 0);
    let cancelled_head = written_head(FailureReason::Cancelled, CANCELLED);
    for chunk in ids.chunks(OPERATOR_CHUNK) {
        let json = ids_json(chunk);
        let rows = store
            .rows_of(
                "cancel",
                Repeat::IfNotApplied,
                &queries::CANCEL,
                &[&json, &CANCELLED.kind, &CANCELLED.message, &cancelled_head],
            )
            .await?;
        if let Some(row) = rows.first() {
            cancelled += count(row, "cancelled").map_err(|f| store.fault("cancel", f))?;
            requested += count(row, "requested").map_err(|f| store.fault("cancel", f))?;
        }
    }
    Ok((cancelled, requested))
}

async fn resurrect_ids(
    store: &SqlServerStore,
    ids: &[JobId],
    edit: Option<&JobEdit>,
) -> StoreResult<u64> {
    let payload: Option<String> = edit
        .and_then(|e| e.payload.as_deref())
        .map(|p| validation::normalize_payload(p).to_string());
    let tags: Option<String> = edit
        .and_then(|e| e.tags.as_deref())
        .map(rows::tags_to_stored);
    let priority: Option<i32> = edit.and_then(|e| e.priority);
    let queue: Option<String> = edit.and_then(|e| e.queue.clone());
    let mut total = 0;
    for chunk in ids.chunks(OPERATOR_CHUNK) {
        let json = ids_json(chunk);
        total += store
            .count_of(
                "resurrect",
                Repeat::IfNotApplied,
                &queries::RESURRECT,
                &[&json, &payload, &tags, &priority, &queue],
                "resurrected",
            )
            .await?;
    }
    Ok(total)
}

async fn purge_ids(store: &SqlServerStore, source: Pillar, ids: &[JobId]) -> StoreResult<u64> {
    let statement = match source {
        Pillar::Hot => &queries::PURGE_HOT,
        Pillar::Archive => &queries::PURGE_ARCHIVE,
        Pillar::Dlq => &queries::PURGE_DLQ,
    };
    by_ids(store, "purge", statement, "purged", ids).await
}

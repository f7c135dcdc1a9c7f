//! Batches on SQL Server: a batch and its members written in one transaction
//! (`queries::CREATE_BATCH`), and batch rows read back as `Batch`es. Each member's final move
//! counts it into its batch and fires the callbacks that makes due inside the move's own
//! statement (`batches_apply!` in `queries`), so no move pays a round trip for batches.

use serde::Serialize;

use super::SqlServerStore;
use super::pool::{Fault, Repeat};
use super::producers;
use super::queries;
use super::rows::{self, corrupt, opt_str, req_str};
use crate::batch::{Batch, BatchCallbacks, BatchCreated, BatchEvent, BatchId, BatchRequest};
use crate::error::{StoreError, StoreResult};
use crate::model::{EnqueueRequest, JobId, Pillar};
use crate::query::JobSummary;
use crate::validation;

/// `[batches].[description]` is `NVARCHAR(2000)` (UTF-16 code units): room for the engine's
/// `MAX_DESCRIPTION_CHARS` characters, each at most a surrogate pair, so the operations
/// layer's rule keeps every description within it.
const _: () = assert!(2 * crate::batch::MAX_DESCRIPTION_CHARS <= 2000);
/// Most batches one `list_batches` call reads.
const MAX_LISTED: u32 = 1_000;
/// Most members one `batch_members` call reads (a batch has at most this many).
const MAX_MEMBERS: u32 = validation::MAX_BATCH as u32;

/// The job a callback enqueues, as the member move that fires it reads it (`batches_apply!`,
/// with `OPENJSON … WITH`): made by `Batch::callback_job` when the batch is created, so the
/// engine alone decides what a callback job is; the move fills in the payload's counts
/// (`total`, `succeeded`, `dead`) as of the move, written in front of the other members.
/// `callback_job` sets no other request field
/// (`tests::a_callback_job_needs_only_the_fields_the_move_writes`).
#[derive(Serialize)]
struct CallbackJob<'a> {
    queue: &'a str,
    job_type: &'a str,
    /// A JSON object with at least one member and without the counts, nested (read `AS JSON`;
    /// see `rows::JsonText`).
    payload: serde_json::Map<String, serde_json::Value>,
    /// The stored form (`,a,b,`).
    tags: String,
    priority: i32,
    max_attempts: Option<i32>,
    created_by: Option<&'a str>,
}

fn callback_request(job: &EnqueueRequest) -> StoreResult<String> {
    let mut payload = match serde_json::from_str(validation::normalize_payload(&job.payload)) {
        Ok(serde_json::Value::Object(members)) => members,
        _ => {
            return Err(StoreError::database(
                "encode batch callback",
                "a callback job's payload is not a JSON object",
                false,
            ));
        }
    };
    for count in ["total", "succeeded", "dead"] {
        payload.remove(count);
    }
    if payload.is_empty() {
        return Err(StoreError::database(
            "encode batch callback",
            "a callback job's payload has no member besides the counts",
            false,
        ));
    }
    let doc = CallbackJob {
        queue: &job.queue,
        job_type: &job.job_type,
        payload,
        tags: rows::tags_to_stored(&job.tags),
        priority: job.priority,
        max_attempts: job
            .max_attempts
            .map(|m| i32::try_from(m).unwrap_or(i32::MAX)),
        created_by: job.created_by.as_deref(),
    };
    serde_json::to_string(&doc).map_err(|e| StoreError::database("encode batch callback", e, false))
}

/// A batch id as its `BINARY(16)` parameter (RFC 4122 order, as job ids).
fn batch_param(id: BatchId) -> Vec<u8> {
    id.0.as_bytes().to_vec()
}

fn count32(row: &tiberius::Row, col: &str) -> Result<u32, Fault> {
    Ok(u32::try_from(rows::req_int(row, col)?.max(0)).unwrap_or(u32::MAX))
}

/// A batch row (`queries::BATCH_COLUMNS`).
fn batch(row: &tiberius::Row) -> Result<Batch, Fault> {
    let id = BatchId(rows::row_id(row, "id")?.0);
    let callbacks: BatchCallbacks =
        serde_json::from_str(&req_str(row, "callbacks")?).map_err(|e| {
            corrupt(format!(
                "batch {id} has a callback list this version cannot read: {e}"
            ))
        })?;
    let fired = |col: &str| -> Result<Option<JobId>, Fault> {
        match row.try_get::<&[u8], _>(col)? {
            Some(bytes) => rows::id_from_bytes(bytes).map(Some),
            None => Ok(None),
        }
    };
    Ok(Batch {
        id,
        description: opt_str(row, "description")?,
        created_by: opt_str(row, "created_by")?,
        created_at: rows::req_time(row, "created_at")?,
        total: count32(row, "total")?,
        succeeded: count32(row, "succeeded")?,
        dead: count32(row, "dead")?,
        finished_at: rows::opt_time(row, "finished_at")?,
        callbacks,
        success_job_id: fired("success_job_id")?,
        complete_job_id: fired("complete_job_id")?,
        death_job_id: fired("death_job_id")?,
    })
}

/// The batch row and every member in one transaction; ids are fixed before the first
/// attempt, so the statement may run again after an ambiguous failure (it then finds what
/// it wrote).
pub(super) async fn create(store: &SqlServerStore, req: BatchRequest) -> StoreResult<BatchCreated> {
    let id = BatchId::new();
    let job_ids: Vec<JobId> = req.jobs.iter().map(|_| JobId::new()).collect();
    let members = producers::request_json(&req.jobs, Some(&job_ids))?;
    // The callbacks' jobs, made by the engine from the batch as created; only the counts
    // in their payloads change before one fires.
    let shell = Batch {
        id,
        description: req.description.clone(),
        created_by: req.created_by.clone(),
        created_at: chrono::Utc::now(),
        total: u32::try_from(req.jobs.len()).unwrap_or(u32::MAX),
        succeeded: 0,
        dead: 0,
        finished_at: None,
        callbacks: req.callbacks.clone(),
        success_job_id: None,
        complete_job_id: None,
        death_job_id: None,
    };
    let request = |event: BatchEvent| -> StoreResult<Option<String>> {
        shell
            .callback_job(event)
            .map(|job| callback_request(&job))
            .transpose()
    };
    let success = request(BatchEvent::Success)?;
    let complete = request(BatchEvent::Complete)?;
    let death = request(BatchEvent::Death)?;
    let callbacks = serde_json::to_string(&req.callbacks)
        .map_err(|e| StoreError::database("encode batch callbacks", e, false))?;
    let id_bytes = batch_param(id);
    let params: [&dyn tiberius::ToSql; 8] = [
        &id_bytes,
        &req.description,
        &req.created_by,
        &callbacks,
        &success,
        &complete,
        &death,
        &members,
    ];
    // A duplicate key is transient here as for an enqueue: a retry racing the attempt it
    // repeats (still running on the server) meets that attempt's rows, and the next one
    // finds them committed.
    let rows = store
        .rows_of_keyed("create_batch", &queries::CREATE_BATCH, &params)
        .await?;
    let row = rows.first().ok_or_else(|| {
        StoreError::database("create_batch", "the batch row just written is gone", false)
    })?;
    let batch = batch(row).map_err(|f| store.fault("create_batch", f))?;
    Ok(BatchCreated { batch, job_ids })
}

pub(super) async fn get(store: &SqlServerStore, id: BatchId) -> StoreResult<Option<Batch>> {
    let id_bytes = batch_param(id);
    let rows = store
        .rows_of(
            "get_batch",
            Repeat::Always,
            &queries::GET_BATCH,
            &[&id_bytes],
        )
        .await?;
    rows.first()
        .map(|r| batch(r).map_err(|f| store.fault("get_batch", f)))
        .transpose()
}

/// Newest first; `before` pages back.
pub(super) async fn list(
    store: &SqlServerStore,
    before: Option<BatchId>,
    limit: u32,
) -> StoreResult<Vec<Batch>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let before = before.map(batch_param);
    let top = i64::from(limit.min(MAX_LISTED));
    let rows = store
        .rows_of(
            "list_batches",
            Repeat::Always,
            &queries::LIST_BATCHES,
            &[&before, &top],
        )
        .await?;
    store.map_rows("list_batches", &rows, batch)
}

/// Active members first, then dead, then succeeded, in id order within a pillar.
pub(super) async fn members(
    store: &SqlServerStore,
    id: BatchId,
    limit: u32,
) -> StoreResult<Vec<JobSummary>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let id_bytes = batch_param(id);
    let top = i32::try_from(limit.min(MAX_MEMBERS)).unwrap_or(i32::MAX);
    let rows = store
        .rows_of(
            "batch_members",
            Repeat::Always,
            &queries::BATCH_MEMBERS,
            &[&id_bytes, &top],
        )
        .await?;
    store.map_rows("batch_members", &rows, |r| {
        let pillar = match rows::req_int(r, "pillar")? {
            0 => Pillar::Hot,
            1 => Pillar::Archive,
            2 => Pillar::Dlq,
            other => return Err(corrupt(format!("unknown pillar {other}"))),
        };
        rows::summary(r, pillar)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::BatchCallback;

    fn shell(callbacks: BatchCallbacks) -> Batch {
        Batch {
            id: BatchId::new(),
            description: Some("monthly \"report\"".into()),
            created_by: None,
            created_at: chrono::Utc::now(),
            total: 3,
            succeeded: 0,
            dead: 0,
            finished_at: None,
            callbacks,
            success_job_id: None,
            complete_job_id: None,
            death_job_id: None,
        }
    }

    /// The move writes a callback job from the fields of `CallbackJob` alone (and the
    /// defaults of every other column): should `callback_job` set another request field, this
    /// fails, and `CallbackJob` and `batches_apply!` need it too.
    #[test]
    fn a_callback_job_needs_only_the_fields_the_move_writes() {
        let mut cb = BatchCallback::new("reports", "summary").with_payload(r#"{"r":7}"#);
        cb.priority = 4;
        cb.max_attempts = Some(2);
        let b = shell(BatchCallbacks {
            on_complete: Some(cb),
            ..Default::default()
        });
        let job = b.callback_job(BatchEvent::Complete).expect("configured");
        let only_these = EnqueueRequest {
            queue: job.queue.clone(),
            job_type: job.job_type.clone(),
            payload: job.payload.clone(),
            tags: job.tags.clone(),
            priority: job.priority,
            max_attempts: job.max_attempts,
            created_by: job.created_by.clone(),
            ..Default::default()
        };
        assert_eq!(job, only_these);

        let doc: serde_json::Value =
            serde_json::from_str(&callback_request(&job).unwrap()).unwrap();
        assert_eq!(doc["queue"], "reports");
        assert_eq!(doc["job_type"], "summary");
        assert_eq!(doc["priority"], 4);
        assert_eq!(doc["max_attempts"], 2);
        assert_eq!(doc["tags"], format!(",batch:{},", b.id));
        assert_eq!(doc["created_by"], format!("batch {} on_complete", b.id));
        // The payload is a nested object without the counts: the move writes them in front
        // of its members, so a count left in it would be a duplicate key.
        let payload = doc["payload"].as_object().expect("an object");
        for count in ["total", "succeeded", "dead"] {
            assert!(!payload.contains_key(count), "{count} is left to the move");
        }
        assert_eq!(payload["args"]["r"], 7);
        assert_eq!(payload["event"], "complete");
        assert_eq!(payload["description"], "monthly \"report\"");
    }

    /// The due rule of `batches_apply!` is `Batch::due_callbacks`, written in T-SQL. If one of
    /// these cases changes, the statement's predicates must change with it.
    #[test]
    fn the_due_rule_in_t_sql_is_the_engines() {
        use crate::batch::tests::batch;
        // on_death: this move killed a member (newly_dead) and the batch has a death.
        assert_eq!(batch(3, 1, 1).due_callbacks(true), [BatchEvent::Death]);
        assert!(batch(3, 1, 1).due_callbacks(false).is_empty());
        // on_success: succeeded = total; on_complete: succeeded + dead = total.
        assert_eq!(
            batch(2, 2, 0).due_callbacks(false),
            [BatchEvent::Success, BatchEvent::Complete]
        );
        assert_eq!(batch(2, 1, 1).due_callbacks(false), [BatchEvent::Complete]);
        // A fired callback stays fired.
        let mut fired = batch(2, 2, 0);
        fired.complete_job_id = Some(crate::model::JobId::new());
        assert_eq!(fired.due_callbacks(false), [BatchEvent::Success]);
        let sql = queries::COMPLETE.sql;
        for predicate in [
            "a.event = 1 AND a.newly_dead = 1 AND a.dead > 0",
            "b.death_request IS NOT NULL AND b.death_job_id IS NULL",
            "a.event = 2 AND a.succeeded = a.total",
            "b.success_request IS NOT NULL AND b.success_job_id IS NULL",
            "a.event = 3 AND a.succeeded + a.dead = a.total",
            "b.complete_request IS NOT NULL AND b.complete_job_id IS NULL",
            "CASE WHEN d.dead > 0 THEN 1 ELSE 0 END",
        ] {
            assert!(sql.contains(predicate), "missing {predicate}");
        }
    }
}

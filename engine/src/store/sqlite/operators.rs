//! Operator transitions: cancel, resurrect, edit, purge and the bulk forms of them.

use std::collections::{BTreeMap, HashMap};

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{StoreError, StoreResult};
use crate::model::{
    Applied, CancelOutcome, FailureReason, HotStatus, Job, JobEdit, JobId, JobState, Pillar,
};
use crate::query::{BulkAction, BulkStep, JobFilter};
use crate::validation::normalize_payload;

use super::batches::{self, BatchDelta};
use super::codec::{encode_tags, id_text, ids_json, job_from_row, select_job, to_json};
use super::connection::db_err;
use super::moves::{DeadError, bump_counters, delete_archive, delete_dlq, move_to_dlq};
use super::producers::{NewJob, ensure_queues, insert_jobs, key_is_held};
use super::reads::{get_job, matching_ids};

fn hot_status(conn: &Connection, id: JobId) -> StoreResult<Option<(HotStatus, bool)>> {
    let row: Option<(i64, i64)> = conn
        .prepare_cached("SELECT status, cancel_requested FROM jobs WHERE id = ?1")
        .map_err(db_err("read job state"))?
        .query_row([id_text(id)], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(db_err("read job state"))?;
    Ok(row.and_then(|(s, c)| HotStatus::from_code(s).map(|s| (s, c != 0))))
}

fn exists_in(conn: &Connection, pillar: Pillar, id: JobId) -> StoreResult<bool> {
    let sql = match pillar {
        Pillar::Hot => "SELECT 1 FROM jobs WHERE id = ?1",
        Pillar::Archive => "SELECT 1 FROM archive WHERE id = ?1",
        Pillar::Dlq => "SELECT 1 FROM dlq WHERE id = ?1",
    };
    conn.prepare_cached(sql)
        .map_err(db_err("read job state"))?
        .query_row([id_text(id)], |_| Ok(()))
        .optional()
        .map(|o| o.is_some())
        .map_err(db_err("read job state"))
}

pub(crate) fn cancel(conn: &Connection, id: JobId, now: i64) -> StoreResult<CancelOutcome> {
    match hot_status(conn, id)? {
        None => Ok(CancelOutcome::NotFound),
        Some((HotStatus::Processing, _)) => {
            conn.prepare_cached(
                "UPDATE jobs SET cancel_requested = 1 WHERE id = ?1 AND status = 2",
            )
            .map_err(db_err("cancel"))?
            .execute([id_text(id)])
            .map_err(db_err("cancel"))?;
            Ok(CancelOutcome::Requested)
        }
        Some(_) => {
            let moved = move_to_dlq(
                conn,
                "id = ?10 AND status IN (0, 1)",
                &[Value::Text(id_text(id))],
                FailureReason::Cancelled,
                DeadError::written_for(FailureReason::Cancelled),
                0,
                now,
            )?;
            Ok(if moved.is_empty() {
                CancelOutcome::NotFound
            } else {
                CancelOutcome::Cancelled
            })
        }
    }
}

fn apply_edit(job: &mut Job, edit: &JobEdit) {
    if let Some(payload) = &edit.payload {
        if job.original_payload.is_none() {
            job.original_payload = Some(job.payload.clone());
        }
        job.payload = normalize_payload(payload).to_string();
    }
    if let Some(tags) = &edit.tags {
        job.tags = tags.clone();
    }
    if let Some(priority) = edit.priority {
        job.priority = priority;
    }
    if let Some(queue) = &edit.queue {
        job.queue = queue.clone();
    }
}

fn read_dlq(conn: &Connection, id: JobId) -> StoreResult<Option<Job>> {
    let sql = format!("{} WHERE id = ?1", select_job(Pillar::Dlq));
    conn.prepare_cached(&sql)
        .map_err(db_err("read DLQ job"))?
        .query_row([id_text(id)], |r| job_from_row(Pillar::Dlq, r))
        .optional()
        .map_err(db_err("read DLQ job"))
}

pub(crate) fn resurrect(
    conn: &Connection,
    id: JobId,
    edit: Option<&JobEdit>,
    now: i64,
) -> StoreResult<Applied> {
    let Some(mut job) = read_dlq(conn, id)? else {
        return Err(StoreError::JobNotFound(id));
    };
    if let Some(edit) = edit {
        apply_edit(&mut job, edit);
    }
    // The key may have been taken by a newer active job meanwhile: the resurrected job
    // gives it up rather than failing.
    let key = match job.idempotency_key.take() {
        Some(k) if !key_is_held(conn, &k)? => Some(k),
        _ => None,
    };
    let errors = if job.errors.is_empty() {
        None
    } else {
        Some(to_json(&job.errors)?)
    };
    let row = NewJob {
        id: id_text(job.id),
        queue: job.queue.clone(),
        job_type: job.job_type,
        payload: job.payload,
        tags: encode_tags(&job.tags),
        priority: i64::from(job.priority),
        idempotency_key: key,
        correlation_id: job.correlation_id,
        created_by: job.created_by,
        created_at: super::codec::to_us(job.created_at),
        scheduled_at: now,
        // A deadline already passed would send it straight back to the DLQ.
        expires_at: job
            .expires_at
            .map(super::codec::to_us)
            .filter(|at| *at > now),
        max_attempts: job.max_attempts.map(i64::from),
        continuation: job.continuation.as_ref().map(to_json).transpose()?,
        last_error: job.errors.last().map(|e| e.message.clone()),
        errors,
        original_payload: job.original_payload,
        batch_id: job.batch_id.map(|b| id_text(JobId(b.0))),
        trace_context: job.trace_context,
    };
    let batch = row.batch_id.clone();
    delete_dlq(conn, "id = ?1", &[Value::Text(id_text(id))], now)?;
    ensure_queues(conn, [job.queue.as_str()], now)?;
    insert_jobs(conn, vec![row])?;
    // A dead member back in the hot pillar reopens its batch.
    if let Some(batch) = batch {
        let reopen = BatchDelta {
            dead: -1,
            ..BatchDelta::default()
        };
        batches::apply(conn, &batch, reopen, now)?;
    }
    Ok(Applied::Applied)
}

pub(crate) fn edit_job(conn: &Connection, id: JobId, edit: &JobEdit, now: i64) -> StoreResult<Job> {
    let payload = edit.payload.as_deref().map(normalize_payload);
    let tags = edit.tags.as_deref().map(encode_tags);
    let priority = edit.priority.map(i64::from);
    let queue = edit.queue.as_deref();
    const SET: &str = "payload = coalesce(?1, payload), \
         original_payload = CASE WHEN ?1 IS NOT NULL THEN coalesce(original_payload, payload) \
                                 ELSE original_payload END, \
         tags = coalesce(?2, tags), priority = coalesce(?3, priority), queue = coalesce(?4, queue)";
    match hot_status(conn, id)? {
        Some((HotStatus::Pending, _)) => {
            if let Some(q) = queue {
                ensure_queues(conn, [q], now)?;
            }
            conn.prepare_cached(&format!(
                "UPDATE jobs SET {SET} WHERE id = ?5 AND status = 0"
            ))
            .map_err(db_err("edit job"))?
            .execute(params![payload, tags, priority, queue, id_text(id)])
            .map_err(db_err("edit job"))?;
        }
        Some((status, _)) => {
            return Err(StoreError::InvalidState {
                id,
                state: JobState::from(status),
                action: "edit",
            });
        }
        None => {
            let old_queue: Option<String> = conn
                .prepare_cached("SELECT queue FROM dlq WHERE id = ?1")
                .map_err(db_err("edit job"))?
                .query_row([id_text(id)], |r| r.get(0))
                .optional()
                .map_err(db_err("edit job"))?;
            let Some(old_queue) = old_queue else {
                if exists_in(conn, Pillar::Archive, id)? {
                    return Err(StoreError::InvalidState {
                        id,
                        state: JobState::Succeeded,
                        action: "edit",
                    });
                }
                return Err(StoreError::JobNotFound(id));
            };
            conn.prepare_cached(&format!("UPDATE dlq SET {SET} WHERE id = ?5"))
                .map_err(db_err("edit job"))?
                .execute(params![payload, tags, priority, queue, id_text(id)])
                .map_err(db_err("edit job"))?;
            if let Some(q) = queue.filter(|q| *q != old_queue) {
                ensure_queues(conn, [q], now)?;
                let mut deltas = HashMap::new();
                deltas.insert(old_queue, (0, -1));
                deltas.insert(q.to_string(), (0, 1));
                bump_counters(conn, &deltas)?;
            }
        }
    }
    get_job(conn, id)?.ok_or(StoreError::JobNotFound(id))
}

pub(crate) fn purge(
    conn: &Connection,
    source: Pillar,
    ids: &[JobId],
    now: i64,
) -> StoreResult<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let json = Value::Text(ids_json(ids));
    match source {
        Pillar::Hot => {
            let gone: Vec<Option<String>> = conn
                .prepare_cached(
                    "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?1)) AND status = 0 \
                     RETURNING batch_id",
                )
                .map_err(db_err("purge"))?
                .query_map([json], |r| r.get(0))
                .map_err(db_err("purge"))?
                .collect::<Result<_, _>>()
                .map_err(db_err("purge"))?;
            // A purged pending member leaves its batch (which may finish without it).
            let mut left: BTreeMap<&str, i64> = BTreeMap::new();
            for batch in gone.iter().flatten() {
                *left.entry(batch.as_str()).or_default() -= 1;
            }
            for (batch, total) in left {
                let delta = BatchDelta {
                    total,
                    ..BatchDelta::default()
                };
                batches::apply(conn, batch, delta, now)?;
            }
            Ok(gone.len() as u64)
        }
        Pillar::Archive => delete_archive(conn, "id IN (SELECT value FROM json_each(?1))", &[json]),
        Pillar::Dlq => delete_dlq(
            conn,
            "id IN (SELECT value FROM json_each(?1))",
            &[json],
            now,
        ),
    }
}

pub(crate) fn bulk_by_ids(
    conn: &Connection,
    action: BulkAction,
    source: Pillar,
    ids: &[JobId],
    now: i64,
) -> StoreResult<u64> {
    action.check_source(source)?;
    match action {
        BulkAction::Purge => purge(conn, source, ids, now),
        BulkAction::Resurrect => {
            let mut n = 0;
            for id in ids {
                match resurrect(conn, *id, None, now) {
                    Ok(_) => n += 1,
                    Err(StoreError::JobNotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(n)
        }
        BulkAction::Cancel => {
            let mut n = 0;
            for id in ids {
                if cancel(conn, *id, now)? != CancelOutcome::NotFound {
                    n += 1;
                }
            }
            Ok(n)
        }
        BulkAction::RunNow => run_now(conn, ids, now),
        BulkAction::SetPriority(priority) => set_priority(conn, ids, priority),
    }
}

/// Pending jobs waiting for a later time become due now. The attempt count stays: a retry
/// brought forward is the same retry, not a new attempt.
fn run_now(conn: &Connection, ids: &[JobId], now: i64) -> StoreResult<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let changed = conn
        .prepare_cached(
            "UPDATE jobs SET scheduled_at = ?2 \
             WHERE id IN (SELECT value FROM json_each(?1)) AND status = 0 AND scheduled_at > ?2",
        )
        .map_err(db_err("run now"))?
        .execute(params![ids_json(ids), now])
        .map_err(db_err("run now"))?;
    Ok(changed as u64)
}

/// Pending jobs take a new priority; claimed ones keep theirs (they are already out of the
/// queue's order).
fn set_priority(conn: &Connection, ids: &[JobId], priority: i32) -> StoreResult<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let changed = conn
        .prepare_cached(
            "UPDATE jobs SET priority = ?2 \
             WHERE id IN (SELECT value FROM json_each(?1)) AND status = 0 AND priority <> ?2",
        )
        .map_err(db_err("set priority"))?
        .execute(params![ids_json(ids), i64::from(priority)])
        .map_err(db_err("set priority"))?;
    Ok(changed as u64)
}

/// One bounded step of a bulk action over a filter: select up to `limit` matching rows the
/// action still changes, apply it, in one transaction. Returns (selected, affected).
pub(crate) fn bulk_filter_step(
    conn: &Connection,
    action: BulkAction,
    source: Pillar,
    filter: &JobFilter,
    after: Option<JobId>,
    limit: u32,
    now: i64,
) -> StoreResult<BulkStep> {
    action.check_source(source)?;
    // Rows the action leaves in place are not selected: a step changes what it selects.
    let extra: (&str, Vec<Value>) = match (action, source) {
        (BulkAction::Purge, Pillar::Hot) => ("status = 0", vec![]),
        (BulkAction::Cancel, _) => ("(status IN (0, 1) OR cancel_requested = 0)", vec![]),
        (BulkAction::RunNow, _) => ("status = 0 AND scheduled_at > ?", vec![Value::Integer(now)]),
        (BulkAction::SetPriority(p), _) => (
            "status = 0 AND priority <> ?",
            vec![Value::Integer(i64::from(p))],
        ),
        _ => ("1", vec![]),
    };
    let ids = matching_ids(conn, source, filter, extra, after, limit)?;
    let affected = bulk_by_ids(conn, action, source, &ids, now)?;
    Ok(BulkStep {
        selected: u32::try_from(ids.len()).unwrap_or(u32::MAX),
        affected,
        last: ids.last().copied(),
    })
}

//! Moves between pillars and the bookkeeping that must share their transaction: per-queue
//! counters, per-minute metric buckets, DLQ error groups (error_groups.rs) and continuations.

use std::collections::HashMap;

use chrono::SecondsFormat;
use rusqlite::types::Value;
use rusqlite::{Connection, params};

use crate::error::StoreResult;
use crate::fingerprint::FingerprintHead;
use crate::model::{Continuation, EnqueueRequest, FailureReason, JobId};

use super::batches::advance_batches;
use super::codec::{from_us, minute_of};
use super::connection::db_err;
use super::error_groups::{GroupDelta, bump_error_groups, sample_of};
use super::producers::{NewJob, ensure_queues, insert_jobs};

/// Per (queue, minute) deltas, written with one upsert per queue.
#[derive(Default)]
pub(crate) struct MetricDelta {
    pub succeeded: i64,
    pub failed: i64,
    pub retried: i64,
    pub duration_sum_ms: i64,
    pub duration_max_ms: i64,
}

pub(crate) fn bump_metrics(
    conn: &Connection,
    now: i64,
    deltas: &HashMap<String, MetricDelta>,
) -> StoreResult<()> {
    if deltas.is_empty() {
        return Ok(());
    }
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO metric_buckets (queue, minute, succeeded, failed, retried, \
                 duration_sum_ms, duration_max_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
             ON CONFLICT (queue, minute) DO UPDATE SET \
                 succeeded = succeeded + excluded.succeeded, \
                 failed = failed + excluded.failed, \
                 retried = retried + excluded.retried, \
                 duration_sum_ms = duration_sum_ms + excluded.duration_sum_ms, \
                 duration_max_ms = max(duration_max_ms, excluded.duration_max_ms)",
        )
        .map_err(db_err("update metrics"))?;
    let minute = minute_of(now);
    for (queue, d) in deltas {
        stmt.execute(params![
            queue,
            minute,
            d.succeeded,
            d.failed,
            d.retried,
            d.duration_sum_ms,
            d.duration_max_ms
        ])
        .map_err(db_err("update metrics"))?;
    }
    Ok(())
}

/// Runs that ended, per (job type, run-time bin): one upsert each into this minute's
/// `run_time_bins`.
pub(crate) type RunTimeDelta = HashMap<(String, u16), i64>;

pub(crate) fn bump_run_times(
    conn: &Connection,
    now: i64,
    deltas: &RunTimeDelta,
) -> StoreResult<()> {
    if deltas.is_empty() {
        return Ok(());
    }
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO run_time_bins (minute, job_type, bin, runs) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (minute, job_type, bin) DO UPDATE SET runs = runs + excluded.runs",
        )
        .map_err(db_err("update run times"))?;
    let minute = minute_of(now);
    for ((job_type, bin), runs) in deltas {
        stmt.execute(params![minute, job_type, bin, runs])
            .map_err(db_err("update run times"))?;
    }
    Ok(())
}

/// Add (or with negative numbers, remove) archive and DLQ rows from queues' counters.
pub(crate) fn bump_counters(
    conn: &Connection,
    deltas: &HashMap<String, (i64, i64)>,
) -> StoreResult<()> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO queue_counters (queue, archive_rows, dlq_rows) VALUES (?1, ?2, ?3) \
             ON CONFLICT (queue) DO UPDATE SET \
                 archive_rows = archive_rows + excluded.archive_rows, \
                 dlq_rows = dlq_rows + excluded.dlq_rows",
        )
        .map_err(db_err("update counters"))?;
    for (queue, (archive, dlq)) in deltas {
        if *archive != 0 || *dlq != 0 {
            stmt.execute(params![queue, archive, dlq])
                .map_err(db_err("update counters"))?;
        }
    }
    Ok(())
}

/// A job that just reached a final state, as far as its continuation needs to know.
pub(crate) struct Finished {
    pub id: String,
    pub succeeded: bool,
    pub reason: Option<FailureReason>,
    pub error: Option<String>,
    pub result: Option<String>,
    pub continuation: Option<String>,
    pub correlation_id: Option<String>,
    pub batch_id: Option<String>,
}

/// Enqueue the continuations whose trigger fires, in the caller's transaction.
pub(crate) fn enqueue_continuations(
    conn: &Connection,
    finished: &[Finished],
    now: i64,
) -> StoreResult<()> {
    let mut rows = Vec::new();
    for f in finished {
        let Some(text) = &f.continuation else {
            continue;
        };
        // A continuation that no longer parses was written by another version; skip it
        // rather than fail the parent's final transition.
        let Ok(cont) = serde_json::from_str::<Continuation>(text) else {
            tracing::warn!(job = %f.id, "ignoring unreadable continuation");
            continue;
        };
        if !cont.trigger.fires_for(f.succeeded) {
            continue;
        }
        let result = f.result.as_deref().map(|r| {
            serde_json::from_str::<serde_json::Value>(r)
                .unwrap_or_else(|_| serde_json::Value::String(r.to_string()))
        });
        let payload = serde_json::json!({
            "parent_id": f.id,
            "outcome": if f.succeeded { "succeeded" } else { "dead" },
            "reason": f.reason.map(FailureReason::as_str),
            "error": f.error,
            "result": result,
        });
        let req = EnqueueRequest {
            queue: cont.queue,
            job_type: cont.job_type,
            payload: payload.to_string(),
            correlation_id: f.correlation_id.clone(),
            created_by: Some(format!("continuation of {}", f.id)),
            ..Default::default()
        };
        rows.push(NewJob::from_request(req, JobId::new(), now)?);
    }
    if rows.is_empty() {
        return Ok(());
    }
    ensure_queues(conn, rows.iter().map(|r| r.queue.as_str()), now)?;
    insert_jobs(conn, rows)
}

/// The error a move to the DLQ records with the job.
pub(crate) enum DeadError<'a> {
    /// The worker's own `AttemptError`, as JSON, and its message.
    Given { json: &'a str, message: &'a str },
    /// Written by the store (cancel, zombie, expiry): kind and message.
    Store { kind: &'static str, message: String },
}

impl DeadError<'_> {
    /// The text every backend writes for a reason only a store decides.
    pub(crate) fn written_for(reason: FailureReason) -> Self {
        let written = reason.store_written();
        DeadError::Store {
            kind: written.map_or("store", |w| w.kind),
            message: written
                .map_or("moved to the dead-letter queue by the store", |w| w.message)
                .to_string(),
        }
    }
}

/// Move hot rows matching `where_sql` (fixed SQL from this module's callers; its
/// parameters are `?10`, `?11`, ...) to the DLQ with `reason`, with all bookkeeping.
/// Returns the job type of each row moved.
pub(crate) fn move_to_dlq(
    conn: &Connection,
    where_sql: &str,
    where_params: &[Value],
    reason: FailureReason,
    error: DeadError<'_>,
    duration_ms: i64,
    now: i64,
) -> StoreResult<Vec<String>> {
    let sql = format!(
        "INSERT INTO dlq (id, queue, job_type, priority, tags, reason, attempt, max_attempts, \
             created_at, scheduled_at, started_at, heartbeat_at, finished_at, duration_ms, \
             expires_at, worker_id, idempotency_key, correlation_id, created_by, error_prefix, \
             last_error, continuation, errors, original_payload, payload, batch_id, \
             trace_context) \
         SELECT id, queue, job_type, priority, tags, ?1, attempt, max_attempts, created_at, \
             scheduled_at, started_at, heartbeat_at, ?2, ?3, expires_at, worker_id, \
             idempotency_key, correlation_id, created_by, \
             substr(coalesce(?4, last_error, ''), 1, 80), coalesce(?4, last_error), continuation, \
             CASE WHEN ?5 IS NOT NULL THEN json_insert(coalesce(errors, '[]'), '$[#]', json(?5)) \
                  ELSE json_insert(coalesce(errors, '[]'), '$[#]', json_object('attempt', attempt, \
                      'at', ?6, 'kind', ?7, 'message', ?4)) END, \
             original_payload, payload, batch_id, trace_context \
         FROM jobs WHERE {where_sql} \
         RETURNING id, queue, job_type, last_error, continuation, correlation_id, batch_id"
    );
    let at = from_us(now).to_rfc3339_opts(SecondsFormat::Micros, true);
    let (json, message, kind, group_kind) = match error {
        DeadError::Given { json, message } => (
            Value::Text(json.to_string()),
            message.to_string(),
            Value::Null,
            given_kind(json),
        ),
        DeadError::Store { kind, message } => (
            Value::Null,
            message,
            Value::Text(kind.into()),
            kind.to_string(),
        ),
    };
    // One message (and kind) for every row of the move: only the job type differs.
    let head = FingerprintHead::new(reason, &group_kind, &message);
    let sample = sample_of(&message);
    let mut values: Vec<Value> = vec![
        Value::Integer(reason.code()),
        Value::Integer(now),
        Value::Integer(duration_ms),
        Value::Text(message),
        json,
        Value::Text(at),
        kind,
        Value::Null,
        Value::Null,
    ];
    values.extend_from_slice(where_params);
    let mut stmt = conn.prepare_cached(&sql).map_err(db_err("move to DLQ"))?;
    type Moved = (
        String,
        String,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    );
    let moved: Vec<Moved> = stmt
        .query_map(rusqlite::params_from_iter(values), |r| Moved::try_from(r))
        .map_err(db_err("move to DLQ"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("move to DLQ"))?;
    if moved.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = moved.iter().map(|m| m.0.as_str()).collect();
    delete_hot(conn, &ids)?;

    let mut counters: HashMap<String, (i64, i64)> = HashMap::new();
    let mut metrics: HashMap<String, MetricDelta> = HashMap::new();
    let mut groups: HashMap<String, GroupDelta> = HashMap::new();
    let mut by_type: HashMap<&str, String> = HashMap::new();
    let mut set_fingerprint = conn
        .prepare_cached("UPDATE dlq SET fingerprint = ?1 WHERE id = ?2")
        .map_err(db_err("move to DLQ"))?;
    let mut finished = Vec::new();
    for (id, queue, job_type, last_error, continuation, correlation_id, batch_id) in &moved {
        counters.entry(queue.clone()).or_default().1 += 1;
        let m = metrics.entry(queue.clone()).or_default();
        m.failed += 1;
        m.duration_sum_ms += duration_ms;
        m.duration_max_ms = m.duration_max_ms.max(duration_ms);
        let fingerprint = by_type
            .entry(job_type.as_str())
            .or_insert_with(|| head.for_job_type(job_type).to_string());
        set_fingerprint
            .execute(params![fingerprint.as_str(), id])
            .map_err(db_err("move to DLQ"))?;
        groups
            .entry(fingerprint.clone())
            .or_insert_with(|| GroupDelta {
                reason: reason.code(),
                kind: group_kind.clone(),
                job_type: job_type.clone(),
                sample: sample.clone(),
                delta: 0,
            })
            .delta += 1;
        if continuation.is_some() || batch_id.is_some() {
            finished.push(Finished {
                id: id.clone(),
                succeeded: false,
                reason: Some(reason),
                error: last_error.clone(),
                result: None,
                continuation: continuation.clone(),
                correlation_id: correlation_id.clone(),
                batch_id: batch_id.clone(),
            });
        }
    }
    bump_counters(conn, &counters)?;
    bump_metrics(conn, now, &metrics)?;
    bump_error_groups(conn, now, &groups)?;
    enqueue_continuations(conn, &finished, now)?;
    advance_batches(conn, &finished, now)?;
    // The job type of each row moved (for the run-time bins of runs that ended here).
    Ok(moved.into_iter().map(|m| m.2).collect())
}

/// The kind a worker's attempt error names (its JSON is the store's own `AttemptError`).
fn given_kind(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .unwrap_or_default()
}

pub(crate) fn delete_hot(conn: &Connection, ids: &[&str]) -> StoreResult<()> {
    let json = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
    conn.prepare_cached("DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?1))")
        .map_err(db_err("delete hot rows"))?
        .execute([json])
        .map_err(db_err("delete hot rows"))?;
    Ok(())
}

/// Delete DLQ rows matching `where_sql` (fixed SQL; parameters `?1`...), keeping counters
/// and error groups right. Returns how many went.
pub(crate) fn delete_dlq(
    conn: &Connection,
    where_sql: &str,
    where_params: &[Value],
    now: i64,
) -> StoreResult<u64> {
    let sql = format!("DELETE FROM dlq WHERE {where_sql} RETURNING queue, fingerprint");
    let rows: Vec<(String, Option<String>)> = conn
        .prepare_cached(&sql)
        .map_err(db_err("delete DLQ rows"))?
        .query_map(rusqlite::params_from_iter(where_params), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(db_err("delete DLQ rows"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("delete DLQ rows"))?;
    let mut counters: HashMap<String, (i64, i64)> = HashMap::new();
    let mut groups: HashMap<String, GroupDelta> = HashMap::new();
    for (queue, fingerprint) in &rows {
        counters.entry(queue.clone()).or_default().1 -= 1;
        if let Some(fingerprint) = fingerprint {
            groups.entry(fingerprint.clone()).or_default().delta -= 1;
        }
    }
    bump_counters(conn, &counters)?;
    bump_error_groups(conn, now, &groups)?;
    Ok(rows.len() as u64)
}

/// Delete archive rows matching `where_sql`, counters following. Returns how many went.
pub(crate) fn delete_archive(
    conn: &Connection,
    where_sql: &str,
    where_params: &[Value],
) -> StoreResult<u64> {
    let sql = format!("DELETE FROM archive WHERE {where_sql} RETURNING queue");
    let queues: Vec<String> = conn
        .prepare_cached(&sql)
        .map_err(db_err("delete archive rows"))?
        .query_map(rusqlite::params_from_iter(where_params), |r| r.get(0))
        .map_err(db_err("delete archive rows"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("delete archive rows"))?;
    let mut counters: HashMap<String, (i64, i64)> = HashMap::new();
    for queue in &queues {
        counters.entry(queue.clone()).or_default().0 -= 1;
    }
    bump_counters(conn, &counters)?;
    Ok(queues.len() as u64)
}

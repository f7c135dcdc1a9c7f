//! Worker-owned transitions: claim, start, heartbeat, release, complete. Each is a few
//! statements per batch, never one per job, and all carry the ownership predicate
//! (status + worker id) so a job someone else owns now is left alone.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use rusqlite::types::Value;
use rusqlite::{Connection, params};

use crate::error::StoreResult;
use crate::model::{
    Applied, ClaimRequest, Completion, FailureReason, HeartbeatReport, Job, JobId, Pillar,
    claim_key, claim_order,
};
use crate::telemetry::run_time;

use super::batches::advance_batches;
use super::codec::{error_json, id_text, ids_json, job_from_row, parse_id, select_job};
use super::connection::db_err;
use super::moves::{
    DeadError, Finished, MetricDelta, RunTimeDelta, bump_counters, bump_metrics, bump_run_times,
    delete_hot, enqueue_continuations, move_to_dlq,
};

/// The unpaused queues a claim may take from, with each bulkheaded queue's in-flight
/// (fetched + processing) count, read off the two in-flight indexes, and each rate-limited
/// queue's starts left in the current period (?2: now, microseconds).
pub(crate) const CLAIM_QUEUES_SQL: &str = "SELECT q.name, q.max_workers, \
         CASE WHEN q.max_workers IS NULL THEN 0 ELSE \
             (SELECT count(*) FROM jobs a WHERE a.queue = q.name AND a.status = 1) \
             + (SELECT count(*) FROM jobs a WHERE a.queue = q.name AND a.status = 2) END, \
         r.max_starts - CASE WHEN r.window_start = ?2 - ?2 % (r.period_secs * 1000000) \
                             THEN r.window_starts ELSE 0 END \
     FROM queues q LEFT JOIN rate_limits r ON r.queue = q.name \
     WHERE q.paused = 0 AND (?1 IS NULL OR q.name IN (SELECT value FROM json_each(?1)))";

/// What a claim took from a rate-limited queue, added to its current period's count.
const SPEND_STARTS_SQL: &str = "UPDATE rate_limits SET \
         window_starts = CASE WHEN window_start = ?2 - ?2 % (period_secs * 1000000) \
                              THEN window_starts + ?3 ELSE ?3 END, \
         window_start = ?2 - ?2 % (period_secs * 1000000) \
     WHERE queue = ?1";

/// One queue's next due pending jobs, in claim order, walked straight off the claim index
/// (no sort).
pub(crate) const CLAIM_CANDIDATES_SQL: &str = "SELECT rowid, priority, scheduled_at, id \
     FROM jobs \
     WHERE queue = ?1 AND status = 0 AND scheduled_at <= ?2 \
       AND (expires_at IS NULL OR expires_at > ?2) \
       AND (?4 IS NULL OR job_type IN (SELECT value FROM json_each(?4))) \
     ORDER BY priority DESC, scheduled_at, id LIMIT ?3";

/// Chosen rows → fetched by the worker.
const CLAIM_FETCH_SQL: &str = "UPDATE jobs SET status = 1, worker_id = ?2, fetched_at = ?3 \
     WHERE rowid IN (SELECT value FROM json_each(?1)) AND status = 0";

/// Chosen rows → processing by the worker at once (what `mark_processing` would do next).
const CLAIM_START_SQL: &str = "UPDATE jobs SET status = 2, worker_id = ?2, fetched_at = ?3, \
         attempt = attempt + 1, started_at = ?3, heartbeat_at = ?3 \
     WHERE rowid IN (SELECT value FROM json_each(?1)) AND status = 0";

/// The rows a claim marked, as the claimer holds them now.
const CLAIMED_ROWS_SQL: &str = "WHERE rowid IN (SELECT value FROM json_each(?1)) \
     AND status IN (1, 2) AND worker_id = ?2";

/// What a claim marked: enough to read the rows back and to know they are the ones marked.
pub(crate) struct Claimed {
    worker_id: String,
    /// `[rowid, ...]` as JSON.
    rowids: String,
    ids: HashSet<String>,
}

/// Claims of up to this many jobs return their rows from the writer: a reader hop costs
/// ~0.2 ms of latency, more than copying a few rows costs the writer.
const CLAIM_ROWS_READ_ON_WRITER: usize = 64;

/// A claim's result: the jobs, or what to read them back with once the claim has committed.
pub(crate) enum ClaimOutcome {
    Jobs(Vec<Job>),
    ReadBack(Claimed),
}

/// A pending row the claim may take, with its claim-order key.
struct Candidate {
    /// Index of the candidate's queue among the claim's rate-limited queues, if it is one.
    limited: Option<usize>,
    rowid: i64,
    priority: i32,
    scheduled_at: i64,
    id: String,
}

/// The claim runs inside the writer's `BEGIN IMMEDIATE` transaction, so nothing changes
/// between choosing rows and marking them: it reads each unpaused queue's first due rows off
/// the claim index (at most its free bulkhead slots), merges them in claim order, and marks
/// the best `limit` in one or two `UPDATE … WHERE rowid IN` statements. A single statement
/// that ranked the candidates with a window function did the same work at ~2.5 µs more per
/// job (it sorted every candidate twice).
///
/// A large claim's rows are not read here: copying 24 columns per job out cost the writer
/// thread about as much as the update itself, so `read_claimed` does it on a reader
/// connection, on another core, once the claim has committed.
pub(crate) fn claim(conn: &Connection, req: &ClaimRequest, now: i64) -> StoreResult<ClaimOutcome> {
    let limit = i64::from(req.limit);
    if limit == 0 || req.types.as_ref().is_some_and(Vec::is_empty) {
        return Ok(ClaimOutcome::Jobs(Vec::new()));
    }
    let types = req
        .types
        .as_ref()
        .map(|t| serde_json::to_string(t).unwrap_or_else(|_| "[]".into()));
    let queues = req
        .queues
        .as_ref()
        .map(|q| serde_json::to_string(q).unwrap_or_else(|_| "[]".into()));
    let open: Vec<(String, Option<i64>, i64, Option<i64>)> = conn
        .prepare_cached(CLAIM_QUEUES_SQL)
        .map_err(db_err("claim"))?
        .query_map(params![queues, now], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .map_err(db_err("claim"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("claim"))?;

    let mut candidates: Vec<Candidate> = Vec::new();
    let mut limited_queues: Vec<String> = Vec::new();
    let mut stmt = conn
        .prepare_cached(CLAIM_CANDIDATES_SQL)
        .map_err(db_err("claim"))?;
    for (queue, max_workers, in_flight, starts_left) in open {
        let take = max_workers.map_or(limit, |max| (max - in_flight).min(limit));
        let take = starts_left.map_or(take, |left| take.min(left));
        if take <= 0 {
            continue;
        }
        let limited = starts_left.map(|_| limited_queues.len());
        let rows = stmt
            .query_map(params![queue, now, take, types], |r| {
                Ok(Candidate {
                    limited,
                    rowid: r.get(0)?,
                    priority: r.get(1)?,
                    scheduled_at: r.get(2)?,
                    id: r.get(3)?,
                })
            })
            .map_err(db_err("claim"))?;
        for row in rows {
            candidates.push(row.map_err(db_err("claim"))?);
        }
        if limited.is_some() {
            limited_queues.push(queue);
        }
    }
    // Microseconds and lower-case UUID text sort like the job's timestamp and id.
    candidates.sort_by(|a, b| {
        claim_key(a.priority, a.scheduled_at, &a.id).cmp(&claim_key(
            b.priority,
            b.scheduled_at,
            &b.id,
        ))
    });
    candidates.truncate(req.limit as usize);
    spend_starts(conn, &limited_queues, &candidates, now)?;

    let start = candidates.len().min(req.start as usize);
    let (to_start, to_fetch) = candidates.split_at(start);
    mark_claimed(conn, CLAIM_START_SQL, to_start, &req.worker_id, now)?;
    mark_claimed(conn, CLAIM_FETCH_SQL, to_fetch, &req.worker_id, now)?;
    let claimed = Claimed {
        worker_id: req.worker_id.clone(),
        rowids: rowids_json(&candidates),
        ids: candidates.into_iter().map(|c| c.id).collect(),
    };
    if claimed.ids.len() <= CLAIM_ROWS_READ_ON_WRITER {
        return read_claimed(conn, &claimed).map(ClaimOutcome::Jobs);
    }
    Ok(ClaimOutcome::ReadBack(claimed))
}

/// Count what the claim took from each rate-limited queue against its current period.
fn spend_starts(
    conn: &Connection,
    limited_queues: &[String],
    chosen: &[Candidate],
    now: i64,
) -> StoreResult<()> {
    if limited_queues.is_empty() {
        return Ok(());
    }
    let mut taken = vec![0i64; limited_queues.len()];
    for c in chosen {
        if let Some(i) = c.limited {
            taken[i] += 1;
        }
    }
    let mut stmt = conn
        .prepare_cached(SPEND_STARTS_SQL)
        .map_err(db_err("claim"))?;
    for (queue, n) in limited_queues.iter().zip(taken) {
        if n > 0 {
            stmt.execute(params![queue, now, n])
                .map_err(db_err("claim"))?;
        }
    }
    Ok(())
}

fn rowids_json(rows: &[Candidate]) -> String {
    serde_json::to_string(&rows.iter().map(|c| c.rowid).collect::<Vec<_>>())
        .unwrap_or_else(|_| "[]".into())
}

fn mark_claimed(
    conn: &Connection,
    update: &str,
    rows: &[Candidate],
    worker_id: &str,
    now: i64,
) -> StoreResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    conn.prepare_cached(update)
        .map_err(db_err("claim"))?
        .execute(params![rowids_json(rows), worker_id, now])
        .map_err(db_err("claim"))?;
    Ok(())
}

/// The jobs a claim marked, in claim order: read inside the claim's transaction or after it
/// committed. The claimer's worker id and the ids chosen guard against a rowid that no
/// longer names the same job; a job an operator took away in the meantime is not returned.
pub(crate) fn read_claimed(conn: &Connection, claimed: &Claimed) -> StoreResult<Vec<Job>> {
    static SQL: LazyLock<String> =
        LazyLock::new(|| format!("{} {CLAIMED_ROWS_SQL}", select_job(Pillar::Hot)));
    let mut jobs: Vec<Job> = conn
        .prepare_cached(&SQL)
        .map_err(db_err("claim"))?
        .query_map(params![claimed.rowids, claimed.worker_id], |r| {
            job_from_row(Pillar::Hot, r)
        })
        .map_err(db_err("claim"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("claim"))?;
    jobs.retain(|job| claimed.ids.contains(&id_text(job.id)));
    jobs.sort_by(claim_order);
    Ok(jobs)
}

fn ids_returned(
    conn: &Connection,
    operation: &'static str,
    sql: &str,
    values: &[Value],
) -> StoreResult<HashSet<JobId>> {
    let mut stmt = conn.prepare_cached(sql).map_err(db_err(operation))?;
    let ids: Vec<String> = stmt
        .query_map(rusqlite::params_from_iter(values), |r| r.get(0))
        .map_err(db_err(operation))?
        .collect::<Result<_, _>>()
        .map_err(db_err(operation))?;
    ids.iter()
        .map(|t| parse_id(t).map_err(db_err(operation)))
        .collect()
}

pub(crate) fn mark_processing(
    conn: &Connection,
    worker_id: &str,
    ids: &[JobId],
    now: i64,
) -> StoreResult<Vec<JobId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let started = ids_returned(
        conn,
        "mark processing",
        "UPDATE jobs SET status = 2, attempt = attempt + 1, started_at = ?1, heartbeat_at = ?1 \
         WHERE id IN (SELECT value FROM json_each(?2)) AND status = 1 AND worker_id = ?3 \
         RETURNING id",
        &[
            Value::Integer(now),
            Value::Text(ids_json(ids)),
            Value::Text(worker_id.to_string()),
        ],
    )?;
    // An id given twice starts (and is reported) once, so it can never run twice.
    let mut started: std::collections::HashSet<JobId> = started.into_iter().collect();
    Ok(ids
        .iter()
        .copied()
        .filter(|id| started.remove(id))
        .collect())
}

pub(crate) fn heartbeat(
    conn: &Connection,
    worker_id: &str,
    ids: &[JobId],
    now: i64,
) -> StoreResult<HeartbeatReport> {
    let mut report = HeartbeatReport::default();
    if ids.is_empty() {
        return Ok(report);
    }
    let mut stmt = conn
        .prepare_cached(
            "UPDATE jobs SET heartbeat_at = ?1 \
             WHERE id IN (SELECT value FROM json_each(?2)) AND status = 2 AND worker_id = ?3 \
             RETURNING id, cancel_requested",
        )
        .map_err(db_err("heartbeat"))?;
    let rows: Vec<(String, i64)> = stmt
        .query_map(params![now, ids_json(ids), worker_id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(db_err("heartbeat"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("heartbeat"))?;
    let mut alive = HashSet::new();
    let mut cancel = HashSet::new();
    for (id, flag) in rows {
        let id = parse_id(&id).map_err(db_err("heartbeat"))?;
        alive.insert(id);
        if flag != 0 {
            cancel.insert(id);
        }
    }
    for id in ids {
        if alive.contains(id) {
            report.alive.push(*id);
            if cancel.contains(id) {
                report.cancel_requested.push(*id);
            }
        } else {
            report.lost.push(*id);
        }
    }
    Ok(report)
}

pub(crate) fn release(
    conn: &Connection,
    worker_id: &str,
    ids: &[JobId],
    run_at: Option<i64>,
) -> StoreResult<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let n = conn
        .prepare_cached(
            "UPDATE jobs SET status = 0, worker_id = NULL, fetched_at = NULL, \
                 scheduled_at = coalesce(?1, scheduled_at) \
             WHERE id IN (SELECT value FROM json_each(?2)) AND status = 1 AND worker_id = ?3",
        )
        .map_err(db_err("release"))?
        .execute(params![run_at, ids_json(ids), worker_id])
        .map_err(db_err("release"))?;
    Ok(n as u64)
}

/// Successful completions: one INSERT … SELECT into the archive (returning what moved),
/// one DELETE, then one upsert per queue for counters and metrics.
fn complete_succeeded(
    conn: &Connection,
    worker_id: &str,
    json: &str,
    now: i64,
) -> StoreResult<HashSet<JobId>> {
    // CROSS JOIN keeps jsonb_each as the outer loop: one primary-key probe per completion.
    // jsonb_each hands each element over as JSONB, so `->>` reads it without parsing its
    // text again (json_each: ~10 % more completion time).
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO archive (id, queue, job_type, priority, tags, attempt, max_attempts, \
                 created_at, scheduled_at, started_at, heartbeat_at, finished_at, duration_ms, \
                 expires_at, worker_id, idempotency_key, correlation_id, created_by, last_error, \
                 continuation, errors, original_payload, payload, result, batch_id, \
                 trace_context) \
             SELECT j.id, j.queue, j.job_type, j.priority, j.tags, j.attempt, j.max_attempts, \
                 j.created_at, j.scheduled_at, j.started_at, j.heartbeat_at, ?1, c.value ->> 'd', \
                 j.expires_at, j.worker_id, j.idempotency_key, j.correlation_id, j.created_by, \
                 j.last_error, j.continuation, j.errors, j.original_payload, j.payload, \
                 c.value ->> 'r', j.batch_id, j.trace_context \
             FROM jsonb_each(?2) AS c CROSS JOIN jobs AS j ON j.id = c.value ->> 'id' \
             WHERE j.status = 2 AND j.worker_id = ?3 \
             RETURNING id, queue, duration_ms, continuation, result, correlation_id, job_type, \
                 batch_id",
        )
        .map_err(db_err("complete"))?;
    type Row = (
        String,
        String,
        Option<i64>,
        Option<String>,
        Option<String>,
        Option<String>,
        String,
        Option<String>,
    );
    let moved: Vec<Row> = stmt
        .query_map(params![now, json, worker_id], |r| Row::try_from(r))
        .map_err(db_err("complete"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("complete"))?;
    if moved.is_empty() {
        return Ok(HashSet::new());
    }
    let ids: Vec<&str> = moved.iter().map(|m| m.0.as_str()).collect();
    delete_hot(conn, &ids)?;

    let mut counters: HashMap<String, (i64, i64)> = HashMap::new();
    let mut metrics: HashMap<String, MetricDelta> = HashMap::new();
    let mut run_times = RunTimeDelta::new();
    let mut finished = Vec::new();
    let mut applied = HashSet::with_capacity(moved.len());
    for (id, queue, duration, continuation, result, correlation_id, job_type, batch_id) in moved {
        let duration = duration.unwrap_or(0);
        *run_times
            .entry((job_type, run_time::bin_of(duration.max(0) as u64)))
            .or_default() += 1;
        let c = counters.entry(queue.clone()).or_default();
        c.0 += 1;
        let m = metrics.entry(queue).or_default();
        m.succeeded += 1;
        m.duration_sum_ms += duration;
        m.duration_max_ms = m.duration_max_ms.max(duration);
        applied.insert(parse_id(&id).map_err(db_err("complete"))?);
        if continuation.is_some() || batch_id.is_some() {
            finished.push(Finished {
                id,
                succeeded: true,
                reason: None,
                error: None,
                result,
                continuation,
                correlation_id,
                batch_id,
            });
        }
    }
    bump_counters(conn, &counters)?;
    bump_metrics(conn, now, &metrics)?;
    bump_run_times(conn, now, &run_times)?;
    enqueue_continuations(conn, &finished, now)?;
    advance_batches(conn, &finished, now)?;
    Ok(applied)
}

fn complete_retry(
    conn: &Connection,
    worker_id: &str,
    id: JobId,
    error_json: &str,
    message: &str,
    retry_at: i64,
    now: i64,
) -> StoreResult<Applied> {
    let queue: Option<String> = conn
        .prepare_cached(
            "UPDATE jobs SET status = 0, worker_id = NULL, fetched_at = NULL, heartbeat_at = NULL, \
                 scheduled_at = ?1, last_error = ?2, \
                 errors = json_insert(coalesce(errors, '[]'), '$[#]', json(?3)) \
             WHERE id = ?4 AND status = 2 AND worker_id = ?5 RETURNING queue",
        )
        .map_err(db_err("retry"))?
        .query_map(
            params![retry_at, message, error_json, id_text(id), worker_id],
            |r| r.get(0),
        )
        .map_err(db_err("retry"))?
        .next()
        .transpose()
        .map_err(db_err("retry"))?;
    let Some(queue) = queue else {
        return Ok(Applied::NotApplied);
    };
    let mut metrics = HashMap::new();
    metrics.insert(
        queue,
        MetricDelta {
            retried: 1,
            ..Default::default()
        },
    );
    bump_metrics(conn, now, &metrics)?;
    Ok(Applied::Applied)
}

/// Given back unrun: pending again where it stood in the claim order, the attempt uncounted.
fn complete_released(conn: &Connection, worker_id: &str, id: JobId) -> StoreResult<Applied> {
    let n = conn
        .prepare_cached(
            "UPDATE jobs SET status = 0, worker_id = NULL, fetched_at = NULL, heartbeat_at = NULL, \
                 attempt = max(attempt - 1, 0) \
             WHERE id = ?1 AND status = 2 AND worker_id = ?2",
        )
        .map_err(db_err("release unrun"))?
        .execute(params![id_text(id), worker_id])
        .map_err(db_err("release unrun"))?;
    Ok(Applied::from_rows(n))
}

fn complete_dead(
    conn: &Connection,
    worker_id: &str,
    (id, reason, duration_ms): (JobId, FailureReason, u64),
    error_json: &str,
    message: &str,
    now: i64,
) -> StoreResult<Applied> {
    let moved = move_to_dlq(
        conn,
        "id = ?10 AND status = 2 AND worker_id = ?11",
        &[Value::Text(id_text(id)), Value::Text(worker_id.to_string())],
        reason,
        DeadError::Given {
            json: error_json,
            message,
        },
        i64::try_from(duration_ms).unwrap_or(i64::MAX),
        now,
    )?;
    let n = moved.len();
    let run_times: RunTimeDelta = moved
        .into_iter()
        .map(|job_type| ((job_type, run_time::bin_of(duration_ms)), 1))
        .collect();
    bump_run_times(conn, now, &run_times)?;
    Ok(Applied::from_rows(n))
}

/// A `complete` call's input, prepared before it reaches the writer thread (JSON encoding
/// is CPU the writer need not spend).
pub(crate) struct CompletionBatch {
    completions: Vec<Completion>,
    /// Per completion: the first for its job in this call (a repeat is not applied).
    first: Vec<bool>,
    /// The successes as `[{"id", "r", "d"}, ...]`; `None` when there are none.
    succeeded_json: Option<String>,
}

impl CompletionBatch {
    pub(crate) fn new(completions: Vec<Completion>) -> StoreResult<CompletionBatch> {
        let first = crate::store::first_completions(&completions);
        #[derive(serde::Serialize)]
        struct Item<'a> {
            id: String,
            r: Option<&'a str>,
            d: u64,
        }
        let items: Vec<Item<'_>> = completions
            .iter()
            .zip(&first)
            .filter_map(|(c, first)| match c {
                Completion::Succeeded {
                    id,
                    result,
                    duration_ms,
                } if *first => Some(Item {
                    id: id_text(*id),
                    r: result.as_deref(),
                    d: *duration_ms,
                }),
                _ => None,
            })
            .collect();
        let succeeded_json = if items.is_empty() {
            None
        } else {
            Some(super::codec::to_json(&items)?)
        };
        Ok(CompletionBatch {
            completions,
            first,
            succeeded_json,
        })
    }
}

pub(crate) fn complete(
    conn: &Connection,
    worker_id: &str,
    batch: &CompletionBatch,
    now: i64,
) -> StoreResult<Vec<Applied>> {
    let archived = match &batch.succeeded_json {
        Some(json) => complete_succeeded(conn, worker_id, json, now)?,
        None => HashSet::new(),
    };

    let mut out = Vec::with_capacity(batch.completions.len());
    for (c, first) in batch.completions.iter().zip(&batch.first) {
        let applied = if !first {
            Applied::NotApplied
        } else {
            match c {
                Completion::Succeeded { id, .. } => {
                    Applied::from_rows(usize::from(archived.contains(id)))
                }
                Completion::Retry {
                    id,
                    error,
                    retry_at,
                } => complete_retry(
                    conn,
                    worker_id,
                    *id,
                    &error_json(error)?,
                    &error.message,
                    super::codec::to_us(*retry_at),
                    now,
                )?,
                Completion::DeadLetter {
                    id,
                    reason,
                    error,
                    duration_ms,
                } => complete_dead(
                    conn,
                    worker_id,
                    (*id, *reason, *duration_ms),
                    &error_json(error)?,
                    &error.message,
                    now,
                )?,
                Completion::Released { id } => complete_released(conn, worker_id, *id)?,
            }
        };
        out.push(applied);
    }
    Ok(out)
}

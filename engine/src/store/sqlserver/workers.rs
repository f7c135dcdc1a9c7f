//! Worker-owned transitions: claim, start, heartbeat, release, complete. Each is one
//! statement batch per call, never one per job, and all carry the ownership predicate (status
//! and worker id), so a job someone else owns now is left alone.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::SqlServerStore;
use super::pool::Repeat;
use super::queries::{self, MAX_ROWS_PER_STATEMENT};
use super::rows::{self, ids_json, json_time, to_i32, to_json};
use crate::error::StoreResult;
use crate::fingerprint::FingerprintHead;
use crate::model::{
    Applied, AttemptError, ClaimRequest, Completion, HeartbeatReport, Job, JobId, JobState, Pillar,
    Timestamp, claim_order,
};
use crate::telemetry::run_time;

/// One completion as `COMPLETE` reads it from its JSON parameter.
#[derive(Serialize)]
struct CompletionRow<'a> {
    id: String,
    kind: &'static str,
    result: Option<rows::JsonText<'a>>,
    duration_ms: Option<u64>,
    reason: Option<i64>,
    /// Nested as a JSON object (read `AS JSON`), not as JSON text in a string: see
    /// [`rows::JsonText`].
    error: Option<&'a AttemptError>,
    message: Option<String>,
    /// Dead letters only: the fingerprint head the statement finishes with the job type.
    fp_head: Option<String>,
    retry_at: Option<String>,
    /// Successes and dead letters: the run-time bin of `duration_ms` (`run_time::bin_of`).
    bin: Option<u16>,
}

pub(super) async fn claim(store: &SqlServerStore, req: ClaimRequest) -> StoreResult<Vec<Job>> {
    if req.limit == 0
        || req.queues.as_ref().is_some_and(Vec::is_empty)
        || req.types.as_ref().is_some_and(Vec::is_empty)
    {
        return Ok(Vec::new());
    }
    let queues: Option<String> = req.queues.as_ref().map(to_json).transpose()?;
    let types: Option<String> = req.types.as_ref().map(to_json).transpose()?;
    // One claim statement takes at most MAX_ROWS_PER_STATEMENT rows (lock escalation);
    // a larger claim is several, each its own transaction, until one comes back short.
    let mut wanted = usize::try_from(req.limit.min(10_000)).unwrap_or(10_000);
    let mut jobs = Vec::new();
    while wanted > 0 {
        let limit = to_i32(u32::try_from(wanted.min(MAX_ROWS_PER_STATEMENT)).unwrap_or(0));
        // Re-sent only when nothing was applied. A claim that timed out may still commit
        // on the server: its rows then stay fetched under this worker, which never runs
        // them, until the fetch lease hands them back (`RESCUE_FETCHED`) — a delay, not a
        // double run. Re-sending at once would queue a second claim behind the first.
        let answer = store
            .rows_of(
                "claim_batch",
                Repeat::IfNotApplied,
                &queries::CLAIM,
                &[&limit, &req.worker_id, &queues, &types],
            )
            .await;
        let rows = match answer {
            Ok(rows) => rows,
            // The earlier statements of this claim committed: hand over what they took.
            Err(e) if !jobs.is_empty() => {
                tracing::warn!(
                    event = "store.sqlserver.claim_cut_short",
                    error = %e,
                    claimed = jobs.len(),
                    "a claim statement failed; the jobs claimed before it are handed over"
                );
                break;
            }
            Err(e) => return Err(e),
        };
        let got = rows.len();
        jobs.extend(store.map_rows("claim_batch", &rows, |r| rows::job(r, Pillar::Hot))?);
        if got < usize::try_from(limit).unwrap_or(0) {
            break;
        }
        wanted -= got;
    }
    // OUTPUT has no order; hand the batch over in claim order.
    jobs.sort_by(claim_order);
    let start = jobs.len().min(req.start as usize);
    if start > 0 {
        start_claimed(store, &req.worker_id, &mut jobs[..start]).await;
    }
    Ok(jobs)
}

/// Start jobs just claimed (the claim's `start`) with the ownership-checked
/// `mark_processing`. If that fails they simply stay `Fetched`: the caller buffers them
/// and starts them the usual way.
async fn start_claimed(store: &SqlServerStore, worker_id: &str, jobs: &mut [Job]) {
    let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
    let started: HashSet<JobId> = match mark_processing(store, worker_id, &ids).await {
        Ok(started) => started.into_iter().collect(),
        Err(e) => {
            tracing::warn!(error = %e, jobs = ids.len(),
                "claimed jobs could not be started at once; they stay fetched");
            return;
        }
    };
    let now = chrono::Utc::now();
    for job in jobs.iter_mut().filter(|j| started.contains(&j.id)) {
        job.state = JobState::Processing;
        job.attempt += 1;
        job.started_at = Some(now);
        job.heartbeat_at = Some(now);
    }
}

pub(super) async fn mark_processing(
    store: &SqlServerStore,
    worker_id: &str,
    ids: &[JobId],
) -> StoreResult<Vec<JobId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let json = ids_json(ids);
    // Not repeated after an ambiguous failure: a second run would find the rows already
    // processing and report them as not started, so their user code would never run.
    let rows = store
        .rows_of(
            "mark_processing",
            Repeat::IfNotApplied,
            &queries::MARK_PROCESSING,
            &[&worker_id, &json],
        )
        .await?;
    let started: HashSet<JobId> = store
        .map_rows("mark_processing", &rows, |r| rows::row_id(r, "id"))?
        .into_iter()
        .collect();
    let mut reported = HashSet::new();
    Ok(ids
        .iter()
        .copied()
        .filter(|id| started.contains(id) && reported.insert(*id))
        .collect())
}

pub(super) async fn heartbeat(
    store: &SqlServerStore,
    worker_id: &str,
    ids: &[JobId],
) -> StoreResult<HeartbeatReport> {
    if ids.is_empty() {
        return Ok(HeartbeatReport::default());
    }
    let json = ids_json(ids);
    let rows = store
        .rows_of(
            "heartbeat",
            Repeat::Always,
            &queries::HEARTBEAT,
            &[&worker_id, &json],
        )
        .await?;
    let owned: HashMap<JobId, bool> = store
        .map_rows("heartbeat", &rows, |r| {
            Ok((
                rows::row_id(r, "id")?,
                rows::req_bool(r, "cancel_requested")?,
            ))
        })?
        .into_iter()
        .collect();
    let mut report = HeartbeatReport::default();
    let mut seen = HashSet::new();
    for id in ids.iter().filter(|id| seen.insert(**id)) {
        match owned.get(id) {
            Some(cancel) => {
                report.alive.push(*id);
                if *cancel {
                    report.cancel_requested.push(*id);
                }
            }
            None => report.lost.push(*id),
        }
    }
    Ok(report)
}

pub(super) async fn release(
    store: &SqlServerStore,
    worker_id: &str,
    ids: &[JobId],
    run_at: Option<Timestamp>,
) -> StoreResult<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let json = ids_json(ids);
    let run_at = run_at.map(rows::to_sql_time);
    store
        .count_of(
            "release",
            Repeat::Always,
            &queries::RELEASE,
            &[&worker_id, &json, &run_at],
            "released",
        )
        .await
}

pub(super) async fn complete(
    store: &SqlServerStore,
    worker_id: &str,
    completions: Vec<Completion>,
) -> StoreResult<Vec<Applied>> {
    if completions.is_empty() {
        return Ok(Vec::new());
    }
    let first = crate::store::first_completions(&completions);
    let mut payload = Vec::with_capacity(completions.len());
    for (c, first) in completions.iter().zip(&first) {
        if !first {
            continue;
        }
        payload.push(match c {
            Completion::Succeeded {
                id,
                result,
                duration_ms,
            } => CompletionRow {
                id: rows::id_text(*id),
                kind: "s",
                result: result.as_deref().map(rows::JsonText::of),
                duration_ms: Some(*duration_ms),
                reason: None,
                error: None,
                message: None,
                fp_head: None,
                retry_at: None,
                bin: Some(run_time::bin_of(*duration_ms)),
            },
            Completion::Retry {
                id,
                error,
                retry_at,
            } => CompletionRow {
                id: rows::id_text(*id),
                kind: "r",
                result: None,
                duration_ms: None,
                reason: None,
                error: Some(error),
                message: Some(error.message.clone()),
                fp_head: None,
                retry_at: Some(json_time(*retry_at)),
                bin: None,
            },
            Completion::DeadLetter {
                id,
                reason,
                error,
                duration_ms,
            } => CompletionRow {
                id: rows::id_text(*id),
                kind: "d",
                result: None,
                duration_ms: Some(*duration_ms),
                reason: Some(reason.code()),
                error: Some(error),
                message: Some(error.message.clone()),
                fp_head: Some(
                    FingerprintHead::new(*reason, &error.kind, &error.message)
                        .as_str()
                        .to_string(),
                ),
                retry_at: None,
                bin: Some(run_time::bin_of(*duration_ms)),
            },
            Completion::Released { id } => CompletionRow {
                id: rows::id_text(*id),
                kind: "u",
                result: None,
                duration_ms: None,
                reason: None,
                error: None,
                message: None,
                fp_head: None,
                retry_at: None,
                bin: None,
            },
        });
    }
    let json = to_json(&payload)?;
    let rows = store
        .rows_of(
            "complete",
            Repeat::IfNotApplied,
            &queries::COMPLETE,
            &[&worker_id, &json],
        )
        .await?;
    let applied: HashSet<JobId> = store
        .map_rows("complete", &rows, |r| rows::row_id(r, "id"))?
        .into_iter()
        .collect();
    Ok(completions
        .iter()
        .zip(&first)
        .map(|(c, first)| {
            if *first && applied.contains(&c.id()) {
                Applied::Applied
            } else {
                Applied::NotApplied
            }
        })
        .collect())
}

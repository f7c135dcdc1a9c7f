//! The worker protocol: processes in any language claim jobs, heartbeat them, report
//! progress and outcomes, or give them back. Each claim's jobs share a lease; every report
//! names it, and a report on a lease that no longer holds the job (rescued, cancelled,
//! finished) is refused with 409 `lease_lost` and changes nothing.
//!
//! Callers need the `worker` role (or `operator`); a worker credential can do nothing else.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use deck_engine::external::{
    ClaimedJob, ExternalClaim, Lease, Settled, StopReason, WorkerFailure, WorkerProfile,
};
use deck_engine::{JobId, RetryPolicy};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use uuid::Uuid;

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{ApiJson, parse_job_id};
use super::principal::JobRunner;
use super::responses::{SingleBodyErrors, SmallBodyErrors, WorkerErrors};
use super::wire::{integer, optional_integer};

// The documented patterns of worker names and leases are the rules of
// `deck_engine::external::{validate_worker_name, Lease::parse}` (the API tests hold them to it).

// ------------------------------------------------------------------------------ claim

/// Ask for work.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimBody {
    /// This worker's name, stable across its restarts (e.g. `billing-py@host1`): its row on
    /// the Instances page, and the owner of its leases.
    #[schema(pattern = r"^[A-Za-z0-9._@-]{1,100}$", example = "billing-py@host1")]
    pub worker: String,
    /// Take only from these queues; absent = every queue.
    #[serde(default)]
    #[schema(value_type = Option<Vec<super::limits::Name>>, min_items = 1)]
    pub queues: Option<Vec<String>>,
    /// Run only these job types (exact type keys); absent = every type.
    #[serde(default)]
    #[schema(value_type = Option<Vec<super::limits::Name>>, min_items = 1)]
    pub types: Option<Vec<String>>,
    /// At most this many jobs (1 to 100; default 1).
    #[serde(default = "one", deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 100, default = 1)]
    pub limit: u32,
    /// When no job is there, wait up to this many seconds for one (0 to 30; default 0).
    #[serde(default, deserialize_with = "integer")]
    #[schema(minimum = 0, maximum = 30, default = 0)]
    pub wait_seconds: u32,
    /// How many jobs the worker runs at once (shown on the Instances page).
    #[serde(default, deserialize_with = "optional_integer")]
    #[schema(minimum = 0, maximum = 10000)]
    pub concurrency: Option<u32>,
    /// Where it runs (shown on the Instances page).
    #[serde(default)]
    #[schema(value_type = Option<super::limits::Name>)]
    pub host: Option<String>,
    #[serde(default, deserialize_with = "optional_integer")]
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub pid: Option<u32>,
    /// What it is, e.g. `python-worker/1.0` (shown on the Instances page).
    #[serde(default)]
    #[schema(value_type = Option<super::limits::Name>)]
    pub agent: Option<String>,
}

fn one() -> u32 {
    1
}

/// A started job: run it, then report on it with its lease.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClaimedJobView {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    /// Name every report on this job with it.
    pub lease: String,
    pub queue: String,
    #[serde(rename = "type")]
    pub job_type: String,
    /// This attempt's number, 1-based; `attempt == max_attempts` is the last try.
    pub attempt: u32,
    pub max_attempts: u32,
    /// The payload as enqueued.
    #[schema(value_type = super::limits::AnyJson)]
    pub payload: Box<RawValue>,
    pub tags: Vec<String>,
    pub correlation_id: Option<String>,
    /// When its execution timeout ends it: report before then.
    pub deadline: DateTime<Utc>,
}

/// What a claim got.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClaimAnswer {
    /// The lease of this claim's jobs (`null` when no job came).
    pub lease: Option<String>,
    /// Heartbeat held jobs at least this often, or they are rescued as zombies.
    pub heartbeat_seconds: u64,
    pub jobs: Vec<ClaimedJobView>,
}

/// Claim up to `limit` jobs, started at once under one lease; with `wait_seconds`, wait
/// for work when there is none (long-poll). An empty answer means no work came in time.
#[utoipa::path(
    post, path = "/workers/claim", tag = "workers",
    request_body = ClaimBody,
    responses(
        (status = 200, description = "The jobs claimed (maybe none)", body = ClaimAnswer),
        (status = 400, description = "A bad worker name, limit, queue or type", body = ErrorBody),
        WorkerErrors,
        SmallBodyErrors,
    )
)]
pub async fn claim(
    State(state): State<ApiState>,
    JobRunner(_who): JobRunner,
    ApiJson(body): ApiJson<ClaimBody>,
) -> ApiResult<Json<ClaimAnswer>> {
    // Given means given: an empty host or agent is refused as the document says.
    for (field, value) in [("host", &body.host), ("agent", &body.agent)] {
        if let Some(value) = value {
            deck_engine::validation::validate_name(field, value)?;
        }
    }
    let wait = Duration::from_secs(u64::from(body.wait_seconds));
    deck_engine::external::validate_claim_wait(wait)?;
    let wait = wait.min(state.max_wait);
    let req = ExternalClaim {
        profile: WorkerProfile {
            name: body.worker,
            host: body.host.unwrap_or_default(),
            pid: body.pid.unwrap_or(0),
            agent: body.agent.unwrap_or_else(|| "external".into()),
            concurrency: body.concurrency.unwrap_or(body.limit),
            queues: body.queues,
            types: body.types,
        },
        limit: body.limit,
        wait,
    };
    let claimed = state.engine.external_workers().claim(req).await?;
    let retry = RetryPolicy::from(&state.engine.settings().retry);
    let lease = claimed.lease.as_ref().map(|l| l.as_str().to_string());
    let jobs = claimed
        .jobs
        .iter()
        .map(|c| claimed_view(c, lease.as_deref().unwrap_or_default(), &retry))
        .collect();
    Ok(Json(ClaimAnswer {
        lease,
        heartbeat_seconds: claimed.heartbeat_every.as_secs().max(1),
        jobs,
    }))
}

fn claimed_view(c: &ClaimedJob, lease: &str, retry: &RetryPolicy) -> ClaimedJobView {
    let job = &c.job;
    // Stored payloads are JSON; an empty one (a `null` payload) reads as null.
    let payload = RawValue::from_string(job.payload.clone()).unwrap_or_default();
    ClaimedJobView {
        id: job.id.0,
        lease: lease.to_string(),
        queue: job.queue.clone(),
        job_type: job.job_type.clone(),
        attempt: job.attempt,
        max_attempts: retry.attempts_for(job),
        payload,
        tags: job.tags.clone(),
        correlation_id: job.correlation_id.clone(),
        deadline: c.deadline,
    }
}

// ------------------------------------------------------------------------------ heartbeat

/// Jobs a lease holds, still running.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    #[schema(pattern = r"^ext:[A-Za-z0-9._@-]{1,100}:[0-9a-fA-F]{32}$")]
    pub lease: String,
    /// The ids of the lease's jobs this worker is still running (at most 1,000).
    #[schema(max_items = 1000)]
    pub jobs: Vec<Uuid>,
}

/// Why a job must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReasonDto {
    /// An operator cancelled it; it is in the dead-letter queue.
    Cancelled,
    /// Its execution timeout passed; it was retried or dead-lettered by the retry policy.
    Timeout,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StopJob {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    pub reason: StopReasonDto,
}

/// What the heartbeat found.
#[derive(Debug, Serialize, ToSchema)]
pub struct HeartbeatAnswer {
    /// Still held by the lease; keep running them.
    pub alive: Vec<Uuid>,
    /// Stop these now; their outcome is already recorded, report nothing more.
    pub stop: Vec<StopJob>,
    /// No longer held by the lease (rescued, finished elsewhere, purged): drop them.
    pub lost: Vec<Uuid>,
}

/// Heartbeat a lease's running jobs; the answer says which to stop (cancelled, timed out)
/// and which the lease lost.
#[utoipa::path(
    post, path = "/workers/heartbeat", tag = "workers",
    request_body = HeartbeatBody,
    responses(
        (status = 200, description = "What became of each job", body = HeartbeatAnswer),
        (status = 400, description = "Not a lease, or not job ids", body = ErrorBody),
        WorkerErrors,
        SmallBodyErrors,
    )
)]
pub async fn heartbeat(
    State(state): State<ApiState>,
    JobRunner(_who): JobRunner,
    ApiJson(body): ApiJson<HeartbeatBody>,
) -> ApiResult<Json<HeartbeatAnswer>> {
    let lease = parse_lease(&body.lease)?;
    if body.jobs.len() > 1000 {
        return Err(ApiError::bad_request(
            "invalid_field",
            "heartbeat at most 1,000 jobs per call",
        )
        .with_field("jobs"));
    }
    let ids: Vec<JobId> = body.jobs.into_iter().map(JobId).collect();
    let beat = state
        .engine
        .external_workers()
        .heartbeat(&lease, &ids)
        .await?;
    Ok(Json(HeartbeatAnswer {
        alive: beat.alive.iter().map(|id| id.0).collect(),
        stop: beat
            .stop
            .iter()
            .map(|(id, reason)| StopJob {
                id: id.0,
                reason: match reason {
                    StopReason::Cancelled => StopReasonDto::Cancelled,
                    StopReason::Timeout => StopReasonDto::Timeout,
                },
            })
            .collect(),
        lost: beat.lost.iter().map(|id| id.0).collect(),
    }))
}

// ------------------------------------------------------------------------------ reports

/// How far the job has got.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerProgress {
    #[schema(pattern = r"^ext:[A-Za-z0-9._@-]{1,100}:[0-9a-fA-F]{32}$")]
    pub lease: String,
    /// 0 to 100.
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 0, maximum = 100)]
    pub percent: u8,
    /// What it is doing now (at most 500 characters).
    #[serde(default)]
    #[schema(max_length = 500)]
    pub message: Option<String>,
}

/// The attempt succeeded.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteBody {
    #[schema(pattern = r"^ext:[A-Za-z0-9._@-]{1,100}:[0-9a-fA-F]{32}$")]
    pub lease: String,
    /// What the job produced (any JSON; waiters and the console get it). Absent = none.
    #[serde(default)]
    #[schema(value_type = Option<super::limits::AnyJson>)]
    pub result: Option<Box<RawValue>>,
}

/// The attempt failed.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailBody {
    #[schema(pattern = r"^ext:[A-Za-z0-9._@-]{1,100}:[0-9a-fA-F]{32}$")]
    pub lease: String,
    /// What went wrong (kept up to 2,000 characters).
    pub message: String,
    /// The error's class, e.g. `TimeoutError` (default `transient`, `throttled` or `fatal`).
    #[serde(default)]
    #[schema(value_type = Option<super::limits::Name>)]
    pub kind: Option<String>,
    /// True when it can never succeed: to the dead-letter queue now. Otherwise the job's
    /// retry policy decides.
    #[serde(default)]
    pub fatal: bool,
    /// Retry no earlier than this many seconds from now (a throttled downstream); the
    /// policy's backoff otherwise. Ignored with `fatal`.
    #[serde(default, deserialize_with = "optional_integer")]
    #[schema(minimum = 0, maximum = 31536000)]
    pub retry_after_seconds: Option<u32>,
}

/// A lease, alone (release).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseBody {
    #[schema(pattern = r"^ext:[A-Za-z0-9._@-]{1,100}:[0-9a-fA-F]{32}$")]
    pub lease: String,
}

/// Where a reported job went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeDto {
    Succeeded,
    /// Pending again, due at `retry_at`.
    Retry,
    /// In the dead-letter queue, for `reason`.
    Dead,
    /// Pending again, unrun.
    Released,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReportAnswer {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    pub outcome: OutcomeDto,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<DateTime<Utc>>,
    /// Why it is dead: `Failed`, `Fatal`, `Throttled`, `RetryLifetimeExpired`, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

fn answer(id: JobId, settled: Option<Settled>) -> ApiResult<Json<ReportAnswer>> {
    let settled = settled.ok_or_else(|| lease_lost(id))?;
    let (outcome, retry_at, reason) = match settled {
        Settled::Succeeded => (OutcomeDto::Succeeded, None, None),
        Settled::RetryAt(at) => (OutcomeDto::Retry, Some(at), None),
        Settled::Dead(reason) => (OutcomeDto::Dead, None, Some(format!("{reason:?}"))),
        Settled::Released => (OutcomeDto::Released, None, None),
    };
    Ok(Json(ReportAnswer {
        id: id.0,
        outcome,
        retry_at,
        reason,
    }))
}

fn lease_lost(id: JobId) -> ApiError {
    ApiError::conflict(
        "lease_lost",
        format!(
            "this lease does not hold job {id} (any more): it was rescued, cancelled, \
             finished or given back; drop the job and claim again"
        ),
    )
}

fn parse_lease(token: &str) -> ApiResult<Lease> {
    Lease::parse(token).map_err(ApiError::from)
}

/// Report progress on a held job (shown on the live stream).
#[utoipa::path(
    post, path = "/workers/jobs/{id}/progress", tag = "workers",
    params(("id" = Uuid, Path, description = "Job id")),
    request_body = WorkerProgress,
    responses(
        (status = 204, description = "Recorded"),
        (status = 400, description = "Not a job id or lease, or percent over 100", body = ErrorBody),
        (status = 409, description = "The lease does not hold the job (`lease_lost`)", body = ErrorBody),
        WorkerErrors,
        SmallBodyErrors,
    )
)]
pub async fn progress(
    State(state): State<ApiState>,
    JobRunner(_who): JobRunner,
    Path(id): Path<String>,
    body: Result<ApiJson<WorkerProgress>, ApiError>,
) -> ApiResult<StatusCode> {
    let id = parse_job_id(&id)?;
    let ApiJson(body) = body?;
    let lease = parse_lease(&body.lease)?;
    if body.percent > 100 {
        return Err(
            ApiError::bad_request("invalid_percent", "percent is 0 to 100").with_field("percent"),
        );
    }
    let message = body.message.unwrap_or_default();
    let held = state
        .engine
        .external_workers()
        .progress(&lease, id, body.percent, &message)
        .await?;
    if !held {
        return Err(lease_lost(id));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The attempt succeeded: the job moves to the archive with its result.
#[utoipa::path(
    post, path = "/workers/jobs/{id}/complete", tag = "workers",
    params(("id" = Uuid, Path, description = "Job id")),
    request_body = CompleteBody,
    responses(
        (status = 200, description = "Recorded (a result over the size limit dead-letters the job)", body = ReportAnswer),
        (status = 400, description = "Not a job id or lease", body = ErrorBody),
        (status = 409, description = "The lease does not hold the job (`lease_lost`)", body = ErrorBody),
        WorkerErrors,
        SingleBodyErrors,
    )
)]
pub async fn complete(
    State(state): State<ApiState>,
    JobRunner(_who): JobRunner,
    Path(id): Path<String>,
    body: Result<ApiJson<CompleteBody>, ApiError>,
) -> ApiResult<Json<ReportAnswer>> {
    let id = parse_job_id(&id)?;
    let ApiJson(body) = body?;
    let lease = parse_lease(&body.lease)?;
    let result = body.result.map(|r| r.get().to_string());
    let settled = state
        .engine
        .external_workers()
        .complete(&lease, id, result)
        .await?;
    answer(id, settled)
}

/// The attempt failed: retried by the job's policy, or dead-lettered (`fatal`, or out of
/// attempts).
#[utoipa::path(
    post, path = "/workers/jobs/{id}/fail", tag = "workers",
    params(("id" = Uuid, Path, description = "Job id")),
    request_body = FailBody,
    responses(
        (status = 200, description = "Recorded", body = ReportAnswer),
        (status = 400, description = "Not a job id, lease or error kind", body = ErrorBody),
        (status = 409, description = "The lease does not hold the job (`lease_lost`)", body = ErrorBody),
        WorkerErrors,
        SmallBodyErrors,
    )
)]
pub async fn fail(
    State(state): State<ApiState>,
    JobRunner(_who): JobRunner,
    Path(id): Path<String>,
    body: Result<ApiJson<FailBody>, ApiError>,
) -> ApiResult<Json<ReportAnswer>> {
    let id = parse_job_id(&id)?;
    let ApiJson(body) = body?;
    let lease = parse_lease(&body.lease)?;
    let failure = if body.fatal {
        WorkerFailure::Fatal
    } else {
        WorkerFailure::Transient {
            retry_after: body
                .retry_after_seconds
                .map(|s| Duration::from_secs(u64::from(s))),
        }
    };
    let settled = state
        .engine
        .external_workers()
        .fail(&lease, id, failure, body.kind.as_deref(), &body.message)
        .await?;
    answer(id, settled)
}

/// Give a held job back unrun (the worker is stopping, or claimed more than it will run):
/// pending again, the attempt not counted.
#[utoipa::path(
    post, path = "/workers/jobs/{id}/release", tag = "workers",
    params(("id" = Uuid, Path, description = "Job id")),
    request_body = LeaseBody,
    responses(
        (status = 200, description = "Given back", body = ReportAnswer),
        (status = 400, description = "Not a job id or lease", body = ErrorBody),
        (status = 409, description = "The lease does not hold the job (`lease_lost`)", body = ErrorBody),
        WorkerErrors,
        SmallBodyErrors,
    )
)]
pub async fn release(
    State(state): State<ApiState>,
    JobRunner(_who): JobRunner,
    Path(id): Path<String>,
    body: Result<ApiJson<LeaseBody>, ApiError>,
) -> ApiResult<Json<ReportAnswer>> {
    let id = parse_job_id(&id)?;
    let ApiJson(body) = body?;
    let lease = parse_lease(&body.lease)?;
    let released = state
        .engine
        .external_workers()
        .release(&lease, &[id])
        .await?;
    answer(id, released.contains(&id).then_some(Settled::Released))
}

//! Job endpoints: enqueue (one or a batch), read with long-polling, cancel, resurrect.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use deck_engine::{CancelOutcome, JobId, WaitOutcome};
use serde::Deserialize;
use utoipa::IntoParams;

use super::ApiState;
use super::dto::{
    BatchEnqueued, CancelOutcomeDto, Cancelled, EnqueueBatch, EnqueueJob, Enqueued, JobView,
    ResurrectEdits, check_batch_size,
};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{ApiJson, ApiQuery, OptionalApiJson, parse_job_id, parse_wait};
use super::principal::{Operator, Viewer};
use super::responses::{BatchBodyErrors, OperatorErrors, ReadErrors, SingleBodyErrors};

/// `?wait=`: how long to long-poll for the job to finish.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Hold the request until the job finishes or this much time passes: a number with an
    /// optional unit, `ms`, `s` (the default) or `m` (`30s`, `500ms`, `1.5m`, `2`); longer
    /// waits are cut to 60 s. On timeout the job comes back in its current state with
    /// `timed_out: true`.
    pub wait: Option<String>,
}

fn wait_of(state: &ApiState, q: &WaitQuery) -> ApiResult<Option<Duration>> {
    q.wait
        .as_deref()
        .map(|w| parse_wait(w, state.max_wait))
        .transpose()
}

/// Wait for a job and render it: the finished job, or its current state on timeout.
async fn waited_view(state: &ApiState, id: JobId, timeout: Duration) -> ApiResult<JobView> {
    match state.engine.wait(id, timeout).await? {
        WaitOutcome::Succeeded { job } | WaitOutcome::Dead { job } => {
            let mut view = JobView::from(&job);
            view.timed_out = Some(false);
            Ok(view)
        }
        WaitOutcome::Pending { .. } => {
            let job = state
                .engine
                .store()
                .get_job(id)
                .await?
                .ok_or_else(|| job_not_found(id))?;
            let mut view = JobView::from(&job);
            view.timed_out = Some(!view.finished);
            Ok(view)
        }
        WaitOutcome::NotFound => Err(job_not_found(id)),
    }
}

pub(crate) fn job_not_found(id: JobId) -> ApiError {
    ApiError::not_found(
        "job_not_found",
        format!("job {id} not found; it may never have existed or was pruned by retention"),
    )
}

fn created_status(created: bool) -> StatusCode {
    if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

/// Enqueue one job.
///
/// 201 when a job was created; 200 with the existing job's id when the idempotency key
/// matched an active job. With `?wait=` the response also carries the job once it finished
/// (or its state when the wait ran out).
#[utoipa::path(
    post, path = "/jobs", tag = "jobs",
    params(WaitQuery),
    request_body = EnqueueJob,
    responses(
        (status = 201, description = "Created", body = Enqueued),
        (status = 200, description = "Duplicate idempotency key: the existing job", body = Enqueued),
        (status = 400, description = "Invalid input; nothing was written", body = ErrorBody),
        OperatorErrors,
        SingleBodyErrors,
    )
)]
pub async fn enqueue(
    State(state): State<ApiState>,
    Operator(who): Operator,
    ApiQuery(query): ApiQuery<WaitQuery>,
    ApiJson(job): ApiJson<EnqueueJob>,
) -> ApiResult<(StatusCode, Json<Enqueued>)> {
    // Runs inside the request span (`traces::write_request_span`): the caller's
    // `traceparent` is the parent, so the job's spans link back to its trace.
    let wait = wait_of(&state, &query)?;
    let outcome = state.engine.enqueue(job.into_request(&who.name)).await?;
    let mut body = Enqueued::from(outcome);
    if let Some(timeout) = wait {
        body.job = Some(waited_view(&state, outcome.id, timeout).await?);
    }
    Ok((created_status(outcome.created), Json(body)))
}

/// Enqueue many jobs in one transaction: all of them, or none when any is invalid.
///
/// 201 when at least one job was created, 200 when every job was a duplicate.
#[utoipa::path(
    post, path = "/jobs/batch", tag = "jobs",
    request_body = EnqueueBatch,
    responses(
        (status = 201, description = "At least one job created", body = BatchEnqueued),
        (status = 200, description = "All duplicates", body = BatchEnqueued),
        (status = 400, description = "Invalid input; nothing was written", body = ErrorBody),
        OperatorErrors,
        BatchBodyErrors,
    )
)]
pub async fn enqueue_batch(
    State(state): State<ApiState>,
    Operator(who): Operator,
    ApiJson(batch): ApiJson<EnqueueBatch>,
) -> ApiResult<(StatusCode, Json<BatchEnqueued>)> {
    check_batch_size(batch.jobs.len())?;
    let reqs = batch
        .jobs
        .into_iter()
        .map(|j| j.into_request(&who.name))
        .collect();
    let outcomes = state.engine.enqueue_batch(reqs).await?;
    let any_created = outcomes.iter().any(|o| o.created);
    let jobs = outcomes.into_iter().map(Enqueued::from).collect();
    Ok((created_status(any_created), Json(BatchEnqueued { jobs })))
}

/// A job from whichever pillar holds it (active, archive or dead-letter queue).
///
/// With `?wait=30s` the request is held until the job finishes (at most 60 s).
#[utoipa::path(
    get, path = "/jobs/{id}", tag = "jobs",
    params(("id" = Uuid, Path, description = "Job id"), WaitQuery),
    responses(
        (status = 200, description = "The job (after waiting, with `timed_out`)", body = JobView),
        (status = 400, description = "Not a job id, or a bad `wait`", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn get_job(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<WaitQuery>,
) -> ApiResult<Json<JobView>> {
    let id = parse_job_id(&id)?;
    if let Some(timeout) = wait_of(&state, &query)? {
        return Ok(Json(waited_view(&state, id, timeout).await?));
    }
    let job = state
        .engine
        .store()
        .get_job(id)
        .await?
        .ok_or_else(|| job_not_found(id))?;
    Ok(Json(JobView::from(&job)))
}

/// Cancel a job. Pending jobs go to the dead-letter queue at once (200, `cancelled`); a
/// running job is asked to stop and its worker stops it at the next heartbeat
/// (202, `requested`).
#[utoipa::path(
    post, path = "/jobs/{id}/cancel", tag = "jobs",
    params(("id" = Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "Cancelled", body = Cancelled),
        (status = 202, description = "Cancel requested from the running worker", body = Cancelled),
        (status = 400, description = "Not a job id", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job already finished", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn cancel(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<Cancelled>)> {
    let id = parse_job_id(&id)?;
    let (status, outcome) = match state.engine.operations().cancel(&who.name, id).await? {
        CancelOutcome::Cancelled => (StatusCode::OK, CancelOutcomeDto::Cancelled),
        CancelOutcome::Requested => (StatusCode::ACCEPTED, CancelOutcomeDto::Requested),
        CancelOutcome::NotFound => {
            return Err(match state.engine.store().get_job(id).await? {
                Some(job) => ApiError::conflict(
                    "job_finished",
                    format!(
                        "job {id} already finished ({}); nothing to cancel",
                        job.state
                    ),
                ),
                None => job_not_found(id),
            });
        }
    };
    Ok((status, Json(Cancelled { id: id.0, outcome })))
}

/// Move a dead job back to pending, optionally with edits (payload, tags, priority, queue).
#[utoipa::path(
    post, path = "/jobs/{id}/resurrect", tag = "jobs",
    params(("id" = Uuid, Path, description = "Job id")),
    request_body(content = Option<ResurrectEdits>, description = "Optional edits; an empty body resurrects as is"),
    responses(
        (status = 200, description = "The job, pending again", body = JobView),
        (status = 400, description = "Not a job id, or invalid edits", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job is not in the dead-letter queue", body = ErrorBody),
        OperatorErrors,
        SingleBodyErrors,
    )
)]
pub async fn resurrect(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(id): Path<String>,
    OptionalApiJson(edits): OptionalApiJson<ResurrectEdits>,
) -> ApiResult<Json<JobView>> {
    let id = parse_job_id(&id)?;
    let edit = edits.map(ResurrectEdits::into_edit);
    let ops = state.engine.operations();
    match ops.resurrect(&who.name, id, edit).await {
        Ok(_) => {}
        Err(deck_engine::StoreError::JobNotFound(_)) => {
            return Err(match ops.store().get_job(id).await? {
                Some(job) => ApiError::conflict(
                    "job_not_dead",
                    format!(
                        "job {id} is {}; only jobs in the dead-letter queue can be resurrected",
                        job.state
                    ),
                ),
                None => job_not_found(id),
            });
        }
        Err(e) => return Err(e.into()),
    }
    let job = ops
        .store()
        .get_job(id)
        .await?
        .ok_or_else(|| job_not_found(id))?;
    Ok(Json(JobView::from(&job)))
}

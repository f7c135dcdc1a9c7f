//! `POST /jobs/{id}/progress`: an HTTP handler's receiver reports progress on the attempt it
//! is running, with the token its request carried (the envelope's `progress.token`). The
//! token is the credential: it is valid only while that attempt's request is in flight.
//! `GET /jobs/{id}/progress` reads it back (any handler's progress, as the console shows it).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use deck_http_handlers::PROGRESS_TOKEN_HEADER;
use serde::Deserialize;
use utoipa::ToSchema;

use super::ApiState;
use super::dto::job_lists::{JobProgressView, ProgressDto};
use super::dto::state_dto;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{ApiJson, parse_job_id};
use super::jobs::job_not_found;
use super::principal::Viewer;
use super::responses::{ReadErrors, SingleBodyErrors};
use super::wire::integer;

/// Longest progress message kept.
const MAX_MESSAGE_CHARS: usize = 500;

/// How far the attempt has got.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgressReport {
    /// 0 to 100.
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 0, maximum = 100)]
    pub percent: u8,
    /// What it is doing now (at most 500 characters).
    #[serde(default)]
    #[schema(max_length = 500)]
    pub message: Option<String>,
}

/// Report progress on a running HTTP-handled attempt (shown in the console and the live
/// stream). Needs no credentials but the attempt's progress token.
#[utoipa::path(
    post, path = "/jobs/{id}/progress", tag = "jobs",
    params(
        ("id" = Uuid, Path, description = "Job id"),
        ("Deck-Progress-Token" = String, Header, description = "The envelope's progress.token"),
    ),
    request_body = ProgressReport,
    responses(
        (status = 204, description = "Recorded"),
        (status = 400, description = "Not a job id, no token, or percent over 100", body = ErrorBody),
        (status = 403, description = "A cross-site request", body = ErrorBody),
        (status = 404, description = "No attempt of this job in flight here holds that token", body = ErrorBody),
        SingleBodyErrors,
    )
)]
pub async fn report_progress(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<ApiJson<ProgressReport>, ApiError>,
) -> ApiResult<StatusCode> {
    // The id first: a bad id is a 400 `invalid_id` whatever the body, as on every job route.
    let id = parse_job_id(&id)?;
    let ApiJson(report) = body?;
    let token = headers
        .get(PROGRESS_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            ApiError::bad_request(
                "no_progress_token",
                "send the envelope's progress.token in the Deck-Progress-Token header",
            )
            .with_field(PROGRESS_TOKEN_HEADER)
        })?;
    if report.percent > 100 {
        return Err(
            ApiError::bad_request("invalid_percent", "percent is 0 to 100").with_field("percent"),
        );
    }
    let message = report.message.unwrap_or_default();
    if message.chars().count() > MAX_MESSAGE_CHARS {
        return Err(ApiError::bad_request(
            "message_too_long",
            format!("message is at most {MAX_MESSAGE_CHARS} characters"),
        )
        .with_field("message"));
    }
    state
        .progress
        .report(id, token, report.percent, &message)
        .map_err(|e| ApiError::not_found("not_in_flight", e.to_string()))?;
    Ok(StatusCode::NO_CONTENT)
}

/// A job's progress: the percent and message its handler last reported, while it runs in
/// this server's engine (as the console's job page shows it); its state otherwise.
#[utoipa::path(
    get, path = "/jobs/{id}/progress", tag = "jobs",
    params(("id" = Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job's progress", body = JobProgressView),
        (status = 400, description = "Not a job id", body = ErrorBody),
        (status = 403, description = "A worker principal: it may only run jobs", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn read_progress(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
    Path(id): Path<String>,
) -> ApiResult<Json<JobProgressView>> {
    let id = parse_job_id(&id)?;
    let running = state
        .engine
        .snapshot()
        .running
        .into_iter()
        .find(|r| r.id == id);
    let job = state
        .engine
        .store()
        .get_job(id)
        .await?
        .ok_or_else(|| job_not_found(id))?;
    let (job_state, reason) = state_dto(job.state);
    Ok(Json(JobProgressView {
        id: id.0,
        state: job_state,
        reason,
        attempt: running.as_ref().map_or(job.attempt, |r| r.attempt),
        running_here: running.is_some(),
        running_ms: running.as_ref().map(|r| r.running_ms),
        cancelling: running.as_ref().is_some_and(|r| r.cancelling),
        progress: running
            .as_ref()
            .and_then(|r| r.progress.as_ref())
            .map(ProgressDto::from),
    }))
}

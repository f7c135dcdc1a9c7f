//! Queue endpoints: list with live numbers, pause, resume, change settings.

use axum::Json;
use axum::extract::{Path, State};
use deck_engine::QueuePatch;
use deck_engine::validation::{validate_name, validate_queue_patch};

use super::ApiState;
use super::dto::{QueueList, QueuePatchDto, QueueSettings, QueueView};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::ApiJson;
use super::jobs::audit;
use super::principal::{Operator, Viewer};

/// Every queue that has settings or jobs, with its settings, live counts and lag.
#[utoipa::path(
    get, path = "/queues", tag = "queues",
    responses((status = 200, body = QueueList), (status = 401, body = ErrorBody))
)]
pub async fn list_queues(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
) -> ApiResult<Json<QueueList>> {
    let stats = state.engine.store().queue_stats().await?;
    Ok(Json(QueueList {
        queues: stats.iter().map(QueueView::from).collect(),
    }))
}

/// Stop claiming new jobs from a queue (running jobs finish; buffered ones are released).
#[utoipa::path(
    post, path = "/queues/{name}/pause", tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, body = QueueSettings),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    )
)]
pub async fn pause(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(name): Path<String>,
) -> ApiResult<Json<QueueSettings>> {
    let patch = QueuePatch {
        paused: Some(true),
        ..QueuePatch::default()
    };
    apply(&state, &who.name, "queue.pause", &name, patch).await
}

/// Start claiming from a paused queue again.
#[utoipa::path(
    post, path = "/queues/{name}/resume", tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, body = QueueSettings),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    )
)]
pub async fn resume(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(name): Path<String>,
) -> ApiResult<Json<QueueSettings>> {
    let patch = QueuePatch {
        paused: Some(false),
        ..QueuePatch::default()
    };
    apply(&state, &who.name, "queue.resume", &name, patch).await
}

/// Change a queue's settings. Absent fields stay; `null` clears an override.
#[utoipa::path(
    patch, path = "/queues/{name}", tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    request_body = QueuePatchDto,
    responses(
        (status = 200, body = QueueSettings),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 415, body = ErrorBody),
    )
)]
pub async fn update_queue(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(name): Path<String>,
    ApiJson(patch): ApiJson<QueuePatchDto>,
) -> ApiResult<Json<QueueSettings>> {
    if patch.is_empty() {
        return Err(ApiError::bad_request(
            "empty_patch",
            "the patch changes nothing; give at least one of paused, hidden, max_workers, \
             zombie_timeout_secs, execution_timeout_secs, lag_warn_secs, lag_crit_secs",
        ));
    }
    apply(&state, &who.name, "queue.update", &name, patch.into()).await
}

async fn apply(
    state: &ApiState,
    actor: &str,
    action: &str,
    name: &str,
    patch: QueuePatch,
) -> ApiResult<Json<QueueSettings>> {
    validate_name("name", name)?;
    validate_queue_patch(&patch)?;
    let detail = serde_json::to_string(&patch).ok();
    let config = state.engine.update_queue(name, patch).await?;
    audit(state, actor, action, name.to_string(), detail).await;
    Ok(Json(config.into()))
}

//! Queue endpoints: list with live numbers, pause, resume, change settings.

use axum::Json;
use axum::extract::{Path, State};
use deck_engine::QueuePatch;
use deck_engine::validation::validate_name;

use super::ApiState;
use super::dto::{QueueList, QueuePatchDto, QueueSettings, QueueView};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::ApiJson;
use super::limits::Name;
use super::principal::{Operator, Viewer};
use super::responses::{OperatorErrors, ReadErrors, SingleBodyErrors};

/// Every queue that has settings or jobs, with its settings, live counts and lag.
#[utoipa::path(
    get, path = "/queues", tag = "queues",
    responses(
        (status = 200, description = "Every queue", body = QueueList),
        ReadErrors,
    )
)]
pub async fn list_queues(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
) -> ApiResult<Json<QueueList>> {
    let store = state.engine.store();
    let stats = store.queue_stats().await?;
    // Rate limits live with the queue's settings, not its counters.
    let limits: std::collections::HashMap<String, deck_engine::QueueConfig> = store
        .list_queues()
        .await?
        .into_iter()
        .map(|q| (q.name.clone(), q))
        .collect();
    Ok(Json(QueueList {
        queues: stats
            .iter()
            .map(|s| {
                let mut view = QueueView::from(s);
                if let Some(q) = limits.get(&s.queue) {
                    view.rate_limit = q.rate_limit.map(Into::into);
                    view.rate_limited_until = q.rate_limited_until;
                }
                view
            })
            .collect(),
    }))
}

/// Stop claiming new jobs from a queue (running jobs finish; buffered ones are released).
#[utoipa::path(
    post, path = "/queues/{name}/pause", tag = "queues",
    params(("name" = Name, Path, description = "Queue name")),
    responses(
        (status = 200, description = "Paused; the queue's settings", body = QueueSettings),
        (status = 400, description = "Invalid queue name", body = ErrorBody),
        OperatorErrors,
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
    apply(&state, &who.name, &name, patch).await
}

/// Start claiming from a paused queue again.
#[utoipa::path(
    post, path = "/queues/{name}/resume", tag = "queues",
    params(("name" = Name, Path, description = "Queue name")),
    responses(
        (status = 200, description = "Resumed; the queue's settings", body = QueueSettings),
        (status = 400, description = "Invalid queue name", body = ErrorBody),
        OperatorErrors,
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
    apply(&state, &who.name, &name, patch).await
}

/// Change a queue's settings. Absent fields stay; `null` clears an override.
///
/// An empty patch (`{}`) is refused (400 `empty_patch`).
#[utoipa::path(
    patch, path = "/queues/{name}", tag = "queues",
    params(("name" = Name, Path, description = "Queue name")),
    request_body = QueuePatchDto,
    responses(
        (status = 200, description = "The queue's settings after the change", body = QueueSettings),
        (status = 400, description = "Invalid input; nothing was changed", body = ErrorBody),
        (status = 409, description = "`lag_crit_secs` would be below `lag_warn_secs`", body = ErrorBody),
        OperatorErrors,
        SingleBodyErrors,
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
             zombie_timeout_secs, execution_timeout_secs, lag_warn_secs, lag_crit_secs, rate_limit",
        ));
    }
    apply(&state, &who.name, &name, patch.into()).await
}

async fn apply(
    state: &ApiState,
    actor: &str,
    name: &str,
    patch: QueuePatch,
) -> ApiResult<Json<QueueSettings>> {
    validate_name("name", name)?;
    let config = state
        .engine
        .operations()
        .update_queue(actor, name, patch)
        .await?;
    Ok(Json(config.into()))
}

//! `GET /instances`: the engine instances and external workers with a recent heartbeat, as
//! the console's Instances page lists them (quiet and resume are in `instances`).

use std::time::Duration;

use axum::Json;
use axum::extract::State;

use super::ApiState;
use super::dto::admin::{InstanceList, InstanceView};
use super::error::{ApiResult, ErrorBody};
use super::principal::Viewer;
use super::responses::ReadErrors;

/// An instance is listed while its last heartbeat is at most this old (the console's).
const LISTED_FOR: Duration = Duration::from_secs(60);

/// Instances with a heartbeat in the last minute, newest first.
#[utoipa::path(
    get, path = "/instances", tag = "instances",
    responses(
        (status = 200, description = "The live instances, and lost or stopped ones still holding jobs", body = InstanceList),
        (status = 403, description = "A worker principal: it may only run jobs", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn list_instances(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
) -> ApiResult<Json<InstanceList>> {
    let instances = state.engine.store().list_instances(LISTED_FOR).await?;
    Ok(Json(InstanceList {
        instances: instances.iter().map(InstanceView::from).collect(),
    }))
}

//! Summary numbers for dashboards and scripts.

use axum::Json;
use axum::extract::State;

use super::ApiState;
use super::dto::Stats;
use super::error::{ApiResult, ErrorBody};
use super::principal::Viewer;

/// Whole-system counts and rates (approximate: maintained counters, per-minute buckets,
/// read at most once per 2 s tick and shared by every caller).
#[utoipa::path(
    get, path = "/stats", tag = "stats",
    responses(
        (status = 200, description = "Counts and rates", body = Stats),
        (status = 401, description = "No or bad credentials", body = ErrorBody),
        (status = 503, description = "The store is busy or unavailable; retry", body = ErrorBody),
    )
)]
pub async fn stats(State(state): State<ApiState>, Viewer(_who): Viewer) -> ApiResult<Json<Stats>> {
    let telemetry = state.telemetry.telemetry().await?;
    Ok(Json(Stats::from(&telemetry.summary)))
}

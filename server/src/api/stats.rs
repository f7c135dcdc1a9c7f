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
    responses((status = 200, body = Stats), (status = 401, body = ErrorBody))
)]
pub async fn stats(State(state): State<ApiState>, Viewer(_who): Viewer) -> ApiResult<Json<Stats>> {
    let telemetry = state.telemetry.telemetry().await?;
    Ok(Json(Stats::from(&telemetry.summary)))
}

//! Summary numbers for dashboards and scripts.

use axum::Json;
use axum::extract::State;

use super::ApiState;
use super::dto::Stats;
use super::error::ApiResult;
use super::principal::Viewer;
use super::responses::ReadErrors;

/// Whole-system counts and rates (approximate: maintained counters, per-minute buckets,
/// read at most once per 2 s tick and shared by every caller).
#[utoipa::path(
    get, path = "/stats", tag = "stats",
    responses(
        (status = 200, description = "Counts and rates", body = Stats),
        ReadErrors,
    )
)]
pub async fn stats(State(state): State<ApiState>, Viewer(_who): Viewer) -> ApiResult<Json<Stats>> {
    let telemetry = state.telemetry.snapshot().await?;
    Ok(Json(Stats::from(&telemetry.summary)))
}

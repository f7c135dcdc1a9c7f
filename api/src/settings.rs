//! Engine settings: read, replace (`PUT`) and change some (`PATCH`), through
//! `Operations::save_settings` — the console's settings form's checks (`validation::
//! validate_settings`), audit row (`settings.save`, before and after) and event.

use axum::Json;
use axum::extract::State;
use deck_engine::EngineSettings;

use super::ApiState;
use super::dto::admin::{SettingsBody, SettingsPatch};
use super::error::{ApiResult, ErrorBody};
use super::extract::ApiJson;
use super::principal::{Operator, Viewer};
use super::responses::{OperatorErrors, ReadErrors, SmallBodyErrors};

/// The engine settings every instance follows.
#[utoipa::path(
    get, path = "/settings", tag = "settings",
    responses(
        (status = 200, description = "The settings in force", body = SettingsBody),
        (status = 403, description = "A worker principal: it may only run jobs", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn get_settings(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
) -> ApiResult<Json<SettingsBody>> {
    let settings = state.engine.store().load_settings().await?;
    Ok(Json(SettingsBody::from(&settings)))
}

/// Replace every engine setting. Applied here at once and by every instance at its next
/// instance heartbeat; audited with the settings before and after.
#[utoipa::path(
    put, path = "/settings", tag = "settings",
    request_body = SettingsBody,
    responses(
        (status = 200, description = "Saved; the settings in force", body = SettingsBody),
        (status = 400, description = "A setting out of its range, or `retry.base_delay_ms` \
                                       over `retry.max_delay_ms`; nothing was saved", body = ErrorBody),
        OperatorErrors,
        SmallBodyErrors,
    )
)]
pub async fn replace_settings(
    State(state): State<ApiState>,
    Operator(who): Operator,
    ApiJson(body): ApiJson<SettingsBody>,
) -> ApiResult<Json<SettingsBody>> {
    save(&state, &who.name, body.into()).await
}

/// Change some engine settings; absent fields stay. A patch that changes nothing saves
/// nothing (and writes no audit row).
#[utoipa::path(
    patch, path = "/settings", tag = "settings",
    request_body = SettingsPatch,
    responses(
        (status = 200, description = "The settings in force after the change", body = SettingsBody),
        (status = 400, description = "A setting out of its range, or `retry.base_delay_ms` \
                                       over `retry.max_delay_ms` (as patched or as saved); \
                                       nothing was saved", body = ErrorBody),
        OperatorErrors,
        SmallBodyErrors,
    )
)]
pub async fn patch_settings(
    State(state): State<ApiState>,
    Operator(who): Operator,
    ApiJson(patch): ApiJson<SettingsPatch>,
) -> ApiResult<Json<SettingsBody>> {
    let current = state.engine.store().load_settings().await?;
    let wanted = patch.apply(&current);
    if wanted == current {
        return Ok(Json(SettingsBody::from(&current)));
    }
    save(&state, &who.name, wanted).await
}

async fn save(
    state: &ApiState,
    actor: &str,
    settings: EngineSettings,
) -> ApiResult<Json<SettingsBody>> {
    state
        .engine
        .operations()
        .save_settings(actor, settings.clone())
        .await?;
    Ok(Json(SettingsBody::from(&settings)))
}

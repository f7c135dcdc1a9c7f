//! Instance endpoints: quiet an engine instance (it claims no new jobs and finishes what it
//! runs and holds) and resume it, as the console's Instances page does.

use axum::Json;
use axum::extract::{Path, State};
use deck_engine::Applied;
use deck_engine::validation::validate_name;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::limits::Name;
use super::principal::Operator;
use super::responses::OperatorErrors;

/// An instance's claiming state after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InstanceState {
    pub id: String,
    /// True: it claims no new jobs until resumed.
    pub quiet: bool,
}

/// Stop an engine instance claiming new jobs; its running and buffered jobs finish. Every
/// instance learns it at its next instance heartbeat (this one at once).
#[utoipa::path(
    post, path = "/instances/{instance}/quiet", tag = "instances",
    params(("instance" = Name, Path, description = "Instance id, as the Instances page lists it")),
    responses(
        (status = 200, description = "Quieted", body = InstanceState),
        (status = 400, description = "Invalid instance id", body = ErrorBody),
        (status = 404, description = "No such instance", body = ErrorBody),
        (status = 409, description = "An external worker: it decides its own claims", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn quiet(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(instance): Path<String>,
) -> ApiResult<Json<InstanceState>> {
    apply(&state, &who.name, &instance, true).await
}

/// Let a quieted instance claim jobs again.
#[utoipa::path(
    post, path = "/instances/{instance}/resume", tag = "instances",
    params(("instance" = Name, Path, description = "Instance id, as the Instances page lists it")),
    responses(
        (status = 200, description = "Resumed", body = InstanceState),
        (status = 400, description = "Invalid instance id", body = ErrorBody),
        (status = 404, description = "No such instance", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn resume(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(instance): Path<String>,
) -> ApiResult<Json<InstanceState>> {
    apply(&state, &who.name, &instance, false).await
}

async fn apply(
    state: &ApiState,
    actor: &str,
    instance: &str,
    quiet: bool,
) -> ApiResult<Json<InstanceState>> {
    validate_name("instance", instance)?;
    match state
        .engine
        .operations()
        .set_instance_quiet(actor, instance, quiet)
        .await?
    {
        Applied::Applied => Ok(Json(InstanceState {
            id: instance.to_string(),
            quiet,
        })),
        Applied::NotApplied => Err(ApiError::not_found(
            "instance_not_found",
            format!("no instance {instance} is registered; it may have stopped"),
        )),
    }
}

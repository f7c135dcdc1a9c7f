//! `DELETE /jobs/{id}`: delete one job for good, as the console's job page does — a pending
//! active job, a succeeded or a dead one — through `Operations::purge`, audited as
//! `job.purge` like the console's.

use axum::Json;
use axum::extract::{Path, State};
use deck_engine::{JobState, Pillar};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::ApiState;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::parse_job_id;
use super::jobs::job_not_found;
use super::principal::Operator;
use super::responses::OperatorErrors;

/// A purged job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Purged {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    /// The list it was deleted from: `active`, `archive` or `dlq`.
    pub source: String,
}

/// Delete a job for good: a pending active job, a succeeded one or a dead letter. A job that
/// was fetched or is running cannot be purged (cancel it first).
#[utoipa::path(
    delete, path = "/jobs/{id}", tag = "jobs",
    params(("id" = Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "Purged", body = Purged),
        (status = 400, description = "Not a job id", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job is fetched or running: cancel it first", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn purge(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(id): Path<String>,
) -> ApiResult<Json<Purged>> {
    let id = parse_job_id(&id)?;
    let ops = state.engine.operations();
    let job = ops
        .store()
        .get_job(id)
        .await?
        .ok_or_else(|| job_not_found(id))?;
    let source = job.pillar();
    if source == Pillar::Hot && job.state != JobState::Pending {
        return Err(not_purgeable(id, job.state));
    }
    if ops.purge(&who.name, source, id).await? == 0 {
        // It moved on between the read and the delete: say where it is now.
        return Err(match ops.store().get_job(id).await? {
            Some(now) if now.pillar() == source => not_purgeable(id, now.state),
            Some(now) => ApiError::conflict(
                "job_moved",
                format!(
                    "job {id} moved to {} while it was being purged; send the request again",
                    now.pillar()
                ),
            ),
            None => job_not_found(id),
        });
    }
    Ok(Json(Purged {
        id: id.0,
        source: source.as_str().to_string(),
    }))
}

fn not_purgeable(id: deck_engine::JobId, state: JobState) -> ApiError {
    ApiError::conflict(
        "job_not_purgeable",
        format!(
            "job {id} is {state}; only pending, succeeded and dead jobs can be purged — cancel \
             it first (POST /api/v1/jobs/{id}/cancel)"
        ),
    )
}

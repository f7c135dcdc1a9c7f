//! `GET /error-groups`: the dead letters grouped by what killed them, largest first, as the
//! console's dead-letter overview lists them. A group's `fingerprint` is the job list's
//! `error_group` filter; acting on a group is a bulk action over that filter.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;

use super::ApiState;
use super::dto::admin::{ErrorGroupList, ErrorGroupView};
use super::error::{ApiResult, ErrorBody};
use super::extract::ApiQuery;
use super::limits::check_count;
use super::principal::Viewer;
use super::responses::ReadErrors;

/// Groups listed when `?limit=` is absent.
const DEFAULT_GROUPS: u32 = 50;
/// Most groups one read lists.
pub const MAX_GROUPS: u32 = 500;

/// `?limit=` of the error groups.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GroupsQuery {
    /// How many groups, 1 to 500; 50 when absent.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// The largest error groups of the dead-letter queue.
#[utoipa::path(
    get, path = "/error-groups", tag = "jobs",
    params(GroupsQuery),
    responses(
        (status = 200, description = "Error groups, largest first", body = ErrorGroupList),
        (status = 400, description = "A bad `limit`", body = ErrorBody),
        (status = 403, description = "A worker principal: it may only run jobs", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn list_error_groups(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
    ApiQuery(query): ApiQuery<GroupsQuery>,
) -> ApiResult<Json<ErrorGroupList>> {
    let limit = check_count("limit", query.limit, DEFAULT_GROUPS, MAX_GROUPS)?;
    let groups = state.engine.store().top_errors(limit).await?;
    Ok(Json(ErrorGroupList {
        groups: groups.iter().map(ErrorGroupView::from).collect(),
    }))
}

//! Batch endpoints: create a batch of jobs with callbacks (one transaction, all or none),
//! list batches, and read one with its members.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use deck_engine::BatchId;
use serde::Deserialize;
use utoipa::IntoParams;

use super::ApiState;
use super::dto::batches::{
    BatchCreatedView, BatchDetail, BatchList, BatchView, MemberView, NewBatch, wire_field,
};
use super::dto::check_batch_size;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::ApiJson;
use super::extract::ApiQuery;
use super::principal::{Operator, Viewer};
use super::responses::{BatchBodyErrors, OperatorErrors, ReadErrors};

const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 500;
const DEFAULT_MEMBERS: u32 = 100;
const MAX_MEMBERS: u32 = 1000;

fn parse_batch_id(raw: &str, field: &'static str) -> Result<BatchId, ApiError> {
    raw.parse().map_err(|_| {
        ApiError::bad_request(
            "invalid_id",
            format!(
                "{raw:?} is not a batch id; batch ids are UUIDs like 0192f0c1-7d1e-7c3a-9a51-3c1f4f0e2b6d"
            ),
        )
        .with_field(field)
    })
}

fn not_found(id: BatchId) -> ApiError {
    ApiError::not_found(
        "batch_not_found",
        format!("no batch {id}; GET /api/v1/batches lists them"),
    )
}

/// Enqueue many jobs as one batch, with callbacks: `on_success` when every member
/// succeeded, `on_complete` when every member finished, `on_death` when one died. Each
/// callback is a job enqueued exactly once, in the transaction of the member move that
/// makes it due. All members are written in one transaction, or none.
#[utoipa::path(
    post, path = "/batches", tag = "batches",
    request_body = NewBatch,
    responses(
        (status = 201, description = "Created", body = BatchCreatedView),
        (status = 400, description = "Invalid input; nothing was written", body = ErrorBody),
        OperatorErrors,
        BatchBodyErrors,
    )
)]
pub async fn create_batch(
    State(state): State<ApiState>,
    Operator(who): Operator,
    ApiJson(body): ApiJson<NewBatch>,
) -> ApiResult<(StatusCode, Json<BatchCreatedView>)> {
    // Inside the request span (`traces::write_request_span`): the members' spans link back to
    // the caller's trace.
    check_batch_size(body.jobs.len())?;
    let created = state
        .engine
        .create_batch(body.into_request(&who.name))
        .await
        .map_err(|e| wire_field(e.into()))?;
    Ok((
        StatusCode::CREATED,
        Json(BatchCreatedView {
            batch: BatchView::from(&created.batch),
            job_ids: created.job_ids.iter().map(|id| id.0).collect(),
        }),
    ))
}

/// `?before=` and `?limit=` of the batch list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BatchPage {
    /// Only batches older than this one (the previous page's `next_before`).
    #[param(value_type = Option<String>, format = Uuid)]
    pub before: Option<String>,
    /// How many, 1 to 500; 50 when absent.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// Batches, newest first.
#[utoipa::path(
    get, path = "/batches", tag = "batches",
    params(BatchPage),
    responses(
        (status = 200, description = "A page of batches", body = BatchList),
        (status = 400, description = "A bad `before` or `limit`", body = ErrorBody),
        (status = 403, description = "A worker principal: it may only run jobs", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn list_batches(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
    ApiQuery(query): ApiQuery<BatchPage>,
) -> ApiResult<Json<BatchList>> {
    let limit = super::limits::check_count("limit", query.limit, DEFAULT_PAGE, MAX_PAGE)?;
    let before = query
        .before
        .as_deref()
        .map(|b| parse_batch_id(b, "before"))
        .transpose()?;
    let batches = state.engine.store().list_batches(before, limit).await?;
    let next_before = (batches.len() == limit as usize)
        .then(|| batches.last().map(|b| b.id.0))
        .flatten();
    Ok(Json(BatchList {
        batches: batches.iter().map(BatchView::from).collect(),
        next_before,
    }))
}

/// `?members=` of a batch read.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MembersQuery {
    /// How many members to list, 1 to 1000; 100 when absent.
    #[param(minimum = 1, maximum = 1000)]
    pub members: Option<u32>,
}

/// One batch with its counts, callbacks and members (active first, then dead, then
/// succeeded).
#[utoipa::path(
    get, path = "/batches/{id}", tag = "batches",
    params(("id" = Uuid, Path, description = "Batch id"), MembersQuery),
    responses(
        (status = 200, description = "The batch", body = BatchDetail),
        (status = 400, description = "Not a batch id, or a bad `members`", body = ErrorBody),
        (status = 403, description = "A worker principal: it may only run jobs", body = ErrorBody),
        (status = 404, description = "No such batch (`batch_not_found`)", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn get_batch(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<MembersQuery>,
) -> ApiResult<Json<BatchDetail>> {
    let id = parse_batch_id(&id, "id")?;
    let members =
        super::limits::check_count("members", query.members, DEFAULT_MEMBERS, MAX_MEMBERS)?;
    let store = state.engine.store();
    let Some(batch) = store.get_batch(id).await? else {
        return Err(not_found(id));
    };
    let members = store
        .batch_members(id, members)
        .await?
        .iter()
        .map(MemberView::from)
        .collect();
    Ok(Json(BatchDetail {
        batch: BatchView::from(&batch),
        members,
    }))
}

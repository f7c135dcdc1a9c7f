//! `GET /audit`: the audit log with the console's filters (actor, action or action family,
//! time range) and paging (newest first, `before` an entry id).

use axum::Json;
use axum::extract::State;
use deck_engine::AuditFilter;
use serde::Deserialize;
use utoipa::IntoParams;

use super::ApiState;
use super::dto::admin::{AuditEntryView, AuditPage};
use super::dto::job_lists::{ListTime, parse_time};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::ApiQuery;
use super::limits::check_count;
use super::principal::Viewer;
use super::responses::ReadErrors;

/// Entries listed when `?limit=` is absent.
const DEFAULT_ENTRIES: u32 = 50;
/// Most entries one read lists.
pub const MAX_ENTRIES: u32 = 500;
/// Largest `?before=`: the largest integer every JSON client reads exactly (2^53 - 1), as the
/// document states it.
const MAX_ENTRY_ID: i64 = 9_007_199_254_740_991;

/// The audit log's filters and page.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Exactly this actor.
    pub actor: Option<String>,
    /// An action (`queue.pause`) or its family (`queue` matches every `queue.…`).
    pub action: Option<String>,
    /// At or after this time.
    #[param(value_type = Option<ListTime>)]
    pub from: Option<String>,
    /// Before this time.
    #[param(value_type = Option<ListTime>)]
    pub to: Option<String>,
    /// Only entries older than this one (the previous page's `next_before`).
    #[param(minimum = 1, maximum = 9007199254740991.0)]
    pub before: Option<i64>,
    /// How many, 1 to 500; 50 when absent.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

fn text(v: Option<String>) -> Option<String> {
    v.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// Operator actions, newest first: who did what to which jobs, queues, schedules,
/// instances or settings, from the console and the API alike.
#[utoipa::path(
    get, path = "/audit", tag = "audit",
    params(AuditQuery),
    responses(
        (status = 200, description = "A page of the audit log", body = AuditPage),
        (status = 400, description = "A bad time, `before` or `limit`", body = ErrorBody),
        (status = 403, description = "A worker principal: it may only run jobs", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn list_audit(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> ApiResult<Json<AuditPage>> {
    let limit = check_count("limit", query.limit, DEFAULT_ENTRIES, MAX_ENTRIES)?;
    if let Some(before) = query.before
        && !(1..=MAX_ENTRY_ID).contains(&before)
    {
        return Err(ApiError::bad_request(
            "invalid_field",
            format!(
                "invalid before: is {before}; give an entry id (1 to {MAX_ENTRY_ID}), the \
                 previous page's next_before"
            ),
        )
        .with_field("before"));
    }
    let filter = AuditFilter {
        actor: text(query.actor),
        action: text(query.action),
        from: parse_time("from", query.from)?,
        to: parse_time("to", query.to)?,
    };
    // One more than the page: whether an older page exists.
    let mut entries = state
        .engine
        .store()
        .list_audit(&filter, query.before, limit + 1)
        .await?;
    let more = entries.len() > limit as usize;
    entries.truncate(limit as usize);
    Ok(Json(AuditPage {
        next_before: more.then(|| entries.last().map(|e| e.id)).flatten(),
        entries: entries.iter().map(AuditEntryView::from).collect(),
    }))
}

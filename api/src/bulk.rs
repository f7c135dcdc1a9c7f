//! Bulk actions by filter, as the console's bulk pages run them: one endpoint per action
//! (so each body says exactly what it needs), a run in the background through
//! `Operations::start_bulk` (stepped in short transactions, audited once at its end), its
//! progress by id; and run now for one job. The preview is the job list itself
//! (`GET /jobs` with the same filter: its count and first rows).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use deck_engine::validation::MAX_BULK_CAP;
use deck_engine::{Applied, BulkAction, BulkRun, BulkRunRequest, FailureReason, JobFilter, Pillar};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::ApiState;
use super::dto::job_lists::{
    FingerprintText, HotStatusName, ListTime, ReasonName, SourceName, parse_time, status_filter,
};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{ApiJson, parse_job_id};
use super::job_lists::{fingerprint, given, invalid_status, named, search_text};
use super::principal::{Operator, Viewer};
use super::responses::{OperatorErrors, ReadErrors};
use super::wire::integer;

/// Which jobs a bulk action touches, with the job list's filters (`GET /jobs`, whose count
/// and first rows are the preview): every given field must match; fields that do not apply
/// to the list (a status outside active jobs, a reason outside dead letters) are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkFilter {
    /// Jobs of this queue.
    pub queue: Option<String>,
    /// Jobs of this type.
    #[serde(rename = "type")]
    pub job_type: Option<String>,
    #[schema(value_type = Option<HotStatusName>)]
    pub status: Option<String>,
    #[schema(value_type = Option<ReasonName>)]
    pub reason: Option<String>,
    /// Dead letters: one error group (`GET /error-groups`).
    #[schema(value_type = Option<FingerprintText>)]
    pub error_group: Option<String>,
    /// Jobs carrying exactly this tag.
    pub tag: Option<String>,
    /// Case-insensitive text in the id (or an id prefix of 12 hex digits or more), type, tags
    /// and last error.
    #[schema(max_length = 200)]
    pub q: Option<String>,
    #[schema(value_type = Option<ListTime>)]
    pub created_from: Option<String>,
    #[schema(value_type = Option<ListTime>)]
    pub created_to: Option<String>,
    /// Succeeded jobs and dead letters only.
    #[schema(value_type = Option<ListTime>)]
    pub finished_from: Option<String>,
    #[schema(value_type = Option<ListTime>)]
    pub finished_to: Option<String>,
}

impl BulkFilter {
    fn into_filter(self) -> Result<JobFilter, ApiError> {
        let mut filter = JobFilter {
            queue: given(self.queue),
            job_type: given(self.job_type),
            tag: given(self.tag),
            text: search_text(self.q)?,
            created_from: parse_time("created_from", self.created_from)?,
            created_to: parse_time("created_to", self.created_to)?,
            finished_from: parse_time("finished_from", self.finished_from)?,
            finished_to: parse_time("finished_to", self.finished_to)?,
            ..JobFilter::default()
        };
        if let Some(raw) = self.status
            && !status_filter(&raw, &mut filter)
        {
            return Err(invalid_status(&raw));
        }
        if let Some(raw) = self.reason {
            filter.reason = Some(named(
                "reason",
                &raw,
                &FailureReason::ALL,
                FailureReason::as_str,
            )?);
        }
        if let Some(raw) = self.error_group {
            filter.error_group = Some(fingerprint(&raw)?);
        }
        Ok(filter)
    }
}

/// The most jobs this run may touch (1 to 100,000; 1,000 when absent).
fn default_cap() -> u32 {
    1_000
}

/// Cancel every active job the filter matches: pending and buffered ones go to the
/// dead-letter queue as `Cancelled`, running ones are asked to stop.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkCancel {
    #[serde(default)]
    pub filter: BulkFilter,
    #[serde(default = "default_cap", deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 100_000, default = 1_000)]
    pub cap: u32,
    /// The word `CANCEL`: this cannot be undone.
    #[schema(pattern = "^CANCEL$")]
    pub confirm: String,
}

/// Make every pending job the filter matches that waits for a later time (delayed or
/// retrying) due now; no attempt is spent.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRunNow {
    #[serde(default)]
    pub filter: BulkFilter,
    #[serde(default = "default_cap", deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 100_000, default = 1_000)]
    pub cap: u32,
}

/// Give every pending job the filter matches a new priority (higher runs first).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkPriority {
    #[serde(default)]
    pub filter: BulkFilter,
    #[serde(default = "default_cap", deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 100_000, default = 1_000)]
    pub cap: u32,
    #[serde(deserialize_with = "integer")]
    pub priority: i32,
}

/// Delete for good every job of a list the filter matches (active jobs: pending only).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkPurge {
    #[schema(value_type = SourceName)]
    pub source: String,
    #[serde(default)]
    pub filter: BulkFilter,
    #[serde(default = "default_cap", deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 100_000, default = 1_000)]
    pub cap: u32,
    /// The word `PURGE`: this cannot be undone.
    #[schema(pattern = "^PURGE$")]
    pub confirm: String,
}

/// Move every dead letter the filter matches back to pending with fresh attempts.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkResurrect {
    #[serde(default)]
    pub filter: BulkFilter,
    #[serde(default = "default_cap", deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 100_000, default = 1_000)]
    pub cap: u32,
    /// The word `RESURRECT`.
    #[schema(pattern = "^RESURRECT$")]
    pub confirm: String,
}

/// A bulk run: started, running or finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BulkRunView {
    /// The run's id: `GET /bulk/{run}` follows it.
    pub id: String,
    pub actor: String,
    /// `cancel`, `run_now`, `set_priority`, `purge` or `resurrect`.
    pub action: String,
    /// The new priority of a `set_priority` run.
    pub priority: Option<i32>,
    /// `active`, `archive` or `dlq`.
    pub source: String,
    pub cap: u32,
    /// Jobs matching the filter when the run started (counted up to 10,000).
    pub matching: u64,
    /// The count stopped at 10,000: at least `matching` jobs matched, and the run goes on to
    /// its cap.
    pub matching_capped: bool,
    /// Jobs the action has been applied to so far.
    pub done: u64,
    pub finished: bool,
    /// Why the run stopped early; the steps before it stand.
    pub error: Option<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<BulkRun> for BulkRunView {
    fn from(run: BulkRun) -> Self {
        BulkRunView {
            priority: match run.action {
                BulkAction::SetPriority(p) => Some(p),
                _ => None,
            },
            action: run.action.as_str().to_string(),
            source: run.source.as_str().to_string(),
            id: run.id,
            actor: run.actor,
            cap: run.cap,
            matching: run.matching,
            matching_capped: run.matching_capped,
            done: run.done,
            finished: run.finished,
            error: run.error,
            started_at: run.started,
            finished_at: run.finished_at,
        }
    }
}

async fn start(
    state: &ApiState,
    actor: &str,
    action: BulkAction,
    source: Pillar,
    filter: BulkFilter,
    cap: u32,
    confirm: Option<&str>,
) -> ApiResult<(StatusCode, Json<BulkRunView>)> {
    if let Some(word) = action.confirm_word()
        && confirm.map(str::trim) != Some(word)
    {
        return Err(ApiError::bad_request(
            "not_confirmed",
            format!("this cannot be undone: send \"confirm\": \"{word}\" to run it"),
        )
        .with_field("confirm"));
    }
    if !(1..=MAX_BULK_CAP).contains(&cap) {
        return Err(ApiError::bad_request(
            "invalid_field",
            format!(
                "cap {cap} is out of range; give 1 to {MAX_BULK_CAP} and start another run for more"
            ),
        )
        .with_field("cap"));
    }
    let request = BulkRunRequest {
        action,
        source,
        filter: filter.into_filter()?,
        cap,
    };
    let run = state.engine.operations().start_bulk(actor, request).await?;
    Ok((StatusCode::ACCEPTED, Json(run.into())))
}

/// Cancel every active job a filter matches, in the background; follow it with
/// `GET /bulk/{run}`. Preview it with `GET /jobs?source=active&…` (its count and first rows).
#[utoipa::path(
    post, path = "/jobs/bulk/cancel", tag = "bulk",
    request_body = BulkCancel,
    responses(
        (status = 202, description = "Started", body = BulkRunView),
        (status = 400, description = "Invalid filter or cap, or not confirmed", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn cancel(
    State(state): State<ApiState>,
    Operator(who): Operator,
    ApiJson(body): ApiJson<BulkCancel>,
) -> ApiResult<(StatusCode, Json<BulkRunView>)> {
    let confirm = Some(body.confirm.as_str());
    start(
        &state,
        &who.name,
        BulkAction::Cancel,
        Pillar::Hot,
        body.filter,
        body.cap,
        confirm,
    )
    .await
}

/// Make every waiting pending job a filter matches due now (no attempt spent), in the
/// background.
#[utoipa::path(
    post, path = "/jobs/bulk/run_now", tag = "bulk",
    request_body = BulkRunNow,
    responses(
        (status = 202, description = "Started", body = BulkRunView),
        (status = 400, description = "Invalid filter or cap", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn run_now(
    State(state): State<ApiState>,
    Operator(who): Operator,
    ApiJson(body): ApiJson<BulkRunNow>,
) -> ApiResult<(StatusCode, Json<BulkRunView>)> {
    start(
        &state,
        &who.name,
        BulkAction::RunNow,
        Pillar::Hot,
        body.filter,
        body.cap,
        None,
    )
    .await
}

/// Give every pending job a filter matches a new priority, in the background.
#[utoipa::path(
    post, path = "/jobs/bulk/priority", tag = "bulk",
    request_body = BulkPriority,
    responses(
        (status = 202, description = "Started", body = BulkRunView),
        (status = 400, description = "Invalid filter or cap", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn priority(
    State(state): State<ApiState>,
    Operator(who): Operator,
    ApiJson(body): ApiJson<BulkPriority>,
) -> ApiResult<(StatusCode, Json<BulkRunView>)> {
    let action = BulkAction::SetPriority(body.priority);
    start(
        &state,
        &who.name,
        action,
        Pillar::Hot,
        body.filter,
        body.cap,
        None,
    )
    .await
}

/// Delete for good every job of a list a filter matches (active jobs: pending only), in the
/// background.
#[utoipa::path(
    post, path = "/jobs/bulk/purge", tag = "bulk",
    request_body = BulkPurge,
    responses(
        (status = 202, description = "Started", body = BulkRunView),
        (status = 400, description = "Invalid filter or cap, or not confirmed", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn purge(
    State(state): State<ApiState>,
    Operator(who): Operator,
    ApiJson(body): ApiJson<BulkPurge>,
) -> ApiResult<(StatusCode, Json<BulkRunView>)> {
    let confirm = Some(body.confirm.as_str());
    let source = named("source", &body.source, &Pillar::ALL, Pillar::as_str)?;
    start(
        &state,
        &who.name,
        BulkAction::Purge,
        source,
        body.filter,
        body.cap,
        confirm,
    )
    .await
}

/// Resurrect every dead letter a filter matches (an error group: `filter.error_group`), in
/// the background.
#[utoipa::path(
    post, path = "/dlq/bulk/resurrect", tag = "bulk",
    request_body = BulkResurrect,
    responses(
        (status = 202, description = "Started", body = BulkRunView),
        (status = 400, description = "Invalid filter or cap, or not confirmed", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn resurrect(
    State(state): State<ApiState>,
    Operator(who): Operator,
    ApiJson(body): ApiJson<BulkResurrect>,
) -> ApiResult<(StatusCode, Json<BulkRunView>)> {
    let confirm = Some(body.confirm.as_str());
    start(
        &state,
        &who.name,
        BulkAction::Resurrect,
        Pillar::Dlq,
        body.filter,
        body.cap,
        confirm,
    )
    .await
}

/// A bulk run started by this instance (kept a day after it finished).
#[utoipa::path(
    get, path = "/bulk/{run}", tag = "bulk",
    params(("run" = String, Path, description = "The run's id, as its start answered")),
    responses(
        (status = 200, description = "The run", body = BulkRunView),
        (status = 404, description = "No such run in this instance", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn get_run(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
    Path(run): Path<String>,
) -> ApiResult<Json<BulkRunView>> {
    let id = run;
    match state.engine.operations().bulk_run(&id) {
        Some(run) => Ok(Json(run.into())),
        None => Err(ApiError::not_found(
            "bulk_run_not_found",
            format!(
                "no bulk run {id} in this instance; runs are kept in memory for a day by the \
                 instance that ran them"
            ),
        )),
    }
}

/// What run now did to one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RanNow {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    /// False when the job was already due.
    pub changed: bool,
}

/// Run a pending job now that waits for a later time (delayed, or waiting for its retry):
/// due at once, no attempt spent.
#[utoipa::path(
    post, path = "/jobs/{id}/run_now", tag = "jobs",
    params(("id" = Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "Due now (or already was)", body = RanNow),
        (status = 400, description = "Not a job id", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job is not pending: buffered, running or finished", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn run_job_now(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(id): Path<String>,
) -> ApiResult<Json<RanNow>> {
    let id = parse_job_id(&id)?;
    let applied = state.engine.operations().run_now(&who.name, id).await?;
    Ok(Json(RanNow {
        id: id.0,
        changed: applied == Applied::Applied,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every body's `cap` publishes the engine's bound and the default the server applies.
    #[test]
    fn the_cap_schema_is_the_engines() {
        for schema in [
            <BulkCancel as utoipa::PartialSchema>::schema(),
            <BulkRunNow as utoipa::PartialSchema>::schema(),
            <BulkPriority as utoipa::PartialSchema>::schema(),
            <BulkPurge as utoipa::PartialSchema>::schema(),
            <BulkResurrect as utoipa::PartialSchema>::schema(),
        ] {
            let doc = serde_json::to_value(schema).unwrap();
            let cap = &doc["properties"]["cap"];
            assert_eq!(
                cap["maximum"].as_u64(),
                Some(u64::from(MAX_BULK_CAP)),
                "{doc}"
            );
            assert_eq!(
                cap["default"].as_u64(),
                Some(u64::from(default_cap())),
                "{doc}"
            );
        }
    }

    #[test]
    fn statuses_split_pending_as_the_tiles_do() {
        use deck_engine::{HotStatus, Timing};
        let filter = |status: &str| {
            BulkFilter {
                status: Some(status.into()),
                ..BulkFilter::default()
            }
            .into_filter()
        };
        assert_eq!(filter("due").unwrap().timing, Some(Timing::Due));
        assert_eq!(filter("retrying").unwrap().timing, Some(Timing::Retrying));
        assert_eq!(filter("pending").unwrap().status, Some(HotStatus::Pending));
        assert!(filter("soon").is_err());
    }
}

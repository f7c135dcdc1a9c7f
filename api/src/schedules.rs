//! Schedule endpoints: list, read with the coming occurrences in any zone, create, replace,
//! pause, resume, run now, delete, and the run history. Every write goes through the
//! engine's operations (audited there as `schedule.*`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::Utc;
use deck_engine::schedule::{Timing, parse_zone};
use deck_engine::validation::validate_name;
use deck_engine::{Applied, FireOutcome, StoreError};
use serde::Deserialize;
use utoipa::IntoParams;

use super::ApiState;
use super::dto::schedules::{
    NewSchedule, OccurrenceDto, RunNowOutcome, ScheduleBody, ScheduleDetail, ScheduleList,
    ScheduleRunDto, ScheduleRuns, ScheduleView, wire_field,
};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{ApiJson, ApiQuery};
use super::limits::{
    DEFAULT_RUNS, DEFAULT_UPCOMING, MAX_RUNS, MAX_UPCOMING, ScheduleName, ZoneQuery, check_count,
};
use super::principal::{Operator, Viewer};
use super::responses::{OperatorErrors, ReadErrors, SingleBodyErrors};

/// Every schedule, by name, with its next run and last run.
#[utoipa::path(
    get, path = "/schedules", tag = "schedules",
    responses(
        (status = 200, description = "Every schedule", body = ScheduleList),
        (status = 403, description = "A worker principal: it may only run jobs", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn list_schedules(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
) -> ApiResult<Json<ScheduleList>> {
    let now = Utc::now();
    let mut schedules: Vec<ScheduleView> = state
        .engine
        .store()
        .list_schedules()
        .await?
        .iter()
        .map(|s| ScheduleView::new(s, now))
        .collect();
    schedules.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Json(ScheduleList { schedules }))
}

/// Create a schedule, enabled. Its first occurrence is the first one after now.
#[utoipa::path(
    post, path = "/schedules", tag = "schedules",
    request_body = NewSchedule,
    responses(
        (status = 201, description = "Created", body = ScheduleView),
        (status = 400, description = "Invalid input (a cron expression, time zone, limit); \
                                      nothing was written", body = ErrorBody),
        (status = 409, description = "A schedule by that name exists (`schedule_exists`)", body = ErrorBody),
        OperatorErrors,
        SingleBodyErrors,
    )
)]
pub async fn create_schedule(
    State(state): State<ApiState>,
    Operator(who): Operator,
    ApiJson(body): ApiJson<ScheduleBody>,
) -> ApiResult<(StatusCode, Json<ScheduleView>)> {
    let Some(name) = body.name.clone() else {
        return Err(
            ApiError::bad_request("missing_field", "missing field `name`; add it")
                .with_field("name"),
        );
    };
    let definition = body.into_definition(name)?;
    let created = state
        .engine
        .operations()
        .create_schedule(&who.name, definition)
        .await
        .map_err(|e| wire_field(e.into()))?;
    Ok((
        StatusCode::CREATED,
        Json(ScheduleView::new(&created, Utc::now())),
    ))
}

/// `?count=` and `?tz=` of a schedule read.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UpcomingQuery {
    /// How many coming occurrences to list, 1 to 50; 5 when absent.
    #[param(minimum = 1, maximum = 50)]
    pub count: Option<u32>,
    /// The IANA time zone to show them in (each also in UTC); the schedule's own when absent
    /// or empty (`?tz=`, as a form with no zone chosen sends it).
    #[param(value_type = Option<ZoneQuery>)]
    pub tz: Option<String>,
}

/// One schedule, with its next occurrences in UTC and in a zone of the caller's choice.
#[utoipa::path(
    get, path = "/schedules/{name}", tag = "schedules",
    params(("name" = ScheduleName, Path, description = "Schedule name"), UpcomingQuery),
    responses(
        (status = 200, description = "The schedule and its coming occurrences", body = ScheduleDetail),
        (status = 400, description = "Invalid name, `count` or `tz`", body = ErrorBody),
        (status = 403, description = "A worker principal: it may only run jobs", body = ErrorBody),
        (status = 404, description = "No schedule by that name (`schedule_not_found`)", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn get_schedule(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
    Path(name): Path<String>,
    ApiQuery(query): ApiQuery<UpcomingQuery>,
) -> ApiResult<Json<ScheduleDetail>> {
    validate_name("name", &name)?;
    let count = check_count("count", query.count, DEFAULT_UPCOMING, MAX_UPCOMING)?;
    let shown_in = query
        .tz
        .as_deref()
        .filter(|tz| !tz.is_empty())
        .map(|tz| {
            parse_zone(tz).map_err(|mut e| {
                e.field = "tz".into();
                ApiError::from(e)
            })
        })
        .transpose()?;
    let schedule = state.engine.operations().schedule(&name).await?;
    let now = Utc::now();
    let def = &schedule.definition;
    let timing = Timing::parse(&def.spec, &def.time_zone)?;
    let zone = shown_in.unwrap_or_else(|| timing.zone());
    let upcoming = timing
        .upcoming(now.max(schedule.handled_through), count as usize)
        .into_iter()
        .map(|at| OccurrenceDto::new(at, &zone))
        .collect();
    Ok(Json(ScheduleDetail {
        schedule: ScheduleView::new(&schedule, now),
        upcoming_time_zone: zone.name().to_string(),
        upcoming,
    }))
}

/// Replace a schedule's definition. It starts from now: no occurrence from before the
/// replace is caught up on. Its state stays: paused or not, last run and history. A declared
/// schedule stays declared: the next start puts the declared definition back.
#[utoipa::path(
    put, path = "/schedules/{name}", tag = "schedules",
    params(("name" = ScheduleName, Path, description = "Schedule name")),
    request_body = ScheduleBody,
    responses(
        (status = 200, description = "The schedule after the change", body = ScheduleView),
        (status = 400, description = "Invalid input, or a body `name` other than the path's \
                                      (`name_mismatch`); nothing was changed", body = ErrorBody),
        (status = 404, description = "No schedule by that name (`schedule_not_found`)", body = ErrorBody),
        OperatorErrors,
        SingleBodyErrors,
    )
)]
pub async fn replace_schedule(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<ScheduleBody>,
) -> ApiResult<Json<ScheduleView>> {
    validate_name("name", &name)?;
    if let Some(given) = body.name.as_deref().filter(|given| *given != name) {
        return Err(ApiError::bad_request(
            "name_mismatch",
            format!(
                "the body names schedule {given:?} but the path {name:?}; a schedule cannot be \
                 renamed: leave `name` out, or create the new name and delete the old"
            ),
        )
        .with_field("name"));
    }
    let definition = body.into_definition(name)?;
    let edited = state
        .engine
        .operations()
        .edit_schedule(&who.name, definition)
        .await
        .map_err(|e| wire_field(e.into()))?;
    Ok(Json(ScheduleView::new(&edited, Utc::now())))
}

/// Pause a schedule: no occurrence runs until it is resumed, and those that pass meanwhile
/// are not caught up on.
#[utoipa::path(
    post, path = "/schedules/{name}/pause", tag = "schedules",
    params(("name" = ScheduleName, Path, description = "Schedule name")),
    responses(
        (status = 200, description = "Paused", body = ScheduleView),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 404, description = "No schedule by that name (`schedule_not_found`)", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn pause(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(name): Path<String>,
) -> ApiResult<Json<ScheduleView>> {
    set_enabled(&state, &who.name, &name, false).await
}

/// Resume a paused schedule from its next occurrence after now.
#[utoipa::path(
    post, path = "/schedules/{name}/resume", tag = "schedules",
    params(("name" = ScheduleName, Path, description = "Schedule name")),
    responses(
        (status = 200, description = "Resumed", body = ScheduleView),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 404, description = "No schedule by that name (`schedule_not_found`)", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn resume(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(name): Path<String>,
) -> ApiResult<Json<ScheduleView>> {
    set_enabled(&state, &who.name, &name, true).await
}

async fn set_enabled(
    state: &ApiState,
    actor: &str,
    name: &str,
    enabled: bool,
) -> ApiResult<Json<ScheduleView>> {
    validate_name("name", name)?;
    let changed = state
        .engine
        .operations()
        .set_schedule_enabled(actor, name, enabled)
        .await?;
    Ok(Json(ScheduleView::new(&changed, Utc::now())))
}

/// Enqueue the schedule's job now, outside its timing (also while paused). The schedule's
/// cursor does not move, and the overlap policy does not apply: an operator asked for this
/// run. It shows in the run history as `manual`.
#[utoipa::path(
    post, path = "/schedules/{name}/run", tag = "schedules",
    params(("name" = ScheduleName, Path, description = "Schedule name")),
    responses(
        (status = 202, description = "Enqueued: `job_id` is the job, `GET /jobs/{id}` follows it", body = RunNowOutcome),
        (status = 200, description = "No job enqueued (`skipped` or `already_handled`)", body = RunNowOutcome),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 404, description = "No schedule by that name (`schedule_not_found`)", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn run_now(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(name): Path<String>,
) -> ApiResult<(StatusCode, Json<RunNowOutcome>)> {
    validate_name("name", &name)?;
    let outcome = state
        .engine
        .operations()
        .run_schedule_now(&who.name, &name)
        .await?;
    let status = match outcome {
        FireOutcome::Enqueued(_) => StatusCode::ACCEPTED,
        FireOutcome::AlreadyHandled | FireOutcome::SkippedOverlap => StatusCode::OK,
    };
    Ok((status, Json(outcome.into())))
}

/// Delete a schedule and its run history. The jobs it enqueued stay.
#[utoipa::path(
    delete, path = "/schedules/{name}", tag = "schedules",
    params(("name" = ScheduleName, Path, description = "Schedule name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 404, description = "No schedule by that name (`schedule_not_found`)", body = ErrorBody),
        OperatorErrors,
    )
)]
pub async fn delete_schedule(
    State(state): State<ApiState>,
    Operator(who): Operator,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    validate_name("name", &name)?;
    match state
        .engine
        .operations()
        .delete_schedule(&who.name, &name)
        .await?
    {
        Applied::Applied => Ok(StatusCode::NO_CONTENT),
        Applied::NotApplied => Err(StoreError::ScheduleNotFound(name).into()),
    }
}

/// `?limit=` of a run history.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunsQuery {
    /// How many runs to list, newest first: 1 to 500; 50 when absent.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// A schedule's handled occurrences and manual runs, newest first.
#[utoipa::path(
    get, path = "/schedules/{name}/runs", tag = "schedules",
    params(("name" = ScheduleName, Path, description = "Schedule name"), RunsQuery),
    responses(
        (status = 200, description = "The run history", body = ScheduleRuns),
        (status = 400, description = "Invalid name or `limit`", body = ErrorBody),
        (status = 403, description = "A worker principal: it may only run jobs", body = ErrorBody),
        (status = 404, description = "No schedule by that name (`schedule_not_found`)", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn list_runs(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
    Path(name): Path<String>,
    ApiQuery(query): ApiQuery<RunsQuery>,
) -> ApiResult<Json<ScheduleRuns>> {
    validate_name("name", &name)?;
    let limit = check_count("limit", query.limit, DEFAULT_RUNS, MAX_RUNS)?;
    // An unknown name is a 404, not an empty history.
    state.engine.operations().schedule(&name).await?;
    let runs = state
        .engine
        .store()
        .schedule_runs(&name, limit)
        .await?
        .iter()
        .map(ScheduleRunDto::from)
        .collect();
    Ok(Json(ScheduleRuns { runs }))
}

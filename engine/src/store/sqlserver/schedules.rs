//! Recurring schedules on SQL Server: rows to `Schedule`s, and a fire as one transaction per
//! occurrence (its key, its job through `[enqueue_batch]`, the schedule's last run).

use super::SqlServerStore;
use super::pool::{Fault, Repeat};
use super::producers;
use super::queries;
use super::rows::{self, corrupt, req_str};
use crate::error::{StoreError, StoreResult};
use crate::model::Applied;
use crate::schedule::{
    FireOutcome, Schedule, ScheduleDefinition, ScheduleFire, ScheduleOrigin, ScheduleRun,
};

fn schedule(row: &tiberius::Row) -> Result<Schedule, Fault> {
    let name = req_str(row, "name")?;
    let definition: ScheduleDefinition = serde_json::from_str(&req_str(row, "definition")?)
        .map_err(|e| {
            corrupt(format!(
                "schedule {name:?} has a definition this version cannot read: {e}"
            ))
        })?;
    let origin_text = req_str(row, "origin")?;
    let origin = ScheduleOrigin::parse(&origin_text)
        .ok_or_else(|| corrupt(format!("schedule {name:?} has origin {origin_text:?}")))?;
    let last_run = match rows::opt_time(row, "last_scheduled_at")? {
        Some(at) => Some(ScheduleRun {
            schedule: name.clone(),
            scheduled_at: at,
            job_id: match row.try_get::<&[u8], _>("last_job_id")? {
                Some(_) if rows::req_bool(row, "last_skipped")? => None,
                Some(bytes) => Some(rows::id_from_bytes(bytes)?),
                None => None,
            },
            manual: rows::req_bool(row, "last_manual")?,
            recorded_at: rows::opt_time(row, "last_recorded_at")?.unwrap_or(at),
        }),
        None => None,
    };
    Ok(Schedule {
        definition,
        enabled: rows::req_bool(row, "enabled")?,
        origin,
        handled_through: rows::req_time(row, "handled_through")?,
        last_run,
        created_at: rows::req_time(row, "created_at")?,
        updated_at: rows::req_time(row, "updated_at")?,
    })
}

fn json(definition: &ScheduleDefinition) -> StoreResult<String> {
    serde_json::to_string(definition).map_err(|e| StoreError::database("encode schedule", e, false))
}

async fn one_schedule(
    store: &SqlServerStore,
    operation: &'static str,
    statement: &queries::Statement,
    params: &[&dyn tiberius::ToSql],
) -> StoreResult<Option<Schedule>> {
    let rows = store
        .rows_of(operation, Repeat::Always, statement, params)
        .await?;
    rows.first()
        .map(|r| schedule(r).map_err(|f| store.fault(operation, f)))
        .transpose()
}

pub(super) async fn list(store: &SqlServerStore) -> StoreResult<Vec<Schedule>> {
    let rows = store
        .rows_of(
            "list_schedules",
            Repeat::Always,
            &queries::LIST_SCHEDULES,
            &[],
        )
        .await?;
    store.map_rows("list_schedules", &rows, schedule)
}

/// Write a schedule's definition, a new row (`CREATE_SCHEDULE`, with whether it is `enabled`)
/// or over the existing one (`REPLACE_SCHEDULE`, `None`), and read the row back: none when
/// the name is taken, or there is no such schedule to replace.
async fn write_definition(
    store: &SqlServerStore,
    definition: &ScheduleDefinition,
    origin: ScheduleOrigin,
    enabled: Option<bool>,
) -> StoreResult<Option<Schedule>> {
    let doc = json(definition)?;
    let origin_text = origin.as_str();
    let name = definition.name.as_str();
    match enabled {
        Some(enabled) => {
            one_schedule(
                store,
                "create_schedule",
                &queries::CREATE_SCHEDULE,
                &[&name, &doc, &enabled, &origin_text],
            )
            .await
        }
        None => {
            one_schedule(
                store,
                "replace_schedule",
                &queries::REPLACE_SCHEDULE,
                &[&name, &doc, &origin_text],
            )
            .await
        }
    }
}

pub(super) async fn create(
    store: &SqlServerStore,
    definition: ScheduleDefinition,
    origin: ScheduleOrigin,
    enabled: bool,
) -> StoreResult<Schedule> {
    let name = definition.name.as_str();
    write_definition(store, &definition, origin, Some(enabled))
        .await?
        .ok_or_else(|| StoreError::Conflict {
            code: "schedule_exists",
            field: Some("name"),
            message: format!(
                "a schedule named {name:?} exists already; edit it, or choose another name"
            ),
        })
}

pub(super) async fn replace(
    store: &SqlServerStore,
    definition: ScheduleDefinition,
    origin: ScheduleOrigin,
) -> StoreResult<Schedule> {
    write_definition(store, &definition, origin, None)
        .await?
        .ok_or_else(|| StoreError::ScheduleNotFound(definition.name.clone()))
}

pub(super) async fn set_enabled(
    store: &SqlServerStore,
    name: &str,
    enabled: bool,
) -> StoreResult<Schedule> {
    one_schedule(
        store,
        "set_schedule_enabled",
        &queries::SET_SCHEDULE_ENABLED,
        &[&name, &enabled],
    )
    .await?
    .ok_or_else(|| StoreError::ScheduleNotFound(name.to_string()))
}

pub(super) async fn delete(store: &SqlServerStore, name: &str) -> StoreResult<Applied> {
    let deleted = store
        .count_of(
            "delete_schedule",
            Repeat::Always,
            &queries::DELETE_SCHEDULE,
            &[&name],
            "deleted",
        )
        .await?;
    Ok(if deleted == 0 {
        Applied::NotApplied
    } else {
        Applied::Applied
    })
}

/// One transaction per occurrence: an occurrence's key and job commit together, which
/// is what makes it one job; the cursor moves with the last call. A retry after an
/// ambiguous failure finds the key it wrote and answers "handled already".
pub(super) async fn fire(
    store: &SqlServerStore,
    fire: ScheduleFire,
) -> StoreResult<Vec<FireOutcome>> {
    let name = fire.schedule.as_str();
    let through = fire.handled_through.map(rows::to_sql_time);
    let count = fire.occurrences.len();
    let mut outcomes = Vec::with_capacity(count);
    if count == 0 {
        let none: Option<chrono::NaiveDateTime> = None;
        let outcome = fire_one(
            store,
            name,
            none,
            fire.manual,
            &[],
            "[]",
            fire.skip_while_active,
            through,
        )
        .await?;
        if outcome == 0 {
            return Err(StoreError::ScheduleNotFound(name.to_string()));
        }
        return Ok(outcomes);
    }
    for (i, occurrence) in fire.occurrences.iter().enumerate() {
        let jobs = producers::request_json(
            std::slice::from_ref(&occurrence.job),
            Some(&[occurrence.job_id]),
        )?;
        let id = rows::id_param(&occurrence.job_id);
        let at = Some(rows::to_sql_time(occurrence.scheduled_at));
        let cursor = if i + 1 == count { through } else { None };
        let outcome = fire_one(
            store,
            name,
            at,
            fire.manual,
            id,
            &jobs,
            fire.skip_while_active,
            cursor,
        )
        .await?;
        outcomes.push(match outcome {
            0 => return Err(StoreError::ScheduleNotFound(name.to_string())),
            1 => FireOutcome::Enqueued(occurrence.job_id),
            3 => FireOutcome::SkippedOverlap,
            _ => FireOutcome::AlreadyHandled,
        });
    }
    Ok(outcomes)
}

#[allow(clippy::too_many_arguments)]
async fn fire_one(
    store: &SqlServerStore,
    name: &str,
    at: Option<chrono::NaiveDateTime>,
    manual: bool,
    id: &[u8],
    jobs: &str,
    skip_while_active: bool,
    through: Option<chrono::NaiveDateTime>,
) -> StoreResult<u64> {
    let params: [&dyn tiberius::ToSql; 7] = [
        &name,
        &at,
        &manual,
        &id,
        &jobs,
        &skip_while_active,
        &through,
    ];
    // Re-sent after any transient fault, a timeout included: the occurrence's run row
    // makes a second attempt answer "handled already" if the first committed. A duplicate
    // key is transient here: where the server does not hold UPDLOCK, HOLDLOCK key-range
    // locks (Babelfish ignores table hints), two instances firing one occurrence meet at
    // the run row's primary key, and the loser's retry finds it handled.
    let rows = store
        .rows_of_keyed("fire_schedule", &queries::FIRE_SCHEDULE, &params)
        .await?;
    match rows.first() {
        Some(row) => rows::count(row, "outcome").map_err(|f| store.fault("fire_schedule", f)),
        None => Ok(0),
    }
}

pub(super) async fn runs(
    store: &SqlServerStore,
    name: &str,
    limit: u32,
) -> StoreResult<Vec<ScheduleRun>> {
    let top = i32::try_from(limit.clamp(1, 1_000)).unwrap_or(1_000);
    let rows = store
        .rows_of(
            "schedule_runs",
            Repeat::Always,
            &queries::SCHEDULE_RUNS,
            &[&name, &top],
        )
        .await?;
    store.map_rows("schedule_runs", &rows, |row| {
        Ok(ScheduleRun {
            schedule: name.to_string(),
            scheduled_at: rows::req_time(row, "scheduled_at")?,
            manual: rows::req_bool(row, "manual")?,
            job_id: match row.try_get::<&[u8], _>("job_id")? {
                Some(bytes) => Some(rows::id_from_bytes(bytes)?),
                None => None,
            },
            recorded_at: rows::req_time(row, "recorded_at")?,
        })
    })
}

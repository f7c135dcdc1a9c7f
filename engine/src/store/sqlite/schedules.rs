//! Recurring schedules: their rows, and the fire that writes an occurrence's key and its job
//! in one writer transaction (so two processes on one file never both enqueue it).

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::{StoreError, StoreResult};
use crate::model::Applied;
use crate::schedule::{
    FireOutcome, Schedule, ScheduleDefinition, ScheduleFire, ScheduleOrigin, ScheduleRun,
};

use super::codec::{from_us, id_text, opt_from_us, parse_id, to_json, to_us};
use super::connection::db_err;
use super::producers;

const SCHEDULE_COLUMNS: &str = "name, definition, enabled, origin, handled_through, \
     last_scheduled_at, last_job_id, last_skipped, last_manual, last_recorded_at, created_at, \
     updated_at";

fn corrupt(name: &str, what: impl std::fmt::Display) -> StoreError {
    StoreError::database(
        "read schedule",
        format!("schedule {name:?} has a stored {what} this version cannot read"),
        false,
    )
}

/// A row as read, before its JSON definition is decoded (outside rusqlite's row closure, so
/// a bad document is a clear error rather than a conversion failure).
struct RawSchedule {
    name: String,
    definition: String,
    enabled: bool,
    origin: String,
    handled_through: i64,
    last_scheduled_at: Option<i64>,
    last_job_id: Option<String>,
    last_skipped: Option<bool>,
    last_manual: Option<bool>,
    last_recorded_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

fn raw(r: &Row<'_>) -> rusqlite::Result<RawSchedule> {
    Ok(RawSchedule {
        name: r.get(0)?,
        definition: r.get(1)?,
        enabled: r.get(2)?,
        origin: r.get(3)?,
        handled_through: r.get(4)?,
        last_scheduled_at: r.get(5)?,
        last_job_id: r.get(6)?,
        last_skipped: r.get(7)?,
        last_manual: r.get(8)?,
        last_recorded_at: r.get(9)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
    })
}

impl RawSchedule {
    fn decode(self) -> StoreResult<Schedule> {
        let definition: ScheduleDefinition = serde_json::from_str(&self.definition)
            .map_err(|e| corrupt(&self.name, format_args!("definition ({e})")))?;
        let origin = ScheduleOrigin::parse(&self.origin)
            .ok_or_else(|| corrupt(&self.name, format_args!("origin {:?}", self.origin)))?;
        let last_run = match self.last_scheduled_at {
            Some(at) => Some(ScheduleRun {
                schedule: self.name.clone(),
                scheduled_at: from_us(at),
                job_id: match self
                    .last_job_id
                    .as_ref()
                    .filter(|_| self.last_skipped != Some(true))
                {
                    Some(text) => {
                        Some(parse_id(text).map_err(|_| corrupt(&self.name, "last job id"))?)
                    }
                    None => None,
                },
                manual: self.last_manual.unwrap_or(false),
                recorded_at: opt_from_us(self.last_recorded_at).unwrap_or(from_us(at)),
            }),
            None => None,
        };
        Ok(Schedule {
            definition,
            enabled: self.enabled,
            origin,
            handled_through: from_us(self.handled_through),
            last_run,
            created_at: from_us(self.created_at),
            updated_at: from_us(self.updated_at),
        })
    }
}

pub(crate) fn list(conn: &Connection) -> StoreResult<Vec<Schedule>> {
    let sql = format!("SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY name");
    let mut stmt = conn
        .prepare_cached(&sql)
        .map_err(db_err("list schedules"))?;
    let rows = stmt
        .query_map([], raw)
        .map_err(db_err("list schedules"))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err("list schedules"))?;
    rows.into_iter().map(RawSchedule::decode).collect()
}

fn get(conn: &Connection, name: &str) -> StoreResult<Option<Schedule>> {
    let sql = format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE name = ?1");
    let row = conn
        .prepare_cached(&sql)
        .map_err(db_err("read schedule"))?
        .query_row([name], raw)
        .optional()
        .map_err(db_err("read schedule"))?;
    row.map(RawSchedule::decode).transpose()
}

fn found(conn: &Connection, name: &str) -> StoreResult<Schedule> {
    get(conn, name)?.ok_or_else(|| StoreError::ScheduleNotFound(name.to_string()))
}

pub(crate) fn create(
    conn: &Connection,
    definition: &ScheduleDefinition,
    origin: ScheduleOrigin,
    enabled: bool,
    now: i64,
) -> StoreResult<Schedule> {
    let json = to_json(definition)?;
    let inserted = conn
        .prepare_cached(
            "INSERT INTO schedules (name, definition, enabled, origin, handled_through, \
             created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?5) \
             ON CONFLICT (name) DO NOTHING",
        )
        .map_err(db_err("create schedule"))?
        .execute(params![
            definition.name,
            json,
            enabled,
            origin.as_str(),
            now
        ])
        .map_err(db_err("create schedule"))?;
    if inserted == 0 {
        return Err(StoreError::Conflict {
            code: "schedule_exists",
            field: Some("name"),
            message: format!(
                "a schedule named {:?} exists already; edit it, or choose another name",
                definition.name
            ),
        });
    }
    found(conn, &definition.name)
}

pub(crate) fn replace(
    conn: &Connection,
    definition: &ScheduleDefinition,
    origin: ScheduleOrigin,
    now: i64,
) -> StoreResult<Schedule> {
    let json = to_json(definition)?;
    let changed = conn
        .prepare_cached(
            "UPDATE schedules SET definition = ?2, origin = ?3, updated_at = ?4, \
             handled_through = MAX(handled_through, ?4) WHERE name = ?1",
        )
        .map_err(db_err("edit schedule"))?
        .execute(params![definition.name, json, origin.as_str(), now])
        .map_err(db_err("edit schedule"))?;
    if changed == 0 {
        return Err(StoreError::ScheduleNotFound(definition.name.clone()));
    }
    found(conn, &definition.name)
}

pub(crate) fn set_enabled(
    conn: &Connection,
    name: &str,
    enabled: bool,
    now: i64,
) -> StoreResult<Schedule> {
    let changed = conn
        .prepare_cached(
            "UPDATE schedules SET enabled = ?2, updated_at = ?3, \
             handled_through = CASE WHEN ?2 AND enabled = 0 AND handled_through < ?3 \
                                    THEN ?3 ELSE handled_through END \
             WHERE name = ?1",
        )
        .map_err(db_err("pause schedule"))?
        .execute(params![name, enabled, now])
        .map_err(db_err("pause schedule"))?;
    if changed == 0 {
        return Err(StoreError::ScheduleNotFound(name.to_string()));
    }
    found(conn, name)
}

pub(crate) fn delete(conn: &Connection, name: &str) -> StoreResult<Applied> {
    conn.prepare_cached("DELETE FROM schedule_runs WHERE schedule = ?1")
        .map_err(db_err("delete schedule"))?
        .execute([name])
        .map_err(db_err("delete schedule"))?;
    let n = conn
        .prepare_cached("DELETE FROM schedules WHERE name = ?1")
        .map_err(db_err("delete schedule"))?
        .execute([name])
        .map_err(db_err("delete schedule"))?;
    Ok(if n == 0 {
        Applied::NotApplied
    } else {
        Applied::Applied
    })
}

/// Whether the schedule's last job is still in the hot pillar (pending, fetched, running).
fn last_job_active(conn: &Connection, name: &str) -> StoreResult<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM schedules s JOIN jobs j ON j.id = s.last_job_id \
         WHERE s.name = ?1)",
    )
    .map_err(db_err("fire schedule"))?
    .query_row([name], |r| r.get(0))
    .map_err(db_err("fire schedule"))
}

pub(crate) fn fire(
    conn: &Connection,
    fire: ScheduleFire,
    now: i64,
) -> StoreResult<Vec<FireOutcome>> {
    let schedule = found(conn, &fire.schedule)?;
    if !schedule.enabled && !fire.manual {
        return Ok(vec![FireOutcome::AlreadyHandled; fire.occurrences.len()]);
    }
    let mut outcomes = Vec::with_capacity(fire.occurrences.len());
    for occurrence in fire.occurrences {
        let at = to_us(occurrence.scheduled_at);
        let skip = fire.skip_while_active && last_job_active(conn, &fire.schedule)?;
        let job_id = (!skip).then_some(occurrence.job_id);
        let keyed = conn
            .prepare_cached(
                "INSERT INTO schedule_runs (schedule, scheduled_at, manual, job_id, recorded_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
            )
            .map_err(db_err("fire schedule"))?
            .execute(params![
                fire.schedule,
                at,
                fire.manual,
                job_id.map(id_text),
                now
            ])
            .map_err(db_err("fire schedule"))?;
        if keyed == 0 {
            outcomes.push(FireOutcome::AlreadyHandled);
            continue;
        }
        match job_id {
            Some(id) => {
                producers::enqueue_with_id(conn, occurrence.job, id, now)?;
                outcomes.push(FireOutcome::Enqueued(id));
            }
            None => outcomes.push(FireOutcome::SkippedOverlap),
        }
        // The next occurrence of this call sees this job as the schedule's last one.
        conn.prepare_cached(
            "UPDATE schedules SET last_scheduled_at = ?2, last_job_id = COALESCE(?3, last_job_id), \
             last_skipped = ?3 IS NULL, last_manual = ?4, last_recorded_at = ?5 WHERE name = ?1",
        )
        .map_err(db_err("fire schedule"))?
        .execute(params![
            fire.schedule,
            at,
            job_id.map(id_text),
            fire.manual,
            now
        ])
        .map_err(db_err("fire schedule"))?;
    }
    if let Some(through) = fire.handled_through {
        conn.prepare_cached(
            "UPDATE schedules SET handled_through = MAX(handled_through, ?2) WHERE name = ?1",
        )
        .map_err(db_err("fire schedule"))?
        .execute(params![fire.schedule, to_us(through)])
        .map_err(db_err("fire schedule"))?;
    }
    Ok(outcomes)
}

pub(crate) fn runs(conn: &Connection, name: &str, limit: u32) -> StoreResult<Vec<ScheduleRun>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT scheduled_at, manual, job_id, recorded_at FROM schedule_runs \
             WHERE schedule = ?1 ORDER BY recorded_at DESC, scheduled_at DESC LIMIT ?2",
        )
        .map_err(db_err("schedule history"))?;
    let rows = stmt
        .query_map(params![name, i64::from(limit)], |r| {
            let job: Option<String> = r.get(2)?;
            Ok(ScheduleRun {
                schedule: name.to_string(),
                scheduled_at: from_us(r.get(0)?),
                manual: r.get(1)?,
                job_id: job.as_deref().map(parse_id).transpose()?,
                recorded_at: from_us(r.get(3)?),
            })
        })
        .map_err(db_err("schedule history"))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err("schedule history"))?;
    Ok(rows)
}

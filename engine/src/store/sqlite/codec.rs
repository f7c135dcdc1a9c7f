//! Conversions between the model and rows: times, tags, JSON columns, and the column lists
//! every query of a pillar selects in the same order.

use chrono::{DateTime, Utc};
use rusqlite::Row;

use crate::batch::BatchId;
use crate::error::{StoreError, StoreResult};
use crate::model::{
    AttemptError, Continuation, FailureReason, HotStatus, Job, JobId, JobState, Pillar, Timestamp,
};
use crate::query::JobSummary;

pub(crate) fn now_us() -> i64 {
    Utc::now().timestamp_micros()
}

pub(crate) fn to_us(t: Timestamp) -> i64 {
    t.timestamp_micros()
}

pub(crate) fn from_us(us: i64) -> Timestamp {
    DateTime::from_timestamp_micros(us).unwrap_or_default()
}

pub(crate) fn opt_from_us(us: Option<i64>) -> Option<Timestamp> {
    us.map(from_us)
}

pub(crate) fn duration_us(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Start of the minute holding `us`.
pub(crate) fn minute_of(us: i64) -> i64 {
    us.div_euclid(60_000_000) * 60_000_000
}

/// `,a,b,` so that "has tag x" is `instr(tags, ',x,') > 0`; empty when there are none.
pub(crate) fn encode_tags(tags: &[String]) -> String {
    if tags.is_empty() {
        String::new()
    } else {
        format!(",{},", tags.join(","))
    }
}

pub(crate) fn decode_tags(text: &str) -> Vec<String> {
    text.split(',')
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

pub(crate) fn id_text(id: JobId) -> String {
    id.0.as_hyphenated().to_string()
}

/// A JSON array of id strings, bound as one parameter and read with `json_each`.
pub(crate) fn ids_json(ids: &[JobId]) -> String {
    let texts: Vec<String> = ids.iter().map(|id| id_text(*id)).collect();
    serde_json::to_string(&texts).unwrap_or_else(|_| "[]".into())
}

pub(crate) fn parse_id(text: &str) -> rusqlite::Result<JobId> {
    text.parse().map_err(|e: uuid::Error| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::database("encode json", e, false))
}

fn json_col<T: serde::de::DeserializeOwned>(
    idx: usize,
    text: Option<String>,
) -> rusqlite::Result<Option<T>> {
    match text {
        None => Ok(None),
        Some(t) if t.is_empty() => Ok(None),
        Some(t) => serde_json::from_str(&t).map(Some).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))
        }),
    }
}

pub(crate) fn error_json(error: &AttemptError) -> StoreResult<String> {
    to_json(error)
}

/// Columns every pillar has, in the order `job_from_row` reads them.
pub(crate) const COMMON_COLS: &str = "id, queue, job_type, priority, tags, attempt, max_attempts, \
     created_at, scheduled_at, started_at, heartbeat_at, expires_at, worker_id, idempotency_key, \
     correlation_id, created_by, continuation, errors, original_payload, payload, batch_id, \
     trace_context";
const COMMON_COUNT: usize = 22;

/// Pillar-specific columns appended after `COMMON_COLS`.
pub(crate) fn extra_cols(pillar: Pillar) -> &'static str {
    match pillar {
        Pillar::Hot => "status, cancel_requested, NULL, NULL, NULL",
        Pillar::Archive => "NULL, 0, finished_at, result, NULL",
        Pillar::Dlq => "reason, 0, finished_at, NULL, fingerprint",
    }
}

pub(crate) fn table(pillar: Pillar) -> &'static str {
    match pillar {
        Pillar::Hot => "jobs",
        Pillar::Archive => "archive",
        Pillar::Dlq => "dlq",
    }
}

/// `SELECT <all job columns> FROM <table>` for one pillar.
pub(crate) fn select_job(pillar: Pillar) -> String {
    format!(
        "SELECT {COMMON_COLS}, {} FROM {}",
        extra_cols(pillar),
        table(pillar)
    )
}

fn conversion(idx: usize, what: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        idx,
        rusqlite::types::Type::Integer,
        format!("unknown {what} code").into(),
    )
}

fn state_of(pillar: Pillar, code: Option<i64>, idx: usize) -> rusqlite::Result<JobState> {
    match pillar {
        Pillar::Hot => HotStatus::from_code(code.unwrap_or(-1))
            .map(JobState::from)
            .ok_or_else(|| conversion(idx, "status")),
        Pillar::Archive => Ok(JobState::Succeeded),
        Pillar::Dlq => FailureReason::from_code(code.unwrap_or(-1))
            .map(JobState::Dead)
            .ok_or_else(|| conversion(idx, "failure reason")),
    }
}

fn u32_of(v: i64) -> u32 {
    u32::try_from(v.max(0)).unwrap_or(u32::MAX)
}

pub(crate) fn job_from_row(pillar: Pillar, r: &Row<'_>) -> rusqlite::Result<Job> {
    let c = COMMON_COUNT;
    let id: String = r.get(0)?;
    let tags: String = r.get(4)?;
    Ok(Job {
        id: parse_id(&id)?,
        queue: r.get(1)?,
        job_type: r.get(2)?,
        priority: r.get(3)?,
        tags: decode_tags(&tags),
        attempt: u32_of(r.get(5)?),
        max_attempts: r.get::<_, Option<i64>>(6)?.map(u32_of),
        created_at: from_us(r.get(7)?),
        scheduled_at: from_us(r.get(8)?),
        started_at: opt_from_us(r.get(9)?),
        heartbeat_at: opt_from_us(r.get(10)?),
        expires_at: opt_from_us(r.get(11)?),
        worker_id: r.get(12)?,
        idempotency_key: r.get(13)?,
        correlation_id: r.get(14)?,
        created_by: r.get(15)?,
        continuation: json_col::<Continuation>(16, r.get(16)?)?,
        errors: json_col::<Vec<AttemptError>>(17, r.get(17)?)?.unwrap_or_default(),
        original_payload: r.get(18)?,
        payload: r.get(19)?,
        batch_id: r
            .get::<_, Option<String>>(20)?
            .map(|t| parse_id(&t).map(|id| BatchId(id.0)))
            .transpose()?,
        trace_context: r.get(21)?,
        state: state_of(pillar, r.get(c)?, c)?,
        cancel_requested: r.get::<_, i64>(c + 1)? != 0,
        finished_at: opt_from_us(r.get(c + 2)?),
        result: r.get(c + 3)?,
        error_group: r.get(c + 4)?,
    })
}

/// Columns of a list row, in the order `summary_from_row` reads them. Never the payload.
pub(crate) fn summary_cols(pillar: Pillar) -> &'static str {
    match pillar {
        Pillar::Hot => {
            "id, queue, job_type, priority, tags, attempt, created_at, scheduled_at, started_at, \
             worker_id, substr(last_error, 1, 300), status, NULL"
        }
        Pillar::Archive => {
            "id, queue, job_type, priority, tags, attempt, created_at, scheduled_at, started_at, \
             worker_id, substr(last_error, 1, 300), NULL, finished_at"
        }
        Pillar::Dlq => {
            "id, queue, job_type, priority, tags, attempt, created_at, scheduled_at, started_at, \
             worker_id, substr(last_error, 1, 300), reason, finished_at"
        }
    }
}

pub(crate) fn summary_from_row(pillar: Pillar, r: &Row<'_>) -> rusqlite::Result<JobSummary> {
    let id: String = r.get(0)?;
    let tags: String = r.get(4)?;
    Ok(JobSummary {
        id: parse_id(&id)?,
        queue: r.get(1)?,
        job_type: r.get(2)?,
        priority: r.get(3)?,
        tags: decode_tags(&tags),
        attempt: u32_of(r.get(5)?),
        created_at: from_us(r.get(6)?),
        scheduled_at: from_us(r.get(7)?),
        started_at: opt_from_us(r.get(8)?),
        worker_id: r.get(9)?,
        last_error: r.get(10)?,
        state: state_of(pillar, r.get(11)?, 11)?,
        finished_at: opt_from_us(r.get(12)?),
    })
}

pub(crate) fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

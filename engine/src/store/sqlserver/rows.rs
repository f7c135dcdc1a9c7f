//! Between Rust values and SQL Server rows and parameters: ids as BINARY(16) in RFC 4122
//! byte order (hex on the wire inside JSON), UTC times as DATETIME2(6), tags as `,a,b,`.

use chrono::{DateTime, NaiveDateTime, Timelike, Utc};
use tiberius::Row;
use uuid::Uuid;

use std::time::Duration;

use super::pool::Fault;
use crate::batch::BatchId;
use crate::error::{StoreError, StoreResult};
use crate::fingerprint::FingerprintHead;
use crate::model::{
    AttemptError, Continuation, FailureReason, HotStatus, Job, JobId, JobState, Pillar,
    StoreWrittenError, Timestamp,
};
use crate::query::JobSummary;

pub fn corrupt(what: impl std::fmt::Display) -> Fault {
    Fault::Store(StoreError::Database {
        operation: "read row",
        message: what.to_string(),
        transient: false,
    })
}

/// A job or batch id as canonical UUID text (lower case, hyphens): how ids travel inside JSON
/// (read in T-SQL with the schema's `[uuid_bytes]`) and how the procedures answer them. Single
/// ids go as `BINARY(16)` parameters instead ([`id_param`]).
pub fn id_text(id: JobId) -> String {
    id.0.hyphenated().to_string()
}

/// A JSON array of ids ([`id_text`]).
pub fn ids_json(ids: &[JobId]) -> String {
    let texts: Vec<String> = ids.iter().map(|id| id_text(*id)).collect();
    serde_json::Value::from(texts).to_string()
}

/// The bytes of an id as a `BINARY(16)` parameter, in RFC 4122 order (the stored order).
pub fn id_param(id: &JobId) -> &[u8] {
    id.0.as_bytes()
}

/// An id from UUID text (canonical, or 32 hex digits).
pub fn id_from_text(text: &str) -> Result<JobId, Fault> {
    Uuid::parse_str(text.trim())
        .map(JobId)
        .map_err(|e| corrupt(format!("bad job id {text:?}: {e}")))
}

pub fn id_from_bytes(bytes: &[u8]) -> Result<JobId, Fault> {
    Uuid::from_slice(bytes)
        .map(JobId)
        .map_err(|e| corrupt(format!("bad job id bytes: {e}")))
}

/// A JSON text sent inside a JSON document (a payload, a result): valid JSON as the one
/// element of an array (`[<text>]`, read `AS JSON` and stripped of its brackets), anything
/// else as a string. Babelfish reads a JSON string's escapes as text, so JSON text in a
/// string would not parse there (every object has quotes), and a JSON string nested as a bare
/// value reads without its quotes; in an array, both servers hand back the text — SQL Server
/// exactly as sent, Babelfish normalised (README, SQL Server).
#[derive(Debug, Clone, Copy)]
pub enum JsonText<'a> {
    InArray(&'a serde_json::value::RawValue),
    Text(&'a str),
}

impl<'a> JsonText<'a> {
    pub fn of(text: &'a str) -> Self {
        match serde_json::from_str::<&serde_json::value::RawValue>(text) {
            Ok(value) => JsonText::InArray(value),
            Err(_) => JsonText::Text(text),
        }
    }

    /// The array form, when the text is JSON.
    pub fn in_array(self) -> Option<[&'a serde_json::value::RawValue; 1]> {
        match self {
            JsonText::InArray(value) => Some([value]),
            JsonText::Text(_) => None,
        }
    }

    /// The string form, when the text is not JSON (the statement then says what is wrong).
    pub fn text(self) -> Option<&'a str> {
        match self {
            JsonText::InArray(_) => None,
            JsonText::Text(text) => Some(text),
        }
    }
}

impl serde::Serialize for JsonText<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            JsonText::InArray(value) => [value].serialize(serializer),
            JsonText::Text(text) => serializer.serialize_str(text),
        }
    }
}

/// Microsecond precision, the precision of the columns: what goes in comes back equal.
pub fn to_sql_time(t: Timestamp) -> NaiveDateTime {
    let naive = t.naive_utc();
    let micros = naive.nanosecond() / 1_000 * 1_000;
    naive.with_nanosecond(micros).unwrap_or(naive)
}

/// ISO 8601 without zone (UTC implied), as OPENJSON reads into DATETIME2.
pub fn json_time(t: Timestamp) -> String {
    to_sql_time(t).format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

pub fn from_sql_time(t: NaiveDateTime) -> Timestamp {
    DateTime::from_naive_utc_and_offset(t, Utc)
}

pub fn tags_to_stored(tags: &[String]) -> String {
    if tags.is_empty() {
        String::new()
    } else {
        format!(",{},", tags.join(","))
    }
}

pub fn tags_from_stored(stored: &str) -> Vec<String> {
    stored
        .split(',')
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

pub fn opt_str(row: &Row, col: &str) -> Result<Option<String>, Fault> {
    Ok(row.try_get::<&str, _>(col)?.map(str::to_string))
}

pub fn req_str(row: &Row, col: &str) -> Result<String, Fault> {
    opt_str(row, col)?.ok_or_else(|| corrupt(format!("column {col} is NULL")))
}

/// Any integer column (TINYINT … BIGINT) as i64.
pub fn opt_int(row: &Row, col: &str) -> Result<Option<i64>, Fault> {
    if let Ok(v) = row.try_get::<i64, _>(col) {
        return Ok(v);
    }
    if let Ok(v) = row.try_get::<i32, _>(col) {
        return Ok(v.map(i64::from));
    }
    if let Ok(v) = row.try_get::<i16, _>(col) {
        return Ok(v.map(i64::from));
    }
    if let Ok(v) = row.try_get::<u8, _>(col) {
        return Ok(v.map(i64::from));
    }
    if let Ok(v) = row.try_get::<bool, _>(col) {
        return Ok(v.map(i64::from));
    }
    Err(corrupt(format!("column {col} is not an integer")))
}

pub fn req_int(row: &Row, col: &str) -> Result<i64, Fault> {
    opt_int(row, col)?.ok_or_else(|| corrupt(format!("column {col} is NULL")))
}

pub fn count(row: &Row, col: &str) -> Result<u64, Fault> {
    Ok(u64::try_from(opt_int(row, col)?.unwrap_or(0)).unwrap_or(0))
}

pub fn opt_u32(row: &Row, col: &str) -> Result<Option<u32>, Fault> {
    Ok(opt_int(row, col)?.map(|v| u32::try_from(v).unwrap_or(0)))
}

pub fn req_bool(row: &Row, col: &str) -> Result<bool, Fault> {
    Ok(opt_int(row, col)?.unwrap_or(0) != 0)
}

pub fn opt_time(row: &Row, col: &str) -> Result<Option<Timestamp>, Fault> {
    Ok(row.try_get::<NaiveDateTime, _>(col)?.map(from_sql_time))
}

pub fn req_time(row: &Row, col: &str) -> Result<Timestamp, Fault> {
    opt_time(row, col)?.ok_or_else(|| corrupt(format!("column {col} is NULL")))
}

pub fn row_id(row: &Row, col: &str) -> Result<JobId, Fault> {
    match row.try_get::<&[u8], _>(col) {
        Ok(Some(bytes)) => id_from_bytes(bytes),
        Ok(None) => Err(corrupt(format!("column {col} is NULL"))),
        Err(_) => id_from_text(&req_str(row, col)?),
    }
}

/// A job from one pillar's read columns (`queries::HOT_JOB_COLUMNS`, `ANY_JOB_COLUMNS`).
pub fn job(row: &Row, pillar: Pillar) -> Result<Job, Fault> {
    let errors = match opt_str(row, "errors")? {
        Some(text) => serde_json::from_str::<Vec<AttemptError>>(&text)
            .map_err(|e| corrupt(format!("errors column is not an attempt list: {e}")))?,
        None => Vec::new(),
    };
    let continuation = match opt_str(row, "continuation")? {
        Some(text) => Some(
            serde_json::from_str::<Continuation>(&text)
                .map_err(|e| corrupt(format!("continuation column is not valid: {e}")))?,
        ),
        None => None,
    };
    let (state, cancel_requested, finished_at, result, error_group) = match pillar {
        Pillar::Hot => {
            let code = req_int(row, "status")?;
            let status = HotStatus::from_code(code)
                .ok_or_else(|| corrupt(format!("unknown hot status {code}")))?;
            (
                JobState::from(status),
                req_bool(row, "cancel_requested")?,
                None,
                None,
                None,
            )
        }
        Pillar::Archive => (
            JobState::Succeeded,
            false,
            opt_time(row, "finished_at")?,
            opt_str(row, "result")?,
            None,
        ),
        Pillar::Dlq => {
            let code = req_int(row, "reason")?;
            let reason = FailureReason::from_code(code)
                .ok_or_else(|| corrupt(format!("unknown failure reason {code}")))?;
            (
                JobState::Dead(reason),
                false,
                opt_time(row, "finished_at")?,
                None,
                opt_str(row, "fingerprint")?,
            )
        }
    };
    Ok(Job {
        id: row_id(row, "id")?,
        queue: req_str(row, "queue")?,
        job_type: req_str(row, "job_type")?,
        payload: req_str(row, "payload")?,
        tags: tags_from_stored(&opt_str(row, "tags")?.unwrap_or_default()),
        priority: i32::try_from(req_int(row, "priority")?).unwrap_or(0),
        idempotency_key: opt_str(row, "idempotency_key")?,
        correlation_id: opt_str(row, "correlation_id")?,
        created_by: opt_str(row, "created_by")?,
        created_at: req_time(row, "created_at")?,
        scheduled_at: req_time(row, "scheduled_at")?,
        started_at: opt_time(row, "started_at")?,
        heartbeat_at: opt_time(row, "heartbeat_at")?,
        finished_at,
        expires_at: opt_time(row, "expires_at")?,
        attempt: opt_u32(row, "attempt")?.unwrap_or(0),
        max_attempts: opt_u32(row, "max_attempts")?,
        state,
        worker_id: opt_str(row, "worker_id")?,
        cancel_requested,
        errors,
        result,
        continuation,
        original_payload: opt_str(row, "original_payload")?,
        batch_id: match row.try_get::<&[u8], _>("batch_id")? {
            Some(bytes) => Some(BatchId(id_from_bytes(bytes)?.0)),
            None => None,
        },
        trace_context: opt_str(row, "trace_context")?,
        error_group,
    })
}

/// A job from a statement that reads any pillar (`queries::ANY_JOB_COLUMNS`): the `pillar`
/// column says which (0 hot, 1 archive, 2 DLQ).
pub fn any_job(row: &Row) -> Result<Job, Fault> {
    let pillar = match req_int(row, "pillar")? {
        0 => Pillar::Hot,
        1 => Pillar::Archive,
        2 => Pillar::Dlq,
        other => return Err(corrupt(format!("unknown pillar {other}"))),
    };
    job(row, pillar)
}

/// A job list row (`queries::LIST_*_COLUMNS`).
pub fn summary(row: &Row, pillar: Pillar) -> Result<JobSummary, Fault> {
    let state = match pillar {
        Pillar::Hot => {
            let code = req_int(row, "status")?;
            JobState::from(
                HotStatus::from_code(code)
                    .ok_or_else(|| corrupt(format!("unknown hot status {code}")))?,
            )
        }
        Pillar::Archive => JobState::Succeeded,
        Pillar::Dlq => {
            let code = req_int(row, "reason")?;
            JobState::Dead(
                FailureReason::from_code(code)
                    .ok_or_else(|| corrupt(format!("unknown failure reason {code}")))?,
            )
        }
    };
    Ok(JobSummary {
        id: row_id(row, "id")?,
        queue: req_str(row, "queue")?,
        job_type: req_str(row, "job_type")?,
        state,
        priority: i32::try_from(req_int(row, "priority")?).unwrap_or(0),
        tags: tags_from_stored(&opt_str(row, "tags")?.unwrap_or_default()),
        attempt: opt_u32(row, "attempt")?.unwrap_or(0),
        created_at: req_time(row, "created_at")?,
        scheduled_at: req_time(row, "scheduled_at")?,
        started_at: opt_time(row, "started_at")?,
        finished_at: if pillar == Pillar::Hot {
            None
        } else {
            opt_time(row, "finished_at")?
        },
        worker_id: opt_str(row, "worker_id")?,
        last_error: opt_str(row, "last_error")?.map(|e| e.chars().take(300).collect()),
    })
}

/// A value as a JSON parameter (id lists, requests, settings).
pub fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::database("encode parameters", e, false))
}

/// A count for an `INT` parameter, capped rather than wrapped.
pub fn to_i32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// A duration as whole seconds for an `INT` parameter (`DATEADD(SECOND, …)`), capped.
pub fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX)
}

/// An error the store writes itself, the same text as every backend writes.
pub const fn written(reason: FailureReason) -> StoreWrittenError {
    match reason.store_written() {
        Some(w) => w,
        None => panic!("a reason the store writes has its text"),
    }
}

/// The fingerprint head of an error the store writes (its statements add the job type).
pub fn written_head(reason: FailureReason, written: StoreWrittenError) -> String {
    FingerprintHead::new(reason, written.kind, written.message)
        .as_str()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_travel_as_uuid_text_or_bytes_in_rfc_order() {
        let id = JobId::new();
        let text = id_text(id);
        assert_eq!(text.len(), 36);
        assert_eq!(text, text.to_lowercase());
        assert_eq!(id_from_text(&text).unwrap(), id);
        assert_eq!(id_from_text(&id.0.simple().to_string()).unwrap(), id);
        assert_eq!(id_from_bytes(id_param(&id)).unwrap(), id);
        // RFC byte order keeps UUID v7 ids sorted by time as raw bytes.
        let later = JobId::new();
        assert!(id.0.as_bytes() <= later.0.as_bytes());
        assert_eq!(ids_json(&[id]), format!("[\"{text}\"]"));
    }

    #[test]
    fn times_round_trip_at_microseconds() {
        let t = Utc::now();
        let stored = to_sql_time(t);
        assert_eq!(stored.nanosecond() % 1_000, 0);
        assert_eq!(to_sql_time(from_sql_time(stored)), stored);
        assert!(json_time(t).contains('T'));
        assert!(!json_time(t).ends_with('Z'));
    }

    #[test]
    fn tags_are_comma_wrapped() {
        let tags = vec!["a".to_string(), "bc".to_string()];
        assert_eq!(tags_to_stored(&tags), ",a,bc,");
        assert_eq!(tags_from_stored(",a,bc,"), tags);
        assert_eq!(tags_to_stored(&[]), "");
        assert!(tags_from_stored("").is_empty());
    }
}

//! Writing new rows into the hot pillar: enqueue (single and batch), continuations, and the
//! queue settings row a queue gets on first use.

use std::collections::{HashMap, HashSet};

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::StoreResult;
use crate::model::{EnqueueOutcome, EnqueueRequest, JobId, UniqueState};
use crate::validation::normalize_payload;

use super::codec::{encode_tags, id_text, to_json, to_us};
use super::connection::db_err;

/// A hot row about to be inserted (status pending, attempt 0).
pub(crate) struct NewJob {
    pub id: String,
    pub queue: String,
    pub job_type: String,
    pub payload: String,
    pub tags: String,
    pub priority: i64,
    pub idempotency_key: Option<String>,
    pub correlation_id: Option<String>,
    pub created_by: Option<String>,
    pub created_at: i64,
    pub scheduled_at: i64,
    pub expires_at: Option<i64>,
    pub max_attempts: Option<i64>,
    pub continuation: Option<String>,
    pub errors: Option<String>,
    pub last_error: Option<String>,
    pub original_payload: Option<String>,
    pub batch_id: Option<String>,
    pub trace_context: Option<String>,
}

const INSERT_HEAD: &str = "INSERT INTO jobs (id, queue, job_type, payload, tags, priority, \
     idempotency_key, correlation_id, created_by, created_at, scheduled_at, expires_at, \
     max_attempts, continuation, errors, last_error, original_payload, batch_id, trace_context, \
     status, attempt) VALUES ";
const ROW_PARAMS: &str = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,0)";
const PARAMS_PER_ROW: usize = 19;

/// Chunk sizes for multi-row inserts. Few distinct sizes keep the statement cache small
/// while a batch of any length needs only a handful of statements.
const CHUNKS: [usize; 5] = [256, 64, 16, 4, 1];

impl NewJob {
    pub(crate) fn from_request(req: EnqueueRequest, id: JobId, now: i64) -> StoreResult<NewJob> {
        let scheduled_at = match (req.scheduled_at, req.delay_ms) {
            (Some(at), _) => to_us(at),
            (None, Some(ms)) => now.saturating_add(
                i64::try_from(ms)
                    .unwrap_or(i64::MAX / 1000)
                    .saturating_mul(1000),
            ),
            (None, None) => now,
        };
        let continuation = req.continuation.as_ref().map(to_json).transpose()?;
        let payload = normalize_payload(&req.payload).to_string();
        Ok(NewJob {
            id: id_text(id),
            queue: req.queue,
            job_type: req.job_type,
            payload,
            tags: encode_tags(&req.tags),
            priority: i64::from(req.priority),
            idempotency_key: req.idempotency_key,
            correlation_id: req.correlation_id,
            created_by: req.created_by,
            created_at: now,
            scheduled_at,
            expires_at: req.expires_at.map(to_us),
            max_attempts: req.max_attempts.map(i64::from),
            continuation,
            errors: None,
            last_error: None,
            original_payload: None,
            batch_id: None,
            trace_context: req.trace_context,
        })
    }

    fn push_params(self, out: &mut Vec<Value>) {
        out.push(Value::Text(self.id));
        out.push(Value::Text(self.queue));
        out.push(Value::Text(self.job_type));
        out.push(Value::Text(self.payload));
        out.push(Value::Text(self.tags));
        out.push(Value::Integer(self.priority));
        out.push(opt_text(self.idempotency_key));
        out.push(opt_text(self.correlation_id));
        out.push(opt_text(self.created_by));
        out.push(Value::Integer(self.created_at));
        out.push(Value::Integer(self.scheduled_at));
        out.push(opt_int(self.expires_at));
        out.push(opt_int(self.max_attempts));
        out.push(opt_text(self.continuation));
        out.push(opt_text(self.errors));
        out.push(opt_text(self.last_error));
        out.push(opt_text(self.original_payload));
        out.push(opt_text(self.batch_id));
        out.push(opt_text(self.trace_context));
    }
}

fn opt_text(v: Option<String>) -> Value {
    v.map_or(Value::Null, Value::Text)
}

fn opt_int(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::Integer)
}

fn insert_sql(rows: usize) -> String {
    let mut sql = String::with_capacity(INSERT_HEAD.len() + rows * (ROW_PARAMS.len() + 1));
    sql.push_str(INSERT_HEAD);
    for i in 0..rows {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(ROW_PARAMS);
    }
    sql
}

/// Insert rows with a few multi-row statements.
pub(crate) fn insert_jobs(conn: &Connection, rows: Vec<NewJob>) -> StoreResult<()> {
    let mut rows = rows.into_iter().peekable();
    let mut remaining = rows.len();
    let mut params: Vec<Value> = Vec::new();
    while remaining > 0 {
        let chunk = CHUNKS.into_iter().find(|c| *c <= remaining).unwrap_or(1);
        params.clear();
        for row in rows.by_ref().take(chunk) {
            row.push_params(&mut params);
        }
        debug_assert_eq!(params.len(), chunk * PARAMS_PER_ROW);
        let mut stmt = conn
            .prepare_cached(&insert_sql(chunk))
            .map_err(db_err("enqueue"))?;
        stmt.execute(rusqlite::params_from_iter(params.drain(..)))
            .map_err(db_err("enqueue"))?;
        remaining -= chunk;
    }
    Ok(())
}

/// Give each named queue its settings row if it has none yet.
pub(crate) fn ensure_queues<'a>(
    conn: &Connection,
    names: impl IntoIterator<Item = &'a str>,
    now: i64,
) -> StoreResult<()> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO queues (name, updated_at) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
        )
        .map_err(db_err("create queue"))?;
    for name in names {
        stmt.execute(params![name, now])
            .map_err(db_err("create queue"))?;
    }
    Ok(())
}

fn active_holder(conn: &Connection, key: &str) -> StoreResult<Option<JobId>> {
    let id: Option<String> = conn
        .prepare_cached("SELECT id FROM jobs WHERE idempotency_key = ?1")
        .map_err(db_err("enqueue"))?
        .query_row([key], |r| r.get(0))
        .optional()
        .map_err(db_err("enqueue"))?;
    Ok(id.and_then(|t| t.parse().ok()))
}

pub(crate) fn key_is_held(conn: &Connection, key: &str) -> StoreResult<bool> {
    Ok(active_holder(conn, key)?.is_some())
}

/// The finished job that still holds `key` inside its uniqueness window: one in a state the
/// window counts, read from the pillar it is in, or, once retention or an operator removed
/// its row, from the state the row left in.
const WINDOW_HOLDER_SQL: &str = "SELECT u.job_id FROM unique_keys u \
     WHERE u.key = ?1 AND u.held_until > ?2 \
       AND CASE WHEN EXISTS (SELECT 1 FROM archive a WHERE a.id = u.job_id) THEN u.holds_succeeded \
                WHEN EXISTS (SELECT 1 FROM dlq d WHERE d.id = u.job_id) THEN u.holds_dead \
                WHEN u.left_state = 1 THEN u.holds_succeeded \
                WHEN u.left_state = 2 THEN u.holds_dead \
                ELSE 0 END = 1";

/// A new job with a window takes its key from now on (replacing a lapsed or non-counting
/// holder: the enqueue checked there was no live one).
const TAKE_KEY_SQL: &str = "INSERT INTO unique_keys \
         (key, job_id, held_until, holds_succeeded, holds_dead, left_state) \
     VALUES (?1, ?2, ?3, ?4, ?5, NULL) \
     ON CONFLICT (key) DO UPDATE SET job_id = excluded.job_id, held_until = excluded.held_until, \
         holds_succeeded = excluded.holds_succeeded, holds_dead = excluded.holds_dead, \
         left_state = NULL";

/// The job an enqueue with `key` must answer with instead of writing: the active holder, or
/// a finished one whose window still counts it.
fn key_holder(conn: &Connection, key: &str, now: i64) -> StoreResult<Option<JobId>> {
    if let Some(id) = active_holder(conn, key)? {
        return Ok(Some(id));
    }
    let id: Option<String> = conn
        .prepare_cached(WINDOW_HOLDER_SQL)
        .map_err(db_err("enqueue"))?
        .query_row(params![key, now], |r| r.get(0))
        .optional()
        .map_err(db_err("enqueue"))?;
    Ok(id.and_then(|t| t.parse().ok()))
}

fn take_key(conn: &Connection, req: &EnqueueRequest, id: JobId, now: i64) -> StoreResult<()> {
    let (Some(key), Some(window_ms)) = (&req.idempotency_key, req.unique_for_ms) else {
        return Ok(());
    };
    let held_until = now.saturating_add(
        i64::try_from(window_ms)
            .unwrap_or(i64::MAX / 1000)
            .saturating_mul(1000),
    );
    let holds = |state| req.unique_states.contains(&state);
    conn.prepare_cached(TAKE_KEY_SQL)
        .map_err(db_err("enqueue"))?
        .execute(params![
            key,
            id_text(id),
            held_until,
            holds(UniqueState::Succeeded),
            holds(UniqueState::Dead)
        ])
        .map_err(db_err("enqueue"))?;
    Ok(())
}

/// Insert one already-validated job with the id the caller fixed (a schedule's occurrence
/// names its job before the write). No idempotency key is looked at: the caller's own key
/// (the occurrence's) already decided that the job is new.
pub(crate) fn enqueue_with_id(
    conn: &Connection,
    req: EnqueueRequest,
    id: JobId,
    now: i64,
) -> StoreResult<()> {
    ensure_queues(conn, [req.queue.as_str()], now)?;
    insert_jobs(conn, vec![NewJob::from_request(req, id, now)?])
}

/// Enqueue already-validated requests. A key held by an active job, by a finished job inside
/// its uniqueness window, or by an earlier job of the same batch, returns that job's id
/// instead of writing a new one.
pub(crate) fn enqueue_all(
    conn: &Connection,
    reqs: Vec<EnqueueRequest>,
    now: i64,
) -> StoreResult<Vec<EnqueueOutcome>> {
    let queues: HashSet<String> = reqs.iter().map(|r| r.queue.clone()).collect();
    ensure_queues(conn, queues.iter().map(String::as_str), now)?;
    let mut outcomes = Vec::with_capacity(reqs.len());
    let mut rows = Vec::with_capacity(reqs.len());
    let mut batch_keys: HashMap<String, JobId> = HashMap::new();
    for req in reqs {
        if let Some(key) = &req.idempotency_key {
            if let Some(id) = batch_keys.get(key) {
                outcomes.push(EnqueueOutcome {
                    id: *id,
                    created: false,
                });
                continue;
            }
            if let Some(id) = key_holder(conn, key, now)? {
                outcomes.push(EnqueueOutcome { id, created: false });
                continue;
            }
        }
        let id = JobId::new();
        if let Some(key) = &req.idempotency_key {
            batch_keys.insert(key.clone(), id);
            take_key(conn, &req, id, now)?;
        }
        rows.push(NewJob::from_request(req, id, now)?);
        outcomes.push(EnqueueOutcome { id, created: true });
    }
    insert_jobs(conn, rows)?;
    Ok(outcomes)
}

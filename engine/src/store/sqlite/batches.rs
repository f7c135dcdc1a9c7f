//! Batches: the batch row written with its members in one writer transaction, and the
//! members' counts moved in the transaction of each member's final move (or an operator's
//! resurrect or purge), with the callbacks that move makes due enqueued right there.

use std::collections::{BTreeMap, HashSet};

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::batch::{Batch, BatchCallbacks, BatchCreated, BatchEvent, BatchId, BatchRequest};
use crate::error::{StoreError, StoreResult};
use crate::model::{JobId, Pillar};
use crate::query::JobSummary;

use super::codec::{
    from_us, id_text, opt_from_us, parse_id, summary_cols, summary_from_row, table, to_json,
};
use super::connection::db_err;
use super::moves::Finished;
use super::producers::{self, NewJob};

const BATCH_COLUMNS: &str = "id, description, created_by, created_at, total, succeeded, dead, \
     finished_at, callbacks, success_job_id, complete_job_id, death_job_id";

fn batch_id_text(id: BatchId) -> String {
    id_text(JobId(id.0))
}

/// A row as read, its callbacks still JSON (decoded outside rusqlite's closure so a bad
/// document is a clear error).
struct RawBatch {
    id: String,
    description: Option<String>,
    created_by: Option<String>,
    created_at: i64,
    total: i64,
    succeeded: i64,
    dead: i64,
    finished_at: Option<i64>,
    callbacks: String,
    fired: [Option<String>; 3],
}

fn raw(r: &Row<'_>) -> rusqlite::Result<RawBatch> {
    Ok(RawBatch {
        id: r.get(0)?,
        description: r.get(1)?,
        created_by: r.get(2)?,
        created_at: r.get(3)?,
        total: r.get(4)?,
        succeeded: r.get(5)?,
        dead: r.get(6)?,
        finished_at: r.get(7)?,
        callbacks: r.get(8)?,
        fired: [r.get(9)?, r.get(10)?, r.get(11)?],
    })
}

fn count(v: i64) -> u32 {
    u32::try_from(v.max(0)).unwrap_or(u32::MAX)
}

fn decode(raw: RawBatch) -> StoreResult<Batch> {
    let corrupt = |what: &str| {
        StoreError::database(
            "read batch",
            format!(
                "batch {} has a stored {what} this version cannot read",
                raw.id
            ),
            false,
        )
    };
    let id = parse_id(&raw.id).map_err(|_| corrupt("id"))?;
    let callbacks: BatchCallbacks =
        serde_json::from_str(&raw.callbacks).map_err(|_| corrupt("callback list"))?;
    let job = |t: &Option<String>| -> StoreResult<Option<JobId>> {
        t.as_deref()
            .map(|t| parse_id(t).map_err(|_| corrupt("callback job id")))
            .transpose()
    };
    Ok(Batch {
        id: BatchId(id.0),
        description: raw.description,
        created_by: raw.created_by,
        created_at: from_us(raw.created_at),
        total: count(raw.total),
        succeeded: count(raw.succeeded),
        dead: count(raw.dead),
        finished_at: opt_from_us(raw.finished_at),
        success_job_id: job(&raw.fired[0])?,
        complete_job_id: job(&raw.fired[1])?,
        death_job_id: job(&raw.fired[2])?,
        callbacks,
    })
}

/// Write the batch row and every member, in the caller's (writer) transaction.
pub(crate) fn create(conn: &Connection, req: BatchRequest, now: i64) -> StoreResult<BatchCreated> {
    let id = BatchId::new();
    let id_text = batch_id_text(id);
    let total = i64::try_from(req.jobs.len()).unwrap_or(i64::MAX);
    conn.prepare_cached(
        "INSERT INTO batches (id, description, created_by, created_at, total, callbacks) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .map_err(db_err("create batch"))?
    .execute(params![
        id_text,
        req.description,
        req.created_by,
        now,
        total,
        to_json(&req.callbacks)?
    ])
    .map_err(db_err("create batch"))?;
    let queues: HashSet<&str> = req.jobs.iter().map(|j| j.queue.as_str()).collect();
    producers::ensure_queues(conn, queues, now)?;
    let mut job_ids = Vec::with_capacity(req.jobs.len());
    let mut rows = Vec::with_capacity(req.jobs.len());
    for job in req.jobs {
        let job_id = JobId::new();
        let mut row = NewJob::from_request(job, job_id, now)?;
        row.batch_id = Some(id_text.clone());
        rows.push(row);
        job_ids.push(job_id);
    }
    producers::insert_jobs(conn, rows)?;
    let batch = get(conn, id)?.ok_or_else(|| {
        StoreError::database("create batch", "the batch row just written is gone", false)
    })?;
    Ok(BatchCreated { batch, job_ids })
}

pub(crate) fn get(conn: &Connection, id: BatchId) -> StoreResult<Option<Batch>> {
    conn.prepare_cached(&format!(
        "SELECT {BATCH_COLUMNS} FROM batches WHERE id = ?1"
    ))
    .map_err(db_err("read batch"))?
    .query_row([batch_id_text(id)], raw)
    .optional()
    .map_err(db_err("read batch"))?
    .map(decode)
    .transpose()
}

/// Newest first; `before` pages back.
pub(crate) fn list(
    conn: &Connection,
    before: Option<BatchId>,
    limit: u32,
) -> StoreResult<Vec<Batch>> {
    let before = before.map(batch_id_text);
    let rows: Vec<RawBatch> = conn
        .prepare_cached(&format!(
            "SELECT {BATCH_COLUMNS} FROM batches WHERE ?1 IS NULL OR id < ?1 \
             ORDER BY id DESC LIMIT ?2"
        ))
        .map_err(db_err("list batches"))?
        .query_map(params![before, limit], raw)
        .map_err(db_err("list batches"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("list batches"))?;
    rows.into_iter().map(decode).collect()
}

/// A batch's members wherever they are (active first, then dead, then succeeded), in id
/// order within a pillar, at most `limit`.
pub(crate) fn members(conn: &Connection, id: BatchId, limit: u32) -> StoreResult<Vec<JobSummary>> {
    let id = batch_id_text(id);
    let mut out = Vec::new();
    for pillar in [Pillar::Hot, Pillar::Dlq, Pillar::Archive] {
        let left = i64::from(limit) - i64::try_from(out.len()).unwrap_or(i64::MAX);
        if left <= 0 {
            break;
        }
        let sql = format!(
            "SELECT {} FROM {} WHERE batch_id = ?1 ORDER BY id LIMIT ?2",
            summary_cols(pillar),
            table(pillar)
        );
        let rows: Vec<JobSummary> = conn
            .prepare_cached(&sql)
            .map_err(db_err("list batch members"))?
            .query_map(params![id, left], |r| summary_from_row(pillar, r))
            .map_err(db_err("list batch members"))?
            .collect::<Result<_, _>>()
            .map_err(db_err("list batch members"))?;
        out.extend(rows);
    }
    Ok(out)
}

/// How one transaction changes a batch's counts.
#[derive(Default, Clone, Copy)]
pub(crate) struct BatchDelta {
    pub total: i64,
    pub succeeded: i64,
    pub dead: i64,
}

/// Count the final moves of batch members (the `finished` rows of a move) and fire what
/// they make due.
pub(crate) fn advance_batches(
    conn: &Connection,
    finished: &[Finished],
    now: i64,
) -> StoreResult<()> {
    let mut deltas: BTreeMap<&str, BatchDelta> = BTreeMap::new();
    for f in finished {
        let Some(batch) = f.batch_id.as_deref() else {
            continue;
        };
        let d = deltas.entry(batch).or_default();
        if f.succeeded {
            d.succeeded += 1;
        } else {
            d.dead += 1;
        }
    }
    for (batch, delta) in deltas {
        apply(conn, batch, delta, now)?;
    }
    Ok(())
}

/// Move one batch's counts, keep `finished_at` in step, and enqueue (at most once each) the
/// callbacks the new counts make due, all in the caller's transaction. A batch row that is
/// gone (retention) leaves its late members uncounted.
pub(crate) fn apply(
    conn: &Connection,
    batch: &str,
    delta: BatchDelta,
    now: i64,
) -> StoreResult<()> {
    let row = conn
        .prepare_cached(&format!(
            "UPDATE batches SET total = total + ?2, succeeded = succeeded + ?3, \
                 dead = max(dead + ?4, 0), \
                 finished_at = CASE WHEN succeeded + ?3 + max(dead + ?4, 0) >= total + ?2 \
                                    THEN coalesce(finished_at, ?5) END \
             WHERE id = ?1 RETURNING {BATCH_COLUMNS}"
        ))
        .map_err(db_err("count batch members"))?
        .query_row(
            params![batch, delta.total, delta.succeeded, delta.dead, now],
            raw,
        )
        .optional()
        .map_err(db_err("count batch members"))?;
    let Some(row) = row else {
        return Ok(());
    };
    let batch_row = decode(row)?;
    for event in batch_row.due_callbacks(delta.dead > 0) {
        let Some(req) = batch_row.callback_job(event) else {
            continue;
        };
        let job_id = JobId::new();
        producers::enqueue_with_id(conn, req, job_id, now)?;
        let column = match event {
            BatchEvent::Success => "success_job_id",
            BatchEvent::Complete => "complete_job_id",
            BatchEvent::Death => "death_job_id",
        };
        conn.prepare_cached(&format!(
            "UPDATE batches SET {column} = ?2 WHERE id = ?1 AND {column} IS NULL"
        ))
        .map_err(db_err("fire batch callback"))?
        .execute(params![batch, id_text(job_id)])
        .map_err(db_err("fire batch callback"))?;
    }
    Ok(())
}

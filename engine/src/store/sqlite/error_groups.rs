//! DLQ error groups keyed by fingerprint: the deltas every DLQ insert and delete applies in
//! its own transaction, and the one-time backfill of rows written before fingerprints.

use std::collections::HashMap;

use rusqlite::{Connection, params};

use crate::error::StoreResult;
use crate::fingerprint::{FINGERPRINT_MESSAGE_CHARS, FingerprintHead};
use crate::model::FailureReason;

use super::connection::db_err;

/// Rows into (positive) or out of (negative) one group. The descriptive fields are written
/// when the group is created and the sample follows the latest row counted in.
#[derive(Debug, Default)]
pub(crate) struct GroupDelta {
    pub reason: i64,
    pub kind: String,
    pub job_type: String,
    pub sample: String,
    pub delta: i64,
}

/// The message a group shows: what the DLQ row keeps of it.
pub(crate) fn sample_of(message: &str) -> String {
    message.chars().take(FINGERPRINT_MESSAGE_CHARS).collect()
}

/// Count DLQ rows into (or, negative, out of) their error groups; a group counted down to
/// zero is deleted, so the console never lists empty groups.
pub(crate) fn bump_error_groups(
    conn: &Connection,
    now: i64,
    deltas: &HashMap<String, GroupDelta>,
) -> StoreResult<()> {
    let mut add = conn
        .prepare_cached(
            "INSERT INTO dlq_error_groups \
                 (fingerprint, reason, kind, job_type, sample, count, last_seen) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
             ON CONFLICT (fingerprint) DO UPDATE SET count = count + excluded.count, \
                 last_seen = CASE WHEN excluded.count > 0 THEN max(last_seen, excluded.last_seen) \
                                  ELSE last_seen END, \
                 sample = CASE WHEN excluded.count > 0 THEN excluded.sample ELSE sample END",
        )
        .map_err(db_err("update error groups"))?;
    let mut drop_empty = conn
        .prepare_cached("DELETE FROM dlq_error_groups WHERE fingerprint = ?1 AND count <= 0")
        .map_err(db_err("update error groups"))?;
    for (fingerprint, d) in deltas {
        if d.delta == 0 {
            continue;
        }
        add.execute(params![
            fingerprint,
            d.reason,
            d.kind,
            d.job_type,
            d.sample,
            d.delta,
            now
        ])
        .map_err(db_err("update error groups"))?;
        if d.delta < 0 {
            drop_empty
                .execute([fingerprint])
                .map_err(db_err("update error groups"))?;
        }
    }
    Ok(())
}

/// Fingerprint every DLQ row that has none and rebuild the groups from all rows. Run once,
/// in the transaction of the migration that introduced fingerprints (the rules live in
/// Rust, so the SQL script cannot do it). The kind is the one the last attempt error
/// recorded, the message the stored last error: what a live move hashes too.
pub(crate) fn backfill_fingerprints(conn: &Connection) -> StoreResult<()> {
    // In rowid pages, so a large DLQ is never held in memory at once.
    const PAGE: i64 = 1_000;
    type Row = (i64, i64, String, String, String);
    let mut page = conn
        .prepare(
            "SELECT rowid, reason, job_type, coalesce(last_error, ''), \
                 coalesce(errors ->> '$[#-1].kind', '') \
             FROM dlq WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
        )
        .map_err(db_err("backfill fingerprints"))?;
    let mut set = conn
        .prepare("UPDATE dlq SET fingerprint = ?1 WHERE rowid = ?2")
        .map_err(db_err("backfill fingerprints"))?;
    let mut after = 0_i64;
    loop {
        let rows: Vec<Row> = page
            .query_map(params![after, PAGE], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .map_err(db_err("backfill fingerprints"))?
            .collect::<Result<_, _>>()
            .map_err(db_err("backfill fingerprints"))?;
        for (rowid, reason, job_type, message, kind) in &rows {
            after = *rowid;
            // A reason this build does not know stays without a group (and out of the counts).
            let Some(reason) = FailureReason::from_code(*reason) else {
                continue;
            };
            let fingerprint = FingerprintHead::new(reason, kind, message).for_job_type(job_type);
            set.execute(params![fingerprint.as_str(), rowid])
                .map_err(db_err("backfill fingerprints"))?;
        }
        if (rows.len() as i64) < PAGE {
            break;
        }
    }
    conn.execute("DELETE FROM dlq_error_groups", [])
        .map_err(db_err("backfill fingerprints"))?;
    conn.execute(
        "INSERT INTO dlq_error_groups (fingerprint, reason, kind, job_type, sample, count, last_seen) \
         SELECT d.fingerprint, d.reason, coalesce(d.errors ->> '$[#-1].kind', ''), d.job_type, \
             substr(coalesce(d.last_error, ''), 1, ?1), g.count, g.last_seen \
         FROM (SELECT fingerprint, count(*) AS count, max(finished_at) AS last_seen, \
                      max(rowid) AS latest \
               FROM dlq WHERE fingerprint IS NOT NULL GROUP BY fingerprint) AS g \
         JOIN dlq AS d ON d.rowid = g.latest",
        [FINGERPRINT_MESSAGE_CHARS as i64],
    )
    .map_err(db_err("backfill fingerprints"))?;
    Ok(())
}

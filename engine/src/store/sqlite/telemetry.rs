//! Telemetry reads: maintained counters, metric buckets and error groups, plus counts of the
//! hot pillar read from its partial indexes. Never a scan of the archive or the DLQ.

use std::collections::BTreeMap;

use rusqlite::{Connection, params};

use crate::error::StoreResult;
use crate::model::FailureReason;
use crate::telemetry::{
    ErrorGroup, PendingGroup, QueueStats, RunTimeHistogram, Summary, ThroughputBucket, run_time,
};

use super::codec::{from_us, minute_of, u64_of};
use super::connection::db_err;

const MINUTE_US: i64 = 60_000_000;

/// Counts "in the last minute / 5 minutes" are rolling windows over per-minute buckets: the
/// current bucket counts in full, the oldest bucket the window reaches into only for the share
/// of it still inside the window (its events taken as spread evenly). Counting only whole
/// buckets made the 1-minute rate fall to nothing at every turn of the minute.
pub(crate) fn summary(conn: &Connection, now: i64) -> StoreResult<Summary> {
    let minute = minute_of(now);
    let rest_of_oldest = 1.0 - (now - minute) as f64 / MINUTE_US as f64;
    conn.prepare_cached(
        "SELECT \
             (SELECT count(*) FROM jobs WHERE status = 0 AND scheduled_at <= ?1), \
             (SELECT count(*) FROM jobs WHERE status = 0 AND scheduled_at > ?1), \
             (SELECT count(*) FROM jobs WHERE status = 1), \
             (SELECT count(*) FROM jobs WHERE status = 2), \
             (SELECT coalesce(sum(archive_rows), 0) FROM queue_counters), \
             (SELECT coalesce(sum(dlq_rows), 0) FROM queue_counters), \
             (SELECT CAST(round(coalesce(sum(succeeded * iif(minute = ?2, ?4, 1.0)), 0)) AS INTEGER) \
                FROM metric_buckets WHERE minute >= ?2), \
             (SELECT CAST(round(coalesce(sum(succeeded * iif(minute = ?3, ?4, 1.0)), 0)) AS INTEGER) \
                FROM metric_buckets WHERE minute >= ?3), \
             (SELECT CAST(round(coalesce(sum(failed * iif(minute = ?2, ?4, 1.0)), 0)) AS INTEGER) \
                FROM metric_buckets WHERE minute >= ?2), \
             (SELECT CAST(round(coalesce(sum(failed * iif(minute = ?3, ?4, 1.0)), 0)) AS INTEGER) \
                FROM metric_buckets WHERE minute >= ?3), \
             (SELECT CAST(round(coalesce(sum(retried * iif(minute = ?3, ?4, 1.0)), 0)) AS INTEGER) \
                FROM metric_buckets WHERE minute >= ?3)",
    )
    .map_err(db_err("summary"))?
    .query_row(
        params![
            now,
            minute - MINUTE_US,
            minute - 5 * MINUTE_US,
            rest_of_oldest
        ],
        |r| {
            Ok(Summary {
                pending: u64_of(r.get(0)?),
                scheduled: u64_of(r.get(1)?),
                fetched: u64_of(r.get(2)?),
                processing: u64_of(r.get(3)?),
                succeeded: u64_of(r.get(4)?),
                dlq: u64_of(r.get(5)?),
                succeeded_1m: u64_of(r.get(6)?),
                succeeded_5m: u64_of(r.get(7)?),
                failed_1m: u64_of(r.get(8)?),
                failed_5m: u64_of(r.get(9)?),
                retried_5m: u64_of(r.get(10)?),
            })
        },
    )
    .map_err(db_err("summary"))
}

/// The stats row of `queue`, blank until something fills it.
fn stats_of<'a>(stats: &'a mut BTreeMap<String, QueueStats>, queue: &str) -> &'a mut QueueStats {
    stats
        .entry(queue.to_string())
        .or_insert_with(|| blank_stats(queue))
}

/// The rows of a statement that answers a queue and two counts.
fn queue_rows(conn: &Connection, sql: &str) -> StoreResult<Vec<(String, i64, i64)>> {
    let mut stmt = conn.prepare_cached(sql).map_err(db_err("queue stats"))?;
    let rows = stmt
        .query_map([], |r| <(String, i64, i64)>::try_from(r))
        .map_err(db_err("queue stats"))?;
    rows.collect::<Result<_, _>>()
        .map_err(db_err("queue stats"))
}

fn blank_stats(queue: &str) -> QueueStats {
    QueueStats {
        queue: queue.to_string(),
        paused: false,
        hidden: false,
        max_workers: None,
        pending: 0,
        scheduled: 0,
        fetched: 0,
        processing: 0,
        succeeded: 0,
        failed: 0,
        lag_avg_ms: 0,
        lag_max_ms: 0,
        lag_warn_secs: None,
        lag_crit_secs: None,
        zombie_timeout_secs: None,
        execution_timeout_secs: None,
    }
}

pub(crate) fn queue_stats(conn: &Connection, now: i64) -> StoreResult<Vec<QueueStats>> {
    let mut stats: BTreeMap<String, QueueStats> = BTreeMap::new();
    for q in super::maintenance::list_queues(conn, now)? {
        let s = stats_of(&mut stats, &q.name);
        s.paused = q.paused;
        s.hidden = q.hidden;
        s.max_workers = q.max_workers;
        s.lag_warn_secs = q.lag_warn_secs;
        s.lag_crit_secs = q.lag_crit_secs;
        s.zombie_timeout_secs = q.zombie_timeout_secs;
        s.execution_timeout_secs = q.execution_timeout_secs;
    }
    // Pending rows per queue come from the claim index (covering: queue, scheduled_at).
    let mut stmt = conn
        .prepare_cached(
            "SELECT queue, \
                 sum(scheduled_at <= ?1), sum(scheduled_at > ?1), \
                 sum(CASE WHEN scheduled_at <= ?1 THEN ?1 - scheduled_at END), \
                 max(CASE WHEN scheduled_at <= ?1 THEN ?1 - scheduled_at END) \
             FROM jobs INDEXED BY jobs_claim WHERE status = 0 GROUP BY queue",
        )
        .map_err(db_err("queue stats"))?;
    let rows = stmt
        .query_map([now], |r| {
            <(String, i64, i64, Option<i64>, Option<i64>)>::try_from(r)
        })
        .map_err(db_err("queue stats"))?;
    for row in rows {
        let (queue, due, scheduled, lag_sum, lag_max) = row.map_err(db_err("queue stats"))?;
        let s = stats_of(&mut stats, &queue);
        s.pending = u64_of(due);
        s.scheduled = u64_of(scheduled);
        if due > 0 {
            s.lag_avg_ms = u64_of(lag_sum.unwrap_or(0) / due / 1000);
            s.lag_max_ms = u64_of(lag_max.unwrap_or(0) / 1000);
        }
    }
    for (queue, status, n) in queue_rows(
        conn,
        "SELECT queue, 1, count(*) FROM jobs WHERE status = 1 GROUP BY queue \
         UNION ALL SELECT queue, 2, count(*) FROM jobs WHERE status = 2 GROUP BY queue",
    )? {
        let s = stats_of(&mut stats, &queue);
        if status == 1 {
            s.fetched = u64_of(n);
        } else {
            s.processing = u64_of(n);
        }
    }
    for (queue, archive, dlq) in queue_rows(
        conn,
        "SELECT queue, archive_rows, dlq_rows FROM queue_counters",
    )? {
        let s = stats_of(&mut stats, &queue);
        s.succeeded = u64_of(archive);
        s.failed = u64_of(dlq);
    }
    Ok(stats.into_values().collect())
}

pub(crate) fn throughput(
    conn: &Connection,
    minutes: u32,
    queue: Option<&str>,
    now: i64,
) -> StoreResult<Vec<ThroughputBucket>> {
    let minutes = i64::from(minutes.clamp(1, 7 * 24 * 60));
    let last = minute_of(now);
    let first = last - (minutes - 1) * MINUTE_US;
    let mut stmt = conn
        .prepare_cached(
            "SELECT minute, sum(succeeded), sum(failed), sum(retried), sum(duration_sum_ms), \
                 max(duration_max_ms) \
             FROM metric_buckets WHERE minute >= ?1 AND (?2 IS NULL OR queue = ?2) \
             GROUP BY minute",
        )
        .map_err(db_err("throughput"))?;
    let mut found: BTreeMap<i64, ThroughputBucket> = BTreeMap::new();
    let rows = stmt
        .query_map(params![first, queue], |r| {
            Ok(ThroughputBucket {
                minute: from_us(r.get(0)?),
                succeeded: u64_of(r.get(1)?),
                failed: u64_of(r.get(2)?),
                retried: u64_of(r.get(3)?),
                duration_sum_ms: u64_of(r.get(4)?),
                duration_max_ms: u64_of(r.get(5)?),
            })
        })
        .map_err(db_err("throughput"))?;
    for row in rows {
        let b = row.map_err(db_err("throughput"))?;
        found.insert(b.minute.timestamp_micros(), b);
    }
    Ok((0..minutes)
        .map(|i| {
            let minute = first + i * MINUTE_US;
            found.remove(&minute).unwrap_or_else(|| ThroughputBucket {
                minute: from_us(minute),
                ..Default::default()
            })
        })
        .collect())
}

pub(crate) fn run_times(
    conn: &Connection,
    minutes: u32,
    now: i64,
) -> StoreResult<Vec<RunTimeHistogram>> {
    let minutes = i64::from(minutes.clamp(1, 7 * 24 * 60));
    let first = minute_of(now) - (minutes - 1) * MINUTE_US;
    let mut stmt = conn
        .prepare_cached(
            "SELECT job_type, bin, sum(runs) FROM run_time_bins WHERE minute >= ?1 \
             GROUP BY job_type, bin ORDER BY job_type, bin",
        )
        .map_err(db_err("run times"))?;
    let rows = stmt
        .query_map([first], |r| <(String, i64, i64)>::try_from(r))
        .map_err(db_err("run times"))?;
    let mut counts = Vec::new();
    for row in rows {
        let (job_type, bin, runs) = row.map_err(db_err("run times"))?;
        let bin = u16::try_from(bin).unwrap_or(run_time::MAX_BIN);
        counts.push((job_type, bin, u64_of(runs)));
    }
    Ok(RunTimeHistogram::per_job_type(counts))
}

pub(crate) fn pending_groups(conn: &Connection, limit: u32) -> StoreResult<Vec<PendingGroup>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT queue, job_type, count(*) AS n FROM jobs WHERE status = 0 \
             GROUP BY queue, job_type ORDER BY n DESC, queue, job_type LIMIT ?1",
        )
        .map_err(db_err("pending groups"))?;
    let rows = stmt
        .query_map([i64::from(limit)], |r| <(String, String, i64)>::try_from(r))
        .map_err(db_err("pending groups"))?;
    let mut out = Vec::new();
    for row in rows {
        let (queue, job_type, n) = row.map_err(db_err("pending groups"))?;
        out.push(PendingGroup {
            queue,
            job_type,
            pending: u64_of(n),
        });
    }
    Ok(out)
}

pub(crate) fn top_errors(conn: &Connection, limit: u32) -> StoreResult<Vec<ErrorGroup>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT fingerprint, reason, kind, job_type, sample, count, last_seen \
             FROM dlq_error_groups \
             WHERE count > 0 ORDER BY count DESC, last_seen DESC LIMIT ?1",
        )
        .map_err(db_err("top errors"))?;
    type Row = (String, i64, String, String, String, i64, i64);
    let rows = stmt
        .query_map([i64::from(limit)], |r| Row::try_from(r))
        .map_err(db_err("top errors"))?;
    let mut out = Vec::new();
    for row in rows {
        let (fingerprint, reason, kind, job_type, sample, count, last_seen) =
            row.map_err(db_err("top errors"))?;
        // Rows this build cannot read (another version's reason or key) are left out.
        let (Some(reason), Ok(fingerprint)) =
            (FailureReason::from_code(reason), fingerprint.parse())
        else {
            continue;
        };
        out.push(ErrorGroup {
            fingerprint,
            reason,
            kind,
            job_type,
            sample,
            count: u64_of(count),
            last_seen: from_us(last_seen),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_buckets(buckets: &[(i64, i64, i64)]) -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut conn, 0).unwrap();
        for (minute, succeeded, failed) in buckets {
            conn.execute(
                "INSERT INTO metric_buckets (queue, minute, succeeded, failed) VALUES ('q', ?1, ?2, ?3)",
                params![minute, succeeded, failed],
            )
            .unwrap();
        }
        conn
    }

    #[test]
    fn the_last_minute_is_a_rolling_window_over_two_buckets() {
        let minute = 1_000 * MINUTE_US;
        // 600 in the previous minute, 60 so far in this one.
        let conn = with_buckets(&[(minute - MINUTE_US, 600, 0), (minute, 60, 6)]);
        // A quarter into the minute: three quarters of the previous bucket is still inside.
        let s = summary(&conn, minute + MINUTE_US / 4).unwrap();
        assert_eq!(s.succeeded_1m, 60 + 450);
        assert_eq!(s.failed_1m, 6);
        // Just after the turn nearly all of the previous minute counts: no drop to 60.
        let s = summary(&conn, minute + 1_000_000).unwrap();
        assert_eq!(s.succeeded_1m, 60 + 590);
        // At the end of the minute only the current bucket is left.
        let s = summary(&conn, minute + MINUTE_US - 1).unwrap();
        assert_eq!(s.succeeded_1m, 60);
    }

    #[test]
    fn the_last_five_minutes_count_four_whole_buckets_and_part_of_the_fifth() {
        let minute = 1_000 * MINUTE_US;
        let buckets: Vec<(i64, i64, i64)> = (0..=6)
            .map(|back| (minute - back * MINUTE_US, 100, 0))
            .collect();
        let conn = with_buckets(&buckets);
        let s = summary(&conn, minute + MINUTE_US / 2).unwrap();
        // Current (100) + four previous (400) + half of the fifth (50); the sixth is outside.
        assert_eq!(s.succeeded_5m, 550);
        assert_eq!(s.throughput_5m(), 550.0 / 300.0);
    }
}

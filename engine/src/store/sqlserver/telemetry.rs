//! Telemetry reads: dirty reads of the maintained counters, metric rows and error groups,
//! never a scan of the hot table.

use std::collections::HashMap;

use super::SqlServerStore;
use super::pool::{Fault, Repeat};
use super::queries;
use super::rows::{self, count, opt_u32, req_str, to_i32};
use crate::error::{StoreError, StoreResult};
use crate::telemetry::{
    ErrorGroup, PendingGroup, QueueStats, RunTimeHistogram, Summary, ThroughputBucket, run_time,
};

pub(super) async fn summary(store: &SqlServerStore) -> StoreResult<Summary> {
    let rows = store
        .rows_of("summary", Repeat::Always, &queries::SUMMARY, &[])
        .await?;
    let Some(row) = rows.first() else {
        return Ok(Summary::default());
    };
    (|| -> Result<Summary, Fault> {
        Ok(Summary {
            pending: count(row, "pending")?,
            scheduled: count(row, "scheduled")?,
            fetched: count(row, "fetched")?,
            processing: count(row, "processing")?,
            succeeded: count(row, "succeeded")?,
            dlq: count(row, "dlq")?,
            succeeded_1m: count(row, "succeeded_1m")?,
            succeeded_5m: count(row, "succeeded_5m")?,
            failed_1m: count(row, "failed_1m")?,
            failed_5m: count(row, "failed_5m")?,
            retried_5m: count(row, "retried_5m")?,
        })
    })()
    .map_err(|f| store.fault("summary", f))
}

pub(super) async fn queue_stats(store: &SqlServerStore) -> StoreResult<Vec<QueueStats>> {
    let rows = store
        .rows_of("queue_stats", Repeat::Always, &queries::QUEUE_STATS, &[])
        .await?;
    store.map_rows("queue_stats", &rows, |r| {
        Ok(QueueStats {
            queue: req_str(r, "queue")?,
            paused: rows::req_bool(r, "paused")?,
            hidden: rows::req_bool(r, "hidden")?,
            max_workers: opt_u32(r, "max_workers")?,
            pending: count(r, "pending")?,
            scheduled: count(r, "scheduled")?,
            fetched: count(r, "fetched")?,
            processing: count(r, "processing")?,
            succeeded: count(r, "succeeded")?,
            failed: count(r, "failed")?,
            lag_avg_ms: count(r, "lag_avg_ms")?,
            lag_max_ms: count(r, "lag_max_ms")?,
            lag_warn_secs: opt_u32(r, "lag_warn_secs")?,
            lag_crit_secs: opt_u32(r, "lag_crit_secs")?,
            zombie_timeout_secs: opt_u32(r, "zombie_timeout_secs")?,
            execution_timeout_secs: opt_u32(r, "execution_timeout_secs")?,
        })
    })
}

pub(super) async fn throughput(
    store: &SqlServerStore,
    minutes: u32,
    queue: Option<&str>,
) -> StoreResult<Vec<ThroughputBucket>> {
    if minutes == 0 {
        return Ok(Vec::new());
    }
    let minutes = minutes.min(7 * 24 * 60);
    let span = to_i32(minutes);
    let answer = store
        .rows_of(
            "throughput",
            Repeat::Always,
            &queries::THROUGHPUT,
            &[&span, &queue],
        )
        .await?;
    // Every row carries the database clock's minute; a row without a bucket is the
    // clock alone.
    let now = answer
        .first()
        .map(|row| rows::req_time(row, "current_minute"))
        .transpose()
        .map_err(|f| store.fault("throughput", f))?
        .ok_or_else(|| StoreError::database("throughput", "no clock came back", false))?;
    let mut found = HashMap::new();
    for row in &answer {
        let bucket = (|| -> Result<Option<ThroughputBucket>, Fault> {
            let Some(minute) = rows::opt_time(row, "bucket_start")? else {
                return Ok(None);
            };
            Ok(Some(ThroughputBucket {
                minute,
                succeeded: count(row, "succeeded")?,
                failed: count(row, "failed")?,
                retried: count(row, "retried")?,
                duration_sum_ms: count(row, "duration_sum_ms")?,
                duration_max_ms: count(row, "duration_max_ms")?,
            }))
        })()
        .map_err(|f| store.fault("throughput", f))?;
        if let Some(bucket) = bucket {
            found.insert(bucket.minute, bucket);
        }
    }
    Ok((0..i64::from(minutes))
        .rev()
        .map(|back| {
            let minute = now - chrono::Duration::minutes(back);
            found.remove(&minute).unwrap_or(ThroughputBucket {
                minute,
                ..Default::default()
            })
        })
        .collect())
}

pub(super) async fn run_times(
    store: &SqlServerStore,
    minutes: u32,
) -> StoreResult<Vec<RunTimeHistogram>> {
    let minutes = i64::from(minutes.clamp(1, 7 * 24 * 60));
    let rows = store
        .rows_of(
            "run_times",
            Repeat::Always,
            &queries::RUN_TIMES,
            &[&minutes],
        )
        .await?;
    let counts = store.map_rows("run_times", &rows, |r| {
        let bin = rows::req_int(r, "bin")?;
        Ok((
            req_str(r, "job_type")?,
            u16::try_from(bin).unwrap_or(run_time::MAX_BIN),
            count(r, "runs")?,
        ))
    })?;
    Ok(RunTimeHistogram::per_job_type(counts))
}

pub(super) async fn pending_groups(
    store: &SqlServerStore,
    limit: u32,
) -> StoreResult<Vec<PendingGroup>> {
    let limit = i64::from(limit.min(10_000));
    let rows = store
        .rows_of(
            "pending_groups",
            Repeat::Always,
            &queries::PENDING_GROUPS,
            &[&limit],
        )
        .await?;
    store.map_rows("pending_groups", &rows, |r| {
        Ok(PendingGroup {
            queue: req_str(r, "queue")?,
            job_type: req_str(r, "job_type")?,
            pending: count(r, "pending")?,
        })
    })
}

pub(super) async fn top_errors(store: &SqlServerStore, limit: u32) -> StoreResult<Vec<ErrorGroup>> {
    let limit = i64::from(limit.min(10_000));
    let rows = store
        .rows_of(
            "top_errors",
            Repeat::Always,
            &queries::TOP_ERRORS,
            &[&limit],
        )
        .await?;
    store.map_rows("top_errors", &rows, |r| {
        let code = rows::req_int(r, "reason")?;
        let fingerprint = req_str(r, "fingerprint")?;
        Ok(ErrorGroup {
            fingerprint: fingerprint
                .trim()
                .parse()
                .map_err(|_| rows::corrupt(format!("error group fingerprint {fingerprint:?}")))?,
            reason: crate::model::FailureReason::from_code(code)
                .ok_or_else(|| rows::corrupt(format!("unknown failure reason {code}")))?,
            kind: req_str(r, "error_kind")?,
            job_type: req_str(r, "job_type")?,
            sample: req_str(r, "sample")?,
            count: count(r, "dlq_rows")?,
            last_seen: rows::req_time(r, "last_seen")?,
        })
    })
}

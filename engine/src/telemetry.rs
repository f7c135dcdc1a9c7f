//! Telemetry read models: approximate, cheap, never block workers. Built from maintained
//! counters and per-minute metric buckets, not from scans of the archive or the DLQ.

use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;
use crate::model::{FailureReason, Timestamp};

/// Whole-system counts for the overview cards.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Pending and due now.
    pub pending: u64,
    /// Pending with a future schedule.
    pub scheduled: u64,
    /// Fetched (in some worker's prefetch buffer).
    pub fetched: u64,
    pub processing: u64,
    /// Rows in the archive (maintained counter).
    pub succeeded: u64,
    /// Rows in the DLQ (maintained counter).
    pub dlq: u64,
    /// Succeeded in the last 1 / 5 minutes (from metric buckets).
    pub succeeded_1m: u64,
    pub succeeded_5m: u64,
    /// Failed (moved to the DLQ) in the last 1 / 5 minutes.
    pub failed_1m: u64,
    pub failed_5m: u64,
    /// Retries scheduled in the last 5 minutes.
    pub retried_5m: u64,
}

impl Summary {
    /// Finished jobs per second over the last minute.
    pub fn throughput_1m(&self) -> f64 {
        (self.succeeded_1m + self.failed_1m) as f64 / 60.0
    }

    pub fn throughput_5m(&self) -> f64 {
        (self.succeeded_5m + self.failed_5m) as f64 / 300.0
    }

    /// Share of finished jobs that failed over the last 5 minutes (0.0–1.0).
    pub fn failure_rate_5m(&self) -> f64 {
        let total = self.succeeded_5m + self.failed_5m;
        if total == 0 {
            0.0
        } else {
            self.failed_5m as f64 / total as f64
        }
    }
}

/// One queue's live numbers, joined with its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    pub queue: String,
    pub paused: bool,
    pub hidden: bool,
    pub max_workers: Option<u32>,
    pub pending: u64,
    pub scheduled: u64,
    pub fetched: u64,
    pub processing: u64,
    /// Archive rows of this queue (maintained counter).
    pub succeeded: u64,
    /// DLQ rows of this queue (maintained counter).
    pub failed: u64,
    /// Age of due pending jobs: average and oldest, in milliseconds.
    pub lag_avg_ms: u64,
    pub lag_max_ms: u64,
    pub lag_warn_secs: Option<u32>,
    pub lag_crit_secs: Option<u32>,
    pub zombie_timeout_secs: Option<u32>,
    pub execution_timeout_secs: Option<u32>,
}

/// One minute of finished work (all queues, or one queue when asked).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThroughputBucket {
    /// Start of the minute.
    pub minute: Timestamp,
    pub succeeded: u64,
    pub failed: u64,
    pub retried: u64,
    pub duration_sum_ms: u64,
    pub duration_max_ms: u64,
}

/// A group of DLQ jobs failing the same way: one error fingerprint (reason, error kind, job
/// type and the message with its variable parts masked; see [`crate::fingerprint`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorGroup {
    /// The group's key; `JobFilter::error_group` selects its dead letters.
    pub fingerprint: Fingerprint,
    pub reason: FailureReason,
    /// The error kind of the failures ("transient", "fatal", "zombie", ...).
    pub kind: String,
    pub job_type: String,
    /// The full message (up to the stored length) of the group's latest dead letter.
    pub sample: String,
    pub count: u64,
    pub last_seen: Timestamp,
}

/// Length of the DLQ rows' `error_prefix` column (the groups' key before fingerprints), in
/// characters.
pub const ERROR_PREFIX_CHARS: usize = 80;

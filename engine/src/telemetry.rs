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

/// Run times are counted per job type and minute in logarithmic bins, four per doubling, so
/// each bin is at most ~19 % wide and a percentile read from them is within ~9 % of the
/// true value at any scale (1 ms to days) — from a few hundred small rows an hour, never
/// from a scan of the archive. Bin 0 holds runs under 1 ms; bin `b ≥ 1` holds
/// `[2^((b-1)/4), 2^(b/4))` milliseconds.
pub mod run_time {
    /// Bins per doubling of the run time.
    const PER_DOUBLING: f64 = 4.0;
    /// The last bin, ~2^31.5 ms (about 35 days): anything longer is counted there.
    pub const MAX_BIN: u16 = 127;

    /// The bin a run of `ms` milliseconds is counted in. Both stores take it from here, so
    /// a run lands in the same bin whichever store records it.
    pub fn bin_of(ms: u64) -> u16 {
        if ms == 0 {
            return 0;
        }
        let bin = ((ms as f64).log2() * PER_DOUBLING).floor() as u64 + 1;
        bin.min(u64::from(MAX_BIN)) as u16
    }

    /// The bin's range in milliseconds: `[low, high)`.
    pub fn bounds(bin: u16) -> (f64, f64) {
        if bin == 0 {
            return (0.0, 1.0);
        }
        let b = f64::from(bin.min(MAX_BIN));
        (
            (2f64).powf((b - 1.0) / PER_DOUBLING),
            (2f64).powf(b / PER_DOUBLING),
        )
    }

    /// The value a percentile falling in this bin reports: its geometric middle (half a
    /// bin, ~9 %, from either edge); runs under 1 ms report 0.
    pub fn representative_ms(bin: u16) -> f64 {
        if bin == 0 {
            return 0.0;
        }
        let (low, high) = bounds(bin);
        (low * high).sqrt()
    }
}

/// How long one job type's runs took over a recent window, as counts per run-time bin
/// ([`run_time`]). Counted when a run ends in the archive or the dead-letter pillar (retried
/// attempts are not: they are counted once their job finishes for good).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunTimeHistogram {
    pub job_type: String,
    /// `(bin, runs)` with runs > 0, by bin ascending.
    pub bins: Vec<(u16, u64)>,
}

impl RunTimeHistogram {
    /// Build from `(bin, runs)` pairs in any order, adding repeats together.
    pub fn from_counts(job_type: String, counts: impl IntoIterator<Item = (u16, u64)>) -> Self {
        let mut merged = std::collections::BTreeMap::<u16, u64>::new();
        for (bin, runs) in counts {
            if runs > 0 {
                *merged.entry(bin.min(run_time::MAX_BIN)).or_default() += runs;
            }
        }
        RunTimeHistogram {
            job_type,
            bins: merged.into_iter().collect(),
        }
    }

    /// One histogram per job type from `(job type, bin, runs)` rows in any order, job types
    /// sorted by name.
    pub fn per_job_type(rows: impl IntoIterator<Item = (String, u16, u64)>) -> Vec<Self> {
        let mut by_type = std::collections::BTreeMap::<String, Vec<(u16, u64)>>::new();
        for (job_type, bin, runs) in rows {
            by_type.entry(job_type).or_default().push((bin, runs));
        }
        by_type
            .into_iter()
            .map(|(job_type, bins)| RunTimeHistogram::from_counts(job_type, bins))
            .collect()
    }

    pub fn runs(&self) -> u64 {
        self.bins.iter().map(|(_, n)| n).sum()
    }

    /// The run time (ms) that a share `q` (0.0–1.0) of the runs did not exceed, to the
    /// precision of a bin; `None` without runs.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let runs = self.runs();
        if runs == 0 {
            return None;
        }
        // The rank of the run the quantile names (1-based, nearest-rank method).
        let rank = ((q.clamp(0.0, 1.0) * runs as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bin, n) in &self.bins {
            seen += n;
            if seen >= rank {
                return Some(run_time::representative_ms(*bin));
            }
        }
        self.bins
            .last()
            .map(|(bin, _)| run_time::representative_ms(*bin))
    }
}

#[cfg(test)]
mod tests {
    use super::run_time::{MAX_BIN, bin_of, bounds, representative_ms};
    use super::*;

    #[test]
    fn every_run_time_falls_inside_its_bin() {
        for ms in (1..5_000u64).chain([86_400_000, 3_600_000 * 24 * 30]) {
            let (low, high) = bounds(bin_of(ms));
            assert!(
                low <= ms as f64 + 1e-9 && (ms as f64) < high + 1e-9,
                "{ms} ms in bin {} = [{low}, {high})",
                bin_of(ms)
            );
        }
        assert_eq!(bin_of(0), 0);
        assert_eq!(bin_of(u64::MAX), MAX_BIN);
    }

    #[test]
    fn a_bin_reports_within_ten_percent_of_any_run_it_holds() {
        for ms in [1u64, 7, 42, 999, 12_345, 3_600_000] {
            let reported = representative_ms(bin_of(ms));
            let off = (reported - ms as f64).abs() / ms as f64;
            assert!(off < 0.1, "{ms} ms reported as {reported} ({off:.3} off)");
        }
    }

    #[test]
    fn percentiles_follow_the_ranks_of_the_runs() {
        // 90 quick runs (10 ms) and 10 slow ones (2 s): the median is quick, p95 is slow.
        let h = RunTimeHistogram::from_counts(
            "mail".into(),
            [(bin_of(10), 60), (bin_of(2_000), 10), (bin_of(10), 30)],
        );
        assert_eq!(h.runs(), 100);
        let p50 = h.quantile_ms(0.5).unwrap_or_default();
        let p95 = h.quantile_ms(0.95).unwrap_or_default();
        assert!((9.0..11.0).contains(&p50), "p50 {p50}");
        assert!((1_800.0..2_200.0).contains(&p95), "p95 {p95}");
        // Exactly at the boundary: the 90th run is still quick.
        assert!(h.quantile_ms(0.9).unwrap_or_default() < 11.0);
        assert_eq!(RunTimeHistogram::default().quantile_ms(0.5), None);
    }
}

/// Pending jobs (due or scheduled) of one job type in one queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingGroup {
    pub queue: String,
    pub job_type: String,
    pub pending: u64,
}

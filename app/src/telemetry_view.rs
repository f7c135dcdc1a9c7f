//! The telemetry snapshot the overview shows and the live stream pushes: one per tick,
//! computed once by the server and shared by every browser.

use chrono::{DateTime, Utc};
use deck_engine::{ErrorGroup, QueueStats, Summary, ThroughputBucket};
use serde::Serialize;

/// What the runtime of this process reports (workers, prefetch buffer, circuit breakers).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RuntimeView {
    pub instance_id: String,
    pub workers_total: u32,
    pub workers_busy: u32,
    /// Jobs in this instance's prefetch buffer.
    pub buffered: u64,
    pub breakers: Vec<BreakerView>,
}

// A breaker and its state are the engine's: the console shows them and adds nothing.
pub use deck_engine::BreakerInfo as BreakerView;
pub use deck_engine::BreakerStateName as BreakerState;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EventLevel {
    Info,
    Warn,
    /// An operator did something from the console.
    Action,
}

impl EventLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            EventLevel::Info => "info",
            EventLevel::Warn => "warn",
            EventLevel::Action => "action",
        }
    }
}

/// One line of the live event console.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConsoleEvent {
    pub at: DateTime<Utc>,
    pub level: EventLevel,
    pub text: String,
    /// The job it is about, shown as a link to the job.
    pub job_id: Option<deck_engine::JobId>,
}

/// Everything the overview's live panels show, read through the store's telemetry class.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Telemetry {
    pub at: DateTime<Utc>,
    pub summary: Summary,
    /// Every queue, hidden ones too (`/metrics` reports them); the console shows
    /// `visible_queues`.
    pub queues: Vec<QueueStats>,
    /// Last hour, per minute, oldest first.
    pub throughput: Vec<ThroughputBucket>,
    pub errors: Vec<ErrorGroup>,
    pub runtime: RuntimeView,
    /// Newest first.
    pub events: Vec<ConsoleEvent>,
}

impl Telemetry {
    /// The queues an operator has not hidden from the overview.
    pub fn visible_queues(&self) -> Vec<QueueStats> {
        self.queues.iter().filter(|q| !q.hidden).cloned().collect()
    }
}

/// Lag thresholds when a queue sets none (seconds).
pub const DEFAULT_LAG_WARN_SECS: u32 = 30;
pub const DEFAULT_LAG_CRIT_SECS: u32 = 300;

/// How worrying a lag is, against the queue's thresholds (or the defaults).
pub fn lag_class(lag_ms: u64, warn_secs: Option<u32>, crit_secs: Option<u32>) -> &'static str {
    let warn = u64::from(warn_secs.unwrap_or(DEFAULT_LAG_WARN_SECS)) * 1_000;
    let crit = u64::from(crit_secs.unwrap_or(DEFAULT_LAG_CRIT_SECS)) * 1_000;
    if lag_ms >= crit {
        "crit"
    } else if lag_ms >= warn {
        "warn"
    } else {
        "ok"
    }
}

/// Failure-rate colour: over 5 % is a warning, over 25 % critical.
pub fn failure_class(rate: f64) -> &'static str {
    if rate >= 0.25 {
        "crit"
    } else if rate >= 0.05 {
        "warn"
    } else {
        "ok"
    }
}

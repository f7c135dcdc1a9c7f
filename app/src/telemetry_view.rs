//! How the console shows the shared telemetry snapshot (`deck_web::telemetry`, one per
//! tick, shared with the API and the ops endpoints): the thresholds behind its colours.

pub use deck_web::telemetry::{
    BreakerState, BreakerView, ConsoleEvent, EventLevel, RuntimeView, Telemetry,
};

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

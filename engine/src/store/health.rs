//! What a store knows about its own health without asking the database: how its recent
//! writes went, and whether it stopped accepting work for good. Readiness (`/readyz`) reads
//! it on every probe, so it is a few atomic loads and, only while writes fail, a lock.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::Timestamp;

/// A store's health as of now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreHealth {
    /// When a write last changed the database; `None`: none since the store opened, or the
    /// backend does not track it.
    pub last_write_at: Option<Timestamp>,
    /// Set while writes fail at the storage level (disk full, I/O error, read-only file);
    /// cleared by the next write that changes the database.
    pub write_failure: Option<WriteFailure>,
    /// Set for good once the store stopped accepting work (its database file was deleted or
    /// replaced), with the reason; only a restart clears it.
    pub unusable: Option<String>,
}

impl StoreHealth {
    /// Whether writes are expected to work.
    pub fn writes_ok(&self) -> bool {
        self.unusable.is_none() && self.write_failure.is_none()
    }
}

/// Writes have been failing since `since`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteFailure {
    pub since: Timestamp,
    pub last_at: Timestamp,
    /// Failed writes since `since`.
    pub failures: u64,
    /// The latest failure's message.
    pub error: String,
}

/// Records write outcomes as a backend sees them (any thread) and answers `StoreHealth`.
#[derive(Debug, Default)]
pub(crate) struct WriteHealthTracker {
    /// Microseconds since the epoch of the last write that changed the database; 0: none.
    last_write_us: AtomicI64,
    /// Mirrors `failure.is_some()`, so the success path takes no lock while all is well.
    failing: AtomicBool,
    failure: Mutex<Option<WriteFailure>>,
}

impl WriteHealthTracker {
    /// A write changed the database and committed.
    pub(crate) fn record_success(&self) {
        let now = Utc::now();
        self.last_write_us
            .store(now.timestamp_micros(), Ordering::Release);
        if self.failing.load(Ordering::Acquire) {
            let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(f) = failure.take() {
                tracing::info!(failures = f.failures, since = %f.since,
                    "database writes succeed again");
            }
            self.failing.store(false, Ordering::Release);
        }
    }

    /// A write failed at the storage level.
    pub(crate) fn record_failure(&self, error: &dyn std::fmt::Display) {
        let now = Utc::now();
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        match failure.as_mut() {
            Some(f) => {
                f.last_at = now;
                f.failures += 1;
                f.error = error.to_string();
            }
            None => {
                *failure = Some(WriteFailure {
                    since: now,
                    last_at: now,
                    failures: 1,
                    error: error.to_string(),
                });
            }
        }
        self.failing.store(true, Ordering::Release);
    }

    pub(crate) fn health(&self) -> StoreHealth {
        let us = self.last_write_us.load(Ordering::Acquire);
        let write_failure = if self.failing.load(Ordering::Acquire) {
            self.failure
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        } else {
            None
        };
        StoreHealth {
            last_write_at: (us != 0)
                .then(|| DateTime::from_timestamp_micros(us))
                .flatten(),
            write_failure,
            unusable: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_lasts_until_the_next_successful_write() {
        let t = WriteHealthTracker::default();
        assert_eq!(t.health(), StoreHealth::default());
        assert!(t.health().writes_ok());

        t.record_failure(&"database or disk is full");
        t.record_failure(&"database or disk is full");
        let h = t.health();
        assert!(!h.writes_ok());
        let f = h.write_failure.unwrap();
        assert_eq!(f.failures, 2);
        assert_eq!(f.error, "database or disk is full");
        assert!(h.last_write_at.is_none(), "nothing was ever written");

        t.record_success();
        let h = t.health();
        assert!(h.writes_ok(), "{h:?}");
        assert!(h.last_write_at.is_some());
    }
}

//! How an engine instance runs: the configuration types, their one set of defaults and their
//! one set of rules.
//!
//! The same types are the `[engine]` section of `deck.toml` (their serde names are the file's
//! keys, durations written the human way: `"1s"`, `"250ms"`, `"15m"`), so an embedding
//! application and the `deck` binary get the same defaults and are held to the same rules.

mod validate;
pub use crate::model::RescuePolicy;
pub use crate::values;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use validate::{ConfigError, ConfigProblem, ConfigReport};

/// Most workers one instance may run.
pub const MAX_WORKERS: u32 = 10_000;
/// Largest prefetch buffer.
pub const MAX_PREFETCH: u32 = 10_000;
/// Largest handler result one job may keep (`result_max_bytes`).
pub const MAX_RESULT_BYTES: usize = 16 * 1024 * 1024;

/// How this engine instance runs (`[engine]`). `Default` gives the documented defaults;
/// [`EngineConfig::validate`] lists every problem at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EngineConfig {
    /// Prefix of the instance id (the host name when unset).
    pub instance_name: Option<String>,
    /// Queues this instance works; `None` = all.
    #[serde(deserialize_with = "values::list_or_csv")]
    pub queues: Option<Vec<String>>,
    /// `false`: producer / console only — no claiming, no workers, no maintenance loops.
    pub run_workers: bool,
    /// Fixed worker count; `None` follows the persisted `EngineSettings.worker_count`.
    #[serde(rename = "workers")]
    pub worker_count: Option<u32>,
    /// Prefetch buffer size: claims never exceed its free space.
    pub prefetch: u32,
    /// Idle poll interval (peek/receive); same-process enqueues wake the fetcher at once.
    #[serde(with = "values::duration")]
    pub poll_interval: Duration,
    /// Mean job heartbeat interval, jittered ±20 %.
    #[serde(with = "values::duration")]
    pub heartbeat_interval: Duration,
    /// Default execution timeout; a queue's `execution_timeout_secs` overrides it.
    #[serde(with = "values::duration")]
    pub execution_timeout: Duration,
    /// How often execution deadlines are checked.
    #[serde(with = "values::duration")]
    pub timeout_check_interval: Duration,
    /// How long shutdown lets running jobs finish before cancelling them.
    #[serde(with = "values::duration")]
    pub shutdown_grace: Duration,
    /// How long shutdown keeps trying to commit the outcomes of finished jobs once their
    /// handlers have stopped, before it gives up and reports them (`ShutdownReport`).
    #[serde(with = "values::duration")]
    pub shutdown_flush_timeout: Duration,
    #[serde(with = "values::duration")]
    pub rescue_interval: Duration,
    pub rescue: RescuePolicy,
    /// How often old archive and dead-letter rows are pruned.
    #[serde(with = "values::duration")]
    pub retention_interval: Duration,
    /// How often the scheduler looks for due occurrences of recurring schedules.
    #[serde(with = "values::duration")]
    pub schedule_interval: Duration,
    pub breaker: BreakerConfig,
    /// Largest handler result (JSON bytes); larger results send the job to the DLQ.
    pub result_max_bytes: usize,
    /// How often awaited ids finished by other processes are looked up (only while anyone waits).
    #[serde(with = "values::duration")]
    pub wait_poll_interval: Duration,
    #[serde(with = "values::duration")]
    pub instance_heartbeat_interval: Duration,
    /// Capacity of the event broadcast (a slower subscriber skips events).
    pub event_capacity: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            instance_name: None,
            queues: None,
            run_workers: true,
            worker_count: None,
            prefetch: 100,
            poll_interval: Duration::from_secs(1),
            heartbeat_interval: Duration::from_secs(10),
            execution_timeout: Duration::from_secs(15 * 60),
            timeout_check_interval: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(30),
            shutdown_flush_timeout: Duration::from_secs(5),
            rescue_interval: Duration::from_secs(60),
            rescue: RescuePolicy::default(),
            retention_interval: Duration::from_secs(3600),
            schedule_interval: Duration::from_secs(1),
            breaker: BreakerConfig::default(),
            result_max_bytes: crate::validation::MAX_PAYLOAD_BYTES,
            wait_poll_interval: Duration::from_millis(250),
            instance_heartbeat_interval: Duration::from_secs(5),
            event_capacity: 1024,
        }
    }
}

/// The per-job-type circuit breaker (`[engine.breaker]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BreakerConfig {
    /// Failures within `window` that open the circuit.
    pub failure_threshold: u32,
    #[serde(with = "values::duration")]
    pub window: Duration,
    /// How long the circuit stays open before one probe job is let through.
    #[serde(with = "values::duration")]
    pub open_for: Duration,
    /// Jobs of an open circuit go back to pending, due this much later (no attempt spent).
    #[serde(with = "values::duration")]
    pub defer: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failure_threshold: 5,
            window: Duration::from_secs(60),
            open_for: Duration::from_secs(30),
            defer: Duration::from_secs(5),
        }
    }
}

impl EngineConfig {
    /// How long the job heartbeat keeps failing before running jobs are stopped: well inside
    /// the zombie timeout, so a worker that cannot reach the store stops its jobs before
    /// another instance's rescuer dead-letters them.
    pub(crate) fn heartbeat_give_up_after(&self) -> Duration {
        self.rescue.default_zombie_timeout.mul_f64(0.8)
    }
}

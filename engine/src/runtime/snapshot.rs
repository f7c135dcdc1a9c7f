//! What this instance is doing right now, for the console and `/metrics`.

use std::sync::atomic::Ordering;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::running::RunningJobInfo;
use crate::runtime::Control;
use crate::runtime::circuit_breaker::BreakerState;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeSnapshot {
    pub instance_id: String,
    pub run_workers: bool,
    /// The worker count in force.
    pub workers_total: u32,
    /// Jobs handed to workers and not finished yet.
    pub workers_busy: u32,
    /// Claimed jobs waiting in the prefetch buffer.
    pub buffered: u32,
    pub prefetch: u32,
    /// Buffered jobs per queue, by queue name.
    pub buffered_by_queue: Vec<(String, u32)>,
    /// Started and not yet committed, oldest id first.
    pub running: Vec<RunningJobInfo>,
    /// Job types whose breaker has seen failures.
    pub breakers: Vec<BreakerInfo>,
    pub counters: RuntimeCounters,
    /// Shutdown has begun: no new claims.
    pub draining: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerStateName {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerStateName {
    /// As an operator reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerStateName::Closed => "closed",
            BreakerStateName::Open => "open",
            BreakerStateName::HalfOpen => "half-open",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerInfo {
    pub job_type: String,
    pub state: BreakerStateName,
    /// Failures inside the window while closed; the window is emptied when the breaker
    /// opens, so an open breaker's reason is `opened_by_failures`.
    pub recent_failures: u32,
    /// While open: milliseconds until the half-open probe.
    pub probe_in_ms: Option<u64>,
    /// While open or half-open: the failures within the window that opened it.
    #[serde(default)]
    pub opened_by_failures: Option<u32>,
    /// While open or half-open: milliseconds since it last opened.
    #[serde(default)]
    pub opened_ms_ago: Option<u64>,
    /// It opened again because the half-open probe failed.
    #[serde(default)]
    pub probe_failed: bool,
    /// While half-open: the probe job is running now.
    #[serde(default)]
    pub probe_running: bool,
}

/// Counts since this engine started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeCounters {
    pub claimed: u64,
    pub started: u64,
    pub succeeded: u64,
    pub retried: u64,
    pub dead: u64,
    /// Completions the store refused because the job was no longer ours.
    pub not_applied: u64,
    /// Buffered jobs found stale at start and dropped unrun.
    pub stale_dropped: u64,
    /// Jobs deferred by an open circuit breaker.
    pub deferred: u64,
    /// Buffered jobs handed back on pause or shutdown.
    pub released: u64,
    /// Jobs taken over by another owner while running here.
    pub abandoned: u64,
}

pub(crate) fn counters(control: &Control) -> RuntimeCounters {
    let c = &control.counters;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    RuntimeCounters {
        claimed: load(&c.claimed),
        started: load(&c.started),
        succeeded: load(&c.succeeded),
        retried: load(&c.retried),
        dead: load(&c.dead),
        not_applied: load(&c.not_applied),
        stale_dropped: load(&c.stale_dropped),
        deferred: load(&c.deferred),
        released: load(&c.released),
        abandoned: load(&c.abandoned),
    }
}

pub(crate) fn build(control: &Control) -> RuntimeSnapshot {
    let mut snapshot = status(control);
    snapshot.buffered_by_queue = control.buffer.per_queue();
    snapshot.running = control.running.infos(Instant::now());
    snapshot
}

/// The snapshot without its per-job and per-queue lists (`running`, `buffered_by_queue`
/// stay empty): no lock the workers take on every job is held while they are copied.
pub(crate) fn status(control: &Control) -> RuntimeSnapshot {
    let now = Instant::now();
    let mut breakers: Vec<BreakerInfo> = control
        .breakers
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(job_type, b)| {
            let (state, probe_in_ms, probe_running) = match b.state() {
                BreakerState::Closed => (BreakerStateName::Closed, None, false),
                BreakerState::Open { until } => (
                    BreakerStateName::Open,
                    Some(crate::runtime::millis(until.saturating_duration_since(now))),
                    false,
                ),
                BreakerState::HalfOpen { probe_in_flight } => {
                    (BreakerStateName::HalfOpen, None, probe_in_flight)
                }
            };
            let trip = b.trip();
            BreakerInfo {
                job_type: job_type.clone(),
                state,
                recent_failures: u32::try_from(b.recent_failures()).unwrap_or(u32::MAX),
                probe_in_ms,
                opened_by_failures: trip.map(|t| t.failures),
                opened_ms_ago: trip
                    .map(|t| crate::runtime::millis(now.saturating_duration_since(t.at))),
                probe_failed: trip.is_some_and(|t| t.probe_failed),
                probe_running,
            }
        })
        .collect();
    breakers.sort_by(|a, b| a.job_type.cmp(&b.job_type));
    RuntimeSnapshot {
        instance_id: control.instance_id.clone(),
        run_workers: control.config.run_workers,
        workers_total: if control.config.run_workers {
            control.workers.load().target()
        } else {
            0
        },
        workers_busy: control.workers.load().busy(),
        buffered: u32::try_from(control.buffer.len()).unwrap_or(u32::MAX),
        prefetch: control.config.prefetch,
        buffered_by_queue: Vec::new(),
        running: Vec::new(),
        breakers,
        counters: counters(control),
        draining: control.claiming.is_cancelled(),
    }
}

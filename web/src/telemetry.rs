//! The telemetry snapshot: what the store's telemetry class and this process's runtime say
//! now, read at most once per tick and shared by everyone who shows it — the console's
//! overview and live stream, `/api/v1/stats`, `/metrics` and `/readyz`. `deck serve` makes
//! one [`SharedTelemetry`] and hands it to the console and the API, so a hundred requests
//! of any kind cost the database one read per tick.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use deck_engine::{
    Engine, ErrorGroup, QueueStats, RunTimeHistogram, RuntimeSnapshot, StoreError, StoreReads,
    StoreResult, Summary, ThroughputBucket, Untaken,
};
use serde::Serialize;

use crate::tick_cache::TickCache;

/// How long one snapshot serves everyone unless the server says otherwise.
pub const DEFAULT_TICK: Duration = Duration::from_secs(2);

/// The (queue, type) groups of pending work held against the instances, largest first.
const PENDING_GROUPS: u32 = 200;
/// Instances whose heartbeat is at most this old count as takers (if not lost by then).
const INSTANCES_LISTED_FOR: Duration = Duration::from_secs(60);

/// The window of the run-time percentiles the console and `/metrics` show.
pub const RUN_TIME_WINDOW_MINUTES: u32 = 60;

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

impl From<RuntimeSnapshot> for RuntimeView {
    fn from(s: RuntimeSnapshot) -> Self {
        RuntimeView {
            instance_id: s.instance_id,
            workers_total: s.workers_total,
            workers_busy: s.workers_busy,
            buffered: u64::from(s.buffered),
            breakers: s.breakers,
        }
    }
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
    /// Newest first. Empty in the shared snapshot: the console's overview adds its own
    /// lines, because reading the snapshot for `/metrics` must not subscribe this process
    /// to the engine's per-job events.
    pub events: Vec<ConsoleEvent>,
    /// Pending work no live instance takes (a queue nobody serves, a type nobody runs).
    pub untaken: Vec<Untaken>,
}

impl Telemetry {
    /// The queues an operator has not hidden from the overview.
    pub fn visible_queues(&self) -> Vec<QueueStats> {
        self.queues.iter().filter(|q| !q.hidden).cloned().collect()
    }
}

/// The snapshot and the run times per job type, each read at most once per tick however
/// many callers ask. Callers that arrive while one is being read wait for that read.
pub struct SharedTelemetry {
    store: Arc<dyn StoreReads>,
    runtime: Box<dyn Fn() -> RuntimeView + Send + Sync>,
    snapshot: TickCache<Telemetry, StoreError>,
    run_times: TickCache<Vec<RunTimeHistogram>, StoreError>,
}

impl SharedTelemetry {
    /// Over `store`, with this process's runtime as `runtime` reports it (a process without
    /// a runtime reports `RuntimeView::default()`).
    pub fn new(
        store: Arc<dyn StoreReads>,
        runtime: impl Fn() -> RuntimeView + Send + Sync + 'static,
        tick: Duration,
    ) -> Self {
        SharedTelemetry {
            store,
            runtime: Box::new(runtime),
            snapshot: TickCache::new(tick),
            run_times: TickCache::new(tick),
        }
    }

    /// Over a running engine: its store, and its runtime's status (the cheap one, without
    /// the per-job lists).
    pub fn of_engine(engine: &Engine, tick: Duration) -> Self {
        let running = engine.clone();
        Self::new(
            engine.store().clone(),
            move || running.status().into(),
            tick,
        )
    }

    pub fn tick(&self) -> Duration {
        self.snapshot.max_age()
    }

    /// A fresh snapshot, bypassing the cache.
    pub async fn read(&self) -> StoreResult<Telemetry> {
        let store = &self.store;
        let (summary, queues, throughput, errors, pending, instances) = futures::try_join!(
            store.summary(),
            store.queue_stats(),
            store.throughput(60, None),
            store.top_errors(8),
            store.pending_groups(PENDING_GROUPS),
            store.list_instances(INSTANCES_LISTED_FOR),
        )?;
        let at = Utc::now();
        let untaken = deck_engine::untaken(&pending, &instances, at, |name| {
            queues.iter().any(|q| q.queue == name && q.paused)
        });
        Ok(Telemetry {
            at,
            summary,
            queues,
            throughput,
            errors,
            runtime: (self.runtime)(),
            events: Vec::new(),
            untaken,
        })
    }

    /// The shared snapshot, read at most once per tick.
    pub async fn snapshot(&self) -> StoreResult<Arc<Telemetry>> {
        self.snapshot.get(|| self.read()).await
    }

    /// Per job type, the run times of the runs that ended in the last hour: read at most
    /// once per tick, from the run-time bins, never the archive.
    pub async fn run_times(&self) -> StoreResult<Arc<Vec<RunTimeHistogram>>> {
        self.run_times
            .get(|| self.store.run_times(RUN_TIME_WINDOW_MINUTES))
            .await
    }
}

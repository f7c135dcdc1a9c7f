//! The worker runtime: fetcher, prefetch buffer, starter, worker pool, completer, job and
//! instance heartbeats, timeout watchdog, rescuer, pruner, circuit breakers, retry policy.
//!
//! The hot path is a pipeline of batches, one task per stage, each with at most one store
//! call in flight, so each call takes whatever piled up while the previous one ran (natural
//! group commit, no timers):
//!
//! ```text
//! enqueue ─wake─▶ fetcher ──claim_batch──▶ buffer ──▶ starter ──mark_processing──▶ ready
//!                                                                                   │
//!       waiters ◀── completer ◀──complete── completions ◀── workers (handlers) ◀────┘
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::channel::Waiters;
use crate::config::{EngineConfig, MAX_WORKERS};
use crate::handler::HandlerRegistry;
use crate::model::{EngineSettings, JobId, QueueConfig, Timestamp};
use crate::ops::{LocalRuntime, Operations};
use crate::store::Store;

pub mod circuit_breaker;
pub mod retry;

pub(crate) mod buffer;
pub(crate) mod completer;
pub(crate) mod fetcher;
pub(crate) mod heartbeat;
pub(crate) mod instance;
pub(crate) mod lifecycle;
pub(crate) mod outcome;
pub(crate) mod periodic;
pub(crate) mod pool;
pub(crate) mod result_sweeper;
pub(crate) mod scheduler;
pub(crate) mod snapshot;
pub(crate) mod starter;
pub mod sweeper;
pub(crate) mod timeouts;

#[cfg(test)]
mod tests;

pub use circuit_breaker::BreakerConfig;
pub use retry::RetryPolicy;
pub use snapshot::{BreakerInfo, BreakerStateName, RuntimeCounters, RuntimeSnapshot};
pub use sweeper::{Pruner, PrunerConfig, Rescuer, RescuerConfig};

use crate::events::{EngineEvent, EventBus, EventKind};
use crate::running::{RunningJob, RunningJobs};
use buffer::PrefetchBuffer;
use circuit_breaker::Breakers;

/// Most jobs one `mark_processing` call starts.
pub(crate) const MAX_START_BATCH: usize = 2_000;
/// Most completions one `complete` call commits.
pub(crate) const MAX_COMPLETE_BATCH: usize = 2_000;

/// Everything the runtime's tasks share. Tasks talk through these queues and signals,
/// never through each other's state. The fields are private to the runtime: the facade and
/// the operations layer use the methods below and [`LocalEffects`]; the periodic services
/// get only the handles they use.
pub(crate) struct Shared {
    store: Arc<dyn Store>,
    instance_id: String,
    started_at: Timestamp,
    config: EngineConfig,
    handlers: HandlerRegistry,
    events: EventBus,
    waiters: Arc<Waiters>,
    buffer: PrefetchBuffer,
    running: Arc<RunningJobs>,
    pool: Pool,
    breakers: Mutex<Breakers>,
    settings: RwLock<Arc<EngineSettings>>,
    retry: RwLock<Arc<RetryPolicy>>,
    queues: RwLock<Arc<QueueCache>>,
    /// Same-process enqueue (and bulkhead capacity freed) wakes the fetcher at once.
    wake_fetcher: Notify,
    /// The same news for every external worker's long-polling claim in this process.
    new_work: Notify,
    /// Jobs arrived in the buffer or a worker became free.
    wake_starter: Notify,
    /// Started jobs waiting for a worker task to pick them up.
    ready: Mutex<VecDeque<Arc<RunningJob>>>,
    wake_worker: Notify,
    completions: mpsc::UnboundedSender<outcome::Finished>,
    counters: Counters,
    /// Cancelled when shutdown begins: stop claiming and starting.
    claiming: CancellationToken,
    /// Cancelled when running work is done (or abandoned): every loop exits.
    stopped: CancellationToken,
    /// Cancelled when shutdown's flush timeout has passed: the completer stops trying to
    /// commit and records what it still held in `uncommitted`.
    abandon_commits: CancellationToken,
    /// Finished jobs whose outcome shutdown gave up committing.
    uncommitted: Mutex<Vec<JobId>>,
    /// The instance row was marked gone at shutdown.
    deregistered: AtomicBool,
    /// An operator quieted this instance (learned at the instance heartbeat, or at once when
    /// the console runs here): the fetcher claims nothing; buffered and running jobs finish.
    quiet: AtomicBool,
}

impl Shared {
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// This instance's id; also the worker id on every job it holds.
    pub(crate) fn instance_id(&self) -> &str {
        &self.instance_id
    }

    pub(crate) fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub(crate) fn events(&self) -> &EventBus {
        &self.events
    }

    pub(crate) fn waiters(&self) -> &Arc<Waiters> {
        &self.waiters
    }

    pub(crate) fn settings(&self) -> Arc<EngineSettings> {
        self.settings
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn retry_policy(&self) -> Arc<RetryPolicy> {
        self.retry.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Notified (all waiters at once) when work may have arrived: same-process enqueues,
    /// resurrections, jobs given back.
    pub(crate) fn new_work(&self) -> &Notify {
        &self.new_work
    }

    /// Cancelled when shutdown begins: nothing more is claimed.
    pub(crate) fn claiming(&self) -> &CancellationToken {
        &self.claiming
    }

    pub(crate) fn queue_cache(&self) -> Arc<QueueCache> {
        self.queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Adopt new engine-wide settings (saved here or seen in the store).
    pub(crate) fn apply_settings(self: &Arc<Self>, settings: EngineSettings) -> bool {
        {
            let current = self.settings.read().unwrap_or_else(|p| p.into_inner());
            if **current == settings {
                return false;
            }
        }
        *self.retry.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(RetryPolicy::from(&settings.retry));
        let workers = self.config.worker_count.unwrap_or(settings.worker_count);
        *self.settings.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(settings);
        if self.config.run_workers {
            self.set_worker_target(workers);
        }
        true
    }

    pub(crate) fn set_worker_target(self: &Arc<Self>, workers: u32) {
        let workers = workers.clamp(1, MAX_WORKERS);
        let old = self.pool.target.swap(workers, Ordering::AcqRel);
        if old != workers {
            tracing::info!(from = old, to = workers, "worker count changed");
            pool::ensure_workers(self);
            // Fewer workers: idle ones retire. More: the starter may start more now.
            self.wake_worker.notify_waiters();
            self.wake_starter.notify_one();
        }
    }

    /// Adopt the queues' settings (seen in the store or changed here).
    pub(crate) fn apply_queues(self: &Arc<Self>, queues: Vec<QueueConfig>) -> Vec<String> {
        let cache = QueueCache::new(queues);
        let paused: Vec<String> = cache.paused().map(str::to_string).collect();
        *self.queues.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(cache);
        paused
    }

    pub(crate) fn apply_queue(self: &Arc<Self>, queue: QueueConfig) {
        let mut all: Vec<QueueConfig> = self.queue_cache().by_name.values().cloned().collect();
        all.retain(|q| q.name != queue.name);
        all.push(queue);
        self.apply_queues(all);
    }

    /// Hand buffered jobs back to pending (no attempt spent). False when the store refused.
    pub(crate) async fn release(&self, ids: &[JobId], why: &str) -> bool {
        if ids.is_empty() {
            return true;
        }
        match self.store.release(&self.instance_id, ids, None).await {
            Ok(n) => {
                self.counters.add(&self.counters.released, n);
                tracing::info!(released = n, why, "buffered jobs handed back to pending");
                self.events.send_with(|| {
                    EngineEvent::new(
                        EventKind::Released,
                        format!("{n} buffered jobs released ({why})"),
                    )
                });
                true
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    jobs = ids.len(),
                    why,
                    "could not release buffered jobs; the rescuer will return them to pending"
                );
                false
            }
        }
    }

    pub(crate) fn is_quiet(&self) -> bool {
        self.quiet.load(Ordering::Acquire)
    }

    /// Follow the instance's quiet flag as stored. Resuming wakes the fetcher, which waits
    /// for exactly that while quiet. True when the flag changed.
    pub(crate) fn set_quiet(&self, quiet: bool) -> bool {
        if self.quiet.swap(quiet, Ordering::AcqRel) == quiet {
            return false;
        }
        let message = if quiet {
            tracing::info!("instance quieted: claiming no new jobs, finishing what it holds");
            "instance quieted: claiming no new jobs"
        } else {
            tracing::info!("instance resumed: claiming again");
            "instance resumed: claiming again"
        };
        self.events
            .send_with(|| EngineEvent::new(EventKind::Instance, message));
        if !quiet {
            self.wake_fetcher.notify_one();
        }
        true
    }

    /// Release the buffered jobs of one (paused) queue.
    pub(crate) async fn release_queue(&self, queue: &str) {
        let jobs = self.buffer.take_queue(queue);
        let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
        // A refusal is logged; the rescuer returns the jobs to pending.
        let _ = self.release(&ids, "queue paused").await;
    }
}

/// The operations layer's view of this runtime ([`crate::ops::LocalRuntime`]): what a write
/// made here changes at once.
#[derive(Clone)]
pub(crate) struct LocalEffects(Arc<Shared>);

/// The operations layer of an engine running here: its writes take effect on this runtime at
/// once.
pub(crate) fn operations(shared: &Arc<Shared>) -> Operations {
    Operations::with_runtime(
        shared.store.clone(),
        shared.events.clone(),
        Arc::new(LocalEffects(shared.clone())),
    )
}

#[async_trait]
impl LocalRuntime for LocalEffects {
    fn wake_fetcher(&self) {
        self.0.wake_fetcher.notify_one();
        self.0.new_work.notify_waiters();
    }

    fn stop_for_operator(&self, id: JobId) -> bool {
        self.0
            .running
            .get(id)
            .is_some_and(|run| run.cancel(crate::running::CancelReason::Operator))
    }

    async fn queue_changed(&self, queue: QueueConfig, paused: bool, claim_again: bool) {
        let name = queue.name.clone();
        self.0.apply_queue(queue);
        if paused {
            self.0.release_queue(&name).await;
        }
        if claim_again {
            self.wake_fetcher();
        }
    }

    fn instance_quiet_changed(&self, id: &str, quiet: bool) {
        if id == self.0.instance_id {
            self.0.set_quiet(quiet);
        }
    }

    fn settings_changed(&self, settings: EngineSettings) {
        self.0.apply_settings(settings);
    }
}

/// The worker pool's size and load.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    /// How many jobs may run at once (settings or config).
    pub(crate) target: AtomicU32,
    /// Jobs handed to workers and not finished yet.
    pub(crate) busy: AtomicU32,
    /// Worker tasks alive (mirror of `spawned_lock` for lock-free reads).
    pub(crate) spawned: AtomicU32,
    pub(crate) spawned_lock: Mutex<u32>,
}

impl Pool {
    pub(crate) fn free(&self) -> u32 {
        self.target
            .load(Ordering::Acquire)
            .saturating_sub(self.busy.load(Ordering::Acquire))
    }
}

/// The queues' settings as last seen, for execution timeouts, pause and bulkheads.
#[derive(Debug, Default)]
pub(crate) struct QueueCache {
    pub(crate) by_name: HashMap<String, QueueConfig>,
    pub(crate) any_bulkhead: bool,
}

impl QueueCache {
    pub(crate) fn new(queues: Vec<QueueConfig>) -> Self {
        let any_bulkhead = queues.iter().any(|q| q.max_workers.is_some());
        QueueCache {
            by_name: queues.into_iter().map(|q| (q.name.clone(), q)).collect(),
            any_bulkhead,
        }
    }

    pub(crate) fn execution_timeout(&self, queue: &str, default: Duration) -> Duration {
        self.by_name
            .get(queue)
            .and_then(|q| q.execution_timeout_secs)
            .map(|s| Duration::from_secs(u64::from(s)))
            .unwrap_or(default)
    }

    pub(crate) fn paused(&self) -> impl Iterator<Item = &str> {
        self.by_name
            .values()
            .filter(|q| q.paused)
            .map(|q| q.name.as_str())
    }
}

/// Monotonic counters since start, shown in the snapshot.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) claimed: AtomicU64,
    pub(crate) started: AtomicU64,
    pub(crate) succeeded: AtomicU64,
    pub(crate) retried: AtomicU64,
    pub(crate) dead: AtomicU64,
    pub(crate) not_applied: AtomicU64,
    pub(crate) stale_dropped: AtomicU64,
    pub(crate) deferred: AtomicU64,
    pub(crate) released: AtomicU64,
    pub(crate) abandoned: AtomicU64,
}

impl Counters {
    pub(crate) fn add(&self, counter: &AtomicU64, n: u64) {
        if n > 0 {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Duration in whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Sleep for `d` unless `token` fires first; returns false when it fired.
pub(crate) async fn sleep_or(token: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = token.cancelled() => false,
    }
}

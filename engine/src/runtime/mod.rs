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
//!
//! A job is started (marked processing, its attempt counted) only when its handler can run
//! it now: the starter takes a place in the handler's declared capacity first
//! ([`slots::Slots`]), and jobs without one wait in the buffer, unstarted; the fetcher starts
//! jobs straight from a claim only when no handler declares a capacity.
//!
//! Each stage is a struct that holds only its own handles and is moved into its task:
//! [`fetcher::Fetcher`], [`starter::Starter`] (which hands started jobs to the
//! [`launch::Launcher`]), the [`pool::WorkerPool`] whose workers run an [`outcome::Executor`],
//! and [`completer::Completer`]. What changes at run time (settings, retry policy, queue
//! configuration) lives in [`policies::Policies`]; what the rest of the engine needs from the
//! runtime lives in [`Control`]. [`lifecycle`] builds all of them and wires the queues.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::channel::Waiters;
use crate::config::{EngineConfig, MAX_WORKERS};
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
pub(crate) mod launch;
pub(crate) mod lifecycle;
pub(crate) mod outcome;
pub(crate) mod panics;
pub(crate) mod periodic;
pub(crate) mod policies;
pub(crate) mod pool;
pub(crate) mod result_sweeper;
pub(crate) mod scheduler;
pub(crate) mod slots;
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
use crate::running::RunningJobs;
use buffer::PrefetchBuffer;
use circuit_breaker::Breakers;
use fetcher::Quiet;
use policies::{Policies, QueueCache};
use pool::WorkerPool;

/// Most jobs one `mark_processing` call starts.
pub(crate) const MAX_START_BATCH: usize = 2_000;
/// Most completions one `complete` call commits.
pub(crate) const MAX_COMPLETE_BATCH: usize = 2_000;

/// The runtime as the rest of the engine sees it: the facade, the operations layer's local
/// effects, the external workers, the instance heartbeat and the snapshot. The pipeline's
/// stages do not use it: each owns only the handles it needs (see [`lifecycle`], which builds
/// them), and they meet only in the queues between them.
pub(crate) struct Control {
    store: Arc<dyn Store>,
    instance_id: String,
    started_at: Timestamp,
    config: EngineConfig,
    events: EventBus,
    waiters: Arc<Waiters>,
    policies: Arc<Policies>,
    running: Arc<RunningJobs>,
    buffer: Arc<PrefetchBuffer>,
    workers: WorkerPool,
    breakers: Arc<Mutex<Breakers>>,
    counters: Arc<Counters>,
    /// The job types this instance's handlers run, as its claims filter them (`None`: any);
    /// reported on its instance row so the console can tell work no instance takes.
    claimable_types: Option<Vec<String>>,
    quiet: Arc<Quiet>,
    /// Same-process enqueue (and bulkhead capacity freed) wakes the fetcher at once.
    wake_fetcher: Arc<Notify>,
    /// The same news for every external worker's long-polling claim in this process.
    new_work: Notify,
    /// Cancelled when shutdown begins: stop claiming and starting.
    claiming: CancellationToken,
}

impl Control {
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
        self.policies.settings()
    }

    pub(crate) fn retry_policy(&self) -> Arc<RetryPolicy> {
        self.policies.retry()
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
        self.policies.queues()
    }

    /// Adopt new engine-wide settings (saved here or seen in the store).
    pub(crate) fn apply_settings(&self, settings: EngineSettings) -> bool {
        let workers = self.config.worker_count.unwrap_or(settings.worker_count);
        if !self.policies.set_settings(settings) {
            return false;
        }
        if self.config.run_workers {
            self.workers.resize(workers.clamp(1, MAX_WORKERS));
        }
        true
    }

    /// Adopt the queues' settings (seen in the store); returns the paused ones.
    pub(crate) fn apply_queues(&self, queues: Vec<QueueConfig>) -> Vec<String> {
        self.policies.set_queues(queues)
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
        self.quiet.is_on()
    }

    /// Follow the instance's quiet flag as stored. True when the flag changed.
    pub(crate) fn set_quiet(&self, quiet: bool) -> bool {
        self.quiet.set(quiet)
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
pub(crate) struct LocalEffects(Arc<Control>);

/// The operations layer of an engine running here: its writes take effect on this runtime at
/// once.
pub(crate) fn operations(control: &Arc<Control>) -> Operations {
    Operations::with_runtime(
        control.store.clone(),
        control.events.clone(),
        Arc::new(LocalEffects(control.clone())),
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
        self.0.policies.set_queue(queue);
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

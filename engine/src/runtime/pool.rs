//! The worker pool: long-lived worker tasks, as many as the target, each taking one started
//! job at a time from the ready queue, running it and handing its outcome to the completer.
//! Scaling down retires idle workers only, so it never touches running work.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::running::{RunningJob, RunningJobs};
use crate::runtime::buffer::PrefetchBuffer;
use crate::runtime::outcome::{Executor, Finished};

/// How many jobs may run here and how many do. The fetcher and the starter reserve workers
/// before their store call and give back what it did not use; workers give theirs back when
/// their job is done.
#[derive(Debug, Default)]
pub(crate) struct PoolLoad {
    /// How many jobs may run at once (settings or config).
    target: AtomicU32,
    /// Jobs handed to workers (or reserved for a claim) and not finished yet.
    busy: AtomicU32,
    /// Worker tasks alive (mirror of `spawned_lock` for lock-free reads).
    spawned: AtomicU32,
    spawned_lock: Mutex<u32>,
}

impl PoolLoad {
    pub(crate) fn with_target(target: u32) -> Self {
        let load = PoolLoad::default();
        load.target.store(target, Ordering::Release);
        load
    }

    pub(crate) fn target(&self) -> u32 {
        self.target.load(Ordering::Acquire)
    }

    pub(crate) fn busy(&self) -> u32 {
        self.busy.load(Ordering::Acquire)
    }

    pub(crate) fn free(&self) -> u32 {
        self.target().saturating_sub(self.busy())
    }

    /// Count `n` more workers as busy.
    pub(crate) fn take(&self, n: usize) {
        if n > 0 {
            self.busy.fetch_add(n as u32, Ordering::AcqRel);
        }
    }

    /// Count `n` fewer workers as busy.
    pub(crate) fn give_back(&self, n: usize) {
        if n > 0 {
            self.busy.fetch_sub(n as u32, Ordering::AcqRel);
        }
    }

    /// Count `take` more workers as busy and `give_back` fewer, in one step.
    pub(crate) fn settle(&self, take: usize, give_back: usize) {
        if take > give_back {
            self.take(take - give_back);
        } else if give_back > take {
            self.give_back(give_back - take);
        }
    }
}

/// Started jobs waiting for a worker: the queue from the launch to the worker tasks, which
/// any free worker takes from.
#[derive(Debug, Default)]
pub(crate) struct ReadyJobs {
    jobs: Mutex<VecDeque<Arc<RunningJob>>>,
    wake: Notify,
}

impl ReadyJobs {
    pub(crate) fn send(&self, runs: Vec<Arc<RunningJob>>) {
        let count = runs.len();
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(runs);
        for _ in 0..count {
            self.wake.notify_one();
        }
    }

    fn try_recv(&self) -> Option<Arc<RunningJob>> {
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
    }
}

/// What every worker task holds.
pub(crate) struct WorkerParts {
    pub(crate) executor: Executor,
    pub(crate) load: Arc<PoolLoad>,
    pub(crate) ready: Arc<ReadyJobs>,
    pub(crate) running: Arc<RunningJobs>,
    pub(crate) completions: mpsc::UnboundedSender<Finished>,
    /// Told when a worker frees up while nothing is buffered: the fetcher may claim and
    /// start a job for it directly.
    pub(crate) buffer: Arc<PrefetchBuffer>,
    /// Told when a worker frees up: the starter may start a buffered job on it.
    pub(crate) wake_starter: Arc<Notify>,
    /// Cancelled when running work is done (or abandoned): idle workers exit.
    pub(crate) stopped: CancellationToken,
}

/// The worker pool: spawns worker tasks up to its target, retires idle ones above it.
#[derive(Clone)]
pub(crate) struct WorkerPool(Arc<WorkerParts>);

impl WorkerPool {
    pub(crate) fn new(parts: WorkerParts) -> Self {
        WorkerPool(Arc::new(parts))
    }

    pub(crate) fn load(&self) -> &PoolLoad {
        &self.0.load
    }

    /// Spawn worker tasks until there are as many as the target.
    pub(crate) fn ensure_workers(&self) {
        let load = &self.0.load;
        let target = load.target();
        let mut spawned = load.spawned_lock.lock().unwrap_or_else(|p| p.into_inner());
        while *spawned < target {
            *spawned += 1;
            tokio::spawn(worker_loop(self.0.clone()));
        }
        load.spawned.store(*spawned, Ordering::Release);
    }

    /// Run `workers` jobs at once from now on.
    pub(crate) fn resize(&self, workers: u32) {
        let old = self.0.load.target.swap(workers, Ordering::AcqRel);
        if old != workers {
            tracing::info!(from = old, to = workers, "worker count changed");
            self.ensure_workers();
            // Fewer workers: idle ones retire. More: the starter may start more now.
            self.0.ready.wake.notify_waiters();
            self.0.wake_starter.notify_one();
        }
    }
}

/// An idle worker above the target retires.
fn try_retire(load: &PoolLoad) -> bool {
    if load.spawned.load(Ordering::Acquire) <= load.target() {
        return false;
    }
    let mut spawned = load.spawned_lock.lock().unwrap_or_else(|p| p.into_inner());
    if *spawned > load.target() {
        *spawned -= 1;
        load.spawned.store(*spawned, Ordering::Release);
        true
    } else {
        false
    }
}

async fn next_job(parts: &WorkerParts) -> Option<Arc<RunningJob>> {
    let ready = &parts.ready;
    loop {
        if let Some(run) = ready.try_recv() {
            return Some(run);
        }
        if try_retire(&parts.load) || parts.stopped.is_cancelled() {
            return None;
        }
        let notified = ready.wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(run) = ready.try_recv() {
            return Some(run);
        }
        tokio::select! {
            _ = notified => {}
            _ = parts.stopped.cancelled() => {}
        }
    }
}

async fn worker_loop(parts: Arc<WorkerParts>) {
    while let Some(run) = next_job(&parts).await {
        let finished = parts.executor.execute(run).await;
        parts.running.handler_finished(&finished.run);
        // The completer only goes away after every running job is accounted for (or
        // shutdown gave up on committing them).
        let _ = parts.completions.send(finished);
        parts.load.give_back(1);
        parts.wake_starter.notify_one();
        if parts.buffer.len() == 0 {
            // Nothing buffered for this free worker: the fetcher may claim and start a job
            // for it directly.
            parts.buffer.room.notify_one();
        }
    }
}

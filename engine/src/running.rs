//! The jobs this instance is processing: from the ownership-checked start until their final
//! transition is committed. The job heartbeat, the timeout watchdog, operator cancel,
//! graceful shutdown and the snapshot all read this one registry.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering, fence};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use crate::events::EventBus;
use crate::model::{Job, JobId, Timestamp};

/// Why a running job's cancellation token fired. The first reason wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum CancelReason {
    None = 0,
    /// An operator cancelled it (locally or, via the heartbeat, from another process).
    Operator = 1,
    /// The execution timeout passed.
    Timeout = 2,
    /// The shutdown grace period ran out.
    Shutdown = 3,
    /// The heartbeat says another owner took it over (rescued as a zombie, purged).
    Lost = 4,
    /// Heartbeats could not be written for too long.
    HeartbeatFailure = 5,
}

impl CancelReason {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => CancelReason::Operator,
            2 => CancelReason::Timeout,
            3 => CancelReason::Shutdown,
            4 => CancelReason::Lost,
            5 => CancelReason::HeartbeatFailure,
            _ => CancelReason::None,
        }
    }
}

/// A handler's latest progress report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub percent: u8,
    pub message: String,
    pub at: Timestamp,
}

/// One job between its start and its committed completion. Shared by the registry, the
/// handler's `JobContext` and the completer: one allocation per job.
#[derive(Debug)]
pub(crate) struct RunningJob {
    /// As claimed, with `attempt` and `started_at` as `mark_processing` set them.
    pub(crate) job: Job,
    /// Runs this job gets in all: its own `max_attempts`, else the retry setting at start.
    pub(crate) max_attempts: u32,
    pub(crate) token: CancellationToken,
    reason: AtomicU8,
    pub(crate) progress: Mutex<Option<Progress>>,
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
    /// Admitted as a circuit breaker's half-open probe.
    pub(crate) probe: bool,
    pub(crate) events: EventBus,
    /// The handler has returned (or never ran): what is left is committing its outcome.
    handler_done: AtomicBool,
    /// The place this run holds in its handler's declared capacity
    /// (`HandlerRegistry::limit`), given back the moment the handler returns.
    slot: Mutex<Option<OwnedSemaphorePermit>>,
}

impl RunningJob {
    pub(crate) fn new(
        job: Job,
        max_attempts: u32,
        started: Instant,
        deadline: Instant,
        probe: bool,
        events: EventBus,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Self {
        RunningJob {
            job,
            max_attempts,
            token: CancellationToken::new(),
            reason: AtomicU8::new(CancelReason::None as u8),
            progress: Mutex::new(None),
            started,
            deadline,
            probe,
            events,
            handler_done: AtomicBool::new(false),
            slot: Mutex::new(slot),
        }
    }

    pub(crate) fn handler_done(&self) -> bool {
        self.handler_done.load(Ordering::Acquire)
    }

    /// Cancel the job's token, recording why (unless an earlier reason stands).
    pub(crate) fn cancel(&self, reason: CancelReason) -> bool {
        let first = self
            .reason
            .compare_exchange(
                CancelReason::None as u8,
                reason as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        self.token.cancel();
        first
    }

    pub(crate) fn cancel_reason(&self) -> CancelReason {
        CancelReason::from_u8(self.reason.load(Ordering::Acquire))
    }
}

/// What the snapshot shows about a running job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningJobInfo {
    pub id: JobId,
    pub queue: String,
    pub job_type: String,
    pub attempt: u32,
    pub started_at: Option<Timestamp>,
    pub running_ms: u64,
    pub progress: Option<Progress>,
    pub cancelling: bool,
}

#[derive(Debug, Default)]
pub(crate) struct RunningJobs {
    jobs: Mutex<HashMap<JobId, std::sync::Arc<RunningJob>>>,
    /// Signalled whenever the registry becomes empty and, while shutdown drains, whenever a
    /// handler returns or outcomes are committed (shutdown waits on those).
    changed: Notify,
    draining: AtomicBool,
}

impl RunningJobs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, std::sync::Arc<RunningJob>>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn insert_many<'a>(
        &self,
        jobs: impl IntoIterator<Item = &'a std::sync::Arc<RunningJob>>,
    ) {
        let mut map = self.lock();
        for j in jobs {
            map.insert(j.job.id, j.clone());
        }
    }

    pub(crate) fn remove_many(&self, ids: impl IntoIterator<Item = JobId>) {
        let mut map = self.lock();
        for id in ids {
            map.remove(&id);
        }
        if map.is_empty() || self.draining.load(Ordering::Relaxed) {
            self.changed.notify_waiters();
        }
    }

    /// From now on every finished handler and every commit is signalled (see `wait_until`).
    pub(crate) fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
        // Pairs with the fence in `handler_finished`: either a waiter sees that job's flag,
        // or that handler sees `draining` and signals.
        fence(Ordering::SeqCst);
    }

    /// The job's handler returned; its outcome goes to the completer next.
    pub(crate) fn handler_finished(&self, run: &RunningJob) {
        // The handler's capacity is free for the next job before anyone is told this one
        // is done (the worker then wakes the starter).
        drop(run.slot.lock().unwrap_or_else(|p| p.into_inner()).take());
        run.handler_done.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
        // Only shutdown waits for this: the hot path pays no lock.
        if self.draining.load(Ordering::Relaxed) {
            self.changed.notify_waiters();
        }
    }

    /// Jobs whose handler is still running, oldest id first.
    pub(crate) fn executing(&self) -> Vec<std::sync::Arc<RunningJob>> {
        let mut jobs: Vec<_> = self
            .lock()
            .values()
            .filter(|j| !j.handler_done())
            .cloned()
            .collect();
        jobs.sort_by_key(|j| j.job.id);
        jobs
    }

    /// Wait until `done` holds for the registry (checked again at every signal; see
    /// `start_draining` for which changes signal).
    pub(crate) async fn wait_until(
        &self,
        done: impl Fn(&HashMap<JobId, std::sync::Arc<RunningJob>>) -> bool,
    ) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done(&self.lock()) {
                return;
            }
            notified.await;
        }
    }

    pub(crate) fn get(&self, id: JobId) -> Option<std::sync::Arc<RunningJob>> {
        self.lock().get(&id).cloned()
    }

    pub(crate) fn ids(&self) -> Vec<JobId> {
        self.lock().keys().copied().collect()
    }

    pub(crate) fn all(&self) -> Vec<std::sync::Arc<RunningJob>> {
        self.lock().values().cloned().collect()
    }

    /// Cancel every job whose deadline has passed; returns how many.
    pub(crate) fn cancel_overdue(&self, now: Instant) -> Vec<std::sync::Arc<RunningJob>> {
        let map = self.lock();
        let mut overdue = Vec::new();
        for j in map.values() {
            if now >= j.deadline && !j.token.is_cancelled() {
                overdue.push(j.clone());
            }
        }
        drop(map);
        for j in &overdue {
            j.cancel(CancelReason::Timeout);
        }
        overdue
    }

    pub(crate) fn infos(&self, now: Instant) -> Vec<RunningJobInfo> {
        let map = self.lock();
        let mut out: Vec<RunningJobInfo> = map
            .values()
            .map(|j| RunningJobInfo {
                id: j.job.id,
                queue: j.job.queue.clone(),
                job_type: j.job.job_type.clone(),
                attempt: j.job.attempt,
                started_at: j.job.started_at,
                running_ms: u64::try_from(now.saturating_duration_since(j.started).as_millis())
                    .unwrap_or(u64::MAX),
                progress: j.progress.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                cancelling: j.token.is_cancelled(),
            })
            .collect();
        out.sort_by_key(|j| j.id);
        out
    }
}

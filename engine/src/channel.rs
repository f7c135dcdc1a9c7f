//! Awaiting job results.
//!
//! A waiter registers first, then looks the job up once (so a job that already finished
//! resolves at once and one finishing in between is not missed). Jobs completed by this
//! process wake their waiters directly from the completer, right after the commit, without
//! touching the database. Jobs finished by another process are found by one sweep loop per
//! process (`runtime::result_sweeper`) that asks `Store::finished_jobs` about the awaited ids only — every
//! `wait_poll_interval` while anyone waits, and not at all otherwise.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, oneshot};

use crate::error::StoreResult;
use crate::model::{Job, JobId, JobState};
use crate::store::Store;

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum WaitOutcome {
    /// In the archive; `job.result` holds the handler's result.
    Succeeded { job: Job },
    /// In the dead-letter queue; `job.state` names the reason, `job.errors` the attempts.
    Dead { job: Job },
    /// Not finished when the timeout ran out.
    Pending { state: JobState },
    /// No such job in any pillar (never existed, or purged).
    NotFound,
}

impl WaitOutcome {
    pub fn from_job(job: Job) -> Self {
        match job.state {
            JobState::Succeeded => WaitOutcome::Succeeded { job },
            JobState::Dead(_) => WaitOutcome::Dead { job },
            state => WaitOutcome::Pending { state },
        }
    }

    pub fn is_final(&self) -> bool {
        matches!(
            self,
            WaitOutcome::Succeeded { .. } | WaitOutcome::Dead { .. }
        )
    }

    pub fn job(&self) -> Option<&Job> {
        match self {
            WaitOutcome::Succeeded { job } | WaitOutcome::Dead { job } => Some(job),
            _ => None,
        }
    }
}

type Slot = (u64, oneshot::Sender<Job>);

/// The waiters of this process, by job id.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    by_job: Mutex<HashMap<JobId, Vec<Slot>>>,
    /// Mirror of `by_job.len()`, so the completer skips the lock when nobody waits.
    awaited: AtomicUsize,
    next_slot: AtomicU64,
    /// The sweep loop sleeps on this while nobody waits.
    registered: Notify,
}

impl Waiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, Vec<Slot>>> {
        self.by_job.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn has_waiters(&self) -> bool {
        self.awaited.load(Ordering::Acquire) > 0
    }

    pub(crate) fn register(self: &Arc<Self>, id: JobId) -> (WaiterGuard, oneshot::Receiver<Job>) {
        let (tx, rx) = oneshot::channel();
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
        {
            let mut map = self.lock();
            map.entry(id).or_default().push((slot, tx));
            self.awaited.store(map.len(), Ordering::Release);
        }
        self.registered.notify_one();
        (
            WaiterGuard {
                waiters: self.clone(),
                id,
                slot,
            },
            rx,
        )
    }

    /// Remove and return the waiters of a finished job.
    pub(crate) fn take(&self, id: JobId) -> Option<Vec<Slot>> {
        let mut map = self.lock();
        let slots = map.remove(&id);
        self.awaited.store(map.len(), Ordering::Release);
        slots
    }

    pub(crate) fn resolve(&self, slots: Vec<Slot>, job: Job) {
        let mut slots = slots.into_iter().peekable();
        while let Some((_, tx)) = slots.next() {
            if slots.peek().is_some() {
                let _ = tx.send(job.clone());
            } else {
                let _ = tx.send(job);
                break;
            }
        }
    }

    /// Returns once anyone in this process waits for a result (at once if someone does).
    pub(crate) async fn someone_waits(&self) {
        loop {
            let notified = self.registered.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.has_waiters() {
                return;
            }
            notified.await;
        }
    }

    pub(crate) fn awaited_ids(&self) -> Vec<JobId> {
        self.lock().keys().copied().collect()
    }

    fn forget(&self, id: JobId, slot: u64) {
        let mut map = self.lock();
        if let Some(slots) = map.get_mut(&id) {
            slots.retain(|(s, _)| *s != slot);
            if slots.is_empty() {
                map.remove(&id);
            }
        }
        self.awaited.store(map.len(), Ordering::Release);
    }
}

/// Deregisters its waiter when the wait ends, however it ends.
pub(crate) struct WaiterGuard {
    waiters: Arc<Waiters>,
    id: JobId,
    slot: u64,
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        self.waiters.forget(self.id, self.slot);
    }
}

/// Wait for one job to finish, at most `timeout`.
pub(crate) async fn wait(
    store: &Arc<dyn Store>,
    waiters: &Arc<Waiters>,
    id: JobId,
    timeout: Duration,
) -> StoreResult<WaitOutcome> {
    let (guard, rx) = waiters.register(id);
    match store.get_job(id).await? {
        None => return Ok(WaitOutcome::NotFound),
        Some(job) if job.state.is_final() => return Ok(WaitOutcome::from_job(job)),
        Some(_) => {}
    }
    if let Ok(Ok(job)) = tokio::time::timeout(timeout, rx).await {
        return Ok(WaitOutcome::from_job(job));
    }
    drop(guard);
    Ok(match store.get_job(id).await? {
        None => WaitOutcome::NotFound,
        Some(job) => WaitOutcome::from_job(job),
    })
}

//! The worker pool: long-lived worker tasks, as many as the target, each running one started
//! job at a time and handing its outcome to the completer. Scaling down retires idle
//! workers only, so it never touches running work.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::running::RunningJob;
use crate::runtime::Shared;
use crate::runtime::outcome::execute;

/// Spawn worker tasks until there are as many as the target.
pub(crate) fn ensure_workers(shared: &Arc<Shared>) {
    let target = shared.pool.target.load(Ordering::Acquire);
    let mut spawned = shared
        .pool
        .spawned_lock
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    while *spawned < target {
        *spawned += 1;
        let worker = shared.clone();
        tokio::spawn(worker_loop(worker));
    }
    shared.pool.spawned.store(*spawned, Ordering::Release);
}

/// An idle worker above the target retires.
fn try_retire(shared: &Shared) -> bool {
    let pool = &shared.pool;
    if pool.spawned.load(Ordering::Acquire) <= pool.target.load(Ordering::Acquire) {
        return false;
    }
    let mut spawned = pool.spawned_lock.lock().unwrap_or_else(|p| p.into_inner());
    if *spawned > pool.target.load(Ordering::Acquire) {
        *spawned -= 1;
        pool.spawned.store(*spawned, Ordering::Release);
        true
    } else {
        false
    }
}

fn pop_ready(shared: &Shared) -> Option<Arc<RunningJob>> {
    shared
        .ready
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .pop_front()
}

async fn next_job(shared: &Shared) -> Option<Arc<RunningJob>> {
    loop {
        if let Some(run) = pop_ready(shared) {
            return Some(run);
        }
        if try_retire(shared) || shared.stopped.is_cancelled() {
            return None;
        }
        let notified = shared.wake_worker.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(run) = pop_ready(shared) {
            return Some(run);
        }
        tokio::select! {
            _ = notified => {}
            _ = shared.stopped.cancelled() => {}
        }
    }
}

async fn worker_loop(shared: Arc<Shared>) {
    while let Some(run) = next_job(&shared).await {
        let finished = execute(&shared, run).await;
        shared.running.handler_finished(&finished.run);
        // The completer only goes away after every running job is accounted for (or
        // shutdown gave up on committing them).
        let _ = shared.completions.send(finished);
        shared.pool.busy.fetch_sub(1, Ordering::AcqRel);
        shared.wake_starter.notify_one();
        if shared.buffer.len() == 0 {
            // Nothing buffered for this free worker: the fetcher may claim and start a job
            // for it directly.
            shared.buffer.room.notify_one();
        }
    }
}

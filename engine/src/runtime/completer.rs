//! The completer: group-commits finished jobs. It takes everything that piled up while its
//! previous `complete` call ran (up to a cap) and commits it in one call, so under load each
//! transaction carries hundreds of jobs and at low rates nothing waits for a timer. A job
//! counts as done (waiters woken, counters bumped, registry entry dropped) only after the
//! commit.
//!
//! A commit that fails is retried with backoff for as long as the engine runs (the disk may
//! be freed). Once shutdown's flush timeout has passed (`Shared::abandon_commits`), it gives
//! up: the jobs it held go to `Shared::uncommitted` for the shutdown report, and stay
//! `Processing` in the database for the rescuer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::events::{EngineEvent, EventKind};
use crate::model::{Applied, Completion, Job, JobState};
use crate::running::RunningJob;
use crate::runtime::circuit_breaker::{BreakerState, Signal};
use crate::runtime::outcome::Finished;
use crate::runtime::{MAX_COMPLETE_BATCH, Shared};
use crate::trace;

pub(crate) async fn run_completer(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Finished>) {
    let span = tracing::info_span!("completer", instance = %shared.instance_id);
    async move {
        let mut batch: Vec<Finished> = Vec::with_capacity(MAX_COMPLETE_BATCH);
        loop {
            let stopping = tokio::select! {
                biased;
                n = rx.recv_many(&mut batch, MAX_COMPLETE_BATCH) => {
                    if n == 0 {
                        return;
                    }
                    false
                }
                _ = shared.stopped.cancelled() => true,
            };
            if stopping {
                while let Ok(f) = rx.try_recv() {
                    batch.push(f);
                }
                if !batch.is_empty() {
                    commit(&shared, std::mem::take(&mut batch)).await;
                }
                return;
            }
            commit(&shared, std::mem::take(&mut batch)).await;
            batch.reserve(MAX_COMPLETE_BATCH);
        }
    }
    .instrument(span)
    .await
}

/// Commit one batch and act on the outcome of each completion.
pub(crate) async fn commit(shared: &Shared, batch: Vec<Finished>) {
    let completions: Vec<Completion> = batch.iter().filter_map(|f| f.completion.clone()).collect();
    let applied = if completions.is_empty() {
        Vec::new()
    } else {
        // Closed before any waiter is woken: a woken waiter finds the commit's span ended.
        let span = trace::complete_span(
            &shared.instance_id,
            batch
                .iter()
                .filter(|f| f.completion.is_some())
                .map(|f| &f.run.job),
        );
        match commit_with_retry(shared, completions)
            .instrument(span.clone())
            .await
        {
            Some(applied) => applied,
            None => {
                trace::complete_failed(&span);
                drop(span);
                return give_up(shared, &batch);
            }
        }
    };

    let now = Instant::now();
    record_breakers(shared, &batch, now);

    let has_waiters = shared.waiters.has_waiters();
    let events = shared.events.active();
    let counters = &shared.counters;
    let (mut succeeded, mut retried, mut dead, mut not_applied, mut abandoned) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut results = applied.into_iter();
    // Waiters are woken only after the counters below are bumped, and the job
    // leaves the running set, so a woken waiter never sees a snapshot still counting it as running.
    let mut resolved = Vec::new();
    for f in &batch {
        let Some(completion) = &f.completion else {
            abandoned += 1;
            tracing::warn!(job = %f.run.job.id, "job abandoned: another owner holds it now");
            continue;
        };
        let outcome = results.next().unwrap_or(Applied::NotApplied);
        if outcome == Applied::NotApplied {
            not_applied += 1;
            tracing::info!(job = %f.run.job.id, "completion not applied: the job is no longer \
                processing by this worker (rescued, cancelled or purged meanwhile)");
            continue;
        }
        let job = &f.run.job;
        match completion {
            Completion::Succeeded { .. } => succeeded += 1,
            Completion::Retry {
                error, retry_at, ..
            } => {
                retried += 1;
                tracing::debug!(job = %job.id, attempt = job.attempt, %retry_at,
                    error = %error.message, "attempt failed; retry scheduled");
            }
            Completion::Released { .. } => {}
            Completion::DeadLetter { reason, error, .. } => {
                dead += 1;
                tracing::info!(job = %job.id, queue = %job.queue, job_type = %job.job_type,
                    %reason, error = %error.message, "job moved to the dead-letter queue");
            }
        }
        if events {
            shared.events.send(event_for(job, completion));
        }
        if has_waiters
            && completion.is_final()
            && let Some(senders) = shared.waiters.take(job.id)
        {
            resolved.push((senders, final_job(&f.run, completion, &shared.instance_id)));
        }
    }
    counters.add(&counters.succeeded, succeeded);
    counters.add(&counters.retried, retried);
    counters.add(&counters.dead, dead);
    counters.add(&counters.not_applied, not_applied);
    counters.add(&counters.abandoned, abandoned);

    shared
        .running
        .remove_many(batch.iter().map(|f| f.run.job.id));
    for (senders, finished) in resolved {
        shared.waiters.resolve(senders, finished);
    }
    if shared.queue_cache().any_bulkhead {
        // Capacity of a bulkheaded queue was freed; jobs the last claim left behind may fit now.
        shared.wake_fetcher.notify_one();
    }
}

/// Shutdown gave up on this batch: nothing of it is known to be committed.
fn give_up(shared: &Shared, batch: &[Finished]) {
    let mut abandoned = 0u64;
    let mut ids = Vec::with_capacity(batch.len());
    for f in batch {
        match f.completion {
            Some(_) => ids.push(f.run.job.id),
            // Taken from us meanwhile: there was nothing to commit.
            None => abandoned += 1,
        }
    }
    tracing::warn!(
        jobs = ids.len(),
        "shutdown flush timeout passed: giving up committing finished jobs"
    );
    shared.counters.add(&shared.counters.abandoned, abandoned);
    shared
        .uncommitted
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend_from_slice(&ids);
    shared
        .running
        .remove_many(batch.iter().map(|f| f.run.job.id));
}

/// `None`: given up at shutdown (the commit may or may not have happened if a call was in
/// flight; the rescue rules hold either way).
async fn commit_with_retry(shared: &Shared, completions: Vec<Completion>) -> Option<Vec<Applied>> {
    let mut delay = Duration::from_millis(50);
    loop {
        let attempt = shared
            .store
            .complete(&shared.instance_id, completions.clone());
        let outcome = tokio::select! {
            biased;
            _ = shared.abandon_commits.cancelled() => return None,
            outcome = attempt => outcome,
        };
        match outcome {
            Ok(applied) => return Some(applied),
            Err(e) => {
                tracing::warn!(error = %e, jobs = completions.len(), retry_in = ?delay,
                    "could not commit completions; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shared.abandon_commits.cancelled() => return None,
                }
                // While shutdown waits on these, try more often than the usual 5 s.
                let cap = if shared.claiming.is_cancelled() {
                    Duration::from_secs(1)
                } else {
                    Duration::from_secs(5)
                };
                delay = (delay * 2).min(cap);
            }
        }
    }
}

fn record_breakers(shared: &Shared, batch: &[Finished], now: Instant) {
    let mut breakers = shared.breakers.lock().unwrap_or_else(|p| p.into_inner());
    let cfg = &shared.config.breaker;
    for f in batch {
        let probe = f.run.probe;
        if f.signal == Signal::Success && !probe && breakers.is_empty() {
            continue;
        }
        // The job type, or the downstream its route shares a breaker with.
        let job_type = shared.handlers.breaker_key(&f.run.job);
        let before = breakers.state(job_type);
        breakers.record(cfg, job_type, f.signal, probe, now);
        let after = breakers.state(job_type);
        if is_open(before) != is_open(after) {
            let message = if is_open(after) {
                tracing::warn!(
                    job_type,
                    "circuit breaker opened: jobs of this type are deferred"
                );
                format!("circuit breaker for {job_type:?} opened")
            } else {
                tracing::info!(job_type, "circuit breaker closed");
                format!("circuit breaker for {job_type:?} closed")
            };
            shared.events.send_with(|| {
                let mut e = EngineEvent::new(EventKind::Breaker, message);
                e.job_type = Some(job_type.to_string());
                e
            });
        }
    }
}

fn is_open(state: Option<BreakerState>) -> bool {
    matches!(state, Some(BreakerState::Open { .. }))
}

/// The job as it now stands in the archive or the DLQ, for same-process waiters.
fn final_job(run: &RunningJob, completion: &Completion, instance_id: &str) -> Job {
    finished_job(&run.job, completion, instance_id)
}

/// `job` (as it was started) after `completion` committed, as the worker `worker_id`.
pub(crate) fn finished_job(job: &Job, completion: &Completion, worker_id: &str) -> Job {
    let mut job = job.clone();
    job.finished_at = Some(Utc::now());
    job.worker_id = Some(worker_id.to_string());
    match completion {
        Completion::Succeeded { result, .. } => {
            job.state = JobState::Succeeded;
            job.result = result.clone();
        }
        Completion::DeadLetter { reason, error, .. } => {
            job.state = JobState::Dead(*reason);
            job.errors.push(error.clone());
        }
        Completion::Retry { error, .. } => {
            job.state = JobState::Pending;
            job.errors.push(error.clone());
        }
        Completion::Released { .. } => job.state = JobState::Pending,
    }
    job
}

/// The event announcing a committed completion of `job` (as it was claimed).
pub(crate) fn event_for(job: &Job, completion: &Completion) -> EngineEvent {
    let (kind, message) = match completion {
        Completion::Succeeded { duration_ms, .. } => (
            EventKind::Succeeded,
            format!("succeeded in {duration_ms} ms"),
        ),
        Completion::Retry {
            error, retry_at, ..
        } => (
            EventKind::Retried,
            format!(
                "attempt {} failed ({}): {}; retry at {}",
                job.attempt,
                error.kind,
                error.message,
                retry_at.format("%H:%M:%S")
            ),
        ),
        Completion::DeadLetter { reason, error, .. } => {
            (EventKind::Dead, format!("{reason}: {}", error.message))
        }
        Completion::Released { .. } => (EventKind::Released, "given back unrun".to_string()),
    };
    EngineEvent::new(kind, message).job(job.id, &job.queue, &job.job_type)
}

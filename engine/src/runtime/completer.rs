//! The completer: group-commits finished jobs. It takes everything that piled up while its
//! previous `complete` call ran (up to a cap) and commits it in one call, so under load each
//! transaction carries hundreds of jobs and at low rates nothing waits for a timer. A job
//! counts as done (waiters woken, counters bumped, registry entry dropped) only after the
//! commit.
//!
//! A commit that fails is retried with backoff for as long as the engine runs (the disk may
//! be freed). Once shutdown's flush timeout has passed (`Completer::abandon_commits`), it
//! gives up: the jobs it held go to `Completer::uncommitted` for the shutdown report, and
//! stay `Processing` in the database for the rescuer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::channel::Waiters;
use crate::events::{EngineEvent, EventBus, EventKind};
use crate::handler::HandlerRegistry;
use crate::model::{Applied, Completion, Job, JobId, JobState};
use crate::running::{RunningJob, RunningJobs};
use crate::runtime::circuit_breaker::{BreakerConfig, BreakerState, Breakers, Signal};
use crate::runtime::outcome::Finished;
use crate::runtime::policies::Policies;
use crate::runtime::{Counters, MAX_COMPLETE_BATCH};
use crate::store::Store;
use crate::trace;

pub(crate) struct Completer {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) instance_id: String,
    pub(crate) finished: mpsc::UnboundedReceiver<Finished>,
    pub(crate) waiters: Arc<Waiters>,
    pub(crate) events: EventBus,
    pub(crate) running: Arc<RunningJobs>,
    pub(crate) breakers: Arc<Mutex<Breakers>>,
    pub(crate) breaker_config: BreakerConfig,
    pub(crate) handlers: Arc<HandlerRegistry>,
    pub(crate) counters: Arc<Counters>,
    /// Read for whether any queue has a bulkhead.
    pub(crate) policies: Arc<Policies>,
    /// Told when a bulkhead's capacity was freed.
    pub(crate) wake_fetcher: Arc<Notify>,
    /// Cancelled when shutdown begins (commits are retried more often then).
    pub(crate) claiming: CancellationToken,
    /// Cancelled when running work is done (or abandoned): commit what is left and exit.
    pub(crate) stopped: CancellationToken,
    /// Cancelled when shutdown's flush timeout has passed: stop trying to commit and record
    /// what is still held in `uncommitted`.
    pub(crate) abandon_commits: CancellationToken,
    /// Finished jobs whose outcome shutdown gave up committing.
    pub(crate) uncommitted: Arc<Mutex<Vec<JobId>>>,
}

impl Completer {
    pub(crate) async fn run(mut self) {
        let span = tracing::info_span!("completer", instance = %self.instance_id);
        async move {
            let mut batch: Vec<Finished> = Vec::with_capacity(MAX_COMPLETE_BATCH);
            loop {
                let stopping = tokio::select! {
                    biased;
                    n = self.finished.recv_many(&mut batch, MAX_COMPLETE_BATCH) => {
                        if n == 0 {
                            return;
                        }
                        false
                    }
                    _ = self.stopped.cancelled() => true,
                };
                if stopping {
                    while let Ok(f) = self.finished.try_recv() {
                        batch.push(f);
                    }
                    if !batch.is_empty() {
                        self.commit(std::mem::take(&mut batch)).await;
                    }
                    return;
                }
                self.commit(std::mem::take(&mut batch)).await;
                batch.reserve(MAX_COMPLETE_BATCH);
            }
        }
        .instrument(span)
        .await
    }

    /// Commit one batch and act on the outcome of each completion.
    async fn commit(&self, batch: Vec<Finished>) {
        let completions: Vec<Completion> =
            batch.iter().filter_map(|f| f.completion.clone()).collect();
        let applied = if completions.is_empty() {
            Vec::new()
        } else {
            // Closed before any waiter is woken: a woken waiter finds the commit's span ended.
            let span = trace::complete_span(
                &self.instance_id,
                batch
                    .iter()
                    .filter(|f| f.completion.is_some())
                    .map(|f| &f.run.job),
            );
            match self
                .commit_with_retry(completions)
                .instrument(span.clone())
                .await
            {
                Some(applied) => applied,
                None => {
                    trace::complete_failed(&span);
                    drop(span);
                    return self.give_up(&batch);
                }
            }
        };

        let now = Instant::now();
        self.record_breakers(&batch, now);

        let has_waiters = self.waiters.has_waiters();
        let events = self.events.active();
        let counters = &self.counters;
        let (mut succeeded, mut retried, mut dead, mut not_applied, mut abandoned) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut results = applied.into_iter();
        // Waiters are woken only after the counters below are bumped and the job leaves the
        // running set, so a woken waiter never sees a snapshot still counting it as running.
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
                self.events.send(event_for(job, completion));
            }
            if has_waiters
                && completion.is_final()
                && let Some(senders) = self.waiters.take(job.id)
            {
                resolved.push((senders, final_job(&f.run, completion, &self.instance_id)));
            }
        }
        counters.add(&counters.succeeded, succeeded);
        counters.add(&counters.retried, retried);
        counters.add(&counters.dead, dead);
        counters.add(&counters.not_applied, not_applied);
        counters.add(&counters.abandoned, abandoned);

        self.running.remove_many(batch.iter().map(|f| f.run.job.id));
        for (senders, finished) in resolved {
            self.waiters.resolve(senders, finished);
        }
        if self.policies.queues().any_bulkhead {
            // Capacity of a bulkheaded queue was freed; jobs the last claim left behind may
            // fit now.
            self.wake_fetcher.notify_one();
        }
    }

    /// Shutdown gave up on this batch: nothing of it is known to be committed.
    fn give_up(&self, batch: &[Finished]) {
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
        self.counters.add(&self.counters.abandoned, abandoned);
        self.uncommitted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(&ids);
        self.running.remove_many(batch.iter().map(|f| f.run.job.id));
    }

    /// `None`: given up at shutdown (the commit may or may not have happened if a call was in
    /// flight; the rescue rules hold either way).
    async fn commit_with_retry(&self, completions: Vec<Completion>) -> Option<Vec<Applied>> {
        let mut delay = Duration::from_millis(50);
        loop {
            let attempt = self.store.complete(&self.instance_id, completions.clone());
            let outcome = tokio::select! {
                biased;
                _ = self.abandon_commits.cancelled() => return None,
                outcome = attempt => outcome,
            };
            match outcome {
                Ok(applied) => return Some(applied),
                Err(e) => {
                    tracing::warn!(error = %e, jobs = completions.len(), retry_in = ?delay,
                    "could not commit completions; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.abandon_commits.cancelled() => return None,
                    }
                    // While shutdown waits on these, try more often than the usual 5 s.
                    let cap = if self.claiming.is_cancelled() {
                        Duration::from_secs(1)
                    } else {
                        Duration::from_secs(5)
                    };
                    delay = (delay * 2).min(cap);
                }
            }
        }
    }

    fn record_breakers(&self, batch: &[Finished], now: Instant) {
        let mut breakers = self.breakers.lock().unwrap_or_else(|p| p.into_inner());
        let cfg = &self.breaker_config;
        for f in batch {
            let probe = f.run.probe;
            if f.signal == Signal::Success && !probe && breakers.is_empty() {
                continue;
            }
            // The job type, or the downstream its route shares a breaker with.
            let job_type = self.handlers.breaker_key(&f.run.job);
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
                self.events.send_with(|| {
                    let mut e = EngineEvent::new(EventKind::Breaker, message);
                    e.job_type = Some(job_type.to_string());
                    e
                });
            }
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

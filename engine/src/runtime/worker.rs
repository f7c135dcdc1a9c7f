//! The starter and the worker tasks.
//!
//! The starter takes as many buffered jobs as there are free workers, asks the circuit
//! breakers, and starts them all with one `mark_processing` call (the ownership check: a job
//! missing from the answer was released, rescued or cancelled meanwhile and is dropped
//! unrun). Worker tasks are long-lived; each runs one handler at a time, turns its outcome
//! into a `Completion` and hands it to the completer.

use std::any::Any;
use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::FutureExt;
use tracing::Instrument;

use crate::handler::{HandlerError, HandlerOutcome, JobContext};
use crate::model::{AttemptError, Completion, FailureReason, Job, JobId, JobState};
use crate::runtime::circuit_breaker::{Admission, Signal};
use crate::runtime::events::{EngineEvent, EventKind};
use crate::runtime::retry::{AttemptFailure, RetryDecision};
use crate::runtime::running::{CancelReason, RunningJob};
use crate::runtime::{MAX_START_BATCH, Shared, millis, sleep_or};

/// A handler finished (or was stopped); the completer commits `completion`.
pub(crate) struct Finished {
    pub(crate) run: Arc<RunningJob>,
    /// `None`: the job was taken from us (heartbeat said `lost`), nothing to commit.
    pub(crate) completion: Option<Completion>,
    /// What the outcome says about the job type's downstream, for its circuit breaker.
    pub(crate) signal: Signal,
}

// ---------------------------------------------------------------------------- worker pool

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

/// An idle worker above the target retires (scaling down never touches running work).
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

// ---------------------------------------------------------------------------- execution

/// Run one job's handler until it returns, panics or its token fires.
pub(crate) async fn execute(shared: &Shared, run: Arc<RunningJob>) -> Finished {
    let ctx = JobContext::new(run.clone());
    let handlers = &shared.handlers;
    // The handler is created inside the guarded future, so a panic while building it is caught too.
    let handler = AssertUnwindSafe(async move { handlers.dispatch(ctx).await }).catch_unwind();
    let mut outcome = tokio::select! {
        biased;
        r = handler => Some(r),
        _ = run.token.cancelled() => None,
    };
    // A handler that fails because it noticed its token was cancelled: the cancel's reason
    // (operator, timeout, shutdown) decides what happens, not the handler's error. Work that
    // succeeded anyway stands.
    if !matches!(outcome, Some(Ok(Ok(_)))) && run.token.is_cancelled() {
        outcome = None;
    }
    let (completion, signal) = conclude(shared, &run, outcome);
    Finished {
        run,
        completion,
        signal,
    }
}

type Caught = Result<HandlerOutcome, Box<dyn Any + Send>>;

fn conclude(
    shared: &Shared,
    run: &RunningJob,
    outcome: Option<Caught>,
) -> (Option<Completion>, Signal) {
    let job = &run.job;
    let duration_ms = millis(run.started.elapsed());
    match outcome {
        Some(Ok(Ok(result))) => {
            if let Some(text) = &result
                && text.len() > shared.config.result_max_bytes
            {
                let message = format!(
                    "the handler's result is {} bytes, over the limit of {} bytes \
                     (result_max_bytes); return less, or store the data elsewhere and \
                     return a reference to it",
                    text.len(),
                    shared.config.result_max_bytes
                );
                let c = dead(
                    job,
                    FailureReason::Fatal,
                    "result_too_large",
                    message,
                    duration_ms,
                );
                return (Some(c), Signal::Neutral);
            }
            let c = Completion::Succeeded {
                id: job.id,
                result,
                duration_ms,
            };
            (Some(c), Signal::Success)
        }
        Some(Ok(Err(e))) => {
            let (failure, signal) = match &e {
                HandlerError::Transient(_) => (AttemptFailure::Transient, Signal::Failure),
                HandlerError::Fatal(_) => (AttemptFailure::Fatal, Signal::Neutral),
                HandlerError::Throttled { retry_after, .. } => (
                    AttemptFailure::Throttled {
                        retry_after: *retry_after,
                    },
                    Signal::Failure,
                ),
            };
            let c = after_failure(shared, job, failure, e.kind(), e.to_string(), duration_ms);
            (Some(c), signal)
        }
        Some(Err(panic)) => {
            let message = format!("the handler panicked: {}", panic_message(&*panic));
            let c = after_failure(
                shared,
                job,
                AttemptFailure::Fatal,
                "panic",
                message,
                duration_ms,
            );
            (Some(c), Signal::Neutral)
        }
        None => match run.cancel_reason() {
            CancelReason::Operator => {
                let c = dead(
                    job,
                    FailureReason::Cancelled,
                    "cancelled",
                    "cancelled by an operator while running".to_string(),
                    duration_ms,
                );
                (Some(c), Signal::Neutral)
            }
            CancelReason::Timeout => {
                let limit = run.deadline.saturating_duration_since(run.started);
                let message = format!("execution timeout of {} exceeded", humanize(limit));
                let c = after_failure(
                    shared,
                    job,
                    AttemptFailure::Timeout,
                    "timeout",
                    message,
                    duration_ms,
                );
                (Some(c), Signal::Failure)
            }
            CancelReason::HeartbeatFailure => {
                let c = dead(
                    job,
                    FailureReason::HeartbeatFailure,
                    "heartbeat",
                    "this worker could not write heartbeats for too long and stopped the job"
                        .to_string(),
                    duration_ms,
                );
                (Some(c), Signal::Neutral)
            }
            CancelReason::Lost => (None, Signal::Neutral),
            CancelReason::Shutdown | CancelReason::None => {
                let c = after_failure(
                    shared,
                    job,
                    AttemptFailure::Transient,
                    "shutdown",
                    "interrupted: the worker shut down and the grace period ran out".to_string(),
                    duration_ms,
                );
                (Some(c), Signal::Neutral)
            }
        },
    }
}

fn after_failure(
    shared: &Shared,
    job: &Job,
    failure: AttemptFailure,
    kind: &str,
    message: String,
    duration_ms: u64,
) -> Completion {
    let now = Utc::now();
    let error = AttemptError {
        attempt: job.attempt,
        at: now,
        kind: kind.to_string(),
        message,
    };
    match shared
        .retry_policy()
        .decide(job, failure, now, &mut rand::rng())
    {
        RetryDecision::RetryAt(retry_at) => Completion::Retry {
            id: job.id,
            error,
            retry_at,
        },
        RetryDecision::Dead(reason) => Completion::DeadLetter {
            id: job.id,
            reason,
            error,
            duration_ms,
        },
    }
}

fn dead(
    job: &Job,
    reason: FailureReason,
    kind: &str,
    message: String,
    duration_ms: u64,
) -> Completion {
    Completion::DeadLetter {
        id: job.id,
        reason,
        error: AttemptError {
            attempt: job.attempt,
            at: Utc::now(),
            kind: kind.to_string(),
            message,
        },
        duration_ms,
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic payload that is not a string)".to_string()
    }
}

pub(crate) fn humanize(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        format!("{} min", secs / 60)
    } else if secs > 0 {
        format!("{secs} s")
    } else {
        format!("{} ms", d.as_millis())
    }
}

// ---------------------------------------------------------------------------- starter

pub(crate) async fn run_starter(shared: Arc<Shared>) {
    let span = tracing::info_span!("starter", instance = %shared.instance_id);
    async move {
        while let Some(n) = wait_for_work(&shared).await {
            let jobs = shared.buffer.take(n);
            if !jobs.is_empty() {
                start_batch(&shared, jobs).await;
            }
        }
    }
    .instrument(span)
    .await
}

/// How many jobs can start now: free workers and buffered jobs, both non-zero.
async fn wait_for_work(shared: &Shared) -> Option<usize> {
    loop {
        let notified = shared.wake_starter.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if shared.claiming.is_cancelled() {
            return None;
        }
        let free = shared.pool.free() as usize;
        let buffered = shared.buffer.len();
        if free > 0 && buffered > 0 {
            return Some(free.min(buffered).min(MAX_START_BATCH));
        }
        tokio::select! {
            _ = notified => {}
            _ = shared.claiming.cancelled() => return None,
        }
    }
}

async fn start_batch(shared: &Arc<Shared>, jobs: Vec<Job>) {
    let (admitted, deferred) = admit(shared, jobs);
    if !deferred.is_empty() {
        defer(shared, deferred).await;
    }
    if admitted.is_empty() {
        return;
    }
    let n = admitted.len();
    shared.pool.busy.fetch_add(n as u32, Ordering::AcqRel);
    let ids: Vec<JobId> = admitted.iter().map(|(j, _)| j.id).collect();
    let started = match shared
        .store
        .mark_processing(&shared.instance_id, &ids)
        .await
    {
        Ok(started) => started,
        Err(e) => {
            shared.pool.busy.fetch_sub(n as u32, Ordering::AcqRel);
            tracing::warn!(error = %e, jobs = n, "could not start jobs; retrying shortly");
            let mut jobs = Vec::with_capacity(n);
            for (job, probe) in admitted {
                if probe {
                    record_neutral(shared, &job.job_type);
                }
                jobs.push(job);
            }
            shared.buffer.push_front(jobs);
            sleep_or(&shared.claiming, Duration::from_millis(250)).await;
            return;
        }
    };
    let all_started = started.len() == n;
    let started_set: HashSet<JobId> = if all_started {
        HashSet::new()
    } else {
        started.into_iter().collect()
    };

    let started_at = Utc::now();
    let mut starting = Vec::with_capacity(n);
    let mut dropped = 0u32;
    for (mut job, probe) in admitted {
        if !all_started && !started_set.contains(&job.id) {
            dropped += 1;
            if probe {
                record_neutral(shared, &job.job_type);
            }
            tracing::info!(job = %job.id, queue = %job.queue, job_type = %job.job_type,
                "stale buffered job dropped unrun: it is no longer fetched by this worker");
            continue;
        }
        job.attempt += 1;
        job.state = JobState::Processing;
        job.started_at = Some(started_at);
        job.heartbeat_at = Some(started_at);
        starting.push((job, probe));
    }
    if dropped > 0 {
        shared.pool.busy.fetch_sub(dropped, Ordering::AcqRel);
        shared.wake_starter.notify_one();
        shared
            .counters
            .add(&shared.counters.stale_dropped, u64::from(dropped));
    }
    launch(shared, starting);
}

/// Hand started jobs (`Processing`, owned by this instance, each with a worker already
/// counted in `pool.busy`) to the worker tasks; with whether each is a breaker's probe.
pub(crate) fn launch(shared: &Arc<Shared>, jobs: Vec<(Job, bool)>) {
    if jobs.is_empty() {
        return;
    }
    let now = Instant::now();
    let wall_now = Utc::now();
    let cache = shared.queue_cache();
    let default_timeout = shared.config.execution_timeout;
    let mut runs = Vec::with_capacity(jobs.len());
    let mut expired = Vec::new();
    for (job, probe) in jobs {
        let deadline = now + cache.execution_timeout(&job.queue, default_timeout);
        let is_expired = job.expires_at.is_some_and(|at| at <= wall_now);
        let run = Arc::new(RunningJob::new(
            job,
            now,
            deadline,
            probe,
            shared.events.clone(),
        ));
        if is_expired {
            expired.push(run);
        } else {
            runs.push(run);
        }
    }
    shared
        .running
        .insert_many(runs.iter().chain(expired.iter()));
    if !expired.is_empty() {
        shared
            .pool
            .busy
            .fetch_sub(expired.len() as u32, Ordering::AcqRel);
        shared.wake_starter.notify_one();
    }
    for run in expired {
        // It expired before it could start: it must not run; the DLQ says why.
        let completion = dead(
            &run.job,
            FailureReason::Expired,
            "expired",
            "expires_at passed before the job could start".to_string(),
            0,
        );
        shared.running.handler_finished(&run);
        let _ = shared.completions.send(Finished {
            run,
            completion: Some(completion),
            signal: Signal::Neutral,
        });
    }
    let count = runs.len();
    shared.counters.add(&shared.counters.started, count as u64);
    if shared.events.active() {
        for run in &runs {
            let j = &run.job;
            shared.events.send(
                EngineEvent::new(EventKind::Started, format!("attempt {}", j.attempt)).job(
                    j.id,
                    &j.queue,
                    &j.job_type,
                ),
            );
        }
    }
    shared
        .ready
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend(runs);
    for _ in 0..count {
        shared.wake_worker.notify_one();
    }
}

/// Split jobs into those their type's circuit breaker lets through (with whether each is the
/// half-open probe) and those to defer.
fn admit(shared: &Shared, jobs: Vec<Job>) -> (Vec<(Job, bool)>, Vec<Job>) {
    let mut breakers = shared.breakers.lock().unwrap_or_else(|p| p.into_inner());
    if breakers.is_empty() {
        return (jobs.into_iter().map(|j| (j, false)).collect(), Vec::new());
    }
    let now = Instant::now();
    let mut admitted = Vec::with_capacity(jobs.len());
    let mut deferred = Vec::new();
    for job in jobs {
        match breakers.admit(&job.job_type, now) {
            Admission::Allow => admitted.push((job, false)),
            Admission::Probe => admitted.push((job, true)),
            Admission::Defer => deferred.push(job),
        }
    }
    (admitted, deferred)
}

fn record_neutral(shared: &Shared, job_type: &str) {
    shared
        .breakers
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .record(
            &shared.config.breaker,
            job_type,
            Signal::Neutral,
            true,
            Instant::now(),
        );
}

/// Jobs of an open circuit go back to pending, due a little later; no attempt is spent.
async fn defer(shared: &Shared, jobs: Vec<Job>) {
    let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
    let run_at = Utc::now()
        + chrono::Duration::from_std(shared.config.breaker.defer)
            .unwrap_or(chrono::Duration::seconds(5));
    match shared
        .store
        .release(&shared.instance_id, &ids, Some(run_at))
        .await
    {
        Ok(n) => {
            shared.counters.add(&shared.counters.deferred, n);
            tracing::debug!(jobs = n, "jobs deferred by an open circuit breaker");
            if shared.events.active() {
                for j in &jobs {
                    shared.events.send(
                        EngineEvent::new(
                            EventKind::Released,
                            "deferred: the circuit breaker of this job type is open",
                        )
                        .job(j.id, &j.queue, &j.job_type),
                    );
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, jobs = ids.len(),
            "could not defer jobs of an open circuit; the rescuer will return them to pending"),
    }
}

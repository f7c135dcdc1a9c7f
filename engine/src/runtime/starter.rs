//! The starter: takes as many buffered jobs as there are free workers, asks the circuit
//! breakers, and starts them all with one `mark_processing` call — the ownership check: a job
//! missing from the answer was released, rescued or cancelled meanwhile and is dropped unrun.
//! Started jobs are handed to the worker pool.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::Utc;
use tracing::Instrument;

use crate::events::{EngineEvent, EventKind};
use crate::model::{FailureReason, Job, JobId, JobState};
use crate::running::RunningJob;
use crate::runtime::circuit_breaker::{Admission, Signal};
use crate::runtime::outcome::{Finished, dead};
use crate::runtime::{MAX_START_BATCH, Shared, sleep_or};

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
                    record_neutral(shared, &job);
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
                record_neutral(shared, &job);
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
    let retry = shared.retry_policy();
    let mut runs = Vec::with_capacity(jobs.len());
    let mut expired = Vec::new();
    for (job, probe) in jobs {
        let deadline = now + cache.execution_timeout(&job.queue, default_timeout);
        let is_expired = job.expires_at.is_some_and(|at| at <= wall_now);
        let max_attempts = retry.attempts_for(&job);
        let run = Arc::new(RunningJob::new(
            job,
            max_attempts,
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
        match breakers.admit(shared.handlers.breaker_key(&job), now) {
            Admission::Allow => admitted.push((job, false)),
            Admission::Probe => admitted.push((job, true)),
            Admission::Defer => deferred.push(job),
        }
    }
    (admitted, deferred)
}

fn record_neutral(shared: &Shared, job: &Job) {
    shared
        .breakers
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .record(
            &shared.config.breaker,
            shared.handlers.breaker_key(job),
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

//! The launch: started jobs (`Processing`, owned by this instance, each with a worker
//! already counted busy) become running jobs — deadline, attempts allowed, registry entry —
//! and go to the ready queue for the workers. Both the starter and the fetcher (for jobs a
//! claim started at once) launch; a job that expired before it could start goes straight to
//! the completer as dead.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::{Notify, mpsc};

use crate::events::{EngineEvent, EventBus, EventKind};
use crate::model::{FailureReason, Job};
use crate::running::{RunningJob, RunningJobs};
use crate::runtime::Counters;
use crate::runtime::circuit_breaker::Signal;
use crate::runtime::outcome::{Finished, dead};
use crate::runtime::policies::Policies;
use crate::runtime::pool::{PoolLoad, ReadyJobs};
use crate::runtime::slots::Slot;

/// A job `mark_processing` started, on its way to a worker.
pub(crate) struct Starting {
    pub(crate) job: Job,
    /// Admitted as a circuit breaker's half-open probe.
    pub(crate) probe: bool,
    /// Its place in its handler's capacity, if that handler declared one.
    pub(crate) slot: Option<Slot>,
}

impl Starting {
    /// A job of a handler without a declared capacity, not a probe.
    pub(crate) fn plain(job: Job) -> Self {
        Starting {
            job,
            probe: false,
            slot: None,
        }
    }
}

#[derive(Clone)]
pub(crate) struct Launcher {
    pub(crate) policies: Arc<Policies>,
    /// The execution timeout of queues that set none.
    pub(crate) default_timeout: Duration,
    pub(crate) running: Arc<RunningJobs>,
    pub(crate) events: EventBus,
    pub(crate) load: Arc<PoolLoad>,
    pub(crate) ready: Arc<ReadyJobs>,
    pub(crate) completions: mpsc::UnboundedSender<Finished>,
    pub(crate) counters: Arc<Counters>,
    /// Told when a reserved worker is given back (an expired job): it may take another.
    pub(crate) wake_starter: Arc<Notify>,
}

impl Launcher {
    /// Hand started jobs to the workers.
    pub(crate) fn launch(&self, jobs: Vec<Starting>) {
        if jobs.is_empty() {
            return;
        }
        let now = Instant::now();
        let wall_now = Utc::now();
        let cache = self.policies.queues();
        let retry = self.policies.retry();
        let mut runs = Vec::with_capacity(jobs.len());
        let mut expired = Vec::new();
        for Starting { job, probe, slot } in jobs {
            let deadline = now + cache.execution_timeout(&job.queue, self.default_timeout);
            let is_expired = job.expires_at.is_some_and(|at| at <= wall_now);
            let max_attempts = retry.attempts_for(&job);
            let run = Arc::new(RunningJob::new(
                job,
                max_attempts,
                now,
                deadline,
                probe,
                self.events.clone(),
                slot,
            ));
            if is_expired {
                expired.push(run);
            } else {
                runs.push(run);
            }
        }
        self.running.insert_many(runs.iter().chain(expired.iter()));
        if !expired.is_empty() {
            self.load.give_back(expired.len());
            self.wake_starter.notify_one();
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
            self.running.handler_finished(&run);
            let _ = self.completions.send(Finished {
                run,
                completion: Some(completion),
                signal: Signal::Neutral,
            });
        }
        self.counters.add(&self.counters.started, runs.len() as u64);
        if self.events.active() {
            for run in &runs {
                let j = &run.job;
                self.events.send(
                    EngineEvent::new(EventKind::Started, format!("attempt {}", j.attempt)).job(
                        j.id,
                        &j.queue,
                        &j.job_type,
                    ),
                );
            }
        }
        self.ready.send(runs);
    }
}

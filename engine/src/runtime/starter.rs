//! The starter: takes as many buffered jobs as there are free workers (skipping those whose
//! handler has no free place, see `slots.rs`), asks the circuit breakers, and starts them all with one `mark_processing` call — the ownership check: a job
//! missing from the answer was released, rescued or cancelled meanwhile and is dropped unrun.
//! Started jobs go to the launch.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::events::{EngineEvent, EventBus, EventKind};
use crate::handler::HandlerRegistry;
use crate::model::{Job, JobId, JobState};
use crate::runtime::buffer::PrefetchBuffer;
use crate::runtime::circuit_breaker::{Admission, BreakerConfig, Breakers, Signal};
use crate::runtime::launch::{Launcher, Starting};
use crate::runtime::pool::PoolLoad;
use crate::runtime::slots::{Slot, Slots};
use crate::runtime::{Counters, MAX_START_BATCH, sleep_or};
use crate::store::Store;

pub(crate) struct Starter {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) instance_id: String,
    pub(crate) buffer: Arc<PrefetchBuffer>,
    pub(crate) load: Arc<PoolLoad>,
    pub(crate) breakers: Arc<Mutex<Breakers>>,
    pub(crate) breaker_config: BreakerConfig,
    pub(crate) handlers: Arc<HandlerRegistry>,
    /// The places of handlers that limit how many of their jobs run at once.
    pub(crate) slots: Arc<Slots>,
    pub(crate) launcher: Launcher,
    pub(crate) events: EventBus,
    pub(crate) counters: Arc<Counters>,
    /// Jobs arrived in the buffer or a worker became free.
    pub(crate) wake: Arc<Notify>,
    pub(crate) claiming: CancellationToken,
}

impl Starter {
    pub(crate) async fn run(self) {
        let span = tracing::info_span!("starter", instance = %self.instance_id);
        async move {
            loop {
                let notified = self.wake.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.claiming.is_cancelled() {
                    return;
                }
                let jobs = self.startable();
                if !jobs.is_empty() {
                    self.start_batch(jobs).await;
                    continue;
                }
                // No free worker, nothing buffered, or every buffered job waits for its
                // handler's capacity: a finished job or a new claim wakes this.
                tokio::select! {
                    _ = notified => {}
                    _ = self.claiming.cancelled() => return,
                }
            }
        }
        .instrument(span)
        .await
    }

    /// The buffered jobs that can start now: as many as there are free workers, each
    /// holding a place in its handler's capacity; jobs whose handler is full keep their
    /// place in the buffer and do not hold up the others.
    fn startable(&self) -> Vec<(Job, Option<Slot>)> {
        let free = self.load.free() as usize;
        if free == 0 || self.buffer.len() == 0 {
            return Vec::new();
        }
        let n = free.min(MAX_START_BATCH);
        if self.slots.is_empty() {
            return self.buffer.take(n).into_iter().map(|j| (j, None)).collect();
        }
        self.buffer.take_admitted(n, |job| self.slots.try_take(job))
    }

    async fn start_batch(&self, jobs: Vec<(Job, Option<Slot>)>) {
        let (admitted, deferred) = self.admit(jobs);
        if !deferred.is_empty() {
            self.defer(deferred).await;
        }
        if admitted.is_empty() {
            return;
        }
        let n = admitted.len();
        self.load.take(n);
        let ids: Vec<JobId> = admitted.iter().map(|(j, _, _)| j.id).collect();
        let started = match self.store.mark_processing(&self.instance_id, &ids).await {
            Ok(started) => started,
            Err(e) => {
                self.load.give_back(n);
                tracing::warn!(error = %e, jobs = n, "could not start jobs; retrying shortly");
                let mut jobs = Vec::with_capacity(n);
                // Their places are given back with them: the retry takes them again.
                for (job, probe, _slot) in admitted {
                    if probe {
                        self.record_neutral(&job);
                    }
                    jobs.push(job);
                }
                self.buffer.push_front(jobs);
                sleep_or(&self.claiming, Duration::from_millis(250)).await;
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
        let mut dropped = 0usize;
        for (mut job, probe, slot) in admitted {
            if !all_started && !started_set.contains(&job.id) {
                dropped += 1;
                if probe {
                    self.record_neutral(&job);
                }
                tracing::info!(job = %job.id, queue = %job.queue, job_type = %job.job_type,
                    "stale buffered job dropped unrun: it is no longer fetched by this worker");
                continue;
            }
            job.attempt += 1;
            job.state = JobState::Processing;
            job.started_at = Some(started_at);
            job.heartbeat_at = Some(started_at);
            starting.push(Starting { job, probe, slot });
        }
        if dropped > 0 {
            self.load.give_back(dropped);
            self.wake.notify_one();
            self.counters
                .add(&self.counters.stale_dropped, dropped as u64);
        }
        self.launcher.launch(starting);
    }

    /// Split jobs into those their type's circuit breaker lets through (with whether each is
    /// the half-open probe, and its place) and those to defer (their places given back).
    #[allow(clippy::type_complexity)]
    fn admit(&self, jobs: Vec<(Job, Option<Slot>)>) -> (Vec<(Job, bool, Option<Slot>)>, Vec<Job>) {
        let mut breakers = self.breakers.lock().unwrap_or_else(|p| p.into_inner());
        if breakers.is_empty() {
            return (
                jobs.into_iter().map(|(j, s)| (j, false, s)).collect(),
                Vec::new(),
            );
        }
        let now = Instant::now();
        let mut admitted = Vec::with_capacity(jobs.len());
        let mut deferred = Vec::new();
        for (job, slot) in jobs {
            match breakers.admit(self.handlers.breaker_key(&job), now) {
                Admission::Allow => admitted.push((job, false, slot)),
                Admission::Probe => admitted.push((job, true, slot)),
                Admission::Defer => deferred.push(job),
            }
        }
        (admitted, deferred)
    }

    fn record_neutral(&self, job: &Job) {
        self.breakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record(
                &self.breaker_config,
                self.handlers.breaker_key(job),
                Signal::Neutral,
                true,
                Instant::now(),
            );
    }

    /// Jobs of an open circuit go back to pending, due a little later; no attempt is spent.
    async fn defer(&self, jobs: Vec<Job>) {
        let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
        let run_at = Utc::now()
            + chrono::Duration::from_std(self.breaker_config.defer)
                .unwrap_or(chrono::Duration::seconds(5));
        match self
            .store
            .release(&self.instance_id, &ids, Some(run_at))
            .await
        {
            Ok(n) => {
                self.counters.add(&self.counters.deferred, n);
                tracing::debug!(jobs = n, "jobs deferred by an open circuit breaker");
                if self.events.active() {
                    for j in &jobs {
                        self.events.send(
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
}

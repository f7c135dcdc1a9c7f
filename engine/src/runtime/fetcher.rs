//! The fetcher: claims due jobs for free workers and into the prefetch buffer.
//!
//! Peek/receive: a same-process enqueue wakes it at once; otherwise it polls every
//! `poll_interval`. A claim that came back full means more work is waiting, so it claims
//! again as soon as there is capacity, without waiting for a wake-up or a poll.
//!
//! Each claim asks for two things (see [`ClaimPlan`]): jobs to *start* at once for workers
//! that are free and have nothing buffered to take (they come back `Processing`, one store
//! call from pending to running), and jobs to *buffer* (`Fetched`) when the buffer is at most
//! half full or empty, so refills stay large.
//!
//! A quieted instance (an operator's choice, stored on its instance row) claims nothing
//! until it is resumed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::events::{EngineEvent, EventBus, EventKind};
use crate::model::{ClaimRequest, Job, JobState};
use crate::runtime::buffer::PrefetchBuffer;
use crate::runtime::circuit_breaker::Breakers;
use crate::runtime::launch::{Launcher, Starting};
use crate::runtime::pool::PoolLoad;
use crate::runtime::slots::Slots;
use crate::runtime::{Counters, sleep_or};
use crate::store::Store;
use crate::trace;

/// What the next claim asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ClaimPlan {
    /// Jobs to start at once (free workers not covered by buffered jobs).
    start: usize,
    /// All jobs to claim: `start` plus the buffer refill.
    limit: usize,
}

pub(crate) struct Fetcher {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) instance_id: String,
    pub(crate) poll_interval: Duration,
    /// The queues this instance serves (`None`: all).
    pub(crate) queues: Option<Vec<String>>,
    /// The job types a handler here runs (`None`: all).
    pub(crate) types: Option<Vec<String>>,
    pub(crate) buffer: Arc<PrefetchBuffer>,
    pub(crate) load: Arc<PoolLoad>,
    /// Read only: a job may skip the buffer while every breaker is closed.
    pub(crate) breakers: Arc<Mutex<Breakers>>,
    /// Read only: a job may skip the buffer only if no handler here limits how many of its
    /// jobs run at once.
    pub(crate) slots: Arc<Slots>,
    pub(crate) launcher: Launcher,
    pub(crate) quiet: Arc<Quiet>,
    pub(crate) counters: Arc<Counters>,
    /// Same-process enqueue (and bulkhead capacity freed) wakes the fetcher at once.
    pub(crate) wake: Arc<Notify>,
    /// Told when jobs arrived in the buffer.
    pub(crate) wake_starter: Arc<Notify>,
    pub(crate) claiming: CancellationToken,
}

impl Fetcher {
    fn plan(&self) -> ClaimPlan {
        let buffered = self.buffer.len();
        // Checked in this order: the breakers' lock is only taken when there is a worker
        // to start a job for (this runs whenever a worker frees up).
        let uncovered = (self.load.free() as usize).saturating_sub(buffered);
        let start = if uncovered > 0 && self.direct_start_allowed() {
            uncovered
        } else {
            0
        };
        let room = self.buffer.free();
        let refill_at = self.buffer.capacity().div_ceil(2).max(1);
        let refill = if room >= refill_at || (room > 0 && buffered == 0) {
            room
        } else {
            0
        };
        ClaimPlan {
            start,
            limit: start + refill,
        }
    }

    /// A job may skip the buffer only if it will certainly run now: no circuit breaker that
    /// could defer it and no handler capacity it could have to wait for (those decisions
    /// are made by the starter, before the attempt counts).
    fn direct_start_allowed(&self) -> bool {
        self.slots.is_empty()
            && self
                .breakers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .all_closed()
    }

    pub(crate) async fn run(self) {
        let span = tracing::info_span!("fetcher", instance = %self.instance_id);
        async move {
            if self.types.as_ref().is_some_and(Vec::is_empty) {
                tracing::info!(
                    "no handlers registered: this instance claims no jobs (external \
                    workers pulling over the API run them)"
                );
            }
            // At start, assume work is waiting.
            let mut more_waiting = true;
            let mut backoff = Duration::from_millis(100);
            loop {
                if !self.wait_for_capacity().await {
                    return;
                }
                if !more_waiting {
                    tokio::select! {
                        _ = self.wake.notified() => {}
                        _ = tokio::time::sleep(self.poll_interval) => {}
                        _ = self.claiming.cancelled() => return,
                    }
                }
                // Checked right before the claim, after any wait, so a quiet learned
                // meanwhile stops this claim too.
                if self.quiet.is_on() {
                    // Quieted: claim nothing until resumed (`Quiet::set` wakes this);
                    // buffered and running jobs carry on through the starter and the workers.
                    tokio::select! {
                        _ = self.wake.notified() => {}
                        _ = self.claiming.cancelled() => return,
                    }
                    more_waiting = true;
                    continue;
                }
                let plan = self.plan();
                if plan.limit == 0 {
                    continue;
                }
                // Reserve the workers this claim may start jobs for, so the starter does not
                // hand them buffered jobs meanwhile.
                self.load.take(plan.start);
                let req = ClaimRequest {
                    worker_id: self.instance_id.clone(),
                    limit: u32::try_from(plan.limit).unwrap_or(u32::MAX),
                    start: u32::try_from(plan.start).unwrap_or(u32::MAX),
                    queues: self.queues.clone(),
                    types: self.types.clone(),
                };
                let span = trace::claim_span(&self.instance_id);
                match self.store.claim_batch(req).await {
                    Ok(jobs) => {
                        trace::claimed(&span, &jobs);
                        drop(span);
                        backoff = Duration::from_millis(100);
                        let got = jobs.len();
                        more_waiting = got >= plan.limit;
                        if got > 0 {
                            self.counters.add(&self.counters.claimed, got as u64);
                        }
                        let (started, fetched): (Vec<Job>, Vec<Job>) = jobs
                            .into_iter()
                            .partition(|j| j.state == JobState::Processing);
                        self.load.settle(started.len(), plan.start);
                        self.launcher
                            .launch(started.into_iter().map(Starting::plain).collect());
                        if !fetched.is_empty() {
                            self.buffer.push_back(fetched);
                        }
                        self.wake_starter.notify_one();
                    }
                    Err(e) => {
                        trace::claim_failed(&span);
                        span.in_scope(|| {
                            tracing::warn!(error = %e, retry_in = ?backoff, "claim failed");
                        });
                        drop(span);
                        self.load.give_back(plan.start);
                        more_waiting = false;
                        if !sleep_or(&self.claiming, backoff).await {
                            return;
                        }
                        backoff = (backoff * 2).min(self.poll_interval.max(backoff));
                    }
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Wait until a claim would ask for something: free workers with nothing buffered for
    /// them, or room to refill the buffer. False when claiming stopped.
    async fn wait_for_capacity(&self) -> bool {
        loop {
            let notified = self.buffer.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.claiming.is_cancelled() {
                return false;
            }
            if self.plan().limit > 0 {
                return true;
            }
            tokio::select! {
                _ = notified => {}
                _ = self.claiming.cancelled() => return false,
            }
        }
    }
}

/// Whether an operator quieted this instance (learned at the instance heartbeat, or at once
/// when the console runs here): the fetcher claims nothing; buffered and running jobs finish.
pub(crate) struct Quiet {
    on: AtomicBool,
    events: EventBus,
    /// Resuming wakes the fetcher, which waits for exactly that while quiet.
    wake_fetcher: Arc<Notify>,
}

impl Quiet {
    pub(crate) fn new(events: EventBus, wake_fetcher: Arc<Notify>) -> Self {
        Quiet {
            on: AtomicBool::new(false),
            events,
            wake_fetcher,
        }
    }

    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Follow the instance's quiet flag as stored. True when the flag changed.
    pub(crate) fn set(&self, quiet: bool) -> bool {
        if self.on.swap(quiet, Ordering::AcqRel) == quiet {
            return false;
        }
        let message = if quiet {
            tracing::info!("instance quieted: claiming no new jobs, finishing what it holds");
            "instance quieted: claiming no new jobs"
        } else {
            tracing::info!("instance resumed: claiming again");
            "instance resumed: claiming again"
        };
        self.events
            .send_with(|| EngineEvent::new(EventKind::Instance, message));
        if !quiet {
            self.wake_fetcher.notify_one();
        }
        true
    }
}

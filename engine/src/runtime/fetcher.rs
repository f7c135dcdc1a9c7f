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

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::Instrument;

use crate::model::{ClaimRequest, Job, JobState};
use crate::runtime::starter::launch;
use crate::runtime::{Shared, sleep_or};
use crate::trace;

/// What the next claim asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ClaimPlan {
    /// Jobs to start at once (free workers not covered by buffered jobs).
    start: usize,
    /// All jobs to claim: `start` plus the buffer refill.
    limit: usize,
}

impl ClaimPlan {
    fn now(shared: &Shared) -> ClaimPlan {
        let buffered = shared.buffer.len();
        // Checked in this order: the breakers' lock is only taken when there is a worker
        // to start a job for (this runs whenever a worker frees up).
        let uncovered = (shared.pool.free() as usize).saturating_sub(buffered);
        let start = if uncovered > 0 && direct_start_allowed(shared) {
            uncovered
        } else {
            0
        };
        let room = shared.buffer.free();
        let refill_at = shared.buffer.capacity().div_ceil(2).max(1);
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
}

/// A job may skip the buffer only if it will certainly run now: no circuit breaker that
/// could defer it (those decisions are made by the starter, before the attempt counts).
fn direct_start_allowed(shared: &Shared) -> bool {
    shared
        .breakers
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .all_closed()
}

pub(crate) async fn run_fetcher(shared: Arc<Shared>) {
    let span = tracing::info_span!("fetcher", instance = %shared.instance_id);
    async move {
        // Only types a handler here runs: the others wait for a worker that runs them.
        let claim_types = shared.handlers.claimable_types();
        if claim_types.as_ref().is_some_and(Vec::is_empty) {
            tracing::info!(
                "no handlers registered: this instance claims no jobs (external \
                workers pulling over the API run them)"
            );
        }
        // At start, assume work is waiting.
        let mut more_waiting = true;
        let mut backoff = Duration::from_millis(100);
        loop {
            if !wait_for_capacity(&shared).await {
                return;
            }
            if !more_waiting {
                tokio::select! {
                    _ = shared.wake_fetcher.notified() => {}
                    _ = tokio::time::sleep(shared.config.poll_interval) => {}
                    _ = shared.claiming.cancelled() => return,
                }
            }
            // Checked right before the claim, after any wait, so a quiet learned meanwhile
            // stops this claim too.
            if shared.is_quiet() {
                // Quieted: claim nothing until resumed (`set_quiet` wakes this); buffered
                // and running jobs carry on through the starter and the workers.
                tokio::select! {
                    _ = shared.wake_fetcher.notified() => {}
                    _ = shared.claiming.cancelled() => return,
                }
                more_waiting = true;
                continue;
            }
            let plan = ClaimPlan::now(&shared);
            if plan.limit == 0 {
                continue;
            }
            // Reserve the workers this claim may start jobs for, so the starter does not
            // hand them buffered jobs meanwhile.
            reserve_workers(&shared, plan.start, 0);
            let req = ClaimRequest {
                worker_id: shared.instance_id.clone(),
                limit: u32::try_from(plan.limit).unwrap_or(u32::MAX),
                start: u32::try_from(plan.start).unwrap_or(u32::MAX),
                queues: shared.config.queues.clone(),
                types: claim_types.clone(),
            };
            let span = trace::claim_span(&shared.instance_id);
            match shared.store.claim_batch(req).await {
                Ok(jobs) => {
                    trace::claimed(&span, &jobs);
                    drop(span);
                    backoff = Duration::from_millis(100);
                    let got = jobs.len();
                    more_waiting = got >= plan.limit;
                    if got > 0 {
                        shared.counters.add(&shared.counters.claimed, got as u64);
                    }
                    let (started, fetched): (Vec<Job>, Vec<Job>) = jobs
                        .into_iter()
                        .partition(|j| j.state == JobState::Processing);
                    reserve_workers(&shared, started.len(), plan.start);
                    launch(&shared, started.into_iter().map(|j| (j, false)).collect());
                    if !fetched.is_empty() {
                        shared.buffer.push_back(fetched);
                    }
                    shared.wake_starter.notify_one();
                }
                Err(e) => {
                    trace::claim_failed(&span);
                    span.in_scope(|| {
                        tracing::warn!(error = %e, retry_in = ?backoff, "claim failed");
                    });
                    drop(span);
                    reserve_workers(&shared, 0, plan.start);
                    more_waiting = false;
                    if !sleep_or(&shared.claiming, backoff).await {
                        return;
                    }
                    backoff = (backoff * 2).min(shared.config.poll_interval.max(backoff));
                }
            }
        }
    }
    .instrument(span)
    .await
}

/// Count `add` more workers as busy and `release` fewer.
fn reserve_workers(shared: &Shared, add: usize, release: usize) {
    let busy = &shared.pool.busy;
    let (add, release) = (add as u32, release as u32);
    if add > release {
        busy.fetch_add(add - release, Ordering::AcqRel);
    } else if release > add {
        busy.fetch_sub(release - add, Ordering::AcqRel);
    }
}

/// Wait until a claim would ask for something: free workers with nothing buffered for them,
/// or room to refill the buffer. False when claiming stopped.
async fn wait_for_capacity(shared: &Shared) -> bool {
    loop {
        let notified = shared.buffer.room.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if shared.claiming.is_cancelled() {
            return false;
        }
        if ClaimPlan::now(shared).limit > 0 {
            return true;
        }
        tokio::select! {
            _ = notified => {}
            _ = shared.claiming.cancelled() => return false,
        }
    }
}

//! The fetcher: claims due jobs into the prefetch buffer.
//!
//! Peek/receive: a same-process enqueue wakes it at once; otherwise it polls every
//! `poll_interval`. A claim that came back full means more work is waiting, so it claims
//! again as soon as the buffer has room, without waiting for a wake-up or a poll. A claim
//! never asks for more than the buffer's free space, and it refills only once the buffer is
//! at most half full (or empty), so claims stay large.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::model::ClaimRequest;
use crate::runtime::{Shared, sleep_or};

pub(crate) async fn run_fetcher(shared: Arc<Shared>) {
    let span = tracing::info_span!("fetcher", instance = %shared.instance_id);
    async move {
        // At start, assume work is waiting.
        let mut more_waiting = true;
        let mut backoff = Duration::from_millis(100);
        loop {
            if !wait_for_room(&shared).await {
                return;
            }
            if !more_waiting {
                tokio::select! {
                    _ = shared.wake_fetcher.notified() => {}
                    _ = tokio::time::sleep(shared.config.poll_interval) => {}
                    _ = shared.claiming.cancelled() => return,
                }
            }
            let limit = shared.buffer.free();
            if limit == 0 {
                continue;
            }
            let req = ClaimRequest {
                worker_id: shared.instance_id.clone(),
                limit: u32::try_from(limit).unwrap_or(u32::MAX),
                queues: shared.config.queues.clone(),
            };
            match shared.store.claim_batch(req).await {
                Ok(jobs) => {
                    backoff = Duration::from_millis(100);
                    let got = jobs.len();
                    more_waiting = got >= limit;
                    if got > 0 {
                        shared.counters.add(&shared.counters.claimed, got as u64);
                        shared.buffer.push_back(jobs);
                        shared.wake_starter.notify_one();
                    }
                }
                Err(e) => {
                    more_waiting = false;
                    tracing::warn!(error = %e, retry_in = ?backoff, "claim failed");
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

/// Wait until the buffer is empty or at most half full. False when claiming stopped.
async fn wait_for_room(shared: &Shared) -> bool {
    let capacity = shared.buffer.capacity();
    let refill_at = capacity.div_ceil(2).max(1);
    loop {
        let notified = shared.buffer.room.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if shared.claiming.is_cancelled() {
            return false;
        }
        let free = shared.buffer.free();
        if free >= refill_at || (free > 0 && shared.buffer.len() == 0) {
            return true;
        }
        tokio::select! {
            _ = notified => {}
            _ = shared.claiming.cancelled() => return false,
        }
    }
}

//! Producers' writes: validated here, stored, this process's fetcher woken, announced.

use std::future::Future;
use std::task::Poll;

use chrono::Utc;
use tracing::Instrument;

use crate::error::StoreResult;
use crate::events::{EngineEvent, EventKind};
use crate::model::{EnqueueOutcome, EnqueueRequest};
use crate::{trace, validation};

use super::Operations;

impl Operations {
    /// Enqueue one job (or find the active job its idempotency key names). A request
    /// without a trace context gets the one of its enqueue span (see `crate::trace`).
    pub async fn enqueue(&self, mut req: EnqueueRequest) -> StoreResult<EnqueueOutcome> {
        validation::validate_enqueue(&req)?;
        let span = trace::enqueue_span(&req.queue);
        trace::stamp(&span, std::slice::from_mut(&mut req));
        let named = self
            .events
            .active()
            .then(|| (req.queue.clone(), req.job_type.clone()));
        // Stamped before the write: the job may start (and say so) before the write returns.
        let submitted = Utc::now();
        let outcome = self
            .write_then_wake(self.store.enqueue(req), |o| o.created)
            .instrument(span.clone())
            .await?;
        trace::enqueued(&span, outcome.id, !outcome.created);
        if outcome.created
            && let Some((queue, job_type)) = named
        {
            let mut event = EngineEvent::new(EventKind::Enqueued, "enqueued");
            event.at = submitted;
            self.events.send(event.job(outcome.id, &queue, &job_type));
        }
        Ok(outcome)
    }

    /// Enqueue many jobs in one transaction (all or none); outcomes in request order. Requests
    /// without a trace context get the one of the batch's enqueue span.
    pub async fn enqueue_batch(
        &self,
        mut reqs: Vec<EnqueueRequest>,
    ) -> StoreResult<Vec<EnqueueOutcome>> {
        validation::validate_batch(&reqs)?;
        let span = trace::enqueue_batch_span(&reqs);
        trace::stamp(&span, &mut reqs);
        let named: Option<Vec<(String, String)>> = self.events.active().then(|| {
            reqs.iter()
                .map(|r| (r.queue.clone(), r.job_type.clone()))
                .collect()
        });
        let submitted = Utc::now();
        let outcomes = self
            .write_then_wake(self.store.enqueue_batch(reqs), |o| {
                o.iter().any(|o| o.created)
            })
            .instrument(span)
            .await?;
        if let Some(named) = named {
            for (o, (queue, job_type)) in outcomes.iter().zip(named) {
                if o.created {
                    let mut event = EngineEvent::new(EventKind::Enqueued, "enqueued");
                    event.at = submitted;
                    self.events.send(event.job(o.id, &queue, &job_type));
                }
            }
        }
        Ok(outcomes)
    }

    /// Run a write and wake this process's fetcher for the work it adds: as soon as the
    /// write is queued when the store orders writes on submit (the claim then runs right
    /// after it, possibly in the same transaction), otherwise once it committed and
    /// `created` says there is new work.
    pub(super) async fn write_then_wake<T>(
        &self,
        write: impl Future<Output = StoreResult<T>>,
        created: impl Fn(&T) -> bool,
    ) -> StoreResult<T> {
        let Some(rt) = &self.runtime else {
            return write.await;
        };
        let mut write = std::pin::pin!(write);
        if self.store.orders_writes_on_submit() {
            if let Poll::Ready(out) = futures::poll!(write.as_mut()) {
                if out.as_ref().is_ok_and(&created) {
                    rt.wake_fetcher();
                }
                return out;
            }
            rt.wake_fetcher();
            return write.await;
        }
        let out = write.await?;
        if created(&out) {
            rt.wake_fetcher();
        }
        Ok(out)
    }
}

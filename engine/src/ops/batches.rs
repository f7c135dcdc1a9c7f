//! Batches: a producer's write like an enqueue (validated, stored, the fetcher woken,
//! announced), of many jobs at once with their callbacks.

use chrono::Utc;
use tracing::Instrument;

use crate::batch::{self, BatchCreated, BatchRequest};
use crate::error::StoreResult;
use crate::events::{EngineEvent, EventKind};
use crate::trace;

use super::Operations;

impl Operations {
    /// Write a batch and its members in one transaction (all or none); see `crate::batch`.
    /// Members without a trace context get the one of the batch's enqueue span.
    pub async fn create_batch(&self, mut req: BatchRequest) -> StoreResult<BatchCreated> {
        batch::validate_batch_request(&req)?;
        let span = trace::enqueue_batch_span(&req.jobs);
        trace::stamp(&span, &mut req.jobs);
        let named: Option<Vec<(String, String)>> = self.events.active().then(|| {
            req.jobs
                .iter()
                .map(|r| (r.queue.clone(), r.job_type.clone()))
                .collect()
        });
        let submitted = Utc::now();
        let created = self
            .write_then_wake(self.store.create_batch(req), |_| true)
            .instrument(span)
            .await?;
        if let Some(named) = named {
            for (id, (queue, job_type)) in created.job_ids.iter().zip(named) {
                let mut event = EngineEvent::new(EventKind::Enqueued, "enqueued in a batch");
                event.at = submitted;
                self.events.send(event.job(*id, &queue, &job_type));
            }
        }
        Ok(created)
    }
}

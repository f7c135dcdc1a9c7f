//! The demo's batches: a month-end invoice run of a dozen charges, whose callbacks (a
//! summary on completion, a notice on success, an alert on a death) run once each. Every
//! other run has one charge that keeps failing until it dies, so the batch page shows a
//! death, the callbacks it fires, and a dead member to resurrect (which reopens the batch).

use deck_engine::{BatchCallback, BatchCallbacks, BatchRequest, Engine, EnqueueRequest};
use serde_json::json;

use super::workload::Tagged;

const MEMBERS: u64 = 12;
/// Where the callbacks run; `demo.echo` hands back what the engine put in their payload.
const CALLBACK_QUEUE: &str = "billing";

/// One invoice run; `with_a_death`: its last charge fails on every attempt (two allowed).
pub fn invoice_run(run: u64, with_a_death: bool) -> BatchRequest {
    let jobs = (1..=MEMBERS)
        .map(|n| {
            let doomed = with_a_death && n == MEMBERS;
            let mut job = EnqueueRequest::new(
                "billing",
                "billing.charge",
                json!({
                    "invoice": format!("INV-M{run}-{n:02}"),
                    "amount_cents": 1_000 * n,
                    // One flaky charge retries once; the doomed one never gets through.
                    "flaky_attempts": if doomed { 99 } else { u32::from(n == 3) },
                })
                .to_string(),
            )
            .tagged(&["month-end"]);
            if doomed {
                job.max_attempts = Some(2);
            }
            job
        })
        .collect();
    let callback = |what: &str| {
        BatchCallback::new(CALLBACK_QUEUE, "demo.echo")
            .with_payload(json!({ "notify": what }).to_string())
    };
    BatchRequest {
        description: Some(format!("Month-end invoices, run {run}")),
        created_by: Some("demo".into()),
        jobs,
        callbacks: BatchCallbacks {
            on_success: Some(callback("finance: every invoice charged")),
            on_complete: Some(callback("finance: month-end summary")),
            on_death: Some(callback("on-call: a charge failed for good")),
        },
    }
}

/// Enqueue invoice run `run`. Odd runs (the first one too, so a new user sees a death and the
/// callbacks it fires within a minute) have a charge that dies.
pub async fn start(engine: &Engine, run: u64) {
    match engine
        .create_batch(invoice_run(run, !run.is_multiple_of(2)))
        .await
    {
        Ok(created) => tracing::info!(
            event = "demo.batch_created",
            batch = %created.batch.id,
            members = created.job_ids.len(),
            "demo: invoice batch enqueued"
        ),
        Err(e) => {
            tracing::warn!(event = "demo.batch_failed", error = %e, "demo: batch enqueue failed")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invoice_runs_are_valid_batches_and_every_other_has_a_doomed_charge() {
        for (run, death) in [(1, false), (2, true)] {
            let req = invoice_run(run, death);
            deck_engine::batch::validate_batch_request(&req).expect("valid");
            let doomed = req
                .jobs
                .iter()
                .filter(|j| j.max_attempts == Some(2))
                .count();
            assert_eq!(doomed, usize::from(death));
        }
    }
}

//! The demo producer: configures the demo queues, seeds a first batch, then enqueues a
//! random mix every second until shutdown. Rates are chosen so ten workers keep up and every
//! state (pending, scheduled, processing, succeeded, retried, each common DLQ reason) shows
//! within a minute.

use std::time::Duration;

use chrono::Utc;
use deck_engine::{Engine, EnqueueRequest, QueuePatch, RateLimit, UniqueState};
use rand::Rng;
use rand::seq::IndexedRandom;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TICK: Duration = Duration::from_secs(1);
/// A new invoice batch this often (in ticks).
const BATCH_EVERY_TICKS: u64 = 90;
const TENANTS: &[&str] = &["acme", "globex", "initech", "umbrella"];

pub async fn run(engine: Engine, shutdown: CancellationToken) {
    configure_queues(&engine).await;
    let mut seq: u64 = rand::rng().random_range(1_000..9_000);
    let mut batch = seed(&mut seq);
    let mut ticker = tokio::time::interval(TICK);
    let mut ticks: u64 = 0;
    loop {
        if ticks.is_multiple_of(BATCH_EVERY_TICKS) {
            super::batches::start(&engine, ticks / BATCH_EVERY_TICKS + 1).await;
        }
        ticks += 1;
        if !batch.is_empty() {
            let n = batch.len();
            if let Err(e) = engine.enqueue_batch(std::mem::take(&mut batch)).await {
                tracing::warn!(event = "demo.enqueue_failed", error = %e, jobs = n, "demo: enqueue failed");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = ticker.tick() => {}
        }
        batch = tick(&mut seq);
    }
    tracing::info!(event = "demo.stopped", "demo workload stopped");
}

async fn configure_queues(engine: &Engine) {
    let patches = [
        (
            "emails",
            QueuePatch {
                lag_warn_secs: Some(Some(5)),
                lag_crit_secs: Some(Some(30)),
                ..Default::default()
            },
        ),
        (
            // A bulkhead: reports are heavy, at most three run at once across all instances.
            "reports",
            QueuePatch {
                max_workers: Some(Some(3)),
                ..Default::default()
            },
        ),
        (
            // Transcodes longer than 3 s time out (and are retried, then dead-lettered).
            "media",
            QueuePatch {
                execution_timeout_secs: Some(Some(3)),
                max_workers: Some(Some(2)),
                ..Default::default()
            },
        ),
        ("billing", QueuePatch::default()),
        (
            // A rate limit: the mail provider allows 10 newsletter sends per 10 s, so a burst
            // of 12 leaves 2 waiting ("rate limited until …" on the queues page).
            "newsletter",
            QueuePatch {
                rate_limit: Some(Some(RateLimit {
                    starts: NEWSLETTER_STARTS,
                    per_secs: 10,
                })),
                ..Default::default()
            },
        ),
    ];
    for (queue, patch) in patches {
        if let Err(e) = engine.update_queue(queue, patch).await {
            tracing::warn!(event = "demo.queue_setup_failed", queue, error = %e, "demo: cannot configure queue {queue}");
        }
    }
}

/// A first batch with one of everything, so the console is not empty for the first minute.
fn seed(seq: &mut u64) -> Vec<EnqueueRequest> {
    let mut out = Vec::new();
    for _ in 0..5 {
        out.push(email(seq, false));
    }
    out.push(email(seq, true));
    out.push(charge(seq, 2));
    out.push(charge(seq, 0));
    out.push(sync(seq, 1));
    out.push(report(seq, 4, false));
    out.push(transcode(seq, 6));
    out.push(scheduled_digest(seq));
    out.push(expiring(seq));
    out.push(echo(seq));
    out.extend(newsletter_burst(seq));
    out
}

/// Newsletter sends the `newsletter` queue's rate limit lets through per 10 s.
const NEWSLETTER_STARTS: u32 = 10;

/// A burst a little larger than one period's starts.
fn newsletter_burst(seq: &mut u64) -> Vec<EnqueueRequest> {
    (0..NEWSLETTER_STARTS + 2)
        .map(|_| {
            let mut req = email(seq, false);
            req.queue = "newsletter".into();
            req.tags.push("campaign:december".into());
            req
        })
        .collect()
}

fn tick(seq: &mut u64) -> Vec<EnqueueRequest> {
    let mut rng = rand::rng();
    let mut out = Vec::new();
    for _ in 0..rng.random_range(2..=5) {
        out.push(email(seq, rng.random_bool(1.0 / 15.0)));
    }
    // Failure rates stay low enough that the per-type circuit breakers (5 failures a
    // minute) open only now and then, as they would in a healthy system with a bad minute.
    if rng.random_bool(0.5) {
        let flaky = match rng.random_range(0..100) {
            0..3 => 5, // never succeeds within 3 attempts → DLQ Failed
            3..11 => rng.random_range(1..=2),
            _ => 0,
        };
        out.push(charge(seq, flaky));
    }
    if rng.random_bool(0.06) {
        out.push(sync(seq, if rng.random_bool(0.1) { 5 } else { 1 }));
    }
    if rng.random_bool(0.25) {
        out.push(report(
            seq,
            rng.random_range(3..=8),
            rng.random_bool(1.0 / 40.0),
        ));
    }
    if rng.random_bool(0.06) {
        out.push(transcode(seq, if rng.random_bool(0.75) { 2 } else { 6 }));
    }
    if rng.random_bool(0.2) {
        out.push(scheduled_digest(seq));
    }
    if rng.random_bool(0.05) {
        out.push(expiring(seq));
    }
    if rng.random_bool(1.0 / 30.0) {
        // No handler is registered for this type: dead-lettered as fatal with a clear reason.
        out.push(
            EnqueueRequest::new("emails", "sms.send", json!({"to": "+15550100"}).to_string())
                .tagged(&["channel:sms"]),
        );
    }
    if rng.random_bool(0.1) {
        out.push(echo(seq));
    }
    // About 0.8 sends a second on average: under the limit, but every burst hits it.
    if rng.random_bool(1.0 / 15.0) {
        out.extend(newsletter_burst(seq));
    }
    if rng.random_bool(0.3) {
        let answer = match rng.random_range(0..100) {
            0..4 => "gone",
            4..20 => "busy",
            _ => "ok",
        };
        out.push(webhook(seq, answer));
    }
    out
}

/// Delivered by deck's HTTP handler to the demo's own endpoint (`demo::webhook`).
fn webhook(seq: &mut u64, answer: &str) -> EnqueueRequest {
    let n = next(seq);
    EnqueueRequest::new(
        "webhooks",
        super::webhook::JOB_TYPE,
        json!({ "subscriber": format!("https://hooks.example.com/{n}"), "answer": answer, "busy_attempts": 1 })
            .to_string(),
    )
    .tagged(&["http"])
}

fn next(seq: &mut u64) -> u64 {
    *seq += 1;
    *seq
}

fn tenant() -> &'static str {
    TENANTS.choose(&mut rand::rng()).copied().unwrap_or("acme")
}

fn email(seq: &mut u64, poison: bool) -> EnqueueRequest {
    let n = next(seq);
    let tenant = tenant();
    let reset = rand::rng().random_bool(0.15);
    let to = if poison {
        format!("bounce+{n}@{tenant}.example")
    } else {
        format!("user{n}@{tenant}.example")
    };
    let template = if reset { "password-reset" } else { "welcome" };
    let mut req = EnqueueRequest::new(
        "emails",
        "email.send",
        json!({ "to": to, "template": template }).to_string(),
    )
    .tagged(&[&format!("tenant:{tenant}"), &format!("template:{template}")]);
    req.correlation_id = Some(format!("signup-{n}"));
    req.priority = if reset { 10 } else { 0 };
    req
}

fn charge(seq: &mut u64, flaky_attempts: u32) -> EnqueueRequest {
    let n = next(seq);
    let tenant = tenant();
    let mut req = EnqueueRequest::new(
        "billing",
        "billing.charge",
        json!({
            "invoice": format!("INV-{n}"),
            "amount_cents": rand::rng().random_range(500..50_000),
            "flaky_attempts": flaky_attempts,
        })
        .to_string(),
    )
    .tagged(&[&format!("tenant:{tenant}")]);
    // Enqueueing the same invoice again within a day returns the first job, also once it has
    // been charged (a charge must not run twice).
    req.idempotency_key = Some(format!("invoice-{n}"));
    req.unique_for_ms = Some(86_400_000);
    req.unique_states = vec![UniqueState::Succeeded];
    req.correlation_id = Some(format!("order-{n}"));
    req
}

fn sync(seq: &mut u64, throttled_attempts: u32) -> EnqueueRequest {
    let n = next(seq);
    EnqueueRequest::new(
        "billing",
        "billing.sync",
        json!({ "account": format!("ACC-{n}"), "throttled_attempts": throttled_attempts })
            .to_string(),
    )
    .tagged(&["ledger"])
}

fn report(seq: &mut u64, seconds: u64, broken: bool) -> EnqueueRequest {
    let n = next(seq);
    let name = ["monthly-revenue", "churn", "inventory", "payroll"]
        .choose(&mut rand::rng())
        .copied()
        .unwrap_or("churn");
    EnqueueRequest::new(
        "reports",
        "report.generate",
        json!({ "name": format!("{name}-{n}"), "seconds": seconds, "broken": broken }).to_string(),
    )
    .tagged(&[&format!("tenant:{}", tenant()), "kind:report"])
}

fn transcode(seq: &mut u64, seconds: u64) -> EnqueueRequest {
    let n = next(seq);
    EnqueueRequest::new(
        "media",
        "media.transcode",
        json!({ "video": format!("upload-{n}.mov"), "seconds": seconds }).to_string(),
    )
}

fn scheduled_digest(seq: &mut u64) -> EnqueueRequest {
    let mut req = email(seq, false);
    req.delay_ms = Some(rand::rng().random_range(30_000..120_000));
    req.tags.push("digest".into());
    req
}

/// Due in 20 s but expiring in 10 s: the rescue sweep dead-letters it as `Expired`.
fn expiring(seq: &mut u64) -> EnqueueRequest {
    let mut req = report(seq, 2, false);
    req.delay_ms = Some(20_000);
    req.expires_at = Some(Utc::now() + chrono::Duration::seconds(10));
    req.tags.push("expiring".into());
    req
}

fn echo(seq: &mut u64) -> EnqueueRequest {
    let n = next(seq);
    EnqueueRequest::new(
        "default",
        "demo.echo",
        json!({ "hello": "world", "n": n }).to_string(),
    )
}

pub(super) trait Tagged {
    fn tagged(self, tags: &[&str]) -> Self;
}

impl Tagged for EnqueueRequest {
    fn tagged(mut self, tags: &[&str]) -> Self {
        self.tags = tags.iter().map(|t| t.to_string()).collect();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deck_engine::validation::validate_enqueue;

    #[test]
    fn every_demo_request_passes_validation() {
        let mut seq = 1;
        let mut all = seed(&mut seq);
        for _ in 0..200 {
            all.extend(tick(&mut seq));
        }
        for req in &all {
            validate_enqueue(req).unwrap();
        }
        let queues: std::collections::BTreeSet<_> = all.iter().map(|r| r.queue.as_str()).collect();
        assert!(queues.len() >= 3, "{queues:?}");
    }
}

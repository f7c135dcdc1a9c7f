//! Demo handlers. Each shows one behaviour of the engine: quick successes, slow jobs with
//! progress, transient failures that succeed on a later attempt, poison payloads (fatal),
//! throttling with retry-after, timeouts, panics, and `demo.echo` for enqueue-and-wait.

use std::time::Duration;

use deck_engine::{HandlerError, HandlerRegistry, JobContext};
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Deserialize)]
pub struct Email {
    pub to: String,
    #[serde(default)]
    pub template: String,
}

#[derive(Debug, Deserialize)]
pub struct Report {
    pub name: String,
    /// How long the report takes to build.
    pub seconds: u64,
    /// A broken template makes the handler panic (caught by the engine as fatal).
    #[serde(default)]
    pub broken: bool,
}

#[derive(Debug, Deserialize)]
pub struct Charge {
    pub invoice: String,
    pub amount_cents: u64,
    /// Attempts that fail with a transient error before one succeeds.
    #[serde(default)]
    pub flaky_attempts: u32,
}

#[derive(Debug, Deserialize)]
pub struct Sync {
    pub account: String,
    /// Attempts answered with "slow down" before one succeeds.
    #[serde(default)]
    pub throttled_attempts: u32,
}

#[derive(Debug, Deserialize)]
pub struct Transcode {
    pub video: String,
    pub seconds: u64,
}

#[derive(Debug, Serialize)]
struct Sent {
    message_id: String,
}

pub fn register(handlers: &mut HandlerRegistry) {
    handlers
        .register("demo.echo", |_ctx: JobContext, payload: Value| async move {
            Ok(payload)
        })
        .register("email.send", send_email)
        .register("report.generate", generate_report)
        .register("billing.charge", charge)
        .register("billing.sync", sync_account)
        .register("media.transcode", transcode);
}

async fn send_email(ctx: JobContext, email: Email) -> Result<Sent, HandlerError> {
    if !email.to.contains('@') || email.to.starts_with("bounce") {
        return Err(HandlerError::fatal(format!(
            "mailbox {:?} does not exist (550 5.1.1); fix the address and resurrect the job",
            email.to
        )));
    }
    let ms = rand::rng().random_range(20..200);
    sleep_or_cancel(&ctx, Duration::from_millis(ms)).await?;
    Ok(Sent {
        message_id: format!("<{}.{}@demo.deck>", ctx.id(), email.template),
    })
}

async fn generate_report(ctx: JobContext, report: Report) -> Result<Value, HandlerError> {
    if report.broken {
        panic!(
            "template for report {:?} references a missing column",
            report.name
        );
    }
    let steps = 10u64;
    let step = Duration::from_millis(report.seconds * 1000 / steps);
    for i in 1..=steps {
        sleep_or_cancel(&ctx, step).await?;
        ctx.report_progress((i * 100 / steps) as u8, format!("page {i} of {steps}"));
    }
    Ok(
        json!({ "report": report.name, "pages": steps, "url": format!("/reports/{}.pdf", ctx.id()) }),
    )
}

async fn charge(ctx: JobContext, charge: Charge) -> Result<Value, HandlerError> {
    sleep_or_cancel(&ctx, Duration::from_millis(80)).await?;
    if ctx.attempt() <= charge.flaky_attempts {
        return Err(HandlerError::transient(format!(
            "payment gateway timed out after 30s (attempt {})",
            ctx.attempt()
        )));
    }
    Ok(json!({ "invoice": charge.invoice, "charged_cents": charge.amount_cents }))
}

async fn sync_account(ctx: JobContext, sync: Sync) -> Result<Value, HandlerError> {
    if ctx.attempt() <= sync.throttled_attempts {
        return Err(HandlerError::throttled(
            Duration::from_secs(4),
            "ledger API answered 429 Too Many Requests",
        ));
    }
    sleep_or_cancel(&ctx, Duration::from_millis(150)).await?;
    Ok(json!({ "account": sync.account, "entries": rand::rng().random_range(1..500) }))
}

/// Runs longer than the `media` queue's execution timeout when `seconds` says so.
async fn transcode(ctx: JobContext, t: Transcode) -> Result<Value, HandlerError> {
    let steps = t.seconds.max(1);
    for i in 1..=steps {
        sleep_or_cancel(&ctx, Duration::from_secs(1)).await?;
        ctx.report_progress((i * 100 / steps) as u8, format!("{} s of {}", i, steps));
    }
    Ok(json!({ "video": t.video, "renditions": ["720p", "1080p"] }))
}

/// Sleep, or stop early when the engine cancels the job (timeout, operator, shutdown).
async fn sleep_or_cancel(ctx: &JobContext, d: Duration) -> Result<(), HandlerError> {
    let cancel = ctx.cancellation();
    tokio::select! {
        _ = tokio::time::sleep(d) => Ok(()),
        _ = cancel.cancelled() => Err(HandlerError::transient("cancelled while working")),
    }
}

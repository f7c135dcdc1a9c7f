//! One endpoint: its pooled client, its secret, and how a job becomes a request. Its
//! in-flight limit (`concurrency`) is the engine's: `register` declares it as the capacity of
//! the endpoint's downstream, so no job of it starts without a place.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use deck_engine::config::MAX_RESULT_BYTES;
use deck_engine::{HandlerError, HandlerOutcome, JobContext, trace};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::config::HttpHandlerConfig;
use crate::outcome;
use crate::progress::ProgressTokens;
use crate::signature::{self, SIGNATURE_HEADER, TIMESTAMP_HEADER};

/// The job id, also the request's idempotency key (a receiver may see a job twice:
/// delivery is at least once).
pub const JOB_ID_HEADER: &str = "Deck-Job-Id";
/// This attempt's number, 1-based.
pub const ATTEMPT_HEADER: &str = "Deck-Attempt";

/// What is POSTed for each job (`Content-Type: application/json`).
#[derive(Debug, Serialize)]
pub struct Envelope<'a> {
    pub id: String,
    pub queue: &'a str,
    #[serde(rename = "type")]
    pub job_type: &'a str,
    /// This attempt's number, 1-based; `attempt == max_attempts` is the last try.
    pub attempt: u32,
    pub max_attempts: u32,
    /// The job's payload as enqueued (any JSON value).
    pub payload: &'a RawValue,
    pub tags: &'a [String],
    pub correlation_id: Option<&'a str>,
    /// When this attempt's execution timeout fires: answer before it.
    pub deadline: DateTime<Utc>,
    /// Where to report progress while the request is in flight (when deck knows its own
    /// address): `POST {url}` with `Deck-Progress-Token: {token}` and
    /// `{"percent": 0-100, "message": "…"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressLink>,
}

/// A progress callback for one attempt.
#[derive(Debug, Serialize)]
pub struct ProgressLink {
    pub url: String,
    pub token: String,
}

/// Where progress calls go: this deck's API, as receivers reach it.
#[derive(Clone)]
pub struct ProgressCallback {
    pub tokens: ProgressTokens,
    /// `http://deck.internal:8080`, without a trailing slash.
    pub base_url: String,
}

pub(crate) struct Endpoint {
    url: String,
    client: reqwest::Client,
    timeout: Duration,
    secret: Option<Vec<u8>>,
    progress: Option<ProgressCallback>,
}

impl Endpoint {
    pub(crate) fn new(
        config: &HttpHandlerConfig,
        client: reqwest::Client,
        secret: Option<Vec<u8>>,
        progress: Option<ProgressCallback>,
    ) -> Arc<Endpoint> {
        Arc::new(Endpoint {
            url: config.url.clone(),
            client,
            timeout: config.timeout,
            secret,
            progress,
        })
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// POST the job and read the answer. Dropped (cancel, execution timeout, shutdown), the
    /// request is aborted with it.
    pub(crate) async fn run(&self, ctx: JobContext) -> HandlerOutcome {
        let lease = self.progress.as_ref().map(|p| {
            let lease = p.tokens.issue(&ctx);
            let link = ProgressLink {
                url: format!("{}/api/v1/jobs/{}/progress", p.base_url, ctx.id()),
                token: lease.token.clone(),
            };
            (lease, link)
        });
        let (_lease, link) = match lease {
            Some((lease, link)) => (Some(lease), Some(link)),
            None => (None, None),
        };
        let body = envelope(&ctx, link)?;
        let timestamp = Utc::now().timestamp();
        let mut request = self
            .client
            .post(&self.url)
            .timeout(self.timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(JOB_ID_HEADER, ctx.id().to_string())
            .header("Idempotency-Key", ctx.id().to_string())
            .header(ATTEMPT_HEADER, ctx.attempt().to_string())
            .header(TIMESTAMP_HEADER, timestamp.to_string());
        // The attempt's span is the caller: the endpoint's own spans join the job's trace.
        if let Some((traceparent, tracestate)) = trace::headers_of(&tracing::Span::current()) {
            request = request.header("traceparent", traceparent);
            if let Some(tracestate) = tracestate {
                request = request.header("tracestate", tracestate);
            }
        }
        if let Some(secret) = &self.secret {
            request = request.header(
                SIGNATURE_HEADER,
                signature::sign(secret, timestamp, body.as_bytes()),
            );
        }
        let response = request
            .body(body)
            .send()
            .await
            .map_err(|e| outcome::of_failure(&self.url, self.timeout, &e))?;
        let status = response.status();
        let headers = response.headers().clone();
        let limit = if status.is_success() {
            MAX_RESULT_BYTES + 1
        } else {
            outcome::ERROR_BODY_BYTES + 1
        };
        let body = read_bounded(response, limit)
            .await
            .map_err(|e| outcome::of_failure(&self.url, self.timeout, &e))?;
        outcome::of_answer(&self.url, status, &headers, &body, Utc::now())
    }
}

fn envelope(ctx: &JobContext, progress: Option<ProgressLink>) -> Result<String, HandlerError> {
    let job = ctx.job();
    let payload: &RawValue = serde_json::from_str(ctx.payload()).map_err(|e| {
        HandlerError::fatal(format!(
            "the payload is not JSON ({e}); fix it and resurrect the job"
        ))
    })?;
    let envelope = Envelope {
        id: job.id.to_string(),
        queue: &job.queue,
        job_type: &job.job_type,
        attempt: ctx.attempt(),
        max_attempts: ctx.max_attempts(),
        payload,
        tags: &job.tags,
        correlation_id: job.correlation_id.as_deref(),
        deadline: ctx.deadline(),
        progress,
    };
    serde_json::to_string(&envelope)
        .map_err(|e| HandlerError::fatal(format!("the job cannot be sent as JSON: {e}")))
}

/// The body up to `limit` bytes (the rest is not read: an endpoint cannot make deck hold
/// more than that).
async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= limit {
            break;
        }
    }
    Ok(body)
}

//! What a job's run comes to: run its handler (until it returns, panics or its token fires)
//! and turn the outcome into the `Completion` to commit — success, a retry by the policy, or
//! the dead-letter queue with the reason — and the signal for its type's circuit breaker.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::FutureExt;
use tracing::Instrument;

use crate::handler::{HandlerError, HandlerOutcome, HandlerRegistry, JobContext};
use crate::model::{AttemptError, Completion, FailureReason, Job, Timestamp, owner_instance};
use crate::running::{CancelReason, RunningJob};
use crate::runtime::circuit_breaker::Signal;
use crate::runtime::millis;
use crate::runtime::panics::{self, PanicSite};
use crate::runtime::policies::Policies;
use crate::runtime::retry::{AttemptFailure, RetryDecision, RetryPolicy};
use crate::trace;

/// A handler finished (or was stopped); the completer commits `completion`.
pub(crate) struct Finished {
    pub(crate) run: Arc<RunningJob>,
    /// `None`: the job was taken from us (heartbeat said `lost`), nothing to commit.
    pub(crate) completion: Option<Completion>,
    /// What the outcome says about the job type's downstream, for its circuit breaker.
    pub(crate) signal: Signal,
}

/// What running a job's handler needs: the handlers, and what decides the outcome (the
/// retry policy in force, the result size limit).
pub(crate) struct Executor {
    pub(crate) handlers: Arc<HandlerRegistry>,
    pub(crate) instance_id: String,
    pub(crate) result_max_bytes: usize,
    pub(crate) policies: Arc<Policies>,
}

impl Executor {
    /// Run one job's handler until it returns, panics or its token fires.
    pub(crate) async fn execute(&self, run: Arc<RunningJob>) -> Finished {
        let ctx = JobContext::new(run.clone());
        let handlers = &self.handlers;
        // The handler runs inside the attempt's span: its own spans and outgoing calls join it.
        let span = trace::run_span(&run.job, &self.instance_id);
        // The handler is created inside the guarded future, so a panic while building it is
        // caught too.
        let handler = AssertUnwindSafe(async move { handlers.dispatch(ctx).await })
            .catch_unwind()
            .instrument(span.clone());
        let mut outcome = tokio::select! {
            biased;
            r = handler => Some(r),
            _ = run.token.cancelled() => None,
        };
        // A handler that fails because it noticed its token was cancelled: the cancel's
        // reason (operator, timeout, shutdown) decides what happens, not the handler's error.
        // Work that succeeded anyway stands.
        if !matches!(outcome, Some(Ok(Ok(_)))) && run.token.is_cancelled() {
            outcome = None;
        }
        // Taken here, on the thread that caught the unwind, before any await.
        let site = match &outcome {
            Some(Err(panic)) => panics::take_site(payload_text(&**panic)),
            _ => None,
        };
        let (completion, signal) = self.conclude(&run, outcome, site);
        if !span.is_disabled() {
            record_outcome(&span, completion.as_ref());
        }
        Finished {
            run,
            completion,
            signal,
        }
    }
}

/// How the attempt ended, on its span.
fn record_outcome(span: &tracing::Span, completion: Option<&Completion>) {
    match completion {
        Some(Completion::Succeeded { .. }) => trace::ran(span, "succeeded", None),
        Some(Completion::Retry { error, .. }) => trace::ran(span, "retry", Some(&error.message)),
        Some(Completion::DeadLetter { error, .. }) => {
            trace::ran(span, "dead", Some(&error.message))
        }
        Some(Completion::Released { .. }) => trace::ran(span, "released", None),
        None => trace::ran(span, "lost", Some("the job was taken from this worker")),
    }
}

type Caught = Result<HandlerOutcome, Box<dyn Any + Send>>;

impl Executor {
    fn conclude(
        &self,
        run: &RunningJob,
        outcome: Option<Caught>,
        site: Option<PanicSite>,
    ) -> (Option<Completion>, Signal) {
        let retry = self.policies.retry();
        let job = &run.job;
        let duration_ms = millis(run.started.elapsed());
        match outcome {
            Some(Ok(Ok(result))) => {
                if let Some(text) = &result
                    && text.len() > self.result_max_bytes
                {
                    let message = format!(
                        "the handler's result is {} bytes, over the limit of {} bytes \
                     (result_max_bytes); return less, or store the data elsewhere and \
                     return a reference to it",
                        text.len(),
                        self.result_max_bytes
                    );
                    let c = dead(
                        job,
                        FailureReason::Fatal,
                        "result_too_large",
                        message,
                        duration_ms,
                    );
                    return (Some(c), Signal::Neutral);
                }
                let c = Completion::Succeeded {
                    id: job.id,
                    result,
                    duration_ms,
                };
                (Some(c), Signal::Success)
            }
            Some(Ok(Err(e))) => {
                let (failure, signal) = match &e {
                    HandlerError::Transient(_) => (AttemptFailure::Transient, Signal::Failure),
                    HandlerError::Fatal(_) => (AttemptFailure::Fatal, Signal::Neutral),
                    HandlerError::Throttled { retry_after, .. } => (
                        AttemptFailure::Throttled {
                            retry_after: *retry_after,
                        },
                        Signal::Failure,
                    ),
                };
                let c = after_failure(&retry, job, failure, e.kind(), e.to_string(), duration_ms);
                (Some(c), signal)
            }
            Some(Err(panic)) => {
                let text =
                    payload_text(&*panic).unwrap_or("(a panic payload that is not a string)");
                let (location, backtrace) =
                    site.map_or((None, None), |s| (s.location, s.backtrace));
                let message = match &location {
                    Some(at) => format!("the handler panicked at {at}: {text}"),
                    None => format!("the handler panicked: {text}"),
                };
                let mut c = after_failure(
                    &retry,
                    job,
                    AttemptFailure::Fatal,
                    "panic",
                    message,
                    duration_ms,
                );
                if let Completion::Retry { error, .. } | Completion::DeadLetter { error, .. } =
                    &mut c
                {
                    error.location = location;
                    error.backtrace = backtrace;
                }
                (Some(c), Signal::Neutral)
            }
            None => match run.cancel_reason() {
                CancelReason::Operator => {
                    let c = dead(
                        job,
                        FailureReason::Cancelled,
                        "cancelled",
                        "cancelled by an operator while running".to_string(),
                        duration_ms,
                    );
                    (Some(c), Signal::Neutral)
                }
                CancelReason::Timeout => {
                    let limit = run.deadline.saturating_duration_since(run.started);
                    let message = format!("execution timeout of {} exceeded", humanize(limit));
                    let c = after_failure(
                        &retry,
                        job,
                        AttemptFailure::Timeout,
                        "timeout",
                        message,
                        duration_ms,
                    );
                    (Some(c), Signal::Failure)
                }
                CancelReason::HeartbeatFailure => {
                    let c = dead(
                        job,
                        FailureReason::HeartbeatFailure,
                        "heartbeat",
                        "this worker could not write heartbeats for too long and stopped the job"
                            .to_string(),
                        duration_ms,
                    );
                    (Some(c), Signal::Neutral)
                }
                CancelReason::Lost => (None, Signal::Neutral),
                CancelReason::Shutdown | CancelReason::None => {
                    let c = after_failure(
                        &retry,
                        job,
                        AttemptFailure::Transient,
                        "shutdown",
                        "interrupted: the worker shut down and the grace period ran out"
                            .to_string(),
                        duration_ms,
                    );
                    (Some(c), Signal::Neutral)
                }
            },
        }
    }
}

/// The completion a failed attempt of `job` comes to under `retry`.
pub(crate) fn after_failure(
    retry: &RetryPolicy,
    job: &Job,
    failure: AttemptFailure,
    kind: &str,
    message: String,
    duration_ms: u64,
) -> Completion {
    let now = Utc::now();
    let error = attempt_error(job, now, kind, message, duration_ms);
    match retry.decide(job, failure, now, &mut rand::rng()) {
        RetryDecision::RetryAt(retry_at) => Completion::Retry {
            id: job.id,
            error: AttemptError {
                retry_at: Some(retry_at),
                ..error
            },
            retry_at,
        },
        RetryDecision::Dead(reason) => Completion::DeadLetter {
            id: job.id,
            reason,
            error,
            duration_ms,
        },
    }
}

pub(crate) fn dead(
    job: &Job,
    reason: FailureReason,
    kind: &str,
    message: String,
    duration_ms: u64,
) -> Completion {
    Completion::DeadLetter {
        id: job.id,
        reason,
        error: attempt_error(job, Utc::now(), kind, message, duration_ms),
        duration_ms,
    }
}

/// The record of `job`'s current attempt, ended at `at`: its error and its run (start,
/// duration, the instance that ran it) for the attempt history (`crate::attempts`).
fn attempt_error(
    job: &Job,
    at: Timestamp,
    kind: &str,
    message: String,
    duration_ms: u64,
) -> AttemptError {
    AttemptError {
        attempt: job.attempt,
        at,
        kind: kind.to_string(),
        message,
        started_at: job.started_at,
        duration_ms: Some(duration_ms),
        instance: job
            .worker_id
            .as_deref()
            .map(|w| owner_instance(w).to_string()),
        ..AttemptError::default()
    }
}

/// A panic payload's text (`panic!` gives a `&str` or a `String`).
fn payload_text(panic: &(dyn Any + Send)) -> Option<&str> {
    if let Some(s) = panic.downcast_ref::<&str>() {
        Some(s)
    } else {
        panic.downcast_ref::<String>().map(String::as_str)
    }
}

pub(crate) fn humanize(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        format!("{} min", secs / 60)
    } else if secs > 0 {
        format!("{secs} s")
    } else {
        format!("{} ms", d.as_millis())
    }
}

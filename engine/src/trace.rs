//! Traces that follow a job: the W3C trace context of the span that enqueued a job is
//! stored with it, and the spans of its claim, run and finish link back to it.
//!
//! # The stored text (`Job::trace_context`, `EnqueueRequest::trace_context`)
//!
//! A W3C `traceparent` header value, optionally followed by `;` and the `tracestate` header
//! value:
//!
//! ```text
//! 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
//! 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;vendor=abc,other=x;y
//! ```
//!
//! The first `;` ends the `traceparent` (which never contains one; a `tracestate` value
//! may). The engine writes version `00`, lowercase hex and at most [`MAX_TRACESTATE_CHARS`]
//! of `tracestate` (entries are dropped from the end to fit, as the W3C text allows), so the
//! text is at most [`MAX_CONTEXT_CHARS`] long. Text given by a producer is checked by
//! [`validate`].
//!
//! # Spans
//!
//! All spans have the target [`TARGET`] and level INFO and carry the OpenTelemetry
//! messaging attributes (`messaging.system = "deck"`, `messaging.operation.type`,
//! `messaging.operation.name`, `messaging.destination.name` = the queue,
//! `messaging.message.id` = the job id):
//!
//! | span | where | kind | operation | parent, links |
//! |---|---|---|---|---|
//! | `enqueue {queue}` | `Operations::enqueue`, `enqueue_batch` | producer | `send` | the current span; its context is stored with the job |
//! | `claim` | the fetcher, one per claim that returned jobs | client | `receive` | none; links to the claimed jobs' stored contexts |
//! | `run {queue}` | the worker, one per attempt, around the handler | consumer | `process` | none; links to the job's stored context |
//! | `complete` | the completer, one per group commit | client | `settle` | none; links to the committed jobs' stored contexts |
//!
//! The run span is a new trace that links to the enqueuing span rather than a child of it:
//! a job may run hours after the request that enqueued it ended, and the OpenTelemetry
//! messaging conventions recommend links for exactly that. Handlers run inside the run
//! span, so their own spans are its children and an outgoing call can carry its
//! `traceparent` ([`headers_of`]).
//!
//! Nothing here needs an OpenTelemetry layer: without one no context is stored and the
//! spans are plain `tracing` spans (disabled, and nearly free, when no subscriber wants the
//! target). A log formatter that should not print them filters out [`TARGET`].

use std::fmt::Write as _;
use std::str::FromStr;

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing::field::{Empty, display};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::error::ValidationError;
use crate::model::{EnqueueRequest, Job, JobId};

/// The target of every span made here: filter on it to send them to an exporter only.
pub const TARGET: &str = "deck_engine::trace";
/// `messaging.system` on every span.
pub const SYSTEM: &str = "deck";
/// Length of a version-00 `traceparent`.
pub const TRACEPARENT_CHARS: usize = 55;
/// Most `tracestate` kept with a job (the W3C minimum a vendor must propagate).
pub const MAX_TRACESTATE_CHARS: usize = 512;
/// Longest stored trace context: a `traceparent`, `;`, a `tracestate`.
pub const MAX_CONTEXT_CHARS: usize = TRACEPARENT_CHARS + 1 + MAX_TRACESTATE_CHARS;
/// Most links one batch span (claim, complete) gets: the SDK's default link limit, so no
/// context is parsed only to be dropped.
const MAX_LINKS: usize = 128;

/// The stored text of a span context (see the module docs).
pub fn format_context(sc: &SpanContext) -> String {
    let state = tracestate_within_limit(sc.trace_state());
    let mut text =
        String::with_capacity(TRACEPARENT_CHARS + state.as_ref().map_or(0, |s| s.len() + 1));
    // Writing to a String cannot fail.
    let _ = write!(
        text,
        "00-{:032x}-{:016x}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags() & TraceFlags::SAMPLED
    );
    if let Some(state) = state {
        text.push(';');
        text.push_str(&state);
    }
    text
}

/// `tracestate` as a header value, `None` when empty; entries dropped from the end until it
/// fits [`MAX_TRACESTATE_CHARS`].
fn tracestate_within_limit(state: &TraceState) -> Option<String> {
    let mut header = state.header();
    while header.len() > MAX_TRACESTATE_CHARS {
        match header.rfind(',') {
            Some(cut) => header.truncate(cut),
            None => header.clear(),
        }
    }
    (!header.is_empty()).then_some(header)
}

/// The span context stored as `text`, as a remote context to link to; `None` when the text
/// is not a valid trace context (see [`validate`]).
pub fn parse(text: &str) -> Option<SpanContext> {
    let (parent, state) = match text.split_once(';') {
        Some((parent, state)) => (parent, Some(state)),
        None => (text, None),
    };
    from_headers(parent, state)
}

/// The span context of W3C `traceparent` and `tracestate` header values (a remote parent for
/// a request's span). Follows the W3C rules: lowercase hex, version `ff` refused, a later
/// version read by its version-00 prefix, all-zero ids refused. A `tracestate` that does not
/// parse is ignored, as the W3C text says.
pub fn from_headers(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let (trace_id, span_id, flags) = parse_traceparent(traceparent.trim_matches([' ', '\t']))?;
    let state = tracestate
        .filter(|s| !s.is_empty())
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or(TraceState::NONE);
    let sc = SpanContext::new(trace_id, span_id, flags, true, state);
    sc.is_valid().then_some(sc)
}

fn parse_traceparent(tp: &str) -> Option<(TraceId, SpanId, TraceFlags)> {
    let b = tp.as_bytes();
    if b.len() < TRACEPARENT_CHARS || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
        return None;
    }
    let version = hex_u8(&tp[0..2])?;
    match version {
        0xff => return None,
        0 if b.len() != TRACEPARENT_CHARS => return None,
        // A later version may append fields after another `-`.
        _ if b.len() > TRACEPARENT_CHARS && b[TRACEPARENT_CHARS] != b'-' => return None,
        _ => {}
    }
    let trace_id = lower_hex(&tp[3..35]).and_then(|h| u128::from_str_radix(h, 16).ok())?;
    let span_id = lower_hex(&tp[36..52]).and_then(|h| u64::from_str_radix(h, 16).ok())?;
    let flags = hex_u8(&tp[53..55])?;
    if trace_id == 0 || span_id == 0 {
        return None;
    }
    Some((
        TraceId::from(trace_id),
        SpanId::from(span_id),
        // Only the sampled flag is defined; the others are zeroed (W3C "other flags").
        TraceFlags::new(flags) & TraceFlags::SAMPLED,
    ))
}

/// `s` when it is all lowercase hex digits (`from_str_radix` alone takes `+` and capitals).
fn lower_hex(s: &str) -> Option<&str> {
    s.bytes()
        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        .then_some(s)
}

fn hex_u8(s: &str) -> Option<u8> {
    lower_hex(s).and_then(|h| u8::from_str_radix(h, 16).ok())
}

/// The 32-hex trace id of a stored trace context (what a trace viewer searches for).
pub fn trace_id(text: &str) -> Option<&str> {
    let parent = text.split_once(';').map_or(text, |(p, _)| p);
    parse_traceparent(parent)?;
    Some(&parent[3..35])
}

/// Check a trace context a producer gave (`field` names it in the error).
pub fn validate(field: &str, text: Option<&str>) -> Result<(), ValidationError> {
    let Some(text) = text else {
        return Ok(());
    };
    if text.len() > MAX_CONTEXT_CHARS {
        return Err(ValidationError::new(
            field,
            format!("is {} characters long", text.len()),
            format!(
                "give a W3C traceparent, optionally followed by ';' and a tracestate, in at \
                 most {MAX_CONTEXT_CHARS} characters"
            ),
        ));
    }
    let (parent, state) = match text.split_once(';') {
        Some((parent, state)) => (parent, Some(state)),
        None => (text, None),
    };
    if parse_traceparent(parent).is_none() {
        return Err(ValidationError::new(
            field,
            "does not start with a valid W3C traceparent",
            "give version-traceid-spanid-flags in lowercase hex, such as \
             00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01, optionally followed by \
             ';' and a tracestate",
        ));
    }
    if let Some(state) = state
        && TraceState::from_str(state).is_err()
    {
        return Err(ValidationError::new(
            field,
            "has a tracestate that is not a W3C tracestate",
            "after the ';' give comma-separated key=value entries (vendor=value), or leave \
             the ';' and the tracestate out",
        ));
    }
    Ok(())
}

/// The stored text of `span`'s OpenTelemetry context; `None` without an OpenTelemetry layer
/// (checked before anything is formatted: no allocation then).
pub fn context_of(span: &Span) -> Option<String> {
    valid_context(span).map(|sc| format_context(&sc))
}

/// The stored text of the current span's context (see [`context_of`]).
pub fn current() -> Option<String> {
    context_of(&Span::current())
}

/// `traceparent` and `tracestate` header values for a call made inside `span` (an HTTP
/// handler's request to its endpoint); `None` without an OpenTelemetry layer.
pub fn headers_of(span: &Span) -> Option<(String, Option<String>)> {
    let sc = valid_context(span)?;
    let mut text = format_context(&sc);
    let state = (text.len() > TRACEPARENT_CHARS).then(|| text.split_off(TRACEPARENT_CHARS + 1));
    text.truncate(TRACEPARENT_CHARS);
    Some((text, state))
}

/// Make `sc` (a caller's context from request headers) the parent of `span`, which must not
/// have been entered yet. Without an OpenTelemetry layer this does nothing.
pub fn set_remote_parent(span: &Span, sc: SpanContext) {
    if span.is_disabled() {
        return;
    }
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(sc));
}

fn valid_context(span: &Span) -> Option<SpanContext> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// Link `span` to the stored contexts of `jobs` (at most [`MAX_LINKS`]).
fn link_jobs<'a>(span: &Span, jobs: impl Iterator<Item = &'a Job>) {
    for sc in jobs
        .filter_map(|j| j.trace_context.as_deref().and_then(parse))
        .take(MAX_LINKS)
    {
        span.add_link(sc);
    }
}

/// A count as the bridge exports integers: it records `u64` fields as text, `i64` as numbers.
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The one queue all `jobs` are in, if they share one.
fn common_queue<'a>(mut jobs: impl Iterator<Item = &'a Job>) -> Option<&'a str> {
    let first = jobs.next()?.queue.as_str();
    jobs.all(|j| j.queue == first).then_some(first)
}

/// The span of one enqueue into `queue`; the job id is recorded by [`enqueued`].
pub(crate) fn enqueue_span(queue: &str) -> Span {
    tracing::info_span!(
        "enqueue",
        otel.name = %format_args!("enqueue {queue}"),
        otel.kind = "producer",
        messaging.system = SYSTEM,
        messaging.operation.type = "send",
        messaging.operation.name = "enqueue",
        messaging.destination.name = %queue,
        messaging.message.id = Empty,
        deck.job.duplicate = Empty,
    )
}

/// The span of one batch enqueue.
pub(crate) fn enqueue_batch_span(reqs: &[EnqueueRequest]) -> Span {
    let span = tracing::info_span!(
        "enqueue",
        otel.name = Empty,
        otel.kind = "producer",
        messaging.system = SYSTEM,
        messaging.operation.type = "send",
        messaging.operation.name = "enqueue",
        messaging.destination.name = Empty,
        messaging.batch.message_count = count(reqs.len()),
    );
    if !span.is_disabled() {
        let first = reqs.first().map(|r| r.queue.as_str());
        match first.filter(|q| reqs.iter().all(|r| r.queue == *q)) {
            Some(queue) => {
                span.record("otel.name", display(format_args!("enqueue {queue}")));
                span.record("messaging.destination.name", queue);
            }
            None => {
                span.record("otel.name", "enqueue");
            }
        }
    }
    span
}

/// Give every request without a trace context the context of `span` (its enqueue span).
pub(crate) fn stamp(span: &Span, reqs: &mut [EnqueueRequest]) {
    if reqs.iter().all(|r| r.trace_context.is_some()) {
        return;
    }
    let Some(text) = context_of(span) else {
        return;
    };
    for req in reqs.iter_mut().filter(|r| r.trace_context.is_none()) {
        req.trace_context = Some(text.clone());
    }
}

/// Record the job an enqueue created or found (`duplicate`: an idempotency key matched).
pub(crate) fn enqueued(span: &Span, id: JobId, duplicate: bool) {
    span.record("messaging.message.id", display(id));
    if duplicate {
        span.record("deck.job.duplicate", true);
    }
}

/// The span of one claim by `instance`; finished by [`claimed`] or [`claim_failed`].
///
/// Not entered while the claim runs: it is still unstarted when [`claimed`] learns the
/// claim was empty, and can then be given a non-sampled parent so that parent-based
/// samplers (OpenTelemetry's default) drop it — an idle instance polls every second.
pub(crate) fn claim_span(instance: &str) -> Span {
    tracing::info_span!(
        parent: None,
        "claim",
        otel.name = "claim",
        otel.kind = "client",
        otel.status_code = Empty,
        messaging.system = SYSTEM,
        messaging.operation.type = "receive",
        messaging.operation.name = "claim",
        messaging.client.id = %instance,
        messaging.destination.name = Empty,
        messaging.batch.message_count = Empty,
    )
}

pub(crate) fn claimed(span: &Span, jobs: &[Job]) {
    if span.is_disabled() {
        return;
    }
    if jobs.is_empty() {
        let unsampled = SpanContext::new(
            TraceId::from(rand::random::<u128>().max(1)),
            SpanId::from(rand::random::<u64>().max(1)),
            TraceFlags::default(),
            true,
            TraceState::NONE,
        );
        set_remote_parent(span, unsampled);
        return;
    }
    span.record("messaging.batch.message_count", count(jobs.len()));
    if let Some(queue) = common_queue(jobs.iter()) {
        span.record("otel.name", display(format_args!("claim {queue}")));
        span.record("messaging.destination.name", queue);
    }
    link_jobs(span, jobs.iter());
}

pub(crate) fn claim_failed(span: &Span) {
    span.record("otel.status_code", "error");
}

/// The span of one attempt of `job` by `instance`, linked to the job's stored context. The
/// handler runs inside it; [`ran`] records how the attempt ended.
pub(crate) fn run_span(job: &Job, instance: &str) -> Span {
    let span = tracing::info_span!(
        parent: None,
        "run",
        otel.name = %format_args!("run {}", job.queue),
        otel.kind = "consumer",
        otel.status_code = Empty,
        otel.status_description = Empty,
        messaging.system = SYSTEM,
        messaging.operation.type = "process",
        messaging.operation.name = "run",
        messaging.destination.name = %job.queue,
        messaging.message.id = %job.id,
        messaging.client.id = %instance,
        deck.job.type = %job.job_type,
        deck.job.attempt = i64::from(job.attempt),
        deck.job.outcome = Empty,
    );
    if !span.is_disabled() {
        link_jobs(&span, std::iter::once(job));
    }
    span
}

/// How an attempt ended: `outcome` is `succeeded`, `retry`, `dead` or `released`; an
/// attempt that did not succeed gets error status with `error`.
pub(crate) fn ran(span: &Span, outcome: &'static str, error: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    span.record("deck.job.outcome", outcome);
    if let Some(error) = error {
        span.record("otel.status_code", "error");
        span.record("otel.status_description", error);
    }
}

/// The span of one group commit of finished `jobs` by `instance`.
pub(crate) fn complete_span<'a>(
    instance: &str,
    jobs: impl Iterator<Item = &'a Job> + Clone,
) -> Span {
    let span = tracing::info_span!(
        parent: None,
        "complete",
        otel.name = "complete",
        otel.kind = "client",
        otel.status_code = Empty,
        messaging.system = SYSTEM,
        messaging.operation.type = "settle",
        messaging.operation.name = "complete",
        messaging.client.id = %instance,
        messaging.destination.name = Empty,
        messaging.batch.message_count = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    span.record("messaging.batch.message_count", count(jobs.clone().count()));
    if let Some(queue) = common_queue(jobs.clone()) {
        span.record("otel.name", display(format_args!("complete {queue}")));
        span.record("messaging.destination.name", queue);
    }
    link_jobs(&span, jobs);
    span
}

pub(crate) fn complete_failed(span: &Span) {
    span.record("otel.status_code", "error");
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn target_is_this_module() {
        // The spans' macros run in the parent module, whose path is their target.
        assert_eq!(format!("{TARGET}::tests"), module_path!());
    }

    #[test]
    fn stored_text_round_trips() {
        for text in [
            TP.to_string(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00".to_string(),
            format!("{TP};vendor=abc,other=x;y"),
        ] {
            let sc = parse(&text).unwrap_or_else(|| panic!("{text} parses"));
            assert!(sc.is_remote());
            assert_eq!(format_context(&sc), text);
            assert_eq!(validate("trace_context", Some(&text)), Ok(()));
        }
        let sc = parse(TP).unwrap();
        assert_eq!(
            format!("{:032x}", sc.trace_id()),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(sc.is_sampled());
    }

    #[test]
    fn invalid_traceparents_are_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-é1",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
            assert!(trace_id(bad).is_none(), "{bad:?}");
            assert!(validate("trace_context", Some(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_prefix_and_unknown_flags_are_zeroed() {
        let sc = from_headers(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff-future",
            None,
        )
        .unwrap();
        assert_eq!(sc.trace_flags(), TraceFlags::SAMPLED);
    }

    #[test]
    fn a_bad_tracestate_header_is_ignored_but_refused_in_stored_text() {
        let sc = from_headers(TP, Some("no equals sign")).unwrap();
        assert_eq!(sc.trace_state().header(), "");
        assert!(validate("trace_context", Some(&format!("{TP};no equals sign"))).is_err());
    }

    #[test]
    fn a_long_tracestate_is_cut_at_an_entry() {
        let entries: Vec<String> = (0..40)
            .map(|i| format!("k{i}={}", "v".repeat(20)))
            .collect();
        let state = TraceState::from_str(&entries.join(",")).unwrap();
        let sc = SpanContext::new(
            TraceId::from(1),
            SpanId::from(1),
            TraceFlags::SAMPLED,
            false,
            state,
        );
        let text = format_context(&sc);
        assert!(text.len() <= MAX_CONTEXT_CHARS, "{}", text.len());
        let kept = parse(&text).unwrap();
        assert!(kept.trace_state().get("k0").is_some());
        assert!(!text.ends_with(','));
    }

    #[test]
    fn trace_id_is_the_32_hex_part() {
        assert_eq!(
            trace_id(&format!("{TP};a=b")),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
    }

    #[test]
    fn too_long_text_is_refused_with_the_limit() {
        let text = format!("{TP};a={}", "b".repeat(MAX_CONTEXT_CHARS));
        let err = validate("trace_context", Some(&text)).unwrap_err();
        assert!(err.help.contains(&MAX_CONTEXT_CHARS.to_string()), "{err}");
    }

    #[test]
    fn without_an_opentelemetry_layer_nothing_is_captured() {
        let span = enqueue_span("q");
        assert_eq!(context_of(&span), None);
        assert_eq!(headers_of(&span), None);
        let mut reqs = vec![EnqueueRequest::new("q", "t", "{}")];
        stamp(&span, &mut reqs);
        assert_eq!(reqs[0].trace_context, None);
    }
}

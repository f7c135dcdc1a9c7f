//! Traces follow a job through the database: a producer enqueues inside a request's span,
//! a worker on another handle of the SQLite file (what a second process has) claims, runs
//! and completes the job, and its spans link back to the enqueuing span through the trace
//! context stored with the job. Spans are recorded in memory through the same
//! `tracing` → OpenTelemetry bridge the binary exports with.

mod runtime_support;

use std::sync::Arc;

use async_trait::async_trait;
use deck_engine::store::interposed::{Interpose, InterposedStore, StoreCall};
use deck_engine::{EnqueueRequest, HandlerRegistry, JobContext, StoreReads, trace};
use opentelemetry::trace::{SpanContext, SpanKind, Status, TraceContextExt, TracerProvider as _};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use runtime_support::{
    AwaitedCount, WAIT, open_fast_retrying_store, open_store, producer_config, register_echo,
    reopen, start, succeeded_job, test_config,
};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

/// Spans finished while the returned guard lives, on this thread (the tests run on a
/// current-thread runtime, so every engine task is on it too).
fn record_spans() -> (InMemorySpanExporter, tracing::subscriber::DefaultGuard) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("trace_link")));
    (exporter, tracing::subscriber::set_default(subscriber))
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    match named(spans, name).as_slice() {
        [span] => span,
        other => panic!(
            "expected one span named {name:?}, found {}; all: {:?}",
            other.len(),
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        ),
    }
}

fn attr(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::from(key.to_string()))
        .map(|kv| kv.value.clone())
}

fn assert_attr(span: &SpanData, key: &str, expected: impl Into<Value>) {
    assert_eq!(
        attr(span, key),
        Some(expected.into()),
        "{key} on span {:?}",
        span.name
    );
}

fn linked(span: &SpanData) -> Vec<&SpanContext> {
    span.links.links.iter().map(|l| &l.span_context).collect()
}

/// Counts the claims a store answered, so a test can let a worker poll in vain first.
#[derive(Default)]
struct Claims {
    answered: AwaitedCount,
}

#[async_trait]
impl Interpose for Claims {
    fn after(&self, call: StoreCall) {
        if call == StoreCall::ClaimBatch {
            self.answered.add_one();
        }
    }
}

fn echo_handlers() -> HandlerRegistry {
    let mut handlers = HandlerRegistry::new();
    register_echo(&mut handlers, "mail.send");
    handlers
}

/// One test at a time: `cargo test` runs them on threads of one process, and tracing caches
/// each callsite's interest process-wide, so a span first hit on a thread without a
/// subscriber while another test sets its own can stay disabled there.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn the_run_span_links_to_the_enqueuing_span_across_a_store_round_trip() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let (exporter, _guard) = record_spans();
    let (dir, producer_store) = open_store().await;
    // The producer runs no workers: nothing it holds in memory can reach the worker.
    let producer = start(producer_store, HandlerRegistry::new(), producer_config()).await;
    let worker_store = Arc::new(InterposedStore::new(reopen(&dir).await, Claims::default()));
    let worker = start(worker_store.clone(), echo_handlers(), test_config()).await;
    // An empty claim first: the queue is still empty.
    worker_store.answered.reached(1).await;

    let request = tracing::info_span!("POST /orders", otel.kind = "server");
    let request_cx = request.context().span().span_context().clone();
    assert!(
        request_cx.is_valid(),
        "the OpenTelemetry layer is installed"
    );
    let outcome = producer
        .enqueue(EnqueueRequest::new(
            "emails",
            "mail.send",
            r#"{"to":"a@b.c"}"#,
        ))
        .instrument(request.clone())
        .await
        .unwrap();
    drop(request);
    succeeded_job(worker.wait(outcome.id, WAIT).await.unwrap());

    // What went through the database: the enqueuing span's context, on the job's row.
    let stored = worker_store
        .get_job(outcome.id)
        .await
        .unwrap()
        .expect("the archived job");
    let stored_text = stored
        .trace_context
        .expect("the store kept the trace context with the job");
    let stored_cx = trace::parse(&stored_text).expect("a valid stored trace context");
    let request_trace_id = format!("{:032x}", request_cx.trace_id());
    assert_eq!(
        trace::trace_id(&stored_text),
        Some(request_trace_id.as_str())
    );

    worker.shutdown().await;
    producer.shutdown().await;
    let spans = exporter.get_finished_spans().unwrap();

    let enqueue = one(&spans, "enqueue emails");
    assert_eq!(enqueue.span_kind, SpanKind::Producer);
    assert_eq!(enqueue.span_context.trace_id(), request_cx.trace_id());
    assert_eq!(enqueue.parent_span_id, request_cx.span_id());
    assert_eq!(
        stored_cx.span_id(),
        enqueue.span_context.span_id(),
        "the stored context names the enqueue span"
    );
    assert_attr(enqueue, "messaging.system", "deck");
    assert_attr(enqueue, "messaging.operation.type", "send");
    assert_attr(enqueue, "messaging.destination.name", "emails");
    assert_attr(enqueue, "messaging.message.id", outcome.id.to_string());

    let run = one(&spans, "run emails");
    assert_eq!(run.span_kind, SpanKind::Consumer);
    assert_eq!(
        linked(run),
        [&stored_cx],
        "the run links to the enqueuing span through the stored context"
    );
    assert_eq!(
        run.links.links[0].span_context.trace_id(),
        request_cx.trace_id()
    );
    assert_ne!(
        run.span_context.trace_id(),
        request_cx.trace_id(),
        "the run is a trace of its own, linked rather than parented"
    );
    assert_attr(run, "messaging.system", "deck");
    assert_attr(run, "messaging.operation.type", "process");
    assert_attr(run, "messaging.destination.name", "emails");
    assert_attr(run, "messaging.message.id", outcome.id.to_string());
    assert_attr(run, "deck.job.type", "mail.send");
    assert_attr(run, "deck.job.attempt", 1_i64);
    assert_attr(run, "deck.job.outcome", "succeeded");
    assert_eq!(run.status, Status::Unset);

    // The claim that brought the job, and the commit that finished it, link to it as well.
    let claims = named(&spans, "claim emails");
    assert_eq!(claims.len(), 1, "one claim took the job");
    assert_eq!(claims[0].span_kind, SpanKind::Client);
    assert_eq!(linked(claims[0]), [&stored_cx]);
    assert_attr(claims[0], "messaging.operation.type", "receive");
    assert_attr(claims[0], "messaging.batch.message_count", 1_i64);
    assert!(
        named(&spans, "claim").is_empty(),
        "the worker claimed in vain before the job was there; empty claims are not recorded"
    );
    let complete = one(&spans, "complete emails");
    assert_eq!(linked(complete), [&stored_cx]);
    assert_attr(complete, "messaging.operation.type", "settle");
    assert_attr(complete, "messaging.batch.message_count", 1_i64);
}

#[tokio::test]
async fn a_failed_attempt_is_an_error_span_and_each_attempt_links_to_the_same_context() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let (exporter, _guard) = record_spans();
    let (_dir, store) = open_fast_retrying_store().await;
    let mut handlers = HandlerRegistry::new();
    handlers.register(
        "flaky",
        |ctx: JobContext, _: serde_json::Value| async move {
            if ctx.attempt() == 1 {
                Err(deck_engine::HandlerError::transient("smtp down"))
            } else {
                Ok(serde_json::Value::Null)
            }
        },
    );
    let engine = start(store, handlers, test_config()).await;
    let request = tracing::info_span!("request");
    let (id, finished) = engine
        .enqueue_and_wait(EnqueueRequest::new("q", "flaky", "{}"), WAIT)
        .instrument(request.clone())
        .await
        .unwrap();
    succeeded_job(finished);
    engine.shutdown().await;
    let spans = exporter.get_finished_spans().unwrap();
    let enqueue = one(&spans, "enqueue q");
    let runs = named(&spans, "run q");
    assert_eq!(runs.len(), 2, "one span per attempt");
    for run in &runs {
        assert_attr(run, "messaging.message.id", id.to_string());
        let links = linked(run);
        assert_eq!(links.len(), 1);
        assert_eq!(links[0].span_id(), enqueue.span_context.span_id());
    }
    let first = runs
        .iter()
        .find(|r| attr(r, "deck.job.attempt") == Some(1_i64.into()))
        .expect("attempt 1");
    assert_attr(first, "deck.job.outcome", "retry");
    assert!(
        matches!(&first.status, Status::Error { description } if description.contains("smtp down")),
        "{:?}",
        first.status
    );
}

#[tokio::test]
async fn without_an_opentelemetry_layer_no_trace_context_is_stored() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let (_dir, store) = open_store().await;
    let engine = start(store.clone(), echo_handlers(), test_config()).await;
    let (id, finished) = engine
        .enqueue_and_wait(EnqueueRequest::new("emails", "mail.send", "{}"), WAIT)
        .instrument(tracing::info_span!("request"))
        .await
        .unwrap();
    succeeded_job(finished);
    engine.shutdown().await;
    assert_eq!(
        store.get_job(id).await.unwrap().unwrap().trace_context,
        None
    );
}

#[tokio::test]
async fn a_trace_context_the_producer_gives_is_kept_and_a_bad_one_refused() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let (_exporter, _guard) = record_spans();
    let (_dir, store) = open_store().await;
    let engine = start(store.clone(), HandlerRegistry::new(), producer_config()).await;
    let given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;vendor=abc";
    let outcome = engine
        .enqueue(EnqueueRequest {
            trace_context: Some(given.into()),
            ..EnqueueRequest::new("q", "t", "{}")
        })
        .instrument(tracing::info_span!("request"))
        .await
        .unwrap();
    let job = store.get_job(outcome.id).await.unwrap().unwrap();
    assert_eq!(job.trace_context.as_deref(), Some(given));

    let err = engine
        .enqueue(EnqueueRequest {
            trace_context: Some("not a traceparent".into()),
            ..EnqueueRequest::new("q", "t", "{}")
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("trace_context"), "{err}");
    engine.shutdown().await;
}

//! The request to an endpoint carries the W3C `traceparent` of the job's attempt, so a
//! receiver in any language continues the job's trace — and none without OpenTelemetry.

mod support;

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use deck_engine::{Engine, EngineConfig, HandlerRegistry, WaitOutcome};
use deck_http_handlers::{HttpHandlerConfig, register};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use support::{run_remote_task, serve_jobs_endpoint, sqlite_store};
use tracing_subscriber::layer::SubscriberExt;

type Seen = Arc<Mutex<Vec<HeaderMap>>>;

async fn receiver(State(seen): State<Seen>, headers: HeaderMap) -> &'static str {
    seen.lock().unwrap().push(headers);
    "{}"
}

/// An engine whose `remote.*` jobs go to a loopback endpoint that records the headers.
async fn engine_and_endpoint() -> (Engine, Seen, tempfile::TempDir) {
    let seen = Seen::default();
    let addr = serve_jobs_endpoint(post(receiver), seen.clone()).await;
    let (dir, store) = sqlite_store().await;
    let mut handlers = HandlerRegistry::new();
    let endpoint = HttpHandlerConfig::new(format!("http://{addr}/jobs"), &["remote.*"]);
    register(&mut handlers, &[endpoint], &|_| None).unwrap();
    let engine = Engine::start(store, handlers, EngineConfig::default())
        .await
        .unwrap();
    (engine, seen, dir)
}

async fn run_one(engine: &Engine) {
    let outcome = run_remote_task(engine, "{}".into()).await;
    assert!(
        matches!(outcome, WaitOutcome::Succeeded { .. }),
        "{outcome:?}"
    );
}

/// One test at a time: `cargo test` runs them on threads of one process, and tracing caches
/// each callsite's interest process-wide, so a span first hit on the thread without a
/// subscriber while the other test sets its own can stay disabled there.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// Current-thread: the thread-local subscriber sees the engine's tasks.
#[tokio::test]
async fn the_endpoint_gets_the_attempts_traceparent() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let _guard = tracing::subscriber::set_default(subscriber);
    let (engine, seen, _dir) = engine_and_endpoint().await;
    run_one(&engine).await;
    engine.shutdown().await;

    let headers = seen.lock().unwrap()[0].clone();
    let traceparent = headers["traceparent"].to_str().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let run = spans
        .iter()
        .find(|s| s.name == "run default")
        .expect("the attempt's span");
    assert_eq!(
        traceparent,
        format!(
            "00-{:032x}-{:016x}-01",
            run.span_context.trace_id(),
            run.span_context.span_id()
        ),
        "the endpoint's parent is the attempt's span"
    );
}

#[tokio::test]
async fn without_opentelemetry_no_traceparent_is_sent() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let (engine, seen, _dir) = engine_and_endpoint().await;
    run_one(&engine).await;
    engine.shutdown().await;
    assert!(seen.lock().unwrap()[0].get("traceparent").is_none());
}

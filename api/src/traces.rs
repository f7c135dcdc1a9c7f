//! The API's request spans: every write runs inside one, whose parent is the caller's W3C
//! `traceparent`, so a trace goes from the caller's request into the job's spans. They are
//! `deck_engine::trace` spans, exported with the engine's (by the binary, when configured).

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use deck_engine::trace::{self, TARGET};
use tracing::field::Empty;
use tracing::{Instrument, Span};

/// The span of one API request: `method route`, a server span, child of the caller's
/// `traceparent` (and `tracestate`) when the request carries a valid one.
pub fn request_span(method: &str, route: &str, headers: &HeaderMap) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = method,
        http.route = route,
        http.response.status_code = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(parent) = header("traceparent")
        .and_then(|traceparent| trace::from_headers(traceparent, header("tracestate")))
    {
        trace::set_remote_parent(&span, parent);
    }
    span
}

/// The request span of every write (any method but GET, HEAD and OPTIONS), as a layer:
/// the handler runs inside it, so a job it enqueues links back to the caller's trace, and the
/// answer's status is recorded on it, whichever handler answered.
pub async fn write_request_span(
    matched: Option<MatchedPath>,
    req: Request,
    next: Next,
) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    let route = matched
        .as_ref()
        .map_or(req.uri().path(), MatchedPath::as_str);
    let span = request_span(req.method().as_str(), route, req.headers());
    let response = next.run(req).instrument(span.clone()).await;
    responded(&span, response.status());
    response
}

/// Record the answer's status on a request span.
pub fn responded(span: &Span, status: axum::http::StatusCode) {
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /// Spans exported on this thread until the guard drops, as an OpenTelemetry layer sees
    /// them. Callsites other tests in this process met first, under no subscriber, are asked
    /// again, so none stays cached as "never".
    fn capture_spans() -> (InMemorySpanExporter, tracing::subscriber::DefaultGuard) {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        let guard = tracing::subscriber::set_default(subscriber);
        tracing::callsite::rebuild_interest_cache();
        (exporter, guard)
    }

    fn headers(traceparent: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", traceparent.parse().unwrap());
        headers.insert("tracestate", "vendor=abc".parse().unwrap());
        headers
    }

    #[test]
    fn a_request_span_joins_the_callers_trace() {
        let (exporter, _guard) = capture_spans();

        let span = request_span("POST", "/api/v1/jobs", &headers(CALLER));
        // What an enqueue inside the request stores: the caller's trace, this span's id.
        let inside = span
            .in_scope(trace::current)
            .expect("a context inside the request");
        assert_eq!(
            trace::trace_id(&inside),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert!(inside.ends_with(";vendor=abc"), "{inside}");
        responded(&span, axum::http::StatusCode::CREATED);
        drop(span);

        let spans = exporter.get_finished_spans().unwrap();
        let [request] = spans.as_slice() else {
            panic!("{spans:?}")
        };
        assert_eq!(request.name, "POST /api/v1/jobs");
        assert_eq!(request.span_kind, opentelemetry::trace::SpanKind::Server);
        assert_eq!(
            format!("{:016x}", request.parent_span_id),
            "00f067aa0ba902b7"
        );
        assert!(request.parent_span_is_remote);
    }

    #[test]
    fn a_bad_traceparent_starts_a_new_trace() {
        let (_exporter, _guard) = capture_spans();
        let span = request_span("POST", "/api/v1/jobs", &headers("00-garbage"));
        let inside = span.in_scope(trace::current).expect("a context of its own");
        assert_ne!(
            trace::trace_id(&inside),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
    }

    #[test]
    fn without_an_opentelemetry_layer_nothing_is_captured() {
        let span = request_span("POST", "/api/v1/jobs", &headers(CALLER));
        assert_eq!(span.in_scope(trace::current), None);
    }

    /// The layer over the API's routes: a write runs inside a span that continues the
    /// caller's trace, named by its route and carrying its status; a read gets none.
    #[tokio::test]
    async fn every_write_runs_in_a_request_span_and_a_read_in_none() {
        use std::sync::{Arc, Mutex};

        use axum::Router;
        use axum::body::Body;
        use axum::http::{Request, StatusCode};
        use axum::routing::get;
        use tower::ServiceExt;

        // The runtime of this test runs on this thread, so the handlers run under this capture.
        let (exporter, _guard) = capture_spans();
        let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
        let record = {
            let seen = seen.clone();
            move || {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().push(trace::current());
                    StatusCode::ACCEPTED
                }
            }
        };
        let app = Router::new()
            .route("/api/v1/jobs/{id}", get(record.clone()).post(record))
            .route_layer(axum::middleware::from_fn(write_request_span));
        for method in ["POST", "GET"] {
            let req = Request::builder()
                .method(method)
                .uri("/api/v1/jobs/7")
                .header("traceparent", CALLER)
                .body(Body::empty())
                .unwrap();
            let answer = app.clone().oneshot(req).await.unwrap();
            assert_eq!(answer.status(), StatusCode::ACCEPTED, "{method}");
        }

        let seen = seen.lock().unwrap().clone();
        let [write, read] = seen.as_slice() else {
            panic!("{seen:?}")
        };
        let write = write
            .as_deref()
            .expect("the write's handler runs inside a span");
        assert_eq!(
            trace::trace_id(write),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(read, &None, "a read runs in no request span");

        let spans = exporter.get_finished_spans().unwrap();
        let [request] = spans.as_slice() else {
            panic!("one span, the write's: {spans:?}")
        };
        assert_eq!(request.name, "POST /api/v1/jobs/{id}");
        assert!(request.parent_span_is_remote);
        let status = request
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == "http.response.status_code")
            .map(|kv| kv.value.clone());
        assert_eq!(status, Some(opentelemetry::Value::I64(202)));
    }
}

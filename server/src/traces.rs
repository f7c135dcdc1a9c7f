//! Traces: the engine's spans (`deck_engine::trace`) exported over OTLP/HTTP with protobuf
//! when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (cargo
//! feature `otel`, on by default); nothing is exported otherwise. And the API's request
//! spans, whose parent is the caller's W3C `traceparent`, so a trace goes from the caller's
//! request into the job's spans.
//!
//! The exporter takes the standard variables as the OpenTelemetry SDKs do:
//! `OTEL_EXPORTER_OTLP_{,TRACES_}{ENDPOINT,HEADERS,TIMEOUT}`, `OTEL_SERVICE_NAME` (default
//! `deck`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`. Only the `http/protobuf`
//! protocol is built in (port 4318 on a collector), which keeps gRPC out of the binary.

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

/// The exporter, while it runs; [`Traces::shutdown`] sends what is still buffered.
#[derive(Default)]
pub struct Traces {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Traces {
    /// Send the spans still buffered and stop the exporter. Call it while the async runtime
    /// still exists: the export runs on it.
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: could not send the last traces to the OTLP endpoint: {e}");
        }
    }
}

/// The layer that hands the engine's spans to the OTLP exporter, when an endpoint is
/// configured: `None` (and nothing exported) otherwise, or when the exporter cannot be built
/// (said on stderr: logging is not up yet).
#[cfg(feature = "otel")]
pub fn layer<S>(
    runtime: &tokio::runtime::Handle,
) -> (Option<impl tracing_subscriber::Layer<S> + use<S>>, Traces)
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    match export::provider(runtime) {
        Ok(Some(provider)) => {
            let layer = export::layer(&provider);
            (
                Some(layer),
                Traces {
                    provider: Some(provider),
                },
            )
        }
        Ok(None) => (None, Traces::default()),
        Err(e) => {
            eprintln!("warning: traces are not exported: {e}");
            (None, Traces::default())
        }
    }
}

#[cfg(feature = "otel")]
mod export {
    use std::time::Duration;

    use async_trait::async_trait;
    use deck_engine::trace::TARGET;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
    use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithHttpConfig};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing::Level;
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::filter_fn;

    const ENDPOINT_VARS: [&str; 2] = [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ];
    /// Largest collector answer read (the OTLP answer is a tiny protobuf message).
    const MAX_ANSWER_BYTES: usize = 64 * 1024;

    fn env(name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.trim().is_empty())
    }

    /// The tracer provider exporting to the configured endpoint; `None` when none is set.
    pub(super) fn provider(
        runtime: &tokio::runtime::Handle,
    ) -> Result<Option<SdkTracerProvider>, String> {
        if ENDPOINT_VARS.iter().all(|v| env(v).is_none()) {
            return Ok(None);
        }
        for var in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(protocol) = env(var)
                && protocol != "http/protobuf"
            {
                return Err(format!(
                    "{var}={protocol} is not supported\n  help: deck sends http/protobuf \
                     (a collector's port 4318); unset {var} or set it to http/protobuf"
                ));
            }
        }
        let client = TokioClient::new(runtime.clone(), timeout())?;
        let exporter = SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_http_client(client)
            .build()
            .map_err(|e| format!("cannot set up the OTLP exporter: {e}"))?;
        let mut resource = Resource::builder();
        if env("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("deck");
        }
        let resource = resource
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        Ok(Some(
            SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource)
                .build(),
        ))
    }

    /// The OpenTelemetry layer: the engine's spans (and the API's request spans, same
    /// target), and the events logged inside them as span events.
    pub(super) fn layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("deck"))
            // Every span is made in the same two files, on whichever tokio thread: source
            // location and thread say nothing; busy/idle time costs a clock read per poll.
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            // Only spans made for tracing: the runtime's own long-lived task spans (the
            // fetcher's, lasting the whole process) would be traces of their own.
            .with_filter(filter_fn(|meta| {
                if meta.is_span() {
                    meta.target() == TARGET
                } else {
                    *meta.level() <= Level::INFO
                }
            }))
    }

    /// `OTEL_EXPORTER_OTLP_{TRACES_,}TIMEOUT` in milliseconds, 10 s by default — the
    /// exporter leaves enforcing it to the client.
    fn timeout() -> Duration {
        [
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]
        .iter()
        .find_map(|v| env(v).and_then(|ms| ms.trim().parse().ok()))
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(10))
    }

    /// The HTTP client the binary already has (reqwest with rustls), run on its tokio
    /// runtime: the SDK's batch exporter thread has no runtime of its own and waits on the
    /// spawned request.
    #[derive(Debug)]
    struct TokioClient {
        client: reqwest::Client,
        runtime: tokio::runtime::Handle,
    }

    impl TokioClient {
        fn new(runtime: tokio::runtime::Handle, timeout: Duration) -> Result<Self, String> {
            let client = reqwest::Client::builder()
                .timeout(timeout)
                .build()
                .map_err(|e| format!("cannot build the HTTP client for OTLP: {e}"))?;
            Ok(TokioClient { client, runtime })
        }
    }

    #[async_trait]
    impl HttpClient for TokioClient {
        async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
            let request = reqwest::Request::try_from(request)?;
            let client = self.client.clone();
            self.runtime
                .spawn(async move {
                    let mut answer = client.execute(request).await?;
                    let mut response = Response::builder().status(answer.status());
                    if let Some(headers) = response.headers_mut() {
                        *headers = std::mem::take(answer.headers_mut());
                    }
                    let mut body = Vec::new();
                    while let Some(chunk) = answer.chunk().await? {
                        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                            return Err("the OTLP endpoint's answer is too large".into());
                        }
                        body.extend_from_slice(&chunk);
                    }
                    Ok(response.body(Bytes::from(body))?)
                })
                .await?
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /// Spans exported on this thread until the guard drops, as an OpenTelemetry layer sees
    /// them. Callsites other tests in this process met first, under no subscriber, are asked
    /// again, so none stays cached as "never".
    pub(crate) fn capture_spans() -> (InMemorySpanExporter, tracing::subscriber::DefaultGuard) {
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

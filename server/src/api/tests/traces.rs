//! Every write runs inside one request span (`traces::write_request_span`, a layer over the
//! API's routes): it continues the caller's `traceparent`, the jobs a handler enqueues link
//! back to it, and the answer's status is recorded on it. Reads get none.

use axum::http::{Method, header};

use super::*;

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn from_caller(method: Method, uri: &str, body: Option<Value>) -> Request<Body> {
    let mut req = request(method, uri, body);
    req.headers_mut()
        .insert("traceparent", header::HeaderValue::from_static(CALLER));
    req
}

#[tokio::test]
async fn a_write_continues_the_callers_trace_and_records_its_status_and_a_read_makes_no_span() {
    // The test's runtime runs on this thread only, so the handler runs under this subscriber.
    let (exporter, _guard) = crate::traces::tests::capture_spans();
    let h = harness().await;

    let r = h
        .send(from_caller(
            Method::POST,
            "/api/v1/jobs",
            Some(json!({"queue": "default", "type": "echo", "payload": {}})),
        ))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id: JobId = r.body["id"].as_str().unwrap().parse().unwrap();
    let job = h.engine.store().get_job(id).await.unwrap().unwrap();
    let stored = job.trace_context.unwrap_or_else(|| {
        let probe = crate::traces::request_span("POST", "/probe", &axum::http::HeaderMap::new());
        panic!(
            "DIAG max {:?} probe_disabled {} current_disabled {}",
            tracing::level_filters::LevelFilter::current(),
            probe.is_disabled(),
            tracing::Span::current().is_disabled()
        )
    });
    assert_eq!(deck_engine::trace::trace_id(&stored), Some(CALLER_TRACE));

    let refused = h
        .send(from_caller(
            Method::POST,
            "/api/v1/jobs",
            Some(json!({"queue": "", "type": "echo"})),
        ))
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);

    let read = h
        .send(from_caller(
            Method::GET,
            &format!("/api/v1/jobs/{id}"),
            None,
        ))
        .await;
    assert_eq!(read.status, StatusCode::OK);

    let spans = exporter.get_finished_spans().unwrap();
    let requests: Vec<_> = spans
        .iter()
        .filter(|s| s.span_kind == opentelemetry::trace::SpanKind::Server)
        .collect();
    let statuses: Vec<(String, i64)> = requests
        .iter()
        .map(|s| {
            let status = s
                .attributes
                .iter()
                .find(|kv| kv.key.as_str() == "http.response.status_code")
                .and_then(|kv| match kv.value {
                    opentelemetry::Value::I64(n) => Some(n),
                    _ => None,
                })
                .unwrap_or(0);
            (s.name.to_string(), status)
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("POST /api/v1/jobs".to_string(), 201),
            ("POST /api/v1/jobs".to_string(), 400)
        ],
        "one span per write, none for the read"
    );
    for span in requests {
        assert_eq!(
            format!("{:032x}", span.span_context.trace_id()),
            CALLER_TRACE
        );
        assert!(span.parent_span_is_remote);
    }
}

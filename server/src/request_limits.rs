//! Bounds on a request's body, applied to every route before any handler runs:
//!
//! - a declared `Content-Length` over `http.max_body_bytes` is answered 413 at once, before a
//!   byte of the body is read (and, with `Expect: 100-continue`, before the client sends it);
//! - a body sent without a length (chunked) is cut at the same size while it is read;
//! - the whole body must arrive within `http.request_body_timeout` of the end of the headers,
//!   else the request is answered 408.
//!
//! Only the request is bounded, never the response: a long poll (`?wait=`) or the live
//! stream (`/live`) may take as long as it answers. Endpoints keep their own smaller limits
//! (1.25 MiB per job, 4 MiB per console form), enforced while they read.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use deck_api::error::ApiError;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tower_http::limit::RequestBodyLimitLayer;

use crate::config::HttpSettings;

/// `router` with the body bounds of `settings` in front of every route.
pub fn apply(router: Router, settings: &HttpSettings) -> Router {
    let bounds = BodyBounds {
        // The validated maximum (32 MiB) fits any platform's usize.
        max_bytes: usize::try_from(settings.max_body_bytes).unwrap_or(usize::MAX),
        timeout: settings.request_body_timeout,
    };
    router
        // Inner: cuts bodies without a declared length; the outer check answers first for
        // the others, in the shape the caller expects.
        .layer(RequestBodyLimitLayer::new(bounds.max_bytes))
        .layer(middleware::from_fn(move |req, next| {
            bound_body(bounds, req, next)
        }))
}

#[derive(Debug, Clone, Copy)]
struct BodyBounds {
    max_bytes: usize,
    timeout: Duration,
}

async fn bound_body(bounds: BodyBounds, req: Request, next: Next) -> Response {
    let api = is_api(req.uri().path());
    if let Some(declared) = declared_length(&req)
        && declared > bounds.max_bytes as u64
    {
        return too_large(api, declared, bounds.max_bytes);
    }
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let expired = Arc::new(AtomicBool::new(false));
    let req = req.map(|body| {
        Body::new(DeadlineBody {
            inner: body,
            deadline: Box::pin(tokio::time::sleep(bounds.timeout)),
            expired: expired.clone(),
        })
    });
    let response = next.run(req).await;
    if expired.load(Ordering::Acquire) {
        // Whatever the handler made of the failed read (a 400, a 413), the cause is the
        // client's slowness: say so.
        tracing::info!(
            event = "http.body_timeout",
            "request body not received within {} s",
            bounds.timeout.as_secs()
        );
        return timed_out(api, bounds.timeout);
    }
    response
}

fn is_api(path: &str) -> bool {
    path.strip_prefix(deck_api::PREFIX)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn declared_length(req: &Request) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn too_large(api: bool, declared: u64, max: usize) -> Response {
    let message = format!(
        "the request declares a body of {declared} bytes; this server accepts at most {max} \
         (http.max_body_bytes); send smaller payloads (at most 1 MiB of JSON per job) or \
         split a batch"
    );
    closing(if api {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message).into_response()
    } else {
        plain(StatusCode::PAYLOAD_TOO_LARGE, message)
    })
}

fn timed_out(api: bool, timeout: Duration) -> Response {
    let message = format!(
        "the request body did not arrive within {} s (http.request_body_timeout); send it \
         at once after the headers",
        timeout.as_secs()
    );
    closing(if api {
        ApiError::new(StatusCode::REQUEST_TIMEOUT, "request_timeout", message).into_response()
    } else {
        plain(StatusCode::REQUEST_TIMEOUT, message)
    })
}

fn plain(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{message}\n"),
    )
        .into_response()
}

/// The unread body leaves the connection at an unknown position; tell the client it ends.
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A body that fails once its deadline has passed. tower-http's `RequestBodyTimeout` resets
/// its timer on every frame, so a client dripping a byte at a time would never hit it; this
/// deadline is for the body as a whole.
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
    expired: Arc<AtomicBool>,
}

#[derive(Debug)]
struct BodyTimeout;

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time (http.request_body_timeout)")
    }
}

impl std::error::Error for BodyTimeout {}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.expired.store(true, Ordering::Release);
            return Poll::Ready(Some(Err(axum::Error::new(BodyTimeout))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths_are_told_apart_from_the_console() {
        assert!(is_api("/api/v1"));
        assert!(is_api("/api/v1/jobs"));
        assert!(!is_api("/api/v10/jobs"));
        assert!(!is_api("/jobs"));
        assert!(!is_api("/"));
    }
}

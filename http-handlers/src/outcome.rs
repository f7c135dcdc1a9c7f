//! What an endpoint's answer means for the job.
//!
//! | answer | outcome |
//! |---|---|
//! | 2xx | success; a JSON body is the job's result (other text is kept as a JSON string) |
//! | 429 or 503 with `Retry-After` | throttled: retried no earlier than it says |
//! | 408, other 5xx, 429 without `Retry-After`, timeout, connection error | transient: retried by the job's policy |
//! | other 4xx, 3xx (redirects are not followed) | fatal: straight to the dead-letter queue |
//!
//! Errors carry the status and a bounded slice of the body, so the console shows why.

use std::time::Duration;

use deck_engine::{HandlerError, HandlerOutcome};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};

/// Bytes of an error answer's body kept in the job's error.
pub(crate) const ERROR_BODY_BYTES: usize = 1024;
/// Longest `Retry-After` honoured; a longer one is cut to this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The outcome of an answer with `status`, `headers` and (up to a bound) `body`.
pub(crate) fn of_answer(
    url: &str,
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    now: chrono::DateTime<chrono::Utc>,
) -> HandlerOutcome {
    if status.is_success() {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        return Ok(Some(
            match serde_json::from_slice::<serde_json::Value>(body) {
                Ok(_) => String::from_utf8_lossy(body).into_owned(),
                Err(_) => serde_json::Value::String(String::from_utf8_lossy(body).into_owned())
                    .to_string(),
            },
        ));
    }
    let what = format!("HTTP {} from {url}{}", status.as_u16(), slice(body));
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| retry_after(v, now));
    match status.as_u16() {
        429 | 503 if retry_after.is_some() => Err(HandlerError::throttled(
            retry_after.unwrap_or_default().min(MAX_RETRY_AFTER),
            what,
        )),
        408 | 429 => Err(HandlerError::transient(what)),
        s if s >= 500 => Err(HandlerError::transient(what)),
        s if (300..400).contains(&s) => Err(HandlerError::fatal(format!(
            "{what} (redirects are not followed: configure the final URL)"
        ))),
        _ => Err(HandlerError::fatal(what)),
    }
}

/// A request that got no answer: timed out, refused, reset.
pub(crate) fn of_failure(url: &str, timeout: Duration, e: &reqwest::Error) -> HandlerError {
    if e.is_timeout() {
        HandlerError::transient(format!(
            "no answer from {url} within {} (the handler's timeout)",
            humanize(timeout)
        ))
    } else if e.is_connect() {
        HandlerError::transient(format!("cannot connect to {url}: {}", source_chain(e)))
    } else {
        HandlerError::transient(format!("request to {url} failed: {}", source_chain(e)))
    }
}

/// `Retry-After` as seconds or an HTTP date.
fn retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    (at.with_timezone(&chrono::Utc) - now)
        .to_std()
        .ok()
        .or(Some(Duration::ZERO))
}

fn slice(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(ERROR_BODY_BYTES)]);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else if body.len() > ERROR_BODY_BYTES {
        format!(": {text}…")
    } else {
        format!(": {text}")
    }
}

fn source_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn humanize(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn answer(status: u16, retry: Option<&str>, body: &str) -> HandlerOutcome {
        let mut headers = HeaderMap::new();
        if let Some(r) = retry {
            headers.insert(RETRY_AFTER, HeaderValue::from_str(r).unwrap());
        }
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        of_answer(
            "http://x/jobs",
            StatusCode::from_u16(status).unwrap(),
            &headers,
            body.as_bytes(),
            now,
        )
    }

    #[test]
    fn success_keeps_a_json_body_as_the_result() {
        assert_eq!(
            answer(200, None, "{\"sent\":true}"),
            Ok(Some("{\"sent\":true}".into()))
        );
        assert_eq!(answer(204, None, ""), Ok(None));
        assert_eq!(answer(200, None, "done"), Ok(Some("\"done\"".into())));
    }

    #[test]
    fn throttling_needs_a_retry_after() {
        assert_eq!(
            answer(429, Some("120"), ""),
            Err(HandlerError::throttled(
                Duration::from_secs(120),
                "HTTP 429 from http://x/jobs"
            ))
        );
        assert_eq!(
            answer(503, Some("Tue, 01 Dec 2026 12:01:00 GMT"), "busy"),
            Err(HandlerError::throttled(
                Duration::from_secs(60),
                "HTTP 503 from http://x/jobs: busy"
            ))
        );
        assert!(matches!(
            answer(429, None, ""),
            Err(HandlerError::Transient(_))
        ));
        assert!(matches!(
            answer(503, None, ""),
            Err(HandlerError::Transient(_))
        ));
    }

    #[test]
    fn server_errors_retry_and_client_errors_are_fatal_with_a_bounded_body() {
        assert!(
            matches!(answer(500, None, "boom"), Err(HandlerError::Transient(m)) if m.ends_with(": boom"))
        );
        assert!(matches!(
            answer(408, None, ""),
            Err(HandlerError::Transient(_))
        ));
        let long = "x".repeat(5000);
        match answer(422, None, &long) {
            Err(HandlerError::Fatal(m)) => {
                assert!(m.starts_with("HTTP 422 from http://x/jobs: xxx"), "{m}");
                assert!(m.len() < ERROR_BODY_BYTES + 100, "{}", m.len());
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(answer(302, None, ""), Err(HandlerError::Fatal(m)) if m.contains("redirects"))
        );
    }
}

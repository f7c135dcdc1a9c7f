//! Request extractors that turn every bad input into an `ApiError` (never axum's plain-text
//! rejections): JSON bodies with the offending field named, job ids in paths, `?wait=`.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use deck_engine::JobId;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::wire::ObjectOnly;

/// A JSON body, deserialized strictly (the DTOs deny unknown fields). Requires a JSON
/// content type: besides being honest, that keeps plain cross-site form posts out.
pub struct ApiJson<T>(pub T);

/// Like `ApiJson`, but an empty body is allowed and means `None`.
pub struct OptionalApiJson<T>(pub Option<T>);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match OptionalApiJson::<T>::from_request(req, state).await?.0 {
            Some(value) => Ok(ApiJson(value)),
            None => Err(ApiError::bad_request(
                "missing_body",
                "the request needs a JSON body; see /api/v1/openapi.json for its shape",
            )),
        }
    }
}

impl<T, S> FromRequest<S> for OptionalApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase);
        let body = Bytes::from_request(req, state)
            .await
            .map_err(|rejection| body_rejection(rejection.status(), rejection.body_text()))?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalApiJson(None));
        }
        if !content_type.as_deref().is_some_and(is_json_content_type) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with the header `Content-Type: application/json`",
            ));
        }
        // A literal `null` body is "no body" too, so clients may always send JSON.
        parse_json::<Option<ObjectOnly<T>>>(&body)
            .map(|parsed| OptionalApiJson(parsed.map(|ObjectOnly(value)| value)))
    }
}

fn is_json_content_type(ct: &str) -> bool {
    let essence = ct.split(';').next().unwrap_or("").trim();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn body_rejection(status: StatusCode, text: String) -> ApiError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "the request body is larger than this endpoint accepts; send smaller payloads \
             (at most 1 MiB of JSON per job) or split a batch",
        )
    } else {
        ApiError::new(
            status,
            "unreadable_body",
            format!("cannot read the request body: {text}"),
        )
    }
}

/// Deserialize a JSON document, naming the field at fault on error.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    let value: T = serde_path_to_error::deserialize(de).map_err(json_error)?;
    // Trailing garbage after a valid document is malformed input too.
    let mut rest = serde_json::Deserializer::from_slice(body).into_iter::<serde::de::IgnoredAny>();
    rest.next();
    if rest.next().is_some() {
        return Err(ApiError::bad_request(
            "malformed_json",
            "the body holds more than one JSON document; send exactly one",
        ));
    }
    Ok(value)
}

fn json_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    use serde_json::error::Category;
    let path = e.path().to_string();
    let inner = e.inner();
    let message = inner.to_string();
    match inner.classify() {
        Category::Syntax | Category::Eof | Category::Io => ApiError::bad_request(
            "malformed_json",
            format!("the body is not valid JSON: {message}"),
        ),
        Category::Data => {
            let named = backticked(&message);
            let field = |name: Option<&str>| match (path.as_str(), name) {
                (".", Some(n)) | ("", Some(n)) => n.to_string(),
                (p, Some(n)) => format!("{p}.{n}"),
                (p, None) => p.to_string(),
            };
            let in_field = |e: ApiError| match field(None).as_str() {
                "." | "" => e,
                _ => e.with_field(field(None)),
            };
            if message.starts_with("unknown field") {
                // serde_path_to_error's path already ends at the unknown field.
                in_field(ApiError::bad_request(
                    "unknown_field",
                    format!("{message}; remove it (see /api/v1/openapi.json)"),
                ))
            } else if message.starts_with("missing field") {
                ApiError::bad_request("missing_field", format!("{message}; add it"))
                    .with_field(field(named))
            } else {
                in_field(ApiError::bad_request(
                    "invalid_value",
                    format!("{path}: {message}"),
                ))
            }
        }
    }
}

/// The first name in backticks of a serde message ("unknown field `foo`, expected ...").
fn backticked(message: &str) -> Option<&str> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(&message[start..start + len])
}

/// Query parameters, with a JSON error when they do not parse.
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::try_from_uri(&parts.uri)
            .map(|Query(q)| ApiQuery(q))
            .map_err(|e| ApiError::bad_request("invalid_query", e.body_text()))
    }
}

/// A job id from a path segment.
pub fn parse_job_id(raw: &str) -> Result<JobId, ApiError> {
    raw.parse().map_err(|_| {
        ApiError::bad_request(
            "invalid_id",
            format!("{raw:?} is not a job id; job ids are UUIDs like 0192f0c1-7d1e-7c3a-9a51-3c1f4f0e2b6d"),
        )
        .with_field("id")
    })
}

/// `?wait=` values: a decimal number with an optional unit, `ms`, `s` or `m` (`30s`, `500ms`,
/// `1.5m`, `2`: seconds), exactly the document's `limits::WAIT_PATTERN`. Longer waits are
/// capped at `max` so a client cannot pin a connection forever.
pub fn parse_wait(raw: &str, max: Duration) -> Result<Duration, ApiError> {
    let bad = || {
        ApiError::bad_request(
            "invalid_wait",
            format!(
                "wait={raw:?} is not a duration; use e.g. wait=30s, wait=500ms or wait=2m \
                 (at most {}s)",
                max.as_secs()
            ),
        )
        .with_field("wait")
    };
    let (number, unit_ms) = if let Some(n) = raw.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = raw.strip_suffix('s') {
        (n, 1_000.0)
    } else if let Some(n) = raw.strip_suffix('m') {
        (n, 60_000.0)
    } else {
        (raw, 1_000.0)
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let plain = match number.split_once('.') {
        Some((whole, fraction)) => digits(whole) && digits(fraction),
        None => digits(number),
    };
    // Plain decimals only: f64's parser would also take `1e3`, `inf` or `+5`, which the
    // document does not promise.
    if !plain {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let ms = (value * unit_ms).min(max.as_millis() as f64);
    Ok(Duration::from_millis(ms as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        jobs: Vec<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        queue: String,
        #[serde(default)]
        priority: i32,
    }

    #[test]
    fn json_errors_name_the_field() {
        let e =
            parse_json::<Outer>(br#"{"jobs":[{"queue":"a"},{"queue":"b","nope":1}]}"#).unwrap_err();
        assert_eq!(e.code, "unknown_field");
        assert_eq!(e.field.as_deref(), Some("jobs[1].nope"));

        let e = parse_json::<Outer>(br#"{"jobs":[{"priority":1}]}"#).unwrap_err();
        assert_eq!(e.code, "missing_field");
        assert_eq!(e.field.as_deref(), Some("jobs[0].queue"));

        let e = parse_json::<Outer>(br#"{"jobs":[{"queue":"a","priority":"high"}]}"#).unwrap_err();
        assert_eq!(e.code, "invalid_value");
        assert_eq!(e.field.as_deref(), Some("jobs[0].priority"));

        let e = parse_json::<Outer>(br#"{"jobs":[{"queue":"#).unwrap_err();
        assert_eq!(e.code, "malformed_json");
        let e = parse_json::<Outer>(br#"{"jobs":[]} {}"#).unwrap_err();
        assert_eq!(e.code, "malformed_json");
    }

    #[test]
    fn wait_durations() {
        let max = Duration::from_secs(60);
        assert_eq!(parse_wait("30s", max).unwrap(), Duration::from_secs(30));
        assert_eq!(
            parse_wait("500ms", max).unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(parse_wait("2", max).unwrap(), Duration::from_secs(2));
        assert_eq!(
            parse_wait("1.5s", max).unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_wait("10m", max).unwrap(), max);
        assert_eq!(parse_wait("0", max).unwrap(), Duration::ZERO);
        assert_eq!(parse_wait("99999999999999999999m", max).unwrap(), max);
        for bad in [
            "soon", "-1s", "", "s", ".5s", "5.s", "1e3", "+5", "inf", "NaN", " 30s", "30 s", "30h",
        ] {
            assert_eq!(
                parse_wait(bad, max).unwrap_err().code,
                "invalid_wait",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn content_types() {
        assert!(is_json_content_type("application/json"));
        assert!(is_json_content_type("application/json; charset=utf-8"));
        assert!(is_json_content_type("application/merge-patch+json"));
        assert!(!is_json_content_type("application/x-www-form-urlencoded"));
        assert!(!is_json_content_type("text/plain"));
    }
}

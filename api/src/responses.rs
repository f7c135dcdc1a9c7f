//! The error responses many operations share, documented once: an operation's `responses(...)`
//! lists what is its own (its successes, its 400, 404 and 409, its body limit) and names the
//! sets below for the rest, so a change to what every reader or operator may meet is made in
//! one place and the document cannot list it differently per operation.

use std::collections::BTreeMap;

use utoipa::IntoResponses;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::{Ref, RefOr, Response, ResponseBuilder};

const NO_CREDENTIALS: &str = "No or bad credentials";
const STORE_BUSY: &str = "The store is busy or unavailable; retry";

/// A response whose body is the API's error shape (`ErrorBody`).
fn error_response(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
        .into()
}

fn responses(rows: &[(&str, &str)]) -> BTreeMap<String, RefOr<Response>> {
    rows.iter()
        .map(|(status, description)| (status.to_string(), error_response(description)))
        .collect()
}

/// What any read may answer besides its own: 401 and 503.
pub struct ReadErrors;

impl IntoResponses for ReadErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        responses(&[("401", NO_CREDENTIALS), ("503", STORE_BUSY)])
    }
}

/// What any operator action may answer besides its own: 401, 403 and 503.
pub struct OperatorErrors;

impl IntoResponses for OperatorErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        responses(&[
            ("401", NO_CREDENTIALS),
            ("403", "Needs an operator, or a cross-site request"),
            ("503", STORE_BUSY),
        ])
    }
}

/// What any call of the worker protocol may answer besides its own: 401, 403 and 503.
pub struct WorkerErrors;

impl IntoResponses for WorkerErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        responses(&[
            ("401", NO_CREDENTIALS),
            (
                "403",
                "Needs the worker or operator role, or a cross-site request",
            ),
            ("503", STORE_BUSY),
        ])
    }
}

/// What an operation with a JSON body may answer about the body itself, under a body limit
/// of `limit` bytes.
fn json_body_errors(limit: usize) -> BTreeMap<String, RefOr<Response>> {
    let too_large = format!("Body too large (over {})", mib(limit));
    responses(&[
        ("413", too_large.as_str()),
        (
            "408",
            "The body did not arrive within `http.request_body_timeout`",
        ),
        ("415", "Body not sent as JSON"),
    ])
}

/// `limit` bytes in MiB, as a person reads it: `1.25 MiB`, `32 MiB`.
fn mib(limit: usize) -> String {
    let mib = limit as f64 / (1024.0 * 1024.0);
    let text = format!("{mib:.2}");
    format!("{} MiB", text.trim_end_matches('0').trim_end_matches('.'))
}

/// The body errors of an operation on one job's worth of JSON ([`super::SINGLE_BODY_LIMIT`]).
pub struct SingleBodyErrors;

impl IntoResponses for SingleBodyErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        json_body_errors(super::SINGLE_BODY_LIMIT)
    }
}

/// The body errors of an operation on many jobs at once ([`super::BATCH_BODY_LIMIT`]).
pub struct BatchBodyErrors;

impl IntoResponses for BatchBodyErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        json_body_errors(super::BATCH_BODY_LIMIT)
    }
}

/// The body errors of an operation with a small body, under the server's default limit
/// ([`super::DEFAULT_BODY_LIMIT`]).
pub struct SmallBodyErrors;

impl IntoResponses for SmallBodyErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        json_body_errors(super::DEFAULT_BODY_LIMIT)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn limits_read_in_mib() {
        assert_eq!(super::mib(super::super::BATCH_BODY_LIMIT), "32 MiB");
        assert_eq!(super::mib(super::super::SINGLE_BODY_LIMIT), "1.25 MiB");
        assert_eq!(super::mib(2 * 1024 * 1024), "2 MiB");
    }
}

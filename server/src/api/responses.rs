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

/// What any operation with a JSON body may answer about the body itself (its size limit,
/// 413, differs per operation and is listed with it).
pub struct JsonBodyErrors;

impl IntoResponses for JsonBodyErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        responses(&[
            (
                "408",
                "The body did not arrive within `http.request_body_timeout`",
            ),
            ("415", "Body not sent as JSON"),
        ])
    }
}

//! Who is calling, and whether they may. The authentication middleware (shared with the
//! console) puts a `Principal` into the request extensions; these extractors read it and
//! enforce the role an endpoint needs, answering in the API's JSON error shape.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use deck_web::AuthConfig;

use super::Authenticator;
use super::error::ApiError;

/// The callers and roles of the web platform, the console's too: viewers read everything;
/// operators also enqueue and act (cancel, resurrect, queue changes); workers only claim and
/// report jobs.
pub use deck_web::auth::{Principal, Role};

/// Callers checked against `auth`'s users, as the console checks them.
pub fn authenticator(auth: &AuthConfig) -> Authenticator {
    let auth = Arc::new(auth.clone());
    Arc::new(move |header: Option<&str>| auth.authenticate(header))
}

fn principal(parts: &Parts) -> Result<Principal, ApiError> {
    parts.extensions.get::<Principal>().cloned().ok_or_else(|| {
        ApiError::unauthorized(
            "credentials required: send `Authorization: Bearer <token>` or basic auth",
        )
    })
}

/// A caller that reads (viewer or operator).
pub struct Viewer(pub Principal);

/// A caller with the operator role.
pub struct Operator(pub Principal);

/// A caller that runs jobs over the worker protocol (worker or operator).
pub struct JobRunner(pub Principal);

impl<S: Send + Sync> FromRequestParts<S> for Viewer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let p = principal(parts)?;
        if !p.role.may_read() {
            return Err(ApiError::forbidden(format!(
                "{} has the worker role: it may claim and report jobs (/workers/…), nothing else",
                p.name
            )));
        }
        Ok(Viewer(p))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let p = principal(parts)?;
        if !p.role.may_act() {
            return Err(ApiError::forbidden(format!(
                "{} has the {} role; this action needs an operator",
                p.name,
                p.role.as_str()
            )));
        }
        Ok(Operator(p))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for JobRunner {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let p = principal(parts)?;
        if !p.role.may_run_jobs() {
            return Err(ApiError::forbidden(format!(
                "{} has the viewer role; claiming and reporting jobs needs a worker (or operator)",
                p.name
            )));
        }
        Ok(JobRunner(p))
    }
}

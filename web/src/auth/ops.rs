//! Who may read the operations endpoints. `/metrics` names queues and instances, `/readyz`
//! shows database errors and lagging queues: once users are configured, each needs a viewer's
//! credentials (bearer token or basic auth, the console's users) unless its `[auth] public_…`
//! key opens it. (The OpenAPI document is an API route and follows `public_openapi` there,
//! with the API's own authentication.) `/healthz` tells nothing and
//! stays open, so liveness probes never need a secret. With no users (loopback only)
//! everything is open, as the console is.
//!
//! One layer over the whole router, keyed by exact path: the endpoints' own modules stay
//! free of auth, and the router matches paths exactly too, so no spelling slips past.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{AUTH_CHALLENGE, AuthConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpsEndpoint {
    Metrics,
    Readyz,
}

impl OpsEndpoint {
    fn for_path(path: &str) -> Option<Self> {
        match path {
            "/metrics" => Some(Self::Metrics),
            "/readyz" => Some(Self::Readyz),
            _ => None,
        }
    }

    fn key(self) -> &'static str {
        match self {
            Self::Metrics => "public_metrics",
            Self::Readyz => "public_readyz",
        }
    }

    fn is_public(self, auth: &AuthConfig) -> bool {
        auth.is_open()
            || match self {
                Self::Metrics => auth.public_metrics,
                Self::Readyz => auth.public_readyz,
            }
    }
}

/// The layer's state: the users and the `public_…` keys.
#[derive(Clone)]
pub struct OpsAccess(Arc<AuthConfig>);

impl OpsAccess {
    pub fn new(auth: &AuthConfig) -> Self {
        OpsAccess(Arc::new(auth.clone()))
    }
}

/// `axum::middleware::from_fn_with_state(OpsAccess::new(..), guard)` over the whole router.
pub async fn guard(State(access): State<OpsAccess>, req: Request, next: Next) -> Response {
    let Some(endpoint) = OpsEndpoint::for_path(req.uri().path()) else {
        return next.run(req).await;
    };
    let auth = &access.0;
    if endpoint.is_public(auth) {
        return next.run(req).await;
    }
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    // Any role that reads (a worker's credential does not).
    if auth
        .authenticate(authorization)
        .is_some_and(|i| i.role.may_read())
    {
        return next.run(req).await;
    }
    refuse(endpoint, authorization.is_some())
}

fn refuse(endpoint: OpsEndpoint, sent_credentials: bool) -> Response {
    let what = if sent_credentials {
        "the credentials were not accepted; check the token or user name and password"
    } else {
        "credentials required: send `Authorization: Bearer <token>` or basic auth of a user \
         from [auth]"
    };
    let message = format!(
        "{what} (any role may read this; or set auth.{} = true to open it to anyone)",
        endpoint.key()
    );
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::WWW_AUTHENTICATE, AUTH_CHALLENGE),
        ],
        format!("{message}\n"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_operations_paths_are_guarded() {
        assert_eq!(
            OpsEndpoint::for_path("/metrics"),
            Some(OpsEndpoint::Metrics)
        );
        assert_eq!(OpsEndpoint::for_path("/readyz"), Some(OpsEndpoint::Readyz));
        for other in [
            "/healthz",
            "/",
            "/api/v1/stats",
            "/metrics/x",
            "/openapi.json",
        ] {
            assert_eq!(OpsEndpoint::for_path(other), None, "{other}");
        }
    }
}

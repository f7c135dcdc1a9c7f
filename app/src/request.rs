//! What a component may know about the request being rendered: who asks, the query string,
//! the current URL. leptos_axum puts the request's `Parts` into context.

use axum::http::request::Parts;
use deck_web::auth::session::{Session, THEME_COOKIE, cookie};
use deck_web::auth::{Principal, Role};
use leptos::prelude::*;

/// Query-string pairs in order; empty values count as absent.
#[derive(Debug, Clone, Default)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    pub fn parse(raw: &str) -> Self {
        Query(serde_urlencoded::from_str(raw).unwrap_or_default())
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, v)| k == key && !v.trim().is_empty())
            .map(|(_, v)| v.trim())
    }

    pub fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, v)| k == key && !v.is_empty())
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

pub fn parts() -> Option<Parts> {
    use_context::<Parts>()
}

pub fn query() -> Query {
    parts()
        .and_then(|p| p.uri.query().map(Query::parse))
        .unwrap_or_default()
}

pub fn path() -> String {
    parts()
        .map(|p| p.uri.path().to_string())
        .unwrap_or_else(|| "/".into())
}

/// Path and query of this page, without the one-shot flash parameters.
pub fn current_url() -> String {
    let Some(p) = parts() else {
        return "/".into();
    };
    let q = p.uri.query().map(Query::parse).unwrap_or_default();
    let kept: Vec<(String, String)> =
        q.0.into_iter()
            .filter(|(k, _)| k != "ok" && k != "err")
            .collect();
    let path = p.uri.path().to_string();
    if kept.is_empty() {
        path
    } else {
        format!(
            "{path}?{}",
            serde_urlencoded::to_string(&kept).unwrap_or_default()
        )
    }
}

pub fn session() -> Session {
    parts()
        .and_then(|p| p.extensions.get::<Session>().cloned())
        .unwrap_or(Session {
            // Rendering outside a request (tests, fragments): read-only.
            identity: Principal {
                name: "anonymous".into(),
                role: Role::Viewer,
            },
            csrf: String::new(),
        })
}

/// The theme chosen with the switch, or `None` to follow the system's light or dark setting.
pub fn theme() -> Option<&'static str> {
    parts().and_then(|p| theme_in(&p.headers))
}

/// The theme a request's cookie chose (see [`theme`]).
pub fn theme_in(headers: &axum::http::HeaderMap) -> Option<&'static str> {
    match cookie(headers, THEME_COOKIE) {
        Some("carbon") => Some("carbon"),
        Some("blueprint") => Some("blueprint"),
        _ => None,
    }
}

/// Answer this page with 404: what the address names does not exist (an unknown job,
/// batch or schedule), so scripts and monitors are not told it does.
pub fn not_found_status() {
    if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
        res.set_status(axum::http::StatusCode::NOT_FOUND);
    }
}

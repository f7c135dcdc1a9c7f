//! Per-request identity and CSRF protection, as one axum middleware over the whole console.
//!
//! CSRF: a random token lives in a `SameSite=Strict; HttpOnly` cookie and is repeated in a
//! hidden field of every form (double submit). Every POST must carry a matching field, come
//! from an operator, and — when the browser sends `Origin` — come from this very host.
//! Checking here, before any handler runs, means no action can forget it.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{AUTH_CHALLENGE, AuthConfig, Principal, constant_time_eq};

pub const CSRF_COOKIE: &str = "deck_csrf";
pub const CSRF_FIELD: &str = "csrf";
pub const THEME_COOKIE: &str = "deck_theme";

/// Largest form body accepted (an edited payload may be up to 1 MiB, form-encoded).
const MAX_FORM_BYTES: usize = 4 * 1024 * 1024;

/// Who is asking, and the CSRF token their forms must carry. In the request extensions.
#[derive(Debug, Clone)]
pub struct Session {
    pub identity: Principal,
    pub csrf: String,
}

impl Session {
    pub fn can_act(&self) -> bool {
        self.identity.role.may_act()
    }
}

/// 128 random bits as hex: CSRF tokens, and the console's draft and run ids.
pub fn random_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn plain(status: StatusCode, message: String) -> Response {
    let body = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>The Deck</title>\
         <link rel=\"stylesheet\" href=\"/assets/deck.css\"></head><body><main class=\"page\">\
         <div class=\"flash err\">{}</div><p><a href=\"/\">Back to the overview</a></p></main></body></html>",
        escape(&message)
    );
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// Minimal HTML escaping for the few responses built outside Leptos (and the textarea
/// content Leptos would not escape, `components::layout::TextBox`).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Does the browser-reported origin belong to the host the request was sent to?
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        // Older browsers and non-browser clients send no Origin; the token still protects.
        return true;
    };
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let origin_host = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or("");
    origin_host.eq_ignore_ascii_case(host)
}

pub async fn guard(State(auth): State<Arc<AuthConfig>>, req: Request, next: Next) -> Response {
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Some(identity) = auth.authenticate(authorization) else {
        let mut res = plain(
            StatusCode::UNAUTHORIZED,
            "Sign in to use The Deck: this console needs a user name and password (or a bearer token) from deck.toml [auth].".into(),
        );
        res.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(AUTH_CHALLENGE),
        );
        return res;
    };
    if !identity.role.may_read() {
        return plain(
            StatusCode::FORBIDDEN,
            format!(
                "{} has the worker role: it may claim and report jobs over the API's worker \
                 protocol, not use the console. Sign in as a viewer or operator.",
                identity.name
            ),
        );
    }

    let existing = cookie(req.headers(), CSRF_COOKIE)
        .filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string);
    let new_cookie = existing.is_none();
    let csrf = existing.clone().unwrap_or_else(random_token);

    let req = if req.method() == Method::GET || req.method() == Method::HEAD {
        req
    } else {
        if !identity.role.may_act() {
            return plain(
                StatusCode::FORBIDDEN,
                format!(
                    "{} is a viewer: changing anything needs the operator role (deck.toml [auth]).",
                    identity.name
                ),
            );
        }
        if !same_origin(req.headers()) {
            return plain(
                StatusCode::FORBIDDEN,
                "This form was posted from another site; refused (CSRF protection).".into(),
            );
        }
        let (parts, body) = req.into_parts();
        let bytes: Bytes = match axum::body::to_bytes(body, MAX_FORM_BYTES).await {
            Ok(b) => b,
            Err(_) => {
                return plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "The form is larger than 4 MiB; payloads are limited to 1 MiB.".into(),
                );
            }
        };
        let sent = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&bytes)
            .ok()
            .and_then(|pairs| {
                pairs
                    .into_iter()
                    .find(|(k, _)| k == CSRF_FIELD)
                    .map(|(_, v)| v)
            });
        let valid = match (&existing, &sent) {
            (Some(cookie), Some(field)) => constant_time_eq(cookie.as_bytes(), field.as_bytes()),
            _ => false,
        };
        if !valid {
            return plain(
                StatusCode::FORBIDDEN,
                "The form's security token is missing or expired. Reload the page and try again."
                    .into(),
            );
        }
        Request::from_parts(parts, Body::from(bytes))
    };

    let mut req = req;
    req.extensions_mut().insert(Session {
        identity,
        csrf: csrf.clone(),
    });
    let mut res = next.run(req).await;
    if new_cookie
        && let Ok(v) = HeaderValue::from_str(&format!(
            "{CSRF_COOKIE}={csrf}; Path=/; HttpOnly; SameSite=Strict"
        ))
    {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_name() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; deck_csrf=abc; deck_theme=carbon"),
        );
        assert_eq!(cookie(&h, "deck_csrf"), Some("abc"));
        assert_eq!(cookie(&h, "deck_theme"), Some("carbon"));
        assert_eq!(cookie(&h, "nope"), None);
    }

    #[test]
    fn cross_site_origins_are_refused() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin(&h));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        assert!(same_origin(&h));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert!(!same_origin(&h));
    }

    #[test]
    fn escaping_covers_markup() {
        assert_eq!(
            escape("<a href='x'>&\""),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;"
        );
    }
}

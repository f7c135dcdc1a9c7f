//! The overview page, rendered once per telemetry snapshot for each kind of viewer.
//!
//! Everything on `/` (without a query) follows from the shared snapshot, who is asking
//! (name and role), and the theme — except two per-response secrets: the CSRF token its
//! forms carry and the nonce of its inline scripts. So a render is kept with fresh random
//! stand-ins for both (server-made, 128 bits each: no page content can contain them), and
//! each later request for the same snapshot and viewer gets that HTML with its own token
//! and a new nonce put in their place. An operator's browser and a crowd of dashboards then
//! cost a string copy per request instead of a page render; the HTML is exactly what a
//! render would give (the tests compare them).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::Role;
use crate::live::OverviewFrame;
use crate::session::{self, Session, THEME_COOKIE};
use crate::state::{Console, random_token};

/// Viewers kept per snapshot; more distinct users than this in one tick just render.
const MAX_VIEWERS: usize = 64;
/// A rendered overview larger than this is served but not kept.
const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Viewer {
    name: String,
    role: Role,
    carbon: bool,
}

struct Rendered {
    /// The snapshot it was rendered from (compared by identity).
    frame: Arc<OverviewFrame>,
    headers: HeaderMap,
    html: String,
    csrf_stand_in: String,
    nonce_stand_in: String,
}

#[derive(Clone)]
pub struct OverviewCache {
    console: Console,
    pages: Arc<Mutex<HashMap<Viewer, Arc<Rendered>>>>,
}

impl OverviewCache {
    pub fn new(console: Console) -> Self {
        OverviewCache {
            console,
            pages: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn kept(&self, viewer: &Viewer, frame: &Arc<OverviewFrame>) -> Option<Arc<Rendered>> {
        let pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        pages
            .get(viewer)
            .filter(|r| Arc::ptr_eq(&r.frame, frame))
            .cloned()
    }

    fn keep(&self, viewer: Viewer, rendered: Rendered) {
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        pages.retain(|_, r| Arc::ptr_eq(&r.frame, &rendered.frame));
        if pages.len() < MAX_VIEWERS {
            pages.insert(viewer, Arc::new(rendered));
        }
    }
}

/// Middleware on the console's pages: answers `GET /` from the kept render when it can.
pub async fn serve(State(cache): State<OverviewCache>, req: Request, next: Next) -> Response {
    if req.method() != Method::GET || req.uri().path() != "/" || req.uri().query().is_some() {
        return next.run(req).await;
    }
    let Some(session) = req.extensions().get::<Session>().cloned() else {
        return next.run(req).await;
    };
    // The frame the page would show; a failing read renders (and shows) the error.
    let Ok(frame) = cache.console.overview().await else {
        return next.run(req).await;
    };
    let viewer = Viewer {
        name: session.identity.name.clone(),
        role: session.identity.role,
        carbon: session::cookie(req.headers(), THEME_COOKIE) == Some("carbon"),
    };
    if let Some(rendered) = cache.kept(&viewer, &frame) {
        return respond(&rendered, &session.csrf);
    }

    // Render with a stand-in token, so the kept HTML holds no caller's secret.
    let csrf_stand_in = random_token();
    let mut req = req;
    req.extensions_mut().insert(Session {
        identity: session.identity.clone(),
        csrf: csrf_stand_in.clone(),
    });
    let response = next.run(req).await;
    let nonce_stand_in = response
        .headers()
        .get(header::CONTENT_SECURITY_POLICY)
        .and_then(|v| v.to_str().ok())
        .and_then(nonce_of)
        .map(str::to_string);
    let (parts, body) = response.into_parts();
    let (Some(nonce_stand_in), StatusCode::OK) = (nonce_stand_in, parts.status) else {
        return Response::from_parts(parts, body);
    };
    let html = match axum::body::to_bytes(body, MAX_PAGE_BYTES).await {
        Ok(bytes) => match String::from_utf8(bytes.to_vec()) {
            Ok(html) => html,
            Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        },
        Err(e) => {
            tracing::warn!(error = %e, "overview page could not be read back for the cache");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let mut headers = parts.headers;
    headers.remove(header::CONTENT_LENGTH);
    let rendered = Rendered {
        frame,
        headers,
        html,
        csrf_stand_in,
        nonce_stand_in,
    };
    let answer = respond(&rendered, &session.csrf);
    cache.keep(viewer, rendered);
    answer
}

/// The kept page with this caller's CSRF token and a nonce of its own.
fn respond(rendered: &Rendered, csrf: &str) -> Response {
    let nonce = random_token();
    let html = rendered
        .html
        .replace(&rendered.csrf_stand_in, csrf)
        .replace(&rendered.nonce_stand_in, &nonce);
    let mut response = Response::new(Body::from(html));
    *response.headers_mut() = rendered.headers.clone();
    if let Ok(policy) = HeaderValue::from_str(&crate::security_headers::page_policy(&nonce)) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

/// The nonce a page's policy admits: `'nonce-…'` in its `script-src`.
fn nonce_of(policy: &str) -> Option<&str> {
    let start = policy.find("'nonce-")? + "'nonce-".len();
    let len = policy[start..].find('\'')?;
    Some(&policy[start..start + len]).filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use axum::Router;
    use axum::routing::get;
    use deck_engine::StoreOptions;
    use tower::ServiceExt;

    use super::*;
    use crate::auth::Identity;
    use crate::state::{ConsoleOptions, StoreBackend};

    #[test]
    fn the_nonce_is_read_from_the_policy() {
        let policy = crate::security_headers::page_policy("abc123");
        assert_eq!(nonce_of(&policy), Some("abc123"));
        assert_eq!(nonce_of("script-src 'self'"), None);
        assert_eq!(nonce_of("script-src 'nonce-'"), None);
    }

    /// A stand-in for the rendered overview: shows the caller's token and a fresh nonce,
    /// as the real page's forms and inline scripts do, and counts its renders.
    async fn page(renders: Arc<AtomicUsize>, req: Request) -> Response {
        let n = renders.fetch_add(1, Ordering::SeqCst) + 1;
        let csrf = req
            .extensions()
            .get::<Session>()
            .map(|s| s.csrf.clone())
            .unwrap_or_default();
        let nonce = format!("nonce{n}x");
        let mut res = Response::new(Body::from(format!(
            "<form><input name=\"csrf\" value=\"{csrf}\"></form><script nonce=\"{nonce}\"></script>"
        )));
        res.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_str(&crate::security_headers::page_policy(&nonce)).unwrap(),
        );
        res
    }

    async fn fetch(router: &Router, name: &str, csrf: &str) -> (String, String) {
        let mut req = Request::get("/").body(Body::empty()).unwrap();
        req.extensions_mut().insert(Session {
            identity: Identity {
                name: name.into(),
                role: Role::Operator,
            },
            csrf: csrf.into(),
        });
        let res = router.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let policy = res.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .to_string();
        let nonce = nonce_of(&policy).unwrap().to_string();
        let body = axum::body::to_bytes(res.into_body(), 1 << 20)
            .await
            .unwrap();
        (String::from_utf8(body.to_vec()).unwrap(), nonce)
    }

    #[tokio::test]
    async fn one_render_serves_every_caller_with_their_own_token_and_nonce() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("deck.db").display());
        let store = deck_engine::open_store(&url, &StoreOptions::default())
            .await
            .unwrap();
        // One snapshot for the whole test: no tick may pass between the requests.
        let options = ConsoleOptions {
            tick: Duration::from_secs(3600),
            ..ConsoleOptions::default()
        };
        let console = Console::new(StoreBackend(store), options);
        let renders = Arc::new(AtomicUsize::new(0));
        let router = Router::new()
            .route(
                "/",
                get({
                    let renders = renders.clone();
                    move |req: Request| page(renders.clone(), req)
                }),
            )
            .layer(axum::middleware::from_fn_with_state(
                OverviewCache::new(console),
                serve,
            ));

        let (first, first_nonce) = fetch(&router, "ada", "a".repeat(32).as_str()).await;
        let (second, second_nonce) = fetch(&router, "ada", "b".repeat(32).as_str()).await;
        assert_eq!(
            renders.load(Ordering::SeqCst),
            1,
            "the second page is the kept render"
        );
        assert!(
            first.contains(&format!("value=\"{}\"", "a".repeat(32))),
            "{first}"
        );
        assert!(
            second.contains(&format!("value=\"{}\"", "b".repeat(32))),
            "{second}"
        );
        assert!(
            !second.contains(&"a".repeat(32)),
            "no other caller's token: {second}"
        );
        assert_ne!(
            first_nonce, second_nonce,
            "every response has its own nonce"
        );
        assert!(
            first.contains(&format!("nonce=\"{first_nonce}\"")),
            "{first}"
        );
        assert!(
            second.contains(&format!("nonce=\"{second_nonce}\"")),
            "{second}"
        );

        // Another viewer is rendered for; the kept page never crosses users.
        fetch(&router, "bob", "c".repeat(32).as_str()).await;
        assert_eq!(renders.load(Ordering::SeqCst), 2);
    }
}

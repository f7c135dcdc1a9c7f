//! Console pages rendered once per telemetry snapshot for each kind of viewer: the overview
//! (`/`) and the queues page (`/queues`, with any query).
//!
//! Such a page follows from what it was rendered from (its *basis*: the shared snapshot, and
//! for the queues page the queue settings read committed for this request and the per-queue
//! charts), the query, who is asking (name and role) and the theme — except two
//! per-response secrets: the CSRF token its forms carry and the nonce of its inline
//! scripts. So a render is kept with fresh random stand-ins for both (server-made, 128 bits
//! each: no page content can contain them), and each later request whose basis is the same
//! gets that HTML with its own token and a new nonce put in their place. The basis is read
//! here and handed to the page in the request's extensions, so the kept HTML is exactly
//! what it was rendered from. An operator's browser and a crowd of dashboards then cost a
//! string copy per request (and, for `/queues`, one committed read of the settings)
//! instead of a page render.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use deck_web::auth::Role;
use deck_web::auth::session::{Session, random_token};

use crate::live::OverviewFrame;
use crate::pages::queues::QueuesData;
use crate::request::Query;
use crate::state::Console;
use crate::telemetry_view::Telemetry;

/// Pages kept per snapshot (viewers × queries); beyond that, requests just render.
const MAX_PAGES: usize = 64;
/// A rendered page larger than this is served but not kept.
const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;
/// Queries longer than this are rendered, not kept (they would only fill the map).
const MAX_QUERY_BYTES: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Viewer {
    name: String,
    role: Role,
    /// The chosen theme, `None` following the system's: each renders differently.
    theme: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PageKey {
    /// Path and query as requested.
    page: String,
    viewer: Viewer,
}

/// What a kept page was rendered from.
#[derive(Clone)]
enum Basis {
    Overview(Arc<OverviewFrame>),
    Queues(Arc<QueuesData>),
}

impl Basis {
    fn snapshot(&self) -> &Arc<Telemetry> {
        match self {
            Basis::Overview(frame) => &frame.snapshot,
            Basis::Queues(data) => &data.telemetry,
        }
    }

    /// Whether a page rendered from `self` is the page `other` would render.
    fn same_as(&self, other: &Basis) -> bool {
        match (self, other) {
            (Basis::Overview(a), Basis::Overview(b)) => Arc::ptr_eq(a, b),
            (Basis::Queues(a), Basis::Queues(b)) => a.same_as(b),
            _ => false,
        }
    }

    /// Handed to the page, which renders from it instead of reading again.
    fn hand_to(&self, req: &mut Request) {
        match self {
            Basis::Overview(frame) => {
                req.extensions_mut().insert(Arc::clone(frame));
            }
            Basis::Queues(data) => {
                req.extensions_mut().insert(Arc::clone(data));
            }
        }
    }
}

struct Rendered {
    basis: Basis,
    headers: HeaderMap,
    page: Template,
}

/// A kept page cut at its secrets once, so a response is one pass of copies.
struct Template {
    html: String,
    /// Where the stand-ins were, in order: byte range and which secret goes there.
    holes: Vec<(std::ops::Range<usize>, Secret)>,
}

#[derive(Clone, Copy)]
enum Secret {
    Csrf,
    Nonce,
}

impl Template {
    fn cut(html: String, csrf_stand_in: &str, nonce_stand_in: &str) -> Template {
        let mut holes: Vec<_> = html
            .match_indices(csrf_stand_in)
            .map(|(at, s)| (at..at + s.len(), Secret::Csrf))
            .chain(
                html.match_indices(nonce_stand_in)
                    .map(|(at, s)| (at..at + s.len(), Secret::Nonce)),
            )
            .collect();
        holes.sort_by_key(|(range, _)| range.start);
        Template { html, holes }
    }

    fn fill(&self, csrf: &str, nonce: &str) -> String {
        let mut out = String::with_capacity(self.html.len() + 64);
        let mut from = 0;
        for (range, secret) in &self.holes {
            out.push_str(&self.html[from..range.start]);
            out.push_str(match secret {
                Secret::Csrf => csrf,
                Secret::Nonce => nonce,
            });
            from = range.end;
        }
        out.push_str(&self.html[from..]);
        out
    }
}

#[derive(Clone)]
pub struct PageCache {
    console: Console,
    pages: Arc<Mutex<HashMap<PageKey, Arc<Rendered>>>>,
}

impl PageCache {
    pub fn new(console: Console) -> Self {
        PageCache {
            console,
            pages: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn kept(&self, key: &PageKey, basis: &Basis) -> Option<Arc<Rendered>> {
        let pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        pages.get(key).filter(|r| r.basis.same_as(basis)).cloned()
    }

    fn keep(&self, key: PageKey, rendered: Rendered) {
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        // Pages of older snapshots can never be served again.
        let snapshot = Arc::clone(rendered.basis.snapshot());
        pages.retain(|_, r| Arc::ptr_eq(r.basis.snapshot(), &snapshot));
        if pages.len() < MAX_PAGES || pages.contains_key(&key) {
            pages.insert(key, Arc::new(rendered));
        }
    }

    /// What the page at this path and query renders from, read now; `None` for pages that
    /// are not kept, or when the read fails (the page then renders and shows the error).
    async fn basis(&self, path: &str, query: Option<&str>) -> Option<Basis> {
        match (path, query) {
            ("/", None) => self.console.overview().await.ok().map(Basis::Overview),
            ("/queues", query) if query.is_none_or(|q| q.len() <= MAX_QUERY_BYTES) => {
                let query = query.map(Query::parse).unwrap_or_default();
                QueuesData::read(&self.console, &query)
                    .await
                    .ok()
                    .map(|data| Basis::Queues(Arc::new(data)))
            }
            _ => None,
        }
    }
}

/// Middleware on the console's pages: answers the pages it keeps from a kept render when
/// their basis is unchanged.
pub async fn serve(State(cache): State<PageCache>, mut req: Request, next: Next) -> Response {
    if req.method() != Method::GET {
        return next.run(req).await;
    }
    let Some(session) = req.extensions().get::<Session>().cloned() else {
        return next.run(req).await;
    };
    let Some(basis) = cache.basis(req.uri().path(), req.uri().query()).await else {
        return next.run(req).await;
    };
    let key = PageKey {
        page: req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
        viewer: Viewer {
            name: session.identity.name.clone(),
            role: session.identity.role,
            theme: crate::request::theme_in(req.headers()),
        },
    };
    if let Some(rendered) = cache.kept(&key, &basis) {
        return respond(&rendered, &session.csrf);
    }

    // Render from this basis with a stand-in token, so the kept HTML holds no caller's
    // secret.
    basis.hand_to(&mut req);
    let csrf_stand_in = random_token();
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
            tracing::warn!(error = %e, "a console page could not be read back for the cache");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let mut headers = parts.headers;
    headers.remove(header::CONTENT_LENGTH);
    let rendered = Rendered {
        basis,
        headers,
        page: Template::cut(html, &csrf_stand_in, &nonce_stand_in),
    };
    let answer = respond(&rendered, &session.csrf);
    cache.keep(key, rendered);
    answer
}

/// The kept page with this caller's CSRF token and a nonce of its own.
fn respond(rendered: &Rendered, csrf: &str) -> Response {
    let nonce = random_token();
    let html = rendered.page.fill(csrf, &nonce);
    let mut response = Response::new(Body::from(html));
    *response.headers_mut() = rendered.headers.clone();
    if let Ok(policy) = HeaderValue::from_str(&deck_web::security_headers::page_policy(&nonce)) {
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
    use crate::state::{ConsoleOptions, StoreBackend};
    use deck_web::auth::Principal;

    #[test]
    fn a_template_puts_each_secret_where_its_stand_in_was() {
        let page = Template::cut("<a c=\"CS\"><s n=\"NO\"></s>CS|NO|".into(), "CS", "NO");
        assert_eq!(
            page.fill("token", "nonce"),
            "<a c=\"token\"><s n=\"nonce\"></s>token|nonce|"
        );
        let bare = Template::cut("nothing secret".into(), "CS", "NO");
        assert_eq!(bare.fill("token", "nonce"), "nothing secret");
    }

    #[test]
    fn the_nonce_is_read_from_the_policy() {
        let policy = deck_web::security_headers::page_policy("abc123");
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
            HeaderValue::from_str(&deck_web::security_headers::page_policy(&nonce)).unwrap(),
        );
        res
    }

    async fn fetch(router: &Router, name: &str, csrf: &str) -> (String, String) {
        let mut req = Request::get("/").body(Body::empty()).unwrap();
        req.extensions_mut().insert(Session {
            identity: Principal {
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
        let console = Console::new(StoreBackend::new(store), options);
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
                PageCache::new(console),
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

//! The console as the integration tests drive it: a real router over a real SQLite store in
//! a temporary directory, requests shaped the way a browser sends them, and the few store
//! steps (claiming work as a worker) the pages need to have something to show.

#![allow(dead_code)] // each test file uses a different part of this module

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::request::Builder;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use base64::Engine as _;
use deck_app::{AuthConfig, Console, ConsoleOptions, Role, StoreBackend, UserConfig};
use deck_engine::{ClaimRequest, JobId, Operations, Store, StoreOptions};
use tower::ServiceExt;

/// The CSRF token the tests send as both cookie and form field, as a browser that loaded
/// the console would.
pub const CSRF: &str = "0123456789abcdef0123456789abcdef";

/// A fresh SQLite store; it lives as long as the returned directory.
pub async fn sqlite_store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("deck.db").display());
    let store = deck_engine::open_store(&url, &StoreOptions::default())
        .await
        .unwrap();
    (dir, store)
}

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub store: Arc<dyn Store>,
    pub ops: Operations,
    pub router: Router,
}

/// The console's router over a fresh store, guarded by `auth`.
pub async fn fixture_with(auth: AuthConfig, options: ConsoleOptions) -> Fixture {
    let (dir, store) = sqlite_store().await;
    let console = Console::new(StoreBackend::new(store.clone()), options);
    Fixture {
        _dir: dir,
        ops: Operations::over_store(store.clone()),
        store,
        router: deck_app::console_router(console, auth),
    }
}

/// The console's router over a fresh store, open to all, with the default options.
pub async fn fixture() -> Fixture {
    fixture_with(AuthConfig::default(), ConsoleOptions::default()).await
}

/// Users who sign in with a password, each as `(name, role, password)`.
pub fn password_users(users: &[(&str, Role, &str)]) -> AuthConfig {
    AuthConfig {
        users: users
            .iter()
            .map(|(name, role, password)| UserConfig {
                name: (*name).into(),
                role: *role,
                password: Some((*password).into()),
                token: None,
            })
            .collect(),
        ..AuthConfig::default()
    }
}

/// One operator, who signs in with a bearer `token`.
pub fn token_operator(name: impl Into<String>, token: &str) -> AuthConfig {
    AuthConfig {
        users: vec![UserConfig {
            name: name.into(),
            role: Role::Operator,
            password: None,
            token: Some(token.into()),
        }],
        ..AuthConfig::default()
    }
}

/// The `Authorization` value a browser sends for HTTP Basic sign-in.
pub fn basic(user: &str, password: &str) -> String {
    let pair = format!("{user}:{password}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// A request for a page (it asks for HTML), signed in with `auth` when given.
pub fn html_request(method: Method, path: &str, auth: Option<&str>) -> Builder {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(header::ACCEPT, "text/html");
    match auth {
        Some(a) => req.header(header::AUTHORIZATION, a),
        None => req,
    }
}

/// A console form as a browser posts it. With a `token`, it goes as the CSRF cookie and
/// first form field, as the console's own forms send it; without, neither.
pub fn form_post(path: &str, token: Option<&str>, form: &str, auth: Option<&str>) -> Request<Body> {
    let req = html_request(Method::POST, path, auth)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::REFERER, "http://127.0.0.1/");
    let (req, body) = match token {
        Some(t) => (
            req.header(header::COOKIE, format!("deck_csrf={t}")),
            format!("csrf={t}&{form}"),
        ),
        None => (req, form.to_string()),
    };
    req.body(Body::from(body)).unwrap()
}

/// What the router answered, read to the end.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    /// The first value of header `name`, or empty.
    pub fn header(&self, name: header::HeaderName) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    }

    /// Where a redirect points, or empty.
    pub fn location(&self) -> String {
        self.header(header::LOCATION)
    }
}

/// Send `req` through `router` and read the whole answer.
pub async fn send(router: &Router, req: Request<Body>) -> Answer {
    let res = router.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let body = axum::body::to_bytes(res.into_body(), 16 << 20)
        .await
        .unwrap();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// GET the page at `path`, signed in with `auth` when given.
pub async fn get_page(router: &Router, path: &str, auth: Option<&str>) -> Answer {
    let req = html_request(Method::GET, path, auth);
    send(router, req.body(Body::empty()).unwrap()).await
}

/// The status and HTML of the page at `path`, signed in with `auth` when given.
pub async fn get_as(router: &Router, path: &str, auth: Option<&str>) -> (StatusCode, String) {
    let page = get_page(router, path, auth).await;
    (page.status, page.body)
}

/// The status and HTML of the page at `path` for whoever needs no sign-in.
pub async fn get(router: &Router, path: &str) -> (StatusCode, String) {
    get_as(router, path, None).await
}

/// Post a console `form` with the [`CSRF`] token; the status and the redirect's target.
pub async fn post_as(
    router: &Router,
    path: &str,
    form: &[(&str, &str)],
    auth: Option<&str>,
) -> (StatusCode, String) {
    let encoded = serde_urlencoded::to_string(form).unwrap();
    let answer = send(router, form_post(path, Some(CSRF), &encoded, auth)).await;
    (answer.status, answer.location())
}

/// Claim what `queue` holds as `worker` and start it: the ids now processing.
pub async fn start_running(store: &Arc<dyn Store>, worker: &str, queue: &str) -> Vec<JobId> {
    let claimed = store
        .claim_batch(ClaimRequest {
            worker_id: worker.into(),
            limit: 100,
            start: 0,
            queues: Some(vec![queue.into()]),
            types: None,
        })
        .await
        .unwrap();
    let ids: Vec<JobId> = claimed.iter().map(|j| j.id).collect();
    store.mark_processing(worker, &ids).await.unwrap();
    ids
}

/// The newest entries of the audit log, newest first.
pub async fn audit(store: &Arc<dyn Store>) -> Vec<deck_engine::AuditEntry> {
    store
        .list_audit(&Default::default(), None, 20)
        .await
        .unwrap()
}

/// The newest entry of the audit log.
pub async fn last_audit(store: &Arc<dyn Store>) -> deck_engine::AuditEntry {
    audit(store).await.remove(0)
}

/// The texts of the elements `selector` picks.
pub fn texts(html: &str, selector: &str) -> Vec<String> {
    let doc = scraper::Html::parse_document(html);
    let sel = scraper::Selector::parse(selector).unwrap();
    doc.select(&sel)
        .map(|e| e.text().collect::<String>().trim().to_string())
        .collect()
}

/// The texts of the elements `css` picks inside those `scope` picks (a table row, say).
pub fn texts_in(html: &str, scope: &str, css: &str) -> Vec<String> {
    texts(html, &format!("{scope} {css}"))
}

/// Load the list at `path` (it must answer 200) and check that its empty-state note `note`
/// names each of `hows`, the ways to fill the list; the page.
pub async fn assert_empty_list_says(
    router: &Router,
    path: &str,
    note: &str,
    hows: &[&str],
) -> String {
    let (status, page) = get(router, path).await;
    assert_eq!(status, StatusCode::OK, "{path}");
    let empty = texts(&page, note).join(" ");
    for how in hows {
        assert!(empty.contains(how), "{how}: {empty}");
    }
    page
}

//! Live refresh of the pages past the overview (job lists, a job, queues, schedules,
//! batches, instances): once per tick the stream renders the viewer's own page through the same router
//! a reload would, and pushes it only when it changed. `live.js` swaps in the page's
//! `data-live-page` regions the operator is not working in. Viewers of the same page share
//! one render per tick, so a tick costs one read per page being watched, however many
//! browsers watch it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use deck_web::TickCache;
use deck_web::auth::session::Session;
use futures::Stream;
use serde::Deserialize;
use tower::ServiceExt;

/// The most a page may weigh to be pushed (a list page of 200 rows is well under this).
const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;
/// Distinct (page, viewer) renders kept for sharing; beyond that each stream renders alone.
const MAX_SHARED: usize = 64;
/// Pages past the overview are reads of the database, not of the shared snapshot: at most
/// one a second per watched page.
const MIN_TICK: Duration = Duration::from_secs(1);

/// Which pages have live regions: everything else is refused, so the stream cannot be
/// pointed at an action or at a page that only renders once.
pub fn is_live_page(path: &str) -> bool {
    let path = path.split('?').next().unwrap_or_default();
    let one_segment = |rest: &str| !rest.is_empty() && !rest.contains('/');
    path == "/jobs"
        || path == "/queues"
        || path == "/schedules"
        || path == "/batches"
        || path == "/instances"
        || path.strip_prefix("/jobs/").is_some_and(one_segment)
        || path.strip_prefix("/schedules/").is_some_and(one_segment)
        || path.strip_prefix("/batches/").is_some_and(one_segment)
}

#[derive(Clone)]
pub struct LivePages {
    /// The console's page router (inside the session guard: each request carries the
    /// viewer's session already).
    pages: Router,
    tick: Duration,
    shared: Arc<Mutex<HashMap<RenderKey, Arc<PageRender>>>>,
}

/// One page as one viewer sees it, rendered at most once a tick.
type PageRender = TickCache<String, String>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RenderKey {
    page: String,
    viewer: String,
    cookies: String,
}

impl LivePages {
    pub fn new(pages: Router, tick: Duration) -> Self {
        LivePages {
            pages,
            tick: tick.max(MIN_TICK),
            shared: Arc::default(),
        }
    }

    fn cache_for(&self, key: RenderKey) -> Arc<PageRender> {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if shared.len() >= MAX_SHARED && !shared.contains_key(&key) {
            // Entries only save work; dropping them all costs one render each.
            shared.retain(|_, cache| Arc::strong_count(cache) > 1);
        }
        shared
            .entry(key)
            .or_insert_with(|| Arc::new(TickCache::new(self.tick / 2)))
            .clone()
    }
}

#[derive(Debug, Deserialize)]
pub struct LiveQuery {
    /// The page as the browser shows it: path and query.
    path: String,
}

/// The page as a reload would render it, with the per-response nonce taken out (it differs
/// on every render and would make every tick look like a change).
async fn render(
    pages: Router,
    path: String,
    session: Session,
    headers: HeaderMap,
) -> Result<String, String> {
    let mut req = Request::get(&path)
        .header(header::ACCEPT, "text/html")
        .body(Body::empty())
        .map_err(|e| e.to_string())?;
    if let Some(cookie) = headers.get(header::COOKIE) {
        req.headers_mut().insert(header::COOKIE, cookie.clone());
    }
    req.extensions_mut().insert(session);
    let Ok(res) = pages.oneshot(req).await;
    if !res.status().is_success() {
        return Err(format!("the page answered {}", res.status()));
    }
    let nonce = res
        .headers()
        .get(header::CONTENT_SECURITY_POLICY)
        .and_then(|v| v.to_str().ok())
        .and_then(|csp| csp.split("'nonce-").nth(1))
        .and_then(|rest| rest.split('\'').next())
        .map(str::to_string);
    let body = axum::body::to_bytes(res.into_body(), MAX_PAGE_BYTES)
        .await
        .map_err(|e| e.to_string())?;
    let html = String::from_utf8_lossy(&body).into_owned();
    Ok(match nonce {
        Some(n) if !n.is_empty() => html.replace(&n, ""),
        _ => html,
    })
}

pub async fn stream(
    State(live): State<LivePages>,
    Query(q): Query<LiveQuery>,
    headers: HeaderMap,
    req: Request,
) -> Response {
    if !q.path.starts_with('/') || !is_live_page(&q.path) {
        return (
            StatusCode::BAD_REQUEST,
            "live refresh covers /jobs, /jobs/{id}, /queues, /schedules, /schedules/{name}, \
             /batches, /batches/{id} and /instances; the overview has /live",
        )
            .into_response();
    }
    let Some(session) = req.extensions().get::<Session>().cloned() else {
        return (StatusCode::UNAUTHORIZED, "sign in first").into_response();
    };
    let key = RenderKey {
        page: q.path.clone(),
        viewer: format!(
            "{}:{}",
            session.identity.name,
            session.identity.role.as_str()
        ),
        cookies: headers
            .get(header::COOKIE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string(),
    };
    let cache = live.cache_for(key);
    let tick = live.tick;
    let state = Watch {
        live,
        path: q.path,
        session,
        headers,
        cache,
        last: None,
        failing: false,
        interval: {
            let mut i = tokio::time::interval(tick);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            i
        },
    };
    let events = futures::stream::unfold(state, |mut w| async move {
        loop {
            w.interval.tick().await;
            let rendered = w
                .cache
                .get(|| {
                    render(
                        w.live.pages.clone(),
                        w.path.clone(),
                        w.session.clone(),
                        w.headers.clone(),
                    )
                })
                .await;
            match rendered {
                Ok(html) => {
                    w.failing = false;
                    if w.last
                        .as_ref()
                        .is_some_and(|l| Arc::ptr_eq(l, &html) || **l == *html)
                    {
                        continue;
                    }
                    let event = Event::default().event("page").data(html.as_str());
                    w.last = Some(html);
                    return Some((Ok::<_, Infallible>(event), w));
                }
                // A job purged or a page that fails: the browser keeps what it shows and is
                // told once; a reload shows the reason.
                Err(e) => {
                    if w.failing {
                        continue;
                    }
                    tracing::debug!(error = %e, page = %w.path, "live page render failed");
                    w.failing = true;
                    return Some((Ok(Event::default().event("gone").data(e)), w));
                }
            }
        }
    });
    sse(events).into_response()
}

/// One browser's watch of one page.
struct Watch {
    live: LivePages,
    path: String,
    session: Session,
    headers: HeaderMap,
    cache: Arc<PageRender>,
    /// What this browser was sent last.
    last: Option<Arc<String>>,
    /// The last render failed (and the browser was told).
    failing: bool,
    interval: tokio::time::Interval,
}

fn sse(
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + Send + 'static> {
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pages_with_live_regions_are_streamed() {
        for ok in [
            "/jobs",
            "/jobs?source=dlq&queue=a",
            "/queues",
            "/queues?q=x",
            "/jobs/0193",
            "/schedules",
            "/schedules/nightly%2Freport?tz=UTC",
            "/batches",
            "/batches?before=0193a5c2-0000-7000-8000-000000000000",
            "/batches/0193a5c2-0000-7000-8000-000000000000",
            "/instances",
        ] {
            assert!(is_live_page(ok), "{ok}");
        }
        for refused in [
            "/",
            "/fn/job/cancel",
            "/jobs/",
            "/jobs/a/b",
            "/settings",
            "/audit",
            "/dlq/bulk",
            "/schedules/",
            "/schedules/a/b",
            "/batches/",
            "/batches/a/b",
        ] {
            assert!(!is_live_page(refused), "{refused}");
        }
    }
}

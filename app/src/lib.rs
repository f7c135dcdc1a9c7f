//! The Deck console: server-rendered Leptos pages (no WebAssembly, no hydration), actions as
//! server functions answering plain form posts, and live panels pushed over SSE.
//!
//! Mount it with [`console_router`]; it brings its own assets, and its door from the web
//! platform (`deck_web`): sign-in, CSRF protection and the browser security headers.

pub mod actions;
pub mod assets;
pub mod components;
pub mod diff;
pub mod engine_backend;
pub mod format;
pub mod list_params;
pub mod live;
pub mod live_pages;
pub mod page_cache;
pub mod pages;
pub mod request;
pub mod schedule_form;
pub mod state;
pub mod telemetry_view;

use std::sync::Arc;

use axum::Router;
use axum::extract::RawQuery;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use deck_web::auth::session;
use deck_web::security_headers;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};
use leptos_meta::{MetaTags, Title, provide_meta_context};
use leptos_router::components::{Route, Router as LeptosRouter, Routes};
use leptos_router::{SsrMode, path};

pub use deck_web::auth::{AuthConfig, Role, UserConfig};
pub use engine_backend::EngineBackend;
pub use state::{Console, ConsoleBackend, ConsoleOptions, StoreBackend};
pub use telemetry_view::{
    BreakerState, BreakerView, ConsoleEvent, EventLevel, RuntimeView, Telemetry,
};

use pages::admin::{AuditPage, InstancesPage, SettingsPage};
use pages::batches::BatchesPage;
use pages::batches::detail::BatchPage;
use pages::bulk::{BulkPage, BulkRunPage};
use pages::job::JobPage;
use pages::jobs::JobsPage;
use pages::overview::OverviewPage;
use pages::queues::QueuesPage;
use pages::schedules::SchedulesPage;
use pages::schedules::detail::SchedulePage;

/// Where the server functions (every action) live.
pub const FN_PREFIX: &str = "/fn";

/// The HTML document around every page. No hydration scripts: the pages are complete as
/// served; `live.js` only swaps in fresh server-rendered panels.
pub fn shell(_options: LeptosOptions) -> impl IntoView {
    let theme = request::theme();
    provide_page_policy();
    view! {
        <!DOCTYPE html>
        <html lang="en" data-theme=theme>
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="color-scheme" content="light dark"/>
                <link rel="stylesheet" href="/assets/deck.css"/>
                <link rel="icon" href="/assets/favicon.svg" type="image/svg+xml"/>
                <script src="/assets/live.js" defer></script>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// Called while rendering a page: give this response the policy that admits its nonce.
fn provide_page_policy() {
    let (Some(res), Some(nonce)) = (
        use_context::<leptos_axum::ResponseOptions>(),
        leptos::nonce::use_nonce(),
    ) else {
        return;
    };
    if let Ok(value) = HeaderValue::from_str(&security_headers::page_policy(&nonce)) {
        res.insert_header(header::CONTENT_SECURITY_POLICY, value);
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Title text="The Deck"/>
        <LeptosRouter>
            <Routes fallback=|| view! { <NotFound/> }>
                <Route path=path!("/") view=OverviewPage ssr=SsrMode::Async/>
                <Route path=path!("/queues") view=QueuesPage ssr=SsrMode::Async/>
                <Route path=path!("/schedules") view=SchedulesPage ssr=SsrMode::Async/>
                <Route path=path!("/schedules/:name") view=SchedulePage ssr=SsrMode::Async/>
                <Route path=path!("/batches") view=BatchesPage ssr=SsrMode::Async/>
                <Route path=path!("/batches/:id") view=BatchPage ssr=SsrMode::Async/>
                <Route path=path!("/jobs") view=JobsPage ssr=SsrMode::Async/>
                <Route path=path!("/jobs/:id") view=JobPage ssr=SsrMode::Async/>
                <Route path=path!("/dlq/bulk") view=BulkPage ssr=SsrMode::Async/>
                <Route path=path!("/dlq/bulk/:run") view=BulkRunPage ssr=SsrMode::Async/>
                <Route path=path!("/bulk") view=BulkPage ssr=SsrMode::Async/>
                <Route path=path!("/bulk/:run") view=BulkRunPage ssr=SsrMode::Async/>
                <Route path=path!("/settings") view=SettingsPage ssr=SsrMode::Async/>
                <Route path=path!("/instances") view=InstancesPage ssr=SsrMode::Async/>
                <Route path=path!("/audit") view=AuditPage ssr=SsrMode::Async/>
            </Routes>
        </LeptosRouter>
    }
}

#[component]
fn NotFound() -> impl IntoView {
    request::not_found_status();
    view! {
        <components::layout::Layout title="Not found".into()>
            <div class="empty">
                <p>"There is no page at " <code>{request::path()}</code> "."</p>
                <p><a href="/">"Back to the overview"</a></p>
            </div>
        </components::layout::Layout>
    }
}

/// The theme switch: a plain link that sets a long-lived cookie and goes back. The query is
/// read leniently: whatever it holds, the answer is a redirect to a page on this site.
async fn set_theme(RawQuery(raw): RawQuery) -> Response {
    let q = request::Query::parse(raw.as_deref().unwrap_or_default());
    let theme = if q.get("set") == Some("carbon") {
        "carbon"
    } else {
        "blueprint"
    };
    let back = actions::safe_back(q.get("back").unwrap_or("/"));
    let mut res = Redirect::to(&back).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{}={theme}; Path=/; Max-Age=31536000; SameSite=Lax",
        session::THEME_COOKIE
    )) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

/// The whole console as an axum router: pages, actions, live stream, assets — behind auth
/// and CSRF protection, every response with the browser security headers
/// ([`security_headers`]). Mount it at the root of the server's router.
pub fn console_router(console: Console, auth: AuthConfig) -> Router {
    let options = LeptosOptions::builder()
        .output_name("deck")
        .site_root("")
        .build();
    let routes = generate_route_list(App);
    let context = console.clone();
    let pages: Router = Router::new()
        .leptos_routes_with_context(
            &options,
            routes,
            move || provide_context(context.clone()),
            {
                let options = options.clone();
                move || shell(options.clone())
            },
        )
        .with_state(options.clone())
        // Any other path: the console's own not-found page (the router's fallback view,
        // answered 404), not an empty body. `/api/v1/…` keeps the API's JSON error: its
        // router has a catch-all route of its own.
        .fallback(leptos_axum::render_app_to_stream_with_context(
            {
                let context = console.clone();
                move || provide_context(context.clone())
            },
            move || shell(options.clone()),
        ))
        .layer(axum::middleware::from_fn_with_state(
            page_cache::PageCache::new(console.clone()),
            page_cache::serve,
        ));

    let live_pages = live_pages::LivePages::new(pages.clone(), console.options().tick);
    let frames = Arc::new(tokio::sync::watch::channel(None).0);
    live::spawn_ticker(console, &frames);
    let live_routes = Router::new()
        .route("/live", get(live::stream))
        .with_state(live::LiveState { frames })
        .merge(
            Router::new()
                .route("/live/page", get(live_pages::stream))
                .with_state(live_pages),
        );

    Router::new()
        .merge(pages)
        .merge(live_routes)
        .route("/theme", get(set_theme))
        .route("/assets/{*path}", get(assets::serve))
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(auth),
            session::guard,
        ))
        .layer(security_headers::layer())
}

#[cfg(test)]
mod render_tests;

//! The HTTP surface of `deck serve`: one router assembled from the parts' routers.
//! Each part mounts itself with one line here.

use axum::Router;
use axum::response::Html;
use axum::routing::get;

use crate::state::AppState;

pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(crate::health::router(state.clone()))
        .merge(crate::metrics::router(state.clone()))
        .merge(crate::api::router(state.clone()))
        // Console: replaces the placeholder below.
        .merge(placeholder(state))
}

/// Until the console is mounted: a page that says what is running and where to look.
fn placeholder(state: AppState) -> Router {
    Router::new()
        .route("/", get(placeholder_page))
        .with_state(state)
}

async fn placeholder_page(
    axum::extract::State(state): axum::extract::State<AppState>,
) -> Html<String> {
    let snapshot = state.engine.snapshot();
    Html(format!(
        "<!doctype html><meta charset=utf-8><title>The Deck</title>\
         <h1>The Deck</h1><p>Engine instance <code>{}</code> on {} is running \
         ({} of {} workers busy){}.</p>\
         <ul><li><a href=\"/healthz\">/healthz</a></li><li><a href=\"/readyz\">/readyz</a></li>\
         <li><a href=\"/metrics\">/metrics</a></li></ul>",
        escape(&snapshot.instance_id),
        state.store().backend(),
        snapshot.workers_busy,
        snapshot.workers_total,
        if state.settings.demo {
            ", with the demo workload"
        } else {
            ""
        },
    ))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

//! The HTTP surface of `deck serve`: one router assembled from the parts' routers.
//! Each part mounts itself with one line here.

use axum::Router;

use crate::state::AppState;

pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(crate::health::router(state.clone()))
        .merge(crate::metrics::router(state.clone()))
        .merge(crate::api::router(state.clone()))
        .merge(crate::auth::console(&state))
        // Last, so outermost: every response, whichever layer made it, carries the headers.
        .layer(deck_app::security_headers::layer())
}

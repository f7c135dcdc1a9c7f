//! The HTTP surface of `deck serve`: one router assembled from the parts' routers.
//! Each part mounts itself with one line here.

use axum::Router;

use crate::state::AppState;

pub fn router(state: AppState) -> Router {
    let routes = Router::new()
        .merge(crate::health::router(state.clone()))
        .merge(crate::metrics::router(state.clone()))
        .merge(crate::api::router(state.clone()))
        .merge(crate::auth::console(&state));
    crate::request_limits::apply(routes, &state.settings.http)
        .layer(axum::middleware::from_fn_with_state(
            crate::ops_auth::OpsAccess::new(&state.settings.auth),
            crate::ops_auth::guard,
        ))
        // Last, so outermost: every response, whichever layer made it, carries the headers.
        .layer(deck_app::security_headers::layer())
}

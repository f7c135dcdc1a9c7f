//! Mounting the console on the server's router, and the API's door to the same users.

use std::sync::Arc;

use deck_web::AuthConfig;

use crate::state::AppState;

/// The console (pages, actions, live stream, assets) over this process's engine. It is
/// the state's console, so pages and the ops endpoints share one telemetry snapshot.
pub fn console(state: &AppState) -> axum::Router {
    deck_app::console_router(state.console.clone(), state.settings.auth.clone())
}

/// The JSON API authenticates with the same users and roles as the console.
pub fn api_authenticator(auth: &AuthConfig) -> crate::api::Authenticator {
    let auth = Arc::new(auth.clone());
    Arc::new(move |header: Option<&str>| auth.authenticate(header))
}

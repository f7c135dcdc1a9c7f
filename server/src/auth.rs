//! The console's access rules at startup, and mounting it on the server's router.

use std::net::SocketAddr;

use anyhow::bail;
use std::sync::Arc;

use deck_app::AuthConfig;

use crate::state::AppState;

/// Refuse to start with unusable users, or with an open console off loopback.
pub fn check(auth: &AuthConfig, addr: SocketAddr) -> anyhow::Result<()> {
    if let Err(problems) = auth.validate() {
        bail!("invalid [auth] configuration:\n{problems}");
    }
    if let Err(message) = auth.check_bind(addr) {
        bail!("{message}");
    }
    if !auth.is_open() {
        let public: Vec<&str> = [
            (auth.public_metrics, "/metrics"),
            (auth.public_readyz, "/readyz"),
            (auth.public_openapi, "/api/v1/openapi.json"),
        ]
        .into_iter()
        .filter_map(|(open, path)| open.then_some(path))
        .collect();
        tracing::info!(
            event = "console.auth",
            users = auth.users.len(),
            public = ?public,
            "console, API and operations endpoints require sign-in (open to anyone: /healthz{})",
            public.iter().map(|p| format!(", {p}")).collect::<String>()
        );
    }
    Ok(())
}

/// The console (pages, actions, live stream, assets) over this process's engine. It is
/// the state's console, so pages and the ops endpoints share one telemetry snapshot.
pub fn console(state: &AppState) -> axum::Router {
    deck_app::console_router(state.console.clone(), state.settings.auth.clone())
}

/// The JSON API authenticates with the same users and roles as the console.
pub fn api_authenticator(auth: &AuthConfig) -> crate::api::Authenticator {
    let auth = Arc::new(auth.clone());
    Arc::new(move |header: Option<&str>| {
        auth.authenticate(header)
            .map(|identity| crate::api::principal::Principal {
                name: identity.name,
                role: identity.role,
            })
    })
}

//! What every HTTP handler can reach: the engine (and through it the store), the
//! configuration this process runs with, and the telemetry snapshot they all share.

use std::sync::Arc;
use std::time::Instant;

use deck_app::{Console, ConsoleOptions, EngineBackend};
use deck_engine::{Engine, StoreReads};
use deck_web::SharedTelemetry;

use crate::config::Settings;
use crate::health::DatabaseCheck;

#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub settings: Arc<Settings>,
    /// When this process started serving (uptime in `/metrics`).
    pub started: Instant,
    /// The one telemetry snapshot per tick that the console's pages, `/metrics`, `/readyz`
    /// and `/api/v1/stats` all read.
    pub telemetry: Arc<SharedTelemetry>,
    /// The console, reading `telemetry`.
    pub console: Console,
    /// `/readyz`'s database ping, shared by concurrent probes.
    pub database_check: Arc<DatabaseCheck>,
    /// Progress tokens of HTTP-handled attempts in flight, shared with their handlers.
    pub progress: deck_http_handlers::ProgressTokens,
}

impl AppState {
    pub fn new(engine: Engine, settings: Settings) -> Self {
        Self::with_progress(engine, settings, Default::default())
    }

    /// With the progress tokens the HTTP handlers of `engine` issue.
    pub fn with_progress(
        engine: Engine,
        settings: Settings,
        progress: deck_http_handlers::ProgressTokens,
    ) -> Self {
        let options = ConsoleOptions::default();
        let telemetry = Arc::new(SharedTelemetry::of_engine(&engine, options.tick));
        AppState {
            progress,
            console: Console::sharing(
                EngineBackend::new(engine.clone()),
                options,
                Arc::clone(&telemetry),
            ),
            telemetry,
            database_check: Arc::new(DatabaseCheck::default()),
            engine,
            settings: Arc::new(settings),
            started: Instant::now(),
        }
    }

    /// The store's read side (health, metrics); writes go through the engine's operations.
    pub fn store(&self) -> &Arc<dyn StoreReads> {
        self.engine.store()
    }
}

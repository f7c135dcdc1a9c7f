//! What every HTTP handler can reach: the engine (and through it the store) and the
//! configuration this process runs with.

use std::sync::Arc;
use std::time::Instant;

use deck_engine::{Engine, Store};

use crate::config::Settings;

#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub settings: Arc<Settings>,
    /// When this process started serving (uptime in `/metrics`).
    pub started: Instant,
}

impl AppState {
    pub fn new(engine: Engine, settings: Settings) -> Self {
        AppState {
            engine,
            settings: Arc::new(settings),
            started: Instant::now(),
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        self.engine.store()
    }
}

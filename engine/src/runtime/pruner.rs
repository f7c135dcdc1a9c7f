//! The pruner: every `interval`, delete archive, DLQ and metric rows older than the retention
//! in the persisted settings (read each time, so a change in the console applies everywhere),
//! in bounded batches (`maintenance::prune`). `Engine::prune_now` runs the same sweep on demand.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::{StoreError, StoreResult};
use crate::events::EventBus;
use crate::maintenance;
use crate::model::PruneReport;
use crate::store::Store;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunerConfig {
    pub interval: Duration,
    /// Rows deleted per transaction.
    pub batch_size: u32,
}

impl Default for PrunerConfig {
    fn default() -> Self {
        PrunerConfig {
            interval: Duration::from_secs(3600),
            batch_size: maintenance::PRUNE_BATCH_ROWS,
        }
    }
}

pub struct Pruner {
    store: Arc<dyn Store>,
    config: PrunerConfig,
    events: Option<EventBus>,
}

impl Pruner {
    pub fn new(store: Arc<dyn Store>, config: PrunerConfig) -> Self {
        Pruner {
            store,
            config,
            events: None,
        }
    }

    pub(crate) fn with_events(mut self, events: EventBus) -> Self {
        self.events = Some(events);
        self
    }

    /// One sweep with the retention currently saved in the settings.
    pub async fn run_once(&self) -> StoreResult<PruneReport> {
        maintenance::prune_saved(&*self.store, self.config.batch_size, self.events.as_ref()).await
    }

    pub async fn run(self, shutdown: CancellationToken) {
        super::periodic::run(&self, &shutdown).await
    }
}

impl super::periodic::Periodic for Pruner {
    type Report = PruneReport;
    type Error = StoreError;
    const NAME: &'static str = "pruner";
    const FAILED: &'static str = "retention sweep failed";

    fn next_wait(&self) -> Duration {
        self.config.interval
    }

    fn tick(&self) -> impl Future<Output = StoreResult<PruneReport>> + Send {
        self.run_once()
    }
}

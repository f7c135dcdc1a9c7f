//! The rescuer: every `interval`, one rescue sweep (`maintenance::rescue`) — stale claims back to pending,
//! expired heartbeats to the DLQ as `Zombie`, the work of vanished instances rescued at once,
//! pending jobs past `expires_at` to the DLQ as `Expired`.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::{StoreError, StoreResult};
use crate::events::EventBus;
use crate::maintenance;
use crate::model::{RescuePolicy, RescueReport};
use crate::store::Store;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RescuerConfig {
    pub interval: Duration,
    pub policy: RescuePolicy,
}

impl Default for RescuerConfig {
    fn default() -> Self {
        RescuerConfig {
            interval: Duration::from_secs(60),
            policy: RescuePolicy::default(),
        }
    }
}

pub struct Rescuer {
    store: Arc<dyn Store>,
    config: RescuerConfig,
    events: Option<EventBus>,
}

impl Rescuer {
    pub fn new(store: Arc<dyn Store>, config: RescuerConfig) -> Self {
        Rescuer {
            store,
            config,
            events: None,
        }
    }

    pub(crate) fn with_events(mut self, events: EventBus) -> Self {
        self.events = Some(events);
        self
    }

    /// One sweep.
    pub async fn run_once(&self) -> StoreResult<RescueReport> {
        maintenance::rescue_announced(&*self.store, &self.config.policy, self.events.as_ref()).await
    }

    pub async fn run(self, shutdown: CancellationToken) {
        super::periodic::run(&self, &shutdown).await
    }
}

impl super::periodic::Periodic for Rescuer {
    type Report = RescueReport;
    type Error = StoreError;
    const NAME: &'static str = "rescuer";
    const FAILED: &'static str = "rescue sweep failed";

    fn next_wait(&self) -> Duration {
        self.config.interval
    }

    fn tick(&self) -> impl Future<Output = StoreResult<RescueReport>> + Send {
        self.run_once()
    }
}

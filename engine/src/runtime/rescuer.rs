//! The rescuer: every `interval`, one `Store::rescue` sweep — stale claims back to pending,
//! expired heartbeats to the DLQ as `Zombie`, the work of vanished instances rescued at once,
//! pending jobs past `expires_at` to the DLQ as `Expired`.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::{StoreError, StoreResult};
use crate::model::{RescueKind, RescuePolicy, RescueReport, RescueStep};
use crate::runtime::events::{EngineEvent, EventBus, EventKind};
use crate::runtime::steps::until_short;
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
        let report = rescue(&*self.store, &self.config.policy).await?;
        let moved = report.released + report.zombies + report.expired;
        if moved > 0 || report.dead_instances > 0 {
            tracing::info!(
                released = report.released,
                zombies = report.zombies,
                expired = report.expired,
                dead_instances = report.dead_instances,
                "rescue sweep moved jobs"
            );
            if let Some(events) = &self.events {
                events.send_with(|| {
                    EngineEvent::new(
                        EventKind::Rescued,
                        format!(
                            "rescue: {} stale claims back to pending, {} zombies and {} \
                             expired jobs to the DLQ, {} dead instances removed",
                            report.released, report.zombies, report.expired, report.dead_instances
                        ),
                    )
                });
            }
        }
        Ok(report)
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

/// Rows one rescue step moves at most: short transactions, so a mass rescue (an instance
/// that held thousands of jobs) never holds the writer or row locks for long.
const STEP_ROWS: u32 = 500;

/// One rescue sweep: for each kind, steps of `STEP_ROWS` until one comes back short.
pub async fn rescue(store: &dyn Store, policy: &RescuePolicy) -> StoreResult<RescueReport> {
    let mut report = RescueReport::default();
    for kind in RescueKind::ALL {
        let moved = until_short(STEP_ROWS, || {
            store.rescue_step(RescueStep {
                kind,
                policy,
                limit: STEP_ROWS,
            })
        })
        .await?;
        match kind {
            RescueKind::StaleClaims => report.released = moved,
            RescueKind::Zombies => report.zombies = moved,
            RescueKind::Expired => report.expired = moved,
            RescueKind::DeadInstances => report.dead_instances = moved,
        }
    }
    Ok(report)
}

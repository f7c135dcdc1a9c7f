//! The rescuer and the pruner: one service shape for the two sweeps made of store steps
//! (`maintenance`), each run on its own interval with the handles it needs (the store, its
//! settings, the event stream) and nothing of the rest of the runtime.
//!
//! - [`Rescuer`]: every `interval`, one rescue sweep — stale claims back to pending, expired
//!   heartbeats to the DLQ as `Zombie`, the work of vanished instances rescued at once,
//!   pending jobs past `expires_at` to the DLQ as `Expired`.
//! - [`Pruner`]: every `interval`, delete archive, DLQ, metric and history rows older than
//!   the retention in the persisted settings (read each time, so a change in the console
//!   applies everywhere), in bounded steps. `Engine::prune_now` runs the same sweep on demand.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::{StoreError, StoreResult};
use crate::events::EventBus;
use crate::maintenance;
use crate::model::{PruneReport, RescuePolicy, RescueReport};
use crate::store::Store;

/// What one kind of sweep is: its settings, its report, and the sweep itself.
pub trait Sweep: Send + Sync + 'static {
    type Config: Send + Sync;
    type Report: Debug + Send;
    /// The service's name: its span and its log lines.
    const NAME: &'static str;
    /// Logged with the error when a sweep fails.
    const FAILED: &'static str;

    fn interval(config: &Self::Config) -> Duration;

    /// One sweep, logged and announced on `events` when it changed anything.
    fn sweep<'a>(
        store: &'a dyn Store,
        config: &'a Self::Config,
        events: Option<&'a EventBus>,
    ) -> impl Future<Output = StoreResult<Self::Report>> + Send + 'a;
}

/// A sweep run on its interval.
pub struct Sweeper<S: Sweep> {
    store: Arc<dyn Store>,
    config: S::Config,
    events: Option<EventBus>,
}

impl<S: Sweep> Sweeper<S> {
    pub fn new(store: Arc<dyn Store>, config: S::Config) -> Self {
        Sweeper {
            store,
            config,
            events: None,
        }
    }

    pub(crate) fn with_events(mut self, events: EventBus) -> Self {
        self.events = Some(events);
        self
    }

    /// One sweep now.
    pub async fn run_once(&self) -> StoreResult<S::Report> {
        S::sweep(&*self.store, &self.config, self.events.as_ref()).await
    }

    pub async fn run(self, shutdown: CancellationToken) {
        super::periodic::run(&self, &shutdown).await
    }
}

impl<S: Sweep> super::periodic::Periodic for Sweeper<S> {
    type Report = S::Report;
    type Error = StoreError;
    const NAME: &'static str = S::NAME;
    const FAILED: &'static str = S::FAILED;

    fn next_wait(&self) -> Duration {
        S::interval(&self.config)
    }

    fn tick(&self) -> impl Future<Output = StoreResult<S::Report>> + Send {
        self.run_once()
    }
}

/// The rescue sweep ([`maintenance::rescue`]).
pub struct Rescue;

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

impl Sweep for Rescue {
    type Config = RescuerConfig;
    type Report = RescueReport;
    const NAME: &'static str = "rescuer";
    const FAILED: &'static str = "rescue sweep failed";

    fn interval(config: &RescuerConfig) -> Duration {
        config.interval
    }

    fn sweep<'a>(
        store: &'a dyn Store,
        config: &'a RescuerConfig,
        events: Option<&'a EventBus>,
    ) -> impl Future<Output = StoreResult<RescueReport>> + Send + 'a {
        maintenance::rescue_announced(store, &config.policy, events)
    }
}

pub type Rescuer = Sweeper<Rescue>;

/// The retention sweep ([`maintenance::prune`]) with the retention saved in the settings.
pub struct Retention;

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

impl Sweep for Retention {
    type Config = PrunerConfig;
    type Report = PruneReport;
    const NAME: &'static str = "pruner";
    const FAILED: &'static str = "retention sweep failed";

    fn interval(config: &PrunerConfig) -> Duration {
        config.interval
    }

    fn sweep<'a>(
        store: &'a dyn Store,
        config: &'a PrunerConfig,
        events: Option<&'a EventBus>,
    ) -> impl Future<Output = StoreResult<PruneReport>> + Send + 'a {
        maintenance::prune_saved(store, config.batch_size, events)
    }
}

pub type Pruner = Sweeper<Retention>;

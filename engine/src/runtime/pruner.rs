//! The pruner: every `interval`, delete archive, DLQ and metric rows older than the retention
//! in the persisted settings (read each time, so a change in the console applies everywhere),
//! in bounded batches. `Engine::prune_now` runs the same sweep on demand.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::{StoreError, StoreResult};
use crate::model::{PruneReport, PruneStep, PruneTarget, RetentionPolicy};
use crate::runtime::events::{EngineEvent, EventBus, EventKind};
use crate::runtime::steps::until_short;
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
            batch_size: 1_000,
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
        let settings = self.store.load_settings().await?;
        let policy = settings.retention.policy(self.config.batch_size);
        let report = prune(&*self.store, &policy).await?;
        if report.total() > 0 {
            tracing::info!(
                archive = report.archive,
                dlq = report.dlq,
                metric_buckets = report.metric_buckets,
                audit = report.audit,
                unique_keys = report.unique_keys,
                schedule_runs = report.schedule_runs,
                batches = report.batches,
                "retention sweep deleted old rows"
            );
        }
        if let Some(events) = &self.events {
            events.send_with(|| {
                EngineEvent::new(
                    EventKind::Pruned,
                    format!(
                        "retention: {} archived, {} dead-letter jobs, {} metric buckets, {} \
                         audit entries, {} lapsed unique keys, {} schedule history rows, {} finished \
                         batches deleted",
                        report.archive,
                        report.dlq,
                        report.metric_buckets,
                        report.audit,
                        report.unique_keys,
                        report.schedule_runs,
                        report.batches
                    ),
                )
            });
        }
        Ok(report)
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

/// Delete what `policy` no longer keeps: for each target, steps of `policy.batch_size`
/// rows (one short transaction each) until a step comes back short.
pub async fn prune(store: &dyn Store, policy: &RetentionPolicy) -> StoreResult<PruneReport> {
    let limit = policy.batch_size.max(1);
    let mut report = PruneReport::default();
    for target in PruneTarget::ALL {
        let deleted = until_short(limit, || {
            store.prune_step(PruneStep {
                target,
                older_than: target.kept_for(policy),
                limit,
            })
        })
        .await?;
        match target {
            PruneTarget::Archive => report.archive = deleted,
            PruneTarget::Dlq => report.dlq = deleted,
            PruneTarget::MetricBuckets => report.metric_buckets = deleted,
            PruneTarget::Audit => report.audit = deleted,
            PruneTarget::UniqueKeys => report.unique_keys = deleted,
            PruneTarget::ScheduleRuns => report.schedule_runs = deleted,
            PruneTarget::Batches => report.batches = deleted,
        }
    }
    Ok(report)
}

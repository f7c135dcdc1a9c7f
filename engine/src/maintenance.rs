//! Sweeps made of store steps — rescue and retention — as loops above the store: each step
//! one short transaction of at most `limit` rows, repeated until a step comes back short.
//! The runtime's rescuer and pruner run them on their intervals; the operations layer runs
//! retention on demand (`Operations::prune_now`); the conformance suite drives rescue. Below
//! both the runtime and `ops`, so neither has to import the other for them.

use std::future::Future;

use crate::error::StoreResult;
use crate::events::{EngineEvent, EventBus, EventKind};
use crate::model::{
    PruneReport, PruneStep, PruneTarget, RescueKind, RescuePolicy, RescueReport, RescueStep,
    RetentionPolicy,
};
use crate::store::Store;

/// Steps per kind in one sweep, so one sweep cannot run for ever while rows keep arriving
/// faster than it moves them (the next sweep carries on).
pub(crate) const MAX_STEPS: usize = 200;

/// Run `step` until it moves fewer than `limit` rows, at most `MAX_STEPS` times; returns
/// how many rows moved in all.
pub(crate) async fn until_short<F, Fut>(limit: u32, mut step: F) -> StoreResult<u64>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<u64>>,
{
    let mut moved = 0;
    for _ in 0..MAX_STEPS {
        let n = step().await?;
        moved += n;
        if n < u64::from(limit) {
            break;
        }
    }
    Ok(moved)
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

/// Rows one retention step deletes by default (`PrunerConfig`, `Operations::prune_now`).
pub const PRUNE_BATCH_ROWS: u32 = 1_000;

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

/// One retention sweep with the retention saved in the settings (read each time, so a
/// change in the console applies everywhere), logged and announced on `events`.
pub(crate) async fn prune_saved(
    store: &dyn Store,
    batch_size: u32,
    events: Option<&EventBus>,
) -> StoreResult<PruneReport> {
    let settings = store.load_settings().await?;
    let report = prune(store, &settings.retention.policy(batch_size)).await?;
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
    if let Some(events) = events {
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

/// One rescue sweep, logged and announced on `events` when it moved anything.
pub(crate) async fn rescue_announced(
    store: &dyn Store,
    policy: &RescuePolicy,
    events: Option<&EventBus>,
) -> StoreResult<RescueReport> {
    let report = rescue(store, policy).await?;
    let moved = report.released + report.zombies + report.expired;
    if moved > 0 || report.dead_instances > 0 {
        tracing::info!(
            released = report.released,
            zombies = report.zombies,
            expired = report.expired,
            dead_instances = report.dead_instances,
            "rescue sweep moved jobs"
        );
        if let Some(events) = events {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn steps_until_one_comes_back_short_or_the_cap() {
        let mut left = 25u64;
        let moved = until_short(10, || {
            let n = left.min(10);
            left -= n;
            async move { Ok(n) }
        })
        .await
        .unwrap();
        assert_eq!(moved, 25);

        let mut calls = 0;
        let moved = until_short(1, || {
            calls += 1;
            async { Ok(1) }
        })
        .await
        .unwrap();
        assert_eq!((moved, calls), (MAX_STEPS as u64, MAX_STEPS));
    }
}

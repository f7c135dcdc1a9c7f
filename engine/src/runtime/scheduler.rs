//! The scheduler: every `interval` (1 s by default), on every instance that runs workers,
//! enqueue the due occurrences of every enabled schedule. Instances do not coordinate: each
//! computes the same occurrences (`schedule::plan`) and the store's occurrence key lets the
//! first write of each one win, in the transaction that enqueues its job.
//!
//! Occurrences are decided by this process's clock; instances whose clocks disagree by a
//! second still enqueue each occurrence once (the key), only a little earlier or later.

use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use crate::error::{StoreError, StoreResult};
use crate::model::{JobId, Timestamp};
use crate::ops::Operations;
use crate::schedule::{
    self, FireOutcome, Occurrence, OverlapPolicy, Schedule, ScheduleFire, Timing,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    pub interval: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            interval: Duration::from_secs(1),
        }
    }
}

/// What one scheduler run did, over every schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedulerReport {
    pub enqueued: u64,
    /// Handled by another instance first.
    pub already_handled: u64,
    pub skipped_overlap: u64,
    /// Passed over by a misfire policy.
    pub skipped_misfire: u64,
}

pub struct Scheduler {
    ops: Operations,
    config: SchedulerConfig,
}

impl Scheduler {
    pub fn new(ops: Operations, config: SchedulerConfig) -> Self {
        Scheduler { ops, config }
    }

    /// One pass over every enabled schedule. A schedule whose fire fails is logged and
    /// tried again next run; the others go on.
    pub async fn run_once(&self) -> StoreResult<SchedulerReport> {
        self.run_at(Utc::now()).await
    }

    /// One pass as if the clock said `now` (the conformance suite simulates an outage with
    /// it, without waiting for one).
    pub(crate) async fn run_at(&self, now: Timestamp) -> StoreResult<SchedulerReport> {
        let schedules = self.ops.store().list_schedules().await?;
        let mut report = SchedulerReport::default();
        for s in schedules.iter().filter(|s| s.enabled) {
            match self.fire_due(s, now, &mut report).await {
                Ok(()) | Err(StoreError::ScheduleNotFound(_)) => {}
                Err(e) => tracing::warn!(
                    schedule = s.name(),
                    error = %e,
                    "could not enqueue a schedule's occurrences; trying again next run"
                ),
            }
        }
        Ok(report)
    }

    async fn fire_due(
        &self,
        s: &Schedule,
        now: Timestamp,
        report: &mut SchedulerReport,
    ) -> StoreResult<()> {
        let def = &s.definition;
        let timing = match Timing::parse(&def.spec, &def.time_zone) {
            Ok(t) => t,
            // Stored by another version that knows more expressions or zones: skip it here.
            Err(e) => {
                tracing::debug!(schedule = s.name(), error = %e, "schedule not understood here");
                return Ok(());
            }
        };
        let plan = schedule::plan(&timing, def.misfire, s.handled_through, now);
        if plan.run.is_empty() && plan.handled_through == s.handled_through {
            return Ok(());
        }
        if plan.skipped > 0 {
            tracing::info!(
                schedule = s.name(),
                skipped = plan.skipped,
                running = plan.run.len(),
                policy = ?def.misfire,
                "missed occurrences of a schedule (downtime or pause); the misfire policy \
                 decides which still run"
            );
        }
        report.skipped_misfire += plan.skipped as u64;
        let occurrences = plan
            .run
            .iter()
            .map(|at| Occurrence {
                scheduled_at: *at,
                job: schedule::job_for(def, *at, now),
                job_id: JobId::new(),
            })
            .collect();
        let fire = ScheduleFire {
            schedule: def.name.clone(),
            occurrences,
            handled_through: Some(plan.handled_through),
            skip_while_active: def.overlap == OverlapPolicy::SkipWhileActive,
            manual: false,
        };
        for outcome in self.ops.fire(def, fire).await? {
            match outcome {
                FireOutcome::Enqueued(_) => report.enqueued += 1,
                FireOutcome::AlreadyHandled => report.already_handled += 1,
                FireOutcome::SkippedOverlap => report.skipped_overlap += 1,
            }
        }
        Ok(())
    }

    pub async fn run(self, shutdown: CancellationToken) {
        super::periodic::run(&self, &shutdown).await
    }
}

impl super::periodic::Periodic for Scheduler {
    type Report = SchedulerReport;
    type Error = StoreError;
    const NAME: &'static str = "scheduler";
    const FAILED: &'static str = "scheduler run failed";

    fn next_wait(&self) -> Duration {
        self.config.interval
    }

    fn tick(&self) -> impl Future<Output = StoreResult<SchedulerReport>> + Send {
        self.run_once()
    }
}

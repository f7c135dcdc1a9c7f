//! Job heartbeats: one `heartbeat` call per instance every 8–12 s (jittered, so many
//! instances do not beat in lockstep) covering every job it runs. The answer carries operator
//! cancels from any process (the job's token fires; it ends in the DLQ as `Cancelled`) and
//! jobs this worker no longer owns (abandoned: their token fires and nothing is committed).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::error::{StoreError, StoreResult};
use crate::events::{EngineEvent, EventBus, EventKind};
use crate::model::HeartbeatReport;
use crate::running::{CancelReason, RunningJobs};
use crate::runtime::periodic::{self, Periodic};
use crate::store::Store;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobHeartbeatConfig {
    /// Mean interval; each wait is drawn from ±20 % of it.
    pub(crate) interval: Duration,
    /// After this long without a successful heartbeat, running jobs are stopped and dead-lettered
    /// as `HeartbeatFailure` (the rescuer would call them zombies soon anyway).
    pub(crate) give_up_after: Duration,
}

impl Default for JobHeartbeatConfig {
    fn default() -> Self {
        JobHeartbeatConfig {
            interval: Duration::from_secs(10),
            give_up_after: Duration::from_secs(480),
        }
    }
}

/// What the job heartbeat works with: the store, whose jobs it beats for, and the events it
/// announces cancels on.
pub(crate) struct JobHeartbeat {
    store: Arc<dyn Store>,
    instance_id: String,
    running: Arc<RunningJobs>,
    events: EventBus,
    config: JobHeartbeatConfig,
    last_ok: Mutex<Instant>,
}

impl JobHeartbeat {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        instance_id: String,
        running: Arc<RunningJobs>,
        events: EventBus,
        config: JobHeartbeatConfig,
    ) -> Self {
        JobHeartbeat {
            store,
            instance_id,
            running,
            events,
            config,
            last_ok: Mutex::new(Instant::now()),
        }
    }

    /// Beat for every running job and act on the answer.
    pub(crate) async fn run_once(&self) -> StoreResult<HeartbeatReport> {
        let ids = self.running.ids();
        if ids.is_empty() {
            return Ok(HeartbeatReport::default());
        }
        let report = self.store.heartbeat(&self.instance_id, &ids).await?;
        for id in &report.cancel_requested {
            if let Some(run) = self.running.get(*id)
                && run.cancel(CancelReason::Operator)
            {
                tracing::info!(job = %id, "operator cancel picked up by the heartbeat");
                let j = &run.job;
                self.events.send_with(|| {
                    EngineEvent::new(EventKind::Cancelled, "stopping: cancelled by an operator")
                        .job(j.id, &j.queue, &j.job_type)
                });
            }
        }
        for id in &report.lost {
            // A handler that has returned is not lost: its outcome may have committed
            // between reading the ids and the beat (the completer then finds out itself
            // if the job really was taken away).
            if let Some(run) = self.running.get(*id)
                && !run.handler_done()
                && run.cancel(CancelReason::Lost)
            {
                tracing::warn!(job = %id, "job no longer owned by this worker (rescued, \
                    cancelled or purged); abandoning it");
            }
        }
        Ok(report)
    }

    pub(crate) async fn run(self, shutdown: CancellationToken) {
        periodic::run(&self, &shutdown).await
    }
}

impl Periodic for JobHeartbeat {
    type Report = HeartbeatReport;
    type Error = StoreError;
    const NAME: &'static str = "job_heartbeat";
    const FAILED: &'static str = "job heartbeat failed";

    fn next_wait(&self) -> Duration {
        periodic::jittered(self.config.interval, 0.2)
    }

    fn tick(&self) -> impl Future<Output = StoreResult<HeartbeatReport>> + Send {
        self.run_once()
    }

    /// A store out of reach for too long: stop the running jobs before other instances take
    /// them for zombies.
    fn after(&self, result: &StoreResult<HeartbeatReport>) {
        let mut last_ok = self.last_ok.lock().unwrap_or_else(|p| p.into_inner());
        if result.is_ok() {
            *last_ok = Instant::now();
        } else if last_ok.elapsed() >= self.config.give_up_after {
            for run in self.running.all() {
                run.cancel(CancelReason::HeartbeatFailure);
            }
        }
    }
}

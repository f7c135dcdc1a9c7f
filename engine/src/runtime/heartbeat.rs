//! Job heartbeats: one `heartbeat` call per instance every 8–12 s (jittered, so many
//! instances do not beat in lockstep) covering every job it runs. The answer carries operator
//! cancels from any process (the job's token fires; it ends in the DLQ as `Cancelled`) and
//! jobs this worker no longer owns (abandoned: their token fires and nothing is committed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::StoreResult;
use crate::model::HeartbeatReport;
use crate::runtime::Shared;
use crate::runtime::events::{EngineEvent, EventKind};
use crate::runtime::running::CancelReason;

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

impl JobHeartbeatConfig {
    pub(crate) fn jittered(&self, rng: &mut impl Rng) -> Duration {
        self.interval.mul_f64(rng.random_range(0.8..=1.2))
    }
}

pub(crate) struct JobHeartbeat {
    shared: Arc<Shared>,
    config: JobHeartbeatConfig,
}

impl JobHeartbeat {
    pub(crate) fn new(shared: Arc<Shared>, config: JobHeartbeatConfig) -> Self {
        JobHeartbeat { shared, config }
    }

    /// Beat for every running job and act on the answer.
    pub(crate) async fn run_once(&self) -> StoreResult<HeartbeatReport> {
        let ids = self.shared.running.ids();
        if ids.is_empty() {
            return Ok(HeartbeatReport::default());
        }
        let report = self
            .shared
            .store
            .heartbeat(&self.shared.instance_id, &ids)
            .await?;
        for id in &report.cancel_requested {
            if let Some(run) = self.shared.running.get(*id)
                && run.cancel(CancelReason::Operator)
            {
                tracing::info!(job = %id, "operator cancel picked up by the heartbeat");
                let j = &run.job;
                self.shared.events.send_with(|| {
                    EngineEvent::new(EventKind::Cancelled, "stopping: cancelled by an operator")
                        .job(j.id, &j.queue, &j.job_type)
                });
            }
        }
        for id in &report.lost {
            // A handler that has returned is not lost: its outcome may have committed
            // between reading the ids and the beat (the completer then finds out itself
            // if the job really was taken away).
            if let Some(run) = self.shared.running.get(*id)
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
        let span = tracing::info_span!("job_heartbeat", instance = %self.shared.instance_id);
        async move {
            let mut last_ok = Instant::now();
            loop {
                let wait = self.config.jittered(&mut rand::rng());
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.cancelled() => return,
                }
                match self.run_once().await {
                    Ok(_) => last_ok = Instant::now(),
                    Err(e) => {
                        tracing::warn!(error = %e, "job heartbeat failed");
                        if last_ok.elapsed() >= self.config.give_up_after {
                            for run in self.shared.running.all() {
                                run.cancel(CancelReason::HeartbeatFailure);
                            }
                        }
                    }
                }
            }
        }
        .instrument(span)
        .await
    }
}

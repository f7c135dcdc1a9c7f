//! The execution-timeout watchdog: one loop scanning the running jobs, instead of one timer
//! per job. An overdue job's token fires; the worker drops the handler's future and records a
//! failed attempt (retried; the DLQ reason is `Timeout` when it was the last attempt).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::running::RunningJobs;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatchdogConfig {
    /// How often deadlines are checked: a timeout fires at most this late.
    pub(crate) interval: Duration,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        WatchdogConfig {
            interval: Duration::from_secs(1),
        }
    }
}

pub(crate) struct TimeoutWatchdog {
    running: Arc<RunningJobs>,
    config: WatchdogConfig,
}

impl TimeoutWatchdog {
    pub(crate) fn new(running: Arc<RunningJobs>, config: WatchdogConfig) -> Self {
        TimeoutWatchdog { running, config }
    }

    /// Cancel every overdue job; returns how many.
    pub(crate) fn run_once(&self, now: Instant) -> usize {
        let overdue = self.running.cancel_overdue(now);
        for run in &overdue {
            tracing::info!(job = %run.job.id, queue = %run.job.queue, job_type = %run.job.job_type,
                "execution timeout: stopping the job");
        }
        overdue.len()
    }

    pub(crate) async fn run(self, shutdown: CancellationToken) {
        super::periodic::run(&self, &shutdown).await
    }
}

impl super::periodic::Periodic for TimeoutWatchdog {
    /// Jobs stopped.
    type Report = usize;
    type Error = std::convert::Infallible;
    const NAME: &'static str = "timeout_watchdog";
    const FAILED: &'static str = "timeout check failed";

    fn next_wait(&self) -> Duration {
        self.config.interval
    }

    async fn tick(&self) -> Result<usize, Self::Error> {
        Ok(self.run_once(Instant::now()))
    }
}

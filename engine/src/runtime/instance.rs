//! The instance heartbeat: every 5 s, refresh this engine's row (host, pid, version, workers
//! busy/total) so the console lists it and the rescuer knows it is alive, then re-read the
//! persisted settings and queue settings so every instance follows changes made anywhere
//! (worker count, retry policy, execution timeouts, pauses) and whether an operator quieted
//! this instance. On shutdown it deregisters.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::{StoreError, StoreResult};
use crate::events::{EngineEvent, EventKind};
use crate::model::{InstanceInfo, InstanceKind};
use crate::runtime::Control;
use crate::validation;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstanceHeartbeatConfig {
    pub(crate) interval: Duration,
}

impl Default for InstanceHeartbeatConfig {
    fn default() -> Self {
        InstanceHeartbeatConfig {
            interval: Duration::from_secs(5),
        }
    }
}

pub(crate) struct InstanceHeartbeat {
    control: Arc<Control>,
    config: InstanceHeartbeatConfig,
    /// Set when the row was marked gone at shutdown (for the shutdown report).
    deregistered: Arc<AtomicBool>,
}

impl InstanceHeartbeat {
    pub(crate) fn new(
        control: Arc<Control>,
        config: InstanceHeartbeatConfig,
        deregistered: Arc<AtomicBool>,
    ) -> Self {
        InstanceHeartbeat {
            control,
            config,
            deregistered,
        }
    }

    /// Follow the settings and queue settings as stored, then beat (so the row shows the
    /// worker count now in force). A failed refresh does not skip the beat.
    pub(crate) async fn run_once(&self) -> StoreResult<()> {
        let control = &self.control;
        let refreshed = if control.config.run_workers {
            self.refresh().await
        } else {
            Ok(())
        };
        // The beat answers the stored quiet flag: how a quiet or resume made in another
        // process's console reaches this one.
        let quiet = control
            .store
            .heartbeat_instance(&instance_info(control))
            .await?;
        control.set_quiet(quiet);
        refreshed
    }

    async fn refresh(&self) -> StoreResult<()> {
        let control = &self.control;
        let settings = control.store.load_settings().await?;
        if control.apply_settings(settings) {
            tracing::info!("settings changed elsewhere; now following them");
            control.events.send_with(|| {
                EngineEvent::new(
                    EventKind::SettingsChanged,
                    "settings reloaded from the store",
                )
            });
        }
        let queues = control.store.list_queues().await?;
        let paused = control.apply_queues(queues);
        for queue in paused {
            control.release_queue(&queue).await;
        }
        Ok(())
    }

    /// Beat until shutdown, then deregister.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        super::periodic::run(&self, &shutdown).await;
        let span = tracing::info_span!("instance_heartbeat", instance = %self.control.instance_id);
        async move {
            match self
                .control
                .store
                .deregister_instance(&self.control.instance_id)
                .await
            {
                Ok(()) => self.deregistered.store(true, Ordering::Release),
                Err(e) => tracing::warn!(error = %e, "could not deregister this instance; \
                    the rescuer will notice it is gone"),
            }
        }
        .instrument(span)
        .await
    }
}

impl super::periodic::Periodic for InstanceHeartbeat {
    type Report = ();
    type Error = StoreError;
    const NAME: &'static str = "instance_heartbeat";
    const FAILED: &'static str = "instance heartbeat failed";

    fn next_wait(&self) -> Duration {
        self.config.interval
    }

    fn tick(&self) -> impl Future<Output = StoreResult<()>> + Send {
        self.run_once()
    }
}

pub(crate) fn instance_info(control: &Control) -> InstanceInfo {
    let (total, busy) = if control.config.run_workers {
        (
            control.workers.load().target(),
            control.workers.load().busy(),
        )
    } else {
        (0, 0)
    };
    InstanceInfo {
        id: control.instance_id.clone(),
        host: validation::clipped(&host_name(), validation::MAX_HOST_CHARS),
        pid: std::process::id(),
        version: validation::clipped(env!("CARGO_PKG_VERSION"), validation::MAX_VERSION_CHARS),
        started_at: control.started_at,
        heartbeat_at: Utc::now(),
        workers_total: total,
        workers_busy: busy,
        kind: InstanceKind::Engine,
        queues: control.config.queues.clone(),
        job_types: control.claimable_types.clone(),
        quiet: control.is_quiet(),
        held_jobs: 0,
        stopped: false,
    }
}

/// The machine's host name, without a dependency for it.
pub(crate) fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_else(|| "localhost".to_string())
}

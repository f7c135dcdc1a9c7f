//! Starting and stopping the runtime: build its shared state, register the instance, spawn
//! the pipeline stages and the services; at shutdown stop them in order (claims, buffer,
//! handlers, outcomes, services) and report what was left to the rescuer.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::channel::Waiters;
use crate::config::{EngineConfig, MAX_WORKERS};
use crate::error::StoreResult;
use crate::events::{EngineEvent, EventBus, EventKind};
use crate::handler::HandlerRegistry;
use crate::model::JobId;
use crate::running::{CancelReason, RunningJob, RunningJobs};
use crate::runtime::buffer::PrefetchBuffer;
use crate::runtime::circuit_breaker::Breakers;
use crate::runtime::completer::run_completer;
use crate::runtime::fetcher::run_fetcher;
use crate::runtime::heartbeat::{JobHeartbeat, JobHeartbeatConfig};
use crate::runtime::instance::{InstanceHeartbeat, InstanceHeartbeatConfig};
use crate::runtime::pool::ensure_workers;
use crate::runtime::result_sweeper::{ResultSweeper, SweeperConfig};
use crate::runtime::retry::RetryPolicy;
use crate::runtime::scheduler::{Scheduler, SchedulerConfig};
use crate::runtime::starter::run_starter;
use crate::runtime::sweeper::{Pruner, PrunerConfig, Rescuer, RescuerConfig};
use crate::runtime::timeouts::{TimeoutWatchdog, WatchdogConfig};
use crate::runtime::{Counters, Pool, QueueCache, Shared};
use crate::store::Store;

/// How long shutdown waits for cancelled jobs to wind down after the grace period.
const CANCEL_WIND_DOWN: Duration = Duration::from_secs(10);
/// How long the background loops get to stop (finish the store call in flight, deregister
/// the instance) once everything else is done.
const LOOPS_STOP: Duration = Duration::from_secs(5);
/// Job ids a shutdown log line names at most; the count is always given.
const LOGGED_IDS: usize = 20;

/// A started runtime: its shared state and the tasks shutdown joins.
pub(crate) struct Runtime {
    shared: Arc<Shared>,
    /// Claiming stages, joined first at shutdown.
    intake: Mutex<Vec<JoinHandle<()>>>,
    /// Everything else, joined last.
    loops: Mutex<Vec<JoinHandle<()>>>,
}

impl Runtime {
    /// Load the persisted settings and queue settings, register `instance_id` and start
    /// every task. A database problem fails the start before anything runs.
    pub(crate) async fn start(
        store: Arc<dyn Store>,
        handlers: HandlerRegistry,
        config: EngineConfig,
        instance_id: String,
    ) -> StoreResult<Runtime> {
        let settings = store.load_settings().await?;
        let queues = store.list_queues().await?;
        let workers = config
            .worker_count
            .unwrap_or(settings.worker_count)
            .clamp(1, MAX_WORKERS);
        let (completions_tx, completions_rx) = mpsc::unbounded_channel();
        let pool = Pool::default();
        pool.target.store(workers, Ordering::Release);
        let shared = Arc::new(Shared {
            store: store.clone(),
            instance_id,
            started_at: Utc::now(),
            handlers,
            events: EventBus::new(config.event_capacity),
            waiters: Arc::new(Waiters::default()),
            buffer: PrefetchBuffer::new(config.prefetch as usize),
            running: Arc::new(RunningJobs::default()),
            pool,
            breakers: Mutex::new(Breakers::default()),
            retry: RwLock::new(Arc::new(RetryPolicy::from(&settings.retry))),
            settings: RwLock::new(Arc::new(settings)),
            queues: RwLock::new(Arc::new(QueueCache::new(queues))),
            wake_fetcher: Notify::new(),
            new_work: Notify::new(),
            wake_starter: Notify::new(),
            ready: Mutex::new(VecDeque::new()),
            wake_worker: Notify::new(),
            completions: completions_tx,
            counters: Counters::default(),
            claiming: CancellationToken::new(),
            stopped: CancellationToken::new(),
            abandon_commits: CancellationToken::new(),
            uncommitted: Mutex::new(Vec::new()),
            deregistered: AtomicBool::new(false),
            quiet: AtomicBool::new(false),
            config,
        });

        // Register before anything runs, so a database problem fails the start (and a row
        // an operator quieted before this start is honoured from the first claim).
        let quiet = store
            .heartbeat_instance(&crate::runtime::instance::instance_info(&shared))
            .await?;
        shared.set_quiet(quiet);

        let cfg = &shared.config;
        let mut intake = Vec::new();
        let mut loops = Vec::new();
        if cfg.run_workers {
            ensure_workers(&shared);
            intake.push(tokio::spawn(run_fetcher(shared.clone())));
            intake.push(tokio::spawn(run_starter(shared.clone())));
            loops.push(tokio::spawn(run_completer(shared.clone(), completions_rx)));
            let beat = JobHeartbeat::new(
                store.clone(),
                shared.instance_id.clone(),
                shared.running.clone(),
                shared.events.clone(),
                JobHeartbeatConfig {
                    interval: cfg.heartbeat_interval,
                    give_up_after: cfg.heartbeat_give_up_after(),
                },
            );
            loops.push(tokio::spawn(beat.run(shared.stopped.clone())));
            let watchdog = TimeoutWatchdog::new(
                shared.running.clone(),
                WatchdogConfig {
                    interval: cfg.timeout_check_interval,
                },
            );
            loops.push(tokio::spawn(watchdog.run(shared.stopped.clone())));
            let rescuer = Rescuer::new(
                store.clone(),
                RescuerConfig {
                    interval: cfg.rescue_interval,
                    policy: cfg.rescue.clone(),
                },
            )
            .with_events(shared.events.clone());
            loops.push(tokio::spawn(rescuer.run(shared.claiming.clone())));
            let pruner = Pruner::new(
                store.clone(),
                PrunerConfig {
                    interval: cfg.retention_interval,
                    ..PrunerConfig::default()
                },
            )
            .with_events(shared.events.clone());
            loops.push(tokio::spawn(pruner.run(shared.claiming.clone())));
            let scheduler = Scheduler::new(
                crate::runtime::operations(&shared),
                SchedulerConfig {
                    interval: cfg.schedule_interval,
                },
            );
            loops.push(tokio::spawn(scheduler.run(shared.claiming.clone())));
        } else {
            drop(completions_rx);
        }
        let instance = InstanceHeartbeat::new(
            shared.clone(),
            InstanceHeartbeatConfig {
                interval: cfg.instance_heartbeat_interval,
            },
        );
        loops.push(tokio::spawn(instance.run(shared.stopped.clone())));
        let sweeper = ResultSweeper::new(
            store.clone(),
            shared.waiters.clone(),
            SweeperConfig {
                interval: cfg.wait_poll_interval,
            },
        );
        loops.push(tokio::spawn(sweeper.run(shared.stopped.clone())));

        tracing::info!(
            instance = %shared.instance_id,
            backend = store.backend(),
            run_workers = cfg.run_workers,
            workers,
            prefetch = cfg.prefetch,
            "engine started"
        );
        shared.events.send_with(|| {
            EngineEvent::new(
                EventKind::Instance,
                format!("instance {} started", shared.instance_id),
            )
        });
        Ok(Runtime {
            shared,
            intake: Mutex::new(intake),
            loops: Mutex::new(loops),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Graceful shutdown (see `Engine::shutdown`); called once.
    pub(crate) async fn shutdown(&self) -> ShutdownReport {
        let shared = &self.shared;
        let config = &shared.config;
        tracing::info!(instance = %shared.instance_id, "shutting down: no new claims");
        shared.running.start_draining();
        shared.claiming.cancel();
        for handle in take_handles(&self.intake) {
            let _ = handle.await;
        }
        let buffered: Vec<JobId> = shared.buffer.take_all().iter().map(|j| j.id).collect();
        let unreleased = if shared.release(&buffered, "shutdown").await {
            Vec::new()
        } else {
            buffered
        };

        // Handlers first: the grace period is theirs. Outcomes commit as they come meanwhile.
        let handlers_stopped =
            |jobs: &HashMap<JobId, Arc<RunningJob>>| jobs.values().all(|j| j.handler_done());
        let running = shared.running.executing().len();
        if running > 0 {
            tracing::info!(running, grace = ?config.shutdown_grace,
                "waiting for running jobs to finish");
        }
        if tokio::time::timeout(
            config.shutdown_grace,
            shared.running.wait_until(handlers_stopped),
        )
        .await
        .is_err()
        {
            let left = shared.running.executing();
            tracing::warn!(
                jobs = left.len(),
                "grace period over: cancelling running jobs"
            );
            for run in &left {
                run.cancel(CancelReason::Shutdown);
            }
            if tokio::time::timeout(
                CANCEL_WIND_DOWN,
                shared.running.wait_until(handlers_stopped),
            )
            .await
            .is_err()
            {
                tracing::error!(
                    jobs = shared.running.executing().len(),
                    "jobs ignored cancellation; leaving them to the rescuer"
                );
            }
        }

        // Then the outcomes of every handler that returned: committed, or given up on.
        let only_stuck_left =
            |jobs: &HashMap<JobId, Arc<RunningJob>>| jobs.values().all(|j| !j.handler_done());
        if tokio::time::timeout(
            config.shutdown_flush_timeout,
            shared.running.wait_until(only_stuck_left),
        )
        .await
        .is_err()
        {
            tracing::warn!(flush_timeout = ?config.shutdown_flush_timeout,
                "the store did not commit every finished job in time; giving up on the rest");
        }
        shared.abandon_commits.cancel();
        shared.stopped.cancel();
        let loops = take_handles(&self.loops);
        let aborts: Vec<_> = loops.iter().map(JoinHandle::abort_handle).collect();
        if tokio::time::timeout(LOOPS_STOP, futures::future::join_all(loops))
            .await
            .is_err()
        {
            tracing::warn!(
                "background loops did not stop within {} s; stopping them",
                LOOPS_STOP.as_secs()
            );
            for abort in aborts {
                abort.abort();
            }
        }

        let mut uncommitted =
            std::mem::take(&mut *shared.uncommitted.lock().unwrap_or_else(|p| p.into_inner()));
        // Whatever is still registered was never committed either (a completer stopped by
        // force leaves its batch here).
        let mut still_running = Vec::new();
        for run in shared.running.all() {
            if run.handler_done() {
                uncommitted.push(run.job.id);
            } else {
                still_running.push(run.job.id);
            }
        }
        uncommitted.sort();
        uncommitted.dedup();
        still_running.sort();
        let report = ShutdownReport {
            uncommitted,
            still_running,
            unreleased,
            deregistered: shared.deregistered.load(Ordering::Acquire),
        };
        report.log(&shared.instance_id);
        if report.is_clean() {
            tracing::info!(instance = %shared.instance_id, "engine stopped");
        } else {
            tracing::warn!(instance = %shared.instance_id,
                "engine stopped, leaving work to the rescuer");
        }
        report
    }
}

/// What a shutdown left behind. Nothing is lost: each job named here is still in the
/// database, and the rescue rules take it from there (see each field).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Finished jobs whose outcome could not be committed within `shutdown_flush_timeout`
    /// (the store refused or did not answer). They stay `Processing` by this instance; the
    /// rescuer moves them to the DLQ as `Zombie` once the instance counts as gone, since
    /// their handler ran. (A commit still in flight when shutdown gave up may land after
    /// all; the rescuer then finds the job finished and leaves it.)
    pub uncommitted: Vec<JobId>,
    /// Jobs whose handler ignored cancellation and was still running when shutdown stopped
    /// waiting; rescued as `Zombie` the same way.
    pub still_running: Vec<JobId>,
    /// Buffered (never started) jobs the store refused to hand back; the rescuer returns them
    /// to pending, unrun.
    pub unreleased: Vec<JobId>,
    /// Whether this instance's row was marked gone. If not, its work is rescued once its
    /// heartbeat is older than `rescue.dead_instance_timeout`.
    pub deregistered: bool,
}

impl ShutdownReport {
    /// Everything this instance held was committed or handed back.
    pub fn is_clean(&self) -> bool {
        self.uncommitted.is_empty() && self.still_running.is_empty() && self.unreleased.is_empty()
    }

    fn log(&self, instance: &str) {
        let when = if self.deregistered {
            "at the next rescue sweep of any instance"
        } else {
            "once this instance's heartbeat is older than engine.rescue.dead_instance_timeout"
        };
        if !self.uncommitted.is_empty() {
            tracing::error!(
                event = "engine.shutdown.uncommitted",
                instance,
                jobs = self.uncommitted.len(),
                ids = %sample(&self.uncommitted),
                "finished jobs whose outcome could not be committed: they stay processing \
                 in the database and go to the dead-letter queue as Zombie {when} (their \
                 handler ran; resurrect them to run them again)"
            );
        }
        if !self.still_running.is_empty() {
            tracing::error!(
                event = "engine.shutdown.still_running",
                instance,
                jobs = self.still_running.len(),
                ids = %sample(&self.still_running),
                "jobs whose handler ignored cancellation: they go to the dead-letter queue \
                 as Zombie {when}"
            );
        }
        if !self.unreleased.is_empty() {
            tracing::warn!(
                event = "engine.shutdown.unreleased",
                instance,
                jobs = self.unreleased.len(),
                ids = %sample(&self.unreleased),
                "buffered jobs that could not be handed back: they return to pending, unrun, \
                 {when}"
            );
        }
    }
}

/// Up to `LOGGED_IDS` ids, and how many more there are.
fn sample(ids: &[JobId]) -> String {
    let shown: Vec<String> = ids
        .iter()
        .take(LOGGED_IDS)
        .map(|id| id.to_string())
        .collect();
    match ids.len().saturating_sub(LOGGED_IDS) {
        0 => shown.join(" "),
        more => format!("{} and {more} more", shown.join(" ")),
    }
}

fn take_handles(handles: &Mutex<Vec<JoinHandle<()>>>) -> Vec<JoinHandle<()>> {
    std::mem::take(&mut *handles.lock().unwrap_or_else(|p| p.into_inner()))
}

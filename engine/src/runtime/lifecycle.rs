//! Starting and stopping the runtime: build its stages and the queues between them,
//! register the instance, spawn the pipeline stages and the services; at shutdown stop them
//! in order (claims, buffer, handlers, outcomes, services) and report what was left to the
//! rescuer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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
use crate::runtime::completer::Completer;
use crate::runtime::fetcher::{Fetcher, Quiet};
use crate::runtime::heartbeat::{JobHeartbeat, JobHeartbeatConfig};
use crate::runtime::instance::{InstanceHeartbeat, InstanceHeartbeatConfig};
use crate::runtime::launch::Launcher;
use crate::runtime::outcome::Executor;
use crate::runtime::policies::Policies;
use crate::runtime::pool::{PoolLoad, ReadyJobs, WorkerParts, WorkerPool};
use crate::runtime::result_sweeper::{ResultSweeper, SweeperConfig};
use crate::runtime::scheduler::{Scheduler, SchedulerConfig};
use crate::runtime::slots::Slots;
use crate::runtime::starter::Starter;
use crate::runtime::sweeper::{Pruner, PrunerConfig, Rescuer, RescuerConfig};
use crate::runtime::timeouts::{TimeoutWatchdog, WatchdogConfig};
use crate::runtime::{Control, Counters};
use crate::store::Store;

/// How long shutdown waits for cancelled jobs to wind down after the grace period.
const CANCEL_WIND_DOWN: Duration = Duration::from_secs(10);
/// How long the background loops get to stop (finish the store call in flight, deregister
/// the instance) once everything else is done.
const LOOPS_STOP: Duration = Duration::from_secs(5);
/// Job ids a shutdown log line names at most; the count is always given.
const LOGGED_IDS: usize = 20;

/// A started runtime: its control and the tasks shutdown joins, with what it stops them by.
pub(crate) struct Runtime {
    control: Arc<Control>,
    /// Claiming stages, joined first at shutdown.
    intake: Mutex<Vec<JoinHandle<()>>>,
    /// Everything else, joined last.
    loops: Mutex<Vec<JoinHandle<()>>>,
    /// Cancelled when running work is done (or abandoned): every loop exits.
    stopped: CancellationToken,
    /// Cancelled when shutdown's flush timeout has passed: the completer stops trying to
    /// commit and records what it still held in `uncommitted`.
    abandon_commits: CancellationToken,
    /// Finished jobs whose outcome shutdown gave up committing.
    uncommitted: Arc<Mutex<Vec<JobId>>>,
    /// The instance row was marked gone at shutdown.
    deregistered: Arc<AtomicBool>,
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
        let handlers = Arc::new(handlers);
        let slots = Arc::new(Slots::new(handlers.clone()));
        let events = EventBus::new(config.event_capacity);
        let policies = Arc::new(Policies::new(settings, queues));
        let running = Arc::new(RunningJobs::default());
        let buffer = Arc::new(PrefetchBuffer::new(config.prefetch as usize));
        let breakers = Arc::new(Mutex::new(Breakers::default()));
        let counters = Arc::new(Counters::default());
        let load = Arc::new(PoolLoad::with_target(workers));
        let ready = Arc::new(ReadyJobs::default());
        let (completions, finished) = mpsc::unbounded_channel();
        let wake_fetcher = Arc::new(Notify::new());
        let wake_starter = Arc::new(Notify::new());
        let claiming = CancellationToken::new();
        let stopped = CancellationToken::new();
        let abandon_commits = CancellationToken::new();
        let uncommitted = Arc::new(Mutex::new(Vec::new()));
        let deregistered = Arc::new(AtomicBool::new(false));

        // A handler's panic is reported with its source location (`panics`).
        super::panics::install_hook();
        let workers_pool = WorkerPool::new(WorkerParts {
            executor: Executor {
                handlers: handlers.clone(),
                instance_id: instance_id.clone(),
                result_max_bytes: config.result_max_bytes,
                policies: policies.clone(),
            },
            load: load.clone(),
            ready: ready.clone(),
            running: running.clone(),
            completions: completions.clone(),
            buffer: buffer.clone(),
            wake_starter: wake_starter.clone(),
            stopped: stopped.clone(),
        });
        let launcher = Launcher {
            policies: policies.clone(),
            default_timeout: config.execution_timeout,
            running: running.clone(),
            events: events.clone(),
            load: load.clone(),
            ready,
            completions,
            counters: counters.clone(),
            wake_starter: wake_starter.clone(),
        };
        let control = Arc::new(Control {
            store: store.clone(),
            instance_id,
            started_at: Utc::now(),
            events: events.clone(),
            waiters: Arc::new(Waiters::default()),
            policies: policies.clone(),
            running: running.clone(),
            buffer: buffer.clone(),
            workers: workers_pool.clone(),
            breakers: breakers.clone(),
            counters: counters.clone(),
            claimable_types: handlers.claimable_types(),
            quiet: Arc::new(Quiet::new(events.clone(), wake_fetcher.clone())),
            wake_fetcher: wake_fetcher.clone(),
            new_work: Notify::new(),
            claiming: claiming.clone(),
            config,
        });

        // Register before anything runs, so a database problem fails the start (and a row
        // an operator quieted before this start is honoured from the first claim).
        let quiet = store
            .heartbeat_instance(&crate::runtime::instance::instance_info(&control))
            .await?;
        control.set_quiet(quiet);

        let cfg = &control.config;
        let instance_id = &control.instance_id;
        let mut intake = Vec::new();
        let mut loops = Vec::new();
        if cfg.run_workers {
            workers_pool.ensure_workers();
            let fetcher = Fetcher {
                store: store.clone(),
                instance_id: instance_id.clone(),
                poll_interval: cfg.poll_interval,
                queues: cfg.queues.clone(),
                // Only types a handler here runs: the others wait for a worker that runs them.
                types: handlers.claimable_types(),
                buffer: buffer.clone(),
                load: load.clone(),
                breakers: breakers.clone(),
                slots: slots.clone(),
                launcher: launcher.clone(),
                quiet: control.quiet.clone(),
                counters: counters.clone(),
                wake: wake_fetcher.clone(),
                wake_starter: wake_starter.clone(),
                claiming: claiming.clone(),
            };
            intake.push(tokio::spawn(fetcher.run()));
            let starter = Starter {
                store: store.clone(),
                instance_id: instance_id.clone(),
                buffer,
                load,
                breakers: breakers.clone(),
                breaker_config: cfg.breaker.clone(),
                handlers: handlers.clone(),
                slots,
                launcher,
                events: events.clone(),
                counters: counters.clone(),
                wake: wake_starter,
                claiming: claiming.clone(),
            };
            intake.push(tokio::spawn(starter.run()));
            let completer = Completer {
                store: store.clone(),
                instance_id: instance_id.clone(),
                finished,
                waiters: control.waiters.clone(),
                events: events.clone(),
                running: running.clone(),
                breakers,
                breaker_config: cfg.breaker.clone(),
                handlers,
                counters,
                policies,
                wake_fetcher,
                claiming: claiming.clone(),
                stopped: stopped.clone(),
                abandon_commits: abandon_commits.clone(),
                uncommitted: uncommitted.clone(),
            };
            loops.push(tokio::spawn(completer.run()));
            let beat = JobHeartbeat::new(
                store.clone(),
                instance_id.clone(),
                running.clone(),
                events.clone(),
                JobHeartbeatConfig {
                    interval: cfg.heartbeat_interval,
                    give_up_after: cfg.heartbeat_give_up_after(),
                },
            );
            loops.push(tokio::spawn(beat.run(stopped.clone())));
            let watchdog = TimeoutWatchdog::new(
                running,
                WatchdogConfig {
                    interval: cfg.timeout_check_interval,
                },
            );
            loops.push(tokio::spawn(watchdog.run(stopped.clone())));
            let pruner = Pruner::new(
                store.clone(),
                PrunerConfig {
                    interval: cfg.retention_interval,
                    ..PrunerConfig::default()
                },
            )
            .with_events(events.clone());
            loops.push(tokio::spawn(pruner.run(claiming.clone())));
            let scheduler = Scheduler::new(
                crate::runtime::operations(&control),
                SchedulerConfig {
                    interval: cfg.schedule_interval,
                },
            );
            loops.push(tokio::spawn(scheduler.run(claiming.clone())));
        } else {
            drop(finished);
        }
        // Every instance rescues, a console-only one (no workers) too: the work of a worker
        // that died is returned within one interval even when no other worker runs.
        let rescuer = Rescuer::new(
            store.clone(),
            RescuerConfig {
                interval: cfg.rescue_interval,
                policy: cfg.rescue.clone(),
            },
        )
        .with_events(events.clone());
        loops.push(tokio::spawn(rescuer.run(claiming.clone())));
        let instance = InstanceHeartbeat::new(
            control.clone(),
            InstanceHeartbeatConfig {
                interval: cfg.instance_heartbeat_interval,
            },
            deregistered.clone(),
        );
        loops.push(tokio::spawn(instance.run(stopped.clone())));
        let sweeper = ResultSweeper::new(
            store.clone(),
            control.waiters.clone(),
            SweeperConfig {
                interval: cfg.wait_poll_interval,
            },
        );
        loops.push(tokio::spawn(sweeper.run(stopped.clone())));

        tracing::info!(
            instance = %control.instance_id,
            backend = store.backend(),
            run_workers = cfg.run_workers,
            workers,
            prefetch = cfg.prefetch,
            "engine started"
        );
        events.send_with(|| {
            EngineEvent::new(
                EventKind::Instance,
                format!("instance {} started", control.instance_id),
            )
        });
        Ok(Runtime {
            control,
            intake: Mutex::new(intake),
            loops: Mutex::new(loops),
            stopped,
            abandon_commits,
            uncommitted,
            deregistered,
        })
    }

    pub(crate) fn control(&self) -> &Arc<Control> {
        &self.control
    }

    /// Graceful shutdown (see `Engine::shutdown`); called once.
    pub(crate) async fn shutdown(&self) -> ShutdownReport {
        let control = &self.control;
        let config = &control.config;
        tracing::info!(instance = %control.instance_id, "shutting down: no new claims");
        control.running.start_draining();
        control.claiming.cancel();
        for handle in take_handles(&self.intake) {
            let _ = handle.await;
        }
        let buffered: Vec<JobId> = control.buffer.take_all().iter().map(|j| j.id).collect();
        let unreleased = if control.release(&buffered, "shutdown").await {
            Vec::new()
        } else {
            buffered
        };

        // Handlers first: the grace period is theirs. Outcomes commit as they come meanwhile.
        let handlers_stopped =
            |jobs: &HashMap<JobId, Arc<RunningJob>>| jobs.values().all(|j| j.handler_done());
        let running = control.running.executing().len();
        if running > 0 {
            tracing::info!(running, grace = ?config.shutdown_grace,
                "waiting for running jobs to finish");
        }
        if tokio::time::timeout(
            config.shutdown_grace,
            control.running.wait_until(handlers_stopped),
        )
        .await
        .is_err()
        {
            let left = control.running.executing();
            tracing::warn!(
                jobs = left.len(),
                "grace period over: cancelling running jobs"
            );
            for run in &left {
                run.cancel(CancelReason::Shutdown);
            }
            if tokio::time::timeout(
                CANCEL_WIND_DOWN,
                control.running.wait_until(handlers_stopped),
            )
            .await
            .is_err()
            {
                tracing::error!(
                    jobs = control.running.executing().len(),
                    "jobs ignored cancellation; leaving them to the rescuer"
                );
            }
        }

        // Then the outcomes of every handler that returned: committed, or given up on.
        let only_stuck_left =
            |jobs: &HashMap<JobId, Arc<RunningJob>>| jobs.values().all(|j| !j.handler_done());
        if tokio::time::timeout(
            config.shutdown_flush_timeout,
            control.running.wait_until(only_stuck_left),
        )
        .await
        .is_err()
        {
            tracing::warn!(flush_timeout = ?config.shutdown_flush_timeout,
                "the store did not commit every finished job in time; giving up on the rest");
        }
        self.abandon_commits.cancel();
        self.stopped.cancel();
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
            std::mem::take(&mut *self.uncommitted.lock().unwrap_or_else(|p| p.into_inner()));
        // Whatever is still registered was never committed either (a completer stopped by
        // force leaves its batch here).
        let mut still_running = Vec::new();
        for run in control.running.all() {
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
            deregistered: self.deregistered.load(Ordering::Acquire),
        };
        report.log(&control.instance_id);
        if report.is_clean() {
            tracing::info!(instance = %control.instance_id, "engine stopped");
        } else {
            tracing::warn!(instance = %control.instance_id,
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

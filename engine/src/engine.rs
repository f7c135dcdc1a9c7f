//! The engine facade: start the runtime on a store, enqueue, await, control, shut down.
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn deck_engine::Store>) -> Result<(), Box<dyn std::error::Error>> {
//! use deck_engine::{Engine, EngineConfig, EnqueueRequest, HandlerRegistry};
//! let mut handlers = HandlerRegistry::new();
//! handlers.register("demo.echo", |_ctx, payload: serde_json::Value| async move { Ok(payload) });
//! let engine = Engine::start(store, handlers, EngineConfig::default()).await?;
//! let req = EnqueueRequest::new("default", "demo.echo", r#"{"hello":"world"}"#);
//! let (_id, outcome) = engine.enqueue_and_wait(req, std::time::Duration::from_secs(5)).await?;
//! println!("{outcome:?}");
//! engine.shutdown().await;
//! # Ok(()) }
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{Notify, broadcast, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::channel::{self, ResultSweeper, SweeperConfig, WaitOutcome, Waiters};
use crate::config::{ConfigError, ConfigProblem, EngineConfig, MAX_WORKERS};
use crate::error::{StoreError, StoreResult};
use crate::handler::HandlerRegistry;
use crate::model::{
    CancelOutcome, EngineSettings, EnqueueOutcome, EnqueueRequest, JobId, PruneReport, QueueConfig,
    QueuePatch,
};
use crate::ops::Operations;
use crate::runtime::buffer::PrefetchBuffer;
use crate::runtime::circuit_breaker::Breakers;
use crate::runtime::completer::run_completer;
use crate::runtime::events::{EngineEvent, EventBus, EventKind};
use crate::runtime::fetcher::run_fetcher;
use crate::runtime::heartbeat::{JobHeartbeat, JobHeartbeatConfig};
use crate::runtime::instance::{InstanceHeartbeat, InstanceHeartbeatConfig, host_name};
use crate::runtime::pool::ensure_workers;
use crate::runtime::pruner::{Pruner, PrunerConfig};
use crate::runtime::rescuer::{Rescuer, RescuerConfig};
use crate::runtime::retry::RetryPolicy;
use crate::runtime::running::{CancelReason, RunningJob, RunningJobs};
use crate::runtime::snapshot::{self, RuntimeSnapshot};
use crate::runtime::starter::run_starter;
use crate::runtime::timeouts::{TimeoutWatchdog, WatchdogConfig};
use crate::runtime::{Counters, Pool, QueueCache, Shared};
use crate::store::Store;
use crate::validation::validate_name;

/// Who the audit log names for operator actions an embedding application calls on
/// [`Engine`] directly (`cancel`, `update_queue`, …); name a user with
/// [`Engine::operations`] instead.
pub const EMBEDDED_ACTOR: &str = "app";

/// How long shutdown waits for cancelled jobs to wind down after the grace period.
const CANCEL_WIND_DOWN: Duration = Duration::from_secs(10);
/// How long the background loops get to stop (finish the store call in flight, deregister
/// the instance) once everything else is done.
const LOOPS_STOP: Duration = Duration::from_secs(5);
/// Job ids a shutdown log line names at most; the count is always given.
const LOGGED_IDS: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A running engine. Cheap to clone; every clone drives the same runtime.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

struct EngineInner {
    shared: Arc<Shared>,
    /// Every write of this engine's users goes through here.
    ops: Operations,
    /// Claiming stages, joined first at shutdown.
    intake: Mutex<Vec<JoinHandle<()>>>,
    /// Everything else, joined last.
    loops: Mutex<Vec<JoinHandle<()>>>,
    shutdown_started: AtomicBool,
    finished: CancellationToken,
    /// What the first `shutdown` call found, for later callers.
    report: Mutex<Option<ShutdownReport>>,
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

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("instance_id", &self.inner.shared.instance_id)
            .finish()
    }
}

impl Engine {
    /// Validate the configuration, load the persisted settings, register this instance and
    /// start the runtime's tasks.
    pub async fn start(
        store: Arc<dyn Store>,
        handlers: HandlerRegistry,
        config: EngineConfig,
    ) -> Result<Engine, EngineError> {
        let report = config.check();
        for w in &report.warnings {
            tracing::warn!("{w}");
        }
        let mut problems = report.problems;
        for key in handlers.duplicate_keys() {
            problems.push(ConfigProblem {
                key: "handlers".into(),
                problem: format!("type {key:?} is registered more than once"),
                help: "register each type key once".into(),
            });
        }
        if !problems.is_empty() {
            return Err(ConfigError { problems }.into());
        }

        let settings = store.load_settings().await?;
        let queues = store.list_queues().await?;
        let instance_id = format!(
            "{}-{}-{}",
            config.instance_name.clone().unwrap_or_else(host_name),
            std::process::id(),
            &uuid::Uuid::now_v7().simple().to_string()[24..]
        );
        // The worker id on every job this instance holds: a name the stores can keep.
        validate_name("instance id", &instance_id).map_err(|e| ConfigError {
            problems: vec![ConfigProblem {
                key: "instance_name".into(),
                problem: format!("the instance id {}", e.problem),
                help: "the instance id is instance_name plus the process id and a suffix, so \
                       give a shorter instance_name"
                    .into(),
            }],
        })?;
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
            config,
        });

        // Register before anything runs, so a database problem fails the start.
        store
            .heartbeat_instance(&crate::runtime::instance::instance_info(&shared))
            .await?;

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
        Ok(Engine {
            inner: Arc::new(EngineInner {
                ops: Operations::for_runtime(shared.clone()),
                shared,
                intake: Mutex::new(intake),
                loops: Mutex::new(loops),
                shutdown_started: AtomicBool::new(false),
                finished: CancellationToken::new(),
                report: Mutex::new(None),
            }),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.shared.store
    }

    /// This instance's id; also the worker id on every job it holds.
    pub fn instance_id(&self) -> &str {
        &self.inner.shared.instance_id
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.shared.config
    }

    /// The engine-wide settings as this instance last saw them.
    pub fn settings(&self) -> EngineSettings {
        (*self.shared().settings()).clone()
    }

    /// Every write (enqueues and operator actions), validated, applied here, announced and
    /// audited: the door the console and the API use.
    pub fn operations(&self) -> &Operations {
        &self.inner.ops
    }

    /// Enqueue one job and wake this process's fetcher.
    pub async fn enqueue(&self, req: EnqueueRequest) -> StoreResult<EnqueueOutcome> {
        self.inner.ops.enqueue(req).await
    }

    /// Enqueue many jobs in one transaction (all or none) and wake the fetcher.
    pub async fn enqueue_batch(
        &self,
        reqs: Vec<EnqueueRequest>,
    ) -> StoreResult<Vec<EnqueueOutcome>> {
        self.inner.ops.enqueue_batch(reqs).await
    }

    /// Wait for a job to finish: at once if it already has; woken directly when this process
    /// completes it; found by the result sweep when another process does.
    pub async fn wait(&self, id: JobId, timeout: Duration) -> StoreResult<WaitOutcome> {
        let shared = self.shared();
        channel::wait(&shared.store, &shared.waiters, id, timeout).await
    }

    /// Enqueue, then wait for the job (or the existing job its idempotency key names).
    pub async fn enqueue_and_wait(
        &self,
        req: EnqueueRequest,
        timeout: Duration,
    ) -> StoreResult<(JobId, WaitOutcome)> {
        let outcome = self.enqueue(req).await?;
        let result = self.wait(outcome.id, timeout).await?;
        Ok((outcome.id, result))
    }

    /// Operator cancel ([`Operations::cancel`]), audited as done by [`EMBEDDED_ACTOR`].
    pub async fn cancel(&self, id: JobId) -> StoreResult<CancelOutcome> {
        self.inner.ops.cancel(EMBEDDED_ACTOR, id).await
    }

    /// Change a queue's settings for every instance ([`Operations::update_queue`]), audited
    /// as done by [`EMBEDDED_ACTOR`].
    pub async fn update_queue(&self, name: &str, patch: QueuePatch) -> StoreResult<QueueConfig> {
        self.inner
            .ops
            .update_queue(EMBEDDED_ACTOR, name, patch)
            .await
    }

    /// Save engine-wide settings ([`Operations::save_settings`]), audited as done by
    /// [`EMBEDDED_ACTOR`].
    pub async fn save_settings(&self, settings: EngineSettings) -> StoreResult<()> {
        self.inner.ops.save_settings(EMBEDDED_ACTOR, settings).await
    }

    /// Run the retention sweep now ([`Operations::prune_now`]), audited as done by
    /// [`EMBEDDED_ACTOR`].
    pub async fn prune_now(&self) -> StoreResult<PruneReport> {
        self.inner.ops.prune_now(EMBEDDED_ACTOR).await
    }

    /// What this instance is doing now.
    pub fn snapshot(&self) -> RuntimeSnapshot {
        snapshot::build(self.shared())
    }

    /// The snapshot without the running-job and per-queue buffer lists (left empty): cheap
    /// enough for every `/metrics` scrape and `/readyz` probe.
    pub fn status(&self) -> RuntimeSnapshot {
        snapshot::status(self.shared())
    }

    /// Just the counters: cheap enough to poll in a tight loop (benchmarks, metrics).
    pub fn counters(&self) -> crate::runtime::RuntimeCounters {
        snapshot::counters(self.shared())
    }

    pub fn subscribe_events(&self) -> broadcast::Receiver<EngineEvent> {
        self.shared().events.subscribe()
    }

    /// Publish an event (the console reports operator actions here).
    pub fn emit(&self, event: EngineEvent) {
        self.shared().events.send(event);
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutdown_started.load(Ordering::Acquire)
    }

    /// Graceful shutdown: stop claiming, hand the buffer back, let running jobs finish
    /// within `shutdown_grace`, cancel the rest (their attempt is retried later), give the
    /// finished jobs' outcomes `shutdown_flush_timeout` to commit, stop the loops and
    /// deregister. It returns whatever the store refuses by then, without waiting further:
    /// the report says what was left to the rescuer. Calling it again waits for the first
    /// call and returns the same report.
    pub async fn shutdown(&self) -> ShutdownReport {
        if self.inner.shutdown_started.swap(true, Ordering::AcqRel) {
            self.inner.finished.cancelled().await;
            return self.stored_report();
        }
        let shared = self.shared();
        let config = &shared.config;
        tracing::info!(instance = %shared.instance_id, "shutting down: no new claims");
        shared.running.start_draining();
        shared.claiming.cancel();
        for handle in take_handles(&self.inner.intake) {
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
        let loops = take_handles(&self.inner.loops);
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
        *self.inner.report.lock().unwrap_or_else(|p| p.into_inner()) = Some(report.clone());
        self.inner.finished.cancel();
        report
    }

    fn stored_report(&self) -> ShutdownReport {
        self.inner
            .report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_default()
    }
}

fn take_handles(handles: &Mutex<Vec<JoinHandle<()>>>) -> Vec<JoinHandle<()>> {
    std::mem::take(&mut *handles.lock().unwrap_or_else(|p| p.into_inner()))
}

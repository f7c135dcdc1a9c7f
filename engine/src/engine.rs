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

mod builder;

pub use builder::EngineBuilder;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::channel::{self, WaitOutcome};
use crate::config::{ConfigError, ConfigProblem, EngineConfig};
use crate::error::{StoreError, StoreResult};
use crate::events::EngineEvent;
use crate::external::ExternalWorkers;
use crate::handler::HandlerRegistry;
use crate::model::{
    CancelOutcome, EngineSettings, EnqueueOutcome, EnqueueRequest, JobId, PruneReport, QueueConfig,
    QueuePatch,
};
use crate::ops::Operations;
use crate::runtime::Control;
use crate::runtime::instance::host_name;
use crate::runtime::lifecycle::Runtime;
use crate::runtime::snapshot::{self, RuntimeSnapshot};
use crate::store::{Store, StoreReads};
use crate::validation::validate_name;

pub use crate::runtime::lifecycle::ShutdownReport;

/// Who the audit log names for operator actions an embedding application calls on
/// [`Engine`] directly (`cancel`, `update_queue`, …); name a user with
/// [`Engine::operations`] instead.
pub const EMBEDDED_ACTOR: &str = "app";

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
    runtime: Runtime,
    /// Every write of this engine's users goes through here.
    ops: Operations,
    /// The pull protocol's claims and reports.
    external: ExternalWorkers,
    shutdown_started: AtomicBool,
    finished: CancellationToken,
    /// What the first `shutdown` call found, for later callers.
    report: Mutex<Option<ShutdownReport>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("instance_id", &self.instance_id())
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
                problem: format!("{key:?} is registered more than once"),
                help: "register each type key and each route once".into(),
            });
        }
        if !problems.is_empty() {
            return Err(ConfigError { problems }.into());
        }

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
        let runtime = Runtime::start(store, handlers, config, instance_id).await?;
        Ok(Engine {
            inner: Arc::new(EngineInner {
                ops: crate::runtime::operations(runtime.control()),
                external: ExternalWorkers::new(runtime.control().clone()),
                runtime,
                shutdown_started: AtomicBool::new(false),
                finished: CancellationToken::new(),
                report: Mutex::new(None),
            }),
        })
    }

    pub(crate) fn control(&self) -> &Arc<Control> {
        self.inner.runtime.control()
    }

    /// The store's read side. Writes go through [`Engine::operations`] (and the facade's
    /// methods, which call it), so every one is validated, announced and audited.
    pub fn store(&self) -> &Arc<dyn StoreReads> {
        self.inner.ops.store()
    }

    /// This instance's id; also the worker id on every job it holds.
    pub fn instance_id(&self) -> &str {
        self.control().instance_id()
    }

    pub fn config(&self) -> &EngineConfig {
        self.control().config()
    }

    /// The engine-wide settings as this instance last saw them.
    pub fn settings(&self) -> EngineSettings {
        (*self.control().settings()).clone()
    }

    /// Every write (enqueues and operator actions), validated, applied here, announced and
    /// audited: the door the console and the API use.
    pub fn operations(&self) -> &Operations {
        &self.inner.ops
    }

    /// Claims and reports of external workers (the JSON API's worker protocol).
    pub fn external_workers(&self) -> &ExternalWorkers {
        &self.inner.external
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

    /// Enqueue a batch of jobs with callbacks, in one transaction (all or none), and wake the
    /// fetcher. See [`crate::batch`] for when each callback fires.
    pub async fn create_batch(
        &self,
        req: crate::batch::BatchRequest,
    ) -> StoreResult<crate::batch::BatchCreated> {
        self.inner.ops.create_batch(req).await
    }

    /// Wait for a job to finish: at once if it already has; woken directly when this process
    /// completes it; found by the result sweep when another process does.
    pub async fn wait(&self, id: JobId, timeout: Duration) -> StoreResult<WaitOutcome> {
        let control = self.control();
        channel::wait(control.store(), control.waiters(), id, timeout).await
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
        snapshot::build(self.control())
    }

    /// The snapshot without the running-job and per-queue buffer lists (left empty): cheap
    /// enough for every `/metrics` scrape and `/readyz` probe.
    pub fn status(&self) -> RuntimeSnapshot {
        snapshot::status(self.control())
    }

    /// Just the counters: cheap enough to poll in a tight loop (benchmarks, metrics).
    pub fn counters(&self) -> crate::runtime::RuntimeCounters {
        snapshot::counters(self.control())
    }

    pub fn subscribe_events(&self) -> broadcast::Receiver<EngineEvent> {
        self.control().events().subscribe()
    }

    /// Publish an event (the console reports operator actions here).
    pub fn emit(&self, event: EngineEvent) {
        self.control().events().send(event);
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
        let report = self.inner.runtime.shutdown().await;
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

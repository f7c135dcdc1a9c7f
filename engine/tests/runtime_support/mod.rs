//! Helpers shared by the runtime integration tests: temp SQLite stores, engines started on
//! them, gates that handlers block on, a condition wait, and a `Store` wrapper that counts
//! result-sweep calls and can refuse to commit completions.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use deck_engine::store::StoreOptions;
use deck_engine::store::interposed::{Interpose, InterposedStore, StoreCall};
use deck_engine::*;
use tempfile::TempDir;
use tokio::sync::Notify;

/// A fresh database file in its own temporary directory (kept alive by the returned guard).
pub async fn open_store() -> (TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(&dir).await;
    (dir, store)
}

/// A fresh store whose retries fall due 10 ms after a failure, so retry tests wait out no
/// backoff.
pub async fn open_fast_retrying_store() -> (TempDir, Arc<dyn Store>) {
    let (dir, store) = open_store().await;
    let settings = EngineSettings {
        retry: RetrySettings {
            base_delay_ms: 10,
            jitter_ms: 0,
            ..RetrySettings::default()
        },
        ..EngineSettings::default()
    };
    store.save_settings(&settings).await.unwrap();
    (dir, store)
}

/// A fresh store behind fresh counts: the counts, and the same store as an engine takes it.
pub async fn open_counting_store() -> (TempDir, Arc<CountingStore>, Arc<dyn Store>) {
    let (dir, inner) = open_store().await;
    let counting = Arc::new(counting_store(inner));
    let store: Arc<dyn Store> = counting.clone();
    (dir, counting, store)
}

/// Another handle on the same file: what a second process would have.
pub async fn reopen(dir: &TempDir) -> Arc<dyn Store> {
    let path = dir.path().join("deck.db");
    // Benchmarks may trade durability for a look at the non-fsync cost.
    let options = StoreOptions {
        sqlite_synchronous: match std::env::var("DECK_BENCH_SYNC").as_deref() {
            Ok("normal") => deck_engine::store::SqliteSynchronous::Normal,
            _ => deck_engine::store::SqliteSynchronous::Full,
        },
        ..StoreOptions::default()
    };
    deck_engine::store::sqlite::open(path.to_str().unwrap(), &options)
        .await
        .unwrap()
}

/// Defaults with short intervals so cross-process effects show up quickly.
pub fn test_config() -> EngineConfig {
    EngineConfig {
        poll_interval: Duration::from_millis(100),
        instance_heartbeat_interval: Duration::from_millis(200),
        shutdown_grace: Duration::from_secs(10),
        ..EngineConfig::default()
    }
}

/// How long a test waits for a job that should finish: far more than any needs, so reaching
/// it means the job is stuck.
pub const WAIT: Duration = Duration::from_secs(30);

pub async fn start(
    store: Arc<dyn Store>,
    handlers: HandlerRegistry,
    config: EngineConfig,
) -> Engine {
    Engine::start(store, handlers, config).await.unwrap()
}

/// An instance that only enqueues and waits: nothing it holds in memory can run a job, so
/// whatever runs one went through the database.
pub fn producer_config() -> EngineConfig {
    EngineConfig {
        run_workers: false,
        ..test_config()
    }
}

/// One worker: a job that blocks it keeps every later job in the buffer.
pub fn single_worker_config() -> EngineConfig {
    EngineConfig {
        worker_count: Some(1),
        ..test_config()
    }
}

pub async fn enqueue_id(engine: &Engine, queue: &str, job_type: &str) -> JobId {
    let outcome = engine
        .enqueue(EnqueueRequest::new(queue, job_type, ""))
        .await
        .unwrap();
    outcome.id
}

/// `n` jobs enqueued one at a time, each waking the fetcher as a caller's enqueue does.
pub async fn enqueue_ids(engine: &Engine, queue: &str, job_type: &str, n: usize) -> Vec<JobId> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(enqueue_id(engine, queue, job_type).await);
    }
    ids
}

/// Handlers with only `key`, registered to block on the returned gate.
pub fn gated_handlers(key: &str) -> (HandlerRegistry, Gate) {
    let gate = Gate::new();
    let mut handlers = HandlerRegistry::new();
    register_blocking(&mut handlers, key, &gate);
    (handlers, gate)
}

/// An engine on `store` with one job of `job_type` running: its handler, registered on the
/// returned gate by `register`, has arrived there.
pub async fn start_running_one(
    store: &Arc<dyn Store>,
    config: EngineConfig,
    job_type: &str,
    register: impl FnOnce(&mut HandlerRegistry, &str, &Gate),
) -> (Engine, Gate, JobId) {
    let gate = Gate::new();
    let mut handlers = HandlerRegistry::new();
    register(&mut handlers, job_type, &gate);
    let engine = start(store.clone(), handlers, config).await;
    let id = enqueue_id(&engine, "default", job_type).await;
    gate.wait_arrivals(1).await;
    (engine, gate, id)
}

/// Enqueue one job and wait for its end.
pub async fn run_job(engine: &Engine, queue: &str, job_type: &str, payload: &str) -> WaitOutcome {
    let req = EnqueueRequest::new(queue, job_type, payload);
    engine.enqueue_and_wait(req, WAIT).await.unwrap().1
}

pub fn succeeded_job(outcome: WaitOutcome) -> Job {
    match outcome {
        WaitOutcome::Succeeded { job } => job,
        other => panic!("expected success, got {other:?}"),
    }
}

/// Wait for each job to end, and fail unless each succeeded.
pub async fn assert_all_succeed(engine: &Engine, ids: &[JobId]) {
    for id in ids {
        succeeded_job(engine.wait(*id, WAIT).await.unwrap());
    }
}

pub async fn states(store: &Arc<dyn Store>, ids: &[JobId]) -> Vec<JobState> {
    let mut states = Vec::with_capacity(ids.len());
    for id in ids {
        states.push(store.get_job(*id).await.unwrap().unwrap().state);
    }
    states
}

/// Wait until `cond` holds, for conditions no signal announces (a job sitting in the
/// buffer). Fails the test after 30 s.
pub async fn eventually(mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A gate for handlers: they `arrive`, then `wait_open`; the test waits for arrivals and
/// opens the gate. Tracks how many were inside at once.
#[derive(Clone, Default)]
pub struct Gate {
    inner: Arc<GateInner>,
}

#[derive(Default)]
struct GateInner {
    arrived: AtomicUsize,
    inside: AtomicUsize,
    max_inside: AtomicUsize,
    open: AtomicBool,
    changed: Notify,
}

impl Gate {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn arrive(&self) {
        let g = &self.inner;
        g.arrived.fetch_add(1, Ordering::SeqCst);
        let inside = g.inside.fetch_add(1, Ordering::SeqCst) + 1;
        g.max_inside.fetch_max(inside, Ordering::SeqCst);
        g.changed.notify_waiters();
    }

    pub fn leave(&self) {
        self.inner.inside.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn max_inside(&self) -> usize {
        self.inner.max_inside.load(Ordering::SeqCst)
    }

    pub fn open(&self) {
        self.inner.open.store(true, Ordering::SeqCst);
        self.inner.changed.notify_waiters();
    }

    pub async fn wait_open(&self) {
        self.wait_for(|g| g.open.load(Ordering::SeqCst)).await;
    }

    pub async fn wait_arrivals(&self, n: usize) {
        let waited = tokio::time::timeout(
            Duration::from_secs(30),
            self.wait_for(move |g| g.arrived.load(Ordering::SeqCst) >= n),
        )
        .await;
        assert!(
            waited.is_ok(),
            "fewer than {n} handlers arrived within 30 s"
        );
    }

    async fn wait_for(&self, cond: impl Fn(&GateInner) -> bool) {
        loop {
            let notified = self.inner.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if cond(&self.inner) {
                return;
            }
            notified.await;
        }
    }
}

/// A count a test can wait on: `reached(n)` resolves once `n` have been added.
#[derive(Default)]
pub struct AwaitedCount {
    value: AtomicUsize,
    changed: Notify,
}

impl AwaitedCount {
    pub fn add_one(&self) {
        self.value.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    pub async fn reached(&self, n: usize) {
        loop {
            // Registered before the check, so an addition between the two still wakes us.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.value.load(Ordering::SeqCst) >= n {
                return;
            }
            changed.await;
        }
    }
}

/// Delegates to a real store and counts `finished_jobs` calls (only the result sweep makes
/// them) and `mark_processing` calls (only buffered jobs need them). While
/// `refuse_completions` is on, `complete` fails the way a full disk makes it fail.
pub type CountingStore = InterposedStore<Counts>;

pub struct Counts {
    finished_jobs: AtomicUsize,
    mark_processing: AtomicUsize,
    refuse_completions: AtomicBool,
    refused: Notify,
    /// `get_job` calls that have returned.
    jobs_read: AwaitedCount,
}

/// A real store wrapped in fresh counts.
pub fn counting_store(inner: Arc<dyn Store>) -> CountingStore {
    InterposedStore::new(
        inner,
        Counts {
            finished_jobs: AtomicUsize::new(0),
            mark_processing: AtomicUsize::new(0),
            refuse_completions: AtomicBool::new(false),
            refused: Notify::new(),
            jobs_read: AwaitedCount::default(),
        },
    )
}

impl Counts {
    /// Resolves once `n` `get_job` calls have returned their answer.
    pub async fn jobs_read(&self, n: usize) {
        self.jobs_read.reached(n).await;
    }

    pub fn refuse_completions(&self, refuse: bool) {
        self.refuse_completions.store(refuse, Ordering::SeqCst);
    }

    /// Resolves at the next refused `complete` call (or at once if one came unawaited).
    pub async fn next_refusal(&self) {
        self.refused.notified().await;
    }

    pub fn mark_processing_calls(&self) -> usize {
        self.mark_processing.load(Ordering::SeqCst)
    }

    pub fn finished_jobs_calls(&self) -> usize {
        self.finished_jobs.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Interpose for Counts {
    async fn before(&self, call: StoreCall) -> StoreResult<()> {
        match call {
            StoreCall::MarkProcessing => {
                self.mark_processing.fetch_add(1, Ordering::SeqCst);
            }
            StoreCall::FinishedJobs => {
                self.finished_jobs.fetch_add(1, Ordering::SeqCst);
            }
            StoreCall::Complete if self.refuse_completions.load(Ordering::SeqCst) => {
                self.refused.notify_one();
                return Err(StoreError::Storage {
                    operation: "complete",
                    message: "database or disk is full".into(),
                    help: "refused by the test".into(),
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn after(&self, call: StoreCall) {
        if call == StoreCall::GetJob {
            self.jobs_read.add_one();
        }
    }
}

/// Register `key` as a handler that arrives at `gate` and holds its worker until the gate
/// opens: the way these tests keep the only worker busy.
pub fn register_blocking(handlers: &mut HandlerRegistry, key: &str, gate: &Gate) {
    register_gated(handlers, key, gate, ());
}

/// Like [`register_blocking`], and the job's result is `result`.
pub fn register_gated<R>(handlers: &mut HandlerRegistry, key: &str, gate: &Gate, result: R)
where
    R: serde::Serialize + Clone + Send + Sync + 'static,
{
    register_arriving(handlers, key, gate, move |_, gate| {
        let result = result.clone();
        async move {
            gate.wait_open().await;
            gate.leave();
            Ok(result)
        }
    });
}

/// Register `key` as a handler that arrives at `gate` and runs until its job is cancelled,
/// then fails its attempt, as a well-behaved handler does.
pub fn register_until_cancelled(handlers: &mut HandlerRegistry, key: &str, gate: &Gate) {
    register_arriving(handlers, key, gate, |ctx, _| async move {
        ctx.cancellation().cancelled().await;
        Err::<(), _>(HandlerError::transient("stopped by its cancellation"))
    });
}

/// Register `key` as a handler that arrives at `gate` and never finishes. It ignores its
/// cancellation on purpose: only the runtime dropping its future stops it.
pub fn register_hanging(handlers: &mut HandlerRegistry, key: &str, gate: &Gate) {
    register_arriving(handlers, key, gate, |_, _| async {
        std::future::pending::<()>().await;
        Ok(())
    });
}

/// Register `key` as a handler that arrives at `gate` as its job starts, then goes on as
/// `then` says.
fn register_arriving<R, Then, Fut>(
    handlers: &mut HandlerRegistry,
    key: &str,
    gate: &Gate,
    then: Then,
) where
    R: serde::Serialize + Send + 'static,
    Then: Fn(JobContext, Gate) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<R, HandlerError>> + Send + 'static,
{
    let gate = gate.clone();
    handlers.register(key, move |ctx: JobContext, _: serde_json::Value| {
        let rest = then(ctx, gate.clone());
        let gate = gate.clone();
        async move {
            gate.arrive();
            rest.await
        }
    });
}

/// Register `key` as a handler whose result is its payload.
pub fn register_echo(handlers: &mut HandlerRegistry, key: &str) {
    handlers.register(
        key,
        |_: JobContext, payload: serde_json::Value| async move { Ok(payload) },
    );
}

/// Register `key` as a no-op handler that counts its runs.
pub fn register_counting(handlers: &mut HandlerRegistry, key: &str) -> Arc<AtomicUsize> {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    handlers.register(key, move |_: JobContext, _: serde_json::Value| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { Ok(()) }
    });
    runs
}

//! Helpers shared by the runtime integration tests: temp SQLite stores, gates that handlers
//! block on, a condition wait, and a `Store` wrapper that counts result-sweep calls and can
//! refuse to commit completions.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use deck_engine::store::StoreOptions;
use deck_engine::*;
use tempfile::TempDir;
use tokio::sync::Notify;

/// A fresh database file in its own temporary directory (kept alive by the returned guard).
pub async fn open_store() -> (TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(&dir).await;
    (dir, store)
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

/// Delegates to a real store and counts `finished_jobs` calls (only the result sweep makes
/// them) and `mark_processing` calls (only buffered jobs need them). While
/// `refuse_completions` is on, `complete` fails the way a full disk makes it fail.
pub struct CountingStore {
    inner: Arc<dyn Store>,
    finished_jobs: AtomicUsize,
    mark_processing: AtomicUsize,
    refuse_completions: AtomicBool,
    refused: Notify,
    /// `get_job` calls that have returned, and a signal for each.
    jobs_read: AtomicUsize,
    job_read: Notify,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        CountingStore {
            inner,
            finished_jobs: AtomicUsize::new(0),
            mark_processing: AtomicUsize::new(0),
            refuse_completions: AtomicBool::new(false),
            refused: Notify::new(),
            jobs_read: AtomicUsize::new(0),
            job_read: Notify::new(),
        }
    }

    /// Resolves once `n` `get_job` calls have returned their answer.
    pub async fn jobs_read(&self, n: usize) {
        loop {
            let read = self.job_read.notified();
            tokio::pin!(read);
            read.as_mut().enable();
            if self.jobs_read.load(Ordering::SeqCst) >= n {
                return;
            }
            read.await;
        }
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
impl Store for CountingStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn orders_writes_on_submit(&self) -> bool {
        self.inner.orders_writes_on_submit()
    }

    async fn ping(&self) -> StoreResult<()> {
        self.inner.ping().await
    }

    fn health(&self) -> StoreHealth {
        self.inner.health()
    }

    async fn enqueue(&self, req: EnqueueRequest) -> StoreResult<EnqueueOutcome> {
        self.inner.enqueue(req).await
    }

    async fn enqueue_batch(&self, reqs: Vec<EnqueueRequest>) -> StoreResult<Vec<EnqueueOutcome>> {
        self.inner.enqueue_batch(reqs).await
    }

    async fn claim_batch(&self, req: ClaimRequest) -> StoreResult<Vec<Job>> {
        self.inner.claim_batch(req).await
    }

    async fn mark_processing(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<Vec<JobId>> {
        self.mark_processing.fetch_add(1, Ordering::SeqCst);
        self.inner.mark_processing(worker_id, ids).await
    }

    async fn heartbeat(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<HeartbeatReport> {
        self.inner.heartbeat(worker_id, ids).await
    }

    async fn release(
        &self,
        worker_id: &str,
        ids: &[JobId],
        run_at: Option<Timestamp>,
    ) -> StoreResult<u64> {
        self.inner.release(worker_id, ids, run_at).await
    }

    async fn complete(
        &self,
        worker_id: &str,
        completions: Vec<Completion>,
    ) -> StoreResult<Vec<Applied>> {
        if self.refuse_completions.load(Ordering::SeqCst) {
            self.refused.notify_one();
            return Err(StoreError::Storage {
                operation: "complete",
                message: "database or disk is full".into(),
                help: "refused by the test".into(),
            });
        }
        self.inner.complete(worker_id, completions).await
    }

    async fn cancel(&self, id: JobId) -> StoreResult<CancelOutcome> {
        self.inner.cancel(id).await
    }

    async fn resurrect(&self, id: JobId, edit: Option<JobEdit>) -> StoreResult<Applied> {
        self.inner.resurrect(id, edit).await
    }

    async fn edit_job(&self, id: JobId, edit: JobEdit) -> StoreResult<Job> {
        self.inner.edit_job(id, edit).await
    }

    async fn purge(&self, source: Pillar, ids: &[JobId]) -> StoreResult<u64> {
        self.inner.purge(source, ids).await
    }

    async fn bulk_by_ids(
        &self,
        action: BulkAction,
        source: Pillar,
        ids: &[JobId],
    ) -> StoreResult<u64> {
        self.inner.bulk_by_ids(action, source, ids).await
    }

    async fn bulk_preview(
        &self,
        source: Pillar,
        filter: &JobFilter,
        sample: u32,
    ) -> StoreResult<BulkPreview> {
        self.inner.bulk_preview(source, filter, sample).await
    }

    async fn bulk_by_filter(
        &self,
        action: BulkAction,
        source: Pillar,
        filter: &JobFilter,
        cap: u32,
    ) -> StoreResult<u64> {
        self.inner.bulk_by_filter(action, source, filter, cap).await
    }

    async fn list_queues(&self) -> StoreResult<Vec<QueueConfig>> {
        self.inner.list_queues().await
    }

    async fn update_queue(&self, name: &str, patch: QueuePatch) -> StoreResult<QueueConfig> {
        self.inner.update_queue(name, patch).await
    }

    async fn load_settings(&self) -> StoreResult<EngineSettings> {
        self.inner.load_settings().await
    }

    async fn save_settings(&self, settings: &EngineSettings) -> StoreResult<()> {
        self.inner.save_settings(settings).await
    }

    async fn rescue(&self, policy: &RescuePolicy) -> StoreResult<RescueReport> {
        self.inner.rescue(policy).await
    }

    async fn prune(&self, policy: &RetentionPolicy) -> StoreResult<PruneReport> {
        self.inner.prune(policy).await
    }

    async fn heartbeat_instance(&self, info: &InstanceInfo) -> StoreResult<()> {
        self.inner.heartbeat_instance(info).await
    }

    async fn deregister_instance(&self, id: &str) -> StoreResult<()> {
        self.inner.deregister_instance(id).await
    }

    async fn list_instances(&self, max_age: std::time::Duration) -> StoreResult<Vec<InstanceInfo>> {
        self.inner.list_instances(max_age).await
    }

    async fn append_audit(&self, entry: NewAuditEntry) -> StoreResult<AuditEntry> {
        self.inner.append_audit(entry).await
    }

    async fn list_audit(&self, before_id: Option<i64>, limit: u32) -> StoreResult<Vec<AuditEntry>> {
        self.inner.list_audit(before_id, limit).await
    }

    async fn get_job(&self, id: JobId) -> StoreResult<Option<Job>> {
        let job = self.inner.get_job(id).await;
        self.jobs_read.fetch_add(1, Ordering::SeqCst);
        self.job_read.notify_waiters();
        job
    }

    async fn finished_jobs(&self, ids: &[JobId]) -> StoreResult<Vec<Job>> {
        self.finished_jobs.fetch_add(1, Ordering::SeqCst);
        self.inner.finished_jobs(ids).await
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Page<JobSummary>> {
        self.inner.list_jobs(query).await
    }

    async fn summary(&self) -> StoreResult<Summary> {
        self.inner.summary().await
    }

    async fn queue_stats(&self) -> StoreResult<Vec<QueueStats>> {
        self.inner.queue_stats().await
    }

    async fn throughput(
        &self,
        minutes: u32,
        queue: Option<&str>,
    ) -> StoreResult<Vec<ThroughputBucket>> {
        self.inner.throughput(minutes, queue).await
    }

    async fn top_errors(&self, limit: u32) -> StoreResult<Vec<ErrorGroup>> {
        self.inner.top_errors(limit).await
    }
}

/// Register `key` as a handler that arrives at `gate` and holds its worker until the gate
/// opens: the way these tests keep the only worker busy.
pub fn register_blocking(handlers: &mut HandlerRegistry, key: &str, gate: &Gate) {
    let gate = gate.clone();
    handlers.register(key, move |_: JobContext, _: serde_json::Value| {
        let gate = gate.clone();
        async move {
            gate.arrive();
            gate.wait_open().await;
            Ok(())
        }
    });
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

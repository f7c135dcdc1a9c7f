//! The ops endpoints (`/metrics`, `/readyz`, `/api/v1/stats`) and the console's pages share
//! one telemetry snapshot per tick and one database ping: a crowd of concurrent requests
//! costs the store one read of each, not one per request.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use deck_engine::*;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::config::Settings;
use crate::state::AppState;

/// Delegates to a real store; counts telemetry reads and pings, and holds summaries and
/// pings until the test opens the gate, so every request is in flight at once.
struct GatedStore {
    inner: Arc<dyn Store>,
    gate: Semaphore,
    summaries: AtomicUsize,
    queue_stats: AtomicUsize,
    pings: AtomicUsize,
}

impl GatedStore {
    async fn gated(&self, counter: &AtomicUsize) {
        counter.fetch_add(1, Ordering::SeqCst);
        // The permit goes back at once: an open gate lets every later call through.
        drop(self.gate.acquire().await);
    }
}

const REQUESTS_PER_PATH: usize = 10;

#[tokio::test]
async fn concurrent_ops_and_console_reads_share_one_snapshot_and_one_ping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deck.db");
    let sqlite = deck_engine::store::sqlite::open(path.to_str().unwrap(), &StoreOptions::default())
        .await
        .unwrap();
    sqlite
        .enqueue(EnqueueRequest::new("q", "t", "null"))
        .await
        .unwrap();
    let store = Arc::new(GatedStore {
        inner: sqlite,
        gate: Semaphore::new(0),
        summaries: AtomicUsize::new(0),
        queue_stats: AtomicUsize::new(0),
        pings: AtomicUsize::new(0),
    });
    let config = EngineConfig {
        run_workers: false,
        ..EngineConfig::default()
    };
    let engine = Engine::start(store.clone(), HandlerRegistry::new(), config)
        .await
        .unwrap();
    let router = crate::http::router(AppState::new(engine.clone(), Settings::default()));

    let paths = ["/metrics", "/readyz", "/api/v1/stats", "/", "/queues"];
    let requests: Vec<_> = paths
        .iter()
        .flat_map(|p| std::iter::repeat_n(*p, REQUESTS_PER_PATH))
        .map(|path| {
            let router = router.clone();
            tokio::spawn(async move {
                let response = router
                    .oneshot(Request::get(path).body(Body::empty()).unwrap())
                    .await
                    .unwrap();
                (path, response.status())
            })
        })
        .collect();
    // On this single-threaded runtime a yield runs every new request up to the point where
    // it waits: on the gate (the one snapshot read, the one ping) or behind them.
    while store.summaries.load(Ordering::SeqCst) == 0 || store.pings.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    store.gate.add_permits(1);
    for request in requests {
        let (path, status) = request.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{path}");
    }
    assert_eq!(store.summaries.load(Ordering::SeqCst), 1, "summary reads");
    assert_eq!(
        store.queue_stats.load(Ordering::SeqCst),
        1,
        "queue stats reads"
    );
    assert_eq!(store.pings.load(Ordering::SeqCst), 1, "pings");
    engine.shutdown().await;
}

#[async_trait]
impl Store for GatedStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn orders_writes_on_submit(&self) -> bool {
        self.inner.orders_writes_on_submit()
    }

    async fn ping(&self) -> StoreResult<()> {
        self.gated(&self.pings).await;
        self.inner.ping().await
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
        self.inner.get_job(id).await
    }

    async fn finished_jobs(&self, ids: &[JobId]) -> StoreResult<Vec<Job>> {
        self.inner.finished_jobs(ids).await
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Page<JobSummary>> {
        self.inner.list_jobs(query).await
    }

    async fn summary(&self) -> StoreResult<Summary> {
        self.gated(&self.summaries).await;
        self.inner.summary().await
    }

    async fn queue_stats(&self) -> StoreResult<Vec<QueueStats>> {
        self.queue_stats.fetch_add(1, Ordering::SeqCst);
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

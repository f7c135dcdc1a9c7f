//! The console's shared state: what it reads and acts through (`ConsoleBackend`), the
//! recent-event ring, the telemetry snapshot it shares with the API and the ops endpoints
//! (`deck_web::telemetry`), edit drafts and the list links of bulk runs.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::Utc;
use deck_engine::{
    EngineEvent, JobEdit, JobId, Operations, RunTimeHistogram, Store, StoreError, StoreReads,
    StoreResult,
};
use deck_web::TickCache;
use deck_web::auth::session::random_token;
use deck_web::telemetry::{DEFAULT_TICK, SharedTelemetry};
use tokio::sync::broadcast;

use crate::live::OverviewFrame;
use crate::telemetry_view::{ConsoleEvent, EventLevel, RuntimeView, Telemetry};

/// What the console needs from the engine: the one door for writes (`operations`), the
/// store for reads, this process's runtime and its events. Implemented for a running
/// `Engine` (actions reach the runtime: a local running job stops at once, worker counts
/// change live) and for a bare store (tests, benchmarks, a console-only process).
pub trait ConsoleBackend: Send + Sync + 'static {
    /// Every write the console makes goes through here.
    fn operations(&self) -> &Operations;

    /// For reads: the store's read side, so a page cannot write past the operations layer.
    fn store(&self) -> &Arc<dyn StoreReads> {
        self.operations().store()
    }

    /// Workers, prefetch buffer and circuit breakers of this process.
    fn runtime(&self) -> RuntimeView {
        RuntimeView::default()
    }

    /// Recent events (engine and operator actions) since the last call, for the event
    /// console.
    fn drain_events(&self) -> Vec<ConsoleEvent>;

    /// The jobs this process is running now, with their latest progress report.
    fn running_jobs(&self) -> Vec<deck_engine::RunningJobInfo> {
        Vec::new()
    }
}

/// A console over a bare store: no runtime in this process.
pub struct StoreBackend {
    ops: Operations,
    events: Mutex<broadcast::Receiver<EngineEvent>>,
}

impl StoreBackend {
    pub fn new(store: Arc<dyn Store>) -> Self {
        let ops = Operations::over_store(store);
        // Subscribed from the start: without a runtime the stream carries only the
        // actions taken here, so listening costs nothing.
        let events = Mutex::new(ops.subscribe_events());
        StoreBackend { ops, events }
    }
}

impl ConsoleBackend for StoreBackend {
    fn operations(&self) -> &Operations {
        &self.ops
    }

    fn drain_events(&self) -> Vec<ConsoleEvent> {
        let mut rx = self.events.lock().unwrap_or_else(|p| p.into_inner());
        crate::engine_backend::drain(&mut rx)
    }
}

/// Knobs with defaults; the server may override them.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    /// How often the live panels refresh and a queue's chart is read again. A console made
    /// by [`Console::new`] reads its own snapshot this often too; one made by
    /// [`Console::sharing`] reads the shared snapshot at that snapshot's tick.
    pub tick: Duration,
    /// Default and hard maximum of jobs one bulk-by-filter run touches.
    pub bulk_cap_default: u32,
    pub bulk_cap_max: u32,
    /// Rows per page in job lists.
    pub page_size: u32,
    /// Lines kept in the live event console.
    pub event_lines: usize,
}

impl Default for ConsoleOptions {
    fn default() -> Self {
        ConsoleOptions {
            tick: DEFAULT_TICK,
            bulk_cap_default: 1_000,
            bulk_cap_max: deck_engine::validation::MAX_BULK_CAP,
            page_size: 50,
            event_lines: 40,
        }
    }
}

/// A proposed edit waiting for the operator to confirm it after seeing the diff.
#[derive(Debug, Clone)]
pub struct Draft {
    pub job: JobId,
    pub edit: JobEdit,
    /// The raw text the operator typed, kept so a rejected edit is not lost.
    pub payload_text: String,
    pub tags_text: String,
    pub priority_text: String,
    pub queue_text: String,
    pub error: Option<String>,
    pub created: std::time::Instant,
}

/// A schedule form the engine (or the form itself) refused, kept as typed so the page can
/// show it again with the problem next to it.
#[derive(Debug, Clone)]
pub struct ScheduleDraft {
    pub form: crate::schedule_form::ScheduleForm,
    pub problem: deck_engine::validation::ValidationError,
    /// The schedule being edited; `None` for a new one.
    pub editing: Option<String>,
    pub created: std::time::Instant,
}

struct Inner {
    backend: Arc<dyn ConsoleBackend>,
    options: ConsoleOptions,
    events: Mutex<VecDeque<ConsoleEvent>>,
    /// The snapshot and run times, each read once per tick for every reader of them.
    telemetry: Arc<SharedTelemetry>,
    /// The overview rendered from the current snapshot, shared by page loads and the live
    /// stream; held while a new one renders so concurrent loads wait for it.
    overview: tokio::sync::Mutex<Option<Arc<OverviewFrame>>>,
    /// Each queue's chart on the queues page, shared the same way.
    charts: Mutex<HashMap<String, Arc<QueueChart>>>,
    drafts: Mutex<HashMap<String, Draft>>,
    schedule_drafts: Mutex<HashMap<String, ScheduleDraft>>,
    /// Each bulk run started here: the list link of its filter, for its progress page.
    run_links: Mutex<HashMap<String, String>>,
}

/// Cheap to clone; provided as Leptos context to pages and server functions.
#[derive(Clone)]
pub struct Console(Arc<Inner>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these small maps leaves usable data; keep serving.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

type QueueChart = TickCache<String, StoreError>;

impl Console {
    /// A console with a telemetry snapshot of its own, read through `backend` every
    /// `options.tick` (tests, benchmarks, a console-only process).
    pub fn new(backend: impl ConsoleBackend, options: ConsoleOptions) -> Self {
        let backend: Arc<dyn ConsoleBackend> = Arc::new(backend);
        let source = Arc::clone(&backend);
        let telemetry = SharedTelemetry::new(
            backend.store().clone(),
            move || source.runtime(),
            options.tick,
        );
        Self::build(backend, options, Arc::new(telemetry))
    }

    /// A console that reads `telemetry`, the snapshot the server also serves to the API and
    /// the ops endpoints.
    pub fn sharing(
        backend: impl ConsoleBackend,
        options: ConsoleOptions,
        telemetry: Arc<SharedTelemetry>,
    ) -> Self {
        Self::build(Arc::new(backend), options, telemetry)
    }

    fn build(
        backend: Arc<dyn ConsoleBackend>,
        options: ConsoleOptions,
        telemetry: Arc<SharedTelemetry>,
    ) -> Self {
        Console(Arc::new(Inner {
            backend,
            telemetry,
            overview: tokio::sync::Mutex::new(None),
            charts: Mutex::new(HashMap::new()),
            options,
            events: Mutex::new(VecDeque::new()),
            drafts: Mutex::new(HashMap::new()),
            schedule_drafts: Mutex::new(HashMap::new()),
            run_links: Mutex::new(HashMap::new()),
        }))
    }

    pub fn backend(&self) -> &dyn ConsoleBackend {
        self.0.backend.as_ref()
    }

    /// For reads; every write goes through [`Console::ops`].
    pub fn store(&self) -> &Arc<dyn StoreReads> {
        self.0.backend.store()
    }

    /// The one door for writes: validated, applied, announced and audited as from the API.
    /// Progress of the jobs running in this process, by id.
    pub fn running_progress(&self) -> HashMap<JobId, deck_engine::Progress> {
        self.backend()
            .running_jobs()
            .into_iter()
            .filter_map(|r| r.progress.map(|p| (r.id, p)))
            .collect()
    }

    pub fn ops(&self) -> &Operations {
        self.0.backend.operations()
    }

    pub fn options(&self) -> &ConsoleOptions {
        &self.0.options
    }

    pub fn push_event(&self, level: EventLevel, text: String) {
        let mut events = lock(&self.0.events);
        events.push_front(ConsoleEvent {
            at: Utc::now(),
            level,
            text,
            job_id: None,
        });
        events.truncate(self.0.options.event_lines);
    }

    fn collect_engine_events(&self) {
        let fresh = self.0.backend.drain_events();
        if fresh.is_empty() {
            return;
        }
        let mut events = lock(&self.0.events);
        for e in fresh {
            events.push_front(e);
        }
        events.truncate(self.0.options.event_lines);
    }

    pub fn recent_events(&self) -> Vec<ConsoleEvent> {
        self.collect_engine_events();
        lock(&self.0.events).iter().cloned().collect()
    }

    /// The shared snapshot, read at most once per tick however many callers ask: console
    /// pages, the live stream and (when shared) the API and the server's ops endpoints.
    /// The event console's lines are not part of it (`overview` adds them).
    pub async fn telemetry(&self) -> StoreResult<Arc<Telemetry>> {
        self.0.telemetry.snapshot().await
    }

    /// The overview's panels for the current snapshot, with the event console's lines as
    /// of when it was rendered: rendered once per snapshot for every page load and the live
    /// stream.
    pub async fn overview(&self) -> StoreResult<Arc<OverviewFrame>> {
        let snapshot = self.telemetry().await?;
        let mut current = self.0.overview.lock().await;
        if let Some(frame) = current.as_ref()
            && Arc::ptr_eq(&frame.snapshot, &snapshot)
        {
            return Ok(Arc::clone(frame));
        }
        let mut with_events = (*snapshot).clone();
        with_events.events = self.recent_events();
        let frame = Arc::new(OverviewFrame::render(snapshot, with_events));
        *current = Some(Arc::clone(&frame));
        Ok(frame)
    }

    /// One queue's throughput chart over the last hour (the queues page), rendered, read
    /// and rendered at most once per tick like the snapshot.
    pub async fn queue_chart(&self, queue: &str) -> StoreResult<Arc<String>> {
        let chart = {
            let mut charts = lock(&self.0.charts);
            // Queue names come from the store, never from the request: the map stays as
            // small as the set of queues.
            Arc::clone(
                charts
                    .entry(queue.to_string())
                    .or_insert_with(|| Arc::new(TickCache::new(self.0.options.tick))),
            )
        };
        chart
            .get(|| async {
                let buckets = self.store().throughput(60, Some(queue)).await?;
                Ok(crate::pages::queues::render_chart(buckets))
            })
            .await
    }

    /// Per job type, the run times of the runs that ended in the last hour (the queues page
    /// and `/metrics`): read at most once per tick, from the run-time bins, never the archive.
    pub async fn run_times(&self) -> StoreResult<Arc<Vec<RunTimeHistogram>>> {
        self.0.telemetry.run_times().await
    }

    pub fn put_draft(&self, draft: Draft) -> String {
        let id = random_token();
        let mut drafts = lock(&self.0.drafts);
        // Drafts are only useful for a few minutes; drop stale ones on the way.
        drafts.retain(|_, d| d.created.elapsed() < Duration::from_secs(3_600));
        drafts.insert(id.clone(), draft);
        id
    }

    pub fn draft(&self, id: &str) -> Option<Draft> {
        lock(&self.0.drafts).get(id).cloned()
    }

    pub fn take_draft(&self, id: &str) -> Option<Draft> {
        lock(&self.0.drafts).remove(id)
    }

    pub fn put_schedule_draft(&self, draft: ScheduleDraft) -> String {
        let id = random_token();
        let mut drafts = lock(&self.0.schedule_drafts);
        drafts.retain(|_, d| d.created.elapsed() < Duration::from_secs(3_600));
        drafts.insert(id.clone(), draft);
        id
    }

    /// Kept (not taken) when shown: a reload of the rejected form shows it again.
    pub fn schedule_draft(&self, id: &str) -> Option<ScheduleDraft> {
        lock(&self.0.schedule_drafts).get(id).cloned()
    }

    /// Remember the list link of a bulk run's filter (its progress page links back to it).
    pub fn remember_run_link(&self, run: &str, list_url: String) {
        let mut links = lock(&self.0.run_links);
        // Runs are few; a bound keeps a long-lived console from growing without end.
        if links.len() >= 1_000 {
            links.clear();
        }
        links.insert(run.to_string(), list_url);
    }

    /// The list link of a bulk run started by this console.
    pub fn run_link(&self, run: &str) -> Option<String> {
        lock(&self.0.run_links).get(run).cloned()
    }
}

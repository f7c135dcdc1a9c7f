//! The store contract: every database operation the runtime, the console and the API need,
//! grouped by consistency class (DESIGN §4). One contract in two traits — [`StoreReads`],
//! which the console and the API get, and [`Store`], its writes, which only the operations
//! layer and the runtime hold — one conformance suite (`conformance`), one module per backend.
//!
//! Conventions every backend follows:
//! - Input is validated once, before the store, by the operations layer (`crate::ops`),
//!   the door every write takes; a store trusts what reaches it and refuses only what its
//!   schema cannot hold (SQL Server's column widths), with the same `StoreError::Invalid`.
//! - Every move between pillars is one transaction that also updates the per-queue counters,
//!   the per-minute metric buckets and the DLQ error groups; it happens completely or not at all.
//! - Worker-owned transitions require `worker_id` to match and the expected status; otherwise
//!   they report `Applied::NotApplied` and change nothing.
//! - Times that decide correctness (due, expiry, heartbeat age) come from the database clock.
//! - Final transitions (to archive or DLQ) enqueue the job's continuation, when it has one
//!   whose trigger fires, in the same transaction.

use contract::*;

pub(crate) mod contract;
pub mod health;
pub mod open;
pub mod sqlite;
pub mod sqlserver;

#[cfg(any(test, feature = "testing"))]
pub mod interposed;

pub use health::{StoreHealth, WriteFailure};
pub use open::{DatabaseUrl, SqliteSynchronous, StoreOptions, open_store};

/// The read side of a store: what the console, the JSON API and health checks may call.
/// Nothing here changes a row, so handing it out cannot open a second door for writes.
#[async_trait]
pub trait StoreReads: Send + Sync + 'static {
    /// Backend name for logs and metrics: `"sqlite"` or `"sqlserver"`.
    fn backend(&self) -> &'static str;

    /// A cheap round trip proving the database answers and the schema is in place (`/readyz`).
    async fn ping(&self) -> StoreResult<()>;

    /// How recent writes went and whether the store stopped accepting work, from what the
    /// store saw itself (no database call; cheap enough for every readiness probe).
    /// Default: nothing known, reported healthy (a backend that does not track it).
    fn health(&self) -> StoreHealth {
        StoreHealth::default()
    }

    // ------------------------------------------------------------------ committed reads: operators

    /// How many jobs of `source` match `filter`, and the first `sample` of them (newest first).
    async fn bulk_preview(
        &self,
        source: Pillar,
        filter: &JobFilter,
        sample: u32,
    ) -> StoreResult<BulkPreview>;

    // ------------------------------------------------------------------ queues and settings

    /// Committed read of every queue's settings row, by name.
    async fn list_queues(&self) -> StoreResult<Vec<QueueConfig>>;

    /// Engine-wide settings; defaults when none were saved yet.
    async fn load_settings(&self) -> StoreResult<EngineSettings>;

    // ------------------------------------------------------------------ schedules

    /// Committed read of every schedule, by name, with its last run.
    async fn list_schedules(&self) -> StoreResult<Vec<Schedule>>;

    /// A schedule's handled occurrences, newest first, at most `limit`.
    async fn schedule_runs(&self, name: &str, limit: u32) -> StoreResult<Vec<ScheduleRun>>;

    // ------------------------------------------------------------------ batches

    /// Committed read of one batch.
    async fn get_batch(&self, id: BatchId) -> StoreResult<Option<Batch>>;

    /// Batches newest first, `before` pages back.
    async fn list_batches(&self, before: Option<BatchId>, limit: u32) -> StoreResult<Vec<Batch>>;

    /// A batch's members in whichever pillar each is: active first, then dead, then
    /// succeeded; at most `limit`.
    async fn batch_members(&self, id: BatchId, limit: u32) -> StoreResult<Vec<JobSummary>>;

    // ------------------------------------------------------------------ instances and audit log

    /// Instances whose heartbeat is at most `max_age` old, and any older or stopped one that
    /// still holds jobs (lost: its jobs wait for the rescue), newest heartbeat first; each with
    /// the jobs it holds (`held_jobs`) and whether it stopped cleanly (`stopped`).
    async fn list_instances(&self, max_age: std::time::Duration) -> StoreResult<Vec<InstanceInfo>>;

    /// Newest first, `before_id` pages back; only entries `filter` matches.
    async fn list_audit(
        &self,
        filter: &AuditFilter,
        before_id: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<AuditEntry>>;

    // ------------------------------------------------------------------ committed reads: jobs

    /// One job from whichever pillar holds it.
    async fn get_job(&self, id: JobId) -> StoreResult<Option<Job>>;

    /// Those of `ids` that have finished (archive or DLQ), for result waiters.
    async fn finished_jobs(&self, ids: &[JobId]) -> StoreResult<Vec<Job>>;

    /// A keyset page of one pillar, filtered and sorted by a whitelisted column. Ties keep one
    /// stable order the store chooses (SQL Server: the id; SQLite: insertion order), found
    /// again from the cursor's id.
    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Page<JobSummary>>;

    /// The jobs an id or id prefix (`query::job_id_prefix`) pasted into a search names, in
    /// every pillar (up to `limit` each, active first): what a search of one list finds in
    /// the others. Empty for any other text. Only the primary key's order answers it: the
    /// text search's scan is given no window to read.
    async fn find_by_id(&self, text: &str, limit: u32) -> StoreResult<Vec<JobSummary>> {
        let text = text.trim();
        if text.parse::<JobId>().is_err() && crate::query::job_id_prefix(text).is_none() {
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        for pillar in Pillar::ALL {
            let mut query = JobQuery::new(pillar);
            query.page_size = limit;
            query.filter.text = Some(text.to_string());
            query.filter.scan_from = Some(chrono::Utc::now() + chrono::Duration::days(1));
            found.extend(self.list_jobs(&query).await?.items);
        }
        Ok(found)
    }

    /// How many jobs of one pillar match a filter: exact when the filter is empty (the
    /// maintained counters; the active list counts its rows), otherwise up to `COUNT_CAP`.
    async fn count_jobs(&self, source: Pillar, filter: &JobFilter) -> StoreResult<JobCount>;

    /// Where a search that scans `SEARCH_WINDOW_ROWS` rows of a list stops: the list time
    /// (created for active jobs, finished otherwise) of the that-many-th newest row listed
    /// before `before` (all rows without it). `None` when fewer rows are there: a scan then
    /// reads them all.
    async fn search_window(
        &self,
        source: Pillar,
        before: Option<Timestamp>,
    ) -> StoreResult<Option<Timestamp>>;

    // ------------------------------------------------------------------ telemetry (approximate)

    async fn summary(&self) -> StoreResult<Summary>;

    /// Every queue that has a settings row or jobs, with live counts and lag.
    async fn queue_stats(&self) -> StoreResult<Vec<QueueStats>>;

    /// The last `minutes` per-minute buckets, oldest first, missing minutes filled with zeros;
    /// one queue or all.
    async fn throughput(
        &self,
        minutes: u32,
        queue: Option<&str>,
    ) -> StoreResult<Vec<ThroughputBucket>>;

    /// The largest groups of DLQ jobs by (reason, error prefix).
    async fn top_errors(&self, limit: u32) -> StoreResult<Vec<ErrorGroup>>;

    /// Per job type, the run times of the runs that ended in the last `minutes` minutes
    /// (the current one included) as histogram bins, job types by name.
    async fn run_times(&self, minutes: u32) -> StoreResult<Vec<RunTimeHistogram>>;

    /// Pending jobs (due or scheduled) per (queue, job type), the largest groups first, at
    /// most `limit` groups: what the console holds against the instances that take them.
    async fn pending_groups(&self, limit: u32) -> StoreResult<Vec<PendingGroup>>;
}

/// The whole store: its reads and every write. Only the operations layer (`crate::ops`) and
/// the runtime hold one; everything above them gets [`StoreReads`], so a write has one door.
#[async_trait]
pub trait Store: StoreReads {
    /// Whether every write is handed to one ordered writer by the first poll of its future
    /// (SQLite's writer thread), so a claim submitted after that poll sees the write. The
    /// runtime then wakes its fetcher as soon as an enqueue is submitted, and the job can
    /// start while the enqueue's fsync is still running. Default: false (wake after commit).
    fn orders_writes_on_submit(&self) -> bool {
        false
    }

    // ------------------------------------------------------------------ transitions: producers

    /// Insert one pending job. With an idempotency key that an active (hot) job already holds,
    /// nothing is written and that job's id comes back with `created: false`.
    /// Creates the queue's settings row on first use.
    async fn enqueue(&self, req: EnqueueRequest) -> StoreResult<EnqueueOutcome>;

    /// Insert many jobs in one transaction, with the same idempotency rule per job (also
    /// between jobs of the same batch). Outcomes are in request order. All or nothing.
    async fn enqueue_batch(&self, reqs: Vec<EnqueueRequest>) -> StoreResult<Vec<EnqueueOutcome>>;

    // ------------------------------------------------------------------ transitions: workers

    /// Claim up to `limit` due pending jobs from unpaused queues (highest priority first, then
    /// earliest due, then id) and mark them `Fetched` by `worker_id`. Each queue's `max_workers`
    /// holds cluster-wide and inside this batch: fetched + processing + claimed ≤ max.
    /// Jobs whose `expires_at` has passed are not claimed (the rescue sweep dead-letters them).
    async fn claim_batch(&self, req: ClaimRequest) -> StoreResult<Vec<Job>>;

    /// The ownership check before user code runs: `Fetched` by `worker_id` → `Processing`,
    /// attempt + 1, `started_at` and `heartbeat_at` = now. Returns the ids that were started;
    /// an id missing from the answer must not run (it was released, rescued or cancelled).
    async fn mark_processing(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<Vec<JobId>>;

    /// Write `heartbeat_at` = now on each `Processing` job still owned by `worker_id`, and
    /// report which of them an operator asked to cancel and which are no longer owned.
    async fn heartbeat(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<HeartbeatReport>;

    /// `Fetched` by `worker_id` → `Pending` (prefetch buffer released on pause or shutdown, or a
    /// circuit-breaker deferral when `run_at` is given). No attempt is spent. Returns how many.
    async fn release(
        &self,
        worker_id: &str,
        ids: &[JobId],
        run_at: Option<Timestamp>,
    ) -> StoreResult<u64>;

    /// Finish jobs `Processing` by `worker_id`, all in one transaction (group commit).
    /// Returns one `Applied` per completion, in order; `NotApplied` when the job is no longer
    /// this worker's (a zombie rescued meanwhile, a racing completion, a purge).
    async fn complete(
        &self,
        worker_id: &str,
        completions: Vec<Completion>,
    ) -> StoreResult<Vec<Applied>>;

    // ------------------------------------------------------------------ transitions: operators

    /// Pending or fetched → DLQ `Cancelled` at once; processing → `cancel_requested`, which the
    /// owning worker (in any instance) picks up with its next heartbeat.
    async fn cancel(&self, id: JobId) -> StoreResult<CancelOutcome>;

    /// DLQ → pending, due now, attempts and worker cleared, error history kept, optionally with
    /// edits (the first payload is kept in `original_payload`). If an active job now holds the
    /// job's idempotency key, the resurrected job loses its key rather than failing.
    /// `Err(JobNotFound)` when the job is not in the DLQ.
    async fn resurrect(&self, id: JobId, edit: Option<JobEdit>) -> StoreResult<Applied>;

    /// Edit a pending (hot) or dead (DLQ) job in place, keeping the first payload in
    /// `original_payload`. `Err(InvalidState)` for fetched, processing or archived jobs.
    async fn edit_job(&self, id: JobId, edit: JobEdit) -> StoreResult<Job>;

    /// Delete jobs for good from one pillar (hot: only pending ones). Counters follow.
    /// Returns how many rows went.
    async fn purge(&self, source: Pillar, ids: &[JobId]) -> StoreResult<u64>;

    /// Apply a bulk action to selected jobs of one pillar. Returns how many were affected.
    /// Resurrect: DLQ only. Cancel: hot only. Purge: as `purge`.
    async fn bulk_by_ids(
        &self,
        action: BulkAction,
        source: Pillar,
        ids: &[JobId],
    ) -> StoreResult<u64>;

    /// One step of a bulk action over a filter: the jobs of `source` that `filter` matches
    /// and whose id sorts after `after`, at most `limit` of them in id order, get `action`,
    /// in one short transaction (or a few). Active jobs that are not pending are not
    /// selected for purge. Progress comes from the cursor: a step starts after the last id
    /// the previous one selected. The loop over steps, their size and the cap live in the
    /// operations layer (`Operations::bulk_by_filter`).
    async fn bulk_filter_step(&self, step: BulkFilterStep<'_>) -> StoreResult<BulkStep>;

    // ------------------------------------------------------------------ queues and settings

    /// Create or update a queue's settings. Takes effect on every instance.
    async fn update_queue(&self, name: &str, patch: QueuePatch) -> StoreResult<QueueConfig>;

    async fn save_settings(&self, settings: &EngineSettings) -> StoreResult<()>;

    // ------------------------------------------------------------------ schedules

    /// Create a schedule, handled through now (by the database clock): its first occurrence
    /// is the first one after now. `Conflict` `schedule_exists` when the name is taken.
    async fn create_schedule(
        &self,
        definition: ScheduleDefinition,
        origin: ScheduleOrigin,
        enabled: bool,
    ) -> StoreResult<Schedule>;

    /// Replace a schedule's definition (and origin), keeping its state: enabled, last run,
    /// history. The new definition starts from now: `handled_through` moves up to now (never
    /// back), so no occurrence from before the edit is caught up on. `ScheduleNotFound` when
    /// there is none by that name.
    async fn replace_schedule(
        &self,
        definition: ScheduleDefinition,
        origin: ScheduleOrigin,
    ) -> StoreResult<Schedule>;

    /// Pause or resume. Resuming moves `handled_through` up to now, so what passed while
    /// paused is not caught up on. `ScheduleNotFound` when absent.
    async fn set_schedule_enabled(&self, name: &str, enabled: bool) -> StoreResult<Schedule>;

    /// Delete a schedule and its history (its jobs stay). `NotApplied` when absent.
    async fn delete_schedule(&self, name: &str) -> StoreResult<Applied>;

    /// Handle occurrences of one schedule in one transaction: per occurrence, write its key
    /// (schedule, scheduled time, manual) unless it is there already, and its job — or, with
    /// `skip_while_active` and the schedule's last job still in the hot pillar, the key
    /// alone, marked skipped. The schedule's last run and `handled_through` (never moved
    /// back) follow. A disabled schedule handles nothing unless the fire is manual.
    /// Outcomes in occurrence order. `ScheduleNotFound` when the schedule is gone.
    async fn fire_schedule(&self, fire: ScheduleFire) -> StoreResult<Vec<FireOutcome>>;

    // ------------------------------------------------------------------ batches

    /// Write a batch and every member (pending, each with the batch's id) in one
    /// transaction, or nothing. From then on every final move of a member (success, death,
    /// cancel, expiry, rescue) counts it in the batch row in the move's own transaction, and
    /// the callbacks the counts make due are enqueued there, each at most once (see
    /// `crate::batch`); a resurrected dead member reopens the batch, a purged pending member
    /// leaves it.
    async fn create_batch(&self, req: BatchRequest) -> StoreResult<BatchCreated>;

    // ------------------------------------------------------------------ maintenance

    /// One rescue step: at most `step.limit` rows of `step.kind` (see [`RescueKind`](crate::model::RescueKind)) moved in
    /// one transaction, by the database clock; returns how many. Jobs of instances whose
    /// heartbeat is older than `dead_instance_timeout` count as stale at once. The sweep —
    /// every kind, step after step until one comes back short — is `maintenance::rescue`.
    async fn rescue_step(&self, step: RescueStep<'_>) -> StoreResult<u64>;

    /// One retention step: delete at most `limit` of `target`'s rows older than `older_than`
    /// (by the database clock), oldest first, in one transaction, counters (and a pruned
    /// DLQ's error groups) following. Returns how many went. The loop over targets and steps
    /// lives in `maintenance::prune`.
    async fn prune_step(&self, step: PruneStep) -> StoreResult<u64>;

    // ------------------------------------------------------------------ instances

    /// Insert or refresh this instance's row (`heartbeat_at` = now, worker counts) and
    /// answer its stored quiet flag, so the instance learns an operator's quiet or resume
    /// with the beat. `info.quiet` is ignored: only [`Store::set_instance_quiet`] writes it.
    async fn heartbeat_instance(&self, info: &InstanceInfo) -> StoreResult<bool>;

    /// Quiet (`true`: claim nothing new) or resume an instance. `NotApplied` when no row
    /// has this id.
    async fn set_instance_quiet(&self, id: &str, quiet: bool) -> StoreResult<Applied>;

    /// Mark an instance as gone (clean shutdown) so its leftovers are rescued at the next sweep.
    async fn deregister_instance(&self, id: &str) -> StoreResult<()>;

    // ------------------------------------------------------------------ audit log

    async fn append_audit(&self, entry: NewAuditEntry) -> StoreResult<AuditEntry>;
}

/// A stored list of names (an instance's queues or job types, a JSON array) back; `NULL`,
/// or anything this code did not write, reads as "all of them" rather than failing a page.
pub(crate) fn names_from_json(text: Option<String>) -> Option<Vec<String>> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

/// Per completion of one `complete` call: whether it is the first for its job. A job
/// completed twice in one call is applied once — the first completion wins, every later one
/// answers `NotApplied` — on every backend.
pub(crate) fn first_completions(completions: &[Completion]) -> Vec<bool> {
    let mut seen = std::collections::HashSet::with_capacity(completions.len());
    completions.iter().map(|c| seen.insert(c.id())).collect()
}

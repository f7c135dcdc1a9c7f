//! The factory a backend hands to the suite, and the small helpers every case shares.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DurationRound, TimeDelta, Utc};

use crate::error::{StoreError, StoreResult};
use crate::model::{
    AttemptError, ClaimRequest, Completion, EnqueueRequest, FailureReason, Job, JobId, JobState,
    Pillar, QueuePatch, RescuePolicy, Timestamp,
};
use crate::query::{JobFilter, JobQuery, JobSummary, MAX_PAGE_SIZE};
use crate::schedule::{
    MisfirePolicy, OverlapPolicy, ScheduleDefinition, ScheduleJob, ScheduleSpec,
};
use crate::store::Store;
use crate::telemetry::{Summary, ThroughputBucket};

/// The rescue sweep the runtime runs, over the store's steps.
pub use crate::maintenance::rescue;

/// Opens another handle (its own connection or pool) to the database under test.
#[async_trait]
pub trait Connector: Send + Sync + 'static {
    async fn connect(&self) -> StoreResult<Arc<dyn Store>>;
}

/// Which table a fault is injected into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultTable {
    /// Inserts into the hot (active) table: enqueue, resurrect, continuations.
    Hot,
    Archive,
    Dlq,
}

/// Makes real inserts fail inside the backend, so the rollback cases can prove a transition
/// that fails half-way leaves nothing behind. After `fail_inserts(table, job_type)`, every
/// insert of a row with that `job_type` into `table` must fail with a database error.
#[async_trait]
pub trait FaultInjector: Send + Sync + 'static {
    async fn fail_inserts(&self, table: FaultTable, job_type: &str);
}

/// A fresh, empty database plus the means to open more handles to it.
pub struct StoreFactory {
    store: Arc<dyn Store>,
    connector: Box<dyn Connector>,
    faults: Option<Box<dyn FaultInjector>>,
}

impl StoreFactory {
    /// `store` is the first handle; `connector` opens more to the same database and keeps
    /// whatever must live as long as the test (a temporary directory, a scratch schema).
    pub fn new(store: Arc<dyn Store>, connector: impl Connector) -> Self {
        StoreFactory {
            store,
            connector: Box::new(connector),
            faults: None,
        }
    }

    pub fn with_faults(mut self, faults: impl FaultInjector) -> Self {
        self.faults = Some(Box::new(faults));
        self
    }

    /// The first handle.
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// Another handle to the same database (a separate connection).
    pub async fn connect(&self) -> Arc<dyn Store> {
        self.connector
            .connect()
            .await
            .expect("open another handle to the database under test")
    }

    pub fn faults(&self) -> Option<&dyn FaultInjector> {
        self.faults.as_deref()
    }
}

// ---------------------------------------------------------------------------------- requests

pub fn req(queue: &str, job_type: &str) -> EnqueueRequest {
    EnqueueRequest::new(queue, job_type, r#"{"n":1}"#)
}

/// Now, truncated to the millisecond: the precision every backend keeps, so timestamps we
/// write can be compared for equality after a round trip.
pub fn now_ms() -> Timestamp {
    trunc_ms(Utc::now())
}

pub fn trunc_ms(t: Timestamp) -> Timestamp {
    t.duration_trunc(TimeDelta::milliseconds(1))
        .expect("truncate a timestamp to milliseconds")
}

pub fn secs(n: i64) -> TimeDelta {
    TimeDelta::seconds(n)
}

/// Timestamps must be strictly older than a zero timeout before a sweep sees them; this lets
/// the database clock move past the rows just written. It stands in for no signal.
pub async fn let_clock_advance() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

pub fn error(attempt: u32, message: &str) -> AttemptError {
    // A full record (`crate::attempts`), so every case that keeps an error round-trips the
    // run's fields through the store too.
    let at = now_ms();
    AttemptError {
        attempt,
        at,
        kind: "transient".into(),
        message: message.into(),
        started_at: Some(at - chrono::Duration::milliseconds(250)),
        duration_ms: Some(250),
        instance: Some("conformance-1-abc".into()),
        ..AttemptError::default()
    }
}

pub fn succeeded(id: JobId, result: Option<&str>) -> Completion {
    Completion::Succeeded {
        id,
        result: result.map(str::to_string),
        duration_ms: 5,
    }
}

/// Each of `ids` succeeded, without a result.
pub fn all_succeeded(ids: &[JobId]) -> Vec<Completion> {
    ids.iter().map(|id| succeeded(*id, None)).collect()
}

/// A failed attempt retried an hour from now.
pub fn retry_in_an_hour(id: JobId, message: &str) -> Completion {
    Completion::Retry {
        id,
        error: error(1, message),
        retry_at: now_ms() + secs(3600),
    }
}

pub fn dead(id: JobId, reason: FailureReason, message: &str) -> Completion {
    Completion::DeadLetter {
        id,
        reason,
        error: error(1, message),
        duration_ms: 5,
    }
}

/// A schedule every five minutes, Berlin time, whose jobs carry every option of a job
/// template; past occurrences all run.
pub fn report_schedule(name: &str) -> ScheduleDefinition {
    ScheduleDefinition {
        name: name.into(),
        spec: ScheduleSpec::Cron("*/5 * * * *".into()),
        time_zone: "Europe/Berlin".into(),
        job: ScheduleJob {
            queue: "reports".into(),
            job_type: "report.generate".into(),
            payload: r#"{"kind":"hourly"}"#.into(),
            priority: 4,
            tags: vec!["finance".into()],
            max_attempts: Some(3),
            expires_after_secs: Some(600),
        },
        misfire: MisfirePolicy::RunAll { cap: 10 },
        overlap: OverlapPolicy::Allow,
    }
}

pub fn zero_timeouts() -> RescuePolicy {
    RescuePolicy {
        fetched_timeout: Duration::ZERO,
        default_zombie_timeout: Duration::ZERO,
        dead_instance_timeout: Duration::from_secs(3600),
    }
}

pub fn long_timeouts() -> RescuePolicy {
    RescuePolicy {
        fetched_timeout: Duration::from_secs(3600),
        default_zombie_timeout: Duration::from_secs(3600),
        dead_instance_timeout: Duration::from_secs(3600),
    }
}

/// Every type of `queues` (`None`: of every queue), none of the claimed jobs started by the
/// claim.
pub fn claim_request(worker: &str, limit: u32, queues: Option<Vec<String>>) -> ClaimRequest {
    ClaimRequest {
        worker_id: worker.into(),
        limit,
        start: 0,
        queues,
        types: None,
    }
}

// ------------------------------------------------------------------------- queue settings
//
// One field each, the rest left as it is: what a test changes is the one setting it is about.

pub fn pause(paused: bool) -> QueuePatch {
    QueuePatch {
        paused: Some(paused),
        ..Default::default()
    }
}

pub fn max_workers(n: u32) -> QueuePatch {
    QueuePatch {
        max_workers: Some(Some(n)),
        ..Default::default()
    }
}

pub fn zombie_timeout(secs: u32) -> QueuePatch {
    QueuePatch {
        zombie_timeout_secs: Some(Some(secs)),
        ..Default::default()
    }
}

pub fn execution_timeout(secs: u32) -> QueuePatch {
    QueuePatch {
        execution_timeout_secs: Some(Some(secs)),
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------- actions

/// Run a store call the way the runtime does under contention: a transient fault (busy
/// database, deadlock, throttling, a command timeout) changed nothing and is tried again after
/// a pause that doubles up to half a second, so a server already behind is not sent the same
/// work again at once (a timed-out statement may still be running there); anything else, or
/// faults that go on for `RETRY_TRANSIENT_FOR`, fails the test.
pub async fn retrying<T, Call>(mut call: impl FnMut() -> Call) -> T
where
    Call: std::future::Future<Output = StoreResult<T>>,
{
    const RETRY_TRANSIENT_FOR: Duration = Duration::from_secs(300);
    let deadline = std::time::Instant::now() + RETRY_TRANSIENT_FOR;
    let mut pause = Duration::from_millis(1);
    loop {
        match call().await {
            Ok(value) => return value,
            Err(e) if e.is_transient() && std::time::Instant::now() < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            Err(e) => panic!("store call failed: {e}"),
        }
    }
}

/// `racers` tasks, each on its own handle to the database (opened before any starts), set off
/// together; what each returned, in the order of `n`.
pub async fn race<T, Racer>(
    f: &StoreFactory,
    racers: usize,
    racer: impl Fn(usize, Arc<dyn Store>) -> Racer,
) -> Vec<T>
where
    T: Send + 'static,
    Racer: std::future::Future<Output = T> + Send + 'static,
{
    let start_line = Arc::new(tokio::sync::Barrier::new(racers));
    let mut tasks = Vec::with_capacity(racers);
    for n in 0..racers {
        let run = racer(n, f.connect().await);
        let start_line = start_line.clone();
        tasks.push(tokio::spawn(async move {
            start_line.wait().await;
            run.await
        }));
    }
    let mut answers = Vec::with_capacity(racers);
    for task in tasks {
        answers.push(task.await.expect("a racer panicked"));
    }
    answers
}

pub async fn enqueue(store: &dyn Store, r: EnqueueRequest) -> JobId {
    let out = store.enqueue(r).await.expect("enqueue");
    assert!(out.created, "a request without a key always creates a job");
    out.id
}

pub async fn enqueue_n(store: &dyn Store, queue: &str, job_type: &str, n: usize) -> Vec<JobId> {
    let reqs = (0..n)
        .map(|i| EnqueueRequest::new(queue, job_type, format!(r#"{{"i":{i}}}"#)))
        .collect();
    enqueue_all(store, reqs).await
}

/// One batch; the ids in request order.
pub async fn enqueue_all(store: &dyn Store, reqs: Vec<EnqueueRequest>) -> Vec<JobId> {
    let outcomes = store.enqueue_batch(reqs).await.expect("enqueue batch");
    outcomes.into_iter().map(|o| o.id).collect()
}

pub async fn claim(store: &dyn Store, worker: &str, limit: u32) -> Vec<JobId> {
    claim_jobs(store, worker, limit, None)
        .await
        .into_iter()
        .map(|j| j.id)
        .collect()
}

pub async fn claim_jobs(
    store: &dyn Store,
    worker: &str,
    limit: u32,
    queues: Option<Vec<String>>,
) -> Vec<Job> {
    store
        .claim_batch(claim_request(worker, limit, queues))
        .await
        .expect("claim batch")
}

/// Claim up to `limit` jobs from every queue as `worker`, the first `start` of them started
/// by the claim itself.
pub async fn claim_starting(store: &dyn Store, worker: &str, limit: u32, start: u32) -> Vec<Job> {
    store
        .claim_batch(ClaimRequest {
            start,
            ..claim_request(worker, limit, None)
        })
        .await
        .expect("claim batch")
}

/// Claim `n` jobs and start them (fetched → processing) as `worker`.
pub async fn start(store: &dyn Store, worker: &str, n: u32) -> Vec<JobId> {
    let ids = claim(store, worker, n).await;
    assert_eq!(ids.len(), n as usize, "expected {n} claimable jobs");
    let mut started = store.mark_processing(worker, &ids).await.expect("mark");
    started.sort();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(started, sorted, "every claimed job starts");
    ids
}

/// Enqueue one job and take it all the way to processing by `worker`.
pub async fn processing_job(store: &dyn Store, r: EnqueueRequest, worker: &str) -> JobId {
    let queue = r.queue.clone();
    let id = enqueue(store, r).await;
    let claimed: Vec<JobId> = claim_jobs(store, worker, 1, Some(vec![queue]))
        .await
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        claimed,
        vec![id],
        "the only pending job of its queue is claimed"
    );
    let started = store.mark_processing(worker, &[id]).await.expect("mark");
    assert_eq!(started, vec![id]);
    id
}

/// Whether asking `worker` to start `ids` started none of them.
pub async fn starts_none(store: &dyn Store, worker: &str, ids: &[JobId]) -> bool {
    let started = store.mark_processing(worker, ids).await.expect("mark");
    started.is_empty()
}

/// A job due `seconds` from now.
pub fn due_in(seconds: i64, queue: &str, job_type: &str) -> EnqueueRequest {
    EnqueueRequest {
        scheduled_at: Some(now_ms() + secs(seconds)),
        ..req(queue, job_type)
    }
}

/// A job asked to wait `delay_ms` after its enqueue.
pub fn delayed_by(delay_ms: u64, queue: &str, job_type: &str) -> EnqueueRequest {
    EnqueueRequest {
        delay_ms: Some(delay_ms),
        ..req(queue, job_type)
    }
}

pub async fn complete_one(store: &dyn Store, worker: &str, c: Completion) -> bool {
    let applied = store.complete(worker, vec![c]).await.expect("complete");
    assert_eq!(applied.len(), 1);
    applied[0].is_applied()
}

/// A job that ended in the archive.
pub async fn archived_job(store: &dyn Store, r: EnqueueRequest) -> JobId {
    let id = processing_job(store, r, "w-archive").await;
    assert!(complete_one(store, "w-archive", succeeded(id, Some(r#"{"ok":true}"#))).await);
    id
}

/// A job that ended in the DLQ with `reason` and `message`.
pub async fn dead_job(
    store: &dyn Store,
    r: EnqueueRequest,
    reason: FailureReason,
    message: &str,
) -> JobId {
    let id = processing_job(store, r, "w-dead").await;
    assert!(complete_one(store, "w-dead", dead(id, reason, message)).await);
    id
}

// ---------------------------------------------------------------------------------- reads

pub async fn job(store: &dyn Store, id: JobId) -> Job {
    store
        .get_job(id)
        .await
        .expect("get job")
        .unwrap_or_else(|| panic!("job {id} exists"))
}

pub async fn state(store: &dyn Store, id: JobId) -> Option<JobState> {
    store.get_job(id).await.expect("get job").map(|j| j.state)
}

pub async fn summary(store: &dyn Store) -> Summary {
    store.summary().await.expect("summary")
}

/// Whether the DLQ error groups count nothing (an emptied group may stay behind at zero).
pub async fn every_error_group_is_empty(store: &dyn Store) -> bool {
    let groups = store.top_errors(10).await.expect("top errors");
    groups.iter().all(|g| g.count == 0)
}

/// One measure of the throughput buckets of the last `minutes`, summed over them.
pub async fn throughput_sum(
    store: &dyn Store,
    minutes: u32,
    queue: Option<&str>,
    measure: impl Fn(&ThroughputBucket) -> u64,
) -> u64 {
    store
        .throughput(minutes, queue)
        .await
        .expect("throughput")
        .iter()
        .map(measure)
        .sum()
}

/// Every row of a pillar matching `filter`, following the pages.
pub async fn list_all(store: &dyn Store, source: Pillar, filter: JobFilter) -> Vec<JobSummary> {
    let mut query = JobQuery::new(source);
    query.filter = filter;
    query.page_size = MAX_PAGE_SIZE;
    let mut rows = Vec::new();
    loop {
        let page = store.list_jobs(&query).await.expect("list jobs");
        rows.extend(page.items);
        match page.next {
            Some(c) => query.position = crate::query::PagePosition::After(c),
            None => return rows,
        }
    }
}

pub async fn ids_in(store: &dyn Store, source: Pillar, filter: JobFilter) -> Vec<JobId> {
    let mut ids: Vec<JobId> = list_all(store, source, filter)
        .await
        .into_iter()
        .map(|j| j.id)
        .collect();
    ids.sort();
    ids
}

pub fn sorted(mut ids: Vec<JobId>) -> Vec<JobId> {
    ids.sort();
    ids
}

/// A filter with only what `set` sets: the one condition a case is about.
pub fn filter_where(set: impl FnOnce(&mut JobFilter)) -> JobFilter {
    let mut filter = JobFilter::default();
    set(&mut filter);
    filter
}

pub fn filter_queue(queue: &str) -> JobFilter {
    JobFilter {
        queue: Some(queue.into()),
        ..Default::default()
    }
}

/// The door every write takes: invalid input is refused there, before the store, and the
/// cases that feed bad input check that nothing reached the store.
pub fn door(store: &std::sync::Arc<dyn crate::store::Store>) -> crate::ops::Operations {
    crate::ops::Operations::over_store(store.clone())
}

pub fn is_invalid<T: std::fmt::Debug>(r: StoreResult<T>) -> bool {
    matches!(r, Err(StoreError::Invalid(_)))
}

/// A summary with the per-minute rates left out, for "nothing changed" comparisons.
pub fn counts(s: &Summary) -> [u64; 6] {
    [
        s.pending,
        s.scheduled,
        s.fetched,
        s.processing,
        s.succeeded,
        s.dlq,
    ]
}

pub fn since(t: Timestamp) -> TimeDelta {
    Utc::now() - t
}

/// Every job is in exactly one pillar, and the maintained counters agree with the rows: the
/// overview counts, every queue's archive and DLQ counters and the DLQ error groups, each
/// against a committed scan. Called at the end of every case, so no path can let a counter
/// drift.
pub async fn assert_counters_match_rows(store: &dyn Store) {
    use std::collections::HashMap;

    use crate::model::HotStatus;

    let hot = list_all(store, Pillar::Hot, JobFilter::default()).await;
    let archive = list_all(store, Pillar::Archive, JobFilter::default()).await;
    let dlq = list_all(store, Pillar::Dlq, JobFilter::default()).await;
    let mut pillar_of: HashMap<JobId, Pillar> = HashMap::new();
    for (pillar, rows) in [
        (Pillar::Hot, &hot),
        (Pillar::Archive, &archive),
        (Pillar::Dlq, &dlq),
    ] {
        for row in rows.iter() {
            if let Some(other) = pillar_of.insert(row.id, pillar) {
                panic!("job {} is in both {other} and {pillar}", row.id);
            }
        }
    }
    let s = summary(store).await;
    let status = |st: JobState| hot.iter().filter(|j| j.state == st).count() as u64;
    assert_eq!(
        s.pending + s.scheduled,
        status(HotStatus::Pending.into()),
        "pending + scheduled = pending rows"
    );
    assert_eq!(s.fetched, status(JobState::Fetched), "fetched rows");
    assert_eq!(
        s.processing,
        status(JobState::Processing),
        "processing rows"
    );
    assert_eq!(
        s.succeeded,
        archive.len() as u64,
        "archive counter = archive rows"
    );
    assert_eq!(s.dlq, dlq.len() as u64, "DLQ counter = DLQ rows");

    let mut per_queue: HashMap<&str, (u64, u64)> = HashMap::new();
    for j in &archive {
        per_queue.entry(&j.queue).or_default().0 += 1;
    }
    for j in &dlq {
        per_queue.entry(&j.queue).or_default().1 += 1;
    }
    let stats = store.queue_stats().await.expect("queue stats");
    for q in &stats {
        let rows = per_queue.get(q.queue.as_str()).copied().unwrap_or_default();
        assert_eq!(
            (q.succeeded, q.failed),
            rows,
            "queue {}: counters (succeeded, failed) = rows",
            q.queue
        );
    }
    for (queue, rows) in &per_queue {
        assert!(
            stats.iter().any(|q| q.queue == *queue),
            "queue {queue} holds finished rows {rows:?} but has no stats row"
        );
    }
    // Per queue, the hot counts too (a backend may maintain them rather than count rows).
    let mut hot_per_queue: HashMap<&str, (u64, u64, u64)> = HashMap::new();
    for j in &hot {
        let entry = hot_per_queue.entry(&j.queue).or_default();
        match j.state {
            JobState::Fetched => entry.1 += 1,
            JobState::Processing => entry.2 += 1,
            _ => entry.0 += 1,
        }
    }
    for q in &stats {
        let rows = hot_per_queue
            .get(q.queue.as_str())
            .copied()
            .unwrap_or_default();
        assert_eq!(
            (q.pending + q.scheduled, q.fetched, q.processing),
            rows,
            "queue {}: (pending + scheduled, fetched, processing) = hot rows",
            q.queue
        );
    }
    for (queue, rows) in &hot_per_queue {
        assert!(
            stats.iter().any(|q| q.queue == *queue),
            "queue {queue} holds hot rows {rows:?} but has no stats row"
        );
    }

    let groups = store.top_errors(10_000).await.expect("top errors");
    let mut by_reason: HashMap<FailureReason, u64> = HashMap::new();
    for g in &groups {
        *by_reason.entry(g.reason).or_default() += g.count;
    }
    by_reason.retain(|_, n| *n > 0);
    let mut rows_by_reason: HashMap<FailureReason, u64> = HashMap::new();
    for j in &dlq {
        if let JobState::Dead(reason) = j.state {
            *rows_by_reason.entry(reason).or_default() += 1;
        }
    }
    assert_eq!(
        by_reason, rows_by_reason,
        "error groups add up to the DLQ rows per reason"
    );
    // Each group's count is its rows: the fingerprint on the rows and the groups agree.
    for g in groups.iter().filter(|g| g.count > 0) {
        let filter = JobFilter {
            error_group: Some(g.fingerprint.clone()),
            ..JobFilter::default()
        };
        let rows = list_all(store, Pillar::Dlq, filter).await;
        assert_eq!(rows.len() as u64, g.count, "rows of error group {g:?}");
    }
}

/// A count over "the last minute" comes from per-minute buckets, so work finished just
/// before a minute boundary may drop out of it just after. `started` is taken before the
/// work: if the minute turned since, the count may be lower, never higher.
pub fn assert_last_minute(count: u64, expected: u64, started: Timestamp, what: &str) {
    let minute = |t: Timestamp| t.timestamp().div_euclid(60);
    if minute(started) == minute(Utc::now()) {
        assert_eq!(count, expected, "{what}");
    } else {
        assert!(count <= expected, "{what}: {count} > {expected}");
    }
}

//! `trait Store` on SQL Server. Each operation is one round trip running one statement batch
//! from `queries` (or `job_lists`), wrapped in the retry policy its safety allows.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

mod batches;
mod schedules;

use super::connection::SchemaName;
use super::enqueue;
use super::job_lists::{self, Built};
use super::pool::{self, Fault, LastConnectError, Pool, PooledConn, Repeat, RetryPolicy};
use super::queries::{self, MAX_ROWS_PER_STATEMENT, Reads, Statement};
use super::reader;
use super::rows::{self, count, ids_json, json_time, opt_str, opt_u32, req_str};
use super::wire;
use crate::batch::{Batch, BatchCreated, BatchId, BatchRequest};
use crate::error::{StoreError, StoreResult};
use crate::fingerprint::FingerprintHead;
use crate::model::{
    Applied, AttemptError, AuditEntry, AuditFilter, CancelOutcome, ClaimRequest, Completion,
    EngineSettings, EnqueueOutcome, EnqueueRequest, FailureReason, HeartbeatReport, HotStatus,
    InstanceInfo, InstanceKind, Job, JobEdit, JobId, JobState, NewAuditEntry, Pillar, PruneStep,
    PruneTarget, QueueConfig, QueuePatch, RateLimit, RescueKind, RescueStep, StoreWrittenError,
    Timestamp, claim_order,
};
use crate::query::{
    BulkAction, BulkFilterStep, BulkPreview, BulkStep, JobFilter, JobQuery, JobSummary,
    MAX_PAGE_SIZE, Page, SEARCH_WINDOW_ROWS,
};
use crate::schedule::{
    FireOutcome, Schedule, ScheduleDefinition, ScheduleFire, ScheduleOrigin, ScheduleRun,
};
use crate::store::{Store, StoreReads};
use crate::telemetry::{
    ErrorGroup, QueueStats, RunTimeHistogram, Summary, ThroughputBucket, run_time,
};
use crate::validation;

/// Ids per transaction for operator actions on id lists (their statements do not slice:
/// a chunk is already below `MAX_ROWS_PER_STATEMENT`).
const OPERATOR_CHUNK: usize = 500;
/// The errors the store writes itself, the same text as every backend writes.
const CANCELLED: StoreWrittenError = written(FailureReason::Cancelled);
const ZOMBIE: StoreWrittenError = written(FailureReason::Zombie);
const EXPIRED: StoreWrittenError = written(FailureReason::Expired);

const fn written(reason: FailureReason) -> StoreWrittenError {
    match reason.store_written() {
        Some(w) => w,
        None => panic!("a reason the store writes has its text"),
    }
}

/// The fingerprint head of an error the store writes (its statements add the job type).
fn written_head(reason: FailureReason, written: StoreWrittenError) -> String {
    FingerprintHead::new(reason, written.kind, written.message)
        .as_str()
        .to_string()
}

/// Hand the connection to an attempt and take it back with the result (see `pool::run`).
macro_rules! attempt {
    (|$client:ident| $body:expr) => {
        move |mut conn: PooledConn| async move {
            let result: Result<_, Fault> = async {
                let $client = &mut conn.client;
                $body
            }
            .await;
            (conn, result)
        }
    };
}

pub struct SqlServerStore {
    pool: Pool,
    last_connect_error: LastConnectError,
    schema: SchemaName,
    retry: RetryPolicy,
    command_timeout: Duration,
}

fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX)
}

fn to_i32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

#[derive(Serialize)]
struct CompletionRow<'a> {
    id: String,
    kind: &'static str,
    result: Option<rows::JsonText<'a>>,
    duration_ms: Option<u64>,
    reason: Option<i64>,
    /// Nested as a JSON object (read `AS JSON`), not as JSON text in a string: see
    /// [`rows::JsonText`].
    error: Option<&'a AttemptError>,
    message: Option<String>,
    /// Dead letters only: the fingerprint head the statement finishes with the job type.
    fp_head: Option<String>,
    retry_at: Option<String>,
    /// Successes and dead letters: the run-time bin of `duration_ms` (`run_time::bin_of`).
    bin: Option<u16>,
}

fn to_json<T: Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::database("encode parameters", e, false))
}

impl SqlServerStore {
    pub fn new(
        pool: Pool,
        last_connect_error: LastConnectError,
        schema: SchemaName,
        command_timeout: Duration,
    ) -> Self {
        SqlServerStore {
            pool,
            last_connect_error,
            schema,
            retry: RetryPolicy::default(),
            command_timeout,
        }
    }

    pub fn schema(&self) -> &SchemaName {
        &self.schema
    }

    pub fn sql(&self, template: &str) -> String {
        template.replace("{schema}", self.schema.as_str())
    }

    pub async fn run<T, F, Fut>(
        &self,
        operation: &'static str,
        repeat: Repeat,
        attempt: F,
    ) -> StoreResult<T>
    where
        F: FnMut(PooledConn) -> Fut,
        Fut: std::future::Future<Output = (PooledConn, Result<T, Fault>)>,
    {
        self.run_with_timeout(operation, repeat, self.command_timeout, attempt)
            .await
    }

    /// [`Self::run`] with a time limit of its own instead of the command timeout.
    pub async fn run_with_timeout<T, F, Fut>(
        &self,
        operation: &'static str,
        repeat: Repeat,
        timeout: Duration,
        attempt: F,
    ) -> StoreResult<T>
    where
        F: FnMut(PooledConn) -> Fut,
        Fut: std::future::Future<Output = (PooledConn, Result<T, Fault>)>,
    {
        pool::run(
            &self.pool,
            &self.last_connect_error,
            operation,
            repeat,
            false,
            self.retry,
            timeout,
            attempt,
        )
        .await
    }

    /// Run a statement and read its one declared answer (`reader`).
    async fn answer(
        &self,
        operation: &'static str,
        repeat: Repeat,
        statement: &'static str,
        reads: Reads,
        sql: &str,
        params: &[&dyn tiberius::ToSql],
    ) -> StoreResult<Vec<tiberius::Row>> {
        self.run(
            operation,
            repeat,
            attempt!(|client| {
                let stream = wire::query(client, sql, params).await?;
                reader::read_declared(statement, reads, stream).await
            }),
        )
        .await
    }

    /// The rows of a fixed statement.
    async fn rows_of(
        &self,
        operation: &'static str,
        repeat: Repeat,
        statement: &Statement,
        params: &[&dyn tiberius::ToSql],
    ) -> StoreResult<Vec<tiberius::Row>> {
        let sql = self.sql(statement.sql);
        self.answer(
            operation,
            repeat,
            statement.name,
            statement.reads,
            &sql,
            params,
        )
        .await
    }

    /// The rows of a fixed statement that is re-sent after any transient fault and whose
    /// second attempt may meet the first one's rows at a key: a duplicate key is transient
    /// too, and the attempt after it finds those rows committed (a batch, a schedule run).
    pub(super) async fn rows_of_keyed(
        &self,
        operation: &'static str,
        statement: &Statement,
        params: &[&dyn tiberius::ToSql],
    ) -> StoreResult<Vec<tiberius::Row>> {
        let sql = self.sql(statement.sql);
        let sql = &sql;
        pool::run(
            &self.pool,
            &self.last_connect_error,
            operation,
            Repeat::Always,
            true,
            self.retry,
            self.command_timeout,
            attempt!(|client| {
                let stream = wire::query(client, sql, params).await?;
                reader::read_declared(statement.name, statement.reads, stream).await
            }),
        )
        .await
    }

    /// The rows of a console statement built at run time.
    async fn rows_of_built(
        &self,
        operation: &'static str,
        built: &Built,
    ) -> StoreResult<Vec<tiberius::Row>> {
        let params = built.sql_params();
        self.answer(
            operation,
            Repeat::Always,
            "job list",
            built.reads,
            &built.sql,
            &params,
        )
        .await
    }

    /// A single-row, single-count answer (`SELECT … AS name`).
    async fn count_of(
        &self,
        operation: &'static str,
        repeat: Repeat,
        statement: &Statement,
        params: &[&dyn tiberius::ToSql],
        column: &'static str,
    ) -> StoreResult<u64> {
        let rows = self.rows_of(operation, repeat, statement, params).await?;
        match rows.first() {
            Some(row) => count(row, column).map_err(|f| self.fault(operation, f)),
            None => Ok(0),
        }
    }

    fn fault(&self, operation: &'static str, fault: Fault) -> StoreError {
        pool::into_store_error(operation, fault, pool::Transience::Permanent)
    }

    /// Operator actions on id lists run in transactions of `OPERATOR_CHUNK` ids: short
    /// transactions, well below the 5,000 locks at which SQL Server escalates to a table lock
    /// that would stall every worker.
    async fn by_ids(
        &self,
        operation: &'static str,
        statement: &Statement,
        column: &'static str,
        ids: &[JobId],
    ) -> StoreResult<u64> {
        let mut total = 0;
        for chunk in ids.chunks(OPERATOR_CHUNK) {
            let json = ids_json(chunk);
            total += self
                .count_of(operation, Repeat::IfNotApplied, statement, &[&json], column)
                .await?;
        }
        Ok(total)
    }

    async fn cancel_ids(&self, ids: &[JobId]) -> StoreResult<(u64, u64)> {
        let (mut cancelled, mut requested) = (0, 0);
        let cancelled_head = written_head(FailureReason::Cancelled, CANCELLED);
        for chunk in ids.chunks(OPERATOR_CHUNK) {
            let json = ids_json(chunk);
            let rows = self
                .rows_of(
                    "cancel",
                    Repeat::IfNotApplied,
                    &queries::CANCEL,
                    &[&json, &CANCELLED.kind, &CANCELLED.message, &cancelled_head],
                )
                .await?;
            if let Some(row) = rows.first() {
                cancelled += count(row, "cancelled").map_err(|f| self.fault("cancel", f))?;
                requested += count(row, "requested").map_err(|f| self.fault("cancel", f))?;
            }
        }
        Ok((cancelled, requested))
    }

    async fn resurrect_ids(&self, ids: &[JobId], edit: Option<&JobEdit>) -> StoreResult<u64> {
        let payload: Option<String> = edit
            .and_then(|e| e.payload.as_deref())
            .map(|p| validation::normalize_payload(p).to_string());
        let tags: Option<String> = edit
            .and_then(|e| e.tags.as_deref())
            .map(rows::tags_to_stored);
        let priority: Option<i32> = edit.and_then(|e| e.priority);
        let queue: Option<String> = edit.and_then(|e| e.queue.clone());
        let mut total = 0;
        for chunk in ids.chunks(OPERATOR_CHUNK) {
            let json = ids_json(chunk);
            total += self
                .count_of(
                    "resurrect",
                    Repeat::IfNotApplied,
                    &queries::RESURRECT,
                    &[&json, &payload, &tags, &priority, &queue],
                    "resurrected",
                )
                .await?;
        }
        Ok(total)
    }

    async fn purge_ids(&self, source: Pillar, ids: &[JobId]) -> StoreResult<u64> {
        let statement = match source {
            Pillar::Hot => &queries::PURGE_HOT,
            Pillar::Archive => &queries::PURGE_ARCHIVE,
            Pillar::Dlq => &queries::PURGE_DLQ,
        };
        self.by_ids("purge", statement, "purged", ids).await
    }

    /// Run a sweep statement until it comes back short of a full batch.
    fn queue_config(row: &tiberius::Row) -> Result<QueueConfig, Fault> {
        let rate_limit = match (
            opt_u32(row, "rate_max_starts")?,
            opt_u32(row, "rate_period_secs")?,
        ) {
            (Some(starts), Some(per_secs)) if per_secs > 0 => Some(RateLimit { starts, per_secs }),
            _ => None,
        };
        // The period's end, once its starts are used up (by this process's clock: it is only
        // shown, the claim decides by the database's).
        let rate_limited_until = match (
            rate_limit,
            rows::opt_int(row, "rate_window_start")?,
            rows::opt_int(row, "rate_window_starts")?,
        ) {
            (Some(limit), Some(start), Some(used)) => {
                let now = chrono::Utc::now().timestamp();
                let period = i64::from(limit.per_secs);
                (start == now - now.rem_euclid(period) && used >= i64::from(limit.starts))
                    .then(|| chrono::DateTime::from_timestamp(start + period, 0))
                    .flatten()
            }
            _ => None,
        };
        Ok(QueueConfig {
            name: req_str(row, "name")?,
            paused: rows::req_bool(row, "paused")?,
            hidden: rows::req_bool(row, "hidden")?,
            max_workers: opt_u32(row, "max_workers")?,
            zombie_timeout_secs: opt_u32(row, "zombie_timeout_secs")?,
            execution_timeout_secs: opt_u32(row, "execution_timeout_secs")?,
            lag_warn_secs: opt_u32(row, "lag_warn_secs")?,
            lag_crit_secs: opt_u32(row, "lag_crit_secs")?,
            updated_at: rows::opt_time(row, "updated_at")?,
            rate_limit,
            rate_limited_until,
        })
    }

    fn instance(row: &tiberius::Row) -> Result<InstanceInfo, Fault> {
        Ok(InstanceInfo {
            id: req_str(row, "id")?,
            host: req_str(row, "host")?,
            pid: opt_u32(row, "pid")?.unwrap_or(0),
            version: req_str(row, "version")?,
            started_at: rows::req_time(row, "started_at")?,
            heartbeat_at: rows::req_time(row, "heartbeat_at")?,
            workers_total: opt_u32(row, "workers_total")?.unwrap_or(0),
            workers_busy: opt_u32(row, "workers_busy")?.unwrap_or(0),
            kind: InstanceKind::from_stored(&req_str(row, "kind")?),
            queues: crate::store::names_from_json(opt_str(row, "queues")?),
            job_types: crate::store::names_from_json(opt_str(row, "job_types")?),
            quiet: rows::req_bool(row, "quiet")?,
        })
    }

    fn audit(row: &tiberius::Row) -> Result<AuditEntry, Fault> {
        Ok(AuditEntry {
            id: rows::req_int(row, "id")?,
            at: rows::req_time(row, "at")?,
            actor: req_str(row, "actor")?,
            action: req_str(row, "action")?,
            target: req_str(row, "target")?,
            count: count(row, "count")?,
            detail: opt_str(row, "detail")?,
        })
    }

    fn map_rows<T>(
        &self,
        operation: &'static str,
        rows: &[tiberius::Row],
        f: impl Fn(&tiberius::Row) -> Result<T, Fault>,
    ) -> StoreResult<Vec<T>> {
        rows.iter()
            .map(|r| f(r).map_err(|e| self.fault(operation, e)))
            .collect()
    }

    /// Start jobs just claimed (the claim's `start`) with the ownership-checked
    /// `mark_processing`. If that fails they simply stay `Fetched`: the caller buffers them
    /// and starts them the usual way.
    async fn start_claimed(&self, worker_id: &str, jobs: &mut [Job]) {
        let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
        let started: HashSet<JobId> = match self.mark_processing(worker_id, &ids).await {
            Ok(started) => started.into_iter().collect(),
            Err(e) => {
                tracing::warn!(error = %e, jobs = ids.len(),
                    "claimed jobs could not be started at once; they stay fetched");
                return;
            }
        };
        let now = chrono::Utc::now();
        for job in jobs.iter_mut().filter(|j| started.contains(&j.id)) {
            job.state = JobState::Processing;
            job.attempt += 1;
            job.started_at = Some(now);
            job.heartbeat_at = Some(now);
        }
    }
}

#[async_trait]
impl StoreReads for SqlServerStore {
    fn backend(&self) -> &'static str {
        "sqlserver"
    }

    async fn ping(&self) -> StoreResult<()> {
        self.rows_of("ping", Repeat::Always, &queries::PING, &[])
            .await?;
        Ok(())
    }

    async fn bulk_preview(
        &self,
        source: Pillar,
        filter: &JobFilter,
        sample: u32,
    ) -> StoreResult<BulkPreview> {
        let built =
            job_lists::preview_statement(&self.schema, source, filter, sample.min(MAX_PAGE_SIZE));
        let answer = self.rows_of_built("bulk_preview", &built).await?;
        // Every row carries the count; the sample columns are NULL when nothing matched.
        let matching = match answer.first() {
            Some(row) => count(row, "matching").map_err(|f| self.fault("bulk_preview", f))?,
            None => 0,
        };
        let mut sample_rows = Vec::new();
        for row in answer {
            let present = row
                .try_get::<&[u8], _>("id")
                .map_err(|e| self.fault("bulk_preview", Fault::Driver(e)))?
                .is_some();
            if present {
                sample_rows.push(row);
            }
        }
        let sample = self.map_rows("bulk_preview", &sample_rows, |r| rows::summary(r, source))?;
        Ok(BulkPreview { matching, sample })
    }

    async fn list_queues(&self) -> StoreResult<Vec<QueueConfig>> {
        let rows = self
            .rows_of("list_queues", Repeat::Always, &queries::LIST_QUEUES, &[])
            .await?;
        self.map_rows("list_queues", &rows, Self::queue_config)
    }

    async fn get_batch(&self, id: BatchId) -> StoreResult<Option<Batch>> {
        self.batch_row(id).await
    }

    async fn list_batches(&self, before: Option<BatchId>, limit: u32) -> StoreResult<Vec<Batch>> {
        self.batch_rows(before, limit).await
    }

    async fn batch_members(&self, id: BatchId, limit: u32) -> StoreResult<Vec<JobSummary>> {
        self.batch_member_rows(id, limit).await
    }

    async fn list_schedules(&self) -> StoreResult<Vec<Schedule>> {
        self.list_schedule_rows().await
    }

    async fn schedule_runs(&self, name: &str, limit: u32) -> StoreResult<Vec<ScheduleRun>> {
        self.schedule_run_rows(name, limit).await
    }

    async fn load_settings(&self) -> StoreResult<EngineSettings> {
        let rows = self
            .rows_of(
                "load_settings",
                Repeat::Always,
                &queries::LOAD_SETTINGS,
                &[],
            )
            .await?;
        match rows.first() {
            None => Ok(EngineSettings::default()),
            Some(row) => {
                let text = req_str(row, "value").map_err(|f| self.fault("load_settings", f))?;
                serde_json::from_str(&text).map_err(|e| StoreError::Schema {
                    problem: format!("the saved engine settings cannot be read: {e}"),
                    help: "save the settings again from the console".into(),
                })
            }
        }
    }

    async fn list_instances(&self, max_age: Duration) -> StoreResult<Vec<InstanceInfo>> {
        let ms = i64::try_from(max_age.as_millis())
            .unwrap_or(i64::MAX)
            .min(60 * 365 * 86_400_000); // DATEADD(SECOND, …) takes an int
        let rows = self
            .rows_of(
                "list_instances",
                Repeat::Always,
                &queries::LIST_INSTANCES,
                &[&ms],
            )
            .await?;
        self.map_rows("list_instances", &rows, Self::instance)
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        before_id: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<AuditEntry>> {
        let limit = i64::from(limit.min(MAX_PAGE_SIZE * 2));
        let actor = filter.actor.as_deref();
        let action = filter.action.as_deref();
        let from = filter.from.map(rows::to_sql_time);
        let to = filter.to.map(rows::to_sql_time);
        let rows = self
            .rows_of(
                "list_audit",
                Repeat::Always,
                &queries::LIST_AUDIT,
                &[&limit, &before_id, &actor, &action, &from, &to],
            )
            .await?;
        self.map_rows("list_audit", &rows, Self::audit)
    }

    async fn get_job(&self, id: JobId) -> StoreResult<Option<Job>> {
        let id_bytes = rows::id_param(&id);
        let answer = self
            .rows_of("get_job", Repeat::Always, &queries::GET_JOB, &[&id_bytes])
            .await?;
        match answer.first() {
            Some(row) => rows::any_job(row)
                .map(Some)
                .map_err(|f| self.fault("get_job", f)),
            None => Ok(None),
        }
    }

    async fn finished_jobs(&self, ids: &[JobId]) -> StoreResult<Vec<Job>> {
        let mut jobs = Vec::new();
        for chunk in ids.chunks(MAX_ROWS_PER_STATEMENT) {
            let json = ids_json(chunk);
            let answer = self
                .rows_of(
                    "finished_jobs",
                    Repeat::Always,
                    &queries::FINISHED_JOBS,
                    &[&json],
                )
                .await?;
            jobs.extend(self.map_rows("finished_jobs", &answer, rows::any_job)?);
        }
        Ok(jobs)
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Page<crate::query::JobSummary>> {
        let size = query.page_size.clamp(1, MAX_PAGE_SIZE);
        let statement = job_lists::list_statement(&self.schema, query, size + 1)?;
        let rows = self.rows_of_built("list_jobs", &statement.built).await?;
        let mut items = self.map_rows("list_jobs", &rows, |r| rows::summary(r, query.source))?;
        let more = items.len() > size as usize;
        items.truncate(size as usize);
        if statement.reversed {
            items.reverse();
        }
        let cursor = |item: &crate::query::JobSummary| {
            job_lists::cursor_for(item, query.source, query.sort.column)
        };
        use crate::query::PagePosition;
        let (has_prev, has_next) = match &query.position {
            PagePosition::First => (false, more),
            PagePosition::After(_) => (true, more),
            PagePosition::Before(_) => (more, true),
            PagePosition::Last => (more, false),
        };
        Ok(Page {
            prev: if has_prev {
                items.first().map(cursor)
            } else {
                None
            },
            next: if has_next {
                items.last().map(cursor)
            } else {
                None
            },
            items,
        })
    }

    async fn count_jobs(
        &self,
        source: Pillar,
        filter: &JobFilter,
    ) -> StoreResult<crate::query::JobCount> {
        let cap = crate::query::count_cap(filter);
        let built = job_lists::count_statement(&self.schema, source, filter, cap);
        let rows = self.rows_of_built("count_jobs", &built).await?;
        let n = match rows.first() {
            Some(row) => count(row, "matching").map_err(|f| self.fault("count_jobs", f))?,
            None => 0,
        };
        let capped = !filter.is_empty() && n > cap;
        Ok(crate::query::JobCount {
            matching: if capped { cap } else { n },
            capped,
        })
    }

    async fn search_window(
        &self,
        source: Pillar,
        before: Option<Timestamp>,
    ) -> StoreResult<Option<Timestamp>> {
        let built =
            job_lists::search_window_statement(&self.schema, source, before, SEARCH_WINDOW_ROWS);
        let rows = self.rows_of_built("search_window", &built).await?;
        match rows.first() {
            Some(row) => {
                rows::opt_time(row, "window_from").map_err(|f| self.fault("search_window", f))
            }
            None => Ok(None),
        }
    }

    async fn summary(&self) -> StoreResult<Summary> {
        let rows = self
            .rows_of("summary", Repeat::Always, &queries::SUMMARY, &[])
            .await?;
        let Some(row) = rows.first() else {
            return Ok(Summary::default());
        };
        (|| -> Result<Summary, Fault> {
            Ok(Summary {
                pending: count(row, "pending")?,
                scheduled: count(row, "scheduled")?,
                fetched: count(row, "fetched")?,
                processing: count(row, "processing")?,
                succeeded: count(row, "succeeded")?,
                dlq: count(row, "dlq")?,
                succeeded_1m: count(row, "succeeded_1m")?,
                succeeded_5m: count(row, "succeeded_5m")?,
                failed_1m: count(row, "failed_1m")?,
                failed_5m: count(row, "failed_5m")?,
                retried_5m: count(row, "retried_5m")?,
            })
        })()
        .map_err(|f| self.fault("summary", f))
    }

    async fn queue_stats(&self) -> StoreResult<Vec<QueueStats>> {
        let rows = self
            .rows_of("queue_stats", Repeat::Always, &queries::QUEUE_STATS, &[])
            .await?;
        self.map_rows("queue_stats", &rows, |r| {
            Ok(QueueStats {
                queue: req_str(r, "queue")?,
                paused: rows::req_bool(r, "paused")?,
                hidden: rows::req_bool(r, "hidden")?,
                max_workers: opt_u32(r, "max_workers")?,
                pending: count(r, "pending")?,
                scheduled: count(r, "scheduled")?,
                fetched: count(r, "fetched")?,
                processing: count(r, "processing")?,
                succeeded: count(r, "succeeded")?,
                failed: count(r, "failed")?,
                lag_avg_ms: count(r, "lag_avg_ms")?,
                lag_max_ms: count(r, "lag_max_ms")?,
                lag_warn_secs: opt_u32(r, "lag_warn_secs")?,
                lag_crit_secs: opt_u32(r, "lag_crit_secs")?,
                zombie_timeout_secs: opt_u32(r, "zombie_timeout_secs")?,
                execution_timeout_secs: opt_u32(r, "execution_timeout_secs")?,
            })
        })
    }

    async fn throughput(
        &self,
        minutes: u32,
        queue: Option<&str>,
    ) -> StoreResult<Vec<ThroughputBucket>> {
        if minutes == 0 {
            return Ok(Vec::new());
        }
        let minutes = minutes.min(7 * 24 * 60);
        let span = to_i32(minutes);
        let answer = self
            .rows_of(
                "throughput",
                Repeat::Always,
                &queries::THROUGHPUT,
                &[&span, &queue],
            )
            .await?;
        // Every row carries the database clock's minute; a row without a bucket is the
        // clock alone.
        let now = answer
            .first()
            .map(|row| rows::req_time(row, "current_minute"))
            .transpose()
            .map_err(|f| self.fault("throughput", f))?
            .ok_or_else(|| StoreError::database("throughput", "no clock came back", false))?;
        let mut found = HashMap::new();
        for row in &answer {
            let bucket = (|| -> Result<Option<ThroughputBucket>, Fault> {
                let Some(minute) = rows::opt_time(row, "bucket_start")? else {
                    return Ok(None);
                };
                Ok(Some(ThroughputBucket {
                    minute,
                    succeeded: count(row, "succeeded")?,
                    failed: count(row, "failed")?,
                    retried: count(row, "retried")?,
                    duration_sum_ms: count(row, "duration_sum_ms")?,
                    duration_max_ms: count(row, "duration_max_ms")?,
                }))
            })()
            .map_err(|f| self.fault("throughput", f))?;
            if let Some(bucket) = bucket {
                found.insert(bucket.minute, bucket);
            }
        }
        Ok((0..i64::from(minutes))
            .rev()
            .map(|back| {
                let minute = now - chrono::Duration::minutes(back);
                found.remove(&minute).unwrap_or(ThroughputBucket {
                    minute,
                    ..Default::default()
                })
            })
            .collect())
    }

    async fn run_times(&self, minutes: u32) -> StoreResult<Vec<RunTimeHistogram>> {
        let minutes = i64::from(minutes.clamp(1, 7 * 24 * 60));
        let rows = self
            .rows_of(
                "run_times",
                Repeat::Always,
                &queries::RUN_TIMES,
                &[&minutes],
            )
            .await?;
        let counts = self.map_rows("run_times", &rows, |r| {
            let bin = rows::req_int(r, "bin")?;
            Ok((
                req_str(r, "job_type")?,
                u16::try_from(bin).unwrap_or(run_time::MAX_BIN),
                count(r, "runs")?,
            ))
        })?;
        Ok(RunTimeHistogram::per_job_type(counts))
    }

    async fn top_errors(&self, limit: u32) -> StoreResult<Vec<ErrorGroup>> {
        let limit = i64::from(limit.min(10_000));
        let rows = self
            .rows_of(
                "top_errors",
                Repeat::Always,
                &queries::TOP_ERRORS,
                &[&limit],
            )
            .await?;
        self.map_rows("top_errors", &rows, |r| {
            let code = rows::req_int(r, "reason")?;
            let fingerprint = req_str(r, "fingerprint")?;
            Ok(ErrorGroup {
                fingerprint: fingerprint.trim().parse().map_err(|_| {
                    rows::corrupt(format!("error group fingerprint {fingerprint:?}"))
                })?,
                reason: crate::model::FailureReason::from_code(code)
                    .ok_or_else(|| rows::corrupt(format!("unknown failure reason {code}")))?,
                kind: req_str(r, "error_kind")?,
                job_type: req_str(r, "job_type")?,
                sample: req_str(r, "sample")?,
                count: count(r, "dlq_rows")?,
                last_seen: rows::req_time(r, "last_seen")?,
            })
        })
    }
}

#[async_trait]
impl Store for SqlServerStore {
    async fn enqueue(&self, req: EnqueueRequest) -> StoreResult<EnqueueOutcome> {
        let outcomes = self.enqueue_batch(vec![req]).await?;
        outcomes.into_iter().next().ok_or_else(|| {
            StoreError::database("enqueue", "the database returned no outcome", false)
        })
    }

    async fn enqueue_batch(&self, reqs: Vec<EnqueueRequest>) -> StoreResult<Vec<EnqueueOutcome>> {
        if reqs.is_empty() {
            return Ok(Vec::new());
        }
        // Ids are fixed before the first attempt: a retry after an ambiguous failure finds
        // the rows it already wrote instead of writing them twice.
        let ids: Vec<JobId> = reqs.iter().map(|_| JobId::new()).collect();
        let json = enqueue::request_json(&reqs, Some(&ids))?;
        let sql = self.sql(queries::ENQUEUE.sql);
        let (json, sql) = (&json, &sql);
        let answer = pool::run(
            &self.pool,
            &self.last_connect_error,
            "enqueue",
            Repeat::Always,
            true,
            self.retry,
            self.command_timeout,
            attempt!(|client| {
                let stream = wire::query(client, sql, &[json]).await?;
                reader::read_declared(queries::ENQUEUE.name, queries::ENQUEUE.reads, stream).await
            }),
        )
        .await?;
        enqueue::outcomes(&answer, reqs.len()).map_err(|f| self.fault("enqueue", f))
    }

    async fn claim_batch(&self, req: ClaimRequest) -> StoreResult<Vec<Job>> {
        if req.limit == 0
            || req.queues.as_ref().is_some_and(Vec::is_empty)
            || req.types.as_ref().is_some_and(Vec::is_empty)
        {
            return Ok(Vec::new());
        }
        let queues: Option<String> = req.queues.as_ref().map(to_json).transpose()?;
        let types: Option<String> = req.types.as_ref().map(to_json).transpose()?;
        // One claim statement takes at most MAX_ROWS_PER_STATEMENT rows (lock escalation);
        // a larger claim is several, each its own transaction, until one comes back short.
        let mut wanted = usize::try_from(req.limit.min(10_000)).unwrap_or(10_000);
        let mut jobs = Vec::new();
        while wanted > 0 {
            let limit = to_i32(u32::try_from(wanted.min(MAX_ROWS_PER_STATEMENT)).unwrap_or(0));
            // Re-sent only when nothing was applied. A claim that timed out may still commit
            // on the server: its rows then stay fetched under this worker, which never runs
            // them, until the fetch lease hands them back (`RESCUE_FETCHED`) — a delay, not a
            // double run. Re-sending at once would queue a second claim behind the first.
            let answer = self
                .rows_of(
                    "claim_batch",
                    Repeat::IfNotApplied,
                    &queries::CLAIM,
                    &[&limit, &req.worker_id, &queues, &types],
                )
                .await;
            let rows = match answer {
                Ok(rows) => rows,
                // The earlier statements of this claim committed: hand over what they took.
                Err(e) if !jobs.is_empty() => {
                    tracing::warn!(
                        event = "store.sqlserver.claim_cut_short",
                        error = %e,
                        claimed = jobs.len(),
                        "a claim statement failed; the jobs claimed before it are handed over"
                    );
                    break;
                }
                Err(e) => return Err(e),
            };
            let got = rows.len();
            jobs.extend(self.map_rows("claim_batch", &rows, |r| rows::job(r, Pillar::Hot))?);
            if got < usize::try_from(limit).unwrap_or(0) {
                break;
            }
            wanted -= got;
        }
        // OUTPUT has no order; hand the batch over in claim order.
        jobs.sort_by(claim_order);
        let start = jobs.len().min(req.start as usize);
        if start > 0 {
            self.start_claimed(&req.worker_id, &mut jobs[..start]).await;
        }
        Ok(jobs)
    }

    async fn mark_processing(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<Vec<JobId>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let json = ids_json(ids);
        // Not repeated after an ambiguous failure: a second run would find the rows already
        // processing and report them as not started, so their user code would never run.
        let rows = self
            .rows_of(
                "mark_processing",
                Repeat::IfNotApplied,
                &queries::MARK_PROCESSING,
                &[&worker_id, &json],
            )
            .await?;
        let started: HashSet<JobId> = self
            .map_rows("mark_processing", &rows, |r| rows::row_id(r, "id"))?
            .into_iter()
            .collect();
        let mut reported = HashSet::new();
        Ok(ids
            .iter()
            .copied()
            .filter(|id| started.contains(id) && reported.insert(*id))
            .collect())
    }

    async fn heartbeat(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<HeartbeatReport> {
        if ids.is_empty() {
            return Ok(HeartbeatReport::default());
        }
        let json = ids_json(ids);
        let rows = self
            .rows_of(
                "heartbeat",
                Repeat::Always,
                &queries::HEARTBEAT,
                &[&worker_id, &json],
            )
            .await?;
        let owned: HashMap<JobId, bool> = self
            .map_rows("heartbeat", &rows, |r| {
                Ok((
                    rows::row_id(r, "id")?,
                    rows::req_bool(r, "cancel_requested")?,
                ))
            })?
            .into_iter()
            .collect();
        let mut report = HeartbeatReport::default();
        let mut seen = HashSet::new();
        for id in ids.iter().filter(|id| seen.insert(**id)) {
            match owned.get(id) {
                Some(cancel) => {
                    report.alive.push(*id);
                    if *cancel {
                        report.cancel_requested.push(*id);
                    }
                }
                None => report.lost.push(*id),
            }
        }
        Ok(report)
    }

    async fn release(
        &self,
        worker_id: &str,
        ids: &[JobId],
        run_at: Option<Timestamp>,
    ) -> StoreResult<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let json = ids_json(ids);
        let run_at = run_at.map(rows::to_sql_time);
        self.count_of(
            "release",
            Repeat::Always,
            &queries::RELEASE,
            &[&worker_id, &json, &run_at],
            "released",
        )
        .await
    }

    async fn complete(
        &self,
        worker_id: &str,
        completions: Vec<Completion>,
    ) -> StoreResult<Vec<Applied>> {
        if completions.is_empty() {
            return Ok(Vec::new());
        }
        let first = crate::store::first_completions(&completions);
        let mut payload = Vec::with_capacity(completions.len());
        for (c, first) in completions.iter().zip(&first) {
            if !first {
                continue;
            }
            payload.push(match c {
                Completion::Succeeded {
                    id,
                    result,
                    duration_ms,
                } => CompletionRow {
                    id: rows::id_text(*id),
                    kind: "s",
                    result: result.as_deref().map(rows::JsonText::of),
                    duration_ms: Some(*duration_ms),
                    reason: None,
                    error: None,
                    message: None,
                    fp_head: None,
                    retry_at: None,
                    bin: Some(run_time::bin_of(*duration_ms)),
                },
                Completion::Retry {
                    id,
                    error,
                    retry_at,
                } => CompletionRow {
                    id: rows::id_text(*id),
                    kind: "r",
                    result: None,
                    duration_ms: None,
                    reason: None,
                    error: Some(error),
                    message: Some(error.message.clone()),
                    fp_head: None,
                    retry_at: Some(json_time(*retry_at)),
                    bin: None,
                },
                Completion::DeadLetter {
                    id,
                    reason,
                    error,
                    duration_ms,
                } => CompletionRow {
                    id: rows::id_text(*id),
                    kind: "d",
                    result: None,
                    duration_ms: Some(*duration_ms),
                    reason: Some(reason.code()),
                    error: Some(error),
                    message: Some(error.message.clone()),
                    fp_head: Some(
                        FingerprintHead::new(*reason, &error.kind, &error.message)
                            .as_str()
                            .to_string(),
                    ),
                    retry_at: None,
                    bin: Some(run_time::bin_of(*duration_ms)),
                },
                Completion::Released { id } => CompletionRow {
                    id: rows::id_text(*id),
                    kind: "u",
                    result: None,
                    duration_ms: None,
                    reason: None,
                    error: None,
                    message: None,
                    fp_head: None,
                    retry_at: None,
                    bin: None,
                },
            });
        }
        let json = to_json(&payload)?;
        let rows = self
            .rows_of(
                "complete",
                Repeat::IfNotApplied,
                &queries::COMPLETE,
                &[&worker_id, &json],
            )
            .await?;
        let applied: HashSet<JobId> = self
            .map_rows("complete", &rows, |r| rows::row_id(r, "id"))?
            .into_iter()
            .collect();
        Ok(completions
            .iter()
            .zip(&first)
            .map(|(c, first)| {
                if *first && applied.contains(&c.id()) {
                    Applied::Applied
                } else {
                    Applied::NotApplied
                }
            })
            .collect())
    }

    async fn cancel(&self, id: JobId) -> StoreResult<CancelOutcome> {
        let (cancelled, requested) = self.cancel_ids(&[id]).await?;
        Ok(if cancelled > 0 {
            CancelOutcome::Cancelled
        } else if requested > 0 {
            CancelOutcome::Requested
        } else {
            CancelOutcome::NotFound
        })
    }

    async fn resurrect(&self, id: JobId, edit: Option<JobEdit>) -> StoreResult<Applied> {
        match self.resurrect_ids(&[id], edit.as_ref()).await? {
            0 => Err(StoreError::JobNotFound(id)),
            _ => Ok(Applied::Applied),
        }
    }

    async fn edit_job(&self, id: JobId, edit: JobEdit) -> StoreResult<Job> {
        let id_bytes = rows::id_param(&id);
        let payload: Option<String> = edit
            .payload
            .as_deref()
            .map(|p| validation::normalize_payload(p).to_string());
        let tags: Option<String> = edit.tags.as_deref().map(rows::tags_to_stored);
        let rows = self
            .rows_of(
                "edit_job",
                Repeat::IfNotApplied,
                &queries::EDIT_JOB,
                &[&id_bytes, &payload, &tags, &edit.priority, &edit.queue],
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::database("edit_job", "no answer", false))?;
        let changed = opt_str(row, "changed").map_err(|f| self.fault("edit_job", f))?;
        if changed.is_none() {
            let hot = rows::opt_int(row, "hot_status").map_err(|f| self.fault("edit_job", f))?;
            let archived =
                rows::req_bool(row, "archived").map_err(|f| self.fault("edit_job", f))?;
            let state = match hot.and_then(HotStatus::from_code) {
                Some(status) => JobState::from(status),
                None if archived => JobState::Succeeded,
                None => return Err(StoreError::JobNotFound(id)),
            };
            return Err(StoreError::InvalidState {
                id,
                state,
                action: "edit",
            });
        }
        self.get_job(id).await?.ok_or(StoreError::JobNotFound(id))
    }

    async fn purge(&self, source: Pillar, ids: &[JobId]) -> StoreResult<u64> {
        self.purge_ids(source, ids).await
    }

    async fn bulk_by_ids(
        &self,
        action: BulkAction,
        source: Pillar,
        ids: &[JobId],
    ) -> StoreResult<u64> {
        action.check_source(source)?;
        match action {
            BulkAction::Resurrect => self.resurrect_ids(ids, None).await,
            BulkAction::Cancel => {
                let (cancelled, requested) = self.cancel_ids(ids).await?;
                Ok(cancelled + requested)
            }
            BulkAction::Purge => self.purge_ids(source, ids).await,
        }
    }

    async fn bulk_filter_step(&self, step: BulkFilterStep<'_>) -> StoreResult<BulkStep> {
        let BulkFilterStep {
            action,
            source,
            filter,
            after,
            limit,
        } = step;
        action.check_source(source)?;
        let only_pending = action == BulkAction::Purge && source == Pillar::Hot;
        let built = job_lists::bulk_ids_statement(
            &self.schema,
            source,
            filter,
            only_pending,
            after,
            limit.min(MAX_PAGE_SIZE),
        );
        let rows = self.rows_of_built("bulk_by_filter", &built).await?;
        let ids = self.map_rows("bulk_by_filter", &rows, |r| rows::row_id(r, "id"))?;
        let affected = if ids.is_empty() {
            0
        } else {
            self.bulk_by_ids(action, source, &ids).await?
        };
        Ok(BulkStep {
            selected: u32::try_from(ids.len()).unwrap_or(u32::MAX),
            affected,
            last: ids.last().copied(),
        })
    }

    async fn update_queue(&self, name: &str, patch: QueuePatch) -> StoreResult<QueueConfig> {
        let set = |o: &Option<Option<u32>>| o.is_some();
        let val = |o: &Option<Option<u32>>| o.flatten().map(to_i32);
        let (p_set, p_val) = (patch.paused.is_some(), patch.paused.unwrap_or(false));
        let (h_set, h_val) = (patch.hidden.is_some(), patch.hidden.unwrap_or(false));
        let (mw_set, mw) = (set(&patch.max_workers), val(&patch.max_workers));
        let (zt_set, zt) = (
            set(&patch.zombie_timeout_secs),
            val(&patch.zombie_timeout_secs),
        );
        let (et_set, et) = (
            set(&patch.execution_timeout_secs),
            val(&patch.execution_timeout_secs),
        );
        let (lw_set, lw) = (set(&patch.lag_warn_secs), val(&patch.lag_warn_secs));
        let (lc_set, lc) = (set(&patch.lag_crit_secs), val(&patch.lag_crit_secs));
        let rl_set = patch.rate_limit.is_some();
        let rl_starts = patch.rate_limit.flatten().map(|l| to_i32(l.starts));
        let rl_period = patch.rate_limit.flatten().map(|l| to_i32(l.per_secs));
        let rows = self
            .rows_of(
                "update_queue",
                Repeat::Always,
                &queries::UPDATE_QUEUE,
                &[
                    &name, &p_set, &p_val, &h_set, &h_val, &mw_set, &mw, &zt_set, &zt, &et_set,
                    &et, &lw_set, &lw, &lc_set, &lc, &rl_set, &rl_starts, &rl_period,
                ],
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::database("update_queue", "no row came back", false))?;
        Self::queue_config(row).map_err(|f| self.fault("update_queue", f))
    }

    async fn create_batch(&self, req: BatchRequest) -> StoreResult<BatchCreated> {
        self.create_batch_rows(req).await
    }

    async fn create_schedule(
        &self,
        definition: ScheduleDefinition,
        origin: ScheduleOrigin,
        enabled: bool,
    ) -> StoreResult<Schedule> {
        self.create_schedule_row(definition, origin, enabled).await
    }

    async fn replace_schedule(
        &self,
        definition: ScheduleDefinition,
        origin: ScheduleOrigin,
    ) -> StoreResult<Schedule> {
        self.replace_schedule_row(definition, origin).await
    }

    async fn set_schedule_enabled(&self, name: &str, enabled: bool) -> StoreResult<Schedule> {
        self.set_schedule_enabled_row(name, enabled).await
    }

    async fn delete_schedule(&self, name: &str) -> StoreResult<Applied> {
        self.delete_schedule_row(name).await
    }

    async fn fire_schedule(&self, fire: ScheduleFire) -> StoreResult<Vec<FireOutcome>> {
        self.fire_schedule_rows(fire).await
    }

    async fn save_settings(&self, settings: &EngineSettings) -> StoreResult<()> {
        let json = to_json(settings)?;
        self.rows_of(
            "save_settings",
            Repeat::Always,
            &queries::SAVE_SETTINGS,
            &[&json],
        )
        .await?;
        Ok(())
    }

    async fn rescue_step(&self, step: RescueStep<'_>) -> StoreResult<u64> {
        let RescueStep {
            kind,
            policy,
            limit,
        } = step;
        // At most MAX_ROWS_PER_STATEMENT rows per step, whatever the caller asks.
        let batch =
            to_i32(limit.clamp(1, u32::try_from(MAX_ROWS_PER_STATEMENT).unwrap_or(u32::MAX)));
        let dead = secs(policy.dead_instance_timeout);
        let fetched = secs(policy.fetched_timeout);
        let zombie = secs(policy.default_zombie_timeout);
        let zombie_head = written_head(FailureReason::Zombie, ZOMBIE);
        let expired_head = written_head(FailureReason::Expired, EXPIRED);
        let (statement, column, params): (&Statement, _, Vec<&dyn tiberius::ToSql>) = match kind {
            RescueKind::StaleClaims => (
                &queries::RESCUE_FETCHED,
                "released",
                vec![&fetched, &dead, &batch],
            ),
            RescueKind::Zombies => (
                &queries::RESCUE_ZOMBIES,
                "zombies",
                vec![
                    &zombie,
                    &dead,
                    &batch,
                    &ZOMBIE.kind,
                    &ZOMBIE.message,
                    &zombie_head,
                ],
            ),
            RescueKind::Expired => (
                &queries::RESCUE_EXPIRED,
                "expired",
                vec![&batch, &EXPIRED.kind, &EXPIRED.message, &expired_head],
            ),
            RescueKind::DeadInstances => (&queries::RESCUE_INSTANCES, "deleted", vec![&batch]),
        };
        self.count_of("rescue", Repeat::Always, statement, &params, column)
            .await
    }

    async fn prune_step(&self, step: PruneStep) -> StoreResult<u64> {
        let PruneStep {
            target,
            older_than,
            limit,
        } = step;
        // At most MAX_ROWS_PER_STATEMENT rows per delete, whatever the caller asks.
        let batch =
            to_i32(limit.clamp(1, u32::try_from(MAX_ROWS_PER_STATEMENT).unwrap_or(u32::MAX)));
        let age = secs(older_than);
        let statement = match target {
            PruneTarget::Archive => &queries::PRUNE_ARCHIVE,
            PruneTarget::Dlq => &queries::PRUNE_DLQ,
            PruneTarget::MetricBuckets => &queries::PRUNE_METRICS,
            PruneTarget::Audit => &queries::PRUNE_AUDIT,
            PruneTarget::UniqueKeys => &queries::PRUNE_UNIQUE_KEYS,
            PruneTarget::ScheduleRuns => &queries::PRUNE_SCHEDULE_RUNS,
            PruneTarget::Batches => &queries::PRUNE_BATCHES,
        };
        let deleted = self
            .count_of(
                "prune",
                Repeat::Always,
                statement,
                &[&age, &batch],
                "deleted",
            )
            .await?;
        if target == PruneTarget::Dlq && deleted > 0 {
            // Groups whose rows all left the DLQ (their slots sum to zero) are only storage.
            self.count_of(
                "prune",
                Repeat::Always,
                &queries::PRUNE_ERROR_GROUPS,
                &[],
                "deleted",
            )
            .await?;
        }
        Ok(deleted)
    }

    async fn heartbeat_instance(&self, info: &InstanceInfo) -> StoreResult<bool> {
        let pid = i64::from(info.pid);
        let started = rows::to_sql_time(info.started_at);
        let total = to_i32(info.workers_total);
        let busy = to_i32(info.workers_busy);
        let kind = info.kind.as_str();
        let queues = info.queues.as_ref().map(to_json).transpose()?;
        let job_types = info.job_types.as_ref().map(to_json).transpose()?;
        let rows = self
            .rows_of(
                "heartbeat_instance",
                Repeat::Always,
                &queries::HEARTBEAT_INSTANCE,
                &[
                    &info.id,
                    &info.host,
                    &pid,
                    &info.version,
                    &started,
                    &total,
                    &busy,
                    &kind,
                    &queues,
                    &job_types,
                ],
            )
            .await?;
        let quiet = self.map_rows("heartbeat_instance", &rows, |r| rows::req_bool(r, "quiet"))?;
        // The upsert just wrote the row, so it is there; a missing one reads as claiming.
        Ok(quiet.first().copied().unwrap_or(false))
    }

    async fn set_instance_quiet(&self, id: &str, quiet: bool) -> StoreResult<Applied> {
        // Setting a flag to a value is idempotent: safe to repeat after a lost connection.
        let changed = self
            .count_of(
                "set_instance_quiet",
                Repeat::Always,
                &queries::SET_INSTANCE_QUIET,
                &[&id, &quiet],
                "changed",
            )
            .await?;
        Ok(Applied::from_rows(usize::from(changed > 0)))
    }

    async fn deregister_instance(&self, id: &str) -> StoreResult<()> {
        self.rows_of(
            "deregister_instance",
            Repeat::Always,
            &queries::DEREGISTER_INSTANCE,
            &[&id],
        )
        .await?;
        Ok(())
    }

    async fn append_audit(&self, entry: NewAuditEntry) -> StoreResult<AuditEntry> {
        let count = i64::try_from(entry.count).unwrap_or(i64::MAX);
        let target: String = entry.target.chars().take(4000).collect();
        let rows = self
            .rows_of(
                "append_audit",
                Repeat::IfNotApplied,
                &queries::APPEND_AUDIT,
                &[&entry.actor, &entry.action, &target, &count, &entry.detail],
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::database("append_audit", "no row came back", false))?;
        Self::audit(row).map_err(|f| self.fault("append_audit", f))
    }
}

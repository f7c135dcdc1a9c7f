//! The embedded SQLite store (DESIGN §6): one file, WAL, one writer thread that
//! group-commits every transition, a small pool of WAL readers (the console, and large
//! claims read back once committed), and a thread that checkpoints beside the writer.
//!
//! Several `deck` processes may share the file: every write transaction is
//! `BEGIN IMMEDIATE` (the busy timeout queues them up), and every decision (claim,
//! ownership, rescue) is made inside that transaction.

mod batches;
mod checkpointer;
mod codec;
mod connection;
mod error_groups;
mod file_identity;
mod maintenance;
mod moves;
mod operators;
mod producers;
mod readers;
mod reads;
mod schedules;
mod schema;
mod telemetry;
mod workers;

#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::StoreError;
use crate::store::contract::*;
use crate::store::{SqliteSynchronous, StoreOptions};

use codec::{duration_us, now_us, to_us};
use connection::{open_connection, unavailable};
use file_identity::FileIdentity;
use readers::Readers;
use writer::{Watch, Writer};

mod writer;

/// Rows per transaction for bulk actions over a filter.
const BULK_STEP: u32 = 250;

pub struct SqliteStore {
    writer: Writer,
    readers: Arc<Readers>,
    /// The file the store opened and how its writes went (shared with the writer thread).
    watch: Watch,
}

/// The whole schema as one SQL script, every migration in order with its version comment
/// (`deck migrate --print`). Opening the store applies the same migrations itself.
pub fn migration_script() -> String {
    schema::MIGRATIONS
        .iter()
        .map(|(version, name, sql)| format!("-- {version:04}_{name}\n{}\n", sql.trim_end()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Open (creating when missing) the database file, bring its schema up to date, and start
/// the writer thread.
pub async fn open(path: &str, options: &StoreOptions) -> StoreResult<Arc<dyn Store>> {
    Ok(Arc::new(SqliteStore::open(path, options).await?))
}

impl SqliteStore {
    pub async fn open(path: &str, options: &StoreOptions) -> StoreResult<SqliteStore> {
        let path = path.to_string();
        let options = options.clone();
        tokio::task::spawn_blocking(move || {
            let mut write_conn = open_connection(&path, &options)?;
            let watch = Watch {
                identity: Arc::new(FileIdentity::capture(write_conn.path())),
                ..Watch::default()
            };
            let applied = schema::migrate(&mut write_conn, now_us())?;
            if !applied.is_empty() {
                tracing::info!(db = %path, versions = ?applied, "applied SQLite schema migrations");
            }
            let reader = open_connection(&path, &options)?;
            let wal_sync = if options.sqlite_synchronous == SqliteSynchronous::Full {
                // The writer commits without fsync and its sync thread fsyncs the WAL before
                // replying (see `writer`): the same durability as FULL, off the write path.
                write_conn
                    .execute_batch("PRAGMA synchronous = NORMAL")
                    .map_err(|e| unavailable(&path, e))?;
                let db_file = write_conn.path().filter(|p| !p.is_empty()).unwrap_or(&path);
                Some(PathBuf::from(format!("{db_file}-wal")))
            } else {
                None
            };
            checkpointer::install(
                &mut write_conn,
                open_connection(&path, &options)?,
                checkpointer::Thresholds::default(),
            )
            .map_err(|e| unavailable(&path, e))?;
            let writer = Writer::spawn(write_conn, wal_sync, watch.clone())
                .map_err(|e| unavailable(&path, e))?;
            Ok(SqliteStore {
                writer,
                readers: Readers::watching(path, options, reader, watch.identity.clone()),
                watch,
            })
        })
        .await
        .map_err(|e| StoreError::database("open", format!("open task failed: {e}"), false))?
    }
}

#[cfg(any(test, feature = "testing"))]
impl SqliteStore {
    /// Tests: let the database grow by at most `pages` more pages (`None`: no limit again),
    /// so a write that needs more fails with SQLITE_FULL, "database or disk is full", the way
    /// it does on a full disk. Returns the new limit.
    pub async fn limit_growth_for_tests(&self, pages: Option<u32>) -> StoreResult<i64> {
        self.writer
            .write_lease("limit growth", move |conn| {
                let limit = match pages {
                    Some(extra) => {
                        let count: i64 = conn
                            .query_row("PRAGMA page_count", [], |r| r.get(0))
                            .map_err(connection::db_err("limit growth"))?;
                        count + i64::from(extra)
                    }
                    // SQLite's own default and largest limit.
                    None => 0xFFFF_FFFE,
                };
                conn.query_row(&format!("PRAGMA max_page_count = {limit}"), [], |r| {
                    r.get(0)
                })
                .map_err(connection::db_err("limit growth"))
            })
            .await
    }
}

#[async_trait]
impl StoreReads for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> StoreResult<()> {
        // Readiness must notice a replaced file even while nothing is written.
        self.watch.identity.check()?;
        self.readers
            .read(|conn| {
                let version: i64 = conn
                    .query_row(
                        "SELECT coalesce(max(version), 0) FROM deck_schema_version",
                        [],
                        |r| r.get(0),
                    )
                    .map_err(connection::db_err("ping"))?;
                if version != schema::latest_version() {
                    return Err(StoreError::Schema {
                        problem: format!(
                            "schema version is {version}, expected {}",
                            schema::latest_version()
                        ),
                        help: "restart deck so it applies its migrations".into(),
                    });
                }
                Ok(())
            })
            .await
    }

    fn health(&self) -> StoreHealth {
        StoreHealth {
            unusable: self.watch.identity.lost(),
            ..self.watch.health.health()
        }
    }

    async fn bulk_preview(
        &self,
        source: Pillar,
        filter: &JobFilter,
        sample: u32,
    ) -> StoreResult<BulkPreview> {
        let filter = filter.clone();
        self.readers
            .read(move |conn| reads::bulk_preview(conn, source, &filter, sample))
            .await
    }

    async fn list_queues(&self) -> StoreResult<Vec<QueueConfig>> {
        self.readers
            .read(|conn| maintenance::list_queues(conn, now_us()))
            .await
    }

    async fn list_schedules(&self) -> StoreResult<Vec<Schedule>> {
        self.readers.read(schedules::list).await
    }

    async fn schedule_runs(&self, name: &str, limit: u32) -> StoreResult<Vec<ScheduleRun>> {
        let name = name.to_string();
        self.readers
            .read(move |conn| schedules::runs(conn, &name, limit))
            .await
    }

    async fn get_batch(&self, id: BatchId) -> StoreResult<Option<Batch>> {
        self.readers.read(move |conn| batches::get(conn, id)).await
    }

    async fn list_batches(&self, before: Option<BatchId>, limit: u32) -> StoreResult<Vec<Batch>> {
        self.readers
            .read(move |conn| batches::list(conn, before, limit))
            .await
    }

    async fn batch_members(&self, id: BatchId, limit: u32) -> StoreResult<Vec<JobSummary>> {
        self.readers
            .read(move |conn| batches::members(conn, id, limit))
            .await
    }

    async fn load_settings(&self) -> StoreResult<EngineSettings> {
        self.readers.read(maintenance::load_settings).await
    }

    async fn list_instances(&self, max_age: std::time::Duration) -> StoreResult<Vec<InstanceInfo>> {
        let newer_than = now_us() - duration_us(max_age);
        self.readers
            .read(move |conn| maintenance::list_instances(conn, newer_than))
            .await
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        before_id: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<AuditEntry>> {
        let filter = filter.clone();
        self.readers
            .read(move |conn| maintenance::list_audit(conn, &filter, before_id, limit))
            .await
    }

    async fn get_job(&self, id: JobId) -> StoreResult<Option<Job>> {
        self.readers
            .read(move |conn| reads::get_job(conn, id))
            .await
    }

    async fn finished_jobs(&self, ids: &[JobId]) -> StoreResult<Vec<Job>> {
        let ids = ids.to_vec();
        self.readers
            .read(move |conn| reads::finished_jobs(conn, &ids))
            .await
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Page<JobSummary>> {
        let query = query.clone();
        self.readers
            .read(move |conn| reads::list_jobs(conn, &query))
            .await
    }

    async fn count_jobs(&self, source: Pillar, filter: &JobFilter) -> StoreResult<JobCount> {
        let filter = filter.clone();
        self.readers
            .read(move |conn| reads::count_jobs(conn, source, &filter))
            .await
    }

    async fn search_window(
        &self,
        source: Pillar,
        before: Option<Timestamp>,
    ) -> StoreResult<Option<Timestamp>> {
        self.readers
            .read(move |conn| reads::search_window(conn, source, before))
            .await
    }

    async fn summary(&self) -> StoreResult<Summary> {
        self.readers
            .read(|conn| telemetry::summary(conn, now_us()))
            .await
    }

    async fn queue_stats(&self) -> StoreResult<Vec<QueueStats>> {
        self.readers
            .read(|conn| telemetry::queue_stats(conn, now_us()))
            .await
    }

    async fn throughput(
        &self,
        minutes: u32,
        queue: Option<&str>,
    ) -> StoreResult<Vec<ThroughputBucket>> {
        let queue = queue.map(str::to_string);
        self.readers
            .read(move |conn| telemetry::throughput(conn, minutes, queue.as_deref(), now_us()))
            .await
    }

    async fn run_times(&self, minutes: u32) -> StoreResult<Vec<RunTimeHistogram>> {
        self.readers
            .read(move |conn| telemetry::run_times(conn, minutes, now_us()))
            .await
    }

    async fn pending_groups(&self, limit: u32) -> StoreResult<Vec<PendingGroup>> {
        self.readers
            .read(move |conn| telemetry::pending_groups(conn, limit))
            .await
    }

    async fn top_errors(&self, limit: u32) -> StoreResult<Vec<ErrorGroup>> {
        self.readers
            .read(move |conn| telemetry::top_errors(conn, limit))
            .await
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn orders_writes_on_submit(&self) -> bool {
        // Validation is synchronous and `Writer::submit` sends before its first await.
        true
    }

    async fn enqueue(&self, req: EnqueueRequest) -> StoreResult<EnqueueOutcome> {
        let mut out = self
            .writer
            .write("enqueue", move |conn| {
                producers::enqueue_all(conn, vec![req], now_us())
            })
            .await?;
        out.pop()
            .ok_or_else(|| StoreError::database("enqueue", "no outcome for the job", false))
    }

    async fn enqueue_batch(&self, reqs: Vec<EnqueueRequest>) -> StoreResult<Vec<EnqueueOutcome>> {
        if reqs.is_empty() {
            return Ok(Vec::new());
        }
        self.writer
            .write("enqueue batch", move |conn| {
                producers::enqueue_all(conn, reqs, now_us())
            })
            .await
    }

    async fn claim_batch(&self, req: ClaimRequest) -> StoreResult<Vec<Job>> {
        let outcome = self
            .writer
            .write_lease("claim", move |conn| workers::claim(conn, &req, now_us()))
            .await?;
        let claimed = match outcome {
            workers::ClaimOutcome::Jobs(jobs) => return Ok(jobs),
            workers::ClaimOutcome::ReadBack(claimed) => Arc::new(claimed),
        };
        // The claim has committed; reading its rows back on a reader keeps that work off the
        // writer thread. Should the reader fail, the writer reads them: the rows are claimed
        // (some already started) and would otherwise wait for the rescue sweep.
        let on_reader = Arc::clone(&claimed);
        match self
            .readers
            .read_for_runtime(move |conn| workers::read_claimed(conn, &on_reader))
            .await
        {
            Ok(jobs) => Ok(jobs),
            Err(err) => {
                tracing::warn!(error = %err, "reading claimed jobs failed on a reader; reading them on the writer");
                self.writer
                    .write_lease("claim", move |conn| workers::read_claimed(conn, &claimed))
                    .await
            }
        }
    }

    async fn mark_processing(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<Vec<JobId>> {
        let worker = worker_id.to_string();
        let ids = ids.to_vec();
        self.writer
            .write_lease("mark processing", move |conn| {
                workers::mark_processing(conn, &worker, &ids, now_us())
            })
            .await
    }

    async fn heartbeat(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<HeartbeatReport> {
        let worker = worker_id.to_string();
        let ids = ids.to_vec();
        self.writer
            .write_lease("heartbeat", move |conn| {
                workers::heartbeat(conn, &worker, &ids, now_us())
            })
            .await
    }

    async fn release(
        &self,
        worker_id: &str,
        ids: &[JobId],
        run_at: Option<Timestamp>,
    ) -> StoreResult<u64> {
        let worker = worker_id.to_string();
        let ids = ids.to_vec();
        let run_at = run_at.map(to_us);
        self.writer
            .write_lease("release", move |conn| {
                workers::release(conn, &worker, &ids, run_at)
            })
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
        let worker = worker_id.to_string();
        let batch = workers::CompletionBatch::new(completions)?;
        self.writer
            .write("complete", move |conn| {
                workers::complete(conn, &worker, &batch, now_us())
            })
            .await
    }

    async fn cancel(&self, id: JobId) -> StoreResult<CancelOutcome> {
        self.writer
            .write("cancel", move |conn| operators::cancel(conn, id, now_us()))
            .await
    }

    async fn resurrect(&self, id: JobId, edit: Option<JobEdit>) -> StoreResult<Applied> {
        self.writer
            .write("resurrect", move |conn| {
                operators::resurrect(conn, id, edit.as_ref(), now_us())
            })
            .await
    }

    async fn edit_job(&self, id: JobId, edit: JobEdit) -> StoreResult<Job> {
        self.writer
            .write("edit job", move |conn| {
                operators::edit_job(conn, id, &edit, now_us())
            })
            .await
    }

    async fn purge(&self, source: Pillar, ids: &[JobId]) -> StoreResult<u64> {
        let ids = ids.to_vec();
        self.writer
            .write("purge", move |conn| {
                operators::purge(conn, source, &ids, now_us())
            })
            .await
    }

    async fn bulk_by_ids(
        &self,
        action: BulkAction,
        source: Pillar,
        ids: &[JobId],
    ) -> StoreResult<u64> {
        let mut total = 0;
        for chunk in ids.chunks(BULK_STEP as usize) {
            let chunk = chunk.to_vec();
            total += self
                .writer
                .write("bulk action", move |conn| {
                    operators::bulk_by_ids(conn, action, source, &chunk, now_us())
                })
                .await?;
        }
        Ok(total)
    }

    async fn bulk_filter_step(&self, step: BulkFilterStep<'_>) -> StoreResult<BulkStep> {
        let (action, source, after, limit) = (step.action, step.source, step.after, step.limit);
        let filter = step.filter.clone();
        self.writer
            .write("bulk action by filter", move |conn| {
                operators::bulk_filter_step(conn, action, source, &filter, after, limit, now_us())
            })
            .await
    }

    async fn update_queue(&self, name: &str, patch: QueuePatch) -> StoreResult<QueueConfig> {
        let name = name.to_string();
        self.writer
            .write("update queue", move |conn| {
                maintenance::update_queue(conn, &name, &patch, now_us())
            })
            .await
    }

    async fn create_schedule(
        &self,
        definition: ScheduleDefinition,
        origin: ScheduleOrigin,
        enabled: bool,
    ) -> StoreResult<Schedule> {
        self.writer
            .write("create schedule", move |conn| {
                schedules::create(conn, &definition, origin, enabled, now_us())
            })
            .await
    }

    async fn replace_schedule(
        &self,
        definition: ScheduleDefinition,
        origin: ScheduleOrigin,
    ) -> StoreResult<Schedule> {
        self.writer
            .write("edit schedule", move |conn| {
                schedules::replace(conn, &definition, origin, now_us())
            })
            .await
    }

    async fn set_schedule_enabled(&self, name: &str, enabled: bool) -> StoreResult<Schedule> {
        let name = name.to_string();
        self.writer
            .write("pause schedule", move |conn| {
                schedules::set_enabled(conn, &name, enabled, now_us())
            })
            .await
    }

    async fn delete_schedule(&self, name: &str) -> StoreResult<Applied> {
        let name = name.to_string();
        self.writer
            .write("delete schedule", move |conn| {
                schedules::delete(conn, &name)
            })
            .await
    }

    async fn fire_schedule(&self, fire: ScheduleFire) -> StoreResult<Vec<FireOutcome>> {
        self.writer
            .write("fire schedule", move |conn| {
                schedules::fire(conn, fire, now_us())
            })
            .await
    }

    async fn create_batch(&self, req: BatchRequest) -> StoreResult<BatchCreated> {
        self.writer
            .write("create batch", move |conn| {
                batches::create(conn, req, now_us())
            })
            .await
    }

    async fn save_settings(&self, settings: &EngineSettings) -> StoreResult<()> {
        let settings = settings.clone();
        self.writer
            .write("save settings", move |conn| {
                maintenance::save_settings(conn, &settings, now_us())
            })
            .await
    }

    async fn rescue_step(&self, step: RescueStep<'_>) -> StoreResult<u64> {
        let (kind, policy, limit) = (step.kind, step.policy.clone(), step.limit);
        self.writer
            .write("rescue", move |conn| {
                let step = RescueStep {
                    kind,
                    policy: &policy,
                    limit,
                };
                maintenance::rescue_step(conn, step, now_us())
            })
            .await
    }

    async fn prune_step(&self, step: PruneStep) -> StoreResult<u64> {
        self.writer
            .write("prune", move |conn| {
                let now = now_us();
                let before = now - duration_us(step.older_than);
                maintenance::prune_step(conn, step.target, before, step.limit, now)
            })
            .await
    }

    async fn heartbeat_instance(&self, info: &InstanceInfo) -> StoreResult<bool> {
        let info = info.clone();
        self.writer
            .write("instance heartbeat", move |conn| {
                maintenance::heartbeat_instance(conn, &info, now_us())
            })
            .await
    }

    async fn set_instance_quiet(&self, id: &str, quiet: bool) -> StoreResult<Applied> {
        let id = id.to_string();
        self.writer
            .write("set instance quiet", move |conn| {
                maintenance::set_instance_quiet(conn, &id, quiet)
            })
            .await
    }

    async fn deregister_instance(&self, id: &str) -> StoreResult<()> {
        let id = id.to_string();
        self.writer
            .write("deregister instance", move |conn| {
                maintenance::deregister_instance(conn, &id)
            })
            .await
    }

    async fn append_audit(&self, entry: NewAuditEntry) -> StoreResult<AuditEntry> {
        self.writer
            .write("append audit", move |conn| {
                maintenance::append_audit(conn, &entry, now_us())
            })
            .await
    }
}

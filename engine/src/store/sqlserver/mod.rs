//! The SQL Server store (SQL Server 2017+ and Azure SQL) on tiberius (rustls) and a bb8 pool.
//!
//! One module per concern, with the same names as the SQLite store's where the concern is
//! the same, each with its statements in `queries/<same name>.rs`: `producers` (enqueue, also
//! inside a caller's own transaction), `workers`, `operators`, `reads` (with `job_lists`, the
//! console's statements built at run time), `telemetry`, `maintenance` (sweeps, retention,
//! settings, instances, audit), `schedules`, `batches`, and `bootstrap` (the schema at open
//! and at `deck migrate`). Below them: `round_trip` (one statement batch per operation under
//! the retry policy), `reader` (an answer read against its declaration, never by position),
//! `pool` (connections, faults, what may be re-sent), `wire`, `rows` (row and parameter
//! mapping), `connection` (ADO strings, `mssql://` URLs, the schema name), `migrations` (the
//! versioned DDL and the catalog check) and `routines` (the procedures and functions).
//! `statement_rules` (tests) holds every T-SQL text to server-free rules, read with the small
//! T-SQL lexer in `tsql`.

use std::sync::Arc;
use std::time::Duration;

mod batches;
mod bootstrap;
pub mod connection;
mod job_lists;
mod maintenance;
pub mod migrations;
mod operators;
mod pool;
mod producers;
mod queries;
mod reader;
mod reads;
mod round_trip;
mod routines;
mod rows;
mod schedules;
#[cfg(test)]
mod statement_rules;
mod telemetry;
#[cfg(test)]
mod tsql;
mod wire;
mod workers;

use bootstrap::{apply_script, read_applied, verify};
use connection::{SchemaName, parse_connection, redacted};
use pool::{LastConnectError, Manager, Pool, RetryPolicy};

use crate::error::StoreError;
use crate::store::StoreOptions;
use crate::store::contract::*;

pub use producers::{enqueue_batch_in, enqueue_in};

/// The store: a pool of connections to one database and deck's schema in it.
pub struct SqlServerStore {
    pool: Pool,
    last_connect_error: LastConnectError,
    schema: SchemaName,
    retry: RetryPolicy,
    command_timeout: Duration,
}

/// How long to wait for a pooled connection (and for the first login).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// What `migrate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    pub schema: String,
    /// Versions applied by this run (empty when the schema was already current).
    pub applied: Vec<i32>,
    /// The schema version now in place.
    pub version: i32,
    /// Cosmetic catalog differences the check accepted (Babelfish only).
    pub tolerated: Option<migrations::Tolerated>,
}

/// The full DDL for a DBA (`deck migrate --print`).
pub fn migration_script(schema: &str) -> StoreResult<String> {
    let schema = SchemaName::parse(schema)?;
    Ok(migrations::script(&schema))
}

/// The DDL of migrations 1 to `last` only, as an older deck version applied it (for upgrade
/// tests and for a DBA stepping through versions).
pub fn migration_script_through(schema: &str, last: i32) -> StoreResult<String> {
    let schema = SchemaName::parse(schema)?;
    Ok(migrations::script_through(&schema, last))
}

/// Apply missing migrations (`deck migrate`), then verify the result against the catalog.
pub async fn migrate(connection: &str, options: &StoreOptions) -> StoreResult<MigrationReport> {
    let store = connect(connection, options)?;
    probe(connection).await?;
    let before = read_applied(&store, connection).await?.versions;
    apply_script(&store).await?;
    let tolerated = verify(&store).await?;
    let after = read_applied(&store, connection).await?.versions;
    Ok(MigrationReport {
        schema: store.schema().to_string(),
        applied: after
            .iter()
            .copied()
            .filter(|v| !before.contains(v))
            .collect(),
        version: after.iter().copied().max().unwrap_or(0),
        tolerated,
    })
}

/// Open the store: connect, bootstrap or verify the schema as the options say.
pub async fn open(connection: &str, options: &StoreOptions) -> StoreResult<Arc<dyn Store>> {
    let store = connect(connection, options)?;
    probe(connection).await?;
    let applied = read_applied(&store, connection).await?;
    if !applied.current() && options.auto_create_schema {
        tracing::info!(
            event = "store.sqlserver.migrate",
            schema = %store.schema(),
            "applying missing schema migrations"
        );
        apply_script(&store).await?;
    }
    verify(&store).await?;
    Ok(Arc::new(store))
}

/// Check the server answers and the login works, with one direct connection, so a wrong
/// host, password or database is reported at once with the driver's own words.
async fn probe(connection: &str) -> StoreResult<()> {
    let config = parse_connection(connection)?;
    let manager = Manager::new(config);
    let attempt = tokio::time::timeout(CONNECT_TIMEOUT, bb8::ManageConnection::connect(&manager));
    let cause = match attempt.await {
        Ok(Ok(conn)) => {
            drop(conn);
            return Ok(());
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
    };
    Err(StoreError::Unavailable {
        url: redacted(connection),
        cause,
        help: CONNECT_HELP.into(),
    })
}

const CONNECT_HELP: &str = "check that the server is reachable on its port, the login and \
    password, TrustServerCertificate=true for a self-signed certificate, and that the database \
    exists (deck creates only its schema)";

fn connect(connection: &str, options: &StoreOptions) -> StoreResult<SqlServerStore> {
    let schema = SchemaName::parse(&options.schema)?;
    let config = parse_connection(connection)?;
    if options.pool_size == 0 {
        return Err(StoreError::Config {
            url: redacted(connection),
            cause: "pool_size is 0".into(),
            help: "give the SQL Server pool at least 1 connection (default 10)".into(),
        });
    }
    if options.command_timeout.is_zero() {
        return Err(StoreError::Config {
            url: redacted(connection),
            cause: "command_timeout is 0".into(),
            help: "give statements time to run, e.g. command_timeout = \"30s\" (the default)"
                .into(),
        });
    }
    let last_connect_error = LastConnectError::default();
    // build_unchecked: the pool starts empty, so constructing it never needs the server.
    let pool = bb8::Pool::builder()
        .max_size(options.pool_size)
        .connection_timeout(CONNECT_TIMEOUT)
        .error_sink(Box::new(last_connect_error.clone()))
        .build_unchecked(Manager::new(config));
    Ok(SqlServerStore {
        pool,
        last_connect_error,
        schema,
        retry: RetryPolicy::default(),
        command_timeout: options.command_timeout,
    })
}

#[async_trait]
impl StoreReads for SqlServerStore {
    fn backend(&self) -> &'static str {
        "sqlserver"
    }

    async fn ping(&self) -> StoreResult<()> {
        self.rows_of("ping", pool::Repeat::Always, &queries::PING, &[])
            .await?;
        Ok(())
    }

    async fn bulk_preview(
        &self,
        source: Pillar,
        filter: &JobFilter,
        sample: u32,
    ) -> StoreResult<BulkPreview> {
        reads::bulk_preview(self, source, filter, sample).await
    }

    async fn list_queues(&self) -> StoreResult<Vec<QueueConfig>> {
        maintenance::list_queues(self).await
    }

    async fn get_batch(&self, id: BatchId) -> StoreResult<Option<Batch>> {
        batches::get(self, id).await
    }

    async fn list_batches(&self, before: Option<BatchId>, limit: u32) -> StoreResult<Vec<Batch>> {
        batches::list(self, before, limit).await
    }

    async fn batch_members(&self, id: BatchId, limit: u32) -> StoreResult<Vec<JobSummary>> {
        batches::members(self, id, limit).await
    }

    async fn list_schedules(&self) -> StoreResult<Vec<Schedule>> {
        schedules::list(self).await
    }

    async fn schedule_runs(&self, name: &str, limit: u32) -> StoreResult<Vec<ScheduleRun>> {
        schedules::runs(self, name, limit).await
    }

    async fn load_settings(&self) -> StoreResult<EngineSettings> {
        maintenance::load_settings(self).await
    }

    async fn list_instances(&self, max_age: Duration) -> StoreResult<Vec<InstanceInfo>> {
        maintenance::list_instances(self, max_age).await
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        before_id: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<AuditEntry>> {
        maintenance::list_audit(self, filter, before_id, limit).await
    }

    async fn get_job(&self, id: JobId) -> StoreResult<Option<Job>> {
        reads::get_job(self, id).await
    }

    async fn finished_jobs(&self, ids: &[JobId]) -> StoreResult<Vec<Job>> {
        reads::finished_jobs(self, ids).await
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Page<JobSummary>> {
        reads::list_jobs(self, query).await
    }

    async fn count_jobs(&self, source: Pillar, filter: &JobFilter) -> StoreResult<JobCount> {
        reads::count_jobs(self, source, filter).await
    }

    async fn search_window(
        &self,
        source: Pillar,
        before: Option<Timestamp>,
    ) -> StoreResult<Option<Timestamp>> {
        reads::search_window(self, source, before).await
    }

    async fn summary(&self) -> StoreResult<Summary> {
        telemetry::summary(self).await
    }

    async fn queue_stats(&self) -> StoreResult<Vec<QueueStats>> {
        telemetry::queue_stats(self).await
    }

    async fn throughput(
        &self,
        minutes: u32,
        queue: Option<&str>,
    ) -> StoreResult<Vec<ThroughputBucket>> {
        telemetry::throughput(self, minutes, queue).await
    }

    async fn run_times(&self, minutes: u32) -> StoreResult<Vec<RunTimeHistogram>> {
        telemetry::run_times(self, minutes).await
    }

    async fn pending_groups(&self, limit: u32) -> StoreResult<Vec<PendingGroup>> {
        telemetry::pending_groups(self, limit).await
    }

    async fn top_errors(&self, limit: u32) -> StoreResult<Vec<ErrorGroup>> {
        telemetry::top_errors(self, limit).await
    }
}

#[async_trait]
impl Store for SqlServerStore {
    async fn enqueue(&self, req: EnqueueRequest) -> StoreResult<EnqueueOutcome> {
        producers::enqueue(self, req).await
    }

    async fn enqueue_batch(&self, reqs: Vec<EnqueueRequest>) -> StoreResult<Vec<EnqueueOutcome>> {
        producers::enqueue_batch(self, reqs).await
    }

    async fn claim_batch(&self, req: ClaimRequest) -> StoreResult<Vec<Job>> {
        workers::claim(self, req).await
    }

    async fn mark_processing(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<Vec<JobId>> {
        workers::mark_processing(self, worker_id, ids).await
    }

    async fn heartbeat(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<HeartbeatReport> {
        workers::heartbeat(self, worker_id, ids).await
    }

    async fn release(
        &self,
        worker_id: &str,
        ids: &[JobId],
        run_at: Option<Timestamp>,
    ) -> StoreResult<u64> {
        workers::release(self, worker_id, ids, run_at).await
    }

    async fn complete(
        &self,
        worker_id: &str,
        completions: Vec<Completion>,
    ) -> StoreResult<Vec<Applied>> {
        workers::complete(self, worker_id, completions).await
    }

    async fn cancel(&self, id: JobId) -> StoreResult<CancelOutcome> {
        operators::cancel(self, id).await
    }

    async fn resurrect(&self, id: JobId, edit: Option<JobEdit>) -> StoreResult<Applied> {
        operators::resurrect(self, id, edit).await
    }

    async fn edit_job(&self, id: JobId, edit: JobEdit) -> StoreResult<Job> {
        operators::edit_job(self, id, edit).await
    }

    async fn purge(&self, source: Pillar, ids: &[JobId]) -> StoreResult<u64> {
        operators::purge(self, source, ids).await
    }

    async fn bulk_by_ids(
        &self,
        action: BulkAction,
        source: Pillar,
        ids: &[JobId],
    ) -> StoreResult<u64> {
        operators::bulk_by_ids(self, action, source, ids).await
    }

    async fn bulk_filter_step(&self, step: BulkFilterStep<'_>) -> StoreResult<BulkStep> {
        operators::bulk_filter_step(self, step).await
    }

    async fn update_queue(&self, name: &str, patch: QueuePatch) -> StoreResult<QueueConfig> {
        maintenance::update_queue(self, name, patch).await
    }

    async fn create_batch(&self, req: BatchRequest) -> StoreResult<BatchCreated> {
        batches::create(self, req).await
    }

    async fn create_schedule(
        &self,
        definition: ScheduleDefinition,
        origin: ScheduleOrigin,
        enabled: bool,
    ) -> StoreResult<Schedule> {
        schedules::create(self, definition, origin, enabled).await
    }

    async fn replace_schedule(
        &self,
        definition: ScheduleDefinition,
        origin: ScheduleOrigin,
    ) -> StoreResult<Schedule> {
        schedules::replace(self, definition, origin).await
    }

    async fn set_schedule_enabled(&self, name: &str, enabled: bool) -> StoreResult<Schedule> {
        schedules::set_enabled(self, name, enabled).await
    }

    async fn delete_schedule(&self, name: &str) -> StoreResult<Applied> {
        schedules::delete(self, name).await
    }

    async fn fire_schedule(&self, fire: ScheduleFire) -> StoreResult<Vec<FireOutcome>> {
        schedules::fire(self, fire).await
    }

    async fn save_settings(&self, settings: &EngineSettings) -> StoreResult<()> {
        maintenance::save_settings(self, settings).await
    }

    async fn rescue_step(&self, step: RescueStep<'_>) -> StoreResult<u64> {
        maintenance::rescue_step(self, step).await
    }

    async fn prune_step(&self, step: PruneStep) -> StoreResult<u64> {
        maintenance::prune_step(self, step).await
    }

    async fn heartbeat_instance(&self, info: &InstanceInfo) -> StoreResult<bool> {
        maintenance::heartbeat_instance(self, info).await
    }

    async fn set_instance_quiet(&self, id: &str, quiet: bool) -> StoreResult<Applied> {
        maintenance::set_instance_quiet(self, id, quiet).await
    }

    async fn deregister_instance(&self, id: &str) -> StoreResult<()> {
        maintenance::deregister_instance(self, id).await
    }

    async fn append_audit(&self, entry: NewAuditEntry) -> StoreResult<AuditEntry> {
        maintenance::append_audit(self, entry).await
    }
}

#[cfg(test)]
mod tests;

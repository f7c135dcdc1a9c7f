//! The store conformance suite and the schema bootstrap tests on SQL Server.
//!
//! They run when `DECK_TEST_MSSQL` holds a connection string (ADO-style or `mssql://`) to an
//! existing database the login may create schemas in; otherwise every test prints
//! `skipped: DECK_TEST_MSSQL not set` and passes. Each test works in its own scratch schema
//! (`deck_t_<random>`), left behind for inspection (the README section "SQL Server" shows how
//! to list them).

use std::sync::Arc;

use async_trait::async_trait;
use deck_engine::conformance::{Connector, FaultInjector, FaultTable, StoreFactory};
use deck_engine::store::sqlserver;
use deck_engine::{Store, StoreError, StoreOptions, StoreResult};

/// What a test needs from SQL Server, or without a server configured, a notice and a pass.
macro_rules! or_skip {
    ($needed:expr) => {
        match $needed {
            Some(needed) => needed,
            None => {
                println!("skipped: DECK_TEST_MSSQL not set");
                return;
            }
        }
    };
}

fn connection_string() -> Option<String> {
    std::env::var("DECK_TEST_MSSQL")
        .ok()
        .filter(|s| !s.trim().is_empty())
}

fn scratch_schema() -> String {
    format!("deck_t_{}", uuid::Uuid::now_v7().simple())
}

fn options(schema: &str, auto_create: bool) -> StoreOptions {
    StoreOptions {
        schema: schema.to_string(),
        auto_create_schema: auto_create,
        pool_size: 8,
        ..StoreOptions::default()
    }
}

#[derive(Clone)]
struct Scratch {
    connection: Arc<str>,
    schema: Arc<str>,
}

#[async_trait]
impl Connector for Scratch {
    async fn connect(&self) -> StoreResult<Arc<dyn Store>> {
        sqlserver::open(&self.connection, &options(&self.schema, true)).await
    }
}

/// A trigger that throws inside the store's own transaction, after its earlier statements ran.
#[async_trait]
impl FaultInjector for Scratch {
    async fn fail_inserts(&self, table: FaultTable, job_type: &str) {
        let table_name = match table {
            FaultTable::Hot => "jobs_hot",
            FaultTable::Archive => "jobs_archive",
            FaultTable::Dlq => "jobs_dlq",
        };
        assert!(
            job_type
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "fault job types are plain identifiers"
        );
        let config = sqlserver::connection::parse_connection(&self.connection).unwrap();
        let manager = bb8_tiberius::ConnectionManager::new(config);
        let mut client = bb8::ManageConnection::connect(&manager).await.unwrap();
        // CREATE TRIGGER must be alone in its batch.
        let trigger = format!(
            "CREATE TRIGGER [{schema}].[fail_{table_name}_{job_type}] ON [{schema}].[{table_name}]
             AFTER INSERT AS
             BEGIN
                 SET NOCOUNT ON;
                 IF EXISTS (SELECT 1 FROM inserted WHERE job_type = N'{job_type}')
                     THROW 50000, N'injected fault', 1;
             END",
            schema = self.schema,
        );
        client
            .simple_query(trigger)
            .await
            .unwrap()
            .into_results()
            .await
            .unwrap();
    }
}

async fn mssql_factory() -> Option<StoreFactory> {
    let connection = connection_string()?;
    let scratch = Scratch {
        connection: connection.into(),
        schema: scratch_schema().into(),
    };
    let store = scratch
        .connect()
        .await
        .expect("open a fresh SQL Server store in a scratch schema");
    Some(StoreFactory::new(store, scratch.clone()).with_faults(scratch))
}

deck_engine::store_conformance_tests!(mssql_factory);

#[tokio::test]
async fn bootstrap_is_idempotent_and_safe_under_concurrency() {
    let connection = or_skip!(connection_string());
    let schema = scratch_schema();

    // Four instances start at once against an empty schema: the application lock makes them
    // take turns, and every one of them ends up with a working store.
    let opts = options(&schema, true);
    let opens = (0..4).map(|_| sqlserver::open(&connection, &opts));
    let stores = futures::future::join_all(opens).await;
    for store in &stores {
        let store = store.as_ref().expect("every concurrent instance opens");
        store.ping().await.unwrap();
    }

    // Twice more, one after the other: nothing to do, nothing breaks.
    let report = sqlserver::migrate(&connection, &options(&schema, true))
        .await
        .unwrap();
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.version, sqlserver::migrations::latest_version());
    sqlserver::open(&connection, &options(&schema, true))
        .await
        .unwrap()
        .ping()
        .await
        .unwrap();

    // With auto-create off, an existing, complete schema is accepted as is.
    sqlserver::open(&connection, &options(&schema, false))
        .await
        .unwrap();
}

#[tokio::test]
async fn without_auto_create_a_missing_schema_names_the_fix() {
    let connection = or_skip!(connection_string());
    let schema = scratch_schema();
    let err = match sqlserver::open(&connection, &options(&schema, false)).await {
        Ok(_) => panic!("an empty schema must be refused when auto-create is off"),
        Err(e) => e,
    };
    assert!(matches!(err, StoreError::Schema { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("jobs_hot"), "{text}");
    assert!(text.contains("deck migrate --print"), "{text}");

    // `deck migrate` fixes it.
    let report = sqlserver::migrate(&connection, &options(&schema, false))
        .await
        .unwrap();
    let every: Vec<i32> = (1..=sqlserver::migrations::latest_version()).collect();
    assert_eq!(report.applied, every);
    sqlserver::open(&connection, &options(&schema, false))
        .await
        .unwrap();
}

#[tokio::test]
async fn unreachable_servers_are_reported_with_help() {
    // No server needed: nothing listens on port 1 of the loopback interface.
    let err = match sqlserver::open(
        "Server=tcp:127.0.0.1,1;Database=deck;User Id=sa;Password=hunter2;TrustServerCertificate=true",
        &options("deck", true),
    )
    .await
    {
        Ok(_) => panic!("nothing listens on port 1"),
        Err(e) => e,
    };
    let text = err.to_string();
    assert!(matches!(err, StoreError::Unavailable { .. }), "{text}");
    assert!(text.contains("help:"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

#[test]
fn the_printed_script_is_for_the_configured_schema() {
    let script = sqlserver::migration_script("jobs").unwrap();
    assert!(script.contains("CREATE TABLE [jobs].[jobs_hot]"));
    assert!(script.contains("DATA_COMPRESSION = PAGE"));
    let err = sqlserver::migration_script("jobs; DROP TABLE x").unwrap_err();
    assert!(err.to_string().contains("schema"), "{err}");
}

// ------------------------------------------------------------------ SQL Server only: issue 12

use deck_engine::conformance::support::{
    all_succeeded, assert_counters_match_rows, claim, claim_request, enqueue, max_workers,
    report_schedule, req, secs, succeeded, summary,
};
use deck_engine::{EnqueueRequest, Pillar};

type Client = bb8_tiberius::rt::Client;

/// A fresh store in its own scratch schema, and the connection string.
async fn scratch_store() -> Option<(Arc<dyn Store>, String, String)> {
    let connection = connection_string()?;
    let schema = scratch_schema();
    let store = sqlserver::open(&connection, &options(&schema, true))
        .await
        .expect("open a fresh SQL Server store in a scratch schema");
    Some((store, connection, schema))
}

/// A plain connection of the application's own, with the SET options an ADO.NET or
/// tiberius application has by default.
async fn app_connection(connection: &str) -> Client {
    let config = sqlserver::connection::parse_connection(connection).unwrap();
    let manager = bb8_tiberius::ConnectionManager::new(config);
    bb8::ManageConnection::connect(&manager).await.unwrap()
}

async fn first_row(client: &mut Client, sql: &str) -> Option<tiberius::Row> {
    let stream = client.simple_query(sql).await.unwrap();
    stream.into_row().await.unwrap()
}

async fn has_queue_row(store: &dyn Store, queue: &str) -> bool {
    let queues = store.list_queues().await.unwrap();
    queues.iter().any(|q| q.name == queue)
}

/// A scratch store, and an application connection with a transaction open on it: the
/// setting of the enqueue-in-the-caller's-transaction tests.
async fn scratch_store_and_app_transaction() -> Option<(Arc<dyn Store>, Client, String)> {
    let (store, connection, schema) = scratch_store().await?;
    let mut app = app_connection(&connection).await;
    batch(&mut app, "BEGIN TRANSACTION").await;
    Some((store, app, schema))
}

async fn batch(client: &mut Client, sql: &str) {
    client
        .simple_query(sql)
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
}

/// Part 3: an enqueue inside the application's transaction is undone by its rollback —
/// the job, the queue's settings row and the counters.
#[tokio::test]
async fn enqueue_in_then_rollback_leaves_nothing() {
    let (store, mut app, schema) = or_skip!(scratch_store_and_app_transaction().await);
    let outcome = sqlserver::enqueue_in(&mut app, &schema, req("tx-rollback", "t"))
        .await
        .unwrap();
    assert!(outcome.created);
    // Not visible to workers before the commit (claims skip locked rows, never wait).
    assert!(claim(&*store, "w1", 10).await.is_empty());
    batch(&mut app, "ROLLBACK TRANSACTION").await;

    assert_eq!(store.get_job(outcome.id).await.unwrap(), None);
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.scheduled), (0, 0));
    assert!(!has_queue_row(&*store, "tx-rollback").await);
    assert_counters_match_rows(&*store).await;
}

/// Part 3: committed, the job is claimed and run like any other, with a UUID v7 id made in
/// T-SQL and every option kept.
#[tokio::test]
async fn enqueue_in_then_commit_runs_the_job() {
    let (store, mut app, schema) = or_skip!(scratch_store_and_app_transaction().await);
    let r = EnqueueRequest {
        tags: vec!["order".into(), "eu".into()],
        priority: 3,
        correlation_id: Some("order-42".into()),
        created_by: Some("shop".into()),
        max_attempts: Some(2),
        expires_at: Some(chrono::Utc::now() + secs(3600)),
        ..req("tx-commit", "send_receipt")
    };
    let first = sqlserver::enqueue_in(&mut app, &schema, r.clone())
        .await
        .unwrap();
    let more = sqlserver::enqueue_batch_in(&mut app, &schema, vec![req("tx-commit", "b"); 3])
        .await
        .unwrap();
    batch(&mut app, "COMMIT TRANSACTION").await;
    assert_eq!(first.id.0.get_version_num(), 7, "UUID v7 from T-SQL");
    assert_eq!(more.len(), 3);

    let job = store.get_job(first.id).await.unwrap().expect("committed");
    assert_eq!(job.tags, r.tags);
    assert_eq!(job.priority, 3);
    assert_eq!(job.correlation_id.as_deref(), Some("order-42"));
    assert_eq!(job.max_attempts, Some(2));
    assert!(job.expires_at.is_some());

    let claimed = claim(&*store, "w1", 10).await;
    assert_eq!(claimed.len(), 4);
    assert_eq!(claimed[0], first.id, "the higher priority first");
    store.mark_processing("w1", &claimed).await.unwrap();
    let applied = store.complete("w1", all_succeeded(&claimed)).await.unwrap();
    assert!(applied.iter().all(|a| a.is_applied()));
    assert_eq!(
        store.get_job(first.id).await.unwrap().map(|j| j.state),
        Some(deck_engine::JobState::Succeeded)
    );
    assert_counters_match_rows(&*store).await;
}

/// Part 3: the procedure checks what the API checks, with the API's messages, and a
/// rejected call leaves the caller's transaction open and usable.
#[tokio::test]
async fn the_procedure_rejects_what_the_api_rejects() {
    let (store, mut app, schema) = or_skip!(scratch_store_and_app_transaction().await);
    let cases = [
        (
            "@queue = N'', @job_type = N't'",
            "invalid queue: is empty (give a queue of 1 to 255 characters)",
        ),
        (
            "@queue = N'q', @job_type = N' t'",
            "invalid job_type: has leading or trailing whitespace",
        ),
        (
            "@queue = N'q', @job_type = N't', @payload = N'{oops'",
            "invalid payload: is not valid JSON",
        ),
        (
            "@queue = N'q', @job_type = N't', @tags = N'[\"a,b\"]'",
            "invalid tags[0]: contains a comma or control character",
        ),
        (
            "@queue = N'q', @job_type = N't', @delay_ms = 5, @scheduled_at = '2030-01-01'",
            "invalid delay_ms: was given together with scheduled_at",
        ),
        (
            "@queue = N'q', @job_type = N't', @max_attempts = 0",
            "invalid max_attempts: is 0",
        ),
        (
            "@queue = N'q', @job_type = N't', @continuation_queue = N'c', @continuation_job_type = N'x', @continuation_trigger = N'sometimes'",
            "invalid continuation.trigger",
        ),
    ];
    for (args, message) in cases {
        let sql = format!("EXEC [{schema}].[enqueue] {args};");
        let err = match app.simple_query(sql.as_str()).await {
            Ok(stream) => stream.into_results().await.err(),
            Err(e) => Some(e),
        }
        .unwrap_or_else(|| panic!("{args} was accepted"));
        let text = err.to_string();
        assert!(text.contains(message), "{args}: {text}");
        assert!(
            matches!(&err, tiberius::error::Error::Server(t) if t.code() == 51000),
            "{text}"
        );
    }
    // Still the caller's transaction, still committable.
    let state = first_row(
        &mut app,
        "SELECT XACT_STATE() AS state, @@TRANCOUNT AS depth",
    )
    .await
    .unwrap();
    assert_eq!(state.get::<i16, _>("state"), Some(1));
    assert_eq!(state.get::<i32, _>("depth"), Some(1));
    batch(&mut app, "ROLLBACK TRANSACTION").await;
    assert_eq!(summary(&*store).await.pending, 0);

    // And a batch names the job it rejects.
    let err = sqlserver::enqueue_batch_in(
        &mut app,
        &schema,
        vec![
            req("q", "t"),
            req("q", "t"),
            EnqueueRequest::new("q", "", ""),
        ],
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("jobs[2].job_type"), "{err}");
}

/// Part 2, item 1: striped counters stay exact when many sessions finish jobs of one queue
/// at once.
#[tokio::test]
async fn striped_counters_stay_exact_under_concurrent_completers() {
    let (store, connection, schema) = or_skip!(scratch_store().await);
    let opts = options(&schema, false);
    let ids: Vec<_> = store
        .enqueue_batch(vec![req("hot-queue", "t"); 400])
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.id)
        .collect();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let handle = sqlserver::open(&connection, &opts).await.unwrap();
        tasks.push(tokio::spawn(async move {
            let worker = format!("w{w}");
            loop {
                let jobs = claim(&*handle, &worker, 7).await;
                if jobs.is_empty() {
                    break;
                }
                handle.mark_processing(&worker, &jobs).await.unwrap();
                let (done, failed) = jobs.split_at(jobs.len() / 2);
                let mut completions = all_succeeded(done);
                completions.extend(failed.iter().map(|id| {
                    deck_engine::conformance::support::dead(
                        *id,
                        deck_engine::FailureReason::Fatal,
                        "boom",
                    )
                }));
                handle.complete(&worker, completions).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let s = summary(&*store).await;
    assert_eq!(s.succeeded + s.dlq, ids.len() as u64);
    assert_eq!((s.pending, s.fetched, s.processing), (0, 0, 0));
    assert_counters_match_rows(&*store).await;
}

/// Part 2, item 4: future jobs of a higher priority cost the claim one boundary row, and
/// never hide due work of a lower one; bands are taken in priority order.
#[tokio::test]
async fn a_claim_takes_due_work_past_future_high_priority_jobs() {
    let (store, _, _) = or_skip!(scratch_store().await);
    let later = chrono::Utc::now() + secs(3600);
    let future: Vec<EnqueueRequest> = (0..2_000)
        .map(|_| EnqueueRequest {
            priority: 10,
            scheduled_at: Some(later),
            ..req("bands", "future")
        })
        .collect();
    store.enqueue_batch(future).await.unwrap();
    let low = enqueue(&*store, req("bands", "low")).await;
    let mid = enqueue(
        &*store,
        EnqueueRequest {
            priority: 5,
            ..req("bands", "mid")
        },
    )
    .await;
    assert_eq!(claim(&*store, "w1", 10).await, vec![mid, low]);
    assert!(claim(&*store, "w1", 10).await.is_empty());
    assert_counters_match_rows(&*store).await;
}

/// Part 2: the schema carries the load design (checked by the startup verification too).
#[tokio::test]
async fn the_catalog_has_the_load_design() {
    let (_store, connection, schema) = or_skip!(scratch_store().await);
    let mut app = app_connection(&connection).await;
    let sql = format!(
        "SELECT t.lock_escalation_desc AS escalation,
                (SELECT COUNT(*) FROM sys.indexes AS i WHERE i.object_id = t.object_id
                 AND i.name IN (N'IX_jobs_hot_status_created', N'IX_jobs_hot_scheduled')) AS console_indexes,
                (SELECT COUNT(*) FROM sys.index_columns AS ic
                 JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
                 JOIN sys.indexes AS i ON i.object_id = ic.object_id AND i.index_id = ic.index_id
                 WHERE ic.object_id = t.object_id AND c.name = N'heartbeat_at') AS heartbeat_keys,
                OBJECT_ID(N'[{schema}].[enqueue]', N'P') AS enqueue_proc
         FROM sys.tables AS t
         WHERE t.schema_id = SCHEMA_ID(N'{schema}') AND t.name = N'jobs_hot'"
    );
    let row = first_row(&mut app, &sql).await.unwrap();
    // Babelfish reports TABLE whatever the DDL said (README, SQL Server: a tolerated
    // catalog difference; PostgreSQL does not escalate row locks).
    let babelfish = first_row(
        &mut app,
        "SELECT CAST(SERVERPROPERTY('BabelfishVersion') AS NVARCHAR(128)) AS v",
    )
    .await
    .and_then(|r| r.get::<&str, _>("v").map(str::to_string));
    if babelfish.is_none() {
        assert_eq!(row.get::<&str, _>("escalation"), Some("DISABLE"));
    }
    assert_eq!(row.get::<i32, _>("console_indexes"), Some(0));
    assert_eq!(row.get::<i32, _>("heartbeat_keys"), Some(0));
    assert!(row.get::<i32, _>("enqueue_proc").is_some());
}

/// Migration 0002 on a database that version 1 created and used: the counters it seeds
/// match the rows, and the store works on the result.
#[tokio::test]
async fn upgrading_from_version_1_seeds_exact_counters() {
    let connection = or_skip!(connection_string());
    let schema = scratch_schema();
    let mut app = app_connection(&connection).await;
    batch(
        &mut app,
        &sqlserver::migration_script_through(&schema, 1).unwrap(),
    )
    .await;
    // What version 1 left behind: two pending jobs, a fetched one, an archived one.
    let rows = format!(
        "INSERT INTO [{schema}].[queues] (name, paused, hidden, created_at)
             VALUES (N'old', 0, 0, SYSUTCDATETIME());
         INSERT INTO [{schema}].[jobs_hot]
             (id, queue, job_type, payload, tags, priority, created_at, scheduled_at, attempt,
              status, cancel_requested, worker_id, fetched_at, continuation)
         VALUES
             (0x01890000000070008000000000000001, N'old', N't', N'null', N'', 0, SYSUTCDATETIME(),
              SYSUTCDATETIME(), 0, 0, 0, NULL, NULL,
              N'{{\"queue\":\"followups\",\"job_type\":\"f\",\"trigger\":\"always\"}}'),
             (0x01890000000070008000000000000002, N'old', N't', N'null', N'', 0, SYSUTCDATETIME(),
              SYSUTCDATETIME(), 0, 0, 0, NULL, NULL, NULL),
             (0x01890000000070008000000000000003, N'old', N't', N'null', N'', 0, SYSUTCDATETIME(),
              SYSUTCDATETIME(), 0, 1, 0, N'gone', SYSUTCDATETIME(), NULL);
         INSERT INTO [{schema}].[jobs_archive]
             (id, queue, job_type, payload, tags, priority, created_at, scheduled_at,
              finished_at, attempt)
         VALUES (0x01890000000070008000000000000004, N'old', N't', N'null', N'', 0,
                 SYSUTCDATETIME(), SYSUTCDATETIME(), SYSUTCDATETIME(), 1);
         INSERT INTO [{schema}].[queue_counters] (queue, archive_rows, dlq_rows)
             VALUES (N'old', 1, 0);"
    );
    batch(&mut app, &rows).await;

    let report = sqlserver::migrate(&connection, &options(&schema, false))
        .await
        .unwrap();
    let upgrades: Vec<i32> = (2..=sqlserver::migrations::latest_version()).collect();
    assert_eq!(report.applied, upgrades);
    let store = sqlserver::open(&connection, &options(&schema, false))
        .await
        .unwrap();
    let q = store
        .queue_stats()
        .await
        .unwrap()
        .into_iter()
        .find(|q| q.queue == "old")
        .unwrap();
    assert_eq!(
        (
            q.pending + q.scheduled,
            q.fetched,
            q.processing,
            q.succeeded
        ),
        (2, 1, 0, 1)
    );
    // The continuation's queue got its settings row before any completion needs it.
    assert!(has_queue_row(&*store, "followups").await);
    assert_counters_match_rows(&*store).await;
    assert_eq!(claim(&*store, "w1", 10).await.len(), 2);
    assert!(
        store
            .list_jobs(&deck_engine::JobQuery::new(Pillar::Archive))
            .await
            .unwrap()
            .items
            .len()
            == 1
    );
}

// ------------------------------------------------------- SQL Server only: issue 37, timeouts

/// The scratch schema again, with a command timeout short enough to force.
async fn impatient_store(connection: &str, schema: &str) -> Arc<dyn Store> {
    let options = StoreOptions {
        command_timeout: std::time::Duration::from_secs(10),
        ..options(schema, false)
    };
    sqlserver::open(connection, &options)
        .await
        .expect("open the scratch schema with a short command timeout")
}

/// `0x…`: a job id as a T-SQL binary literal, for the lock-holding batches below.
fn id_literal(id: deck_engine::JobId) -> String {
    format!("0x{}", id.0.simple())
}

/// Hold the row lock `lock` takes in an open transaction of a plain client, so the statement
/// under test waits on it past its timeout; `release` rolls back. `settle` then takes the same
/// lock: it is granted once the abandoned attempt on the server finished (committed, or rolled
/// back when the server noticed its client was gone).
struct RowLock {
    client: Client,
    lock: String,
}

impl RowLock {
    async fn hold(connection: &str, lock: String) -> Self {
        let mut client = app_connection(connection).await;
        batch(&mut client, &format!("BEGIN TRANSACTION; {lock}")).await;
        RowLock { client, lock }
    }

    async fn release_and_settle(mut self) {
        batch(&mut self.client, "ROLLBACK TRANSACTION").await;
        batch(
            &mut self.client,
            &format!("BEGIN TRANSACTION; {}; ROLLBACK TRANSACTION", self.lock),
        )
        .await;
    }
}

/// Item 5: a claim that timed out is not re-sent while it may still be running; whatever its
/// abandoned attempt took comes back with the fetch lease, and every job is claimed once.
#[tokio::test]
async fn a_timed_out_claim_is_not_resent_and_its_jobs_come_back() {
    let (store, connection, schema) = or_skip!(scratch_store().await);
    let ids: Vec<_> = {
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.push(enqueue(&*store, req("slow-claim", "t")).await);
        }
        ids
    };
    // A bulkheaded queue: the claim takes its settings row with UPDLOCK, and waits for it.
    store
        .update_queue("slow-claim", max_workers(10))
        .await
        .unwrap();
    // The job rows too: Babelfish ignores UPDLOCK, and there the claim waits at its UPDATE of
    // them instead.
    let lock = RowLock::hold(
        &connection,
        format!(
            "UPDATE [{schema}].[queues] SET max_workers = max_workers WHERE name = N'slow-claim'; \
             UPDATE [{schema}].[jobs_hot] SET priority = priority WHERE queue = N'slow-claim'"
        ),
    )
    .await;
    let impatient = impatient_store(&connection, &schema).await;
    let err = impatient
        .claim_batch(claim_request("w-impatient", 3, None))
        .await
        .expect_err("the claim waits on the lock past its timeout");
    assert!(err.to_string().contains("timed out"), "{err}");
    lock.release_and_settle().await;

    // Whether the abandoned claim committed or not, nobody runs a job it took: they are
    // fetched under a worker that never heard of them, until the lease hands them back.
    let policy = deck_engine::conformance::support::zero_timeouts();
    store
        .rescue_step(deck_engine::RescueStep {
            kind: deck_engine::RescueKind::StaleClaims,
            policy: &policy,
            limit: 100,
        })
        .await
        .unwrap();
    let mut claimed = claim(&*store, "w-patient", 10).await;
    claimed.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(claimed, want, "every job is claimed once, none lost");
    assert!(claim(&*store, "w-other", 10).await.is_empty());
    assert_counters_match_rows(&*store).await;
}

/// Item 5: a completion that timed out may still commit; sent again (as the completer does)
/// it applies at most once, and the job ends finished exactly once.
#[tokio::test]
async fn a_timed_out_completion_applies_once_when_resent() {
    let (store, connection, schema) = or_skip!(scratch_store().await);
    let id = enqueue(&*store, req("slow-complete", "t")).await;
    assert_eq!(claim(&*store, "w1", 1).await, [id]);
    assert_eq!(store.mark_processing("w1", &[id]).await.unwrap(), [id]);
    let lock = RowLock::hold(
        &connection,
        format!(
            "UPDATE [{schema}].[jobs_hot] SET priority = priority WHERE id = {}",
            id_literal(id)
        ),
    )
    .await;
    let impatient = impatient_store(&connection, &schema).await;
    let err = impatient
        .complete("w1", vec![succeeded(id, Some(r#"{"sent":true}"#))])
        .await
        .expect_err("the completion waits on the row past its timeout");
    assert!(err.to_string().contains("timed out"), "{err}");
    lock.release_and_settle().await;

    let again = store
        .complete("w1", vec![succeeded(id, Some(r#"{"sent":true}"#))])
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    let job = store.get_job(id).await.unwrap().expect("the job is kept");
    assert_eq!(job.state, deck_engine::JobState::Succeeded);
    let s = summary(&*store).await;
    assert_eq!((s.processing, s.succeeded), (0, 1), "{s:?}");
    assert_counters_match_rows(&*store).await;
}

/// Item 5: a schedule fire that timed out may still commit; fired again, the occurrence
/// enqueues one job.
#[tokio::test]
async fn a_timed_out_schedule_fire_enqueues_the_occurrence_once() {
    let (store, connection, schema) = or_skip!(scratch_store().await);
    let def = report_schedule("slow-fire");
    store
        .create_schedule(def.clone(), deck_engine::ScheduleOrigin::Operator, true)
        .await
        .unwrap();
    let at =
        chrono::DateTime::from_timestamp(chrono::Utc::now().timestamp() / 60 * 60 - 60, 0).unwrap();
    let fire = deck_engine::schedule::ScheduleFire {
        schedule: def.name.clone(),
        occurrences: vec![deck_engine::schedule::Occurrence {
            scheduled_at: at,
            job: deck_engine::schedule::job_for(&def, at, at),
            job_id: deck_engine::JobId::new(),
        }],
        handled_through: Some(at),
        skip_while_active: false,
        manual: false,
    };
    let lock = RowLock::hold(
        &connection,
        format!("UPDATE [{schema}].[schedules] SET enabled = enabled WHERE name = N'slow-fire'"),
    )
    .await;
    let impatient = impatient_store(&connection, &schema).await;
    let err = impatient
        .fire_schedule(fire.clone())
        .await
        .expect_err("the fire waits on the schedule row past its timeout");
    assert!(err.to_string().contains("timed out"), "{err}");
    lock.release_and_settle().await;

    let outcomes = store.fire_schedule(fire.clone()).await.unwrap();
    assert!(
        matches!(
            outcomes[..],
            [deck_engine::FireOutcome::Enqueued(_) | deck_engine::FireOutcome::AlreadyHandled]
        ),
        "{outcomes:?}"
    );
    let runs = store.schedule_runs("slow-fire", 10).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let s = summary(&*store).await;
    assert_eq!(s.pending, 1, "one job for the occurrence: {s:?}");
    assert_counters_match_rows(&*store).await;
}

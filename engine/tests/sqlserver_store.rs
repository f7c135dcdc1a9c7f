//! The store conformance suite and the schema bootstrap tests on SQL Server.
//!
//! They run when `DECK_TEST_MSSQL` holds a connection string (ADO-style or `mssql://`) to an
//! existing database the login may create schemas in; otherwise every test prints
//! `skipped: DECK_TEST_MSSQL not set` and passes. Each test works in its own scratch schema
//! (`deck_t_<random>`), left behind for inspection (the README section "SQL Server" shows how
//! to list them).

use std::sync::Arc;

use async_trait::async_trait;
use deck_engine::store::conformance::{Connector, FaultInjector, FaultTable, StoreFactory};
use deck_engine::store::sqlserver;
use deck_engine::{Store, StoreError, StoreOptions, StoreResult};

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
    let Some(connection) = connection_string() else {
        println!("skipped: DECK_TEST_MSSQL not set");
        return;
    };
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
    assert_eq!(report.version, 2);
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
    let Some(connection) = connection_string() else {
        println!("skipped: DECK_TEST_MSSQL not set");
        return;
    };
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
    assert_eq!(report.applied, vec![1, 2]);
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

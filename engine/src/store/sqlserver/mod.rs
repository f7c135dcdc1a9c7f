//! The SQL Server store (SQL Server 2017+ and Azure SQL) on tiberius (rustls) and a bb8 pool.
//!
//! - `connection`: ADO strings, `mssql://` URLs and the schema name.
//! - `migrations`: the versioned schema, its bootstrap under `sp_getapplock`, its verification.
//! - `queries`: every fixed SQL statement with its consistency class and what its caller
//!   reads; `job_lists`: the console's dynamic list statements.
//! - `reader`: reads an answer against that declaration (never a result set by position).
//! - `pool`: connections, transient faults and retries; `rows`: row and parameter mapping.
//! - `store`: `trait Store`; `enqueue`: enqueue inside a caller's own transaction.
//! - `statement_rules` (tests): the server-free rules every T-SQL text is held to, read with
//!   the small T-SQL lexer in `tsql`.

use std::sync::Arc;
use std::time::Duration;

pub mod connection;
pub mod enqueue;
pub mod job_lists;
pub mod migrations;
pub mod pool;
pub mod queries;
pub mod reader;
pub mod routines;
pub mod rows;
#[cfg(test)]
mod statement_rules;
pub mod store;
#[cfg(test)]
mod tsql;
mod wire;

use connection::{SchemaName, parse_connection, redacted};
use migrations::CatalogState;
use pool::{Fault, Manager, PooledConn, Repeat};

use crate::error::{StoreError, StoreResult};
use crate::store::{Store, StoreOptions};

pub use enqueue::{enqueue_batch_in, enqueue_in};
pub use store::SqlServerStore;

/// How long the migration script may take: it waits up to 120 s for the application lock,
/// and on a large database an index it creates may take minutes. It is never re-sent after a
/// timeout (the first run may still be applying it); a second `deck migrate` skips what is done.
const MIGRATION_TIMEOUT: Duration = Duration::from_secs(30 * 60);
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
    let last_connect_error = pool::LastConnectError::default();
    // build_unchecked: the pool starts empty, so constructing it never needs the server.
    let pool = bb8::Pool::builder()
        .max_size(options.pool_size)
        .connection_timeout(CONNECT_TIMEOUT)
        .error_sink(Box::new(last_connect_error.clone()))
        .build_unchecked(Manager::new(config));
    Ok(SqlServerStore::new(
        pool,
        last_connect_error,
        schema,
        options.command_timeout,
    ))
}

fn unreachable(connection: &str, err: StoreError) -> StoreError {
    match err {
        StoreError::Database {
            message, transient, ..
        } if transient || message.contains("no database connection") => StoreError::Unavailable {
            url: redacted(connection),
            cause: message,
            help: CONNECT_HELP.into(),
        },
        StoreError::Database { message, .. } => StoreError::Unavailable {
            url: redacted(connection),
            cause: message,
            help: "check the login's permissions on the database (see the README section \
                   \"SQL Server\")"
                .into(),
        },
        other => other,
    }
}

/// What the database has applied: migration versions, and routine name → checksum.
#[derive(Debug, Default)]
struct Applied {
    versions: Vec<i32>,
    routines: std::collections::BTreeMap<String, String>,
}

impl Applied {
    /// Every migration applied and every routine applied from this version's text.
    fn current(&self) -> bool {
        migrations::MIGRATIONS
            .iter()
            .all(|m| self.versions.contains(&m.version))
            && routines::stale(&self.routines).is_empty()
    }
}

async fn read_applied(store: &SqlServerStore, connection: &str) -> StoreResult<Applied> {
    let versions_sql = store.sql(queries::SCHEMA_VERSIONS.sql);
    let routines_sql = store.sql(queries::ROUTINE_VERSIONS.sql);
    let (versions_sql, routines_sql) = (&versions_sql, &routines_sql);
    store
        .run(
            "read schema version",
            Repeat::Always,
            move |mut conn: PooledConn| async move {
                let result: Result<Applied, Fault> = async {
                    let client = &mut conn.client;
                    let versions =
                        catalog_rows(client, &queries::SCHEMA_VERSIONS, versions_sql, "").await?;
                    let routines =
                        catalog_rows(client, &queries::ROUTINE_VERSIONS, routines_sql, "").await?;
                    let mut applied = Applied::default();
                    for row in &versions {
                        applied
                            .versions
                            .push(i32::try_from(rows::req_int(row, "version")?).unwrap_or(0));
                    }
                    for row in &routines {
                        applied
                            .routines
                            .insert(rows::req_str(row, "name")?, rows::req_str(row, "checksum")?);
                    }
                    Ok(applied)
                }
                .await;
                (conn, result)
            },
        )
        .await
        .map_err(|e| unreachable(connection, e))
}

/// Run the whole migration script (one batch, one transaction, under the application lock).
/// Safe to repeat: every migration is guarded by its recorded version. It sends no rows.
async fn apply_script(store: &SqlServerStore) -> StoreResult<()> {
    let script = migrations::script(store.schema());
    let script = &script;
    store
        .run_with_timeout(
            "apply schema migrations",
            Repeat::IfNotApplied,
            MIGRATION_TIMEOUT,
            move |mut conn: PooledConn| async move {
                let result: Result<(), Fault> = async {
                    let stream = conn.client.simple_query(script.as_str()).await?;
                    reader::read_declared("migration script", queries::Reads::Nothing, stream)
                        .await?;
                    Ok(())
                }
                .await;
                (conn, result)
            },
        )
        .await
        .map_err(|e| match e {
            StoreError::Database { message, .. } => StoreError::Schema {
                problem: format!("applying the schema failed: {message}"),
                help: format!(
                    "the login needs CREATE SCHEMA (or an existing schema [{}] it owns), \
                     CREATE TABLE, CREATE PROCEDURE, CREATE FUNCTION and ALTER on the schema; \
                     or {}",
                    store.schema(),
                    migrations::FIX_HELP
                ),
            },
            other => other,
        })
}

/// One catalog statement's rows (`queries::CATALOG_*`, each one kind of fact).
async fn catalog_rows(
    client: &mut pool::Client,
    statement: &queries::Statement,
    sql: &str,
    schema: &str,
) -> Result<Vec<tiberius::Row>, Fault> {
    let stream = if sql.contains("@P1") {
        wire::query(client, sql, &[&schema]).await?
    } else {
        wire::query(client, sql, &[]).await?
    };
    reader::read_declared(statement.name, statement.reads, stream).await
}

/// Compare the catalog with the schema this version needs; fail with every difference, and
/// say what a Babelfish catalog was forgiven.
async fn verify(store: &SqlServerStore) -> StoreResult<Option<migrations::Tolerated>> {
    let statements = [
        queries::CATALOG_COLUMNS,
        queries::CATALOG_INDEXES,
        queries::CATALOG_TABLES,
        queries::CATALOG_ROUTINES,
        queries::CATALOG_DATABASE,
        queries::SCHEMA_VERSIONS,
        queries::ROUTINE_VERSIONS,
    ];
    let rendered: Vec<String> = statements.iter().map(|s| store.sql(s.sql)).collect();
    let schema = store.schema().to_string();
    let (statements, rendered, schema) = (&statements, &rendered, &schema);
    let state = store
        .run(
            "verify schema",
            Repeat::Always,
            move |mut conn: PooledConn| async move {
                let result: Result<CatalogState, Fault> = async {
                    let client = &mut conn.client;
                    let mut answers = Vec::with_capacity(statements.len());
                    for (statement, sql) in statements.iter().zip(rendered) {
                        answers.push(catalog_rows(client, statement, sql, schema).await?);
                    }
                    let [
                        columns,
                        indexes,
                        tables,
                        routines,
                        database,
                        versions,
                        texts,
                    ] = <[Vec<tiberius::Row>; 7]>::try_from(answers)
                        .map_err(|_| rows::corrupt("the catalog answers are incomplete"))?;
                    let mut state = CatalogState::default();
                    for row in &columns {
                        let length = rows::req_int(row, "max_length")?;
                        let type_name = rows::req_str(row, "type_name")?;
                        let column = migrations::ColumnShape {
                            length: match type_name.as_str() {
                                "nvarchar" | "binary" | "varbinary" => i32::try_from(length).ok(),
                                _ => None,
                            },
                            scale: match type_name.as_str() {
                                "datetime2" => i32::try_from(rows::req_int(row, "scale")?).ok(),
                                _ => None,
                            },
                            nullable: rows::req_bool(row, "is_nullable")?,
                            type_name,
                        };
                        state
                            .shape
                            .tables
                            .entry(rows::req_str(row, "table_name")?)
                            .or_default()
                            .insert(rows::req_str(row, "column_name")?, column);
                    }
                    for row in &indexes {
                        state.shape.indexes.insert((
                            rows::req_str(row, "table_name")?,
                            rows::req_str(row, "index_name")?,
                        ));
                    }
                    for row in &tables {
                        let table = rows::req_str(row, "table_name")?;
                        state
                            .compression
                            .insert(table.clone(), rows::req_str(row, "compression")?);
                        state
                            .shape
                            .lock_escalation
                            .insert(table, rows::req_str(row, "lock_escalation")?);
                    }
                    for row in &routines {
                        state
                            .shape
                            .routines
                            .insert(rows::req_str(row, "routine_name")?);
                    }
                    if let Some(row) = database.first() {
                        state.compatibility_level =
                            i32::try_from(rows::req_int(row, "compatibility_level")?).unwrap_or(0);
                        state.babelfish = rows::opt_str(row, "babelfish_version")?;
                    }
                    for row in &versions {
                        state
                            .applied_versions
                            .push(i32::try_from(rows::req_int(row, "version")?).unwrap_or(0));
                    }
                    for row in &texts {
                        state
                            .routine_checksums
                            .insert(rows::req_str(row, "name")?, rows::req_str(row, "checksum")?);
                    }
                    Ok(state)
                }
                .await;
                (conn, result)
            },
        )
        .await?;
    let tolerated = migrations::check(store.schema(), &state)?;
    if let Some(tolerated) = &tolerated {
        tracing::info!(
            event = "store.sqlserver.catalog_tolerated",
            schema = %store.schema(),
            server = %tolerated.server,
            differences = %tolerated.differences.join("; "),
            "the schema matches; cosmetic catalog differences of this server were accepted"
        );
    }
    Ok(tolerated)
}

#[cfg(test)]
mod tests;

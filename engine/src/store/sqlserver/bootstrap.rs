//! The schema at open and at `deck migrate`: what the database has applied (migration
//! versions, routine checksums), the migration script run as one batch under its application
//! lock, and the catalog check against the schema this version needs (`migrations::check`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::SqlServerStore;
use super::connection::redacted;
use super::migrations::{self, CatalogState};
use super::pool::{self, Fault, PooledConn, Repeat};
use super::queries::{self, Reads};
use super::reader;
use super::round_trip::attempt;
use super::routines;
use super::rows;
use super::wire;
use crate::error::{StoreError, StoreResult};

/// How long the migration script may take: it waits up to 120 s for the application lock,
/// and on a large database an index it creates may take minutes. It is never re-sent after a
/// timeout (the first run may still be applying it); a second `deck migrate` skips what is done.
const MIGRATION_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A failure to read the schema's state, said as the server being out of reach (or the
/// login lacking rights), which is what it means at open.
fn unreachable(connection: &str, err: StoreError) -> StoreError {
    match err {
        StoreError::Database {
            message, transient, ..
        } if transient || message.contains("no database connection") => StoreError::Unavailable {
            url: redacted(connection),
            cause: message,
            help: super::CONNECT_HELP.into(),
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
pub(super) struct Applied {
    pub(super) versions: Vec<i32>,
    routines: BTreeMap<String, String>,
}

impl Applied {
    /// Every migration applied and every routine applied from this version's text.
    pub(super) fn current(&self) -> bool {
        migrations::MIGRATIONS
            .iter()
            .all(|m| self.versions.contains(&m.version))
            && routines::stale(&self.routines).is_empty()
    }
}

/// The versions of `SCHEMA_VERSIONS`' rows.
fn applied_versions(rows: &[tiberius::Row]) -> Result<Vec<i32>, Fault> {
    rows.iter()
        .map(|row| Ok(i32::try_from(rows::req_int(row, "version")?).unwrap_or(0)))
        .collect()
}

/// Routine name → checksum, from `ROUTINE_VERSIONS`' rows.
fn routine_checksums(rows: &[tiberius::Row]) -> Result<BTreeMap<String, String>, Fault> {
    rows.iter()
        .map(|row| Ok((rows::req_str(row, "name")?, rows::req_str(row, "checksum")?)))
        .collect()
}

pub(super) async fn read_applied(store: &SqlServerStore, connection: &str) -> StoreResult<Applied> {
    let versions_sql = store.sql(queries::SCHEMA_VERSIONS.sql);
    let routines_sql = store.sql(queries::ROUTINE_VERSIONS.sql);
    let (versions_sql, routines_sql) = (&versions_sql, &routines_sql);
    store
        .run(
            "read schema version",
            Repeat::Always,
            attempt!(|client| {
                let versions =
                    catalog_rows(client, &queries::SCHEMA_VERSIONS, versions_sql, "").await?;
                let routines =
                    catalog_rows(client, &queries::ROUTINE_VERSIONS, routines_sql, "").await?;
                Ok(Applied {
                    versions: applied_versions(&versions)?,
                    routines: routine_checksums(&routines)?,
                })
            }),
        )
        .await
        .map_err(|e| unreachable(connection, e))
}

/// Run the whole migration script (one batch, one transaction, under the application lock).
/// Safe to repeat: every migration is guarded by its recorded version. It sends no rows.
pub(super) async fn apply_script(store: &SqlServerStore) -> StoreResult<()> {
    let script = migrations::script(store.schema());
    let script = &script;
    store
        .run_with_timeout(
            "apply schema migrations",
            Repeat::IfNotApplied,
            MIGRATION_TIMEOUT,
            attempt!(|client| {
                let stream = client.simple_query(script.as_str()).await?;
                reader::read_declared("migration script", Reads::Nothing, stream).await?;
                Ok(())
            }),
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
pub(super) async fn verify(store: &SqlServerStore) -> StoreResult<Option<migrations::Tolerated>> {
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
            attempt!(|client| {
                let mut answers = Vec::with_capacity(statements.len());
                for (statement, sql) in statements.iter().zip(rendered) {
                    answers.push(catalog_rows(client, statement, sql, schema).await?);
                }
                catalog_state(answers)
            }),
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

/// The catalog's answers, in `verify`'s order of statements, as one state to check.
fn catalog_state(answers: Vec<Vec<tiberius::Row>>) -> Result<CatalogState, Fault> {
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
    state.applied_versions = applied_versions(&versions)?;
    state.routine_checksums = routine_checksums(&texts)?;
    Ok(state)
}

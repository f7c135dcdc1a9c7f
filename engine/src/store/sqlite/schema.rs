//! Versioned schema, applied at open. Migrations are embedded in the binary and applied in
//! order inside one `BEGIN IMMEDIATE` transaction, so processes opening the same file at the
//! same moment take turns instead of racing.

use rusqlite::Connection;

use crate::error::{StoreError, StoreResult};

use super::connection::db_err;

/// (version, name, SQL). Append only: never edit a released migration.
pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "initial",
        include_str!("../../../../migrations/sqlite/0001_initial.sql"),
    ),
    (
        2,
        "active_list_index",
        include_str!("../../../../migrations/sqlite/0002_active_list_index.sql"),
    ),
    (
        3,
        "index_keys_end_in_rowid",
        include_str!("../../../../migrations/sqlite/0003_index_keys_end_in_rowid.sql"),
    ),
    (
        4,
        "instance_scope",
        include_str!("../../../../migrations/sqlite/0004_instance_scope.sql"),
    ),
];

pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// Bring the schema up to date. Returns the versions applied now.
pub(crate) fn migrate(conn: &mut Connection, now_us: i64) -> StoreResult<Vec<i64>> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(db_err("schema migration"))?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS deck_schema_version (
             version    INTEGER NOT NULL PRIMARY KEY,
             name       TEXT    NOT NULL,
             applied_at INTEGER NOT NULL
         )",
    )
    .map_err(db_err("schema migration"))?;
    let current: i64 = tx
        .query_row(
            "SELECT coalesce(max(version), 0) FROM deck_schema_version",
            [],
            |r| r.get(0),
        )
        .map_err(db_err("schema migration"))?;
    let known = latest_version();
    if current > known {
        return Err(StoreError::Schema {
            problem: format!(
                "the database has schema version {current}, but this deck knows versions up to {known}"
            ),
            help: "run a deck release at least as new as the one that last upgraded this \
                   database, or point --database at another file"
                .into(),
        });
    }
    let mut applied = Vec::new();
    for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        tx.execute_batch(sql).map_err(|e| StoreError::Schema {
            problem: format!("migration {version:04}_{name} failed: {e}"),
            help: "the database file may have been changed by hand; restore a backup or \
                   start with a new file"
                .into(),
        })?;
        tx.execute(
            "INSERT INTO deck_schema_version (version, name, applied_at) VALUES (?1, ?2, ?3)",
            rusqlite::params![version, name, now_us],
        )
        .map_err(db_err("schema migration"))?;
        applied.push(*version);
    }
    tx.commit().map_err(db_err("schema migration"))?;
    Ok(applied)
}

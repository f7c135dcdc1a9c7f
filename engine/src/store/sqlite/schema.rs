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
    (
        5,
        "error_fingerprints",
        include_str!("../../../../migrations/sqlite/0005_error_fingerprints.sql"),
    ),
    (
        6,
        "instance_quiet",
        include_str!("../../../../migrations/sqlite/0006_instance_quiet.sql"),
    ),
    (
        7,
        "run_time_bins",
        include_str!("../../../../migrations/sqlite/0007_run_time_bins.sql"),
    ),
    (
        8,
        "error_text_search",
        include_str!("../../../../migrations/sqlite/0008_error_text_search.sql"),
    ),
    (
        9,
        "unique_windows",
        include_str!("../../../../migrations/sqlite/0009_unique_windows.sql"),
    ),
    (
        10,
        "rate_limits",
        include_str!("../../../../migrations/sqlite/0010_rate_limits.sql"),
    ),
    (
        11,
        "schedules",
        include_str!("../../../../migrations/sqlite/0011_schedules.sql"),
    ),
    (
        12,
        "batches_and_trace_context",
        include_str!("../../../../migrations/sqlite/0012_batches_and_trace_context.sql"),
    ),
];

/// The version whose rows need fingerprints computed in Rust after its script.
const ERROR_FINGERPRINTS: i64 = 5;

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
        if *version == ERROR_FINGERPRINTS {
            super::error_groups::backfill_fingerprints(&tx)?;
        }
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

#[cfg(test)]
mod tests {
    use rusqlite::params;

    use super::*;
    use crate::fingerprint::fingerprint;
    use crate::model::FailureReason;

    /// A database as version 4 left it, with dead letters grouped the old way.
    fn version_4_with_dead_letters() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE deck_schema_version (version INTEGER NOT NULL PRIMARY KEY, \
             name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
        )
        .unwrap();
        for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 <= 4) {
            conn.execute_batch(sql).unwrap();
            conn.execute(
                "INSERT INTO deck_schema_version VALUES (?1, ?2, 0)",
                params![version, name],
            )
            .unwrap();
        }
        for (i, (job_type, message)) in [
            ("email.send", "mailbox a@example.com does not exist"),
            ("email.send", "mailbox b@example.org does not exist"),
            ("email.send", "mailbox c@example.net does not exist"),
            ("report", "mailbox d@example.com does not exist"),
        ]
        .into_iter()
        .enumerate()
        {
            let errors = format!(
                r#"[{{"attempt":1,"at":"2026-01-01T00:00:00Z","kind":"fatal","message":"{message}"}}]"#
            );
            conn.execute(
                "INSERT INTO dlq (id, queue, job_type, priority, tags, reason, attempt, \
                     created_at, scheduled_at, finished_at, error_prefix, last_error, errors, \
                     payload) \
                 VALUES (?1, 'q', ?2, 0, '', 2, 1, 0, 0, ?3, ?4, ?4, ?5, '{}')",
                params![
                    format!("id-{i}"),
                    job_type,
                    1_000 + i as i64,
                    message,
                    errors
                ],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO dlq_error_groups (reason, prefix, count, last_seen) \
                 VALUES (2, ?1, 1, 0)",
                [message],
            )
            .unwrap();
        }
        conn
    }

    #[test]
    fn upgrading_fingerprints_old_dead_letters_and_rebuilds_their_groups() {
        let mut conn = version_4_with_dead_letters();
        let applied: Vec<i64> = (5..=latest_version()).collect();
        assert_eq!(migrate(&mut conn, 0).unwrap(), applied);

        let missing: i64 = conn
            .query_row(
                "SELECT count(*) FROM dlq WHERE fingerprint IS NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(missing, 0, "every old dead letter has its fingerprint");
        let email = fingerprint(
            FailureReason::Fatal,
            "fatal",
            "email.send",
            "mailbox x@y.io does not exist",
        );
        let groups: Vec<(String, String, String, i64, i64)> = conn
            .prepare(
                "SELECT fingerprint, kind, job_type, count, last_seen FROM dlq_error_groups \
                 ORDER BY count DESC",
            )
            .unwrap()
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(groups.len(), 2, "{groups:?}");
        assert_eq!(
            groups[0],
            (
                email.to_string(),
                "fatal".to_string(),
                "email.send".to_string(),
                3,
                1_002
            ),
            "the same fingerprint a live move computes, counted and last seen from the rows"
        );
        assert_eq!((groups[1].2.as_str(), groups[1].3), ("report", 1));
        let sample: String = conn
            .query_row(
                "SELECT sample FROM dlq_error_groups WHERE fingerprint = ?1",
                [email.as_str()],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            sample, "mailbox c@example.net does not exist",
            "the latest row's"
        );
        // Running it again applies nothing and changes nothing.
        assert!(migrate(&mut conn, 0).unwrap().is_empty());
    }

    #[test]
    fn the_backfill_pages_through_a_large_dlq() {
        let mut conn = version_4_with_dead_letters();
        conn.execute(
            "INSERT INTO dlq (id, queue, job_type, priority, tags, reason, attempt, created_at, \
                 scheduled_at, finished_at, error_prefix, last_error, payload) \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500) \
             SELECT 'bulk-' || i, 'q', 'bulk', 0, '', 1, 1, 0, 0, i, 'x', \
                 'row ' || i || ' failed', '{}' FROM n",
            [],
        )
        .unwrap();
        migrate(&mut conn, 0).unwrap();
        let (missing, counted): (i64, i64) = conn
            .query_row(
                "SELECT (SELECT count(*) FROM dlq WHERE fingerprint IS NULL), \
                        (SELECT count FROM dlq_error_groups WHERE job_type = 'bulk')",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((missing, counted), (0, 2500), "every page, one group");
    }
}

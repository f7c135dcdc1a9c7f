//! The versioned schema (`migrations/sqlserver/NNNN_name.sql`): the script a DBA applies,
//! what auto-create runs, and the shape the store verifies at startup.
//!
//! The script is one batch and one transaction holding the application lock
//! `deck:ddl:{schema}` (`sp_getapplock`, owner `Transaction`), so concurrent instances queue up
//! instead of racing through the existence checks; each migration runs only if its version
//! is not recorded yet, so running the script again is harmless.

use std::collections::{BTreeMap, BTreeSet};

use super::connection::SchemaName;
use super::routines::{self, ROUTINES};
use crate::error::{StoreError, StoreResult};

/// One schema migration, embedded in the binary.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub file: &'static str,
    pub sql: &'static str,
}

/// Every migration, in version order. Add new files here; never edit an applied one.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        file: "0001_initial.sql",
        sql: include_str!("../../../../migrations/sqlserver/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "load_and_enqueue",
        file: "0002_load_and_enqueue.sql",
        sql: include_str!("../../../../migrations/sqlserver/0002_load_and_enqueue.sql"),
    },
    Migration {
        version: 3,
        name: "instance_scope",
        file: "0003_instance_scope.sql",
        sql: include_str!("../../../../migrations/sqlserver/0003_instance_scope.sql"),
    },
    Migration {
        version: 4,
        name: "error_fingerprints",
        file: "0004_error_fingerprints.sql",
        sql: include_str!("../../../../migrations/sqlserver/0004_error_fingerprints.sql"),
    },
    Migration {
        version: 5,
        name: "instance_quiet",
        file: "0005_instance_quiet.sql",
        sql: include_str!("../../../../migrations/sqlserver/0005_instance_quiet.sql"),
    },
    Migration {
        version: 6,
        name: "run_time_bins",
        file: "0006_run_time_bins.sql",
        sql: include_str!("../../../../migrations/sqlserver/0006_run_time_bins.sql"),
    },
    Migration {
        version: 7,
        name: "unique_windows",
        file: "0007_unique_windows.sql",
        sql: include_str!("../../../../migrations/sqlserver/0007_unique_windows.sql"),
    },
    Migration {
        version: 8,
        name: "rate_limits",
        file: "0008_rate_limits.sql",
        sql: include_str!("../../../../migrations/sqlserver/0008_rate_limits.sql"),
    },
    Migration {
        version: 9,
        name: "schedules",
        file: "0009_schedules.sql",
        sql: include_str!("../../../../migrations/sqlserver/0009_schedules.sql"),
    },
    Migration {
        version: 10,
        name: "batches_and_trace_context",
        file: "0010_batches_and_trace_context.sql",
        sql: include_str!("../../../../migrations/sqlserver/0010_batches_and_trace_context.sql"),
    },
    Migration {
        version: 11,
        name: "routine_versions",
        file: "0011_routine_versions.sql",
        sql: include_str!("../../../../migrations/sqlserver/0011_routine_versions.sql"),
    },
];

/// The migration that creates `[routine_versions]`: scripts through it and later apply the
/// routines (`routines.rs`) after the versioned migrations.
const ROUTINES_FROM_VERSION: i32 = 11;

pub fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// The version table, created by the script itself before any migration runs.
const SCHEMA_VERSION_TABLE: &str = "CREATE TABLE [{schema}].[schema_version] (
    [version]    INT           NOT NULL,
    [name]       NVARCHAR(200) NOT NULL,
    [applied_at] DATETIME2(6)  NOT NULL,
    CONSTRAINT [PK_schema_version] PRIMARY KEY CLUSTERED ([version])
);";

/// The command a message should point a DBA at.
pub const FIX_HELP: &str = "run `deck migrate` with a login allowed to create tables in this \
    database, or give the output of `deck migrate --print` to a DBA, or start deck with \
    auto_create_schema = true";

fn render(sql: &str, schema: &SchemaName) -> String {
    sql.replace("{schema}", schema.as_str())
}

/// The full DDL for `schema`: safe to run again, serialised by the application lock.
pub fn script(schema: &SchemaName) -> String {
    script_through(schema, latest_version())
}

/// The DDL of migrations 1 to `last` only: what an older deck applied (upgrade tests).
pub fn script_through(schema: &SchemaName, last: i32) -> String {
    let s = schema.as_str();
    let mut out = String::new();
    out.push_str(&format!(
        "-- The Deck: schema [{s}], migrations 1 to {latest}.\n\
         -- Run as a login allowed to CREATE SCHEMA and CREATE TABLE in the target database\n\
         -- (for example with sqlcmd -d <database> -I -i deck.sql). Running it again is harmless:\n\
         -- applied migrations are skipped, and concurrent runs wait for each other on the\n\
         -- application lock 'deck:ddl:{s}'. It is a single batch; do not split it.\n\
         SET ANSI_NULLS ON;\nSET ANSI_PADDING ON;\nSET ANSI_WARNINGS ON;\nSET ARITHABORT ON;\n\
         SET CONCAT_NULL_YIELDS_NULL ON;\nSET QUOTED_IDENTIFIER ON;\nSET NUMERIC_ROUNDABORT OFF;\n\
         SET XACT_ABORT ON;\n\
         BEGIN TRY\n\
         BEGIN TRANSACTION;\n\
         DECLARE @lock INT;\n\
         EXEC @lock = sys.sp_getapplock @Resource = N'deck:ddl:{s}', @LockMode = N'Exclusive',\n\
         \x20   @LockOwner = N'Transaction', @LockTimeout = 120000;\n\
         IF @lock < 0\n\
         \x20   THROW 50001, N'deck: could not take the application lock deck:ddl:{s} within 120 s; another instance may be migrating', 1;\n\
         IF SCHEMA_ID(N'{s}') IS NULL\n\
         \x20   EXEC(N'CREATE SCHEMA [{s}]');\n\
         IF OBJECT_ID(N'[{s}].[schema_version]', N'U') IS NULL\n",
        latest = last,
    ));
    out.push_str(&render(SCHEMA_VERSION_TABLE, schema));
    out.push('\n');
    for m in MIGRATIONS.iter().filter(|m| m.version <= last) {
        out.push_str(&format!(
            "\n-- ---- migration {:04}: {} ({})\n\
             IF NOT EXISTS (SELECT 1 FROM [{s}].[schema_version] WHERE version = {})\n\
             BEGIN\n",
            m.version, m.name, m.file, m.version
        ));
        out.push_str(&render(m.sql, schema));
        out.push_str(&format!(
            "\nINSERT INTO [{s}].[schema_version] (version, name, applied_at)\n\
             VALUES ({}, N'{}', SYSUTCDATETIME());\n\
             END\n",
            m.version, m.name
        ));
    }
    if last >= ROUTINES_FROM_VERSION {
        for routine in ROUTINES {
            out.push_str(&routine.apply_block(schema));
        }
    }
    out.push_str(
        "\nCOMMIT TRANSACTION;\n\
         END TRY\n\
         BEGIN CATCH\n\
         \x20   IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;\n\
         \x20   THROW;\n\
         END CATCH;\n",
    );
    out
}

/// A column as the catalog should show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnShape {
    pub type_name: String,
    /// Characters for nvarchar (-1 = MAX), bytes for binary; `None` = not checked.
    pub length: Option<i32>,
    /// Fractional-seconds scale for datetime2.
    pub scale: Option<i32>,
    pub nullable: bool,
}

impl std::fmt::Display for ColumnShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.type_name)?;
        match (self.length, self.scale) {
            (Some(-1), _) => f.write_str("(max)")?,
            (Some(n), _) => write!(f, "({n})")?,
            (None, Some(s)) => write!(f, "({s})")?,
            (None, None) => {}
        }
        f.write_str(if self.nullable { " NULL" } else { " NOT NULL" })
    }
}

/// Tables (with their columns), indexes and routines the migrations create.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Shape {
    pub tables: BTreeMap<String, BTreeMap<String, ColumnShape>>,
    /// (table, index)
    pub indexes: BTreeSet<(String, String)>,
    /// table → LOCK_ESCALATION set by a migration (`DISABLE`, `AUTO`, `TABLE`).
    pub lock_escalation: BTreeMap<String, String>,
    /// Procedures and functions.
    pub routines: BTreeSet<String>,
}

fn bracketed(text: &str) -> Option<(&str, &str)> {
    let start = text.find('[')?;
    let end = start + text[start..].find(']')?;
    Some((&text[start + 1..end], &text[end + 1..]))
}

/// `[{schema}].[name]` → name.
fn object_name(text: &str) -> Option<&str> {
    let (_, rest) = bracketed(text)?;
    let rest = rest.strip_prefix('.')?;
    bracketed(rest).map(|(name, _)| name)
}

fn parse_column(line: &str) -> Option<(String, ColumnShape)> {
    let (name, rest) = bracketed(line.trim_start())?;
    let rest = rest.trim_start();
    let type_end = rest
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(rest.len());
    let type_name = rest[..type_end].to_ascii_lowercase();
    let after = &rest[type_end..];
    let args = after
        .strip_prefix('(')
        .and_then(|a| a.split_once(')'))
        .map(|(a, _)| a.trim().to_ascii_lowercase());
    let (length, scale) = match (type_name.as_str(), args) {
        ("nvarchar" | "binary" | "varbinary", Some(a)) => {
            (Some(if a == "max" { -1 } else { a.parse().ok()? }), None)
        }
        ("datetime2", Some(a)) => (None, Some(a.parse().ok()?)),
        ("datetime2", None) => (None, Some(7)),
        _ => (None, None),
    };
    let upper = line.to_ascii_uppercase();
    let nullable = !upper.contains("NOT NULL");
    Some((
        name.to_string(),
        ColumnShape {
            type_name,
            length,
            scale,
            nullable,
        },
    ))
}

/// Read the expected shape out of the DDL itself, so the check can never drift from it.
/// Later migrations may add columns (`ALTER TABLE … ADD`, one column per statement: Babelfish
/// refuses several in one clause), drop tables and indexes, and set a table's lock escalation.
/// The routines are those of `routines.rs`.
pub fn expected_shape() -> Shape {
    let mut shape = Shape::default();
    let mut sources = vec![SCHEMA_VERSION_TABLE];
    sources.extend(MIGRATIONS.iter().map(|m| m.sql));
    for sql in sources {
        let mut table: Option<String> = None;
        // Inside `ALTER TABLE … ADD`: one column per line, until the `;`.
        let mut adding_columns = false;
        for line in sql.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with("--") {
                continue;
            }
            let upper = trimmed.to_ascii_uppercase();
            if let Some(current) = &table {
                if adding_columns {
                    if let Some((name, column)) = parse_column(trimmed) {
                        shape
                            .tables
                            .entry(current.clone())
                            .or_default()
                            .insert(name, column);
                    }
                    if trimmed.ends_with(';') {
                        table = None;
                        adding_columns = false;
                    }
                } else if upper.starts_with("CONSTRAINT") {
                    if upper.contains("PRIMARY KEY")
                        && let Some((pk, _)) = bracketed(trimmed)
                    {
                        shape.indexes.insert((current.clone(), pk.to_string()));
                    }
                } else if trimmed.starts_with(')') {
                    table = None;
                } else if trimmed.starts_with('[')
                    && let Some((name, column)) = parse_column(trimmed)
                {
                    shape
                        .tables
                        .entry(current.clone())
                        .or_default()
                        .insert(name, column);
                }
            } else if upper.starts_with("CREATE TABLE") {
                table = object_name(trimmed).map(str::to_string);
            } else if upper.starts_with("ALTER TABLE") && upper.ends_with(" ADD") {
                table = object_name(trimmed).map(str::to_string);
                adding_columns = table.is_some();
            } else if upper.starts_with("DROP TABLE") {
                if let Some(t) = object_name(trimmed) {
                    shape.tables.remove(t);
                    shape.indexes.retain(|(owner, _)| owner != t);
                    shape.lock_escalation.remove(t);
                }
            } else if upper.starts_with("DROP INDEX") {
                if let Some((index, rest)) = bracketed(trimmed)
                    && let Some(on) = rest.find(" ON ")
                    && let Some(t) = object_name(&rest[on..])
                {
                    shape.indexes.remove(&(t.to_string(), index.to_string()));
                }
            } else if upper.starts_with("ALTER TABLE") && upper.contains("LOCK_ESCALATION") {
                let setting = upper
                    .split("LOCK_ESCALATION")
                    .nth(1)
                    .map(|r| r.trim_start_matches([' ', '=']))
                    .and_then(|r| r.split(|c: char| !c.is_ascii_alphabetic()).next())
                    .unwrap_or_default()
                    .to_string();
                if let Some(t) = object_name(trimmed) {
                    shape.lock_escalation.insert(t.to_string(), setting);
                }
            } else if upper.starts_with("CREATE") && upper.contains(" INDEX ") {
                let Some((index, rest)) = bracketed(trimmed) else {
                    continue;
                };
                let Some(on) = rest.find(" ON ") else {
                    continue;
                };
                if let Some(t) = object_name(&rest[on..]) {
                    shape.indexes.insert((t.to_string(), index.to_string()));
                }
            }
        }
    }
    shape
        .routines
        .extend(ROUTINES.iter().map(|r| r.name.to_string()));
    shape
}

/// What the catalog says, as read by the `queries::CATALOG_*` statements.
#[derive(Debug, Default, Clone)]
pub struct CatalogState {
    /// Tables, columns, indexes, routines, and each table's LOCK_ESCALATION
    /// (`lock_escalation_desc`: "TABLE", "AUTO", "DISABLE").
    pub shape: Shape,
    /// table → compression of its clustered index ("NONE", "ROW", "PAGE").
    pub compression: BTreeMap<String, String>,
    pub compatibility_level: i32,
    pub applied_versions: Vec<i32>,
    /// `SERVERPROPERTY('BabelfishVersion')` when the server is Babelfish for PostgreSQL.
    pub babelfish: Option<String>,
    /// routine → SHA-256 of the text it was last applied from (`[routine_versions]`).
    pub routine_checksums: BTreeMap<String, String>,
}

/// What the check accepted although the catalog differs from the DDL: Babelfish for
/// PostgreSQL keeps its own catalog, and reports some facts the same way whatever the DDL said.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tolerated {
    /// The server it tolerated them on, e.g. "Babelfish 4.3.0".
    pub server: String,
    /// One line per kind of difference.
    pub differences: Vec<String>,
}

impl std::fmt::Display for Tolerated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "on {}, tolerated: {}",
            self.server,
            self.differences.join("; ")
        )
    }
}

/// Whether `found`, a name from `sys.indexes`, is index `index` of `table` as Babelfish names it:
/// PostgreSQL keeps one namespace for the indexes of a schema, so Babelfish stores a lower-cased
/// name and, for every index but a primary key, appends the table name and an MD5 of both,
/// cut to PostgreSQL's 63 characters (`ix_jobs_hot_claim` + `jobs_hot` + 32 hex digits).
fn babelfish_index_name(found: &str, table: &str, index: &str) -> bool {
    let found = found.to_lowercase();
    let index = index.to_lowercase();
    if found == index {
        return true;
    }
    let Some(prefix_len) = found.len().checked_sub(32) else {
        return false;
    };
    let (prefix, digest) = found.split_at(prefix_len);
    let hashed = digest.len() == 32 && digest.bytes().all(|b| b.is_ascii_hexdigit());
    let spelled = format!("{index}{}", table.to_lowercase());
    hashed && prefix.len() >= index.len().min(31) && spelled.starts_with(prefix)
}

/// Compare the catalog with what the migrations create; every problem in one message. On
/// Babelfish the cosmetic differences of its catalog (index names, compatibility level,
/// compression, lock escalation) are accepted and returned, so the caller can say so.
pub fn check(schema: &SchemaName, state: &CatalogState) -> StoreResult<Option<Tolerated>> {
    let s = schema.as_str();
    let mut problems = Vec::new();
    let mut tolerated = Vec::new();
    let babelfish = state.babelfish.is_some();
    let latest = latest_version();
    if let Some(&newest) = state.applied_versions.iter().max()
        && newest > latest
    {
        return Err(StoreError::Schema {
            problem: format!(
                "schema [{s}] is at version {newest}, newer than this deck knows ({latest})"
            ),
            help: "upgrade deck to the version that migrated this database".into(),
        });
    }
    for m in MIGRATIONS {
        if !state.applied_versions.contains(&m.version) {
            problems.push(format!(
                "migration {:04}_{} is not applied",
                m.version, m.name
            ));
        }
    }
    if state.compatibility_level != 0 && state.compatibility_level < 130 {
        if babelfish {
            tolerated.push(format!(
                "compatibility level {} (Babelfish reports one fixed level; OPENJSON works)",
                state.compatibility_level
            ));
        } else {
            problems.push(format!(
                "the database compatibility level is {} but deck needs 130 or higher (OPENJSON); \
                 ALTER DATABASE CURRENT SET COMPATIBILITY_LEVEL = 140",
                state.compatibility_level
            ));
        }
    }
    let expected = expected_shape();
    for (table, columns) in &expected.tables {
        let Some(found) = state.shape.tables.get(table) else {
            problems.push(format!("table [{s}].[{table}] is missing"));
            continue;
        };
        for (column, want) in columns {
            match found.get(column) {
                None => problems.push(format!(
                    "column [{s}].[{table}].[{column}] ({want}) is missing"
                )),
                Some(have) => {
                    let differs = have.type_name != want.type_name
                        || have.nullable != want.nullable
                        || (want.length.is_some() && have.length != want.length)
                        || (want.scale.is_some() && have.scale != want.scale);
                    if differs {
                        problems.push(format!(
                            "column [{s}].[{table}].[{column}] is {have}, expected {want}"
                        ));
                    }
                }
            }
        }
    }
    let mut renamed_indexes = 0;
    for (table, index) in &expected.indexes {
        if !expected.tables.contains_key(table) || !state.shape.tables.contains_key(table) {
            continue;
        }
        let key = (table.clone(), index.clone());
        if state.shape.indexes.contains(&key) {
            continue;
        }
        let under_babelfish_name = babelfish
            && state
                .shape
                .indexes
                .iter()
                .any(|(t, found)| t == table && babelfish_index_name(found, table, index));
        if under_babelfish_name {
            renamed_indexes += 1;
        } else {
            problems.push(format!("index [{index}] on [{s}].[{table}] is missing"));
        }
    }
    if renamed_indexes > 0 {
        tolerated.push(format!(
            "{renamed_indexes} index names as Babelfish stores them (lower case, table name \
             and hash appended)"
        ));
    }
    let mut escalation_ignored = Vec::new();
    for (table, want) in &expected.lock_escalation {
        if let Some(have) = state.shape.lock_escalation.get(table)
            && have != want
        {
            if babelfish {
                escalation_ignored.push(format!("[{table}] {have} (wanted {want})"));
            } else {
                problems.push(format!(
                    "[{s}].[{table}] has LOCK_ESCALATION = {have}, expected {want}: \
                     ALTER TABLE [{s}].[{table}] SET (LOCK_ESCALATION = {want})"
                ));
            }
        }
    }
    if !escalation_ignored.is_empty() {
        tolerated.push(format!(
            "lock escalation {} (PostgreSQL locks rows without escalating)",
            escalation_ignored.join(", ")
        ));
    }
    for routine in &expected.routines {
        if !state.shape.routines.contains(routine) {
            problems.push(format!(
                "procedure or function [{s}].[{routine}] is missing"
            ));
        }
    }
    if state.applied_versions.contains(&ROUTINES_FROM_VERSION) {
        for name in routines::stale(&state.routine_checksums) {
            problems.push(format!(
                "routine [{s}].[{name}] was not applied from this deck version's text"
            ));
        }
    }
    let mut uncompressed = Vec::new();
    for table in ["jobs_archive", "jobs_dlq"] {
        if let Some(compression) = state.compression.get(table)
            && compression != "PAGE"
        {
            if babelfish {
                uncompressed.push(format!("[{table}] {compression}"));
            } else {
                problems.push(format!(
                    "[{s}].[{table}] uses {compression} compression, expected PAGE"
                ));
            }
        }
    }
    if !uncompressed.is_empty() {
        tolerated.push(format!(
            "compression {} (Babelfish accepts DATA_COMPRESSION and stores rows as PostgreSQL \
             does)",
            uncompressed.join(", ")
        ));
    }
    if !problems.is_empty() {
        return Err(StoreError::Schema {
            problem: format!(
                "schema [{s}] does not match this deck version:\n    - {}",
                problems.join("\n    - ")
            ),
            help: FIX_HELP.into(),
        });
    }
    Ok(match &state.babelfish {
        Some(version) if !tolerated.is_empty() => Some(Tolerated {
            server: format!("Babelfish {version}"),
            differences: tolerated,
        }),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deck() -> SchemaName {
        SchemaName::parse("deck").unwrap()
    }

    #[test]
    fn migrations_are_numbered_in_order_and_named_after_their_files() {
        let mut previous = 0;
        for m in MIGRATIONS {
            assert_eq!(m.version, previous + 1, "{} is out of sequence", m.file);
            assert_eq!(m.file, format!("{:04}_{}.sql", m.version, m.name));
            previous = m.version;
        }
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations/sqlserver");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|f| f.ends_with(".sql"))
            .collect();
        files.sort();
        let listed: Vec<&str> = MIGRATIONS.iter().map(|m| m.file).collect();
        assert_eq!(
            files, listed,
            "every file in migrations/sqlserver is listed, in order"
        );
    }

    #[test]
    fn migrations_fit_inside_the_guarded_block() {
        for m in MIGRATIONS {
            for line in m.sql.lines().filter(|l| !l.trim_start().starts_with("--")) {
                let upper = line.trim().to_ascii_uppercase();
                assert_ne!(upper, "GO", "{}: no GO separators", m.file);
                assert!(
                    !upper.contains("CREATE SCHEMA"),
                    "{}: the script creates the schema",
                    m.file
                );
                assert!(!upper.contains("MERGE"), "{}: no MERGE", m.file);
            }
        }
    }

    #[test]
    fn the_script_substitutes_the_schema_everywhere() {
        let schema = SchemaName::parse("jobs_2").unwrap();
        let text = script(&schema);
        assert!(!text.contains("{schema}"));
        assert!(text.contains("[jobs_2].[jobs_hot]"));
        assert!(text.contains("@Resource = N'deck:ddl:jobs_2'"));
        assert!(text.contains("@LockOwner = N'Transaction'"));
        assert!(text.contains("SET XACT_ABORT ON"));
        assert!(!text.contains("[deck]."));
        // Each migration is guarded by its version and records it.
        assert!(text.contains("WHERE version = 1)"));
        assert!(text.contains("VALUES (1, N'initial', SYSUTCDATETIME())"));
        assert!(text.contains("WHERE version = 2)"));
        assert!(text.contains("CREATE PROCEDURE [jobs_2].[enqueue_batch]"));
        assert!(text.contains("ALTER PROCEDURE [jobs_2].[enqueue_batch]"));
        // Forms Babelfish refuses are not used (SQL Server accepts either).
        assert!(!text.contains("CREATE OR ALTER"));
        assert!(!text.contains("DROP_EXISTING"));
        // Guards come before bodies: the lock, then the schema, then the version table.
        let lock = text.find("sp_getapplock").unwrap();
        let schema_at = text.find("EXEC(N'CREATE SCHEMA").unwrap();
        let version = text.find("CREATE TABLE [jobs_2].[schema_version]").unwrap();
        let hot = text.find("CREATE TABLE [jobs_2].[jobs_hot]").unwrap();
        assert!(lock < schema_at && schema_at < version && version < hot);
    }

    #[test]
    fn an_older_script_stops_at_its_version() {
        let v1 = script_through(&deck(), 1);
        assert!(v1.contains("CREATE TABLE [deck].[queue_counters]"));
        assert!(!v1.contains("WHERE version = 2)"));
        assert!(!v1.contains("queue_counter_slots"));
        assert!(v1.contains("migrations 1 to 1"));
        assert_eq!(script_through(&deck(), latest_version()), script(&deck()));
    }

    #[test]
    fn the_expected_shape_is_read_from_the_ddl() {
        let shape = expected_shape();
        for table in [
            "jobs_hot",
            "jobs_archive",
            "jobs_dlq",
            "queues",
            "queue_counter_slots",
            "metric_slots",
            "run_time_slots",
            "error_fingerprint_slots",
            "settings",
            "instances",
            "audit_log",
            "schema_version",
            "batches",
        ] {
            assert!(shape.tables.contains_key(table), "{table}");
        }
        let hot = &shape.tables["jobs_hot"];
        assert_eq!(
            hot["id"],
            ColumnShape {
                type_name: "binary".into(),
                length: Some(16),
                scale: None,
                nullable: false
            }
        );
        assert_eq!(hot["payload"].length, Some(-1));
        assert_eq!(hot["scheduled_at"].scale, Some(6));
        assert!(hot["worker_id"].nullable);
        assert!(!hot.contains_key("PK_jobs_hot"));
        // 25 in 0001, batch_id and trace_context from 0010.
        assert_eq!(hot.len(), 27);
        assert_eq!(hot["batch_id"].length, Some(16));
        assert!(hot["batch_id"].nullable);
        assert_eq!(hot["trace_context"].length, Some(1024));
        for pillar in ["jobs_archive", "jobs_dlq"] {
            let table = &shape.tables[pillar];
            assert!(table.contains_key("batch_id") && table.contains_key("trace_context"));
            let index = format!("IX_{pillar}_batch");
            assert!(
                shape.indexes.contains(&(pillar.to_string(), index)),
                "{pillar}"
            );
        }
        assert!(
            shape
                .indexes
                .contains(&("jobs_hot".to_string(), "IX_jobs_hot_batch".to_string()))
        );
        let batches = &shape.tables["batches"];
        assert_eq!(batches.len(), 15);
        assert_eq!(batches["id"].length, Some(16));
        assert!(!batches["total"].nullable && batches["finished_at"].nullable);
        assert!(
            shape
                .indexes
                .contains(&("batches".to_string(), "PK_batches".to_string()))
        );
        // Columns a later migration added with ALTER TABLE … ADD.
        let instances = &shape.tables["instances"];
        assert!(!instances["kind"].nullable);
        assert_eq!(instances["kind"].length, Some(16));
        assert_eq!(instances["queues"].length, Some(-1));
        assert!(instances["job_types"].nullable);
        assert_eq!(instances["quiet"].type_name, "bit");
        assert!(!instances["quiet"].nullable);
        assert_eq!(instances.len(), 13);
        for index in [
            "PK_jobs_hot",
            "UX_jobs_hot_id",
            "IX_jobs_hot_claim",
            "IX_jobs_hot_fetched",
            "IX_jobs_hot_processing",
            "UX_jobs_hot_idempotency",
        ] {
            assert!(
                shape
                    .indexes
                    .contains(&("jobs_hot".to_string(), index.to_string())),
                "{index}"
            );
        }
        assert!(
            shape
                .indexes
                .contains(&("jobs_dlq".to_string(), "IX_jobs_dlq_reason".to_string()))
        );
        // Added by 0004 on a column an ALTER TABLE of the same migration adds.
        assert!(shape.indexes.contains(&(
            "jobs_dlq".to_string(),
            "IX_jobs_dlq_fingerprint".to_string()
        )));
        assert!(shape.tables["jobs_dlq"].contains_key("fingerprint"));
        assert_eq!(shape.tables["error_fingerprint_slots"].len(), 8);
        // Later migrations drop what they replace.
        for gone in [
            "queue_counters",
            "metric_buckets",
            "error_groups",
            "error_group_slots",
        ] {
            assert!(!shape.tables.contains_key(gone), "{gone}");
            assert!(shape.indexes.iter().all(|(t, _)| t != gone), "{gone}");
        }
        for gone in ["IX_jobs_hot_status_created", "IX_jobs_hot_scheduled"] {
            assert!(
                !shape
                    .indexes
                    .contains(&("jobs_hot".to_string(), gone.to_string())),
                "{gone}"
            );
        }
        assert!(
            shape
                .indexes
                .contains(&("jobs_hot".to_string(), "IX_jobs_hot_due".to_string()))
        );
        assert_eq!(shape.tables["queue_counter_slots"].len(), 7);
        assert_eq!(
            shape.lock_escalation.get("jobs_hot").map(String::as_str),
            Some("DISABLE")
        );
        let routines: Vec<&str> = shape.routines.iter().map(String::as_str).collect();
        assert_eq!(
            routines,
            [
                "enqueue",
                "enqueue_batch",
                "fingerprint",
                "name_problem",
                "utc_time",
                "uuid_bytes",
                "uuid_text",
                "uuid_v7"
            ]
        );
        // The temp tables inside the procedures are not part of the schema.
        assert!(shape.tables.keys().all(|t| !t.starts_with('#')));
    }

    #[test]
    fn a_complete_catalog_passes_and_a_damaged_one_names_the_problems() {
        let expected = expected_shape();
        let mut state = CatalogState {
            shape: expected.clone(),
            compression: [("jobs_archive", "PAGE"), ("jobs_dlq", "PAGE")]
                .into_iter()
                .map(|(t, c)| (t.to_string(), c.to_string()))
                .collect(),
            compatibility_level: 150,
            applied_versions: (1..=latest_version()).collect(),
            babelfish: None,
            routine_checksums: current_routines(),
        };
        check(&deck(), &state).unwrap();

        state.shape.tables.remove("error_fingerprint_slots");
        state
            .shape
            .tables
            .get_mut("jobs_hot")
            .unwrap()
            .get_mut("priority")
            .unwrap()
            .nullable = true;
        state
            .shape
            .indexes
            .remove(&("jobs_hot".to_string(), "IX_jobs_hot_claim".to_string()));
        state
            .compression
            .insert("jobs_dlq".to_string(), "NONE".to_string());
        state.compatibility_level = 120;
        state
            .shape
            .lock_escalation
            .insert("jobs_hot".to_string(), "TABLE".to_string());
        state.shape.routines.remove("enqueue");
        state
            .routine_checksums
            .insert("uuid_v7".to_string(), "0".repeat(64));
        let err = check(&deck(), &state).unwrap_err().to_string();
        assert!(
            err.contains("routine [deck].[uuid_v7] was not applied from this deck version's text"),
            "{err}"
        );
        assert!(
            err.contains("table [deck].[error_fingerprint_slots] is missing"),
            "{err}"
        );
        assert!(
            err.contains("[deck].[jobs_hot].[priority] is int NULL, expected int NOT NULL"),
            "{err}"
        );
        assert!(err.contains("index [IX_jobs_hot_claim]"), "{err}");
        assert!(err.contains("NONE compression"), "{err}");
        assert!(err.contains("compatibility level is 120"), "{err}");
        assert!(
            err.contains("LOCK_ESCALATION = TABLE, expected DISABLE"),
            "{err}"
        );
        assert!(
            err.contains("procedure or function [deck].[enqueue] is missing"),
            "{err}"
        );
        assert!(err.contains("deck migrate --print"), "{err}");
    }

    /// The catalog of a schema the script created on Babelfish 4.3, as its `sys` views show it.
    fn babelfish_catalog() -> CatalogState {
        let expected = expected_shape();
        let mut shape = expected.clone();
        shape.indexes = expected
            .indexes
            .iter()
            .map(|(table, index)| {
                let lower = index.to_lowercase();
                let name = if lower.starts_with("pk_") {
                    lower
                } else {
                    let spelled: String = format!("{lower}{table}").chars().take(31).collect();
                    format!("{spelled}0123456789abcdef0123456789abcdef")
                };
                (table.clone(), name)
            })
            .collect();
        for table in expected.tables.keys() {
            shape.lock_escalation.insert(table.clone(), "TABLE".into());
        }
        CatalogState {
            shape,
            compression: [("jobs_archive", "NONE"), ("jobs_dlq", "NONE")]
                .into_iter()
                .map(|(t, c)| (t.to_string(), c.to_string()))
                .collect(),
            compatibility_level: 120,
            applied_versions: (1..=latest_version()).collect(),
            babelfish: Some("4.3.0".into()),
            routine_checksums: current_routines(),
        }
    }

    fn current_routines() -> BTreeMap<String, String> {
        ROUTINES
            .iter()
            .map(|r| (r.name.to_string(), r.checksum()))
            .collect()
    }

    #[test]
    fn babelfish_cosmetic_differences_are_tolerated_and_named() {
        let tolerated = check(&deck(), &babelfish_catalog())
            .unwrap()
            .expect("differences are reported");
        assert_eq!(tolerated.server, "Babelfish 4.3.0");
        let text = tolerated.to_string();
        assert!(text.contains("index names"), "{text}");
        assert!(text.contains("compatibility level 120"), "{text}");
        assert!(text.contains("[jobs_archive] NONE"), "{text}");
        assert!(text.contains("[jobs_hot] TABLE (wanted DISABLE)"), "{text}");

        // The same catalog on SQL Server is four real problems.
        let mut sql_server = babelfish_catalog();
        sql_server.babelfish = None;
        let err = check(&deck(), &sql_server).unwrap_err().to_string();
        assert!(err.contains("index [IX_jobs_hot_claim]"), "{err}");
        assert!(err.contains("compatibility level is 120"), "{err}");
        assert!(err.contains("NONE compression"), "{err}");
        assert!(err.contains("LOCK_ESCALATION = TABLE"), "{err}");
    }

    #[test]
    fn babelfish_still_reports_what_is_really_missing() {
        let mut state = babelfish_catalog();
        state
            .shape
            .indexes
            .retain(|(_, name)| !name.starts_with("ix_jobs_hot_claim"));
        state
            .shape
            .tables
            .get_mut("jobs_hot")
            .unwrap()
            .remove("priority");
        state.applied_versions.pop();
        let err = check(&deck(), &state).unwrap_err().to_string();
        assert!(
            err.contains("index [IX_jobs_hot_claim] on [deck].[jobs_hot]"),
            "{err}"
        );
        assert!(err.contains("[deck].[jobs_hot].[priority]"), "{err}");
        assert!(err.contains("is not applied"), "{err}");
        // A name from another table, or another index's hash form, is not a match.
        assert!(!babelfish_index_name(
            "ix_jobs_hot_claimjobs_hotd130d7fb1459e7b2f907b96ff09b2353",
            "jobs_hot",
            "IX_jobs_hot_created"
        ));
        assert!(!babelfish_index_name(
            "ix_jobs_hot_claimjobs_hotd130d7fb1459e7b2f907b96ff09b2353",
            "jobs_archive",
            "IX_jobs_hot_claim"
        ));
        assert!(babelfish_index_name(
            "ix_jobs_hot_queue_createdjobs_h06d7ff07fc7e20b163c7abb935021df9",
            "jobs_hot",
            "IX_jobs_hot_queue_created"
        ));
    }

    #[test]
    fn an_empty_database_is_told_how_to_migrate() {
        let err = check(&deck(), &CatalogState::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("migration 0001_initial is not applied"),
            "{err}"
        );
        assert!(
            err.contains("migration 0002_load_and_enqueue is not applied"),
            "{err}"
        );
        assert!(err.contains("table [deck].[jobs_hot] is missing"), "{err}");
        assert!(err.contains("deck migrate"), "{err}");
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let state = CatalogState {
            applied_versions: vec![1, 99],
            ..Default::default()
        };
        let err = check(&deck(), &state).unwrap_err().to_string();
        assert!(err.contains("version 99"), "{err}");
    }
}

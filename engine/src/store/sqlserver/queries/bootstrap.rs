//! The schema's own state, read at open and by `deck migrate` (`bootstrap`): the migration
//! versions and routine checksums applied, and the catalog facts `migrations::check` compares
//! with the schema this version needs.

use super::{Class, Reads, Statement};

/// Applied migration versions (none while the version table is missing). One SELECT either
/// way: the table is read into a variable only when it exists.
pub const SCHEMA_VERSIONS: Statement = Statement {
    name: "schema_versions",
    class: Class::Schema,
    reads: Reads::Rows(&["version"]),
    sql: "SET NOCOUNT ON;
DECLARE @versions TABLE (version INT NOT NULL PRIMARY KEY);
IF OBJECT_ID(N'[{schema}].[schema_version]', N'U') IS NOT NULL
    INSERT INTO @versions (version) SELECT v.version FROM [{schema}].[schema_version] AS v;
SELECT x.version FROM @versions AS x ORDER BY x.version;",
};

/// The text each routine was last applied from (its SHA-256), once migration 0011 made the
/// table; none before.
pub const ROUTINE_VERSIONS: Statement = Statement {
    name: "routine_versions",
    class: Class::Schema,
    reads: Reads::Rows(&["name", "checksum"]),
    sql: "SET NOCOUNT ON;
DECLARE @routines TABLE (name NVARCHAR(128) NOT NULL PRIMARY KEY, checksum CHAR(64) NOT NULL);
IF OBJECT_ID(N'[{schema}].[routine_versions]', N'U') IS NOT NULL
    INSERT INTO @routines (name, checksum)
    SELECT r.name, r.checksum FROM [{schema}].[routine_versions] AS r;
SELECT x.name, x.checksum FROM @routines AS x ORDER BY x.name;",
};

/// @P1 schema name. Columns with type, length (characters for text, -1 for MAX), scale and
/// nullability. The catalog is read one statement per kind of fact, so an empty answer (a
/// schema that does not exist yet) is just an empty answer.
pub const CATALOG_COLUMNS: Statement = Statement {
    name: "catalog_columns",
    class: Class::Schema,
    reads: Reads::Rows(&[
        "table_name",
        "column_name",
        "type_name",
        "max_length",
        "scale",
        "is_nullable",
    ]),
    sql: "SET NOCOUNT ON;
SELECT t.name AS table_name, c.name AS column_name, ty.name AS type_name,
       CAST(CASE WHEN ty.name IN (N'nvarchar', N'nchar') AND c.max_length > 0
                 THEN c.max_length / 2 ELSE c.max_length END AS INT) AS max_length,
       CAST(c.scale AS INT) AS scale, c.is_nullable
FROM sys.tables AS t
JOIN sys.columns AS c ON c.object_id = t.object_id
JOIN sys.types AS ty ON ty.user_type_id = c.user_type_id
WHERE t.schema_id = SCHEMA_ID(@P1);",
};

pub const CATALOG_INDEXES: Statement = Statement {
    name: "catalog_indexes",
    class: Class::Schema,
    reads: Reads::Rows(&["table_name", "index_name"]),
    sql: "SET NOCOUNT ON;
SELECT t.name AS table_name, i.name AS index_name
FROM sys.indexes AS i
JOIN sys.tables AS t ON t.object_id = i.object_id
WHERE t.schema_id = SCHEMA_ID(@P1) AND i.name IS NOT NULL;",
};

/// Each table's clustered-index compression and its LOCK_ESCALATION setting.
pub const CATALOG_TABLES: Statement = Statement {
    name: "catalog_tables",
    class: Class::Schema,
    reads: Reads::Rows(&["table_name", "compression", "lock_escalation"]),
    sql: "SET NOCOUNT ON;
SELECT t.name AS table_name, p.data_compression_desc AS compression,
       t.lock_escalation_desc AS lock_escalation
FROM sys.tables AS t
JOIN sys.partitions AS p ON p.object_id = t.object_id AND p.index_id IN (0, 1)
WHERE t.schema_id = SCHEMA_ID(@P1);",
};

/// Procedures and functions of the schema.
pub const CATALOG_ROUTINES: Statement = Statement {
    name: "catalog_routines",
    class: Class::Schema,
    reads: Reads::Rows(&["routine_name"]),
    sql: "SET NOCOUNT ON;
SELECT o.name AS routine_name
FROM sys.objects AS o
WHERE o.schema_id = SCHEMA_ID(@P1) AND o.type IN ('P', 'IF', 'FN', 'TF');",
};

/// The compatibility level, and Babelfish's version (NULL on SQL Server and Azure SQL, where the
/// property does not exist): its catalog differs in ways the check tolerates.
pub const CATALOG_DATABASE: Statement = Statement {
    name: "catalog_database",
    class: Class::Schema,
    reads: Reads::Rows(&["compatibility_level", "babelfish_version"]),
    sql: "SET NOCOUNT ON;
SELECT CAST(d.compatibility_level AS INT) AS compatibility_level,
       CAST(SERVERPROPERTY('BabelfishVersion') AS NVARCHAR(128)) AS babelfish_version
FROM sys.databases AS d WHERE d.database_id = DB_ID();",
};

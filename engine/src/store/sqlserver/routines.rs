//! Routines: the procedures and functions of the schema, each defined once in
//! `migrations/sqlserver/routines/<name>.sql` (plain T-SQL, `CREATE PROCEDURE` or
//! `CREATE FUNCTION`), and applied by the migration script after the versioned migrations
//! whenever its text changed — the SHA-256 of the text it was last applied from is kept in
//! `[routine_versions]` (migration 0011). Flyway's repeatable migrations are the model.
//!
//! A procedure is changed with `ALTER PROCEDURE` (created first as a stub when missing), which
//! keeps the permissions granted on it. A function is dropped and created again: Babelfish for
//! PostgreSQL has no `ALTER FUNCTION`, and nothing here binds to a function's schema.

use sha2::{Digest, Sha256};

use super::connection::SchemaName;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutineKind {
    Procedure,
    Function,
}

/// One routine, embedded in the binary.
#[derive(Debug, Clone, Copy)]
pub struct Routine {
    pub name: &'static str,
    pub kind: RoutineKind,
    pub file: &'static str,
    /// `CREATE PROCEDURE [{schema}].[name] …` or `CREATE FUNCTION [{schema}].[name] …`.
    pub sql: &'static str,
}

/// One routine of `migrations/sqlserver/routines/<name>.sql`, embedded.
macro_rules! routine {
    ($kind:ident, $name:literal) => {
        Routine {
            name: $name,
            kind: RoutineKind::$kind,
            file: concat!($name, ".sql"),
            sql: include_str!(concat!(
                "../../../../migrations/sqlserver/routines/",
                $name,
                ".sql"
            )),
        }
    };
}

/// Every routine, in the order they are applied: a routine comes after those it uses.
pub const ROUTINES: &[Routine] = &[
    routine!(Function, "uuid_text"),
    routine!(Function, "uuid_bytes"),
    routine!(Function, "uuid_v7"),
    routine!(Function, "utc_time"),
    routine!(Function, "fingerprint"),
    routine!(Function, "name_problem"),
    routine!(Procedure, "enqueue_batch"),
    routine!(Procedure, "enqueue"),
];

impl Routine {
    /// SHA-256 of the text, in lower-case hex: what `[routine_versions].[checksum]` holds.
    pub fn checksum(&self) -> String {
        Sha256::digest(self.sql.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn keyword(&self) -> &'static str {
        match self.kind {
            RoutineKind::Procedure => "PROCEDURE",
            RoutineKind::Function => "FUNCTION",
        }
    }

    /// The block of the migration script that applies this routine when its recorded
    /// checksum differs. Runs inside the script's transaction and under its lock.
    pub fn apply_block(&self, schema: &SchemaName) -> String {
        let s = schema.as_str();
        let name = self.name;
        let checksum = self.checksum();
        let definition = self.sql.trim().replace("{schema}", s);
        let create = format!("CREATE {} [{s}].[{name}]", self.keyword());
        let body = match self.kind {
            RoutineKind::Procedure => {
                let altered =
                    definition.replacen(&create, &format!("ALTER PROCEDURE [{s}].[{name}]"), 1);
                format!(
                    "    IF OBJECT_ID(N'[{s}].[{name}]', N'P') IS NULL\n\
                     \x20       EXEC(N'CREATE PROCEDURE [{s}].[{name}] AS RETURN 0;');\n\
                     \x20   EXEC(N'{}');\n",
                    altered.replace('\'', "''")
                )
            }
            RoutineKind::Function => format!(
                "    IF OBJECT_ID(N'[{s}].[{name}]') IS NOT NULL\n\
                 \x20       DROP FUNCTION [{s}].[{name}];\n\
                 \x20   EXEC(N'{}');\n",
                definition.replace('\'', "''")
            ),
        };
        format!(
            "\n-- ---- routine {name} ({file})\n\
             IF NOT EXISTS (SELECT 1 FROM [{s}].[routine_versions]\n\
             \x20              WHERE name = N'{name}' AND checksum = '{checksum}')\n\
             BEGIN\n\
             {body}\
             \x20   DELETE FROM [{s}].[routine_versions] WHERE name = N'{name}';\n\
             \x20   INSERT INTO [{s}].[routine_versions] (name, checksum, applied_at)\n\
             \x20   VALUES (N'{name}', '{checksum}', SYSUTCDATETIME());\n\
             END\n",
            file = self.file,
        )
    }
}

/// Whether `recorded` (name → checksum, as `[routine_versions]` holds them) lacks a routine or
/// holds an older text of one; the names that need applying.
pub fn stale(recorded: &std::collections::BTreeMap<String, String>) -> Vec<&'static str> {
    ROUTINES
        .iter()
        .filter(|r| recorded.get(r.name) != Some(&r.checksum()))
        .map(|r| r.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_defines_the_routine_it_is_listed_as() {
        for r in ROUTINES {
            let first = r
                .sql
                .lines()
                .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"))
                .unwrap();
            let head = format!("CREATE {} [{{schema}}].[{}]", r.keyword(), r.name);
            let rest = first.strip_prefix(head.as_str());
            assert!(
                rest.is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '('])),
                "{}: starts with {first:?}, expected {head}",
                r.file
            );
            assert_eq!(r.file, format!("{}.sql", r.name));
        }
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../migrations/sqlserver/routines"
        );
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let mut listed: Vec<&str> = ROUTINES.iter().map(|r| r.file).collect();
        listed.sort();
        assert_eq!(files, listed, "every file in routines/ is listed");
    }

    #[test]
    fn a_block_applies_its_routine_only_when_the_text_changed() {
        let schema = SchemaName::parse("jobs").unwrap();
        let enqueue = ROUTINES.iter().find(|r| r.name == "enqueue").unwrap();
        let block = enqueue.apply_block(&schema);
        assert_eq!(enqueue.checksum().len(), 64);
        assert!(block.contains(&format!("checksum = '{}'", enqueue.checksum())));
        assert!(block.contains("EXEC(N'CREATE PROCEDURE [jobs].[enqueue] AS RETURN 0;')"));
        assert!(block.contains("EXEC(N'ALTER PROCEDURE [jobs].[enqueue]"));
        assert!(!block.contains("{schema}"));
        let function = ROUTINES.iter().find(|r| r.name == "name_problem").unwrap();
        let block = function.apply_block(&schema);
        assert!(block.contains("DROP FUNCTION [jobs].[name_problem];"));
        assert!(block.contains("EXEC(N'CREATE FUNCTION [jobs].[name_problem]"));

        let mut recorded: std::collections::BTreeMap<String, String> = ROUTINES
            .iter()
            .map(|r| (r.name.to_string(), r.checksum()))
            .collect();
        assert!(stale(&recorded).is_empty());
        recorded.insert("enqueue".into(), "0".repeat(64));
        recorded.remove("uuid_text");
        assert_eq!(stale(&recorded), ["uuid_text", "enqueue"]);
    }
}

//! The store conformance suite on the embedded SQLite store, each case on its own file in a
//! temporary directory.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use deck_engine::conformance::{Connector, FaultInjector, FaultTable, StoreFactory};
use deck_engine::{Store, StoreOptions, StoreResult};
use tempfile::TempDir;

struct SqliteFile {
    // Kept alive for the whole test: dropping it deletes the database.
    _dir: TempDir,
    path: PathBuf,
}

/// One database file, shared by every handle of a test.
#[derive(Clone)]
struct Sqlite(Arc<SqliteFile>);

impl Sqlite {
    fn path(&self) -> &str {
        self.0.path.to_str().expect("temporary paths are UTF-8")
    }
}

#[async_trait]
impl Connector for Sqlite {
    async fn connect(&self) -> StoreResult<Arc<dyn Store>> {
        deck_engine::store::sqlite::open(self.path(), &StoreOptions::default()).await
    }
}

/// Refuses inserts with a trigger on the table, so the failure happens inside the store's
/// own transaction, after its earlier statements ran.
#[async_trait]
impl FaultInjector for Sqlite {
    async fn fail_inserts(&self, table: FaultTable, job_type: &str) {
        let table_name = match table {
            FaultTable::Hot => "jobs",
            FaultTable::Archive => "archive",
            FaultTable::Dlq => "dlq",
        };
        let conn = rusqlite::Connection::open(self.path()).expect("open the database file");
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        let trigger = format!(
            "CREATE TRIGGER IF NOT EXISTS fail_{table_name}_{job_type} BEFORE INSERT ON {table_name} \
             WHEN NEW.job_type = '{job_type}' \
             BEGIN SELECT RAISE(ABORT, 'injected fault'); END"
        );
        conn.execute_batch(&trigger)
            .expect("install the fault trigger");
    }
}

async fn sqlite_factory() -> Option<StoreFactory> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("deck.db");
    let file = Sqlite(Arc::new(SqliteFile { _dir: dir, path }));
    let store = file.connect().await.expect("open a fresh SQLite store");
    Some(StoreFactory::new(store, file.clone()).with_faults(file))
}

deck_engine::store_conformance_tests!(sqlite_factory);

//! Read connections. WAL lets readers run beside the writer without blocking it; reads run
//! on tokio's blocking pool so the async threads never wait on SQLite.

use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use crate::error::{StoreError, StoreResult};
use crate::store::StoreOptions;

use super::connection::open_connection;
use super::file_identity::FileIdentity;

/// Idle read connections kept open; more are opened under load and closed after.
const IDLE_READERS: usize = 4;

pub(crate) struct Readers {
    path: String,
    options: StoreOptions,
    idle: Mutex<Vec<Connection>>,
    /// Once the file is gone, reads fail too (they would show the old file), and a new
    /// connection must never create an empty file at the old path.
    identity: Arc<FileIdentity>,
}

impl Readers {
    #[cfg(test)]
    pub(crate) fn new(path: String, options: StoreOptions, first: Connection) -> Arc<Readers> {
        Self::watching(path, options, first, Arc::default())
    }

    /// Readers that stop once `identity` finds the database file deleted or replaced.
    pub(crate) fn watching(
        path: String,
        options: StoreOptions,
        first: Connection,
        identity: Arc<FileIdentity>,
    ) -> Arc<Readers> {
        Arc::new(Readers {
            path,
            options,
            idle: Mutex::new(vec![first]),
            identity,
        })
    }

    fn take(&self) -> StoreResult<Connection> {
        self.identity.ensure()?;
        let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        match pooled {
            Some(conn) => Ok(conn),
            None => {
                self.identity.check()?;
                open_connection(&self.path, &self.options)
            }
        }
    }

    fn give_back(&self, conn: Connection) {
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < IDLE_READERS
        {
            idle.push(conn);
        }
    }

    /// Run a read on a pooled connection off the async threads.
    pub(crate) async fn read<T, F>(self: &Arc<Self>, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let readers = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let conn = readers.take()?;
            let outcome = work(&conn);
            // A failed read may leave a statement mid-transaction; never pool such a connection.
            if conn.is_autocommit() {
                readers.give_back(conn);
            }
            outcome
        })
        .await
        .map_err(|e| StoreError::database("read", format!("read task failed: {e}"), false))?
    }
}

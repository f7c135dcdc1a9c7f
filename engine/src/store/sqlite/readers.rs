//! Read connections. WAL lets readers run beside the writer without blocking it; reads run
//! on tokio's blocking pool so the async threads never wait on SQLite.
//!
//! The pool is bounded: at most `size` connections, each opened on first need and kept
//! for the life of the store. A read waits for a free connection (first come, first
//! served, without holding a thread) for at most `wait`, then fails as busy. The pool used
//! to keep 4 idle connections and open one more for every further concurrent read, closing
//! it afterwards: under 50 concurrent HTTP reads nearly every read opened a connection
//! (file, locks, shared-memory map, pragmas, schema parse, statement cache cold) and closed
//! it, and the drain beside it fell to a few percent of its rate.
//!
//! The runtime's own reads (a large claim's rows, read back after it committed) have a
//! connection of their own: they never queue behind console and API reads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::Semaphore;

use crate::error::{StoreError, StoreResult};
use crate::store::StoreOptions;

use super::connection::open_connection;
use super::file_identity::FileIdentity;

/// How long a read waits for a free connection before it is refused as busy. Long enough
/// that a burst queues; short enough that an overloaded server answers "busy" (HTTP 503
/// with `Retry-After`) rather than hanging.
const READ_WAIT: Duration = Duration::from_secs(5);

pub(crate) struct Readers {
    path: String,
    options: StoreOptions,
    size: usize,
    wait: Duration,
    /// One permit per connection the pool may have; held for the whole read.
    permits: Arc<Semaphore>,
    idle: Mutex<Vec<Connection>>,
    /// The runtime's lane; `None` until first used (or after a failed read left it unusable).
    runtime: Arc<tokio::sync::Mutex<Option<Connection>>>,
    /// Connections opened so far, both lanes (tests hold the pool to its bound with it).
    opened: AtomicUsize,
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
        let size = options.sqlite_readers.max(1) as usize;
        Readers::with_limits(path, options, first, identity, size, READ_WAIT)
    }

    pub(crate) fn with_limits(
        path: String,
        options: StoreOptions,
        first: Connection,
        identity: Arc<FileIdentity>,
        size: usize,
        wait: Duration,
    ) -> Arc<Readers> {
        let size = size.max(1);
        Arc::new(Readers {
            path,
            options,
            size,
            wait,
            permits: Arc::new(Semaphore::new(size)),
            idle: Mutex::new(vec![first]),
            runtime: Arc::new(tokio::sync::Mutex::new(None)),
            opened: AtomicUsize::new(1),
            identity,
        })
    }

    fn open(&self) -> StoreResult<Connection> {
        self.identity.check()?;
        let conn = open_connection(&self.path, &self.options)?;
        self.opened.fetch_add(1, Ordering::Relaxed);
        Ok(conn)
    }

    /// A connection for the holder of a permit: there is one idle, or fewer than `size`
    /// exist and this opens one.
    fn take(&self) -> StoreResult<Connection> {
        self.identity.ensure()?;
        let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        match pooled {
            Some(conn) => Ok(conn),
            None => self.open(),
        }
    }

    fn give_back(&self, conn: Connection) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(conn);
        }
    }

    fn busy(&self) -> StoreError {
        StoreError::database(
            "read",
            format!(
                "all {} reader connections stayed busy for {} ms: more reads arrive than \
                 the store answers (raise store.sqlite_readers, or read less often)",
                self.size,
                self.wait.as_millis()
            ),
            true,
        )
    }

    /// Run a read on a pooled connection off the async threads, waiting for a free one.
    pub(crate) async fn read<T, F>(self: &Arc<Self>, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let permit = match tokio::time::timeout(
            self.wait,
            Arc::clone(&self.permits).acquire_owned(),
        )
        .await
        {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Err(StoreError::Closed),
            Err(_) => return Err(self.busy()),
        };
        let readers = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let conn = readers.take()?;
            let outcome = work(&conn);
            // A failed read may leave a statement mid-transaction; never pool such a
            // connection (its permit lets the next read open a fresh one).
            if conn.is_autocommit() {
                readers.give_back(conn);
            }
            drop(permit);
            outcome
        })
        .await
        .map_err(|e| StoreError::database("read", format!("read task failed: {e}"), false))?
    }

    /// Run one of the runtime's reads on its own connection, never behind pooled reads.
    pub(crate) async fn read_for_runtime<T, F>(self: &Arc<Self>, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let mut lane = Arc::clone(&self.runtime).lock_owned().await;
        let readers = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            readers.identity.ensure()?;
            let conn = match lane.take() {
                Some(conn) => conn,
                None => readers.open()?,
            };
            let outcome = work(&conn);
            if conn.is_autocommit() {
                *lane = Some(conn);
            }
            outcome
        })
        .await
        .map_err(|e| StoreError::database("read", format!("read task failed: {e}"), false))?
    }

    #[cfg(test)]
    pub(crate) fn opened(&self) -> usize {
        self.opened.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::super::connection::db_err;
    use super::*;

    fn pool(dir: &tempfile::TempDir, size: usize, wait: Duration) -> Arc<Readers> {
        let path = dir.path().join("deck.db").to_str().unwrap().to_string();
        let options = StoreOptions::default();
        let first = open_connection(&path, &options).unwrap();
        Readers::with_limits(path, options, first, Arc::default(), size, wait)
    }

    /// Start a read that holds its connection until `release` is sent; returns once it runs.
    async fn hold(readers: &Arc<Readers>) -> (mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
        let (release, released) = mpsc::channel::<()>();
        let (running, mut is_running) = tokio::sync::mpsc::unbounded_channel::<()>();
        let readers = Arc::clone(readers);
        let task = tokio::spawn(async move {
            readers
                .read(move |conn| {
                    conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))
                        .map_err(db_err("test"))?;
                    let _ = running.send(());
                    let _ = released.recv();
                    Ok(())
                })
                .await
                .unwrap();
        });
        is_running.recv().await.unwrap();
        (release, task)
    }

    async fn select_one(readers: &Arc<Readers>) -> StoreResult<i64> {
        readers
            .read(|conn| {
                conn.query_row("SELECT 1", [], |r| r.get(0))
                    .map_err(db_err("test"))
            })
            .await
    }

    #[tokio::test]
    async fn a_read_beyond_the_pool_waits_and_is_refused_as_busy_past_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let readers = pool(&dir, 2, Duration::from_millis(50));
        let (release_a, a) = hold(&readers).await;
        let (release_b, b) = hold(&readers).await;

        // Both connections are taken: a third read must not open one of its own.
        let err = select_one(&readers).await.unwrap_err();
        assert!(err.is_transient(), "busy is worth retrying: {err}");
        assert!(err.to_string().contains("busy"), "{err}");
        assert_eq!(readers.opened(), 2, "the pool never grows past its size");

        release_a.send(()).unwrap();
        release_b.send(()).unwrap();
        a.await.unwrap();
        b.await.unwrap();
        assert_eq!(select_one(&readers).await.unwrap(), 1);
        assert_eq!(readers.opened(), 2, "connections are kept, not reopened");
    }

    #[tokio::test]
    async fn a_waiting_read_runs_as_soon_as_a_connection_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let readers = pool(&dir, 1, Duration::from_secs(60));
        let (release, holder) = hold(&readers).await;
        let waiting = tokio::spawn({
            let readers = Arc::clone(&readers);
            async move { select_one(&readers).await }
        });
        // On this single-threaded runtime one yield runs the new task up to its wait.
        tokio::task::yield_now().await;
        release.send(()).unwrap();
        holder.await.unwrap();
        assert_eq!(waiting.await.unwrap().unwrap(), 1);
        assert_eq!(readers.opened(), 1);
    }

    #[tokio::test]
    async fn the_runtime_lane_does_not_queue_behind_pooled_reads() {
        let dir = tempfile::tempdir().unwrap();
        let readers = pool(&dir, 1, Duration::from_secs(60));
        let (release, holder) = hold(&readers).await;
        let n: i64 = readers
            .read_for_runtime(|conn| {
                conn.query_row("SELECT 2", [], |r| r.get(0))
                    .map_err(db_err("test"))
            })
            .await
            .unwrap();
        assert_eq!(n, 2);
        release.send(()).unwrap();
        holder.await.unwrap();
    }
}

//! The single writer: one thread owns the write connection and group-commits.
//!
//! SQLite has one writer at a time, so every transition goes through this thread. It takes
//! every command waiting in the channel and runs them in ONE `BEGIN IMMEDIATE` transaction,
//! each inside its own SAVEPOINT: a failing command rolls back only itself (its caller gets
//! the error) while the others commit. Callers hear back only after the COMMIT, so a reply
//! always means "durable" (with `synchronous = FULL`). One fsync then covers many commands,
//! which is what makes the completion path fast.
//!
//! With `synchronous = FULL` the fsync is pipelined: the writer connection runs with
//! `NORMAL` (commit = WAL frames written, no fsync) and hands each committed group to a sync
//! thread, which fsyncs the WAL file and only then replies to the group's durable commands.
//! Meanwhile the writer already runs the next group, and one fsync covers every group that
//! committed while the previous one was in flight. A reply still means "on disk": the WAL is
//! appended in order, so syncing it after a commit makes that commit (and every earlier one)
//! durable. Checkpoints are unaffected (`NORMAL` syncs the WAL before each checkpoint and the
//! database file after it). Readers (the console, `Engine::wait`, other processes) may see a
//! commit up to one fsync before it is durable; a power cut in that moment loses it like any
//! unfinished work, which at-least-once delivery covers.
//!
//! Lease commands (claim, mark processing, heartbeat, release) do not wait for that fsync:
//! losing one in a power cut only puts a job back to an earlier, always-safe state (pending,
//! or fetched and later rescued) — delivery is at-least-once anyway. This keeps the fsync of
//! an enqueue off the enqueue → start path.

use std::fs::{File, OpenOptions};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::error::{StoreError, StoreResult};

use super::connection::db_err;

/// Commands folded into one transaction at most; bounds how long the write lock is held.
const MAX_GROUP: usize = 256;

trait WriteCommand: Send {
    /// Whether the commit carrying this command must be synced to disk before replying.
    fn durable(&self) -> bool;
    /// Run inside the open transaction; true when the command succeeded.
    fn run(&mut self, conn: &Connection) -> bool;
    /// Reply once the transaction's fate is known (`Err` = the commit itself failed).
    fn finish(self: Box<Self>, commit: Result<(), &StoreError>);
}

struct Command<T, F> {
    operation: &'static str,
    durable: bool,
    work: Option<F>,
    outcome: Option<StoreResult<T>>,
    reply: oneshot::Sender<StoreResult<T>>,
}

impl<T, F> WriteCommand for Command<T, F>
where
    T: Send,
    F: FnOnce(&Connection) -> StoreResult<T> + Send,
{
    fn durable(&self) -> bool {
        self.durable
    }

    fn run(&mut self, conn: &Connection) -> bool {
        let Some(work) = self.work.take() else {
            return false;
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| work(conn))).unwrap_or_else(|_| {
            Err(StoreError::database(
                self.operation,
                "internal error: the operation panicked and was rolled back",
                false,
            ))
        });
        let ok = outcome.is_ok();
        self.outcome = Some(outcome);
        ok
    }

    fn finish(self: Box<Self>, commit: Result<(), &StoreError>) {
        let outcome = match (commit, self.outcome) {
            (_, Some(Err(e))) => Err(e),
            (Ok(()), Some(ok)) => ok,
            (Err(e), Some(Ok(_))) => Err(StoreError::database(self.operation, e, e.is_transient())),
            (Err(e), None) => Err(StoreError::database(self.operation, e, e.is_transient())),
            (Ok(()), None) => Err(StoreError::Closed),
        };
        // The caller may have given up waiting (dropped future); nothing to do then.
        let _ = self.reply.send(outcome);
    }
}

/// Handle to the writer thread. Dropping the last handle lets the thread finish the queued
/// commands and exit.
pub(crate) struct Writer {
    tx: mpsc::Sender<Box<dyn WriteCommand>>,
}

impl Writer {
    /// `wal_sync`: the WAL file to fsync after each commit before durable commands hear
    /// back (`synchronous = FULL`); the connection must run with `synchronous = NORMAL`.
    /// `None` (`NORMAL` configured): nothing is synced per commit.
    pub(crate) fn spawn(conn: Connection, wal_sync: Option<PathBuf>) -> std::io::Result<Writer> {
        let (tx, rx) = mpsc::channel::<Box<dyn WriteCommand>>();
        let syncer = wal_sync.map(Syncer::spawn).transpose()?;
        thread::Builder::new()
            .name("deck-sqlite-writer".into())
            .spawn(move || run(conn, rx, syncer))?;
        Ok(Writer { tx })
    }

    /// Run `work` in the next group transaction and wait for the durable commit.
    pub(crate) async fn write<T, F>(&self, operation: &'static str, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.submit(operation, true, work).await
    }

    /// Run a lease command (claim, mark processing, heartbeat, release): its commit need not
    /// be synced on its own (see the module docs).
    pub(crate) async fn write_lease<T, F>(&self, operation: &'static str, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.submit(operation, false, work).await
    }

    async fn submit<T, F>(&self, operation: &'static str, durable: bool, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let command = Command {
            operation,
            durable,
            work: Some(work),
            outcome: None,
            reply,
        };
        self.tx
            .send(Box::new(command))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

fn run(conn: Connection, rx: mpsc::Receiver<Box<dyn WriteCommand>>, syncer: Option<Syncer>) {
    while let Ok(first) = rx.recv() {
        let mut group = Vec::with_capacity(16);
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(cmd) => group.push(cmd),
                Err(_) => break,
            }
        }
        let Some(committed) = run_group(&conn, group) else {
            continue;
        };
        match &syncer {
            Some(syncer) => {
                let (durable, lease): (Vec<_>, Vec<_>) =
                    committed.into_iter().partition(|cmd| cmd.durable());
                for cmd in lease {
                    cmd.finish(Ok(()));
                }
                if !durable.is_empty() {
                    syncer.sync_then_finish(durable);
                }
            }
            None => {
                for cmd in committed {
                    cmd.finish(Ok(()));
                }
            }
        }
    }
}

/// The thread that fsyncs the WAL after commits and then replies to durable commands.
struct Syncer {
    tx: mpsc::Sender<Vec<Box<dyn WriteCommand>>>,
}

impl Syncer {
    fn spawn(wal: PathBuf) -> std::io::Result<Syncer> {
        let (tx, rx) = mpsc::channel::<Vec<Box<dyn WriteCommand>>>();
        thread::Builder::new()
            .name("deck-sqlite-sync".into())
            .spawn(move || sync_loop(&wal, rx))?;
        Ok(Syncer { tx })
    }

    fn sync_then_finish(&self, committed: Vec<Box<dyn WriteCommand>>) {
        if let Err(mpsc::SendError(committed)) = self.tx.send(committed) {
            let err = StoreError::database("sync", "the WAL sync thread stopped", false);
            for cmd in committed {
                cmd.finish(Err(&err));
            }
        }
    }
}

fn sync_loop(wal: &Path, rx: mpsc::Receiver<Vec<Box<dyn WriteCommand>>>) {
    // Opened once: the writer's connection stays open, so SQLite never deletes or replaces
    // the WAL file while this store runs (it only rewinds or truncates it in place).
    let mut file: Option<File> = None;
    while let Ok(mut batch) = rx.recv() {
        while let Ok(more) = rx.try_recv() {
            batch.extend(more);
        }
        let synced = sync_wal(&mut file, wal);
        let outcome = synced.map_err(|e| {
            StoreError::database(
                "sync",
                format!("could not fsync {}: {e}", wal.display()),
                false,
            )
        });
        for cmd in batch {
            cmd.finish(outcome.as_ref().map(|_| ()));
        }
    }
}

fn sync_wal(file: &mut Option<File>, wal: &Path) -> std::io::Result<()> {
    if file.is_none() {
        *file = Some(OpenOptions::new().read(true).open(wal)?);
    }
    match file {
        Some(f) => f.sync_data(),
        None => Ok(()),
    }
}

/// Run one group in one transaction. The committed commands come back (not yet replied to);
/// on failure every command has had its answer.
fn run_group(
    conn: &Connection,
    mut group: Vec<Box<dyn WriteCommand>>,
) -> Option<Vec<Box<dyn WriteCommand>>> {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let err = db_err("begin transaction")(e);
        for cmd in group {
            cmd.finish(Err(&err));
        }
        return None;
    }
    let single = group.len() == 1;
    for cmd in group.iter_mut() {
        // A lone command needs no savepoint: on failure the whole transaction rolls back.
        if single {
            if !cmd.run(conn) {
                let _ = conn.execute_batch("ROLLBACK");
                for cmd in group {
                    cmd.finish(Ok(()));
                }
                return None;
            }
            continue;
        }
        if let Err(e) = conn.execute_batch("SAVEPOINT deck_cmd") {
            abort(conn, group, db_err("savepoint")(e));
            return None;
        }
        let ok = cmd.run(conn);
        let end = if ok {
            conn.execute_batch("RELEASE deck_cmd")
        } else {
            conn.execute_batch("ROLLBACK TO deck_cmd; RELEASE deck_cmd")
        };
        if let Err(e) = end {
            abort(conn, group, db_err("savepoint")(e));
            return None;
        }
    }
    match conn.execute_batch("COMMIT") {
        Ok(()) => Some(group),
        Err(e) => {
            abort(conn, group, db_err("commit")(e));
            None
        }
    }
}

fn abort(conn: &Connection, group: Vec<Box<dyn WriteCommand>>, err: StoreError) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    for cmd in group {
        cmd.finish(Err(&err));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wal_connection(dir: &tempfile::TempDir) -> Connection {
        let conn = Connection::open(dir.path().join("w.db")).unwrap();
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .unwrap();
        conn.execute_batch("PRAGMA synchronous = NORMAL; CREATE TABLE t (x INTEGER)")
            .unwrap();
        conn
    }

    fn insert(conn: &Connection) -> StoreResult<()> {
        conn.execute("INSERT INTO t VALUES (1)", [])
            .map(|_| ())
            .map_err(db_err("insert"))
    }

    #[tokio::test]
    async fn durable_writes_answer_after_the_wal_sync_and_leases_do_not_wait_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join("w.db-wal");
        let writer = Writer::spawn(wal_connection(&dir), Some(wal)).unwrap();
        writer.write("insert", insert).await.unwrap();
        writer.write_lease("insert", insert).await.unwrap();

        // A WAL that cannot be synced: the durable write reports it, the lease is answered
        // at commit.
        let dir2 = tempfile::tempdir().unwrap();
        let missing = dir2.path().join("no-such-dir").join("w.db-wal");
        let writer = Writer::spawn(wal_connection(&dir2), Some(missing)).unwrap();
        let err = writer.write("insert", insert).await.unwrap_err();
        assert!(err.to_string().contains("could not fsync"), "{err}");
        writer.write_lease("insert", insert).await.unwrap();
    }
}

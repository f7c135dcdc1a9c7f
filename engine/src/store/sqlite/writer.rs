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
//!
//! Before each group the writer checks that the database file is still the one it opened
//! (`FileIdentity`), and after it records how the group went (`WriteHealthTracker`): a
//! storage fault (disk full, I/O error) marks writes as failing until a later group commits
//! a change.

use std::fs::{File, OpenOptions};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::thread;

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::error::{StoreError, StoreResult};
use crate::store::health::WriteHealthTracker;

use super::connection::db_err;
use super::file_identity::FileIdentity;

/// Commands folded into one transaction at most; bounds how long the write lock is held.
const MAX_GROUP: usize = 256;

trait WriteCommand: Send {
    /// Whether the commit carrying this command must be synced to disk before replying.
    fn durable(&self) -> bool;
    /// Run inside the open transaction; true when the command succeeded.
    fn run(&mut self, conn: &Connection) -> bool;
    /// The command's own failure, when it is a storage fault (disk full, I/O error).
    fn storage_fault(&self) -> Option<&StoreError>;
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

    fn storage_fault(&self) -> Option<&StoreError> {
        match &self.outcome {
            Some(Err(e)) if e.is_storage_fault() => Some(e),
            _ => None,
        }
    }

    fn finish(self: Box<Self>, commit: Result<(), &StoreError>) {
        let outcome = match (commit, self.outcome) {
            (_, Some(Err(e))) => Err(e),
            (Ok(()), Some(ok)) => ok,
            (Err(e), _) => Err(group_failure(self.operation, e)),
            (Ok(()), None) => Err(StoreError::Closed),
        };
        // The caller may have given up waiting (dropped future); nothing to do then.
        let _ = self.reply.send(outcome);
    }
}

/// The group's failure as this command's error, keeping storage faults typed (callers and
/// the API tell "the disk is full" from a failed statement).
fn group_failure(operation: &'static str, e: &StoreError) -> StoreError {
    match e {
        StoreError::Storage { message, help, .. } => StoreError::Storage {
            operation,
            message: message.clone(),
            help: help.clone(),
        },
        StoreError::FileReplaced { path, change } => StoreError::FileReplaced {
            path: path.clone(),
            change,
        },
        other => StoreError::database(operation, other, other.is_transient()),
    }
}

/// A command's storage fault, kept for the group (its own caller gets the original).
fn copy_fault(e: &StoreError) -> StoreError {
    let operation = match e {
        StoreError::Storage { operation, .. } => operation,
        _ => "write",
    };
    group_failure(operation, e)
}

/// What the writer checks before each group and reports after it; shared with the store.
#[derive(Clone, Default)]
pub(crate) struct Watch {
    pub(crate) identity: Arc<FileIdentity>,
    pub(crate) health: Arc<WriteHealthTracker>,
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
    pub(crate) fn spawn(
        conn: Connection,
        wal_sync: Option<PathBuf>,
        watch: Watch,
    ) -> std::io::Result<Writer> {
        let (tx, rx) = mpsc::channel::<Box<dyn WriteCommand>>();
        let syncer = wal_sync
            .map(|wal| Syncer::spawn(wal, watch.health.clone()))
            .transpose()?;
        thread::Builder::new()
            .name("deck-sqlite-writer".into())
            .spawn(move || run(conn, rx, syncer, watch))?;
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

fn run(
    conn: Connection,
    rx: mpsc::Receiver<Box<dyn WriteCommand>>,
    syncer: Option<Syncer>,
    watch: Watch,
) {
    while let Ok(first) = rx.recv() {
        let mut group = Vec::with_capacity(16);
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(cmd) => group.push(cmd),
                Err(_) => break,
            }
        }
        if let Err(e) = watch.identity.check() {
            for cmd in group {
                cmd.finish(Err(&e));
            }
            continue;
        }
        let Some(committed) = run_group(&conn, group, &watch.health) else {
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
    fn spawn(wal: PathBuf, health: Arc<WriteHealthTracker>) -> std::io::Result<Syncer> {
        let (tx, rx) = mpsc::channel::<Vec<Box<dyn WriteCommand>>>();
        thread::Builder::new()
            .name("deck-sqlite-sync".into())
            .spawn(move || sync_loop(&wal, rx, &health))?;
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

fn sync_loop(
    wal: &Path,
    rx: mpsc::Receiver<Vec<Box<dyn WriteCommand>>>,
    health: &WriteHealthTracker,
) {
    // Opened once: the writer's connection stays open, so SQLite never deletes or replaces
    // the WAL file while this store runs (it only rewinds or truncates it in place).
    let mut file: Option<File> = None;
    while let Ok(mut batch) = rx.recv() {
        while let Ok(more) = rx.try_recv() {
            batch.extend(more);
        }
        let synced = sync_wal(&mut file, wal);
        let outcome = synced.map_err(|e| StoreError::Storage {
            operation: "sync",
            message: format!("could not fsync {}: {e}", wal.display()),
            help: "the disk or file system holding the database failed to flush it (see the \
                   kernel log); deck is ready again once a write reaches the disk"
                .into(),
        });
        if let Err(e) = &outcome {
            health.record_failure(e);
        }
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

/// What one group did, for the store's health.
enum GroupOutcome {
    /// A command changed the database and the group committed.
    Wrote,
    /// A command, the transaction or the commit failed at the storage level.
    StorageFault(StoreError),
    /// Nothing was written and nothing failed at the storage level (an idle claim, a
    /// rejected request).
    NoChange,
}

impl GroupOutcome {
    /// Recorded before any command of the group hears back, so a caller that got an answer
    /// sees the health that answer implies.
    fn record(self, health: &WriteHealthTracker) {
        match self {
            GroupOutcome::Wrote => health.record_success(),
            GroupOutcome::StorageFault(e) => health.record_failure(&e),
            GroupOutcome::NoChange => {}
        }
    }
}

/// Run one group in one transaction. The committed commands come back (not yet replied to,
/// the group's outcome recorded); on failure every command has had its answer.
fn run_group(
    conn: &Connection,
    mut group: Vec<Box<dyn WriteCommand>>,
    health: &WriteHealthTracker,
) -> Option<Vec<Box<dyn WriteCommand>>> {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let err = db_err("begin transaction")(e);
        abort(conn, group, err, health);
        return None;
    }
    let single = group.len() == 1;
    let mut wrote = false;
    let mut fault: Option<StoreError> = None;
    for cmd in group.iter_mut() {
        // Only a command that succeeded keeps its changes: one rolled back to its savepoint
        // may have changed rows before it failed.
        let changes = conn.total_changes();
        // A lone command needs no savepoint: on failure the whole transaction rolls back.
        if single {
            if !cmd.run(conn) {
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
                if let Some(e) = cmd.storage_fault() {
                    health.record_failure(e);
                }
                for cmd in group {
                    cmd.finish(Ok(()));
                }
                return None;
            }
            wrote |= conn.total_changes() != changes;
            continue;
        }
        if let Err(e) = conn.execute_batch("SAVEPOINT deck_cmd") {
            let err = db_err("savepoint")(e);
            abort(conn, group, err, health);
            return None;
        }
        if cmd.run(conn) {
            wrote |= conn.total_changes() != changes;
            if let Err(e) = conn.execute_batch("RELEASE deck_cmd") {
                let err = db_err("savepoint")(e);
                abort(conn, group, err, health);
                return None;
            }
            continue;
        }
        if fault.is_none() {
            fault = cmd.storage_fault().map(copy_fault);
        }
        if conn.is_autocommit() {
            // On a full disk or an I/O error SQLite may roll back the whole transaction, not
            // just the statement: nothing of the group stands, and the commands that ran
            // before learn why.
            let err = fault.take().unwrap_or_else(|| {
                StoreError::database(
                    "write",
                    "the database rolled back the transaction after a command failed",
                    false,
                )
            });
            abort(conn, group, err, health);
            return None;
        }
        if let Err(e) = conn.execute_batch("ROLLBACK TO deck_cmd; RELEASE deck_cmd") {
            let err = db_err("savepoint")(e);
            abort(conn, group, err, health);
            return None;
        }
    }
    match conn.execute_batch("COMMIT") {
        Ok(()) => {
            // A group where some command hit the full disk counts as failing even when others
            // fit: readiness should not flap with the mix of requests.
            match fault {
                Some(e) => GroupOutcome::StorageFault(e),
                None if wrote => GroupOutcome::Wrote,
                None => GroupOutcome::NoChange,
            }
            .record(health);
            Some(group)
        }
        Err(e) => {
            let err = db_err("commit")(e);
            abort(conn, group, err, health);
            None
        }
    }
}

fn abort(
    conn: &Connection,
    group: Vec<Box<dyn WriteCommand>>,
    err: StoreError,
    health: &WriteHealthTracker,
) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    if err.is_storage_fault() {
        health.record_failure(&err);
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
        let writer = Writer::spawn(wal_connection(&dir), Some(wal), Watch::default()).unwrap();
        writer.write("insert", insert).await.unwrap();
        writer.write_lease("insert", insert).await.unwrap();

        // A WAL that cannot be synced: the durable write reports it, the lease is answered
        // at commit.
        let dir2 = tempfile::tempdir().unwrap();
        let missing = dir2.path().join("no-such-dir").join("w.db-wal");
        let writer = Writer::spawn(wal_connection(&dir2), Some(missing), Watch::default()).unwrap();
        let err = writer.write("insert", insert).await.unwrap_err();
        assert!(err.to_string().contains("could not fsync"), "{err}");
        writer.write_lease("insert", insert).await.unwrap();
    }
}

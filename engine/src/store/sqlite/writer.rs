//! The single writer: one thread owns the write connection and group-commits.
//!
//! SQLite has one writer at a time, so every transition goes through this thread. It takes
//! every command waiting in the channel and runs them in ONE `BEGIN IMMEDIATE` transaction,
//! each inside its own SAVEPOINT: a failing command rolls back only itself (its caller gets
//! the error) while the others commit. Callers hear back only after the COMMIT, so a reply
//! always means "durable" (with `synchronous = FULL`). One fsync then covers many commands,
//! which is what makes the completion path fast.
//!
//! Lease commands (claim, mark processing, heartbeat, release) may commit without an fsync
//! when a group holds nothing else: losing one in a power cut only puts a job back to an
//! earlier, always-safe state (pending, or fetched and later rescued) — delivery is
//! at-least-once anyway. WAL frames are synced in order, so the next durable commit (an
//! enqueue or a completion) syncs every earlier lease commit with it. This takes two of the
//! three fsyncs off the enqueue → start path.

use std::panic::{AssertUnwindSafe, catch_unwind};
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
    /// `full_sync`: the connection runs with `synchronous = FULL`, so lease-only groups may
    /// relax it to `NORMAL` (with `NORMAL` configured, nothing is ever synced per commit).
    pub(crate) fn spawn(conn: Connection, full_sync: bool) -> std::io::Result<Writer> {
        let (tx, rx) = mpsc::channel::<Box<dyn WriteCommand>>();
        thread::Builder::new()
            .name("deck-sqlite-writer".into())
            .spawn(move || run(conn, rx, full_sync))?;
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

fn run(conn: Connection, rx: mpsc::Receiver<Box<dyn WriteCommand>>, full_sync: bool) {
    let mut synced = full_sync;
    while let Ok(first) = rx.recv() {
        let mut group = Vec::with_capacity(16);
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(cmd) => group.push(cmd),
                Err(_) => break,
            }
        }
        if full_sync {
            let want_sync = group.iter().any(|cmd| cmd.durable());
            if want_sync != synced {
                let pragma = if want_sync {
                    "PRAGMA synchronous = FULL"
                } else {
                    "PRAGMA synchronous = NORMAL"
                };
                if let Err(e) = conn.execute_batch(pragma) {
                    let err = db_err("set synchronous")(e);
                    for cmd in group {
                        cmd.finish(Err(&err));
                    }
                    continue;
                }
                synced = want_sync;
            }
        }
        run_group(&conn, group);
    }
}

fn run_group(conn: &Connection, mut group: Vec<Box<dyn WriteCommand>>) {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let err = db_err("begin transaction")(e);
        for cmd in group {
            cmd.finish(Err(&err));
        }
        return;
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
                return;
            }
            continue;
        }
        if let Err(e) = conn.execute_batch("SAVEPOINT deck_cmd") {
            abort(conn, group, db_err("savepoint")(e));
            return;
        }
        let ok = cmd.run(conn);
        let end = if ok {
            conn.execute_batch("RELEASE deck_cmd")
        } else {
            conn.execute_batch("ROLLBACK TO deck_cmd; RELEASE deck_cmd")
        };
        if let Err(e) = end {
            abort(conn, group, db_err("savepoint")(e));
            return;
        }
    }
    match conn.execute_batch("COMMIT") {
        Ok(()) => {
            for cmd in group {
                cmd.finish(Ok(()));
            }
        }
        Err(e) => abort(conn, group, db_err("commit")(e)),
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

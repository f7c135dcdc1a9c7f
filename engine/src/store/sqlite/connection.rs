//! Opening connections: pragmas, error mapping, and the schema bootstrap.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::error::{StoreError, StoreResult};
use crate::store::{SqliteSynchronous, StoreOptions};

/// Long enough that several `deck` processes sharing one file queue up behind each other's
/// write transactions instead of failing; short enough that a wedged writer is reported.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Statements are prepared once per connection and reused; the dynamic ones (filters,
/// sorts) are few in kind, so a generous cache keeps all of them.
const STATEMENT_CACHE: usize = 128;

/// Page cache per connection, in KiB. A store has up to seven connections (writer,
/// checkpointer, runtime reader, four pooled readers); at 32 MB each `deck serve` grew past
/// 260 MB of RSS while it drained a million jobs with the console open. The writer gains
/// too: SQLite scans the whole cache's hash table at a commit after a b-tree split (the
/// split parks a page under a scratch page number beyond the end of the file, which the
/// commit then evicts); with 32 MB that scan was ~5 % of the writer's time. Pages beyond
/// the cache come from the OS page cache, not the disk.
const PAGE_CACHE_KIB: u32 = 8_000;

/// Map a driver error. Busy and locked mean another connection holds the write lock for
/// longer than the busy timeout: safe to retry. A full disk, an I/O error or a file turned
/// read-only are storage faults: they say nothing about the request, and the store's health
/// reports them until a write succeeds again.
pub(crate) fn db_err(operation: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |err| {
        let code = err.sqlite_error_code();
        if let Some(help) = code.and_then(storage_help) {
            return StoreError::Storage {
                operation,
                message: err.to_string(),
                help: help.to_string(),
            };
        }
        let transient = matches!(
            code,
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        );
        StoreError::database(operation, err, transient)
    }
}

/// What fixes a storage fault; `None` for errors that are not one.
fn storage_help(code: ErrorCode) -> Option<&'static str> {
    match code {
        ErrorCode::DiskFull => Some(
            "free space on the disk that holds the database (or raise its quota); deck keeps \
             retrying and is ready again once a write succeeds",
        ),
        ErrorCode::SystemIoFailure => Some(
            "the disk or file system holding the database failed a read or write (see the \
             kernel log); deck is ready again once a write succeeds",
        ),
        ErrorCode::ReadOnly | ErrorCode::CannotOpen => Some(
            "the database file, its -wal and -shm files and their directory must stay \
             writable by the user running deck",
        ),
        _ => None,
    }
}

pub(crate) fn unavailable(path: &str, err: impl std::fmt::Display) -> StoreError {
    let dir = Path::new(path)
        .parent()
        .map(|p| p.display().to_string())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| ".".to_string());
    StoreError::Unavailable {
        url: format!("sqlite://{path}"),
        cause: err.to_string(),
        help: format!(
            "make sure the directory {dir:?} exists and this user can write it, \
             or pass --database sqlite://./deck.db"
        ),
    }
}

/// Open one connection with the store's pragmas. The file is created when missing.
pub(crate) fn open_connection(path: &str, options: &StoreOptions) -> StoreResult<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| unavailable(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| unavailable(path, e))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // Query planner stability: plans never depend on bound values. Without it SQLite
    // re-prepares a statement whenever a value it could plan on (the claim's `now`, a LIMIT)
    // changes, i.e. on nearly every call of the hot paths.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(|e| unavailable(path, e))?;
    let synchronous = match options.sqlite_synchronous {
        SqliteSynchronous::Full => "FULL",
        SqliteSynchronous::Normal => "NORMAL",
    };
    enable_wal(&conn, path)?;
    // No `wal_autocheckpoint` here: the writer hands its checkpoints to `checkpointer`.
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {synchronous};
         PRAGMA foreign_keys = OFF;
         PRAGMA temp_store = MEMORY;
         PRAGMA cache_size = -{PAGE_CACHE_KIB};"
    ))
    .map_err(|e| unavailable(path, e))?;
    Ok(conn)
}

/// `journal_mode = WAL` is persistent in the file; asking again is a cheap no-op. Switching a
/// fresh file needs a moment of exclusive access, and SQLite answers "database is locked"
/// without waiting out the busy timeout when another connection (another process starting
/// at the same moment) is opening it too. So retry until the busy timeout has passed.
fn enable_wal(conn: &Connection, path: &str) -> StoreResult<()> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(2);
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(unavailable(
                    path,
                    format!("the database refused WAL mode (journal_mode is {mode})"),
                ));
            }
            Err(e)
                if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => return Err(unavailable(path, e)),
        }
    }
}

//! Typed errors of the engine. Each variant carries what an operator needs to fix the cause;
//! the binary adds context and prints the chain.

use crate::model::{JobId, JobState};

/// `Clone` so one outcome can answer many callers (a shared telemetry snapshot).
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// Input was rejected before anything was written.
    #[error(transparent)]
    Invalid(#[from] ValidationError),

    /// The database URL or connection string cannot be used.
    #[error("cannot use database {url:?}: {cause}\n  help: {help}")]
    Config {
        url: String,
        cause: String,
        help: String,
    },

    /// The database could not be opened or reached.
    #[error("cannot open database {url:?}\n  cause: {cause}\n  help: {help}")]
    Unavailable {
        url: String,
        cause: String,
        help: String,
    },

    /// The schema is missing, too new, or not the shape this version expects.
    #[error("database schema problem: {problem}\n  help: {help}")]
    Schema { problem: String, help: String },

    /// No job with this id in the pillars the operation looks at.
    #[error("job {0} not found")]
    JobNotFound(JobId),

    /// No schedule has this name.
    #[error(
        "no schedule is named {0:?}\n  help: list the schedules (GET /api/v1/schedules) for their names"
    )]
    ScheduleNotFound(String),

    /// The job exists but is in a state where this operation makes no sense
    /// (editing a running job, resurrecting a pending one, ...).
    #[error("job {id} is {state}; cannot {action}")]
    InvalidState {
        id: JobId,
        state: JobState,
        action: &'static str,
    },

    /// Any other failure from the database driver. `transient` faults (busy, deadlock,
    /// throttling, broken connection) are safe to retry on idempotent paths.
    #[error("database error during {operation}: {message}")]
    Database {
        operation: &'static str,
        message: String,
        transient: bool,
    },

    /// The database refused to be written at the storage level: the disk is full, an I/O
    /// error, the file became read-only. Writes are expected to work again once the cause is
    /// fixed; the store's health (`Store::health`) reports it meanwhile.
    #[error("cannot write the database during {operation}: {message}\n  help: {help}")]
    Storage {
        operation: &'static str,
        message: String,
        help: String,
    },

    /// The database file was deleted or replaced by another file while the store had it
    /// open: whatever it wrote now would go to a file nobody will read again. The store
    /// refuses all work from then on; only a restart (which opens the current file) helps.
    #[error(
        "the database file {path:?} was {change} while deck was running; writes would be lost \
         with the old file\n  help: restart deck to open the current file"
    )]
    FileReplaced { path: String, change: &'static str },

    /// The store was closed (shutdown) while an operation was waiting.
    /// The write conflicts with state the store holds (e.g. a queue's other lag threshold).
    #[error("{message}")]
    Conflict {
        /// A stable name for the conflict (the API's error code).
        code: &'static str,
        /// The input field to change, when one is to blame.
        field: Option<&'static str>,
        message: String,
    },

    /// An operator action was applied but its audit row could not be written.
    #[error(
        "{action} was done, but its audit record could not be written: {cause}\n  help: the \
         change stands; fix the database, and note the action for the audit log by hand"
    )]
    Unaudited {
        action: String,
        cause: Box<StoreError>,
    },

    #[error("store is closed")]
    Closed,
}

impl StoreError {
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Database {
                transient: true,
                ..
            }
        )
    }

    /// The store can take no more work until the database's storage is fixed or deck
    /// restarts (see `Storage` and `FileReplaced`).
    pub fn is_storage_fault(&self) -> bool {
        matches!(
            self,
            StoreError::Storage { .. } | StoreError::FileReplaced { .. }
        )
    }

    pub fn database(operation: &'static str, err: impl std::fmt::Display, transient: bool) -> Self {
        StoreError::Database {
            operation,
            message: err.to_string(),
            transient,
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// What is wrong with a piece of input and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {problem} ({help})")]
pub struct ValidationError {
    /// The input field, as the API names it (`queue`, `payload`, `tags[2]`, ...).
    pub field: String,
    pub problem: String,
    pub help: String,
}

impl ValidationError {
    pub fn new(
        field: impl Into<String>,
        problem: impl Into<String>,
        help: impl Into<String>,
    ) -> Self {
        ValidationError {
            field: field.into(),
            problem: problem.into(),
            help: help.into(),
        }
    }
}

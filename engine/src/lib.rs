//! deck-engine: durable background jobs on SQL Server or an embedded SQLite file.
//!
//! Everything about jobs and nothing about HTTP: the model, the store contract and its
//! backends, the worker runtime, handlers and awaitable results.

pub mod attempts;
pub mod batch;
pub mod channel;
pub mod config;
/// The one behaviour suite every store must pass; above the stores, since it drives them
/// through the operations layer and the runtime's rescue as the engine does.
#[cfg(any(test, feature = "testing"))]
pub mod conformance;
pub mod coverage;
pub mod engine;
pub mod error;
pub mod events;
pub mod external;
pub mod fingerprint;
pub mod handler;
pub mod maintenance;
pub mod model;
pub mod ops;
pub mod query;
pub(crate) mod running;
pub mod runtime;
pub mod schedule;
pub mod store;
pub mod telemetry;
pub mod trace;
pub mod validation;
pub mod values;

pub use batch::{
    Batch, BatchCallback, BatchCallbacks, BatchCreated, BatchEvent, BatchId, BatchRequest,
};
pub use channel::WaitOutcome;
pub use config::{ConfigError, ConfigProblem, EngineConfig};
pub use coverage::{Untaken, untaken};
pub use engine::{EMBEDDED_ACTOR, Engine, EngineBuilder, EngineError, ShutdownReport};
pub use error::{StoreError, StoreResult};
pub use events::{EngineEvent, EventKind};
pub use fingerprint::{Fingerprint, FingerprintHead, ParseFingerprintError, fingerprint};
pub use handler::{
    HandlerError, HandlerOutcome, HandlerRegistry, JobContext, Middleware, Next, Route,
};
pub use model::*;
pub use ops::{BulkReport, BulkRun, BulkRunRequest, DeclareReport, Operations};
pub use query::*;
pub use running::{Progress, RunningJobInfo};
pub use runtime::{
    BreakerConfig, BreakerInfo, BreakerStateName, RetryPolicy, RuntimeCounters, RuntimeSnapshot,
};
pub use schedule::{
    FireOutcome, MisfirePolicy, OverlapPolicy, Schedule, ScheduleDefinition, ScheduleJob,
    ScheduleOrigin, ScheduleRun, ScheduleSpec,
};
pub use store::{Store, StoreHealth, StoreOptions, StoreReads, WriteFailure, open_store};
pub use telemetry::*;

//! The types the store contract speaks, in one list: `store/mod.rs` declares the traits with
//! them, and each implementation (`sqlite`, `sqlserver`, `interposed`) imports them from here
//! (`use crate::store::contract::*;`) rather than repeating the list.

pub(crate) use async_trait::async_trait;

pub(crate) use crate::batch::{Batch, BatchCreated, BatchId, BatchRequest};
pub(crate) use crate::error::StoreResult;
pub(crate) use crate::model::{
    Applied, AuditEntry, AuditFilter, CancelOutcome, ClaimRequest, Completion, EngineSettings,
    EnqueueOutcome, EnqueueRequest, HeartbeatReport, InstanceInfo, Job, JobEdit, JobId,
    NewAuditEntry, Pillar, PruneStep, QueueConfig, QueuePatch, RescueStep, Timestamp,
};
pub(crate) use crate::query::{
    BulkAction, BulkFilterStep, BulkPreview, BulkStep, JobCount, JobFilter, JobQuery, JobSummary,
    Page,
};
pub(crate) use crate::schedule::{
    FireOutcome, Schedule, ScheduleDefinition, ScheduleFire, ScheduleOrigin, ScheduleRun,
};
pub(crate) use crate::store::{Store, StoreHealth, StoreReads};
pub(crate) use crate::telemetry::{
    ErrorGroup, PendingGroup, QueueStats, RunTimeHistogram, Summary, ThroughputBucket,
};

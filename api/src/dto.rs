//! The API's request and response bodies. Engine types stay free of HTTP and OpenAPI
//! concerns; these mirror them with the wire names clients see, and convert both ways.
//!
//! Why these mirrors stay while the console uses the engine's types (breaker state, role,
//! runtime view) directly: each of these is the HTTP contract. It carries the OpenAPI schema
//! (`ToSchema`, the bounds clients are promised), the wire names and formats (ids as UUIDs,
//! payloads and results as real JSON values where the engine keeps text, snake-case states),
//! and it must not change when an engine type gains a field. A change here is a change of the
//! published API; a change of an engine type is not.

use chrono::{DateTime, Utc};
use deck_engine::attempts::{AttemptOutcome, AttemptRecord};
use deck_engine::{
    AttemptError, Continuation, ContinuationTrigger, EnqueueOutcome, EnqueueRequest, Job, JobEdit,
    JobState, QueueConfig, QueuePatch, QueueStats, RateLimit, Summary, UniqueState,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

pub mod admin;
pub mod batches;
pub mod job_lists;
pub mod schedules;

use super::error::ApiError;
use super::limits::{AnyJson, Name, Tag};
use super::wire::{
    integer, nullable_integer, nullable_object, objects, optional_integer, optional_object,
    present_bool, present_value,
};

// ---------------------------------------------------------------------------------- enqueue

/// One job to enqueue.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnqueueJob {
    /// Queue name.
    #[schema(value_type = Name, example = "default")]
    pub queue: String,
    /// Handler type key.
    #[serde(rename = "type")]
    #[schema(value_type = Name, example = "demo.echo")]
    pub job_type: String,
    /// Handed to the handler: any JSON value, at most 1 MiB as text. Absent means `null`.
    #[serde(default)]
    #[schema(value_type = AnyJson, example = json!({"hello": "world"}))]
    pub payload: Value,
    #[serde(default)]
    #[schema(value_type = Vec<Tag>)]
    pub tags: Vec<String>,
    /// Higher runs first.
    #[serde(default, deserialize_with = "integer")]
    pub priority: i32,
    /// Run no earlier than this (RFC 3339). Give `scheduled_at` or `delay_ms`, not both
    /// (400 `invalid_field`).
    #[serde(default)]
    pub scheduled_at: Option<DateTime<Utc>>,
    /// Run after this many milliseconds (at most 2,000,000,000,000, about 63 years). Give
    /// `delay_ms` or `scheduled_at`, not both (400 `invalid_field`).
    #[serde(default, deserialize_with = "optional_integer")]
    #[schema(minimum = 0, maximum = 2_000_000_000_000_u64)]
    pub delay_ms: Option<u64>,
    /// While an active job holds this key, enqueueing again returns that job's id (200)
    /// instead of creating a new one (201).
    #[serde(default)]
    #[schema(value_type = Option<Name>)]
    pub idempotency_key: Option<String>,
    /// Keep `idempotency_key` taken this many milliseconds after this enqueue (at most
    /// 31,622,400,000, 366 days), also once the job has finished in one of `unique_states`:
    /// an enqueue with the key inside the window answers with this job's id (200), in
    /// whatever pillar it is, even after retention removed it. Needs `idempotency_key`.
    #[serde(default, deserialize_with = "optional_integer")]
    #[schema(minimum = 1, maximum = 31_622_400_000_u64)]
    pub unique_for_ms: Option<u64>,
    /// Finished states that keep holding the key inside `unique_for_ms` (an active job
    /// always holds it). Empty or absent: active jobs only.
    #[serde(default)]
    #[schema(value_type = Vec<UniqueStateDto>)]
    pub unique_states: Vec<UniqueState>,
    #[serde(default)]
    #[schema(value_type = Option<Name>)]
    pub correlation_id: Option<String>,
    /// Who enqueued it; defaults to the authenticated user.
    #[serde(default)]
    #[schema(value_type = Option<Name>)]
    pub created_by: Option<String>,
    /// If the job has not started by then it goes to the dead-letter queue as `Expired`.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    /// Total runs allowed (the first included); defaults to the engine's retry setting.
    #[serde(default, deserialize_with = "optional_integer")]
    #[schema(minimum = 1, maximum = 2_147_483_647)]
    pub max_attempts: Option<u32>,
    /// A follow-up job enqueued in the same transaction as this job's final transition.
    #[serde(default, deserialize_with = "optional_object")]
    pub continuation: Option<ContinuationDto>,
}

impl EnqueueJob {
    /// The engine request; `actor` fills `created_by` when the client gave none.
    pub fn into_request(self, actor: &str) -> EnqueueRequest {
        EnqueueRequest {
            queue: self.queue,
            job_type: self.job_type,
            payload: self.payload.to_string(),
            tags: self.tags,
            priority: self.priority,
            scheduled_at: self.scheduled_at,
            delay_ms: self.delay_ms,
            idempotency_key: self.idempotency_key,
            unique_for_ms: self.unique_for_ms,
            unique_states: self.unique_states,
            correlation_id: self.correlation_id,
            created_by: self.created_by.or_else(|| Some(actor.to_string())),
            expires_at: self.expires_at,
            max_attempts: self.max_attempts,
            continuation: self.continuation.map(Into::into),
            trace_context: None,
        }
    }
}

/// A state in which a job keeps holding its idempotency key inside its window.
#[derive(Serialize, ToSchema)]
#[schema(as = UniqueState)]
#[allow(dead_code)] // the schema of `deck_engine::UniqueState`, for the OpenAPI document
#[serde(rename_all = "snake_case")]
pub enum UniqueStateDto {
    Active,
    Succeeded,
    Dead,
}

/// Follow-up work. Its payload is built by the engine:
/// `{"parent_id", "outcome", "reason", "error", "result"}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Continuation)]
pub struct ContinuationDto {
    #[schema(value_type = Name)]
    pub queue: String,
    #[serde(rename = "type")]
    #[schema(value_type = Name)]
    pub job_type: String,
    /// When it fires; defaults to `on_success`.
    #[serde(default = "default_trigger")]
    pub trigger: TriggerDto,
}

fn default_trigger() -> TriggerDto {
    TriggerDto::OnSuccess
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = ContinuationTrigger)]
pub enum TriggerDto {
    OnSuccess,
    OnFailure,
    Always,
}

impl From<ContinuationDto> for Continuation {
    fn from(c: ContinuationDto) -> Self {
        Continuation {
            queue: c.queue,
            job_type: c.job_type,
            trigger: match c.trigger {
                TriggerDto::OnSuccess => ContinuationTrigger::OnSuccess,
                TriggerDto::OnFailure => ContinuationTrigger::OnFailure,
                TriggerDto::Always => ContinuationTrigger::Always,
            },
        }
    }
}

impl From<&Continuation> for ContinuationDto {
    fn from(c: &Continuation) -> Self {
        ContinuationDto {
            queue: c.queue.clone(),
            job_type: c.job_type.clone(),
            trigger: match c.trigger {
                ContinuationTrigger::OnSuccess => TriggerDto::OnSuccess,
                ContinuationTrigger::OnFailure => TriggerDto::OnFailure,
                ContinuationTrigger::Always => TriggerDto::Always,
            },
        }
    }
}

/// Several jobs enqueued in one transaction: all of them or none.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnqueueBatch {
    /// 1 to 10,000 jobs.
    #[serde(deserialize_with = "objects")]
    #[schema(min_items = 1, max_items = 10_000)]
    pub jobs: Vec<EnqueueJob>,
}

/// What an enqueue did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Enqueued {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    /// False when the idempotency key matched an active job, whose id this is.
    pub created: bool,
    /// The job after waiting, when the request asked for `?wait=`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobView>,
}

impl From<EnqueueOutcome> for Enqueued {
    fn from(o: EnqueueOutcome) -> Self {
        Enqueued {
            id: o.id.0,
            created: o.created,
            job: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchEnqueued {
    /// One entry per requested job, in request order.
    pub jobs: Vec<Enqueued>,
}

// ---------------------------------------------------------------------------------- jobs

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = JobState)]
pub enum StateDto {
    Pending,
    Fetched,
    Processing,
    Succeeded,
    Dead,
}

/// One job, from whichever pillar holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    pub queue: String,
    #[serde(rename = "type")]
    pub job_type: String,
    pub state: StateDto,
    /// Why the job is dead: `Failed`, `Fatal`, `Timeout`, `Cancelled`, `Zombie`,
    /// `HeartbeatFailure`, `RetryLifetimeExpired`, `Expired` or `Throttled`.
    pub reason: Option<String>,
    /// `active`, `archive` or `dlq`.
    pub pillar: String,
    /// True once the job succeeded or went to the dead-letter queue.
    pub finished: bool,
    #[schema(value_type = AnyJson)]
    pub payload: Value,
    /// What the handler returned (succeeded jobs; `null` otherwise).
    #[schema(value_type = AnyJson)]
    pub result: Option<Value>,
    /// The last attempt's error message.
    pub error: Option<String>,
    /// Every failed attempt, oldest first.
    pub errors: Vec<AttemptErrorDto>,
    /// Every attempt, oldest first: when it ran, for how long, on which instance, what came
    /// of it and its error (the job page's history).
    pub attempts: Vec<AttemptView>,
    /// A dead letter's error group (16 hex digits): `GET /jobs?source=dlq&group=…` lists the
    /// dead letters failing the same way, `GET /error-groups` the groups. `null` otherwise.
    pub error_group: Option<String>,
    pub tags: Vec<String>,
    pub priority: i32,
    pub idempotency_key: Option<String>,
    pub correlation_id: Option<String>,
    pub created_by: Option<String>,
    pub created_at: DateTime<Utc>,
    pub scheduled_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub heartbeat_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub attempt: u32,
    pub max_attempts: Option<u32>,
    pub worker_id: Option<String>,
    pub cancel_requested: bool,
    pub continuation: Option<ContinuationDto>,
    /// The payload as first enqueued, when an operator edited it (`null` otherwise).
    #[schema(value_type = AnyJson)]
    pub original_payload: Option<Value>,
    /// The batch this job is a member of (`GET /batches/{id}`).
    #[schema(value_type = Option<String>, format = Uuid)]
    pub batch_id: Option<Uuid>,
    /// Present when the request waited (`?wait=`): true when the wait ended before the job
    /// finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = AttemptError)]
pub struct AttemptErrorDto {
    pub attempt: u32,
    pub at: DateTime<Utc>,
    /// `transient`, `fatal`, `throttled`, `timeout`, `panic`, ...
    pub kind: String,
    pub message: String,
}

impl From<&AttemptError> for AttemptErrorDto {
    fn from(e: &AttemptError) -> Self {
        AttemptErrorDto {
            attempt: e.attempt,
            at: e.at,
            kind: e.kind.clone(),
            message: e.message.clone(),
        }
    }
}

/// One attempt of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Attempt)]
pub struct AttemptView {
    /// The attempt number (a throttled run spends none, so its number repeats).
    pub attempt: u32,
    /// `null` when the handler never ran it (a pending job cancelled or expired) or the
    /// entry predates attempt records.
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<u64>,
    /// The instance that ran it (an external worker's is `ext:<worker>`).
    pub instance: Option<String>,
    pub outcome: AttemptOutcomeDto,
    /// When the job runs again after this attempt (`retried`).
    pub retry_at: Option<DateTime<Utc>>,
    /// Why it failed; `null` for a success or a run in flight.
    pub error: Option<AttemptFailureView>,
}

/// What came of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = AttemptOutcome)]
pub enum AttemptOutcomeDto {
    Running,
    Succeeded,
    Retried,
    DeadLettered,
    /// Failed; recorded before outcomes were, so what followed is not known.
    Failed,
}

/// An attempt's error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = AttemptFailure)]
pub struct AttemptFailureView {
    /// `transient`, `fatal`, `throttled`, `timeout`, `panic`, `zombie`, ...
    pub kind: String,
    pub message: String,
    /// Where the handler panicked (`src/billing.rs:42:9`).
    pub location: Option<String>,
    /// The panic's backtrace, when the server ran with `RUST_BACKTRACE=1`.
    pub backtrace: Option<String>,
}

impl From<AttemptRecord> for AttemptView {
    fn from(r: AttemptRecord) -> Self {
        AttemptView {
            attempt: r.attempt,
            started_at: r.started_at,
            finished_at: r.finished_at,
            duration_ms: r.duration_ms,
            instance: r.instance,
            outcome: match r.outcome {
                AttemptOutcome::Running => AttemptOutcomeDto::Running,
                AttemptOutcome::Succeeded => AttemptOutcomeDto::Succeeded,
                AttemptOutcome::Retried => AttemptOutcomeDto::Retried,
                AttemptOutcome::DeadLettered => AttemptOutcomeDto::DeadLettered,
                AttemptOutcome::Failed => AttemptOutcomeDto::Failed,
            },
            retry_at: r.retry_at,
            error: r.error.map(|e| AttemptFailureView {
                kind: e.kind,
                message: e.message,
                location: e.location,
                backtrace: e.backtrace,
            }),
        }
    }
}

/// Stored JSON text as a value; text that is somehow not JSON is passed on as a string
/// rather than failing the whole read.
pub fn json_value(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Null;
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

pub fn state_dto(state: JobState) -> (StateDto, Option<String>) {
    match state {
        JobState::Pending => (StateDto::Pending, None),
        JobState::Fetched => (StateDto::Fetched, None),
        JobState::Processing => (StateDto::Processing, None),
        JobState::Succeeded => (StateDto::Succeeded, None),
        JobState::Dead(reason) => (StateDto::Dead, Some(reason.as_str().to_string())),
    }
}

impl From<&Job> for JobView {
    fn from(job: &Job) -> Self {
        let (state, reason) = state_dto(job.state);
        JobView {
            id: job.id.0,
            queue: job.queue.clone(),
            job_type: job.job_type.clone(),
            state,
            reason,
            pillar: job.pillar().as_str().to_string(),
            finished: job.state.is_final(),
            payload: json_value(&job.payload),
            result: job.result.as_deref().map(json_value),
            error: job.last_error().map(|e| e.message.clone()),
            errors: job.errors.iter().map(Into::into).collect(),
            attempts: job.attempts().into_iter().map(Into::into).collect(),
            error_group: job.error_group.clone(),
            tags: job.tags.clone(),
            priority: job.priority,
            idempotency_key: job.idempotency_key.clone(),
            correlation_id: job.correlation_id.clone(),
            created_by: job.created_by.clone(),
            created_at: job.created_at,
            scheduled_at: job.scheduled_at,
            started_at: job.started_at,
            heartbeat_at: job.heartbeat_at,
            finished_at: job.finished_at,
            expires_at: job.expires_at,
            attempt: job.attempt,
            max_attempts: job.max_attempts,
            worker_id: job.worker_id.clone(),
            cancel_requested: job.cancel_requested,
            continuation: job.continuation.as_ref().map(Into::into),
            original_payload: job.original_payload.as_deref().map(json_value),
            batch_id: job.batch_id.map(|b| b.0),
            timed_out: None,
        }
    }
}

/// What a cancel did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Cancelled {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    /// `cancelled`: it had not started and is now in the dead-letter queue.
    /// `requested`: it is running; its worker stops it at the next heartbeat.
    pub outcome: CancelOutcomeDto,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = CancelOutcome)]
pub enum CancelOutcomeDto {
    Cancelled,
    Requested,
}

/// Optional edits applied while resurrecting a dead job. Absent fields stay as they are.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResurrectEdits {
    /// A replacement payload: any JSON value, `null` included, as on enqueue (the first
    /// payload is kept as `original_payload`).
    #[serde(default, deserialize_with = "present_value")]
    #[schema(value_type = AnyJson)]
    pub payload: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Tag>>)]
    pub tags: Option<Vec<String>>,
    #[serde(default, deserialize_with = "optional_integer")]
    pub priority: Option<i32>,
    /// Move it to another queue.
    #[serde(default)]
    #[schema(value_type = Option<Name>)]
    pub queue: Option<String>,
}

impl ResurrectEdits {
    pub fn into_edit(self) -> JobEdit {
        JobEdit {
            payload: self.payload.map(|v| v.to_string()),
            tags: self.tags,
            priority: self.priority,
            queue: self.queue,
        }
    }
}

// ---------------------------------------------------------------------------------- queues

/// A queue's settings and live numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueView {
    pub name: String,
    pub paused: bool,
    pub hidden: bool,
    /// Cluster-wide cap on fetched + processing jobs; null = unlimited.
    pub max_workers: Option<u32>,
    pub zombie_timeout_secs: Option<u32>,
    pub execution_timeout_secs: Option<u32>,
    pub lag_warn_secs: Option<u32>,
    pub lag_crit_secs: Option<u32>,
    /// Cluster-wide cap on job starts per period; null = unlimited.
    #[serde(default)]
    pub rate_limit: Option<RateLimitDto>,
    /// While the current period's starts are used up: when the next period starts. Pending
    /// jobs wait until then (no attempt spent).
    #[serde(default)]
    pub rate_limited_until: Option<DateTime<Utc>>,
    pub pending: u64,
    pub scheduled: u64,
    pub fetched: u64,
    pub processing: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub lag_avg_ms: u64,
    pub lag_max_ms: u64,
}

impl From<&QueueStats> for QueueView {
    fn from(q: &QueueStats) -> Self {
        QueueView {
            name: q.queue.clone(),
            paused: q.paused,
            hidden: q.hidden,
            max_workers: q.max_workers,
            zombie_timeout_secs: q.zombie_timeout_secs,
            execution_timeout_secs: q.execution_timeout_secs,
            lag_warn_secs: q.lag_warn_secs,
            lag_crit_secs: q.lag_crit_secs,
            rate_limit: None,
            rate_limited_until: None,
            pending: q.pending,
            scheduled: q.scheduled,
            fetched: q.fetched,
            processing: q.processing,
            succeeded: q.succeeded,
            failed: q.failed,
            lag_avg_ms: q.lag_avg_ms,
            lag_max_ms: q.lag_max_ms,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueList {
    pub queues: Vec<QueueView>,
}

/// A queue's settings after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QueueSettings {
    pub name: String,
    pub paused: bool,
    pub hidden: bool,
    pub max_workers: Option<u32>,
    pub zombie_timeout_secs: Option<u32>,
    pub execution_timeout_secs: Option<u32>,
    pub lag_warn_secs: Option<u32>,
    pub lag_crit_secs: Option<u32>,
    pub rate_limit: Option<RateLimitDto>,
    pub rate_limited_until: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
}

/// At most `starts` job starts per `per_secs` seconds, across every instance. Periods are
/// aligned to the Unix epoch (60 s: from one whole minute to the next); a claimed job counts
/// when it is claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RateLimit)]
pub struct RateLimitDto {
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 2_147_483_647)]
    pub starts: u32,
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 86_400)]
    pub per_secs: u32,
}

impl From<RateLimit> for RateLimitDto {
    fn from(l: RateLimit) -> Self {
        RateLimitDto {
            starts: l.starts,
            per_secs: l.per_secs,
        }
    }
}

impl From<RateLimitDto> for RateLimit {
    fn from(l: RateLimitDto) -> Self {
        RateLimit {
            starts: l.starts,
            per_secs: l.per_secs,
        }
    }
}

impl From<QueueConfig> for QueueSettings {
    fn from(q: QueueConfig) -> Self {
        QueueSettings {
            name: q.name,
            paused: q.paused,
            hidden: q.hidden,
            max_workers: q.max_workers,
            zombie_timeout_secs: q.zombie_timeout_secs,
            execution_timeout_secs: q.execution_timeout_secs,
            lag_warn_secs: q.lag_warn_secs,
            lag_crit_secs: q.lag_crit_secs,
            rate_limit: q.rate_limit.map(Into::into),
            rate_limited_until: q.rate_limited_until,
            updated_at: q.updated_at,
        }
    }
}

/// A partial change of a queue's settings, with at least one field. Absent fields stay as they
/// are; `null` clears an override back to the default.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = QueuePatch)]
pub struct QueuePatchDto {
    /// Stop (true) or restart (false) claiming from the queue.
    #[serde(default, deserialize_with = "present_bool")]
    #[schema(value_type = bool)]
    pub paused: Option<bool>,
    /// Hide the queue in the console's lists.
    #[serde(default, deserialize_with = "present_bool")]
    #[schema(value_type = bool)]
    pub hidden: Option<bool>,
    /// Cluster-wide cap on fetched + processing jobs; `null` = unlimited.
    #[serde(default, deserialize_with = "nullable_integer")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 2_147_483_647)]
    pub max_workers: Option<Option<u32>>,
    /// Running jobs without a heartbeat this long go to the DLQ; `null` = the server default.
    #[serde(default, deserialize_with = "nullable_integer")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 2_147_483_647)]
    pub zombie_timeout_secs: Option<Option<u32>>,
    /// A run longer than this is stopped (`Timeout`); `null` = the server default.
    #[serde(default, deserialize_with = "nullable_integer")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 2_147_483_647)]
    pub execution_timeout_secs: Option<Option<u32>>,
    /// Lag from which the console warns.
    #[serde(default, deserialize_with = "nullable_integer")]
    #[schema(value_type = Option<u32>, minimum = 0, maximum = 2_147_483_647)]
    pub lag_warn_secs: Option<Option<u32>>,
    /// Lag the console shows as critical: at least `lag_warn_secs`, as given in this patch or
    /// already set (409 `lag_thresholds_conflict` otherwise).
    #[serde(default, deserialize_with = "nullable_integer")]
    #[schema(value_type = Option<u32>, minimum = 0, maximum = 2_147_483_647)]
    pub lag_crit_secs: Option<Option<u32>>,
    /// At most `starts` job starts per `per_secs` (1 to 86,400) across every instance;
    /// `null` = unlimited. Jobs over the limit wait pending, no attempt spent.
    #[serde(default, deserialize_with = "nullable_object")]
    #[schema(value_type = Option<RateLimitDto>)]
    pub rate_limit: Option<Option<RateLimitDto>>,
}

impl QueuePatchDto {
    pub fn is_empty(&self) -> bool {
        self.paused.is_none()
            && self.hidden.is_none()
            && self.max_workers.is_none()
            && self.zombie_timeout_secs.is_none()
            && self.execution_timeout_secs.is_none()
            && self.lag_warn_secs.is_none()
            && self.lag_crit_secs.is_none()
            && self.rate_limit.is_none()
    }
}

impl From<QueuePatchDto> for QueuePatch {
    fn from(p: QueuePatchDto) -> Self {
        QueuePatch {
            paused: p.paused,
            hidden: p.hidden,
            max_workers: p.max_workers,
            zombie_timeout_secs: p.zombie_timeout_secs,
            execution_timeout_secs: p.execution_timeout_secs,
            lag_warn_secs: p.lag_warn_secs,
            lag_crit_secs: p.lag_crit_secs,
            rate_limit: p.rate_limit.map(|l| l.map(Into::into)),
        }
    }
}

// ---------------------------------------------------------------------------------- stats

/// Whole-system numbers (approximate; from counters and per-minute buckets).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Stats {
    /// Pending and due now.
    pub pending: u64,
    /// Pending with a future schedule.
    pub scheduled: u64,
    /// In some worker's prefetch buffer.
    pub fetched: u64,
    pub processing: u64,
    /// Jobs in the archive.
    pub succeeded: u64,
    /// Jobs in the dead-letter queue.
    pub dlq: u64,
    pub succeeded_1m: u64,
    pub succeeded_5m: u64,
    pub failed_1m: u64,
    pub failed_5m: u64,
    pub retried_5m: u64,
    /// Finished jobs per second over the last minute.
    pub throughput_1m: f64,
    pub throughput_5m: f64,
    /// Share of finished jobs that failed over the last 5 minutes (0–1).
    pub failure_rate_5m: f64,
}

impl From<&Summary> for Stats {
    fn from(s: &Summary) -> Self {
        Stats {
            pending: s.pending,
            scheduled: s.scheduled,
            fetched: s.fetched,
            processing: s.processing,
            succeeded: s.succeeded,
            dlq: s.dlq,
            succeeded_1m: s.succeeded_1m,
            succeeded_5m: s.succeeded_5m,
            failed_1m: s.failed_1m,
            failed_5m: s.failed_5m,
            retried_5m: s.retried_5m,
            throughput_1m: s.throughput_1m(),
            throughput_5m: s.throughput_5m(),
            failure_rate_5m: s.failure_rate_5m(),
        }
    }
}

/// Checks the API makes before the engine sees a request (the engine validates again).
pub fn check_batch_size(len: usize) -> Result<(), ApiError> {
    if len == 0 {
        return Err(ApiError::bad_request(
            "empty_batch",
            "the batch holds no jobs; send at least one in `jobs`",
        )
        .with_field("jobs"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::parse_json;

    #[test]
    fn queue_patch_null_clears_and_absent_keeps() {
        let p: QueuePatchDto = parse_json(br#"{"max_workers": null, "paused": true}"#).unwrap();
        assert_eq!(p.max_workers, Some(None));
        assert_eq!(p.zombie_timeout_secs, None);
        assert_eq!(p.paused, Some(true));
        let p: QueuePatchDto = parse_json(br#"{"max_workers": 4}"#).unwrap();
        assert_eq!(p.max_workers, Some(Some(4)));
    }

    #[test]
    fn enqueue_maps_payload_to_text_and_fills_created_by() {
        let j: EnqueueJob = parse_json(
            br#"{"queue":"q","type":"t","payload":{"a":[1,2]},"continuation":{"queue":"q2","type":"t2"}}"#,
        )
        .unwrap();
        let r = j.into_request("alice");
        assert_eq!(r.payload, r#"{"a":[1,2]}"#);
        assert_eq!(r.created_by.as_deref(), Some("alice"));
        let c = r.continuation.unwrap();
        assert_eq!(c.trigger, ContinuationTrigger::OnSuccess);
        let j: EnqueueJob = parse_json(br#"{"queue":"q","type":"t"}"#).unwrap();
        assert_eq!(j.into_request("x").payload, "null");
    }

    #[test]
    fn resurrect_null_payload_counts_as_given() {
        let e: ResurrectEdits = parse_json(br#"{"payload": null}"#).unwrap();
        assert_eq!(e.into_edit().payload.as_deref(), Some("null"));
        let e: ResurrectEdits = parse_json(br#"{"priority": 3}"#).unwrap();
        assert!(e.into_edit().payload.is_none());
    }
}

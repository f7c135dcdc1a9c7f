//! The job model: what a job is, the states it moves through, and the read models the
//! store hands to the runtime and the console. Plain data; no I/O here.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub type Timestamp = DateTime<Utc>;

/// A job's identity: a UUID v7, so ids sort by creation time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub Uuid);

impl JobId {
    pub fn new() -> Self {
        JobId(Uuid::now_v7())
    }
}

impl Default for JobId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for JobId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s.trim()).map(JobId)
    }
}

/// Which of the three tables a job lives in. A job is in exactly one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pillar {
    /// Active work: pending, fetched, processing.
    Hot,
    /// Succeeded jobs.
    Archive,
    /// Dead-letter queue: failed, fatal, cancelled, ...
    Dlq,
}

impl Pillar {
    pub const ALL: [Pillar; 3] = [Pillar::Hot, Pillar::Archive, Pillar::Dlq];

    pub fn as_str(self) -> &'static str {
        match self {
            Pillar::Hot => "active",
            Pillar::Archive => "archive",
            Pillar::Dlq => "dlq",
        }
    }
}

impl fmt::Display for Pillar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Pillar {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "active" | "hot" => Ok(Pillar::Hot),
            "archive" | "succeeded" => Ok(Pillar::Archive),
            "dlq" | "dead" | "deadletter" => Ok(Pillar::Dlq),
            _ => Err(ParseEnumError::new("pillar", s, "active, archive, dlq")),
        }
    }
}

/// Status of a row in the hot pillar. Stored as the numeric code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HotStatus {
    /// Waiting to be claimed (possibly scheduled in the future).
    Pending = 0,
    /// Claimed into a worker's prefetch buffer; user code has not started.
    Fetched = 1,
    /// User code is running; the heartbeat ticks.
    Processing = 2,
}

impl HotStatus {
    pub const ALL: [HotStatus; 3] = [
        HotStatus::Pending,
        HotStatus::Fetched,
        HotStatus::Processing,
    ];

    pub fn code(self) -> i64 {
        self as i64
    }

    pub fn from_code(code: i64) -> Option<Self> {
        match code {
            0 => Some(HotStatus::Pending),
            1 => Some(HotStatus::Fetched),
            2 => Some(HotStatus::Processing),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HotStatus::Pending => "pending",
            HotStatus::Fetched => "fetched",
            HotStatus::Processing => "processing",
        }
    }
}

impl fmt::Display for HotStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for HotStatus {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "pending" => Ok(HotStatus::Pending),
            "fetched" | "buffered" => Ok(HotStatus::Fetched),
            "processing" | "running" => Ok(HotStatus::Processing),
            _ => Err(ParseEnumError::new(
                "status",
                s,
                "pending, fetched, processing",
            )),
        }
    }
}

/// Why a job is in the dead-letter queue. Stored as the numeric code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FailureReason {
    /// Retries exhausted after transient errors.
    Failed = 1,
    /// The handler said the job can never succeed (or panicked, or the type is unknown).
    Fatal = 2,
    /// Retries exhausted and the last attempt hit the execution timeout.
    Timeout = 3,
    /// An operator cancelled it.
    Cancelled = 4,
    /// It was processing and its heartbeat stopped; side effects may have happened.
    Zombie = 5,
    /// The worker could not write heartbeats and gave up on the job.
    HeartbeatFailure = 6,
    /// A retry would have run past the maximum job age.
    RetryLifetimeExpired = 7,
    /// `expires_at` passed before the job started.
    Expired = 8,
    /// Retries exhausted while the handler kept reporting throttling.
    Throttled = 9,
}

/// The error a store writes on a job it moves to the dead-letter pillar itself (no handler
/// said anything): a kind and a message for the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreWrittenError {
    pub kind: &'static str,
    pub message: &'static str,
}

impl FailureReason {
    /// What the store writes as the error of a job it dead-letters for this reason, for the
    /// reasons only a store decides (cancel, zombie rescue, expiry): the same text from
    /// every backend.
    pub const fn store_written(self) -> Option<StoreWrittenError> {
        let (kind, message) = match self {
            FailureReason::Cancelled => ("cancelled", "cancelled by an operator"),
            FailureReason::Zombie => (
                "zombie",
                "the job's heartbeat stopped while it was processing; it may have run (not \
                 retried automatically)",
            ),
            FailureReason::Expired => ("expired", "expires_at passed before the job started"),
            _ => return None,
        };
        Some(StoreWrittenError { kind, message })
    }

    pub const ALL: [FailureReason; 9] = [
        FailureReason::Failed,
        FailureReason::Fatal,
        FailureReason::Timeout,
        FailureReason::Cancelled,
        FailureReason::Zombie,
        FailureReason::HeartbeatFailure,
        FailureReason::RetryLifetimeExpired,
        FailureReason::Expired,
        FailureReason::Throttled,
    ];

    pub fn code(self) -> i64 {
        self as i64
    }

    pub fn from_code(code: i64) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.code() == code)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Failed => "Failed",
            FailureReason::Fatal => "Fatal",
            FailureReason::Timeout => "Timeout",
            FailureReason::Cancelled => "Cancelled",
            FailureReason::Zombie => "Zombie",
            FailureReason::HeartbeatFailure => "HeartbeatFailure",
            FailureReason::RetryLifetimeExpired => "RetryLifetimeExpired",
            FailureReason::Expired => "Expired",
            FailureReason::Throttled => "Throttled",
        }
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FailureReason {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                ParseEnumError::new(
                    "failure reason",
                    s,
                    "Failed, Fatal, Timeout, Cancelled, Zombie, HeartbeatFailure, \
                     RetryLifetimeExpired, Expired, Throttled",
                )
            })
    }
}

/// Where a job is in its life, across all pillars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "state", content = "reason", rename_all = "snake_case")]
pub enum JobState {
    Pending,
    Fetched,
    Processing,
    Succeeded,
    Dead(FailureReason),
}

impl JobState {
    pub fn pillar(self) -> Pillar {
        match self {
            JobState::Pending | JobState::Fetched | JobState::Processing => Pillar::Hot,
            JobState::Succeeded => Pillar::Archive,
            JobState::Dead(_) => Pillar::Dlq,
        }
    }

    pub fn is_final(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Dead(_))
    }
}

impl From<HotStatus> for JobState {
    fn from(s: HotStatus) -> Self {
        match s {
            HotStatus::Pending => JobState::Pending,
            HotStatus::Fetched => JobState::Fetched,
            HotStatus::Processing => JobState::Processing,
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobState::Pending => f.write_str("pending"),
            JobState::Fetched => f.write_str("fetched"),
            JobState::Processing => f.write_str("processing"),
            JobState::Succeeded => f.write_str("succeeded"),
            JobState::Dead(r) => write!(f, "dead ({r})"),
        }
    }
}

/// When a continuation job is enqueued after its parent finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContinuationTrigger {
    OnSuccess,
    OnFailure,
    Always,
}

impl ContinuationTrigger {
    pub fn fires_for(self, succeeded: bool) -> bool {
        match self {
            ContinuationTrigger::OnSuccess => succeeded,
            ContinuationTrigger::OnFailure => !succeeded,
            ContinuationTrigger::Always => true,
        }
    }
}

/// A follow-up job enqueued in the same transaction as its parent's final transition.
/// Its payload is built by the store: `{"parent_id", "outcome", "reason", "error", "result"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continuation {
    pub queue: String,
    pub job_type: String,
    pub trigger: ContinuationTrigger,
}

/// The error of one failed attempt, kept with the job: what went wrong, and (for attempts
/// that ran) when, where and what came of it — the job page's attempt history
/// (`crate::attempts`). The fields after `message` are absent from entries a store wrote
/// itself (a pending job cancelled or expired, a zombie) and from entries written before
/// they existed, so each is optional and left out of the JSON when empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptError {
    pub attempt: u32,
    /// When the attempt ended.
    pub at: Timestamp,
    /// Short classification: "transient", "fatal", "throttled", "timeout", "panic", ...
    pub kind: String,
    pub message: String,
    /// When the attempt started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The instance that ran it (`owner_instance` of the job's worker id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// When the retry policy runs the job again; `None` when this attempt sent it to the
    /// dead-letter queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Timestamp>,
    /// Where the handler panicked (`src/billing.rs:42:9`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The panic's backtrace, captured when `RUST_BACKTRACE` (or `RUST_LIB_BACKTRACE`) asks
    /// for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<String>,
}

/// What external workers' instance ids start with: `ext:<worker>`. Their leases, the worker
/// ids on the jobs they hold, add `:<secret>` (`crate::external::Lease`).
pub const EXTERNAL_INSTANCE_PREFIX: &str = "ext:";

/// The instance a worker id belongs to: an in-process worker owns jobs by its instance id;
/// an external worker's lease `ext:<worker>:<secret>` belongs to `ext:<worker>`. What an
/// operator is shown is this, so a lease's secret is never on a page.
pub fn owner_instance(worker_id: &str) -> &str {
    let Some(lease) = worker_id.strip_prefix(EXTERNAL_INSTANCE_PREFIX) else {
        return worker_id;
    };
    match lease.find(':') {
        Some(end) => &worker_id[..EXTERNAL_INSTANCE_PREFIX.len() + end],
        None => worker_id,
    }
}

/// Everything about one job, in whichever pillar it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub id: JobId,
    pub queue: String,
    pub job_type: String,
    /// JSON text.
    pub payload: String,
    pub tags: Vec<String>,
    /// Higher runs first.
    pub priority: i32,
    pub idempotency_key: Option<String>,
    pub correlation_id: Option<String>,
    pub created_by: Option<String>,
    pub created_at: Timestamp,
    /// When the job becomes due (equals `created_at` unless delayed or retried).
    pub scheduled_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub heartbeat_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub expires_at: Option<Timestamp>,
    /// Runs started so far (incremented when user code starts).
    pub attempt: u32,
    /// Per-job override of the retry policy's maximum attempts.
    pub max_attempts: Option<u32>,
    pub state: JobState,
    /// The worker that holds (or last held) the job.
    pub worker_id: Option<String>,
    /// An operator asked to cancel this running job; the owning worker stops it.
    pub cancel_requested: bool,
    /// Every failed attempt, oldest first.
    pub errors: Vec<AttemptError>,
    /// JSON text returned by the handler (archive only).
    pub result: Option<String>,
    pub continuation: Option<Continuation>,
    /// The payload as first enqueued, kept when an operator edits the job.
    pub original_payload: Option<String>,
    /// The batch this job is a member of.
    #[serde(default)]
    pub batch_id: Option<BatchId>,
    /// W3C trace context of the span that enqueued the job (see `EnqueueRequest`).
    #[serde(default)]
    pub trace_context: Option<String>,
    /// A dead letter's error group: the fingerprint (16 hex digits,
    /// `crate::fingerprint::Fingerprint`) its DLQ row was filed under, so its page links to
    /// the dead letters failing the same way. `None` in the other pillars.
    #[serde(default)]
    pub error_group: Option<String>,
}

impl Job {
    pub fn last_error(&self) -> Option<&AttemptError> {
        self.errors.last()
    }

    pub fn pillar(&self) -> Pillar {
        self.state.pillar()
    }
}

/// What a producer asks for. Validated (see `validation`) before anything is written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnqueueRequest {
    pub queue: String,
    pub job_type: String,
    /// JSON text. Empty means `null`.
    pub payload: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub priority: i32,
    /// Run no earlier than this. `None` means now.
    #[serde(default)]
    pub scheduled_at: Option<Timestamp>,
    /// Alternative to `scheduled_at`: run after this many milliseconds.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// A duplicate among active (hot) jobs returns the existing id instead of a new job.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Keep `idempotency_key` taken for this long after this job is enqueued, also once the
    /// job has finished in one of `unique_states`. Needs an idempotency key.
    #[serde(default)]
    pub unique_for_ms: Option<u64>,
    /// Which finished states keep holding the key inside `unique_for_ms` (an active job
    /// always holds it). Empty: active only, today's behaviour.
    #[serde(default)]
    pub unique_states: Vec<UniqueState>,
    #[serde(default)]
    pub correlation_id: Option<String>,
    #[serde(default)]
    pub created_by: Option<String>,
    /// If the job has not started by then it goes to the DLQ as `Expired`.
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
    #[serde(default)]
    pub max_attempts: Option<u32>,
    #[serde(default)]
    pub continuation: Option<Continuation>,
    /// W3C trace context (`traceparent`, optionally `;tracestate`) of the span that enqueued
    /// the job, so the run's span links back to it across processes. Filled by the engine
    /// from the current span when left empty; see `crate::trace`.
    #[serde(default)]
    pub trace_context: Option<String>,
}

impl EnqueueRequest {
    pub fn new(
        queue: impl Into<String>,
        job_type: impl Into<String>,
        payload: impl Into<String>,
    ) -> Self {
        EnqueueRequest {
            queue: queue.into(),
            job_type: job_type.into(),
            payload: payload.into(),
            ..Default::default()
        }
    }
}

/// A state in which a job keeps holding its idempotency key inside its uniqueness window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UniqueState {
    /// Pending, fetched or running (always counts; listing it changes nothing).
    Active,
    /// Finished in the archive.
    Succeeded,
    /// In the dead-letter queue, whatever the reason.
    Dead,
}

impl UniqueState {
    pub fn as_str(self) -> &'static str {
        match self {
            UniqueState::Active => "active",
            UniqueState::Succeeded => "succeeded",
            UniqueState::Dead => "dead",
        }
    }
}

/// Longest uniqueness window: a year. Longer keys are better kept by the application.
pub const MAX_UNIQUE_FOR_MS: u64 = 366 * 86_400_000;

/// Result of an enqueue: the job's id, and whether a new job was written (false when the
/// idempotency key matched an active job, whose id is returned).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnqueueOutcome {
    pub id: JobId,
    pub created: bool,
}

/// Whether a transition changed anything. `NotApplied` on a worker-owned path means
/// someone else owns the job now (or it moved on); the caller logs and counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Applied {
    Applied,
    NotApplied,
}

impl Applied {
    pub fn from_rows(rows: usize) -> Self {
        if rows > 0 {
            Applied::Applied
        } else {
            Applied::NotApplied
        }
    }

    pub fn is_applied(self) -> bool {
        self == Applied::Applied
    }
}

/// Per-queue settings, shared by every instance through the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueConfig {
    pub name: String,
    pub paused: bool,
    /// Hidden from the console's default views.
    pub hidden: bool,
    /// Cluster-wide limit on fetched + processing jobs of this queue. `None` = unlimited.
    pub max_workers: Option<u32>,
    /// Processing jobs with a heartbeat older than this are zombies. `None` = global default.
    pub zombie_timeout_secs: Option<u32>,
    /// Per-queue execution timeout. `None` = global default.
    pub execution_timeout_secs: Option<u32>,
    /// Lag above this is shown as a warning. `None` = console default.
    pub lag_warn_secs: Option<u32>,
    /// Lag above this is shown as critical. `None` = console default.
    pub lag_crit_secs: Option<u32>,
    /// Cluster-wide limit on job starts per period. `None` = unlimited.
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
    /// When the current period's starts are used up: pending jobs wait until then.
    #[serde(default)]
    pub rate_limited_until: Option<Timestamp>,
    pub updated_at: Option<Timestamp>,
}

/// At most `starts` jobs of a queue start per `per_secs`, across every instance. Periods are
/// aligned to the Unix epoch (a 60 s period runs from one whole minute to the next), and a
/// claimed job counts as started when it is claimed, whether or not it then runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub starts: u32,
    pub per_secs: u32,
}

/// Longest rate-limit period: a day.
pub const MAX_RATE_PERIOD_SECS: u32 = 86_400;

impl QueueConfig {
    pub fn new(name: impl Into<String>) -> Self {
        QueueConfig {
            name: name.into(),
            paused: false,
            hidden: false,
            max_workers: None,
            zombie_timeout_secs: None,
            execution_timeout_secs: None,
            lag_warn_secs: None,
            lag_crit_secs: None,
            rate_limit: None,
            rate_limited_until: None,
            updated_at: None,
        }
    }
}

/// A partial update of a queue's settings; `None` leaves a field as it is.
/// For the optional limits, `Some(None)` clears the override.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuePatch {
    #[serde(default)]
    pub paused: Option<bool>,
    #[serde(default)]
    pub hidden: Option<bool>,
    #[serde(default)]
    pub max_workers: Option<Option<u32>>,
    #[serde(default)]
    pub zombie_timeout_secs: Option<Option<u32>>,
    #[serde(default)]
    pub execution_timeout_secs: Option<Option<u32>>,
    #[serde(default)]
    pub lag_warn_secs: Option<Option<u32>>,
    #[serde(default)]
    pub lag_crit_secs: Option<Option<u32>>,
    #[serde(default)]
    pub rate_limit: Option<Option<RateLimit>>,
}

/// Operator edits to a pending or dead job. `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobEdit {
    #[serde(default)]
    pub payload: Option<String>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    pub priority: Option<i32>,
    #[serde(default)]
    pub queue: Option<String>,
}

impl JobEdit {
    pub fn is_empty(&self) -> bool {
        self.payload.is_none()
            && self.tags.is_none()
            && self.priority.is_none()
            && self.queue.is_none()
    }
}

/// The order claims hand jobs out in: highest priority first, then earliest due, then id.
pub fn claim_order(a: &Job, b: &Job) -> std::cmp::Ordering {
    claim_key(a.priority, a.scheduled_at, a.id).cmp(&claim_key(b.priority, b.scheduled_at, b.id))
}

/// `claim_order` as a sort key, for stores that rank rows before they are jobs (`due` and
/// `id` in any form that sorts like the timestamp and the id).
pub fn claim_key<T: Ord, I: Ord>(priority: i32, due: T, id: I) -> (std::cmp::Reverse<i32>, T, I) {
    (std::cmp::Reverse(priority), due, id)
}

/// Ask for the next batch of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    pub worker_id: String,
    /// At most this many jobs (free workers to start plus free prefetch space).
    pub limit: u32,
    /// Start at most this many of the claimed jobs (the first in claim order) at once:
    /// they come back `Processing` with the attempt counted, exactly as `mark_processing`
    /// would leave them, so a free worker runs its job after one store call instead of
    /// two. The rest come back `Fetched`. A store may start fewer; the caller looks at each
    /// job's state. Only ask when every started job will run at once (free workers, no
    /// circuit breaker that could defer it).
    pub start: u32,
    /// Only these queues; `None` = every queue.
    pub queues: Option<Vec<String>>,
    /// Only jobs of these types; `None` = every type (external workers that run some types).
    pub types: Option<Vec<String>>,
}

/// How a worker finished a job it was processing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// Move to the archive with the handler's result (JSON text, already size-checked).
    Succeeded {
        id: JobId,
        result: Option<String>,
        duration_ms: u64,
    },
    /// Back to pending, due at `retry_at`; the attempt's error is kept.
    Retry {
        id: JobId,
        error: AttemptError,
        retry_at: Timestamp,
    },
    /// Move to the DLQ with a reason; the attempt's error is kept.
    DeadLetter {
        id: JobId,
        reason: FailureReason,
        error: AttemptError,
        duration_ms: u64,
    },
    /// Given back unrun (an external worker that claimed more than it will run): back to
    /// pending, due now, the attempt not counted and no error recorded.
    Released { id: JobId },
}

impl Completion {
    pub fn id(&self) -> JobId {
        match self {
            Completion::Succeeded { id, .. }
            | Completion::Retry { id, .. }
            | Completion::DeadLetter { id, .. }
            | Completion::Released { id } => *id,
        }
    }

    /// The job leaves the hot pillar (archive or DLQ): its waiters get their answer.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Completion::Succeeded { .. } | Completion::DeadLetter { .. }
        )
    }
}

/// What the heartbeat learnt about the jobs a worker holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeartbeatReport {
    /// Still owned by this worker and processing; heartbeat written.
    pub alive: Vec<JobId>,
    /// An operator asked to cancel these; the worker must stop them.
    pub cancel_requested: Vec<JobId>,
    /// No longer owned by this worker (rescued, cancelled, purged): stop caring.
    pub lost: Vec<JobId>,
}

/// What an operator cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelOutcome {
    /// It was pending or fetched: moved to the DLQ as `Cancelled` now.
    Cancelled,
    /// It is running: the owning worker (in whichever instance) stops it at its next heartbeat.
    Requested,
    /// Already finished, or no such job.
    NotFound,
}

/// Timeouts for the rescue sweep: the `[engine.rescue]` configuration.
/// When stuck work is given back or dead-lettered (`[engine.rescue]`); also what one rescue
/// sweep of a store is told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RescuePolicy {
    /// `Fetched` rows older than this go back to pending (no user code ran).
    #[serde(with = "crate::values::duration")]
    pub fetched_timeout: Duration,
    /// `Processing` rows with a heartbeat older than this (unless the queue overrides it)
    /// go to the DLQ as `Zombie`.
    #[serde(rename = "zombie_timeout", with = "crate::values::duration")]
    pub default_zombie_timeout: Duration,
    /// Jobs held by an instance whose heartbeat is older than this are rescued at once.
    #[serde(with = "crate::values::duration")]
    pub dead_instance_timeout: Duration,
}

impl Default for RescuePolicy {
    fn default() -> Self {
        RescuePolicy {
            fetched_timeout: Duration::from_secs(600),
            default_zombie_timeout: Duration::from_secs(600),
            dead_instance_timeout: Duration::from_secs(30),
        }
    }
}

/// What one rescue step looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RescueKind {
    /// `Fetched` rows older than `fetched_timeout`, or held by a dead instance → pending
    /// (no user code ran, no attempt spent).
    StaleClaims,
    /// `Processing` rows whose heartbeat is older than their queue's zombie timeout (else
    /// `default_zombie_timeout`), or held by a dead instance → DLQ `Zombie`.
    Zombies,
    /// Pending rows past `expires_at` → DLQ `Expired`.
    Expired,
    /// Instance rows silent for over an hour, deleted (the console stops listing them).
    DeadInstances,
}

impl RescueKind {
    /// In sweep order: claims and running jobs of dead instances are rescued before the
    /// instance rows that identify them go.
    pub const ALL: [RescueKind; 4] = [
        RescueKind::StaleClaims,
        RescueKind::Zombies,
        RescueKind::Expired,
        RescueKind::DeadInstances,
    ];
}

/// One rescue step, as asked of the store (`Store::rescue_step`): at most `limit` rows of
/// `kind`, judged by `policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RescueStep<'a> {
    pub kind: RescueKind,
    pub policy: &'a RescuePolicy,
    pub limit: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RescueReport {
    /// Fetched rows put back to pending.
    pub released: u64,
    /// Processing rows moved to the DLQ as `Zombie`.
    pub zombies: u64,
    /// Pending rows whose `expires_at` passed, moved to the DLQ as `Expired`.
    pub expired: u64,
    /// Instance rows deleted because their process is gone.
    pub dead_instances: u64,
}

/// What one retention step deletes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PruneTarget {
    /// Finished jobs.
    Archive,
    /// Dead jobs (their error groups follow).
    Dlq,
    /// Per-minute metric buckets.
    MetricBuckets,
    /// The operator audit log.
    Audit,
    /// Idempotency keys whose uniqueness window has lapsed (each key carries its own end).
    UniqueKeys,
    /// A schedule's history of handled occurrences (its last run stays on the schedule);
    /// kept as long as the archive.
    ScheduleRuns,
    /// Finished batches (their members go by their own pillar's retention); kept as long as
    /// the longer of archive and DLQ, so a dead member that can still be resurrected still
    /// has its batch to reopen.
    Batches,
}

impl PruneTarget {
    pub const ALL: [PruneTarget; 7] = [
        PruneTarget::Archive,
        PruneTarget::Dlq,
        PruneTarget::MetricBuckets,
        PruneTarget::Audit,
        PruneTarget::UniqueKeys,
        PruneTarget::ScheduleRuns,
        PruneTarget::Batches,
    ];

    /// How long `policy` keeps this target's rows. The audit log is kept as long as the
    /// metrics.
    pub fn kept_for(self, policy: &RetentionPolicy) -> Duration {
        match self {
            PruneTarget::Archive | PruneTarget::ScheduleRuns => policy.archive,
            PruneTarget::Dlq => policy.dlq,
            PruneTarget::MetricBuckets | PruneTarget::Audit => policy.metrics,
            PruneTarget::UniqueKeys => Duration::ZERO,
            PruneTarget::Batches => policy.archive.max(policy.dlq),
        }
    }
}

/// One retention step, as asked of the store (`Store::prune_step`): at most `limit` of
/// `target`'s rows older than `older_than`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneStep {
    pub target: PruneTarget,
    pub older_than: Duration,
    pub limit: u32,
}

/// How long finished work is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionPolicy {
    pub archive: Duration,
    pub dlq: Duration,
    pub metrics: Duration,
    /// Rows deleted per transaction, so pruning never holds locks for long.
    pub batch_size: u32,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            archive: Duration::from_secs(7 * 86_400),
            dlq: Duration::from_secs(30 * 86_400),
            metrics: Duration::from_secs(7 * 86_400),
            batch_size: 1_000,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PruneReport {
    pub archive: u64,
    pub dlq: u64,
    pub metric_buckets: u64,
    pub audit: u64,
    /// Lapsed uniqueness windows.
    pub unique_keys: u64,
    /// Schedule history rows older than the archive's retention.
    #[serde(default)]
    pub schedule_runs: u64,
    /// Batches finished longer ago than archive and DLQ keep their jobs.
    #[serde(default)]
    pub batches: u64,
}

impl PruneReport {
    /// Rows deleted, all targets together.
    pub fn total(&self) -> u64 {
        self.archive
            + self.dlq
            + self.metric_buckets
            + self.audit
            + self.unique_keys
            + self.schedule_runs
            + self.batches
    }
}

/// Engine-wide settings persisted in the store so every instance follows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineSettings {
    /// Concurrent jobs per instance.
    pub worker_count: u32,
    pub retry: RetrySettings,
    pub retention: RetentionSettings,
}

/// Concurrent jobs per instance unless configured. A worker is an async task, not a
/// thread: a job waiting on I/O (an HTTP call, a query, a mail server) holds a slot and no
/// core, so a small count leaves the machine idle (README, "Why 100 workers by default").
pub const DEFAULT_WORKER_COUNT: u32 = 100;

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            worker_count: DEFAULT_WORKER_COUNT,
            retry: RetrySettings::default(),
            retention: RetentionSettings::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrySettings {
    /// Total runs, the first included.
    pub max_attempts: u32,
    pub base_delay_ms: u64,
    pub max_delay_ms: u64,
    pub jitter_ms: u64,
    /// No retry is scheduled past this age (from `created_at`).
    pub max_job_age_secs: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            max_attempts: 3,
            base_delay_ms: 3_000,
            max_delay_ms: 3_600_000,
            jitter_ms: 1_000,
            max_job_age_secs: 86_400,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionSettings {
    pub archive_days: u32,
    pub dlq_days: u32,
    pub metrics_days: u32,
}

impl Default for RetentionSettings {
    fn default() -> Self {
        RetentionSettings {
            archive_days: 7,
            dlq_days: 30,
            metrics_days: 7,
        }
    }
}

impl RetentionSettings {
    pub fn policy(&self, batch_size: u32) -> RetentionPolicy {
        let day = 86_400;
        RetentionPolicy {
            archive: Duration::from_secs(u64::from(self.archive_days) * day),
            dlq: Duration::from_secs(u64::from(self.dlq_days) * day),
            metrics: Duration::from_secs(u64::from(self.metrics_days) * day),
            batch_size,
        }
    }
}

/// A running engine or external worker process, as registered in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceInfo {
    pub id: String,
    pub host: String,
    pub pid: u32,
    pub version: String,
    pub started_at: Timestamp,
    pub heartbeat_at: Timestamp,
    pub workers_total: u32,
    pub workers_busy: u32,
    #[serde(default)]
    pub kind: InstanceKind,
    /// The queues it takes jobs from; `None` = every queue.
    #[serde(default)]
    pub queues: Option<Vec<String>>,
    /// The job types it runs; `None` = every type.
    #[serde(default)]
    pub job_types: Option<Vec<String>>,
    /// An operator quieted it: it claims no new jobs, and finishes what it runs and holds.
    /// Set through `Operations::set_instance_quiet`; a heartbeat only reads it back (the
    /// store ignores this field there), so a beat never undoes an operator's choice.
    #[serde(default)]
    pub quiet: bool,
    /// Jobs it holds (fetched or processing, by it or its workers), as `list_instances`
    /// counts them; a heartbeat ignores it.
    #[serde(default)]
    pub held_jobs: u32,
    /// It deregistered (a clean shutdown), as `list_instances` reads it; a heartbeat
    /// ignores it (a beat registers the instance again).
    #[serde(default)]
    pub stopped: bool,
}

/// An instance whose heartbeat is older than this is *lost*: crashed, hung or cut off (six
/// missed beats at the default 5 s interval; the same as the default
/// `engine.rescue.dead_instance_timeout`, after which any instance rescues its jobs).
pub const INSTANCE_LOST_AFTER: Duration = Duration::from_secs(30);

/// Whether an instance row stands for a process that is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceStatus {
    /// Its heartbeat is recent.
    Live,
    /// It shut down cleanly, leaving jobs for the rescue.
    Stopped,
    /// Its heartbeat is older than [`INSTANCE_LOST_AFTER`]: the process died, hangs or
    /// cannot reach the database. Its jobs are rescued by any instance (see
    /// `engine.rescue.dead_instance_timeout`); until then it is listed with them.
    Lost,
}

impl InstanceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceStatus::Live => "live",
            InstanceStatus::Stopped => "stopped",
            InstanceStatus::Lost => "lost",
        }
    }
}

impl InstanceInfo {
    /// Live, stopped or lost, at `now`.
    pub fn status(&self, now: Timestamp) -> InstanceStatus {
        if self.stopped {
            return InstanceStatus::Stopped;
        }
        let age = now.signed_duration_since(self.heartbeat_at);
        if age.to_std().is_ok_and(|age| age > INSTANCE_LOST_AFTER) {
            InstanceStatus::Lost
        } else {
            InstanceStatus::Live
        }
    }

    /// Whether it takes jobs of `queue` and `job_type` (as its claims do: `None` is all;
    /// a type entry ending in `*` is a prefix, as an external worker's may be). An engine
    /// without workers takes none.
    pub fn takes(&self, queue: &str, job_type: &str) -> bool {
        if self.kind == InstanceKind::Engine && self.workers_total == 0 {
            return false;
        }
        let queue_ok = self
            .queues
            .as_ref()
            .is_none_or(|qs| qs.iter().any(|q| q == queue));
        let type_ok = self.job_types.as_ref().is_none_or(|ts| {
            ts.iter().any(|t| match t.strip_suffix('*') {
                Some(prefix) => job_type.starts_with(prefix),
                None => t == job_type,
            })
        });
        queue_ok && type_ok
    }
}

/// What runs the jobs an instance row stands for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceKind {
    /// A deck engine: handlers in its own process (Rust, or HTTP endpoints it calls).
    #[default]
    Engine,
    /// A process in any language that pulls jobs over the worker protocol.
    External,
}

impl InstanceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceKind::Engine => "engine",
            InstanceKind::External => "external",
        }
    }

    /// The stored name back (an unknown one reads as an engine, the older default).
    pub fn from_stored(s: &str) -> InstanceKind {
        match s {
            "external" => InstanceKind::External,
            _ => InstanceKind::Engine,
        }
    }
}

/// One operator action, as kept in the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: Timestamp,
    pub actor: String,
    /// Stable action name: "job.cancel", "queue.pause", "dlq.bulk_resurrect", ...
    pub action: String,
    /// Job ids, a queue name, or a filter in its URL form.
    pub target: String,
    /// How many jobs (or rows) the action touched.
    pub count: u64,
    /// Free text: the diff of an edit, the settings applied, ...
    pub detail: Option<String>,
}

/// Which audit entries to list; every field unset lists them all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Exactly this actor.
    pub actor: Option<String>,
    /// An action (`queue.pause`) or its family (`queue` matches every `queue.…`).
    pub action: Option<String>,
    /// At or after this time.
    pub from: Option<Timestamp>,
    /// Before this time.
    pub to: Option<Timestamp>,
}

/// An audit entry before the store gives it an id and time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewAuditEntry {
    pub actor: String,
    pub action: String,
    pub target: String,
    pub count: u64,
    pub detail: Option<String>,
}

/// A name that does not parse as one of an enum's stable names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}; expected one of: {expected}")]
pub struct ParseEnumError {
    pub what: &'static str,
    pub value: String,
    pub expected: &'static str,
}

impl ParseEnumError {
    pub fn new(what: &'static str, value: &str, expected: &'static str) -> Self {
        ParseEnumError {
            what,
            value: value.to_string(),
            expected,
        }
    }
}

/// A batch's identity: a UUID v7, so batches sort by creation time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BatchId(pub Uuid);

impl BatchId {
    pub fn new() -> Self {
        BatchId(Uuid::now_v7())
    }
}

impl Default for BatchId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for BatchId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s.trim()).map(BatchId)
    }
}

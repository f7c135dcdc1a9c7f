//! Bodies of what the console's operator pages show besides jobs: error groups, engine
//! settings (read, replace, patch), the audit log and the instances.
//!
//! The settings' bounds are the engine's (`validation::SETTING_RANGES`); the schema states
//! them as attributes, and a test holds the document against that table.

use chrono::{DateTime, Utc};
use deck_engine::{
    AuditEntry, EngineSettings, ErrorGroup, InstanceInfo, RetentionSettings, RetrySettings,
};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use crate::wire::{integer, object};

// ---------------------------------------------------------------------------------- error groups

/// Dead letters grouped by what killed them: reason, error kind, normalised message and job
/// type. `GET /jobs?source=dlq&error_group=<fingerprint>` lists a group's jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorGroupView {
    /// The group's key: the job list's `error_group` filter.
    pub fingerprint: String,
    /// Why its jobs died (`FailureReason`).
    pub reason: String,
    /// The error kind of the failures (`transient`, `fatal`, `zombie`, ...).
    pub kind: String,
    #[serde(rename = "type")]
    pub job_type: String,
    /// The full message of the group's latest dead letter.
    pub sample: String,
    /// Dead letters in the group.
    pub count: u64,
    pub last_seen: DateTime<Utc>,
    /// The group's dead letters in the job list.
    pub jobs: String,
}

impl From<&ErrorGroup> for ErrorGroupView {
    fn from(g: &ErrorGroup) -> Self {
        ErrorGroupView {
            fingerprint: g.fingerprint.as_str().to_string(),
            reason: g.reason.as_str().to_string(),
            kind: g.kind.clone(),
            job_type: g.job_type.clone(),
            sample: g.sample.clone(),
            count: g.count,
            last_seen: g.last_seen,
            jobs: format!(
                "{}/jobs?source=dlq&error_group={}",
                crate::PREFIX,
                g.fingerprint.as_str()
            ),
        }
    }
}

/// The largest error groups, largest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorGroupList {
    pub groups: Vec<ErrorGroupView>,
}

// ---------------------------------------------------------------------------------- settings

/// Engine-wide settings, followed by every instance (at its next instance heartbeat; the one
/// that saved them at once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = EngineSettings)]
pub struct SettingsBody {
    /// Concurrent jobs per instance.
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 10_000)]
    pub worker_count: u32,
    #[serde(deserialize_with = "object")]
    pub retry: RetryBody,
    #[serde(deserialize_with = "object")]
    pub retention: RetentionBody,
}

/// When a failed job runs again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RetrySettings)]
pub struct RetryBody {
    /// Runs in all, the first included.
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 1_000)]
    pub max_attempts: u32,
    /// The first retry's delay; each next one doubles. At most `max_delay_ms`.
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 0, maximum = 86_400_000)]
    pub base_delay_ms: u64,
    /// The longest delay; at least `base_delay_ms`.
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 0, maximum = 604_800_000)]
    pub max_delay_ms: u64,
    /// Random time added to each delay, up to this.
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 0, maximum = 3_600_000)]
    pub jitter_ms: u64,
    /// No retry is scheduled past this age (from creation).
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 31_536_000)]
    pub max_job_age_secs: u64,
}

/// How long finished jobs and metrics are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RetentionSettings)]
pub struct RetentionBody {
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 3_650)]
    pub archive_days: u32,
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 3_650)]
    pub dlq_days: u32,
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 3_650)]
    pub metrics_days: u32,
}

impl From<&EngineSettings> for SettingsBody {
    fn from(s: &EngineSettings) -> Self {
        SettingsBody {
            worker_count: s.worker_count,
            retry: RetryBody {
                max_attempts: s.retry.max_attempts,
                base_delay_ms: s.retry.base_delay_ms,
                max_delay_ms: s.retry.max_delay_ms,
                jitter_ms: s.retry.jitter_ms,
                max_job_age_secs: s.retry.max_job_age_secs,
            },
            retention: RetentionBody {
                archive_days: s.retention.archive_days,
                dlq_days: s.retention.dlq_days,
                metrics_days: s.retention.metrics_days,
            },
        }
    }
}

impl From<SettingsBody> for EngineSettings {
    fn from(b: SettingsBody) -> Self {
        EngineSettings {
            worker_count: b.worker_count,
            retry: RetrySettings {
                max_attempts: b.retry.max_attempts,
                base_delay_ms: b.retry.base_delay_ms,
                max_delay_ms: b.retry.max_delay_ms,
                jitter_ms: b.retry.jitter_ms,
                max_job_age_secs: b.retry.max_job_age_secs,
            },
            retention: RetentionSettings {
                archive_days: b.retention.archive_days,
                dlq_days: b.retention.dlq_days,
                metrics_days: b.retention.metrics_days,
            },
        }
    }
}

/// A field that, when present, is an integer (`null` is not "absent" here: the document
/// does not allow it).
fn present_integer<'de, D, T>(de: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    integer(de).map(Some)
}

/// A field that, when present, is an object.
fn present_object<'de, D, T>(de: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    object(de).map(Some)
}

/// A change of some settings: absent fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = EngineSettingsPatch)]
pub struct SettingsPatch {
    #[serde(default, deserialize_with = "present_integer")]
    #[schema(value_type = u32, minimum = 1, maximum = 10_000)]
    pub worker_count: Option<u32>,
    #[serde(default, deserialize_with = "present_object")]
    #[schema(value_type = RetryPatch)]
    pub retry: Option<RetryPatch>,
    #[serde(default, deserialize_with = "present_object")]
    #[schema(value_type = RetentionPatch)]
    pub retention: Option<RetentionPatch>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryPatch {
    #[serde(default, deserialize_with = "present_integer")]
    #[schema(value_type = u32, minimum = 1, maximum = 1_000)]
    pub max_attempts: Option<u32>,
    /// At most `max_delay_ms` (as patched, or as saved).
    #[serde(default, deserialize_with = "present_integer")]
    #[schema(value_type = u64, minimum = 0, maximum = 86_400_000)]
    pub base_delay_ms: Option<u64>,
    #[serde(default, deserialize_with = "present_integer")]
    #[schema(value_type = u64, minimum = 0, maximum = 604_800_000)]
    pub max_delay_ms: Option<u64>,
    #[serde(default, deserialize_with = "present_integer")]
    #[schema(value_type = u64, minimum = 0, maximum = 3_600_000)]
    pub jitter_ms: Option<u64>,
    #[serde(default, deserialize_with = "present_integer")]
    #[schema(value_type = u64, minimum = 1, maximum = 31_536_000)]
    pub max_job_age_secs: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetentionPatch {
    #[serde(default, deserialize_with = "present_integer")]
    #[schema(value_type = u32, minimum = 1, maximum = 3_650)]
    pub archive_days: Option<u32>,
    #[serde(default, deserialize_with = "present_integer")]
    #[schema(value_type = u32, minimum = 1, maximum = 3_650)]
    pub dlq_days: Option<u32>,
    #[serde(default, deserialize_with = "present_integer")]
    #[schema(value_type = u32, minimum = 1, maximum = 3_650)]
    pub metrics_days: Option<u32>,
}

impl SettingsPatch {
    /// `current` with this patch's fields over it.
    pub fn apply(&self, current: &EngineSettings) -> EngineSettings {
        let mut s = current.clone();
        fn set<T: Copy>(slot: &mut T, value: Option<T>) {
            if let Some(v) = value {
                *slot = v;
            }
        }
        set(&mut s.worker_count, self.worker_count);
        if let Some(r) = &self.retry {
            set(&mut s.retry.max_attempts, r.max_attempts);
            set(&mut s.retry.base_delay_ms, r.base_delay_ms);
            set(&mut s.retry.max_delay_ms, r.max_delay_ms);
            set(&mut s.retry.jitter_ms, r.jitter_ms);
            set(&mut s.retry.max_job_age_secs, r.max_job_age_secs);
        }
        if let Some(r) = &self.retention {
            set(&mut s.retention.archive_days, r.archive_days);
            set(&mut s.retention.dlq_days, r.dlq_days);
            set(&mut s.retention.metrics_days, r.metrics_days);
        }
        s
    }
}

// ---------------------------------------------------------------------------------- audit log

/// One operator action, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditEntryView {
    pub id: i64,
    pub at: DateTime<Utc>,
    /// Who acted (a user's name, or the local operator).
    pub actor: String,
    /// The stable action name: `job.cancel`, `queue.pause`, `settings.save`, ...
    pub action: String,
    /// Job ids, a queue name, an instance, or a filter in its URL form.
    pub target: String,
    /// How many jobs (or rows) the action touched.
    pub count: u64,
    /// Free text: an edit's diff, the settings before and after (JSON), ...
    pub detail: Option<String>,
}

impl From<&AuditEntry> for AuditEntryView {
    fn from(e: &AuditEntry) -> Self {
        AuditEntryView {
            id: e.id,
            at: e.at,
            actor: e.actor.clone(),
            action: e.action.clone(),
            target: e.target.clone(),
            count: e.count,
            detail: e.detail.clone(),
        }
    }
}

/// A page of the audit log, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditPage {
    pub entries: Vec<AuditEntryView>,
    /// `?before=` this for the next (older) page; `null` on the last page.
    pub next_before: Option<i64>,
}

// ---------------------------------------------------------------------------------- instances

/// An engine instance or an external worker, as its last heartbeat described it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Instance)]
pub struct InstanceView {
    pub id: String,
    pub host: String,
    pub pid: u32,
    pub version: String,
    /// `engine` (runs handlers itself) or `external` (a worker over the worker protocol).
    pub kind: String,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    pub workers_total: u32,
    pub workers_busy: u32,
    /// The queues it takes jobs from; `null` = every queue.
    pub queues: Option<Vec<String>>,
    /// The job types it runs; `null` = every type.
    pub job_types: Option<Vec<String>>,
    /// Quieted: it claims no new jobs (`POST /instances/{instance}/resume` undoes it).
    pub quiet: bool,
    /// `live`; `lost` (no heartbeat for 30 s: it died, hangs or cannot reach the database)
    /// or `stopped` (shut down) while it still holds jobs the rescue has not returned.
    pub status: String,
    /// The jobs it holds (buffered or running); a lost instance's wait for the rescue.
    pub held_jobs: u32,
}

impl From<&InstanceInfo> for InstanceView {
    fn from(i: &InstanceInfo) -> Self {
        InstanceView {
            id: i.id.clone(),
            host: i.host.clone(),
            pid: i.pid,
            version: i.version.clone(),
            kind: i.kind.as_str().to_string(),
            started_at: i.started_at,
            heartbeat_at: i.heartbeat_at,
            workers_total: i.workers_total,
            workers_busy: i.workers_busy,
            queues: i.queues.clone(),
            job_types: i.job_types.clone(),
            quiet: i.quiet,
            status: i.status(Utc::now()).as_str().to_string(),
            held_jobs: i.held_jobs,
        }
    }
}

/// The instances whose heartbeat is recent, and lost or stopped ones that still hold jobs;
/// newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InstanceList {
    pub instances: Vec<InstanceView>,
}

//! Schedule bodies: the definition clients send (`NewSchedule`, `ScheduleEdit`) and the
//! schedule they read back (`Schedule`, `ScheduleDetail`), mirroring `deck_engine::schedule`
//! with the API's wire names: the timing as `cron` or `every_secs` (exactly one), the job
//! template's payload as a JSON value and its type key as `type`, as on enqueue.

use std::borrow::Cow;

use chrono::{DateTime, TimeZone, Utc};
use deck_engine::schedule::Timing;
use deck_engine::{
    FireOutcome, MisfirePolicy, OverlapPolicy, Schedule, ScheduleDefinition, ScheduleJob,
    ScheduleOrigin, ScheduleRun, ScheduleSpec,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;
use utoipa::{PartialSchema, ToSchema};
use uuid::Uuid;

use super::json_value;
use crate::error::ApiError;
use crate::limits::{AnyJson, CronExpr, IanaTimeZone, Name, ScheduleName, Tag};
use crate::wire::{integer, object, optional_integer};

/// A schedule's definition, as `PUT /schedules/{name}` takes it: the path names the schedule,
/// so `name` may be left out (given, it must be the path's).
///
/// The timing is `cron` or `every_secs`: give exactly one (the other absent or `null`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ScheduleEdit)]
pub struct ScheduleBody {
    /// The schedule's name; in a replace, the path's name or absent.
    #[serde(default)]
    #[schema(value_type = Option<ScheduleName>, example = "nightly-report")]
    pub name: Option<String>,
    /// A cron expression read in `time_zone`: 5 fields (minute hour day-of-month month
    /// day-of-week), 6 with seconds first, or an alias (`@yearly`, `@monthly`, `@weekly`,
    /// `@daily`, `@hourly`). Give this or `every_secs`.
    #[serde(default)]
    #[schema(value_type = Option<CronExpr>, example = "0 9 * * MON-FRI")]
    pub cron: Option<String>,
    /// Every this many seconds (1 to 31,622,400, a year), aligned to the Unix epoch: 3600
    /// runs on the hour, UTC, whichever instance fires it. Give this or `cron`.
    #[serde(default, deserialize_with = "optional_integer")]
    #[schema(minimum = 1, maximum = 31_622_400)]
    pub every_secs: Option<u64>,
    /// The IANA time zone `cron` is read in (daylight saving time included); `UTC` when
    /// absent.
    #[serde(default = "utc")]
    #[schema(value_type = IanaTimeZone, example = "Europe/Berlin")]
    pub time_zone: String,
    /// The job every occurrence enqueues.
    #[serde(deserialize_with = "object")]
    pub job: ScheduleJobDto,
    /// What happens to occurrences missed while no scheduler ran; `run_once` when absent.
    #[serde(default, deserialize_with = "object")]
    pub misfire: MisfireDto,
    /// Whether an occurrence runs while the previous one's job is still pending or running;
    /// `allow` when absent.
    #[serde(default)]
    pub overlap: OverlapDto,
}

fn utc() -> String {
    "UTC".to_string()
}

impl ScheduleBody {
    /// The engine's definition, named `name`; the one-timing rule is checked here, every
    /// other rule by the engine.
    pub fn into_definition(self, name: String) -> Result<ScheduleDefinition, ApiError> {
        let spec = match (self.cron, self.every_secs) {
            (Some(cron), None) => ScheduleSpec::Cron(cron),
            (None, Some(secs)) => ScheduleSpec::EverySecs(secs),
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request(
                    "invalid_field",
                    "invalid every_secs: cron is given too (give exactly one of cron or \
                     every_secs)",
                )
                .with_field("every_secs"));
            }
            (None, None) => {
                return Err(ApiError::bad_request(
                    "invalid_field",
                    "invalid cron: neither cron nor every_secs is given (give exactly one, \
                     e.g. \"cron\": \"0 9 * * *\" or \"every_secs\": 3600)",
                )
                .with_field("cron"));
            }
        };
        Ok(ScheduleDefinition {
            name,
            spec,
            time_zone: self.time_zone,
            job: self.job.into(),
            misfire: self.misfire.into(),
            overlap: self.overlap.into(),
        })
    }
}

/// An engine error about a definition, with the field under its wire name: the engine calls
/// the job template's type key `job.job_type` (on the wire `job.type`, as on enqueue) and
/// checks its tags as `tags[i]` (they are `job.tags`).
pub fn wire_field(mut e: ApiError) -> ApiError {
    let Some(field) = e.field.clone() else {
        return e;
    };
    let wire = if field == "job.job_type" {
        "job.type".to_string()
    } else if field == "tags" || field.starts_with("tags[") {
        format!("job.{field}")
    } else {
        return e;
    };
    e.message = e
        .message
        .replacen(&format!("invalid {field}:"), &format!("invalid {wire}:"), 1);
    e.field = Some(wire);
    e
}

/// A schedule's definition, as `POST /schedules` takes it: `ScheduleEdit` with `name`
/// required.
pub struct NewSchedule;

impl PartialSchema for NewSchedule {
    fn schema() -> RefOr<Schema> {
        let mut schema = ScheduleBody::schema();
        if let RefOr::T(Schema::Object(object)) = &mut schema {
            object.description = Some(
                "A new schedule. The timing is `cron` or `every_secs`: give exactly one (the \
                 other absent or `null`)."
                    .to_string(),
            );
            object
                .properties
                .insert("name".to_string(), ScheduleName::schema_ref());
            object.required.insert(0, "name".to_string());
            object.examples = vec![serde_json::json!({
                "name": "nightly-report",
                "cron": "0 9 * * MON-FRI",
                "time_zone": "Europe/Berlin",
                "job": {"queue": "reports", "type": "report.daily", "payload": {"format": "pdf"}},
                "misfire": {"policy": "run_once"},
                "overlap": "skip_while_active",
            })];
        }
        schema
    }
}

impl ToSchema for NewSchedule {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("NewSchedule")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        ScheduleBody::schemas(schemas);
    }
}

/// `$ref` to a component, as the derive writes it.
trait SchemaRef: ToSchema {
    fn schema_ref() -> RefOr<Schema> {
        RefOr::Ref(utoipa::openapi::Ref::from_schema_name(Self::name()))
    }
}

impl SchemaRef for ScheduleName {}

/// The job each occurrence enqueues: the fields of an enqueue that make sense for a
/// recurring job. Its jobs are tagged `schedule:<name>` and created by `schedule <name>`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ScheduleJob)]
pub struct ScheduleJobDto {
    #[schema(value_type = Name, example = "reports")]
    pub queue: String,
    /// Handler type key.
    #[serde(rename = "type")]
    #[schema(value_type = Name, example = "report.daily")]
    pub job_type: String,
    /// Handed to the handler: any JSON value, at most 1 MiB as text. Absent means `null`.
    #[serde(default)]
    #[schema(value_type = AnyJson, example = json!({"format": "pdf"}))]
    pub payload: Value,
    /// Higher runs first.
    #[serde(default, deserialize_with = "integer")]
    pub priority: i32,
    #[serde(default)]
    #[schema(value_type = Vec<Tag>)]
    pub tags: Vec<String>,
    /// Total runs allowed (the first included); absent: the engine's retry setting.
    #[serde(default, deserialize_with = "optional_integer")]
    #[schema(minimum = 1, maximum = 2_147_483_647)]
    pub max_attempts: Option<u32>,
    /// The job goes to the dead-letter queue as `Expired` if it has not started this many
    /// seconds (1 to 31,622,400) after its occurrence; absent: it waits as long as it takes.
    #[serde(default, deserialize_with = "optional_integer")]
    #[schema(minimum = 1, maximum = 31_622_400)]
    pub expires_after_secs: Option<u64>,
}

impl From<ScheduleJobDto> for ScheduleJob {
    fn from(j: ScheduleJobDto) -> Self {
        ScheduleJob {
            queue: j.queue,
            job_type: j.job_type,
            payload: j.payload.to_string(),
            priority: j.priority,
            tags: j.tags,
            max_attempts: j.max_attempts,
            expires_after_secs: j.expires_after_secs,
        }
    }
}

impl From<&ScheduleJob> for ScheduleJobDto {
    fn from(j: &ScheduleJob) -> Self {
        ScheduleJobDto {
            queue: j.queue.clone(),
            job_type: j.job_type.clone(),
            payload: json_value(&j.payload),
            priority: j.priority,
            tags: j.tags.clone(),
            max_attempts: j.max_attempts,
            expires_after_secs: j.expires_after_secs,
        }
    }
}

/// Occurrences missed while no scheduler ran (downtime), once one runs again. An occurrence
/// up to a minute late is not a misfire and always runs.
///
/// `run_once`: run the latest missed occurrence, skip the others. `run_all`: run every missed
/// occurrence, oldest first, at most the latest `cap` (1 to 1,000). `skip`: run none; wait
/// for the next occurrence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(tag = "policy", rename_all = "snake_case", try_from = "MisfireFields")]
#[schema(as = Misfire)]
pub enum MisfireDto {
    #[default]
    RunOnce,
    RunAll {
        #[serde(deserialize_with = "integer")]
        #[schema(minimum = 1, maximum = 1000)]
        cap: u32,
    },
    Skip,
}

/// A misfire policy as read: serde's tagged enum would let `{"policy": "skip", "cap": 3}`
/// through, and the document says a `cap` belongs to `run_all` only.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MisfireFields {
    policy: MisfireKind,
    #[serde(default, deserialize_with = "optional_integer")]
    cap: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum MisfireKind {
    RunOnce,
    RunAll,
    Skip,
}

impl TryFrom<MisfireFields> for MisfireDto {
    type Error = String;

    fn try_from(m: MisfireFields) -> Result<Self, String> {
        match (m.policy, m.cap) {
            (MisfireKind::RunAll, Some(cap)) => Ok(MisfireDto::RunAll { cap }),
            (MisfireKind::RunAll, None) => {
                Err("run_all needs a cap: how many missed occurrences to catch up on".into())
            }
            (MisfireKind::RunOnce, None) => Ok(MisfireDto::RunOnce),
            (MisfireKind::Skip, None) => Ok(MisfireDto::Skip),
            (_, Some(_)) => Err("only run_all takes a cap; leave it out".into()),
        }
    }
}

impl From<MisfireDto> for MisfirePolicy {
    fn from(m: MisfireDto) -> Self {
        match m {
            MisfireDto::RunOnce => MisfirePolicy::RunOnce,
            MisfireDto::RunAll { cap } => MisfirePolicy::RunAll { cap },
            MisfireDto::Skip => MisfirePolicy::Skip,
        }
    }
}

impl From<MisfirePolicy> for MisfireDto {
    fn from(m: MisfirePolicy) -> Self {
        match m {
            MisfirePolicy::RunOnce => MisfireDto::RunOnce,
            MisfirePolicy::RunAll { cap } => MisfireDto::RunAll { cap },
            MisfirePolicy::Skip => MisfireDto::Skip,
        }
    }
}

/// `allow`: every occurrence enqueues. `skip_while_active`: an occurrence is skipped (and
/// recorded with no job) while the previous occurrence's job is pending or running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = Overlap)]
pub enum OverlapDto {
    #[default]
    Allow,
    SkipWhileActive,
}

impl From<OverlapDto> for OverlapPolicy {
    fn from(o: OverlapDto) -> Self {
        match o {
            OverlapDto::Allow => OverlapPolicy::Allow,
            OverlapDto::SkipWhileActive => OverlapPolicy::SkipWhileActive,
        }
    }
}

impl From<OverlapPolicy> for OverlapDto {
    fn from(o: OverlapPolicy) -> Self {
        match o {
            OverlapPolicy::Allow => OverlapDto::Allow,
            OverlapPolicy::SkipWhileActive => OverlapDto::SkipWhileActive,
        }
    }
}

/// `declared`: from `deck.toml` or the embedding program, put back at every start (edits
/// last until then). `operator`: created over the API or in the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = ScheduleOrigin)]
pub enum OriginDto {
    Declared,
    Operator,
}

impl From<ScheduleOrigin> for OriginDto {
    fn from(o: ScheduleOrigin) -> Self {
        match o {
            ScheduleOrigin::Declared => OriginDto::Declared,
            ScheduleOrigin::Operator => OriginDto::Operator,
        }
    }
}

/// A schedule: its definition (the fields of `ScheduleEdit`, `cron` or `every_secs` set and
/// the other `null`) and where it stands.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
#[schema(as = Schedule)]
pub struct ScheduleView {
    pub name: String,
    /// The cron expression, or `null` for an interval.
    pub cron: Option<String>,
    /// The interval in seconds, or `null` for a cron expression.
    pub every_secs: Option<u64>,
    pub time_zone: String,
    pub job: ScheduleJobDto,
    pub misfire: MisfireDto,
    pub overlap: OverlapDto,
    /// False while paused: no occurrence runs, and those that pass are not caught up on.
    pub enabled: bool,
    pub origin: OriginDto,
    /// Every occurrence up to this time has been handled (run or skipped).
    pub handled_through: DateTime<Utc>,
    /// The next occurrence after now (and after `handled_through`); `null` while paused or
    /// when the expression never occurs again.
    pub next_run: Option<DateTime<Utc>>,
    /// The last occurrence run or skipped, or the last manual run; `null` before the first.
    pub last_run: Option<ScheduleRunDto>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ScheduleView {
    pub fn new(s: &Schedule, now: DateTime<Utc>) -> Self {
        let def = &s.definition;
        let (cron, every_secs) = match &def.spec {
            ScheduleSpec::Cron(expr) => (Some(expr.clone()), None),
            ScheduleSpec::EverySecs(secs) => (None, Some(*secs)),
        };
        let next_run = if s.enabled {
            Timing::parse(&def.spec, &def.time_zone)
                .ok()
                .and_then(|t| t.next_after(now.max(s.handled_through)))
        } else {
            None
        };
        ScheduleView {
            name: def.name.clone(),
            cron,
            every_secs,
            time_zone: def.time_zone.clone(),
            job: (&def.job).into(),
            misfire: def.misfire.into(),
            overlap: def.overlap.into(),
            enabled: s.enabled,
            origin: s.origin.into(),
            handled_through: s.handled_through,
            next_run,
            last_run: s.last_run.as_ref().map(Into::into),
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

/// A schedule with its coming occurrences.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
pub struct ScheduleDetail {
    #[serde(flatten)]
    pub schedule: ScheduleView,
    /// The zone `upcoming` is shown in: `?tz=`, or the schedule's own.
    #[schema(value_type = IanaTimeZone)]
    pub upcoming_time_zone: String,
    /// The next `?count=` occurrences after now (and after `handled_through`), soonest first;
    /// fewer when the expression runs out. Listed also while the schedule is paused.
    pub upcoming: Vec<OccurrenceDto>,
}

/// One occurrence, in UTC and in `upcoming_time_zone`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[schema(as = Occurrence)]
pub struct OccurrenceDto {
    /// RFC 3339, UTC.
    #[schema(example = "2027-01-04T08:00:00Z")]
    pub at: DateTime<Utc>,
    /// The same instant as the local time in `upcoming_time_zone`, RFC 3339 with that zone's
    /// offset at the time.
    #[schema(value_type = String, format = DateTime, example = "2027-01-04T09:00:00+01:00")]
    pub local: String,
}

impl OccurrenceDto {
    /// `at` shown in `zone` (any chrono zone: the engine's `parse_zone` gives a tz one).
    pub fn new<Z: TimeZone>(at: DateTime<Utc>, zone: &Z) -> Self
    where
        Z::Offset: std::fmt::Display,
    {
        OccurrenceDto {
            at,
            local: at.with_timezone(zone).to_rfc3339(),
        }
    }
}

/// One handled occurrence or manual run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[schema(as = ScheduleRun)]
pub struct ScheduleRunDto {
    /// The occurrence's time; for a manual run, when it was asked for.
    pub scheduled_at: DateTime<Utc>,
    /// The job it enqueued; `null` when the overlap policy skipped the occurrence.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub job_id: Option<Uuid>,
    /// Run now (`POST /schedules/{name}/run`) rather than an occurrence.
    pub manual: bool,
    pub recorded_at: DateTime<Utc>,
}

impl From<&ScheduleRun> for ScheduleRunDto {
    fn from(r: &ScheduleRun) -> Self {
        ScheduleRunDto {
            scheduled_at: r.scheduled_at,
            job_id: r.job_id.map(|id| id.0),
            manual: r.manual,
            recorded_at: r.recorded_at,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
pub struct ScheduleList {
    /// Every schedule, by name.
    pub schedules: Vec<ScheduleView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
pub struct ScheduleRuns {
    /// Newest first.
    pub runs: Vec<ScheduleRunDto>,
}

/// What a manual run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
pub struct RunNowOutcome {
    /// `enqueued`: `job_id` is the new job. `skipped`: the overlap policy skipped it (no
    /// job). `already_handled`: an identical run was recorded already (no new job).
    pub outcome: RunOutcomeDto,
    #[schema(value_type = Option<String>, format = Uuid)]
    pub job_id: Option<Uuid>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = RunOutcome)]
pub enum RunOutcomeDto {
    Enqueued,
    Skipped,
    AlreadyHandled,
}

impl From<FireOutcome> for RunNowOutcome {
    fn from(o: FireOutcome) -> Self {
        match o {
            FireOutcome::Enqueued(id) => RunNowOutcome {
                outcome: RunOutcomeDto::Enqueued,
                job_id: Some(id.0),
            },
            FireOutcome::SkippedOverlap => RunNowOutcome {
                outcome: RunOutcomeDto::Skipped,
                job_id: None,
            },
            FireOutcome::AlreadyHandled => RunNowOutcome {
                outcome: RunOutcomeDto::AlreadyHandled,
                job_id: None,
            },
        }
    }
}

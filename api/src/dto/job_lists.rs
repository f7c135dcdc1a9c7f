//! Job-list bodies: a page of job summaries with its cursors and count, the query's named
//! values (sources, statuses, reasons, sort columns — the engine's own names), and a running
//! job's progress.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use deck_engine::{
    FailureReason, HotStatus, JobCount, JobFilter, JobSummary, Pillar, Progress, SortColumn, Timing,
};
use serde::{Deserialize, Serialize};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::{PartialSchema, ToSchema};
use uuid::Uuid;

use super::{StateDto, state_dto};

/// `format` of a page cursor: `<job id>~<sort key>`, as a page's `next` or `prev` gives it.
/// JSON Schema cannot say which keys fit which sort; `contract/hooks.py` draws cursors whose
/// key fits every sort, and the server answers 400 `invalid_cursor` for the rest.
pub const CURSOR_FORMAT: &str = "deck-cursor";

/// Longest `?q=` a job search takes, in characters.
pub const MAX_SEARCH_CHARS: usize = 200;

fn one_of(names: Vec<&'static str>, description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names))
        .description(Some(description))
        .into()
}

macro_rules! named_schema {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $schema:expr) => {
        $(#[$doc])*
        pub struct $ty;

        impl PartialSchema for $ty {
            fn schema() -> RefOr<Schema> {
                $schema
            }
        }

        impl ToSchema for $ty {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }
        }
    };
}

named_schema!(
    /// Which list: `Pillar`'s names.
    SourceName,
    "JobSource",
    one_of(
        Pillar::ALL.iter().map(|p| p.as_str()).collect(),
        "`active` (pending, fetched, processing), `archive` (succeeded) or `dlq` (dead)."
    )
);

named_schema!(
    /// An active job's status: `HotStatus`'s names, and the pending jobs split by their
    /// `Timing` as the overview's tiles split them.
    HotStatusName,
    "ActiveStatus",
    one_of(
        HotStatus::ALL
            .iter()
            .map(|s| s.as_str())
            .chain(Timing::ALL.iter().map(|t| t.as_str()))
            .collect(),
        "An active job's status (active list only; ignored elsewhere): `pending` (all of \
         them), `due` (pending and due now: the overview's Pending), `scheduled` (delayed or \
         waiting for a retry: the overview's Scheduled), `retrying` (waiting for a retry), \
         `fetched`, `processing`."
    )
);

/// What a `status` value picks: a status, or the pending jobs of one timing.
pub fn status_filter(raw: &str, filter: &mut JobFilter) -> bool {
    if let Some(timing) = Timing::ALL.into_iter().find(|t| t.as_str() == raw) {
        filter.timing = Some(timing);
        return true;
    }
    if let Some(status) = HotStatus::ALL.into_iter().find(|s| s.as_str() == raw) {
        filter.status = Some(status);
        return true;
    }
    false
}

named_schema!(
    /// Why a job died: `FailureReason`'s names.
    ReasonName,
    "FailureReason",
    one_of(
        FailureReason::ALL.iter().map(|r| r.as_str()).collect(),
        "Why a job died (dead-letter list only; ignored elsewhere)."
    )
);

named_schema!(
    /// A sortable column: `SortColumn`'s names.
    SortName,
    "SortColumn",
    one_of(
        SortColumn::ALL.iter().map(|c| c.as_str()).collect(),
        "The column a list is sorted by. `finished` sorts active jobs by creation."
    )
);

named_schema!(
    /// A sort direction.
    DirectionName,
    "SortDirection",
    one_of(vec!["asc", "desc"], "Ascending or descending.")
);

named_schema!(
    /// An error group's fingerprint (`Fingerprint`: 16 hex digits).
    FingerprintText,
    "Fingerprint",
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^[0-9a-fA-F]{16}$"))
        .description(Some(
            "An error group's fingerprint, as `GET /error-groups` lists it (16 hex digits)."
        ))
        .into()
);

named_schema!(
    /// A page cursor (see `CURSOR_FORMAT`).
    PageCursor,
    "PageCursor",
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::Custom(CURSOR_FORMAT.to_string())))
        .description(Some(
            "A position in a sorted list, as a page's `next` or `prev` gives it; use it with \
             the same source, filters and sort."
        ))
        .into()
);

named_schema!(
    /// A time bound of a list filter: RFC 3339 (`parse_time`).
    ListTime,
    "ListTime",
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::DateTime
        )))
        .description(Some(
            "An RFC 3339 time with its offset, like `2026-01-02T03:04:05Z`."
        ))
        .into()
);

/// A time bound of a list filter: an RFC 3339 time (what the document's `date-time` format
/// is). The console also takes a bare day or `YYYY-MM-DDTHH:MM` from its form; the API takes
/// the one exact form its document states.
pub fn parse_time(
    field: &'static str,
    raw: Option<String>,
) -> Result<Option<DateTime<Utc>>, crate::error::ApiError> {
    raw.map(|v| {
        DateTime::parse_from_rfc3339(&v)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| {
                crate::error::ApiError::bad_request(
                    "invalid_time",
                    format!(
                        "{field}={v:?} is not an RFC 3339 time ({e}); give one like \
                         2026-01-02T03:04:05Z"
                    ),
                )
                .with_field(field)
            })
    })
    .transpose()
}

/// How far a running job has got, as its handler last reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = JobProgress)]
pub struct ProgressDto {
    /// 0 to 100.
    pub percent: u8,
    pub message: String,
    /// When it was reported.
    pub at: DateTime<Utc>,
}

impl From<&Progress> for ProgressDto {
    fn from(p: &Progress) -> Self {
        ProgressDto {
            percent: p.percent,
            message: p.message.clone(),
            at: p.at,
        }
    }
}

/// One row of a job list: what the console's list shows, not the payload
/// (`GET /jobs/{id}` has the whole job).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = JobSummary)]
pub struct JobSummaryView {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    pub queue: String,
    #[serde(rename = "type")]
    pub job_type: String,
    pub state: StateDto,
    /// Why the job is dead (dead jobs only).
    pub reason: Option<String>,
    pub priority: i32,
    pub tags: Vec<String>,
    pub attempt: u32,
    pub created_at: DateTime<Utc>,
    pub scheduled_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub worker_id: Option<String>,
    /// The last attempt's error message, shortened.
    pub error: Option<String>,
    /// A job running in this server's engine: its last reported progress.
    pub progress: Option<ProgressDto>,
}

impl From<&JobSummary> for JobSummaryView {
    fn from(j: &JobSummary) -> Self {
        let (state, reason) = state_dto(j.state);
        JobSummaryView {
            id: j.id.0,
            queue: j.queue.clone(),
            job_type: j.job_type.clone(),
            state,
            reason,
            priority: j.priority,
            tags: j.tags.clone(),
            attempt: j.attempt,
            created_at: j.created_at,
            scheduled_at: j.scheduled_at,
            started_at: j.started_at,
            finished_at: j.finished_at,
            worker_id: j.worker_id.clone(),
            error: j.last_error.clone(),
            progress: None,
        }
    }
}

/// How many jobs match: exact for an unfiltered list, otherwise counted up to a cap
/// (10,000; 1,000 for a text search), when `capped` says more match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = JobCount)]
pub struct JobCountView {
    pub matching: u64,
    pub capped: bool,
}

impl From<JobCount> for JobCountView {
    fn from(c: JobCount) -> Self {
        JobCountView {
            matching: c.matching,
            capped: c.capped,
        }
    }
}

/// A page of a job list in its sort order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobPage {
    /// The list read: `active`, `archive` or `dlq`.
    pub source: String,
    /// The sort in force (the list's default when none was asked for).
    pub sort: String,
    pub dir: String,
    pub items: Vec<JobSummaryView>,
    /// `?after=` this for the next page; `null` on the last page.
    pub next: Option<String>,
    /// `?before=` this for the previous page; `null` on the first page.
    pub prev: Option<String>,
    pub count: JobCountView,
    /// A text search reads what no index answers only among rows listed (created for active
    /// jobs, finished otherwise) at or after this time; `?listed_before=` this searches the
    /// older rows. `null`: every row was searched.
    pub scan_from: Option<DateTime<Utc>>,
    /// Filters given that do not apply to this source (as the console, the list is read
    /// without them): `status` applies to active jobs, `reason` and `error_group` to dead
    /// letters, `finished_from`/`finished_to` to finished lists.
    pub ignored: Vec<String>,
    /// When `q` is a job id or an id prefix: the jobs it names in the other lists (up to 5
    /// each), so an id searched on the wrong list still finds its job.
    pub elsewhere: Vec<JobSummaryView>,
}

/// A job's progress: what the console's job page shows while it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobProgressView {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    pub state: StateDto,
    /// Why the job is dead (dead jobs only).
    pub reason: Option<String>,
    pub attempt: u32,
    /// The job runs in this server's engine: `progress`, `running_ms` and `cancelling` are
    /// live. False for a job that runs elsewhere (another instance, an external worker) or
    /// does not run.
    pub running_here: bool,
    /// How long the current attempt has run, in milliseconds.
    pub running_ms: Option<u64>,
    /// A cancel was asked for; the handler stops at its next heartbeat.
    pub cancelling: bool,
    /// What the handler last reported; `null` when it has reported nothing.
    pub progress: Option<ProgressDto>,
}

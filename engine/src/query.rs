//! Committed reads: job list filters, whitelisted sorts and keyset paging.
//!
//! Paging is keyset-based (sort value + a tie-breaker found from the id: the id itself on
//! SQL Server, the row's insertion order on SQLite), never OFFSET, so the last page
//! of a million-row archive costs what the first one does.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;
use crate::model::{
    FailureReason, HotStatus, Job, JobId, JobState, ParseEnumError, Pillar, Timestamp,
};

/// Narrow a job list. Every field is optional; all given fields must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFilter {
    pub queue: Option<String>,
    pub job_type: Option<String>,
    /// Only for the active source.
    pub status: Option<HotStatus>,
    /// Only for the active source: pending jobs due now, or waiting for a later time
    /// (delayed or retrying), or waiting for a retry. Implies `status = pending`.
    #[serde(default)]
    pub timing: Option<Timing>,
    /// Only for the DLQ source.
    pub reason: Option<FailureReason>,
    /// Only for the DLQ source: the dead letters of one error group (`ErrorGroup`).
    pub error_group: Option<Fingerprint>,
    /// Jobs carrying exactly this tag.
    pub tag: Option<String>,
    /// Case-insensitive substring over id, type, tags and last error (and the payload, with
    /// `payload`). Indexes answer it across the whole list for a job id or id prefix, a job
    /// type (finished lists) and error text of three characters or more; the rest (tags,
    /// payloads, shorter terms) is a scan, bounded by `scan_from` when that is set.
    pub text: Option<String>,
    /// `text` also searches payloads: opt-in, a payload is read only by a scan.
    #[serde(default)]
    pub payload: bool,
    /// Where the scanned part of a text search stops: rows listed at or after this time
    /// (created for active jobs, finished otherwise). Set from `Store::search_window` so a
    /// search reads a bounded number of rows; `None` scans the whole list.
    #[serde(default)]
    pub scan_from: Option<Timestamp>,
    /// Only rows listed before this time (created for active jobs, finished otherwise):
    /// "search older", the rows past a search window.
    #[serde(default)]
    pub listed_before: Option<Timestamp>,
    pub created_from: Option<Timestamp>,
    pub created_to: Option<Timestamp>,
    /// Archive and DLQ only.
    pub finished_from: Option<Timestamp>,
    pub finished_to: Option<Timestamp>,
}

impl JobFilter {
    pub fn is_empty(&self) -> bool {
        *self == JobFilter::default()
    }
}

/// When a pending job runs, as the overview's tiles split the pending ones: a list filtered
/// by a timing shows exactly what its tile counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Timing {
    /// Pending and due now (`scheduled_at <= now`): the Pending tile.
    Due,
    /// Pending with a later run time, delayed or waiting for a retry: the Scheduled tile.
    Scheduled,
    /// Pending with a later run time after a failed attempt (attempt > 0): waiting for a retry.
    Retrying,
}

impl Timing {
    pub const ALL: [Timing; 3] = [Timing::Due, Timing::Scheduled, Timing::Retrying];

    pub fn as_str(self) -> &'static str {
        match self {
            Timing::Due => "due",
            Timing::Scheduled => "scheduled",
            Timing::Retrying => "retrying",
        }
    }
}

impl fmt::Display for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Timing {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ParseEnumError::new("timing", s, "due, scheduled, retrying"))
    }
}

/// Sortable columns. The store maps each to a fixed column name: never spliced from input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SortColumn {
    CreatedAt,
    ScheduledAt,
    /// Archive and DLQ only; on the active source it falls back to `CreatedAt`.
    FinishedAt,
    Priority,
    Attempt,
    Queue,
    JobType,
}

impl SortColumn {
    pub const ALL: [SortColumn; 7] = [
        SortColumn::CreatedAt,
        SortColumn::ScheduledAt,
        SortColumn::FinishedAt,
        SortColumn::Priority,
        SortColumn::Attempt,
        SortColumn::Queue,
        SortColumn::JobType,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SortColumn::CreatedAt => "created",
            SortColumn::ScheduledAt => "scheduled",
            SortColumn::FinishedAt => "finished",
            SortColumn::Priority => "priority",
            SortColumn::Attempt => "attempt",
            SortColumn::Queue => "queue",
            SortColumn::JobType => "type",
        }
    }
}

impl fmt::Display for SortColumn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SortColumn {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                ParseEnumError::new(
                    "sort column",
                    s,
                    "created, scheduled, finished, priority, attempt, queue, type",
                )
            })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SortDirection {
    Asc,
    #[default]
    Desc,
}

impl SortDirection {
    pub fn reversed(self) -> Self {
        match self {
            SortDirection::Asc => SortDirection::Desc,
            SortDirection::Desc => SortDirection::Asc,
        }
    }
}

impl FromStr for SortDirection {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "asc" => Ok(SortDirection::Asc),
            "desc" => Ok(SortDirection::Desc),
            _ => Err(ParseEnumError::new("sort direction", s, "asc, desc")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSort {
    pub column: SortColumn,
    pub direction: SortDirection,
}

impl Default for JobSort {
    fn default() -> Self {
        JobSort {
            column: SortColumn::CreatedAt,
            direction: SortDirection::Desc,
        }
    }
}

impl JobSort {
    /// The order a list reads in when none is asked for, for the console and the API
    /// alike: newest first by creation for active jobs; finished lists newest-finished first,
    /// unless filtered by creation time, when they are listed by it — the range and the order
    /// are then one walk of one index, where a range sorted by finish time would read and
    /// sort every row in it.
    pub fn default_for(source: Pillar, filter: &JobFilter) -> JobSort {
        let created_range = filter.created_from.is_some() || filter.created_to.is_some();
        let column = if source == Pillar::Hot || created_range {
            SortColumn::CreatedAt
        } else {
            SortColumn::FinishedAt
        };
        JobSort {
            column,
            direction: SortDirection::Desc,
        }
    }
}

/// A position in a sorted list: the sort key of a row plus its id (which gives the
/// tie-breaker).
/// Opaque to callers; rendered into URLs with `Display` and parsed back with `FromStr`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cursor {
    /// The row's sort value in a backend-neutral text form (integer, timestamp in
    /// microseconds since the epoch, or text).
    pub key: String,
    pub id: JobId,
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}~{}", self.id, self.key)
    }
}

impl FromStr for Cursor {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (id, key) = s.split_once('~').ok_or_else(|| {
            ParseEnumError::new("page cursor", s, "a cursor taken from a page link")
        })?;
        let id = id.parse().map_err(|_| {
            ParseEnumError::new("page cursor", s, "a cursor taken from a page link")
        })?;
        Ok(Cursor {
            key: key.to_string(),
            id,
        })
    }
}

/// Which page of a sorted list to read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PagePosition {
    #[default]
    First,
    Last,
    /// Rows after this one in sort order.
    After(Cursor),
    /// Rows before this one in sort order.
    Before(Cursor),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobQuery {
    pub source: Pillar,
    pub filter: JobFilter,
    pub sort: JobSort,
    pub position: PagePosition,
    /// Rows per page (the store caps it at `MAX_PAGE_SIZE`).
    pub page_size: u32,
}

pub const MAX_PAGE_SIZE: u32 = 500;

impl JobQuery {
    pub fn new(source: Pillar) -> Self {
        JobQuery {
            source,
            filter: JobFilter::default(),
            sort: JobSort::default(),
            position: PagePosition::First,
            page_size: 50,
        }
    }
}

/// One row of a job list: enough for a table, not the payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSummary {
    pub id: JobId,
    pub queue: String,
    pub job_type: String,
    pub state: JobState,
    pub priority: i32,
    pub tags: Vec<String>,
    pub attempt: u32,
    pub created_at: Timestamp,
    pub scheduled_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub worker_id: Option<String>,
    /// The last attempt's error message (truncated by the store to a few hundred chars).
    pub last_error: Option<String>,
}

impl From<&Job> for JobSummary {
    fn from(job: &Job) -> Self {
        JobSummary {
            id: job.id,
            queue: job.queue.clone(),
            job_type: job.job_type.clone(),
            state: job.state,
            priority: job.priority,
            tags: job.tags.clone(),
            attempt: job.attempt,
            created_at: job.created_at,
            scheduled_at: job.scheduled_at,
            started_at: job.started_at,
            finished_at: job.finished_at,
            worker_id: job.worker_id.clone(),
            last_error: job
                .last_error()
                .map(|e| e.message.chars().take(300).collect()),
        }
    }
}

/// A page of rows in sort order, with cursors to its neighbours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Cursor of the first row, when rows exist before it.
    pub prev: Option<Cursor>,
    /// Cursor of the last row, when rows exist after it.
    pub next: Option<Cursor>,
}

/// Bulk actions over a filter or a selection of ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    /// DLQ → pending (attempts reset).
    Resurrect,
    /// Pending/fetched → DLQ `Cancelled`; processing → cancel requested.
    Cancel,
    /// Delete for good (on the active pillar: pending jobs only).
    Purge,
    /// Pending jobs waiting for a later time (delayed or retrying) become due now; the
    /// attempt count is unchanged, so no attempt is spent.
    RunNow,
    /// Pending jobs take this priority (claims order by it).
    SetPriority(i32),
}

impl BulkAction {
    /// The action's name in audit rows, events and URLs.
    pub fn as_str(self) -> &'static str {
        match self {
            BulkAction::Resurrect => "resurrect",
            BulkAction::Cancel => "cancel",
            BulkAction::Purge => "purge",
            BulkAction::RunNow => "run_now",
            BulkAction::SetPriority(_) => "set_priority",
        }
    }

    /// Whether the action destroys or ends jobs.
    pub fn is_destructive(self) -> bool {
        matches!(self, BulkAction::Cancel | BulkAction::Purge)
    }

    /// The word an operator types to confirm the action over a filter, at every door (the
    /// console's box, the API's `confirm`); `None` for the actions that only change when a
    /// job runs (run now, priority).
    pub fn confirm_word(self) -> Option<&'static str> {
        match self {
            BulkAction::Resurrect => Some("RESURRECT"),
            BulkAction::Cancel => Some("CANCEL"),
            BulkAction::Purge => Some("PURGE"),
            BulkAction::RunNow | BulkAction::SetPriority(_) => None,
        }
    }

    /// Whether the action applies to jobs of `source`: resurrect to the dead-letter pillar,
    /// cancel, run now and priority to active jobs, purge to any. The one statement of the
    /// rule and its message.
    pub fn check_source(self, source: Pillar) -> Result<(), crate::validation::ValidationError> {
        let applies = match self {
            BulkAction::Resurrect => source == Pillar::Dlq,
            BulkAction::Cancel | BulkAction::RunNow | BulkAction::SetPriority(_) => {
                source == Pillar::Hot
            }
            BulkAction::Purge => true,
        };
        if applies {
            return Ok(());
        }
        Err(crate::validation::ValidationError::new(
            "source",
            format!("{} does not apply to {source} jobs", self.as_str()),
            "resurrect works on dead jobs (dlq); cancel, run_now and set_priority on active \
             jobs (hot); purge on any",
        ))
    }
}

/// One step of a bulk action by filter, as asked of the store (`Store::bulk_filter_step`):
/// `action` on at most `limit` jobs of `source` that `filter` matches, with ids after `after`.
#[derive(Debug, Clone, Copy)]
pub struct BulkFilterStep<'a> {
    pub action: BulkAction,
    pub source: Pillar,
    pub filter: &'a JobFilter,
    pub after: Option<JobId>,
    pub limit: u32,
}

/// What one step of a bulk action by filter did (`Store::bulk_filter_step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BulkStep {
    /// Jobs the step selected (fewer than its limit: no more match).
    pub selected: u32,
    /// Jobs the action changed.
    pub affected: u64,
    /// The last selected id: where the next step starts.
    pub last: Option<JobId>,
}

impl FromStr for BulkAction {
    type Err = ParseEnumError;
    /// Parses the actions without a value; `set_priority` needs its priority and is built
    /// by the caller from its own field.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "resurrect" | "retry" => Ok(BulkAction::Resurrect),
            "cancel" => Ok(BulkAction::Cancel),
            "purge" | "delete" => Ok(BulkAction::Purge),
            "run_now" | "run-now" => Ok(BulkAction::RunNow),
            _ => Err(ParseEnumError::new(
                "bulk action",
                s,
                "resurrect, cancel, purge, run_now (set_priority takes a priority)",
            )),
        }
    }
}

/// A filtered list counts its rows up to this many and then says "10,000+": past it an
/// exact count would read every matching row for a number nobody acts on.
pub const COUNT_CAP: u64 = 10_000;

/// A text search counts up to this many: its matches are tested row by row, so counting to
/// `COUNT_CAP` would read ten times the rows for the same "many".
pub const TEXT_COUNT_CAP: u64 = 1_000;

/// Where a filter's count stops (see `COUNT_CAP`, `TEXT_COUNT_CAP`).
pub fn count_cap(filter: &JobFilter) -> u64 {
    let text = filter.text.as_deref().is_some_and(|t| !t.trim().is_empty());
    if text { TEXT_COUNT_CAP } else { COUNT_CAP }
}

/// The hyphenated form of a job id prefix (lowercase), when `text` is one long enough to
/// pick out a few jobs: 12 hex digits or more, typed with the id's hyphens or without. An id
/// starts with its creation time in milliseconds (UUIDv7), so a shorter prefix names every
/// job of a minute or more, which a search cannot list quickly newest first.
pub fn job_id_prefix(text: &str) -> Option<String> {
    const MIN_DIGITS: usize = 12;
    let digits: String = text.chars().filter(|c| *c != '-').collect();
    if digits.len() < MIN_DIGITS
        || digits.len() > 32
        || !digits.chars().all(|c| c.is_ascii_hexdigit())
    {
        return None;
    }
    let mut hyphenated = String::with_capacity(36);
    for (i, c) in digits.chars().enumerate() {
        if matches!(i, 8 | 12 | 16 | 20) {
            hyphenated.push('-');
        }
        hyphenated.push(c.to_ascii_lowercase());
    }
    // Hyphens elsewhere than an id has them: not an id.
    let typed = text.to_ascii_lowercase();
    (typed == hyphenated || typed == digits.to_ascii_lowercase()).then_some(hyphenated)
}

/// The rows a search scans (the part no index answers) before it asks to go further back.
pub const SEARCH_WINDOW_ROWS: u32 = 20_000;

/// How many jobs a list holds: exact for an unfiltered list (from the maintained counters),
/// otherwise counted up to `count_cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCount {
    pub matching: u64,
    /// More than `matching` match: the count stopped at the cap.
    pub capped: bool,
}

/// What a bulk action over a filter would touch (committed read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkPreview {
    pub matching: u64,
    pub sample: Vec<JobSummary>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_prefix_is_twelve_hex_digits_or_more_with_or_without_hyphens() {
        let id = "0190ABCD-EF01-7a2b-8c3d-0123456789ab";
        assert_eq!(job_id_prefix(&id[..13]).as_deref(), Some("0190abcd-ef01"));
        assert_eq!(
            job_id_prefix("0190abcdef017a").as_deref(),
            Some("0190abcd-ef01-7a")
        );
        assert_eq!(
            job_id_prefix(id).as_deref(),
            Some(id.to_ascii_lowercase().as_str())
        );
        for not_one in [
            "0190abcd",
            "0190abcd-ef0",
            "0190-abcdef01",
            "0190abcdef01x",
            "ledger-mismatch",
        ] {
            assert_eq!(job_id_prefix(not_one), None, "{not_one}");
        }
    }
}

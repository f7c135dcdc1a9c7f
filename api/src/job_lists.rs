//! `GET /jobs`: the console's job lists and search — a source (active, archive, dead
//! letters), its filters, a whitelisted sort and keyset cursors, with the count. The rules
//! the console shares (the default sort, the names, the cursors, the id search) are the
//! engine's (`JobSort::default_for`, the enums' names, `Cursor`, the store's id-prefix
//! search); unlike the console, a value that does not parse is a 400, not a note above the
//! list, and times are RFC 3339 (the console's form also takes a bare day).

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use deck_engine::{
    Cursor, FailureReason, Fingerprint, JobFilter, JobQuery, JobSort, MAX_PAGE_SIZE, PagePosition,
    Pillar, SortColumn, SortDirection,
};
use serde::Deserialize;
use utoipa::IntoParams;

use super::ApiState;
use super::dto::job_lists::{
    DirectionName, FingerprintText, HotStatusName, JobPage, JobSummaryView, ListTime,
    MAX_SEARCH_CHARS, PageCursor, ProgressDto, ReasonName, SortName, SourceName, parse_time,
    status_filter,
};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::ApiQuery;
use super::limits::check_count;
use super::principal::Viewer;
use super::responses::ReadErrors;

/// Rows per page when `?limit=` is absent.
pub const DEFAULT_LIMIT: u32 = 50;

/// The job list's query: the console's filters under the names the API gives them.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobListQuery {
    /// Which list; `active` when absent.
    #[param(value_type = Option<SourceName>)]
    pub source: Option<String>,
    /// Jobs of this queue.
    pub queue: Option<String>,
    /// Jobs of this type.
    #[serde(rename = "type")]
    pub job_type: Option<String>,
    /// Active jobs in this status.
    #[param(value_type = Option<HotStatusName>)]
    pub status: Option<String>,
    /// Dead letters that died for this reason.
    #[param(value_type = Option<ReasonName>)]
    pub reason: Option<String>,
    /// Dead letters of this error group (`GET /error-groups`).
    #[param(value_type = Option<FingerprintText>)]
    pub error_group: Option<String>,
    /// Jobs carrying exactly this tag.
    pub tag: Option<String>,
    /// Case-insensitive text in the id, type, tags or last error; a job id, or 12 hex digits
    /// or more of one, finds that job.
    #[param(max_length = 200)]
    pub q: Option<String>,
    /// `q` searches payloads too (a scan).
    pub payload: Option<bool>,
    /// Created at or after.
    #[param(value_type = Option<ListTime>)]
    pub created_from: Option<String>,
    /// Created at or before.
    #[param(value_type = Option<ListTime>)]
    pub created_to: Option<String>,
    /// Finished at or after (archive and dead letters).
    #[param(value_type = Option<ListTime>)]
    pub finished_from: Option<String>,
    /// Finished at or before (archive and dead letters).
    #[param(value_type = Option<ListTime>)]
    pub finished_to: Option<String>,
    /// Only rows listed before this time (created for active jobs, finished otherwise): a
    /// search's older rows, from its `scan_from`.
    #[param(value_type = Option<ListTime>)]
    pub listed_before: Option<String>,
    /// The sort column; newest first by creation (active) or finish (archive, dead letters;
    /// by creation when filtered by it) when absent.
    #[param(value_type = Option<SortName>)]
    pub sort: Option<String>,
    /// The sort direction; `desc` when absent.
    #[param(value_type = Option<DirectionName>)]
    pub dir: Option<String>,
    /// The page after this cursor (a page's `next`).
    #[param(value_type = Option<PageCursor>)]
    pub after: Option<String>,
    /// The page before this cursor (a page's `prev`); `after` wins when both are given.
    #[param(value_type = Option<PageCursor>)]
    pub before: Option<String>,
    /// The last page; wins over `after` and `before`.
    pub last: Option<bool>,
    /// Rows per page, 1 to 500; 50 when absent.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// A `status` that names neither a status nor a timing.
pub(crate) fn invalid_status(raw: &str) -> ApiError {
    ApiError::bad_request(
        "invalid_field",
        format!(
            "status={raw:?} is not one of: pending, due, scheduled, retrying, fetched, processing"
        ),
    )
    .with_field("status")
}

/// `raw` as one of `names`, exactly as the document lists them.
pub(crate) fn named<T: Copy>(
    field: &'static str,
    raw: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str,
) -> Result<T, ApiError> {
    all.iter()
        .copied()
        .find(|v| name(*v) == raw)
        .ok_or_else(|| {
            let expected: Vec<&str> = all.iter().map(|v| name(*v)).collect();
            ApiError::bad_request(
                "invalid_field",
                format!("{field}={raw:?} is not one of: {}", expected.join(", ")),
            )
            .with_field(field)
        })
}

/// A search term (`q`): empty means none; at most `MAX_SEARCH_CHARS` characters.
pub(crate) fn search_text(q: Option<String>) -> ApiResult<Option<String>> {
    let text = given(q);
    if let Some(text) = &text
        && text.chars().count() > MAX_SEARCH_CHARS
    {
        return Err(ApiError::bad_request(
            "invalid_field",
            format!("q is at most {MAX_SEARCH_CHARS} characters"),
        )
        .with_field("q"));
    }
    Ok(text)
}

/// A free-text filter value; empty means not given, as in the console's form. (Values the
/// document constrains — names from a list, patterns, times — are taken as given: an empty
/// one is a 400 as any other value outside the document's.)
pub(crate) fn given(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

/// An `error_group` value: a fingerprint.
pub(crate) fn fingerprint(raw: &str) -> ApiResult<Fingerprint> {
    raw.parse()
        .map_err(|e: deck_engine::ParseFingerprintError| {
            ApiError::bad_request("invalid_field", e.to_string()).with_field("error_group")
        })
}

fn cursor(field: &'static str, raw: &str) -> ApiResult<Cursor> {
    raw.parse().map_err(|_| {
        ApiError::bad_request(
            "invalid_cursor",
            format!(
                "{field}={raw:?} is not a page cursor; give a page's `next` (as after) or `prev` \
                 (as before) unchanged"
            ),
        )
        .with_field(field)
    })
}

impl JobListQuery {
    /// The engine's query, and the filters that do not apply to the source.
    fn into_job_query(self) -> ApiResult<(JobQuery, Vec<String>)> {
        let source = match self.source {
            None => Pillar::Hot,
            Some(s) => named("source", &s, &Pillar::ALL, Pillar::as_str)?,
        };
        let mut ignored = Vec::new();
        let mut filter = JobFilter {
            queue: given(self.queue),
            job_type: given(self.job_type),
            tag: given(self.tag),
            text: search_text(self.q)?,
            payload: self.payload.unwrap_or(false),
            created_from: parse_time("created_from", self.created_from)?,
            created_to: parse_time("created_to", self.created_to)?,
            listed_before: parse_time("listed_before", self.listed_before)?,
            ..JobFilter::default()
        };
        if let Some(s) = self.status {
            if source == Pillar::Hot {
                if !status_filter(&s, &mut filter) {
                    return Err(invalid_status(&s));
                }
            } else {
                ignored.push("status".to_string());
            }
        }
        if let Some(r) = self.reason {
            let reason = named("reason", &r, &FailureReason::ALL, FailureReason::as_str)?;
            if source == Pillar::Dlq {
                filter.reason = Some(reason);
            } else {
                ignored.push("reason".to_string());
            }
        }
        if let Some(g) = self.error_group {
            let group = fingerprint(&g)?;
            if source == Pillar::Dlq {
                filter.error_group = Some(group);
            } else {
                ignored.push("error_group".to_string());
            }
        }
        let finished_from = parse_time("finished_from", self.finished_from)?;
        let finished_to = parse_time("finished_to", self.finished_to)?;
        if source == Pillar::Hot {
            if finished_from.is_some() {
                ignored.push("finished_from".to_string());
            }
            if finished_to.is_some() {
                ignored.push("finished_to".to_string());
            }
        } else {
            filter.finished_from = finished_from;
            filter.finished_to = finished_to;
        }
        let mut sort = JobSort::default_for(source, &filter);
        if let Some(c) = self.sort {
            sort.column = named("sort", &c, &SortColumn::ALL, SortColumn::as_str)?;
        }
        if let Some(d) = self.dir {
            sort.direction = named(
                "dir",
                &d,
                &[SortDirection::Asc, SortDirection::Desc],
                direction_name,
            )?;
        }
        let position = if self.last == Some(true) {
            PagePosition::Last
        } else if let Some(a) = self.after {
            PagePosition::After(cursor("after", &a)?)
        } else if let Some(b) = self.before {
            PagePosition::Before(cursor("before", &b)?)
        } else {
            PagePosition::First
        };
        let page_size = check_count("limit", self.limit, DEFAULT_LIMIT, MAX_PAGE_SIZE)?;
        Ok((
            JobQuery {
                source,
                filter,
                sort,
                position,
                page_size,
            },
            ignored,
        ))
    }
}

fn direction_name(d: SortDirection) -> &'static str {
    match d {
        SortDirection::Asc => "asc",
        SortDirection::Desc => "desc",
    }
}

/// Jobs of one list, filtered, sorted and paged by cursors, with how many match: the
/// console's Jobs, Archive and Dead letters pages. A text search (`q`) finds a job by its
/// id or an id prefix of 12 hex digits or more in every list, and reads other text in the
/// newest rows only (`scan_from` says where it stopped).
#[utoipa::path(
    get, path = "/jobs", tag = "jobs",
    params(JobListQuery),
    responses(
        (status = 200, description = "A page of the list", body = JobPage),
        (status = 400, description = "A value that does not parse: a source, status, reason, \
                                       error group, time, sort, cursor or limit", body = ErrorBody),
        (status = 403, description = "A worker principal: it may only run jobs", body = ErrorBody),
        ReadErrors,
    )
)]
pub async fn list_jobs(
    State(state): State<ApiState>,
    Viewer(_who): Viewer,
    ApiQuery(query): ApiQuery<JobListQuery>,
) -> ApiResult<Json<JobPage>> {
    let (mut query, ignored) = query.into_job_query()?;
    let store = state.engine.store();
    // A text search scans what no index answers in a bounded window of the newest rows.
    if query.filter.text.is_some() {
        query.filter.scan_from = store
            .search_window(query.source, query.filter.listed_before)
            .await?;
    }
    let page = store.list_jobs(&query).await?;
    let count = store.count_jobs(query.source, &query.filter).await?;
    let pasted = query.filter.text.as_deref().unwrap_or_default();
    let elsewhere = store
        .find_by_id(pasted, 5)
        .await?
        .iter()
        .filter(|j| j.state.pillar() != query.source)
        .map(JobSummaryView::from)
        .collect();
    let progress: HashMap<_, _> = if query.source == Pillar::Hot {
        state
            .engine
            .snapshot()
            .running
            .into_iter()
            .filter_map(|r| r.progress.map(|p| (r.id, p)))
            .collect()
    } else {
        HashMap::new()
    };
    let items = page
        .items
        .iter()
        .map(|j| {
            let mut view = JobSummaryView::from(j);
            view.progress = progress.get(&j.id).map(ProgressDto::from);
            view
        })
        .collect();
    Ok(Json(JobPage {
        source: query.source.as_str().to_string(),
        sort: query.sort.column.as_str().to_string(),
        dir: direction_name(query.sort.direction).to_string(),
        items,
        next: page.next.map(|c| c.to_string()),
        prev: page.prev.map(|c| c.to_string()),
        count: count.into(),
        scan_from: query.filter.scan_from,
        ignored,
        elsewhere,
    }))
}

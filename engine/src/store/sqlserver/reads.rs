//! Committed reads of jobs: one job, finished jobs, the console's keyset pages and counts
//! (statements built by `job_lists`), and bulk previews.

use super::SqlServerStore;
use super::job_lists;
use super::pool::{Fault, Repeat};
use super::queries::{self, MAX_ROWS_PER_STATEMENT};
use super::rows::{self, count, ids_json};
use crate::error::StoreResult;
use crate::model::{Job, JobId, Pillar, Timestamp};
use crate::query::{
    BulkPreview, JobCount, JobFilter, JobQuery, JobSummary, MAX_PAGE_SIZE, Page, PagePosition,
    SEARCH_WINDOW_ROWS,
};

pub(super) async fn get_job(store: &SqlServerStore, id: JobId) -> StoreResult<Option<Job>> {
    let id_bytes = rows::id_param(&id);
    let answer = store
        .rows_of("get_job", Repeat::Always, &queries::GET_JOB, &[&id_bytes])
        .await?;
    match answer.first() {
        Some(row) => rows::any_job(row)
            .map(Some)
            .map_err(|f| store.fault("get_job", f)),
        None => Ok(None),
    }
}

pub(super) async fn finished_jobs(store: &SqlServerStore, ids: &[JobId]) -> StoreResult<Vec<Job>> {
    let mut jobs = Vec::new();
    for chunk in ids.chunks(MAX_ROWS_PER_STATEMENT) {
        let json = ids_json(chunk);
        let answer = store
            .rows_of(
                "finished_jobs",
                Repeat::Always,
                &queries::FINISHED_JOBS,
                &[&json],
            )
            .await?;
        jobs.extend(store.map_rows("finished_jobs", &answer, rows::any_job)?);
    }
    Ok(jobs)
}

pub(super) async fn list_jobs(
    store: &SqlServerStore,
    query: &JobQuery,
) -> StoreResult<Page<JobSummary>> {
    let size = query.page_size.clamp(1, MAX_PAGE_SIZE);
    let statement = job_lists::list_statement(&store.schema, query, size + 1)?;
    let rows = store.rows_of_built("list_jobs", &statement.built).await?;
    let mut items = store.map_rows("list_jobs", &rows, |r| rows::summary(r, query.source))?;
    let more = items.len() > size as usize;
    items.truncate(size as usize);
    if statement.reversed {
        items.reverse();
    }
    let cursor = |item: &JobSummary| job_lists::cursor_for(item, query.source, query.sort.column);
    let (has_prev, has_next) = match &query.position {
        PagePosition::First => (false, more),
        PagePosition::After(_) => (true, more),
        PagePosition::Before(_) => (more, true),
        PagePosition::Last => (more, false),
    };
    Ok(Page {
        prev: if has_prev {
            items.first().map(cursor)
        } else {
            None
        },
        next: if has_next {
            items.last().map(cursor)
        } else {
            None
        },
        items,
    })
}

pub(super) async fn count_jobs(
    store: &SqlServerStore,
    source: Pillar,
    filter: &JobFilter,
) -> StoreResult<JobCount> {
    let cap = crate::query::count_cap(filter);
    let built = job_lists::count_statement(&store.schema, source, filter, cap);
    let rows = store.rows_of_built("count_jobs", &built).await?;
    let n = match rows.first() {
        Some(row) => count(row, "matching").map_err(|f| store.fault("count_jobs", f))?,
        None => 0,
    };
    let capped = !filter.is_empty() && n > cap;
    Ok(JobCount {
        matching: if capped { cap } else { n },
        capped,
    })
}

pub(super) async fn search_window(
    store: &SqlServerStore,
    source: Pillar,
    before: Option<Timestamp>,
) -> StoreResult<Option<Timestamp>> {
    let built =
        job_lists::search_window_statement(&store.schema, source, before, SEARCH_WINDOW_ROWS);
    let rows = store.rows_of_built("search_window", &built).await?;
    match rows.first() {
        Some(row) => {
            rows::opt_time(row, "window_from").map_err(|f| store.fault("search_window", f))
        }
        None => Ok(None),
    }
}

pub(super) async fn bulk_preview(
    store: &SqlServerStore,
    source: Pillar,
    filter: &JobFilter,
    sample: u32,
) -> StoreResult<BulkPreview> {
    let built =
        job_lists::preview_statement(&store.schema, source, filter, sample.min(MAX_PAGE_SIZE));
    let answer = store.rows_of_built("bulk_preview", &built).await?;
    // Every row carries the count; the sample columns are NULL when nothing matched.
    let matching = match answer.first() {
        Some(row) => count(row, "matching").map_err(|f| store.fault("bulk_preview", f))?,
        None => 0,
    };
    let mut sample_rows = Vec::new();
    for row in answer {
        let present = row
            .try_get::<&[u8], _>("id")
            .map_err(|e| store.fault("bulk_preview", Fault::Driver(e)))?
            .is_some();
        if present {
            sample_rows.push(row);
        }
    }
    let sample = store.map_rows("bulk_preview", &sample_rows, |r| rows::summary(r, source))?;
    Ok(BulkPreview { matching, sample })
}

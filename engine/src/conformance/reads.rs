//! Committed reads: filtered job lists and keyset paging in every direction.

use std::cmp::Ordering;
use std::collections::HashSet;

use super::support::*;
use crate::model::{
    Completion, EnqueueRequest, FailureReason, HotStatus, JobId, Pillar, Timestamp,
};
use crate::query::{
    Cursor, JobCount, JobFilter, JobQuery, JobSort, JobSummary, Page, PagePosition, SortColumn,
    SortDirection,
};
use crate::store::Store;

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Int(i64),
    Time(Timestamp),
    Text(String),
}

fn key(source: Pillar, column: SortColumn, row: &JobSummary) -> Key {
    match column {
        SortColumn::CreatedAt => Key::Time(row.created_at),
        SortColumn::ScheduledAt => Key::Time(row.scheduled_at),
        SortColumn::FinishedAt if source == Pillar::Hot => Key::Time(row.created_at),
        SortColumn::FinishedAt => Key::Time(row.finished_at.expect("finished rows have a time")),
        SortColumn::Priority => Key::Int(i64::from(row.priority)),
        SortColumn::Attempt => Key::Int(i64::from(row.attempt)),
        SortColumn::Queue => Key::Text(row.queue.clone()),
        SortColumn::JobType => Key::Text(row.job_type.clone()),
    }
}

fn ids(rows: &[JobSummary]) -> Vec<JobId> {
    rows.iter().map(|r| r.id).collect()
}

fn query(
    source: Pillar,
    filter: &JobFilter,
    sort: JobSort,
    position: PagePosition,
    size: u32,
) -> JobQuery {
    JobQuery {
        source,
        filter: filter.clone(),
        sort,
        position,
        page_size: size,
    }
}

/// The whole list in one page, then the same list paged forward from `First` and backward
/// from `Last` at several page sizes: every way of reading must give the same sequence, in
/// sort order, each row once. That only holds when the tie-breaker is a stable total order.
async fn check_paging(
    store: &dyn Store,
    source: Pillar,
    filter: &JobFilter,
    sort: JobSort,
    expected: &HashSet<JobId>,
) {
    let what = format!("{source} sorted by {} {:?}", sort.column, sort.direction);
    let full = store
        .list_jobs(&query(source, filter, sort, PagePosition::First, 500))
        .await
        .unwrap();
    assert_eq!(
        (full.prev.as_ref(), full.next.as_ref()),
        (None, None),
        "{what}: one page"
    );
    let full_ids = ids(&full.items);
    assert_eq!(full_ids.len(), expected.len(), "{what}: each row once");
    assert_eq!(
        full_ids.iter().copied().collect::<HashSet<_>>(),
        *expected,
        "{what}"
    );
    for pair in full.items.windows(2) {
        let order = key(source, sort.column, &pair[0]).cmp(&key(source, sort.column, &pair[1]));
        let wrong = match sort.direction {
            SortDirection::Asc => Ordering::Greater,
            SortDirection::Desc => Ordering::Less,
        };
        assert_ne!(
            order, wrong,
            "{what}: rows out of order: {:?} then {:?}",
            pair[0], pair[1]
        );
    }

    for size in [3u32, 5] {
        // Forward.
        let mut forward = Walk::from(
            store,
            query(source, filter, sort, PagePosition::First, size),
        );
        let mut seen = Vec::new();
        loop {
            let page = forward.page(&format!("{what}: paging forward")).await;
            let pages = forward.pages;
            if pages == 1 {
                assert_eq!(page.prev, None, "{what}: nothing before the first page");
            } else {
                assert!(
                    page.prev.is_some(),
                    "{what}: page {pages} has a previous page"
                );
            }
            seen.extend(ids(&page.items));
            match page.next {
                Some(c) => {
                    assert_eq!(
                        page.items.len(),
                        size as usize,
                        "{what}: only the last page is short"
                    );
                    assert_eq!(
                        c.id,
                        page.items.last().unwrap().id,
                        "{what}: next cursor is the last row"
                    );
                    forward.query.position = PagePosition::After(c);
                }
                None => break,
            }
        }
        assert_eq!(seen, full_ids, "{what}: forward paging by {size}");

        // Backward from the end.
        let mut backward = Walk::from(store, query(source, filter, sort, PagePosition::Last, size));
        let mut seen: Vec<JobId> = Vec::new();
        loop {
            let page = backward.page(&format!("{what}: paging backward")).await;
            if backward.pages == 1 {
                assert_eq!(page.next, None, "{what}: nothing after the last page");
                let expected_len = full_ids.len().min(size as usize);
                assert_eq!(
                    page.items.len(),
                    expected_len,
                    "{what}: the last page is full"
                );
            } else {
                assert!(page.next.is_some(), "{what}: page has a next page");
            }
            let mut chunk = ids(&page.items);
            chunk.extend(seen);
            seen = chunk;
            match page.prev {
                Some(c) => {
                    assert_eq!(
                        c.id, page.items[0].id,
                        "{what}: prev cursor is the first row"
                    );
                    backward.query.position = PagePosition::Before(c);
                }
                None => break,
            }
        }
        assert_eq!(seen, full_ids, "{what}: backward paging by {size}");
    }
}

/// A list read one page at a time, each page's cursor telling where the next read starts.
struct Walk<'a> {
    store: &'a dyn Store,
    query: JobQuery,
    pages: u32,
}

impl<'a> Walk<'a> {
    fn from(store: &'a dyn Store, query: JobQuery) -> Self {
        Walk {
            store,
            query,
            pages: 0,
        }
    }

    /// The page at the walk's position, holding at most the page size. No list here needs
    /// 20 pages: a walk that takes more does not end.
    async fn page(&mut self, walk: &str) -> Page<JobSummary> {
        self.pages += 1;
        assert!(self.pages <= 20, "{walk} ends");
        let page = self.store.list_jobs(&self.query).await.unwrap();
        assert!(page.items.len() <= self.query.page_size as usize);
        page
    }
}

/// Thirteen hot jobs with ties on every sortable column.
async fn hot_dataset(store: &dyn Store) -> Vec<JobId> {
    let t0 = now_ms() - secs(3600);
    let mut reqs = Vec::new();
    for i in 0..13i64 {
        reqs.push(EnqueueRequest {
            priority: [0, 5, 5, -1, 0][i as usize % 5],
            scheduled_at: Some(t0 + secs([10, 20, 10, 30][i as usize % 4])),
            ..EnqueueRequest::new(
                ["alpha", "beta", "gamma"][i as usize % 3],
                ["x", "y"][i as usize % 2],
                "{}",
            )
        });
    }
    let all: Vec<JobId> = enqueue_all(store, reqs).await;
    // Give some of them attempts: run and retry (due at once) a few, one of them twice.
    for round in 0..2 {
        let n = if round == 0 { 4 } else { 1 };
        let running = start(store, "pager", n).await;
        let retries = running
            .iter()
            .map(|id| Completion::Retry {
                id: *id,
                error: error(round + 1, "again"),
                // Due before everything else, so the second round picks a retried job.
                retry_at: t0 - secs(100 * i64::from(round + 1)),
            })
            .collect();
        store.complete("pager", retries).await.unwrap();
    }
    all
}

pub async fn list_jobs_pages_every_sort_both_ways(f: StoreFactory) {
    let store = f.store();
    let all: HashSet<JobId> = hot_dataset(&*store).await.into_iter().collect();
    let attempts: HashSet<u32> = list_all(&*store, Pillar::Hot, JobFilter::default())
        .await
        .iter()
        .map(|r| r.attempt)
        .collect();
    assert_eq!(
        attempts,
        HashSet::from([0, 1, 2]),
        "the dataset has attempt ties"
    );
    for column in SortColumn::ALL {
        for direction in [SortDirection::Asc, SortDirection::Desc] {
            let sort = JobSort { column, direction };
            check_paging(&*store, Pillar::Hot, &JobFilter::default(), sort, &all).await;
        }
    }
    // Paging a filtered list.
    let alpha: HashSet<JobId> = ids_in(&*store, Pillar::Hot, filter_queue("alpha"))
        .await
        .into_iter()
        .collect();
    assert_eq!(alpha.len(), 5);
    check_paging(
        &*store,
        Pillar::Hot,
        &filter_queue("alpha"),
        JobSort::default(),
        &alpha,
    )
    .await;
    // Beyond the cap, a page holds at most MAX_PAGE_SIZE rows; an empty list is one empty page.
    let empty = store
        .list_jobs(&query(
            Pillar::Dlq,
            &JobFilter::default(),
            JobSort::default(),
            PagePosition::Last,
            10,
        ))
        .await
        .unwrap();
    assert!(empty.items.is_empty() && empty.prev.is_none() && empty.next.is_none());
    assert_counters_match_rows(&*store).await;
}

pub async fn list_jobs_pages_archive_and_dlq_by_finish_time(f: StoreFactory) {
    let store = f.store();
    let mut archived = HashSet::new();
    let mut dead = HashSet::new();
    for i in 0..8 {
        archived.insert(archived_job(&*store, req(["a", "b"][i % 2], "t")).await);
        dead.insert(
            dead_job(
                &*store,
                req(["a", "b"][i % 2], "t"),
                FailureReason::Fatal,
                "x",
            )
            .await,
        );
    }
    for column in [
        SortColumn::FinishedAt,
        SortColumn::CreatedAt,
        SortColumn::Queue,
    ] {
        for direction in [SortDirection::Asc, SortDirection::Desc] {
            let sort = JobSort { column, direction };
            check_paging(
                &*store,
                Pillar::Archive,
                &JobFilter::default(),
                sort,
                &archived,
            )
            .await;
            check_paging(&*store, Pillar::Dlq, &JobFilter::default(), sort, &dead).await;
        }
    }
    assert_counters_match_rows(&*store).await;
}

pub async fn list_jobs_ties_keep_one_order_both_ways(f: StoreFactory) {
    let store = f.store();
    let at = now_ms() - secs(60);
    let reqs = (0..11)
        .map(|_| EnqueueRequest {
            priority: 4,
            scheduled_at: Some(at),
            ..req("same", "same")
        })
        .collect();
    let all: HashSet<JobId> = enqueue_all(&*store, reqs).await.into_iter().collect();
    for column in [
        SortColumn::Priority,
        SortColumn::ScheduledAt,
        SortColumn::Queue,
        SortColumn::JobType,
        SortColumn::Attempt,
    ] {
        for direction in [SortDirection::Asc, SortDirection::Desc] {
            let sort = JobSort { column, direction };
            check_paging(&*store, Pillar::Hot, &JobFilter::default(), sort, &all).await;
            // Both directions are the same order reversed: the tie-breaker follows the direction.
        }
        let asc = list_all_sorted(&*store, column, SortDirection::Asc).await;
        let mut desc = list_all_sorted(&*store, column, SortDirection::Desc).await;
        desc.reverse();
        assert_eq!(asc, desc, "{column}: descending is ascending reversed");
    }
    assert_counters_match_rows(&*store).await;
}

/// Jobs finished in one batch share their finish time: the archive's default sort is all ties.
pub async fn list_jobs_pages_jobs_finished_together(f: StoreFactory) {
    let store = f.store();
    enqueue_n(&*store, "batch", "t", 9).await;
    let running = start(&*store, "w-batch", 9).await;
    assert_eq!(running.len(), 9);
    let outcomes = store
        .complete("w-batch", all_succeeded(&running))
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 9);
    let archived: HashSet<JobId> = running.into_iter().collect();
    for direction in [SortDirection::Asc, SortDirection::Desc] {
        let sort = JobSort {
            column: SortColumn::FinishedAt,
            direction,
        };
        for filter in [JobFilter::default(), filter_queue("batch")] {
            check_paging(&*store, Pillar::Archive, &filter, sort, &archived).await;
        }
    }
    assert_counters_match_rows(&*store).await;
}

/// A page link outlives its row: the job at the cursor may be purged before the next page is
/// read. Paging on from there may show a row twice but must not skip one.
pub async fn a_page_after_a_vanished_row_skips_nothing(f: StoreFactory) {
    let store = f.store();
    let enqueued = store
        .enqueue_batch((0..9).map(|_| req("gone", "t")).collect())
        .await
        .unwrap();
    assert_eq!(enqueued.len(), 9);
    for direction in [SortDirection::Asc, SortDirection::Desc] {
        let sort = JobSort {
            column: SortColumn::CreatedAt,
            direction,
        };
        let filter = filter_queue("gone");
        let first = store
            .list_jobs(&query(Pillar::Hot, &filter, sort, PagePosition::First, 3))
            .await
            .unwrap();
        let cursor = first.next.clone().expect("more than one page");
        assert_eq!(store.purge(Pillar::Hot, &[cursor.id]).await.unwrap(), 1);
        let mut seen: HashSet<JobId> = ids(&first.items).into_iter().collect();
        let mut position = PagePosition::After(cursor);
        for _ in 0..10 {
            let page = store
                .list_jobs(&query(Pillar::Hot, &filter, sort, position, 3))
                .await
                .unwrap();
            seen.extend(ids(&page.items));
            match page.next {
                Some(next) => position = PagePosition::After(next),
                None => break,
            }
        }
        let left: HashSet<JobId> = ids_in(&*store, Pillar::Hot, filter.clone())
            .await
            .into_iter()
            .collect();
        assert!(
            left.is_subset(&seen),
            "{direction:?}: rows skipped after a vanished cursor: {:?}",
            left.difference(&seen).collect::<Vec<_>>()
        );
    }
    assert_counters_match_rows(&*store).await;
}

/// A page of every hot job.
async fn hot_page(
    store: &dyn Store,
    sort: JobSort,
    position: PagePosition,
    size: u32,
) -> Page<JobSummary> {
    let query = query(Pillar::Hot, &JobFilter::default(), sort, position, size);
    store.list_jobs(&query).await.unwrap()
}

async fn list_all_sorted(
    store: &dyn Store,
    column: SortColumn,
    direction: SortDirection,
) -> Vec<JobId> {
    let sort = JobSort { column, direction };
    let page = hot_page(store, sort, PagePosition::First, 500).await;
    ids(&page.items)
}

pub async fn cursors_round_trip_through_text(f: StoreFactory) {
    let store = f.store();
    hot_dataset(&*store).await;
    for column in SortColumn::ALL {
        let sort = JobSort {
            column,
            direction: SortDirection::Asc,
        };
        let first = hot_page(&*store, sort, PagePosition::First, 4).await;
        let next = first.next.clone().expect("more than one page");
        let text = next.to_string();
        let parsed: Cursor = text.parse().unwrap();
        assert_eq!(parsed, next, "{column}: cursor {text:?} parses back");
        let direct = hot_page(&*store, sort, PagePosition::After(next), 4).await;
        let via_text = hot_page(&*store, sort, PagePosition::After(parsed), 4).await;
        assert_eq!(direct, via_text);
        let prev: Cursor = direct.prev.clone().unwrap().to_string().parse().unwrap();
        let back = hot_page(&*store, sort, PagePosition::Before(prev), 4).await;
        assert_eq!(
            ids(&back.items),
            ids(&first.items),
            "{column}: back to the first page"
        );
    }
    assert!("garbage".parse::<Cursor>().is_err());

    // A text key may hold the separator itself.
    for name in ["a~b", "a~c", "ä~ü"] {
        enqueue(&*store, req(name, "t")).await;
    }
    let sort = JobSort {
        column: SortColumn::Queue,
        direction: SortDirection::Desc,
    };
    let mut position = PagePosition::First;
    let mut seen = Vec::new();
    loop {
        let page = hot_page(&*store, sort, position, 1).await;
        seen.extend(page.items.iter().map(|r| r.queue.clone()));
        match page.next {
            Some(c) => position = PagePosition::After(c.to_string().parse().unwrap()),
            None => break,
        }
    }
    let mut expected = seen.clone();
    expected.sort();
    expected.reverse();
    assert_eq!(seen, expected);
    assert_eq!(seen.len(), 16, "every row once");
    assert!("not-a-uuid~123".parse::<Cursor>().is_err());
    assert_counters_match_rows(&*store).await;
}

pub async fn list_jobs_filters_each_pillar(f: StoreFactory) {
    let store = f.store();
    let tagged = |queue: &str, job_type: &str, tags: &[&str]| EnqueueRequest {
        tags: tags.iter().map(|t| t.to_string()).collect(),
        ..req(queue, job_type)
    };
    // Hot: two generations separated in time.
    let report = enqueue(
        &*store,
        tagged("alpha", "Daily_Report", &["customer-acme", "eu"]),
    )
    .await;
    let mail = enqueue(&*store, tagged("alpha", "send_mail", &["eu"])).await;
    let other = enqueue(&*store, tagged("beta", "send_mail", &["us"])).await;
    let_clock_advance().await;
    let late = enqueue(&*store, tagged("beta", "Daily_Report", &["europe"])).await;
    let fetched = enqueue(&*store, tagged("gamma", "send_mail", &[])).await;
    let running = enqueue(&*store, tagged("gamma", "send_mail", &[])).await;
    let got = claim_jobs(&*store, "w1", 2, Some(vec!["gamma".into()])).await;
    assert_eq!(got.len(), 2);
    assert_eq!(
        store.mark_processing("w1", &[running]).await.unwrap(),
        vec![running]
    );

    let hot = |filter: JobFilter| {
        let store = store.clone();
        async move { ids_in(&*store, Pillar::Hot, filter).await }
    };
    assert_eq!(hot(JobFilter::default()).await.len(), 6);
    let text = |t: &str| filter_where(|f| f.text = Some(t.into()));
    let tag = |t: &str| filter_where(|f| f.tag = Some(t.into()));
    let of_type = |t: &str| filter_where(|f| f.job_type = Some(t.into()));
    let created = |id: JobId| {
        let store = store.clone();
        async move { job(&*store, id).await.created_at }
    };
    let (early_max, late_min) = (created(other).await, created(late).await);
    assert!(
        early_max < late_min,
        "the clock moved between the generations"
    );
    let mid = early_max + (late_min - early_max) / 2;
    let id_part = mail.to_string()[24..].to_uppercase();
    let hot_cases = [
        ("one queue", filter_queue("alpha"), vec![report, mail]),
        (
            "one type",
            of_type("send_mail"),
            vec![mail, other, fetched, running],
        ),
        (
            "all given fields must match",
            JobFilter {
                queue: Some("beta".into()),
                job_type: Some("send_mail".into()),
                ..Default::default()
            },
            vec![other],
        ),
        (
            "pending",
            filter_where(|f| f.status = Some(HotStatus::Pending)),
            vec![report, mail, other, late],
        ),
        (
            "fetched",
            filter_where(|f| f.status = Some(HotStatus::Fetched)),
            vec![fetched],
        ),
        (
            "processing",
            filter_where(|f| f.status = Some(HotStatus::Processing)),
            vec![running],
        ),
        (
            "a tag matches exactly, not as a prefix of europe",
            tag("eu"),
            vec![report, mail],
        ),
        ("text: type, any case", text("REPORT"), vec![report, late]),
        ("text: tags", text("Acme"), vec![report]),
        ("text: id", text(&id_part), vec![mail]),
        ("text: no such thing", text("no such thing"), vec![]),
        // Wildcards of the underlying LIKE are plain characters here.
        ("_ matches an underscore", text("y_r"), vec![report, late]),
        ("_ matches only an underscore", text("Dail__Report"), vec![]),
        ("% matches only a percent sign", text("%"), vec![]),
        (
            "% matches only a percent sign, inside",
            text("Daily%Report"),
            vec![],
        ),
        (
            "created from",
            filter_where(|f| f.created_from = Some(mid)),
            vec![late, fetched, running],
        ),
        (
            "created to",
            filter_where(|f| f.created_to = Some(mid)),
            vec![report, mail, other],
        ),
        (
            "created in a window, in one queue",
            JobFilter {
                created_from: Some(mid),
                created_to: Some(mid + secs(3600)),
                queue: Some("beta".into()),
                ..Default::default()
            },
            vec![late],
        ),
    ];
    for (case, filter, expected) in hot_cases {
        assert_eq!(hot(filter).await, sorted(expected), "hot: {case}");
    }

    // Archive and DLQ: reasons, errors, finish times.
    let a1 = archived_job(&*store, tagged("arch", "export", &["eu"])).await;
    let_clock_advance().await;
    let a2 = archived_job(&*store, tagged("arch", "import", &[])).await;
    let d1 = dead_job(
        &*store,
        tagged("dl", "export", &[]),
        FailureReason::Fatal,
        "Connection REFUSED by upstream",
    )
    .await;
    let_clock_advance().await;
    let d2 = dead_job(
        &*store,
        tagged("dl", "export", &["eu"]),
        FailureReason::Failed,
        "timeout",
    )
    .await;
    let d3 = enqueue(&*store, tagged("dl", "import", &[])).await;
    store.cancel(d3).await.unwrap();

    let dlq = |filter: JobFilter| {
        let store = store.clone();
        async move { ids_in(&*store, Pillar::Dlq, filter).await }
    };
    let finished = |id: JobId| {
        let store = store.clone();
        async move { job(&*store, id).await.finished_at.unwrap() }
    };
    let (fa1, fa2) = (finished(a1).await, finished(a2).await);
    assert!(fa1 < fa2);
    let archived_mid = fa1 + (fa2 - fa1) / 2;
    let (fd1, fd2) = (finished(d1).await, finished(d2).await);
    assert!(fd1 < fd2);
    let dead_mid = fd1 + (fd2 - fd1) / 2;
    let reason = |r: FailureReason| filter_where(|f| f.reason = Some(r));
    let finished_from = |t: Timestamp| filter_where(|f| f.finished_from = Some(t));
    let finished_to = |t: Timestamp| filter_where(|f| f.finished_to = Some(t));
    let finished_cases = [
        ("all", Pillar::Archive, JobFilter::default(), vec![a1, a2]),
        ("all", Pillar::Dlq, JobFilter::default(), vec![d1, d2, d3]),
        ("fatal", Pillar::Dlq, reason(FailureReason::Fatal), vec![d1]),
        (
            "cancelled",
            Pillar::Dlq,
            reason(FailureReason::Cancelled),
            vec![d3],
        ),
        (
            "last error, any case",
            Pillar::Dlq,
            text("refused"),
            vec![d1],
        ),
        ("tag", Pillar::Dlq, tag("eu"), vec![d2]),
        ("tag", Pillar::Archive, tag("eu"), vec![a1]),
        ("type", Pillar::Archive, of_type("import"), vec![a2]),
        (
            "a queue only the DLQ has",
            Pillar::Archive,
            filter_queue("dl"),
            vec![],
        ),
        (
            "finished from",
            Pillar::Archive,
            finished_from(archived_mid),
            vec![a2],
        ),
        (
            "finished to",
            Pillar::Archive,
            finished_to(archived_mid),
            vec![a1],
        ),
        ("finished to", Pillar::Dlq, finished_to(dead_mid), vec![d1]),
        (
            "finished from",
            Pillar::Dlq,
            finished_from(dead_mid),
            vec![d2, d3],
        ),
    ];
    for (case, pillar, filter, expected) in finished_cases {
        let listed = ids_in(&*store, pillar, filter).await;
        assert_eq!(listed, sorted(expected), "{pillar}: {case}");
    }

    // Quotes and escapes in a search are just characters.
    for odd in [
        "O'Brien",
        "\"quoted\"",
        "back\\slash",
        "semi;colon --",
        "[x]",
    ] {
        assert!(hot(text(odd)).await.is_empty(), "{odd}");
        assert!(dlq(text(odd)).await.is_empty(), "{odd}");
    }

    // A long error is cut for the list row, not for the job.
    let long = format!("{} end", "word ".repeat(400));
    let wordy = dead_job(
        &*store,
        tagged("dl", "wordy", &[]),
        FailureReason::Failed,
        &long,
    )
    .await;

    // Every row of every list says what the job itself says.
    for pillar in Pillar::ALL {
        for row in list_all(&*store, pillar, JobFilter::default()).await {
            let full = job(&*store, row.id).await;
            let expected = JobSummary::from(&full);
            let cut = row.last_error.clone();
            assert_eq!(
                JobSummary {
                    last_error: None,
                    ..row
                },
                JobSummary {
                    last_error: None,
                    ..expected
                }
            );
            let message = full.last_error().map(|e| e.message.clone());
            match (cut, message) {
                (None, None) => {}
                (Some(cut), Some(message)) => {
                    assert!(
                        message.starts_with(&cut),
                        "{cut:?} is a prefix of the error"
                    );
                    assert!(!cut.is_empty());
                    assert!(cut.chars().count() <= 1000, "a few hundred characters");
                    if full.id == wordy {
                        assert!(cut.len() < long.len(), "a long error is cut");
                    }
                }
                other => panic!("last error of {}: {other:?}", full.id),
            }
        }
    }
    assert_counters_match_rows(&*store).await;
}

/// A bounded text search and a list's count: the scanned part of a search (tags, and
/// payloads when asked) reads only the rows listed since `scan_from`, while a full job id is
/// found anywhere; payloads are searched only on request; `listed_before` lists the older
/// rows; counts are exact for unfiltered lists and below the cap.
pub async fn text_search_windows_payloads_and_counts(f: StoreFactory) {
    let store = f.store();
    let request = |queue: &str, job_type: &str| {
        let mut r = EnqueueRequest::new(queue, job_type, r#"{"customer":"c-4711"}"#);
        r.tags = vec!["blue".into()];
        r
    };
    let old = enqueue(&*store, request("win", "report")).await;
    let_clock_advance().await;
    let new = enqueue(&*store, request("win", "report")).await;
    let (t_old, t_new) = (
        job(&*store, old).await.created_at,
        job(&*store, new).await.created_at,
    );
    assert!(t_old < t_new, "the clock moved between the two");
    let search = |text: &str, payload: bool, scan_from, listed_before| JobFilter {
        text: Some(text.into()),
        payload,
        scan_from,
        listed_before,
        ..Default::default()
    };
    let hot = |filter: JobFilter| {
        let store = store.clone();
        async move { ids_in(&*store, Pillar::Hot, filter).await }
    };
    assert_eq!(
        hot(search("blue", false, None, None)).await,
        sorted(vec![old, new])
    );
    assert_eq!(
        hot(search("blue", false, Some(t_new), None)).await,
        vec![new],
        "a tag is searched in the window only"
    );
    assert_eq!(
        hot(search(&old.to_string(), false, Some(t_new), None)).await,
        vec![old],
        "a full id is found outside the window"
    );
    assert_eq!(
        hot(search(&old.to_string()[..13], false, Some(t_new), None)).await,
        vec![old],
        "an id prefix of 12 hex digits is found outside the window"
    );
    assert!(
        hot(search("c-4711", false, None, None)).await.is_empty(),
        "payloads are not searched unless asked"
    );
    assert_eq!(
        hot(search("C-4711", true, None, None)).await,
        sorted(vec![old, new])
    );
    assert_eq!(
        hot(search("blue", false, None, Some(t_new))).await,
        vec![old],
        "listed before the newer job"
    );

    let count = |source: Pillar, filter: JobFilter| {
        let store = store.clone();
        async move { store.count_jobs(source, &filter).await.expect("count jobs") }
    };
    let exact = |matching| JobCount {
        matching,
        capped: false,
    };
    assert_eq!(count(Pillar::Hot, JobFilter::default()).await, exact(2));
    assert_eq!(
        count(Pillar::Hot, search("blue", false, Some(t_new), None)).await,
        exact(1)
    );
    assert_eq!(
        count(Pillar::Hot, search("no such term", true, None, None)).await,
        exact(0)
    );
    assert_eq!(
        store
            .search_window(Pillar::Hot, None)
            .await
            .expect("window"),
        None,
        "fewer rows than a window: a scan reads them all"
    );

    let archived = archived_job(&*store, request("win-done", "export")).await;
    let dead = dead_job(
        &*store,
        request("win-dead", "export"),
        FailureReason::Failed,
        "gateway timeout",
    )
    .await;
    assert_eq!(count(Pillar::Archive, JobFilter::default()).await, exact(1));
    assert_eq!(count(Pillar::Dlq, JobFilter::default()).await, exact(1));
    assert_eq!(count(Pillar::Hot, JobFilter::default()).await, exact(2));
    let archive_ids = ids_in(&*store, Pillar::Archive, search("c-4711", true, None, None)).await;
    assert_eq!(archive_ids, vec![archived]);
    let dlq_ids = ids_in(&*store, Pillar::Dlq, search("GATEWAY", false, None, None)).await;
    assert_eq!(dlq_ids, vec![dead]);
    assert_eq!(
        count(Pillar::Dlq, search("gateway", false, None, None)).await,
        exact(1)
    );
    assert_eq!(
        count(Pillar::Archive, search("gateway", false, None, None)).await,
        exact(0)
    );
}

/// An id (or id prefix) pasted into any list's search finds the job whichever pillar holds
/// it; other text finds nothing this way.
pub async fn an_id_pasted_anywhere_finds_its_job(f: StoreFactory) {
    let store = f.store();
    let archived = archived_job(&*store, req("ids", "t")).await;
    let dead = dead_job(&*store, req("ids", "t"), FailureReason::Fatal, "no").await;
    let pending = enqueue(&*store, req("ids", "t")).await;
    for (id, pillar) in [
        (pending, Pillar::Hot),
        (archived, Pillar::Archive),
        (dead, Pillar::Dlq),
    ] {
        let found = store.find_by_id(&id.to_string(), 5).await.unwrap();
        let found: Vec<(JobId, Pillar)> = found.iter().map(|j| (j.id, j.state.pillar())).collect();
        assert_eq!(found, vec![(id, pillar)], "the full id finds its one job");
        // Uppercase, without hyphens, cut to 20 digits: still its prefix.
        let prefix: String = id.to_string().replace('-', "").to_uppercase()[..20].to_string();
        let by_prefix = store.find_by_id(&prefix, 5).await.unwrap();
        assert!(
            by_prefix.iter().any(|j| j.id == id),
            "{prefix} finds {id}: {by_prefix:?}"
        );
    }
    assert!(store.find_by_id("ids", 5).await.unwrap().is_empty());
    assert!(
        store.find_by_id("0123", 5).await.unwrap().is_empty(),
        "too short for a prefix"
    );
}

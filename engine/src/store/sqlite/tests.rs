//! Fast smoke tests of the SQLite backend's own mechanics (schema bootstrap, group commit,
//! claim shape). The behaviour suite for every backend lives in `crate::conformance`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::*;
use crate::model::{AttemptError, Continuation, ContinuationTrigger, FailureReason, JobState};
use crate::query::{JobSort, PagePosition, SortColumn, SortDirection};

async fn store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let path = dir.path().join("deck.db");
    open(path.to_str().unwrap(), &StoreOptions::default())
        .await
        .unwrap()
}

fn req(queue: &str) -> EnqueueRequest {
    EnqueueRequest::new(queue, "noop", r#"{"n":1}"#)
}

fn claim_req(worker: &str, limit: u32) -> ClaimRequest {
    ClaimRequest {
        worker_id: worker.into(),
        limit,
        start: 0,
        queues: None,
        types: None,
    }
}

fn error(message: &str) -> AttemptError {
    AttemptError {
        attempt: 1,
        at: Utc::now(),
        kind: "transient".into(),
        message: message.into(),
        ..AttemptError::default()
    }
}

async fn run_to_processing(s: &Arc<dyn Store>, worker: &str, limit: u32) -> Vec<JobId> {
    let ids: Vec<JobId> = s
        .claim_batch(claim_req(worker, limit))
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    s.mark_processing(worker, &ids).await.unwrap()
}

#[tokio::test]
async fn opening_twice_applies_the_schema_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deck.db");
    let path = path.to_str().unwrap();
    let options = StoreOptions::default();
    // Four at once, like processes started together on a fresh file: each waits its turn
    // for WAL mode and the migration instead of failing with "database is locked".
    let opened = futures::future::join_all((0..4).map(|_| open(path, &options))).await;
    for store in opened {
        store.unwrap().ping().await.unwrap();
    }
}

#[tokio::test]
async fn a_missing_directory_is_reported_with_help() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing/deck.db");
    let err = match open(path.to_str().unwrap(), &StoreOptions::default()).await {
        Ok(_) => panic!("opened a file in a missing directory"),
        Err(e) => e,
    };
    assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
    assert!(err.to_string().contains("help:"), "{err}");
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deck.db");
    drop(store(&dir).await);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO deck_schema_version (version, name, applied_at) VALUES (999, 'future', 0)",
        [],
    )
    .unwrap();
    drop(conn);
    let err = match open(path.to_str().unwrap(), &StoreOptions::default()).await {
        Ok(_) => panic!("opened a database from the future"),
        Err(e) => e,
    };
    assert!(matches!(err, StoreError::Schema { .. }), "{err}");
}

#[tokio::test]
async fn bulkhead_holds_inside_one_claim() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    s.update_queue(
        "limited",
        QueuePatch {
            max_workers: Some(Some(2)),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut reqs: Vec<EnqueueRequest> = (0..20)
        .map(|_| EnqueueRequest {
            priority: 10,
            ..req("limited")
        })
        .collect();
    reqs.push(req("other"));
    s.enqueue_batch(reqs).await.unwrap();
    let claimed = s.claim_batch(claim_req("w", 10)).await.unwrap();
    let limited = claimed.iter().filter(|j| j.queue == "limited").count();
    assert_eq!((limited, claimed.len()), (2, 3));
    assert!(s.claim_batch(claim_req("w2", 10)).await.unwrap().is_empty());
}

#[tokio::test]
async fn success_moves_to_archive_with_counters_metrics_and_continuation() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let parent = s
        .enqueue(EnqueueRequest {
            continuation: Some(Continuation {
                queue: "after".into(),
                job_type: "follow".into(),
                trigger: ContinuationTrigger::OnSuccess,
            }),
            ..req("q")
        })
        .await
        .unwrap();
    let started = run_to_processing(&s, "w", 10).await;
    assert_eq!(started, vec![parent.id]);
    let applied = s
        .complete(
            "w",
            vec![Completion::Succeeded {
                id: parent.id,
                result: Some(r#"{"ok":true}"#.into()),
                duration_ms: 7,
            }],
        )
        .await
        .unwrap();
    assert_eq!(applied, vec![Applied::Applied]);
    let job = s.get_job(parent.id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Succeeded);
    assert_eq!(job.result.as_deref(), Some(r#"{"ok":true}"#));
    let sum = s.summary().await.unwrap();
    assert_eq!((sum.succeeded, sum.succeeded_1m, sum.pending), (1, 1, 1));
    let follow = s.claim_batch(claim_req("w", 10)).await.unwrap();
    let payload: serde_json::Value = serde_json::from_str(&follow[0].payload).unwrap();
    assert_eq!(payload["parent_id"], parent.id.to_string());
    assert_eq!(payload["outcome"], "succeeded");
    assert_eq!(payload["result"]["ok"], true);
    // A second completion of the same job is not applied.
    let again = s
        .complete(
            "w",
            vec![Completion::Succeeded {
                id: parent.id,
                result: None,
                duration_ms: 1,
            }],
        )
        .await
        .unwrap();
    assert_eq!(again, vec![Applied::NotApplied]);
}

#[tokio::test]
async fn retry_then_dead_letter_keeps_every_error_and_groups_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let id = s.enqueue(req("q")).await.unwrap().id;
    run_to_processing(&s, "w", 1).await;
    let retried = s
        .complete(
            "w",
            vec![Completion::Retry {
                id,
                error: error("boom 1"),
                retry_at: Utc::now(),
            }],
        )
        .await
        .unwrap();
    assert_eq!(retried, vec![Applied::Applied]);
    run_to_processing(&s, "w", 1).await;
    s.complete(
        "w",
        vec![Completion::DeadLetter {
            id,
            reason: FailureReason::Failed,
            error: error("boom 2"),
            duration_ms: 3,
        }],
    )
    .await
    .unwrap();
    let job = s.get_job(id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Dead(FailureReason::Failed));
    assert_eq!(job.attempt, 2);
    let messages: Vec<&str> = job.errors.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(messages, ["boom 1", "boom 2"]);
    let groups = s.top_errors(10).await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!((groups[0].sample.as_str(), groups[0].count), ("boom 2", 1));

    assert_eq!(s.resurrect(id, None).await.unwrap(), Applied::Applied);
    assert!(s.top_errors(10).await.unwrap().is_empty());
    let job = s.get_job(id).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.attempt, job.errors.len()),
        (JobState::Pending, 0, 2)
    );
    assert_eq!(s.summary().await.unwrap().dlq, 0);
}

#[tokio::test]
async fn keyset_pages_walk_forward_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    s.enqueue_batch((0..7).map(|_| req("q")).collect())
        .await
        .unwrap();
    let mut q = JobQuery::new(Pillar::Hot);
    q.page_size = 3;
    q.sort = JobSort {
        column: SortColumn::CreatedAt,
        direction: SortDirection::Asc,
    };
    let first = s.list_jobs(&q).await.unwrap();
    assert_eq!((first.items.len(), first.prev.is_some()), (3, false));
    q.position = PagePosition::After(first.next.clone().unwrap());
    let second = s.list_jobs(&q).await.unwrap();
    assert_eq!(second.items.len(), 3);
    q.position = PagePosition::Last;
    let last = s.list_jobs(&q).await.unwrap();
    assert_eq!((last.items.len(), last.next.is_none()), (3, true));
    q.position = PagePosition::Before(second.prev.clone().unwrap());
    let back = s.list_jobs(&q).await.unwrap();
    assert_eq!(back.items, first.items);
}

#[tokio::test]
async fn one_failing_command_in_a_group_rolls_back_only_itself() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let missing = JobId::new();
    let (bad, good) = tokio::join!(s.resurrect(missing, None), s.enqueue(req("q")));
    assert!(matches!(bad, Err(StoreError::JobNotFound(_))));
    let good = good.unwrap();
    assert!(s.get_job(good.id).await.unwrap().is_some());
}

/// CPU seconds this process has used (user + system), from /proc: the machine is shared, so
/// wall time alone says little.
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// Store-level throughput: `cargo test -p deck-engine --release sqlite_hot_path -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "micro-benchmark; run by hand"]
async fn sqlite_hot_path_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let total: usize = std::env::var("DECK_BENCH_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let batch = 500;
    let t = Instant::now();
    let cpu = cpu_secs();
    for _ in 0..total / 5_000 {
        s.enqueue_batch((0..5_000).map(|_| req("bench")).collect())
            .await
            .unwrap();
    }
    let enqueue = t.elapsed();
    println!(
        "enqueued {total} in {enqueue:?} ({:.2} s CPU)",
        cpu_secs() - cpu
    );
    let t = Instant::now();
    let cpu = cpu_secs();
    let mut done = 0;
    let (mut t_claim, mut t_mark, mut t_complete) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    loop {
        let step = Instant::now();
        let jobs = s.claim_batch(claim_req("w", batch)).await.unwrap();
        t_claim += step.elapsed();
        if jobs.is_empty() {
            break;
        }
        let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
        let step = Instant::now();
        let started = s.mark_processing("w", &ids).await.unwrap();
        t_mark += step.elapsed();
        let step = Instant::now();
        let completions = started
            .into_iter()
            .map(|id| Completion::Succeeded {
                id,
                result: None,
                duration_ms: 0,
            })
            .collect();
        done += s.complete("w", completions).await.unwrap().len();
        t_complete += step.elapsed();
    }
    println!(
        "claim {t_claim:?}, mark {t_mark:?}, complete {t_complete:?} ({:.2} s CPU)",
        cpu_secs() - cpu
    );
    let drain = t.elapsed();
    assert_eq!(done, total);
    println!(
        "enqueue_batch: {:.0} jobs/s; claim+mark+complete at batch {batch}: {:.0} jobs/s",
        total as f64 / enqueue.as_secs_f64(),
        total as f64 / drain.as_secs_f64()
    );
}

/// The hot paths must stay index seeks however the planner's statistics look: a plan that
/// scans the hot table made claims quadratic once.
#[tokio::test]
async fn hot_path_statements_never_scan_the_hot_table() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    s.enqueue_batch((0..2000).map(|_| req("bench")).collect())
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("deck.db")).unwrap();
    let statements = [
        super::workers::CLAIM_QUEUES_SQL,
        super::workers::CLAIM_CANDIDATES_SQL,
        "UPDATE jobs SET status = 1 WHERE rowid IN (SELECT value FROM json_each(?1)) AND status = 0",
        "UPDATE jobs SET status = 2 WHERE id IN (SELECT value FROM json_each(?1)) AND status = 1 AND worker_id = ?2",
        "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?1))",
        "SELECT j.id FROM json_each(?1) AS c CROSS JOIN jobs AS j ON j.id = c.value ->> 'id' WHERE j.status = 2 AND j.worker_id = ?2",
        "SELECT id FROM jobs WHERE idempotency_key = ?1",
        "SELECT id FROM archive WHERE (finished_at, rowid) < (?1, coalesce((SELECT c.rowid FROM archive AS c WHERE c.id = ?2), ?3)) ORDER BY finished_at DESC, rowid DESC LIMIT 5",
    ];
    for sql in statements {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let n = stmt.parameter_count();
        let rows: Vec<String> = stmt
            .query_map(
                rusqlite::params_from_iter((0..n).map(|_| rusqlite::types::Value::Null)),
                |r| r.get(3),
            )
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        for line in &rows {
            assert!(
                !matches!(
                    line.split_whitespace().take(2).collect::<Vec<_>>()[..],
                    ["SCAN", "jobs" | "j" | "p" | "archive"]
                ),
                "{sql}\n  {}",
                rows.join("\n  ")
            );
        }
    }
}

/// Console reads on big pillars: `cargo test -p deck-engine --release sqlite_console_reads -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "micro-benchmark; run by hand"]
async fn sqlite_console_reads() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let conn = rusqlite::Connection::open(dir.path().join("deck.db")).unwrap();
    // Synthetic rows straight into the pillars: 1,000,000 archived, 100,000 dead.
    conn.execute_batch(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 1000000)
         INSERT INTO archive (id, queue, job_type, priority, tags, attempt, created_at,
             scheduled_at, finished_at, payload)
         SELECT printf('00000000-0000-7000-8000-%012d', x), 'q' || (x % 5), 't' || (x % 7), 0,
             ',demo,', 1, 1700000000000000 + x * 1000, 1700000000000000 + x * 1000,
             1700000000000000 + x * 1000 + 500, '{\"n\":1}' FROM n;
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 100000)
         INSERT INTO dlq (id, queue, job_type, priority, tags, reason, attempt, created_at,
             scheduled_at, finished_at, error_prefix, last_error, payload)
         SELECT printf('00000000-0000-7000-9000-%012d', x), 'q' || (x % 5), 't' || (x % 7), 0,
             ',demo,', 1, 3, 1700000000000000 + x * 1000, 1700000000000000 + x * 1000,
             1700000000000000 + x * 1000 + 500, 'error ' || (x % 100),
             'error ' || (x % 100) || ': connection refused by upstream service', '{}' FROM n;",
    )
    .unwrap();
    drop(conn);
    let time = |label: &str, t: Instant, rows: usize| {
        println!("{label}: {rows} rows in {:?}", t.elapsed());
    };
    let mut q = JobQuery::new(Pillar::Archive);
    q.sort = JobSort {
        column: SortColumn::FinishedAt,
        direction: SortDirection::Desc,
    };
    for position in [PagePosition::First, PagePosition::Last] {
        q.position = position.clone();
        let t = Instant::now();
        let page = s.list_jobs(&q).await.unwrap();
        time(&format!("archive 1M {position:?}"), t, page.items.len());
    }
    q.sort.column = SortColumn::CreatedAt;
    q.filter.queue = Some("q3".into());
    q.position = PagePosition::Last;
    let t = Instant::now();
    let page = s.list_jobs(&q).await.unwrap();
    time(
        "archive 1M queue filter, created sort, last page",
        t,
        page.items.len(),
    );

    let mut d = JobQuery::new(Pillar::Dlq);
    d.filter.text = Some("error 42:".into());
    let t = Instant::now();
    let page = s.list_jobs(&d).await.unwrap();
    time("dlq 100k text search", t, page.items.len());
    let t = Instant::now();
    let preview = s.bulk_preview(Pillar::Dlq, &d.filter, 10).await.unwrap();
    time("dlq 100k text search count", t, preview.matching as usize);
    d.filter.text = Some("no such text".into());
    let t = Instant::now();
    let page = s.list_jobs(&d).await.unwrap();
    time("dlq 100k text search, no match", t, page.items.len());
}

#[tokio::test]
async fn a_large_claim_whose_read_back_fails_on_a_reader_is_read_on_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deck.db");
    let options = StoreOptions::default();
    let mut s = SqliteStore::open(path.to_str().unwrap(), &options)
        .await
        .unwrap();
    // Readers that cannot read the jobs: their one connection is to an empty database.
    let elsewhere = dir.path().join("empty.db");
    let elsewhere = elsewhere.to_str().unwrap().to_string();
    let broken = open_connection(&elsewhere, &options).unwrap();
    s.readers = Readers::new(elsewhere, options, broken);

    let requests: Vec<EnqueueRequest> = (0..100).map(|_| req("q")).collect();
    s.enqueue_batch(requests).await.unwrap();
    let claimed = s
        .claim_batch(ClaimRequest {
            start: 30,
            ..claim_req("w1", 100)
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 100, "every claimed job comes back");
    let running = claimed
        .iter()
        .filter(|j| j.state == JobState::Processing)
        .count();
    assert_eq!(running, 30);
}

#[tokio::test]
async fn error_text_is_found_outside_the_search_window_and_follows_updates() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir).await;
    let id = s.enqueue(req("q")).await.unwrap().id;
    run_to_processing(&s, "w", 1).await;
    let dead_letter = |message: &str| Completion::DeadLetter {
        id,
        reason: FailureReason::Failed,
        error: error(message),
        duration_ms: 1,
    };
    s.complete("w", vec![dead_letter("Ledger mismatch on account 42")])
        .await
        .unwrap();
    // A window that starts after every row: only the indexed parts of a search can match.
    let past_the_window = Utc::now() + chrono::Duration::hours(1);
    let find = |text: &str| {
        let s = s.clone();
        let mut q = JobQuery::new(Pillar::Dlq);
        q.filter.text = Some(text.into());
        q.filter.scan_from = Some(past_the_window);
        async move {
            let items = s.list_jobs(&q).await.unwrap().items;
            items.iter().map(|j| j.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(find("LEDGER MISM").await, vec![id], "error text is indexed");
    assert_eq!(find("noop").await, vec![id], "the job type is indexed");
    assert!(
        find("42").await.is_empty(),
        "two characters are only scanned"
    );

    assert_eq!(s.resurrect(id, None).await.unwrap(), Applied::Applied);
    run_to_processing(&s, "w", 1).await;
    s.complete("w", vec![dead_letter("Gateway timeout")])
        .await
        .unwrap();
    assert!(
        find("ledger").await.is_empty(),
        "a replaced error leaves the index"
    );
    assert_eq!(find("gateway tim").await, vec![id]);
}

//! Telemetry reads: the overview counts, per-queue numbers, throughput buckets, error groups.

use chrono::{Timelike, Utc};

use super::support::*;
use crate::model::{Completion, EnqueueRequest, FailureReason, QueuePatch};
use crate::telemetry::{ERROR_PREFIX_CHARS, Summary};

pub async fn summary_counts_each_state(f: StoreFactory) {
    let store = f.store();
    let started = Utc::now();
    assert_eq!(
        summary(&*store).await,
        Summary::default(),
        "an empty store is all zeros"
    );
    enqueue(&*store, req("q", "due")).await;
    enqueue(
        &*store,
        EnqueueRequest {
            scheduled_at: Some(now_ms() - secs(60)),
            ..req("q", "overdue")
        },
    )
    .await;
    enqueue(
        &*store,
        EnqueueRequest {
            scheduled_at: Some(now_ms() + secs(3600)),
            ..req("q", "later")
        },
    )
    .await;
    let fetched = enqueue(&*store, req("fetched", "t")).await;
    assert_eq!(
        claim_jobs(&*store, "w1", 1, Some(vec!["fetched".into()])).await[0].id,
        fetched
    );
    processing_job(&*store, req("running", "t"), "w1").await;
    archived_job(&*store, req("done", "t")).await;
    dead_job(&*store, req("dead", "t"), FailureReason::Fatal, "x").await;
    let retried = processing_job(&*store, req("retried", "t"), "w1").await;
    assert!(
        complete_one(
            &*store,
            "w1",
            Completion::Retry {
                id: retried,
                error: error(1, "later"),
                retry_at: now_ms() + secs(3600),
            }
        )
        .await
    );

    let s = summary(&*store).await;
    assert_last_minute(s.succeeded_1m, 1, started, "succeeded in the last minute");
    assert_last_minute(s.failed_1m, 1, started, "failed in the last minute");
    assert_eq!(
        Summary {
            succeeded_1m: 1,
            failed_1m: 1,
            ..s.clone()
        },
        Summary {
            pending: 2,
            scheduled: 2,
            fetched: 1,
            processing: 1,
            succeeded: 1,
            dlq: 1,
            succeeded_1m: 1,
            succeeded_5m: 1,
            failed_1m: 1,
            failed_5m: 1,
            retried_5m: 1,
        }
    );
    // Every handle sees the same committed counts.
    assert_eq!(counts(&summary(&*f.connect().await).await), counts(&s));
    assert_counters_match_rows(&*store).await;
}

pub async fn queue_stats_counts_and_lag(f: StoreFactory) {
    let store = f.store();
    store
        .update_queue(
            "configured",
            QueuePatch {
                hidden: Some(true),
                max_workers: Some(Some(3)),
                lag_warn_secs: Some(Some(5)),
                lag_crit_secs: Some(Some(50)),
                zombie_timeout_secs: Some(Some(77)),
                execution_timeout_secs: Some(Some(88)),
                paused: Some(true),
            },
        )
        .await
        .unwrap();
    for ago in [120, 60] {
        enqueue(
            &*store,
            EnqueueRequest {
                scheduled_at: Some(now_ms() - secs(ago)),
                ..req("lagging", "t")
            },
        )
        .await;
    }
    enqueue(
        &*store,
        EnqueueRequest {
            scheduled_at: Some(now_ms() + secs(600)),
            ..req("future", "t")
        },
    )
    .await;
    processing_job(&*store, req("busy", "t"), "w1").await;
    enqueue(&*store, req("busy", "t")).await;
    assert_eq!(
        claim_jobs(&*store, "w1", 5, Some(vec!["busy".into()]))
            .await
            .len(),
        1
    );
    archived_job(&*store, req("busy", "t")).await;
    dead_job(&*store, req("busy", "t"), FailureReason::Failed, "x").await;
    dead_job(&*store, req("busy", "t"), FailureReason::Fatal, "y").await;

    let stats = store.queue_stats().await.unwrap();
    let get = |name: &str| {
        stats
            .iter()
            .find(|q| q.queue == name)
            .unwrap_or_else(|| panic!("queue {name} in {stats:?}"))
            .clone()
    };
    let configured = get("configured");
    assert!(configured.paused && configured.hidden);
    assert_eq!(configured.max_workers, Some(3));
    assert_eq!(
        (configured.lag_warn_secs, configured.lag_crit_secs),
        (Some(5), Some(50))
    );
    assert_eq!(
        (
            configured.zombie_timeout_secs,
            configured.execution_timeout_secs
        ),
        (Some(77), Some(88))
    );
    assert_eq!(
        (
            configured.pending,
            configured.succeeded,
            configured.lag_max_ms
        ),
        (0, 0, 0)
    );

    let lagging = get("lagging");
    assert_eq!((lagging.pending, lagging.scheduled), (2, 0));
    assert!(
        (119_000..180_000).contains(&lagging.lag_max_ms),
        "oldest due job waited two minutes: {}",
        lagging.lag_max_ms
    );
    assert!(
        (89_000..=lagging.lag_max_ms).contains(&lagging.lag_avg_ms),
        "average of two and one minutes: {}",
        lagging.lag_avg_ms
    );
    let future = get("future");
    assert_eq!(
        (
            future.pending,
            future.scheduled,
            future.lag_max_ms,
            future.lag_avg_ms
        ),
        (0, 1, 0, 0)
    );

    let busy = get("busy");
    assert_eq!(
        (
            busy.pending,
            busy.fetched,
            busy.processing,
            busy.succeeded,
            busy.failed
        ),
        (0, 1, 1, 1, 2)
    );
    let mut names: Vec<_> = stats.iter().map(|q| q.queue.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), stats.len(), "one row per queue");
    assert_counters_match_rows(&*store).await;
}

pub async fn throughput_buckets_fill_missing_minutes(f: StoreFactory) {
    let store = f.store();
    let empty = store.throughput(10, None).await.unwrap();
    assert_eq!(empty.len(), 10);
    assert!(
        empty
            .iter()
            .all(|b| b.succeeded == 0 && b.failed == 0 && b.retried == 0)
    );

    for _ in 0..3 {
        archived_job(&*store, req("a", "t")).await;
    }
    dead_job(&*store, req("b", "t"), FailureReason::Fatal, "x").await;
    let buckets = store.throughput(10, None).await.unwrap();
    assert_eq!(buckets.len(), 10, "missing minutes are filled");
    for b in &buckets {
        assert_eq!(
            (b.minute.second(), b.minute.nanosecond()),
            (0, 0),
            "minute start"
        );
    }
    for pair in buckets.windows(2) {
        assert_eq!(
            pair[1].minute - pair[0].minute,
            secs(60),
            "oldest first, one per minute"
        );
    }
    let last = buckets.last().unwrap().minute;
    assert!(
        last <= Utc::now() && Utc::now() - last < secs(120),
        "ends at the current minute"
    );
    assert_eq!(buckets.iter().map(|b| b.succeeded).sum::<u64>(), 3);
    assert_eq!(buckets.iter().map(|b| b.failed).sum::<u64>(), 1);
    let nonzero = buckets
        .iter()
        .filter(|b| b.succeeded + b.failed > 0)
        .count();
    assert!(
        (1..=2).contains(&nonzero),
        "the work landed in this minute (or the one before)"
    );

    let only_a = store.throughput(10, Some("a")).await.unwrap();
    assert_eq!(only_a.len(), 10);
    assert_eq!(
        only_a
            .iter()
            .map(|b| (b.succeeded, b.failed))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)),
        (3, 0)
    );
    let only_b = store.throughput(10, Some("b")).await.unwrap();
    assert_eq!(
        only_b
            .iter()
            .map(|b| (b.succeeded, b.failed))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)),
        (0, 1)
    );
    assert_eq!(store.throughput(1, None).await.unwrap().len(), 1);
    assert_eq!(store.throughput(60, None).await.unwrap().len(), 60);
    assert_counters_match_rows(&*store).await;
}

pub async fn top_errors_groups_by_reason_and_prefix(f: StoreFactory) {
    let store = f.store();
    assert!(store.top_errors(10).await.unwrap().is_empty());
    let common = "x".repeat(ERROR_PREFIX_CHARS);
    for i in 0..3 {
        dead_job(
            &*store,
            req("q", "t"),
            FailureReason::Failed,
            &format!("{common} tail {i}"),
        )
        .await;
    }
    dead_job(
        &*store,
        req("q", "t"),
        FailureReason::Fatal,
        &format!("{common} tail 0"),
    )
    .await;
    dead_job(&*store, req("q", "t"), FailureReason::Fatal, "bad payload").await;
    dead_job(&*store, req("q", "t"), FailureReason::Fatal, "bad payload").await;

    let groups = store.top_errors(10).await.unwrap();
    let summary: Vec<(FailureReason, &str, u64)> = groups
        .iter()
        .map(|g| (g.reason, g.message_prefix.as_str(), g.count))
        .collect();
    assert_eq!(
        summary,
        vec![
            (FailureReason::Failed, common.as_str(), 3),
            (FailureReason::Fatal, "bad payload", 2),
            (FailureReason::Fatal, common.as_str(), 1),
        ],
        "largest groups first, keyed by reason and the first {ERROR_PREFIX_CHARS} characters"
    );
    for g in &groups {
        assert!(since(g.last_seen) < secs(60) && since(g.last_seen) > secs(-60));
    }
    assert_eq!(store.top_errors(1).await.unwrap().len(), 1);

    // The prefix is counted in characters, not bytes.
    let accents = "é".repeat(ERROR_PREFIX_CHARS + 20);
    dead_job(&*store, req("q", "t"), FailureReason::Timeout, &accents).await;
    let groups = store.top_errors(10).await.unwrap();
    let group = groups
        .iter()
        .find(|g| g.reason == FailureReason::Timeout)
        .unwrap();
    assert_eq!(group.message_prefix, "é".repeat(ERROR_PREFIX_CHARS));
    assert_counters_match_rows(&*store).await;
}

//! Telemetry reads: the overview counts, per-queue numbers, throughput buckets, error groups.

use chrono::{Timelike, Utc};

use super::support::*;
use crate::fingerprint::FINGERPRINT_MESSAGE_CHARS;
use crate::model::Pillar;
use crate::model::{Completion, EnqueueRequest, FailureReason, QueuePatch};
use crate::query::{BulkAction, BulkFilterStep, JobFilter};
use crate::telemetry::Summary;

pub async fn summary_counts_each_state(f: StoreFactory) {
    let store = f.store();
    let started = Utc::now();
    assert_eq!(
        summary(&*store).await,
        Summary::default(),
        "an empty store is all zeros"
    );
    enqueue(&*store, req("q", "due")).await;
    enqueue(&*store, due_in(-60, "q", "overdue")).await;
    enqueue(&*store, due_in(3600, "q", "later")).await;
    let fetched = enqueue(&*store, req("fetched", "t")).await;
    assert_eq!(
        claim_jobs(&*store, "w1", 1, Some(vec!["fetched".into()])).await[0].id,
        fetched
    );
    processing_job(&*store, req("running", "t"), "w1").await;
    archived_job(&*store, req("done", "t")).await;
    dead_job(&*store, req("dead", "t"), FailureReason::Fatal, "x").await;
    let retried = processing_job(&*store, req("retried", "t"), "w1").await;
    assert!(complete_one(&*store, "w1", retry_in_an_hour(retried, "later")).await);

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
                rate_limit: None,
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
    enqueue(&*store, due_in(600, "future", "t")).await;
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

pub async fn top_errors_group_by_fingerprint(f: StoreFactory) {
    let store = f.store();
    assert!(store.top_errors(10).await.unwrap().is_empty());
    // Same reason, kind and type, messages differing only in values: one group.
    for i in 0..3 {
        dead_job(
            &*store,
            req("q", "t"),
            FailureReason::Failed,
            &format!("order {i} rejected by 'shop-{i}'"),
        )
        .await;
    }
    // Another reason, another job type, another wording: three more groups.
    dead_job(
        &*store,
        req("q", "t"),
        FailureReason::Fatal,
        "order 0 rejected by 'shop-0'",
    )
    .await;
    dead_job(
        &*store,
        req("q", "other"),
        FailureReason::Failed,
        "order 7 rejected by 'x'",
    )
    .await;
    dead_job(&*store, req("q", "t"), FailureReason::Fatal, "bad payload").await;
    dead_job(&*store, req("q", "t"), FailureReason::Fatal, "bad payload").await;

    let groups = store.top_errors(10).await.unwrap();
    let mut summary: Vec<(FailureReason, &str, &str, u64)> = groups
        .iter()
        .map(|g| (g.reason, g.job_type.as_str(), g.kind.as_str(), g.count))
        .collect();
    // Groups of one come newest first; which of the last two that is is not the point here.
    summary[2..].sort_by_key(|g| (g.0.code(), g.1.to_string()));
    assert_eq!(
        summary,
        vec![
            (FailureReason::Failed, "t", "transient", 3),
            (FailureReason::Fatal, "t", "transient", 2),
            (FailureReason::Failed, "other", "transient", 1),
            (FailureReason::Fatal, "t", "transient", 1),
        ],
        "largest groups first; reason and job type split groups, values do not"
    );
    assert!(
        groups[0].sample.starts_with("order ") && groups[0].sample.contains("rejected by 'shop-"),
        "a full message of the group: {:?}",
        groups[0].sample
    );
    assert_eq!(groups[1].sample, "bad payload");
    for g in &groups {
        assert!(since(g.last_seen) < secs(60) && since(g.last_seen) > secs(-60));
        // The fingerprint is the one the engine computes for the group's failures.
        assert_eq!(
            g.fingerprint,
            crate::fingerprint::fingerprint(g.reason, &g.kind, &g.job_type, &g.sample),
            "{g:?}"
        );
    }
    assert_eq!(store.top_errors(1).await.unwrap().len(), 1);

    // The sample keeps the stored length of a message, counted in characters, not bytes.
    let accents = "é".repeat(FINGERPRINT_MESSAGE_CHARS + 20);
    dead_job(&*store, req("q", "t"), FailureReason::Timeout, &accents).await;
    let groups = store.top_errors(10).await.unwrap();
    let group = groups
        .iter()
        .find(|g| g.reason == FailureReason::Timeout)
        .unwrap();
    assert_eq!(group.sample, "é".repeat(FINGERPRINT_MESSAGE_CHARS));
    assert_counters_match_rows(&*store).await;
}

/// Ninety "mailbox … does not exist" failures are one group of ninety, its dead letters a
/// filter away; resurrecting and purging them by that filter counts the group down to gone.
pub async fn ninety_mailbox_failures_are_one_group_until_they_leave(f: StoreFactory) {
    let store = f.store();
    let n = 90;
    enqueue_n(&*store, "mail", "email.send", n).await;
    let ids = start(&*store, "w1", n as u32).await;
    let completions: Vec<Completion> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            dead(
                *id,
                FailureReason::Failed,
                &format!(
                    "mailbox user{i}@example{}.com does not exist (code {})",
                    i % 7,
                    550 + i
                ),
            )
        })
        .collect();
    let applied = store.complete("w1", completions).await.unwrap();
    assert!(applied.iter().all(|a| a.is_applied()));
    // Someone else's failure, to prove the filter selects one group only.
    let other = dead_job(
        &*store,
        req("mail", "email.send"),
        FailureReason::Fatal,
        "smtp down",
    )
    .await;

    let groups = store.top_errors(10).await.unwrap();
    assert_eq!(groups.len(), 2, "{groups:?}");
    let group = groups[0].clone();
    assert_eq!(group.count, n as u64);
    assert_eq!(
        (group.reason, group.job_type.as_str()),
        (FailureReason::Failed, "email.send")
    );
    assert_eq!(group.kind, "transient");
    assert!(
        group.sample.starts_with("mailbox user") && group.sample.ends_with(")"),
        "a full message, not a mask: {:?}",
        group.sample
    );
    let by_group = JobFilter {
        error_group: Some(group.fingerprint.clone()),
        ..JobFilter::default()
    };
    let mut members = ids_in(&*store, Pillar::Dlq, by_group.clone()).await;
    members.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(
        members, expected,
        "the filter selects exactly the group's dead letters"
    );
    // Each dead letter names its group, so its page links to the others.
    assert_eq!(
        job(&*store, ids[17]).await.error_group.as_deref(),
        Some(group.fingerprint.as_str())
    );
    assert_eq!(
        job(&*store, other).await.error_group.as_deref(),
        Some(groups[1].fingerprint.as_str())
    );
    let preview = store.bulk_preview(Pillar::Dlq, &by_group, 5).await.unwrap();
    assert_eq!((preview.matching, preview.sample.len()), (n as u64, 5));

    // One step of the bulk flow over the group's dead letters, from the start.
    let group_step = |action, limit| {
        let store = store.clone();
        let filter = by_group.clone();
        async move {
            let step = BulkFilterStep {
                action,
                source: Pillar::Dlq,
                filter: &filter,
                after: None,
                limit,
            };
            store.bulk_filter_step(step).await.unwrap()
        }
    };
    // Resurrect the first 40 through the filter, as the bulk flow does.
    let step = group_step(BulkAction::Resurrect, 40).await;
    assert_eq!((step.selected, step.affected), (40, 40));
    let groups = store.top_errors(10).await.unwrap();
    let left = groups
        .iter()
        .find(|g| g.fingerprint == group.fingerprint)
        .unwrap();
    assert_eq!(left.count, 50, "resurrected rows leave the group");
    assert_counters_match_rows(&*store).await;

    // Purge the rest through the filter.
    let step = group_step(BulkAction::Purge, 1000).await;
    assert_eq!((step.selected, step.affected), (50, 50));
    let groups = store.top_errors(10).await.unwrap();
    assert!(
        groups.iter().all(|g| g.fingerprint != group.fingerprint),
        "an emptied group is not listed: {groups:?}"
    );
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].count, 1);
    assert_eq!(
        state(&*store, other).await,
        Some(crate::model::JobState::Dead(FailureReason::Fatal))
    );
    assert!(ids_in(&*store, Pillar::Dlq, by_group).await.is_empty());

    // The resurrected jobs fail again the same way: back into the same group.
    let again = start(&*store, "w2", 40).await;
    let completions: Vec<Completion> = again
        .iter()
        .map(|id| {
            dead(
                *id,
                FailureReason::Failed,
                "mailbox zed@example.org does not exist (code 1)",
            )
        })
        .collect();
    store.complete("w2", completions).await.unwrap();
    let groups = store.top_errors(10).await.unwrap();
    let back = groups
        .iter()
        .find(|g| g.fingerprint == group.fingerprint)
        .unwrap();
    assert_eq!(back.count, 40);
    assert_eq!(
        back.sample, "mailbox zed@example.org does not exist (code 1)",
        "the latest message"
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn run_times_count_finished_runs_per_job_type(f: StoreFactory) {
    let store = f.store();
    assert!(store.run_times(60).await.unwrap().is_empty());
    // 18 quick successes and 2 slow dead letters of one type, finished in one batch, and one
    // run of another type.
    let mut completions = Vec::new();
    for i in 0..20 {
        let id = processing_job(&*store, req("q", "mail"), "w1").await;
        completions.push(if i < 18 {
            Completion::Succeeded {
                id,
                result: None,
                duration_ms: 10,
            }
        } else {
            Completion::DeadLetter {
                id,
                reason: FailureReason::Failed,
                error: error(1, "smtp timeout"),
                duration_ms: 2_000,
            }
        });
    }
    let applied = store.complete("w1", completions).await.unwrap();
    assert!(applied.iter().all(|a| a.is_applied()));
    let resize = processing_job(&*store, req("images", "resize"), "w2").await;
    assert!(
        complete_one(
            &*store,
            "w2",
            Completion::Succeeded {
                id: resize,
                result: None,
                duration_ms: 300,
            }
        )
        .await
    );
    // Neither a retried attempt nor a job that never ran (cancelled while pending) counts.
    let retried = processing_job(&*store, req("q", "mail"), "w1").await;
    assert!(complete_one(&*store, "w1", retry_in_an_hour(retried, "later")).await);
    let never_ran = enqueue(&*store, req("q", "mail")).await;
    store.cancel(never_ran).await.unwrap();

    let times = store.run_times(60).await.unwrap();
    let types: Vec<&str> = times.iter().map(|h| h.job_type.as_str()).collect();
    assert_eq!(types, ["mail", "resize"], "by job type, names sorted");
    let mail = &times[0];
    assert_eq!(mail.runs(), 20, "successes and dead letters, once each");
    let within = |got: Option<f64>, want: f64| {
        let got = got.unwrap_or_default();
        assert!((got - want).abs() / want < 0.1, "{got} ms, wanted ~{want}");
    };
    within(mail.quantile_ms(0.5), 10.0);
    within(mail.quantile_ms(0.95), 2_000.0);
    assert_eq!(times[1].runs(), 1);
    within(times[1].quantile_ms(0.95), 300.0);
}

/// Pending jobs per (queue, type), scheduled ones included, largest first; started,
/// buffered and finished ones are not pending.
pub async fn pending_groups_count_pending_jobs_per_queue_and_type(f: StoreFactory) {
    let store = f.store();
    assert!(store.pending_groups(10).await.unwrap().is_empty());
    for _ in 0..3 {
        enqueue(&*store, req("mail", "email.send")).await;
    }
    let mut later = req("mail", "email.digest");
    later.delay_ms = Some(3_600_000);
    enqueue(&*store, later).await;
    enqueue(&*store, req("reports", "report.build")).await;
    processing_job(&*store, req("busy", "work"), "w1").await;
    enqueue(&*store, req("buffered", "work")).await;
    claim_jobs(&*store, "w1", 1, Some(vec!["buffered".into()])).await;

    let groups = f.connect().await.pending_groups(10).await.unwrap();
    let seen: Vec<(&str, &str, u64)> = groups
        .iter()
        .map(|g| (g.queue.as_str(), g.job_type.as_str(), g.pending))
        .collect();
    assert_eq!(
        seen,
        [
            ("mail", "email.send", 3),
            ("mail", "email.digest", 1),
            ("reports", "report.build", 1)
        ]
    );
    assert_eq!(
        store.pending_groups(1).await.unwrap().len(),
        1,
        "at most the limit"
    );
}

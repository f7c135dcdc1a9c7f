//! Queue settings: pause and resume, the settings row, and the bulkhead (`max_workers`).

use super::support::*;
use crate::model::{EnqueueRequest, JobState, QueueConfig, QueuePatch, RateLimit};

pub async fn paused_queue_is_not_claimed_until_resumed(f: StoreFactory) {
    let store = f.store();
    let held = enqueue(&*store, req("held", "t")).await;
    let free = enqueue(&*store, req("free", "t")).await;
    let cfg = store.update_queue("held", pause(true)).await.unwrap();
    assert!(cfg.paused);
    assert_eq!(claim(&*store, "w1", 10).await, vec![free]);
    assert!(claim(&*store, "w1", 10).await.is_empty());
    // Paused for every handle, not just the one that paused it.
    let other = f.connect().await;
    assert!(claim(&*other, "w2", 10).await.is_empty());
    assert_eq!(state(&*store, held).await, Some(JobState::Pending));
    let stats = store.queue_stats().await.unwrap();
    assert!(stats.iter().any(|q| q.queue == "held" && q.paused));

    let cfg = other.update_queue("held", pause(false)).await.unwrap();
    assert!(!cfg.paused);
    assert_eq!(claim(&*store, "w1", 10).await, vec![held]);
    assert_counters_match_rows(&*store).await;
}

pub async fn queue_settings_round_trip(f: StoreFactory) {
    let store = f.store();
    // update_queue creates the row when the queue has never been used.
    let cfg = store
        .update_queue(
            "reports",
            QueuePatch {
                paused: Some(true),
                hidden: Some(true),
                max_workers: Some(Some(4)),
                zombie_timeout_secs: Some(Some(120)),
                execution_timeout_secs: Some(Some(900)),
                lag_warn_secs: Some(Some(30)),
                lag_crit_secs: Some(Some(300)),
                rate_limit: Some(Some(RateLimit {
                    starts: 100,
                    per_secs: 60,
                })),
            },
        )
        .await
        .unwrap();
    let expected = QueueConfig {
        name: "reports".into(),
        paused: true,
        hidden: true,
        max_workers: Some(4),
        zombie_timeout_secs: Some(120),
        execution_timeout_secs: Some(900),
        lag_warn_secs: Some(30),
        lag_crit_secs: Some(300),
        rate_limit: Some(RateLimit {
            starts: 100,
            per_secs: 60,
        }),
        rate_limited_until: None,
        updated_at: cfg.updated_at,
    };
    assert_eq!(cfg, expected);
    assert!(cfg.updated_at.is_some(), "the store stamps the update");
    let listed = f.connect().await.list_queues().await.unwrap();
    let row = listed.iter().find(|q| q.name == "reports").unwrap();
    assert_eq!(
        QueueConfig {
            updated_at: None,
            ..row.clone()
        },
        QueueConfig {
            updated_at: None,
            ..expected.clone()
        }
    );

    // A patch changes only what it names; Some(None) clears an override.
    let cfg = store
        .update_queue(
            "reports",
            QueuePatch {
                paused: Some(false),
                max_workers: Some(None),
                lag_warn_secs: Some(Some(10)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        QueueConfig {
            updated_at: None,
            ..cfg
        },
        QueueConfig {
            paused: false,
            max_workers: None,
            lag_warn_secs: Some(10),
            updated_at: None,
            ..expected
        }
    );

    store
        .update_queue("another", QueuePatch::default())
        .await
        .unwrap();
    let names: Vec<String> = store
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(
        names,
        vec!["another".to_string(), "reports".to_string()],
        "by name"
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn invalid_queue_patch_changes_nothing(f: StoreFactory) {
    let store = f.store();
    store.update_queue("q", max_workers(3)).await.unwrap();
    let before = store.list_queues().await.unwrap();
    let bad = [
        max_workers(0),
        QueuePatch {
            paused: Some(true),
            zombie_timeout_secs: Some(Some(0)),
            ..Default::default()
        },
        execution_timeout(0),
    ];
    for patch in bad {
        assert!(
            is_invalid(door(&store).update_queue("op", "q", patch.clone()).await),
            "{patch:?} is rejected"
        );
    }
    assert!(is_invalid(
        door(&store).update_queue("op", "", pause(true)).await
    ));
    assert!(is_invalid(
        door(&store)
            .update_queue("op", " padded", pause(true))
            .await
    ));
    assert_eq!(store.list_queues().await.unwrap(), before);
    assert_counters_match_rows(&*store).await;
}

pub async fn bulkhead_holds_inside_one_batch(f: StoreFactory) {
    let store = f.store();
    store.update_queue("limited", max_workers(2)).await.unwrap();
    let high: Vec<_> = (0..20)
        .map(|_| EnqueueRequest {
            priority: 10,
            ..req("limited", "t")
        })
        .collect();
    store.enqueue_batch(high).await.unwrap();
    let low = enqueue(&*store, req("other", "t")).await;

    let got = claim_jobs(&*store, "w1", 10, None).await;
    let limited = got.iter().filter(|j| j.queue == "limited").count();
    let other: Vec<_> = got
        .iter()
        .filter(|j| j.queue == "other")
        .map(|j| j.id)
        .collect();
    assert_eq!((limited, other.clone()), (2, vec![low]), "2 + 1 out of 21");
    assert!(
        claim(&*store, "w1", 10).await.is_empty(),
        "the limit is reached"
    );
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.fetched), (18, 3));
    assert_counters_match_rows(&*store).await;
}

pub async fn bulkhead_holds_when_the_claim_starts_jobs(f: StoreFactory) {
    let store = f.store();
    store.update_queue("limited", max_workers(2)).await.unwrap();
    store
        .enqueue_batch((0..5).map(|_| req("limited", "t")).collect())
        .await
        .unwrap();
    let first = claim_starting(&*store, "w1", 1, 1).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].state, JobState::Processing);
    let second = claim_starting(&*store, "w1", 10, 10).await;
    assert_eq!(second.len(), 1, "one slot of two was left");
    assert!(
        claim_starting(&*store, "w1", 10, 10).await.is_empty(),
        "the limit is reached"
    );
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.fetched, s.processing), (3, 0, 2));
    assert_counters_match_rows(&*store).await;
}

pub async fn bulkhead_counts_processing_jobs_and_frees_on_finish(f: StoreFactory) {
    let store = f.store();
    store.update_queue("limited", max_workers(2)).await.unwrap();
    enqueue_n(&*store, "limited", "t", 6).await;
    let running = start(&*store, "w1", 2).await;
    assert!(
        claim(&*store, "w1", 10).await.is_empty(),
        "processing counts"
    );

    assert!(complete_one(&*store, "w1", succeeded(running[0], None)).await);
    let next = claim(&*store, "w1", 10).await;
    assert_eq!(next.len(), 1, "one slot freed by the completion");
    assert!(claim(&*store, "w1", 10).await.is_empty());

    assert_eq!(store.release("w1", &next, None).await.unwrap(), 1);
    assert_eq!(
        claim(&*store, "w1", 10).await.len(),
        1,
        "a release frees the slot"
    );

    // Raising the limit takes effect on the next claim.
    store.update_queue("limited", max_workers(4)).await.unwrap();
    assert_eq!(claim(&*store, "w1", 10).await.len(), 2);
    // Clearing it removes the limit.
    store
        .update_queue(
            "limited",
            QueuePatch {
                max_workers: Some(None),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        claim(&*store, "w1", 10).await.len(),
        1,
        "the last pending job"
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn bulkhead_holds_across_handles(f: StoreFactory) {
    let store = f.store();
    let other = f.connect().await;
    store.update_queue("limited", max_workers(3)).await.unwrap();
    enqueue_n(&*store, "limited", "t", 10).await;
    assert_eq!(claim(&*store, "w1", 2).await.len(), 2);
    assert_eq!(
        claim(&*other, "w2", 10).await.len(),
        1,
        "cluster-wide limit"
    );
    assert!(claim(&*other, "w3", 10).await.is_empty());
    assert_counters_match_rows(&*store).await;
}

fn rate_limit(starts: u32, per_secs: u32) -> QueuePatch {
    QueuePatch {
        rate_limit: Some(Some(RateLimit { starts, per_secs })),
        ..Default::default()
    }
}

/// The index of the aligned period `per_secs` long that holds the store's clock now.
fn period_index(per_secs: i64) -> i64 {
    chrono::Utc::now().timestamp().div_euclid(per_secs)
}

/// Run `case` with a fresh queue name until one run stayed inside one aligned period (a run
/// that straddles a period boundary may legitimately start more).
async fn within_one_period<F, Fut>(per_secs: i64, mut case: F)
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for attempt in 0..3 {
        let before = period_index(per_secs);
        let passed = case(format!("metered-{attempt}")).await;
        if period_index(per_secs) == before {
            assert!(passed, "the limit held inside one period");
            return;
        }
    }
    panic!("three runs straddled a period boundary");
}

pub async fn rate_limit_caps_starts_per_period_and_says_until_when(f: StoreFactory) {
    let store = f.store();
    let other = f.connect().await;
    within_one_period(86_400, |queue| {
        let store = store.clone();
        let other = other.clone();
        async move {
            store
                .update_queue(&queue, rate_limit(5, 86_400))
                .await
                .unwrap();
            let ids = enqueue_n(&*store, &queue, "t", 12).await;
            let first = claim(&*store, "w1", 10).await.len();
            let second = claim(&*other, "w2", 10).await.len();
            let cfg = store
                .list_queues()
                .await
                .unwrap()
                .into_iter()
                .find(|q| q.name == queue)
                .unwrap();
            let next_day = (chrono::Utc::now().timestamp().div_euclid(86_400) + 1) * 86_400;
            let until_ok = cfg.rate_limited_until.map(|t| t.timestamp()) == Some(next_day);
            // Jobs over the limit wait pending, no attempt spent.
            let waiting = job(&*store, ids[11]).await;
            let unspent = waiting.state == JobState::Pending && waiting.attempt == 0;

            // Raising the limit lets the difference through; clearing it, the rest.
            store
                .update_queue(&queue, rate_limit(8, 86_400))
                .await
                .unwrap();
            let raised = claim(&*store, "w1", 10).await.len();
            store
                .update_queue(
                    &queue,
                    QueuePatch {
                        rate_limit: Some(None),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
            let cleared = store.list_queues().await.unwrap();
            let gone = cleared
                .iter()
                .find(|q| q.name == queue)
                .is_some_and(|q| q.rate_limit.is_none() && q.rate_limited_until.is_none());
            let rest = claim(&*store, "w1", 10).await.len();
            (first, second, raised, rest) == (5, 0, 3, 4) && until_ok && unspent && gone
        }
    })
    .await;
    // A queue without a limit is not held back by its neighbour's.
    enqueue_n(&*store, "free", "t", 3).await;
    assert_eq!(claim(&*store, "w3", 10).await.len(), 3);
    assert_counters_match_rows(&*store).await;
}

pub async fn rate_limit_counts_from_zero_in_the_next_period(f: StoreFactory) {
    let store = f.store();
    store
        .update_queue("per-second", rate_limit(2, 1))
        .await
        .unwrap();
    enqueue_n(&*store, "per-second", "t", 10).await;
    let mut seen = Vec::new();
    // Each round claims twice inside one second: two jobs, then none; the next second counts
    // afresh. A round that crossed a second boundary is not counted.
    while seen.len() < 2 {
        let second = period_index(1);
        let a = claim(&*store, "w1", 10).await.len();
        let b = claim(&*store, "w1", 10).await.len();
        if period_index(1) == second {
            assert_eq!((a, b), (2, 0), "two starts per second");
            seen.push(second);
        }
        // Time passing, not a stand-in for a signal: the next period starts at the next second.
        let now = chrono::Utc::now();
        let to_next = 1_000 - i64::from(now.timestamp_subsec_millis());
        tokio::time::sleep(std::time::Duration::from_millis(to_next.max(1) as u64 + 20)).await;
    }
    assert_ne!(seen[0], seen[1]);
    assert_counters_match_rows(&*store).await;
}

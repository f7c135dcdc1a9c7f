//! Queue settings: pause and resume, the settings row, and the bulkhead (`max_workers`).

use super::support::*;
use crate::model::{EnqueueRequest, JobState, QueueConfig, QueuePatch};

fn pause(paused: bool) -> QueuePatch {
    QueuePatch {
        paused: Some(paused),
        ..Default::default()
    }
}

fn max_workers(n: u32) -> QueuePatch {
    QueuePatch {
        max_workers: Some(Some(n)),
        ..Default::default()
    }
}

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
        QueuePatch {
            execution_timeout_secs: Some(Some(0)),
            ..Default::default()
        },
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

//! What a claim picks: due jobs only, in priority / due time / id order, never expired ones.

use super::support::*;
use crate::model::{ClaimRequest, EnqueueRequest, FailureReason, JobState};

pub async fn future_jobs_are_not_claimable_until_due(f: StoreFactory) {
    let store = f.store();
    let future = enqueue(&*store, due_in(3600, "q", "later")).await;
    let delayed = enqueue(&*store, delayed_by(3_600_000, "q", "later")).await;
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.scheduled), (0, 2));
    assert!(claim(&*store, "w1", 10).await.is_empty(), "nothing is due");

    let past = enqueue(&*store, due_in(-60, "q", "now")).await;
    let immediate = enqueue(&*store, req("q", "now")).await;
    let zero_delay = enqueue(&*store, delayed_by(0, "q", "now")).await;
    let claimed = sorted(claim(&*store, "w1", 10).await);
    assert_eq!(claimed, sorted(vec![past, immediate, zero_delay]));
    assert_eq!(state(&*store, future).await, Some(JobState::Pending));
    assert_eq!(state(&*store, delayed).await, Some(JobState::Pending));
    assert_counters_match_rows(&*store).await;
}

pub async fn claim_order_is_priority_then_due_time_then_id(f: StoreFactory) {
    let store = f.store();
    let t0 = now_ms() - secs(600);
    let at = |prio: i32, offset: i64, job_type: &str| EnqueueRequest {
        priority: prio,
        scheduled_at: Some(t0 + secs(offset)),
        ..req("q", job_type)
    };
    // Enqueued out of order on purpose; ids grow in enqueue order.
    let low_late = enqueue(&*store, at(0, 50, "a")).await;
    let low_tie_1 = enqueue(&*store, at(0, 10, "b")).await;
    let high_late = enqueue(&*store, at(5, 40, "c")).await;
    let low_tie_2 = enqueue(&*store, at(0, 10, "d")).await;
    let high_early = enqueue(&*store, at(5, 20, "e")).await;
    let negative = enqueue(&*store, at(-3, 0, "f")).await;
    let top = enqueue(&*store, at(9, 60, "g")).await;
    let expected = vec![
        top, high_early, high_late, low_tie_1, low_tie_2, low_late, negative,
    ];
    let mut order = Vec::new();
    for _ in 0..expected.len() {
        let got = claim(&*store, "w1", 1).await;
        assert_eq!(got.len(), 1);
        order.push(got[0]);
    }
    assert_eq!(order, expected);
    assert!(claim(&*store, "w1", 1).await.is_empty());

    // A batch takes the best jobs first, too.
    let store2 = f.connect().await;
    let lows: Vec<_> = (0..5).map(|_| at(1, 0, "low")).collect();
    let highs: Vec<_> = (0..3).map(|_| at(2, 30, "high")).collect();
    let low_ids: Vec<_> = enqueue_all(&*store2, lows).await;
    let high_ids: Vec<_> = enqueue_all(&*store2, highs).await;
    let batch = sorted(claim(&*store2, "w2", 4).await);
    let mut expected_batch = high_ids.clone();
    expected_batch.push(low_ids[0]);
    assert_eq!(batch, sorted(expected_batch));
    assert_counters_match_rows(&*store).await;
}

pub async fn expired_jobs_are_not_claimed_and_rescue_dead_letters_them(f: StoreFactory) {
    let store = f.store();
    let expired = enqueue(
        &*store,
        EnqueueRequest {
            expires_at: Some(now_ms() - secs(1)),
            ..req("q", "stale")
        },
    )
    .await;
    let alive = enqueue(
        &*store,
        EnqueueRequest {
            expires_at: Some(now_ms() + secs(3600)),
            ..req("q", "fresh")
        },
    )
    .await;
    assert_eq!(claim(&*store, "w1", 10).await, vec![alive]);
    let report = rescue(&*store, &long_timeouts()).await.unwrap();
    assert_eq!(report.expired, 1);
    assert_eq!(
        state(&*store, expired).await,
        Some(JobState::Dead(FailureReason::Expired))
    );
    assert_eq!(state(&*store, alive).await, Some(JobState::Fetched));
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.fetched, s.dlq), (0, 1, 1));
    // The expired job moved once; a second sweep finds nothing.
    let again = rescue(&*store, &long_timeouts()).await.unwrap();
    assert_eq!(again.expired, 0);
    assert_counters_match_rows(&*store).await;
}

pub async fn claim_honours_the_type_filter(f: StoreFactory) {
    let store = f.store();
    // A higher band of other types must not hide the wanted types below it.
    for _ in 0..3 {
        enqueue(
            &*store,
            EnqueueRequest {
                priority: 10,
                ..req("q", "other")
            },
        )
        .await;
    }
    let a1 = enqueue(&*store, req("q", "wanted.a")).await;
    let a2 = enqueue(&*store, req("q", "wanted.a")).await;
    let b = enqueue(&*store, req("q2", "wanted.b")).await;
    let by_types = |types: Vec<&str>, queues: Option<Vec<String>>| ClaimRequest {
        types: Some(types.into_iter().map(String::from).collect()),
        ..claim_request("ext", 10, queues)
    };
    let got = store
        .claim_batch(by_types(
            vec!["wanted.a", "wanted.b"],
            Some(vec!["q".into()]),
        ))
        .await
        .unwrap();
    let ids: Vec<_> = got.iter().map(|j| j.id).collect();
    assert_eq!(
        sorted(ids),
        sorted(vec![a1, a2]),
        "queue and type filters both hold"
    );
    assert!(got.iter().all(|j| j.state == JobState::Fetched));
    assert!(
        store
            .claim_batch(by_types(Vec::new(), None))
            .await
            .unwrap()
            .is_empty(),
        "an empty type list claims nothing"
    );
    let got = store
        .claim_batch(by_types(vec!["wanted.b"], None))
        .await
        .unwrap();
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![b]);
    let s = summary(&*store).await;
    assert_eq!(
        (s.pending, s.fetched),
        (3, 3),
        "the other type stays pending"
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn claim_honours_the_queue_filter(f: StoreFactory) {
    let store = f.store();
    let a = enqueue(&*store, req("alpha", "t")).await;
    let b = enqueue(&*store, req("beta", "t")).await;
    let c = enqueue(&*store, req("gamma", "t")).await;
    let got = claim_jobs(&*store, "w1", 10, Some(vec!["beta".into(), "gamma".into()])).await;
    let mut ids: Vec<_> = got.iter().map(|j| j.id).collect();
    ids.sort();
    assert_eq!(ids, sorted(vec![b, c]));
    for j in &got {
        assert_eq!(j.state, JobState::Fetched);
        assert_eq!(j.worker_id.as_deref(), Some("w1"));
    }
    assert_eq!(state(&*store, a).await, Some(JobState::Pending));
    assert!(
        claim_jobs(&*store, "w1", 10, Some(vec!["nope".into()]))
            .await
            .is_empty()
    );
    assert_eq!(claim(&*store, "w2", 10).await, vec![a]);
    assert_counters_match_rows(&*store).await;
}

//! Worker-owned transitions check ownership: the wrong worker changes nothing.

use super::support::*;
use crate::model::{Applied, Completion, FailureReason, JobState};

pub async fn wrong_worker_changes_nothing(f: StoreFactory) {
    let store = f.store();
    let id = enqueue(&*store, req("q", "t")).await;
    assert_eq!(claim(&*store, "owner", 1).await, vec![id]);
    let before = job(&*store, id).await;
    let s0 = summary(&*store).await;

    assert!(starts_none(&*store, "thief", &[id]).await);
    assert_eq!(store.release("thief", &[id], None).await.unwrap(), 0);
    assert_eq!(
        job(&*store, id).await,
        before,
        "fetched by its owner, untouched"
    );

    assert_eq!(
        store.mark_processing("owner", &[id]).await.unwrap(),
        vec![id]
    );
    let running = job(&*store, id).await;
    assert_eq!(running.attempt, 1);

    let hb = store.heartbeat("thief", &[id]).await.unwrap();
    assert!(hb.alive.is_empty());
    assert_eq!(hb.lost, vec![id]);
    assert_eq!(job(&*store, id).await.heartbeat_at, running.heartbeat_at);

    let applied = store
        .complete(
            "thief",
            vec![
                succeeded(id, None),
                Completion::Retry {
                    id,
                    error: error(1, "x"),
                    retry_at: now_ms(),
                },
                dead(id, FailureReason::Fatal, "x"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(applied, vec![Applied::NotApplied; 3]);
    // Not twice either, even by the owner.
    assert!(starts_none(&*store, "owner", &[id]).await);
    let after = job(&*store, id).await;
    assert_eq!(after, running);
    assert_eq!(after.worker_id.as_deref(), Some("owner"));
    let s1 = summary(&*store).await;
    assert_eq!(counts(&s1), [0, 0, 0, 1, 0, 0]);
    assert_eq!(s0.succeeded, s1.succeeded);
    assert!(store.top_errors(10).await.unwrap().is_empty());

    // A batch mixing owned and foreign jobs applies exactly the owned ones.
    let other = processing_job(&*store, req("q2", "t"), "thief").await;
    let applied = store
        .complete("owner", vec![succeeded(other, None), succeeded(id, None)])
        .await
        .unwrap();
    assert_eq!(applied, vec![Applied::NotApplied, Applied::Applied]);
    assert_eq!(state(&*store, other).await, Some(JobState::Processing));
    assert_eq!(state(&*store, id).await, Some(JobState::Succeeded));

    // Unknown ids are simply not applied.
    let ghost = crate::model::JobId::new();
    assert!(starts_none(&*store, "owner", &[ghost]).await);
    assert_eq!(store.release("owner", &[ghost], None).await.unwrap(), 0);
    assert_eq!(
        store.heartbeat("owner", &[ghost]).await.unwrap().lost,
        vec![ghost]
    );
    assert_eq!(
        store
            .complete("owner", vec![succeeded(ghost, None)])
            .await
            .unwrap(),
        vec![Applied::NotApplied]
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn completion_requires_processing(f: StoreFactory) {
    let store = f.store();
    let id = enqueue(&*store, req("q", "t")).await;
    // Pending: nobody may complete it.
    assert!(!complete_one(&*store, "w1", succeeded(id, None)).await);
    assert_eq!(claim(&*store, "w1", 1).await, vec![id]);
    // Fetched: user code never started, so it cannot have finished.
    assert!(!complete_one(&*store, "w1", succeeded(id, None)).await);
    assert!(store.heartbeat("w1", &[id]).await.unwrap().alive.is_empty());
    assert_eq!(state(&*store, id).await, Some(JobState::Fetched));
    assert_eq!(counts(&summary(&*store).await), [0, 0, 1, 0, 0, 0]);
    assert_counters_match_rows(&*store).await;
}

pub async fn one_batch_finishing_a_job_twice_applies_the_first(f: StoreFactory) {
    let store = f.store();
    let a = processing_job(&*store, req("q", "t"), "w1").await;
    let b = processing_job(&*store, req("q2", "t"), "w1").await;
    // A timeout and the late success of one job can meet in one group commit.
    let applied = store
        .complete(
            "w1",
            vec![
                succeeded(a, Some("1")),
                dead(a, FailureReason::Timeout, "too slow"),
                dead(b, FailureReason::Fatal, "first"),
                succeeded(b, None),
                succeeded(a, Some("2")),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        applied,
        vec![
            Applied::Applied,
            Applied::NotApplied,
            Applied::Applied,
            Applied::NotApplied,
            Applied::NotApplied,
        ]
    );
    let ja = job(&*store, a).await;
    assert_eq!(
        (ja.state, ja.result.as_deref()),
        (JobState::Succeeded, Some("1"))
    );
    assert_eq!(
        state(&*store, b).await,
        Some(JobState::Dead(FailureReason::Fatal))
    );
    assert_eq!(counts(&summary(&*store).await), [0, 0, 0, 0, 1, 1]);
    // The same for starts and releases: an id given twice moves once.
    let c = enqueue(&*store, req("q3", "t")).await;
    assert_eq!(claim(&*store, "w1", 1).await, vec![c]);
    assert_eq!(store.mark_processing("w1", &[c, c]).await.unwrap(), vec![c]);
    assert_eq!(job(&*store, c).await.attempt, 1);
    let d = enqueue(&*store, req("q4", "t")).await;
    assert_eq!(claim(&*store, "w1", 1).await, vec![d]);
    assert_eq!(store.release("w1", &[d, d], None).await.unwrap(), 1);
    assert!(
        claim(&*store, "w1", 0).await.is_empty(),
        "a zero limit claims nothing"
    );
    assert_counters_match_rows(&*store).await;
}

//! Uniqueness over a window: `unique_for_ms` keeps an idempotency key taken after its job
//! finished (in the states the window counts), through retention and across handles.

use std::collections::HashSet;
use std::time::Duration;

use super::support::*;
use crate::maintenance::prune;
use crate::model::{
    CancelOutcome, EnqueueOutcome, EnqueueRequest, FailureReason, JobId, JobState, RetentionPolicy,
    UniqueState,
};
use crate::store::Store;

const HOUR_MS: u64 = 3_600_000;

fn unique(key: &str, window_ms: u64, states: &[UniqueState]) -> EnqueueRequest {
    EnqueueRequest {
        idempotency_key: Some(key.into()),
        unique_for_ms: Some(window_ms),
        unique_states: states.to_vec(),
        ..req("unique", "t")
    }
}

async fn enqueue_outcome(store: &dyn Store, r: EnqueueRequest) -> EnqueueOutcome {
    store.enqueue(r).await.expect("enqueue")
}

/// The second enqueue answers with the first job and writes nothing.
async fn assert_held_by(store: &dyn Store, r: EnqueueRequest, holder: JobId, what: &str) {
    let before = summary(store).await;
    let again = enqueue_outcome(store, r.clone()).await;
    assert_eq!((again.id, again.created), (holder, false), "{what}");
    let batch = store.enqueue_batch(vec![r]).await.expect("enqueue batch");
    assert_eq!(
        (batch[0].id, batch[0].created),
        (holder, false),
        "{what}, in a batch"
    );
    assert_eq!(
        counts(&summary(store).await),
        counts(&before),
        "{what}: nothing written"
    );
}

pub async fn a_window_counting_successes_returns_the_archived_job(f: StoreFactory) {
    let store = f.store();
    let r = unique("invoice-1", HOUR_MS, &[UniqueState::Succeeded]);
    let first = archived_job(&*store, r.clone()).await;
    assert_held_by(&*store, r.clone(), first, "a succeeded job holds the key").await;

    // A window that counts only successes lets a producer try again after a death.
    let other = unique("invoice-2", HOUR_MS, &[UniqueState::Succeeded]);
    let died = dead_job(&*store, other.clone(), FailureReason::Fatal, "bad card").await;
    let retried = enqueue_outcome(&*store, other).await;
    assert!(
        retried.created,
        "a dead job does not hold a successes-only key"
    );
    assert_ne!(retried.id, died);
    assert_counters_match_rows(&*store).await;
}

pub async fn a_window_counting_deaths_returns_the_dead_job(f: StoreFactory) {
    let store = f.store();
    let r = unique("sync-1", HOUR_MS, &[UniqueState::Dead]);
    let died = dead_job(&*store, r.clone(), FailureReason::Fatal, "bad payload").await;
    assert_held_by(&*store, r.clone(), died, "a dead job holds the key").await;

    // Cancelled is dead too.
    let c = unique(
        "sync-2",
        HOUR_MS,
        &[UniqueState::Succeeded, UniqueState::Dead],
    );
    let pending = enqueue_outcome(&*store, c.clone()).await;
    assert_eq!(
        store.cancel(pending.id).await.unwrap(),
        CancelOutcome::Cancelled
    );
    assert_held_by(&*store, c, pending.id, "a cancelled job holds the key").await;

    // Counting deaths only: a success frees the key.
    let s = unique("sync-3", HOUR_MS, &[UniqueState::Dead]);
    let done = archived_job(&*store, s.clone()).await;
    let next = enqueue_outcome(&*store, s).await;
    assert!(next.created && next.id != done);
    assert_counters_match_rows(&*store).await;
}

pub async fn a_window_without_states_counts_active_jobs_only(f: StoreFactory) {
    let store = f.store();
    let r = unique("report-1", HOUR_MS, &[]);
    let first = enqueue_outcome(&*store, r.clone()).await;
    assert!(first.created);
    assert_held_by(&*store, r.clone(), first.id, "the active job holds the key").await;
    start(&*store, "w1", 1).await;
    assert!(complete_one(&*store, "w1", succeeded(first.id, None)).await);
    let second = enqueue_outcome(&*store, r).await;
    assert!(
        second.created && second.id != first.id,
        "active only: a finished job frees the key"
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn a_lapsed_window_frees_the_key_for_a_new_window(f: StoreFactory) {
    let store = f.store();
    let short = unique("digest-1", 1, &[UniqueState::Succeeded]);
    let first = archived_job(&*store, short.clone()).await;
    let_clock_advance().await;
    let second = enqueue_outcome(&*store, short).await;
    assert!(
        second.created && second.id != first,
        "after the window the key is free"
    );
    // The new job took the key with its own window.
    start(&*store, "w1", 1).await;
    assert!(complete_one(&*store, "w1", succeeded(second.id, None)).await);
    // Its window is 1 ms from its enqueue; the start and completion can take less.
    let_clock_advance().await;
    let long = unique("digest-1", HOUR_MS, &[UniqueState::Succeeded]);
    let third = enqueue_outcome(&*store, long.clone()).await;
    assert!(
        third.created,
        "the second job's window of 1 ms has lapsed too"
    );
    start(&*store, "w1", 1).await;
    assert!(complete_one(&*store, "w1", succeeded(third.id, None)).await);
    assert_held_by(&*store, long, third.id, "the newest window holds").await;
    assert_counters_match_rows(&*store).await;
}

pub async fn a_key_outlives_retention_and_purge_inside_its_window(f: StoreFactory) {
    let store = f.store();
    let kept = unique("payout-1", HOUR_MS, &[UniqueState::Succeeded]);
    let succeeded_job = archived_job(&*store, kept.clone()).await;
    let dead_kept = unique("payout-2", HOUR_MS, &[UniqueState::Dead]);
    let dead_one = dead_job(&*store, dead_kept.clone(), FailureReason::Fatal, "x").await;
    let purged = unique("payout-3", HOUR_MS, &[UniqueState::Dead]);
    let purged_one = dead_job(&*store, purged.clone(), FailureReason::Fatal, "y").await;
    // Counting successes only: once its dead job is pruned, the key must still be free.
    let not_counted = unique("payout-4", HOUR_MS, &[UniqueState::Succeeded]);
    let not_counted_one = dead_job(&*store, not_counted.clone(), FailureReason::Fatal, "z").await;

    assert_eq!(
        store
            .purge(crate::model::Pillar::Dlq, &[purged_one])
            .await
            .unwrap(),
        1
    );
    let_clock_advance().await;
    let everything = RetentionPolicy {
        archive: Duration::ZERO,
        dlq: Duration::ZERO,
        metrics: Duration::from_secs(86_400),
        batch_size: 100,
    };
    let report = prune(&*f.connect().await, &everything).await.unwrap();
    assert_eq!((report.archive, report.dlq), (1, 2));
    for id in [succeeded_job, dead_one, purged_one, not_counted_one] {
        assert_eq!(state(&*store, id).await, None, "the job's row is gone");
    }

    assert_held_by(&*store, kept, succeeded_job, "a pruned success still holds").await;
    assert_held_by(&*store, dead_kept, dead_one, "a pruned death still holds").await;
    assert_held_by(&*store, purged, purged_one, "a purged death still holds").await;
    let free = enqueue_outcome(&*store, not_counted).await;
    assert!(
        free.created,
        "a pruned job in a state the window skips holds nothing"
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn a_resurrected_job_holds_its_key_again_as_an_active_job(f: StoreFactory) {
    let store = f.store();
    let r = unique("export-1", HOUR_MS, &[UniqueState::Succeeded]);
    let died = dead_job(&*store, r.clone(), FailureReason::Fatal, "disk full").await;
    let_clock_advance().await;
    assert_eq!(
        store.resurrect(died, None).await.unwrap(),
        crate::model::Applied::Applied
    );
    assert_eq!(state(&*store, died).await, Some(JobState::Pending));
    assert_held_by(&*store, r.clone(), died, "the resurrected job is active").await;
    start(&*store, "w1", 1).await;
    assert!(complete_one(&*store, "w1", succeeded(died, None)).await);
    assert_held_by(
        &*store,
        r,
        died,
        "and once it succeeded, its window counts it",
    )
    .await;
    assert_counters_match_rows(&*store).await;
}

/// Many producers on separate handles enqueue one key at once, twice: while nothing holds
/// it (one creates, all get its id), then after that job succeeded (nobody creates).
pub async fn racing_enqueues_of_one_unique_key_create_one_job(f: StoreFactory) {
    const PRODUCERS: usize = 8;
    let store = f.store();
    let r = unique("race-1", HOUR_MS, &[UniqueState::Succeeded]);
    let mut holder = None;
    for round in 0..2 {
        let outcomes = race(&f, PRODUCERS, |n, handle| {
            let r = r.clone();
            async move {
                if n % 2 == 0 {
                    retrying(|| handle.enqueue(r.clone())).await
                } else {
                    retrying(|| handle.enqueue_batch(vec![r.clone()]))
                        .await
                        .remove(0)
                }
            }
        })
        .await;
        let ids: HashSet<JobId> = outcomes.iter().map(|o| o.id).collect();
        assert_eq!(ids.len(), 1, "round {round}: everyone got the same id");
        let created = outcomes.iter().filter(|o| o.created).count();
        if round == 0 {
            assert_eq!(created, 1, "exactly one producer created the job");
            let id = outcomes[0].id;
            holder = Some(id);
            start(&*store, "w1", 1).await;
            assert!(complete_one(&*store, "w1", succeeded(id, None)).await);
        } else {
            assert_eq!(created, 0, "the succeeded job still holds the key");
            assert_eq!(Some(outcomes[0].id), holder);
        }
    }
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.succeeded), (0, 1));
    assert_counters_match_rows(&*store).await;
}

//! A transition that fails half-way leaves everything as it was: the source row, the
//! counters, the metric buckets. The failure is real: the backend's fault injector makes the
//! database refuse one insert inside the transaction, after other writes already happened.

use super::support::*;
use crate::model::{
    Continuation, ContinuationTrigger, EnqueueRequest, FailureReason, Job, JobState, Pillar,
};
use crate::query::JobFilter;
use crate::store::Store;
use crate::telemetry::Summary;

fn injector(f: &StoreFactory) -> Option<&dyn FaultInjector> {
    let faults = f.faults();
    if faults.is_none() {
        println!(
            "skipped: the {} store offers no fault injection",
            f.store().backend()
        );
    }
    faults
}

/// Everything a failed transition must leave untouched.
#[derive(Debug, PartialEq)]
struct Snapshot {
    jobs: Vec<Job>,
    summary: Summary,
    buckets: (u64, u64, u64),
    errors: Vec<(FailureReason, crate::fingerprint::Fingerprint, String, u64)>,
}

async fn snapshot(store: &dyn Store) -> Snapshot {
    let mut ids = Vec::new();
    for pillar in Pillar::ALL {
        ids.extend(ids_in(store, pillar, JobFilter::default()).await);
    }
    ids.sort();
    let mut jobs = Vec::new();
    for id in ids {
        jobs.push(job(store, id).await);
    }
    Snapshot {
        jobs,
        summary: summary(store).await,
        // Sums, not the buckets themselves: the window may move by a minute in between.
        buckets: store
            .throughput(10, None)
            .await
            .unwrap()
            .iter()
            .fold((0, 0, 0), |s, b| {
                (s.0 + b.succeeded, s.1 + b.failed, s.2 + b.retried)
            }),
        errors: store
            .top_errors(100)
            .await
            .unwrap()
            .into_iter()
            .map(|g| (g.reason, g.fingerprint, g.sample, g.count))
            .collect(),
    }
}

pub async fn failed_archive_insert_rolls_back_the_whole_completion_batch(f: StoreFactory) {
    let Some(faults) = injector(&f) else { return };
    let store = f.store();
    archived_job(&*store, req("q", "fine")).await;
    let good = processing_job(&*store, req("q", "fine"), "w1").await;
    let poison = processing_job(&*store, req("q", "poison"), "w1").await;
    let retry = processing_job(&*store, req("q", "fine"), "w1").await;
    faults.fail_inserts(FaultTable::Archive, "poison").await;
    let before = snapshot(&*store).await;
    // The poisoned insert comes after a move and a retry in the same group commit.
    let result = store
        .complete(
            "w1",
            vec![
                crate::model::Completion::Retry {
                    id: retry,
                    error: error(1, "x"),
                    retry_at: now_ms(),
                },
                succeeded(good, Some("1")),
                succeeded(poison, Some("2")),
            ],
        )
        .await;
    assert!(
        result.is_err(),
        "the refused insert fails the call: {result:?}"
    );
    assert_eq!(
        snapshot(&*store).await,
        before,
        "nothing of the batch happened"
    );
    for id in [good, poison, retry] {
        assert_eq!(state(&*store, id).await, Some(JobState::Processing));
    }
    // The store still works, and the same completions apply once the fault is gone.
    assert!(complete_one(&*store, "w1", succeeded(good, None)).await);
    assert_eq!(summary(&*store).await.succeeded, 2);
    assert_counters_match_rows(&*store).await;
}

pub async fn failed_dlq_insert_rolls_back_dead_letter_and_cancel(f: StoreFactory) {
    let Some(faults) = injector(&f) else { return };
    let store = f.store();
    let running = processing_job(&*store, req("q", "poison"), "w1").await;
    let other = processing_job(&*store, req("q2", "fine"), "w1").await;
    let pending = enqueue(&*store, req("p", "poison")).await;
    faults.fail_inserts(FaultTable::Dlq, "poison").await;
    let before = snapshot(&*store).await;

    let result = store
        .complete(
            "w1",
            vec![
                dead(other, FailureReason::Fatal, "fine"),
                dead(running, FailureReason::Fatal, "poison"),
            ],
        )
        .await;
    assert!(result.is_err(), "{result:?}");
    assert!(store.cancel(pending).await.is_err());
    assert!(
        store
            .bulk_by_ids(crate::query::BulkAction::Cancel, Pillar::Hot, &[pending])
            .await
            .is_err()
    );
    assert_eq!(snapshot(&*store).await, before);
    assert_eq!(state(&*store, pending).await, Some(JobState::Pending));
    assert_eq!(state(&*store, running).await, Some(JobState::Processing));
    assert_counters_match_rows(&*store).await;
}

pub async fn failed_continuation_insert_rolls_back_the_parent(f: StoreFactory) {
    let Some(faults) = injector(&f) else { return };
    let store = f.store();
    let parent = processing_job(
        &*store,
        EnqueueRequest {
            continuation: Some(Continuation {
                queue: "follow".into(),
                job_type: "poison".into(),
                trigger: ContinuationTrigger::Always,
            }),
            ..req("q", "parent")
        },
        "w1",
    )
    .await;
    faults.fail_inserts(FaultTable::Hot, "poison").await;
    let before = snapshot(&*store).await;
    let result = store
        .complete("w1", vec![succeeded(parent, Some("{}"))])
        .await;
    assert!(result.is_err(), "{result:?}");
    assert_eq!(
        snapshot(&*store).await,
        before,
        "the parent did not move without its follow-up"
    );
    assert_eq!(state(&*store, parent).await, Some(JobState::Processing));
    let result = store
        .complete("w1", vec![dead(parent, FailureReason::Fatal, "x")])
        .await;
    assert!(result.is_err(), "{result:?}");
    assert_eq!(snapshot(&*store).await, before);
    assert_counters_match_rows(&*store).await;
}

pub async fn failed_insert_rolls_back_enqueue_batch(f: StoreFactory) {
    let Some(faults) = injector(&f) else { return };
    let store = f.store();
    faults.fail_inserts(FaultTable::Hot, "poison").await;
    let before = snapshot(&*store).await;
    let reqs = vec![
        req("fresh-queue", "fine"),
        EnqueueRequest {
            idempotency_key: Some("k".into()),
            ..req("q", "fine")
        },
        req("q", "poison"),
        req("q", "fine"),
    ];
    assert!(store.enqueue_batch(reqs).await.is_err());
    assert!(store.enqueue(req("q", "poison")).await.is_err());
    assert_eq!(snapshot(&*store).await, before);
    // The key was not taken by the failed batch.
    let out = store
        .enqueue(EnqueueRequest {
            idempotency_key: Some("k".into()),
            ..req("q", "fine")
        })
        .await
        .unwrap();
    assert!(out.created);
    assert_counters_match_rows(&*store).await;
}

pub async fn failed_insert_rolls_back_resurrect_and_rescue(f: StoreFactory) {
    let Some(faults) = injector(&f) else { return };
    let store = f.store();
    let dead_one = dead_job(&*store, req("q", "poison"), FailureReason::Fatal, "x").await;
    let zombie = processing_job(&*store, req("z", "poison"), "w1").await;
    faults.fail_inserts(FaultTable::Hot, "poison").await;
    faults.fail_inserts(FaultTable::Dlq, "poison").await;
    let_clock_advance().await;
    let before = snapshot(&*store).await;
    assert!(store.resurrect(dead_one, None).await.is_err());
    assert!(rescue(&*store, &zero_timeouts()).await.is_err());
    assert_eq!(snapshot(&*store).await, before);
    assert_eq!(
        state(&*store, dead_one).await,
        Some(JobState::Dead(FailureReason::Fatal))
    );
    assert_eq!(state(&*store, zombie).await, Some(JobState::Processing));
    assert_counters_match_rows(&*store).await;
}

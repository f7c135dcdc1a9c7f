//! What an operator does in an incident: lists split as the overview's tiles count, run now
//! for one job and for many, priority changes, and bulk cancels racing the workers.

use super::support::*;
use crate::error::StoreError;
use crate::model::{Applied, AuditFilter, CancelOutcome, FailureReason, JobId, JobState, Pillar};
use crate::query::{BulkAction, JobFilter, Timing};

fn timing(t: Timing) -> JobFilter {
    JobFilter {
        timing: Some(t),
        ..Default::default()
    }
}

async fn counted(store: &dyn crate::store::Store, filter: JobFilter) -> u64 {
    let count = store.count_jobs(Pillar::Hot, &filter).await.expect("count");
    assert!(!count.capped);
    count.matching
}

/// A job claimed, started and sent back to wait an hour for its retry (attempt 1).
async fn retrying_job(store: &dyn crate::store::Store, queue: &str) -> JobId {
    let id = processing_job(store, req(queue, "t"), "w-retry").await;
    assert!(complete_one(store, "w-retry", retry_in_an_hour(id, "try later")).await);
    id
}

pub async fn timing_filters_list_exactly_what_the_tiles_count(f: StoreFactory) {
    let store = f.store();
    let due = enqueue_n(&*store, "tiles", "t", 3).await;
    let mut delayed = vec![
        enqueue(&*store, due_in(3600, "tiles", "t")).await,
        enqueue(&*store, delayed_by(600_000, "tiles", "t")).await,
    ];
    let retry = retrying_job(&*store, "tiles-retry").await;
    processing_job(&*store, req("tiles-busy", "t"), "w-busy").await;

    let s = summary(&*store).await;
    assert_eq!((s.pending, s.scheduled, s.processing), (3, 3, 1));
    assert_eq!(counted(&*store, timing(Timing::Due)).await, s.pending);
    assert_eq!(
        counted(&*store, timing(Timing::Scheduled)).await,
        s.scheduled
    );
    assert_eq!(counted(&*store, timing(Timing::Retrying)).await, 1);

    let mut due_listed = ids_in(&*store, Pillar::Hot, timing(Timing::Due)).await;
    due_listed.sort();
    let mut due_sorted = due.clone();
    due_sorted.sort();
    assert_eq!(
        due_listed, due_sorted,
        "the due list is the pending tile's jobs"
    );
    delayed.push(retry);
    delayed.sort();
    assert_eq!(
        ids_in(&*store, Pillar::Hot, timing(Timing::Scheduled)).await,
        delayed,
        "the scheduled list is the delayed and the retrying jobs"
    );
    assert_eq!(
        ids_in(&*store, Pillar::Hot, timing(Timing::Retrying)).await,
        vec![retry]
    );
    // A timing means pending: with another status it matches nothing.
    let contradiction = JobFilter {
        status: Some(crate::model::HotStatus::Processing),
        ..timing(Timing::Due)
    };
    assert_eq!(counted(&*store, contradiction).await, 0);
}

pub async fn run_now_makes_a_waiting_job_due_without_spending_an_attempt(f: StoreFactory) {
    let store = f.store();
    let ops = door(&store);
    let delayed = enqueue(&*store, due_in(3600, "soon", "t")).await;
    let retry = retrying_job(&*store, "soon").await;
    let due = enqueue(&*store, req("soon", "t")).await;
    let running = processing_job(&*store, req("busy", "t"), "w-run").await;

    assert_eq!(ops.run_now("op", delayed).await.unwrap(), Applied::Applied);
    let now = chrono::Utc::now();
    let moved = job(&*store, delayed).await;
    assert!(moved.scheduled_at <= now, "due at once");
    assert_eq!((moved.state, moved.attempt), (JobState::Pending, 0));

    assert_eq!(ops.run_now("op", retry).await.unwrap(), Applied::Applied);
    let brought = job(&*store, retry).await;
    assert_eq!(
        brought.attempt, 1,
        "a retry brought forward is the same retry"
    );
    assert_eq!(brought.errors.len(), 1, "its error history stays");

    assert_eq!(
        ops.run_now("op", due).await.unwrap(),
        Applied::NotApplied,
        "a due job is already as early as it gets"
    );
    assert!(matches!(
        ops.run_now("op", running).await,
        Err(StoreError::InvalidState {
            state: JobState::Processing,
            ..
        })
    ));
    assert!(matches!(
        ops.run_now("op", JobId::new()).await,
        Err(StoreError::JobNotFound(_))
    ));

    // All three pending jobs of the queue are claimable now; the retry starts attempt 2.
    let mut claimed = claim_jobs(&*store, "w2", 10, Some(vec!["soon".into()]))
        .await
        .into_iter()
        .map(|j| j.id)
        .collect::<Vec<_>>();
    claimed.sort();
    let mut expected = vec![delayed, retry, due];
    expected.sort();
    assert_eq!(claimed, expected);
    store.mark_processing("w2", &[retry]).await.unwrap();
    assert_eq!(job(&*store, retry).await.attempt, 2);

    let audit = store
        .list_audit(
            &AuditFilter {
                action: Some("job.run_now".into()),
                ..Default::default()
            },
            None,
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        audit.len(),
        5,
        "each applied, no-op and refused run now is audited (the audit rule)"
    );
    assert!(
        audit
            .iter()
            .filter(|a| a
                .detail
                .as_deref()
                .is_some_and(|d| d.starts_with("refused:")))
            .all(|a| a.count == 0)
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn bulk_run_now_and_priority_change_only_pending_jobs(f: StoreFactory) {
    let store = f.store();
    let ops = door(&store);
    // An operator's bulk action on the active jobs `filter` matches, at most `cap`.
    let on_active = |action, filter: &JobFilter, cap| {
        let (ops, filter) = (ops.clone(), filter.clone());
        async move {
            ops.bulk_by_filter("op", action, Pillar::Hot, &filter, cap, |_| {})
                .await
                .unwrap()
        }
    };
    // Enough rows to need several bounded steps.
    let running = processing_job(&*store, req("later", "t"), "w-p").await;
    let reqs = (0..450).map(|_| due_in(3600, "later", "t")).collect();
    enqueue_all(&*store, reqs).await;
    enqueue_n(&*store, "later", "t", 5).await;
    let scheduled = JobFilter {
        queue: Some("later".into()),
        timing: Some(Timing::Scheduled),
        ..Default::default()
    };
    assert_eq!(counted(&*store, scheduled.clone()).await, 450);

    let report = on_active(BulkAction::RunNow, &scheduled, 400).await;
    assert_eq!((report.done, report.stopped), (400, None), "the cap holds");
    assert_eq!(counted(&*store, scheduled.clone()).await, 50);
    let report = on_active(BulkAction::RunNow, &scheduled, 1000).await;
    assert_eq!(report.done, 50);
    assert_eq!(counted(&*store, timing(Timing::Due)).await, 455);
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.scheduled), (455, 0));

    let queue = filter_queue("later");
    let report = on_active(BulkAction::SetPriority(7), &queue, 1000).await;
    assert_eq!(report.done, 455, "every pending job, not the running one");
    let sample = ids_in(&*store, Pillar::Hot, timing(Timing::Due)).await;
    assert_eq!(job(&*store, sample[0]).await.priority, 7);
    assert_eq!(job(&*store, running).await.priority, 0);
    let again = on_active(BulkAction::SetPriority(7), &queue, 1000).await;
    assert_eq!(again.done, 0, "jobs already at the priority are left alone");
    // Claims follow the new priority: a priority-7 job goes before a new priority-0 one.
    enqueue(&*store, req("later", "t")).await;
    let first = claim_jobs(&*store, "w-c", 1, Some(vec!["later".into()])).await;
    assert_eq!(first[0].priority, 7);

    assert!(is_invalid(
        ops.bulk_by_filter("op", BulkAction::RunNow, Pillar::Dlq, &queue, 10, |_| {})
            .await
    ));
    let audit = store
        .list_audit(
            &AuditFilter {
                action: Some("active.bulk_set_priority".into()),
                ..Default::default()
            },
            None,
            10,
        )
        .await
        .unwrap();
    assert_eq!(audit.len(), 2);
    assert!(
        audit[0]
            .detail
            .as_deref()
            .unwrap_or("")
            .contains("priority 7")
    );
    assert_counters_match_rows(&*store).await;
}

/// An operator cancels a flood by filter while three workers keep claiming and starting
/// it: every job ends in exactly one place — cancelled in the DLQ, or running with its
/// cancel requested, or running untouched because it started after the run passed it —
/// and the counters match the rows.
pub async fn bulk_cancel_by_filter_racing_workers_loses_no_job(f: StoreFactory) {
    const FLOOD: usize = 600;
    let store = f.store();
    let ids = enqueue_n(&*store, "flood", "bad", FLOOD).await;
    let answers = race(&f, 4, |n, handle| async move {
        if n == 0 {
            let report = door(&handle)
                .bulk_by_filter(
                    "op",
                    BulkAction::Cancel,
                    Pillar::Hot,
                    &filter_queue("flood"),
                    10_000,
                    |_| {},
                )
                .await
                .expect("the bulk run");
            return (report.done, 0);
        }
        let worker = format!("w{n}");
        let mut started = 0u64;
        loop {
            let claimed: Vec<JobId> = retrying(|| {
                handle.claim_batch(claim_request(&worker, 20, Some(vec!["flood".into()])))
            })
            .await
            .into_iter()
            .map(|j| j.id)
            .collect();
            if claimed.is_empty() {
                break;
            }
            let marked = retrying(|| handle.mark_processing(&worker, &claimed)).await;
            started += marked.len() as u64;
        }
        (0, started)
    })
    .await;
    let done = answers[0].0;
    let started: u64 = answers.iter().map(|a| a.1).sum();

    let dead = ids_in(&*store, Pillar::Dlq, filter_queue("flood")).await;
    let active = list_all(&*store, Pillar::Hot, filter_queue("flood")).await;
    assert_eq!(dead.len() + active.len(), FLOOD, "no job lost or doubled");
    assert!(
        active.iter().all(|j| j.state == JobState::Processing),
        "nothing is left pending or buffered"
    );
    assert!(
        active.len() as u64 <= started,
        "only started jobs are still active"
    );
    for id in dead.iter().take(20) {
        assert_eq!(
            job(&*store, *id).await.state,
            JobState::Dead(FailureReason::Cancelled)
        );
    }
    // What the run says it did: the dead letters it made plus the running jobs it asked to
    // stop (never more than there are jobs).
    assert!(done >= dead.len() as u64 && done <= FLOOD as u64);
    // The running ones are cancelled one by one now; each says so.
    for j in &active {
        let outcome = store.cancel(j.id).await.unwrap();
        assert_eq!(outcome, CancelOutcome::Requested);
    }
    assert_eq!(ids.len(), FLOOD);
    assert_counters_match_rows(&*store).await;
}

//! Every move of a job's life: worker transitions, operator actions and continuations.

use super::support::*;
use crate::error::StoreError;
use crate::model::{
    Applied, AttemptError, CancelOutcome, Completion, Continuation, ContinuationTrigger,
    EnqueueRequest, FailureReason, JobEdit, JobId, JobState, Pillar,
};
use crate::query::{BulkAction, JobFilter};

pub async fn success_moves_the_job_to_the_archive(f: StoreFactory) {
    let store = f.store();
    let started = chrono::Utc::now();
    let id = enqueue(&*store, req("mail", "send")).await;
    let claimed = claim_jobs(&*store, "w1", 5, None).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, id);
    assert_eq!(claimed[0].state, JobState::Fetched);
    let fetched = job(&*store, id).await;
    assert_eq!(fetched.state, JobState::Fetched);
    assert_eq!(fetched.worker_id.as_deref(), Some("w1"));
    assert_eq!(fetched.attempt, 0, "no attempt before user code starts");

    assert_eq!(store.mark_processing("w1", &[id]).await.unwrap(), vec![id]);
    let running = job(&*store, id).await;
    assert_eq!(running.state, JobState::Processing);
    assert_eq!(running.attempt, 1);
    assert!(running.started_at.is_some() && running.heartbeat_at.is_some());
    assert_eq!(summary(&*store).await.processing, 1);

    let hb = store.heartbeat("w1", &[id]).await.unwrap();
    assert_eq!(hb.alive, vec![id]);
    assert!(hb.cancel_requested.is_empty() && hb.lost.is_empty());
    assert!(job(&*store, id).await.heartbeat_at >= running.heartbeat_at);

    let applied = store
        .complete(
            "w1",
            vec![Completion::Succeeded {
                id,
                result: Some(r#"{"sent":true}"#.into()),
                duration_ms: 42,
            }],
        )
        .await
        .unwrap();
    assert_eq!(applied, vec![Applied::Applied]);
    let done = job(&*store, id).await;
    assert_eq!(done.state, JobState::Succeeded);
    assert_eq!(done.pillar(), Pillar::Archive);
    assert_eq!(done.result.as_deref(), Some(r#"{"sent":true}"#));
    assert_eq!(done.attempt, 1);
    assert!(done.finished_at.is_some());
    assert_eq!(done.payload, r#"{"n":1}"#);
    assert_eq!(done.created_at, running.created_at);

    let s = summary(&*store).await;
    assert_eq!(counts(&s), [0, 0, 0, 0, 1, 0]);
    assert_eq!(s.succeeded_5m, 1);
    assert_last_minute(s.succeeded_1m, 1, started, "succeeded in the last minute");
    let q = store.queue_stats().await.unwrap();
    let mail = q.iter().find(|q| q.queue == "mail").unwrap();
    assert_eq!((mail.succeeded, mail.pending, mail.processing), (1, 0, 0));
    let buckets = store.throughput(5, None).await.unwrap();
    assert_eq!(buckets.iter().map(|b| b.succeeded).sum::<u64>(), 1);
    assert_eq!(buckets.iter().map(|b| b.duration_sum_ms).sum::<u64>(), 42);
    assert_eq!(buckets.iter().map(|b| b.duration_max_ms).max(), Some(42));
    let mail_buckets = store.throughput(5, Some("mail")).await.unwrap();
    assert_eq!(mail_buckets.iter().map(|b| b.succeeded).sum::<u64>(), 1);
    let other = store.throughput(5, Some("other")).await.unwrap();
    assert_eq!(other.iter().map(|b| b.succeeded).sum::<u64>(), 0);

    // Finished for good: a second completion is refused.
    assert!(!complete_one(&*store, "w1", succeeded(id, None)).await);
    assert_eq!(summary(&*store).await.succeeded, 1);
    assert_counters_match_rows(&*store).await;
}

/// Results and errors longer than 4,000 characters (the NVARCHAR(4000) boundary, where
/// Babelfish cut values read through OPENJSON WITH) are kept whole. The result is compared as
/// a JSON value: a server may store JSON text in its own normal form.
pub async fn long_results_and_errors_are_kept_whole(f: StoreFactory) {
    let store = f.store();
    let long_text = "résultat ".repeat(1_000);
    let result = serde_json::json!({ "text": long_text, "n": 7 }).to_string();
    let id = processing_job(&*store, req("long", "t"), "w1").await;
    assert!(complete_one(&*store, "w1", succeeded(id, Some(&result))).await);
    let done = job(&*store, id).await;
    let stored: serde_json::Value =
        serde_json::from_str(done.result.as_deref().expect("a result")).expect("JSON result");
    assert_eq!(stored["text"].as_str(), Some(long_text.as_str()));
    assert_eq!(stored["n"], 7);

    let message = "échec ".repeat(1_000);
    let retried = processing_job(&*store, req("long", "t"), "w1").await;
    assert!(
        complete_one(
            &*store,
            "w1",
            Completion::Retry {
                id: retried,
                error: error(1, &message),
                retry_at: now_ms() + secs(3600),
            }
        )
        .await
    );
    let j = job(&*store, retried).await;
    assert_eq!(j.errors.len(), 1);
    assert_eq!(j.errors[0].message, message);
    assert_counters_match_rows(&*store).await;
}

pub async fn retry_puts_the_job_back_with_its_error(f: StoreFactory) {
    let store = f.store();
    let id = processing_job(&*store, req("q", "flaky"), "w1").await;
    let retry_at = now_ms() + secs(3600);
    let err = AttemptError {
        retry_at: Some(retry_at),
        ..error(1, "connection reset")
    };
    let applied = store
        .complete(
            "w1",
            vec![Completion::Retry {
                id,
                error: err.clone(),
                retry_at,
            }],
        )
        .await
        .unwrap();
    assert_eq!(applied, vec![Applied::Applied]);
    let j = job(&*store, id).await;
    assert_eq!(j.state, JobState::Pending);
    assert_eq!(trunc_ms(j.scheduled_at), retry_at);
    assert_eq!(j.attempt, 1, "the spent attempt is kept");
    assert_eq!(j.errors.len(), 1);
    assert_eq!(
        (j.errors[0].attempt, &j.errors[0].kind, &j.errors[0].message),
        (1, &err.kind, &err.message)
    );
    assert_eq!(trunc_ms(j.errors[0].at), err.at);
    // The run's record (start, duration, instance, retry time) is kept whole.
    let kept = &j.errors[0];
    assert_eq!(
        (
            kept.started_at.map(trunc_ms),
            kept.duration_ms,
            kept.instance.as_deref(),
            kept.retry_at.map(trunc_ms)
        ),
        (
            err.started_at,
            err.duration_ms,
            err.instance.as_deref(),
            Some(retry_at)
        )
    );
    assert!(claim(&*store, "w1", 5).await.is_empty(), "not due yet");
    let s = summary(&*store).await;
    assert_eq!(counts(&s), [0, 1, 0, 0, 0, 0]);
    assert_eq!(s.retried_5m, 1);
    let retried = throughput_sum(&*store, 5, None, |b| b.retried).await;
    assert_eq!(retried, 1);

    // A second attempt: retry due now, then it dies; both errors are kept.
    let applied = store
        .complete(
            "w1",
            vec![Completion::Retry {
                id,
                error: error(1, "ignored"),
                retry_at: now_ms(),
            }],
        )
        .await
        .unwrap();
    assert_eq!(
        applied,
        vec![Applied::NotApplied],
        "pending is not processing"
    );

    // A retry due at once runs again and counts a second attempt; then it dies and both
    // errors are kept.
    let id2 = processing_job(&*store, req("q2", "flaky"), "w2").await;
    store
        .complete(
            "w2",
            vec![Completion::Retry {
                id: id2,
                error: error(1, "first"),
                retry_at: now_ms() - secs(1),
            }],
        )
        .await
        .unwrap();
    let again = claim_jobs(&*store, "w3", 5, Some(vec!["q2".into()])).await;
    assert_eq!(again.len(), 1);
    assert_eq!(
        store.mark_processing("w3", &[id2]).await.unwrap(),
        vec![id2]
    );
    assert_eq!(job(&*store, id2).await.attempt, 2);
    let dead_err = crate::model::AttemptError {
        attempt: 2,
        ..error(2, "second")
    };
    assert!(
        complete_one(
            &*store,
            "w3",
            Completion::DeadLetter {
                id: id2,
                reason: FailureReason::Failed,
                error: dead_err,
                duration_ms: 1,
            }
        )
        .await
    );
    let j = job(&*store, id2).await;
    assert_eq!(j.state, JobState::Dead(FailureReason::Failed));
    let messages: Vec<_> = j
        .errors
        .iter()
        .map(|e| (e.attempt, e.message.as_str()))
        .collect();
    assert_eq!(messages, vec![(1, "first"), (2, "second")]);
    assert_counters_match_rows(&*store).await;
}

pub async fn dead_letter_moves_the_job_to_the_dlq(f: StoreFactory) {
    let store = f.store();
    let started = chrono::Utc::now();
    let id = processing_job(&*store, req("q", "poison"), "w1").await;
    assert!(
        complete_one(
            &*store,
            "w1",
            dead(id, FailureReason::Fatal, "bad payload: no id")
        )
        .await
    );
    let j = job(&*store, id).await;
    assert_eq!(j.state, JobState::Dead(FailureReason::Fatal));
    assert_eq!(j.pillar(), Pillar::Dlq);
    assert_eq!(j.errors.len(), 1);
    assert_eq!(j.errors[0].message, "bad payload: no id");
    assert!(j.finished_at.is_some());
    assert_eq!(j.result, None);
    let s = summary(&*store).await;
    assert_eq!(counts(&s), [0, 0, 0, 0, 0, 1]);
    assert_eq!(s.failed_5m, 1);
    assert_last_minute(s.failed_1m, 1, started, "failed in the last minute");
    let q = store.queue_stats().await.unwrap();
    assert_eq!(q.iter().find(|q| q.queue == "q").unwrap().failed, 1);
    let failed: u64 = store
        .throughput(5, None)
        .await
        .unwrap()
        .iter()
        .map(|b| b.failed)
        .sum();
    assert_eq!(failed, 1);
    let groups = store.top_errors(10).await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].reason, FailureReason::Fatal);
    assert_eq!(groups[0].sample, "bad payload: no id");
    assert_eq!(groups[0].count, 1);
    assert!(!complete_one(&*store, "w1", succeeded(id, None)).await);
    assert_counters_match_rows(&*store).await;
}

pub async fn release_returns_fetched_jobs_without_spending_an_attempt(f: StoreFactory) {
    let store = f.store();
    enqueue_n(&*store, "q", "t", 3).await;
    let ids = claim(&*store, "w1", 3).await;
    assert_eq!(ids.len(), 3);
    assert_eq!(store.release("w1", &ids[..2], None).await.unwrap(), 2);
    for id in &ids[..2] {
        let j = job(&*store, *id).await;
        assert_eq!((j.state, j.attempt), (JobState::Pending, 0));
    }
    assert_eq!(state(&*store, ids[2]).await, Some(JobState::Fetched));
    assert_eq!(
        sorted(claim(&*store, "w2", 5).await),
        sorted(ids[..2].to_vec())
    );
    // Only fetched jobs are released: a processing one stays.
    assert_eq!(
        store.mark_processing("w1", &[ids[2]]).await.unwrap(),
        vec![ids[2]]
    );
    assert_eq!(store.release("w1", &[ids[2]], None).await.unwrap(), 0);
    assert_eq!(state(&*store, ids[2]).await, Some(JobState::Processing));
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.fetched, s.processing), (0, 2, 1));
    assert_counters_match_rows(&*store).await;
}

pub async fn released_completion_gives_a_started_job_back_unrun(f: StoreFactory) {
    let store = f.store();
    let first = enqueue(&*store, req("q", "t")).await;
    let second = enqueue(&*store, req("q", "t")).await;
    let started = claim_starting(&*store, "ext:w1:lease", 2, 2).await;
    assert_eq!(started.len(), 2);
    assert!(
        started
            .iter()
            .all(|j| j.state == JobState::Processing && j.attempt == 1)
    );
    let applied = store
        .complete(
            "ext:w1:lease",
            vec![
                Completion::Released { id: first },
                Completion::Released { id: second },
            ],
        )
        .await
        .unwrap();
    assert_eq!(applied, vec![Applied::Applied, Applied::Applied]);
    let j = job(&*store, first).await;
    assert_eq!(
        (j.state, j.attempt),
        (JobState::Pending, 0),
        "the attempt is not counted"
    );
    assert!(j.errors.is_empty() && j.worker_id.is_none());
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.processing, s.retried_5m), (2, 0, 0));
    // Back where they stood: the next claim gets them in the same order.
    assert_eq!(claim(&*store, "w2", 2).await, vec![first, second]);
    // Another owner's release changes nothing.
    store.mark_processing("w2", &[first]).await.unwrap();
    assert!(!complete_one(&*store, "ext:w1:lease", Completion::Released { id: first }).await);
    assert_eq!(state(&*store, first).await, Some(JobState::Processing));
    assert_counters_match_rows(&*store).await;
}

pub async fn release_with_run_at_defers_the_job(f: StoreFactory) {
    let store = f.store();
    let id = enqueue(&*store, req("q", "t")).await;
    assert_eq!(claim(&*store, "w1", 1).await, vec![id]);
    let run_at = now_ms() + secs(600);
    assert_eq!(store.release("w1", &[id], Some(run_at)).await.unwrap(), 1);
    let j = job(&*store, id).await;
    assert_eq!((j.state, j.attempt), (JobState::Pending, 0));
    assert_eq!(trunc_ms(j.scheduled_at), run_at);
    assert!(claim(&*store, "w1", 1).await.is_empty());
    assert_eq!(summary(&*store).await.scheduled, 1);
    assert_counters_match_rows(&*store).await;
}

pub async fn cancel_of_pending_or_fetched_dead_letters_at_once(f: StoreFactory) {
    let store = f.store();
    let pending = enqueue(&*store, req("q", "t")).await;
    let fetched = enqueue(&*store, req("q", "t")).await;
    let claimed = claim(&*store, "w1", 2).await;
    assert_eq!(claimed.len(), 2);
    assert_eq!(store.release("w1", &[pending], None).await.unwrap(), 1);
    assert_eq!(
        store.cancel(pending).await.unwrap(),
        CancelOutcome::Cancelled
    );
    assert_eq!(
        store.cancel(fetched).await.unwrap(),
        CancelOutcome::Cancelled
    );
    for id in [pending, fetched] {
        assert_eq!(
            state(&*store, id).await,
            Some(JobState::Dead(FailureReason::Cancelled))
        );
    }
    // The worker that buffered the cancelled job cannot start it.
    assert!(starts_none(&*store, "w1", &[fetched]).await);
    let s = summary(&*store).await;
    assert_eq!(counts(&s), [0, 0, 0, 0, 0, 2]);
    assert_counters_match_rows(&*store).await;
}

pub async fn cancel_of_processing_is_requested_through_the_heartbeat(f: StoreFactory) {
    let store = f.store();
    let id = processing_job(&*store, req("q", "long"), "w1").await;
    let operator = f.connect().await;
    assert_eq!(operator.cancel(id).await.unwrap(), CancelOutcome::Requested);
    let j = job(&*store, id).await;
    assert_eq!(
        j.state,
        JobState::Processing,
        "user code stops it, not the store"
    );
    assert!(j.cancel_requested);
    let hb = store.heartbeat("w1", &[id]).await.unwrap();
    assert_eq!(hb.cancel_requested, vec![id]);
    assert!(hb.lost.is_empty());
    // The worker stops it and reports it cancelled.
    assert!(
        complete_one(
            &*store,
            "w1",
            dead(id, FailureReason::Cancelled, "cancelled by operator")
        )
        .await
    );
    assert_eq!(
        state(&*store, id).await,
        Some(JobState::Dead(FailureReason::Cancelled))
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn cancel_of_finished_or_unknown_is_not_found(f: StoreFactory) {
    let store = f.store();
    let done = archived_job(&*store, req("q", "t")).await;
    let dead = dead_job(&*store, req("q", "t"), FailureReason::Fatal, "x").await;
    assert_eq!(store.cancel(done).await.unwrap(), CancelOutcome::NotFound);
    assert_eq!(store.cancel(dead).await.unwrap(), CancelOutcome::NotFound);
    assert_eq!(
        store.cancel(JobId::new()).await.unwrap(),
        CancelOutcome::NotFound
    );
    assert_eq!(state(&*store, done).await, Some(JobState::Succeeded));
    assert_eq!(
        state(&*store, dead).await,
        Some(JobState::Dead(FailureReason::Fatal))
    );
    assert_eq!(counts(&summary(&*store).await), [0, 0, 0, 0, 1, 1]);
    assert_counters_match_rows(&*store).await;
}

pub async fn resurrect_brings_a_dead_job_back_with_edits(f: StoreFactory) {
    let store = f.store();
    let original = r#"{"n":1}"#;
    let id = dead_job(&*store, req("q", "t"), FailureReason::Failed, "boom").await;
    assert_eq!(counts(&summary(&*store).await), [0, 0, 0, 0, 0, 1]);
    let edit = JobEdit {
        payload: Some(r#"{"n":2}"#.into()),
        tags: Some(vec!["fixed".into()]),
        priority: Some(3),
        queue: Some("q-retry".into()),
    };
    assert_eq!(
        store.resurrect(id, Some(edit)).await.unwrap(),
        Applied::Applied
    );
    let j = job(&*store, id).await;
    assert_eq!(j.state, JobState::Pending);
    assert_eq!(j.attempt, 0);
    assert_eq!(j.worker_id, None);
    assert_eq!(j.finished_at, None);
    assert_eq!(j.errors.len(), 1, "error history kept");
    assert_eq!(j.errors[0].message, "boom");
    assert_eq!(j.payload, r#"{"n":2}"#);
    assert_eq!(j.original_payload.as_deref(), Some(original));
    assert_eq!(j.tags, vec!["fixed".to_string()]);
    assert_eq!((j.priority, j.queue.as_str()), (3, "q-retry"));
    assert!(since(j.scheduled_at) < secs(60), "due now");
    assert_eq!(counts(&summary(&*store).await), [1, 0, 0, 0, 0, 0]);
    let q = store.queue_stats().await.unwrap();
    assert_eq!(q.iter().find(|q| q.queue == "q").unwrap().failed, 0);

    // It runs again, and dies again: the first payload is still the original.
    let claimed = claim(&*store, "w9", 5).await;
    assert_eq!(claimed, vec![id]);
    store.mark_processing("w9", &[id]).await.unwrap();
    assert!(complete_one(&*store, "w9", dead(id, FailureReason::Fatal, "again")).await);
    assert_eq!(
        store
            .resurrect(
                id,
                Some(JobEdit {
                    payload: Some(r#"{"n":3}"#.into()),
                    ..Default::default()
                })
            )
            .await
            .unwrap(),
        Applied::Applied
    );
    let j = job(&*store, id).await;
    assert_eq!(j.payload, r#"{"n":3}"#);
    assert_eq!(j.original_payload.as_deref(), Some(original));
    assert_eq!(j.errors.len(), 2);

    // Without edits, payload unchanged.
    let plain = dead_job(&*store, req("q", "t"), FailureReason::Failed, "x").await;
    assert_eq!(
        store.resurrect(plain, None).await.unwrap(),
        Applied::Applied
    );
    let p = job(&*store, plain).await;
    assert_eq!(
        (p.payload.as_str(), p.original_payload.as_deref()),
        (original, None)
    );

    // An invalid edit is rejected and the job stays in the DLQ.
    let stays = dead_job(&*store, req("q3", "t"), FailureReason::Failed, "x").await;
    let bad = JobEdit {
        payload: Some("{nope".into()),
        ..Default::default()
    };
    assert!(is_invalid(
        door(&store).resurrect("op", stays, Some(bad)).await
    ));
    assert_eq!(
        state(&*store, stays).await,
        Some(JobState::Dead(FailureReason::Failed))
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn resurrect_of_a_job_not_in_the_dlq_is_not_found(f: StoreFactory) {
    let store = f.store();
    let archived = archived_job(&*store, req("q", "t")).await;
    let pending = enqueue(&*store, req("q", "t")).await;
    for id in [pending, archived, JobId::new()] {
        assert!(
            matches!(store.resurrect(id, None).await, Err(StoreError::JobNotFound(got)) if got == id),
            "{id} is not in the DLQ"
        );
    }
    assert_eq!(state(&*store, archived).await, Some(JobState::Succeeded));
    assert_eq!(counts(&summary(&*store).await), [1, 0, 0, 0, 1, 0]);
    assert_counters_match_rows(&*store).await;
}

pub async fn resurrect_drops_a_key_an_active_job_now_holds(f: StoreFactory) {
    let store = f.store();
    let keyed = |p: &str| EnqueueRequest {
        idempotency_key: Some("report-2026-11".into()),
        ..EnqueueRequest::new("q", "t", p)
    };
    let first = store.enqueue(keyed(r#"{"v":1}"#)).await.unwrap().id;
    assert_eq!(store.cancel(first).await.unwrap(), CancelOutcome::Cancelled);
    let second = store.enqueue(keyed(r#"{"v":2}"#)).await.unwrap();
    assert!(second.created);
    assert_eq!(
        store.resurrect(first, None).await.unwrap(),
        Applied::Applied
    );
    let a = job(&*store, first).await;
    let b = job(&*store, second.id).await;
    assert_eq!(a.state, JobState::Pending);
    assert_eq!(a.idempotency_key, None, "the active job keeps the key");
    assert_eq!(b.idempotency_key.as_deref(), Some("report-2026-11"));
    let dup = store.enqueue(keyed("{}")).await.unwrap();
    assert_eq!((dup.id, dup.created), (second.id, false));

    // When nobody holds the key, the resurrected job keeps it.
    let lone = store
        .enqueue(EnqueueRequest {
            idempotency_key: Some("lone".into()),
            ..req("q", "t")
        })
        .await
        .unwrap()
        .id;
    store.cancel(lone).await.unwrap();
    store.resurrect(lone, None).await.unwrap();
    assert_eq!(
        job(&*store, lone).await.idempotency_key.as_deref(),
        Some("lone")
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn edit_job_changes_pending_and_dead_jobs(f: StoreFactory) {
    let store = f.store();
    let id = enqueue(&*store, EnqueueRequest::new("q", "t", r#"{"a":1}"#)).await;
    let edited = store
        .edit_job(
            id,
            JobEdit {
                payload: Some(r#"{"a":2}"#.into()),
                tags: Some(vec!["x".into(), "y".into()]),
                priority: Some(-2),
                queue: Some("q2".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(edited.payload, r#"{"a":2}"#);
    assert_eq!(edited.original_payload.as_deref(), Some(r#"{"a":1}"#));
    let j = job(&*store, id).await;
    assert_eq!(j, edited, "get_job sees what edit_job returned");
    assert_eq!(
        (j.priority, j.queue.as_str(), j.state),
        (-2, "q2", JobState::Pending)
    );
    assert_eq!(j.tags, vec!["x".to_string(), "y".to_string()]);
    let again = store
        .edit_job(
            id,
            JobEdit {
                payload: Some(r#"{"a":3}"#.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        again.original_payload.as_deref(),
        Some(r#"{"a":1}"#),
        "the first payload"
    );
    assert_eq!(
        again.tags,
        vec!["x".to_string(), "y".to_string()],
        "untouched"
    );
    // It is claimable from its new queue.
    assert!(
        claim_jobs(&*store, "w", 5, Some(vec!["q".into()]))
            .await
            .is_empty()
    );
    let moved = claim_jobs(&*store, "w", 5, Some(vec!["q2".into()])).await;
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].id, id);

    let dead = dead_job(&*store, req("dq", "t"), FailureReason::Fatal, "x").await;
    let edited = store
        .edit_job(
            dead,
            JobEdit {
                priority: Some(8),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(edited.priority, 8);
    assert_eq!(
        edited.state,
        JobState::Dead(FailureReason::Fatal),
        "stays dead"
    );
    assert_eq!(summary(&*store).await.dlq, 1);
    // Moving a dead job to another queue moves its share of the per-queue counter.
    store
        .edit_job(
            dead,
            JobEdit {
                queue: Some("dq2".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let stats = store.queue_stats().await.unwrap();
    let failed = |name: &str| {
        stats
            .iter()
            .find(|q| q.queue == name)
            .map_or(0, |q| q.failed)
    };
    assert_eq!((failed("dq"), failed("dq2")), (0, 1));

    let bad = JobEdit {
        tags: Some(vec!["has,comma".into()]),
        ..Default::default()
    };
    assert!(is_invalid(door(&store).edit("op", id, bad).await));
    assert_eq!(
        job(&*store, id).await.tags,
        vec!["x".to_string(), "y".to_string()]
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn edit_job_refuses_fetched_processing_and_archived(f: StoreFactory) {
    let store = f.store();
    let edit = JobEdit {
        priority: Some(1),
        ..Default::default()
    };
    let archived = archived_job(&*store, req("q", "t")).await;
    let running = processing_job(&*store, req("q", "t"), "w1").await;
    let fetched = enqueue(&*store, req("q", "t")).await;
    assert_eq!(claim(&*store, "w2", 1).await, vec![fetched]);
    for (id, expected) in [
        (archived, JobState::Succeeded),
        (running, JobState::Processing),
        (fetched, JobState::Fetched),
    ] {
        match store.edit_job(id, edit.clone()).await {
            Err(StoreError::InvalidState { id: got, state, .. }) => {
                assert_eq!((got, state), (id, expected));
            }
            other => panic!("editing a {expected} job: {other:?}"),
        }
        assert_eq!(job(&*store, id).await.priority, 0);
    }
    assert!(matches!(
        store.edit_job(JobId::new(), edit).await,
        Err(StoreError::JobNotFound(_))
    ));
    assert_counters_match_rows(&*store).await;
}

pub async fn purge_deletes_from_each_pillar(f: StoreFactory) {
    let store = f.store();
    let archived = archived_job(&*store, req("q", "t")).await;
    let dead = dead_job(&*store, req("q", "t"), FailureReason::Fatal, "x").await;
    let running = processing_job(&*store, req("q", "t"), "w1").await;
    let pending = enqueue(&*store, req("q", "t")).await;
    let fetched = enqueue(&*store, req("f", "t")).await;
    assert_eq!(
        claim_jobs(&*store, "w2", 1, Some(vec!["f".into()])).await[0].id,
        fetched
    );
    assert_eq!(store.purge(Pillar::Hot, &[fetched]).await.unwrap(), 0);
    assert_eq!(store.release("w2", &[fetched], None).await.unwrap(), 1);
    assert_eq!(store.purge(Pillar::Hot, &[fetched]).await.unwrap(), 1);
    assert_eq!(counts(&summary(&*store).await), [1, 0, 0, 1, 1, 1]);

    // Wrong pillar or not pending: nothing goes.
    assert_eq!(
        store
            .purge(Pillar::Hot, &[running, archived, dead])
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .purge(Pillar::Archive, &[pending, dead])
            .await
            .unwrap(),
        0
    );
    assert_eq!(store.purge(Pillar::Dlq, &[archived]).await.unwrap(), 0);
    assert_eq!(counts(&summary(&*store).await), [1, 0, 0, 1, 1, 1]);

    assert_eq!(store.purge(Pillar::Hot, &[pending]).await.unwrap(), 1);
    assert_eq!(store.purge(Pillar::Archive, &[archived]).await.unwrap(), 1);
    assert_eq!(store.purge(Pillar::Dlq, &[dead]).await.unwrap(), 1);
    for id in [pending, archived, dead] {
        assert_eq!(state(&*store, id).await, None, "purged for good");
    }
    assert_eq!(counts(&summary(&*store).await), [0, 0, 0, 1, 0, 0]);
    let q = store.queue_stats().await.unwrap();
    let q = q.iter().find(|q| q.queue == "q").unwrap();
    assert_eq!((q.succeeded, q.failed), (0, 0));
    assert!(every_error_group_is_empty(&*store).await);
    assert_counters_match_rows(&*store).await;
}

pub async fn bulk_by_ids_applies_each_action(f: StoreFactory) {
    let store = f.store();
    let mut dead = Vec::new();
    for _ in 0..3 {
        dead.push(dead_job(&*store, req("q", "t"), FailureReason::Failed, "x").await);
    }
    assert_eq!(
        store
            .bulk_by_ids(BulkAction::Resurrect, Pillar::Dlq, &dead[..2])
            .await
            .unwrap(),
        2
    );
    assert_eq!(state(&*store, dead[0]).await, Some(JobState::Pending));
    assert_eq!(state(&*store, dead[1]).await, Some(JobState::Pending));
    assert_eq!(
        state(&*store, dead[2]).await,
        Some(JobState::Dead(FailureReason::Failed))
    );

    // Cancel: hot only; pending and fetched go to the DLQ at once.
    let claimed = claim(&*store, "w1", 1).await;
    let targets = [dead[0], dead[1]];
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        store
            .bulk_by_ids(BulkAction::Cancel, Pillar::Hot, &targets)
            .await
            .unwrap(),
        2
    );
    for id in targets {
        assert_eq!(
            state(&*store, id).await,
            Some(JobState::Dead(FailureReason::Cancelled))
        );
    }
    assert_eq!(summary(&*store).await.dlq, 3);

    // A running job is asked to stop, as with a single cancel.
    let running = processing_job(&*store, req("run", "t"), "w1").await;
    store
        .bulk_by_ids(BulkAction::Cancel, Pillar::Hot, &[running])
        .await
        .unwrap();
    let j = job(&*store, running).await;
    assert_eq!((j.state, j.cancel_requested), (JobState::Processing, true));
    assert_eq!(
        store
            .heartbeat("w1", &[running])
            .await
            .unwrap()
            .cancel_requested,
        vec![running]
    );
    assert!(complete_one(&*store, "w1", succeeded(running, None)).await);

    let archived = archived_job(&*store, req("q", "t")).await;
    assert_eq!(
        store
            .bulk_by_ids(BulkAction::Purge, Pillar::Dlq, &dead)
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        store
            .bulk_by_ids(BulkAction::Purge, Pillar::Archive, &[archived, running])
            .await
            .unwrap(),
        2
    );
    assert_eq!(counts(&summary(&*store).await), [0; 6]);
    assert_counters_match_rows(&*store).await;
}

pub async fn bulk_preview_counts_and_samples(f: StoreFactory) {
    let store = f.store();
    let mut matching = Vec::new();
    for i in 0..7 {
        let id = enqueue(&*store, req("target", "t")).await;
        assert_eq!(
            store.cancel(id).await.unwrap(),
            CancelOutcome::Cancelled,
            "job {i}"
        );
        matching.push(id);
    }
    for _ in 0..3 {
        let id = enqueue(&*store, req("elsewhere", "t")).await;
        store.cancel(id).await.unwrap();
    }
    let preview = store
        .bulk_preview(Pillar::Dlq, &filter_queue("target"), 3)
        .await
        .unwrap();
    assert_eq!(preview.matching, 7);
    let sample: Vec<JobId> = preview.sample.iter().map(|s| s.id).collect();
    let mut newest: Vec<JobId> = matching.clone();
    newest.sort();
    newest.reverse();
    newest.truncate(3);
    assert_eq!(sample, newest, "the newest three, newest first");
    assert!(preview.sample.iter().all(|s| s.queue == "target"));
    let all = store
        .bulk_preview(Pillar::Dlq, &JobFilter::default(), 0)
        .await
        .unwrap();
    assert_eq!((all.matching, all.sample.len()), (10, 0));
    let none = store
        .bulk_preview(Pillar::Archive, &JobFilter::default(), 5)
        .await
        .unwrap();
    assert_eq!((none.matching, none.sample.len()), (0, 0));
    // A preview is a read: nothing moved.
    assert_eq!(summary(&*store).await.dlq, 10);
    assert_counters_match_rows(&*store).await;
}

pub async fn bulk_by_filter_respects_filter_and_cap(f: StoreFactory) {
    let store = f.store();
    // Enough rows to need several bounded transactions.
    enqueue_n(&*store, "big", "t", 700).await;
    enqueue_n(&*store, "small", "t", 5).await;
    // A page never exceeds the cap, whatever the caller asks for.
    let mut big = crate::query::JobQuery::new(Pillar::Hot);
    big.page_size = 10_000;
    let page = store.list_jobs(&big).await.unwrap();
    assert_eq!(page.items.len(), crate::query::MAX_PAGE_SIZE as usize);
    assert!(page.next.is_some());
    // An operator's bulk action on every job of `queue` in `pillar`, at most `cap` of them.
    let bulk_on_queue = |action, pillar, queue: &'static str, cap| {
        let store = store.clone();
        async move {
            let filter = filter_queue(queue);
            let report = door(&store)
                .bulk_by_filter("op", action, pillar, &filter, cap, |_| {})
                .await
                .unwrap();
            report.done
        }
    };
    let cancelled = bulk_on_queue(BulkAction::Cancel, Pillar::Hot, "big", 10_000).await;
    assert_eq!(cancelled, 700);
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.dlq), (5, 700));

    let resurrected = bulk_on_queue(BulkAction::Resurrect, Pillar::Dlq, "big", 650).await;
    assert_eq!(resurrected, 650, "the cap holds");
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.dlq), (655, 50));
    assert_eq!(
        ids_in(&*store, Pillar::Dlq, filter_queue("big"))
            .await
            .len(),
        50
    );

    let purged = bulk_on_queue(BulkAction::Purge, Pillar::Hot, "small", 2).await;
    assert_eq!(purged, 2);
    assert_eq!(
        ids_in(&*store, Pillar::Hot, filter_queue("small"))
            .await
            .len(),
        3
    );
    let none = bulk_on_queue(BulkAction::Purge, Pillar::Dlq, "nothing", 100).await;
    assert_eq!(none, 0);
    assert_eq!(summary(&*store).await.dlq, 50);
    assert_counters_match_rows(&*store).await;
}

fn with_continuation(trigger: ContinuationTrigger) -> EnqueueRequest {
    EnqueueRequest {
        continuation: Some(Continuation {
            queue: "follow".into(),
            job_type: format!("after_{trigger:?}"),
            trigger,
        }),
        ..req("parent", "t")
    }
}

async fn continuations_of(
    store: &dyn crate::store::Store,
    parent: JobId,
) -> Vec<serde_json::Value> {
    let mut found = Vec::new();
    for row in list_all(store, Pillar::Hot, filter_queue("follow")).await {
        let j = job(store, row.id).await;
        let payload: serde_json::Value = serde_json::from_str(&j.payload).unwrap();
        if payload["parent_id"] == serde_json::Value::String(parent.to_string()) {
            assert_eq!(j.state, JobState::Pending);
            found.push(payload);
        }
    }
    found
}

pub async fn continuations_follow_their_trigger(f: StoreFactory) {
    use ContinuationTrigger::*;
    let store = f.store();
    let mut cases = Vec::new();
    for trigger in [OnSuccess, OnFailure, Always] {
        for success in [true, false] {
            let id = processing_job(&*store, with_continuation(trigger), "w1").await;
            let c = if success {
                succeeded(id, Some(r#"{"total":12}"#))
            } else {
                dead(id, FailureReason::Fatal, "card declined")
            };
            assert!(complete_one(&*store, "w1", c).await);
            cases.push((trigger, success, id));
        }
    }
    // The follow-ups run like any job: their queue is claimable.
    let follow_ups = claim_jobs(&*store, "w2", 100, Some(vec!["follow".into()])).await;
    assert_eq!(follow_ups.len(), 4, "OnSuccess + OnFailure + Always twice");
    assert_eq!(
        store
            .release(
                "w2",
                &follow_ups.iter().map(|j| j.id).collect::<Vec<_>>(),
                None
            )
            .await
            .unwrap(),
        4
    );
    for (trigger, success, id) in cases {
        let found = continuations_of(&*store, id).await;
        if !trigger.fires_for(success) {
            assert!(
                found.is_empty(),
                "{trigger:?} does not fire on success={success}"
            );
            continue;
        }
        assert_eq!(
            found.len(),
            1,
            "{trigger:?} fires once on success={success}"
        );
        let p = &found[0];
        let outcome = p["outcome"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if success {
            assert!(outcome.contains("succeeded"), "outcome of a success: {p}");
            let result = &p["result"];
            let total = result
                .get("total")
                .cloned()
                .or_else(|| {
                    result
                        .as_str()
                        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                        .and_then(|v| v.get("total").cloned())
                })
                .unwrap_or_default();
            assert_eq!(
                total,
                serde_json::json!(12),
                "the parent's result is passed on: {p}"
            );
        } else {
            assert!(!outcome.contains("succeeded"), "outcome of a failure: {p}");
            assert_eq!(p["reason"], "Fatal", "{p}");
            assert!(p["error"].to_string().contains("card declined"), "{p}");
        }
    }
    // An operator cancel is a final transition too.
    let id = enqueue(&*store, with_continuation(OnFailure)).await;
    assert_eq!(store.cancel(id).await.unwrap(), CancelOutcome::Cancelled);
    let found = continuations_of(&*store, id).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["reason"], "Cancelled");

    // So is the rescue sweep's: a zombie's follow-up learns why.
    let id = processing_job(&*store, with_continuation(OnFailure), "w1").await;
    let_clock_advance().await;
    assert_eq!(rescue(&*store, &zero_timeouts()).await.unwrap().zombies, 1);
    let found = continuations_of(&*store, id).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["reason"], "Zombie");
    assert_counters_match_rows(&*store).await;
}

pub async fn finished_jobs_returns_only_finished_ones(f: StoreFactory) {
    let store = f.store();
    let archived = archived_job(&*store, req("q", "t")).await;
    let dead = dead_job(&*store, req("q", "t"), FailureReason::Fatal, "x").await;
    let running = processing_job(&*store, req("q", "t"), "w1").await;
    let pending = enqueue(&*store, req("q", "t")).await;
    let got = store
        .finished_jobs(&[pending, archived, dead, running, JobId::new()])
        .await
        .unwrap();
    let mut ids: Vec<JobId> = got.iter().map(|j| j.id).collect();
    ids.sort();
    assert_eq!(ids, sorted(vec![archived, dead]));
    let a = got.iter().find(|j| j.id == archived).unwrap();
    assert_eq!(a.result.as_deref(), Some(r#"{"ok":true}"#));
    assert!(store.finished_jobs(&[]).await.unwrap().is_empty());
    assert_counters_match_rows(&*store).await;
}

pub async fn bulk_resurrect_of_jobs_sharing_a_key_keeps_one_key(f: StoreFactory) {
    let store = f.store();
    let keyed = || EnqueueRequest {
        idempotency_key: Some("nightly-export".into()),
        ..req("q", "t")
    };
    // Two generations of the same keyed job, both dead.
    let mut dead = Vec::new();
    for _ in 0..2 {
        let out = store.enqueue(keyed()).await.unwrap();
        assert!(out.created);
        assert_eq!(
            store.cancel(out.id).await.unwrap(),
            CancelOutcome::Cancelled
        );
        dead.push(out.id);
    }
    assert_eq!(
        store
            .bulk_by_ids(BulkAction::Resurrect, Pillar::Dlq, &dead)
            .await
            .unwrap(),
        2,
        "both come back; only one may keep the key"
    );
    let mut keys = Vec::new();
    for id in &dead {
        let j = job(&*store, *id).await;
        assert_eq!(j.state, JobState::Pending);
        keys.push(j.idempotency_key);
    }
    keys.sort();
    assert_eq!(keys, vec![None, Some("nightly-export".to_string())]);
    let dup = store.enqueue(keyed()).await.unwrap();
    assert!(!dup.created && dead.contains(&dup.id));

    // The same through the filter path.
    for id in &dead {
        store.cancel(*id).await.unwrap();
    }
    let third = store.enqueue(keyed()).await.unwrap();
    assert!(third.created);
    assert_eq!(
        door(&store)
            .bulk_by_filter(
                "op",
                BulkAction::Resurrect,
                Pillar::Dlq,
                &filter_queue("q"),
                100,
                |_| {}
            )
            .await
            .unwrap()
            .done,
        2
    );
    for id in &dead {
        assert_eq!(
            job(&*store, *id).await.idempotency_key,
            None,
            "{id}: the active job keeps it"
        );
    }
    assert_eq!(
        job(&*store, third.id).await.idempotency_key.as_deref(),
        Some("nightly-export")
    );

    // Purging the holder frees the key.
    assert_eq!(store.purge(Pillar::Hot, &[third.id]).await.unwrap(), 1);
    assert!(store.enqueue(keyed()).await.unwrap().created);
    assert_counters_match_rows(&*store).await;
}

pub async fn claim_can_start_the_best_jobs_at_once(f: StoreFactory) {
    let store = f.store();
    let low = enqueue(&*store, req("mail", "send")).await;
    let high = enqueue(
        &*store,
        EnqueueRequest {
            priority: 5,
            ..req("mail", "send")
        },
    )
    .await;
    let claimed = claim_starting(&*store, "w1", 5, 1).await;
    let got: Vec<(JobId, JobState, u32)> =
        claimed.iter().map(|j| (j.id, j.state, j.attempt)).collect();
    assert_eq!(
        got,
        vec![(high, JobState::Processing, 1), (low, JobState::Fetched, 0)],
        "the best job starts, the other is fetched"
    );
    let running = job(&*store, high).await;
    assert_eq!(running.state, JobState::Processing);
    assert_eq!(running.worker_id.as_deref(), Some("w1"));
    assert_eq!(running.attempt, 1, "starting counts the attempt");
    assert!(running.started_at.is_some() && running.heartbeat_at.is_some());
    assert_eq!(
        store.mark_processing("w1", &[high]).await.unwrap(),
        Vec::<JobId>::new(),
        "a started job cannot be started again"
    );
    assert_eq!(
        store.heartbeat("w1", &[high]).await.unwrap().alive,
        vec![high]
    );
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.fetched, s.processing), (0, 1, 1));

    let applied = store
        .complete(
            "w1",
            vec![Completion::Succeeded {
                id: high,
                result: None,
                duration_ms: 1,
            }],
        )
        .await
        .unwrap();
    assert_eq!(applied, vec![Applied::Applied]);
    assert_eq!(job(&*store, high).await.attempt, 1);
    assert_eq!(
        store.mark_processing("w1", &[low]).await.unwrap(),
        vec![low]
    );
    assert_counters_match_rows(&*store).await;
}

/// A claim larger than any the tests above make: every job once, in claim order, the first
/// `start` running and the rest fetched (the SQLite store reads big claims back on a reader).
pub async fn a_large_claim_returns_every_job_once_in_claim_order(f: StoreFactory) {
    let store = f.store();
    let requests: Vec<EnqueueRequest> = (0..150)
        .map(|i| EnqueueRequest {
            priority: i % 3,
            ..req("bulk", "step")
        })
        .collect();
    let outcomes = store.enqueue_batch(requests).await.unwrap();
    assert_eq!(outcomes.len(), 150);
    let claimed = claim_starting(&*store, "w1", 140, 90).await;
    assert_eq!(claimed.len(), 140);
    let distinct: std::collections::HashSet<JobId> = claimed.iter().map(|j| j.id).collect();
    assert_eq!(distinct.len(), 140, "no job twice");
    assert!(
        claimed
            .windows(2)
            .all(|w| crate::model::claim_order(&w[0], &w[1]) != std::cmp::Ordering::Greater),
        "claim order"
    );
    assert!(
        claimed[..50].iter().all(|j| j.priority == 2),
        "the 50 best first"
    );
    let states: Vec<(JobState, u32)> = claimed.iter().map(|j| (j.state, j.attempt)).collect();
    assert!(states[..90].iter().all(|s| *s == (JobState::Processing, 1)));
    assert!(states[90..].iter().all(|s| *s == (JobState::Fetched, 0)));
    assert!(claimed.iter().all(|j| j.worker_id.as_deref() == Some("w1")));
    assert!(
        claimed
            .iter()
            .all(|j| j.payload == req("bulk", "step").payload)
    );
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.fetched, s.processing), (10, 50, 90));
    assert_counters_match_rows(&*store).await;
}

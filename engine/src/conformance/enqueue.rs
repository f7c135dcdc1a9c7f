//! Enqueue: the envelope round trip, validation before writing, batches, idempotency keys.

use super::support::*;
use crate::model::{
    Continuation, ContinuationTrigger, EnqueueOutcome, EnqueueRequest, FailureReason, JobState,
    Pillar,
};
use crate::query::JobFilter;
use crate::validation::{MAX_NAME_CHARS, MAX_PAYLOAD_BYTES};

pub async fn enqueue_round_trips_every_field(f: StoreFactory) {
    let store = f.store();
    let scheduled = now_ms() + secs(3600);
    let expires = now_ms() + secs(7200);
    let continuation = Continuation {
        queue: "follow-up".into(),
        job_type: "after_invoice".into(),
        trigger: ContinuationTrigger::Always,
    };
    let r = EnqueueRequest {
        queue: "billing".into(),
        job_type: "send_invoice".into(),
        payload: r#"{"order":42,"items":["a","b"],"note":"héllo"}"#.into(),
        tags: vec!["vip".into(), "eu-west".into()],
        priority: 7,
        scheduled_at: Some(scheduled),
        delay_ms: None,
        idempotency_key: Some("invoice-42".into()),
        unique_for_ms: Some(86_400_000),
        unique_states: vec![crate::model::UniqueState::Succeeded],
        correlation_id: Some("corr-1".into()),
        created_by: Some("alice".into()),
        expires_at: Some(expires),
        max_attempts: Some(5),
        continuation: Some(continuation.clone()),
        trace_context: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
    };
    let before = now_ms();
    let out = store.enqueue(r.clone()).await.unwrap();
    assert!(out.created);
    let j = job(&*store, out.id).await;
    assert_eq!(j.id, out.id);
    assert_eq!(j.queue, "billing");
    assert_eq!(j.job_type, "send_invoice");
    assert_eq!(j.payload, r.payload);
    assert_eq!(j.tags, r.tags);
    assert_eq!(j.priority, 7);
    assert_eq!(j.idempotency_key.as_deref(), Some("invoice-42"));
    assert_eq!(j.correlation_id.as_deref(), Some("corr-1"));
    assert_eq!(j.created_by.as_deref(), Some("alice"));
    assert_eq!(trunc_ms(j.scheduled_at), scheduled);
    assert_eq!(j.expires_at.map(trunc_ms), Some(expires));
    assert_eq!(j.max_attempts, Some(5));
    assert_eq!(j.continuation, Some(continuation));
    assert_eq!(j.trace_context, r.trace_context);
    assert_eq!(j.batch_id, None);
    assert_eq!(j.state, JobState::Pending);
    assert_eq!(j.attempt, 0);
    assert_eq!(j.worker_id, None);
    assert!(!j.cancel_requested);
    assert!(j.errors.is_empty());
    assert_eq!(j.result, None);
    assert_eq!(j.original_payload, None);
    assert_eq!(j.started_at, None);
    assert_eq!(j.heartbeat_at, None);
    assert_eq!(j.finished_at, None);
    // The database clock stamps created_at; on one host it agrees with ours closely.
    assert!(
        (j.created_at - before).num_seconds().abs() < 60,
        "created_at {} is near {before}",
        j.created_at
    );

    // Defaults: no schedule means due now, nothing optional set.
    let id = enqueue(&*store, req("billing", "plain")).await;
    let plain = job(&*store, id).await;
    assert_eq!(plain.tags, Vec::<String>::new());
    assert_eq!(plain.priority, 0);
    assert_eq!(plain.idempotency_key, None);
    assert_eq!(plain.expires_at, None);
    assert_eq!(plain.max_attempts, None);
    assert_eq!(plain.continuation, None);
    assert!(plain.scheduled_at <= plain.created_at + secs(1));

    // delay_ms is relative to the enqueue.
    let delayed = enqueue(&*store, delayed_by(3_600_000, "billing", "delayed")).await;
    let delayed = job(&*store, delayed).await;
    let delay = delayed.scheduled_at - delayed.created_at;
    assert!(
        delay >= secs(3599) && delay <= secs(3601),
        "a one-hour delay schedules one hour after creation, got {delay}"
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn empty_payload_is_stored_as_null(f: StoreFactory) {
    let store = f.store();
    let id = enqueue(&*store, EnqueueRequest::new("q", "t", "")).await;
    assert_eq!(job(&*store, id).await.payload, "null");
    assert_counters_match_rows(&*store).await;
}

pub async fn invalid_requests_write_nothing(f: StoreFactory) {
    let store = f.store();
    let too_big = format!("\"{}\"", "x".repeat(MAX_PAYLOAD_BYTES));
    let bad = vec![
        (
            "oversized payload",
            EnqueueRequest::new("bad", "t", too_big),
        ),
        ("invalid JSON", EnqueueRequest::new("bad", "t", "{oops")),
        ("empty queue", EnqueueRequest::new("", "t", "{}")),
        (
            "long type",
            EnqueueRequest::new("bad", "x".repeat(MAX_NAME_CHARS + 1), "{}"),
        ),
        ("control char", EnqueueRequest::new("bad\n", "t", "{}")),
        (
            "tags too long",
            EnqueueRequest {
                tags: (0..200).map(|i| format!("tag-{i:05}")).collect(),
                ..req("bad", "t")
            },
        ),
        (
            "tag with comma",
            EnqueueRequest {
                tags: vec!["a,b".into()],
                ..req("bad", "t")
            },
        ),
        (
            "long key",
            EnqueueRequest {
                idempotency_key: Some("k".repeat(MAX_NAME_CHARS + 1)),
                ..req("bad", "t")
            },
        ),
        (
            "delay and schedule",
            EnqueueRequest {
                delay_ms: Some(5),
                scheduled_at: Some(now_ms()),
                ..req("bad", "t")
            },
        ),
        (
            "zero attempts",
            EnqueueRequest {
                max_attempts: Some(0),
                ..req("bad", "t")
            },
        ),
    ];
    for (what, r) in bad {
        assert!(
            is_invalid(door(&store).enqueue(r.clone()).await),
            "{what}: rejected as invalid"
        );
        assert!(
            is_invalid(door(&store).enqueue_batch(vec![r]).await),
            "{what}: rejected as invalid in a batch"
        );
    }
    assert_eq!(counts(&summary(&*store).await), [0; 6]);
    assert!(
        ids_in(&*store, Pillar::Hot, JobFilter::default())
            .await
            .is_empty()
    );
    let queues = store.list_queues().await.unwrap();
    assert!(
        queues.iter().all(|q| q.name != "bad"),
        "a rejected request creates no queue row: {queues:?}"
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn enqueue_batch_keeps_request_order(f: StoreFactory) {
    let store = f.store();
    let reqs: Vec<EnqueueRequest> = (0..20)
        .map(|i| EnqueueRequest {
            priority: 20 - i,
            ..EnqueueRequest::new(format!("q{}", i % 3), "batched", format!(r#"{{"i":{i}}}"#))
        })
        .collect();
    let outs = store.enqueue_batch(reqs.clone()).await.unwrap();
    assert_eq!(outs.len(), 20);
    for (r, out) in reqs.iter().zip(&outs) {
        assert!(out.created);
        let j = job(&*store, out.id).await;
        assert_eq!(
            (&j.queue, &j.payload, j.priority),
            (&r.queue, &r.payload, r.priority)
        );
    }
    let mut ids: Vec<_> = outs.iter().map(|o| o.id).collect();
    ids.dedup();
    assert_eq!(ids.len(), 20, "every job has its own id");
    assert_eq!(summary(&*store).await.pending, 20);
    assert!(store.enqueue_batch(vec![]).await.unwrap().is_empty());
    assert_counters_match_rows(&*store).await;
}

pub async fn enqueue_batch_is_all_or_nothing_on_a_bad_item(f: StoreFactory) {
    let store = f.store();
    let mut reqs: Vec<EnqueueRequest> = (0..5).map(|_| req("q", "t")).collect();
    reqs.push(EnqueueRequest::new("q", "t", "not json"));
    reqs.push(req("q", "t"));
    assert!(is_invalid(door(&store).enqueue_batch(reqs).await));
    assert_eq!(counts(&summary(&*store).await), [0; 6]);
    assert!(
        ids_in(&*store, Pillar::Hot, JobFilter::default())
            .await
            .is_empty()
    );
    assert_counters_match_rows(&*store).await;
}

fn keyed(key: &str, payload: &str) -> EnqueueRequest {
    EnqueueRequest {
        idempotency_key: Some(key.into()),
        ..EnqueueRequest::new("q", "t", payload)
    }
}

pub async fn duplicate_idempotency_key_returns_the_active_job(f: StoreFactory) {
    let store = f.store();
    let first = store.enqueue(keyed("k1", r#"{"v":1}"#)).await.unwrap();
    assert!(first.created);
    let again = store.enqueue(keyed("k1", r#"{"v":2}"#)).await.unwrap();
    assert_eq!(
        again,
        EnqueueOutcome {
            id: first.id,
            created: false
        }
    );
    assert_eq!(job(&*store, first.id).await.payload, r#"{"v":1}"#);
    // Still a duplicate while the job is fetched or processing.
    let started = start(&*store, "w1", 1).await;
    assert_eq!(started, vec![first.id]);
    let during = store.enqueue(keyed("k1", "{}")).await.unwrap();
    assert_eq!(
        during,
        EnqueueOutcome {
            id: first.id,
            created: false
        }
    );
    // A batch item holding an active key also gets the existing id.
    let outs = store
        .enqueue_batch(vec![keyed("k1", "{}"), keyed("k2", "{}")])
        .await
        .unwrap();
    assert_eq!(
        outs[0],
        EnqueueOutcome {
            id: first.id,
            created: false
        }
    );
    assert!(outs[1].created);
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.processing), (1, 1), "two jobs in all");
    assert_counters_match_rows(&*store).await;
}

pub async fn duplicate_idempotency_key_inside_one_batch(f: StoreFactory) {
    let store = f.store();
    let outs = store
        .enqueue_batch(vec![
            keyed("a", r#"{"n":1}"#),
            keyed("a", r#"{"n":2}"#),
            keyed("b", r#"{"n":3}"#),
            req("q", "t"),
            keyed("b", r#"{"n":4}"#),
        ])
        .await
        .unwrap();
    // A later request with a key already in the batch gets the earlier one's job.
    let existing = |id| EnqueueOutcome { id, created: false };
    assert!(outs[0].created);
    assert_eq!(outs[1], existing(outs[0].id));
    assert!(outs[2].created);
    assert!(outs[3].created);
    assert_eq!(outs[4], existing(outs[2].id));
    assert_eq!(job(&*store, outs[0].id).await.payload, r#"{"n":1}"#);
    assert_eq!(summary(&*store).await.pending, 3);
    assert_counters_match_rows(&*store).await;
}

pub async fn idempotency_key_is_free_again_once_the_job_finished(f: StoreFactory) {
    let store = f.store();
    let first = store.enqueue(keyed("once", "{}")).await.unwrap();
    start(&*store, "w1", 1).await;
    assert!(complete_one(&*store, "w1", succeeded(first.id, None)).await);
    let second = store.enqueue(keyed("once", "{}")).await.unwrap();
    assert!(second.created, "the archived job no longer holds the key");
    assert_ne!(second.id, first.id);

    // Same after the DLQ.
    assert_eq!(
        store.cancel(second.id).await.unwrap(),
        crate::model::CancelOutcome::Cancelled
    );
    assert_eq!(
        state(&*store, second.id).await,
        Some(JobState::Dead(FailureReason::Cancelled))
    );
    let third = store.enqueue(keyed("once", "{}")).await.unwrap();
    assert!(third.created);
    assert!(third.id != first.id && third.id != second.id);
    assert_eq!(job(&*store, first.id).await.state, JobState::Succeeded);
    assert_counters_match_rows(&*store).await;
}

pub async fn enqueue_creates_the_queue_settings_row(f: StoreFactory) {
    let store = f.store();
    enqueue(&*store, req("fresh-queue", "t")).await;
    let queues = store.list_queues().await.unwrap();
    let q = queues
        .iter()
        .find(|q| q.name == "fresh-queue")
        .expect("enqueue creates the queue row");
    assert!(!q.paused && !q.hidden);
    assert_eq!(q.max_workers, None);
    assert_counters_match_rows(&*store).await;
}

pub async fn envelope_limits_are_inclusive(f: StoreFactory) {
    let store = f.store();
    let payload = format!("\"{}\"", "x".repeat(MAX_PAYLOAD_BYTES - 2));
    let name = "é".repeat(MAX_NAME_CHARS);
    // 100 tags of 9 characters and 99 commas: exactly 999; one more character makes 1000.
    let mut tags: Vec<String> = (0..100).map(|i| format!("tag-{i:05}")).collect();
    tags[0].push('x');
    let r = EnqueueRequest {
        tags: tags.clone(),
        idempotency_key: Some(name.clone()),
        ..EnqueueRequest::new(name.clone(), name.clone(), payload.clone())
    };
    let id = enqueue(&*store, r).await;
    let j = job(&*store, id).await;
    assert_eq!(j.payload.len(), MAX_PAYLOAD_BYTES);
    assert_eq!(j.payload, payload);
    assert_eq!((&j.queue, &j.job_type), (&name, &name));
    assert_eq!(j.idempotency_key.as_ref(), Some(&name));
    assert_eq!(j.tags, tags);
    let row = &list_all(&*store, Pillar::Hot, JobFilter::default()).await[0];
    assert_eq!(row.tags, tags);
    assert_counters_match_rows(&*store).await;
}

pub async fn the_largest_batch_goes_through_every_path(f: StoreFactory) {
    use crate::query::BulkAction;
    use crate::validation::MAX_BATCH;

    let store = f.store();
    let too_many: Vec<EnqueueRequest> = (0..=MAX_BATCH).map(|_| req("q", "t")).collect();
    assert!(is_invalid(door(&store).enqueue_batch(too_many).await));
    let reqs: Vec<EnqueueRequest> = (0..MAX_BATCH)
        .map(|i| EnqueueRequest {
            idempotency_key: Some(format!("key-{i}")),
            ..req("q", "t")
        })
        .collect();
    let outs = store.enqueue_batch(reqs).await.unwrap();
    assert_eq!(outs.len(), MAX_BATCH);
    assert!(outs.iter().all(|o| o.created));
    let ids: Vec<_> = outs.iter().map(|o| o.id).collect();
    assert_eq!(summary(&*store).await.pending, MAX_BATCH as u64);

    // Large id lists through the worker and operator paths (parameter limits, chunking).
    let claimed = claim(&*store, "w1", 5_000).await;
    assert_eq!(claimed.len(), 5_000);
    assert_eq!(
        store.mark_processing("w1", &claimed).await.unwrap().len(),
        5_000
    );
    assert_eq!(
        store.heartbeat("w1", &claimed).await.unwrap().alive.len(),
        5_000
    );
    let applied = store.complete("w1", all_succeeded(&claimed)).await.unwrap();
    assert!(applied.iter().all(|a| a.is_applied()));
    assert_eq!(store.finished_jobs(&ids).await.unwrap().len(), 5_000);
    assert_eq!(
        store
            .bulk_by_ids(BulkAction::Cancel, Pillar::Hot, &ids)
            .await
            .unwrap(),
        5_000
    );
    assert_eq!(
        store
            .bulk_by_ids(BulkAction::Resurrect, Pillar::Dlq, &ids)
            .await
            .unwrap(),
        5_000
    );
    assert_eq!(store.purge(Pillar::Hot, &ids).await.unwrap(), 5_000);
    assert_eq!(store.purge(Pillar::Archive, &ids).await.unwrap(), 5_000);
    assert_eq!(counts(&summary(&*store).await), [0; 6]);
    assert_counters_match_rows(&*store).await;
}

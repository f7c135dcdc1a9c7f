//! Batches: written whole, counted by each member's final move, callbacks enqueued exactly
//! once in that move's transaction — also when members finish together on two handles —
//! and the trace context every job carries through the pillars.

use std::sync::Arc;

use super::support::*;
use crate::batch::{Batch, BatchCallback, BatchCallbacks, BatchCreated, BatchId, BatchRequest};
use crate::model::{
    Completion, EnqueueRequest, FailureReason, JobId, JobState, Pillar, PruneStep, PruneTarget,
};
use crate::store::Store;

const CALLBACKS: &str = "batch-callbacks";

fn all_callbacks() -> BatchCallbacks {
    BatchCallbacks {
        on_success: Some(BatchCallback::new(CALLBACKS, "batch.succeeded")),
        on_complete: Some(
            BatchCallback::new(CALLBACKS, "batch.completed").with_payload(r#"{"report":42}"#),
        ),
        on_death: Some(BatchCallback::new(CALLBACKS, "batch.member_died")),
    }
}

fn request(queue: &str, members: usize, callbacks: BatchCallbacks) -> BatchRequest {
    BatchRequest {
        description: Some("monthly report".into()),
        created_by: Some("conformance".into()),
        jobs: (0..members)
            .map(|i| EnqueueRequest::new(queue, "report.part", format!(r#"{{"part":{i}}}"#)))
            .collect(),
        callbacks,
    }
}

async fn create(store: &Arc<dyn Store>, req: BatchRequest) -> BatchCreated {
    door(store).create_batch(req).await.expect("create batch")
}

async fn batch(store: &dyn Store, id: BatchId) -> Batch {
    store
        .get_batch(id)
        .await
        .expect("get batch")
        .unwrap_or_else(|| panic!("batch {id} exists"))
}

/// The callback jobs enqueued so far, by type.
async fn callback_types(store: &dyn Store) -> Vec<String> {
    let mut types: Vec<String> = list_all(store, Pillar::Hot, filter_queue(CALLBACKS))
        .await
        .into_iter()
        .map(|j| j.job_type)
        .collect();
    types.sort();
    types
}

/// Claim and start every pending job of `queue` as `worker`.
async fn start_queue(store: &dyn Store, queue: &str, worker: &str, n: u32) -> Vec<JobId> {
    let ids: Vec<JobId> = claim_jobs(store, worker, n, Some(vec![queue.into()]))
        .await
        .into_iter()
        .map(|j| j.id)
        .collect();
    let started = store.mark_processing(worker, &ids).await.expect("mark");
    assert_eq!(started.len(), ids.len(), "every claimed member starts");
    ids
}

pub async fn a_batch_is_written_whole_with_its_members(f: StoreFactory) {
    let store = f.store();
    let created = create(&store, request("batch-a", 3, all_callbacks())).await;
    assert_eq!(created.job_ids.len(), 3);
    let b = batch(&*store, created.batch.id).await;
    assert_eq!(b, created.batch, "the answer is the stored row");
    assert_eq!((b.total, b.succeeded, b.dead, b.pending()), (3, 0, 0, 3));
    assert_eq!(b.description.as_deref(), Some("monthly report"));
    assert_eq!(b.callbacks, all_callbacks(), "callbacks round-trip");
    assert!(b.finished_at.is_none());
    for id in &created.job_ids {
        let member = job(&*store, *id).await;
        assert_eq!(member.batch_id, Some(b.id), "each member names its batch");
        assert_eq!(member.state, JobState::Pending);
    }
    let mut listed: Vec<JobId> = store
        .batch_members(b.id, 100)
        .await
        .expect("members")
        .into_iter()
        .map(|j| j.id)
        .collect();
    listed.sort();
    assert_eq!(listed, sorted(created.job_ids.clone()));
    assert_eq!(
        store.batch_members(b.id, 2).await.expect("members").len(),
        2
    );
    let newest = store.list_batches(None, 10).await.expect("list");
    assert_eq!(newest.first().map(|b| b.id), Some(b.id));

    // Bad input at the door writes no batch and no member.
    let before = counts(&summary(&*store).await);
    let mut bad = request("batch-a", 2, BatchCallbacks::default());
    bad.jobs[1].queue = String::new();
    assert!(is_invalid(door(&store).create_batch(bad).await));
    assert_eq!(counts(&summary(&*store).await), before);
    assert_eq!(store.list_batches(None, 10).await.expect("list").len(), 1);
    assert_counters_match_rows(&*store).await;
}

pub async fn the_last_success_fires_on_success_and_on_complete_once(f: StoreFactory) {
    let store = f.store();
    let created = create(&store, request("batch-s", 3, all_callbacks())).await;
    let ids = start_queue(&*store, "batch-s", "w", 3).await;
    assert!(complete_one(&*store, "w", succeeded(ids[0], None)).await);
    assert!(complete_one(&*store, "w", succeeded(ids[1], None)).await);
    let b = batch(&*store, created.batch.id).await;
    assert_eq!((b.succeeded, b.dead, b.pending()), (2, 0, 1));
    assert!(callback_types(&*store).await.is_empty(), "nothing due yet");

    assert!(complete_one(&*store, "w", succeeded(ids[2], None)).await);
    assert_eq!(
        callback_types(&*store).await,
        ["batch.completed", "batch.succeeded"]
    );
    let b = batch(&*store, created.batch.id).await;
    assert_eq!((b.succeeded, b.dead, b.pending()), (3, 0, 0));
    assert!(b.finished_at.is_some());
    assert!(b.death_job_id.is_none());
    let complete = job(&*store, b.complete_job_id.expect("complete fired")).await;
    let payload: serde_json::Value = serde_json::from_str(&complete.payload).expect("json");
    assert_eq!(payload["batch_id"], b.id.to_string());
    assert_eq!(payload["event"], "complete");
    assert_eq!(
        (payload["total"].as_u64(), payload["succeeded"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(
        payload["args"]["report"], 42,
        "the callback's own payload rides along"
    );
    assert!(complete.batch_id.is_none(), "a callback is not a member");
    let success = job(&*store, b.success_job_id.expect("success fired")).await;
    assert_eq!(success.job_type, "batch.succeeded");
    assert_counters_match_rows(&*store).await;
}

/// A callback payload longer than 4,000 characters rides along whole (Babelfish cut values
/// read through OPENJSON WITH at that length).
pub async fn a_long_callback_payload_rides_along_whole(f: StoreFactory) {
    let store = f.store();
    let note = "résumé ".repeat(1_000);
    let callback_payload = serde_json::json!({ "note": note }).to_string();
    let callbacks = BatchCallbacks {
        on_complete: Some(
            BatchCallback::new(CALLBACKS, "batch.completed").with_payload(callback_payload),
        ),
        ..BatchCallbacks::default()
    };
    let created = create(&store, request("batch-long", 1, callbacks)).await;
    let ids = start_queue(&*store, "batch-long", "w", 1).await;
    assert!(complete_one(&*store, "w", succeeded(ids[0], None)).await);
    let b = batch(&*store, created.batch.id).await;
    let complete = job(&*store, b.complete_job_id.expect("complete fired")).await;
    let payload: serde_json::Value = serde_json::from_str(&complete.payload).expect("json");
    assert_eq!(payload["args"]["note"].as_str(), Some(note.as_str()));
    assert_eq!(payload["total"].as_u64(), Some(1));
    assert_counters_match_rows(&*store).await;
}

pub async fn a_death_fires_on_death_once_and_completes_the_batch(f: StoreFactory) {
    let store = f.store();
    let created = create(&store, request("batch-d", 3, all_callbacks())).await;
    let ids = start_queue(&*store, "batch-d", "w", 2).await;
    assert!(
        complete_one(
            &*store,
            "w",
            dead(ids[0], FailureReason::Fatal, "no such account")
        )
        .await
    );
    assert_eq!(callback_types(&*store).await, ["batch.member_died"]);

    // A second death (an operator's cancel of the pending member) fires nothing new.
    let pending = created
        .job_ids
        .iter()
        .copied()
        .find(|id| !ids.contains(id))
        .expect("one member is still pending");
    store.cancel(pending).await.expect("cancel");
    assert_eq!(callback_types(&*store).await, ["batch.member_died"]);
    let b = batch(&*store, created.batch.id).await;
    assert_eq!((b.succeeded, b.dead, b.pending()), (0, 2, 1));

    assert!(complete_one(&*store, "w", succeeded(ids[1], None)).await);
    assert_eq!(
        callback_types(&*store).await,
        ["batch.completed", "batch.member_died"],
        "complete fires, success never does"
    );
    let b = batch(&*store, created.batch.id).await;
    assert!(b.finished_at.is_some() && b.success_job_id.is_none());
    let died = job(&*store, b.death_job_id.expect("death fired")).await;
    let payload: serde_json::Value = serde_json::from_str(&died.payload).expect("json");
    assert_eq!(payload["dead"], 1, "counts as of the death that fired it");
    assert_counters_match_rows(&*store).await;
}

pub async fn resurrecting_a_dead_member_reopens_the_batch(f: StoreFactory) {
    let store = f.store();
    let callbacks = BatchCallbacks {
        on_success: Some(BatchCallback::new(CALLBACKS, "batch.succeeded")),
        on_complete: Some(BatchCallback::new(CALLBACKS, "batch.completed")),
        on_death: None,
    };
    let created = create(&store, request("batch-r", 2, callbacks)).await;
    let ids = start_queue(&*store, "batch-r", "w", 2).await;
    assert!(complete_one(&*store, "w", succeeded(ids[0], None)).await);
    assert!(
        complete_one(
            &*store,
            "w",
            dead(ids[1], FailureReason::Fatal, "bad input")
        )
        .await
    );
    let b = batch(&*store, created.batch.id).await;
    assert!(b.finished_at.is_some());
    assert_eq!(callback_types(&*store).await, ["batch.completed"]);

    store.resurrect(ids[1], None).await.expect("resurrect");
    let b = batch(&*store, created.batch.id).await;
    assert_eq!((b.succeeded, b.dead, b.pending()), (1, 0, 1), "reopened");
    assert!(b.finished_at.is_none());
    assert_eq!(
        job(&*store, ids[1]).await.batch_id,
        Some(b.id),
        "still a member"
    );

    let again = start_queue(&*store, "batch-r", "w2", 1).await;
    assert_eq!(again, vec![ids[1]]);
    assert!(complete_one(&*store, "w2", succeeded(ids[1], None)).await);
    assert_eq!(
        callback_types(&*store).await,
        ["batch.completed", "batch.succeeded"],
        "success fires now; complete fired once and stays fired"
    );
    let b = batch(&*store, created.batch.id).await;
    assert_eq!((b.succeeded, b.dead), (2, 0));
    assert!(b.finished_at.is_some());
    assert_counters_match_rows(&*store).await;
}

pub async fn purging_a_pending_member_takes_it_out_of_the_batch(f: StoreFactory) {
    let store = f.store();
    let created = create(&store, request("batch-p", 2, all_callbacks())).await;
    let ids = start_queue(&*store, "batch-p", "w", 1).await;
    assert!(complete_one(&*store, "w", succeeded(ids[0], None)).await);
    let pending = created
        .job_ids
        .iter()
        .copied()
        .find(|id| *id != ids[0])
        .expect("the other member");
    assert_eq!(
        store.purge(Pillar::Hot, &[pending]).await.expect("purge"),
        1
    );
    let b = batch(&*store, created.batch.id).await;
    assert_eq!((b.total, b.succeeded, b.dead), (1, 1, 0));
    assert!(b.finished_at.is_some());
    assert_eq!(
        callback_types(&*store).await,
        ["batch.completed", "batch.succeeded"]
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn members_finishing_together_on_two_handles_fire_each_callback_once(f: StoreFactory) {
    const MEMBERS: usize = 40;
    let store = f.store();
    let created = create(&store, request("batch-race", MEMBERS, all_callbacks())).await;
    let first = f.connect().await;
    let second = f.connect().await;
    let a = start_queue(&*first, "batch-race", "wa", (MEMBERS / 2) as u32).await;
    let b = start_queue(&*second, "batch-race", "wb", (MEMBERS / 2) as u32).await;
    assert_eq!(a.len() + b.len(), MEMBERS);
    let start_line = Arc::new(tokio::sync::Barrier::new(2));
    let mut tasks = Vec::new();
    for (handle, worker, ids) in [(first, "wa", a), (second, "wb", b)] {
        let start_line = start_line.clone();
        tasks.push(tokio::spawn(async move {
            // Two members per transaction, so the last two moves can meet.
            let completions: Vec<Vec<Completion>> = ids.chunks(2).map(all_succeeded).collect();
            start_line.wait().await;
            for batch in completions {
                loop {
                    match handle.complete(worker, batch.clone()).await {
                        Ok(applied) => {
                            assert!(applied.iter().all(|a| a.is_applied()));
                            break;
                        }
                        Err(e) if e.is_transient() => tokio::task::yield_now().await,
                        Err(e) => panic!("complete failed: {e}"),
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("completer");
    }
    let b = batch(&*store, created.batch.id).await;
    assert_eq!((b.succeeded, b.dead, b.pending()), (MEMBERS as u32, 0, 0));
    assert_eq!(
        callback_types(&*store).await,
        ["batch.completed", "batch.succeeded"],
        "each callback exactly once"
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn trace_context_travels_with_the_job_through_every_pillar(f: StoreFactory) {
    let store = f.store();
    let traced = |queue: &str| EnqueueRequest {
        trace_context: Some(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;vendor=abc".into(),
        ),
        ..req(queue, "traced")
    };
    let expected = traced("x").trace_context;
    let pending = enqueue(&*store, traced("trace-hot")).await;
    assert_eq!(job(&*store, pending).await.trace_context, expected);
    let archived = archived_job(&*store, traced("trace-archive")).await;
    assert_eq!(job(&*store, archived).await.trace_context, expected);
    let dead = dead_job(&*store, traced("trace-dlq"), FailureReason::Fatal, "boom").await;
    assert_eq!(job(&*store, dead).await.trace_context, expected);
    store.resurrect(dead, None).await.expect("resurrect");
    assert_eq!(job(&*store, dead).await.trace_context, expected);
    let plain = enqueue(&*store, req("trace-none", "plain")).await;
    assert_eq!(job(&*store, plain).await.trace_context, None);
    assert_counters_match_rows(&*store).await;
}

pub async fn retention_deletes_finished_batches_and_keeps_open_ones(f: StoreFactory) {
    let store = f.store();
    let finished = create(&store, request("batch-old", 1, BatchCallbacks::default())).await;
    let open = create(&store, request("batch-open", 1, BatchCallbacks::default())).await;
    let ids = start_queue(&*store, "batch-old", "w", 1).await;
    assert!(complete_one(&*store, "w", succeeded(ids[0], None)).await);
    let young = PruneStep {
        target: PruneTarget::Batches,
        older_than: std::time::Duration::from_secs(3600),
        limit: 100,
    };
    assert_eq!(
        store.prune_step(young).await.expect("prune"),
        0,
        "young batches stay"
    );
    let_clock_advance().await;
    let all = PruneStep {
        older_than: std::time::Duration::ZERO,
        ..young
    };
    assert_eq!(store.prune_step(all).await.expect("prune"), 1);
    assert!(
        store
            .get_batch(finished.batch.id)
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store.get_batch(open.batch.id).await.expect("get").is_some(),
        "a batch with pending members is never pruned"
    );
    assert_counters_match_rows(&*store).await;
}

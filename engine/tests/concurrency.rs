//! SQLite-specific races on top of the shared suite (which runs its own concurrency cases on
//! every backend): producers and consumers on separate connections to one file, as separate
//! `deck` processes would be, never lose or double a job. A busy database is a transient
//! fault the caller retries, as the runtime does.

use std::collections::HashSet;
use std::sync::Arc;

use deck_engine::conformance::support::{
    all_succeeded, claim_jobs, claim_request, enqueue, retrying,
};
use deck_engine::{EnqueueRequest, JobId, JobState, Store, StoreOptions, store::SqliteSynchronous};

async fn open(path: &std::path::Path, options: &StoreOptions) -> Arc<dyn Store> {
    deck_engine::store::sqlite::open(path.to_str().unwrap(), options)
        .await
        .expect("open the SQLite store")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn producers_and_consumers_on_separate_connections_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deck.db");
    let first = open(&path, &StoreOptions::default()).await;
    let producers = 4;
    let batches = 10;
    let per_batch = 50;
    let total = producers * batches * per_batch;

    let mut producer_tasks = Vec::new();
    for p in 0..producers {
        let handle = open(&path, &StoreOptions::default()).await;
        producer_tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for b in 0..batches {
                let reqs = (0..per_batch)
                    .map(|i| {
                        EnqueueRequest::new(
                            "shared",
                            "t",
                            format!(r#"{{"p":{p},"b":{b},"i":{i}}}"#),
                        )
                    })
                    .collect::<Vec<_>>();
                let outs = retrying(|| handle.enqueue_batch(reqs.clone())).await;
                ids.extend(outs.into_iter().map(|o| o.id));
            }
            ids
        }));
    }
    let finished_producing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut consumer_tasks = Vec::new();
    for c in 0..4 {
        // Half the consumers use relaxed durability: both settings share one file safely.
        let options = StoreOptions {
            sqlite_synchronous: if c % 2 == 0 {
                SqliteSynchronous::Full
            } else {
                SqliteSynchronous::Normal
            },
            ..StoreOptions::default()
        };
        let handle = open(&path, &options).await;
        let finished_producing = finished_producing.clone();
        consumer_tasks.push(tokio::spawn(async move {
            let worker = format!("consumer-{c}");
            let mut mine: Vec<JobId> = Vec::new();
            loop {
                let producing_over = finished_producing.load(std::sync::atomic::Ordering::SeqCst);
                let claim = claim_request(&worker, 40, None);
                let jobs = retrying(|| handle.claim_batch(claim.clone())).await;
                if jobs.is_empty() {
                    if producing_over {
                        return mine;
                    }
                    // Poll, as an idle fetcher in another process would.
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                    continue;
                }
                let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
                let started = retrying(|| handle.mark_processing(&worker, &ids)).await;
                assert_eq!(started.len(), ids.len());
                let completions = all_succeeded(&ids);
                let applied = retrying(|| handle.complete(&worker, completions.clone())).await;
                assert!(applied.iter().all(|a| a.is_applied()));
                mine.extend(ids);
            }
        }));
    }
    let mut produced = HashSet::new();
    for t in producer_tasks {
        produced.extend(t.await.unwrap());
    }
    finished_producing.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut consumed = Vec::new();
    for t in consumer_tasks {
        consumed.extend(t.await.unwrap());
    }
    assert_eq!(produced.len(), total);
    let unique: HashSet<JobId> = consumed.iter().copied().collect();
    assert_eq!(unique.len(), consumed.len(), "no job ran twice");
    assert_eq!(unique, produced, "every job ran");
    let s = first.summary().await.unwrap();
    assert_eq!(
        (s.pending, s.fetched, s.processing, s.succeeded),
        (0, 0, 0, total as u64)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_survive_closing_and_reopening_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deck.db");
    let (pending, running) = {
        let store = open(&path, &StoreOptions::default()).await;
        let pending = enqueue(&*store, EnqueueRequest::new("q", "t", "{}")).await;
        let running = enqueue(&*store, EnqueueRequest::new("r", "t", "{}")).await;
        let claimed = claim_jobs(&*store, "w", 1, Some(vec!["r".into()])).await;
        assert_eq!(claimed[0].id, running);
        store.mark_processing("w", &[running]).await.unwrap();
        (pending, running)
    };
    let reopened = open(&path, &StoreOptions::default()).await;
    reopened.ping().await.unwrap();
    let p = reopened.get_job(pending).await.unwrap().unwrap();
    let r = reopened.get_job(running).await.unwrap().unwrap();
    assert_eq!(p.state, JobState::Pending);
    assert_eq!(
        (r.state, r.attempt, r.worker_id.as_deref()),
        (JobState::Processing, 1, Some("w"))
    );
}

//! Two `deck serve` processes on one SQLite file drain a workload together; the handler's
//! side-effect log proves every job ran exactly once.

mod common;

use std::collections::BTreeSet;

use common::*;
use deck_engine::JobState;

const JOBS: usize = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_one_database_and_run_each_job_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(dir.path());
    let effects = dir.path().join("effects.log");
    let env = [("DECK_TEST_SIDE_EFFECT_LOG", effects.to_str().unwrap())];
    // Small prefetch so neither process can grab the whole workload in one claim.
    let flags = [
        "--poll-interval",
        "100ms",
        "--prefetch",
        "10",
        "--workers",
        "4",
    ];
    let a = Server::start(dir.path(), "a", &url, &flags, &env);
    let b = Server::start(dir.path(), "b", &url, &flags, &env);

    let store = open(&url).await;
    let ids: BTreeSet<String> = enqueue_records(&store, "shared", JOBS, r#"{"sleep_ms": 10}"#)
        .await
        .into_iter()
        .collect();
    assert_eq!(ids.len(), JOBS);

    wait_until_drained(&store, &[&a, &b]).await;

    let recorded = recorded_ids(&effects);
    let runs = runs_by_id(&recorded);
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "jobs ran more than once: {twice:?}");
    let ran: BTreeSet<String> = runs.keys().map(|s| s.to_string()).collect();
    assert_eq!(ran, ids, "the jobs that ran are exactly the jobs enqueued");

    assert_eq!(pillar_counts(&store).await, (0, JOBS as u64, 0));
    let mut workers = BTreeSet::new();
    for id in &ids {
        let job = store.get_job(id.parse().unwrap()).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Succeeded);
        assert_eq!(job.attempt, 1, "job {id} needed more than one attempt");
        workers.insert(job.worker_id.unwrap_or_default());
    }
    // Both processes took part (a job's worker id is the instance that ran it).
    assert_eq!(workers.len(), 2, "instances that did the work: {workers:?}");
    drop((a, b));
}

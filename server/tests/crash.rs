//! Kill `deck serve` with SIGKILL in the middle of a workload, start it again, and prove
//! that every job ended in exactly one pillar and none was lost: jobs that were running
//! became `Zombie` in the DLQ (never re-run: their side effects may have happened), jobs
//! that were only buffered went back to pending and ran after the restart.

mod common;

use std::collections::BTreeSet;

use common::*;
use deck_engine::{FailureReason, JobState};

const JOBS: usize = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_loses_no_job_and_runs_none_twice() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("deck.toml"),
        quick_rescue_config(6, 10, "2s"),
    )
    .unwrap();
    let url = sqlite_url(dir.path());
    let effects = dir.path().join("effects.log");
    let env = [("DECK_TEST_SIDE_EFFECT_LOG", effects.to_str().unwrap())];

    let store = open(&url).await;
    let ids = enqueue_records(&store, "slow", JOBS, r#"{"sleep_ms": 300}"#).await;

    let mut first = Server::start(dir.path(), "first", &url, &[], &env);
    // Let it get into the workload: some jobs done, others running, more buffered.
    wait_for_records(&effects, 12, &first, PATIENCE).await;
    first.kill_hard();
    let (hot_after_kill, _, _) = pillar_counts(&store).await;
    assert!(
        hot_after_kill > 0,
        "the kill came too late to leave work behind"
    );

    let second = Server::start(dir.path(), "second", &url, &[], &env);
    wait_until_drained(&store, &[&first, &second]).await;

    // Exactly one pillar each, none lost: real row counts, and the maintained counters.
    let (hot, archive, dlq) = pillar_counts(&store).await;
    assert_eq!(hot, 0);
    assert_eq!(archive + dlq, JOBS as u64, "archive {archive} + dlq {dlq}");
    let summary = store.summary().await.unwrap();
    assert_eq!(
        (summary.succeeded, summary.dlq),
        (archive, dlq),
        "counters follow the rows"
    );

    let recorded = recorded_ids(&effects);
    let runs = runs_by_id(&recorded);
    let mut zombies = 0;
    for id in &ids {
        let job = store.get_job(id.parse().unwrap()).await.unwrap().unwrap();
        let times = runs.get(id.as_str()).copied().unwrap_or(0);
        match job.state {
            JobState::Succeeded => assert_eq!(times, 1, "succeeded job {id} ran {times} times"),
            // It was running when the process died: dead-lettered, not run again.
            JobState::Dead(FailureReason::Zombie) => {
                zombies += 1;
                assert!(times <= 1, "zombie {id} ran {times} times");
            }
            other => panic!("job {id} ended as {other}"),
        }
    }
    assert_eq!(zombies, dlq);
    eprintln!(
        "after the crash: {archive} succeeded, {dlq} zombies, {} side effects",
        recorded.len()
    );
    let distinct: BTreeSet<_> = recorded.iter().collect();
    assert_eq!(distinct.len(), recorded.len(), "no job ran twice");
    drop(second);
}

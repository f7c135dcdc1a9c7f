//! Shutdown when the store cannot commit: it gives up after the flush timeout instead of
//! retrying forever, and names the jobs it left to the rescuer.

mod runtime_support;

use std::sync::Arc;
use std::time::Duration;

use deck_engine::conformance::support::long_timeouts;
use deck_engine::maintenance::rescue;
use deck_engine::{EngineConfig, FailureReason, JobState, Store};
use runtime_support::{
    Gate, counting_store, enqueue_id, gated_handlers, open_store, register_blocking,
    register_until_cancelled, single_worker_config, start, start_running_one, test_config,
};

/// Far more than shutdown needs here (grace 300 ms + flush 200 ms + loops stopping): reached
/// only when shutdown hangs, as it did when the completer retried forever.
const HANG: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_gives_up_on_commits_the_store_refuses_and_names_the_jobs() {
    let (_dir, real) = open_store().await;
    let store = Arc::new(counting_store(real.clone()));
    let (mut handlers, finishing) = gated_handlers("finish");
    let holding = Gate::new();
    // Runs until shutdown cancels it.
    register_until_cancelled(&mut handlers, "hold", &holding);
    let config = EngineConfig {
        worker_count: Some(2),
        shutdown_grace: Duration::from_millis(300),
        shutdown_flush_timeout: Duration::from_millis(200),
        ..test_config()
    };
    let engine = start(store.clone(), handlers, config).await;
    let finished = enqueue_id(&engine, "q", "finish").await;
    let cancelled = enqueue_id(&engine, "q", "hold").await;
    finishing.wait_arrivals(1).await;
    holding.wait_arrivals(1).await;

    // The disk fills up: the finished job's outcome cannot be committed, and the completer
    // keeps retrying it.
    store.refuse_completions(true);
    finishing.open();
    store.next_refusal().await;

    let report = tokio::time::timeout(HANG, engine.shutdown())
        .await
        .expect("shutdown returns although the store refuses every commit");

    let mut expected = vec![finished, cancelled];
    expected.sort();
    assert_eq!(report.uncommitted, expected, "{report:?}");
    assert!(report.still_running.is_empty(), "{report:?}");
    assert!(report.unreleased.is_empty(), "{report:?}");
    assert!(report.deregistered, "only completions were refused");
    assert!(!report.is_clean());
    assert_eq!(
        engine.shutdown().await,
        report,
        "a second call reports the same"
    );

    // Nothing was lost: both jobs are still in the database, processing by the stopped
    // instance, and the rescue rules take them from there.
    for id in &expected {
        let job = real.get_job(*id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Processing, "{id}");
        assert_eq!(job.worker_id.as_deref(), Some(engine.instance_id()));
    }
    let report = rescue(&*real, &long_timeouts()).await.unwrap();
    assert_eq!(report.zombies, 2, "{report:?}");
    for id in &expected {
        let job = real.get_job(*id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Dead(FailureReason::Zombie), "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_out_a_store_that_recovers_within_the_flush_timeout() {
    let (_dir, real) = open_store().await;
    let store = Arc::new(counting_store(real.clone()));
    let config = EngineConfig {
        // Long enough for the completer's retry after the store recovers.
        shutdown_flush_timeout: Duration::from_secs(30),
        ..single_worker_config()
    };
    let counted: Arc<dyn Store> = store.clone();
    let (engine, gate, id) = start_running_one(&counted, config, "finish", register_blocking).await;
    store.refuse_completions(true);
    gate.open();
    store.next_refusal().await;

    let stopping = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.shutdown().await })
    };
    store.next_refusal().await;
    store.refuse_completions(false);
    let report = tokio::time::timeout(HANG, stopping)
        .await
        .expect("shutdown returns")
        .unwrap();

    assert!(report.is_clean(), "{report:?}");
    assert_eq!(
        real.get_job(id).await.unwrap().unwrap().state,
        JobState::Succeeded
    );
}

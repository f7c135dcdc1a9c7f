//! A handler that declares a capacity (`HandlerRegistry::limit`, as an HTTP endpoint's
//! `concurrency` does): the engine starts only as many of its jobs as it can run now. The
//! rest stay unstarted (no attempt spent), other handlers' jobs start past them, and after a
//! crash the rescue returns them to pending instead of calling them zombies.

mod runtime_support;

use std::sync::Arc;
use std::time::Duration;

use deck_engine::conformance::support::long_timeouts;
use deck_engine::maintenance::rescue;
use deck_engine::{
    Engine, EngineConfig, FailureReason, HandlerRegistry, JobId, JobState, RescuePolicy, Store,
};
use runtime_support::{
    Gate, WAIT, assert_all_succeed, enqueue_id, enqueue_ids, open_store, register_blocking,
    register_echo, test_config,
};

/// Many workers, so only the declared capacity can hold jobs back.
fn many_workers() -> EngineConfig {
    EngineConfig {
        worker_count: Some(20),
        ..test_config()
    }
}

/// `limited` jobs block on the returned gate, at most two at once; `free` jobs have no limit.
fn limited_handlers() -> (HandlerRegistry, Gate) {
    let gate = Gate::new();
    let mut handlers = HandlerRegistry::new();
    register_blocking(&mut handlers, "limited", &gate);
    register_echo(&mut handlers, "free");
    handlers.limit("limited", 2);
    (handlers, gate)
}

/// The stored state and attempt of each job.
async fn stored(store: &Arc<dyn Store>, ids: &[JobId]) -> Vec<(JobState, u32)> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let job = store.get_job(*id).await.unwrap().unwrap();
        out.push((job.state, job.attempt));
    }
    out
}

/// Two of `jobs` processing on their first attempt, every other one unstarted.
fn two_started_rest_unstarted(jobs: &[(JobState, u32)]) {
    let processing: Vec<_> = jobs
        .iter()
        .filter(|(s, _)| *s == JobState::Processing)
        .collect();
    assert_eq!(processing.len(), 2, "{jobs:?}");
    assert!(processing.iter().all(|(_, a)| *a == 1), "{jobs:?}");
    for (state, attempt) in jobs.iter().filter(|(s, _)| *s != JobState::Processing) {
        assert!(
            matches!(state, JobState::Pending | JobState::Fetched),
            "a job waiting for the handler's capacity is {state}: {jobs:?}"
        );
        assert_eq!(
            *attempt, 0,
            "no attempt spent on a job never started: {jobs:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_at_capacity_starts_no_more_jobs_and_others_start_past_them() {
    let (_dir, store) = open_store().await;
    let (handlers, gate) = limited_handlers();
    let engine = Engine::start(store.clone(), handlers, many_workers())
        .await
        .unwrap();
    let limited = enqueue_ids(&engine, "q", "limited", 12).await;
    gate.wait_arrivals(2).await;

    // Enqueued after them, in the same queue: it runs although ten jobs before it wait.
    let free = enqueue_id(&engine, "q", "free").await;
    let outcome = engine.wait(free, WAIT).await.unwrap();
    assert_eq!(outcome.job().map(|j| j.state), Some(JobState::Succeeded));
    two_started_rest_unstarted(&stored(&store, &limited).await);

    gate.open();
    assert_all_succeed(&engine, &limited).await;
    assert_eq!(
        gate.max_inside(),
        2,
        "never more than the capacity ran at once"
    );
    for (state, attempt) in stored(&store, &limited).await {
        assert_eq!((state, attempt), (JobState::Succeeded, 1));
    }
    engine.shutdown().await;
}

#[test]
fn after_a_crash_only_the_started_jobs_are_zombies() {
    let outer = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_dir, store) = outer.block_on(open_store());
    let (handlers, gate) = limited_handlers();

    // The instance runs on a runtime of its own, so dropping that runtime stops every task
    // of it at once, mid-flight, as `kill -9` stops the process.
    let instance = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (engine_store, waiting) = (store.clone(), gate.clone());
    let limited = instance.block_on(async move {
        let engine = Engine::start(engine_store, handlers, many_workers())
            .await
            .unwrap();
        let ids = enqueue_ids(&engine, "q", "limited", 12).await;
        waiting.wait_arrivals(2).await;
        std::mem::forget(engine);
        ids
    });
    instance.shutdown_timeout(Duration::ZERO);

    outer.block_on(async {
        let before = stored(&store, &limited).await;
        two_started_rest_unstarted(&before);
        // The instance is gone: its work is rescued at once.
        let policy = RescuePolicy {
            dead_instance_timeout: Duration::ZERO,
            ..long_timeouts()
        };
        let report = rescue(&*store, &policy).await.unwrap();
        assert_eq!(report.zombies, 2, "{report:?}");
        let after = stored(&store, &limited).await;
        for ((was, _), (now, attempt)) in before.iter().zip(&after) {
            if *was == JobState::Processing {
                assert_eq!(*now, JobState::Dead(FailureReason::Zombie), "{after:?}");
            } else {
                assert_eq!(
                    (*now, *attempt),
                    (JobState::Pending, 0),
                    "a job that never started goes back to pending, unspent: {after:?}"
                );
            }
        }
    });
    assert_eq!(gate.max_inside(), 2);
}

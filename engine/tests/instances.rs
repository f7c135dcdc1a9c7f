//! Instances as the console shows them: a worker killed mid-job is listed as lost with the
//! jobs it holds, a console-only instance (no workers) rescues them on its own, and each
//! instance row says what it takes.

mod runtime_support;

use std::time::Duration;

use deck_engine::{
    Engine, EngineConfig, FailureReason, HandlerRegistry, InstanceStatus, JobState, RescuePolicy,
};
use runtime_support::{Gate, WAIT, enqueue_id, open_store, register_blocking, test_config};

#[test]
fn a_console_only_instance_rescues_the_jobs_of_a_killed_worker() {
    let outer = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_dir, store) = outer.block_on(open_store());

    // A worker starts a job, then dies as under `kill -9`: its runtime stops mid-flight.
    let gate = Gate::new();
    let mut handlers = HandlerRegistry::new();
    register_blocking(&mut handlers, "work", &gate);
    let worker_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (worker_store, arrived) = (store.clone(), gate.clone());
    let (worker_id, job) = worker_rt.block_on(async move {
        let worker = Engine::start(worker_store, handlers, test_config())
            .await
            .unwrap();
        let job = enqueue_id(&worker, "q", "work").await;
        arrived.wait_arrivals(1).await;
        let id = worker.instance_id().to_string();
        std::mem::forget(worker);
        (id, job)
    });
    worker_rt.shutdown_timeout(Duration::ZERO);

    outer.block_on(async {
        // Only a console instance is left.
        let console_config = EngineConfig {
            run_workers: false,
            rescue_interval: Duration::from_secs(1),
            rescue: RescuePolicy {
                dead_instance_timeout: Duration::from_secs(1),
                ..RescuePolicy::default()
            },
            ..test_config()
        };
        let console = Engine::start(store.clone(), HandlerRegistry::new(), console_config)
            .await
            .unwrap();
        let listed = store.list_instances(Duration::from_secs(60)).await.unwrap();
        let dead = listed.iter().find(|i| i.id == worker_id).unwrap();
        assert_eq!(dead.held_jobs, 1, "{dead:?}");
        let me = listed
            .iter()
            .find(|i| i.id == console.instance_id())
            .unwrap();
        assert_eq!(me.workers_total, 0);
        assert!(
            !me.takes("q", "work"),
            "an instance without workers takes nothing"
        );

        let outcome = console.wait(job, WAIT).await.unwrap();
        assert_eq!(
            outcome.job().map(|j| j.state),
            Some(JobState::Dead(FailureReason::Zombie)),
            "the job that ran on the killed worker is rescued by the console instance"
        );
        // Rescued: the dead worker is no longer listed once its heartbeat is old.
        let listed = store.list_instances(Duration::ZERO).await.unwrap();
        assert!(listed.iter().all(|i| i.id != worker_id), "{listed:?}");
        console.shutdown().await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_reports_the_queues_and_types_it_takes() {
    let (_dir, store) = open_store().await;
    let gate = Gate::new();
    let mut handlers = HandlerRegistry::new();
    register_blocking(&mut handlers, "mail.send", &gate);
    let config = EngineConfig {
        queues: Some(vec!["mail".into()]),
        ..test_config()
    };
    let engine = Engine::start(store.clone(), handlers, config)
        .await
        .unwrap();
    let listed = store.list_instances(Duration::from_secs(60)).await.unwrap();
    let row = listed
        .iter()
        .find(|i| i.id == engine.instance_id())
        .unwrap();
    assert_eq!(row.job_types, Some(vec!["mail.send".to_string()]));
    assert!(row.takes("mail", "mail.send"));
    assert!(
        !row.takes("mail", "report.build"),
        "no handler for that type"
    );
    assert!(
        !row.takes("other", "mail.send"),
        "a queue it does not serve"
    );
    assert_eq!(row.status(chrono::Utc::now()), InstanceStatus::Live);
    engine.shutdown().await;
}

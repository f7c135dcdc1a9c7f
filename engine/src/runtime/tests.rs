//! One iteration of each background loop that needs the engine's shared state, driven by
//! hand against a real SQLite file (the loops' own timers are set far in the future).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::config::EngineConfig;
use crate::conformance::support::{claim, complete_one, execution_timeout, succeeded};
use crate::engine::Engine;
use crate::handler::{HandlerRegistry, JobContext};
use crate::model::{CancelOutcome, EngineSettings, EnqueueRequest, FailureReason, JobState};
use crate::runtime::heartbeat::{JobHeartbeat, JobHeartbeatConfig};
use crate::runtime::instance::{InstanceHeartbeat, InstanceHeartbeatConfig};
use crate::runtime::periodic::Periodic;
use crate::runtime::result_sweeper::{ResultSweeper, SweeperConfig};
use crate::runtime::timeouts::{TimeoutWatchdog, WatchdogConfig};
use crate::store::{Store, StoreOptions};
use crate::{WaitOutcome, store};

const LONG: Duration = Duration::from_secs(3600);

async fn open(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let path = dir.path().join("deck.db");
    store::sqlite::open(path.to_str().unwrap(), &StoreOptions::default())
        .await
        .unwrap()
}

/// Every loop's own timer far away, so only the test drives them.
fn quiet_config() -> EngineConfig {
    EngineConfig {
        heartbeat_interval: Duration::from_secs(100),
        timeout_check_interval: LONG,
        instance_heartbeat_interval: Duration::from_secs(10),
        wait_poll_interval: LONG,
        rescue_interval: LONG,
        retention_interval: LONG,
        ..EngineConfig::default()
    }
}

async fn start_quiet(store: Arc<dyn Store>, handlers: HandlerRegistry) -> Engine {
    Engine::start(store, handlers, quiet_config())
        .await
        .unwrap()
}

/// A quiet engine on the file in `dir` whose `block` jobs signal their start on the returned
/// notify and then never finish on their own.
async fn start_blocking(dir: &tempfile::TempDir) -> (Engine, Arc<Notify>) {
    let started = Arc::new(Notify::new());
    let signal = started.clone();
    let mut handlers = HandlerRegistry::new();
    handlers.register("block", move |_: JobContext, _: serde_json::Value| {
        let signal = signal.clone();
        async move {
            signal.notify_one();
            std::future::pending::<()>().await;
            Ok(())
        }
    });
    (start_quiet(open(dir).await, handlers).await, started)
}

fn reason(outcome: &WaitOutcome) -> Option<FailureReason> {
    match outcome.job().map(|j| j.state) {
        Some(JobState::Dead(r)) => Some(r),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_heartbeat_iteration_carries_a_cancel_from_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, started) = start_blocking(&dir).await;
    let req = EnqueueRequest::new("q", "block", "");
    let id = engine.enqueue(req).await.unwrap().id;
    started.notified().await;
    let other = open(&dir).await;
    assert_eq!(other.cancel(id).await.unwrap(), CancelOutcome::Requested);

    let beat = job_heartbeat(&engine);
    let report = beat.run_once().await.unwrap();

    assert_eq!(report.cancel_requested, vec![id]);
    let outcome = engine.wait(id, Duration::from_secs(30)).await.unwrap();
    assert_eq!(reason(&outcome), Some(FailureReason::Cancelled));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_heartbeat_jitter_stays_within_twenty_percent() {
    let dir = tempfile::tempdir().unwrap();
    let engine = start_quiet(open(&dir).await, HandlerRegistry::new()).await;
    let beat = job_heartbeat(&engine);
    for _ in 0..1_000 {
        let d = beat.next_wait();
        assert!(
            d >= Duration::from_secs(8) && d <= Duration::from_secs(12),
            "{d:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_heartbeat_iteration_registers_and_follows_stored_settings() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let engine = start_quiet(store.clone(), HandlerRegistry::new()).await;
    let other = open(&dir).await;
    other
        .save_settings(&EngineSettings {
            worker_count: 4,
            ..EngineSettings::default()
        })
        .await
        .unwrap();
    other.update_queue("q", execution_timeout(7)).await.unwrap();

    let beat = InstanceHeartbeat::new(
        engine.control().clone(),
        InstanceHeartbeatConfig::default(),
        Arc::new(AtomicBool::new(false)),
    );
    beat.run_once().await.unwrap();

    assert_eq!(engine.snapshot().workers_total, 4);
    assert_eq!(
        engine
            .control()
            .queue_cache()
            .execution_timeout("q", Duration::from_secs(1)),
        Duration::from_secs(7)
    );
    let instances = store.list_instances(LONG).await.unwrap();
    let me = instances
        .iter()
        .find(|i| i.id == engine.instance_id())
        .unwrap();
    assert_eq!(me.workers_total, 4);
    assert_eq!(me.pid, std::process::id());
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_iteration_times_out_an_overdue_job() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, started) = start_blocking(&dir).await;
    let mut req = EnqueueRequest::new("q", "block", "");
    req.max_attempts = Some(1);
    let id = engine.enqueue(req).await.unwrap().id;
    started.notified().await;
    let watchdog =
        TimeoutWatchdog::new(engine.control().running.clone(), WatchdogConfig::default());

    assert_eq!(watchdog.run_once(Instant::now()), 0, "not overdue yet");
    // 15 minutes and one second later, by the watchdog's clock.
    let later = Instant::now() + Duration::from_secs(15 * 60 + 1);
    assert_eq!(watchdog.run_once(later), 1);

    let outcome = engine.wait(id, Duration::from_secs(30)).await.unwrap();
    assert_eq!(reason(&outcome), Some(FailureReason::Timeout));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeper_iteration_wakes_waiters_of_jobs_finished_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let producer = Engine::start(
        store.clone(),
        HandlerRegistry::new(),
        EngineConfig {
            run_workers: false,
            ..quiet_config()
        },
    )
    .await
    .unwrap();
    let id = producer
        .enqueue(EnqueueRequest::new("q", "t", ""))
        .await
        .unwrap()
        .id;
    // Registered directly, so the job cannot finish before anyone waits (a wait that
    // finds it finished would resolve without the sweeper).
    let control = producer.control();
    let (_waiter, resolved) = control.waiters.register(id);
    // Another process runs the job by hand.
    let other = open(&dir).await;
    assert_eq!(claim(&*other, "elsewhere", 1).await, [id]);
    other.mark_processing("elsewhere", &[id]).await.unwrap();
    let finished = succeeded(id, Some("7"));
    assert!(complete_one(&*other, "elsewhere", finished).await);

    let sweeper = ResultSweeper::new(store, control.waiters.clone(), SweeperConfig::default());
    assert_eq!(sweeper.run_once().await.unwrap(), 1);

    let job = resolved.await.unwrap();
    assert_eq!(job.result.as_deref(), Some("7"));
    producer.shutdown().await;
}

/// The job heartbeat of `engine`'s runtime, with the default interval (10 s).
fn job_heartbeat(engine: &Engine) -> JobHeartbeat {
    let control = engine.control();
    JobHeartbeat::new(
        control.store.clone(),
        control.instance_id.clone(),
        control.running.clone(),
        control.events.clone(),
        JobHeartbeatConfig::default(),
    )
}

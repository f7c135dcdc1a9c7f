//! The worker runtime and the engine facade against a real SQLite file: jobs run, retry,
//! dead-letter, time out, get cancelled across processes, respect pause and bulkheads, drain
//! on shutdown, and their results are awaited with and without polling.

mod runtime_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use deck_engine::attempts::AttemptOutcome;
use deck_engine::conformance::support::{
    claim, claim_request, enqueue, execution_timeout, max_workers, pause,
};
use deck_engine::{
    BreakerConfig, CancelOutcome, Engine, EngineConfig, EngineSettings, EnqueueRequest,
    FailureReason, HandlerError, HandlerOutcome, HandlerRegistry, JobContext, JobState, Middleware,
    Next, Store, WaitOutcome,
};
use runtime_support::{
    Gate, WAIT, assert_all_succeed, enqueue_id, enqueue_ids, eventually, gated_handlers,
    open_counting_store, open_fast_retrying_store, open_store, producer_config, register_counting,
    register_echo, register_gated, register_hanging, register_until_cancelled, run_job,
    single_worker_config, start, start_running_one, states, succeeded_job, test_config,
};
use tokio::sync::mpsc;

fn dead_reason(outcome: &WaitOutcome) -> FailureReason {
    match outcome {
        WaitOutcome::Dead { job } => match job.state {
            JobState::Dead(r) => r,
            other => panic!("dead outcome with state {other}"),
        },
        other => panic!("expected a dead job, got {other:?}"),
    }
}

fn last_error(outcome: &WaitOutcome) -> String {
    outcome
        .job()
        .and_then(|j| j.last_error())
        .map(|e| e.message.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_job_runs_and_is_archived_with_its_result() {
    let (_dir, store) = open_store().await;
    let mut handlers = HandlerRegistry::new();
    handlers.register("echo", |ctx: JobContext, p: serde_json::Value| async move {
        Ok(serde_json::json!({ "echo": p, "attempt": ctx.attempt() }))
    });
    let engine = start(store.clone(), handlers, test_config()).await;

    let req = EnqueueRequest::new("default", "echo", r#"{"n":7}"#);
    let (id, outcome) = engine.enqueue_and_wait(req, WAIT).await.unwrap();

    let job = succeeded_job(outcome);
    assert_eq!(job.id, id);
    assert_eq!(
        job.result.as_deref(),
        Some(r#"{"attempt":1,"echo":{"n":7}}"#)
    );
    let stored = store.get_job(id).await.unwrap().unwrap();
    assert_eq!(stored.state, JobState::Succeeded);
    assert_eq!(
        stored.result.as_deref(),
        Some(r#"{"attempt":1,"echo":{"n":7}}"#)
    );
    // The answer may come from the store a moment before the completer (waiting for the
    // fsync) counts the job.
    eventually(|| engine.snapshot().counters.succeeded == 1).await;
    engine.shutdown().await;
}

/// Its first attempt meets a busy downstream; the second gets through.
async fn busy_the_first_time(
    ctx: JobContext,
    _: serde_json::Value,
) -> Result<&'static str, HandlerError> {
    if ctx.attempt() < 2 {
        Err(HandlerError::transient("downstream busy"))
    } else {
        Ok("done")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_failure_is_retried_then_succeeds() {
    let (_dir, store) = open_fast_retrying_store().await;
    let mut handlers = HandlerRegistry::new();
    handlers.register("flaky", busy_the_first_time);
    let engine = start(store.clone(), handlers, test_config()).await;

    let job = succeeded_job(run_job(&engine, "default", "flaky", "").await);
    assert_eq!(job.attempt, 2);
    assert_eq!(job.errors.len(), 1);
    assert_eq!(job.errors[0].kind, "transient");
    assert_eq!(job.errors[0].message, "downstream busy");
    eventually(|| engine.snapshot().counters.retried == 1).await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_workers_get_jobs_started_by_the_claim_itself() {
    let (_dir, counting, store) = open_counting_store().await;
    let mut handlers = HandlerRegistry::new();
    register_echo(&mut handlers, "echo");
    let engine = start(store.clone(), handlers, test_config()).await;

    for n in 0..5 {
        let job = succeeded_job(run_job(&engine, "default", "echo", &n.to_string()).await);
        assert_eq!(job.attempt, 1);
    }
    assert_eq!(
        counting.mark_processing_calls(),
        0,
        "with free workers every job went from pending to running in one store call"
    );
    assert_eq!(engine.snapshot().counters.started, 5);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_circuit_defers_jobs_without_spending_an_attempt() {
    let (_dir, store) = open_store().await;
    let mut handlers = HandlerRegistry::new();
    handlers.register("down", |_: JobContext, _: serde_json::Value| async move {
        Err::<(), _>(HandlerError::transient("downstream is down"))
    });
    let config = EngineConfig {
        breaker: BreakerConfig {
            failure_threshold: 2,
            open_for: Duration::from_secs(3600),
            ..BreakerConfig::default()
        },
        ..test_config()
    };
    let engine = start(store.clone(), handlers, config).await;
    enqueue_ids(&engine, "default", "down", 2).await;
    // Both first attempts fail (their retries are due in seconds): the circuit opens.
    eventually(|| engine.snapshot().counters.retried == 2).await;

    let later = enqueue_id(&engine, "default", "down").await;
    eventually(|| engine.snapshot().counters.deferred >= 1).await;
    let job = store.get_job(later).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Pending, "deferred back to pending");
    assert_eq!(job.attempt, 0, "no attempt was spent on an open circuit");
    assert!(job.scheduled_at > chrono::Utc::now(), "due again later");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_transient_failures_end_as_failed() {
    let (_dir, store) = open_fast_retrying_store().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let mut handlers = HandlerRegistry::new();
    let counted = runs.clone();
    handlers.register("always-down", move |_: JobContext, _: serde_json::Value| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), _>(HandlerError::transient("still down")) }
    });
    let engine = start(store.clone(), handlers, test_config()).await;

    let outcome = run_job(&engine, "default", "always-down", "").await;

    assert_eq!(dead_reason(&outcome), FailureReason::Failed);
    assert_eq!(runs.load(Ordering::SeqCst), 3, "three attempts in total");
    assert_eq!(outcome.job().unwrap().errors.len(), 3);
    engine.shutdown().await;
}

/// The line of the test handler's `panic!`, which its report must name.
static PANIC_LINE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fatal_and_panicking_jobs_go_to_the_dlq_as_fatal_and_unknown_types_wait() {
    let (_dir, store) = open_store().await;
    #[derive(serde::Deserialize)]
    struct Order {
        #[allow(dead_code)]
        id: u64,
    }
    let mut handlers = HandlerRegistry::new();
    handlers
        .register("poison", |_: JobContext, _: serde_json::Value| async {
            Err::<(), _>(HandlerError::fatal("customer 42 does not exist"))
        })
        .register("explodes", |_: JobContext, _: serde_json::Value| async {
            if true {
                PANIC_LINE.store(line!() + 1, Ordering::SeqCst);
                panic!("index out of bounds");
            }
            Ok(())
        })
        .register("order", |_: JobContext, _: Order| async { Ok(()) });
    let engine = start(store.clone(), handlers, test_config()).await;

    let run = |job_type, payload| run_job(&engine, "default", job_type, payload);

    let poison = run("poison", "").await;
    assert_eq!(dead_reason(&poison), FailureReason::Fatal);
    assert_eq!(last_error(&poison), "customer 42 does not exist");
    assert_eq!(
        poison.job().unwrap().attempt,
        1,
        "fatal errors are not retried"
    );

    let panicked = run("explodes", "").await;
    assert_eq!(dead_reason(&panicked), FailureReason::Fatal);
    // The message and the attempt record name where the handler panicked.
    let site = format!("{}:{}:", file!(), PANIC_LINE.load(Ordering::SeqCst));
    let message = last_error(&panicked);
    assert!(
        message.starts_with(&format!("the handler panicked at {site}"))
            && message.ends_with(": index out of bounds"),
        "{message}"
    );
    let attempts = panicked.job().unwrap().attempts();
    assert_eq!(attempts.len(), 1);
    let record = &attempts[0];
    assert_eq!(record.outcome, AttemptOutcome::DeadLettered);
    assert_eq!(record.instance.as_deref(), Some(engine.instance_id()));
    assert!(record.started_at.is_some() && record.duration_ms.is_some());
    let error = record.error.as_ref().unwrap();
    assert!(
        error.location.as_deref().unwrap_or("").starts_with(&site),
        "{:?}",
        error.location
    );

    let bad_payload = run("order", r#"{"id":"not a number"}"#).await;
    assert_eq!(dead_reason(&bad_payload), FailureReason::Fatal);
    assert!(
        last_error(&bad_payload).contains("payload does not fit handler \"order\""),
        "{}",
        last_error(&bad_payload)
    );

    // A type no handler here takes is left for another worker (an external one): a job
    // enqueued after it ran, so the claim that took that one passed over it.
    let unknown = enqueue_id(&engine, "default", "no.such.type").await;
    let later = run("poison", "").await;
    assert_eq!(dead_reason(&later), FailureReason::Fatal);
    let left = store.get_job(unknown).await.unwrap().unwrap();
    assert_eq!((left.state, left.attempt), (JobState::Pending, 0));

    // Fatal errors say nothing about the downstream: no circuit opened.
    assert!(
        engine
            .snapshot()
            .breakers
            .iter()
            .all(|b| b.state == deck_engine::BreakerStateName::Closed)
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_result_goes_to_the_dlq_with_the_reason() {
    let (_dir, store) = open_store().await;
    let mut handlers = HandlerRegistry::new();
    handlers.register("big", |_: JobContext, _: serde_json::Value| async {
        Ok("x".repeat(200))
    });
    let config = EngineConfig {
        result_max_bytes: 100,
        ..test_config()
    };
    let engine = start(store.clone(), handlers, config).await;

    let outcome = run_job(&engine, "default", "big", "").await;

    assert_eq!(dead_reason(&outcome), FailureReason::Fatal);
    assert!(last_error(&outcome).contains("result_max_bytes"));
    engine.shutdown().await;
}

/// An engine whose queue `slow` times out its jobs after 1 s, watched every 20 ms.
async fn start_with_a_slow_queue(store: Arc<dyn Store>, handlers: HandlerRegistry) -> Engine {
    let config = EngineConfig {
        timeout_check_interval: Duration::from_millis(20),
        ..test_config()
    };
    let engine = start(store, handlers, config).await;
    engine
        .update_queue("slow", execution_timeout(1))
        .await
        .unwrap();
    engine
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execution_timeout_fails_the_attempt_and_names_the_reason_when_last() {
    let (_dir, store) = open_store().await;
    let mut handlers = HandlerRegistry::new();
    handlers.register("hangs", |_: JobContext, _: serde_json::Value| async {
        std::future::pending::<()>().await;
        Ok(())
    });
    let engine = start_with_a_slow_queue(store, handlers).await;

    let mut req = EnqueueRequest::new("slow", "hangs", "");
    req.max_attempts = Some(1);
    let (_, outcome) = engine.enqueue_and_wait(req, WAIT).await.unwrap();

    assert_eq!(dead_reason(&outcome), FailureReason::Timeout);
    assert_eq!(outcome.job().unwrap().last_error().unwrap().kind, "timeout");
    assert!(last_error(&outcome).contains("execution timeout of 1 s exceeded"));
    engine.shutdown().await;
}

/// Hangs in its first attempt, until the execution timeout ends it; the second returns.
async fn hangs_the_first_time(ctx: JobContext, _: serde_json::Value) -> Result<(), HandlerError> {
    if ctx.attempt() == 1 {
        std::future::pending::<()>().await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_attempt_is_retried() {
    let (_dir, store) = open_fast_retrying_store().await;
    let mut handlers = HandlerRegistry::new();
    handlers.register("slow-once", hangs_the_first_time);
    let engine = start_with_a_slow_queue(store, handlers).await;

    let job = succeeded_job(run_job(&engine, "slow", "slow-once", "").await);
    assert_eq!(job.attempt, 2);
    assert_eq!(job.errors[0].kind, "timeout");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_cancel_from_another_process_stops_the_running_job() {
    let (dir, store) = open_store().await;
    let config = EngineConfig {
        heartbeat_interval: Duration::from_millis(100),
        ..test_config()
    };
    let (engine, _, id) = start_running_one(&store, config, "long", register_hanging).await;

    // Another "process": its own store handle on the same file.
    let other = runtime_support::reopen(&dir).await;
    assert_eq!(other.cancel(id).await.unwrap(), CancelOutcome::Requested);

    let outcome = engine.wait(id, WAIT).await.unwrap();
    assert_eq!(dead_reason(&outcome), FailureReason::Cancelled);
    let stored = other.get_job(id).await.unwrap().unwrap();
    assert_eq!(stored.state, JobState::Dead(FailureReason::Cancelled));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_operator_cancel_stops_the_job_at_once() {
    let (_dir, store) = open_store().await;
    // Heartbeats far apart: only the local path can stop the job within the test.
    let config = EngineConfig {
        heartbeat_interval: Duration::from_secs(100),
        ..test_config()
    };
    let (engine, _, id) = start_running_one(&store, config, "long", register_until_cancelled).await;

    assert_eq!(engine.cancel(id).await.unwrap(), CancelOutcome::Requested);
    let outcome = engine.wait(id, WAIT).await.unwrap();
    assert_eq!(dead_reason(&outcome), FailureReason::Cancelled);
    engine.shutdown().await;
}

/// A single-worker engine whose only worker runs a `block` job (in the queue given) until the
/// returned gate opens, so jobs enqueued meanwhile wait in the buffer; with that job's id, and
/// the count of runs of the `counted` type it also handles.
async fn start_with_the_worker_busy(
    store: &Arc<dyn Store>,
    queue: &str,
    counted: &str,
) -> (Engine, Gate, deck_engine::JobId, Arc<AtomicUsize>) {
    let (mut handlers, blocker) = gated_handlers("block");
    let ran = register_counting(&mut handlers, counted);
    let engine = start(store.clone(), handlers, single_worker_config()).await;
    let blocking = enqueue_id(&engine, queue, "block").await;
    blocker.wait_arrivals(1).await;
    (engine, blocker, blocking, ran)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_buffered_job_is_dropped_unrun() {
    let (dir, store) = open_store().await;
    let (engine, blocker, blocking, ran) =
        start_with_the_worker_busy(&store, "default", "victim").await;
    let victim = enqueue_id(&engine, "default", "victim").await;
    // The only worker is busy, so the victim sits in the buffer as fetched.
    eventually(|| engine.snapshot().buffered == 1).await;
    let other = runtime_support::reopen(&dir).await;
    assert_eq!(
        other.cancel(victim).await.unwrap(),
        CancelOutcome::Cancelled
    );

    blocker.open();
    assert_all_succeed(&engine, &[blocking]).await;
    eventually(|| engine.snapshot().counters.stale_dropped == 1).await;

    assert_eq!(ran.load(Ordering::SeqCst), 0, "the stale copy never ran");
    let stored = store.get_job(victim).await.unwrap().unwrap();
    assert_eq!(stored.state, JobState::Dead(FailureReason::Cancelled));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_a_queue_releases_its_buffered_jobs() {
    let (_dir, store) = open_store().await;
    let (engine, blocker, blocking, ran) =
        start_with_the_worker_busy(&store, "other", "work").await;
    let ids = enqueue_ids(&engine, "paused", "work", 3).await;
    eventually(|| engine.snapshot().buffered == 3).await;

    engine.update_queue("paused", pause(true)).await.unwrap();

    assert_eq!(engine.snapshot().buffered, 0);
    for id in &ids {
        let job = store.get_job(*id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Pending, "released back to pending");
        assert_eq!(job.attempt, 0, "no attempt spent");
    }
    blocker.open();
    engine.wait(blocking, WAIT).await.unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 0, "a paused queue does not run");

    engine.update_queue("paused", pause(false)).await.unwrap();
    assert_all_succeed(&engine, &ids).await;
    assert_eq!(ran.load(Ordering::SeqCst), 3);
    engine.shutdown().await;
}

/// Wait for the job to succeed and answer which instance ran it.
async fn ran_on(engine: &Engine, id: deck_engine::JobId) -> String {
    let job = succeeded_job(engine.wait(id, WAIT).await.unwrap());
    job.worker_id.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_instance_claims_nothing_new_and_a_resumed_one_drains() {
    let (dir, store) = open_store().await;
    let (quiet, blocker, blocking, ran) = start_with_the_worker_busy(&store, "q", "work").await;
    let mut events = quiet.subscribe_events();
    let buffered = enqueue_ids(&quiet, "q", "work", 2).await;
    eventually(|| quiet.snapshot().buffered == 2).await;

    // Quieted from another process's console: this instance learns it at its heartbeat.
    let console = deck_engine::Operations::over_store(runtime_support::reopen(&dir).await);
    let applied = console
        .set_instance_quiet("ops", quiet.instance_id(), true)
        .await
        .unwrap();
    assert_eq!(applied, deck_engine::Applied::Applied);
    let learned = async {
        loop {
            match events.recv().await {
                Ok(e) if e.kind == deck_engine::EventKind::Instance => break e.message,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => panic!("events closed"),
                _ => {}
            }
        }
    };
    let message = tokio::time::timeout(WAIT, learned).await.unwrap();
    assert!(message.contains("quieted"), "{message}");
    assert_eq!(
        quiet.snapshot().buffered,
        2,
        "buffered work is kept, not released"
    );

    // Enqueued here, so this instance's fetcher is woken at once; it must leave them to
    // the other instance, started only now.
    let later = enqueue_ids(&quiet, "q", "work", 3).await;
    let mut other_handlers = HandlerRegistry::new();
    let other_ran = register_counting(&mut other_handlers, "work");
    let other = start(
        runtime_support::reopen(&dir).await,
        other_handlers,
        test_config(),
    )
    .await;
    for id in &later {
        assert_eq!(
            ran_on(&other, *id).await,
            other.instance_id(),
            "claimed by the other"
        );
    }
    assert_eq!(other_ran.load(Ordering::SeqCst), 3);

    // The quiet instance still finishes what it runs and what it holds.
    blocker.open();
    assert_eq!(ran_on(&quiet, blocking).await, quiet.instance_id());
    for id in &buffered {
        assert_eq!(ran_on(&quiet, *id).await, quiet.instance_id());
    }
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    other.shutdown().await;

    // Resumed through this process's operations: it claims again at once.
    quiet
        .operations()
        .set_instance_quiet("ops", quiet.instance_id(), false)
        .await
        .unwrap();
    let resumed = enqueue_id(&quiet, "q", "work").await;
    assert_eq!(ran_on(&quiet, resumed).await, quiet.instance_id());
    let listed = store.list_instances(Duration::from_secs(60)).await.unwrap();
    let row = listed.iter().find(|i| i.id == quiet.instance_id()).unwrap();
    assert!(!row.quiet, "the stored flag is cleared");
    quiet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_bulkhead_caps_concurrent_jobs() {
    let (_dir, store) = open_store().await;
    let (handlers, gate) = gated_handlers("capped");
    let config = EngineConfig {
        worker_count: Some(10),
        ..test_config()
    };
    let engine = start(store.clone(), handlers, config).await;
    engine.update_queue("capped", max_workers(2)).await.unwrap();
    // One batch: all six are there before the first claim.
    let reqs = vec![EnqueueRequest::new("capped", "capped", ""); 6];
    let outcomes = engine.enqueue_batch(reqs).await.unwrap();
    let ids: Vec<_> = outcomes.into_iter().map(|o| o.id).collect();

    gate.wait_arrivals(2).await;
    // Two run; the claim left the other four pending although eight workers are idle.
    let states = states(&store, &ids).await;
    assert_eq!(
        states.iter().filter(|s| **s == JobState::Pending).count(),
        4,
        "{states:?}"
    );
    assert_eq!(gate.max_inside(), 2);

    gate.open();
    assert_all_succeed(&engine, &ids).await;
    assert!(
        gate.max_inside() <= 2,
        "max concurrent {}",
        gate.max_inside()
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_running_jobs_finish_and_releases_the_buffer() {
    let (_dir, store) = open_store().await;
    let (handlers, gate) = gated_handlers("step");
    let engine = start(store.clone(), handlers, single_worker_config()).await;
    let ids = enqueue_ids(&engine, "default", "step", 3).await;
    gate.wait_arrivals(1).await;
    eventually(|| engine.snapshot().buffered == 2).await;

    let stopping = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.shutdown().await })
    };
    eventually(|| engine.snapshot().buffered == 0 && engine.snapshot().draining).await;
    gate.open();
    let report = stopping.await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert!(report.deregistered);

    let states = states(&store, &ids).await;
    assert_eq!(
        states.iter().filter(|s| **s == JobState::Succeeded).count(),
        1
    );
    assert_eq!(
        states.iter().filter(|s| **s == JobState::Pending).count(),
        2,
        "buffered jobs went back to pending: {states:?}"
    );
    let instances = store
        .list_instances(Duration::from_secs(3600))
        .await
        .unwrap();
    assert!(
        instances.iter().all(|i| i.id != engine.instance_id()),
        "the instance deregistered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_jobs_that_outlive_the_grace_period_and_retries_them() {
    let (_dir, store) = open_store().await;
    let config = EngineConfig {
        shutdown_grace: Duration::from_millis(200),
        ..test_config()
    };
    let (engine, _, id) = start_running_one(&store, config, "stuck", register_hanging).await;

    let report = engine.shutdown().await;
    assert!(
        report.is_clean(),
        "the cancelled attempt was committed: {report:?}"
    );

    let job = store.get_job(id).await.unwrap().unwrap();
    assert_eq!(
        job.state,
        JobState::Pending,
        "interrupted work is retried later"
    );
    assert_eq!(job.errors.last().unwrap().kind, "shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_process_wait_is_woken_without_polling() {
    let (_dir, counting, store) = open_counting_store().await;
    let mut handlers = HandlerRegistry::new();
    register_echo(&mut handlers, "echo");
    // The sweep would only run after an hour: a result can only come from the completer.
    let config = EngineConfig {
        wait_poll_interval: Duration::from_secs(3600),
        ..test_config()
    };
    let engine = start(store, handlers, config).await;

    let job = succeeded_job(run_job(&engine, "default", "echo", "[1,2]").await);
    assert_eq!(job.result.as_deref(), Some("[1,2]"));
    assert_eq!(
        counting.finished_jobs_calls(),
        0,
        "the sweeper never polled"
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_a_job_finished_by_another_process_resolves_via_the_sweep() {
    let (dir, counting, producer_store) = open_counting_store().await;
    let config = EngineConfig {
        wait_poll_interval: Duration::from_millis(20),
        ..producer_config()
    };
    let producer = start(producer_store, HandlerRegistry::new(), config).await;
    // The job may finish only after the producer's wait has looked and found it running:
    // otherwise that first look would answer the wait, and no sweep would be needed.
    let gate = Gate::new();
    let mut handlers = HandlerRegistry::new();
    register_gated(&mut handlers, "greet", &gate, "hi");
    let worker = start(runtime_support::reopen(&dir).await, handlers, test_config()).await;

    let waiting = {
        let producer = producer.clone();
        tokio::spawn(async move { run_job(&producer, "default", "greet", "").await })
    };
    gate.wait_arrivals(1).await;
    counting.jobs_read(1).await;
    gate.open();

    let job = succeeded_job(waiting.await.unwrap());
    assert_eq!(job.result.as_deref(), Some("\"hi\""));
    assert!(counting.finished_jobs_calls() >= 1);
    worker.shutdown().await;
    producer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiters_on_one_job_all_resolve() {
    let (_dir, store) = open_store().await;
    let (engine, gate, id) = start_running_one(&store, test_config(), "slow", |h, key, gate| {
        register_gated(h, key, gate, 42)
    })
    .await;

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut waiting = Vec::new();
    for _ in 0..25 {
        let engine = engine.clone();
        let tx = tx.clone();
        waiting.push(tokio::spawn(async move {
            let fut = engine.wait(id, WAIT);
            tx.send(()).unwrap();
            fut.await.unwrap()
        }));
    }
    for _ in 0..25 {
        rx.recv().await.unwrap();
    }
    gate.open();
    for w in waiting {
        let job = succeeded_job(w.await.unwrap());
        assert_eq!(job.result.as_deref(), Some("42"));
    }
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_answers_finished_unknown_and_still_running_jobs() {
    let (_dir, store) = open_store().await;
    let gate = Gate::new();
    let mut handlers = HandlerRegistry::new();
    handlers.register("quick", |_: JobContext, _: serde_json::Value| async {
        Ok(1)
    });
    register_gated(&mut handlers, "slow", &gate, 2);
    let engine = start(store.clone(), handlers, test_config()).await;

    let (id, first) = engine
        .enqueue_and_wait(EnqueueRequest::new("default", "quick", ""), WAIT)
        .await
        .unwrap();
    assert!(first.is_final());
    let again = engine.wait(id, Duration::ZERO).await.unwrap();
    assert!(
        matches!(again, WaitOutcome::Succeeded { .. }),
        "already finished"
    );

    let unknown = engine.wait(deck_engine::JobId::new(), WAIT).await.unwrap();
    assert_eq!(unknown, WaitOutcome::NotFound);

    let slow = enqueue_id(&engine, "default", "slow").await;
    gate.wait_arrivals(1).await;
    let pending = engine.wait(slow, Duration::from_millis(50)).await.unwrap();
    assert_eq!(
        pending,
        WaitOutcome::Pending {
            state: JobState::Processing
        }
    );
    gate.open();
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn middleware_wraps_every_handler_and_progress_shows_in_the_snapshot() {
    struct Tag;
    #[async_trait::async_trait]
    impl Middleware for Tag {
        async fn call(&self, ctx: JobContext, next: Next<'_>) -> HandlerOutcome {
            let inner = next.run(ctx).await?;
            Ok(Some(format!(
                "{{\"wrapped\":{}}}",
                inner.unwrap_or_else(|| "null".into())
            )))
        }
    }
    let (_dir, store) = open_store().await;
    let gate = Gate::new();
    let mut handlers = HandlerRegistry::new();
    let g = gate.clone();
    handlers
        .register("report", move |ctx: JobContext, _: serde_json::Value| {
            let g = g.clone();
            async move {
                ctx.report_progress(40, "halfway-ish");
                g.arrive();
                g.wait_open().await;
                Ok(true)
            }
        })
        .middleware(Tag);
    let engine = start(store.clone(), handlers, test_config()).await;
    let mut events = engine.subscribe_events();
    let id = enqueue_id(&engine, "default", "report").await;
    gate.wait_arrivals(1).await;

    let snapshot = engine.snapshot();
    let running = snapshot.running.iter().find(|r| r.id == id).unwrap();
    let progress = running.progress.as_ref().unwrap();
    assert_eq!(progress.percent, 40);
    assert_eq!(progress.message, "halfway-ish");

    gate.open();
    let outcome = engine.wait(id, WAIT).await.unwrap();
    assert_eq!(
        outcome.job().unwrap().result.as_deref(),
        Some(r#"{"wrapped":true}"#)
    );
    // `wait` may answer from the store as soon as the completion is committed, a moment
    // before the completer (waiting for the fsync) publishes its event: read up to it. The
    // job may also start before `enqueue` returns, so the feed is ordered by time stamps.
    use deck_engine::EventKind::*;
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|e: &deck_engine::EngineEvent| e.kind == Succeeded)
    {
        let e = tokio::time::timeout(WAIT, events.recv())
            .await
            .expect("the succeeded event arrives")
            .unwrap();
        if e.job_id == Some(id) {
            seen.push(e);
        }
    }
    seen.sort_by_key(|e| e.at);
    let kinds: Vec<_> = seen.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![Enqueued, Started, Progress, Succeeded]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_count_follows_the_persisted_settings() {
    let (dir, store) = open_store().await;
    let engine = start(store.clone(), HandlerRegistry::new(), test_config()).await;
    assert_eq!(
        engine.snapshot().workers_total,
        EngineSettings::default().worker_count
    );
    let other = start(
        runtime_support::reopen(&dir).await,
        HandlerRegistry::new(),
        test_config(),
    )
    .await;

    let mut settings = engine.settings();
    settings.worker_count = 3;
    engine.save_settings(settings).await.unwrap();

    assert_eq!(engine.snapshot().workers_total, 3, "applied here at once");
    // The other instance re-reads settings with its instance heartbeat.
    eventually(|| other.snapshot().workers_total == 3).await;
    other.shutdown().await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_configuration_is_rejected_with_every_problem() {
    let (_dir, store) = open_store().await;
    let mut handlers = HandlerRegistry::new();
    handlers.register("x", |_: JobContext, _: serde_json::Value| async { Ok(()) });
    handlers.register("x", |_: JobContext, _: serde_json::Value| async { Ok(()) });
    let config = EngineConfig {
        poll_interval: Duration::from_millis(50),
        prefetch: 0,
        ..EngineConfig::default()
    };
    let err = Engine::start(store, handlers, config).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("poll_interval: 50ms is below"), "{text}");
    assert!(text.contains("prefetch: 0 is out of range"), "{text}");
    assert!(
        text.contains("\"x\" is registered more than once"),
        "{text}"
    );

    let warned = EngineConfig {
        poll_interval: Duration::from_secs(30),
        ..EngineConfig::default()
    };
    assert_eq!(warned.validate().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rescuer_iteration_returns_stale_claims_to_pending() {
    let (_dir, store) = open_store().await;
    let id = enqueue(&*store, EnqueueRequest::new("default", "t", "")).await;
    assert_eq!(claim(&*store, "gone", 10).await, [id]);
    let rescuer = deck_engine::runtime::Rescuer::new(
        store.clone(),
        deck_engine::runtime::RescuerConfig {
            policy: deck_engine::RescuePolicy {
                fetched_timeout: Duration::ZERO,
                ..deck_engine::RescuePolicy::default()
            },
            ..Default::default()
        },
    );

    let report = rescuer.run_once().await.unwrap();

    assert_eq!(report.released, 1);
    assert_eq!(
        store.get_job(id).await.unwrap().unwrap().state,
        JobState::Pending
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruner_iteration_and_prune_now_use_the_saved_retention() {
    let (_dir, store) = open_store().await;
    let mut handlers = HandlerRegistry::new();
    handlers.register("quick", |_: JobContext, _: serde_json::Value| async {
        Ok(())
    });
    let engine = start(store.clone(), handlers, test_config()).await;
    let id = succeeded_job(run_job(&engine, "default", "quick", "").await).id;
    let pruner = deck_engine::runtime::Pruner::new(
        store.clone(),
        deck_engine::runtime::PrunerConfig::default(),
    );
    assert_eq!(
        pruner.run_once().await.unwrap().archive,
        0,
        "7 days not over"
    );

    // Zero days is below what an operator may save (at least 1), so written straight to
    // the store: the sweep reads it from there.
    let mut settings = engine.settings();
    settings.retention.archive_days = 0;
    store.save_settings(&settings).await.unwrap();
    let report = engine.prune_now().await.unwrap();

    assert_eq!(report.archive, 1);
    assert!(store.get_job(id).await.unwrap().is_none());
    engine.shutdown().await;
}

// ---------------------------------------------------------------------------- benchmarks
//
// Measurements, not tests (speed is never asserted). Run in release:
//   cargo test --release -p deck-engine --test runtime -- --ignored --nocapture bench_
// Tune with DECK_BENCH_JOBS, DECK_BENCH_WORKERS, DECK_BENCH_PREFETCH, DECK_BENCH_RATE.

/// CPU seconds per thread name of this process (Linux), to see where a benchmark spends.
fn cpu_by_thread() -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        let ticks: f64 =
            fields[11].parse::<f64>().unwrap_or(0.0) + fields[12].parse::<f64>().unwrap_or(0.0);
        *out.entry(name).or_insert(0.0) += ticks / 100.0;
    }
    out
}

fn bench_env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn bench_drain_throughput() {
    let jobs = bench_env("DECK_BENCH_JOBS", 100_000);
    let workers = bench_env("DECK_BENCH_WORKERS", 200) as u32;
    let prefetch = bench_env("DECK_BENCH_PREFETCH", 2_000) as u32;
    let (_dir, store) = open_store().await;
    let t = std::time::Instant::now();
    let mut left = jobs;
    while left > 0 {
        let n = left.min(10_000);
        let reqs = (0..n)
            .map(|_| EnqueueRequest::new("bench", "noop", ""))
            .collect();
        store.enqueue_batch(reqs).await.unwrap();
        left -= n;
    }
    let insert_secs = t.elapsed().as_secs_f64();

    let mut handlers = HandlerRegistry::new();
    handlers.register("noop", |_: JobContext, _: serde::de::IgnoredAny| async {
        Ok(())
    });
    let config = EngineConfig {
        worker_count: Some(workers),
        prefetch,
        ..EngineConfig::default()
    };
    let cpu_before = cpu_by_thread();
    let t = std::time::Instant::now();
    let engine = start(store.clone(), handlers, config).await;
    let mut last_report = std::time::Instant::now();
    while engine.counters().succeeded < jobs {
        tokio::time::sleep(Duration::from_millis(2)).await;
        if last_report.elapsed() > Duration::from_secs(5) {
            let s = engine.snapshot();
            eprintln!(
                "busy {} buffered {} running {} counters {:?}",
                s.workers_busy,
                s.buffered,
                s.running.len(),
                s.counters
            );
            last_report = std::time::Instant::now();
        }
    }
    let drain_secs = t.elapsed().as_secs_f64();
    let cpu_after = cpu_by_thread();
    for (name, secs) in &cpu_after {
        let spent = secs - cpu_before.get(name).copied().unwrap_or(0.0);
        if spent > 0.05 {
            eprintln!("cpu {name}: {spent:.2} s");
        }
    }
    let c = engine.snapshot().counters;
    println!(
        "{{\"jobs\":{jobs},\"workers\":{workers},\"prefetch\":{prefetch},\
         \"insert_jobs_per_sec\":{:.0},\"drain_jobs_per_sec\":{:.0},\"claimed\":{},\"not_applied\":{}}}",
        jobs as f64 / insert_secs,
        jobs as f64 / drain_secs,
        c.claimed,
        c.not_applied
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn bench_enqueue_to_start_latency() {
    let jobs = bench_env("DECK_BENCH_JOBS", 5_000) as usize;
    let rate = bench_env("DECK_BENCH_RATE", 1_000);
    let (_dir, store) = open_store().await;
    let base = std::time::Instant::now();
    let samples = Arc::new(std::sync::Mutex::new(Vec::<u64>::with_capacity(jobs)));
    let mut handlers = HandlerRegistry::new();
    let s = samples.clone();
    handlers.register("stamp", move |_: JobContext, sent: u64| {
        let now = base.elapsed().as_nanos() as u64;
        s.lock().unwrap().push(now.saturating_sub(sent));
        async { Ok(()) }
    });
    let engine = start(store.clone(), handlers, EngineConfig::default()).await;
    let mut tick = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for _ in 0..jobs {
        tick.tick().await;
        let sent = base.elapsed().as_nanos() as u64;
        engine
            .enqueue(EnqueueRequest::new("latency", "stamp", sent.to_string()))
            .await
            .unwrap();
    }
    while engine.counters().succeeded < jobs as u64 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut v = samples.lock().unwrap().clone();
    v.sort_unstable();
    let pct = |p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)] as f64 / 1e6;
    println!(
        "{{\"jobs\":{jobs},\"rate\":{rate},\"p50_ms\":{:.3},\"p90_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3}}}",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn bench_store_hot_path_calls() {
    let jobs = bench_env("DECK_BENCH_JOBS", 20_000);
    let batch = bench_env("DECK_BENCH_PREFETCH", 1_000) as u32;
    let (_dir, store) = open_store().await;
    let t = std::time::Instant::now();
    for _ in 0..jobs / 10_000 {
        let reqs = (0..10_000)
            .map(|_| EnqueueRequest::new("bench", "noop", ""))
            .collect();
        store.enqueue_batch(reqs).await.unwrap();
    }
    eprintln!("enqueue_batch {jobs}: {:?}", t.elapsed());
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let claimed = store
            .claim_batch(claim_request("w", batch, None))
            .await
            .unwrap();
        let claim = t.elapsed();
        let ids: Vec<_> = claimed.iter().map(|j| j.id).collect();
        let t = std::time::Instant::now();
        let started = store.mark_processing("w", &ids).await.unwrap();
        let mark = t.elapsed();
        let completions = started
            .iter()
            .map(|id| deck_engine::Completion::Succeeded {
                id: *id,
                result: None,
                duration_ms: 0,
            })
            .collect();
        let t = std::time::Instant::now();
        store.complete("w", completions).await.unwrap();
        eprintln!(
            "claim {} in {claim:?}, mark in {mark:?}, complete in {:?}",
            claimed.len(),
            t.elapsed()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn bench_store_single_job_round_trips() {
    let (_dir, store) = open_store().await;
    let mut times: [Vec<f64>; 4] = Default::default();
    for _ in 0..200 {
        let t = std::time::Instant::now();
        let id = store
            .enqueue(EnqueueRequest::new("bench", "noop", ""))
            .await
            .unwrap()
            .id;
        times[0].push(t.elapsed().as_secs_f64() * 1e3);
        let t = std::time::Instant::now();
        store
            .claim_batch(claim_request("w", 100, None))
            .await
            .unwrap();
        times[1].push(t.elapsed().as_secs_f64() * 1e3);
        let t = std::time::Instant::now();
        store.mark_processing("w", &[id]).await.unwrap();
        times[2].push(t.elapsed().as_secs_f64() * 1e3);
        let t = std::time::Instant::now();
        store
            .complete(
                "w",
                vec![deck_engine::Completion::Succeeded {
                    id,
                    result: None,
                    duration_ms: 0,
                }],
            )
            .await
            .unwrap();
        times[3].push(t.elapsed().as_secs_f64() * 1e3);
    }
    for (name, mut v) in ["enqueue", "claim", "mark", "complete"]
        .into_iter()
        .zip(times)
    {
        v.sort_by(f64::total_cmp);
        eprintln!(
            "{name}: p50 {:.3} ms p90 {:.3} ms",
            v[v.len() / 2],
            v[v.len() * 9 / 10]
        );
    }
}

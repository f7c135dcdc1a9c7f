//! HTTP handlers against a real endpoint on loopback: the envelope and its signature as a
//! receiver sees them, and each kind of answer ending the job the documented way.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use deck_engine::{
    Engine, EngineConfig, EngineSettings, EnqueueRequest, FailureReason, HandlerRegistry, JobState,
    WaitOutcome,
};
use deck_http_handlers::{
    HttpHandlerConfig, ProgressCallback, ProgressTokens, register_with_progress, signature,
};
use support::{run_remote_task, serve_jobs_endpoint, sqlite_store};

const SECRET: &str = "a-test-secret-of-some-length";

/// What the endpoint saw, and what it answers: the payload's `status`, `retry_after` and
/// `body`.
#[derive(Default)]
struct Seen {
    requests: Vec<(HeaderMap, serde_json::Value)>,
    progress: ProgressTokens,
}

async fn receiver(
    State(seen): State<Arc<Mutex<Seen>>>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = chrono::Utc::now().timestamp();
    if signature::verify(
        SECRET.as_bytes(),
        header(signature::TIMESTAMP_HEADER),
        header(signature::SIGNATURE_HEADER),
        &body,
        now,
    )
    .is_err()
    {
        return (
            StatusCode::UNAUTHORIZED,
            HeaderMap::new(),
            "bad signature".to_string(),
        );
    }
    let envelope: serde_json::Value = serde_json::from_slice(&body).unwrap();
    seen.lock()
        .unwrap()
        .requests
        .push((headers.clone(), envelope.clone()));
    let answer = &envelope["payload"];
    if answer["report_progress"].as_bool() == Some(true) {
        // What a receiver does over POST /api/v1/jobs/{id}/progress, straight to the tokens.
        let id = envelope["id"].as_str().unwrap().parse().unwrap();
        let token = envelope["progress"]["token"].as_str().unwrap();
        let accepted = seen
            .lock()
            .unwrap()
            .progress
            .report(id, token, 40, "halfway")
            .is_ok();
        let wrong = seen
            .lock()
            .unwrap()
            .progress
            .report(id, "guess", 41, "x")
            .is_ok();
        let body = serde_json::json!({"accepted": accepted, "wrong_token_accepted": wrong});
        return (StatusCode::OK, HeaderMap::new(), body.to_string());
    }
    let status = StatusCode::from_u16(answer["status"].as_u64().unwrap_or(200) as u16).unwrap();
    let mut out = HeaderMap::new();
    if let Some(r) = answer["retry_after"].as_str() {
        out.insert("retry-after", r.parse().unwrap());
    }
    if answer["hang"].as_bool() == Some(true) {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    (
        status,
        out,
        answer["body"].as_str().unwrap_or("").to_string(),
    )
}

struct Fixture {
    engine: Engine,
    seen: Arc<Mutex<Seen>>,
    _dir: tempfile::TempDir,
}

async fn fixture(timeout: Duration) -> Fixture {
    fixture_with(timeout, EngineConfig::default()).await
}

async fn fixture_with(timeout: Duration, config: EngineConfig) -> Fixture {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let addr = serve_jobs_endpoint(post(receiver), seen.clone()).await;

    let (dir, store) = sqlite_store().await;
    let mut settings = EngineSettings::default();
    settings.retry.max_attempts = 2;
    settings.retry.base_delay_ms = 0;
    settings.retry.jitter_ms = 0;
    store.save_settings(&settings).await.unwrap();
    let mut handlers = HandlerRegistry::new();
    let mut endpoint = HttpHandlerConfig::new(format!("http://{addr}/jobs"), &["remote.*"]);
    endpoint.secret_env = Some("SECRET".into());
    endpoint.timeout = timeout;
    let env = |var: &str| (var == "SECRET").then(|| SECRET.to_string());
    let callback = ProgressCallback {
        tokens: seen.lock().unwrap().progress.clone(),
        base_url: "http://deck.test:8080".into(),
    };
    let warnings =
        register_with_progress(&mut handlers, &[endpoint], &env, Some(callback)).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let engine = Engine::start(store, handlers, config).await.unwrap();
    Fixture {
        engine,
        seen,
        _dir: dir,
    }
}

async fn run(f: &Fixture, payload: serde_json::Value) -> WaitOutcome {
    run_remote_task(&f.engine, payload.to_string()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2xx_answer_succeeds_with_its_json_body_as_the_result() {
    let f = fixture(Duration::from_secs(10)).await;
    let outcome = run(
        &f,
        serde_json::json!({"status": 200, "body": "{\"sent\":1}"}),
    )
    .await;
    let WaitOutcome::Succeeded { job } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(job.result.as_deref(), Some("{\"sent\":1}"));
    let (headers, envelope) = f.seen.lock().unwrap().requests[0].clone();
    assert_eq!(envelope["id"], job.id.to_string());
    assert_eq!(envelope["type"], "remote.task");
    assert_eq!(envelope["queue"], "default");
    assert_eq!(
        (
            envelope["attempt"].as_u64(),
            envelope["max_attempts"].as_u64()
        ),
        (Some(1), Some(2))
    );
    assert_eq!(envelope["payload"]["status"], 200);
    assert!(envelope["deadline"].as_str().is_some());
    assert_eq!(headers["deck-job-id"], job.id.to_string().as_str());
    assert_eq!(headers["deck-attempt"], "1");
    f.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried_then_dead_and_client_errors_are_fatal_at_once() {
    let f = fixture(Duration::from_secs(10)).await;
    let outcome = run(&f, serde_json::json!({"status": 500, "body": "db down"})).await;
    let WaitOutcome::Dead { job } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(job.attempt, 2, "retried once");
    assert_eq!(job.state, JobState::Dead(FailureReason::Failed));
    assert!(
        job.errors[0].message.contains("HTTP 500"),
        "{:?}",
        job.errors
    );
    assert!(
        job.errors[0].message.ends_with(": db down"),
        "{:?}",
        job.errors
    );

    let outcome = run(
        &f,
        serde_json::json!({"status": 422, "body": "no such mailbox"}),
    )
    .await;
    let WaitOutcome::Dead { job } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        (job.attempt, job.state),
        (1, JobState::Dead(FailureReason::Fatal))
    );
    assert!(
        job.errors[0].message.contains("HTTP 422"),
        "{:?}",
        job.errors
    );
    f.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_with_retry_after_is_retried_no_earlier_than_it_says_without_spending_an_attempt() {
    let f = fixture(Duration::from_secs(10)).await;
    let mut req = EnqueueRequest::new(
        "default",
        "remote.task",
        serde_json::json!({"status": 429, "retry_after": "3600"}).to_string(),
    );
    // One attempt only: were the throttle to spend it, the job would be dead now.
    req.max_attempts = Some(1);
    let id = f.engine.enqueue(req).await.unwrap().id;
    let store = f.engine.store().clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let job = loop {
        let job = store.get_job(id).await.unwrap().unwrap();
        if job.state == JobState::Pending && job.attempt == 1 {
            break job;
        }
        assert!(tokio::time::Instant::now() < deadline, "{job:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let wait = job.scheduled_at - chrono::Utc::now();
    assert!(wait > chrono::Duration::minutes(59), "due in {wait}");
    assert_eq!(job.errors[0].kind, "throttled");
    f.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_within_the_timeout_is_a_transient_failure() {
    let f = fixture(Duration::from_millis(300)).await;
    let outcome = run(&f, serde_json::json!({"hang": true})).await;
    let WaitOutcome::Dead { job } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(job.attempt, 2);
    assert!(
        job.errors[0].message.contains("no answer"),
        "{:?}",
        job.errors
    );
    f.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_progress_token_works_while_the_request_is_in_flight_and_never_after() {
    let f = fixture(Duration::from_secs(10)).await;
    let outcome = run(&f, serde_json::json!({"report_progress": true})).await;
    let WaitOutcome::Succeeded { job } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        job.result.as_deref(),
        Some("{\"accepted\":true,\"wrong_token_accepted\":false}")
    );
    let (_, envelope) = f.seen.lock().unwrap().requests[0].clone();
    assert_eq!(
        envelope["progress"]["url"],
        format!("http://deck.test:8080/api/v1/jobs/{}/progress", job.id)
    );
    let token = envelope["progress"]["token"].as_str().unwrap().to_string();
    let tokens = f.seen.lock().unwrap().progress.clone();
    assert!(
        tokens.report(job.id, &token, 90, "late").is_err(),
        "the token died with its attempt"
    );
    f.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_keeps_failing_opens_one_circuit_for_all_its_types() {
    let mut config = EngineConfig::default();
    config.breaker.failure_threshold = 2;
    config.breaker.open_for = Duration::from_secs(3600);
    config.breaker.defer = Duration::from_secs(3600);
    let f = fixture_with(Duration::from_secs(10), config).await;
    // The breaker records an outcome after it committed, so a waiter may see the job dead
    // first: its opening is announced, and that is what this waits for.
    let mut events = f.engine.subscribe_events();
    let failing = serde_json::json!({"status": 500});
    // Two types, one endpoint: one failure each opens the endpoint's circuit.
    for job_type in ["remote.a", "remote.b"] {
        let mut req = EnqueueRequest::new("default", job_type, failing.to_string());
        req.max_attempts = Some(1);
        let (_, outcome) = f
            .engine
            .enqueue_and_wait(req, Duration::from_secs(30))
            .await
            .unwrap();
        assert!(matches!(outcome, WaitOutcome::Dead { .. }), "{outcome:?}");
    }
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let e = events.recv().await.unwrap();
            if e.kind == deck_engine::EventKind::Breaker && e.message.contains("opened") {
                return;
            }
        }
    })
    .await
    .expect("the endpoint's circuit opened");
    let snapshot = f.engine.snapshot();
    let url = f.seen.lock().unwrap().requests[0].0["host"]
        .to_str()
        .unwrap()
        .to_string();
    let breaker = snapshot
        .breakers
        .iter()
        .find(|b| b.job_type.contains(&url))
        .unwrap_or_else(|| panic!("{:?}", snapshot.breakers));
    assert_eq!(breaker.state, deck_engine::BreakerStateName::Open);
    assert!(
        !snapshot
            .breakers
            .iter()
            .any(|b| b.job_type.starts_with("remote.")),
        "no per-type circuits: {:?}",
        snapshot.breakers
    );

    // A third type on the same endpoint is deferred, not sent, no attempt spent.
    let id = f
        .engine
        .enqueue(EnqueueRequest::new("default", "remote.c", "{}"))
        .await
        .unwrap()
        .id;
    let store = f.engine.store().clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let job = store.get_job(id).await.unwrap().unwrap();
        if job.state == JobState::Pending
            && job.scheduled_at > chrono::Utc::now() + chrono::Duration::minutes(30)
        {
            assert_eq!(job.attempt, 0, "deferred without spending an attempt");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{job:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        f.seen.lock().unwrap().requests.len(),
        2,
        "the third job was never sent"
    );
    f.engine.shutdown().await;
}

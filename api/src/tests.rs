//! The API driven through the real router (`tower::ServiceExt::oneshot`) over a real engine
//! on a temporary SQLite file. Handlers that must stay running are held by a semaphore the
//! test releases; nothing here sleeps to synchronise.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use axum::middleware::{self, Next};
use deck_engine::{
    Engine, EngineConfig, EventKind, HandlerError, HandlerRegistry, JobContext, JobId, StoreOptions,
};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::{Mutex, Semaphore, mpsc};
use tower::ServiceExt;

use super::principal::{Principal, Role};

mod batches;
mod bulk;
mod document;
mod operator_reads;
mod schedules;
mod workers;
use super::{ApiState, Authenticator, api_router as router};

struct Harness {
    engine: Engine,
    router: Router,
    /// Ids of `gated` jobs whose handler started.
    started: Mutex<mpsc::UnboundedReceiver<JobId>>,
    /// One permit lets one `gated` handler finish.
    release: Arc<Semaphore>,
    _dir: tempfile::TempDir,
}

async fn harness() -> Harness {
    harness_with(|engine| router(ApiState::open(engine))).await
}

/// A [`harness`] whose `queue` is paused, so that what a test enqueues there stays pending.
async fn harness_holding(queue: &str) -> Harness {
    let h = harness().await;
    h.hold(queue).await;
    h
}

async fn harness_with(make: impl FnOnce(Engine) -> Router) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deck.db");
    let store = deck_engine::store::sqlite::open(path.to_str().unwrap(), &StoreOptions::default())
        .await
        .unwrap();
    let (started_tx, started) = mpsc::unbounded_channel();
    let release = Arc::new(Semaphore::new(0));
    let mut handlers = HandlerRegistry::new();
    handlers.register("echo", |_ctx: JobContext, payload: Value| async move {
        Ok::<_, HandlerError>(payload)
    });
    handlers.register("fail", |_ctx: JobContext, _payload: Value| async move {
        Err::<Value, _>(HandlerError::fatal("this job always fails"))
    });
    let gate = release.clone();
    handlers.register("gated", move |ctx: JobContext, payload: Value| {
        let started_tx = started_tx.clone();
        let gate = gate.clone();
        async move {
            // `{"progress": n}`: report n percent before waiting, as a long job would.
            if let Some(p) = payload.get("progress").and_then(Value::as_u64) {
                ctx.report_progress(u8::try_from(p).unwrap_or(100), "working");
            }
            let _ = started_tx.send(ctx.id());
            let token = ctx.cancellation();
            tokio::select! {
                permit = gate.acquire() => {
                    permit.map_err(HandlerError::fatal)?.forget();
                    Ok(json!({"released": payload}))
                }
                () = token.cancelled() => Err(HandlerError::fatal("cancelled")),
            }
        }
    });
    let config = EngineConfig {
        worker_count: Some(4),
        shutdown_grace: Duration::from_secs(1),
        ..EngineConfig::default()
    };
    let engine = Engine::start(store, handlers, config).await.unwrap();
    Harness {
        router: make(engine.clone()),
        engine,
        started: Mutex::new(started),
        release,
        _dir: dir,
    }
}

struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Value,
}

impl Reply {
    fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    fn field(&self) -> &str {
        self.body["error"]["field"].as_str().unwrap_or("")
    }
}

impl Harness {
    async fn send(&self, req: Request<Body>) -> Reply {
        send(&self.router, req).await
    }

    async fn call(&self, method: Method, uri: &str, body: Option<Value>) -> Reply {
        self.send(request(method, uri, body)).await
    }

    async fn get(&self, uri: &str) -> Reply {
        self.call(Method::GET, uri, None).await
    }

    async fn post(&self, uri: &str, body: Value) -> Reply {
        self.call(Method::POST, uri, Some(body)).await
    }

    /// Pause `queue`.
    async fn hold(&self, queue: &str) {
        let r = self
            .post(&format!("/api/v1/queues/{queue}/pause"), json!(null))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    }

    /// POST the operator action `action` (`cancel`, `resurrect`) on job `id`.
    async fn act_on(&self, id: impl std::fmt::Display, action: &str, body: Value) -> Reply {
        self.post(&format!("/api/v1/jobs/{id}/{action}"), body)
            .await
    }

    /// `action` on a job nobody enqueued: 404 `job_not_found`.
    async fn assert_unknown_job(&self, action: &str) {
        let r = self.act_on(JobId::new(), action, json!(null)).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::NOT_FOUND, "job_not_found"),
            "{action}"
        );
    }

    async fn next_started(&self) -> JobId {
        self.started.lock().await.recv().await.unwrap()
    }

    async fn enqueue(&self, body: Value) -> String {
        let r = self.post("/api/v1/jobs", body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.body["id"].as_str().unwrap().to_string()
    }

    /// What `/api/v1/stats` would show, read from the store now: the endpoint itself serves
    /// a snapshot up to one tick old.
    async fn counts(&self) -> Value {
        let summary = self.engine.store().summary().await.unwrap();
        serde_json::to_value(super::dto::Stats::from(&summary)).unwrap()
    }

    async fn nothing_written(&self) {
        let stats = self.counts().await;
        for key in [
            "pending",
            "scheduled",
            "fetched",
            "processing",
            "succeeded",
            "dlq",
        ] {
            assert_eq!(stats[key], 0, "{key} in {stats}");
        }
    }

    async fn audit_actions(&self) -> Vec<(String, String, String)> {
        let entries = self
            .engine
            .store()
            .list_audit(&Default::default(), None, 100)
            .await
            .unwrap();
        entries
            .into_iter()
            .map(|e| (e.actor, e.action, e.target))
            .collect()
    }

    async fn finish(self) {
        self.release.add_permits(100);
        self.engine.shutdown().await;
    }
}

/// A schedule of `echo` jobs into queue `q`, every other field at the default a declaration
/// gets when it leaves it out (UTC, no payload, run once, overlap allowed).
fn echo_schedule(name: &str, spec: deck_engine::ScheduleSpec) -> deck_engine::ScheduleDefinition {
    let declared = json!({"name": name, "spec": spec, "job": {"queue": "q", "job_type": "echo"}});
    serde_json::from_value(declared).unwrap()
}

fn request(method: Method, uri: &str, body: Option<Value>) -> Request<Body> {
    let builder = Request::builder().method(method).uri(uri);
    match body {
        Some(b) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(b.to_string()))
            .unwrap(),
        None => builder.body(Body::empty()).unwrap(),
    }
}

fn raw(
    method: Method,
    uri: &str,
    content_type: Option<&str>,
    body: impl Into<Body>,
) -> Request<Body> {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(ct) = content_type {
        b = b.header(header::CONTENT_TYPE, ct);
    }
    b.body(body.into()).unwrap()
}

async fn send(router: &Router, req: Request<Body>) -> Reply {
    let response = router.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("non-JSON body ({e}): {}", String::from_utf8_lossy(&bytes)))
    };
    Reply {
        status,
        headers,
        body,
    }
}

// ---------------------------------------------------------------------------------- enqueue

#[tokio::test]
async fn enqueue_is_idempotent_over_http() {
    let h = harness().await;
    let job = json!({"queue": "paused-q", "type": "echo", "payload": {"n": 1}, "idempotency_key": "order-42"});
    h.hold("paused-q").await;
    let first = h.post("/api/v1/jobs", job.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert_eq!(first.body["created"], true);
    let second = h.post("/api/v1/jobs", job).await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.body["created"], false);
    assert_eq!(second.body["id"], first.body["id"]);
    assert_eq!(h.counts().await["pending"], 1);
    h.finish().await;
}

#[tokio::test]
async fn a_uniqueness_window_answers_with_the_finished_job_over_http() {
    let h = harness().await;
    let job = json!({
        "queue": "e", "type": "echo", "payload": {"invoice": 42},
        "idempotency_key": "invoice-42", "unique_for_ms": 3_600_000, "unique_states": ["succeeded"]
    });
    let first = h.post("/api/v1/jobs?wait=30s", job.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert_eq!(first.body["job"]["state"], "succeeded");
    // The producer retries after the job finished: same id, nothing new.
    let again = h.post("/api/v1/jobs", job).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["created"], false);
    assert_eq!(again.body["id"], first.body["id"]);
    assert_eq!(h.counts().await["succeeded"], 1);

    let no_key = h
        .post(
            "/api/v1/jobs",
            json!({"queue": "e", "type": "echo", "unique_for_ms": 1000}),
        )
        .await;
    assert_eq!(no_key.status, StatusCode::BAD_REQUEST);
    assert_eq!(no_key.field(), "unique_for_ms");
    let bad_state = h
        .post(
            "/api/v1/jobs",
            json!({"queue": "e", "type": "echo", "idempotency_key": "k", "unique_for_ms": 1000, "unique_states": ["done"]}),
        )
        .await;
    assert_eq!(
        bad_state.status,
        StatusCode::BAD_REQUEST,
        "{}",
        bad_state.body
    );
    h.finish().await;
}

#[tokio::test]
async fn enqueue_takes_every_option() {
    let h = harness_holding("slow").await;
    let id = h
        .enqueue(json!({
            "queue": "slow", "type": "echo", "payload": {"deep": [1, {"x": null}]},
            "tags": ["a", "b"], "priority": 7, "delay_ms": 60000,
            "correlation_id": "corr-1", "created_by": "billing",
            "expires_at": "2099-01-01T00:00:00Z", "max_attempts": 5,
            "continuation": {"queue": "after", "type": "echo", "trigger": "always"}
        }))
        .await;
    let job = h.get(&format!("/api/v1/jobs/{id}")).await;
    assert_eq!(job.status, StatusCode::OK);
    let j = job.body;
    assert_eq!(j["state"], "pending");
    assert_eq!(j["pillar"], "active");
    assert_eq!(j["finished"], false);
    assert_eq!(j["payload"], json!({"deep": [1, {"x": null}]}));
    assert_eq!(j["tags"], json!(["a", "b"]));
    assert_eq!(j["priority"], 7);
    assert_eq!(j["correlation_id"], "corr-1");
    assert_eq!(j["created_by"], "billing");
    assert_eq!(j["max_attempts"], 5);
    assert_eq!(
        j["continuation"],
        json!({"queue": "after", "type": "echo", "trigger": "always"})
    );
    assert!(j["scheduled_at"].as_str().unwrap() > j["created_at"].as_str().unwrap());
    assert!(j["expires_at"].as_str().unwrap().starts_with("2099-01-01"));
    assert_eq!(h.counts().await["scheduled"], 1);
    h.finish().await;
}

#[tokio::test]
async fn created_by_defaults_to_the_caller() {
    let h = harness_holding("q").await;
    let id = h.enqueue(json!({"queue": "q", "type": "echo"})).await;
    let j = h.get(&format!("/api/v1/jobs/{id}")).await.body;
    assert_eq!(j["created_by"], "anonymous");
    assert_eq!(j["payload"], Value::Null);
    h.finish().await;
}

#[tokio::test]
async fn bad_input_is_rejected_and_nothing_is_written() {
    let h = harness().await;
    let cases: Vec<(Request<Body>, StatusCode, &str, &str)> = vec![
        (
            raw(
                Method::POST,
                "/api/v1/jobs",
                Some("application/json"),
                r#"{"queue": "q", "type": "#,
            ),
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "",
        ),
        (
            request(
                Method::POST,
                "/api/v1/jobs",
                Some(json!({"queue": "q", "type": "t", "colour": "red"})),
            ),
            StatusCode::BAD_REQUEST,
            "unknown_field",
            "colour",
        ),
        (
            request(Method::POST, "/api/v1/jobs", Some(json!({"queue": "q"}))),
            StatusCode::BAD_REQUEST,
            "missing_field",
            "type",
        ),
        (
            request(
                Method::POST,
                "/api/v1/jobs",
                Some(json!({"queue": "q", "type": "t", "priority": "high"})),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_value",
            "priority",
        ),
        (
            request(
                Method::POST,
                "/api/v1/jobs",
                Some(json!({"queue": "", "type": "t"})),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_field",
            "queue",
        ),
        (
            request(
                Method::POST,
                "/api/v1/jobs",
                Some(json!({"queue": "q", "type": "t", "tags": ["a,b"]})),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_field",
            "tags[0]",
        ),
        (
            request(
                Method::POST,
                "/api/v1/jobs",
                Some(
                    json!({"queue": "q", "type": "t", "delay_ms": 5, "scheduled_at": "2030-01-01T00:00:00Z"}),
                ),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_field",
            "delay_ms",
        ),
        (
            // A payload over 1 MiB inside a body the route still accepts.
            request(
                Method::POST,
                "/api/v1/jobs",
                Some(json!({"queue": "q", "type": "t", "payload": "x".repeat(1024 * 1024 + 10)})),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_field",
            "payload",
        ),
        (
            raw(
                Method::POST,
                "/api/v1/jobs",
                Some("application/json"),
                format!(
                    r#"{{"queue":"q","type":"t","payload":"{}"}}"#,
                    "x".repeat(2 * 1024 * 1024)
                ),
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "",
        ),
        (
            raw(
                Method::POST,
                "/api/v1/jobs",
                Some("application/x-www-form-urlencoded"),
                "queue=q&type=t",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "",
        ),
        (
            raw(Method::POST, "/api/v1/jobs", None, ""),
            StatusCode::BAD_REQUEST,
            "missing_body",
            "",
        ),
        (
            request(
                Method::POST,
                "/api/v1/jobs?wait=soon",
                Some(json!({"queue": "q", "type": "t"})),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_wait",
            "wait",
        ),
    ];
    for (req, status, code, field) in cases {
        let uri = req.uri().clone();
        let r = h.send(req).await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (status, code, field),
            "{uri}: {}",
            r.body
        );
        assert!(!r.body["error"]["message"].as_str().unwrap().is_empty());
    }
    h.nothing_written().await;
    assert!(
        h.get("/api/v1/queues").await.body["queues"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    h.finish().await;
}

#[tokio::test]
async fn batch_is_all_or_nothing() {
    let h = harness_holding("b").await;
    let bad = json!({"jobs": [
        {"queue": "b", "type": "echo"},
        {"queue": "b", "type": "echo", "tags": [""]},
        {"queue": "b", "type": "echo"},
    ]});
    let r = h.post("/api/v1/jobs/batch", bad).await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (StatusCode::BAD_REQUEST, "invalid_field", "jobs[1].tags[0]"),
        "{}",
        r.body
    );
    let r = h
        .post("/api/v1/jobs/batch", json!({"jobs": [{"queue": "b", "type": "echo"}, {"queue": "b", "type": "echo", "oops": 1}]}))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (StatusCode::BAD_REQUEST, "unknown_field", "jobs[1].oops")
    );
    let r = h.post("/api/v1/jobs/batch", json!({"jobs": []})).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "empty_batch")
    );
    h.nothing_written().await;

    let good = json!({"jobs": [
        {"queue": "b", "type": "echo", "idempotency_key": "k1"},
        {"queue": "b", "type": "echo", "idempotency_key": "k2"},
        {"queue": "b", "type": "echo"},
    ]});
    let r = h.post("/api/v1/jobs/batch", good).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let jobs = r.body["jobs"].as_array().unwrap().clone();
    assert_eq!(jobs.len(), 3);
    assert!(jobs.iter().all(|j| j["created"] == true));
    let again = json!({"jobs": [
        {"queue": "b", "type": "echo", "idempotency_key": "k1"},
        {"queue": "b", "type": "echo", "idempotency_key": "k2"},
    ]});
    let r = h.post("/api/v1/jobs/batch", again).await;
    assert_eq!(r.status, StatusCode::OK, "all duplicates: {}", r.body);
    assert_eq!(r.body["jobs"][0]["id"], jobs[0]["id"]);
    assert_eq!(r.body["jobs"][1]["id"], jobs[1]["id"]);
    assert_eq!(h.counts().await["pending"], 3);
    h.finish().await;
}

// ---------------------------------------------------------------------------------- read + wait

#[tokio::test]
async fn unknown_and_malformed_job_ids() {
    let h = harness().await;
    let r = h.get(&format!("/api/v1/jobs/{}", JobId::new())).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "job_not_found")
    );
    let r = h
        .get(&format!("/api/v1/jobs/{}?wait=1s", JobId::new()))
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "job_not_found")
    );
    let r = h.get("/api/v1/jobs/not-a-uuid").await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (StatusCode::BAD_REQUEST, "invalid_id", "id")
    );
    h.finish().await;
}

#[tokio::test]
async fn wait_resolves_when_the_job_finishes() {
    let h = harness().await;
    let id = h
        .enqueue(json!({"queue": "w", "type": "gated", "payload": {"n": 5}}))
        .await;
    let started = h.next_started().await;
    assert_eq!(started.to_string(), id);
    let router = h.router.clone();
    let uri = format!("/api/v1/jobs/{id}?wait=30s");
    let waiting =
        tokio::spawn(async move { send(&router, request(Method::GET, &uri, None)).await });
    h.release.add_permits(1);
    let r = waiting.await.unwrap();
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["state"], "succeeded");
    assert_eq!(r.body["pillar"], "archive");
    assert_eq!(r.body["timed_out"], false);
    assert_eq!(r.body["result"], json!({"released": {"n": 5}}));
    h.finish().await;
}

#[tokio::test]
async fn wait_times_out_with_the_current_state() {
    let h = harness().await;
    let id = h.enqueue(json!({"queue": "w", "type": "gated"})).await;
    h.next_started().await;
    let r = h.get(&format!("/api/v1/jobs/{id}?wait=200ms")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["state"], "processing");
    assert_eq!(r.body["finished"], false);
    assert_eq!(r.body["timed_out"], true);
    assert_eq!(r.body["result"], Value::Null);
    h.finish().await;
}

#[tokio::test]
async fn enqueue_and_wait_in_one_request() {
    let h = harness().await;
    let r = h
        .post(
            "/api/v1/jobs?wait=30s",
            json!({"queue": "e", "type": "echo", "payload": {"hello": "world"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["job"]["state"], "succeeded");
    assert_eq!(r.body["job"]["result"], json!({"hello": "world"}));
    assert_eq!(r.body["job"]["id"], r.body["id"]);

    let r = h
        .post(
            "/api/v1/jobs?wait=30s",
            json!({"queue": "e", "type": "fail"}),
        )
        .await;
    assert_eq!(r.body["job"]["state"], "dead");
    assert_eq!(r.body["job"]["reason"], "Fatal");
    assert_eq!(r.body["job"]["pillar"], "dlq");
    assert!(
        r.body["job"]["error"]
            .as_str()
            .unwrap()
            .contains("always fails")
    );
    h.finish().await;
}

// ---------------------------------------------------------------------------------- operator actions

#[tokio::test]
async fn cancel_pending_running_finished_and_unknown() {
    let h = harness_holding("held").await;
    let pending = h.enqueue(json!({"queue": "held", "type": "echo"})).await;
    let r = h.act_on(&pending, "cancel", json!(null)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["outcome"], "cancelled");
    let j = h.get(&format!("/api/v1/jobs/{pending}")).await.body;
    assert_eq!(
        (j["state"].as_str(), j["reason"].as_str()),
        (Some("dead"), Some("Cancelled"))
    );

    let r = h.act_on(&pending, "cancel", json!(null)).await;
    assert_eq!((r.status, r.code()), (StatusCode::CONFLICT, "job_finished"));
    h.assert_unknown_job("cancel").await;

    let running = h.enqueue(json!({"queue": "run", "type": "gated"})).await;
    h.next_started().await;
    let r = h.act_on(&running, "cancel", json!(null)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(r.body["outcome"], "requested");
    let done = h
        .get(&format!("/api/v1/jobs/{running}?wait=30s"))
        .await
        .body;
    assert_eq!(done["state"], "dead", "{done}");

    let audit = h.audit_actions().await;
    assert!(audit.contains(&("anonymous".into(), "job.cancel".into(), pending.clone())));
    assert!(audit.contains(&("anonymous".into(), "job.cancel".into(), running.clone())));
    h.finish().await;
}

#[tokio::test]
async fn resurrect_with_edits() {
    let h = harness_holding("held").await;
    let id = h
        .enqueue(json!({"queue": "held", "type": "echo", "payload": {"v": 1}}))
        .await;
    let r = h.act_on(&id, "resurrect", json!(null)).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "job_not_dead"),
        "{}",
        r.body
    );
    h.act_on(&id, "cancel", json!(null)).await;

    let mut events = h.engine.subscribe_events();
    let r = h
        .act_on(&id, "resurrect", json!({"payload": {"v": 2}, "colour": 1}))
        .await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (StatusCode::BAD_REQUEST, "unknown_field", "colour")
    );
    let r = h.act_on(&id, "resurrect", json!({"tags": [" x"]})).await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (StatusCode::BAD_REQUEST, "invalid_field", "tags[0]")
    );
    assert_eq!(
        h.get(&format!("/api/v1/jobs/{id}")).await.body["state"],
        "dead",
        "bad edits changed nothing"
    );

    let r = h
        .act_on(
            &id,
            "resurrect",
            json!({"payload": {"v": 2}, "tags": ["fixed"], "priority": 3}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["state"], "pending");
    assert_eq!(r.body["payload"], json!({"v": 2}));
    assert_eq!(r.body["original_payload"], json!({"v": 1}));
    assert_eq!(r.body["tags"], json!(["fixed"]));
    assert_eq!(r.body["priority"], 3);
    let mut reported = false;
    while let Ok(e) = events.try_recv() {
        reported |= e.kind == EventKind::OperatorAction
            && e.job_id.map(|j| j.to_string()) == Some(id.clone());
    }
    assert!(reported, "the resurrect shows in the live event feed");

    // Without a body it resurrects as is.
    h.act_on(&id, "cancel", json!(null)).await;
    let r = h
        .send(raw(
            Method::POST,
            &format!("/api/v1/jobs/{id}/resurrect"),
            None,
            "",
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["payload"], json!({"v": 2}));

    h.assert_unknown_job("resurrect").await;
    let audit = h.audit_actions().await;
    let count = |action: &str| {
        audit
            .iter()
            .filter(|(_, a, t)| a == action && *t == id)
            .count()
    };
    // Named as the console names them: one door for both. The first resurrect, refused (the
    // job was not dead), is audited too, with count 0, as every refused action is.
    assert_eq!(count("job.edit_resurrect"), 1, "{audit:?}");
    assert_eq!(count("job.resurrect"), 2, "{audit:?}");
    h.finish().await;
}

#[tokio::test]
async fn queues_list_pause_resume_and_patch() {
    let h = harness().await;
    let r = h.post("/api/v1/queues/mail/pause", json!(null)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["paused"], true);
    h.enqueue(json!({"queue": "mail", "type": "echo"})).await;
    let listed_mail = || async {
        let list = h.get("/api/v1/queues").await;
        assert_eq!(list.status, StatusCode::OK);
        let queues = list.body["queues"].as_array().unwrap().clone();
        queues.into_iter().find(|q| q["name"] == "mail").unwrap()
    };
    let patch_mail = |body: Value| h.call(Method::PATCH, "/api/v1/queues/mail", Some(body));
    let mail = listed_mail().await;
    assert_eq!(mail["paused"], true);
    assert_eq!(mail["pending"], 1);

    let r = patch_mail(json!({"max_workers": 3, "lag_warn_secs": 10})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        (
            r.body["max_workers"].clone(),
            r.body["lag_warn_secs"].clone()
        ),
        (json!(3), json!(10))
    );
    let r = patch_mail(json!({"max_workers": null})).await;
    assert_eq!(
        r.body["max_workers"],
        Value::Null,
        "null clears the override"
    );
    assert_eq!(r.body["lag_warn_secs"], 10, "absent fields stay");

    let r = patch_mail(json!({"rate_limit": {"starts": 100, "per_secs": 60}})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["rate_limit"], json!({"starts": 100, "per_secs": 60}));
    let mail = listed_mail().await;
    assert_eq!(mail["rate_limit"]["starts"], 100, "{mail}");
    assert_eq!(
        mail["rate_limited_until"],
        Value::Null,
        "nothing started yet"
    );
    let r = patch_mail(json!({"rate_limit": null})).await;
    assert_eq!(r.body["rate_limit"], Value::Null, "null lifts the limit");

    for (body, code, field) in [
        (json!({"max_workers": 0}), "invalid_field", "max_workers"),
        (
            json!({"rate_limit": {"starts": 0, "per_secs": 60}}),
            "invalid_field",
            "rate_limit.starts",
        ),
        (
            json!({"rate_limit": {"starts": 5, "per_secs": 86401}}),
            "invalid_field",
            "rate_limit.per_secs",
        ),
        (json!({"max_wrkers": 2}), "unknown_field", "max_wrkers"),
        (json!({"max_workers": -1}), "invalid_value", "max_workers"),
        (json!({}), "empty_patch", ""),
    ] {
        let r = patch_mail(body.clone()).await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (StatusCode::BAD_REQUEST, code, field),
            "{body}"
        );
    }
    let r = h.post("/api/v1/queues/%20mail/pause", json!(null)).await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (StatusCode::BAD_REQUEST, "invalid_field", "name")
    );

    let r = h.post("/api/v1/queues/mail/resume", json!(null)).await;
    assert_eq!(r.body["paused"], false);
    let done = h.get("/api/v1/queues").await.body;
    assert_eq!(
        done["queues"].as_array().unwrap().len(),
        1,
        "invalid names created nothing: {done}"
    );

    let actions: Vec<String> = h
        .audit_actions()
        .await
        .into_iter()
        .map(|(_, a, _)| a)
        .collect();
    for a in ["queue.pause", "queue.update", "queue.resume"] {
        assert!(actions.iter().any(|x| x == a), "{a} in {actions:?}");
    }
    h.finish().await;
}

#[tokio::test]
async fn stats_count_jobs() {
    let h = harness().await;
    h.post(
        "/api/v1/jobs?wait=30s",
        json!({"queue": "s", "type": "echo"}),
    )
    .await;
    h.post(
        "/api/v1/jobs?wait=30s",
        json!({"queue": "s", "type": "fail"}),
    )
    .await;
    let r = h.get("/api/v1/stats").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["succeeded"], 1);
    assert_eq!(r.body["dlq"], 1);
    assert!(r.body["failure_rate_5m"].as_f64().is_some());
    h.finish().await;
}

// ---------------------------------------------------------------------------------- routing, auth

#[tokio::test]
async fn unknown_routes_and_methods_answer_in_json() {
    let h = harness().await;
    let r = h.get("/api/v1/nope").await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "no_such_route")
    );
    let r = h.call(Method::DELETE, "/api/v1/stats", None).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
    assert!(r.headers.contains_key(header::ALLOW));
    h.finish().await;
}

fn as_user(router: Router, name: &'static str, role: Role) -> Router {
    router.layer(middleware::from_fn(
        move |mut req: Request<Body>, next: Next| async move {
            req.extensions_mut().insert(Principal {
                name: name.to_string(),
                role,
            });
            next.run(req).await
        },
    ))
}

#[tokio::test]
async fn viewers_read_but_cannot_act() {
    let h =
        harness_with(|e| as_user(router(ApiState::new(e, nobody())), "vic", Role::Viewer)).await;
    assert_eq!(h.get("/api/v1/stats").await.status, StatusCode::OK);
    assert_eq!(h.get("/api/v1/queues").await.status, StatusCode::OK);
    let id = JobId::new();
    for (method, uri, body) in [
        (
            Method::POST,
            "/api/v1/jobs".to_string(),
            Some(json!({"queue": "q", "type": "t"})),
        ),
        (
            Method::POST,
            "/api/v1/jobs/batch".to_string(),
            Some(json!({"jobs": [{"queue": "q", "type": "t"}]})),
        ),
        (Method::POST, format!("/api/v1/jobs/{id}/cancel"), None),
        (Method::POST, format!("/api/v1/jobs/{id}/resurrect"), None),
        (Method::POST, "/api/v1/queues/q/pause".to_string(), None),
        (Method::POST, "/api/v1/queues/q/resume".to_string(), None),
        (
            Method::PATCH,
            "/api/v1/queues/q".to_string(),
            Some(json!({"paused": true})),
        ),
    ] {
        let r = h.call(method.clone(), &uri, body).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{method} {uri}"
        );
    }
    h.nothing_written().await;
    assert!(h.audit_actions().await.is_empty());
    h.finish().await;
}

#[tokio::test]
async fn operators_act_under_their_name() {
    let h =
        harness_with(|e| as_user(router(ApiState::new(e, nobody())), "olga", Role::Operator)).await;
    let r = h.post("/api/v1/queues/q/pause", json!(null)).await;
    assert_eq!(r.status, StatusCode::OK);
    let id = h.enqueue(json!({"queue": "q", "type": "echo"})).await;
    assert_eq!(
        h.get(&format!("/api/v1/jobs/{id}")).await.body["created_by"],
        "olga"
    );
    assert_eq!(
        h.audit_actions().await,
        vec![("olga".into(), "queue.pause".into(), "q".into())]
    );
    h.finish().await;
}

fn nobody() -> Authenticator {
    Arc::new(|_| None)
}

/// Two users: a bearer token for the operator, basic credentials for the viewer.
fn two_users() -> Authenticator {
    Arc::new(|header: Option<&str>| match header? {
        "Bearer operator-token-0123456789" => Some(Principal {
            name: "olga".into(),
            role: Role::Operator,
        }),
        // "vic:secret"
        "Basic dmljOnNlY3JldA==" => Some(Principal {
            name: "vic".into(),
            role: Role::Viewer,
        }),
        _ => None,
    })
}

fn with_auth(mut req: Request<Body>, value: &str) -> Request<Body> {
    req.headers_mut()
        .insert(header::AUTHORIZATION, value.parse().unwrap());
    req
}

#[tokio::test]
async fn credentials_decide_who_may_do_what() {
    let h = harness_with(|e| router(ApiState::new(e, two_users()))).await;
    let stats = || request(Method::GET, "/api/v1/stats", None);
    let pause = || request(Method::POST, "/api/v1/queues/q/pause", None);

    let r = h.send(stats()).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNAUTHORIZED, "unauthorized"),
        "no credentials"
    );
    assert!(r.headers.contains_key(header::WWW_AUTHENTICATE));
    let r = h
        .send(with_auth(stats(), "Bearer wrong-token-0123456789"))
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNAUTHORIZED, "unauthorized"),
        "bad token"
    );
    let r = h.send(with_auth(pause(), "Basic dmljOndyb25n")).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "bad password");

    assert_eq!(
        h.send(with_auth(stats(), "Basic dmljOnNlY3JldA=="))
            .await
            .status,
        StatusCode::OK
    );
    let r = h.send(with_auth(pause(), "Basic dmljOnNlY3JldA==")).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::FORBIDDEN, "forbidden"),
        "viewer cannot pause"
    );
    let r = h
        .send(with_auth(pause(), "Bearer operator-token-0123456789"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        h.audit_actions().await,
        vec![("olga".into(), "queue.pause".into(), "q".into())]
    );
    h.finish().await;
}

#[tokio::test]
async fn no_credentials_is_401_when_auth_is_on() {
    let h = harness_with(|e| router(ApiState::new(e, nobody()))).await;
    let r = h.get("/api/v1/stats").await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    let r = h
        .post("/api/v1/jobs", json!({"queue": "q", "type": "t"}))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    h.finish().await;
}

#[tokio::test]
async fn cross_site_writes_are_refused() {
    let h = harness().await;
    let mut req = request(Method::POST, "/api/v1/queues/q/pause", None);
    req.headers_mut()
        .insert(header::HOST, "127.0.0.1:8080".parse().unwrap());
    req.headers_mut()
        .insert(header::ORIGIN, "https://evil.example".parse().unwrap());
    let r = h.send(req).await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "forbidden"));
    let mut req = request(Method::POST, "/api/v1/queues/q/pause", None);
    req.headers_mut()
        .insert(header::HOST, "127.0.0.1:8080".parse().unwrap());
    req.headers_mut()
        .insert(header::ORIGIN, "http://127.0.0.1:8080".parse().unwrap());
    assert_eq!(
        h.send(req).await.status,
        StatusCode::OK,
        "same origin is fine"
    );
    h.finish().await;
}

// ---------------------------------------------------------------------------------- OpenAPI

/// The endpoints the API promises; the document and the router must both hold exactly these.
const ENDPOINTS: &[(&str, &str)] = &[
    ("post", "/api/v1/jobs"),
    ("post", "/api/v1/jobs/batch"),
    ("get", "/api/v1/jobs/{id}"),
    ("post", "/api/v1/jobs/{id}/cancel"),
    ("post", "/api/v1/jobs/{id}/resurrect"),
    ("post", "/api/v1/jobs/{id}/progress"),
    ("get", "/api/v1/queues"),
    ("post", "/api/v1/queues/{name}/pause"),
    ("post", "/api/v1/queues/{name}/resume"),
    ("patch", "/api/v1/queues/{name}"),
    ("post", "/api/v1/batches"),
    ("get", "/api/v1/batches"),
    ("get", "/api/v1/batches/{id}"),
    ("get", "/api/v1/schedules"),
    ("post", "/api/v1/schedules"),
    ("get", "/api/v1/schedules/{name}"),
    ("put", "/api/v1/schedules/{name}"),
    ("delete", "/api/v1/schedules/{name}"),
    ("post", "/api/v1/schedules/{name}/pause"),
    ("post", "/api/v1/schedules/{name}/resume"),
    ("post", "/api/v1/schedules/{name}/run"),
    ("get", "/api/v1/schedules/{name}/runs"),
    ("post", "/api/v1/instances/{instance}/quiet"),
    ("post", "/api/v1/instances/{instance}/resume"),
    ("get", "/api/v1/stats"),
    ("get", "/api/v1/openapi.json"),
    ("post", "/api/v1/workers/claim"),
    ("post", "/api/v1/workers/heartbeat"),
    ("post", "/api/v1/workers/jobs/{id}/progress"),
    ("post", "/api/v1/workers/jobs/{id}/complete"),
    ("post", "/api/v1/workers/jobs/{id}/fail"),
    ("post", "/api/v1/workers/jobs/{id}/release"),
    ("get", "/api/v1/jobs"),
    ("delete", "/api/v1/jobs/{id}"),
    ("get", "/api/v1/jobs/{id}/progress"),
    ("get", "/api/v1/error-groups"),
    ("get", "/api/v1/instances"),
    ("get", "/api/v1/settings"),
    ("put", "/api/v1/settings"),
    ("patch", "/api/v1/settings"),
    ("get", "/api/v1/audit"),
    ("post", "/api/v1/jobs/{id}/run_now"),
    ("post", "/api/v1/jobs/bulk/cancel"),
    ("post", "/api/v1/jobs/bulk/run_now"),
    ("post", "/api/v1/jobs/bulk/priority"),
    ("post", "/api/v1/jobs/bulk/purge"),
    ("post", "/api/v1/dlq/bulk/resurrect"),
    ("get", "/api/v1/bulk/{run}"),
];

#[tokio::test]
async fn openapi_document_matches_the_router() {
    let h = harness().await;
    let r = h.get("/api/v1/openapi.json").await;
    assert_eq!(r.status, StatusCode::OK);
    let doc = r.body;
    let mut documented: Vec<(String, String)> = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                documented.push((method.clone(), path.clone()));
            }
        }
    }
    documented.sort();
    let mut expected: Vec<(String, String)> = ENDPOINTS
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    expected.sort();
    assert_eq!(documented, expected);

    // Every documented operation is routed: the router neither falls through to
    // `no_such_route` nor answers 405. Ids are well-formed but unknown, bodies empty.
    for (method, path) in &expected {
        let uri = path
            .replace("{id}", &JobId::new().to_string())
            .replace("{name}", "doc-check");
        let method: Method = method.to_uppercase().parse().unwrap();
        let r = h.send(raw(method.clone(), &uri, None, "")).await;
        assert_ne!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        assert_ne!(r.code(), "no_such_route", "{method} {uri}");
    }
    // And no route answers that the document leaves out: other methods on the same paths
    // are 405.
    for (method, path) in &expected {
        let uri = path
            .replace("{id}", &JobId::new().to_string())
            .replace("{name}", "doc-check");
        for other in ["get", "post", "patch", "put", "delete"] {
            if expected.contains(&(other.to_string(), path.clone())) || other == method {
                continue;
            }
            let m: Method = other.to_uppercase().parse().unwrap();
            let r = h.send(raw(m.clone(), &uri, None, "")).await;
            assert!(
                r.status == StatusCode::METHOD_NOT_ALLOWED || r.code() == "no_such_route",
                "{m} {uri} answered {} but is not documented",
                r.status
            );
        }
    }
    assert!(doc["components"]["schemas"]["ErrorBody"].is_object());
    // Every schema reference resolves.
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").unwrap_or(&r);
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "dangling {r}"
        );
    }
    h.finish().await;
}

#[tokio::test]
async fn progress_needs_the_attempts_token_and_refuses_a_job_not_in_flight() {
    let h = harness().await;
    let uri = "/api/v1/jobs/01a2331e-6581-74b8-92ac-a4d827a95272/progress";
    let r = h.post(uri, json!({"percent": 10})).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "no_progress_token")
    );
    let mut req = raw(
        Method::POST,
        uri,
        Some("application/json"),
        json!({"percent": 10, "message": "x"}).to_string(),
    );
    req.headers_mut()
        .insert("deck-progress-token", "0123".parse().unwrap());
    let r = h.send(req).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "not_in_flight")
    );
    let r = h.post(uri, json!({"percent": 101})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    h.finish().await;
}

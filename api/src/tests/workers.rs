//! The worker protocol over HTTP: claim, heartbeat, progress, complete, fail, release, with
//! the lease checks and the worker role. The harness engine runs `echo`, `fail` and
//! `gated` itself; `ext.work` is left to the external worker.

use super::*;

async fn claim(h: &Harness, body: Value) -> Reply {
    h.post("/api/v1/workers/claim", body).await
}

/// Enqueue one `ext.work` job and claim it as `py-1`: (job id, lease).
async fn claimed(h: &Harness) -> (String, String) {
    let id = h
        .enqueue(json!({"queue": "ext", "type": "ext.work", "payload": {"n": 7}}))
        .await;
    let r = claim(
        h,
        json!({"worker": "py-1", "types": ["ext.work"], "limit": 5}),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let jobs = r.body["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{}", r.body);
    assert_eq!(jobs[0]["id"], json!(id));
    let lease = r.body["lease"].as_str().unwrap().to_string();
    assert_eq!(jobs[0]["lease"], json!(lease));
    (id, lease)
}

#[tokio::test]
async fn a_pulled_job_runs_reports_and_completes_once() {
    let h = harness().await;
    let (id, lease) = claimed(&h).await;
    let job = h.get(&format!("/api/v1/jobs/{id}")).await.body;
    assert_eq!(
        (job["state"].as_str(), job["attempt"].as_u64()),
        (Some("processing"), Some(1))
    );

    let beat = h
        .post(
            "/api/v1/workers/heartbeat",
            json!({"lease": lease, "jobs": [id]}),
        )
        .await;
    assert_eq!(beat.status, StatusCode::OK, "{}", beat.body);
    assert_eq!(beat.body["alive"], json!([id]));
    let progress = h
        .post(
            &format!("/api/v1/workers/jobs/{id}/progress"),
            json!({"lease": lease, "percent": 40, "message": "rendering"}),
        )
        .await;
    assert_eq!(progress.status, StatusCode::NO_CONTENT, "{}", progress.body);

    let done = h
        .post(
            &format!("/api/v1/workers/jobs/{id}/complete"),
            json!({"lease": lease, "result": {"pages": 3}}),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert_eq!(done.body["outcome"], "succeeded");
    let job = h.get(&format!("/api/v1/jobs/{id}")).await.body;
    assert_eq!(job["state"], "succeeded");
    assert_eq!(job["result"], json!({"pages": 3}));

    // A repeated report (a client retry) is refused and changes nothing.
    let again = h
        .post(
            &format!("/api/v1/workers/jobs/{id}/complete"),
            json!({"lease": lease, "result": {"pages": 9}}),
        )
        .await;
    assert_eq!(
        (again.status, again.code()),
        (StatusCode::CONFLICT, "lease_lost")
    );
    let job = h.get(&format!("/api/v1/jobs/{id}")).await.body;
    assert_eq!(job["result"], json!({"pages": 3}));
    h.finish().await;
}

#[tokio::test]
async fn a_waiting_producer_gets_the_external_workers_result() {
    let h = harness().await;
    let producer = h.post(
        "/api/v1/jobs?wait=30s",
        json!({"queue": "ext", "type": "ext.work", "payload": "hi"}),
    );
    let worker = async {
        let r = claim(&h, json!({"worker": "py-1", "wait_seconds": 30})).await;
        let job = &r.body["jobs"][0];
        let (id, lease) = (
            job["id"].as_str().unwrap(),
            r.body["lease"].as_str().unwrap(),
        );
        let done = h
            .post(
                &format!("/api/v1/workers/jobs/{id}/complete"),
                json!({"lease": lease, "result": "HI"}),
            )
            .await;
        assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    };
    let (produced, ()) = tokio::join!(producer, worker);
    assert_eq!(produced.status, StatusCode::CREATED, "{}", produced.body);
    assert_eq!(produced.body["job"]["state"], "succeeded");
    assert_eq!(produced.body["job"]["result"], "HI");
    h.finish().await;
}

#[tokio::test]
async fn failures_retry_by_policy_or_dead_letter_and_release_gives_back() {
    let h = harness().await;
    let (throttled, lease) = claimed(&h).await;
    let r = h
        .post(
            &format!("/api/v1/workers/jobs/{throttled}/fail"),
            json!({"lease": lease, "message": "429", "kind": "RateLimited", "retry_after_seconds": 600}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["outcome"], "retry");
    let job = h.get(&format!("/api/v1/jobs/{throttled}")).await.body;
    let due: chrono::DateTime<chrono::Utc> = job["scheduled_at"].as_str().unwrap().parse().unwrap();
    assert!(
        due >= chrono::Utc::now() + chrono::Duration::seconds(590),
        "{job}"
    );
    assert_eq!(job["errors"][0]["kind"], "RateLimited");

    let (fatal, lease) = claimed(&h).await;
    let r = h
        .post(
            &format!("/api/v1/workers/jobs/{fatal}/fail"),
            json!({"lease": lease, "message": "bad input", "fatal": true}),
        )
        .await;
    assert_eq!(
        (r.body["outcome"].as_str(), r.body["reason"].as_str()),
        (Some("dead"), Some("Fatal"))
    );

    let (given_back, lease) = claimed(&h).await;
    let r = h
        .post(
            &format!("/api/v1/workers/jobs/{given_back}/release"),
            json!({"lease": lease}),
        )
        .await;
    assert_eq!(r.body["outcome"], "released", "{}", r.body);
    let job = h.get(&format!("/api/v1/jobs/{given_back}")).await.body;
    assert_eq!(
        (job["state"].as_str(), job["attempt"].as_u64()),
        (Some("pending"), Some(0))
    );
    h.finish().await;
}

#[tokio::test]
async fn a_cancel_reaches_the_worker_in_its_heartbeat_answer() {
    let h = harness().await;
    let (id, lease) = claimed(&h).await;
    let r = h
        .post(&format!("/api/v1/jobs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let beat = h
        .post(
            "/api/v1/workers/heartbeat",
            json!({"lease": lease, "jobs": [id]}),
        )
        .await;
    assert_eq!(
        beat.body["stop"],
        json!([{"id": id, "reason": "cancelled"}])
    );
    let job = h.get(&format!("/api/v1/jobs/{id}")).await.body;
    assert_eq!(
        (job["state"].as_str(), job["reason"].as_str()),
        (Some("dead"), Some("Cancelled"))
    );
    h.finish().await;
}

#[tokio::test]
async fn bad_claims_and_leases_name_the_field() {
    let h = harness().await;
    for (body, field) in [
        (json!({"worker": "a:b"}), "worker"),
        (json!({"worker": "w", "limit": 0}), "limit"),
        (json!({"worker": "w", "limit": 101}), "limit"),
        (json!({"worker": "w", "wait_seconds": 31}), "wait_seconds"),
        (json!({"worker": "w", "concurrency": 10001}), "concurrency"),
        (json!({"worker": "w", "host": ""}), "host"),
        (json!({"worker": "w", "types": []}), "types"),
        (
            json!({"worker": "w", "queues": ["ok", " bad"]}),
            "queues[1]",
        ),
    ] {
        let r = claim(&h, body.clone()).await;
        assert_eq!(
            (r.status, r.field()),
            (StatusCode::BAD_REQUEST, field),
            "{body}: {}",
            r.body
        );
    }
    let id = JobId::new();
    let r = h
        .post(
            &format!("/api/v1/workers/jobs/{id}/complete"),
            json!({"lease": "forged"}),
        )
        .await;
    assert_eq!((r.status, r.field()), (StatusCode::BAD_REQUEST, "lease"));
    let unknown = "ext:w:0123456789abcdef0123456789abcdef";
    let r = h
        .post(
            &format!("/api/v1/workers/jobs/{id}/complete"),
            json!({"lease": unknown}),
        )
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::CONFLICT, "lease_lost"));
    h.nothing_written().await;
    h.finish().await;
}

#[tokio::test]
async fn a_worker_credential_claims_and_reports_and_nothing_else() {
    let h = harness_with(|e| {
        as_user(
            router(ApiState::new(e.clone(), nobody())),
            "py",
            Role::Worker,
        )
    })
    .await;
    let id = h
        .engine
        .enqueue(deck_engine::EnqueueRequest::new("ext", "ext.work", "1"))
        .await
        .unwrap()
        .id;
    let r = claim(&h, json!({"worker": "py-1"})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["jobs"][0]["id"], json!(id.to_string()));
    for (method, uri) in [
        (Method::GET, format!("/api/v1/jobs/{id}")),
        (Method::GET, "/api/v1/stats".to_string()),
        (Method::GET, "/api/v1/queues".to_string()),
        (Method::POST, format!("/api/v1/jobs/{id}/cancel")),
    ] {
        let r = h.call(method.clone(), &uri, None).await;
        assert_eq!(
            r.status,
            StatusCode::FORBIDDEN,
            "{method} {uri}: {}",
            r.body
        );
    }
    let r = h
        .post("/api/v1/jobs", json!({"queue": "q", "type": "t"}))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    h.finish().await;

    let h =
        harness_with(|e| as_user(router(ApiState::new(e, nobody())), "vic", Role::Viewer)).await;
    let r = claim(&h, json!({"worker": "w"})).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "viewers do not take jobs");
    h.finish().await;
}

/// The worker protocol's bounds are the engine's (`deck_engine::external`): the edge passes,
/// one past it is refused with the field named, and a refused failure report leaves the job
/// held by its lease.
#[tokio::test]
async fn concurrency_and_retry_after_are_held_to_the_engines_bounds() {
    let h = harness().await;
    let max = deck_engine::external::MAX_CONCURRENCY;
    for (concurrency, ok) in [(max, true), (max + 1, false)] {
        let r = claim(
            &h,
            json!({"worker": "py-2", "types": ["none"], "concurrency": concurrency}),
        )
        .await;
        if ok {
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        } else {
            assert_eq!(
                (r.status, r.field()),
                (StatusCode::BAD_REQUEST, "concurrency"),
                "{}",
                r.body
            );
        }
    }

    let (id, lease) = claimed(&h).await;
    let year = deck_engine::external::MAX_RETRY_AFTER.as_secs();
    let r = h
        .post(
            &format!("/api/v1/workers/jobs/{id}/fail"),
            json!({"lease": lease, "message": "429", "retry_after_seconds": year + 1}),
        )
        .await;
    assert_eq!(
        (r.status, r.field()),
        (StatusCode::BAD_REQUEST, "retry_after_seconds"),
        "{}",
        r.body
    );
    let r = h
        .post(
            &format!("/api/v1/workers/jobs/{id}/fail"),
            json!({"lease": lease, "message": "429", "retry_after_seconds": year}),
        )
        .await;
    // Accepted, by the lease the refused report left holding the job (a retry a year out is
    // past the default job age, so it is dead-lettered rather than retried).
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    h.finish().await;
}

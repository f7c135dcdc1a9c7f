//! Bulk actions by filter over HTTP: started, followed to their end, audited; refused
//! without their confirmation word; run now for one job.

use super::*;

impl Harness {
    /// Follow a bulk run until it finished; its last view. The run is a task on this
    /// runtime: each read lets it go on.
    async fn run_to_end(&self, started: &Reply) -> Value {
        assert_eq!(started.status, StatusCode::ACCEPTED, "{}", started.body);
        let id = started.body["id"].as_str().unwrap().to_string();
        for _ in 0..10_000 {
            let r = self.get(&format!("/api/v1/bulk/{id}")).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            if r.body["finished"] == true {
                return r.body;
            }
            tokio::task::yield_now().await;
        }
        panic!("bulk run {id} did not finish");
    }
}

#[tokio::test]
async fn a_flood_is_reprioritised_run_now_and_cancelled_by_filter() {
    let h = harness_holding("flood").await;
    let jobs: Vec<Value> = (0..40)
        .map(|i| json!({"queue": "flood", "type": "echo", "payload": {"i": i}, "delay_ms": 3_600_000}))
        .collect();
    let r = h.post("/api/v1/jobs/batch", json!({ "jobs": jobs })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let scheduled = json!({"queue": "flood", "status": "scheduled"});

    let r = h
        .post(
            "/api/v1/jobs/bulk/priority",
            json!({"filter": scheduled, "priority": 9}),
        )
        .await;
    let run = h.run_to_end(&r).await;
    assert_eq!(
        (run["done"].as_u64(), run["priority"].as_i64()),
        (Some(40), Some(9))
    );

    let r = h
        .post(
            "/api/v1/jobs/bulk/run_now",
            json!({"filter": scheduled, "cap": 15}),
        )
        .await;
    let run = h.run_to_end(&r).await;
    assert_eq!(
        (run["matching"].as_u64(), run["done"].as_u64()),
        (Some(40), Some(15))
    );
    let count = |status: &'static str| {
        let engine = h.engine.clone();
        async move {
            let filter = deck_engine::JobFilter {
                queue: Some("flood".into()),
                timing: Some(status.parse().unwrap()),
                ..Default::default()
            };
            engine
                .store()
                .count_jobs(deck_engine::Pillar::Hot, &filter)
                .await
                .unwrap()
                .matching
        }
    };
    assert_eq!((count("due").await, count("scheduled").await), (15, 25));

    // Cancel is refused without its word, and nothing changes.
    let r = h
        .post(
            "/api/v1/jobs/bulk/cancel",
            json!({"filter": {"queue": "flood"}, "confirm": "yes"}),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "not_confirmed")
    );
    assert_eq!(count("due").await + count("scheduled").await, 40);
    let r = h
        .post(
            "/api/v1/jobs/bulk/cancel",
            json!({"filter": {"queue": "flood"}, "confirm": "CANCEL"}),
        )
        .await;
    let run = h.run_to_end(&r).await;
    assert_eq!(
        (run["done"].as_u64(), run["error"].is_null()),
        (Some(40), true)
    );
    assert_eq!(count("due").await + count("scheduled").await, 0);

    // The dead letters it made are resurrected by their reason, then purged.
    let r = h
        .post(
            "/api/v1/dlq/bulk/resurrect",
            json!({"filter": {"queue": "flood", "reason": "Cancelled"}, "cap": 10, "confirm": "RESURRECT"}),
        )
        .await;
    assert_eq!(h.run_to_end(&r).await["done"], 10);
    let r = h
        .post(
            "/api/v1/jobs/bulk/purge",
            json!({"source": "dlq", "filter": {"queue": "flood"}, "confirm": "PURGE"}),
        )
        .await;
    assert_eq!(h.run_to_end(&r).await["done"], 30);

    let actions: Vec<String> = h.audit_actions().await.into_iter().map(|a| a.1).collect();
    for action in [
        "active.bulk_set_priority",
        "active.bulk_run_now",
        "active.bulk_cancel",
        "dlq.bulk_resurrect",
        "dlq.bulk_purge",
    ] {
        assert!(
            actions.iter().any(|a| a == action),
            "{action} audited: {actions:?}"
        );
    }
    let r = h.get("/api/v1/bulk/0123456789abcdef0123456789abcdef").await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "bulk_run_not_found")
    );
    h.finish().await;
}

#[tokio::test]
async fn run_now_makes_one_waiting_job_due() {
    let h = harness_holding("later").await;
    let id = h
        .enqueue(json!({"queue": "later", "type": "echo", "delay_ms": 3_600_000}))
        .await;
    let r = h.act_on(&id, "run_now", json!(null)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["changed"], true);
    let job = h.get(&format!("/api/v1/jobs/{id}")).await.body;
    let due: chrono::DateTime<chrono::Utc> = job["scheduled_at"].as_str().unwrap().parse().unwrap();
    assert!(due <= chrono::Utc::now());
    assert_eq!(job["attempt"], 0);
    let again = h.act_on(&id, "run_now", json!(null)).await;
    assert_eq!(again.body["changed"], false, "already due");
    h.assert_unknown_job("run_now").await;
    h.finish().await;
}

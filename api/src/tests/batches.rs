//! Batches over HTTP: a batch whose members run and whose callbacks run once, with the
//! counts they carry; the input refused (each naming its field) with nothing written.

use super::*;

impl Harness {
    /// Long-poll a job until it finished; its view.
    async fn finished(&self, id: &str) -> Value {
        let r = self.get(&format!("/api/v1/jobs/{id}?wait=30s")).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["finished"], true, "{}", r.body);
        r.body
    }
}

#[tokio::test]
async fn a_batch_runs_its_members_then_each_callback_once() {
    let h = harness().await;
    let r = h
        .post(
            "/api/v1/batches",
            json!({
                "description": "three parts",
                "jobs": [
                    {"queue": "parts", "type": "echo", "payload": {"part": 1}},
                    {"queue": "parts", "type": "echo", "payload": {"part": 2}},
                    {"queue": "parts", "type": "fail"},
                ],
                "callbacks": {
                    "on_complete": {"queue": "reports", "type": "echo", "payload": {"report": "monthly"}},
                    "on_success": {"queue": "reports", "type": "echo"},
                    "on_death": {"queue": "reports", "type": "echo", "payload": "a part died"},
                },
            }),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["batch"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.body["batch"]["total"], 3);
    assert_eq!(r.body["batch"]["pending"], 3);
    assert_eq!(r.body["batch"]["finished"], false);
    let members: Vec<String> = r.body["job_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(members.len(), 3);
    for m in &members {
        let job = h.finished(m).await;
        assert_eq!(job["batch_id"], id.as_str(), "each member names its batch");
    }

    let r = h.get(&format!("/api/v1/batches/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let b = r.body;
    assert_eq!(
        (&b["succeeded"], &b["dead"], &b["pending"]),
        (&json!(2), &json!(1), &json!(0))
    );
    assert_eq!(b["finished"], true);
    assert_eq!(b["members"].as_array().unwrap().len(), 3);
    assert_eq!(b["members"][0]["state"], "dead", "dead before succeeded");
    assert_eq!(
        b["callbacks"]["on_success"]["job_id"],
        Value::Null,
        "a member died"
    );
    let complete = b["callbacks"]["on_complete"]["job_id"]
        .as_str()
        .expect("fired");
    let death = b["callbacks"]["on_death"]["job_id"]
        .as_str()
        .expect("fired");
    let job = h.finished(complete).await;
    assert_eq!(job["queue"], "reports");
    let payload = &job["result"];
    assert_eq!(payload["event"], "complete");
    assert_eq!(payload["batch_id"], id.as_str());
    assert_eq!(
        (&payload["total"], &payload["succeeded"], &payload["dead"]),
        (&json!(3), &json!(2), &json!(1))
    );
    assert_eq!(payload["args"], json!({"report": "monthly"}));
    assert_eq!(payload["description"], "three parts");
    assert_eq!(h.finished(death).await["result"]["args"], "a part died");

    let list = h.get("/api/v1/batches?limit=1").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert_eq!(list.body["batches"][0]["id"], id.as_str());
    assert_eq!(
        list.body["next_before"],
        id.as_str(),
        "a full page names the next one"
    );
    let older = h.get(&format!("/api/v1/batches?before={id}")).await;
    assert_eq!(older.body["batches"], json!([]));
    assert_eq!(older.body["next_before"], Value::Null);
}

#[tokio::test]
async fn bad_batches_are_refused_naming_the_field_and_write_nothing() {
    let h = harness().await;
    for (body, code, field) in [
        (json!({"jobs": []}), "empty_batch", "jobs"),
        (
            json!({"jobs": [{"queue": "q", "type": "echo", "idempotency_key": "k"}]}),
            "invalid_field",
            "jobs[0].idempotency_key",
        ),
        (
            json!({"jobs": [{"queue": "q", "type": "echo"}, {"queue": "q", "type": ""}]}),
            "invalid_field",
            "jobs[1].type",
        ),
        (
            json!({"jobs": [{"queue": "q", "type": "echo"}],
                   "callbacks": {"on_success": {"queue": "", "type": "echo"}}}),
            "invalid_field",
            "callbacks.on_success.queue",
        ),
        (
            json!({"jobs": [{"queue": "q", "type": "echo"}],
                   "callbacks": {"on_death": {"queue": "q", "type": "echo", "max_attempts": 0}}}),
            "invalid_field",
            "callbacks.on_death.max_attempts",
        ),
    ] {
        let r = h.post("/api/v1/batches", body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
        assert_eq!((r.code(), r.field()), (code, field), "{body}: {}", r.body);
    }
    h.nothing_written().await;
    let list = h.get("/api/v1/batches").await;
    assert_eq!(list.body["batches"], json!([]));

    let r = h.get("/api/v1/batches/not-a-uuid").await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "invalid_id")
    );
    let r = h
        .get("/api/v1/batches/0192f0c1-7d1e-7c3a-9a51-3c1f4f0e2b6d")
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "batch_not_found")
    );
    let r = h.get("/api/v1/batches?limit=0").await;
    assert_eq!((r.status, r.field()), (StatusCode::BAD_REQUEST, "limit"));
}

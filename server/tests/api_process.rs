//! The JSON API of the real `deck serve` binary: enqueue-and-wait with one request against
//! the demo's `demo.echo`, a wait served across processes (the waiting server runs no
//! workers; another process on the same SQLite file does the job), and rejected input
//! writing nothing.

mod common;

use std::net::SocketAddr;

use common::{Server, open, pillar_counts, sqlite_url};
use serde_json::{Value, json};

async fn post(addr: SocketAddr, path: &str, body: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("the server answers");
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("a body");
    (status, serde_json::from_slice(&bytes).expect("a JSON body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_and_wait_with_one_request_against_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        "demo",
        &sqlite_url(dir.path()),
        &["--demo"],
        &[],
    );
    let body = json!({"queue": "api", "type": "demo.echo", "payload": {"hello": "world"}});
    let (status, reply) = post(server.addr, "/api/v1/jobs?wait=30s", &body.to_string()).await;
    assert_eq!(status, 201, "{reply}\n{}", server.log_text());
    assert_eq!(reply["job"]["state"], "succeeded", "{reply}");
    assert_eq!(reply["job"]["result"], json!({"hello": "world"}));
    assert_eq!(reply["job"]["timed_out"], false);

    let (status, doc) = common::http_get(server.addr, "/api/v1/openapi.json").unwrap();
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    assert!(doc["paths"]["/api/v1/jobs/{id}"]["get"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_is_answered_when_another_process_finishes_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(dir.path());
    let front = Server::start(dir.path(), "front", &url, &["--no-workers"], &[]);
    let worker = Server::start(
        dir.path(),
        "worker",
        &url,
        &["--demo", "--queues", "api"],
        &[],
    );
    let body = json!({"queue": "api", "type": "demo.echo", "payload": [1, 2, 3]});
    let (status, reply) = post(front.addr, "/api/v1/jobs?wait=60s", &body.to_string()).await;
    assert_eq!(status, 201, "{reply}");
    assert_eq!(
        reply["job"]["state"],
        "succeeded",
        "{reply}\nfront:\n{}\nworker:\n{}",
        front.log_text(),
        worker.log_text()
    );
    assert_eq!(reply["job"]["result"], json!([1, 2, 3]));
    assert!(
        reply["job"]["worker_id"].is_string(),
        "run by the worker process: {reply}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_input_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(dir.path());
    let server = Server::start(dir.path(), "strict", &url, &["--no-workers"], &[]);
    for (body, code) in [
        (r#"{"queue": "q", "type": "t""#, "malformed_json"),
        (r#"{"queue": "q", "type": "t", "typo": 1}"#, "unknown_field"),
        (r#"{"queue": "", "type": "t"}"#, "invalid_field"),
        (
            r#"{"jobs": [{"queue": "q", "type": "t"}, {"queue": "q", "type": ""}]}"#,
            "invalid_field",
        ),
    ] {
        let path = if body.contains("jobs") {
            "/api/v1/jobs/batch"
        } else {
            "/api/v1/jobs"
        };
        let (status, reply) = post(server.addr, path, body).await;
        assert_eq!(status, 400, "{body}: {reply}");
        assert_eq!(reply["error"]["code"], code, "{body}: {reply}");
    }
    let store = open(&url).await;
    assert_eq!(pillar_counts(&store).await, (0, 0, 0));
}

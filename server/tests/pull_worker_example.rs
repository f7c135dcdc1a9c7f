//! The example external workers (`examples/python/pull_worker.py`,
//! `examples/node/pull_worker.mjs`) against a real `deck serve` that runs no job itself: a
//! job succeeds with the worker's result (after a progress call), a retry is honoured, a
//! fatal error dead-letters at once, an operator cancel reaches a running job through the
//! heartbeat, SIGTERM stops a worker cleanly — and a worker killed mid-job has its job
//! rescued by the dead-instance timeout.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::{
    PATIENCE, Server, example_command, open_with_immediate_retries, scenario_tests,
    spawn_if_installed, sqlite_url,
};
use deck_engine::{
    EnqueueRequest, FailureReason, InstanceInfo, InstanceKind, Job, JobId, JobState, Operations,
};

/// Short timeouts, so a silent worker is found dead within seconds. The dead-instance timeout
/// is three instance heartbeats, not the minimum two: a live worker's row is refreshed only
/// by its calls, at most once an instance heartbeat, so two would be a race on a busy machine.
const CONFIG: &str = r#"
[engine]
heartbeat_interval = "1s"
instance_heartbeat_interval = "1s"
rescue_interval = "1s"

[engine.rescue]
dead_instance_timeout = "3s"
"#;

/// A worker process, killed on drop, and where it logs.
struct Worker {
    child: Child,
    log: PathBuf,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Worker {
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Start `example` with `program` as worker `name` for the four demo types; `None` (with a
/// notice) when `program` is not installed here.
fn start_worker(deck: &Deck, program: &str, example: &str, name: &str) -> Option<Worker> {
    let log = deck.dir.path().join(format!("{name}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let child = spawn_if_installed(
        example_command(program, example)
            .args(["--url", &format!("http://{}", deck.server.addr)])
            .args(["--worker", name])
            .args(["--types", "demo.reverse,demo.flaky,demo.reject,demo.slow"])
            .env_remove("DECK_TOKEN")
            .stdout(out.try_clone().unwrap())
            .stderr(out),
    )?;
    Some(Worker { child, log })
}

/// A `deck serve` with no handler for the demo types: only the example workers run them.
struct Deck {
    dir: tempfile::TempDir,
    server: Server,
    ops: Operations,
}

async fn deck() -> Deck {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("deck.toml"), CONFIG).unwrap();
    let url = sqlite_url(dir.path());
    // Retries at once, so the flaky job's second attempt waits only for its retry_after.
    let store = open_with_immediate_retries(&url).await;
    let server = Server::start(dir.path(), "deck", &url, &[], &[]);
    Deck {
        ops: Operations::over_store(store),
        server,
        dir,
    }
}

impl Deck {
    async fn enqueue(&self, job_type: &str, payload: serde_json::Value) -> JobId {
        let req = EnqueueRequest::new("default", job_type, payload.to_string());
        self.ops.enqueue(req).await.unwrap().id
    }

    /// Poll until `done` holds: the job runs in other processes, no signal reaches this one.
    async fn job_until(&self, id: JobId, done: impl Fn(&Job) -> bool, worker: &Worker) -> Job {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let job = self.ops.store().get_job(id).await.unwrap().unwrap();
            if done(&job) {
                return job;
            }
            assert!(
                Instant::now() < deadline,
                "{job:?}\n{}\nworker:\n{}",
                self.server.log_text(),
                worker.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn finished(&self, id: JobId, worker: &Worker) -> Job {
        let done = |j: &Job| matches!(j.state, JobState::Succeeded | JobState::Dead(_));
        self.job_until(id, done, worker).await
    }

    /// The worker's row on the Instances page, once its first claim has written it.
    async fn instance(&self, name: &str, worker: &Worker) -> InstanceInfo {
        let deadline = Instant::now() + PATIENCE;
        let id = format!("ext:{name}");
        loop {
            let rows = self.ops.store().list_instances(PATIENCE).await.unwrap();
            if let Some(row) = rows.into_iter().find(|i| i.id == id) {
                return row;
            }
            assert!(
                Instant::now() < deadline,
                "{id} never listed\n{}\nworker:\n{}",
                self.server.log_text(),
                worker.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

scenario_tests! {
    the_python_worker_runs_jobs_for_the_stock_binary =>
        worker_runs_jobs("python3", "python/pull_worker.py", "python-example/1");
    the_node_worker_runs_jobs_for_the_stock_binary =>
        worker_runs_jobs("node", "node/pull_worker.mjs", "node-example/1");
}

async fn worker_runs_jobs(program: &str, example: &str, agent: &str) {
    let deck = deck().await;
    let Some(worker) = start_worker(&deck, program, example, "example-1") else {
        return;
    };

    let reversed = deck
        .enqueue("demo.reverse", serde_json::json!({"text": "deck"}))
        .await;
    let job = deck.finished(reversed, &worker).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    let result: serde_json::Value = serde_json::from_str(job.result.as_deref().unwrap()).unwrap();
    assert_eq!(result, serde_json::json!({"reversed": "kced"}));
    assert!(job.worker_id.unwrap().starts_with("ext:example-1:"));

    let flaky = deck.enqueue("demo.flaky", serde_json::json!({})).await;
    let job = deck.finished(flaky, &worker).await;
    assert_eq!(
        (job.state, job.attempt, job.errors.len()),
        (JobState::Succeeded, 2, 1),
        "{job:?}"
    );
    assert_eq!(
        (job.errors[0].kind.as_str(), job.errors[0].message.as_str()),
        ("Retry", "the downstream is busy")
    );
    let result: serde_json::Value = serde_json::from_str(job.result.as_deref().unwrap()).unwrap();
    assert_eq!(result, serde_json::json!({"attempt": 2}));

    let rejected = deck.enqueue("demo.reject", serde_json::json!({})).await;
    let job = deck.finished(rejected, &worker).await;
    assert_eq!(
        (job.state, job.attempt),
        (JobState::Dead(FailureReason::Fatal), 1),
        "{job:?}"
    );
    assert_eq!(job.errors[0].message, "rejected by the example");

    // A running job cancelled over the API: the worker hears it in a heartbeat and stops.
    let slow = deck.enqueue("demo.slow", serde_json::json!({})).await;
    deck.job_until(slow, |j| j.state == JobState::Processing, &worker)
        .await;
    let (status, body) = common::http_post(
        deck.server.addr,
        &format!("/api/v1/jobs/{}/cancel", slow.0),
        "",
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(status, 202, "{body}");
    let job = deck.finished(slow, &worker).await;
    assert_eq!(
        job.state,
        JobState::Dead(FailureReason::Cancelled),
        "{job:?}"
    );

    // The worker is listed with what it takes, and goes on working after the cancel.
    let row = deck.instance("example-1", &worker).await;
    assert_eq!(
        (row.kind, row.version.as_str(), row.workers_total),
        (InstanceKind::External, agent, 4)
    );
    assert_eq!(row.queues, None);
    assert_eq!(row.job_types.as_ref().map(Vec::len), Some(4));
    let again = deck
        .enqueue("demo.reverse", serde_json::json!({"text": "ab"}))
        .await;
    let job = deck.finished(again, &worker).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    let log = worker.log_text();
    assert!(
        !log.contains("Traceback") && !log.contains("failed:"),
        "every call was answered:\n{log}"
    );
}

scenario_tests! {
    sigterm_stops_the_python_worker_and_gives_back_late_jobs =>
        sigterm_stops_the_worker("python3", "python/pull_worker.py");
    sigterm_stops_the_node_worker_and_gives_back_late_jobs =>
        sigterm_stops_the_worker("node", "node/pull_worker.mjs");
}

/// SIGTERM while the worker long-polls: the claim in flight still brings the job enqueued
/// after the signal, and the worker gives it back unrun, then exits 0.
async fn sigterm_stops_the_worker(program: &str, example: &str) {
    let deck = deck().await;
    let Some(mut worker) = start_worker(&deck, program, example, "stopping") else {
        return;
    };
    deck.instance("stopping", &worker).await; // its first claim is waiting
    let status = Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", worker.child.id())])
        .status()
        .unwrap();
    assert!(status.success());
    let late = deck
        .enqueue("demo.reverse", serde_json::json!({"text": "late"}))
        .await;
    let deadline = Instant::now() + PATIENCE;
    let exit = loop {
        if let Some(exit) = worker.child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            Instant::now() < deadline,
            "still running:\n{}",
            worker.log_text()
        );
        // Another process exits: no signal reaches this one but its status.
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{exit}\n{}", worker.log_text());
    let job = deck.ops.store().get_job(late).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.attempt, job.worker_id.as_deref()),
        (JobState::Pending, 0, None),
        "{job:?}"
    );
    assert!(
        worker.log_text().contains(&format!("{} released", late.0)),
        "the claim in flight brought the job and the worker gave it back:\n{}",
        worker.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_job_is_rescued_as_a_zombie() {
    let deck = deck().await;
    let Some(mut worker) = start_worker(&deck, "python3", "python/pull_worker.py", "doomed") else {
        return;
    };
    let slow = deck.enqueue("demo.slow", serde_json::json!({})).await;
    deck.job_until(slow, |j| j.state == JobState::Processing, &worker)
        .await;
    worker.child.kill().unwrap(); // SIGKILL: no release, no more heartbeats
    worker.child.wait().unwrap();
    let job = deck.finished(slow, &worker).await;
    assert_eq!(job.state, JobState::Dead(FailureReason::Zombie), "{job:?}");
    assert!(job.errors.last().is_some(), "{job:?}");
}

//! The example external workers (`examples/python/pull_worker.py`,
//! `examples/node/pull_worker.mjs`) against a real `deck serve` that runs no job itself: a
//! job succeeds with the worker's result (after a progress call), a retry is honoured, a
//! fatal error dead-letters at once, an operator cancel reaches a running job through the
//! heartbeat — and a worker killed mid-job has its job rescued by the dead-instance timeout.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{PATIENCE, Server, sqlite_url};
use deck_engine::{
    EngineSettings, EnqueueRequest, FailureReason, InstanceKind, Job, JobId, JobState, Operations,
};

/// Short timeouts, so a silent worker is found dead within seconds.
const CONFIG: &str = r#"
[engine]
heartbeat_interval = "1s"
instance_heartbeat_interval = "1s"
rescue_interval = "1s"

[engine.rescue]
dead_instance_timeout = "3s"
"#;

/// The worker process, killed on drop.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_worker(
    dir: &Path,
    server: &Server,
    program: &str,
    example: &str,
    name: &str,
) -> Option<Worker> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(example);
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    match Command::new(program)
        .arg(script)
        .args([
            "--url",
            &format!("http://{}", server.addr),
            "--worker",
            name,
        ])
        .args(["--types", "demo.reverse,demo.flaky,demo.reject,demo.slow"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
    {
        Ok(child) => Some(Worker(child)),
        Err(e) => {
            eprintln!("skipping: {program} cannot run here ({e})");
            None
        }
    }
}

struct Deck {
    _dir: tempfile::TempDir,
    server: Server,
    ops: Operations,
}

async fn deck() -> Deck {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("deck.toml"), CONFIG).unwrap();
    let url = sqlite_url(dir.path());
    // Retries at once, so the flaky job's second attempt waits only for its retry_after.
    let store = common::open(&url).await;
    let mut settings = EngineSettings::default();
    settings.retry.base_delay_ms = 0;
    settings.retry.jitter_ms = 0;
    store.save_settings(&settings).await.unwrap();
    let server = Server::start(dir.path(), "deck", &url, &[], &[]);
    Deck {
        ops: Operations::over_store(store),
        server,
        _dir: dir,
    }
}

impl Deck {
    async fn enqueue(&self, job_type: &str, payload: serde_json::Value) -> JobId {
        let req = EnqueueRequest::new("default", job_type, payload.to_string());
        self.ops.enqueue(req).await.unwrap().id
    }

    /// Poll until `done` holds: the job runs in other processes, no signal reaches this one.
    async fn job_until(&self, id: JobId, done: impl Fn(&Job) -> bool, log: &Path) -> Job {
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
                std::fs::read_to_string(log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn finished(&self, id: JobId, log: &Path) -> Job {
        self.job_until(
            id,
            |j| matches!(j.state, JobState::Succeeded | JobState::Dead(_)),
            log,
        )
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_worker_runs_jobs_for_the_stock_binary() {
    worker_runs_jobs("python3", "python/pull_worker.py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_worker_runs_jobs_for_the_stock_binary() {
    worker_runs_jobs("node", "node/pull_worker.mjs").await;
}

async fn worker_runs_jobs(program: &str, example: &str) {
    let deck = deck().await;
    let dir = deck._dir.path();
    let log = dir.join("example-1.log");
    let Some(_worker) = start_worker(dir, &deck.server, program, example, "example-1") else {
        return;
    };

    let reversed = deck
        .enqueue("demo.reverse", serde_json::json!({"text": "deck"}))
        .await;
    let job = deck.finished(reversed, &log).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    let result: serde_json::Value = serde_json::from_str(job.result.as_deref().unwrap()).unwrap();
    assert_eq!(result, serde_json::json!({"reversed": "kced"}));
    assert!(job.worker_id.unwrap().starts_with("ext:example-1:"));

    let flaky = deck.enqueue("demo.flaky", serde_json::json!({})).await;
    let job = deck.finished(flaky, &log).await;
    assert_eq!(
        (job.state, job.attempt, job.errors.len()),
        (JobState::Succeeded, 2, 1)
    );
    assert_eq!(job.errors[0].message, "the downstream is busy");

    let rejected = deck.enqueue("demo.reject", serde_json::json!({})).await;
    let job = deck.finished(rejected, &log).await;
    assert_eq!(
        (job.state, job.attempt),
        (JobState::Dead(FailureReason::Fatal), 1)
    );
    assert_eq!(job.errors[0].message, "rejected by the example");

    let slow = deck.enqueue("demo.slow", serde_json::json!({})).await;
    deck.job_until(slow, |j| j.state == JobState::Processing, &log)
        .await;
    deck.ops.cancel("ops", slow).await.unwrap();
    let job = deck.finished(slow, &log).await;
    assert_eq!(job.state, JobState::Dead(FailureReason::Cancelled));

    // The worker is listed with its scope, and goes on working after the cancel.
    let rows = deck.ops.store().list_instances(PATIENCE).await.unwrap();
    let row = rows
        .iter()
        .find(|i| i.id == "ext:example-1")
        .expect("listed");
    assert_eq!(row.kind, InstanceKind::External);
    assert_eq!(row.job_types.as_ref().map(Vec::len), Some(4));
    let again = deck
        .enqueue("demo.reverse", serde_json::json!({"text": "ab"}))
        .await;
    assert_eq!(deck.finished(again, &log).await.state, JobState::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_job_is_rescued_as_a_zombie() {
    let deck = deck().await;
    let dir = deck._dir.path();
    let log = dir.join("doomed.log");
    let Some(mut worker) = start_worker(
        dir,
        &deck.server,
        "python3",
        "python/pull_worker.py",
        "doomed",
    ) else {
        return;
    };
    let slow = deck.enqueue("demo.slow", serde_json::json!({})).await;
    deck.job_until(slow, |j| j.state == JobState::Processing, &log)
        .await;
    worker.0.kill().unwrap(); // SIGKILL: no release, no more heartbeats
    let job = deck.finished(slow, &log).await;
    assert_eq!(job.state, JobState::Dead(FailureReason::Zombie), "{job:?}");
}

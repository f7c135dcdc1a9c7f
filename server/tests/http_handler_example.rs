//! The example HTTP handlers (`examples/python/`, `examples/node/`) behind a real `deck
//! serve`, configured as the README shows: a job succeeds with the receiver's result (after
//! progress calls), a 4xx is fatal at once, a 503 is retried until the attempts run out —
//! and the receiver checked every signature.

mod common;

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{
    PATIENCE, Server, example_command, free_port, open_with_immediate_retries, scenario_tests,
    spawn_if_installed, sqlite_url,
};
use deck_engine::{EnqueueRequest, FailureReason, Job, JobId, JobState, Operations};

const SECRET: &str = "an-example-secret-for-the-test";

/// The receiver process, killed on drop.
struct Receiver(Child);

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_receiver(dir: &Path, port: u16, program: &str, example: &str) -> Option<Receiver> {
    let log = std::fs::File::create(dir.join("receiver.log")).unwrap();
    let child = spawn_if_installed(
        example_command(program, example)
            .arg(port.to_string())
            .env("MAILER_SECRET", SECRET)
            .stdout(Stdio::null())
            .stderr(log),
    )?;
    let receiver = Receiver(child);
    let deadline = Instant::now() + PATIENCE;
    // Polling a port: there is no signal to wait on across processes.
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the receiver never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(receiver)
}

scenario_tests! {
    the_python_receiver_runs_jobs_for_the_stock_binary =>
        receiver_runs_jobs("python3", "python/http_handler.py");
    the_node_receiver_runs_jobs_for_the_stock_binary =>
        receiver_runs_jobs("node", "node/http_handler.mjs");
}

async fn receiver_runs_jobs(program: &str, example: &str) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let Some(_receiver) = start_receiver(dir.path(), port, program, example) else {
        return;
    };
    std::fs::write(
        dir.path().join("deck.toml"),
        format!(
            "[[handlers]]\ntypes = [\"email.*\"]\nurl = \"http://127.0.0.1:{port}/jobs\"\n\
             secret_env = \"MAILER_SECRET\"\n"
        ),
    )
    .unwrap();
    let url = sqlite_url(dir.path());
    // Retries at once, so the 503 job's second attempt does not wait out a backoff.
    let store = open_with_immediate_retries(&url).await;
    let server = Server::start(dir.path(), "deck", &url, &[], &[("MAILER_SECRET", SECRET)]);
    let ops = Operations::over_store(store);
    let enqueue = |payload: serde_json::Value| {
        let mut req = EnqueueRequest::new("mail", "email.send", payload.to_string());
        req.max_attempts = Some(2);
        let ops = &ops;
        async move { ops.enqueue(req).await.unwrap().id }
    };
    let sent = enqueue(serde_json::json!({"to": "a@example.com", "steps": 2})).await;
    let no_recipient = enqueue(serde_json::json!({})).await;
    let busy = enqueue(serde_json::json!({"to": "b@example.com", "fail": "transient"})).await;

    let job = finished(&ops, &server, sent).await;
    assert_eq!(job.state, JobState::Succeeded);
    let result: serde_json::Value = serde_json::from_str(job.result.as_deref().unwrap()).unwrap();
    assert_eq!(result["sent_to"], "a@example.com");

    let job = finished(&ops, &server, no_recipient).await;
    assert_eq!(
        (job.state, job.attempt),
        (JobState::Dead(FailureReason::Fatal), 1)
    );
    assert!(
        job.errors[0].message.contains("HTTP 422"),
        "{:?}",
        job.errors
    );

    let job = finished(&ops, &server, busy).await;
    assert_eq!(
        (job.state, job.attempt),
        (JobState::Dead(FailureReason::Failed), 2)
    );
    assert!(
        job.errors[1].message.contains("HTTP 503"),
        "{:?}",
        job.errors
    );
    let log = std::fs::read_to_string(dir.path().join("receiver.log")).unwrap();
    let refused = |l: &str| l.contains(" 401 ") || l.trim_end().ends_with(" 401");
    assert!(
        !log.lines().any(refused),
        "every request was signed:\n{log}"
    );
    assert!(
        !log.contains("Traceback"),
        "the progress calls were accepted (a refused one raises):\n{log}"
    );
}

async fn finished(ops: &Operations, server: &Server, id: JobId) -> Job {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let job = ops.store().get_job(id).await.unwrap().unwrap();
        if matches!(job.state, JobState::Succeeded | JobState::Dead(_)) {
            return job;
        }
        assert!(Instant::now() < deadline, "{job:?}\n{}", server.log_text());
        // Another process runs the job: no signal reaches this one.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

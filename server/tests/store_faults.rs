//! `deck serve` when its SQLite store cannot write, or its database file is deleted or
//! replaced under it: readiness fails (and recovers once writes work again), enqueues are
//! refused with 503 `store_unavailable`, and SIGTERM exits within its bounds with status 3,
//! naming the jobs it could not commit.
//!
//! A full disk is played by the kernel's file-size limit (`RLIMIT_FSIZE`), set on the running
//! child: every write to a regular file then fails with EFBIG, which SQLite reports as a disk
//! I/O error, and raising the limit again is the operator freeing space.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::*;
use deck_engine::JobState;
use serde_json::{Value, json};

/// A minimal HTTP/1.1 POST of a JSON body: status code and parsed body.
fn http_post(addr: SocketAddr, path: &str, body: &Value) -> (u16, Value) {
    let (code, body) =
        common::http_post(addr, path, &body.to_string(), Duration::from_secs(30)).unwrap();
    (code, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn enqueue(server: &Server) -> (u16, Value) {
    http_post(
        server.addr,
        "/api/v1/jobs",
        &json!({"queue": "q", "type": "t", "payload": {"n": 1}}),
    )
}

fn readiness(server: &Server) -> (u16, Value) {
    let (code, body) = http_get(server.addr, "/readyz").unwrap();
    (code, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// The named check of a `/readyz` answer.
fn check<'a>(ready: &'a Value, name: &str) -> &'a Value {
    ready["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no {name} check in {ready}"))
}

/// Wait for the child to exit, failing the test if it has not within `PATIENCE` (before
/// the fix it never did).
fn wait_exit(server: &mut Server) -> ExitStatus {
    let mut child = server.child.take().expect("running");
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "deck serve still running {PATIENCE:?} after SIGTERM:\n{}",
                server.log_text()
            );
        }
        // Polling a child's exit: no signal reaches this process for it.
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn sigterm(server: &Server) {
    let status = Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", server.pid())])
        .status()
        .unwrap();
    assert!(status.success());
}

#[cfg(target_os = "linux")]
mod disk_full {
    use super::*;

    /// Start `deck serve` through `sh` with SIGXFSZ ignored (an ignored signal stays ignored
    /// across `exec`), so the file-size limit makes writes fail instead of killing it. Its
    /// log goes through a pipe, which the limit does not touch, into `dir/<name>.log`.
    pub fn start_limitable(dir: &Path, name: &str, env: &[(&str, &str)]) -> Server {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let log = dir.join(format!("{name}.log"));
        let mut cmd = Command::new("sh");
        cmd.current_dir(dir);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("DECK_") || k == "RUST_LOG" {
                cmd.env_remove(k);
            }
        }
        let database = sqlite_url(dir);
        let listen = addr.to_string();
        cmd.args([
            "-c",
            "trap '' XFSZ; exec \"$0\" \"$@\"",
            DECK,
            "serve",
            "--database",
            &database,
            "--listen",
            &listen,
        ])
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("deck serve starts");
        let mut stderr = child.stderr.take().expect("piped");
        let mut file = std::fs::File::create(&log).unwrap();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut stderr, &mut file);
        });
        let server = Server {
            child: Some(child),
            addr,
            log,
        };
        let deadline = Instant::now() + PATIENCE;
        while !matches!(http_get(addr, "/healthz"), Ok((200, _))) {
            assert!(
                Instant::now() < deadline,
                "deck serve never became healthy:\n{}",
                server.log_text()
            );
            // Polling a port: there is no signal to wait on across processes.
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// The process's file-size limit: `Some(0)` fails every write to a regular file, `None`
    /// lifts the limit.
    pub fn limit_file_size(server: &Server, limit: Option<u64>) {
        let rlimit = libc::rlimit {
            rlim_cur: limit.unwrap_or(libc::RLIM_INFINITY),
            rlim_max: libc::RLIM_INFINITY,
        };
        let pid = libc::pid_t::try_from(server.pid()).unwrap();
        // SAFETY: prlimit reads `rlimit` and writes nothing (old limit pointer is null).
        let rc = unsafe { libc::prlimit(pid, libc::RLIMIT_FSIZE, &rlimit, std::ptr::null_mut()) };
        assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    }

    #[test]
    fn readiness_fails_while_writes_fail_and_recovers_once_they_work() {
        let dir = tempfile::tempdir().unwrap();
        let server = start_limitable(dir.path(), "serve", &[]);
        let (code, ready) = readiness(&server);
        assert_eq!(code, 200, "{ready}");
        assert_eq!(check(&ready, "writes")["status"], "ok", "{ready}");
        assert_eq!(enqueue(&server).0, 201);

        limit_file_size(&server, Some(0));
        let (code, reply) = enqueue(&server);
        assert_eq!(code, 503, "{reply}");
        assert_eq!(reply["error"]["code"], "store_unavailable", "{reply}");
        let (code, ready) = readiness(&server);
        assert_eq!(code, 503, "{ready}");
        assert_eq!(ready["status"], "not_ready");
        let writes = check(&ready, "writes");
        assert_eq!(writes["status"], "fail", "{ready}");
        assert!(
            writes["detail"]
                .as_str()
                .unwrap()
                .contains("disk I/O error"),
            "{ready}"
        );
        assert_eq!(
            check(&ready, "database")["status"],
            "ok",
            "reads still work: {ready}"
        );

        // Space is freed: the next write succeeds and readiness follows.
        limit_file_size(&server, None);
        let (code, reply) = enqueue(&server);
        assert_eq!(code, 201, "{reply}\n{}", server.log_text());
        let (code, ready) = readiness(&server);
        assert_eq!(code, 200, "{ready}");
        assert_eq!(check(&ready, "writes")["status"], "ok", "{ready}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sigterm_while_the_store_cannot_write_exits_3_naming_the_uncommitted_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let url = sqlite_url(dir.path());
        let effects = dir.path().join("effects.log");
        let store = open(&url).await;
        let ids = enqueue_records(&store, "q", 3, r#"{"sleep_ms": 600000}"#).await;

        let mut server = start_limitable(
            dir.path(),
            "serve",
            &[
                ("DECK_TEST_SIDE_EFFECT_LOG", effects.to_str().unwrap()),
                ("DECK_ENGINE__SHUTDOWN_GRACE", "1s"),
                ("DECK_ENGINE__SHUTDOWN_FLUSH_TIMEOUT", "1s"),
            ],
        );
        let deadline = Instant::now() + PATIENCE;
        while recorded_ids(&effects).len() < ids.len() {
            assert!(
                Instant::now() < deadline,
                "the jobs never started:\n{}",
                server.log_text()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        // The disk fills up under three running jobs, then the process is asked to stop:
        // their cancelled attempts cannot be committed.
        limit_file_size(&server, Some(0));
        sigterm(&server);
        let status = wait_exit(&mut server);
        let log = server.log_text();
        assert_eq!(status.code(), Some(3), "{status}:\n{log}");
        assert!(log.contains("could not be committed"), "{log}");
        for id in &ids {
            assert!(log.contains(id.as_str()), "{id} is named:\n{log}");
        }

        // Nothing was lost: the jobs are still processing in the database, for the rescuer.
        for id in &ids {
            let job = store
                .get_job(id.parse().unwrap())
                .await
                .unwrap()
                .expect("still there");
            assert_eq!(job.state, JobState::Processing, "{id}");
        }
    }
}

#[test]
fn a_deleted_database_file_stops_enqueues_and_readiness() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), "serve", &sqlite_url(dir.path()), &[], &[]);
    // Left pending (no handler here runs its type, so nothing is in flight) before the file
    // goes, so the clean exit below does not depend on an outcome being committed first.
    let (code, first) = http_post(
        server.addr,
        "/api/v1/jobs",
        &json!({"queue": "q", "type": "t", "payload": {"n": 1}}),
    );
    assert_eq!(code, 201, "{first}");

    let db = dir.path().join("deck.db");
    for suffix in ["", "-wal", "-shm"] {
        let file = Path::new(&format!("{}{suffix}", db.display())).to_path_buf();
        if file.exists() {
            std::fs::remove_file(&file).unwrap();
        }
    }

    let (code, reply) = enqueue(&server);
    assert_eq!(code, 503, "{reply}");
    assert_eq!(reply["error"]["code"], "store_unavailable", "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("deleted while deck was running"),
        "{message}"
    );
    assert!(
        message.contains("restart deck to open the current file"),
        "{message}"
    );
    let (code, ready) = readiness(&server);
    assert_eq!(code, 503, "{ready}");
    assert_eq!(check(&ready, "writes")["status"], "fail", "{ready}");
    assert_eq!(check(&ready, "database")["status"], "fail", "{ready}");
    assert!(!db.exists(), "nothing recreated the file");

    // Nothing was left uncommitted: a clean exit.
    sigterm(&server);
    let status = wait_exit(&mut server);
    assert!(status.success(), "{status}:\n{}", server.log_text());
}

#[test]
fn a_database_file_replaced_under_the_server_stops_enqueues_and_readiness() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "serve", &sqlite_url(dir.path()), &[], &[]);
    assert_eq!(enqueue(&server).0, 201);

    // A valid deck database (a restore from backup, say) renamed over the open one.
    let other = dir.path().join("restored.db");
    let out = run(deck(dir.path()).args([
        "migrate",
        "--database",
        &format!("sqlite://{}", other.display()),
    ]));
    assert!(out.status.success(), "{out:?}");
    std::fs::rename(&other, dir.path().join("deck.db")).unwrap();

    let (code, reply) = enqueue(&server);
    assert_eq!(code, 503, "{reply}");
    assert_eq!(reply["error"]["code"], "store_unavailable", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("replaced by another file while deck was running"),
        "{reply}"
    );
    let (code, ready) = readiness(&server);
    assert_eq!(code, 503, "{ready}");
    assert_eq!(check(&ready, "writes")["status"], "fail", "{ready}");
}

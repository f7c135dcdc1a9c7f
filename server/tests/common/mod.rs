//! Running the real `deck` binary in tests: each child gets its own directory and port, is
//! waited for through `/healthz` (never a sleep), and is killed when its guard drops, so a
//! failing test leaves no process behind.

#![allow(dead_code)] // each test file uses a different part of this module

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deck_engine::{EngineSettings, EnqueueRequest, JobFilter, Pillar, Store, StoreOptions};

pub const DECK: &str = env!("CARGO_BIN_EXE_deck");

/// How long a test waits for something that normally takes a second or two.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// A `deck` command running in `dir` with a clean environment (no `DECK_…` or `OTEL_…` from
/// the caller).
pub fn deck(dir: &Path) -> Command {
    let mut cmd = Command::new(DECK);
    cmd.current_dir(dir);
    for (k, _) in std::env::vars_os() {
        let name = k.to_string_lossy();
        if name.starts_with("DECK_") || name.starts_with("OTEL_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd.env("NO_COLOR", "1");
    cmd
}

/// Run a one-shot command to the end.
pub fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null());
    cmd.output().expect("deck runs")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A `deck serve` child. Killed (SIGKILL) on drop unless already stopped.
pub struct Server {
    pub child: Option<Child>,
    pub addr: SocketAddr,
    pub log: PathBuf,
}

impl Server {
    /// Start `deck serve` on `database` in `dir`, logging to `dir/<name>.log`, and wait until
    /// it answers `/healthz`.
    pub fn start(
        dir: &Path,
        name: &str,
        database: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let log = dir.join(format!("{name}.log"));
        let stderr = std::fs::File::create(&log).unwrap();
        let mut cmd = deck(dir);
        cmd.args([
            "serve",
            "--database",
            database,
            "--listen",
            &addr.to_string(),
        ])
        .args(extra)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
        let child = cmd.spawn().expect("deck serve starts");
        let mut server = Server {
            child: Some(child),
            addr,
            log,
        };
        server.wait_healthy();
        server
    }

    fn wait_healthy(&mut self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok((200, _)) = http_get(self.addr, "/healthz") {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "deck serve exited with {status} before it was healthy:\n{}",
                    self.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "deck serve never became healthy:\n{}",
                self.log_text()
            );
            // Polling a port: there is no signal to wait on across processes.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("running")
    }

    /// SIGKILL: no shutdown code runs, as in a power cut or an OOM kill.
    pub fn kill_hard(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then wait for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        // The shell's builtin `kill`: no extra package needed on a fresh machine.
        let status = Command::new("sh")
            .args(["-c", &format!("kill -TERM {}", child.id())])
            .status()
            .expect("sh runs");
        assert!(status.success());
        child.wait().expect("deck exits")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill_hard();
    }
}

/// A minimal HTTP/1.1 GET: status code and body.
pub fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    exchange(addr, &request, Duration::from_secs(10))
}

/// A minimal HTTP/1.1 POST of a JSON body: status code and body. The read may wait `patience`
/// (a long-polling endpoint answers late).
pub fn http_post(
    addr: SocketAddr,
    path: &str,
    body: &str,
    patience: Duration,
) -> std::io::Result<(u16, String)> {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    exchange(addr, &request, patience)
}

/// Send one request on a fresh connection and read the whole answer.
fn exchange(addr: SocketAddr, request: &str, patience: Duration) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(patience))?;
    stream.write_all(request.as_bytes())?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_string()))
}

pub fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("deck.db").display())
}

pub async fn open(url: &str) -> Arc<dyn Store> {
    deck_engine::open_store(url, &StoreOptions::default())
        .await
        .expect("store opens")
}

/// [`open`], with retries set to run at once (no backoff, no jitter), so a test that needs a
/// second attempt does not wait one out.
pub async fn open_with_immediate_retries(url: &str) -> Arc<dyn Store> {
    let store = open(url).await;
    let mut settings = EngineSettings::default();
    settings.retry.base_delay_ms = 0;
    settings.retry.jitter_ms = 0;
    store.save_settings(&settings).await.unwrap();
    store
}

/// Committed row counts of each pillar (not the maintained counters: the real rows).
pub async fn pillar_counts(store: &Arc<dyn Store>) -> (u64, u64, u64) {
    let [hot, archive, dlq] = rows_matching(store, &JobFilter::default()).await;
    (hot, archive, dlq)
}

/// Committed row counts of one queue's jobs in each pillar.
pub async fn queue_rows(store: &Arc<dyn Store>, queue: &str) -> [u64; 3] {
    let filter = JobFilter {
        queue: Some(queue.into()),
        ..JobFilter::default()
    };
    rows_matching(store, &filter).await
}

/// Committed rows matching `filter` in each pillar (hot, archive, DLQ).
async fn rows_matching(store: &Arc<dyn Store>, filter: &JobFilter) -> [u64; 3] {
    let mut rows = [0; 3];
    for (i, pillar) in Pillar::ALL.into_iter().enumerate() {
        rows[i] = store
            .bulk_preview(pillar, filter, 0)
            .await
            .expect("count")
            .matching;
    }
    rows
}

/// Poll the store until no job is active (or fail after `PATIENCE`).
pub async fn wait_until_drained(store: &Arc<dyn Store>, servers: &[&Server]) {
    wait_until_quiet(store, &[], servers, PATIENCE).await;
}

/// Poll the store until no job of `queues` (of any queue when empty) is active, or fail after
/// `patience` with the servers' logs.
pub async fn wait_until_quiet(
    store: &Arc<dyn Store>,
    queues: &[&str],
    servers: &[&Server],
    patience: Duration,
) {
    let deadline = Instant::now() + patience;
    loop {
        let mut active = 0;
        if queues.is_empty() {
            active = pillar_counts(store).await.0;
        }
        for queue in queues {
            active += queue_rows(store, queue).await[0];
        }
        if active == 0 {
            return;
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = servers.iter().map(|s| s.log_text()).collect();
            panic!(
                "{active} jobs of {queues:?} still active after {patience:?}; logs:\n{}",
                logs.join("\n-----\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The side-effect log written by the `test.record` handler: one job id per line.
pub fn recorded_ids(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// How many times the `test.record` handler ran each job, by id.
pub fn runs_by_id(recorded: &[String]) -> HashMap<&str, usize> {
    let mut runs = HashMap::new();
    for id in recorded {
        *runs.entry(id.as_str()).or_default() += 1;
    }
    runs
}

/// Wait until the `test.record` handler has run `at_least` jobs, or fail after `patience`
/// with `server`'s log.
pub async fn wait_for_records(path: &Path, at_least: usize, server: &Server, patience: Duration) {
    let deadline = Instant::now() + patience;
    while recorded_ids(path).len() < at_least {
        assert!(
            Instant::now() < deadline,
            "no progress:\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Enqueue `count` jobs for the `test.record` handler into `queue` in one batch: their ids.
pub async fn enqueue_records(
    store: &Arc<dyn Store>,
    queue: &str,
    count: usize,
    payload: &str,
) -> Vec<String> {
    let reqs = (0..count)
        .map(|_| EnqueueRequest::new(queue, "test.record", payload))
        .collect();
    store
        .enqueue_batch(reqs)
        .await
        .expect("the jobs are enqueued")
        .into_iter()
        .map(|o| o.id.to_string())
        .collect()
}

/// A `deck.toml` whose rescue runs every second and declares an instance dead after
/// `dead_instance_timeout`, so a restarted process rescues a killed one's work in seconds.
pub fn quick_rescue_config(workers: u32, prefetch: u32, dead_instance_timeout: &str) -> String {
    format!(
        r#"
[engine]
workers = {workers}
prefetch = {prefetch}
poll_interval = "100ms"
rescue_interval = "1s"
instance_heartbeat_interval = "500ms"

[engine.rescue]
dead_instance_timeout = "{dead_instance_timeout}"
"#
    )
}

/// A `[[schedules]]` entry firing every second into queue `ticks`, for `test.record`.
pub const EVERY_SECOND_SCHEDULE: &str = r#"
[[schedules]]
name = "every-second"
every = "1s"
queue = "ticks"
job_type = "test.record"
payload = { sleep_ms = 1 }
"#;

/// `program` running the example script `example` (a path under `examples/`).
pub fn example_command(program: &str, example: &str) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(example);
    let mut cmd = Command::new(program);
    cmd.arg(script).stdin(Stdio::null());
    cmd
}

/// Spawn `cmd`, or `None` with a notice when its program is not installed here: the examples'
/// runtimes are optional on a build machine.
pub fn spawn_if_installed(cmd: &mut Command) -> Option<Child> {
    match cmd.spawn() {
        Ok(child) => Some(child),
        Err(e) => {
            let program = cmd.get_program().to_string_lossy().into_owned();
            eprintln!("skipping: {program} cannot run here ({e})");
            None
        }
    }
}

/// Multi-threaded async tests that each run one scenario with its own arguments, one line
/// a test: `name => scenario(args…);`. For scenarios run once per example runtime.
#[allow(unused_macros)]
macro_rules! scenario_tests {
    ($($name:ident => $scenario:ident($($arg:expr),* $(,)?);)+) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $scenario($($arg),*).await;
            }
        )+
    };
}
#[allow(unused_imports)]
pub(crate) use scenario_tests;

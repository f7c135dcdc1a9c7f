//! `deck bench mixed`: a real engine drains a backlog of no-op jobs while HTTP clients read
//! one endpoint of the real router (console, API, health, metrics) on a real listener, and
//! the drain rate is compared with the same engine's rate while nobody reads.
//!
//! For each endpoint the clients connect (keep-alive, one connection each) and then take
//! turns with silence: idle window, loaded window, loaded, idle, idle, loaded, … (ABBA, so a
//! drift in the machine's speed cancels out). The idle and loaded rates therefore come from
//! the same build, database and minute; `drain_kept` is the median over the pairs of the
//! loaded window's rate over its idle neighbour's. The clients run on a runtime of their
//! own (like a load generator in another process) but share the machine's cores with the
//! engine, so the figure that carries over to other machines is the ratio, not the rates.
//! The server runs as `deck serve` runs it: the real router on its own HTTP runtime.
//!
//! Before every window the backlog is topped up to `--backlog` pending jobs (outside the
//! window), so each window drains a queue of the same depth: a backed-up queue, not a table
//! of millions that would make every telemetry read a long scan.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use deck_engine::validation::MAX_BATCH;
use deck_engine::{Engine, EngineConfig, EnqueueRequest, HandlerRegistry, JobId};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{BenchDatabase, quantile, round3, synchronous_name};
use crate::cli::Synchronous;
use crate::config::Settings;
use crate::state::AppState;

const QUEUE: &str = "bench";
const NOOP: &str = "bench.noop";
/// Jobs whose ids `{id}` in an endpoint cycles through.
const SAMPLE_IDS: usize = 1_000;
/// Jobs per insert transaction when topping up.
const BATCH: usize = 5_000;
/// The engine runs this long before the first window (caches, steady state).
const WARM_UP: Duration = Duration::from_secs(1);
/// Measure anyway when the clients' first answers take longer than this (a stalled server).
const READY_WAIT: Duration = Duration::from_secs(10);
/// The endpoints of issue 11's read-load report, each with 50 connections.
const DEFAULT_LOADS: [&str; 6] = [
    "/metrics:50",
    "/readyz:50",
    "/queues:50",
    "/api/v1/stats:50",
    "/:50",
    "/api/v1/jobs/{id}:50",
];

#[derive(Debug, Clone, clap::Args)]
pub struct MixedArgs {
    /// Database [default: a fresh temporary SQLite file]
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// An endpoint to read and how many connections read it, e.g. /metrics:50 (repeatable;
    /// `{id}` in the path becomes the id of a recently enqueued job) [default: the six of
    /// issue 11, 50 connections each]
    #[arg(long = "read-load", value_name = "PATH:CONNS", value_parser = parse_read_load)]
    pub read_load: Vec<ReadLoad>,
    /// Pending jobs at the start of every window; it must outlast the window
    #[arg(long, default_value_t = 200_000)]
    pub backlog: u32,
    #[arg(long, default_value_t = 10)]
    pub workers: u32,
    /// Prefetch buffer size
    #[arg(long, default_value_t = 100)]
    pub prefetch: u32,
    /// Length of each measured window, idle or loaded
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub window: Duration,
    /// Idle and loaded windows per endpoint (each)
    #[arg(long, default_value_t = 6)]
    pub rounds: u32,
    /// Threads of the load generator's own runtime
    #[arg(long, default_value_t = 2)]
    pub client_threads: usize,
    /// SQLite durability
    #[arg(long, value_enum, default_value_t = Synchronous::Full)]
    pub synchronous: Synchronous,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadLoad {
    pub path: String,
    pub connections: u32,
}

fn parse_read_load(s: &str) -> Result<ReadLoad, String> {
    let (path, conns) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("{s:?} is not PATH:CONNS; write e.g. /metrics:50"))?;
    if !path.starts_with('/') {
        return Err(format!(
            "{path:?} is not a path on this server; start it with /, e.g. /metrics:50"
        ));
    }
    let connections: u32 = conns
        .parse()
        .ok()
        .filter(|n| (1..=1_000).contains(n))
        .ok_or_else(|| format!("{conns:?} connections: use a number from 1 to 1000"))?;
    Ok(ReadLoad {
        path: path.to_string(),
        connections,
    })
}

pub async fn run(args: MixedArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(args.backlog > 0, "--backlog must be at least 1");
    anyhow::ensure!(args.workers > 0, "--workers must be at least 1");
    anyhow::ensure!(args.rounds > 0, "--rounds must be at least 1");
    anyhow::ensure!(
        args.window >= Duration::from_millis(200),
        "--window must be at least 200ms"
    );
    anyhow::ensure!(
        args.client_threads > 0,
        "--client-threads must be at least 1"
    );
    let loads = if args.read_load.is_empty() {
        DEFAULT_LOADS
            .iter()
            .map(|s| parse_read_load(s).map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<Vec<_>>>()?
    } else {
        args.read_load.clone()
    };

    let db = BenchDatabase::open(args.database.clone(), args.synchronous).await?;
    let mut backlog = Backlog::default();
    backlog.top_up(&db, args.backlog, 0).await?;

    let mut handlers = HandlerRegistry::new();
    handlers.register(NOOP, |_ctx, _payload: Value| async { Ok(()) });
    let config = EngineConfig {
        worker_count: Some(args.workers),
        prefetch: args.prefetch,
        ..EngineConfig::default()
    };
    let engine = Engine::start(db.store.clone(), handlers, config).await?;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot bind 127.0.0.1:0 for the read load")?;
    let addr = listener.local_addr()?;
    let settings = Settings::default();
    let limits = crate::connections::ConnectionLimits::from(&settings.http);
    let app = crate::http::router(AppState::new(engine.clone(), settings));
    // Served as `deck serve` serves it: on an HTTP runtime apart from the engine's.
    let http = crate::http::HttpRuntime::start().context("cannot start the HTTP runtime")?;
    let stop_serving = tokio_util::sync::CancellationToken::new();
    let server = http.serve(listener, app, limits, stop_serving.clone());
    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads)
        .thread_name("bench-client")
        .enable_all()
        .build()
        .context("cannot start the load generator's runtime")?;

    tokio::time::sleep(WARM_UP).await;
    let mut bench = Bench {
        args: &args,
        db: &db,
        backlog: &mut backlog,
        engine: &engine,
        clients: &clients,
        addr,
    };
    let mut results = Vec::new();
    let mut failure = None;
    for load in &loads {
        match bench.endpoint(load).await {
            Ok(result) => results.push(result),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }

    clients.shutdown_background();
    stop_serving.cancel();
    server.abort();
    http.stop();
    engine.shutdown().await;
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(json!({
        "bench": "mixed",
        "backend": db.store.backend(),
        "backlog": args.backlog,
        "jobs": backlog.enqueued,
        "workers": args.workers,
        "prefetch": args.prefetch,
        "window_secs": round3(args.window.as_secs_f64()),
        "rounds": args.rounds,
        "client_threads": args.client_threads,
        "synchronous": synchronous_name(args.synchronous),
        "loads": results,
        "database": db.url,
    }))
}

/// What the bench has enqueued, and a sample of the latest ids for `{id}`.
#[derive(Default)]
struct Backlog {
    enqueued: u64,
    ids: Vec<JobId>,
}

impl Backlog {
    /// Enqueue until `target` jobs are pending, given how many have succeeded.
    async fn top_up(
        &mut self,
        db: &BenchDatabase,
        target: u32,
        succeeded: u64,
    ) -> anyhow::Result<()> {
        let pending = self.enqueued.saturating_sub(succeeded);
        let missing = u64::from(target).saturating_sub(pending) as usize;
        let step = (missing / SAMPLE_IDS).max(1);
        let mut ids = Vec::with_capacity(SAMPLE_IDS);
        let mut n = 0usize;
        let mut left = missing;
        while left > 0 {
            let size = left.min(BATCH.min(MAX_BATCH));
            let batch = (0..size)
                .map(|_| EnqueueRequest::new(QUEUE, NOOP, "null"))
                .collect();
            for outcome in db.store.enqueue_batch(batch).await? {
                if n.is_multiple_of(step) && ids.len() < SAMPLE_IDS {
                    ids.push(outcome.id);
                }
                n += 1;
            }
            left -= size;
        }
        self.enqueued += missing as u64;
        if !ids.is_empty() {
            self.ids = ids;
        }
        Ok(())
    }
}

struct Bench<'a> {
    args: &'a MixedArgs,
    db: &'a BenchDatabase,
    backlog: &'a mut Backlog,
    engine: &'a Engine,
    clients: &'a tokio::runtime::Runtime,
    addr: std::net::SocketAddr,
}

/// Jobs drained and time spent over the windows of one kind, and each window's rate.
#[derive(Default)]
struct Drained {
    jobs: u64,
    secs: f64,
    rates: Vec<f64>,
}

impl Drained {
    fn per_sec(&self) -> f64 {
        self.jobs as f64 / self.secs.max(1e-9)
    }
}

/// The median of each loaded window's rate over its idle neighbour's (the ABBA pairs): a
/// burst of other work on the machine during one window moves one pair, not the figure.
fn median_kept(idle: &Drained, loaded: &Drained) -> f64 {
    let mut ratios: Vec<f64> = idle
        .rates
        .iter()
        .zip(&loaded.rates)
        .map(|(i, l)| l / i.max(1e-9))
        .collect();
    ratios.sort_by(f64::total_cmp);
    match ratios.len() {
        0 => 0.0,
        n if n % 2 == 1 => ratios[n / 2],
        n => (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0,
    }
}

impl Bench<'_> {
    /// Top the backlog up, then count the jobs drained over one window.
    async fn window(&mut self, into: &mut Drained) -> anyhow::Result<()> {
        let target = self.args.backlog;
        self.backlog
            .top_up(self.db, target, self.engine.counters().succeeded)
            .await?;
        let before = self.engine.counters().succeeded;
        let started = Instant::now();
        tokio::time::sleep(self.args.window).await;
        let after = self.engine.counters().succeeded;
        let secs = started.elapsed().as_secs_f64();
        into.jobs += after - before;
        into.secs += secs;
        into.rates.push((after - before) as f64 / secs.max(1e-9));
        // An engine that came close to running out of work would understate its rate.
        anyhow::ensure!(
            self.backlog.enqueued.saturating_sub(after) >= u64::from(target / 10),
            "the backlog of {target} jobs ran out inside a window; raise --backlog or \
             shorten --window"
        );
        Ok(())
    }

    async fn endpoint(&mut self, load: &ReadLoad) -> anyhow::Result<Value> {
        self.backlog
            .top_up(self.db, self.args.backlog, self.engine.counters().succeeded)
            .await?;
        let addr = self.addr;
        let paths: Arc<Vec<String>> = Arc::new(if load.path.contains("{id}") {
            self.backlog
                .ids
                .iter()
                .map(|id| load.path.replace("{id}", &id.to_string()))
                .collect()
        } else {
            vec![load.path.clone()]
        });
        let load_gen = LoadGenerator::start(self.clients, addr, paths, load.connections).await?;
        tracing::info!(endpoint = %load.path, connections = load.connections, "clients connected");

        let (mut idle, mut loaded) = (Drained::default(), Drained::default());
        let mut answered = 0;
        let mut latencies = Vec::new();
        for round in 0..self.args.rounds * 2 {
            // ABBA: idle, loaded, loaded, idle, …
            if matches!(round % 4, 0 | 3) {
                self.window(&mut idle).await?;
            } else {
                load_gen.set_running(true);
                let before = load_gen.answered();
                let result = self.window(&mut loaded).await;
                load_gen.set_running(false);
                answered += load_gen.answered() - before;
                result?;
            }
        }
        let failed = load_gen.failed();
        let first_failure = load_gen.first_failure();
        latencies.extend(load_gen.stop().await?);
        latencies.sort_by(f64::total_cmp);
        let kept = median_kept(&idle, &loaded);
        tracing::info!(endpoint = %load.path, idle = idle.per_sec(), loaded = loaded.per_sec(), kept, "measured");
        Ok(json!({
            "endpoint": load.path,
            "connections": load.connections,
            "idle_drain_jobs_per_sec": idle.per_sec().round(),
            "loaded_drain_jobs_per_sec": loaded.per_sec().round(),
            "drain_kept": round3(kept),
            "drain_kept_overall": round3(loaded.per_sec() / idle.per_sec().max(1e-9)),
            "requests_per_sec": (answered as f64 / loaded.secs.max(1e-9)).round(),
            "p50_ms": round3(quantile(&latencies, 0.50)),
            "p99_ms": round3(quantile(&latencies, 0.99)),
            "failed_requests": failed,
            "first_failure": first_failure,
        }))
    }
}

/// What the clients share: the answers and failures they counted.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
    first_failure: std::sync::Mutex<Option<String>>,
}

/// `connections` keep-alive clients reading while `running` is on, each with one
/// connection, on the load generator's runtime.
struct LoadGenerator {
    running: watch::Sender<bool>,
    stop: watch::Sender<bool>,
    tally: Arc<Tally>,
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<Vec<f64>>>>,
}

impl LoadGenerator {
    /// Connect every client and have each answered once; they then wait, paused.
    async fn start(
        runtime: &tokio::runtime::Runtime,
        addr: std::net::SocketAddr,
        paths: Arc<Vec<String>>,
        connections: u32,
    ) -> anyhow::Result<LoadGenerator> {
        let (running, running_rx) = watch::channel(false);
        let (stop, stop_rx) = watch::channel(false);
        let tally = Arc::new(Tally::default());
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(connections as usize);
        let tasks = (0..connections as usize)
            .map(|c| {
                let client = Client {
                    index: c,
                    addr,
                    paths: paths.clone(),
                    tally: tally.clone(),
                    running: running_rx.clone(),
                    stop: stop_rx.clone(),
                };
                runtime.spawn(client.run(ready_tx.clone()))
            })
            .collect();
        drop(ready_tx);
        let _ = tokio::time::timeout(READY_WAIT, async {
            for _ in 0..connections {
                if ready_rx.recv().await.is_none() {
                    break;
                }
            }
        })
        .await;
        Ok(LoadGenerator {
            running,
            stop,
            tally,
            tasks,
        })
    }

    fn set_running(&self, on: bool) {
        self.running.send_replace(on);
    }

    fn answered(&self) -> u64 {
        self.tally.ok.load(Ordering::Relaxed)
    }

    fn failed(&self) -> u64 {
        self.tally.failed.load(Ordering::Relaxed)
    }

    fn first_failure(&self) -> Option<String> {
        self.tally
            .first_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stop every client; returns the latencies (ms) of the answers in loaded windows.
    async fn stop(self) -> anyhow::Result<Vec<f64>> {
        self.stop.send_replace(true);
        let mut latencies = Vec::new();
        for task in self.tasks {
            latencies.extend(task.await.context("a load client panicked")??);
        }
        Ok(latencies)
    }
}

struct Client {
    index: usize,
    addr: std::net::SocketAddr,
    paths: Arc<Vec<String>>,
    tally: Arc<Tally>,
    running: watch::Receiver<bool>,
    stop: watch::Receiver<bool>,
}

/// One keep-alive HTTP/1.1 connection, spoken with hyper's bare client: a load generator
/// should spend as little of the shared cores as it can (a pooling client with redirects
/// and header maps to build cost about twice the server's own time per request here).
type Connection = hyper::client::conn::http1::SendRequest<http_body_util::Empty<axum::body::Bytes>>;

impl Client {
    async fn run(mut self, ready: tokio::sync::mpsc::Sender<()>) -> anyhow::Result<Vec<f64>> {
        let mut latencies = Vec::new();
        let mut connection = None;
        let mut i = self.index;
        // The first request opens the connection; it is not counted.
        self.get(&mut connection, &mut i).await;
        let _ = ready.send(()).await;
        drop(ready);
        loop {
            tokio::select! {
                _ = self.stop.wait_for(|s| *s) => break,
                _ = self.running.wait_for(|r| *r) => {}
            }
            if *self.stop.borrow() {
                break;
            }
            let before = Instant::now();
            if self.get(&mut connection, &mut i).await {
                self.tally.ok.fetch_add(1, Ordering::Relaxed);
                latencies.push(before.elapsed().as_secs_f64() * 1000.0);
            } else {
                self.tally.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(latencies)
    }

    async fn connect(&self) -> anyhow::Result<Connection> {
        let stream = tokio::net::TcpStream::connect(self.addr).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            // Ends when the connection closes; a request on it then fails and reconnects.
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// One request, its body read to the end; false (and the first failure kept) unless
    /// 2xx. A connection that failed is dropped and the next request opens a new one.
    async fn get(&self, connection: &mut Option<Connection>, i: &mut usize) -> bool {
        let path = &self.paths[*i % self.paths.len()];
        *i = i.wrapping_add(7);
        let outcome = async {
            let sender = match connection {
                Some(sender) => sender,
                None => connection.insert(self.connect().await?),
            };
            sender.ready().await?;
            let request = axum::http::Request::get(path.as_str())
                .header(axum::http::header::HOST, self.addr.to_string())
                .body(http_body_util::Empty::new())?;
            let response = sender.send_request(request).await?;
            let status = response.status();
            let mut body = response.into_body();
            let mut kept = Vec::new();
            while let Some(frame) = http_body_util::BodyExt::frame(&mut body).await {
                if let (false, Some(data)) = (status.is_success(), frame?.data_ref()) {
                    kept.extend_from_slice(data);
                }
            }
            anyhow::Ok((status, kept))
        }
        .await;
        let text = match outcome {
            Ok((status, _)) if status.is_success() => return true,
            Ok((status, body)) => format!(
                "GET {path}: HTTP {status}: {}",
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(200)
                    .collect::<String>()
            ),
            Err(e) => {
                *connection = None;
                format!("GET {path}: {e:#}")
            }
        };
        self.tally
            .first_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(text);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_loads_name_a_path_and_a_connection_count() {
        assert_eq!(
            parse_read_load("/api/v1/jobs/{id}:50"),
            Ok(ReadLoad {
                path: "/api/v1/jobs/{id}".into(),
                connections: 50
            })
        );
        assert!(
            parse_read_load("/metrics")
                .unwrap_err()
                .contains("PATH:CONNS")
        );
        assert!(
            parse_read_load("metrics:5")
                .unwrap_err()
                .contains("start it with /")
        );
        assert!(
            parse_read_load("/metrics:0")
                .unwrap_err()
                .contains("1 to 1000")
        );
    }

    #[test]
    fn the_kept_share_is_the_median_pair() {
        let drained = |rates: &[f64]| Drained {
            rates: rates.to_vec(),
            ..Drained::default()
        };
        let idle = drained(&[100.0, 100.0, 10.0]);
        let loaded = drained(&[60.0, 50.0, 90.0]);
        assert_eq!(median_kept(&idle, &loaded), 0.6);
    }
}

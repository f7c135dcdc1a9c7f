//! `deck bench pull`: the worker protocol's throughput. A backlog is inserted, then W
//! external workers (HTTP clients in this process, talking to the real API router on a
//! 127.0.0.1 listener) each claim up to B jobs at a time and complete them one call per job,
//! until the backlog is gone. The engine runs no jobs itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use deck_engine::{Engine, EngineConfig, EnqueueRequest, HandlerRegistry};
use serde_json::{Value, json};

use super::{BenchDatabase, post_json, round3, serve_api, synchronous_name};
use crate::cli::Synchronous;

const QUEUE: &str = "bench";
const JOB_TYPE: &str = "bench.external";
const INSERT_BATCH: usize = 5_000;

#[derive(Debug, Args, Clone)]
pub struct PullArgs {
    /// Database [default: a fresh temporary SQLite file]
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    #[arg(long, default_value_t = 20_000)]
    pub jobs: u32,
    /// External workers pulling at once
    #[arg(long, default_value_t = 1)]
    pub workers: u32,
    /// Jobs per claim (1 to 100)
    #[arg(long, default_value_t = 20)]
    pub batch: u32,
    /// SQLite durability
    #[arg(long, value_enum, default_value_t = Synchronous::Full)]
    pub synchronous: Synchronous,
}

pub async fn run(args: PullArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(args.jobs > 0, "--jobs must be at least 1");
    anyhow::ensure!(args.workers > 0, "--workers must be at least 1");
    anyhow::ensure!((1..=100).contains(&args.batch), "--batch must be 1 to 100");
    let db = BenchDatabase::open(args.database.clone(), args.synchronous).await?;
    let config = EngineConfig {
        run_workers: false,
        ..EngineConfig::default()
    };
    let engine = Engine::start(db.store.clone(), HandlerRegistry::new(), config).await?;
    let mut left = args.jobs as usize;
    while left > 0 {
        let n = left.min(INSERT_BATCH);
        let batch = (0..n)
            .map(|i| EnqueueRequest::new(QUEUE, JOB_TYPE, format!("{{\"i\":{i}}}")))
            .collect();
        engine.enqueue_batch(batch).await?;
        left -= n;
    }

    let (addr, server) = serve_api(&engine, "the worker protocol").await?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.workers as usize * 2)
        .build()?;
    let base = format!("http://{addr}/api/v1/workers");
    let done = Arc::new(AtomicU64::new(0));
    let calls = Arc::new(AtomicU64::new(0));

    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..args.workers {
        let (client, base, done, calls) =
            (client.clone(), base.clone(), done.clone(), calls.clone());
        let batch = args.batch;
        tasks.push(tokio::spawn(async move {
            worker(&client, &base, &format!("bench-{w}"), batch, &done, &calls).await
        }));
    }
    for task in tasks {
        task.await.context("a benchmark worker panicked")??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    server.abort();
    engine.shutdown().await;
    let completed = done.load(Ordering::Relaxed);
    anyhow::ensure!(
        completed == u64::from(args.jobs),
        "{completed} of {} jobs completed",
        args.jobs
    );
    Ok(json!({
        "bench": "pull",
        "backend": db.store.backend(),
        "jobs": args.jobs,
        "workers": args.workers,
        "batch": args.batch,
        "synchronous": synchronous_name(args.synchronous),
        "http_calls": calls.load(Ordering::Relaxed),
        "elapsed_s": round3(elapsed),
        "jobs_per_sec": round3(completed as f64 / elapsed.max(1e-9)),
        "database": db.url,
    }))
}

/// Claim and complete until a claim comes back empty (the backlog is gone).
async fn worker(
    client: &reqwest::Client,
    base: &str,
    name: &str,
    batch: u32,
    done: &AtomicU64,
    calls: &AtomicU64,
) -> anyhow::Result<()> {
    loop {
        let claim = post_json(
            client,
            &format!("{base}/claim"),
            json!({"worker": name, "types": [JOB_TYPE], "limit": batch}),
        )
        .await?;
        calls.fetch_add(1, Ordering::Relaxed);
        let jobs = claim["jobs"].as_array().cloned().unwrap_or_default();
        if jobs.is_empty() {
            return Ok(());
        }
        for job in jobs {
            let id = job["id"].as_str().context("a claimed job without an id")?;
            let reply = post_json(
                client,
                &format!("{base}/jobs/{id}/complete"),
                json!({"lease": job["lease"], "result": {"ok": true}}),
            )
            .await?;
            calls.fetch_add(1, Ordering::Relaxed);
            anyhow::ensure!(reply["outcome"] == "succeeded", "job {id}: {reply}");
            done.fetch_add(1, Ordering::Relaxed);
        }
    }
}

//! `deck bench roundtrip`: enqueue a job and wait for its result, over and over — once
//! through the Rust API (`Engine::enqueue_and_wait`) and once over HTTP (`POST
//! /api/v1/jobs?wait=`, a real listener on 127.0.0.1 in this process) — and report the
//! round-trip latency of each.

use std::time::{Duration, Instant};

use anyhow::Context;
use deck_engine::{Engine, EngineConfig, EnqueueRequest, HandlerRegistry, WaitOutcome};
use serde_json::{Value, json};

use super::{BenchDatabase, post_json, quantile, round3, serve_api, synchronous_name};
use crate::cli::RoundtripArgs;

const QUEUE: &str = "bench";
const ECHO: &str = "bench.echo";
/// Round trips per client run first and left out of the numbers.
const WARMUP_PER_CLIENT: u32 = 5;
const WAIT: Duration = Duration::from_secs(30);

pub async fn run(args: RoundtripArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(args.jobs > 0, "--jobs must be at least 1");
    anyhow::ensure!(args.concurrency > 0, "--concurrency must be at least 1");
    let db = BenchDatabase::open(args.database.clone(), args.synchronous).await?;
    let mut handlers = HandlerRegistry::new();
    handlers.register(ECHO, |_ctx, payload: Value| async move { Ok(payload) });
    let config = EngineConfig {
        worker_count: Some(args.workers),
        ..EngineConfig::default()
    };
    let engine = Engine::start(db.store.clone(), handlers, config).await?;

    let rust = measure(&args, {
        let engine = engine.clone();
        move |i| {
            let engine = engine.clone();
            async move { rust_roundtrip(&engine, i).await }
        }
    })
    .await;

    let (addr, server) = serve_api(&engine, "the HTTP round trips").await?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency as usize)
        .build()?;
    let url = format!("http://{addr}/api/v1/jobs?wait={}s", WAIT.as_secs());
    let http = measure(&args, move |i| {
        let client = client.clone();
        let url = url.clone();
        async move { http_roundtrip(&client, &url, i).await }
    })
    .await;

    server.abort();
    engine.shutdown().await;
    let rust = rust?;
    let http = http?;
    Ok(json!({
        "bench": "roundtrip",
        "backend": db.store.backend(),
        "jobs": args.jobs,
        "concurrency": args.concurrency,
        "workers": args.workers,
        "synchronous": synchronous_name(args.synchronous),
        "rust": rust,
        "http": http,
        "database": db.url,
    }))
}

async fn rust_roundtrip(engine: &Engine, i: u32) -> anyhow::Result<()> {
    let req = EnqueueRequest::new(QUEUE, ECHO, json!({ "i": i }).to_string());
    let (id, outcome) = engine.enqueue_and_wait(req, WAIT).await?;
    match outcome {
        WaitOutcome::Succeeded { .. } => Ok(()),
        other => anyhow::bail!("job {id} did not succeed: {other:?}"),
    }
}

async fn http_roundtrip(client: &reqwest::Client, url: &str, i: u32) -> anyhow::Result<()> {
    let body = json!({"queue": QUEUE, "type": ECHO, "payload": {"i": i}});
    let reply = post_json(client, url, body).await?;
    anyhow::ensure!(
        reply["job"]["state"] == "succeeded",
        "the job did not succeed: {reply}"
    );
    Ok(())
}

/// Run `jobs` round trips from `concurrency` clients (each one after the other), after a few
/// warm-up trips per client, and summarise the latencies.
async fn measure<F, Fut>(args: &RoundtripArgs, trip: F) -> anyhow::Result<Value>
where
    F: Fn(u32) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let clients = args.concurrency;
    let per_client = args.jobs.div_ceil(clients);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let trip = trip.clone();
        let count = per_client.min(args.jobs.saturating_sub(c * per_client));
        tasks.push(tokio::spawn(async move {
            for w in 0..WARMUP_PER_CLIENT {
                trip(u32::MAX - w).await?;
            }
            let mut samples = Vec::with_capacity(count as usize);
            let first = Instant::now();
            for i in 0..count {
                let before = Instant::now();
                trip(c * per_client + i).await?;
                samples.push(before.elapsed().as_secs_f64() * 1000.0);
            }
            anyhow::Ok((samples, first.elapsed()))
        }));
    }
    let mut all = Vec::with_capacity(args.jobs as usize);
    let mut busiest = Duration::ZERO;
    for task in tasks {
        let (samples, took) = task.await.context("a benchmark client panicked")??;
        all.extend(samples);
        busiest = busiest.max(took);
    }
    all.sort_by(f64::total_cmp);
    let mean = all.iter().sum::<f64>() / all.len().max(1) as f64;
    Ok(json!({
        "round_trips": all.len(),
        "p50_ms": round3(quantile(&all, 0.50)),
        "p90_ms": round3(quantile(&all, 0.90)),
        "p99_ms": round3(quantile(&all, 0.99)),
        "max_ms": round3(quantile(&all, 1.0)),
        "mean_ms": round3(mean),
        "round_trips_per_sec": round3(all.len() as f64 / busiest.as_secs_f64().max(1e-9)),
        "elapsed_s": round3(started.elapsed().as_secs_f64()),
    }))
}

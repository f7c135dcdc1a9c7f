//! `deck bench latency`: a running engine in this process; enqueue one job at a time at a
//! fixed rate and measure enqueue → handler start (the enqueue's own commit included).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use deck_engine::{Engine, EngineConfig, EnqueueRequest, HandlerRegistry};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{BenchDatabase, quantile, round3, synchronous_name};
use crate::cli::LatencyArgs;

const QUEUE: &str = "bench";
const PROBE: &str = "bench.latency";
/// Jobs run first and left out of the numbers (cold caches, first allocations).
const WARMUP: u32 = 50;

#[derive(Deserialize)]
struct Probe {
    i: usize,
}

struct Marks {
    base: Instant,
    /// Nanoseconds since `base` at which each job's handler started (0 = not yet).
    started: Vec<AtomicU64>,
    count: AtomicUsize,
    all_started: Notify,
}

pub async fn run(args: LatencyArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(args.jobs > 0, "--jobs must be at least 1");
    anyhow::ensure!(args.rate > 0, "--rate must be at least 1 per second");
    let db = BenchDatabase::open(args.database.clone(), args.synchronous).await?;
    let total = (args.jobs + WARMUP) as usize;

    let marks = Arc::new(Marks {
        base: Instant::now(),
        started: (0..total).map(|_| AtomicU64::new(0)).collect(),
        count: AtomicUsize::new(0),
        all_started: Notify::new(),
    });
    let mut handlers = HandlerRegistry::new();
    let m = marks.clone();
    handlers.register(PROBE, move |_ctx, probe: Probe| {
        let m = m.clone();
        async move {
            let at = m.base.elapsed().as_nanos() as u64;
            if let Some(slot) = m.started.get(probe.i) {
                slot.store(at.max(1), Ordering::Release);
            }
            if m.count.fetch_add(1, Ordering::AcqRel) + 1 == m.started.len() {
                m.all_started.notify_one();
            }
            Ok(())
        }
    });
    let config = EngineConfig {
        worker_count: Some(args.workers),
        poll_interval: Duration::from_millis(100),
        ..EngineConfig::default()
    };
    let engine = Engine::start(db.store.clone(), handlers, config).await?;

    let period = Duration::from_secs_f64(1.0 / f64::from(args.rate));
    let mut enqueued_at = vec![0u64; total];
    let mut enqueue_ms = Vec::with_capacity(total);
    let start = tokio::time::Instant::now();
    for (i, slot) in enqueued_at.iter_mut().enumerate() {
        tokio::time::sleep_until(start + period * i as u32).await;
        let before = marks.base.elapsed();
        *slot = before.as_nanos() as u64;
        engine
            .enqueue(EnqueueRequest::new(
                QUEUE,
                PROBE,
                json!({ "i": i }).to_string(),
            ))
            .await?;
        enqueue_ms.push((marks.base.elapsed() - before).as_secs_f64() * 1000.0);
    }
    let finished = tokio::time::timeout(Duration::from_secs(60), async {
        while marks.count.load(Ordering::Acquire) < total {
            marks.all_started.notified().await;
        }
    })
    .await;
    engine.shutdown().await;
    anyhow::ensure!(
        finished.is_ok(),
        "only {} of {total} jobs started within 60 s of the last enqueue",
        marks.count.load(Ordering::Acquire)
    );

    let mut latencies: Vec<f64> = (WARMUP as usize..total)
        .map(|i| {
            let started = marks.started[i].load(Ordering::Acquire);
            started.saturating_sub(enqueued_at[i]) as f64 / 1e6
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    let mut enqueue_ms: Vec<f64> = enqueue_ms.split_off(WARMUP as usize);
    enqueue_ms.sort_by(f64::total_cmp);
    let mean = latencies.iter().sum::<f64>() / latencies.len() as f64;
    Ok(json!({
        "bench": "latency",
        "backend": db.store.backend(),
        "jobs": args.jobs,
        "warmup_jobs": WARMUP,
        "rate": args.rate,
        "workers": args.workers,
        "synchronous": synchronous_name(args.synchronous),
        "p50_ms": round3(quantile(&latencies, 0.50)),
        "p90_ms": round3(quantile(&latencies, 0.90)),
        "p99_ms": round3(quantile(&latencies, 0.99)),
        "max_ms": round3(quantile(&latencies, 1.0)),
        "mean_ms": round3(mean),
        "enqueue_p50_ms": round3(quantile(&enqueue_ms, 0.50)),
        "enqueue_p99_ms": round3(quantile(&enqueue_ms, 0.99)),
        "database": db.url,
    }))
}

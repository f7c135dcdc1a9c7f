//! `deck bench drain`: insert N no-op jobs in batches (timed), then start an engine with W
//! workers and measure how fast it works them all off, committed.

use std::time::{Duration, Instant};

use deck_engine::validation::MAX_BATCH;
use deck_engine::{Engine, EngineConfig, EnqueueRequest, HandlerRegistry};
use serde_json::{Value, json};

use super::{BenchDatabase, round3, synchronous_name};
use crate::cli::DrainArgs;

const QUEUE: &str = "bench";
const NOOP: &str = "bench.noop";
/// Give up when the drain makes no progress for this long (something is wrong).
const STALL: Duration = Duration::from_secs(30);

pub async fn run(args: DrainArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(args.jobs > 0, "--jobs must be at least 1");
    anyhow::ensure!(
        args.batch >= 1 && args.batch as usize <= MAX_BATCH,
        "--batch must be 1 to {MAX_BATCH}"
    );
    let db = BenchDatabase::open(args.database.clone(), args.synchronous).await?;
    let jobs = args.jobs as usize;

    let batches: Vec<Vec<EnqueueRequest>> = (0..jobs)
        .collect::<Vec<_>>()
        .chunks(args.batch as usize)
        .map(|c| {
            c.iter()
                .map(|_| EnqueueRequest::new(QUEUE, NOOP, "null"))
                .collect()
        })
        .collect();
    let started = Instant::now();
    for batch in batches {
        db.store.enqueue_batch(batch).await?;
    }
    let insert_secs = started.elapsed().as_secs_f64();

    let mut handlers = HandlerRegistry::new();
    handlers.register(NOOP, |_ctx, _payload: Value| async { Ok(()) });
    let config = EngineConfig {
        worker_count: Some(args.workers),
        prefetch: args.prefetch,
        poll_interval: Duration::from_millis(100),
        ..EngineConfig::default()
    };
    let started = Instant::now();
    let engine = Engine::start(db.store.clone(), handlers, config).await?;
    let mut last = (0, Instant::now());
    loop {
        let done = engine.snapshot().counters.succeeded;
        if done >= jobs as u64 {
            break;
        }
        if done != last.0 {
            last = (done, Instant::now());
        } else if last.1.elapsed() > STALL {
            engine.shutdown().await;
            anyhow::bail!(
                "the drain stalled at {done} of {jobs} jobs for {} s",
                STALL.as_secs()
            );
        }
        // A snapshot copies the running-job list: poll gently so the probe costs nothing.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let drain_secs = started.elapsed().as_secs_f64();
    engine.shutdown().await;

    let summary = db.store.summary().await?;
    let active = summary.pending + summary.scheduled + summary.fetched + summary.processing;
    Ok(json!({
        "bench": "drain",
        "backend": db.store.backend(),
        "jobs": jobs,
        "workers": args.workers,
        "prefetch": args.prefetch,
        "batch": args.batch,
        "synchronous": synchronous_name(args.synchronous),
        "insert_secs": round3(insert_secs),
        "insert_jobs_per_sec": (jobs as f64 / insert_secs).round(),
        "drain_secs": round3(drain_secs),
        "drain_jobs_per_sec": (jobs as f64 / drain_secs).round(),
        "verified": summary.succeeded >= jobs as u64 && active == 0,
        "database": db.url,
    }))
}

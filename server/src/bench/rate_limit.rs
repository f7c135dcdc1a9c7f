//! `deck bench rate-limit`: a queue limited to S starts per P seconds gets ten times what the
//! limit lets through; the handler notes when each job starts, and the report counts the
//! starts in each whole aligned period. An unlimited queue drains alongside, so its rate shows
//! what the limited neighbour costs it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use deck_engine::{Engine, EngineConfig, EnqueueRequest, HandlerRegistry, QueuePatch, RateLimit};
use serde_json::{Value, json};

use super::{BenchDatabase, round3, synchronous_name};
use crate::cli::Synchronous;

const LIMITED: &str = "bench-limited";
const FREE: &str = "bench-free";
const LIMITED_TYPE: &str = "bench.limited";
const FREE_TYPE: &str = "bench.free";

#[derive(Debug, Args, Clone)]
pub struct RateLimitArgs {
    /// Database [default: a fresh temporary SQLite file]
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// Starts allowed per period
    #[arg(long, default_value_t = 100)]
    pub starts: u32,
    /// Period, seconds
    #[arg(long, default_value_t = 1)]
    pub per_secs: u32,
    /// Whole periods counted
    #[arg(long, default_value_t = 5)]
    pub periods: u32,
    /// Jobs enqueued on the limited queue, as a multiple of what the periods let through
    #[arg(long, default_value_t = 10)]
    pub oversupply: u32,
    /// Jobs on the unlimited queue
    #[arg(long, default_value_t = 50_000)]
    pub free_jobs: u32,
    /// Workers (the engine's default unless given)
    #[arg(long, default_value_t = deck_engine::DEFAULT_WORKER_COUNT)]
    pub workers: u32,
    /// SQLite durability
    #[arg(long, value_enum, default_value_t = Synchronous::Full)]
    pub synchronous: Synchronous,
}

fn unix_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// A handler for `job_type` that notes when each of its runs happened (Unix µs).
fn record_times(handlers: &mut HandlerRegistry, job_type: &str, times: &Arc<Mutex<Vec<i64>>>) {
    let times = times.clone();
    handlers.register(job_type, move |_ctx, _payload: Value| {
        let times = times.clone();
        async move {
            times
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(unix_micros());
            Ok(())
        }
    });
}

pub async fn run(args: RateLimitArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(args.starts > 0, "--starts must be at least 1");
    anyhow::ensure!(
        (1..=deck_engine::MAX_RATE_PERIOD_SECS).contains(&args.per_secs),
        "--per-secs must be 1 to {}",
        deck_engine::MAX_RATE_PERIOD_SECS
    );
    anyhow::ensure!(args.periods > 0, "--periods must be at least 1");
    let db = BenchDatabase::open(args.database.clone(), args.synchronous).await?;
    db.store
        .update_queue(
            LIMITED,
            QueuePatch {
                rate_limit: Some(Some(RateLimit {
                    starts: args.starts,
                    per_secs: args.per_secs,
                })),
                ..Default::default()
            },
        )
        .await?;
    // One period before the counted ones starts mid-way, so it is enqueued for too.
    let limited_jobs =
        u64::from(args.starts) * u64::from(args.periods + 1) * u64::from(args.oversupply.max(1));
    for (queue, job_type, n) in [
        (LIMITED, LIMITED_TYPE, limited_jobs),
        (FREE, FREE_TYPE, u64::from(args.free_jobs)),
    ] {
        let mut left = n;
        while left > 0 {
            let take = left.min(deck_engine::validation::MAX_BATCH as u64);
            db.store
                .enqueue_batch(
                    (0..take)
                        .map(|_| EnqueueRequest::new(queue, job_type, "null"))
                        .collect(),
                )
                .await?;
            left -= take;
        }
    }

    let limited_starts: Arc<Mutex<Vec<i64>>> = Arc::default();
    let free_finished: Arc<Mutex<Vec<i64>>> = Arc::default();
    let mut handlers = HandlerRegistry::new();
    record_times(&mut handlers, LIMITED_TYPE, &limited_starts);
    record_times(&mut handlers, FREE_TYPE, &free_finished);
    let config = EngineConfig {
        worker_count: Some(args.workers),
        poll_interval: Duration::from_millis(100),
        ..EngineConfig::default()
    };
    let period_us = i64::from(args.per_secs) * 1_000_000;
    let engine = Engine::start(db.store.clone(), handlers, config).await?;
    // Count from the first whole period after the start to the end of the last.
    let first = unix_micros().div_euclid(period_us) + 1;
    let end_us = (first + i64::from(args.periods)) * period_us;
    let wait = end_us - unix_micros();
    tokio::time::sleep(Duration::from_micros(
        u64::try_from(wait).unwrap_or(0) + 50_000,
    ))
    .await;
    engine.shutdown().await;

    let starts = limited_starts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let per_period: Vec<u64> = (first..first + i64::from(args.periods))
        .map(|p| {
            starts
                .iter()
                .filter(|t| t.div_euclid(period_us) == p)
                .count() as u64
        })
        .collect();
    let free = free_finished
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let free_rate = match (free.iter().min(), free.iter().max()) {
        (Some(a), Some(b)) if b > a => free.len() as f64 / ((b - a) as f64 / 1e6),
        _ => 0.0,
    };
    let over = per_period
        .iter()
        .filter(|n| **n > u64::from(args.starts))
        .count();
    Ok(json!({
        "bench": "rate-limit",
        "backend": db.store.backend(),
        "workers": args.workers,
        "synchronous": synchronous_name(args.synchronous),
        "limit": {"starts": args.starts, "per_secs": args.per_secs},
        "limited_jobs_enqueued": limited_jobs,
        "starts_per_period": per_period,
        "periods_over_the_limit": over,
        "min_share_of_limit": round3(
            per_period.iter().copied().min().unwrap_or(0) as f64 / f64::from(args.starts)
        ),
        "free_jobs": free.len(),
        "free_jobs_per_sec": free_rate.round(),
        "database": db.url,
    }))
}

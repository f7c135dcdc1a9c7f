//! The ops endpoints (`/metrics`, `/readyz`, `/api/v1/stats`) and the console's pages share
//! one telemetry snapshot per tick and one database ping: a crowd of concurrent requests
//! costs the store one read of each, not one per request.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use deck_engine::store::interposed::{Interpose, InterposedStore, StoreCall};
use deck_engine::*;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::config::Settings;
use crate::state::AppState;

/// Counts telemetry reads and pings, and holds summaries and pings until the test opens
/// the gate, so every request is in flight at once.
struct Gated {
    gate: Semaphore,
    summaries: AtomicUsize,
    queue_stats: AtomicUsize,
    run_times: AtomicUsize,
    pings: AtomicUsize,
}

#[async_trait]
impl Interpose for Gated {
    async fn before(&self, call: StoreCall) -> StoreResult<()> {
        let counter = match call {
            StoreCall::Summary => &self.summaries,
            StoreCall::Ping => &self.pings,
            StoreCall::QueueStats => {
                self.queue_stats.fetch_add(1, Ordering::SeqCst);
                return Ok(());
            }
            StoreCall::RunTimes => {
                self.run_times.fetch_add(1, Ordering::SeqCst);
                return Ok(());
            }
            _ => return Ok(()),
        };
        counter.fetch_add(1, Ordering::SeqCst);
        // The permit goes back at once: an open gate lets every later call through.
        drop(self.gate.acquire().await);
        Ok(())
    }
}

const REQUESTS_PER_PATH: usize = 10;

#[tokio::test]
async fn concurrent_ops_and_console_reads_share_one_snapshot_and_one_ping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deck.db");
    let sqlite = deck_engine::store::sqlite::open(path.to_str().unwrap(), &StoreOptions::default())
        .await
        .unwrap();
    sqlite
        .enqueue(EnqueueRequest::new("q", "t", "null"))
        .await
        .unwrap();
    let store = Arc::new(InterposedStore::new(
        sqlite,
        Gated {
            gate: Semaphore::new(0),
            summaries: AtomicUsize::new(0),
            queue_stats: AtomicUsize::new(0),
            run_times: AtomicUsize::new(0),
            pings: AtomicUsize::new(0),
        },
    ));
    let config = EngineConfig {
        run_workers: false,
        ..EngineConfig::default()
    };
    let engine = Engine::start(store.clone(), HandlerRegistry::new(), config)
        .await
        .unwrap();
    let router = crate::http::router(AppState::new(engine.clone(), Settings::default()));

    let paths = ["/metrics", "/readyz", "/api/v1/stats", "/", "/queues"];
    let requests: Vec<_> = paths
        .iter()
        .flat_map(|p| std::iter::repeat_n(*p, REQUESTS_PER_PATH))
        .map(|path| {
            let router = router.clone();
            tokio::spawn(async move {
                let response = router
                    .oneshot(Request::get(path).body(Body::empty()).unwrap())
                    .await
                    .unwrap();
                (path, response.status())
            })
        })
        .collect();
    // On this single-threaded runtime a yield runs every new request up to the point where
    // it waits: on the gate (the one snapshot read, the one ping) or behind them.
    while store.summaries.load(Ordering::SeqCst) == 0 || store.pings.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    store.gate.add_permits(1);
    for request in requests {
        let (path, status) = request.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{path}");
    }
    assert_eq!(store.summaries.load(Ordering::SeqCst), 1, "summary reads");
    assert_eq!(
        store.queue_stats.load(Ordering::SeqCst),
        1,
        "queue stats reads"
    );
    assert_eq!(
        store.run_times.load(Ordering::SeqCst),
        1,
        "run-time reads (/metrics and /queues)"
    );
    assert_eq!(store.pings.load(Ordering::SeqCst), 1, "pings");
    engine.shutdown().await;
}

#[test]
fn run_times_are_exposed_per_job_type_and_quantile() {
    use deck_engine::run_time::bin_of;
    let times = [RunTimeHistogram::from_counts(
        "mail".into(),
        [(bin_of(10), 19), (bin_of(4_000), 1)],
    )];
    let text = super::run_time_families(&times);
    let value = |prefix: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let p50 = value(r#"deck_job_run_time_seconds{job_type="mail",quantile="0.5"}"#);
    let p95 = value(r#"deck_job_run_time_seconds{job_type="mail",quantile="0.95"}"#);
    assert!((0.009..0.011).contains(&p50), "{p50}");
    assert!(
        (0.009..0.011).contains(&p95),
        "19 of 20 runs are quick: {p95}"
    );
    assert_eq!(value(r#"deck_job_runs_last_hour{job_type="mail"}"#), 20.0);
    assert!(
        text.contains("# TYPE deck_job_run_time_seconds gauge"),
        "{text}"
    );
}

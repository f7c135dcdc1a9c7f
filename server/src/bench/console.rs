//! `deck bench console`: how fast the console renders on a big database.
//!
//! Seeds a fresh SQLite database with 1,000,000 archived, 100,000 dead and 100,000 pending
//! jobs across 20 queues — through the public `Store` API (batched enqueue, claim, mark
//! processing, complete), so the counters, metric buckets and error groups are exactly what
//! production writes — then renders every console page in-process through the real router
//! and reports p50 / p95 per page, including the last archive page, text search with a common
//! and a rare term on every list (ids, types, tags, error text, payloads, "search older"), and
//! narrow (oldest minute) and wide date ranges.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use deck_app::{AuthConfig, Console, ConsoleOptions, StoreBackend};
use deck_engine::{
    AttemptError, ClaimRequest, Completion, EnqueueRequest, FailureReason, JobQuery, PagePosition,
    Pillar, Store, StoreOptions,
};
use tower::ServiceExt;

#[derive(Debug, Clone, clap::Args)]
pub struct ConsoleArgs {
    /// Archived (succeeded) jobs to seed
    #[arg(long, default_value_t = 1_000_000)]
    pub archived: u64,
    /// Dead-letter jobs to seed
    #[arg(long, default_value_t = 100_000)]
    pub dead: u64,
    /// Pending jobs to seed
    #[arg(long, default_value_t = 100_000)]
    pub pending: u64,
    #[arg(long, default_value_t = 20)]
    pub queues: u32,
    /// Renders per page
    #[arg(long, default_value_t = 30)]
    pub samples: u32,
    /// Keep the seeded SQLite file here and reuse it on the next run [default: a temporary file]
    #[arg(long, value_name = "PATH")]
    pub keep: Option<std::path::PathBuf>,
}

const BATCH: usize = 5_000;
const ERRORS: [&str; 6] = [
    "smtp: connection refused by mail.example.com:25",
    "http 503 from payments gateway (retry later)",
    "deadline exceeded after 30s waiting for inventory service",
    "invalid payload: field 'amount' must be positive",
    "image decoder: unsupported colour profile",
    "database is locked (SQLITE_BUSY)",
];

fn request(i: u64, queues: u32) -> EnqueueRequest {
    let q = i % u64::from(queues);
    let mut req = EnqueueRequest::new(
        format!("queue-{q:02}"),
        format!("type_{}", i % 7),
        format!(r#"{{"n":{i},"customer":"c-{}"}}"#, i % 9_973),
    );
    req.tags = vec![
        format!("batch-{}", i / 10_000),
        if i.is_multiple_of(3) {
            "vip".into()
        } else {
            "std".into()
        },
    ];
    req.priority = (i % 5) as i32;
    req
}

/// Enqueue `n` jobs, then (optionally) run them to the archive or the DLQ as a worker would.
async fn seed(
    store: &Arc<dyn Store>,
    start: u64,
    n: u64,
    queues: u32,
    finish: Option<bool>,
) -> Result<()> {
    let mut done = 0;
    while done < n {
        let size = (n - done).min(BATCH as u64);
        let reqs: Vec<EnqueueRequest> = (start + done..start + done + size)
            .map(|i| request(i, queues))
            .collect();
        store
            .enqueue_batch(reqs)
            .await
            .context("seeding: enqueue_batch")?;
        if let Some(succeed) = finish {
            let worker = "bench-seeder".to_string();
            let mut left = size;
            while left > 0 {
                let claimed = store
                    .claim_batch(ClaimRequest {
                        worker_id: worker.clone(),
                        limit: left.min(BATCH as u64) as u32,
                        start: 0,
                        queues: None,
                        types: None,
                    })
                    .await
                    .context("seeding: claim_batch")?;
                if claimed.is_empty() {
                    anyhow::bail!("seeding: claim returned nothing with {left} jobs left");
                }
                let ids: Vec<_> = claimed.iter().map(|j| j.id).collect();
                let started = store
                    .mark_processing(&worker, &ids)
                    .await
                    .context("seeding: mark_processing")?;
                let now = chrono::Utc::now();
                let completions = started
                    .iter()
                    .enumerate()
                    .map(|(k, id)| {
                        if succeed {
                            Completion::Succeeded {
                                id: *id,
                                result: Some(r#"{"ok":true}"#.into()),
                                duration_ms: 5 + (k as u64 % 200),
                            }
                        } else {
                            let message = ERRORS[k % ERRORS.len()].to_string();
                            Completion::DeadLetter {
                                id: *id,
                                reason: if k % 4 == 0 {
                                    FailureReason::Fatal
                                } else {
                                    FailureReason::Failed
                                },
                                error: AttemptError {
                                    attempt: 1,
                                    at: now,
                                    kind: "transient".into(),
                                    message,
                                    ..AttemptError::default()
                                },
                                duration_ms: 20,
                            }
                        }
                    })
                    .collect();
                store
                    .complete(&worker, completions)
                    .await
                    .context("seeding: complete")?;
                left -= claimed.len() as u64;
            }
        }
        done += size;
    }
    Ok(())
}

async fn render(router: &axum::Router, path: &str) -> Result<Duration> {
    let started = Instant::now();
    let res = router
        .clone()
        .oneshot(
            Request::get(path)
                .header("accept", "text/html")
                .body(Body::empty())?,
        )
        .await?;
    let status = res.status();
    let body = axum::body::to_bytes(res.into_body(), 64 * 1024 * 1024).await?;
    let took = started.elapsed();
    if status != StatusCode::OK {
        anyhow::bail!(
            "GET {path} answered {status}: {}",
            String::from_utf8_lossy(&body)
                .chars()
                .take(300)
                .collect::<String>()
        );
    }
    Ok(took)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

pub async fn run(config: ConsoleArgs) -> Result<serde_json::Value> {
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let path = config
        .keep
        .clone()
        .unwrap_or_else(|| tmp.path().join("console-bench.db"));
    let reuse = path.exists();
    let url = format!("sqlite://{}", path.display());
    let store = deck_engine::open_store(&url, &StoreOptions::default())
        .await
        .with_context(|| format!("opening {url}"))?;

    if reuse {
        eprintln!("reusing seeded database {}", path.display());
    } else {
        let t = Instant::now();
        eprintln!(
            "seeding {} archived, {} dead, {} pending jobs across {} queues into {} …",
            config.archived,
            config.dead,
            config.pending,
            config.queues,
            path.display()
        );
        seed(&store, 0, config.archived, config.queues, Some(true)).await?;
        eprintln!("  archive seeded in {:.1} s", t.elapsed().as_secs_f64());
        seed(
            &store,
            config.archived,
            config.dead,
            config.queues,
            Some(false),
        )
        .await?;
        seed(
            &store,
            config.archived + config.dead,
            config.pending,
            config.queues,
            None,
        )
        .await?;
        eprintln!("  all seeded in {:.1} s", t.elapsed().as_secs_f64());
    }

    // A 1 ms tick makes every overview render read fresh telemetry, as the first browser
    // after a quiet tick would; in production a 2 s snapshot is shared by all of them.
    let options = ConsoleOptions {
        tick: Duration::from_millis(1),
        ..ConsoleOptions::default()
    };
    let console = Console::new(StoreBackend::new(store.clone()), options);
    let router = deck_app::console_router(console, AuthConfig::default());

    // A real job id for the inspector, and the last archive page's position.
    let dlq_page = store.list_jobs(&JobQuery::new(Pillar::Dlq)).await?;
    let job_id = dlq_page
        .items
        .first()
        .map(|j| j.id.to_string())
        .unwrap_or_default();

    // The oldest minute of each list: a narrow range there is the worst case for a list
    // sorted newest first (every newer row sits between the index start and the matches).
    let oldest_minute = |pillar: Pillar, finished: bool| {
        let store = store.clone();
        async move {
            let mut q = JobQuery::new(pillar);
            q.position = PagePosition::Last;
            let page = store.list_jobs(&q).await?;
            let oldest = page
                .items
                .iter()
                .filter_map(|j| {
                    if finished {
                        j.finished_at
                    } else {
                        Some(j.created_at)
                    }
                })
                .min()
                .unwrap_or_else(chrono::Utc::now);
            let from = oldest.format("%Y-%m-%dT%H:%M").to_string();
            let to = (oldest + chrono::Duration::minutes(1))
                .format("%Y-%m-%dT%H:%M")
                .to_string();
            anyhow::Ok(format!("from={from}&to={to}"))
        }
    };
    let active_created_old = oldest_minute(Pillar::Hot, false).await?;
    let archive_created_old = oldest_minute(Pillar::Archive, false).await?;
    let archive_finished_old = oldest_minute(Pillar::Archive, true).await?;
    let dlq_created_old = oldest_minute(Pillar::Dlq, false).await?;
    let dlq_finished_old = oldest_minute(Pillar::Dlq, true).await?;
    // Where a search's scan stops on the archive, and the "search older" page past it.
    let archive_window = store
        .search_window(Pillar::Archive, None)
        .await?
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
        .unwrap_or_default();
    let archive_oldest_id = {
        let mut q = JobQuery::new(Pillar::Archive);
        q.position = PagePosition::Last;
        let page = store.list_jobs(&q).await?;
        page.items
            .last()
            .map(|j| j.id.to_string())
            .unwrap_or_default()
    };
    const WIDE: &str = "from=2000-01-01&to=2100-01-01";
    // A term that matches nothing: a scan has to read every row to say so.
    const RARE: &str = "zqxj-no-such-term";

    let pages: Vec<(&str, String)> = vec![
        ("overview", "/".into()),
        ("queues", "/queues".into()),
        ("jobs active", "/jobs?source=active".into()),
        ("jobs archive first page", "/jobs?source=archive".into()),
        (
            "jobs archive last page",
            "/jobs?source=archive&last=1".into(),
        ),
        (
            "jobs archive by queue, sorted by priority",
            "/jobs?source=archive&queue=queue-07&sort=priority&dir=asc".into(),
        ),
        ("dlq", "/jobs?source=dlq".into()),
        ("dlq text search", "/jobs?source=dlq&q=inventory".into()),
        (
            "active text search, common",
            "/jobs?source=active&q=vip".into(),
        ),
        (
            "active text search, rare",
            format!("/jobs?source=active&q={RARE}"),
        ),
        (
            "archive text search, common",
            "/jobs?source=archive&q=type_3".into(),
        ),
        (
            "archive text search, rare",
            format!("/jobs?source=archive&q={RARE}"),
        ),
        (
            "archive tag search, common",
            "/jobs?source=archive&q=batch-3".into(),
        ),
        (
            "archive payload search, common",
            "/jobs?source=archive&q=c-42&payload=1".into(),
        ),
        (
            "archive payload search, rare",
            format!("/jobs?source=archive&q={RARE}&payload=1"),
        ),
        (
            "archive search older, rare",
            format!(
                "/jobs?source=archive&q={RARE}&older={}",
                archive_window.replace(':', "%3A").replace('+', "%2B")
            ),
        ),
        (
            "archive oldest job by id prefix",
            format!(
                "/jobs?source=archive&q={}",
                archive_oldest_id.get(..13).unwrap_or_default()
            ),
        ),
        (
            "archive error text, rare",
            "/jobs?source=archive&q=colour+profile".into(),
        ),
        (
            "dlq text search, rare",
            format!("/jobs?source=dlq&q={RARE}"),
        ),
        (
            "active created, narrow old range",
            format!("/jobs?source=active&{active_created_old}"),
        ),
        (
            "active created, wide range",
            format!("/jobs?source=active&{WIDE}"),
        ),
        (
            "archive created, narrow old range",
            format!("/jobs?source=archive&{archive_created_old}"),
        ),
        (
            "archive created, wide range",
            format!("/jobs?source=archive&{WIDE}"),
        ),
        (
            "archive finished, narrow old range",
            format!("/jobs?source=archive&on=finished&{archive_finished_old}"),
        ),
        (
            "archive finished, wide range",
            format!("/jobs?source=archive&on=finished&{WIDE}"),
        ),
        (
            "dlq created, narrow old range",
            format!("/jobs?source=dlq&{dlq_created_old}"),
        ),
        (
            "dlq created, wide range",
            format!("/jobs?source=dlq&{WIDE}"),
        ),
        (
            "dlq finished, narrow old range",
            format!("/jobs?source=dlq&on=finished&{dlq_finished_old}"),
        ),
        (
            "dlq finished, wide range",
            format!("/jobs?source=dlq&on=finished&{WIDE}"),
        ),
        (
            "dlq bulk preview",
            "/dlq/bulk?source=dlq&reason=Fatal".into(),
        ),
        ("job inspector", format!("/jobs/{job_id}")),
        ("settings", "/settings".into()),
        ("instances", "/instances".into()),
        ("audit", "/audit".into()),
    ];
    eprintln!(
        "\nserver render time per page ({} samples each, in-process through the router):",
        config.samples
    );
    eprintln!("{:<44} {:>10} {:>10}", "page", "p50", "p95");
    let mut results = Vec::new();
    for (name, path) in pages {
        // One warm-up render so the first sample does not pay for cold caches alone.
        render(&router, &path).await?;
        let mut samples = Vec::with_capacity(config.samples as usize);
        for _ in 0..config.samples {
            samples.push(render(&router, &path).await?);
        }
        samples.sort();
        let (p50, p95) = (
            percentile(&samples, 0.5).as_secs_f64() * 1e3,
            percentile(&samples, 0.95).as_secs_f64() * 1e3,
        );
        eprintln!("{name:<44} {p50:>8.1}ms {p95:>8.1}ms");
        results.push(serde_json::json!({ "page": name, "path": path, "p50_ms": round(p50), "p95_ms": round(p95) }));
    }
    Ok(serde_json::json!({
        "bench": "console",
        "archived": config.archived,
        "dead": config.dead,
        "pending": config.pending,
        "queues": config.queues,
        "samples": config.samples,
        "pages": results,
    }))
}

fn round(ms: f64) -> f64 {
    (ms * 100.0).round() / 100.0
}

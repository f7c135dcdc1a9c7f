//! `deck bench`: measure the engine on a real store. Each command prints one JSON object on
//! stdout (logs go to stderr), so results can be collected by scripts.

pub mod console;
mod drain;
mod latency;
pub mod mixed;
pub mod pull;
pub mod rate_limit;
mod roundtrip;

use std::sync::Arc;

use anyhow::Context;
use deck_engine::store::SqliteSynchronous;
use deck_engine::{Store, StoreOptions};

use crate::cli::{BenchCommand, Synchronous};

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    let report = match cmd {
        BenchCommand::Drain(args) => drain::run(args).await?,
        BenchCommand::Latency(args) => latency::run(args).await?,
        BenchCommand::Console(args) => console::run(args).await?,
        BenchCommand::Roundtrip(args) => roundtrip::run(args).await?,
        BenchCommand::Mixed(args) => mixed::run(args).await?,
        BenchCommand::Pull(args) => pull::run(args).await?,
        BenchCommand::RateLimit(args) => rate_limit::run(args).await?,
    };
    crate::commands::emit(&format!("{report}\n"))
}

/// The database a benchmark runs on: the one given, or a fresh SQLite file in a temporary
/// directory that is removed afterwards.
pub struct BenchDatabase {
    /// The database as reports show it: a SQL Server password replaced.
    pub url: String,
    pub store: Arc<dyn Store>,
    _dir: Option<tempfile::TempDir>,
}

impl BenchDatabase {
    pub async fn open(url: Option<String>, synchronous: Synchronous) -> anyhow::Result<Self> {
        let (url, dir) = match url {
            Some(url) => (url, None),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("deck-bench-")
                    .tempdir()
                    .context("cannot create a temporary directory for the benchmark database")?;
                let path = dir.path().join("bench.db");
                (format!("sqlite://{}", path.display()), Some(dir))
            }
        };
        let options = StoreOptions {
            sqlite_synchronous: match synchronous {
                Synchronous::Full => SqliteSynchronous::Full,
                Synchronous::Normal => SqliteSynchronous::Normal,
            },
            ..StoreOptions::default()
        };
        let store = deck_engine::open_store(&url, &options).await?;
        let url = deck_engine::store::DatabaseUrl::parse(&url)?.redacted();
        Ok(BenchDatabase {
            url,
            store,
            _dir: dir,
        })
    }
}

pub fn synchronous_name(s: Synchronous) -> &'static str {
    match s {
        Synchronous::Full => "full",
        Synchronous::Normal => "normal",
    }
}

/// The value at quantile `q` (0–1) of sorted samples (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Round for display: benchmarks report three decimals at most.
pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The JSON API over `engine` on a loopback port of its own, for benchmarks that go through
/// HTTP (`what` names them in the error); abort the task to stop it.
pub async fn serve_api(
    engine: &deck_engine::Engine,
    what: &str,
) -> anyhow::Result<(
    std::net::SocketAddr,
    tokio::task::JoinHandle<std::io::Result<()>>,
)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .with_context(|| format!("cannot bind 127.0.0.1:0 for {what}"))?;
    let addr = listener.local_addr()?;
    let app = deck_api::api_router(deck_api::ApiState::open(engine.clone()));
    Ok((
        addr,
        tokio::spawn(async move { axum::serve(listener, app).await }),
    ))
}

/// POST a JSON body to the API and read its JSON answer; an answer that is not JSON or not
/// a success is an error that shows it.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    body: serde_json::Value,
) -> anyhow::Result<serde_json::Value> {
    let response = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await?;
    let status = response.status();
    let bytes = response.bytes().await?;
    let reply: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes)))?;
    anyhow::ensure!(status.is_success(), "HTTP {status}: {reply}");
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}

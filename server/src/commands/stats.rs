//! `deck stats`: per-pillar and per-queue counts from the configured database, read from the
//! store's maintained counters (cheap even on a large archive).

use std::path::PathBuf;

use deck_engine::{QueueStats, Summary};
use serde::Serialize;

use crate::cli::StatsArgs;
use crate::commands::{emit, load_config, open_existing_store};

#[derive(Debug, Serialize)]
pub struct Stats {
    pub backend: &'static str,
    /// Jobs in each pillar: hot (pending + scheduled + fetched + processing), archive, dlq.
    pub pillars: Pillars,
    pub summary: Summary,
    pub queues: Vec<QueueStats>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Pillars {
    pub hot: u64,
    pub archive: u64,
    pub dlq: u64,
}

impl Pillars {
    pub fn from_summary(s: &Summary) -> Self {
        Pillars {
            hot: s.pending + s.scheduled + s.fetched + s.processing,
            archive: s.succeeded,
            dlq: s.dlq,
        }
    }
}

pub async fn run(config: Option<PathBuf>, args: StatsArgs) -> anyhow::Result<()> {
    let loaded = load_config(config, |s| args.db.apply(s))?;
    let store = open_existing_store(&loaded.settings).await?;
    let summary = store.summary().await?;
    let queues = store.queue_stats().await?;
    let stats = Stats {
        backend: store.backend(),
        pillars: Pillars::from_summary(&summary),
        summary,
        queues,
    };
    if args.json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&stats)?))?;
    } else {
        emit(&render_text(&stats))?;
    }
    Ok(())
}

fn render_text(stats: &Stats) -> String {
    use std::fmt::Write;
    let s = &stats.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "active {:>10}  (pending {}, scheduled {}, fetched {}, processing {})",
        stats.pillars.hot, s.pending, s.scheduled, s.fetched, s.processing
    );
    let _ = writeln!(out, "archive {:>9}", stats.pillars.archive);
    let _ = writeln!(out, "dlq {:>13}", stats.pillars.dlq);
    let _ = writeln!(
        out,
        "last 5 min: {} succeeded, {} failed, {} retried",
        s.succeeded_5m, s.failed_5m, s.retried_5m
    );
    if !stats.queues.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<24} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9} {:>10}",
            "queue", "pending", "sched", "fetched", "processing", "succeeded", "failed", "lag max"
        );
        for q in &stats.queues {
            let _ = writeln!(
                out,
                "{:<24} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9} {:>8}ms{}",
                q.queue,
                q.pending,
                q.scheduled,
                q.fetched,
                q.processing,
                q.succeeded,
                q.failed,
                q.lag_max_ms,
                if q.paused { "  (paused)" } else { "" }
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pillars_add_every_hot_status() {
        let s = Summary {
            pending: 1,
            scheduled: 2,
            fetched: 3,
            processing: 4,
            succeeded: 5,
            dlq: 6,
            ..Default::default()
        };
        assert_eq!(
            Pillars::from_summary(&s),
            Pillars {
                hot: 10,
                archive: 5,
                dlq: 6
            }
        );
    }
}

//! The command line. Flags override `deck.toml` and `DECK_…` variables; a flag that is not
//! given leaves the configured value alone, so no flag carries a default of its own here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use deck_engine::config::EngineConfig;
use deck_engine::model::DEFAULT_WORKER_COUNT;

use crate::config::ConfigSources;

#[derive(Debug, Parser)]
#[command(
    name = "deck",
    version,
    about = "The Deck: durable background jobs with an operator console",
    after_help = "Configuration: deck.toml (or --config FILE) < DECK_… environment variables < flags.\n\
                  Logs: DECK_LOG or RUST_LOG (e.g. DECK_LOG=deck=debug,info)."
)]
pub struct Cli {
    /// Config file [default: deck.toml when it exists]
    #[arg(long, global = true, env = "DECK_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the engine, the console and the JSON API
    Serve(ServeArgs),
    /// Apply the database schema, or print it for a DBA (--print)
    Migrate(MigrateArgs),
    /// Print per-pillar and per-queue counts
    Stats(StatsArgs),
    /// Enqueue one job and print its id
    Enqueue(EnqueueArgs),
    /// Measure throughput (drain) or enqueue→start latency
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Args, Default)]
pub struct DatabaseArg {
    /// Database: sqlite://PATH or a SQL Server connection string [default: sqlite://deck.db]
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
}

impl DatabaseArg {
    pub fn apply(&self, sources: &mut ConfigSources) {
        sources.set_opt("database", self.database.clone());
    }
}

#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DatabaseArg,
    /// Address the HTTP server binds [default: 127.0.0.1:8080]
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// Register demo handlers and keep enqueueing a mixed workload
    #[arg(long)]
    pub demo: bool,
    #[arg(long, value_name = "N", help = workers_help())]
    pub workers: Option<u32>,
    /// Run no workers: serve the console and API only
    #[arg(long, conflicts_with = "workers")]
    pub no_workers: bool,
    /// Work only these queues (comma-separated) [default: every queue]
    #[arg(long, value_name = "A,B")]
    pub queues: Option<String>,
    #[arg(long, value_name = "N", help = prefetch_help())]
    pub prefetch: Option<u32>,
    #[arg(long, value_name = "DURATION", help = poll_interval_help())]
    pub poll_interval: Option<String>,
    /// Name shown in the console's instance list [default: HOST-PID]
    #[arg(long, value_name = "NAME")]
    pub instance_name: Option<String>,
}

// The defaults `serve --help` shows are read from the engine's, so the help cannot drift from
// what an instance runs with.
fn workers_help() -> String {
    format!(
        "Concurrent jobs in this instance [default: the persisted setting, \
         {DEFAULT_WORKER_COUNT} until changed]"
    )
}

fn prefetch_help() -> String {
    format!(
        "Jobs claimed ahead of free workers [default: {}]",
        EngineConfig::default().prefetch
    )
}

fn poll_interval_help() -> String {
    format!(
        "How often an idle instance looks for work from other processes [default: {}]",
        humantime::format_duration(EngineConfig::default().poll_interval)
    )
}

impl ServeArgs {
    pub fn apply(&self, sources: &mut ConfigSources) {
        self.db.apply(sources);
        sources.set_opt("listen", self.listen.clone());
        if self.demo {
            sources.set("demo", true);
        }
        sources.set_opt("engine.workers", self.workers);
        if self.no_workers {
            sources.set("engine.run_workers", false);
        }
        sources.set_opt("engine.queues", self.queues.clone());
        sources.set_opt("engine.prefetch", self.prefetch);
        sources.set_opt("engine.poll_interval", self.poll_interval.clone());
        sources.set_opt("engine.instance_name", self.instance_name.clone());
    }
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub db: DatabaseArg,
    /// Print the DDL instead of applying it
    #[arg(long)]
    pub print: bool,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub db: DatabaseArg,
    /// Print one JSON object instead of tables
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct EnqueueArgs {
    #[command(flatten)]
    pub db: DatabaseArg,
    /// Queue name
    #[arg(long, short)]
    pub queue: String,
    /// Job type key (the handler that runs it)
    #[arg(long = "type", short = 't', value_name = "TYPE")]
    pub job_type: String,
    /// JSON payload
    #[arg(long, short, default_value = "null", value_name = "JSON")]
    pub payload: String,
    /// Higher runs first
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i32,
    /// Run after this long (e.g. 30s, 5m)
    #[arg(long, value_name = "DURATION", conflicts_with = "scheduled_at")]
    pub delay: Option<String>,
    /// Run no earlier than this RFC 3339 time (e.g. 2026-01-31T09:00:00Z)
    #[arg(long, value_name = "TIME")]
    pub scheduled_at: Option<String>,
    /// A tag (repeat for several)
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// A duplicate among active jobs returns the existing id
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
    /// Keep the idempotency key taken this long after enqueue (e.g. 1h), also once the job
    /// finished in a state given with --unique-state
    #[arg(long, value_name = "DURATION", requires = "idempotency_key")]
    pub unique_for: Option<String>,
    /// A finished state that keeps holding the key inside --unique-for (repeat for both)
    #[arg(
        long = "unique-state",
        value_name = "STATE",
        value_enum,
        requires = "unique_for"
    )]
    pub unique_states: Vec<UniqueStateArg>,
    #[arg(long, value_name = "ID")]
    pub correlation_id: Option<String>,
    /// Who enqueued it [default: cli]
    #[arg(long, value_name = "NAME")]
    pub created_by: Option<String>,
    /// Dead-letter it as Expired if it has not started by this RFC 3339 time
    #[arg(long, value_name = "TIME")]
    pub expires_at: Option<String>,
    /// Total runs allowed, the first included [default: the retry setting, 3]
    #[arg(long, value_name = "N")]
    pub max_attempts: Option<u32>,
}

/// `--unique-state` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UniqueStateArg {
    Succeeded,
    Dead,
}

impl From<UniqueStateArg> for deck_engine::UniqueState {
    fn from(s: UniqueStateArg) -> Self {
        match s {
            UniqueStateArg::Succeeded => deck_engine::UniqueState::Succeeded,
            UniqueStateArg::Dead => deck_engine::UniqueState::Dead,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Pre-insert N no-op jobs, then drain them with W workers
    Drain(DrainArgs),
    /// Enqueue jobs one at a time at a fixed rate and measure enqueue→start
    Latency(LatencyArgs),
    /// Seed a large database and measure console page render times
    Console(crate::bench::console::ConsoleArgs),
    /// Enqueue-and-wait round trips over the Rust API and over HTTP (p50/p99)
    Roundtrip(RoundtripArgs),
    /// Drain a backlog while HTTP clients read an endpoint; compare with the idle drain
    Mixed(crate::bench::mixed::MixedArgs),
    /// Drain a backlog through the worker protocol: external workers claim and complete
    /// over HTTP on loopback
    Pull(crate::bench::pull::PullArgs),
    /// Oversupply a rate-limited queue and count its starts per period, next to an unlimited
    /// queue's drain
    RateLimit(crate::bench::rate_limit::RateLimitArgs),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Synchronous {
    #[default]
    Full,
    Normal,
}

#[derive(Debug, Args, Clone)]
pub struct DrainArgs {
    /// Database [default: a fresh temporary SQLite file]
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    #[arg(long, default_value_t = 100_000)]
    pub jobs: u32,
    /// Workers (the engine's default unless given)
    #[arg(long, default_value_t = DEFAULT_WORKER_COUNT)]
    pub workers: u32,
    /// Prefetch buffer size (the engine's default unless given)
    #[arg(long, default_value_t = EngineConfig::default().prefetch)]
    pub prefetch: u32,
    /// Jobs per insert transaction
    #[arg(long, default_value_t = 5_000)]
    pub batch: u32,
    /// SQLite durability
    #[arg(long, value_enum, default_value_t = Synchronous::Full)]
    pub synchronous: Synchronous,
}

#[derive(Debug, Args, Clone)]
pub struct LatencyArgs {
    /// Database [default: a fresh temporary SQLite file]
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    #[arg(long, default_value_t = 2_000)]
    pub jobs: u32,
    /// Enqueues per second
    #[arg(long, default_value_t = 200)]
    pub rate: u32,
    /// Workers (the engine's default unless given)
    #[arg(long, default_value_t = DEFAULT_WORKER_COUNT)]
    pub workers: u32,
    /// SQLite durability
    #[arg(long, value_enum, default_value_t = Synchronous::Full)]
    pub synchronous: Synchronous,
}

#[derive(Debug, Args, Clone)]
pub struct RoundtripArgs {
    /// Database [default: a fresh temporary SQLite file]
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// Round trips per API (Rust, then HTTP)
    #[arg(long, default_value_t = 1_000)]
    pub jobs: u32,
    /// Clients enqueueing and waiting at the same time
    #[arg(long, default_value_t = 1)]
    pub concurrency: u32,
    #[arg(long, default_value_t = 10)]
    pub workers: u32,
    /// SQLite durability
    #[arg(long, value_enum, default_value_t = Synchronous::Full)]
    pub synchronous: Synchronous,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_help_shows_the_engine_defaults() {
        let mut cmd = Cli::command();
        let serve = cmd
            .find_subcommand_mut("serve")
            .map(|c| c.render_help().to_string())
            .unwrap_or_default();
        // Help wraps at the terminal's width.
        let serve = serve.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            serve.contains(&format!("the persisted setting, {DEFAULT_WORKER_COUNT} ")),
            "{serve}"
        );
        assert!(
            serve.contains(&format!("[default: {}]", EngineConfig::default().prefetch)),
            "{serve}"
        );
    }

    #[test]
    fn serve_flags_become_overrides() {
        let cli = Cli::parse_from([
            "deck",
            "serve",
            "--database",
            "sqlite://x.db",
            "--workers",
            "4",
            "--queues",
            "a,b",
            "--demo",
        ]);
        let Command::Serve(args) = cli.command else {
            panic!("not serve")
        };
        let mut sources = ConfigSources::default();
        args.apply(&mut sources);
        let keys: Vec<_> = sources.overrides.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["database", "demo", "engine.workers", "engine.queues"]
        );
    }
}

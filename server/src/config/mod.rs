//! The `deck` configuration: `deck.toml` < environment (`DECK_…`) < command-line flags.
//!
//! Every key has a default, so an empty (or missing) file is a valid configuration. Loading
//! (`load`) layers the sources and reports every problem at once; `validate` holds the
//! semantic checks (ranges, addresses, relations between settings).

mod load;
mod validate;
mod values;

use std::time::Duration;

use deck_engine::StoreOptions;
use serde::{Deserialize, Serialize};

pub use load::{ConfigSources, Loaded, load};

/// The default database: the embedded store in the working directory.
pub const DEFAULT_DATABASE: &str = "sqlite://deck.db";
/// The default HTTP address: loopback only, so the console is never exposed by accident.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The config file read when `--config` is not given (optional).
pub const DEFAULT_CONFIG_FILE: &str = "deck.toml";

/// Everything `deck` can be configured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// `sqlite://path` or a SQL Server connection string.
    pub database: String,
    /// `IP:PORT` the HTTP server binds.
    pub listen: String,
    /// Run the demo workload (`deck serve --demo`).
    pub demo: bool,
    /// Backend options that are not part of the database URL.
    pub store: StoreOptions,
    pub engine: EngineSettings,
    /// Console authentication (extended by the console).
    pub auth: AuthSettings,
    pub http: HttpSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            database: DEFAULT_DATABASE.to_string(),
            listen: DEFAULT_LISTEN.to_string(),
            demo: false,
            store: StoreOptions::default(),
            engine: EngineSettings::default(),
            auth: AuthSettings::default(),
            http: HttpSettings::default(),
        }
    }
}

/// The runtime's knobs (`[engine]`). Mirrors the engine's `EngineConfig`, with durations
/// written the human way (`"1s"`, `"250ms"`, `"15m"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EngineSettings {
    /// Name shown in the console's instance list; default `host-pid`.
    pub instance_name: Option<String>,
    /// Only work these queues; unset = every queue.
    #[serde(deserialize_with = "values::list_or_csv")]
    pub queues: Option<Vec<String>>,
    /// `false` runs a producer/console-only instance.
    pub run_workers: bool,
    /// Concurrent jobs in this instance; unset = the persisted setting (console → Settings).
    pub workers: Option<u32>,
    /// Jobs claimed ahead of free workers.
    pub prefetch: u32,
    #[serde(with = "values::duration")]
    pub poll_interval: Duration,
    #[serde(with = "values::duration")]
    pub heartbeat_interval: Duration,
    #[serde(with = "values::duration")]
    pub execution_timeout: Duration,
    #[serde(with = "values::duration")]
    pub shutdown_grace: Duration,
    /// After running jobs stopped at shutdown, how long their outcomes may take to commit.
    #[serde(with = "values::duration")]
    pub shutdown_flush_timeout: Duration,
    #[serde(with = "values::duration")]
    pub rescue_interval: Duration,
    #[serde(with = "values::duration")]
    pub retention_interval: Duration,
    /// Largest handler result kept, in bytes of JSON.
    pub result_max_bytes: usize,
    #[serde(with = "values::duration")]
    pub wait_poll_interval: Duration,
    #[serde(with = "values::duration")]
    pub instance_heartbeat_interval: Duration,
    pub rescue: RescueSettings,
    pub breaker: BreakerSettings,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            instance_name: None,
            queues: None,
            run_workers: true,
            workers: None,
            prefetch: 100,
            poll_interval: Duration::from_secs(1),
            heartbeat_interval: Duration::from_secs(10),
            execution_timeout: Duration::from_secs(15 * 60),
            shutdown_grace: Duration::from_secs(30),
            shutdown_flush_timeout: Duration::from_secs(5),
            rescue_interval: Duration::from_secs(60),
            retention_interval: Duration::from_secs(3600),
            result_max_bytes: 1024 * 1024,
            wait_poll_interval: Duration::from_millis(250),
            instance_heartbeat_interval: Duration::from_secs(5),
            rescue: RescueSettings::default(),
            breaker: BreakerSettings::default(),
        }
    }
}

/// `[engine.rescue]`: when stuck work is given back or dead-lettered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RescueSettings {
    /// `Fetched` rows older than this go back to pending (no user code ran).
    #[serde(with = "values::duration")]
    pub fetched_timeout: Duration,
    /// `Processing` rows whose heartbeat is older than this go to the DLQ as `Zombie`
    /// (a queue's own zombie timeout wins).
    #[serde(with = "values::duration")]
    pub zombie_timeout: Duration,
    /// Work of an instance silent for this long is rescued at once.
    #[serde(with = "values::duration")]
    pub dead_instance_timeout: Duration,
}

impl Default for RescueSettings {
    fn default() -> Self {
        RescueSettings {
            fetched_timeout: Duration::from_secs(600),
            zombie_timeout: Duration::from_secs(600),
            dead_instance_timeout: Duration::from_secs(30),
        }
    }
}

impl RescueSettings {
    pub fn policy(&self) -> deck_engine::RescuePolicy {
        deck_engine::RescuePolicy {
            fetched_timeout: self.fetched_timeout,
            default_zombie_timeout: self.zombie_timeout,
            dead_instance_timeout: self.dead_instance_timeout,
        }
    }
}

/// `[engine.breaker]`: the per-job-type circuit breaker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BreakerSettings {
    /// Failures within `window` that open the circuit.
    pub failure_threshold: u32,
    #[serde(with = "values::duration")]
    pub window: Duration,
    /// How long the circuit stays open before one half-open probe.
    #[serde(with = "values::duration")]
    pub open_for: Duration,
    /// How far jobs of an open circuit are pushed back (no attempt spent).
    #[serde(with = "values::duration")]
    pub defer: Duration,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings {
            failure_threshold: 5,
            window: Duration::from_secs(60),
            open_for: Duration::from_secs(30),
            defer: Duration::from_secs(5),
        }
    }
}

/// `[http]`: bounds on what one client can hold of the server. Every wait a client can
/// impose is capped, so slow or stalled clients cannot pin connections or memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HttpSettings {
    /// Time to send a request's line and headers; also how long an idle keep-alive
    /// connection stays open waiting for its next request.
    #[serde(with = "values::duration")]
    pub header_read_timeout: Duration,
    /// Time to send a request's whole body, counted from the end of its headers.
    #[serde(with = "values::duration")]
    pub request_body_timeout: Duration,
    /// Connections served at once; more wait in the listen backlog until one closes.
    pub max_connections: u32,
    /// Largest request body; a larger declared `Content-Length` is refused before reading.
    pub max_body_bytes: u64,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            header_read_timeout: Duration::from_secs(10),
            request_body_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_body_bytes: MAX_BODY_BYTES,
        }
    }
}

/// No endpoint accepts more than a batch does, so a larger `http.max_body_bytes` could
/// only ever waste memory.
pub const MAX_BODY_BYTES: u64 = crate::api::BATCH_BODY_LIMIT as u64;

/// `[auth]`: who may use the console and the API. The console owns the keys of this table.
pub type AuthSettings = deck_app::AuthConfig;

impl EngineSettings {
    /// The engine's own configuration for these settings.
    pub fn engine_config(&self) -> deck_engine::EngineConfig {
        deck_engine::EngineConfig {
            instance_name: self.instance_name.clone(),
            queues: self.queues.clone(),
            run_workers: self.run_workers,
            worker_count: self.workers,
            prefetch: self.prefetch,
            poll_interval: self.poll_interval,
            heartbeat_interval: self.heartbeat_interval,
            execution_timeout: self.execution_timeout,
            shutdown_grace: self.shutdown_grace,
            shutdown_flush_timeout: self.shutdown_flush_timeout,
            rescue_interval: self.rescue_interval,
            rescue: self.rescue.policy(),
            retention_interval: self.retention_interval,
            breaker: deck_engine::runtime::BreakerConfig {
                failure_threshold: self.breaker.failure_threshold,
                window: self.breaker.window,
                open_for: self.breaker.open_for,
                defer: self.breaker.defer,
            },
            result_max_bytes: self.result_max_bytes,
            wait_poll_interval: self.wait_poll_interval,
            instance_heartbeat_interval: self.instance_heartbeat_interval,
            ..deck_engine::EngineConfig::default()
        }
    }
}

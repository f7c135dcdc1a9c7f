//! The `deck` configuration: `deck.toml` < environment (`DECK_…`) < command-line flags.
//!
//! Every key has a default, so an empty (or missing) file is a valid configuration. Loading
//! (`load`) layers the sources and reports every problem at once; `validate` holds the
//! semantic checks (ranges, addresses, relations between settings).

mod load;
mod schedules;
mod validate;

use std::collections::BTreeMap;
use std::time::Duration;

use deck_engine::config::values;
use deck_engine::{QueuePatch, RateLimit, StoreOptions};
use serde::{Deserialize, Serialize};

pub use load::{ConfigSources, Loaded, load};
pub use schedules::ScheduleFileSettings;

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
    /// `[engine]`: the engine's own configuration, its defaults and its rules.
    pub engine: deck_engine::EngineConfig,
    /// `[[handlers]]`: job types or queues run by an HTTP endpoint.
    pub handlers: Vec<deck_http_handlers::HttpHandlerConfig>,
    /// `[queues.NAME]`: queue settings applied (and audited, as `deck.toml`) at start.
    pub queues: BTreeMap<String, QueueFileSettings>,
    /// `[[schedules]]`: recurring schedules declared at start. Absent: the stored schedules
    /// are left as they are; present (even `schedules = []`): the whole declared list.
    pub schedules: Option<Vec<ScheduleFileSettings>>,
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
            engine: deck_engine::EngineConfig::default(),
            handlers: Vec::new(),
            queues: BTreeMap::new(),
            schedules: None,
            auth: AuthSettings::default(),
            http: HttpSettings::default(),
        }
    }
}

/// `[queues.NAME]`: the settings of one queue. Each key given is applied at every start, so
/// the file wins over a change made in the console since; a key left out (or removed) leaves
/// the stored value as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueFileSettings {
    pub paused: Option<bool>,
    pub max_workers: Option<u32>,
    pub zombie_timeout_secs: Option<u32>,
    pub execution_timeout_secs: Option<u32>,
    pub lag_warn_secs: Option<u32>,
    pub lag_crit_secs: Option<u32>,
    /// `{ starts = 100, per_secs = 60 }`: at most 100 job starts a minute, cluster-wide.
    pub rate_limit: Option<RateLimit>,
}

impl QueueFileSettings {
    pub fn patch(&self) -> QueuePatch {
        QueuePatch {
            paused: self.paused,
            hidden: None,
            max_workers: self.max_workers.map(Some),
            zombie_timeout_secs: self.zombie_timeout_secs.map(Some),
            execution_timeout_secs: self.execution_timeout_secs.map(Some),
            lag_warn_secs: self.lag_warn_secs.map(Some),
            lag_crit_secs: self.lag_crit_secs.map(Some),
            rate_limit: self.rate_limit.map(Some),
        }
    }
}

impl Settings {
    /// The declared schedules as the engine takes them (`None`: none declared). The
    /// configuration was validated when it loaded, so an entry that fails here is skipped.
    pub fn schedule_definitions(&self) -> Option<Vec<deck_engine::ScheduleDefinition>> {
        self.schedules
            .as_ref()
            .map(|entries| entries.iter().filter_map(|e| e.definition().ok()).collect())
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
    /// The URL other machines reach this deck at (`https://deck.internal`), for the progress
    /// callbacks HTTP handlers' receivers get; unset: `http://` and the listen address.
    pub public_url: Option<String>,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            header_read_timeout: Duration::from_secs(10),
            request_body_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_body_bytes: MAX_BODY_BYTES,
            public_url: None,
        }
    }
}

/// No endpoint accepts more than a batch does, so a larger `http.max_body_bytes` could
/// only ever waste memory.
pub const MAX_BODY_BYTES: u64 = deck_api::BATCH_BODY_LIMIT as u64;

/// `[auth]`: who may use the console and the API. The console owns the keys of this table.
pub type AuthSettings = deck_web::AuthConfig;

//! `Engine::builder`: an engine started with more than a store, handlers and a config — the
//! recurring schedules it declares.
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn deck_engine::Store>) -> Result<(), Box<dyn std::error::Error>> {
//! use deck_engine::{Engine, HandlerRegistry, ScheduleDefinition, ScheduleJob, ScheduleSpec};
//! let mut handlers = HandlerRegistry::new();
//! handlers.register("report.nightly", |_ctx, _payload: serde_json::Value| async move {
//!     Ok(serde_json::json!({"rows": 0}))
//! });
//! let nightly = ScheduleDefinition {
//!     name: "nightly-report".into(),
//!     spec: ScheduleSpec::Cron("0 2 * * *".into()),
//!     time_zone: "Europe/Berlin".into(),
//!     job: ScheduleJob {
//!         queue: "reports".into(),
//!         job_type: "report.nightly".into(),
//!         payload: String::new(),
//!         priority: 0,
//!         tags: vec![],
//!         max_attempts: None,
//!         expires_after_secs: Some(3600),
//!     },
//!     misfire: Default::default(),
//!     overlap: Default::default(),
//! };
//! let engine = Engine::builder(store).handlers(handlers).schedule(nightly).start().await?;
//! # engine.shutdown().await; Ok(()) }
//! ```

use std::sync::Arc;

use super::{EMBEDDED_ACTOR, Engine, EngineError};
use crate::config::{ConfigError, ConfigProblem, EngineConfig};
use crate::handler::HandlerRegistry;
use crate::ops::DeclareReport;
use crate::schedule::{self, ScheduleDefinition};
use crate::store::Store;

/// Builds and starts an [`Engine`].
pub struct EngineBuilder {
    store: Arc<dyn Store>,
    handlers: HandlerRegistry,
    config: EngineConfig,
    schedules: Option<Vec<ScheduleDefinition>>,
    declared_by: String,
}

impl Engine {
    /// Start building an engine on `store` (no handlers, the default config, no schedules).
    pub fn builder(store: Arc<dyn Store>) -> EngineBuilder {
        EngineBuilder {
            store,
            handlers: HandlerRegistry::new(),
            config: EngineConfig::default(),
            schedules: None,
            declared_by: EMBEDDED_ACTOR.to_string(),
        }
    }
}

impl EngineBuilder {
    pub fn handlers(mut self, handlers: HandlerRegistry) -> Self {
        self.handlers = handlers;
        self
    }

    pub fn config(mut self, config: EngineConfig) -> Self {
        self.config = config;
        self
    }

    /// Declare a recurring schedule. Once any is declared, the declared list is the whole
    /// truth at start: schedules declared at an earlier start and missing now are paused.
    pub fn schedule(mut self, definition: ScheduleDefinition) -> Self {
        self.schedules.get_or_insert_with(Vec::new).push(definition);
        self
    }

    /// Declare the whole list at once; an empty list pauses every schedule declared before
    /// (a builder that never declares leaves the stored schedules alone).
    pub fn schedules(mut self, definitions: Vec<ScheduleDefinition>) -> Self {
        self.schedules = Some(definitions);
        self
    }

    /// The actor the audit log names for the declaration's changes (`app` by default;
    /// `deck serve` says `deck.toml`).
    pub fn declared_by(mut self, actor: impl Into<String>) -> Self {
        self.declared_by = actor.into();
        self
    }

    /// Check the schedules, start the engine, then make the stored declared schedules match
    /// the declared list. Bad schedules fail the start before anything runs, every problem
    /// named with its `schedules[i].field`.
    pub async fn start(self) -> Result<Engine, EngineError> {
        Ok(self.start_with_report().await?.0)
    }

    /// [`EngineBuilder::start`], also answering what the declaration changed (`None`
    /// when no schedules were declared).
    pub async fn start_with_report(self) -> Result<(Engine, Option<DeclareReport>), EngineError> {
        if let Some(schedules) = &self.schedules {
            let problems: Vec<ConfigProblem> = schedules
                .iter()
                .enumerate()
                .filter_map(|(i, def)| {
                    schedule::validate_definition(def)
                        .err()
                        .map(|e| ConfigProblem {
                            key: format!("schedules[{i}].{}", e.field),
                            problem: e.problem,
                            help: e.help,
                        })
                })
                .collect();
            if !problems.is_empty() {
                return Err(ConfigError { problems }.into());
            }
        }
        let engine = Engine::start(self.store, self.handlers, self.config).await?;
        let report = match self.schedules {
            Some(schedules) => {
                match engine
                    .operations()
                    .declare_schedules(&self.declared_by, schedules)
                    .await
                {
                    Ok(report) => Some(report),
                    Err(e) => {
                        engine.shutdown().await;
                        return Err(e.into());
                    }
                }
            }
            None => None,
        };
        Ok((engine, report))
    }
}

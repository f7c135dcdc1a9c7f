//! `[[schedules]]`: recurring schedules declared in `deck.toml`, in the file's own words
//! (`cron` or `every = "15m"`, the job's fields at the top level, durations as text), turned
//! into the engine's `ScheduleDefinition`s. Declared at every start through the operations
//! layer (audited as `deck.toml`); see `EngineBuilder::schedules` for what happens to a
//! schedule removed from the file (paused).

use std::time::Duration;

use deck_engine::{MisfirePolicy, OverlapPolicy, ScheduleDefinition, ScheduleJob, ScheduleSpec};
use serde::{Deserialize, Serialize};

/// One `[[schedules]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleFileSettings {
    pub name: String,
    /// 5 fields (minute first), 6 (seconds first) or an alias such as `@hourly`.
    #[serde(default)]
    pub cron: Option<String>,
    /// A fixed interval instead of `cron`, aligned to the Unix epoch: `"15m"`, `"1h"`.
    #[serde(default)]
    pub every: Option<String>,
    #[serde(default = "utc")]
    pub time_zone: String,
    pub queue: String,
    pub job_type: String,
    /// Any TOML value; the job gets it as JSON.
    #[serde(default)]
    pub payload: Option<serde_json::Value>,
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// The job expires (DLQ, `Expired`) if not started this long after its occurrence.
    #[serde(default)]
    pub expires_after: Option<String>,
    /// `run_once` (default), `run_all` (with `misfire_cap`, default 10) or `skip`.
    #[serde(default)]
    pub misfire: Option<String>,
    #[serde(default)]
    pub misfire_cap: Option<u32>,
    /// `allow` (default) or `skip_while_active`.
    #[serde(default)]
    pub overlap: Option<String>,
}

fn utc() -> String {
    "UTC".to_string()
}

/// A problem with one entry: the key under `schedules[i]`, what is wrong, how to fix it.
pub struct EntryProblem {
    pub key: String,
    pub problem: String,
    pub help: String,
}

fn problem(key: &str, problem: impl Into<String>, help: impl Into<String>) -> EntryProblem {
    EntryProblem {
        key: key.to_string(),
        problem: problem.into(),
        help: help.into(),
    }
}

fn duration(key: &str, text: &str) -> Result<Duration, EntryProblem> {
    humantime::parse_duration(text).map_err(|e| {
        problem(
            key,
            format!("{text:?} is not a duration ({e})"),
            "write it like \"30s\", \"15m\", \"1h\" or \"1d\"",
        )
    })
}

impl ScheduleFileSettings {
    /// The engine's definition, or the first problem (keys relative to the entry).
    pub fn definition(&self) -> Result<ScheduleDefinition, EntryProblem> {
        let spec = match (&self.cron, &self.every) {
            (Some(cron), None) => ScheduleSpec::Cron(cron.clone()),
            (None, Some(every)) => {
                let d = duration("every", every)?;
                if d.subsec_nanos() != 0 || d.as_secs() == 0 {
                    return Err(problem(
                        "every",
                        format!("{every:?} is not a whole number of seconds"),
                        "give an interval of at least 1s, in whole seconds",
                    ));
                }
                ScheduleSpec::EverySecs(d.as_secs())
            }
            (Some(_), Some(_)) => {
                return Err(problem(
                    "every",
                    "is given together with cron",
                    "give either cron = \"…\" or every = \"…\", not both",
                ));
            }
            (None, None) => {
                return Err(problem(
                    "cron",
                    "is missing (and so is every)",
                    "give cron = \"0 2 * * *\" (a cron expression) or every = \"15m\"",
                ));
            }
        };
        let misfire = match (self.misfire.as_deref(), self.misfire_cap) {
            (None | Some("run_once"), None) => MisfirePolicy::RunOnce,
            (Some("run_all"), cap) => MisfirePolicy::RunAll {
                cap: cap.unwrap_or(10),
            },
            (Some("skip"), None) => MisfirePolicy::Skip,
            (None | Some("run_once") | Some("skip"), Some(_)) => {
                return Err(problem(
                    "misfire_cap",
                    "is given without misfire = \"run_all\"",
                    "set misfire = \"run_all\" to catch up on missed occurrences, or remove \
                     misfire_cap",
                ));
            }
            (Some(other), _) => {
                return Err(problem(
                    "misfire",
                    format!("{other:?} is not a misfire policy"),
                    "use \"run_once\" (the default), \"run_all\" or \"skip\"",
                ));
            }
        };
        let overlap = match self.overlap.as_deref() {
            None | Some("allow") => OverlapPolicy::Allow,
            Some("skip_while_active") => OverlapPolicy::SkipWhileActive,
            Some(other) => {
                return Err(problem(
                    "overlap",
                    format!("{other:?} is not an overlap policy"),
                    "use \"allow\" (the default) or \"skip_while_active\"",
                ));
            }
        };
        let expires_after_secs = match &self.expires_after {
            Some(text) => Some(duration("expires_after", text)?.as_secs().max(1)),
            None => None,
        };
        let definition = ScheduleDefinition {
            name: self.name.clone(),
            spec,
            time_zone: self.time_zone.clone(),
            job: ScheduleJob {
                queue: self.queue.clone(),
                job_type: self.job_type.clone(),
                payload: self
                    .payload
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
                priority: self.priority,
                tags: self.tags.clone(),
                max_attempts: self.max_attempts,
                expires_after_secs,
            },
            misfire,
            overlap,
        };
        deck_engine::schedule::validate_definition(&definition).map_err(|e| {
            // The engine names the job's fields `job.…` and the interval `every_secs`; the
            // file writes them at the top level.
            let key = match e.field.as_str() {
                "every_secs" => "every".to_string(),
                "misfire.cap" => "misfire_cap".to_string(),
                "job.expires_after_secs" => "expires_after".to_string(),
                other => other.strip_prefix("job.").unwrap_or(other).to_string(),
            };
            problem(&key, e.problem, e.help)
        })?;
        Ok(definition)
    }
}

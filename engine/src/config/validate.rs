//! The rules an engine configuration is held to: ranges, and settings that only make sense
//! together. Each problem names its key (as written under `[engine]`), says what is wrong
//! and how to fix it.

use std::fmt;
use std::time::Duration;

use super::{EngineConfig, MAX_PREFETCH, MAX_RESULT_BYTES, MAX_WORKERS};
use crate::validation::validate_name;

/// One thing wrong with a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The key under `[engine]`: `poll_interval`, `rescue.zombie_timeout`.
    pub key: String,
    pub problem: String,
    pub help: String,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}; {}", self.key, self.problem, self.help)
    }
}

/// Configuration problems, all of them, each with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid engine configuration:\n  - {}", list(.problems))]
pub struct ConfigError {
    pub problems: Vec<ConfigProblem>,
}

fn list(problems: &[ConfigProblem]) -> String {
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    lines.join("\n  - ")
}

/// What a check found: problems (the configuration cannot run) and warnings (it can, but
/// probably not as meant), each warning starting with its key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigReport {
    pub problems: Vec<ConfigProblem>,
    pub warnings: Vec<String>,
}

impl ConfigReport {
    fn problem(&mut self, key: &str, problem: impl Into<String>, help: impl Into<String>) {
        self.problems.push(ConfigProblem {
            key: key.to_string(),
            problem: problem.into(),
            help: help.into(),
        });
    }

    fn at_least(&mut self, key: &str, value: Duration, min: Duration) {
        if value < min {
            self.problem(
                key,
                format!("{} is too short", human(value)),
                format!("use at least {}", human(min)),
            );
        }
    }
}

const MIN_POLL: Duration = Duration::from_millis(100);
const WARN_POLL: Duration = Duration::from_secs(10);
const MAX_EVENT_CAPACITY: usize = 1_000_000;

impl EngineConfig {
    /// Every problem and warning at once.
    pub fn check(&self) -> ConfigReport {
        let mut r = ConfigReport::default();
        if let Some(name) = &self.instance_name
            && let Err(e) = validate_name("instance name", name)
        {
            r.problem("instance_name", e.problem, e.help);
        }
        if let Some(queues) = &self.queues {
            if queues.is_empty() {
                r.problem(
                    "queues",
                    "is an empty list, so this instance would work no queue",
                    "name at least one queue, or leave it unset to work every queue (or set \
                     run_workers = false for a producer-only instance)",
                );
            }
            for q in queues {
                if let Err(e) = validate_name("queue", q) {
                    r.problem("queues", format!("queue {q:?} {}", e.problem), e.help);
                }
            }
        }
        if let Some(w) = self.worker_count
            && (w == 0 || w > MAX_WORKERS)
        {
            r.problem(
                "workers",
                format!("{w} is out of range"),
                format!(
                    "use 1 to {MAX_WORKERS}; to run no workers in this instance set \
                     run_workers = false (--no-workers)"
                ),
            );
        }
        if self.prefetch == 0 || self.prefetch > MAX_PREFETCH {
            r.problem(
                "prefetch",
                format!("{} is out of range", self.prefetch),
                format!("use 1 to {MAX_PREFETCH} (default 100)"),
            );
        }
        if self.poll_interval < MIN_POLL {
            r.problem(
                "poll_interval",
                format!(
                    "{} is below the 100ms minimum; polling that often loads the database for \
                     nothing",
                    human(self.poll_interval)
                ),
                "use 100ms or more (jobs enqueued by this process wake its workers at once \
                 anyway)",
            );
        }
        if self.schedule_interval
            > Duration::from_secs(crate::schedule::MISFIRE_GRACE_SECS as u64 / 2)
        {
            r.warnings.push(format!(
                "schedule_interval = {} is over {} s: occurrences found that late count as \
                 misfires, and a schedule with misfire = skip would skip them",
                human(self.schedule_interval),
                crate::schedule::MISFIRE_GRACE_SECS / 2
            ));
        }
        if self.poll_interval > WARN_POLL {
            r.warnings.push(format!(
                "poll_interval = {} is over 10s: jobs enqueued by other processes may wait \
                 that long before they start",
                human(self.poll_interval)
            ));
        }
        for (key, value, min) in [
            (
                "heartbeat_interval",
                self.heartbeat_interval,
                Duration::from_millis(100),
            ),
            (
                "execution_timeout",
                self.execution_timeout,
                Duration::from_millis(100),
            ),
            (
                "timeout_check_interval",
                self.timeout_check_interval,
                Duration::from_millis(10),
            ),
            (
                "shutdown_flush_timeout",
                self.shutdown_flush_timeout,
                Duration::from_millis(1),
            ),
            (
                "rescue_interval",
                self.rescue_interval,
                Duration::from_secs(1),
            ),
            (
                "retention_interval",
                self.retention_interval,
                Duration::from_secs(1),
            ),
            (
                "schedule_interval",
                self.schedule_interval,
                Duration::from_millis(10),
            ),
            (
                "wait_poll_interval",
                self.wait_poll_interval,
                Duration::from_millis(10),
            ),
            (
                "instance_heartbeat_interval",
                self.instance_heartbeat_interval,
                Duration::from_millis(100),
            ),
            (
                "rescue.fetched_timeout",
                self.rescue.fetched_timeout,
                Duration::from_secs(1),
            ),
            (
                "rescue.zombie_timeout",
                self.rescue.default_zombie_timeout,
                Duration::from_secs(1),
            ),
            (
                "rescue.dead_instance_timeout",
                self.rescue.dead_instance_timeout,
                Duration::from_secs(1),
            ),
            (
                "breaker.window",
                self.breaker.window,
                Duration::from_millis(1),
            ),
            (
                "breaker.open_for",
                self.breaker.open_for,
                Duration::from_millis(1),
            ),
            (
                "breaker.defer",
                self.breaker.defer,
                Duration::from_millis(1),
            ),
        ] {
            r.at_least(key, value, min);
        }
        // Heartbeats are jittered up to +20 %; a zombie timeout inside two beats would
        // dead-letter healthy jobs whose next beat is merely late.
        if self.rescue.default_zombie_timeout < self.heartbeat_interval * 2 {
            r.problem(
                "rescue.zombie_timeout",
                format!(
                    "{} is shorter than two heartbeats (heartbeat_interval = {}), so running \
                     jobs would be taken for zombies",
                    human(self.rescue.default_zombie_timeout),
                    human(self.heartbeat_interval)
                ),
                "make the zombie timeout at least twice the heartbeat interval",
            );
        }
        if self.rescue.dead_instance_timeout < self.instance_heartbeat_interval * 2 {
            r.problem(
                "rescue.dead_instance_timeout",
                format!(
                    "{} is shorter than two instance heartbeats (instance_heartbeat_interval \
                     = {}), so live instances would be taken for dead ones",
                    human(self.rescue.dead_instance_timeout),
                    human(self.instance_heartbeat_interval)
                ),
                "make it at least twice instance_heartbeat_interval",
            );
        }
        if self.result_max_bytes == 0 || self.result_max_bytes > MAX_RESULT_BYTES {
            r.problem(
                "result_max_bytes",
                format!("{} is out of range", self.result_max_bytes),
                format!("use 1 to {MAX_RESULT_BYTES} bytes (default 1048576 = 1 MiB)"),
            );
        }
        if self.breaker.failure_threshold == 0 {
            r.problem(
                "breaker.failure_threshold",
                "0 would open every circuit at once",
                "use 1 or more (default 5)",
            );
        }
        if self.event_capacity == 0 || self.event_capacity > MAX_EVENT_CAPACITY {
            r.problem(
                "event_capacity",
                format!("{} is out of range", self.event_capacity),
                format!("use 1 to {MAX_EVENT_CAPACITY} (default 1024)"),
            );
        }
        r
    }

    /// Every problem at once, or the warnings (worth logging) of a configuration that can run.
    pub fn validate(&self) -> Result<Vec<String>, ConfigError> {
        let report = self.check();
        if report.problems.is_empty() {
            Ok(report.warnings)
        } else {
            Err(ConfigError {
                problems: report.problems,
            })
        }
    }
}

/// `1m 30s`, `250ms`: durations the way the file writes them.
pub(crate) fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(c: &EngineConfig) -> Vec<String> {
        c.check().problems.into_iter().map(|p| p.key).collect()
    }

    #[test]
    fn defaults_are_valid_without_warnings() {
        assert_eq!(EngineConfig::default().check(), ConfigReport::default());
    }

    #[test]
    fn poll_interval_below_100ms_is_refused_and_above_10s_warned() {
        let mut c = EngineConfig {
            poll_interval: Duration::from_millis(99),
            ..EngineConfig::default()
        };
        assert_eq!(keys(&c), ["poll_interval"]);
        c.poll_interval = Duration::from_millis(100);
        assert!(keys(&c).is_empty());
        c.poll_interval = Duration::from_secs(11);
        let report = c.check();
        assert!(report.problems.is_empty());
        assert!(
            report.warnings[0].starts_with("poll_interval"),
            "{report:?}"
        );
    }

    #[test]
    fn the_zombie_timeout_must_cover_two_heartbeats() {
        let mut c = EngineConfig {
            heartbeat_interval: Duration::from_secs(10),
            ..EngineConfig::default()
        };
        c.rescue.default_zombie_timeout = Duration::from_secs(19);
        assert_eq!(keys(&c), ["rescue.zombie_timeout"]);
        c.rescue.default_zombie_timeout = Duration::from_secs(20);
        assert!(keys(&c).is_empty());
        c.rescue.dead_instance_timeout = Duration::from_secs(9);
        assert_eq!(keys(&c), ["rescue.dead_instance_timeout"]);
    }

    #[test]
    fn every_problem_is_listed_with_its_fix() {
        let c = EngineConfig {
            worker_count: Some(0),
            prefetch: MAX_PREFETCH + 1,
            queues: Some(Vec::new()),
            event_capacity: 0,
            ..EngineConfig::default()
        };
        let err = c.validate().unwrap_err();
        let text = err.to_string();
        assert_eq!(
            keys(&c),
            ["queues", "workers", "prefetch", "event_capacity"],
            "{text}"
        );
        assert!(
            text.contains("workers: 0 is out of range; use 1 to 10000"),
            "{text}"
        );
    }

    #[test]
    fn the_file_keys_are_the_documented_ones() {
        let c: EngineConfig = serde_json::from_value(serde_json::json!({
            "workers": 4,
            "poll_interval": "250ms",
            "queues": "a, b",
            "rescue": { "zombie_timeout": "2m" },
            "breaker": { "defer": "1s" }
        }))
        .unwrap();
        assert_eq!(c.worker_count, Some(4));
        assert_eq!(c.poll_interval, Duration::from_millis(250));
        assert_eq!(c.queues, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(c.rescue.default_zombie_timeout, Duration::from_secs(120));
        assert_eq!(
            c.rescue.fetched_timeout,
            Duration::from_secs(600),
            "default kept"
        );
        assert_eq!(c.breaker.defer, Duration::from_secs(1));
        assert_eq!(c.prefetch, 100, "default kept");
    }
}

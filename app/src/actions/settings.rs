//! Settings actions on the admin page: engine settings, and retention run now.

use leptos::prelude::*;
use leptos::server_fn::error::ServerFnError;

#[cfg(feature = "ssr")]
use super::{Done, confirmed, finish, operator};

#[allow(clippy::too_many_arguments)]
#[server(prefix = "/fn", endpoint = "settings/save")]
pub async fn settings_save(
    worker_count: String,
    max_attempts: String,
    base_delay: String,
    max_delay: String,
    jitter: String,
    max_job_age: String,
    archive_days: String,
    dlq_days: String,
    metrics_days: String,
    back: String,
) -> Result<(), ServerFnError> {
    let outcome = async {
        let (console, who) = operator().await?;
        // Numbers here; their ranges are the engine's (`validation::SETTING_RANGES`).
        let mut problems = Vec::new();
        let mut num = |name: &str, v: &str| -> u64 {
            v.trim().parse::<u64>().unwrap_or_else(|_| {
                problems.push(format!("{name} must be a whole number (got {v:?})"));
                0
            })
        };
        let narrow = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let mut durations = Vec::new();
        let mut duration = |name: &str, v: &str| {
            crate::format::parse_duration_input(name, v).unwrap_or_else(|e| {
                durations.push(e);
                std::time::Duration::ZERO
            })
        };
        let millis = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let base_delay_ms = millis(duration("base delay", &base_delay));
        let max_delay_ms = millis(duration("max delay", &max_delay));
        let jitter_ms = millis(duration("jitter", &jitter));
        let max_job_age_secs = duration("max job age", &max_job_age).as_secs();
        let settings = deck_engine::EngineSettings {
            worker_count: narrow(num("workers", &worker_count)),
            retry: deck_engine::RetrySettings {
                max_attempts: narrow(num("max attempts", &max_attempts)),
                base_delay_ms,
                max_delay_ms,
                jitter_ms,
                max_job_age_secs,
            },
            retention: deck_engine::RetentionSettings {
                archive_days: narrow(num("archive retention", &archive_days)),
                dlq_days: narrow(num("dead-letter retention", &dlq_days)),
                metrics_days: narrow(num("metrics retention", &metrics_days)),
            },
        };
        problems.extend(durations);
        if !problems.is_empty() {
            return Err(format!("Not saved: {}.", problems.join("; ")));
        }
        console
            .ops()
            .save_settings(&who.name, settings)
            .await
            .map_err(|e| format!("Not saved: {e}"))?;
        Ok(Done::msg(
            "Settings saved; every instance applies them now.",
        ))
    }
    .await;
    finish(&back, outcome)
}

#[server(prefix = "/fn", endpoint = "settings/prune")]
pub async fn settings_prune(confirm: Option<String>, back: String) -> Result<(), ServerFnError> {
    let outcome = async {
        let (console, who) = operator().await?;
        confirmed(&confirm)?;
        let report = console
            .ops()
            .prune_now(&who.name)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Done::msg(format!(
            "Pruned {} archived, {} dead, {} metric rows.",
            report.archive, report.dlq, report.metric_buckets
        )))
    }
    .await;
    finish(&back, outcome)
}

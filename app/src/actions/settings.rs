//! Settings actions on the admin page: engine settings, and retention run now.

use leptos::prelude::*;
use leptos::server_fn::error::ServerFnError;

#[cfg(feature = "ssr")]
use super::{Done, act, confirmed};

/// The engine settings form, exactly as typed: numbers and durations (`500ms`, `10m`) as
/// text, read into `EngineSettings` by [`SettingsForm::settings`].
/// A field the browser leaves out is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SettingsForm {
    pub worker_count: String,
    pub max_attempts: String,
    pub base_delay: String,
    pub max_delay: String,
    pub jitter: String,
    pub max_job_age: String,
    pub archive_days: String,
    pub dlq_days: String,
    pub metrics_days: String,
}

#[cfg(feature = "ssr")]
impl SettingsForm {
    /// The settings the form asks for, or every field that is not a number or a duration.
    /// Only the shape is read here; their ranges are the engine's
    /// (`validation::SETTING_RANGES`), checked by the operations layer.
    fn settings(&self) -> Result<deck_engine::EngineSettings, String> {
        let mut problems = Vec::new();
        let mut num = |name: &str, v: &str| -> u32 {
            match v.trim().parse::<u64>() {
                Ok(n) => u32::try_from(n).unwrap_or(u32::MAX),
                Err(_) => {
                    problems.push(format!("{name} must be a whole number (got {v:?})"));
                    0
                }
            }
        };
        let worker_count = num("workers", &self.worker_count);
        let max_attempts = num("max attempts", &self.max_attempts);
        let archive_days = num("archive retention", &self.archive_days);
        let dlq_days = num("dead-letter retention", &self.dlq_days);
        let metrics_days = num("metrics retention", &self.metrics_days);
        let mut duration = |name: &str, v: &str| {
            crate::format::parse_duration_input(name, v).unwrap_or_else(|e| {
                problems.push(e);
                std::time::Duration::ZERO
            })
        };
        let millis = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let base_delay_ms = millis(duration("base delay", &self.base_delay));
        let max_delay_ms = millis(duration("max delay", &self.max_delay));
        let jitter_ms = millis(duration("jitter", &self.jitter));
        let max_job_age_secs = duration("max job age", &self.max_job_age).as_secs();
        if !problems.is_empty() {
            return Err(format!("Not saved: {}.", problems.join("; ")));
        }
        Ok(deck_engine::EngineSettings {
            worker_count,
            retry: deck_engine::RetrySettings {
                max_attempts,
                base_delay_ms,
                max_delay_ms,
                jitter_ms,
                max_job_age_secs,
            },
            retention: deck_engine::RetentionSettings {
                archive_days,
                dlq_days,
                metrics_days,
            },
        })
    }
}

#[server(prefix = "/fn", endpoint = "settings/save")]
pub async fn settings_save(
    #[server(flatten)] form: SettingsForm,
    back: String,
) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        let settings = form.settings()?;
        console
            .ops()
            .save_settings(&who.name, settings)
            .await
            .map_err(|e| format!("Not saved: {e}"))?;
        Ok(Done::msg(
            "Settings saved; every instance applies them now.",
        ))
    })
    .await
}

#[server(prefix = "/fn", endpoint = "settings/prune")]
pub async fn settings_prune(confirm: Option<String>, back: String) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
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
    })
    .await
}

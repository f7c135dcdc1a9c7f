//! Queue actions on the queues page: pause, resume, and the limits form (bulkhead, timeouts,
//! lag thresholds, rate limit).

use leptos::prelude::*;
use leptos::server_fn::error::ServerFnError;

#[cfg(feature = "ssr")]
use super::{Done, act};

/// "100 starts per 60 s", or "none".
pub fn rate_limit_text(limit: Option<deck_engine::RateLimit>) -> String {
    limit.map_or_else(
        || "none".into(),
        |l| format!("{} starts per {} s", l.starts, l.per_secs),
    )
}

/// Optional positive number from a form field; empty clears the override.
#[cfg(feature = "ssr")]
fn optional_u32(field: &str, value: &Option<String>) -> Result<Option<u32>, String> {
    match value.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) => match v.parse::<u32>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(format!(
                "{field}: {v:?} is not a positive whole number (leave empty for the default)"
            )),
        },
    }
}

#[server(prefix = "/fn", endpoint = "queue/state")]
pub async fn queue_state(queue: String, op: String, back: String) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        let mut patch = deck_engine::QueuePatch::default();
        let done = match op.as_str() {
            "pause" => {
                patch.paused = Some(true);
                "paused"
            }
            "resume" => {
                patch.paused = Some(false);
                "resumed"
            }
            "hide" => {
                patch.hidden = Some(true);
                "hidden"
            }
            "show" => {
                patch.hidden = Some(false);
                "shown"
            }
            other => return Err(format!("unknown queue operation {other:?}")),
        };
        console
            .ops()
            .update_queue(&who.name, &queue, patch)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Done::msg(format!("Queue {queue} {done}.")))
    })
    .await
}

/// The queue limits form, exactly as typed; an empty or missing field clears the limit (the
/// default applies).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct QueueLimitsForm {
    pub queue: String,
    pub max_workers: Option<String>,
    pub zombie_timeout: Option<String>,
    pub execution_timeout: Option<String>,
    pub lag_warn: Option<String>,
    pub lag_crit: Option<String>,
    /// Starts allowed per `rate_per` seconds.
    pub rate_starts: Option<String>,
    pub rate_per: Option<String>,
}

#[cfg(feature = "ssr")]
impl QueueLimitsForm {
    /// The change the form asks for: every limit it shows, set or cleared. Only the shape is
    /// read here; the ranges are the rules table's, checked by the operations layer.
    fn patch(&self) -> Result<deck_engine::QueuePatch, String> {
        let rate_limit = match (
            optional_u32("rate limit starts", &self.rate_starts)?,
            optional_u32("rate limit period", &self.rate_per)?,
        ) {
            (None, None) => None,
            (Some(starts), per) => Some(deck_engine::RateLimit {
                starts,
                per_secs: per.unwrap_or(60),
            }),
            (None, Some(_)) => {
                return Err(
                    "rate limit: give the number of starts allowed per period too, or clear \
                     both to lift the limit"
                        .to_string(),
                );
            }
        };
        Ok(deck_engine::QueuePatch {
            rate_limit: Some(rate_limit),
            max_workers: Some(optional_u32("max workers", &self.max_workers)?),
            zombie_timeout_secs: Some(optional_u32("zombie timeout", &self.zombie_timeout)?),
            execution_timeout_secs: Some(optional_u32(
                "execution timeout",
                &self.execution_timeout,
            )?),
            lag_warn_secs: Some(optional_u32("lag warning", &self.lag_warn)?),
            lag_crit_secs: Some(optional_u32("lag critical", &self.lag_crit)?),
            ..Default::default()
        })
    }
}

#[server(prefix = "/fn", endpoint = "queue/limits")]
pub async fn queue_limits(
    #[server(flatten)] form: QueueLimitsForm,
    back: String,
) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        let patch = form.patch()?;
        let queue = form.queue;
        let saved = console
            .ops()
            .update_queue(&who.name, &queue, patch)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Done::msg(format!(
            "Queue {queue}: max workers {}, zombie timeout {}, execution timeout {}, rate limit {}.",
            saved
                .max_workers
                .map(|m| m.to_string())
                .unwrap_or_else(|| "unlimited".into()),
            saved
                .zombie_timeout_secs
                .map(|s| format!("{s} s"))
                .unwrap_or_else(|| "default".into()),
            saved
                .execution_timeout_secs
                .map(|s| format!("{s} s"))
                .unwrap_or_else(|| "default".into()),
            rate_limit_text(saved.rate_limit),
        )))
    })
    .await
}

//! Queue actions on the queues page: pause, resume, and the limits form (bulkhead, timeouts,
//! lag thresholds, rate limit).

use leptos::prelude::*;
use leptos::server_fn::error::ServerFnError;

#[cfg(feature = "ssr")]
use super::{Done, finish, operator};

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
    let outcome = async {
        let (console, who) = operator().await?;
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
    }
    .await;
    finish(&back, outcome)
}

#[allow(clippy::too_many_arguments)]
#[server(prefix = "/fn", endpoint = "queue/limits")]
pub async fn queue_limits(
    queue: String,
    max_workers: Option<String>,
    zombie_timeout: Option<String>,
    execution_timeout: Option<String>,
    lag_warn: Option<String>,
    lag_crit: Option<String>,
    rate_starts: Option<String>,
    rate_per: Option<String>,
    back: String,
) -> Result<(), ServerFnError> {
    let outcome = async {
        let (console, who) = operator().await?;
        let rate_limit = match (
            optional_u32("rate limit starts", &rate_starts)?,
            optional_u32("rate limit period", &rate_per)?,
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
        let patch = deck_engine::QueuePatch {
            rate_limit: Some(rate_limit),
            max_workers: Some(optional_u32("max workers", &max_workers)?),
            zombie_timeout_secs: Some(optional_u32("zombie timeout", &zombie_timeout)?),
            execution_timeout_secs: Some(optional_u32("execution timeout", &execution_timeout)?),
            lag_warn_secs: Some(optional_u32("lag warning", &lag_warn)?),
            lag_crit_secs: Some(optional_u32("lag critical", &lag_crit)?),
            ..Default::default()
        };
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
    }
    .await;
    finish(&back, outcome)
}

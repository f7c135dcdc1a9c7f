//! Instance actions on the overview page: quiet (claim nothing new) and resume.

use leptos::prelude::*;
use leptos::server_fn::error::ServerFnError;

#[cfg(feature = "ssr")]
use super::{Done, act};

/// Quiet an instance (it claims no new jobs and finishes what it runs and holds) or resume it.
#[server(prefix = "/fn", endpoint = "instance/state")]
pub async fn instance_state(
    instance: String,
    op: String,
    back: String,
) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        let (quiet, done) = match op.as_str() {
            "quiet" => (
                true,
                "quieted: it claims no new jobs and finishes what it holds",
            ),
            "resume" => (false, "resumed: it claims jobs again"),
            other => return Err(format!("unknown instance operation {other:?}")),
        };
        let applied = console
            .ops()
            .set_instance_quiet(&who.name, &instance, quiet)
            .await
            .map_err(|e| e.to_string())?;
        match applied {
            deck_engine::Applied::Applied => Ok(Done::msg(format!("Instance {instance} {done}."))),
            deck_engine::Applied::NotApplied => Err(format!(
                "No instance {instance} is registered; it may have stopped."
            )),
        }
    })
    .await
}

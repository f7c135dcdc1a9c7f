//! Schedule actions: create, edit, pause/resume, run now, delete. Each goes through the
//! operations layer under the signed-in operator's name (audited as `schedule.*`), and
//! answers with a redirect like every other action. A refused create or edit keeps what was
//! typed as a draft and goes back to the form, which shows the problem next to the field.

use leptos::prelude::*;
use leptos::server_fn::error::ServerFnError;

#[cfg(feature = "ssr")]
use super::{ActionResult, Done, act, confirmed, finish, operator};
#[cfg(feature = "ssr")]
use crate::pages::schedules::{next_run, schedule_url};
use crate::schedule_form::ScheduleForm;

#[server(prefix = "/fn", endpoint = "schedule/state")]
pub async fn schedule_state(name: String, op: String, back: String) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        let enabled = match op.as_str() {
            "pause" => false,
            "resume" => true,
            other => return Err(format!("unknown schedule operation {other:?}")),
        };
        let changed = console
            .ops()
            .set_schedule_enabled(&who.name, &name, enabled)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Done::msg(if enabled {
            match next_run(&changed, chrono::Utc::now()) {
                Ok(Some(next)) => format!(
                    "Schedule {name} resumed: next run {}.",
                    crate::format::zoned(next, &changed.definition.time_zone)
                ),
                _ => format!("Schedule {name} resumed."),
            }
        } else {
            format!(
                "Schedule {name} paused: its occurrences are skipped until it is resumed (they \
                 are not caught up on)."
            )
        }))
    })
    .await
}

#[server(prefix = "/fn", endpoint = "schedule/run")]
pub async fn schedule_run(name: String, back: String) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        let fired = console
            .ops()
            .run_schedule_now(&who.name, &name)
            .await
            .map_err(|e| e.to_string())?;
        match fired {
            deck_engine::FireOutcome::Enqueued(id) => Ok(Done::msg(format!(
                "Schedule {name}: job {id} enqueued now; its timing is unchanged."
            ))),
            deck_engine::FireOutcome::AlreadyHandled | deck_engine::FireOutcome::SkippedOverlap => {
                Err(format!("Schedule {name}: nothing was enqueued."))
            }
        }
    })
    .await
}

#[server(prefix = "/fn", endpoint = "schedule/delete")]
pub async fn schedule_delete(
    name: String,
    confirm: Option<String>,
    back: String,
) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        confirmed(&confirm)?;
        let applied = console
            .ops()
            .delete_schedule(&who.name, &name)
            .await
            .map_err(|e| e.to_string())?;
        if !applied.is_applied() {
            return Err(format!(
                "No schedule is named {name:?}: it was deleted already."
            ));
        }
        // Its own page is gone with it: back to the list.
        Ok(Done::to(
            "/schedules".into(),
            format!("Schedule {name} and its history deleted; the jobs it enqueued stay."),
        ))
    })
    .await
}

#[server(prefix = "/fn", endpoint = "schedule/create")]
pub async fn schedule_create(
    #[server(flatten)] form: ScheduleForm,
    back: String,
) -> Result<(), ServerFnError> {
    let outcome = save(form, None).await;
    finish(&back, outcome)
}

/// The form's `name` says which schedule is edited (a schedule is not renamed).
#[server(prefix = "/fn", endpoint = "schedule/edit")]
pub async fn schedule_edit(
    #[server(flatten)] form: ScheduleForm,
    back: String,
) -> Result<(), ServerFnError> {
    let name = form.name.clone();
    let outcome = save(form, Some(name)).await;
    finish(&back, outcome)
}

/// Create (`editing: None`) or edit a schedule from the form; a refusal goes back to the
/// form with what was typed and the problem.
#[cfg(feature = "ssr")]
async fn save(form: ScheduleForm, editing: Option<String>) -> ActionResult {
    use deck_engine::StoreError;
    use deck_engine::validation::ValidationError;

    let (console, who) = operator().await?;
    let saved = match form.definition() {
        Err(e) => Err(StoreError::Invalid(e)),
        Ok(def) => match &editing {
            None => console.ops().create_schedule(&who.name, def).await,
            Some(_) => console.ops().edit_schedule(&who.name, def).await,
        },
    };
    let verb = if editing.is_some() {
        "saved"
    } else {
        "created"
    };
    let problem = match saved {
        Ok(s) => {
            let name = s.name().to_string();
            let next = match next_run(&s, chrono::Utc::now()) {
                Ok(Some(t)) => format!(
                    "; next run {}",
                    crate::format::zoned(t, &s.definition.time_zone)
                ),
                _ => String::new(),
            };
            let paused = if s.enabled { "" } else { " (it is paused)" };
            return Ok(Done::to(
                schedule_url(&name),
                format!("Schedule {name} {verb}{next}{paused}."),
            ));
        }
        Err(StoreError::ScheduleNotFound(name)) if editing.is_some() => {
            return Err(format!(
                "No schedule is named {name:?}: it was deleted while you edited it. Create it \
                 again from the list."
            ));
        }
        Err(StoreError::Invalid(e)) => e,
        Err(StoreError::Conflict { field, message, .. }) => ValidationError::new(
            field.unwrap_or("name"),
            message,
            "open the existing schedule from the list to change it",
        ),
        Err(other) => ValidationError::new("", other.to_string(), ""),
    };
    let page = match &editing {
        None => "/schedules".to_string(),
        Some(name) => schedule_url(name),
    };
    let message = if problem.field.is_empty() {
        format!("The schedule was not {verb}: {}", problem.problem)
    } else {
        format!("The schedule was not {verb}: {problem}")
    };
    let id = console.put_schedule_draft(crate::state::ScheduleDraft {
        form,
        problem,
        editing,
        created: std::time::Instant::now(),
    });
    Ok(Done {
        to: Some(crate::pages::schedules::with_param(&page, "form", &id)),
        message,
        error: true,
    })
}

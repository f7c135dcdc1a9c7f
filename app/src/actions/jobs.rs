//! Job actions: on one job's page (run now, cancel, resurrect, purge, edit and resurrect)
//! and on a list (bulk by checked ids, and bulk by filter with its preview, on every list).

use leptos::prelude::*;
use leptos::server_fn::error::ServerFnError;

#[cfg(feature = "ssr")]
use super::{Done, act, confirmed, parse_id};

#[server(prefix = "/fn", endpoint = "job/cancel")]
pub async fn job_cancel(
    id: String,
    confirm: Option<String>,
    back: String,
) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        let job = parse_id(&id)?;
        // Stopping work in flight is asked first (the job page shows the box); a job that has
        // not started yet can be resurrected from the dead-letter queue, so it is not.
        let running = console
            .store()
            .get_job(job)
            .await
            .map_err(|e| e.to_string())?
            .is_some_and(|j| j.state == deck_engine::JobState::Processing);
        if running && confirm.as_deref() != Some("yes") {
            return Err(
                "The job is running: tick \"stop it while it runs\" to cancel it.".to_string(),
            );
        }
        let result = console
            .ops()
            .cancel(&who.name, job)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Done::msg(match result {
            deck_engine::CancelOutcome::Cancelled => {
                "Job cancelled: moved to the dead-letter queue."
            }
            deck_engine::CancelOutcome::Requested => {
                "Cancel requested: the worker running it stops it at its next heartbeat."
            }
            deck_engine::CancelOutcome::NotFound => {
                "Nothing to cancel: the job already finished or is gone."
            }
        }))
    })
    .await
}

#[server(prefix = "/fn", endpoint = "job/run_now")]
pub async fn job_run_now(id: String, back: String) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        let job = parse_id(&id)?;
        let applied = console
            .ops()
            .run_now(&who.name, job)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Done::msg(if applied.is_applied() {
            "Due now: the next free worker takes it. No attempt was spent."
        } else {
            "Nothing to do: the job was already due."
        }))
    })
    .await
}

#[server(prefix = "/fn", endpoint = "job/resurrect")]
pub async fn job_resurrect(id: String, back: String) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        let job = parse_id(&id)?;
        let applied = console
            .ops()
            .resurrect(&who.name, job, None)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Done::msg(if applied.is_applied() {
            "Job resurrected: pending again with fresh attempts."
        } else {
            "Nothing to resurrect: the job is no longer dead."
        }))
    })
    .await
}

#[server(prefix = "/fn", endpoint = "job/purge")]
pub async fn job_purge(
    id: String,
    source: String,
    confirm: Option<String>,
    back: String,
) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        confirmed(&confirm)?;
        let job = parse_id(&id)?;
        let pillar: deck_engine::Pillar = source
            .parse()
            .map_err(|e: deck_engine::ParseEnumError| e.to_string())?;
        let n = console
            .ops()
            .purge(&who.name, pillar, job)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(
                "Nothing purged: the job moved on (only pending active jobs can be purged).".into(),
            );
        }
        Ok(Done::msg(format!("Job {id} purged.")))
    })
    .await
}

/// Turn the edit form's text into a `JobEdit` holding only what changed.
#[cfg(feature = "ssr")]
fn build_edit(
    job: &deck_engine::Job,
    payload: &str,
    tags: &str,
    priority: &str,
    queue: &str,
) -> Result<deck_engine::JobEdit, String> {
    let parsed: serde_json::Value = serde_json::from_str(payload)
        .map_err(|e| format!("The payload is not valid JSON: {e}. Fix it and preview again."))?;
    let current: Option<serde_json::Value> = serde_json::from_str(&job.payload).ok();
    let tags: Vec<String> = tags
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    let priority: i32 = priority
        .trim()
        .parse()
        .map_err(|_| format!("Priority {priority:?} is not a whole number."))?;
    let queue = queue.trim().to_string();
    let edit = deck_engine::JobEdit {
        payload: (current.as_ref() != Some(&parsed))
            .then(|| serde_json::to_string(&parsed).unwrap_or_else(|_| payload.to_string())),
        tags: (tags != job.tags).then_some(tags),
        priority: (priority != job.priority).then_some(priority),
        queue: (queue != job.queue).then_some(queue),
    };
    deck_engine::validation::validate_edit(&edit).map_err(|e| e.to_string())?;
    Ok(edit)
}

/// The edit form's two steps: `preview` with the whole job as typed (only what differs from
/// the stored job becomes the edit), then `save` or `save_resurrect` with the draft the
/// preview stored. A field the browser leaves out is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct JobEditForm {
    pub id: String,
    pub step: String,
    pub payload: String,
    pub tags: String,
    pub priority: String,
    pub queue: String,
    pub draft: String,
}

#[server(prefix = "/fn", endpoint = "job/edit")]
pub async fn job_edit(
    #[server(flatten)] form: JobEditForm,
    back: String,
) -> Result<(), ServerFnError> {
    let JobEditForm {
        id,
        step,
        payload,
        tags,
        priority,
        queue,
        draft,
    } = form;
    act(&back, async move |console, who| {
        let job_id = parse_id(&id)?;
        let page = format!("/jobs/{job_id}");
        match step.as_str() {
            "preview" => {
                let job = console
                    .store()
                    .get_job(job_id)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("job {job_id} is gone"))?;
                let built = build_edit(&job, &payload, &tags, &priority, &queue);
                let error = built.as_ref().err().cloned();
                let draft_id = console.put_draft(crate::state::Draft {
                    job: job_id,
                    edit: built.clone().unwrap_or_default(),
                    payload_text: payload,
                    tags_text: tags,
                    priority_text: priority,
                    queue_text: queue,
                    error: error.clone(),
                    created: std::time::Instant::now(),
                });
                match built {
                    Err(e) => Ok(Done {
                        to: Some(format!("{page}?edit=1&draft={draft_id}")),
                        message: e,
                        error: true,
                    }),
                    Ok(edit) if edit.is_empty() => Err("Nothing changed.".into()),
                    Ok(_) => Ok(Done::to(
                        format!("{page}?draft={draft_id}"),
                        "Review the changes, then save.",
                    )),
                }
            }
            "save" | "save_resurrect" => {
                let d = console
                    .take_draft(&draft)
                    .filter(|d| d.job == job_id && d.error.is_none())
                    .ok_or("This edit expired or was already saved; edit again.")?;
                if step == "save_resurrect" {
                    console
                        .ops()
                        .resurrect(&who.name, job_id, Some(d.edit))
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(Done::to(
                        page,
                        "Saved and resurrected: the job is pending again.",
                    ))
                } else {
                    console
                        .ops()
                        .edit(&who.name, job_id, d.edit)
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(Done::to(page, "Saved. The original payload is kept."))
                }
            }
            other => Err(format!("unknown edit step {other:?}")),
        }
    })
    .await
}

// ------------------------------------------------------------------------------- many jobs

#[server(prefix = "/fn", endpoint = "jobs/bulk")]
pub async fn jobs_bulk(
    source: String,
    action: String,
    ids: Option<Vec<String>>,
    confirm: Option<String>,
    back: String,
) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        let pillar: deck_engine::Pillar = source
            .parse()
            .map_err(|e: deck_engine::ParseEnumError| e.to_string())?;
        let action: deck_engine::BulkAction = action
            .parse()
            .map_err(|e: deck_engine::ParseEnumError| e.to_string())?;
        let ids = ids.unwrap_or_default();
        if ids.is_empty() {
            return Err("Select some jobs first (the boxes on the left).".into());
        }
        if action.is_destructive() {
            confirmed(&confirm)?;
        }
        let parsed = ids
            .iter()
            .map(|i| parse_id(i))
            .collect::<Result<Vec<_>, _>>()?;
        let n = console
            .ops()
            .bulk_by_ids(&who.name, action, pillar, &parsed)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Done::msg(format!(
            "{}: {n} of {} selected job(s).",
            action.as_str(),
            ids.len()
        )))
    })
    .await
}

#[server(prefix = "/fn", endpoint = "bulk")]
pub async fn bulk_by_filter(
    /// The list's source; dead letters when absent (the form before other lists had one).
    source: Option<String>,
    filter: String,
    action: String,
    priority: Option<String>,
    cap: Option<String>,
    confirm: Option<String>,
    back: String,
) -> Result<(), ServerFnError> {
    act(&back, async move |console, who| {
        let source: deck_engine::Pillar = source
            .as_deref()
            .unwrap_or("dlq")
            .parse()
            .map_err(|e: deck_engine::ParseEnumError| e.to_string())?;
        let action = crate::pages::bulk::parse_action(&action, priority.as_deref())?;
        action.check_source(source).map_err(|e| e.to_string())?;
        let word = action.confirm_word();
        if let Some(word) = word
            && confirm.as_deref().map(str::trim) != Some(word)
        {
            return Err(format!("Type {word} in the confirmation box to run this."));
        }
        let opts = console.options().clone();
        let cap = match cap.as_deref().map(str::trim) {
            None | Some("") => opts.bulk_cap_default,
            Some(c) => c
                .parse::<u32>()
                .ok()
                .filter(|c| *c > 0)
                .ok_or(format!("cap {c:?} is not a positive number"))?,
        }
        .min(opts.bulk_cap_max);
        let mut params = crate::list_params::parse(&crate::request::Query::parse(&filter), 50);
        params.query.source = source;
        if !params.problems.is_empty() {
            return Err(format!(
                "The filter has problems: {}",
                params.problems.join("; ")
            ));
        }
        let request = deck_engine::BulkRunRequest {
            action,
            source,
            filter: params.query.filter.clone(),
            cap,
        };
        let run = console
            .ops()
            .start_bulk(&who.name, request)
            .await
            .map_err(|e| e.to_string())?;
        console.remember_run_link(&run.id, format!("/jobs?{}", params.filter_query()));
        Ok(Done::to(
            crate::pages::bulk::run_url(source, &run.id),
            format!("{} started (at most {cap}).", action.as_str()),
        ))
    })
    .await
}

//! Every operator action, as a server function with a fixed endpoint under `FN_PREFIX`.
//!
//! They answer a plain form post with a redirect (302 for browsers) back to the page it came
//! from, carrying `ok=` or `err=` for the flash message — so all of them work with
//! JavaScript off. The session middleware has already checked the CSRF token and the
//! operator role; each action checks the role again, writes the audit log and emits an event.

use leptos::prelude::*;
use leptos::server_fn::error::ServerFnError;

pub mod schedules;

#[cfg(feature = "ssr")]
use crate::auth::Identity;
#[cfg(feature = "ssr")]
use crate::state::Console;

/// What an action reports: where to go and what to say.
#[cfg(feature = "ssr")]
struct Done {
    to: Option<String>,
    message: String,
    /// Shown as an error, though the action chose where to go (a rejected edit preview).
    error: bool,
}

#[cfg(feature = "ssr")]
impl Done {
    fn msg(message: impl Into<String>) -> Self {
        Done {
            to: None,
            message: message.into(),
            error: false,
        }
    }
    fn to(to: String, message: impl Into<String>) -> Self {
        Done {
            to: Some(to),
            message: message.into(),
            error: false,
        }
    }
}

#[cfg(feature = "ssr")]
type ActionResult = Result<Done, String>;

/// A redirect target taken from a request: a path on this site, or `/`. Every redirect
/// built from user input (the theme switch's `back`, every action's `back`) goes through here.
///
/// Browsers drop tabs and newlines anywhere in a URL and read `\\` as `/`, so `/\t/host` and
/// `/\\host` mean `//host`, another site. Hence: one leading `/` not followed by another, no
/// backslash, and no control character anywhere (tab, CR, LF, DEL, C1), which also keeps the
/// value a valid `Location` header, so it can never turn into a 500. Percent-escapes are left
/// as they are: the value goes into `Location` verbatim, and a browser reads `%2F`, `%5C` or
/// `%09` in a path as path bytes, never as a separator, so `/%2F%2Fhost` stays on this site;
/// decoding them would only refuse honest paths such as a search for `a%0Ab`.
#[cfg(feature = "ssr")]
pub(crate) fn safe_back(back: &str) -> String {
    let local = back.starts_with('/')
        && !back.starts_with("//")
        && !back.chars().any(|c| c == '\\' || c.is_control());
    if local {
        back.to_string()
    } else {
        "/".to_string()
    }
}

#[cfg(feature = "ssr")]
pub(crate) fn with_flash(url: &str, key: &str, message: &str) -> String {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let mut pairs: Vec<(String, String)> =
        serde_urlencoded::from_str::<Vec<(String, String)>>(query)
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| k != "ok" && k != "err")
            .collect();
    let message: String = message.chars().take(400).collect();
    pairs.push((key.to_string(), message));
    format!(
        "{path}?{}",
        serde_urlencoded::to_string(&pairs).unwrap_or_default()
    )
}

#[cfg(feature = "ssr")]
fn finish(back: &str, outcome: ActionResult) -> Result<(), ServerFnError> {
    let back = safe_back(back);
    let target = match outcome {
        Ok(done) => with_flash(
            &safe_back(done.to.as_deref().unwrap_or(&back)),
            if done.error { "err" } else { "ok" },
            &done.message,
        ),
        Err(message) => with_flash(&back, "err", &message),
    };
    leptos_axum::redirect(&target);
    Ok(())
}

#[cfg(feature = "ssr")]
async fn operator() -> Result<(Console, Identity), String> {
    let console = use_context::<Console>().ok_or("console is not configured")?;
    let axum::Extension(session): axum::Extension<crate::session::Session> =
        leptos_axum::extract().await.map_err(|e| e.to_string())?;
    if !session.can_act() {
        return Err(format!(
            "{} is a viewer: this needs the operator role",
            session.identity.name
        ));
    }
    Ok((console, session.identity))
}

#[cfg(feature = "ssr")]
fn parse_id(id: &str) -> Result<deck_engine::JobId, String> {
    id.parse().map_err(|_| format!("{id:?} is not a job id"))
}

#[cfg(feature = "ssr")]
fn confirmed(confirm: &Option<String>) -> Result<(), String> {
    if confirm.as_deref() == Some("yes") {
        Ok(())
    } else {
        Err("Tick the confirmation box first: this cannot be undone.".into())
    }
}

/// Optional positive number from a form field; empty clears the override.
#[cfg(feature = "ssr")]
/// "100 starts per 60 s", or "none".
pub fn rate_limit_text(limit: Option<deck_engine::RateLimit>) -> String {
    limit.map_or_else(
        || "none".into(),
        |l| format!("{} starts per {} s", l.starts, l.per_secs),
    )
}

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

// ------------------------------------------------------------------------------- queues

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

// ------------------------------------------------------------------------------- instances

/// Quiet an instance (it claims no new jobs and finishes what it runs and holds) or resume it.
#[server(prefix = "/fn", endpoint = "instance/state")]
pub async fn instance_state(
    instance: String,
    op: String,
    back: String,
) -> Result<(), ServerFnError> {
    let outcome = async {
        let (console, who) = operator().await?;
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

// ------------------------------------------------------------------------------- one job

#[server(prefix = "/fn", endpoint = "job/cancel")]
pub async fn job_cancel(
    id: String,
    confirm: Option<String>,
    back: String,
) -> Result<(), ServerFnError> {
    let outcome = async {
        let (console, who) = operator().await?;
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
    }
    .await;
    finish(&back, outcome)
}

#[server(prefix = "/fn", endpoint = "job/resurrect")]
pub async fn job_resurrect(id: String, back: String) -> Result<(), ServerFnError> {
    let outcome = async {
        let (console, who) = operator().await?;
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
    }
    .await;
    finish(&back, outcome)
}

#[server(prefix = "/fn", endpoint = "job/purge")]
pub async fn job_purge(
    id: String,
    source: String,
    confirm: Option<String>,
    back: String,
) -> Result<(), ServerFnError> {
    let outcome = async {
        let (console, who) = operator().await?;
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
    }
    .await;
    finish(&back, outcome)
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

#[allow(clippy::too_many_arguments)]
#[server(prefix = "/fn", endpoint = "job/edit")]
pub async fn job_edit(
    id: String,
    step: String,
    payload: Option<String>,
    tags: Option<String>,
    priority: Option<String>,
    queue: Option<String>,
    draft: Option<String>,
    back: String,
) -> Result<(), ServerFnError> {
    let outcome = async {
        let (console, who) = operator().await?;
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
                let (payload, tags, priority, queue) = (
                    payload.unwrap_or_default(),
                    tags.unwrap_or_default(),
                    priority.unwrap_or_default(),
                    queue.unwrap_or_default(),
                );
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
                let draft_id = draft.unwrap_or_default();
                let d = console
                    .take_draft(&draft_id)
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
    }
    .await;
    finish(&back, outcome)
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
    let outcome = async {
        let (console, who) = operator().await?;
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
        if action != deck_engine::BulkAction::Resurrect {
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
    }
    .await;
    finish(&back, outcome)
}

#[server(prefix = "/fn", endpoint = "dlq/bulk")]
pub async fn dlq_bulk(
    filter: String,
    action: String,
    cap: Option<String>,
    confirm: Option<String>,
    back: String,
) -> Result<(), ServerFnError> {
    let outcome = async {
        let (console, who) = operator().await?;
        let action: deck_engine::BulkAction = action
            .parse()
            .map_err(|e: deck_engine::ParseEnumError| e.to_string())?;
        if action == deck_engine::BulkAction::Cancel {
            return Err("Dead letters cannot be cancelled; resurrect or purge them.".into());
        }
        let word = crate::pages::bulk::confirm_word(action);
        if confirm.as_deref().map(str::trim) != Some(word) {
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
        params.query.source = deck_engine::Pillar::Dlq;
        if !params.problems.is_empty() {
            return Err(format!(
                "The filter has problems: {}",
                params.problems.join("; ")
            ));
        }
        let filter_url = params.filter_query();
        // Progress counts against what matched when the run started, not against the cap.
        let matching = console
            .store()
            .bulk_preview(deck_engine::Pillar::Dlq, &params.query.filter, 0)
            .await
            .map_err(|e| e.to_string())?
            .matching;
        let run_id = crate::state::random_token();
        console.put_run(crate::state::BulkRun {
            id: run_id.clone(),
            actor: who.name.clone(),
            action,
            filter_url: filter_url.clone(),
            cap,
            matching,
            done: 0,
            finished: false,
            error: None,
            started: chrono::Utc::now(),
        });
        crate::bulk_runner::spawn(
            console.clone(),
            run_id.clone(),
            who.name.clone(),
            action,
            params.query.filter,
            filter_url,
            cap,
        );
        Ok(Done::to(
            format!("/dlq/bulk/{run_id}"),
            format!("{} started (at most {cap}).", action.as_str()),
        ))
    }
    .await;
    finish(&back, outcome)
}

// ------------------------------------------------------------------------------- settings

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_are_kept_as_they_are() {
        for ok in [
            "/",
            "/jobs?source=dlq",
            "/jobs/0193a5c2-0000-7000-8000-000000000000?edit=1&draft=ab12",
            "/jobs?q=a+b%0Ac&ok=done",
            "/%2F%2Fevil.example",
            "/%5Cevil.example",
            "/%09/evil.example",
            "/queues#queue-emails",
            "/jobs?q=caf%C3%A9",
            "/jobs?q=café",
        ] {
            assert_eq!(safe_back(ok), ok, "{ok:?}");
        }
    }

    #[test]
    fn anything_that_could_leave_the_site_or_break_the_header_goes_home() {
        for hostile in [
            "",
            "jobs",
            "//evil.example/x",
            "///evil.example",
            "/\\evil.example",
            "\\\\evil.example",
            "/x\\y",
            "https://evil.example",
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "data:text/html,x",
            " /jobs",
            " //evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r/evil.example",
            "\t//evil.example",
            "/jobs\r\nSet-Cookie: deck_csrf=x",
            "/jobs\nLocation: //evil.example",
            "/jobs\u{7f}",
            "/jobs\u{85}",
            "/jobs\u{0}",
            "/jobs\u{1b}[31m",
        ] {
            assert_eq!(safe_back(hostile), "/", "{hostile:?}");
        }
    }

    #[test]
    fn flash_replaces_previous_flash() {
        assert_eq!(
            with_flash("/jobs?source=dlq&ok=old", "err", "bad & worse"),
            "/jobs?source=dlq&err=bad+%26+worse"
        );
    }
}

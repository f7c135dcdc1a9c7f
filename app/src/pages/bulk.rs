//! Bulk actions over a filter of any list: preview with a count and a sample, typed
//! confirmation for what cannot be undone, a cap per run, progress. The run itself is the
//! operations layer's (`Operations::start_bulk`), shared with the JSON API.

use chrono::Utc;
use deck_engine::{BulkAction, BulkPreview, BulkRun, ErrorGroup, Pillar};
use leptos::prelude::*;

use crate::components::layout::{ErrorBox, Layout, OperatorOnly, PostForm};
use crate::format::{self, short_id};
use crate::list_params::{ListParams, parse};
use crate::request::{path, query};
use crate::state::Console;

const SAMPLE: u32 = 10;
/// How many of the largest error groups are searched for the one a filter names.
const GROUPS_SEARCHED: u32 = 1_000;

/// The action a form or link names; `set_priority` takes its value from `priority`.
pub fn parse_action(action: &str, priority: Option<&str>) -> Result<BulkAction, String> {
    if action.trim().eq_ignore_ascii_case("set_priority") {
        let raw = priority.map(str::trim).unwrap_or_default();
        return raw
            .parse::<i32>()
            .map(BulkAction::SetPriority)
            .map_err(|_| {
                format!("priority {raw:?} is not a whole number; give the new priority, e.g. 10")
            });
    }
    action
        .parse::<BulkAction>()
        .map_err(|e: deck_engine::ParseEnumError| e.to_string())
}

/// Where a run's progress page is: dead-letter runs keep their old address.
pub fn run_url(source: Pillar, run: &str) -> String {
    match source {
        Pillar::Dlq => format!("/dlq/bulk/{run}"),
        _ => format!("/bulk/{run}"),
    }
}

/// The actions a list of `source` offers, in tab order, the first the default.
fn actions_for(source: Pillar, priority: i32) -> Vec<(BulkAction, &'static str)> {
    match source {
        Pillar::Dlq => vec![
            (BulkAction::Resurrect, "Resurrect"),
            (BulkAction::Purge, "Purge"),
        ],
        Pillar::Hot => vec![
            (BulkAction::Cancel, "Cancel"),
            (BulkAction::RunNow, "Run now"),
            (BulkAction::SetPriority(priority), "Change priority"),
            (BulkAction::Purge, "Purge"),
        ],
        Pillar::Archive => vec![(BulkAction::Purge, "Purge")],
    }
}

fn what_it_does(action: BulkAction, source: Pillar) -> &'static str {
    match (action, source) {
        (BulkAction::Resurrect, _) => {
            "Resurrect moves the matching jobs back to pending with fresh attempts; their error history is kept."
        }
        (BulkAction::Cancel, _) => {
            "Cancel moves pending and buffered jobs to the dead-letter queue (reason Cancelled); running ones are asked to stop at their next heartbeat."
        }
        (BulkAction::RunNow, _) => {
            "Run now makes pending jobs that wait for a later time (delayed or retrying) due at once. No attempt is spent; jobs already due, buffered or running are left as they are."
        }
        (BulkAction::SetPriority(_), _) => {
            "Pending jobs take the new priority (higher runs first); buffered and running ones keep theirs."
        }
        (BulkAction::Purge, Pillar::Hot) => {
            "Purge deletes the matching pending jobs for good; buffered and running ones are left alone."
        }
        (BulkAction::Purge, _) => "Purge deletes the matching jobs for good.",
    }
}

fn source_title(source: Pillar) -> &'static str {
    match source {
        Pillar::Hot => "Active jobs",
        Pillar::Archive => "Succeeded jobs",
        Pillar::Dlq => "Dead letters",
    }
}

#[component]
pub fn BulkPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let q = query();
    let mut params = parse(&q, 50);
    // The dead-letter address lists dead letters whatever it is given; `/bulk` any list.
    if path().starts_with("/dlq/") || q.get("source").is_none() {
        params.query.source = Pillar::Dlq;
    }
    let source = params.query.source;
    let priority = q
        .get("priority")
        .and_then(|p| p.trim().parse::<i32>().ok())
        .unwrap_or(0);
    let offered = actions_for(source, priority);
    let action = q
        .get("action")
        .and_then(|a| parse_action(a, Some(&priority.to_string())).ok())
        .filter(|a| offered.iter().any(|(o, _)| o.as_str() == a.as_str()))
        .unwrap_or(offered[0].0);
    let cap_default = console.options().bulk_cap_default;
    let cap_max = console.options().bulk_cap_max;
    Suspend::new(async move {
        // An error group's fingerprint says nothing to a person: name the group as the
        // overview does. Telemetry read; a group that just emptied is simply not described.
        let group = match &params.query.filter.error_group {
            Some(fp) => console
                .store()
                .top_errors(GROUPS_SEARCHED)
                .await
                .ok()
                .and_then(|gs| gs.into_iter().find(|g| g.fingerprint == *fp)),
            None => None,
        };
        let body = match console.store().bulk_preview(source, &params.query.filter, SAMPLE).await {
            Ok(preview) => view! { <BulkForm params=params.clone() preview=preview action=action offered=offered cap_default=cap_default cap_max=cap_max group=group/> }.into_any(),
            Err(e) => view! { <ErrorBox message=format!("Cannot preview: {e}")/> }.into_any(),
        };
        view! { <Layout title=format!("{}: bulk by filter", source_title(source))>{body}</Layout> }
    })
}

#[component]
pub fn BulkForm(
    params: ListParams,
    preview: BulkPreview,
    action: BulkAction,
    offered: Vec<(BulkAction, &'static str)>,
    cap_default: u32,
    cap_max: u32,
    group: Option<ErrorGroup>,
) -> impl IntoView {
    let source = params.query.source;
    let filter_query = params.filter_query();
    let group_line = group.map(|g| {
        view! {
            <p class="error-group">"Error group: "
                <span class=format!("reason r-{}", g.reason.as_str().to_ascii_lowercase())>{g.reason.as_str()}</span>
                " · " {g.kind.clone()} " · " <code>{g.job_type.clone()}</code>
                " · " {format!("{} dead letters", format::count(g.count))}
                <br/><span class="msg">{g.sample.clone()}</span>
            </p>
        }
    });
    let noun = match source {
        Pillar::Dlq => "dead letters",
        Pillar::Hot => "active jobs",
        Pillar::Archive => "succeeded jobs",
    };
    let described = if params.query.filter.is_empty() {
        format!("every one of the {noun} (no filter)")
    } else {
        params
            .raw
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let now = Utc::now();
    let time_head = if source == Pillar::Hot {
        "Runs"
    } else {
        "Finished"
    };
    let sample = preview
        .sample
        .iter()
        .map(|j| {
            let id = j.id.to_string();
            let when = match source {
                Pillar::Hot => format::ago(j.scheduled_at, now),
                _ => j
                    .finished_at
                    .map(|t| format::ago(t, now))
                    .unwrap_or_default(),
            };
            view! {
                <tr>
                    <td><a href=format!("/jobs/{id}")><code>{short_id(&id)}</code></a></td>
                    <td>{j.queue.clone()}</td>
                    <td><code>{j.job_type.clone()}</code></td>
                    <td>{j.state.to_string()}</td>
                    <td class="when">{when}</td>
                    <td class="msg">{j.last_error.clone().unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    let base = if source == Pillar::Dlq {
        "/dlq/bulk"
    } else {
        "/bulk"
    };
    let tabs = offered
        .iter()
        .map(|(a, label)| {
            let href = format!("{base}?{filter_query}&action={}", a.as_str());
            view! { <a href=href class:active=a.as_str() == action.as_str()>{*label}</a> }
        })
        .collect_view();
    let word = action.confirm_word();
    let verb = offered
        .iter()
        .find(|(a, _)| a.as_str() == action.as_str())
        .map(|(_, l)| *l)
        .unwrap_or("Run");
    let priority_value = match action {
        BulkAction::SetPriority(p) => p.to_string(),
        _ => "0".into(),
    };
    view! {
        <nav class="tabs" aria-label="Bulk action">{tabs}</nav>
        <section class="panel">
            <p>"Filter: " <b>{described}</b> " · " <a href=format!("/jobs?{filter_query}")>"change it in the list"</a></p>
            {group_line}
            <p class="big">{format::count(preview.matching)}{format!(" matching {noun}")}</p>
            {(preview.matching == 0).then(|| view! { <div class="empty"><p>"Nothing matches: there is nothing to do."</p></div> })}
            {(preview.matching > 0).then(|| view! {
                <h2>{format!("Sample (newest {})", preview.sample.len())}</h2>
                <div class="table-wrap" tabindex="0" role="region" aria-label="Sample"><table class="dense">
                    <thead><tr><th>"Id"</th><th>"Queue"</th><th>"Type"</th><th>"State"</th><th>{time_head}</th><th>"Last error"</th></tr></thead>
                    <tbody>{sample}</tbody>
                </table></div>
            })}
        </section>
        {(preview.matching > 0).then(|| view! {
            <OperatorOnly>
                <PostForm endpoint="bulk" class="panel bulk-run">
                    <input type="hidden" name="source" value=source.as_str()/>
                    <input type="hidden" name="filter" value=filter_query.clone()/>
                    <input type="hidden" name="action" value=action.as_str()/>
                    <p>{what_it_does(action, source)}</p>
                    {matches!(action, BulkAction::SetPriority(_)).then(|| view! {
                        <label>"New priority"<input type="number" name="priority" required=true step="1" min=i32::MIN.to_string() max=i32::MAX.to_string() value=priority_value.clone()/></label>
                    })}
                    <label>"At most this many in this run"<input type="number" name="cap" min="1" max=cap_max.to_string() value=cap_default.to_string()/></label>
                    {word.map(|word| view! {
                        <label>{format!("Type {word} to confirm")}<input type="text" name="confirm" autocomplete="off" required=true pattern=word placeholder=word/></label>
                    })}
                    <button type="submit" class=if action.is_destructive() { "danger" } else { "" }>{format!("{verb} the matching jobs, at most the number above")}</button>
                </PostForm>
            </OperatorOnly>
        })}
    }
}

#[component]
pub fn BulkRunPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let id = path().rsplit('/').next().unwrap_or_default().to_string();
    let run = console.ops().bulk_run(&id);
    let link = console.run_link(&id);
    let body = match run {
        Some(run) => view! { <RunProgress run=run list_url=link/> }.into_any(),
        None => view! { <ErrorBox message="No such bulk run here (runs are kept in memory for a day by the instance that ran them).".to_string()/> }.into_any(),
    };
    view! { <Layout title="Bulk run".into()>{body}</Layout> }
}

#[component]
pub fn RunProgress(run: BulkRun, list_url: Option<String>) -> impl IntoView {
    let planned = run.target();
    // A run that finished cleanly acted on every match within its cap, however short of the
    // cap (or of a stopped count) that was.
    let pct = if run.finished && run.error.is_none() {
        100
    } else {
        (run.done * 100)
            .checked_div(planned)
            .unwrap_or(100)
            .min(100)
    };
    let state = if let Some(e) = &run.error {
        format!("stopped after {} job(s): {e}", format::count(run.done))
    } else if run.finished {
        format!("done: {} job(s)", format::count(run.done))
    } else if run.matching > planned || run.matching_capped {
        format!(
            "running: {} of {} (the cap; {}{} matched)",
            format::count(run.done),
            format::count(planned),
            format::count(run.matching),
            if run.matching_capped { "+" } else { "" }
        )
    } else {
        format!(
            "running: {} of {}",
            format::count(run.done),
            format::count(planned)
        )
    };
    let list_url = list_url.unwrap_or_else(|| format!("/jobs?source={}", run.source.as_str()));
    let value = match run.action {
        BulkAction::SetPriority(p) => format!(" (priority {p})"),
        _ => String::new(),
    };
    view! {
        {(!run.finished).then(|| view! { <meta http-equiv="refresh" content="1"/> })}
        <section class="panel" data-run-finished=run.finished.to_string()>
            <p>{format!("{}{value} on {} jobs by {} started {}", run.action.as_str(), run.source.as_str(), run.actor, format::time(run.started))}</p>
            <p>"Filter: " <a href=list_url.clone()>{list_url.trim_start_matches("/jobs?").to_string()}</a></p>
            <progress max="100" value=pct.to_string()></progress>
            <p class="big run-state">{state}</p>
            <p><a href=list_url.clone()>"Back to the list"</a></p>
        </section>
    }
}

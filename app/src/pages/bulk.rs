//! Bulk actions over a DLQ filter: preview, typed confirmation, a cap per run, progress.

use chrono::Utc;
use deck_engine::{BulkAction, BulkPreview, ErrorGroup, Pillar};
use leptos::prelude::*;

use crate::components::layout::{ErrorBox, Layout, OperatorOnly, PostForm};
use crate::format::{self, short_id};
use crate::list_params::{ListParams, parse};
use crate::request::{path, query};
use crate::state::{BulkRun, Console};

const SAMPLE: u32 = 10;
/// How many of the largest error groups are searched for the one a filter names.
const GROUPS_SEARCHED: u32 = 1_000;

/// The word an operator types to confirm a bulk action.
pub fn confirm_word(action: BulkAction) -> &'static str {
    match action {
        BulkAction::Resurrect => "RESURRECT",
        BulkAction::Cancel => "CANCEL",
        BulkAction::Purge => "PURGE",
    }
}

#[component]
pub fn BulkPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let q = query();
    let mut params = parse(&q, 50);
    params.query.source = Pillar::Dlq;
    let action = match q.get("action") {
        Some("purge") => BulkAction::Purge,
        _ => BulkAction::Resurrect,
    };
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
        let body = match console.store().bulk_preview(Pillar::Dlq, &params.query.filter, SAMPLE).await {
            Ok(preview) => view! { <BulkForm params=params.clone() preview=preview action=action cap_default=cap_default cap_max=cap_max group=group/> }.into_any(),
            Err(e) => view! { <ErrorBox message=format!("Cannot preview: {e}")/> }.into_any(),
        };
        view! { <Layout title="Dead letters: bulk by filter".into()>{body}</Layout> }
    })
}

#[component]
pub fn BulkForm(
    params: ListParams,
    preview: BulkPreview,
    action: BulkAction,
    cap_default: u32,
    cap_max: u32,
    group: Option<ErrorGroup>,
) -> impl IntoView {
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
    let described = if params.query.filter.is_empty() {
        "every dead letter (no filter)".to_string()
    } else {
        params
            .raw
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let now = Utc::now();
    let sample = preview
        .sample
        .iter()
        .map(|j| {
            let id = j.id.to_string();
            view! {
                <tr>
                    <td><a href=format!("/jobs/{id}")><code>{short_id(&id)}</code></a></td>
                    <td>{j.queue.clone()}</td>
                    <td><code>{j.job_type.clone()}</code></td>
                    <td>{j.state.to_string()}</td>
                    <td class="when">{j.finished_at.map(|t| format::ago(t, now)).unwrap_or_default()}</td>
                    <td class="msg">{j.last_error.clone().unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    let tab = |a: BulkAction, label: &'static str| {
        view! { <a href=format!("/dlq/bulk?{filter_query}&action={}", a.as_str()) class:active=a == action>{label}</a> }
    };
    let word = confirm_word(action);
    let runs = preview.matching.min(u64::from(cap_default));
    view! {
        <nav class="tabs" aria-label="Bulk action">{tab(BulkAction::Resurrect, "Resurrect")}{tab(BulkAction::Purge, "Purge")}</nav>
        <section class="panel">
            <p>"Filter: " <b>{described}</b> " · " <a href=format!("/jobs?{filter_query}")>"change it in the list"</a></p>
            {group_line}
            <p class="big">{format::count(preview.matching)}" matching dead letters"</p>
            {(preview.matching == 0).then(|| view! { <div class="empty"><p>"Nothing matches: there is nothing to do."</p></div> })}
            {(preview.matching > 0).then(|| view! {
                <h2>{format!("Sample (newest {})", preview.sample.len())}</h2>
                <div class="table-wrap" tabindex="0" role="region" aria-label="Sample"><table class="dense">
                    <thead><tr><th>"Id"</th><th>"Queue"</th><th>"Type"</th><th>"State"</th><th>"Finished"</th><th>"Last error"</th></tr></thead>
                    <tbody>{sample}</tbody>
                </table></div>
            })}
        </section>
        {(preview.matching > 0).then(|| view! {
            <OperatorOnly>
                <PostForm endpoint="dlq/bulk" class="panel bulk-run">
                    <input type="hidden" name="filter" value=filter_query.clone()/>
                    <input type="hidden" name="action" value=action.as_str()/>
                    <p>{match action {
                        BulkAction::Purge => "Purge deletes the matching jobs for good.",
                        _ => "Resurrect moves the matching jobs back to pending with fresh attempts; their error history is kept.",
                    }}</p>
                    <label>"At most this many in this run"<input type="number" name="cap" min="1" max=cap_max.to_string() value=cap_default.to_string()/></label>
                    <label>{format!("Type {word} to confirm")}<input type="text" name="confirm" autocomplete="off" required=true pattern=word placeholder=word/></label>
                    <button type="submit" class=if action == BulkAction::Purge { "danger" } else { "" }>{format!("{} up to {} job(s)", if action == BulkAction::Purge { "Purge" } else { "Resurrect" }, format::count(runs))}</button>
                </PostForm>
            </OperatorOnly>
        })}
    }
}

#[component]
pub fn BulkRunPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let id = path().trim_start_matches("/dlq/bulk/").to_string();
    let run = console.run(&id);
    let body = match run {
        Some(run) => view! { <RunProgress run=run/> }.into_any(),
        None => view! { <ErrorBox message="No such bulk run here (runs are kept in memory for a day by the instance that ran them).".to_string()/> }.into_any(),
    };
    view! { <Layout title="Bulk run".into()>{body}</Layout> }
}

#[component]
pub fn RunProgress(run: BulkRun) -> impl IntoView {
    let planned = run.target();
    let pct = (run.done * 100)
        .checked_div(planned)
        .unwrap_or(100)
        .min(100);
    let state = if let Some(e) = &run.error {
        format!("stopped after {} job(s): {e}", format::count(run.done))
    } else if run.finished {
        format!("done: {} job(s)", format::count(run.done))
    } else if run.matching > planned {
        format!(
            "running: {} of {} (the cap; {} matched)",
            format::count(run.done),
            format::count(planned),
            format::count(run.matching)
        )
    } else {
        format!(
            "running: {} of {}",
            format::count(run.done),
            format::count(planned)
        )
    };
    view! {
        {(!run.finished).then(|| view! { <meta http-equiv="refresh" content="1"/> })}
        <section class="panel" data-run-finished=run.finished.to_string()>
            <p>{format!("{} by {} started {}", run.action.as_str(), run.actor, format::time(run.started))}</p>
            <p>"Filter: " <a href=format!("/jobs?{}", run.filter_url)>{run.filter_url.clone()}</a></p>
            <progress max="100" value=pct.to_string()></progress>
            <p class="big run-state">{state}</p>
            <p><a href=format!("/jobs?{}", run.filter_url)>"Back to the list"</a></p>
        </section>
    }
}

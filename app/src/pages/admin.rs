//! Settings, instances and the audit log.

use std::time::Duration;

use chrono::Utc;
use deck_engine::{AuditEntry, EngineSettings, InstanceInfo};
use leptos::prelude::*;

use crate::components::layout::{ErrorBox, Layout, OperatorOnly, PostForm};
use crate::format;
use crate::request::query;
use crate::state::Console;

#[component]
pub fn SettingsPage() -> impl IntoView {
    let console = expect_context::<Console>();
    Suspend::new(async move {
        let body = match console.store().load_settings().await {
            Ok(s) => view! { <SettingsForm settings=s/> }.into_any(),
            Err(e) => view! { <ErrorBox message=format!("Cannot read settings: {e}")/> }.into_any(),
        };
        view! { <Layout title="Settings".into()>{body}</Layout> }
    })
}

#[component]
pub fn SettingsForm(settings: EngineSettings) -> impl IntoView {
    let r = settings.retry.clone();
    let k = settings.retention.clone();
    let field = |label: &'static str, name: &'static str, value: String, help: &'static str| {
        view! { <label>{label}<input type="number" min="0" name=name value=value required=true/><small>{help}</small></label> }
    };
    view! {
        <p class="muted">"Persisted in the database: every instance follows them, and they apply without a restart."</p>
        <PostForm endpoint="settings/save" class="settings">
            <fieldset>
                <legend>"Workers"</legend>
                {field("Workers per instance", "worker_count", settings.worker_count.to_string(), "Concurrent jobs in each instance. Scaling down lets running jobs finish.")}
            </fieldset>
            <fieldset>
                <legend>"Retries"</legend>
                {field("Max attempts", "max_attempts", r.max_attempts.to_string(), "Total runs, the first included.")}
                {field("Base delay (ms)", "base_delay_ms", r.base_delay_ms.to_string(), "Delay before retry n is base × 2^(n−1).")}
                {field("Max delay (ms)", "max_delay_ms", r.max_delay_ms.to_string(), "Cap on one retry delay.")}
                {field("Jitter (ms)", "jitter_ms", r.jitter_ms.to_string(), "Up to this much random delay on top.")}
                {field("Max job age (s)", "max_job_age_secs", r.max_job_age_secs.to_string(), "No retry past this age: RetryLifetimeExpired.")}
            </fieldset>
            <fieldset>
                <legend>"Retention"</legend>
                {field("Archive (days)", "archive_days", k.archive_days.to_string(), "Succeeded jobs are pruned after this.")}
                {field("Dead letters (days)", "dlq_days", k.dlq_days.to_string(), "Dead jobs are pruned after this.")}
                {field("Metrics (days)", "metrics_days", k.metrics_days.to_string(), "Per-minute throughput buckets.")}
            </fieldset>
            <OperatorOnly><button>"Save settings"</button></OperatorOnly>
        </PostForm>
        <OperatorOnly>
            <section class="panel">
                <h2>"Prune now"</h2>
                <p class="muted">"Delete archive, dead-letter and metric rows older than the retention above, in small batches. This also runs every hour on its own."</p>
                <PostForm endpoint="settings/prune" class="inline confirm-form">
                    <label><input type="checkbox" name="confirm" value="yes" required=true/>" delete expired history"</label>
                    <button class="danger">"Prune now"</button>
                </PostForm>
            </section>
        </OperatorOnly>
    }
}

#[component]
pub fn InstancesPage() -> impl IntoView {
    let console = expect_context::<Console>();
    Suspend::new(async move {
        let body = match console
            .store()
            .list_instances(Duration::from_secs(60))
            .await
        {
            Ok(list) => view! { <InstanceTable instances=list/> }.into_any(),
            Err(e) => {
                view! { <ErrorBox message=format!("Cannot list instances: {e}")/> }.into_any()
            }
        };
        view! { <Layout title="Instances".into()>{body}</Layout> }
    })
}

#[component]
pub fn InstanceTable(instances: Vec<InstanceInfo>) -> impl IntoView {
    if instances.is_empty() {
        return view! { <div class="empty"><p>"No live instances: no engine or external worker has sent a heartbeat in the last minute. Start one with " <code>"deck serve"</code>"."</p></div> }.into_any();
    }
    let now = Utc::now();
    let rows = instances
        .into_iter()
        .map(|i| {
            let uptime = now.signed_duration_since(i.started_at).num_seconds().max(0) as u64;
            let beat = now.signed_duration_since(i.heartbeat_at).num_seconds();
            let takes = takes(&i);
            view! {
                <tr>
                    <td><code>{i.id.clone()}</code></td>
                    <td>{i.kind.as_str()}</td>
                    <td>{takes}</td>
                    <td>{i.host.clone()}</td>
                    <td class="num">{i.pid}</td>
                    <td>{i.version.clone()}</td>
                    <td title=format::time(i.started_at)>{format::seconds(uptime)}</td>
                    <td class="num">{format!("{} / {}", i.workers_busy, i.workers_total)}</td>
                    <td class={if beat > 15 { "warn" } else { "" }} title=format::time(i.heartbeat_at)>{format::ago(i.heartbeat_at, now)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap" tabindex="0" role="region" aria-label="Instances"><table class="dense">
            <thead><tr><th>"Instance"</th><th>"Kind"</th><th>"Takes"</th><th>"Host"</th><th class="num">"Pid"</th><th>"Version"</th><th>"Uptime"</th><th class="num">"Workers busy / total"</th><th>"Last heartbeat"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table></div>
    }
    .into_any()
}

/// What an instance takes jobs from: its queues and job types, "all" where it did not say.
fn takes(i: &InstanceInfo) -> String {
    let list = |names: &Option<Vec<String>>| match names {
        Some(names) => names.join(", "),
        None => "all".to_string(),
    };
    format!("queues: {}; types: {}", list(&i.queues), list(&i.job_types))
}

const AUDIT_PAGE: u32 = 50;

#[component]
pub fn AuditPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let before = query().get("before").and_then(|b| b.parse::<i64>().ok());
    Suspend::new(async move {
        let body = match console.store().list_audit(before, AUDIT_PAGE + 1).await {
            Ok(mut list) => {
                let more = list.len() > AUDIT_PAGE as usize;
                list.truncate(AUDIT_PAGE as usize);
                view! { <AuditTable entries=list more=more paged=before.is_some()/> }.into_any()
            }
            Err(e) => {
                view! { <ErrorBox message=format!("Cannot read the audit log: {e}")/> }.into_any()
            }
        };
        view! { <Layout title="Audit log".into()>{body}</Layout> }
    })
}

fn target_view(target: &str) -> AnyView {
    // Job ids link to the inspector; filters link to the list they describe.
    if target.starts_with("source=") {
        return view! { <a href=format!("/jobs?{target}")>{target.to_string()}</a> }.into_any();
    }
    let ids: Vec<&str> = target.split(',').map(str::trim).collect();
    if !ids.is_empty() && ids.iter().all(|i| i.parse::<deck_engine::JobId>().is_ok()) {
        return ids
            .into_iter()
            .take(20)
            .map(|i| view! { <a class="id" href=format!("/jobs/{i}")><code>{format::short_id(i)}</code></a>" " })
            .collect_view()
            .into_any();
    }
    view! { <span>{target.to_string()}</span> }.into_any()
}

#[component]
pub fn AuditTable(entries: Vec<AuditEntry>, more: bool, paged: bool) -> impl IntoView {
    if entries.is_empty() {
        return view! { <div class="empty"><p>"No operator actions yet. Every pause, retry, edit, cancel, purge and settings change made here is recorded with who did it."</p></div> }.into_any();
    }
    let last_id = entries.last().map(|e| e.id);
    let rows = entries
        .into_iter()
        .map(|e| {
            view! {
                <tr>
                    <td class="when">{format::time(e.at)}</td>
                    <td>{e.actor.clone()}</td>
                    <td><code>{e.action.clone()}</code></td>
                    <td class="target">{target_view(&e.target)}</td>
                    <td class="num">{format::count(e.count)}</td>
                    <td class="msg"><pre class="detail">{e.detail.clone().unwrap_or_default()}</pre></td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap" tabindex="0" role="region" aria-label="Audit log"><table class="dense audit">
            <thead><tr><th>"When (UTC)"</th><th>"Who"</th><th>"Action"</th><th>"Target"</th><th class="num">"Count"</th><th>"Detail"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table></div>
        <nav class="pager" aria-label="Pages">
            {paged.then(|| view! { <a href="/audit">"« Newest"</a> })}
            {(more).then(|| last_id.map(|id| view! { <a href=format!("/audit?before={id}")>"Older ›"</a> })).flatten()}
        </nav>
    }
    .into_any()
}

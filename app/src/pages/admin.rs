//! Settings, instances and the audit log.

use std::time::Duration;

use chrono::Utc;
use deck_engine::{
    AuditEntry, AuditFilter, EngineSettings, InstanceInfo, InstanceKind, InstanceStatus,
};
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
    // Durations read as an operator writes them ("1h", "500ms"), not as raw milliseconds.
    let duration = |label: &'static str,
                    name: &'static str,
                    value: Duration,
                    help: &'static str| {
        view! { <label>{label}<input type="text" name=name value=format::duration_input(value) required=true spellcheck="false" autocomplete="off" pattern=r"\s*\d+\s*[a-zA-Zµ]+(\s*\d+\s*[a-zA-Zµ]+)*\s*"/><small>{help}</small></label> }
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
                {duration("Base delay", "base_delay", Duration::from_millis(r.base_delay_ms), "Delay before retry n is base × 2^(n−1), e.g. 500ms, 2s.")}
                {duration("Max delay", "max_delay", Duration::from_millis(r.max_delay_ms), "Cap on one retry delay, at least the base delay, e.g. 1h.")}
                {duration("Jitter", "jitter", Duration::from_millis(r.jitter_ms), "Up to this much random delay on top, e.g. 250ms.")}
                {duration("Max job age", "max_job_age", Duration::from_secs(r.max_job_age_secs), "No retry past this age (RetryLifetimeExpired), e.g. 7d.")}
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
            Ok(list) => {
                view! { <div data-live-page="instances"><InstanceTable instances=list/></div> }
                    .into_any()
            }
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
    let lost = instances
        .iter()
        .filter(|i| i.status(now) != InstanceStatus::Live)
        .count();
    let rows = instances
        .into_iter()
        .map(|i| {
            let status = i.status(now);
            let live = status == InstanceStatus::Live;
            let uptime = now.signed_duration_since(i.started_at).num_seconds().max(0) as u64;
            let takes = takes(&i);
            let id = i.id.clone();
            // External workers claim over the API on their own schedule; only engines read
            // the flag back at their heartbeat, so only they get the buttons — and only
            // while they beat: a lost one reads nothing.
            let control = (i.kind == InstanceKind::Engine && live).then(|| {
                let (op, label, class, help) = if i.quiet {
                    ("resume", "Resume", "", "Claim jobs again")
                } else {
                    (
                        "quiet",
                        "Quiet",
                        "warn",
                        "Stop claiming new jobs; running and buffered jobs finish",
                    )
                };
                view! {
                    <OperatorOnly>
                        <PostForm endpoint="instance/state" class="inline">
                            <input type="hidden" name="instance" value=id.clone()/>
                            <button name="op" value=op class=class title=help>{label}</button>
                        </PostForm>
                    </OperatorOnly>
                }
            });
            let badge = match status {
                InstanceStatus::Live => None,
                InstanceStatus::Lost => Some(view! { " "<span class="badge crit" data-status="lost" title="No heartbeat: the process died, hangs or cannot reach the database. Any instance rescues its jobs once its heartbeat is older than engine.rescue.dead_instance_timeout.">"lost"</span> }),
                InstanceStatus::Stopped => Some(view! { " "<span class="badge warn" data-status="stopped" title="Shut down, leaving jobs to the next rescue sweep">"stopped"</span> }),
            };
            // A lost instance's last report of its workers is history, not load.
            let workers = if live {
                format!("{} / {}", i.workers_busy, i.workers_total)
            } else {
                format!("— / {}", i.workers_total)
            };
            let held = if live {
                i.held_jobs.to_string()
            } else {
                format!("{} awaiting rescue", i.held_jobs)
            };
            let row_class = if live { "" } else { "lost" };
            view! {
                <tr class=row_class data-instance=i.id.clone()>
                    <td><code>{i.id.clone()}</code>{badge}{i.quiet.then(|| view! { " "<span class="badge warn" title="Claims no new jobs until resumed">"quiet"</span> })}</td>
                    <td>{i.kind.as_str()}</td>
                    <td>{takes}</td>
                    <td>{i.host.clone()}</td>
                    <td class="num">{i.pid}</td>
                    <td>{i.version.clone()}</td>
                    <td title=format::time(i.started_at)>{if live { format::seconds(uptime) } else { "—".to_string() }}</td>
                    <td class="num">{workers}</td>
                    <td class={if live { "num" } else { "num crit" }}>{held}</td>
                    <td class={if live { "" } else { "warn" }} title=format::time(i.heartbeat_at)>{if status == InstanceStatus::Stopped { "stopped".to_string() } else { format::ago(i.heartbeat_at, now) }}</td>
                    <td>{control}</td>
                </tr>
            }
        })
        .collect_view();
    let summary = (lost > 0).then(|| {
        view! { <p class="flash err" role="alert">{format!("{lost} instance(s) lost or stopped with jobs they still hold: those jobs are returned (fetched ones to pending, started ones to the dead-letter queue as Zombie) by the next rescue sweep of any instance.")}</p> }
    });
    view! {
        {summary}
        <div class="table-wrap" tabindex="0" role="region" aria-label="Instances"><table class="dense">
            <thead><tr><th>"Instance"</th><th>"Kind"</th><th>"Takes"</th><th>"Host"</th><th class="num">"Pid"</th><th>"Version"</th><th>"Uptime"</th><th class="num">"Workers busy / total"</th><th class="num">"Jobs held"</th><th>"Last heartbeat"</th><th>"Claiming"</th></tr></thead>
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

/// The audit page's filter as the query string has it, with what could not be read.
struct AuditQuery {
    filter: AuditFilter,
    before: Option<i64>,
    /// The filter's own fields, for the form and the pager's links.
    raw: Vec<(&'static str, String)>,
    problems: Vec<String>,
}

fn audit_query() -> AuditQuery {
    let q = query();
    let text = |k: &str| {
        q.get(k)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let mut problems = Vec::new();
    let mut time = |k: &str, end_of_day: bool| {
        text(k).and_then(|v| {
            crate::list_params::parse_time(&v, end_of_day)
                .map_err(|e| problems.push(format!("{k}: {e}")))
                .ok()
        })
    };
    let filter = AuditFilter {
        actor: text("actor"),
        action: text("action"),
        from: time("from", false),
        to: time("to", true),
    };
    let raw = ["actor", "action", "from", "to"]
        .into_iter()
        .map(|k| (k, text(k).unwrap_or_default()))
        .collect();
    AuditQuery {
        filter,
        before: q.get("before").and_then(|b| b.parse::<i64>().ok()),
        raw,
        problems,
    }
}

#[component]
pub fn AuditPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let q = audit_query();
    Suspend::new(async move {
        let body = match console
            .store()
            .list_audit(&q.filter, q.before, AUDIT_PAGE + 1)
            .await
        {
            Ok(mut list) => {
                let more = list.len() > AUDIT_PAGE as usize;
                list.truncate(AUDIT_PAGE as usize);
                let filtered = q.raw.iter().any(|(_, v)| !v.is_empty());
                view! {
                    <AuditFilters raw=q.raw.clone() problems=q.problems.clone()/>
                    <AuditTable entries=list more=more paged=q.before.is_some() raw=q.raw.clone() filtered=filtered/>
                }
                .into_any()
            }
            Err(e) => {
                view! { <ErrorBox message=format!("Cannot read the audit log: {e}")/> }.into_any()
            }
        };
        view! { <Layout title="Audit log".into()>{body}</Layout> }
    })
}

/// Action families an operator filters by; a full action name works too.
const AUDIT_FAMILIES: [(&str, &str); 8] = [
    ("job", "one job (cancel, resurrect, edit, purge)"),
    ("jobs", "selected jobs"),
    ("dlq", "dead letters by filter"),
    ("queue", "queues (pause, limits, hide)"),
    (
        "schedule",
        "schedules (create, edit, pause, run now, delete)",
    ),
    ("settings", "settings"),
    ("retention", "pruning history now"),
    ("instance", "instances (quiet, resume)"),
];

#[component]
fn AuditFilters(raw: Vec<(&'static str, String)>, problems: Vec<String>) -> impl IntoView {
    let value = |k: &str| {
        raw.iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let action = value("action");
    let known = AUDIT_FAMILIES.iter().any(|(f, _)| *f == action);
    view! {
        {(!problems.is_empty()).then(|| view! { <ErrorBox message=problems.join("; ")/> })}
        <form method="get" action="/audit" class="filters">
            <label>"Who"<input type="text" name="actor" value=value("actor") placeholder="exact actor"/></label>
            <label>"Action"
                <select name="action">
                    <option value="">"any"</option>
                    {AUDIT_FAMILIES.iter().map(|(f, label)| { let sel = *f == action; view! { <option value=*f selected=sel>{format!("{f}.… — {label}")}</option> } }).collect_view()}
                    {(!known && !action.is_empty()).then(|| view! { <option value=action.clone() selected=true>{action.clone()}</option> })}
                </select>
            </label>
            <label>"From"<input type="date" name="from" value=value("from")/></label>
            <label>"To"<input type="date" name="to" value=value("to")/></label>
            <div class="filter-actions">
                <button type="submit">"Filter"</button>
                <a href="/audit">"Clear"</a>
            </div>
        </form>
    }
}

fn target_view(action: &str, target: &str) -> AnyView {
    // Job ids link to the inspector; filters link to the list they describe; schedules to
    // their page (a deleted one answers that it is gone).
    if action.starts_with("schedule.") {
        let page = crate::pages::schedules::schedule_url(target);
        return view! { <a href=page>{target.to_string()}</a> }.into_any();
    }
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
pub fn AuditTable(
    entries: Vec<AuditEntry>,
    more: bool,
    paged: bool,
    raw: Vec<(&'static str, String)>,
    filtered: bool,
) -> impl IntoView {
    if entries.is_empty() {
        if filtered || paged {
            return view! { <div class="empty"><p>"No audit entries match this filter. " <a href="/audit">"Show every entry"</a></p></div> }.into_any();
        }
        return view! { <div class="empty"><p>"No operator actions yet. Every pause, resurrect, edit, cancel, purge and settings change made here is recorded with who did it."</p></div> }.into_any();
    }
    let page_link = |before: Option<i64>| {
        let mut pairs: Vec<(&'static str, String)> = raw.clone();
        if let Some(id) = before {
            pairs.push(("before", id.to_string()));
        }
        crate::list_params::href("/audit", &pairs)
    };
    let last_id = entries.last().map(|e| e.id);
    let rows = entries
        .into_iter()
        .map(|e| {
            view! {
                <tr>
                    <td class="when">{format::time(e.at)}</td>
                    <td>{e.actor.clone()}</td>
                    <td><code>{e.action.clone()}</code></td>
                    <td class="target">{target_view(&e.action, &e.target)}</td>
                    <td class="num" data-label="count">{format::count(e.count)}</td>
                    <td class="audit-detail">{detail_view(&e.action, e.detail.as_deref())}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap" tabindex="0" role="region" aria-label="Audit log"><table class="dense audit stack">
            <thead><tr><th>"When"</th><th>"Who"</th><th>"Action"</th><th>"Target"</th><th class="num">"Count"</th><th>"Detail"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table></div>
        <nav class="pager" aria-label="Pages">
            {paged.then(|| view! { <a href=page_link(None)>"« Newest"</a> })}
            {(more).then(|| last_id.map(|id| view! { <a href=page_link(Some(id))>"Older ›"</a> })).flatten()}
        </nav>
    }
    .into_any()
}

/// An entry's detail as an operator reads it: a settings change as the fields it changed,
/// anything else as recorded.
fn detail_view(action: &str, detail: Option<&str>) -> AnyView {
    let Some(detail) = detail else {
        return ().into_any();
    };
    if action == "settings.save"
        && let Some(changes) = settings_changes(detail)
    {
        if changes.is_empty() {
            return view! { <span class="muted">"saved unchanged"</span> }.into_any();
        }
        return view! {
            <ul class="changes">
                {changes.into_iter().map(|(field, before, after)| view! {
                    <li><code>{field}</code>": "{before}" → "<b>{after}</b></li>
                }).collect_view()}
            </ul>
        }
        .into_any();
    }
    // A JSON detail reads as its fields (nulls left out); the record as written stays one
    // click away.
    if let Some(fields) = format::json_fields(detail) {
        let pretty = format::pretty_json(detail);
        let list = if fields.is_empty() {
            view! { <span class="muted">"no values set"</span> }.into_any()
        } else {
            view! {
                <dl class="detail-fields">
                    {fields.into_iter().map(|(k, v)| view! { <dt>{k}</dt><dd>{v}</dd> }).collect_view()}
                </dl>
            }
            .into_any()
        };
        return view! {
            {list}
            <details class="raw"><summary>"JSON"</summary><pre class="detail">{pretty}</pre></details>
        }
        .into_any();
    }
    view! { <pre class="detail">{detail.to_string()}</pre> }.into_any()
}

/// The fields a `{"before": …, "after": …}` settings detail changed, as dotted names.
fn settings_changes(detail: &str) -> Option<Vec<(String, String, String)>> {
    let v: serde_json::Value = serde_json::from_str(detail).ok()?;
    let (before, after) = (v.get("before")?, v.get("after")?);
    let mut out = Vec::new();
    diff_fields("", before, after, &mut out);
    Some(out)
}

fn diff_fields(
    prefix: &str,
    before: &serde_json::Value,
    after: &serde_json::Value,
    out: &mut Vec<(String, String, String)>,
) {
    match (before, after) {
        (serde_json::Value::Object(b), serde_json::Value::Object(a)) => {
            for (key, av) in a {
                let name = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                diff_fields(
                    &name,
                    b.get(key).unwrap_or(&serde_json::Value::Null),
                    av,
                    out,
                );
            }
        }
        (b, a) if b != a => out.push((prefix.to_string(), b.to_string(), a.to_string())),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settings_detail_shows_only_the_changed_fields() {
        let detail = r#"{"before":{"worker_count":10,"retry":{"max_attempts":3,"base_delay_ms":1000}},
                         "after":{"worker_count":10,"retry":{"max_attempts":5,"base_delay_ms":1000}}}"#;
        assert_eq!(
            settings_changes(detail),
            Some(vec![("retry.max_attempts".into(), "3".into(), "5".into())])
        );
        assert_eq!(settings_changes("not json"), None);
    }
}

use std::collections::HashMap;

use chrono::Utc;
use deck_engine::{
    FailureReason, HotStatus, JobCount, JobId, JobState, JobSummary, Page, Pillar, SortColumn,
    SortDirection,
};
use leptos::prelude::*;

use crate::components::layout::{ErrorBox, Layout, OperatorOnly, PostForm};
use crate::format::{self, short_id};
use crate::list_params::{ListParams, href, is_default_sort, parse};
use crate::request::query;
use crate::state::Console;

#[component]
pub fn JobsPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let mut params = parse(&query(), console.options().page_size);
    Suspend::new(async move {
        let store = console.store().clone();
        let source = params.source();
        // A text search scans what no index answers in a bounded window of the newest rows.
        let window = if params.query.filter.text.is_some() {
            match store
                .search_window(source, params.query.filter.listed_before)
                .await
            {
                Ok(from) => from,
                Err(e) => {
                    let message = format!("Cannot search: {e}");
                    return view! { <Layout title="Jobs".to_string()><ErrorBox message=message/></Layout> }
                        .into_any();
                }
            }
        } else {
            None
        };
        params.query.filter.scan_from = window;
        let pasted = params.query.filter.text.clone().unwrap_or_default();
        let (page, count, queues, found) = futures::join!(
            store.list_jobs(&params.query),
            store.count_jobs(source, &params.query.filter),
            store.list_queues(),
            store.find_by_id(&pasted, 5)
        );
        // An id pasted on the wrong tab: say where the job is.
        let elsewhere: Vec<JobSummary> = found
            .unwrap_or_default()
            .into_iter()
            .filter(|j| j.state.pillar() != source)
            .collect();
        let queue_names: Vec<String> = queues
            .map(|qs| qs.into_iter().map(|q| q.name).collect())
            .unwrap_or_default();
        let title = match params.source() {
            Pillar::Hot => "Active jobs",
            Pillar::Archive => "Archive",
            Pillar::Dlq => "Dead letters",
        };
        let progress = if params.source() == Pillar::Hot {
            console.running_progress()
        } else {
            HashMap::new()
        };
        let searched = SearchScope {
            window,
            backend: store.backend(),
        };
        let body = match page {
            Ok(page) => {
                view! { <JobList params=params.clone() page=page queue_names=queue_names progress=progress count=count.ok() searched=searched/> }
                    .into_any()
            }
            Err(e) => view! { <ErrorBox message=format!("Cannot list jobs: {e}")/> }.into_any(),
        };
        view! { <Layout title=title.to_string() doc_title=list_title(title, &params)>{found_elsewhere(elsewhere)}{body}</Layout> }
            .into_any()
    })
}

/// The jobs a pasted id (or id prefix) names in the other lists, each a link to its page.
fn found_elsewhere(jobs: Vec<JobSummary>) -> Option<impl IntoView + use<>> {
    if jobs.is_empty() {
        return None;
    }
    let items = jobs
        .into_iter()
        .map(|j| {
            let list = match j.state.pillar() {
                Pillar::Hot => "Active",
                Pillar::Archive => "Archive",
                Pillar::Dlq => "Dead letters",
            };
            let id = j.id.to_string();
            view! {
                <li data-found-elsewhere=id.clone()>
                    <a href=format!("/jobs/{id}")><code>{id.clone()}</code></a>
                    " in "<b>{list}</b>" · "{state_badge(j.state)}" "<code>{j.job_type}</code>" in "{j.queue}
                </li>
            }
        })
        .collect_view();
    Some(view! {
        <section class="panel notice" role="status">
            <p>"That id names a job in another list:"</p>
            <ul>{items}</ul>
        </section>
    })
}

/// The document title of a list: its source and the filters that pick a state or a queue,
/// so each state's list has a title of its own (`Active jobs: pending, queue emails`).
fn list_title(source: &str, params: &ListParams) -> String {
    let picks: Vec<String> = [params.raw("status"), params.raw("reason")]
        .into_iter()
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .chain(
            Some(params.raw("queue"))
                .filter(|q| !q.is_empty())
                .map(|q| format!("queue {q}")),
        )
        .collect();
    if picks.is_empty() {
        source.to_string()
    } else {
        format!("{source}: {}", picks.join(", "))
    }
}

/// What a text search read: the window its scan stopped at (`None`: every row) and the
/// store, which decides what its indexes answer beyond the window.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchScope {
    pub window: Option<deck_engine::Timestamp>,
    pub backend: &'static str,
}

/// "1,234 jobs", "10,000+ jobs match": the list's size, live with the rows.
fn count_line(count: Option<JobCount>, filtered: bool) -> impl IntoView {
    let text = match count {
        None => String::new(),
        Some(c) => {
            let n = format::count(c.matching);
            let plus = if c.capped { "+" } else { "" };
            let noun = if c.matching == 1 && !c.capped {
                "job"
            } else {
                "jobs"
            };
            if filtered {
                format!("{n}{plus} {noun} match")
            } else {
                format!("{n}{plus} {noun}")
            }
        }
    };
    view! { <p class="list-count" data-live-page="count" aria-live="polite">{text}</p> }
}

/// Where a search stopped scanning, and the link that goes on past it.
fn search_note(params: &ListParams, searched: SearchScope) -> Option<impl IntoView + use<>> {
    let from = searched.window?;
    let source = params.source();
    let scanned = if params.query.filter.payload {
        "Tags and payloads"
    } else {
        "Tags"
    };
    let when = if source == Pillar::Hot {
        "created"
    } else {
        "finished"
    };
    let indexed = match (searched.backend, source) {
        ("sqlite", Pillar::Hot) => " Job ids and error text were searched in every job.",
        ("sqlite", _) => " Job ids, types and error text were searched in every job.",
        _ => " A full job id is found in every job.",
    };
    let scanned = if searched.backend == "sqlite" {
        scanned.to_string()
    } else {
        format!("{scanned}, types, error text and id parts")
    };
    let mut pairs = params.sorted_pairs();
    pairs.retain(|(k, _)| *k != "older");
    pairs.push((
        "older",
        from.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
    ));
    Some(view! {
        <p class="search-note">
            {format!(
                "{scanned} were searched in the newest {} jobs ({when} since {}).{indexed} ",
                format::count(u64::from(deck_engine::SEARCH_WINDOW_ROWS)),
                format::time(from)
            )}
            <a href=href("/jobs", &pairs)>"Search older jobs ›"</a>
        </p>
    })
}

fn state_badge(state: JobState) -> impl IntoView {
    let (class, text) = match state {
        JobState::Pending => ("badge", "pending".to_string()),
        JobState::Fetched => ("badge info", "buffered".to_string()),
        JobState::Processing => ("badge info", "processing".to_string()),
        JobState::Succeeded => ("badge ok", "succeeded".to_string()),
        JobState::Dead(r) => ("badge crit", r.as_str().to_string()),
    };
    view! { <span class=class>{text}</span> }
}

#[component]
pub fn JobList(
    params: ListParams,
    page: Page<JobSummary>,
    queue_names: Vec<String>,
    /// Progress of the running jobs this process runs.
    #[prop(optional)]
    progress: HashMap<JobId, deck_engine::Progress>,
    /// How many jobs the list holds (`None`: the count failed; the rows still show).
    #[prop(default = None)]
    count: Option<JobCount>,
    #[prop(optional)] searched: SearchScope,
) -> impl IntoView {
    let source = params.source();
    let now = Utc::now();
    let tabs = [
        (Pillar::Hot, "Active"),
        (Pillar::Archive, "Archive"),
        (Pillar::Dlq, "Dead letters"),
    ]
    .into_iter()
    .map(|(s, label)| {
        // Keep the filters that make sense in every source.
        let mut pairs = vec![("source", s.as_str().to_string())];
        for key in ["queue", "type", "tag", "q", "from", "to"] {
            let v = params.raw(key);
            if !v.is_empty() {
                pairs.push((key, v.to_string()));
            }
        }
        view! { <a href=href("/jobs", &pairs) class:active=s == source>{label}</a> }
    })
    .collect_view();

    let problems = (!params.problems.is_empty()).then(|| {
        view! { <div class="flash err">{format!("Some parameters were ignored: {}", params.problems.join("; "))}</div> }
    });

    let base = params.sorted_pairs();
    let sort = params.query.sort;
    let link_params = params.clone();
    let sort_link = move |column: SortColumn, label: &'static str| {
        let mut pairs = link_params.filter_pairs();
        let active = sort.column == column;
        let dir = if active {
            sort.direction.reversed()
        } else {
            SortDirection::Desc
        };
        let arrow = if active {
            if sort.direction == SortDirection::Desc {
                " ▾"
            } else {
                " ▴"
            }
        } else {
            ""
        };
        let new_sort = deck_engine::JobSort {
            column,
            direction: dir,
        };
        if !is_default_sort(source, &link_params.query.filter, new_sort) {
            pairs.push(("sort", column.as_str().to_string()));
            pairs.push((
                "dir",
                if dir == SortDirection::Asc {
                    "asc"
                } else {
                    "desc"
                }
                .to_string(),
            ));
        }
        view! { <a href=href("/jobs", &pairs) class:sorted=active>{label}{arrow}</a> }
    };

    // The job page's "back to the list" returns to this list as filtered and sorted.
    let list_back =
        format::enc(&serde_urlencoded::to_string(params.sorted_pairs()).unwrap_or_default());
    let rows = page
        .items
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let id = j.id.to_string();
            let (when, when_label) = match source {
                Pillar::Hot => (j.scheduled_at, "due"),
                _ => (j.finished_at.unwrap_or(j.created_at), "finished"),
            };
            view! {
                <tr>
                    <td class="sel"><input type="checkbox" name=format!("ids[{i}]") value=id.clone() aria-label=format!("Select job {id}")/></td>
                    <td class="id"><a href=format!("/jobs/{id}?list={list_back}") title=id.clone()><code>{short_id(&id)}</code></a></td>
                    <td>{j.queue.clone()}</td>
                    <td><code>{j.job_type.clone()}</code></td>
                    <td>{state_badge(j.state)}{progress.get(&j.id).map(|p| view! {
                        " "<span class="progress small" title=p.message.clone()>
                            <progress max="100" value=p.percent.to_string() aria-label=format!("{}% {}", p.percent, p.message)></progress>
                            {format!(" {}%", p.percent)}
                        </span>
                    })}</td>
                    <td class="num" data-label="prio">{j.priority}</td>
                    <td class="num" data-label="attempt">{j.attempt}</td>
                    <td class="when" data-label="created" title=format::time(j.created_at)>{format::ago(j.created_at, now)}</td>
                    <td class="when" data-label=when_label title=format::time(when)>{format::ago(when, now)}</td>
                    {(source != Pillar::Hot).then(|| view! { <td class="num" data-label="ran">{ran_for(j)}</td> })}
                    <td class="msg" title=j.last_error.clone()>{j.last_error.clone().unwrap_or_default()}</td>
                    <td class="tags">{j.tags.iter().map(|t| view! { <span class="tag">{t.clone()}</span> }).collect_view()}</td>
                </tr>
            }
        })
        .collect_view();

    let empty = page.items.is_empty();
    let filtered = !params.query.filter.is_empty();
    let empty_view = empty.then(|| {
        let text = match (source, filtered) {
            (_, true) => "No jobs match these filters. Loosen them, or clear them.",
            (Pillar::Hot, false) => "No active jobs: nothing is waiting or running. Enqueue with `deck enqueue` or POST /api/v1/jobs.",
            (Pillar::Archive, false) => "The archive is empty: succeeded jobs are kept here for the retention period.",
            (Pillar::Dlq, false) => "No dead letters. Jobs land here when retries run out, on fatal errors, or when cancelled.",
        };
        view! { <div class="empty"><p>{text}</p>{filtered.then(|| view! { <a href=href("/jobs", &[("source", source.as_str().to_string())])>"Clear filters"</a> })}</div> }
    });

    let pager = {
        let link = |key: &'static str, value: String, label: &'static str, enabled: bool| {
            let mut pairs = base.clone();
            if !value.is_empty() {
                pairs.push((key, value));
            }
            if enabled {
                view! { <a href=href("/jobs", &pairs)>{label}</a> }.into_any()
            } else {
                view! { <span class="disabled" aria-disabled="true">{label}</span> }.into_any()
            }
        };
        let has_prev = page.prev.is_some();
        let has_next = page.next.is_some();
        view! {
            <nav class="pager" aria-label="Pages">
                {link("first", String::new(), "« First", has_prev)}
                {link("before", page.prev.as_ref().map(|c| c.to_string()).unwrap_or_default(), "‹ Newer", has_prev)}
                {link("after", page.next.as_ref().map(|c| c.to_string()).unwrap_or_default(), "Older ›", has_next)}
                {link("last", "1".into(), "Last »", has_next)}
            </nav>
        }
    };

    let status_options = match source {
        // Pending split as the overview's tiles split it, so each tile's list is one pick.
        Pillar::Hot => [
            ("pending", "pending (all)"),
            ("due", "pending, due now"),
            ("scheduled", "scheduled (delayed or retrying)"),
            ("retrying", "waiting for a retry"),
            (HotStatus::Fetched.as_str(), "buffered (fetched)"),
            (HotStatus::Processing.as_str(), "processing"),
        ]
        .iter()
        .map(|(v, l)| (v.to_string(), l.to_string()))
        .collect::<Vec<_>>(),
        Pillar::Dlq => FailureReason::ALL
            .iter()
            .map(|r| (r.as_str().to_string(), r.as_str().to_string()))
            .collect(),
        Pillar::Archive => Vec::new(),
    };
    let status_key = if source == Pillar::Dlq {
        "reason"
    } else {
        "status"
    };
    let status_value = params.raw(status_key).to_string();
    let queue_value = params.raw("queue").to_string();
    let on_value = params.raw("on").to_string();

    let bulk_buttons = match source {
        Pillar::Hot => view! {
            <button name="action" value="run_now" title="Due now, no attempt spent (pending jobs waiting for a later time)">"Run selected now"</button>
            <button name="action" value="cancel" class="danger">"Cancel selected"</button>
            <button name="action" value="purge" class="danger">"Purge selected (pending only)"</button>
        }
        .into_any(),
        Pillar::Dlq => view! {
            <button name="action" value="resurrect" title="Back to pending with fresh attempts">"Resurrect selected"</button>
            <button name="action" value="purge" class="danger">"Purge selected"</button>
        }
        .into_any(),
        Pillar::Archive => view! { <button name="action" value="purge" class="danger">"Purge selected"</button> }.into_any(),
    };
    let bulk_label = match count {
        Some(c) if c.capped => format!(
            "All {}+ matching: bulk by filter…",
            format::count(c.matching)
        ),
        Some(c) => format!(
            "All {} matching: bulk by filter…",
            format::count(c.matching)
        ),
        None => "All matching: bulk by filter…".to_string(),
    };
    let (bulk_path, bulk_title) = match source {
        Pillar::Dlq => (
            "/dlq/bulk",
            "Resurrect or purge every dead letter this filter matches, not only this page",
        ),
        Pillar::Hot => (
            "/bulk",
            "Cancel, run now, change the priority of or purge every active job this filter matches, not only this page",
        ),
        Pillar::Archive => (
            "/bulk",
            "Purge every succeeded job this filter matches, not only this page",
        ),
    };
    let bulk_link = Some(view! {
        <a class="button" href=format!("{bulk_path}?{}", params.filter_query()) title=bulk_title>{bulk_label}</a>
    });

    view! {
        <nav class="tabs" aria-label="Job lists">{tabs}</nav>
        {problems}
        <form method="get" action="/jobs" class="filters">
            <input type="hidden" name="source" value=source.as_str()/>
            <label>"Queue"
                <select name="queue">
                    <option value="">"all"</option>
                    {queue_names.into_iter().map(|n| { let sel = n == queue_value; view! { <option value=n.clone() selected=sel>{n.clone()}</option> } }).collect_view()}
                </select>
            </label>
            <label>"Type"<input type="text" name="type" value=params.raw("type").to_string() placeholder="job type"/></label>
            {(!status_options.is_empty()).then(|| view! {
                <label>{if source == Pillar::Dlq { "Reason" } else { "Status" }}
                    <select name=status_key>
                        <option value="">"any"</option>
                        {status_options.into_iter().map(|(v, l)| { let sel = v.eq_ignore_ascii_case(&status_value); view! { <option value=v selected=sel>{l}</option> } }).collect_view()}
                    </select>
                </label>
            })}
            {(source == Pillar::Dlq).then(|| view! {
                <label>"Error group"<input type="text" name="group" value=params.raw("group").to_string() placeholder="fingerprint" size="16" maxlength="16" pattern="[0-9A-Fa-f]{16}"/></label>
            })}
            <label>"Tag"<input type="text" name="tag" value=params.raw("tag").to_string() placeholder="exact tag"/></label>
            <label class="grow">"Search"<input type="search" name="q" value=params.raw("q").to_string() placeholder="id, type, tag or error text"/></label>
            <label class="check" title="Payloads are read row by row, in the newest jobs first: slower than the other searches">
                <input type="checkbox" name="payload" value="1" checked=params.query.filter.payload/>" in payloads too"
            </label>
            {(source != Pillar::Hot).then(|| view! {
                <label>"Dates on"
                    <select name="on">
                        <option value="created" selected=on_value != "finished">"created"</option>
                        <option value="finished" selected=on_value == "finished">"finished"</option>
                    </select>
                </label>
            })}
            <label>"From"<input type="date" name="from" value=params.raw("from").to_string()/></label>
            <label>"To"<input type="date" name="to" value=params.raw("to").to_string()/></label>
            <div class="filter-actions">
                <button type="submit">"Filter"</button>
                <a href=href("/jobs", &[("source", source.as_str().to_string())])>"Clear"</a>
            </div>
        </form>
        <div class="list-head">
            {count_line(count, filtered)}
            {search_note(&params, searched)}
        </div>
        {empty_view}
        {(!empty).then(|| view! {
            <PostForm endpoint="jobs/bulk" class="bulk">
                <input type="hidden" name="source" value=source.as_str()/>
                <div class="table-wrap" tabindex="0" role="region" aria-label="Jobs" data-live-page="rows">
                    <table class="dense jobs stack">
                        <thead>
                            <tr>
                                <th class="sel">
                                    <span class="visually-hidden">"Select"</span>
                                    // Shown by live.js: ticks every row on this page.
                                    <input type="checkbox" data-select-all="" aria-label="Select every job on this page" hidden=true/>
                                </th>
                                <th>"Id"</th>
                                <th>{sort_link(SortColumn::Queue, "Queue")}</th>
                                <th>{sort_link(SortColumn::JobType, "Type")}</th>
                                <th>"State"</th>
                                <th class="num">{sort_link(SortColumn::Priority, "Prio")}</th>
                                <th class="num">{sort_link(SortColumn::Attempt, "Att.")}</th>
                                <th>{sort_link(SortColumn::CreatedAt, "Created")}</th>
                                <th>{if source == Pillar::Hot { sort_link(SortColumn::ScheduledAt, "Due") } else { sort_link(SortColumn::FinishedAt, "Finished") }}</th>
                                {(source != Pillar::Hot).then(|| view! { <th class="num" title="Run time of the last attempt: started → finished">"Ran"</th> })}
                                <th>"Last error"</th>
                                <th>"Tags"</th>
                            </tr>
                        </thead>
                        <tbody>{rows}</tbody>
                    </table>
                </div>
                <div class="list-foot">
                    <OperatorOnly>
                        <div class="bulk-actions">
                            <span>"With selected:"</span>
                            {bulk_buttons}
                            <label class="confirm"><input type="checkbox" name="confirm" value="yes"/>{if source == Pillar::Hot { " confirm cancel / purge" } else { " confirm purge" }}</label>
                        </div>
                    </OperatorOnly>
                    {bulk_link}
                    {pager}
                </div>
            </PostForm>
        })}
    }
}

/// The last attempt's run time, started → finished; blank for a job that never started.
fn ran_for(j: &JobSummary) -> String {
    match (j.started_at, j.finished_at) {
        (Some(s), Some(f)) => {
            format::millis(u64::try_from((f - s).num_milliseconds()).unwrap_or(0))
        }
        _ => String::new(),
    }
}

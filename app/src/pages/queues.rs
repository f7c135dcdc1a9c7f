use std::collections::HashMap;

use std::sync::Arc;

use deck_engine::{QueueConfig, QueueStats, ThroughputBucket};
use leptos::prelude::*;
use leptos::reactive::owner::Owner;
use leptos::tachys::html::InertElement;

use crate::components::layout::{ErrorBox, Layout, OperatorOnly, PostForm};
use crate::components::telemetry::ThroughputChart;
use crate::format::{self, url};
use crate::request::query;
use crate::state::Console;
use crate::telemetry_view::lag_class;

/// Per-queue charts cost one telemetry read each (per tick, shared by every request);
/// above this many queues, only on request.
const CHARTS_UP_TO: usize = 12;

#[component]
pub fn QueuesPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let q = query();
    let show_hidden = q.get("hidden").is_some();
    let focus = q.get("q").map(str::to_string);
    Suspend::new(async move {
        let store = console.store().clone();
        // Settings are a committed read (operators decide on them); numbers are telemetry,
        // from the snapshot every page and ops endpoint shares.
        let (configs, telemetry) = futures::join!(store.list_queues(), console.telemetry());
        let body = match (configs, telemetry) {
            (Ok(configs), Ok(telemetry)) => {
                let hidden_count = configs.iter().filter(|c| c.hidden).count();
                let mut stats_by_name: HashMap<String, QueueStats> = telemetry
                    .queues
                    .iter()
                    .map(|s| (s.queue.clone(), s.clone()))
                    .collect();
                let mut rows: Vec<(QueueConfig, Option<QueueStats>)> = configs
                    .into_iter()
                    .filter(|c| {
                        show_hidden || !c.hidden || focus.as_deref() == Some(c.name.as_str())
                    })
                    .filter(|c| focus.as_deref().is_none_or(|f| f == c.name))
                    .map(|c| {
                        let s = stats_by_name.remove(&c.name);
                        (c, s)
                    })
                    .collect();
                rows.sort_by(|a, b| a.0.name.cmp(&b.0.name));
                let charts: Vec<Option<Arc<String>>> = if rows.len() <= CHARTS_UP_TO {
                    futures::future::join_all(rows.iter().map(|(c, _)| {
                        let console = console.clone();
                        let name = c.name.clone();
                        async move { console.queue_chart(&name).await.ok() }
                    }))
                    .await
                } else {
                    vec![None; rows.len()]
                };
                view! { <QueueList rows=rows charts=charts show_hidden=show_hidden hidden_count=hidden_count focused=focus.is_some()/> }.into_any()
            }
            (Err(e), _) | (_, Err(e)) => {
                view! { <ErrorBox message=format!("Cannot read queues: {e}")/> }.into_any()
            }
        };
        view! { <Layout title="Queues".into()>{body}</Layout> }
    })
}

/// A queue's chart as HTML: rendered once per tick and shared (`Console::queue_chart`).
pub fn render_chart(buckets: Vec<ThroughputBucket>) -> String {
    Owner::new().with(|| view! { <ThroughputChart buckets=buckets/> }.to_html())
}

fn secs_value(v: Option<u32>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

#[component]
pub fn QueueList(
    rows: Vec<(QueueConfig, Option<QueueStats>)>,
    charts: Vec<Option<Arc<String>>>,
    show_hidden: bool,
    hidden_count: usize,
    focused: bool,
) -> impl IntoView {
    let toggle = if show_hidden {
        view! { <a href="/queues">"Hide hidden queues"</a> }.into_any()
    } else if hidden_count > 0 {
        view! { <a href="/queues?hidden=1">{format!("Show {hidden_count} hidden queue(s)")}</a> }
            .into_any()
    } else {
        ().into_any()
    };
    if rows.is_empty() {
        return view! {
            <div class="toolbar">{toggle}</div>
            <div class="empty"><p><strong>"No queues yet."</strong>" A queue is created the first time a job is enqueued to it, e.g. "
            <code>"deck enqueue --queue emails --type send_welcome '{}'"</code>"."</p></div>
        }
        .into_any();
    }
    let cards = rows
        .into_iter()
        .zip(charts)
        .map(|((c, s), chart)| {
            let s = s.unwrap_or(QueueStats {
                queue: c.name.clone(),
                paused: c.paused,
                hidden: c.hidden,
                max_workers: c.max_workers,
                pending: 0, scheduled: 0, fetched: 0, processing: 0, succeeded: 0, failed: 0,
                lag_avg_ms: 0, lag_max_ms: 0,
                lag_warn_secs: c.lag_warn_secs, lag_crit_secs: c.lag_crit_secs,
                zombie_timeout_secs: c.zombie_timeout_secs, execution_timeout_secs: c.execution_timeout_secs,
            });
            let name = c.name.clone();
            let (name_state, name_limits) = (c.name.clone(), c.name.clone());
            let lag_avg = lag_class(s.lag_avg_ms, c.lag_warn_secs, c.lag_crit_secs);
            let lag_max = lag_class(s.lag_max_ms, c.lag_warn_secs, c.lag_crit_secs);
            let (pause_op, pause_label) = if c.paused { ("resume", "Resume") } else { ("pause", "Pause") };
            let (hide_op, hide_label) = if c.hidden { ("show", "Show") } else { ("hide", "Hide") };
            view! {
                <section class="panel queue" class:paused=c.paused id=format!("queue-{name}")>
                    <header class="queue-head">
                        <h2><a href=url("/queues", &[("q", &name)])>{name.clone()}</a></h2>
                        {c.paused.then(|| view! { <span class="badge warn">"paused"</span> })}
                        {c.hidden.then(|| view! { <span class="badge">"hidden"</span> })}
                        <OperatorOnly>
                            <PostForm endpoint="queue/state" class="inline">
                                <input type="hidden" name="queue" value=name_state/>
                                <button name="op" value=pause_op class=if c.paused { "" } else { "warn" }>{pause_label}</button>
                                <button name="op" value=hide_op class="quiet">{hide_label}</button>
                            </PostForm>
                        </OperatorOnly>
                    </header>
                    <div class="stats">
                        <a href=url("/jobs", &[("source", "active"), ("queue", &name), ("status", "pending")])><b>{format::count(s.pending)}</b>" pending"</a>
                        <span><b>{format::count(s.scheduled)}</b>" scheduled"</span>
                        <span><b>{format::count(s.fetched)}</b>" buffered"</span>
                        <a href=url("/jobs", &[("source", "active"), ("queue", &name), ("status", "processing")])><b>{format::count(s.processing)}</b>" processing"</a>
                        <a href=url("/jobs", &[("source", "archive"), ("queue", &name)])><b>{format::count(s.succeeded)}</b>" succeeded"</a>
                        <a href=url("/jobs", &[("source", "dlq"), ("queue", &name)]) class:bad=s.failed.gt(&0)><b>{format::count(s.failed)}</b>" dead"</a>
                        <span class=format!("lag {lag_avg}")><b>{format::millis(s.lag_avg_ms)}</b>" lag avg"</span>
                        <span class=format!("lag {lag_max}")><b>{format::millis(s.lag_max_ms)}</b>" lag max"</span>
                    </div>
                    {chart.map(|html| InertElement::new(html.to_string()))}
                    <OperatorOnly>
                        <details class="limits">
                            <summary>{format!(
                                "Limits: max workers {}, zombie timeout {}, execution timeout {}",
                                c.max_workers.map(|m| m.to_string()).unwrap_or_else(|| "unlimited".into()),
                                c.zombie_timeout_secs.map(|v| format::seconds(v.into())).unwrap_or_else(|| "default".into()),
                                c.execution_timeout_secs.map(|v| format::seconds(v.into())).unwrap_or_else(|| "default".into()),
                            )}</summary>
                            <PostForm endpoint="queue/limits" class="limits-form">
                                <input type="hidden" name="queue" value=name_limits/>
                                <label>"Max workers (cluster-wide)"<input type="number" min="1" name="max_workers" value=secs_value(c.max_workers) placeholder="unlimited"/></label>
                                <label>"Zombie timeout (s)"<input type="number" min="1" name="zombie_timeout" value=secs_value(c.zombie_timeout_secs) placeholder="default 600"/></label>
                                <label>"Execution timeout (s)"<input type="number" min="1" name="execution_timeout" value=secs_value(c.execution_timeout_secs) placeholder="default 900"/></label>
                                <label>"Lag warning (s)"<input type="number" min="1" name="lag_warn" value=secs_value(c.lag_warn_secs) placeholder="30"/></label>
                                <label>"Lag critical (s)"<input type="number" min="1" name="lag_crit" value=secs_value(c.lag_crit_secs) placeholder="300"/></label>
                                <button>"Save limits"</button>
                                <span class="muted small">"Empty means the default. Applies to every instance."</span>
                            </PostForm>
                        </details>
                    </OperatorOnly>
                </section>
            }
        })
        .collect_view();
    view! {
        <div class="toolbar">{focused.then(|| view! { <a href="/queues">"← all queues"</a> })}{toggle}</div>
        <div class="queues">{cards}</div>
    }
    .into_any()
}

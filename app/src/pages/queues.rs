use std::collections::HashMap;

use std::sync::Arc;

use deck_engine::{
    QueueConfig, QueueStats, RunTimeHistogram, StoreResult, ThroughputBucket, Untaken,
};
use leptos::prelude::*;
use leptos::reactive::owner::Owner;
use leptos::tachys::html::InertElement;

use crate::components::layout::{ErrorBox, Layout, OperatorOnly, PostForm};
use crate::components::telemetry::{ThroughputChart, UntakenWarnings};
use crate::format::{self, url};
use crate::request::{Query, parts, query};
use crate::state::Console;
use crate::telemetry_view::Telemetry;
use crate::telemetry_view::lag_class;

/// Per-queue charts cost one telemetry read each (per tick, shared by every request);
/// above this many queues, only on request.
const CHARTS_UP_TO: usize = 12;

/// Everything the queues page shows for one query: the settings (a committed read:
/// operators decide on them), the numbers (from the snapshot every page and ops endpoint
/// shares) and the per-queue charts (rendered once per tick).
pub struct QueuesData {
    pub(crate) telemetry: Arc<Telemetry>,
    rows: Vec<(QueueConfig, Option<QueueStats>)>,
    charts: Vec<Option<Arc<String>>>,
    /// Per job type over the last hour; an error text when the read failed (the rest of
    /// the page still serves).
    run_times: Result<Arc<Vec<RunTimeHistogram>>, String>,
    hidden_count: usize,
    show_hidden: bool,
    focused: bool,
}

impl QueuesData {
    pub async fn read(console: &Console, query: &Query) -> StoreResult<QueuesData> {
        let show_hidden = query.get("hidden").is_some();
        let focus = query.get("q");
        let (configs, telemetry, run_times) = futures::join!(
            console.store().list_queues(),
            console.telemetry(),
            console.run_times()
        );
        let (configs, telemetry) = (configs?, telemetry?);
        let run_times = run_times.map_err(|e| e.to_string());
        let hidden_count = configs.iter().filter(|c| c.hidden).count();
        let mut stats_by_name: HashMap<&str, &QueueStats> = telemetry
            .queues
            .iter()
            .map(|s| (s.queue.as_str(), s))
            .collect();
        let mut rows: Vec<(QueueConfig, Option<QueueStats>)> = configs
            .into_iter()
            .filter(|c| show_hidden || !c.hidden || focus == Some(c.name.as_str()))
            .filter(|c| focus.is_none_or(|f| f == c.name))
            .map(|c| {
                let s = stats_by_name.remove(c.name.as_str()).cloned();
                (c, s)
            })
            .collect();
        rows.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let charts: Vec<Option<Arc<String>>> = if rows.len() <= CHARTS_UP_TO {
            futures::future::join_all(
                rows.iter()
                    .map(|(c, _)| async { console.queue_chart(&c.name).await.ok() }),
            )
            .await
        } else {
            vec![None; rows.len()]
        };
        Ok(QueuesData {
            telemetry,
            rows,
            charts,
            run_times,
            hidden_count,
            show_hidden,
            focused: focus.is_some(),
        })
    }

    /// Whether the page rendered from `self` is the page `other` renders: the same
    /// snapshot (so the same numbers) and charts, equal settings, the same query's choices.
    pub(crate) fn same_as(&self, other: &QueuesData) -> bool {
        let same_charts = self.charts.len() == other.charts.len()
            && self
                .charts
                .iter()
                .zip(&other.charts)
                .all(|pair| match pair {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (None, None) => true,
                    _ => false,
                });
        let same_run_times = match (&self.run_times, &other.run_times) {
            (Ok(a), Ok(b)) => Arc::ptr_eq(a, b),
            (Err(a), Err(b)) => a == b,
            _ => false,
        };
        Arc::ptr_eq(&self.telemetry, &other.telemetry)
            && same_charts
            && same_run_times
            && self.hidden_count == other.hidden_count
            && self.show_hidden == other.show_hidden
            && self.focused == other.focused
            && self.rows.len() == other.rows.len()
            && self.rows.iter().zip(&other.rows).all(|(a, b)| a.0 == b.0)
    }
}

#[component]
pub fn QueuesPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let q = query();
    let doc_title = q
        .get("q")
        .map_or_else(|| "Queues".to_string(), |name| format!("Queue {name}"));
    // What the page cache read for this request, when it did (see `page_cache`).
    let handed = parts().and_then(|p| p.extensions.get::<Arc<QueuesData>>().cloned());
    Suspend::new(async move {
        let data = match handed {
            Some(data) => Ok(data),
            None => QueuesData::read(&console, &q).await.map(Arc::new),
        };
        let body = match data {
            Ok(data) => view! {
                <QueueList
                    untaken=data.telemetry.untaken.clone()
                    rows=data.rows.clone()
                    charts=data.charts.clone()
                    show_hidden=data.show_hidden
                    hidden_count=data.hidden_count
                    focused=data.focused/>
                {(!data.focused).then(|| view! { <RunTimes run_times=data.run_times.clone()/> })}
            }
            .into_any(),
            Err(e) => view! { <ErrorBox message=format!("Cannot read queues: {e}")/> }.into_any(),
        };
        view! { <Layout title="Queues".into() doc_title=doc_title>{body}</Layout> }
    })
}

/// A queue's chart as HTML: rendered once per tick and shared (`Console::queue_chart`).
pub fn render_chart(buckets: Vec<ThroughputBucket>) -> String {
    Owner::new().with(|| view! { <ThroughputChart buckets=buckets/> }.to_html())
}

/// A run-time percentile as the table shows it: bins are ~19 % wide, so whole
/// milliseconds (or tenths of a second) say all the figure knows.
fn run_time_text(ms: Option<f64>) -> String {
    match ms {
        None => "–".into(),
        Some(ms) if ms < 1.0 => "< 1 ms".into(),
        Some(ms) => format::millis(ms.round() as u64),
    }
}

/// p50 / p95 run time per job type over the last hour, from the run-time bins every
/// finished run adds to (not a scan of the archive).
#[component]
pub fn RunTimes(run_times: Result<Arc<Vec<RunTimeHistogram>>, String>) -> impl IntoView {
    let body = match run_times {
        Err(e) => view! { <ErrorBox message=format!("Cannot read run times: {e}")/> }.into_any(),
        Ok(times) if times.is_empty() => view! {
            <p class="muted">"No job finished in the last hour."</p>
        }
        .into_any(),
        Ok(times) => {
            let rows = times
                .iter()
                .map(|h| {
                    let job_type = h.job_type.clone();
                    view! {
                        <tr>
                            <td><a href=url("/jobs", &[("source", "archive"), ("type", &job_type)])>{job_type.clone()}</a></td>
                            <td class="num">{format::count(h.runs())}</td>
                            <td class="num">{run_time_text(h.quantile_ms(0.5))}</td>
                            <td class="num">{run_time_text(h.quantile_ms(0.95))}</td>
                        </tr>
                    }
                })
                .collect_view();
            view! {
                <div class="table-wrap" tabindex="0" role="region" aria-label="Run time by job type"><table class="dense run-times">
                    <thead><tr>
                        <th scope="col">"Job type"</th>
                        <th scope="col" class="num">"Runs"</th>
                        <th scope="col" class="num">"p50"</th>
                        <th scope="col" class="num">"p95"</th>
                    </tr></thead>
                    <tbody>{rows}</tbody>
                </table></div>
            }
            .into_any()
        }
    };
    view! {
        <section class="panel" id="run-times" aria-labelledby="run-times-title">
            <h2 id="run-times-title">"Run time by job type, last hour"</h2>
            <p class="muted small">"Runs that ended in the archive or the dead-letter queue (retried attempts count once their job finishes). Percentiles are read from log-scale bins, accurate to about 10 %."</p>
            <div data-live-page="run-times">{body}</div>
        </section>
    }
}

fn secs_value(v: Option<u32>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

#[component]
pub fn QueueList(
    /// Pending work no live instance takes, shown on its queue.
    #[prop(optional)]
    untaken: Vec<Untaken>,
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
            <code>{crate::components::ENQUEUE_EXAMPLE}</code>"."</p></div>
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
            let warnings: Vec<Untaken> =
                untaken.iter().filter(|u| u.queue() == name).cloned().collect();
            let (name_state, name_limits) = (c.name.clone(), c.name.clone());
            let lag_avg = lag_class(s.lag_avg_ms, c.lag_warn_secs, c.lag_crit_secs);
            let lag_max = lag_class(s.lag_max_ms, c.lag_warn_secs, c.lag_crit_secs);
            let (pause_op, pause_label) = if c.paused { ("resume", "Resume") } else { ("pause", "Pause") };
            let (hide_op, hide_label) = if c.hidden { ("show", "Show") } else { ("hide", "Hide") };
            let hide_help = if c.hidden {
                "Show the queue on the overview and in this list again"
            } else {
                "Take the queue off the overview and this list; its jobs still run, and \"Show hidden queues\" brings it back"
            };
            let pause_help = if c.paused {
                "Workers in every instance claim from this queue again"
            } else {
                "Workers in every instance stop claiming from this queue; running jobs finish"
            };
            view! {
                <section class="panel queue" class:paused=c.paused id=format!("queue-{name}")>
                    <header class="queue-head">
                        <h2><a href=url("/queues", &[("q", &name)])>{name.clone()}</a></h2>
                        {c.paused.then(|| view! { <span class="badge warn">"paused"</span> })}
                        {c.hidden.then(|| view! { <span class="badge">"hidden"</span> })}
                        <OperatorOnly>
                            <PostForm endpoint="queue/state" class="inline">
                                <input type="hidden" name="queue" value=name_state/>
                                <button name="op" value=pause_op class=if c.paused { "" } else { "warn" } title=pause_help>{pause_label}</button>
                                <button name="op" value=hide_op class="quiet" title=hide_help>{hide_label}</button>
                            </PostForm>
                        </OperatorOnly>
                    </header>
                    <div class="stats" data-live-page=format!("stats-{name}")>
                        <a href=url("/jobs", &[("source", "active"), ("queue", &name), ("status", "due")])><b>{format::count(s.pending)}</b>" pending"</a>
                        <a href=url("/jobs", &[("source", "active"), ("queue", &name), ("status", "scheduled")])><b>{format::count(s.scheduled)}</b>" scheduled"</a>
                        <a href=url("/jobs", &[("source", "active"), ("queue", &name), ("status", "fetched")])><b>{format::count(s.fetched)}</b>" buffered"</a>
                        <a href=url("/jobs", &[("source", "active"), ("queue", &name), ("status", "processing")])><b>{format::count(s.processing)}</b>" processing"</a>
                        <a href=url("/jobs", &[("source", "archive"), ("queue", &name)])><b>{format::count(s.succeeded)}</b>" succeeded"</a>
                        <a href=url("/jobs", &[("source", "dlq"), ("queue", &name)]) class:bad=s.failed.gt(&0)><b>{format::count(s.failed)}</b>" dead"</a>
                        <span class=format!("lag {lag_avg}")><b>{format::millis(s.lag_avg_ms)}</b>" lag avg"</span>
                        <span class=format!("lag {lag_max}")><b>{format::millis(s.lag_max_ms)}</b>" lag max"</span>
                        {c.rate_limited_until.map(|until| view! {
                            <span class="badge warn" data-rate-limited title="This period's starts are used up; pending jobs wait, no attempt spent">
                                {format!("rate limited until {}", format::time(until))}
                            </span>
                        })}
                    </div>
                    <div data-live-page=format!("untaken-{name}")><UntakenWarnings untaken=warnings live=false/></div>
                    {chart.map(|html| InertElement::new(html.to_string()))}
                    <OperatorOnly>
                        <details class="limits">
                            <summary>{format!(
                                "Limits: max workers {}, zombie timeout {}, execution timeout {}, rate limit {}",
                                c.max_workers.map(|m| m.to_string()).unwrap_or_else(|| "unlimited".into()),
                                c.zombie_timeout_secs.map(|v| format::seconds(v.into())).unwrap_or_else(|| "default".into()),
                                c.execution_timeout_secs.map(|v| format::seconds(v.into())).unwrap_or_else(|| "default".into()),
                                crate::actions::rate_limit_text(c.rate_limit),
                            )}</summary>
                            <PostForm endpoint="queue/limits" class="limits-form">
                                <input type="hidden" name="queue" value=name_limits/>
                                <label>"Max workers (cluster-wide)"<input type="number" min="1" max=stored_max() name="max_workers" value=secs_value(c.max_workers) placeholder="unlimited"/></label>
                                <label>"Zombie timeout (s)"<input type="number" min="1" max=stored_max() name="zombie_timeout" value=secs_value(c.zombie_timeout_secs) placeholder="default 600"/></label>
                                <label>"Execution timeout (s)"<input type="number" min="1" max=stored_max() name="execution_timeout" value=secs_value(c.execution_timeout_secs) placeholder="default 900"/></label>
                                <label>"Lag warning (s)"<input type="number" min="0" max=stored_max() name="lag_warn" value=secs_value(c.lag_warn_secs) placeholder="30"/></label>
                                <label>"Lag critical (s)"<input type="number" min="0" max=stored_max() name="lag_crit" value=secs_value(c.lag_crit_secs) placeholder="300"/></label>
                                <label>"Rate limit: starts"<input type="number" min="1" max=stored_max() name="rate_starts" value=secs_value(c.rate_limit.map(|l| l.starts)) placeholder="unlimited"/></label>
                                <label>"per (s)"<input type="number" min="1" max=deck_engine::MAX_RATE_PERIOD_SECS.to_string() name="rate_per" value=secs_value(c.rate_limit.map(|l| l.per_secs)) placeholder="60"/></label>
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

/// The largest value the queue limits take: the engine's rule (`validation::MAX_STORED_INT`).
fn stored_max() -> String {
    deck_engine::validation::MAX_STORED_INT.to_string()
}

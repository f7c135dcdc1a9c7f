//! The overview's live panels. Each is one component: the page renders it, and the live
//! stream renders the same component to a string (`live::fragments`).

use chrono::{DateTime, Utc};
use deck_engine::{ErrorGroup, QueueStats, ThroughputBucket, Untaken};
use leptos::prelude::*;

use crate::format::{self, url};
use crate::telemetry_view::{
    BreakerState, BreakerView, ConsoleEvent, Telemetry, failure_class, lag_class,
};

#[component]
pub fn Cards(t: Telemetry) -> impl IntoView {
    let s = &t.summary;
    let fail = s.failure_rate_5m();
    let card =
        |label: &'static str, value: String, href: String, class: &'static str, hint: String| {
            view! {
                <a class=format!("card {class}") href=href title=hint>
                    <span class="card-label">{label}</span>
                    <span class="card-value">{value}</span>
                </a>
            }
        };
    view! {
        <section class="cards" data-live="cards" aria-label="Summary">
            {card("Pending", format::count(s.pending), url("/jobs", &[("source", "active"), ("status", "due")]), "", "Due now and waiting for a worker".into())}
            {card("Scheduled", format::count(s.scheduled), url("/jobs", &[("source", "active"), ("status", "scheduled"), ("sort", "scheduled"), ("dir", "asc")]), "", "Pending with a future run time (delayed or retrying)".into())}
            {card("Buffered", format::count(s.fetched), url("/jobs", &[("source", "active"), ("status", "fetched")]), "", format!("Claimed into prefetch buffers; {} in this instance", t.runtime.buffered))}
            {card("Processing", format::count(s.processing), url("/jobs", &[("source", "active"), ("status", "processing")]), "", format!("Running now; this instance: {} of {} workers busy", t.runtime.workers_busy, t.runtime.workers_total))}
            {card("Succeeded", format::count(s.succeeded), url("/jobs", &[("source", "archive")]), "", "Jobs in the archive".into())}
            {card("Dead letters", format::count(s.dlq), url("/jobs", &[("source", "dlq")]), if s.dlq > 0 { "warn" } else { "" }, "Jobs in the dead-letter queue".into())}
            {card("Throughput 1 m", format::rate(s.throughput_1m()), "/".into(), "", format!("{} succeeded, {} failed in the last minute", s.succeeded_1m, s.failed_1m))}
            {card("Throughput 5 m", format::rate(s.throughput_5m()), "/".into(), "", format!("{} succeeded, {} failed in the last 5 minutes", s.succeeded_5m, s.failed_5m))}
            {card("Failure rate 5 m", format::percent(fail), url("/jobs", &[("source", "dlq")]), failure_class(fail), format!("{} retries scheduled in the last 5 minutes", s.retried_5m))}
        </section>
    }
}

const CHART_W: f64 = 720.0;
const CHART_H: f64 = 150.0;

/// Succeeded vs failed per minute, stacked bars, drawn on the server.
#[component]
pub fn ThroughputChart(
    buckets: Vec<ThroughputBucket>,
    #[prop(optional)] live: bool,
) -> impl IntoView {
    let max = buckets
        .iter()
        .map(|b| b.succeeded + b.failed)
        .max()
        .unwrap_or(0)
        .max(1);
    let total_ok: u64 = buckets.iter().map(|b| b.succeeded).sum();
    let total_failed: u64 = buckets.iter().map(|b| b.failed).sum();
    let n = buckets.len().max(1) as f64;
    let slot = CHART_W / n;
    let bar = (slot - 2.0).max(1.0);
    let scale = (CHART_H - 4.0) / max as f64;
    let bars = buckets
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let x = i as f64 * slot + 1.0;
            let h_ok = b.succeeded as f64 * scale;
            let h_fail = b.failed as f64 * scale;
            let avg = b
                .duration_sum_ms
                .checked_div(b.succeeded + b.failed)
                .unwrap_or(0);
            let title = format!(
                "{} UTC: {} succeeded, {} failed, {} retried, avg {}, max {}",
                b.minute.format("%H:%M"),
                format::count(b.succeeded),
                format::count(b.failed),
                format::count(b.retried),
                format::millis(avg),
                format::millis(b.duration_max_ms)
            );
            view! {
                <g>
                    <title>{title}</title>
                    <rect class="bar-ok" x=fmt(x) y=fmt(CHART_H - h_ok) width=fmt(bar) height=fmt(h_ok)></rect>
                    <rect class="bar-fail" x=fmt(x) y=fmt(CHART_H - h_ok - h_fail) width=fmt(bar) height=fmt(h_fail)></rect>
                    <rect class="bar-hit" x=fmt(x) y="0" width=fmt(bar) height=fmt(CHART_H)></rect>
                </g>
            }
        })
        .collect_view();
    let first = buckets
        .first()
        .map(|b| b.minute.format("%H:%M").to_string())
        .unwrap_or_default();
    let last = buckets
        .last()
        .map(|b| b.minute.format("%H:%M").to_string())
        .unwrap_or_default();
    let empty = total_ok + total_failed == 0;
    view! {
        <figure class="chart" data-live=live.then_some("chart")>
            <figcaption>
                <span>"Throughput per minute, last hour (UTC)"</span>
                <span class="legend">
                    <i class="sw ok"></i>{format!("succeeded {}", format::count(total_ok))}
                    <i class="sw fail"></i>{format!("failed {}", format::count(total_failed))}
                </span>
            </figcaption>
            <div class="chart-body">
                <span class="chart-max">{format::count(max)}</span>
                <svg class="throughput" viewBox=format!("0 0 {CHART_W} {CHART_H}") preserveAspectRatio="none" role="img" aria-label="Throughput per minute">
                    <line class="axis" x1="0" y1=fmt(CHART_H) x2=fmt(CHART_W) y2=fmt(CHART_H)></line>
                    {bars}
                </svg>
                {empty.then(|| view! { <p class="chart-empty">"No jobs finished in the last hour. Enqueue work (or run " <code>"deck serve --demo"</code> ") and it shows up here."</p> })}
            </div>
            <div class="chart-axis"><span>{first}</span><span>{last}</span></div>
        </figure>
    }
}

/// A chart coordinate to one decimal. `{:.1}` takes the float formatter's exact (slow)
/// path for most values, and a chart formats hundreds of them; integer tenths read the
/// same and cost a fraction.
fn fmt(v: f64) -> String {
    let tenths = (v * 10.0).round() as i64;
    let sign = if tenths < 0 { "-" } else { "" };
    let tenths = tenths.unsigned_abs();
    format!("{sign}{}.{}", tenths / 10, tenths % 10)
}

/// Queue numbers; `controls` is false on the overview (the Queues page has the forms).
#[component]
pub fn QueuesTable(queues: Vec<QueueStats>, #[prop(optional)] live: bool) -> impl IntoView {
    if queues.is_empty() {
        return view! {
            <div class="empty" data-live=live.then_some("queues")>
                <p><strong>"No queues yet."</strong>" A queue appears as soon as a job is enqueued to it — "
                "for example " <code>{super::ENQUEUE_EXAMPLE}</code>
                " or POST to " <code>"/api/v1/jobs"</code> "."</p>
            </div>
        }
        .into_any();
    }
    let rows = queues
        .into_iter()
        .map(|q| {
            let lag_avg = lag_class(q.lag_avg_ms, q.lag_warn_secs, q.lag_crit_secs);
            let lag_max = lag_class(q.lag_max_ms, q.lag_warn_secs, q.lag_crit_secs);
            let name = q.queue.clone();
            view! {
                <tr class:paused=q.paused>
                    <td class="name">
                        <a href=url("/queues", &[("q", &name)])>{name.clone()}</a>
                        {q.paused.then(|| view! { <span class="badge warn">"paused"</span> })}
                        {q.hidden.then(|| view! { <span class="badge">"hidden"</span> })}
                    </td>
                    <td class="num"><a href=url("/jobs", &[("source", "active"), ("queue", &name), ("status", "due")])>{format::count(q.pending)}</a></td>
                    <td class="num"><a href=url("/jobs", &[("source", "active"), ("queue", &name), ("status", "scheduled")])>{format::count(q.scheduled)}</a></td>
                    <td class="num"><a href=url("/jobs", &[("source", "active"), ("queue", &name), ("status", "fetched")])>{format::count(q.fetched)}</a></td>
                    <td class="num">{format::count(q.processing)}</td>
                    <td class="num"><a href=url("/jobs", &[("source", "archive"), ("queue", &name)])>{format::count(q.succeeded)}</a></td>
                    <td class="num"><a class:bad=q.failed.gt(&0) href=url("/jobs", &[("source", "dlq"), ("queue", &name)])>{format::count(q.failed)}</a></td>
                    <td class=format!("num lag {lag_avg}")>{format::millis(q.lag_avg_ms)}</td>
                    <td class=format!("num lag {lag_max}")>{format::millis(q.lag_max_ms)}</td>
                    <td class="num">{q.max_workers.map(|m| m.to_string()).unwrap_or_else(|| "∞".into())}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap" data-live=live.then_some("queues") tabindex="0" role="region" aria-label="Queues">
            <table class="dense">
                <thead>
                    <tr>
                        <th>"Queue"</th><th class="num">"Pending"</th><th class="num">"Scheduled"</th>
                        <th class="num">"Buffered"</th><th class="num">"Processing"</th><th class="num">"Succeeded"</th>
                        <th class="num">"Dead"</th><th class="num">"Lag avg"</th><th class="num">"Lag max"</th>
                        <th class="num" title="Cluster-wide concurrency cap">"Max workers"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
    .into_any()
}

/// The largest groups of dead letters, one per error fingerprint (the same failure with
/// different ids, addresses or numbers). Each shows a full sample message and links to its
/// dead letters and to the bulk flow (preview, typed confirmation, cap) preselected to it.
#[component]
pub fn ErrorGroups(
    groups: Vec<ErrorGroup>,
    now: DateTime<Utc>,
    #[prop(optional)] live: bool,
) -> impl IntoView {
    if groups.is_empty() {
        return view! {
            <div class="empty" data-live=live.then_some("errors")>
                <p>"The dead-letter queue is empty. Jobs land here when retries run out, a handler reports a fatal error, or an operator cancels them."</p>
            </div>
        }
        .into_any();
    }
    let rows = groups
        .into_iter()
        .map(|g| {
            let reason = g.reason.as_str();
            let fp = g.fingerprint.to_string();
            let list = url("/jobs", &[("source", "dlq"), ("group", &fp)]);
            let bulk = |action: &str| url("/dlq/bulk", &[("source", "dlq"), ("group", &fp), ("action", action)]);
            let sample = if g.sample.is_empty() { "(no message)".to_string() } else { g.sample.clone() };
            let kind = if g.kind.is_empty() { "—".to_string() } else { g.kind.clone() };
            view! {
                <tr data-group=fp.clone()>
                    <td><span class=format!("reason r-{}", reason.to_ascii_lowercase())>{reason}</span><br/><small class="muted">{kind}</small></td>
                    <td><code>{g.job_type.clone()}</code></td>
                    <td class="group-msg">
                        <a class="sample" href=list.clone() title=format!("{sample} (error group {fp})")>{sample.clone()}</a>
                        <div class="group-actions">
                            <a href=list>"Dead letters"</a>" · "
                            <a href=bulk("resurrect")>"Resurrect group"</a>" · "
                            <a href=bulk("purge")>"Purge group"</a>
                        </div>
                    </td>
                    <td class="num">{format::count(g.count)}</td>
                    <td class="when" title=format::time(g.last_seen)>{format::ago(g.last_seen, now)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap" data-live=live.then_some("errors") tabindex="0" role="region" aria-label="Top dead-letter errors">
            <table class="dense">
                <thead><tr><th>"Reason, kind"</th><th>"Type"</th><th>"Error (latest) and actions on the group"</th><th class="num">"Jobs"</th><th>"Last seen"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
    .into_any()
}

/// What a breaker's row says: why it is in its state, and when it tries the job type again.
/// An open breaker's failure window is empty (opening clears it), so it shows the failures
/// that opened it and when, not a count of zero.
fn breaker_text(b: &BreakerView) -> (String, String) {
    let ago = b
        .opened_ms_ago
        .map(|ms| format!(" {} ago", format::millis(ms)))
        .unwrap_or_default();
    let opened = match (b.probe_failed, b.opened_by_failures) {
        (true, _) => format!("reopened{ago}: the probe failed"),
        (false, Some(n)) => format!("{n} failures opened it{ago}"),
        (false, None) => format!("opened{ago}"),
    };
    match b.state {
        BreakerState::Closed => (format!("{} recent", b.recent_failures), "—".into()),
        BreakerState::Open => (
            opened,
            b.probe_in_ms
                .map(|ms| format!("in {}", format::millis(ms)))
                .unwrap_or_else(|| "—".into()),
        ),
        BreakerState::HalfOpen => (
            opened,
            if b.probe_running {
                "probe running".into()
            } else {
                "with the next job".into()
            },
        ),
    }
}

#[component]
pub fn Breakers(breakers: Vec<BreakerView>, #[prop(optional)] live: bool) -> impl IntoView {
    if breakers.is_empty() {
        return view! {
            <div class="empty" data-live=live.then_some("breakers")>
                <p>"No circuit breakers tripped. A job type's breaker opens after repeated failures and defers its jobs for a while instead of burning their attempts."</p>
            </div>
        }
        .into_any();
    }
    let rows = breakers
        .into_iter()
        .map(|b| {
            let class = match b.state {
                BreakerState::Closed => "ok",
                BreakerState::HalfOpen => "warn",
                BreakerState::Open => "crit",
            };
            let (why, next) = breaker_text(&b);
            view! {
                <tr>
                    <td><code>{b.job_type}</code></td>
                    <td><span class=format!("badge {class}")>{b.state.as_str()}</span></td>
                    <td>{why}</td>
                    <td>{next}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap" data-live=live.then_some("breakers") tabindex="0" role="region" aria-label="Circuit breakers">
            <table class="dense">
                <thead><tr><th>"Job type"</th><th>"State"</th><th>"Failures"</th><th>"Next probe"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
    .into_any()
}

#[component]
pub fn EventConsole(events: Vec<ConsoleEvent>, #[prop(optional)] live: bool) -> impl IntoView {
    let lines = if events.is_empty() {
        view! { <li class="muted">"Waiting for events: state changes and operator actions appear here as they happen."</li> }.into_any()
    } else {
        events
            .into_iter()
            .map(|e| {
                view! {
                    <li class=format!("ev ev-{}", e.level.as_str())>
                        <time datetime=e.at.to_rfc3339()>{e.at.format("%H:%M:%S UTC").to_string()}</time>
                        " "
                        <span>{e.text}</span>
                        {e.job_id.map(|id| {
                            let id = id.to_string();
                            view! { " " <a class="id" href=format!("/jobs/{id}") title=id.clone()><code>{crate::format::short_id(&id)}</code></a> }
                        })}
                    </li>
                }
            })
            .collect_view()
            .into_any()
    };
    view! { <ol class="events" data-live=live.then_some("events") tabindex="0" aria-label="Live events">{lines}</ol> }
}

#[cfg(test)]
mod fmt_tests {
    use super::fmt;

    #[test]
    fn coordinates_read_as_with_one_decimal() {
        for v in [0.0, 0.04, 0.05, 1.0, 2.25, 17.96, 120.0, 599.99, -3.5] {
            assert_eq!(
                fmt(v),
                format!("{:.1}", (v * 10.0_f64).round() / 10.0),
                "{v}"
            );
        }
        assert_eq!(fmt(17.96), "18.0");
        assert_eq!(fmt(-3.5), "-3.5");
    }
}

/// Pending work no live instance takes: a queue nobody serves, a type nobody runs. Always
/// rendered (empty when all is taken), so the live stream has a place to put a new warning.
#[component]
pub fn UntakenWarnings(untaken: Vec<Untaken>, live: bool) -> impl IntoView {
    let items = untaken
        .into_iter()
        .map(|u| {
            let queue = u.queue().to_string();
            let link = url(
                "/jobs",
                &[
                    ("source", "active"),
                    ("queue", &queue),
                    ("status", "pending"),
                ],
            );
            let kind = match &u {
                Untaken::Queue { .. } => "queue",
                Untaken::Type { .. } => "type",
            };
            view! {
                <p class="flash err" data-untaken=kind>
                    {u.message()}" "<a href=link>"See the jobs"</a>
                </p>
            }
        })
        .collect_view();
    view! { <div class="untaken" role="status" data-live=live.then_some("warnings")>{items}</div> }
}

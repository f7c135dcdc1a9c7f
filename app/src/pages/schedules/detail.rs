//! One schedule (`/schedules/{name}`): its definition and state, its next five occurrences
//! in a time zone the operator picks (`?tz=`), its recent runs with their jobs, the actions
//! and the edit form.

use chrono::Utc;
use deck_engine::validation::ValidationError;
use deck_engine::{MisfirePolicy, OverlapPolicy, Schedule, ScheduleOrigin, StoreError};
use leptos::prelude::*;

use super::form::{ScheduleFormView, ZoneList};
use super::{
    BY_QUERY, LastRun, NextRun, Outcome, RunView, ScheduleActions, StateBadges, Timestamp,
    ZonedTime, next_run, schedule_url, upcoming,
};
use crate::components::layout::{Col, DenseTable, ErrorBox, Layout, OperatorOnly};
use crate::format::{self, pretty_json, url};
use crate::request::{path, query, session};
use crate::schedule_form::ScheduleForm;
use crate::state::{Console, ScheduleDraft};

/// Occurrences shown ahead.
pub const UPCOMING: usize = 5;
/// Runs shown in the history.
pub const HISTORY: u32 = 20;

/// The zone times are shown in: the one asked for when it is a zone, else the schedule's
/// (and why the one asked for is not used).
pub fn pick_zone(asked: Option<&str>, own: &str) -> (String, Option<ValidationError>) {
    match asked {
        None => (own.to_string(), None),
        Some(tz) => match deck_engine::schedule::parse_zone(tz) {
            Ok(_) => (tz.to_string(), None),
            Err(e) => (own.to_string(), Some(e)),
        },
    }
}

#[component]
pub fn SchedulePage() -> impl IntoView {
    let console = expect_context::<Console>();
    let raw = path()
        .strip_prefix("/schedules/")
        .unwrap_or_default()
        .to_string();
    let q = query();
    let name = match q.get("name") {
        Some(name) if raw == BY_QUERY => name.to_string(),
        _ => format::percent_decode(&raw).unwrap_or(raw),
    };
    let asked_zone = q.get("tz").map(str::to_string);
    let draft_id = q.get("form").map(str::to_string);
    let can_act = session().can_act();
    Suspend::new(async move {
        let now = Utc::now();
        let found = console.ops().schedule(&name).await;
        let doc_title = format!("Schedule {name}");
        let schedule = match found {
            Ok(s) => s,
            Err(StoreError::ScheduleNotFound(_)) => {
                crate::request::not_found_status();
                return view! {
                    <Layout title="Schedule".into() doc_title=doc_title>
                        <div class="empty" id="schedule-not-found">
                            <p>"No schedule is named "<code>{name.clone()}</code>". It may have been deleted, or renamed in deck.toml."</p>
                            <a href="/schedules">"Back to schedules"</a>
                        </div>
                    </Layout>
                }
                .into_any();
            }
            Err(e) => {
                return view! {
                    <Layout title="Schedule".into() doc_title=doc_title>
                        <ErrorBox message=format!("Cannot read schedule {name:?}: {e}")/>
                    </Layout>
                }
                .into_any();
            }
        };
        let (zone, zone_problem) = pick_zone(asked_zone.as_deref(), &schedule.definition.time_zone);
        let history = match console.store().schedule_runs(&name, HISTORY).await {
            Ok(runs) => Ok(RunView::read_all(&console, runs).await),
            Err(e) => Err(e.to_string()),
        };
        let draft = draft_id
            .and_then(|id| console.schedule_draft(&id))
            .filter(|d| d.editing.as_deref() == Some(name.as_str()));
        let title = format!("Schedule {name}");
        view! {
            <Layout title=title>
                <ScheduleDetail
                    schedule=schedule
                    now=now
                    zone=zone
                    zone_problem=zone_problem
                    history=history
                    draft=draft
                    can_act=can_act/>
                <ZoneList/>
            </Layout>
        }
        .into_any()
    })
}

fn misfire_text(policy: MisfirePolicy) -> String {
    match policy {
        MisfirePolicy::RunOnce => "run the latest missed occurrence once".into(),
        MisfirePolicy::RunAll { cap } => {
            format!("run every missed occurrence, oldest first, at most {cap}")
        }
        MisfirePolicy::Skip => "skip missed occurrences".into(),
    }
}

fn overlap_text(policy: OverlapPolicy) -> &'static str {
    match policy {
        OverlapPolicy::Allow => "enqueue even while the previous job is active",
        OverlapPolicy::SkipWhileActive => {
            "skip an occurrence while the previous job is pending or running"
        }
    }
}

/// Everything the page shows, from plain data: `zone` is the zone its times are shown in.
#[component]
pub fn ScheduleDetail(
    schedule: Schedule,
    now: Timestamp,
    zone: String,
    zone_problem: Option<ValidationError>,
    history: Result<Vec<RunView>, String>,
    draft: Option<ScheduleDraft>,
    can_act: bool,
) -> impl IntoView {
    let s = schedule;
    let def = s.definition.clone();
    let name = def.name.clone();
    let own_zone = def.time_zone.clone();
    let declared = s.origin == ScheduleOrigin::Declared;
    let job = def.job.clone();
    let tags = if job.tags.is_empty() {
        view! { <span class="muted">"none"</span> }.into_any()
    } else {
        job.tags
            .iter()
            .map(|t| view! { <span class="tag">{t.clone()}</span> })
            .collect_view()
            .into_any()
    };
    let definition = view! {
        <dl class="meta" id="schedule-definition">
            <dt>"When"</dt><dd><code>{def.spec.to_string()}</code></dd>
            <dt>"Time zone"</dt><dd>{own_zone.clone()}</dd>
            <dt>"Job type"</dt><dd><code>{job.job_type.clone()}</code></dd>
            <dt>"Queue"</dt><dd><a href=url("/queues", &[("q", &job.queue)])>{job.queue.clone()}</a></dd>
            <dt>"Priority"</dt><dd>{job.priority}</dd>
            <dt>"Tags"</dt><dd>{tags}</dd>
            <dt>"Max attempts"</dt><dd>{job.max_attempts.map(|m| m.to_string()).unwrap_or_else(|| "engine default".into())}</dd>
            <dt>"Expires after"</dt><dd>{job.expires_after_secs.map(format::seconds).unwrap_or_else(|| "never".into())}</dd>
            <dt>"Missed occurrences"</dt><dd>{misfire_text(def.misfire)}</dd>
            <dt>"Overlap"</dt><dd>{overlap_text(def.overlap)}</dd>
            <dt>"Payload"</dt><dd><pre class="json">{pretty_json(&job.payload)}</pre></dd>
        </dl>
    };
    let state = view! {
        <dl class="meta" id="schedule-state">
            <dt>"State"</dt><dd><StateBadges enabled=s.enabled origin=s.origin/></dd>
            <dt>"Next run"</dt><dd class="next-run"><NextRun next=next_run(&s, now) zone=zone.clone() enabled=s.enabled now=now/></dd>
            <dt>"Last run"</dt><dd class="last-run">{
                let last = match &history {
                    Ok(runs) => runs.first().cloned(),
                    Err(_) => None,
                };
                view! { <LastRun last=last zone=zone.clone() now=now/> }
            }</dd>
            <dt>"Handled through"</dt><dd title="Occurrences up to this time are run or skipped"><ZonedTime at=s.handled_through zone=zone.clone() now=now/></dd>
            <dt>"Created"</dt><dd><ZonedTime at=s.created_at zone=zone.clone() now=now/></dd>
            <dt>"Changed"</dt><dd><ZonedTime at=s.updated_at zone=zone.clone() now=now/></dd>
        </dl>
    };
    let occurrences = match upcoming(&s, now, super::detail::UPCOMING) {
        Err(e) => {
            view! { <ErrorBox message=format!("Cannot compute its occurrences: {e}")/> }.into_any()
        }
        Ok(times) if times.is_empty() => {
            view! { <p class="muted">"It never occurs again."</p> }.into_any()
        }
        Ok(times) => {
            let items = times
                .into_iter()
                .map(|t| view! { <li><ZonedTime at=t zone=zone.clone() now=now/></li> })
                .collect_view();
            view! { <ol class="occurrences" id="next-occurrences">{items}</ol> }.into_any()
        }
    };
    let zone_note = zone_problem.map(|e| {
        view! {
            <div class="flash err" role="alert" id="tz-problem">
                {format!("{}: {}. Showing {own_zone}, the schedule's zone.", e.problem, e.help)}
            </div>
        }
    });
    let history_view = match history {
        Err(e) => view! { <ErrorBox message=format!("Cannot read its runs: {e}")/> }.into_any(),
        Ok(runs) if runs.is_empty() => view! { <p class="muted">"No runs yet."</p> }.into_any(),
        Ok(runs) => {
            let rows = runs
                .into_iter()
                .map(|v| view! {
                    <tr>
                        <td class="when"><ZonedTime at=v.run.scheduled_at zone=zone.clone() now=now/></td>
                        <td>{if v.run.manual { view! { <span class="badge info">"manual"</span> }.into_any() } else { view! { <span class="muted">"scheduled"</span> }.into_any() }}</td>
                        <td class="outcome"><Outcome outcome=v.outcome/></td>
                        <td class="when">{format::zoned(v.run.recorded_at, &zone)}</td>
                    </tr>
                })
                .collect_view();
            view! {
                <DenseTable
                    label="Recent runs"
                    id="schedule-history"
                    cols=Col::texts(["Occurrence", "Run", "Job and outcome", "Recorded"])
                >
                    {rows}
                </DenseTable>
            }
            .into_any()
        }
    };
    let (form, problem) = match draft {
        Some(d) => (d.form, Some(d.problem)),
        None => (ScheduleForm::from_definition(&def), None),
    };
    let declared_note = declared.then(|| view! {
        <p class="flash" id="declared-note">"Declared in deck.toml: an edit here lasts until the next start, which puts the declared definition back. Change deck.toml to change it for good. (Pausing stays.)"</p>
    });
    // A GET form replaces the action's query: the name of a `?name=` page goes along.
    let page = schedule_url(&name);
    let (action, by_query) = match page.split_once('?') {
        Some((path, _)) => (path.to_string(), Some(name.clone())),
        None => (page, None),
    };
    view! {
        <div class="job-head">
            <h2><code>{def.spec.to_string()}</code>" in "{own_zone.clone()}" → "<code>{job.job_type.clone()}</code>" on "{job.queue.clone()}</h2>
            <a href="/schedules">"← all schedules"</a>
        </div>
        {can_act.then(|| view! { <ScheduleActions name=name.clone() enabled=s.enabled origin=s.origin/> })}
        <div class="grid-2">
            <section class="panel"><h2>"Definition"</h2>{definition}</section>
            <section class="panel"><h2>"State"</h2><div data-live-page="state">{state}</div></section>
        </div>
        <section class="panel" id="occurrences" aria-labelledby="occurrences-title">
            <h2 id="occurrences-title">{format!("Next {} occurrences", super::detail::UPCOMING)}</h2>
            <form method="get" action=action class="inline" id="tz-form">
                {by_query.map(|n| view! { <input type="hidden" name="name" value=n/> })}
                <label>"Show in time zone "
                    <input type="text" name="tz" value=zone.clone() list="time-zones" spellcheck="false" autocomplete="off"/>
                </label>
                <button class="quiet">"Show"</button>
            </form>
            {zone_note}
            <p class="muted small">{format!("Times in {zone}.")}{(!s.enabled).then_some(" The schedule is paused: these run only if it is resumed before them.")}</p>
            <div data-live-page="occurrences">{occurrences}</div>
        </section>
        <section class="panel" id="history" aria-labelledby="history-title">
            <h2 id="history-title">"Recent runs"</h2>
            <div data-live-page="history">{history_view}</div>
        </section>
        <section class="panel edit" id="edit-schedule" aria-labelledby="edit-title">
            <h2 id="edit-title">"Edit"</h2>
            {declared_note}
            <OperatorOnly>
                <ScheduleFormView endpoint="schedule/edit" form=form problem=problem/>
            </OperatorOnly>
        </section>
    }
}

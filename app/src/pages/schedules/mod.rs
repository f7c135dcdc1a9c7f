//! Recurring schedules: the list (`/schedules`) with each schedule's next and last run, its
//! actions and the create form; one schedule's page is [`detail`], the form [`form`].
//!
//! Components take plain data (a `Schedule`, its runs with their jobs' states looked up),
//! so they render in tests without a database.

pub mod detail;
pub mod form;

use chrono::{DateTime, Utc};
use deck_engine::schedule::Timing;
use deck_engine::{JobId, JobState, Schedule, ScheduleOrigin, ScheduleRun, StoreResult};
use leptos::prelude::*;

use crate::components::layout::{Col, DenseTable, ErrorBox, Layout, OperatorOnly, PostForm};
use crate::format::{self, url};
use crate::request::{query, session};
use crate::schedule_form::ScheduleForm;
use crate::state::Console;

use form::{ScheduleFormView, ZoneList};

type Timestamp = DateTime<Utc>;

/// The path segment of the page for names a path cannot carry (see [`schedule_url`]).
pub const BY_QUERY: &str = "_";

/// A schedule's page: `/schedules/{name}`, the name percent-encoded. A name that is a dot
/// segment (`.`, `..`) is resolved away by browsers and routers even when encoded, so those
/// go as `/schedules/_?name=..`.
pub fn schedule_url(name: &str) -> String {
    match name {
        "." | ".." => format!("/schedules/{BY_QUERY}?name={}", format::enc(name)),
        other => format!("/schedules/{}", format::enc(other)),
    }
}

/// `url` with one more query parameter.
pub(crate) fn with_param(url: &str, key: &str, value: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{key}={}", format::enc(value))
}

/// The next `n` occurrences the scheduler will look at: after now, and after what it has
/// handled already. An error when the stored definition no longer parses.
pub fn upcoming(s: &Schedule, now: Timestamp, n: usize) -> Result<Vec<Timestamp>, String> {
    let timing =
        Timing::parse(&s.definition.spec, &s.definition.time_zone).map_err(|e| e.to_string())?;
    Ok(timing.upcoming(now.max(s.handled_through), n))
}

/// The next occurrence; `Ok(None)` when there is none (a date that never comes again).
pub fn next_run(s: &Schedule, now: Timestamp) -> Result<Option<Timestamp>, String> {
    upcoming(s, now, 1).map(|v| v.into_iter().next())
}

/// What became of one run, as its job stands now.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// The overlap policy skipped it: the previous job was still pending or running.
    Skipped,
    /// Its job; `state` is `None` when no pillar has it any more (purged, or pruned).
    Job { id: JobId, state: Option<JobState> },
    /// Its job could not be read.
    Unread { id: JobId, error: String },
}

/// One run of a schedule and its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct RunView {
    pub run: ScheduleRun,
    pub outcome: RunOutcome,
}

impl RunView {
    /// Look the run's job up.
    pub async fn read(console: &Console, run: ScheduleRun) -> RunView {
        let outcome = match run.job_id {
            None => RunOutcome::Skipped,
            Some(id) => match console.store().get_job(id).await {
                Ok(job) => RunOutcome::Job {
                    id,
                    state: job.map(|j| j.state),
                },
                Err(e) => RunOutcome::Unread {
                    id,
                    error: e.to_string(),
                },
            },
        };
        RunView { run, outcome }
    }

    pub async fn read_all(console: &Console, runs: Vec<ScheduleRun>) -> Vec<RunView> {
        futures::future::join_all(runs.into_iter().map(|r| RunView::read(console, r))).await
    }
}

/// One line of the list: the schedule, its next occurrence, its last run's outcome.
#[derive(Debug, Clone)]
pub struct ScheduleRow {
    pub schedule: Schedule,
    pub next: Result<Option<Timestamp>, String>,
    pub last: Option<RunView>,
}

impl ScheduleRow {
    pub async fn read_all(console: &Console, now: Timestamp) -> StoreResult<Vec<ScheduleRow>> {
        let mut schedules = console.store().list_schedules().await?;
        schedules.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(
            futures::future::join_all(schedules.into_iter().map(|s| async move {
                let last = match s.last_run.clone() {
                    Some(run) => Some(RunView::read(console, run).await),
                    None => None,
                };
                ScheduleRow {
                    next: next_run(&s, now),
                    schedule: s,
                    last,
                }
            }))
            .await,
        )
    }
}

#[component]
pub fn SchedulesPage() -> impl IntoView {
    let console = expect_context::<Console>();
    // A refused create comes back here with what was typed (`?form=`).
    let draft = query()
        .get("form")
        .and_then(|id| console.schedule_draft(id))
        .filter(|d| d.editing.is_none());
    let can_act = session().can_act();
    Suspend::new(async move {
        let now = Utc::now();
        let body = match ScheduleRow::read_all(&console, now).await {
            Ok(rows) => view! { <ScheduleList rows=rows now=now can_act=can_act/> }.into_any(),
            Err(e) => {
                view! { <ErrorBox message=format!("Cannot read schedules: {e}")/> }.into_any()
            }
        };
        let (form, problem) = match draft {
            Some(d) => (d.form, Some(d.problem)),
            None => (ScheduleForm::default(), None),
        };
        view! {
            <Layout title="Schedules".into()>
                {body}
                <section class="panel" id="new-schedule" aria-labelledby="new-schedule-title">
                    <h2 id="new-schedule-title">"New schedule"</h2>
                    <OperatorOnly>
                        <ScheduleFormView endpoint="schedule/create" form=form problem=problem/>
                    </OperatorOnly>
                </section>
                <ZoneList/>
            </Layout>
        }
    })
}

/// The list, or how to add the first schedule.
#[component]
pub fn ScheduleList(rows: Vec<ScheduleRow>, now: Timestamp, can_act: bool) -> impl IntoView {
    if rows.is_empty() {
        return view! {
            <div class="empty" id="no-schedules">
                <p><strong>"No schedules yet."</strong>" A schedule enqueues a job on a cron expression or at a fixed interval. Add one:"</p>
                <ul>
                    <li>"in "<code>"deck.toml"</code>", as a "<code>"[[schedules]]"</code>" table (declared at every start), e.g. "
                        <code>"[[schedules]] name = \"nightly-report\" cron = \"0 2 * * *\" time_zone = \"Europe/Berlin\" queue = \"reports\" job_type = \"report.generate\""</code></li>
                    <li>"with the form below;"</li>
                    <li>"through the API: "<code>"POST /api/v1/schedules"</code>"."</li>
                </ul>
            </div>
        }
        .into_any();
    }
    let body = rows
        .into_iter()
        .map(|row| {
            let s = &row.schedule;
            let def = &s.definition;
            let name = def.name.clone();
            let zone = def.time_zone.clone();
            view! {
                <tr data-schedule=name.clone() class:paused=!s.enabled>
                    <td class="name"><a href=schedule_url(&name)>{name.clone()}</a></td>
                    <td><code>{def.spec.to_string()}</code><br/><small class="muted">{zone.clone()}</small></td>
                    <td><code>{def.job.job_type.clone()}</code>" → "<a class="in-text" href=url("/queues", &[("q", &def.job.queue)])>{def.job.queue.clone()}</a></td>
                    <td class="next-run"><NextRun next=row.next.clone() zone=zone.clone() enabled=s.enabled now=now/></td>
                    <td class="last-run"><LastRun last=row.last.clone() zone=zone now=now/></td>
                    <td class="state"><StateBadges enabled=s.enabled origin=s.origin/></td>
                    {can_act.then(|| view! {
                        <td class="actions-cell"><ScheduleActions name=name.clone() enabled=s.enabled origin=s.origin/></td>
                    })}
                </tr>
            }
        })
        .collect_view();
    let mut cols = Col::texts([
        "Name",
        "When",
        "Job → queue",
        "Next run",
        "Last run",
        "State",
    ]);
    if can_act {
        cols.push(Col::text("Actions"));
    }
    view! {
        <DenseTable label="Schedules" id="schedules" class="schedules" live_page="schedules" cols=cols>
            {body}
        </DenseTable>
    }
    .into_any()
}

/// A time in a zone, with how far from now it is (the UTC time as a tooltip).
#[component]
pub fn ZonedTime(at: Timestamp, zone: String, now: Timestamp) -> impl IntoView {
    view! {
        <time datetime=at.to_rfc3339() title=format::time(at)>{format::zoned(at, &zone)}</time>
        " · "<span class="muted">{format::ago(at, now)}</span>
    }
}

#[component]
pub fn NextRun(
    next: Result<Option<Timestamp>, String>,
    zone: String,
    enabled: bool,
    now: Timestamp,
) -> impl IntoView {
    match next {
        Err(e) => view! { <span class="badge crit" title=e>"cannot compute"</span> }.into_any(),
        Ok(None) => view! { <span class="muted">"never again"</span> }.into_any(),
        Ok(Some(at)) if !enabled => view! {
            <span class="muted" title="Paused: this occurrence runs only if the schedule is resumed before it">
                <ZonedTime at=at zone=zone now=now/>" (paused)"
            </span>
        }
        .into_any(),
        Ok(Some(at)) => view! { <ZonedTime at=at zone=zone now=now/> }.into_any(),
    }
}

#[component]
pub fn LastRun(last: Option<RunView>, zone: String, now: Timestamp) -> impl IntoView {
    match last {
        None => view! { <span class="muted">"never run"</span> }.into_any(),
        Some(v) => view! {
            <ZonedTime at=v.run.scheduled_at zone=zone now=now/>
            {v.run.manual.then(|| view! { " "<span class="badge info" title="Run now, by an operator">"manual"</span> })}
            <br/><Outcome outcome=v.outcome/>
        }
        .into_any(),
    }
}

/// A job state in the words of a schedule's runs.
pub(crate) fn state_word(state: JobState) -> (String, &'static str, &'static str) {
    match state {
        JobState::Pending => ("pending".into(), "badge", "pending"),
        JobState::Fetched => ("buffered".into(), "badge info", "buffered"),
        JobState::Processing => ("running".into(), "badge info", "running"),
        JobState::Succeeded => ("succeeded".into(), "badge ok", "succeeded"),
        JobState::Dead(r) => (format!("dead: {r}"), "badge crit", "dead"),
    }
}

/// A run's outcome: its job (linked) and the job's state now, or why there is none.
#[component]
pub fn Outcome(outcome: RunOutcome) -> impl IntoView {
    let job_link = |id: JobId| {
        let id = id.to_string();
        view! { <a class="job-link" href=format!("/jobs/{id}") title=id.clone()><code>{format::short_id(&id)}</code></a>" " }
    };
    match outcome {
        RunOutcome::Skipped => view! {
            <span class="badge warn" data-outcome="skipped">"skipped (previous still active)"</span>
        }
        .into_any(),
        RunOutcome::Job {
            id,
            state: Some(state),
        } => {
            let (word, class, key) = state_word(state);
            view! { {job_link(id)}<span class=class data-outcome=key>{word}</span> }.into_any()
        }
        RunOutcome::Job { id, state: None } => view! {
            {job_link(id)}<span class="badge" data-outcome="gone" title="No pillar has the job any more">"gone (purged or pruned)"</span>
        }
        .into_any(),
        RunOutcome::Unread { id, error } => view! {
            {job_link(id)}<span class="badge crit" data-outcome="unread" title=error>"cannot read"</span>
        }
        .into_any(),
    }
}

#[component]
pub fn StateBadges(enabled: bool, origin: ScheduleOrigin) -> impl IntoView {
    let state = if enabled {
        view! { <span class="badge ok" data-state="enabled">"enabled"</span> }.into_any()
    } else {
        view! { <span class="badge warn" data-state="paused">"paused"</span> }.into_any()
    };
    let origin = match origin {
        ScheduleOrigin::Declared => view! {
            <span class="badge info" data-origin="declared" title="Declared in deck.toml (or by the embedding program): put back as declared at every start">"declared in deck.toml"</span>
        }
        .into_any(),
        ScheduleOrigin::Operator => view! {
            <span class="badge" data-origin="operator" title="Created at run time, in the console or through the API">"created here"</span>
        }
        .into_any(),
    };
    view! { {state}" "{origin} }
}

/// Pause or resume, run now, delete (after a confirmation box).
#[component]
pub fn ScheduleActions(name: String, enabled: bool, origin: ScheduleOrigin) -> impl IntoView {
    let (op, label, class, help) = if enabled {
        (
            "pause",
            "Pause",
            "warn",
            "Stop enqueueing its occurrences; those that pass while paused are not caught up on",
        )
    } else {
        (
            "resume",
            "Resume",
            "",
            "Enqueue its occurrences again, from the next one on",
        )
    };
    let delete_help = match origin {
        ScheduleOrigin::Declared => {
            "Delete it and its history (its jobs stay). It is declared in deck.toml: the next start creates it again unless it is removed from the file"
        }
        ScheduleOrigin::Operator => "Delete it and its history; the jobs it enqueued stay",
    };
    let (name_state, name_run) = (name.clone(), name.clone());
    view! {
        <div class="actions">
            <PostForm endpoint="schedule/state" class="inline">
                <input type="hidden" name="name" value=name_state/>
                <button name="op" value=op class=class title=help>{label}</button>
            </PostForm>
            <PostForm endpoint="schedule/run" class="inline">
                <input type="hidden" name="name" value=name_run/>
                <button class="quiet" title="Enqueue its job now, outside its timing (also while paused); its next run stays as it is">"Run now"</button>
            </PostForm>
            <PostForm endpoint="schedule/delete" class="inline confirm-form" back="/schedules">
                <input type="hidden" name="name" value=name/>
                <label><input type="checkbox" name="confirm" value="yes" required=true/>" delete for good"</label>
                <button class="danger" title=delete_help>"Delete"</button>
            </PostForm>
        </div>
    }
}

use chrono::Utc;
use deck_engine::attempts::{AttemptOutcome, AttemptRecord};
use deck_engine::model::owner_instance;
use deck_engine::{Job, JobId, JobState, Pillar};
use leptos::prelude::*;

use crate::components::layout::{ErrorBox, Layout, OperatorOnly, PostForm, TextBox};
use crate::diff::{self, Line};
use crate::format::{self, pretty_json};
use crate::request::{path, query};
use crate::state::{Console, Draft};

#[component]
pub fn JobPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let raw_id = path().trim_start_matches("/jobs/").to_string();
    let q = query();
    let editing = q.get("edit").is_some();
    let draft = q
        .get("draft")
        .and_then(|d| console.draft(d).map(|dr| (d.to_string(), dr)));
    Suspend::new(async move {
        let id: JobId = match raw_id.parse() {
            Ok(id) => id,
            Err(_) => {
                crate::request::not_found_status();
                return view! { <Layout title="Job".into()><ErrorBox message=format!("{raw_id:?} is not a job id (a UUID such as 0193a5c2-…).")/></Layout> }.into_any();
            }
        };
        let job = console.store().get_job(id).await;
        let progress = console.running_progress().remove(&id);
        let held = match &job {
            Ok(Some(j)) if j.state == JobState::Pending => console
                .store()
                .list_queues()
                .await
                .ok()
                .and_then(|qs| qs.into_iter().find(|q| q.name == j.queue))
                .and_then(|q| held_reason(&q)),
            _ => None,
        };
        let section = match &job {
            Ok(Some(job)) if job.pillar() == Pillar::Dlq => "/jobs?source=dlq",
            _ => "/jobs",
        };
        let body = match job {
            Ok(Some(job)) => {
                view! { <JobView job=job editing=editing draft=draft progress=progress held=held/> }
                    .into_any()
            }
            Ok(None) => {
                crate::request::not_found_status();
                view! {
                <div class="empty"><p>{format!("No job {id} in the active jobs, the archive or the dead-letter queue. It may have been purged or pruned by retention.")}</p>
                <a href="/jobs">"Back to jobs"</a></div>
                }
                .into_any()
            }
            Err(e) => view! { <ErrorBox message=format!("Cannot read job {id}: {e}")/> }.into_any(),
        };
        let doc_title = format!("Job {}", format::short_id(&id.to_string()));
        view! { <Layout title="Job".into() section=section doc_title=doc_title>{body}</Layout> }
            .into_any()
    })
}

/// Why a pending job of this queue is not starting, when its queue holds it back.
fn held_reason(q: &deck_engine::QueueConfig) -> Option<String> {
    if q.paused {
        Some("its queue is paused".into())
    } else {
        q.rate_limited_until.map(|until| {
            format!(
                "its queue is rate limited until {} (this period's starts are used up; no attempt is spent)",
                format::time(until)
            )
        })
    }
}

fn state_text(state: JobState) -> (String, &'static str) {
    match state {
        JobState::Pending => ("pending".into(), "badge"),
        JobState::Fetched => ("buffered (claimed, not started)".into(), "badge info"),
        JobState::Processing => ("processing".into(), "badge info"),
        JobState::Succeeded => ("succeeded".into(), "badge ok"),
        JobState::Dead(r) => (format!("dead: {r}"), "badge crit"),
    }
}

#[component]
pub fn JobView(
    job: Job,
    editing: bool,
    draft: Option<(String, Draft)>,
    /// The latest progress report, when this process runs the job.
    #[prop(default = None)]
    progress: Option<deck_engine::Progress>,
    /// Why a pending job is held back by its queue (paused, rate limited).
    #[prop(default = None)]
    held: Option<String>,
) -> impl IntoView {
    let now = Utc::now();
    let id = job.id.to_string();
    let (state, state_class) = state_text(job.state);
    let pillar = job.pillar();
    let editable = matches!(job.state, JobState::Pending | JobState::Dead(_));
    // The enqueuing request's trace (W3C trace id): what Jaeger or Tempo search by.
    let trace_id = job
        .trace_context
        .as_deref()
        .and_then(deck_engine::trace::trace_id)
        .map(str::to_string);
    let opt = |t: Option<chrono::DateTime<Utc>>| {
        t.map(|t| {
            view! { <span title=format::time(t)>{format::time(t)}" · "{format::ago(t, now)}</span> }
                .into_any()
        })
        .unwrap_or_else(|| view! { <span class="muted">"—"</span> }.into_any())
    };
    let meta = view! {
        <dl class="meta">
            <dt>"Id"</dt><dd><code>{id.clone()}</code></dd>
            <dt>"State"</dt><dd><span class=state_class>{state}</span>{job.cancel_requested.then(|| view! { " " <span class="badge warn">"cancel requested"</span> })}</dd>
            {held.map(|why| view! { <dt>"Waiting"</dt><dd data-held>{why}</dd> })}
            {(job.state == JobState::Processing).then(|| view! {
                <dt>"Progress"</dt><dd>{progress_view(progress.as_ref(), now)}</dd>
            })}
            <dt>"Queue"</dt><dd><a href=format!("/queues?q={}", format::enc(&job.queue))>{job.queue.clone()}</a></dd>
            <dt>"Type"</dt><dd><code>{job.job_type.clone()}</code></dd>
            {job.batch_id.map(|b| view! { <dt>"Batch"</dt><dd data-batch="">"Member of batch "<a href=crate::pages::batches::batch_url(b) title=b.to_string()><code>{format::short_id(&b.to_string())}</code></a></dd> })}
            <dt>"Priority"</dt><dd>{job.priority}</dd>
            <dt>"Attempts"</dt><dd>{format!("{}{}", job.attempt, job.max_attempts.map(|m| format!(" of {m}")).unwrap_or_default())}</dd>
            <dt>"Tags"</dt><dd>{if job.tags.is_empty() { view! { <span class="muted">"none"</span> }.into_any() } else { job.tags.iter().map(|t| view! { <span class="tag">{t.clone()}</span> }).collect_view().into_any() }}</dd>
            <dt>"Owner"</dt><dd>{job.worker_id.as_deref().map(|w| view! { <code title="the instance holding (or last holding) the job">{owner_instance(w).to_string()}</code> }.into_any()).unwrap_or_else(|| view! { <span class="muted">"no worker"</span> }.into_any())}</dd>
            {job.error_group.clone().map(|fp| view! {
                <dt>"Error group"</dt><dd data-error-group=fp.clone()><a href=format::url("/jobs", &[("source", "dlq"), ("group", &fp)]) title=format!("error group {fp}")>"Dead letters failing the same way"</a></dd>
            })}
            <dt>"Idempotency key"</dt><dd>{job.idempotency_key.clone().unwrap_or_else(|| "—".into())}</dd>
            <dt>"Correlation id"</dt><dd>{job.correlation_id.clone().unwrap_or_else(|| "—".into())}</dd>
            {trace_id.map(|t| view! { <dt>"Trace id"</dt><dd><code data-trace-id="" title="the trace of the request that enqueued this job; search for it in your tracing backend">{t}</code></dd> })}
            <dt>"Created by"</dt><dd>{job.created_by.clone().unwrap_or_else(|| "—".into())}</dd>
        </dl>
    };
    let timeline = view! {
        <ol class="timeline">
            <li><b>"Created"</b>{opt(Some(job.created_at))}</li>
            <li><b>"Scheduled"</b>{opt(Some(job.scheduled_at))}</li>
            <li><b>"Started"</b>{opt(job.started_at)}</li>
            <li><b>"Heartbeat"</b>{opt(job.heartbeat_at)}</li>
            <li><b>"Finished"</b>{opt(job.finished_at)}</li>
            {durations(&job, now)}
            {job.expires_at.map(|e| view! { <li><b>"Expires"</b>{opt(Some(e))}</li> })}
        </ol>
    };
    let attempts = attempt_history(&job, now);

    let actions = job_actions(&job, pillar, editable);
    // Live while only looked at: an edit in progress is never swapped out from under the
    // operator.
    let watching = !editing && draft.is_none();
    let live = move |key: &'static str| watching.then_some(key);
    let edit_panel =
        if let Some((draft_id, d)) = draft.clone().filter(|(_, d)| d.error.is_none() && !editing) {
            view! { <DiffPanel job=job.clone() draft_id=draft_id draft=d/> }.into_any()
        } else if editing && editable {
            view! { <EditForm job=job.clone() draft=draft.map(|(_, d)| d)/> }.into_any()
        } else {
            ().into_any()
        };

    view! {
        <div class="job-head">
            <h2><code>{job.job_type.clone()}</code>" in "{job.queue.clone()}</h2>
            <a href=back_to_list(pillar)>"← back to the list"</a>
        </div>
        {edit_panel}
        <div class="grid-2">
            <section class="panel" data-live-page=live("meta")>{meta}</section>
            <section class="panel" data-live-page=live("timeline")><h2>"Timeline"</h2>{timeline}<OperatorOnly>{actions}</OperatorOnly></section>
        </div>
        <section class="panel" data-live-page=live("attempts")><h2>"Attempts"</h2>{attempts}</section>
        <div class="grid-2" data-live-page=live("body")>
            <section class="panel"><h2>"Payload"</h2><pre class="json">{pretty_json(&job.payload)}</pre>
                {job.original_payload.clone().filter(|o| *o != job.payload).map(|o| view! { <details><summary>"Original payload (before edits)"</summary><pre class="json">{pretty_json(&o)}</pre></details> })}
            </section>
            <section class="panel"><h2>"Result"</h2>{match job.result.clone() {
                Some(r) => view! { <pre class="json">{pretty_json(&r)}</pre> }.into_any(),
                None => view! { <p class="muted">{if pillar == Pillar::Archive { "The handler returned no result." } else { "No result: the job has not succeeded." }}</p> }.into_any(),
            }}</section>
        </div>
    }
}

fn job_actions(job: &Job, pillar: Pillar, editable: bool) -> impl IntoView + use<> {
    let id = job.id.to_string();
    let cancel = matches!(job.state, JobState::Pending | JobState::Fetched | JobState::Processing).then(|| {
        let running = job.state == JobState::Processing;
        let id = id.clone();
        // Stopping work in flight cannot be taken back, so it is asked first; a job that has
        // not started only moves to the dead-letter queue, where Resurrect brings it back.
        let ask = running.then(|| view! {
            <label><input type="checkbox" name="confirm" value="yes" required=true/>" stop it while it runs"</label>
        });
        view! {
            <PostForm endpoint="job/cancel" class=if running { "inline confirm-form" } else { "inline" }>
                <input type="hidden" name="id" value=id/>
                {ask}
                <button class="danger" title=if running { "The worker running it (in any instance) stops it at its next heartbeat; it then moves to the dead-letter queue as Cancelled" } else { "Moves it to the dead-letter queue as Cancelled; Resurrect brings it back" }>
                    {if running { "Stop and cancel" } else { "Cancel" }}
                </button>
            </PostForm>
        }
    });
    let resurrect = (pillar == Pillar::Dlq).then(|| {
        let id = id.clone();
        view! {
            <PostForm endpoint="job/resurrect" class="inline">
                <input type="hidden" name="id" value=id/>
                <button title="Back to pending with fresh attempts; its error history is kept">"Resurrect"</button>
            </PostForm>
        }
    });
    // A pending job waiting for a later time: delayed, or waiting for its retry.
    let waiting = job.state == JobState::Pending && job.scheduled_at > chrono::Utc::now();
    let run_now = waiting.then(|| {
        let id = id.clone();
        let label = if job.attempt > 0 {
            "Retry now"
        } else {
            "Run now"
        };
        view! {
            <PostForm endpoint="job/run_now" class="inline">
                <input type="hidden" name="id" value=id/>
                <button title="Due at once; no attempt is spent">{label}</button>
            </PostForm>
        }
    });
    let edit =
        editable.then(|| view! { <a class="button" href=format!("/jobs/{id}?edit=1")>"Edit…"</a> });
    let purgeable = pillar != Pillar::Hot || job.state == JobState::Pending;
    let purge = purgeable.then(|| {
        let id = id.clone();
        view! {
            <PostForm endpoint="job/purge" class="inline confirm-form" back=format!("/jobs?source={}", pillar.as_str())>
                <input type="hidden" name="id" value=id/>
                <input type="hidden" name="source" value=pillar.as_str()/>
                <label><input type="checkbox" name="confirm" value="yes" required=true/>" delete for good"</label>
                <button class="danger">"Purge"</button>
            </PostForm>
        }
    });
    view! { <div class="actions">{run_now}{cancel}{resurrect}{edit}{purge}</div> }
}

#[component]
fn EditForm(job: Job, draft: Option<Draft>) -> impl IntoView {
    let (payload, tags, priority, queue, error) = match draft {
        Some(d) => (
            d.payload_text,
            d.tags_text,
            d.priority_text,
            d.queue_text,
            d.error,
        ),
        None => (
            pretty_json(&job.payload),
            job.tags.join(", "),
            job.priority.to_string(),
            job.queue.clone(),
            None,
        ),
    };
    let id = job.id.to_string();
    view! {
        <section class="panel edit">
            <h2>"Edit job"</h2>
            <p class="muted small">"The first payload is kept as the original. You will see a diff before anything is saved."</p>
            {error.map(|e| view! { <div class="flash err" role="alert">{e}</div> })}
            <PostForm endpoint="job/edit" back=format!("/jobs/{id}")>
                <input type="hidden" name="id" value=id.clone()/>
                <input type="hidden" name="step" value="preview"/>
                <label class="block">"Payload (JSON)"<TextBox name="payload" rows=14 text=payload/></label>
                <div class="row">
                    <label>"Tags (comma-separated)"<input type="text" name="tags" value=tags/></label>
                    <label>"Priority"<input type="number" name="priority" value=priority/></label>
                    <label>"Queue"<input type="text" name="queue" value=queue/></label>
                </div>
                <div class="actions">
                    <button>"Preview changes"</button>
                    <a href=format!("/jobs/{id}")>"Cancel editing"</a>
                </div>
            </PostForm>
        </section>
    }
}

#[component]
fn DiffPanel(job: Job, draft_id: String, draft: Draft) -> impl IntoView {
    let id = job.id.to_string();
    let old = pretty_json(&job.payload);
    let new = draft
        .edit
        .payload
        .as_deref()
        .map(pretty_json)
        .unwrap_or_else(|| old.clone());
    let payload_diff = match diff::lines(&old, &new) {
        Some(lines) if lines.iter().all(|l| matches!(l, Line::Same(_))) => view! { <p class="muted">"Payload unchanged."</p> }.into_any(),
        Some(lines) => {
            let rendered = lines
                .into_iter()
                .map(|l| match l {
                    Line::Same(t) => view! { <div class="d-same">{format!("  {t}")}</div> },
                    Line::Removed(t) => view! { <div class="d-del">{format!("- {t}")}</div> },
                    Line::Added(t) => view! { <div class="d-add">{format!("+ {t}")}</div> },
                })
                .collect_view();
            view! { <pre class="diff">{rendered}</pre> }.into_any()
        }
        None => view! { <p>"Too large for a line diff; new payload:"</p><pre class="json">{new.clone()}</pre> }.into_any(),
    };
    let mut fields = Vec::new();
    if let Some(t) = &draft.edit.tags {
        fields.push(("Tags", job.tags.join(", "), t.join(", ")));
    }
    if let Some(p) = draft.edit.priority {
        fields.push(("Priority", job.priority.to_string(), p.to_string()));
    }
    if let Some(q) = &draft.edit.queue {
        fields.push(("Queue", job.queue.clone(), q.clone()));
    }
    let field_rows = fields
        .into_iter()
        .map(|(name, a, b)| view! { <tr><th>{name}</th><td class="d-del">{a}</td><td class="d-add">{b}</td></tr> })
        .collect_view();
    let dead = job.pillar() == Pillar::Dlq;
    view! {
        <section class="panel edit">
            <h2>"Review changes"</h2>
            {payload_diff}
            <table class="dense diff-fields"><thead><tr><th></th><th>"Before"</th><th>"After"</th></tr></thead><tbody>{field_rows}</tbody></table>
            <PostForm endpoint="job/edit" back=format!("/jobs/{id}")>
                <input type="hidden" name="id" value=id.clone()/>
                <input type="hidden" name="draft" value=draft_id.clone()/>
                <div class="actions">
                    <button name="step" value="save">"Save"</button>
                    {dead.then(|| view! { <button name="step" value="save_resurrect">"Save and resurrect"</button> })}
                    <a href=format!("/jobs/{id}?edit=1&draft={draft_id}")>"Back to editing"</a>
                    <a href=format!("/jobs/{id}")>"Discard"</a>
                </div>
            </PostForm>
        </section>
    }
}

/// Progress as the job page and the lists show it: a bar, the percent and the message.
pub fn progress_view(
    progress: Option<&deck_engine::Progress>,
    now: chrono::DateTime<Utc>,
) -> AnyView {
    match progress {
        Some(p) => {
            let label = format!("{}% {}", p.percent, p.message);
            view! {
                <span class="progress" title=format!("reported {}", format::ago(p.at, now))>
                    <progress max="100" value=p.percent.to_string() aria-label=label.clone()></progress>
                    " "<b>{format!("{}%", p.percent)}</b>" "{p.message.clone()}
                </span>
            }
            .into_any()
        }
        None => view! { <span class="muted">"no progress reported (yet, or by a job running in another instance)"</span> }.into_any(),
    }
}

/// How long the job waited to start and ran (or has been running).
fn durations(job: &Job, now: chrono::DateTime<Utc>) -> impl IntoView + use<> {
    let between = |a: chrono::DateTime<Utc>, b: chrono::DateTime<Utc>| {
        format::millis(u64::try_from((b - a).num_milliseconds()).unwrap_or(0))
    };
    let waited = job.started_at.map(|s| {
        view! { <li><b>"Waited"</b><span title="created → started">{between(job.created_at, s)}</span></li> }
    });
    let ran = match (job.started_at, job.finished_at) {
        (Some(s), Some(f)) => Some(view! { <li><b>"Ran"</b><span title="started → finished (the last attempt)">{between(s, f)}</span></li> }.into_any()),
        (Some(s), None) if job.state == JobState::Processing => Some(view! { <li><b>"Running for"</b><span>{between(s, now)}</span></li> }.into_any()),
        _ => None,
    };
    view! { {waited}{ran} }
}

/// The list this job was opened from (its filters and sort, carried as `?list=`), else the
/// unfiltered list of its pillar. Only ever a `/jobs` URL: the value is a query string.
fn back_to_list(pillar: Pillar) -> String {
    match query().get("list").filter(|l| !l.is_empty()) {
        Some(list) => format!("/jobs?{}", list.trim_start_matches('?')),
        None => format!("/jobs?source={}", pillar.as_str()),
    }
}

/// Every attempt, oldest first: when it ran, for how long, where, what came of it and why
/// (`Job::attempts`). A panic shows where it happened, and its backtrace when one was taken.
fn attempt_history(job: &Job, now: chrono::DateTime<Utc>) -> AnyView {
    let records = job.attempts();
    if records.is_empty() {
        return view! { <p class="muted">"Not run yet."</p> }.into_any();
    }
    let when = |t: Option<chrono::DateTime<Utc>>| match t {
        Some(t) => view! { <span title=format::ago(t, now)>{format::time(t)}</span> }.into_any(),
        None => view! { <span class="muted">"—"</span> }.into_any(),
    };
    let rows = records
        .into_iter()
        .map(|r: AttemptRecord| {
            let (outcome, class) = outcome_text(&r);
            let error = r.error.map(|e| {
                let location = e.location.map(|at| view! { <div class="muted" data-panic-location="">"panicked at "<code>{at}</code></div> });
                let backtrace = e.backtrace.map(|bt| view! { <details><summary>"Backtrace"</summary><pre class="err-text">{bt}</pre></details> });
                view! { <span class="badge">{e.kind}</span><pre class="err-text">{e.message}</pre>{location}{backtrace} }
            });
            view! {
                <tr data-attempt=r.attempt data-outcome=r.outcome.as_str()>
                    <td class="num" data-label="attempt">{r.attempt}</td>
                    <td class="when" data-label="started">{when(r.started_at)}</td>
                    <td class="when" data-label="ended">{when(r.finished_at)}</td>
                    <td class="num" data-label="took">{r.duration_ms.map(format::millis).unwrap_or_else(|| "—".into())}</td>
                    <td data-label="on">{r.instance.map(|i| view! { <code>{i}</code> }.into_any()).unwrap_or_else(|| view! { <span class="muted">"—"</span> }.into_any())}</td>
                    <td><span class=class>{outcome}</span></td>
                    <td class="wide">{error}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap" tabindex="0" role="region" aria-label="Attempts">
            <table class="dense stack attempts">
                <thead><tr><th class="num">"#"</th><th>"Started"</th><th>"Ended"</th><th class="num">"Took"</th><th>"Instance"</th><th>"Outcome"</th><th>"Error"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
    .into_any()
}

/// An attempt's outcome in words, and the badge class that colours it.
fn outcome_text(r: &AttemptRecord) -> (String, &'static str) {
    match r.outcome {
        AttemptOutcome::Running => ("running".into(), "badge warn"),
        AttemptOutcome::Succeeded => ("succeeded".into(), "badge ok"),
        AttemptOutcome::Retried => match r.retry_at {
            Some(at) => (format!("retried at {}", format::time(at)), "badge"),
            None => ("retried".into(), "badge"),
        },
        AttemptOutcome::DeadLettered => ("dead-lettered".into(), "badge crit"),
        AttemptOutcome::Failed => ("failed".into(), "badge crit"),
    }
}

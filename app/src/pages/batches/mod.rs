//! Batches: the list (`/batches`, newest first, paged back with `?before=<id>`) with each
//! batch's progress, state and callbacks; one batch's page is [`detail`].
//!
//! Components take plain data (a `Batch`, its members' summaries), so they render in tests
//! without a database.

pub mod detail;

use chrono::{DateTime, Utc};
use deck_engine::{Batch, BatchEvent, BatchId};
use leptos::prelude::*;

use crate::components::layout::{Col, DenseTable, ErrorBox, Layout};
use crate::format::{self, short_id};
use crate::request::query;
use crate::state::Console;

type Timestamp = DateTime<Utc>;

/// A batch's page.
pub fn batch_url(id: BatchId) -> String {
    format!("/batches/{id}")
}

/// Where a batch stands, from its counts as the store keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchState {
    /// Some member is not final yet (a resurrected member reopens a finished batch).
    Running,
    Finished,
    FinishedWithDeaths,
}

impl BatchState {
    pub fn of(b: &Batch) -> Self {
        match (b.finished_at, b.dead) {
            (None, _) => BatchState::Running,
            (Some(_), 0) => BatchState::Finished,
            (Some(_), _) => BatchState::FinishedWithDeaths,
        }
    }

    /// The word shown, its badge class and the `data-state` key tests and scripts select by.
    fn shown(self) -> (&'static str, &'static str, &'static str) {
        match self {
            BatchState::Running => ("running", "badge info", "running"),
            BatchState::Finished => ("finished", "badge ok", "finished"),
            BatchState::FinishedWithDeaths => ("finished with deaths", "badge crit", "dead"),
        }
    }
}

#[component]
pub fn BatchStateBadge(batch: Batch) -> impl IntoView {
    let (word, class, key) = BatchState::of(&batch).shown();
    view! { <span class=class data-state=key>{word}</span> }
}

/// "37 of 40 done, 1 dead": what the progress bar shows, in words (never colour alone).
/// Done is final: succeeded or dead.
pub fn progress_text(b: &Batch) -> String {
    if b.total == 0 {
        return "no members (every pending member was purged)".into();
    }
    let done = u64::from(b.succeeded) + u64::from(b.dead);
    let mut text = format!(
        "{} of {} done",
        format::count(done),
        format::count(u64::from(b.total))
    );
    if b.dead > 0 {
        text.push_str(&format!(", {} dead", format::count(u64::from(b.dead))));
    }
    text
}

/// The bar with its words beside it. `wide`: the full width of its panel (a batch's page),
/// else a short bar for a table cell.
#[component]
pub fn BatchProgress(batch: Batch, #[prop(optional)] wide: bool) -> impl IntoView {
    let text = progress_text(&batch);
    let bar = view! { <ProgressBar batch=batch text=text.clone()/> };
    if wide {
        view! {
            <div class="batch-progress" data-progress="">
                {bar}
                <p class="progress-text">{text}</p>
            </div>
        }
        .into_any()
    } else {
        view! {
            <span class="progress" data-progress="">{bar}" "<span class="progress-text">{text}</span></span>
        }
        .into_any()
    }
}

/// The bar in three parts: succeeded, dead and pending (the track), each its own colour, the
/// words beside it saying the same. An SVG, because a `<progress>` has one colour and the
/// page's policy allows no inline style; widths are percentages of the viewBox.
#[component]
fn ProgressBar(batch: Batch, text: String) -> impl IntoView {
    // A batch whose members were all purged shows an empty track.
    let total = f64::from(batch.total.max(1));
    let ok = f64::from(batch.succeeded) * 100.0 / total;
    let dead = f64::from(batch.dead) * 100.0 / total;
    let width = |w: f64| format!("{:.1}", w.clamp(0.0, 100.0));
    view! {
        <svg class="batch-bar" viewBox="0 0 100 10" preserveAspectRatio="none" role="img" aria-label=format!("Batch progress: {text}")>
            <rect class="seg-track" x="0" y="0" width="100" height="10"></rect>
            <rect class="seg-ok" x="0" y="0" width=width(ok) height="10"></rect>
            <rect class="seg-dead" x=width(ok) y="0" width=width(dead) height="10"></rect>
        </svg>
    }
}

/// The callbacks in the order they are listed, with when each fires.
pub const CALLBACKS: [(BatchEvent, &str, &str); 3] = [
    (
        BatchEvent::Success,
        "on_success",
        "when every member has succeeded",
    ),
    (
        BatchEvent::Complete,
        "on_complete",
        "when every member has finished, succeeded or dead",
    ),
    (
        BatchEvent::Death,
        "on_death",
        "when a member dies (the first death only)",
    ),
];

/// Fired (a link to the job it became) or not fired.
#[component]
pub fn CallbackStatus(batch: Batch, event: BatchEvent) -> impl IntoView {
    match batch.fired(event) {
        Some(job) => {
            let id = job.to_string();
            view! {
                <a class="job-link" href=format!("/jobs/{id}") title=format!("The callback's job {id}")>
                    "fired → job "<code>{short_id(&id)}</code>
                </a>
            }
            .into_any()
        }
        None => view! { <span class="muted">"not fired"</span> }.into_any(),
    }
}

/// Each configured callback with whether it fired, for a table cell.
#[component]
pub fn CallbackSummary(batch: Batch) -> impl IntoView {
    let configured: Vec<_> = CALLBACKS
        .into_iter()
        .filter(|(e, _, _)| batch.callbacks.get(*e).is_some())
        .collect();
    if configured.is_empty() {
        return view! { <span class="muted">"none"</span> }.into_any();
    }
    configured
        .into_iter()
        .map(|(event, name, when)| {
            let fired = batch.fired(event).is_some();
            view! {
                <div data-callback=event.as_str() data-fired=if fired { "yes" } else { "no" }>
                    <code title=format!("Fires {when}")>{name}</code>" "
                    <CallbackStatus batch=batch.clone() event=event/>
                </div>
            }
        })
        .collect_view()
        .into_any()
}

/// One page of the list: the batches, and the cursor of the next older page if any.
#[derive(Debug, Clone, Default)]
pub struct BatchPageData {
    pub batches: Vec<Batch>,
    pub older: Option<BatchId>,
    /// This is a page back (`?before=`), not the newest.
    pub paged: bool,
}

impl BatchPageData {
    /// Newest first from `before`, `size` at most; one more is read to know if there are older.
    pub async fn read(
        console: &Console,
        before: Option<BatchId>,
        size: u32,
    ) -> deck_engine::StoreResult<Self> {
        let size = size.max(1);
        let mut batches = console
            .store()
            .list_batches(before, size.saturating_add(1))
            .await?;
        let older = if batches.len() > size as usize {
            batches.truncate(size as usize);
            batches.last().map(|b| b.id)
        } else {
            None
        };
        Ok(BatchPageData {
            batches,
            older,
            paged: before.is_some(),
        })
    }
}

#[component]
pub fn BatchesPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let asked = query().get("before").map(str::to_string);
    let size = console.options().page_size;
    Suspend::new(async move {
        let now = Utc::now();
        let (before, problem) = match asked.as_deref().map(str::parse::<BatchId>) {
            None => (None, None),
            Some(Ok(id)) => (Some(id), None),
            Some(Err(_)) => (
                None,
                Some(format!(
                    "{:?} is not a batch id (a UUID such as 0193a5c2-…): showing the newest batches.",
                    asked.clone().unwrap_or_default()
                )),
            ),
        };
        let body = match BatchPageData::read(&console, before, size).await {
            Ok(data) => view! { <BatchList data=data now=now/> }.into_any(),
            Err(e) => view! { <ErrorBox message=format!("Cannot read batches: {e}")/> }.into_any(),
        };
        view! {
            <Layout title="Batches".into()>
                {problem.map(|p| view! { <ErrorBox message=p/> })}
                {body}
            </Layout>
        }
    })
}

/// How batches are made, for an empty list.
#[component]
fn NoBatches() -> impl IntoView {
    view! {
        <div class="empty" id="no-batches">
            <p><strong>"No batches yet."</strong>" A batch enqueues many jobs as one unit (all of them or none) and enqueues a callback job when they have all succeeded, when they have all finished, or when one dies. Make one:"</p>
            <ul>
                <li>"through the API: "<code>"POST /api/v1/batches"</code>" with "
                    <code>"{\"description\": \"October invoices\", \"jobs\": [{\"queue\": \"invoices\", \"type\": \"invoice.send\", \"payload\": {\"n\": 1}}], \"callbacks\": {\"on_success\": {\"queue\": \"reports\", \"type\": \"report.summarize\"}}}"</code></li>
                <li>"from Rust: "<code>"Engine::create_batch(BatchRequest { description, jobs, callbacks, .. })"</code>"."</li>
            </ul>
        </div>
    }
}

/// The list, newest first, with a link to the next older page.
#[component]
pub fn BatchList(data: BatchPageData, now: Timestamp) -> impl IntoView {
    if data.batches.is_empty() {
        return if data.paged {
            view! {
                <div class="empty" id="no-older-batches">
                    <p>"No older batches."</p>
                    <a href="/batches">"Newest batches"</a>
                </div>
            }
            .into_any()
        } else {
            view! { <NoBatches/> }.into_any()
        };
    }
    let rows = data
        .batches
        .into_iter()
        .map(|b| {
            let id = b.id.to_string();
            let description = b.description.clone().filter(|d| !d.trim().is_empty());
            view! {
                <tr data-batch=id.clone()>
                    <td class="id"><a href=batch_url(b.id) title=id.clone()><code>{short_id(&id)}</code></a></td>
                    <td class="description">{description.unwrap_or_else(|| "—".into())}</td>
                    <td class="when" title=format::time(b.created_at)>
                        <time datetime=b.created_at.to_rfc3339()>{format::ago(b.created_at, now)}</time>
                    </td>
                    <td class="created-by">{b.created_by.clone().unwrap_or_else(|| "—".into())}</td>
                    <td class="batch-progress-cell"><BatchProgress batch=b.clone()/></td>
                    <td class="state"><BatchStateBadge batch=b.clone()/></td>
                    <td class="callbacks"><CallbackSummary batch=b/></td>
                </tr>
            }
        })
        .collect_view();
    let pager = view! {
        <nav class="pager" aria-label="Pages">
            {if data.paged {
                view! { <a href="/batches">"« Newest"</a> }.into_any()
            } else {
                view! { <span class="disabled" aria-disabled="true">"« Newest"</span> }.into_any()
            }}
            {match data.older {
                Some(last) => view! { <a href=format::url("/batches", &[("before", &last.to_string())]) rel="next">"Older ›"</a> }.into_any(),
                None => view! { <span class="disabled" aria-disabled="true">"Older ›"</span> }.into_any(),
            }}
        </nav>
    };
    view! {
        <DenseTable
            label="Batches"
            id="batches"
            class="batches"
            live_page="batches"
            caption="Batches, newest first: progress, state and callbacks"
            cols=Col::texts(["Batch", "Description", "Created", "By", "Progress", "State", "Callbacks"])
        >
            {rows}
        </DenseTable>
        {pager}
    }
    .into_any()
}

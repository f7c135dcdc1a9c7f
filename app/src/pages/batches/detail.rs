//! One batch (`/batches/{id}`): its counts and progress, its callbacks (fired, with a link to
//! the job each became), and its members with a link to each job and, for a dead one, the
//! job page's own resurrect action — which reopens the batch.

use chrono::Utc;
use deck_engine::{Batch, BatchId, JobState, JobSummary};
use leptos::prelude::*;

use super::{BatchProgress, BatchStateBadge, CALLBACKS, CallbackStatus, Timestamp};
use crate::components::layout::{Col, DenseTable, ErrorBox, Layout, PostForm};
use crate::format::{self, short_id, url};
use crate::pages::schedules::state_word;
use crate::request::{path, session};
use crate::state::Console;

/// Members shown on the page (the store lists active first, then dead, then succeeded).
pub const MEMBERS: u32 = 1_000;

#[component]
pub fn BatchPage() -> impl IntoView {
    let console = expect_context::<Console>();
    let raw = path()
        .strip_prefix("/batches/")
        .unwrap_or_default()
        .to_string();
    let raw = format::percent_decode(&raw).unwrap_or(raw);
    let can_act = session().can_act();
    Suspend::new(async move {
        let now = Utc::now();
        let Ok(id) = raw.parse::<BatchId>() else {
            crate::request::not_found_status();
            return view! {
                <Layout title="Batch".into()>
                    <div class="empty" id="batch-not-found">
                        <p><code>{raw.clone()}</code>" is not a batch id (a UUID such as 0193a5c2-…)."</p>
                        <a href="/batches">"Back to batches"</a>
                    </div>
                </Layout>
            }
            .into_any();
        };
        let doc_title = format!("Batch {}", short_id(&id.to_string()));
        let batch = match console.store().get_batch(id).await {
            Ok(Some(b)) => b,
            Ok(None) => {
                crate::request::not_found_status();
                return view! {
                    <Layout title="Batch".into() doc_title=doc_title>
                        <div class="empty" id="batch-not-found">
                            <p>"No batch "<code>{id.to_string()}</code>". It may have been removed by retention."</p>
                            <a href="/batches">"Back to batches"</a>
                        </div>
                    </Layout>
                }
                .into_any();
            }
            Err(e) => {
                return view! {
                    <Layout title="Batch".into() doc_title=doc_title>
                        <ErrorBox message=format!("Cannot read batch {id}: {e}")/>
                    </Layout>
                }
                .into_any();
            }
        };
        let members = console
            .store()
            .batch_members(id, MEMBERS)
            .await
            .map_err(|e| e.to_string());
        view! {
            <Layout title="Batch".into() doc_title=doc_title>
                <BatchDetail batch=batch members=members now=now can_act=can_act/>
            </Layout>
        }
        .into_any()
    })
}

/// Everything the page shows, from plain data.
#[component]
pub fn BatchDetail(
    batch: Batch,
    members: Result<Vec<JobSummary>, String>,
    now: Timestamp,
    can_act: bool,
) -> impl IntoView {
    let b = batch;
    let id = b.id.to_string();
    let description = b.description.clone().filter(|d| !d.trim().is_empty());
    let when = |t: Timestamp| {
        view! { <time datetime=t.to_rfc3339() title=format::time(t)>{format::time(t)}</time>" · "<span class="muted">{format::ago(t, now)}</span> }
    };
    let counts = view! {
        <BatchProgress batch=b.clone() wide=true/>
        <dl class="meta" id="batch-counts">
            <dt>"State"</dt><dd><BatchStateBadge batch=b.clone()/></dd>
            <dt>"Members"</dt><dd data-count="total">{format::count(u64::from(b.total))}</dd>
            <dt>"Succeeded"</dt><dd data-count="succeeded">{format::count(u64::from(b.succeeded))}</dd>
            <dt>"Dead"</dt><dd data-count="dead">{format::count(u64::from(b.dead))}</dd>
            <dt>"Not finished"</dt><dd data-count="pending">{format::count(u64::from(b.pending()))}</dd>
            <dt>"Created"</dt><dd>{when(b.created_at)}</dd>
            <dt>"Created by"</dt><dd>{b.created_by.clone().unwrap_or_else(|| "—".into())}</dd>
            <dt>"Finished"</dt><dd>{match b.finished_at {
                Some(t) => when(t).into_any(),
                None => view! { <span class="muted">"not yet"</span> }.into_any(),
            }}</dd>
        </dl>
    };
    let callbacks = callbacks_view(&b);
    let members_view = members_table(&b, members, can_act);
    view! {
        <div class="job-head">
            <h2>{description.unwrap_or_else(|| "No description".into())}" "<small class="muted"><code>{id.clone()}</code></small></h2>
            <a href="/batches">"← all batches"</a>
        </div>
        <div class="grid-2">
            <section class="panel" aria-labelledby="progress-title">
                <h2 id="progress-title">"Progress"</h2>
                <div data-live-page="progress">{counts}</div>
            </section>
            <section class="panel" aria-labelledby="callbacks-title">
                <h2 id="callbacks-title">"Callbacks"</h2>
                <div data-live-page="callbacks">{callbacks}</div>
            </section>
        </div>
        <section class="panel" id="members" aria-labelledby="members-title">
            <h2 id="members-title">"Members"</h2>
            <p id="reopen-note">"Resurrecting a dead member reopens the batch: the member counts as not final again, so "<code>"on_success"</code>" can still fire once it and the rest succeed. A callback that has fired stays fired; each fires at most once."</p>
            <div data-live-page="members">{members_view}</div>
        </section>
    }
}

fn callbacks_view(b: &Batch) -> AnyView {
    let rows: Vec<_> = CALLBACKS
        .into_iter()
        .filter_map(|(event, name, when)| {
            b.callbacks
                .get(event)
                .map(|cb| (event, name, when, cb.clone()))
        })
        .collect();
    if rows.is_empty() {
        return view! { <p class="muted" id="no-callbacks">"No callbacks: nothing is enqueued when the members finish."</p> }
            .into_any();
    }
    let rows = rows
        .into_iter()
        .map(|(event, name, when, cb)| {
            let fired = b.fired(event).is_some();
            view! {
                <tr data-callback=event.as_str() data-fired=if fired { "yes" } else { "no" }>
                    <th scope="row"><code>{name}</code></th>
                    <td><code>{cb.job_type.clone()}</code>" → "<a class="in-text" href=url("/queues", &[("q", &cb.queue)])>{cb.queue.clone()}</a></td>
                    <td class="muted">{when}</td>
                    <td class="status"><CallbackStatus batch=b.clone() event=event/></td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <DenseTable
            label="Callbacks"
            id="batch-callbacks"
            caption="The batch's callbacks: the job each enqueues, when, and whether it fired"
            cols=Col::texts(["Callback", "Job → queue", "Fires", "Status"])
        >
            {rows}
        </DenseTable>
    }
    .into_any()
}

fn members_table(b: &Batch, members: Result<Vec<JobSummary>, String>, can_act: bool) -> AnyView {
    let members = match members {
        Err(e) => {
            return view! { <ErrorBox message=format!("Cannot read its members: {e}")/> }
                .into_any();
        }
        Ok(m) if m.is_empty() => {
            return view! { <p class="muted">"No members: every pending member was purged."</p> }
                .into_any();
        }
        Ok(m) => m,
    };
    let shown = members.len();
    let any_dead = members.iter().any(|m| matches!(m.state, JobState::Dead(_)));
    let limit_note = (u64::try_from(shown).unwrap_or(u64::MAX) < u64::from(b.total)).then(|| {
        view! {
            <p class="muted small" id="members-limit">{format!(
                "Showing {} of {} members: the active ones first, then the dead, then the succeeded.",
                format::count(u64::try_from(shown).unwrap_or(u64::MAX)),
                format::count(u64::from(b.total))
            )}</p>
        }
    });
    // The column is there when some row has an action in it.
    let actions = can_act && any_dead;
    let read_only = (!can_act && any_dead).then(|| {
        view! { <p class="muted small">"Read-only: resurrecting a dead member needs the operator role."</p> }
    });
    let rows = members
        .into_iter()
        .map(|m| {
            let id = m.id.to_string();
            let (word, class, key) = state_word(m.state);
            let dead = matches!(m.state, JobState::Dead(_));
            let action = actions.then(|| {
                let resurrect = dead.then(|| {
                    let id = id.clone();
                    view! {
                        <PostForm endpoint="job/resurrect" class="inline">
                            <input type="hidden" name="id" value=id.clone()/>
                            <button aria-label=format!("Resurrect job {id}") title="Back to pending with fresh attempts; its error history is kept, and the batch reopens">"Resurrect"</button>
                        </PostForm>
                    }
                });
                view! { <td class="actions-cell">{resurrect}</td> }
            });
            view! {
                <tr data-member=id.clone() data-state=key>
                    <td class="id"><a href=format!("/jobs/{id}") title=id.clone()><code>{short_id(&id)}</code></a></td>
                    <td><code>{m.job_type.clone()}</code></td>
                    <td>{m.queue.clone()}</td>
                    <td class="state"><span class=class>{word}</span></td>
                    <td class="num">{m.attempt}</td>
                    <td class="msg" title=m.last_error.clone()>{m.last_error.clone().unwrap_or_default()}</td>
                    {action}
                </tr>
            }
        })
        .collect_view();
    let mut cols = Col::texts(["Job", "Type", "Queue", "State"]);
    cols.push(Col::num("Attempt"));
    cols.push(Col::text("Last error"));
    if actions {
        cols.push(Col::text("Actions"));
    }
    view! {
        {limit_note}
        {read_only}
        <DenseTable
            label="Members"
            id="batch-members"
            caption="The batch's members: active first, then dead, then succeeded"
            cols=cols
        >
            {rows}
        </DenseTable>
    }
    .into_any()
}

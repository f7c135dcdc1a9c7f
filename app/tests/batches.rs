//! The batch pages through the console's real router on a real SQLite store: the list (newest
//! first, paged back with `?before=`) with progress in words, state and callbacks linked to
//! the jobs they became; one batch's page with its counts, callbacks and members, where a dead
//! member's resurrect (the job page's own action) reopens the batch; the 404s; the job page's
//! link back to its batch.

// Only the console helpers: the inert check's own test runs with `hostile_content`.
mod support {
    pub mod console;
}

use std::sync::Arc;

use axum::http::StatusCode;
use chrono::Utc;
use deck_app::{AuthConfig, ConsoleOptions, Role};
use deck_engine::{
    AttemptError, BatchCallback, BatchCallbacks, BatchId, BatchRequest, Completion, EnqueueRequest,
    FailureReason, JobId, Store,
};
use support::console::{
    assert_empty_list_says, basic, fixture, fixture_with, get, get_as, password_users, post_as,
    start_running, texts, texts_in,
};

fn count(html: &str, selector: &str) -> usize {
    texts(html, selector).len()
}

fn member(queue: &str, n: u32) -> EnqueueRequest {
    EnqueueRequest::new(queue, "invoice.send", format!(r#"{{"n":{n}}}"#))
}

/// Three invoices with all three callbacks (in their own queue, so finishing the members
/// never touches them).
fn invoices() -> BatchRequest {
    BatchRequest {
        description: Some("October invoices".into()),
        created_by: Some("billing".into()),
        jobs: (1..=3).map(|n| member("invoices", n)).collect(),
        callbacks: BatchCallbacks {
            on_success: Some(BatchCallback::new("reports", "report.summarize")),
            on_complete: Some(BatchCallback::new("reports", "report.close")),
            on_death: Some(BatchCallback::new("reports", "report.alert")),
        },
    }
}

/// Claim what `queue` holds as worker `w` and finish it: the jobs in `dead` as fatal
/// failures, the others as succeeded.
async fn finish(store: &Arc<dyn Store>, queue: &str, dead: &[JobId]) -> Vec<JobId> {
    let ids = start_running(store, "w", queue).await;
    let done = ids
        .iter()
        .map(|&id| {
            if dead.contains(&id) {
                Completion::DeadLetter {
                    id,
                    reason: FailureReason::Fatal,
                    error: AttemptError {
                        attempt: 1,
                        at: Utc::now(),
                        kind: "fatal".into(),
                        message: "mailbox <ann@example.com> does not exist".into(),
                        ..AttemptError::default()
                    },
                    duration_ms: 1,
                }
            } else {
                Completion::Succeeded {
                    id,
                    result: None,
                    duration_ms: 1,
                }
            }
        })
        .collect();
    store.complete("w", done).await.unwrap();
    ids
}

#[tokio::test]
async fn the_list_shows_each_batch_newest_first_with_progress_in_words_state_and_callbacks() {
    let f = fixture().await;
    let a = f.ops.create_batch(invoices()).await.unwrap();
    let dead = a.job_ids[1];
    finish(&f.store, "invoices", &[dead]).await;
    let b = f
        .ops
        .create_batch(BatchRequest {
            jobs: vec![member("other", 1), member("other", 2)],
            ..BatchRequest::default()
        })
        .await
        .unwrap();
    let a_id = a.batch.id;
    let stored = f.store.get_batch(a_id).await.unwrap().unwrap();
    let death_job = stored.death_job_id.expect("a death fires on_death");
    let complete_job = stored.complete_job_id.expect("every member is final");

    let (status, page) = get(&f.router, "/batches").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(
        texts(&page, "#batches tbody tr td.id a"),
        vec![
            deck_app::format::short_id(&b.batch.id.to_string()),
            deck_app::format::short_id(&a_id.to_string()),
        ],
        "newest first: {page}"
    );
    let row = format!(r#"#batches tr[data-batch="{a_id}"]"#);
    assert_eq!(
        count(&page, &format!(r#"{row} td.id a[href="/batches/{a_id}"]"#)),
        1
    );
    assert_eq!(
        texts_in(&page, &row, "td.description"),
        vec!["October invoices"]
    );
    assert_eq!(texts_in(&page, &row, "td.created-by"), vec!["billing"]);
    assert_eq!(
        texts_in(&page, &row, ".progress-text"),
        vec!["3 of 3 done, 1 dead"],
        "the progress in words beside the bar"
    );
    assert_eq!(
        count(
            &page,
            &format!(r#"{row} svg.batch-bar[aria-label="Batch progress: 3 of 3 done, 1 dead"]"#)
        ),
        1,
        "{page}"
    );
    // Succeeded, dead and pending in parts of their own, not one colour for all.
    assert_eq!(
        count(
            &page,
            &format!(r#"{row} rect.seg-ok[width="66.7"] + rect.seg-dead[x="66.7"][width="33.3"]"#)
        ),
        1,
        "{page}"
    );
    assert_eq!(
        texts_in(&page, &row, "[data-state]"),
        vec!["finished with deaths"]
    );
    let callback = |event: &str| format!(r#"{row} [data-callback="{event}"]"#);
    assert_eq!(
        count(
            &page,
            &format!(
                r#"{}[data-fired="yes"] a[href="/jobs/{death_job}"]"#,
                callback("death")
            )
        ),
        1,
        "a fired callback links to its job: {page}"
    );
    assert_eq!(
        count(
            &page,
            &format!(
                r#"{}[data-fired="yes"] a[href="/jobs/{complete_job}"]"#,
                callback("complete")
            )
        ),
        1
    );
    assert!(
        texts(&page, &callback("success"))[0].ends_with("not fired"),
        "{page}"
    );

    let row = format!(r#"#batches tr[data-batch="{}"]"#, b.batch.id);
    assert_eq!(texts_in(&page, &row, "td.description"), vec!["—"]);
    assert_eq!(texts_in(&page, &row, "td.created-by"), vec!["—"]);
    assert_eq!(texts_in(&page, &row, ".progress-text"), vec!["0 of 2 done"]);
    assert_eq!(texts_in(&page, &row, "[data-state]"), vec!["running"]);
    assert_eq!(texts_in(&page, &row, "td.callbacks"), vec!["none"]);

    // The navigation has the page, marked as the current one.
    assert_eq!(
        texts(&page, r#"nav.nav a[href="/batches"][aria-current="page"]"#),
        vec!["Batches"]
    );
}

#[tokio::test]
async fn with_no_batches_the_list_says_how_to_make_one() {
    let f = fixture().await;
    let hows = ["POST /api/v1/batches", "Engine::create_batch"];
    let page = assert_empty_list_says(&f.router, "/batches", "#no-batches", &hows).await;
    assert_eq!(count(&page, "#batches"), 0);
}

#[tokio::test]
async fn the_list_pages_back_with_before() {
    let options = ConsoleOptions {
        page_size: 2,
        ..ConsoleOptions::default()
    };
    let f = fixture_with(AuthConfig::default(), options).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let created = f
            .ops
            .create_batch(BatchRequest {
                description: Some(format!("batch {n}")),
                jobs: vec![member("q", n)],
                ..BatchRequest::default()
            })
            .await
            .unwrap();
        ids.push(created.batch.id);
    }

    let (_, page) = get(&f.router, "/batches").await;
    assert_eq!(
        texts(&page, "#batches td.description"),
        vec!["batch 2", "batch 1"]
    );
    let older = format!(r#"nav.pager a[href="/batches?before={}"]"#, ids[1]);
    assert_eq!(texts(&page, &older), vec!["Older ›"], "{page}");
    assert_eq!(
        texts(&page, r#"nav.pager [aria-disabled="true"]"#),
        vec!["« Newest"]
    );

    let (status, page) = get(&f.router, &format!("/batches?before={}", ids[1])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(texts(&page, "#batches td.description"), vec!["batch 0"]);
    assert_eq!(
        texts(&page, r#"nav.pager a[href="/batches"]"#),
        vec!["« Newest"]
    );
    assert_eq!(
        texts(&page, r#"nav.pager [aria-disabled="true"]"#),
        vec!["Older ›"]
    );

    let (_, page) = get(&f.router, &format!("/batches?before={}", ids[0])).await;
    assert_eq!(count(&page, "#no-older-batches"), 1, "{page}");

    // A cursor that is not a batch id: said so, and the newest are shown.
    let (status, page) = get(&f.router, "/batches?before=%3Cb%3Enope").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        texts(&page, ".flash.err")[0].contains(r#""<b>nope" is not a batch id"#),
        "{page}"
    );
    assert_eq!(
        texts(&page, "#batches td.description"),
        vec!["batch 2", "batch 1"]
    );
}

#[tokio::test]
async fn a_batch_page_shows_counts_callbacks_and_members_and_resurrecting_a_dead_member_reopens_it()
{
    let f = fixture().await;
    let created = f.ops.create_batch(invoices()).await.unwrap();
    let id = created.batch.id;
    let dead = created.job_ids[2];
    finish(&f.store, "invoices", &[dead]).await;
    let stored = f.store.get_batch(id).await.unwrap().unwrap();
    let (death_job, complete_job) = (
        stored.death_job_id.unwrap(),
        stored.complete_job_id.unwrap(),
    );
    let url = format!("/batches/{id}");

    let (status, page) = get(&f.router, &url).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let counted = |page: &str, what: &str| texts(page, &format!(r#"[data-count="{what}"]"#));
    assert_eq!(counted(&page, "total"), vec!["3"]);
    assert_eq!(counted(&page, "succeeded"), vec!["2"]);
    assert_eq!(counted(&page, "dead"), vec!["1"]);
    assert_eq!(counted(&page, "pending"), vec!["0"]);
    assert_eq!(
        texts(&page, "#batch-counts [data-state]"),
        vec!["finished with deaths"]
    );
    assert_eq!(
        texts(&page, ".batch-progress .progress-text"),
        vec!["3 of 3 done, 1 dead"]
    );
    assert!(texts(&page, ".job-head h2")[0].starts_with("October invoices"));
    assert!(texts(&page, "title")[0].starts_with("Batch "), "{page}");

    // Callbacks: each with its job type and queue, fired ones linked to their job.
    let callback = |page: &str, event: &str, css: &str| {
        texts(
            page,
            &format!(r#"#batch-callbacks tr[data-callback="{event}"] {css}"#),
        )
    };
    assert_eq!(
        callback(&page, "death", &format!(r#"a[href="/jobs/{death_job}"]"#)).len(),
        1,
        "{page}"
    );
    assert_eq!(
        callback(
            &page,
            "complete",
            &format!(r#"a[href="/jobs/{complete_job}"]"#)
        )
        .len(),
        1
    );
    assert_eq!(callback(&page, "success", ".status"), vec!["not fired"]);
    assert_eq!(
        callback(&page, "success", "td code"),
        vec!["report.summarize"]
    );
    assert_eq!(
        callback(&page, "success", r#"a[href="/queues?q=reports"]"#),
        vec!["reports"]
    );

    // Members: every one linked to its job page; the dead one with its error and the
    // resurrect action the job page uses.
    for job in &created.job_ids {
        assert_eq!(
            count(
                &page,
                &format!(r#"#batch-members tr[data-member="{job}"] a[href="/jobs/{job}"]"#)
            ),
            1,
            "{page}"
        );
    }
    let row = format!(r#"#batch-members tr[data-member="{dead}"]"#);
    assert_eq!(texts_in(&page, &row, "td.state"), vec!["dead: Fatal"]);
    assert_eq!(
        texts_in(&page, &row, "td.msg"),
        vec!["mailbox <ann@example.com> does not exist"],
        "the error as text"
    );
    assert!(!page.contains("<ann@example.com>"), "escaped");
    let form = format!(r#"{row} form[action="/fn/job/resurrect"]"#);
    assert_eq!(
        count(&page, &format!(r#"{form} input[name=id][value="{dead}"]"#)),
        1,
        "{page}"
    );
    assert_eq!(
        count(&page, r#"#batch-members form[action="/fn/job/resurrect"]"#),
        1,
        "only the dead member offers it"
    );
    assert!(
        texts(&page, "#reopen-note")[0].contains("reopens the batch"),
        "{page}"
    );

    // Resurrect it from the batch page: back there, the batch reopened.
    let (status, location) = post_as(
        &f.router,
        "/fn/job/resurrect",
        &[("id", &dead.to_string()), ("back", &url)],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FOUND);
    assert!(location.starts_with(&format!("{url}?ok=")), "{location}");
    let (_, page) = get(&f.router, &location).await;
    assert!(
        texts(&page, ".flash.ok")[0].contains("resurrected"),
        "{page}"
    );
    assert_eq!(texts(&page, "#batch-counts [data-state]"), vec!["running"]);
    assert_eq!(counted(&page, "dead"), vec!["0"]);
    assert_eq!(counted(&page, "pending"), vec!["1"]);
    assert_eq!(
        texts(&page, ".batch-progress .progress-text"),
        vec!["2 of 3 done"]
    );
    assert_eq!(texts_in(&page, &row, "td.state"), vec!["pending"]);
    assert_eq!(
        count(&page, r#"#batch-members form[action="/fn/job/resurrect"]"#),
        0
    );
    assert_eq!(
        callback(&page, "death", &format!(r#"a[href="/jobs/{death_job}"]"#)).len(),
        1,
        "a callback that fired stays fired"
    );

    // It succeeds now: every member did, so on_success fires, linked from the page.
    finish(&f.store, "invoices", &[]).await;
    let success_job = f
        .store
        .get_batch(id)
        .await
        .unwrap()
        .unwrap()
        .success_job_id
        .expect("on_success fired");
    let (_, page) = get(&f.router, &url).await;
    assert_eq!(texts(&page, "#batch-counts [data-state]"), vec!["finished"]);
    assert_eq!(
        callback(
            &page,
            "success",
            &format!(r#"a[href="/jobs/{success_job}"]"#)
        )
        .len(),
        1,
        "{page}"
    );

    // The member's page links back to its batch.
    let (_, job_page) = get(&f.router, &format!("/jobs/{dead}")).await;
    assert_eq!(
        count(
            &job_page,
            &format!(r#"[data-batch] a[href="/batches/{id}"]"#)
        ),
        1,
        "{job_page}"
    );
}

#[tokio::test]
async fn unknown_and_malformed_batch_ids_get_the_not_found_page() {
    let f = fixture().await;
    let unknown = BatchId::new();
    let (status, page) = get(&f.router, &format!("/batches/{unknown}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        texts(&page, "#batch-not-found")[0].contains(&format!("No batch {unknown}")),
        "{page}"
    );
    let (status, page) = get(&f.router, "/batches/%3Cscript%3Enope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        texts(&page, "#batch-not-found")[0].contains("<script>nope is not a batch id"),
        "{page}"
    );
    assert!(!page.contains("<script>nope"), "escaped");
}

#[tokio::test]
async fn viewers_see_a_batch_without_the_resurrect_action_and_cannot_resurrect() {
    let auth = password_users(&[("eve", Role::Viewer, "pw-eve")]);
    let f = fixture_with(auth, ConsoleOptions::default()).await;
    let created = f.ops.create_batch(invoices()).await.unwrap();
    let dead = created.job_ids[0];
    finish(&f.store, "invoices", &[dead]).await;
    let eve = basic("eve", "pw-eve");
    let url = format!("/batches/{}", created.batch.id);
    let (status, page) = get_as(&f.router, &url, Some(&eve)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        count(&page, &format!(r#"tr[data-member="{dead}"]"#)),
        1,
        "{page}"
    );
    assert!(!page.contains("/fn/job/resurrect"), "{page}");
    assert!(page.contains("Read-only"));
    let (status, _) = post_as(
        &f.router,
        "/fn/job/resurrect",
        &[("id", &dead.to_string()), ("back", &url)],
        Some(&eve),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        f.store
            .get_batch(created.batch.id)
            .await
            .unwrap()
            .unwrap()
            .dead,
        1
    );
}

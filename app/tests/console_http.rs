//! The console through its real router on a real SQLite store: pages render with data,
//! actions need the operator role and a CSRF token, land in the audit log and change state.

// Only the console helpers: the inert check's own test runs with `hostile_content`.
mod support {
    pub mod console;
}

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use deck_app::{AuthConfig, ConsoleOptions, Role};
use deck_engine::{AttemptError, Completion, EnqueueRequest, FailureReason, JobId, Pillar, Store};
use support::console::{
    Fixture, basic, fixture, fixture_with, form_post, get_page, html_request, last_audit,
    password_users, send, start_running, token_operator,
};
use tower::ServiceExt;

async fn enqueue(store: &Arc<dyn Store>, queue: &str, payload: &str) -> JobId {
    store
        .enqueue(EnqueueRequest::new(queue, "send_email", payload))
        .await
        .unwrap()
        .id
}

/// Run one job to the DLQ as a worker would.
async fn dead_letter(store: &Arc<dyn Store>, queue: &str, message: &str) -> JobId {
    let id = enqueue(store, queue, r#"{"to":"a@b.c"}"#).await;
    let ids = start_running(store, "w", queue).await;
    assert!(ids.contains(&id));
    let completions = ids
        .iter()
        .map(|id| Completion::DeadLetter {
            id: *id,
            reason: FailureReason::Fatal,
            error: AttemptError {
                attempt: 1,
                at: chrono::Utc::now(),
                kind: "fatal".into(),
                message: message.into(),
                ..AttemptError::default()
            },
            duration_ms: 3,
        })
        .collect();
    store.complete("w", completions).await.unwrap();
    id
}

/// Post `form` with a valid CSRF `token`, signed in as nobody.
async fn act(router: &Router, token: &str, path: &str, form: &str) -> (StatusCode, String) {
    post(router, path, form, Some(token), None).await
}

/// The status, the HTML and the CSRF token the console set as a cookie, if it did.
async fn get(
    router: &Router,
    path: &str,
    auth: Option<&str>,
) -> (StatusCode, String, Option<String>) {
    let page = get_page(router, path, auth).await;
    let cookie = page
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.split(';').next()?.strip_prefix("deck_csrf="))
        .map(str::to_string);
    (page.status, page.body, cookie)
}

async fn csrf(router: &Router, auth: Option<&str>) -> String {
    get(router, "/settings", auth)
        .await
        .2
        .expect("the console sets a CSRF cookie")
}

/// Post `form` with `token` as the CSRF cookie and field, if given; the status and the
/// redirect's target.
async fn post(
    router: &Router,
    path: &str,
    form: &str,
    token: Option<&str>,
    auth: Option<&str>,
) -> (StatusCode, String) {
    let answer = send(router, form_post(path, token, form, auth)).await;
    (answer.status, answer.location())
}

/// A console with one job of queue `billing` dead-lettered with `message`, and a CSRF token
/// to act on it.
async fn one_dead_letter(message: &str) -> (Fixture, JobId, String) {
    let f = fixture().await;
    let dead = dead_letter(&f.store, "billing", message).await;
    let token = csrf(&f.router, None).await;
    (f, dead, token)
}

#[tokio::test]
async fn every_page_renders_with_real_data() {
    let f = fixture().await;
    let pending = enqueue(&f.store, "emails", r#"{"to":"<x@y.z>"}"#).await;
    let dead = dead_letter(&f.store, "billing", "card declined <script>").await;
    for path in [
        "/".to_string(),
        "/queues".into(),
        "/jobs".into(),
        "/jobs?source=dlq".into(),
        "/jobs?source=archive".into(),
        "/jobs?source=dlq&q=declined&reason=Fatal".into(),
        format!("/jobs/{pending}"),
        format!("/jobs/{dead}"),
        "/dlq/bulk?source=dlq&queue=billing".into(),
        "/settings".into(),
        "/instances".into(),
        "/audit".into(),
    ] {
        let (status, body, _) = get(&f.router, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert!(body.contains("The Deck"), "{path}");
        assert!(
            !body.contains("<script>"),
            "{path}: user text must be escaped"
        );
    }
    let (_, dlq, _) = get(&f.router, "/jobs?source=dlq", None).await;
    assert!(dlq.contains(&dead.to_string()), "the dead job is listed");
    assert!(dlq.contains("card declined &lt;script&gt;"));
    assert!(
        dlq.contains("All 1 matching: bulk by filter"),
        "the bulk link says how many it would reach: {dlq}"
    );
    let (_, preview, _) = get(&f.router, "/dlq/bulk?source=dlq&queue=billing", None).await;
    assert!(
        preview.contains(r#"class="big">1<"#),
        "one job matches: {preview}"
    );
    let (status, missing, _) = get(&f.router, "/no/such/page", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        missing.contains("<title>Not found · The Deck</title>")
            && missing.contains("There is no page at <code>/no/such/page</code>")
            && missing.contains(r#"<a href="/">Back to the overview</a>"#),
        "the console's own not-found page: {missing}"
    );
}

/// The label of the nav link marked as the current page.
fn current_nav(body: &str) -> Option<&str> {
    let nav = &body[body.find("class=\"nav\"")?..];
    let nav = &nav[..nav.find("</nav>")?];
    let at = nav.find("aria-current=\"page\"")?;
    let label = &nav[at..];
    let label = &label[label.find('>')? + 1..];
    Some(&label[..label.find('<')?])
}

#[tokio::test]
async fn the_nav_marks_the_section_a_job_page_belongs_to() {
    let f = fixture().await;
    let pending = enqueue(&f.store, "emails", "{}").await;
    let dead = dead_letter(&f.store, "billing", "card declined").await;
    for (path, section) in [
        ("/jobs".to_string(), "Jobs"),
        (format!("/jobs/{pending}"), "Jobs"),
        ("/jobs?source=dlq".to_string(), "Dead letters"),
        (format!("/jobs/{dead}"), "Dead letters"),
        ("/queues".to_string(), "Queues"),
    ] {
        let (status, body, _) = get(&f.router, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(current_nav(&body), Some(section), "{path}");
    }
}

#[tokio::test]
async fn actions_need_a_csrf_token_and_land_in_the_audit_log() {
    let f = fixture().await;
    enqueue(&f.store, "emails", "{}").await;

    let (status, _) = post(
        &f.router,
        "/fn/queue/state",
        "queue=emails&op=pause&back=/queues",
        None,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no token, no action");
    assert!(!f.store.list_queues().await.unwrap()[0].paused);

    let token = csrf(&f.router, None).await;
    let (status, location) = act(
        &f.router,
        &token,
        "/fn/queue/state",
        "queue=emails&op=pause&back=/queues",
    )
    .await;
    assert_eq!(status, StatusCode::FOUND);
    assert!(location.starts_with("/queues?ok="), "{location}");
    assert!(f.store.list_queues().await.unwrap()[0].paused);

    let last = last_audit(&f.store).await;
    assert_eq!(last.action, "queue.pause");
    assert_eq!(last.actor, "local");
    assert_eq!(last.target, "emails");
}

/// Pause queue `emails` signed in with `auth`, with that user's own CSRF token.
async fn pause_emails_as(router: &Router, auth: &str) -> StatusCode {
    let token = csrf(router, Some(auth)).await;
    let form = "queue=emails&op=pause&back=/";
    post(router, "/fn/queue/state", form, Some(&token), Some(auth))
        .await
        .0
}

#[tokio::test]
async fn viewers_read_but_cannot_act_and_strangers_are_asked_to_sign_in() {
    let auth = password_users(&[
        ("ops", Role::Operator, "pw-ops"),
        ("eve", Role::Viewer, "pw-eve"),
    ]);
    let f = fixture_with(auth, ConsoleOptions::default()).await;
    enqueue(&f.store, "emails", "{}").await;
    let (ops, eve) = (basic("ops", "pw-ops"), basic("eve", "pw-eve"));

    assert_eq!(get(&f.router, "/", None).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(
        get(&f.router, "/", Some(&basic("eve", "nope"))).await.0,
        StatusCode::UNAUTHORIZED
    );
    let (status, page, _) = get(&f.router, "/queues", Some(&eve)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Read-only"), "viewers see no action forms");

    assert_eq!(
        pause_emails_as(&f.router, &eve).await,
        StatusCode::FORBIDDEN
    );
    assert!(!f.store.list_queues().await.unwrap()[0].paused);

    assert_eq!(pause_emails_as(&f.router, &ops).await, StatusCode::FOUND);
    assert_eq!(last_audit(&f.store).await.actor, "ops");
}

#[tokio::test]
async fn selected_rows_are_retried_together() {
    let f = fixture().await;
    let a = dead_letter(&f.store, "billing", "boom").await;
    let b = dead_letter(&f.store, "billing", "boom").await;
    let token = csrf(&f.router, None).await;
    // Checkbox names carry the row index; unchecked rows are simply absent.
    let form = format!(
        "source=dlq&action=resurrect&ids%5B0%5D={a}&ids%5B3%5D={b}&back=%2Fjobs%3Fsource%3Ddlq"
    );
    let (status, location) = act(&f.router, &token, "/fn/jobs/bulk", &form).await;
    assert_eq!(status, StatusCode::FOUND);
    assert!(location.contains("ok="), "{location}");
    for id in [a, b] {
        assert_eq!(
            f.store.get_job(id).await.unwrap().unwrap().pillar(),
            Pillar::Hot
        );
    }
    let last = last_audit(&f.store).await;
    assert_eq!(
        (last.action.as_str(), last.count),
        ("jobs.bulk_resurrect", 2)
    );
}

#[tokio::test]
async fn purge_without_confirmation_changes_nothing() {
    let (f, dead, token) = one_dead_letter("boom").await;
    let form = format!("id={dead}&source=dlq&back=%2Fjobs%3Fsource%3Ddlq");
    let (_, location) = act(&f.router, &token, "/fn/job/purge", &form).await;
    assert!(location.contains("err="), "{location}");
    assert!(f.store.get_job(dead).await.unwrap().is_some());
    let confirmed = format!("{form}&confirm=yes");
    let (_, location) = act(&f.router, &token, "/fn/job/purge", &confirmed).await;
    assert!(location.contains("ok="), "{location}");
    assert!(f.store.get_job(dead).await.unwrap().is_none());
}

#[tokio::test]
async fn a_running_job_is_stopped_only_once_the_operator_confirms() {
    let f = fixture().await;
    let id = enqueue(&f.store, "billing", "{}").await;
    assert_eq!(start_running(&f.store, "w", "billing").await, vec![id]);
    let (_, page, _) = get(&f.router, &format!("/jobs/{id}"), None).await;
    assert!(page.contains("Stop and cancel") && page.contains("stop it while it runs"));
    let token = csrf(&f.router, None).await;
    let form = format!("id={id}&back=%2Fjobs");
    let (_, location) = act(&f.router, &token, "/fn/job/cancel", &form).await;
    assert!(location.contains("err="), "{location}");
    let job = f.store.get_job(id).await.unwrap().unwrap();
    assert!(
        !job.cancel_requested,
        "nothing requested without the box ticked"
    );
    let confirmed = format!("{form}&confirm=yes");
    let (_, location) = act(&f.router, &token, "/fn/job/cancel", &confirmed).await;
    assert!(location.contains("ok="), "{location}");
    assert!(f.store.get_job(id).await.unwrap().unwrap().cancel_requested);
}

#[tokio::test]
async fn an_edit_is_previewed_as_a_diff_then_saved_with_the_original_kept() {
    let (f, dead, token) = one_dead_letter("bad amount").await;
    let back = format!("%2Fjobs%2F{dead}");

    let bad = format!(
        "id={dead}&step=preview&payload=%7Bnope&tags=&priority=0&queue=billing&back={back}"
    );
    let (_, location) = act(&f.router, &token, "/fn/job/edit", &bad).await;
    assert!(
        location.contains("edit=1") && location.contains("err="),
        "{location}"
    );

    let good = format!(
        "id={dead}&step=preview&payload=%7B%22to%22%3A%22fixed%40b.c%22%7D&tags=retry&priority=5&queue=billing&back={back}"
    );
    let (_, location) = act(&f.router, &token, "/fn/job/edit", &good).await;
    assert!(location.contains("draft="), "{location}");
    let (_, page, _) = get(&f.router, &location, None).await;
    assert!(
        page.contains("d-add") && page.contains("fixed@b.c"),
        "the diff shows the new payload"
    );
    assert!(
        f.store
            .get_job(dead)
            .await
            .unwrap()
            .unwrap()
            .payload
            .contains("a@b.c"),
        "nothing saved yet"
    );

    let draft = location
        .split("draft=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap();
    let save = format!("id={dead}&draft={draft}&step=save_resurrect&back={back}");
    let (_, location) = act(&f.router, &token, "/fn/job/edit", &save).await;
    assert!(location.contains("ok="), "{location}");
    let job = f.store.get_job(dead).await.unwrap().unwrap();
    assert_eq!(job.pillar(), Pillar::Hot);
    assert!(job.payload.contains("fixed@b.c"));
    assert!(job.original_payload.unwrap().contains("a@b.c"));
    assert_eq!((job.priority, job.tags), (5, vec!["retry".to_string()]));
}

/// Where a GET of `path` redirects to (it must redirect).
async fn redirect_target(router: &Router, path: &str) -> String {
    let answer = send(router, Request::get(path).body(Body::empty()).unwrap()).await;
    assert!(
        answer.status.is_redirection(),
        "{path}: {} instead of a redirect",
        answer.status
    );
    answer.location()
}

#[tokio::test]
async fn the_theme_switch_only_goes_back_to_this_site() {
    let f = fixture().await;
    assert_eq!(
        redirect_target(&f.router, "/theme?set=carbon&back=%2Fjobs%3Fsource%3Ddlq").await,
        "/jobs?source=dlq"
    );
    for hostile in [
        "/theme?set=carbon&back=%0d%0aSet-Cookie:%20deck_csrf=x",
        "/theme?set=carbon&back=/jobs%0d%0aLocation:%20//evil.example",
        "/theme?back=/%09/evil.example",
        "/theme?set=carbon&back=/%0a/evil.example",
        "/theme?set=carbon&back=/%5Cevil.example",
        "/theme?set=carbon&back=//evil.example",
        "/theme?set=carbon&back=https://evil.example",
        "/theme?set=carbon&back=javascript:alert(1)",
        "/theme?set=carbon&back=%7F",
        "/theme?set=carbon&back=%ff%fe",
        "/theme",
    ] {
        assert_eq!(redirect_target(&f.router, hostile).await, "/", "{hostile}");
    }
}

#[tokio::test]
async fn an_action_never_redirects_off_site_nor_fails_on_its_back_field() {
    let f = fixture().await;
    enqueue(&f.store, "emails", "{}").await;
    let token = csrf(&f.router, None).await;
    for back in [
        "%0d%0aSet-Cookie:%20deck_csrf=x",
        "/queues%0d%0aLocation:%20//evil.example",
        "/%09/evil.example",
        "//evil.example",
        "/%5Cevil.example",
    ] {
        let form = format!("queue=emails&op=pause&back={back}");
        let (status, location) = act(&f.router, &token, "/fn/queue/state", &form).await;
        assert_eq!(status, StatusCode::FOUND, "{back}");
        assert!(location.starts_with("/?ok="), "{back}: {location}");
    }
}

/// The console carries its own security headers wherever an embedder mounts it: pages (with
/// their nonce), assets, the live stream, redirects and refusals alike.
#[tokio::test]
async fn the_console_router_alone_sends_the_security_headers() {
    use deck_web::security_headers::{CONTENT_SECURITY_POLICY, page_policy};
    let auth = token_operator("ops", "a-token-of-sixteen-chars");
    let f = fixture_with(auth, ConsoleOptions::default()).await;
    let bearer = "Bearer a-token-of-sixteen-chars";
    for (method, path, auth, status) in [
        (Method::GET, "/", Some(bearer), StatusCode::OK),
        (
            Method::GET,
            "/jobs?source=dlq",
            Some(bearer),
            StatusCode::OK,
        ),
        (Method::GET, "/", None, StatusCode::UNAUTHORIZED),
        (Method::GET, "/assets/live.js", Some(bearer), StatusCode::OK),
        (Method::GET, "/live", Some(bearer), StatusCode::OK),
        (
            Method::GET,
            "/theme?set=carbon",
            Some(bearer),
            StatusCode::SEE_OTHER,
        ),
        (
            Method::POST,
            "/fn/queue/state",
            Some(bearer),
            StatusCode::FORBIDDEN,
        ),
    ] {
        let req = html_request(method.clone(), path, auth);
        // Not `send`: the live stream's body never ends.
        let res = f
            .router
            .clone()
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(res.status(), status, "{method} {path}");
        let h = res.headers().clone();
        let value = |name: header::HeaderName| {
            let all: Vec<_> = h.get_all(&name).iter().collect();
            assert_eq!(all.len(), 1, "{method} {path}: {name} {all:?}");
            all[0].to_str().unwrap().to_string()
        };
        assert_eq!(value(header::X_FRAME_OPTIONS), "DENY", "{path}");
        assert_eq!(value(header::X_CONTENT_TYPE_OPTIONS), "nosniff", "{path}");
        assert_eq!(value(header::REFERRER_POLICY), "same-origin", "{path}");
        let policy = value(header::CONTENT_SECURITY_POLICY);
        if status == StatusCode::OK && !path.starts_with("/assets") && path != "/live" {
            let body = axum::body::to_bytes(res.into_body(), 16 << 20)
                .await
                .unwrap();
            let html = String::from_utf8_lossy(&body);
            let nonce = html
                .split("<script nonce=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .expect("Leptos marks its inline scripts with a nonce");
            assert_eq!(policy, page_policy(nonce), "{path}");
        } else {
            assert_eq!(policy, CONTENT_SECURITY_POLICY, "{method} {path}");
        }
    }
}

/// `/queues` is kept rendered per snapshot (`page_cache`), but its settings are a committed
/// read: a change shows on the next load even while the snapshot stays the same, and two
/// callers never see each other's CSRF token.
#[tokio::test]
async fn the_kept_queues_page_shows_a_settings_change_at_once() {
    // One snapshot for the whole test: no tick passes between the loads.
    let options = ConsoleOptions {
        tick: std::time::Duration::from_secs(3600),
        ..ConsoleOptions::default()
    };
    let f = fixture_with(AuthConfig::default(), options).await;
    let (store, router) = (&f.store, &f.router);
    enqueue(store, "emails", "{}").await;

    let (status, first, first_token) = get(router, "/queues", None).await;
    assert_eq!(status, StatusCode::OK);
    let (_, second, second_token) = get(router, "/queues", None).await;
    let (first_token, second_token) = (first_token.unwrap(), second_token.unwrap());
    assert_ne!(first_token, second_token);
    assert!(
        first.contains(&first_token),
        "the page's forms carry its caller's token"
    );
    assert!(second.contains(&second_token));
    assert!(!second.contains(&first_token), "no other caller's token");
    let without_secrets = |html: &str, token: &str| {
        let html = html.replace(token, "TOKEN");
        // Nonces differ per response by design.
        html.split("nonce=\"")
            .enumerate()
            .map(|(i, part)| match (i, part.find('"')) {
                (0, _) | (_, None) => part.to_string(),
                (_, Some(end)) => part[end..].to_string(),
            })
            .collect::<String>()
    };
    assert_eq!(
        without_secrets(&first, &first_token),
        without_secrets(&second, &second_token),
        "the same snapshot and settings give the same page"
    );
    assert!(!first.contains("badge warn\">paused"), "{first}");

    store
        .update_queue(
            "emails",
            deck_engine::QueuePatch {
                paused: Some(true),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let (_, after, _) = get(router, "/queues", None).await;
    assert!(
        after.contains("badge warn\">paused"),
        "the change shows without waiting for a tick: {after}"
    );
    let (_, focused, _) = get(router, "/queues?q=emails", None).await;
    assert!(
        focused.contains("← all queues"),
        "another query is another page"
    );
}

/// The overview's error group of three "mailbox … does not exist" failures links to the
/// bulk flow with the group preselected; purging it there goes through the preview, the
/// typed word and a run, and touches only the group's dead letters.
#[tokio::test]
async fn an_error_group_is_purged_through_the_bulk_flow() {
    let f = fixture().await;
    let mut members = Vec::new();
    for who in ["ann@example.com", "bob@example.org", "cy@example.net"] {
        let message = format!("mailbox {who} does not exist");
        members.push(dead_letter(&f.store, "mail", &message).await);
    }
    let bystander = dead_letter(&f.store, "mail", "smtp relay refused the connection").await;
    let groups = f.store.top_errors(10).await.unwrap();
    assert_eq!(groups.len(), 2, "{groups:?}");
    let group = groups.iter().find(|g| g.count == 3).unwrap();
    let fp = group.fingerprint.to_string();

    let (_, overview, _) = get(&f.router, "/", None).await;
    let purge_link = format!("/dlq/bulk?source=dlq&amp;group={fp}&amp;action=purge");
    assert!(overview.contains(&purge_link), "{overview}");
    assert!(overview.contains("mailbox cy@example.net does not exist"));

    let (status, preview, _) = get(
        &f.router,
        &format!("/dlq/bulk?source=dlq&group={fp}&action=purge"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(preview.contains(r#"class="big">3<"#), "{preview}");
    assert!(
        preview.contains("Error group: ")
            && preview.contains("mailbox cy@example.net does not exist"),
        "the bulk page names the group: {preview}"
    );
    let (_, list, _) = get(&f.router, &format!("/jobs?source=dlq&group={fp}"), None).await;
    for id in &members {
        assert!(list.contains(&id.to_string()), "{id} is listed");
    }
    assert!(!list.contains(&bystander.to_string()));

    let token = csrf(&f.router, None).await;
    let filter = serde_urlencoded::to_string([("source", "dlq"), ("group", fp.as_str())]).unwrap();
    let form = serde_urlencoded::to_string([
        ("filter", filter.as_str()),
        ("action", "purge"),
        ("cap", ""),
        ("confirm", "PURGE"),
        ("back", "/dlq/bulk"),
    ])
    .unwrap();
    let (status, run) = act(&f.router, &token, "/fn/bulk", &form).await;
    assert_eq!(status, StatusCode::FOUND);
    assert!(run.starts_with("/dlq/bulk/"), "{run}");
    let run_page = run.split('?').next().unwrap_or_default().to_string();
    // The run is a task on this runtime: each page load lets it make progress.
    let mut finished = false;
    for _ in 0..200 {
        let (_, page, _) = get(&f.router, &run_page, None).await;
        if page.contains(r#"data-run-finished="true""#) {
            assert!(page.contains("done: 3 job(s)"), "{page}");
            finished = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(finished, "the bulk run finishes");
    for id in &members {
        assert!(f.store.get_job(*id).await.unwrap().is_none(), "{id} purged");
    }
    assert!(f.store.get_job(bystander).await.unwrap().is_some());
    let groups = f.store.top_errors(10).await.unwrap();
    assert_eq!(groups.len(), 1, "the purged group is gone: {groups:?}");
    let last = last_audit(&f.store).await;
    assert_eq!((last.action.as_str(), last.count), ("dlq.bulk_purge", 3));
}

#[tokio::test]
async fn an_instance_is_quieted_and_resumed_from_the_instances_page() {
    let f = fixture().await;
    let beat = |quiet_before: bool| deck_engine::InstanceInfo {
        id: "inst-busy".into(),
        host: "build-host".into(),
        pid: 42,
        version: "0.1.0".into(),
        started_at: chrono::Utc::now(),
        heartbeat_at: chrono::Utc::now(),
        workers_total: 4,
        workers_busy: 1,
        kind: deck_engine::InstanceKind::Engine,
        queues: None,
        job_types: None,
        quiet: quiet_before,
        held_jobs: 0,
        stopped: false,
    };
    f.store.heartbeat_instance(&beat(false)).await.unwrap();
    let listed_quiet = || async {
        f.store
            .list_instances(std::time::Duration::from_secs(60))
            .await
            .unwrap()
            .into_iter()
            .find(|i| i.id == "inst-busy")
            .map(|i| i.quiet)
    };

    let (status, html, _) = get(&f.router, "/instances", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"action="/fn/instance/state""#), "{html}");
    assert!(html.contains(r#"value="quiet""#), "a Quiet button");
    assert!(!html.contains(">quiet</span>"), "no quiet badge yet");

    let token = csrf(&f.router, None).await;
    let set_state = |form| act(&f.router, &token, "/fn/instance/state", form);
    let (status, location) = set_state("instance=inst-busy&op=quiet&back=/instances").await;
    assert_eq!(status, StatusCode::FOUND);
    assert!(location.starts_with("/instances?ok="), "{location}");
    assert_eq!(listed_quiet().await, Some(true));
    let last = last_audit(&f.store).await;
    assert_eq!(
        (
            last.action.as_str(),
            last.target.as_str(),
            last.actor.as_str()
        ),
        ("instance.quiet", "inst-busy", "local")
    );
    // The instance's own next beat does not undo it.
    f.store.heartbeat_instance(&beat(false)).await.unwrap();
    assert_eq!(listed_quiet().await, Some(true));

    let (_, html, _) = get(&f.router, "/instances", None).await;
    assert!(html.contains(">quiet</span>"), "the quiet badge: {html}");
    assert!(html.contains(r#"value="resume""#), "a Resume button");

    let (_, location) = set_state("instance=inst-busy&op=resume&back=/instances").await;
    assert!(location.starts_with("/instances?ok="), "{location}");
    assert_eq!(listed_quiet().await, Some(false));
    let last = last_audit(&f.store).await;
    assert_eq!(last.action, "instance.resume");

    let (_, location) = set_state("instance=gone-away&op=quiet&back=/instances").await;
    assert!(location.starts_with("/instances?err="), "{location}");

    // An external worker decides its own claims: no button, and a crafted post is refused.
    let external = deck_engine::InstanceInfo {
        id: "ext:py".into(),
        kind: deck_engine::InstanceKind::External,
        ..beat(false)
    };
    f.store.heartbeat_instance(&external).await.unwrap();
    let (_, html, _) = get(&f.router, "/instances", None).await;
    assert_eq!(
        html.matches(r#"action="/fn/instance/state""#).count(),
        1,
        "engines only"
    );
    let (_, location) = set_state("instance=ext:py&op=quiet&back=/instances").await;
    assert!(location.starts_with("/instances?err="), "{location}");
    let listed = f
        .store
        .list_instances(std::time::Duration::from_secs(60))
        .await
        .unwrap();
    assert!(!listed.iter().any(|i| i.quiet), "nothing quieted");
}

#[tokio::test]
async fn a_search_past_its_window_says_so_and_links_to_older_jobs() {
    let f = fixture().await;
    let mut oldest = EnqueueRequest::new("emails", "send_email", r#"{"order":"ord-9931"}"#);
    oldest.tags = vec!["vintage".into()];
    let old = f.store.enqueue(oldest).await.unwrap().id;
    let created = f.store.get_job(old).await.unwrap().unwrap().created_at;
    // The window's edge is a list time: the newer jobs need a later one than the oldest.
    while chrono::Utc::now() <= created + chrono::Duration::milliseconds(2) {
        tokio::task::yield_now().await;
    }
    let window = deck_engine::SEARCH_WINDOW_ROWS as usize;
    for chunk in 0..window.div_ceil(5_000) {
        let n = 5_000.min(window - chunk * 5_000);
        let batch = (0..n)
            .map(|_| EnqueueRequest::new("emails", "send_email", r#"{"n":1}"#))
            .collect();
        f.store.enqueue_batch(batch).await.unwrap();
    }

    let (_, all, _) = get(&f.router, "/jobs?source=active", None).await;
    assert!(all.contains(">20,001 jobs<"), "the whole list is counted");
    let (_, by_tag, _) = get(&f.router, "/jobs?source=active&q=vintage", None).await;
    assert!(
        !by_tag.contains(&old.to_string()),
        "the tag is past the window"
    );
    assert!(
        by_tag.contains("searched in the newest 20,000 jobs"),
        "{by_tag}"
    );
    let older = by_tag
        .split(r#"href=""#)
        .map(|s| s.split('"').next().unwrap_or_default())
        .find(|href| href.contains("older="))
        .expect("a search older link")
        .replace("&amp;", "&");
    let (status, past, _) = get(&f.router, &older, None).await;
    assert_eq!(status, StatusCode::OK, "{older}");
    assert!(past.contains(&old.to_string()), "found past the window");
    assert!(past.contains(">1 job match<"), "{past}");

    let by_id = format!("/jobs?source=active&q={old}");
    let (_, found, _) = get(&f.router, &by_id, None).await;
    assert!(
        found.contains(&format!("/jobs/{old}")),
        "a full id is searched everywhere"
    );
    let (_, payload, _) = get(&f.router, "/jobs?source=active&q=ord-9931", None).await;
    assert!(!payload.contains(&format!("/jobs/{old}")));
    assert!(payload.contains(">0 jobs match<"));
}

/// A queue whose period's starts are used up says so on the queues page, and a job waiting in
/// it says why it is not starting; lifting the limit from the queues page's form clears both.
#[tokio::test]
async fn a_rate_limited_queue_and_its_waiting_job_say_until_when() {
    let f = fixture().await;
    let router = &f.router;
    f.store
        .update_queue(
            "metered",
            deck_engine::QueuePatch {
                rate_limit: Some(Some(deck_engine::RateLimit {
                    starts: 1,
                    per_secs: 86_400,
                })),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    enqueue(&f.store, "metered", "{}").await;
    let waiting = enqueue(&f.store, "metered", "{}").await;
    let day = chrono::Utc::now().timestamp().div_euclid(86_400);
    let started = start_running(&f.store, "w", "metered").await;
    if chrono::Utc::now().timestamp().div_euclid(86_400) != day {
        eprintln!("notice: the claim straddled midnight UTC; nothing to check");
        return;
    }
    assert_eq!(started.len(), 1, "one start a day");

    let (_, queues, _) = get(router, "/queues", None).await;
    assert!(queues.contains("rate limited until"), "{queues}");
    assert!(queues.contains("1 starts per 86400 s"), "{queues}");
    let (_, job, _) = get(router, &format!("/jobs/{waiting}"), None).await;
    assert!(
        job.contains("data-held") && job.contains("rate limited until"),
        "{job}"
    );

    let token = csrf(router, None).await;
    let (status, _) = act(
        router,
        &token,
        "/fn/queue/limits",
        "queue=metered&max_workers=&zombie_timeout=&execution_timeout=&lag_warn=&lag_crit=\
         &rate_starts=&rate_per=&back=%2Fqueues",
    )
    .await;
    assert!(status.is_redirection(), "{status}");
    let cfg = f.store.list_queues().await.unwrap();
    let metered = cfg.iter().find(|q| q.name == "metered").unwrap();
    assert_eq!(metered.rate_limit, None, "empty fields lift the limit");
    let (_, job, _) = get(router, &format!("/jobs/{waiting}"), None).await;
    assert!(!job.contains("data-held"), "{job}");
}

#[tokio::test]
async fn pending_work_no_instance_takes_is_named_on_the_overview_and_its_queue() {
    // No instance at all: the queue is served by nobody.
    let f = fixture().await;
    enqueue(&f.store, "emails", "{}").await;
    let (_, overview, _) = get(&f.router, "/", None).await;
    assert!(
        overview.contains("no instance serves queue emails (1 pending)"),
        "{overview}"
    );

    // An instance serves the queue but runs other types: the type is named, on its queue.
    let f = fixture().await;
    let worker = deck_engine::InstanceInfo {
        id: "inst-mail".into(),
        host: "build-host".into(),
        pid: 42,
        version: "0.1.0".into(),
        started_at: chrono::Utc::now(),
        heartbeat_at: chrono::Utc::now(),
        workers_total: 4,
        workers_busy: 0,
        kind: deck_engine::InstanceKind::Engine,
        queues: Some(vec!["emails".into()]),
        job_types: Some(vec!["send_sms".into()]),
        quiet: false,
        held_jobs: 0,
        stopped: false,
    };
    f.store.heartbeat_instance(&worker).await.unwrap();
    enqueue(&f.store, "emails", "{}").await;
    let (_, queue, _) = get(&f.router, "/queues?q=emails", None).await;
    assert!(
        queue.contains("no instance takes type send_email in queue emails (1 pending)"),
        "{queue}"
    );
    assert!(
        !queue.contains("no instance serves queue emails"),
        "{queue}"
    );
}

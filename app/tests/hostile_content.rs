//! Stored and reflected XSS, as a class: hostile text in every user-controlled field of a
//! real SQLite store (and of the runtime, events, drafts, bulk runs and the signed-in user),
//! every page rendered through the real router, the live fragments through `/live` and
//! rendered directly — and nothing in them may run. A new page is covered by one line in
//! `PAGES`.

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use chrono::Utc;
use deck_app::{
    BreakerState, BreakerView, Console, ConsoleBackend, ConsoleEvent, ConsoleOptions, EventLevel,
    RuntimeView,
};
use deck_engine::{
    AttemptError, Completion, EnqueueRequest, ErrorGroup, FailureReason, InstanceInfo, JobId,
    NewAuditEntry, Operations, QueueStats, Store,
};
use futures::StreamExt;
use support::console::{
    get_page, html_request, post_as, sqlite_store, start_running, token_operator,
};
use support::inert::{assert_inert, hostile, markup, policy_nonce, shows};
use tower::ServiceExt;

const TOKEN: &str = "hostile-content-test-token";

/// Every field the engine's runtime reports, hostile too.
struct HostileBackend(Operations);

impl ConsoleBackend for HostileBackend {
    fn operations(&self) -> &Operations {
        &self.0
    }

    fn runtime(&self) -> RuntimeView {
        hostile_runtime()
    }

    fn drain_events(&self) -> Vec<ConsoleEvent> {
        hostile_events()
    }
}

fn hostile_runtime() -> RuntimeView {
    RuntimeView {
        instance_id: hostile("runtime instance"),
        workers_total: 4,
        workers_busy: 1,
        buffered: 0,
        breakers: vec![BreakerView {
            job_type: hostile("breaker type"),
            state: BreakerState::Open,
            recent_failures: 0,
            probe_in_ms: Some(1_000),
            opened_by_failures: Some(5),
            opened_ms_ago: Some(2_000),
            probe_failed: false,
            probe_running: false,
        }],
    }
}

fn hostile_events() -> Vec<ConsoleEvent> {
    vec![ConsoleEvent {
        at: Utc::now(),
        level: EventLevel::Warn,
        text: hostile("event"),
        job_id: None,
    }]
}

struct Seeded {
    _dir: tempfile::TempDir,
    router: Router,
    pending: JobId,
    archived: JobId,
    dead: JobId,
    /// A schedule whose name, job and tags are hostile, run once.
    schedule: String,
    /// A batch whose description, creator, members and callbacks are hostile; one member
    /// dead (its error hostile), so its `on_death` fired.
    batch: deck_engine::BatchId,
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// Status, body and Content-Security-Policy.
async fn get(router: &Router, path: &str) -> (StatusCode, String, String) {
    let page = get_page(router, path, Some(&bearer())).await;
    let policy = page.header(header::CONTENT_SECURITY_POLICY);
    (page.status, page.body, policy)
}

/// Post a console form as the (hostile) operator; the redirect's target.
async fn post(router: &Router, path: &str, form: &[(&str, &str)]) -> String {
    let (status, location) = post_as(router, path, form, Some(&bearer())).await;
    assert_eq!(status, StatusCode::FOUND, "{path}");
    location
}

/// Claim every due job of `queue` as a hostile worker and finish each with `completion`.
async fn finish(store: &Arc<dyn Store>, queue: &str, completion: impl Fn(JobId) -> Completion) {
    let worker = markup("worker");
    let ids = start_running(store, &worker, queue).await;
    assert!(!ids.is_empty(), "{queue}: nothing to claim");
    store
        .complete(&worker, ids.into_iter().map(completion).collect())
        .await
        .unwrap();
}

fn attempt_error(field: &str) -> AttemptError {
    AttemptError {
        attempt: 1,
        at: Utc::now(),
        kind: markup(&format!("{field} kind")),
        message: hostile(field),
        started_at: Some(Utc::now()),
        duration_ms: Some(5),
        instance: Some(markup(&format!("{field} instance"))),
        location: Some(markup(&format!("{field} location"))),
        backtrace: Some(hostile(&format!("{field} backtrace"))),
        ..AttemptError::default()
    }
}

async fn enqueue(store: &Arc<dyn Store>, queue: &str, tag: &str) -> JobId {
    let mut req = EnqueueRequest::new(
        queue,
        hostile("type"),
        serde_json::json!({ "note": hostile("payload") }).to_string(),
    );
    req.tags = vec![markup(tag)];
    req.idempotency_key = Some(hostile(&format!("idempotency {tag}")));
    req.correlation_id = Some(hostile("correlation"));
    req.created_by = Some(hostile("created by"));
    store.enqueue(req).await.unwrap().id
}

/// A console over a store holding hostile text in every field an operator can see.
async fn seeded() -> Seeded {
    let (dir, store) = sqlite_store().await;
    let (q_dead, q_done, q_retry) = (
        hostile("queue"),
        hostile("queue done"),
        hostile("queue retry"),
    );

    let dead = enqueue(&store, &q_dead, "tag").await;
    finish(&store, &q_dead, |id| Completion::DeadLetter {
        id,
        reason: FailureReason::Fatal,
        error: attempt_error("error"),
        duration_ms: 3,
    })
    .await;
    let archived = enqueue(&store, &q_done, "tag done").await;
    finish(&store, &q_done, |id| Completion::Succeeded {
        id,
        result: Some(serde_json::json!({ "answer": hostile("result") }).to_string()),
        duration_ms: 3,
    })
    .await;
    let pending = enqueue(&store, &q_retry, "tag retry").await;
    finish(&store, &q_retry, |id| Completion::Retry {
        id,
        error: attempt_error("retry error"),
        retry_at: Utc::now() + chrono::Duration::hours(1),
    })
    .await;

    store
        .heartbeat_instance(&InstanceInfo {
            id: hostile("instance"),
            host: hostile("host"),
            pid: 42,
            version: hostile("version"),
            started_at: Utc::now(),
            heartbeat_at: Utc::now(),
            workers_total: 4,
            workers_busy: 1,
            kind: Default::default(),
            queues: None,
            job_types: None,
            quiet: false,
            held_jobs: 0,
            stopped: false,
        })
        .await
        .unwrap();
    store
        .append_audit(NewAuditEntry {
            actor: hostile("audit actor"),
            action: hostile("audit action"),
            target: hostile("audit target"),
            count: 1,
            detail: Some(hostile("audit detail")),
        })
        .await
        .unwrap();

    let schedule = hostile("schedule");
    let ops = Operations::over_store(store.clone());
    ops.create_schedule(
        &markup("schedule actor"),
        deck_engine::ScheduleDefinition {
            name: schedule.clone(),
            spec: deck_engine::ScheduleSpec::Cron("@hourly".into()),
            time_zone: "Europe/Berlin".into(),
            job: deck_engine::ScheduleJob {
                queue: hostile("schedule queue"),
                job_type: hostile("schedule type"),
                payload: serde_json::json!({ "note": hostile("schedule payload") }).to_string(),
                priority: 0,
                tags: vec![markup("schedule tag")],
                max_attempts: None,
                expires_after_secs: None,
            },
            misfire: Default::default(),
            overlap: Default::default(),
        },
    )
    .await
    .unwrap();
    ops.run_schedule_now(&markup("schedule actor"), &schedule)
        .await
        .unwrap();

    let batch_queue = hostile("batch queue");
    let callback = || {
        deck_engine::BatchCallback::new(hostile("batch callback queue"), hostile("batch callback"))
    };
    let batch = ops
        .create_batch(deck_engine::BatchRequest {
            description: Some(hostile("batch description")),
            created_by: Some(hostile("batch created by")),
            jobs: vec![EnqueueRequest::new(
                &batch_queue,
                hostile("batch type"),
                "{}",
            )],
            callbacks: deck_engine::BatchCallbacks {
                on_success: Some(callback()),
                on_complete: None,
                on_death: Some(callback()),
            },
        })
        .await
        .unwrap()
        .batch
        .id;
    finish(&store, &batch_queue, |id| Completion::DeadLetter {
        id,
        reason: FailureReason::Fatal,
        error: attempt_error("batch error"),
        duration_ms: 3,
    })
    .await;

    let console = Console::new(
        HostileBackend(Operations::over_store(store.clone())),
        ConsoleOptions {
            tick: Duration::from_millis(250),
            ..ConsoleOptions::default()
        },
    );
    let auth = token_operator(markup("user"), TOKEN);
    Seeded {
        _dir: dir,
        router: deck_app::console_router(console, auth),
        pending,
        archived,
        dead,
        schedule,
        batch,
    }
}

/// Query parameters that every page reflects somewhere (flash messages, form values).
fn reflected() -> String {
    serde_urlencoded::to_string([("ok", hostile("flash ok")), ("err", hostile("flash err"))])
        .unwrap()
}

/// Render `path` (with hostile flash parameters) and check it; it must show the text planted
/// in each of `fields`, or the test would prove nothing about them.
async fn check_page(router: &Router, path: &str, fields: &[&str]) {
    let sep = if path.contains('?') { '&' } else { '?' };
    let url = format!("{path}{sep}{}", reflected());
    let (status, html, policy) = get(router, &url).await;
    assert_eq!(status, StatusCode::OK, "{path}: {html}");
    assert_inert(path, &html, policy_nonce(&policy));
    for field in ["user", "flash ok", "flash err"].iter().chain(fields) {
        assert!(
            shows(&html, field),
            "{path} does not show the planted {field:?}"
        );
    }
}

#[tokio::test]
async fn no_page_runs_what_users_planted() {
    let s = seeded().await;
    let r = &s.router;
    let (pending, archived, dead) = (s.pending, s.archived, s.dead);

    // Operator actions on hostile names: audit rows and event lines carry them.
    post(
        r,
        "/fn/queue/state",
        &[
            ("queue", &hostile("queue")),
            ("op", "pause"),
            ("back", "/queues"),
        ],
    )
    .await;
    post(
        r,
        "/fn/queue/state",
        &[
            ("queue", &hostile("queue")),
            ("op", "resume"),
            ("back", "/queues"),
        ],
    )
    .await;
    // Drafts: one rejected (kept as typed), one to review as a diff.
    let page = format!("/jobs/{dead}");
    let rejected = post(
        r,
        "/fn/job/edit",
        &[
            ("id", &dead.to_string()),
            ("step", "preview"),
            ("payload", &hostile("draft payload")),
            ("tags", &markup("draft tags")),
            ("priority", &hostile("draft priority")),
            ("queue", &hostile("draft queue")),
            ("back", &page),
        ],
    )
    .await;
    assert!(rejected.contains("edit=1&draft="), "{rejected}");
    let review = post(
        r,
        "/fn/job/edit",
        &[
            ("id", &dead.to_string()),
            ("step", "preview"),
            (
                "payload",
                &serde_json::json!({ "note": hostile("diff payload") }).to_string(),
            ),
            ("tags", &markup("diff tags")),
            ("priority", "7"),
            ("queue", &hostile("diff queue")),
            ("back", &page),
        ],
    )
    .await;
    assert!(
        review.contains("draft=") && !review.contains("edit=1"),
        "{review}"
    );
    let draft = |location: &str| {
        location
            .split("draft=")
            .nth(1)
            .unwrap()
            .split('&')
            .next()
            .unwrap()
            .to_string()
    };
    let (rejected, review) = (draft(&rejected), draft(&review));

    // A schedule form refused (its cron), kept as typed.
    let schedule_page = deck_app::pages::schedules::schedule_url(&s.schedule);
    let refused = post(
        r,
        "/fn/schedule/create",
        &[
            ("name", &hostile("draft name")),
            ("kind", "cron"),
            ("expr", &hostile("draft cron")),
            ("time_zone", &hostile("draft zone")),
            ("queue", &hostile("draft schedule queue")),
            ("job_type", &hostile("draft type")),
            ("payload", &hostile("draft schedule payload")),
            ("priority", "0"),
            ("tags", &markup("draft schedule tags")),
            ("misfire", "run_once"),
            ("overlap", "allow"),
            ("back", "/schedules"),
        ],
    )
    .await;
    assert!(refused.starts_with("/schedules?form="), "{refused}");
    let refused = refused.split('&').next().unwrap_or_default().to_string();
    let refused_edit = post(
        r,
        "/fn/schedule/edit",
        &[
            ("name", &s.schedule),
            ("kind", "every"),
            ("expr", &hostile("draft interval")),
            ("back", &schedule_page),
        ],
    )
    .await;
    assert!(refused_edit.contains("form="), "{refused_edit}");
    let refused_edit = refused_edit
        .split('&')
        .next()
        .unwrap_or_default()
        .to_string();
    let odd_zone = format!(
        "{schedule_page}?tz={}",
        deck_app::format::enc(&hostile("zone"))
    );

    let dlq_filter = format!(
        "/dlq/bulk?{}",
        serde_urlencoded::to_string([("source", "dlq".to_string()), ("queue", hostile("queue"))])
            .unwrap()
    );
    let search = format!(
        "/jobs?{}",
        serde_urlencoded::to_string([
            ("source", "dlq".to_string()),
            ("q", hostile("search")),
            ("type", hostile("type filter")),
            ("tag", hostile("tag filter")),
        ])
        .unwrap()
    );

    // Path → the planted fields it must show. One line per page.
    #[rustfmt::skip]
    let pages: Vec<(String, &[&str])> = vec![
        ("/".into(), &["queue", "queue done", "queue retry", "error", "breaker type", "event"]),
        ("/queues".into(), &["queue", "queue done", "queue retry"]),
        ("/queues?q=x&hidden=1".into(), &[]),
        (format!("/queues?q={}", deck_app::format::enc(&hostile("queue"))), &["queue"]),
        ("/jobs".into(), &["queue retry", "type", "retry error"]),
        ("/jobs?source=archive".into(), &["queue done", "type"]),
        ("/jobs?source=dlq".into(), &["queue", "type", "error"]),
        (search, &["search", "type filter", "tag filter"]),
        (format!("/jobs/{dead}"), &["queue", "type", "payload", "error", "error kind", "correlation", "created by", "idempotency tag", "worker"]),
        (format!("/jobs/{archived}"), &["queue done", "result"]),
        (format!("/jobs/{pending}"), &["queue retry", "retry error"]),
        (format!("/jobs/{dead}?edit=1"), &["payload", "queue"]),
        (format!("/jobs/{dead}?edit=1&draft={rejected}"), &["draft payload", "draft priority", "draft queue"]),
        (format!("/jobs/{dead}?draft={review}"), &["diff payload", "diff queue"]),
        (dlq_filter.clone(), &["queue", "error"]),
        (format!("{dlq_filter}&action=purge"), &["queue", "error"]),
        ("/schedules".into(), &["schedule", "schedule queue", "schedule type"]),
        (schedule_page.clone(), &["schedule", "schedule queue", "schedule type", "schedule payload", "schedule tag"]),
        (odd_zone, &["schedule", "zone"]),
        (refused, &["schedule", "draft name", "draft cron", "draft zone", "draft schedule queue", "draft type", "draft schedule payload", "draft schedule tags"]),
        (refused_edit, &["schedule", "draft interval", "schedule queue"]),
        ("/batches".into(), &["batch description", "batch created by"]),
        (format!("/batches/{}", s.batch), &["batch description", "batch created by", "batch queue", "batch type", "batch error", "batch callback queue", "batch callback"]),
        ("/settings".into(), &[]),
        ("/instances".into(), &["instance", "host", "version"]),
        ("/audit".into(), &["audit actor", "audit action", "audit target", "audit detail", "queue", "schedule"]),
    ];
    for (path, fields) in &pages {
        check_page(r, path, fields).await;
    }
    // A schedule that is not there: a 404 that names it, inertly.
    let missing = format!(
        "/schedules/{}",
        deck_app::format::enc(&hostile("no schedule"))
    );
    let (status, html, policy) = get(r, &missing).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{html}");
    assert_inert(&missing, &html, policy_nonce(&policy));
    assert!(shows(&html, "no schedule"), "{html}");
    // Nor a batch id that is not one.
    let missing = format!("/batches/{}", deck_app::format::enc(&hostile("no batch")));
    let (status, html, policy) = get(r, &missing).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{html}");
    assert_inert(&missing, &html, policy_nonce(&policy));
    assert!(shows(&html, "no batch"), "{html}");
    // A hostile "job id" is no job: a 404 whose page shows the text inert.
    let not_an_id = format!("/jobs/{}", deck_app::format::enc(&hostile("not an id")));
    let (status, html, policy) = get(r, &not_an_id).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{html}");
    assert_inert(&not_an_id, &html, policy_nonce(&policy));

    // Last: a bulk run by a hostile filter that matches nothing, and its progress page.
    let filter =
        serde_urlencoded::to_string([("source", "dlq".to_string()), ("q", hostile("bulk filter"))])
            .unwrap();
    let run = post(
        r,
        "/fn/bulk",
        &[
            ("filter", &filter),
            ("action", "purge"),
            ("cap", "1"),
            ("confirm", "PURGE"),
            ("back", "/dlq/bulk"),
        ],
    )
    .await;
    assert!(run.starts_with("/dlq/bulk/"), "{run}");
    let run_page = run.split('?').next().unwrap_or_default();
    check_page(r, run_page, &[]).await;
}

/// The first `tick` the live stream pushes, as `data-live` key → HTML.
async fn first_live_frame(router: &Router) -> serde_json::Map<String, serde_json::Value> {
    let res = router
        .clone()
        .oneshot(
            html_request(Method::GET, "/live", Some(&bearer()))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let mut body = res.into_body().into_data_stream();
    let mut text = String::new();
    while let Some(chunk) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        // One SSE event ends with a blank line.
        if let Some(event) = text.split("\n\n").find(|e| e.contains("event: tick")) {
            let data: String = event
                .lines()
                .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
                .collect::<Vec<_>>()
                .join("\n");
            return serde_json::from_str(&data).unwrap();
        }
    }
    panic!("the live stream ended before its first tick: {text}");
}

#[tokio::test]
async fn live_fragments_through_the_stream_run_nothing() {
    let s = seeded().await;
    let frame = first_live_frame(&s.router).await;
    let mut seen = Vec::new();
    for (key, html) in &frame {
        let html = html.as_str().unwrap_or_default();
        assert_inert(&format!("/live {key}"), html, None);
        seen.extend(
            ["queue", "error", "breaker type", "event"]
                .into_iter()
                .filter(|f| shows(html, f)),
        );
    }
    for field in ["queue", "error", "breaker type", "event"] {
        assert!(
            seen.contains(&field),
            "no live panel shows the planted {field:?}"
        );
    }
}

#[test]
fn live_fragments_rendered_directly_run_nothing() {
    let now = Utc::now();
    let t = deck_app::telemetry_view::Telemetry {
        at: now,
        queues: vec![QueueStats {
            queue: hostile("queue"),
            paused: true,
            // Shown: the overview leaves hidden queues out.
            hidden: false,
            max_workers: Some(1),
            pending: 1,
            scheduled: 1,
            fetched: 1,
            processing: 1,
            succeeded: 1,
            failed: 1,
            lag_avg_ms: 1,
            lag_max_ms: 1,
            lag_warn_secs: None,
            lag_crit_secs: None,
            zombie_timeout_secs: None,
            execution_timeout_secs: None,
        }],
        errors: vec![ErrorGroup {
            fingerprint: "0123456789abcdef".parse().unwrap(),
            reason: FailureReason::Fatal,
            kind: hostile("error kind"),
            job_type: hostile("error type"),
            sample: hostile("error"),
            count: 1,
            last_seen: now,
        }],
        runtime: hostile_runtime(),
        events: hostile_events(),
        ..Default::default()
    };
    let frame = deck_app::live::fragments(&t);
    for field in ["queue", "error", "breaker type", "event"] {
        let hit = frame
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, html)| shows(html.as_str().unwrap_or_default(), field))
            .count();
        assert!(hit > 0, "no fragment shows the planted {field:?}");
    }
    for (key, html) in frame.as_object().unwrap() {
        assert_inert(
            &format!("fragment {key}"),
            html.as_str().unwrap_or_default(),
            None,
        );
    }
}

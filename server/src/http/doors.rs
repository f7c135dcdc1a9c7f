//! One door for every write: an action taken in the console and the same action over the
//! JSON API leave the same audit row and the same events, because both go through the
//! engine's operations layer. Driven through `deck serve`'s router, where both are mounted.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use deck_engine::{
    Engine, EngineConfig, EngineEvent, EnqueueRequest, EventKind, HandlerRegistry, JobId,
    NewAuditEntry, StoreOptions,
};
use deck_web::auth::{Role, UserConfig};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tower::ServiceExt;

use crate::config::Settings;
use crate::state::AppState;

/// `ada:pw-ada`, an operator in both doors.
const ADA: &str = "Basic YWRhOnB3LWFkYQ==";

struct Doors {
    engine: Engine,
    app: Router,
    events: broadcast::Receiver<EngineEvent>,
    _dir: tempfile::TempDir,
}

async fn doors() -> Doors {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("deck.db").display());
    let store = deck_engine::open_store(&url, &StoreOptions::default())
        .await
        .unwrap();
    let config = EngineConfig {
        run_workers: false,
        ..EngineConfig::default()
    };
    let engine = Engine::start(store, HandlerRegistry::new(), config)
        .await
        .unwrap();
    let mut settings = Settings::default();
    settings.auth.users.push(UserConfig {
        name: "ada".into(),
        role: Role::Operator,
        password: Some("pw-ada".into()),
        token: None,
    });
    let events = engine.subscribe_events();
    let app = crate::http::router(AppState::new(engine.clone(), settings));
    Doors {
        engine,
        app,
        events,
        _dir: dir,
    }
}

impl Doors {
    async fn send(&self, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
        let res = self.app.clone().oneshot(req).await.unwrap();
        let (parts, body) = res.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        (
            parts.status,
            parts.headers,
            String::from_utf8_lossy(&body).into_owned(),
        )
    }

    /// A console form post that succeeds.
    async fn console_post(&self, endpoint: &str, form: &str) {
        let (ok, err) = self.console_form(endpoint, form).await;
        assert!(ok.is_some(), "the action succeeded, not: {err:?}");
    }

    /// A console form post, as a browser sends it (session cookie, token, same-site): the
    /// `ok` and `err` flash messages of the page it redirects to.
    async fn console_form(&self, endpoint: &str, form: &str) -> (Option<String>, Option<String>) {
        let page = Request::get("/settings")
            .header(header::AUTHORIZATION, ADA)
            .body(Body::empty())
            .unwrap();
        let (_, headers, _) = self.send(page).await;
        let token = headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix("deck_csrf="))
            .and_then(|v| v.split(';').next())
            .expect("the console sets a CSRF cookie")
            .to_string();
        let post = Request::post(format!("/fn/{endpoint}"))
            .header(header::ACCEPT, "text/html")
            .header(header::AUTHORIZATION, ADA)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::COOKIE, format!("deck_csrf={token}"))
            .header(header::REFERER, "http://127.0.0.1/queues")
            .body(Body::from(format!("csrf={token}&{form}&back=/queues")))
            .unwrap();
        let (status, headers, body) = self.send(post).await;
        let location = headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert_eq!(status, StatusCode::FOUND, "{body}");
        let query = location.split_once('?').map_or("", |(_, q)| q);
        let flash: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap();
        let read = |key: &str| flash.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        (read("ok"), read("err"))
    }

    async fn api_post(&self, path: &str) {
        let req = Request::post(format!("/api/v1{path}"))
            .header(header::AUTHORIZATION, ADA)
            .body(Body::empty())
            .unwrap();
        let (status, _, body) = self.send(req).await;
        assert!(status.is_success(), "{status}: {body}");
    }

    /// The newest audit row, as written (without its id and time).
    async fn last_audit(&self) -> NewAuditEntry {
        let e = self
            .engine
            .store()
            .list_audit(&Default::default(), None, 1)
            .await
            .unwrap()[0]
            .clone();
        NewAuditEntry {
            actor: e.actor,
            action: e.action,
            target: e.target,
            count: e.count,
            detail: e.detail,
        }
    }

    /// The events since the last call, without their times.
    fn events(&mut self) -> Vec<(EventKind, Option<JobId>, Option<String>, String)> {
        let mut out = Vec::new();
        while let Ok(e) = self.events.try_recv() {
            out.push((e.kind, e.job_id, e.queue, e.message));
        }
        out
    }
}

#[tokio::test]
async fn the_console_and_the_api_leave_the_same_audit_row_and_events() {
    let mut d = doors().await;

    // Pause: console, then (after a resume) the API, on the same queue.
    d.console_post("queue/state", "queue=mail&op=pause").await;
    let console_row = d.last_audit().await;
    let console_events = d.events();
    d.engine
        .operations()
        .update_queue(
            "ada",
            "mail",
            deck_engine::QueuePatch {
                paused: Some(false),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    d.events();
    d.api_post("/queues/mail/pause").await;
    assert_eq!(console_row.action, "queue.pause");
    assert_eq!(console_row, d.last_audit().await);
    assert_eq!(console_events, d.events());
    assert!(
        console_events
            .iter()
            .any(|(kind, ..)| *kind == EventKind::QueueChanged),
        "{console_events:?}"
    );

    // Cancel a pending job (its queue is paused, so it stays pending): one per door.
    let enqueue = |n: u32| EnqueueRequest::new("mail", "send", format!("{{\"n\":{n}}}"));
    let first = d.engine.enqueue(enqueue(1)).await.unwrap().id;
    let second = d.engine.enqueue(enqueue(2)).await.unwrap().id;
    d.events();
    d.console_post("job/cancel", &format!("id={first}")).await;
    let console_row = d.last_audit().await;
    let console_events = d.events();
    d.api_post(&format!("/jobs/{second}/cancel")).await;
    let api_row = d.last_audit().await;
    let api_events = d.events();
    assert_eq!(
        (console_row.actor.as_str(), console_row.action.as_str()),
        ("ada", "job.cancel")
    );
    assert_eq!(
        (console_row.target, api_row.target),
        (first.to_string(), second.to_string())
    );
    assert_eq!(
        (console_row.count, console_row.detail),
        (api_row.count, api_row.detail)
    );
    let kinds = |events: &[(EventKind, Option<JobId>, Option<String>, String)]| {
        events.iter().map(|e| e.0).collect::<Vec<_>>()
    };
    assert_eq!(kinds(&console_events), kinds(&api_events));
    assert!(
        console_events
            .iter()
            .any(|(kind, job, ..)| *kind == EventKind::OperatorAction && *job == Some(first)),
        "{console_events:?}"
    );
    d.engine.shutdown().await;
}

#[tokio::test]
async fn quieting_an_instance_is_one_action_from_either_door() {
    let mut d = doors().await;
    let id = d.engine.instance_id().to_string();
    d.events();
    d.console_post("instance/state", &format!("instance={id}&op=quiet"))
        .await;
    let console_row = d.last_audit().await;
    let console_events = d.events();
    d.engine
        .operations()
        .set_instance_quiet("ada", &id, false)
        .await
        .unwrap();
    d.events();
    d.api_post(&format!("/instances/{id}/quiet")).await;
    assert_eq!(
        (console_row.action.as_str(), console_row.target.as_str()),
        ("instance.quiet", id.as_str())
    );
    assert_eq!(console_row, d.last_audit().await);
    assert_eq!(console_events, d.events());
    let listed = d
        .engine
        .store()
        .list_instances(std::time::Duration::from_secs(60))
        .await
        .unwrap();
    assert!(listed.iter().any(|i| i.id == id && i.quiet));

    d.api_post(&format!("/instances/{id}/resume")).await;
    assert_eq!(d.last_audit().await.action, "instance.resume");
    d.engine.shutdown().await;
}

/// One rules table: an integer no store can keep as given is refused by the operations layer,
/// the JSON API and a console form with the same message, and none of them saves anything.
#[tokio::test]
async fn the_three_doors_refuse_an_out_of_range_setting_alike() {
    let d = doors().await;
    let too_many: u32 = 3_000_000_000;
    let from_ops = d
        .engine
        .operations()
        .update_queue(
            "ada",
            "mail",
            deck_engine::QueuePatch {
                max_workers: Some(Some(too_many)),
                ..Default::default()
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        from_ops,
        "invalid max_workers: is 3000000000 (give 1 to 2147483647)"
    );

    let patch = Request::patch("/api/v1/queues/mail")
        .header(header::AUTHORIZATION, ADA)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({ "max_workers": too_many }).to_string()))
        .unwrap();
    let (status, _, body) = d.send(patch).await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["message"], from_ops.as_str(), "{body}");
    assert_eq!(body["error"]["field"], "max_workers", "{body}");

    let (ok, err) = d
        .console_form(
            "queue/limits",
            &format!("queue=mail&max_workers={too_many}"),
        )
        .await;
    assert_eq!((ok, err.as_deref()), (None, Some(from_ops.as_str())));

    let saved = d
        .engine
        .store()
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .find(|q| q.name == "mail")
        .and_then(|q| q.max_workers);
    assert_eq!(saved, None, "nothing was saved");
    d.engine.shutdown().await;
}

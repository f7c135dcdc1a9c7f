//! The schedules pages through the console's real router on a real SQLite store: the list
//! with next and last runs, the create and edit forms (a refused form keeps what was typed
//! and names the field), the actions (each audited under the signed-in operator), and one
//! schedule's page with its next occurrences in the zone asked for.

// Only the console helpers: the inert check's own test runs with `hostile_content`.
mod support {
    pub mod console;
}

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use chrono::Utc;
use deck_app::{ConsoleOptions, Role};
use deck_engine::schedule::{Occurrence, ScheduleFire, Timing, job_for};
use deck_engine::{
    Completion, FireOutcome, JobId, MisfirePolicy, OverlapPolicy, ScheduleDefinition, ScheduleJob,
    ScheduleOrigin, ScheduleSpec, Store,
};
use support::console::{
    assert_empty_list_says, audit, basic, fixture, fixture_with, get, get_as, last_audit,
    password_users, post_as, start_running, texts, texts_in,
};

fn definition(name: &str, cron: &str, zone: &str) -> ScheduleDefinition {
    ScheduleDefinition {
        name: name.into(),
        spec: ScheduleSpec::Cron(cron.into()),
        time_zone: zone.into(),
        job: ScheduleJob {
            queue: "reports".into(),
            job_type: "report.generate".into(),
            payload: r#"{"kind":"daily"}"#.into(),
            priority: 0,
            tags: Vec::new(),
            max_attempts: None,
            expires_after_secs: None,
        },
        misfire: MisfirePolicy::RunOnce,
        overlap: OverlapPolicy::Allow,
    }
}

async fn post(router: &Router, path: &str, form: &[(&str, &str)]) -> String {
    let (status, location) = post_as(router, path, form, None).await;
    assert_eq!(status, StatusCode::FOUND, "{path}: {location}");
    location
}

/// The create form as a browser sends it, with `changes` over a valid schedule.
fn create_form<'a>(changes: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut form = vec![
        ("name", "nightly"),
        ("kind", "cron"),
        ("expr", "0 2 * * *"),
        ("time_zone", "Europe/Berlin"),
        ("queue", "reports"),
        ("job_type", "report.generate"),
        ("payload", "{\"kind\": \"nightly\"}"),
        ("priority", "3"),
        ("tags", "finance, nightly"),
        ("max_attempts", "2"),
        ("expires_after", "600"),
        ("misfire", "run_all"),
        ("misfire_cap", "4"),
        ("overlap", "skip_while_active"),
        ("back", "/schedules"),
    ];
    for (k, v) in changes {
        match form.iter_mut().find(|(name, _)| name == k) {
            Some(pair) => pair.1 = v,
            None => form.push((k, v)),
        }
    }
    form
}

/// The value of the first element `selector` picks, or its text for a textarea.
fn field(html: &str, selector: &str) -> Option<String> {
    let doc = scraper::Html::parse_document(html);
    let sel = scraper::Selector::parse(selector).unwrap();
    doc.select(&sel).next().map(|e| {
        e.value()
            .attr("value")
            .map(str::to_string)
            .unwrap_or_else(|| e.text().collect())
    })
}

/// Claim what `queue` has as worker `w` and finish it as succeeded.
async fn succeed_all(store: &Arc<dyn Store>, queue: &str) -> Vec<JobId> {
    let ids = start_running(store, "w", queue).await;
    store
        .complete(
            "w",
            ids.iter()
                .map(|id| Completion::Succeeded {
                    id: *id,
                    result: None,
                    duration_ms: 1,
                })
                .collect(),
        )
        .await
        .unwrap();
    ids
}

/// The next occurrence as the list shows it, before and after `during` (an occurrence may
/// pass in between): either is right.
fn next_shown(def: &ScheduleDefinition, at: chrono::DateTime<Utc>) -> String {
    let timing = Timing::parse(&def.spec, &def.time_zone).unwrap();
    let next = timing.upcoming(at, 1)[0];
    deck_app::format::zoned(next, &def.time_zone)
}

#[tokio::test]
async fn the_list_shows_each_schedules_next_run_and_its_last_run_linking_to_the_job() {
    let f = fixture().await;
    let def = definition("morning", "0 9 * * *", "Europe/Berlin");
    f.ops.create_schedule("test", def.clone()).await.unwrap();

    let before = next_shown(&def, Utc::now());
    let (status, page) = get(&f.router, "/schedules").await;
    let after = next_shown(&def, Utc::now());
    assert_eq!(status, StatusCode::OK, "{page}");
    let row = r#"tr[data-schedule="morning"]"#;
    let next = texts_in(&page, row, "td.next-run time").join("");
    assert!(
        next == before || next == after,
        "{next} vs {before}: {page}"
    );
    assert!(next.ends_with(" CET") || next.ends_with(" CEST"), "{next}");
    assert!(
        texts_in(&page, row, "td.next-run")[0].contains(" · in "),
        "relative to now"
    );
    assert!(page.contains(r#"href="/schedules/morning""#));
    assert!(page.contains("0 9 * * *") && page.contains("report.generate"));
    assert_eq!(texts_in(&page, row, "td.last-run"), vec!["never run"]);
    assert_eq!(texts_in(&page, row, "[data-state]"), vec!["enabled"]);
    assert_eq!(texts_in(&page, row, "[data-origin]"), vec!["created here"]);

    // A manual run: its job, pending, linked.
    let FireOutcome::Enqueued(first) = f.ops.run_schedule_now("test", "morning").await.unwrap()
    else {
        panic!("run now enqueues");
    };
    let (_, page) = get(&f.router, "/schedules").await;
    let link = format!(r#"{row} td.last-run a.job-link[href="/jobs/{first}"]"#);
    assert_eq!(texts(&page, &link).len(), 1, "{page}");
    assert_eq!(
        texts_in(&page, row, "td.last-run [data-outcome]"),
        vec!["pending"]
    );
    assert!(texts_in(&page, row, "td.last-run")[0].contains("manual"));

    // The job succeeds: the list says so.
    assert_eq!(succeed_all(&f.store, "reports").await, vec![first]);
    let (_, page) = get(&f.router, "/schedules").await;
    assert_eq!(
        texts_in(&page, row, "td.last-run [data-outcome]"),
        vec!["succeeded"]
    );

    // An occurrence skipped by the overlap policy while the last job is still pending.
    let FireOutcome::Enqueued(_) = f.ops.run_schedule_now("test", "morning").await.unwrap() else {
        panic!("run now enqueues");
    };
    let at = Utc::now() - chrono::Duration::seconds(5);
    let skipped = f
        .store
        .fire_schedule(ScheduleFire {
            schedule: "morning".into(),
            occurrences: vec![Occurrence {
                scheduled_at: at,
                job: job_for(&def, at, at),
                job_id: JobId::new(),
            }],
            handled_through: Some(at),
            skip_while_active: true,
            manual: false,
        })
        .await
        .unwrap();
    assert_eq!(skipped, vec![FireOutcome::SkippedOverlap]);
    let (_, page) = get(&f.router, "/schedules").await;
    assert_eq!(
        texts_in(&page, row, "td.last-run [data-outcome]"),
        vec!["skipped (previous still active)"]
    );
    assert!(
        texts_in(&page, row, "td.last-run a.job-link").is_empty(),
        "a skipped run has no job"
    );
}

#[tokio::test]
async fn with_no_schedules_the_list_says_how_to_add_one() {
    let f = fixture().await;
    let hows = [
        "[[schedules]]",
        "deck.toml",
        "the form below",
        "POST /api/v1/schedules",
    ];
    let page = assert_empty_list_says(&f.router, "/schedules", "#no-schedules", &hows).await;
    assert!(page.contains(r#"action="/fn/schedule/create""#));
}

#[tokio::test]
async fn a_bad_cron_expression_is_shown_by_its_field_with_what_was_typed_and_nothing_is_written() {
    let f = fixture().await;
    let form = create_form(&[("expr", "61 * * * *"), ("payload", "{\"typed\": true}")]);
    let location = post(&f.router, "/fn/schedule/create", &form).await;
    assert!(
        location.starts_with("/schedules?form=") && location.contains("err="),
        "{location}"
    );
    assert!(f.store.list_schedules().await.unwrap().is_empty());
    assert!(
        !audit(&f.store)
            .await
            .iter()
            .any(|a| a.action.starts_with("schedule.")),
        "nothing audited"
    );

    let (status, page) = get(&f.router, &location).await;
    assert_eq!(status, StatusCode::OK);
    let problem = r#"#new-schedule #schedule-form-problem[data-field="expr"]"#;
    let shown = texts(&page, problem).join("");
    assert!(shown.starts_with("cron: "), "the engine's field: {shown}");
    assert!(
        shown.contains("\"61 * * * *\" is not a cron expression"),
        "{shown}"
    );
    assert!(shown.contains("e.g. \"*/5 * * * *\""), "the help: {shown}");
    let typed = |name: &str| field(&page, &format!("#new-schedule [name={name}]"));
    assert_eq!(typed("expr").as_deref(), Some("61 * * * *"));
    assert_eq!(typed("name").as_deref(), Some("nightly"));
    assert_eq!(typed("tags").as_deref(), Some("finance, nightly"));
    assert_eq!(typed("payload").as_deref(), Some("{\"typed\": true}"));
    assert_eq!(
        texts(&page, "#new-schedule [name=misfire] option[selected]"),
        vec!["run all, up to the cap"]
    );
    assert_eq!(
        texts(&page, r#"#new-schedule [name=expr][aria-invalid="true"]"#).len(),
        1,
        "the field is marked"
    );

    // A number the form cannot read is shown the same way.
    let location = post(
        &f.router,
        "/fn/schedule/create",
        &create_form(&[("priority", "high")]),
    )
    .await;
    let (_, page) = get(&f.router, &location).await;
    let shown = texts(&page, r#"#schedule-form-problem[data-field="priority"]"#).join("");
    assert!(shown.starts_with("job.priority: "), "{shown}");
    assert!(f.store.list_schedules().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_schedule_is_created_from_the_form_and_audited() {
    let f = fixture().await;
    let location = post(&f.router, "/fn/schedule/create", &create_form(&[])).await;
    assert!(location.starts_with("/schedules/nightly?ok="), "{location}");
    let stored = f.store.list_schedules().await.unwrap();
    assert_eq!(stored.len(), 1);
    let s = &stored[0];
    assert_eq!(s.origin, ScheduleOrigin::Operator);
    assert!(s.enabled);
    let def = &s.definition;
    assert_eq!(def.spec, ScheduleSpec::Cron("0 2 * * *".into()));
    assert_eq!(def.time_zone, "Europe/Berlin");
    assert_eq!(def.job.payload, r#"{"kind":"nightly"}"#);
    assert_eq!(def.job.priority, 3);
    assert_eq!(def.job.tags, vec!["finance".to_string(), "nightly".into()]);
    assert_eq!(def.job.max_attempts, Some(2));
    assert_eq!(def.job.expires_after_secs, Some(600));
    assert_eq!(def.misfire, MisfirePolicy::RunAll { cap: 4 });
    assert_eq!(def.overlap, OverlapPolicy::SkipWhileActive);
    let a = &audit(&f.store).await[0];
    assert_eq!(
        (a.action.as_str(), a.actor.as_str(), a.target.as_str()),
        ("schedule.create", "local", "nightly")
    );
    let (status, page) = get(&f.router, &location).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        texts(&page, ".flash.ok")[0].starts_with("Schedule nightly created; next run "),
        "{page}"
    );
    let (_, log) = get(&f.router, "/audit?action=schedule").await;
    assert_eq!(
        texts(&log, r#"td.target a[href="/schedules/nightly"]"#),
        vec!["nightly"],
        "the audit log links the schedule: {log}"
    );

    // An interval schedule, given as a duration.
    let every = create_form(&[("name", "every-5m"), ("kind", "every"), ("expr", "5m")]);
    post(&f.router, "/fn/schedule/create", &every).await;
    let (_, page) = get(&f.router, "/schedules").await;
    assert!(
        texts(&page, r#"tr[data-schedule="every-5m"] td code"#).contains(&"every 5m".to_string()),
        "{page}"
    );

    // The same name again: the conflict, by the name field, and nothing replaced.
    let again = create_form(&[("expr", "0 3 * * *")]);
    let location = post(&f.router, "/fn/schedule/create", &again).await;
    let (_, page) = get(&f.router, &location).await;
    let shown = texts(&page, r#"#schedule-form-problem[data-field="name"]"#).join("");
    assert!(shown.contains("exists already"), "{shown}");
    assert_eq!(
        field(&page, "#new-schedule [name=expr]").as_deref(),
        Some("0 3 * * *")
    );
    let kept = f.ops.schedule("nightly").await.unwrap();
    assert_eq!(kept.definition.spec, ScheduleSpec::Cron("0 2 * * *".into()));
}

#[tokio::test]
async fn pause_resume_run_now_and_delete_act_and_are_audited() {
    let f = fixture().await;
    f.ops
        .create_schedule("test", definition("hourly", "0 * * * *", "UTC"))
        .await
        .unwrap();

    let location = post(
        &f.router,
        "/fn/schedule/state",
        &[("name", "hourly"), ("op", "pause"), ("back", "/schedules")],
    )
    .await;
    assert!(location.starts_with("/schedules?ok="), "{location}");
    assert!(!f.ops.schedule("hourly").await.unwrap().enabled);
    let a = last_audit(&f.store).await;
    assert_eq!(
        (a.action.as_str(), a.actor.as_str(), a.target.as_str()),
        ("schedule.pause", "local", "hourly")
    );
    let (_, page) = get(&f.router, "/schedules").await;
    let row = r#"tr[data-schedule="hourly"]"#;
    assert_eq!(texts_in(&page, row, "[data-state]"), vec!["paused"]);
    assert_eq!(
        texts_in(&page, row, "button[name=op][value=resume]"),
        vec!["Resume"]
    );

    post(
        &f.router,
        "/fn/schedule/state",
        &[("name", "hourly"), ("op", "resume"), ("back", "/schedules")],
    )
    .await;
    assert!(f.ops.schedule("hourly").await.unwrap().enabled);
    assert_eq!(last_audit(&f.store).await.action, "schedule.resume");

    let location = post(
        &f.router,
        "/fn/schedule/run",
        &[("name", "hourly"), ("back", "/schedules/hourly")],
    )
    .await;
    assert!(location.starts_with("/schedules/hourly?ok="), "{location}");
    let runs = f.store.schedule_runs("hourly", 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert!(runs[0].manual);
    let job = runs[0].job_id.expect("run now enqueues a job");
    let enqueued = f.store.get_job(job).await.unwrap().unwrap();
    assert_eq!(enqueued.queue, "reports");
    assert!(enqueued.tags.contains(&"schedule:hourly".to_string()));
    let a = last_audit(&f.store).await;
    assert_eq!((a.action.as_str(), a.count), ("schedule.run_now", 1));
    let (_, page) = get(&f.router, "/schedules/hourly").await;
    assert_eq!(
        texts(
            &page,
            &format!(r#"#schedule-history a.job-link[href="/jobs/{job}"]"#)
        )
        .len(),
        1,
        "the history links the job: {page}"
    );

    // Delete asks first.
    let location = post(
        &f.router,
        "/fn/schedule/delete",
        &[("name", "hourly"), ("back", "/schedules")],
    )
    .await;
    assert!(location.contains("err="), "{location}");
    assert!(
        f.ops.schedule("hourly").await.is_ok(),
        "not without the box"
    );
    let location = post(
        &f.router,
        "/fn/schedule/delete",
        &[
            ("name", "hourly"),
            ("confirm", "yes"),
            ("back", "/schedules/hourly"),
        ],
    )
    .await;
    assert!(location.starts_with("/schedules?ok="), "{location}");
    assert!(f.store.list_schedules().await.unwrap().is_empty());
    let a = last_audit(&f.store).await;
    assert_eq!(
        (a.action.as_str(), a.target.as_str(), a.count),
        ("schedule.delete", "hourly", 1)
    );
    assert!(
        f.store.get_job(job).await.unwrap().is_some(),
        "its jobs stay"
    );
    let location = post(
        &f.router,
        "/fn/schedule/delete",
        &[
            ("name", "hourly"),
            ("confirm", "yes"),
            ("back", "/schedules"),
        ],
    )
    .await;
    assert!(location.contains("err="), "already gone: {location}");
}

#[tokio::test]
async fn the_schedule_page_lists_five_occurrences_in_the_zone_asked_for() {
    let f = fixture().await;
    // Every day of January at 09:00 in Berlin: always winter time, whenever the test runs.
    let def = definition("january", "0 9 * 1 *", "Europe/Berlin");
    f.ops.create_schedule("test", def.clone()).await.unwrap();
    let timing = Timing::parse(&def.spec, &def.time_zone).unwrap();
    let expected = |zone: &str| {
        let now = Utc::now();
        timing
            .upcoming(now, 5)
            .into_iter()
            .map(|t| deck_app::format::zoned(t, zone))
            .collect::<Vec<_>>()
    };

    let before = expected("Europe/Berlin");
    let (status, page) = get(&f.router, "/schedules/january").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let shown = texts(&page, "#next-occurrences li time");
    assert_eq!(shown.len(), 5, "{page}");
    assert!(
        shown == before || shown == expected("Europe/Berlin"),
        "{shown:?}"
    );
    assert!(
        shown.iter().all(|t| t.ends_with(" 09:00:00 CET")),
        "{shown:?}"
    );
    assert!(shown.iter().all(|t| t.contains("-01-")), "{shown:?}");

    let before = expected("UTC");
    let (_, page) = get(&f.router, "/schedules/january?tz=UTC").await;
    let shown = texts(&page, "#next-occurrences li time");
    assert!(shown == before || shown == expected("UTC"), "{shown:?}");
    assert!(
        shown.iter().all(|t| t.ends_with(" 08:00:00 UTC")),
        "09:00 in Berlin in winter is 08:00 UTC: {shown:?}"
    );
    assert_eq!(field(&page, "#tz-form [name=tz]").as_deref(), Some("UTC"));

    let (status, page) = get(&f.router, "/schedules/january?tz=Mars%2FOlympus").await;
    assert_eq!(status, StatusCode::OK);
    let problem = texts(&page, "#tz-problem").join("");
    assert!(
        problem.contains("\"Mars/Olympus\" is not an IANA time zone")
            && problem.contains("Europe/Berlin"),
        "{problem}"
    );
    let shown = texts(&page, "#next-occurrences li time");
    assert!(
        shown.len() == 5 && shown.iter().all(|t| t.ends_with(" 09:00:00 CET")),
        "back to the schedule's zone: {shown:?}"
    );
}

#[tokio::test]
async fn an_edit_is_saved_and_audited_and_a_refused_one_keeps_what_was_typed() {
    let f = fixture().await;
    f.ops
        .create_schedule("test", definition("nightly", "0 2 * * *", "UTC"))
        .await
        .unwrap();
    let (_, page) = get(&f.router, "/schedules/nightly").await;
    let prefilled = |name: &str| field(&page, &format!("#edit-schedule [name={name}]"));
    assert_eq!(prefilled("expr").as_deref(), Some("0 2 * * *"));
    assert_eq!(prefilled("name").as_deref(), Some("nightly"));
    assert_eq!(prefilled("queue").as_deref(), Some("reports"));
    assert!(page.contains(r#"action="/fn/schedule/edit""#));
    assert!(
        texts(&page, "#declared-note").is_empty(),
        "created here, not declared"
    );

    let mut form = create_form(&[("expr", "0 4 * * *"), ("back", "/schedules/nightly")]);
    let location = post(&f.router, "/fn/schedule/edit", &form).await;
    assert!(location.starts_with("/schedules/nightly?ok="), "{location}");
    let edited = f.ops.schedule("nightly").await.unwrap();
    assert_eq!(
        edited.definition.spec,
        ScheduleSpec::Cron("0 4 * * *".into())
    );
    assert_eq!(edited.definition.time_zone, "Europe/Berlin");
    let a = &audit(&f.store).await[0];
    assert_eq!(
        (a.action.as_str(), a.target.as_str()),
        ("schedule.edit", "nightly")
    );

    form = create_form(&[
        ("time_zone", "Mars/Olympus"),
        ("back", "/schedules/nightly"),
    ]);
    let location = post(&f.router, "/fn/schedule/edit", &form).await;
    assert!(
        location.starts_with("/schedules/nightly?form="),
        "{location}"
    );
    let (_, page) = get(&f.router, &location).await;
    let shown = texts(
        &page,
        r#"#edit-schedule #schedule-form-problem[data-field="time_zone"]"#,
    )
    .join("");
    assert!(shown.contains("is not an IANA time zone"), "{shown}");
    assert_eq!(
        field(&page, "#edit-schedule [name=time_zone]").as_deref(),
        Some("Mars/Olympus")
    );
    assert_eq!(
        f.ops
            .schedule("nightly")
            .await
            .unwrap()
            .definition
            .time_zone,
        "Europe/Berlin",
        "unchanged"
    );
}

#[tokio::test]
async fn a_declared_schedule_says_its_edits_are_replaced_at_the_next_start() {
    let f = fixture().await;
    f.store
        .create_schedule(
            definition("from-toml", "@hourly", "UTC"),
            ScheduleOrigin::Declared,
            true,
        )
        .await
        .unwrap();
    let (_, page) = get(&f.router, "/schedules/from-toml").await;
    let note = texts(&page, "#declared-note").join("");
    assert!(
        note.contains("deck.toml") && note.contains("next start"),
        "{page}"
    );
    let (_, list) = get(&f.router, "/schedules").await;
    assert_eq!(
        texts(&list, r#"tr[data-schedule="from-toml"] [data-origin]"#),
        vec!["declared in deck.toml"]
    );
}

#[tokio::test]
async fn an_unknown_schedule_is_not_found() {
    let f = fixture().await;
    let (status, page) = get(&f.router, "/schedules/no%20such").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{page}");
    assert!(
        texts(&page, "#schedule-not-found")[0].contains("No schedule is named no such"),
        "{page}"
    );
}

#[tokio::test]
async fn names_that_need_escaping_have_working_pages_and_actions() {
    let f = fixture().await;
    for name in ["reports/daily 9:00", "...", "_", "a+b?c#d"] {
        f.ops
            .create_schedule("test", definition(name, "@daily", "UTC"))
            .await
            .unwrap();
        let (_, list) = get(&f.router, "/schedules").await;
        let href = {
            let doc = scraper::Html::parse_document(&list);
            let sel = scraper::Selector::parse(&format!("tr[data-schedule=\"{name}\"] td.name a"))
                .unwrap();
            doc.select(&sel)
                .next()
                .and_then(|a| a.value().attr("href"))
                .unwrap_or_else(|| panic!("{name} is listed: {list}"))
                .to_string()
        };
        let (status, page) = get(&f.router, &href).await;
        assert_eq!(status, StatusCode::OK, "{name} at {href}");
        assert_eq!(
            field(&page, "#edit-schedule [name=name]").as_deref(),
            Some(name)
        );
        // The zone form, submitted as a browser does (its fields replace the action's query).
        let (action, hidden) = {
            let doc = scraper::Html::parse_document(&page);
            let form = scraper::Selector::parse("#tz-form").unwrap();
            let inputs = scraper::Selector::parse("input[type=hidden]").unwrap();
            let form = doc.select(&form).next().expect("the zone form");
            let hidden: Vec<(String, String)> = form
                .select(&inputs)
                .map(|i| {
                    let v = i.value();
                    (
                        v.attr("name").unwrap_or_default().to_string(),
                        v.attr("value").unwrap_or_default().to_string(),
                    )
                })
                .collect();
            (form.value().attr("action").unwrap().to_string(), hidden)
        };
        let mut pairs = hidden;
        pairs.push(("tz".into(), "Asia/Tokyo".into()));
        let zoned = format!("{action}?{}", serde_urlencoded::to_string(&pairs).unwrap());
        let (status, page) = get(&f.router, &zoned).await;
        assert_eq!(status, StatusCode::OK, "{name} at {zoned}");
        assert_eq!(texts(&page, "h1"), vec![format!("Schedule {name}")]);
        let shown = texts(&page, "#next-occurrences li time");
        assert!(
            shown.len() == 5 && shown.iter().all(|t| t.ends_with(" 09:00:00 JST")),
            "{name}: midnight UTC in Tokyo: {shown:?}"
        );
        let location = post(
            &f.router,
            "/fn/schedule/state",
            &[("name", name), ("op", "pause"), ("back", &href)],
        )
        .await;
        assert!(location.contains("ok="), "{name}: {location}");
        assert!(!f.ops.schedule(name).await.unwrap().enabled, "{name}");
    }
}

#[tokio::test]
async fn viewers_see_schedules_without_actions_and_cannot_act() {
    let auth = password_users(&[("eve", Role::Viewer, "pw-eve")]);
    let f = fixture_with(auth, ConsoleOptions::default()).await;
    f.ops
        .create_schedule("test", definition("hourly", "@hourly", "UTC"))
        .await
        .unwrap();
    let eve = basic("eve", "pw-eve");
    let (status, page) = get_as(&f.router, "/schedules", Some(&eve)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains(r#"data-schedule="hourly""#));
    assert!(!page.contains("/fn/schedule/"), "no action forms: {page}");
    assert!(page.contains("Read-only"));
    let (status, _) = post_as(
        &f.router,
        "/fn/schedule/state",
        &[("name", "hourly"), ("op", "pause"), ("back", "/schedules")],
        Some(&eve),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(f.ops.schedule("hourly").await.unwrap().enabled);
}

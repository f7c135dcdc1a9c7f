//! Components render from plain data, without a database: these prove what they show.

use chrono::{Duration, Utc};
use deck_engine::{
    ErrorGroup, FailureReason, Job, JobId, JobState, QueueStats, Summary, ThroughputBucket,
};
use leptos::prelude::*;
use leptos::reactive::owner::Owner;

use crate::components::telemetry::{Cards, ErrorGroups, QueuesTable, ThroughputChart};
use crate::format::pretty_json;
use crate::live::fragments;
use crate::pages::job::JobView;
use crate::telemetry_view::Telemetry;

fn html(f: impl FnOnce() -> AnyView) -> String {
    Owner::new().with(|| f().to_html())
}

fn queue(name: &str, lag_max_ms: u64) -> QueueStats {
    QueueStats {
        queue: name.into(),
        paused: false,
        hidden: false,
        max_workers: Some(4),
        pending: 1_234,
        scheduled: 0,
        fetched: 0,
        processing: 2,
        succeeded: 10,
        failed: 3,
        lag_avg_ms: 100,
        lag_max_ms,
        lag_warn_secs: None,
        lag_crit_secs: Some(60),
        zombie_timeout_secs: None,
        execution_timeout_secs: None,
    }
}

#[test]
fn cards_show_counts_and_rates() {
    let t = Telemetry {
        summary: Summary {
            pending: 1_234_567,
            dlq: 5,
            succeeded_1m: 120,
            failed_5m: 30,
            succeeded_5m: 270,
            ..Summary::default()
        },
        ..Telemetry::default()
    };
    let out = html(|| view! { <Cards t=t/> }.into_any());
    assert!(out.contains("1,234,567"), "{out}");
    assert!(out.contains("2.0/s"), "1 m throughput is 120/60: {out}");
    assert!(out.contains("10.0%"), "failure rate 30/300: {out}");
    assert!(out.contains(r#"data-live="cards""#));
}

#[test]
fn lag_is_coloured_against_the_queue_threshold() {
    let out = html(|| {
        view! { <QueuesTable queues=vec![queue("fast", 1_000), queue("slow", 61_000)]/> }.into_any()
    });
    assert!(out.contains("num lag ok"), "{out}");
    assert!(
        out.contains("num lag crit"),
        "61 s is over the 60 s critical threshold: {out}"
    );
    assert!(!out.contains("data-live"), "not live unless asked");
}

#[test]
fn error_text_is_escaped_everywhere() {
    let groups = vec![ErrorGroup {
        fingerprint: "0123456789abcdef".parse().unwrap(),
        reason: FailureReason::Fatal,
        kind: "<b>kind</b>".into(),
        job_type: "<i>type</i>".into(),
        sample: "<script>alert(1)</script>".into(),
        count: 2,
        last_seen: Utc::now(),
    }];
    let now = Utc::now();
    let out = html(move || view! { <ErrorGroups groups=groups now=now/> }.into_any());
    assert!(!out.contains("<script>alert"), "{out}");
    assert!(
        !out.contains("<b>kind") && !out.contains("<i>type"),
        "{out}"
    );
    assert!(out.contains("&lt;script&gt;"), "{out}");
}

#[test]
fn error_groups_show_their_parts_and_link_to_the_bulk_flow() {
    let groups = vec![ErrorGroup {
        fingerprint: "0123456789abcdef".parse().unwrap(),
        reason: FailureReason::Failed,
        kind: "transient".into(),
        job_type: "email.send".into(),
        sample: "mailbox ann@example.com does not exist".into(),
        count: 90,
        last_seen: Utc::now(),
    }];
    let now = Utc::now();
    let out = html(move || view! { <ErrorGroups groups=groups now=now/> }.into_any());
    for part in [
        "mailbox ann@example.com does not exist",
        "transient",
        "email.send",
        ">90<",
        "Failed",
    ] {
        assert!(out.contains(part), "{part}: {out}");
    }
    for link in [
        "/jobs?source=dlq&amp;group=0123456789abcdef",
        "/dlq/bulk?source=dlq&amp;group=0123456789abcdef&amp;action=resurrect",
        "/dlq/bulk?source=dlq&amp;group=0123456789abcdef&amp;action=purge",
    ] {
        assert!(out.contains(link), "{link}: {out}");
    }
    assert!(out.contains("Resurrect group") && out.contains("Purge group"));
}

#[test]
fn chart_draws_one_bar_group_per_minute() {
    let start = Utc::now() - Duration::minutes(60);
    let buckets: Vec<ThroughputBucket> = (0..60)
        .map(|i| ThroughputBucket {
            minute: start + Duration::minutes(i),
            succeeded: i as u64,
            failed: (i % 7) as u64,
            ..Default::default()
        })
        .collect();
    let out = html(move || view! { <ThroughputChart buckets=buckets/> }.into_any());
    assert_eq!(out.matches("class=\"bar-ok\"").count(), 60);
    assert!(out.contains("<svg"));
    assert!(!out.contains("chart-empty"));
}

#[test]
fn empty_chart_says_how_to_get_data() {
    let out = html(|| view! { <ThroughputChart buckets=Vec::new()/> }.into_any());
    assert!(out.contains("No jobs finished in the last hour"), "{out}");
}

#[test]
fn live_fragments_cover_every_panel() {
    let t = Telemetry {
        queues: vec![queue("q", 0)],
        ..Telemetry::default()
    };
    let f = fragments(&t);
    for key in [
        "cards", "chart", "queues", "errors", "breakers", "events", "warnings",
    ] {
        let html = f[key].as_str().unwrap_or_default();
        assert!(
            html.contains(&format!("data-live=\"{key}\"")),
            "{key}: {html}"
        );
    }
}

#[test]
fn job_view_pretty_prints_and_escapes_the_payload() {
    let now = Utc::now();
    let job = Job {
        id: JobId::new(),
        queue: "emails".into(),
        job_type: "send".into(),
        payload: r#"{"to":"<b>x</b>","n":1}"#.into(),
        tags: vec!["vip".into()],
        priority: 3,
        idempotency_key: None,
        correlation_id: None,
        created_by: None,
        created_at: now,
        scheduled_at: now,
        started_at: Some(now),
        heartbeat_at: None,
        finished_at: Some(now),
        expires_at: None,
        attempt: 3,
        max_attempts: None,
        state: JobState::Dead(FailureReason::Failed),
        worker_id: Some("w-1".into()),
        cancel_requested: false,
        errors: vec![deck_engine::AttemptError {
            attempt: 3,
            at: now,
            kind: "transient".into(),
            message: "smtp <down>".into(),
            started_at: Some(now - chrono::Duration::seconds(2)),
            duration_ms: Some(1_500),
            instance: Some("host-1-abc".into()),
            location: Some("src/mail.rs:12:5".into()),
            ..deck_engine::AttemptError::default()
        }],
        result: None,
        continuation: None,
        original_payload: Some(r#"{"to":"old"}"#.into()),
        batch_id: None,
        trace_context: None,
        error_group: Some("00ff00ff00ff00ff".into()),
    };
    let out = html(move || view! { <JobView job=job editing=false draft=None/> }.into_any());
    assert!(
        out.contains("&quot;to&quot;: &quot;&lt;b&gt;x&lt;/b&gt;&quot;")
            || out.contains("\"to\": \"&lt;b&gt;x&lt;/b&gt;\""),
        "{out}"
    );
    assert!(out.contains("smtp &lt;down&gt;"));
    assert!(out.contains("dead: Failed"));
    // The attempt history: where it ran, for how long, what came of it, where it panicked.
    let attempt = out
        .split("data-attempt=\"3\"")
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .unwrap_or_default();
    assert!(
        attempt.contains("data-outcome=\"dead_lettered\""),
        "{attempt}"
    );
    for part in ["host-1-abc", "1.5 s", "src/mail.rs:12:5", "dead-lettered"] {
        assert!(attempt.contains(part), "{part} in {attempt}");
    }
    assert!(
        out.contains("href=\"/jobs?source=dlq&amp;group=00ff00ff00ff00ff\""),
        "a dead letter links to its error group"
    );
    assert!(
        out.contains("Original payload"),
        "an edited job shows its original"
    );
}

/// A dead job whose payload tries to close the edit form's textarea.
fn job_with_payload(payload: &str) -> Job {
    let now = Utc::now();
    Job {
        id: JobId::new(),
        queue: "emails".into(),
        job_type: "send".into(),
        payload: payload.into(),
        tags: Vec::new(),
        priority: 0,
        idempotency_key: None,
        correlation_id: None,
        created_by: None,
        created_at: now,
        scheduled_at: now,
        started_at: None,
        heartbeat_at: None,
        finished_at: Some(now),
        expires_at: None,
        attempt: 1,
        max_attempts: None,
        state: JobState::Dead(FailureReason::Fatal),
        worker_id: None,
        cancel_requested: false,
        errors: Vec::new(),
        result: None,
        continuation: None,
        original_payload: None,
        batch_id: None,
        trace_context: None,
        error_group: None,
    }
}

/// What a browser puts in the edit form's payload box: the textarea's value as parsed.
fn textarea_value(html: &str) -> String {
    let doc = scraper::Html::parse_fragment(html);
    let sel = scraper::Selector::parse("textarea[name=payload]").unwrap();
    doc.select(&sel)
        .next()
        .map(|t| t.text().collect())
        .unwrap_or_default()
}

#[test]
fn the_edit_form_cannot_be_broken_out_of_and_gives_the_payload_back_unchanged() {
    for payload in [
        r#"{"note":"</textarea><script>window.__pwned=1</script>"}"#,
        r#"{"note":"</TEXTAREA ><img src=x onerror=alert(1)>"}"#,
        r#"{"amp":"&lt; is not <","quote":"\"'"}"#,
        "\nnot JSON, and it starts with a newline",
        "{not json, shown as typed </textarea>",
    ] {
        let job = job_with_payload(payload);
        let out = html(move || view! { <JobView job=job editing=true draft=None/> }.into_any());
        let doc = scraper::Html::parse_fragment(&out);
        for tag in ["script", "img"] {
            let sel = scraper::Selector::parse(tag).unwrap();
            assert_eq!(doc.select(&sel).count(), 0, "{payload}: {out}");
        }
        assert_eq!(
            textarea_value(&out),
            pretty_json(payload),
            "the operator edits exactly the stored payload (not escaped twice): {out}"
        );
    }
}

fn running_job(now: chrono::DateTime<Utc>) -> Job {
    Job {
        id: JobId::new(),
        queue: "reports".into(),
        job_type: "build".into(),
        payload: "{}".into(),
        tags: vec![],
        priority: 0,
        idempotency_key: None,
        correlation_id: None,
        created_by: None,
        created_at: now - Duration::seconds(95),
        scheduled_at: now - Duration::seconds(95),
        started_at: Some(now - Duration::seconds(90)),
        heartbeat_at: Some(now),
        finished_at: None,
        expires_at: None,
        attempt: 1,
        max_attempts: None,
        state: JobState::Processing,
        worker_id: Some("w-1".into()),
        cancel_requested: false,
        errors: vec![],
        result: None,
        continuation: None,
        original_payload: None,
        batch_id: None,
        trace_context: None,
        error_group: None,
    }
}

#[test]
fn a_running_job_shows_its_progress_wait_and_running_time() {
    let now = Utc::now();
    let job = running_job(now);
    let progress = deck_engine::Progress {
        percent: 40,
        message: "page <2> of 5".into(),
        at: now,
    };
    let out = html(move || {
        view! { <JobView job=job editing=false draft=None progress=Some(progress)/> }.into_any()
    });
    assert!(out.contains(r#"<progress max="100" value="40""#), "{out}");
    assert!(
        out.contains("40%") && out.contains("page &lt;2&gt; of 5"),
        "{out}"
    );
    assert!(out.contains("Waited") && out.contains("5.0 s"), "{out}");
    assert!(
        out.contains("Running for") && out.contains("1 m 30 s"),
        "{out}"
    );
}

#[test]
fn a_finished_job_shows_how_long_it_ran_and_no_progress() {
    let now = Utc::now();
    let job = Job {
        state: JobState::Succeeded,
        finished_at: Some(now - Duration::seconds(30)),
        ..running_job(now)
    };
    let out = html(move || view! { <JobView job=job editing=false draft=None/> }.into_any());
    assert!(out.contains("Ran") && out.contains("1 m 0 s"), "{out}");
    assert!(
        !out.contains("Running for") && !out.contains("<progress"),
        "{out}"
    );
}

#[test]
fn a_live_event_about_a_job_links_to_it() {
    use crate::components::telemetry::EventConsole;
    use crate::telemetry_view::{ConsoleEvent, EventLevel};
    let id = JobId::new();
    let events = vec![ConsoleEvent {
        at: Utc::now(),
        level: EventLevel::Warn,
        text: "dead: boom [emails]".into(),
        job_id: Some(id),
    }];
    let out = html(move || view! { <EventConsole events=events/> }.into_any());
    assert!(out.contains(&format!(r#"href="/jobs/{id}""#)), "{out}");
}

#[test]
fn run_times_show_each_job_types_runs_and_percentiles() {
    use crate::pages::queues::RunTimes;
    use deck_engine::RunTimeHistogram;
    use deck_engine::run_time::bin_of;
    use std::sync::Arc;

    let times = Arc::new(vec![
        RunTimeHistogram::from_counts("email.send".into(), [(bin_of(120), 95), (bin_of(3_000), 5)]),
        RunTimeHistogram::from_counts("<img>".into(), [(0, 2)]),
    ]);
    let out = html(move || view! { <RunTimes run_times=Ok(times)/> }.into_any());
    for part in [
        "/jobs?source=archive&amp;type=email.send",
        ">100<",
        "&lt;img&gt;",
        "&lt; 1 ms",
    ] {
        assert!(out.contains(part), "{part}: {out}");
    }
    // p50 and p95 both fall in the bin of 120 ms (95 of 100 runs): [107.6, 128) ms, shown
    // as its geometric middle.
    assert_eq!(out.matches(">117 ms<").count(), 2, "{out}");
    assert!(!out.contains("<img>"), "job types are escaped");
    let none = html(|| view! { <RunTimes run_times=Ok(Arc::new(Vec::new()))/> }.into_any());
    assert!(none.contains("No job finished in the last hour"), "{none}");
}

fn at(s: &str) -> chrono::DateTime<Utc> {
    chrono::DateTime::parse_from_rfc3339(s)
        .unwrap()
        .with_timezone(&Utc)
}

fn schedule(name: &str, cron: &str, zone: &str, enabled: bool) -> deck_engine::Schedule {
    let created = at("2026-12-01T00:00:00Z");
    deck_engine::Schedule {
        definition: deck_engine::ScheduleDefinition {
            name: name.into(),
            spec: deck_engine::ScheduleSpec::Cron(cron.into()),
            time_zone: zone.into(),
            job: deck_engine::ScheduleJob {
                queue: "reports".into(),
                job_type: "report.generate".into(),
                payload: "{}".into(),
                priority: 0,
                tags: vec![],
                max_attempts: None,
                expires_after_secs: None,
            },
            misfire: Default::default(),
            overlap: Default::default(),
        },
        enabled,
        origin: deck_engine::ScheduleOrigin::Operator,
        handled_through: created,
        last_run: None,
        created_at: created,
        updated_at: created,
    }
}

fn run_view(
    name: &str,
    scheduled_at: chrono::DateTime<Utc>,
    outcome: crate::pages::schedules::RunOutcome,
) -> crate::pages::schedules::RunView {
    use crate::pages::schedules::RunOutcome;
    crate::pages::schedules::RunView {
        run: deck_engine::ScheduleRun {
            schedule: name.into(),
            scheduled_at,
            job_id: match &outcome {
                RunOutcome::Skipped => None,
                RunOutcome::Job { id, .. } | RunOutcome::Unread { id, .. } => Some(*id),
            },
            manual: false,
            recorded_at: scheduled_at,
        },
        outcome,
    }
}

#[test]
fn schedule_rows_show_the_next_run_in_their_zone_and_the_last_runs_job() {
    use crate::pages::schedules::{RunOutcome, ScheduleList, ScheduleRow};
    let now = at("2026-12-03T07:57:00Z");
    let dead = JobId::new();
    let rows = vec![
        ScheduleRow {
            schedule: schedule("berlin", "0 9 * * *", "Europe/Berlin", true),
            next: Ok(Some(at("2026-12-03T08:00:00Z"))),
            last: Some(run_view(
                "berlin",
                at("2026-12-02T08:00:00Z"),
                RunOutcome::Job {
                    id: dead,
                    state: Some(JobState::Dead(FailureReason::Fatal)),
                },
            )),
        },
        ScheduleRow {
            schedule: schedule("busy", "* * * * *", "UTC", false),
            next: Ok(Some(at("2026-12-03T07:58:00Z"))),
            last: Some(run_view(
                "busy",
                at("2026-12-03T07:56:00Z"),
                RunOutcome::Skipped,
            )),
        },
    ];
    let out = html(move || view! { <ScheduleList rows=rows now=now can_act=true/> }.into_any());
    for part in [
        ">2026-12-03 09:00:00 CET</time>",
        "in 3 m 0 s",
        &format!(r#"href="/jobs/{dead}""#),
        r#"data-outcome="dead""#,
        "dead: Fatal",
        ">skipped (previous still active)<",
        r#"data-state="paused""#,
        "(paused)",
        r#"value="resume""#,
        r#"action="/fn/schedule/delete""#,
        r#"name="confirm" value="yes" required"#,
    ] {
        assert!(out.contains(part), "{part}: {out}");
    }
    let viewer = html(move || {
        let rows = vec![ScheduleRow {
            schedule: schedule("berlin", "0 9 * * *", "Europe/Berlin", true),
            next: Ok(None),
            last: None,
        }];
        view! { <ScheduleList rows=rows now=now can_act=false/> }.into_any()
    });
    assert!(!viewer.contains("/fn/schedule"), "{viewer}");
    assert!(
        viewer.contains("never again") && viewer.contains("never run"),
        "{viewer}"
    );
}

#[test]
fn the_schedule_page_shows_five_occurrences_in_the_zone_it_is_given() {
    use crate::pages::schedules::detail::ScheduleDetail;
    let now = at("2026-12-03T00:00:00Z");
    let page = |zone: &str| {
        let zone = zone.to_string();
        html(move || {
            view! {
                <ScheduleDetail
                    schedule=schedule("berlin", "0 9 * * *", "Europe/Berlin", true)
                    now=now
                    zone=zone
                    zone_problem=None
                    history=Ok(Vec::new())
                    draft=None
                    can_act=false/>
            }
            .into_any()
        })
    };
    let times = |out: &str| {
        let doc = scraper::Html::parse_fragment(out);
        let sel = scraper::Selector::parse("#next-occurrences li time").unwrap();
        doc.select(&sel)
            .map(|t| t.text().collect::<String>())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        times(&page("UTC")),
        (3..=7)
            .map(|d| format!("2026-12-0{d} 08:00:00 UTC"))
            .collect::<Vec<_>>(),
        "09:00 in Berlin in winter is 08:00 UTC"
    );
    assert_eq!(
        times(&page("Europe/Berlin")),
        (3..=7)
            .map(|d| format!("2026-12-0{d} 09:00:00 CET"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        times(&page("America/New_York"))[0],
        "2026-12-03 03:00:00 EST"
    );
}

#[test]
fn the_schedule_form_marks_the_refused_field_and_gives_back_what_was_typed() {
    use crate::pages::schedules::form::ScheduleFormView;
    use crate::schedule_form::ScheduleForm;
    let typed = r#"{"note":"</textarea><script>window.__pwned=1</script>"#;
    let form = ScheduleForm {
        name: "nightly".into(),
        payload: typed.into(),
        ..ScheduleForm::default()
    };
    let problem = deck_engine::validation::ValidationError::new(
        "job.payload",
        "is not JSON <here>",
        "give a JSON value",
    );
    let out = html(move || {
        view! { <ScheduleFormView endpoint="schedule/create" form=form problem=Some(problem)/> }
            .into_any()
    });
    let doc = scraper::Html::parse_fragment(&out);
    let one = |css: &str| {
        let sel = scraper::Selector::parse(css).unwrap();
        doc.select(&sel).count()
    };
    assert_eq!(one("script"), 0, "{out}");
    assert_eq!(
        one(r#"textarea[name=payload][aria-invalid="true"]"#),
        1,
        "{out}"
    );
    assert_eq!(
        one(r#"[aria-invalid="true"]"#),
        1,
        "only the payload: {out}"
    );
    assert_eq!(
        one(r#"#schedule-form-problem[data-field="payload"]"#),
        1,
        "{out}"
    );
    assert!(out.contains("is not JSON &lt;here&gt;"), "{out}");
    assert!(out.contains("give a JSON value"));
    let sel = scraper::Selector::parse("textarea[name=payload]").unwrap();
    let value: String = doc.select(&sel).next().unwrap().text().collect();
    assert_eq!(value, typed, "exactly as typed");
}

fn batch(total: u32, succeeded: u32, dead: u32) -> deck_engine::Batch {
    use deck_engine::{BatchCallback, BatchCallbacks, BatchId};
    deck_engine::Batch {
        id: BatchId::new(),
        description: Some("<script>alert('batch')</script>".into()),
        created_by: Some("billing <team>".into()),
        created_at: at("2026-12-03T07:00:00Z"),
        total,
        succeeded,
        dead,
        finished_at: (succeeded + dead == total).then(|| at("2026-12-03T07:05:00Z")),
        callbacks: BatchCallbacks {
            on_success: Some(BatchCallback::new("reports", "report.summarize")),
            on_complete: None,
            on_death: Some(BatchCallback::new("alerts", "<b>alert</b>")),
        },
        success_job_id: None,
        complete_job_id: None,
        death_job_id: (dead > 0).then(JobId::new),
    }
}

#[test]
fn batch_rows_say_their_progress_in_words_and_escape_what_producers_wrote() {
    use crate::pages::batches::{BatchList, BatchPageData};
    let running = batch(40, 36, 1);
    let death_job = running.death_job_id.unwrap();
    let data = BatchPageData {
        batches: vec![running, batch(2, 2, 0)],
        older: None,
        paged: false,
    };
    let now = at("2026-12-03T08:00:00Z");
    let out = html(move || view! { <BatchList data=data now=now/> }.into_any());
    for part in [
        ">37 of 40 done, 1 dead<",
        // 36 succeeded, 1 dead, 3 pending of 40: each part its own width and colour.
        r#"aria-label="Batch progress: 37 of 40 done, 1 dead""#,
        r#"<rect x="0" y="0" width="90.0" height="10" class="seg-ok">"#,
        r#"<rect x="90.0" y="0" width="2.5" height="10" class="seg-dead">"#,
        r#"data-state="running""#,
        ">2 of 2 done<",
        r#"data-state="finished""#,
        &format!(r#"href="/jobs/{death_job}""#),
        "not fired",
        "&lt;script&gt;alert('batch')&lt;/script&gt;",
        "billing &lt;team&gt;",
    ] {
        assert!(out.contains(part), "{part}: {out}");
    }
    assert!(!out.contains("<script>"), "{out}");
    assert!(
        out.contains(r#"<caption class="visually-hidden">"#) && out.contains(r#"scope="col""#),
        "a table for screen readers: {out}"
    );
}

#[test]
fn a_batch_page_offers_resurrect_on_dead_members_to_operators_only() {
    use crate::pages::batches::detail::BatchDetail;
    use deck_engine::JobSummary;
    let now = at("2026-12-03T08:00:00Z");
    let summary = |state: JobState, error: Option<&str>| JobSummary {
        id: JobId::new(),
        queue: "invoices".into(),
        job_type: "invoice.send".into(),
        state,
        priority: 0,
        tags: vec![],
        attempt: 1,
        created_at: now,
        scheduled_at: now,
        started_at: None,
        finished_at: None,
        worker_id: None,
        last_error: error.map(str::to_string),
    };
    let dead = summary(
        JobState::Dead(FailureReason::Fatal),
        Some("<img src=x onerror=alert(1)>"),
    );
    let dead_id = dead.id;
    let members = vec![summary(JobState::Pending, None), dead];
    let page = |can_act: bool| {
        let members = members.clone();
        html(move || {
            view! { <BatchDetail batch=batch(2, 0, 1) members=Ok(members) now=now can_act=can_act/> }
                .into_any()
        })
    };
    let operator = page(true);
    assert_eq!(
        operator.matches(r#"action="/fn/job/resurrect""#).count(),
        1,
        "{operator}"
    );
    assert!(operator.contains(&format!(r#"name="id" value="{dead_id}""#)));
    assert!(operator.contains("reopens the batch"));
    assert!(operator.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(!operator.contains("<img"), "{operator}");
    assert!(operator.contains("&lt;b&gt;alert&lt;/b&gt;"), "{operator}");
    let viewer = page(false);
    assert!(!viewer.contains("/fn/job/resurrect"), "{viewer}");
    assert!(viewer.contains("Read-only"), "{viewer}");
}

#[test]
fn a_batch_whose_members_were_all_purged_still_draws_a_valid_bar() {
    use crate::pages::batches::BatchProgress;
    let out = html(|| view! { <BatchProgress batch=batch(0, 0, 0)/> }.into_any());
    assert!(
        out.contains(r#"width="0.0" height="10" class="seg-ok""#),
        "{out}"
    );
    assert!(
        out.contains(r#"width="0.0" height="10" class="seg-dead""#),
        "{out}"
    );
    assert!(out.contains("no members"), "{out}");
}

fn bulk_run(done: u64, finished: bool, error: Option<&str>) -> deck_engine::BulkRun {
    deck_engine::BulkRun {
        id: "r".into(),
        actor: "ops".into(),
        action: deck_engine::BulkAction::Cancel,
        source: deck_engine::Pillar::Hot,
        filter: deck_engine::JobFilter::default(),
        cap: 100_000,
        // The start counted to the list's cap and stopped there.
        matching: 10_000,
        matching_capped: true,
        done,
        finished,
        error: error.map(str::to_string),
        started: Utc::now(),
        finished_at: finished.then(Utc::now),
    }
}

#[test]
fn a_bulk_run_that_finished_short_of_its_cap_shows_a_full_bar() {
    use crate::pages::bulk::RunProgress;
    let show = |run| html(|| view! { <RunProgress run=run list_url=None/> }.into_any());
    let running = show(bulk_run(30_000, false, None));
    assert!(running.contains(r#"value="30""#), "{running}");
    assert!(running.contains("running: 30,000 of 100,000"), "{running}");
    let done = show(bulk_run(30_000, true, None));
    assert!(done.contains(r#"value="100""#), "{done}");
    assert!(done.contains("done: 30,000 job(s)"), "{done}");
    let stopped = show(bulk_run(30_000, true, Some("the database went away")));
    assert!(stopped.contains(r#"value="30""#), "{stopped}");
    assert!(stopped.contains("stopped after 30,000 job(s)"), "{stopped}");
}

#[test]
fn a_traced_job_shows_its_trace_id_and_only_that() {
    let mut job = running_job(Utc::now());
    job.trace_context = Some(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;x=<script>alert(1)</script>"
            .into(),
    );
    let out = html(move || view! { <JobView job=job editing=false draft=None/> }.into_any());
    let doc = scraper::Html::parse_fragment(&out);
    let sel = scraper::Selector::parse("code[data-trace-id]").unwrap();
    let shown: Vec<String> = doc.select(&sel).map(|e| e.text().collect()).collect();
    assert_eq!(shown, ["4bf92f3577b34da6a3ce929d0e0e4736"], "{out}");
    assert!(
        !out.contains("script"),
        "the tracestate is not shown: {out}"
    );

    let untraced = running_job(Utc::now());
    let out = html(move || view! { <JobView job=untraced editing=false draft=None/> }.into_any());
    assert!(!out.contains("Trace id"), "{out}");
}

#[test]
fn an_open_breaker_shows_the_failures_that_opened_it_and_when_it_probes() {
    use crate::components::telemetry::Breakers;
    use crate::telemetry_view::{BreakerState, BreakerView};
    let open = BreakerView {
        job_type: "mail.send".into(),
        state: BreakerState::Open,
        // What the engine reports once open: the window was emptied when it opened.
        recent_failures: 0,
        probe_in_ms: Some(18_000),
        opened_by_failures: Some(5),
        opened_ms_ago: Some(12_000),
        probe_failed: false,
        probe_running: false,
    };
    let reopened = BreakerView {
        job_type: "pdf.render".into(),
        probe_failed: true,
        ..open.clone()
    };
    let closed = BreakerView {
        job_type: "flaky".into(),
        state: BreakerState::Closed,
        recent_failures: 3,
        probe_in_ms: None,
        opened_by_failures: None,
        opened_ms_ago: None,
        probe_failed: false,
        probe_running: false,
    };
    let out = html(|| view! { <Breakers breakers=vec![open, reopened, closed]/> }.into_any());
    assert!(out.contains("5 failures opened it 12.0 s ago"), "{out}");
    assert!(out.contains("in 18.0 s"), "{out}");
    assert!(
        out.contains("reopened 12.0 s ago: the probe failed"),
        "{out}"
    );
    assert!(out.contains("3 recent"), "{out}");
    assert!(
        !out.contains(">0<"),
        "no bare zero for an open breaker: {out}"
    );
}

#[test]
fn an_audit_detail_reads_as_its_fields_without_nulls_and_keeps_the_json() {
    use crate::pages::admin::AuditTable;
    let entry = deck_engine::AuditEntry {
        id: 7,
        at: at("2026-12-05T14:03:07Z"),
        actor: "ops".into(),
        action: "queue.update".into(),
        target: "emails".into(),
        count: 1,
        detail: Some(
            r#"{"max_workers":3,"paused":null,"rate_limit":{"starts":10,"per_secs":null}}"#.into(),
        ),
    };
    let out = html(|| {
        view! { <AuditTable entries=vec![entry] more=false paged=false raw=vec![] filtered=false/> }
            .into_any()
    });
    assert!(out.contains("<dt>max_workers</dt><dd>3</dd>"), "{out}");
    assert!(
        out.contains("<dt>rate_limit.starts</dt><dd>10</dd>"),
        "{out}"
    );
    assert!(
        !out.contains("<dt>paused</dt>"),
        "nulls are left out: {out}"
    );
    assert!(!out.contains("<dt>rate_limit.per_secs</dt>"), "{out}");
    assert!(
        out.contains("<summary>JSON</summary>"),
        "the JSON stays available: {out}"
    );
    assert!(
        out.contains("2026-12-05 14:03:07 UTC"),
        "the time names its zone: {out}"
    );
}

fn instance_row(id: &str, heartbeat_age_secs: i64, held_jobs: u32) -> deck_engine::InstanceInfo {
    let now = Utc::now();
    deck_engine::InstanceInfo {
        id: id.into(),
        host: "box".into(),
        pid: 7,
        version: "0.1.0".into(),
        started_at: now - Duration::seconds(600),
        heartbeat_at: now - Duration::seconds(heartbeat_age_secs),
        workers_total: 100,
        workers_busy: 2,
        kind: deck_engine::InstanceKind::Engine,
        queues: None,
        job_types: None,
        quiet: false,
        held_jobs,
        stopped: false,
    }
}

/// The part of `html` that is the row of instance `id`.
fn row_of<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!(r#"data-instance="{id}""#))
        .unwrap_or_else(|| panic!("no row for {id}: {html}"));
    let rest = &html[start..];
    &rest[..rest.find("</tr>").unwrap_or(rest.len())]
}

#[test]
fn a_lost_instance_shows_its_held_jobs_and_no_controls() {
    use crate::pages::admin::InstanceTable;
    let instances = vec![
        instance_row("worker-live", 2, 2),
        instance_row("worker-killed", 49, 2),
    ];
    let out = html(|| view! { <InstanceTable instances=instances/> }.into_any());
    let live = row_of(&out, "worker-live");
    assert!(!live.contains(r#"data-status="lost""#), "{live}");
    assert!(live.contains("2 / 100"), "{live}");
    assert!(
        live.contains("Read-only"),
        "a live engine has its controls: {live}"
    );

    let lost = row_of(&out, "worker-killed");
    assert!(lost.contains(r#"data-status="lost""#), "{lost}");
    assert!(lost.contains("2 awaiting rescue"), "{lost}");
    assert!(!lost.contains("2 / 100"), "no stale busy count: {lost}");
    assert!(
        !lost.contains("Read-only") && !lost.contains("Quiet"),
        "no controls: {lost}"
    );
    assert!(
        out.contains(r#"role="alert""#),
        "the page says some are lost: {out}"
    );
}

#[test]
fn work_no_instance_takes_is_named_on_the_overview() {
    let t = Telemetry {
        untaken: vec![
            deck_engine::Untaken::Queue {
                queue: "reports".into(),
                pending: 4,
            },
            deck_engine::Untaken::Type {
                queue: "mail".into(),
                job_type: "email.digest".into(),
                pending: 2,
            },
        ],
        ..Telemetry::default()
    };
    let f = fragments(&t);
    let html = f["warnings"].as_str().unwrap_or_default();
    assert!(
        html.contains("no instance serves queue reports (4 pending)"),
        "{html}"
    );
    assert!(
        html.contains("no instance takes type email.digest in queue mail (2 pending)"),
        "{html}"
    );
    assert!(html.contains("queue=reports"), "links to the jobs: {html}");
    let none = fragments(&Telemetry::default());
    let empty = none["warnings"].as_str().unwrap_or_default();
    assert!(!empty.contains("flash"), "nothing to warn about: {empty}");
    assert!(
        empty.contains(r#"data-live="warnings""#),
        "a place for later warnings"
    );
}

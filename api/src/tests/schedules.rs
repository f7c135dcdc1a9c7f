//! Schedules over HTTP: a schedule's life through every endpoint, the input the engine and
//! the API refuse (each naming its field), and who may change schedules.

use super::*;

fn daily_report() -> Value {
    // January only, so every occurrence falls in winter: 09:00 in Berlin is 08:00Z.
    json!({
        "name": "daily-report",
        "cron": "0 9 * 1 *",
        "time_zone": "Europe/Berlin",
        "job": {"queue": "reports", "type": "echo", "payload": {"n": 1}, "tags": ["daily"]},
    })
}

impl Harness {
    async fn put(&self, uri: &str, body: Value) -> Reply {
        self.call(Method::PUT, uri, Some(body)).await
    }

    async fn delete(&self, uri: &str) -> Reply {
        self.call(Method::DELETE, uri, None).await
    }
}

#[tokio::test]
async fn a_schedule_is_created_read_run_paused_edited_and_deleted_over_http() {
    let h = harness().await;
    let r = h.post("/api/v1/schedules", daily_report()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let created = r.body;
    assert_eq!(created["name"], "daily-report");
    assert_eq!(
        (&created["cron"], &created["every_secs"]),
        (&json!("0 9 * 1 *"), &Value::Null)
    );
    assert_eq!(created["time_zone"], "Europe/Berlin");
    assert_eq!(
        created["job"],
        json!({"queue": "reports", "type": "echo", "payload": {"n": 1}, "priority": 0,
               "tags": ["daily"], "max_attempts": null, "expires_after_secs": null}),
        "the payload is a JSON value, as on enqueue"
    );
    assert_eq!(created["misfire"], json!({"policy": "run_once"}));
    assert_eq!(created["overlap"], "allow");
    assert_eq!(
        (&created["enabled"], &created["origin"]),
        (&json!(true), &json!("operator"))
    );
    assert_eq!(created["last_run"], Value::Null);
    let next_run = created["next_run"].as_str().expect("a next run");
    assert!(next_run.ends_with("T08:00:00Z"), "{next_run}");

    let list = h.get("/api/v1/schedules").await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["schedules"], json!([created]));

    let r = h
        .get("/api/v1/schedules/daily-report?tz=Europe/Berlin&count=3")
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["upcoming_time_zone"], "Europe/Berlin");
    let upcoming = r.body["upcoming"].as_array().unwrap();
    assert_eq!(upcoming.len(), 3, "{}", r.body);
    assert_eq!(upcoming[0]["at"], created["next_run"]);
    for o in upcoming {
        let (at, local) = (o["at"].as_str().unwrap(), o["local"].as_str().unwrap());
        assert!(at.ends_with("T08:00:00Z"), "{o}");
        assert!(local.ends_with("T09:00:00+01:00"), "{o}");
        assert_eq!(&at[..10], &local[..10], "{o}");
    }
    // Shown in another zone: the same instants, that zone's wall clock; five by default.
    let r = h
        .get("/api/v1/schedules/daily-report?tz=America/New_York")
        .await;
    let upcoming = r.body["upcoming"].as_array().unwrap();
    assert_eq!(upcoming.len(), 5);
    assert!(
        upcoming[0]["local"]
            .as_str()
            .unwrap()
            .ends_with("T03:00:00-05:00"),
        "{}",
        r.body
    );
    let r = h.get("/api/v1/schedules/daily-report").await;
    assert_eq!(
        r.body["upcoming_time_zone"], "Europe/Berlin",
        "its own zone"
    );

    // Run now: a job, readable as any other, from the schedule's template.
    let r = h
        .post("/api/v1/schedules/daily-report/run", json!(null))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(r.body["outcome"], "enqueued");
    let job_id = r.body["job_id"].as_str().unwrap().to_string();
    let job = h.get(&format!("/api/v1/jobs/{job_id}?wait=30s")).await;
    assert_eq!(job.status, StatusCode::OK, "{}", job.body);
    assert_eq!(job.body["state"], "succeeded", "{}", job.body);
    assert_eq!(
        (&job.body["queue"], &job.body["type"], &job.body["payload"]),
        (&json!("reports"), &json!("echo"), &json!({"n": 1}))
    );
    assert_eq!(job.body["tags"], json!(["daily", "schedule:daily-report"]));
    assert_eq!(job.body["created_by"], "schedule daily-report");

    let r = h
        .post("/api/v1/schedules/daily-report/pause", json!(null))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        (&r.body["enabled"], &r.body["next_run"]),
        (&json!(false), &Value::Null),
        "a paused schedule has no next run"
    );
    let r = h
        .post("/api/v1/schedules/daily-report/resume", json!(null))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["enabled"], true);
    assert!(r.body["next_run"].is_string());

    // Replace: the path names it; the body's name may be left out, or be the same.
    let edit = json!({
        "every_secs": 3600,
        "job": {"queue": "reports", "type": "echo", "max_attempts": 3},
        "misfire": {"policy": "run_all", "cap": 10},
        "overlap": "skip_while_active",
    });
    let r = h.put("/api/v1/schedules/daily-report", edit.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        (&r.body["cron"], &r.body["every_secs"]),
        (&Value::Null, &json!(3600))
    );
    assert_eq!(r.body["time_zone"], "UTC", "absent is UTC");
    assert_eq!(r.body["misfire"], json!({"policy": "run_all", "cap": 10}));
    assert_eq!(r.body["overlap"], "skip_while_active");
    assert_eq!(r.body["job"]["payload"], Value::Null);
    assert_eq!(r.body["job"]["max_attempts"], 3);
    assert!(r.body["next_run"].as_str().unwrap().ends_with(":00:00Z"));
    assert!(
        r.body["last_run"]["manual"].as_bool().unwrap(),
        "state stays"
    );
    let mut same_name = edit.clone();
    same_name["name"] = json!("daily-report");
    let r = h.put("/api/v1/schedules/daily-report", same_name).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let mut other_name = edit.clone();
    other_name["name"] = json!("weekly-report");
    let r = h.put("/api/v1/schedules/daily-report", other_name).await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (StatusCode::BAD_REQUEST, "name_mismatch", "name")
    );
    let r = h.put("/api/v1/schedules/weekly-report", edit.clone()).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "schedule_not_found")
    );

    let r = h.get("/api/v1/schedules/daily-report/runs").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let runs = r.body["runs"].as_array().unwrap();
    let manual = runs
        .iter()
        .find(|run| run["manual"] == true)
        .expect("the manual run is in the history");
    assert_eq!(manual["job_id"], json!(job_id));
    let r = h.get("/api/v1/schedules/daily-report/runs?limit=1").await;
    assert_eq!(r.body["runs"].as_array().unwrap().len(), 1);

    let r = h.delete("/api/v1/schedules/daily-report").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(r.body, Value::Null);
    for r in [
        h.get("/api/v1/schedules/daily-report").await,
        h.get("/api/v1/schedules/daily-report/runs").await,
        h.delete("/api/v1/schedules/daily-report").await,
        h.post("/api/v1/schedules/daily-report/run", json!(null))
            .await,
        h.post("/api/v1/schedules/daily-report/pause", json!(null))
            .await,
    ] {
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::NOT_FOUND, "schedule_not_found"),
            "{}",
            r.body
        );
    }
    assert_eq!(
        h.get(&format!("/api/v1/jobs/{job_id}")).await.status,
        StatusCode::OK,
        "the jobs it enqueued stay"
    );

    let actions: Vec<(String, String, String)> = h.audit_actions().await;
    for action in [
        "schedule.create",
        "schedule.run_now",
        "schedule.pause",
        "schedule.resume",
        "schedule.edit",
        "schedule.delete",
    ] {
        assert!(
            actions.iter().any(|(actor, a, target)| a == action
                && actor == "anonymous"
                && target == "daily-report"),
            "{action} in {actions:?}"
        );
    }
    h.finish().await;
}

#[tokio::test]
async fn bad_schedules_are_refused_with_the_field_at_fault() {
    let h = harness().await;
    let with = |changes: Value| {
        let mut body = daily_report();
        for (k, v) in changes.as_object().unwrap() {
            if v.is_null() {
                body.as_object_mut().unwrap().remove(k);
            } else {
                body[k] = v.clone();
            }
        }
        body
    };
    let job = |changes: Value| {
        let mut job = daily_report()["job"].clone();
        for (k, v) in changes.as_object().unwrap() {
            job[k] = v.clone();
        }
        json!({ "job": job })
    };
    for (body, code, field) in [
        (with(json!({"cron": "* * *"})), "invalid_field", "cron"),
        (with(json!({"cron": "61 * * * *"})), "invalid_field", "cron"),
        (with(json!({"cron": "0 0 30 2 *"})), "invalid_field", "cron"),
        (
            with(json!({"time_zone": "Mars/Olympus_Mons"})),
            "invalid_field",
            "time_zone",
        ),
        (
            with(json!({"every_secs": 60})),
            "invalid_field",
            "every_secs",
        ),
        (
            with(json!({"cron": null, "every_secs": 0})),
            "invalid_field",
            "every_secs",
        ),
        (
            with(json!({"cron": null, "every_secs": 31_622_401})),
            "invalid_field",
            "every_secs",
        ),
        (with(json!({"cron": null})), "invalid_field", "cron"),
        (with(json!({"name": " padded"})), "invalid_field", "name"),
        (with(json!({"name": null})), "missing_field", "name"),
        (with(job(json!({"type": ""}))), "invalid_field", "job.type"),
        (
            with(job(json!({"queue": ""}))),
            "invalid_field",
            "job.queue",
        ),
        (
            with(job(json!({"max_attempts": 0}))),
            "invalid_field",
            "job.max_attempts",
        ),
        (
            with(job(json!({"max_attempts": 2_147_483_648_u64}))),
            "invalid_field",
            "job.max_attempts",
        ),
        (
            with(job(json!({"expires_after_secs": 0}))),
            "invalid_field",
            "job.expires_after_secs",
        ),
        (
            with(job(json!({"tags": ["a,b"]}))),
            "invalid_field",
            "job.tags[0]",
        ),
        (
            with(job(json!({"colour": "red"}))),
            "unknown_field",
            "job.colour",
        ),
        (
            with(json!({"misfire": {"policy": "run_all", "cap": 0}})),
            "invalid_field",
            "misfire.cap",
        ),
        (
            with(json!({"misfire": {"policy": "skip", "cap": 3}})),
            "invalid_value",
            "misfire",
        ),
        (
            with(json!({"misfire": {"policy": "run_all"}})),
            "invalid_value",
            "misfire",
        ),
        (
            with(json!({"misfire": ["run_all", 3]})),
            "invalid_value",
            "misfire",
        ),
        (
            with(json!({"overlap": "sometimes"})),
            "invalid_value",
            "overlap",
        ),
        (with(json!({"job": "echo"})), "invalid_value", "job"),
        (with(json!({"job": null})), "missing_field", "job"),
        (with(json!({"colour": "red"})), "unknown_field", "colour"),
    ] {
        let r = h.post("/api/v1/schedules", body.clone()).await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (StatusCode::BAD_REQUEST, code, field),
            "{body}: {}",
            r.body
        );
    }
    assert_eq!(
        h.get("/api/v1/schedules").await.body["schedules"],
        json!([]),
        "nothing was written"
    );

    let r = h.post("/api/v1/schedules", daily_report()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = h.post("/api/v1/schedules", daily_report()).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "schedule_exists"),
        "{}",
        r.body
    );
    // A replace is checked as a create is.
    let r = h
        .put(
            "/api/v1/schedules/daily-report",
            with(json!({"name": null, "cron": "* * *"})),
        )
        .await;
    assert_eq!((r.status, r.field()), (StatusCode::BAD_REQUEST, "cron"));
    // An empty expression is none (the document says `minLength: 1`).
    let r = h
        .put(
            "/api/v1/schedules/daily-report",
            with(json!({"name": null, "cron": ""})),
        )
        .await;
    assert_eq!((r.status, r.field()), (StatusCode::BAD_REQUEST, "cron"));
    // `?tz=` (a form with no zone chosen) is as if absent: the schedule's own zone.
    let r = h.get("/api/v1/schedules/daily-report?tz=").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["upcoming_time_zone"], "Europe/Berlin");

    for (query, field) in [
        ("tz=Nowhere/Special", "tz"),
        ("tz=utc", "tz"),
        ("count=0", "count"),
        ("count=51", "count"),
    ] {
        let r = h
            .get(&format!("/api/v1/schedules/daily-report?{query}"))
            .await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (StatusCode::BAD_REQUEST, "invalid_field", field),
            "{query}: {}",
            r.body
        );
    }
    let r = h.get("/api/v1/schedules/daily-report?count=many").await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "invalid_query")
    );
    let r = h
        .get("/api/v1/schedules/daily-report?count=50&tz=UTC")
        .await;
    assert_eq!(r.body["upcoming"].as_array().unwrap().len(), 50);
    for limit in ["0", "501"] {
        let r = h
            .get(&format!(
                "/api/v1/schedules/daily-report/runs?limit={limit}"
            ))
            .await;
        assert_eq!(
            (r.status, r.field()),
            (StatusCode::BAD_REQUEST, "limit"),
            "{}",
            r.body
        );
    }
    let r = h.post("/api/v1/schedules/%20x/pause", json!(null)).await;
    assert_eq!(
        (r.status, r.code(), r.field()),
        (StatusCode::BAD_REQUEST, "invalid_field", "name")
    );
    h.finish().await;
}

#[tokio::test]
async fn viewers_read_schedules_but_cannot_change_them() {
    let h =
        harness_with(|e| as_user(router(ApiState::new(e, nobody())), "vic", Role::Viewer)).await;
    h.engine
        .operations()
        .create_schedule(
            "setup",
            echo_schedule("nightly", deck_engine::ScheduleSpec::EverySecs(86_400)),
        )
        .await
        .unwrap();
    let before = h.audit_actions().await;
    for uri in [
        "/api/v1/schedules",
        "/api/v1/schedules/nightly",
        "/api/v1/schedules/nightly/runs",
    ] {
        assert_eq!(h.get(uri).await.status, StatusCode::OK, "{uri}");
    }
    let body = daily_report();
    for (method, uri, body) in [
        (Method::POST, "/api/v1/schedules", Some(body.clone())),
        (Method::PUT, "/api/v1/schedules/nightly", Some(body)),
        (Method::POST, "/api/v1/schedules/nightly/pause", None),
        (Method::POST, "/api/v1/schedules/nightly/resume", None),
        (Method::POST, "/api/v1/schedules/nightly/run", None),
        (Method::DELETE, "/api/v1/schedules/nightly", None),
    ] {
        let r = h.call(method.clone(), uri, body).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{method} {uri}"
        );
    }
    let r = h.get("/api/v1/schedules").await;
    let listed = r.body["schedules"].as_array().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["enabled"], true);
    assert_eq!(listed[0]["last_run"], Value::Null);
    assert_eq!(h.audit_actions().await, before, "nothing was done");
    h.nothing_written().await;
    h.finish().await;
}

#[tokio::test]
async fn operators_change_schedules_under_their_name() {
    let h =
        harness_with(|e| as_user(router(ApiState::new(e, nobody())), "olga", Role::Operator)).await;
    let r = h.post("/api/v1/schedules", daily_report()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = h
        .post("/api/v1/schedules/daily-report/run", json!(null))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    let actions = h.audit_actions().await;
    for action in ["schedule.create", "schedule.run_now"] {
        assert!(
            actions.contains(&("olga".into(), action.into(), "daily-report".into())),
            "{action} in {actions:?}"
        );
    }
    h.finish().await;
}

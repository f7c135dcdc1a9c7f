//! The schedule parts of the document: the timing rule, the bounds, the closed misfire
//! policies, the named formats `contract/hooks.py` generates, and schedule names.

use super::*;

fn schedule(changes: Value) -> Value {
    let mut body = json!({
        "name": "doc-schedule",
        "cron": "0 9 * * *",
        "job": {"queue": "q", "type": "echo"},
    });
    for (k, v) in changes.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

#[tokio::test]
async fn a_schedule_has_exactly_one_timing_in_the_document_too() {
    let h = harness().await;
    let doc = document(&h).await;
    for name in ["NewSchedule", "ScheduleEdit", "Schedule"] {
        let parts = doc["components"]["schemas"][name]["allOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} is all of its fields and the timing rule"));
        let one_of = parts
            .iter()
            .find_map(|p| p["oneOf"].as_array())
            .expect("a oneOf stating the rule");
        let mut given: Vec<(&str, &str)> = one_of
            .iter()
            .map(|alt| {
                let required = alt["required"].as_array().unwrap();
                assert_eq!(required.len(), 1, "{alt}");
                let field = required[0].as_str().unwrap();
                (field, alt["properties"][field]["type"].as_str().unwrap())
            })
            .collect();
        given.sort();
        assert_eq!(
            given,
            [("cron", "string"), ("every_secs", "integer")],
            "{name}"
        );
    }
    // Absent and null are alike; one of the two, not both, not neither.
    for (n, (body, ok)) in [
        (json!({"every_secs": null}), true),
        (json!({"cron": null, "every_secs": 60}), true),
        (json!({"every_secs": 60}), false),
        (json!({"cron": null}), false),
        (json!({"cron": null, "every_secs": null}), false),
    ]
    .into_iter()
    .enumerate()
    {
        let body = schedule(json!({"name": format!("timing-{n}")}))
            .as_object()
            .unwrap()
            .clone()
            .into_iter()
            .chain(body.as_object().unwrap().clone())
            .collect::<serde_json::Map<_, _>>();
        let r = h
            .post("/api/v1/schedules", Value::Object(body.clone()))
            .await;
        let expected = if ok {
            StatusCode::CREATED
        } else {
            StatusCode::BAD_REQUEST
        };
        assert_eq!(r.status, expected, "{body:?}: {}", r.body);
    }
    // Read back: one set, the other null.
    let listed = h.get("/api/v1/schedules").await.body;
    for s in listed["schedules"].as_array().unwrap() {
        assert!(s["cron"].is_null() != s["every_secs"].is_null(), "{s}");
    }
    h.finish().await;
}

#[tokio::test]
async fn schedule_limits_in_the_document_are_the_ones_enforced() {
    use crate::limits::{MAX_RUNS, MAX_UPCOMING};
    use deck_engine::schedule::{MAX_EXPIRES_AFTER_SECS, MAX_INTERVAL_SECS, MAX_MISFIRE_CAP};

    let h = harness().await;
    let doc = document(&h).await;
    let stored = u64::from(MAX_STORED_INT);
    let cap = doc["components"]["schemas"]["Misfire"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["properties"]["policy"]["enum"] == json!(["run_all"]))
        .map(|p| p["properties"]["cap"].clone())
        .unwrap();
    for (what, p, max) in [
        (
            "every_secs",
            property(&doc, "NewSchedule", "every_secs").clone(),
            MAX_INTERVAL_SECS,
        ),
        (
            "every_secs",
            property(&doc, "ScheduleEdit", "every_secs").clone(),
            MAX_INTERVAL_SECS,
        ),
        (
            "job.expires_after_secs",
            property(&doc, "ScheduleJob", "expires_after_secs").clone(),
            MAX_EXPIRES_AFTER_SECS,
        ),
        (
            "job.max_attempts",
            property(&doc, "ScheduleJob", "max_attempts").clone(),
            stored,
        ),
        ("misfire.cap", cap, u64::from(MAX_MISFIRE_CAP)),
    ] {
        assert_eq!(
            (p["minimum"].as_u64(), p["maximum"].as_u64()),
            (Some(1), Some(max)),
            "{what}: {p}"
        );
    }
    let params = |path: &str| doc["paths"][path]["get"]["parameters"].clone();
    for (path, name, max) in [
        ("/api/v1/schedules/{name}", "count", MAX_UPCOMING),
        ("/api/v1/schedules/{name}/runs", "limit", MAX_RUNS),
    ] {
        let p = params(path)
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .cloned()
            .unwrap();
        assert_eq!(
            (
                p["schema"]["minimum"].as_u64(),
                p["schema"]["maximum"].as_u64()
            ),
            (Some(1), Some(u64::from(max))),
            "{path} {name}"
        );
    }

    // The bounds pass, one past them is refused, naming the field.
    let job = |field: &str, v: u64| json!({"job": {"queue": "q", "type": "echo", field: v}});
    let mut n = 0;
    for (changes, field, ok) in [
        (json!({"cron": null, "every_secs": 1}), "every_secs", true),
        (
            json!({"cron": null, "every_secs": MAX_INTERVAL_SECS}),
            "every_secs",
            true,
        ),
        (
            json!({"cron": null, "every_secs": MAX_INTERVAL_SECS + 1}),
            "every_secs",
            false,
        ),
        (
            job("expires_after_secs", MAX_EXPIRES_AFTER_SECS),
            "job.expires_after_secs",
            true,
        ),
        (
            job("expires_after_secs", MAX_EXPIRES_AFTER_SECS + 1),
            "job.expires_after_secs",
            false,
        ),
        (job("max_attempts", stored), "job.max_attempts", true),
        (job("max_attempts", stored + 1), "job.max_attempts", false),
        (
            json!({"misfire": {"policy": "run_all", "cap": MAX_MISFIRE_CAP}}),
            "misfire.cap",
            true,
        ),
        (
            json!({"misfire": {"policy": "run_all", "cap": MAX_MISFIRE_CAP + 1}}),
            "misfire.cap",
            false,
        ),
    ] {
        n += 1;
        let mut body = schedule(changes.clone());
        body["name"] = json!(format!("limits-{n}"));
        let r = h.post("/api/v1/schedules", body).await;
        if ok {
            assert_eq!(r.status, StatusCode::CREATED, "{changes}: {}", r.body);
        } else {
            assert_eq!(
                (r.status, r.field()),
                (StatusCode::BAD_REQUEST, field),
                "{changes}: {}",
                r.body
            );
        }
    }
    for (query, ok) in [
        ("count=1", true),
        (&format!("count={MAX_UPCOMING}"), true),
        (&format!("count={}", MAX_UPCOMING + 1), false),
    ] {
        let r = h.get(&format!("/api/v1/schedules/limits-1?{query}")).await;
        assert_eq!(r.status == StatusCode::OK, ok, "{query}: {}", r.body);
    }
    for (query, ok) in [
        ("limit=1", true),
        (&format!("limit={MAX_RUNS}"), true),
        (&format!("limit={}", MAX_RUNS + 1), false),
    ] {
        let r = h
            .get(&format!("/api/v1/schedules/limits-1/runs?{query}"))
            .await;
        assert_eq!(r.status == StatusCode::OK, ok, "{query}: {}", r.body);
    }
    h.finish().await;
}

#[tokio::test]
async fn a_misfire_policy_is_a_closed_object() {
    let h = harness().await;
    let doc = document(&h).await;
    let policies = doc["components"]["schemas"]["Misfire"]["oneOf"]
        .as_array()
        .unwrap();
    let mut names: Vec<&str> = policies
        .iter()
        .map(|p| {
            assert_eq!(p["additionalProperties"], false, "{p}");
            p["properties"]["policy"]["enum"][0].as_str().unwrap()
        })
        .collect();
    names.sort();
    assert_eq!(names, ["run_all", "run_once", "skip"]);
    for (n, (misfire, ok)) in [
        (json!({"policy": "run_once"}), true),
        (json!({"policy": "skip"}), true),
        (json!({"policy": "run_all", "cap": 3}), true),
        (json!({"policy": "run_once", "cap": 3}), false),
        (json!({"policy": "run_all"}), false),
        (json!({"policy": "skip", "when": "never"}), false),
        (json!({}), false),
    ]
    .into_iter()
    .enumerate()
    {
        let body = schedule(json!({"name": format!("misfire-{n}"), "misfire": misfire}));
        let r = h.post("/api/v1/schedules", body).await;
        assert_eq!(r.status.is_success(), ok, "{misfire}: {}", r.body);
        if ok {
            assert_eq!(r.body["misfire"], misfire, "read back as sent");
        }
    }
    h.finish().await;
}

/// Cron expressions and zone names are named formats: JSON Schema cannot state croner's
/// grammar, so the server checks them and the contract test generates valid ones.
#[tokio::test]
async fn cron_and_zone_formats_are_the_ones_the_contract_test_generates() {
    use crate::limits::{CRON_FORMAT, TIME_ZONE_FORMAT};

    let h = harness().await;
    let doc = document(&h).await;
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["CronExpr"]["format"], CRON_FORMAT);
    assert_eq!(
        schemas["CronExpr"]["minLength"], 1,
        "an empty expression is refused"
    );
    assert_eq!(schemas["TimeZone"]["format"], TIME_ZONE_FORMAT);
    // The names the server takes, exactly: any other is refused, and the document says so.
    let listed: Vec<&str> = schemas["TimeZone"]["enum"]
        .as_array()
        .expect("TimeZone lists its names")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        deck_engine::schedule::zone_names().collect::<Vec<_>>()
    );
    assert_eq!(
        non_null(&doc, property(&doc, "NewSchedule", "cron")),
        &schemas["CronExpr"]
    );
    for (schema, field) in [
        ("NewSchedule", "time_zone"),
        ("ScheduleEdit", "time_zone"),
        ("ScheduleDetail", "upcoming_time_zone"),
    ] {
        assert_eq!(
            resolve(&doc, property(&doc, schema, field)),
            &schemas["TimeZone"],
            "{schema}.{field}"
        );
    }
    let tz = doc["paths"]["/api/v1/schedules/{name}"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "tz")
        .unwrap();
    // `?tz=` takes a zone name or nothing (empty is as if absent).
    let tz_query = resolve(&doc, &tz["schema"]);
    assert_eq!(tz_query, &schemas["TimeZoneQuery"]);
    let choices = tz_query["oneOf"].as_array().expect("a zone or empty");
    assert_eq!(resolve(&doc, &choices[0]), &schemas["TimeZone"]);
    assert_eq!(choices[1]["enum"], json!([""]));
    let hooks = include_str!("../../../../contract/hooks.py");
    for format in [CRON_FORMAT, TIME_ZONE_FORMAT] {
        assert!(
            hooks.contains(&format!("schemathesis.openapi.format(\"{format}\"")),
            "contract/hooks.py generates {format}"
        );
    }
    // Every zone the hooks draw is one the server knows.
    let zones = hooks
        .split("ZONES = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap();
    let mut n = 0;
    for zone in zones.split(',').map(|z| z.trim().trim_matches('"')) {
        if zone.is_empty() {
            continue;
        }
        n += 1;
        let body = schedule(json!({"name": format!("zone-{n}"), "time_zone": zone}));
        let r = h.post("/api/v1/schedules", body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{zone}: {}", r.body);
    }
    assert!(n > 5);
    h.finish().await;
}

#[tokio::test]
async fn schedule_names_are_names_other_than_dots() {
    use deck_engine::ScheduleSpec;
    use deck_engine::schedule::validate_definition;

    let h = harness().await;
    let doc = document(&h).await;
    let schemas = &doc["components"]["schemas"];
    let schedule_name = &schemas["ScheduleName"];
    assert_eq!(schedule_name["pattern"], schedule_name_pattern().as_str());
    assert_eq!(
        (
            schedule_name["minLength"].as_u64(),
            schedule_name["maxLength"].as_u64()
        ),
        (Some(1), Some(MAX_NAME_CHARS as u64))
    );
    for (schema, field) in [("NewSchedule", "name"), ("ScheduleEdit", "name")] {
        let p = non_null(&doc, property(&doc, schema, field));
        assert_eq!(p, schedule_name, "{schema}.{field}");
    }
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !path.starts_with("/api/v1/schedules/{name}") {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            let param = &op["parameters"][0];
            assert_eq!(param["name"], "name");
            assert_eq!(
                resolve(&doc, &param["schema"]),
                schedule_name,
                "{method} {path}"
            );
        }
    }

    // The pattern and lengths accept exactly what the engine accepts.
    let pattern = regex::Regex::new(&schedule_name_pattern()).unwrap();
    let documented =
        |s: &str| pattern.is_match(s) && (1..=MAX_NAME_CHARS).contains(&s.chars().count());
    let mut names = edge_strings(MAX_NAME_CHARS);
    names.extend([".", "..", "...", ".a", "a.", "..a", "a..", ". ."].map(String::from));
    for s in names {
        let def = echo_schedule(&s, ScheduleSpec::EverySecs(60));
        let accepted = validate_definition(&def).is_ok();
        assert_eq!(documented(&s), accepted, "{s:?}");
    }
    let r = h
        .post("/api/v1/schedules", schedule(json!({"name": ".."})))
        .await;
    assert_eq!(
        (r.status, r.field()),
        (StatusCode::BAD_REQUEST, "name"),
        "{}",
        r.body
    );
    h.finish().await;
}

//! The OpenAPI document says what the server does: each test reads a claim from the served
//! document and drives the router to show the server keeps it (and that it is the rule the
//! server applies, not a looser or stricter one). `contract/run.sh` checks the same with
//! generated requests against a running `deck serve`.

use deck_engine::external::{MAX_WORKER_NAME, validate_worker_name};
use deck_engine::validation::{
    MAX_DELAY_MS, MAX_NAME_CHARS, MAX_STORED_INT, MAX_TAGS_CHARS, name_pattern,
    schedule_name_pattern, tag_pattern, validate_name, validate_tags,
};

use super::*;
use crate::limits::WAIT_PATTERN;

mod schedules;

async fn document(h: &Harness) -> Value {
    let r = h.get("/api/v1/openapi.json").await;
    assert_eq!(r.status, StatusCode::OK);
    r.body
}

/// A `$ref`'d schema, or the schema itself.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => &doc["components"]["schemas"][r.trim_start_matches("#/components/schemas/")],
        None => schema,
    }
}

/// The properties of a component schema, looking into `allOf`.
fn property<'a>(doc: &'a Value, schema: &str, name: &str) -> &'a Value {
    let s = &doc["components"]["schemas"][schema];
    let direct = &s["properties"][name];
    let p = if direct.is_null() {
        s["allOf"]
            .as_array()
            .and_then(|parts| parts.iter().find(|p| !p["properties"][name].is_null()))
            .map(|p| &p["properties"][name])
            .unwrap_or(direct)
    } else {
        direct
    };
    assert!(!p.is_null(), "{schema}.{name} is not in the document");
    p
}

/// The non-null alternative of a nullable property.
fn non_null<'a>(doc: &'a Value, p: &'a Value) -> &'a Value {
    match p["oneOf"].as_array() {
        Some(alts) => resolve(
            doc,
            alts.iter()
                .find(|a| a["type"] != "null")
                .expect("a non-null alternative"),
        ),
        None => resolve(doc, p),
    }
}

async fn dead_job(h: &Harness, payload: Value) -> String {
    h.hold("held").await;
    let id = h
        .enqueue(json!({"queue": "held", "type": "echo", "payload": payload}))
        .await;
    let r = h
        .post(&format!("/api/v1/jobs/{id}/cancel"), json!(null))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    id
}

#[tokio::test]
async fn payloads_and_results_are_any_json_value() {
    let h = harness().await;
    let doc = document(&h).await;
    for (schema, field) in [
        ("EnqueueJob", "payload"),
        ("ResurrectEdits", "payload"),
        ("JobView", "payload"),
        ("JobView", "result"),
        ("JobView", "original_payload"),
    ] {
        let s = resolve(&doc, property(&doc, schema, field));
        for keyword in ["type", "oneOf", "anyOf", "allOf", "not", "enum"] {
            assert!(
                s.get(keyword).is_none(),
                "{schema}.{field} restricts values with {keyword}: {s}"
            );
        }
    }

    // And so the server takes and returns any JSON value, on enqueue and on resurrect alike.
    for payload in [
        json!(42),
        json!("text"),
        json!([1, "two"]),
        json!(null),
        json!(true),
    ] {
        let id = h
            .enqueue(json!({"queue": "any", "type": "echo", "payload": payload}))
            .await;
        let r = h.get(&format!("/api/v1/jobs/{id}?wait=30s")).await;
        assert_eq!(r.body["state"], "succeeded", "{}", r.body);
        assert_eq!(
            (&r.body["payload"], &r.body["result"]),
            (&payload, &payload)
        );
    }
    let id = dead_job(&h, json!({"v": 1})).await;
    let r = h
        .post(
            &format!("/api/v1/jobs/{id}/resurrect"),
            json!({"payload": 7}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["payload"], 7);
    assert_eq!(r.body["original_payload"], json!({"v": 1}));
    h.finish().await;
}

#[tokio::test]
async fn a_body_is_an_object_not_an_array_of_field_values() {
    let h = harness().await;
    let id = dead_job(&h, json!({"v": 1})).await;
    let before = h.get(&format!("/api/v1/jobs/{id}")).await.body;
    // serde's derive would read `[[7]]` as `{"payload": [7]}`.
    for body in ["[[7]]", "[7, [\"t\"], 1, \"q\"]", "7", "\"edits\""] {
        let r = h
            .send(raw(
                Method::POST,
                &format!("/api/v1/jobs/{id}/resurrect"),
                Some("application/json"),
                body,
            ))
            .await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::BAD_REQUEST, "invalid_value"),
            "{body}: {}",
            r.body
        );
    }
    assert_eq!(h.get(&format!("/api/v1/jobs/{id}")).await.body, before);
    for body in [
        json!(["q", "t"]),
        json!({"queue": "q", "type": "t", "continuation": ["q2", "t2"]}),
    ] {
        let r = h.post("/api/v1/jobs", body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
    }
    let r = h
        .post("/api/v1/jobs/batch", json!({"jobs": [["q", "t"]]}))
        .await;
    assert_eq!(
        (r.status, r.field()),
        (StatusCode::BAD_REQUEST, "jobs[0]"),
        "{}",
        r.body
    );
    h.finish().await;
}

#[tokio::test]
async fn integers_are_whole_numbers_as_json_schema_counts_them() {
    let h = harness().await;
    let doc = document(&h).await;
    assert_eq!(property(&doc, "EnqueueJob", "priority")["type"], "integer");
    // JSON Schema's `integer` includes 5.0; the server reads it as 5.
    let id = h
        .enqueue(json!({"queue": "ints", "type": "echo", "priority": 5.0, "max_attempts": 2e0}))
        .await;
    let job = h.get(&format!("/api/v1/jobs/{id}")).await.body;
    assert_eq!(
        (&job["priority"], &job["max_attempts"]),
        (&json!(5), &json!(2))
    );
    for (body, field) in [
        (
            json!({"queue": "q", "type": "t", "priority": 5.5}),
            "priority",
        ),
        (
            json!({"queue": "q", "type": "t", "priority": 3e9}),
            "priority",
        ),
        (
            json!({"queue": "q", "type": "t", "delay_ms": -1.0}),
            "delay_ms",
        ),
    ] {
        let r = h.post("/api/v1/jobs", body.clone()).await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (StatusCode::BAD_REQUEST, "invalid_value", field),
            "{body}"
        );
    }
    h.finish().await;
}

#[tokio::test]
async fn numeric_limits_in_the_document_are_the_ones_enforced() {
    let h = harness().await;
    let doc = document(&h).await;
    let max = u64::from(MAX_STORED_INT);
    for (schema, field, min, max) in [
        ("QueuePatch", "max_workers", 1, max),
        ("QueuePatch", "zombie_timeout_secs", 1, max),
        ("QueuePatch", "execution_timeout_secs", 1, max),
        ("QueuePatch", "lag_warn_secs", 0, max),
        ("QueuePatch", "lag_crit_secs", 0, max),
        ("EnqueueJob", "max_attempts", 1, max),
        ("EnqueueJob", "delay_ms", 0, MAX_DELAY_MS),
        (
            "ClaimBody",
            "concurrency",
            0,
            u64::from(deck_engine::external::MAX_CONCURRENCY),
        ),
        (
            "FailBody",
            "retry_after_seconds",
            0,
            deck_engine::external::MAX_RETRY_AFTER.as_secs(),
        ),
    ] {
        let p = property(&doc, schema, field);
        assert_eq!(
            (p["minimum"].as_u64(), p["maximum"].as_u64()),
            (Some(min), Some(max)),
            "{schema}.{field}: {p}"
        );
    }

    // Queue settings: the bounds themselves pass, one past them is refused.
    for field in [
        "max_workers",
        "zombie_timeout_secs",
        "execution_timeout_secs",
        "lag_warn_secs",
        "lag_crit_secs",
    ] {
        let min = property(&doc, "QueuePatch", field)["minimum"]
            .as_u64()
            .unwrap();
        let patch = |v: u64| {
            let mut body = json!({});
            body[field] = json!(v);
            // Keep the lag thresholds in order while one of them moves.
            if field == "lag_warn_secs" {
                body["lag_crit_secs"] = json!(max);
            }
            if field == "lag_crit_secs" {
                body["lag_warn_secs"] = json!(0);
            }
            body
        };
        for (value, ok) in [(min, true), (max, true), (max + 1, false)] {
            let r = h
                .call(Method::PATCH, "/api/v1/queues/limits", Some(patch(value)))
                .await;
            if ok {
                assert_eq!(r.status, StatusCode::OK, "{field}={value}: {}", r.body);
                assert_eq!(r.body[field], value, "stored exactly");
            } else {
                assert_eq!(
                    (r.status, r.field()),
                    (StatusCode::BAD_REQUEST, field),
                    "{field}={value}: {}",
                    r.body
                );
            }
        }
        if min == 1 {
            let r = h
                .call(Method::PATCH, "/api/v1/queues/limits", Some(patch(0)))
                .await;
            assert_eq!((r.status, r.field()), (StatusCode::BAD_REQUEST, field));
        }
    }

    for (body, ok) in [
        (json!({"max_attempts": max}), true),
        (json!({"max_attempts": max + 1}), false),
        (json!({"max_attempts": 0}), false),
        (json!({"delay_ms": MAX_DELAY_MS}), true),
        (json!({"delay_ms": MAX_DELAY_MS + 1}), false),
    ] {
        let mut job = body.clone();
        job["queue"] = json!("limits");
        job["type"] = json!("echo");
        let r = h.post("/api/v1/jobs", job).await;
        let expected = if ok {
            StatusCode::CREATED
        } else {
            StatusCode::BAD_REQUEST
        };
        assert_eq!(r.status, expected, "{body}: {}", r.body);
    }
    h.finish().await;
}

#[tokio::test]
async fn delay_and_schedule_exclude_each_other_in_the_document_too() {
    let h = harness().await;
    let doc = document(&h).await;
    let parts = doc["components"]["schemas"]["EnqueueJob"]["allOf"]
        .as_array()
        .expect("EnqueueJob is all of its fields and the exclusion");
    let exclusion = parts
        .iter()
        .find_map(|p| p["anyOf"].as_array())
        .expect("an anyOf stating the exclusion");
    let mut unset: Vec<&str> = exclusion
        .iter()
        .map(|alt| {
            let props = alt["properties"].as_object().unwrap();
            assert_eq!(props.len(), 1, "{alt}");
            let (name, schema) = props.iter().next().unwrap();
            assert_eq!(schema["type"], "null");
            name.as_str()
        })
        .collect();
    unset.sort();
    assert_eq!(unset, ["delay_ms", "scheduled_at"]);

    let at = "2030-01-01T00:00:00Z";
    for (body, ok) in [
        (json!({"delay_ms": 5, "scheduled_at": at}), false),
        (json!({"delay_ms": 5, "scheduled_at": null}), true),
        (json!({"delay_ms": null, "scheduled_at": at}), true),
    ] {
        let mut job = body.clone();
        job["queue"] = json!("later");
        job["type"] = json!("echo");
        let r = h.post("/api/v1/jobs", job).await;
        assert_eq!(r.status.is_success(), ok, "{body}: {}", r.body);
    }
    h.finish().await;
}

#[tokio::test]
async fn lag_thresholds_that_would_cross_are_a_conflict() {
    let h = harness().await;
    let doc = document(&h).await;
    let patch = &doc["paths"]["/api/v1/queues/{name}"]["patch"];
    assert!(patch["responses"]["409"].is_object(), "409 is documented");
    let uri = "/api/v1/queues/lagged";
    let r = h
        .call(Method::PATCH, uri, Some(json!({"lag_warn_secs": 60})))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    // Against the stored warning threshold, and within one patch.
    for body in [
        json!({"lag_crit_secs": 10}),
        json!({"lag_warn_secs": 30, "lag_crit_secs": 20}),
    ] {
        let r = h.call(Method::PATCH, uri, Some(body.clone())).await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (
                StatusCode::CONFLICT,
                "lag_thresholds_conflict",
                "lag_crit_secs"
            ),
            "{body}"
        );
    }
    let r = h
        .call(Method::PATCH, uri, Some(json!({"lag_crit_secs": 60})))
        .await;
    assert_eq!(r.status, StatusCode::OK, "equal thresholds are fine");
    let r = h
        .call(
            Method::PATCH,
            uri,
            Some(json!({"lag_warn_secs": null, "lag_crit_secs": 5})),
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::OK,
        "a cleared warning no longer binds: {}",
        r.body
    );
    h.finish().await;
}

#[tokio::test]
async fn a_queue_patch_changes_something() {
    let h = harness().await;
    let doc = document(&h).await;
    let schema = &doc["components"]["schemas"]["QueuePatch"];
    assert_eq!(schema["minProperties"], 1);
    assert!(schema.get("maxProperties").is_none(), "{schema}");
    // `paused` and `hidden` cannot be cleared, so the document does not allow null for them.
    assert_eq!(property(&doc, "QueuePatch", "paused")["type"], "boolean");
    for (body, code) in [
        (json!({}), "empty_patch"),
        (json!({"paused": null}), "invalid_value"),
        (json!({"hidden": null, "max_workers": 3}), "invalid_value"),
    ] {
        let r = h
            .call(Method::PATCH, "/api/v1/queues/q", Some(body.clone()))
            .await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::BAD_REQUEST, code),
            "{body}: {}",
            r.body
        );
    }
    h.finish().await;
}

#[tokio::test]
async fn wait_takes_exactly_the_documented_grammar() {
    let h = harness().await;
    let doc = document(&h).await;
    let pattern = regex::Regex::new(WAIT_PATTERN).unwrap();
    for (method, path) in [("post", "/api/v1/jobs"), ("get", "/api/v1/jobs/{id}")] {
        let op = &doc["paths"][path][method];
        let wait = op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "wait")
            .unwrap();
        assert_eq!(wait["schema"]["pattern"], WAIT_PATTERN, "{path}");
    }
    let id = h.enqueue(json!({"queue": "w", "type": "echo"})).await;
    for wait in [
        "", "0", "1", "0.5", "2s", "1.5s", "100ms", "1m", "%201s", "1%20s", "1e1", "%2B1", ".5",
        "1.", "1h", "inf", "-0",
    ] {
        let r = h.get(&format!("/api/v1/jobs/{id}?wait={wait}")).await;
        let decoded = wait.replace("%20", " ").replace("%2B", "+");
        assert_eq!(
            r.status == StatusCode::OK,
            pattern.is_match(&decoded),
            "wait={wait:?}: {}",
            r.body
        );
    }
    h.finish().await;
}

/// Strings at the edges of the name and tag rules: every control and whitespace boundary,
/// at the start, middle and end, and the length limits.
fn edge_strings(max: usize) -> Vec<String> {
    let mut out = vec![
        String::new(),
        "a".into(),
        "a b".into(),
        "ü名".into(),
        ",".into(),
    ];
    let specials = [
        '\u{0}', '\u{9}', '\n', '\u{1f}', ' ', '\u{7e}', '\u{7f}', '\u{85}', '\u{9f}', '\u{a0}',
        '\u{a1}', '\u{1680}', '\u{2000}', '\u{200a}', '\u{200b}', '\u{2028}', '\u{2029}',
        '\u{202f}', '\u{205f}', '\u{3000}', '\u{feff}', ',',
    ];
    for c in specials {
        out.push(c.to_string());
        out.push(format!("{c}a"));
        out.push(format!("a{c}"));
        out.push(format!("a{c}b"));
    }
    for n in [max - 1, max, max + 1] {
        out.push("x".repeat(n));
        out.push("名".repeat(n));
    }
    out
}

#[tokio::test]
async fn name_and_tag_schemas_state_the_engines_rules() {
    let h = harness().await;
    let doc = document(&h).await;
    let schemas = &doc["components"]["schemas"];
    for (schema, pattern, max) in [
        ("Name", name_pattern(), MAX_NAME_CHARS),
        ("Tag", tag_pattern(), MAX_TAGS_CHARS),
    ] {
        let s = &schemas[schema];
        assert_eq!(s["pattern"], pattern.as_str());
        assert_eq!(
            (s["minLength"].as_u64(), s["maxLength"].as_u64()),
            (Some(1), Some(max as u64))
        );
    }
    for (schema, field) in [
        ("EnqueueJob", "queue"),
        ("EnqueueJob", "type"),
        ("EnqueueJob", "idempotency_key"),
        ("EnqueueJob", "correlation_id"),
        ("EnqueueJob", "created_by"),
        ("Continuation", "queue"),
        ("Continuation", "type"),
        ("ResurrectEdits", "queue"),
        ("ScheduleJob", "queue"),
        ("ScheduleJob", "type"),
    ] {
        let p = non_null(&doc, property(&doc, schema, field));
        assert_eq!(p, &schemas["Name"], "{schema}.{field}");
    }
    for (path, method) in [
        ("/api/v1/queues/{name}", "patch"),
        ("/api/v1/queues/{name}/pause", "post"),
        ("/api/v1/queues/{name}/resume", "post"),
    ] {
        let param = &doc["paths"][path][method]["parameters"][0];
        assert_eq!(resolve(&doc, &param["schema"]), &schemas["Name"], "{path}");
    }

    // The pattern and lengths accept exactly what the engine accepts.
    let name = regex::Regex::new(&name_pattern()).unwrap();
    for s in edge_strings(MAX_NAME_CHARS) {
        let chars = s.chars().count();
        let documented = name.is_match(&s) && (1..=MAX_NAME_CHARS).contains(&chars);
        assert_eq!(documented, validate_name("queue", &s).is_ok(), "{s:?}");
    }
    let tag = regex::Regex::new(&tag_pattern()).unwrap();
    for s in edge_strings(MAX_TAGS_CHARS) {
        let chars = s.chars().count();
        let documented = tag.is_match(&s) && (1..=MAX_TAGS_CHARS).contains(&chars);
        assert_eq!(
            documented,
            validate_tags(std::slice::from_ref(&s)).is_ok(),
            "{s:?}"
        );
    }
    h.finish().await;
}

/// The worker name's pattern is written out in the claim's schema (an attribute takes a
/// literal); it accepts exactly what the engine's `validate_worker_name` accepts.
#[tokio::test]
async fn the_worker_name_schema_states_the_engines_rule() {
    let h = harness().await;
    let doc = document(&h).await;
    let worker = non_null(&doc, property(&doc, "ClaimBody", "worker"));
    let pattern = worker["pattern"]
        .as_str()
        .expect("the worker name has a pattern");
    let pattern = regex::Regex::new(pattern).unwrap();
    let mut samples = edge_strings(MAX_WORKER_NAME);
    samples.extend(
        [
            "billing-py@host1",
            "a:b",
            "a/b",
            "w.1_x-y",
            "ä",
            "a b",
            "ext:w",
        ]
        .map(String::from),
    );
    for s in samples {
        assert_eq!(
            pattern.is_match(&s),
            validate_worker_name(&s).is_ok(),
            "{s:?}"
        );
    }
    h.finish().await;
}

#[tokio::test]
async fn job_ids_are_uuids_and_a_bad_one_is_a_documented_400() {
    let h = harness().await;
    let doc = document(&h).await;
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !path.contains("{id}") {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            let id = op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "id")
                .unwrap();
            assert_eq!(id["schema"]["format"], "uuid", "{method} {path}");
            assert!(
                op["responses"]["400"].is_object(),
                "{method} {path} documents 400"
            );
            let uri = path.replace("{id}", "not-a-uuid");
            let m: Method = method.to_uppercase().parse().unwrap();
            let r = h.send(raw(m, &uri, None, "")).await;
            assert_eq!(
                (r.status, r.code()),
                (StatusCode::BAD_REQUEST, "invalid_id"),
                "{method} {path}"
            );
        }
    }
    h.finish().await;
}

/// Every status an operation answers is one its document lists.
#[tokio::test]
async fn error_statuses_are_documented_per_operation() {
    let h = harness().await;
    let doc = document(&h).await;
    let documented = |path: &str, method: &str, status: StatusCode| {
        doc["paths"][path][method]["responses"][status.as_str()].is_object()
    };
    let big = "x".repeat(crate::SINGLE_BODY_LIMIT + 1);
    let cases = [
        (
            "/api/v1/jobs",
            "post",
            raw(Method::POST, "/api/v1/jobs", Some("text/plain"), "x"),
        ),
        (
            "/api/v1/jobs",
            "post",
            raw(
                Method::POST,
                "/api/v1/jobs",
                Some("application/json"),
                big.clone(),
            ),
        ),
        (
            "/api/v1/jobs/batch",
            "post",
            raw(Method::POST, "/api/v1/jobs/batch", Some("text/plain"), "x"),
        ),
        (
            "/api/v1/jobs/{id}/resurrect",
            "post",
            raw(
                Method::POST,
                &format!("/api/v1/jobs/{}/resurrect", JobId::new()),
                Some("text/plain"),
                "x",
            ),
        ),
        (
            "/api/v1/jobs/{id}/resurrect",
            "post",
            raw(
                Method::POST,
                &format!("/api/v1/jobs/{}/resurrect", JobId::new()),
                Some("application/json"),
                big.clone(),
            ),
        ),
        (
            "/api/v1/queues/{name}",
            "patch",
            raw(Method::PATCH, "/api/v1/queues/q", Some("text/plain"), "x"),
        ),
        (
            "/api/v1/queues/{name}",
            "patch",
            raw(
                Method::PATCH,
                "/api/v1/queues/q",
                Some("application/json"),
                big.clone(),
            ),
        ),
        (
            "/api/v1/queues/{name}/pause",
            "post",
            raw(Method::POST, "/api/v1/queues/%0A/pause", None, ""),
        ),
        (
            "/api/v1/schedules",
            "post",
            raw(Method::POST, "/api/v1/schedules", Some("text/plain"), "x"),
        ),
        (
            "/api/v1/schedules",
            "post",
            raw(
                Method::POST,
                "/api/v1/schedules",
                Some("application/json"),
                big.clone(),
            ),
        ),
        (
            "/api/v1/schedules/{name}",
            "put",
            raw(Method::PUT, "/api/v1/schedules/s", Some("text/plain"), "x"),
        ),
        (
            "/api/v1/schedules/{name}",
            "put",
            raw(
                Method::PUT,
                "/api/v1/schedules/s",
                Some("application/json"),
                big,
            ),
        ),
        (
            "/api/v1/schedules/{name}",
            "get",
            raw(Method::GET, "/api/v1/schedules/s?tz=Nowhere", None, ""),
        ),
        (
            "/api/v1/schedules/{name}",
            "get",
            raw(Method::GET, "/api/v1/schedules/s", None, ""),
        ),
        (
            "/api/v1/schedules/{name}/run",
            "post",
            raw(Method::POST, "/api/v1/schedules/s/run", None, ""),
        ),
        (
            "/api/v1/schedules/{name}",
            "delete",
            raw(Method::DELETE, "/api/v1/schedules/s", None, ""),
        ),
        (
            "/api/v1/schedules/{name}/runs",
            "get",
            raw(Method::GET, "/api/v1/schedules/s/runs?limit=0", None, ""),
        ),
        (
            "/api/v1/jobs/{id}/cancel",
            "post",
            raw(
                Method::POST,
                &format!("/api/v1/jobs/{}/cancel", JobId::new()),
                None,
                "",
            ),
        ),
    ];
    for (path, method, req) in cases {
        let r = h.send(req).await;
        assert!(r.status.is_client_error(), "{method} {path}: {}", r.status);
        assert!(
            documented(path, method, r.status),
            "{method} {path} answered {} ({}) but does not document it",
            r.status,
            r.code()
        );
    }
    h.finish().await;
}

#[tokio::test]
async fn security_is_stated_only_when_users_are_configured() {
    let open = harness().await;
    let doc = document(&open).await;
    assert!(doc.get("security").is_none());
    assert!(doc["components"].get("securitySchemes").is_none());
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            assert!(op.get("security").is_none(), "{method} {path}");
            assert!(
                op["responses"].get("401").is_none(),
                "{method} {path}: no request is refused for credentials without users"
            );
        }
    }
    open.finish().await;

    let secured = harness_with(|e| router(ApiState::new(e, two_users()))).await;
    let viewer = "Basic dmljOnNlY3JldA=="; // vic:secret
    let r = secured
        .send(with_auth(
            request(Method::GET, "/api/v1/openapi.json", None),
            viewer,
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "a viewer reads the document");
    let doc = r.body;
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    assert!(doc["components"]["securitySchemes"]["basic"].is_object());
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let uri = path
                .replace("{id}", &JobId::new().to_string())
                .replace("{name}", "q");
            let m: Method = method.to_uppercase().parse().unwrap();
            let r = secured.send(raw(m, &uri, None, "")).await;
            if op["responses"]["401"].is_object() {
                assert_eq!(
                    op["security"],
                    json!([{"bearer": []}, {"basic": []}]),
                    "{method} {path}"
                );
                assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{method} {path}");
            } else {
                assert!(op.get("security").is_none(), "{method} {path}");
                assert_ne!(r.status, StatusCode::UNAUTHORIZED, "{method} {path}");
            }
        }
    }
    secured.finish().await;
}

#[tokio::test]
async fn a_public_document_says_so_and_answers_anyone() {
    let h = harness_with(|e| {
        router(ApiState {
            openapi_public: true,
            ..ApiState::new(e, two_users())
        })
    })
    .await;
    let doc = document(&h).await;
    let op = &doc["paths"]["/api/v1/openapi.json"]["get"];
    assert!(op["responses"].get("401").is_none(), "{op}");
    assert!(op.get("security").is_none(), "{op}");
    assert!(
        doc["paths"]["/api/v1/stats"]["get"]["responses"]["401"].is_object(),
        "the rest of the API still needs credentials"
    );
    h.finish().await;
}

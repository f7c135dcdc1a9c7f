//! What the console shows an operator, over the API: job lists and search, purge, error
//! groups, a running job's progress, engine settings, the audit log and the instances.

use axum::http::{Method, StatusCode};
use deck_engine::JobId;
use serde_json::{Value, json};

use super::{
    ApiState, Harness, Role, as_user, harness, harness_holding, harness_with, nobody, router,
};

/// The ids of a page's items, in order.
fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect()
}

impl Harness {
    /// Enqueue `n` `fail` jobs into `queue` and wait until each is dead.
    async fn dead_letters(&self, queue: &str, n: usize) -> Vec<String> {
        let mut ids = Vec::new();
        for _ in 0..n {
            let id = self
                .enqueue(json!({"queue": queue, "type": "fail", "payload": {}}))
                .await;
            let r = self.get(&format!("/api/v1/jobs/{id}?wait=30s")).await;
            assert_eq!(r.body["state"], "dead", "{}", r.body);
            ids.push(id);
        }
        ids
    }
}

#[tokio::test]
async fn a_job_list_filters_sorts_and_pages_by_cursor() {
    let h = harness_holding("q").await;
    let mut enqueued = Vec::new();
    for priority in [3, 1, 4, 1, 5] {
        enqueued.push(
            h.enqueue(json!({"queue": "q", "type": "echo", "priority": priority,
                             "tags": if priority == 4 { vec!["vip"] } else { vec![] }}))
                .await,
        );
    }
    // Another queue's job is not in the queue's list.
    h.hold("other").await;
    h.enqueue(json!({"queue": "other", "type": "echo"})).await;

    // Newest first by default, two a page, the cursors walking the whole list.
    let first = h.get("/api/v1/jobs?queue=q&limit=2").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(
        (
            first.body["source"].as_str(),
            first.body["sort"].as_str(),
            first.body["dir"].as_str()
        ),
        (Some("active"), Some("created"), Some("desc"))
    );
    assert_eq!(first.body["count"], json!({"matching": 5, "capped": false}));
    assert_eq!(first.body["prev"], Value::Null);
    let next = first.body["next"].as_str().unwrap().to_string();
    let second = h
        .get(&format!("/api/v1/jobs?queue=q&limit=2&after={next}"))
        .await;
    let next = second.body["next"].as_str().unwrap().to_string();
    let third = h
        .get(&format!("/api/v1/jobs?queue=q&limit=2&after={next}"))
        .await;
    assert_eq!(third.body["next"], Value::Null);
    let walked: Vec<String> = [&first, &second, &third]
        .iter()
        .flat_map(|p| ids(&p.body))
        .collect();
    let newest_first: Vec<String> = enqueued.iter().rev().cloned().collect();
    assert_eq!(walked, newest_first);
    // And back: the page before the second is the first.
    let prev = second.body["prev"].as_str().unwrap();
    let back = h
        .get(&format!("/api/v1/jobs?queue=q&limit=2&before={prev}"))
        .await;
    assert_eq!(ids(&back.body), ids(&first.body));
    // The last page is the last `limit` rows.
    let last = h.get("/api/v1/jobs?queue=q&limit=2&last=true").await;
    assert_eq!(ids(&last.body), walked[3..].to_vec());
    assert_eq!(last.body["next"], Value::Null);

    // A whitelisted sort, a status, a tag.
    let by_priority = h.get("/api/v1/jobs?queue=q&sort=priority&dir=asc").await;
    let priorities: Vec<i64> = by_priority.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["priority"].as_i64().unwrap())
        .collect();
    assert_eq!(priorities, vec![1, 1, 3, 4, 5]);
    let pending = h.get("/api/v1/jobs?status=pending").await;
    assert_eq!(pending.body["count"]["matching"], 6);
    let vip = h.get("/api/v1/jobs?tag=vip").await;
    assert_eq!(ids(&vip.body), vec![enqueued[2].clone()]);

    // A creation range, in RFC 3339.
    let since = h
        .get("/api/v1/jobs?queue=q&created_from=2000-01-01T00:00:00Z")
        .await;
    assert_eq!(since.body["count"]["matching"], 5, "{}", since.body);
    let before = h
        .get("/api/v1/jobs?queue=q&created_to=2000-01-01T00:00:00%2B02:00")
        .await;
    assert_eq!(before.body["items"], json!([]), "{}", before.body);

    // An id prefix in the search finds the job, with every other job of that prefix. Twelve
    // hex digits are a UUIDv7's millisecond, and ids made in one millisecond count up from
    // there (monotonic), so jobs enqueued together can share far longer prefixes: only the
    // whole id names one job.
    let wanted = &enqueued[1];
    for len in [13, 23] {
        let found = h.get(&format!("/api/v1/jobs?q={}", &wanted[..len])).await;
        assert_eq!(found.status, StatusCode::OK, "{}", found.body);
        let named = ids(&found.body);
        assert!(named.contains(wanted), "{named:?}");
        assert!(
            named.iter().all(|id| id[..len] == wanted[..len]),
            "{named:?}"
        );
    }
    let found = h.get(&format!("/api/v1/jobs?q={wanted}")).await;
    assert_eq!(ids(&found.body), vec![wanted.clone()]);

    // Filters of another source are named, not applied; bad values are 400s naming the field.
    let archive = h.get("/api/v1/jobs?source=archive&status=pending").await;
    assert_eq!(archive.status, StatusCode::OK);
    assert_eq!(archive.body["ignored"], json!(["status"]));
    assert_eq!(archive.body["sort"], "finished");
    for (query, field) in [
        ("source=hot", "source"),
        ("status=Pending", "status"),
        ("reason=fatal", "reason"),
        ("error_group=xyz", "error_group"),
        ("sort=payload", "sort"),
        ("dir=up", "dir"),
        ("after=nope", "after"),
        ("before=nope", "before"),
        ("created_from=yesterday", "created_from"),
        ("created_to=2026-01-02", "created_to"),
        ("finished_from=", "finished_from"),
        ("source=", "source"),
        ("sort=", "sort"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
    ] {
        let r = h.get(&format!("/api/v1/jobs?{query}")).await;
        assert_eq!(
            (r.status, r.field()),
            (StatusCode::BAD_REQUEST, field),
            "{query}: {}",
            r.body
        );
    }
    let long = "x".repeat(201);
    assert_eq!(h.get(&format!("/api/v1/jobs?q={long}")).await.field(), "q");
    // A cursor whose key does not fit the sort.
    let id = JobId::new();
    let r = h.get(&format!("/api/v1/jobs?after={id}~abc")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    h.finish().await;
}

#[tokio::test]
async fn error_groups_select_their_dead_letters() {
    let h = harness().await;
    let dead = h.dead_letters("mail", 3).await;
    let groups = h.get("/api/v1/error-groups").await;
    assert_eq!(groups.status, StatusCode::OK, "{}", groups.body);
    let group = &groups.body["groups"][0];
    assert_eq!(group["count"], 3);
    assert_eq!(group["reason"], "Fatal");
    assert_eq!(group["type"], "fail");
    let fingerprint = group["fingerprint"].as_str().unwrap();
    let jobs = group["jobs"].as_str().unwrap().to_string();
    assert_eq!(
        jobs,
        format!("/api/v1/jobs?source=dlq&error_group={fingerprint}")
    );
    let listed = h.get(&jobs).await;
    let mut listed_ids = ids(&listed.body);
    listed_ids.sort();
    let mut expected = dead.clone();
    expected.sort();
    assert_eq!(listed_ids, expected);
    assert_eq!(listed.body["sort"], "finished");
    let by_reason = h.get("/api/v1/jobs?source=dlq&reason=Fatal").await;
    assert_eq!(by_reason.body["count"]["matching"], 3);
    let none = h.get("/api/v1/jobs?source=dlq&reason=Timeout").await;
    assert_eq!(none.body["count"]["matching"], 0);
    let other = h
        .get("/api/v1/jobs?source=dlq&error_group=0123456789abcdef")
        .await;
    assert_eq!(other.body["items"], json!([]));
    assert_eq!(
        h.get("/api/v1/error-groups?limit=0").await.status,
        StatusCode::BAD_REQUEST
    );
    h.finish().await;
}

#[tokio::test]
async fn purge_deletes_pending_and_dead_jobs_and_refuses_running_ones() {
    let h = harness_holding("held").await;
    let pending = h.enqueue(json!({"queue": "held", "type": "echo"})).await;
    let r = h
        .call(Method::DELETE, &format!("/api/v1/jobs/{pending}"), None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body, json!({"id": pending, "source": "active"}));
    assert_eq!(
        h.get(&format!("/api/v1/jobs/{pending}")).await.status,
        StatusCode::NOT_FOUND
    );
    let dead = h.dead_letters("mail", 1).await.remove(0);
    let r = h
        .call(Method::DELETE, &format!("/api/v1/jobs/{dead}"), None)
        .await;
    assert_eq!(r.body["source"], "dlq", "{}", r.body);

    let running = h.enqueue(json!({"queue": "run", "type": "gated"})).await;
    assert_eq!(h.next_started().await.to_string(), running);
    let r = h
        .call(Method::DELETE, &format!("/api/v1/jobs/{running}"), None)
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "job_not_purgeable"),
        "{}",
        r.body
    );
    let r = h
        .call(
            Method::DELETE,
            &format!("/api/v1/jobs/{}", JobId::new()),
            None,
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "job_not_found")
    );
    let r = h.call(Method::DELETE, "/api/v1/jobs/nope", None).await;
    assert_eq!(r.code(), "invalid_id");

    // Audited as the console's purge: one row per purged job, nothing for the refusals.
    let purges: Vec<String> = h
        .audit_actions()
        .await
        .into_iter()
        .filter(|(_, action, _)| action == "job.purge")
        .map(|(_, _, target)| target)
        .collect();
    assert_eq!(purges, vec![dead, pending]);
    h.finish().await;
}

#[tokio::test]
async fn a_running_jobs_progress_is_readable() {
    let h = harness().await;
    let id = h
        .enqueue(json!({"queue": "run", "type": "gated", "payload": {"progress": 40}}))
        .await;
    assert_eq!(h.next_started().await.to_string(), id);
    let r = h.get(&format!("/api/v1/jobs/{id}/progress")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["state"], "processing");
    assert_eq!(r.body["running_here"], true);
    assert_eq!(r.body["progress"]["percent"], 40);
    assert_eq!(r.body["progress"]["message"], "working");
    // The active list shows it on the job's row too.
    let list = h.get("/api/v1/jobs?status=processing").await;
    assert_eq!(
        list.body["items"][0]["progress"]["percent"], 40,
        "{}",
        list.body
    );

    h.release.add_permits(1);
    let done = h.get(&format!("/api/v1/jobs/{id}?wait=30s")).await;
    assert_eq!(done.body["state"], "succeeded");
    let r = h.get(&format!("/api/v1/jobs/{id}/progress")).await;
    assert_eq!(r.body["running_here"], false);
    assert_eq!(r.body["progress"], Value::Null);
    let r = h
        .get(&format!("/api/v1/jobs/{}/progress", JobId::new()))
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "job_not_found")
    );
    h.finish().await;
}

#[tokio::test]
async fn settings_are_read_replaced_and_patched_with_the_engines_checks() {
    let h = harness().await;
    let defaults = h.get("/api/v1/settings").await;
    assert_eq!(defaults.status, StatusCode::OK, "{}", defaults.body);
    assert_eq!(defaults.body["worker_count"], 100);

    let patched = h
        .call(
            Method::PATCH,
            "/api/v1/settings",
            Some(json!({"worker_count": 7, "retention": {"dlq_days": 9}})),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["worker_count"], 7);
    assert_eq!(patched.body["retention"]["dlq_days"], 9);
    assert_eq!(
        patched.body["retry"], defaults.body["retry"],
        "absent fields stay"
    );
    assert_eq!(
        h.engine.store().load_settings().await.unwrap().worker_count,
        7
    );

    let mut replaced = patched.body.clone();
    replaced["retry"]["max_attempts"] = json!(5);
    let r = h
        .call(Method::PUT, "/api/v1/settings", Some(replaced.clone()))
        .await;
    assert_eq!(r.body, replaced);

    // The engine's checks: ranges, and the base delay within the max delay.
    let mut bad = replaced.clone();
    bad["retry"]["base_delay_ms"] = json!(10_000);
    bad["retry"]["max_delay_ms"] = json!(1_000);
    let r = h.call(Method::PUT, "/api/v1/settings", Some(bad)).await;
    assert_eq!(
        (r.status, r.field()),
        (StatusCode::BAD_REQUEST, "retry.base_delay_ms"),
        "{}",
        r.body
    );
    let r = h
        .call(
            Method::PATCH,
            "/api/v1/settings",
            Some(json!({"worker_count": 0})),
        )
        .await;
    assert_eq!(
        (r.status, r.field()),
        (StatusCode::BAD_REQUEST, "worker_count")
    );
    for body in [
        json!({"retry": null}),
        json!({"worker_count": null}),
        json!({"workers": 3}),
    ] {
        let r = h
            .call(Method::PATCH, "/api/v1/settings", Some(body.clone()))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
    }
    let r = h
        .call(
            Method::PUT,
            "/api/v1/settings",
            Some(json!({"worker_count": 3})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    // A patch that changes nothing saves nothing.
    let same = h
        .call(
            Method::PATCH,
            "/api/v1/settings",
            Some(json!({"worker_count": 7})),
        )
        .await;
    assert_eq!(same.body, replaced);

    let saves = h
        .audit_actions()
        .await
        .into_iter()
        .filter(|(_, action, target)| action == "settings.save" && target == "engine")
        .count();
    assert_eq!(saves, 2);
    h.finish().await;
}

#[tokio::test]
async fn the_audit_log_filters_and_pages() {
    let h = harness().await;
    for queue in ["a", "b", "c"] {
        h.hold(queue).await;
    }
    h.post("/api/v1/queues/a/resume", json!(null)).await;
    let page = h.get("/api/v1/audit?limit=2").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let targets = |p: &Value| -> Vec<(String, String)> {
        p["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["action"].as_str().unwrap().to_string(),
                    e["target"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(
        targets(&page.body),
        vec![
            ("queue.resume".into(), "a".into()),
            ("queue.pause".into(), "c".into())
        ]
    );
    let before = page.body["next_before"].as_i64().unwrap();
    let older = h
        .get(&format!("/api/v1/audit?limit=2&before={before}"))
        .await;
    assert_eq!(
        targets(&older.body),
        vec![
            ("queue.pause".into(), "b".into()),
            ("queue.pause".into(), "a".into())
        ]
    );
    assert_eq!(older.body["next_before"], Value::Null);
    let resumes = h.get("/api/v1/audit?action=queue.resume").await;
    assert_eq!(resumes.body["entries"].as_array().unwrap().len(), 1);
    let family = h.get("/api/v1/audit?action=queue").await;
    assert_eq!(family.body["entries"].as_array().unwrap().len(), 4);
    let nobody_else = h.get("/api/v1/audit?actor=someone-else").await;
    assert_eq!(nobody_else.body["entries"], json!([]));
    let future = h.get("/api/v1/audit?from=2999-01-01T00:00:00Z").await;
    assert_eq!(future.body["entries"], json!([]));
    // Times are RFC 3339, as the document's `date-time` says: not empty, not a bare day.
    for before in ["0", "-1", "9007199254740992"] {
        let r = h.get(&format!("/api/v1/audit?before={before}")).await;
        assert_eq!(
            (r.status, r.field()),
            (StatusCode::BAD_REQUEST, "before"),
            "{before}"
        );
    }
    for to in ["soon", "", "2026-01-02"] {
        let r = h.get(&format!("/api/v1/audit?to={to}")).await;
        assert_eq!(
            (r.status, r.field()),
            (StatusCode::BAD_REQUEST, "to"),
            "{to:?}"
        );
    }
    h.finish().await;
}

#[tokio::test]
async fn instances_are_listed_and_quieted() {
    let h = harness().await;
    let me = h.engine.instance_id().to_string();
    let listed = h.get("/api/v1/instances").await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    let row = listed.body["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == me.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("{me} not in {}", listed.body));
    assert_eq!(
        (row["kind"].as_str(), row["quiet"].as_bool()),
        (Some("engine"), Some(false))
    );
    let r = h
        .post(&format!("/api/v1/instances/{me}/quiet"), json!(null))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let listed = h.get("/api/v1/instances").await;
    let quiet = listed.body["instances"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["id"] == me.as_str() && i["quiet"] == true);
    assert!(quiet, "{}", listed.body);
    h.post(&format!("/api/v1/instances/{me}/resume"), json!(null))
        .await;
    let r = h
        .post("/api/v1/instances/no-such-instance/quiet", json!(null))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    h.finish().await;
}

#[tokio::test]
async fn viewers_read_every_list_and_change_nothing() {
    let h =
        harness_with(|e| as_user(router(ApiState::new(e, nobody())), "vic", Role::Viewer)).await;
    for uri in [
        "/api/v1/jobs",
        "/api/v1/jobs?source=dlq",
        "/api/v1/error-groups",
        "/api/v1/settings",
        "/api/v1/audit",
        "/api/v1/instances",
    ] {
        let r = h.get(uri).await;
        assert_eq!(r.status, StatusCode::OK, "{uri}: {}", r.body);
    }
    let id = JobId::new();
    for (method, uri, body) in [
        (Method::DELETE, format!("/api/v1/jobs/{id}"), None),
        (
            Method::PATCH,
            "/api/v1/settings".to_string(),
            Some(json!({"worker_count": 3})),
        ),
        (
            Method::PUT,
            "/api/v1/settings".to_string(),
            Some(json!({"worker_count": 3})),
        ),
    ] {
        let r = h.call(method.clone(), &uri, body).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{method} {uri}");
    }
    assert!(h.audit_actions().await.is_empty());
    h.finish().await;
}

/// A parameter of an operation in the served document.
fn parameter<'a>(doc: &'a Value, method: &str, path: &str, name: &str) -> &'a Value {
    doc["paths"][path][method]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{method} {path} has no parameter {name}"))
}

/// A schema, its `$ref` followed, its nullable alternative left out.
fn resolved<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    let schema = match schema["oneOf"].as_array() {
        Some(alts) => alts.iter().find(|a| a["type"] != "null").unwrap(),
        None => schema,
    };
    match schema["$ref"].as_str() {
        Some(r) => &doc["components"]["schemas"][r.trim_start_matches("#/components/schemas/")],
        None => schema,
    }
}

#[tokio::test]
async fn the_documents_list_and_settings_bounds_are_the_engines() {
    use deck_engine::validation::SETTING_RANGES;
    use deck_engine::{FailureReason, HotStatus, MAX_PAGE_SIZE, Pillar, SortColumn};

    let h = harness().await;
    let doc = h.get("/api/v1/openapi.json").await.body;
    let list = |name: &str| {
        resolved(
            &doc,
            &parameter(&doc, "get", "/api/v1/jobs", name)["schema"],
        )
    };
    let names = |v: &Value| -> Vec<String> {
        v["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let strings = |all: Vec<&str>| -> Vec<String> { all.into_iter().map(String::from).collect() };
    assert_eq!(
        names(list("source")),
        strings(Pillar::ALL.iter().map(|p| p.as_str()).collect())
    );
    assert_eq!(
        names(list("status")),
        strings(
            HotStatus::ALL
                .iter()
                .map(|s| s.as_str())
                .chain(deck_engine::Timing::ALL.iter().map(|t| t.as_str()))
                .collect()
        )
    );
    assert_eq!(
        names(list("reason")),
        strings(FailureReason::ALL.iter().map(|r| r.as_str()).collect())
    );
    assert_eq!(
        names(list("sort")),
        strings(SortColumn::ALL.iter().map(|c| c.as_str()).collect())
    );
    assert_eq!(
        list("limit")["maximum"].as_u64(),
        Some(u64::from(MAX_PAGE_SIZE))
    );
    assert_eq!(
        list("q")["maxLength"].as_u64(),
        Some(crate::dto::job_lists::MAX_SEARCH_CHARS as u64)
    );
    // Every enum value is taken, and a case variant is not (the server reads the document's
    // names exactly).
    for (field, values) in [
        ("source", names(list("source"))),
        ("status", names(list("status"))),
        ("reason", names(list("reason"))),
        ("sort", names(list("sort"))),
    ] {
        for v in values {
            let r = h.get(&format!("/api/v1/jobs?{field}={v}")).await;
            assert_eq!(r.status, StatusCode::OK, "{field}={v}: {}", r.body);
            let upper = v.to_uppercase();
            if upper != v {
                let r = h.get(&format!("/api/v1/jobs?{field}={upper}")).await;
                assert_eq!(r.status, StatusCode::BAD_REQUEST, "{field}={upper}");
            }
        }
    }

    // Settings: each range in the full and the patch schema, and the server's edges.
    let current = h.get("/api/v1/settings").await.body;
    for (path, _, least, most) in SETTING_RANGES {
        let (full, patch, field) = match path.split_once('.') {
            None => ("EngineSettings", "EngineSettingsPatch", path),
            Some(("retry", f)) => ("RetrySettings", "RetryPatch", f),
            Some(("retention", f)) => ("RetentionSettings", "RetentionPatch", f),
            Some(_) => panic!("a settings group the API does not know: {path}"),
        };
        for schema in [full, patch] {
            let p = &doc["components"]["schemas"][schema]["properties"][field];
            assert_eq!(
                (p["minimum"].as_u64(), p["maximum"].as_u64()),
                (Some(least), Some(most)),
                "{schema}.{field}: {p}"
            );
        }
        for (value, ok) in [(least, true), (most, true), (most + 1, false)] {
            let mut body = current.clone();
            match path.split_once('.') {
                None => body[field] = json!(value),
                Some((group, f)) => body[group][f] = json!(value),
            }
            // The base delay stays within the max delay while either moves.
            if field == "base_delay_ms" {
                body["retry"]["max_delay_ms"] = json!(most + 1);
            }
            if field == "max_delay_ms" {
                body["retry"]["base_delay_ms"] = json!(0);
            }
            let r = h.call(Method::PUT, "/api/v1/settings", Some(body)).await;
            if ok {
                assert_eq!(r.status, StatusCode::OK, "{path}={value}: {}", r.body);
            } else {
                assert_eq!(
                    (r.status, r.field()),
                    (StatusCode::BAD_REQUEST, path),
                    "{path}={value}: {}",
                    r.body
                );
            }
        }
        if least > 0 {
            let mut body = current.clone();
            match path.split_once('.') {
                None => body[field] = json!(least - 1),
                Some((group, f)) => body[group][f] = json!(least - 1),
            }
            let r = h.call(Method::PUT, "/api/v1/settings", Some(body)).await;
            assert_eq!(r.field(), path, "{path}={}: {}", least - 1, r.body);
        }
    }
    h.finish().await;
}

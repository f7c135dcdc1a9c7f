//! Every response of the real `deck serve` carries the browser security headers: console
//! pages (with their nonce), the JSON API and its errors, operations endpoints, assets,
//! redirects, refusals, the live stream, and paths nobody serves.

mod common;

use common::{Server, sqlite_url};
use deck_app::security_headers::{CONTENT_SECURITY_POLICY, page_policy};
use reqwest::header::HeaderMap;

/// The one value of `name`, failing when it is missing or repeated.
fn one<'a>(headers: &'a HeaderMap, name: &str, what: &str) -> &'a str {
    let values: Vec<&str> = headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap_or_default())
        .collect();
    assert_eq!(values.len(), 1, "{what}: {name} {values:?}");
    values[0]
}

fn assert_headers(headers: &HeaderMap, policy: &str, what: &str) {
    assert_eq!(
        one(headers, "content-security-policy", what),
        policy,
        "{what}"
    );
    assert_eq!(one(headers, "x-frame-options", what), "DENY", "{what}");
    assert_eq!(
        one(headers, "x-content-type-options", what),
        "nosniff",
        "{what}"
    );
    assert_eq!(
        one(headers, "referrer-policy", what),
        "same-origin",
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_response_carries_the_security_headers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "deck", &sqlite_url(dir.path()), &[], &[]);
    let base = format!("http://{}", server.addr);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    // A rendered page admits exactly the nonce its own inline scripts carry.
    let res = client
        .get(format!("{base}/queues"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let headers = res.headers().clone();
    let html = res.text().await.unwrap();
    let nonce = html
        .split("<script nonce=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("Leptos marks its inline scripts with a nonce");
    assert_headers(&headers, &page_policy(nonce), "console page");
    let again = client.get(format!("{base}/queues")).send().await.unwrap();
    assert_ne!(
        one(again.headers(), "content-security-policy", "second page"),
        page_policy(nonce),
        "a fresh nonce per response"
    );

    for (method, path, status, what) in [
        ("GET", "/api/v1/queues", 200, "API answer"),
        ("GET", "/api/v1/jobs/not-a-job-id", 400, "API error"),
        ("POST", "/api/v1/jobs", 400, "API error without a body"),
        ("DELETE", "/api/v1/queues", 405, "method not allowed"),
        ("GET", "/api/v1/openapi.json", 200, "OpenAPI document"),
        ("GET", "/healthz", 200, "liveness"),
        ("GET", "/readyz", 200, "readiness"),
        ("GET", "/metrics", 200, "metrics"),
        ("GET", "/assets/deck.css", 200, "stylesheet"),
        ("GET", "/assets/live.js", 200, "live script"),
        ("GET", "/assets/nope.js", 404, "missing asset"),
        ("GET", "/theme?set=carbon&back=/queues", 303, "redirect"),
        (
            "POST",
            "/fn/queue/state",
            403,
            "action without a CSRF token",
        ),
        ("GET", "/live", 200, "live stream"),
    ] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let res = client
            .request(method, format!("{base}{path}"))
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), status, "{what}: {path}");
        assert_headers(
            res.headers(),
            CONTENT_SECURITY_POLICY,
            &format!("{what} ({path})"),
        );
    }

    // A path nobody serves gets the console's not-found page: a page, with its own nonce.
    let res = client
        .get(format!("{base}/no/such/path"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404, "unknown path");
    let headers = res.headers().clone();
    let html = res.text().await.unwrap();
    let nonce = html
        .split("<script nonce=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the not-found page is a console page");
    assert_headers(
        &headers,
        &page_policy(nonce),
        "unknown path (/no/such/path)",
    );

    // Refused by the request bounds before any handler runs: still carries the headers.
    let res = client
        .post(format!("{base}/api/v1/jobs"))
        .header("content-type", "application/json")
        .header("content-length", "100000000000")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 413, "declared body over the limit");
    assert_headers(
        res.headers(),
        CONTENT_SECURITY_POLICY,
        "413 from the body bound",
    );
}

//! Every response of the real `deck serve` carries the browser security headers: console
//! pages (with their nonce), the JSON API and its errors, operations endpoints, assets,
//! redirects, refusals, the live stream, and paths nobody serves.

mod common;

use common::{Server, sqlite_url};
use deck_web::security_headers::{CONTENT_SECURITY_POLICY, page_policy};
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

/// GET the console page at `url` and check its status and that its policy admits exactly
/// the nonce its own inline scripts carry; that nonce.
async fn assert_page(client: &reqwest::Client, url: &str, status: u16, what: &str) -> String {
    let res = client
        .get(url)
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), status, "{what}");
    let headers = res.headers().clone();
    let html = res.text().await.unwrap();
    let nonce = html
        .split("<script nonce=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("{what}: Leptos marks a page's inline scripts with a nonce"))
        .to_string();
    assert_headers(&headers, &page_policy(&nonce), what);
    nonce
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

    let nonce = assert_page(&client, &format!("{base}/queues"), 200, "console page").await;
    let again = client.get(format!("{base}/queues")).send().await.unwrap();
    assert_ne!(
        one(again.headers(), "content-security-policy", "second page"),
        page_policy(&nonce),
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
    let unknown = format!("{base}/no/such/path");
    assert_page(&client, &unknown, 404, "unknown path (/no/such/path)").await;

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

//! Who may read the operations endpoints of the real `deck serve`: with users configured,
//! `/metrics`, `/readyz` and `/api/v1/openapi.json` need a viewer's credentials unless their
//! `[auth] public_…` key opens them; `/healthz` is always open; without users everything is.

mod common;

use std::path::Path;

use common::{Server, sqlite_url};

const VIEWER_TOKEN: &str = "viewer-token-0123456789";
const GUARDED: [&str; 3] = ["/metrics", "/readyz", "/api/v1/openapi.json"];

const USERS: &str = r#"
[[auth.users]]
name = "scraper"
role = "viewer"
token = "viewer-token-0123456789"

[[auth.users]]
name = "ops"
role = "operator"
password = "s3cret"
"#;

fn server_with(dir: &Path, config: &str) -> Server {
    std::fs::write(dir.join("deck.toml"), config).unwrap();
    Server::start(dir, "deck", &sqlite_url(dir), &["--no-workers"], &[])
}

/// Status, `WWW-Authenticate` and body of a GET with an optional `Authorization` value.
async fn get(
    server: &Server,
    path: &str,
    authorization: Option<&str>,
) -> (u16, Option<String>, String) {
    let mut request = reqwest::Client::new().get(format!("http://{}{path}", server.addr));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = String::from_utf8_lossy(&response.bytes().await.unwrap()).into_owned();
    (status, challenge, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_users_operations_endpoints_need_a_viewer() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(dir.path(), USERS);
    let bearer = format!("Bearer {VIEWER_TOKEN}");
    // "ops:s3cret"
    let basic = "Basic b3BzOnMzY3JldA==";

    for path in GUARDED {
        let (status, challenge, body) = get(&server, path, None).await;
        assert_eq!(status, 401, "{path} anonymously: {body}");
        assert!(
            challenge.is_some_and(|c| c.starts_with("Basic realm=")),
            "{path}: 401 without a WWW-Authenticate challenge"
        );
        assert!(!body.contains("deck_info"), "{path} leaked metrics: {body}");

        let (status, _, body) = get(&server, path, Some("Bearer not-a-known-token")).await;
        assert_eq!(status, 401, "{path} with a wrong token: {body}");

        for credentials in [bearer.as_str(), basic] {
            let (status, _, body) = get(&server, path, Some(credentials)).await;
            assert_eq!(status, 200, "{path} with {credentials}: {body}");
        }
    }
    let (_, _, metrics) = get(&server, "/metrics", Some(&bearer)).await;
    assert!(metrics.contains("deck_info"), "{metrics}");
    let (_, _, doc) = get(&server, "/api/v1/openapi.json", None).await;
    assert!(
        doc.contains("\"code\":\"unauthorized\""),
        "the API's JSON error shape: {doc}"
    );

    let (status, _, _) = get(&server, "/healthz", None).await;
    assert_eq!(status, 200, "/healthz stays open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_keys_open_each_endpoint_to_anyone() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[auth]\npublic_metrics = true\npublic_readyz = true\npublic_openapi = true\n{USERS}"
    );
    let server = server_with(dir.path(), &config);
    for path in GUARDED {
        let (status, _, body) = get(&server, path, None).await;
        assert_eq!(status, 200, "{path} anonymously: {body}");
    }
    // The console and the rest of the API still need credentials.
    assert_eq!(get(&server, "/", None).await.0, 401);
    assert_eq!(get(&server, "/api/v1/stats", None).await.0, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_public_key_opens_only_its_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!("[auth]\npublic_readyz = true\n{USERS}");
    let server = server_with(dir.path(), &config);
    assert_eq!(get(&server, "/readyz", None).await.0, 200);
    assert_eq!(get(&server, "/metrics", None).await.0, 401);
    assert_eq!(get(&server, "/api/v1/openapi.json", None).await.0, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_users_everything_is_open_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(dir.path(), "");
    for path in GUARDED {
        let (status, _, body) = get(&server, path, None).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_token_claims_jobs_and_opens_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{USERS}\n[[auth.users]]\nname = \"py-workers\"\nrole = \"worker\"\ntoken = \"worker-token-0123456789\"\n"
    );
    let server = server_with(dir.path(), &config);
    let bearer = "Bearer worker-token-0123456789";
    let claim = reqwest::Client::new()
        .post(format!("http://{}/api/v1/workers/claim", server.addr))
        .header("authorization", bearer)
        .header("content-type", "application/json")
        .body(r#"{"worker": "py-1"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(claim.status().as_u16(), 200);
    for path in GUARDED.iter().chain(&["/", "/queues", "/api/v1/stats"]) {
        let (status, _, body) = get(&server, path, Some(bearer)).await;
        assert!(
            status == 401 || status == 403,
            "{path} with a worker token answered {status}: {body}"
        );
        assert!(!body.contains("deck_info"), "{path} leaked metrics: {body}");
    }
}

//! The demo's HTTP handler: `webhook.deliver` jobs are POSTed by deck's HTTP handler (as a
//! user's `[[handlers]]` entry would send them) to an endpoint the demo serves itself, which
//! checks the signature as any receiver should. A new user sees HTTP-handled jobs succeed,
//! retry on a 503 and die on a 410 in the console.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use deck_http_handlers::{HttpHandlerConfig, signature};

/// The job type the demo sends over HTTP.
pub const JOB_TYPE: &str = "webhook.deliver";
/// Where the demo's receiver listens, on deck's own address.
pub const PATH: &str = "/demo/webhook";
/// The name the demo's secret goes by (it is never read from the environment).
const SECRET_NAME: &str = "DECK_DEMO_WEBHOOK_SECRET";

/// A secret of this process only: the sender and the receiver share it, no one else.
fn secret() -> &'static str {
    static SECRET: OnceLock<String> = OnceLock::new();
    SECRET.get_or_init(|| format!("{:032x}", rand::random::<u128>()))
}

/// The `[[handlers]]` entry the demo adds for itself.
pub fn endpoint(local: SocketAddr) -> HttpHandlerConfig {
    let mut c = HttpHandlerConfig::new(format!("http://{local}{PATH}"), &[JOB_TYPE]);
    c.secret_env = Some(SECRET_NAME.to_string());
    c.timeout = Duration::from_secs(10);
    c.concurrency = 4;
    c
}

/// Reads the demo's secret by its name.
pub fn secrets(var: &str) -> Option<String> {
    (var == SECRET_NAME).then(|| secret().to_string())
}

pub fn router() -> Router {
    Router::new().route(PATH, post(receive))
}

/// The payload's `answer` decides: `ok` → 200 with a result; `busy` → 503 with
/// `Retry-After: 2` until attempt `busy_attempts` has passed; `gone` → 410 (fatal).
async fn receive(headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = chrono::Utc::now().timestamp();
    if let Err(e) = signature::verify(
        secret().as_bytes(),
        header(signature::TIMESTAMP_HEADER),
        header(signature::SIGNATURE_HEADER),
        &body,
        now,
    ) {
        return (StatusCode::UNAUTHORIZED, e.to_string()).into_response();
    }
    let Ok(job) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not a deck envelope").into_response();
    };
    let payload = &job["payload"];
    let attempt = job["attempt"].as_u64().unwrap_or(1);
    match payload["answer"].as_str() {
        Some("gone") => (StatusCode::GONE, "subscriber endpoint removed").into_response(),
        Some("busy") if attempt <= payload["busy_attempts"].as_u64().unwrap_or(1) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", "2")],
            "subscriber busy",
        )
            .into_response(),
        _ => axum::Json(serde_json::json!({
            "delivered_to": payload["subscriber"],
            "attempt": attempt,
        }))
        .into_response(),
    }
}

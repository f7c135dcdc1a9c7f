//! `/healthz` (the process answers) and `/readyz` (it can do its job: the database answers
//! with its schema in place, its writes succeed, the workers run, the engine is not shutting
//! down).

use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use deck_engine::StoreHealth;
use deck_web::TickCache;
use serde::Serialize;

use crate::state::AppState;

/// A database that takes longer than this to answer a ping is treated as down.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one ping's answer serves every `/readyz` asking meanwhile. Probes come every
/// few seconds, so this is invisible to them; under a flood of probes it keeps the check at
/// one ping in flight and at most one per interval (it used to be one per request, each
/// through the store's reader pool, and 50 probing connections nearly stopped the engine).
const PING_REUSE: Duration = Duration::from_secs(1);

/// The shared database check: at most one ping in flight, its outcome (answer time, or
/// why it failed) reused for `PING_REUSE`.
pub struct DatabaseCheck(TickCache<Duration, String>);

impl Default for DatabaseCheck {
    fn default() -> Self {
        DatabaseCheck(TickCache::new(PING_REUSE))
    }
}

impl DatabaseCheck {
    async fn check(&self, store: &dyn deck_engine::StoreReads) -> Check {
        let outcome = self
            .0
            .get(|| async {
                let started = Instant::now();
                match tokio::time::timeout(PING_TIMEOUT, store.ping()).await {
                    Ok(Ok(())) => Ok(started.elapsed()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!("no answer within {} s", PING_TIMEOUT.as_secs())),
                }
            })
            .await;
        match outcome {
            Ok(took) => Check::new(
                "database",
                "ok",
                format!("answered in {} ms", took.as_millis()),
            ),
            Err(e) => Check::new("database", "fail", e),
        }
    }
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn healthz() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "ok\n",
    )
        .into_response()
}

#[derive(Debug, Serialize)]
pub struct Readiness {
    /// `ready` or `not_ready`.
    pub status: &'static str,
    pub instance: String,
    pub backend: &'static str,
    pub checks: Vec<Check>,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    /// `ok`, `warn` (reported, does not fail readiness) or `fail`.
    pub status: &'static str,
    pub detail: String,
}

impl Check {
    fn new(name: &'static str, status: &'static str, detail: impl Into<String>) -> Self {
        Check {
            name,
            status,
            detail: detail.into(),
        }
    }
}

async fn readyz(State(state): State<AppState>) -> Response {
    let store = state.store();
    let snapshot = state.engine.status();
    let mut checks = Vec::new();

    checks.push(state.database_check.check(store.as_ref()).await);
    // Issue 11 (write health): the store's own record of its recent writes; no database call.
    checks.push(writes_check(&store.health()));

    checks.push(if snapshot.draining {
        Check::new("engine", "fail", "shutting down: no new work is claimed")
    } else {
        Check::new("engine", "ok", "running")
    });

    checks.push(if !snapshot.run_workers {
        Check::new(
            "workers",
            "ok",
            "this instance runs no workers (producer and console only)",
        )
    } else if snapshot.workers_total == 0 {
        Check::new("workers", "fail", "no worker is running")
    } else {
        Check::new(
            "workers",
            "ok",
            format!(
                "{} of {} busy, {} buffered",
                snapshot.workers_busy, snapshot.workers_total, snapshot.buffered
            ),
        )
    });

    // Lag is reported, not failed on: taking this instance out of rotation would not make a
    // backed-up queue drain any faster. It comes from the shared telemetry snapshot (one
    // read per tick), not a read per probe.
    if let Ok(Ok(telemetry)) = tokio::time::timeout(PING_TIMEOUT, state.telemetry.snapshot()).await
    {
        let lagging: Vec<String> = telemetry
            .queues
            .iter()
            .filter(|q| {
                q.lag_crit_secs
                    .is_some_and(|crit| q.lag_max_ms > u64::from(crit) * 1000)
            })
            .map(|q| format!("{} ({} s)", q.queue, q.lag_max_ms / 1000))
            .collect();
        checks.push(if lagging.is_empty() {
            Check::new("queue_lag", "ok", "no queue over its critical lag")
        } else {
            Check::new(
                "queue_lag",
                "warn",
                format!("over critical lag: {}", lagging.join(", ")),
            )
        });
    }

    let ready = checks.iter().all(|c| c.status != "fail");
    let body = Readiness {
        status: if ready { "ready" } else { "not_ready" },
        instance: snapshot.instance_id,
        backend: store.backend(),
        checks,
    };
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body)).into_response()
}

/// `writes`: fails while the store's writes fail at the storage level (disk full, I/O error)
/// and once it stopped accepting work (its database file was deleted or replaced). A ping
/// reads, so it would still answer in both cases.
fn writes_check(health: &StoreHealth) -> Check {
    if let Some(why) = &health.unusable {
        return Check::new("writes", "fail", why.clone());
    }
    if let Some(f) = &health.write_failure {
        return Check::new(
            "writes",
            "fail",
            format!(
                "{} failed writes since {}: {}",
                f.failures,
                f.since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                f.error
            ),
        );
    }
    match health.last_write_at {
        Some(at) => Check::new(
            "writes",
            "ok",
            format!(
                "last write committed at {}",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        ),
        None => Check::new("writes", "ok", "no write since the store opened"),
    }
}

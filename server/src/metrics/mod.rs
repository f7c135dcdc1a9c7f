//! `/metrics`: Prometheus text exposition of the store's telemetry and this instance's
//! runtime numbers. The store's part comes from the shared snapshot (read at most
//! once per 2 s tick, however many scrapers ask); the runtime's part is read live.

mod prom;
#[cfg(test)]
mod tests;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use deck_engine::{QueueStats, RunTimeHistogram, Summary};

pub use prom::{Kind, PromText};

use crate::state::AppState;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn metrics(State(state): State<AppState>) -> Response {
    let (telemetry, run_times) =
        futures::join!(state.telemetry.snapshot(), state.telemetry.run_times());
    let telemetry = match telemetry {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(event = "metrics.store_read_failed", error = %e, "metrics: store telemetry unavailable");
            None
        }
    };
    let run_times = run_times
        .inspect_err(|e| {
            tracing::warn!(event = "metrics.store_read_failed", error = %e, "metrics: run times unavailable");
        })
        .ok();
    let mut body = render(
        &state,
        telemetry
            .as_ref()
            .map(|t| (&t.summary, t.queues.as_slice())),
    );
    if let Some(times) = &run_times {
        body.push_str(&run_time_families(times));
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

fn render(state: &AppState, telemetry: Option<(&Summary, &[QueueStats])>) -> String {
    let snapshot = state.engine.status();
    let mut m = PromText::default();
    let instance = snapshot.instance_id.as_str();

    m.family("deck_info", Kind::Gauge, "This deck process (always 1).");
    m.sample(
        "deck_info",
        &[
            ("instance", instance),
            ("version", env!("CARGO_PKG_VERSION")),
            ("backend", state.store().backend()),
        ],
        1,
    );
    m.family(
        "deck_uptime_seconds",
        Kind::Gauge,
        "Seconds since this process started serving.",
    );
    m.sample(
        "deck_uptime_seconds",
        &[],
        state.started.elapsed().as_secs_f64(),
    );

    m.family(
        "deck_store_up",
        Kind::Gauge,
        "1 when the store answered the telemetry reads.",
    );
    m.sample("deck_store_up", &[], u8::from(telemetry.is_some()));

    if let Some((s, queues)) = telemetry {
        store_families(&mut m, s, queues);
    }

    m.family(
        "deck_workers_total",
        Kind::Gauge,
        "Workers of this instance.",
    );
    m.sample(
        "deck_workers_total",
        &[("instance", instance)],
        snapshot.workers_total,
    );
    m.family(
        "deck_workers_busy",
        Kind::Gauge,
        "Workers of this instance running a job.",
    );
    m.sample(
        "deck_workers_busy",
        &[("instance", instance)],
        snapshot.workers_busy,
    );
    m.family(
        "deck_prefetch_buffered",
        Kind::Gauge,
        "Claimed jobs waiting in this instance's prefetch buffer.",
    );
    m.sample(
        "deck_prefetch_buffered",
        &[("instance", instance)],
        snapshot.buffered,
    );
    m.family(
        "deck_prefetch_capacity",
        Kind::Gauge,
        "Size of this instance's prefetch buffer.",
    );
    m.sample(
        "deck_prefetch_capacity",
        &[("instance", instance)],
        snapshot.prefetch,
    );
    m.family(
        "deck_draining",
        Kind::Gauge,
        "1 while this instance shuts down.",
    );
    m.sample(
        "deck_draining",
        &[("instance", instance)],
        u8::from(snapshot.draining),
    );

    let c = &snapshot.counters;
    m.family(
        "deck_instance_jobs_total",
        Kind::Counter,
        "Job events in this instance since it started.",
    );
    for (event, value) in [
        ("claimed", c.claimed),
        ("started", c.started),
        ("succeeded", c.succeeded),
        ("retried", c.retried),
        ("dead", c.dead),
        ("not_applied", c.not_applied),
        ("stale_dropped", c.stale_dropped),
        ("deferred", c.deferred),
        ("released", c.released),
        ("abandoned", c.abandoned),
    ] {
        m.sample(
            "deck_instance_jobs_total",
            &[("instance", instance), ("event", event)],
            value,
        );
    }

    m.family(
        "deck_circuit_breaker_open",
        Kind::Gauge,
        "1 while a job type's circuit breaker is open (0 closed, 0.5 half-open).",
    );
    for b in &snapshot.breakers {
        let v = match b.state {
            deck_engine::runtime::BreakerStateName::Closed => 0.0,
            deck_engine::runtime::BreakerStateName::HalfOpen => 0.5,
            deck_engine::runtime::BreakerStateName::Open => 1.0,
        };
        m.sample(
            "deck_circuit_breaker_open",
            &[("instance", instance), ("job_type", &b.job_type)],
            v,
        );
    }
    m.finish()
}

/// Per job type over the console's window (the last hour): the p50 / p95 run time read from
/// the run-time bins (gauges, not a Prometheus summary: the bins keep counts, not a running
/// sum) and how many runs they count.
fn run_time_families(times: &[RunTimeHistogram]) -> String {
    let mut m = PromText::default();
    m.family(
        "deck_job_run_time_seconds",
        Kind::Gauge,
        "Run time of the jobs of each type that finished in the last hour, at a quantile (to ~10 %).",
    );
    for h in times {
        for (quantile, q) in [("0.5", 0.5), ("0.95", 0.95)] {
            if let Some(ms) = h.quantile_ms(q) {
                m.sample(
                    "deck_job_run_time_seconds",
                    &[("job_type", &h.job_type), ("quantile", quantile)],
                    ms / 1_000.0,
                );
            }
        }
    }
    m.family(
        "deck_job_runs_last_hour",
        Kind::Gauge,
        "Runs of each job type that finished (archive or dead-letter) in the last hour.",
    );
    for h in times {
        m.sample(
            "deck_job_runs_last_hour",
            &[("job_type", &h.job_type)],
            h.runs(),
        );
    }
    m.finish()
}

fn store_families(m: &mut PromText, s: &Summary, queues: &[QueueStats]) {
    m.family(
        "deck_jobs",
        Kind::Gauge,
        "Jobs in each pillar (active, archive, dlq).",
    );
    let active = s.pending + s.scheduled + s.fetched + s.processing;
    m.sample("deck_jobs", &[("pillar", "active")], active);
    m.sample("deck_jobs", &[("pillar", "archive")], s.succeeded);
    m.sample("deck_jobs", &[("pillar", "dlq")], s.dlq);

    m.family(
        "deck_jobs_active",
        Kind::Gauge,
        "Active jobs by status (scheduled = pending with a future due time).",
    );
    for (status, v) in [
        ("pending", s.pending),
        ("scheduled", s.scheduled),
        ("fetched", s.fetched),
        ("processing", s.processing),
    ] {
        m.sample("deck_jobs_active", &[("status", status)], v);
    }

    m.family(
        "deck_jobs_finished",
        Kind::Gauge,
        "Jobs finished within the trailing window, by outcome.",
    );
    for (window, outcome, v) in [
        ("1m", "succeeded", s.succeeded_1m),
        ("1m", "failed", s.failed_1m),
        ("5m", "succeeded", s.succeeded_5m),
        ("5m", "failed", s.failed_5m),
    ] {
        m.sample(
            "deck_jobs_finished",
            &[("window", window), ("outcome", outcome)],
            v,
        );
    }
    m.family(
        "deck_jobs_retried_5m",
        Kind::Gauge,
        "Retries scheduled in the last 5 minutes.",
    );
    m.sample("deck_jobs_retried_5m", &[], s.retried_5m);
    m.family(
        "deck_throughput_jobs_per_second",
        Kind::Gauge,
        "Finished jobs per second over the trailing window.",
    );
    m.sample(
        "deck_throughput_jobs_per_second",
        &[("window", "1m")],
        s.throughput_1m(),
    );
    m.sample(
        "deck_throughput_jobs_per_second",
        &[("window", "5m")],
        s.throughput_5m(),
    );
    m.family(
        "deck_failure_rate_5m",
        Kind::Gauge,
        "Share of finished jobs that failed in the last 5 minutes (0-1).",
    );
    m.sample("deck_failure_rate_5m", &[], s.failure_rate_5m());

    m.family("deck_queue_jobs", Kind::Gauge, "Jobs per queue and state.");
    for q in queues {
        for (state, v) in [
            ("pending", q.pending),
            ("scheduled", q.scheduled),
            ("fetched", q.fetched),
            ("processing", q.processing),
            ("succeeded", q.succeeded),
            ("failed", q.failed),
        ] {
            m.sample(
                "deck_queue_jobs",
                &[("queue", &q.queue), ("state", state)],
                v,
            );
        }
    }
    m.family(
        "deck_queue_lag_seconds",
        Kind::Gauge,
        "Age of due pending jobs per queue (avg and max).",
    );
    for q in queues {
        m.sample(
            "deck_queue_lag_seconds",
            &[("queue", &q.queue), ("stat", "avg")],
            q.lag_avg_ms as f64 / 1000.0,
        );
        m.sample(
            "deck_queue_lag_seconds",
            &[("queue", &q.queue), ("stat", "max")],
            q.lag_max_ms as f64 / 1000.0,
        );
    }
    m.family(
        "deck_queue_paused",
        Kind::Gauge,
        "1 while a queue is paused.",
    );
    for q in queues {
        m.sample(
            "deck_queue_paused",
            &[("queue", &q.queue)],
            u8::from(q.paused),
        );
    }
}

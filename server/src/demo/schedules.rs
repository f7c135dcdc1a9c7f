//! The demo's recurring schedules, declared like `deck.toml`'s: one every 15 seconds so a
//! new user sees runs within a minute, one a minute that skips while its last run is still
//! going, and a nightly one in a time zone other than UTC to show the next occurrences.

use deck_engine::{MisfirePolicy, OverlapPolicy, ScheduleDefinition, ScheduleJob, ScheduleSpec};
use serde_json::json;

fn job(queue: &str, job_type: &str, payload: serde_json::Value, tags: &[&str]) -> ScheduleJob {
    ScheduleJob {
        queue: queue.into(),
        job_type: job_type.into(),
        payload: payload.to_string(),
        priority: 0,
        tags: tags.iter().map(|t| t.to_string()).collect(),
        max_attempts: None,
        expires_after_secs: Some(300),
    }
}

pub fn schedules() -> Vec<ScheduleDefinition> {
    vec![
        ScheduleDefinition {
            name: "demo-ledger-sync".into(),
            spec: ScheduleSpec::EverySecs(15),
            time_zone: "UTC".into(),
            job: job(
                "billing",
                "billing.sync",
                json!({"account": "ACC-LEDGER", "throttled_attempts": 0}),
                &["ledger"],
            ),
            misfire: MisfirePolicy::Skip,
            overlap: OverlapPolicy::Allow,
        },
        ScheduleDefinition {
            name: "demo-minute-report".into(),
            spec: ScheduleSpec::Cron("* * * * *".into()),
            time_zone: "UTC".into(),
            // Runs for 75 s: the next minute's occurrence finds it still running and is
            // skipped (the schedule page shows "skipped").
            job: job(
                "reports",
                "report.generate",
                json!({"name": "minute-kpis", "seconds": 75, "broken": false}),
                &["kind:report"],
            ),
            misfire: MisfirePolicy::RunOnce,
            overlap: OverlapPolicy::SkipWhileActive,
        },
        ScheduleDefinition {
            name: "demo-nightly-digest".into(),
            spec: ScheduleSpec::Cron("30 2 * * *".into()),
            time_zone: "Europe/Berlin".into(),
            job: job(
                "emails",
                "email.send",
                json!({"to": "team@example.com", "template": "nightly-digest"}),
                &["digest"],
            ),
            misfire: MisfirePolicy::RunAll { cap: 3 },
            overlap: OverlapPolicy::Allow,
        },
    ]
}

/// Who the audit log names for the demo's schedule changes.
const DEMO_ACTOR: &str = "demo";

/// Create the demo's schedules (or resume them: a start without `--demo` paused them), so
/// they run while the demo does.
pub async fn start(ops: &deck_engine::Operations) {
    for def in schedules() {
        let name = def.name.clone();
        let result = match ops.schedule(&name).await {
            Ok(s) if s.enabled => Ok(()),
            Ok(_) => ops
                .set_schedule_enabled(DEMO_ACTOR, &name, true)
                .await
                .map(|_| ()),
            Err(deck_engine::StoreError::ScheduleNotFound(_)) => {
                ops.create_schedule(DEMO_ACTOR, def).await.map(|_| ())
            }
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::warn!(event = "demo.schedule_failed", schedule = %name, error = %e, "demo: cannot set up schedule {name}");
        }
    }
}

/// A start without `--demo` pauses the demo's schedules: their handlers are not registered
/// then, and their jobs would only fail.
pub async fn pause(ops: &deck_engine::Operations) {
    for def in schedules() {
        if let Ok(s) = ops.schedule(&def.name).await
            && s.enabled
            && let Err(e) = ops.set_schedule_enabled(DEMO_ACTOR, &def.name, false).await
        {
            tracing::warn!(event = "demo.schedule_failed", schedule = %def.name, error = %e, "demo: cannot pause schedule");
        }
    }
}

//! Three `deck serve` processes on one SQLite file, all declaring the same `[[schedules]]`
//! in `deck.toml`, over a clock-minute boundary, one of them killed (SIGKILL) and started
//! again midway: every occurrence is enqueued exactly once and none is missed.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{Timelike, Utc};
use common::*;
use deck_engine::{JobFilter, Pillar};

/// Declared beside [`EVERY_SECOND_SCHEDULE`].
const CRON_SCHEDULE: &str = r#"
[[schedules]]
name = "cron-two-seconds"
cron = "*/2 * * * * *"
time_zone = "America/New_York"
queue = "crons"
job_type = "test.record"
payload = { sleep_ms = 1 }
"#;

async fn jobs_of_queue(store: &std::sync::Arc<dyn deck_engine::Store>, queue: &str) -> u64 {
    let filter = JobFilter {
        queue: Some(queue.into()),
        ..JobFilter::default()
    };
    let mut total = 0;
    for pillar in Pillar::ALL {
        total += store
            .bulk_preview(pillar, &filter, 0)
            .await
            .expect("count")
            .matching;
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_enqueue_each_occurrence_once_across_a_restart_and_a_minute_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!("{EVERY_SECOND_SCHEDULE}{CRON_SCHEDULE}");
    std::fs::write(dir.path().join("deck.toml"), config).unwrap();
    let url = sqlite_url(dir.path());
    // The side-effect log registers the `test.record` handler the schedules' jobs run.
    let effects = dir.path().join("effects.log");
    let env = [("DECK_TEST_SIDE_EFFECT_LOG", effects.to_str().unwrap())];
    let flags = ["--poll-interval", "100ms", "--workers", "2"];

    // Waiting for the wall clock itself: the run must span a minute boundary, so it starts
    // no later than 45 s into a minute and ends 4 s after the next one.
    if Utc::now().second() > 45 {
        let wait = 61 - u64::from(Utc::now().second());
        tokio::time::sleep(Duration::from_secs(wait)).await;
    }
    let started = Utc::now();
    let boundary = {
        let next = started + chrono::TimeDelta::seconds(60 - i64::from(started.second()));
        next.with_nanosecond(0).unwrap()
    };

    let a = Server::start(dir.path(), "a", &url, &flags, &env);
    let mut b = Server::start(dir.path(), "b", &url, &flags, &env);
    let c = Server::start(dir.path(), "c", &url, &flags, &env);

    // Kill one process hard a few seconds in and start it again (it declares the same
    // schedules: unchanged, nothing written).
    tokio::time::sleep(Duration::from_secs(3)).await;
    b.kill_hard();
    let b = Server::start(dir.path(), "b2", &url, &flags, &env);

    let end = boundary + chrono::TimeDelta::seconds(4);
    while Utc::now() < end {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut servers = [a, b, c];
    for s in &mut servers {
        s.terminate();
    }

    let store = open(&url).await;
    for (name, queue, step) in [
        ("every-second", "ticks", 1),
        ("cron-two-seconds", "crons", 2),
    ] {
        let runs = store.schedule_runs(name, 1_000).await.unwrap();
        let times: BTreeSet<i64> = runs.iter().map(|r| r.scheduled_at.timestamp()).collect();
        assert_eq!(times.len(), runs.len(), "{name}: one key per occurrence");
        let first = *times.first().expect("runs");
        let last = *times.last().expect("runs");
        assert!(
            first >= started.timestamp(),
            "{name}: nothing before the first start (no catch-up from the epoch)"
        );
        assert!(
            last > boundary.timestamp(),
            "{name}: ran past the minute boundary (last {last}, boundary {})",
            boundary.timestamp()
        );
        let missing: Vec<i64> = (first..=last)
            .step_by(step)
            .filter(|t| !times.contains(t))
            .collect();
        assert!(
            missing.is_empty(),
            "{name}: occurrences missed: {missing:?}"
        );
        assert!(
            runs.iter().all(|r| r.job_id.is_some() && !r.manual),
            "{name}: every occurrence enqueued a job"
        );
        assert_eq!(
            jobs_of_queue(&store, queue).await,
            runs.len() as u64,
            "{name}: exactly one job per occurrence"
        );
        assert!(
            runs.len() >= 8 / step,
            "{name}: {} runs in the window",
            runs.len()
        );
    }

    let (_, archived, _) = pillar_counts(&store).await;
    assert!(archived > 0, "the scheduled jobs ran");
}

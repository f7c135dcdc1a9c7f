//! Three `deck serve` processes on one SQL Server database drain a backlog, a batch and a
//! schedule while one of them is killed (SIGKILL) and started again: every job ran once or is
//! a `Zombie` (it was running when its process died, and is never run again), nothing is
//! lost, the maintained counters equal the row counts, the schedule enqueued each occurrence
//! once, and the batch's callbacks fired once.
//!
//! Runs when `DECK_TEST_MSSQL` holds a connection string to a database the login may create
//! schemas in (as `engine/tests/sqlserver_store.rs`); otherwise it prints a notice and
//! passes. It works in its own schema (`deck_mi_<pid>_<time>`), left behind for inspection.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use deck_engine::conformance::support::{assert_counters_match_rows, filter_queue, ids_in};
use deck_engine::{BatchId, FailureReason, JobState, Pillar, Store, StoreOptions};
use serde_json::{Value, json};

const BACKLOG: usize = 240;
const MEMBERS: usize = 30;

/// How long the drain may take: a T-SQL server under test may be far slower than SQL
/// Server (Babelfish on two cores moves tens of jobs a second).
const DRAIN_PATIENCE: Duration = Duration::from_secs(900);

fn connection_string() -> Option<String> {
    std::env::var("DECK_TEST_MSSQL")
        .ok()
        .filter(|s| !s.trim().is_empty())
}

fn scratch_schema() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("deck_mi_{}_{nanos}", std::process::id())
}

async fn open_schema(connection: &str, schema: &str) -> Arc<dyn Store> {
    let options = StoreOptions {
        schema: schema.to_string(),
        auto_create_schema: true,
        pool_size: 4,
        ..StoreOptions::default()
    };
    deck_engine::open_store(connection, &options)
        .await
        .expect("the store opens (and creates its schema)")
}

/// The ids of `queue`'s jobs in every pillar.
async fn queue_ids(store: &Arc<dyn Store>, queue: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for pillar in Pillar::ALL {
        ids.extend(
            ids_in(&**store, pillar, filter_queue(queue))
                .await
                .into_iter()
                .map(|id| id.to_string()),
        );
    }
    ids
}

async fn post_json(server: &Server, path: &str, body: &Value) -> (u16, Value) {
    let (status, text) =
        http_post(server.addr, path, &body.to_string(), PATIENCE).expect("the server answers");
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}

/// Wait until what the stopped instances sent has landed: a statement in flight when its
/// process exits still runs to its end on the server (a slow server's schedule fire can take
/// seconds behind the others' row lock), so two reads in a row must agree, and the counters
/// must equal the rows.
async fn wait_until_settled(store: &Arc<dyn Store>) {
    async fn snapshot(store: &Arc<dyn Store>) -> ((u64, u64, u64), (u64, u64, u64)) {
        let s = store.summary().await.expect("summary");
        let counters = (
            s.pending + s.scheduled + s.fetched + s.processing,
            s.succeeded,
            s.dlq,
        );
        (pillar_counts(store).await, counters)
    }
    let deadline = Instant::now() + PATIENCE;
    let mut last = snapshot(store).await;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = snapshot(store).await;
        if now == last && now.0 == now.1 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "rows and counters never settled: {now:?}"
        );
        last = now;
    }
}

fn start(dir: &Path, name: &str, connection: &str, env: &[(&str, &str)]) -> Server {
    Server::start(dir, name, connection, &[], env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_survive_a_kill_and_do_each_thing_once() {
    let Some(connection) = connection_string() else {
        eprintln!("skipped: DECK_TEST_MSSQL not set");
        return;
    };
    let schema = scratch_schema();
    eprintln!("schema [{schema}]");
    let dir = tempfile::tempdir().unwrap();
    let config = quick_rescue_config(4, 4, "3s") + EVERY_SECOND_SCHEDULE;
    std::fs::write(dir.path().join("deck.toml"), config).unwrap();
    let effects = dir.path().join("effects.log");
    let env = [
        ("DECK_TEST_SIDE_EFFECT_LOG", effects.to_str().unwrap()),
        ("DECK_STORE__SCHEMA", schema.as_str()),
    ];

    // The schema first, so the instances meet an installed one (their own racing install is
    // the store suite's concern), then the backlog.
    let store = open_schema(&connection, &schema).await;
    let work_ids = enqueue_records(&store, "work", BACKLOG, r#"{"sleep_ms": 100}"#).await;

    // A batch through the API, as a user would send it, before the other two instances start:
    // on Babelfish every new session parses the statements it meets, and three instances'
    // first sessions at once held the batch past the command timeout.
    let a = start(dir.path(), "a", &connection, &env);
    let members: Vec<Value> = (0..MEMBERS)
        .map(|i| json!({"queue": "members", "type": "test.record", "payload": {"sleep_ms": 100, "part": i}}))
        .collect();
    let callback =
        |kind: &str| json!({"queue": "callbacks", "type": "test.record", "payload": {"on": kind}});
    let (status, created) = post_json(
        &a,
        "/api/v1/batches",
        &json!({
            "description": "multi-instance",
            "jobs": members,
            "callbacks": {
                "on_success": callback("success"),
                "on_complete": callback("complete"),
                "on_death": callback("death"),
            }
        }),
    )
    .await;
    assert_eq!(status, 201, "{created}\n{}", a.log_text());
    let batch_id: BatchId = created["batch"]["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("a batch id");
    let mut b = start(dir.path(), "b", &connection, &env);
    let c = start(dir.path(), "c", &connection, &env);

    // Kill one instance once the work is under way: some jobs done, others running on it.
    wait_for_records(&effects, 40, &b, DRAIN_PATIENCE).await;
    b.kill_hard();
    let b2 = start(dir.path(), "b2", &connection, &env);

    wait_until_quiet(
        &store,
        &["work", "members", "callbacks"],
        &[&a, &b, &c, &b2],
        DRAIN_PATIENCE,
    )
    .await;
    // The batch's last member may have fired its callbacks after the wait's last look.
    let batch = store
        .get_batch(batch_id)
        .await
        .expect("get batch")
        .expect("the batch exists");
    assert!(batch.finished_at.is_some(), "the batch finished: {batch:?}");
    wait_until_quiet(&store, &["callbacks"], &[&a, &b, &c, &b2], DRAIN_PATIENCE).await;

    let mut servers = [a, c, b2];
    for server in &mut servers {
        let status = server.terminate();
        assert!(status.success(), "{status}: {}", server.log_text());
    }
    wait_until_settled(&store).await;

    // Every job ran once, or is a Zombie that ran at most once; none is lost.
    let recorded = recorded_ids(&effects);
    let runs = runs_by_id(&recorded);
    let member_ids = queue_ids(&store, "members").await;
    assert_eq!(member_ids.len(), MEMBERS, "no member lost");
    let mut zombies = 0;
    for id in work_ids.iter().chain(&member_ids) {
        let job = store
            .get_job(id.parse().unwrap())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("job {id} is lost"));
        let times = runs.get(id.as_str()).copied().unwrap_or(0);
        match job.state {
            JobState::Succeeded => {
                assert_eq!(times, 1, "succeeded job {id} ran {times} times");
                assert_eq!(job.attempt, 1, "job {id} needed more than one attempt");
            }
            JobState::Dead(FailureReason::Zombie) => {
                zombies += 1;
                assert!(times <= 1, "zombie {id} ran {times} times");
            }
            other => panic!("job {id} ended as {other}"),
        }
    }
    let [active, archived, dead] = queue_rows(&store, "work").await;
    assert_eq!(
        (active, archived + dead),
        (0, BACKLOG as u64),
        "the backlog is in the archive or the DLQ"
    );

    // The batch's counts follow its members, and each due callback is one job.
    assert_eq!(
        batch.succeeded + batch.dead,
        MEMBERS as u32,
        "members counted: {batch:?}"
    );
    let mut fired = vec![batch.complete_job_id.expect("on_complete fired")];
    if batch.dead == 0 {
        fired.push(batch.success_job_id.expect("on_success fired"));
        assert!(batch.death_job_id.is_none(), "on_death without a death");
    } else {
        fired.push(batch.death_job_id.expect("on_death fired"));
        assert!(batch.success_job_id.is_none(), "on_success despite a death");
    }
    let callback_ids: BTreeSet<String> = queue_ids(&store, "callbacks").await.into_iter().collect();
    let fired: BTreeSet<String> = fired.iter().map(ToString::to_string).collect();
    assert_eq!(callback_ids, fired, "each due callback enqueued once");
    for id in &callback_ids {
        assert_eq!(runs.get(id.as_str()), Some(&1), "callback {id} ran once");
    }

    // The schedule: one job per occurrence, none missed while an instance was down.
    let schedule_runs = store.schedule_runs("every-second", 10_000).await.unwrap();
    let times: BTreeSet<i64> = schedule_runs
        .iter()
        .map(|r| r.scheduled_at.timestamp())
        .collect();
    assert_eq!(times.len(), schedule_runs.len(), "one run per occurrence");
    assert!(schedule_runs.len() >= 5, "{} runs", schedule_runs.len());
    let (first, last) = (*times.first().unwrap(), *times.last().unwrap());
    let missing: Vec<i64> = (first..=last).filter(|t| !times.contains(t)).collect();
    assert!(missing.is_empty(), "occurrences missed: {missing:?}");
    let tick_ids = queue_ids(&store, "ticks").await;
    assert_eq!(
        tick_ids.len(),
        schedule_runs.len(),
        "exactly one job per occurrence"
    );
    for id in &tick_ids {
        let times = runs.get(id.as_str()).copied().unwrap_or(0);
        assert!(times <= 1, "tick {id} ran {times} times");
    }

    assert_counters_match_rows(&*store).await;
    eprintln!(
        "{} work jobs and {MEMBERS} members: {zombies} zombies; {} occurrences; {} callbacks; \
         {} side effects",
        BACKLOG,
        schedule_runs.len(),
        callback_ids.len(),
        recorded.len()
    );
}

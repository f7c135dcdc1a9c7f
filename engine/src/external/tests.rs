//! The pull protocol against a real SQLite file: ownership, rescue, cancel, timeouts,
//! throttling and release behave as for in-process workers.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::{EngineConfig, RescuePolicy};
use crate::engine::Engine;
use crate::handler::HandlerRegistry;
use crate::maintenance::rescue;
use crate::model::{EnqueueRequest, InstanceKind, Pillar, QueuePatch};
use crate::store::{self, StoreOptions, StoreReads};

struct Fixture {
    _dir: tempfile::TempDir,
    engine: Engine,
}

impl Fixture {
    /// An engine that runs no jobs itself, so only the external worker takes them.
    async fn new() -> Fixture {
        Fixture::with(EngineConfig::default()).await
    }

    async fn with(config: EngineConfig) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deck.db");
        let store = store::sqlite::open(path.to_str().unwrap(), &StoreOptions::default())
            .await
            .unwrap();
        let config = EngineConfig {
            run_workers: false,
            rescue_interval: Duration::from_secs(3600),
            ..config
        };
        let engine = Engine::start(store, HandlerRegistry::new(), config)
            .await
            .unwrap();
        Fixture { _dir: dir, engine }
    }

    fn workers(&self) -> &ExternalWorkers {
        self.engine.external_workers()
    }

    fn store(&self) -> &Arc<dyn StoreReads> {
        self.engine.store()
    }

    async fn enqueue(&self, queue: &str, job_type: &str) -> JobId {
        self.engine
            .enqueue(EnqueueRequest::new(queue, job_type, r#"{"n":1}"#))
            .await
            .unwrap()
            .id
    }

    async fn job(&self, id: JobId) -> Job {
        self.store().get_job(id).await.unwrap().unwrap()
    }

    async fn claim(&self, name: &str, limit: u32) -> Claimed {
        self.workers().claim(claim_as(name, limit)).await.unwrap()
    }
}

fn claim_as(name: &str, limit: u32) -> ExternalClaim {
    ExternalClaim {
        profile: WorkerProfile {
            name: name.into(),
            host: "test-host".into(),
            pid: 42,
            agent: "test-worker/1".into(),
            concurrency: 4,
            queues: None,
            types: None,
        },
        limit,
        wait: Duration::ZERO,
    }
}

fn ids(c: &Claimed) -> Vec<JobId> {
    c.jobs.iter().map(|j| j.job.id).collect()
}

#[tokio::test]
async fn a_claimed_job_runs_and_completes_once() {
    let f = Fixture::new().await;
    let id = f.enqueue("mail", "email.send").await;
    let claimed = f.claim("py-1", 10).await;
    assert_eq!(ids(&claimed), vec![id]);
    let lease = claimed.lease.clone().unwrap();
    assert_eq!(lease.worker(), "py-1");
    let started = &claimed.jobs[0].job;
    assert_eq!((started.state, started.attempt), (JobState::Processing, 1));
    assert_eq!(f.job(id).await.worker_id.as_deref(), Some(lease.as_str()));

    let beat = f.workers().heartbeat(&lease, &[id]).await.unwrap();
    assert_eq!(beat.alive, vec![id]);
    assert!(f.workers().progress(&lease, id, 50, "half").await.unwrap());

    let settled = f
        .workers()
        .complete(&lease, id, Some(r#"{"sent":true}"#.into()))
        .await
        .unwrap();
    assert_eq!(settled, Some(Settled::Succeeded));
    let done = f.job(id).await;
    assert_eq!(done.pillar(), Pillar::Archive);
    assert_eq!(done.result.as_deref(), Some(r#"{"sent":true}"#));
    // A repeat (a retried HTTP call) changes nothing.
    assert_eq!(f.workers().complete(&lease, id, None).await.unwrap(), None);
    assert_eq!(f.job(id).await.result.as_deref(), Some(r#"{"sent":true}"#));

    // The worker shows as an external instance with what it asked for.
    let instances = f
        .store()
        .list_instances(Duration::from_secs(60))
        .await
        .unwrap();
    let row = instances.iter().find(|i| i.id == "ext:py-1").unwrap();
    assert_eq!((row.kind, row.workers_total), (InstanceKind::External, 4));
    assert_eq!(row.version, "test-worker/1");
}

#[tokio::test]
async fn a_stale_lease_is_refused_and_changes_nothing() {
    let f = Fixture::new().await;
    let id = f.enqueue("q", "t").await;
    let old = f.claim("w", 1).await.lease.unwrap();
    // The job goes zombie and is resurrected; another lease holds it now.
    let zero = RescuePolicy {
        default_zombie_timeout: Duration::ZERO,
        ..RescuePolicy::default()
    };
    tokio::time::sleep(Duration::from_millis(5)).await; // let the heartbeat age past zero
    assert_eq!(
        rescue(&**f.engine.control().store(), &zero)
            .await
            .unwrap()
            .zombies,
        1
    );
    f.engine
        .operations()
        .resurrect("ops", id, None)
        .await
        .unwrap();
    let new = f.claim("w", 1).await.lease.unwrap();
    assert_ne!(new, old);

    let beat = f.workers().heartbeat(&old, &[id]).await.unwrap();
    assert_eq!((beat.alive.len(), beat.lost.clone()), (0, vec![id]));
    assert_eq!(f.workers().complete(&old, id, None).await.unwrap(), None);
    let failed = WorkerFailure::Fatal;
    assert_eq!(
        f.workers().fail(&old, id, failed, None, "x").await.unwrap(),
        None
    );
    assert!(f.workers().release(&old, &[id]).await.unwrap().is_empty());
    assert!(!f.workers().progress(&old, id, 1, "x").await.unwrap());
    let j = f.job(id).await;
    assert_eq!(
        (j.state, j.worker_id.as_deref()),
        (JobState::Processing, Some(new.as_str()))
    );
}

#[tokio::test]
async fn a_silent_worker_is_rescued_by_the_dead_instance_timeout() {
    let f = Fixture::new().await;
    let id = f.enqueue("q", "t").await;
    let claimed = f.claim("killed", 1).await;
    assert_eq!(ids(&claimed), vec![id]);
    // The worker is killed: no more calls. Its instance row ages past the timeout.
    let policy = RescuePolicy {
        dead_instance_timeout: Duration::ZERO,
        ..RescuePolicy::default()
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    let report = rescue(&**f.engine.control().store(), &policy)
        .await
        .unwrap();
    assert_eq!(report.zombies, 1, "{report:?}");
    assert_eq!(f.job(id).await.state, JobState::Dead(FailureReason::Zombie));
}

#[tokio::test]
async fn an_operator_cancel_reaches_the_worker_through_its_heartbeat() {
    let f = Fixture::new().await;
    let id = f.enqueue("q", "t").await;
    let lease = f.claim("w", 1).await.lease.unwrap();
    f.engine.operations().cancel("ops", id).await.unwrap();
    let beat = f.workers().heartbeat(&lease, &[id]).await.unwrap();
    assert_eq!(beat.stop, vec![(id, StopReason::Cancelled)]);
    assert!(beat.alive.is_empty());
    assert_eq!(
        f.job(id).await.state,
        JobState::Dead(FailureReason::Cancelled)
    );
    assert_eq!(f.workers().complete(&lease, id, None).await.unwrap(), None);
}

#[tokio::test]
async fn a_passed_execution_timeout_stops_the_job_at_its_heartbeat() {
    let f = Fixture::new().await;
    f.engine
        .operations()
        .update_queue(
            "ops",
            "slow",
            QueuePatch {
                execution_timeout_secs: Some(Some(1)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let id = f.enqueue("slow", "t").await;
    let lease = f.claim("w", 1).await.lease.unwrap();
    assert!(
        f.workers()
            .heartbeat(&lease, &[id])
            .await
            .unwrap()
            .stop
            .is_empty()
    );
    tokio::time::sleep(Duration::from_millis(1100)).await; // the timeout itself is the subject
    let beat = f.workers().heartbeat(&lease, &[id]).await.unwrap();
    assert_eq!(beat.stop, vec![(id, StopReason::Timeout)]);
    let j = f.job(id).await;
    assert_eq!(j.state, JobState::Pending, "retried by the policy");
    assert_eq!(j.errors[0].kind, "timeout");
}

#[tokio::test]
async fn failures_follow_the_retry_policy_and_throttling_is_honoured() {
    let f = Fixture::new().await;
    let throttled = f.enqueue("q", "t").await;
    let fatal = f.enqueue("q", "t").await;
    let claimed = f.claim("w", 2).await;
    let lease = claimed.lease.unwrap();
    let before = Utc::now();
    let settled = f
        .workers()
        .fail(
            &lease,
            throttled,
            WorkerFailure::Transient {
                retry_after: Some(Duration::from_secs(120)),
            },
            Some("RateLimited"),
            "429 from the API",
        )
        .await
        .unwrap();
    let Some(Settled::RetryAt(at)) = settled else {
        panic!("expected a retry, got {settled:?}");
    };
    assert!(at >= before + chrono::Duration::seconds(120));
    let j = f.job(throttled).await;
    assert_eq!((j.state, j.attempt), (JobState::Pending, 1));
    assert_eq!(
        (j.errors[0].kind.as_str(), j.errors[0].message.as_str()),
        ("RateLimited", "429 from the API")
    );
    assert!(
        f.claim("w", 5).await.jobs.is_empty(),
        "not before retry_after"
    );

    let settled = f
        .workers()
        .fail(&lease, fatal, WorkerFailure::Fatal, None, "bad payload")
        .await
        .unwrap();
    assert_eq!(settled, Some(Settled::Dead(FailureReason::Fatal)));
    assert_eq!(f.job(fatal).await.errors[0].kind, "fatal");
}

#[tokio::test]
async fn released_jobs_go_back_unrun_and_wake_a_waiting_claim() {
    let f = Fixture::new().await;
    let a = f.enqueue("q", "t").await;
    let b = f.enqueue("q", "t").await;
    let lease = f.claim("greedy", 2).await.lease.unwrap();
    let waiting = {
        let workers = f.workers().clone();
        tokio::spawn(async move {
            let mut req = claim_as("patient", 2);
            req.wait = Duration::from_secs(50);
            workers.claim(req).await.unwrap()
        })
    };
    assert_eq!(
        f.workers().release(&lease, &[a, b]).await.unwrap(),
        vec![a, b]
    );
    // The release wakes the waiting claim, which may have taken the job again already: it is
    // pending with its run uncounted, or the patient claimer's with one run counted.
    let j = f.job(a).await;
    assert!(
        matches!(
            (j.state, j.attempt),
            (JobState::Pending, 0) | (JobState::Fetched | JobState::Processing, 1)
        ),
        "{:?}",
        (j.state, j.attempt)
    );
    let got = waiting.await.unwrap();
    assert_eq!(ids(&got), vec![a, b]);
    assert_eq!(
        got.jobs[0].job.attempt, 1,
        "the released attempt was not counted"
    );
}

#[tokio::test]
async fn claims_take_only_the_asked_queues_and_types() {
    let f = Fixture::new().await;
    let mail = f.enqueue("mail", "email.send").await;
    let report = f.enqueue("reports", "report.build").await;
    let _other = f.enqueue("mail", "email.bounce").await;
    let mut req = claim_as("w", 10);
    req.profile.types = Some(vec!["email.send".into(), "report.build".into()]);
    req.profile.queues = Some(vec!["mail".into()]);
    assert_eq!(ids(&f.workers().claim(req).await.unwrap()), vec![mail]);
    let mut req = claim_as("w", 10);
    req.profile.queues = Some(vec!["reports".into()]);
    assert_eq!(ids(&f.workers().claim(req).await.unwrap()), vec![report]);
}

#[tokio::test]
async fn bad_claims_are_refused_with_the_field_to_fix() {
    let f = Fixture::new().await;
    for (req, field) in [
        (claim_as("a:b", 1), "worker"),
        (claim_as("w", 0), "limit"),
        (claim_as("w", MAX_CLAIM + 1), "limit"),
        (
            ExternalClaim {
                profile: WorkerProfile {
                    queues: Some(vec![]),
                    ..claim_as("w", 1).profile
                },
                ..claim_as("w", 1)
            },
            "queues",
        ),
    ] {
        match f.workers().claim(req).await {
            Err(crate::error::StoreError::Invalid(e)) => assert_eq!(e.field, field),
            other => panic!("expected a refusal naming {field}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn workers_heartbeat_often_enough_to_outlive_the_dead_instance_timeout() {
    // A slow job heartbeat is allowed (the zombie timeout covers two of them), but a worker
    // beating that slowly would look dead long before: its row lives on its calls.
    let f = Fixture::with(EngineConfig {
        heartbeat_interval: Duration::from_secs(60),
        ..EngineConfig::default()
    })
    .await;
    let claimed = f.claim("w", 1).await;
    let dead_after = f.engine.config().rescue.dead_instance_timeout;
    assert_eq!(claimed.heartbeat_every, dead_after / 3);
    let f = Fixture::new().await;
    assert_eq!(
        f.claim("w", 1).await.heartbeat_every,
        EngineConfig::default().heartbeat_interval
    );
}

//! The rescue sweep and retention pruning.

use std::time::Duration;

use super::support::*;
use crate::error::StoreResult;
use crate::maintenance::prune;
use crate::model::{
    EnqueueRequest, FailureReason, InstanceInfo, InstanceStatus, JobState, Pillar, PruneStep,
    PruneTarget, RescueKind, RescuePolicy, RescueReport, RescueStep, RetentionPolicy,
};
use crate::query::JobFilter;

pub async fn rescue_with_default_policy_leaves_fresh_work_alone(f: StoreFactory) {
    let store = f.store();
    let pending = enqueue(&*store, req("q", "t")).await;
    let running = processing_job(&*store, req("r", "t"), "w1").await;
    let fetched = enqueue(&*store, req("f", "t")).await;
    assert_eq!(
        claim_jobs(&*store, "w1", 1, Some(vec!["f".into()])).await[0].id,
        fetched
    );
    let_clock_advance().await;
    for policy in [RescuePolicy::default(), long_timeouts()] {
        let report = rescue(&*store, &policy).await.unwrap();
        assert_eq!(report, RescueReport::default());
    }
    assert_eq!(state(&*store, pending).await, Some(JobState::Pending));
    assert_eq!(state(&*store, fetched).await, Some(JobState::Fetched));
    assert_eq!(state(&*store, running).await, Some(JobState::Processing));
    assert_counters_match_rows(&*store).await;
}

pub async fn rescue_releases_stale_fetched_jobs(f: StoreFactory) {
    let store = f.store();
    let ids = enqueue_n(&*store, "q", "t", 3).await;
    assert_eq!(claim(&*store, "gone", 3).await.len(), 3);
    let_clock_advance().await;
    let report = rescue(
        &*store,
        &RescuePolicy {
            fetched_timeout: Duration::ZERO,
            ..long_timeouts()
        },
    )
    .await
    .unwrap();
    assert_eq!(report.released, 3);
    assert_eq!(report.zombies, 0);
    for id in &ids {
        let j = job(&*store, *id).await;
        assert_eq!(
            (j.state, j.attempt),
            (JobState::Pending, 0),
            "no user code ran"
        );
    }
    // The worker that had buffered them cannot start them any more.
    assert!(starts_none(&*store, "gone", &ids).await);
    assert_eq!(claim(&*store, "alive", 5).await.len(), 3);
    assert_counters_match_rows(&*store).await;
}

pub async fn rescue_steps_move_at_most_their_limit(f: StoreFactory) {
    let store = f.store();
    let stale = enqueue_n(&*store, "stale", "t", 3).await;
    assert_eq!(
        claim_jobs(&*store, "gone", 3, Some(vec!["stale".into()]))
            .await
            .len(),
        3
    );
    for _ in 0..3 {
        processing_job(&*store, req("running", "t"), "w1").await;
    }
    for _ in 0..3 {
        enqueue(
            &*store,
            EnqueueRequest {
                expires_at: Some(now_ms() - secs(1)),
                ..req("expiring", "t")
            },
        )
        .await;
    }
    let_clock_advance().await;
    let policy = zero_timeouts();
    for kind in [
        RescueKind::StaleClaims,
        RescueKind::Zombies,
        RescueKind::Expired,
    ] {
        let step = || {
            store.rescue_step(RescueStep {
                kind,
                policy: &policy,
                limit: 2,
            })
        };
        assert_three_steps_take_2_1_0(&format!("{kind:?}"), step).await;
        assert_counters_match_rows(&*store).await;
    }
    for id in stale {
        assert_eq!(state(&*store, id).await, Some(JobState::Pending));
    }
    let s = summary(&*store).await;
    assert_eq!((s.pending, s.processing, s.dlq), (3, 0, 6));
}

pub async fn rescue_dead_letters_zombies(f: StoreFactory) {
    let store = f.store();
    let zombie = processing_job(&*store, req("q", "t"), "w1").await;
    let_clock_advance().await;
    let started = chrono::Utc::now();
    let report = rescue(&*store, &zero_timeouts()).await.unwrap();
    assert_eq!(report.zombies, 1);
    let j = job(&*store, zombie).await;
    assert_eq!(
        j.state,
        JobState::Dead(FailureReason::Zombie),
        "never retried automatically"
    );
    assert_eq!(j.attempt, 1);
    let s = summary(&*store).await;
    assert_eq!(counts(&s), [0, 0, 0, 0, 0, 1]);
    assert_eq!(s.failed_5m, 1);
    assert_last_minute(s.failed_1m, 1, started, "failed in the last minute");
    let groups = store.top_errors(5).await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(
        (groups[0].reason, groups[0].count),
        (FailureReason::Zombie, 1)
    );
    // The worker learns it lost the job.
    assert_eq!(
        store.heartbeat("w1", &[zombie]).await.unwrap().lost,
        vec![zombie]
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn rescue_honours_the_queue_zombie_timeout(f: StoreFactory) {
    let store = f.store();
    store
        .update_queue("patient", zombie_timeout(3600))
        .await
        .unwrap();
    let patient = processing_job(&*store, req("patient", "t"), "w1").await;
    let hasty = processing_job(&*store, req("hasty", "t"), "w1").await;
    let_clock_advance().await;
    let report = rescue(&*store, &zero_timeouts()).await.unwrap();
    assert_eq!(report.zombies, 1);
    assert_eq!(state(&*store, patient).await, Some(JobState::Processing));
    assert_eq!(
        state(&*store, hasty).await,
        Some(JobState::Dead(FailureReason::Zombie))
    );

    // A queue override shorter than the default applies too.
    store
        .update_queue("strict", zombie_timeout(1))
        .await
        .unwrap();
    let strict = processing_job(&*store, req("strict", "t"), "w1").await;
    // A heartbeat from the owner keeps a job alive against a long default.
    let hb = store.heartbeat("w1", &[strict]).await.unwrap();
    assert_eq!(hb.alive, vec![strict]);
    assert_eq!(rescue(&*store, &long_timeouts()).await.unwrap().zombies, 0);
    assert_eq!(state(&*store, strict).await, Some(JobState::Processing));
    assert_counters_match_rows(&*store).await;
}

fn instance(id: &str) -> InstanceInfo {
    let now = now_ms();
    InstanceInfo {
        id: id.into(),
        host: "host-1".into(),
        pid: 4242,
        version: "0.1.0".into(),
        started_at: now,
        heartbeat_at: now,
        workers_total: 4,
        workers_busy: 1,
        kind: Default::default(),
        queues: None,
        job_types: None,
        quiet: false,
        held_jobs: 0,
        stopped: false,
    }
}

/// The link between an instance and its jobs: an engine claims with its instance id as the
/// worker id.
pub async fn rescue_handles_dead_and_deregistered_instances(f: StoreFactory) {
    let store = f.store();
    store
        .heartbeat_instance(&instance("inst-crashed"))
        .await
        .unwrap();
    let running = processing_job(&*store, req("a", "t"), "inst-crashed").await;
    let buffered = enqueue(&*store, req("b", "t")).await;
    assert_eq!(
        claim_jobs(&*store, "inst-crashed", 1, Some(vec!["b".into()])).await[0].id,
        buffered
    );
    let_clock_advance().await;
    // Young enough: nothing happens with long per-job timeouts.
    assert_eq!(
        rescue(&*store, &long_timeouts()).await.unwrap(),
        RescueReport::default()
    );
    assert_eq!(state(&*store, running).await, Some(JobState::Processing));

    // The instance's heartbeat is older than a zero timeout: its jobs are rescued at once,
    // even though the per-job timeouts are long.
    let report = rescue(
        &*store,
        &RescuePolicy {
            dead_instance_timeout: Duration::ZERO,
            ..long_timeouts()
        },
    )
    .await
    .unwrap();
    assert_eq!((report.released, report.zombies), (1, 1));
    assert_eq!(state(&*store, buffered).await, Some(JobState::Pending));
    assert_eq!(
        state(&*store, running).await,
        Some(JobState::Dead(FailureReason::Zombie))
    );

    // A clean shutdown deregisters; the leftovers go at the next sweep.
    store
        .heartbeat_instance(&instance("inst-stopped"))
        .await
        .unwrap();
    let left = processing_job(&*store, req("c", "t"), "inst-stopped").await;
    store
        .heartbeat_instance(&instance("inst-live"))
        .await
        .unwrap();
    let other = processing_job(&*store, req("d", "t"), "inst-live").await;
    store.deregister_instance("inst-stopped").await.unwrap();
    let report = rescue(&*store, &long_timeouts()).await.unwrap();
    assert_eq!(report.zombies, 1);
    assert_eq!(
        state(&*store, left).await,
        Some(JobState::Dead(FailureReason::Zombie))
    );
    assert_eq!(state(&*store, other).await, Some(JobState::Processing));
    assert_counters_match_rows(&*store).await;
}

pub async fn prune_steps_delete_at_most_their_limit(f: StoreFactory) {
    let store = f.store();
    for _ in 0..3 {
        archived_job(&*store, req("q", "t")).await;
        dead_job(&*store, req("q", "t"), FailureReason::Fatal, "x").await;
    }
    let_clock_advance().await;
    for target in [PruneTarget::Archive, PruneTarget::Dlq] {
        let step = || {
            store.prune_step(PruneStep {
                target,
                older_than: Duration::ZERO,
                limit: 2,
            })
        };
        assert_three_steps_take_2_1_0(&format!("{target:?}"), step).await;
        assert_counters_match_rows(&*store).await;
    }
    assert_eq!(counts(&summary(&*store).await), [0, 0, 0, 0, 0, 0]);
}

pub async fn prune_removes_old_finished_rows(f: StoreFactory) {
    let store = f.store();
    let mut archived = Vec::new();
    let mut dead = Vec::new();
    for _ in 0..5 {
        archived.push(archived_job(&*store, req("q", "t")).await);
    }
    for _ in 0..3 {
        dead.push(dead_job(&*store, req("q", "t"), FailureReason::Fatal, "x").await);
    }
    let pending = enqueue(&*store, req("q", "t")).await;
    let running = processing_job(&*store, req("r", "t"), "w1").await;

    // The default policy keeps a week: nothing goes.
    let report = prune(&*store, &RetentionPolicy::default()).await.unwrap();
    assert_eq!(
        (report.archive, report.dlq, report.metric_buckets),
        (0, 0, 0)
    );
    assert_eq!(counts(&summary(&*store).await), [1, 0, 0, 1, 5, 3]);

    let_clock_advance().await;
    let zero = RetentionPolicy {
        archive: Duration::ZERO,
        dlq: Duration::ZERO,
        metrics: Duration::from_secs(86_400),
        batch_size: 2,
    };
    let report = prune(&*f.connect().await, &zero).await.unwrap();
    assert_eq!(
        (report.archive, report.dlq),
        (5, 3),
        "every batch of two, until done"
    );
    for id in archived.iter().chain(&dead) {
        assert_eq!(state(&*store, *id).await, None);
    }
    assert_eq!(state(&*store, pending).await, Some(JobState::Pending));
    assert_eq!(state(&*store, running).await, Some(JobState::Processing));
    let s = summary(&*store).await;
    assert_eq!(counts(&s), [1, 0, 0, 1, 0, 0], "counters follow");
    let q = store.queue_stats().await.unwrap();
    let q = q.iter().find(|q| q.queue == "q").unwrap();
    assert_eq!((q.succeeded, q.failed), (0, 0));
    assert!(
        ids_in(&*store, Pillar::Archive, JobFilter::default())
            .await
            .is_empty()
    );
    assert!(
        ids_in(&*store, Pillar::Dlq, JobFilter::default())
            .await
            .is_empty()
    );
    assert!(every_error_group_is_empty(&*store).await);
    // Metric buckets younger than a day stay: the history survives the rows.
    let done = throughput_sum(&*store, 5, None, |b| b.succeeded).await;
    assert_eq!(done, 5);

    let report = prune(
        &*store,
        &RetentionPolicy {
            metrics: Duration::ZERO,
            ..zero
        },
    )
    .await
    .unwrap();
    assert!(report.metric_buckets >= 1, "{report:?}");
    let done = throughput_sum(&*store, 5, None, |b| b.succeeded).await;
    assert_eq!(done, 0);
    assert_counters_match_rows(&*store).await;
}

/// Three steps of limit 2 over three eligible rows: two, then the one left, then none.
async fn assert_three_steps_take_2_1_0<Step>(what: &str, mut step: impl FnMut() -> Step)
where
    Step: std::future::Future<Output = StoreResult<u64>>,
{
    let mut taken = Vec::new();
    for _ in 0..3 {
        taken.push(step().await.expect("one step"));
    }
    assert_eq!(
        taken,
        [2, 1, 0],
        "{what}: each step takes at most its limit"
    );
}

/// An instance that stopped heartbeating (or stopped cleanly) stays listed while it holds
/// jobs, with how many, so the console can show it as lost until the rescue returns them.
pub async fn instances_are_listed_while_they_hold_jobs(f: StoreFactory) {
    let store = f.store();
    let hour = Duration::from_secs(3600);
    store
        .heartbeat_instance(&instance("inst-held"))
        .await
        .unwrap();
    store
        .heartbeat_instance(&instance("inst-idle"))
        .await
        .unwrap();
    // One job its engine runs, one a worker of it (`<instance>:<worker>`) has buffered.
    processing_job(&*store, req("a", "t"), "inst-held").await;
    enqueue(&*store, req("b", "t")).await;
    assert_eq!(
        claim_jobs(&*store, "inst-held:w1", 1, Some(vec!["b".into()]))
            .await
            .len(),
        1
    );
    let held_of = |listed: &[InstanceInfo], id: &str| {
        listed
            .iter()
            .find(|i| i.id == id)
            .map(|i| (i.held_jobs, i.stopped))
    };
    let listed = f.connect().await.list_instances(hour).await.unwrap();
    assert_eq!(held_of(&listed, "inst-held"), Some((2, false)));
    assert_eq!(held_of(&listed, "inst-idle"), Some((0, false)));

    // Both heartbeats are now older than a zero max age: only the one holding jobs is listed.
    let_clock_advance().await;
    let listed = store.list_instances(Duration::ZERO).await.unwrap();
    assert_eq!(
        listed.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        vec!["inst-held"]
    );
    let later = now_ms() + chrono::Duration::seconds(31);
    assert_eq!(listed[0].status(later), InstanceStatus::Lost);

    // Stopped cleanly with its jobs left behind: listed as stopped until they are rescued.
    store.deregister_instance("inst-held").await.unwrap();
    let listed = store.list_instances(hour).await.unwrap();
    assert_eq!(held_of(&listed, "inst-held"), Some((2, true)));
    assert_eq!(
        listed
            .iter()
            .find(|i| i.id == "inst-held")
            .map(|i| i.status(now_ms())),
        Some(InstanceStatus::Stopped)
    );
    let report = rescue(&*store, &long_timeouts()).await.unwrap();
    assert_eq!((report.released, report.zombies), (1, 1));
    let listed = store.list_instances(hour).await.unwrap();
    assert_eq!(
        held_of(&listed, "inst-held"),
        None,
        "rescued: no longer listed"
    );
    assert_eq!(held_of(&listed, "inst-idle"), Some((0, false)));
    assert!(
        store
            .list_instances(Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    assert_counters_match_rows(&*store).await;
}

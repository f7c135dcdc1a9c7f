//! Races between handles (separate connections, as separate processes would have): exclusive
//! claims, finalisations that apply once, stale buffers that never run, late successes of
//! zombies that are refused.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::support::*;
use crate::model::{Applied, Completion, FailureReason, JobId, JobState, QueuePatch};

const CLAIMERS: usize = 8;

pub async fn many_claimers_never_share_a_job(f: StoreFactory) {
    let store = f.store();
    let total = 2_000;
    let mut all = Vec::new();
    for _ in 0..4 {
        all.extend(enqueue_n(&*store, "hammered", "t", total / 4).await);
    }
    let claimed = race(&f, CLAIMERS, |n, handle| async move {
        let worker = format!("claimer-{n}");
        let mut mine = Vec::new();
        loop {
            let claim = claim_request(&worker, 25, None);
            let jobs = retrying(|| handle.claim_batch(claim.clone())).await;
            if jobs.is_empty() {
                return (worker, mine);
            }
            let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
            assert!(jobs.iter().all(|j| j.worker_id.as_deref() == Some(&worker)));
            let started = retrying(|| handle.mark_processing(&worker, &ids)).await;
            assert_eq!(started.len(), ids.len(), "{worker} starts what it claimed");
            let completions = all_succeeded(&ids);
            let done = retrying(|| handle.complete(&worker, completions.clone())).await;
            assert!(
                done.iter().all(|a| a.is_applied()),
                "{worker} owns its jobs"
            );
            mine.extend(ids);
        }
    })
    .await;
    let mut owner: HashMap<JobId, String> = HashMap::new();
    let mut busy_claimers = 0;
    for (worker, mine) in claimed {
        if !mine.is_empty() {
            busy_claimers += 1;
        }
        for id in mine {
            if let Some(first) = owner.insert(id, worker.clone()) {
                panic!("job {id} claimed by both {first} and {worker}");
            }
        }
    }
    assert_eq!(owner.len(), total, "together they claimed every job");
    assert_eq!(
        owner.keys().copied().collect::<HashSet<_>>(),
        all.iter().copied().collect::<HashSet<_>>()
    );
    // How the work spread depends on scheduling; that it did not double is what counts.
    println!("{busy_claimers} of {CLAIMERS} claimers got work");
    let s = summary(&*store).await;
    assert_eq!(counts(&s), [0, 0, 0, 0, total as u64, 0]);
    // The archive remembers who ran each job.
    for id in all.iter().step_by(97) {
        let j = job(&*store, *id).await;
        assert_eq!(j.worker_id.as_ref(), owner.get(id));
        assert_eq!(j.attempt, 1, "ran once");
    }
    assert_counters_match_rows(&*store).await;
}

pub async fn racing_completions_apply_once(f: StoreFactory) {
    let store = f.store();
    for round in 0..3 {
        let id = processing_job(&*store, req("race", "t"), "w1").await;
        let mut tasks = Vec::new();
        for n in 0..16 {
            let handle = if n % 2 == 0 {
                f.connect().await
            } else {
                store.clone()
            };
            tasks.push(tokio::spawn(async move {
                let c = match n % 3 {
                    0 => succeeded(id, Some("1")),
                    1 => dead(id, FailureReason::Failed, "lost the race"),
                    _ => Completion::Retry {
                        id,
                        error: error(1, "retry"),
                        retry_at: now_ms() + secs(3600),
                    },
                };
                let applied = retrying(|| handle.complete("w1", vec![c.clone()])).await;
                (c, applied[0])
            }));
        }
        let mut winners = Vec::new();
        for t in tasks {
            let (c, applied) = t.await.unwrap();
            if applied == Applied::Applied {
                winners.push(c);
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one completion applies"
        );
        let expected = match &winners[0] {
            Completion::Succeeded { .. } => JobState::Succeeded,
            Completion::DeadLetter { .. } => JobState::Dead(FailureReason::Failed),
            Completion::Retry { .. } | Completion::Released { .. } => JobState::Pending,
        };
        let j = job(&*store, id).await;
        assert_eq!(j.state, expected, "round {round}: the winner decided");
        if expected == JobState::Pending {
            assert_eq!(j.errors.len(), 1);
            // Retry winners leave a pending job; remove it so the next round claims its own.
            assert_eq!(
                store.purge(crate::model::Pillar::Hot, &[id]).await.unwrap(),
                1
            );
        }
    }
    let s = summary(&*store).await;
    assert_eq!(s.processing, 0);
    assert!(s.succeeded + s.dlq <= 3);
    let buckets = store.throughput(5, None).await.unwrap();
    let finished: u64 = buckets.iter().map(|b| b.succeeded + b.failed).sum();
    assert_eq!(
        finished,
        s.succeeded + s.dlq,
        "one metric per applied completion"
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn stale_buffered_job_never_runs(f: StoreFactory) {
    let store = f.store();
    let other = f.connect().await;
    // Released (pause, shutdown) and claimed by another worker.
    let id = enqueue(&*store, req("q", "t")).await;
    assert_eq!(claim(&*store, "first", 1).await, vec![id]);
    assert_eq!(store.release("first", &[id], None).await.unwrap(), 1);
    assert_eq!(claim(&*other, "second", 1).await, vec![id]);
    assert!(starts_none(&*store, "first", &[id]).await, "stale copy");
    assert_eq!(
        other.mark_processing("second", &[id]).await.unwrap(),
        vec![id]
    );
    let j = job(&*store, id).await;
    assert_eq!((j.worker_id.as_deref(), j.attempt), (Some("second"), 1));

    // Rescued as stale while buffered, then claimed by another worker.
    let id = enqueue(&*store, req("q2", "t")).await;
    assert_eq!(claim(&*store, "slow", 1).await, vec![id]);
    let_clock_advance().await;
    assert_eq!(rescue(&*store, &zero_timeouts()).await.unwrap().released, 1);
    assert_eq!(claim(&*other, "fast", 1).await, vec![id]);
    assert!(starts_none(&*store, "slow", &[id]).await);
    assert_eq!(
        other.mark_processing("fast", &[id]).await.unwrap(),
        vec![id]
    );

    // Cancelled while buffered.
    let id = enqueue(&*store, req("q3", "t")).await;
    assert_eq!(claim(&*store, "w", 1).await, vec![id]);
    other.cancel(id).await.unwrap();
    assert!(starts_none(&*store, "w", &[id]).await);
    assert_eq!(
        state(&*store, id).await,
        Some(JobState::Dead(FailureReason::Cancelled))
    );

    // Racing starts of one buffered job: at most its owner, once.
    let id = enqueue(&*store, req("q4", "t")).await;
    assert_eq!(claim(&*store, "owner", 1).await, vec![id]);
    let mut tasks = Vec::new();
    for n in 0..8 {
        let handle = f.connect().await;
        let worker = if n == 0 { "owner" } else { "impostor" };
        tasks.push(tokio::spawn(async move {
            let ids = [id];
            retrying(|| handle.mark_processing(worker, &ids))
                .await
                .len()
        }));
    }
    let mut started = 0;
    for t in tasks {
        started += t.await.unwrap();
    }
    assert_eq!(started, 1);
    assert_eq!(job(&*store, id).await.attempt, 1);
    assert_counters_match_rows(&*store).await;
}

pub async fn zombie_then_late_success_is_rejected(f: StoreFactory) {
    let store = f.store();
    let sweeper = f.connect().await;
    let id = processing_job(&*store, req("q", "slow"), "w1").await;
    let_clock_advance().await;
    let report = rescue(&*sweeper, &zero_timeouts()).await.unwrap();
    assert_eq!(report.zombies, 1);
    let before = summary(&*store).await;
    let late = store
        .complete(
            "w1",
            vec![Completion::Succeeded {
                id,
                result: Some(r#"{"late":true}"#.into()),
                duration_ms: 99,
            }],
        )
        .await
        .unwrap();
    assert_eq!(late, vec![Applied::NotApplied]);
    let j = job(&*store, id).await;
    assert_eq!(j.state, JobState::Dead(FailureReason::Zombie));
    assert_eq!(j.result, None);
    let after = summary(&*store).await;
    assert_eq!(counts(&after), counts(&before));
    assert_eq!((after.succeeded, after.dlq), (0, 1));
    // Nor can it retry or heartbeat its way back.
    let retry = store
        .complete(
            "w1",
            vec![Completion::Retry {
                id,
                error: error(1, "x"),
                retry_at: now_ms(),
            }],
        )
        .await
        .unwrap();
    assert_eq!(retry, vec![Applied::NotApplied]);
    assert_eq!(store.heartbeat("w1", &[id]).await.unwrap().lost, vec![id]);
    assert_eq!(
        state(&*store, id).await,
        Some(JobState::Dead(FailureReason::Zombie))
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn bulkhead_holds_under_concurrent_claimers(f: StoreFactory) {
    let store = f.store();
    let limit = 3;
    store
        .update_queue("narrow", max_workers(limit))
        .await
        .unwrap();
    let total = 300;
    enqueue_n(&*store, "narrow", "t", total).await;
    // Incremented after a claim returns, decremented before the completion is sent: it never
    // exceeds the number of rows the store counts against the limit.
    let in_flight = Arc::new(AtomicI64::new(0));
    let peak = Arc::new(AtomicI64::new(0));
    let mut tasks = Vec::new();
    for n in 0..CLAIMERS {
        let handle = f.connect().await;
        let in_flight = in_flight.clone();
        let peak = peak.clone();
        tasks.push(tokio::spawn(async move {
            let worker = format!("w{n}");
            let mut done = 0usize;
            let mut idle = 0;
            while idle < 50 {
                let claim = claim_request(&worker, 10, None);
                let ids: Vec<JobId> = retrying(|| handle.claim_batch(claim.clone()))
                    .await
                    .into_iter()
                    .map(|j| j.id)
                    .collect();
                if ids.is_empty() {
                    idle += 1;
                    tokio::task::yield_now().await;
                    continue;
                }
                idle = 0;
                let now =
                    in_flight.fetch_add(ids.len() as i64, Ordering::SeqCst) + ids.len() as i64;
                peak.fetch_max(now, Ordering::SeqCst);
                assert!(now <= i64::from(limit), "{now} jobs of the queue in flight");
                retrying(|| handle.mark_processing(&worker, &ids)).await;
                in_flight.fetch_sub(ids.len() as i64, Ordering::SeqCst);
                let completions = all_succeeded(&ids);
                let applied = retrying(|| handle.complete(&worker, completions.clone())).await;
                done += applied.iter().filter(|a| a.is_applied()).count();
            }
            done
        }));
    }
    let mut done = 0;
    for t in tasks {
        done += t.await.unwrap();
    }
    // Claimers give up after a run of empty claims; whatever they left is still pending.
    let s = summary(&*store).await;
    assert_eq!(done as u64, s.succeeded);
    assert_eq!(s.succeeded + s.pending, total as u64);
    assert!(s.succeeded > 0);
    assert!(peak.load(Ordering::SeqCst) <= i64::from(limit));
    assert_counters_match_rows(&*store).await;
}

/// Operators, sweepers and workers on different connections racing for the same jobs:
/// whoever wins, the job ends in exactly one consistent state and the losers report it.
pub async fn operator_sweeper_and_worker_races_have_one_outcome(f: StoreFactory) {
    use crate::model::CancelOutcome;

    let store = f.store();
    let operator = f.connect().await;
    let sweeper = f.connect().await;
    for round in 0..12 {
        // Cancel of a buffered job against its start.
        let id = enqueue(&*store, req("race", "t")).await;
        assert_eq!(claim(&*store, "w1", 1).await, vec![id]);
        let ids = [id];
        let (cancel, started) =
            tokio::join!(operator.cancel(id), store.mark_processing("w1", &ids));
        let (cancel, started) = (cancel.unwrap(), started.unwrap());
        let j = job(&*store, id).await;
        match cancel {
            CancelOutcome::Cancelled => {
                assert!(
                    started.is_empty(),
                    "round {round}: a cancelled job never starts"
                );
                assert_eq!(j.state, JobState::Dead(FailureReason::Cancelled));
            }
            CancelOutcome::Requested => {
                assert_eq!(started, vec![id]);
                assert_eq!((j.state, j.cancel_requested), (JobState::Processing, true));
                assert!(complete_one(&*store, "w1", succeeded(id, None)).await);
            }
            CancelOutcome::NotFound => panic!("round {round}: the job exists"),
        }

        // The zombie sweep against a completion.
        let id = processing_job(&*store, req("race", "t"), "w1").await;
        let_clock_advance().await;
        let policy = zero_timeouts();
        let (report, applied) = tokio::join!(
            rescue(&*sweeper, &policy),
            store.complete("w1", vec![succeeded(id, None)])
        );
        let (report, applied) = (report.unwrap(), applied.unwrap());
        match (report.zombies, applied[0]) {
            (1, Applied::NotApplied) => assert_eq!(
                state(&*store, id).await,
                Some(JobState::Dead(FailureReason::Zombie))
            ),
            (0, Applied::Applied) => {
                assert_eq!(state(&*store, id).await, Some(JobState::Succeeded))
            }
            other => panic!("round {round}: both or neither applied: {other:?}"),
        }

        // Resurrect against purge of a dead job.
        let id = dead_job(&*store, req("race", "t"), FailureReason::Fatal, "x").await;
        let ids = [id];
        let (resurrected, purged) = tokio::join!(
            operator.resurrect(id, None),
            sweeper.purge(crate::model::Pillar::Dlq, &ids)
        );
        match (resurrected, purged.unwrap()) {
            (Ok(Applied::Applied), 0) => {
                assert_eq!(state(&*store, id).await, Some(JobState::Pending));
                assert_eq!(
                    store.purge(crate::model::Pillar::Hot, &[id]).await.unwrap(),
                    1
                );
            }
            (Err(crate::error::StoreError::JobNotFound(_)), 1) => {
                assert_eq!(state(&*store, id).await, None)
            }
            other => panic!("round {round}: resurrect and purge both or neither: {other:?}"),
        }
    }
    assert_counters_match_rows(&*store).await;
}

/// Producers in different processes enqueueing the same key at once: one job, one id.
pub async fn racing_enqueues_of_one_key_create_one_job(f: StoreFactory) {
    let store = f.store();
    for round in 0..5 {
        let key = format!("order-{round}");
        let r = crate::model::EnqueueRequest {
            idempotency_key: Some(key),
            ..req("keyed", "t")
        };
        let outcomes = race(&f, CLAIMERS, |n, handle| {
            let r = r.clone();
            async move {
                if n % 2 == 0 {
                    retrying(|| handle.enqueue(r.clone())).await
                } else {
                    retrying(|| handle.enqueue_batch(vec![r.clone()])).await[0]
                }
            }
        })
        .await;
        let created = outcomes.iter().filter(|o| o.created).count();
        assert_eq!(
            created, 1,
            "round {round}: exactly one producer created the job"
        );
        let ids: HashSet<JobId> = outcomes.iter().map(|o| o.id).collect();
        assert_eq!(ids.len(), 1, "round {round}: everyone got the same id");
    }
    assert_eq!(summary(&*store).await.pending, 5);
    assert_counters_match_rows(&*store).await;
}

/// Claimers on separate handles race for a queue limited to 7 starts a day: 7 start in all.
pub async fn rate_limit_holds_under_concurrent_claimers(f: StoreFactory) {
    let store = f.store();
    for attempt in 0..3 {
        let queue = format!("metered-{attempt}");
        let day = chrono::Utc::now().timestamp().div_euclid(86_400);
        store
            .update_queue(
                &queue,
                QueuePatch {
                    rate_limit: Some(Some(crate::model::RateLimit {
                        starts: 7,
                        per_secs: 86_400,
                    })),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        enqueue_n(&*store, &queue, "t", 100).await;
        let claimed = race(&f, CLAIMERS, |n, handle| {
            let claim = claim_request(&format!("w{n}"), 5, Some(vec![queue.clone()]));
            async move {
                let mut got = 0;
                for _ in 0..5 {
                    got += retrying(|| handle.claim_batch(claim.clone())).await.len();
                }
                got
            }
        })
        .await;
        let total: usize = claimed.iter().sum();
        if chrono::Utc::now().timestamp().div_euclid(86_400) == day {
            assert_eq!(total, 7, "seven starts across every claimer");
            assert_counters_match_rows(&*store).await;
            return;
        }
    }
    panic!("three runs straddled midnight UTC");
}

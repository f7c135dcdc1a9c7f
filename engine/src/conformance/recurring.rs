//! Recurring schedules: their rows and state, and the occurrence key that makes each
//! occurrence one job — written with the job, refused the second time, across handles.

use std::collections::HashSet;

use super::support::*;
use crate::error::StoreError;
use crate::model::{Applied, JobId, JobState, Pillar, PruneStep, PruneTarget, Timestamp};
use crate::runtime::scheduler::{Scheduler, SchedulerConfig};
use crate::schedule::{
    FireOutcome, MisfirePolicy, Occurrence, OverlapPolicy, ScheduleDefinition, ScheduleFire,
    ScheduleOrigin, ScheduleSpec, Timing, job_for,
};
use crate::store::Store;

/// `def`, created enabled by an operator.
async fn create_operator_schedule(
    store: &dyn Store,
    def: ScheduleDefinition,
) -> ScheduleDefinition {
    store
        .create_schedule(def.clone(), ScheduleOrigin::Operator, true)
        .await
        .unwrap();
    def
}

/// A whole minute in the past: occurrences are whole seconds, and their jobs are due now.
fn minute_ago(n: i64) -> Timestamp {
    let t = now_ms() - secs(60 * n);
    trunc_ms(t - chrono::TimeDelta::milliseconds(t.timestamp_subsec_millis().into()))
}

fn fire_of(def: &ScheduleDefinition, at: &[Timestamp], through: Option<Timestamp>) -> ScheduleFire {
    ScheduleFire {
        schedule: def.name.clone(),
        occurrences: at
            .iter()
            .map(|t| Occurrence {
                scheduled_at: *t,
                job: job_for(def, *t, *t),
                job_id: JobId::new(),
            })
            .collect(),
        handled_through: through,
        skip_while_active: def.overlap == OverlapPolicy::SkipWhileActive,
        manual: false,
    }
}

async fn fire(store: &dyn Store, fire: ScheduleFire) -> Vec<FireOutcome> {
    store.fire_schedule(fire).await.expect("fire schedule")
}

async fn stored(store: &dyn Store, name: &str) -> crate::schedule::Schedule {
    store
        .list_schedules()
        .await
        .expect("list schedules")
        .into_iter()
        .find(|s| s.definition.name == name)
        .unwrap_or_else(|| panic!("schedule {name} is listed"))
}

pub async fn schedules_round_trip_and_keep_their_state_through_edits(f: StoreFactory) {
    let store = f.store();
    let before = now_ms() - secs(1);
    let def = report_schedule("nightly");
    let created = store
        .create_schedule(def.clone(), ScheduleOrigin::Declared, true)
        .await
        .expect("create");
    assert_eq!(created.definition, def, "every field round-trips");
    assert!(created.enabled);
    assert_eq!(created.origin, ScheduleOrigin::Declared);
    assert!(created.last_run.is_none());
    assert!(
        created.handled_through >= before,
        "a new schedule starts from now, not from the epoch"
    );
    match store
        .create_schedule(def.clone(), ScheduleOrigin::Operator, true)
        .await
    {
        Err(StoreError::Conflict { code, .. }) => assert_eq!(code, "schedule_exists"),
        other => panic!("a taken name is a conflict, got {other:?}"),
    }

    let mut edited = def.clone();
    edited.spec = ScheduleSpec::EverySecs(90);
    edited.time_zone = "UTC".into();
    edited.overlap = OverlapPolicy::SkipWhileActive;
    edited.misfire = MisfirePolicy::Skip;
    let replaced = store
        .replace_schedule(edited.clone(), ScheduleOrigin::Operator)
        .await
        .expect("replace");
    assert_eq!(replaced.definition, edited);
    assert_eq!(replaced.origin, ScheduleOrigin::Operator);
    assert!(
        replaced.handled_through >= created.handled_through,
        "the cursor never moves back; an edit moves it up to now"
    );
    let mut missing = def.clone();
    missing.name = "nobody".into();
    assert!(matches!(
        store.replace_schedule(missing, ScheduleOrigin::Operator).await,
        Err(StoreError::ScheduleNotFound(n)) if n == "nobody"
    ));

    let paused = store
        .set_schedule_enabled("nightly", false)
        .await
        .expect("pause");
    assert!(!paused.enabled);
    let_clock_advance().await;
    let resumed = store
        .set_schedule_enabled("nightly", true)
        .await
        .expect("resume");
    assert!(resumed.enabled);
    assert!(
        resumed.handled_through > paused.handled_through,
        "resuming moves the cursor to now: the paused time is not caught up on"
    );
    assert!(matches!(
        store.set_schedule_enabled("nobody", true).await,
        Err(StoreError::ScheduleNotFound(_))
    ));

    fire(&*store, fire_of(&edited, &[minute_ago(1)], None)).await;
    assert_eq!(store.schedule_runs("nightly", 10).await.unwrap().len(), 1);
    assert_eq!(
        store.delete_schedule("nightly").await.unwrap(),
        Applied::Applied
    );
    assert_eq!(
        store.delete_schedule("nightly").await.unwrap(),
        Applied::NotApplied
    );
    assert!(store.list_schedules().await.unwrap().is_empty());
    assert!(
        store.schedule_runs("nightly", 10).await.unwrap().is_empty(),
        "its history goes with it"
    );
    assert_eq!(summary(&*store).await.pending, 1, "its job stays");
}

pub async fn an_occurrence_enqueues_one_job_and_its_key_refuses_a_second(f: StoreFactory) {
    let store = f.store();
    let def = create_operator_schedule(&*store, report_schedule("hourly")).await;
    let at = minute_ago(2);
    let ahead = minute_ago(0) + secs(60);
    let outcomes = fire(&*store, fire_of(&def, &[at], Some(ahead))).await;
    let [FireOutcome::Enqueued(id)] = outcomes[..] else {
        panic!("one job enqueued, got {outcomes:?}");
    };
    let j = job(&*store, id).await;
    assert_eq!(j.state, JobState::Pending);
    assert_eq!(
        (j.queue.as_str(), j.job_type.as_str()),
        ("reports", "report.generate")
    );
    assert_eq!(j.payload, r#"{"kind":"hourly"}"#);
    assert_eq!((j.priority, j.max_attempts), (4, Some(3)));
    assert!(
        j.tags.contains(&"schedule:hourly".to_string()),
        "{:?}",
        j.tags
    );

    // Another instance with a stale cursor writes the same occurrence with its own job id.
    let before = summary(&*store).await;
    let again = fire(&*store, fire_of(&def, &[at], Some(minute_ago(3)))).await;
    assert_eq!(again, vec![FireOutcome::AlreadyHandled]);
    assert_eq!(
        counts(&summary(&*store).await),
        counts(&before),
        "nothing written"
    );

    let s = stored(&*store, "hourly").await;
    assert_eq!(s.handled_through, ahead, "the cursor never moves back");
    let last = s.last_run.expect("a last run");
    assert_eq!(
        (last.scheduled_at, last.job_id, last.manual),
        (at, Some(id), false)
    );
    let runs = store.schedule_runs("hourly", 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].scheduled_at, runs[0].job_id), (at, Some(id)));

    // Several occurrences in one fire: each its own job, oldest first; the known one refused.
    let later = [minute_ago(2), minute_ago(1), minute_ago(0)];
    let further = ahead + secs(60);
    let outcomes = fire(&*store, fire_of(&def, &later, Some(further))).await;
    assert_eq!(outcomes[0], FireOutcome::AlreadyHandled);
    assert!(matches!(outcomes[1], FireOutcome::Enqueued(_)));
    assert!(matches!(outcomes[2], FireOutcome::Enqueued(_)));
    assert_eq!(summary(&*store).await.pending, 3);
    let s = stored(&*store, "hourly").await;
    assert_eq!(s.handled_through, further);
    assert_eq!(s.last_run.unwrap().scheduled_at, later[2]);
    assert_counters_match_rows(&*store).await;
}

pub async fn overlap_skips_an_occurrence_while_the_last_job_is_active(f: StoreFactory) {
    let store = f.store();
    let def = create_operator_schedule(
        &*store,
        ScheduleDefinition {
            overlap: OverlapPolicy::SkipWhileActive,
            ..report_schedule("one-at-a-time")
        },
    )
    .await;
    let [t1, t2, t3] = [minute_ago(3), minute_ago(2), minute_ago(1)];
    let first = fire(&*store, fire_of(&def, &[t1], Some(t1))).await;
    let [FireOutcome::Enqueued(id)] = first[..] else {
        panic!("{first:?}");
    };
    let started = start(&*store, "w1", 1).await;
    assert_eq!(started, vec![id]);
    assert_eq!(
        fire(&*store, fire_of(&def, &[t2], Some(t2))).await,
        vec![FireOutcome::SkippedOverlap],
        "the first job is still running"
    );
    assert_eq!(
        fire(&*store, fire_of(&def, &[t2], Some(t2))).await,
        vec![FireOutcome::AlreadyHandled],
        "a skipped occurrence is handled: no instance runs it later"
    );
    let s = stored(&*store, "one-at-a-time").await;
    let last = s.last_run.expect("last run");
    assert_eq!(
        (last.scheduled_at, last.job_id),
        (t2, None),
        "the skip is the last run"
    );
    assert!(complete_one(&*store, "w1", succeeded(id, None)).await);
    let third = fire(&*store, fire_of(&def, &[t3], Some(t3))).await;
    assert!(matches!(third[..], [FireOutcome::Enqueued(_)]), "{third:?}");
    let runs = store.schedule_runs("one-at-a-time", 10).await.unwrap();
    let jobs: Vec<Option<JobId>> = runs.iter().map(|r| r.job_id).collect();
    assert_eq!(jobs.len(), 3);
    assert_eq!(jobs.iter().filter(|j| j.is_none()).count(), 1);
}

pub async fn a_paused_schedule_fires_nothing_but_a_manual_run(f: StoreFactory) {
    let store = f.store();
    let def = report_schedule("paused");
    let created = store
        .create_schedule(def.clone(), ScheduleOrigin::Operator, false)
        .await
        .unwrap();
    let at = minute_ago(1);
    assert_eq!(
        fire(&*store, fire_of(&def, &[at], Some(at + secs(3600)))).await,
        vec![FireOutcome::AlreadyHandled]
    );
    assert_eq!(
        summary(&*store).await.pending,
        0,
        "a paused schedule enqueues nothing"
    );
    assert_eq!(
        stored(&*store, "paused").await.handled_through,
        created.handled_through,
        "nor moves its cursor"
    );
    let mut manual = fire_of(&def, &[at], None);
    manual.manual = true;
    let outcome = fire(&*store, manual).await;
    assert!(
        matches!(outcome[..], [FireOutcome::Enqueued(_)]),
        "{outcome:?}"
    );
    let last = stored(&*store, "paused").await.last_run.expect("last run");
    assert!(last.manual);
    // A manual run at an occurrence's time does not take the occurrence's key.
    store.set_schedule_enabled("paused", true).await.unwrap();
    let on_time = fire(&*store, fire_of(&def, &[at], None)).await;
    assert!(
        matches!(on_time[..], [FireOutcome::Enqueued(_)]),
        "{on_time:?}"
    );
    assert!(matches!(
        store
            .fire_schedule(fire_of(&report_schedule("gone"), &[at], Some(at)))
            .await,
        Err(StoreError::ScheduleNotFound(_))
    ));
    assert_eq!(summary(&*store).await.pending, 2);
}

pub async fn racing_instances_enqueue_each_occurrence_once(f: StoreFactory) {
    const INSTANCES: usize = 8;
    let store = f.store();
    let def = create_operator_schedule(&*store, report_schedule("raced")).await;
    let occurrences: Vec<Timestamp> = (1..=5).rev().map(minute_ago).collect();
    let fired = race(&f, INSTANCES, |_, handle| {
        let fire = fire_of(&def, &occurrences, occurrences.last().copied());
        async move { retrying(|| handle.fire_schedule(fire.clone())).await }
    })
    .await;
    let mut enqueued = Vec::new();
    for o in fired.into_iter().flatten() {
        if let FireOutcome::Enqueued(id) = o {
            enqueued.push(id);
        }
    }
    assert_eq!(
        enqueued.len(),
        occurrences.len(),
        "one job per occurrence: {enqueued:?}"
    );
    let listed: HashSet<JobId> = ids_in(&*store, Pillar::Hot, filter_queue("reports"))
        .await
        .into_iter()
        .collect();
    assert_eq!(listed, enqueued.into_iter().collect::<HashSet<_>>());
    assert_eq!(
        store.schedule_runs("raced", 100).await.unwrap().len(),
        occurrences.len()
    );
    assert_counters_match_rows(&*store).await;
}

pub async fn schedule_history_is_pruned_and_the_last_run_stays(f: StoreFactory) {
    let store = f.store();
    let def = create_operator_schedule(&*store, report_schedule("pruned")).await;
    let at = [minute_ago(2), minute_ago(1)];
    fire(&*store, fire_of(&def, &at, Some(at[1]))).await;
    let keep = PruneStep {
        target: PruneTarget::ScheduleRuns,
        older_than: std::time::Duration::from_secs(3600),
        limit: 100,
    };
    assert_eq!(
        store.prune_step(keep).await.unwrap(),
        0,
        "young history is kept"
    );
    let_clock_advance().await;
    let all = PruneStep {
        older_than: std::time::Duration::ZERO,
        limit: 1,
        ..keep
    };
    assert_eq!(
        store.prune_step(all).await.unwrap(),
        1,
        "at most the step's limit"
    );
    assert_eq!(store.prune_step(all).await.unwrap(), 1);
    assert!(store.schedule_runs("pruned", 10).await.unwrap().is_empty());
    let s = stored(&*store, "pruned").await;
    assert_eq!(s.last_run.map(|r| r.scheduled_at), Some(at[1]));
}

/// A schedule every 10 s created now, and the scheduler run 95 s after its first
/// occurrence (as after an outage that long): which occurrences did it enqueue, as seconds
/// after the first? Those at 0 to 30 s (65 to 95 s late) are misfires, over the 60 s grace;
/// the six at 40 to 90 s are within it and always run.
async fn after_an_outage(f: &StoreFactory, name: &str, misfire: MisfirePolicy) -> Vec<i64> {
    let store = f.store();
    let ops = door(&store);
    let def = ScheduleDefinition {
        spec: ScheduleSpec::EverySecs(10),
        time_zone: "UTC".into(),
        misfire,
        ..report_schedule(name)
    };
    let created = ops.create_schedule("alice", def).await.expect("create");
    let first = Timing::parse(&ScheduleSpec::EverySecs(10), "UTC")
        .unwrap()
        .next_after(created.handled_through)
        .expect("an occurrence");
    let restart = first + secs(95);
    let scheduler = Scheduler::new(ops, SchedulerConfig::default());
    let report = scheduler.run_at(restart).await.expect("scheduler run");
    let runs = store.schedule_runs(name, 100).await.unwrap();
    assert_eq!(report.enqueued, runs.len() as u64);
    assert_eq!(report.enqueued + report.skipped_misfire, 10, "{report:?}");
    assert!(runs.iter().all(|r| r.job_id.is_some() && !r.manual));
    assert_eq!(
        stored(&*store, name).await.handled_through,
        first + secs(90),
        "the cursor is past every occurrence of the outage, run or skipped"
    );
    let again = scheduler.run_at(restart).await.expect("second run");
    assert_eq!(
        again.enqueued, 0,
        "a second run finds nothing left: {again:?}"
    );
    let mut offsets: Vec<i64> = runs
        .iter()
        .map(|r| (r.scheduled_at - first).num_seconds())
        .collect();
    offsets.sort_unstable();
    offsets
}

const TICKS: [i64; 6] = [40, 50, 60, 70, 80, 90];

pub async fn after_an_outage_run_once_runs_the_latest_misfire_and_the_ticks(f: StoreFactory) {
    let ran = after_an_outage(&f, "once", MisfirePolicy::RunOnce).await;
    assert_eq!(ran, [&[30][..], &TICKS].concat());
}

pub async fn after_an_outage_run_all_runs_the_latest_cap_misfires_and_the_ticks(f: StoreFactory) {
    let ran = after_an_outage(&f, "all", MisfirePolicy::RunAll { cap: 3 }).await;
    assert_eq!(ran, [&[10, 20, 30][..], &TICKS].concat());
}

pub async fn after_an_outage_skip_runs_only_the_ticks(f: StoreFactory) {
    let ran = after_an_outage(&f, "skip", MisfirePolicy::Skip).await;
    assert_eq!(ran, TICKS);
}

/// An edit from every hour to every second starts from the edit: nothing of either
/// definition from before it is enqueued; the next run is the next whole second.
pub async fn an_edit_starts_from_now_without_backfill(f: StoreFactory) {
    let store = f.store();
    let ops = door(&store);
    let def = ScheduleDefinition {
        spec: ScheduleSpec::EverySecs(3600),
        time_zone: "UTC".into(),
        ..report_schedule("hourly-then-secondly")
    };
    let created = ops.create_schedule("alice", def.clone()).await.unwrap();
    let_clock_advance().await;
    let before_edit = now_ms();
    let every_second = ScheduleDefinition {
        spec: ScheduleSpec::EverySecs(1),
        ..def
    };
    let edited = ops.edit_schedule("alice", every_second).await.unwrap();
    assert!(
        edited.handled_through >= before_edit && edited.handled_through > created.handled_through,
        "the edit moved the cursor up to its own time"
    );
    let scheduler = Scheduler::new(ops, SchedulerConfig::default());
    let next = Timing::parse(&ScheduleSpec::EverySecs(1), "UTC")
        .unwrap()
        .next_after(edited.handled_through)
        .unwrap();
    assert_eq!(next.timestamp_subsec_nanos(), 0, "a whole second");
    let report = scheduler.run_at(next).await.unwrap();
    assert_eq!(
        (report.enqueued, report.skipped_misfire),
        (1, 0),
        "the first occurrence after the edit only"
    );
    let runs = store
        .schedule_runs("hourly-then-secondly", 10)
        .await
        .unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].scheduled_at, next);
}

//! Instances, engine settings and the audit log.

use std::time::Duration;

use super::support::*;
use crate::model::{
    Applied, AuditEntry, AuditFilter, EngineSettings, InstanceInfo, InstanceKind, NewAuditEntry,
    RetentionSettings, RetrySettings,
};

fn instance(id: &str, busy: u32) -> InstanceInfo {
    InstanceInfo {
        id: id.into(),
        host: "build-host".into(),
        pid: 1234,
        version: "0.1.0".into(),
        started_at: now_ms() - secs(30),
        heartbeat_at: now_ms(),
        workers_total: 8,
        workers_busy: busy,
        kind: InstanceKind::Engine,
        queues: None,
        job_types: None,
        quiet: false,
        held_jobs: 0,
        stopped: false,
    }
}

pub async fn instances_heartbeat_list_and_deregister(f: StoreFactory) {
    let store = f.store();
    let hour = Duration::from_secs(3600);
    assert!(store.list_instances(hour).await.unwrap().is_empty());
    let first = instance("inst-a", 1);
    store.heartbeat_instance(&first).await.unwrap();
    let_clock_advance().await;
    store
        .heartbeat_instance(&instance("inst-b", 0))
        .await
        .unwrap();
    let listed = f.connect().await.list_instances(hour).await.unwrap();
    let names: Vec<&str> = listed.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(names, vec!["inst-b", "inst-a"], "newest heartbeat first");
    let a = &listed[1];
    assert_eq!(
        (&a.host, a.pid, &a.version, a.workers_total, a.workers_busy),
        (&first.host, first.pid, &first.version, 8, 1)
    );
    assert_eq!(trunc_ms(a.started_at), first.started_at);
    assert_eq!(
        (a.kind, &a.queues, &a.job_types),
        (InstanceKind::Engine, &None, &None)
    );
    assert!(
        since(a.heartbeat_at) < secs(60),
        "the store stamps the heartbeat"
    );

    // A heartbeat refreshes the row in place.
    let_clock_advance().await;
    store
        .heartbeat_instance(&InstanceInfo {
            workers_busy: 7,
            ..first.clone()
        })
        .await
        .unwrap();
    let listed = store.list_instances(hour).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(
        (listed[0].id.as_str(), listed[0].workers_busy),
        ("inst-a", 7)
    );
    assert_eq!(trunc_ms(listed[0].started_at), first.started_at);

    // An external worker's row keeps its kind and what it asked for.
    let external = InstanceInfo {
        kind: InstanceKind::External,
        queues: Some(vec!["mail".into(), "reports".into()]),
        job_types: Some(vec!["email.*".into()]),
        ..instance("ext:billing-py", 3)
    };
    store.heartbeat_instance(&external).await.unwrap();
    let listed = store.list_instances(hour).await.unwrap();
    let row = listed.iter().find(|i| i.id == "ext:billing-py").unwrap();
    assert_eq!(
        (row.kind, &row.queues, &row.job_types, row.workers_busy),
        (
            InstanceKind::External,
            &external.queues,
            &external.job_types,
            3
        )
    );
    store.deregister_instance("ext:billing-py").await.unwrap();

    let_clock_advance().await;
    assert!(
        store
            .list_instances(Duration::ZERO)
            .await
            .unwrap()
            .is_empty(),
        "max_age bounds the heartbeat age"
    );

    store.deregister_instance("inst-a").await.unwrap();
    let listed = store.list_instances(hour).await.unwrap();
    assert_eq!(
        listed.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        vec!["inst-b"]
    );
    store.deregister_instance("never-registered").await.unwrap();
    assert_counters_match_rows(&*store).await;
}

pub async fn instance_quiet_is_stored_and_read_back_by_list_and_heartbeat(f: StoreFactory) {
    let store = f.store();
    let hour = Duration::from_secs(3600);
    let quiet_of =
        |listed: &[InstanceInfo], id: &str| listed.iter().find(|i| i.id == id).map(|i| i.quiet);
    assert!(
        !store
            .heartbeat_instance(&instance("inst-q", 0))
            .await
            .unwrap(),
        "a new instance claims"
    );
    store
        .heartbeat_instance(&instance("inst-other", 0))
        .await
        .unwrap();

    assert_eq!(
        store.set_instance_quiet("inst-q", true).await.unwrap(),
        Applied::Applied
    );
    let listed = f.connect().await.list_instances(hour).await.unwrap();
    assert_eq!(quiet_of(&listed, "inst-q"), Some(true));
    assert_eq!(
        quiet_of(&listed, "inst-other"),
        Some(false),
        "only that one"
    );

    // The instance's own beat says `quiet: false` (it has not learned yet): the stored
    // flag wins, and the beat answers it.
    assert!(
        store
            .heartbeat_instance(&instance("inst-q", 2))
            .await
            .unwrap(),
        "the heartbeat answers the stored flag"
    );
    let listed = store.list_instances(hour).await.unwrap();
    assert_eq!(
        quiet_of(&listed, "inst-q"),
        Some(true),
        "a beat does not clear it"
    );

    assert_eq!(
        store.set_instance_quiet("inst-q", false).await.unwrap(),
        Applied::Applied
    );
    assert!(
        !store
            .heartbeat_instance(&instance("inst-q", 2))
            .await
            .unwrap()
    );
    let listed = store.list_instances(hour).await.unwrap();
    assert_eq!(quiet_of(&listed, "inst-q"), Some(false));

    assert_eq!(
        store
            .set_instance_quiet("never-registered", true)
            .await
            .unwrap(),
        Applied::NotApplied
    );
    assert!(
        !store
            .heartbeat_instance(&instance("never-registered", 0))
            .await
            .unwrap(),
        "quieting an unknown id leaves nothing behind for a later instance of that id"
    );
}

pub async fn settings_default_then_round_trip(f: StoreFactory) {
    let store = f.store();
    assert_eq!(
        store.load_settings().await.unwrap(),
        EngineSettings::default()
    );
    let custom = EngineSettings {
        worker_count: 32,
        retry: RetrySettings {
            max_attempts: 7,
            base_delay_ms: 500,
            max_delay_ms: 60_000,
            jitter_ms: 250,
            max_job_age_secs: 7_200,
        },
        retention: RetentionSettings {
            archive_days: 2,
            dlq_days: 90,
            metrics_days: 14,
        },
    };
    store.save_settings(&custom).await.unwrap();
    assert_eq!(f.connect().await.load_settings().await.unwrap(), custom);
    let again = EngineSettings {
        worker_count: 4,
        ..custom
    };
    store.save_settings(&again).await.unwrap();
    assert_eq!(store.load_settings().await.unwrap(), again);
    assert_counters_match_rows(&*store).await;
}

pub async fn audit_appends_and_pages_newest_first(f: StoreFactory) {
    let store = f.store();
    assert!(
        store
            .list_audit(&Default::default(), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let mut written = Vec::new();
    for i in 0..5u64 {
        let entry = NewAuditEntry {
            actor: "alice".into(),
            action: "queue.pause".into(),
            target: format!("queue-{i}"),
            count: i,
            detail: (i % 2 == 0).then(|| format!("detail {i}")),
        };
        let stored = store.append_audit(entry.clone()).await.unwrap();
        assert_eq!(
            (
                &stored.actor,
                &stored.action,
                &stored.target,
                stored.count,
                &stored.detail
            ),
            (
                &entry.actor,
                &entry.action,
                &entry.target,
                entry.count,
                &entry.detail
            )
        );
        assert!(since(stored.at) < secs(60));
        if let Some(prev) = written.last() {
            let prev: &AuditEntry = prev;
            assert!(stored.id > prev.id, "ids grow");
        }
        written.push(stored);
    }
    // The returned entry is what the log keeps (to the millisecond).
    let norm = |entries: Vec<AuditEntry>| -> Vec<AuditEntry> {
        entries
            .into_iter()
            .map(|e| AuditEntry {
                at: trunc_ms(e.at),
                ..e
            })
            .collect()
    };
    let written = norm(written);
    // Two entries a page, newest first, each page after the last entry of the one before.
    let page_after = |last| {
        let store = store.clone();
        async move {
            norm(
                store
                    .list_audit(&Default::default(), last, 2)
                    .await
                    .unwrap(),
            )
        }
    };
    let page1 = page_after(None).await;
    assert_eq!(page1, vec![written[4].clone(), written[3].clone()]);
    let page2 = page_after(Some(page1[1].id)).await;
    assert_eq!(page2, vec![written[2].clone(), written[1].clone()]);
    let page3 = page_after(Some(page2[1].id)).await;
    assert_eq!(page3, vec![written[0].clone()]);
    assert!(page_after(Some(written[0].id)).await.is_empty());
    assert!(
        store
            .list_audit(&Default::default(), None, 0)
            .await
            .unwrap()
            .is_empty()
    );
    let everything = f
        .connect()
        .await
        .list_audit(&Default::default(), None, 100)
        .await
        .unwrap();
    assert_eq!(everything.len(), 5);
    assert_counters_match_rows(&*store).await;
}

pub async fn audit_lists_by_actor_action_and_time(f: StoreFactory) {
    let store = f.store();
    let mut at = Vec::new();
    for (actor, action) in [
        ("alice", "queue.pause"),
        ("bob", "queue.resume"),
        ("alice", "job.purge"),
        ("bob", "queues.bulk"),
    ] {
        let entry = NewAuditEntry {
            actor: actor.into(),
            action: action.into(),
            target: "t".into(),
            count: 1,
            detail: None,
        };
        at.push(store.append_audit(entry).await.unwrap());
    }
    let list = |filter: AuditFilter| {
        let store = store.clone();
        async move {
            let got = store.list_audit(&filter, None, 10).await.unwrap();
            got.into_iter()
                .map(|e| format!("{}:{}", e.actor, e.action))
                .collect::<Vec<_>>()
        }
    };
    let by_actor = list(AuditFilter {
        actor: Some("alice".into()),
        ..Default::default()
    })
    .await;
    assert_eq!(by_actor, ["alice:job.purge", "alice:queue.pause"]);
    // A family matches its actions, not another family that starts with the same letters.
    let family = list(AuditFilter {
        action: Some("queue".into()),
        ..Default::default()
    })
    .await;
    assert_eq!(family, ["bob:queue.resume", "alice:queue.pause"]);
    let exact = list(AuditFilter {
        actor: Some("bob".into()),
        action: Some("queue.resume".into()),
        ..Default::default()
    })
    .await;
    assert_eq!(exact, ["bob:queue.resume"]);
    let later = list(AuditFilter {
        from: Some(at[0].at + chrono::Duration::hours(1)),
        ..Default::default()
    })
    .await;
    assert!(later.is_empty(), "{later:?}");
    let window = list(AuditFilter {
        from: Some(at[0].at - chrono::Duration::hours(1)),
        to: Some(at[3].at + chrono::Duration::hours(1)),
        ..Default::default()
    })
    .await;
    assert_eq!(window.len(), 4);
    let before = list(AuditFilter {
        to: Some(at[0].at - chrono::Duration::hours(1)),
        ..Default::default()
    })
    .await;
    assert!(before.is_empty(), "{before:?}");
}

/// The one audit rule for refused actions, through the operations layer: an action its
/// target refuses (unknown id or name, wrong state, a conflict) leaves a row with count 0
/// and the refusal as detail, as an applied one leaves a row; input that fails validation
/// leaves none.
pub async fn refused_actions_are_audited_with_count_zero(f: StoreFactory) {
    use crate::error::StoreError;
    use crate::model::{CancelOutcome, JobEdit, JobId, Pillar};

    let store = f.store();
    let ops = door(&store);
    let unknown = JobId::new();
    let running = processing_job(&*store, req("emails", "send"), "w1").await;
    let edit = JobEdit {
        priority: Some(5),
        ..JobEdit::default()
    };
    let taken = report_schedule("taken");
    ops.create_schedule("alice", taken.clone()).await.unwrap();

    assert_eq!(
        ops.cancel("alice", unknown).await.unwrap(),
        CancelOutcome::NotFound
    );
    let resurrect_unknown = ops.resurrect("alice", unknown, None).await;
    assert!(
        matches!(
            resurrect_unknown,
            Err(StoreError::JobNotFound(_)) | Ok(Applied::NotApplied)
        ),
        "{resurrect_unknown:?}"
    );
    let resurrect_running = ops.resurrect("alice", running, None).await;
    assert!(
        matches!(
            resurrect_running,
            Err(StoreError::JobNotFound(_)) | Ok(Applied::NotApplied)
        ),
        "{resurrect_running:?}"
    );
    assert!(ops.edit("alice", running, edit.clone()).await.is_err());
    assert!(ops.edit("alice", unknown, edit).await.is_err());
    assert_eq!(ops.purge("alice", Pillar::Dlq, unknown).await.unwrap(), 0);
    assert!(matches!(
        ops.create_schedule("alice", taken).await,
        Err(StoreError::Conflict { .. })
    ));
    let nobody = report_schedule("nobody");
    assert!(matches!(
        ops.edit_schedule("alice", nobody).await,
        Err(StoreError::ScheduleNotFound(_))
    ));
    assert!(matches!(
        ops.set_schedule_enabled("alice", "nobody", false).await,
        Err(StoreError::ScheduleNotFound(_))
    ));
    assert!(matches!(
        ops.run_schedule_now("alice", "nobody").await,
        Err(StoreError::ScheduleNotFound(_))
    ));
    assert_eq!(
        ops.delete_schedule("alice", "nobody").await.unwrap(),
        Applied::NotApplied
    );
    assert_eq!(
        ops.set_instance_quiet("alice", "no-such-instance", true)
            .await
            .unwrap(),
        Applied::NotApplied
    );
    // Refused before any target: not audited.
    let mut invalid = report_schedule("invalid");
    invalid.time_zone = "Mars/Olympus".into();
    assert!(is_invalid(ops.create_schedule("alice", invalid).await));

    let rows = store
        .list_audit(
            &AuditFilter {
                actor: Some("alice".into()),
                ..Default::default()
            },
            None,
            100,
        )
        .await
        .unwrap();
    let mut refused: Vec<(String, String)> = rows
        .iter()
        .filter(|e| e.count == 0)
        .map(|e| (e.action.clone(), e.target.clone()))
        .collect();
    refused.sort();
    let (unknown, running) = (unknown.to_string(), running.to_string());
    let mut expected: Vec<(String, String)> = [
        ("instance.quiet", "no-such-instance"),
        ("job.cancel", unknown.as_str()),
        ("job.edit", running.as_str()),
        ("job.edit", unknown.as_str()),
        ("job.purge", unknown.as_str()),
        ("job.resurrect", running.as_str()),
        ("job.resurrect", unknown.as_str()),
        ("schedule.create", "taken"),
        ("schedule.delete", "nobody"),
        ("schedule.edit", "nobody"),
        ("schedule.pause", "nobody"),
        ("schedule.run_now", "nobody"),
    ]
    .iter()
    .map(|(a, t)| (a.to_string(), t.to_string()))
    .collect();
    expected.sort();
    assert_eq!(refused, expected, "every refusal once, with count 0");
    assert_eq!(
        rows.len(),
        expected.len() + 1,
        "the one applied create besides; the invalid create left no row"
    );
    for e in rows
        .iter()
        .filter(|e| e.count == 0 && e.action != "job.cancel")
    {
        let detail = e.detail.as_deref().unwrap_or("");
        assert!(
            detail.starts_with("refused") || e.action == "job.purge" || detail.is_empty(),
            "{}: {detail:?}",
            e.action
        );
    }
}

//! Rescue sweeps, retention, queue settings, engine settings, instances and the audit log.
//! A sweep step moves or deletes at most `MAX_ROWS_PER_STATEMENT` rows in one transaction;
//! `crate::maintenance` repeats it until a step comes back short.

use std::time::Duration;

use super::SqlServerStore;
use super::pool::{Fault, Repeat};
use super::queries::{self, MAX_ROWS_PER_STATEMENT, Statement};
use super::rows::{
    self, count, opt_str, opt_u32, req_str, secs, to_i32, to_json, written, written_head,
};
use crate::error::{StoreError, StoreResult};
use crate::model::{
    Applied, AuditEntry, AuditFilter, EngineSettings, FailureReason, InstanceInfo, InstanceKind,
    NewAuditEntry, PruneStep, PruneTarget, QueueConfig, QueuePatch, RateLimit, RescueKind,
    RescueStep, StoreWrittenError,
};
use crate::query::MAX_PAGE_SIZE;

/// The errors the rescue sweeps write, the same text as every backend writes.
const ZOMBIE: StoreWrittenError = written(FailureReason::Zombie);
const EXPIRED: StoreWrittenError = written(FailureReason::Expired);

pub(super) async fn rescue_step(store: &SqlServerStore, step: RescueStep<'_>) -> StoreResult<u64> {
    let RescueStep {
        kind,
        policy,
        limit,
    } = step;
    // At most MAX_ROWS_PER_STATEMENT rows per step, whatever the caller asks.
    let batch = to_i32(limit.clamp(1, u32::try_from(MAX_ROWS_PER_STATEMENT).unwrap_or(u32::MAX)));
    let dead = secs(policy.dead_instance_timeout);
    let fetched = secs(policy.fetched_timeout);
    let zombie = secs(policy.default_zombie_timeout);
    let zombie_head = written_head(FailureReason::Zombie, ZOMBIE);
    let expired_head = written_head(FailureReason::Expired, EXPIRED);
    let (statement, column, params): (&Statement, _, Vec<&dyn tiberius::ToSql>) = match kind {
        RescueKind::StaleClaims => (
            &queries::RESCUE_FETCHED,
            "released",
            vec![&fetched, &dead, &batch],
        ),
        RescueKind::Zombies => (
            &queries::RESCUE_ZOMBIES,
            "zombies",
            vec![
                &zombie,
                &dead,
                &batch,
                &ZOMBIE.kind,
                &ZOMBIE.message,
                &zombie_head,
            ],
        ),
        RescueKind::Expired => (
            &queries::RESCUE_EXPIRED,
            "expired",
            vec![&batch, &EXPIRED.kind, &EXPIRED.message, &expired_head],
        ),
        RescueKind::DeadInstances => (&queries::RESCUE_INSTANCES, "deleted", vec![&batch]),
    };
    store
        .count_of("rescue", Repeat::Always, statement, &params, column)
        .await
}

pub(super) async fn prune_step(store: &SqlServerStore, step: PruneStep) -> StoreResult<u64> {
    let PruneStep {
        target,
        older_than,
        limit,
    } = step;
    // At most MAX_ROWS_PER_STATEMENT rows per delete, whatever the caller asks.
    let batch = to_i32(limit.clamp(1, u32::try_from(MAX_ROWS_PER_STATEMENT).unwrap_or(u32::MAX)));
    let age = secs(older_than);
    let statement = match target {
        PruneTarget::Archive => &queries::PRUNE_ARCHIVE,
        PruneTarget::Dlq => &queries::PRUNE_DLQ,
        PruneTarget::MetricBuckets => &queries::PRUNE_METRICS,
        PruneTarget::Audit => &queries::PRUNE_AUDIT,
        PruneTarget::UniqueKeys => &queries::PRUNE_UNIQUE_KEYS,
        PruneTarget::ScheduleRuns => &queries::PRUNE_SCHEDULE_RUNS,
        PruneTarget::Batches => &queries::PRUNE_BATCHES,
    };
    let deleted = store
        .count_of(
            "prune",
            Repeat::Always,
            statement,
            &[&age, &batch],
            "deleted",
        )
        .await?;
    if target == PruneTarget::Dlq && deleted > 0 {
        // Groups whose rows all left the DLQ (their slots sum to zero) are only storage.
        store
            .count_of(
                "prune",
                Repeat::Always,
                &queries::PRUNE_ERROR_GROUPS,
                &[],
                "deleted",
            )
            .await?;
    }
    Ok(deleted)
}

pub(super) async fn list_queues(store: &SqlServerStore) -> StoreResult<Vec<QueueConfig>> {
    let rows = store
        .rows_of("list_queues", Repeat::Always, &queries::LIST_QUEUES, &[])
        .await?;
    store.map_rows("list_queues", &rows, queue_config)
}

pub(super) async fn update_queue(
    store: &SqlServerStore,
    name: &str,
    patch: QueuePatch,
) -> StoreResult<QueueConfig> {
    let set = |o: &Option<Option<u32>>| o.is_some();
    let val = |o: &Option<Option<u32>>| o.flatten().map(to_i32);
    let (p_set, p_val) = (patch.paused.is_some(), patch.paused.unwrap_or(false));
    let (h_set, h_val) = (patch.hidden.is_some(), patch.hidden.unwrap_or(false));
    let (mw_set, mw) = (set(&patch.max_workers), val(&patch.max_workers));
    let (zt_set, zt) = (
        set(&patch.zombie_timeout_secs),
        val(&patch.zombie_timeout_secs),
    );
    let (et_set, et) = (
        set(&patch.execution_timeout_secs),
        val(&patch.execution_timeout_secs),
    );
    let (lw_set, lw) = (set(&patch.lag_warn_secs), val(&patch.lag_warn_secs));
    let (lc_set, lc) = (set(&patch.lag_crit_secs), val(&patch.lag_crit_secs));
    let rl_set = patch.rate_limit.is_some();
    let rl_starts = patch.rate_limit.flatten().map(|l| to_i32(l.starts));
    let rl_period = patch.rate_limit.flatten().map(|l| to_i32(l.per_secs));
    let rows = store
        .rows_of(
            "update_queue",
            Repeat::Always,
            &queries::UPDATE_QUEUE,
            &[
                &name, &p_set, &p_val, &h_set, &h_val, &mw_set, &mw, &zt_set, &zt, &et_set, &et,
                &lw_set, &lw, &lc_set, &lc, &rl_set, &rl_starts, &rl_period,
            ],
        )
        .await?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::database("update_queue", "no row came back", false))?;
    queue_config(row).map_err(|f| store.fault("update_queue", f))
}

pub(super) async fn load_settings(store: &SqlServerStore) -> StoreResult<EngineSettings> {
    let rows = store
        .rows_of(
            "load_settings",
            Repeat::Always,
            &queries::LOAD_SETTINGS,
            &[],
        )
        .await?;
    match rows.first() {
        None => Ok(EngineSettings::default()),
        Some(row) => {
            let text = req_str(row, "value").map_err(|f| store.fault("load_settings", f))?;
            serde_json::from_str(&text).map_err(|e| StoreError::Schema {
                problem: format!("the saved engine settings cannot be read: {e}"),
                help: "save the settings again from the console".into(),
            })
        }
    }
}

pub(super) async fn save_settings(
    store: &SqlServerStore,
    settings: &EngineSettings,
) -> StoreResult<()> {
    let json = to_json(settings)?;
    store
        .rows_of(
            "save_settings",
            Repeat::Always,
            &queries::SAVE_SETTINGS,
            &[&json],
        )
        .await?;
    Ok(())
}

pub(super) async fn heartbeat_instance(
    store: &SqlServerStore,
    info: &InstanceInfo,
) -> StoreResult<bool> {
    let pid = i64::from(info.pid);
    let started = rows::to_sql_time(info.started_at);
    let total = to_i32(info.workers_total);
    let busy = to_i32(info.workers_busy);
    let kind = info.kind.as_str();
    let queues = info.queues.as_ref().map(to_json).transpose()?;
    let job_types = info.job_types.as_ref().map(to_json).transpose()?;
    let rows = store
        .rows_of(
            "heartbeat_instance",
            Repeat::Always,
            &queries::HEARTBEAT_INSTANCE,
            &[
                &info.id,
                &info.host,
                &pid,
                &info.version,
                &started,
                &total,
                &busy,
                &kind,
                &queues,
                &job_types,
            ],
        )
        .await?;
    let quiet = store.map_rows("heartbeat_instance", &rows, |r| rows::req_bool(r, "quiet"))?;
    // The upsert just wrote the row, so it is there; a missing one reads as claiming.
    Ok(quiet.first().copied().unwrap_or(false))
}

pub(super) async fn set_instance_quiet(
    store: &SqlServerStore,
    id: &str,
    quiet: bool,
) -> StoreResult<Applied> {
    // Setting a flag to a value is idempotent: safe to repeat after a lost connection.
    let changed = store
        .count_of(
            "set_instance_quiet",
            Repeat::Always,
            &queries::SET_INSTANCE_QUIET,
            &[&id, &quiet],
            "changed",
        )
        .await?;
    Ok(Applied::from_rows(usize::from(changed > 0)))
}

pub(super) async fn deregister_instance(store: &SqlServerStore, id: &str) -> StoreResult<()> {
    store
        .rows_of(
            "deregister_instance",
            Repeat::Always,
            &queries::DEREGISTER_INSTANCE,
            &[&id],
        )
        .await?;
    Ok(())
}

pub(super) async fn list_instances(
    store: &SqlServerStore,
    max_age: Duration,
) -> StoreResult<Vec<InstanceInfo>> {
    let ms = i64::try_from(max_age.as_millis())
        .unwrap_or(i64::MAX)
        .min(60 * 365 * 86_400_000); // DATEADD(SECOND, …) takes an int
    let rows = store
        .rows_of(
            "list_instances",
            Repeat::Always,
            &queries::LIST_INSTANCES,
            &[&ms],
        )
        .await?;
    store.map_rows("list_instances", &rows, instance)
}

pub(super) async fn append_audit(
    store: &SqlServerStore,
    entry: NewAuditEntry,
) -> StoreResult<AuditEntry> {
    let count = i64::try_from(entry.count).unwrap_or(i64::MAX);
    let target: String = entry.target.chars().take(4000).collect();
    let rows = store
        .rows_of(
            "append_audit",
            Repeat::IfNotApplied,
            &queries::APPEND_AUDIT,
            &[&entry.actor, &entry.action, &target, &count, &entry.detail],
        )
        .await?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::database("append_audit", "no row came back", false))?;
    audit(row).map_err(|f| store.fault("append_audit", f))
}

pub(super) async fn list_audit(
    store: &SqlServerStore,
    filter: &AuditFilter,
    before_id: Option<i64>,
    limit: u32,
) -> StoreResult<Vec<AuditEntry>> {
    let limit = i64::from(limit.min(MAX_PAGE_SIZE * 2));
    let actor = filter.actor.as_deref();
    let action = filter.action.as_deref();
    let from = filter.from.map(rows::to_sql_time);
    let to = filter.to.map(rows::to_sql_time);
    let rows = store
        .rows_of(
            "list_audit",
            Repeat::Always,
            &queries::LIST_AUDIT,
            &[&limit, &before_id, &actor, &action, &from, &to],
        )
        .await?;
    store.map_rows("list_audit", &rows, audit)
}

fn queue_config(row: &tiberius::Row) -> Result<QueueConfig, Fault> {
    let rate_limit = match (
        opt_u32(row, "rate_max_starts")?,
        opt_u32(row, "rate_period_secs")?,
    ) {
        (Some(starts), Some(per_secs)) if per_secs > 0 => Some(RateLimit { starts, per_secs }),
        _ => None,
    };
    // The period's end, once its starts are used up (by this process's clock: it is only
    // shown, the claim decides by the database's).
    let rate_limited_until = match (
        rate_limit,
        rows::opt_int(row, "rate_window_start")?,
        rows::opt_int(row, "rate_window_starts")?,
    ) {
        (Some(limit), Some(start), Some(used)) => {
            let now = chrono::Utc::now().timestamp();
            let period = i64::from(limit.per_secs);
            (start == now - now.rem_euclid(period) && used >= i64::from(limit.starts))
                .then(|| chrono::DateTime::from_timestamp(start + period, 0))
                .flatten()
        }
        _ => None,
    };
    Ok(QueueConfig {
        name: req_str(row, "name")?,
        paused: rows::req_bool(row, "paused")?,
        hidden: rows::req_bool(row, "hidden")?,
        max_workers: opt_u32(row, "max_workers")?,
        zombie_timeout_secs: opt_u32(row, "zombie_timeout_secs")?,
        execution_timeout_secs: opt_u32(row, "execution_timeout_secs")?,
        lag_warn_secs: opt_u32(row, "lag_warn_secs")?,
        lag_crit_secs: opt_u32(row, "lag_crit_secs")?,
        updated_at: rows::opt_time(row, "updated_at")?,
        rate_limit,
        rate_limited_until,
    })
}

fn instance(row: &tiberius::Row) -> Result<InstanceInfo, Fault> {
    Ok(InstanceInfo {
        id: req_str(row, "id")?,
        host: req_str(row, "host")?,
        pid: opt_u32(row, "pid")?.unwrap_or(0),
        version: req_str(row, "version")?,
        started_at: rows::req_time(row, "started_at")?,
        heartbeat_at: rows::req_time(row, "heartbeat_at")?,
        workers_total: opt_u32(row, "workers_total")?.unwrap_or(0),
        workers_busy: opt_u32(row, "workers_busy")?.unwrap_or(0),
        kind: InstanceKind::from_stored(&req_str(row, "kind")?),
        queues: crate::store::names_from_json(opt_str(row, "queues")?),
        job_types: crate::store::names_from_json(opt_str(row, "job_types")?),
        quiet: rows::req_bool(row, "quiet")?,
        held_jobs: u32::try_from(rows::req_int(row, "held_jobs")?).unwrap_or(u32::MAX),
        stopped: rows::req_bool(row, "stopped")?,
    })
}

fn audit(row: &tiberius::Row) -> Result<AuditEntry, Fault> {
    Ok(AuditEntry {
        id: rows::req_int(row, "id")?,
        at: rows::req_time(row, "at")?,
        actor: req_str(row, "actor")?,
        action: req_str(row, "action")?,
        target: req_str(row, "target")?,
        count: count(row, "count")?,
        detail: opt_str(row, "detail")?,
    })
}

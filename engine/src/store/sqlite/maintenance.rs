//! Rescue sweeps, retention, queue settings, engine settings, instances and the audit log.

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{StoreError, StoreResult};
use crate::model::{
    Applied, AuditEntry, AuditFilter, EngineSettings, FailureReason, InstanceInfo, InstanceKind,
    NewAuditEntry, PruneTarget, QueueConfig, QueuePatch, RateLimit, RescueKind, RescueStep,
};

use super::codec::{duration_us, from_us, opt_from_us, to_json, to_us, u64_of};
use super::connection::db_err;
use super::moves::{DeadError, delete_archive, delete_dlq, move_to_dlq};

/// Instance rows are kept this long after their last heartbeat (for the console).
const INSTANCE_ROW_KEEP_US: i64 = 3_600 * 1_000_000;

/// True when the job's worker belongs to an instance that stopped heartbeating. Worker ids
/// are the instance id, optionally followed by `:` or `/` and a worker suffix.
const DEAD_OWNER: &str = "EXISTS (SELECT 1 FROM instances i WHERE i.heartbeat_at < ?12 \
     AND (jobs.worker_id = i.id OR substr(jobs.worker_id, 1, length(i.id) + 1) IN (i.id || ':', i.id || '/')))";

/// One rescue step: at most `step.limit` rows of `step.kind`. Returns how many moved.
pub(crate) fn rescue_step(conn: &Connection, step: RescueStep<'_>, now: i64) -> StoreResult<u64> {
    let RescueStep {
        kind,
        policy,
        limit,
    } = step;
    let dead_before = now - duration_us(policy.dead_instance_timeout);
    let limit = Value::Integer(i64::from(limit.max(1)));
    match kind {
        RescueKind::StaleClaims => {
            let fetched_before = now - duration_us(policy.fetched_timeout);
            // The unused leading slots keep parameter numbers shared with the DLQ moves.
            let params = (1..=10).map(|_| Value::Null).chain([
                Value::Integer(fetched_before),
                Value::Integer(dead_before),
                limit,
            ]);
            conn.prepare_cached(&format!(
                "UPDATE jobs SET status = 0, worker_id = NULL, fetched_at = NULL \
                 WHERE id IN (SELECT id FROM jobs \
                     WHERE status = 1 AND (fetched_at < ?11 OR {DEAD_OWNER}) LIMIT ?13)"
            ))
            .map_err(db_err("rescue"))?
            .execute(rusqlite::params_from_iter(params))
            .map(|n| n as u64)
            .map_err(db_err("rescue"))
        }
        RescueKind::Zombies => Ok(move_to_dlq(
            conn,
            &format!(
                "id IN (SELECT id FROM jobs WHERE status = 2 \
                     AND (heartbeat_at < ?2 - coalesce((SELECT q.zombie_timeout_secs * 1000000 \
                         FROM queues q WHERE q.name = jobs.queue), ?11) OR {DEAD_OWNER}) \
                     AND ?10 IS NULL LIMIT ?13)"
            ),
            &[
                Value::Null,
                Value::Integer(duration_us(policy.default_zombie_timeout)),
                Value::Integer(dead_before),
                limit,
            ],
            FailureReason::Zombie,
            DeadError::written_for(FailureReason::Zombie),
            0,
            now,
        )?
        .len() as u64),
        RescueKind::Expired => Ok(move_to_dlq(
            conn,
            "id IN (SELECT id FROM jobs WHERE status = 0 AND expires_at IS NOT NULL \
                 AND expires_at <= ?2 AND ?10 IS NULL LIMIT ?11)",
            &[Value::Null, limit],
            FailureReason::Expired,
            DeadError::written_for(FailureReason::Expired),
            0,
            now,
        )?
        .len() as u64),
        RescueKind::DeadInstances => conn
            .prepare_cached(
                "DELETE FROM instances WHERE id IN \
                 (SELECT id FROM instances WHERE heartbeat_at < ?1 LIMIT ?2)",
            )
            .map_err(db_err("rescue"))?
            .execute(rusqlite::params_from_iter([
                Value::Integer(now - INSTANCE_ROW_KEEP_US),
                limit,
            ]))
            .map(|n| n as u64)
            .map_err(db_err("rescue")),
    }
}

/// Delete at most `batch` rows older than `before` from one table. Returns how many went.
pub(crate) fn prune_step(
    conn: &Connection,
    target: PruneTarget,
    before: i64,
    batch: u32,
    now: i64,
) -> StoreResult<u64> {
    let params = [Value::Integer(before), Value::Integer(i64::from(batch))];
    match target {
        PruneTarget::Archive => delete_archive(
            conn,
            "rowid IN (SELECT rowid FROM archive WHERE finished_at < ?1 ORDER BY finished_at LIMIT ?2)",
            &params,
        ),
        PruneTarget::Dlq => delete_dlq(
            conn,
            "rowid IN (SELECT rowid FROM dlq WHERE finished_at < ?1 ORDER BY finished_at LIMIT ?2)",
            &params,
            now,
        ),
        // Run-time bins are metric rows too and share their retention. A step deletes up to
        // a batch of each and answers the larger count, so the pruner steps on while either
        // table still had a full batch to delete (its report counts metric rows that way).
        PruneTarget::MetricBuckets => {
            let buckets = delete_oldest(
                conn,
                "DELETE FROM metric_buckets WHERE (queue, minute) IN \
                 (SELECT queue, minute FROM metric_buckets WHERE minute < ?1 ORDER BY minute LIMIT ?2)",
                &params,
            )?;
            let bins = delete_oldest(
                conn,
                "DELETE FROM run_time_bins WHERE (minute, job_type, bin) IN \
                 (SELECT minute, job_type, bin FROM run_time_bins WHERE minute < ?1 \
                  ORDER BY minute LIMIT ?2)",
                &params,
            )?;
            Ok(buckets.max(bins))
        }
        // `before` is `now` here (the target keeps nothing past a key's own end).
        PruneTarget::UniqueKeys => delete_oldest(
            conn,
            "DELETE FROM unique_keys WHERE key IN \
             (SELECT key FROM unique_keys WHERE held_until <= ?1 ORDER BY held_until LIMIT ?2)",
            &params,
        ),
        PruneTarget::ScheduleRuns => delete_oldest(
            conn,
            "DELETE FROM schedule_runs WHERE (schedule, scheduled_at, manual) IN \
             (SELECT schedule, scheduled_at, manual FROM schedule_runs WHERE recorded_at < ?1 \
              ORDER BY recorded_at LIMIT ?2)",
            &params,
        ),
        PruneTarget::Batches => delete_oldest(
            conn,
            "DELETE FROM batches WHERE id IN \
             (SELECT id FROM batches WHERE finished_at < ?1 ORDER BY finished_at LIMIT ?2)",
            &params,
        ),
        PruneTarget::Audit => delete_oldest(
            conn,
            "DELETE FROM audit_log WHERE id IN \
             (SELECT id FROM audit_log WHERE at < ?1 ORDER BY at LIMIT ?2)",
            &params,
        ),
    }
}

/// Run a retention `DELETE` of a table without books to keep (?1 the cutoff, ?2 the batch).
/// Returns how many rows went.
fn delete_oldest(conn: &Connection, sql: &str, params: &[Value; 2]) -> StoreResult<u64> {
    conn.prepare_cached(sql)
        .map_err(db_err("prune"))?
        .execute(rusqlite::params_from_iter(params.iter()))
        .map(|n| n as u64)
        .map_err(db_err("prune"))
}

/// A queue's settings with its rate limit; ?1 is now (microseconds), for whether the current
/// period's starts are used up.
const QUEUE_SELECT: &str = "SELECT q.name, q.paused, q.hidden, q.max_workers, \
         q.zombie_timeout_secs, q.execution_timeout_secs, q.lag_warn_secs, q.lag_crit_secs, \
         q.updated_at, r.max_starts, r.period_secs, \
         CASE WHEN r.window_start = ?1 - ?1 % (r.period_secs * 1000000) \
                   AND r.window_starts >= r.max_starts \
              THEN r.window_start + r.period_secs * 1000000 END \
     FROM queues q LEFT JOIN rate_limits r ON r.queue = q.name";

fn opt_u32(v: Option<i64>) -> Option<u32> {
    v.map(|v| u32::try_from(v.max(0)).unwrap_or(u32::MAX))
}

fn queue_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<QueueConfig> {
    Ok(QueueConfig {
        name: r.get(0)?,
        paused: r.get::<_, i64>(1)? != 0,
        hidden: r.get::<_, i64>(2)? != 0,
        max_workers: opt_u32(r.get(3)?),
        zombie_timeout_secs: opt_u32(r.get(4)?),
        execution_timeout_secs: opt_u32(r.get(5)?),
        lag_warn_secs: opt_u32(r.get(6)?),
        lag_crit_secs: opt_u32(r.get(7)?),
        updated_at: opt_from_us(r.get(8)?),
        rate_limit: match (opt_u32(r.get(9)?), opt_u32(r.get(10)?)) {
            (Some(starts), Some(per_secs)) => Some(RateLimit { starts, per_secs }),
            _ => None,
        },
        rate_limited_until: opt_from_us(r.get(11)?),
    })
}

pub(crate) fn list_queues(conn: &Connection, now: i64) -> StoreResult<Vec<QueueConfig>> {
    let sql = format!("{QUEUE_SELECT} ORDER BY q.name");
    conn.prepare_cached(&sql)
        .map_err(db_err("list queues"))?
        .query_map([now], queue_from_row)
        .map_err(db_err("list queues"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("list queues"))
}

fn patch_value(p: Option<Option<u32>>) -> (bool, Option<i64>) {
    match p {
        None => (false, None),
        Some(v) => (true, v.map(i64::from)),
    }
}

pub(crate) fn update_queue(
    conn: &Connection,
    name: &str,
    patch: &QueuePatch,
    now: i64,
) -> StoreResult<QueueConfig> {
    super::producers::ensure_queues(conn, [name], now)?;
    let (mw_set, mw) = patch_value(patch.max_workers);
    let (zt_set, zt) = patch_value(patch.zombie_timeout_secs);
    let (et_set, et) = patch_value(patch.execution_timeout_secs);
    let (lw_set, lw) = patch_value(patch.lag_warn_secs);
    let (lc_set, lc) = patch_value(patch.lag_crit_secs);
    let sql = "UPDATE queues SET \
             paused = coalesce(?2, paused), hidden = coalesce(?3, hidden), \
             max_workers = CASE WHEN ?4 THEN ?5 ELSE max_workers END, \
             zombie_timeout_secs = CASE WHEN ?6 THEN ?7 ELSE zombie_timeout_secs END, \
             execution_timeout_secs = CASE WHEN ?8 THEN ?9 ELSE execution_timeout_secs END, \
             lag_warn_secs = CASE WHEN ?10 THEN ?11 ELSE lag_warn_secs END, \
             lag_crit_secs = CASE WHEN ?12 THEN ?13 ELSE lag_crit_secs END, \
             updated_at = ?14 \
         WHERE name = ?1";
    conn.prepare_cached(sql)
        .map_err(db_err("update queue"))?
        .execute(params![
            name,
            patch.paused,
            patch.hidden,
            mw_set,
            mw,
            zt_set,
            zt,
            et_set,
            et,
            lw_set,
            lw,
            lc_set,
            lc,
            now
        ])
        .map_err(db_err("update queue"))?;
    match patch.rate_limit {
        None => {}
        // A changed limit keeps the current period's count: lowering it below what already
        // started holds the rest of the period back.
        Some(Some(limit)) => {
            conn.prepare_cached(
                "INSERT INTO rate_limits (queue, max_starts, period_secs) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (queue) DO UPDATE SET max_starts = excluded.max_starts, \
                     period_secs = excluded.period_secs",
            )
            .map_err(db_err("update queue"))?
            .execute(params![name, limit.starts, limit.per_secs])
            .map_err(db_err("update queue"))?;
        }
        Some(None) => {
            conn.prepare_cached("DELETE FROM rate_limits WHERE queue = ?1")
                .map_err(db_err("update queue"))?
                .execute([name])
                .map_err(db_err("update queue"))?;
        }
    }
    conn.prepare_cached(&format!("{QUEUE_SELECT} WHERE q.name = ?2"))
        .map_err(db_err("update queue"))?
        .query_row(params![now, name], queue_from_row)
        .map_err(db_err("update queue"))
}

const SETTINGS_KEY: &str = "engine";

pub(crate) fn load_settings(conn: &Connection) -> StoreResult<EngineSettings> {
    let text: Option<String> = conn
        .prepare_cached("SELECT value FROM settings WHERE key = ?1")
        .map_err(db_err("load settings"))?
        .query_row([SETTINGS_KEY], |r| r.get(0))
        .optional()
        .map_err(db_err("load settings"))?;
    match text {
        None => Ok(EngineSettings::default()),
        Some(t) => serde_json::from_str(&t).map_err(|e| StoreError::Schema {
            problem: format!("the saved engine settings cannot be read: {e}"),
            help: "save the settings again from the console's Settings page".into(),
        }),
    }
}

pub(crate) fn save_settings(
    conn: &Connection,
    settings: &EngineSettings,
    now: i64,
) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
    )
    .map_err(db_err("save settings"))?
    .execute(params![SETTINGS_KEY, to_json(settings)?, now])
    .map_err(db_err("save settings"))?;
    Ok(())
}

/// Answers the stored quiet flag; the upsert never writes it (see `set_instance_quiet`).
pub(crate) fn heartbeat_instance(
    conn: &Connection,
    info: &InstanceInfo,
    now: i64,
) -> StoreResult<bool> {
    let queues = names_json(info.queues.as_deref())?;
    let job_types = names_json(info.job_types.as_deref())?;
    conn.prepare_cached(
        "INSERT INTO instances (id, host, pid, version, started_at, heartbeat_at, workers_total, \
             workers_busy, kind, queues, job_types) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, \
             version = excluded.version, started_at = excluded.started_at, \
             heartbeat_at = excluded.heartbeat_at, workers_total = excluded.workers_total, \
             workers_busy = excluded.workers_busy, kind = excluded.kind, \
             queues = excluded.queues, job_types = excluded.job_types \
         RETURNING quiet",
    )
    .map_err(db_err("instance heartbeat"))?
    .query_row(
        params![
            info.id,
            info.host,
            info.pid,
            info.version,
            to_us(info.started_at),
            now,
            info.workers_total,
            info.workers_busy,
            info.kind.as_str(),
            queues,
            job_types,
        ],
        |r| r.get::<_, bool>(0),
    )
    .map_err(db_err("instance heartbeat"))
}

pub(crate) fn set_instance_quiet(conn: &Connection, id: &str, quiet: bool) -> StoreResult<Applied> {
    let rows = conn
        .prepare_cached("UPDATE instances SET quiet = ?2 WHERE id = ?1")
        .map_err(db_err("set instance quiet"))?
        .execute(params![id, quiet])
        .map_err(db_err("set instance quiet"))?;
    Ok(Applied::from_rows(rows))
}

/// A list of names as stored: a JSON array, `NULL` for "all of them".
fn names_json(names: Option<&[String]>) -> StoreResult<Option<String>> {
    names.map(|n| to_json(&n)).transpose()
}

/// A clean shutdown: the heartbeat is set to the epoch so the next sweep rescues what the
/// instance left behind and then deletes its row.
pub(crate) fn deregister_instance(conn: &Connection, id: &str) -> StoreResult<()> {
    conn.prepare_cached("UPDATE instances SET heartbeat_at = 0 WHERE id = ?1")
        .map_err(db_err("deregister instance"))?
        .execute([id])
        .map_err(db_err("deregister instance"))?;
    Ok(())
}

/// The jobs (fetched: 1, processing: 2) held by instance `i` or one of its workers, counted
/// per status so each count reads one partial index.
const HELD_BY: &str = "(SELECT count(*) FROM jobs WHERE status = 1 AND {OWNER}) \
     + (SELECT count(*) FROM jobs WHERE status = 2 AND {OWNER})";
const OWNER: &str = "(jobs.worker_id = i.id \
     OR substr(jobs.worker_id, 1, length(i.id) + 1) IN (i.id || ':', i.id || '/'))";

/// Instances that beat since `newer_than`, and older ones (lost or stopped) while they still
/// hold jobs, with how many they hold. A clean shutdown set the heartbeat to 0.
pub(crate) fn list_instances(conn: &Connection, newer_than: i64) -> StoreResult<Vec<InstanceInfo>> {
    let held = HELD_BY.replace("{OWNER}", OWNER);
    conn.prepare_cached(&format!(
        "SELECT * FROM (SELECT i.id, i.host, i.pid, i.version, i.started_at, i.heartbeat_at, \
             i.workers_total, i.workers_busy, i.kind, i.queues, i.job_types, i.quiet, \
             {held} AS held \
         FROM instances i) \
         WHERE (heartbeat_at >= ?1 AND heartbeat_at > 0) OR held > 0 \
         ORDER BY heartbeat_at DESC, id"
    ))
    .map_err(db_err("list instances"))?
    .query_map([newer_than], |r| {
        let heartbeat_at: i64 = r.get(5)?;
        Ok(InstanceInfo {
            id: r.get(0)?,
            host: r.get(1)?,
            pid: r.get(2)?,
            version: r.get(3)?,
            started_at: from_us(r.get(4)?),
            heartbeat_at: from_us(heartbeat_at),
            workers_total: r.get(6)?,
            workers_busy: r.get(7)?,
            kind: InstanceKind::from_stored(&r.get::<_, String>(8)?),
            queues: crate::store::names_from_json(r.get(9)?),
            job_types: crate::store::names_from_json(r.get(10)?),
            quiet: r.get(11)?,
            held_jobs: u32::try_from(r.get::<_, i64>(12)?).unwrap_or(u32::MAX),
            stopped: heartbeat_at == 0,
        })
    })
    .map_err(db_err("list instances"))?
    .collect::<Result<_, _>>()
    .map_err(db_err("list instances"))
}

fn audit_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AuditEntry> {
    Ok(AuditEntry {
        id: r.get(0)?,
        at: from_us(r.get(1)?),
        actor: r.get(2)?,
        action: r.get(3)?,
        target: r.get(4)?,
        count: u64_of(r.get(5)?),
        detail: r.get(6)?,
    })
}

pub(crate) fn append_audit(
    conn: &Connection,
    entry: &NewAuditEntry,
    now: i64,
) -> StoreResult<AuditEntry> {
    conn.prepare_cached(
        "INSERT INTO audit_log (at, actor, action, target, count, detail) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id, at, actor, action, target, count, detail",
    )
    .map_err(db_err("append audit"))?
    .query_row(
        params![
            now,
            entry.actor,
            entry.action,
            entry.target,
            i64::try_from(entry.count).unwrap_or(i64::MAX),
            entry.detail
        ],
        audit_from_row,
    )
    .map_err(db_err("append audit"))
}

pub(crate) fn list_audit(
    conn: &Connection,
    filter: &AuditFilter,
    before_id: Option<i64>,
    limit: u32,
) -> StoreResult<Vec<AuditEntry>> {
    conn.prepare_cached(
        "SELECT id, at, actor, action, target, count, detail FROM audit_log \
         WHERE (?1 IS NULL OR id < ?1) \
           AND (?3 IS NULL OR actor = ?3) \
           AND (?4 IS NULL OR action = ?4 OR substr(action, 1, length(?4) + 1) = ?4 || '.') \
           AND (?5 IS NULL OR at >= ?5) AND (?6 IS NULL OR at < ?6) \
         ORDER BY id DESC LIMIT ?2",
    )
    .map_err(db_err("list audit"))?
    .query_map(
        params![
            before_id,
            i64::from(limit),
            filter.actor,
            filter.action,
            filter.from.map(to_us),
            filter.to.map(to_us)
        ],
        audit_from_row,
    )
    .map_err(db_err("list audit"))?
    .collect::<Result<_, _>>()
    .map_err(db_err("list audit"))
}

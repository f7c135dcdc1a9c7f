//! One door for every write: producers' enqueues and every operator action, whichever door
//! it comes through (the console, the JSON API, an embedding application's Rust calls).
//!
//! Each write runs the same frame: **validate** (once, here: the stores trust what reaches
//! them) → **store** → **local effect** (wake this process's fetcher, stop a job running here,
//! apply a setting now) → **event** (on the engine's event stream) → **audit** (actor,
//! action, target, count; operator actions only — enqueues are the producers' traffic, not
//! an operator's decision). An action its target refuses — unknown id or name, wrong state,
//! a conflict with what is there — is audited too, with count 0 and the refusal as detail
//! (`Operations::audit_refusal`); input that fails validation is not (it reached no target).
//!
//! The audit row is written after the store change, as its own write. When it fails, the
//! action stands and the caller gets [`StoreError::Unaudited`], saying so — from every door
//! alike, never only a log line.
//!
//! An [`Operations`] comes from a running engine ([`crate::Engine::operations`], local
//! effects on) or over a bare store ([`Operations::over_store`]: a console-only process,
//! tests), where the effects are left to whichever instance runs the jobs (their heartbeat
//! picks settings up; their job heartbeat sees a cancel).

mod audit;
mod batches;
mod bulk;
mod bulk_runs;
mod enqueue;
mod schedules;

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::error::{StoreError, StoreResult};
use crate::events::{EngineEvent, EventBus, EventKind};
use crate::maintenance;
use crate::model::{
    Applied, CancelOutcome, EngineSettings, InstanceKind, Job, JobEdit, JobId, JobState, Pillar,
    PruneReport, QueueConfig, QueuePatch,
};
use crate::query::BulkAction;
use crate::store::{Store, StoreReads};
use crate::validation;

pub use audit::Audited;
pub use bulk::{BULK_STEP, BulkReport};
pub use bulk_runs::{BulkRun, BulkRunRequest};
pub use schedules::DeclareReport;

/// How far back `set_instance_quiet` looks for the instance's kind: any row a console still
/// lists, and more.
const QUIET_LOOKUP_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Events kept for a slow listener when no engine runs in this process.
const STANDALONE_EVENTS: usize = 256;

/// What a write made here does to the engine running in this process at once, rather than
/// at its next poll or heartbeat. The runtime implements it; `ops` sits below the runtime and
/// knows it only through this.
#[async_trait]
pub(crate) trait LocalRuntime: Send + Sync {
    /// New work or freed capacity: claim now.
    fn wake_fetcher(&self);

    /// An operator cancelled a job: stop it now when it runs here. False when it runs
    /// elsewhere (its own instance's heartbeat picks the cancel up).
    fn stop_for_operator(&self, id: JobId) -> bool;

    /// A queue's settings changed: follow them, hand back its buffered jobs when it was
    /// paused, claim again when it was resumed or its bulkhead changed.
    async fn queue_changed(&self, queue: QueueConfig, paused: bool, claim_again: bool);

    /// An operator quieted or resumed an instance: follow at once when it is this one.
    fn instance_quiet_changed(&self, id: &str, quiet: bool);

    /// Engine-wide settings saved here: follow them at once.
    fn settings_changed(&self, settings: EngineSettings);
}

/// Every write, validated, applied, announced and audited the same way from every door.
#[derive(Clone)]
pub struct Operations {
    store: Arc<dyn Store>,
    /// The same store, as its read side: what [`Operations::store`] hands out.
    reads: Arc<dyn StoreReads>,
    /// The engine running in this process, when one does.
    runtime: Option<Arc<dyn LocalRuntime>>,
    events: EventBus,
    /// Bulk-by-filter runs started here, shared by every clone.
    runs: bulk_runs::BulkRuns,
}

impl std::fmt::Debug for Operations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operations")
            .field("backend", &self.store.backend())
            .field("runtime", &self.runtime.is_some())
            .finish()
    }
}

impl Operations {
    /// Writes over a store with no engine in this process: no local effects; events go to
    /// a stream of its own ([`Operations::subscribe_events`]).
    pub fn over_store(store: Arc<dyn Store>) -> Operations {
        Operations {
            reads: store.clone(),
            store,
            runtime: None,
            events: EventBus::new(STANDALONE_EVENTS),
            runs: bulk_runs::BulkRuns::default(),
        }
    }

    /// Writes by an engine running in this process: `runtime` follows each one at once.
    pub(crate) fn with_runtime(
        store: Arc<dyn Store>,
        events: EventBus,
        runtime: Arc<dyn LocalRuntime>,
    ) -> Operations {
        Operations {
            reads: store.clone(),
            store,
            events,
            runtime: Some(runtime),
            runs: bulk_runs::BulkRuns::default(),
        }
    }

    /// The store's read side. Writes go through the methods here, which is why the whole
    /// store is not handed out.
    pub fn store(&self) -> &Arc<dyn StoreReads> {
        &self.reads
    }

    /// The event stream these writes are announced on (the engine's, when one runs here).
    pub fn subscribe_events(&self) -> broadcast::Receiver<EngineEvent> {
        self.events.subscribe()
    }

    // ------------------------------------------------------------------ one job

    /// Operator cancel: pending or buffered jobs go to the DLQ at once; a running job is
    /// stopped at once when it runs here, and by its owner's next heartbeat elsewhere.
    /// A job that already finished is `NotFound` (audited with count 0).
    pub async fn cancel(&self, actor: &str, id: JobId) -> StoreResult<CancelOutcome> {
        validation::validate_name("actor", actor)?;
        let target = id.to_string();
        let outcome = self
            .audit_refusal(
                self.cancel_one(id).await,
                actor,
                "job.cancel",
                &target,
                Some(id),
            )
            .await?;
        let count = u64::from(outcome != CancelOutcome::NotFound);
        let detail = format!("{outcome:?}");
        self.audited(actor, "job.cancel", target, count, Some(detail))
            .job(id)
            .write()
            .await?;
        Ok(outcome)
    }

    async fn cancel_one(&self, id: JobId) -> StoreResult<CancelOutcome> {
        let outcome = self.store.cancel(id).await?;
        match outcome {
            CancelOutcome::Requested => {
                if let Some(rt) = &self.runtime {
                    rt.stop_for_operator(id);
                }
                self.events.send_with(|| {
                    EngineEvent::new(EventKind::CancelRequested, "cancel requested while running")
                        .with_job_id(id)
                });
            }
            CancelOutcome::Cancelled => self.events.send_with(|| {
                EngineEvent::new(EventKind::Cancelled, "cancelled before it started")
                    .with_job_id(id)
            }),
            CancelOutcome::NotFound => {}
        }
        Ok(outcome)
    }

    /// Dead job → pending with fresh attempts, optionally edited first (the first payload is
    /// kept). `Err(JobNotFound)` when the job is not in the dead-letter pillar.
    pub async fn resurrect(
        &self,
        actor: &str,
        id: JobId,
        edit: Option<JobEdit>,
    ) -> StoreResult<Applied> {
        validation::validate_name("actor", actor)?;
        let edit = edit.filter(|e| !e.is_empty());
        if let Some(edit) = &edit {
            validation::validate_edit(edit)?;
        }
        let (action, detail) = match &edit {
            Some(edit) => ("job.edit_resurrect", serde_json::to_string(edit).ok()),
            None => ("job.resurrect", None),
        };
        let target = id.to_string();
        let applied = self
            .audit_refusal(
                self.store.resurrect(id, edit).await,
                actor,
                action,
                &target,
                Some(id),
            )
            .await?;
        if applied.is_applied() {
            self.wake_fetcher();
        }
        let count = u64::from(applied.is_applied());
        self.audited(actor, action, target, count, detail)
            .job(id)
            .write()
            .await?;
        Ok(applied)
    }

    /// Run a pending job now that waits for a later time (delayed, or waiting for its
    /// retry): due at once, its attempt count unchanged, so no attempt is spent.
    /// `InvalidState` for a job that is not pending (buffered, running, finished);
    /// `NotApplied` when it was already due.
    pub async fn run_now(&self, actor: &str, id: JobId) -> StoreResult<Applied> {
        validation::validate_name("actor", actor)?;
        let target = id.to_string();
        let n = self
            .audit_refusal(
                self.run_one_now(id).await,
                actor,
                "job.run_now",
                &target,
                Some(id),
            )
            .await?;
        if n > 0 {
            self.wake_fetcher();
        }
        self.audited(actor, "job.run_now", target, n, None)
            .job(id)
            .write()
            .await?;
        Ok(Applied::from_rows(n as usize))
    }

    /// The store side of [`Operations::run_now`]: refused for a job that is not pending.
    async fn run_one_now(&self, id: JobId) -> StoreResult<u64> {
        let job = self
            .reads
            .get_job(id)
            .await?
            .ok_or(StoreError::JobNotFound(id))?;
        if job.state != JobState::Pending {
            return Err(StoreError::InvalidState {
                id,
                state: job.state,
                action: "run now",
            });
        }
        self.store
            .bulk_by_ids(BulkAction::RunNow, Pillar::Hot, &[id])
            .await
    }

    /// Edit a pending or dead job in place (the first payload is kept).
    pub async fn edit(&self, actor: &str, id: JobId, edit: JobEdit) -> StoreResult<Job> {
        validation::validate_name("actor", actor)?;
        validation::validate_edit(&edit)?;
        let detail = serde_json::to_string(&edit).ok();
        let target = id.to_string();
        let job = self
            .audit_refusal(
                self.store.edit_job(id, edit).await,
                actor,
                "job.edit",
                &target,
                Some(id),
            )
            .await?;
        self.audited(actor, "job.edit", target, 1, detail)
            .job(id)
            .write()
            .await?;
        Ok(job)
    }

    /// Delete one job for good from a pillar (hot: only a pending one). Returns how many
    /// rows went (0 when the job moved on).
    pub async fn purge(&self, actor: &str, source: Pillar, id: JobId) -> StoreResult<u64> {
        validation::validate_name("actor", actor)?;
        let target = id.to_string();
        let n = self
            .audit_refusal(
                self.store.purge(source, &[id]).await,
                actor,
                "job.purge",
                &target,
                Some(id),
            )
            .await?;
        self.audited(
            actor,
            "job.purge",
            target,
            n,
            Some(format!("from {source}")),
        )
        .job(id)
        .write()
        .await?;
        Ok(n)
    }

    // ------------------------------------------------------------------ many jobs

    /// A bulk action on selected jobs of one pillar; cancel goes job by job through
    /// [`Operations::cancel`]'s path, so running jobs in this process stop at once.
    pub async fn bulk_by_ids(
        &self,
        actor: &str,
        action: BulkAction,
        source: Pillar,
        ids: &[JobId],
    ) -> StoreResult<u64> {
        validation::validate_name("actor", actor)?;
        bulk::check_selection(ids)?;
        let n = if action == BulkAction::Cancel {
            let mut n = 0;
            for id in ids {
                if self.cancel_one(*id).await? != CancelOutcome::NotFound {
                    n += 1;
                }
            }
            n
        } else {
            self.store.bulk_by_ids(action, source, ids).await?
        };
        if matches!(action, BulkAction::Resurrect | BulkAction::RunNow) && n > 0 {
            self.wake_fetcher();
        }
        let target = ids
            .iter()
            .map(|id| id.to_string())
            .collect::<Vec<_>>()
            .join(",");
        self.audited(
            actor,
            &format!("jobs.bulk_{}", action.as_str()),
            target,
            n,
            Some(format!("from {source}, {} selected", ids.len())),
        )
        .write()
        .await?;
        Ok(n)
    }

    // ------------------------------------------------------------------ queues, settings

    /// Change a queue's settings for every instance. Pausing releases this instance's
    /// buffered jobs of the queue at once; other instances follow within their instance
    /// heartbeat (their claims already skip the paused queue). Audited as `queue.pause`,
    /// `queue.resume`, `queue.hide` or `queue.show` when the patch is only that, else
    /// `queue.update`.
    pub async fn update_queue(
        &self,
        actor: &str,
        name: &str,
        patch: QueuePatch,
    ) -> StoreResult<QueueConfig> {
        validation::validate_name("actor", actor)?;
        validation::validate_name("queue", name)?;
        validation::validate_queue_patch(&patch)?;
        let action = queue_action(&patch);
        self.audit_refusal(
            self.lag_thresholds_agree(name, &patch).await,
            actor,
            action,
            name,
            None,
        )
        .await?;
        let detail = serde_json::to_string(&patch).ok();
        let pausing = patch.paused == Some(true);
        let resuming = patch.paused == Some(false);
        // A raised or lifted rate limit lets waiting jobs start now, not at the next poll.
        let rate_changed = patch.rate_limit.is_some();
        let queue = self
            .audit_refusal(
                self.store.update_queue(name, patch).await,
                actor,
                action,
                name,
                None,
            )
            .await?;
        if let Some(rt) = &self.runtime {
            let claim_again = resuming || rate_changed || queue.max_workers.is_some();
            rt.queue_changed(queue.clone(), pausing, claim_again).await;
        }
        self.events.send_with(|| {
            EngineEvent::new(EventKind::QueueChanged, describe_queue(&queue)).with_queue(name)
        });
        self.audited(actor, action, name.to_string(), 1, detail)
            .queue(name)
            .write()
            .await?;
        Ok(queue)
    }

    /// The critical lag must not be below the warning lag once the patch is applied, whether
    /// the patch gives both or one meets the queue's current other one. Two racing patches
    /// could still cross them; the console then only colours lag oddly, so a read before the
    /// write is enough.
    async fn lag_thresholds_agree(&self, name: &str, patch: &QueuePatch) -> StoreResult<()> {
        if patch.lag_warn_secs.is_none() && patch.lag_crit_secs.is_none() {
            return Ok(());
        }
        let current = if patch.lag_warn_secs.is_some() && patch.lag_crit_secs.is_some() {
            None
        } else {
            let queues = self.store.list_queues().await?;
            queues.into_iter().find(|q| q.name == name)
        };
        let warn = patch
            .lag_warn_secs
            .unwrap_or_else(|| current.as_ref().and_then(|q| q.lag_warn_secs));
        let crit = patch
            .lag_crit_secs
            .unwrap_or_else(|| current.as_ref().and_then(|q| q.lag_crit_secs));
        match (warn, crit) {
            (Some(warn), Some(crit)) if crit < warn => Err(StoreError::Conflict {
                code: "lag_thresholds_conflict",
                field: Some("lag_crit_secs"),
                message: format!(
                    "queue {name} would warn at {warn} s of lag but be critical already at \
                     {crit} s; give a critical lag of at least the warning lag (or change both \
                     at once)"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Save engine-wide settings; applied here at once and by every instance within its
    /// instance heartbeat. The audit detail holds the settings before and after.
    pub async fn save_settings(&self, actor: &str, settings: EngineSettings) -> StoreResult<()> {
        validation::validate_name("actor", actor)?;
        validation::validate_settings(&settings)?;
        let before = self.store.load_settings().await?;
        self.store.save_settings(&settings).await?;
        let message = format!(
            "settings saved: {} workers, {} attempts, retention {}/{}/{} days",
            settings.worker_count,
            settings.retry.max_attempts,
            settings.retention.archive_days,
            settings.retention.dlq_days,
            settings.retention.metrics_days
        );
        let detail = serde_json::json!({ "before": before, "after": settings }).to_string();
        if let Some(rt) = &self.runtime {
            rt.settings_changed(settings);
        }
        self.events
            .send_with(|| EngineEvent::new(EventKind::SettingsChanged, message));
        self.audited(actor, "settings.save", "engine".into(), 1, Some(detail))
            .write()
            .await?;
        Ok(())
    }

    // ------------------------------------------------------------------ instances

    /// Quiet an instance (`quiet`: it claims no new jobs, and finishes its running and
    /// buffered ones) or resume it. This process's own instance follows at once; any other
    /// learns it at its next instance heartbeat. `NotApplied` when no instance has this id
    /// (audited with count 0, as a cancel of a finished job is). Audited as `instance.quiet`
    /// or `instance.resume`, the instance id as target.
    pub async fn set_instance_quiet(
        &self,
        actor: &str,
        id: &str,
        quiet: bool,
    ) -> StoreResult<Applied> {
        validation::validate_name("actor", actor)?;
        validation::validate_name("instance id", id)?;
        let (action, verb) = if quiet {
            ("instance.quiet", "quieted")
        } else {
            ("instance.resume", "resumed")
        };
        if quiet {
            self.audit_refusal(self.quietable(id).await, actor, action, id, None)
                .await?;
        }
        let applied = self
            .audit_refusal(
                self.store.set_instance_quiet(id, quiet).await,
                actor,
                action,
                id,
                None,
            )
            .await?;
        if applied == Applied::Applied {
            if let Some(rt) = &self.runtime {
                rt.instance_quiet_changed(id, quiet);
            }
            self.events.send_with(|| {
                EngineEvent::new(EventKind::Instance, format!("instance {id} {verb}"))
            });
        }
        let count = u64::from(applied == Applied::Applied);
        self.audited(actor, action, id.to_string(), count, None)
            .write()
            .await?;
        Ok(applied)
    }

    /// Only engines read the flag back (at their instance heartbeat); an external worker
    /// decides its own claims, so a quiet badge on it would promise what nothing does.
    /// A read before the write is enough: the kind of an id does not change under it.
    async fn quietable(&self, id: &str) -> StoreResult<()> {
        let listed = self.store.list_instances(QUIET_LOOKUP_AGE).await?;
        match listed.iter().find(|i| i.id == id) {
            Some(i) if i.kind == InstanceKind::External => Err(StoreError::Conflict {
                code: "instance_not_quietable",
                field: Some("instance"),
                message: format!(
                    "instance {id} is an external worker: it pulls jobs over the API and is                      not told to stop; stop its claims in the worker itself (resuming is                      always allowed)"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Run the retention sweep now, as the pruner does on its interval.
    pub async fn prune_now(&self, actor: &str) -> StoreResult<PruneReport> {
        validation::validate_name("actor", actor)?;
        let report = maintenance::prune_saved(
            &*self.store,
            maintenance::PRUNE_BATCH_ROWS,
            Some(&self.events),
        )
        .await?;
        let total = report.total();
        self.audited(
            actor,
            "retention.prune",
            "all".into(),
            total,
            serde_json::to_string(&report).ok(),
        )
        .write()
        .await?;
        Ok(report)
    }

    fn wake_fetcher(&self) {
        if let Some(rt) = &self.runtime {
            rt.wake_fetcher();
        }
    }
}

/// The audit action of a queue patch: the one-switch patches the console's buttons send
/// (and the API's pause/resume) have names of their own.
fn queue_action(patch: &QueuePatch) -> &'static str {
    let only_paused = QueuePatch {
        paused: patch.paused,
        ..QueuePatch::default()
    };
    let only_hidden = QueuePatch {
        hidden: patch.hidden,
        ..QueuePatch::default()
    };
    match (patch.paused, patch.hidden) {
        (Some(true), _) if *patch == only_paused => "queue.pause",
        (Some(false), _) if *patch == only_paused => "queue.resume",
        (_, Some(true)) if *patch == only_hidden => "queue.hide",
        (_, Some(false)) if *patch == only_hidden => "queue.show",
        _ => "queue.update",
    }
}

fn describe_queue(q: &QueueConfig) -> String {
    let limit = |v: Option<u32>| v.map_or_else(|| "default".to_string(), |n| n.to_string());
    format!(
        "queue {}: {}{}, max workers {}, execution timeout {} s, rate limit {}",
        q.name,
        if q.paused { "paused" } else { "running" },
        if q.hidden { ", hidden" } else { "" },
        q.max_workers
            .map_or_else(|| "unlimited".to_string(), |n| n.to_string()),
        limit(q.execution_timeout_secs),
        q.rate_limit.map_or_else(
            || "none".to_string(),
            |l| format!("{} starts per {} s", l.starts, l.per_secs)
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_switch_patches_have_their_own_audit_names() {
        let p = |paused, hidden| QueuePatch {
            paused,
            hidden,
            ..QueuePatch::default()
        };
        assert_eq!(queue_action(&p(Some(true), None)), "queue.pause");
        assert_eq!(queue_action(&p(Some(false), None)), "queue.resume");
        assert_eq!(queue_action(&p(None, Some(true))), "queue.hide");
        assert_eq!(queue_action(&p(None, Some(false))), "queue.show");
        assert_eq!(queue_action(&p(Some(true), Some(true))), "queue.update");
        let limits = QueuePatch {
            max_workers: Some(Some(3)),
            ..QueuePatch::default()
        };
        assert_eq!(queue_action(&limits), "queue.update");
    }
}

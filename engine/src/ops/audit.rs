//! The last step of an operator write: its audit row, and its line on the event stream.

use crate::error::{StoreError, StoreResult};
use crate::events::EngineEvent;
use crate::model::{JobId, NewAuditEntry};

use super::Operations;

/// Audit targets longer than this are cut in the event line (the row keeps all of it).
const EVENT_TARGET_CHARS: usize = 120;

/// An action that has been applied, about to be announced and written to the audit log.
#[must_use = "an audited action is only recorded by `write`"]
pub struct Audited<'a> {
    ops: &'a Operations,
    entry: NewAuditEntry,
    job: Option<JobId>,
    queue: Option<String>,
}

impl Operations {
    pub(super) fn audited(
        &self,
        actor: &str,
        action: &str,
        target: String,
        count: u64,
        detail: Option<String>,
    ) -> Audited<'_> {
        Audited {
            ops: self,
            entry: NewAuditEntry {
                actor: actor.to_string(),
                action: action.to_string(),
                target,
                count,
                detail,
            },
            job: None,
            queue: None,
        }
    }
}

/// A store answer that refuses an action on its target: the target is unknown (no such job,
/// schedule or instance), in the wrong state (a finished job, a running job's edit), or the
/// change conflicts with what is there (a taken name, an external worker to quiet).
fn is_refusal(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::JobNotFound(_)
            | StoreError::ScheduleNotFound(_)
            | StoreError::InvalidState { .. }
            | StoreError::Conflict { .. }
    )
}

impl Operations {
    /// The audit rule for refused actions: an action refused by its target (see
    /// `is_refusal`) is audited as an applied one is, with count 0 and the refusal as its
    /// detail, and the caller gets the refusal. Input that fails validation never reaches a
    /// target and is not audited; other failures (the database) are returned as they are.
    pub(super) async fn audit_refusal<T>(
        &self,
        result: StoreResult<T>,
        actor: &str,
        action: &str,
        target: &str,
        job: Option<JobId>,
    ) -> StoreResult<T> {
        let refusal = match result {
            Err(e) if is_refusal(&e) => e,
            other => return other,
        };
        let mut audited = self.audited(
            actor,
            action,
            target.to_string(),
            0,
            Some(format!("refused: {refusal}")),
        );
        if let Some(id) = job {
            audited = audited.job(id);
        }
        // The refusal is what the caller needs to hear; a failed audit write is logged by
        // `write` and the refusal still returned.
        let _unaudited = audited.write().await;
        Err(refusal)
    }
}

impl Audited<'_> {
    pub(super) fn job(mut self, id: JobId) -> Self {
        self.job = Some(id);
        self
    }

    pub(super) fn queue(mut self, name: &str) -> Self {
        self.queue = Some(name.to_string());
        self
    }

    /// Announce the action, then write its audit row. The action already happened: a
    /// failed write is returned as `Unaudited`, naming the action, so no door can report
    /// success for an action the log does not hold.
    pub(super) async fn write(self) -> StoreResult<()> {
        let Audited {
            ops,
            entry,
            job,
            queue,
        } = self;
        ops.events.send_with(|| {
            let short: String = entry.target.chars().take(EVENT_TARGET_CHARS).collect();
            let mut event = EngineEvent::operator(format!(
                "{}: {} {short} ({})",
                entry.actor, entry.action, entry.count
            ));
            event.job_id = job;
            event.queue = queue;
            event
        });
        let action = entry.action.clone();
        match ops.store.append_audit(entry).await {
            Ok(_) => Ok(()),
            Err(cause) => {
                tracing::error!(event = "ops.audit_failed", action, error = %cause);
                Err(StoreError::Unaudited {
                    action,
                    cause: Box::new(cause),
                })
            }
        }
    }
}

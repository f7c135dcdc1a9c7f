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

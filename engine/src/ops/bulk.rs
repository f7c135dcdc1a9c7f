//! Bulk actions: on a selection of ids, and on every job a filter matches (in steps, so
//! workers never wait long behind one transaction).

use crate::error::StoreResult;
use crate::model::{JobId, Pillar};
use crate::query::BulkAction;
use crate::query::{BulkFilterStep, JobFilter, MAX_PAGE_SIZE};
use crate::validation::{self, ValidationError};

use super::Operations;

/// Jobs per store step of a bulk-by-filter run: a few short transactions each.
pub const BULK_STEP: u32 = 200;

/// How a bulk-by-filter run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkReport {
    /// Jobs the action was applied to.
    pub done: u64,
    /// Why it stopped before its cap or the end of the matches, when it did.
    pub stopped: Option<String>,
}

pub(super) fn check_selection(ids: &[JobId]) -> Result<(), ValidationError> {
    if ids.is_empty() {
        return Err(ValidationError::new(
            "ids",
            "is empty",
            "select at least one job",
        ));
    }
    if ids.len() > MAX_PAGE_SIZE as usize {
        return Err(ValidationError::new(
            "ids",
            format!("has {} jobs", ids.len()),
            format!("select at most {MAX_PAGE_SIZE} jobs at once, or act on a filter"),
        ));
    }
    Ok(())
}

impl Operations {
    /// Apply `action` to up to `cap` jobs of `source` that `filter` matches, `BULK_STEP` at a
    /// time, telling `progress` the running total after each step. Audited once at the end
    /// as `{pillar}.bulk_{action}` with the filter as target, also when a step failed (the
    /// steps before it stand; the report says why it stopped).
    pub async fn bulk_by_filter(
        &self,
        actor: &str,
        action: BulkAction,
        source: Pillar,
        filter: &JobFilter,
        cap: u32,
        progress: impl Fn(u64) + Send,
    ) -> StoreResult<BulkReport> {
        validation::validate_name("actor", actor)?;
        action.check_source(source)?;
        let mut done: u64 = 0;
        let mut after = None;
        let mut stopped = None;
        while done < u64::from(cap) {
            let limit =
                u32::try_from(u64::from(BULK_STEP).min(u64::from(cap) - done)).unwrap_or(BULK_STEP);
            let step = BulkFilterStep {
                action,
                source,
                filter,
                after,
                limit,
            };
            match self.store.bulk_filter_step(step).await {
                Ok(step) => {
                    done += step.affected;
                    progress(done);
                    if step.selected < limit {
                        break;
                    }
                    after = step.last;
                }
                Err(e) => {
                    tracing::warn!(error = %e, action = action.as_str(), "bulk run stopped");
                    stopped = Some(e.to_string());
                    break;
                }
            }
        }
        if matches!(action, BulkAction::Resurrect | BulkAction::RunNow) && done > 0 {
            self.wake_fetcher();
        }
        let target = serde_json::to_string(filter).unwrap_or_else(|_| format!("{filter:?}"));
        let value = match action {
            BulkAction::SetPriority(p) => format!("priority {p}, "),
            _ => String::new(),
        };
        let detail = format!(
            "{value}cap {cap}{}",
            stopped
                .as_ref()
                .map(|e| format!("; stopped: {e}"))
                .unwrap_or_default()
        );
        self.audited(
            actor,
            &format!("{source}.bulk_{}", action.as_str()),
            target,
            done,
            Some(detail),
        )
        .write()
        .await?;
        Ok(BulkReport { done, stopped })
    }
}

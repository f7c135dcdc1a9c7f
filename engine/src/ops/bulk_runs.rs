//! Bulk-by-filter runs in the background: started by any door (the console, the JSON API),
//! watched by id while they step through their matches, kept in memory by the process that
//! runs them. The run itself is [`Operations::bulk_by_filter`]: audited once at its end.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tracing::Instrument;

use crate::error::StoreResult;
use crate::events::EngineEvent;
use crate::model::{JobId, Pillar};
use crate::query::{BulkAction, JobFilter};
use crate::validation::{self, ValidationError};

use super::Operations;

/// Finished runs are forgotten after this long.
const KEEP_FINISHED_HOURS: i64 = 24;

/// A bulk-by-filter run, as its progress page and `GET /api/v1/bulk/{id}` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BulkRun {
    pub id: String,
    pub actor: String,
    pub action: BulkAction,
    pub source: Pillar,
    pub filter: JobFilter,
    pub cap: u32,
    /// Jobs matching the filter when the run started (counted up to the list's count cap,
    /// `query::COUNT_CAP`).
    pub matching: u64,
    /// The count stopped at the count cap: at least `matching` jobs matched.
    pub matching_capped: bool,
    /// Jobs the action has been applied to so far.
    pub done: u64,
    pub finished: bool,
    /// Why the run stopped early, when it did (the steps before it stand).
    pub error: Option<String>,
    pub started: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl BulkRun {
    /// How many jobs this run means to act on: what matched, at most the cap (the cap itself
    /// when the count stopped short of both: more may match than were counted).
    pub fn target(&self) -> u64 {
        let cap = u64::from(self.cap);
        if self.matching_capped && self.matching < cap {
            cap
        } else {
            self.matching.min(cap)
        }
    }
}

/// What to run: an action over every job of `source` that `filter` matches, at most `cap`.
#[derive(Debug, Clone)]
pub struct BulkRunRequest {
    pub action: BulkAction,
    pub source: Pillar,
    pub filter: JobFilter,
    pub cap: u32,
}

/// The runs this process knows, shared by every clone of its `Operations`.
#[derive(Debug, Clone, Default)]
pub(super) struct BulkRuns(Arc<Mutex<HashMap<String, BulkRun>>>);

impl BulkRuns {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, BulkRun>> {
        // A panic while holding the lock leaves plain data behind: keep using it.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn put(&self, run: BulkRun) {
        let mut runs = self.lock();
        let now = Utc::now();
        runs.retain(|_, r| {
            !r.finished
                || r.finished_at
                    .is_none_or(|at| (now - at).num_hours() < KEEP_FINISHED_HOURS)
        });
        runs.insert(run.id.clone(), run);
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut BulkRun)) {
        if let Some(run) = self.lock().get_mut(id) {
            f(run);
        }
    }
}

impl Operations {
    /// Start `request` in the background and return the run as it starts: checked first
    /// (the action must apply to the source, the cap be at least 1), the matches counted,
    /// then stepped through by [`Operations::bulk_by_filter`] (audited once at the end).
    /// Watch it with [`Operations::bulk_run`].
    pub async fn start_bulk(&self, actor: &str, request: BulkRunRequest) -> StoreResult<BulkRun> {
        validation::validate_name("actor", actor)?;
        request.action.check_source(request.source)?;
        if !(1..=validation::MAX_BULK_CAP).contains(&request.cap) {
            return Err(ValidationError::new(
                "cap",
                format!("is {}", request.cap),
                format!(
                    "give the most jobs this run may touch, 1 to {}; start another run for more",
                    validation::MAX_BULK_CAP
                ),
            )
            .into());
        }
        let count = self
            .reads
            .count_jobs(request.source, &request.filter)
            .await?;
        let matching = count.matching;
        let run = BulkRun {
            id: JobId::new().0.simple().to_string(),
            actor: actor.to_string(),
            action: request.action,
            source: request.source,
            filter: request.filter,
            cap: request.cap,
            matching,
            matching_capped: count.capped,
            done: 0,
            finished: false,
            error: None,
            started: Utc::now(),
            finished_at: None,
        };
        self.runs.put(run.clone());
        self.events.send_with(|| {
            EngineEvent::operator(format!(
                "{actor}: {}.bulk_{} started (cap {}, {matching} matching)",
                run.source,
                run.action.as_str(),
                run.cap
            ))
        });
        let span = tracing::info_span!("ops.bulk_run", run = %run.id, action = run.action.as_str());
        let ops = self.clone();
        let started = run.clone();
        tokio::spawn(
            async move {
                let runs = ops.runs.clone();
                let id = started.id.clone();
                let report = ops
                    .bulk_by_filter(
                        &started.actor,
                        started.action,
                        started.source,
                        &started.filter,
                        started.cap,
                        |done| runs.update(&id, |r| r.done = done),
                    )
                    .await;
                runs.update(&id, |r| {
                    match report {
                        Ok(report) => {
                            r.done = report.done;
                            r.error = report.stopped;
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "bulk run did not finish cleanly");
                            r.error = Some(e.to_string());
                        }
                    }
                    r.finished = true;
                    r.finished_at = Some(Utc::now());
                });
            }
            .instrument(span),
        );
        Ok(run)
    }

    /// A run this process started (finished ones are kept a day).
    pub fn bulk_run(&self, id: &str) -> Option<BulkRun> {
        self.runs.lock().get(id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(matching: u64, matching_capped: bool, cap: u32) -> BulkRun {
        BulkRun {
            id: "r".into(),
            actor: "ops".into(),
            action: BulkAction::Cancel,
            source: Pillar::Hot,
            filter: JobFilter::default(),
            cap,
            matching,
            matching_capped,
            done: 0,
            finished: false,
            error: None,
            started: Utc::now(),
            finished_at: None,
        }
    }

    #[test]
    fn a_run_aims_at_what_matched_or_its_cap() {
        assert_eq!(run(30, false, 1_000).target(), 30);
        assert_eq!(run(30_000, false, 1_000).target(), 1_000);
        // Counted to 10,000 and stopped: as many as the cap allows may match.
        assert_eq!(run(10_000, true, 50_000).target(), 50_000);
        assert_eq!(run(10_000, true, 2_000).target(), 2_000);
    }
}

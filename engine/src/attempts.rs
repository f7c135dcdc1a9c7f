//! A job's attempts as an operator follows them: each run's start, end, duration, instance,
//! outcome and error, oldest first.
//!
//! Nothing extra is stored for it. A failed attempt's entry in `Job::errors` carries its own
//! start, duration, instance and retry time (the runtime fills them when it decides the
//! outcome, `AttemptError`); the attempt in flight or the one that succeeded is the job's own
//! columns (`started_at`, `finished_at`, `worker_id`). Entries a store wrote itself carry no
//! run: a pending job cancelled or expired never ran that attempt; a zombie's run is the
//! job's columns as the rescue found them.

use chrono::Duration;

use crate::model::{AttemptError, FailureReason, Job, JobState, Timestamp, owner_instance};

/// What came of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptOutcome {
    /// It is running now.
    Running,
    Succeeded,
    /// It failed and the retry policy scheduled another attempt.
    Retried,
    /// It failed (or the job was stopped) and the job went to the dead-letter queue.
    DeadLettered,
    /// It failed; written before outcomes were recorded, so what followed is not known.
    Failed,
}

impl AttemptOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Running => "running",
            AttemptOutcome::Succeeded => "succeeded",
            AttemptOutcome::Retried => "retried",
            AttemptOutcome::DeadLettered => "dead_lettered",
            AttemptOutcome::Failed => "failed",
        }
    }
}

/// One attempt of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// The attempt number (throttled runs, which spend none, repeat the number).
    pub attempt: u32,
    /// `None`: the handler never ran this attempt (a pending job cancelled or expired), or
    /// the entry predates attempt records.
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub duration_ms: Option<u64>,
    /// The instance that ran it; never a lease's secret (`owner_instance`).
    pub instance: Option<String>,
    pub outcome: AttemptOutcome,
    /// When the job runs again after this attempt (`Retried`).
    pub retry_at: Option<Timestamp>,
    /// Why it failed: kind, message and, for a panic, its location and backtrace.
    pub error: Option<AttemptError>,
}

impl Job {
    /// Every attempt, oldest first (see the module documentation).
    pub fn attempts(&self) -> Vec<AttemptRecord> {
        let mut records: Vec<AttemptRecord> = Vec::with_capacity(self.errors.len() + 1);
        let last = self.errors.len().saturating_sub(1);
        for (i, error) in self.errors.iter().enumerate() {
            records.push(self.failed_attempt(error, i == last));
        }
        let instance = self
            .worker_id
            .as_deref()
            .map(|w| owner_instance(w).to_string());
        match self.state {
            JobState::Processing => records.push(AttemptRecord {
                attempt: self.attempt,
                started_at: self.started_at,
                finished_at: None,
                duration_ms: None,
                instance,
                outcome: AttemptOutcome::Running,
                retry_at: None,
                error: None,
            }),
            JobState::Succeeded => records.push(AttemptRecord {
                attempt: self.attempt,
                started_at: self.started_at,
                finished_at: self.finished_at,
                duration_ms: span_ms(self.started_at, self.finished_at),
                instance,
                outcome: AttemptOutcome::Succeeded,
                retry_at: None,
                error: None,
            }),
            JobState::Pending | JobState::Fetched | JobState::Dead(_) => {}
        }
        records
    }

    fn failed_attempt(&self, error: &AttemptError, is_last: bool) -> AttemptRecord {
        let dead_now = is_last && matches!(self.state, JobState::Dead(_));
        let outcome = if error.retry_at.is_some() {
            AttemptOutcome::Retried
        } else if dead_now || error.started_at.is_some() {
            // A full record without a retry sent the job to the DLQ (perhaps resurrected
            // since); a store's own entry is last when the job is dead by it.
            AttemptOutcome::DeadLettered
        } else if is_last && self.state == JobState::Pending {
            AttemptOutcome::Retried
        } else {
            AttemptOutcome::Failed
        };
        // The rescue moves a zombie as it found it: its run is the job's own columns.
        let zombie_run = dead_now
            && self.state == JobState::Dead(FailureReason::Zombie)
            && error.started_at.is_none();
        let started_at = if zombie_run {
            self.started_at
        } else {
            error.started_at
        };
        let instance = match (&error.instance, zombie_run) {
            (Some(instance), _) => Some(instance.clone()),
            (None, true) => self
                .worker_id
                .as_deref()
                .map(|w| owner_instance(w).to_string()),
            (None, false) => None,
        };
        AttemptRecord {
            attempt: error.attempt,
            started_at,
            finished_at: Some(error.at),
            duration_ms: error
                .duration_ms
                .or_else(|| span_ms(started_at, Some(error.at))),
            instance,
            outcome,
            retry_at: error.retry_at,
            error: Some(error.clone()),
        }
    }
}

fn span_ms(from: Option<Timestamp>, to: Option<Timestamp>) -> Option<u64> {
    let (from, to) = (from?, to?);
    let span: Duration = to - from;
    u64::try_from(span.num_milliseconds()).ok()
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::model::JobId;

    fn at(secs: i64) -> Timestamp {
        Utc.timestamp_opt(1_780_000_000 + secs, 0)
            .single()
            .unwrap_or_default()
    }

    fn job(state: JobState) -> Job {
        Job {
            id: JobId(uuid::Uuid::now_v7()),
            queue: "q".into(),
            job_type: "t".into(),
            payload: "{}".into(),
            tags: vec![],
            priority: 0,
            idempotency_key: None,
            correlation_id: None,
            created_by: None,
            created_at: at(0),
            scheduled_at: at(0),
            started_at: None,
            heartbeat_at: None,
            finished_at: None,
            expires_at: None,
            attempt: 0,
            max_attempts: None,
            state,
            worker_id: None,
            cancel_requested: false,
            errors: vec![],
            result: None,
            continuation: None,
            original_payload: None,
            batch_id: None,
            trace_context: None,
            error_group: None,
        }
    }

    fn ran(attempt: u32, start: i64, end: i64, retry_at: Option<i64>) -> AttemptError {
        AttemptError {
            attempt,
            at: at(end),
            kind: "transient".into(),
            message: format!("attempt {attempt} failed"),
            started_at: Some(at(start)),
            duration_ms: Some(u64::try_from((end - start) * 1000).unwrap_or(0)),
            instance: Some("host-1-abc".into()),
            retry_at: retry_at.map(at),
            ..AttemptError::default()
        }
    }

    #[test]
    fn a_retried_then_successful_job_lists_every_run_with_its_outcome() {
        let mut j = job(JobState::Succeeded);
        j.errors = vec![ran(1, 1, 3, Some(10)), ran(2, 10, 11, Some(20))];
        j.attempt = 3;
        j.started_at = Some(at(20));
        j.finished_at = Some(at(25));
        j.worker_id = Some("host-2-def".into());
        let records = j.attempts();
        let outcomes: Vec<_> = records.iter().map(|r| r.outcome).collect();
        assert_eq!(
            outcomes,
            [
                AttemptOutcome::Retried,
                AttemptOutcome::Retried,
                AttemptOutcome::Succeeded
            ]
        );
        assert_eq!(records[0].duration_ms, Some(2_000));
        assert_eq!(records[1].retry_at, Some(at(20)));
        assert_eq!(records[2].duration_ms, Some(5_000));
        assert_eq!(records[2].instance.as_deref(), Some("host-2-def"));
        assert!(records[2].error.is_none());
    }

    #[test]
    fn a_zombie_takes_its_run_from_the_job_and_hides_the_lease_secret() {
        let mut j = job(JobState::Dead(FailureReason::Zombie));
        j.attempt = 1;
        j.started_at = Some(at(5));
        j.worker_id = Some("ext:billing-py:0123456789abcdef0123456789abcdef".into());
        j.errors = vec![AttemptError {
            attempt: 1,
            at: at(65),
            kind: "zombie".into(),
            message: "lost".into(),
            ..AttemptError::default()
        }];
        let records = j.attempts();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].outcome, AttemptOutcome::DeadLettered);
        assert_eq!(records[0].started_at, Some(at(5)));
        assert_eq!(records[0].duration_ms, Some(60_000));
        assert_eq!(records[0].instance.as_deref(), Some("ext:billing-py"));
    }

    #[test]
    fn a_pending_job_cancelled_shows_an_entry_that_never_ran() {
        let mut j = job(JobState::Dead(FailureReason::Cancelled));
        j.attempt = 1;
        // Attempt 1 ran and failed earlier; the job columns still hold its start.
        j.started_at = Some(at(1));
        j.errors = vec![
            ran(1, 1, 2, Some(100)),
            AttemptError {
                attempt: 1,
                at: at(50),
                kind: "cancelled".into(),
                message: "cancelled by an operator".into(),
                ..AttemptError::default()
            },
        ];
        let records = j.attempts();
        assert_eq!(records[0].outcome, AttemptOutcome::Retried);
        assert_eq!(records[1].outcome, AttemptOutcome::DeadLettered);
        assert_eq!(records[1].started_at, None, "the cancel ran nothing");
        assert_eq!(records[1].instance, None);
    }

    #[test]
    fn a_running_job_ends_with_its_attempt_in_flight_and_a_resurrected_death_stays_dead() {
        let mut j = job(JobState::Processing);
        j.attempt = 2;
        j.started_at = Some(at(30));
        j.worker_id = Some("host-1-abc".into());
        j.errors = vec![ran(1, 1, 2, None)];
        let records = j.attempts();
        assert_eq!(records[0].outcome, AttemptOutcome::DeadLettered);
        assert_eq!(records[1].outcome, AttemptOutcome::Running);
        assert_eq!(records[1].finished_at, None);
    }

    #[test]
    fn owner_instance_strips_lease_secrets_only() {
        assert_eq!(owner_instance("host-1-abc"), "host-1-abc");
        assert_eq!(owner_instance("ext:py@h:00ff"), "ext:py@h");
        assert_eq!(owner_instance("ext:py@h"), "ext:py@h");
    }
}

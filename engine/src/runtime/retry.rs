//! What happens after a failed attempt: another run later, or the dead-letter queue and why.
//!
//! Pure functions of the job, the failure and the clock (the jitter source is passed in), so
//! every rule is unit-tested without a store or a sleep.

use std::time::Duration;

use rand::Rng;

use crate::handler::THROTTLED_KIND;
use crate::model::{FailureReason, Job, RetrySettings, Timestamp};

/// The retry rules in force (from the persisted `EngineSettings.retry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total runs, the first included; a job's own `max_attempts` overrides it.
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// Uniformly random extra delay in `[0, jitter]`, so failed jobs do not retry in lockstep.
    pub jitter: Duration,
    /// No retry is scheduled past `created_at + max_job_age`.
    pub max_job_age: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::from(&RetrySettings::default())
    }
}

impl From<&RetrySettings> for RetryPolicy {
    fn from(s: &RetrySettings) -> Self {
        RetryPolicy {
            max_attempts: s.max_attempts.max(1),
            base_delay: Duration::from_millis(s.base_delay_ms),
            max_delay: Duration::from_millis(s.max_delay_ms),
            jitter: Duration::from_millis(s.jitter_ms),
            max_job_age: Duration::from_secs(s.max_job_age_secs),
        }
    }
}

/// Most throttled runs one job may have: a throttle does not spend one of the job's attempts,
/// so this (with the retry lifetime, `max_job_age`) is what keeps an endpoint that throttles
/// for ever from holding a job for ever.
pub const MAX_THROTTLES: u32 = 100;

/// Why an attempt failed, as far as the retry decision cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptFailure {
    /// The handler returned a transient error (or was interrupted by shutdown).
    Transient,
    /// The downstream asked to be called again no earlier than this (429/503 with
    /// `Retry-After`): retried then without spending an attempt, up to [`MAX_THROTTLES`]
    /// times and within the retry lifetime.
    Throttled { retry_after: Duration },
    /// The execution timeout cancelled the attempt.
    Timeout,
    /// The job can never succeed: bad payload, panic, unknown type, oversized result.
    Fatal,
}

/// The outcome of a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    RetryAt(Timestamp),
    Dead(FailureReason),
}

impl RetryPolicy {
    /// Delay before the retry that follows failed attempt number `attempt` (1-based), without
    /// jitter: `base × 2^(attempt−1)`, capped at `max_delay`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(63);
        let factor = 1u64.checked_shl(exponent).unwrap_or(u64::MAX);
        let base_ms = u64::try_from(self.base_delay.as_millis()).unwrap_or(u64::MAX);
        let delay = Duration::from_millis(base_ms.saturating_mul(factor));
        delay.min(self.max_delay)
    }

    /// A random extra delay in `[0, jitter]`.
    pub fn jitter(&self, rng: &mut impl Rng) -> Duration {
        let max = u64::try_from(self.jitter.as_millis()).unwrap_or(u64::MAX);
        if max == 0 {
            return Duration::ZERO;
        }
        Duration::from_millis(rng.random_range(0..=max))
    }

    /// How many runs this job gets in total.
    pub fn attempts_for(&self, job: &Job) -> u32 {
        job.max_attempts.unwrap_or(self.max_attempts).max(1)
    }

    /// Of the job's runs before this one (since it was last enqueued or resurrected), how
    /// many were throttled: each failed run left one error, newest last.
    fn throttled_before(job: &Job) -> u32 {
        let earlier = usize::try_from(job.attempt.saturating_sub(1)).unwrap_or(usize::MAX);
        let n = job
            .errors
            .iter()
            .rev()
            .take(earlier)
            .filter(|e| e.kind == THROTTLED_KIND)
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Decide what follows failed attempt `job.attempt` (already counted by `mark_processing`).
    /// Throttled runs do not count against the job's attempts: only the other failures
    /// spend them.
    pub fn decide(
        &self,
        job: &Job,
        failure: AttemptFailure,
        now: Timestamp,
        rng: &mut impl Rng,
    ) -> RetryDecision {
        let exhausted_reason = match failure {
            AttemptFailure::Fatal => return RetryDecision::Dead(FailureReason::Fatal),
            AttemptFailure::Transient => FailureReason::Failed,
            AttemptFailure::Throttled { .. } => FailureReason::Throttled,
            AttemptFailure::Timeout => FailureReason::Timeout,
        };
        let throttled = Self::throttled_before(job);
        let exhausted = match failure {
            AttemptFailure::Throttled { .. } => throttled.saturating_add(1) >= MAX_THROTTLES,
            _ => job.attempt.saturating_sub(throttled) >= self.attempts_for(job),
        };
        if exhausted {
            return RetryDecision::Dead(exhausted_reason);
        }
        let delay = match failure {
            AttemptFailure::Throttled { retry_after } => retry_after,
            _ => self.backoff(job.attempt),
        } + self.jitter(rng);
        let retry_at = now + chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
        let deadline = job.created_at
            + chrono::Duration::from_std(self.max_job_age).unwrap_or(chrono::Duration::MAX);
        if retry_at > deadline {
            return RetryDecision::Dead(FailureReason::RetryLifetimeExpired);
        }
        RetryDecision::RetryAt(retry_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{JobId, JobState};
    use chrono::{TimeZone, Utc};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn job(attempt: u32, created_at: Timestamp) -> Job {
        Job {
            id: JobId::new(),
            queue: "q".into(),
            job_type: "t".into(),
            payload: "null".into(),
            tags: vec![],
            priority: 0,
            idempotency_key: None,
            correlation_id: None,
            created_by: None,
            created_at,
            scheduled_at: created_at,
            started_at: None,
            heartbeat_at: None,
            finished_at: None,
            expires_at: None,
            attempt,
            max_attempts: None,
            state: JobState::Processing,
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

    fn t0() -> Timestamp {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
    }

    fn no_jitter() -> RetryPolicy {
        RetryPolicy {
            jitter: Duration::ZERO,
            ..RetryPolicy::default()
        }
    }

    #[test]
    fn backoff_doubles_from_three_seconds() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(1), Duration::from_secs(3));
        assert_eq!(p.backoff(2), Duration::from_secs(6));
        assert_eq!(p.backoff(3), Duration::from_secs(12));
        assert_eq!(p.backoff(5), Duration::from_secs(48));
    }

    #[test]
    fn backoff_is_capped_at_one_hour_even_for_huge_attempts() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(12), Duration::from_secs(3600));
        assert_eq!(p.backoff(64), Duration::from_secs(3600));
        assert_eq!(p.backoff(u32::MAX), Duration::from_secs(3600));
    }

    #[test]
    fn jitter_stays_within_bounds_and_varies() {
        let p = RetryPolicy::default();
        let mut rng = StdRng::seed_from_u64(7);
        let samples: Vec<Duration> = (0..2_000).map(|_| p.jitter(&mut rng)).collect();
        assert!(samples.iter().all(|d| *d <= Duration::from_secs(1)));
        let min = samples.iter().min().unwrap();
        let max = samples.iter().max().unwrap();
        assert!(
            *max - *min > Duration::from_millis(500),
            "jitter should spread"
        );
    }

    #[test]
    fn zero_jitter_adds_nothing() {
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(no_jitter().jitter(&mut rng), Duration::ZERO);
    }

    #[test]
    fn transient_failure_is_retried_with_backoff_plus_jitter() {
        let p = RetryPolicy::default();
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..200 {
            let d = p.decide(&job(2, t0()), AttemptFailure::Transient, t0(), &mut rng);
            let RetryDecision::RetryAt(at) = d else {
                panic!("expected retry, got {d:?}")
            };
            let delay = (at - t0()).to_std().unwrap();
            assert!(delay >= Duration::from_secs(6));
            assert!(delay <= Duration::from_secs(7));
        }
    }

    #[test]
    fn exhausted_transient_is_failed() {
        let mut rng = StdRng::seed_from_u64(1);
        let d = no_jitter().decide(&job(3, t0()), AttemptFailure::Transient, t0(), &mut rng);
        assert_eq!(d, RetryDecision::Dead(FailureReason::Failed));
    }

    #[test]
    fn per_job_max_attempts_overrides_the_policy() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut j = job(3, t0());
        j.max_attempts = Some(5);
        assert!(matches!(
            no_jitter().decide(&j, AttemptFailure::Transient, t0(), &mut rng),
            RetryDecision::RetryAt(_)
        ));
        j.max_attempts = Some(1);
        j.attempt = 1;
        assert_eq!(
            no_jitter().decide(&j, AttemptFailure::Transient, t0(), &mut rng),
            RetryDecision::Dead(FailureReason::Failed)
        );
    }

    #[test]
    fn fatal_is_never_retried() {
        let mut rng = StdRng::seed_from_u64(1);
        let d = no_jitter().decide(&job(1, t0()), AttemptFailure::Fatal, t0(), &mut rng);
        assert_eq!(d, RetryDecision::Dead(FailureReason::Fatal));
    }

    #[test]
    fn timeout_is_retried_and_names_the_reason_when_exhausted() {
        let mut rng = StdRng::seed_from_u64(1);
        let p = no_jitter();
        assert_eq!(
            p.decide(&job(1, t0()), AttemptFailure::Timeout, t0(), &mut rng),
            RetryDecision::RetryAt(t0() + chrono::Duration::seconds(3))
        );
        assert_eq!(
            p.decide(&job(3, t0()), AttemptFailure::Timeout, t0(), &mut rng),
            RetryDecision::Dead(FailureReason::Timeout)
        );
    }

    fn failed_runs(j: &mut Job, kinds: &[&str]) {
        for kind in kinds {
            j.attempt += 1;
            j.errors.push(crate::model::AttemptError {
                attempt: j.attempt,
                at: t0(),
                kind: kind.to_string(),
                message: "x".into(),
                ..crate::model::AttemptError::default()
            });
        }
        // The run being decided.
        j.attempt += 1;
    }

    #[test]
    fn a_throttle_waits_retry_after_and_spends_no_attempt() {
        let mut rng = StdRng::seed_from_u64(1);
        let p = no_jitter();
        let throttled = AttemptFailure::Throttled {
            retry_after: Duration::from_secs(42),
        };
        assert_eq!(
            p.decide(&job(1, t0()), throttled, t0(), &mut rng),
            RetryDecision::RetryAt(t0() + chrono::Duration::seconds(42))
        );
        // The third run of a 3-attempt job, throttled: retried all the same.
        let mut j = job(0, t0());
        failed_runs(&mut j, &["transient", "transient"]);
        assert_eq!(
            p.decide(&j, throttled, t0(), &mut rng),
            RetryDecision::RetryAt(t0() + chrono::Duration::seconds(42))
        );
        // Throttled five times, then two transient failures: the third transient failure is
        // the job's third spent attempt, and the last.
        let mut j = job(0, t0());
        failed_runs(
            &mut j,
            &[
                "throttled",
                "throttled",
                "transient",
                "throttled",
                "throttled",
                "throttled",
            ],
        );
        assert!(matches!(
            p.decide(&j, AttemptFailure::Transient, t0(), &mut rng),
            RetryDecision::RetryAt(_)
        ));
        j.attempt -= 1;
        failed_runs(&mut j, &["transient"]);
        assert_eq!(
            p.decide(&j, AttemptFailure::Transient, t0(), &mut rng),
            RetryDecision::Dead(FailureReason::Failed)
        );
    }

    #[test]
    fn throttles_are_bounded_by_their_count_and_the_retry_lifetime() {
        let mut rng = StdRng::seed_from_u64(1);
        let p = no_jitter();
        let throttled = AttemptFailure::Throttled {
            retry_after: Duration::from_secs(1),
        };
        let mut j = job(0, t0());
        failed_runs(&mut j, &[THROTTLED_KIND; (MAX_THROTTLES - 2) as usize]);
        assert!(matches!(
            p.decide(&j, throttled, t0(), &mut rng),
            RetryDecision::RetryAt(_)
        ));
        j.attempt -= 1;
        failed_runs(&mut j, &[THROTTLED_KIND]);
        assert_eq!(
            p.decide(&j, throttled, t0(), &mut rng),
            RetryDecision::Dead(FailureReason::Throttled),
            "the {MAX_THROTTLES}th throttle is the last"
        );
        let late = t0() + chrono::Duration::seconds(86_400);
        assert_eq!(
            p.decide(&job(1, t0()), throttled, late, &mut rng),
            RetryDecision::Dead(FailureReason::RetryLifetimeExpired),
            "no throttled retry past the retry lifetime"
        );
    }

    #[test]
    fn no_retry_past_the_maximum_job_age() {
        let mut rng = StdRng::seed_from_u64(1);
        let p = no_jitter();
        let created = t0();
        // One second before the age limit, a 3 s backoff would land past it.
        let now = created + chrono::Duration::seconds(86_400 - 1);
        assert_eq!(
            p.decide(&job(1, created), AttemptFailure::Transient, now, &mut rng),
            RetryDecision::Dead(FailureReason::RetryLifetimeExpired)
        );
        let earlier = created + chrono::Duration::seconds(86_400 - 10);
        assert!(matches!(
            p.decide(
                &job(1, created),
                AttemptFailure::Transient,
                earlier,
                &mut rng
            ),
            RetryDecision::RetryAt(_)
        ));
    }
}

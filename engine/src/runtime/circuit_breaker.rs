//! One circuit breaker per job type: when a type keeps failing (a downstream service is down),
//! stop burning attempts on it for a while and defer its jobs instead.
//!
//! Closed → (N failures within the window) → Open → (after `open_for`) → HalfOpen with one
//! probe job → Closed on success, Open again on failure. Fatal errors (bad payloads) say
//! nothing about the downstream and are not counted. Every method takes `now`, so the state
//! machine is tested without sleeping.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

pub use crate::config::BreakerConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open {
        until: Instant,
    },
    /// One probe may run; `probe_in_flight` says whether it is running now.
    HalfOpen {
        probe_in_flight: bool,
    },
}

/// Whether a job of this type may start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Allow,
    /// Allowed as the half-open probe: report its outcome with `probe = true`.
    Probe,
    Defer,
}

/// How a finished attempt bears on the downstream's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Success,
    /// Transient, throttled or timed out.
    Failure,
    /// Says nothing about the downstream: fatal, cancelled, abandoned.
    Neutral,
}

/// Why and when a breaker last opened, kept until it closes: opening clears the window's
/// failures, so without it an open breaker would show no reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trip {
    /// When it (last) opened.
    pub at: Instant,
    /// The failures within the window that opened it.
    pub failures: u32,
    /// It opened again because the half-open probe failed.
    pub probe_failed: bool,
}

#[derive(Debug, Clone)]
pub struct CircuitBreaker {
    state: BreakerState,
    failures: VecDeque<Instant>,
    trip: Option<Trip>,
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        CircuitBreaker {
            state: BreakerState::Closed,
            failures: VecDeque::new(),
            trip: None,
        }
    }
}

impl CircuitBreaker {
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// Failures still inside the window (as of the last update); none while open, the
    /// window starts again when it closes — [`CircuitBreaker::trip`] says what opened it.
    pub fn recent_failures(&self) -> usize {
        self.failures.len()
    }

    /// While open or half-open: why and when it opened.
    pub fn trip(&self) -> Option<Trip> {
        self.trip
    }

    pub fn admit(&mut self, now: Instant) -> Admission {
        match self.state {
            BreakerState::Closed => Admission::Allow,
            BreakerState::Open { until } if now >= until => {
                self.state = BreakerState::HalfOpen {
                    probe_in_flight: true,
                };
                Admission::Probe
            }
            BreakerState::Open { .. } => Admission::Defer,
            BreakerState::HalfOpen {
                probe_in_flight: false,
            } => {
                self.state = BreakerState::HalfOpen {
                    probe_in_flight: true,
                };
                Admission::Probe
            }
            BreakerState::HalfOpen {
                probe_in_flight: true,
            } => Admission::Defer,
        }
    }

    /// Record a finished attempt. `probe` says whether it was admitted as the half-open probe.
    pub fn record(&mut self, cfg: &BreakerConfig, signal: Signal, probe: bool, now: Instant) {
        if probe {
            self.state = match signal {
                Signal::Success => {
                    self.failures.clear();
                    self.trip = None;
                    BreakerState::Closed
                }
                Signal::Failure => {
                    self.trip = Some(Trip {
                        at: now,
                        failures: self.trip.map_or(0, |t| t.failures),
                        probe_failed: true,
                    });
                    BreakerState::Open {
                        until: now + cfg.open_for,
                    }
                }
                // An inconclusive probe frees the slot for the next one.
                Signal::Neutral => BreakerState::HalfOpen {
                    probe_in_flight: false,
                },
            };
            return;
        }
        if signal != Signal::Failure || self.state != BreakerState::Closed {
            // Late results of jobs started before the circuit opened change nothing.
            return;
        }
        self.failures.push_back(now);
        while let Some(first) = self.failures.front() {
            if now.duration_since(*first) > cfg.window {
                self.failures.pop_front();
            } else {
                break;
            }
        }
        if self.failures.len() >= cfg.failure_threshold.max(1) as usize {
            self.trip = Some(Trip {
                at: now,
                failures: u32::try_from(self.failures.len()).unwrap_or(u32::MAX),
                probe_failed: false,
            });
            self.failures.clear();
            self.state = BreakerState::Open {
                until: now + cfg.open_for,
            };
        }
    }
}

/// The breakers of every job type that has failed at least once.
#[derive(Debug, Default)]
pub struct Breakers {
    by_type: HashMap<String, CircuitBreaker>,
}

impl Breakers {
    pub fn is_empty(&self) -> bool {
        self.by_type.is_empty()
    }

    /// Whether every breaker is closed, i.e. `admit` would let any job through.
    pub fn all_closed(&self) -> bool {
        self.by_type
            .values()
            .all(|b| b.state() == BreakerState::Closed)
    }

    pub fn admit(&mut self, job_type: &str, now: Instant) -> Admission {
        match self.by_type.get_mut(job_type) {
            Some(b) => b.admit(now),
            None => Admission::Allow,
        }
    }

    pub fn record(
        &mut self,
        cfg: &BreakerConfig,
        job_type: &str,
        signal: Signal,
        probe: bool,
        now: Instant,
    ) {
        if let Some(b) = self.by_type.get_mut(job_type) {
            b.record(cfg, signal, probe, now);
        } else if signal == Signal::Failure {
            // Only failures create a breaker, so the success path never allocates.
            let mut b = CircuitBreaker::default();
            b.record(cfg, signal, probe, now);
            self.by_type.insert(job_type.to_string(), b);
        }
    }

    pub fn state(&self, job_type: &str) -> Option<BreakerState> {
        self.by_type.get(job_type).map(CircuitBreaker::state)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &CircuitBreaker)> {
        self.by_type.iter()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn cfg() -> BreakerConfig {
        BreakerConfig::default()
    }

    fn fail_n(b: &mut CircuitBreaker, n: u32, start: Instant, step: Duration) -> Instant {
        let mut t = start;
        for _ in 0..n {
            b.record(&cfg(), Signal::Failure, false, t);
            t += step;
        }
        t
    }

    #[test]
    fn starts_closed_and_admits() {
        let mut b = CircuitBreaker::default();
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.admit(Instant::now()), Admission::Allow);
    }

    #[test]
    fn four_failures_keep_it_closed_the_fifth_opens_it() {
        let t0 = Instant::now();
        let mut b = CircuitBreaker::default();
        let t = fail_n(&mut b, 4, t0, Duration::from_secs(1));
        assert_eq!(b.state(), BreakerState::Closed);
        b.record(&cfg(), Signal::Failure, false, t);
        assert_eq!(
            b.state(),
            BreakerState::Open {
                until: t + Duration::from_secs(30)
            }
        );
    }

    #[test]
    fn failures_outside_the_window_do_not_count() {
        let t0 = Instant::now();
        let mut b = CircuitBreaker::default();
        // Five failures, 20 s apart: never five within 60 s.
        fail_n(&mut b, 5, t0, Duration::from_secs(20));
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.recent_failures() < 5);
    }

    #[test]
    fn successes_and_fatal_errors_never_open_it() {
        let t0 = Instant::now();
        let mut b = CircuitBreaker::default();
        for i in 0..20 {
            let t = t0 + Duration::from_millis(i);
            b.record(&cfg(), Signal::Neutral, false, t);
            b.record(&cfg(), Signal::Success, false, t);
        }
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.recent_failures(), 0);
    }

    #[test]
    fn open_defers_until_the_open_period_ends_then_admits_one_probe() {
        let t0 = Instant::now();
        let mut b = CircuitBreaker::default();
        let t = fail_n(&mut b, 5, t0, Duration::from_millis(10));
        assert_eq!(b.admit(t), Admission::Defer);
        assert_eq!(b.admit(t + Duration::from_secs(29)), Admission::Defer);
        let later = t + Duration::from_secs(31);
        assert_eq!(b.admit(later), Admission::Probe);
        assert_eq!(
            b.state(),
            BreakerState::HalfOpen {
                probe_in_flight: true
            }
        );
        assert_eq!(b.admit(later), Admission::Defer, "only one probe");
    }

    #[test]
    fn successful_probe_closes_it() {
        let t0 = Instant::now();
        let mut b = CircuitBreaker::default();
        let t = fail_n(&mut b, 5, t0, Duration::from_millis(10)) + Duration::from_secs(31);
        assert_eq!(b.admit(t), Admission::Probe);
        b.record(&cfg(), Signal::Success, true, t);
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.admit(t), Admission::Allow);
    }

    #[test]
    fn failed_probe_reopens_it_for_another_period() {
        let t0 = Instant::now();
        let mut b = CircuitBreaker::default();
        let t = fail_n(&mut b, 5, t0, Duration::from_millis(10)) + Duration::from_secs(31);
        assert_eq!(b.admit(t), Admission::Probe);
        b.record(&cfg(), Signal::Failure, true, t);
        assert_eq!(
            b.state(),
            BreakerState::Open {
                until: t + Duration::from_secs(30)
            }
        );
    }

    #[test]
    fn an_open_breaker_keeps_the_failures_that_opened_it_until_it_closes() {
        let t0 = Instant::now();
        let mut b = CircuitBreaker::default();
        let opened = fail_n(&mut b, 5, t0, Duration::from_millis(10)) - Duration::from_millis(10);
        // The window is cleared on opening: the count shown must come from the trip.
        assert_eq!(b.recent_failures(), 0);
        let trip = b.trip().expect("open breakers say why");
        assert_eq!(
            (trip.failures, trip.at, trip.probe_failed),
            (5, opened, false)
        );

        let t = opened + Duration::from_secs(31);
        assert_eq!(b.admit(t), Admission::Probe);
        b.record(&cfg(), Signal::Failure, true, t);
        let trip = b.trip().expect("still open");
        assert_eq!((trip.failures, trip.at, trip.probe_failed), (5, t, true));

        let t = t + Duration::from_secs(31);
        assert_eq!(b.admit(t), Admission::Probe);
        b.record(&cfg(), Signal::Success, true, t);
        assert_eq!(b.trip(), None, "closed: nothing to explain");
    }

    #[test]
    fn inconclusive_probe_lets_the_next_probe_through() {
        let t0 = Instant::now();
        let mut b = CircuitBreaker::default();
        let t = fail_n(&mut b, 5, t0, Duration::from_millis(10)) + Duration::from_secs(31);
        assert_eq!(b.admit(t), Admission::Probe);
        b.record(&cfg(), Signal::Neutral, true, t);
        assert_eq!(
            b.state(),
            BreakerState::HalfOpen {
                probe_in_flight: false
            }
        );
        assert_eq!(b.admit(t), Admission::Probe);
    }

    #[test]
    fn late_results_while_open_change_nothing() {
        let t0 = Instant::now();
        let mut b = CircuitBreaker::default();
        let t = fail_n(&mut b, 5, t0, Duration::from_millis(10));
        let open = b.state();
        b.record(&cfg(), Signal::Failure, false, t + Duration::from_secs(5));
        b.record(&cfg(), Signal::Success, false, t + Duration::from_secs(6));
        assert_eq!(b.state(), open);
    }

    #[test]
    fn breakers_are_per_type_and_created_only_by_failures() {
        let t0 = Instant::now();
        let mut all = Breakers::default();
        all.record(&cfg(), "ok", Signal::Success, false, t0);
        assert!(all.is_empty());
        for i in 0..5 {
            all.record(
                &cfg(),
                "flaky",
                Signal::Failure,
                false,
                t0 + Duration::from_millis(i),
            );
        }
        assert_eq!(all.admit("flaky", t0), Admission::Defer);
        assert_eq!(all.admit("ok", t0), Admission::Allow);
        assert_eq!(all.admit("never-seen", t0), Admission::Allow);
    }
}

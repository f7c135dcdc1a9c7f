//! The loop every periodic background service shares: wait until there is something to do,
//! wait the service's next interval (jittered where it says so), run once inside the
//! service's span, report the run, and stop at shutdown (checked while waiting, so a run in
//! progress finishes). A failed run is logged and tried again next interval.

use std::fmt::{Debug, Display};
use std::future::Future;
use std::time::Duration;

use rand::Rng;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// A background service that runs once per interval (rescuer, pruner, heartbeats, the
/// timeout watchdog, the result sweeper).
pub(crate) trait Periodic: Send + Sync {
    /// What one run did, logged at debug level.
    type Report: Debug + Send;
    type Error: Display + Send;

    /// The service's name: its span and its log lines.
    const NAME: &'static str;
    /// Logged with the error when a run fails.
    const FAILED: &'static str;

    /// How long to wait before the next run.
    fn next_wait(&self) -> Duration;

    /// Resolves once a run has anything to do; the interval is waited after it. Most services
    /// always have work; the result sweeper waits for a waiter.
    fn ready(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }

    /// One run.
    fn tick(&self) -> impl Future<Output = Result<Self::Report, Self::Error>> + Send;

    /// Called after every run with its result (the job heartbeat gives up here).
    fn after(&self, _result: &Result<Self::Report, Self::Error>) {}
}

/// Run `service` until `shutdown` is cancelled.
pub(crate) async fn run<S: Periodic>(service: &S, shutdown: &CancellationToken) {
    let span = tracing::info_span!("service", name = S::NAME);
    async {
        loop {
            tokio::select! {
                _ = service.ready() => {}
                _ = shutdown.cancelled() => return,
            }
            tokio::select! {
                _ = tokio::time::sleep(service.next_wait()) => {}
                _ = shutdown.cancelled() => return,
            }
            let result = service.tick().await;
            match &result {
                Ok(report) => tracing::debug!(?report, "{} ran", S::NAME),
                Err(e) => tracing::warn!(error = %e, "{}; trying again next interval", S::FAILED),
            }
            service.after(&result);
        }
    }
    .instrument(span)
    .await
}

/// `interval` spread by ±`spread` (0.2 = ±20 %), so many instances do not run in lockstep.
pub(crate) fn jittered(interval: Duration, spread: f64) -> Duration {
    interval.mul_f64(rand::rng().random_range(1.0 - spread..=1.0 + spread))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use tokio::sync::Notify;

    use super::*;

    /// Fails its first run; remembers what `after` saw.
    #[derive(Default)]
    struct Counting {
        runs: AtomicUsize,
        failures_seen: AtomicUsize,
        gate: Option<Arc<Notify>>,
        waits: Mutex<Vec<Duration>>,
    }

    impl Periodic for Counting {
        type Report = usize;
        type Error = &'static str;
        const NAME: &'static str = "counting";
        const FAILED: &'static str = "test run failed";

        fn next_wait(&self) -> Duration {
            let d = jittered(Duration::from_secs(10), 0.2);
            self.waits.lock().unwrap().push(d);
            d
        }

        async fn ready(&self) {
            if let Some(gate) = &self.gate {
                gate.notified().await;
            }
        }

        async fn tick(&self) -> Result<usize, &'static str> {
            match self.runs.fetch_add(1, Ordering::SeqCst) {
                0 => Err("first run fails"),
                n => Ok(n),
            }
        }

        fn after(&self, result: &Result<usize, &'static str>) {
            if result.is_err() {
                self.failures_seen.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn runs_every_interval_through_failures_until_shutdown() {
        let shutdown = CancellationToken::new();
        let service = Arc::new(Counting::default());
        let task = tokio::spawn({
            let (shutdown, service) = (shutdown.clone(), service.clone());
            async move { run(&*service, &shutdown).await }
        });
        // Paused time: each sleep of the loop completes as the runtime idles.
        while service.runs.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        shutdown.cancel();
        task.await.unwrap();
        let after = service.runs.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(
            service.runs.load(Ordering::SeqCst),
            after,
            "no run after shutdown"
        );
        assert_eq!(service.failures_seen.load(Ordering::SeqCst), 1);
        let waits = service.waits.lock().unwrap();
        assert!(
            waits
                .iter()
                .all(|d| (Duration::from_secs(8)..=Duration::from_secs(12)).contains(d)),
            "{waits:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_service_that_is_not_ready_does_not_run() {
        let shutdown = CancellationToken::new();
        let gate = Arc::new(Notify::new());
        let service = Arc::new(Counting {
            gate: Some(gate.clone()),
            ..Counting::default()
        });
        let task = tokio::spawn({
            let (shutdown, service) = (shutdown.clone(), service.clone());
            async move { run(&*service, &shutdown).await }
        });
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert_eq!(
            service.runs.load(Ordering::SeqCst),
            0,
            "never ready, never run"
        );
        gate.notify_one();
        while service.runs.load(Ordering::SeqCst) < 1 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        shutdown.cancel();
        task.await.unwrap();
    }
}

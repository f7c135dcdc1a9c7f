//! A value read at most once per interval however many callers ask for it: the first caller
//! after it expired reads it, callers arriving meanwhile wait for that read and share its
//! outcome (a failure too, so a failing database is asked once per interval, not once per
//! request). The shared telemetry snapshot (`telemetry`), the console's per-queue charts and
//! the server's readiness ping are each one of these.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct TickCache<T, E> {
    max_age: Duration,
    current: Mutex<Option<Stamped<T, E>>>,
    /// Held while a read runs, so concurrent callers wait for it instead of reading too.
    refresh: tokio::sync::Mutex<()>,
}

struct Stamped<T, E> {
    /// When the read that produced it started: a value is never younger than its data.
    started: Instant,
    outcome: Result<Arc<T>, E>,
}

impl<T, E: Clone> TickCache<T, E> {
    pub fn new(max_age: Duration) -> Self {
        TickCache {
            max_age,
            current: Mutex::new(None),
            refresh: tokio::sync::Mutex::new(()),
        }
    }

    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    /// The last outcome if it is younger than `max_age`.
    fn fresh(&self) -> Option<Result<Arc<T>, E>> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        current
            .as_ref()
            .filter(|s| s.started.elapsed() < self.max_age)
            .map(|s| s.outcome.clone())
    }

    /// The cached outcome, or a new one from `read` when it is older than `max_age`.
    pub async fn get<F, Fut>(&self, read: F) -> Result<Arc<T>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        if let Some(outcome) = self.fresh() {
            return outcome;
        }
        let _refreshing = self.refresh.lock().await;
        // Whoever held the lock before us may have just read it.
        if let Some(outcome) = self.fresh() {
            return outcome;
        }
        let started = Instant::now();
        let outcome = read().await.map(Arc::new);
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(Stamped {
            started,
            outcome: outcome.clone(),
        });
        outcome
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn concurrent_callers_share_one_read() {
        let cache = Arc::new(TickCache::<usize, String>::new(Duration::from_secs(3600)));
        let reads = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let callers: Vec<_> = (0..20)
            .map(|_| {
                let (cache, reads) = (cache.clone(), reads.clone());
                let mut released = released.clone();
                tokio::spawn(async move {
                    cache
                        .get(|| async move {
                            let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
                            // Hold the read open until every caller has asked.
                            let _ = released.wait_for(|r| *r).await;
                            Ok(n)
                        })
                        .await
                })
            })
            .collect();
        // Let every caller reach the cache before the one read finishes.
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        release.send_replace(true);
        for caller in callers {
            assert_eq!(*caller.await.unwrap().unwrap(), 1);
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_failure_is_shared_until_it_expires() {
        let cache = TickCache::<u32, String>::new(Duration::from_secs(3600));
        let first = cache
            .get(|| async { Err::<u32, _>("down".to_string()) })
            .await;
        assert_eq!(first.unwrap_err(), "down");
        let second = cache.get(|| async { Ok(7) }).await;
        assert_eq!(
            second.unwrap_err(),
            "down",
            "the failure is reused within its interval"
        );
    }

    #[tokio::test]
    async fn an_expired_value_is_read_again() {
        let cache = TickCache::<u32, String>::new(Duration::ZERO);
        assert_eq!(*cache.get(|| async { Ok(1) }).await.unwrap(), 1);
        assert_eq!(*cache.get(|| async { Ok(2) }).await.unwrap(), 2);
    }
}

//! The loop every periodic background service shares: wait an interval (or stop at
//! shutdown), run once, log a failure and try again next interval.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Run `run` every `interval` until `shutdown` is cancelled (checked while waiting, so a
/// run in progress finishes). A failed run is logged with `failed` and the error; the next
/// interval tries again. Called inside the service's span.
pub(crate) async fn every<R, Fut, T, E>(
    interval: Duration,
    shutdown: &CancellationToken,
    failed: &'static str,
    mut run: R,
) where
    R: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Display,
{
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.cancelled() => return,
        }
        if let Err(e) = run().await {
            tracing::warn!(error = %e, "{failed}; trying again next interval");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn runs_every_interval_through_failures_until_shutdown() {
        let shutdown = CancellationToken::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let service = tokio::spawn({
            let (shutdown, runs) = (shutdown.clone(), runs.clone());
            async move {
                every(
                    Duration::from_secs(10),
                    &shutdown,
                    "test run failed",
                    || {
                        let n = runs.fetch_add(1, Ordering::SeqCst);
                        async move {
                            if n == 0 {
                                Err("first run fails")
                            } else {
                                Ok(())
                            }
                        }
                    },
                )
                .await
            }
        });
        // Paused time: each sleep of the loop completes as the runtime idles.
        while runs.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        shutdown.cancel();
        service.await.unwrap();
        let after = runs.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(runs.load(Ordering::SeqCst), after, "no run after shutdown");
    }
}

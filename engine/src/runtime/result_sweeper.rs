//! The result sweeper: while anyone in this process awaits a job (`Engine::wait`), looks up
//! the awaited ids every `interval` and wakes the waiters of jobs another process finished
//! (this process's own completions wake theirs directly, from the completer).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::channel::Waiters;
use crate::error::{StoreError, StoreResult};
use crate::store::StoreReads;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweeperConfig {
    /// How often awaited ids are looked up while anyone waits.
    pub interval: Duration,
}

impl Default for SweeperConfig {
    fn default() -> Self {
        SweeperConfig {
            interval: Duration::from_millis(250),
        }
    }
}

/// Resolves waiters whose jobs were finished by another process.
pub(crate) struct ResultSweeper {
    store: Arc<dyn StoreReads>,
    waiters: Arc<Waiters>,
    config: SweeperConfig,
}

impl ResultSweeper {
    pub(crate) fn new(
        store: Arc<dyn StoreReads>,
        waiters: Arc<Waiters>,
        config: SweeperConfig,
    ) -> Self {
        ResultSweeper {
            store,
            waiters,
            config,
        }
    }

    /// Look up the awaited ids once and wake the waiters of those that finished.
    pub(crate) async fn run_once(&self) -> StoreResult<usize> {
        let ids = self.waiters.awaited_ids();
        if ids.is_empty() {
            return Ok(0);
        }
        let finished = self.store.finished_jobs(&ids).await?;
        let n = finished.len();
        for job in finished {
            if let Some(slots) = self.waiters.take(job.id) {
                self.waiters.resolve(slots, job);
            }
        }
        Ok(n)
    }

    pub(crate) async fn run(self, shutdown: CancellationToken) {
        super::periodic::run(&self, &shutdown).await
    }
}

impl super::periodic::Periodic for ResultSweeper {
    /// Waiters woken.
    type Report = usize;
    type Error = StoreError;
    const NAME: &'static str = "result_sweeper";
    const FAILED: &'static str = "result sweep failed";

    fn next_wait(&self) -> Duration {
        self.config.interval
    }

    /// Nobody waits: sleep until someone does.
    async fn ready(&self) {
        self.waiters.someone_waits().await
    }

    fn tick(&self) -> impl Future<Output = StoreResult<usize>> + Send {
        self.run_once()
    }
}

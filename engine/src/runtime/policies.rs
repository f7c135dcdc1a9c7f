//! The policies in force on this instance: engine-wide settings, the retry policy they
//! imply, and every queue's settings. Several stages read them on every batch; the instance
//! heartbeat and local operator actions replace them whole, so a reader holds one consistent
//! version (an `Arc`) for as long as it needs it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::model::{EngineSettings, QueueConfig};
use crate::runtime::retry::RetryPolicy;

#[derive(Debug)]
pub(crate) struct Policies {
    settings: RwLock<Arc<EngineSettings>>,
    retry: RwLock<Arc<RetryPolicy>>,
    queues: RwLock<Arc<QueueCache>>,
}

impl Policies {
    pub(crate) fn new(settings: EngineSettings, queues: Vec<QueueConfig>) -> Self {
        Policies {
            retry: RwLock::new(Arc::new(RetryPolicy::from(&settings.retry))),
            settings: RwLock::new(Arc::new(settings)),
            queues: RwLock::new(Arc::new(QueueCache::new(queues))),
        }
    }

    pub(crate) fn settings(&self) -> Arc<EngineSettings> {
        read(&self.settings)
    }

    pub(crate) fn retry(&self) -> Arc<RetryPolicy> {
        read(&self.retry)
    }

    pub(crate) fn queues(&self) -> Arc<QueueCache> {
        read(&self.queues)
    }

    /// Adopt new engine-wide settings; false when they are the ones in force.
    pub(crate) fn set_settings(&self, settings: EngineSettings) -> bool {
        if *self.settings() == settings {
            return false;
        }
        *self.retry.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(RetryPolicy::from(&settings.retry));
        *self.settings.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(settings);
        true
    }

    /// Adopt every queue's settings; returns the paused queues.
    pub(crate) fn set_queues(&self, queues: Vec<QueueConfig>) -> Vec<String> {
        let cache = QueueCache::new(queues);
        let paused: Vec<String> = cache.paused().map(str::to_string).collect();
        *self.queues.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(cache);
        paused
    }

    /// Adopt one queue's settings (changed here), keeping the others.
    pub(crate) fn set_queue(&self, queue: QueueConfig) {
        let mut all: Vec<QueueConfig> = self.queues().by_name.values().cloned().collect();
        all.retain(|q| q.name != queue.name);
        all.push(queue);
        self.set_queues(all);
    }
}

fn read<T>(lock: &RwLock<Arc<T>>) -> Arc<T> {
    lock.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The queues' settings as last seen, for execution timeouts, pause and bulkheads.
#[derive(Debug, Default)]
pub(crate) struct QueueCache {
    pub(crate) by_name: HashMap<String, QueueConfig>,
    pub(crate) any_bulkhead: bool,
}

impl QueueCache {
    pub(crate) fn new(queues: Vec<QueueConfig>) -> Self {
        let any_bulkhead = queues.iter().any(|q| q.max_workers.is_some());
        QueueCache {
            by_name: queues.into_iter().map(|q| (q.name.clone(), q)).collect(),
            any_bulkhead,
        }
    }

    pub(crate) fn execution_timeout(&self, queue: &str, default: Duration) -> Duration {
        self.by_name
            .get(queue)
            .and_then(|q| q.execution_timeout_secs)
            .map(|s| Duration::from_secs(u64::from(s)))
            .unwrap_or(default)
    }

    pub(crate) fn paused(&self) -> impl Iterator<Item = &str> {
        self.by_name
            .values()
            .filter(|q| q.paused)
            .map(|q| q.name.as_str())
    }
}

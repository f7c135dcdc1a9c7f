//! Handler capacity: the places a handler declared with `HandlerRegistry::limit` (an HTTP
//! endpoint's `concurrency`, say). The starter takes a place before it marks a job
//! processing, and the run holds it until its handler returns; a job whose handler has no
//! free place stays in the buffer, unstarted, and jobs of other handlers start past it.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::handler::HandlerRegistry;
use crate::model::Job;

/// A place in a handler's capacity, held while its job runs.
pub(crate) type Slot = OwnedSemaphorePermit;

pub(crate) struct Slots {
    handlers: Arc<HandlerRegistry>,
    limited: HashMap<String, Arc<Semaphore>>,
}

impl Slots {
    pub(crate) fn new(handlers: Arc<HandlerRegistry>) -> Self {
        let limited = handlers
            .limits()
            .map(|(key, n)| (key.to_string(), Arc::new(Semaphore::new(n as usize))))
            .collect();
        Slots { handlers, limited }
    }

    /// No handler declared a limit: every job can start as soon as a worker is free.
    pub(crate) fn is_empty(&self) -> bool {
        self.limited.is_empty()
    }

    /// A place for `job` if its handler has one free: `Some(None)` when its handler has no
    /// limit, `None` when it is full.
    pub(crate) fn try_take(&self, job: &Job) -> Option<Option<Slot>> {
        match self.limited.get(self.handlers.limit_key(job)) {
            None => Some(None),
            Some(places) => places.clone().try_acquire_owned().ok().map(Some),
        }
    }
}

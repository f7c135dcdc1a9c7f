//! The prefetch buffer: claimed (`Fetched`) jobs waiting for a free worker. Bounded, so a
//! claim never takes more than this instance can start soon; on pause or shutdown its jobs
//! are handed back to pending.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

use crate::model::Job;

#[derive(Debug)]
pub(crate) struct PrefetchBuffer {
    jobs: Mutex<VecDeque<Job>>,
    /// Mirror of `jobs.len()` so the fetcher and the snapshot read it without the lock.
    len: AtomicUsize,
    capacity: usize,
    /// Signalled when jobs leave the buffer, or a worker frees up while it is empty: the
    /// fetcher waits on it for capacity to claim into.
    pub(crate) room: Notify,
}

impl PrefetchBuffer {
    pub(crate) fn new(capacity: usize) -> Self {
        PrefetchBuffer {
            jobs: Mutex::new(VecDeque::with_capacity(capacity)),
            len: AtomicUsize::new(0),
            capacity,
            room: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Job>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub(crate) fn free(&self) -> usize {
        self.capacity.saturating_sub(self.len())
    }

    pub(crate) fn push_back(&self, jobs: Vec<Job>) {
        let mut q = self.lock();
        q.extend(jobs);
        self.len.store(q.len(), Ordering::Release);
    }

    /// Put jobs back at the front, in their order (a start that failed on a database error).
    pub(crate) fn push_front(&self, jobs: Vec<Job>) {
        let mut q = self.lock();
        for job in jobs.into_iter().rev() {
            q.push_front(job);
        }
        self.len.store(q.len(), Ordering::Release);
    }

    /// Take up to `n` jobs from the front.
    pub(crate) fn take(&self, n: usize) -> Vec<Job> {
        let mut q = self.lock();
        let n = n.min(q.len());
        let taken: Vec<Job> = q.drain(..n).collect();
        self.len.store(q.len(), Ordering::Release);
        drop(q);
        if !taken.is_empty() {
            self.room.notify_one();
        }
        taken
    }

    /// Take, from the front, up to `n` jobs that `admit` lets through, each with what it
    /// gave; the others keep their place (a job that cannot start does not hold up those
    /// behind it).
    pub(crate) fn take_admitted<T>(
        &self,
        n: usize,
        mut admit: impl FnMut(&Job) -> Option<T>,
    ) -> Vec<(Job, T)> {
        let mut q = self.lock();
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(q.len());
        while let Some(job) = q.pop_front() {
            if taken.len() >= n {
                kept.push_back(job);
                kept.extend(q.drain(..));
                break;
            }
            match admit(&job) {
                Some(t) => taken.push((job, t)),
                None => kept.push_back(job),
            }
        }
        *q = kept;
        self.len.store(q.len(), Ordering::Release);
        drop(q);
        if !taken.is_empty() {
            self.room.notify_one();
        }
        taken
    }

    /// Take every job of the given queue (it was paused).
    pub(crate) fn take_queue(&self, queue: &str) -> Vec<Job> {
        let mut q = self.lock();
        let all = std::mem::take(&mut *q);
        let (taken, kept): (VecDeque<Job>, VecDeque<Job>) =
            all.into_iter().partition(|job| job.queue == queue);
        let taken = Vec::from(taken);
        *q = kept;
        self.len.store(q.len(), Ordering::Release);
        drop(q);
        if !taken.is_empty() {
            self.room.notify_one();
        }
        taken
    }

    pub(crate) fn take_all(&self) -> Vec<Job> {
        self.take(usize::MAX)
    }

    /// How many buffered jobs each queue has (for the snapshot).
    pub(crate) fn per_queue(&self) -> Vec<(String, u32)> {
        let q = self.lock();
        let mut counts: std::collections::BTreeMap<&str, u32> = Default::default();
        for job in q.iter() {
            *counts.entry(job.queue.as_str()).or_default() += 1;
        }
        counts
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }
}

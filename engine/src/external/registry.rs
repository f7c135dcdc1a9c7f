//! What this process knows of the external workers calling it: who they are (for their
//! instance rows), and the jobs each lease holds (for reports without a read, the busy
//! count, execution deadlines and progress). The store stays the authority: a lease this
//! registry does not know (this process restarted, or another `deck serve` took the claim)
//! is checked against the job row instead.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::Utc;

use crate::model::{InstanceInfo, InstanceKind, Job, JobId, Timestamp};
use crate::running::Progress;
use crate::validation;

use super::lease::{Lease, instance_id};

/// Who a worker says it is, from its claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerProfile {
    /// Its name (`validate_worker_name`); its instance id is `ext:<name>`.
    pub name: String,
    /// Where it runs, as it says (shown on the Instances page).
    pub host: String,
    pub pid: u32,
    /// What it is, e.g. `python-worker/1.0`.
    pub agent: String,
    /// How many jobs it runs at once.
    pub concurrency: u32,
    /// The queues it takes from; `None` = every queue.
    pub queues: Option<Vec<String>>,
    /// The job types it runs; `None` = every type.
    pub types: Option<Vec<String>>,
}

impl WorkerProfile {
    /// What a worker known only by a lease is shown as until its next claim says more.
    fn from_lease(lease: &Lease) -> WorkerProfile {
        WorkerProfile {
            name: lease.worker().to_string(),
            host: String::new(),
            pid: 0,
            agent: "external".into(),
            concurrency: 0,
            queues: None,
            types: None,
        }
    }
}

/// A job a lease holds.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    /// As it was started (attempt counted).
    pub(crate) job: Job,
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
    pub(crate) progress: Option<Progress>,
}

struct Worker {
    profile: WorkerProfile,
    started_at: Timestamp,
    last_seen: Instant,
    /// When the instance row was last written from here.
    row_written: Option<Instant>,
    leases: HashMap<String, HashMap<JobId, Held>>,
}

impl Worker {
    fn new(profile: WorkerProfile) -> Worker {
        Worker {
            profile,
            started_at: Utc::now(),
            last_seen: Instant::now(),
            row_written: None,
            leases: HashMap::new(),
        }
    }

    fn busy(&self) -> u32 {
        u32::try_from(self.leases.values().map(HashMap::len).sum::<usize>()).unwrap_or(u32::MAX)
    }

    fn row(&self) -> InstanceInfo {
        let p = &self.profile;
        InstanceInfo {
            id: instance_id(&p.name),
            host: validation::clipped(&p.host, validation::MAX_HOST_CHARS),
            pid: p.pid,
            version: validation::clipped(&p.agent, validation::MAX_VERSION_CHARS),
            started_at: self.started_at,
            heartbeat_at: Utc::now(),
            workers_total: p.concurrency,
            workers_busy: self.busy(),
            kind: InstanceKind::External,
            queues: p.queues.clone(),
            job_types: p.types.clone(),
            quiet: false,
            held_jobs: 0,
            stopped: false,
        }
    }
}

#[derive(Default)]
pub(crate) struct Registry {
    workers: Mutex<HashMap<String, Worker>>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Worker>> {
        self.workers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A claim from `profile`'s worker: remember what it says about itself. Workers silent
    /// for longer than `forget_after` are dropped with what they held (the rescuer deals
    /// with their jobs), so the map stays as large as the set of live workers.
    pub(crate) fn seen(&self, profile: &WorkerProfile, forget_after: Duration) {
        let mut map = self.lock();
        let now = Instant::now();
        map.retain(|name, w| name == &profile.name || now - w.last_seen < forget_after);
        let w = map
            .entry(profile.name.clone())
            .or_insert_with(|| Worker::new(profile.clone()));
        if w.profile != *profile {
            w.profile = profile.clone();
            w.row_written = None;
        }
        w.last_seen = now;
    }

    /// A report on `lease`: the worker is alive.
    pub(crate) fn touch(&self, lease: &Lease) {
        let mut map = self.lock();
        let w = map
            .entry(lease.worker().to_string())
            .or_insert_with(|| Worker::new(WorkerProfile::from_lease(lease)));
        w.last_seen = Instant::now();
    }

    /// The worker's instance row, when it is due to be written (first sight, a changed
    /// profile, or `every` since the last write); marks it written. The busy count it shows
    /// is at most `every` old, so a report never costs a write of its own.
    pub(crate) fn row_due(&self, worker: &str, every: Duration) -> Option<InstanceInfo> {
        let mut map = self.lock();
        let w = map.get_mut(worker)?;
        let now = Instant::now();
        if w.row_written.is_some_and(|at| now - at < every) {
            return None;
        }
        w.row_written = Some(now);
        Some(w.row())
    }

    /// The jobs a claim started are held by its lease.
    pub(crate) fn hold(&self, lease: &Lease, held: Vec<Held>) {
        let mut map = self.lock();
        let w = map
            .entry(lease.worker().to_string())
            .or_insert_with(|| Worker::new(WorkerProfile::from_lease(lease)));
        let jobs = w.leases.entry(lease.as_str().to_string()).or_default();
        for h in held {
            jobs.insert(h.job.id, h);
        }
    }

    pub(crate) fn get(&self, lease: &Lease, id: JobId) -> Option<Held> {
        self.lock()
            .get(lease.worker())?
            .leases
            .get(lease.as_str())?
            .get(&id)
            .cloned()
    }

    /// The job left the lease (finished, given back, lost).
    pub(crate) fn drop_jobs(&self, lease: &Lease, ids: &[JobId]) {
        let mut map = self.lock();
        let Some(w) = map.get_mut(lease.worker()) else {
            return;
        };
        if let Some(jobs) = w.leases.get_mut(lease.as_str()) {
            for id in ids {
                jobs.remove(id);
            }
            if jobs.is_empty() {
                w.leases.remove(lease.as_str());
            }
        }
    }

    /// Latest progress of a held job; false when the lease does not hold it here.
    pub(crate) fn set_progress(&self, lease: &Lease, id: JobId, progress: Progress) -> bool {
        let mut map = self.lock();
        let held = map
            .get_mut(lease.worker())
            .and_then(|w| w.leases.get_mut(lease.as_str()))
            .and_then(|jobs| jobs.get_mut(&id));
        match held {
            Some(h) => {
                h.progress = Some(progress);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row a worker is registered with holds what the stores' instance columns keep, in
    /// the engine, so both stores register the same row.
    #[test]
    fn a_long_agent_is_cut_to_what_an_instance_row_keeps() {
        let worker = Worker::new(WorkerProfile {
            name: "billing-py".into(),
            host: "h".repeat(validation::MAX_HOST_CHARS),
            pid: 7,
            agent: "a".repeat(validation::MAX_NAME_CHARS),
            concurrency: 1,
            queues: None,
            types: None,
        });
        let row = worker.row();
        assert_eq!(row.version.chars().count(), validation::MAX_VERSION_CHARS);
        assert_eq!(row.host.chars().count(), validation::MAX_HOST_CHARS);
        assert_eq!(row.id, "ext:billing-py");
    }
}

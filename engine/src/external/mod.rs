//! External workers: processes in any language that pull jobs over the worker protocol
//! (the JSON API's `/workers/…` routes) instead of running them in this process.
//!
//! They follow the rules in-process workers follow, through the same store calls:
//! - a claim starts its jobs (`Processing`, attempt counted) under a fresh [`Lease`], the
//!   owner id every later report is checked against; a stale lease changes nothing;
//! - the worker heartbeats its jobs; the answer carries operator cancels and execution
//!   timeouts, which are recorded here at once (the worker only has to stop);
//! - a worker that stops heartbeating is rescued by the same zombie and dead-instance
//!   timeouts (its instance row, `ext:<name>`, is refreshed by its calls);
//! - failures go through the same retry policy; a release gives a job back unrun.
//!
//! Claims and reports are producers' and workers' traffic, not operators' decisions: they
//! are announced on the event stream, not audited.

mod lease;
mod registry;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;

use crate::error::StoreResult;
use crate::events::{EngineEvent, EventKind};
use crate::model::{
    Applied, ClaimRequest, Completion, FailureReason, Job, JobId, JobState, Timestamp,
};
use crate::running::Progress;
use crate::runtime::completer::{event_for, finished_job};
use crate::runtime::outcome::{after_failure, dead, humanize};
use crate::runtime::retry::AttemptFailure;
use crate::runtime::{Control, millis};
use crate::validation::{self, ValidationError};

pub use lease::{INSTANCE_PREFIX, Lease, MAX_WORKER_NAME, validate_worker_name};
pub use registry::WorkerProfile;
use registry::{Held, Registry};

/// Most jobs one claim hands out.
pub const MAX_CLAIM: u32 = 100;
/// Longest a claim waits for work.
pub const MAX_CLAIM_WAIT: Duration = Duration::from_secs(30);
/// Longest error message kept from a worker's failure report.
pub const MAX_ERROR_CHARS: usize = 2_000;
/// Longest progress message kept.
pub const MAX_PROGRESS_CHARS: usize = 500;
/// Largest `concurrency` a worker may report.
pub const MAX_CONCURRENCY: u32 = 10_000;
/// Longest wait a worker may ask for before a failed job's retry: a year.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(365 * 86_400);

/// A claim as a worker asks it.
#[derive(Debug, Clone)]
pub struct ExternalClaim {
    pub profile: WorkerProfile,
    /// At most this many jobs (1 to [`MAX_CLAIM`]).
    pub limit: u32,
    /// Wait up to this long for work when none is there (cut to [`MAX_CLAIM_WAIT`]; the
    /// pull protocol refuses a longer one with [`validate_claim_wait`]).
    pub wait: Duration,
}

/// A started job, as a claim hands it out.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub job: Job,
    /// When its execution timeout ends it.
    pub deadline: Timestamp,
}

/// What a claim got.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// `None` when no job came within the wait.
    pub lease: Option<Lease>,
    pub jobs: Vec<ClaimedJob>,
    /// How often the worker must heartbeat its jobs.
    pub heartbeat_every: Duration,
}

/// Why the worker must stop a job (already recorded: nothing more to report).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// An operator cancelled it: it is in the DLQ as `cancelled`.
    Cancelled,
    /// Its execution timeout passed: retried or dead-lettered by the retry policy.
    Timeout,
}

/// A heartbeat's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseBeat {
    /// Still held; heartbeat written.
    pub alive: Vec<JobId>,
    /// Stop these now.
    pub stop: Vec<(JobId, StopReason)>,
    /// No longer held by this lease (rescued, finished, purged): drop them.
    pub lost: Vec<JobId>,
}

/// How an attempt failed, as the worker reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerFailure {
    /// May succeed later: retried by the job's policy, no earlier than `retry_after`.
    Transient { retry_after: Option<Duration> },
    /// Can never succeed: to the DLQ now.
    Fatal,
}

/// Where a reported job went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Succeeded,
    RetryAt(Timestamp),
    Dead(FailureReason),
    Released,
}

impl Settled {
    fn of(completion: &Completion) -> Settled {
        match completion {
            Completion::Succeeded { .. } => Settled::Succeeded,
            Completion::Retry { retry_at, .. } => Settled::RetryAt(*retry_at),
            Completion::DeadLetter { reason, .. } => Settled::Dead(*reason),
            Completion::Released { .. } => Settled::Released,
        }
    }
}

/// The pull protocol's engine side. Cheap to clone; every clone shares what it knows.
#[derive(Clone)]
pub struct ExternalWorkers {
    control: Arc<Control>,
    registry: Arc<Registry>,
}

impl std::fmt::Debug for ExternalWorkers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalWorkers").finish_non_exhaustive()
    }
}

impl ExternalWorkers {
    pub(crate) fn new(control: Arc<Control>) -> Self {
        ExternalWorkers {
            control,
            registry: Arc::new(Registry::default()),
        }
    }

    /// Claim up to `limit` jobs, started under one fresh lease; when there are none, wait
    /// for work up to `wait` (same-process enqueues wake the wait at once, others are seen
    /// at the engine's poll interval). Ends early, empty, when the engine shuts down.
    pub async fn claim(&self, req: ExternalClaim) -> StoreResult<Claimed> {
        check_claim(&req)?;
        let control = &self.control;
        let config = control.config();
        let profile = &req.profile;
        self.registry
            .seen(profile, config.rescue.dead_instance_timeout * 2);
        let until = Instant::now() + req.wait.min(MAX_CLAIM_WAIT);
        loop {
            // A long poll keeps the worker's row fresh (written at most every few seconds).
            self.write_row(&profile.name).await;
            // Listen before looking, so work that arrives during the claim is not missed.
            let new_work = control.new_work().notified();
            tokio::pin!(new_work);
            new_work.as_mut().enable();
            if control.claiming().is_cancelled() {
                return Ok(self.nothing());
            }
            let lease = Lease::issue(&profile.name);
            let jobs = self.claim_once(&lease, profile, req.limit).await?;
            if !jobs.is_empty() {
                self.write_row(&profile.name).await;
                return Ok(Claimed {
                    lease: Some(lease),
                    jobs,
                    heartbeat_every: self.heartbeat_every(),
                });
            }
            let now = Instant::now();
            if now >= until {
                return Ok(self.nothing());
            }
            let nap = (until - now).min(config.poll_interval);
            tokio::select! {
                _ = new_work => {}
                _ = tokio::time::sleep(nap) => {}
                _ = control.claiming().cancelled() => return Ok(self.nothing()),
            }
        }
    }

    fn nothing(&self) -> Claimed {
        Claimed {
            lease: None,
            jobs: Vec::new(),
            heartbeat_every: self.heartbeat_every(),
        }
    }

    /// How often workers must heartbeat: the engine's job heartbeat, and often enough that
    /// a worker's instance row (refreshed by its calls) never looks dead between beats.
    fn heartbeat_every(&self) -> Duration {
        let config = self.control.config();
        config
            .heartbeat_interval
            .min(config.rescue.dead_instance_timeout / 3)
            .max(Duration::from_secs(1))
    }

    async fn claim_once(
        &self,
        lease: &Lease,
        profile: &WorkerProfile,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedJob>> {
        let control = &self.control;
        let store = control.store();
        let mut jobs = store
            .claim_batch(ClaimRequest {
                worker_id: lease.as_str().to_string(),
                limit,
                start: limit,
                queues: profile.queues.clone(),
                types: profile.types.clone(),
            })
            .await?;
        // A store may start fewer than asked: start the rest now; any it refuses are not
        // ours any more.
        let fetched: Vec<JobId> = jobs
            .iter()
            .filter(|j| j.state == JobState::Fetched)
            .map(|j| j.id)
            .collect();
        if !fetched.is_empty() {
            let started = store.mark_processing(lease.as_str(), &fetched).await?;
            jobs.retain(|j| j.state != JobState::Fetched || started.contains(&j.id));
            for j in jobs.iter_mut().filter(|j| j.state == JobState::Fetched) {
                j.state = JobState::Processing;
                j.attempt += 1;
            }
        }
        let now = Instant::now();
        let cache = control.queue_cache();
        let mut held = Vec::with_capacity(jobs.len());
        let mut claimed = Vec::with_capacity(jobs.len());
        for job in jobs {
            let timeout = cache.execution_timeout(&job.queue, control.config().execution_timeout);
            let deadline =
                Utc::now() + chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::MAX);
            control.events().send_with(|| {
                EngineEvent::new(
                    EventKind::Started,
                    format!(
                        "attempt {} started by external worker {}",
                        job.attempt, profile.name
                    ),
                )
                .job(job.id, &job.queue, &job.job_type)
            });
            held.push(Held {
                job: job.clone(),
                started: now,
                deadline: now + timeout,
                progress: None,
            });
            claimed.push(ClaimedJob { job, deadline });
        }
        self.registry.hold(lease, held);
        Ok(claimed)
    }

    /// Heartbeat the jobs `lease` holds. Operator cancels and passed execution timeouts are
    /// recorded here and come back in `stop`.
    pub async fn heartbeat(&self, lease: &Lease, ids: &[JobId]) -> StoreResult<LeaseBeat> {
        self.registry.touch(lease);
        let store = self.control.store();
        let report = store.heartbeat(lease.as_str(), ids).await?;
        let mut beat = LeaseBeat {
            alive: Vec::new(),
            stop: Vec::new(),
            lost: report.lost,
        };
        let mut endings = Vec::new();
        // A job with a cancel request may be reported alive too: the cancel wins.
        let alive: Vec<JobId> = report
            .alive
            .into_iter()
            .filter(|id| !report.cancel_requested.contains(id))
            .collect();
        for id in report.cancel_requested {
            if let Some(held) = self.held(lease, id).await? {
                let c = dead(
                    &held.job,
                    FailureReason::Cancelled,
                    "cancelled",
                    "cancelled by an operator while running".to_string(),
                    millis(held.started.elapsed()),
                );
                endings.push((held, c, StopReason::Cancelled));
            }
        }
        let now = Instant::now();
        for id in alive {
            match self.registry.get(lease, id) {
                Some(held) if now >= held.deadline => {
                    let limit = held.deadline.saturating_duration_since(held.started);
                    let c = after_failure(
                        &self.control.retry_policy(),
                        &held.job,
                        AttemptFailure::Timeout,
                        "timeout",
                        format!("execution timeout of {} exceeded", humanize(limit)),
                        millis(held.started.elapsed()),
                    );
                    endings.push((held, c, StopReason::Timeout));
                }
                _ => beat.alive.push(id),
            }
        }
        if !endings.is_empty() {
            let completions = endings.iter().map(|(_, c, _)| c.clone()).collect();
            let applied = store.complete(lease.as_str(), completions).await?;
            for ((held, c, reason), applied) in endings.into_iter().zip(applied) {
                if applied == Applied::Applied {
                    self.settled(lease, &held, &c);
                    beat.stop.push((held.job.id, reason));
                } else {
                    beat.lost.push(held.job.id);
                }
            }
        }
        self.registry.drop_jobs(lease, &beat.lost);
        self.write_row(lease.worker()).await;
        Ok(beat)
    }

    /// Progress on a held job (the console and the event stream show it). False when the
    /// lease does not hold the job.
    pub async fn progress(
        &self,
        lease: &Lease,
        id: JobId,
        percent: u8,
        message: &str,
    ) -> StoreResult<bool> {
        if message.chars().count() > MAX_PROGRESS_CHARS {
            return Err(ValidationError::new(
                "message",
                "is too long",
                format!("send at most {MAX_PROGRESS_CHARS} characters"),
            )
            .into());
        }
        let Some(held) = self.held(lease, id).await? else {
            return Ok(false);
        };
        let progress = Progress {
            percent: percent.min(100),
            message: message.to_string(),
            at: Utc::now(),
        };
        let job = &held.job;
        self.control.events().send_with(|| {
            EngineEvent::new(
                EventKind::Progress,
                format!("{}% {}", progress.percent, progress.message),
            )
            .job(job.id, &job.queue, &job.job_type)
        });
        let held = self.registry.set_progress(lease, id, progress);
        self.write_row(lease.worker()).await;
        Ok(held)
    }

    /// The attempt succeeded with `result` (JSON text). `None` when the lease does not hold
    /// the job (nothing changed).
    pub async fn complete(
        &self,
        lease: &Lease,
        id: JobId,
        result: Option<String>,
    ) -> StoreResult<Option<Settled>> {
        let Some(held) = self.held(lease, id).await? else {
            return Ok(None);
        };
        let duration_ms = millis(held.started.elapsed());
        let limit = self.control.config().result_max_bytes;
        let completion = match result {
            Some(text) if text.len() > limit => dead(
                &held.job,
                FailureReason::Fatal,
                "result_too_large",
                format!(
                    "the worker's result is {} bytes, over the limit of {limit} bytes \
                     (result_max_bytes); return less, or store the data elsewhere and return \
                     a reference to it",
                    text.len()
                ),
                duration_ms,
            ),
            result => Completion::Succeeded {
                id,
                result,
                duration_ms,
            },
        };
        self.commit(lease, held, completion).await
    }

    /// The attempt failed: retried by the policy (transient) or dead-lettered (fatal, or
    /// out of attempts). `kind` names the error class (defaults to the failure's kind).
    pub async fn fail(
        &self,
        lease: &Lease,
        id: JobId,
        failure: WorkerFailure,
        kind: Option<&str>,
        message: &str,
    ) -> StoreResult<Option<Settled>> {
        if let Some(kind) = kind {
            validation::validate_name("kind", kind)?;
        }
        if let WorkerFailure::Transient {
            retry_after: Some(wait),
        } = failure
            && wait > MAX_RETRY_AFTER
        {
            return Err(ValidationError::new(
                "retry_after_seconds",
                format!("is {} seconds", wait.as_secs()),
                format!("give 0 to {} (a year)", MAX_RETRY_AFTER.as_secs()),
            )
            .into());
        }
        let Some(held) = self.held(lease, id).await? else {
            return Ok(None);
        };
        let message: String = message.chars().take(MAX_ERROR_CHARS).collect();
        let (attempt_failure, default_kind) = match failure {
            WorkerFailure::Transient {
                retry_after: Some(retry_after),
            } => (
                AttemptFailure::Throttled { retry_after },
                crate::handler::THROTTLED_KIND,
            ),
            WorkerFailure::Transient { retry_after: None } => {
                (AttemptFailure::Transient, "transient")
            }
            WorkerFailure::Fatal => (AttemptFailure::Fatal, "fatal"),
        };
        let completion = after_failure(
            &self.control.retry_policy(),
            &held.job,
            attempt_failure,
            kind.unwrap_or(default_kind),
            message,
            millis(held.started.elapsed()),
        );
        self.commit(lease, held, completion).await
    }

    /// Give held jobs back unrun: pending again, the attempt not counted. Returns the ids
    /// given back (the others were not held by the lease).
    pub async fn release(&self, lease: &Lease, ids: &[JobId]) -> StoreResult<Vec<JobId>> {
        let mut held = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(h) = self.held(lease, *id).await? {
                held.push(h);
            }
        }
        let completions: Vec<Completion> = held
            .iter()
            .map(|h| Completion::Released { id: h.job.id })
            .collect();
        let applied = self
            .control
            .store()
            .complete(lease.as_str(), completions.clone())
            .await?;
        let mut released = Vec::new();
        for ((h, c), applied) in held.iter().zip(&completions).zip(applied) {
            if applied == Applied::Applied {
                self.settled(lease, h, c);
                released.push(h.job.id);
            }
        }
        self.registry.drop_jobs(lease, ids);
        self.write_row(lease.worker()).await;
        if !released.is_empty() {
            self.control.new_work().notify_waiters();
        }
        Ok(released)
    }

    async fn commit(
        &self,
        lease: &Lease,
        held: Held,
        completion: Completion,
    ) -> StoreResult<Option<Settled>> {
        let applied = self
            .control
            .store()
            .complete(lease.as_str(), vec![completion.clone()])
            .await?;
        self.registry.drop_jobs(lease, &[held.job.id]);
        self.write_row(lease.worker()).await;
        if applied.first() != Some(&Applied::Applied) {
            return Ok(None);
        }
        self.settled(lease, &held, &completion);
        Ok(Some(Settled::of(&completion)))
    }

    /// After a committed completion: announce it, answer same-process waiters.
    fn settled(&self, lease: &Lease, held: &Held, completion: &Completion) {
        let control = &self.control;
        control.events().send(event_for(&held.job, completion));
        if completion.is_final()
            && let Some(slots) = control.waiters().take(held.job.id)
        {
            let job = finished_job(&held.job, completion, lease.as_str());
            control.waiters().resolve(slots, job);
        }
    }

    /// The job as `lease` holds it: from this process's registry, else from the store
    /// (this process restarted, or another one handed it out) when its row says the lease
    /// holds it. `None`: the lease does not hold it.
    async fn held(&self, lease: &Lease, id: JobId) -> StoreResult<Option<Held>> {
        // Any report shows the worker alive.
        self.registry.touch(lease);
        if let Some(h) = self.registry.get(lease, id) {
            return Ok(Some(h));
        }
        let Some(job) = self.control.store().get_job(id).await? else {
            return Ok(None);
        };
        if job.state != JobState::Processing || job.worker_id.as_deref() != Some(lease.as_str()) {
            return Ok(None);
        }
        let control = &self.control;
        let timeout = control
            .queue_cache()
            .execution_timeout(&job.queue, control.config().execution_timeout);
        let ran = job
            .started_at
            .and_then(|at| (Utc::now() - at).to_std().ok())
            .unwrap_or_default();
        let now = Instant::now();
        let started = now.checked_sub(ran).unwrap_or(now);
        let held = Held {
            job,
            started,
            deadline: started + timeout,
            progress: None,
        };
        self.registry.hold(lease, vec![held.clone()]);
        Ok(Some(held))
    }

    /// Refresh the worker's instance row when due. A failed write is logged: the next call
    /// tries again, and the worker's jobs are safe until the dead-instance timeout.
    async fn write_row(&self, worker: &str) {
        let every = self.control.config().instance_heartbeat_interval;
        if let Some(row) = self.registry.row_due(worker, every)
            && let Err(e) = self.control.store().heartbeat_instance(&row).await
        {
            tracing::warn!(worker, error = %e, "could not refresh an external worker's instance row");
        }
    }
}

/// The pull protocol's bound on a claim's wait: at most [`MAX_CLAIM_WAIT`], named as the
/// protocol names it (`wait_seconds`). The API refuses a longer wait with this; a Rust
/// caller's is cut to the bound.
pub fn validate_claim_wait(wait: Duration) -> Result<(), ValidationError> {
    if wait > MAX_CLAIM_WAIT {
        return Err(ValidationError::new(
            "wait_seconds",
            format!("is {:?}", wait),
            format!(
                "wait 0 to {} seconds; claim again after",
                MAX_CLAIM_WAIT.as_secs()
            ),
        ));
    }
    Ok(())
}

fn check_claim(req: &ExternalClaim) -> Result<(), ValidationError> {
    let p = &req.profile;
    validate_worker_name(&p.name)?;
    if !(1..=MAX_CLAIM).contains(&req.limit) {
        return Err(ValidationError::new(
            "limit",
            format!("is {}", req.limit),
            format!("ask for 1 to {MAX_CLAIM} jobs"),
        ));
    }
    if p.concurrency > MAX_CONCURRENCY {
        return Err(ValidationError::new(
            "concurrency",
            format!("is {}", p.concurrency),
            format!("give 0 to {MAX_CONCURRENCY}"),
        ));
    }
    for (field, names) in [("queues", &p.queues), ("types", &p.types)] {
        if let Some(names) = names {
            if names.is_empty() {
                return Err(ValidationError::new(
                    field,
                    "is an empty list",
                    format!("leave {field} out to take every one, or name at least one"),
                ));
            }
            for (i, n) in names.iter().enumerate() {
                validation::validate_name(&format!("{field}[{i}]"), n)?;
            }
        }
    }
    for (field, value) in [("host", &p.host), ("agent", &p.agent)] {
        if !value.is_empty() {
            validation::validate_name(field, value)?;
        }
    }
    Ok(())
}

//! Batches with callbacks: many jobs enqueued as one unit (all in one transaction, or none),
//! whose callbacks are jobs the store enqueues exactly once, in the transaction of the
//! member move that makes them due:
//! - `on_success` when every member succeeded,
//! - `on_complete` when every member reached a final pillar (archive or DLQ),
//! - `on_death` when a member died (the first death; later ones do not fire it again).
//!
//! Resurrecting a dead member reopens the batch: it counts as pending again, so `on_success`
//! can still fire once it and the rest succeed. A callback that fired stays fired; each
//! fires at most once per batch. Purging a pending member takes it out of the batch.
//!
//! No I/O here: the store keeps the batch row and its counts (`Store::create_batch`), the
//! operations layer validates (`Operations::create_batch`).

use serde::{Deserialize, Serialize};

pub use crate::model::BatchId;
use crate::model::{EnqueueRequest, JobId, Timestamp};
use crate::validation::{self, MAX_BATCH, MAX_PAYLOAD_BYTES, ValidationError, normalize_payload};

/// The job a callback enqueues. Its payload is built by the store:
/// `{"batch_id", "event", "description", "total", "succeeded", "dead", "args"}` where
/// `args` is this callback's own payload (JSON, `null` when none was given).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchCallback {
    pub queue: String,
    pub job_type: String,
    /// JSON text handed to the callback as `args`. Empty or absent means `null`.
    #[serde(default)]
    pub payload: Option<String>,
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub max_attempts: Option<u32>,
}

impl BatchCallback {
    pub fn new(queue: impl Into<String>, job_type: impl Into<String>) -> Self {
        BatchCallback {
            queue: queue.into(),
            job_type: job_type.into(),
            payload: None,
            priority: 0,
            max_attempts: None,
        }
    }

    pub fn with_payload(mut self, payload: impl Into<String>) -> Self {
        self.payload = Some(payload.into());
        self
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchCallbacks {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<BatchCallback>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_complete: Option<BatchCallback>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_death: Option<BatchCallback>,
}

impl BatchCallbacks {
    pub fn get(&self, event: BatchEvent) -> Option<&BatchCallback> {
        match event {
            BatchEvent::Success => self.on_success.as_ref(),
            BatchEvent::Complete => self.on_complete.as_ref(),
            BatchEvent::Death => self.on_death.as_ref(),
        }
    }
}

/// Which callback fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchEvent {
    Success,
    Complete,
    Death,
}

impl BatchEvent {
    pub const ALL: [BatchEvent; 3] = [BatchEvent::Death, BatchEvent::Success, BatchEvent::Complete];

    pub fn as_str(self) -> &'static str {
        match self {
            BatchEvent::Success => "success",
            BatchEvent::Complete => "complete",
            BatchEvent::Death => "death",
        }
    }
}

/// What a producer asks for: the members and the callbacks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRequest {
    /// Shown in the console and handed to callbacks.
    pub description: Option<String>,
    pub created_by: Option<String>,
    pub jobs: Vec<EnqueueRequest>,
    pub callbacks: BatchCallbacks,
}

/// A batch and its members' counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    pub id: BatchId,
    pub description: Option<String>,
    pub created_by: Option<String>,
    pub created_at: Timestamp,
    /// Members (a purged pending member leaves the batch).
    pub total: u32,
    pub succeeded: u32,
    pub dead: u32,
    /// Set while every member is final.
    pub finished_at: Option<Timestamp>,
    pub callbacks: BatchCallbacks,
    /// The job each callback became, once it fired.
    pub success_job_id: Option<JobId>,
    pub complete_job_id: Option<JobId>,
    pub death_job_id: Option<JobId>,
}

impl Batch {
    /// Members not final yet.
    pub fn pending(&self) -> u32 {
        self.total.saturating_sub(self.succeeded + self.dead)
    }

    pub fn fired(&self, event: BatchEvent) -> Option<JobId> {
        match event {
            BatchEvent::Success => self.success_job_id,
            BatchEvent::Complete => self.complete_job_id,
            BatchEvent::Death => self.death_job_id,
        }
    }

    /// The callbacks these counts make due that have not fired yet, in the order the store
    /// enqueues them. `newly_dead`: this move killed a member (only a death fires `on_death`).
    pub fn due_callbacks(&self, newly_dead: bool) -> Vec<BatchEvent> {
        BatchEvent::ALL
            .into_iter()
            .filter(|e| self.callbacks.get(*e).is_some() && self.fired(*e).is_none())
            .filter(|e| match e {
                BatchEvent::Death => newly_dead && self.dead > 0,
                BatchEvent::Success => self.succeeded == self.total,
                BatchEvent::Complete => self.succeeded + self.dead == self.total,
            })
            .collect()
    }

    /// The job a due callback enqueues.
    pub fn callback_job(&self, event: BatchEvent) -> Option<EnqueueRequest> {
        let cb = self.callbacks.get(event)?;
        let args = cb
            .payload
            .as_deref()
            .map(normalize_payload)
            .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
            .unwrap_or(serde_json::Value::Null);
        let payload = serde_json::json!({
            "batch_id": self.id,
            "event": event.as_str(),
            "description": self.description,
            "total": self.total,
            "succeeded": self.succeeded,
            "dead": self.dead,
            "args": args,
        });
        Some(EnqueueRequest {
            queue: cb.queue.clone(),
            job_type: cb.job_type.clone(),
            payload: payload.to_string(),
            priority: cb.priority,
            max_attempts: cb.max_attempts,
            tags: vec![format!("batch:{}", self.id)],
            created_by: Some(format!("batch {} on_{}", self.id, event.as_str())),
            ..Default::default()
        })
    }
}

/// What creating a batch wrote: the batch and its members' ids, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchCreated {
    pub batch: Batch,
    pub job_ids: Vec<JobId>,
}

/// Longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 1000;

/// Everything about a batch request that can be wrong, with the field the API names.
pub fn validate_batch_request(req: &BatchRequest) -> Result<(), ValidationError> {
    if req.jobs.is_empty() {
        return Err(ValidationError::new(
            "jobs",
            "is empty",
            "give at least one job; a batch finishes when its members do",
        ));
    }
    if req.jobs.len() > MAX_BATCH {
        return Err(ValidationError::new(
            "jobs",
            format!("holds {} jobs", req.jobs.len()),
            format!("send at most {MAX_BATCH} jobs per batch"),
        ));
    }
    validation::validate_batch(&req.jobs)?;
    for (i, job) in req.jobs.iter().enumerate() {
        // A member found by its key would be another batch's (or nobody's) job: the counts
        // could then never add up to the batch's own members.
        if job.idempotency_key.is_some() {
            return Err(ValidationError::new(
                format!("jobs[{i}].idempotency_key"),
                "was given on a batch member",
                "leave keys off batch members; a batch is written whole or not at all",
            ));
        }
    }
    if let Some(d) = &req.description {
        let chars = d.chars().count();
        if chars > MAX_DESCRIPTION_CHARS || d.chars().any(char::is_control) {
            return Err(ValidationError::new(
                "description",
                format!("is {chars} characters long or holds control characters"),
                format!("give at most {MAX_DESCRIPTION_CHARS} characters of plain text"),
            ));
        }
    }
    validation::validate_optional_name("created_by", req.created_by.as_deref())?;
    for (name, cb) in [
        ("on_success", &req.callbacks.on_success),
        ("on_complete", &req.callbacks.on_complete),
        ("on_death", &req.callbacks.on_death),
    ] {
        let Some(cb) = cb else { continue };
        let prefixed = |e: ValidationError| ValidationError {
            field: format!("callbacks.{name}.{}", e.field),
            ..e
        };
        validation::validate_name("queue", &cb.queue).map_err(prefixed)?;
        validation::validate_name("job_type", &cb.job_type).map_err(prefixed)?;
        if let Some(p) = &cb.payload {
            // Room for the counts the store wraps around it.
            validation::validate_json("payload", normalize_payload(p), MAX_PAYLOAD_BYTES - 4096)
                .map_err(prefixed)?;
        }
        if cb.max_attempts == Some(0) {
            return Err(prefixed(ValidationError::new(
                "max_attempts",
                "is 0",
                "give at least 1 (the first run counts)",
            )));
        }
        validation::validate_stored_int("max_attempts", cb.max_attempts, 1).map_err(prefixed)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A batch with these counts and every callback asked for, none fired yet: the input of
    /// the due rule, here and in the store that writes it in SQL.
    pub(crate) fn batch(total: u32, succeeded: u32, dead: u32) -> Batch {
        Batch {
            id: BatchId::new(),
            description: None,
            created_by: None,
            created_at: chrono::Utc::now(),
            total,
            succeeded,
            dead,
            finished_at: None,
            callbacks: BatchCallbacks {
                on_success: Some(BatchCallback::new("q", "s")),
                on_complete: Some(BatchCallback::new("q", "c")),
                on_death: Some(BatchCallback::new("q", "d")),
            },
            success_job_id: None,
            complete_job_id: None,
            death_job_id: None,
        }
    }

    #[test]
    fn callbacks_fall_due_with_the_counts() {
        assert!(batch(3, 1, 0).due_callbacks(false).is_empty());
        assert_eq!(
            batch(3, 3, 0).due_callbacks(false),
            [BatchEvent::Success, BatchEvent::Complete]
        );
        assert_eq!(batch(3, 1, 1).due_callbacks(true), [BatchEvent::Death]);
        assert_eq!(
            batch(3, 2, 1).due_callbacks(true),
            [BatchEvent::Death, BatchEvent::Complete]
        );
        // A success after a death fires no death callback.
        assert_eq!(batch(3, 2, 1).due_callbacks(false), [BatchEvent::Complete]);
        let mut fired = batch(3, 3, 0);
        fired.success_job_id = Some(JobId::new());
        assert_eq!(fired.due_callbacks(false), [BatchEvent::Complete]);
    }

    #[test]
    fn a_callback_job_carries_the_counts_and_its_args() {
        let mut b = batch(2, 1, 1);
        b.callbacks.on_complete =
            Some(BatchCallback::new("reports", "summary").with_payload(r#"{"r":7}"#));
        let job = b.callback_job(BatchEvent::Complete).expect("configured");
        let payload: serde_json::Value = serde_json::from_str(&job.payload).expect("json");
        assert_eq!(payload["event"], "complete");
        assert_eq!(payload["total"], 2);
        assert_eq!(payload["dead"], 1);
        assert_eq!(payload["args"]["r"], 7);
        assert_eq!(job.queue, "reports");
    }

    #[test]
    fn members_with_keys_and_empty_batches_are_refused() {
        let mut req = BatchRequest::default();
        assert_eq!(validate_batch_request(&req).unwrap_err().field, "jobs");
        let mut job = EnqueueRequest::new("q", "t", "{}");
        job.idempotency_key = Some("k".into());
        req.jobs.push(job);
        assert_eq!(
            validate_batch_request(&req).unwrap_err().field,
            "jobs[0].idempotency_key"
        );
        req.jobs[0].idempotency_key = None;
        req.callbacks.on_success = Some(BatchCallback::new("", "x"));
        assert_eq!(
            validate_batch_request(&req).unwrap_err().field,
            "callbacks.on_success.queue"
        );
    }
}

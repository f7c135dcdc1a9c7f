//! Recent state changes for the console's live event console, as a lossy broadcast: a slow
//! subscriber skips events (it gets `Lagged`), it never slows the workers down.

use std::fmt;

use chrono::Utc;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::model::{JobId, Timestamp};

/// What kind of change an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Enqueued,
    Started,
    Progress,
    Succeeded,
    Retried,
    Dead,
    /// Buffered jobs handed back to pending (pause, shutdown, circuit-breaker deferral).
    Released,
    CancelRequested,
    Cancelled,
    QueueChanged,
    SettingsChanged,
    /// Zombies, stale claims or expired jobs found by the rescue sweep.
    Rescued,
    Pruned,
    /// Something an operator did in the console or over the API.
    OperatorAction,
    /// A job type's circuit breaker opened or closed.
    Breaker,
    Instance,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Enqueued => "enqueued",
            EventKind::Started => "started",
            EventKind::Progress => "progress",
            EventKind::Succeeded => "succeeded",
            EventKind::Retried => "retried",
            EventKind::Dead => "dead",
            EventKind::Released => "released",
            EventKind::CancelRequested => "cancel_requested",
            EventKind::Cancelled => "cancelled",
            EventKind::QueueChanged => "queue_changed",
            EventKind::SettingsChanged => "settings_changed",
            EventKind::Rescued => "rescued",
            EventKind::Pruned => "pruned",
            EventKind::OperatorAction => "operator_action",
            EventKind::Breaker => "breaker",
            EventKind::Instance => "instance",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One state change, as shown in the live event console.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineEvent {
    pub at: Timestamp,
    pub kind: EventKind,
    pub job_id: Option<JobId>,
    pub queue: Option<String>,
    pub job_type: Option<String>,
    pub message: String,
}

impl EngineEvent {
    pub fn new(kind: EventKind, message: impl Into<String>) -> Self {
        EngineEvent {
            at: Utc::now(),
            kind,
            job_id: None,
            queue: None,
            job_type: None,
            message: message.into(),
        }
    }

    /// An operator action (the console and the API report theirs through `Engine::emit`).
    pub fn operator(message: impl Into<String>) -> Self {
        EngineEvent::new(EventKind::OperatorAction, message)
    }

    pub fn job(mut self, id: JobId, queue: &str, job_type: &str) -> Self {
        self.job_id = Some(id);
        self.queue = Some(queue.to_string());
        self.job_type = Some(job_type.to_string());
        self
    }

    pub fn with_job_id(mut self, id: JobId) -> Self {
        self.job_id = Some(id);
        self
    }

    pub fn with_queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }
}

/// The sending side, shared by every part of the runtime and the operations layer. Public
/// only as a type (a sweep is handed one); sending stays inside the engine.
#[derive(Debug, Clone)]
pub struct EventBus {
    tx: broadcast::Sender<EngineEvent>,
}

impl EventBus {
    pub(crate) fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(16));
        EventBus { tx }
    }

    /// Whether anyone listens; per-job events are only built when this is true, so the hot
    /// path pays nothing when no console is open.
    pub(crate) fn active(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    pub(crate) fn send(&self, event: EngineEvent) {
        let _ = self.tx.send(event);
    }

    /// Build and send an event only when someone listens.
    pub(crate) fn send_with(&self, make: impl FnOnce() -> EngineEvent) {
        if self.active() {
            self.send(make());
        }
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<EngineEvent> {
        self.tx.subscribe()
    }
}

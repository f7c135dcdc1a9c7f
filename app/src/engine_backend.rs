//! The console over a running `Engine`: actions reach the runtime (a running job in this
//! process stops at once, worker counts change live) and its event stream feeds the live
//! event console.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use deck_engine::{
    BreakerStateName, CancelOutcome, Engine, EngineEvent, EngineSettings, EventKind, JobId,
    PruneReport, QueueConfig, QueuePatch, Store, StoreResult,
};
use tokio::sync::broadcast::{self, error::TryRecvError};

use crate::state::ConsoleBackend;
use crate::telemetry_view::{BreakerState, BreakerView, ConsoleEvent, EventLevel, RuntimeView};

pub struct EngineBackend {
    engine: Engine,
    /// Subscribed on first use: the engine builds per-job events only while someone listens.
    events: Mutex<Option<broadcast::Receiver<EngineEvent>>>,
}

impl EngineBackend {
    pub fn new(engine: Engine) -> Self {
        EngineBackend {
            engine,
            events: Mutex::new(None),
        }
    }
}

/// Per-job successes and starts would drown everything else at any real throughput; the
/// console shows what an operator reacts to.
fn interesting(kind: EventKind) -> Option<EventLevel> {
    match kind {
        EventKind::Enqueued | EventKind::Started | EventKind::Progress | EventKind::Succeeded => {
            None
        }
        EventKind::Dead | EventKind::Rescued | EventKind::Breaker => Some(EventLevel::Warn),
        EventKind::OperatorAction => Some(EventLevel::Action),
        _ => Some(EventLevel::Info),
    }
}

fn describe(e: &EngineEvent) -> String {
    let mut text = format!("{}: {}", e.kind, e.message);
    if let Some(q) = &e.queue {
        text.push_str(&format!(" [{q}]"));
    }
    if let Some(id) = e.job_id {
        text.push_str(&format!(" {id}"));
    }
    text
}

#[async_trait]
impl ConsoleBackend for EngineBackend {
    fn store(&self) -> &Arc<dyn Store> {
        self.engine.store()
    }

    fn runtime(&self) -> RuntimeView {
        let s = self.engine.status();
        RuntimeView {
            instance_id: s.instance_id,
            workers_total: s.workers_total,
            workers_busy: s.workers_busy,
            buffered: u64::from(s.buffered),
            breakers: s
                .breakers
                .into_iter()
                .map(|b| BreakerView {
                    job_type: b.job_type,
                    state: match b.state {
                        BreakerStateName::Closed => BreakerState::Closed,
                        BreakerStateName::Open => BreakerState::Open,
                        BreakerStateName::HalfOpen => BreakerState::HalfOpen,
                    },
                    recent_failures: b.recent_failures,
                    half_open_in_ms: b.probe_in_ms,
                })
                .collect(),
        }
    }

    async fn cancel(&self, id: JobId) -> StoreResult<CancelOutcome> {
        self.engine.cancel(id).await
    }

    async fn update_queue(&self, name: &str, patch: QueuePatch) -> StoreResult<QueueConfig> {
        self.engine.update_queue(name, patch).await
    }

    async fn save_settings(&self, settings: EngineSettings) -> StoreResult<()> {
        self.engine.save_settings(settings).await
    }

    async fn prune_now(&self) -> StoreResult<PruneReport> {
        self.engine.prune_now().await
    }

    fn drain_events(&self) -> Vec<ConsoleEvent> {
        let mut guard = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let rx = guard.get_or_insert_with(|| self.engine.subscribe_events());
        let mut out = Vec::new();
        loop {
            match rx.try_recv() {
                Ok(e) => {
                    if let Some(level) = interesting(e.kind) {
                        out.push(ConsoleEvent {
                            at: e.at,
                            level,
                            text: describe(&e),
                        });
                    }
                }
                // Missed some while nobody looked: the console is a window, not a log.
                Err(TryRecvError::Lagged(_)) => continue,
                Err(TryRecvError::Empty) | Err(TryRecvError::Closed) => break,
            }
        }
        out
    }

    fn emit_action(&self, actor: &str, action: &str, target: &str, count: u64) -> bool {
        let short: String = target.chars().take(120).collect();
        self.engine.emit(EngineEvent::operator(format!(
            "{actor}: {action} {short} ({count})"
        )));
        // Delivered back to us through the event stream only if we already listen.
        self.events.lock().map(|g| g.is_some()).unwrap_or(false)
    }
}

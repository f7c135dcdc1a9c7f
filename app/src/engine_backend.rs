//! The console over a running `Engine`: actions reach the runtime (a running job in this
//! process stops at once, worker counts change live) and its event stream feeds the live
//! event console.

use std::sync::Mutex;

use deck_engine::{Engine, EngineEvent, EventKind, Operations};
use tokio::sync::broadcast::{self, error::TryRecvError};

use crate::state::ConsoleBackend;
use crate::telemetry_view::{ConsoleEvent, EventLevel, RuntimeView};

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
    text
}

/// Everything `rx` holds now that an operator reacts to, as event console lines.
pub(crate) fn drain(rx: &mut broadcast::Receiver<EngineEvent>) -> Vec<ConsoleEvent> {
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(e) => {
                if let Some(level) = interesting(e.kind) {
                    out.push(ConsoleEvent {
                        at: e.at,
                        level,
                        text: describe(&e),
                        job_id: e.job_id,
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

impl ConsoleBackend for EngineBackend {
    fn operations(&self) -> &Operations {
        self.engine.operations()
    }

    fn runtime(&self) -> RuntimeView {
        self.engine.status().into()
    }

    fn running_jobs(&self) -> Vec<deck_engine::RunningJobInfo> {
        self.engine.snapshot().running
    }

    fn drain_events(&self) -> Vec<ConsoleEvent> {
        let mut guard = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let rx = guard.get_or_insert_with(|| self.engine.subscribe_events());
        drain(rx)
    }
}

//! Live refresh: one telemetry snapshot per tick, rendered once into HTML fragments by the
//! same components the overview page uses, and pushed to every open browser over SSE. The
//! overview page embeds the same rendered fragments.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use leptos::prelude::*;
use leptos::reactive::owner::Owner;
use tokio::sync::watch;

use crate::components::telemetry::{
    Breakers, Cards, ErrorGroups, EventConsole, QueuesTable, ThroughputChart, UntakenWarnings,
};
use crate::state::Console;
use crate::telemetry_view::Telemetry;

/// The overview's live panels, each rendered to HTML by its component: what a page load
/// embeds and what the live stream pushes (`data-live` key → HTML).
#[derive(Debug, Clone, Default)]
pub struct LivePanels {
    pub cards: String,
    pub chart: String,
    pub queues: String,
    pub errors: String,
    pub breakers: String,
    pub events: String,
    pub warnings: String,
}

impl LivePanels {
    pub fn render(t: &Telemetry) -> Self {
        let render = |f: &dyn Fn() -> AnyView| Owner::new().with(|| f().to_html());
        let t = t.clone();
        LivePanels {
            cards: render(&|| view! { <Cards t=t.clone()/> }.into_any()),
            chart: render(&|| {
                view! { <ThroughputChart buckets=t.throughput.clone() live=true/> }.into_any()
            }),
            queues: render(&|| {
                view! { <QueuesTable queues=t.visible_queues() live=true/> }.into_any()
            }),
            errors: render(&|| {
                view! { <ErrorGroups groups=t.errors.clone() now=t.at live=true/> }.into_any()
            }),
            breakers: render(&|| {
                view! { <Breakers breakers=t.runtime.breakers.clone() live=true/> }.into_any()
            }),
            events: render(&|| {
                view! { <EventConsole events=t.events.clone() live=true/> }.into_any()
            }),
            warnings: render(&|| {
                view! { <UntakenWarnings untaken=t.untaken.clone() live=true/> }.into_any()
            }),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "cards": self.cards,
            "chart": self.chart,
            "queues": self.queues,
            "errors": self.errors,
            "breakers": self.breakers,
            "events": self.events,
            "warnings": self.warnings,
        })
    }
}

/// The overview's live panels as `data-live` key → HTML, rendered on the server.
pub fn fragments(t: &Telemetry) -> serde_json::Value {
    LivePanels::render(t).to_json()
}

/// One snapshot's panels, rendered once however many page loads and live streams show
/// them: rendering the overview costs far more than reading the snapshot did.
pub struct OverviewFrame {
    /// The shared snapshot these were rendered from (compared by identity).
    pub(crate) snapshot: Arc<Telemetry>,
    pub panels: LivePanels,
    /// `panels` as the live stream's JSON.
    pub json: Arc<String>,
}

impl OverviewFrame {
    pub(crate) fn render(snapshot: Arc<Telemetry>, with_events: Telemetry) -> Self {
        let panels = LivePanels::render(&with_events);
        let json = Arc::new(panels.to_json().to_string());
        OverviewFrame {
            snapshot,
            panels,
            json,
        }
    }
}

/// A rendered tick, shared by every SSE subscriber.
pub type Frame = Option<Arc<String>>;

/// The ticker: while anyone listens, compute one snapshot per tick and render it once.
/// It holds the sender weakly and stops when the router that owns it is dropped.
pub fn spawn_ticker(console: Console, frames: &Arc<watch::Sender<Frame>>) {
    // Never spin: the live stream needs no more than a few pushes per second.
    let tick = console.options().tick.max(Duration::from_millis(250));
    let frames = Arc::downgrade(frames);
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            interval.tick().await;
            let Some(frames) = frames.upgrade() else {
                break;
            };
            if frames.receiver_count() == 0 {
                continue;
            }
            // The same snapshot and rendering that page loads use: a tick is read once.
            match console.overview().await {
                Ok(frame) => {
                    frames.send_replace(Some(frame.json.clone()));
                }
                Err(e) => tracing::warn!(error = %e, "live telemetry tick failed"),
            }
        }
    });
}

#[derive(Clone)]
pub struct LiveState {
    pub frames: Arc<watch::Sender<Frame>>,
}

pub async fn stream(
    State(live): State<LiveState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = live.frames.subscribe();
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        loop {
            if rx.changed().await.is_err() {
                return None;
            }
            let frame = rx.borrow_and_update().clone();
            if let Some(json) = frame {
                let event = Event::default().event("tick").data(json.as_str());
                return Some((Ok(event), rx));
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

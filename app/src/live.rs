//! Live refresh: one telemetry snapshot per tick, rendered once into HTML fragments by the
//! same components the overview page uses, and pushed to every open browser over SSE.

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
    Breakers, Cards, ErrorGroups, EventConsole, QueuesTable, ThroughputChart,
};
use crate::state::Console;
use crate::telemetry_view::Telemetry;

/// The overview's live panels as `data-live` key → HTML, rendered on the server.
pub fn fragments(t: &Telemetry) -> serde_json::Value {
    let render = |f: &dyn Fn() -> AnyView| Owner::new().with(|| f().to_html());
    let t = t.clone();
    serde_json::json!({
        "cards": render(&|| view! { <Cards t=t.clone()/> }.into_any()),
        "chart": render(&|| view! { <ThroughputChart buckets=t.throughput.clone() live=true/> }.into_any()),
        "queues": render(&|| view! { <QueuesTable queues=t.queues.clone() live=true/> }.into_any()),
        "errors": render(&|| view! { <ErrorGroups groups=t.errors.clone() now=t.at live=true/> }.into_any()),
        "breakers": render(&|| view! { <Breakers breakers=t.runtime.breakers.clone() live=true/> }.into_any()),
        "events": render(&|| view! { <EventConsole events=t.events.clone() live=true/> }.into_any()),
    })
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
            match console.publish_telemetry().await {
                Ok(t) => {
                    let json = fragments(&t).to_string();
                    frames.send_replace(Some(Arc::new(json)));
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

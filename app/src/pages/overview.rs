use leptos::prelude::*;

use crate::components::layout::{ErrorBox, Layout};
use crate::components::telemetry::{
    Breakers, Cards, ErrorGroups, EventConsole, QueuesTable, ThroughputChart,
};
use crate::state::Console;
use crate::telemetry_view::Telemetry;

#[component]
pub fn OverviewPage() -> impl IntoView {
    let console = expect_context::<Console>();
    Suspend::new(async move {
        let body = match console.telemetry().await {
            Ok(t) => view! { <Overview t=(*t).clone()/> }.into_any(),
            Err(e) => {
                view! { <ErrorBox message=format!("Cannot read telemetry: {e}")/> }.into_any()
            }
        };
        view! { <Layout title="Overview".into()>{body}</Layout> }
    })
}

/// The whole overview for one snapshot; every panel is also pushed live on its own.
#[component]
pub fn Overview(t: Telemetry) -> impl IntoView {
    let now = t.at;
    view! {
        <Cards t=t.clone()/>
        <div class="grid-2">
            <section class="panel wide">
                <ThroughputChart buckets=t.throughput.clone() live=true/>
            </section>
            <section class="panel">
                <h2>"Live events"</h2>
                <EventConsole events=t.events.clone() live=true/>
            </section>
        </div>
        <section class="panel">
            <h2><a href="/queues">"Queues"</a></h2>
            <QueuesTable queues=t.queues.clone() live=true/>
        </section>
        <div class="grid-2">
            <section class="panel">
                <h2><a href="/jobs?source=dlq">"Top dead-letter errors"</a></h2>
                <ErrorGroups groups=t.errors.clone() now=now live=true/>
            </section>
            <section class="panel">
                <h2>"Circuit breakers"</h2>
                <Breakers breakers=t.runtime.breakers.clone() live=true/>
            </section>
        </div>
    }
}

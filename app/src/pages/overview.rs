use leptos::prelude::*;
use leptos::tachys::html::InertElement;

use crate::components::layout::{ErrorBox, Layout};
use std::sync::Arc;

use crate::live::{LivePanels, OverviewFrame};
use crate::request::parts;
use crate::state::Console;

#[component]
pub fn OverviewPage() -> impl IntoView {
    let console = expect_context::<Console>();
    // The frame the page cache read for this request, when it did (see `page_cache`).
    let handed = parts().and_then(|p| p.extensions.get::<Arc<OverviewFrame>>().cloned());
    Suspend::new(async move {
        let frame = match handed {
            Some(frame) => Ok(frame),
            None => console.overview().await,
        };
        let body = match frame {
            Ok(frame) => view! { <Overview panels=frame.panels.clone()/> }.into_any(),
            Err(e) => {
                view! { <ErrorBox message=format!("Cannot read telemetry: {e}")/> }.into_any()
            }
        };
        view! { <Layout title="Overview".into()>{body}</Layout> }
    })
}

/// The whole overview around its live panels, which come rendered (by their components,
/// once per snapshot: see `Console::overview`) and are embedded as they are.
#[component]
pub fn Overview(panels: LivePanels) -> impl IntoView {
    let rendered = InertElement::new;
    view! {
        {rendered(panels.warnings)}
        {rendered(panels.cards)}
        <div class="grid-2">
            <section class="panel wide">
                {rendered(panels.chart)}
            </section>
            <section class="panel">
                <h2>"Live events"</h2>
                {rendered(panels.events)}
            </section>
        </div>
        <section class="panel">
            <h2><a href="/queues">"Queues"</a></h2>
            {rendered(panels.queues)}
        </section>
        <div class="grid-2">
            <section class="panel">
                <h2><a href="/jobs?source=dlq">"Top dead-letter errors"</a></h2>
                {rendered(panels.errors)}
            </section>
            <section class="panel">
                <h2>"Circuit breakers"</h2>
                {rendered(panels.breakers)}
            </section>
        </div>
    }
}
